/* fuseport GEMM core, path SM90: the epilogue of gemm_sm90.cu -- the kernel's
 * arguments (GemmArgs), the epilogue functor on the accumulators (apply_pair,
 * realign_right, apply_tile), the store through swizzled staging boxes by TMA
 * or by the warpgroup (stage_chunk, stage_chunk_add, copy_box_out), ADD's add
 * tile by TMA (load_add_chunks, EpiState), the per-column operands read
 * before the main loop (ColOperands; the bias row and BN table built from
 * them), epilogue itself, the swapped rows' epilogue (RowOperands,
 * epilogue_swapped) and the split-K reduction (split_reduce). The path's
 * description (the store and the paired layouts included), the pipeline
 * (shared memory, B tile, work units, producer, the consumers' main loop),
 * the kernels and the exports are in gemm_sm90.cu; the host side in
 * gemm_sm90_host.cuh.
 *
 * A part of gemm_sm90.cu, not a header of its own: gemm_sm90.cu includes it
 * once, inside namespace fpgemm's anonymous namespace (using namespace
 * fpsm90), after the consumers' main loop and before the GEMM kernel.
 */
#ifndef FUSEPORT_GEMM_SM90_EPILOGUE_CUH
#define FUSEPORT_GEMM_SM90_EPILOGUE_CUH

/* ---- epilogue ------------------------------------------------------------------------ */

template <class T, class Epi> struct GemmArgs {
  typename Epi::Params ep;
  T *out;
  void *ws; /* split-K workspace */
  int M, N, NB;
  int out_cols;     /* W: output columns per tile (BN; paired BN / 2, or BN / 2 - 8 shifted) */
  int shift;        /* paired, shifted right half: s = N % 8 (0: not shifted) */
  int tma_store;    /* out's rows are 16-byte aligned: the staged boxes go out by TMA */
  int add_tma;      /* ADD / ADD_RELU with add's rows 16-byte aligned: add comes in by TMA */
  int tiles;        /* mtiles * ntiles: split-K counters and slices */
  int parallel;     /* swapped split-K in one wave: each block of a tile sums a share of it */
  int share_groups; /* swapped: the 8-column groups of a tile a block stores (BN / 8 unless
                     * parallel; BN / 8 / split_k then) */
  Sched sched;
  ImGeom im; /* the im2col A operand (gemm_kernel's kIm2col) */
};

/* The accumulator pair (j, h) of this thread (mma_sm90.cuh's fragment)
 * through the epilogue functor; paired: left column c and right c + BN / 2
 * (j + BN / 16). */
template <class Epi, int BN>
__device__ __forceinline__ float2 apply_pair(const typename Epi::Params &ep,
                                             const float (&acc)[BN / 2], int j, int h, int row,
                                             int col, bool second) {
  const int l = 4 * j + 2 * h;
  if constexpr (Epi::kPaired) {
    const int r = l + 4 * (BN / 16);
    return Epi::apply(ep, row, col, make_float2(acc[l], acc[l + 1]),
                      make_float2(acc[r], acc[r + 1]), second);
  } else {
    return Epi::apply(ep, row, col, make_float2(acc[l], acc[l + 1]), second);
  }
}

/* The shifted paired layout (gemm_sm90.cu's opening comment): right
 * accumulator column c + s moves to c, for every c < BN / 2 - 8. Column
 * 8 g + 2 q + e (quad lane q) takes column t = 2 q + e + s of groups
 * g / g + 1 from lane t % 8 / 2 of its quad, element t % 2 = (e + s) % 2 (the same for every lane,
 * so each lane sends that element). Ascending g reads group g + 1 before it is overwritten. The
 * last group keeps stale values: its columns are >= W. */
template <int BN>
__device__ __forceinline__ void realign_right(float (&acc)[BN / 2], int s, int lane) {
  constexpr int kGroups = BN / 16; /* 8-column groups per half */
  constexpr int kRight = 4 * kGroups;
  const int q = lane & 3, quad = lane & ~3;
  const int t0 = 2 * q + s, t1 = t0 + 1;
  const int src0 = quad + ((t0 & 7) >> 1), src1 = quad + ((t1 & 7) >> 1);
  const bool hi0 = t0 >= 8, hi1 = t1 >= 8, odd = (s & 1) != 0;
#pragma unroll
  for (int g = 0; g + 1 < kGroups; ++g)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int l = kRight + 4 * g + 2 * h, ln = l + 4;
      const float a0 = odd ? acc[l + 1] : acc[l], b0 = odd ? acc[ln + 1] : acc[ln];
      const float a1 = odd ? acc[l] : acc[l + 1], b1 = odd ? acc[ln] : acc[ln + 1];
      const float x0 = __shfl_sync(0xffffffffu, a0, src0), y0 = __shfl_sync(0xffffffffu, b0, src0);
      const float x1 = __shfl_sync(0xffffffffu, a1, src1), y1 = __shfl_sync(0xffffffffu, b1, src1);
      acc[l] = hi0 ? y0 : x0;
      acc[l + 1] = hi1 ? y1 : x1;
    }
}

/* The epilogue functor on this thread's part of a tile: rows row0 and
 * row0 + 8, columns col0 + 8 j + {0, 1} (j < kOut / 8); results back into
 * acc (paired: the left half). All pairs go through the functor before any
 * store, so their operand loads (bias, add) are all in flight together.
 * kInterior: the warpgroup's rows and the tile's columns lie inside
 * [M, N]: no edge checks on operand reads (the store clips the tile). */
template <class T, class Epi, int BN, bool kInterior>
__device__ __forceinline__ void apply_tile(const typename Epi::Params &ep, float (&acc)[BN / 2],
                                           int m, int n, int n_lim, int row0, int col0) {
  constexpr int kJ = (Epi::kPaired ? BN / 2 : BN) / 8; /* column groups of 8 */
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 8 * h, col = col0 + 8 * j, l = 4 * j + 2 * h;
      if (kInterior || (row < m && col < n_lim)) {
        const float2 v = apply_pair<Epi, BN>(ep, acc, j, h, row, col, kInterior || col + 1 < n);
        acc[l] = v.x;
        acc[l + 1] = v.y;
      }
    }
  }
}

/* The 16 bits of p[0] (T is 16-bit: __half or __nv_bfloat16, 2-byte aligned)
 * by one 16-bit load: memcpy compiled to two byte loads and a PRMT that
 * waited on them at once, so the load's latency was not hidden behind the
 * main loop as intended. */
template <class T> __device__ __forceinline__ uint16_t load_bits(const T *p) {
  static_assert(sizeof(T) == 2, "16-bit operands");
  return __ldg(reinterpret_cast<const unsigned short *>(p));
}

/* Per-column epilogue operands. Every column of a tile is held by 32
 * threads of a warpgroup (8 lanes of each of its 4 warps), so per-pair
 * reads of bias or of BN's four vectors cost 32x what the tile needs;
 * for BN (4 loads, a conversion each and an rsqrt per column) that made
 * the epilogue instruction-bound (H200, 2026-11-28: conv_bn 1x1 layers
 * took 1.2-1.5x conv_relu's time), and one-wave GEMMs waited on the
 * bias loads (conv_relu 512x7x7 -> 2048: 1.16x). Instead the warpgroup
 * reads each column's operands once, and every thread reads its two
 * columns' from shared memory with one load per column group:
 *   BIAS, BIAS_RELU: the bias values, as T, into the warpgroup's bias row
 *     (Smem::bias_row; v = acc + bias as before);
 *   BN: (scale, shift) as floats into the warpgroup's first staging box
 *     (free once the previous tile's stores have read it): scale =
 *     gamma / sqrt(var + eps) (bn_apply's rsqrt), shift = beta - mean *
 *     scale, v = fma(acc, scale, shift) (the folded form: within a few
 *     float32 ulp of mean * scale of bn_apply).
 * The global reads happen when a unit starts, before its main loop
 * (ColOperands::load into registers: thread t holds columns t, t + 128),
 * so their latency -- an L2 miss on the first tiles -- hides behind the
 * wgmmas instead of opening every epilogue; build_* only writes the
 * registers to shared memory. Columns past n_lim get 0: never stored. */
template <class T, class Epi, int kOut> struct ColOperands {
  __device__ __forceinline__ void load(const typename Epi::Params &, int, int) {}
};
template <class T, int kOut> struct ColOperands<T, EpiLinear<T>, kOut> {
  static constexpr int kPer = (kOut + 127) / 128; /* columns per thread */
  uint16_t v[4][kPer]; /* bias: v[0]; BN: mean, var, gamma, beta (T's bits) */

  __device__ __forceinline__ static uint16_t bits_at(const T *p, int col, int n_lim) {
    return col < n_lim ? load_bits(p + col) : uint16_t{0}; /* 0: +0.0 in f16 and bf16 */
  }
  /* uniform over the warpgroup: kind is a kernel argument */
  __device__ __forceinline__ void load(const typename EpiLinear<T>::Params &ep, int n0, int n_lim) {
    const int t = threadIdx.x & 127;
    if (ep.kind == FP_EPI_BIAS || ep.kind == FP_EPI_BIAS_RELU) {
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        v[0][i] = bits_at(ep.bias, n0 + t + 128 * i, n_lim);
    } else if (ep.kind == FP_CONV_EPI_BN) {
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int i = 0; i < kPer; ++i)
          v[a][i] = bits_at(ep.bn[a], n0 + t + 128 * i, n_lim);
    }
  }
  __device__ __forceinline__ float value(int a, int i) const {
    T x;
    memcpy(&x, &v[a][i], 2);
    return Storage<T>::to_float(x);
  }
};

template <class T, int kOut>
__device__ __forceinline__ void build_bias_row(const ColOperands<T, EpiLinear<T>, kOut> &cols,
                                               uint32_t row) {
  const int t = threadIdx.x & 127;
#pragma unroll
  for (int i = 0; i < cols.kPer; ++i)
    if (t + 128 * i < kOut)
      asm volatile("st.shared.b16 [%0], %1;" ::"r"(row + 2 * (t + 128 * i)), "h"(cols.v[0][i])
                   : "memory");
}

/* acc + bias (then relu) for this thread's columns col0 + 8 j + {0, 1}
 * (row entries 8 j + 2 q, + 1; q = lane % 4). */
template <class T, int BN>
__device__ __forceinline__ void apply_bias_row(float (&acc)[BN / 2], uint32_t row, int lane,
                                               bool relu) {
  const uint32_t base = row + 4 * (lane & 3);
  const int kind = relu ? FP_EPI_BIAS_RELU : FP_EPI_BIAS;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    uint32_t bits;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(bits) : "r"(base + 16 * j) : "memory");
    const float2 b = unpack2<T>(bits);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int l = 4 * j + 2 * h;
      acc[l] = fp_epilogue_unpaired(kind, acc[l], b.x);
      acc[l + 1] = fp_epilogue_unpaired(kind, acc[l + 1], b.y);
    }
  }
}

template <class T, int kOut>
__device__ __forceinline__ void build_bn_table(const ColOperands<T, EpiLinear<T>, kOut> &cols,
                                               float eps, uint32_t table, int n0, int n_lim) {
  static_assert(8 * kOut <= kEpiBoxBytes, "the BN table fits a staging box");
  const int t = threadIdx.x & 127;
#pragma unroll
  for (int i = 0; i < cols.kPer; ++i) {
    const int c = t + 128 * i;
    if (c >= kOut)
      continue;
    float scale = 0.0f, shift = 0.0f;
    if (n0 + c < n_lim) {
      scale = cols.value(2, i) * rsqrtf(cols.value(1, i) + eps);
      shift = fmaf(-cols.value(0, i), scale, cols.value(3, i));
    }
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(table + 8 * c), "f"(scale), "f"(shift)
                 : "memory");
  }
}

/* fma(acc, scale, shift) for this thread's columns (table entries 8 j + 2 q, + 1). */
template <int BN>
__device__ __forceinline__ void apply_bn_table(float (&acc)[BN / 2], uint32_t table, int lane) {
  const uint32_t base = table + 16 * (lane & 3);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    float s0, t0, s1, t1;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(s0), "=f"(t0), "=f"(s1), "=f"(t1)
                 : "r"(base + 64 * j)
                 : "memory");
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int l = 4 * j + 2 * h;
      acc[l] = fmaf(acc[l], s0, t0);
      acc[l + 1] = fmaf(acc[l + 1], s1, t1);
    }
  }
}

/* Staging box addressing: box row r (of the warpgroup's 64) at r * 128
 * bytes, its 16-byte chunk c at c ^ (r % 8) (TMA's 128B swizzle; an
 * 8-column group is one chunk). For stmatrix / ldmatrix x4 over groups jc,
 * jc + 1 (rows +0 and +8 of the warp's 16), lane l addresses row l % 8 of
 * matrix l / 8: matrices (jc, +0), (jc, +8), (jc + 1, +0), (jc + 1, +8). */
__device__ __forceinline__ uint32_t box_addr(uint32_t box, int warp, int lane, int jc) {
  const int i = lane & 7, m = lane >> 3;
  return box + (16 * warp + 8 * (m & 1) + i) * kRowBytes + (((jc + (m >> 1)) ^ i) << 4);
}

/* Rounds output chunk ch (tile columns 64 ch .. 64 ch + 63) of this warp's
 * 16 rows into a staging box. */
template <class T, int BN>
__device__ __forceinline__ void stage_chunk(uint32_t box, const float (&acc)[BN / 2], int ch,
                                            int warp, int lane) {
#pragma unroll
  for (int jc = 0; jc < 8; jc += 2) {
    const int j = 8 * ch + jc;
    stmatrix_x4(box_addr(box, warp, lane, jc), pack2<T>(acc[4 * j], acc[4 * j + 1]),
                pack2<T>(acc[4 * j + 2], acc[4 * j + 3]), pack2<T>(acc[4 * j + 4], acc[4 * j + 5]),
                pack2<T>(acc[4 * j + 6], acc[4 * j + 7]));
  }
}

/* The same with the add tile already in the box (ADD, ADD_RELU by TMA):
 * each warp reads its fragments of add, applies the epilogue formula to
 * (acc, add) and writes the result back in place. */
template <class T, int BN>
__device__ __forceinline__ void stage_chunk_add(uint32_t box, const float (&acc)[BN / 2], int ch,
                                                int kind, int warp, int lane) {
#pragma unroll
  for (int jc = 0; jc < 8; jc += 2) {
    const int j = 8 * ch + jc;
    const uint32_t addr = box_addr(box, warp, lane, jc);
    uint32_t r[4];
    ldmatrix_x4(addr, r[0], r[1], r[2], r[3]);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float2 x = unpack2<T>(r[q]);
      r[q] = pack2<T>(fp_epilogue_unpaired(kind, acc[4 * j + 2 * q], x.x),
                      fp_epilogue_unpaired(kind, acc[4 * j + 2 * q + 1], x.y));
    }
    stmatrix_x4(addr, r[0], r[1], r[2], r[3]);
  }
}

/* Without TMA: the warpgroup writes a staged box's rows itself, a warp per
 * row (lane l: columns 2 l, 2 l + 1), within rows < m and columns < n_lim. */
template <class T>
__device__ __forceinline__ void copy_box_out(uint32_t box, T *out, long long n, int m, int n_lim,
                                             int grow0, int gcol0, int warp, int lane) {
  const int gcol = gcol0 + 2 * lane;
  if (gcol >= n_lim)
    return;
  const bool both = gcol + 1 < n_lim;
#pragma unroll 4
  for (int r = warp; r < 64; r += 4) {
    const int grow = grow0 + r;
    if (grow >= m)
      break;
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];"
                 : "=r"(v)
                 : "r"(box + r * kRowBytes + ((((lane >> 2) ^ (r & 7))) << 4) + (lane & 3) * 4)
                 : "memory");
    T *dst = out + static_cast<long long>(grow) * n + gcol;
    if (both && (reinterpret_cast<uintptr_t>(dst) & 3) == 0) {
      *reinterpret_cast<uint32_t *>(dst) = v;
    } else {
      T x, y;
      const uint16_t lo = static_cast<uint16_t>(v & 0xffffu), hi = static_cast<uint16_t>(v >> 16);
      memcpy(&x, &lo, 2);
      memcpy(&y, &hi, 2);
      dst[0] = x;
      if (both)
        dst[1] = y;
    }
  }
}

/* Output chunks of tile column tn with a column < N (the same for the whole
 * CTA: it decides whether a stage is borrowed). */
template <int kOut> __device__ __forceinline__ int live_chunks(int n, int out_cols, int tn) {
  const int n0 = tn * out_cols;
  const int lim = min(n, n0 + out_cols);
  const int c = (lim - n0 + kEpiCols - 1) / kEpiCols;
  return c < kOut / kEpiCols ? c : kOut / kEpiCols;
}

/* ADD by TMA: the add tile's chunks [c0, c1) of warpgroup cw into their
 * staging boxes, completing on `bar` (the elected thread; the boxes are free). */
template <class SmemT>
__device__ __forceinline__ void load_add_chunks(const SmemT &sm, const CUtensorMap *tma_add,
                                                uint32_t bar, int cw, int held, int c0, int c1,
                                                int n0, int grow0) {
  if (c1 <= c0)
    return;
  mbar_arrive_expect_tx(bar, static_cast<uint32_t>(c1 - c0) * kEpiBoxBytes);
  for (int c = c0; c < c1; ++c)
    tma_load_2d(sm.box(cw, c, held), tma_add, bar, n0 + c * kEpiCols, grow0);
}

/* A consumer warpgroup's epilogue state across its tiles: the add tile's
 * barrier phases (its own boxes, the borrowed stage), whether this tile's
 * add was preloaded, and the N-tile whose bias its bias row holds (-1:
 * none yet; consecutive tiles of one N-tile, all of them where N <= BN,
 * skip rebuilding the row and the barrier after it). */
struct EpiState {
  uint32_t phase = 0, phase2 = 0;
  bool preloaded = false;
  int bias_tn = -1;
};

/* The epilogue of tile (tm, tn) for warpgroup cw: the functor in registers,
 * the rounded values into its staging boxes (chunks >= kEpiBufs in the
 * borrowed stage `held`), then one TMA store per box, or, without TMA,
 * coalesced stores by the warpgroup. With a borrowed stage, the caller has
 * synchronised both warpgroups (their wgmmas no longer read it). Interior
 * tiles of EpiLinear get the kind as a compile-time constant (its branches
 * and unused operand loads fold away). */
template <class T, class Epi, int BN, class SmemT>
__device__ __forceinline__ void
epilogue(const GemmArgs<T, Epi> &args, const CUtensorMap *tma_c, const CUtensorMap *tma_add,
         const SmemT &sm, float (&acc)[BN / 2],
         const ColOperands<T, Epi, Epi::kPaired ? BN / 2 : BN> &cols, int tm, int tn, int held,
         int cw, int warp, int lane, EpiState &st) {
  constexpr int kOut = Epi::kPaired ? BN / 2 : BN;
  if constexpr (Epi::kPaired) {
    if (args.shift != 0)
      realign_right<BN>(acc, args.shift, lane);
  }
  const int w = args.out_cols;
  const int n0 = tn * w;
  const int n_lim = min(args.N, n0 + w);
  const int live = live_chunks<kOut>(args.N, w, tn);
  const int grow0 = tm * kBM + cw * 64; /* this warpgroup's 64 rows */
  const int row0 = grow0 + warp * 16 + lane / 4;
  const int col0 = n0 + 2 * (lane % 4);
  if (grow0 >= args.M)
    return; /* this warpgroup's rows are all past M (uniform over the warpgroup) */
  const bool tma = args.tma_store != 0;
  const bool elected = (threadIdx.x & 127) == 0;
  bool add_in_box = false;
  if constexpr (std::is_same<Epi, EpiLinear<T>>::value) {
    if (args.add_tma) { /* add arrives in the staging boxes (gemm_kernel's consumer loop) */
      constexpr int kOwn = SmemT::kEpiBufs;
      const int own = min(live, kOwn);
      if (elected) {
        if (!st.preloaded) {
          bulk_wait_read<0>(); /* the previous stores have read the boxes */
          load_add_chunks(sm, tma_add, sm.epibar(cw), cw, held, 0, own, n0, grow0);
        }
        load_add_chunks(sm, tma_add, sm.epibar2(cw), cw, held, own, live, n0, grow0);
      }
      if (own > 0) {
        mbar_wait(sm.epibar(cw), st.phase);
        st.phase ^= 1u;
#pragma unroll
        for (int c = 0; c < kOwn && c < kOut / kEpiCols; ++c)
          if (c < live)
            stage_chunk_add<T, BN>(sm.box(cw, c, held), acc, c, args.ep.kind, warp, lane);
      }
      if (live > own) {
        mbar_wait(sm.epibar2(cw), st.phase2);
        st.phase2 ^= 1u;
#pragma unroll
        for (int c = kOwn; c < kOut / kEpiCols; ++c)
          if (c < live)
            stage_chunk_add<T, BN>(sm.box(cw, c, held), acc, c, args.ep.kind, warp, lane);
      }
      st.preloaded = false;
      add_in_box = true;
    }
  }
  if (!add_in_box) {
    const bool interior = grow0 + 64 <= args.M && n0 + w <= args.N;
    bool by_table = false;
    if constexpr (std::is_same<Epi, EpiLinear<T>>::value) {
      const int kind = args.ep.kind;
      if (kind == FP_CONV_EPI_BN) {
        const uint32_t table = sm.box(cw, 0, held);
        if (tma && elected)
          bulk_wait_read<0>(); /* the previous tile's stores have read the box */
        warpgroup_sync(cw);
        build_bn_table<T, kOut>(cols, args.ep.eps, table, n0, n_lim);
        warpgroup_sync(cw);
        apply_bn_table<BN>(acc, table, lane);
        by_table = true;
      } else if (kind == FP_EPI_BIAS || kind == FP_EPI_BIAS_RELU) {
        /* the previous tile's reads of the row ended before its staging's sync */
        if (st.bias_tn != tn) {
          build_bias_row<T, kOut>(cols, sm.bias_row(cw));
          warpgroup_sync(cw);
          st.bias_tn = tn;
        }
        apply_bias_row<T, BN>(acc, sm.bias_row(cw), lane, kind == FP_EPI_BIAS_RELU);
        by_table = true;
      }
    }
    if (by_table) {
      /* done: the sync before staging keeps box 0 and the bias row until every
       * thread has read them */
    } else if constexpr (std::is_same<Epi, EpiLinear<T>>::value) {
      /* the kind as a constant on edge tiles too: the generic form (every
       * kind's branches per pair, fully unrolled) is cold code that an edge
       * tile runs once, and its instruction fetches made a single-wave GEMM
       * whose last tile row is partial take 2-3x as long */
      typename Epi::Params ep = args.ep;
      switch (args.ep.kind) {
#define FP_SM90_KIND(K)                                                                            \
  case K:                                                                                          \
    ep.kind = K;                                                                                   \
    if (interior)                                                                                  \
      apply_tile<T, Epi, BN, true>(ep, acc, args.M, args.N, n_lim, row0, col0);                    \
    else                                                                                           \
      apply_tile<T, Epi, BN, false>(ep, acc, args.M, args.N, n_lim, row0, col0);                   \
    break;
        /* BIAS, BIAS_RELU and BN: above */
        FP_SM90_KIND(FP_EPI_NONE)
        FP_SM90_KIND(FP_EPI_ADD)
        FP_SM90_KIND(FP_EPI_RELU)
        FP_SM90_KIND(FP_EPI_ADD_RELU)
#undef FP_SM90_KIND
      default:
        break;
      }
    } else if (!interior) {
      apply_tile<T, Epi, BN, false>(args.ep, acc, args.M, args.N, n_lim, row0, col0);
    } else {
      apply_tile<T, Epi, BN, true>(args.ep, acc, args.M, args.N, n_lim, row0, col0);
    }
    if (tma && elected)
      bulk_wait_read<0>(); /* the previous tile's stores have read this warpgroup's boxes */
    warpgroup_sync(cw);
#pragma unroll
    for (int c = 0; c < kOut / kEpiCols; ++c)
      if (c < live)
        stage_chunk<T, BN>(sm.box(cw, c, held), acc, c, warp, lane);
  }
  if (tma) {
    fence_proxy_async(); /* the staged boxes are visible to the copy engine */
    warpgroup_sync(cw);
    if (elected) {
      for (int c = 0; c < live; ++c)
        tma_store_2d(tma_c, sm.box(cw, c, held), n0 + c * kEpiCols, grow0);
      bulk_commit();
    }
  } else {
    warpgroup_sync(cw);
#pragma unroll
    for (int c = 0; c < kOut / kEpiCols; ++c)
      if (c < live)
        copy_box_out<T>(sm.box(cw, c, held), args.out, args.N, args.M, n_lim, grow0,
                        n0 + c * kEpiCols, warp, lane);
    warpgroup_sync(cw); /* every read of the boxes is done (the next tile, a borrowed stage) */
  }
}

/* ---- the swapped epilogue (FP_GEMM_CFG_SWAP rows) ---------------------------------------
 * The kernel computes out^T = B A^T: its rows are out's columns n (B's rows,
 * kernel M = N), its columns out's rows m (kernel N = M). The per-column
 * operands of out (bias, BN's four vectors) are per kernel row, two rows a
 * thread (rows row0 and row0 + 8 of mma_sm90.cuh's fragment), read into
 * registers when a unit starts (RowOperands::load, before the main loop).
 * Each 8 x 8 block of the fragment (8 n, 8 m) goes into the warpgroup's
 * staging region transposed (stmatrix .trans): region row r is out's row
 * m0 + r, 128 bytes = the warpgroup's 64 columns n, chunk g (n / 8) at
 * g ^ (r % 8) (TMA's 128B swizzle); one TMA store of a [BN rows, 64
 * columns] box writes it. */
template <class T> struct RowOperands {
  uint16_t v[4][2]; /* bias: v[0]; BN: mean, var, gamma, beta (T's bits); rows row0, row0 + 8 */

  __device__ __forceinline__ void load(const typename EpiLinear<T>::Params &ep, int row0,
                                       int m_lim) {
    const int kind = ep.kind; /* uniform: a kernel argument */
    const int arrays = kind == FP_CONV_EPI_BN                            ? 4
                       : kind == FP_EPI_BIAS || kind == FP_EPI_BIAS_RELU ? 1
                                                                         : 0;
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        v[a][h] = 0;
        const T *src = kind == FP_CONV_EPI_BN ? ep.bn[a] : ep.bias;
        if (a < arrays && row0 + 8 * h < m_lim)
          v[a][h] = load_bits(src + row0 + 8 * h);
      }
  }
  __device__ __forceinline__ float value(int a, int h) const {
    T x;
    memcpy(&x, &v[a][h], 2);
    return Storage<T>::to_float(x);
  }
};

template <class T, int BN, class SmemT>
__device__ __forceinline__ void
epilogue_swapped(const GemmArgs<T, EpiLinear<T>> &args, const CUtensorMap *tma_c, const SmemT &sm,
                 float (&acc)[BN / 2], const RowOperands<T> &ops, int tm, int tn, int cw, int warp,
                 int lane, int share0) {
  static_assert(BN % 16 == 0 && SmemT::kBorrow == 0 && SmemT::kEpiBufs * 64 >= BN,
                "a swapped tile stages in the warpgroup's own boxes");
  const int grow0 = tm * kBM + cw * 64; /* this warpgroup's 64 kernel rows: out's columns */
  if (grow0 >= args.M)
    return; /* uniform over the warpgroup */
  const int kind = args.ep.kind;
  /* per row h: v = acc * s[h] + t[h], then relu; (s, t) = (1, bias), (scale, shift), (1, 0) */
  float s[2] = {1.0f, 1.0f}, t[2] = {0.0f, 0.0f};
  const bool relu = kind == FP_EPI_RELU || kind == FP_EPI_BIAS_RELU;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (kind == FP_CONV_EPI_BN) {
      s[h] = ops.value(2, h) * rsqrtf(ops.value(1, h) + args.ep.eps); /* bn_apply's rsqrt */
      t[h] = fmaf(-ops.value(0, h), s[h], ops.value(3, h));
    } else if (kind == FP_EPI_BIAS || kind == FP_EPI_BIAS_RELU) {
      t[h] = ops.value(0, h);
    }
  }
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int l = 4 * j + 2 * h + c;
        const float v = kind == FP_CONV_EPI_BN ? fmaf(acc[l], s[h], t[h]) : acc[l] + t[h];
        acc[l] = relu ? fmaxf(v, 0.0f) : v;
      }
  const bool elected = (threadIdx.x & 127) == 0;
  const uint32_t box = sm.box(cw, 0, -1); /* the warpgroup's boxes, contiguous: BN rows */
  if (elected)
    bulk_wait_read<0>(); /* the previous tile's store has read the region */
  warpgroup_sync(cw);
  /* lane l addresses column l % 8 of matrix l / 8: matrices (j, h=0), (j, h=1), (j+1, h=0),
   * (j+1, h=1); region row = m offset 8 (j + mi / 2) + l % 8, chunk = n group 2 warp + mi % 2 */
  const int i = lane & 7, mi = lane >> 3;
#pragma unroll
  for (int j = 0; j < BN / 8; j += 2) {
    const int r = 8 * (j + (mi >> 1)) + i;
    const uint32_t addr = box + r * kRowBytes + (((2 * warp + (mi & 1)) ^ (r & 7)) << 4);
    stmatrix_x4_trans(
        addr, pack2<T>(acc[4 * j], acc[4 * j + 1]), pack2<T>(acc[4 * j + 2], acc[4 * j + 3]),
        pack2<T>(acc[4 * j + 4], acc[4 * j + 5]), pack2<T>(acc[4 * j + 6], acc[4 * j + 7]));
  }
  fence_proxy_async(); /* the staged rows are visible to the copy engine */
  warpgroup_sync(cw);
  if (elected) {
    /* the block's share: groups [share0, share0 + args.share_groups) of the staged rows (the
     * map's box is that tall; 8-row steps keep the 1024-byte swizzle phase). TMA clips rows >= M
     * and columns >= N. */
    tma_store_2d(tma_c, box + 8 * share0 * kRowBytes, grow0, tn * BN + 8 * share0);
    bulk_commit();
  }
}

/* One thread's fence between a block's partial-sum stores and its arrival
 * (release), or between the wait and the block's reads (acquire); the
 * block's barrier orders the other threads' accesses around it, as a grid
 * barrier does (rather than a fence.sc in each of its 256 threads). */
__device__ __forceinline__ void fence_acq_rel_gpu() {
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

/* Split-K slices in fragment order: the consumer threads' accumulators
 * as float4 (acc[4 j .. 4 j + 3]: rows r and r + 8, two columns each), j-th
 * float4 of consumer thread t at float4 index j * 256 + t of its slice. A
 * block only ever reads the slices back into the same threads' registers,
 * so any order that all blocks share will do; this one makes every access
 * a warp's 512 contiguous bytes (the tile's row-major order cut each warp's
 * access into eight 32-byte pieces). */
template <int BN>
__device__ __forceinline__ float4 *frag_slot(void *ws, int tiles, long long tile, int split) {
  return reinterpret_cast<float4 *>(split_slice(ws, tiles, tile, split, kBM, BN)) +
         (threadIdx.x - 128);
}
template <int BN>
__device__ __forceinline__ void store_frag(float4 *slot, const float (&acc)[BN / 2], int j) {
  __stcg(slot + j * 256, make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
}

/* Split-K: write this split's partial tile to its slice; the block that
 * arrives last on the tile's counter sums the slices in order 0..split_k-1
 * into acc and returns true (the caller then runs the epilogue), and
 * resets the counter. The sum reads 16 float4 of a slice at a time, all
 * loads in flight. */
template <class T, class Epi, int BN>
__device__ __forceinline__ bool split_reduce(const GemmArgs<T, Epi> &args, float (&acc)[BN / 2],
                                             const Unit &w, volatile int *flag) {
  const int split_k = args.sched.split_k;
  const long long tile = static_cast<long long>(w.tm) * args.sched.ntiles + w.tn;
  constexpr int kJ = BN / 8;
  float4 *mine = frag_slot<BN>(args.ws, args.tiles, tile, w.split);
#pragma unroll
  for (int j = 0; j < kJ; ++j)
    store_frag<BN>(mine, acc, j);
  consumers_sync(); /* the block's stores are ordered before thread 128's fence */
  if (threadIdx.x == 128) {
    unsigned *counter = split_counters(args.ws) + tile;
    fence_acq_rel_gpu(); /* release: the partial is visible device-wide before the arrival */
    const unsigned arrived = atomicAdd(counter, 1u);
    const int last = arrived == static_cast<unsigned>(split_k - 1);
    if (last) {
      fence_acq_rel_gpu(); /* acquire: the other splits' partials before our reads */
      *counter = 0u;       /* left zeroed for the next launch */
    }
    *flag = last;
  }
  consumers_sync(); /* ... and the block's reads after it */
  const bool last = *flag != 0;
  if (!last)
    return false;
  const float4 *base = frag_slot<BN>(args.ws, args.tiles, tile, 0);
  const long long slice_stride = static_cast<long long>(args.tiles) * kBM * BN / 4; /* float4 */
  constexpr int kCJ = kJ < 16 ? kJ : 16;
#pragma unroll
  for (int j0 = 0; j0 < kJ; j0 += kCJ) {
    for (int s = 0; s < split_k; ++s) {
      float4 v[kCJ];
#pragma unroll
      for (int j = 0; j < kCJ; ++j)
        if (j0 + j < kJ)
          v[j] = __ldcg(base + s * slice_stride + (j0 + j) * 256);
#pragma unroll
      for (int j = 0; j < kCJ; ++j) {
        const int l = 4 * (j0 + j);
        if (j0 + j >= kJ)
          continue;
        acc[l] = s == 0 ? v[j].x : acc[l] + v[j].x;
        acc[l + 1] = s == 0 ? v[j].y : acc[l + 1] + v[j].y;
        acc[l + 2] = s == 0 ? v[j].z : acc[l + 2] + v[j].z;
        acc[l + 3] = s == 0 ? v[j].w : acc[l + 3] + v[j].w;
      }
    }
  }
  return true;
}

/* Split-K on a swapped tile, every block at once (args.parallel: one unit a
 * block, all resident): each block writes the 8-column groups of its
 * partial tile that it does not own to its slice, waits until all split_k
 * blocks of the tile have arrived, then sums its own groups [g0, g0 +
 * share_groups) over the slices in order 0..split_k-1 (its own from
 * registers), so every block reads and writes (split_k - 1) / split_k of a
 * slice where the last block alone read split_k slices; the epilogue then
 * stores only those groups. The last block to leave zeroes both counters
 * for the next launch (every block has passed the wait by then). */
template <class T, int BN>
__device__ __forceinline__ void split_reduce_share(const GemmArgs<T, EpiLinear<T>> &args,
                                                   float (&acc)[BN / 2], const Unit &w, int g0) {
  const int split_k = args.sched.split_k;
  const int g1 = g0 + args.share_groups;
  const long long tile = static_cast<long long>(w.tm) * args.sched.ntiles + w.tn;
  constexpr int kJ = BN / 8;
  float4 *mine = frag_slot<BN>(args.ws, args.tiles, tile, w.split);
#pragma unroll
  for (int j = 0; j < kJ; ++j)
    if (j < g0 || j >= g1)
      store_frag<BN>(mine, acc, j);
  unsigned *arrived = split_counters(args.ws) + tile;
  unsigned *left = split_departures(args.ws, args.tiles, split_k, kBM, BN) + tile;
  consumers_sync(); /* the block's stores are ordered before thread 128's fence */
  if (threadIdx.x == 128) {
    fence_acq_rel_gpu(); /* release: this block's groups are visible before its arrival */
    atomicAdd(arrived, 1u);
    while (*reinterpret_cast<volatile unsigned *>(arrived) < static_cast<unsigned>(split_k))
      __nanosleep(32);
    fence_acq_rel_gpu(); /* acquire: the other blocks' groups before the reads below */
  }
  consumers_sync(); /* ... which every thread makes after thread 128's acquire */
  const float4 *base = frag_slot<BN>(args.ws, args.tiles, tile, 0);
  const long long slice_stride = static_cast<long long>(args.tiles) * kBM * BN / 4; /* float4 */
  constexpr int kCJ = 8; /* groups summed at once: 32 floats of sums beside the accumulators */
#pragma unroll
  for (int j0 = 0; j0 < kJ; j0 += kCJ) {
    if (j0 + kCJ <= g0 || j0 >= g1)
      continue; /* uniform: no group of this chunk is ours */
    float4 sum[kCJ];
#pragma unroll
    for (int j = 0; j < kCJ; ++j)
      sum[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s = 0; s < split_k; ++s) {
      /* a slice's groups are all loaded before any is added: one select between registers
       * and a load per group kept each load waiting for the one before it */
      float4 v[kCJ];
      if (s == w.split) { /* uniform: this block's own partial, in registers */
#pragma unroll
        for (int j = 0; j < kCJ; ++j) {
          const int l = 4 * (j0 + j);
          v[j] = j0 + j < kJ ? make_float4(acc[l], acc[l + 1], acc[l + 2], acc[l + 3])
                             : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
      } else {
#pragma unroll
        for (int j = 0; j < kCJ; ++j) {
          const int jj = j0 + j;
          v[j] = jj < kJ && jj >= g0 && jj < g1 ? __ldcg(base + s * slice_stride + jj * 256)
                                                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
      }
#pragma unroll
      for (int j = 0; j < kCJ; ++j)
        sum[j] = s == 0 ? v[j]
                        : make_float4(sum[j].x + v[j].x, sum[j].y + v[j].y, sum[j].z + v[j].z,
                                      sum[j].w + v[j].w);
    }
#pragma unroll
    for (int j = 0; j < kCJ; ++j) {
      const int jj = j0 + j, l = 4 * jj;
      if (jj < kJ && jj >= g0 && jj < g1) {
        acc[l] = sum[j].x;
        acc[l + 1] = sum[j].y;
        acc[l + 2] = sum[j].z;
        acc[l + 3] = sum[j].w;
      }
    }
  }
  consumers_sync();
  if (threadIdx.x == 128 && atomicAdd(left, 1u) == static_cast<unsigned>(split_k - 1)) {
    *arrived = 0u;
    *left = 0u;
  }
}

#endif
