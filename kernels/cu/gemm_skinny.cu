/* fuseport CUDA GEMM core, path SKINNY: M <= 16 (decode-like GEMMs), f32,
 * f16 and bf16, every epilogue, both B layouts, any alignment. Such a GEMM
 * is a few matrix-vector products: it moves B once and does M FMAs per
 * element, so it runs at memory speed when enough bytes are in flight.
 * Semantics: kernels.def, family gemm; the interface: gemm_common.cuh; the
 * rows: gemm_skinny_configs.h; the tensor-core kernel: gemm_skinny_tc.cuh,
 * a part of this file, included in place.
 *
 * Two kinds of kernels:
 *  - tensor cores (rows of STAGES >= 2; f16 and bf16 with 16-byte aligned
 *    operands): cp.async stages, ldmatrix and mma.sync m16n8k16 with A
 *    padded to 16 rows (see "f16 / bf16 on tensor cores", gemm_skinny_tc.cuh);
 *  - CUDA cores (f32, other alignments, and rows of STAGES 1), described
 *    next. Rows of A are padded to MT = 1, 4, 8 or 16 (an instantiation
 *    each); the accumulators are float, per thread MT x (its B elements).
 *
 * Row-major B [K, NB]: a block owns BN B-columns (a paired block: BN/2 left
 * from n0, BN/2 right from N + n0). Its threads form KP = THREADS / LN rows
 * of LN = BN / V lanes, V = 16 / sizeof(T) columns a lane (one 16-byte
 * load). Per pass over BK rows of K each thread first issues its U = BK / KP
 * 16-byte loads of B (the bytes in flight), then the block stages A's
 * [MT, BK] slice, transposed and in float, in shared memory, and the thread
 * multiplies. At the end the KP partial sums are added: by shuffles among
 * the lanes of a warp, then across warps in shared memory in a fixed order.
 *
 * trans_b B [NB, K] (W's rows contiguous): a warp per output column (CPW
 * columns at a time, sharing A's loads), lanes along K in 16-byte vectors,
 * several vectors per lane in flight; a butterfly shuffle sums the lanes.
 *
 * Split-K over blocks (grid.y = split_k, K cut in units of BK, trans_b
 * 32 * V) when the column tiles alone do not fill the GPU: gemm_common.cuh's
 * serial scheme, with 16 x BN slices (the last block zeroes them as it sums
 * them, leaving the workspace zeroed).
 * Any alignment: 16-byte loads when a and b are 16-byte aligned and lda,
 * ldb multiples of V (and N, for a paired row-major B's right half);
 * otherwise, and for vectors crossing an edge, predicated element loads.
 */
#include <limits.h>
#include <stdint.h> /* gemm_common.cuh uses uintptr_t */

#include "gemm_common.cuh"
#include "gemm_skinny_configs.h"
#include "mma_sm80.cuh"

namespace fpgemm {

cudaError_t skinny_run(const Problem &p, const Config &c, cudaStream_t stream);
int skinny_kernel_stubs(const void **out, int cap);

namespace {

/* ---- 16-byte vectors of T ----------------------------------------------------- */

template <class T> struct Vec { static constexpr int V = 16 / (int)sizeof(T); };

/* V elements of T at p (`valid` of them, zeros after) as packed raw bits. */
template <class T, bool VEC> __device__ __forceinline__ uint4 load_raw(const T *p, int valid) {
  constexpr int V = Vec<T>::V;
  if (VEC && valid == V)
    return __ldg(reinterpret_cast<const uint4 *>(p));
  union {
    uint4 u;
    T e[V];
  } r;
  r.u = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int i = 0; i < V; ++i)
    if (i < valid)
      r.e[i] = p[i];
  return r.u;
}

template <class T> __device__ __forceinline__ void unpack(const uint4 &r, float (&f)[Vec<T>::V]);
template <> __device__ __forceinline__ void unpack<float>(const uint4 &r, float (&f)[4]) {
  f[0] = __uint_as_float(r.x);
  f[1] = __uint_as_float(r.y);
  f[2] = __uint_as_float(r.z);
  f[3] = __uint_as_float(r.w);
}
template <> __device__ __forceinline__ void unpack<__half>(const uint4 &r, float (&f)[8]) {
  const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __half22float2(*reinterpret_cast<const __half2 *>(&w[i]));
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}
template <> __device__ __forceinline__ void unpack<__nv_bfloat16>(const uint4 &r, float (&f)[8]) {
  const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&w[i]));
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

__device__ __forceinline__ int clampn(long long n, int v) {
  return n <= 0 ? 0 : (n >= v ? v : (int)n);
}

/* ---- shared tail: split-K and the epilogue from res[MT][BN] ---------------------- */

template <class T, class Epi> struct SkArgs {
  T *out;
  const T *a, *b;
  void *ws;
  long long M, N, K, lda, ldb;
  int tiles_n, split_k, vec;
  typename Epi::Params ep;
};

/* res (shared, [MT][BN] floats, complete after a barrier) holds the block's
 * (partial) product; reduces over splits if any, then applies the epilogue
 * and stores. */
template <class T, class Epi, int MT, int BN, int THREADS, bool PAIRED>
__device__ __forceinline__ void finish(float *res, const SkArgs<T, Epi> &args, long long n0) {
  constexpr int H = PAIRED ? BN / 2 : BN;
  const int tid = threadIdx.x;
  const int rows = (int)args.M; /* <= MT */
  if (args.split_k > 1) {
    __shared__ int s_last;
    const long long tiles = args.tiles_n, tile = blockIdx.x;
    float *mine = split_slice(args.ws, tiles, tile, blockIdx.y, 16, BN);
    for (int e = tid; e < rows * BN; e += THREADS)
      __stcg(mine + e, res[e]);
    __threadfence();
    __syncthreads();
    if (tid == 0)
      s_last = atomicAdd(split_counters(args.ws) + tile, 1u) == (unsigned)(args.split_k - 1);
    __syncthreads();
    if (!s_last)
      return;
    __threadfence();
    for (int e = tid; e < rows * BN; e += THREADS) {
      float sum = 0.0f;
      for (int s = 0; s < args.split_k; ++s) {
        float *q = split_slice(args.ws, tiles, tile, s, 16, BN) + e;
        const float v = __ldcg(q);
        __stcg(q, 0.0f); /* the workspace is left zeroed */
        sum = s == 0 ? v : sum + v;
      }
      res[e] = sum;
    }
    if (tid == 0)
      split_counters(args.ws)[tile] = 0u;
    __syncthreads();
  }
  for (int q = tid; q < rows * (H / 2); q += THREADS) {
    const int m = q / (H / 2), c = 2 * (q % (H / 2));
    const long long col = n0 + c;
    if (col >= args.N)
      continue;
    const bool second = col + 1 < args.N;
    const float2 left = make_float2(res[m * BN + c], res[m * BN + c + 1]);
    float2 v;
    if constexpr (Epi::kPaired)
      v = Epi::apply(args.ep, m, col, left,
                     make_float2(res[m * BN + H + c], res[m * BN + H + c + 1]), second);
    else
      v = Epi::apply(args.ep, m, col, left, second);
    store_pair(args.out, args.N, (long long)m, col, v, second);
  }
}

/* The block's K range for its split: units of `unit` elements. */
__device__ __forceinline__ void k_range(long long K, int split, int unit, long long &kb,
                                        long long &ke) {
  if (split <= 1) {
    kb = 0;
    ke = K;
    return;
  }
  const long long units = (K + unit - 1) / unit;
  const long long per = (units + split - 1) / split;
  kb = blockIdx.y * per * unit;
  ke = kb + per * unit;
  if (kb > K)
    kb = K;
  if (ke > K)
    ke = K;
}

/* ---- row-major B ----------------------------------------------------------------- */

template <class T, int MT, int BN, int BK, int THREADS, bool PAIRED> struct RmShape {
  static constexpr int V = Vec<T>::V;
  static constexpr int LN = BN / V;       /* lanes along N */
  static constexpr int KP = THREADS / LN; /* rows of K in parallel */
  static constexpr int U = BK / KP;       /* 16-byte loads a thread a pass */
  static constexpr int NW = THREADS / 32;
  static constexpr int H = PAIRED ? BN / 2 : BN;
  static_assert(BN % V == 0 && 32 % LN == 0 && THREADS % LN == 0, "lanes along N in a warp");
  static_assert(BK % KP == 0 && U >= 1, "rows a pass");
  static_assert(H % V == 0, "vectors do not straddle the halves");
};

template <class T, int MT, int BN, int BK, int THREADS, class Epi>
__global__ void __launch_bounds__(THREADS) skinny_rm_kernel(const SkArgs<T, Epi> args) {
  using Sh = RmShape<T, MT, BN, BK, THREADS, Epi::kPaired>;
  constexpr int V = Sh::V;
  extern __shared__ __align__(16) float fsmem[];
  const int tid = threadIdx.x;
  const int lc = tid % Sh::LN, kr = tid / Sh::LN;
  const long long n0 = (long long)blockIdx.x * Sh::H;
  const int c = lc * V, part = c >= Sh::H ? 1 : 0;
  const long long n = n0 + (c - part * Sh::H);
  const int cvalid = clampn(args.N - n, V);
  const T *bcol = args.b + (cvalid > 0 ? n + part * args.N : 0);
  long long kb, ke;
  k_range(args.K, args.split_k, BK, kb, ke);

  float acc[MT][V];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int v = 0; v < V; ++v)
      acc[m][v] = 0.0f;

  float *As = fsmem; /* [BK][MT] */
  for (long long k0 = kb; k0 < ke; k0 += BK) {
    uint4 raw[Sh::U];
#pragma unroll
    for (int u = 0; u < Sh::U; ++u) {
      const long long k = k0 + u * Sh::KP + kr;
      const int valid = k < ke ? cvalid : 0;
      const T *p = valid > 0 ? bcol + k * args.ldb : args.b;
      raw[u] = args.vec ? load_raw<T, true>(p, valid) : load_raw<T, false>(p, valid);
    }
    /* A's slice, transposed, while those loads fly */
    for (int e = tid; e < BK * MT; e += THREADS) {
      const int m = e / BK, kk = e % BK;
      const long long k = k0 + kk;
      As[kk * MT + m] =
          (m < args.M && k < ke) ? Storage<T>::to_float(args.a[m * args.lda + k]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < Sh::U; ++u) {
      float bv[V];
      unpack<T>(raw[u], bv);
      const float *ar = As + (u * Sh::KP + kr) * MT;
      float av[MT];
      if constexpr (MT % 4 == 0) {
#pragma unroll
        for (int m = 0; m < MT; m += 4) {
          const float4 t = *reinterpret_cast<const float4 *>(ar + m);
          av[m] = t.x;
          av[m + 1] = t.y;
          av[m + 2] = t.z;
          av[m + 3] = t.w;
        }
      } else {
#pragma unroll
        for (int m = 0; m < MT; ++m)
          av[m] = ar[m];
      }
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int v = 0; v < V; ++v)
          acc[m][v] = fmaf(av[m], bv[v], acc[m][v]);
    }
    __syncthreads();
  }

  /* sum the KP rows: lanes of a warp (same lc) by shuffles, then warps */
#pragma unroll
  for (int off = 16; off >= Sh::LN; off >>= 1)
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int v = 0; v < V; ++v)
        acc[m][v] += __shfl_xor_sync(0xffffffffu, acc[m][v], off);
  float *red = fsmem; /* [NW][MT][BN]; A's slice is dead (the loop ended on a barrier) */
  const int warp = tid >> 5, lane = tid & 31;
  if (lane < Sh::LN) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int v = 0; v < V; ++v)
        red[(warp * MT + m) * BN + c + v] = acc[m][v];
  }
  __syncthreads();
  for (int e = tid; e < MT * BN; e += THREADS) {
    float s = red[e];
    for (int w = 1; w < Sh::NW; ++w)
      s += red[w * MT * BN + e];
    red[e] = s;
  }
  __syncthreads();
  finish<T, Epi, MT, BN, THREADS, Epi::kPaired>(red, args, n0);
}

/* ---- trans_b ----------------------------------------------------------------------- */

template <class T, int MT> struct TbShape {
  static constexpr int V = Vec<T>::V;
  static constexpr int CPW = MT <= 4 ? 4 : 2; /* columns a warp at a time (A's loads shared) */
  /* 32*V-wide k steps in flight (registers: STEPS * (CPW + MT) 16-byte vectors) */
  static constexpr int STEPS = MT == 1 ? 4 : (MT <= 8 ? 2 : 1);
};

template <class T, int MT, bool VEC, class Epi>
__device__ __forceinline__ void tb_columns(const SkArgs<T, Epi> &args,
                                           const T *(&wrow)[TbShape<T, MT>::CPW],
                                           const bool (&wok)[TbShape<T, MT>::CPW], long long kb,
                                           long long ke, float (&acc)[MT][TbShape<T, MT>::CPW]) {
  using Sh = TbShape<T, MT>;
  constexpr int V = Sh::V, CPW = Sh::CPW;
  const int lane = threadIdx.x & 31;
  for (long long k0 = kb; k0 < ke; k0 += (long long)Sh::STEPS * 32 * V) {
    uint4 w[Sh::STEPS][CPW];
    uint4 a[Sh::STEPS][MT];
#pragma unroll
    for (int s = 0; s < Sh::STEPS; ++s) {
      const long long k = k0 + (long long)(s * 32 + lane) * V;
      const int kv = clampn(ke - k, V);
#pragma unroll
      for (int j = 0; j < CPW; ++j) {
        const int valid = wok[j] ? kv : 0;
        w[s][j] = load_raw<T, VEC>(valid > 0 ? wrow[j] + k : args.b, valid);
      }
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const int valid = m < args.M ? kv : 0;
        a[s][m] = load_raw<T, VEC>(valid > 0 ? args.a + m * args.lda + k : args.a, valid);
      }
    }
#pragma unroll
    for (int s = 0; s < Sh::STEPS; ++s)
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        float af[V];
        unpack<T>(a[s][m], af);
#pragma unroll
        for (int j = 0; j < CPW; ++j) {
          float wf[V];
          unpack<T>(w[s][j], wf);
#pragma unroll
          for (int v = 0; v < V; ++v)
            acc[m][j] = fmaf(af[v], wf[v], acc[m][j]);
        }
      }
  }
}

template <class T, int MT, int BN, int THREADS, class Epi>
__global__ void __launch_bounds__(THREADS) skinny_tb_kernel(const SkArgs<T, Epi> args) {
  using Sh = TbShape<T, MT>;
  constexpr int V = Sh::V, CPW = Sh::CPW, NW = THREADS / 32;
  constexpr int H = Epi::kPaired ? BN / 2 : BN;
  static_assert(BN % CPW == 0 && H % CPW == 0, "column groups do not straddle the halves");
  extern __shared__ __align__(16) float fsmem[];
  float *res = fsmem; /* [MT][BN] */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long n0 = (long long)blockIdx.x * H;
  long long kb, ke;
  k_range(args.K, args.split_k, 32 * V, kb, ke);

  for (int g = warp; g < BN / CPW; g += NW) {
    const T *wrow[CPW];
    bool wok[CPW];
#pragma unroll
    for (int j = 0; j < CPW; ++j) {
      const int tc = g * CPW + j, part = tc >= H ? 1 : 0;
      const long long n = n0 + (tc - part * H);
      wok[j] = n < args.N;
      wrow[j] = args.b + (wok[j] ? (n + part * args.N) * args.ldb : 0);
    }
    float acc[MT][CPW];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int j = 0; j < CPW; ++j)
        acc[m][j] = 0.0f;
    if (args.vec)
      tb_columns<T, MT, true>(args, wrow, wok, kb, ke, acc);
    else
      tb_columns<T, MT, false>(args, wrow, wok, kb, ke, acc);
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1)
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < CPW; ++j)
          acc[m][j] += __shfl_xor_sync(0xffffffffu, acc[m][j], off);
    if (lane == 0) {
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < CPW; ++j)
          res[m * BN + g * CPW + j] = acc[m][j];
    }
  }
  __syncthreads();
  finish<T, Epi, MT, BN, THREADS, Epi::kPaired>(res, args, n0);
}

/* ---- f16 / bf16 on tensor cores ---------------------------------------------------- */
/* TcShape, TcCopy, skinny_tc_kernel: gemm_skinny_tc.cuh, a part of this file. */
#include "gemm_skinny_tc.cuh"

/* ---- host side -------------------------------------------------------------------- */

inline bool al16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <int BN, int BK, int STAGES, int THREADS, int SMEM> struct SkRow {
  /* rows of two or more stages have the tensor-core kernel (f16, bf16) */
  static constexpr bool TC = STAGES >= 2;
  /* k rows a pass of the CUDA-core row-major kernel: a tensor-core row's
   * fallback takes half its BK (its own BK held too many 16-byte loads in
   * flight: registers spilled on sm_80) */
  static constexpr int LBK = TC ? BK / 2 : BK;
  /* shared memory of the CUDA-core kernels (rm: A's slice, then the warps'
   * partial sums; tb: res) */
  static constexpr int legacy_smem() {
    const int red = THREADS / 32 * 16 * BN * 4, stage = LBK * 16 * 4;
    return red > stage ? red : stage;
  }
  static constexpr int tc_smem() { return TC ? STAGES * (16 * BK + BK * BN) * 2 : 0; }
  /* shared memory of the row, the largest any of its kernels needs */
  static constexpr int smem_need() { return legacy_smem() > tc_smem() ? legacy_smem() : tc_smem(); }

  template <class T, class Epi>
  static cudaError_t make_args(const Problem &p, int split, SkArgs<T, Epi> &args) {
    constexpr int V = Vec<T>::V;
    constexpr int H = Epi::kPaired ? BN / 2 : BN;
    const long long tiles_n = (p.N + H - 1) / H;
    if (tiles_n > INT_MAX || split > 65535)
      return cudaErrorInvalidValue;
    if (split > 1 &&
        (p.ws == nullptr || p.ws_bytes < split_workspace_bytes(tiles_n, split, 16, BN)))
      return cudaErrorInvalidValue;
    args.out = static_cast<T *>(p.out);
    args.a = static_cast<const T *>(p.a);
    args.b = static_cast<const T *>(p.b);
    args.ws = p.ws;
    args.M = p.M;
    args.N = p.N;
    args.K = p.K;
    args.lda = p.lda;
    args.ldb = p.ldb;
    args.tiles_n = (int)tiles_n;
    args.split_k = split;
    args.vec = al16(p.a) && al16(p.b) && p.lda % V == 0 && p.ldb % V == 0 &&
               (!Epi::kPaired || p.trans_b || p.N % V == 0);
    args.ep = EpiParamsOf<T, Epi>::make(p);
    return cudaSuccess;
  }

  static cudaError_t go(const void *kernel, void *args, int tiles_n, int split, int smem,
                        cudaStream_t stream) {
    cudaError_t e = set_smem(kernel, smem);
    if (e != cudaSuccess)
      return e;
    void *params[] = {args};
    return cudaLaunchKernel(kernel, dim3((unsigned)tiles_n, (unsigned)split), dim3(THREADS), params,
                            (size_t)smem, stream);
  }

  template <class T, int MT, class Epi>
  static cudaError_t launch(const Problem &p, int split, cudaStream_t stream) {
    SkArgs<T, Epi> args;
    cudaError_t e = make_args(p, split, args);
    if (e != cudaSuccess)
      return e;
    const void *kernel =
        p.trans_b ? reinterpret_cast<const void *>(skinny_tb_kernel<T, MT, BN, THREADS, Epi>)
                  : reinterpret_cast<const void *>(skinny_rm_kernel<T, MT, BN, LBK, THREADS, Epi>);
    return go(kernel, &args, args.tiles_n, split, legacy_smem(), stream);
  }

  template <class T, class Epi>
  static cudaError_t launch_tc(const Problem &p, int split, cudaStream_t stream) {
    static_assert(TcShape<BN, BK, STAGES, THREADS, false>::SMEM == tc_smem(), "tc smem");
    SkArgs<T, Epi> args;
    cudaError_t e = make_args(p, split, args);
    if (e != cudaSuccess)
      return e;
    const void *kernel = p.trans_b ? reinterpret_cast<const void *>(
                                         skinny_tc_kernel<T, BN, BK, STAGES, THREADS, true, Epi>)
                                   : reinterpret_cast<const void *>(
                                         skinny_tc_kernel<T, BN, BK, STAGES, THREADS, false, Epi>);
    return go(kernel, &args, args.tiles_n, split, tc_smem(), stream);
  }

  /* the tensor-core kernel's 16-byte copies: aligned operands and rows */
  static bool tc_ok(const Problem &p) {
    return TC && p.dtype != Storage<float>::kDtype && al16(p.a) && al16(p.b) && p.lda % 8 == 0 &&
           p.ldb % 8 == 0 && (!FP_EPI_PAIRED(p.epilogue) || p.trans_b || p.N % 8 == 0);
  }

  template <class T, class Epi>
  static cudaError_t by_mt(const Problem &p, int split, cudaStream_t s) {
    if constexpr (TC && Storage<T>::kDtype != Storage<float>::kDtype) {
      if (tc_ok(p))
        return launch_tc<T, Epi>(p, split, s);
    }
    if (p.M <= 1)
      return launch<T, 1, Epi>(p, split, s);
    if (p.M <= 4)
      return launch<T, 4, Epi>(p, split, s);
    if (p.M <= 8)
      return launch<T, 8, Epi>(p, split, s);
    return launch<T, 16, Epi>(p, split, s);
  }

  template <class T> static cudaError_t by_epi(const Problem &p, int split, cudaStream_t s) {
    if (p.epilogue == FP_EPI_SPLIT_ACT)
      return by_mt<T, EpiSplitAct<T>>(p, split, s);
    if (p.epilogue == FP_EPI_GEGLU)
      return by_mt<T, EpiGeglu<T>>(p, split, s);
    return by_mt<T, EpiLinear<T>>(p, split, s);
  }

  template <class T, int MT, class Epi> static void put_mt(const void **out, int cap, int &n) {
    const void *f[2] = {
        reinterpret_cast<const void *>(skinny_rm_kernel<T, MT, BN, LBK, THREADS, Epi>),
        reinterpret_cast<const void *>(skinny_tb_kernel<T, MT, BN, THREADS, Epi>)};
    for (const void *k : f) {
      if (n < cap)
        out[n] = k;
      ++n;
    }
  }
  template <class T, class Epi> static void put_epi(const void **out, int cap, int &n) {
    put_mt<T, 1, Epi>(out, cap, n);
    put_mt<T, 4, Epi>(out, cap, n);
    put_mt<T, 8, Epi>(out, cap, n);
    put_mt<T, 16, Epi>(out, cap, n);
    if constexpr (TC && Storage<T>::kDtype != Storage<float>::kDtype) {
      const void *f[2] = {
          reinterpret_cast<const void *>(skinny_tc_kernel<T, BN, BK, STAGES, THREADS, false, Epi>),
          reinterpret_cast<const void *>(skinny_tc_kernel<T, BN, BK, STAGES, THREADS, true, Epi>)};
      for (const void *k : f) {
        if (n < cap)
          out[n] = k;
        ++n;
      }
    }
  }
  template <class T> static void put_t(const void **out, int cap, int &n) {
    put_epi<T, EpiLinear<T>>(out, cap, n);
    put_epi<T, EpiSplitAct<T>>(out, cap, n);
    put_epi<T, EpiGeglu<T>>(out, cap, n);
  }
};

template <int I, int BM, int BN, int BK, int S, int TH, int SM, unsigned F> struct Row {
  using R = SkRow<BN, BK, S, TH, SM>;
  static_assert(BM == 16, "skinny rows pad M to at most 16");
  static_assert(R::smem_need() == SM,
                "gemm_skinny_configs.h: SMEM_BYTES differs from the kernel's");
  static_assert((F & FP_GEMM_CFG_PAIRED) != 0, "skinny rows serve every epilogue");
  static_assert((F & FP_GEMM_CFG_B2B) == 0, "no skinny gemm2");
  static constexpr bool SPLIT = (F & FP_GEMM_CFG_SPLIT_K) != 0;

  static cudaError_t run(const Problem &p, const Config &c, cudaStream_t s) {
    const int split = c.split_k < 1 ? 1 : c.split_k;
    if (c.bm != BM || c.bn != BN || c.bk != BK || c.stages != S || c.threads != TH ||
        (split > 1 && !SPLIT))
      return cudaErrorInvalidValue;
    if (p.dtype == Storage<float>::kDtype)
      return R::template by_epi<float>(p, split, s);
    if (p.dtype == Storage<__half>::kDtype)
      return R::template by_epi<__half>(p, split, s);
    if (p.dtype == Storage<__nv_bfloat16>::kDtype)
      return R::template by_epi<__nv_bfloat16>(p, split, s);
    return cudaErrorInvalidValue;
  }
  static int stubs(const void **out, int cap, int n) {
    R::template put_t<float>(out, cap, n);
    R::template put_t<__half>(out, cap, n);
    R::template put_t<__nv_bfloat16>(out, cap, n);
    return n;
  }
};

} // namespace

cudaError_t skinny_run(const Problem &p, const Config &c, cudaStream_t stream) {
  if (c.path != FP_GEMM_PATH_SKINNY || p.M < 1 || p.M > 16 || p.N < 1 || p.K < 1 ||
      p.out == nullptr || p.a == nullptr || p.b == nullptr || !epilogue_known(p.epilogue) ||
      (p.trans_b != 0 && p.trans_b != 1))
    return cudaErrorInvalidValue;
  const long long nb = FP_EPI_PAIRED(p.epilogue) ? 2 * p.N : p.N;
  if (p.lda < p.K || p.ldb < (p.trans_b ? p.K : nb))
    return cudaErrorInvalidValue;
  if ((FP_EPI_READS_BIAS(p.epilogue) && p.bias == nullptr) ||
      (FP_EPI_READS_ADD(p.epilogue) && p.add == nullptr))
    return cudaErrorInvalidValue;
  switch (c.index) {
#define FP_SKINNY_RUN(I, BM, BN, BK, S, TH, SM, F)                                                 \
  case I:                                                                                          \
    return Row<I, BM, BN, BK, S, TH, SM, (unsigned)(F)>::run(p, c, stream);
    FP_GEMM_SKINNY_CONFIGS(FP_SKINNY_RUN)
#undef FP_SKINNY_RUN
  default:
    return cudaErrorInvalidValue;
  }
}

int skinny_kernel_stubs(const void **out, int cap) {
  int n = 0;
#define FP_SKINNY_STUBS(I, BM, BN, BK, S, TH, SM, F)                                               \
  n = Row<I, BM, BN, BK, S, TH, SM, (unsigned)(F)>::stubs(out, cap, n);
  FP_GEMM_SKINNY_CONFIGS(FP_SKINNY_STUBS)
#undef FP_SKINNY_STUBS
  return n;
}

} // namespace fpgemm
