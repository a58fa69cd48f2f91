/* fuseport GEMM core, dw_packed on Hopper (sm_90a): the weight gradient
 * dW[COUT, CIN] = dy^T @ x' with x' dequantised from packed words by the
 * operand loader, never written to memory (kernels.def, dw_packed_<dt>;
 * the compression notebook's fused kernel, made to pay).
 *
 * The Hopper main loop of gemm_sm90.cu with another producer:
 *   warpgroups 0 and 1, the producers, fill the stages of alternate
 *     k-blocks: for its k-block, a warpgroup's thread 0 issues the TMA copy
 *     of the dy^T tile (four 64 m x 64 k boxes of dy [K, COUT], 128B
 *     swizzle); its 128 threads read the packed words of the x' tile (half
 *     a row each), dequantise them and store them in the layout a TMA box
 *     would have (64 k rows of 64 n, 16-byte chunk c of row r at
 *     c ^ (r % 8)), then fence.proxy.async (wgmma reads through the async
 *     proxy), and each warp arrives on the stage's `full` barrier. The words
 *     of a warpgroup's next two k-blocks are in flight in registers, since a
 *     global load outlasts one k-block's dequantisation;
 *   warpgroups 2 and 3, the consumers: rows [0, 128) and [128, 256) of the
 *     256 x 128 tile, each as two wgmma m64n128k16 against the same B with
 *     both operands MN-major (k is the outer index of dy and of x':
 *     imm-trans-a = imm-trans-b = 1). 256 rows, because the dequantised B
 *     tile then feeds twice the MMAs: the loader's work bounded the
 *     kernel (100864 x 768 x 768: 297 us at 128 rows, 215 at 256).
 * `full` counts 5 arrivals (the filling warpgroup's thread 0's expect_tx
 * for the TMA bytes, then lane 0 of each of its warps once the warp's stores
 * are fenced), `empty` one per consumer warp.
 *
 * A tile of 128 columns lies inside one quantisation group (256 values,
 * tiles start at multiples of 128): a producer thread dequantises 64
 * values of one k row with one scale and one min. Rows past K are written
 * as zeros (TMA zero-fills dy's too); columns past CIN read the padded
 * group's words (in bounds) and feed outputs that are never stored.
 *
 * Split-K: unit u of the grid is (tile u / split_k, slice u % split_k);
 * each block writes its partial tile to gemm_common.cuh's workspace. Where
 * the grid fits the GPU at once (a cooperative launch, which the driver
 * refuses rather than run in waves) the tile's blocks then wait for each
 * other and block q sums part q of the tile over the slices, in slice
 * order; otherwise the block that arrives last sums the whole tile. Both
 * are deterministic. Why not the last block alone: one SM reads every
 * slice, split_k x 128 KiB through L2, about 6 us a slice on an H200
 * (2026-11-28, 8192 x 768 x 768, bits=2: 104.7 us unsplit, 57.5 us in 7
 * slices whose main loops take about 15). Why not clusters, whose slices
 * could sum in distributed shared memory: an H200 runs at most 102-120
 * blocks of this kernel in clusters of 5 to 8 (the GPCs), so 18 tiles of
 * 7 slices took two waves (cudaOccupancyMaxActiveClusters; 357.6 us at
 * 100864 x 768 x 768 against 215 through the workspace).
 */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <stdint.h>

#include "cuda/gemm_plan.h"
#include "dequant_lut.cuh"
#include "gemm_common.cuh"
#include "mma_sm90.cuh"

namespace fpgemm {

cudaError_t sm90_dw_run(const ProblemDw &p, const fp_dw_plan &plan, cudaStream_t stream);
int sm90_dw_stubs(const void **out, int cap);

namespace {

using namespace fpsm90;

constexpr int kBM = 256, kBN = 128, kBK = 64, kStages = 4;
constexpr int kProducers = 256;            /* two warpgroups dequantise */
constexpr int kThreads = kProducers + 256; /* and two consume, 128 rows each */
/* Registers: 2 x 128 x 88 + 2 x 128 x 168 = 65536, the SM's file; a
 * consumer holds two 64 x 128 float accumulators (128 registers). */
constexpr int kProducerRegs = 88, kConsumerRegs = 168;
constexpr int kRowBytes = 128;                         /* a swizzled row: 64 bf16 */
constexpr int kBoxBytes = 64 * kRowBytes;              /* 64 rows of 64 values */
constexpr int kABoxes = kBM / 64;                      /* dy^T: 64 m x 64 k boxes */
constexpr int kStageBytes = (kABoxes + 2) * kBoxBytes; /* A boxes, then B boxes 0 and 1 */
constexpr int kBarOffset = kStages * kStageBytes;
constexpr int kSmemBytes = 1024 + kBarOffset + 2 * kStages * 8 + 16;

/* The most slices the parallel reduction sums with all loads in flight. */
constexpr int kMaxParallelSplit = 16;

struct Args {
  ProblemDw p;
  int split_k;
  int parallel; /* 1: every block sums its share of the tile (a cooperative launch) */
  int ntn;      /* column tiles */
  int tiles;
  int kblocks; /* ceil(K / 64) */
  long long G; /* groups per row */
};

__device__ __forceinline__ uint32_t stage_a(uint32_t base, int s, int box) {
  return base + s * kStageBytes + box * kBoxBytes;
}
__device__ __forceinline__ uint32_t stage_b(uint32_t base, int s) {
  return base + s * kStageBytes + kABoxes * kBoxBytes;
}
__device__ __forceinline__ uint32_t full_bar(uint32_t base, int s) {
  return base + kBarOffset + 8 * s;
}
__device__ __forceinline__ uint32_t empty_bar(uint32_t base, int s) {
  return base + kBarOffset + 8 * (kStages + s);
}

/* MN-major operand (k the outer index), 64 k rows x 64 columns per box,
 * boxes 8 KiB apart (mma_sm90.cuh's MN-major descriptor); k16 step kk. */
__device__ __forceinline__ uint64_t desc_mn(uint32_t tile, int kk) {
  return make_smem_desc_sw128(tile + 16 * kRowBytes * kk, kBoxBytes, 8 * kRowBytes);
}

/* A producer thread's share of a k-block: row r (of 64), half the tile's
 * 128 columns: 64 values = 2 * BITS words, and the row's scale and min. */
constexpr int kSlabValues = 64;
template <int BITS> struct Slab {
  static constexpr int kWords = kSlabValues * BITS / 32;
  uint32_t w[kWords];
  uint32_t scale_bits, mn_bits; /* bf16, converted at use: not a use of the load */
  bool live;                    /* the row is inside K */
};

template <int BITS>
__device__ __forceinline__ void load_slab(Slab<BITS> &s, const Args &a, long long k, long long g,
                                          int v0) {
  s.live = k < a.p.K;
  if (!s.live)
    return;
  const long long row = k * a.G + g;
  /* 64 values at v0 (a multiple of 64) of the group: words v0 / VPW ..,
   * 8 * BITS bytes aligned */
  const uint32_t *src = a.p.words + row * 8 * BITS + v0 * BITS / 32;
  if constexpr (Slab<BITS>::kWords == 2) {
    const uint2 v = __ldg(reinterpret_cast<const uint2 *>(src));
    s.w[0] = v.x;
    s.w[1] = v.y;
  } else {
#pragma unroll
    for (int i = 0; i < Slab<BITS>::kWords / 4; ++i) {
      const uint4 v = __ldg(reinterpret_cast<const uint4 *>(src) + i);
      s.w[4 * i] = v.x;
      s.w[4 * i + 1] = v.y;
      s.w[4 * i + 2] = v.z;
      s.w[4 * i + 3] = v.w;
    }
  }
  const unsigned short *sc = static_cast<const unsigned short *>(a.p.scale);
  const unsigned short *mn = static_cast<const unsigned short *>(a.p.mins);
  s.scale_bits = __ldg(sc + row);
  s.mn_bits = __ldg(mn + row);
}

/* Code j (0..63) of the slab. */
template <int BITS> __device__ __forceinline__ uint32_t slab_code(const Slab<BITS> &s, int j) {
  constexpr int kVpw = 32 / BITS;
  return (s.w[j / kVpw] >> ((j % kVpw) * BITS)) & ((1u << BITS) - 1u);
}

/* Dequantises the slab into row r of B box `box` (8 chunks of 8 values).
 *
 * 1 and 2 bits: the row's 2 or 4 possible values, bf16(fma(q, scale, min))
 * exactly as the formula gives them, are a table of 4 or 8 bytes in two
 * registers, looked up by PRMT (dequant_lut.cuh), where the producer warps'
 * issue rate bounds the kernel. 4 and 8 bits (16 and 256 values a row)
 * compute each value. */
template <int BITS>
__device__ __forceinline__ void store_slab(const Slab<BITS> &s, uint32_t box, int r) {
  const float scale = __uint_as_float(s.scale_bits << 16), mn = __uint_as_float(s.mn_bits << 16);
  uint32_t lo = 0u, hi = 0u; /* the table: values 0, 1 | 2, 3 */
  if constexpr (BITS <= 2) {
    const __nv_bfloat162 t01 =
        __floats2bfloat162_rn(dequant_code(0u, scale, mn), dequant_code(1u, scale, mn));
    lo = *reinterpret_cast<const uint32_t *>(&t01);
    if constexpr (BITS == 2) {
      const __nv_bfloat162 t23 =
          __floats2bfloat162_rn(dequant_code(2u, scale, mn), dequant_code(3u, scale, mn));
      hi = *reinterpret_cast<const uint32_t *>(&t23);
    }
  }
#pragma unroll
  for (int c = 0; c < kSlabValues / 8; ++c) {
    const int cc = c;
    uint32_t packed[4] = {0u, 0u, 0u, 0u};
    if (s.live) {
      if constexpr (BITS <= 2) {
#pragma unroll
        for (int h = 0; h < 2; ++h) { /* values 8cc + 4h .. + 3 */
          constexpr int kVpw = 32 / BITS;
          const int j = 8 * cc + 4 * h;
          const uint32_t field = s.w[j / kVpw] >> ((j % kVpw) * BITS);
          fpdq::lookup4<BITS>(field, lo, hi, packed[2 * h], packed[2 * h + 1]);
        }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float x0 = dequant_code(slab_code(s, 8 * cc + 2 * i), scale, mn);
          const float x1 = dequant_code(slab_code(s, 8 * cc + 2 * i + 1), scale, mn);
          const __nv_bfloat162 p = __floats2bfloat162_rn(x0, x1);
          packed[i] = *reinterpret_cast<const uint32_t *>(&p);
        }
      }
    }
    const uint32_t addr = box + r * kRowBytes + ((c ^ (r & 7)) << 4);
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(packed[0]),
                 "r"(packed[1]), "r"(packed[2]), "r"(packed[3])
                 : "memory");
  }
}

template <class T, int BITS>
__global__ void __launch_bounds__(kThreads, 1)
    dw_sm90_kernel(const __grid_constant__ CUtensorMap tma_dy, const Args a) {
#if FP_SM90A
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                              ~uintptr_t(1023));
  const uint32_t base = smem_u32(smem);
  volatile int *flag = reinterpret_cast<volatile int *>(smem + kBarOffset + 2 * kStages * 8);

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_bar(base, s), 1 + 4); /* expect_tx + the filling warpgroup's warps */
      mbar_init(empty_bar(base, s), 8);    /* every consumer warp */
    }
    fence_mbar_init();
  }
  __syncthreads();

  const int unit = static_cast<int>(blockIdx.x);
  const int tile = unit / a.split_k, split = unit % a.split_k;
  const int tm = tile / a.ntn, tn = tile % a.ntn;
  const int kb0 = static_cast<int>(static_cast<long long>(split) * a.kblocks / a.split_k);
  const int kb1 = static_cast<int>(static_cast<long long>(split + 1) * a.kblocks / a.split_k);
  const int nk = kb1 - kb0;

  if (threadIdx.x < kProducers) {
    /* producer warpgroups: warpgroup pw fills the stages of k-blocks pw,
     * pw + 2, ... (two k-blocks in the making at once: one warpgroup's
     * chain of stores, proxy fence and arrival per k-block is long); its
     * thread lt takes row lt % 64 of the k-block, columns [64 (lt / 64),
     * +64) of the tile: the 8 lanes of a quarter warp, whose 16-byte stores
     * share a wavefront, then write 8 rows whose swizzled chunk c lies in
     * 8 different bank groups (two lanes a row, one per half, put 2 in each
     * of 4: 8 wavefronts a store in place of 4, under ncu on an H200;
     * 100864 x 768 x 768, bits=2: 188 -> 183 us). At 8 bits a row's half
     * is 64 bytes of words, and 32 rows a warp read 11% slower than 16 rows'
     * 128 contiguous bytes: there row lt / 2, half lt % 2, as before. */
    const int pw = threadIdx.x >> 7, lt = threadIdx.x & 127;
    const int r = BITS == 8 ? lt >> 1 : lt & 63, half = BITS == 8 ? lt & 1 : lt >> 6;
    const long long n0 = static_cast<long long>(tn) * kBN;
    const long long g = n0 / FP_QGROUP;
    const int v0 = static_cast<int>(n0 % FP_QGROUP) + 64 * half;
    setmaxnreg_dec<kProducerRegs>();
    int a_col[kABoxes];
#pragma unroll
    for (int i = 0; i < kABoxes; ++i) { /* a box past COUT feeds rows never stored */
      const long long c = static_cast<long long>(tm) * kBM + 64 * i;
      a_col[i] = c < a.p.COUT ? static_cast<int>(c) : 0;
    }
    if (lt == 0)
      tma_prefetch_map(&tma_dy);
    /* this warpgroup's k-blocks j = 0, 1, .. are it = pw + 2j; the words of
     * j, j + 1 and j + 2 in flight in three slabs used in turn (the loop
     * unrolled by 3 so that no register is copied: a copy of a load's
     * destination waits for the load, which is how a rotation cur = next
     * stalled every k-block on its own load) */
    const int mine = (nk - pw + 1) / 2;
    Slab<BITS> s0, s1, s2;
    s0.live = s1.live = s2.live = false;
    const long long k_first = static_cast<long long>(kb0 + pw) * kBK + r;
    if (mine > 0)
      load_slab<BITS>(s0, a, k_first, g, v0);
    if (mine > 1)
      load_slab<BITS>(s1, a, k_first + 2 * kBK, g, v0);
    const auto step = [&](const Slab<BITS> &use, Slab<BITS> &fill, int j) {
      if (j + 2 < mine)
        load_slab<BITS>(fill, a, k_first + static_cast<long long>(j + 2) * 2 * kBK, g, v0);
      const int it = pw + 2 * j;
      const int stage = it % kStages;
      const uint32_t phase = static_cast<uint32_t>(it / kStages) & 1u;
      mbar_wait(empty_bar(base, stage), phase ^ 1u);
      if (lt == 0) {
        const int kb = kb0 + it;
        mbar_arrive_expect_tx(full_bar(base, stage), kABoxes * kBoxBytes);
#pragma unroll
        for (int i = 0; i < kABoxes; ++i)
          tma_load_2d(stage_a(base, stage, i), &tma_dy, full_bar(base, stage), a_col[i], kb * kBK);
      }
      store_slab<BITS>(use, stage_b(base, stage) + half * kBoxBytes, r);
      /* the generic-proxy stores, before wgmma's async reads; then one
       * arrival a warp */
      fence_proxy_async();
      __syncwarp();
      if ((lt & 31) == 0)
        mbar_arrive(full_bar(base, stage));
    };
    for (int j = 0; j < mine; j += 3) {
      step(s0, s2, j);
      if (j + 1 < mine)
        step(s1, s0, j + 1);
      if (j + 2 < mine)
        step(s2, s1, j + 2);
    }
    return;
  }

  /* consumer warpgroups: cw takes rows [128 cw, +128) of the tile, as two
   * m64 halves (A boxes 2 cw and 2 cw + 1) against the same B */
  setmaxnreg_inc<kConsumerRegs>();
  const int cw = (threadIdx.x - kProducers) >> 7;
  const int ct = threadIdx.x - kProducers; /* 0..255 */
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  float acc0[kBN / 2], acc1[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) {
    acc0[i] = 0.0f;
    acc1[i] = 0.0f;
  }
  int stage = 0, prev = -1;
  uint32_t phase = 0;
  for (int it = 0; it < nk; ++it) {
    mbar_wait(full_bar(base, stage), phase);
    const uint32_t a0 = stage_a(base, stage, 2 * cw), a1 = stage_a(base, stage, 2 * cw + 1);
    const uint32_t bt = stage_b(base, stage);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      Wgmma<kBN, __nv_bfloat16>::template ss<1, 1>(acc0, desc_mn(a0, kk), desc_mn(bt, kk), 1);
      Wgmma<kBN, __nv_bfloat16>::template ss<1, 1>(acc1, desc_mn(a1, kk), desc_mn(bt, kk), 1);
    }
    wgmma_commit();
    if (prev >= 0) {
      wgmma_wait<1>();
      if (lane == 0)
        mbar_arrive(empty_bar(base, prev));
    }
    prev = stage;
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
  wgmma_wait<0>();
  fence_operands(acc0);
  fence_operands(acc1);

  /* acc[4j + 2h + e]: row 16 warp + lane / 4 + 8h (of the half's 64),
   * column 8j + 2 (lane % 4) + e */
  const int lcol = 2 * (lane % 4);
  const long long m0 = static_cast<long long>(tm) * kBM, n0 = static_cast<long long>(tn) * kBN;
  T *out = static_cast<T *>(a.p.out);
  const auto each = [&](auto &&f) {
#pragma unroll
    for (int hm = 0; hm < 2; ++hm) {
      const float *acc = hm == 0 ? acc0 : acc1;
      const int lrow = cw * 128 + hm * 64 + warp * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          f(lrow + 8 * h, lcol + 8 * j, make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]));
    }
  };
  if (a.split_k == 1) {
    each([&](int r, int c, float2 v) {
      const long long m = m0 + r, n = n0 + c;
      if (m < a.p.COUT && n < a.p.CIN)
        store_pair<T>(out, a.p.CIN, m, n, v, n + 1 < a.p.CIN);
    });
    return;
  }
  /* a tile's four float columns from e = 4i: out[m0 + e / kBN, n0 + e % kBN ..] */
  const auto store4 = [&](int e, const float4 &v) {
    const long long m = m0 + e / kBN, n = n0 + e % kBN;
    if (m < a.p.COUT) {
      if (n < a.p.CIN)
        store_pair<T>(out, a.p.CIN, m, n, make_float2(v.x, v.y), n + 1 < a.p.CIN);
      if (n + 2 < a.p.CIN)
        store_pair<T>(out, a.p.CIN, m, n + 2, make_float2(v.z, v.w), n + 3 < a.p.CIN);
    }
  };
  float *mine = split_slice(a.p.ws, a.tiles, tile, split, kBM, kBN);
  each([&](int r, int c, float2 v) { *reinterpret_cast<float2 *>(mine + r * kBN + c) = v; });
  if (a.parallel) {
    unsigned *arrived = split_counters(a.p.ws) + tile;
    unsigned *left = split_departures(a.p.ws, a.tiles, a.split_k, kBM, kBN) + tile;
    __threadfence(); /* this block's slice is visible before its arrival */
    named_sync(1, 256);
    if (ct == 0) {
      atomicAdd(arrived, 1u);
      /* every block of the grid is resident (the cooperative launch) */
      while (*reinterpret_cast<volatile unsigned *>(arrived) < static_cast<unsigned>(a.split_k))
        __nanosleep(128);
    }
    named_sync(1, 256);
    __threadfence(); /* the other slices are read after their writers' fences */
    /* this block sums float4 columns [q0, q1) of the tile */
    constexpr int kVec = kBM * kBN / 4;
    const int q0 = split * kVec / a.split_k, q1 = (split + 1) * kVec / a.split_k;
    for (int q = q0 + ct; q < q1; q += 256) {
      float4 x[kMaxParallelSplit];
#pragma unroll
      for (int t = 0; t < kMaxParallelSplit; ++t) /* the loads first: all in flight */
        if (t < a.split_k)
          x[t] = __ldcg(
              reinterpret_cast<const float4 *>(split_slice(a.p.ws, a.tiles, tile, t, kBM, kBN)) +
              q);
      float4 v = x[0];
#pragma unroll
      for (int t = 1; t < kMaxParallelSplit; ++t)
        if (t < a.split_k) {
          v.x += x[t].x;
          v.y += x[t].y;
          v.z += x[t].z;
          v.w += x[t].w;
        }
      store4(4 * q, v);
    }
    /* the last block to leave zeroes both counters for the next launch
     * (every block has passed the wait by then) */
    named_sync(1, 256);
    if (ct == 0 && atomicAdd(left, 1u) == static_cast<unsigned>(a.split_k - 1)) {
      *arrived = 0u;
      *left = 0u;
    }
    return;
  }
  if (!split_arrive_last(a.p.ws, a.tiles, tile, a.split_k, ct, flag, [] { named_sync(1, 256); }))
    return;
  /* the last block of the tile: float4 columns, slices in order */
  for (int e = 4 * ct; e < kBM * kBN; e += 4 * 256) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s = 0; s < a.split_k; ++s) {
      const float4 x = __ldcg(
          reinterpret_cast<const float4 *>(split_slice(a.p.ws, a.tiles, tile, s, kBM, kBN) + e));
      v.x += x.x;
      v.y += x.y;
      v.z += x.z;
      v.w += x.w;
    }
    store4(e, v);
  }
#else
  (void)tma_dy;
  (void)a;
  __trap(); /* built for sm_90a only */
#endif
}

/* Per instantiation (hence the template on T and BITS, not on the
 * kernel's type, which all instantiations share): the shared-memory
 * opt-in, set once per device. */
template <class T, int BITS>
cudaError_t launch(const CUtensorMap &map, const Args &a, long long units, cudaStream_t stream) {
  static std::atomic<int> done[64];
  auto kernel = dw_sm90_kernel<T, BITS>;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess)
    return e;
  if (dev >= 64 || !done[dev].load(std::memory_order_acquire)) {
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (e != cudaSuccess)
      return e;
    if (dev < 64)
      done[dev].store(1, std::memory_order_release);
  }
  if (a.parallel) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cfg.gridDim = dim3(static_cast<unsigned>(units));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmemBytes;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    e = cudaLaunchKernelEx(&cfg, kernel, map, a);
    if (e != cudaErrorCooperativeLaunchTooLarge)
      return e;
    /* the GPU is shared (MPS, a smaller partition): the blocks may run in
     * waves, so the last one sums alone */
    (void)cudaGetLastError();
    Args serial = a;
    serial.parallel = 0;
    kernel<<<static_cast<unsigned>(units), kThreads, kSmemBytes, stream>>>(map, serial);
    return cudaGetLastError();
  }
  kernel<<<static_cast<unsigned>(units), kThreads, kSmemBytes, stream>>>(map, a);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_bits(const CUtensorMap &map, const Args &a, long long units,
                        cudaStream_t stream) {
  switch (a.p.bits) {
  case 1:
    return launch<T, 1>(map, a, units, stream);
  case 2:
    return launch<T, 2>(map, a, units, stream);
  case 4:
    return launch<T, 4>(map, a, units, stream);
  case 8:
    return launch<T, 8>(map, a, units, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace

cudaError_t sm90_dw_run(const ProblemDw &p, const fp_dw_plan &plan, cudaStream_t stream) {
  if (plan.bm != kBM || plan.bn != kBN || plan.bk != kBK || plan.threads != kThreads ||
      p.lddy % 8 != 0 || (reinterpret_cast<uintptr_t>(p.dy) & 15u) != 0 ||
      (reinterpret_cast<uintptr_t>(p.words) & 15u) != 0 || p.K > 0x7FFFFF00ll)
    return cudaErrorInvalidValue;
  Args a;
  a.p = p;
  a.split_k = plan.split_k;
  a.parallel = plan.parallel_reduce && plan.split_k > 1 && plan.split_k <= kMaxParallelSplit;
  a.ntn = static_cast<int>((p.CIN + kBN - 1) / kBN);
  const long long tiles = ((p.COUT + kBM - 1) / kBM) * a.ntn;
  const long long units = tiles * plan.split_k;
  if (units > 0x7FFFFFFFll)
    return cudaErrorInvalidValue;
  a.tiles = static_cast<int>(tiles);
  a.kblocks = static_cast<int>((p.K + kBK - 1) / kBK);
  a.G = (p.CIN + FP_QGROUP - 1) / FP_QGROUP;
  if (plan.split_k > 1 &&
      (p.ws == nullptr || p.ws_bytes < split_workspace_bytes(tiles, plan.split_k, kBM, kBN) +
                                           split_counters_bytes(tiles)))
    return cudaErrorInvalidValue;
  CUtensorMap map;
  /* dy [K, COUT]: boxes of 64 k rows x 64 m columns */
  cudaError_t e = encode_2d(&map, 2, p.dy, p.COUT, p.K, p.lddy, 64, kBK);
  if (e != cudaSuccess)
    return e;
  return p.dtype == Storage<__nv_bfloat16>::kDtype
             ? launch_bits<__nv_bfloat16>(map, a, units, stream)
             : launch_bits<float>(map, a, units, stream);
}

int sm90_dw_stubs(const void **out, int cap) {
  const void *mine[] = {
      reinterpret_cast<const void *>(&dw_sm90_kernel<float, 1>),
      reinterpret_cast<const void *>(&dw_sm90_kernel<float, 2>),
      reinterpret_cast<const void *>(&dw_sm90_kernel<float, 4>),
      reinterpret_cast<const void *>(&dw_sm90_kernel<float, 8>),
      reinterpret_cast<const void *>(&dw_sm90_kernel<__nv_bfloat16, 1>),
      reinterpret_cast<const void *>(&dw_sm90_kernel<__nv_bfloat16, 2>),
      reinterpret_cast<const void *>(&dw_sm90_kernel<__nv_bfloat16, 4>),
      reinterpret_cast<const void *>(&dw_sm90_kernel<__nv_bfloat16, 8>),
  };
  return copy_stubs(mine, out, cap);
}

} // namespace fpgemm
