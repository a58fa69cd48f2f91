/* fuseport CPU kernels, family prim: the random fill and the primitives the
 * unfused recipes are built from. Semantics: kernels/kernels.def. */
#include <math.h>

#include "cpu_kernels.h"
#include "fp_device_common.h"

/* Pairwise summation over blocks of 256 (each summed with eight interleaved
 * partials): error growth O(log n), like a GPU tree reduction, instead of the
 * O(n) of one serial chain. */
float fp_cpu_sum_f32(const float *x, int64_t n, int64_t stride) {
  if (n > 256) {
    int64_t half = (n / 2 + 255) / 256 * 256;
    return fp_cpu_sum_f32(x, half, stride) + fp_cpu_sum_f32(x + half * stride, n - half, stride);
  }
  float part[8] = {0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k)
      part[k] += x[(j + k) * stride];
  for (int k = 0; j < n; ++j, ++k)
    part[k] += x[j * stride];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

float fp_cpu_max_f32(const float *x, int64_t n, int64_t stride) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    float v = x[j * stride];
    if (isnan(v))
      return v;
    if (v > m)
      m = v;
  }
  return m;
}

static void fill_uniform_f32(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0);
  int64_t n = FP_CPU_I64(args, 1);
  uint64_t seed = (uint64_t)FP_CPU_I64(args, 2);
  uint32_t stream = (uint32_t)FP_CPU_I32(args, 3);
  float scale = FP_CPU_F32(args, 4);
  int positive = FP_CPU_I32(args, 5);
  for (int64_t i = 0; i < n; ++i)
    out[i] = fp_uniform_f32(seed, stream, (uint64_t)i, scale, positive);
}

static float unary(int op, float a, float alpha, float beta) {
  switch (op) {
  case FP_UNARY_COPY:
    return a;
  case FP_UNARY_NEG:
    return -a;
  case FP_UNARY_EXP:
    return expf(a);
  case FP_UNARY_COS:
    return cosf(a);
  case FP_UNARY_TANH:
    return tanhf(a);
  case FP_UNARY_RSQRT:
    return 1.0f / sqrtf(a);
  case FP_UNARY_RELU:
    return a > 0.0f ? a : (isnan(a) ? a : 0.0f);
  case FP_UNARY_AFFINE:
    return alpha * a + beta;
  case FP_UNARY_SIGMOID:
    return fp_sigmoid(a);
  case FP_UNARY_GELU_ERF:
    return fp_gelu_erf(a);
  default:
    return NAN;
  }
}

static void prim_unary(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0) + FP_CPU_I64(args, 11);
  const float *a = FP_CPU_F32P(args, 1) + FP_CPU_I64(args, 12);
  int op = FP_CPU_I32(args, 2);
  float alpha = FP_CPU_F32(args, 3), beta = FP_CPU_F32(args, 4);
  int64_t M = FP_CPU_I64(args, 5), N = FP_CPU_I64(args, 6);
  int64_t so0 = FP_CPU_I64(args, 7), so1 = FP_CPU_I64(args, 8);
  int64_t sa0 = FP_CPU_I64(args, 9), sa1 = FP_CPU_I64(args, 10);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      out[i * so0 + j * so1] = unary(op, a[i * sa0 + j * sa1], alpha, beta);
}

static float binary(int op, float a, float b) {
  switch (op) {
  case FP_BINARY_ADD:
    return a + b;
  case FP_BINARY_SUB:
    return a - b;
  case FP_BINARY_MUL:
    return a * b;
  case FP_BINARY_DIV:
    return a / b;
  case FP_BINARY_MAX:
    return fp_maximum(a, b);
  default:
    return NAN;
  }
}

static void prim_binary(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0) + FP_CPU_I64(args, 12);
  const float *a = FP_CPU_F32P(args, 1) + FP_CPU_I64(args, 13);
  const float *b = FP_CPU_F32P(args, 2) + FP_CPU_I64(args, 14);
  int op = FP_CPU_I32(args, 3);
  int64_t M = FP_CPU_I64(args, 4), N = FP_CPU_I64(args, 5);
  int64_t so0 = FP_CPU_I64(args, 6), so1 = FP_CPU_I64(args, 7);
  int64_t sa0 = FP_CPU_I64(args, 8), sa1 = FP_CPU_I64(args, 9);
  int64_t sb0 = FP_CPU_I64(args, 10), sb1 = FP_CPU_I64(args, 11);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      out[i * so0 + j * so1] = binary(op, a[i * sa0 + j * sa1], b[i * sb0 + j * sb1]);
}

static void prim_reduce_rows(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0);
  const float *a = FP_CPU_F32P(args, 1);
  int op = FP_CPU_I32(args, 2);
  int64_t M = FP_CPU_I64(args, 3), N = FP_CPU_I64(args, 4);
  int64_t sa0 = FP_CPU_I64(args, 5), sa1 = FP_CPU_I64(args, 6);
  for (int64_t i = 0; i < M; ++i)
    out[i] = op == FP_REDUCE_SUM ? fp_cpu_sum_f32(a + i * sa0, N, sa1)
                                 : fp_cpu_max_f32(a + i * sa0, N, sa1);
}

static void prim_dropout(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0);
  const float *a = FP_CPU_F32P(args, 1);
  int64_t M = FP_CPU_I64(args, 2), N = FP_CPU_I64(args, 3);
  int64_t so0 = FP_CPU_I64(args, 4), so1 = FP_CPU_I64(args, 5);
  int64_t sa0 = FP_CPU_I64(args, 6), sa1 = FP_CPU_I64(args, 7);
  float p = FP_CPU_F32(args, 8), scale = FP_CPU_F32(args, 9);
  uint64_t seed = (uint64_t)FP_CPU_I64(args, 10);
  int training = FP_CPU_I32(args, 11);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float v = a[i * sa0 + j * sa1];
      if (training)
        v = fp_dropout_keep(seed, (uint64_t)(i * N + j), p) ? v * scale : 0.0f;
      out[i * so0 + j * so1] = v;
    }
}

/* ---- reduced-precision storage and packed words ---------------------------------- */

static void fill_uniform_f16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint16_t *out = (uint16_t *)args[0].v.handle;
  int64_t n = FP_CPU_I64(args, 1);
  uint64_t seed = (uint64_t)FP_CPU_I64(args, 2);
  uint32_t stream = (uint32_t)FP_CPU_I32(args, 3);
  float scale = FP_CPU_F32(args, 4);
  int positive = FP_CPU_I32(args, 5);
  for (int64_t i = 0; i < n; ++i)
    out[i] = fp_uniform_f16_bits(seed, stream, (uint64_t)i, scale, positive);
}

static void fill_uniform_bf16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint16_t *out = (uint16_t *)args[0].v.handle;
  int64_t n = FP_CPU_I64(args, 1);
  uint64_t seed = (uint64_t)FP_CPU_I64(args, 2);
  uint32_t stream = (uint32_t)FP_CPU_I32(args, 3);
  float scale = FP_CPU_F32(args, 4);
  int positive = FP_CPU_I32(args, 5);
  for (int64_t i = 0; i < n; ++i)
    out[i] = fp_uniform_bf16_bits(seed, stream, (uint64_t)i, scale, positive);
}

static void fill_bits_u32(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint32_t *out = (uint32_t *)args[0].v.handle;
  int64_t n = FP_CPU_I64(args, 1);
  uint64_t seed = (uint64_t)FP_CPU_I64(args, 2);
  uint32_t stream = (uint32_t)FP_CPU_I32(args, 3);
  for (int64_t i = 0; i < n; ++i)
    out[i] = fp_philox_word(seed, (uint64_t)i, stream, FP_PHILOX_DOMAIN_FILL);
}

static void fill_bits_u8(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint8_t *out = (uint8_t *)args[0].v.handle;
  int64_t n = FP_CPU_I64(args, 1);
  uint64_t seed = (uint64_t)FP_CPU_I64(args, 2);
  uint32_t stream = (uint32_t)FP_CPU_I32(args, 3);
  for (int64_t i = 0; i < n; ++i)
    out[i] = (uint8_t)(fp_philox_word(seed, (uint64_t)i, stream, FP_PHILOX_DOMAIN_FILL) & 0xFFu);
}

/* 16-bit storage: load as float, compute in float, round once. */
typedef float (*load16_fn)(fp_u32 bits);
typedef fp_u16 (*store16_fn)(float v);

static float load_f16(fp_u32 h) { return fp_f16_bits_to_f32(h); }
static float load_bf16(fp_u32 h) { return fp_bf16_bits_to_f32(h); }

static void prim_unary16(const fp_karg *args, load16_fn load, store16_fn store) {
  uint16_t *out = (uint16_t *)args[0].v.handle + FP_CPU_I64(args, 11);
  const uint16_t *a = (const uint16_t *)args[1].v.handle + FP_CPU_I64(args, 12);
  int op = FP_CPU_I32(args, 2);
  float alpha = FP_CPU_F32(args, 3), beta = FP_CPU_F32(args, 4);
  int64_t M = FP_CPU_I64(args, 5), N = FP_CPU_I64(args, 6);
  int64_t so0 = FP_CPU_I64(args, 7), so1 = FP_CPU_I64(args, 8);
  int64_t sa0 = FP_CPU_I64(args, 9), sa1 = FP_CPU_I64(args, 10);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      out[i * so0 + j * so1] = store(unary(op, load(a[i * sa0 + j * sa1]), alpha, beta));
}

static void prim_binary16(const fp_karg *args, load16_fn load, store16_fn store) {
  uint16_t *out = (uint16_t *)args[0].v.handle + FP_CPU_I64(args, 12);
  const uint16_t *a = (const uint16_t *)args[1].v.handle + FP_CPU_I64(args, 13);
  const uint16_t *b = (const uint16_t *)args[2].v.handle + FP_CPU_I64(args, 14);
  int op = FP_CPU_I32(args, 3);
  int64_t M = FP_CPU_I64(args, 4), N = FP_CPU_I64(args, 5);
  int64_t so0 = FP_CPU_I64(args, 6), so1 = FP_CPU_I64(args, 7);
  int64_t sa0 = FP_CPU_I64(args, 8), sa1 = FP_CPU_I64(args, 9);
  int64_t sb0 = FP_CPU_I64(args, 10), sb1 = FP_CPU_I64(args, 11);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      out[i * so0 + j * so1] =
          store(binary(op, load(a[i * sa0 + j * sa1]), load(b[i * sb0 + j * sb1])));
}

static void prim_unary_f16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  prim_unary16(args, load_f16, fp_f32_to_f16_bits);
}
static void prim_unary_bf16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  prim_unary16(args, load_bf16, fp_f32_to_bf16_bits);
}
static void prim_binary_f16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  prim_binary16(args, load_f16, fp_f32_to_f16_bits);
}
static void prim_binary_bf16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  prim_binary16(args, load_bf16, fp_f32_to_bf16_bits);
}

/* The same for both 16-bit types: a copy of bits with zero columns after. */
static void prim_pad_rows16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint16_t *out = (uint16_t *)args[0].v.handle;
  const uint16_t *in = (const uint16_t *)args[1].v.handle;
  int64_t rows = FP_CPU_I64(args, 2), cols = FP_CPU_I64(args, 3), ld = FP_CPU_I64(args, 4);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < ld; ++j)
      out[i * ld + j] = j < cols ? in[i * cols + j] : 0;
}

/* prim_channel_<dt>(out, a, v0, v1, v2, v3, op, total, inner, K, eps): the
 * per-channel step of a convolution's output; v0..v3 may be none. */
static void prim_channel_any(const fp_karg *args, fp_dtype dtype) {
  void *out = args[0].v.handle;
  const void *a = args[1].v.handle;
  const void *v0 = args[2].v.handle, *v1 = args[3].v.handle, *v2 = args[4].v.handle,
             *v3 = args[5].v.handle;
  const int op = FP_CPU_I32(args, 6);
  const int64_t total = FP_CPU_I64(args, 7), inner = FP_CPU_I64(args, 8), K = FP_CPU_I64(args, 9);
  const float eps = FP_CPU_F32(args, 10);
  for (int64_t i = 0; i < total; ++i) {
    const int64_t c = (i / inner) % K;
    const float x = fp_cpu_load_elem(dtype, a, i);
    const float v = op == FP_CHAN_BN
                        ? fp_bn(x, fp_cpu_load_elem(dtype, v0, c), fp_cpu_load_elem(dtype, v1, c),
                                fp_cpu_load_elem(dtype, v2, c), fp_cpu_load_elem(dtype, v3, c), eps)
                        : x + fp_cpu_load_elem(dtype, v0, c);
    fp_cpu_store_elem(dtype, out, i, v);
  }
}
static void prim_channel(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  prim_channel_any(args, FP_F32);
}
static void prim_channel_f16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  prim_channel_any(args, FP_F16);
}
static void prim_channel_bf16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  prim_channel_any(args, FP_BF16);
}

void fp_cpu_register_prim(fp_cpu_kernel_fn table[FPK_COUNT]) {
  table[FPK_fill_uniform_f32] = fill_uniform_f32;
  table[FPK_fill_uniform_f16] = fill_uniform_f16;
  table[FPK_fill_uniform_bf16] = fill_uniform_bf16;
  table[FPK_fill_bits_u32] = fill_bits_u32;
  table[FPK_fill_bits_u8] = fill_bits_u8;
  table[FPK_prim_unary] = prim_unary;
  table[FPK_prim_unary_f16] = prim_unary_f16;
  table[FPK_prim_unary_bf16] = prim_unary_bf16;
  table[FPK_prim_binary] = prim_binary;
  table[FPK_prim_binary_f16] = prim_binary_f16;
  table[FPK_prim_binary_bf16] = prim_binary_bf16;
  table[FPK_prim_pad_rows_f16] = prim_pad_rows16;
  table[FPK_prim_pad_rows_bf16] = prim_pad_rows16;
  table[FPK_prim_reduce_rows] = prim_reduce_rows;
  table[FPK_prim_dropout] = prim_dropout;
  table[FPK_prim_channel] = prim_channel;
  table[FPK_prim_channel_f16] = prim_channel_f16;
  table[FPK_prim_channel_bf16] = prim_channel_bf16;
}
