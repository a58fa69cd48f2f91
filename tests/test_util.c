/* fuseport tests: the backend and seed of a test run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_util.h"

fp_test_env fp_env;

int fp_test_env_open(int argc, char **argv, const char *suite) {
  memset(&fp_env, 0, sizeof fp_env);
  const char *name = argc > 1 ? argv[1] : "cpu";
  if (fp_backend_parse(name, &fp_env.kind) != FP_OK) {
    fprintf(stderr, "%s: %s\n", suite, fp_last_error());
    return 2;
  }
  const char *seed_env = getenv("FUSEPORT_TEST_SEED");
  fp_env.seed = seed_env != NULL ? strtoull(seed_env, NULL, 10)
                                 : ((uint64_t)time(NULL) * 2654435761u) ^ (uint64_t)clock();
  printf("%s: backend %s, seed %llu (FUSEPORT_TEST_SEED=%llu reproduces)\n", suite, name,
         (unsigned long long)fp_env.seed, (unsigned long long)fp_env.seed);
  if (!fp_backend_compiled(fp_env.kind)) {
    snprintf(fp_env.why, sizeof fp_env.why, "the %s backend is not compiled into this build", name);
    return 0;
  }
  /* On a machine with several OpenCL platforms (PoCL beside a GPU driver),
   * FUSEPORT_OPENCL_PLATFORM picks one by name substring. */
  const char *platform =
      fp_env.kind == FP_BACKEND_OPENCL ? getenv("FUSEPORT_OPENCL_PLATFORM") : NULL;
  if (fp_backend_device_count(fp_env.kind, platform) == 0) {
    snprintf(fp_env.why, sizeof fp_env.why, "no %s device on this machine", name);
    return 0;
  }
  fp_context_options opts;
  fp_context_options_init(&opts);
  opts.backend = fp_env.kind;
  opts.platform = platform;
  if (fp_context_create(&opts, &fp_env.ctx) != FP_OK) {
    /* a device is present but will not open: that is a failure, not a skip */
    fprintf(stderr, "%s: cannot open the %s device: %s\n", suite, name, fp_last_error());
    return 1;
  }
  printf("%s: device %s [%s]\n", suite, fp_context_device(fp_env.ctx)->name,
         fp_context_device(fp_env.ctx)->platform);
  return 0;
}

void fp_test_env_close(void) {
  fp_context_destroy(fp_env.ctx);
  fp_env.ctx = NULL;
}

int fp_test_exit_code(int failures) {
  if (failures != 0)
    return failures;
  return fp_env.ctx == NULL ? 77 : 0;
}

int fp_run_suite(const struct CMUnitTest *common, size_t n_common, const struct CMUnitTest *only,
                 size_t n_only, fp_backend_kind only_on) {
  const bool with_only = fp_env.kind == only_on;
  const size_t n = n_common + (with_only ? n_only : 0);
  struct CMUnitTest *tests = malloc(sizeof *tests * (n > 0 ? n : 1));
  if (tests == NULL) {
    fprintf(stderr, "fp_run_suite: out of host memory\n");
    return 1;
  }
  memcpy(tests, common, sizeof *tests * n_common);
  if (with_only)
    memcpy(tests + n_common, only, sizeof *tests * n_only);
  else if (n_only > 0)
    printf("%s: %zu test(s) of the %s backend only are not part of this suite\n",
           fp_backend_name(fp_env.kind), n_only, fp_backend_name(only_on));
  /* cmocka's macro takes the array's length from sizeof; here it is n */
  const int failures = _cmocka_run_group_tests(fp_backend_name(fp_env.kind), tests, n, NULL, NULL);
  free(tests);
  return failures;
}

uint64_t fp_test_next_seed(void) {
  fp_env.seed = fp_env.seed * 6364136223846793005ull + 1442695040888963407ull;
  return fp_env.seed >> 11;
}
