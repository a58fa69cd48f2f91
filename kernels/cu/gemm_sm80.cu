/* fuseport CUDA GEMM core, path SM80: cp.async + ldmatrix + mma.sync
 * (m16n8k16, f16/bf16 in, f32 accumulate), multistage; Ampere and later
 * (compiled for sm_80 (which sm_86 runs) and sm_90: an H100 runs it when the planner's knob
 * forces the path). Semantics: kernels.def, family gemm; the interface:
 * gemm_common.cuh; the fragment layouts: mma_sm80.cuh; the rows:
 * gemm_sm80_configs.h; the main loop: gemm_sm80_mainloop.cuh, a part of
 * this file, included in place.
 *
 * Main loop. A block owns a BM x BN accumulator tile. Each k-tile (BK deep)
 * of A (BM x BK, k contiguous) and B (BK x BN row-major, or BN x BK for
 * trans_b) is copied by cp.async into one of STAGES shared-memory stages,
 * several k-tiles ahead of the MMAs, with one barrier per k-tile (see
 * mainloop, gemm_sm80_mainloop.cuh, for the schedule). Whole k-tiles are
 * copied from per-thread constants (FastCopy: a base address stepping by a
 * k-tile, fixed shared offsets); a partial last k-tile of K is copied
 * first, by the general load_stage. Edges of M, N and K are zero-filled by
 * the copy itself (src-size < 16), so the tensor cores only ever see zeros
 * past the operands (never stale data: 0 * NaN would poison a valid
 * output).
 *
 * On an H100 (lab/sm80_lab.cu, 2026-11-26) the 128 x 256 rows reach 0.54-0.60
 * of cuBLAS's wgmma kernels. mma.sync itself peaks at 644 TFLOP/s there
 * (0.84 of cuBLAS); what holds the loop below that is shared memory: a
 * 64 x 64 warp tile reads 128 bytes by ldmatrix a 16x8x16 MMA, plus the
 * cp.async fills, about 82% of the SM's 128 bytes a clock at that peak.
 *
 * Shared memory is swizzled rather than padded: the 16-byte chunk c of row r
 * of a tile W chunks wide lives at chunk c ^ (r & 7) (W >= 8), or, for
 * 64-byte rows (W = 4), rows pair into 128-byte lines whose eight chunks are
 * XORed with the line index. Every ldmatrix phase reads eight rows at one
 * logical chunk, which the XOR spreads over all 32 banks (no conflicts),
 * and the cp.async stores of a warp fill whole 128-byte lines.
 *
 * Warps tile the block (closest-to-square warp tiles); each warp keeps
 * (WTM/16) x (WTN/8) mma tiles of accumulators and double-buffers its
 * fragments across the k16 steps, k-tile boundaries included; the
 * fragments' shared addresses are per-thread constants (FragOffsets).
 *
 * Paired epilogues (SPLIT_ACT, GEGLU): the block's B tile holds B's columns
 * [n0, n0 + BN/2) in its left half and [N + n0, ..) in its right half, and
 * each warp's n8 tiles are split the same way (the first half of a warp's
 * tiles from the left half at offset o, the second half from the right half
 * at the same offset o), so a thread holds acc[row, c] and acc[row, N + c]
 * in the same fragment slot of two tiles and the epilogue pairs them in
 * registers: the [M, 2N] product never reaches memory.
 *
 * Split-K (gemm_common.cuh's serial scheme): block (tile, s) runs k-tiles
 * [s*kps, (s+1)*kps), writes its partial tile to slice s, fences, and bumps
 * the tile's counter; the last to arrive sums slices 0..split-1 in order,
 * zeroing each value it reads, applies the epilogue, stores, and resets the
 * counter. Zeroing the slices is what leaves the whole workspace zeroed:
 * a later launch with more tiles finds its counters where an earlier
 * launch's slices were (the counter area grows in steps of 256 bytes), so
 * stale partial sums there would count as arrivals.
 *
 * gemm2 (B2B rows): a block computes its [BM, N <= BN] intermediate with the
 * main loop, rounds it to T into shared memory (the swizzled A layout), then
 * streams d in 32 x 128 tiles (3 stages) and multiplies from shared memory,
 * writing out[BM, 128] tile by tile.
 *
 * Launcher guarantees relied on: a and b 16-byte aligned, lda and ldb
 * multiples of 8 elements (checked: cudaErrorInvalidValue otherwise). The
 * right half of a paired row-major B starts at column N, which breaks that
 * alignment when N % 8 != 0: those chunks are then gathered with 2-byte
 * loads. d (gemm2) may have any alignment (likewise gathered when needed).
 */
#include <limits.h>
#include <stdint.h> /* gemm_common.cuh uses uintptr_t */

#include "gemm_common.cuh"
#include "gemm_sm80_configs.h"
#include "mma_sm80.cuh"

namespace fpgemm {

cudaError_t sm80_run(const Problem &p, const Config &c, cudaStream_t stream);
cudaError_t sm80_run2(const Problem2 &p, const Config &c, cudaStream_t stream);
int sm80_kernel_stubs(const void **out, int cap);

namespace {

using namespace fpmma;

/* ---- geometry ------------------------------------------------------------------ */

/* The warp grid (WM of the warps along M) whose warp tile is closest to
 * square; ties go to the taller tile (fewer B fragments per k-step). */
__host__ __device__ constexpr int warps_m_for(int bm, int bn, int warps) {
  int best = 0, best_diff = INT_MAX;
  for (int wm = 1; wm <= warps; wm *= 2) {
    const int wn = warps / wm;
    if (warps % wm != 0 || bm % (wm * 16) != 0 || bn % (wn * 16) != 0)
      continue;
    const int tm = bm / wm, tn = bn / wn;
    const int diff = tm > tn ? tm - tn : tn - tm;
    if (diff < best_diff) {
      best = wm;
      best_diff = diff;
    }
  }
  return best;
}

template <int BM_, int BN_, int BK_, int STAGES_, int THREADS_, bool PAIRED_> struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, STAGES = STAGES_, THREADS = THREADS_;
  static constexpr bool PAIRED = PAIRED_;
  static constexpr int WARPS = THREADS / 32;
  static constexpr int WM = warps_m_for(BM, BN, WARPS), WN = WARPS / (WM > 0 ? WM : 1);
  static constexpr int WTM = BM / (WM > 0 ? WM : 1), WTN = BN / WN;
  static constexpr int MI = WTM / 16, NI = WTN / 8;
  static constexpr int H = PAIRED ? BN / 2 : BN; /* B columns a half (unpaired: all) */
  static constexpr int KSTEPS = BK / 16;
  static constexpr int WA = BK / 8; /* chunks a row of the A tile (and of a trans_b B tile) */
  static constexpr int WB = BN / 8; /* chunks a row of a row-major B tile */
  static constexpr int A_ELEMS = BM * BK, B_ELEMS = BK * BN;
  static constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;
  static constexpr int SMEM = STAGES * STAGE_ELEMS * 2;
  static constexpr int A_CHUNKS = A_ELEMS / 8 / THREADS; /* cp.async a thread a stage */
  static constexpr int B_CHUNKS = B_ELEMS / 8 / THREADS;
  static_assert(WM > 0, "no warp grid fits the tile");
  static_assert(THREADS % 32 == 0 && WM * WN == WARPS, "warps");
  static_assert(BK % 16 == 0 && (WA == 4 || WA % 8 == 0) && WB % 8 == 0, "tile widths");
  static_assert(WTN % 16 == 0 && (!PAIRED || (WTN / 2) % 16 == 0), "n tiles go by pairs");
  static_assert(A_ELEMS % (8 * THREADS) == 0 && B_ELEMS % (8 * THREADS) == 0, "copy split");
  static_assert(STAGES >= 2, "pipeline");
  static_assert(KSTEPS % 2 == 0, "fragment buffers alternate across k-tiles");

  /* Tile column of the warp's n8 tile j (see the file comment for paired). */
  __device__ __forceinline__ static int col(int wn, int j) {
    if constexpr (PAIRED) {
      return j < NI / 2 ? wn * (WTN / 2) + j * 8 : BN / 2 + wn * (WTN / 2) + (j - NI / 2) * 8;
    } else {
      return wn * WTN + j * 8;
    }
  }
};

/* gemm2's second product: d streamed in D_BK x D_BP tiles, D_STAGES deep. */
constexpr int D_BK = 32, D_BP = 128, D_STAGES = 3;
constexpr int D_STAGE_ELEMS = D_BK * D_BP;

template <class TL> __host__ __device__ constexpr int b2b_smem() {
  return (TL::SMEM > D_STAGES * D_STAGE_ELEMS * 2 ? TL::SMEM : D_STAGES * D_STAGE_ELEMS * 2) +
         TL::BM * TL::BN * 2;
}

/* ---- the main loop ------------------------------------------------------------- */
/* Operands, load_stage, FastCopy, FragOffsets, load_frags, mainloop:
 * gemm_sm80_mainloop.cuh, a part of this file. */
#include "gemm_sm80_mainloop.cuh"

/* Block (tm, tn) of the tile grid from a linear index, in groups of 8 tile
 * rows (consecutive blocks share B's column tiles and A's row tiles in L2). */
__device__ __forceinline__ void tile_of(int pid, int tiles_m, int tiles_n, int &tm, int &tn) {
  constexpr int G = 8;
  const int width = G * tiles_n;
  const int group = pid / width;
  const int first = group * G;
  const int rows = tiles_m - first < G ? tiles_m - first : G;
  tm = first + (pid % width) % rows;
  tn = (pid % width) / rows;
}

/* ---- the GEMM kernel -------------------------------------------------------------- */

template <class T, class Epi> struct GemmArgs {
  T *out;
  const T *a, *b;
  void *ws;
  long long M, N, K, lda, ldb;
  int tiles_m, tiles_n, split_k, right_gather;
  typename Epi::Params ep;
};

/* Serial split-K: this block's partial to its slice; true (for the whole
 * block) when it arrived last, acc then holding the in-order sum. */
template <class TL>
__device__ __forceinline__ bool split_reduce(void *ws, long long tiles, long long tile, int split,
                                             int nsplit, float (&acc)[TL::MI][TL::NI][4],
                                             char *smem) {
  int &s_last = *reinterpret_cast<int *>(smem); /* free: the barrier below follows the loop */
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / TL::WN, wn = warp % TL::WN;
  const int g = lane >> 2, t = lane & 3;
  float *mine = split_slice(ws, tiles, tile, split, TL::BM, TL::BN);
#pragma unroll
  for (int mi = 0; mi < TL::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < TL::NI; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm * TL::WTM + mi * 16 + g + 8 * h, c = TL::col(wn, ni) + 2 * t;
        __stcg(reinterpret_cast<float2 *>(mine + r * TL::BN + c),
               make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]));
      }
  __threadfence(); /* the slice before the arrival */
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned prev = atomicAdd(split_counters(ws) + tile, 1u);
    s_last = prev == (unsigned)(nsplit - 1);
  }
  __syncthreads();
  if (!s_last)
    return false;
  __threadfence(); /* the others' slices after their arrivals */
#pragma unroll
  for (int mi = 0; mi < TL::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < TL::NI; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm * TL::WTM + mi * 16 + g + 8 * h, c = TL::col(wn, ni) + 2 * t;
        float2 sum = make_float2(0.0f, 0.0f);
        for (int s = 0; s < nsplit; ++s) {
          float2 *q = reinterpret_cast<float2 *>(split_slice(ws, tiles, tile, s, TL::BM, TL::BN) +
                                                 r * TL::BN + c);
          const float2 v = __ldcg(q);
          __stcg(q, make_float2(0.0f, 0.0f)); /* the workspace is left zeroed */
          sum = s == 0 ? v : make_float2(sum.x + v.x, sum.y + v.y);
        }
        acc[mi][ni][2 * h] = sum.x;
        acc[mi][ni][2 * h + 1] = sum.y;
      }
  if (threadIdx.x == 0)
    split_counters(ws)[tile] = 0u; /* ready for the next launch */
  return true;
}

template <class T, class TL, bool TRANS_B, class Epi>
__global__ void __launch_bounds__(TL::THREADS, 1) sm80_gemm_kernel(const GemmArgs<T, Epi> args) {
  extern __shared__ __align__(128) char smem[];
  int tm, tn;
  tile_of(blockIdx.x, args.tiles_m, args.tiles_n, tm, tn);
  const long long m0 = (long long)tm * TL::BM, n0 = (long long)tn * TL::H;

  Operands<T> op{args.a,   args.b,   args.M, args.N, args.K,
                 args.lda, args.ldb, m0,     n0,     args.right_gather != 0};
  const int nk_total = (int)((args.K + TL::BK - 1) / TL::BK);
  int kt_begin = 0, kt_end = nk_total;
  if (args.split_k > 1) {
    const int per = (nk_total + args.split_k - 1) / args.split_k;
    kt_begin = min(nk_total, (int)blockIdx.y * per);
    kt_end = min(nk_total, kt_begin + per);
  }

  float acc[TL::MI][TL::NI][4];
#pragma unroll
  for (int mi = 0; mi < TL::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < TL::NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[mi][ni][e] = 0.0f;

  mainloop<T, TL, TRANS_B>(op, smem, kt_begin, kt_end, acc);

  if (args.split_k > 1) {
    const long long tiles = (long long)args.tiles_m * args.tiles_n;
    const long long tile = (long long)tm * args.tiles_n + tn;
    if (!split_reduce<TL>(args.ws, tiles, tile, blockIdx.y, args.split_k, acc, smem))
      return;
  }

  /* epilogue: each C fragment row holds the pair (c, c + 1) */
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / TL::WN, wn = warp % TL::WN;
  const int g = lane >> 2, t = lane & 3;
  constexpr int NJ = TL::PAIRED ? TL::NI / 2 : TL::NI;
#pragma unroll
  for (int mi = 0; mi < TL::MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long long row = m0 + wm * TL::WTM + mi * 16 + g + 8 * h;
      if (row >= args.M)
        continue;
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const long long col = n0 + TL::col(wn, j) + 2 * t;
        if (col >= args.N)
          continue;
        const bool second = col + 1 < args.N;
        const float2 left = make_float2(acc[mi][j][2 * h], acc[mi][j][2 * h + 1]);
        float2 v;
        if constexpr (Epi::kPaired) {
          const float2 right =
              make_float2(acc[mi][j + TL::NI / 2][2 * h], acc[mi][j + TL::NI / 2][2 * h + 1]);
          v = Epi::apply(args.ep, row, col, left, right, second);
        } else {
          v = Epi::apply(args.ep, row, col, left, second);
        }
        store_pair(args.out, args.N, row, col, v, second);
      }
    }
}

/* ---- the gemm2 kernel ----------------------------------------------------------- */

template <class T> struct Gemm2Args {
  T *out;
  const T *a, *b, *d;
  long long M, N, K, P, lda, ldb, ldd;
  int d_aligned; /* d 16-byte aligned and ldd % 8 == 0: cp.async; else gathered */
};

template <class T, class TL>
__device__ __forceinline__ void load_d_stage(const Gemm2Args<T> &args, uint32_t sD, char *gD,
                                             long long n0, long long p0) {
  constexpr int W = D_BP / 8;
  constexpr int CHUNKS = D_STAGE_ELEMS / 8 / TL::THREADS;
  static_assert(D_STAGE_ELEMS % (8 * TL::THREADS) == 0, "d copy split");
#pragma unroll
  for (int i = 0; i < CHUNKS; ++i) {
    const int id = threadIdx.x + i * TL::THREADS;
    const int r = id / W, cc = id % W;
    const long long n = n0 + r, p = p0 + cc * 8;
    const int bytes = n < args.N ? clamp_bytes(args.P - p) : 0;
    const T *src = bytes > 0 ? args.d + n * args.ldd + p : args.d;
    if (args.d_aligned)
      cp_async_16(sD + swz<W>(r, cc) * 2, src, bytes);
    else
      gather8(gD + swz<W>(r, cc) * 2, src, bytes / 2);
  }
}

template <class T, class TL, bool TRANS_B>
__global__ void __launch_bounds__(TL::THREADS, 1) sm80_gemm2_kernel(const Gemm2Args<T> args) {
  extern __shared__ __align__(128) char smem[];
  constexpr int STAGE_REGION = b2b_smem<TL>() - TL::BM * TL::BN * 2;
  char *cbuf = smem + STAGE_REGION; /* the rounded [BM, BN] intermediate */
  const uint32_t sC = smem_addr(cbuf);
  const long long m0 = (long long)blockIdx.x * TL::BM;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;

  /* phase 1: c = a @ B for the block's rows, all N (<= BN) columns */
  {
    Operands<T> op{args.a, args.b, args.M, args.N, args.K, args.lda, args.ldb, m0, 0, false};
    float acc[TL::MI][TL::NI][4];
#pragma unroll
    for (int mi = 0; mi < TL::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < TL::NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[mi][ni][e] = 0.0f;
    mainloop<T, TL, TRANS_B>(op, smem, 0, (int)((args.K + TL::BK - 1) / TL::BK), acc);
    /* rounded to T (an eager framework's intermediate); columns >= N and
     * rows >= M hold zeros (their operands were zero-filled) */
    const int wm = warp / TL::WN, wn = warp % TL::WN;
#pragma unroll
    for (int mi = 0; mi < TL::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < TL::NI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = wm * TL::WTM + mi * 16 + g + 8 * h, c = TL::col(wn, ni) + 2 * t;
          const uint32_t v = pack2<T>(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
          *reinterpret_cast<uint32_t *>(cbuf + (swz<TL::WB>(r, c >> 3) + (c & 7)) * 2) = v;
        }
    __syncthreads(); /* phase 1's stages are free for d */
  }

  /* phase 2: out[m0.., p0..p0+D_BP) = c @ d[:, p0..], over a flat sequence
   * of (p tile, n step) so the copies run ahead across p tiles */
  constexpr int WM2 = warps_m_for(TL::BM, D_BP, TL::WARPS), WN2 = TL::WARPS / WM2;
  constexpr int WTM2 = TL::BM / WM2, WTN2 = D_BP / WN2;
  constexpr int MI2 = WTM2 / 16, NI2 = WTN2 / 8;
  static_assert(WM2 > 0 && WTN2 % 16 == 0, "phase-2 warp grid");
  const int wm2 = warp / WN2, wn2 = warp % WN2;
  const int nsteps = (int)((args.N + D_BK - 1) / D_BK);
  const long long ptiles = (args.P + D_BP - 1) / D_BP;
  const long long total = ptiles * nsteps;
  const uint32_t s0 = smem_addr(smem);

#pragma unroll
  for (int s = 0; s < D_STAGES - 1; ++s) {
    if (s < total)
      load_d_stage<T, TL>(args, s0 + s * D_STAGE_ELEMS * 2, smem + s * D_STAGE_ELEMS * 2,
                          (long long)(s % nsteps) * D_BK, (long long)(s / nsteps) * D_BP);
    cp_async_commit();
  }

  float acc[MI2][NI2][4];
#pragma unroll
  for (int mi = 0; mi < MI2; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI2; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[mi][ni][e] = 0.0f;

  for (long long it = 0; it < total; ++it) {
    cp_async_wait<D_STAGES - 2>();
    __syncthreads();
    const long long nxt = it + D_STAGES - 1;
    if (nxt < total) {
      const int st = (int)(nxt % D_STAGES);
      load_d_stage<T, TL>(args, s0 + st * D_STAGE_ELEMS * 2, smem + st * D_STAGE_ELEMS * 2,
                          (nxt % nsteps) * D_BK, (nxt / nsteps) * D_BP);
    }
    cp_async_commit();

    const int ns = (int)(it % nsteps);
    const uint32_t sD = s0 + (int)(it % D_STAGES) * D_STAGE_ELEMS * 2;
#pragma unroll
    for (int ks = 0; ks < D_BK / 16; ++ks) {
      uint32_t af[MI2][4];
      uint32_t bf[NI2][2];
#pragma unroll
      for (int mi = 0; mi < MI2; ++mi) {
        const int r = wm2 * WTM2 + mi * 16 + (lane & 15);
        ldmatrix_x4(af[mi], sC + swz<TL::WB>(r, (ns * D_BK + ks * 16) / 8 + (lane >> 4)) * 2);
      }
#pragma unroll
      for (int nj = 0; nj < NI2 / 2; ++nj) {
        uint32_t q[4];
        const int k = ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4_trans(q, sD + swz<D_BP / 8>(k, (wn2 * WTN2 + nj * 16) / 8 + (lane >> 4)) * 2);
        bf[2 * nj][0] = q[0];
        bf[2 * nj][1] = q[1];
        bf[2 * nj + 1][0] = q[2];
        bf[2 * nj + 1][1] = q[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI2; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI2; ++ni)
          Mma<T>::run(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    }

    if (ns == nsteps - 1) {
      const long long p0 = (it / nsteps) * D_BP;
#pragma unroll
      for (int mi = 0; mi < MI2; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const long long row = m0 + wm2 * WTM2 + mi * 16 + g + 8 * h;
#pragma unroll
          for (int ni = 0; ni < NI2; ++ni) {
            const long long col = p0 + wn2 * WTN2 + ni * 8 + 2 * t;
            if (row < args.M && col < args.P)
              store_pair(args.out, args.P, row, col,
                         make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]), col + 1 < args.P);
            acc[mi][ni][2 * h] = 0.0f;
            acc[mi][ni][2 * h + 1] = 0.0f;
          }
        }
    }
  }
  cp_async_wait<0>();
}

/* ---- host side -------------------------------------------------------------------- */

inline bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <class T, class TL, bool TRANS_B, class Epi>
cudaError_t launch_gemm(const Problem &p, int split, cudaStream_t stream) {
  const long long tiles_m = (p.M + TL::BM - 1) / TL::BM;
  const long long tiles_n = (p.N + TL::H - 1) / TL::H;
  if (tiles_m * tiles_n > INT_MAX || split > 65535)
    return cudaErrorInvalidValue;
  if (split > 1 && (p.ws == nullptr ||
                    p.ws_bytes < split_workspace_bytes(tiles_m * tiles_n, split, TL::BM, TL::BN)))
    return cudaErrorInvalidValue;
  GemmArgs<T, Epi> args;
  args.out = static_cast<T *>(p.out);
  args.a = static_cast<const T *>(p.a);
  args.b = static_cast<const T *>(p.b);
  args.ws = p.ws;
  args.M = p.M;
  args.N = p.N;
  args.K = p.K;
  args.lda = p.lda;
  args.ldb = p.ldb;
  args.tiles_m = (int)tiles_m;
  args.tiles_n = (int)tiles_n;
  args.split_k = split;
  args.right_gather = TL::PAIRED && !TRANS_B && (p.N % 8) != 0;
  args.ep = EpiParamsOf<T, Epi>::make(p);
  auto kernel = sm80_gemm_kernel<T, TL, TRANS_B, Epi>;
  cudaError_t e = set_smem(kernel, TL::SMEM);
  if (e != cudaSuccess)
    return e;
  void *params[] = {&args};
  return cudaLaunchKernel(reinterpret_cast<const void *>(kernel),
                          dim3((unsigned)(tiles_m * tiles_n), (unsigned)split), dim3(TL::THREADS),
                          params, TL::SMEM, stream);
}

template <class T, class TL, bool TRANS_B>
cudaError_t launch_gemm2(const Problem2 &p, cudaStream_t stream) {
  const long long tiles_m = (p.M + TL::BM - 1) / TL::BM;
  if (tiles_m > INT_MAX)
    return cudaErrorInvalidValue;
  Gemm2Args<T> args;
  args.out = static_cast<T *>(p.out);
  args.a = static_cast<const T *>(p.a);
  args.b = static_cast<const T *>(p.b);
  args.d = static_cast<const T *>(p.d);
  args.M = p.M;
  args.N = p.N;
  args.K = p.K;
  args.P = p.P;
  args.lda = p.lda;
  args.ldb = p.ldb;
  args.ldd = p.ldd;
  args.d_aligned = aligned16(p.d) && p.ldd % 8 == 0;
  auto kernel = sm80_gemm2_kernel<T, TL, TRANS_B>;
  constexpr int SMEM = b2b_smem<TL>();
  cudaError_t e = set_smem(kernel, SMEM);
  if (e != cudaSuccess)
    return e;
  void *params[] = {&args};
  return cudaLaunchKernel(reinterpret_cast<const void *>(kernel), dim3((unsigned)tiles_m),
                          dim3(TL::THREADS), params, SMEM, stream);
}

/* The row's constants, checked against the kernel's own arithmetic. */
template <int I, int BM, int BN, int BK, int S, int TH, int SM, unsigned F> struct Row {
  static constexpr bool PAIRED = (F & FP_GEMM_CFG_PAIRED) != 0;
  static constexpr bool SPLIT = (F & FP_GEMM_CFG_SPLIT_K) != 0;
  static constexpr bool B2B = (F & FP_GEMM_CFG_B2B) != 0;
  using TL = Tile<BM, BN, BK, S, TH, PAIRED && !B2B>;
  static constexpr int SMEM = B2B ? b2b_smem<TL>() : TL::SMEM;
  static_assert(SMEM == SM, "gemm_sm80_configs.h: SMEM_BYTES differs from the kernel's");
  static_assert(!(PAIRED && B2B), "a B2B row is unpaired");

  static bool matches(const Config &c) {
    return c.bm == BM && c.bn == BN && c.bk == BK && c.stages == S && c.threads == TH;
  }

  template <class T> static cudaError_t run_t(const Problem &p, int split, cudaStream_t s) {
    const bool paired = FP_EPI_PAIRED(p.epilogue);
    if (B2B || paired != PAIRED)
      return cudaErrorInvalidValue;
    if constexpr (!B2B) {
      if constexpr (PAIRED) {
        if (p.epilogue == FP_EPI_SPLIT_ACT)
          return p.trans_b ? launch_gemm<T, TL, true, EpiSplitAct<T>>(p, split, s)
                           : launch_gemm<T, TL, false, EpiSplitAct<T>>(p, split, s);
        return p.trans_b ? launch_gemm<T, TL, true, EpiGeglu<T>>(p, split, s)
                         : launch_gemm<T, TL, false, EpiGeglu<T>>(p, split, s);
      } else {
        return p.trans_b ? launch_gemm<T, TL, true, EpiLinear<T>>(p, split, s)
                         : launch_gemm<T, TL, false, EpiLinear<T>>(p, split, s);
      }
    }
    return cudaErrorInvalidValue;
  }

  static cudaError_t run(const Problem &p, const Config &c, cudaStream_t s) {
    const int split = c.split_k < 1 ? 1 : c.split_k;
    if (!matches(c) || (split > 1 && !SPLIT))
      return cudaErrorInvalidValue;
    if (p.dtype == Storage<__half>::kDtype)
      return run_t<__half>(p, split, s);
    if (p.dtype == Storage<__nv_bfloat16>::kDtype)
      return run_t<__nv_bfloat16>(p, split, s);
    return cudaErrorInvalidValue;
  }

  static cudaError_t run2(const Problem2 &p, const Config &c, cudaStream_t s) {
    if (!matches(c) || (c.split_k > 1))
      return cudaErrorInvalidValue;
    if constexpr (B2B) {
      if (p.N > BN)
        return cudaErrorInvalidValue;
      if (p.dtype == Storage<__half>::kDtype)
        return p.trans_b ? launch_gemm2<__half, TL, true>(p, s)
                         : launch_gemm2<__half, TL, false>(p, s);
      if (p.dtype == Storage<__nv_bfloat16>::kDtype)
        return p.trans_b ? launch_gemm2<__nv_bfloat16, TL, true>(p, s)
                         : launch_gemm2<__nv_bfloat16, TL, false>(p, s);
    }
    return cudaErrorInvalidValue;
  }

  template <class T> static int stubs_t(const void **out, int cap, int n) {
    auto put = [&](const void *f) {
      if (n < cap)
        out[n] = f;
      ++n;
    };
    if constexpr (B2B) {
      put(reinterpret_cast<const void *>(sm80_gemm2_kernel<T, TL, false>));
      put(reinterpret_cast<const void *>(sm80_gemm2_kernel<T, TL, true>));
    } else if constexpr (PAIRED) {
      put(reinterpret_cast<const void *>(sm80_gemm_kernel<T, TL, false, EpiSplitAct<T>>));
      put(reinterpret_cast<const void *>(sm80_gemm_kernel<T, TL, true, EpiSplitAct<T>>));
      put(reinterpret_cast<const void *>(sm80_gemm_kernel<T, TL, false, EpiGeglu<T>>));
      put(reinterpret_cast<const void *>(sm80_gemm_kernel<T, TL, true, EpiGeglu<T>>));
    } else {
      put(reinterpret_cast<const void *>(sm80_gemm_kernel<T, TL, false, EpiLinear<T>>));
      put(reinterpret_cast<const void *>(sm80_gemm_kernel<T, TL, true, EpiLinear<T>>));
    }
    return n;
  }
  static int stubs(const void **out, int cap, int n) {
    n = stubs_t<__half>(out, cap, n);
    return stubs_t<__nv_bfloat16>(out, cap, n);
  }
};

/* Checks common to gemm and gemm2: the launcher's alignment guarantees. */
bool operands_ok(const void *a, const void *b, long long lda, long long ldb) {
  return a != nullptr && b != nullptr && aligned16(a) && aligned16(b) && lda % 8 == 0 &&
         ldb % 8 == 0;
}

} // namespace

cudaError_t sm80_run(const Problem &p, const Config &c, cudaStream_t stream) {
  if (c.path != FP_GEMM_PATH_SM80 || p.M < 1 || p.N < 1 || p.K < 1 || p.out == nullptr ||
      !epilogue_known(p.epilogue) || (p.trans_b != 0 && p.trans_b != 1))
    return cudaErrorInvalidValue;
  const long long nb = FP_EPI_PAIRED(p.epilogue) ? 2 * p.N : p.N;
  if (!operands_ok(p.a, p.b, p.lda, p.ldb) || p.lda < p.K || p.ldb < (p.trans_b ? p.K : nb))
    return cudaErrorInvalidValue;
  if (FP_EPI_READS_BIAS(p.epilogue) && p.bias == nullptr)
    return cudaErrorInvalidValue;
  if (FP_EPI_READS_ADD(p.epilogue) && p.add == nullptr)
    return cudaErrorInvalidValue;
  switch (c.index) {
#define FP_SM80_RUN(I, BM, BN, BK, S, TH, SM, F)                                                   \
  case I:                                                                                          \
    return Row<I, BM, BN, BK, S, TH, SM, (unsigned)(F)>::run(p, c, stream);
    FP_GEMM_SM80_CONFIGS(FP_SM80_RUN)
#undef FP_SM80_RUN
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t sm80_run2(const Problem2 &p, const Config &c, cudaStream_t stream) {
  if (c.path != FP_GEMM_PATH_SM80 || p.M < 1 || p.N < 1 || p.K < 1 || p.P < 1 || p.out == nullptr ||
      p.d == nullptr || (p.trans_b != 0 && p.trans_b != 1))
    return cudaErrorInvalidValue;
  if (!operands_ok(p.a, p.b, p.lda, p.ldb) || p.lda < p.K || p.ldb < (p.trans_b ? p.K : p.N) ||
      p.ldd < p.P)
    return cudaErrorInvalidValue;
  switch (c.index) {
#define FP_SM80_RUN2(I, BM, BN, BK, S, TH, SM, F)                                                  \
  case I:                                                                                          \
    return Row<I, BM, BN, BK, S, TH, SM, (unsigned)(F)>::run2(p, c, stream);
    FP_GEMM_SM80_CONFIGS(FP_SM80_RUN2)
#undef FP_SM80_RUN2
  default:
    return cudaErrorInvalidValue;
  }
}

/* The host stubs of every kernel this file instantiates (for attribute
 * queries: registers, spills); returns their count, writes up to cap. */
int sm80_kernel_stubs(const void **out, int cap) {
  int n = 0;
#define FP_SM80_STUBS(I, BM, BN, BK, S, TH, SM, F)                                                 \
  n = Row<I, BM, BN, BK, S, TH, SM, (unsigned)(F)>::stubs(out, cap, n);
  FP_GEMM_SM80_CONFIGS(FP_SM80_STUBS)
#undef FP_SM80_STUBS
  return n;
}

} // namespace fpgemm
