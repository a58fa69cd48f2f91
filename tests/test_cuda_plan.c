/* fuseport tests: the CUDA backend's ROWS launch planner (cuda_plan.h), on
 * any machine. It decides which build of a row kernel runs and in what
 * geometry; a wrong decision would break a build's precondition (a row
 * longer than its cache, a grid that is not a whole number of clusters) and
 * compute garbage or trap on the GPU, so every decision over a wide sweep of
 * shapes is checked against the preconditions, and the shapes the GPU tests
 * use are checked to reach the build they are meant to reach. */
#include <stdio.h>

#include "test_util.h"

#include "cuda_plan.h"

enum { H100_SMS = 132, HOST_CAP = 1 << 20 };

/* The offer of kernels/cu/reduce.cu (no WARP build: WARP_SHORT covers the
 * rows warps are used for; a STREAM build) and of horizontal.cu (no long-row or short warp
 * build; a warp build of 8 vectors; a streaming cluster build; blocks of
 * up to 256 or 512 threads for many mid-length rows). */
static const fp_rows_builds reduce_offer = {
    {true, true, false, true, true}, 2, 0, 4, 8, 0, 1, false, 0, 0, 32769, 0, 0, 0};
static const fp_rows_builds reduce_offer_k4 = {
    {true, true, false, true, true}, 2, 0, 4, 4, 0, 1, false, 0, 0, 32769, 0, 0, 0};
/* softmax_backward: two rows cached and staged; its streaming build keeps
 * nothing */
static const fp_rows_builds backward_offer = {
    {true, true, false, true, true}, 2, 0, 4, 4, 0, 2, true, 0, 0, 0, 0, 0, 0};
/* the real offers of softmax and layernorm: long-row caches of 8 and 4
 * vectors that do not stage; streaming builds that keep their row */
static const fp_rows_builds softmax_offer = {
    {true, true, false, true, true}, 2, 0, 4, 8, 0, 0, false, 0, 0, 32769, 0, 0, 0};
static const fp_rows_builds layernorm_offer = {
    {true, true, false, true, true}, 2, 0, 4, 4, 0, 0, false, 0, 0, 32769, 0, 0, 0};
/* layernorm's real offer: its streaming build also takes many rows of
 * 8193..16384 floats in blocks of 512 */
static const fp_rows_builds layernorm_half_offer = {
    {true, true, false, true, true}, 2, 0, 4, 4, 0, 0, false, 0, 8193, 32769, 0, 0, 0};
/* double_softmax: its long-row build stages; blocks of 512 from 12289 */
static const fp_rows_builds double_softmax_half_offer = {
    {true, true, false, true, true}, 2, 0, 4, 4, 0, 1, false, 0, 12289, 32769, 0, 0, 0};
static const fp_rows_builds layernorm_offer_no_stream = {
    {true, true, false, true, false}, 2, 0, 4, 4, 0, 0, false, 0, 0, 0, 0, 0, 0};
static const fp_rows_builds hreduce_offer = {
    {false, false, true, true}, 0, 8, 0, 0, 0, 0, false, 256, 0, 0, 0, 0, 0};
/* hreduce_pointwise: 40 registers, three blocks of 512 resident, one of 1024 */
static const fp_rows_builds hreduce_pointwise_offer = {
    {false, false, true, true}, 0, 8, 0, 0, 512, 0, false, 512, 0, 0, 0, 0, 0};

/* The host's ROWS request (ops/primitives.c fp_rows_range). */
static void host_request(int64_t M, int64_t N, uint32_t *groups, uint32_t *block) {
  uint32_t local = 1;
  while ((int64_t)local < (N + 15) / 16)
    local <<= 1;
  *block = local < 32 ? 32 : (local > 1024 ? 1024 : local);
  *groups = (uint32_t)(M < HOST_CAP ? M : HOST_CAP);
}

static fp_rows_plan plan_for(fp_rows_policy policy, const fp_rows_builds *b, int64_t M, int64_t N,
                             int cc) {
  uint32_t groups, block;
  host_request(M, N, &groups, &block);
  return fp_cuda_plan_rows(policy, b, M, N, groups, block, cc, H100_SMS, 16);
}

/* The same on a device (or under FUSEPORT_CUDA_MAX_CLUSTER) that keeps
 * clusters at the portable size of 8. */
static fp_rows_plan plan_portable(const fp_rows_builds *b, int64_t M, int64_t N) {
  uint32_t groups, block;
  host_request(M, N, &groups, &block);
  return fp_cuda_plan_rows(FP_ROWS_POLICY_TUNED, b, M, N, groups, block, 9, H100_SMS, 8);
}

static void assert_preconditions(const fp_rows_builds *b, int64_t M, int64_t N, int cc,
                                 fp_rows_plan p) {
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
    if (p.grid != groups || p.cluster != 1 || (p.block != block && p.block != 512))
      fail_msg("%s: the streaming build keeps the host's grid, in its block or 512", what);
    /* rows the long-row build cannot cache in the host's block, or, where
     * the offer's stream_half_long_min_n allows, not in blocks of 512 */
    const uint32_t cache_block =
        b->stream_half_long_min_n > 0 && N >= b->stream_half_long_min_n && p.block == 512 ? 512
                                                                                          : block;
    if (b->long_vectors <= 0 || N <= 4 * (int64_t)b->long_vectors * cache_block)
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
static fp_rows_builds with_cluster_smem(fp_rows_builds b, int arrays) {
  b.cluster_smem_arrays = arrays;
  b.cluster_smem_max = H100_CLUSTER_SMEM;
  return b;
}

/* Every M and N of a sweep (odd sizes, powers of two and their neighbours,
 * 1..2^22), both offers, sm_80 and sm_90, both policies. */
static void test_preconditions_hold(void **state) {
  (void)state;
  const int64_t sizes[] = {1,     2,     3,     4,      5,      7,      31,     32,      33,
                           127,   128,   129,   255,    256,    257,    509,    512,     513,
                           1000,  1023,  1024,  1025,   2047,   2048,   4095,   4096,    4097,
                           8191,  8192,  8193,  16383,  16384,  16385,  30001,  32768,   32769,
                           65535, 65536, 65537, 131071, 131072, 131073, 262144, 1 << 20, 1 << 22};
  const int n = (int)(sizeof sizes / sizeof sizes[0]);
  const fp_rows_builds softmax_smem = with_cluster_smem(softmax_offer, 1);
  const fp_rows_builds backward_smem = with_cluster_smem(backward_offer, 2);
  const fp_rows_builds *offers[] = {&reduce_offer,  &reduce_offer_k4,         &backward_offer,
                                    &softmax_offer, &layernorm_offer,         &layernorm_half_offer,
                                    &hreduce_offer, &hreduce_pointwise_offer, &softmax_smem,
                                    &backward_smem};
  int checked = 0, tuned_builds = 0;
  for (size_t o = 0; o < sizeof offers / sizeof offers[0]; ++o)
    for (int policy = 0; policy < 3; ++policy)
      for (int cc = 8; cc <= 9; ++cc)
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) {
            fp_rows_plan p = plan_for((fp_rows_policy)policy, offers[o], sizes[i], sizes[j], cc);
            assert_preconditions(offers[o], sizes[i], sizes[j], cc, p);
            if (policy == FP_ROWS_POLICY_BLOCK)
              assert_true(p.build == FP_ROWS_REGISTERED || p.build == FP_ROWS_LONG);
            else
              tuned_builds += p.build == FP_ROWS_WARP || p.build == FP_ROWS_CLUSTER;
            ++checked;
          }
  assert_int_equal(checked, (int)(sizeof offers / sizeof offers[0]) * 3 * 2 * n * n);
  assert_true(tuned_builds > 0);
}

/* The shapes of tests/test_ops.c and `fuseport check` reach the builds they
 * are listed for on an H100 with the tuned policy. */
static void test_gpu_test_shapes_reach_every_build(void **state) {
  (void)state;
  const struct {
    int64_t M, N;
    fp_rows_build reduce, hreduce;
    uint32_t cluster;
  } cases[] = {
      {1, 1, FP_ROWS_WARP_SHORT, FP_ROWS_WARP, 1},
      {1000, 3, FP_ROWS_WARP_SHORT, FP_ROWS_WARP, 1},
      {128, 256, FP_ROWS_WARP_SHORT, FP_ROWS_WARP, 1},
      /* past 256 floats a row, a block per row (measured as fast or faster);
       * up to 1024 floats and two rows per SM, the registered build widened */
      {70, 509, FP_ROWS_REGISTERED, FP_ROWS_REGISTERED, 1},
      {1, 1000, FP_ROWS_REGISTERED, FP_ROWS_REGISTERED, 1},
      {64, 1024, FP_ROWS_REGISTERED, FP_ROWS_REGISTERED, 1},
      {300, 1000, FP_ROWS_LONG, FP_ROWS_REGISTERED, 1},
      /* rows of 16384 or more, at most one per 4 SMs: a cluster per row */
      {5, 65537, FP_ROWS_CLUSTER, FP_ROWS_CLUSTER, 8},
      {16, 32768, FP_ROWS_CLUSTER, FP_ROWS_CLUSTER, 8},
      /* ... of 16 where 8 blocks cannot cache the row (the hreduce
       * kernels' cluster build streams: 8) */
      {1, 262144, FP_ROWS_CLUSTER, FP_ROWS_CLUSTER, 16},
      {2, 262144, FP_ROWS_CLUSTER, FP_ROWS_CLUSTER, 16},
      /* longer still: a cluster of 16 keeping the row in shared memory;
       * of 8 for more rows than clusters of 16 may take */
      {1, 300007, FP_ROWS_CLUSTER, FP_ROWS_CLUSTER, 16},
      {11, 131073, FP_ROWS_CLUSTER, FP_ROWS_CLUSTER, 8},
      /* the streaming build for the kernels whose long-row cache holds
       * 32768 floats */
      {40, 32769, FP_ROWS_STREAM, FP_ROWS_REGISTERED, 1},
      /* shorter rows, or more of them: a block per row (measured faster) */
      {33, 4097, FP_ROWS_REGISTERED, FP_ROWS_REGISTERED, 1},
      {70, 3001, FP_ROWS_LONG, FP_ROWS_REGISTERED, 1},
      {530, 1030, FP_ROWS_LONG, FP_ROWS_REGISTERED, 1},
      {30, 12000, FP_ROWS_LONG, FP_ROWS_REGISTERED, 1},
      {66, 30001, FP_ROWS_LONG, FP_ROWS_REGISTERED, 1},
      {128, 65536, FP_ROWS_STREAM, FP_ROWS_REGISTERED, 1},
      {256, 32768, FP_ROWS_LONG, FP_ROWS_REGISTERED, 1},
  };
  /* the offer with the cluster build's shared memory, as on the GPU */
  const fp_rows_builds reduce_smem = with_cluster_smem(reduce_offer, 1);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    fp_rows_plan r = plan_for(FP_ROWS_POLICY_TUNED, &reduce_smem, cases[k].M, cases[k].N, 9);
    fp_rows_plan h = plan_for(FP_ROWS_POLICY_TUNED, &hreduce_offer, cases[k].M, cases[k].N, 9);
    if (r.build != cases[k].reduce || h.build != cases[k].hreduce)
      fail_msg("%lldx%lld: builds %d/%d, expected %d/%d", (long long)cases[k].M,
               (long long)cases[k].N, (int)r.build, (int)h.build, (int)cases[k].reduce,
               (int)cases[k].hreduce);
    if (r.build == FP_ROWS_CLUSTER && r.cluster != cases[k].cluster)
      fail_msg("%lldx%lld: cluster of %u, expected %u", (long long)cases[k].M,
               (long long)cases[k].N, r.cluster, cases[k].cluster);
    /* without clusters (sm_80/86) the long rows stay on the block builds */
    fp_rows_plan a = plan_for(FP_ROWS_POLICY_TUNED, &reduce_offer, cases[k].M, cases[k].N, 8);
    assert_true(a.build != FP_ROWS_CLUSTER);
  }
}

/* One or a few rows longer than a cluster of 8 caches (131072 floats):
 * clusters of 16 blocks where the device allows non-portable sizes, up to
 * 262144 floats and 1.25 blocks per SM (10 rows on 132 SMs); the streaming
 * build beyond, with a portable maximum and on sm_80. */
static void test_nonportable_clusters(void **state) {
  (void)state;
  const struct {
    int64_t M, N;
    uint32_t cluster, block; /* 0: not a cluster plan */
  } cases[] = {
      {1, 131072, 8, 1024},  {1, 131073, 16, 1024}, {1, 151936, 16, 1024}, {10, 151936, 16, 1024},
      {11, 151936, 0, 0},    {33, 151936, 0, 0},    {1, 262144, 16, 1024}, {1, 262145, 0, 0},
      {9, 200003, 16, 1024}, {1, 140000, 16, 1024},
  };
  const fp_rows_builds *offers[] = {&reduce_offer, &backward_offer, &layernorm_offer};
  for (size_t o = 0; o < sizeof offers / sizeof offers[0]; ++o)
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
      const int64_t M = cases[k].M, N = cases[k].N;
      const fp_rows_plan p = plan_for(FP_ROWS_POLICY_TUNED, offers[o], M, N, 9);
      assert_preconditions(offers[o], M, N, 9, p);
      if (cases[k].cluster == 0) {
        if (p.build == FP_ROWS_CLUSTER)
          fail_msg("%lldx%lld: cluster of %u, expected none", (long long)M, (long long)N,
                   p.cluster);
      } else {
        if (p.build != FP_ROWS_CLUSTER || p.cluster != cases[k].cluster ||
            p.block != cases[k].block)
          fail_msg("%lldx%lld: build %d cluster %u block %u, expected a cluster of %u x %u",
                   (long long)M, (long long)N, (int)p.build, p.cluster, p.block, cases[k].cluster,
                   cases[k].block);
        assert_int_equal(p.grid, (uint32_t)M * cases[k].cluster);
      }
      /* at the portable maximum, never more than 8 */
      const fp_rows_plan q = plan_portable(offers[o], M, N);
      assert_preconditions(offers[o], M, N, 9, q);
      if (q.build == FP_ROWS_CLUSTER)
        assert_true(q.cluster <= 8);
      if (cases[k].cluster == 16)
        assert_true(q.build != FP_ROWS_CLUSTER);
      /* no clusters on sm_80 */
      assert_true(plan_for(FP_ROWS_POLICY_TUNED, offers[o], M, N, 8).build != FP_ROWS_CLUSTER);
    }
}

/* Fewer rows than SMs of more than 65536 floats that no register cluster
 * holds: a cluster per row that keeps the row in shared memory, its size
 * the smallest that fits, doubled while one wave holds the clusters; the
 * streaming build where the offer has no such cache, for as many rows as
 * SMs, where the smallest cluster takes more than one wave for more than
 * 66 rows, and on sm_80. */
static void test_cluster_smem(void **state) {
  (void)state;
  const struct {
    int64_t M, N;
    int arrays;
    uint32_t cluster; /* 0: not a cluster plan */
    uint64_t bytes;   /* its shared memory: arrays x slots x 1024 x 16 (blocks of 1024) */
  } cases[] = {
      {3, 262147, 1, 16, 5 * 16384},  /* 4097 float4 a block: 5 slots */
      {9, 300000, 1, 8, 10 * 16384},  /* 16 would take 144 blocks */
      {1, 300007, 1, 16, 5 * 16384},  /* test_ops' shape past 262144 */
      {40, 262147, 1, 8, 9 * 16384},  /* 320 blocks: 2.4 waves, against 40 */
      {54, 100003, 1, 2, 13 * 16384}, /* 108 blocks */
      {66, 262147, 1, 8, 9 * 16384},
      {67, 262147, 1, 0, 0}, /* 536 blocks for 67 rows */
      {3, 262147, 2, 16, 2 * 5 * 16384},
      {9, 300000, 2, 16, 2 * 5 * 16384}, /* two arrays of 10 slots do not fit */
      {54, 100003, 2, 4, 2 * 7 * 16384},
      {132, 262147, 1, 0, 0}, /* as many rows as SMs */
      {100, 65537, 1, 0, 0},  /* 200 blocks for 100 rows */
      {64, 65536, 1, 0, 0},   /* the streaming build keeps the row whole */
      {3, 65536, 1, 8, 0},    /* the register cluster holds it */
      {1, 1000000, 1, 0, 0},  /* 16 blocks of 227 KiB hold 929792 floats */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    const int64_t M = cases[k].M, N = cases[k].N;
    const fp_rows_builds base = cases[k].arrays == 2 ? backward_offer : layernorm_offer;
    const fp_rows_builds b = with_cluster_smem(base, cases[k].arrays);
    const fp_rows_plan p = plan_for(FP_ROWS_POLICY_TUNED, &b, M, N, 9);
    assert_preconditions(&b, M, N, 9, p);
    const uint64_t bytes = fp_cuda_cluster_smem_bytes(&b, &p, N);
    if (cases[k].cluster == 0) {
      if (p.build == FP_ROWS_CLUSTER)
        fail_msg("%lldx%lld: cluster of %u, expected none", (long long)M, (long long)N, p.cluster);
    } else if (p.build != FP_ROWS_CLUSTER || p.cluster != cases[k].cluster ||
               (bytes > 0 && p.block != 1024) || p.grid != (uint32_t)M * cases[k].cluster ||
               bytes != cases[k].bytes) {
      fail_msg("%lldx%lld (%d arrays): build %d cluster %u block %u grid %u, %llu bytes; "
               "expected a cluster of %u, %llu bytes",
               (long long)M, (long long)N, cases[k].arrays, (int)p.build, p.cluster, p.block,
               p.grid, (unsigned long long)bytes, cases[k].cluster,
               (unsigned long long)cases[k].bytes);
    }
    /* the offer without the cache: as before, no shared memory */
    const fp_rows_plan q = plan_for(FP_ROWS_POLICY_TUNED, &base, M, N, 9);
    assert_preconditions(&base, M, N, 9, q);
    assert_true(fp_cuda_cluster_smem_bytes(&base, &q, N) == 0);
    if (bytes > 0)
      assert_true(q.build != FP_ROWS_CLUSTER);
    /* an offer that starts at 131073 floats (cluster_smem_min_n) */
    fp_rows_builds late = b;
    late.cluster_smem_min_n = 131072;
    const fp_rows_plan l = plan_for(FP_ROWS_POLICY_TUNED, &late, M, N, 9);
    assert_preconditions(&late, M, N, 9, l);
    if (N <= 131072 && fp_cuda_cluster_smem_bytes(&late, &l, N) != 0)
      fail_msg("%lldx%lld: shared-memory cluster below the offer's 131073 floats", (long long)M,
               (long long)N);
    if (N > 131072 && (l.build != p.build || l.cluster != p.cluster))
      fail_msg("%lldx%lld: the offer's 131073 floats changed the plan of a longer row",
               (long long)M, (long long)N);
    /* at the portable maximum, at most 8 blocks */
    uint32_t groups, block;
    host_request(M, N, &groups, &block);
    const fp_rows_plan r =
        fp_cuda_plan_rows(FP_ROWS_POLICY_TUNED, &b, M, N, groups, block, 9, H100_SMS, 8);
    assert_preconditions(&b, M, N, 9, r);
    assert_true(r.build != FP_ROWS_CLUSTER || r.cluster <= 8);
    assert_true(plan_for(FP_ROWS_POLICY_TUNED, &b, M, N, 8).build != FP_ROWS_CLUSTER);
  }
}

/* The long-row build takes the smallest block that caches the row (at
 * least 128 threads, at most the host's) under the tuned policy only. */
static void test_long_row_blocks(void **state) {
  (void)state;
  static const struct {
    int64_t M, N;
    uint32_t block_k8, block_k4; /* expected blocks for 8- and 4-vector caches */
  } cases[] = {
      {4096, 16384, 512, 1024}, {512, 16384, 512, 1024}, {8192, 8192, 256, 512},
      {4096, 4096, 128, 256},   {8192, 4096, 128, 256},  {30, 12000, 512, 1024},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    for (int cc = 8; cc <= 9; ++cc) {
      fp_rows_plan p8 = plan_for(FP_ROWS_POLICY_TUNED, &reduce_offer, cases[k].M, cases[k].N, cc);
      fp_rows_plan p4 =
          plan_for(FP_ROWS_POLICY_TUNED, &reduce_offer_k4, cases[k].M, cases[k].N, cc);
      fp_rows_plan b8 = plan_for(FP_ROWS_POLICY_BLOCK, &reduce_offer, cases[k].M, cases[k].N, cc);
      uint32_t groups, host_block;
      host_request(cases[k].M, cases[k].N, &groups, &host_block);
      assert_int_equal(p8.build, FP_ROWS_LONG);
      assert_int_equal(p8.block, cases[k].block_k8);
      assert_int_equal(p4.block, cases[k].block_k4);
      assert_int_equal(b8.block, host_block);
      assert_int_equal(p8.grid, groups);
    }
  }
}

/* Rows the long-row build's cache cannot hold in the host's block (more
 * than 4 x long_vectors x 1024 floats for N >= 16384): the streaming build
 * in the host's geometry under the tuned policy (sm_80 too), but blocks of
 * 512 for at least two rows per SM of at most 24576 floats and for more
 * rows than SMs, under two per SM, of at most 32768; the long-row
 * build under the block policy; rows it holds, and kernels without a
 * streaming build, keep the long-row build. */
static void test_stream_build(void **state) {
  (void)state;
  const struct {
    const fp_rows_builds *b;
    int64_t M, N;
    fp_rows_build build; /* the tuned policy's, on sm_80 */
    uint32_t block;      /* its block, 0: the host's */
  } cases[] = {
      {&reduce_offer, 1024, 65536, FP_ROWS_STREAM, 0},
      {&reduce_offer, 4096, 32769, FP_ROWS_STREAM, 0},
      {&reduce_offer, 4096, 32768, FP_ROWS_LONG, 0},
      {&reduce_offer_k4, 4096, 32768, FP_ROWS_STREAM, 0},
      {&reduce_offer_k4, 4096, 24577, FP_ROWS_STREAM, 0},
      {&reduce_offer_k4, 4096, 24576, FP_ROWS_STREAM, 512},
      {&reduce_offer_k4, 264, 16385, FP_ROWS_STREAM, 512},
      /* more rows than SMs, under two per SM, up to 32768 floats: one wave */
      {&reduce_offer_k4, 263, 20480, FP_ROWS_STREAM, 512},
      {&reduce_offer_k4, 133, 32768, FP_ROWS_STREAM, 512},
      {&reduce_offer_k4, 132, 32768, FP_ROWS_STREAM, 0},
      {&reduce_offer_k4, 263, 32769, FP_ROWS_STREAM, 0},
      {&reduce_offer_k4, 264, 32768, FP_ROWS_STREAM, 0},
      {&reduce_offer_k4, 66, 16385, FP_ROWS_STREAM, 0},
      {&reduce_offer_k4, 66, 16384, FP_ROWS_LONG, 0},
      {&layernorm_offer, 1, 262144, FP_ROWS_STREAM, 0},
      {&hreduce_offer, 1024, 65536, FP_ROWS_REGISTERED, 0},
      {&layernorm_offer_no_stream, 512, 65536, FP_ROWS_LONG, 0},
      /* stream_half_long_min_n: at least three rows per SM, of at least
       * that many floats, that the long-row build caches only in blocks of
       * 1024 */
      {&layernorm_half_offer, 396, 16384, FP_ROWS_STREAM, 512},
      {&layernorm_half_offer, 65536, 10240, FP_ROWS_STREAM, 512},
      {&layernorm_half_offer, 395, 16384, FP_ROWS_LONG, 0},
      {&layernorm_half_offer, 65536, 8192, FP_ROWS_LONG, 0},
      {&layernorm_offer, 65536, 16384, FP_ROWS_LONG, 0},
      {&double_softmax_half_offer, 396, 16384, FP_ROWS_STREAM, 512},
      {&double_softmax_half_offer, 396, 12289, FP_ROWS_STREAM, 512},
      {&double_softmax_half_offer, 65536, 12288, FP_ROWS_LONG, 0},
      {&double_softmax_half_offer, 395, 16384, FP_ROWS_LONG, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    const int64_t M = cases[k].M, N = cases[k].N;
    uint32_t groups, host_block;
    host_request(M, N, &groups, &host_block);
    const fp_rows_plan t = plan_for(FP_ROWS_POLICY_TUNED, cases[k].b, M, N, 8);
    const fp_rows_plan b = plan_for(FP_ROWS_POLICY_BLOCK, cases[k].b, M, N, 8);
    if (t.build != cases[k].build)
      fail_msg("%lldx%lld: build %d, expected %d", (long long)M, (long long)N, (int)t.build,
               (int)cases[k].build);
    assert_preconditions(cases[k].b, M, N, 8, t);
    if (t.build == FP_ROWS_STREAM) {
      assert_int_equal(t.block, cases[k].block != 0 ? cases[k].block : host_block);
      assert_int_equal(t.grid, groups);
    }
    assert_true(b.build != FP_ROWS_STREAM);
  }
}

/* One planner case: the tuned policy's build and block, on the host's grid;
 * the block policy keeps the host's block. */
typedef struct {
  const fp_rows_builds *b;
  int64_t M, N;
  uint32_t block; /* the tuned policy's */
} block_case;

static void expect_blocks(const block_case *cases, size_t n, fp_rows_build build) {
  for (size_t k = 0; k < n; ++k) {
    const fp_rows_plan t = plan_for(FP_ROWS_POLICY_TUNED, cases[k].b, cases[k].M, cases[k].N, 9);
    const fp_rows_plan b = plan_for(FP_ROWS_POLICY_BLOCK, cases[k].b, cases[k].M, cases[k].N, 9);
    uint32_t groups, host_block;
    host_request(cases[k].M, cases[k].N, &groups, &host_block);
    if (t.build != build || t.block != cases[k].block || t.grid != groups)
      fail_msg("%lldx%lld: build %d block %u grid %u, expected build %d, block %u, grid %u",
               (long long)cases[k].M, (long long)cases[k].N, (int)t.build, t.block, t.grid,
               (int)build, cases[k].block, groups);
    assert_int_equal(b.block, host_block);
  }
}

/* At most two rows per SM of 1025..4096 floats: a long-row build that does
 * not stage takes pow2_ceil(ceil(N/4)) threads, at most 512, where it
 * would take fewer; one that stages, more rows, longer rows and the block
 * policy keep their blocks. */
static void test_few_long_rows_blocks(void **state) {
  (void)state;
  static const block_case cases[] = {
      {&softmax_offer, 128, 4096, 512},
      {&softmax_offer, 264, 4096, 512},
      {&softmax_offer, 128, 2048, 512},
      {&softmax_offer, 1, 1100, 512},
      {&softmax_offer, 70, 3001, 512},
      {&layernorm_offer, 256, 2048, 512},
      {&layernorm_offer, 128, 1500, 512},
      {&layernorm_offer, 3, 4096, 512},
      /* more rows: the smallest block that caches the row */
      {&softmax_offer, 265, 4096, 128},
      {&layernorm_offer, 512, 2048, 128},
      /* longer rows: likewise */
      {&softmax_offer, 128, 8192, 256},
      {&layernorm_offer, 128, 8192, 512},
      /* a build that stages keeps its block */
      {&reduce_offer, 128, 4096, 128},
      {&backward_offer, 128, 2048, 128},
  };
  expect_blocks(cases, sizeof cases / sizeof cases[0], FP_ROWS_LONG);
}

/* At least four rows per SM of 1025..4096 floats: the streaming builds
 * (hreduce_*) take blocks of N/8 threads up to their cap (512 and 256);
 * fewer rows, other lengths, the block policy and a kernel with a long-row
 * build keep the host's block. */
static void test_stream_blocks(void **state) {
  (void)state;
  static const block_case cases[] = {
      {&hreduce_pointwise_offer, 2048, 2048, 256},
      {&hreduce_pointwise_offer, 1024, 4096, 512},
      {&hreduce_pointwise_offer, 528, 3001, 512},
      {&hreduce_pointwise_offer, 65536, 1025, 256},
      {&hreduce_offer, 4096, 2048, 256},
      {&hreduce_offer, 1024, 4096, 256},
      /* fewer than four rows per SM, or rows outside 1025..4096: the host's */
      {&hreduce_pointwise_offer, 527, 2048, 128},
      {&hreduce_offer, 4096, 1024, 64},
      {&hreduce_pointwise_offer, 4096, 4097, 512},
      {&hreduce_offer, 4096, 8192, 512},
  };
  expect_blocks(cases, sizeof cases / sizeof cases[0], FP_ROWS_REGISTERED);
  /* a kernel with a long-row build never takes it: softmax's offer with a cap */
  fp_rows_builds with_long = softmax_offer;
  with_long.stream_block_cap = 512;
  const fp_rows_plan l = plan_for(FP_ROWS_POLICY_TUNED, &with_long, 4096, 2048, 9);
  assert_int_equal(l.build, FP_ROWS_LONG);
  assert_int_equal(l.block, 128);
}

/* hreduce_pointwise's block build takes 512 threads instead of 1024 when
 * there are at least 4 rows per SM; hreduce_reduce keeps the host's. */
static void test_full_block(void **state) {
  (void)state;
  static const struct {
    int64_t M, N;
    uint32_t block;
  } cases[] = {{4096, 16384, 512},
               {2048, 16384, 512},
               {528, 65536, 512},
               {527, 65536, 1024},
               {128, 65536, 1024},
               {65536, 8192, 512},
               {1024, 16384, 512},
               /* N <= 4096: the streaming rule's N/8 (hreduce_reduce: its cap, the host's) */
               {65536, 4096, 512}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    fp_rows_plan p =
        plan_for(FP_ROWS_POLICY_TUNED, &hreduce_pointwise_offer, cases[k].M, cases[k].N, 9);
    fp_rows_plan r = plan_for(FP_ROWS_POLICY_TUNED, &hreduce_offer, cases[k].M, cases[k].N, 9);
    fp_rows_plan b =
        plan_for(FP_ROWS_POLICY_BLOCK, &hreduce_pointwise_offer, cases[k].M, cases[k].N, 9);
    uint32_t groups, host_block;
    host_request(cases[k].M, cases[k].N, &groups, &host_block);
    assert_int_equal(p.build, FP_ROWS_REGISTERED);
    assert_int_equal(p.block, cases[k].block);
    assert_int_equal(r.block, host_block);
    assert_int_equal(b.block, host_block);
  }
}

/* The long-row build stages exactly when its plan caches every row: the
 * stage holds stage_rows x long_vectors float4 per thread; other builds,
 * kernels without a stage and rows the cache cannot hold get none. */
static void test_stage_bytes(void **state) {
  (void)state;
  static const struct {
    const fp_rows_builds *b;
    int64_t M, N;
    uint64_t bytes;
  } cases[] = {
      /* softmax (8 vectors): 512 threads cache 16384 floats, 64 KiB */
      {&reduce_offer, 4096, 16384, 8u * 16u * 512u},
      {&reduce_offer, 4096, 16383, 8u * 16u * 512u},
      {&reduce_offer, 4096, 32768, 8u * 16u * 1024u},
      {&reduce_offer, 4096, 32769, 0}, /* longer than 1024 threads cache: streamed */
      {&reduce_offer, 65536, 65536, 0},
      {&reduce_offer, 65536, 4096, 8u * 16u * 128u},
      {&reduce_offer, 4096, 2048, 8u * 16u * 128u}, /* the smallest long-row block */
      {&reduce_offer, 8, 65536, 0},                 /* cluster build */
      {&reduce_offer, 65536, 128, 0},               /* warp build */
      {&reduce_offer_k4, 4096, 16384, 4u * 16u * 1024u},
      {&reduce_offer_k4, 4096, 16385, 0},
      {&backward_offer, 4096, 16384, 2u * 4u * 16u * 1024u},
      {&backward_offer, 1000, 8192, 2u * 4u * 16u * 512u},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    const fp_rows_plan p = plan_for(FP_ROWS_POLICY_TUNED, cases[k].b, cases[k].M, cases[k].N, 9);
    const uint64_t bytes = fp_cuda_stage_bytes(cases[k].b, &p, cases[k].N);
    if (bytes != cases[k].bytes)
      fail_msg("M=%lld N=%lld (build %d, block %u): %llu bytes of stage, expected %llu",
               (long long)cases[k].M, (long long)cases[k].N, (int)p.build, p.block,
               (unsigned long long)bytes, (unsigned long long)cases[k].bytes);
    if (bytes > 0) /* every row the build gets is then cached */
      assert_true(cases[k].N <= 4 * (int64_t)cases[k].b->long_vectors * p.block);
  }
  fp_rows_plan p = plan_for(FP_ROWS_POLICY_TUNED, &hreduce_offer, 4096, 16384, 9);
  assert_int_equal(fp_cuda_stage_bytes(&hreduce_offer, &p, 16384), 0);
}

/* The streaming build keeps rows of at least stream_smem_min_n floats
 * (32769 in these offers; rows of more than 16384 in blocks of 512 where
 * two fit, from two rows per SM; any row under any_length) in shared memory:
 * ceil(N/4) float4, or the limit rounded down to whole float4; nothing for
 * shorter rows, other builds, kernels that keep nothing, or a limit below
 * one float4. */
static void test_stream_smem_bytes(void **state) {
  (void)state;
  enum { H100_LIMIT = 232448 - 576 }; /* sharedMemPerBlockOptin less the static */
  static const struct {
    const fp_rows_builds *b;
    int64_t M, N;
    uint64_t limit;
    bool any_length;
    uint64_t bytes;
  } cases[] = {
      {&reduce_offer, 4096, 32769, H100_LIMIT, false, 8193u * 16u}, /* the whole row */
      {&reduce_offer_k4, 4096, 40001, H100_LIMIT, false, 10001u * 16u},
      {&reduce_offer, 1024, 65536, H100_LIMIT, false, (H100_LIMIT / 16u) * 16u}, /* 14492 */
      {&reduce_offer_k4, 4096, 32768, H100_LIMIT, false, 0}, /* streamed, but L1 keeps it */
      {&reduce_offer_k4, 4096, 32768, H100_LIMIT, true, 8192u * 16u},
      {&reduce_offer_k4, 66, 16385, H100_LIMIT, false, 0},
      /* blocks of 512, two per SM, each keeping its whole row */
      {&reduce_offer_k4, 1024, 24576, H100_LIMIT, false, 6144u * 16u},
      {&reduce_offer_k4, 300, 20001, H100_LIMIT, false, 5001u * 16u},
      {&reduce_offer_k4, 300, 20001, 2 * (5001u * 16u + 2048u) - 1, false, 0},
      {&reduce_offer_k4, 200, 20001, H100_LIMIT, false, 0}, /* one wave: under two per SM */
      {&reduce_offer_k4, 200, 32768, H100_LIMIT, false, 0}, /* two do not fit */
      {&reduce_offer_k4, 100, 24576, H100_LIMIT, false, 0}, /* blocks of 1024 */
      {&backward_offer, 1024, 24576, H100_LIMIT, false, 0}, /* keeps nothing */
      {&reduce_offer_k4, 66, 16385, H100_LIMIT, true, 4097u * 16u},
      {&reduce_offer, 1024, 65536, 15, false, 0},
      {&backward_offer, 64, 65536, H100_LIMIT, true, 0},             /* keeps nothing */
      {&layernorm_offer_no_stream, 512, 65536, H100_LIMIT, true, 0}, /* the long-row build */
      {&reduce_offer, 4096, 32768, H100_LIMIT, true, 0}, /* cached by the long-row build */
      {&reduce_offer, 65536, 128, H100_LIMIT, true, 0},  /* warp build */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    const fp_rows_plan p = plan_for(FP_ROWS_POLICY_TUNED, cases[k].b, cases[k].M, cases[k].N, 8);
    const uint64_t bytes = fp_cuda_stream_smem_bytes(cases[k].b, &p, cases[k].N, cases[k].limit,
                                                     cases[k].any_length, H100_SMS);
    if (bytes != cases[k].bytes)
      fail_msg("M=%lld N=%lld (build %d) limit %llu%s: %llu bytes kept, expected %llu",
               (long long)cases[k].M, (long long)cases[k].N, (int)p.build,
               (unsigned long long)cases[k].limit, cases[k].any_length ? " any length" : "",
               (unsigned long long)bytes, (unsigned long long)cases[k].bytes);
    assert_true(bytes <= cases[k].limit);
    if (bytes > 0)
      assert_int_equal(p.build, FP_ROWS_STREAM);
  }
}

/* Staging is taken only with at most two resident blocks per SM and if it
 * costs none of them, and then the grid is at most the resident blocks of
 * the whole GPU (a persistent grid). */
static void test_plan_stage(void **state) {
  (void)state;
  fp_rows_plan p = {FP_ROWS_LONG, 4096, 512, 1};
  assert_true(fp_cuda_plan_stage(&p, 2, 2, H100_SMS));
  assert_int_equal(p.grid, 2 * H100_SMS);
  p.grid = 100; /* fewer rows than resident blocks: unchanged */
  assert_true(fp_cuda_plan_stage(&p, 2, 2, H100_SMS));
  assert_int_equal(p.grid, 100);
  p.grid = 4096;
  assert_false(fp_cuda_plan_stage(&p, 1, 2, H100_SMS)); /* the stage would cost a block */
  assert_int_equal(p.grid, 4096);
  assert_false(fp_cuda_plan_stage(&p, 0, 1, H100_SMS)); /* does not fit at all */
  assert_false(fp_cuda_plan_stage(&p, 2, 2, 0));
  assert_int_equal(p.grid, 4096);
  assert_false(fp_cuda_plan_stage(&p, 3, 3, H100_SMS)); /* enough blocks overlap already */
  assert_int_equal(p.grid, 4096);
  assert_true(fp_cuda_plan_stage(&p, 1, 1, H100_SMS));
  assert_int_equal(p.grid, H100_SMS);
}

/* Many rows too long for the long-row build's cache: a cluster per row for
 * the kernel whose offer asks for it (softmax_backward) and for any kernel
 * under the cluster policy; the long-row build (streaming) otherwise, and
 * wherever the cluster's cache cannot hold the row or the device has no
 * clusters. */
static void test_cluster_many_rows(void **state) {
  (void)state;
  const struct {
    int64_t M, N;
    uint32_t cluster, block; /* 0: not a cluster plan */
  } cases[] = {
      {4096, 32768, 4, 512}, /* 4 x 8192 floats: 512 threads of 4 float4 */
      {512, 65536, 8, 512},  /* 8 x 8192 floats */
      {128, 65536, 8, 512},  /* 2^23 floats: the smallest many-row cell */
      {128, 32768, 0, 0},    /* 2^22 floats: fits the L2, streamed */
      {512, 16385, 4, 512},  /* just past the long-row cache: 4 x 4100 floats */
      {4096, 16384, 0, 0},   /* the long-row cache holds it */
      {64, 131072, 8, 1024}, /* the longest row 8 blocks of 1024 x 4 float4 hold */
      {512, 131073, 0, 0},   /* beyond it */
      {65536, 4096, 0, 0},   /* short rows */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    const int64_t M = cases[k].M, N = cases[k].N;
    const fp_rows_plan b = plan_for(FP_ROWS_POLICY_TUNED, &backward_offer, M, N, 9);
    const fp_rows_plan c = plan_for(FP_ROWS_POLICY_CLUSTER, &reduce_offer_k4, M, N, 9);
    const fp_rows_plan t = plan_for(FP_ROWS_POLICY_TUNED, &reduce_offer_k4, M, N, 9);
    const fp_rows_plan a = plan_for(FP_ROWS_POLICY_TUNED, &backward_offer, M, N, 8);
    const fp_rows_plan plans[] = {b, c};
    for (int i = 0; i < 2; ++i) {
      if (cases[k].cluster == 0) {
        assert_true(plans[i].build != FP_ROWS_CLUSTER);
      } else {
        assert_int_equal(plans[i].build, FP_ROWS_CLUSTER);
        assert_int_equal(plans[i].cluster, cases[k].cluster);
        assert_int_equal(plans[i].block, cases[k].block);
        assert_int_equal(plans[i].grid, (uint32_t)M * cases[k].cluster);
      }
      assert_preconditions(i == 0 ? &backward_offer : &reduce_offer_k4, M, N, 9, plans[i]);
    }
    assert_true(t.build != FP_ROWS_CLUSTER); /* no cluster_many_rows in its offer */
    assert_true(a.build != FP_ROWS_CLUSTER); /* sm_80: no clusters */
  }
}

/* At most two rows per SM of 257..1024 floats: the registered build in
 * blocks of pow2_ceil(ceil(N/4) + 1) threads under the tuned policy (the
 * host's N/16 under the block policy); more rows, or longer ones, keep the
 * host's block. */
static void test_few_rows_wide_blocks(void **state) {
  (void)state;
  const struct {
    int64_t M, N;
    uint32_t block; /* the tuned policy's */
  } cases[] = {
      {128, 512, 256}, {256, 1024, 512}, {264, 1000, 256}, {1, 257, 128},
      {128, 1025, 0},  {265, 512, 0},    {128, 256, 0},    {4096, 512, 0},
  };
  const fp_rows_builds *offers[] = {&reduce_offer, &reduce_offer_k4, &backward_offer,
                                    &hreduce_offer, &hreduce_pointwise_offer};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k)
    for (size_t o = 0; o < sizeof offers / sizeof offers[0]; ++o) {
      uint32_t groups, host_block;
      host_request(cases[k].M, cases[k].N, &groups, &host_block);
      const fp_rows_plan t = plan_for(FP_ROWS_POLICY_TUNED, offers[o], cases[k].M, cases[k].N, 9);
      const fp_rows_plan b = plan_for(FP_ROWS_POLICY_BLOCK, offers[o], cases[k].M, cases[k].N, 9);
      assert_int_equal(b.block, host_block);
      if (cases[k].block != 0) {
        assert_int_equal(t.build, FP_ROWS_REGISTERED);
        assert_int_equal(t.block, cases[k].block);
        assert_int_equal(t.grid, groups);
      } else {
        assert_true(t.block <= host_block || t.build != FP_ROWS_REGISTERED);
      }
    }
}

static void test_policy_from_env(void **state) {
  (void)state;
  bool unknown = true;
  assert_int_equal(fp_rows_policy_from_env(NULL, &unknown), FP_ROWS_POLICY_TUNED);
  assert_false(unknown);
  assert_int_equal(fp_rows_policy_from_env("", &unknown), FP_ROWS_POLICY_TUNED);
  assert_false(unknown);
  assert_int_equal(fp_rows_policy_from_env("block", &unknown), FP_ROWS_POLICY_BLOCK);
  assert_false(unknown);
  assert_int_equal(fp_rows_policy_from_env("tuned", &unknown), FP_ROWS_POLICY_TUNED);
  assert_false(unknown);
  assert_int_equal(fp_rows_policy_from_env("cluster", &unknown), FP_ROWS_POLICY_CLUSTER);
  assert_false(unknown);
  assert_int_equal(fp_rows_policy_from_env("fast", &unknown), FP_ROWS_POLICY_TUNED);
  assert_true(unknown);
}

/* FUSEPORT_CUDA_ELEM_GRID: what parses, and what does not. */
static void test_elem_policy_from_env(void **state) {
  (void)state;
  fp_elem_grid_policy p;
  assert_true(fp_elem_grid_policy_from_env(NULL, &p));
  assert_int_equal(p.kind, FP_ELEM_GRID_TUNED);
  assert_true(fp_elem_grid_policy_from_env("", &p));
  assert_int_equal(p.kind, FP_ELEM_GRID_TUNED);
  assert_true(fp_elem_grid_policy_from_env("tuned", &p));
  assert_int_equal(p.kind, FP_ELEM_GRID_TUNED);
  assert_true(fp_elem_grid_policy_from_env("host", &p));
  assert_int_equal(p.kind, FP_ELEM_GRID_HOST);
  assert_true(fp_elem_grid_policy_from_env("full", &p));
  assert_int_equal(p.kind, FP_ELEM_GRID_FULL);
  assert_true(fp_elem_grid_policy_from_env("waves:8", &p));
  assert_int_equal(p.kind, FP_ELEM_GRID_WAVES);
  assert_int_equal(p.blocks_per_sm, 8);
  assert_true(fp_elem_grid_policy_from_env("items:4", &p));
  assert_int_equal(p.kind, FP_ELEM_GRID_FULL);
  assert_int_equal(p.vectors_per_thread, 4);
  const char *bad[] = {"waves:", "waves:0", "waves:65", "waves:8x", "wave:8",   "Full",
                       "8",      "items:",  "items:0",  "items:65", "items:2 ", "item:2"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
    assert_false(fp_elem_grid_policy_from_env(bad[k], &p));
    assert_int_equal(p.kind, FP_ELEM_GRID_TUNED);
  }
}

/* Every ELEM grid is at least one block and within the device's limit;
 * waves never exceed K blocks per SM nor the host's grid; full covers every
 * element with two float4 per thread unless the limit caps it (items:K with
 * K); tuned is waves:8 or items:K, chosen by size and streams. */
static void test_elem_grids(void **state) {
  (void)state;
  const uint32_t block = 256, max_grid = 0x7fffffffu;
  const int64_t sizes[] = {1,
                           3,
                           1000,
                           65537,
                           ((int64_t)1 << 22) - 1,
                           (int64_t)1 << 22,
                           (int64_t)1 << 23,
                           ((int64_t)1 << 23) + 1,
                           (int64_t)1 << 24,
                           (int64_t)1 << 32,
                           (int64_t)1 << 44};
  fp_elem_grid_policy host = {FP_ELEM_GRID_HOST, 0, 0}, full = {FP_ELEM_GRID_FULL, 0, 0};
  fp_elem_grid_policy tuned = {FP_ELEM_GRID_TUNED, 0, 0}, waves8 = {FP_ELEM_GRID_WAVES, 8, 0};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
    const int64_t n = sizes[k];
    const int64_t wanted = (n + block - 1) / block;
    const uint32_t host_groups = (uint32_t)(wanted < 32 * H100_SMS ? wanted : 32 * H100_SMS);
    for (int three = 0; three < 2; ++three) {
      assert_int_equal(fp_cuda_plan_elem(host, n, three, host_groups, block, H100_SMS, max_grid),
                       host_groups);
      for (int waves = 1; waves <= 64; waves *= 2) {
        fp_elem_grid_policy w = {FP_ELEM_GRID_WAVES, waves, 0};
        const uint32_t g = fp_cuda_plan_elem(w, n, three, host_groups, block, H100_SMS, max_grid);
        assert_true(g >= 1 && g <= host_groups && g <= (uint32_t)(waves * H100_SMS));
      }
      const uint32_t g = fp_cuda_plan_elem(full, n, three, host_groups, block, H100_SMS, max_grid);
      assert_true(g >= 1 && g <= max_grid);
      if (g < max_grid)
        assert_true((int64_t)g * block * 8 >= n && ((int64_t)g - 1) * block * 8 < n);
      assert_int_equal(fp_cuda_plan_elem(full, n, three, host_groups, block, H100_SMS, 1000),
                       g < 1000 ? g : 1000);
      /* items:K covers every element with K float4 per thread; items:2 is full */
      for (int items = 1; items <= 64; items *= 2) {
        const fp_elem_grid_policy ik = {FP_ELEM_GRID_FULL, 0, items};
        const uint32_t gk = fp_cuda_plan_elem(ik, n, three, host_groups, block, H100_SMS, max_grid);
        const int64_t per_block = 4 * (int64_t)items * block;
        assert_true(gk >= 1 && gk <= max_grid);
        if (gk < max_grid)
          assert_true((int64_t)gk * per_block >= n && ((int64_t)gk - 1) * per_block < n);
        if (items == 2)
          assert_int_equal(gk, g);
      }
      /* tuned: waves:8 below 2^22 elements, then one round of the
       * kernel's unroll per thread: items:2 for three streams, items:4 */
      const fp_elem_grid_policy items4 = {FP_ELEM_GRID_FULL, 0, 4};
      const fp_elem_grid_policy expect = n < ((int64_t)1 << 22) ? waves8 : three ? full : items4;
      assert_int_equal(fp_cuda_plan_elem(tuned, n, three, host_groups, block, H100_SMS, max_grid),
                       fp_cuda_plan_elem(expect, n, three, host_groups, block, H100_SMS, max_grid));
    }
  }
}

/* The lean ELEM builds: each precondition of fp_cuda_plan_elem_builds
 * (cuda_plan.h) refuses the build on its own, at its boundary. */
static unsigned elem_fit(int64_t M, int64_t N, const fp_elem_operand *ops, int count, bool training,
                         uint64_t threads) {
  return fp_cuda_plan_elem_builds(M, N, ops, count, training, threads);
}

/* FLATBIAS32: rows whose length is not a multiple of 4, contiguous operands
 * and a row-broadcast bias (operand 2); rowvec32 keeps N % 4 == 0. */
static void test_elem_flatbias_builds(void **state) {
  (void)state;
  const unsigned rows = 1u << FP_ELEM_ROWVEC32, fb = 1u << FP_ELEM_FLATBIAS32,
                 fb_training = 1u << FP_ELEM_FLATBIAS32_TRAINING;
  const uint64_t base = (uint64_t)1 << 30, threads = 1024;
  const int64_t shapes[][2] = {{7094, 21631}, {24695, 4099}, {144, 10007}, {44631, 59},
                               {3, 262147},   {13714, 7},    {1, 1},       {3, 5},
                               {4, 3},        {1, 65537},    {5, 2}};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; ++k) {
    const int64_t M = shapes[k][0], N = shapes[k][1];
    /* bias_gelu (out, inp, bias) and bias_dropout_add (out, inp, bias, res) */
    const fp_elem_operand ops[4] = {
        {base, N, 1}, {base + 4096, N, 1}, {base + 8192 + 4, 0, 1}, {base + 12288, N, 1}};
    assert_int_equal(elem_fit(M, N, ops, 3, false, threads), fb);
    assert_int_equal(elem_fit(M, N, ops, 4, false, threads), fb);
    assert_int_equal(elem_fit(M, N, ops, 4, true, threads), fb_training);
    assert_int_equal(elem_fit(M, N, ops, 2, false, threads) & fb, 0); /* no bias operand */
  }
  /* N % 4 == 0 keeps rowvec32 alone */
  fp_elem_operand g[4] = {
      {base, 1024, 1}, {base + 4096, 1024, 1}, {base + 8192, 0, 1}, {base + 12288, 1024, 1}};
  assert_int_equal(elem_fit(64, 1024, g, 4, false, threads), rows);
  const int64_t N = 4099;
  for (int k = 0; k < 4; ++k)
    g[k].s0 = k == 2 ? 0 : N;
  assert_int_equal(elem_fit(63, N, g, 4, false, threads), fb);
  /* each operand off its layout refuses it (M*N odd: no flat32 either) */
  for (int k = 0; k < 4; ++k) {
    const fp_elem_operand keep = g[k];
    g[k].s1 = 2; /* strided columns */
    assert_int_equal(elem_fit(63, N, g, 4, false, threads), 0);
    g[k].s1 = 1;
    g[k].s0 = k == 2 ? N : N + 1; /* a full bias; padded rows */
    assert_int_equal(elem_fit(63, N, g, 4, false, threads), 0);
    g[k] = keep;
    g[k].address += 4; /* misaligned: only the bias is read per element */
    assert_int_equal(elem_fit(63, N, g, 4, false, threads), k == 2 ? fb : 0);
    g[k] = keep;
  }
  g[2].s0 = 7; /* one row: the bias row stride is never used */
  assert_int_equal(elem_fit(1, N, g, 4, false, threads), fb);
  g[2].s0 = 0;
  /* 32-bit indices: M*N and 4 * threads below 2^31 */
  const int64_t m_max = (int64_t)INT32_MAX / N;
  assert_int_equal(elem_fit(m_max, N, g, 4, false, threads), fb);
  assert_int_equal(elem_fit(m_max + 1, N, g, 4, false, threads), 0);
  assert_int_equal(elem_fit(63, N, g, 4, false, ((uint64_t)1 << 29) - 1), fb);
  assert_int_equal(elem_fit(63, N, g, 4, false, (uint64_t)1 << 29), 0);
}

static void test_elem_builds(void **state) {
  (void)state;
  const unsigned flat = 1u << FP_ELEM_FLAT32, rows = 1u << FP_ELEM_ROWVEC32,
                 rows_training = 1u << FP_ELEM_ROWVEC32_TRAINING;
  const uint64_t base = (uint64_t)1 << 30, threads = 1024;
  /* bias_gelu's operands: out and inp [M, N] row-major, bias broadcast */
  fp_elem_operand gelu[3] = {{base, 1024, 1}, {base + 4096, 1024, 1}, {base + 8192, 0, 1}};
  assert_int_equal(elem_fit(64, 1024, gelu, 3, false, threads), rows);
  assert_int_equal(elem_fit(1, 1024, gelu, 3, false, threads), flat | rows); /* one row is flat */
  assert_int_equal(elem_fit(64, 1024, gelu, 3, true, threads), rows_training);
  assert_int_equal(elem_fit(64, 1022, gelu, 3, false, threads), 0); /* N % 4 */
  assert_int_equal(elem_fit(0, 1024, gelu, 3, false, threads), 0);  /* empty */
  gelu[2].address += 4;                                             /* misaligned bias */
  assert_int_equal(elem_fit(64, 1024, gelu, 3, false, threads), 0);
  gelu[2].address -= 4;
  gelu[1].s0 = 1026; /* a row stride that breaks the float4 rows */
  assert_int_equal(elem_fit(64, 1024, gelu, 3, false, threads), 0);
  gelu[1].s0 = -1024;
  assert_int_equal(elem_fit(64, 1024, gelu, 3, false, threads), 0);
  gelu[1].s0 = 1024;
  gelu[0].s1 = 2; /* not row-contiguous */
  assert_int_equal(elem_fit(64, 1024, gelu, 3, false, threads), 0);
  gelu[0].s1 = 1;
  /* 32-bit indices: M*N, the last offset and 4 * threads below 2^31 */
  const int64_t rows_max = ((int64_t)1 << 31) / 1024; /* M*N = 2^31 */
  assert_int_equal(elem_fit(rows_max - 1, 1024, gelu, 3, false, threads), rows);
  assert_int_equal(elem_fit(rows_max, 1024, gelu, 3, false, threads), 0);
  gelu[0].s0 = 2048; /* padded output rows: the last offset (M-1)*2048 + 1023 */
  assert_int_equal(elem_fit(rows_max / 2, 1024, gelu, 3, false, threads), rows);
  assert_int_equal(elem_fit(rows_max / 2 + 1, 1024, gelu, 3, false, threads), 0);
  gelu[0].s0 = 1024;
  assert_int_equal(elem_fit(64, 1024, gelu, 3, false, ((uint64_t)1 << 29) - 1), rows);
  assert_int_equal(elem_fit(64, 1024, gelu, 3, false, (uint64_t)1 << 29), 0);
  /* pointwise_chain: [1, n], flat; odd n has no lean build */
  fp_elem_operand chain[2] = {{base, 1000, 1}, {base + 4096, 1000, 1}};
  assert_int_equal(elem_fit(1, 1000, chain, 2, false, threads), flat | rows);
  chain[0].s0 = chain[1].s0 = 1001;
  assert_int_equal(elem_fit(1, 1001, chain, 2, false, threads), 0);
  /* flat over several rows, N odd but M*N % 4 == 0: flat only */
  fp_elem_operand sq[2] = {{base, 3, 1}, {base + 4096, 3, 1}};
  assert_int_equal(elem_fit(4, 3, sq, 2, false, threads), flat);
  sq[1].s0 = 4; /* padded rows are not flat */
  assert_int_equal(elem_fit(4, 3, sq, 2, false, threads), 0);
  /* the lean grid: no more blocks than chunks of U * block float4 (U only
   * where that leaves FP_ELEM_MIN_CHUNKS of them, else 1) */
  const uint32_t blk = 256, min_u4 = FP_ELEM_MIN_CHUNKS * 4 * blk; /* float4 for U = 4 */
  assert_int_equal(fp_cuda_plan_elem_lean_grid(1056, 128 * 128, 4, blk), 16);
  assert_int_equal(fp_cuda_plan_elem_lean_grid(8, 128 * 128, 4, blk), 8);
  /* just below: one float4 per thread, min_u4 - 1 of them */
  assert_int_equal(fp_cuda_plan_elem_lean_grid(1056, 4 * (int64_t)min_u4 - 4, 4, blk),
                   FP_ELEM_MIN_CHUNKS * 4);
  assert_int_equal(fp_cuda_plan_elem_lean_grid(300, 4 * (int64_t)min_u4 - 4, 4, blk), 300);
  assert_int_equal(fp_cuda_plan_elem_lean_grid(1056, 4 * (int64_t)min_u4, 4, blk),
                   FP_ELEM_MIN_CHUNKS);
  assert_int_equal(fp_cuda_plan_elem_lean_grid(1056, 4 * (int64_t)min_u4 + 4, 4, blk),
                   FP_ELEM_MIN_CHUNKS + 1);
  assert_int_equal(fp_cuda_plan_elem_lean_grid(1056, (int64_t)1 << 20, 2, blk), 512);
  assert_int_equal(fp_cuda_plan_elem_lean_grid(1056, 4, 4, blk), 1);
  assert_int_equal(fp_cuda_plan_elem_lean_grid(1056, 0, 4, blk), 1056);
  bool lean = false;
  assert_true(fp_elem_builds_from_env(NULL, &lean) && lean);
  assert_true(fp_elem_builds_from_env("", &lean) && lean);
  assert_true(fp_elem_builds_from_env("lean", &lean) && lean);
  assert_true(fp_elem_builds_from_env("registered", &lean) && !lean);
  assert_false(fp_elem_builds_from_env("Lean", &lean));
  assert_true(lean);
  assert_false(fp_elem_builds_from_env("registered ", &lean));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_preconditions_hold),
      cmocka_unit_test(test_gpu_test_shapes_reach_every_build),
      cmocka_unit_test(test_policy_from_env),
      cmocka_unit_test(test_cluster_many_rows),
      cmocka_unit_test(test_nonportable_clusters),
      cmocka_unit_test(test_cluster_smem),
      cmocka_unit_test(test_few_rows_wide_blocks),
      cmocka_unit_test(test_long_row_blocks),
      cmocka_unit_test(test_stream_build),
      cmocka_unit_test(test_stream_smem_bytes),
      cmocka_unit_test(test_few_long_rows_blocks),
      cmocka_unit_test(test_full_block),
      cmocka_unit_test(test_stream_blocks),
      cmocka_unit_test(test_stage_bytes),
      cmocka_unit_test(test_plan_stage),
      cmocka_unit_test(test_elem_policy_from_env),
      cmocka_unit_test(test_elem_grids),
      cmocka_unit_test(test_elem_builds),
      cmocka_unit_test(test_elem_flatbias_builds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
