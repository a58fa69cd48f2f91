/* fuseport CPU kernels, family elementwise: the fused elementwise operators.
 * Semantics: kernels/kernels.def; scalar formulas: fp_device_common.h. */
#include "cpu_kernels.h"
#include "fp_device_common.h"

static void pointwise_chain_fused(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0);
  const float *x = FP_CPU_F32P(args, 1);
  int64_t n = FP_CPU_I64(args, 2);
  for (int64_t i = 0; i < n; ++i)
    out[i] = fp_pointwise_chain(x[i]);
}

static void bias_gelu_fused(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0);
  const float *inp = FP_CPU_F32P(args, 1);
  const float *bias = FP_CPU_F32P(args, 2);
  int64_t M = FP_CPU_I64(args, 3), N = FP_CPU_I64(args, 4);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      out[i * N + j] = fp_gelu_tanh(inp[i * N + j] + bias[j]);
}

/* Serves both bias_dropout_add_fused and bias_dropout_add_fused_t: on the CPU
 * the tile through local memory buys nothing. */
static void bias_dropout_add(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0);
  const float *inp = FP_CPU_F32P(args, 1);
  const float *bias = FP_CPU_F32P(args, 2);
  const float *res = FP_CPU_F32P(args, 3);
  int64_t M = FP_CPU_I64(args, 4), N = FP_CPU_I64(args, 5);
  int64_t sb0 = FP_CPU_I64(args, 6), sb1 = FP_CPU_I64(args, 7);
  int64_t sr0 = FP_CPU_I64(args, 8), sr1 = FP_CPU_I64(args, 9);
  int64_t so0 = FP_CPU_I64(args, 10), so1 = FP_CPU_I64(args, 11);
  float p = FP_CPU_F32(args, 12), scale = FP_CPU_F32(args, 13);
  uint64_t seed = (uint64_t)FP_CPU_I64(args, 14);
  int training = FP_CPU_I32(args, 15);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float v = inp[i * N + j] + bias[i * sb0 + j * sb1];
      if (training)
        v = fp_dropout_keep(seed, (uint64_t)(i * N + j), p) ? v * scale : 0.0f;
      out[i * so0 + j * so1] = res[i * sr0 + j * sr1] + v;
    }
}

void fp_cpu_register_elementwise(fp_cpu_kernel_fn table[FPK_COUNT]) {
  table[FPK_pointwise_chain_fused] = pointwise_chain_fused;
  table[FPK_bias_gelu_fused] = bias_gelu_fused;
  table[FPK_bias_dropout_add_fused] = bias_dropout_add;
  table[FPK_bias_dropout_add_fused_t] = bias_dropout_add;
}
