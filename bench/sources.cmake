# The fuseport command's subcommands, as a static library that the
# executable (bench/main.c) and the CLI tests link.
#   cli_common.c, cli_check.c   list, check and the shared option helpers
#   bench_spec.c, bench_measure.c, bench_core.c   the sweep engine (backend-agnostic
#                               library API): specs and plans; timing rules, flush,
#                               copy bandwidth, peak FLOP/s and meta; the run
#   results.c, grids.c          cells, JSON (cJSON) / CSV files, atomic writes; the
#                               grid and list views
#   cli_bench.c, cli_resume.c, cli_table.c, cli_compare.c, cli_merge.c, cli_report.c
#                               the benchmark subcommands (cli_resume.c: bench
#                               --resume's checks; cli_table.c: bench's text tables)
find_package(cJSON CONFIG REQUIRED)

add_library(fuseport_cli STATIC
  bench/cli_common.c
  bench/cli_check.c
  bench/bench_spec.c
  bench/bench_measure.c
  bench/bench_core.c
  bench/results.c
  bench/grids.c
  bench/cli_bench.c
  bench/cli_resume.c
  bench/cli_table.c
  bench/cli_compare.c
  bench/cli_merge.c
  bench/cli_report.c)
target_include_directories(fuseport_cli PUBLIC ${CMAKE_SOURCE_DIR}/bench ${CJSON_INCLUDE_DIRS})
target_link_libraries(fuseport_cli PUBLIC fuseport_lib cjson)
