/* fuseport tests: opening the backend a test binary was asked for. */
#ifndef FUSEPORT_TEST_UTIL_H
#define FUSEPORT_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backend.h"
#include "op.h"

/* The backend named on the command line ("cpu" when none). */
typedef struct fp_test_env {
  fp_backend_kind kind;
  fp_context *ctx; /* NULL: no device; every test skips */
  char why[512];   /* why there is no context */
  uint64_t seed;   /* fresh per run, printed */
} fp_test_env;

extern fp_test_env fp_env;

/* Parses argv[1], opens the context, picks and prints a seed. Returns 0, or
 * 2 on a bad argument. */
int fp_test_env_open(int argc, char **argv, const char *suite);
void fp_test_env_close(void);
/* Exit code of a run: cmocka's failure count, or 77 when there was no device
 * (every test skipped), so ctest shows "Skipped" rather than a pass. */
int fp_test_exit_code(int failures);

/* Runs the suite named after the backend: the common tests, and the tests of
 * one backend only when that is the backend under test (elsewhere they are
 * not part of the suite: a cmocka skip inside a passing suite would reach
 * ctest as a pass). Returns cmocka's failure count. */
int fp_run_suite(const struct CMUnitTest *common, size_t n_common, const struct CMUnitTest *only,
                 size_t n_only, fp_backend_kind only_on);

/* Skips the calling test (visibly) when the backend has no device: then
 * every test skips and the run exits 77, which ctest shows as skipped. A
 * test never skips otherwise. */
#define FP_REQUIRE_DEVICE()                                                                        \
  do {                                                                                             \
    if (fp_env.ctx == NULL) {                                                                      \
      print_message("skipped: %s\n", fp_env.why);                                                  \
      skip();                                                                                      \
    }                                                                                              \
  } while (0)

/* Asserts st == FP_OK and prints the library's message otherwise. */
#define FP_ASSERT_OK(expr)                                                                         \
  do {                                                                                             \
    fp_status fp_assert_st_ = (expr);                                                              \
    if (fp_assert_st_ != FP_OK)                                                                    \
      fail_msg("%s -> %s: %s", #expr, fp_status_name(fp_assert_st_), fp_last_error());             \
  } while (0)

/* Asserts a specific failure status and that its message mentions `needle`. */
#define FP_ASSERT_ERR(expr, status, needle)                                                        \
  do {                                                                                             \
    fp_status fp_assert_st_ = (expr);                                                              \
    if (fp_assert_st_ != (status))                                                                 \
      fail_msg("%s -> %s (wanted %s): %s", #expr, fp_status_name(fp_assert_st_),                   \
               fp_status_name(status), fp_last_error());                                           \
    if (strstr(fp_last_error(), (needle)) == NULL)                                                 \
      fail_msg("%s: message '%s' does not mention '%s'", #expr, fp_last_error(), (needle));        \
  } while (0)

uint64_t fp_test_next_seed(void);

#endif
