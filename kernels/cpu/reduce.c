/* fuseport CPU kernels, family reduce: fused row reductions, one row at a
 * time with the row kept in cache, as the GPU kernels keep it on chip.
 * Semantics: kernels/kernels.def. */
#include <math.h>

#include "cpu_kernels.h"

/* out = softmax(x) over one row; out may alias x. PyTorch's form:
 * exp(x - max) / sum(exp(x - max)); a row of -inf gives NaN. */
static void softmax_row(float *out, const float *x, int64_t N) {
  float m = fp_cpu_max_f32(x, N, 1);
  for (int64_t j = 0; j < N; ++j)
    out[j] = expf(x[j] - m);
  float inv = 1.0f / fp_cpu_sum_f32(out, N, 1);
  for (int64_t j = 0; j < N; ++j)
    out[j] *= inv;
}

static void softmax_fused(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0);
  const float *x = FP_CPU_F32P(args, 1);
  int64_t M = FP_CPU_I64(args, 2), N = FP_CPU_I64(args, 3);
  for (int64_t i = 0; i < M; ++i)
    softmax_row(out + i * N, x + i * N, N);
}

static void double_softmax_fused(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0);
  const float *x = FP_CPU_F32P(args, 1);
  int64_t M = FP_CPU_I64(args, 2), N = FP_CPU_I64(args, 3);
  for (int64_t i = 0; i < M; ++i) {
    softmax_row(out + i * N, x + i * N, N);
    softmax_row(out + i * N, out + i * N, N);
  }
}

/* sum_j a[j]*b[j], pairwise like fp_cpu_sum_f32. */
static float dot_row(const float *a, const float *b, int64_t N) {
  if (N > 256) {
    int64_t half = (N / 2 + 255) / 256 * 256;
    return dot_row(a, b, half) + dot_row(a + half, b + half, N - half);
  }
  float part[8] = {0};
  int64_t j = 0;
  for (; j + 8 <= N; j += 8)
    for (int k = 0; k < 8; ++k)
      part[k] += a[j + k] * b[j + k];
  for (int k = 0; j < N; ++j, ++k)
    part[k] += a[j] * b[j];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

static void softmax_backward_fused(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *gin = FP_CPU_F32P(args, 0);
  const float *g = FP_CPU_F32P(args, 1);
  const float *y = FP_CPU_F32P(args, 2);
  int64_t M = FP_CPU_I64(args, 3), N = FP_CPU_I64(args, 4);
  for (int64_t i = 0; i < M; ++i) {
    const float *gr = g + i * N, *yr = y + i * N;
    float dot = dot_row(gr, yr, N);
    for (int64_t j = 0; j < N; ++j)
      gin[i * N + j] = yr[j] * (gr[j] - dot);
  }
}

static void layernorm_fused(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0);
  float *mean_out = FP_CPU_F32P(args, 1);
  float *rstd_out = FP_CPU_F32P(args, 2);
  const float *x = FP_CPU_F32P(args, 3);
  const float *w = FP_CPU_F32P(args, 4);
  const float *b = FP_CPU_F32P(args, 5);
  int64_t M = FP_CPU_I64(args, 6), N = FP_CPU_I64(args, 7);
  float eps = FP_CPU_F32(args, 8);
  for (int64_t i = 0; i < M; ++i) {
    const float *xr = x + i * N;
    float *orow = out + i * N;
    float mean = fp_cpu_sum_f32(xr, N, 1) / (float)N;
    /* Two passes over the cached row: the centred sum of squares does not
     * cancel catastrophically as E[x^2]-E[x]^2 would. */
    for (int64_t j = 0; j < N; ++j)
      orow[j] = xr[j] - mean;
    float var = dot_row(orow, orow, N) / (float)N;
    float rstd = 1.0f / sqrtf(var + eps);
    for (int64_t j = 0; j < N; ++j)
      orow[j] = orow[j] * rstd * w[j] + b[j];
    mean_out[i] = mean;
    rstd_out[i] = rstd;
  }
}

static void norm_chain_fused(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0);
  const float *x = FP_CPU_F32P(args, 1);
  int64_t M = FP_CPU_I64(args, 2), N = FP_CPU_I64(args, 3);
  for (int64_t i = 0; i < M; ++i) {
    float *orow = out + i * N;
    const float *src = x + i * N;
    for (int step = 0; step < 3; ++step) {
      float s = fp_cpu_sum_f32(src, N, 1);
      for (int64_t j = 0; j < N; ++j)
        orow[j] = src[j] * s;
      src = orow;
    }
  }
}

void fp_cpu_register_reduce(fp_cpu_kernel_fn table[FPK_COUNT]) {
  table[FPK_softmax_fused] = softmax_fused;
  table[FPK_double_softmax_fused] = double_softmax_fused;
  table[FPK_softmax_backward_fused] = softmax_backward_fused;
  table[FPK_layernorm_fused] = layernorm_fused;
  table[FPK_norm_chain_fused] = norm_chain_fused;
}
