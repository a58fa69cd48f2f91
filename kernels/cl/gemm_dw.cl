/* fuseport OpenCL kernels, family gemm, continued: dw_packed_<dt>, the
 * weight gradient from packed activations, on gemm.cl's core with a
 * dequantising B loader and split-K through the workspace.
 *
 * The family's program is fp_device_common.h, common.cl, gemm.cl,
 * gemm_kernels.cl and this file, in that order (CMakeLists.txt,
 * FP_CL_MORE_gemm). What this file uses and does not define is gemm.cl's
 * (the core: loaders, MAC, stores), gemm_kernels.cl's (the groups' order,
 * fp_gemm_tile_at) or common.cl's. */

/* ---- dw_packed_<dt> -----------------------------------------------------------------------
 * The weight gradient from packed activations (kernels.def):
 *   out[m, n] = sum_{k < K} dy[k*lddy + m] * x'(k, n), M = COUT, N = CIN,
 * both operands k-outer. The core's tiles and MAC as they are: A = dy^T goes
 * through the n-major loader (bfloat16, 8-byte loads of 4 consecutive m),
 * B = x' through a dequantising loader that forms each float4 of 4
 * consecutive n from one packed word (4 * BITS bits: one word at every
 * BITS) and its group's scale and min, rounded to bfloat16 as
 * fp_dequant_value does: x' exists only in local memory. A tile's BN (64 or
 * 128) divides the 256 values of a group, so the words past CIN that it
 * reads are the group's padding, inside the buffer.
 *
 * Split-K. With groups = tiles * S (the host's choice, S <= ws's room),
 * group g computes tile g mod tiles over K-steps [s*nk/S, (s+1)*nk/S),
 * s = g / tiles, nk = ceil(K / BK). S = 1 stores its tile directly. S > 1
 * uses ws as gemm_common.cuh's split-K workspace:
 *   [tiles counters, uint32, padded to 256 bytes][S * tiles * BM * BN floats]
 * each group writes its partial tile (row-major BM x BN) to slice
 * (s * tiles + tile), fences, and counts its arrival on the tile's counter;
 * the group that arrives last adds the S slices in order 0 .. S-1 (the
 * result does not depend on which group came last), stores the tile and
 * sets the counter back to 0, so ws (zeroed once by the recipe) is zeroed
 * again for the next launch. The slices and counters are read and written
 * with atomics only: other groups' partials are never in a stale cache, and
 * OpenCL 1.2 defines nothing else between groups of one launch. Their cost,
 * a few L2 operations per output element and slice, is small beside the
 * K-steps of the main loop: S is chosen only where K is long. With S = 1,
 * ws may be none (it is never touched). */

/* A tile of B = x' for K-steps at k0 (below kend): stage[l] holds the
 * float4 t + l*NT of the BK x BN tile, (kk, r) = k0 + kk and columns
 * n0 + r .. n0 + r + 3, zeros past kend and CIN (fp_gemm_store_nmajor's
 * layout). */
static FP_INLINE void fp_dw_load_b(const int NT, const int BN, const int BK, const int t,
                                   __global const uint *words, __global const ushort *scale,
                                   __global const ushort *minv, const long n0, const long N,
                                   const long G, const int bits, const long k0, const long kend,
                                   float4 *stage) {
  const int per_k = BN / 4, total = BK * per_k;
  const uint mask = (1u << bits) - 1u;
#pragma unroll
  for (int l = 0; l < FP_GEMM_MAX_LOADS; ++l) {
    if (l * NT >= total)
      break;
    float4 v = (float4)(0.0f);
    const int idx = t + l * NT;
    if (idx < total) {
      const int kk = idx / per_k, r = 4 * (idx - kk * per_k);
      const long k = k0 + kk, n = n0 + r;
      if (k < kend && n < N) {
        const long u = k * G + (n >> 8);       /* the unit: row k, group n / 256 */
        const int bit = (int)(n & 255) * bits; /* of the 4 values, within the unit */
        const uint w = words[u * 8 * bits + (bit >> 5)] >> (bit & 31);
        const float s = fp_bf16_bits_to_f32(scale[u]), m = fp_bf16_bits_to_f32(minv[u]);
        v = (float4)(fp_dequant_value(w & mask, s, m), fp_dequant_value((w >> bits) & mask, s, m),
                     fp_dequant_value((w >> (2 * bits)) & mask, s, m),
                     fp_dequant_value((w >> (3 * bits)) & mask, s, m));
      }
    }
    stage[l] = v;
  }
}

/* fp_gemm_mainloop's double-buffered K loop over [kbeg, kend), A from dy
 * (n-major, bfloat16) and B from fp_dw_load_b. Ends with a barrier. */
static FP_INLINE void fp_dw_mainloop(const int WX, const int WY, const int TM, const int BK,
                                     __local float *As, const int pa, __local float *Bs,
                                     const int pb, __global const ushort *dy, const long lddy,
                                     const long m0, const long M, __global const uint *words,
                                     __global const ushort *scale, __global const ushort *minv,
                                     const long G, const int bits, const long n0, const long N,
                                     const long kbeg, const long kend,
                                     float4 acc[FP_GEMM_MAX_TM][2]) {
  const int NT = WX * WY, BM = WY * TM, BN = WX * FP_GEMM_TN;
  const int t = (int)get_local_id(1) * WX + (int)get_local_id(0);
  float4 sa[FP_GEMM_MAX_LOADS], sb[FP_GEMM_MAX_LOADS];
  const long nk = (kend - kbeg + BK - 1) / BK;
  for (long kt = 0; kt <= nk; ++kt) { /* uniform trip count */
    const int load = kt < nk;
    const long k0 = kbeg + kt * BK;
    __local float *as = As + (int)(kt & 1) * BK * pa, *bs = Bs + (int)(kt & 1) * BK * pb;
    if (load) {
      fp_gemm_load_nmajor(FP_DT_BF16, NT, BM, BK, t, dy, lddy, m0, M, BM, 0, k0, kend, sa);
      fp_dw_load_b(NT, BN, BK, t, words, scale, minv, n0, N, G, bits, k0, kend, sb);
    }
    if (kt > 0) {
      const int prev = (int)((kt - 1) & 1);
      fp_gemm_mac(WX, WY, TM, BK, As + prev * BK * pa, pa, Bs + prev * BK * pb, pb, acc);
    }
    if (load) {
      fp_gemm_store_nmajor(NT, BM, BK, t, sa, as, pa);
      fp_gemm_store_nmajor(NT, BN, BK, t, sb, bs, pb);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* Orders a work-item's global memory operations before and after it
 * device-wide; on NVIDIA also membar.gl itself (what CUDA's
 * __threadfence() is), not left to how the driver maps mem_fence. */
static FP_INLINE void fp_dw_fence(void) {
  mem_fence(CLK_GLOBAL_MEM_FENCE);
#if defined(FP_NV_PTX) && FP_NV_PTX >= 1
  asm volatile("membar.gl;");
#endif
}

/* Bytes of the split-K counters of `tiles` tiles (gemm_common.cuh's
 * split_counters_bytes). */
static FP_INLINE long fp_dw_counters_bytes(const long tiles) {
  return (tiles * 4 + 255) / 256 * 256;
}

static FP_INLINE void fp_dw_body(const int dt, const int WX, const int WY, const int TM,
                                 const int BK, __local float *lds, __local uint *last,
                                 __global void *out, __global const ushort *dy,
                                 __global const uint *words, __global const ushort *scale,
                                 __global const ushort *minv, __global uint *ws, const long K,
                                 const long M, const long N, const int bits, const long lddy) {
  const int BM = WY * TM, BN = WX * FP_GEMM_TN;
  const int pa = BM + FP_GEMM_PAD, pb = BN + FP_GEMM_PAD;
  __local float *As = lds;               /* [2][BK][pa] */
  __local float *Bs = lds + 2 * BK * pa; /* [2][BK][pb] */
  const long G = (N + FP_QGROUP - 1) / FP_QGROUP;
  const long mb = (M + BM - 1) / BM, nb = (N + BN - 1) / BN, tiles = mb * nb;
  const long splits = fp_div_narrow(get_num_groups(0), tiles);
  const long g = get_group_id(0), split = fp_div_narrow(g, tiles), tile = g - split * tiles;
  long bm, bn;
  fp_gemm_tile_at(tile, mb, nb, &bm, &bn);
  const long m0 = bm * BM, n0 = bn * BN;
  const long nk = (K + BK - 1) / BK;
  const long kbeg = split * nk / splits * BK, kend = min(K, (split + 1) * nk / splits * BK);
  float4 acc[FP_GEMM_MAX_TM][2];
  fp_gemm_zero(acc);
  fp_dw_mainloop(WX, WY, TM, BK, As, pa, Bs, pb, dy, lddy, m0, M, words, scale, minv, G, bits, n0,
                 N, kbeg, kend, acc);
  const int tx = get_local_id(0), ty = get_local_id(1);
  /* split-K (uniform: every group of the launch has the same `splits`) */
  const int split_k = splits > 1;
  __global volatile uint *counter = (__global volatile uint *)ws + tile;
  __global volatile uint *slices =
      (__global volatile uint *)((__global uchar *)ws + fp_dw_counters_bytes(tiles));
  const long tile_elems = (long)BM * BN;
  if (split_k) {
    /* unrolled like the epilogue: acc's indices must stay constants, or
     * a GPU compiler moves the accumulators to memory for the whole kernel */
#if FP_GEMM_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
    for (int i = 0; i < TM; ++i) {
      const int r = (i / 4) * 4 * WY + 4 * ty + (i & 3);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        __global volatile uint *p =
            slices + (split * tiles + tile) * tile_elems + r * BN + c * 4 * WX + 4 * tx;
        const float4 v = acc[i][c];
        atomic_xchg(p, as_uint(v.x));
        atomic_xchg(p + 1, as_uint(v.y));
        atomic_xchg(p + 2, as_uint(v.z));
        atomic_xchg(p + 3, as_uint(v.w));
      }
    }
    fp_dw_fence(); /* this work-item's partials before the group's arrival */
  }
  /* Every group passes these two barriers, split or not: under a uniform
   * condition they are legal OpenCL, but PoCL 3.1 then ran the code after
   * them with the work-items' local ids permuted (rows of the tile stored
   * to other rows). */
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (split_k && tx == 0 && ty == 0)
    *last = atomic_inc(counter) == (uint)(splits - 1);
  barrier(CLK_LOCAL_MEM_FENCE);
  const int store = !split_k || *last; /* the same for the whole group */
  if (split_k && store) {
    fp_dw_fence();
#if FP_GEMM_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
    for (int i = 0; i < TM; ++i) {
      const int r = (i / 4) * 4 * WY + 4 * ty + (i & 3);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const long off = tile * tile_elems + r * BN + c * 4 * WX + 4 * tx;
        float4 sum = (float4)(0.0f);
        for (long s = 0; s < splits; ++s) {
          float4 v = acc[i][c];
          if (s != split) {
            __global volatile uint *p = slices + s * tiles * tile_elems + off;
            v = as_float4((uint4)(atomic_or(p, 0u), atomic_or(p + 1, 0u), atomic_or(p + 2, 0u),
                                  atomic_or(p + 3, 0u)));
          }
          sum = s == 0 ? v : sum + v;
        }
        acc[i][c] = sum;
      }
    }
    if (tx == 0 && ty == 0)
      atomic_xchg(counter, 0u); /* ready for the next launch */
  }
#if FP_GEMM_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
  for (int i = 0; i < TM; ++i) {
    const long row = m0 + (i / 4) * 4 * WY + 4 * ty + (i & 3);
    if (row >= M || !store)
      continue;
    fp_gemm_store_unpaired(dt, FP_EPI_NONE, out, NULL, NULL, row, n0 + 4 * tx, N, acc[i][0]);
    fp_gemm_store_unpaired(dt, FP_EPI_NONE, out, NULL, NULL, row, n0 + 4 * WX + 4 * tx, N,
                           acc[i][1]);
  }
}

/* dw_packed<prefix><dt>: gemm's configurations t, m and l (the host's
 * table; kernels.def's dw_packed_<dt> is t). out is float or bfloat16
 * (rounded once, at the store). */
#define FP_DW_KERNEL(name, T, dt, WX, WY, TM, BK)                                                  \
  __kernel __attribute__((reqd_work_group_size(WX, WY, 1))) void name(                             \
      __global T *out, __global const ushort *dy, __global const uint *words,                      \
      __global const ushort *scale, __global const ushort *minv, __global uint *ws, long K,        \
      long COUT, long CIN, int bits, long lddy) {                                                  \
    __local float4 lds[FP_GEMM_LDS(WX, WY, TM, BK) / 4];                                           \
    __local uint last;                                                                             \
    fp_dw_body(dt, WX, WY, TM, BK, (__local float *)lds, &last, out, dy, words, scale, minv, ws,   \
               K, COUT, CIN, bits, lddy);                                                          \
  }

#define FP_DW_KERNELS(prefix, WX, WY, TM, BK)                                                      \
  FP_DW_KERNEL(prefix##f32, float, FP_DT_F32, WX, WY, TM, BK)                                      \
  FP_DW_KERNEL(prefix##bf16, ushort, FP_DT_BF16, WX, WY, TM, BK)

FP_DW_KERNELS(dw_packed_, 8, 8, 4, 16)
#if FP_GEMM_FITS(16, 16, 4, 16)
FP_DW_KERNELS(dw_packed_m_, 16, 16, 4, 16)
#endif
#if FP_GEMM_FITS(16, 16, 8, 16)
FP_DW_KERNELS(dw_packed_l_, 16, 16, 8, 16)
#endif
