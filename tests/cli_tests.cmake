# The benchmark's tests: the sweep engine, the result files and the bench,
# compare, merge and report subcommands, run in-process on the CPU backend.
# They assert structure and logic, never speed (tiny shapes, --reps 2).
fp_add_test_binary(test_bench test_bench.c test_util.c)
target_link_libraries(test_bench PRIVATE fuseport_cli)
add_test(NAME bench COMMAND test_bench cpu)
set_tests_properties(bench PROPERTIES LABELS cpu TIMEOUT 600)
