/* fuseport benchmark core: the timing rules, the cache flush, what a run
 * measures of its device once (copy bandwidth, the peak FLOP/s of each
 * compute type) and the results' meta data. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench_internal.h"
#include "fp_device_common.h" /* FP_REDUCE_SUM */
#include "fp_git_commit.h"

/* ---- timing pieces --------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

fp_status fp_bench_stats_of(const double *samples, int n, fp_bench_stats *out) {
  if (samples == NULL || out == NULL || n < 1)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "stats: no samples");
  double *v = malloc(sizeof *v * (size_t)n);
  if (v == NULL)
    return fp_error(FP_ERR_OUT_OF_MEMORY, "stats: no host memory for %d samples", n);
  memcpy(v, samples, sizeof *v * (size_t)n);
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  out->min = v[0];
  out->max = v[n - 1];
  out->median = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  free(v);
  return FP_OK;
}

uint64_t fp_bench_flush_bytes(uint64_t l2_cache_bytes) {
  uint64_t bytes = 2 * l2_cache_bytes;
  if (bytes < (8ull << 20))
    bytes = 8ull << 20;
  return (bytes + 4095) & ~(uint64_t)4095;
}

int64_t fp_bench_rep_count(const fp_bench_spec *s, double exec_ms, double flush_ms) {
  if (s->reps > 0)
    return s->reps;
  double per = exec_ms + flush_ms;
  double n = per > 0 ? ceil(s->rep_ms / per) : (double)s->max_reps;
  if (!(n >= (double)s->min_reps))
    n = (double)s->min_reps;
  if (n > (double)s->max_reps)
    n = (double)s->max_reps;
  return (int64_t)n;
}

int fp_bench_flush_count(double issue_ms, double flush_ms) {
  if (!(issue_ms > 0) || !(flush_ms > 0))
    return 1;
  const double n = ceil(1.25 * issue_ms / flush_ms);
  return n < 1 ? 1 : n > FP_BENCH_MAX_FLUSHES ? FP_BENCH_MAX_FLUSHES : (int)n;
}

uint64_t fp_bench_run_flush_bytes(const fp_bench_spec *s, const fp_device_info *dev) {
  return s->flush_bytes > 0 ? (s->flush_bytes + 4095) & ~(uint64_t)4095
                            : fp_bench_flush_bytes(dev->l2_cache_bytes);
}

int64_t fp_bench_warmup_count(const fp_bench_spec *s, double exec_ms) {
  if (!(s->warmup_ms > 0))
    return 0;
  double n = exec_ms > 0 ? ceil(s->warmup_ms / exec_ms) : (double)s->max_reps;
  if (n > (double)s->max_reps)
    n = (double)s->max_reps;
  return n < 1 ? 1 : (int64_t)n;
}

/* ---- copy bandwidth and meta ----------------------------------------------------------------- */

fp_status fp_bench_copy_bandwidth(fp_context *ctx, double *gbps) {
  *gbps = NAN;
  const fp_device_info *dev = fp_context_device(ctx);
  /* Large enough to stream from memory (4x the last-level cache, at least
   * 64 MiB), at most 1 GiB or an eighth of the device. */
  uint64_t bytes = 4 * dev->l2_cache_bytes;
  if (bytes < (64ull << 20))
    bytes = 64ull << 20;
  if (bytes > (1ull << 30))
    bytes = 1ull << 30;
  if (dev->global_mem_bytes / 8 < bytes)
    bytes = dev->global_mem_bytes / 8;
  bytes &= ~(uint64_t)4095;
  fp_buffer *src = NULL, *dst = NULL;
  fp_status st = FP_ERR_OUT_OF_MEMORY;
  /* Under a memory cap, halve until both buffers fit. */
  while (bytes >= (1ull << 20)) {
    st = fp_buffer_alloc(ctx, bytes, &src);
    if (st == FP_OK) {
      st = fp_buffer_alloc(ctx, bytes, &dst);
      if (st != FP_OK) {
        fp_buffer_free(src);
        src = NULL;
      }
    }
    if (st != FP_ERR_OUT_OF_MEMORY)
      break;
    bytes /= 2;
  }
  if (st != FP_OK)
    return st;
  fp_event *ev[2] = {NULL, NULL};
  const uint32_t pattern = 0x3F800000u; /* 1.0f */
  st = fp_buffer_fill(ctx, src, 0, bytes, &pattern, 4);
  if (st == FP_OK)
    st = fp_event_create(ctx, &ev[0]);
  if (st == FP_OK)
    st = fp_event_create(ctx, &ev[1]);
  /* warm-up: about 50 ms of copies (at least 2, at most 100), so that a GPU
   * has left its idle clocks before the timed ones */
  double first = 0;
  if (st == FP_OK)
    st = fp_event_record(ctx, ev[0]);
  if (st == FP_OK)
    st = fp_buffer_copy(ctx, dst, 0, src, 0, bytes);
  if (st == FP_OK)
    st = fp_event_record(ctx, ev[1]);
  if (st == FP_OK)
    st = fp_event_elapsed_ms(ctx, ev[0], ev[1], &first);
  int warm = first > 0 ? (int)ceil(50.0 / first) : 100;
  warm = warm < 2 ? 2 : warm > 100 ? 100 : warm;
  for (int k = 1; st == FP_OK && k < warm; ++k)
    st = fp_buffer_copy(ctx, dst, 0, src, 0, bytes);
  double ms[9];
  int n = 0;
  for (; st == FP_OK && n < 9; ++n) {
    st = fp_event_record(ctx, ev[0]);
    if (st == FP_OK)
      st = fp_buffer_copy(ctx, dst, 0, src, 0, bytes);
    if (st == FP_OK)
      st = fp_event_record(ctx, ev[1]);
    if (st == FP_OK)
      st = fp_event_elapsed_ms(ctx, ev[0], ev[1], &ms[n]);
  }
  fp_event_destroy(ev[0]);
  fp_event_destroy(ev[1]);
  fp_buffer_free(src);
  fp_buffer_free(dst);
  if (st != FP_OK)
    return st;
  fp_bench_stats stats;
  st = fp_bench_stats_of(ms, n, &stats);
  if (st == FP_OK && stats.median > 0)
    *gbps = 2.0 * (double)bytes / (stats.median * 1e-3) / 1e9;
  return st;
}

extern char **environ; /* POSIX: the process's environment */

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

cJSON *fp_bench_environment(void) {
  static const char prefix[] = "FUSEPORT_";
  size_t count = 0;
  for (char **e = environ; e != NULL && *e != NULL; ++e)
    count += strncmp(*e, prefix, sizeof prefix - 1) == 0 && strchr(*e, '=') != NULL;
  const char **vars = calloc(count + 1, sizeof *vars);
  cJSON *env = cJSON_CreateObject();
  if (vars == NULL || env == NULL) {
    free(vars);
    cJSON_Delete(env);
    return NULL;
  }
  size_t n = 0;
  for (char **e = environ; e != NULL && *e != NULL && n < count; ++e)
    if (strncmp(*e, prefix, sizeof prefix - 1) == 0 && strchr(*e, '=') != NULL)
      vars[n++] = *e;
  /* sorted, so that two runs with the same variables compare equal whatever
   * the order of their environments */
  qsort(vars, n, sizeof *vars, compare_strings);
  for (size_t k = 0; k < n; ++k) {
    const char *eq = strchr(vars[k], '=');
    char name[256];
    const size_t len = (size_t)(eq - vars[k]);
    if (len >= sizeof name)
      continue; /* no fuseport variable is that long */
    memcpy(name, vars[k], len);
    name[len] = '\0';
    if (cJSON_AddStringToObject(env, name, eq + 1) == NULL) {
      free(vars);
      cJSON_Delete(env);
      return NULL;
    }
  }
  free(vars);
  return env;
}

fp_status fp_bench_meta_init(fp_context *ctx, const fp_bench_spec *s, fp_results *r) {
  fp_results_meta *m = &r->meta;
  const fp_device_info *dev = fp_context_device(ctx);
  snprintf(m->device, sizeof m->device, "%s", dev->name);
  snprintf(m->driver, sizeof m->driver, "%s", dev->driver_version);
  snprintf(m->backend, sizeof m->backend, "%s", fp_backend_name(fp_context_backend(ctx)));
  snprintf(m->platform, sizeof m->platform, "%s", dev->platform);
  snprintf(m->fuseport_version, sizeof m->fuseport_version, "%s", FUSEPORT_VERSION);
  snprintf(m->git_commit, sizeof m->git_commit, "%s", FUSEPORT_GIT_COMMIT);
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm) == NULL ||
      strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    snprintf(m->date, sizeof m->date, "unknown");
  if (gethostname(m->host, sizeof m->host) != 0)
    snprintf(m->host, sizeof m->host, "unknown");
  m->host[sizeof m->host - 1] = '\0';
  cJSON_Delete(m->options);
  cJSON_Delete(m->extra);
  m->options = fp_bench_spec_to_json(s, true);
  m->extra = cJSON_CreateObject();
  if (m->options == NULL || m->extra == NULL ||
      cJSON_AddStringToObject(m->extra, "api_version", dev->api_version) == NULL ||
      cJSON_AddNumberToObject(m->extra, "global_mem_bytes", (double)dev->global_mem_bytes) ==
          NULL ||
      cJSON_AddNumberToObject(m->extra, "l2_cache_bytes", (double)dev->l2_cache_bytes) == NULL ||
      cJSON_AddNumberToObject(m->extra, "flush_bytes", (double)fp_bench_run_flush_bytes(s, dev)) ==
          NULL ||
      cJSON_AddNumberToObject(m->extra, "compute_units", (double)dev->compute_units) == NULL)
    return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory for the results' meta data");
  cJSON *env = fp_bench_environment();
  if (env == NULL || !cJSON_AddItemToObject(m->extra, "environment", env)) {
    cJSON_Delete(env);
    return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory for the results' meta data");
  }
  return FP_OK;
}

/* ---- the cache flush ----------------------------------------------------------------------------
 */

/* The read flush views the buffer as rows of this many floats (64 KiB). */
#define FLUSH_ROW_FLOATS 16384

static int64_t flush_rows(uint64_t flush_bytes) {
  return (int64_t)(flush_bytes / (4 * FLUSH_ROW_FLOATS));
}

fp_status fp_flusher_init(fp_flusher *f, fp_context *ctx, const fp_bench_spec *s) {
  memset(f, 0, sizeof *f);
  f->ctx = ctx;
  f->read = s->flush_read;
  f->bytes = fp_bench_run_flush_bytes(s, fp_context_device(ctx));
  fp_status st = fp_buffer_alloc(ctx, f->bytes, &f->buf);
  if (st != FP_OK)
    return fp_error(st, "the cache flush buffer (%llu bytes) does not fit: %s",
                    (unsigned long long)f->bytes, fp_last_error());
  if (f->read) {
    /* the read flush reduces the pattern the buffer is filled with once */
    uint32_t pattern = 0x3f800000u; /* 1.0f */
    st = fp_buffer_alloc(ctx, 4 * (uint64_t)flush_rows(f->bytes), &f->sums);
    if (st == FP_OK)
      st = fp_buffer_fill(ctx, f->buf, 0, f->bytes, &pattern, 4);
    if (st != FP_OK) {
      st = fp_error(st, "the read flush's buffers: %s", fp_last_error());
      fp_flusher_free(f);
    }
  }
  return st;
}

/* Evicts the cells' buffers from the last-level cache: writes the flush
 * buffer (a new pattern each time, so nothing can skip the write), or with
 * --flush read sums its rows with the backend's row-reduction primitive,
 * whose loads allocate in the cache as any kernel's do. Enqueued only. */
fp_status fp_flusher_flush(fp_flusher *f) {
  if (f->read) {
    const int64_t rows = flush_rows(f->bytes);
    const fp_arg args[] = {
        fp_arg_buf(f->sums), fp_arg_buf(f->buf),           fp_arg_i32(FP_REDUCE_SUM),
        fp_arg_i64(rows),    fp_arg_i64(FLUSH_ROW_FLOATS), fp_arg_i64(FLUSH_ROW_FLOATS),
        fp_arg_i64(1)};
    const fp_ndrange nd = fp_ndrange_1d((uint64_t)rows, 256);
    return fp_launch(f->ctx, FPK_prim_reduce_rows, &nd, args, 7);
  }
  f->pattern = f->pattern * 1664525u + 1013904223u;
  return fp_buffer_fill(f->ctx, f->buf, 0, f->bytes, &f->pattern, 4);
}

void fp_flusher_free(fp_flusher *f) {
  fp_buffer_free(f->sums);
  fp_buffer_free(f->buf);
  f->sums = f->buf = NULL;
}

double fp_bench_wall_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* ---- the roofline -------------------------------------------------------------------------------
 */

fp_dtype fp_bench_compute_dtype(const fp_problem *p) {
  return p->op->compute_dtype != NULL ? p->op->compute_dtype(p) : FP_F32;
}

double fp_bench_roof_frac(double bytes, double flops, double median_us, double copy_gbps,
                          double peak_tflops) {
  if (!(median_us > 0))
    return NAN;
  double best_us = NAN; /* the time the roofline allows */
  if (copy_gbps > 0 && bytes >= 0)
    best_us = bytes / (copy_gbps * 1e3);
  if (peak_tflops > 0 && flops >= 0) {
    const double compute_us = flops / (peak_tflops * 1e6);
    best_us = isnan(best_us) || compute_us > best_us ? compute_us : best_us;
  }
  return best_us / median_us;
}

fp_status fp_bench_parse_peaks(const char *text, double tflops[FP_DTYPE_COUNT]) {
  for (int k = 0; k < FP_DTYPE_COUNT; ++k)
    tflops[k] = NAN;
  const char *s = text;
  while (s != NULL && *s != '\0') {
    const size_t n = strcspn(s, ",");
    char item[64], name[16];
    if (n >= sizeof item)
      return fp_error(FP_ERR_INVALID_ARGUMENT,
                      "FUSEPORT_PEAK_TFLOPS='%s': entry '%.*s' is too long", text, (int)n, s);
    memcpy(item, s, n);
    item[n] = '\0';
    const char *colon = strchr(item, ':');
    char *end = NULL;
    double v = NAN;
    fp_dtype dtype = FP_F32;
    bool ok = colon != NULL && colon > item && (size_t)(colon - item) < sizeof name;
    if (ok) {
      snprintf(name, sizeof name, "%.*s", (int)(colon - item), item);
      errno = 0;
      v = strtod(colon + 1, &end);
      ok = end != colon + 1 && *end == '\0' && errno == 0 && v > 0 && isfinite(v) &&
           fp_dtype_parse(name, &dtype) == FP_OK &&
           (dtype == FP_F32 || dtype == FP_F16 || dtype == FP_BF16);
    }
    if (!ok)
      return fp_error(FP_ERR_INVALID_ARGUMENT,
                      "FUSEPORT_PEAK_TFLOPS='%s': entry '%s' is not TYPE:TFLOPS with TYPE f32, "
                      "f16 or bf16 and TFLOPS > 0 (example: f16:989.4,bf16:989.4,f32:66.9)",
                      text, item);
    if (!isnan(tflops[dtype]))
      return fp_error(FP_ERR_INVALID_ARGUMENT, "FUSEPORT_PEAK_TFLOPS='%s' gives %s twice", text,
                      name);
    tflops[dtype] = v;
    s += n;
    if (*s == ',') {
      ++s;
      if (*s == '\0')
        return fp_error(FP_ERR_INVALID_ARGUMENT, "FUSEPORT_PEAK_TFLOPS='%s' ends with a comma",
                        text);
    }
  }
  return FP_OK;
}

/* The side of the square GEMM that measures the peak: large enough to run
 * at the library's best on a GPU, and to take well under a second on the
 * CPU backend. */
static int64_t peak_side(const fp_context *ctx) {
  return fp_context_backend(ctx) == FP_BACKEND_CPU ? 256 : 8192;
}

enum { PEAK_REPS = 5 };

/* Times the library GEMM of an n^3 square of dtype: TFLOP/s into *tflops. */
static fp_status measure_gemm(fp_context *ctx, fp_flusher *flush, fp_dtype dtype, int64_t n,
                              double *tflops) {
  const fp_device_info *dev = fp_context_device(ctx);
  const fp_lib_gemm g = fp_lib_gemm_plain(dtype, n, n, n, false);
  fp_io_desc io;
  memset(&io, 0, sizeof io);
  io.n_in = 2;
  fp_tensor_2d(&io.in[0], "A", n, n);
  fp_tensor_2d(&io.in[1], "B", n, n);
  io.in[0].dtype = io.in[1].dtype = dtype;
  fp_buffer *in[FP_MAX_TENSORS] = {NULL}, *out[FP_MAX_TENSORS] = {NULL};
  fp_buffer *d = NULL, *ws = NULL;
  fp_event *ev[2] = {NULL, NULL};
  const uint64_t ws_bytes = fp_library_gemm_workspace(dev, &g);
  fp_status st = fp_io_alloc(ctx, &io, in, out);
  if (st == FP_OK)
    st = fp_buffer_alloc(ctx, (uint64_t)(n * n) * fp_dtype_size(dtype), &d);
  if (st == FP_OK && ws_bytes > 0)
    st = fp_buffer_alloc(ctx, ws_bytes, &ws);
  /* random operands: a GEMM of constants draws less power, and a GPU runs
   * it at higher clocks than real data */
  if (st == FP_OK)
    st = fp_io_fill_inputs(ctx, &io, FP_BENCH_DEFAULT_SEED, in);
  if (st == FP_OK)
    st = fp_event_create(ctx, &ev[0]);
  if (st == FP_OK)
    st = fp_event_create(ctx, &ev[1]);
  /* warm-up: about 100 ms of GEMMs (at least 2), clocks up */
  double first = 0;
  if (st == FP_OK)
    st = fp_event_record(ctx, ev[0]);
  if (st == FP_OK)
    st = fp_library_gemm(ctx, &g, in[0], in[1], NULL, d, NULL, ws);
  if (st == FP_OK)
    st = fp_event_record(ctx, ev[1]);
  if (st == FP_OK)
    st = fp_event_elapsed_ms(ctx, ev[0], ev[1], &first);
  int warm = first > 0 ? (int)ceil(100.0 / first) : 20;
  warm = fp_context_backend(ctx) == FP_BACKEND_CPU ? 1 : warm < 2 ? 2 : warm > 200 ? 200 : warm;
  for (int k = 0; st == FP_OK && k < warm; ++k)
    st = fp_library_gemm(ctx, &g, in[0], in[1], NULL, d, NULL, ws);
  double ms[PEAK_REPS];
  int reps = 0;
  for (; st == FP_OK && reps < PEAK_REPS; ++reps) {
    st = fp_flusher_flush(flush);
    if (st == FP_OK)
      st = fp_event_record(ctx, ev[0]);
    if (st == FP_OK)
      st = fp_library_gemm(ctx, &g, in[0], in[1], NULL, d, NULL, ws);
    if (st == FP_OK)
      st = fp_event_record(ctx, ev[1]);
    if (st == FP_OK)
      st = fp_event_elapsed_ms(ctx, ev[0], ev[1], &ms[reps]);
  }
  fp_event_destroy(ev[0]);
  fp_event_destroy(ev[1]);
  fp_buffer_free(ws);
  fp_buffer_free(d);
  fp_io_free(&io, in, out);
  fp_bench_stats stats;
  if (st == FP_OK)
    st = fp_bench_stats_of(ms, reps, &stats);
  if (st == FP_OK && !(stats.median > 0))
    st = fp_error(FP_ERR_INTERNAL, "the library GEMM took no measurable time");
  if (st == FP_OK)
    *tflops = 2.0 * (double)n * (double)n * (double)n / (stats.median * 1e-3) / 1e12;
  return st;
}

fp_status fp_bench_peak_tflops(fp_context *ctx, const fp_bench_spec *s, fp_results *r) {
  double stated[FP_DTYPE_COUNT];
  const char *env = getenv("FUSEPORT_PEAK_TFLOPS");
  fp_status st = fp_bench_parse_peaks(env != NULL ? env : "", stated);
  if (st != FP_OK)
    return st;
  /* the compute types of the whole sweep's cells */
  fp_bench_spec whole = *s;
  whole.shard_index = 0;
  whole.shard_count = 1;
  fp_bench_plan plan;
  st = fp_bench_plan_build(&whole, &plan);
  if (st != FP_OK)
    return st;
  bool used[FP_DTYPE_COUNT] = {false};
  for (int k = 0; k < plan.n_groups; ++k)
    if (plan.groups[k].setup_status == FP_OK) {
      const fp_dtype dt = fp_bench_compute_dtype(&plan.groups[k].problem);
      if ((unsigned)dt < FP_DTYPE_COUNT)
        used[dt] = true;
    }
  fp_bench_plan_free(&plan);
  r->meta.has_peaks = true;
  const fp_device_info *dev = fp_context_device(ctx);
  fp_flusher flush;
  bool have_flush = false;
  for (int k = 0; st == FP_OK && k < FP_DTYPE_COUNT; ++k) {
    if (!used[k])
      continue;
    const fp_dtype dt = (fp_dtype)k;
    char source[192];
    double tflops = NAN;
    if (!isnan(stated[k])) {
      tflops = stated[k];
      snprintf(source, sizeof source, "stated: FUSEPORT_PEAK_TFLOPS");
      st = fp_results_set_peak(&r->meta, fp_dtype_name(dt), tflops, source);
      continue;
    }
    int64_t n = peak_side(ctx);
    fp_lib_gemm g = fp_lib_gemm_plain(dt, n, n, n, false);
    fp_status why = fp_library_gemm_check(dev, &g);
    if (why != FP_OK) {
      snprintf(source, sizeof source, "none: %.180s", fp_last_error());
    } else {
      if (!have_flush) {
        why = fp_flusher_init(&flush, ctx, s);
        have_flush = why == FP_OK;
      }
      /* under a memory cap, halve until the operands fit */
      while (why == FP_OK && n >= 64) {
        why = measure_gemm(ctx, &flush, dt, n, &tflops);
        if (why != FP_ERR_OUT_OF_MEMORY)
          break;
        n /= 2;
        why = FP_OK;
      }
      if (why == FP_OK && n < 64)
        why = fp_error(FP_ERR_OUT_OF_MEMORY, "no GEMM of 64^3 or more fits");
      if (why == FP_OK)
        snprintf(source, sizeof source, "measured: %.100s %lld^3 %s", dev->gemm_library,
                 (long long)n, fp_dtype_name(dt));
      else
        snprintf(source, sizeof source, "none: the measurement failed: %.150s", fp_last_error());
      if (why != FP_OK)
        tflops = NAN;
    }
    st = fp_results_set_peak(&r->meta, fp_dtype_name(dt), tflops, source);
  }
  if (have_flush)
    fp_flusher_free(&flush);
  return st;
}
