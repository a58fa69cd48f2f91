/* fuseport CUDA kernels, family conv, path SM90: implicit GEMM on Hopper
 * (sm_90a) tensor cores: wgmma with both operands in shared memory, both
 * loaded by TMA (the input through an im2col tensor map), an mbarrier
 * pipeline, warp-specialised producer and consumers.
 * Semantics: kernels.def, family conv; the shared parts: conv_common.cuh;
 * the PTX wrappers and the tensor maps: mma_sm90.cuh; the plan and the
 * other paths: conv.cu. Built only for sm_90a (CMakeLists.txt's
 * fuseport_cuda_sm90 library).
 *
 * Eligible (sm90_eligible): f16/bf16, NHWC, C % 64 == 0, K % 8 == 0, x and
 * w 16-byte aligned, and a geometry TMA's im2col mode takes (padding up to
 * 127, (R - 1) dil and (S - 1) dil at most pad + 128, stride up to 8;
 * conv.cu adds: compute capability 9.0). GEMM-M = N*P*Q pixels, GEMM-N =
 * K channels, GEMM-K = R*S*C in NHWC order kk = (r S + s) C + c. Since
 * C % 64 == 0, k-block kb (64 wide) is the 64 channels c0 = 64 (kb % (C/64))
 * .. c0 + 63 of the single tap t = kb / (C/64), (r, s) = (t / S, t % S).
 * No k tail: kblocks = R*S*C / 64 exactly.
 *
 * The A block of a k-block is one TMA im2col box (encode_im2col_nhwc): the
 * 64 channels from c0 of the 128 output pixels m0 .. m0 + 127 of the tile,
 * each read at its tap (h0 + r dil, w0 + s dil), zeros for padding taps and
 * for pixels past M (the traversal runs into image N, outside the tensor).
 * The box starts at the input coordinates of pixel m0's tap (0, 0)
 * (h0 = p stride - pad, w0 = q stride - pad, image n) and the tap is the
 * instruction's im2col offset (s dil, r dil); the map's bounding box makes
 * TMA step through the output pixels in (n, p, q) order. 128B swizzle: the
 * layout wgmma's K-major descriptors read.
 *
 * Shape of a block (384 threads, one block an SM, persistent over tiles
 * u = blockIdx.x, + gridDim.x, ...; tile u = (u / tiles_n, u % tiles_n),
 * the channel tiles fastest so the tiles in flight share their pixels):
 *   warpgroup 0, the producer (registers cut to kProducerRegs): thread 0
 *     issues, per k-block, the A box and the B box (64 k-columns x BN
 *     filter rows of w viewed as a row-major [K, R*S*C] matrix, the GEMM
 *     core's trans_b operand; rows past K zero-filled, their outputs never
 *     stored) into the next stage, after waiting for that stage's `empty`;
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
 * `full` counts 1 arrival (thread 0's arrive.expect_tx for both boxes'
 * bytes); `empty` counts 8 (every consumer warp).
 *
 * Tiles (sm90_pick chooses): 128 x 256 (4 stages), 128 x 128 (6 stages),
 * 128 x 64 (8 stages); 192 KiB of stages each.
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <limits.h>
#include <stdint.h>

#include "conv_common.cuh"
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
constexpr int kProducerRegs = 40;  /* one thread computes coordinates */
constexpr int kConsumerRegs = 232; /* up to 128 accumulators + the epilogue */
constexpr int kABytes = kBM * kRowBytes;
constexpr int kSmemLimit = 232448; /* the H100's per-block opt-in (227 KiB) */
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 65536, "the SM's register file");

template <int BN_, int STAGES_> struct Cfg {
  static constexpr int BN = BN_, STAGES = STAGES_;
  static constexpr int kBBytes = BN * kRowBytes;
  static constexpr int kStageBytes = kABytes + kBBytes; /* A, then B: both 1024-aligned */
  static constexpr int kBarOffset = STAGES * kStageBytes;
  static constexpr int kSmem = 1024 + kBarOffset + 2 * STAGES * 8;
  static_assert(BN % 64 == 0 && BN <= 256, "wgmma N, one TMA box");
  static_assert(STAGES >= 2 && kSmem <= kSmemLimit, "pipeline");
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
    conv_sm90_kernel(const __grid_constant__ CUtensorMap tma_x,
                     const __grid_constant__ CUtensorMap tma_w, const Args<T> args) {
#if FP_SM90A
  constexpr int BN = CF::BN, STAGES = CF::STAGES;
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                              ~uintptr_t(1023));
  const Smem<CF> sm{smem_u32(smem)};

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(sm.full(s), 1);  /* the producer's arrive.expect_tx */
      mbar_init(sm.empty(s), 8); /* every consumer warp */
    }
    fence_mbar_init();
  }
  __syncthreads();

  const Geom &g = args.g;
  const int first = static_cast<int>(blockIdx.x), step = static_cast<int>(gridDim.x);

  if (threadIdx.x < 128) {
    /* ---- the producer warpgroup: thread 0 issues every copy ---- */
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x != 0)
      return;
    tma_prefetch_map(&tma_x);
    tma_prefetch_map(&tma_w);
    int stage = 0;
    uint32_t phase = 0;
    for (int u = first; u < args.tiles; u += step) {
      const int tm = u / args.tiles_n, tn = u - tm * args.tiles_n;
      /* the tile's first pixel and the input coordinates of its tap (0, 0) */
      const long long m0 = static_cast<long long>(tm) * kBM;
      const long long n = m0 / g.PQ;
      const int pq = static_cast<int>(m0 - n * g.PQ);
      const int p = pq / g.Q, q = pq - p * g.Q;
      const int h0 = p * g.stride - g.pad, w0 = q * g.stride - g.pad;
      int r = 0, s = 0, c0 = 0; /* the k-block's tap and channels */
      for (int kb = 0; kb < args.kblocks; ++kb) {
        mbar_wait(sm.empty(stage), phase ^ 1u);
        mbar_arrive_expect_tx(sm.full(stage), kABytes + CF::kBBytes);
        tma_load_2d(sm.b(stage), &tma_w, sm.full(stage), kb * kBK, tn * BN);
        tma_load_im2col_4d(sm.a(stage), &tma_x, sm.full(stage), c0, w0, h0, static_cast<int>(n),
                           static_cast<uint16_t>(s * g.dil), static_cast<uint16_t>(r * g.dil));
        c0 += kBK;
        if (c0 == g.C) {
          c0 = 0;
          if (++s == g.S) {
            s = 0;
            ++r;
          }
        }
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1u;
        }
      }
    }
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
  (void)tma_x;
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
  /* x through an im2col map: boxes of 64 channels x kBM output pixels */
  CUtensorMap map_x;
  cudaError_t err = encode_im2col_nhwc(&map_x, p.dtype, p.x, p.N, p.H, p.W, p.C, a.g.R, a.g.S,
                                       a.g.stride, a.g.pad, a.g.dil, kBK, kBM);
  if (err != cudaSuccess)
    return err;
  /* w as a row-major [K, R*S*C] matrix: boxes of 64 k-columns x BN rows */
  CUtensorMap map;
  err = encode_2d(&map, p.dtype, p.w, a.g.KG, p.K, a.g.KG, kBK, CF::BN);
  if (err != cudaSuccess)
    return err;
  err = fpgemm::set_smem(conv_sm90_kernel<T, CF>, CF::kSmem);
  if (err != cudaSuccess)
    return err;
  const long long grid = tiles < sm_count ? tiles : (sm_count > 0 ? sm_count : 1);
  conv_sm90_kernel<T, CF>
      <<<static_cast<unsigned>(grid), kThreads, CF::kSmem, stream>>>(map_x, map, a);
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
  /* encode_im2col_nhwc's limits: the bounding box's corners in [-128, 127] */
  const long long lo_h = p.pad - (p.R - 1) * p.dil, lo_w = p.pad - (p.S - 1) * p.dil;
  return (p.dtype == Storage<__half>::kDtype || p.dtype == Storage<__nv_bfloat16>::kDtype) &&
         p.nhwc && p.C % 64 == 0 && p.K % 8 == 0 && aligned16(p.x) && aligned16(p.w) &&
         p.pad <= 127 && lo_h >= -128 && lo_w >= -128 && p.stride <= 8;
}

/* The row with the least estimated time: waves of the persistent grid's
 * tiles (one block an SM) times a tile's work at the row's relative rate.
 * The rates are measured: on an H200 (2026-11-28, ResNet-50's 3x3 and
 * strided 1x1 layers at batch 32, f16, every row forced), 128 x 64 tiles
 * ran at about 0.85 of 128 x 128's rate per tile area, which this model
 * turns into the faster row on all ten layers (the 128 x 64 row where it
 * saves a wave or K = 64 leaves half a 128-wide tile idle); 128 x 256
 * tiles were 2-3x slower than 128 x 128 on every layer (0.35). */
int sm90_pick(const Problem &p, int sm_count) {
  struct Row {
    int bn;
    double rate;
  };
  const Row rows[kConfigs] = {{256, 0.35}, {128, 1.0}, {64, 0.85}};
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
