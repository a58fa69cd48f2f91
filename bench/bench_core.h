/* fuseport benchmark core: the sweep engine behind `fuseport bench`.
 *
 * Backend-agnostic: it talks to a device only through the backend layer
 * (backend.h) and to operators only through the registry (op.h), so every
 * op runs on every backend the same way.
 *
 * A sweep is a list of groups in a canonical order -- op (in the order of the
 * selection), then shape (the spec's shapes of the op's rank: dim0 x dim1 for
 * the row ops, M x N x K for a GEMM), then parameter combination -- and each
 * group runs every selected variant on the same inputs:
 *
 *   allocate and fill the inputs once (seeded, never zeros)
 *   compute the float64 reference once (sampled rows for large cells)
 *   for each variant:
 *     build its kernels and ready its library (compile_ms, outside timing);
 *     create the plan
 *     (footprint = the layer's bytes for the intermediates)
 *     poison the outputs, run once counting launches and library calls,
 *     check against the reference
 *     warm up, then time repetitions with device events, the last-level
 *     cache flushed (a buffer of >= 2x L2 written, or read) before each one
 *   free everything
 *
 * A cell that runs out of memory is recorded "oom", a variant the backend
 * cannot run (FP_ERR_UNSUPPORTED) "unsupported", any other failure "error"
 * with its message, a wrong result "fail" (still timed); the sweep goes on. Nothing here exits or
 * prints: statuses come back to the caller, which also owns checkpointing (after every group) and
 * signals.
 *
 * A process can also die inside a group (SIGKILL from a scheduler that
 * preempts the job, a hang stopped by a timeout, a driver fault): the
 * caller's checkpoint before the group (on_group_start) leaves the group in
 * the file as meta.running with its attempt. A resumed run retries such a
 * group once, as the first group it runs (so as its own attempt, with
 * nothing run before it in that process), and records its cells as error
 * only when the process died inside it FP_BENCH_GROUP_ATTEMPTS times.
 */
#ifndef FUSEPORT_BENCH_CORE_H
#define FUSEPORT_BENCH_CORE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "op.h"
#include "results.h"

#define FP_BENCH_MAX_OPS 64
#define FP_BENCH_MAX_SHAPES 1024
#define FP_BENCH_MAX_PARAMS 16
#define FP_BENCH_MAX_COMBOS 256

/* Runs of one group before --resume gives up on it: a process that dies
 * inside a group once (a preemption, most likely) gets it retried; twice,
 * its cells are recorded as error. */
#define FP_BENCH_GROUP_ATTEMPTS 2

/* Timing defaults (see fp_bench_rep_count). */
#define FP_BENCH_DEFAULT_WARMUP_MS 10.0
#define FP_BENCH_DEFAULT_REP_MS 40.0
#define FP_BENCH_MIN_REPS 5
#define FP_BENCH_MAX_REPS 10000
#define FP_BENCH_DEFAULT_SEED 20230814u
/* Reference check budget: output+input elements the sampled rows may touch. */
#define FP_BENCH_DEFAULT_SAMPLE_ELEMS (1 << 20)

/* The row ops' shapes (ops whose seed_shapes/default_shapes are NULL): the
 * seed study's grid, dim0 and dim1 in {128, 256, ..., 65536}, and the quick
 * default dim0 {256, 1024} x dim1 {256, 2048}. */
#define FP_BENCH_SEED_GRID_SIDE 10
extern const int64_t fp_bench_default_dim0[2], fp_bench_default_dim1[2];

/* What to sweep and how to time it. Everything here is recorded in the
 * results file's meta.options and must match for --resume and merge. */
typedef struct fp_bench_spec {
  const fp_op *ops[FP_BENCH_MAX_OPS];
  int n_ops;
  char variants[FP_MAX_VARIANTS][32]; /* in output order */
  int n_variants;
  /* shapes of any rank; each op runs those of its rank (fp_op_grid_rank) */
  fp_shape shapes[FP_BENCH_MAX_SHAPES];
  int n_shapes;
  /* --param NAME=V1[,V2...]: applies to the selected ops that have NAME; a
   * list sweeps the values (every combination of the lists) */
  struct {
    char name[64];
    char values[256];
  } params[FP_BENCH_MAX_PARAMS];
  int n_params;
  uint64_t seed;
  int64_t reps;     /* > 0: exactly this many timed repetitions */
  double rep_ms;    /* reps == 0: repeat for about this long (flushes included) */
  double warmup_ms; /* untimed runs before the timed ones */
  int64_t min_reps, max_reps;
  int64_t sample_elems; /* reference budget per cell (0: check every row) */
  /* cache flush buffer; 0: fp_bench_flush_bytes of the device's reported
   * last-level cache (set it where a driver reports the cache wrong) */
  uint64_t flush_bytes;
  /* --flush read: flush by reading the buffer (a row-sum kernel) rather
   * than writing it; the write leaves the cache full of dirty lines, which
   * the timed kernel then pays to write back (as after any producer
   * kernel), the read leaves it clean */
  bool flush_read;
  int shard_index, shard_count; /* shard_count <= 1: the whole sweep */
} fp_bench_spec;

/* Defaults: every op, fused and unfused, no shapes (the caller adds them). */
void fp_bench_spec_init(fp_bench_spec *s);
/* The variants of the selected ops, in order of first appearance (fused,
 * unfused, vendor): the command's default. */
void fp_bench_spec_all_variants(fp_bench_spec *s);
/* The shapes of `--shapes seed` / of the default: each selected op's
 * seed_shapes / default_shapes (the row ops' seed grid / 2 x 2 default where
 * NULL), their union in op order without repeats. FP_ERR_INVALID_ARGUMENT
 * past FP_BENCH_MAX_SHAPES. */
fp_status fp_bench_spec_seed_shapes(fp_bench_spec *s);
fp_status fp_bench_spec_default_shapes(fp_bench_spec *s);
/* How many of the spec's shapes have the op's rank. */
int fp_bench_op_shape_count(const fp_bench_spec *s, const fp_op *op);
/* Checks the spec as a whole (variants the ops lack, params no op has or
 * values that do not parse, an op with no shape of its rank, shard out of
 * range...). */
fp_status fp_bench_spec_validate(const fp_bench_spec *s);

/* The spec as meta.options and back. `with_shard` false leaves the shard
 * out (merge compares shards on everything else). */
cJSON *fp_bench_spec_to_json(const fp_bench_spec *s, bool with_shard);
fp_status fp_bench_spec_from_json(const cJSON *options, fp_bench_spec *s);
/* "I/N" (--shard, meta.options.shard): decimal integers with 0 <= I < N,
 * nothing else; false otherwise. */
bool fp_bench_parse_shard(const char *text, int *index, int *count);

/* ---- the sweep as groups ----------------------------------------------------------- */

typedef struct fp_bench_group {
  int index; /* canonical position among every group of the sweep (all shards) */
  int op_index, shape_index, combo_index;
  fp_problem problem;
  char params[256];       /* cell.params of the group's cells */
  fp_status setup_status; /* the problem could not be set (shape out of the op's range) */
  char setup_error[512];
} fp_bench_group;

typedef struct fp_bench_plan {
  fp_bench_group *groups; /* canonical order, all shards */
  int n_groups;
} fp_bench_plan;

fp_status fp_bench_plan_build(const fp_bench_spec *s, fp_bench_plan *plan);
void fp_bench_plan_free(fp_bench_plan *plan);
/* Whether group g belongs to the spec's shard: g.index % count == index
 * (round robin, so every shard gets a share of the large shapes). */
bool fp_bench_in_shard(const fp_bench_spec *s, const fp_bench_group *g);
/* Number of cells the shard of the spec has. */
int fp_bench_cell_count(const fp_bench_spec *s, const fp_bench_plan *plan);
/* Canonical rank of a cell in the plan (group index * variants + variant
 * index), or -1 when the cell is not part of the sweep. */
int64_t fp_bench_cell_rank(const fp_bench_spec *s, const fp_bench_plan *plan, const fp_cell *c);
/* Sorts r's cells into canonical order; FP_ERR_INVALID_ARGUMENT (naming the
 * first one) when a cell is not part of the sweep. */
fp_status fp_bench_sort_cells(const fp_bench_spec *s, const fp_bench_plan *plan, fp_results *r);

/* ---- timing pieces (pure, tested) -------------------------------------------------------- */

typedef struct fp_bench_stats {
  double median, min, max;
} fp_bench_stats;

/* Median (mean of the middle two for an even count), min and max of n >= 1
 * samples; the samples are not modified. */
fp_status fp_bench_stats_of(const double *samples, int n, fp_bench_stats *out);
/* Flush buffer size: at least twice the last-level cache and at least 8 MiB,
 * a multiple of 4 KiB. */
uint64_t fp_bench_flush_bytes(uint64_t l2_cache_bytes);
/* Timed repetitions for a variant whose one run takes exec_ms and one flush
 * flush_ms: spec->reps when set, else rep_ms / (exec_ms + flush_ms) clamped
 * to [min_reps, max_reps]. */
int64_t fp_bench_rep_count(const fp_bench_spec *s, double exec_ms, double flush_ms);
/* Untimed warm-up runs: warmup_ms / exec_ms, at most max_reps (0 if warmup_ms is 0). */
int64_t fp_bench_warmup_count(const fp_bench_spec *s, double exec_ms);
/* Flushes enqueued ahead of each timed run, so that the GPU is still busy
 * with them when the host has issued the run: a run whose host side takes
 * longer than one flush (a library call's heuristics, a planned launch)
 * would otherwise start late and the wait would be timed. The count covers
 * 1.25x the host's issue time (issue_ms, measured over the warm-up) with
 * flushes of flush_ms each; 1 where either is unknown, at most
 * FP_BENCH_MAX_FLUSHES. PyTorch's harness (bench/torch_bench.py) does the
 * same with a GPU sleep. */
#define FP_BENCH_MAX_FLUSHES 64
int fp_bench_flush_count(double issue_ms, double flush_ms);
/* The flush buffer a run of s on dev uses: s->flush_bytes, else the rule. */
uint64_t fp_bench_run_flush_bytes(const fp_bench_spec *s, const fp_device_info *dev);

/* ---- the roofline (pure, tested) ----------------------------------------------------------- */

/* The element type of a problem's arithmetic: the op's compute_dtype hook,
 * float32 without one. */
fp_dtype fp_bench_compute_dtype(const fp_problem *p);
/* max(bytes / copy bandwidth, flops / peak) / median: the fraction of the
 * roofline a cell reaches. A term whose rate is unknown (NaN or <= 0) is
 * left out; NaN when both are, or without a positive median. */
double fp_bench_roof_frac(double bytes, double flops, double median_us, double copy_gbps,
                          double peak_tflops);
/* Parses FUSEPORT_PEAK_TFLOPS ("f16:989.4,bf16:989.4,f32:66.9") into
 * tflops[dtype] (NaN where not given); FP_ERR_INVALID_ARGUMENT naming the
 * bad entry. */
fp_status fp_bench_parse_peaks(const char *text, double tflops[FP_DTYPE_COUNT]);

/* ---- running ------------------------------------------------------------------------------ */

/* Device-to-device copy bandwidth in GB/s (read + written bytes over time)
 * of fp_buffer_copy on a large buffer, median of several repetitions. */
fp_status fp_bench_copy_bandwidth(fp_context *ctx, double *gbps);

/* The peak FLOP/s of each compute type the sweep's cells use (the whole
 * sweep, every shard), into r's meta.peak_tflops: the one stated in
 * $FUSEPORT_PEAK_TFLOPS where it names the type, else measured with the
 * backend's library GEMM where fp_library_gemm_check allows (an 8192^3
 * square on a GPU, 256^3 on the CPU backend; halved until it fits; the
 * median of 5 repetitions, the cache flushed before each), else null with
 * the reason as its source. FP_ERR_INVALID_ARGUMENT for a malformed
 * FUSEPORT_PEAK_TFLOPS; a failure of the measurement itself is recorded as
 * the type's source, not returned. */
fp_status fp_bench_peak_tflops(fp_context *ctx, const fp_bench_spec *s, fp_results *r);

/* Fills r's meta for a fresh run on ctx (device, versions, date, host,
 * options); copy_gbps is left for the caller. */
fp_status fp_bench_meta_init(fp_context *ctx, const fp_bench_spec *s, fp_results *r);

/* The FUSEPORT_* variables of this process, name -> value, sorted by name
 * (NULL: no host memory). They pick builds, grids and compiler options
 * (FUSEPORT_CUDA_ROW_BUILDS, FUSEPORT_CUDA_ELEM_GRID,
 * FUSEPORT_OPENCL_BUILD_OPTIONS, ...), so a result is reproducible only with
 * them: fp_bench_meta_init records them as meta.environment. */
cJSON *fp_bench_environment(void);

typedef struct fp_bench_hooks {
  /* Checked between repetitions: when it becomes nonzero the running group
   * is abandoned (none of its cells recorded) and the sweep stops. */
  volatile sig_atomic_t *stop;
  /* Test hook: stop as if interrupted after this many groups ran (0: never). */
  int stop_after_groups;
  /* After every cell (progress): cells done in this shard (resumed ones
   * included) and its total. */
  void (*on_cell)(void *user, const fp_cell *cell, int done, int total);
  /* After every group, with r in canonical order: the caller writes it. A
   * failure stops the sweep and is returned. */
  fp_status (*on_group)(void *user, fp_results *r);
  /* Before every group, with r->meta.running set to it and
   * running_attempt to its run (1, or 2 for the retry of a group a process
   * died inside): the caller writes r durably, so that a file left by a
   * process that dies inside the group says so. */
  fp_status (*on_group_start)(void *user, fp_results *r);
  void *user;
} fp_bench_hooks;

typedef struct fp_bench_summary {
  int total;   /* cells in this shard */
  int resumed; /* already in r at the start */
  int ran;     /* recorded by this call */
  int count[FP_CELL_STATUS_COUNT];
  bool interrupted;
  /* cells recorded as error without running: the file said a process died
   * inside their group on its last attempt */
  int died;
  uint64_t leaked_bytes; /* device bytes not freed after a group (should be 0) */
} fp_bench_summary;

/* Runs every cell of the spec's shard that r does not hold yet, adding the
 * new cells to r (kept in canonical order). When r->meta.running names a
 * group (the file of a process that died inside it), that group is run
 * again with running_attempt one higher -- it is the first group missing,
 * so it runs first -- unless that was its FP_BENCH_GROUP_ATTEMPTS-th
 * attempt (0 reads as 1): then its missing cells are recorded as error
 * without running, so a sweep that hangs or crashes on one cell still
 * completes across resumed runs. r's meta must be set: its
 * copy_gbps is used for bw_frac, and with its peak_tflops for roof_frac. Returns FP_OK when the
 * sweep ran (whatever the cells' statuses) or was interrupted; an error only for a failure of the
 * run itself (the flush buffer does not fit, a checkpoint cannot be written). */
fp_status fp_bench_run(fp_context *ctx, const fp_bench_spec *s, fp_results *r,
                       const fp_bench_hooks *hooks, fp_bench_summary *sum);

/* Counts r's cells by status into sum->count (the rest of sum untouched). */
void fp_bench_count(const fp_results *r, fp_bench_summary *sum);

#endif
