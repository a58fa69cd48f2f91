/* fuseport CUDA kernels, family conv: the SIMT path, an implicit GEMM on
 * CUDA cores for every dtype (f16/bf16 stored, float math; f32 with true
 * float FMA, no TF32), both layouts, any shape and alignment. conv.cu plans
 * the paths and launches this one through simt_pick / simt_run
 * (conv_common.cuh).
 *
 * The SIMT kernel. GEMM-M = N*P*Q output pixels, GEMM-N = K channels,
 * GEMM-K = C*R*S taps (conv_common.cuh). A block owns a BM x BN tile, each
 * thread 8 x 8 outputs as 2 x 2 quads of 4 x 4 (rows ty*4.. and
 * BM/2 + ty*4.., columns tx*4.. and BN/2 + tx*4..; the lanes of a warp a
 * 4 x 8 patch), so a k-step costs four LDS.128 for 64 FFMA, as in the GEMM
 * core's SIMT path (gemm_simt.cu). Shared memory holds the gathered A tile
 * transposed (As[k][pixel]) and the filters as Bs[k][channel], rows padded
 * by 4 floats (the transposing stores then conflict at most 2 ways); two
 * buffers, the next k-tile's gather is in registers while the current one
 * is multiplied, one barrier a k-tile. The A gather has two forms:
 *   VEC  NHWC with C % 4 == 0 (x aligned to 4 elements): 4 channels of one
 *        tap are one vector load; a thread's tap digits (r, s, c) are the
 *        same for all its rows and advance by BK a k-tile without division;
 *   GEN  anything else (NCHW, C = 1, 3, 17): a thread owns one pixel (row)
 *        and decomposes each run of 4 taps once, consecutive threads taking
 *        consecutive pixels (coalesced along w in NCHW).
 * Padding taps and rows/channels past the edges load 0.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "conv_common.cuh"
#include "device_common.cuh"

using namespace fpconv;

namespace {

/* ---- tiles ------------------------------------------------------------------- */

template <int BM_, int BN_, int BK_, int THREADS_> struct STile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, THREADS = THREADS_;
  static constexpr int TY = BM / 8, TX = BN / 8; /* threads along M and N */
  static constexpr int WX = TX / 8;              /* warps along N (8 lanes each) */
  static constexpr int AS = BM + 4, BS = BN + 4; /* padded row strides */
  static constexpr int A_STAGE = BK * AS, B_STAGE = BK * BS;
  static constexpr int SMEM = 2 * (A_STAGE + B_STAGE) * 4;
  static constexpr int A_CHUNKS = BM * BK / 4 / THREADS; /* runs of 4 taps a thread */
  static constexpr int B_CHUNKS = BN * BK / 4 / THREADS;
  /* one block an SM for 256 threads (up to 255 registers), else 12 warps */
  static constexpr int MIN_BLOCKS = THREADS >= 256 ? 1 : 384 / THREADS;
  static_assert(TY * TX == THREADS, "8 x 8 outputs a thread");
  static_assert(TX % 8 == 0 && TY % 4 == 0, "warps of 4 x 8 threads");
  static_assert(THREADS % (BK / 4) == 0, "a thread's tap run is the same in every chunk");
  static_assert(THREADS % BM == 0, "GEN: a thread owns one pixel");
  static_assert(A_CHUNKS >= 1 && B_CHUNKS >= 1 && (BM * BK / 4) % THREADS == 0, "copy split");
};

/* the table (simt_pick chooses a row): big layers 128 x 128 (1 block an
 * SM), K <= 64 or fewer tiles 128 x 64 (3 blocks), few tiles 64 x 64 (6) */
using BigTile = STile<128, 128, 16, 256>;
using MidTile = STile<128, 64, 16, 128>;
using SmallTile = STile<64, 64, 16, 64>;
constexpr int kConfigs = 3;
const char *const kConfigNames[kConfigs] = {"128x128x16", "128x64x16", "64x64x16"};

enum AMode { A_VEC = 0, A_GEN_NHWC = 1, A_GEN_NCHW = 2 };

/* ---- loads as float ------------------------------------------------------------ */

template <class T> __device__ __forceinline__ float bits_to_float(unsigned b);
template <> __device__ __forceinline__ float bits_to_float<__half>(unsigned b) {
  return __half2float(__ushort_as_half((unsigned short)(b & 0xffffu)));
}
template <> __device__ __forceinline__ float bits_to_float<__nv_bfloat16>(unsigned b) {
  return __uint_as_float(b << 16);
}

/* 4 contiguous elements, p aligned to 4 elements */
template <class T> __device__ __forceinline__ float4 ld4(const T *p) {
  if constexpr (sizeof(T) == 4) {
    return __ldg(reinterpret_cast<const float4 *>(p));
  } else {
    const uint2 u = __ldg(reinterpret_cast<const uint2 *>(p));
    return make_float4(bits_to_float<T>(u.x), bits_to_float<T>(u.x >> 16), bits_to_float<T>(u.y),
                       bits_to_float<T>(u.y >> 16));
  }
}
template <class T> __device__ __forceinline__ float ld1(const T *p) {
  return Storage<T>::to_float(__ldg(p));
}
__device__ __forceinline__ float &comp(float4 &v, int j) {
  return j == 0 ? v.x : (j == 1 ? v.y : (j == 2 ? v.z : v.w));
}

/* ---- the A gather (im2col tile, never materialised) ------------------------------ */

/* VEC: chunk i of a thread is row (tid + i*THREADS) / (BK/4), taps
 * kk..kk+3 with kk = k0 + (tid % (BK/4)) * 4, i.e. channels c..c+3 of one
 * tap (C % 4 == 0). */
template <class T, class TL> struct AGatherVec {
  static constexpr int L = TL::A_CHUNKS, KQ = TL::BK / 4;
  long long base[L];
  int h0[L], w0[L];
  unsigned ok; /* bit i: chunk i's row is a pixel (< M) */
  int r, s, c; /* digits of the thread's first tap in the next k-tile */
  float4 reg[L];

  __device__ __forceinline__ void init(const Geom &g, long long m0) {
    ok = 0;
#pragma unroll
    for (int i = 0; i < L; ++i) {
      const long long m = m0 + (threadIdx.x + i * TL::THREADS) / KQ;
      const Pixel px = pixel_of(g, m < g.M ? m : 0);
      base[i] = px.base;
      h0[i] = px.h0;
      w0[i] = px.w0;
      ok |= (m < g.M ? 1u : 0u) << i;
    }
    const int kk = (threadIdx.x % KQ) * 4, rs = kk / g.C; /* kk < BK: may pass C */
    c = kk - rs * g.C;
    r = rs / g.S;
    s = rs - r * g.S;
  }
  /* gathers the next k-tile into registers and moves to the one after */
  __device__ __forceinline__ void load(const T *x, const Geom &g) {
    const int dh = r * g.dil, dw = s * g.dil;
#pragma unroll
    for (int i = 0; i < L; ++i) {
      const int h = h0[i] + dh, w = w0[i] + dw;
      const bool v =
          ((ok >> i) & 1u) && r < g.R && (unsigned)h < (unsigned)g.H && (unsigned)w < (unsigned)g.W;
      reg[i] = v ? ld4(x + base[i] + ((long long)h * g.W + w) * g.C + c)
                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    c += TL::BK; /* kk >= C*R*S exactly when r >= R */
    while (c >= g.C) {
      c -= g.C;
      if (++s == g.S) {
        s = 0;
        ++r;
      }
    }
  }
  __device__ __forceinline__ void store(float *as) const {
    const int kq = threadIdx.x % KQ;
#pragma unroll
    for (int i = 0; i < L; ++i) {
      const int row = (threadIdx.x + i * TL::THREADS) / KQ;
      as[(kq * 4 + 0) * TL::AS + row] = reg[i].x;
      as[(kq * 4 + 1) * TL::AS + row] = reg[i].y;
      as[(kq * 4 + 2) * TL::AS + row] = reg[i].z;
      as[(kq * 4 + 3) * TL::AS + row] = reg[i].w;
    }
  }
};

/* GEN: the thread owns row tid % BM and the runs of 4 taps
 * kq = tid / BM + i * (THREADS / BM), i < L; each run is decomposed once
 * (two divisions) and stepped tap by tap. */
template <class T, class TL, bool NHWC> struct AGatherGen {
  static constexpr int L = TL::A_CHUNKS, G = TL::THREADS / TL::BM;
  Pixel px;
  bool ok;
  float4 reg[L];

  __device__ __forceinline__ void init(const Geom &g, long long m0) {
    const long long m = m0 + threadIdx.x % TL::BM;
    ok = m < g.M;
    px = pixel_of(g, ok ? m : 0);
  }
  __device__ __forceinline__ void load(const T *x, const Geom &g, int k0) {
#pragma unroll
    for (int i = 0; i < L; ++i) {
      const int kk = k0 + (int)(threadIdx.x / TL::BM + i * G) * 4;
      int c, r, s;
      if constexpr (NHWC) { /* kk = (r S + s) C + c */
        const int rs = kk / g.C;
        c = kk - rs * g.C;
        r = rs / g.S;
        s = rs - r * g.S;
      } else { /* kk = (c R + r) S + s */
        const int cr = kk / g.S;
        s = kk - cr * g.S;
        c = cr / g.R;
        r = cr - c * g.R;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int h = px.h0 + r * g.dil, w = px.w0 + s * g.dil;
        const bool v = ok && (NHWC ? r < g.R : c < g.C) && (unsigned)h < (unsigned)g.H &&
                       (unsigned)w < (unsigned)g.W;
        const long long off =
            NHWC ? ((long long)h * g.W + w) * g.C + c : ((long long)c * g.H + h) * g.W + w;
        comp(reg[i], j) = v ? ld1(x + px.base + off) : 0.0f;
        if constexpr (NHWC) {
          if (++c == g.C) {
            c = 0;
            if (++s == g.S) {
              s = 0;
              ++r;
            }
          }
        } else {
          if (++s == g.S) {
            s = 0;
            if (++r == g.R) {
              r = 0;
              ++c;
            }
          }
        }
      }
    }
  }
  __device__ __forceinline__ void store(float *as) const {
    const int row = threadIdx.x % TL::BM;
#pragma unroll
    for (int i = 0; i < L; ++i) {
      const int k = (int)(threadIdx.x / TL::BM + i * G) * 4;
      as[(k + 0) * TL::AS + row] = reg[i].x;
      as[(k + 1) * TL::AS + row] = reg[i].y;
      as[(k + 2) * TL::AS + row] = reg[i].z;
      as[(k + 3) * TL::AS + row] = reg[i].w;
    }
  }
};

/* ---- the filters: w as a row-major [K, C*R*S] matrix ------------------------------
 * Chunk i of a thread: channel row (tid + i*THREADS) / (BK/4), taps
 * k0 + (tid % (BK/4)) * 4 ..+3; vector loads where C*R*S % 4 == 0 and w is
 * aligned (vec), predicated scalars otherwise. Rows past K read row K-1
 * (their outputs are never stored). */
template <class T, class TL> struct BLoader {
  static constexpr int L = TL::B_CHUNKS, KQ = TL::BK / 4;
  const T *ptr[L];
  float4 reg[L];

  __device__ __forceinline__ void init(const T *w, const Geom &g, int n0) {
#pragma unroll
    for (int i = 0; i < L; ++i) {
      const int n = n0 + (threadIdx.x + i * TL::THREADS) / KQ;
      ptr[i] = w + (long long)(n < g.K ? n : g.K - 1) * g.KG + (threadIdx.x % KQ) * 4;
    }
  }
  __device__ __forceinline__ void load(const Geom &g, int k0, bool vec) {
    const long long left = g.KG - (k0 + (int)(threadIdx.x % KQ) * 4);
#pragma unroll
    for (int i = 0; i < L; ++i) {
      if (vec && left >= 4) {
        reg[i] = ld4(ptr[i] + k0);
      } else {
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (j < left)
            comp(v, j) = ld1(ptr[i] + k0 + j);
        reg[i] = v;
      }
    }
  }
  __device__ __forceinline__ void store(float *bs) const {
    const int kq = threadIdx.x % KQ;
#pragma unroll
    for (int i = 0; i < L; ++i) {
      const int row = (threadIdx.x + i * TL::THREADS) / KQ;
      bs[(kq * 4 + 0) * TL::BS + row] = reg[i].x;
      bs[(kq * 4 + 1) * TL::BS + row] = reg[i].y;
      bs[(kq * 4 + 2) * TL::BS + row] = reg[i].z;
      bs[(kq * 4 + 3) * TL::BS + row] = reg[i].w;
    }
  }
};

/* ---- the kernel ------------------------------------------------------------------- */

template <class T> struct SimtArgs {
  T *out;
  const T *x, *w;
  Geom g;
  Epi<T> epi;
  int tiles_n;
  int b_vec;   /* C*R*S % 4 == 0 and w aligned to 4 elements */
  int out_vec; /* 4-element stores: out aligned to 4 elements and K % 4 == 0 (NHWC) or
                  P*Q % 4 == 0 (NCHW) */
};

/* Stores 4 values at p (aligned to 4 elements). */
template <class T> __device__ __forceinline__ void st4(T *p, float4 v) {
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float4 *>(p) = v;
  } else {
    struct alignas(8) Quad {
      T a, b, c, d;
    };
    *reinterpret_cast<Quad *>(p) = Quad{Storage<T>::from_float(v.x), Storage<T>::from_float(v.y),
                                        Storage<T>::from_float(v.z), Storage<T>::from_float(v.w)};
  }
}

template <class T, class TL, int AM>
__global__ void __launch_bounds__(TL::THREADS, TL::MIN_BLOCKS)
    conv_simt_kernel(const SimtArgs<T> args) {
  extern __shared__ __align__(16) float fsmem[];
  const Geom &g = args.g;
  long long tm;
  int tn;
  tile_of(args.tiles_n, tm, tn);
  const long long m0 = tm * TL::BM;
  const int n0 = tn * TL::BN;

  /* the thread's place: rows ty*4.. (+BM/2), columns tx*4.. (+BN/2) */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int ty = (warp / TL::WX) * 4 + (lane >> 3), tx = (warp % TL::WX) * 8 + (lane & 7);

  using AG = typename std::conditional<AM == A_VEC, AGatherVec<T, TL>,
                                       AGatherGen<T, TL, AM == A_GEN_NHWC>>::type;
  AG ga;
  ga.init(g, m0);
  BLoader<T, TL> lb;
  lb.init(args.w, g, n0);
  const bool bvec = args.b_vec != 0;
  auto gather = [&](int k0) {
    if constexpr (AM == A_VEC)
      ga.load(args.x, g); /* VEC walks its taps itself, in order */
    else
      ga.load(args.x, g, k0);
    lb.load(g, k0, bvec);
  };

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
      acc[i][j] = 0.0f;

  constexpr int STAGE = TL::A_STAGE + TL::B_STAGE;
  const int nk = (int)((g.KG + TL::BK - 1) / TL::BK);
  gather(0);
  ga.store(fsmem);
  lb.store(fsmem + TL::A_STAGE);
  __syncthreads();
  for (int t = 0; t < nk; ++t) {
    const bool more = t + 1 < nk;
    if (more) /* in flight during the whole k-tile's FMAs */
      gather((t + 1) * TL::BK);
    const float *as = fsmem + (t & 1) * STAGE, *bs = as + TL::A_STAGE;
#pragma unroll
    for (int k = 0; k < TL::BK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4 *>(as + k * TL::AS + ty * 4);
      const float4 a1 = *reinterpret_cast<const float4 *>(as + k * TL::AS + TL::BM / 2 + ty * 4);
      const float4 b0 = *reinterpret_cast<const float4 *>(bs + k * TL::BS + tx * 4);
      const float4 b1 = *reinterpret_cast<const float4 *>(bs + k * TL::BS + TL::BN / 2 + tx * 4);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (more) { /* the other buffer: read in k-tile t - 1, before the last barrier */
      float *nxt = fsmem + ((t + 1) & 1) * STAGE;
      ga.store(nxt);
      lb.store(nxt + TL::A_STAGE);
    }
    __syncthreads();
  }

  /* epilogue: all values first, then the stores (the compiler must assume a
   * store to out aliases the epilogue's operands, so interleaving them would
   * expose one load latency per output). Quads of 4 rows x 4 channels; 4
   * channels (NHWC) or 4 pixels of one image (NCHW, P*Q % 4 == 0, rows start
   * at multiples of 4) are contiguous in out. */
  const long long cs = out_col_step(g);
  const long long rstep = g.nhwc ? g.K : 1; /* from row m to m + 1 in one image */
#pragma unroll
  for (int qi = 0; qi < 2; ++qi)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const long long m = m0 + qi * (TL::BM / 2) + ty * 4 + i;
      const long long ro = m < g.M ? out_row_offset(g, m) : 0;
#pragma unroll
      for (int qj = 0; qj < 2; ++qj)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int k = n0 + qj * (TL::BN / 2) + tx * 4 + j;
          if (m < g.M && k < g.K)
            acc[qi * 4 + i][qj * 4 + j] =
                args.epi.apply(acc[qi * 4 + i][qj * 4 + j], k, ro + (long long)k * cs);
        }
    }
#pragma unroll
  for (int qi = 0; qi < 2; ++qi)
#pragma unroll
    for (int qj = 0; qj < 2; ++qj) {
      const long long mq = m0 + qi * (TL::BM / 2) + ty * 4;
      const int kq = n0 + qj * (TL::BN / 2) + tx * 4;
      if (mq >= g.M || kq >= g.K)
        continue;
      const float(*a)[8] = acc + qi * 4; /* the quad's rows */
      const int j0 = qj * 4;
      if (args.out_vec && mq + 3 < g.M && kq + 3 < g.K) {
        /* element (i, j) at ro + i * rstep + j * cs: vectors run along j in
         * NHWC (cs 1), along i in NCHW (rstep 1) */
        T *o = args.out + out_row_offset(g, mq) + (long long)kq * cs;
        if (g.nhwc) {
#pragma unroll
          for (int i = 0; i < 4; ++i)
            st4(o + i * rstep, make_float4(a[i][j0], a[i][j0 + 1], a[i][j0 + 2], a[i][j0 + 3]));
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j)
            st4(o + j * cs, make_float4(a[0][j0 + j], a[1][j0 + j], a[2][j0 + j], a[3][j0 + j]));
        }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const long long m = mq + i;
          if (m >= g.M)
            continue;
          const long long ro = out_row_offset(g, m);
#pragma unroll
          for (int j = 0; j < 4; ++j)
            if (kq + j < g.K)
              args.out[ro + (long long)(kq + j) * cs] = Storage<T>::from_float(a[i][j0 + j]);
        }
      }
    }
}

template <class T, class TL, int AM> const void *simt_stub() {
  return reinterpret_cast<const void *>(&conv_simt_kernel<T, TL, AM>);
}

template <class T, class TL>
cudaError_t simt_launch(const Problem &p, int amode, cudaStream_t stream) {
  SimtArgs<T> a;
  a.out = static_cast<T *>(p.out);
  a.x = static_cast<const T *>(p.x);
  a.w = static_cast<const T *>(p.w);
  a.g = geom_of(p);
  a.epi = epi_of<T>(p);
  const long long tiles_m = (a.g.M + TL::BM - 1) / TL::BM;
  a.tiles_n = (int)((p.K + TL::BN - 1) / TL::BN);
  const uintptr_t v4 = 4 * sizeof(T) - 1;
  a.b_vec = a.g.KG % 4 == 0 && (reinterpret_cast<uintptr_t>(p.w) & v4) == 0;
  a.out_vec =
      (p.nhwc ? p.K % 4 == 0 : a.g.PQ % 4 == 0) && (reinterpret_cast<uintptr_t>(p.out) & v4) == 0;
  const long long blocks = tiles_m * a.tiles_n;
  if (blocks > 0x7fffffffLL)
    return cudaErrorInvalidConfiguration;
  void (*kernel)(const SimtArgs<T>) = amode == A_VEC        ? &conv_simt_kernel<T, TL, A_VEC>
                                      : amode == A_GEN_NHWC ? &conv_simt_kernel<T, TL, A_GEN_NHWC>
                                                            : &conv_simt_kernel<T, TL, A_GEN_NCHW>;
  cudaError_t err = fpgemm::set_smem(kernel, TL::SMEM);
  if (err != cudaSuccess)
    return err;
  kernel<<<(unsigned)blocks, TL::THREADS, TL::SMEM, stream>>>(a);
  return cudaGetLastError();
}

/* The gather form for p: VEC where NHWC runs of 4 channels are aligned vectors. */
int simt_amode(const Problem &p) {
  const size_t es = p.dtype == FP_F32 ? 4 : 2;
  if (p.nhwc && p.C % 4 == 0 && (reinterpret_cast<uintptr_t>(p.x) & (4 * es - 1)) == 0)
    return A_VEC;
  return p.nhwc ? A_GEN_NHWC : A_GEN_NCHW;
}

template <class T> cudaError_t simt_run_t(const Problem &p, int cfg, cudaStream_t stream) {
  const int am = simt_amode(p);
  switch (cfg) {
  case 0:
    return simt_launch<T, BigTile>(p, am, stream);
  case 1:
    return simt_launch<T, MidTile>(p, am, stream);
  default:
    return simt_launch<T, SmallTile>(p, am, stream);
  }
}

} // namespace

/* The row with the least estimated time: waves of resident blocks (tile
 * quantisation, the last partial wave, tiles past M and K all count) times
 * a wave's work at the row's measured rate (rate: relative FMA throughput
 * of an SM full of such blocks). */
int fpconv::simt_pick(const Problem &p, int sm_count) {
  struct Row {
    int bm, bn, per_sm;
    double rate;
  };
  const Row rows[kConfigs] = {{128, 128, 1, 1.0}, {128, 64, 3, 0.97}, {64, 64, 6, 0.93}};
  int best = 0;
  double best_t = 0.0;
  for (int c = 0; c < kConfigs; ++c) {
    const long long blocks =
        ((p.gemm_m() + rows[c].bm - 1) / rows[c].bm) * ((p.K + rows[c].bn - 1) / rows[c].bn);
    const long long slots = (long long)(sm_count > 0 ? sm_count : 1) * rows[c].per_sm;
    const double waves = (double)((blocks + slots - 1) / slots);
    const double t = waves * rows[c].per_sm * rows[c].bm * rows[c].bn / rows[c].rate;
    if (c == 0 || t < best_t) {
      best = c;
      best_t = t;
    }
  }
  return best;
}

cudaError_t fpconv::simt_run(const Problem &p, int cfg, cudaStream_t stream) {
  switch (p.dtype) {
  case FP_F16:
    return simt_run_t<__half>(p, cfg, stream);
  case FP_BF16:
    return simt_run_t<__nv_bfloat16>(p, cfg, stream);
  default:
    return simt_run_t<float>(p, cfg, stream);
  }
}

namespace {

template <class T> void simt_stubs_t(const void **out, int &n) {
  out[n++] = simt_stub<T, BigTile, A_VEC>();
  out[n++] = simt_stub<T, BigTile, A_GEN_NHWC>();
  out[n++] = simt_stub<T, BigTile, A_GEN_NCHW>();
  out[n++] = simt_stub<T, MidTile, A_VEC>();
  out[n++] = simt_stub<T, MidTile, A_GEN_NHWC>();
  out[n++] = simt_stub<T, MidTile, A_GEN_NCHW>();
  out[n++] = simt_stub<T, SmallTile, A_VEC>();
  out[n++] = simt_stub<T, SmallTile, A_GEN_NHWC>();
  out[n++] = simt_stub<T, SmallTile, A_GEN_NCHW>();
}

} // namespace

const char *fpconv::simt_config_name(int cfg) {
  return cfg >= 0 && cfg < kConfigs ? kConfigNames[cfg] : "?";
}

int fpconv::simt_stubs(const void **out, int cap) {
  const void *mine[3 * 9]; /* 3 dtypes x 3 tiles x 3 gathers */
  int n = 0;
  simt_stubs_t<float>(mine, n);
  simt_stubs_t<__half>(mine, n);
  simt_stubs_t<__nv_bfloat16>(mine, n);
  return fpgemm::copy_stubs(mine, out, cap);
}

const void *fpconv::simt_marker() { return simt_stub<float, BigTile, A_VEC>(); }
