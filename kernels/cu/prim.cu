/* fuseport CUDA kernels, family prim: the random fill and the primitives the
 * unfused recipes are built from, plus the backend's pattern fill.
 * Semantics: kernels/kernels.def; reference: kernels/cpu/prim.c.
 *
 * The elementwise primitives take any strides (0 broadcasts) and pick their
 * schedule from them (fpcu::elem_map_2d): contiguous operands go 1-D with
 * 16-byte accesses, row broadcasts (a bias, a per-row value) with 16-byte
 * accesses along rows, anything else element by element. The op code is a
 * template parameter, dispatched once per launch.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "device_common.cuh"

using namespace fpcu;

namespace {

template <int OP> __device__ __forceinline__ float unary_op(float a, float alpha, float beta) {
  if constexpr (OP == FP_UNARY_COPY) {
    return a;
  } else if constexpr (OP == FP_UNARY_NEG) {
    return -a;
  } else if constexpr (OP == FP_UNARY_EXP) {
    return expf(a);
  } else if constexpr (OP == FP_UNARY_COS) {
    return cosf(a);
  } else if constexpr (OP == FP_UNARY_TANH) {
    return tanhf(a);
  } else if constexpr (OP == FP_UNARY_RSQRT) {
    return 1.0f / sqrtf(a); /* IEEE sqrt and division, as on the CPU (not rsqrtf) */
  } else if constexpr (OP == FP_UNARY_RELU) {
    return a > 0.0f ? a : (a != a ? a : 0.0f); /* NaN stays NaN */
  } else if constexpr (OP == FP_UNARY_AFFINE) {
    return __fmul_rn(alpha, a) + beta; /* no FMA contraction: the CPU rounds twice too */
  } else if constexpr (OP == FP_UNARY_SIGMOID) {
    return fp_sigmoid(a);
  } else if constexpr (OP == FP_UNARY_GELU_ERF) {
    return fp_gelu_erf(a);
  } else {
    return CUDART_NAN_F; /* unknown op code, as on the CPU */
  }
}

template <int OP> __device__ __forceinline__ float binary_op(float a, float b) {
  if constexpr (OP == FP_BINARY_ADD) {
    return a + b;
  } else if constexpr (OP == FP_BINARY_SUB) {
    return a - b;
  } else if constexpr (OP == FP_BINARY_MUL) {
    return a * b;
  } else if constexpr (OP == FP_BINARY_DIV) {
    return a / b;
  } else if constexpr (OP == FP_BINARY_MAX) {
    return fp_maximum(a, b);
  } else {
    return CUDART_NAN_F;
  }
}

template <int OP>
__device__ __forceinline__ void prim_unary_run(float *out, long long so0, long long so1,
                                               const View2D (&in)[1], long long M, long long N,
                                               float alpha, float beta) {
  elem_map_2d<4>(out, so0, so1, in, M, N,
                 [=](const float(&a)[1], long long) { return unary_op<OP>(a[0], alpha, beta); });
}

template <int OP>
__device__ __forceinline__ void prim_binary_run(float *out, long long so0, long long so1,
                                                const View2D (&in)[2], long long M, long long N) {
  /* two items in flight: four would spill the row-vec schedule's 64-bit indices */
  elem_map_2d<2>(out, so0, so1, in, M, N,
                 [](const float(&a)[2], long long) { return binary_op<OP>(a[0], a[1]); });
}

/* One row reduction per group; op is SumOp or MaxOp. */
template <class Op>
__device__ __forceinline__ void reduce_rows_run(float *out, const float *a, long long M,
                                                long long N, long long sa0, long long sa1,
                                                float identity, Op op) {
  for (long long row = blockIdx.x; row < M; row += gridDim.x) {
    const float *a_row = a + row * sa0;
    float acc = identity;
    if (sa1 == 1) {
      const RowSplit s = row_split(a_row, N);
      const float *body = a_row + s.head;
      row_stream<4>(
          s, [&](long long j) { acc = op(acc, __ldg(a_row + j)); },
          [&](long long v) { return ldg4(body + 4 * v); },
          [&](long long, float4 x) { acc = op(acc, op(op(x.x, x.y), op(x.z, x.w))); });
    } else { /* strided (or broadcast) rows: 32-bit loads */
      strided_unrolled<4>(
          threadIdx.x, N, blockDim.x, [&](long long j) { return __ldg(a_row + j * sa1); },
          [&](long long, float v) { acc = op(acc, v); });
    }
    acc = block_allreduce(acc, identity, op);
    if (threadIdx.x == 0)
      out[row] = acc;
  }
}

/* Backend fill: `unit` bytes (2, 4, 8 or 16) of `pattern` (the pattern
 * repeated to 16 bytes) at dst + u*unit. */
__device__ __forceinline__ void store_unit(unsigned char *p, uint4 pattern, unsigned unit) {
  switch (unit) {
  case 2:
    *reinterpret_cast<unsigned short *>(p) = (unsigned short)(pattern.x & 0xffffu);
    break;
  case 4:
    *reinterpret_cast<unsigned *>(p) = pattern.x;
    break;
  case 8:
    *reinterpret_cast<uint2 *>(p) = make_uint2(pattern.x, pattern.y);
    break;
  default:
    *reinterpret_cast<uint4 *>(p) = pattern;
    break;
  }
}

} // namespace

/* ---- kernels ----------------------------------------------------------------- */

/* fill_uniform_f32(out, n, seed, stream, scale, positive)            ELEM
 * out[i] = fp_uniform_f32(seed, stream, i, scale, positive): the same
 * function as on the host, so bit-identical (a 24-bit integer times powers
 * of two; no addition for FMA contraction to change). */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    fill_uniform_f32(float *out, long long n, long long seed, int stream, float scale,
                     int positive) {
  const fp_u64 key = (fp_u64)seed;
  const fp_u32 stream_id = (fp_u32)stream;
  const auto value = [=](long long i) {
    return fp_uniform_f32(key, stream_id, (fp_u64)i, scale, positive);
  };
  elem_flat<2>(
      n, aligned16(out),
      [&](long long v) {
        const long long e = 4 * v;
        return make_float4(value(e), value(e + 1), value(e + 2), value(e + 3));
      },
      [&](long long v, float4 x) { st4(out + 4 * v, x); }, [&](long long e) { return value(e); },
      [&](long long e, float x) { out[e] = x; });
}

/* prim_unary(out, a, op, alpha, beta, M, N, so0, so1, sa0, sa1, oo, oa)      ELEM */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    prim_unary(float *out, const float *a, int op, float alpha, float beta, long long M,
               long long N, long long so0, long long so1, long long sa0, long long sa1,
               long long oo, long long oa) {
  out += oo;
  const View2D in[1] = {{a + oa, sa0, sa1}};
  switch (op) {
  case FP_UNARY_COPY:
    prim_unary_run<FP_UNARY_COPY>(out, so0, so1, in, M, N, alpha, beta);
    break;
  case FP_UNARY_NEG:
    prim_unary_run<FP_UNARY_NEG>(out, so0, so1, in, M, N, alpha, beta);
    break;
  case FP_UNARY_EXP:
    prim_unary_run<FP_UNARY_EXP>(out, so0, so1, in, M, N, alpha, beta);
    break;
  case FP_UNARY_COS:
    prim_unary_run<FP_UNARY_COS>(out, so0, so1, in, M, N, alpha, beta);
    break;
  case FP_UNARY_TANH:
    prim_unary_run<FP_UNARY_TANH>(out, so0, so1, in, M, N, alpha, beta);
    break;
  case FP_UNARY_RSQRT:
    prim_unary_run<FP_UNARY_RSQRT>(out, so0, so1, in, M, N, alpha, beta);
    break;
  case FP_UNARY_RELU:
    prim_unary_run<FP_UNARY_RELU>(out, so0, so1, in, M, N, alpha, beta);
    break;
  case FP_UNARY_AFFINE:
    prim_unary_run<FP_UNARY_AFFINE>(out, so0, so1, in, M, N, alpha, beta);
    break;
  case FP_UNARY_SIGMOID:
    prim_unary_run<FP_UNARY_SIGMOID>(out, so0, so1, in, M, N, alpha, beta);
    break;
  case FP_UNARY_GELU_ERF:
    prim_unary_run<FP_UNARY_GELU_ERF>(out, so0, so1, in, M, N, alpha, beta);
    break;
  default:
    prim_unary_run<-1>(out, so0, so1, in, M, N, alpha, beta);
    break;
  }
}

/* prim_binary(out, a, b, op, M, N, so0, so1, sa0, sa1, sb0, sb1, oo, oa, ob)      ELEM */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    prim_binary(float *out, const float *a, const float *b, int op, long long M, long long N,
                long long so0, long long so1, long long sa0, long long sa1, long long sb0,
                long long sb1, long long oo, long long oa, long long ob) {
  out += oo;
  const View2D in[2] = {{a + oa, sa0, sa1}, {b + ob, sb0, sb1}};
  switch (op) {
  case FP_BINARY_ADD:
    prim_binary_run<FP_BINARY_ADD>(out, so0, so1, in, M, N);
    break;
  case FP_BINARY_SUB:
    prim_binary_run<FP_BINARY_SUB>(out, so0, so1, in, M, N);
    break;
  case FP_BINARY_MUL:
    prim_binary_run<FP_BINARY_MUL>(out, so0, so1, in, M, N);
    break;
  case FP_BINARY_DIV:
    prim_binary_run<FP_BINARY_DIV>(out, so0, so1, in, M, N);
    break;
  case FP_BINARY_MAX:
    prim_binary_run<FP_BINARY_MAX>(out, so0, so1, in, M, N);
    break;
  default:
    prim_binary_run<-1>(out, so0, so1, in, M, N);
    break;
  }
}

/* prim_reduce_rows(out, a, op, M, N, sa0, sa1)                        ROWS
 * out[i] = sum or max (NaN-propagating) of row i; op != SUM means MAX, as on
 * the CPU. */
static __global__ void __maxnreg__(40) /* 32 spills on sm_80/86 */
    prim_reduce_rows(float *out, const float *a, int op, long long M, long long N, long long sa0,
                     long long sa1) {
  if (op == FP_REDUCE_SUM)
    reduce_rows_run(out, a, M, N, sa0, sa1, 0.0f, SumOp());
  else
    reduce_rows_run(out, a, M, N, sa0, sa1, -CUDART_INF_F, MaxOp());
}

/* prim_dropout(out, a, M, N, so0, so1, sa0, sa1, p, scale, seed, training) ELEM */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    prim_dropout(float *out, const float *a, long long M, long long N, long long so0, long long so1,
                 long long sa0, long long sa1, float p, float scale, long long seed, int training) {
  const View2D in[1] = {{a, sa0, sa1}};
  if (training) /* two items in flight: Philox keeps the thread busy meanwhile */
    elem_map_2d<2>(out, so0, so1, in, M, N, [=](const float(&x)[1], long long e) {
      return dropout_apply(x[0], seed, e, p, scale);
    });
  else
    elem_map_2d<2>(out, so0, so1, in, M, N, [](const float(&x)[1], long long) { return x[0]; });
}

/* Backend fill of `bytes` at dst (both multiples of unit; dst aligned to
 * unit): units up to the first 16-byte boundary, 16-byte stores, units
 * after the last. The 16-byte pattern stays in phase at every 16-byte
 * boundary because that boundary is a whole number of units past dst. */
static __global__ void __launch_bounds__(256)
    fill_pattern(unsigned char *dst, unsigned long long bytes, uint4 pattern, unsigned unit) {
  const unsigned long long misalign = reinterpret_cast<uintptr_t>(dst) & 15u;
  unsigned long long head = misalign != 0 ? 16 - misalign : 0;
  if (head > bytes)
    head = bytes;
  const unsigned long long nvec = (bytes - head) >> 4;
  const unsigned long long tail = head + (nvec << 4);
  const long long first = grid_thread_index(), step = grid_thread_count();
  for (unsigned long long off = (unsigned long long)first * unit; off < head;
       off += (unsigned long long)step * unit)
    store_unit(dst + off, pattern, unit);
  uint4 *body = reinterpret_cast<uint4 *>(dst + head);
  for (long long v = first; v < (long long)nvec; v += step)
    body[v] = pattern;
  for (unsigned long long off = tail + (unsigned long long)first * unit; off < bytes;
       off += (unsigned long long)step * unit)
    store_unit(dst + off, pattern, unit);
}

extern "C" cudaError_t fp_cuda_fill_pattern(void *dst, uint64_t bytes, const void *pattern,
                                            size_t pattern_size, cudaStream_t stream) {
  if (pattern_size != 2 && pattern_size != 4 && pattern_size != 8 && pattern_size != 16)
    return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(dst) % pattern_size != 0 || bytes % pattern_size != 0)
    return cudaErrorInvalidValue;
  if (bytes == 0)
    return cudaSuccess;
  unsigned char repeated[16];
  for (int k = 0; k < 16; ++k)
    repeated[k] = static_cast<const unsigned char *>(pattern)[k % pattern_size];
  uint4 pattern16;
  memcpy(&pattern16, repeated, sizeof pattern16);
  const unsigned threads = 256;
  const uint64_t max_blocks = 8192; /* grid-stride beyond 2M threads */
  uint64_t blocks = (bytes / 16 + threads) / threads;
  if (blocks > max_blocks)
    blocks = max_blocks;
  fill_pattern<<<(unsigned)blocks, threads, 0, stream>>>(static_cast<unsigned char *>(dst), bytes,
                                                         pattern16, (unsigned)pattern_size);
  return cudaGetLastError();
}

/* ---- reduced-precision storage and packed words ------------------------------------
 * f16 and bf16 travel as their 16-bit patterns, converted with
 * fp_device_common.h's functions (the host's and OpenCL's rounding). The
 * 16-bit primitives walk [M, N] in tiles of one row by kSpan columns, one
 * 64-bit division per tile rather than per element; every thread's
 * kSpan / blockDim.x columns are loaded before the first use. */

namespace {

struct F16Bits {
  __device__ __forceinline__ static float load(unsigned short h) { return fp_f16_bits_to_f32(h); }
  __device__ __forceinline__ static unsigned short store(float v) { return fp_f32_to_f16_bits(v); }
};
struct BF16Bits {
  __device__ __forceinline__ static float load(unsigned short h) { return fp_bf16_bits_to_f32(h); }
  __device__ __forceinline__ static unsigned short store(float v) { return fp_f32_to_bf16_bits(v); }
};

constexpr int kSpanPerThread = 4;

/* Calls f(i, j) for every (i, j) of [M, N], each thread kSpanPerThread
 * columns of a row tile, loads first (f returns a value, put stores it). */
template <class Value, class Put>
__device__ __forceinline__ void tile_walk(long long M, long long N, Value value, Put put) {
  const long long span = (long long)blockDim.x * kSpanPerThread;
  const long long tiles_n = (N + span - 1) / span;
  for (long long t = blockIdx.x; t < M * tiles_n; t += gridDim.x) {
    const long long i = t / tiles_n;
    const long long j0 = (t - i * tiles_n) * span + threadIdx.x;
    float v[kSpanPerThread];
#pragma unroll
    for (int u = 0; u < kSpanPerThread; ++u) {
      const long long j = j0 + (long long)u * blockDim.x;
      v[u] = j < N ? value(i, j) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kSpanPerThread; ++u) {
      const long long j = j0 + (long long)u * blockDim.x;
      if (j < N)
        put(i, j, v[u]);
    }
  }
}

template <class S>
__device__ __forceinline__ float unary16(int op, float a, float alpha, float beta) {
  switch (op) {
  case FP_UNARY_COPY:
    return unary_op<FP_UNARY_COPY>(a, alpha, beta);
  case FP_UNARY_NEG:
    return unary_op<FP_UNARY_NEG>(a, alpha, beta);
  case FP_UNARY_EXP:
    return unary_op<FP_UNARY_EXP>(a, alpha, beta);
  case FP_UNARY_COS:
    return unary_op<FP_UNARY_COS>(a, alpha, beta);
  case FP_UNARY_TANH:
    return unary_op<FP_UNARY_TANH>(a, alpha, beta);
  case FP_UNARY_RSQRT:
    return unary_op<FP_UNARY_RSQRT>(a, alpha, beta);
  case FP_UNARY_RELU:
    return unary_op<FP_UNARY_RELU>(a, alpha, beta);
  case FP_UNARY_AFFINE:
    return unary_op<FP_UNARY_AFFINE>(a, alpha, beta);
  case FP_UNARY_SIGMOID:
    return unary_op<FP_UNARY_SIGMOID>(a, alpha, beta);
  case FP_UNARY_GELU_ERF:
    return unary_op<FP_UNARY_GELU_ERF>(a, alpha, beta);
  default:
    return CUDART_NAN_F;
  }
}

__device__ __forceinline__ float binary16(int op, float a, float b) {
  switch (op) {
  case FP_BINARY_ADD:
    return binary_op<FP_BINARY_ADD>(a, b);
  case FP_BINARY_SUB:
    return binary_op<FP_BINARY_SUB>(a, b);
  case FP_BINARY_MUL:
    return binary_op<FP_BINARY_MUL>(a, b);
  case FP_BINARY_DIV:
    return binary_op<FP_BINARY_DIV>(a, b);
  case FP_BINARY_MAX:
    return binary_op<FP_BINARY_MAX>(a, b);
  default:
    return CUDART_NAN_F;
  }
}

template <class S>
__device__ __forceinline__ void prim_unary16_run(unsigned short *out, const unsigned short *a,
                                                 int op, float alpha, float beta, long long M,
                                                 long long N, long long so0, long long so1,
                                                 long long sa0, long long sa1) {
  tile_walk(
      M, N, [&](long long i, long long j) { return S::load(a[i * sa0 + j * sa1]); },
      [&](long long i, long long j, float x) {
        out[i * so0 + j * so1] = S::store(unary16<S>(op, x, alpha, beta));
      });
}

template <class S>
__device__ __forceinline__ void
prim_binary16_run(unsigned short *out, const unsigned short *a, const unsigned short *b, int op,
                  long long M, long long N, long long so0, long long so1, long long sa0,
                  long long sa1, long long sb0, long long sb1) {
  /* the second operand is loaded with the first: both in flight */
  const long long span = (long long)blockDim.x * kSpanPerThread;
  const long long tiles_n = (N + span - 1) / span;
  for (long long t = blockIdx.x; t < M * tiles_n; t += gridDim.x) {
    const long long i = t / tiles_n;
    const long long j0 = (t - i * tiles_n) * span + threadIdx.x;
    float va[kSpanPerThread], vb[kSpanPerThread];
#pragma unroll
    for (int u = 0; u < kSpanPerThread; ++u) {
      const long long j = j0 + (long long)u * blockDim.x;
      va[u] = j < N ? S::load(a[i * sa0 + j * sa1]) : 0.0f;
      vb[u] = j < N ? S::load(b[i * sb0 + j * sb1]) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kSpanPerThread; ++u) {
      const long long j = j0 + (long long)u * blockDim.x;
      if (j < N)
        out[i * so0 + j * so1] = S::store(binary16(op, va[u], vb[u]));
    }
  }
}

} // namespace

/* fill_uniform_f16 / bf16(out, n, seed, stream, scale, positive)        ELEM */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    fill_uniform_f16(unsigned short *out, long long n, long long seed, int stream, float scale,
                     int positive) {
  for (long long i = grid_thread_index(); i < n; i += grid_thread_count())
    out[i] = fp_uniform_f16_bits((fp_u64)seed, (fp_u32)stream, (fp_u64)i, scale, positive);
}
static __global__ void __launch_bounds__(kMaxBlock, 1)
    fill_uniform_bf16(unsigned short *out, long long n, long long seed, int stream, float scale,
                      int positive) {
  for (long long i = grid_thread_index(); i < n; i += grid_thread_count())
    out[i] = fp_uniform_bf16_bits((fp_u64)seed, (fp_u32)stream, (fp_u64)i, scale, positive);
}
/* fill_bits_u32 / u8(out, n, seed, stream)                                ELEM */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    fill_bits_u32(unsigned *out, long long n, long long seed, int stream) {
  for (long long i = grid_thread_index(); i < n; i += grid_thread_count())
    out[i] = fp_philox_word((fp_u64)seed, (fp_u64)i, (fp_u32)stream, FP_PHILOX_DOMAIN_FILL);
}
static __global__ void __launch_bounds__(kMaxBlock, 1)
    fill_bits_u8(unsigned char *out, long long n, long long seed, int stream) {
  for (long long i = grid_thread_index(); i < n; i += grid_thread_count())
    out[i] = (unsigned char)(fp_philox_word((fp_u64)seed, (fp_u64)i, (fp_u32)stream,
                                            FP_PHILOX_DOMAIN_FILL) &
                             0xFFu);
}

/* prim_unary_<16>(out, a, op, alpha, beta, M, N, so0, so1, sa0, sa1, oo, oa)  ELEM */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    prim_unary_f16(unsigned short *out, const unsigned short *a, int op, float alpha, float beta,
                   long long M, long long N, long long so0, long long so1, long long sa0,
                   long long sa1, long long oo, long long oa) {
  prim_unary16_run<F16Bits>(out + oo, a + oa, op, alpha, beta, M, N, so0, so1, sa0, sa1);
}
static __global__ void __launch_bounds__(kMaxBlock, 1)
    prim_unary_bf16(unsigned short *out, const unsigned short *a, int op, float alpha, float beta,
                    long long M, long long N, long long so0, long long so1, long long sa0,
                    long long sa1, long long oo, long long oa) {
  prim_unary16_run<BF16Bits>(out + oo, a + oa, op, alpha, beta, M, N, so0, so1, sa0, sa1);
}
/* prim_binary_<16>(out, a, b, op, M, N, so0, so1, sa0, sa1, sb0, sb1, oo, oa, ob)  ELEM */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    prim_binary_f16(unsigned short *out, const unsigned short *a, const unsigned short *b, int op,
                    long long M, long long N, long long so0, long long so1, long long sa0,
                    long long sa1, long long sb0, long long sb1, long long oo, long long oa,
                    long long ob) {
  prim_binary16_run<F16Bits>(out + oo, a + oa, b + ob, op, M, N, so0, so1, sa0, sa1, sb0, sb1);
}
static __global__ void __launch_bounds__(kMaxBlock, 1)
    prim_binary_bf16(unsigned short *out, const unsigned short *a, const unsigned short *b, int op,
                     long long M, long long N, long long so0, long long so1, long long sa0,
                     long long sa1, long long sb0, long long sb1, long long oo, long long oa,
                     long long ob) {
  prim_binary16_run<BF16Bits>(out + oo, a + oa, b + ob, op, M, N, so0, so1, sa0, sa1, sb0, sb1);
}
/* Eight 2-byte elements of a row at a 2-byte aligned address p, as one
 * 16-byte vector: the aligned 16-byte words around them (one, or two when p
 * is not 16-byte aligned; the caller makes sure both are inside the
 * operand), shifted down by p's offset. */
__device__ __forceinline__ uint4 load8_unaligned16(const unsigned short *p) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  const unsigned off = static_cast<unsigned>(addr & 15u);
  const uint4 *base = reinterpret_cast<const uint4 *>(addr - off);
  const uint4 u0 = __ldg(base);
  if (off == 0)
    return u0;
  const uint4 u1 = __ldg(base + 1);
  const uint32_t x[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
  uint32_t w[5];
  switch (off >> 2) { /* the first word holding an element; constant indices, no local array */
  case 0:
    w[0] = x[0], w[1] = x[1], w[2] = x[2], w[3] = x[3], w[4] = x[4];
    break;
  case 1:
    w[0] = x[1], w[1] = x[2], w[2] = x[3], w[3] = x[4], w[4] = x[5];
    break;
  case 2:
    w[0] = x[2], w[1] = x[3], w[2] = x[4], w[3] = x[5], w[4] = x[6];
    break;
  default:
    w[0] = x[3], w[1] = x[4], w[2] = x[5], w[3] = x[6], w[4] = x[7];
    break;
  }
  if (off & 2u) /* starts mid-word: every word takes the high half of one, the low of the next */
    return make_uint4(__funnelshift_r(w[0], w[1], 16), __funnelshift_r(w[1], w[2], 16),
                      __funnelshift_r(w[2], w[3], 16), __funnelshift_r(w[3], w[4], 16));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/* The padded copy in 16-byte stores: chunk q of row i is out[i, 8q .. 8q+8).
 * A chunk inside the row's data, on a row other than the first and the last
 * (whose aligned neighbourhood may fall outside the operand), is loaded by
 * load8_unaligned16; the others element by element, zeros past cols. */
template <class Index>
__device__ __forceinline__ void pad_rows16_vec(unsigned short *out, const unsigned short *in,
                                               Index rows, Index cols, Index ld) {
  const Index per_row = ld / 8, total = rows * per_row;
  for (Index c = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; c < total;
       c += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index i = c / per_row, j0 = (c - i * per_row) * 8;
    const unsigned short *src = in + static_cast<long long>(i) * cols + j0;
    uint4 v;
    if (j0 + 8 <= cols && i > 0 && i + 1 < rows) {
      v = load8_unaligned16(src);
    } else {
      unsigned short e[8];
#pragma unroll
      for (int k = 0; k < 8; ++k)
        e[k] = j0 + k < cols ? src[k] : (unsigned short)0;
      v = make_uint4(e[0] | (uint32_t)e[1] << 16, e[2] | (uint32_t)e[3] << 16,
                     e[4] | (uint32_t)e[5] << 16, e[6] | (uint32_t)e[7] << 16);
    }
    *reinterpret_cast<uint4 *>(out + static_cast<long long>(i) * ld + j0) = v;
  }
}

/* prim_pad_rows_<16>(out, in, rows, cols, ld_out)                           ELEM
 * The GEMM core's padded operands (ld a multiple of 8, out 16-byte aligned)
 * take the 16-byte path: 2-byte loads and stores moved 1.5 TB/s on an H200
 * (32 MiB in 43 us under ncu), a third of its copy bandwidth. */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    prim_pad_rows16(unsigned short *out, const unsigned short *in, long long rows, long long cols,
                    long long ld) {
  if (ld % 8 == 0 && (reinterpret_cast<uintptr_t>(out) & 15u) == 0) {
    if (rows * (ld / 8) < (long long)UINT_MAX - (long long)gridDim.x * blockDim.x)
      pad_rows16_vec<unsigned>(out, in, (unsigned)rows, (unsigned)cols, (unsigned)ld);
    else
      pad_rows16_vec<long long>(out, in, rows, cols, ld);
    return;
  }
  tile_walk(
      rows, ld, [&](long long i, long long j) { return j < cols ? (float)in[i * cols + j] : 0.0f; },
      [&](long long i, long long j, float x) { out[i * ld + j] = (unsigned short)x; });
}

/* prim_channel_<dt>(out, a, v0, v1, v2, v3, op, total, inner, K, eps)      ELEM
 * The per-channel step of a convolution's output: c = (i / inner) % K. */
template <class Load, class Store, class T>
__device__ __forceinline__ void
prim_channel_run(T *out, const T *a, const T *v0, const T *v1, const T *v2, const T *v3, int op,
                 long long total, long long inner, long long K, float eps, Load load, Store store) {
  for (long long i = grid_thread_index(); i < total; i += grid_thread_count()) {
    const long long c = (i / inner) % K;
    const float x = load(a[i]);
    const float v = op == FP_CHAN_BN
                        ? fp_bn(x, load(v0[c]), load(v1[c]), load(v2[c]), load(v3[c]), eps)
                        : x + load(v0[c]);
    out[i] = store(v);
  }
}
static __global__ void __launch_bounds__(kMaxBlock, 1)
    prim_channel(float *out, const float *a, const float *v0, const float *v1, const float *v2,
                 const float *v3, int op, long long total, long long inner, long long K,
                 float eps) {
  prim_channel_run(
      out, a, v0, v1, v2, v3, op, total, inner, K, eps, [](float v) { return v; },
      [](float v) { return v; });
}
static __global__ void __launch_bounds__(kMaxBlock, 1)
    prim_channel_f16(unsigned short *out, const unsigned short *a, const unsigned short *v0,
                     const unsigned short *v1, const unsigned short *v2, const unsigned short *v3,
                     int op, long long total, long long inner, long long K, float eps) {
  prim_channel_run(
      out, a, v0, v1, v2, v3, op, total, inner, K, eps,
      [](unsigned short h) { return fp_f16_bits_to_f32(h); },
      [](float v) { return (unsigned short)fp_f32_to_f16_bits(v); });
}
static __global__ void __launch_bounds__(kMaxBlock, 1)
    prim_channel_bf16(unsigned short *out, const unsigned short *a, const unsigned short *v0,
                      const unsigned short *v1, const unsigned short *v2, const unsigned short *v3,
                      int op, long long total, long long inner, long long K, float eps) {
  prim_channel_run(
      out, a, v0, v1, v2, v3, op, total, inner, K, eps,
      [](unsigned short h) { return fp_bf16_bits_to_f32(h); },
      [](float v) { return (unsigned short)fp_f32_to_bf16_bits(v); });
}

extern "C" void fp_cuda_register_prim(const void *table[FPK_COUNT]) {
  table[FPK_fill_uniform_f16] = reinterpret_cast<const void *>(&fill_uniform_f16);
  table[FPK_fill_uniform_bf16] = reinterpret_cast<const void *>(&fill_uniform_bf16);
  table[FPK_fill_bits_u32] = reinterpret_cast<const void *>(&fill_bits_u32);
  table[FPK_fill_bits_u8] = reinterpret_cast<const void *>(&fill_bits_u8);
  table[FPK_prim_unary_f16] = reinterpret_cast<const void *>(&prim_unary_f16);
  table[FPK_prim_unary_bf16] = reinterpret_cast<const void *>(&prim_unary_bf16);
  table[FPK_prim_binary_f16] = reinterpret_cast<const void *>(&prim_binary_f16);
  table[FPK_prim_binary_bf16] = reinterpret_cast<const void *>(&prim_binary_bf16);
  table[FPK_prim_pad_rows_f16] = reinterpret_cast<const void *>(&prim_pad_rows16);
  table[FPK_prim_pad_rows_bf16] = reinterpret_cast<const void *>(&prim_pad_rows16);
  table[FPK_prim_channel] = reinterpret_cast<const void *>(&prim_channel);
  table[FPK_prim_channel_f16] = reinterpret_cast<const void *>(&prim_channel_f16);
  table[FPK_prim_channel_bf16] = reinterpret_cast<const void *>(&prim_channel_bf16);
  table[FPK_fill_uniform_f32] = reinterpret_cast<const void *>(&fill_uniform_f32);
  table[FPK_prim_unary] = reinterpret_cast<const void *>(&prim_unary);
  table[FPK_prim_binary] = reinterpret_cast<const void *>(&prim_binary);
  table[FPK_prim_reduce_rows] = reinterpret_cast<const void *>(&prim_reduce_rows);
  table[FPK_prim_dropout] = reinterpret_cast<const void *>(&prim_dropout);
}

extern "C" void fp_cuda_register_tuning_prim(fp_cuda_tuning table[FPK_COUNT]) {
  (void)table; /* one build per kernel */
}
