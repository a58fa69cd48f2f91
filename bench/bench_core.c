/* fuseport benchmark core: the run -- each group's inputs and reference,
 * each variant's build, check and timing, checkpoints and resume. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bench_internal.h"

static bool op_has_variant(const fp_op *op, const char *name) {
  return fp_op_variant(op, name) != NULL;
}

/* ---- the reference, computed once per group -------------------------------------------------- */

/* fp_check_outputs computes the float64 reference itself, through
 * p->op->reference, on every call. A group checks each variant against the
 * same inputs, so the reference is computed once and the check is handed a
 * copy of the op whose reference() copies from this cache: the accuracy gate
 * stays the one in ops/check.c. The cache is per thread. */
typedef struct ref_cache {
  const fp_op *real;
  int n_seg, n_out;
  int64_t r0[4], r1[4];
  int64_t row_elems[FP_MAX_TENSORS];
  double *data[4][FP_MAX_TENSORS];
} ref_cache;

static _Thread_local const ref_cache *active_cache;

static void cached_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                             double *const *out) {
  const ref_cache *c = active_cache;
  for (int s = 0; c != NULL && s < c->n_seg; ++s) {
    if (c->r0[s] != r0 || c->r1[s] != r1)
      continue;
    for (int k = 0; k < c->n_out; ++k)
      memcpy(out[k], c->data[s][k], sizeof(double) * (size_t)((r1 - r0) * c->row_elems[k]));
    return;
  }
  /* not a cached range: compute it (correct, only slower) */
  fp_problem q = *p;
  q.op = c->real;
  c->real->reference(&q, in, r0, r1, out);
}

/* The shim's other hooks call the real op's with the real op in the problem:
 * an op may tell its problems apart by their op (the matmul family decodes
 * its kind from p->op), and the shim's address is not one it knows. */
static fp_problem real_problem(const fp_problem *p) {
  fp_problem q = *p;
  q.op = active_cache->real;
  return q;
}

static int64_t shim_rows(const fp_problem *p) {
  const fp_problem q = real_problem(p);
  return q.op->rows(&q);
}

static double shim_tol_abs(const fp_problem *p, int output) {
  const fp_problem q = real_problem(p);
  return q.op->tol_abs(&q, output);
}

static fp_tolerance shim_tolerance(const fp_problem *p, int output) {
  const fp_problem q = real_problem(p);
  return q.op->tolerance(&q, output);
}

static void shim_row_tol_abs(const fp_problem *p, int output, const fp_host_tensor *in, int64_t r0,
                             int64_t r1, const double *const *ref, double *floor) {
  const fp_problem q = real_problem(p);
  q.op->row_tol_abs(&q, output, in, r0, r1, ref, floor);
}

static void shim_describe(const fp_problem *p, fp_io_desc *io) {
  const fp_problem q = real_problem(p);
  q.op->describe(&q, io);
}

/* A copy of the cache's op whose reference reads the cache; set
 * active_cache while it is in use. */
static fp_op shim_of(const fp_op *real) {
  fp_op shim = *real;
  shim.reference = cached_reference;
  shim.rows = shim_rows;
  shim.describe = shim_describe;
  shim.tol_abs = real->tol_abs != NULL ? shim_tol_abs : NULL;
  shim.tolerance = real->tolerance != NULL ? shim_tolerance : NULL;
  shim.row_tol_abs = real->row_tol_abs != NULL ? shim_row_tol_abs : NULL;
  shim.validate = NULL; /* not called by the check */
  shim.compute_dtype = NULL;
  return shim;
}

static int64_t tensor_row_elems(const fp_tensor_desc *t) {
  int64_t n = 1;
  for (int d = 1; d < t->rank; ++d)
    n *= t->shape[d];
  return n;
}

static void ref_cache_free(ref_cache *c) {
  for (int s = 0; s < 4; ++s)
    for (int k = 0; k < FP_MAX_TENSORS; ++k) {
      free(c->data[s][k]);
      c->data[s][k] = NULL;
    }
}

static fp_status ref_cache_build(ref_cache *c, const fp_problem *p, const fp_io_desc *io,
                                 const fp_host_tensor *views, const fp_row_sample *rows) {
  memset(c, 0, sizeof *c);
  c->real = p->op;
  c->n_out = io->n_out;
  int64_t total = p->op->rows(p);
  for (int k = 0; k < io->n_out; ++k)
    c->row_elems[k] = tensor_row_elems(&io->out[k]);
  for (int s = 0; s < rows->n; ++s) {
    /* the same clipping as fp_check_outputs */
    int64_t r0 = rows->r0[s], r1 = rows->r1[s] < total ? rows->r1[s] : total;
    if (r0 < 0 || r0 >= r1)
      continue;
    int seg = c->n_seg++;
    c->r0[seg] = r0;
    c->r1[seg] = r1;
    for (int k = 0; k < io->n_out; ++k) {
      c->data[seg][k] = malloc(sizeof(double) * (size_t)((r1 - r0) * c->row_elems[k]));
      if (c->data[seg][k] == NULL) {
        ref_cache_free(c);
        return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory for the reference");
      }
    }
    p->op->reference(p, views, r0, r1, c->data[seg]);
  }
  return FP_OK;
}

/* ---- one group ----------------------------------------------------------------------------------
 */

#define CHUNK 128 /* timed repetitions between two synchronisations */

typedef struct run_state {
  fp_context *ctx;
  const fp_bench_spec *spec;
  const fp_bench_hooks *hooks;
  fp_flusher flush;
  fp_event *start[CHUNK], *end[CHUNK];
  double *samples;
  int64_t samples_cap;
  uint64_t baseline; /* live bytes outside any cell (flush buffer, the caller's) */
  double copy_gbps;
  const fp_results_meta *meta; /* the peaks, for roof_frac */
  uint64_t held_high;          /* the most live bytes since the last timing started */
} run_state;

static bool stopped(const run_state *rs) {
  return rs->hooks != NULL && rs->hooks->stop != NULL && *rs->hooks->stop != 0;
}

/* Records a failure on the cell: oom for out-of-memory, unsupported for
 * what the backend cannot run, else error. */
static void cell_failed(fp_cell *c, fp_status st, const char *what) {
  c->status = st == FP_ERR_OUT_OF_MEMORY ? FP_CELL_OOM
              : st == FP_ERR_UNSUPPORTED ? FP_CELL_UNSUPPORTED
                                         : FP_CELL_ERROR;
  c->ok = false;
  snprintf(c->message, sizeof c->message, "%s: %s: %s", what, fp_status_name(st), fp_last_error());
}

/* Times the plan: estimate, warm-up, timed repetitions. Returns FP_OK,
 * a failure, or FP_ERR_INTERNAL with *interrupted set when stopped. */
/* Times one flush and one run of the plan, apart. */
static fp_status estimate(run_state *rs, fp_plan *plan, fp_buffer **in, fp_buffer **out,
                          double *flush_ms, double *exec_ms) {
  fp_context *ctx = rs->ctx;
  fp_status st = fp_event_record(ctx, rs->start[0]);
  if (st == FP_OK)
    st = fp_flusher_flush(&rs->flush);
  if (st == FP_OK)
    st = fp_event_record(ctx, rs->end[0]);
  if (st == FP_OK)
    st = fp_plan_execute(plan, in, out);
  if (st == FP_OK)
    st = fp_event_record(ctx, rs->start[1]);
  if (st == FP_OK)
    st = fp_event_elapsed_ms(ctx, rs->start[0], rs->end[0], flush_ms);
  if (st == FP_OK)
    st = fp_event_elapsed_ms(ctx, rs->end[0], rs->start[1], exec_ms);
  return st;
}

/* A GPU's driver goes on releasing freed memory for a while after the free
 * returns, and kernels run meanwhile are slower: on an H100 (2026-11-24,
 * bias_dropout_add fused, cuda), 65536 x 128 took 44.9 us when timed right
 * after a 32768 x 65536 cell had freed 24 GiB, against 38.2-38.9 us with a
 * pause of 50, 300 or 2000 ms before or after its own buffers were
 * allocated (so not where they were placed), and 39.0 us timed over 400 ms
 * instead of 20 (so for tens of ms); the SM and memory clocks stayed at
 * 1980 and 2619 MHz throughout. So the cell after such a free runs flushes
 * and itself for SETTLE_MS before its warm-up. Not a sleep: an idle GPU
 * drops its SM clock to 345 MHz (logged), and the grid timed with 100 ms
 * sleeps found bias_gelu 128 x 128 at 23.9 us against 4.9, about the ratio
 * of the clocks. A free of less than SETTLE_FREED_BYTES showed nothing. */
enum { SETTLE_MS = 100 };
#define SETTLE_FREED_BYTES ((uint64_t)1 << 30)

/* Folds the counters' peak (live bytes since their last reset) into
 * held_high: called before each reset and before each timing. */
static void note_held_bytes(run_state *rs) {
  fp_counters cnt;
  fp_counters_get(rs->ctx, &cnt);
  if (cnt.bytes_peak > rs->held_high)
    rs->held_high = cnt.bytes_peak;
}

static fp_status settle_after_frees(run_state *rs, fp_plan *plan, fp_buffer **in, fp_buffer **out) {
  fp_counters cnt;
  note_held_bytes(rs);
  fp_counters_get(rs->ctx, &cnt);
  fp_status st = FP_OK;
  if (fp_context_backend(rs->ctx) != FP_BACKEND_CPU &&
      rs->held_high > cnt.bytes_current + SETTLE_FREED_BYTES) {
    const double t0 = fp_bench_wall_ms();
    while (st == FP_OK && fp_bench_wall_ms() - t0 < SETTLE_MS) {
      st = fp_flusher_flush(&rs->flush);
      if (st == FP_OK)
        st = fp_plan_execute(plan, in, out);
      if (st == FP_OK)
        st = fp_finish(rs->ctx);
    }
  }
  rs->held_high = cnt.bytes_current;
  return st;
}

/* Times the plan: warm-up, then timed repetitions. Returns FP_OK or a
 * failure; *interrupted is set (and nothing timed) when stopped. */
static fp_status time_plan(run_state *rs, fp_plan *plan, fp_buffer **in, fp_buffer **out,
                           fp_bench_stats *stats, int64_t *reps, bool *interrupted) {
  fp_context *ctx = rs->ctx;
  fp_status settled = settle_after_frees(rs, plan, in, out);
  if (settled != FP_OK)
    return settled;
  /* a first estimate sizes the warm-up; a second one, after it (clocks up,
   * caches and allocators warm), sizes the repetitions */
  double flush_ms = 0, exec_ms = 0;
  fp_status st = estimate(rs, plan, in, out, &flush_ms, &exec_ms);
  int64_t warm = st == FP_OK ? fp_bench_warmup_count(rs->spec, exec_ms) : 0;
  const double warm_t0 = fp_bench_wall_ms();
  for (int64_t k = 0; st == FP_OK && k < warm; ++k) {
    if (stopped(rs)) {
      *interrupted = true;
      (void)fp_finish(ctx);
      return FP_OK;
    }
    st = fp_plan_execute(plan, in, out);
  }
  /* the host's time to issue one run (the warm-up runs back to back: the
   * host waits for nothing but its own work) */
  const double issue_ms = warm > 0 ? (fp_bench_wall_ms() - warm_t0) / (double)warm : 0.0;
  if (st == FP_OK && warm > 0)
    st = estimate(rs, plan, in, out, &flush_ms, &exec_ms);
  if (st != FP_OK)
    return st;
  const int flushes =
      fp_context_backend(ctx) == FP_BACKEND_CPU ? 1 : fp_bench_flush_count(issue_ms, flush_ms);
  int64_t n = fp_bench_rep_count(rs->spec, exec_ms, flush_ms * flushes);
  if (st == FP_OK && n > rs->samples_cap) {
    double *s = realloc(rs->samples, sizeof *s * (size_t)n);
    if (s == NULL)
      return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory for %lld samples", (long long)n);
    rs->samples = s;
    rs->samples_cap = n;
  }
  for (int64_t done = 0; st == FP_OK && done < n;) {
    int chunk = n - done < CHUNK ? (int)(n - done) : CHUNK;
    for (int i = 0; st == FP_OK && i < chunk; ++i) {
      if (stopped(rs)) {
        *interrupted = true;
        (void)fp_finish(ctx);
        return FP_OK;
      }
      /* the flushes are enqueued before the start event: outside the time */
      for (int f = 0; st == FP_OK && f < flushes; ++f)
        st = fp_flusher_flush(&rs->flush);
      if (st == FP_OK)
        st = fp_event_record(ctx, rs->start[i]);
      if (st == FP_OK)
        st = fp_plan_execute(plan, in, out);
      if (st == FP_OK)
        st = fp_event_record(ctx, rs->end[i]);
    }
    if (st == FP_OK)
      st = fp_event_synchronize(ctx, rs->end[chunk - 1]);
    for (int i = 0; st == FP_OK && i < chunk; ++i) {
      double ms = 0;
      st = fp_event_elapsed_ms(ctx, rs->start[i], rs->end[i], &ms);
      rs->samples[done + i] = ms * 1e3;
    }
    done += chunk;
  }
  if (st != FP_OK)
    return st;
  *reps = n;
  return fp_bench_stats_of(rs->samples, (int)n, stats);
}

/* Runs one variant of a group on its (filled) inputs. */
static void run_variant(run_state *rs, const fp_bench_group *g, const fp_variant *v,
                        const fp_io_desc *io, fp_buffer **in, fp_buffer **out,
                        const fp_host_tensor *views, const fp_row_sample *rows,
                        const ref_cache *cache, fp_cell *c, bool *interrupted) {
  fp_context *ctx = rs->ctx;
  const fp_problem *p = &g->problem;
  note_held_bytes(rs);
  fp_counters_reset(ctx); /* the peak restarts from the live bytes (inputs, outputs) */
  fp_counters cnt;
  /* Build the variant's kernel families first: outside any timing. */
  fp_cost cost;
  fp_status st = fp_variant_cost(p, v, fp_context_device(ctx), &cost);
  if (st != FP_OK) {
    cell_failed(c, st, "cost model");
    return;
  }
  double compile_ms = 0;
  bool seen[FPF_COUNT] = {false};
  for (int k = 0; k < cost.n_kernel_ids; ++k) {
    fp_kernel_family fam = fp_kernel_family_of(cost.kernel_ids[k]);
    if ((unsigned)fam >= FPF_COUNT || seen[fam])
      continue;
    seen[fam] = true;
    double ms = 0;
    st = fp_kernel_prepare(ctx, cost.kernel_ids[k], &ms);
    if (st != FP_OK) {
      cell_failed(c, st, "kernel build");
      return;
    }
    compile_ms += ms;
  }
  if (cost.library_calls > 0) { /* the library's handles or kernels for the type */
    double ms = 0;
    st = fp_library_gemm_prepare(ctx, fp_bench_compute_dtype(p), &ms);
    if (st != FP_OK) {
      cell_failed(c, st, "library");
      return;
    }
    compile_ms += ms;
  }
  c->compile_ms = compile_ms;
  fp_counters_get(ctx, &cnt);
  uint64_t before = cnt.bytes_current;
  fp_plan *plan = NULL;
  st = fp_plan_create(ctx, p, v, &plan);
  if (st != FP_OK) {
    cell_failed(c, st, "plan");
    return;
  }
  fp_counters_get(ctx, &cnt);
  c->footprint_bytes = (double)(cnt.bytes_current - before);
  /* the checked run, which also counts the launches */
  st = fp_io_poison_outputs(ctx, io, out);
  uint64_t launched = 0, calls = 0;
  if (st == FP_OK) {
    fp_counters_get(ctx, &cnt);
    launched = cnt.kernels_launched;
    calls = cnt.library_calls;
    st = fp_plan_execute(plan, in, out);
    fp_counters_get(ctx, &cnt);
    launched = cnt.kernels_launched - launched;
    calls = cnt.library_calls - calls;
  }
  fp_accuracy acc;
  memset(&acc, 0, sizeof acc);
  if (st == FP_OK) {
    fp_op shim = shim_of(p->op);
    fp_problem q = *p;
    q.op = &shim;
    active_cache = cache;
    st = fp_check_outputs(ctx, &q, io, views, out, rows, &acc);
    active_cache = NULL;
  }
  if (st != FP_OK) {
    cell_failed(c, st, "run");
    fp_plan_destroy(plan);
    return;
  }
  c->kernels = (double)launched;
  c->library_calls = (double)calls;
  c->max_abs_err = acc.max_abs_err;
  c->max_rel_err = acc.max_rel_err;
  c->rel_l2_err = acc.rel_l2_err;
  const fp_cost plan_cost = *fp_plan_cost(plan); /* a copy: the plan goes before its use */
  const fp_cost *pc = &plan_cost;
  bool count_ok = launched == (uint64_t)pc->kernels && calls == (uint64_t)pc->library_calls;
  fp_bench_stats stats;
  int64_t reps = 0;
  st = time_plan(rs, plan, in, out, &stats, &reps, interrupted);
  fp_counters_get(ctx, &cnt);
  fp_plan_destroy(plan);
  if (*interrupted)
    return;
  if (st != FP_OK) {
    cell_failed(c, st, "timing");
    return;
  }
  c->median_us = stats.median;
  c->min_us = stats.min;
  c->max_us = stats.max;
  c->reps = (double)reps;
  c->bytes = (double)(pc->bytes_read + pc->bytes_written);
  c->flops = pc->flops;
  if (stats.median > 0) {
    c->gbps = c->bytes / (stats.median * 1e3);
    c->gflops = c->flops / (stats.median * 1e3);
    if (rs->copy_gbps > 0)
      c->bw_frac = c->gbps / rs->copy_gbps;
    c->roof_frac =
        fp_bench_roof_frac(c->bytes, c->flops, stats.median, rs->copy_gbps,
                           fp_results_peak(rs->meta, fp_dtype_name(fp_bench_compute_dtype(p))));
  }
  c->peak_bytes = (double)(cnt.bytes_peak - rs->baseline);
  c->ok = acc.ok && count_ok;
  c->status = c->ok ? FP_CELL_OK : FP_CELL_FAIL;
  if (!acc.ok)
    snprintf(c->message, sizeof c->message,
             "%lld of %lld checked elements outside the tolerance; "
             "first: %s",
             (long long)acc.bad, (long long)acc.checked, acc.first_bad);
  else if (!count_ok)
    snprintf(c->message, sizeof c->message,
             "the backend counted %llu kernel launches and %llu library calls, the cost model "
             "says %d and %d",
             (unsigned long long)launched, (unsigned long long)calls, pc->kernels,
             pc->library_calls);
}

/* Rounds v to `digits` significant digits: the files stay readable and a
 * value read back prints the same. NaN stays NaN. */
static double round_sig(double v, int digits) {
  if (!isfinite(v) || v == 0)
    return v;
  char buf[64];
  snprintf(buf, sizeof buf, "%.*g", digits, v);
  return strtod(buf, NULL);
}

static void tidy_cell(fp_cell *c) {
  /* times to the nanosecond, derived rates and errors to 6 digits */
  double *times[] = {&c->median_us, &c->min_us, &c->max_us};
  for (size_t k = 0; k < sizeof times / sizeof times[0]; ++k)
    if (isfinite(*times[k]))
      *times[k] = round(*times[k] * 1e3) / 1e3;
  double *rates[] = {&c->gbps,       &c->bw_frac,     &c->roof_frac,   &c->gflops,
                     &c->compile_ms, &c->max_abs_err, &c->max_rel_err, &c->rel_l2_err};
  for (size_t k = 0; k < sizeof rates / sizeof rates[0]; ++k)
    *rates[k] = round_sig(*rates[k], 6);
}

/* The identity of the group's cells (op, variant, backend, params, shape). */
static void init_group_cells(const run_state *rs, const fp_bench_group *g, fp_cell *cells) {
  const fp_bench_spec *s = rs->spec;
  for (int v = 0; v < s->n_variants; ++v) {
    fp_cell *c = &cells[v];
    fp_cell_init(c);
    snprintf(c->op, sizeof c->op, "%s", s->ops[g->op_index]->name);
    snprintf(c->variant, sizeof c->variant, "%s", s->variants[v]);
    snprintf(c->backend, sizeof c->backend, "%s", fp_backend_name(fp_context_backend(rs->ctx)));
    snprintf(c->params, sizeof c->params, "%s", g->params);
    c->shape = s->shapes[g->shape_index];
  }
}

/* Runs the variants of a group that `todo` marks; fills cells[v] for those. */
static void run_group(run_state *rs, const fp_bench_group *g, const bool *todo, fp_cell *cells,
                      int *done, int total, bool *interrupted) {
  const fp_bench_spec *s = rs->spec;
  const fp_op *op = s->ops[g->op_index];
  fp_context *ctx = rs->ctx;
  init_group_cells(rs, g, cells);
  for (int v = 0; v < s->n_variants; ++v) {
    fp_cell *c = &cells[v];
    if (todo[v] && g->setup_status != FP_OK) {
      c->status = FP_CELL_ERROR;
      snprintf(c->message, sizeof c->message, "problem: %.480s", g->setup_error);
    }
  }
  if (g->setup_status != FP_OK)
    return;
  fp_io_desc io;
  op->describe(&g->problem, &io);
  fp_buffer *in[FP_MAX_TENSORS] = {NULL}, *out[FP_MAX_TENSORS] = {NULL};
  fp_status st = fp_io_alloc(ctx, &io, in, out);
  const char *what = "inputs and outputs";
  if (st == FP_OK)
    st = fp_io_fill_inputs(ctx, &io, s->seed, in);
  fp_host_tensor views[FP_MAX_TENSORS];
  fp_host_inputs_generated(&io, s->seed, views);
  fp_row_sample rows = fp_row_sample_for(&g->problem, &io, s->sample_elems);
  ref_cache cache;
  memset(&cache, 0, sizeof cache);
  if (st == FP_OK) {
    what = "reference";
    st = ref_cache_build(&cache, &g->problem, &io, views, &rows);
  }
  for (int v = 0; v < s->n_variants && !*interrupted; ++v) {
    if (!todo[v])
      continue;
    if (st != FP_OK) {
      cell_failed(&cells[v], st, what);
    } else {
      run_variant(rs, g, fp_op_variant(op, s->variants[v]), &io, in, out, views, &rows, &cache,
                  &cells[v], interrupted);
    }
    tidy_cell(&cells[v]);
    if (!*interrupted && rs->hooks != NULL && rs->hooks->on_cell != NULL)
      rs->hooks->on_cell(rs->hooks->user, &cells[v], ++*done, total);
  }
  ref_cache_free(&cache);
  fp_io_free(&io, in, out);
}

/* The plan's group of a key's op, params and shape (meta.running), or -1. */
static int group_of(const fp_bench_spec *s, const fp_bench_plan *plan, const fp_cell *key) {
  for (int gi = 0; gi < plan->n_groups; ++gi) {
    const fp_bench_group *g = &plan->groups[gi];
    if (fp_bench_in_shard(s, g) && strcmp(s->ops[g->op_index]->name, key->op) == 0 &&
        strcmp(g->params, key->params) == 0 &&
        fp_shape_equal(&s->shapes[g->shape_index], &key->shape))
      return gi;
  }
  return -1;
}

void fp_bench_count(const fp_results *r, fp_bench_summary *sum) {
  memset(sum->count, 0, sizeof sum->count);
  for (int k = 0; k < r->n_cells; ++k)
    if ((unsigned)r->cells[k].status < FP_CELL_STATUS_COUNT)
      sum->count[r->cells[k].status]++;
}

fp_status fp_bench_run(fp_context *ctx, const fp_bench_spec *s, fp_results *r,
                       const fp_bench_hooks *hooks, fp_bench_summary *sum) {
  memset(sum, 0, sizeof *sum);
  if (ctx == NULL || s == NULL || r == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_bench_run: NULL argument");
  fp_bench_plan plan;
  fp_status st = fp_bench_plan_build(s, &plan);
  if (st != FP_OK)
    return st;
  st = fp_bench_sort_cells(s, &plan, r);
  if (st != FP_OK) {
    fp_bench_plan_free(&plan);
    return st;
  }
  sum->total = fp_bench_cell_count(s, &plan);
  sum->resumed = r->n_cells;

  run_state rs;
  memset(&rs, 0, sizeof rs);
  rs.ctx = ctx;
  rs.spec = s;
  rs.hooks = hooks;
  rs.copy_gbps = r->meta.copy_gbps;
  rs.meta = &r->meta;
  st = fp_flusher_init(&rs.flush, ctx, s);
  for (int k = 0; st == FP_OK && k < CHUNK; ++k) {
    st = fp_event_create(ctx, &rs.start[k]);
    if (st == FP_OK)
      st = fp_event_create(ctx, &rs.end[k]);
  }
  fp_counters cnt;
  fp_counters_get(ctx, &cnt);
  rs.baseline = cnt.bytes_current;
  /* a file left by a process that died inside a group: that group goes first */
  const int died_gi = r->meta.running ? group_of(s, &plan, &r->meta.running_key) : -1;
  const int died_attempt = r->meta.running_attempt > 1 ? r->meta.running_attempt : 1;
  r->meta.running = false;
  int done = r->n_cells, groups_run = 0;
  int64_t last_rank = r->n_cells > 0 ? fp_bench_cell_rank(s, &plan, &r->cells[r->n_cells - 1]) : -1;
  for (int step = died_gi >= 0 ? -1 : 0; st == FP_OK && step < plan.n_groups; ++step) {
    if (step >= 0 && step == died_gi)
      continue; /* ran first */
    const int gi = step < 0 ? died_gi : step;
    const fp_bench_group *g = &plan.groups[gi];
    if (!fp_bench_in_shard(s, g))
      continue;
    const fp_op *op = s->ops[g->op_index];
    bool todo[FP_MAX_VARIANTS] = {false}, any = false;
    for (int v = 0; v < s->n_variants; ++v) {
      if (!op_has_variant(op, s->variants[v]))
        continue;
      fp_cell key;
      fp_cell_init(&key);
      snprintf(key.op, sizeof key.op, "%s", op->name);
      snprintf(key.variant, sizeof key.variant, "%s", s->variants[v]);
      snprintf(key.params, sizeof key.params, "%s", g->params);
      key.shape = s->shapes[g->shape_index];
      todo[v] = fp_results_find(r, &key) < 0;
      any = any || todo[v];
    }
    if (!any)
      continue;
    if (stopped(&rs)) {
      sum->interrupted = true;
      break;
    }
    fp_cell cells[FP_MAX_VARIANTS];
    bool interrupted = false;
    int done_before = done;
    fp_cell key;
    fp_cell_init(&key);
    snprintf(key.op, sizeof key.op, "%s", op->name);
    snprintf(key.params, sizeof key.params, "%s", g->params);
    key.shape = s->shapes[g->shape_index];
    if (gi == died_gi && died_attempt >= FP_BENCH_GROUP_ATTEMPTS) {
      /* it died on its retry too: running it again would most likely hang
       * or crash again */
      init_group_cells(&rs, g, cells);
      for (int v = 0; v < s->n_variants; ++v) {
        if (!todo[v])
          continue;
        snprintf(cells[v].message, sizeof cells[v].message,
                 "not run: the process died inside this (op, shape) %s (killed or crashed: a "
                 "preemption, a hang stopped by a timeout, a driver fault); --resume "
                 "--retry-errors runs it again",
                 died_attempt == 2 ? "twice" : "more than twice");
        sum->died++;
        if (hooks != NULL && hooks->on_cell != NULL)
          hooks->on_cell(hooks->user, &cells[v], ++done, sum->total);
      }
    } else {
      r->meta.running = true;
      r->meta.running_key = key;
      r->meta.running_attempt = gi == died_gi ? died_attempt + 1 : 1;
      if (hooks != NULL && hooks->on_group_start != NULL)
        st = hooks->on_group_start(hooks->user, r);
      if (st == FP_OK)
        run_group(&rs, g, todo, cells, &done, sum->total, &interrupted);
      r->meta.running = false;
      if (st != FP_OK)
        break;
    }
    if (interrupted) { /* nothing of a half-run group is kept */
      done = done_before;
      sum->interrupted = true;
      /* it was abandoned, not died in: the file must not say it is running */
      if (hooks != NULL && hooks->on_group != NULL)
        st = hooks->on_group(hooks->user, r);
      break;
    }
    bool in_order = true;
    for (int v = 0; st == FP_OK && v < s->n_variants; ++v) {
      if (!todo[v])
        continue;
      st = fp_results_add(r, &cells[v]);
      int64_t rank = (int64_t)g->index * FP_MAX_VARIANTS + v;
      in_order = in_order && rank > last_rank;
      last_rank = rank > last_rank ? rank : last_rank;
      sum->ran++;
    }
    if (st == FP_OK && !in_order)
      st = fp_bench_sort_cells(s, &plan, r);
    fp_counters_get(ctx, &cnt);
    if (cnt.bytes_current > rs.baseline) { /* a leak of the layer or an op: report, go on */
      sum->leaked_bytes += cnt.bytes_current - rs.baseline;
      rs.baseline = cnt.bytes_current;
    }
    if (st == FP_OK && hooks != NULL && hooks->on_group != NULL)
      st = hooks->on_group(hooks->user, r);
    ++groups_run;
    if (hooks != NULL && hooks->stop_after_groups > 0 && groups_run >= hooks->stop_after_groups) {
      /* as if a signal came now: interrupted only if cells remain */
      sum->interrupted = r->n_cells < sum->total;
      break;
    }
  }
  for (int k = 0; k < CHUNK; ++k) {
    fp_event_destroy(rs.start[k]);
    fp_event_destroy(rs.end[k]);
  }
  fp_flusher_free(&rs.flush);
  free(rs.samples);
  fp_bench_plan_free(&plan);
  fp_bench_count(r, sum);
  return st;
}
