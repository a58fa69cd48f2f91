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
#define FP_ERFF(x) erf(x)
#define FP_SQRTF(x) sqrt(x)
typedef ushort fp_u16;
#define FP_FLOAT_AS_BITS(x) as_uint(x)
#define FP_BITS_AS_FLOAT(x) as_float(x)
#elif defined(__CUDACC__)
#include <string.h>
#define FP_FN static __host__ __device__ __forceinline__
typedef unsigned int fp_u32;
typedef unsigned long long fp_u64;
typedef long long fp_i64;
#define FP_COSF(x) cosf(x)
#define FP_TANHF(x) tanhf(x)
#define FP_EXPF(x) expf(x)
#define FP_FMAXF(a, b) fmaxf(a, b)
#define FP_ERFF(x) erff(x)
#define FP_SQRTF(x) sqrtf(x)
typedef unsigned short fp_u16;
/* __float_as_uint is device-only; these functions serve host code too */
FP_FN fp_u32 fp_float_as_bits_cuda(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  fp_u32 u;
  memcpy(&u, &x, 4);
  return u;
#endif
}
FP_FN float fp_bits_as_float_cuda(fp_u32 u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, 4);
  return x;
#endif
}
#define FP_FLOAT_AS_BITS(x) fp_float_as_bits_cuda(x)
#define FP_BITS_AS_FLOAT(x) fp_bits_as_float_cuda(x)
#else
#include <math.h>
#include <stdint.h>
#include <string.h>
#define FP_FN static inline
typedef uint32_t fp_u32;
typedef uint64_t fp_u64;
typedef int64_t fp_i64;
#define FP_COSF(x) cosf(x)
#define FP_TANHF(x) tanhf(x)
#define FP_EXPF(x) expf(x)
#define FP_FMAXF(a, b) fmaxf(a, b)
#define FP_ERFF(x) erff(x)
#define FP_SQRTF(x) sqrtf(x)
typedef uint16_t fp_u16;
static inline uint32_t fp_float_as_bits_host(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
static inline float fp_bits_as_float_host(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}
#define FP_FLOAT_AS_BITS(x) fp_float_as_bits_host(x)
#define FP_BITS_AS_FLOAT(x) fp_bits_as_float_host(x)
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
#define FP_UNARY_SIGMOID 8
#define FP_UNARY_GELU_ERF 9 /* x * 0.5 * (1 + erf(x / sqrt(2))), torch's default gelu */
#define FP_UNARY_COUNT 10

#define FP_BINARY_ADD 0
#define FP_BINARY_SUB 1
#define FP_BINARY_MUL 2
#define FP_BINARY_DIV 3
#define FP_BINARY_MAX 4 /* torch.maximum: NaN propagates */
#define FP_BINARY_COUNT 5

#define FP_REDUCE_SUM 0
#define FP_REDUCE_MAX 1 /* torch.amax: NaN propagates */
#define FP_REDUCE_COUNT 2

/* ---- GEMM epilogues (kernels.def, family gemm) ---------------------------- */
#define FP_EPI_NONE 0
#define FP_EPI_BIAS 1      /* acc + bias[j] */
#define FP_EPI_ADD 2       /* acc + add[i, j] */
#define FP_EPI_RELU 3      /* relu(acc) */
#define FP_EPI_BIAS_RELU 4 /* relu(acc + bias[j]) */
#define FP_EPI_ADD_RELU 5  /* relu(acc + add[i, j]) */
#define FP_EPI_SPLIT_ACT 6 /* paired: sigmoid(left) * tanh(right) */
#define FP_EPI_GEGLU 7     /* paired: (left + bias[j]) * gelu_erf(right + bias[N + j]) */
#define FP_EPI_COUNT 8
/* Whether the epilogue pairs column j with column N + j of a [.., 2N] product. */
#define FP_EPI_PAIRED(e) ((e) == FP_EPI_SPLIT_ACT || (e) == FP_EPI_GEGLU)
#define FP_EPI_READS_BIAS(e) ((e) == FP_EPI_BIAS || (e) == FP_EPI_BIAS_RELU || (e) == FP_EPI_GEGLU)
#define FP_EPI_READS_ADD(e) ((e) == FP_EPI_ADD || (e) == FP_EPI_ADD_RELU)

/* ---- convolution epilogue and per-channel steps (kernels.def, family conv) --
 * conv_<dt> takes FP_EPI_NONE .. FP_EPI_ADD_RELU (the GEMM core's unpaired
 * epilogues, per output channel) or FP_CONV_EPI_BN; prim_channel_<dt> takes
 * FP_CHAN_*. */
#define FP_CONV_EPI_BN 8 /* inference batch-norm: fp_bn */
#define FP_CONV_EPI_VALID(e)                                                                       \
  (((e) >= FP_EPI_NONE && (e) <= FP_EPI_ADD_RELU) || (e) == FP_CONV_EPI_BN)
#define FP_CHAN_ADD 0
#define FP_CHAN_BN 1
#define FP_CHAN_COUNT 2

/* ---- attention (kernels.def, family attention) ---------------------------------
 * The largest head dimension every backend's kernels take. */
#define FP_ATTN_MAX_D 256

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

/* ---- reduced-precision storage --------------------------------------------------
 * Conversions on bit patterns (no half type needed: NVIDIA's OpenCL has no
 * cl_khr_fp16), so every backend rounds identically: float -> half and
 * float -> bfloat16 round to nearest, ties to even; NaN stays a quiet NaN of
 * the same sign; values past the range become infinities. */

FP_FN float fp_bf16_bits_to_f32(fp_u32 h) { return FP_BITS_AS_FLOAT((fp_u32)(h & 0xFFFFu) << 16); }

FP_FN fp_u16 fp_f32_to_bf16_bits(float f) {
  fp_u32 u = FP_FLOAT_AS_BITS(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep it quiet (a rounded payload could be inf) */
    return (fp_u16)((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (fp_u16)(u >> 16);
}

FP_FN float fp_f16_bits_to_f32(fp_u32 h) {
  fp_u32 sign = (h & 0x8000u) << 16;
  fp_u32 exp = (h >> 10) & 0x1Fu;
  fp_u32 man = h & 0x3FFu;
  if (exp == 0x1Fu) /* inf, NaN */
    return FP_BITS_AS_FLOAT(sign | 0x7F800000u | (man << 13));
  if (exp != 0)
    return FP_BITS_AS_FLOAT(sign | ((exp + 112u) << 23) | (man << 13));
  /* zero and subnormals: man * 2^-24, exact in float */
  float v = (float)man * 5.9604644775390625e-8f;
  return sign != 0 ? -v : v;
}

FP_FN fp_u16 fp_f32_to_f16_bits(float f) {
  fp_u32 u = FP_FLOAT_AS_BITS(f);
  fp_u32 sign = (u >> 16) & 0x8000u;
  fp_u32 a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) /* NaN */
    return (fp_u16)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) /* >= 65520: rounds past the largest half, 65504 */
    return (fp_u16)(sign | 0x7C00u);
  if (a < 0x38800000u) { /* below 2^-14: a subnormal half (or zero) */
    if (a < 0x33000000u) /* below 2^-25: rounds to zero (2^-25 itself ties to even: 0) */
      return (fp_u16)sign;
    fp_u32 e = a >> 23; /* 102..112 */
    fp_u32 m = (a & 0x7FFFFFu) | 0x800000u;
    fp_u32 shift = 126u - e; /* 14..24: value = m * 2^(e-150), half unit 2^-24 */
    fp_u32 q = m >> shift;
    fp_u32 rest = m & ((1u << shift) - 1u);
    fp_u32 halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (q & 1u)))
      ++q;
    return (fp_u16)(sign | q);
  }
  /* normal: rebias the exponent, round the 13 dropped bits to nearest even
   * (a carry out of the mantissa correctly bumps the exponent) */
  fp_u32 r = a - 0x38000000u;
  r += 0xFFFu + ((r >> 13) & 1u);
  return (fp_u16)(sign | (r >> 13));
}

/* Random input values of each storage type: the f32 value rounded once. */
FP_FN fp_u16 fp_uniform_f16_bits(fp_u64 seed, fp_u32 stream, fp_u64 index, float scale,
                                 int positive) {
  return fp_f32_to_f16_bits(fp_uniform_f32(seed, stream, index, scale, positive));
}
FP_FN fp_u16 fp_uniform_bf16_bits(fp_u64 seed, fp_u32 stream, fp_u64 index, float scale,
                                  int positive) {
  return fp_f32_to_bf16_bits(fp_uniform_f32(seed, stream, index, scale, positive));
}

/* ---- activation compression (kernels.def, family compress) ----------------------
 * The notebook's quantisation rule as exact IEEE float32 steps: every
 * backend must produce the same words, so no step may be contracted into an
 * fma (nvcc contracts across statements: hence the _rn intrinsics; NVIDIA's
 * OpenCL fuses too, despite FP_CONTRACT OFF: PTX .rn there) and the two
 * divisions must be correctly rounded (fp_div_rn). */
#define FP_QGROUP 256 /* values per quantisation group */

FP_FN float fp_fmul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#elif defined(__OPENCL_VERSION__) && defined(FP_NV_PTX) && FP_NV_PTX >= 1
  float r; /* .rn: ptxas never contracts it into an fma */
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a * b;
#endif
}
FP_FN float fp_fadd_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#elif defined(__OPENCL_VERSION__) && defined(FP_NV_PTX) && FP_NV_PTX >= 1
  float r; /* .rn: ptxas never contracts it into an fma */
  asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a + b;
#endif
}
FP_FN float fp_fsub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#elif defined(__OPENCL_VERSION__) && defined(FP_NV_PTX) && FP_NV_PTX >= 1
  float r; /* .rn: ptxas never contracts it into an fma */
  asm("sub.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a - b;
#endif
}

/* a / b rounded to nearest even (b > 0 finite, a finite). OpenCL's `/` may
 * be 2.5 ulp off, and forming the quotient in double does not help: LLVM
 * folds fptrunc(fdiv(fpext a, fpext b)) back into a float division (NVIDIA's
 * OpenCL then emitted its approximate one). So: PTX div.rn on NVIDIA;
 * elsewhere, of the seven floats around a / b, the one with the smallest
 * remainder a - b*c (exact through fma for c that close), which is the
 * nearest (a tie would need a/b exactly halfway: impossible). */
FP_FN float fp_div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#elif defined(__OPENCL_VERSION__) && defined(FP_NV_PTX) && FP_NV_PTX >= 1
  float r;
  asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#elif defined(__OPENCL_VERSION__)
  const float q = a / b;
  float best = q, best_r = fabs(fma(-b, q, a));
  float lo = q, hi = q;
  for (int i = 0; i < 3; ++i) {
    lo = nextafter(lo, -INFINITY);
    hi = nextafter(hi, INFINITY);
    const float rl = fabs(fma(-b, lo, a)), rh = fabs(fma(-b, hi, a));
    if (rl < best_r) {
      best = lo;
      best_r = rl;
    }
    if (rh < best_r) {
      best = hi;
      best_r = rh;
    }
  }
  return best;
#else
  return a / b;
#endif
}
FP_FN float fp_recip_rn(float b) { return fp_div_rn(1.0f, b); }

/* scale of a group with minimum mn and maximum mx: (mx - mn) / (2^bits - 1),
 * 1 where the group is constant. */
FP_FN float fp_quant_scale(float mn, float mx, int bits) {
#if defined(__OPENCL_VERSION__)
#pragma OPENCL FP_CONTRACT OFF
#endif
  float rng = fp_fsub_rn(mx, mn);
  return rng > 0.0f ? fp_div_rn(rng, (float)((1 << bits) - 1)) : 1.0f;
}

/* q = clamp(int((x - mn) * inv + (0.5 - 1e-6)), 0, 2^bits - 1): the
 * notebook's round-half-down (the 1e-6 keeps exact halves from rounding up
 * at 1 and 2 bits; at 8 bits 0.5 - 1e-6 is 0.499999 in float but a sum near
 * 255.5 rounds away from it -- the rule is these float steps, not real
 * arithmetic). NaN codes as 0. */
FP_FN fp_u32 fp_quant_code(float x, float mn, float inv, int bits) {
#if defined(__OPENCL_VERSION__)
#pragma OPENCL FP_CONTRACT OFF
#endif
  const float qmax = (float)((1 << bits) - 1);
  float d = fp_fsub_rn(x, mn);
  /* each step rounded on its own (fp_fmul_rn, fp_fadd_rn: never an fma) */
  float p = fp_fmul_rn(d, inv);
  float qf = fp_fadd_rn(p, 0.5f - 1e-6f);
  /* int() truncates toward zero; qf >= 0.499999 - |rounding| here, and a
   * clamp before the conversion keeps it defined for any input */
  qf = qf > 0.0f ? (qf < qmax ? qf : qmax) : 0.0f;
  return (fp_u32)qf;
}

/* x' = q * scale + min with one rounding (fma), then to bfloat16. */
FP_FN float fp_dequant_value(fp_u32 q, float scale, float mn) {
#if defined(__CUDA_ARCH__)
  float v = __fmaf_rn((float)q, scale, mn);
#elif defined(__OPENCL_VERSION__)
  float v = fma((float)q, scale, mn);
#else
  float v = fmaf((float)q, scale, mn);
#endif
  return fp_bf16_bits_to_f32(fp_f32_to_bf16_bits(v));
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

/* torch.nn.functional.gelu's default (approximate='none'). */
FP_FN float fp_gelu_erf(float x) { return x * 0.5f * (1.0f + FP_ERFF(x * 0.70710678118654752f)); }

FP_FN float fp_sigmoid(float x) { return 1.0f / (1.0f + FP_EXPF(-x)); }

/* The GEMM epilogues on float accumulators (FP_EPI_*): the unpaired ones of
 * acc (bias_or_add: bias[j] or add[i, j], 0 when the epilogue reads
 * neither), the paired ones of the left and right accumulators (and their
 * biases for GEGLU). */
FP_FN float fp_epilogue_unpaired(int epi, float acc, float bias_or_add) {
  float v = (FP_EPI_READS_BIAS(epi) || FP_EPI_READS_ADD(epi)) ? acc + bias_or_add : acc;
  return (epi == FP_EPI_RELU || epi == FP_EPI_BIAS_RELU || epi == FP_EPI_ADD_RELU)
             ? (v > 0.0f ? v : (v != v ? v : 0.0f))
             : v;
}

FP_FN float fp_epilogue_paired(int epi, float left, float right, float bias_left,
                               float bias_right) {
  if (epi == FP_EPI_GEGLU)
    return (left + bias_left) * fp_gelu_erf(right + bias_right);
  return fp_sigmoid(left) * FP_TANHF(right);
}

/* Inference batch-norm of a convolution's output, the definition of SPEC.md
 * in float: (v - mean) / sqrt(var + eps) * gamma + beta. */
FP_FN float fp_bn(float v, float mean, float var, float gamma, float beta, float eps) {
  return (v - mean) / FP_SQRTF(var + eps) * gamma + beta;
}

/* ---- division by a divisor fixed at launch ----------------------------------
 * n / d for 0 <= n < 2^31 and 1 <= d < 2^31 as one multiply and a shift
 * (Granlund and Montgomery's round-up method), for the persistent GEMM's
 * decode of a work unit into its tile, once per tile on the critical path of
 * every consumer warp (a division is some 20 dependent instructions; Nsight
 * Compute put a third of a small-K GEMM's warp samples there). With l =
 * ceil(log2 d), m = ceil(2^(31 + l) / d) fits 32 bits, and
 * (n m) >> (31 + l) is exactly n / d for every such n: the rounding error
 * n (m d - 2^(31 + l)) / (d 2^(31 + l)) stays below 2^-l <= 1 / d. The host
 * makes the divider once (fp_fastdiv_make); fp_fastdiv_q divides. */
typedef struct fp_fastdiv {
  fp_u32 mul, shift;
} fp_fastdiv;
FP_FN fp_fastdiv fp_fastdiv_make(fp_u32 d) {
  fp_u32 l = 0;
  while (l < 31 && ((fp_u32)1 << l) < d)
    ++l;
  fp_fastdiv f;
  f.shift = 31 + l;
  f.mul = (fp_u32)((((fp_u64)1 << f.shift) + d - 1) / d);
  return f;
}
FP_FN fp_u32 fp_fastdiv_q(fp_u32 n, fp_fastdiv f) {
  return (fp_u32)(((fp_u64)n * f.mul) >> f.shift);
}

#endif
