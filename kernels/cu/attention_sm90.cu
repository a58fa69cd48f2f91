/* fuseport CUDA kernels, family attention, path SM90: FlashAttention-3's
 * scheme on Hopper (sm_90a) tensor cores, f16/bf16, D = 64 or 128, any
 * number of key splits. Semantics: kernels.def, family attention; PTX
 * wrappers and descriptor rules: mma_sm90.cuh; the plan and the other
 * paths: attention.cu, attention_sm80.cu. Built only for sm_90a (CMakeLists.txt's
 * fuseport_cuda_sm90 library).
 *
 * A block (384 threads, one an SM) owns BM = 128 query rows of one head
 * and one key chunk (split > 1: keys [c C, min(SK, (c + 1) C)), cut by the
 * causal limit of the block's last row):
 *   warpgroup 0, the producer (registers cut to kProducerRegs): thread 0
 *     loads q once, then the head's k and v tiles of BN keys with TMA
 *     (3-D maps [B*H, rows, D], boxes of 64 d x rows, 128B swizzle: rows
 *     past S or SK of the head are zero-filled) into a ring of ST stages;
 *     k and v of a stage have their own `full` and `empty` barriers, so a
 *     k tile is refilled as soon as its S = Q K^T retired, before the
 *     P V of the same stage;
 *   warpgroups 1 and 2, the consumers (registers raised to
 *     kConsumerRegs): rows [0, 64) and [64, 128) of the block,
 *       S = Q K^T   wgmma m64nBNk16, q (A) and k (B, K-major: k is [keys, d])
 *                   from shared memory, float accumulators;
 *       softmax     online, in registers, log2 units (exp2 with scale *
 *                   log2 e folded in), row max and sum over the quad that
 *                   shares a row (the accumulator layout), mask only on the
 *                   tiles that cross the causal diagonal or SK;
 *       O += P V    P rounded to T in registers as the register A operand
 *                   (an accumulator fragment is an A fragment), v from
 *                   shared memory as an MN-major B ([keys, d] row-major:
 *                   d is N), wgmma's transpose bit.
 * Overlap (Cfg::OV, FlashAttention-3's intra-warpgroup pipelining): the
 * wgmmas of S_j and of P_{j-1} V_{j-1} are issued together; the softmax of
 * S_j runs while P_{j-1} V_{j-1} is still on the tensor cores, and O is
 * rescaled once that retired. Ping-pong (Cfg::PP): two named barriers make
 * the consumer warpgroups issue their wgmma batches in turn, so one's
 * softmax overlaps the other's GEMMs.
 * Causal blocks take the longest q tiles first and never load key tiles
 * past their last row's limit; rows that see no key keep m = -inf, l = 0
 * (out 0, lse -inf); a block that sees no key writes that directly, k and
 * v unread. Key tiles may run past the chunk's end into the next chunk's
 * keys: the last tile is masked at the chunk's end like the causal limit.
 * Output: o / l rounded, 16 bytes a lane (the quad's lanes exchange their
 * pairs: quad_row16), straight to global memory; split > 1: o / l as
 * float32 partial rows (quad_row32, two 16-byte stores a lane and block)
 * and the chunk's logsumexp in lpart.
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "attention_common.cuh"
#include "mma_sm90.cuh"

#if defined(__CUDA_ARCH__) && !FP_SM90A
#pragma nv_diag_suppress 177
#endif

namespace fpattn {

namespace {

using namespace fpsm90;

constexpr int kThreads = 384;
constexpr int kBM = 128;
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 65536, "the SM's register file");

/* DP: head dimension (64 or 128); BN: keys a tile; ST: stages; OV: the
 * intra-warpgroup overlap; PP: ping-pong between the consumer warpgroups
 * (with OV only). */
template <int DP_, int BN_, int ST_, bool OV_, bool PP_> struct Cfg {
  static constexpr int DP = DP_, BN = BN_, ST = ST_;
  static constexpr bool OV = OV_, PP = PP_ && OV_;
  static constexpr int QB = kBM * DP * 2;            /* q: DP/64 boxes of 128 rows x 128 bytes */
  static constexpr int KB = BN * DP * 2;             /* a k (v) tile: DP/64 boxes of BN rows */
  static constexpr int BAR = QB + ST * 2 * KB;       /* barriers after the stages */
  static constexpr int NBAR = 1 + 4 * ST;            /* qfull, kfull, vfull, kempty, vempty */
  static constexpr int SMEM = BAR + 8 * NBAR + 1024; /* + the 1024-byte alignment */
  static_assert(DP % 64 == 0 && BN % 64 == 0 && BN <= 256 && BN != 256, "tiles of 128-byte rows");
  static_assert(SMEM <= 232448, "the H100's shared memory per block");
};

using CfgH64 = Cfg<64, 128, 3, true, true>;
using CfgH64O = Cfg<64, 128, 3, true, false>;
using CfgH64B = Cfg<64, 128, 3, false, false>;
using CfgH64N192 = Cfg<64, 192, 3, true, true>;
using CfgH128 = Cfg<128, 128, 2, true, true>;
using CfgH128O = Cfg<128, 128, 2, true, false>;
using CfgH128B = Cfg<128, 128, 2, false, false>;
using CfgH128S3 = Cfg<128, 128, 3, true, true>;

#define FPATTN90_CONFIGS(X)                                                                        \
  X(CfgH64, "h64", 64)                                                                             \
  X(CfgH64O, "h64o", 64)                                                                           \
  X(CfgH64B, "h64b", 64)                                                                           \
  X(CfgH64N192, "h64n192", 64)                                                                     \
  X(CfgH128, "h128", 128)                                                                          \
  X(CfgH128O, "h128o", 128)                                                                        \
  X(CfgH128B, "h128b", 128)                                                                        \
  X(CfgH128S3, "h128s3", 128)

/* The configurations with a split kernel (SPLIT below): the picked ones
 * (the library's size: each kernel is ~0.25 MB of the fat binary). */
template <class C>
constexpr bool kHasSplit = std::is_same<C, CfgH64>::value || std::is_same<C, CfgH128S3>::value;

#define FPATTN90_ID(cfg, name, dp) C_##cfg,
enum CfgId { FPATTN90_CONFIGS(FPATTN90_ID) C_N };
#undef FPATTN90_ID
#define FPATTN90_NAME(cfg, name, dp) name,
const char *const kCfgNames[C_N] = {FPATTN90_CONFIGS(FPATTN90_NAME)};
#undef FPATTN90_NAME
#define FPATTN90_DP(cfg, name, dp) dp,
const int kCfgDp[C_N] = {FPATTN90_CONFIGS(FPATTN90_DP)};
#undef FPATTN90_DP
#define FPATTN90_SPLIT(cfg, name, dp) kHasSplit<cfg>,
const bool kCfgSplit[C_N] = {FPATTN90_CONFIGS(FPATTN90_SPLIT)};
#undef FPATTN90_SPLIT

__device__ __forceinline__ void named_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

/* Shared-memory addresses of a block's buffers and barriers. */
template <class C> struct Smem {
  uint32_t base;
  __device__ uint32_t q() const { return base; }
  __device__ uint32_t k(int s) const { return base + C::QB + s * 2 * C::KB; }
  __device__ uint32_t v(int s) const { return base + C::QB + s * 2 * C::KB + C::KB; }
  __device__ uint32_t qfull() const { return base + C::BAR; }
  __device__ uint32_t kfull(int s) const { return base + C::BAR + 8 * (1 + s); }
  __device__ uint32_t vfull(int s) const { return base + C::BAR + 8 * (1 + C::ST + s); }
  __device__ uint32_t kempty(int s) const { return base + C::BAR + 8 * (1 + 2 * C::ST + s); }
  __device__ uint32_t vempty(int s) const { return base + C::BAR + 8 * (1 + 3 * C::ST + s); }
};

template <int ST> struct Ring {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == ST) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

/* Descriptors of k16 step kk (see mma_sm90.cuh, 16-bit types, 128B swizzle).
 * q (A, K-major): the warpgroup's 64 rows of each 64-wide d box; k (B,
 * K-major): BN rows of each d box; v (B, MN-major): k16 step kk is keys
 * 16 kk .. of every d box, the boxes (64 d wide) BN * 128 bytes apart. */
template <class C> __device__ __forceinline__ uint64_t desc_q(uint32_t q_rows, int kk) {
  return make_smem_desc_sw128(q_rows + (kk / 4) * kBM * 128 + (kk % 4) * 32, 16, 1024);
}
template <class C> __device__ __forceinline__ uint64_t desc_k(uint32_t k, int kk) {
  return make_smem_desc_sw128(k + (kk / 4) * C::BN * 128 + (kk % 4) * 32, 16, 1024);
}
template <class C> __device__ __forceinline__ uint64_t desc_v(uint32_t v, int kk) {
  return make_smem_desc_sw128(v + kk * 16 * 128, C::BN * 128, 1024);
}

/* quad_row16's float32 form (split partials): lane q of a quad gets the
 * eight columns of block 4 g + q of row half h as two float4 (columns
 * 0..3, 4..7 of the block). Every lane of the warp must call it. */
template <int N>
__device__ __forceinline__ void quad_row32(const float (&acc)[N], int g, int h, int lane,
                                           float4 &w0, float4 &w1) {
  const int q = lane & 3;
  float u0[4], u1[4], v0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, v1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int l = 4 * (4 * g + t) + 2 * h;
    u0[t] = acc[l];
    u1[t] = acc[l + 1];
  }
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const int send = (q + s) & 3, src = (q - s) & 3;
    const float x0 = send == 0 ? u0[0] : send == 1 ? u0[1] : send == 2 ? u0[2] : u0[3];
    const float x1 = send == 0 ? u1[0] : send == 1 ? u1[1] : send == 2 ? u1[2] : u1[3];
    const float y0 = __shfl_sync(0xffffffffu, x0, (lane & ~3) | src);
    const float y1 = __shfl_sync(0xffffffffu, x1, (lane & ~3) | src);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      v0[r] = src == r ? y0 : v0[r];
      v1[r] = src == r ? y1 : v1[r];
    }
  }
  w0 = make_float4(v0[0], v1[0], v0[1], v1[1]);
  w1 = make_float4(v0[2], v1[2], v0[3], v1[3]);
}

/* SPLIT: splits > 1 (chunks, float partials); else the one-split kernel,
 * the chunk loop folded away (its registers: no spills). */
template <class T, class C, bool SPLIT>
__global__ void __launch_bounds__(kThreads, 1)
    attention_sm90_kernel(const __grid_constant__ CUtensorMap tq,
                          const __grid_constant__ CUtensorMap tk,
                          const __grid_constant__ CUtensorMap tv, const Params a, const int hgroup,
                          const int cpb) {
#if FP_SM90A
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                              ~uintptr_t(1023));
  const Smem<C> sm{smem_u32(smem)};

  /* block -> (q tile, head, chunks [c0, c1)): a block takes cpb
   * consecutive chunks of its q tile (splits > 1), one after the other
   * through the same k/v ring, q loaded once. The units (head, chunk
   * group), group fastest, in groups of hgroup units (whole heads: the
   * host passes heads * groups), a group's blocks tile-major, so the
   * blocks in flight share a few heads' k and v in L2; causal: a group's
   * longest tiles first (hgroup 1: the tiles of a head next to each other) */
  const int nsub = SPLIT ? (a.splits + cpb - 1) / cpb : 1;
  const long long ntiles = (a.S + kBM - 1) / kBM;
  const long long units = (long long)a.bh * nsub;
  const long long per_group = (long long)hgroup * ntiles;
  const long long grp = (long long)blockIdx.x / per_group;
  const long long first = grp * hgroup;
  const long long gsize = units - first < hgroup ? units - first : hgroup;
  const long long r = (long long)blockIdx.x - grp * per_group;
  long long tile = r / gsize;
  const long long unit = first + (r - tile * gsize);
  const int bh = nsub == 1 ? (int)unit : (int)(unit / nsub);
  const int c0 = nsub == 1 ? 0 : (int)(unit - (long long)bh * nsub) * cpb;
  const int c1 = !SPLIT ? 1 : c0 + cpb < a.splits ? c0 + cpb : a.splits;
  if (a.causal)
    tile = ntiles - 1 - tile;
  const long long m0 = tile * kBM;
  const long long row0 = (long long)bh * a.S + m0;
  /* the key tiles of chunk c for the block: [lo, lo + nkt BN), cut at hi
   * (the chunk's end and the last row's causal limit); the chunks that
   * have any are c0 .. ce - 1 (the causal limit cuts the later ones) */
  auto tiles_of = [&](int c, long long &lo, long long &hi) {
    key_range(a, m0, kBM, c, lo, hi);
    return hi > lo ? (int)((hi - lo + C::BN - 1) / C::BN) : 0;
  };
  int ce = c0;
  for (; ce < c1; ++ce) {
    long long lo, hi;
    if (tiles_of(ce, lo, hi) == 0)
      break;
  }

  if (ce == c0) { /* no key for any row: out 0, lse -inf (split: the lse alone) */
    if (threadIdx.x >= 128) {
      const int ct = threadIdx.x - 128;
      /* split > 1: the partial rows of a -inf lse are not read by the
       * combine (kernels.def), and causal memeff has many such blocks:
       * 4x16x4096x128 in 2048-key chunks, a quarter of its 4096 blocks,
       * 67 MB of zeros the combine then read back */
      if (!SPLIT) {
        for (long long i = ct; i < (long long)kBM * a.D; i += 256) {
          const long long rr = i / a.D;
          if (m0 + rr < a.S)
            static_cast<T *>(a.out)[(row0 + rr) * a.D + (i - rr * a.D)] =
                Storage<T>::from_float(0.0f);
        }
      }
      if (ct < kBM && m0 + ct < a.S)
        for (int c = c0; c < c1; ++c)
          store_row_lse(a, row0 + ct, c, -CUDART_INF_F);
    }
    return;
  }

  if (threadIdx.x == 0) {
    mbar_init(sm.qfull(), 1);
    for (int s = 0; s < C::ST; ++s) {
      mbar_init(sm.kfull(s), 1);
      mbar_init(sm.vfull(s), 1);
      mbar_init(sm.kempty(s), 8); /* every consumer warp */
      mbar_init(sm.vempty(s), 8);
    }
    fence_mbar_init();
  }
  __syncthreads();

  if (threadIdx.x < 128) {
    /* ---- producer ---- */
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      tma_prefetch_map(&tq);
      tma_prefetch_map(&tk);
      tma_prefetch_map(&tv);
      mbar_arrive_expect_tx(sm.qfull(), C::QB);
#pragma unroll
      for (int db = 0; db < C::DP / 64; ++db)
        tma_load_3d(sm.q() + db * kBM * 128, &tq, sm.qfull(), db * 64, (int)m0, bh);
      Ring<C::ST> ring;
      for (int c = c0; c < ce; ++c) {
        long long lo, hi;
        const int nkt = tiles_of(c, lo, hi);
        for (int j = 0; j < nkt; ++j) {
          const int n0 = (int)lo + j * C::BN;
          mbar_wait(sm.kempty(ring.stage), ring.phase ^ 1u);
          mbar_arrive_expect_tx(sm.kfull(ring.stage), C::KB);
#pragma unroll
          for (int db = 0; db < C::DP / 64; ++db)
            tma_load_3d(sm.k(ring.stage) + db * C::BN * 128, &tk, sm.kfull(ring.stage), db * 64, n0,
                        bh);
          mbar_wait(sm.vempty(ring.stage), ring.phase ^ 1u);
          mbar_arrive_expect_tx(sm.vfull(ring.stage), C::KB);
#pragma unroll
          for (int db = 0; db < C::DP / 64; ++db)
            tma_load_3d(sm.v(ring.stage) + db * C::BN * 128, &tv, sm.vfull(ring.stage), db * 64, n0,
                        bh);
          ring.advance();
        }
      }
    }
  } else {
    /* ---- consumers ---- */
    setmaxnreg_inc<kConsumerRegs>();
    const int ct = threadIdx.x - 128;
    const int cw = ct / 128, warp = (ct / 32) % 4, lane = ct % 32;
    const int q4 = lane & 3;
    const int rloc = cw * 64 + warp * 16 + (lane >> 2); /* + 8 h */
    const uint32_t q_rows = sm.q() + cw * 64 * 128;

    /* the keys each of the thread's rows sees, relative to lo: [0, lim),
     * cut at the chunk's end; full: every row of the block sees the keys
     * before it (tiles below it need no mask) */
    const long long diag = a.SK - a.S;
    int lim[2] = {0, 0}, full = 0; /* set per chunk */

    float o[C::DP / 2];
    float s[C::BN / 2];
    uint32_t pf[C::BN / 16][4];
    float mrow[2], lrow[2];
    const float sl2 = a.scale_log2;

    /* the online softmax of tile j (s: raw scores -> probabilities);
     * returns the factors of the old o in alpha */
    /* kPos (scale > 0, the usual case): the max over the raw scores and
     * one FFMA a score, p = 2^(s * sl2 - m); else scaled first */
    auto softmax_t = [&](int j, float(&alpha)[2], auto pos) {
      constexpr bool kPos = decltype(pos)::value;
      const int n0 = j * C::BN;
      const bool masked = n0 + C::BN > full;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -CUDART_INF_F;
#pragma unroll
        for (int jj = 0; jj < C::BN / 8; ++jj)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            float x = kPos ? s[4 * jj + 2 * h + c] : s[4 * jj + 2 * h + c] * sl2;
            if (masked && n0 + 8 * jj + 2 * q4 + c >= lim[h])
              x = -CUDART_INF_F;
            s[4 * jj + 2 * h + c] = x;
            mx = fmaxf(mx, x);
          }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        if (kPos)
          mx *= sl2; /* -inf stays -inf */
        const float m_new = fmaxf(mrow[h], mx);
        const float m_use = m_new == -CUDART_INF_F ? 0.0f : m_new;
        alpha[h] = fast_exp2(mrow[h] - m_use);
        mrow[h] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int jj = 0; jj < C::BN / 8; ++jj)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const float x = s[4 * jj + 2 * h + c];
            const float p = fast_exp2(kPos ? fmaf(x, sl2, -m_use) : x - m_use);
            s[4 * jj + 2 * h + c] = p;
            sum += p;
          }
        lrow[h] = lrow[h] * alpha[h] + sum;
      }
    };
    const bool pos = sl2 > 0.0f;
    auto softmax = [&](int j, float(&alpha)[2]) {
      if (pos)
        softmax_t(j, alpha, std::true_type{});
      else
        softmax_t(j, alpha, std::false_type{});
    };
    auto rescale = [&](const float(&alpha)[2]) {
#pragma unroll
      for (int jj = 0; jj < C::DP / 8; ++jj)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          o[4 * jj + 2 * h] *= alpha[h];
          o[4 * jj + 2 * h + 1] *= alpha[h];
        }
    };
    auto pack = [&]() {
#pragma unroll
      for (int kk = 0; kk < C::BN / 16; ++kk)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          pf[kk][e] = pack2<T>(s[8 * kk + 2 * e], s[8 * kk + 2 * e + 1]);
    };
    auto fence_pf = [&]() {
#pragma unroll
      for (int kk = 0; kk < C::BN / 16; ++kk)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          fence_operand(pf[kk][e]);
    };
    auto issue_s = [&](int st) {
      const uint32_t kb = sm.k(st);
#pragma unroll
      for (int kk = 0; kk < C::DP / 16; ++kk)
        Wgmma<C::BN, T>::template ss<0>(s, desc_q<C>(q_rows, kk), desc_k<C>(kb, kk), kk > 0);
    };
    auto issue_pv = [&](int st) {
      const uint32_t vb = sm.v(st);
#pragma unroll
      for (int kk = 0; kk < C::BN / 16; ++kk)
        Wgmma<C::DP, T>::template rs<1>(o, pf[kk], desc_v<C>(vb, kk), 1);
    };
    auto release = [&](uint32_t bar) {
      if (lane == 0)
        mbar_arrive(bar);
    };
    /* ping-pong: warpgroup cw waits on barrier 1 + cw before its batch and
     * lets the other go after it */
    auto pp_sync = [&]() {
      if constexpr (C::PP)
        named_sync(1 + cw, 256);
    };
    auto pp_arrive = [&]() {
      if constexpr (C::PP)
        named_arrive(2 - cw, 256);
    };

    mbar_wait(sm.qfull(), 0);
    Ring<C::ST> ring;
    if constexpr (C::PP) {
      if (cw == 1)
        named_arrive(1, 256); /* warpgroup 0 goes first */
    }
    for (int c = c0; c < c1; ++c) {
#pragma unroll
      for (int i = 0; i < C::DP / 2; ++i)
        o[i] = 0.0f;
      mrow[0] = mrow[1] = -CUDART_INF_F;
      lrow[0] = lrow[1] = 0.0f;
      long long lo, hi;
      const int nkt = c < ce ? tiles_of(c, lo, hi) : 0;
      if (nkt > 0) {
        {
          long long hic = (long long)c * a.chunk + a.chunk; /* the chunk's end, uncut */
          if (hic > a.SK)
            hic = a.SK;
          const long long span = hic - lo; /* > 0: nkt > 0 */
          auto rel_lim = [&](long long row) {
            const long long l = a.causal ? row + diag + 1 - lo : span;
            return (int)(l < 0 ? 0 : (l > span ? span : l));
          };
          lim[0] = rel_lim(m0 + rloc);
          lim[1] = rel_lim(m0 + rloc + 8);
          full = rel_lim(m0);
        }
        if constexpr (!C::OV) {
          for (int j = 0; j < nkt; ++j) {
            mbar_wait(sm.kfull(ring.stage), ring.phase);
            wgmma_fence();
            issue_s(ring.stage);
            wgmma_commit();
            wgmma_wait<0>();
            fence_operands(s);
            release(sm.kempty(ring.stage));
            float alpha[2];
            softmax(j, alpha);
            rescale(alpha);
            pack();
            mbar_wait(sm.vfull(ring.stage), ring.phase);
            wgmma_fence();
            issue_pv(ring.stage);
            wgmma_commit();
            wgmma_wait<0>();
            fence_operands(o);
            fence_pf();
            release(sm.vempty(ring.stage));
            ring.advance();
          }
        } else {
          /* prologue: S_0 and its softmax (o is 0: no rescale) */
          mbar_wait(sm.kfull(ring.stage), ring.phase);
          pp_sync();
          wgmma_fence();
          issue_s(ring.stage);
          wgmma_commit();
          pp_arrive();
          wgmma_wait<0>();
          fence_operands(s);
          release(sm.kempty(ring.stage));
          {
            float alpha[2];
            softmax(0, alpha);
          }
          pack();
          int prev = ring.stage;
          uint32_t prev_phase = ring.phase;
          ring.advance();
          for (int j = 1; j < nkt; ++j) {
            mbar_wait(sm.kfull(ring.stage), ring.phase);
            mbar_wait(sm.vfull(prev), prev_phase);
            pp_sync();
            wgmma_fence();
            issue_s(ring.stage);
            wgmma_commit();
            issue_pv(prev);
            wgmma_commit();
            pp_arrive();
            wgmma_wait<1>();
            fence_operands(s);
            release(sm.kempty(ring.stage));
            float alpha[2];
            softmax(j, alpha);
            wgmma_wait<0>();
            fence_operands(o);
            fence_pf();
            release(sm.vempty(prev));
            rescale(alpha);
            pack();
            prev = ring.stage;
            prev_phase = ring.phase;
            ring.advance();
          }
          mbar_wait(sm.vfull(prev), prev_phase);
          if constexpr (C::PP)
            named_sync(1 + cw, 256);
          wgmma_fence();
          issue_pv(prev);
          wgmma_commit();
          if constexpr (C::PP) {
            if (c + 1 < ce)
              pp_arrive(); /* more chunks: the turns go on */
            else if (cw == 0)
              named_arrive(2, 256); /* warpgroup 1's last batch; its own last arrive is skipped */
          }
          wgmma_wait<0>();
          fence_operands(o);
          fence_pf();
          release(sm.vempty(prev));
        }

      } /* nkt > 0; else o 0, l 0: a zero partial, lse -inf */

      /* epilogue: row sums over the quad, lse, then out = o / l */
      float inv[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float lr = lrow[h];
        lr += __shfl_xor_sync(0xffffffffu, lr, 1);
        lr += __shfl_xor_sync(0xffffffffu, lr, 2);
        inv[h] = lr > 0.0f ? 1.0f / lr : 0.0f;
        const long long row = m0 + rloc + 8 * h;
        if (q4 == 0 && row < a.S)
          store_row_lse(a, row0 + rloc + 8 * h, c, row_lse(mrow[h], lr));
      }
      rescale(inv);
      if constexpr (SPLIT) { /* float partials, 2 x 16 bytes a lane and 8-column block */
        float *op = static_cast<float *>(a.opart) + ((long long)c * a.R + row0) * C::DP;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const long long row = m0 + rloc + 8 * h;
          float *dst = op + (long long)(rloc + 8 * h) * C::DP;
#pragma unroll
          for (int g = 0; g < C::DP / 32; ++g) {
            float4 w0, w1;
            quad_row32(o, g, h, lane, w0, w1);
            if (row < a.S) {
              float4 *d4 = reinterpret_cast<float4 *>(dst + 8 * (4 * g + q4));
              d4[0] = w0;
              d4[1] = w1;
            }
          }
        }
      } else {
        T *og = static_cast<T *>(a.out);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const long long row = m0 + rloc + 8 * h;
          T *dst = og + (row0 + rloc + 8 * h) * (long long)C::DP;
#pragma unroll
          for (int g = 0; g < C::DP / 32; ++g) {
            const uint4 w = quad_row16<T, C::DP / 2>(o, g, h, lane);
            if (row < a.S)
              *reinterpret_cast<uint4 *>(dst + 8 * (4 * g + q4)) = w;
          }
        }
      }
    } /* chunks */
  }
#else
  (void)tq;
  (void)tk;
  (void)tv;
  (void)a;
  (void)hgroup;
  (void)cpb;
  __trap(); /* built for sm_90a only */
#endif
}

/* ---- host ---------------------------------------------------------------------------- */

/* A contiguous [bh, rows, D] 16-bit tensor as a 3-D map: boxes of 64 d x
 * box_rows x 1 head, 128B swizzle, zero fill past the edges. */
cudaError_t encode_3d(CUtensorMap *map, int dtype, const void *ptr, long long D, long long rows,
                      long long bh, int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn();
  if (fn == nullptr)
    return cudaErrorNotSupported;
  const cuuint64_t dims[3] = {(cuuint64_t)D, (cuuint64_t)rows, (cuuint64_t)bh};
  const cuuint64_t strides[2] = {(cuuint64_t)D * 2u, (cuuint64_t)(rows * D) * 2u};
  const cuuint32_t box[3] = {64u, (cuuint32_t)box_rows, 1u};
  const cuuint32_t estrides[3] = {1, 1, 1};
  const CUtensorMapDataType ty =
      dtype == FP_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult r = fn(map, ty, 3, const_cast<void *>(ptr), dims, strides, box, estrides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

/* The current device's SMs (cached for the process: one device). */
int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v < 1)
      v = 132;
    return v;
  }();
  return n;
}

template <class T, class C, bool SPLIT>
cudaError_t launch_k(const Problem &p, cudaStream_t stream) {
  const Params a = params_of(p);
  /* chunks a block (split > 1): all of them, unless that leaves fewer
   * than 4 blocks an SM (then halved until it does not); each one costs a
   * block's start (barriers, q, the ring's fill) and end, which one block
   * an SM cannot hide. Causal D = 128: one (the short blocks of the early
   * tiles balance better). H100 memeff (chunk 1024) f16, us, all chunks /
   * one a block: 4x32x4096x64 2302 / 2658, causal 1554 / 1700;
   * 4x16x4096x128 1896 / 1862, causal 1374 / 1257; 8x16x2048x128
   * 1054 / 1087, causal 851 / 822. FUSEPORT_CUDA_ATTN90_CPB=<n> overrides
   * (tests, tuning). */
  static const char *const cenv = getenv("FUSEPORT_CUDA_ATTN90_CPB");
  const long long tb = ((p.S + kBM - 1) / kBM) * p.B * p.H;
  int cpb = p.causal && p.D == 128 ? 1 : p.splits;
  if (cenv != nullptr && atoi(cenv) > 0) {
    cpb = atoi(cenv) < p.splits ? atoi(cenv) : p.splits;
  } else {
    const long long want = 4LL * sm_count();
    while (cpb > 1 && tb * ((p.splits + cpb - 1) / cpb) < want)
      cpb = (cpb + 1) / 2;
  }
  const int nsub = (p.splits + cpb - 1) / cpb;
  const long long blocks = tb * nsub;
  if (blocks > 0x7fffffffLL)
    return cudaErrorInvalidConfiguration;
  const long long bh = p.B * p.H;
  CUtensorMap tq, tk, tv;
  cudaError_t err = encode_3d(&tq, p.dtype, p.q, p.D, p.S, bh, kBM);
  if (err == cudaSuccess)
    err = encode_3d(&tk, p.dtype, p.k, p.D, p.SK, bh, C::BN);
  if (err == cudaSuccess)
    err = encode_3d(&tv, p.dtype, p.v, p.D, p.SK, bh, C::BN);
  if (err != cudaSuccess)
    return err;
  void (*kernel)(const CUtensorMap, const CUtensorMap, const CUtensorMap, const Params, const int,
                 const int) = &attention_sm90_kernel<T, C, SPLIT>;
  err = fpgemm::set_smem(kernel, C::SMEM);
  if (err != cudaSuccess)
    return err;
  /* heads a block group (see the kernel): causal 8 (a group's longest
   * tiles go first, for the balance, and 8 heads' k and v stay in L2),
   * else 1; FUSEPORT_CUDA_ATTN90_GROUP=<n> overrides (tuning). The kernel
   * takes it in units (head, chunk group): every chunk of those heads. */
  static const char *const genv = getenv("FUSEPORT_CUDA_ATTN90_GROUP");
  long long hgroup = p.causal ? 8 : 1;
  if (genv != nullptr && atoi(genv) > 0)
    hgroup = atoi(genv);
  if (hgroup > bh)
    hgroup = bh;
  hgroup *= nsub;
  if (hgroup > INT_MAX)
    hgroup = INT_MAX;
  kernel<<<(unsigned)blocks, kThreads, C::SMEM, stream>>>(tq, tk, tv, a, (int)hgroup, cpb);
  return cudaGetLastError();
}

template <class T, class C> cudaError_t launch(const Problem &p, cudaStream_t stream) {
  if constexpr (kHasSplit<C>)
    return p.splits > 1 ? launch_k<T, C, true>(p, stream) : launch_k<T, C, false>(p, stream);
  else /* sm90_find never names it for splits > 1 */
    return p.splits > 1 ? cudaErrorInvalidValue : launch_k<T, C, false>(p, stream);
}

template <class T> cudaError_t run_t(const Problem &p, int cfg, cudaStream_t stream) {
  switch (cfg) {
#define FPATTN90_CASE(c, name, dp)                                                                 \
  case C_##c:                                                                                      \
    return launch<T, c>(p, stream);
    FPATTN90_CONFIGS(FPATTN90_CASE)
#undef FPATTN90_CASE
  default:
    return cudaErrorInvalidValue;
  }
}

bool aligned16(const void *ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

} // namespace

bool sm90_eligible(const Problem &p) {
  const bool dst = p.splits == 1 ? p.out != nullptr && aligned16(p.out)
                                 : p.splits > 1 && p.opart != nullptr && p.lpart != nullptr &&
                                       aligned16(p.opart);
  return (p.dtype == FP_F16 || p.dtype == FP_BF16) && (p.D == 64 || p.D == 128) && dst &&
         aligned16(p.q) && aligned16(p.k) && aligned16(p.v) && p.S < (1LL << 31) - kBM &&
         p.SK < (1LL << 31) - 256 && p.B * p.H < (1LL << 31) &&
         ((p.S + kBM - 1) / kBM) * p.B * p.H * p.splits <= 0x7fffffffLL;
}

int sm90_find(const char *name, const Problem &p) {
  if (name != nullptr)
    for (int c = 0; c < C_N; ++c)
      if (strcmp(name, kCfgNames[c]) == 0 && kCfgDp[c] == p.D)
        return p.splits > 1 && !kCfgSplit[c] ? sm90_pick(p) : c; /* split: a split kernel */
  return -1;
}

/* H100, 4x16x4096x128 f16, TFLOP/s non-causal / causal: h128s3 547 / 491,
 * h128 522 / 479, h128b 517 / 447; 4x32x4096x64: h64 353 / 322, h64b
 * 332 / 300, h64n192 328 / 301 */
int sm90_pick(const Problem &p) { return p.D == 64 ? C_CfgH64 : C_CfgH128S3; }

const char *sm90_config_name(int cfg) { return cfg >= 0 && cfg < C_N ? kCfgNames[cfg] : "?"; }

cudaError_t sm90_run(const Problem &p, int cfg, cudaStream_t stream) {
  return p.dtype == FP_BF16 ? run_t<__nv_bfloat16>(p, cfg, stream) : run_t<__half>(p, cfg, stream);
}

template <class C> void split_stubs(const void **mine, int &n) {
  if constexpr (kHasSplit<C>) {
    mine[n++] = reinterpret_cast<const void *>(&attention_sm90_kernel<__half, C, true>);
    mine[n++] = reinterpret_cast<const void *>(&attention_sm90_kernel<__nv_bfloat16, C, true>);
  }
}

int sm90_stubs(const void **out, int cap) {
  const void *mine[4 * C_N];
  int n = 0;
#define FPATTN90_STUB(c, name, dp)                                                                 \
  mine[n++] = reinterpret_cast<const void *>(&attention_sm90_kernel<__half, c, false>);            \
  mine[n++] = reinterpret_cast<const void *>(&attention_sm90_kernel<__nv_bfloat16, c, false>);     \
  split_stubs<c>(mine, n);
  FPATTN90_CONFIGS(FPATTN90_STUB)
#undef FPATTN90_STUB
  int k = 0;
  for (; k < n && k < cap; ++k)
    out[k] = mine[k];
  return k;
}

} // namespace fpattn
