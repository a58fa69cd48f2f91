#define _POSIX_C_SOURCE 200809L
/* fuseport tests: the benchmark on shapes of any rank -- the GEMMs' M x N x K
 * beside the row ops' 2-D grids -- unsupported cells, library calls checked
 * against the cost model, the roofline with stated and measured peaks, the
 * files, resume, merge, compare and report of such sweeps. In-process on the
 * CPU backend, tiny shapes (matmul ops at 16x24x32), two repetitions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bench_test_util.h"
#include "recipe.h"

/* Parses into a kept cli (run_captured takes a plain command). */
static fp_bench_cli *kept_cli;

static int parse_keep(int argc, char **argv) { return fp_bench_parse_args(argc, argv, kept_cli); }

static void test_ndim_parse(void **state) {
  (void)state;
  static const struct {
    const char *args[8];
    const char *needle;
  } cases[] = {
      {{"--shapes", "1x2x3x4x5x6x7x8"}, "--shapes '1x2x3x4x5x6x7x8'"},
      {{"--shapes", "16x24x"}, "--shapes '16x24x'"},
      {{"--shapes", "16"}, "--shapes '16'"},
      {{"--shapes", "16x0x32"}, "--shapes '16x0x32'"},
      {{"--shapes", "16x24x32,16x24x32"}, "16x24x32 is listed twice"},
      {{"--op", "softmax", "--shapes", "16x24x32"}, "no selected op takes shapes"},
      {{"--op", "matmul_add", "--dim0", "16", "--dim1", "24"}, "matmul_add (MxNxK)"},
      {{"--op", "matmul_add", "--param", "K=5"}, "shape dimension of op matmul_add"},
      {{"--op", "softmax", "--variants", "vendor"}, "no selected op has a variant 'vendor'"},
      {{"--op", "matmul_add", "--param", "dtype=f64"}, "f64"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    char *argv[10] = {"bench"};
    int n = 1;
    for (; n < 9 && cases[k].args[n - 1] != NULL; ++n)
      argv[n] = (char *)cases[k].args[n - 1];
    argv[n] = NULL;
    char err[4096];
    int rc = run_captured(parse_only, argv, err, sizeof err);
    if (rc != FP_EXIT_USAGE || strstr(err, cases[k].needle) == NULL)
      fail_msg("case %zu (%s %s): exit %d, message '%s', wanted 2 and '%s'", k, argv[1], argv[2],
               rc, err, cases[k].needle);
  }
  /* a malformed FUSEPORT_PEAK_TFLOPS is bad usage, refused before any device */
  char err[4096];
  char *plain[] = {"bench", "--op", "softmax", NULL};
  assert_int_equal(setenv("FUSEPORT_PEAK_TFLOPS", "f16:fast", 1), 0);
  assert_int_equal(run_captured(parse_only, plain, err, sizeof err), FP_EXIT_USAGE);
  assert_non_null(strstr(err, "FUSEPORT_PEAK_TFLOPS='f16:fast'"));
  assert_int_equal(unsetenv("FUSEPORT_PEAK_TFLOPS"), 0);
  double peaks[FP_DTYPE_COUNT];
  FP_ASSERT_OK(fp_bench_parse_peaks("f16:989.4,bf16:989.4,f32:66.9", peaks));
  assert_true(peaks[FP_F16] == 989.4 && peaks[FP_BF16] == 989.4 && peaks[FP_F32] == 66.9);
  assert_true(isnan(peaks[FP_I32]));
  FP_ASSERT_OK(fp_bench_parse_peaks("", peaks));
  assert_true(isnan(peaks[FP_F16]));
  static const char *const bad[] = {"f16",         "f16:0",  "f16:-1", "i32:5",
                                    "f16:1,f16:2", "f16:1,", ":3",     "f16:1x"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k)
    if (fp_bench_parse_peaks(bad[k], peaks) != FP_ERR_INVALID_ARGUMENT)
      fail_msg("FUSEPORT_PEAK_TFLOPS='%s' was accepted", bad[k]);
  /* the options and the cells refuse shapes outside 2..7 integer dims */
  fp_bench_spec s;
  tiny_spec(&s, "softmax", "4x4");
  cJSON *o = fp_bench_spec_to_json(&s, true);
  assert_non_null(o);
  cJSON *shapes = cJSON_GetObjectItemCaseSensitive(o, "shapes");
  const double eight[] = {1, 2, 3, 4, 5, 6, 7, 8};
  cJSON_AddItemToArray(shapes, cJSON_CreateDoubleArray(eight, 8));
  fp_bench_spec back;
  FP_ASSERT_ERR(fp_bench_spec_from_json(o, &back), FP_ERR_INVALID_ARGUMENT, "options.shapes");
  cJSON_Delete(o);
  fp_results bad_file;
  FP_ASSERT_ERR(fp_results_from_json("{\"meta\": {}, \"cells\": [{\"op\":\"a\",\"variant\":\"b\","
                                     "\"shape\":[16,2.5,3],\"status\":\"ok\"}]}",
                                     "frac", &bad_file),
                FP_ERR_INVALID_ARGUMENT, "shape");
  FP_ASSERT_ERR(fp_results_from_json("{\"meta\": {}, \"cells\": [{\"op\":\"a\",\"variant\":\"b\","
                                     "\"shape\":[1,2,3,4,5,6,7,8],\"status\":\"ok\"}]}",
                                     "eight", &bad_file),
                FP_ERR_INVALID_ARGUMENT, "shape");

  /* the core refuses a spec with an op that has no shape of its rank */
  tiny_spec(&s, "softmax,matmul_add", "8x8");
  FP_ASSERT_ERR(fp_bench_spec_validate(&s), FP_ERR_INVALID_ARGUMENT,
                "op matmul_add takes shapes of 3 dimensions (MxNxK)");
  fp_bench_plan plan;
  FP_ASSERT_ERR(fp_bench_plan_build(&s, &plan), FP_ERR_INVALID_ARGUMENT, "matmul_add");

  /* --help names every CSV column */
  char *help[] = {"bench", "--help", NULL};
  assert_int_equal(run_captured(parse_only, help, err, sizeof err), -1);
  char *usage = NULL;
  FP_ASSERT_OK(fp_read_file(tpath("stdout.txt"), &usage, NULL));
  char columns[] = FP_RESULTS_CSV_HEADER;
  char *save = NULL;
  for (char *col = strtok_r(columns, ",", &save); col != NULL; col = strtok_r(NULL, ",", &save)) {
    char word[64];
    snprintf(word, sizeof word, " %s", col);
    if (strstr(usage, word) == NULL)
      fail_msg("fuseport bench --help does not name the CSV column %s", col);
  }
  assert_non_null(strstr(usage, "FUSEPORT_PEAK_TFLOPS"));
  assert_non_null(strstr(usage, "n/a"));
  free(usage);

  /* ranks: each op runs the shapes of its rank; one with none is left out */
  kept_cli = malloc(sizeof *kept_cli);
  assert_non_null(kept_cli);
  char *mixed[] = {"bench",    "--op",           "softmax,matmul_add,matmul_matmul",
                   "--shapes", "64x64,16x24x32", NULL};
  assert_int_equal(run_captured(parse_keep, mixed, err, sizeof err), FP_EXIT_OK);
  assert_int_equal(kept_cli->spec.n_ops, 2);
  assert_string_equal(kept_cli->spec.ops[1]->name, "matmul_add");
  assert_int_equal(kept_cli->spec.n_shapes, 2);
  assert_int_equal(kept_cli->spec.shapes[1].n, 3);
  assert_int_equal(kept_cli->spec.shapes[1].d[2], 32);
  assert_non_null(strstr(err, "left out"));
  assert_non_null(strstr(err, "matmul_matmul (MxNxKxP)"));
  assert_null(strstr(err, "softmax ("));          /* it has its shape */
  assert_int_equal(kept_cli->spec.n_variants, 3); /* matmul_add's vendor too */
  char *rows_only[] = {"bench", "--op", "softmax", NULL};
  assert_int_equal(fp_bench_parse_args(argc_of(rows_only), rows_only, kept_cli), FP_EXIT_OK);
  assert_int_equal(kept_cli->spec.n_variants, 2); /* as before the GEMMs */
  /* --shapes seed: each op's seed list, their union in op order */
  char *seed[] = {"bench", "--shapes", "seed", NULL};
  assert_int_equal(fp_bench_parse_args(argc_of(seed), seed, kept_cli), FP_EXIT_OK);
  const fp_bench_spec *sp = &kept_cli->spec;
  assert_int_equal(sp->n_ops, fp_op_count());
  for (int k = 0; k < 100; ++k)
    assert_int_equal(sp->shapes[k].n, 2); /* the row ops' 10 x 10 grid first */
  for (int k = 0; k < sp->n_shapes; ++k)
    for (int j = 0; j < k; ++j)
      assert_false(fp_shape_equal(&sp->shapes[k], &sp->shapes[j]));
  int gemm_ops = 0;
  for (int o = 0; o < sp->n_ops; ++o) {
    const fp_op *op = sp->ops[o];
    if (op->seed_shapes == NULL)
      continue;
    gemm_ops++;
    const int rank = fp_op_grid_rank(op);
    for (int k = 0; k + rank <= op->n_seed_shapes; k += rank) {
      fp_shape want;
      memset(&want, 0, sizeof want);
      want.n = rank;
      memcpy(want.d, op->seed_shapes + k, sizeof(int64_t) * (size_t)rank);
      bool found = false;
      for (int j = 0; j < sp->n_shapes && !found; ++j)
        found = fp_shape_equal(&sp->shapes[j], &want);
      if (!found)
        fail_msg("op %s: seed shape %d is not in the spec", op->name, k / rank);
    }
  }
  assert_true(gemm_ops >= 2);
  assert_true(sp->n_shapes > 100);
  free(kept_cli);
  kept_cli = NULL;
}

static void set_variants(fp_bench_spec *s, const char *a, const char *b, const char *c) {
  const char *names[3] = {a, b, c};
  s->n_variants = 0;
  for (int k = 0; k < 3; ++k)
    if (names[k] != NULL)
      snprintf(s->variants[s->n_variants++], sizeof s->variants[0], "%s", names[k]);
}

static void test_ndim_sweep(void **state) {
  (void)state;
  fp_bench_spec s;
  tiny_spec(&s, "softmax,matmul_add,matmul_matmul", "8x8,16x24x32,16x8x24x32");
  set_variants(&s, "fused", "unfused", "vendor");
  fp_results r;
  fresh_results(&r, &s);
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, NULL, &sum));
  /* softmax: 1 shape x 2 variants (no vendor); the GEMMs 1 shape x 3 each */
  assert_int_equal(sum.total, 8);
  assert_int_equal(r.n_cells, 8);
  assert_int_equal(sum.count[FP_CELL_OK], 6);
  assert_int_equal(sum.count[FP_CELL_UNSUPPORTED], 2); /* vendor: no cuBLASLt here */
  assert_int_equal(sum.count[FP_CELL_ERROR] + sum.count[FP_CELL_FAIL], 0);
  assert_int_equal(sum.leaked_bytes, 0);
  /* canonical order: op, shape, params, variant */
  assert_string_equal(r.cells[0].op, "softmax");
  assert_int_equal(r.cells[0].shape.n, 2);
  assert_string_equal(r.cells[2].op, "matmul_add");
  assert_string_equal(r.cells[4].variant, "vendor");
  assert_string_equal(r.cells[5].op, "matmul_matmul");
  const fp_cell *mf = find_cell(&r, "matmul_add", "fused");
  assert_int_equal(mf->shape.n, 3);
  assert_true(mf->shape.d[0] == 16 && mf->shape.d[1] == 24 && mf->shape.d[2] == 32);
  assert_non_null(strstr(mf->params, "dtype=f16"));
  const fp_cell *bb = find_cell(&r, "matmul_matmul", "unfused");
  assert_int_equal(bb->shape.n, 4);
  assert_int_equal(bb->shape.d[3], 32);
  /* the unsupported cell: its reason, no numbers, not ok */
  const fp_cell *v = find_cell(&r, "matmul_add", "vendor");
  assert_int_equal(v->status, FP_CELL_UNSUPPORTED);
  assert_false(v->ok);
  assert_true(isnan(v->median_us));
  assert_non_null(strstr(v->message, "unsupported"));
  assert_string_equal(fp_cell_status_name(v->status), "unsupported");
  assert_string_equal(fp_cell_mark(v), "n/a");
  /* library calls, counted by the backend and equal to the cost model's */
  for (int k = 0; k < r.n_cells; ++k) {
    const fp_cell *c = &r.cells[k];
    if (c->status != FP_CELL_OK)
      continue;
    fp_problem p;
    fp_problem_init(&p, fp_op_find(c->op));
    FP_ASSERT_OK(fp_problem_set_grid(&p, c->shape.d, c->shape.n));
    fp_cost cost;
    FP_ASSERT_OK(
        fp_variant_cost(&p, fp_op_variant(p.op, c->variant), fp_context_device(CTX), &cost));
    if (c->library_calls != cost.library_calls || c->kernels != cost.kernels)
      fail_msg("%s %s: %g library calls and %g kernels, the cost model says %d and %d", c->op,
               c->variant, c->library_calls, c->kernels, cost.library_calls, cost.kernels);
    assert_true(c->compile_ms >= 0);
    /* no peak in the meta: the roofline is the bandwidth term alone */
    assert_true(fabs(c->roof_frac - c->bw_frac) <= 1e-5 * c->bw_frac);
  }
  assert_true(find_cell(&r, "matmul_add", "unfused")->library_calls >= 1);
  assert_int_equal(find_cell(&r, "matmul_add", "fused")->library_calls, 0);
  assert_int_equal(find_cell(&r, "softmax", "fused")->library_calls, 0);
  /* the table: a grid for softmax, a list per GEMM, n/a marks */
  FILE *f = tmpfile();
  assert_non_null(f);
  fp_bench_print_table(f, &r);
  rewind(f);
  char text[16384];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  assert_non_null(strstr(text, "== softmax ==\nrelative performance"));
  assert_non_null(strstr(text, "== matmul_add (shape MxNxK) =="));
  assert_non_null(strstr(text, "== matmul_matmul (shape MxNxKxP) =="));
  assert_non_null(strstr(text, "unfused/fused"));
  assert_non_null(strstr(text, "vendor/fused"));
  assert_non_null(strstr(text, "fused TFLOP/s"));
  assert_non_null(strstr(text, "16x24x32"));
  assert_non_null(strstr(text, " n/a "));
  assert_non_null(strstr(text, "n/a: 2 cells"));
  assert_null(strstr(text, "failed cells"));
  fp_results_free(&r);

  /* the command: unsupported cells are not failures (exit 0), and
   * --retry-errors leaves them alone */
  const char *path = tpath("ndim.json");
  char *argv[] = {"bench",    "--backend",   "cpu",        "--op",         "matmul_relu",
                  "--shapes", "16x24x32",    "--variants", "fused,vendor", "--reps",
                  "2",        "--warmup-ms", "0",          "--flush-mib",  "8",
                  "--out",    (char *)path,  NULL};
  char err[4096];
  assert_int_equal(run_captured(fp_cmd_bench, argv, err, sizeof err), FP_EXIT_OK);
  assert_non_null(strstr(err, "0 error, 1 n/a"));
  char *retry[] = {"bench", "--resume", (char *)path, "--retry-errors", NULL};
  assert_int_equal(run_captured(fp_cmd_bench, retry, err, sizeof err), FP_EXIT_OK);
  assert_non_null(strstr(err, "--retry-errors: 0 error cells"));
  assert_non_null(strstr(err, "0 run now"));
  FP_ASSERT_OK(fp_results_read_file(path, &r));
  assert_int_equal(r.n_cells, 2);
  assert_int_equal(r.cells[1].status, FP_CELL_UNSUPPORTED);
  /* the run measured the f16 peak with the CPU backend's GEMM */
  assert_true(r.meta.has_peaks);
  assert_int_equal(r.meta.n_peaks, 1);
  assert_string_equal(r.meta.peaks[0].dtype, "f16");
  assert_true(r.meta.peaks[0].tflops > 0);
  assert_non_null(strstr(r.meta.peaks[0].source, "measured: "));
  assert_non_null(strstr(r.meta.peaks[0].source, "f16"));
  fp_results_free(&r);
}

/* A copy of softmax whose fused variant, when it runs for real, also makes
 * a library call that its cost model does not have. */
static fp_status (*real_softmax_fused)(fp_recipe *rc, const fp_problem *p);

static fp_status extra_call_recipe(fp_recipe *rc, const fp_problem *p) {
  if (rc->ctx != NULL) {
    fp_buffer *a = NULL, *b = NULL, *d = NULL;
    const fp_lib_gemm g = fp_lib_gemm_plain(FP_F32, 1, 1, 1, false);
    fp_status st = fp_buffer_alloc(rc->ctx, 4, &a);
    if (st == FP_OK)
      st = fp_buffer_alloc(rc->ctx, 4, &b);
    if (st == FP_OK)
      st = fp_buffer_alloc(rc->ctx, 4, &d);
    if (st == FP_OK)
      st = fp_library_gemm(rc->ctx, &g, a, b, NULL, d, NULL, NULL);
    if (st == FP_OK)
      st = fp_finish(rc->ctx);
    fp_buffer_free(a);
    fp_buffer_free(b);
    fp_buffer_free(d);
    if (st != FP_OK)
      return st;
  }
  return real_softmax_fused(rc, p);
}

static void test_library_calls_checked(void **state) {
  (void)state;
  fp_op odd = *fp_op_find("softmax");
  real_softmax_fused = fp_op_variant(&odd, "fused")->recipe;
  for (int v = 0; v < odd.n_variants; ++v)
    if (strcmp(odd.variants[v].name, "fused") == 0)
      odd.variants[v].recipe = extra_call_recipe;
  fp_bench_spec s;
  tiny_spec(&s, "softmax", "4x8");
  s.ops[0] = &odd;
  fp_results r;
  fresh_results(&r, &s);
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, NULL, &sum));
  assert_int_equal(r.n_cells, 2);
  const fp_cell *c = find_cell(&r, "softmax", "fused");
  assert_int_equal(c->status, FP_CELL_FAIL);
  assert_false(c->ok);
  assert_true(c->library_calls == 1 && c->kernels == 1);
  assert_true(c->median_us > 0); /* still timed */
  assert_non_null(strstr(c->message, "1 library calls, the cost model says 1 and 0"));
  assert_int_equal(find_cell(&r, "softmax", "unfused")->status, FP_CELL_OK);
  fp_results_free(&r);
}

static void test_roofline(void **state) {
  (void)state;
  /* the formula: max(bytes / copy, flops / peak) / median; a term whose rate
   * is unknown is left out */
  assert_true(fabs(fp_bench_roof_frac(1e9, 0, 1e6, 1.0, NAN) - 1.0) < 1e-12);
  assert_true(fabs(fp_bench_roof_frac(1e9, 1e12, 2e6, 1.0, 1.0) - 0.5) < 1e-12);
  assert_true(fabs(fp_bench_roof_frac(1e9, 4e12, 2e6, 1.0, 1.0) - 2.0) < 1e-12);
  assert_true(fabs(fp_bench_roof_frac(1e9, 1e12, 1e6, NAN, 1.0) - 1.0) < 1e-12);
  assert_true(isnan(fp_bench_roof_frac(1e9, 1e12, 1e6, NAN, NAN)));
  assert_true(isnan(fp_bench_roof_frac(1e9, 1e12, 0, 1.0, 1.0)));
  /* a stated peak wins over the measurement; types not stated are measured */
  fp_bench_spec s;
  tiny_spec(&s, "softmax,matmul_relu", "8x8,16x24x32");
  fp_results r;
  fresh_results(&r, &s);
  assert_int_equal(setenv("FUSEPORT_PEAK_TFLOPS", "f16:1e-6,bf16:7", 1), 0);
  fp_status st = fp_bench_peak_tflops(CTX, &s, &r);
  assert_int_equal(unsetenv("FUSEPORT_PEAK_TFLOPS"), 0);
  FP_ASSERT_OK(st);
  assert_true(r.meta.has_peaks);
  assert_int_equal(r.meta.n_peaks, 2); /* f32 (softmax) and f16 (matmul_relu): not bf16 */
  assert_true(fp_results_peak(&r.meta, "f16") == 1e-6);
  assert_string_equal(r.meta.peaks[1].source, "stated: FUSEPORT_PEAK_TFLOPS");
  assert_true(fp_results_peak(&r.meta, "f32") > 0);
  assert_non_null(strstr(r.meta.peaks[0].source, "measured: fuseport CPU GEMM"));
  assert_true(isnan(fp_results_peak(&r.meta, "bf16")));
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, NULL, &sum));
  assert_int_equal(sum.count[FP_CELL_OK], r.n_cells);
  /* 1e6 FLOP/s: the compute term dominates the GEMM's cells */
  for (int k = 0; k < r.n_cells; ++k) {
    const fp_cell *c = &r.cells[k];
    if (strcmp(c->op, "matmul_relu") != 0)
      continue;
    const double want = (c->flops / 1e6) / (c->median_us * 1e-6);
    /* the median in the cell is rounded to 1 ns */
    if (!(fabs(c->roof_frac - want) <= (1e-5 + 1e-3 / c->median_us) * want))
      fail_msg("%s %s: roof_frac %.9g, wanted %.9g", c->op, c->variant, c->roof_frac, want);
    assert_true(c->roof_frac > c->bw_frac);
  }
  /* softmax: f32's measured peak; whichever term is larger */
  const fp_cell *sm = find_cell(&r, "softmax", "fused");
  const double bw_us = sm->bytes / (10.0 * 1e3);
  const double fl_us = sm->flops / (fp_results_peak(&r.meta, "f32") * 1e6);
  const double want_sm = (bw_us > fl_us ? bw_us : fl_us) / sm->median_us;
  assert_true(fabs(sm->roof_frac - want_sm) <= (1e-5 + 1e-3 / sm->median_us) * want_sm);
  assert_true(sm->roof_frac >= sm->bw_frac * (1 - 1e-5));
  /* the peaks travel in the file, a null one too */
  FP_ASSERT_OK(fp_results_set_peak(&r.meta, "bf16", NAN, "none: test"));
  char *t1 = NULL, *t2 = NULL;
  FP_ASSERT_OK(fp_results_to_json(&r, &t1));
  fp_results back;
  FP_ASSERT_OK(fp_results_from_json(t1, "peaks", &back));
  FP_ASSERT_OK(fp_results_to_json(&back, &t2));
  assert_string_equal(t1, t2);
  assert_int_equal(back.meta.n_peaks, 3);
  assert_true(fp_results_peak(&back.meta, "f16") == 1e-6);
  assert_true(isnan(fp_results_peak(&back.meta, "bf16")));
  assert_string_equal(back.meta.peaks[2].source, "none: test");
  assert_non_null(strstr(t1, "\"peak_tflops\":"));
  free(t1);
  free(t2);
  fp_results_free(&back);
  fp_results_free(&r);
}

static void test_ndim_files(void **state) {
  (void)state;
  fp_results r;
  fp_results_init(&r);
  snprintf(r.meta.backend, sizeof r.meta.backend, "cpu");
  fp_cell c;
  fp_cell_init(&c);
  snprintf(c.op, sizeof c.op, "matmul_add");
  snprintf(c.variant, sizeof c.variant, "fused");
  snprintf(c.params, sizeof c.params, "dtype=bf16 trans_b=true add=full");
  c.shape.n = 3;
  c.shape.d[0] = 4097;
  c.shape.d[1] = 50257;
  c.shape.d[2] = 1024;
  c.status = FP_CELL_OK;
  c.ok = true;
  c.median_us = 123.456;
  c.kernels = 1;
  c.library_calls = 0;
  c.roof_frac = 0.75;
  FP_ASSERT_OK(fp_results_add(&r, &c));
  c.shape.n = 4;
  c.shape.d[3] = 8192;
  snprintf(c.op, sizeof c.op, "matmul_matmul");
  snprintf(c.variant, sizeof c.variant, "vendor");
  c.status = FP_CELL_UNSUPPORTED;
  c.ok = false;
  c.median_us = NAN;
  snprintf(c.message, sizeof c.message, "cost model: unsupported: no vendor library fuses it");
  FP_ASSERT_OK(fp_results_add(&r, &c));
  c.shape.n = 2; /* a 2-D cell of the same op key apart: another identity */
  FP_ASSERT_OK(fp_results_add(&r, &c));
  assert_int_equal(fp_results_find(&r, &r.cells[2]), 2);
  r.meta.running = true;
  r.meta.running_key = r.cells[1];
  char *t1 = NULL, *t2 = NULL;
  FP_ASSERT_OK(fp_results_to_json(&r, &t1));
  assert_non_null(strstr(t1, "\"shape\":[4097,50257,1024]"));
  assert_non_null(strstr(t1, "\"shape\":[4097,50257,1024,8192]"));
  assert_non_null(strstr(t1, "\"status\":\"unsupported\""));
  assert_null(strstr(t1, "peak_tflops")); /* none recorded: none written */
  fp_results back;
  FP_ASSERT_OK(fp_results_from_json(t1, "ndim", &back));
  FP_ASSERT_OK(fp_results_to_json(&back, &t2));
  assert_string_equal(t1, t2);
  assert_int_equal(back.n_cells, 3);
  for (int k = 0; k < 3; ++k) {
    assert_same_cell(&r.cells[k], &back.cells[k]);
    assert_string_equal(r.cells[k].message, back.cells[k].message);
  }
  assert_true(back.cells[0].roof_frac == 0.75);
  assert_true(back.meta.running && back.meta.running_key.shape.n == 4);
  assert_int_equal(back.meta.running_key.shape.d[3], 8192);
  assert_false(back.meta.has_peaks);
  /* CSV: the shape as MxNxK, dim0/dim1 only for rank 2 */
  char *csv = NULL;
  FP_ASSERT_OK(fp_results_to_csv(&back, &csv));
  assert_non_null(strstr(csv, "\nmatmul_add,fused,,dtype=bf16 trans_b=true add=full,"
                              "4097x50257x1024,,,ok,123.456,"));
  assert_non_null(strstr(csv, ",4097x50257x1024x8192,,,unsupported,"));
  assert_non_null(strstr(csv, ",4097x50257,4097,50257,unsupported,"));
  free(csv);
  free(t1);
  free(t2);
  fp_results_free(&back);
  fp_results_free(&r);

  /* a file from before N-dim shapes: no library_calls, roof_frac or
   * peak_tflops; it reads as it was and writes back without new meta */
  static const char old[] =
      "{\"meta\": {\"device\": \"H100\", \"backend\": \"cuda\", \"copy_gbps\": 2950.5,"
      " \"options\": {\"ops\": [\"softmax\"], \"variants\": [\"fused\", \"unfused\"],"
      " \"shapes\": [[128, 256]], \"params\": [], \"seed\": 20230814, \"reps\": null,"
      " \"rep_ms\": 40, \"warmup_ms\": 10, \"min_reps\": 5, \"max_reps\": 10000,"
      " \"sample_elems\": 1048576, \"flush_bytes\": null},"
      " \"running\": {\"op\": \"softmax\", \"params\": \"\", \"shape\": [128, 256]}},\n"
      "\"cells\": [\n"
      "{\"op\":\"softmax\",\"variant\":\"fused\",\"backend\":\"cuda\",\"params\":\"\","
      "\"shape\":[128,256],\"status\":\"ok\",\"median_us\":4.5,\"min_us\":4.4,\"max_us\":5,"
      "\"reps\":100,\"kernels\":1,\"bytes\":262144,\"gbps\":58.25,\"bw_frac\":0.0197,"
      "\"flops\":163840,\"gflops\":36.4,\"footprint_bytes\":0,\"peak_bytes\":262144,"
      "\"compile_ms\":0.5,\"max_abs_err\":1e-8,\"max_rel_err\":1e-6,\"rel_l2_err\":1e-7,"
      "\"ok\":true,\"message\":\"\"}\n]}\n";
  FP_ASSERT_OK(fp_results_from_json(old, "old.json", &r));
  assert_int_equal(r.n_cells, 1);
  assert_int_equal(r.cells[0].shape.n, 2);
  assert_true(r.cells[0].shape.d[0] == 128 && r.cells[0].shape.d[1] == 256);
  assert_true(r.cells[0].median_us == 4.5 && r.cells[0].bw_frac == 0.0197);
  assert_true(isnan(r.cells[0].library_calls) && isnan(r.cells[0].roof_frac));
  assert_true(r.meta.copy_gbps == 2950.5);
  assert_false(r.meta.has_peaks);
  assert_true(r.meta.running && r.meta.running_key.shape.n == 2);
  fp_bench_spec spec;
  FP_ASSERT_OK(fp_bench_spec_from_json(r.meta.options, &spec));
  assert_int_equal(spec.n_shapes, 1);
  assert_true(spec.shapes[0].n == 2 && spec.shapes[0].d[1] == 256);
  cJSON *again = fp_bench_spec_to_json(&spec, true);
  assert_true(cJSON_Compare(again, r.meta.options, true)); /* resumable as it was */
  cJSON_Delete(again);
  FP_ASSERT_OK(fp_results_to_json(&r, &t1));
  assert_null(strstr(t1, "peak_tflops"));
  FP_ASSERT_OK(fp_results_from_json(t1, "again", &back));
  assert_same_cell(&r.cells[0], &back.cells[0]);
  assert_true(back.cells[0].median_us == 4.5);
  free(t1);
  fp_results_free(&back);
  fp_results_free(&r);
}

/* Resume and merge of a sweep of both ranks. */
/* Runs the sweep s (its shard) in-process into path, with a stated f16 peak
 * (the CLI measures one; the core takes the meta it is given). */
static void run_to_file(const fp_bench_spec *s, const char *path, fp_results *r) {
  fresh_results(r, s);
  FP_ASSERT_OK(fp_results_set_peak(&r->meta, "f16", 100.0, "stated: test"));
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, s, r, NULL, &sum));
  assert_false(sum.interrupted);
  write_results(r, path);
}

static void test_ndim_resume_merge(void **state) {
  (void)state;
  /* in-process, not through `fuseport bench`: its copy-bandwidth
   * measurement is the slow part of a CLI run on the CPU backend */
  fp_bench_spec s;
  tiny_spec(&s, "softmax,matmul_relu,matmul_matmul", "8x8,16x24x32,12x8,16x8x24x32");
  set_variants(&s, "fused", "unfused", "vendor");
  snprintf(s.params[0].name, sizeof s.params[0].name, "dtype");
  snprintf(s.params[0].values, sizeof s.params[0].values, "f32,f16");
  s.n_params = 1;
  const char *merged = tpath("mixed_merged.json");
  fp_results whole;
  run_to_file(&s, tpath("mixed_full.json"), &whole);
  /* softmax 2 shapes x 2 variants; the GEMMs 1 shape x 2 dtypes x 3 variants */
  assert_int_equal(whole.n_cells, 4 + 6 + 6);
  int na = 0;
  for (int k = 0; k < whole.n_cells; ++k)
    na += whole.cells[k].status == FP_CELL_UNSUPPORTED;
  assert_int_equal(na, 4);
  assert_int_equal(whole.cells[4].shape.n, 3); /* the ranks interleave only by op */
  /* shards, merged: the unsharded file's cells in its order */
  const char *shard_files[2];
  for (int i = 0; i < 2; ++i) {
    char name[32];
    snprintf(name, sizeof name, "mixed_shard%d.json", i);
    shard_files[i] = tpath(name);
    fp_bench_spec shard = s;
    shard.shard_index = i;
    shard.shard_count = 2;
    fp_results one;
    run_to_file(&shard, shard_files[i], &one);
    assert_true(one.n_cells > 0 && one.n_cells < whole.n_cells);
    fp_results_free(&one);
  }
  char err[4096];
  char *m[] = {"merge", (char *)merged, (char *)shard_files[1], (char *)shard_files[0], NULL};
  assert_int_equal(run_captured(fp_cmd_merge, m, err, sizeof err), FP_EXIT_OK);
  fp_results b;
  FP_ASSERT_OK(fp_results_read_file(merged, &b));
  assert_int_equal(b.n_cells, whole.n_cells);
  for (int k = 0; k < whole.n_cells; ++k)
    assert_same_cell(&whole.cells[k], &b.cells[k]);
  assert_true(cJSON_Compare(whole.meta.options, b.meta.options, true));
  assert_true(b.meta.has_peaks && fp_results_peak(&b.meta, "f16") == 100.0);
  fp_results_free(&b);

  /* interrupted after 3 of 6 groups (one of each rank done), then resumed */
  const char *path = tpath("mixed_resume.json");
  fp_results part;
  fresh_results(&part, &s);
  writer w = {path, 0};
  fp_bench_hooks hooks;
  memset(&hooks, 0, sizeof hooks);
  hooks.on_group = write_json;
  hooks.user = &w;
  hooks.stop_after_groups = 3;
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &part, &hooks, &sum));
  assert_true(sum.interrupted);
  assert_int_equal(part.n_cells, 4 + 3);
  fp_results_free(&part);
  char *cont[] = {"bench", "--resume", (char *)path, "--quiet", NULL};
  assert_int_equal(fp_cmd_bench(argc_of(cont), cont), FP_EXIT_OK);
  FP_ASSERT_OK(fp_results_read_file(path, &b));
  assert_int_equal(b.n_cells, whole.n_cells);
  for (int k = 0; k < whole.n_cells; ++k)
    assert_same_cell(&whole.cells[k], &b.cells[k]);
  fp_results_free(&b);
  fp_results_free(&whole);
}

static void add_ndim_cell(fp_results *r, const char *op, const char *variant, const char *params,
                          int64_t m, int64_t n, int64_t k, fp_cell_status status, double median) {
  fp_cell c;
  fp_cell_init(&c);
  snprintf(c.op, sizeof c.op, "%s", op);
  snprintf(c.variant, sizeof c.variant, "%s", variant);
  snprintf(c.backend, sizeof c.backend, "cuda");
  snprintf(c.params, sizeof c.params, "%s", params);
  c.shape.n = 3;
  c.shape.d[0] = m;
  c.shape.d[1] = n;
  c.shape.d[2] = k;
  c.status = status;
  c.ok = status == FP_CELL_OK;
  c.median_us = median;
  c.gflops = 1000.0;
  c.roof_frac = 0.5;
  FP_ASSERT_OK(fp_results_add(r, &c));
}

static void test_ndim_compare_report(void **state) {
  (void)state;
  fp_results a, b;
  fp_results_init(&a);
  fp_results_init(&b);
  static const char f16[] = "dtype=f16 trans_b=false add=bias";
  static const char bf16[] = "dtype=bf16 trans_b=false add=bias";
  add_ndim_cell(&a, "matmul_add", "fused", f16, 4096, 4096, 4096, FP_CELL_OK, 200);
  add_ndim_cell(&a, "matmul_add", "fused", bf16, 4096, 4096, 4096, FP_CELL_OK, 300);
  add_ndim_cell(&a, "matmul_add", "fused", f16, 1, 4096, 4096, FP_CELL_OK, 40);
  add_ndim_cell(&a, "matmul_add", "vendor", f16, 4096, 4096, 4096, FP_CELL_UNSUPPORTED, NAN);
  add_ndim_cell(&a, "matmul_add", "unfused", f16, 4096, 4096, 4096, FP_CELL_OK, 250);
  add_cell(&a, "softmax", "fused", 128, 128, FP_CELL_OK, 10);
  add_ndim_cell(&b, "matmul_add", "fused", f16, 4096, 4096, 4096, FP_CELL_OK, 100);  /* 2 */
  add_ndim_cell(&b, "matmul_add", "fused", bf16, 4096, 4096, 4096, FP_CELL_OK, 600); /* 0.5 */
  add_ndim_cell(&b, "matmul_add", "fused", f16, 1, 4096, 4096, FP_CELL_OOM, NAN);
  add_ndim_cell(&b, "matmul_add", "vendor", f16, 4096, 4096, 4096, FP_CELL_OK, 90);
  add_cell(&b, "softmax", "fused", 128, 128, FP_CELL_OK, 5); /* 2 */
  const char *pa = tpath("nd_a.json"), *pb = tpath("nd_b.json"), *out = tpath("nd_cmp.txt");
  write_results(&a, pa);
  write_results(&b, pb);
  char *jargv[] = {"compare", (char *)pa, (char *)pb,  "--format",
                   "json",    "--out",    (char *)out, NULL};
  assert_int_equal(fp_cmd_compare(argc_of(jargv), jargv), FP_EXIT_OK);
  char *text = NULL;
  FP_ASSERT_OK(fp_read_file(out, &text, NULL));
  cJSON *root = cJSON_Parse(text);
  free(text);
  assert_non_null(root);
  const cJSON *ops = cJSON_GetObjectItemCaseSensitive(root, "ops");
  assert_int_equal(cJSON_GetArraySize(ops), 2);
  const cJSON *mm = cJSON_GetArrayItem(ops, 0);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(mm, "op")->valuestring, "matmul_add");
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(mm, "rank")->valueint, 3);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(mm, "cells")->valueint, 2);
  assert_true(fabs(cJSON_GetObjectItemCaseSensitive(mm, "geomean")->valuedouble - 1.0) < 1e-12);
  const cJSON *grid = cJSON_GetObjectItemCaseSensitive(mm, "grid");
  assert_int_equal(cJSON_GetArraySize(grid), 3); /* rows: (shape, params) */
  const cJSON *r1 = cJSON_GetArrayItem(grid, 1);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(r1, "params")->valuestring, bf16);
  assert_true(cJSON_GetObjectItemCaseSensitive(r1, "ratio")->valuedouble == 0.5);
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(grid, 2), "shape");
  assert_int_equal(cJSON_GetArraySize(sh), 3);
  assert_int_equal(cJSON_GetArrayItem(sh, 0)->valueint, 1);
  assert_true(fabs(cJSON_GetObjectItemCaseSensitive(root, "geomean")->valuedouble - cbrt(2.0)) <
              1e-12);
  cJSON_Delete(root);
  char *targv[] = {"compare", (char *)pa, (char *)pb, "--out", (char *)out, NULL};
  assert_int_equal(fp_cmd_compare(argc_of(targv), targv), FP_EXIT_OK);
  FP_ASSERT_OK(fp_read_file(out, &text, NULL));
  assert_non_null(strstr(text, "== matmul_add (shape MxNxK) =="));
  assert_non_null(strstr(text, "4096x4096x4096  dtype=bf16 trans_b=false add=bias"));
  assert_non_null(strstr(text, "0.500"));
  assert_non_null(strstr(text, "OOM"));
  assert_non_null(strstr(text, "== softmax =="));
  free(text);
  char *cargv[] = {"compare", (char *)pa, (char *)pb,  "--format",
                   "csv",     "--out",    (char *)out, NULL};
  assert_int_equal(fp_cmd_compare(argc_of(cargv), cargv), FP_EXIT_OK);
  FP_ASSERT_OK(fp_read_file(out, &text, NULL));
  assert_non_null(strstr(text, "matmul_add,dtype=f16 trans_b=false add=bias,fused,4096x4096x4096,"
                               ",,ok,ok,200.000,100.000,2\n"));
  free(text);
  /* vendor: unsupported in A, so no cell ok in both */
  char err[4096];
  char *vargv[] = {"compare", (char *)pa, (char *)pb, "--variant", "vendor", NULL};
  assert_int_equal(run_captured(fp_cmd_compare, vargv, err, sizeof err), FP_EXIT_FAIL);
  assert_non_null(strstr(err, "no vendor cell that is ok in both"));

  /* report: a grid for softmax, a table per GEMM op, one offline file */
  const char *html = tpath("nd.html"), *dir = tpath("nd_svg");
  char *h[] = {"report", (char *)pa, "--html", (char *)html, NULL};
  assert_int_equal(run_captured(fp_cmd_report, h, err, sizeof err), FP_EXIT_OK);
  FP_ASSERT_OK(fp_read_file(html, &text, NULL));
  assert_non_null(strstr(text, "<table class=\"list\">"));
  assert_non_null(strstr(text, "<h2>matmul_add (shape MxNxK)</h2>"));
  assert_non_null(strstr(text, ">4096x4096x4096<"));
  assert_non_null(strstr(text, ">n/a<"));
  assert_non_null(strstr(text, ">unfused / fused<"));
  assert_non_null(strstr(text, ">1.25<")); /* 250 / 200 */
  assert_non_null(strstr(text, ">50%<"));  /* the roofline fraction */
  assert_null(strstr(text, "<script"));
  int svgs = 0;
  for (const char *p = text; (p = strstr(p, "<svg ")) != NULL; ++p)
    ++svgs;
  assert_int_equal(svgs, 1); /* softmax's grid */
  free(text);
  char *sv[] = {"report", (char *)pa, "--svg", (char *)dir, NULL};
  assert_int_equal(run_captured(fp_cmd_report, sv, err, sizeof err), FP_EXIT_OK);
  char p1[600];
  snprintf(p1, sizeof p1, "%s/matmul_add.svg", dir);
  FP_ASSERT_OK(fp_read_file(p1, &text, NULL));
  assert_non_null(strstr(text, "4096x4096x4096"));
  assert_non_null(strstr(text, "</svg>"));
  free(text);
  fp_results_free(&a);
  fp_results_free(&b);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ndim_parse),
      cmocka_unit_test(test_ndim_sweep),
      cmocka_unit_test(test_library_calls_checked),
      cmocka_unit_test(test_roofline),
      cmocka_unit_test(test_ndim_files),
      cmocka_unit_test(test_ndim_resume_merge),
      cmocka_unit_test(test_ndim_compare_report),
  };
  return bench_tests_run("test_bench_ndim", tests, sizeof tests / sizeof tests[0], argc, argv);
}
