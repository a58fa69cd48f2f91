/* fuseport CUDA backend: the ROWS launch planner and the ELEM grid policy
 * (see cuda_plan.h). */
#include "cuda_plan.h"

#include <stdlib.h>
#include <string.h>

enum {
  WARP_BLOCK = 256, /* 8 warps: 8 rows per block */
  MAX_CLUSTER = 8,  /* the portable cluster size */
  /* the largest cluster at all: sm_90 places 16 blocks in one cluster where
   * the kernel allows non-portable sizes (the backend's max_cluster) */
  MAX_NONPORTABLE_CLUSTER = 16,
  CLUSTER_BLOCK_TARGET = 8192, /* floats per block, at most, when C allows */
  CLUSTER_MIN_SHARE = 2048,    /* floats per block, at least, when C grows */
  MAX_BLOCK = 1024,
  MIN_CLUSTER_BLOCK = 128,
  MIN_LONG_BLOCK = 128,
  /* Measured on an H100 (docs/PERF.md, 2026-11-23): a warp per row beats a
   * block per row up to N = 256 (1.3-1.8x at 65536 x 128) and ties or
   * loses beyond (layernorm 0.88 at 65536 x 512)... */
  WARP_MAX_N = 256,
  CLUSTER_MIN_N = 16384,
  WIDE_MAX_N = 1024, /* few rows up to this long: wider blocks (below) */
  /* rows of WIDE_MAX_N+1 .. MID_MAX_N floats: few of them take the
   * long-row build in blocks of up to FEW_LONG_BLOCK threads, many of them
   * a streaming build's blocks of N/8 threads (below) */
  MID_MAX_N = 4096,
  FEW_LONG_BLOCK = 512,
  /* many rows in clusters (cluster_many_rows): only where the inputs
   * outgrow the L2, whose hits make a second streamed read cheap
   * (softmax_backward on an H100 in a cluster per row: 128 x 32768, 2^22
   * floats, 26.2 -> 28.2 us; 128 x 65536, 2^23, 54.0 -> 49.8) */
  CLUSTER_MANY_MIN_FLOATS = 1 << 23,
  /* the streaming build in blocks of STREAM_HALF_BLOCK for rows of up to
   * STREAM_HALF_MAX_N floats (below) */
  STREAM_HALF_MAX_N = 24576,
  STREAM_HALF_BLOCK = 512,
  /* ... and for more rows than SMs but under two per SM of up to this
   * many floats (below) */
  STREAM_ONE_WAVE_MAX_N = 32768,
  /* ... and, for a kernel that offers stream_half_long_min_n, for rows the
   * long-row build caches only in blocks of 1024, given at least this many
   * rows per SM (below) */
  STREAM_HALF_MIN_ROWS_PER_SM = 3,
  /* ... and, for a kernel that offers stream_l1_min_n..stream_l1_max_n,
   * blocks of 128 or 256 whose rows, all the blocks an SM holds at 64
   * registers (1024 / block), fit this much of L1 between the passes
   * (KiB), given at least this many rows per SM (below) */
  STREAM_L1_KIB = 192,
  STREAM_L1_MIN_ROWS_PER_SM = 6,
  STREAM_L1_MIN_BLOCK = 128,
  STREAM_L1_MAX_BLOCK = 256,
  /* shared-memory clusters only for rows longer than the 58112 floats
   * (227 KiB) of an H100 block's shared memory, which the streaming build
   * keeps whole up to there (plan_cluster_smem) */
  CLUSTER_SMEM_MIN_N = 65536
};
/* The float4 of a row's split that each block of a cluster of C holds, at
 * most (whatever the row's alignment). */
static int64_t cluster_share_vectors(int64_t N, int64_t C) { return ((N + 3) / 4 + C - 1) / C; }

uint64_t fp_cuda_cluster_smem_bytes(const fp_rows_builds *b, const fp_rows_plan *plan, int64_t N) {
  if (plan->build != FP_ROWS_CLUSTER || b->cluster_smem_arrays <= 0 || plan->block == 0 ||
      plan->cluster < 2 || N <= 0)
    return 0;
  const int64_t share = cluster_share_vectors(N, plan->cluster);
  if (b->cluster_vectors > 0 && share <= (int64_t)b->cluster_vectors * plan->block)
    return 0; /* the register cache holds it */
  const int64_t slots = (share + plan->block - 1) / plan->block;
  return (uint64_t)b->cluster_smem_arrays * (uint64_t)slots * plan->block * 16u;
}

/* A cluster per row whose blocks keep their shares in shared memory, for
 * fewer rows than SMs that no register cache holds: the smallest cluster
 * whose shares fit the build's shared memory, doubled while the clusters
 * still fit on the SMs in one wave (up to 16 blocks where max_cluster and
 * the rule for clusters of 16 allow), in blocks of 1024 threads. False
 * where no cluster of up to 8 (16) blocks holds the row, or where the
 * smallest takes more than one wave for more than half as many rows as
 * SMs. */
static bool plan_cluster_smem(const fp_rows_builds *b, int64_t rows, int64_t N, int sm_count,
                              int max_cluster, fp_rows_plan *plan) {
  if (b->cluster_smem_arrays <= 0 || b->cluster_smem_max == 0 || !b->has[FP_ROWS_CLUSTER])
    return false;
  const int64_t largest = max_cluster >= MAX_NONPORTABLE_CLUSTER &&
                                  rows * MAX_NONPORTABLE_CLUSTER * 4 <= 5 * (int64_t)sm_count
                              ? MAX_NONPORTABLE_CLUSTER
                              : MAX_CLUSTER;
  fp_rows_plan p = {FP_ROWS_CLUSTER, 0, MAX_BLOCK, 2};
  while (fp_cuda_cluster_smem_bytes(b, &p, N) > b->cluster_smem_max) {
    if (p.cluster >= largest)
      return false;
    p.cluster *= 2;
  }
  /* More clusters than one wave holds only where a block per row would
   * leave over half the SMs idle (40 x 262147 in clusters of 8: 320 blocks
   * on 132 SMs, against 40 streaming blocks) */
  if (rows * p.cluster > (int64_t)sm_count && 2 * rows > (int64_t)sm_count)
    return false;
  while (p.cluster < largest && rows * 2 * p.cluster <= (int64_t)sm_count)
    p.cluster *= 2;
  p.grid = (uint32_t)(rows * p.cluster);
  *plan = p;
  return true;
}

/* as the host's fp_rows_range: rows beyond it loop inside the kernels */
static const int64_t row_groups_cap = (int64_t)1 << 20;

static uint32_t pow2_ceil(int64_t v) {
  uint32_t p = 1;
  while ((int64_t)p < v && p < (1u << 30))
    p <<= 1;
  return p;
}

/* The rule:
 *   N <= 256 (WARP_MAX_N) and within the cache of a warp build: WARP_SHORT
 *     if it fits (N <= 128 * warp_short_vectors), else WARP (many short
 *     rows: a block of 32 threads per row is capped at 32 blocks, i.e. half
 *     an SM), each row on FP_ROWS_WARP_LANES_LOG2(N) lanes of a warp;
 *   sm_90+, rows of at least 16384 floats, at most one row per 4 SMs (or
 *     any number of rows, at least 2^23 floats in all, that LONG_ROWS
 *     would stream and CLUSTER caches, for a kernel whose offer says
 *     cluster_many_rows; under the cluster policy for any kernel): a
 *     cluster of C blocks per row, C the smallest power of two (up to 8)
 *     that leaves each block at most 8192 floats, doubled
 *     while the grid has fewer than two blocks per SM and each block keeps
 *     at least 2048 floats; the block size fits the share into the cache:
 *     share / (4 * cluster_vectors) threads, a power of two in [128, 1024]
 *     (streaming builds: share / 8, at most 1024); for rows whose share
 *     is too big for 1024 threads at C = 8, C = 16 where max_cluster
 *     allows and 16 blocks per row make at most 1.25 blocks per SM. C = 1, or a share too big for
 * 1024 threads, falls through to at most two rows per SM of 257..1024 floats: the registered build
 * in blocks of pow2_ceil(ceil(N/4) + 1) threads, where that is wider than the host's; the block
 * builds: LONG_ROWS once a row has more than 2 float4 per thread of the host's block (the
 * registered build's cache), else the registered build; but STREAM in the host's geometry, where
 * the kernel has it, for rows longer than LONG_ROWS' cache in the host's block (long_vectors float4
 * per thread), in blocks of 512 for at least two rows per SM of at most 24576 floats; STREAM in
 * blocks of 512 also for at least three rows per SM that LONG_ROWS caches only in blocks of 1024
 * and are at least stream_half_long_min_n long, where the offer gives that (before that, STREAM
 * in blocks of 128 or 256, whose rows at 1024 / block blocks an SM fit 192 KiB of L1, for at
 * least six rows per SM in the offer's stream_l1_min_n..stream_l1_max_n); LONG_ROWS in the
 *     smallest block that caches the row, except for at most two rows per
 *     SM of 1025..4096 floats and a build that does not stage:
 *     pow2_ceil(ceil(N/4)) threads, at most 512; and at least four rows
 *     per SM of 1025..4096 floats in a streaming registered build (no
 *     LONG_ROWS) that offers a stream_block_cap: pow2_ceil(ceil(N/8))
 *     threads, at most the cap. */
fp_rows_plan fp_cuda_plan_rows(fp_rows_policy policy, const fp_rows_builds *b, int64_t M, int64_t N,
                               uint32_t host_groups, uint32_t host_block, int cc_major,
                               int sm_count, int max_cluster) {
  fp_rows_plan plan = {FP_ROWS_REGISTERED, host_groups, host_block, 1};
  if (M <= 0 || N <= 0)
    return plan;
  const int64_t rows = M < row_groups_cap ? M : row_groups_cap;
  const bool tuned = policy != FP_ROWS_POLICY_BLOCK;
  if (tuned) {
    /* a team of 4..32 lanes per row (FP_ROWS_WARP_LANES_LOG2) */
    const int64_t rows_per_warp_block = WARP_BLOCK >> FP_ROWS_WARP_LANES_LOG2(N);
    const int64_t warp_groups = (rows + rows_per_warp_block - 1) / rows_per_warp_block;
    if (N <= WARP_MAX_N &&
        ((b->has[FP_ROWS_WARP_SHORT] && N <= 128 * (int64_t)b->warp_short_vectors) ||
         (b->has[FP_ROWS_WARP] && N <= 128 * (int64_t)b->warp_vectors))) {
      plan.build = b->has[FP_ROWS_WARP_SHORT] && N <= 128 * (int64_t)b->warp_short_vectors
                       ? FP_ROWS_WARP_SHORT
                       : FP_ROWS_WARP;
      plan.grid = (uint32_t)warp_groups;
      plan.block = WARP_BLOCK;
      return plan;
    }
    /* ... and a cluster per row beats it only for a few long rows, where a
     * block per row leaves most of the GPU idle and takes long: 1.2-2.4x
     * from 1 to 8 rows of 65536, 0.94-1.54x at 16 x 32768, but 0.74-0.98 at
     * 30 x 12000 and 33 x 4097 (a cluster's syncs cost a few us) and about
     * 1.0 from 66 rows on (H200, 2026-11-23) */
    const bool few_rows = 4 * rows <= (int64_t)sm_count;
    /* Many rows that a block's cache streams (read twice or more) and a
     * cluster's holds (read once): measured on an H100 (2026-11-24,
     * FUSEPORT_CUDA_ROW_BUILDS=cluster against tuned, two rounds), a
     * cluster per row took 0.75-0.88 of the time of softmax_backward
     * (two rows streamed: 4096 x 32768 669 -> 558 us, 2048 x 65536
     * 781 -> 584, 512 x 65536 200 -> 156) but 1.15-1.58x that of the
     * one-input kernels, whose second read mostly hits L2 (softmax
     * 2048 x 65536 465 -> 624, layernorm 4096 x 32768 448 -> 560). */
    const bool cluster_caches = b->cluster_vectors > 0 && b->long_vectors > 0 &&
                                rows * N >= CLUSTER_MANY_MIN_FLOATS &&
                                N > 4 * (int64_t)b->long_vectors * MAX_BLOCK &&
                                N <= 4 * (int64_t)b->cluster_vectors * MAX_BLOCK * MAX_CLUSTER;
    if (cc_major >= 9 && b->has[FP_ROWS_CLUSTER] && N >= CLUSTER_MIN_N &&
        (few_rows ||
         (cluster_caches && (policy == FP_ROWS_POLICY_CLUSTER || b->cluster_many_rows)))) {
      int64_t C = 1;
      while (C < MAX_CLUSTER && (N + C - 1) / C > CLUSTER_BLOCK_TARGET)
        C *= 2;
      while (C < MAX_CLUSTER && rows * C < 2 * (int64_t)sm_count &&
             N / (2 * C) >= CLUSTER_MIN_SHARE)
        C *= 2;
      /* a block's share: at most ceil(ceil(N/4) / C) float4 of the row's
       * split (whatever the row's alignment), in floats */
      const int64_t share = (((N + 3) / 4 + C - 1) / C) * 4;
      const int64_t per_thread = 4 * (int64_t)b->cluster_vectors;
      int64_t threads = per_thread > 0 ? (share + per_thread - 1) / per_thread : share / 8;
      uint32_t block = pow2_ceil(threads < MIN_CLUSTER_BLOCK ? MIN_CLUSTER_BLOCK : threads);
      if (per_thread == 0 && block > MAX_BLOCK)
        block = MAX_BLOCK;
      /* A few rows that a cluster of 8 cannot cache (more than 131072
       * floats in 8 blocks of 1024 threads): clusters of 16 where the
       * device allows them, which hold rows of up to 262144 floats, for at
       * most 1.25 blocks per SM (10 rows on an H100, about two waves of
       * such clusters). The alternative, a block per row streaming the
       * row, took 40.0 us for layernorm over 1 x 151936 (a decoding step
       * over a vocabulary), where static-shape torch.compile splits the
       * row over many blocks in three kernels and takes 14.2 (a cluster
       * of 16: 13.3; docs/results/2026-11-28-h100-every-shape-c1c830d).
       * Measured on an H100 (2026-11-28, two rounds,
       * FUSEPORT_CUDA_MAX_CLUSTER=8 against 16, the five row kernels with
       * a caching cluster build): 1.4-4.2x faster from 1 to 4 rows of
       * 131073-262144 floats (layernorm 1 x 151936 40.0 -> 13.4 us,
       * softmax 31.3 -> 12.0), at 8 and 9 rows 0.85-2.6x (norm_chain
       * 8 x 151936 the one loss), at 16 rows 0.63-1.16x and at 33 rows
       * 0.47-0.85x. */
      const bool wide_fits = rows * MAX_NONPORTABLE_CLUSTER * 4 <= 5 * (int64_t)sm_count;
      while (per_thread > 0 && block > MAX_BLOCK && wide_fits && C < max_cluster &&
             C < MAX_NONPORTABLE_CLUSTER) {
        C *= 2;
        const int64_t wider = (((N + 3) / 4 + C - 1) / C) * 4;
        threads = (wider + per_thread - 1) / per_thread;
        block = pow2_ceil(threads < MIN_CLUSTER_BLOCK ? MIN_CLUSTER_BLOCK : threads);
      }
      if (C > 1 && block <= MAX_BLOCK) {
        plan.build = FP_ROWS_CLUSTER;
        plan.grid = (uint32_t)(rows * C);
        plan.block = block;
        plan.cluster = (uint32_t)C;
        return plan;
      }
    }
    /* Fewer rows than SMs, longer than the streaming build keeps in shared
     * memory (it would read them twice, a block per row, the other SMs
     * idle) and than the rule above gave a register cluster: a cluster per
     * row that keeps the row in its blocks' shared memory, read once.
     * Measured on an H200 (2026-11-28, two alternating rounds,
     * FUSEPORT_CUDA_CLUSTER_SMEM=0 against 1,
     * docs/results/2026-11-28-h200-every-shape-5cf9836/ab/): the five
     * row kernels 2.5-6.1x faster at 1 to 9 rows of 262147-400001 floats
     * (layernorm 3 x 262147 84.0 -> 14.8 us, softmax 1 x 300007 59.1 ->
     * 14.4), 1.00-1.64x at 39 and 40 rows of 262147; at 54 x 100003,
     * layernorm 1.35x and softmax, double_softmax 1.01-1.05x, but
     * softmax_backward 0.96x and norm_chain 0.88x: their offers start at
     * 131073 floats (cluster_smem_min_n). */
    if (cc_major >= 9 && rows < (int64_t)sm_count && N > CLUSTER_SMEM_MIN_N &&
        N > b->cluster_smem_min_n) {
      fp_rows_plan smem_plan;
      if (plan_cluster_smem(b, rows, N, sm_count, max_cluster, &smem_plan))
        return smem_plan;
    }
    /* Few rows of 257..1024 floats (at most two blocks per SM): the
     * host's block of N/16 threads leaves each SM one or two warps, every
     * instruction's latency exposed; blocks of the power of two above the
     * row's float4 count plus one (N/2 threads for a power of two) take
     * the registered build. Measured on an H100 (2026-11-24, two rounds,
     * seven row ops at 128 and 256 rows): N = 512 and 1024 mostly 0.3-1.0 us
     * faster (hreduce_pointwise 128 x 512 5.9 -> 5.0 us, layernorm
     * 128 x 512 6.4 -> 5.7, double_softmax 256 x 512 6.6 -> 5.8), within
     * 0.3 us elsewhere; at N = 2048 and 4096 the same widening lost up to
     * 25% (layernorm 256 x 4096 8.1 -> 10.2 us), so it stops at 1024. */
    if (rows <= 2 * (int64_t)sm_count && N > WARP_MAX_N && N <= WIDE_MAX_N) {
      const uint32_t block = pow2_ceil((N + 3) / 4 + 1);
      if (block > host_block) {
        plan.block = block;
        return plan;
      }
    }
  }
  const bool long_rows = b->has[FP_ROWS_LONG] && N / 4 > 2 * (int64_t)host_block;
  /* Many rows that the long-row build caches only in blocks of 1024 (one
   * per SM, the memory idle through its reductions), for a kernel whose
   * offer says so: the streaming build in blocks of 512, two per SM, which
   * reread the row from L1. Measured on an H100 (2026-11-25, three
   * alternating rounds, 120e041:docs/results/2026-11-25-h100-smem/r32-mid-rows/):
   * layernorm 8192 x 10240 313 -> 270 us, 512-16384 x 16384 1.02-1.08x,
   * but 300 x 16384 27.0 -> 29.0; double_softmax (whose long-row build
   * stages the next row) and softmax_backward lost 5-26%. Since
   * double_softmax streams in two reads (its power sums), rows of 16384
   * gain 1.01-1.11x (400-16384 rows, r40-ds-half-long/ in
   * 120e041:docs/results/2026-11-25-h100-series/) and 12289 1.03x, but 10240 lost
   * 3-7% and 12288 2%: its offer starts at 12289. */
  /* Many rows of a few thousand floats, for a kernel whose offer gives the
   * range: the streaming build in the smallest block (128 or 256 threads)
   * whose rows, at 1024 / block blocks an SM, fit 192 KiB of L1, so that
   * the second pass hits L1 and four to eight rows an SM are in flight,
   * where the long-row build runs one to three (blocks of 320..768 threads at
   * 64 registers) and the stream_half rule below two. Measured on an H200
   * (2026-11-29, FUSEPORT_CUDA_ROWS_BLOCK_CAP=128 / 256 against the plan,
   * 1000 and 4096 rows; docs/PERF.md): double_softmax 1.27-1.29x at 5120
   * floats (128 threads), 1.05-1.06x at 8192, 1.28-1.39x at 10240,
   * 1.18-1.27x at 12288 (256); layernorm 1.07-1.11x at 10240-12288 but
   * 0.96-0.98x at 8192, where its long-row build caches the row in blocks
   * of 512 (its range starts past that); at 14336 and up, where four rows
   * outgrow L1, both lost up to 9%. */
  if (tuned && long_rows && b->stream_l1_min_n > 0 && N >= b->stream_l1_min_n &&
      N <= b->stream_l1_max_n && b->has[FP_ROWS_STREAM] &&
      rows >= STREAM_L1_MIN_ROWS_PER_SM * (int64_t)sm_count) {
    uint32_t block = STREAM_L1_MIN_BLOCK;
    while (block < STREAM_L1_MAX_BLOCK && (1024 / block) * N * 4 > STREAM_L1_KIB * 1024)
      block *= 2;
    if (block < host_block) {
      plan.build = FP_ROWS_STREAM;
      plan.block = block;
      return plan;
    }
  }
  if (tuned && long_rows && b->stream_half_long_min_n > 0 && N >= b->stream_half_long_min_n &&
      b->has[FP_ROWS_STREAM] && b->long_vectors > 0 && host_block > STREAM_HALF_BLOCK &&
      rows >= STREAM_HALF_MIN_ROWS_PER_SM * (int64_t)sm_count &&
      N > 4 * (int64_t)b->long_vectors * STREAM_HALF_BLOCK &&
      N <= 4 * (int64_t)b->long_vectors * host_block) {
    plan.build = FP_ROWS_STREAM;
    plan.block = STREAM_HALF_BLOCK;
    return plan;
  }
  /* Rows longer than the long-row build's cache in the host's block, which
   * it would stream: the streaming build, in the same geometry. */
  if (tuned && long_rows && b->has[FP_ROWS_STREAM] && b->long_vectors > 0 &&
      N > 4 * (int64_t)b->long_vectors * host_block) {
    plan.build = FP_ROWS_STREAM;
    /* Rows short enough that two of them stay in L1 between passes, at
     * least two per SM: blocks of half the threads, two resident per SM,
     * so that one block's loads overlap the other's reductions. Measured
     * on an H100 (2026-11-25, three alternating rounds, blocks capped at
     * 512 against 1024, 120e041:docs/results/2026-11-25-h100-smem/r30-block512/):
     * double_softmax 1024 x 20480 104.9 -> 78.7 us, 4096 x 24576 401 -> 344;
     * layernorm 87.8 -> 77.2 and 380 -> 337; at N = 32768, where two rows
     * outgrow L1, 4096 rows lost 11-14% (double_softmax 467 -> 522). */
    const bool two_per_sm = N <= STREAM_HALF_MAX_N && rows >= 2 * (int64_t)sm_count;
    /* More rows than SMs but not two per SM, of up to 32768 floats (none
     * kept in shared memory): blocks of 512 run them all in one wave, where
     * blocks of 1024 took two, the second with part of the GPU idle
     * (r35-one-wave/, three rounds against the host's block: double_softmax
     * 1.13-1.31x and layernorm 1.06-1.30x at 140-263 rows of 16385-32768,
     * layernorm 140 x 32768 31.0 -> 24.4 us; double_softmax 256 x 32768
     * 1.00x). */
    const bool one_wave =
        N <= STREAM_ONE_WAVE_MAX_N && rows > (int64_t)sm_count && rows < 2 * (int64_t)sm_count;
    if ((two_per_sm || one_wave) && host_block > STREAM_HALF_BLOCK)
      plan.block = STREAM_HALF_BLOCK;
    return plan;
  }
  if (long_rows) {
    plan.build = FP_ROWS_LONG;
    /* The smallest block whose cache still holds the row, if smaller than
     * the host's (never below 128 threads): more rows in flight per SM
     * while the others reduce. Measured on an H200 (2026-11-23), time
     * against the host's block, for the 8-vector caches of softmax and
     * norm_chain: 0.75-0.76 at 4096 x 16384 (512 threads), 0.82 at
     * 512 x 16384, 0.85-0.93 at 8192 x 8192 (256), 0.98-1.00 at 4096 x 4096
     * (128), 1.00-1.04 at 128 x 8192; the 4-vector caches already have
     * the host's block. */
    if (tuned && b->long_vectors > 0) {
      const int64_t threads = ((N / 4) + b->long_vectors - 1) / b->long_vectors;
      uint32_t block = pow2_ceil(threads < MIN_LONG_BLOCK ? MIN_LONG_BLOCK : threads);
      if (block < host_block)
        plan.block = block;
    }
    /* ... but few rows of up to 4096 floats (at most two per SM) take
     * blocks of a float4 per thread, at most 512 threads (two float4 at
     * 4096): the smallest block leaves each SM a few warps with 8-16
     * dependent float4 apiece. Measured on an H100 (2026-11-24, five
     * alternating rounds at 128 and 256 rows of 2048 and 4096, blocks of
     * 512 against the planner's; medians): layernorm 128 x 2048
     * 6.91 -> 5.95 us, 256 x 2048 6.88 -> 6.53; softmax 128 x 4096
     * 7.04 -> 6.37, 256 x 4096 8.13 -> 7.33; softmax_backward 0.2-0.35 us
     * faster; norm_chain within 0.2 us either way. double_softmax, whose
     * long-row build stages the next row, lost 0.8-1.0 us, so a build that
     * stages keeps its block; blocks of 1024 lost on most cells. */
    if (tuned && b->stage_rows == 0 && rows <= 2 * (int64_t)sm_count && N > WIDE_MAX_N &&
        N <= MID_MAX_N) {
      uint32_t block = pow2_ceil((N + 3) / 4);
      if (block > FEW_LONG_BLOCK)
        block = FEW_LONG_BLOCK;
      if (block > plan.block)
        plan.block = block;
    }
  } else if (tuned && b->full_block != 0 && host_block > b->full_block &&
             rows >= 4 * (int64_t)sm_count) {
    /* A registered build whose registers let an SM hold only one block of
     * the host's size (hreduce_pointwise: 40 registers, one block of 1024 =
     * 1024 of 2048 threads) takes blocks of full_block once there are rows
     * enough for several blocks per SM: 1.5 of them resident instead of one.
     * Measured on an H200 (2026-11-23): 0.89 of the time at 4096 x 16384
     * with 512 threads; 1.08-1.15 with 128 rows (fewer threads per SM). */
    plan.block = b->full_block;
  } else if (tuned && b->stream_block_cap != 0 && !b->has[FP_ROWS_LONG] &&
             rows >= 4 * (int64_t)sm_count && N > WIDE_MAX_N && N <= MID_MAX_N) {
    /* A registered build that streams (the horizontal kernels: two float4
     * loads in flight per thread, nothing cached) takes blocks of N/8
     * threads, one round of loads per row, instead of the host's N/16, up to
     * its cap. Measured on an H100 (2026-11-24, five alternating rounds at
     * 1024-8192 rows of 2048 and 4096, medians): hreduce_pointwise
     * 2048 x 2048 17.60 -> 16.58 us, 1024 x 4096 17.98 -> 16.58, the other
     * five cells 0.5-3% faster; hreduce_reduce at N = 2048 2-6% faster
     * (2048 x 2048 11.26 -> 10.62), but 512 threads at N = 4096 0.2-6%
     * slower, hence its cap of 256; blocks of 64 lost everywhere. */
    uint32_t block = pow2_ceil((N + 7) / 8);
    if (block > b->stream_block_cap)
      block = b->stream_block_cap;
    if (block > host_block)
      plan.block = block;
  }
  return plan;
}

uint64_t fp_cuda_stage_bytes(const fp_rows_builds *b, const fp_rows_plan *plan, int64_t N) {
  if (plan->build != FP_ROWS_LONG || b->stage_rows <= 0 || b->long_vectors <= 0 ||
      plan->block == 0 || N <= 0)
    return 0;
  const int64_t cached = 4 * (int64_t)b->long_vectors * plan->block; /* floats */
  if (N > cached)
    return 0;
  return (uint64_t)b->stage_rows * (uint64_t)b->long_vectors * 16u * plan->block;
}

/* Two blocks of STREAM_HALF_BLOCK per SM whose whole rows fit in shared
 * memory together: each block's row, static shared memory (under 1 KiB
 * here) and the 1 KiB the hardware reserves per block, twice, within the
 * kernel's limit (on an H100 1 KiB under the SM's 228). */
enum { HALF_BLOCK_SMEM_OVERHEAD = 2048 };

uint64_t fp_cuda_stream_smem_bytes(const fp_rows_builds *b, const fp_rows_plan *plan, int64_t N,
                                   uint64_t limit, bool any_length, int sm_count) {
  if (plan->build != FP_ROWS_STREAM || b->stream_smem_min_n <= 0 || N <= 0)
    return 0;
  /* a row's split has at most ceil(N/4) float4 (N/4 for an aligned row) */
  const uint64_t row_vectors = (uint64_t)(N + 3) / 4;
  /* Rows of 16385..~28000 floats in blocks of 512, two per SM: together
   * they outgrow L1 between passes, but each fits in half the shared
   * memory. Measured on an H100 (2026-11-25, three alternating rounds,
   * FUSEPORT_CUDA_STREAM_SMEM=all against the default,
   * 120e041:docs/results/2026-11-25-h100-series/r46-smem-half/): layernorm
   * 4096 x 20480 283 -> 251 us and 1024 x 24576 1.12x, double_softmax
   * 1.04-1.10x (256-4096 rows of 20480-24576); softmax and norm_chain
   * within 2%. At N = 32768 two rows do not fit, and keeping them (one
   * block per SM then) lost up to 31%. As the planner's rule, against
   * d9da24a (r47-smem-half-rule/): double_softmax 1.04-1.15x and layernorm
   * 1.11-1.19x at 1024-4096 rows of 20480-24576; with fewer rows than two
   * per SM (one wave of blocks of 512) layernorm 200 x 20001 lost 6% and
   * norm_chain 2.5%, so only from two rows per SM (the grid is a block per
   * row). */
  const bool half_rows_fit = plan->block == STREAM_HALF_BLOCK && N > 16384 && sm_count > 0 &&
                             plan->grid >= 2 * (uint64_t)sm_count &&
                             2 * (row_vectors * 16u + HALF_BLOCK_SMEM_OVERHEAD) <= limit;
  if (!any_length && !half_rows_fit && N < b->stream_smem_min_n)
    return 0;
  const uint64_t vectors = limit / 16u < row_vectors ? limit / 16u : row_vectors;
  return vectors * 16u;
}

/* Staging pays only where an SM holds few blocks of the kernel, so that
 * while one reduces the memory idles: measured on an H100 (2026-11-23),
 * double_softmax took 0.83-0.88 of the time staged with one resident block
 * (N = 16384), 0.95 with two (8192), but 1.03-1.12 with four or more
 * (N <= 4096), where other blocks already overlap. */
enum { STAGE_MAX_RESIDENT = 2 };

bool fp_cuda_plan_stage(fp_rows_plan *plan, int resident_with_stage, int resident_without,
                        int sm_count) {
  if (resident_with_stage <= 0 || resident_with_stage < resident_without ||
      resident_without > STAGE_MAX_RESIDENT || sm_count <= 0)
    return false;
  const int64_t resident = (int64_t)resident_with_stage * sm_count;
  if ((int64_t)plan->grid > resident)
    plan->grid = (uint32_t)resident;
  return true;
}

fp_rows_policy fp_rows_policy_from_env(const char *value, bool *unknown) {
  *unknown = false;
  if (value == NULL || value[0] == '\0' || strcmp(value, "tuned") == 0)
    return FP_ROWS_POLICY_TUNED;
  if (strcmp(value, "block") == 0)
    return FP_ROWS_POLICY_BLOCK;
  if (strcmp(value, "cluster") == 0)
    return FP_ROWS_POLICY_CLUSTER;
  *unknown = true;
  return FP_ROWS_POLICY_TUNED;
}

bool fp_elem_grid_policy_from_env(const char *value, fp_elem_grid_policy *policy) {
  policy->kind = FP_ELEM_GRID_TUNED;
  policy->blocks_per_sm = 0;
  policy->vectors_per_thread = 0;
  if (value == NULL || value[0] == '\0' || strcmp(value, "tuned") == 0)
    return true;
  if (strcmp(value, "host") == 0) {
    policy->kind = FP_ELEM_GRID_HOST;
    return true;
  }
  if (strcmp(value, "full") == 0) {
    policy->kind = FP_ELEM_GRID_FULL;
    return true;
  }
  const bool waves = strncmp(value, "waves:", 6) == 0, items = strncmp(value, "items:", 6) == 0;
  if (waves || items) {
    char *end = NULL;
    const long k = strtol(value + 6, &end, 10);
    if (end != value + 6 && *end == '\0' && k >= 1 && k <= 64) {
      policy->kind = waves ? FP_ELEM_GRID_WAVES : FP_ELEM_GRID_FULL;
      if (waves)
        policy->blocks_per_sm = (int)k;
      else
        policy->vectors_per_thread = (int)k;
      return true;
    }
  }
  return false;
}

/* The tuned rule. Below 2^22 elements (a 32 MiB cell of two streams), 8
 * blocks per SM, one resident wave of 2048 threads: 0.84-0.95 of the host
 * grid's time for pointwise_chain and bias_gelu from 2^19 elements,
 * 0.94-1.01 for bias_dropout_add (H200, 120e041:docs/results/2026-11-23-h200/
 * elem_*.json). From 2^22 on, a thread does one round of its kernel's
 * unroll and leaves (items:U; U = 4 for the two-stream kernels, 2 for
 * bias_dropout_add): against the previous rule (waves:8 to 2^23, then the
 * host's grid, or items:2 for bias_dropout_add from 2^24), three alternating
 * rounds on an H100 (120e041:docs/results/2026-11-24-h100-37851c5/elem-grid/):
 * pointwise_chain 1.00-1.05x (65536 x 2048: 379 -> 363 us), bias_gelu
 * 1.00-1.04x, bias_dropout_add 1.02-1.04x at 2^22-2^23, the same beyond.
 * Before strided_unrolled predicated its last round, a thread with fewer
 * items than U ran them one at a time, which is why items:2 had lost
 * 14-24% on the U = 4 kernels (H200, the same files). */
enum { ELEM_ROUND_MIN_N_LOG2 = 22, ELEM_TUNED_WAVES = 8 };

uint32_t fp_cuda_plan_elem(fp_elem_grid_policy policy, int64_t n, bool three_streams,
                           uint32_t host_groups, uint32_t block, int sm_count, uint32_t max_grid) {
  if (policy.kind == FP_ELEM_GRID_TUNED) {
    if (n < ((int64_t)1 << ELEM_ROUND_MIN_N_LOG2)) {
      policy.kind = FP_ELEM_GRID_WAVES;
      policy.blocks_per_sm = ELEM_TUNED_WAVES;
    } else {
      policy.kind = FP_ELEM_GRID_FULL;
      policy.vectors_per_thread = three_streams ? FP_ELEM_UNROLL_THREE_STREAMS
                                                : FP_ELEM_UNROLL; /* elementwise.cu's unrolls */
    }
  }
  int64_t grid = host_groups;
  if (policy.kind == FP_ELEM_GRID_WAVES && sm_count > 0) {
    const int64_t cap = (int64_t)sm_count * policy.blocks_per_sm;
    grid = grid < cap ? grid : cap;
  } else if (policy.kind == FP_ELEM_GRID_FULL && block > 0 && n > 0) {
    const int64_t vectors = policy.vectors_per_thread > 0 ? policy.vectors_per_thread : 2;
    const int64_t per_block = 4 * vectors * (int64_t)block; /* `vectors` float4 per thread */
    grid = (n + per_block - 1) / per_block;
  }
  if (grid > (int64_t)max_grid)
    grid = max_grid;
  return grid < 1 ? 1 : (uint32_t)grid;
}

unsigned fp_cuda_plan_elem_builds(int64_t M, int64_t N, const fp_elem_operand *operands, int count,
                                  bool training, uint64_t threads) {
  const int64_t limit = INT32_MAX; /* offsets and indices in 32 bits, signed to be safe */
  if (M < 1 || N < 1 || count < 1 || M > limit / N || threads > (uint64_t)limit / 4)
    return 0;
  /* flatbias: rows whose length is not a multiple of 4 otherwise went to
   * elem_map_2d (bias_gelu 7094 x 21631 508.6 -> 408.0 us; H100,
   * 2026-11-28; issue 23) */
  bool flat = !training && (M * N) % 4 == 0, rowvec = N % 4 == 0,
       flatbias = N % 4 != 0 && count >= 3;
  for (int k = 0; k < count; ++k) {
    const fp_elem_operand *o = &operands[k];
    const bool aligned = o->address % 16 == 0;
    const bool is_flat = (M == 1 || o->s0 == N) && (N == 1 || o->s1 == 1);
    flat = flat && aligned && is_flat;
    rowvec = rowvec && aligned && o->s1 == 1 && o->s0 >= 0 && o->s0 % 4 == 0 &&
             (M == 1 || o->s0 <= (limit - N) / (M - 1)); /* (M-1)*s0 + N-1 < 2^31 */
    flatbias = flatbias &&
               (k == 2 ? (M == 1 || o->s0 == 0) && (N == 1 || o->s1 == 1) : aligned && is_flat);
  }
  unsigned fit = 0;
  if (flat)
    fit |= 1u << FP_ELEM_FLAT32;
  if (rowvec)
    fit |= 1u << (training ? FP_ELEM_ROWVEC32_TRAINING : FP_ELEM_ROWVEC32);
  if (flatbias)
    fit |= 1u << (training ? FP_ELEM_FLATBIAS32_TRAINING : FP_ELEM_FLATBIAS32);
  return fit;
}

uint32_t fp_cuda_plan_elem_lean_grid(uint32_t grid, int64_t n, int unroll, uint32_t block) {
  if (n <= 0 || block == 0 || unroll < 1)
    return grid < 1 ? 1 : grid;
  const uint64_t nvec = (uint64_t)n / 4;
  const uint64_t per_thread =
      unroll > 1 && nvec >= (uint64_t)FP_ELEM_MIN_CHUNKS * (uint64_t)unroll * block
          ? (uint64_t)unroll
          : 1;
  const uint64_t span = per_thread * block, chunks = (nvec + span - 1) / span;
  if (chunks < grid)
    grid = (uint32_t)chunks;
  return grid < 1 ? 1 : grid;
}

bool fp_elem_builds_from_env(const char *value, bool *lean) {
  *lean = true;
  if (value == NULL || value[0] == '\0' || strcmp(value, "lean") == 0)
    return true;
  if (strcmp(value, "registered") == 0) {
    *lean = false;
    return true;
  }
  return false;
}
