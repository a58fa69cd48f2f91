/* fuseport CUDA kernels, family conv, path SM80: implicit GEMM on tensor cores
 * (cp.async + ldmatrix + mma.sync m16n8k16, f16/bf16 in, f32 accumulate),
 * f16/bf16 NHWC with C % 8 == 0 and x, w 16-byte aligned. Semantics:
 * kernels.def, family conv; the fragment layouts: mma_sm80.cuh; the plan
 * and the other paths: conv.cu, conv_simt.cu.
 *
 * GEMM-M = N*P*Q pixels (rows of A), GEMM-N = K channels, GEMM-K = C*R*S in
 * NHWC order kk = (r S + s) C + c. A 16-byte chunk of A row m is 8 channels
 * c..c+7 of one tap (C % 8 == 0), contiguous in x; B is w [K, C*R*S], rows
 * contiguous (the GEMM core's trans_b form). The main loop is the GEMM
 * core's sm80 loop (gemm_sm80_mainloop.cuh) with an im2col copy in place
 * of its row-major one:
 *   - each thread copies the same k chunk (kc) of its rows r0 + i*RS in every
 *     k-tile, so the tap digits (r, s, c) of kk = k0 + 8 kc are one per
 *     thread, stepped by BK a k-tile without division, and the tap's offset
 *     in x ((r dil W + s dil) C + c) is shared by all the thread's rows;
 *   - each row keeps its pixel's offset in x at tap (0, 0) and h0, w0 (set
 *     once): a chunk is valid when the pixel exists, r < R (kk < C*R*S) and
 *     (h0 + r dil, w0 + s dil) is inside the image; invalid chunks (padding,
 *     pixels past M) are zero-filled by cp.async's src-size 0, as are
 *     filter rows past K;
 *   - STAGES k-tiles in flight, one barrier a k-tile, fragments
 *     double-buffered across k16 steps (see mainloop in
 *     gemm_sm80_mainloop.cuh for the schedule), 64-byte tile rows swizzled
 *     (fpmma::swz<4>) so ldmatrix and the cp.async stores are conflict-free.
 * Epilogue: the float accumulators of a C fragment, pairs (k, k + 1) of
 * one pixel, through fpconv::Epi, stored as pairs (out is [M, K] row-major:
 * the NHWC output).
 */
#include <limits.h>
#include <stdint.h>

#include "conv_common.cuh"
#include "mma_sm80.cuh"

namespace fpconv {

namespace {

using namespace fpmma;

/* ---- tile configurations ------------------------------------------------------
 * The warp grid is the one whose warp tile is closest to square (WM warps
 * along M; ties to the taller tile), as in gemm_sm80.cu. BK is 32: 64-byte
 * rows (swz<4>), two k16 steps a k-tile. */
constexpr int warps_m_for(int bm, int bn, int warps) {
  int best = 0, best_diff = INT_MAX;
  for (int wm = 1; wm <= warps; wm *= 2) {
    const int wn = warps / wm;
    if (warps % wm != 0 || bm % (wm * 16) != 0 || bn % (wn * 16) != 0)
      continue;
    const int diff = bm / wm > bn / wn ? bm / wm - bn / wn : bn / wn - bm / wm;
    if (diff < best_diff) {
      best = wm;
      best_diff = diff;
    }
  }
  return best;
}

template <int BM_, int BN_, int STAGES_, int THREADS_> struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = 32, STAGES = STAGES_, THREADS = THREADS_;
  static constexpr int WARPS = THREADS / 32;
  static constexpr int WM = warps_m_for(BM, BN, WARPS);
  static constexpr int WN = WARPS / WM;
  static constexpr int WTM = BM / WM, WTN = BN / WN;
  static constexpr int MI = WTM / 16, NI = WTN / 8;
  static constexpr int KSTEPS = BK / 16;
  static constexpr int WA = BK / 8; /* chunks a tile row */
  static constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK;
  static constexpr int STAGE_BYTES = (A_ELEMS + B_ELEMS) * 2;
  static constexpr int SMEM = STAGES * STAGE_BYTES;
  static constexpr int RS = THREADS / WA; /* rows between a thread's chunks */
  static constexpr int A_CHUNKS = BM / RS, B_CHUNKS = BN / RS;
  static_assert(WM > 0 && WM * WN == WARPS && WTM % 16 == 0 && WTN % 16 == 0, "warp grid");
  static_assert(BM % RS == 0 && BN % RS == 0 && RS % 16 == 0, "copy split keeps the swizzle");
  static_assert(STAGES >= 3, "pipeline");
};

/* The table (sm80_pick chooses a row). The loop is latency-bound more than
 * shared-memory-bound: on an H100 (2026-11-27, ResNet-50 layers, N 8-128)
 * 32 x 32 warp tiles with 12-16 warps an SM beat 64 x 32 tiles at 8 warps
 * by 1.1-2x, and 64 x 64 tiles (255 registers, 4-8 warps) were slowest. */
using Cfg0 = Tile<128, 128, 4, 512>; /* 16 warps of 32 x 32, one block an SM */
using Cfg1 = Tile<128, 64, 4, 256>;  /* 8 warps of 32 x 32, two blocks an SM */
using Cfg2 = Tile<64, 64, 4, 128>;   /* 4 warps of 32 x 32, four blocks an SM */
using Cfg3 = Tile<128, 128, 4, 256>; /* 8 warps of 64 x 32, one block an SM */
constexpr int kConfigs = 4;
const char *const kNames[kConfigs] = {"128x128x32/4 (16 warps)", "128x64x32/4 (8 warps)",
                                      "64x64x32/4 (4 warps)", "128x128x32/4 (8 warps)"};

template <class T> struct Args {
  T *out;
  const T *x, *w;
  Geom g;
  Epi<T> epi;
  int tiles_n;
};

/* The im2col copy of a thread: A chunks (rows r0 + i*RS, k chunk kc) and B
 * chunks (filter rows r0 + i*RS, k chunk kc) of the next k-tile. */
template <class T, class TL> struct ConvCopy {
  long long a_off[TL::A_CHUNKS]; /* x offset of the row's pixel at tap (0, 0) */
  int h0[TL::A_CHUNKS], w0[TL::A_CHUNKS];
  unsigned a_ok, b_ok; /* bit i: row i is a pixel (< M) / a channel (< K) */
  int r, s, c;         /* digits of kk = k0 + 8 kc, k0 the next k-tile's */
  const T *gb;         /* filter row of B chunk 0 at the next k-tile (clamped into w) */
  uint32_t soff;       /* shared byte offset of chunk 0 (A; B at A_ELEMS * 2 more) */

  __device__ __forceinline__ void init(const Args<T> &args, long long m0, int n0) {
    const Geom &g = args.g;
    const int r0 = threadIdx.x / TL::WA, kc = threadIdx.x % TL::WA;
    a_ok = 0;
#pragma unroll
    for (int i = 0; i < TL::A_CHUNKS; ++i) {
      const long long m = m0 + r0 + i * TL::RS;
      const Pixel px = pixel_of(g, m < g.M ? m : 0);
      h0[i] = px.h0;
      w0[i] = px.w0;
      a_off[i] = px.base + ((long long)px.h0 * g.W + px.w0) * g.C;
      a_ok |= (m < g.M ? 1u : 0u) << i;
    }
    b_ok = 0;
#pragma unroll
    for (int i = 0; i < TL::B_CHUNKS; ++i)
      b_ok |= (n0 + r0 + i * TL::RS < g.K ? 1u : 0u) << i;
    const int n = n0 + r0 < g.K ? n0 + r0 : g.K - 1;
    gb = args.w + (long long)n * g.KG + kc * 8;
    const int kk = kc * 8, rs = kk / g.C; /* kk < BK: may pass C */
    c = kk - rs * g.C;
    r = rs / g.S;
    s = rs - r * g.S;
    soff = swz<TL::WA>(r0, kc) * 2;
  }

  /* issues the copies of the next k-tile into the stage at shared address
   * st, then moves to the one after */
  __device__ __forceinline__ void copy(const Args<T> &args, uint32_t st) {
    const Geom &g = args.g;
    const int dh = r * g.dil, dw = s * g.dil;
    const long long tap = ((long long)dh * g.W + dw) * g.C + c;
    const bool in_k = r < g.R; /* kk < C*R*S: the whole chunk (C % 8 == 0) */
#pragma unroll
    for (int i = 0; i < TL::A_CHUNKS; ++i) {
      const int h = h0[i] + dh, w = w0[i] + dw;
      const bool ok =
          ((a_ok >> i) & 1u) && in_k && (unsigned)h < (unsigned)g.H && (unsigned)w < (unsigned)g.W;
      /* rows a swizzle period apart: constant shared offsets */
      cp_async_16(st + soff + i * (TL::RS * TL::BK * 2), ok ? args.x + a_off[i] + tap : args.x,
                  ok ? 16 : 0);
    }
    const uint32_t sb = st + TL::A_ELEMS * 2;
    const T *p = gb;
#pragma unroll
    for (int i = 0; i < TL::B_CHUNKS; ++i) {
      const bool ok = ((b_ok >> i) & 1u) && in_k;
      cp_async_16(sb + soff + i * (TL::RS * TL::BK * 2), ok ? p : args.w, ok ? 16 : 0);
      p += (long long)TL::RS * g.KG;
    }
    gb += TL::BK;
    c += TL::BK; /* kk >= C*R*S exactly when r >= R */
    while (c >= g.C) {
      c -= g.C;
      if (++s == g.S) {
        s = 0;
        ++r;
      }
    }
  }
};

/* Per-lane shared byte offsets (from a stage) of the warp's ldmatrix rows
 * at k16 step 0; step ks reads chunk 2 ks (+1), i.e. offset XOR 32 ks in a
 * 64-byte-row swizzle, and whole 16-row blocks keep the swizzle phase. */
template <class TL> struct Frags {
  uint32_t a0, b0;
  __device__ __forceinline__ void init(int wm, int wn, int lane) {
    a0 = swz<TL::WA>(wm * TL::WTM + (lane & 15), lane >> 4) * 2;
    const int n = wn * TL::WTN + (lane & 7) + (lane >> 4) * 8;
    b0 = TL::A_ELEMS * 2 + swz<TL::WA>(n, (lane >> 3) & 1) * 2;
  }
  __device__ __forceinline__ void load(uint32_t st, int ks, uint32_t (&af)[TL::MI][4],
                                       uint32_t (&bf)[TL::NI][2]) const {
#pragma unroll
    for (int mi = 0; mi < TL::MI; ++mi)
      ldmatrix_x4(af[mi], st + (a0 ^ (uint32_t)(ks << 5)) + mi * 16 * TL::BK * 2);
#pragma unroll
    for (int nj = 0; nj < TL::NI / 2; ++nj) {
      uint32_t t[4];
      ldmatrix_x4(t, st + (b0 ^ (uint32_t)(ks << 5)) + nj * 16 * TL::BK * 2);
      bf[2 * nj][0] = t[0];
      bf[2 * nj][1] = t[1];
      bf[2 * nj + 1][0] = t[2];
      bf[2 * nj + 1][1] = t[3];
    }
  }
};

template <class T, class TL>
__global__ void __launch_bounds__(TL::THREADS, 1) conv_sm80_kernel(const Args<T> args) {
  extern __shared__ __align__(128) char smem[];
  const Geom &g = args.g;
  long long tm;
  int tn;
  tile_of(args.tiles_n, tm, tn);
  const long long m0 = tm * TL::BM;
  const int n0 = tn * TL::BN;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / TL::WN, wn = warp % TL::WN;

  float acc[TL::MI][TL::NI][4];
#pragma unroll
  for (int mi = 0; mi < TL::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < TL::NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[mi][ni][e] = 0.0f;

  /* ---- main loop (gemm_sm80_mainloop.cuh's schedule; EARLY: STAGES >= 4) ---- */
  constexpr bool EARLY = TL::STAGES >= 4;
  const int nk = (int)((g.KG + TL::BK - 1) / TL::BK);
  const uint32_t s0 = smem_addr(smem), s_end = s0 + TL::STAGES * TL::STAGE_BYTES;
  ConvCopy<T, TL> cc;
  cc.init(args, m0, n0);
#pragma unroll
  for (int s = 0; s < TL::STAGES - 1; ++s) {
    if (s < nk)
      cc.copy(args, s0 + s * TL::STAGE_BYTES);
    cp_async_commit();
  }
  Frags<TL> fr;
  fr.init(wm, wn, lane);
  uint32_t af[2][TL::MI][4];
  uint32_t bf[2][TL::NI][2];
  cp_async_wait<TL::STAGES - 2>();
  __syncthreads();
  uint32_t rd = s0, wr = s0 + (TL::STAGES - 1) * TL::STAGE_BYTES;
  fr.load(rd, 0, af[0], bf[0]);

  for (int it = 0; it < nk; ++it) {
#pragma unroll
    for (int ks = 0; ks < TL::KSTEPS; ++ks) {
      if (EARLY && ks == 0) {
        /* k-tile it + 1 has landed; every warp is past its reads of it - 1 */
        cp_async_wait<(EARLY ? TL::STAGES - 3 : 0)>();
        __syncthreads();
      }
      if (!EARLY && ks == TL::KSTEPS - 1) {
        cp_async_wait<TL::STAGES - 2>();
        __syncthreads();
      }
      if (ks == TL::KSTEPS - 1) {
        rd += TL::STAGE_BYTES;
        if (rd == s_end)
          rd = s0;
      }
      if (ks + 1 < TL::KSTEPS || it + 1 < nk)
        fr.load(rd, (ks + 1) % TL::KSTEPS, af[(ks + 1) & 1], bf[(ks + 1) & 1]);
      if (ks == 0) {
        if (it + TL::STAGES - 1 < nk)
          cc.copy(args, wr);
        cp_async_commit();
        wr += TL::STAGE_BYTES;
        if (wr == s_end)
          wr = s0;
      }
#pragma unroll
      for (int mi = 0; mi < TL::MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < TL::NI; ++ni)
          Mma<T>::run(acc[mi][ni], af[ks & 1][mi], bf[ks & 1][ni][0], bf[ks & 1][ni][1]);
    }
  }
  cp_async_wait<0>();

  /* ---- epilogue: fragment pairs (k, k + 1) of pixel m, out[m * K + k].
   * All values first, then all stores: the compiler cannot move an
   * operand's load (bias, residual) above a store to out, which it must
   * assume aliases it, so interleaving them would expose one load latency
   * per pair (1x1 layers with few k-tiles ran 2-3x slower that way). ---- */
  const int gq = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < TL::MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long long m = m0 + wm * TL::WTM + mi * 16 + gq + 8 * h;
#pragma unroll
      for (int ni = 0; ni < TL::NI; ++ni) {
        const int k = n0 + wn * TL::WTN + ni * 8 + 2 * t;
        if (m < g.M && k < g.K) {
          const long long idx = m * g.K + k;
          acc[mi][ni][2 * h] = args.epi.apply(acc[mi][ni][2 * h], k, idx);
          if (k + 1 < g.K)
            acc[mi][ni][2 * h + 1] = args.epi.apply(acc[mi][ni][2 * h + 1], k + 1, idx + 1);
        }
      }
    }
#pragma unroll
  for (int mi = 0; mi < TL::MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long long m = m0 + wm * TL::WTM + mi * 16 + gq + 8 * h;
      if (m >= g.M)
        continue;
#pragma unroll
      for (int ni = 0; ni < TL::NI; ++ni) {
        const int k = n0 + wn * TL::WTN + ni * 8 + 2 * t;
        if (k < g.K)
          fpgemm::store_pair(args.out, g.K, m, k,
                             make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]), k + 1 < g.K);
      }
    }
}

template <class T, class TL> cudaError_t launch(const Problem &p, cudaStream_t stream) {
  Args<T> a;
  a.out = static_cast<T *>(p.out);
  a.x = static_cast<const T *>(p.x);
  a.w = static_cast<const T *>(p.w);
  a.g = geom_of(p);
  a.epi = epi_of<T>(p);
  const long long tiles_m = (a.g.M + TL::BM - 1) / TL::BM;
  a.tiles_n = (int)((p.K + TL::BN - 1) / TL::BN);
  const long long blocks = tiles_m * a.tiles_n;
  if (blocks > INT_MAX)
    return cudaErrorInvalidConfiguration;
  cudaError_t err = fpgemm::set_smem(conv_sm80_kernel<T, TL>, TL::SMEM);
  if (err != cudaSuccess)
    return err;
  conv_sm80_kernel<T, TL><<<(unsigned)blocks, TL::THREADS, TL::SMEM, stream>>>(a);
  return cudaGetLastError();
}

template <class T> cudaError_t run_t(const Problem &p, int cfg, cudaStream_t stream) {
  switch (cfg) {
  case 0:
    return launch<T, Cfg0>(p, stream);
  case 1:
    return launch<T, Cfg1>(p, stream);
  case 2:
    return launch<T, Cfg2>(p, stream);
  default:
    return launch<T, Cfg3>(p, stream);
  }
}

bool aligned16(const void *ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

long long blocks_of(const Problem &p, int bm, int bn) {
  return ((p.gemm_m() + bm - 1) / bm) * ((p.K + bn - 1) / bn);
}

} // namespace

bool sm80_eligible(const Problem &p) {
  return p.dtype != Storage<float>::kDtype && p.nhwc && p.C % 8 == 0 && aligned16(p.x) &&
         aligned16(p.w);
}

/* The row with the least estimated time: waves of resident blocks (tile
 * quantisation, the last partial wave, tiles past M and K all count) times
 * a wave's work at the row's rate (relative MMA throughput of an SM full of
 * such blocks, measured as above). */
int sm80_pick(const Problem &p, int sm_count) {
  struct Row {
    int bm, bn, per_sm;
    double rate;
  };
  const Row rows[kConfigs] = {
      {128, 128, 1, 0.85}, {128, 64, 2, 0.95}, {64, 64, 4, 1.0}, {128, 128, 1, 0.8}};
  int best = 0;
  double best_t = 0.0;
  for (int c = 0; c < kConfigs; ++c) {
    const long long slots = (long long)(sm_count > 0 ? sm_count : 1) * rows[c].per_sm;
    const double waves = (double)((blocks_of(p, rows[c].bm, rows[c].bn) + slots - 1) / slots);
    const double t = waves * rows[c].per_sm * rows[c].bm * rows[c].bn / rows[c].rate;
    if (c == 0 || t < best_t) {
      best = c;
      best_t = t;
    }
  }
  return best;
}

cudaError_t sm80_run(const Problem &p, int cfg, cudaStream_t stream) {
  return p.dtype == Storage<__nv_bfloat16>::kDtype ? run_t<__nv_bfloat16>(p, cfg, stream)
                                                   : run_t<__half>(p, cfg, stream);
}

const char *sm80_config_name(int cfg) { return cfg >= 0 && cfg < kConfigs ? kNames[cfg] : "?"; }

int sm80_stubs(const void **out, int cap) {
  const void *mine[] = {
      reinterpret_cast<const void *>(&conv_sm80_kernel<__half, Cfg0>),
      reinterpret_cast<const void *>(&conv_sm80_kernel<__half, Cfg1>),
      reinterpret_cast<const void *>(&conv_sm80_kernel<__half, Cfg2>),
      reinterpret_cast<const void *>(&conv_sm80_kernel<__half, Cfg3>),
      reinterpret_cast<const void *>(&conv_sm80_kernel<__nv_bfloat16, Cfg0>),
      reinterpret_cast<const void *>(&conv_sm80_kernel<__nv_bfloat16, Cfg1>),
      reinterpret_cast<const void *>(&conv_sm80_kernel<__nv_bfloat16, Cfg2>),
      reinterpret_cast<const void *>(&conv_sm80_kernel<__nv_bfloat16, Cfg3>),
  };
  return fpgemm::copy_stubs(mine, out, cap);
}

} // namespace fpconv
