/* fuseport tests: every op x variant x parameter combination x shape on one
 * backend (argv[1]) against the float64 reference, on fresh random inputs
 * with poisoned outputs; plus the semantics the reference alone does not pin
 * down (NaN rows, the dropout mask across backends, long rows). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp_device_common.h"
#include "ops_check.h"
#include "test_util.h"

#define CTX fp_env.ctx

/* Odd shapes and powers of two; N of 1, 3, 1000, 65537, 262144 and the
 * prime 300007. On an H100 (132 SMs) the CUDA row kernels' planner
 * (backend/cuda/cuda_plan.c) with FUSEPORT_CUDA_ROW_BUILDS=tuned sends
 * these to every build it uses: a warp per short row (N <= 256: 1x1, 3x3,
 * 1000x3 on teams of 4 lanes, 13x17 and 300x59 on 16, 128x256 on the
 * whole warp), a block per row (widened for few rows: 70x509, 1x1000,
 * 64x1024; the long-row build: 300x1000, 30x12000, 66x30001; 33x4097), a
 * cluster of 8 blocks per row (5x65537; 1x262144 and 1x300007 for
 * hreduce), of 16 (1x262144), clusters keeping the row in shared memory
 * (16 blocks for 1x300007, 8 for 11x131073) and the streaming build
 * (40x32769; 66x30001 for the kernels whose long-row cache holds 16384
 * floats). Clusters of 2 and 4 are the same code with another C:
 * tests/cuda_emu runs them. */
static const int64_t shapes[][2] = {
    {1, 1},      {3, 3},      {1, 1000},    {1000, 3},   {13, 17},   {300, 59},  {5, 65537},
    {1, 262144}, {1, 300007}, {11, 131073}, {40, 32769}, {128, 256}, {64, 1024}, {33, 4097},
    {70, 509},   {66, 30001}, {30, 12000},  {300, 1000}, {70, 3001}, {530, 1030}};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

/* Every op, every variant, every boolean/choice combination, every shape. */
static void check_op(const fp_op *op) { check_op_shapes(op, shapes, N_SHAPES); }

#define OP_TEST(name)                                                                              \
  static void test_##name(void **state) {                                                          \
    (void)state;                                                                                   \
    FP_REQUIRE_DEVICE();                                                                           \
    const fp_op *op = fp_op_find(#name);                                                           \
    assert_non_null(op);                                                                           \
    check_op(op);                                                                                  \
  }
OP_TEST(pointwise_chain)
OP_TEST(bias_gelu)
OP_TEST(bias_dropout_add)
OP_TEST(softmax)
OP_TEST(double_softmax)
OP_TEST(softmax_backward)
OP_TEST(layernorm)
OP_TEST(norm_chain)
OP_TEST(hreduce_pointwise)
OP_TEST(hreduce_reduce)

/* Rows of 2 or 3 values in [0, 8) sometimes nearly agree: their rstd reaches
 * hundreds and multiplies the float mean's rounding into the output. 4096 such
 * rows hold a few every run, which the layernorm row floor must cover (a
 * problem-wide bound failed 467 of 2000 seeds over rows of 1-8 values) while
 * still catching a wrong mean. */
static void test_layernorm_near_constant_rows(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  static const int64_t short_rows[][2] = {{4096, 2}, {4096, 3}, {4096, 5}};
  check_op_shapes(fp_op_find("layernorm"), short_rows, 3);
}

/* ---- the matmul family ------------------------------------------------------------
 * Ones, primes and sizes around the tile edges (7, 33, 65, 100, 257), K
 * from 1 up, odd leading dimensions (which the CUDA recipes pad); every
 * dtype x trans_b x add combination. matmul_matmul with N on both sides of
 * OpenCL's on-chip limit (128). Small enough for PoCL on two cores; the
 * GPUs' tiles and split-K are reached by test_gemm_tiles. */
static const int64_t gemm_shapes[] = {1, 1, 1, 7, 33, 100, 33, 65, 17, 16, 24, 32, 65, 7, 257};
static const int64_t b2b_shapes[] = {1, 1, 1, 1, 7, 33, 100, 17, 33, 129, 65, 7, 64, 64, 64, 64};

#define GEMM_TEST(name, list)                                                                      \
  static void test_##name(void **state) {                                                          \
    (void)state;                                                                                   \
    FP_REQUIRE_DEVICE();                                                                           \
    const fp_op *op = fp_op_find(#name);                                                           \
    assert_non_null(op);                                                                           \
    check_op_grid(op, list, (int)(sizeof list / sizeof list[0]) / fp_op_grid_rank(op));            \
  }
GEMM_TEST(matmul_add, gemm_shapes)
GEMM_TEST(matmul_relu, gemm_shapes)
GEMM_TEST(matmul_add_relu, gemm_shapes)
GEMM_TEST(matmul_matmul, b2b_shapes)
GEMM_TEST(matmul_split_act, gemm_shapes)
GEMM_TEST(linear_geglu, gemm_shapes)

/* Several tiles in every direction and a deep K (the GPUs' multi-tile
 * grids, their K pipelines' steady state, split-K where the planner picks
 * it), for one unpaired and one paired epilogue, f16 and f32. */
static void test_gemm_tiles(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  static const int64_t tiles[] = {300, 260, 1000, 129, 257, 2048};
  const char *names[] = {"matmul_relu", "matmul_split_act"};
  const char *dtypes[] = {"f16", "f32"};
  for (size_t k = 0; k < 2; ++k)
    for (size_t d = 0; d < 2; ++d)
      for (int s = 0; s < 2; ++s) {
        const fp_op *op = fp_op_find(names[k]);
        fp_problem p;
        fp_problem_init(&p, op);
        FP_ASSERT_OK(fp_problem_set_grid(&p, tiles + 3 * s, 3));
        FP_ASSERT_OK(fp_problem_set(&p, "dtype", dtypes[d]));
        check_case(&p, fp_op_variant(op, "fused"));
      }
}

/* ---- the compression family ---------------------------------------------------------
 * Rows of one value, of part of a group, of exactly a group and one more,
 * of several groups with a ragged end (C odd, not a multiple of 32: the
 * ReLU mask's last word), every bits value; dw_from_packed across the
 * tiles, split-K where a GPU picks it, K not a multiple of the k-block. */
static const int64_t pack_shapes[] = {1, 1, 3, 1000, 7, 257, 2, 256, 5, 300, 17, 33, 1, 4097};
static const int64_t dw_shapes[] = {1, 1, 1, 7, 33, 17, 300, 513, 136, 100, 257, 129, 1000, 64, 5};
GEMM_TEST(quant_pack, pack_shapes)
GEMM_TEST(dequant_unpack, pack_shapes)
GEMM_TEST(relu_pack, pack_shapes)
GEMM_TEST(relu_unpack_backward, pack_shapes)
GEMM_TEST(dw_from_packed, dw_shapes)

/* ---- the convolutions ------------------------------------------------------------------
 * N x C x H x W x K x R x stride: C = 1, 3, 17 (the tensor-core paths' scalar
 * gather), multiples of 8 (their 16-byte one), H = W = 1, 7, 33, a 7x7
 * filter at stride 2, K odd and past a tile; every layout, type, add / bias
 * choice and variant. test_conv_geometry adds padding, dilation and R != S. */
static const int64_t conv_shapes[] = {1,  1,  1,  1, 1,  1,  1, 2, 3, 7,  7,  5,  3,   1,  3,  17,
                                      33, 33, 8,  3, 2,  2,  8, 7, 7, 17, 1,  1,  1,   3,  33, 33,
                                      16, 7,  2,  2, 16, 9,  9, 8, 3, 1,  1,  64, 14,  14, 72, 3,
                                      1,  2,  24, 1, 1,  40, 3, 1, 1, 32, 12, 10, 136, 1,  2};
GEMM_TEST(conv_add, conv_shapes)
GEMM_TEST(conv_relu, conv_shapes)
GEMM_TEST(conv_bn, conv_shapes)

/* Padding 0 and 2, dilation 2, a 3x2 filter (S != R), stride 3, a shape given
 * with 5 dims (R and stride from the parameters), in both layouts; C = 16 and
 * C = 3 (on CUDA, f16 NHWC: the 16-byte loaders' path and the scalar
 * gather's, conv_gather.cu). */
static void test_conv_geometry(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  static const int64_t shapes[][5] = {{2, 16, 11, 9, 24}, {2, 3, 11, 9, 24}};
  const char *const settings[][4] = {{"R", "3", "padding", "0"},
                                     {"R", "3", "dilation", "2"},
                                     {"S", "2", "padding", "2"},
                                     {"stride", "3", "R", "5"}};
  const char *const layouts[] = {"nchw", "nhwc"};
  const char *const dtypes[] = {"f32", "f16"};
  for (size_t k = 0; k < sizeof settings / sizeof settings[0]; ++k)
    for (int l = 0; l < 4; ++l)
      for (int d = 0; d < 2; ++d) {
        const fp_op *op = fp_op_find("conv_relu");
        fp_problem p;
        fp_problem_init(&p, op);
        FP_ASSERT_OK(fp_problem_set_grid(&p, shapes[l / 2], 5));
        FP_ASSERT_OK(fp_problem_set(&p, settings[k][0], settings[k][1]));
        FP_ASSERT_OK(fp_problem_set(&p, settings[k][2], settings[k][3]));
        FP_ASSERT_OK(fp_problem_set(&p, "layout", layouts[l % 2]));
        FP_ASSERT_OK(fp_problem_set(&p, "dtype", dtypes[d]));
        FP_ASSERT_OK(fp_problem_set(&p, "bias", "true"));
        FP_ASSERT_OK(fp_problem_validate(&p));
        check_case(&p, fp_op_variant(op, "fused"));
        check_case(&p, fp_op_variant(op, "unfused"));
      }
}

/* ---- attention ------------------------------------------------------------------------
 * B x H x S x SK x D: S = 1 (decoding), 17, 70; SK below S (causal rows that
 * see no key) and above it; D = 17 (rows not 16-byte aligned), 64, 80, 128,
 * 256; every type, causal setting and variant. test_attention_splits forces
 * the key splits and the memeff chunks that long sequences take. */
static const int64_t attn_shapes[] = {1, 1, 1, 1,  64,  2, 3, 17, 17, 64, 1, 1, 33, 17, 256,
                                      2, 2, 1, 90, 128, 1, 1, 17, 40, 17, 1, 2, 70, 70, 80};
GEMM_TEST(attention, attn_shapes)

/* The split-key path (flash-decoding; memeff's chunks): 3 and 7 splits of
 * the fused kernel, chunks of 16 keys for memeff -- empty chunks under the
 * causal mask included -- and two launches each. */
static void test_attention_splits(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const fp_op *op = fp_op_find("attention");
  static const int64_t shapes[][5] = {{2, 2, 1, 100, 64}, {1, 2, 40, 33, 80}, {1, 1, 9, 130, 128}};
  const char *const splits[] = {"3", "7"};
  const char *const dtypes[] = {"f32", "f16", "bf16"};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
    for (int d = 0; d < 3; ++d)
      for (int causal = 0; causal < 2; ++causal) {
        fp_problem p;
        fp_problem_init(&p, op);
        FP_ASSERT_OK(fp_problem_set_grid(&p, shapes[s], 5));
        FP_ASSERT_OK(fp_problem_set(&p, "dtype", dtypes[d]));
        FP_ASSERT_OK(fp_problem_set(&p, "causal", causal ? "true" : "false"));
        FP_ASSERT_OK(fp_problem_set(&p, "splits", splits[(s + (size_t)d) % 2]));
        FP_ASSERT_OK(fp_problem_set(&p, "chunk", "16"));
        for (int v = 0; v < 2; ++v) { /* fused, memeff */
          fp_cost cost;
          FP_ASSERT_OK(fp_variant_cost(&p, &op->variants[v], fp_context_device(CTX), &cost));
          assert_int_equal(cost.kernels, 2);
          check_case(&p, &op->variants[v]);
        }
      }
}

/* The packing rule (fp_quant_code's float32 steps, as the notebook's Triton
 * kernel computes) against its formula in real arithmetic, q = clamp(floor(
 * (x - min) / scale + 0.5 - 1e-6)), on random bf16 groups. They may differ
 * only at a tie: where (x - min) / scale is within float rounding of k + 0.5,
 * float32 cannot hold the 1e-6 beside values past 16 and rounds the half up
 * (5% of the codes of bf16 data at 8 bits, a few in 10^5 at 4 bits, none at
 * 1 and 2: the notebook's own kernel does the same). Anything else -- no 0.5,
 * a wrong reciprocal, a swapped clamp -- differs off the ties. */
static void test_quant_rule_vs_float64(void **state) {
  (void)state;
  for (int bits = 1; bits <= 8; bits *= 2) {
    uint64_t ties = 0;
    for (uint64_t g = 0; g < 512; ++g) {
      float v[FP_QGROUP], mn = INFINITY, mx = -INFINITY;
      for (int i = 0; i < FP_QGROUP; ++i) {
        v[i] = fp_bf16_bits_to_f32(
            fp_uniform_bf16_bits(7, (uint32_t)bits, g * FP_QGROUP + i, 4.0f, 0));
        mn = fminf(mn, v[i]);
        mx = fmaxf(mx, v[i]);
      }
      const float scale = fp_quant_scale(mn, mx, bits);
      const float inv = fp_recip_rn(scale);
      const double qmax = (double)((1 << bits) - 1);
      for (int i = 0; i < FP_QGROUP; ++i) {
        const double t = ((double)v[i] - mn) / (double)scale;
        double q = floor(t + 0.5 - 1e-6);
        q = q < 0 ? 0 : q > qmax ? qmax : q;
        const double code = (double)fp_quant_code(v[i], mn, inv, bits);
        if (code != q) {
          /* only a half rounded up, by one */
          assert_true(code == q + 1.0);
          assert_true(fabs(t - floor(t) - 0.5) < 1e-5);
          ++ties;
        }
      }
    }
    if (bits <= 2)
      assert_int_equal(ties, 0);
  }
}

/* The registry holds exactly the ops above: a new op must get a test line. */
static void test_registry_covered(void **state) {
  (void)state;
  assert_int_equal(fp_op_count(), 25);
  for (int k = 0; k < fp_op_count(); ++k) {
    const fp_op *op = fp_op_at(k);
    assert_non_null(fp_op_variant(op, "fused"));
    assert_non_null(fp_op_variant(op, "unfused"));
  }
}

/* Runs op/variant on host-provided inputs (not the generator) and checks. */
static void run_with_inputs(const fp_problem *p, const fp_variant *v, float *const *inputs,
                            fp_accuracy *acc) {
  fp_io_desc io;
  p->op->describe(p, &io);
  fp_buffer *in[FP_MAX_TENSORS], *out[FP_MAX_TENSORS];
  fp_plan *plan = NULL;
  FP_ASSERT_OK(fp_io_alloc(CTX, &io, in, out));
  fp_host_tensor views[FP_MAX_TENSORS];
  for (int k = 0; k < io.n_in; ++k) {
    FP_ASSERT_OK(fp_buffer_write(CTX, in[k], 0, inputs[k], fp_tensor_bytes(&io.in[k])));
    views[k].desc = &io.in[k];
    views[k].data = inputs[k];
  }
  FP_ASSERT_OK(fp_io_poison_outputs(CTX, &io, out));
  FP_ASSERT_OK(fp_plan_create(CTX, p, v, &plan));
  FP_ASSERT_OK(fp_plan_execute(plan, in, out));
  fp_row_sample all = fp_row_sample_for(p, &io, 0);
  FP_ASSERT_OK(fp_check_outputs(CTX, p, &io, views, out, &all, acc));
  fp_plan_destroy(plan);
  fp_io_free(&io, in, out);
}

/* PyTorch semantics: a softmax row of -inf gives NaN; a NaN in a row makes
 * amax NaN; other rows stay exact. The comparison passes a NaN only where
 * the reference has one, so these also prove the NaN lands where it must. */
static void test_nan_semantics(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const int64_t M = 4, N = 1000;
  float *x = malloc(sizeof(float) * M * N);
  for (int64_t i = 0; i < M * N; ++i)
    x[i] = fp_uniform_f32(fp_test_next_seed(), 0, (uint64_t)i, 4.0f, 0);
  for (int64_t j = 0; j < N; ++j)
    x[1 * N + j] = -INFINITY; /* row 1: all -inf */
  x[2 * N + 17] = -INFINITY;  /* row 2: one -inf among finite values */
  x[3 * N + 500] = NAN;       /* row 3: a NaN */
  const char *ops[] = {"softmax", "double_softmax", "hreduce_reduce"};
  for (int o = 0; o < 3; ++o) {
    const fp_op *op = fp_op_find(ops[o]);
    fp_problem p;
    fp_problem_init(&p, op);
    FP_ASSERT_OK(fp_problem_set_grid2(&p, M, N));
    for (int v = 0; v < op->n_variants; ++v) {
      fp_accuracy acc;
      run_with_inputs(&p, &op->variants[v], &x, &acc);
      if (!acc.ok)
        fail_msg("%s %s: %s", ops[o], op->variants[v].name, acc.first_bad);
    }
  }
  free(x);
}

/* training=true: the keep mask comes from Philox keyed by the seed, so this
 * backend and the CPU backend drop exactly the same elements, and about a
 * fraction p of them. */
static void test_dropout_mask_matches_cpu(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const fp_op *op = fp_op_find("bias_dropout_add");
  fp_problem p;
  fp_problem_init(&p, op);
  FP_ASSERT_OK(fp_problem_set_grid2(&p, 257, 1000));
  FP_ASSERT_OK(fp_problem_set(&p, "training", "true"));
  FP_ASSERT_OK(fp_problem_set(&p, "p", "0.3"));
  char seed_text[32];
  snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)(fp_test_next_seed() >> 12));
  FP_ASSERT_OK(fp_problem_set(&p, "seed", seed_text));
  fp_io_desc io;
  op->describe(&p, &io);
  const int64_t n = 257 * 1000;
  uint64_t input_seed = fp_test_next_seed();

  fp_context_options opts;
  fp_context_options_init(&opts);
  fp_context *cpu = NULL;
  FP_ASSERT_OK(fp_context_create(&opts, &cpu));
  fp_context *ctxs[2] = {CTX, cpu};
  float *results[2];
  for (int c = 0; c < 2; ++c) {
    fp_buffer *in[FP_MAX_TENSORS], *out[FP_MAX_TENSORS];
    fp_plan *plan = NULL;
    FP_ASSERT_OK(fp_io_alloc(ctxs[c], &io, in, out));
    FP_ASSERT_OK(fp_io_fill_inputs(ctxs[c], &io, input_seed, in));
    FP_ASSERT_OK(fp_io_poison_outputs(ctxs[c], &io, out));
    FP_ASSERT_OK(fp_plan_create(ctxs[c], &p, fp_op_variant(op, "fused"), &plan));
    FP_ASSERT_OK(fp_plan_execute(plan, in, out));
    results[c] = malloc(sizeof(float) * (size_t)n);
    FP_ASSERT_OK(fp_buffer_read(ctxs[c], out[0], 0, results[c], sizeof(float) * (size_t)n));
    fp_plan_destroy(plan);
    fp_io_free(&io, in, out);
  }
  fp_host_tensor views[FP_MAX_TENSORS];
  fp_host_inputs_generated(&io, input_seed, views);
  int64_t dropped = 0;
  for (int64_t i = 0; i < 257; ++i)
    for (int64_t j = 0; j < 1000; ++j) {
      float a = results[0][i * 1000 + j], b = results[1][i * 1000 + j];
      if (fabsf(a - b) > 1e-5f * (1.0f + fabsf(b)))
        fail_msg("element (%lld, %lld): %s %.9g, cpu %.9g", (long long)i, (long long)j,
                 fp_backend_name(fp_env.kind), a, b);
      bool keep = fp_dropout_keep((uint64_t)p.v[4], (uint64_t)(i * 1000 + j), 0.3f);
      if (!keep) {
        dropped++;
        /* a dropped element is the residual alone, bit for bit */
        float res = (float)fp_host_at2(&views[2], i, j);
        assert_true(memcmp(&a, &res, 4) == 0);
      }
    }
  double frac = (double)dropped / (double)n;
  if (fabs(frac - 0.3) > 0.01)
    fail_msg("dropped fraction %.4f, expected 0.3 +- 0.01", frac);
  free(results[0]);
  free(results[1]);
  fp_context_destroy(cpu);
}

/* Rows that the OpenCL backend streams through the local-memory row cache of
 * the _local kernels of softmax and norm_chain (opencl_backend.c,
 * plan_rows: one row per group of 256, N of 6148 to 8195), aligned and
 * misaligned (with N % 4 != 0 each row starts at another offset: head and
 * tail scalars, a body of N/4 or N/4 - 1 vectors), one row or several, and
 * the bounds of the range: 6147 and 8196 re-read global memory. A vector of
 * the cache stored or read back wrong fails the float64 reference. Run on
 * every backend, like the shapes above. */
static void test_local_cache_rows(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  static const int64_t local_shapes[][2] = {{3, 6148}, {5, 6147}, {7, 8191}, {2, 8192},
                                            {1, 8192}, {2, 8195}, {2, 8196}, {3, 7001}};
  const char *names[] = {"softmax", "norm_chain"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; ++k) {
    const fp_op *op = fp_op_find(names[k]);
    assert_non_null(op);
    check_op_shapes(op, local_shapes, (int)(sizeof local_shapes / sizeof local_shapes[0]));
  }
}

/* The outputs of one fused run of p on ctx, inputs from `seed`, copied to
 * the host (heap, one per output). */
static void fused_outputs(fp_context *ctx, const fp_problem *p, uint64_t seed, void **host) {
  fp_io_desc io;
  p->op->describe(p, &io);
  fp_buffer *in[FP_MAX_TENSORS], *out[FP_MAX_TENSORS];
  fp_plan *plan = NULL;
  FP_ASSERT_OK(fp_io_alloc(ctx, &io, in, out));
  FP_ASSERT_OK(fp_io_fill_inputs(ctx, &io, seed, in));
  FP_ASSERT_OK(fp_io_poison_outputs(ctx, &io, out));
  FP_ASSERT_OK(fp_plan_create(ctx, p, fp_op_variant(p->op, "fused"), &plan));
  FP_ASSERT_OK(fp_plan_execute(plan, in, out));
  for (int k = 0; k < io.n_out; ++k) {
    const uint64_t bytes = fp_tensor_bytes(&io.out[k]);
    host[k] = malloc((size_t)bytes);
    assert_non_null(host[k]);
    FP_ASSERT_OK(fp_buffer_read(ctx, out[k], 0, host[k], bytes));
  }
  fp_plan_destroy(plan);
  fp_io_free(&io, in, out);
}

/* OpenCL: the knob `env` rejects the value `bad` with a message that
 * starts with `expected`, and =0 gives the fused ops `names` at M x N
 * (rows at every alignment where N % 4 != 0) bit for bit the results of the
 * default: both settings run the same arithmetic in the same order per
 * element, only the loads' source, their cache hints or the order of the
 * writes differ. */
static void opencl_knob_rejects_and_matches(const char *env, const char *bad, const char *expected,
                                            const char *const *names, size_t n_names, int64_t M,
                                            int64_t N) {
  fp_context_options opts;
  fp_context_options_init(&opts);
  opts.backend = FP_BACKEND_OPENCL;
  opts.platform = getenv("FUSEPORT_OPENCL_PLATFORM");
  fp_context *other = NULL;
  assert_int_equal(setenv(env, bad, 1), 0);
  FP_ASSERT_ERR(fp_context_create(&opts, &other), FP_ERR_INVALID_ARGUMENT, expected);
  assert_null(other);
  assert_int_equal(setenv(env, "0", 1), 0);
  FP_ASSERT_OK(fp_context_create(&opts, &other));
  assert_int_equal(unsetenv(env), 0);
  for (size_t k = 0; k < n_names; ++k) {
    const fp_op *op = fp_op_find(names[k]);
    fp_problem p;
    fp_problem_init(&p, op);
    FP_ASSERT_OK(fp_problem_set_grid2(&p, M, N));
    fp_io_desc io;
    op->describe(&p, &io);
    const uint64_t seed = fp_test_next_seed();
    void *a[FP_MAX_TENSORS], *b[FP_MAX_TENSORS];
    fused_outputs(CTX, &p, seed, a);
    fused_outputs(other, &p, seed, b);
    for (int o = 0; o < io.n_out; ++o) {
      if (memcmp(a[o], b[o], (size_t)fp_tensor_bytes(&io.out[o])) != 0)
        fail_msg("%s %lldx%lld output %s: %s=0 differs from the default", names[k], (long long)M,
                 (long long)N, io.out[o].name, env);
      free(a[o]);
      free(b[o]);
    }
  }
  fp_context_destroy(other);
}

/* The 0/1 knobs: 2 is rejected. */
static void opencl_knob_matches_default(const char *env, const char *const *names, size_t n_names,
                                        int64_t M, int64_t N) {
  char expected[128];
  snprintf(expected, sizeof expected, "%s must be 0 or 1", env);
  opencl_knob_rejects_and_matches(env, "2", expected, names, n_names, M, N);
}

/* FUSEPORT_OPENCL_ROW_LOCAL=0: the _stream kernels instead of _local, which
 * read rows of 8191 floats from local memory, and _stream_back instead of
 * _local_back, which reads the first vectors of rows of 32771 from there. */
static void test_opencl_row_local_knob(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const char *const names[] = {"softmax", "norm_chain"};
  opencl_knob_matches_default("FUSEPORT_OPENCL_ROW_LOCAL", names, 2, 7, 8191);
  opencl_knob_matches_default("FUSEPORT_OPENCL_ROW_LOCAL", names, 2, 5, 32771);
}

/* FUSEPORT_OPENCL_STREAM_BACK=0: the _stream kernels instead of
 * _stream_back, which write rows of 32771 floats last vector first. */
static void test_opencl_stream_back_knob(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const char *const names[] = {"softmax", "norm_chain", "layernorm", "softmax_backward"};
  opencl_knob_matches_default("FUSEPORT_OPENCL_STREAM_BACK", names, 4, 5, 32771);
}

/* FUSEPORT_OPENCL_PTX=0: plain loads instead of the inline-PTX cache hints
 * (kernels/cl/common.cl), which NVIDIA devices build by default and other
 * devices ignore: the same results bit for bit on rows held in registers
 * (33 x 1000), rows streamed and written backwards (5 x 32771), and a
 * 64 x 65537 input, which hreduce_reduce loads evict-first (its window
 * starts at 2^22 floats) and the elementwise ops evict_last. */
static void test_opencl_ptx_knob(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const char *const rows[] = {"softmax",    "double_softmax",    "softmax_backward", "layernorm",
                              "norm_chain", "hreduce_pointwise", "hreduce_reduce"};
  const char *const wide[] = {"hreduce_reduce", "hreduce_pointwise", "pointwise_chain", "bias_gelu",
                              "bias_dropout_add"};
  const char *expected = "FUSEPORT_OPENCL_PTX must be 0, 1 or 2";
  opencl_knob_rejects_and_matches("FUSEPORT_OPENCL_PTX", "3", expected, rows, 7, 33, 1000);
  opencl_knob_rejects_and_matches("FUSEPORT_OPENCL_PTX", "-1", expected, rows, 7, 5, 32771);
  opencl_knob_rejects_and_matches("FUSEPORT_OPENCL_PTX", "two", expected, wide, 5, 64, 65537);
}

/* double_softmax's fused kernel on ctx over the host rows x, M x N, into
 * got, the output poisoned with NaN before the run. */
static void double_softmax_run(fp_context *ctx, const float *x, int64_t M, int64_t N, float *got) {
  const fp_op *op = fp_op_find("double_softmax");
  fp_problem p;
  fp_problem_init(&p, op);
  FP_ASSERT_OK(fp_problem_set_grid2(&p, M, N));
  fp_io_desc io;
  op->describe(&p, &io);
  fp_buffer *in[FP_MAX_TENSORS], *out[FP_MAX_TENSORS];
  fp_plan *plan = NULL;
  FP_ASSERT_OK(fp_io_alloc(ctx, &io, in, out));
  FP_ASSERT_OK(fp_buffer_write(ctx, in[0], 0, x, fp_tensor_bytes(&io.in[0])));
  FP_ASSERT_OK(fp_io_poison_outputs(ctx, &io, out));
  FP_ASSERT_OK(fp_plan_create(ctx, &p, fp_op_variant(op, "fused"), &plan));
  FP_ASSERT_OK(fp_plan_execute(plan, in, out));
  FP_ASSERT_OK(fp_buffer_read(ctx, out[0], 0, got, fp_tensor_bytes(&io.out[0])));
  fp_plan_destroy(plan);
  fp_io_free(&io, in, out);
}

/* Every element of got within tol of a float64 softmax(softmax(x)),
 * relative, or NaN (written: not the poison's bits) where that is NaN. */
static void double_softmax_compare(const float *x, const float *got, int64_t M, int64_t N,
                                   double tol, const char *what, const char *const *rows) {
  double *ref = malloc(sizeof(double) * (size_t)N);
  assert_non_null(ref);
  for (int64_t r = 0; r < M; ++r) {
    const float *xr = x + r * N, *gr = got + r * N;
    double mx = -INFINITY, s = 0.0, s2 = 0.0;
    for (int64_t j = 0; j < N; ++j)
      mx = isnan(xr[j]) || isnan(mx) ? NAN : fmax(mx, xr[j]);
    for (int64_t j = 0; j < N; ++j)
      s += ref[j] = exp(xr[j] - mx);
    const double y = 1.0 / s; /* the first softmax's max */
    for (int64_t j = 0; j < N; ++j)
      s2 += ref[j] = exp(ref[j] * y - y);
    for (int64_t j = 0; j < N; ++j) {
      const double want = ref[j] / s2;
      uint32_t bits;
      memcpy(&bits, &gr[j], 4);
      const bool ok = isnan(want) ? isnan(gr[j]) && bits != 0x7FC0DEADu /* FP_POISON_BITS */
                                  : fabs(gr[j] - want) <= tol * want;
      if (!ok)
        fail_msg("%s %s: %lldx%lld, row %lld (%s), element %lld: %.9g, float64 %.9g, relative "
                 "error %.3g over %g",
                 fp_backend_name(fp_env.kind), what, (long long)M, (long long)N, (long long)r,
                 rows[r], (long long)j, gr[j], want, fabs(gr[j] - want) / want, tol);
    }
  }
  free(ref);
}

/* double_softmax's streamed rows take the second softmax's sum from the
 * first one's power sums where the series' remainder is under 2^-24 of the
 * sum, i.e. where y = 1/p_1 = 1/sum_j exp(x_j - max) is at most y_max =
 * (24 N 2^-24 / e)^(1/3), and otherwise sum its exps in another read
 * (kernels/cl/reduce_softmax.cl, fp_second_inv_from_powers; kernels/cu/reduce.cu).
 * Six rows of U(-1, 1) but for one spike each, set so that p_1 is ratio /
 * y_max for ratio 0.5, 0.9 (the second read), 1.1, 2 and 10 (the series),
 * or a spike of 40 for ratio 0 (all the weight on it, y = 1): b = log(rest
 * / (p_1 - 1)), rest = sum_j exp(x_j) over the others. Every element
 * within 1e-6 of a float64 softmax(softmax(x)): PoCL leaves 2.2e-7 at most
 * (12 runs, planned and host geometry; the CPU backend 3.8e-7), and
 * FP_FAST_EXP's error, |x - max| * 6e-8 relative on e_j, reaches the
 * output only through s_j = e_j y, small but at the spike, where x - max
 * is 0. The series fails that if it drops its y^2 term (y^2 p_2/(2N):
 * 1.7e-6 at ratio 1.1, N = 4103; 3.4e-6 at N = 1001; 1e-6 at N = 20001,
 * which alone would not catch it), is used where the remainder is large
 * (0.0516/N at y = 1: 1.3e-5 at N = 4103) or scales its sum by 1.000003.
 * Then six rows of special values, as today's three passes give them: the
 * power sums never take exp(-inf - -inf). Which rows stream on OpenCL
 * (opencl_backend.c, plan_rows): with M = 6 the planned team caches rows
 * of up to 4099 floats (256 work-items, 4 float4 each), so 4103 (a group
 * of 256) and 20001 (512) stream; FUSEPORT_OPENCL_ROWS_MAX_GROUP=4 streams
 * 1001 in a group of 32 (FUSEPORT_OPENCL_STREAM_GROUP=32), and 4103 in
 * teams of 512, two rows per group of 1024, which must then take the three
 * passes (the second sum's barrier sits in a branch on the series). N odd:
 * rows at every alignment, the spikes also among the head and tail
 * scalars. Run on every backend. */
static void check_double_softmax_series(fp_context *ctx, int64_t N, const char *what) {
  enum { M = 6 };
  const double ratios[M] = {0.0, 0.5, 0.9, 1.1, 2.0, 10.0};
  const char *const spike_rows[M] = {"spike 40, y = 1", "ratio 0.5", "ratio 0.9",
                                     "ratio 1.1",       "ratio 2",   "ratio 10"};
  const char *const special_rows[M] = {
      "-inf but the last 3", "a block of -inf first", "one -inf", "a NaN", "a +inf", "all -inf"};
  const double y_max = cbrt(24.0 * (double)N * 0x1p-24 / exp(1.0));
  const uint64_t seed = fp_test_next_seed();
  float *x = malloc(sizeof(float) * M * (size_t)N), *got = malloc(sizeof(float) * M * (size_t)N);
  assert_true(x != NULL && got != NULL);
  for (int64_t i = 0; i < M * N; ++i)
    x[i] = fp_uniform_f32(seed, 0, (uint64_t)i, 1.0f, 0);
  const int64_t spikes[M] = {0, N - 1, 1, N / 2, N - 2, (N * 2) / 3};
  for (int r = 0; r < M; ++r) {
    double rest = 0.0;
    for (int64_t j = 0; j < N; ++j)
      rest += j == spikes[r] ? 0.0 : exp((double)x[r * N + j]);
    x[r * N + spikes[r]] = ratios[r] == 0.0 ? 40.0f : (float)log(rest / (ratios[r] / y_max - 1.0));
  }
  double_softmax_run(ctx, x, M, N, got);
  double_softmax_compare(x, got, M, N, 1e-6, what, spike_rows);

  for (int64_t i = 0; i < M * N; ++i) /* no spikes: the series where the max is finite */
    x[i] = fp_uniform_f32(seed, 0, (uint64_t)i, 1.0f, 0);
  for (int64_t j = 0; j < N; ++j) {
    x[0 * N + j] = j < N - 3 ? -INFINITY : x[0 * N + j]; /* most work-items hold only -inf */
    x[1 * N + j] = j < N / 3 ? -INFINITY : x[1 * N + j]; /* p_k of the rest: the series */
    x[5 * N + j] = -INFINITY;
  }
  x[2 * N + N / 2] = -INFINITY;
  x[3 * N + 7] = NAN;
  x[4 * N + N - 2] = INFINITY;
  double_softmax_run(ctx, x, M, N, got);
  double_softmax_compare(x, got, M, N, 1e-6, what, special_rows);
  free(x);
  free(got);
}

static void test_double_softmax_series(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  check_double_softmax_series(CTX, 4103, "planned");
  check_double_softmax_series(CTX, 20001, "planned");
  if (fp_env.kind != FP_BACKEND_OPENCL)
    return;
  /* FUSEPORT_OPENCL_ROWS_MAX_GROUP=4: every row but the shortest streams */
  static const struct {
    const char *group, *what;
    int64_t N;
  } knobs[] = {{"32", "groups of 32", 1001}, {"1024", "two rows per group of 1024", 4103}};
  for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; ++k) {
    fp_context_options opts;
    fp_context_options_init(&opts);
    opts.backend = FP_BACKEND_OPENCL;
    opts.platform = getenv("FUSEPORT_OPENCL_PLATFORM");
    fp_context *ctx = NULL;
    assert_int_equal(setenv("FUSEPORT_OPENCL_ROWS_MAX_GROUP", "4", 1), 0);
    assert_int_equal(setenv("FUSEPORT_OPENCL_STREAM_GROUP", knobs[k].group, 1), 0);
    const fp_status st = fp_context_create(&opts, &ctx);
    assert_int_equal(unsetenv("FUSEPORT_OPENCL_ROWS_MAX_GROUP"), 0);
    assert_int_equal(unsetenv("FUSEPORT_OPENCL_STREAM_GROUP"), 0);
    FP_ASSERT_OK(st);
    check_double_softmax_series(ctx, knobs[k].N, knobs[k].what);
    fp_context_destroy(ctx);
  }
}

/* Rows past a quarter million elements, and a single row of 2^20 + 1. */
static void test_long_rows(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const char *names[] = {"softmax",    "double_softmax",    "softmax_backward", "layernorm",
                         "norm_chain", "hreduce_pointwise", "hreduce_reduce"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; ++k) {
    const fp_op *op = fp_op_find(names[k]);
    fp_problem p;
    fp_problem_init(&p, op);
    FP_ASSERT_OK(fp_problem_set_grid2(&p, 2, (1 << 20) + 1));
    for (int v = 0; v < op->n_variants; ++v)
      check_case(&p, &op->variants[v]);
  }
}

int main(int argc, char **argv) {
  int rc = fp_test_env_open(argc, argv, "test_ops");
  if (rc != 0)
    return rc;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_registry_covered),
      cmocka_unit_test(test_pointwise_chain),
      cmocka_unit_test(test_bias_gelu),
      cmocka_unit_test(test_bias_dropout_add),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_double_softmax),
      cmocka_unit_test(test_softmax_backward),
      cmocka_unit_test(test_layernorm),
      cmocka_unit_test(test_layernorm_near_constant_rows),
      cmocka_unit_test(test_norm_chain),
      cmocka_unit_test(test_hreduce_pointwise),
      cmocka_unit_test(test_hreduce_reduce),
      cmocka_unit_test(test_nan_semantics),
      cmocka_unit_test(test_dropout_mask_matches_cpu),
      cmocka_unit_test(test_local_cache_rows),
      cmocka_unit_test(test_double_softmax_series),
      cmocka_unit_test(test_long_rows),
      cmocka_unit_test(test_matmul_add),
      cmocka_unit_test(test_matmul_relu),
      cmocka_unit_test(test_matmul_add_relu),
      cmocka_unit_test(test_matmul_matmul),
      cmocka_unit_test(test_matmul_split_act),
      cmocka_unit_test(test_linear_geglu),
      cmocka_unit_test(test_gemm_tiles),
      cmocka_unit_test(test_quant_pack),
      cmocka_unit_test(test_dequant_unpack),
      cmocka_unit_test(test_relu_pack),
      cmocka_unit_test(test_relu_unpack_backward),
      cmocka_unit_test(test_dw_from_packed),
      cmocka_unit_test(test_quant_rule_vs_float64),
      cmocka_unit_test(test_conv_add),
      cmocka_unit_test(test_conv_relu),
      cmocka_unit_test(test_conv_bn),
      cmocka_unit_test(test_conv_geometry),
      cmocka_unit_test(test_attention),
      cmocka_unit_test(test_attention_splits),
  };
  /* The OpenCL backend's knobs: part of its suite only, rather than skipped
   * (and counted as passes by ctest) in the others. */
  const struct CMUnitTest opencl_tests[] = {
      cmocka_unit_test(test_opencl_row_local_knob),
      cmocka_unit_test(test_opencl_stream_back_knob),
      cmocka_unit_test(test_opencl_ptx_knob),
  };
  int failures = fp_run_suite(tests, sizeof tests / sizeof tests[0], opencl_tests,
                              sizeof opencl_tests / sizeof opencl_tests[0], FP_BACKEND_OPENCL);
  int code = fp_test_exit_code(failures); /* before close: it looks at the context */
  fp_test_env_close();
  return code;
}
