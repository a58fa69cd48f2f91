/* fuseport tests: the CUDA backend's ELEM grid planner (cuda_plan.h: the
 * grids of the primitive and fused elementwise kernels, and which build of
 * the fused kernels runs), on any machine. The ROWS planner's tests are in
 * test_cuda_plan.c. */
#include <stdio.h>

#include "test_util.h"

#include "cuda_plan.h"

enum { H100_SMS = 132 };

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
      cmocka_unit_test(test_elem_policy_from_env),
      cmocka_unit_test(test_elem_grids),
      cmocka_unit_test(test_elem_builds),
      cmocka_unit_test(test_elem_flatbias_builds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
