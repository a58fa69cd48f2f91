/* fuseport tests: the CUDA backend's ROWS launch planner (cuda_plan.h), on
 * any machine. It decides which build of a row kernel runs and in what
 * geometry; a wrong decision would break a build's precondition (a row
 * longer than its cache, a grid that is not a whole number of clusters) and
 * compute garbage or trap on the GPU, so every decision over a wide sweep of
 * shapes is checked against the preconditions, and the shapes the GPU tests
 * use are checked to reach the build they are meant to reach. The blocks of
 * the long-row and streaming builds: test_cuda_plan_blocks.c; the ELEM
 * grids: test_cuda_elem_plan.c; the kernels' offers and the shared checks:
 * cuda_plan_cases.c. */
#include <stdio.h>

#include "test_util.h"

#include "cuda_plan_cases.h"

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
  const fp_rows_builds *offers[] = {
      &reduce_offer,    &reduce_offer_k4,      &backward_offer,     &softmax_offer,
      &layernorm_offer, &layernorm_half_offer, &hreduce_offer,      &hreduce_pointwise_offer,
      &softmax_smem,    &backward_smem,        &layernorm_l1_offer, &double_softmax_l1_offer};
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_preconditions_hold),
      cmocka_unit_test(test_gpu_test_shapes_reach_every_build),
      cmocka_unit_test(test_policy_from_env),
      cmocka_unit_test(test_cluster_many_rows),
      cmocka_unit_test(test_nonportable_clusters),
      cmocka_unit_test(test_cluster_smem),
      cmocka_unit_test(test_few_rows_wide_blocks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
