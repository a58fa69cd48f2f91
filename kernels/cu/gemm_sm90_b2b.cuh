/* fuseport GEMM core, path SM90: the b2b (gemm2) kernels of gemm_sm90.cu --
 * out = (A @ B) @ d with the intermediate kept in registers: gemm2_kernel
 * (128-row tiles, two consumer warpgroups) with its direct stores from
 * registers (store_direct, store_quad16), and gemm2_rows64_kernel (64-row
 * units, one consumer warpgroup, out by TMA). The path's description is in
 * gemm_sm90.cu.
 *
 * A part of gemm_sm90.cu, not a header of its own: gemm_sm90.cu includes it
 * once, inside namespace fpgemm's anonymous namespace (using namespace
 * fpsm90), after the GEMM kernel and before the host side.
 */
#ifndef FUSEPORT_GEMM_SM90_B2B_CUH
#define FUSEPORT_GEMM_SM90_B2B_CUH

/* ---- the b2b (gemm2) kernel -------------------------------------------------------------- */

/* Stores gemm2's out tile straight from registers: rows row0 and row0 + 8,
 * columns col0 + 8 j + {0, 1}. kInterior: the tile lies inside [M, P], P is
 * even and out 4-byte aligned: one 4-byte store per pair, no predicates. */
template <class T, int BN, bool kInterior>
__device__ __forceinline__ void store_direct(T *out, int m, int n, const float (&acc)[BN / 2],
                                             int row0, int col0) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + 8 * h;
    if (!kInterior && row >= m)
      continue;
    T *dst = out + static_cast<long long>(row) * n + col0;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int col = col0 + 8 * j, l = 4 * j + 2 * h;
      if (kInterior)
        *reinterpret_cast<uint32_t *>(dst + 8 * j) = pack2<T>(acc[l], acc[l + 1]); /* RN */
      else if (col < n)
        store_pair<T>(out, n, row, col, make_float2(acc[l], acc[l + 1]), col + 1 < n);
    }
  }
}

/* Stores an interior out tile (P % 8 == 0, out 16-byte aligned) in 16-byte
 * writes (quad_row16). The 4-byte stores of store_direct filled the LSU
 * queue: on an H100 (ncu, 8192x128x4096x4096) 43% of the stall cycles were
 * "LG throttle". */
template <class T, int BN>
__device__ __forceinline__ void store_quad16(T *out, int n, const float (&acc)[BN / 2], int row0,
                                             int tile_col0, int lane) {
  const int q = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    T *dst = out + static_cast<long long>(row0 + 8 * h) * n + tile_col0;
#pragma unroll
    for (int g = 0; g < BN / 32; ++g)
      *reinterpret_cast<uint4 *>(dst + 8 * (4 * g + q)) = quad_row16<T>(acc, g, h, lane);
  }
}

template <class T> struct Gemm2Args {
  T *out;
  int M, N, P;
  int mtiles, ptiles, pgroups, units, kblocks, nchunks;
};

/* Unit u of either b2b kernel: row tile tm, and the P tiles [pt0, pt1) of its
 * group pg (P split over pgroups blocks, each computing the intermediate). */
struct B2bUnit {
  int tm, pt0, pt1;
};
template <class T> __device__ __forceinline__ B2bUnit b2b_unit(const Gemm2Args<T> &args, int u) {
  const int tm = u / args.pgroups, pg = u % args.pgroups;
  return {tm, pg * args.ptiles / args.pgroups, (pg + 1) * args.ptiles / args.pgroups};
}

/* The ring's barriers (thread 0: `full` takes the producer's arrive.expect_tx,
 * `empty` one arrival from each of the consumer warps), then the block's
 * barrier. */
template <int STAGES, class SmemT>
__device__ __forceinline__ void init_ring(const SmemT &sm, uint32_t consumer_warps) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(sm.full(s), 1);
      mbar_init(sm.empty(s), consumer_warps);
    }
    fence_mbar_init();
  }
  __syncthreads();
}

__device__ __forceinline__ void prefetch_maps(const CUtensorMap *a, const CUtensorMap *b,
                                              const CUtensorMap *d) {
  tma_prefetch_map(a);
  tma_prefetch_map(b);
  tma_prefetch_map(d);
}

/* Rounds this thread's accumulators of the [64, NI] intermediate to T and
 * packs them as wgmma register A fragments (mma_sm90.cuh: a[0..3] of k16
 * step s are accumulators 8 s .. 8 s + 7). Columns >= n are zeroed: d's
 * rows there are TMA zeros, and 0 * (a clamped box's values) must not make
 * NaN. */
template <class T, int NI>
__device__ __forceinline__ void pack_intermediate(const float (&acc)[NI / 2],
                                                  uint32_t (&afrag)[NI / 16][4], int n, int lane) {
#pragma unroll
  for (int s = 0; s < NI / 16; ++s) {
    const int c = 16 * s + 2 * (lane % 4);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int cq = c + 8 * (q / 2);
      const float x = cq < n ? acc[8 * s + 2 * q] : 0.0f;
      const float y = cq + 1 < n ? acc[8 * s + 2 * q + 1] : 0.0f;
      afrag[s][q] = pack2<T>(x, y);
    }
  }
}

/* acc2 = the intermediate (afrag) @ one [NI, 128] tile of d, whose nchunks
 * [64, 128] chunks come through the ring's next stages (at the stage's A
 * offset); each stage is released once the wgmmas reading it retired. */
template <class T, int NI, int STAGES, class SmemT>
__device__ __forceinline__ void mma_d_tile(float (&acc2)[kB2bBN2 / 2],
                                           const uint32_t (&afrag)[NI / 16][4], const SmemT &sm,
                                           Ring<STAGES> &ring, int nchunks, int lane) {
#pragma unroll
  for (int i = 0; i < kB2bBN2 / 2; ++i)
    acc2[i] = 0.0f;
  int prev = 0;
#pragma unroll
  for (int ch = 0; ch < NI / 64; ++ch) {
    if (ch < nchunks) {
      mbar_wait(sm.full(ring.stage), ring.phase);
      const uint32_t d = sm.a(ring.stage);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk)
        Wgmma<kB2bBN2, T>::template rs<1>(acc2, afrag[4 * ch + kk], desc_b<false>(d, kk), 1);
      wgmma_commit();
      if (ch > 0) {
        wgmma_wait<1>();
        release_stage<1>(sm.empty(prev), lane);
      }
      prev = ring.stage;
      ring.advance();
    }
  }
  wgmma_wait<0>();
  release_stage<1>(sm.empty(prev), lane);
  fence_operands(acc2);
}

template <class T, int BN, int STAGES, bool kTransB>
__global__ void __launch_bounds__(kThreads, 1)
    gemm2_kernel(const __grid_constant__ CUtensorMap tma_a,
                 const __grid_constant__ CUtensorMap tma_b,
                 const __grid_constant__ CUtensorMap tma_d, const Gemm2Args<T> args) {
#if FP_SM90A
  using SmemT = Smem<BN, STAGES, 0>;
  constexpr int kDBytes = kBK * kB2bBN2 * 2; /* one d tile: 64 rows (n) x 128 columns (p) */
  static_assert(kDBytes <= SmemT::kStageBytes, "a d tile fits a stage");
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = align1024(smem_raw);
  const SmemT sm{smem_u32(smem)};

  init_ring<STAGES>(sm, 8); /* the two consumer warpgroups' warps */

  if (threadIdx.x < 128) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      prefetch_maps(&tma_a, &tma_b, &tma_d);
      Ring<STAGES> ring;
      for (int u = blockIdx.x; u < args.units; u += gridDim.x) {
        const auto [tm, pt0, pt1] = b2b_unit(args, u);
        for (int kb = 0; kb < args.kblocks; ++kb) { /* the intermediate [128, N] */
          producer_acquire<STAGES>(sm.empty(ring.stage), ring);
          load_ab<BN, STAGES, 0, 1, kTransB, false, false>(sm, ring.stage, &tma_a, &tma_b, tm * kBM,
                                                           kb, 0, args.N, args.N, BN, 0, 0u,
                                                           ImTap{}, ImGeom{});
          ring.advance();
        }
        for (int pt = pt0; pt < pt1; ++pt) /* then d, [64 n, 128 p] per stage */
          for (int ch = 0; ch < args.nchunks; ++ch) {
            producer_acquire<STAGES>(sm.empty(ring.stage), ring);
            const uint32_t full = sm.full(ring.stage);
            mbar_arrive_expect_tx(full, kDBytes);
#pragma unroll
            for (int i = 0; i < kB2bBN2 / 64; ++i) {
              const int col = pt * kB2bBN2 + i * 64;
              tma_load_2d(sm.a(ring.stage) + i * 64 * kRowBytes, &tma_d, full,
                          col < args.P ? col : 0, ch * kBK);
            }
            ring.advance();
          }
      }
    }
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    const int cw = threadIdx.x / 128 - 1;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    float acc[BN / 2];
    uint32_t afrag[BN / 16][4]; /* the rounded intermediate as wgmma A fragments, k16 step s */
    float acc2[kB2bBN2 / 2];
    Ring<STAGES> ring;
    for (int u = blockIdx.x; u < args.units; u += gridDim.x) {
      const auto [tm, pt0, pt1] = b2b_unit(args, u);
      const int last = mma_unit<T, BN, 1, kTransB>(acc, sm, ring, args.kblocks,
                                                   cw * 64u * kRowBytes, lane, NoHook{});
      if (last >= 0)
        release_stage<1>(sm.empty(last), lane);
      pack_intermediate<T, BN>(acc, afrag, args.N, lane);
      for (int pt = pt0; pt < pt1; ++pt) {
        mma_d_tile<T, BN>(acc2, afrag, sm, ring, args.nchunks, lane);
        const int row0 = tm * kBM + cw * 64 + warp * 16 + lane / 4;
        const int col0 = pt * kB2bBN2 + 2 * (lane % 4);
        const bool inside = (tm + 1) * kBM <= args.M && (pt + 1) * kB2bBN2 <= args.P;
        const uintptr_t at = reinterpret_cast<uintptr_t>(args.out);
        if (inside && (args.P & 7) == 0 && (at & 15) == 0)
          store_quad16<T, kB2bBN2>(args.out, args.P, acc2, row0, pt * kB2bBN2, lane);
        else if (inside && (args.P & 1) == 0 && (at & 3) == 0)
          store_direct<T, kB2bBN2, true>(args.out, args.M, args.P, acc2, row0, col0);
        else
          store_direct<T, kB2bBN2, false>(args.out, args.M, args.P, acc2, row0, col0);
      }
    }
  }
#else
  __trap(); /* built for sm_90a only */
#endif
}

/* ---- the 64-row b2b kernel (gemm2_rows64_kernel) ----------------------------------------
 * A unit is 64 rows of out (and a range of its 128-column P tiles, pgroups
 * as gemm2_kernel's): one consumer warpgroup computes the unit's [64, NI]
 * intermediate (wgmma m64nNIk16 from shared memory, K deep), rounds it
 * into register A fragments and multiplies it by d in [64 n, 128 p]
 * chunks (wgmma rs m64n128k16); one producer warp issues the TMA loads of
 * both phases into one ring of stages. Each 64 x 128 out tile is staged
 * (stmatrix, 128B swizzle) in one of 2-4 buffers and written by TMA, so the
 * warpgroup goes on to the next tile's wgmmas while the copy engine writes
 * (out not 16-byte aligned or P % 8 != 0: stored from registers instead).
 *
 * Why 64 rows: these GEMMs read A and write out (N <= 256 makes both
 * phases about as long in memory as in the tensor cores), so what matters
 * is that every SM streams. 128-row tiles left half the SMs idle at M =
 * 8192 (64 tiles for 132 SMs) or, with the P range split over two blocks,
 * computed every intermediate twice; 64-row units give each SM its own
 * rows, and where smem allows two blocks an SM (Smem64::kBlocksPerSm) one
 * block's writes overlap the other's reads.
 *
 * What did not pay (H200, 8192 x 128 x 4096 x 4096 at 53.8 us with this
 * kernel; ncu: 48% of DRAM, 38% of the tensor pipe, 69% of L2): A in a
 * deep ring of its own and B in a short one (a producer warp each: 62.6
 * us; B's ring of 4-8 stages decides it, 8 gets back to 53.5: every block
 * reads all of B from L2, and its latency, not A's, paces the main loop),
 * clusters of two row tiles that multicast B and d (56.1 us; faster
 * only at N = 16, by 2-4%, and at 8192 x 200 x 1000 x 3000, 49.6 against
 * 66.9), and two consumer warpgroups, each with half of the intermediate
 * (swapped through shared memory) and of every out tile (52.5 us; within
 * 2.5% at N <= 128, 2-5% slower at N = 256, whose single warpgroup ncu
 * put at 56% of the tensor pipe). */
template <int NI, int STAGES> struct Smem64 {
  static constexpr int kRows = 64;
  static constexpr int kABytes = kRows * kBK * 2;   /* A: 64 rows x 64 k */
  static constexpr int kBBytes = NI * kBK * 2;      /* B: 64 k x NI */
  static constexpr int kDBytes = kBK * kB2bBN2 * 2; /* d: 64 n x 128 p, two 64-column boxes */
  static constexpr int kStageBytes = kABytes + kBBytes > kDBytes ? kABytes + kBBytes : kDBytes;
  static constexpr int kOutOffset = STAGES * kStageBytes;
  static constexpr int kOutBufBytes = 2 * kEpiBoxBytes; /* an out tile: two 64 x 64 boxes */
  /* two blocks an SM where two fit beside two out buffers each (228 KiB an
   * SM, 1 KiB of it reserved per block); then as many out buffers (2 to 4)
   * as fit: more tiles in flight to memory */
  static constexpr int kFixed = 1024 + kOutOffset + STAGES * 16;
  static constexpr int kBlocksPerSm = 2 * (kFixed + 2 * kOutBufBytes + 1024) <= 233472 ? 2 : 1;
  static constexpr int kRoom = (kBlocksPerSm == 2 ? 233472 / 2 - 1024 : kSmemLimit) - kFixed;
  static constexpr int kOutBufs = kRoom / kOutBufBytes > 4 ? 4 : kRoom / kOutBufBytes;
  static constexpr int kBarOffset = kOutOffset + kOutBufs * kOutBufBytes;
  static constexpr int kBytes = 1024 + kBarOffset + STAGES * 16;
  static_assert(kStageBytes % 1024 == 0, "swizzled tiles stay 1024-aligned");
  static_assert(kOutBufs >= 2 && kBytes <= kSmemLimit, "two out buffers at least");

  uint32_t base;
  __device__ uint32_t a(int s) const { return base + s * kStageBytes; }
  __device__ uint32_t b(int s) const { return base + s * kStageBytes + kABytes; }
  __device__ uint32_t out(int buf, int i) const {
    return base + kOutOffset + buf * kOutBufBytes + i * kEpiBoxBytes;
  }
  __device__ uint32_t full(int s) const { return base + kBarOffset + 8 * s; }
  __device__ uint32_t empty(int s) const { return base + kBarOffset + 8 * (STAGES + s); }
};
constexpr int kRows64Threads = 160; /* a consumer warpgroup (warps 0-3) + a producer warp */

template <class T, int NI, int STAGES, bool kTransB>
__global__ void __launch_bounds__(kRows64Threads, Smem64<NI, STAGES>::kBlocksPerSm)
    gemm2_rows64_kernel(const __grid_constant__ CUtensorMap tma_a,
                        const __grid_constant__ CUtensorMap tma_b,
                        const __grid_constant__ CUtensorMap tma_d,
                        const __grid_constant__ CUtensorMap tma_out, const Gemm2Args<T> args,
                        int tma_store) {
#if FP_SM90A
  using SmemT = Smem64<NI, STAGES>;
  using BT = BTile<NI, kTransB, false>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = align1024(smem_raw);
  const SmemT sm{smem_u32(smem)};

  init_ring<STAGES>(sm, 4); /* the consumer warps */

  if (threadIdx.x >= 128) { /* the producer warp: one thread issues */
    if (threadIdx.x == 128) {
      prefetch_maps(&tma_a, &tma_b, &tma_d);
      Ring<STAGES> ring;
      for (int u = blockIdx.x; u < args.units; u += gridDim.x) {
        const auto [tm, pt0, pt1] = b2b_unit(args, u);
        /* the intermediate [64, NI], from k-block tm % kblocks on (units
         * that start together read different k-blocks of B, and of A's rows:
         * 3-12% faster at N <= 64 and on the 256-wide rows, 1-2% slower on
         * two of 14 shapes, H200; rotating the P tiles too was slower) */
        const int rot = tm % args.kblocks;
        for (int it = 0; it < args.kblocks; ++it) {
          const int kb = it + rot < args.kblocks ? it + rot : it + rot - args.kblocks;
          producer_acquire<STAGES>(sm.empty(ring.stage), ring);
          const uint32_t full = sm.full(ring.stage);
          mbar_arrive_expect_tx(full, SmemT::kABytes + SmemT::kBBytes);
          tma_load_2d(sm.a(ring.stage), &tma_a, full, kb * kBK, tm * SmemT::kRows);
#pragma unroll
          for (int i = 0; i < BT::kBoxes; ++i) {
            const int col = BT::column(i, 0, args.N, args.N, NI, 0);
            const uint32_t dst = sm.b(ring.stage) + i * BT::kBoxBytes;
            if (kTransB)
              tma_load_2d(dst, &tma_b, full, kb * kBK, col);
            else
              tma_load_2d(dst, &tma_b, full, col, kb * kBK);
          }
          ring.advance();
        }
        for (int pt = pt0; pt < pt1; ++pt) /* then d, [64 n, 128 p] per stage */
          for (int ch = 0; ch < args.nchunks; ++ch) {
            producer_acquire<STAGES>(sm.empty(ring.stage), ring);
            const uint32_t full = sm.full(ring.stage);
            mbar_arrive_expect_tx(full, SmemT::kDBytes);
#pragma unroll
            for (int i = 0; i < kB2bBN2 / 64; ++i) {
              const int col = pt * kB2bBN2 + i * 64;
              tma_load_2d(sm.a(ring.stage) + i * 64 * kRowBytes, &tma_d, full,
                          col < args.P ? col : 0, ch * kBK);
            }
            ring.advance();
          }
      }
    }
    return; /* no block-wide barrier follows */
  }

  /* the consumer warpgroup */
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const bool elected = threadIdx.x == 0;
  if (elected && tma_store)
    tma_prefetch_map(&tma_out);
  float acc[NI / 2];
  uint32_t afrag[NI / 16][4]; /* the rounded intermediate as wgmma A fragments, k16 step s */
  float acc2[kB2bBN2 / 2];
  Ring<STAGES> ring;
  int stored = 0; /* out tiles staged so far: the next buffer */
  for (int u = blockIdx.x; u < args.units; u += gridDim.x) {
    const auto [tm, pt0, pt1] = b2b_unit(args, u);
    const int last = mma_unit<T, NI, 1, kTransB>(acc, sm, ring, args.kblocks, 0u, lane, NoHook{});
    if (last >= 0)
      release_stage<1>(sm.empty(last), lane);
    pack_intermediate<T, NI>(acc, afrag, args.N, lane);
    for (int pt = pt0; pt < pt1; ++pt) {
      mma_d_tile<T, NI>(acc2, afrag, sm, ring, args.nchunks, lane);
      const int row_base = tm * SmemT::kRows;
      if (tma_store) {
        const int buf = stored % SmemT::kOutBufs;
        if (elected) /* the copies of kOutBufs tiles ago have read this buffer */
          bulk_wait_read<SmemT::kOutBufs - 1>();
        named_sync(1, 128);
        stage_chunk<T, kB2bBN2>(sm.out(buf, 0), acc2, 0, warp, lane);
        stage_chunk<T, kB2bBN2>(sm.out(buf, 1), acc2, 1, warp, lane);
        fence_proxy_async(); /* the staged boxes are visible to the copy engine */
        named_sync(1, 128);
        if (elected) {
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int col = pt * kB2bBN2 + i * 64;
            if (col < args.P) /* TMA clips the rest of the box at P and M */
              tma_store_2d(&tma_out, sm.out(buf, i), col, row_base);
          }
          bulk_commit();
        }
        ++stored;
      } else {
        const int row0 = row_base + warp * 16 + lane / 4;
        const int col0 = pt * kB2bBN2 + 2 * (lane % 4);
        const bool inside = row_base + SmemT::kRows <= args.M && (pt + 1) * kB2bBN2 <= args.P;
        const uintptr_t at = reinterpret_cast<uintptr_t>(args.out);
        if (inside && (args.P & 1) == 0 && (at & 3) == 0)
          store_direct<T, kB2bBN2, true>(args.out, args.M, args.P, acc2, row0, col0);
        else
          store_direct<T, kB2bBN2, false>(args.out, args.M, args.P, acc2, row0, col0);
      }
    }
  }
  if (elected && tma_store)
    bulk_wait<0>(); /* the staged stores are written (and their buffers read) before exit */
#else
  __trap(); /* built for sm_90a only */
#endif
}

#endif
