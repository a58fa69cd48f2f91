# The fuseport command's subcommands, as a static library that the
# executable (bench/main.c) and the CLI tests link.
add_library(fuseport_cli STATIC
  bench/cli_common.c
  bench/cli_check.c)
target_include_directories(fuseport_cli PUBLIC ${CMAKE_SOURCE_DIR}/bench)
target_link_libraries(fuseport_cli PUBLIC fuseport_lib)
