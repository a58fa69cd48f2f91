/* fuseport CUDA backend: the launch planner of the ROWS kernels, in plain C
 * so that its rule and the preconditions it keeps are unit-tested on any
 * machine (tests/test_cuda_plan.c), GPU or not.
 *
 * The host asks for a ROWS launch (kernels.def: a block per row, its size
 * from N). The CUDA family may hold further builds of the same function for
 * part of the argument range (cuda_kernels.h, kernels/cu/reduce.cu and
 * horizontal.cu); a ROWS kernel's result never depends on the geometry, so
 * the backend may launch any of them with a geometry of its own, as long as
 * each build's precondition holds:
 *   WARP_SHORT  a warp (rows of up to 64 floats: 4 or 16 of its lanes,
 *               FP_ROWS_WARP_LANES_LOG2) per row, 8 to 64 rows per 256-thread
 *               block, rows of at most 128 * warp_short_vectors floats (the
 *               cache per lane);
 *   WARP        the same with warp_vectors per lane;
 *   CLUSTER     sm_90+: a cluster of C (2..16) blocks per row; each block's
 *               share of the row, ceil(ceil(N/4) / C) float4 vectors, fits
 *               cluster_vectors per thread (0: the build streams, any share)
 *               or, where the offer has cluster_smem_arrays, the dynamic
 *               shared memory of fp_cuda_cluster_smem_bytes;
 *   LONG_ROWS   a block per row, a deeper register cache (long_vectors per
 *               thread); any block size (rows the cache cannot hold stream);
 *   STREAM      a block per row that streams every row (no register cache to
 *               hold, so more loads in flight without spills); any geometry.
 */
#ifndef FUSEPORT_CUDA_PLAN_H
#define FUSEPORT_CUDA_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fp_rows_build {
  FP_ROWS_REGISTERED = -1, /* the registered build, the host's geometry */
  FP_ROWS_LONG = 0,        /* slots of fp_cuda_tuning.builds */
  FP_ROWS_WARP_SHORT = 1,
  FP_ROWS_WARP = 2,
  FP_ROWS_CLUSTER = 3,
  FP_ROWS_STREAM = 4
} fp_rows_build;

/* What a kernel offers: the builds it has and their capacities. */
typedef struct fp_rows_builds {
  bool has[5];               /* indexed by fp_rows_build (>= 0) */
  int warp_short_vectors;    /* float4 per lane of WARP_SHORT */
  int warp_vectors;          /* float4 per lane of WARP */
  int cluster_vectors;       /* float4 per thread of CLUSTER, 0: it streams */
  int long_vectors;          /* float4 per thread of LONG_ROWS' cache, 0: keep the host's block */
  uint32_t full_block;       /* the largest block of the registered build that the register
                                file keeps resident two at a time (0: no limit) */
  int stage_rows;            /* row arrays LONG_ROWS stages in shared memory (RowStage in
                                device_rows.cuh), 0: it does not stage */
  bool cluster_many_rows;    /* CLUSTER also for many rows that LONG_ROWS would stream and
                                CLUSTER caches (measured faster for this kernel) */
  uint32_t stream_block_cap; /* a registered build that streams its rows (no LONG_ROWS):
                                the most threads of its blocks of one round of two float4
                                per thread for many rows of 1025..4096 floats (0: the
                                host's block) */
  int32_t stream_half_long_min_n; /* STREAM in blocks of 512 also for many rows of at least
                                this many floats that LONG_ROWS caches only in blocks of
                                1024 (measured faster for this kernel; cuda_plan.c), 0:
                                never */
  int32_t stream_smem_min_n;      /* STREAM keeps its input rows of at least this many floats
                                     in dynamic shared memory for its later passes (SmemRow in
                                     device_rows.cuh), 0: none */
  int cluster_smem_arrays;        /* row arrays CLUSTER keeps in dynamic shared memory where
                                     its register cache cannot hold a block's share
                                     (RowCache<kSmemCache> in device_rows.cuh), 0: none */
  int32_t cluster_smem_min_n;     /* ... for rows of more than this many floats only (and
                                     more than 65536 in any case) */
  uint32_t cluster_smem_max;      /* the most dynamic shared memory CLUSTER may be launched
                                     with, set by the backend from the device (0: no shared-
                                     memory cache) */
  int32_t stream_l1_min_n;        /* STREAM in blocks of 128 or 256 for many rows of ... */
  int32_t stream_l1_max_n;        /* ... stream_l1_min_n..stream_l1_max_n floats, small enough
                                     that the rows of the blocks an SM holds stay in L1
                                     between passes (measured faster for this kernel;
                                     cuda_plan.c), 0: never */
} fp_rows_builds;

/* The lanes of the team that holds a row in the warp builds (WarpTeam in
 * device_rows.cuh), as log2: 4 lanes for rows of up to 16 floats, 16 up to
 * 64, the whole warp for longer ones; 4 lanes at least, one per head or
 * tail scalar of its row (up to 3 each). The kernels (one instantiation
 * per width) and the planner's grid (a block of 256 threads holds
 * 256 >> lanes_log2 rows) follow this one rule. Short rows then keep the
 * lanes busy and need fewer shuffle steps per reduction: a warp per row of
 * 7 floats left 25 of its 32 lanes idle. */
#define FP_ROWS_WARP_LANES_LOG2(N) ((N) <= 16 ? 2 : (N) <= 64 ? 4 : 5)

typedef struct fp_rows_plan {
  fp_rows_build build;
  uint32_t grid, block, cluster; /* 1-D; cluster 1: none */
} fp_rows_plan;

/* Which builds the planner may use: all of them where they were measured
 * faster (tuned, the default: 1.10x the block policy over 24 row shapes on
 * an H200, 2026-11-23), or only the registered and long-row builds, the
 * block per row the seed-grid results of docs/results (at 120e041) were taken with. */
typedef enum fp_rows_policy {
  FP_ROWS_POLICY_BLOCK = 0,
  FP_ROWS_POLICY_TUNED = 1,
  /* tuned, and a cluster per row also for many rows wherever a block's
   * cache would stream the row and a cluster's holds it, for every kernel
   * (tuned does so only for those whose offer says cluster_many_rows) */
  FP_ROWS_POLICY_CLUSTER = 2
} fp_rows_policy;

/* The launch of a ROWS kernel over M rows of N for a host request of
 * host_groups groups of host_block threads, on a device of compute
 * capability cc_major with sm_count multiprocessors that places clusters of
 * up to max_cluster blocks (8, the portable size; 16 where the kernel may
 * take non-portable sizes, as on an H100). */
fp_rows_plan fp_cuda_plan_rows(fp_rows_policy policy, const fp_rows_builds *builds, int64_t M,
                               int64_t N, uint32_t host_groups, uint32_t host_block, int cc_major,
                               int sm_count, int max_cluster);

/* The dynamic shared memory a CLUSTER plan keeps its blocks' shares in
 * (RowCache<kSmemCache>): cluster_smem_arrays arrays of ceil(share / block)
 * float4 per thread, share = ceil(ceil(N/4) / C); 0 for a plan whose shares
 * the register cache holds (cluster_vectors per thread), for another build
 * and for an offer without the shared-memory cache. */
uint64_t fp_cuda_cluster_smem_bytes(const fp_rows_builds *builds, const fp_rows_plan *plan,
                                    int64_t N);

/* ---- staging (LONG_ROWS) -----------------------------------------------------
 * The long-row build can stage the next row of its loop in dynamic shared
 * memory while it reduces and writes the current one (device_rows.cuh,
 * RowStage): it then runs as a persistent grid, at most the blocks that
 * stay resident at once. The stage holds stage_rows arrays of long_vectors
 * float4 per thread, and is used only where every row is cached
 * (N <= 4 * long_vectors * block). */

/* The dynamic shared memory a LONG_ROWS plan stages with, in bytes; 0 when
 * it cannot stage (another build, no stage in the offer, rows too long for
 * the cache). */
uint64_t fp_cuda_stage_bytes(const fp_rows_builds *builds, const fp_rows_plan *plan, int64_t N);

/* Whether to stage, given the blocks of the plan's size that an SM keeps
 * resident with the stage's shared memory and without it (the occupancy
 * API's answers): only if an SM holds at most two such blocks anyway (more
 * overlap rows by themselves) and the stage costs none of them. If so, the
 * plan's grid becomes at most resident_with_stage * sm_count. */
bool fp_cuda_plan_stage(fp_rows_plan *plan, int resident_with_stage, int resident_without,
                        int sm_count);

/* ---- rows in shared memory (STREAM) ------------------------------------------
 * The streaming build can keep its input row in dynamic shared memory
 * during a row's first pass and read it from there in the later ones
 * (SmemRow in device_rows.cuh). It is given that memory for rows of at
 * least stream_smem_min_n floats, for rows of more than 16384 in blocks of
 * 512 where two whole rows fit and the grid has two rows per SM (of
 * sm_count), and for any row the
 * build gets if any_length (a timing knob): the row's ceil(N/4) float4, or the most the kernel may
 * have (limit: the device's opt-in maximum less the kernel's static shared
 * memory) rounded down to whole float4. 0 for shorter rows, other builds, a
 * kernel that keeps nothing, or a limit below one float4. */
uint64_t fp_cuda_stream_smem_bytes(const fp_rows_builds *builds, const fp_rows_plan *plan,
                                   int64_t N, uint64_t limit, bool any_length, int sm_count);

/* FUSEPORT_CUDA_ROW_BUILDS: "tuned" or unset (the default), "block". NULL
 * and anything else give the default; *unknown is set for anything else. */
fp_rows_policy fp_rows_policy_from_env(const char *value, bool *unknown);

/* ---- ELEM grids ------------------------------------------------------------
 * The host asks for min(ceil(n / block), 32 blocks per SM) blocks of an ELEM
 * kernel (ops/primitives.c, fp_elem_range); the fused elementwise kernels are
 * grid-stride loops, so any grid computes the same result.
 * FUSEPORT_CUDA_ELEM_GRID picks the grid:
 *   tuned    the default: the rule of fp_cuda_plan_elem (cuda_plan.c), from
 *            measurements of the others: waves:8 below 2^22 elements, then
 *            items:U, U the kernel's unroll;
 *   host     the host's grid;
 *   waves:K  at most K blocks per SM (1 <= K <= 64): fewer, longer blocks;
 *   full     one block per 8 * block elements: every thread does two float4
 *            and leaves, no grid-stride loop (Inductor's pointwise shape);
 *   items:K  one block per 4 * K * block elements (1 <= K <= 64): K float4
 *            per thread, all K in flight where K <= the kernel's unroll;
 *            full is items:2. */
typedef enum fp_elem_grid_kind {
  FP_ELEM_GRID_TUNED = 0,
  FP_ELEM_GRID_HOST = 1,
  FP_ELEM_GRID_WAVES = 2,
  FP_ELEM_GRID_FULL = 3
} fp_elem_grid_kind;

typedef struct fp_elem_grid_policy {
  fp_elem_grid_kind kind;
  int blocks_per_sm;      /* FP_ELEM_GRID_WAVES only */
  int vectors_per_thread; /* FP_ELEM_GRID_FULL only; 0 means 2 */
} fp_elem_grid_policy;

/* Parses FUSEPORT_CUDA_ELEM_GRID (NULL or empty: tuned). Returns false, and
 * the tuned policy, for anything it does not know. */
bool fp_elem_grid_policy_from_env(const char *value, fp_elem_grid_policy *policy);

/* The grid of an ELEM launch over n elements for a host request of
 * host_groups blocks of `block` threads; at least 1, at most max_grid.
 * `three_streams`: the kernel reads two operands of n elements and writes
 * one (bias_dropout_add), where the others read one and write one; the
 * tuned rule treats the two kinds differently. */
uint32_t fp_cuda_plan_elem(fp_elem_grid_policy policy, int64_t n, bool three_streams,
                           uint32_t host_groups, uint32_t block, int sm_count, uint32_t max_grid);

/* ---- lean ELEM builds -------------------------------------------------------
 * The fused elementwise kernels may have lean builds (device_elem.cuh): the
 * same function written for one schedule in 32-bit offsets, slots of
 * fp_cuda_tuning.builds (rows false). FUSEPORT_CUDA_ELEM_BUILDS=registered
 * keeps the registered build everywhere; "lean" or unset, the default,
 * launches a lean build wherever one fits. */
typedef enum fp_elem_build {
  FP_ELEM_FLAT32 = 0,              /* every operand flat, no dropout */
  FP_ELEM_ROWVEC32 = 1,            /* float4 along rows, no dropout */
  FP_ELEM_ROWVEC32_TRAINING = 2,   /* the same with bias_dropout_add's dropout */
  FP_ELEM_FLATBIAS32 = 3,          /* flat operands and a row-broadcast bias, any N */
  FP_ELEM_FLATBIAS32_TRAINING = 4, /* the same with bias_dropout_add's dropout */
  FP_ELEM_BUILD_COUNT = 5          /* at most FP_CUDA_MAX_BUILDS (cuda_kernels.h) */
} fp_elem_build;

/* An operand of an ELEM kernel over a logical [M, N]: its base address and
 * element strides (0 broadcasts). */
typedef struct fp_elem_operand {
  uint64_t address;
  int64_t s0, s1;
} fp_elem_operand;

/* The lean builds that compute these arguments exactly (bit b: fp_elem_build
 * b), for `count` operands (output first) over [M, N], launched with
 * `threads` threads in all; `training`: the dropout path runs, which only
 * the *_TRAINING builds have. Each build's precondition (device_elem.cuh):
 *   FLAT32       every operand flat ((M == 1 or s0 == N) and (N == 1 or
 *                s1 == 1)) and 16-byte aligned, M*N % 4 == 0;
 *   ROWVEC32*    N % 4 == 0, every operand s1 == 1, s0 >= 0, s0 % 4 == 0,
 *                16-byte aligned, its last offset (M-1)*s0 + N-1 < 2^31;
 *   FLATBIAS32*  N % 4 != 0 (where ROWVEC32 cannot run), at least 3
 *                operands: operand 2 (the bias of bias_gelu and
 *                bias_dropout_add) a row broadcast ((M == 1 or s0 == 0)
 *                and (N == 1 or s1 == 1)), every other one flat and 16-byte
 *                aligned;
 *   all          M*N < 2^31 and 4 * threads < 2^31 (32-bit indices). */
unsigned fp_cuda_plan_elem_builds(int64_t M, int64_t N, const fp_elem_operand *operands, int count,
                                  bool training, uint64_t threads);

/* A lean build takes U float4 per thread (its unroll: 4, or 2 for
 * bias_dropout_add) in chunks of U * block where that leaves at least
 * FP_ELEM_MIN_CHUNKS chunks, else one (elem_chunks, device_elem.cuh). The
 * grid of a lean launch: the ELEM grid, capped at the chunks there are (a
 * block without a chunk only costs its launch). */
#define FP_ELEM_MIN_CHUNKS 128u
/* the unrolls of the fused elementwise kernels (kernels/cu/elementwise.cu):
 * float4 per thread in flight, for two streams (one read, one written) and
 * for bias_dropout_add's three */
#define FP_ELEM_UNROLL 4
#define FP_ELEM_UNROLL_THREE_STREAMS 2
uint32_t fp_cuda_plan_elem_lean_grid(uint32_t grid, int64_t n, int unroll, uint32_t block);

/* Parses FUSEPORT_CUDA_ELEM_BUILDS (NULL or empty: lean): *lean, and false
 * for anything but "lean" and "registered". */
bool fp_elem_builds_from_env(const char *value, bool *lean);

#ifdef __cplusplus
}
#endif

#endif
