/* fuseport: definitions shared bit-for-bit by the host, the CPU kernels, the
 * CUDA kernels and the OpenCL kernels (this file is prepended to every
 * embedded OpenCL program).
 *
 * - Philox4x32-10 (Salmon et al., SC'11): the counter-based generator behind
 *   the random input fill and the dropout mask. Same key and counter give the
 *   same bits on every backend.
 * - The op codes of the unfused primitive kernels.
 * - The scalar formulas of the elementwise operators, so every backend
 *   evaluates them in the same order.
 */
#ifndef FUSEPORT_FP_DEVICE_COMMON_H
#define FUSEPORT_FP_DEVICE_COMMON_H

#if defined(__OPENCL_VERSION__)
#define FP_FN static inline
typedef uint fp_u32;
typedef ulong fp_u64;
typedef long fp_i64;
#define FP_COSF(x) cos(x)
#define FP_TANHF(x) tanh(x)
#define FP_EXPF(x) exp(x)
#define FP_FMAXF(a, b) fmax(a, b)
#elif defined(__CUDACC__)
#define FP_FN static __host__ __device__ __forceinline__
typedef unsigned int fp_u32;
typedef unsigned long long fp_u64;
typedef long long fp_i64;
#define FP_COSF(x) cosf(x)
#define FP_TANHF(x) tanhf(x)
#define FP_EXPF(x) expf(x)
#define FP_FMAXF(a, b) fmaxf(a, b)
#else
#include <math.h>
#include <stdint.h>
#define FP_FN static inline
typedef uint32_t fp_u32;
typedef uint64_t fp_u64;
typedef int64_t fp_i64;
#define FP_COSF(x) cosf(x)
#define FP_TANHF(x) tanhf(x)
#define FP_EXPF(x) expf(x)
#define FP_FMAXF(a, b) fmaxf(a, b)
#endif

/* ---- op codes of the primitive kernels ---------------------------------- */
#define FP_UNARY_COPY 0
#define FP_UNARY_NEG 1
#define FP_UNARY_EXP 2
#define FP_UNARY_COS 3
#define FP_UNARY_TANH 4
#define FP_UNARY_RSQRT 5
#define FP_UNARY_RELU 6
#define FP_UNARY_AFFINE 7 /* alpha*a + beta */
#define FP_UNARY_COUNT 8

#define FP_BINARY_ADD 0
#define FP_BINARY_SUB 1
#define FP_BINARY_MUL 2
#define FP_BINARY_DIV 3
#define FP_BINARY_MAX 4 /* torch.maximum: NaN propagates */
#define FP_BINARY_COUNT 5

#define FP_REDUCE_SUM 0
#define FP_REDUCE_MAX 1 /* torch.amax: NaN propagates */
#define FP_REDUCE_COUNT 2

/* Philox counter word 3 separates the generator's uses. */
#define FP_PHILOX_DOMAIN_DROPOUT 0x0u
#define FP_PHILOX_DOMAIN_FILL 0x46494c4cu /* "FILL" */

/* ---- Philox4x32-10 ------------------------------------------------------------ */

FP_FN fp_u32 fp_mulhilo32(fp_u32 a, fp_u32 b, fp_u32 *hi) {
  fp_u64 product = (fp_u64)a * (fp_u64)b;
  *hi = (fp_u32)(product >> 32);
  return (fp_u32)product;
}

/* Ten rounds; the key is bumped by the Weyl constants between rounds. The
 * result is written to out[0..3]. */
FP_FN void fp_philox4x32_10(fp_u32 c0, fp_u32 c1, fp_u32 c2, fp_u32 c3, fp_u32 k0, fp_u32 k1,
                            fp_u32 *out) {
  for (int round = 0; round < 10; ++round) {
    fp_u32 hi0, hi1;
    fp_u32 lo0 = fp_mulhilo32(0xD2511F53u, c0, &hi0);
    fp_u32 lo1 = fp_mulhilo32(0xCD9E8D57u, c2, &hi1);
    fp_u32 n0 = hi1 ^ c1 ^ k0;
    fp_u32 n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* First output word for (seed, index, stream, domain). */
FP_FN fp_u32 fp_philox_word(fp_u64 seed, fp_u64 index, fp_u32 stream, fp_u32 domain) {
  fp_u32 r[4];
  fp_philox4x32_10((fp_u32)index, (fp_u32)(index >> 32), stream, domain, (fp_u32)seed,
                   (fp_u32)(seed >> 32), r);
  return r[0];
}

/* Random input value, exact in float on every backend: a 24-bit integer times
 * a power of two. positive: [0, scale); otherwise [-scale, scale). `scale`
 * must be a power of two so that the product is exact. */
FP_FN float fp_uniform_f32(fp_u64 seed, fp_u32 stream, fp_u64 index, float scale, int positive) {
  fp_u32 bits = fp_philox_word(seed, index, stream, FP_PHILOX_DOMAIN_FILL) >> 8; /* 24 bits */
  float unit = positive ? (float)bits * (1.0f / 16777216.0f)
                        : (float)((int)bits - 8388608) * (1.0f / 8388608.0f);
  return unit * scale;
}

/* Dropout keep decision for the logical element `index`: u in [0,1) with 24
 * random bits (exact in float), kept when u >= p, so P(keep) = 1 - p. */
FP_FN int fp_dropout_keep(fp_u64 seed, fp_u64 index, float p) {
  fp_u32 bits = fp_philox_word(seed, index, 0u, FP_PHILOX_DOMAIN_DROPOUT) >> 8;
  float u = (float)bits * (1.0f / 16777216.0f);
  return u >= p;
}

/* ---- scalar formulas of the elementwise operators ------------------------------ */

/* torch.maximum: NaN in either operand gives NaN. */
FP_FN float fp_maximum(float a, float b) { return (a != a || b != b) ? a + b : FP_FMAXF(a, b); }

FP_FN float fp_pointwise_chain(float x) {
  float y = FP_COSF(x);
  x = x * y;
  y = fp_maximum(x, y);
  return x + y;
}

FP_FN float fp_gelu_tanh(float x) {
  return x * 0.5f * (1.0f + FP_TANHF(0.79788456f * x * (1.0f + 0.044715f * x * x)));
}

#endif
