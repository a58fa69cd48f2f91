#define _POSIX_C_SOURCE 200809L
/* fuseport tests: what the fuzzers (tests/fuzz) found in the command's
 * parsers, one test per finding; each failed before its fix. The inputs
 * that found them are in tests/fuzz/corpus, which `make test-fuzz` replays.
 * No device: the spec, the plan and the files only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "bench_core.h"
#include "cli.h"
#include "cli_bench.h"
#include "results.h"

/* A spec of one op and the shapes, with params "NAME=VALUES" (NULL-ended). */
static void spec_of(fp_bench_spec *s, const char *op, const char *shapes,
                    const char *const *params) {
  fp_bench_spec_init(s);
  s->n_ops = 1;
  s->ops[0] = fp_op_find(op);
  assert_non_null(s->ops[0]);
  assert_true(
      fp_cli_parse_shape_list("--shapes", shapes, s->shapes, FP_BENCH_MAX_SHAPES, &s->n_shapes));
  s->reps = 2;
  for (int k = 0; params != NULL && params[k] != NULL; ++k) {
    const char *eq = strchr(params[k], '=');
    snprintf(s->params[k].name, sizeof s->params[k].name, "%.*s", (int)(eq - params[k]), params[k]);
    snprintf(s->params[k].values, sizeof s->params[k].values, "%s", eq + 1);
    s->n_params = k + 1;
  }
}

static void assert_refused(const fp_bench_spec *s, const char *needle) {
  assert_int_not_equal(fp_bench_spec_validate(s), FP_OK);
  if (strstr(fp_last_error(), needle) == NULL)
    fail_msg("message '%s' does not mention '%s'", fp_last_error(), needle);
}

/* The params text of every group of the spec's plan differs: it is the key
 * of the group's cells in a results file. */
static void assert_distinct_groups(const fp_bench_spec *s, int groups) {
  assert_int_equal(fp_bench_spec_validate(s), FP_OK);
  fp_bench_plan plan;
  assert_int_equal(fp_bench_plan_build(s, &plan), FP_OK);
  assert_int_equal(plan.n_groups, groups);
  for (int a = 0; a < plan.n_groups; ++a)
    for (int b = 0; b < a; ++b)
      if (plan.groups[a].shape_index == plan.groups[b].shape_index &&
          strcmp(plan.groups[a].params, plan.groups[b].params) == 0)
        fail_msg("groups %d and %d are both '%s'", b, a, plan.groups[a].params);
  fp_bench_plan_free(&plan);
}

/* --param training=true,1 made two groups with the same cells: the run kept
 * one, and the sweep never completed ("2 of 4 cells"). */
static void test_param_same_value_twice(void **state) {
  (void)state;
  fp_bench_spec s;
  spec_of(&s, "bias_dropout_add", "32x48", (const char *[]){"training=true,1", NULL});
  assert_refused(&s, "'true' and '1' are the same value");
  spec_of(&s, "bias_dropout_add", "32x48", (const char *[]){"p=0.1,0.10", NULL});
  assert_refused(&s, "same value");
  spec_of(&s, "bias_dropout_add", "32x48", (const char *[]){"layout=contiguous,transposed", NULL});
  assert_distinct_groups(&s, 2);
}

/* p=0.1,0.1000001 are two values, but their params text was "p=0.1" for
 * both (%g): the cells of the second overwrote those of the first. */
static void test_float_param_text(void **state) {
  (void)state;
  const fp_op *op = fp_op_find("bias_dropout_add");
  fp_problem p;
  fp_problem_init(&p, op);
  char text[512];
  assert_int_equal(fp_problem_set(&p, "p", "0.1234567"), FP_OK);
  fp_problem_describe(&p, text, sizeof text);
  assert_non_null(strstr(text, "p=0.1234567 "));
  /* values %g printed exactly keep their text (older files match) */
  assert_int_equal(fp_problem_set(&p, "p", "0.5"), FP_OK);
  fp_problem_describe(&p, text, sizeof text);
  assert_non_null(strstr(text, "p=0.5 "));
  const fp_op *ln = fp_op_find("layernorm");
  fp_problem_init(&p, ln);
  fp_problem_describe(&p, text, sizeof text);
  assert_non_null(strstr(text, "eps=1e-05"));
  fp_bench_spec s;
  spec_of(&s, "bias_dropout_add", "32x48", (const char *[]){"p=0.1,0.1000001", NULL});
  assert_distinct_groups(&s, 2);
}

/* Parameter names match regardless of case, so two spellings set one
 * parameter twice. */
static void test_param_two_spellings(void **state) {
  (void)state;
  fp_bench_spec s;
  spec_of(&s, "bias_dropout_add", "32x48",
          (const char *[]){"training=false,true", "trAining=false,true", NULL});
  assert_refused(&s, "set the same parameter training");
}

/* A trailing dimension (conv's R) listed with --param while a shape gives
 * it: the shape's value won, and each value of the list made the same
 * group. */
static void test_param_dimension_of_shape(void **state) {
  (void)state;
  fp_bench_spec s;
  spec_of(&s, "conv_add", "1x4x6x6x4x3", (const char *[]){"R=3,1", NULL});
  assert_refused(&s, "is a dimension of op conv_add's shape 1x4x6x6x4x3");
  spec_of(&s, "conv_add", "1x4x6x6x4,1x4x6x6x4x3", (const char *[]){"r=3", NULL});
  assert_refused(&s, "1x4x6x6x4x3");
  spec_of(&s, "conv_add", "1x4x6x6x4", (const char *[]){"R=3,1", NULL});
  assert_distinct_groups(&s, 2);
}

/* A dimension past 2^53 was taken on the command line, written to the
 * results file as a double that is not the same integer, and the file was
 * then refused by --resume, merge and compare. */
static void test_shape_past_2_53(void **state) {
  (void)state;
  fp_shape shapes[4];
  int64_t dims[4];
  int n = 0;
  assert_false(fp_cli_parse_shape_list("--shapes", "9007199254740993x2", shapes, 4, &n));
  assert_false(fp_cli_parse_dims("--dim0", "4,9007199254740993", dims, 4, &n));
  assert_true(fp_cli_parse_dims("--dim0", "4,9007199254740992", dims, 4, &n));
  assert_true(fp_cli_parse_shape_list("--shapes", "9007199254740992x3", shapes, 4, &n));
  fp_bench_spec s;
  spec_of(&s, "softmax", "9007199254740992x3", NULL);
  assert_int_equal(fp_bench_spec_validate(&s), FP_OK);
  s.shapes[0].d[0] = FP_SHAPE_MAX_DIM + 1; /* through the library API */
  assert_refused(&s, "[1, 2^53]");
  /* the largest reads back from meta.options */
  s.shapes[0].d[0] = FP_SHAPE_MAX_DIM;
  cJSON *json = fp_bench_spec_to_json(&s, true);
  assert_non_null(json);
  fp_bench_spec back;
  assert_int_equal(fp_bench_spec_from_json(json, &back), FP_OK);
  assert_true(fp_shape_equal(&back.shapes[0], &s.shapes[0]));
  cJSON_Delete(json);
}

/* --shard and meta.options.shard were read with sscanf's %d, undefined past
 * INT_MAX: glibc took "4294967296/3" as shard 0/3 (found reading the parser
 * for the fuzzer, which cannot tell a wrapped number from a given one). */
static void test_shard_text(void **state) {
  (void)state;
  int i = -1, n = -1;
  assert_true(fp_bench_parse_shard("0/1", &i, &n));
  assert_true(fp_bench_parse_shard("3/4", &i, &n));
  assert_int_equal(i, 3);
  assert_int_equal(n, 4);
  static const char *const bad[] = {"4294967296/3", "1/4294967298", "4/4",  "-1/2", "+1/2",
                                    " 1/2",         "1/ 2",         "1/2x", "1",    "/2",
                                    "1/",           "1/-2",         "0/0",  ""};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k)
    if (fp_bench_parse_shard(bad[k], &i, &n))
      fail_msg("'%s' read as shard %d/%d", bad[k], i, n);
  static fp_bench_cli cli;
  char *argv[] = {"bench", "--op", "softmax", "--shapes", "8x8", "--shard", "4294967296/3", NULL};
  assert_int_equal(fp_bench_parse_args(7, argv, &cli), FP_EXIT_USAGE);
  fp_bench_spec s;
  spec_of(&s, "softmax", "8x8", NULL);
  cJSON *json = fp_bench_spec_to_json(&s, true);
  assert_non_null(json);
  cJSON_AddStringToObject(json, "shard", "4294967296/3");
  fp_bench_spec back;
  assert_int_not_equal(fp_bench_spec_from_json(json, &back), FP_OK);
  cJSON_Delete(json);
}

/* --op cut a list past 1023 characters short without a word, and refused
 * one of more than 64 names without any. */
static void test_op_list_limits(void **state) {
  (void)state;
  const fp_op *ops[FP_BENCH_MAX_OPS];
  int n = 0;
  char text[2048] = "";
  for (int k = 0; k < 100; ++k)
    strcat(text, k ? ",softmax" : "softmax");
  assert_false(fp_cli_parse_ops(text, ops, FP_BENCH_MAX_OPS, &n));
  for (int k = 0; k < 100; ++k)
    strcat(text, ",layernorm");
  assert_false(fp_cli_parse_ops(text, ops, FP_BENCH_MAX_OPS, &n));
  assert_true(fp_cli_parse_ops("softmax,layernorm", ops, FP_BENCH_MAX_OPS, &n));
  assert_int_equal(n, 2);
}

/* ---- merge -------------------------------------------------------------------------- */

static char tmpdir[] = "/tmp/fuseport-test-parsers.XXXXXX";

static const char *tpath(const char *name) {
  static char paths[4][256];
  static int next;
  char *p = paths[next++ % 4];
  snprintf(p, sizeof paths[0], "%s/%s", tmpdir, name);
  return p;
}

/* Shard i of 2 of softmax, fused, on 2x2 and 4x4: one cell each. */
static void write_shard(const char *path, int i, const char *host) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f,
          "{\"meta\": {\"device\": \"d\", \"backend\": \"cpu\", \"host\": \"%s\", \"options\": "
          "{\"ops\": [\"softmax\"], \"variants\": [\"fused\"], \"shapes\": [[2, 2], [4, 4]], "
          "\"params\": [], \"seed\": 1, \"reps\": 2, \"rep_ms\": 40, \"warmup_ms\": 0, "
          "\"min_reps\": 5, \"max_reps\": 10000, \"sample_elems\": 0, \"flush_bytes\": null, "
          "\"shard\": \"%d/2\"}},\n\"cells\": [{\"op\": \"softmax\", \"variant\": \"fused\", "
          "\"params\": \"\", \"shape\": [%d, %d], \"status\": \"ok\", \"median_us\": 1}]}\n",
          host, i, 2 << i, 2 << i);
  assert_int_equal(fclose(f), 0);
}

/* A shard whose meta has no host ("") made merge loop forever: strstr
 * finds "" at every position. */
static void test_merge_shard_without_host(void **state) {
  (void)state;
  write_shard(tpath("s0.json"), 0, "a");
  write_shard(tpath("s1.json"), 1, "");
  char *argv[] = {"merge", (char *)tpath("m.json"), (char *)tpath("s0.json"),
                  (char *)tpath("s1.json"), NULL};
  alarm(60); /* the hang, should it come back, fails the test rather than ctest */
  assert_int_equal(fp_cmd_merge(4, argv), FP_EXIT_OK);
  alarm(0);
  fp_results r;
  assert_int_equal(fp_results_read_file(tpath("m.json"), &r), FP_OK);
  assert_int_equal(r.n_cells, 2);
  assert_string_equal(r.meta.host, "a");
  fp_results_free(&r);
  unlink(tpath("m.json"));
  unlink(tpath("s0.json"));
  unlink(tpath("s1.json"));
}

int main(void) {
  if (mkdtemp(tmpdir) == NULL)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_param_same_value_twice),
      cmocka_unit_test(test_float_param_text),
      cmocka_unit_test(test_param_two_spellings),
      cmocka_unit_test(test_param_dimension_of_shape),
      cmocka_unit_test(test_shape_past_2_53),
      cmocka_unit_test(test_shard_text),
      cmocka_unit_test(test_op_list_limits),
      cmocka_unit_test(test_merge_shard_without_host),
  };
  int rc = cmocka_run_group_tests_name("parsers", tests, NULL, NULL);
  rmdir(tmpdir);
  return rc;
}
