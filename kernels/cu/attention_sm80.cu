/* fuseport CUDA kernels, family attention, path SM80: FlashAttention-2 on
 * tensor cores (cp.async + ldmatrix + mma.sync m16n8k16, f16/bf16 in, f32
 * accumulate), any D <= FP_ATTN_MAX_D. Semantics: kernels.def, family
 * attention; fragment layouts: mma_sm80.cuh; the plan and the SIMT path:
 * attention.cu.
 *
 * A block owns BM = 16 * MT * WARPS query rows of one head (and one key
 * chunk when split); warp w owns MT slabs of 16 rows. The block streams
 * BN-key tiles of k and v through STAGES shared-memory buffers (cp.async,
 * one barrier a tile). Per tile and warp:
 *   S = Q K^T        A = q fragments (registers when QREG, else ldmatrix
 *                    from the block's q tile), B = k rows by plain ldmatrix
 *                    (k is the [n][k] "col" operand);
 *   online softmax   running max m and sum l per row in float32, in log2
 *                    units (scores times scale * log2 e, then exp2); the
 *                    max is reduced over the quad that shares a row;
 *   O = O*alpha + P V  P rounded to T in registers: the S accumulators of
 *                    two n8 tiles are exactly an A fragment of the k16 step,
 *                    so P never goes through shared memory; V by .trans
 *                    ldmatrix.
 * Masking: only the tiles that cross the causal diagonal or the end of the
 * keys (chunk end, SK) evaluate the mask; key tiles wholly above the
 * diagonal are never loaded (the block's key range stops at its last row's
 * limit). Rows that see no key keep m = -inf, l = 0: out 0, lse -inf.
 * Shared memory rows are DP + 8 elements (a 16-byte pad: an odd number of
 * 16-byte chunks a row, so the 8 rows of an ldmatrix phase hit 8 distinct
 * bank groups); head-dim padding (D..DP) and rows past S or the chunk are
 * zero-filled, so they add 0 to every product.
 * Loads: 16-byte cp.async where D % 8 == 0 and q, k, v are 16-byte aligned
 * (vec bit 0), else element loads through registers into the same layout.
 * Output (one split): each warp stages its rows, rounded, in its own part of
 * the q tile and writes them as 16-byte rows where out allows (vec bit 1);
 * split partials are written as floats straight from the fragments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_common.cuh"
#include "mma_sm80.cuh"

namespace fpattn {

namespace {

using namespace fpmma;

/* ---- configurations --------------------------------------------------------------
 * DP: head dimension in shared memory (a multiple of 16); MT: 16-row slabs a
 * warp; BN: keys a tile; STAGES: k/v tiles in flight; QREG: q fragments kept
 * in registers (else re-read from shared memory each tile, which frees
 * MT*DP/4 registers); MINB: blocks an SM the registers must allow. */
template <int DP_, int MT_, int WARPS_, int BN_, int STAGES_, bool QREG_, int MINB_,
          bool KS_ = false>
struct Cfg {
  static constexpr int DP = DP_, MT = MT_, WARPS = WARPS_, BN = BN_, STAGES = STAGES_;
  static constexpr bool QREG = QREG_, KS = KS_;
  static constexpr int MINB = MINB_;
  static constexpr int THREADS = 32 * WARPS, BM = KS ? 16 * MT : 16 * MT * WARPS;
  static constexpr int BNW = KS ? BN / WARPS : BN; /* keys of a tile a warp takes */
  static constexpr int CH = DP / 8;                /* 16-byte chunks a row */
  static constexpr int LD = DP + 8;                /* row stride in elements */
  static constexpr int KV_TILE = BN * LD;
  static constexpr int SMEM = (BM + 2 * STAGES * BN) * LD * 2;
  static_assert(DP % 16 == 0 && DP <= FP_ATTN_MAX_D, "head dimension in k16 steps");
  static_assert(BN % 16 == 0 && STAGES >= 2, "keys in k16 steps");
  static_assert(CH % 2 == 0, "odd chunks a padded row");
  static_assert(BNW % 16 == 0, "a warp's keys in k16 steps");
  static_assert(!KS || (WARPS * MT * DP * 16 + WARPS * MT * 2 * 32 * 2) * 4 <=
                           2 * STAGES * KV_TILE * 2,
                "the warps' partials fit in the k/v buffers");
};

/* the table (sm80_pick chooses a row; FUSEPORT_CUDA_ATTN_CFG=<name> forces
 * one where its DP >= D, for tuning). H100, 2026-11-27, 4x16x4096x128,
 * TFLOP/s non-causal / causal: d128 257 / 255 (bf16), d128n32 239 / 236,
 * d128w8 224 / 217, d128w8s3 222 / 219, g128 212 / 212 (f16); 4x16x4096x64
 * f16 d64w4 196 / 196 (d64 not yet timed). d128 spills ~124 bytes (255
 * registers) and is still the fastest. */
using CfgD64 = Cfg<64, 2, 4, 64, 3, true, 2>;       /* D = 64: 128 rows, q in registers */
using CfgD64W4 = Cfg<64, 1, 4, 64, 3, true, 3>;     /* D = 64: 64 rows, 3 blocks an SM */
using CfgD128 = Cfg<128, 2, 4, 64, 2, false, 2>;    /* D = 128: 128 rows, q re-read */
using CfgD128N32 = Cfg<128, 2, 4, 32, 2, false, 2>; /* the same, 32-key tiles */
using CfgD128W8 = Cfg<128, 1, 8, 64, 2, true, 1>;   /* D = 128: 8 warps of 16 rows */
using CfgD128W8S3 = Cfg<128, 1, 8, 64, 3, true, 1>;
/* S <= 16 (decode): 16 rows, the 4 warps split each tile's keys. D = 64 in
 * 128-key tiles, two blocks an SM as at D = 128 (and as ops/attention.c's
 * split rule counts): 1.01-1.34x the 64-key tiles in four stages, four
 * blocks an SM, on seven decode shapes (H200, 2026-11-29, fraction of the
 * copy bandwidth: 1x32x1x32768x64 0.77 -> 0.80, 16x32x1x4096x64 0.73 ->
 * 0.92; docs/results/2026-11-29-h200-attention-decode64-b587485); 64-key
 * tiles in six stages were slower. Deeper pipelines at one block an SM
 * lost too (H200, 2026-11-29, seven D = 128 and four D = 64 decode shapes,
 * each at its best split): 64-key tiles in six stages 1.03-1.10x the time
 * of these, D = 64 128-key tiles in six stages 1.02-1.07x; eight warps on
 * 128-key tiles in three stages 0.98-1.06x (the one gain, 1x2x1x65536x128,
 * within the split rule's spread). */
using CfgDec64 = Cfg<64, 1, 4, 128, 3, true, 2, true>;
using CfgDec128 = Cfg<128, 1, 4, 64, 3, true, 2, true>;
using CfgG32 = Cfg<32, 1, 4, 64, 2, true, 2>; /* any other D, rounded up */
using CfgG64 = Cfg<64, 1, 4, 64, 2, true, 2>;
using CfgG96 = Cfg<96, 1, 4, 64, 2, true, 2>;
using CfgG128 = Cfg<128, 1, 4, 64, 2, true, 2>;
using CfgG192 = Cfg<192, 1, 4, 32, 2, false, 2>;
using CfgG256 = Cfg<256, 1, 4, 32, 2, false, 2>;

#define FPATTN_CONFIGS(X)                                                                          \
  X(CfgD64, "d64", 64)                                                                             \
  X(CfgD64W4, "d64w4", 64)                                                                         \
  X(CfgD128, "d128", 128)                                                                          \
  X(CfgD128N32, "d128n32", 128)                                                                    \
  X(CfgD128W8, "d128w8", 128)                                                                      \
  X(CfgD128W8S3, "d128w8s3", 128)                                                                  \
  X(CfgDec64, "dec64", 64)                                                                         \
  X(CfgDec128, "dec128", 128)                                                                      \
  X(CfgG32, "g32", 32)                                                                             \
  X(CfgG64, "g64", 64)                                                                             \
  X(CfgG96, "g96", 96)                                                                             \
  X(CfgG128, "g128", 128)                                                                          \
  X(CfgG192, "g192", 192)                                                                          \
  X(CfgG256, "g256", 256)

#define FPATTN_ID(cfg, name, dp) C_##cfg,
enum CfgId { FPATTN_CONFIGS(FPATTN_ID) C_N };
#undef FPATTN_ID
#define FPATTN_NAME(cfg, name, dp) name,
const char *const kCfgNames[C_N] = {FPATTN_CONFIGS(FPATTN_NAME)};
#undef FPATTN_NAME
#define FPATTN_DP(cfg, name, dp) dp,
const int kCfgDp[C_N] = {FPATTN_CONFIGS(FPATTN_DP)};
#undef FPATTN_DP

/* ---- tiles: global -> shared ---------------------------------------------------------
 * rows [0, nrows) of a tile whose row 0 is src (rows of D elements); rows
 * >= valid and columns >= D are zeros. */
template <class C, class T>
__device__ __forceinline__ void load_tile(T *dst, const T *src, int nrows, long long valid, int D,
                                          bool vec) {
  const int total = nrows * C::CH;
  if (vec) {
    for (int i = threadIdx.x; i < total; i += C::THREADS) {
      const int r = i / C::CH, c = i - r * C::CH;
      const bool ok = r < valid && c * 8 < D;
      const T *g = ok ? src + (long long)r * D + c * 8 : src;
      cp_async_16(smem_addr(dst + r * C::LD + c * 8), g, ok ? 16 : 0);
    }
  } else {
    for (int i = threadIdx.x; i < total; i += C::THREADS) {
      const int r = i / C::CH, c = i - r * C::CH;
      unsigned short e[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int d = c * 8 + j;
        e[j] = r < valid && d < D
                   ? __ldg(reinterpret_cast<const unsigned short *>(src) + (long long)r * D + d)
                   : (unsigned short)0;
      }
      uint4 u;
      u.x = e[0] | ((unsigned)e[1] << 16);
      u.y = e[2] | ((unsigned)e[3] << 16);
      u.z = e[4] | ((unsigned)e[5] << 16);
      u.w = e[6] | ((unsigned)e[7] << 16);
      *reinterpret_cast<uint4 *>(dst + r * C::LD + c * 8) = u;
    }
  }
}

/* Whether a whole tile of NROWS rows can take load_tile_full: each thread's
 * 16-byte chunks a fixed number of rows apart. */
template <class C, int NROWS>
constexpr bool kFullTileLoads = C::THREADS % C::CH == 0 && NROWS % (C::THREADS / C::CH) == 0;

/* A whole tile: every row valid, D == DP, 16-byte aligned. Thread t copies
 * column chunk t % CH of rows t / CH, + THREADS / CH, ...: its addresses
 * are computed once and the copies unrolled with immediate offsets. The
 * general loop above costs about 25 instructions a 16-byte copy (bounds,
 * 64-bit products, a branch), which the decode tiles, with little
 * tensor-core work, felt: H200, 2026-11-29, two rounds, 15 decode shapes
 * 1.00-1.04x faster (8x32x1x32768x128 1066 -> 1039 us). Nsight Compute
 * before it, on that shape: SM throughput 52%, DRAM 78%, where cuDNN's
 * kernel of the same geometry (16 x 128 tiles, 128 threads, two blocks an
 * SM) reads at 93% with SM throughput 22%; not closed by this. */
template <class C, int NROWS, class T>
__device__ __forceinline__ void load_tile_full(T *dst, const T *src) {
  constexpr int RSTEP = C::THREADS / C::CH; /* rows one pass of the block covers */
  const int r = threadIdx.x / C::CH, c = threadIdx.x % C::CH;
  const T *g = src + r * C::DP + c * 8;
  const uint32_t s = smem_addr(dst + r * C::LD + c * 8);
#pragma unroll
  for (int k = 0; k < NROWS / RSTEP; ++k)
    cp_async_16(s + (uint32_t)(k * RSTEP * C::LD * (int)sizeof(T)), g + k * RSTEP * C::DP, 16);
}

/* ---- the kernel ------------------------------------------------------------------------ */

template <class T, class C>
__global__ void __launch_bounds__(C::THREADS, C::MINB) attention_sm80_kernel(const Params a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *qs = reinterpret_cast<T *>(smem_raw);
  T *kvs = qs + C::BM * C::LD; /* stage s: k at kvs + 2s*KV_TILE, v after it */

  /* block -> (q tile, head, chunk); causal: the longest tiles first */
  const long long ntiles = (a.S + C::BM - 1) / C::BM;
  const long long per_tile = (long long)a.bh * a.splits;
  long long tile = (long long)blockIdx.x / per_tile;
  const long long rem = (long long)blockIdx.x - tile * per_tile;
  const int bh = (int)(rem / a.splits), chunk = (int)(rem - (long long)bh * a.splits);
  if (a.causal)
    tile = ntiles - 1 - tile;
  const long long m0 = tile * C::BM;
  const long long row0 = (long long)bh * a.S + m0; /* global row of the tile's row 0 */

  long long lo, hi;
  key_range(a, m0, C::BM, chunk, lo, hi);
  long long hic = (long long)chunk * a.chunk + a.chunk; /* the chunk's end, uncut */
  if (hic > a.SK)
    hic = a.SK;
  const int nkt = hi > lo ? (int)((hi - lo + C::BN - 1) / C::BN) : 0;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wrow = C::KS ? 0 : warp * 16 * C::MT; /* the warp's first row in the tile */
  const int kw = C::KS ? warp * C::BNW : 0;       /* the warp's first key in a k/v tile */

  if (nkt == 0) { /* no key: out 0 (or a zero partial), lse -inf */
    for (long long i = threadIdx.x; i < (long long)C::BM * a.D; i += C::THREADS) {
      const long long r = i / a.D;
      if (m0 + r < a.S)
        store_row_value<T>(a, row0 + r, chunk, (int)(i - r * a.D), 0.0f);
    }
    for (int r = threadIdx.x; r < C::BM; r += C::THREADS)
      if (m0 + r < a.S)
        store_row_lse(a, row0 + r, chunk, -CUDART_INF_F);
    return;
  }

  const bool vec = (a.vec & 1) != 0;
  const T *qg = static_cast<const T *>(a.q) + row0 * a.D;
  const long long kv0 = (long long)bh * a.SK * a.D;
  const T *kg = static_cast<const T *>(a.k) + kv0;
  const T *vg = static_cast<const T *>(a.v) + kv0;

  /* whole k/v tiles take the unrolled copies where the layout allows */
  const bool full_rows = vec && a.D == C::DP;
  auto load_kv = [&](int j) {
    const long long n0 = lo + (long long)j * C::BN;
    T *ks = kvs + 2 * (j % C::STAGES) * C::KV_TILE;
    if constexpr (kFullTileLoads<C, C::BN>) {
      if (full_rows && hic - n0 >= C::BN) {
        load_tile_full<C, C::BN>(ks, kg + n0 * C::DP);
        load_tile_full<C, C::BN>(ks + C::KV_TILE, vg + n0 * C::DP);
        return;
      }
    }
    load_tile<C>(ks, kg + n0 * a.D, C::BN, hic - n0, a.D, vec);
    load_tile<C>(ks + C::KV_TILE, vg + n0 * a.D, C::BN, hic - n0, a.D, vec);
  };

  /* prologue: q with the first k/v tile, then STAGES - 2 more tiles */
  load_tile<C>(qs, qg, C::BM, a.S - m0, a.D, vec);
#pragma unroll
  for (int s = 0; s < C::STAGES - 1; ++s) {
    if (s < nkt)
      load_kv(s);
    cp_async_commit();
  }

  /* q fragments: lane l reads row (l & 15), k-chunk (l >> 4) of each 16x16 block */
  const uint32_t q_lane =
      smem_addr(qs + (wrow + (lane & 15)) * C::LD + (lane >> 4) * 8); /* + mt*16 rows, kk*16 */
  uint32_t qf[C::QREG ? C::MT : 1][C::QREG ? C::DP / 16 : 1][4];
  if constexpr (C::QREG) {
    cp_async_wait<C::STAGES - 2>();
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
      for (int kk = 0; kk < C::DP / 16; ++kk)
        ldmatrix_x4(qf[mt][kk], q_lane + (mt * 16 * C::LD + kk * 16) * 2);
  }

  float o[C::MT][C::DP / 8][4];
  float m[C::MT][2], l[C::MT][2];
#pragma unroll
  for (int mt = 0; mt < C::MT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < C::DP / 8; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o[mt][dt][e] = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[mt][h] = -CUDART_INF_F;
      l[mt][h] = 0.0f;
    }
  }

  /* lane offsets of the k (plain) and v (.trans) ldmatrix reads */
  const int k_lane = ((lane & 7) + 8 * (lane >> 4)) * C::LD + ((lane >> 3) & 1) * 8;
  const int v_lane = ((lane & 7) + 8 * ((lane >> 3) & 1)) * C::LD + (lane >> 4) * 8;
  /* the keys each of the thread's rows sees, relative to lo: [0, lim), in
   * int (validated: SK < 2^31 - 2^16); full: the keys every row of the block
   * sees (tiles up to it need no mask) */
  const long long diag = a.SK - a.S; /* row i sees keys j <= i + diag */
  const long long span = hic - lo;
  auto rel_lim = [&](long long row) {
    long long lim = a.causal ? row + diag + 1 - lo : span;
    return (int)(lim < 0 ? 0 : (lim > span ? span : lim));
  };
  int lim[C::MT][2];
#pragma unroll
  for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      lim[mt][h] = rel_lim(m0 + wrow + mt * 16 + g + 8 * h);
  const int full = rel_lim(m0);

  for (int j = 0; j < nkt; ++j) {
    cp_async_wait<C::STAGES - 2>();
    __syncthreads();
    if (j + C::STAGES - 1 < nkt)
      load_kv(j + C::STAGES - 1);
    cp_async_commit();

    const T *ks = kvs + 2 * (j % C::STAGES) * C::KV_TILE;
    const uint32_t k_base = smem_addr(ks + kw * C::LD + k_lane),
                   v_base = smem_addr(ks + C::KV_TILE + kw * C::LD + v_lane);
    const int n0 = j * C::BN; /* relative to lo */
    const int nw = n0 + kw;   /* the warp's first key */

    /* S = Q K^T */
    float s[C::MT][C::BNW / 8][4];
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < C::BNW / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[mt][nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < C::DP / 16; ++kk) {
      uint32_t af[C::MT][4];
#pragma unroll
      for (int mt = 0; mt < C::MT; ++mt) {
        if constexpr (C::QREG) {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            af[mt][e] = qf[mt][kk][e];
        } else {
          ldmatrix_x4(af[mt], q_lane + (mt * 16 * C::LD + kk * 16) * 2);
        }
      }
#pragma unroll
      for (int np = 0; np < C::BNW / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, k_base + (np * 16 * C::LD + kk * 16) * 2);
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt) {
          Mma<T>::run(s[mt][2 * np], af[mt], b[0], b[1]);
          Mma<T>::run(s[mt][2 * np + 1], af[mt], b[2], b[3]);
        }
      }
    }

    /* the mask, on the tiles that cross the diagonal or the keys' end */
    const bool masked = n0 + C::BN > full;

    /* online softmax; P rounded to T as the A fragments of P V */
    uint32_t pf[C::MT][C::BNW / 16][4];
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -CUDART_INF_F;
#pragma unroll
        for (int nt = 0; nt < C::BNW / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float x = s[mt][nt][2 * h + e] * a.scale_log2;
            if (masked && nw + nt * 8 + 2 * t + e >= lim[mt][h])
              x = -CUDART_INF_F;
            s[mt][nt][2 * h + e] = x;
            mx = fmaxf(mx, x);
          }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[mt][h], mx);
        const float m_use = m_new == -CUDART_INF_F ? 0.0f : m_new;
        const float alpha = fast_exp2(m[mt][h] - m_use);
        m[mt][h] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < C::BNW / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = fast_exp2(s[mt][nt][2 * h + e] - m_use);
            s[mt][nt][2 * h + e] = p;
            sum += p;
          }
        l[mt][h] = l[mt][h] * alpha + sum;
#pragma unroll
        for (int dt = 0; dt < C::DP / 8; ++dt) {
          o[mt][dt][2 * h] *= alpha;
          o[mt][dt][2 * h + 1] *= alpha;
        }
      }
#pragma unroll
      for (int kk = 0; kk < C::BNW / 16; ++kk) {
        pf[mt][kk][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pf[mt][kk][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pf[mt][kk][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pf[mt][kk][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
    }

    /* O += P V */
#pragma unroll
    for (int kk = 0; kk < C::BNW / 16; ++kk)
#pragma unroll
      for (int dp = 0; dp < C::DP / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_base + (kk * 16 * C::LD + dp * 16) * 2);
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt) {
          Mma<T>::run(o[mt][2 * dp], pf[mt][kk], b[0], b[1]);
          Mma<T>::run(o[mt][2 * dp + 1], pf[mt][kk], b[2], b[3]);
        }
      }
  }
  cp_async_wait<0>();

  if constexpr (C::KS) {
    /* the warps' partials over their keys merge into warp 0's: m, the
     * thread's part of l and the unnormalised o, through the k/v buffers */
    __syncthreads();
    float *po = reinterpret_cast<float *>(kvs);     /* [warp][mt][dt][lane][4] */
    float *pm = po + C::WARPS * C::MT * C::DP * 16; /* [warp][mt][h][lane] */
    float *pl = pm + C::WARPS * C::MT * 2 * 32;
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt) {
#pragma unroll
      for (int dt = 0; dt < C::DP / 8; ++dt)
        *reinterpret_cast<float4 *>(po +
                                    (((warp * C::MT + mt) * (C::DP / 8) + dt) * 32 + lane) * 4) =
            make_float4(o[mt][dt][0], o[mt][dt][1], o[mt][dt][2], o[mt][dt][3]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        pm[((warp * C::MT + mt) * 2 + h) * 32 + lane] = m[mt][h];
        pl[((warp * C::MT + mt) * 2 + h) * 32 + lane] = l[mt][h];
      }
    }
    __syncthreads();
    if (warp != 0)
      return;
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mm = m[mt][h];
        for (int w = 1; w < C::WARPS; ++w)
          mm = fmaxf(mm, pm[((w * C::MT + mt) * 2 + h) * 32 + lane]);
        const float m_use = mm == -CUDART_INF_F ? 0.0f : mm;
        const float f0 = fast_exp2(m[mt][h] - m_use);
        l[mt][h] *= f0;
#pragma unroll
        for (int dt = 0; dt < C::DP / 8; ++dt) {
          o[mt][dt][2 * h] *= f0;
          o[mt][dt][2 * h + 1] *= f0;
        }
        for (int w = 1; w < C::WARPS; ++w) {
          const float f = fast_exp2(pm[((w * C::MT + mt) * 2 + h) * 32 + lane] - m_use);
          l[mt][h] += f * pl[((w * C::MT + mt) * 2 + h) * 32 + lane];
#pragma unroll
          for (int dt = 0; dt < C::DP / 8; ++dt) {
            const float *q4 = po + (((w * C::MT + mt) * (C::DP / 8) + dt) * 32 + lane) * 4;
            o[mt][dt][2 * h] += f * q4[2 * h];
            o[mt][dt][2 * h + 1] += f * q4[2 * h + 1];
          }
        }
        m[mt][h] = mm;
      }
  }

  /* epilogue: the row sums over the quad, then out and lse */
  float inv[C::MT][2];
#pragma unroll
  for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float lr = l[mt][h];
      lr += __shfl_xor_sync(0xffffffffu, lr, 1);
      lr += __shfl_xor_sync(0xffffffffu, lr, 2);
      inv[mt][h] = lr > 0.0f ? 1.0f / lr : 0.0f;
      const long long row = m0 + wrow + mt * 16 + g + 8 * h;
      if (t == 0 && row < a.S)
        store_row_lse(a, row0 + wrow + mt * 16 + g + 8 * h, chunk, row_lse(m[mt][h], lr));
    }

  if (a.splits > 1) { /* float partials straight from the fragments */
    float *op = static_cast<float *>(a.opart) + ((long long)chunk * a.R + row0) * a.D;
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wrow + mt * 16 + g + 8 * h;
        if (m0 + r >= a.S)
          continue;
#pragma unroll
        for (int dt = 0; dt < C::DP / 8; ++dt) {
          const int d = dt * 8 + 2 * t;
          if (d < a.D)
            op[(long long)r * a.D + d] = o[mt][dt][2 * h] * inv[mt][h];
          if (d + 1 < a.D)
            op[(long long)r * a.D + d + 1] = o[mt][dt][2 * h + 1] * inv[mt][h];
        }
      }
    return;
  }

  /* one split: the warp's rows, rounded, through its own rows of the q tile */
  __syncwarp();
#pragma unroll
  for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      T *srow = qs + (wrow + mt * 16 + g + 8 * h) * C::LD;
#pragma unroll
      for (int dt = 0; dt < C::DP / 8; ++dt)
        *reinterpret_cast<uint32_t *>(srow + dt * 8 + 2 * t) =
            pack2<T>(o[mt][dt][2 * h] * inv[mt][h], o[mt][dt][2 * h + 1] * inv[mt][h]);
    }
  __syncwarp();
  T *og = static_cast<T *>(a.out) + row0 * a.D;
  const bool ovec = (a.vec & 2) != 0;
  constexpr int WR = 16 * C::MT;
  for (int i = lane; i < WR * C::CH; i += 32) {
    const int r = i / C::CH, c = i - r * C::CH;
    const int tr = wrow + r;
    if (m0 + tr >= a.S || c * 8 >= a.D)
      continue;
    const T *src = qs + tr * C::LD + c * 8;
    T *dst = og + (long long)tr * a.D + c * 8;
    if (ovec) {
      *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
    } else {
      for (int e = 0; e < 8 && c * 8 + e < a.D; ++e)
        dst[e] = src[e];
    }
  }
}

template <class T, class C> const void *stub() {
  return reinterpret_cast<const void *>(&attention_sm80_kernel<T, C>);
}

template <class T, class C> cudaError_t launch(const Problem &p, cudaStream_t stream) {
  Params a = params_of(p);
  const uintptr_t al = reinterpret_cast<uintptr_t>(p.q) | reinterpret_cast<uintptr_t>(p.k) |
                       reinterpret_cast<uintptr_t>(p.v);
  const bool d8 = p.D % 8 == 0;
  a.vec = (d8 && (al & 15) == 0 ? 1 : 0) |
          (d8 && p.splits == 1 && (reinterpret_cast<uintptr_t>(p.out) & 15) == 0 ? 2 : 0);
  const long long blocks = ((p.S + C::BM - 1) / C::BM) * p.B * p.H * p.splits;
  if (blocks > 0x7fffffffLL)
    return cudaErrorInvalidConfiguration;
  void (*kernel)(const Params) = &attention_sm80_kernel<T, C>;
  cudaError_t err = fpgemm::set_smem(kernel, C::SMEM);
  if (err != cudaSuccess)
    return err;
  kernel<<<(unsigned)blocks, C::THREADS, C::SMEM, stream>>>(a);
  return cudaGetLastError();
}

template <class T> cudaError_t run_t(const Problem &p, int cfg, cudaStream_t stream) {
  switch (cfg) {
#define FPATTN_CASE(c, name, dp)                                                                   \
  case C_##c:                                                                                      \
    return launch<T, c>(p, stream);
    FPATTN_CONFIGS(FPATTN_CASE)
#undef FPATTN_CASE
  default:
    return cudaErrorInvalidValue;
  }
}

template <class T> void stubs_t(const void **out, int &n) {
#define FPATTN_STUB(c, name, dp) out[n++] = stub<T, c>();
  FPATTN_CONFIGS(FPATTN_STUB)
#undef FPATTN_STUB
}

} // namespace

bool sm80_eligible(const Problem &p) {
  return (p.dtype == FP_F16 || p.dtype == FP_BF16) && p.D >= 1 && p.D <= FP_ATTN_MAX_D;
}

/* decode-like launches (a few query rows) take one warp a block, so that a
 * block's tensor-core work stays far below its k/v traffic; D = 64 and 128
 * their own tiles; any other D the generic tiles of the next width up */
int sm80_pick(const Problem &p) {
  static const char *const forced = getenv("FUSEPORT_CUDA_ATTN_CFG");
  if (forced != nullptr)
    for (int c = 0; c < C_N; ++c)
      if (strcmp(forced, kCfgNames[c]) == 0 && kCfgDp[c] >= p.D)
        return c;
  if (p.S <= 16 && (p.D == 64 || p.D == 128))
    return p.D == 64 ? C_CfgDec64 : C_CfgDec128;
  if (p.D == 64)
    return C_CfgD64;
  if (p.D == 128)
    return C_CfgD128;
  if (p.D <= 32)
    return C_CfgG32;
  if (p.D <= 64)
    return C_CfgG64;
  if (p.D <= 96)
    return C_CfgG96;
  if (p.D <= 128)
    return C_CfgG128;
  if (p.D <= 192)
    return C_CfgG192;
  return C_CfgG256;
}

const char *sm80_config_name(int cfg) { return cfg >= 0 && cfg < C_N ? kCfgNames[cfg] : "?"; }

cudaError_t sm80_run(const Problem &p, int cfg, cudaStream_t stream) {
  return p.dtype == FP_BF16 ? run_t<__nv_bfloat16>(p, cfg, stream) : run_t<__half>(p, cfg, stream);
}

int sm80_stubs(const void **out, int cap) {
  const void *mine[2 * C_N];
  int n = 0;
  stubs_t<__half>(mine, n);
  stubs_t<__nv_bfloat16>(mine, n);
  int k = 0;
  for (; k < n && k < cap; ++k)
    out[k] = mine[k];
  return k;
}

} // namespace fpattn
