# The benchmark's tests: the sweep engine, the result files and the bench,
# compare, merge and report subcommands, run in-process on the CPU backend.
# They assert structure and logic, never speed (tiny shapes, --reps 2).
#   test_bench       the row ops' 2-D sweeps: parsing, timing rules, resume,
#                    signals, shards, compare, files, report
#   test_bench_ndim  shapes of any rank (the GEMMs), unsupported cells, library
#                    calls, the roofline, and their files, merge and views
fp_add_test_binary(test_bench test_bench.c bench_test_util.c test_util.c)
target_link_libraries(test_bench PRIVATE fuseport_cli)
add_test(NAME bench COMMAND test_bench cpu)
fp_add_test_binary(test_bench_ndim test_bench_ndim.c bench_test_util.c test_util.c)
target_link_libraries(test_bench_ndim PRIVATE fuseport_cli)
add_test(NAME bench_ndim COMMAND test_bench_ndim cpu)
set_tests_properties(bench bench_ndim PROPERTIES LABELS cpu TIMEOUT 600)
