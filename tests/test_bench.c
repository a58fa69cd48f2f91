#define _POSIX_C_SOURCE 200809L
/* fuseport tests: the benchmark core and the bench, compare, merge and
 * report subcommands, in-process on the CPU backend, on the row ops' 2-D
 * shapes: parsing, timing rules, the sweep, out of memory
 * (test_bench_files.c: resume, signals, shards and merge, compare, the
 * files, report; test_bench_ndim.c: N-dim shapes, the GEMMs, unsupported
 * cells, library calls, the roofline). Tiny shapes and two repetitions:
 * these tests check structure and logic, never speed. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench_test_util.h"

/* ---- argument parsing ------------------------------------------------------------------ */

static void test_parse_errors(void **state) {
  (void)state;
  static const struct {
    const char *args[8];
    const char *needle;
  } cases[] = {
      {{"--bogus"}, "unknown option '--bogus'"},
      {{"--flush", "sideways"}, "--flush must be write or read"},
      {{"--shapes", "12x"}, "--shapes '12x'"},
      {{"--shapes", "0x5"}, "--shapes"},
      {{"--shapes", "128x128,"}, "--shapes"},
      {{"--shapes", "128x128,128x128"}, "listed twice"},
      {{"--shapes", "seed", "--dim0", "1", "--dim1", "2"}, "exclude"},
      {{"--dim0", "128"}, "--dim0 needs --dim1"},
      {{"--dim0", "1,x", "--dim1", "2"}, "--dim0 '1,x'"},
      {{"--dim0", "1,,2", "--dim1", "2"}, "--dim0"},
      {{"--shard", "4/4"}, "--shard '4/4'"},
      {{"--shard", "1"}, "--shard '1'"},
      {{"--shard", "-1/2"}, "--shard"},
      {{"--shard", "1/0"}, "--shard"},
      {{"--reps", "0"}, "--reps '0'"},
      {{"--reps", "5", "--rep-ms", "3"}, "exclude"},
      {{"--rep-ms", "abc"}, "--rep-ms 'abc'"},
      {{"--warmup-ms", "-1"}, "--warmup-ms"},
      {{"--seed", "-3"}, "--seed"},
      {{"--op", "softmaxx"}, "softmaxx"},
      {{"--variants", "half"}, "'half'"},
      {{"--variants", "fused,"}, "--variants"},
      {{"--format", "xml"}, "--format 'xml'"},
      {{"--param", "nope=1"}, "'nope'"},
      {{"--param", "p=2"}, "p=2"},
      {{"--param", "p"}, "NAME=VALUE"},
      {{"--param", "M=5"}, "shape dimension"},
      {{"--param", "training=true", "--param", "training=false"}, "twice"},
      {{"--reps"}, "--reps needs a value"},
      {{"--out", "x.txt", "--format", "table"}, "--out"},
      {{"--resume", "a.json", "--out", "b.json"}, "--resume"},
      {{"--resume", "a.json", "--format", "csv"}, "--resume"},
      {{"--retry-errors"}, "--retry-errors goes with --resume"},
      {{"--backend", "vulkan"}, "vulkan"},
      {{"--device", "x"}, "--device"},
      {{"--flush-mib", "0"}, "--flush-mib '0'"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    char *argv[10] = {"bench"};
    int n = 1;
    for (; n < 9 && cases[k].args[n - 1] != NULL; ++n)
      argv[n] = (char *)cases[k].args[n - 1];
    argv[n] = NULL;
    char err[4096];
    int rc = run_captured(parse_only, argv, err, sizeof err);
    if (rc != FP_EXIT_USAGE)
      fail_msg("case %zu (%s ...): exit %d, wanted 2", k, argv[1], rc);
    if (strstr(err, cases[k].needle) == NULL)
      fail_msg("case %zu (%s ...): message '%s' does not mention '%s'", k, argv[1], err,
               cases[k].needle);
  }
  /* the subcommands themselves exit 2 on bad usage */
  char err[4096];
  char *b1[] = {"bench", "--shapes", "3x", NULL};
  assert_int_equal(run_captured(fp_cmd_bench, b1, err, sizeof err), FP_EXIT_USAGE);
  char *c1[] = {"compare", "a.json", NULL};
  assert_int_equal(run_captured(fp_cmd_compare, c1, err, sizeof err), FP_EXIT_USAGE);
  assert_non_null(strstr(err, "two result files"));
  char *c2[] = {"compare", "a.json", "b.json", "--format", "xml", NULL};
  assert_int_equal(run_captured(fp_cmd_compare, c2, err, sizeof err), FP_EXIT_USAGE);
  char *m1[] = {"merge", "out.json", NULL};
  assert_int_equal(run_captured(fp_cmd_merge, m1, err, sizeof err), FP_EXIT_USAGE);
  char *m2[] = {"merge", "out.json", "out.json", NULL};
  assert_int_equal(run_captured(fp_cmd_merge, m2, err, sizeof err), FP_EXIT_USAGE);
  char *r1[] = {"report", "x.json", NULL};
  assert_int_equal(run_captured(fp_cmd_report, r1, err, sizeof err), FP_EXIT_USAGE);
  char *r2[] = {"report", "x.json", "--html", "a.html", "--svg", "d", NULL};
  assert_int_equal(run_captured(fp_cmd_report, r2, err, sizeof err), FP_EXIT_USAGE);
  char *r3[] = {"report", "--pdf", NULL};
  assert_int_equal(run_captured(fp_cmd_report, r3, err, sizeof err), FP_EXIT_USAGE);
  assert_non_null(strstr(err, "--pdf"));
}

static void test_parse_good(void **state) {
  (void)state;
  fp_bench_cli *cli = malloc(sizeof *cli);
  assert_non_null(cli);
  char *a1[] = {"bench", NULL};
  assert_int_equal(fp_bench_parse_args(1, a1, cli), FP_EXIT_OK);
  assert_int_equal(cli->spec.n_ops, fp_op_count());
  /* every variant of the ops: fused, unfused, the matmul family's vendor and
   * attention's memeff */
  assert_int_equal(cli->spec.n_variants, 4);
  assert_string_equal(cli->spec.variants[0], "fused");
  assert_string_equal(cli->spec.variants[2], "vendor");
  assert_string_equal(cli->spec.variants[3], "memeff");
  /* each op's quick default: the row ops' 2 x 2, then the other families'
   * own (the GEMMs' M x N x K, the compress family's K x C and K x CIN x COUT) */
  assert_true(cli->spec.n_shapes > 4);
  int rank3 = 0;
  for (int k = 0; k < cli->spec.n_shapes; ++k) {
    if (k < 4)
      assert_int_equal(cli->spec.shapes[k].n, 2);
    rank3 += cli->spec.shapes[k].n >= 3;
  }
  assert_true(rank3 > 0);
  assert_int_equal(cli->spec.shapes[1].d[0], fp_bench_default_dim0[0]);
  assert_int_equal(cli->spec.shapes[1].d[1], fp_bench_default_dim1[1]);
  assert_int_equal(cli->spec.reps, 0);
  assert_true(cli->spec.rep_ms == 40.0 && cli->spec.warmup_ms == 10.0);
  assert_int_equal(cli->spec.seed, 20230814);
  assert_int_equal(cli->format, FP_FORMAT_TABLE);
  assert_null(cli->out);

  char *a2[] = {"bench", "--shapes", "seed", "--op", "softmax,layernorm", "--reps", "7", "--out",
                "r.csv", "--shard",  "2/5",  NULL};
  assert_int_equal(fp_bench_parse_args(argc_of(a2), a2, cli), FP_EXIT_OK);
  assert_int_equal(cli->spec.n_shapes, 100);
  assert_int_equal(cli->spec.shapes[0].d[0], 128);
  assert_int_equal(cli->spec.shapes[99].d[0], 65536);
  assert_int_equal(cli->spec.shapes[99].d[1], 65536);
  assert_int_equal(cli->spec.shapes[1].d[1], 256); /* dim1 fastest */
  assert_int_equal(cli->spec.n_ops, 2);
  assert_int_equal(cli->spec.reps, 7);
  assert_int_equal(cli->format, FP_FORMAT_CSV);
  assert_int_equal(cli->spec.shard_index, 2);
  assert_int_equal(cli->spec.shard_count, 5);

  char *a3[] = {"bench",
                "--dim0",
                "1,2,3",
                "--dim1",
                "10,20",
                "--out",
                "r.json",
                "--variant",
                "unfused",
                "--param",
                "training=false,true",
                NULL};
  assert_int_equal(fp_bench_parse_args(argc_of(a3), a3, cli), FP_EXIT_OK);
  assert_int_equal(cli->spec.n_shapes, 6);
  assert_int_equal(cli->spec.shapes[5].d[0], 3);
  assert_int_equal(cli->spec.shapes[5].d[1], 20);
  assert_int_equal(cli->format, FP_FORMAT_JSON);
  assert_int_equal(cli->spec.n_variants, 1);
  assert_int_equal(cli->given & FP_GIVEN_PARAMS, FP_GIVEN_PARAMS);
  char *a5[] = {"bench", "--flush-mib", "128", NULL};
  assert_int_equal(fp_bench_parse_args(argc_of(a5), a5, cli), FP_EXIT_OK);
  assert_int_equal(cli->spec.flush_bytes, 128u << 20);

  char *a4[] = {"bench", "--resume", "x.json", NULL};
  assert_int_equal(fp_bench_parse_args(argc_of(a4), a4, cli), FP_EXIT_OK);
  assert_string_equal(cli->out, "x.json");
  assert_int_equal(cli->format, FP_FORMAT_JSON);
  assert_int_equal(cli->given, 0);
  free(cli);
}

/* ---- timing logic --------------------------------------------------------------------------- */

static void test_stats_and_rules(void **state) {
  (void)state;
  fp_bench_stats st;
  const double odd[] = {5, 1, 9, 3, 7};
  FP_ASSERT_OK(fp_bench_stats_of(odd, 5, &st));
  assert_true(st.median == 5 && st.min == 1 && st.max == 9);
  assert_true(odd[0] == 5 && odd[1] == 1); /* not sorted in place */
  const double even[] = {4, 1, 3, 2};
  FP_ASSERT_OK(fp_bench_stats_of(even, 4, &st));
  assert_true(st.median == 2.5 && st.min == 1 && st.max == 4);
  const double one[] = {42};
  FP_ASSERT_OK(fp_bench_stats_of(one, 1, &st));
  assert_true(st.median == 42 && st.min == 42 && st.max == 42);
  FP_ASSERT_ERR(fp_bench_stats_of(one, 0, &st), FP_ERR_INVALID_ARGUMENT, "no samples");

  /* flush: >= 2x the last-level cache, >= 8 MiB, whole 4 KiB pages */
  assert_int_equal(fp_bench_flush_bytes(0), 8u << 20);
  assert_int_equal(fp_bench_flush_bytes(1u << 20), 8u << 20);
  assert_int_equal(fp_bench_flush_bytes(32u << 20), 64u << 20);
  assert_int_equal(fp_bench_flush_bytes(50u << 20), 100u << 20);
  assert_int_equal(fp_bench_flush_bytes((5u << 20) + 1), (10u << 20) + 4096);
  for (uint64_t l2 = 0; l2 < (64u << 20); l2 += 777777) {
    uint64_t f = fp_bench_flush_bytes(l2);
    assert_true(f >= 2 * l2 && f >= (8u << 20) && f % 4096 == 0 && f < 2 * l2 + (8u << 20) + 4096);
  }
  /* the flush buffer of a run is sized by that rule from the device's cache */
  fp_counters c0, c1;
  fp_counters_get(CTX, &c0);
  fp_bench_spec s;
  tiny_spec(&s, "softmax", "4x4");
  s.flush_bytes = 0; /* the rule */
  fp_results r;
  fresh_results(&r, &s);
  fp_bench_summary sum;
  fp_counters_reset(CTX);
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, NULL, &sum));
  fp_counters_get(CTX, &c1);
  assert_true(c1.bytes_peak - c0.bytes_current >=
              fp_bench_flush_bytes(fp_context_device(CTX)->l2_cache_bytes));
  assert_int_equal(c1.bytes_current, c0.bytes_current);
  const cJSON *fb = cJSON_GetObjectItemCaseSensitive(r.meta.extra, "flush_bytes");
  assert_true(cJSON_IsNumber(fb) && fb->valuedouble == (double)fp_bench_flush_bytes(
                                                           fp_context_device(CTX)->l2_cache_bytes));
  fp_results_free(&r);
  /* --flush-mib overrides the rule, in the run and in the meta data */
  s.flush_bytes = 12u << 20;
  fresh_results(&r, &s);
  fp_counters_reset(CTX);
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, NULL, &sum));
  fp_counters_get(CTX, &c1);
  assert_true(c1.bytes_peak - c0.bytes_current >= (12u << 20) &&
              c1.bytes_peak - c0.bytes_current < (12u << 20) + (1u << 20));
  fb = cJSON_GetObjectItemCaseSensitive(r.meta.extra, "flush_bytes");
  assert_true(cJSON_IsNumber(fb) && fb->valuedouble == (double)(12u << 20));
  fp_bench_spec back;
  FP_ASSERT_OK(fp_bench_spec_from_json(r.meta.options, &back));
  assert_int_equal(back.flush_bytes, 12u << 20);
  assert_false(back.flush_read);
  assert_null(cJSON_GetObjectItemCaseSensitive(r.meta.options, "flush")); /* write: no key */
  fp_counters_get(CTX, &c1);
  const uint64_t launches_write = c1.kernels_launched; /* the last variant's, flushes included */
  fp_results_free(&r);
  /* --flush read: a row-sum launch per flush instead of a fill, a sums
   * buffer beside the flush buffer, and "flush": "read" in the options */
  s.flush_read = true;
  fresh_results(&r, &s);
  fp_counters_reset(CTX);
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, NULL, &sum));
  assert_int_equal(sum.count[FP_CELL_OK], r.n_cells);
  fp_counters_get(CTX, &c1);
  assert_true(c1.kernels_launched >= launches_write + (uint64_t)s.reps);
  assert_int_equal(c1.bytes_current, c0.bytes_current);
  const cJSON *fm = cJSON_GetObjectItemCaseSensitive(r.meta.options, "flush");
  assert_true(cJSON_IsString(fm) && strcmp(fm->valuestring, "read") == 0);
  FP_ASSERT_OK(fp_bench_spec_from_json(r.meta.options, &back));
  assert_true(back.flush_read);
  cJSON_ReplaceItemInObjectCaseSensitive(r.meta.options, "flush", cJSON_CreateString("sideways"));
  FP_ASSERT_ERR(fp_bench_spec_from_json(r.meta.options, &back), FP_ERR_INVALID_ARGUMENT,
                "options.flush");
  fp_results_free(&r);

  /* repetitions: exactly --reps, else rep_ms over (run + flush), clamped */
  fp_bench_spec_init(&s);
  assert_int_equal(fp_bench_rep_count(&s, 1.0, 1.0), 20);
  assert_int_equal(fp_bench_rep_count(&s, 30.0, 10.0), 5);
  assert_int_equal(fp_bench_rep_count(&s, 1e-6, 0.0), 10000);
  assert_int_equal(fp_bench_rep_count(&s, 0.0, 0.0), 10000);
  s.reps = 3;
  assert_int_equal(fp_bench_rep_count(&s, 1e-6, 0.0), 3);
  assert_int_equal(fp_bench_warmup_count(&s, 1.0), 10);
  /* flushes ahead of a run: 1.25x the host's issue time, 1 when unknown */
  assert_int_equal(fp_bench_flush_count(0.010, 0.025), 1);
  assert_int_equal(fp_bench_flush_count(0.070, 0.025), 4);
  assert_int_equal(fp_bench_flush_count(0.0, 0.025), 1);
  assert_int_equal(fp_bench_flush_count(0.080, 0.0), 1);
  assert_int_equal(fp_bench_flush_count(100.0, 0.001), FP_BENCH_MAX_FLUSHES);
  assert_int_equal(fp_bench_warmup_count(&s, 100.0), 1);
  s.warmup_ms = 0;
  assert_int_equal(fp_bench_warmup_count(&s, 1.0), 0);
}

/* ---- the sweep --------------------------------------------------------------------------- */

static void test_sweep_cells(void **state) {
  (void)state;
  fp_bench_spec s;
  tiny_spec(&s, "softmax,bias_dropout_add", "3x5,16x64");
  snprintf(s.params[0].name, sizeof s.params[0].name, "training");
  snprintf(s.params[0].values, sizeof s.params[0].values, "false,true");
  s.n_params = 1;
  fp_results r;
  fresh_results(&r, &s);
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, NULL, &sum));
  /* softmax: 2 shapes x 2 variants; bias_dropout_add: 2 shapes x 2 trainings x 2 */
  assert_int_equal(sum.total, 12);
  assert_int_equal(r.n_cells, 12);
  assert_int_equal(sum.count[FP_CELL_OK], 12);
  assert_int_equal(sum.leaked_bytes, 0);
  assert_false(sum.interrupted);
  const fp_cell *c = &r.cells[0];
  assert_string_equal(c->op, "softmax");
  assert_string_equal(c->variant, "fused");
  assert_string_equal(c->backend, "cpu");
  assert_int_equal(c->shape.d[0], 3);
  assert_int_equal(c->reps, 2);
  assert_true(c->ok && c->kernels == 1 && c->footprint_bytes == 0);
  assert_true(c->median_us >= c->min_us && c->max_us >= c->median_us && c->min_us > 0);
  assert_true(c->bytes == 2 * 3 * 5 * 4 && c->peak_bytes == 2 * 3 * 5 * 4);
  assert_true(fabs(c->bw_frac - c->gbps / 10.0) <= 1e-5 * c->bw_frac + 1e-12);
  assert_true(c->compile_ms == 0 && isfinite(c->max_abs_err));
  const fp_cell *u = &r.cells[1];
  assert_string_equal(u->variant, "unfused");
  assert_true(u->ok && u->kernels > 1 && u->footprint_bytes > 0);
  assert_true(u->peak_bytes == c->peak_bytes + u->footprint_bytes);
  /* canonical order: op, shape, params (the last listed fastest), variant */
  assert_string_equal(r.cells[4].op, "bias_dropout_add");
  assert_non_null(strstr(r.cells[4].params, "training=false"));
  assert_int_equal(r.cells[4].shape.d[0], 3);
  assert_non_null(strstr(r.cells[6].params, "training=true"));
  assert_int_equal(r.cells[6].shape.d[0], 3);
  assert_int_equal(r.cells[8].shape.d[0], 16);
  fp_bench_plan plan;
  memset(&plan, 0, sizeof plan); /* an empty sweep has no place for any cell */
  assert_int_equal(fp_bench_cell_rank(&s, &plan, &r.cells[0]), -1);
  FP_ASSERT_OK(fp_bench_plan_build(&s, &plan));
  for (int k = 1; k < r.n_cells; ++k)
    assert_true(fp_bench_cell_rank(&s, &plan, &r.cells[k]) >
                fp_bench_cell_rank(&s, &plan, &r.cells[k - 1]));
  fp_bench_plan_free(&plan);
  fp_results_free(&r);
}

/* A copy of softmax whose reference is off by one: every cell runs and is
 * timed, and is recorded as "fail", never as a success. */
static void wrong_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                            double *const *out) {
  const fp_op *real = fp_op_find("softmax");
  fp_problem q = *p;
  q.op = real;
  real->reference(&q, in, r0, r1, out);
  int64_t n = (r1 - r0) * fp_problem_int(p, 1);
  for (int64_t i = 0; i < n; ++i)
    out[0][i] += 1.0;
}

/* A copy of softmax that counts its reference calls. */
static int reference_calls;

static void counting_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0,
                               int64_t r1, double *const *out) {
  const fp_op *real = fp_op_find("softmax");
  fp_problem q = *p;
  q.op = real;
  real->reference(&q, in, r0, r1, out);
  reference_calls++;
}

static void test_reference_once_per_group(void **state) {
  (void)state;
  fp_op counted = *fp_op_find("softmax");
  counted.reference = counting_reference;
  fp_bench_spec s;
  tiny_spec(&s, "softmax", "4x8,1000x700");
  s.ops[0] = &counted;
  s.sample_elems = 100000; /* 1000x700 is checked on 3 row ranges */
  fp_results r;
  fresh_results(&r, &s);
  fp_bench_summary sum;
  reference_calls = 0;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, NULL, &sum));
  assert_int_equal(sum.count[FP_CELL_OK], 4);
  /* both variants checked against one reference: 1 range + 3 ranges */
  assert_int_equal(reference_calls, 1 + 3);
  fp_results_free(&r);
}

static void test_wrong_result_is_fail(void **state) {
  (void)state;
  fp_op broken = *fp_op_find("softmax");
  broken.reference = wrong_reference;
  fp_bench_spec s;
  tiny_spec(&s, "softmax", "4x8,8x4");
  s.ops[0] = &broken;
  fp_results r;
  fresh_results(&r, &s);
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, NULL, &sum));
  assert_int_equal(r.n_cells, 4);
  assert_int_equal(sum.count[FP_CELL_FAIL], 4);
  assert_int_equal(sum.count[FP_CELL_OK], 0);
  for (int k = 0; k < r.n_cells; ++k) {
    assert_false(r.cells[k].ok);
    assert_true(r.cells[k].median_us > 0); /* still timed */
    assert_non_null(strstr(r.cells[k].message, "outside the tolerance"));
  }
  fp_results_free(&r);
}

/* ---- out of memory ----------------------------------------------------------------------------
 */

static void test_oom_goes_on(void **state) {
  (void)state;
  uint64_t flush = fp_bench_flush_bytes(fp_context_device(CTX)->l2_cache_bytes);
  fp_counters c0;
  fp_counters_get(CTX, &c0);
  /* room for 10 MiB of cells next to the flush buffer: 1024x1024 softmax
   * fits fused (8 MiB in and out) but not unfused (8 MiB more of
   * intermediates); 2048x2048 (32 MiB) fits in neither */
  FP_ASSERT_OK(fp_context_set_mem_limit(CTX, c0.bytes_current + flush + (10u << 20)));
  fp_bench_spec s;
  tiny_spec(&s, "softmax,layernorm", "16x16,2048x2048,1024x1024,32x8");
  s.flush_bytes = 0; /* the rule's, as the limit above counts */
  fp_results r;
  fresh_results(&r, &s);
  fp_bench_summary sum;
  fp_status st = fp_bench_run(CTX, &s, &r, NULL, &sum);
  FP_ASSERT_OK(fp_context_set_mem_limit(CTX, 0));
  FP_ASSERT_OK(st);
  assert_int_equal(r.n_cells, 16);
  assert_false(sum.interrupted);
  assert_int_equal(sum.leaked_bytes, 0);
  fp_counters c1;
  fp_counters_get(CTX, &c1);
  assert_int_equal(c1.bytes_current, c0.bytes_current);
  const struct {
    int cell;
    fp_cell_status status;
  } want[] = {{0, FP_CELL_OK}, {1, FP_CELL_OK},   {2, FP_CELL_OOM},  {3, FP_CELL_OOM},
              {4, FP_CELL_OK}, {5, FP_CELL_OOM},  {6, FP_CELL_OK},   {7, FP_CELL_OK},
              {8, FP_CELL_OK}, {10, FP_CELL_OOM}, {11, FP_CELL_OOM}, {14, FP_CELL_OK},
              {15, FP_CELL_OK}};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; ++k) {
    const fp_cell *c = &r.cells[want[k].cell];
    if (c->status != want[k].status)
      fail_msg("cell %d (%s %s %lldx%lld) is %s, wanted %s: %s", want[k].cell, c->op, c->variant,
               (long long)c->shape.d[0], (long long)c->shape.d[1], fp_cell_status_name(c->status),
               fp_cell_status_name(want[k].status), c->message);
    if (c->status == FP_CELL_OOM) {
      assert_false(c->ok);
      assert_true(isnan(c->median_us));
      assert_non_null(strstr(c->message, "out-of-memory"));
    }
  }
  /* the table marks them */
  FILE *f = tmpfile();
  assert_non_null(f);
  fp_bench_print_table(f, &r);
  rewind(f);
  char text[16384];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  assert_non_null(strstr(text, "== softmax =="));
  assert_non_null(strstr(text, "relative performance"));
  assert_non_null(strstr(text, "OOM"));
  fp_results_free(&r);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_parse_good),
      cmocka_unit_test(test_stats_and_rules),
      cmocka_unit_test(test_sweep_cells),
      cmocka_unit_test(test_reference_once_per_group),
      cmocka_unit_test(test_wrong_result_is_fail),
      cmocka_unit_test(test_oom_goes_on),
  };
  return bench_tests_run("test_bench", tests, sizeof tests / sizeof tests[0], argc, argv);
}
