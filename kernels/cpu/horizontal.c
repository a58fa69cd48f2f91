/* fuseport CPU kernels, family horizontal: two results from one pass over
 * the input. Semantics: kernels/kernels.def. */
#include <math.h>

#include "cpu_kernels.h"

static void hreduce_pointwise_fused(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *sum = FP_CPU_F32P(args, 0);
  float *cosx = FP_CPU_F32P(args, 1);
  const float *a = FP_CPU_F32P(args, 2);
  int64_t M = FP_CPU_I64(args, 3), N = FP_CPU_I64(args, 4);
  for (int64_t i = 0; i < M; ++i) {
    const float *row = a + i * N;
    for (int64_t j = 0; j < N; ++j)
      cosx[i * N + j] = cosf(row[j]);
    sum[i] = fp_cpu_sum_f32(row, N, 1);
  }
}

static void hreduce_reduce_fused(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *sum = FP_CPU_F32P(args, 0);
  float *amax = FP_CPU_F32P(args, 1);
  const float *a = FP_CPU_F32P(args, 2);
  int64_t M = FP_CPU_I64(args, 3), N = FP_CPU_I64(args, 4);
  for (int64_t i = 0; i < M; ++i) {
    sum[i] = fp_cpu_sum_f32(a + i * N, N, 1);
    amax[i] = fp_cpu_max_f32(a + i * N, N, 1);
  }
}

void fp_cpu_register_horizontal(fp_cpu_kernel_fn table[FPK_COUNT]) {
  table[FPK_hreduce_pointwise_fused] = hreduce_pointwise_fused;
  table[FPK_hreduce_reduce_fused] = hreduce_reduce_fused;
}
