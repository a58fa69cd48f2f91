/* fuseport tests: the CUDA ROWS planner's blocks (cuda_plan.h) -- how many
 * threads a block of the long-row, streaming and staged builds takes, and
 * the shared memory it stages -- on any machine. Its cluster and warp
 * decisions, and the preconditions over a wide sweep: test_cuda_plan.c. */
#include <stdio.h>

#include "test_util.h"

#include "cuda_plan_cases.h"

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
      /* stream_l1: at least six rows per SM in the offer's range, in blocks
       * of 128 up to 6144 floats (8 an SM, 192 KiB of rows), else 256 */
      {&double_softmax_l1_offer, 1000, 5120, FP_ROWS_STREAM, 128},
      {&double_softmax_l1_offer, 1000, 6145, FP_ROWS_STREAM, 256},
      {&double_softmax_l1_offer, 8192, 10240, FP_ROWS_STREAM, 256},
      {&double_softmax_l1_offer, 4096, 12288, FP_ROWS_STREAM, 256},
      {&double_softmax_l1_offer, 791, 10240, FP_ROWS_LONG, 0},
      {&double_softmax_l1_offer, 4096, 12289, FP_ROWS_STREAM, 512},
      {&double_softmax_l1_offer, 4096, 4096, FP_ROWS_LONG, 0},
      {&layernorm_l1_offer, 8192, 10240, FP_ROWS_STREAM, 256},
      {&layernorm_l1_offer, 8192, 8192, FP_ROWS_LONG, 0},
      {&layernorm_l1_offer, 4096, 14336, FP_ROWS_STREAM, 512},
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_long_row_blocks),      cmocka_unit_test(test_stream_build),
      cmocka_unit_test(test_few_long_rows_blocks), cmocka_unit_test(test_stream_blocks),
      cmocka_unit_test(test_full_block),           cmocka_unit_test(test_stage_bytes),
      cmocka_unit_test(test_stream_smem_bytes),    cmocka_unit_test(test_plan_stage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
