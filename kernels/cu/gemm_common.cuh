/* fuseport CUDA GEMM core: what every main loop shares.
 *
 * The core is one engine with three swappable parts, as CUTLASS separates
 * them (STYLE.md, "Examples to follow for the GEMM core"):
 *   - a main loop per architecture: gemm_sm90.cu (TMA + wgmma, warp
 *     specialised), gemm_sm80_mainloop.cuh (cp.async + ldmatrix +
 *     mma.sync), gemm_simt.cu (float32 on CUDA cores, any alignment; the
 *     skinny path for M <= 16);
 *   - an operand loader (today: plain row-major tiles; the compression
 *     family's dequantising loader and convolution's im2col gather plug in
 *     where the main loops fill shared memory);
 *   - an epilogue functor, applied to the float accumulators in registers
 *     before the only store (this file).
 * The host side (gemm.cu) picks a path and a tile configuration with the
 * plain-C planner (backend/cuda/gemm_plan.h) and launches.
 *
 * Semantics of every kernel: kernels/kernels.def, family gemm.
 */
#ifndef FUSEPORT_GEMM_COMMON_CUH
#define FUSEPORT_GEMM_COMMON_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/cuda_kernels.h"
#include "cuda/gemm_plan.h"
#include "fp_device_common.h"

namespace fpgemm {

/* ---- storage types ----------------------------------------------------------
 * Stored values are half, __nv_bfloat16 or float; arithmetic is float. The
 * conversions to storage round to nearest even, as fp_f32_to_f16_bits does
 * on the host (the reference's view of stored values). */
template <class T> struct Storage;

template <> struct Storage<float> {
  static constexpr int kDtype = 0; /* FP_F32 */
  __device__ __forceinline__ static float to_float(float v) { return v; }
  __device__ __forceinline__ static float from_float(float v) { return v; }
};
template <> struct Storage<__half> {
  static constexpr int kDtype = 1; /* FP_F16 */
  __device__ __forceinline__ static float to_float(__half v) { return __half2float(v); }
  __device__ __forceinline__ static __half from_float(float v) { return __float2half_rn(v); }
};
template <> struct Storage<__nv_bfloat16> {
  static constexpr int kDtype = 2; /* FP_BF16 */
  __device__ __forceinline__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ __forceinline__ static __nv_bfloat16 from_float(float v) {
    return __float2bfloat16_rn(v);
  }
};

/* A convolution's input as the GEMM's A operand, never materialised (the
 * im2col loader of the SM90 path): x is NHWC [N, H, W, C] with C % 64 == 0;
 * GEMM row m is output pixel (n, p, q) (m = (n P + p) Q + q), column kk is
 * tap (r, s), channel c (kk = (r S + s) C + c), the value
 * x[n, p stride - pad + r dil, q stride - pad + s dil, c] or zero outside
 * the image. M = N*P*Q, K = R*S*C; conv.cu builds it (run_view). */
struct Im2col {
  long long N, H, W, C;
  int R, S, P, Q, stride, pad, dil;
};

/* ---- the problem ---------------------------------------------------------------
 * The arguments of gemm_<dt> (kernels.def) as the launcher hands them to a
 * path: pointers already resolved, none as nullptr. */
struct Problem {
  void *out;
  const void *a, *b, *bias, *add;
  void *ws; /* split-K workspace (split_workspace_bytes), or nullptr */
  unsigned long long ws_bytes;
  long long M, N, K;  /* out is [M, N]; B has N columns, 2N when paired */
  long long lda, ldb; /* leading dimensions of a and b, in elements */
  int epilogue;       /* FP_EPI_*, or FP_CONV_EPI_BN (a convolution's GEMM view) */
  int trans_b;        /* b is [N(2N), K] */
  int dtype;          /* FP_F32, FP_F16, FP_BF16 */
  /* FP_CONV_EPI_BN only: mean, var, gamma, beta, each [N], and eps. Not a
   * gemm_<dt> epilogue: conv.cu's 1x1 convolutions run as plain GEMMs
   * (run_view, gemm.cu) and bring their batch-norm along. */
  const void *bn[4] = {nullptr, nullptr, nullptr, nullptr};
  float eps = 0.0f;
  /* A convolution's implicit GEMM: A is the im2col of the input at `a`
   * (trans_b, unpaired, unsplit; the SM90 path only). nullptr: A is a
   * matrix. */
  const Im2col *im2col = nullptr;
};

/* The planner's view of the launching device (gemm.cu). */
fp_gemm_device device_of(const fp_cuda_gemm_env *env);

/* The GEMM core seen from another family (gemm.cu): runs p, which has an
 * unpaired epilogue, on env's device and stream with the path and
 * configuration the planner picks for req (fp_conv_gemm_request's, with
 * no_split where p has no workspace) under `force`, as gemm_<dt> would
 * (FUSEPORT_CUDA_GEMM_TUNE included); a split plan's workspace is p.ws,
 * which the caller's recipe sized from the same plan. *planned false: no
 * path runs p here (rows a tensor-core path cannot load...), nothing was
 * launched, and the caller uses its own kernels. conv.cu runs its 1x1
 * convolutions this way, and its NHWC ones through TMA's im2col mode
 * (p.im2col, req.im2col). env->conv_cfg >= 0 (FUSEPORT_CUDA_CONV_CFG)
 * forces that row of the path's table, unsplit, where it runs p. msg: why
 * a tuning run failed (empty otherwise). */
cudaError_t run_view(const Problem &p, const fp_gemm_request &req, fp_gemm_path force,
                     const fp_cuda_gemm_env *env, bool *planned, fp_gemm_plan *plan, char *msg,
                     size_t msglen);

/* Whether a path runs this epilogue kind: gemm_<dt>'s FP_EPI_* and the
 * convolutions' batch-norm (unpaired, EpiLinear). */
__host__ __device__ inline bool epilogue_known(int e) {
  return (e >= 0 && e < FP_EPI_COUNT) || e == FP_CONV_EPI_BN;
}

/* The arguments of gemm2_<dt>: out[M, P] = round(a @ B)[M, N] @ d[N, P]. */
struct Problem2 {
  void *out;
  const void *a, *b, *d;
  void *ws; /* the intermediate [M, N] when it does not stay on chip, or nullptr */
  unsigned long long ws_bytes;
  long long M, N, K, P;
  long long lda, ldb, ldd;
  int trans_b;
  int dtype;
};

/* The arguments of dw_packed_<dt> (kernels.def): out[COUT, CIN] =
 * dy^T @ x', x' dequantised from packed words in the operand loader. */
struct ProblemDw {
  void *out;
  const void *dy;        /* bf16 [K, COUT], leading dimension lddy */
  const uint32_t *words; /* [K, G * 8 * bits] */
  const void *scale;     /* bf16 [K, G] */
  const void *mins;      /* bf16 [K, G] */
  void *ws;              /* split-K workspace, or nullptr */
  unsigned long long ws_bytes;
  long long K, COUT, CIN, lddy;
  int bits;
  int dtype; /* of out: FP_F32 or FP_BF16 */
};

/* A tile configuration as the planner chose it (backend/cuda/gemm_plan.h):
 * the path's kernels are instantiated for the configurations of its table
 * only, and `index` says which row. */
struct Config {
  int path;  /* fp_gemm_path */
  int index; /* row of the path's configuration table */
  int bm, bn, bk, stages, threads;
  int split_k; /* 1: none; > 1: K split over that many blocks per tile */
  int cluster; /* blocks per thread-block cluster along M (1: none) */
};

/* ---- epilogues ----------------------------------------------------------------
 * An epilogue is a struct with host-built Params (passed to the kernel by
 * value, inside its argument struct) and a device operation on accumulator
 * values. A main loop calls it on each accumulator pair it holds, for
 * adjacent columns (col, col + 1) of one row, col even, after the last
 * k-step (and after the split-K reduction), and stores what it returns,
 * rounded to T, to out[row, col] and out[row, col + 1] where col + 1 < N:
 *
 *   unpaired (kPaired false):
 *     float2 Epi::apply(const Params&, long long row, long long col,
 *                       float2 acc, bool second_valid)
 *   paired (kPaired true): the tile's B columns hold the left block [n0, ..)
 *     and the right block [N + n0, ..) side by side, so each thread holds
 *     acc[row, col] and acc[row, N + col] in registers:
 *     float2 Epi::apply(const Params&, long long row, long long col,
 *                       float2 left, float2 right, bool second_valid)
 *
 * `second_valid` is false when col + 1 == N (the pair's second column is
 * past the edge: do not read operands there). row < M and col < N always.
 * The formulas are fp_device_common.h's (fp_epilogue_*), shared with the CPU
 * and OpenCL backends. */

/* Inference batch-norm on the tensor-core and SIMT paths: fp_bn's
 * (v - mean) / sqrt(var + eps) * gamma + beta with the channel's factor
 * gamma / sqrt(var + eps) from one rsqrtf (the SFU) instead of an IEEE
 * square root and division per element, ~10 instructions an element
 * against ~40 (on an H200, 2026-11-28, conv_bn 1x1 ran at 0.3-0.9x of
 * conv_add's speed with fp_bn). Within a few ulp of fp_bn, inside the
 * convolutions' tolerance (ops/conv.c: 20 ulp and more in f32). */
__device__ __forceinline__ float bn_apply(float v, float mean, float var, float gamma, float beta,
                                          float eps) {
  return fmaf(v - mean, gamma * rsqrtf(var + eps), beta);
}

/* NONE, BIAS, ADD, RELU, BIAS_RELU, ADD_RELU and the convolutions' BN: a
 * runtime kind (uniform across the kernel, so its branches cost nothing)
 * rather than seven instantiations. */
template <class T> struct EpiLinear {
  static constexpr bool kPaired = false;
  struct Params {
    int kind;       /* FP_EPI_NONE .. FP_EPI_ADD_RELU, FP_CONV_EPI_BN */
    const T *bias;  /* [N], or nullptr */
    const T *add;   /* [M, N] row-major (leading dimension N), or nullptr */
    long long n;    /* N */
    const T *bn[4]; /* BN: mean, var, gamma, beta [N] (nullptr otherwise) */
    float eps;      /* BN */
  };
  __device__ __forceinline__ static float bn_at(const Params &p, long long col, float acc) {
    return bn_apply(acc, Storage<T>::to_float(p.bn[0][col]), Storage<T>::to_float(p.bn[1][col]),
                    Storage<T>::to_float(p.bn[2][col]), Storage<T>::to_float(p.bn[3][col]), p.eps);
  }
  __device__ __forceinline__ static float2 apply(const Params &p, long long row, long long col,
                                                 float2 acc, bool second_valid) {
    if (p.kind == FP_CONV_EPI_BN)
      return make_float2(bn_at(p, col, acc.x), second_valid ? bn_at(p, col + 1, acc.y) : 0.0f);
    float2 extra = make_float2(0.0f, 0.0f);
    if (FP_EPI_READS_BIAS(p.kind)) {
      extra.x = Storage<T>::to_float(p.bias[col]);
      if (second_valid)
        extra.y = Storage<T>::to_float(p.bias[col + 1]);
    } else if (FP_EPI_READS_ADD(p.kind)) {
      const T *src = p.add + row * p.n + col;
      extra.x = Storage<T>::to_float(src[0]);
      if (second_valid)
        extra.y = Storage<T>::to_float(src[1]);
    }
    return make_float2(fp_epilogue_unpaired(p.kind, acc.x, extra.x),
                       fp_epilogue_unpaired(p.kind, acc.y, extra.y));
  }
};

/* SPLIT_ACT: sigmoid(left) * tanh(right) (the split-activation notebook). */
template <class T> struct EpiSplitAct {
  static constexpr bool kPaired = true;
  struct Params {
    long long n;
  };
  __device__ __forceinline__ static float2 apply(const Params &, long long, long long, float2 left,
                                                 float2 right, bool) {
    return make_float2(fp_epilogue_paired(FP_EPI_SPLIT_ACT, left.x, right.x, 0.0f, 0.0f),
                       fp_epilogue_paired(FP_EPI_SPLIT_ACT, left.y, right.y, 0.0f, 0.0f));
  }
};

/* GEGLU: (left + bias[col]) * gelu_erf(right + bias[N + col]). */
template <class T> struct EpiGeglu {
  static constexpr bool kPaired = true;
  struct Params {
    const T *bias; /* [2N] */
    long long n;
  };
  __device__ __forceinline__ static float2 apply(const Params &p, long long, long long col,
                                                 float2 left, float2 right, bool second_valid) {
    float bl0 = Storage<T>::to_float(p.bias[col]);
    float br0 = Storage<T>::to_float(p.bias[p.n + col]);
    float bl1 = 0.0f, br1 = 0.0f;
    if (second_valid) {
      bl1 = Storage<T>::to_float(p.bias[col + 1]);
      br1 = Storage<T>::to_float(p.bias[p.n + col + 1]);
    }
    return make_float2(fp_epilogue_paired(FP_EPI_GEGLU, left.x, right.x, bl0, br0),
                       fp_epilogue_paired(FP_EPI_GEGLU, left.y, right.y, bl1, br1));
  }
};

/* Host side: a kernel's dynamic shared memory beyond the default 48 KiB
 * must be opted into before its launch. */
template <class K> cudaError_t set_smem(K kernel, int bytes) {
  if (bytes <= 48 * 1024)
    return cudaSuccess;
  return cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel),
                              cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

/* Host side: an epilogue's Params from the launch's Problem (every path's
 * launcher fills its kernel arguments this way). */
template <class T, class Epi> struct EpiParamsOf;
template <class T> struct EpiParamsOf<T, EpiLinear<T>> {
  static typename EpiLinear<T>::Params make(const Problem &p) {
    return {p.epilogue,
            static_cast<const T *>(p.bias),
            static_cast<const T *>(p.add),
            p.N,
            {static_cast<const T *>(p.bn[0]), static_cast<const T *>(p.bn[1]),
             static_cast<const T *>(p.bn[2]), static_cast<const T *>(p.bn[3])},
            p.eps};
  }
};
template <class T> struct EpiParamsOf<T, EpiSplitAct<T>> {
  static typename EpiSplitAct<T>::Params make(const Problem &p) { return {p.N}; }
};
template <class T> struct EpiParamsOf<T, EpiGeglu<T>> {
  static typename EpiGeglu<T>::Params make(const Problem &p) {
    return {static_cast<const T *>(p.bias), p.N};
  }
};

/* Stores an epilogue's pair at out[row, col] (and col + 1 when
 * second_valid), as one 2-element store where the address allows. */
template <class T>
__device__ __forceinline__ void store_pair(T *out, long long n, long long row, long long col,
                                           float2 v, bool second_valid) {
  T *dst = out + row * n + col;
  const T x = Storage<T>::from_float(v.x);
  if (second_valid) {
    const T y = Storage<T>::from_float(v.y);
    if ((reinterpret_cast<uintptr_t>(dst) & (2 * sizeof(T) - 1)) == 0) {
      struct alignas(2 * sizeof(T)) Pair {
        T x, y;
      };
      *reinterpret_cast<Pair *>(dst) = Pair{x, y};
    } else {
      dst[0] = x;
      dst[1] = y;
    }
  } else {
    dst[0] = x;
  }
}

/* ---- split-K workspace ------------------------------------------------------------
 * With split_k > 1, block (tile t, split s) computes the partial product of
 * its share of K and writes it, as float, to slice s of tile t; then it
 * increments tile t's arrival counter. The block that arrives last sums the
 * slices in order 0..split_k-1 (so the result does not depend on which
 * block came last), applies the epilogue, stores, and resets the counter to
 * 0 for the next launch. The workspace is zeroed once when the plan is
 * created (fp_rc_ws_zeroed); every launch leaves it zeroed again.
 *
 *   [tiles counters, uint32, padded to 256 bytes][split_k * tiles * bm * bn floats]
 *
 * A tile's slice is bm * bn floats, row-major within the tile (the sm90
 * GEMM's in its threads' fragment order instead). dw_packed
 * appends tiles departure counters (split_counters_bytes(tiles) more) for
 * its parallel reduction: every block of a tile sums a share once all have
 * arrived, and the last to leave resets both counters. */
__host__ __device__ __forceinline__ unsigned long long split_counters_bytes(long long tiles) {
  return ((unsigned long long)tiles * 4ull + 255ull) / 256ull * 256ull;
}
__host__ __device__ __forceinline__ unsigned long long
split_workspace_bytes(long long tiles, int split_k, int bm, int bn) {
  return split_k <= 1 ? 0ull
                      : split_counters_bytes(tiles) +
                            (unsigned long long)split_k * (unsigned long long)tiles *
                                (unsigned long long)bm * (unsigned long long)bn * 4ull;
}
__device__ __forceinline__ unsigned *split_counters(void *ws) {
  return reinterpret_cast<unsigned *>(ws);
}
__device__ __forceinline__ float *split_slice(void *ws, long long tiles, long long tile, int split,
                                              int bm, int bn) {
  float *base =
      reinterpret_cast<float *>(reinterpret_cast<char *>(ws) + split_counters_bytes(tiles));
  return base + ((long long)split * tiles + tile) * (long long)bm * bn;
}
__device__ __forceinline__ unsigned *split_departures(void *ws, long long tiles, int split_k,
                                                      int bm, int bn) {
  return reinterpret_cast<unsigned *>(split_slice(ws, tiles, 0, split_k, bm, bn));
}

/* Host side: copies a path's kernel stubs into out (at most cap), for
 * loading the family's module; returns how many it copied. */
template <int N> int copy_stubs(const void *const (&mine)[N], const void **out, int cap) {
  int n = 0;
  for (const void *s : mine)
    if (n < cap)
      out[n++] = s;
  return n;
}

/* ---- the dequantising loader (dw_packed) ----------------------------------------------
 * x'(k, n) = bf16(fma(q, scale, min)) (fp_dequant_value; kernels.def,
 * family compress). The code goes to float by the exponent trick: the bits
 * 0x4B000000 | q are the float 2^23 + q, so one subtraction gives q exactly
 * (an I2F runs at a quarter of the FMA rate). */
__device__ __forceinline__ float dequant_code(uint32_t q, float scale, float mn) {
  const float qf = __uint_as_float(0x4B000000u | q) - 8388608.0f;
  return __fmaf_rn(qf, scale, mn);
}

/* ---- the split-K reduction of a tile, for kernels whose threads do not
 * hold the accumulators in one fixed layout (dw_packed): each block has
 * written its partial tile to its slice; this returns true in the block that
 * arrived last (all `nthreads` threads of `bar`), which then sums the
 * slices in order. tid < nthreads; `flag` is a shared int. */
template <class Sync>
__device__ __forceinline__ bool split_arrive_last(void *ws, long long tiles, long long tile,
                                                  int split_k, int tid, volatile int *flag,
                                                  Sync sync) {
  __threadfence(); /* this block's slice is visible before its arrival */
  sync();
  if (tid == 0) {
    const unsigned old = atomicAdd(split_counters(ws) + tile, 1u);
    const bool last = old == static_cast<unsigned>(split_k - 1);
    if (last)
      split_counters(ws)[tile] = 0u; /* left zeroed for the next launch */
    *flag = last ? 1 : 0;
  }
  sync();
  const bool last = *flag != 0;
  if (last)
    __threadfence(); /* the other slices are read after their writers' fences */
  return last;
}

} // namespace fpgemm

#endif
