/* fuseport tests: what the CUDA ROWS planner's tests share (cuda_plan_cases.h):
 * the kernels' offers of builds, the host's request and the builds'
 * preconditions. */
#include <stdio.h>

#include "test_util.h"

#include "cuda_plan_cases.h"

/* The offer of kernels/cu/reduce.cu (no WARP build: WARP_SHORT covers the
 * rows warps are used for; a STREAM build) and of horizontal.cu (no long-row or short warp
 * build; a warp build of 8 vectors; a streaming cluster build; blocks of
 * up to 256 or 512 threads for many mid-length rows). */
const fp_rows_builds reduce_offer = {
    {true, true, false, true, true}, 2, 0, 4, 8, 0, 1, false, 0, 0, 32769, 0, 0, 0, 0, 0};
const fp_rows_builds reduce_offer_k4 = {
    {true, true, false, true, true}, 2, 0, 4, 4, 0, 1, false, 0, 0, 32769, 0, 0, 0, 0, 0};
/* softmax_backward: two rows cached and staged; its streaming build keeps
 * nothing */
const fp_rows_builds backward_offer = {
    {true, true, false, true, true}, 2, 0, 4, 4, 0, 2, true, 0, 0, 0, 0, 0, 0, 0, 0};
/* the real offers of softmax and layernorm: long-row caches of 8 and 4
 * vectors that do not stage; streaming builds that keep their row */
const fp_rows_builds softmax_offer = {
    {true, true, false, true, true}, 2, 0, 4, 8, 0, 0, false, 0, 0, 32769, 0, 0, 0, 0, 0};
const fp_rows_builds layernorm_offer = {
    {true, true, false, true, true}, 2, 0, 4, 4, 0, 0, false, 0, 0, 32769, 0, 0, 0, 0, 0};
/* layernorm's real offer: its streaming build also takes many rows of
 * 8193..16384 floats in blocks of 512 */
const fp_rows_builds layernorm_half_offer = {
    {true, true, false, true, true}, 2, 0, 4, 4, 0, 0, false, 0, 8193, 32769, 0, 0, 0, 0, 0};
/* double_softmax: its long-row build stages; blocks of 512 from 12289 */
const fp_rows_builds double_softmax_half_offer = {
    {true, true, false, true, true}, 2, 0, 4, 4, 0, 1, false, 0, 12289, 32769, 0, 0, 0, 0, 0};
/* ... and, as layernorm's and double_softmax's real offers, blocks of 128
 * or 256 for many rows of 8193 (4097)..12288 floats */
const fp_rows_builds layernorm_l1_offer = {
    {true, true, false, true, true}, 2, 0, 4, 4, 0, 0, false, 0, 8193, 32769, 0, 0, 0, 8193, 12288};
const fp_rows_builds double_softmax_l1_offer = {{true, true, false, true, true},
                                                2,
                                                0,
                                                4,
                                                4,
                                                0,
                                                1,
                                                false,
                                                0,
                                                12289,
                                                32769,
                                                0,
                                                0,
                                                0,
                                                4097,
                                                12288};
const fp_rows_builds layernorm_offer_no_stream = {
    {true, true, false, true, false}, 2, 0, 4, 4, 0, 0, false, 0, 0, 0, 0, 0, 0, 0, 0};
const fp_rows_builds hreduce_offer = {
    {false, false, true, true}, 0, 8, 0, 0, 0, 0, false, 256, 0, 0, 0, 0, 0, 0, 0};
/* hreduce_pointwise: 40 registers, three blocks of 512 resident, one of 1024 */
const fp_rows_builds hreduce_pointwise_offer = {
    {false, false, true, true}, 0, 8, 0, 0, 512, 0, false, 512, 0, 0, 0, 0, 0, 0, 0};

/* The host's ROWS request (ops/primitives.c fp_rows_range). */
void host_request(int64_t M, int64_t N, uint32_t *groups, uint32_t *block) {
  uint32_t local = 1;
  while ((int64_t)local < (N + 15) / 16)
    local <<= 1;
  *block = local < 32 ? 32 : (local > 1024 ? 1024 : local);
  *groups = (uint32_t)(M < HOST_CAP ? M : HOST_CAP);
}

fp_rows_plan plan_for(fp_rows_policy policy, const fp_rows_builds *b, int64_t M, int64_t N,
                      int cc) {
  uint32_t groups, block;
  host_request(M, N, &groups, &block);
  return fp_cuda_plan_rows(policy, b, M, N, groups, block, cc, H100_SMS, 16);
}

/* The same on a device (or under FUSEPORT_CUDA_MAX_CLUSTER) that keeps
 * clusters at the portable size of 8. */
fp_rows_plan plan_portable(const fp_rows_builds *b, int64_t M, int64_t N) {
  uint32_t groups, block;
  host_request(M, N, &groups, &block);
  return fp_cuda_plan_rows(FP_ROWS_POLICY_TUNED, b, M, N, groups, block, 9, H100_SMS, 8);
}

void assert_preconditions(const fp_rows_builds *b, int64_t M, int64_t N, int cc, fp_rows_plan p) {
  char what[128];
  snprintf(what, sizeof what, "M=%lld N=%lld cc=%d: build %d grid %u block %u cluster %u",
           (long long)M, (long long)N, cc, (int)p.build, p.grid, p.block, p.cluster);
  const int64_t rows = M < HOST_CAP ? M : HOST_CAP;
  if (p.build != FP_ROWS_REGISTERED && !b->has[p.build])
    fail_msg("%s: a build the kernel does not have", what);
  if (p.block < 32 || p.block > 1024 || (p.block & (p.block - 1)) != 0)
    fail_msg("%s: block not a power of two in [32, 1024]", what);
  if (p.grid == 0 || p.cluster == 0 || p.grid % p.cluster != 0)
    fail_msg("%s: grid not a whole number of clusters", what);
  const int64_t vec = (N + 3) / 4; /* float4 of a row's split, at most */
  switch (p.build) {
  case FP_ROWS_WARP_SHORT:
  case FP_ROWS_WARP: {
    int per_lane = p.build == FP_ROWS_WARP ? b->warp_vectors : b->warp_short_vectors;
    if (N > 128 * (int64_t)per_lane)
      fail_msg("%s: row longer than the warp's cache", what);
    if (p.block != 256)
      fail_msg("%s: warp builds take 8 warps per block", what);
    /* a team of 4 lanes per row of up to 16 floats, 16 up to 64, a warp
     * beyond (written out here, not through the macro) */
    const int lanes = N <= 16 ? 4 : N <= 64 ? 16 : 32;
    if (FP_ROWS_WARP_LANES_LOG2(N) != (lanes == 4 ? 2 : lanes == 16 ? 4 : 5))
      fail_msg("%s: FP_ROWS_WARP_LANES_LOG2 is not the documented rule", what);
    if ((int64_t)p.grid * (256 / lanes) < rows)
      fail_msg("%s: fewer teams than rows up to the cap", what);
    /* no more blocks than the rows need: a grid of idle teams costs launches */
    if ((int64_t)(p.grid - 1) * (256 / lanes) >= rows)
      fail_msg("%s: a whole block of teams without a row", what);
    break;
  }
  case FP_ROWS_CLUSTER: {
    if (cc < 9)
      fail_msg("%s: clusters need sm_90", what);
    if (p.cluster < 2 || p.cluster > 16 || (p.cluster & (p.cluster - 1)) != 0)
      fail_msg("%s: cluster size not 2, 4, 8 or 16", what);
    /* the non-portable size only for at most one row per 4 SMs that 8
     * blocks of 1024 threads cannot cache */
    if (p.cluster > 8 && (rows * 16 * 4 > 5 * H100_SMS || b->cluster_vectors <= 0 ||
                          (vec + 7) / 8 <= (int64_t)b->cluster_vectors * 1024))
      fail_msg("%s: a cluster of 16 where 8 would do", what);
    const int64_t share = (vec + p.cluster - 1) / p.cluster;
    const uint64_t smem = fp_cuda_cluster_smem_bytes(b, &p, N);
    if (b->cluster_vectors > 0 && share > (int64_t)b->cluster_vectors * p.block &&
        (smem == 0 || smem > b->cluster_smem_max))
      fail_msg("%s: a block's share (%lld float4) exceeds its cache", what, (long long)share);
    /* the kernel's test (dispatch_team_cache): arrays x ceil(share / block)
     * x block float4 within the launch's shared memory */
    if (smem > 0 && smem < (uint64_t)b->cluster_smem_arrays * 16u *
                               (uint64_t)((share + p.block - 1) / p.block) * p.block)
      fail_msg("%s: %llu bytes of shared memory for a share of %lld float4", what,
               (unsigned long long)smem, (long long)share);
    if ((int64_t)p.grid != rows * p.cluster)
      fail_msg("%s: grid is not a cluster per row", what);
    break;
  }
  case FP_ROWS_STREAM: {
    uint32_t groups, block;
    host_request(M, N, &groups, &block);
    /* the host's geometry, or its grid in blocks of 512 (any geometry
     * computes the same result; this is the planner's rule) */
    /* blocks of 128 or 256 where the offer's stream_l1 range holds the row
     * (256 only where 8 rows of 128 would outgrow 192 KiB of L1) */
    const bool l1 = b->stream_l1_min_n > 0 && N >= b->stream_l1_min_n && N <= b->stream_l1_max_n &&
                    (p.block == 128 || p.block == 256) && p.block < block;
    if (l1 && p.block == 256 && 8 * N * 4 <= 192 * 1024)
      fail_msg("%s: L1 streaming blocks of 256 where 128 would do", what);
    if (p.grid != groups || p.cluster != 1 || (p.block != block && p.block != 512 && !l1))
      fail_msg("%s: the streaming build keeps the host's grid, in its block, 512 or an L1 block",
               what);
    /* rows the long-row build cannot cache in the host's block, or, where
     * the offer's stream_half_long_min_n allows, not in blocks of 512, or
     * in the offer's stream_l1 range */
    const uint32_t cache_block =
        b->stream_half_long_min_n > 0 && N >= b->stream_half_long_min_n && p.block == 512 ? 512
                                                                                          : block;
    if (!l1 && (b->long_vectors <= 0 || N <= 4 * (int64_t)b->long_vectors * cache_block))
      fail_msg("%s: streaming build for a row the long-row build caches", what);
    break;
  }
  case FP_ROWS_LONG:
  case FP_ROWS_REGISTERED: {
    uint32_t groups, block;
    host_request(M, N, &groups, &block);
    if (p.grid != groups || p.cluster != 1)
      fail_msg("%s: block builds keep the host's grid", what);
    if (p.build == FP_ROWS_LONG && !(N / 4 > 2 * (int64_t)block))
      fail_msg("%s: long-row build for a row the registered build caches", what);
    if (p.block != block) {
      /* only the long-row build shrinks its block, and only to one that
       * still caches the whole row, of at least 128 threads; a registered
       * build only to its full_block, with at least 4 rows per SM */
      const bool long_ok = p.build == FP_ROWS_LONG && b->long_vectors != 0 && p.block < block &&
                           p.block >= 128 && N / 4 <= (int64_t)p.block * b->long_vectors;
      const bool full_ok = p.build == FP_ROWS_REGISTERED && b->full_block != 0 &&
                           p.block == b->full_block && block > b->full_block &&
                           rows >= 4 * H100_SMS;
      /* a registered build widened for at most two rows per SM of
       * 257..1024 floats, to the power of two above ceil(N/4) + 1 */
      uint32_t wide = 1;
      while ((int64_t)wide < (N + 3) / 4 + 1)
        wide <<= 1;
      const bool wide_ok = p.build == FP_ROWS_REGISTERED && p.block > block && p.block == wide &&
                           rows <= 2 * H100_SMS && N > 256 && N <= 1024;
      /* a long-row build that does not stage, widened for at most two rows
       * per SM of 1025..4096 floats to pow2_ceil(ceil(N/4)), at most 512 */
      uint32_t few = 1;
      while ((int64_t)few < (N + 3) / 4)
        few <<= 1;
      few = few > 512 ? 512 : few;
      const bool few_long_ok = p.build == FP_ROWS_LONG && b->stage_rows == 0 && p.block == few &&
                               p.block > block && rows <= 2 * H100_SMS && N > 1024 && N <= 4096;
      /* a streaming registered build's blocks of N/8 threads, up to its
       * stream_block_cap, for at least four rows per SM of 1025..4096 */
      uint32_t stream = 1;
      while ((int64_t)stream < (N + 7) / 8)
        stream <<= 1;
      stream = stream > b->stream_block_cap ? b->stream_block_cap : stream;
      const bool stream_ok = p.build == FP_ROWS_REGISTERED && b->stream_block_cap != 0 &&
                             !b->has[FP_ROWS_LONG] && p.block == stream && p.block > block &&
                             rows >= 4 * H100_SMS && N > 1024 && N <= 4096;
      if (!long_ok && !full_ok && !wide_ok && !few_long_ok && !stream_ok)
        fail_msg("%s: block %u instead of the host's %u", what, p.block, block);
    }
    break;
  }
  }
}

/* The offers with the cluster build's shared-memory cache, as the backend
 * fills them on an H100 (227 KiB a block less the build's static shared
 * memory). */
enum { H100_CLUSTER_SMEM = 231424 };
fp_rows_builds with_cluster_smem(fp_rows_builds b, int arrays) {
  b.cluster_smem_arrays = arrays;
  b.cluster_smem_max = H100_CLUSTER_SMEM;
  return b;
}
