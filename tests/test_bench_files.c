#define _POSIX_C_SOURCE 200809L
/* fuseport tests: the benchmark's result files and what reads them, in-process
 * on the CPU backend on the row ops' 2-D shapes: --resume, a signal inside a
 * group, shards and merge, compare, the JSON round trip and atomic writes,
 * report (test_bench.c: parsing, timing rules, the sweep; test_resume.c: a
 * real SIGKILL). Tiny shapes and two repetitions: structure and logic, never
 * speed. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench_test_util.h"

/* ---- resume ------------------------------------------------------------------------------------
 */

static void test_resume(void **state) {
  (void)state;
  fp_bench_spec s;
  tiny_spec(&s, "softmax,hreduce_reduce", "4x4,8x16,2x3");
  /* the uninterrupted run */
  fp_results whole;
  fresh_results(&whole, &s);
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &whole, NULL, &sum));
  assert_int_equal(whole.n_cells, 12);

  /* interrupted after 2 of 6 groups (the test hook stands for ^C), under a
   * FUSEPORT_* variable that the file must record */
  assert_int_equal(setenv("FUSEPORT_TEST_RESUME_PROBE", "one", 1), 0);
  const char *path = tpath("resume.json");
  fp_results part;
  fresh_results(&part, &s);
  writer w = {path, 0};
  fp_bench_hooks hooks;
  memset(&hooks, 0, sizeof hooks);
  hooks.on_group = write_json;
  hooks.user = &w;
  hooks.stop_after_groups = 2;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &part, &hooks, &sum));
  assert_true(sum.interrupted);
  assert_int_equal(w.groups, 2);
  fp_results_free(&part);

  /* the file on disk is valid and holds exactly those groups */
  fp_results file;
  FP_ASSERT_OK(fp_results_read_file(path, &file));
  assert_int_equal(file.n_cells, 4);

  /* --resume: the options come from the file; given ones must match */
  fp_bench_cli *cli = malloc(sizeof *cli);
  assert_non_null(cli);
  char *bad[] = {"bench", "--resume", (char *)path, "--op", "softmax", NULL};
  assert_int_equal(fp_bench_parse_args(argc_of(bad), bad, cli), FP_EXIT_OK);
  fflush(stderr);
  assert_false(fp_bench_resume_spec(cli, &file, path)); /* prints "... ops ..." */
  char *bad2[] = {"bench", "--resume", (char *)path, "--backend", "opencl", NULL};
  assert_int_equal(fp_bench_parse_args(argc_of(bad2), bad2, cli), FP_EXIT_OK);
  assert_false(fp_bench_resume_spec(cli, &file, path));
  char *good[] = {"bench", "--resume", (char *)path, "--reps", "2", NULL};
  assert_int_equal(fp_bench_parse_args(argc_of(good), good, cli), FP_EXIT_OK);
  assert_true(fp_bench_resume_spec(cli, &file, path));
  assert_string_equal(cli->target.backend, "cpu");
  assert_true(fp_bench_resume_device(&file, path, CTX));
  /* the environment it was measured under is in the file; another one (a
   * different value, or the variable unset) does not resume it */
  const cJSON *env = cJSON_GetObjectItemCaseSensitive(file.meta.extra, "environment");
  const cJSON *probe = cJSON_GetObjectItemCaseSensitive(env, "FUSEPORT_TEST_RESUME_PROBE");
  assert_true(cJSON_IsString(probe));
  assert_string_equal(probe->valuestring, "one");
  assert_int_equal(setenv("FUSEPORT_TEST_RESUME_PROBE", "two", 1), 0);
  assert_false(fp_bench_resume_device(&file, path, CTX));
  assert_int_equal(unsetenv("FUSEPORT_TEST_RESUME_PROBE"), 0);
  assert_false(fp_bench_resume_device(&file, path, CTX));
  assert_int_equal(setenv("FUSEPORT_TEST_RESUME_PROBE", "one", 1), 0);
  assert_true(fp_bench_resume_device(&file, path, CTX));

  /* continue: the missing groups run, nothing is redone or lost */
  hooks.stop_after_groups = 0;
  w.groups = 0;
  FP_ASSERT_OK(fp_bench_run(CTX, &cli->spec, &file, &hooks, &sum));
  assert_int_equal(sum.resumed, 4);
  assert_int_equal(sum.ran, 8);
  assert_int_equal(w.groups, 4);
  assert_false(sum.interrupted);
  fp_results done;
  FP_ASSERT_OK(fp_results_read_file(path, &done));
  assert_int_equal(done.n_cells, whole.n_cells);
  for (int k = 0; k < whole.n_cells; ++k)
    assert_same_cell(&whole.cells[k], &done.cells[k]);
  /* the cells that were there are kept as they were (not rerun) */
  assert_true(done.cells[0].median_us == file.cells[0].median_us);
  assert_true(done.cells[3].median_us == file.cells[3].median_us);

  /* a stop requested before the first group: nothing runs, nothing written */
  volatile sig_atomic_t flag = 1;
  const char *path2 = tpath("signal.json");
  fp_results sig;
  fresh_results(&sig, &s);
  writer w2 = {path2, 0};
  hooks.user = &w2;
  hooks.stop = &flag;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &sig, &hooks, &sum));
  assert_true(sum.interrupted);
  assert_int_equal(sig.n_cells, 0);
  assert_int_equal(w2.groups, 0);
  fp_results_free(&sig);

  /* the whole CLI: an interrupted file, then `bench --resume FILE` */
  char *cont[] = {"bench", "--resume", (char *)path2, "--quiet", NULL};
  fresh_results(&sig, &s);
  hooks.stop = NULL;
  hooks.stop_after_groups = 3;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &sig, &hooks, &sum));
  assert_true(sum.interrupted);
  fp_results_free(&sig);
  assert_int_equal(fp_cmd_bench(argc_of(cont), cont), FP_EXIT_OK);
  FP_ASSERT_OK(fp_results_read_file(path2, &sig));
  assert_int_equal(sig.n_cells, whole.n_cells);
  for (int k = 0; k < whole.n_cells; ++k)
    assert_same_cell(&whole.cells[k], &sig.cells[k]);
  /* once complete, resuming again has nothing to do and succeeds */
  assert_int_equal(fp_cmd_bench(argc_of(cont), cont), FP_EXIT_OK);
  fp_results_free(&sig);

  free(cli);
  fp_results_free(&done);
  fp_results_free(&file);
  fp_results_free(&whole);
  assert_int_equal(unsetenv("FUSEPORT_TEST_RESUME_PROBE"), 0);
}

/* on_cell that raises the stop flag after `after` cells */
typedef struct stopper {
  volatile sig_atomic_t *flag;
  int after;
} stopper;

static void stop_on_cell(void *user, const fp_cell *c, int done, int total) {
  (void)c;
  (void)total;
  stopper *s = user;
  if (done >= s->after)
    *s->flag = 1;
}

/* Both: the stopper and a writer. */
typedef struct stop_writer {
  stopper stop;
  writer write;
} stop_writer;

static void sw_on_cell(void *user, const fp_cell *c, int done, int total) {
  stop_on_cell(&((stop_writer *)user)->stop, c, done, total);
}

static fp_status sw_write(void *user, fp_results *r) {
  return write_json(&((stop_writer *)user)->write, r);
}

static void test_signal_mid_group(void **state) {
  (void)state;
  fp_bench_spec s;
  tiny_spec(&s, "layernorm", "4x4,8x8,16x16");
  fp_results r;
  fresh_results(&r, &s);
  volatile sig_atomic_t flag = 0;
  const char *path = tpath("midgroup.json");
  stop_writer sw = {{&flag, 3}, {path, 0}}; /* stop after the fused cell of group 2 */
  fp_bench_hooks hooks;
  memset(&hooks, 0, sizeof hooks);
  hooks.stop = &flag;
  hooks.on_cell = sw_on_cell;
  hooks.on_group = sw_write;
  hooks.on_group_start = sw_write;
  hooks.user = &sw;
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, &hooks, &sum));
  assert_true(sum.interrupted);
  assert_int_equal(r.n_cells, 2); /* the half-run group is not kept */
  assert_int_equal(r.cells[0].shape.d[0], 4);
  assert_int_equal(r.cells[1].shape.d[0], 4);
  assert_int_equal(sum.leaked_bytes, 0);
  fp_results_free(&r);
  /* the file holds the first group and does not claim the second died */
  FP_ASSERT_OK(fp_results_read_file(path, &r));
  assert_int_equal(r.n_cells, 2);
  assert_false(r.meta.running);
  fp_results_free(&r);
}

/* A run that dies inside a group, and --resume: test_resume.c. */

/* ---- shards and merge
 * ---------------------------------------------------------------------------- */

static void test_shard_merge(void **state) {
  (void)state;
  const char *full = tpath("full.json"), *merged = tpath("merged.json");
  const char *common[] = {
      "--backend",   "cpu",    "--op",        "softmax,pointwise_chain,layernorm",
      "--dim0",      "2,8,17", "--dim1",      "3,32",
      "--reps",      "2",      "--warmup-ms", "0",
      "--flush-mib", "8",      "--quiet"};
  char *argv[32];
  int n = 0;
  argv[n++] = "bench";
  for (size_t k = 0; k < sizeof common / sizeof common[0]; ++k)
    argv[n++] = (char *)common[k];
  argv[n++] = "--out";
  argv[n++] = (char *)full;
  argv[n] = NULL;
  assert_int_equal(fp_cmd_bench(n, argv), FP_EXIT_OK);
  const char *shard_files[3];
  for (int i = 0; i < 3; ++i) {
    char name[32], spec[16];
    snprintf(name, sizeof name, "shard%d.json", i);
    snprintf(spec, sizeof spec, "%d/3", i);
    shard_files[i] = tpath(name);
    argv[n - 1] = (char *)shard_files[i];
    argv[n] = "--shard";
    argv[n + 1] = spec;
    argv[n + 2] = NULL;
    assert_int_equal(fp_cmd_bench(n + 2, argv), FP_EXIT_OK);
    fp_results one;
    FP_ASSERT_OK(fp_results_read_file(shard_files[i], &one));
    assert_true(one.n_cells > 0 && one.n_cells < 36);
    fp_results_free(&one);
  }
  char err[4096];
  char *m[] = {"merge",
               (char *)merged,
               (char *)shard_files[2],
               (char *)shard_files[0],
               (char *)shard_files[1],
               NULL};
  assert_int_equal(run_captured(fp_cmd_merge, m, err, sizeof err), FP_EXIT_OK);
  fp_results a, b;
  FP_ASSERT_OK(fp_results_read_file(full, &a));
  FP_ASSERT_OK(fp_results_read_file(merged, &b));
  assert_int_equal(a.n_cells, 36);
  assert_int_equal(b.n_cells, a.n_cells);
  for (int k = 0; k < a.n_cells; ++k)
    assert_same_cell(&a.cells[k], &b.cells[k]);
  assert_true(cJSON_Compare(a.meta.options, b.meta.options, true));
  assert_string_equal(a.meta.device, b.meta.device);
  assert_string_equal(a.meta.backend, b.meta.backend);
  assert_string_equal(a.meta.git_commit, b.meta.git_commit);
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(b.meta.extra, "merged_shards");
  assert_true(cJSON_IsNumber(ms) && ms->valuedouble == 3);
  fp_results_free(&a);
  fp_results_free(&b);

  /* refusals */
  char *missing[] = {"merge", (char *)merged, (char *)shard_files[0], (char *)shard_files[1], NULL};
  assert_int_equal(run_captured(fp_cmd_merge, missing, err, sizeof err), FP_EXIT_FAIL);
  assert_non_null(strstr(err, "shard 2/3 is missing"));
  char *twice[] = {"merge",
                   (char *)merged,
                   (char *)shard_files[0],
                   (char *)shard_files[0],
                   (char *)shard_files[1],
                   NULL};
  assert_int_equal(run_captured(fp_cmd_merge, twice, err, sizeof err), FP_EXIT_FAIL);
  assert_non_null(strstr(err, "given twice"));
  char *unsharded[] = {"merge", (char *)merged, (char *)full, NULL};
  assert_int_equal(run_captured(fp_cmd_merge, unsharded, err, sizeof err), FP_EXIT_FAIL);
  assert_non_null(strstr(err, "not a shard"));
  /* a shard of another sweep (another seed) */
  const char *other = tpath("other.json");
  argv[n - 1] = (char *)other;
  argv[n] = "--shard";
  argv[n + 1] = "1/3";
  argv[n + 2] = "--seed";
  argv[n + 3] = "7";
  argv[n + 4] = NULL;
  assert_int_equal(fp_cmd_bench(n + 4, argv), FP_EXIT_OK);
  char *foreign[] = {"merge",       (char *)merged,         (char *)shard_files[0],
                     (char *)other, (char *)shard_files[2], NULL};
  assert_int_equal(run_captured(fp_cmd_merge, foreign, err, sizeof err), FP_EXIT_FAIL);
  assert_non_null(strstr(err, "option seed"));
  /* the same shard run under another FUSEPORT_* variable */
  argv[n + 2] = NULL;
  assert_int_equal(setenv("FUSEPORT_TEST_MERGE_PROBE", "1", 1), 0);
  assert_int_equal(fp_cmd_bench(n + 2, argv), FP_EXIT_OK);
  assert_int_equal(unsetenv("FUSEPORT_TEST_MERGE_PROBE"), 0);
  assert_int_equal(run_captured(fp_cmd_merge, foreign, err, sizeof err), FP_EXIT_FAIL);
  assert_non_null(strstr(err, "different FUSEPORT_* variables"));
}

/* ---- compare ----------------------------------------------------------------------------------
 */

static void test_compare(void **state) {
  (void)state;
  fp_results a, b;
  fp_results_init(&a);
  fp_results_init(&b);
  snprintf(a.meta.backend, sizeof a.meta.backend, "opencl");
  snprintf(b.meta.backend, sizeof b.meta.backend, "cuda");
  add_cell(&a, "softmax", "fused", 128, 128, FP_CELL_OK, 100);
  add_cell(&a, "softmax", "fused", 128, 256, FP_CELL_OK, 200);
  add_cell(&a, "softmax", "fused", 256, 128, FP_CELL_OK, 400);
  add_cell(&a, "softmax", "unfused", 128, 128, FP_CELL_OK, 1000);
  add_cell(&a, "layernorm", "fused", 128, 128, FP_CELL_OK, 300);
  add_cell(&b, "softmax", "fused", 128, 128, FP_CELL_OK, 50);  /* 2.0 */
  add_cell(&b, "softmax", "fused", 128, 256, FP_CELL_OK, 400); /* 0.5 */
  add_cell(&b, "softmax", "fused", 256, 128, FP_CELL_OOM, NAN);
  add_cell(&b, "softmax", "unfused", 128, 128, FP_CELL_OK, 10);
  add_cell(&b, "layernorm", "fused", 128, 128, FP_CELL_OK, 100); /* 3.0 */
  const char *pa = tpath("a.json"), *pb = tpath("b.json"), *out = tpath("cmp.json");
  write_results(&a, pa);
  write_results(&b, pb);
  char *argv[] = {"compare", (char *)pa, (char *)pb,  "--format",
                  "json",    "--out",    (char *)out, NULL};
  assert_int_equal(fp_cmd_compare(argc_of(argv), argv), FP_EXIT_OK);
  char *text = NULL;
  FP_ASSERT_OK(fp_read_file(out, &text, NULL));
  cJSON *root = cJSON_Parse(text);
  free(text);
  assert_non_null(root);
  const cJSON *ops = cJSON_GetObjectItemCaseSensitive(root, "ops");
  assert_int_equal(cJSON_GetArraySize(ops), 2);
  const cJSON *sm = cJSON_GetArrayItem(ops, 0);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(sm, "op")->valuestring, "softmax");
  assert_true(fabs(cJSON_GetObjectItemCaseSensitive(sm, "geomean")->valuedouble - 1.0) < 1e-12);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(sm, "cells")->valueint, 2);
  const cJSON *grid = cJSON_GetObjectItemCaseSensitive(sm, "grid");
  assert_int_equal(cJSON_GetArraySize(grid), 3);
  const cJSON *g0 = cJSON_GetArrayItem(grid, 0);
  assert_true(cJSON_GetObjectItemCaseSensitive(g0, "ratio")->valuedouble == 2.0);
  const cJSON *g2 = cJSON_GetArrayItem(grid, 2); /* 256x128: oom in b */
  assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(g2, "ratio")));
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(g2, "b_status")->valuestring, "oom");
  const cJSON *ln = cJSON_GetArrayItem(ops, 1);
  assert_true(fabs(cJSON_GetObjectItemCaseSensitive(ln, "geomean")->valuedouble - 3.0) < 1e-12);
  double overall = cJSON_GetObjectItemCaseSensitive(root, "geomean")->valuedouble;
  assert_true(fabs(overall - cbrt(3.0)) < 1e-12);
  cJSON_Delete(root);

  /* the table: ratios, OOM, the means */
  char *targv[] = {"compare", (char *)pa, (char *)pb, "--out", (char *)out, NULL};
  assert_int_equal(fp_cmd_compare(argc_of(targv), targv), FP_EXIT_OK);
  FP_ASSERT_OK(fp_read_file(out, &text, NULL));
  assert_non_null(strstr(text, "2.000"));
  assert_non_null(strstr(text, "0.500"));
  assert_non_null(strstr(text, "OOM"));
  assert_non_null(strstr(text, "geometric mean A/B: 1.000 over 2 cells"));
  assert_non_null(strstr(text, ">1: B is faster"));
  free(text);
  /* the unfused variant */
  char *uargv[] = {"compare",  (char *)pa, (char *)pb, "--variant", "unfused",
                   "--format", "csv",      "--out",    (char *)out, NULL};
  assert_int_equal(fp_cmd_compare(argc_of(uargv), uargv), FP_EXIT_OK);
  FP_ASSERT_OK(fp_read_file(out, &text, NULL));
  assert_non_null(strstr(text, "softmax,,unfused,128x128,128,128,ok,ok,1000.000,10.000,100\n"));
  free(text);

  /* no common cell: refused */
  fp_results c;
  fp_results_init(&c);
  add_cell(&c, "norm_chain", "fused", 128, 128, FP_CELL_OK, 5);
  const char *pc = tpath("c.json");
  write_results(&c, pc);
  char err[4096];
  char *none[] = {"compare", (char *)pa, (char *)pc, NULL};
  assert_int_equal(run_captured(fp_cmd_compare, none, err, sizeof err), FP_EXIT_FAIL);
  assert_non_null(strstr(err, "no fused cell that is ok in both"));
  char *nofile[] = {"compare", (char *)pa, (char *)tpath("nope.json"), NULL};
  assert_int_equal(run_captured(fp_cmd_compare, nofile, err, sizeof err), FP_EXIT_FAIL);
  assert_non_null(strstr(err, "nope.json"));
  fp_results_free(&a);
  fp_results_free(&b);
  fp_results_free(&c);
}

/* ---- files
 * ---------------------------------------------------------------------------------------- */

static void test_json_round_trip(void **state) {
  (void)state;
  fp_bench_spec s;
  tiny_spec(&s, "bias_dropout_add,softmax", "4x4,3x7");
  fp_results r;
  fresh_results(&r, &s);
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, NULL, &sum));
  /* the awkward cases: nulls, quotes, commas, newlines, non-ASCII, oom */
  fp_cell odd;
  fp_cell_init(&odd);
  snprintf(odd.op, sizeof odd.op, "softmax");
  snprintf(odd.variant, sizeof odd.variant, "fused");
  snprintf(odd.backend, sizeof odd.backend, "cpu");
  odd.shape = fp_shape_2d(65536, 65536);
  odd.status = FP_CELL_OOM;
  odd.footprint_bytes = 17179869184.0;
  snprintf(odd.message, sizeof odd.message, "plan: \"quoted\", comma,\nnew line \\ µs");
  FP_ASSERT_OK(fp_results_add(&r, &odd));
  r.meta.running = true; /* the marker of a group in progress survives too */
  r.meta.running_key = odd;
  char *t1 = NULL, *t2 = NULL;
  FP_ASSERT_OK(fp_results_to_json(&r, &t1));
  fp_results back;
  FP_ASSERT_OK(fp_results_from_json(t1, "t1", &back));
  FP_ASSERT_OK(fp_results_to_json(&back, &t2));
  assert_string_equal(t1, t2);
  assert_int_equal(back.n_cells, r.n_cells);
  for (int k = 0; k < r.n_cells; ++k) {
    assert_same_cell(&r.cells[k], &back.cells[k]);
    assert_true(r.cells[k].median_us == back.cells[k].median_us ||
                (isnan(r.cells[k].median_us) && isnan(back.cells[k].median_us)));
    assert_string_equal(r.cells[k].message, back.cells[k].message);
  }
  assert_true(isnan(back.cells[r.n_cells - 1].median_us));
  assert_true(cJSON_Compare(r.meta.options, back.meta.options, true));
  assert_true(r.meta.copy_gbps == back.meta.copy_gbps);
  assert_string_equal(r.meta.date, back.meta.date);
  assert_true(back.meta.running && back.meta.running_key.shape.d[0] == 65536);
  assert_string_equal(back.meta.running_key.op, "softmax");
  /* every documented field is in the file */
  cJSON *root = cJSON_Parse(t1);
  const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "meta");
  static const char *const meta_keys[] = {"device",           "driver",     "backend", "platform",
                                          "fuseport_version", "git_commit", "date",    "host",
                                          "options",          "copy_gbps"};
  for (size_t k = 0; k < sizeof meta_keys / sizeof meta_keys[0]; ++k)
    assert_non_null(cJSON_GetObjectItemCaseSensitive(meta, meta_keys[k]));
  const cJSON *cell = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "cells"), 0);
  static const char *const cell_keys[] = {
      "op",         "variant",    "backend",     "shape",       "status",        "median_us",
      "min_us",     "max_us",     "reps",        "kernels",     "library_calls", "bytes",
      "gbps",       "bw_frac",    "roof_frac",   "flops",       "gflops",        "footprint_bytes",
      "peak_bytes", "compile_ms", "max_abs_err", "max_rel_err", "rel_l2_err",    "ok",
      "message"};
  for (size_t k = 0; k < sizeof cell_keys / sizeof cell_keys[0]; ++k)
    if (cJSON_GetObjectItemCaseSensitive(cell, cell_keys[k]) == NULL)
      fail_msg("cell field %s is missing", cell_keys[k]);
  cJSON_Delete(root);
  /* CSV: a header and a row per cell, RFC 4180 quoting */
  char *csv = NULL;
  FP_ASSERT_OK(fp_results_to_csv(&r, &csv));
  int lines = 0;
  for (const char *p = csv; *p != '\0'; ++p)
    lines += *p == '\n';
  assert_int_equal(lines, r.n_cells + 1 + 1); /* + the message's own line break */
  assert_non_null(strstr(csv, "\"plan: \"\"quoted\"\", comma,\nnew line \\ µs\""));
  /* shape, dim0, dim1 (rank 2), status, 12 nulls up to footprint_bytes */
  assert_non_null(strstr(csv, ",65536x65536,65536,65536,oom,,,,,,,,,,,,,17179869184,"));
  assert_int_equal(strncmp(csv, FP_RESULTS_CSV_HEADER "\n", strlen(FP_RESULTS_CSV_HEADER) + 1), 0);
  free(csv);
  /* malformed files are refused with a reason */
  fp_results bad;
  FP_ASSERT_ERR(fp_results_from_json("{\"meta\": {}, \"cells\": [", "x", &bad),
                FP_ERR_INVALID_ARGUMENT, "not valid JSON");
  FP_ASSERT_ERR(fp_results_from_json("{\"meta\": {}, \"cells\": [{\"op\":\"a\",\"variant\":\"b\","
                                     "\"shape\":[1,2],\"status\":\"meh\"}]}",
                                     "y", &bad),
                FP_ERR_INVALID_ARGUMENT, "meh");
  FP_ASSERT_ERR(fp_results_from_json("{\"meta\": {}, \"cells\": [{\"op\":\"a\",\"variant\":\"b\","
                                     "\"shape\":[1],\"status\":\"ok\"}]}",
                                     "z", &bad),
                FP_ERR_INVALID_ARGUMENT, "shape");
  free(t1);
  free(t2);
  fp_results_free(&back);
  fp_results_free(&r);
}

static void test_atomic_write(void **state) {
  (void)state;
  const char *path = tpath("atomic.txt");
  FP_ASSERT_OK(fp_write_file_atomic(path, "first", 5));
  FP_ASSERT_OK(fp_write_file_atomic(path, "second", 6));
  char *text = NULL;
  size_t len = 0;
  FP_ASSERT_OK(fp_read_file(path, &text, &len));
  assert_int_equal(len, 6);
  assert_string_equal(text, "second");
  free(text);
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  assert_int_not_equal(access(tmp, F_OK), 0); /* no temporary left behind */
  FP_ASSERT_ERR(fp_write_file_atomic(tpath("no/such/dir/x.json"), "x", 1), FP_ERR_IO,
                "no/such/dir");
  FP_ASSERT_ERR(fp_read_file(tpath("absent.json"), &text, NULL), FP_ERR_IO, "absent.json");
}

/* ---- report
 * --------------------------------------------------------------------------------------- */

static void test_report(void **state) {
  (void)state;
  fp_bench_spec s;
  tiny_spec(&s, "softmax,norm_chain", "4x4,4x16,8x4");
  fp_results r;
  fresh_results(&r, &s);
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, NULL, &sum));
  r.cells[0].status = FP_CELL_OOM; /* a grey cell */
  const char *in = tpath("report.json"), *html = tpath("report.html"), *dir = tpath("svg");
  write_results(&r, in);
  fp_results_free(&r);
  char *h[] = {"report", (char *)in, "--html", (char *)html, NULL};
  char err[4096];
  assert_int_equal(run_captured(fp_cmd_report, h, err, sizeof err), FP_EXIT_OK);
  char *text = NULL;
  FP_ASSERT_OK(fp_read_file(html, &text, NULL));
  assert_non_null(strstr(text, "<!DOCTYPE html>"));
  assert_int_equal(strstr(text, "<script") == NULL, 1);
  /* nothing fetched: the only URL is the SVG namespace */
  for (const char *p = text; (p = strstr(p, "http")) != NULL; ++p)
    assert_int_equal(strncmp(p, "http://www.w3.org/2000/svg", 26), 0);
  int svgs = 0;
  for (const char *p = text; (p = strstr(p, "<svg ")) != NULL; ++p)
    ++svgs;
  assert_int_equal(svgs, 2);
  assert_non_null(strstr(text, ">OOM<"));
  assert_non_null(strstr(text, "relative performance"));
  assert_non_null(strstr(text, "rgb(")); /* coloured cells */
  free(text);
  char *sv[] = {"report", (char *)in, "--svg", (char *)dir, NULL};
  assert_int_equal(run_captured(fp_cmd_report, sv, err, sizeof err), FP_EXIT_OK);
  char p1[600], p2[600];
  snprintf(p1, sizeof p1, "%s/softmax.svg", dir);
  snprintf(p2, sizeof p2, "%s/norm_chain.svg", dir);
  assert_int_equal(access(p1, R_OK), 0);
  assert_int_equal(access(p2, R_OK), 0);
  FP_ASSERT_OK(fp_read_file(p1, &text, NULL));
  assert_non_null(strstr(text, "<?xml"));
  assert_non_null(strstr(text, "</svg>"));
  free(text);
  char *missing[] = {"report", (char *)tpath("none.json"), "--html", (char *)html, NULL};
  assert_int_equal(run_captured(fp_cmd_report, missing, err, sizeof err), FP_EXIT_FAIL);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resume),          cmocka_unit_test(test_signal_mid_group),
      cmocka_unit_test(test_shard_merge),     cmocka_unit_test(test_compare),
      cmocka_unit_test(test_json_round_trip), cmocka_unit_test(test_atomic_write),
      cmocka_unit_test(test_report),
  };
  return bench_tests_run("test_bench_files", tests, sizeof tests / sizeof tests[0], argc, argv);
}
