/* fuseport GEMM core, path SM90: the Hopper (sm_90a) main loop.
 * Semantics: kernels/kernels.def, family gemm; shared parts:
 * gemm_common.cuh; tile configurations: gemm_sm90_configs.h; PTX
 * wrappers: mma_sm90.cuh. Parts of this file, included in place: the
 * epilogue, gemm_sm90_epilogue.cuh; the b2b kernel, gemm_sm90_b2b.cuh; the
 * host side, gemm_sm90_host.cuh.
 *
 * Shape of a block (384 threads, one per SM, persistent):
 *   warpgroup 0, the producer: one thread issues the TMA copies of A and B
 *     tiles into a ring of STAGES shared-memory stages (registers cut to 40);
 *   warpgroups 1 and 2, the consumers: rows [0, 64) and [64, 128) of the
 *     128-row tile, one wgmma m64nBNk16 per k16 step with float
 *     accumulators in registers (raised to 232), then the epilogue functor
 *     in registers and the store through shared memory (below;
 *     gemm_sm90_epilogue.cuh).
 * Each stage has two mbarriers: `full` (the producer's arrive.expect_tx plus
 * the TMA bytes) and `empty` (one arrival per consumer warp, from every CTA
 * of the cluster, once its wgmmas reading the stage have retired). Producer
 * and consumers walk the same sequence of work units (tile, split) with
 * the same number of k-blocks each, so they use the stages in one agreed
 * order: iteration i uses stage i % STAGES in round i / STAGES, the
 * consumers wait `full` for parity round & 1, the producer waits `empty`
 * for parity (round & 1) ^ 1 (round 0 passes: the buffers start empty).
 *
 * The store (epilogue overlap): each consumer warpgroup rounds its 64 rows
 * into 64 x 64 boxes of shared memory (stmatrix, TMA's 128B swizzle) and
 * one of its threads stores them with TMA (cp.async.bulk.tensor, bulk
 * async-groups): the warpgroup goes on to the next tile's wgmmas while the
 * copy engine writes, and the producer has already filled the next tile's
 * stages. A warpgroup has its own boxes (Smem::kEpiBufs, as many as fit
 * beside the stages); the rest of a tile's boxes go into the stage of its
 * last k-block, which the consumers keep (not released to the producer)
 * until the copies have read it, after the next tile's first wgmmas are
 * issued: so every row stages a whole tile at once, with 4 stages for
 * 128x256. Before a warpgroup overwrites its own boxes it waits until the
 * copies that read them have read them (long done: a main loop ran in
 * between). Where TMA cannot store (out not 16-byte aligned, or rows not a
 * multiple of 16 bytes) the warpgroup stores the staged rows itself,
 * coalesced, with edge checks. ADD / ADD_RELU with a 16-byte aligned add
 * read it by TMA into the same boxes (kAddLead k-blocks ahead for a
 * warpgroup's own boxes; L2-prefetched by the producer for the borrowed
 * stage) and apply the epilogue there (ldmatrix, formula, stmatrix).
 *
 * Split-K (SPLIT_K rows, split_k > 1): gemm_common.cuh's workspace; the
 * last block of a tile sums the slices in order, 16 float4 a thread in
 * flight (the slices hold the threads' accumulator fragments in order:
 * frag_slot, gemm_sm90_epilogue.cuh). A swapped row (split only where the
 * tuning cache asks: gemm_plan.c) whose units fit one wave sums in
 * parallel instead (split_reduce_share): each block of the tile sums and
 * stores BN / split_k of its columns (out's rows) once all have arrived,
 * in a cooperative launch that keeps every block resident.
 *
 * Operands: A [M, K] K-major (TMA box 64 k x 128 rows, 128B swizzle); B
 * either [NB, K] K-major (trans_b: 2 boxes of 64 k x BN / 2 rows) or [K, NB]
 * MN-major (BN / 64 boxes of 64 n x 64 k, wgmma's transpose bit). TMA
 * zero-fills the tails, so any M, N, K >= 1 runs the same code; a box that
 * would start past the tensor's end is pointed at column (row) 0 instead,
 * since the accumulator columns (rows) it feeds are never stored. TMA needs
 * a box's innermost coordinate 16-byte aligned (else: illegal instruction):
 * every box starts at a multiple of 8 elements along the contiguous axis.
 *
 * Clusters (FP_GEMM_CFG_CLUSTER2): two CTAs take M-tiles 2c and 2c + 1 of
 * the same N-tile; each loads half the B boxes and multicasts them to both,
 * and each consumer warp releases a stage in both CTAs.
 *
 * Paired epilogues: output tile columns [n0, n0 + W) with n0 = tn * W; the
 * left half of the B tile holds B's columns [n0, ..), the right half
 * [N + n0, ..), so accumulator column c and c + BN / 2 meet in one thread
 * (W = BN / 2). With B [K, 2N] row-major and N % 8 != 0, N + n0 is not a
 * legal TMA start: the right half is then loaded from (N + n0) & ~7, s =
 * N % 8 columns early, the tile narrows to W = BN / 2 - 8 (so the shifted
 * half still covers it), and before the epilogue each thread fetches right
 * column c + s from its quad's lanes (shuffles), which puts the partner of
 * left column c back at c + BN / 2.
 *
 * Swapped rows (FP_GEMM_CFG_SWAP): the host hands the kernel B [N, K] as
 * its A and A [M, K] as its B (a convolution's pixels: im2col boxes, see
 * ImTap), so the same main loop computes out^T tile by tile: 128 of out's
 * columns by BN (192 or 224) of out's rows. M, usually
 * the long side (a convolution's pixels), is then cut in tiles of any
 * multiple of 8 instead of 128, which fits the tile count to the SMs
 * (6272 x 512: 33 x 4 tiles of 192 x 128 on 132 SMs, where 128 x 256 gave
 * 98). The epilogue (gemm_sm90_epilogue.cuh, epilogue_swapped) reads out's
 * per-column operands per kernel row and stages the tile transposed.
 *
 * gemm2 (b2b): a block computes its [128, N] intermediate with the same
 * main loop (N <= BN), rounds it to T straight into wgmma's register A
 * layout (no shared-memory round trip), then streams d in [64, 128] tiles
 * through the same stages and writes out[128, 128] tile by tile.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <stdint.h>
#include <type_traits>

#include "cuda/gemm_plan.h"
#include "gemm_common.cuh"
#include "gemm_sm90_configs.h"
#include "mma_sm90.cuh"

#if defined(__CUDA_ARCH__) && !FP_SM90A
/* A device pass for another architecture builds every kernel as a trap, so
 * the device helpers below go unused there. */
#pragma nv_diag_suppress 177
#endif

namespace fpgemm {

cudaError_t sm90_run(const Problem &p, const Config &c, cudaStream_t stream);
cudaError_t sm90_run2(const Problem2 &p, const Config &c, cudaStream_t stream);
int sm90_kernel_stubs(const void **out, int cap);
#ifdef FP_SM90_LAB
int g_sm90_lab_group_m = 0; /* lab only: the raster group (0: kGroupM) */
#endif

namespace {

using namespace fpsm90;

constexpr int kBM = 128;           /* two consumer warpgroups of 64 rows */
constexpr int kBK = 64;            /* 64 16-bit values: one 128-byte swizzle row */
constexpr int kThreads = 384;      /* producer warpgroup + 2 consumer warpgroups */
constexpr int kProducerRegs = 40;  /* the producer only computes coordinates */
constexpr int kConsumerRegs = 232; /* 128 accumulators + addressing; 40 + 2 * 232 <= 512 */
constexpr int kGroupM = 16;    /* M-tiles per raster group: concurrent tiles share A and B in L2 */
constexpr int kB2bBN2 = 128;   /* gemm2: out columns per step (d tile [64, 128]) */
constexpr int kRowBytes = 128; /* bytes of one swizzled row */
constexpr int kSmemLimit = 232448; /* the H100's per-block opt-in (227 KiB) */
constexpr int kEpiCols = 64;       /* a staging box: 64 rows x 64 columns, 128B swizzle */
constexpr int kEpiBoxBytes = 64 * kEpiCols * 2;
constexpr int kAddLead = 4; /* ADD by TMA: see the consumer loop */
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 65536, "the SM's register file");

/* ---- shared memory ---------------------------------------------------------------
 * From the first 1024-aligned byte: STAGES x [A tile | B tile], then each
 * consumer warpgroup's kEpiBufs staging boxes, then each one's bias row
 * (OUTC values of T: BIAS and BIAS_RELU read their columns' bias there,
 * see the epilogue), then the full[STAGES] and
 * empty[STAGES] mbarriers, two mbarriers per consumer warpgroup (the add
 * tile's chunks in its own boxes / in the borrowed stage landed; not in
 * gemm2), then one word (split-K flag). A tile has
 * OUTC output columns, kChunks = OUTC / 64 staging boxes per warpgroup: as
 * many as fit beside the stages are its own (kEpiBufs), the other kBorrow
 * go into the stage of the tile's last k-block, which the warpgroups keep
 * until the boxes are read (see the consumer loop). OUTC = 0: gemm2. */
template <int BN, int STAGES, int OUTC> struct Smem {
  static constexpr int kABytes = kBM * kBK * 2;
  static constexpr int kBBytes = BN * kBK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kChunks = OUTC / kEpiCols;
  static constexpr int kEpiBarBytes = OUTC > 0 ? 32 : 0;
  static constexpr int kBiasRowBytes = OUTC * 2; /* a warpgroup's bias row (16-bit T) */
  static constexpr int kFit = (kSmemLimit - 1024 - STAGES * kStageBytes - 2 * kBiasRowBytes -
                               STAGES * 16 - kEpiBarBytes - 16) /
                              (2 * kEpiBoxBytes);
  static constexpr int kEpiBufs = kChunks < kFit ? kChunks : kFit;
  static constexpr int kBorrow = kChunks - kEpiBufs;
  static constexpr int kEpiOffset = STAGES * kStageBytes;
  static constexpr int kBiasOffset = kEpiOffset + 2 * kEpiBufs * kEpiBoxBytes;
  static constexpr int kBarOffset = kBiasOffset + 2 * kBiasRowBytes;
  static constexpr int kEpiBarOffset = kBarOffset + STAGES * 16;
  static constexpr int kFlagOffset = kEpiBarOffset + kEpiBarBytes;
  static constexpr int kBytes = 1024 + kFlagOffset + 16;
  static_assert(kABytes % 1024 == 0 && kBBytes % 1024 == 0, "swizzled tiles stay 1024-aligned");
  static_assert(OUTC % kEpiCols == 0 && kFit >= 0, "staging boxes");
  static_assert(2 * kBorrow * kEpiBoxBytes <= kStageBytes, "borrowed boxes fit a stage");

  uint32_t base; /* shared-window address of the aligned start */
  __device__ uint32_t a(int s) const { return base + s * kStageBytes; }
  __device__ uint32_t b(int s) const { return base + s * kStageBytes + kABytes; }
  __device__ uint32_t epi(int cw, int i) const {
    return base + kEpiOffset + (cw * kEpiBufs + i) * kEpiBoxBytes;
  }
  /* warpgroup cw's staging box of chunk c; `held`: the borrowed stage */
  __device__ uint32_t box(int cw, int c, int held) const {
    return c < kEpiBufs ? epi(cw, c) : a(held) + (cw * kBorrow + c - kEpiBufs) * kEpiBoxBytes;
  }
  /* warpgroup cw's bias row: the tile's OUTC bias values (the epilogue's) */
  __device__ uint32_t bias_row(int cw) const { return base + kBiasOffset + cw * kBiasRowBytes; }
  __device__ uint32_t full(int s) const { return base + kBarOffset + 8 * s; }
  __device__ uint32_t empty(int s) const { return base + kBarOffset + 8 * (STAGES + s); }
  __device__ uint32_t epibar(int cw) const { return base + kEpiBarOffset + 8 * cw; }
  __device__ uint32_t epibar2(int cw) const { return base + kEpiBarOffset + 16 + 8 * cw; }
};

__device__ __forceinline__ uint8_t *align1024(uint8_t *p) {
  return reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}

/* Position in the stage ring: stage index and the parity of its round. */
template <int STAGES> struct Ring {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

/* The 256 consumer threads only (barrier 0 is __syncthreads). */
__device__ __forceinline__ void consumers_sync() { named_sync(1, 256); }
/* The 128 threads of consumer warpgroup cw. */
__device__ __forceinline__ void warpgroup_sync(int cw) { named_sync(2 + cw, 128); }

/* ---- the B tile --------------------------------------------------------------------
 * kBoxes TMA boxes side by side, each kBoxCols columns (of the tile's BN).
 * Box i's first B column: unpaired tn * BN + i * kBoxCols; paired, the
 * left half from n0 = tn * W, the right half from N + n0 (shifted: from
 * (N + n0) & ~7; see the top of the file). */
template <int BN, bool kTransB, bool kPaired> struct BTile {
  static constexpr int kBoxes = kTransB ? 2 : BN / 64;
  static constexpr int kBoxCols = BN / kBoxes;
  static constexpr int kBoxBytes = kBoxCols * kBK * 2;
  static_assert((kTransB ? BN % 16 == 0 : BN % 64 == 0) && (!kPaired || kBoxes % 2 == 0),
                "B tile boxes (halves of a multiple of 8 rows; 64-column boxes)");

  __device__ static int column(int i, int tn, int n, int nb, int w, int shift) {
    int c;
    if constexpr (kPaired) {
      constexpr int kHalf = kBoxes / 2;
      const int n0 = tn * w;
      c = (i < kHalf ? n0 : (shift ? (n + n0) & ~7 : n + n0)) + (i % kHalf) * kBoxCols;
    } else {
      (void)w;
      (void)shift;
      c = tn * BN + i * kBoxCols;
    }
    return c < nb ? c : 0; /* past the end: feeds only columns that are never stored */
  }
};

/* Wgmma descriptors of k16 step kk of a stage (see mma_sm90.cuh). A: the
 * consumer's 64 rows, K-major. B: K-major for trans_b, else MN-major with
 * its 64-column tiles 64 * 128 bytes apart. */
__device__ __forceinline__ uint64_t desc_a(uint32_t a_rows, int kk) {
  return make_smem_desc_sw128(a_rows + 32 * kk, 16, 8 * kRowBytes);
}
template <bool kTransB> __device__ __forceinline__ uint64_t desc_b(uint32_t b, int kk) {
  return kTransB ? make_smem_desc_sw128(b + 32 * kk, 16, 8 * kRowBytes)
                 : make_smem_desc_sw128(b + 16 * kRowBytes * kk, 64 * kRowBytes, 8 * kRowBytes);
}

/* ---- work units --------------------------------------------------------------------
 * A unit is (tile, split). Tiles are visited in groups of group_m M-tiles
 * (N-tile outer within a group), so the tiles in flight at once cover a
 * squarish patch of the output and share their A rows and B columns in
 * L2. With clusters the unit is a pair of M-tiles (one per CTA rank). */
struct Unit {
  int tm, tn, split, kb0, kb1;
};

struct Sched {
  int mtiles, ntiles, split_k, kblocks, units, group_m;
  /* dividers by split_k, a group's units (gm * ntiles), a full group's
   * M-tile pairs (gm) and the last group's (fewer where gm does not divide
   * the pairs): the decode's divisions, once per tile on every consumer
   * warp's critical path, as multiplies (fp_fastdiv) */
  fp_fastdiv by_split, by_group, by_gm, by_last;

  /* after the fields above are set (host); CL: the cluster size */
  void prepare(int cl) {
    const int mpairs = (mtiles + cl - 1) / cl;
    const int gm = group_m / cl;
    const int groups = (mpairs + gm - 1) / gm;
    by_split = fp_fastdiv_make(static_cast<fp_u32>(split_k));
    by_group = fp_fastdiv_make(static_cast<fp_u32>(gm * ntiles));
    by_gm = fp_fastdiv_make(static_cast<fp_u32>(gm));
    by_last = fp_fastdiv_make(static_cast<fp_u32>(mpairs - (groups - 1) * gm));
  }
  template <int CL> __device__ Unit decode(int u, int rank) const {
    Unit w;
    const int t = static_cast<int>(fp_fastdiv_q(static_cast<fp_u32>(u), by_split));
    w.split = u - t * split_k;
    const int mpairs = (mtiles + CL - 1) / CL;
    const int gm = group_m / CL;
    const int per_group = gm * ntiles;
    const int group = static_cast<int>(fp_fastdiv_q(static_cast<fp_u32>(t), by_group));
    const int first = group * gm;
    const bool full = mpairs - first >= gm;
    const int gsize = full ? gm : mpairs - first;
    const int r = t - group * per_group;
    w.tn = static_cast<int>(fp_fastdiv_q(static_cast<fp_u32>(r), full ? by_gm : by_last));
    w.tm = (first + r - w.tn * gsize) * CL + rank;
    /* split * kblocks < split_k * kblocks < 2^31: the launch checks */
    w.kb0 = split_k == 1
                ? 0
                : static_cast<int>(fp_fastdiv_q(static_cast<fp_u32>(w.split * kblocks), by_split));
    w.kb1 = split_k == 1 ? kblocks
                         : static_cast<int>(fp_fastdiv_q(
                               static_cast<fp_u32>((w.split + 1) * kblocks), by_split));
    return w;
  }
};

/* ---- the im2col A operand (Problem::im2col: conv.cu's implicit GEMM) --------------
 * A k-block is the 64 channels c0 .. c0 + 63 of one tap (r, s): k-block kb
 * has tap t = kb / cblocks, (r, s) = (t / S, t % S), c0 = 64 (kb % cblocks)
 * (C % 64 == 0, so no k-block straddles two taps and K has no tail). Its A
 * box is one TMA im2col load (mma_sm90.cuh's encode_im2col_nhwc map): the
 * channels from c0 of the tile's 128 output pixels, each read at its tap,
 * zeros for padding and for pixels past M; the same 128 rows x 64 k,
 * 128B-swizzled, as a matrix's box. The load names the input coordinates of
 * the tile's first pixel at tap (0, 0) and the tap as the im2col offset
 * (s dil, r dil); the map's bounding box steps TMA through the following
 * pixels in (n, p, q) order. On a swapped row the pixels are the kernel's B:
 * two boxes of BN / 2 pixels a k-block, each from its own first pixel, and
 * the filter [K, R S C] is its A, a plain 2-D map. */
struct ImGeom {
  int cblocks; /* C / 64 */
  int S, dil, stride, pad, Q, PQ;
};
struct ImTap {
  int n, h0, w0; /* the unit's first pixel: its image, tap (0, 0)'s input row and column */
  int c0, r, s;  /* the k-block's channels and tap */
  __device__ __forceinline__ void start(const ImGeom &g, int row, int kb) {
    n = row / g.PQ;
    const int pq = row - n * g.PQ, p = pq / g.Q, q = pq - p * g.Q;
    h0 = p * g.stride - g.pad;
    w0 = q * g.stride - g.pad;
    const int t = kb / g.cblocks;
    c0 = (kb - t * g.cblocks) * kBK;
    r = t / g.S;
    s = t - r * g.S;
  }
  /* this k-block's box of pixels from this tap into dst (TMA im2col, bar's transaction) */
  __device__ __forceinline__ void load(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                       const ImGeom &g) const {
    tma_load_im2col_4d(dst, map, bar, c0, w0, h0, n, static_cast<uint16_t>(s * g.dil),
                       static_cast<uint16_t>(r * g.dil));
  }
  __device__ __forceinline__ void next(const ImGeom &g) {
    c0 += kBK;
    if (c0 == g.cblocks * kBK) {
      c0 = 0;
      if (++s == g.S) {
        s = 0;
        ++r;
      }
    }
  }
};

/* ---- producer: one k-block of A and B into a stage --------------------------------- */
/* kIm2col: the im2col operand is A (tap: the unit's first pixel), or with
 * kSwap B (btap[i]: box i's first pixel; gemm_kernel's swapped rows). */
template <int BN, int STAGES, int OUTC, int CL, bool kTransB, bool kPaired, bool kIm2col,
          bool kSwap = false>
__device__ __forceinline__ void
load_ab(const Smem<BN, STAGES, OUTC> &sm, int s, const CUtensorMap *ta, const CUtensorMap *tb,
        int a_row, int kb, int tn, int n, int nb, int w, int shift, uint32_t rank, const ImTap &tap,
        const ImGeom &ig, const ImTap *btap = nullptr) {
  using BT = BTile<BN, kTransB, kPaired>;
  mbar_arrive_expect_tx(sm.full(s), Smem<BN, STAGES, OUTC>::kStageBytes); /* all of A and B */
  if constexpr (kIm2col && kSwap) { /* A: the filter; B: two im2col boxes */
    (void)tap, (void)tn, (void)n, (void)nb, (void)w, (void)shift, (void)rank;
    static_assert(CL == 1 && kTransB && BT::kBoxes == 2, "swapped im2col: two B boxes");
    tma_load_2d(sm.a(s), ta, sm.full(s), kb * kBK, a_row);
#pragma unroll
    for (int i = 0; i < 2; ++i)
      btap[i].load(sm.b(s) + i * BT::kBoxBytes, tb, sm.full(s), ig);
  } else {
    (void)btap;
    if constexpr (kIm2col) {
      (void)a_row;
      tap.load(sm.a(s), ta, sm.full(s), ig);
    } else {
      (void)tap;
      (void)ig;
      tma_load_2d(sm.a(s), ta, sm.full(s), kb * kBK, a_row);
    }
#pragma unroll
    for (int i = 0; i < BT::kBoxes; ++i) {
      const int col = BT::column(i, tn, n, nb, w, shift);
      const uint32_t dst = sm.b(s) + i * BT::kBoxBytes;
      if (CL == 1) {
        if (kTransB)
          tma_load_2d(dst, tb, sm.full(s), kb * kBK, col);
        else
          tma_load_2d(dst, tb, sm.full(s), col, kb * kBK);
      } else if (i % CL == static_cast<int>(rank)) { /* half the boxes, to both CTAs */
        const uint16_t mask = (1u << CL) - 1;
        if (kTransB)
          tma_load_2d_multicast(dst, tb, sm.full(s), kb * kBK, col, mask);
        else
          tma_load_2d_multicast(dst, tb, sm.full(s), col, kb * kBK, mask);
      }
    }
  }
}

/* The producer waits until the consumers released the stage's previous
 * round (round 0: parity 1 of a fresh barrier, already complete). */
template <int STAGES>
__device__ __forceinline__ void producer_acquire(uint32_t empty_bar, const Ring<STAGES> &ring) {
  mbar_wait(empty_bar, ring.phase ^ 1u);
}

/* ---- consumer: the main loop over one unit's k-blocks ------------------------------- */

/* A consumer warp is done with a stage: lane 0 arrives on its empty barrier
 * in every CTA that writes it (the cluster's TMA multicast). */
template <int CL> __device__ __forceinline__ void release_stage(uint32_t empty_bar, int lane) {
  if (lane == 0) {
    if (CL == 1) {
      mbar_arrive(empty_bar);
    } else {
#pragma unroll
      for (int r = 0; r < CL; ++r)
        mbar_arrive_cluster(empty_bar, r);
    }
  }
}
/* The same for the 4 warps of a warpgroup at once, from one thread. */
template <int CL> __device__ __forceinline__ void release_stage_wg(uint32_t empty_bar) {
  if (CL == 1) {
    mbar_arrive_cnt(empty_bar, 4);
  } else {
#pragma unroll
    for (int r = 0; r < CL; ++r)
      mbar_arrive_cluster_cnt(empty_bar, r, 4);
  }
}

/* acc = A[rows of this warpgroup, the unit's nk k-blocks] @ B tile. One
 * wgmma group per k-block stays in flight: a stage is released once the
 * group after it has been issued and it has retired. The last k-block's
 * stage is returned unreleased (-1 when nk == 0): the caller releases it,
 * or borrows it for the epilogue. hook(it) runs once k-block it's wgmmas
 * are issued (the tensor cores are busy meanwhile). */
template <class T, int BN, int CL, bool kTransB, int STAGES, class SmemT, class First>
__device__ __forceinline__ int mma_unit(float (&acc)[BN / 2], const SmemT &sm, Ring<STAGES> &ring,
                                        int nk, uint32_t a_off, int lane, First hook) {
  constexpr int kWgmmaTransB = kTransB ? 0 : 1; /* trans_b: B is K-major */
#pragma unroll
  for (int i = 0; i < BN / 2; ++i)
    acc[i] = 0.0f;
  int prev = -1;
  for (int it = 0; it < nk; ++it) {
    mbar_wait(sm.full(ring.stage), ring.phase);
    const uint32_t a_rows = sm.a(ring.stage) + a_off;
    const uint32_t b = sm.b(ring.stage);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk)
      Wgmma<BN, T>::template ss<kWgmmaTransB>(acc, desc_a(a_rows, kk), desc_b<kTransB>(b, kk), 1);
    wgmma_commit();
    hook(it);
    if (it > 0) {
      wgmma_wait<1>();
      release_stage<CL>(sm.empty(prev), lane);
    }
    prev = ring.stage;
    ring.advance();
  }
  wgmma_wait<0>(); /* unconditionally: ptxas then sees every accumulator read after a wait */
  fence_operands(acc);
  return prev;
}
struct NoHook {
  __device__ void operator()(int) const {}
};

/* ---- epilogue ------------------------------------------------------------------------ */
/* GemmArgs, the functor on the accumulators, the staged store, ADD by TMA,
 * epilogue, split_reduce: gemm_sm90_epilogue.cuh, a part of this file. */
#include "gemm_sm90_epilogue.cuh"

/* ---- the GEMM kernel ------------------------------------------------------------------ */

template <class T, class Epi, int BN, int STAGES, int CL, bool kSplit, bool kTransB, bool kIm2col,
          bool kSwap>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tma_a,
                const __grid_constant__ CUtensorMap tma_b,
                const __grid_constant__ CUtensorMap tma_c,
                const __grid_constant__ CUtensorMap tma_add, const GemmArgs<T, Epi> args) {
#if FP_SM90A
  constexpr int kOut = kSwap ? (BN + 63) / 64 * 64 : Epi::kPaired ? BN / 2 : BN;
  using SmemT = Smem<BN, STAGES, kOut>;
  static_assert(!kSwap || (std::is_same<Epi, EpiLinear<T>>::value && kTransB && CL == 1),
                "a swapped row: unpaired, trans_b, no cluster");
  static_assert(CL == 1 || BTile<BN, kTransB, Epi::kPaired>::kBoxes % CL == 0, "multicast split");
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = align1024(smem_raw);
  const SmemT sm{smem_u32(smem)};
  volatile int *flag = reinterpret_cast<volatile int *>(smem + SmemT::kFlagOffset);

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(sm.full(s), 1);       /* the producer's arrive.expect_tx */
      mbar_init(sm.empty(s), 8 * CL); /* every consumer warp of every CTA it feeds */
    }
    for (int i = 0; i < 2; ++i) {
      mbar_init(sm.epibar(i), 1);
      mbar_init(sm.epibar2(i), 1);
    }
    fence_mbar_init();
  }
  if (CL > 1)
    cluster_sync(); /* the peer's barriers exist before we multicast or arrive on them */
  else
    __syncthreads();

  const uint32_t rank = CL > 1 ? cluster_ctarank() : 0u;
  const int first = CL > 1 ? static_cast<int>(cluster_id_x()) : static_cast<int>(blockIdx.x);
  const int step = CL > 1 ? static_cast<int>(cluster_count_x()) : static_cast<int>(gridDim.x);
  const Sched &sc = args.sched;

  if (threadIdx.x < 128) {
    /* producer warpgroup */
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      tma_prefetch_map(&tma_a);
      tma_prefetch_map(&tma_b);
      Ring<STAGES> ring;
      for (int u = first; u < sc.units; u += step) {
        const Unit w = sc.decode<CL>(u, rank);
        const bool real = w.tm * kBM < args.M;
        const int a_row = real ? w.tm * kBM : 0; /* a phantom cluster tile */
        const auto prefetch_add = [&]() {
          /* The add chunks that go to the borrowed stage are loaded only in
           * the epilogue: pull them into L2 ahead. */
          const int n0 = w.tn * args.out_cols;
#pragma unroll
          for (int c = SmemT::kEpiBufs; c < kOut / kEpiCols; ++c)
            if (n0 + c * kEpiCols < args.N) {
              tma_prefetch_l2_2d(&tma_add, n0 + c * kEpiCols, a_row);
              if (a_row + 64 < args.M)
                tma_prefetch_l2_2d(&tma_add, n0 + c * kEpiCols, a_row + 64);
            }
        };
        const bool prefetch = SmemT::kBorrow > 0 && args.add_tma && real;
        ImTap tap{};
        ImTap btap[2] = {}; /* swapped im2col: each B box's first pixel (box past M: pixel 0) */
        if constexpr (kIm2col && kSwap) {
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int p0 = w.tn * BN + i * (BN / 2);
            btap[i].start(args.im, p0 < args.N ? p0 : 0, w.kb0);
          }
        } else if constexpr (kIm2col) {
          tap.start(args.im, a_row, w.kb0);
        }
        for (int kb = w.kb0; kb < w.kb1; ++kb) {
          producer_acquire<STAGES>(sm.empty(ring.stage), ring);
          load_ab<BN, STAGES, kOut, CL, kTransB, Epi::kPaired, kIm2col, kSwap>(
              sm, ring.stage, &tma_a, &tma_b, a_row, kb, w.tn, args.N, args.NB, args.out_cols,
              args.shift, rank, tap, args.im, btap);
          if constexpr (kIm2col && kSwap) {
            btap[0].next(args.im);
            btap[1].next(args.im);
          } else if constexpr (kIm2col) {
            tap.next(args.im);
          }
          ring.advance();
        }
        if (prefetch)
          prefetch_add(); /* STAGES k-blocks ahead of the consumers */
      }
    }
  } else {
    /* consumer warpgroups */
    setmaxnreg_inc<kConsumerRegs>();
    const int cw = threadIdx.x / 128 - 1;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    const bool elected = (threadIdx.x & 127) == 0;
    if (elected && args.tma_store)
      tma_prefetch_map(&tma_c);
    if (elected && args.add_tma)
      tma_prefetch_map(&tma_add);
    float acc[BN / 2];
    Ring<STAGES> ring;
    EpiState est;
    /* A stage borrowed by the previous epilogue: released (for this
     * warpgroup's 4 warps at once) once its boxes have been read, after the
     * next unit's first wgmmas are issued. */
    int held = -1;
    const auto release_held = [&]() {
      if (held >= 0 && elected) {
        if (args.tma_store)
          bulk_wait_read<0>();
        release_stage_wg<CL>(sm.empty(held));
      }
      held = -1;
    };
    for (int u = first; u < sc.units; u += step) {
      const Unit w = sc.decode<CL>(u, rank);
      const int nk = w.kb1 - w.kb0;
      /* ADD by TMA: the chunks of add that go to this warpgroup's own boxes
       * are loaded kAddLead k-blocks before the epilogue (unsplit tiles);
       * the producer pulls the others into L2 (they land in the borrowed
       * stage, free only at the epilogue). */
      const bool preload =
          args.add_tma && w.tm < sc.mtiles && sc.split_k == 1 && w.tm * kBM + cw * 64 < args.M;
      const auto hook = [&](int it) {
        if (it == 0)
          release_held();
        if (preload && it == max(nk - kAddLead, 0) && elected) {
          bulk_wait_read<0>(); /* the previous stores have read the boxes */
          load_add_chunks(sm, &tma_add, sm.epibar(cw), cw, -1, 0,
                          min(live_chunks<kOut>(args.N, args.out_cols, w.tn), SmemT::kEpiBufs),
                          w.tn * args.out_cols, w.tm * kBM + cw * 64);
        }
      };
      /* the epilogue's per-column operands (swapped: per kernel row), in
       * flight during the main loop */
      std::conditional_t<kSwap, RowOperands<T>, ColOperands<T, Epi, kOut>> cols;
      if (w.tm < sc.mtiles) {
        if constexpr (kSwap)
          cols.load(args.ep, w.tm * kBM + cw * 64 + warp * 16 + lane / 4, args.M);
        else
          cols.load(args.ep, w.tn * args.out_cols, min(args.N, (w.tn + 1) * args.out_cols));
      }
      const int last =
          mma_unit<T, BN, CL, kTransB>(acc, sm, ring, nk, cw * 64u * kRowBytes, lane, hook);
      release_held(); /* when the unit had no k-block */
      est.preloaded = preload && nk > 0;
      bool store = w.tm < sc.mtiles; /* not the phantom half of a cluster pair */
      int share0 = 0; /* swapped: the first 8-column group of the tile this block stores */
      if (store && kSplit && sc.split_k > 1) {
        if constexpr (kSwap) {
          if (args.parallel) {
            share0 = w.split * args.share_groups;
            split_reduce_share<T, BN>(args, acc, w, share0);
          } else {
            store = split_reduce<T, Epi, BN>(args, acc, w, flag);
          }
        } else {
          store = split_reduce<T, Epi, BN>(args, acc, w, flag);
        }
      }
      const bool borrow = store && last >= 0 && SmemT::kBorrow > 0 &&
                          live_chunks<kOut>(args.N, args.out_cols, w.tn) > SmemT::kEpiBufs;
      if (borrow) {
        consumers_sync(); /* both warpgroups' wgmmas are done with the stage */
        held = last;
      } else if (last >= 0) {
        release_stage<CL>(sm.empty(last), lane);
      }
      if constexpr (kSwap) {
        if (store)
          epilogue_swapped<T, BN>(args, &tma_c, sm, acc, cols, w.tm, w.tn, cw, warp, lane, share0);
      } else if (store) {
        epilogue<T, Epi, BN>(args, &tma_c, &tma_add, sm, acc, cols, w.tm, w.tn, held, cw, warp,
                             lane, est);
      }
    }
    release_held();
    if (args.tma_store && elected)
      bulk_wait<0>(); /* the staged stores are written (and their boxes read) before exit */
  }
  if (CL > 1)
    cluster_sync(); /* no CTA leaves while its peer may still arrive on its barriers */
#else
  __trap(); /* built for sm_90a only */
#endif
}

/* ---- the b2b (gemm2) kernel -------------------------------------------------------------- */
/* gemm2_kernel and its stores: gemm_sm90_b2b.cuh, a part of this file. */
#include "gemm_sm90_b2b.cuh"

/* ---- host --------------------------------------------------------------------------- */
/* Tensor maps, checks, the GEMM and gemm2 launches, kernel stubs:
 * gemm_sm90_host.cuh, a part of this file. */
#include "gemm_sm90_host.cuh"

} // namespace

/* ---- exports ------------------------------------------------------------------------------ */

cudaError_t sm90_run(const Problem &p, const Config &c, cudaStream_t stream) {
  if (!dtype_ok(p.dtype) || p.out == nullptr || p.M < 1 || p.N < 1 || p.K < 1 || p.M > kMaxCoord ||
      p.K > kMaxCoord || !epilogue_known(p.epilogue))
    return cudaErrorInvalidValue;
  const long long nb = FP_EPI_PAIRED(p.epilogue) ? 2 * p.N : p.N;
  if (nb > kMaxCoord || !operand_ok(p.a, p.lda, p.K) ||
      !operand_ok(p.b, p.ldb, p.trans_b ? p.K : nb))
    return cudaErrorInvalidValue;
  if ((FP_EPI_READS_BIAS(p.epilogue) && p.bias == nullptr) ||
      (FP_EPI_READS_ADD(p.epilogue) && p.add == nullptr))
    return cudaErrorInvalidValue;
  if (p.im2col != nullptr) { /* what the im2col loader assumes (ImGeom, ImTap) */
    const Im2col &v = *p.im2col;
    if (!p.trans_b || FP_EPI_PAIRED(p.epilogue) || v.C % kBK != 0 || v.N * v.P * v.Q != p.M ||
        static_cast<long long>(v.R) * v.S * v.C != p.K || p.lda != p.K)
      return cudaErrorInvalidValue;
  }
  const int cluster = c.cluster < 1 ? 1 : c.cluster;
#define FP_SM90_RUN_ROW(IDX, BM, BN, BK, ST, TH, SMEM, FL)                                         \
  case IDX:                                                                                        \
    if (c.bm != (BM) || c.bn != (BN) || c.bk != (BK) || c.stages != (ST) || c.threads != (TH) ||   \
        cluster != (((FL)&FP_GEMM_CFG_CLUSTER2) ? 2 : 1))                                          \
      return cudaErrorInvalidValue;                                                                \
    return run_row<BN, ST, (FL)>(p, c, stream);
  switch (c.index) {
    FP_GEMM_SM90_CONFIGS(FP_SM90_RUN_ROW)
  default:
    return cudaErrorInvalidValue;
  }
#undef FP_SM90_RUN_ROW
}

cudaError_t sm90_run2(const Problem2 &p, const Config &c, cudaStream_t stream) {
  if (!dtype_ok(p.dtype) || p.out == nullptr || p.M < 1 || p.N < 1 || p.K < 1 || p.P < 1 ||
      p.M > kMaxCoord || p.K > kMaxCoord || p.P > kMaxCoord || c.split_k > 1)
    return cudaErrorInvalidValue;
  if (!operand_ok(p.a, p.lda, p.K) || !operand_ok(p.b, p.ldb, p.trans_b ? p.K : p.N) ||
      !operand_ok(p.d, p.ldd, p.P))
    return cudaErrorInvalidValue;
#define FP_SM90_RUN2_ROW(IDX, BM, BN, BK, ST, TH, SMEM, FL)                                        \
  case IDX:                                                                                        \
    if (c.bm != (BM) || c.bn != (BN) || c.bk != (BK) || c.stages != (ST) || c.threads != (TH))     \
      return cudaErrorInvalidValue;                                                                \
    return run2_row<BM, BN, ST, (FL)>(p, stream);
  switch (c.index) {
    FP_GEMM_SM90_CONFIGS(FP_SM90_RUN2_ROW)
  default:
    return cudaErrorInvalidValue;
  }
#undef FP_SM90_RUN2_ROW
}

int sm90_kernel_stubs(const void **out, int cap) {
  StubList l{out, cap, 0};
#define FP_SM90_STUB_ROW(IDX, BM, BN, BK, ST, TH, SMEM, FL) stubs_row<BM, BN, ST, (FL)>(l);
  FP_GEMM_SM90_CONFIGS(FP_SM90_STUB_ROW)
#undef FP_SM90_STUB_ROW
  return l.n;
}

} // namespace fpgemm
