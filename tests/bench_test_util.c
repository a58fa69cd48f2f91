#define _POSIX_C_SOURCE 200809L
/* fuseport tests: helpers of the benchmark's test binaries (test_bench.c,
 * test_bench_ndim.c): a private temporary directory, captured commands,
 * tiny sweeps, result files. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench_test_util.h"

static char tmpdir[256];

/* tmpdir/name in a rotating set of buffers (a test keeps up to 32 live). */
const char *tpath(const char *name) {
  static char bufs[32][512];
  static int next;
  char *b = bufs[next++ % 32];
  snprintf(b, 512, "%s/%s", tmpdir, name);
  return b;
}

int argc_of(char **argv) {
  int n = 0;
  while (argv[n] != NULL)
    ++n;
  return n;
}

/* Runs cmd(argc, argv) with stderr captured into err (stdout, the tables,
 * into a file beside it). */
int run_captured(int (*cmd)(int, char **), char **argv, char *err, size_t len) {
  fflush(stderr);
  fflush(stdout);
  int saved = dup(STDERR_FILENO), saved_out = dup(STDOUT_FILENO);
  static char path[600], out_path[600];
  snprintf(path, sizeof path, "%s/stderr.txt", tmpdir);
  snprintf(out_path, sizeof out_path, "%s/stdout.txt", tmpdir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int fd_out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(saved >= 0 && fd >= 0 && saved_out >= 0 && fd_out >= 0);
  dup2(fd, STDERR_FILENO);
  dup2(fd_out, STDOUT_FILENO);
  close(fd);
  close(fd_out);
  int rc = cmd(argc_of(argv), argv);
  fflush(stderr);
  fflush(stdout);
  dup2(saved, STDERR_FILENO);
  dup2(saved_out, STDOUT_FILENO);
  close(saved);
  close(saved_out);
  char *text = NULL;
  FP_ASSERT_OK(fp_read_file(path, &text, NULL));
  snprintf(err, len, "%s", text);
  free(text);
  return rc;
}

int parse_only(int argc, char **argv) {
  fp_bench_cli *cli = malloc(sizeof *cli);
  assert_non_null(cli);
  int rc = fp_bench_parse_args(argc, argv, cli);
  free(cli);
  return rc;
}

void tiny_spec(fp_bench_spec *s, const char *ops, const char *shapes) {
  fp_bench_spec_init(s);
  assert_true(fp_cli_parse_ops(ops, s->ops, FP_BENCH_MAX_OPS, &s->n_ops));
  assert_true(
      fp_cli_parse_shape_list("--shapes", shapes, s->shapes, FP_BENCH_MAX_SHAPES, &s->n_shapes));
  s->reps = 2;
  s->warmup_ms = 0;
  /* the smallest flush the rule allows: a CPU's reported last-level cache
   * can be hundreds of MiB, whose flush would dominate every cell */
  s->flush_bytes = 8u << 20;
}

void fresh_results(fp_results *r, const fp_bench_spec *s) {
  fp_results_init(r);
  FP_ASSERT_OK(fp_bench_meta_init(CTX, s, r));
  r->meta.copy_gbps = 10.0; /* any value: bw_frac = gbps / 10 */
}

void write_results(fp_results *r, const char *path) {
  char *text = NULL;
  FP_ASSERT_OK(fp_results_to_json(r, &text));
  FP_ASSERT_OK(fp_write_file_atomic(path, text, strlen(text)));
  free(text);
}

/* Equal apart from what timing changes. */
void assert_same_cell(const fp_cell *a, const fp_cell *b) {
  assert_string_equal(a->op, b->op);
  assert_string_equal(a->variant, b->variant);
  assert_string_equal(a->params, b->params);
  assert_string_equal(a->backend, b->backend);
  assert_true(fp_shape_equal(&a->shape, &b->shape));
  assert_int_equal(a->status, b->status);
  assert_int_equal(a->ok, b->ok);
  const double x[] = {a->kernels,         a->library_calls, a->bytes,       a->flops,
                      a->footprint_bytes, a->peak_bytes,    a->max_abs_err, a->rel_l2_err};
  const double y[] = {b->kernels,         b->library_calls, b->bytes,       b->flops,
                      b->footprint_bytes, b->peak_bytes,    b->max_abs_err, b->rel_l2_err};
  for (size_t k = 0; k < sizeof x / sizeof x[0]; ++k) {
    if (isnan(x[k]) && isnan(y[k]))
      continue;
    if (x[k] != y[k]) {
      char shape[128];
      fp_shape_format(&a->shape, shape, sizeof shape);
      fail_msg("cell %s %s %s: field %zu differs: %.17g vs %.17g", a->op, a->variant, shape, k,
               x[k], y[k]);
    }
  }
}

fp_status write_json(void *user, fp_results *r) {
  writer *w = user;
  w->groups++;
  char *text = NULL;
  fp_status st = fp_results_to_json(r, &text);
  if (st == FP_OK)
    st = fp_write_file_atomic(w->path, text, strlen(text));
  free(text);
  return st;
}

void add_cell(fp_results *r, const char *op, const char *variant, int64_t d0, int64_t d1,
              fp_cell_status status, double median) {
  fp_cell c;
  fp_cell_init(&c);
  snprintf(c.op, sizeof c.op, "%s", op);
  snprintf(c.variant, sizeof c.variant, "%s", variant);
  snprintf(c.backend, sizeof c.backend, "cpu");
  c.shape = fp_shape_2d(d0, d1);
  c.status = status;
  c.ok = status == FP_CELL_OK;
  c.median_us = median;
  FP_ASSERT_OK(fp_results_add(r, &c));
}

static int make_tmpdir(void **state) {
  (void)state;
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/fp_bench_test.XXXXXX", base != NULL ? base : "/tmp");
  return mkdtemp(tmpdir) != NULL ? 0 : -1;
}

static int remove_tmpdir(void **state) {
  (void)state;
  char cmd[600];
  /* our own directory only: made by mkdtemp above */
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

/* The first cell (op, variant) of r, or NULL. */
const fp_cell *find_cell(const fp_results *r, const char *op, const char *variant) {
  for (int k = 0; k < r->n_cells; ++k)
    if (strcmp(r->cells[k].op, op) == 0 && strcmp(r->cells[k].variant, variant) == 0)
      return &r->cells[k];
  return NULL;
}

int bench_tests_run(const char *suite, const struct CMUnitTest *tests, size_t n, int argc,
                    char **argv) {
  int rc = fp_test_env_open(argc, argv, suite);
  if (rc != 0)
    return rc;
  if (fp_env.kind != FP_BACKEND_CPU) {
    fprintf(stderr, "%s runs on the cpu backend only\n", suite);
    fp_test_env_close();
    return 2;
  }
  /* FP_TEST_FILTER=test_ndim* runs the matching tests only (while working on them) */
  if (getenv("FP_TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("FP_TEST_FILTER"));
  int failures = _cmocka_run_group_tests(suite, tests, n, make_tmpdir, remove_tmpdir);
  int code = fp_test_exit_code(failures);
  fp_test_env_close();
  return code;
}
