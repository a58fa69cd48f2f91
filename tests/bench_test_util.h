/* fuseport tests: helpers shared by the benchmark's test binaries
 * (test_bench.c, test_bench_ndim.c; bench_test_util.c). */
#ifndef FUSEPORT_BENCH_TEST_UTIL_H
#define FUSEPORT_BENCH_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "test_util.h"

#include "bench_core.h"
#include "cli_bench.h"
#include "results.h"

#define CTX fp_env.ctx

/* tmpdir/name, in the binary's own temporary directory (a test keeps up to
 * 32 such paths live). */
const char *tpath(const char *name);
/* The count of a NULL-terminated argv. */
int argc_of(char **argv);
/* Runs cmd(argc, argv) with stderr captured into err (stdout, the tables,
 * into a file beside it). */
int run_captured(int (*cmd)(int, char **), char **argv, char *err, size_t len);
/* fp_bench_parse_args into a scratch cli. */
int parse_only(int argc, char **argv);
/* A spec of the ops and shapes (comma lists), 2 repetitions, no warm-up and
 * the smallest flush. */
void tiny_spec(fp_bench_spec *s, const char *ops, const char *shapes);
/* Fresh results for s on the test context, copy bandwidth 10 GB/s. */
void fresh_results(fp_results *r, const fp_bench_spec *s);
void write_results(fp_results *r, const char *path);
/* Equal apart from what timing changes. */
void assert_same_cell(const fp_cell *a, const fp_cell *b);
/* A rank-2 cell of the given status and median. */
void add_cell(fp_results *r, const char *op, const char *variant, int64_t d0, int64_t d1,
              fp_cell_status status, double median);
/* The first cell (op, variant) of r, or NULL. */
const fp_cell *find_cell(const fp_results *r, const char *op, const char *variant);

/* An on_group hook that writes the results to path and counts the groups. */
typedef struct writer {
  const char *path;
  int groups;
} writer;
fp_status write_json(void *user, fp_results *r);

/* Opens the cpu test context and runs the tests in a private temporary
 * directory; the exit code. */
int bench_tests_run(const char *suite, const struct CMUnitTest *tests, size_t n, int argc,
                    char **argv);

#endif
