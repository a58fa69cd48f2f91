#define _POSIX_C_SOURCE 200809L
/* fuseport tests: a sweep whose process dies inside a group -- SIGKILL, as a
 * scheduler preempts a job, or a crash -- and --resume. The group is in the
 * file as meta.running {op, params, shape, attempt} from before it runs; a
 * resume retries it once, first, and records its cells as error only when a
 * process died inside it twice; --retry-errors runs those again.
 *
 * The first tests kill real `fuseport bench` processes (FP_FUSEPORT_EXE)
 * held inside a group by the test hook FP_BENCH_TEST_HANG_IN; the others
 * drive the core in-process from files such deaths leave. The file is read
 * at the JSON level where it holds the attempt, so that these tests also
 * build against the code from before the count (and fail there). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench_test_util.h"

#ifndef FP_FUSEPORT_EXE
#error "FP_FUSEPORT_EXE: the fuseport command the tests run (tests/cli_tests.cmake)"
#endif

/* ---- child processes -------------------------------------------------------------------- */

static pid_t child = -1; /* a fuseport the current test started, until it is reaped */

extern char **environ;

/* Runs `fuseport bench ARGS...` with stderr into err_path, stdout dropped,
 * and FP_BENCH_TEST_HANG_IN=hang_in (unset for NULL). Everything is built
 * before the fork: the child only redirects and execs. */
static pid_t spawn_bench(char *const *args, const char *hang_in, const char *err_path) {
  char *argv[32] = {FP_FUSEPORT_EXE, "bench"};
  int n = 2;
  for (int k = 0; args[k] != NULL && n < 31; ++k)
    argv[n++] = args[k];
  argv[n] = NULL;
  static const char var[] = "FP_BENCH_TEST_HANG_IN=";
  char hang[128];
  char *envp[512];
  int m = 0;
  for (char **e = environ; *e != NULL && m < 510; ++e)
    if (strncmp(*e, var, sizeof var - 1) != 0)
      envp[m++] = *e;
  if (hang_in != NULL) {
    snprintf(hang, sizeof hang, "%s%s", var, hang_in);
    envp[m++] = hang;
  }
  envp[m] = NULL;
  int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int null = open("/dev/null", O_WRONLY);
  assert_true(err >= 0 && null >= 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (dup2(err, STDERR_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0)
      _exit(126);
    execve(argv[0], argv, envp);
    _exit(127);
  }
  close(err);
  close(null);
  child = pid;
  return pid;
}

/* The exit status of the child, or 128 + the signal that ended it. */
static int reap(pid_t pid) {
  int status = 0;
  pid_t got;
  while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
    ;
  assert_int_equal(got, pid);
  child = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int run_bench(char *const *args, const char *err_path) {
  return reap(spawn_bench(args, NULL, err_path));
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A child still running when a test fails is killed. */
static int kill_child(void **state) {
  (void)state;
  if (child > 0) {
    kill(child, SIGKILL);
    (void)waitpid(child, NULL, 0);
    child = -1;
  }
  return 0;
}

/* ---- the file ------------------------------------------------------------------------------- */

/* meta.running of the file at path: its op, dim0 and attempt (0 when the
 * file has no "attempt"); false when the file has no marker. */
static bool marker_of(const char *path, char *op, size_t op_len, long *dim0, int *attempt) {
  char *text = NULL;
  FP_ASSERT_OK(fp_read_file(path, &text, NULL));
  cJSON *root = cJSON_Parse(text);
  free(text);
  assert_non_null(root); /* never half a file: it is replaced atomically */
  const cJSON *run =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "meta"), "running");
  bool found = cJSON_IsObject(run);
  if (found) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(run, "op");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(run, "shape");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(run, "attempt");
    snprintf(op, op_len, "%s", cJSON_IsString(o) ? o->valuestring : "?");
    *dim0 = cJSON_IsArray(shape) ? (long)cJSON_GetArrayItem(shape, 0)->valuedouble : -1;
    *attempt = cJSON_IsNumber(a) ? (int)a->valuedouble : 0;
  }
  cJSON_Delete(root);
  return found;
}

/* Sets (or, with attempt 0, removes) meta.running.attempt in the file. */
static void set_attempt(const char *path, int attempt) {
  char *text = NULL;
  FP_ASSERT_OK(fp_read_file(path, &text, NULL));
  cJSON *root = cJSON_Parse(text);
  free(text);
  cJSON *run =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "meta"), "running");
  assert_non_null(run);
  cJSON_DeleteItemFromObjectCaseSensitive(run, "attempt");
  if (attempt > 0)
    assert_non_null(cJSON_AddNumberToObject(run, "attempt", attempt));
  text = cJSON_Print(root);
  assert_non_null(text);
  FP_ASSERT_OK(fp_write_file_atomic(path, text, strlen(text)));
  cJSON_free(text);
  cJSON_Delete(root);
}

static int count_status(const fp_results *r, fp_cell_status s) {
  int n = 0;
  for (int k = 0; k < r->n_cells; ++k)
    n += r->cells[k].status == s;
  return n;
}

/* The sweep of these tests, as a file with no cell yet: `--resume` runs it
 * all (without measuring the copy bandwidth and the peak again, which a
 * fresh run spends seconds on). */
static void empty_sweep(const char *path, const char *ops, const char *shapes) {
  fp_bench_spec s;
  tiny_spec(&s, ops, shapes);
  fp_results r;
  fresh_results(&r, &s);
  write_results(&r, path);
  fp_results_free(&r);
}

/* Starts `args` with the hang in op and sends it sig once the file marks
 * its group of op running with this attempt: SIGKILL, a process killed
 * inside a group; SIGTERM, one stopped there. Every version of the file seen
 * meanwhile parses. Returns its exit status (128 + the signal if killed). */
static int signal_inside(char *const *args, const char *op, const char *path, int attempt, int sig,
                         const char *err_path) {
  pid_t pid = spawn_bench(args, op, err_path);
  bool seen = false;
  for (int k = 0; k < 3000 && !seen; ++k) { /* 60 s */
    sleep_ms(20);
    char now[64] = "";
    long dim0 = 0;
    int a = 0;
    seen = marker_of(path, now, sizeof now, &dim0, &a) && strcmp(now, op) == 0 && a == attempt;
    int status;
    if (!seen && waitpid(pid, &status, WNOHANG) == pid) {
      child = -1;
      fail_msg("fuseport bench ended (status %d) before the file marked %s running, attempt %d",
               status, op, attempt);
    }
  }
  assert_true(seen);
  sleep_ms(100); /* into the group: the hook holds it after its first cell */
  assert_int_equal(kill(pid, sig), 0);
  return reap(pid);
}

static void kill_inside(char *const *args, const char *op, const char *path, int attempt,
                        const char *err_path) {
  assert_int_equal(signal_inside(args, op, path, attempt, SIGKILL, err_path), 128 + SIGKILL);
}

static bool file_has(const char *path, const char *needle) {
  char *text = NULL;
  FP_ASSERT_OK(fp_read_file(path, &text, NULL));
  bool has = strstr(text, needle) != NULL;
  free(text);
  return has;
}

/* ---- real processes, killed ------------------------------------------------------------------ */

/* Stopped by SIGTERM inside layernorm 8x8 -- a clean stop, not a death: the
 * group is dropped and not counted -- then killed by SIGKILL inside it: the
 * file keeps every group finished before and marks it as a first attempt;
 * --resume retries it, first, and completes the sweep. */
static void test_killed_once_is_retried(void **state) {
  (void)state;
  const char *path = tpath("once.json"), *err = tpath("once.err");
  empty_sweep(path, "softmax,layernorm", "8x8,16x16");
  char *resume[] = {"--resume", (char *)path, NULL};
  assert_int_equal(signal_inside(resume, "layernorm", path, 1, SIGTERM, err), FP_EXIT_FAIL);
  char op[64];
  long dim0;
  int attempt;
  assert_false(marker_of(path, op, sizeof op, &dim0, &attempt));
  kill_inside(resume, "layernorm", path, 1, err); /* 1: the SIGTERM was no death */
  fp_results r;
  FP_ASSERT_OK(fp_results_read_file(path, &r));
  assert_int_equal(r.n_cells, 4); /* softmax: nothing measured before the kill is lost */
  assert_int_equal(count_status(&r, FP_CELL_OK), 4);
  assert_non_null(find_cell(&r, "softmax", "unfused"));
  assert_true(r.meta.running);
  assert_string_equal(r.meta.running_key.op, "layernorm");
  assert_int_equal(r.meta.running_key.shape.d[0], 8);
  fp_results_free(&r);

  assert_int_equal(run_bench(resume, err), FP_EXIT_OK);
  assert_true(file_has(err, "retrying"));
  FP_ASSERT_OK(fp_results_read_file(path, &r));
  assert_false(r.meta.running);
  assert_int_equal(r.n_cells, 8);
  assert_int_equal(count_status(&r, FP_CELL_OK), 8);
  fp_results_free(&r);
}

/* Killed inside layernorm 8x8, then inside its retry: the next --resume
 * records its cells as error and completes the rest; --retry-errors runs
 * them again. */
static void test_killed_twice_is_error(void **state) {
  (void)state;
  const char *path = tpath("twice.json"), *err = tpath("twice.err");
  empty_sweep(path, "softmax,layernorm", "8x8,16x16");
  char *resume[] = {"--resume", (char *)path, NULL};
  kill_inside(resume, "layernorm", path, 1, err);
  kill_inside(resume, "layernorm", path, 2, err); /* the retry dies too */
  assert_true(file_has(err, "retrying"));

  assert_int_equal(run_bench(resume, err), FP_EXIT_FAIL); /* error cells */
  assert_true(file_has(err, "twice"));
  fp_results r;
  FP_ASSERT_OK(fp_results_read_file(path, &r));
  assert_false(r.meta.running);
  assert_int_equal(r.n_cells, 8);
  assert_int_equal(count_status(&r, FP_CELL_OK), 6);
  assert_int_equal(count_status(&r, FP_CELL_ERROR), 2);
  for (int k = 0; k < r.n_cells; ++k) {
    const fp_cell *c = &r.cells[k];
    const bool died = strcmp(c->op, "layernorm") == 0 && c->shape.d[0] == 8;
    assert_int_equal(c->status, died ? FP_CELL_ERROR : FP_CELL_OK);
    if (died) {
      assert_non_null(strstr(c->message, "died inside this (op, shape) twice"));
      assert_non_null(strstr(c->message, "--retry-errors"));
    }
  }
  fp_results_free(&r);

  char *retry[] = {"--resume", (char *)path, "--retry-errors", NULL};
  assert_int_equal(run_bench(retry, err), FP_EXIT_OK);
  FP_ASSERT_OK(fp_results_read_file(path, &r));
  assert_false(r.meta.running);
  assert_int_equal(count_status(&r, FP_CELL_OK), 8);
  fp_results_free(&r);
}

/* ---- in-process, from the files deaths leave --------------------------------------------------
 */

typedef struct start_log {
  writer write;
  int n;
  long dim0[8];
  int attempt[8];
} start_log;

/* on_group_start: writes the file and notes the group and attempt it marks. */
static fp_status log_start(void *user, fp_results *r) {
  start_log *log = user;
  fp_status st = write_json(&log->write, r);
  char op[64];
  if (st == FP_OK && log->n < 8 &&
      marker_of(log->write.path, op, sizeof op, &log->dim0[log->n], &log->attempt[log->n]))
    log->n++;
  return st;
}

static fp_status log_end(void *user, fp_results *r) {
  return write_json(&((start_log *)user)->write, r);
}

/* A file whose sweep (softmax 4x4, 8x8, 16x16) finished 4x4 and whose
 * process died inside the group of dim0 `died` (attempt 0: a file from
 * before the count). */
static void died_file(const char *path, fp_bench_spec *s, int64_t died, int attempt) {
  tiny_spec(s, "softmax", "4x4,8x8,16x16");
  fp_results r;
  fresh_results(&r, s);
  writer w = {path, 0};
  fp_bench_hooks hooks;
  memset(&hooks, 0, sizeof hooks);
  hooks.on_group = write_json;
  hooks.user = &w;
  hooks.stop_after_groups = 1;
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, s, &r, &hooks, &sum));
  r.meta.running = true;
  fp_cell_init(&r.meta.running_key);
  snprintf(r.meta.running_key.op, sizeof r.meta.running_key.op, "softmax");
  r.meta.running_key.shape = fp_shape_2d(died, died);
  write_results(&r, path);
  fp_results_free(&r);
  set_attempt(path, attempt);
}

/* Died once inside 16x16, with 8x8 not run yet: 16x16 runs first, as its
 * second attempt, then 8x8 as a first; every cell ok, in canonical order.
 * A file without "attempt" (older) reads as a first attempt. */
static void test_died_once_runs_first_again(void **state) {
  (void)state;
  for (int attempt = 0; attempt <= 1; ++attempt) {
    const char *path = tpath("died_once.json");
    fp_bench_spec s;
    died_file(path, &s, 16, attempt);
    fp_results r;
    FP_ASSERT_OK(fp_results_read_file(path, &r));
    start_log log;
    memset(&log, 0, sizeof log);
    log.write.path = path;
    fp_bench_hooks hooks;
    memset(&hooks, 0, sizeof hooks);
    hooks.on_group_start = log_start;
    hooks.on_group = log_end;
    hooks.user = &log;
    fp_bench_summary sum;
    FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, &hooks, &sum));
    assert_int_equal(sum.died, 0);
    assert_int_equal(r.n_cells, 6);
    assert_int_equal(sum.count[FP_CELL_OK], 6);
    for (int k = 0; k < 6; ++k)
      assert_int_equal(r.cells[k].shape.d[0], k < 2 ? 4 : k < 4 ? 8 : 16);
    assert_int_equal(log.n, 2);
    assert_int_equal(log.dim0[0], 16);
    assert_int_equal(log.attempt[0], 2);
    assert_int_equal(log.dim0[1], 8);
    assert_int_equal(log.attempt[1], 1);
    fp_results_free(&r);
    char op[64];
    long dim0;
    int a;
    assert_false(marker_of(path, op, sizeof op, &dim0, &a));
  }
}

/* Died inside 8x8 on its second attempt: its cells are error without
 * running, the rest runs; --retry-errors runs them. */
static void test_died_twice_is_error(void **state) {
  (void)state;
  const char *path = tpath("died_twice.json");
  fp_bench_spec s;
  died_file(path, &s, 8, 2);
  fp_results r;
  FP_ASSERT_OK(fp_results_read_file(path, &r));
  start_log log;
  memset(&log, 0, sizeof log);
  log.write.path = path;
  fp_bench_hooks hooks;
  memset(&hooks, 0, sizeof hooks);
  hooks.on_group_start = log_start;
  hooks.on_group = log_end;
  hooks.user = &log;
  fp_bench_summary sum;
  FP_ASSERT_OK(fp_bench_run(CTX, &s, &r, &hooks, &sum));
  assert_int_equal(sum.died, 2);
  assert_int_equal(r.n_cells, 6);
  assert_int_equal(sum.count[FP_CELL_OK], 4);
  assert_int_equal(sum.count[FP_CELL_ERROR], 2);
  for (int k = 2; k < 4; ++k) {
    assert_int_equal(r.cells[k].shape.d[0], 8);
    assert_int_equal(r.cells[k].status, FP_CELL_ERROR);
    assert_non_null(strstr(r.cells[k].message, "twice"));
  }
  assert_int_equal(log.n, 1); /* 16x16 only */
  assert_int_equal(log.dim0[0], 16);
  fp_results_free(&r);
  char op[64];
  long dim0;
  int a;
  assert_false(marker_of(path, op, sizeof op, &dim0, &a));

  char *retry[] = {"bench", "--resume", (char *)path, "--retry-errors", "--quiet", NULL};
  char err[4096];
  assert_int_equal(run_captured(fp_cmd_bench, retry, err, sizeof err), FP_EXIT_OK);
  FP_ASSERT_OK(fp_results_read_file(path, &r));
  assert_int_equal(count_status(&r, FP_CELL_OK), 6);
  fp_results_free(&r);
}

/* The marker's attempt survives a read and a write; a bad one is refused. */
static void test_marker_attempt_in_file(void **state) {
  (void)state;
  const char *path = tpath("marker.json");
  fp_bench_spec s;
  died_file(path, &s, 8, 2);
  fp_results r;
  FP_ASSERT_OK(fp_results_read_file(path, &r));
  write_results(&r, path);
  fp_results_free(&r);
  char op[64];
  long dim0 = 0;
  int a = 0;
  assert_true(marker_of(path, op, sizeof op, &dim0, &a));
  assert_int_equal(a, 2);
  set_attempt(path, 0); /* older file: written back as the first attempt */
  FP_ASSERT_OK(fp_results_read_file(path, &r));
  write_results(&r, path);
  fp_results_free(&r);
  assert_true(marker_of(path, op, sizeof op, &dim0, &a));
  assert_int_equal(a, 1);
  static const char *const bad[] = {"\"two\"", "0", "1.5", "-1"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
    char *text = NULL;
    FP_ASSERT_OK(fp_read_file(path, &text, NULL));
    char *at = strstr(text, "\"attempt\":");
    assert_non_null(at);
    char *end = at + strlen("\"attempt\":");
    end += strspn(end, " \t");
    size_t head = (size_t)(end - text);
    const char *tail = end + strspn(end, "0123456789");
    size_t len = head + strlen(bad[k]) + strlen(tail) + 1;
    char *edited = malloc(len);
    assert_non_null(edited);
    snprintf(edited, len, "%.*s%s%s", (int)head, text, bad[k], tail);
    assert_int_not_equal(fp_results_from_json(edited, "edited", &r), FP_OK);
    assert_non_null(strstr(fp_last_error(), "attempt"));
    fp_results_free(&r);
    free(edited);
    free(text);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_killed_once_is_retried, kill_child),
      cmocka_unit_test_teardown(test_killed_twice_is_error, kill_child),
      cmocka_unit_test(test_died_once_runs_first_again),
      cmocka_unit_test(test_died_twice_is_error),
      cmocka_unit_test(test_marker_attempt_in_file),
  };
  return bench_tests_run("test_resume", tests, sizeof tests / sizeof tests[0], argc, argv);
}
