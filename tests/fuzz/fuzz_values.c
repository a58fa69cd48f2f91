/* libFuzzer harness: the command line's value parsers on one text -- the
 * shape lists of --shapes, the integer lists of --dim0/--dim1, the integers
 * and reals of --reps, --seed, --rep-ms..., FUSEPORT_PEAK_TFLOPS, and every
 * op parameter's --param value ("NAME=VALUE": that parameter of every op that
 * has it; a bare VALUE: every parameter of every op).
 *
 * Properties beyond "no crash, no UB, no leak": what a parser accepts is in
 * the range it promises, and prints back (as the results file and the error
 * messages print it) to text that parses to the same value. */
#include "fuzz_util.h"

#include <math.h>

#include "bench_core.h"
#include "cli.h"

static int64_t dims[FP_BENCH_MAX_SHAPES];
static fp_shape shapes[FP_BENCH_MAX_SHAPES], again[FP_BENCH_MAX_SHAPES];

static void shape_list(const char *text) {
  int n = 0;
  if (!fp_cli_parse_shape_list("--shapes", text, shapes, FP_BENCH_MAX_SHAPES, &n))
    return;
  FZ_CHECK(n >= 1 && n <= FP_BENCH_MAX_SHAPES);
  /* formatted as fp_shape_format does, joined with commas, parsed again */
  size_t cap = (size_t)n * (FP_SHAPE_MAX_DIMS * 21 + 1) + 1, used = 0;
  char *joined = malloc(cap);
  FZ_CHECK(joined != NULL);
  joined[0] = '\0';
  for (int k = 0; k < n; ++k) {
    FZ_CHECK(shapes[k].n >= 2 && shapes[k].n <= FP_SHAPE_MAX_DIMS);
    for (int d = 0; d < shapes[k].n; ++d)
      FZ_CHECK(shapes[k].d[d] >= 1 && shapes[k].d[d] <= FP_SHAPE_MAX_DIM);
    char one[FP_SHAPE_MAX_DIMS * 21];
    fp_shape_format(&shapes[k], one, sizeof one);
    used += (size_t)snprintf(joined + used, cap - used, "%s%s", k ? "," : "", one);
  }
  int m = 0;
  FZ_CHECK(fp_cli_parse_shape_list("--shapes", joined, again, FP_BENCH_MAX_SHAPES, &m));
  FZ_CHECK(m == n);
  for (int k = 0; k < n; ++k)
    FZ_CHECK(fp_shape_equal(&shapes[k], &again[k]));
  free(joined);
}

static void dim_list(const char *text) {
  int n = 0;
  if (!fp_cli_parse_dims("--dim0", text, dims, FP_BENCH_MAX_SHAPES, &n))
    return;
  FZ_CHECK(n >= 1 && n <= FP_BENCH_MAX_SHAPES);
  for (int k = 0; k < n; ++k)
    FZ_CHECK(dims[k] >= 1 && dims[k] <= FP_SHAPE_MAX_DIM);
}

static void numbers(const char *text) {
  static const int64_t bounds[][2] = {
      {INT64_MIN, INT64_MAX}, {1, 1000000}, {0, (int64_t)((1ull << 53) - 1)}, {0, INT64_MAX / 2}};
  for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; ++k) {
    int64_t v = 0;
    if (!fp_cli_parse_i64("--reps", text, bounds[k][0], bounds[k][1], &v))
      continue;
    FZ_CHECK(v >= bounds[k][0] && v <= bounds[k][1]);
    char back[32];
    snprintf(back, sizeof back, "%lld", (long long)v);
    int64_t w = 0;
    FZ_CHECK(fp_cli_parse_i64("--reps", back, bounds[k][0], bounds[k][1], &w) && w == v);
  }
  double x = 0;
  if (fp_cli_parse_f64("--rep-ms", text, 1e-3, 3.6e6, &x))
    FZ_CHECK(x >= 1e-3 && x <= 3.6e6);
  if (fp_cli_parse_f64("--warmup-ms", text, 0, 3.6e6, &x))
    FZ_CHECK(x >= 0 && x <= 3.6e6);
  double peaks[FP_DTYPE_COUNT];
  if (fp_bench_parse_peaks(text, peaks) == FP_OK)
    for (int k = 0; k < FP_DTYPE_COUNT; ++k)
      FZ_CHECK(isnan(peaks[k]) || (peaks[k] > 0 && isfinite(peaks[k])));
}

/* One parameter of one op: set, described as the results file's params
 * text, and that text set again gives the same value. */
static void one_param(const fp_op *op, int k, const char *value) {
  fp_problem p;
  fp_problem_init(&p, op);
  if (fp_problem_set(&p, op->params[k].name, value) != FP_OK)
    return;
  (void)fp_problem_validate(&p);
  char text[1024];
  fp_problem_describe(&p, text, sizeof text);
  const char *item = strstr(text, op->params[k].name);
  while (item != NULL &&
         !((item == text || item[-1] == ' ') && item[strlen(op->params[k].name)] == '='))
    item = strstr(item + 1, op->params[k].name);
  FZ_CHECK(item != NULL);
  char back[256];
  const char *v = item + strlen(op->params[k].name) + 1;
  snprintf(back, sizeof back, "%.*s", (int)strcspn(v, " "), v);
  fp_problem q;
  fp_problem_init(&q, op);
  FZ_CHECK(fp_problem_set(&q, op->params[k].name, back) == FP_OK);
  FZ_CHECK(q.v[k] == p.v[k]);
}

static void params(const char *text) {
  const char *eq = strchr(text, '=');
  char name[64] = "";
  if (eq != NULL && (size_t)(eq - text) < sizeof name)
    snprintf(name, sizeof name, "%.*s", (int)(eq - text), text);
  for (int o = 0; o < fp_op_count(); ++o) {
    const fp_op *op = fp_op_at(o);
    for (int k = 0; k < op->n_params; ++k) {
      if (name[0] != '\0' && strcmp(name, op->params[k].name) == 0)
        one_param(op, k, eq + 1);
      else if (name[0] == '\0')
        one_param(op, k, text);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fz_string(data, size);
  shape_list(text);
  dim_list(text);
  numbers(text);
  params(text);
  free(text);
  return 0;
}
