# The benchmark's tests: the sweep engine, the result files and the bench,
# compare, merge and report subcommands, run in-process on the CPU backend.
# They assert structure and logic, never speed (tiny shapes, --reps 2).
#   test_bench       the row ops' 2-D sweeps: parsing, timing rules, the sweep,
#                    out of memory
#   test_bench_files their files: resume, signals, shards, compare, files, report
#   test_bench_ndim  shapes of any rank (the GEMMs), unsupported cells, library
#                    calls, the roofline, and their files, merge and views
#   test_resume      a process killed inside a group, and --resume (below)
fp_add_test_binary(test_bench test_bench.c bench_test_util.c test_util.c)
target_link_libraries(test_bench PRIVATE fuseport_cli)
add_test(NAME bench COMMAND test_bench cpu)
fp_add_test_binary(test_bench_files test_bench_files.c bench_test_util.c test_util.c)
target_link_libraries(test_bench_files PRIVATE fuseport_cli)
add_test(NAME bench_files COMMAND test_bench_files cpu)
fp_add_test_binary(test_bench_ndim test_bench_ndim.c bench_test_util.c test_util.c)
target_link_libraries(test_bench_ndim PRIVATE fuseport_cli)
add_test(NAME bench_ndim COMMAND test_bench_ndim cpu)
set_tests_properties(bench bench_files bench_ndim PROPERTIES LABELS cpu TIMEOUT 600)
# test_resume: a sweep whose process is killed inside a group (SIGKILL, as a
# scheduler preempts a job), then --resume: it runs the fuseport command
# itself, so that the kill is real.
fp_add_test_binary(test_resume test_resume.c bench_test_util.c test_util.c)
target_link_libraries(test_resume PRIVATE fuseport_cli)
target_compile_definitions(test_resume PRIVATE FP_FUSEPORT_EXE="$<TARGET_FILE:fuseport>")
add_dependencies(test_resume fuseport)
add_test(NAME bench_resume COMMAND test_resume cpu)
set_tests_properties(bench_resume PROPERTIES LABELS cpu TIMEOUT 600)
