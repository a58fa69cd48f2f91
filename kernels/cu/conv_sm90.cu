/* fuseport CUDA kernels, family conv, path SM90: implicit GEMM on Hopper
 * (sm_90a) tensor cores: wgmma with both operands in shared memory, an
 * mbarrier pipeline, warp-specialised producers and consumers.
 * Semantics: kernels.def, family conv; the shared parts: conv_common.cuh;
 * the PTX wrappers: mma_sm90.cuh; the plan and the other paths: conv.cu.
 * Built only for sm_90a (CMakeLists.txt's fuseport_cuda_sm90 library).
 *
 * Eligible (sm90_eligible): f16/bf16, NHWC, C % 64 == 0, K % 8 == 0, x and
 * w 16-byte aligned (conv.cu adds: compute capability 9.0). GEMM-M =
 * N*P*Q pixels, GEMM-N = K channels, GEMM-K = R*S*C in NHWC order
 * kk = (r S + s) C + c. Since C % 64 == 0, k-block kb (64 wide) is the 64
 * channels c0 = 64 (kb % (C/64)) .. c0 + 63 of the single tap
 * t = kb / (C/64), (r, s) = (t / S, t % S): row m of the A block is 128
 * contiguous bytes of x (pixel m's input at that tap), or zeros for a
 * padding tap or a row past M. No k tail: kblocks = R*S*C / 64 exactly.
 *
 * Shape of a block (384 threads, one block an SM, persistent over tiles
 * u = blockIdx.x, + gridDim.x, ...; tile u = (u / tiles_n, u % tiles_n),
 * the channel tiles fastest so the tiles in flight share their pixels):
 *   warpgroup 0, the producer (registers cut to kProducerRegs):
 *     - B: thread 0 issues one TMA box per k-block, 64 k-columns x BN
 *       filter rows of w viewed as a row-major [K, R*S*C] matrix (the GEMM
 *       core's trans_b operand, K-major), 128B swizzle; rows past K are
 *       zero-filled by TMA (their outputs are never stored);
 *     - A: all 128 threads gather the 128 x 64 im2col block with cp.async
 *       16-byte copies (src-size 0: zero fill) straight into the layout a
 *       128B-swizzled TMA box has (16-byte chunk c of row r at c ^ (r % 8)).
 *       Lane l of warp w copies chunk l % 8 (channels 8 (l % 8) ..) of rows
 *       32 w + l / 8 + 4 i, i < 8: a warp instruction covers 4 whole
 *       128-byte rows (4 L2 lines, coalesced) and writes 4 x 8 chunks that
 *       hit every bank once per 8 rows. Each thread keeps its 8 pixels'
 *       offsets in x at tap (0, 0) and (h0, w0), computed once a tile; the
 *       tap digits (r, s, c0) advance by one k-block without division.
 *     A thread commits one cp.async group per k-block and keeps kLag =
 *     STAGES - 2 of them in flight: after committing k-block i it waits
 *     for group i - kLag (cp.async.wait_group kLag), fences the async proxy
 *     (wgmma reads shared memory through it) and each warp's lane 0 arrives
 *     on that stage's `full` barrier (__syncwarp first, as in
 *     gemm_dw_sm90.cu). kLag <= STAGES - 2 keeps this deadlock-free: the
 *     producer's wait for stage i's `empty` needs the consumers to have
 *     issued k-block i - STAGES + 1, signalled at iteration i - 1.
 *   warpgroups 1 and 2, the consumers (registers raised to kConsumerRegs):
 *     rows [0, 64) and [64, 128) of the tile, one wgmma m64nBNk16 per k16
 *     step, A and B K-major (gemm_sm90.cu's trans_b descriptors), one
 *     wgmma group in flight: a stage is released (one arrival per consumer
 *     warp on `empty`) once the next k-block's group is issued and its own
 *     has retired. After a tile's last k-block: the epilogue from registers
 *     (fpconv::Epi per element, all values before any store, as in
 *     conv_sm80.cu), then the stores: 16-byte ones (the quad's four lanes
 *     exchange their pairs so that each holds 8 consecutive channels) when
 *     out is 16-byte aligned, else pairs. The producer runs ahead into the
 *     next tile's stages meanwhile.
 * `full` counts 1 + 4 arrivals (thread 0's arrive.expect_tx for the B box's
 * bytes, then one per producer warp once its copies landed and are fenced);
 * `empty` counts 8 (every consumer warp).
 *
 * Tiles (sm90_pick chooses): 128 x 256 (4 stages), 128 x 128 (6 stages),
 * 128 x 64 (8 stages); 192 KiB of stages each.
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <limits.h>
#include <stdint.h>

#include "conv_common.cuh"
#include "mma_sm80.cuh"
#include "mma_sm90.cuh"

#if defined(__CUDA_ARCH__) && !FP_SM90A
/* A device pass for another architecture builds the kernel as a trap, so
 * the device helpers below go unused there. */
#pragma nv_diag_suppress 177
#endif

namespace fpconv {

namespace {

using namespace fpsm90;

constexpr int kBM = 128;           /* two consumer warpgroups of 64 rows */
constexpr int kBK = 64;            /* 64 channels of one tap: one 128-byte swizzle row */
constexpr int kRowBytes = 128;     /* a swizzled row */
constexpr int kThreads = 384;      /* producer warpgroup + 2 consumer warpgroups */
constexpr int kProducerRegs = 88;  /* 8 pixels (offset, h0, w0), tap digits: 56 and 80 spilled */
constexpr int kConsumerRegs = 208; /* up to 128 accumulators + the epilogue */
constexpr int kABytes = kBM * kRowBytes;
constexpr int kSmemLimit = 232448; /* the H100's per-block opt-in (227 KiB) */
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 65536, "the SM's register file");

template <int BN_, int STAGES_> struct Cfg {
  static constexpr int BN = BN_, STAGES = STAGES_;
  static constexpr int kLag = STAGES - 2; /* k-blocks in flight per producer thread */
  static constexpr int kBBytes = BN * kRowBytes;
  static constexpr int kStageBytes = kABytes + kBBytes; /* A, then B: both 1024-aligned */
  static constexpr int kBarOffset = STAGES * kStageBytes;
  static constexpr int kSmem = 1024 + kBarOffset + 2 * STAGES * 8;
  static_assert(BN % 64 == 0 && BN <= 256, "wgmma N, one TMA box");
  static_assert(kLag >= 1 && kSmem <= kSmemLimit, "pipeline");
};

using Cfg0 = Cfg<256, 4>;
using Cfg1 = Cfg<128, 6>;
using Cfg2 = Cfg<64, 8>;
constexpr int kConfigs = 3;
const char *const kNames[kConfigs] = {"wgmma 128x256x64/4", "wgmma 128x128x64/6",
                                      "wgmma 128x64x64/8"};

template <class T> struct Args {
  T *out;
  const T *x;
  Geom g;
  Epi<T> epi;
  int tiles_n, tiles;
  int kblocks; /* R*S*C / 64 */
  int out16;   /* out 16-byte aligned: 16-byte stores */
};

template <class CF> struct Smem {
  uint32_t base;
  __device__ __forceinline__ uint32_t a(int s) const { return base + s * CF::kStageBytes; }
  __device__ __forceinline__ uint32_t b(int s) const { return a(s) + kABytes; }
  __device__ __forceinline__ uint32_t full(int s) const { return base + CF::kBarOffset + 8 * s; }
  __device__ __forceinline__ uint32_t empty(int s) const {
    return base + CF::kBarOffset + 8 * (CF::STAGES + s);
  }
};

/* Wgmma descriptors of k16 step kk, both operands K-major 128B-swizzled
 * (8-row groups 1024 bytes apart; the step moves 32 bytes into the row). */
__device__ __forceinline__ uint64_t desc_k(uint32_t tile, int kk) {
  return make_smem_desc_sw128(tile + 32 * kk, 16, 8 * kRowBytes);
}

using fpmma::cp_async_16; /* mma_sm80.cuh: cp.async with zero fill */
using fpmma::cp_async_commit;
using fpmma::cp_async_wait;

/* The producer's A gather (see the top of the file). */
template <class T> struct Gather {
  static constexpr int kRows = 8;
  long long off[kRows]; /* x offset of the row's pixel at tap (0, 0), plus its chunk's channels */
  int h0[kRows], w0[kRows];
  unsigned ok; /* bit i: row i is a pixel (< M) */
  int r, s, c0;
  uint32_t dst0, dst1; /* shared offsets of rows 0 and 1 (even / odd rows: +1024 per pair) */

  __device__ __forceinline__ void init_lane(int warp, int lane) {
    const int j = lane & 7, sub = lane >> 3;
    dst0 = (warp * 32 + sub) * kRowBytes + ((j ^ sub) << 4);
    dst1 = (warp * 32 + sub + 4) * kRowBytes + ((j ^ (sub + 4)) << 4);
  }
  __device__ __forceinline__ void init_tile(const Geom &g, long long m0, int warp, int lane) {
    const int j = lane & 7, sub = lane >> 3;
    ok = 0;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const long long m = m0 + warp * 32 + sub + 4 * i;
      const Pixel px = pixel_of(g, m < g.M ? m : 0);
      h0[i] = px.h0;
      w0[i] = px.w0;
      off[i] = px.base + ((long long)px.h0 * g.W + px.w0) * g.C + 8 * j;
      ok |= (m < g.M ? 1u : 0u) << i;
    }
    r = s = c0 = 0;
  }
  /* issues the copies of the current k-block into the A block at sa, then
   * moves to the next k-block's tap digits */
  __device__ __forceinline__ void copy(const T *x, const Geom &g, uint32_t sa) {
    const int dh = r * g.dil, dw = s * g.dil;
    const long long tap = ((long long)dh * g.W + dw) * g.C + c0;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int h = h0[i] + dh, w = w0[i] + dw;
      const bool v = ((ok >> i) & 1u) && (unsigned)h < (unsigned)g.H && (unsigned)w < (unsigned)g.W;
      const uint32_t dst = sa + ((i & 1) ? dst1 : dst0) + (i >> 1) * (8 * kRowBytes);
      cp_async_16(dst, v ? x + off[i] + tap : x, v ? 16 : 0);
    }
    c0 += kBK;
    if (c0 == g.C) {
      c0 = 0;
      if (++s == g.S) {
        s = 0;
        ++r;
      }
    }
  }
};

/* Rounds and stores a consumer thread's accumulators for rows m (h = 0) and
 * m + 8 (h = 1), channels n0 + 8 j + 2 q + {0, 1} (q = lane % 4). kVec:
 * 16-byte stores, lane q of a quad taking the 8 channels of block 4 g + q
 * of each group of 4 blocks (four rotations over the quad's lanes). */
template <class T, int BN>
__device__ __forceinline__ void store_tile(const Args<T> &a, const float (&acc)[BN / 2],
                                           long long m, int n0, int lane) {
  const Geom &g = a.g;
  const int q = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const long long row = m + 8 * h;
    const bool live = row < g.M;
    if (a.out16) {
#pragma unroll
      for (int gi = 0; gi < BN / 32; ++gi) {
        const uint4 v = quad_row16<T>(acc, gi, h, lane);
        const int k = n0 + 8 * (4 * gi + q); /* K % 8 == 0: the block is all in or all out */
        if (live && k < g.K)
          *reinterpret_cast<uint4 *>(a.out + row * g.K + k) = v;
      }
    } else if (live) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int k = n0 + 8 * j + 2 * q;
        const int l = 4 * j + 2 * h;
        if (k < g.K)
          fpgemm::store_pair<T>(a.out, g.K, row, k, make_float2(acc[l], acc[l + 1]), true);
      }
    }
  }
}

template <class T, class CF>
__global__ void __launch_bounds__(kThreads, 1)
    conv_sm90_kernel(const __grid_constant__ CUtensorMap tma_w, const Args<T> args) {
#if FP_SM90A
  constexpr int BN = CF::BN, STAGES = CF::STAGES;
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                              ~uintptr_t(1023));
  const Smem<CF> sm{smem_u32(smem)};

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(sm.full(s), 1 + 4); /* expect_tx + the 4 producer warps */
      mbar_init(sm.empty(s), 8);    /* every consumer warp */
    }
    fence_mbar_init();
  }
  __syncthreads();

  const Geom &g = args.g;
  const int first = static_cast<int>(blockIdx.x), step = static_cast<int>(gridDim.x);

  if (threadIdx.x < 128) {
    /* ---- the producer warpgroup ---- */
    setmaxnreg_dec<kProducerRegs>();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0)
      tma_prefetch_map(&tma_w);
    Gather<T> ga;
    ga.init_lane(warp, lane);
    int stage = 0, sig = 0; /* the stage to fill, the oldest one not yet signalled */
    int pending = 0;        /* k-blocks copied, not yet signalled (<= kLag) */
    uint32_t phase = 0;
    const auto signal = [&]() {
      fence_proxy_async(); /* the copies (complete: cp.async.wait_group) before wgmma's reads */
      __syncwarp();
      if (lane == 0)
        mbar_arrive(sm.full(sig));
      if (++sig == STAGES)
        sig = 0;
    };
    for (int u = first; u < args.tiles; u += step) {
      const int tm = u / args.tiles_n, tn = u - tm * args.tiles_n;
      ga.init_tile(g, static_cast<long long>(tm) * kBM, warp, lane);
      for (int kb = 0; kb < args.kblocks; ++kb) {
        mbar_wait(sm.empty(stage), phase ^ 1u);
        if (threadIdx.x == 0) {
          mbar_arrive_expect_tx(sm.full(stage), CF::kBBytes);
          tma_load_2d(sm.b(stage), &tma_w, sm.full(stage), kb * kBK, tn * BN);
        }
        ga.copy(args.x, g, sm.a(stage));
        cp_async_commit();
        if (pending == CF::kLag) {
          cp_async_wait<CF::kLag>(); /* the oldest pending k-block has landed */
          signal();
        } else {
          ++pending;
        }
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1u;
        }
      }
    }
    cp_async_wait<0>();
    for (; pending > 0; --pending)
      signal();
    return;
  }

  /* ---- the consumer warpgroups: cw takes rows [64 cw, +64) of the tile ---- */
  setmaxnreg_inc<kConsumerRegs>();
  const int ct = threadIdx.x - 128;
  const int cw = ct >> 7, warp = (ct >> 5) & 3, lane = ct & 31;
  float acc[BN / 2];
  int stage = 0;
  uint32_t phase = 0;
  for (int u = first; u < args.tiles; u += step) {
    const int tm = u / args.tiles_n, tn = u - tm * args.tiles_n;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i)
      acc[i] = 0.0f;
    int prev = -1;
    for (int kb = 0; kb < args.kblocks; ++kb) {
      mbar_wait(sm.full(stage), phase);
      const uint32_t a_rows = sm.a(stage) + cw * 64 * kRowBytes, b = sm.b(stage);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk)
        Wgmma<BN, T>::template ss<0>(acc, desc_k(a_rows, kk), desc_k(b, kk), 1);
      wgmma_commit();
      if (prev >= 0) {
        wgmma_wait<1>();
        if (lane == 0)
          mbar_arrive(sm.empty(prev));
      }
      prev = stage;
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1u;
      }
    }
    wgmma_wait<0>();
    fence_operands(acc);
    if (prev >= 0 && lane == 0)
      mbar_arrive(sm.empty(prev));

    /* epilogue: acc[4 j + 2 h + e] is row 16 warp + lane / 4 + 8 h of the
     * warpgroup's 64, channel 8 j + 2 (lane % 4) + e of the tile */
    const long long m = static_cast<long long>(tm) * kBM + cw * 64 + warp * 16 + lane / 4;
    const int n0 = tn * BN;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long long row = m + 8 * h;
      if (row >= g.M)
        continue;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int k = n0 + 8 * j + 2 * (lane & 3); /* K % 8 == 0: k + 1 < K too */
        if (k < g.K) {
          const long long idx = row * g.K + k;
          const int l = 4 * j + 2 * h;
          acc[l] = args.epi.apply(acc[l], k, idx);
          acc[l + 1] = args.epi.apply(acc[l + 1], k + 1, idx + 1);
        }
      }
    }
    store_tile<T, BN>(args, acc, m, n0, lane);
  }
#else
  (void)tma_w;
  (void)args;
  __trap(); /* built for sm_90a only */
#endif
}

template <class T, class CF>
cudaError_t launch(const Problem &p, int sm_count, cudaStream_t stream) {
  Args<T> a;
  a.out = static_cast<T *>(p.out);
  a.x = static_cast<const T *>(p.x);
  a.g = geom_of(p);
  a.epi = epi_of<T>(p);
  const long long tiles_m = (a.g.M + kBM - 1) / kBM;
  const long long tiles_n = (p.K + CF::BN - 1) / CF::BN;
  const long long tiles = tiles_m * tiles_n;
  const long long kblocks = a.g.KG / kBK;
  if (tiles > INT_MAX || kblocks > INT_MAX / kBK)
    return cudaErrorInvalidConfiguration;
  a.tiles_n = static_cast<int>(tiles_n);
  a.tiles = static_cast<int>(tiles);
  a.kblocks = static_cast<int>(kblocks);
  a.out16 = (reinterpret_cast<uintptr_t>(p.out) & 15u) == 0;
  /* w as a row-major [K, R*S*C] matrix: boxes of 64 k-columns x BN rows */
  CUtensorMap map;
  cudaError_t err = encode_2d(&map, p.dtype, p.w, a.g.KG, p.K, a.g.KG, kBK, CF::BN);
  if (err != cudaSuccess)
    return err;
  err = fpgemm::set_smem(conv_sm90_kernel<T, CF>, CF::kSmem);
  if (err != cudaSuccess)
    return err;
  const long long grid = tiles < sm_count ? tiles : (sm_count > 0 ? sm_count : 1);
  conv_sm90_kernel<T, CF><<<static_cast<unsigned>(grid), kThreads, CF::kSmem, stream>>>(map, a);
  return cudaGetLastError();
}

template <class T> cudaError_t run_t(const Problem &p, int cfg, int sm_count, cudaStream_t stream) {
  switch (cfg) {
  case 0:
    return launch<T, Cfg0>(p, sm_count, stream);
  case 1:
    return launch<T, Cfg1>(p, sm_count, stream);
  default:
    return launch<T, Cfg2>(p, sm_count, stream);
  }
}

bool aligned16(const void *ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

} // namespace

bool sm90_eligible(const Problem &p) {
  return (p.dtype == Storage<__half>::kDtype || p.dtype == Storage<__nv_bfloat16>::kDtype) &&
         p.nhwc && p.C % 64 == 0 && p.K % 8 == 0 && aligned16(p.x) && aligned16(p.w);
}

/* The row with the least estimated time: waves of the persistent grid's
 * tiles (one block an SM) times a tile's work at the row's relative rate
 * (narrow tiles gather the same A block for fewer MMAs: L2 traffic per
 * FLOP grows as the tile narrows). The rates are estimates, not yet
 * measured. */
int sm90_pick(const Problem &p, int sm_count) {
  struct Row {
    int bn;
    double rate;
  };
  const Row rows[kConfigs] = {{256, 1.0}, {128, 0.85}, {64, 0.55}};
  const long long tiles_m = (p.gemm_m() + kBM - 1) / kBM;
  const long long slots = sm_count > 0 ? sm_count : 1;
  int best = 0;
  double best_t = 0.0;
  for (int c = 0; c < kConfigs; ++c) {
    const long long tiles = tiles_m * ((p.K + rows[c].bn - 1) / rows[c].bn);
    const double waves = static_cast<double>((tiles + slots - 1) / slots);
    const double t = waves * kBM * rows[c].bn / rows[c].rate;
    if (c == 0 || t < best_t) {
      best = c;
      best_t = t;
    }
  }
  return best;
}

cudaError_t sm90_run(const Problem &p, int cfg, int sm_count, cudaStream_t stream) {
  return p.dtype == Storage<__nv_bfloat16>::kDtype ? run_t<__nv_bfloat16>(p, cfg, sm_count, stream)
                                                   : run_t<__half>(p, cfg, sm_count, stream);
}

const char *sm90_config_name(int cfg) { return cfg >= 0 && cfg < kConfigs ? kNames[cfg] : "?"; }

int sm90_stubs(const void **out, int cap) {
  const void *mine[] = {
      reinterpret_cast<const void *>(&conv_sm90_kernel<__half, Cfg0>),
      reinterpret_cast<const void *>(&conv_sm90_kernel<__half, Cfg1>),
      reinterpret_cast<const void *>(&conv_sm90_kernel<__half, Cfg2>),
      reinterpret_cast<const void *>(&conv_sm90_kernel<__nv_bfloat16, Cfg0>),
      reinterpret_cast<const void *>(&conv_sm90_kernel<__nv_bfloat16, Cfg1>),
      reinterpret_cast<const void *>(&conv_sm90_kernel<__nv_bfloat16, Cfg2>),
  };
  return fpgemm::copy_stubs(mine, out, cap);
}

} // namespace fpconv
