/* fuseport OpenCL kernels, family gemm, continued: the GEMM core's own
 * kernels, gemm_<dt> in each tile configuration the device fits (with the
 * groups' order, fp_gemm_tile_at, which gemm_dw.cl shares) and gemm2_<dt>,
 * two products through local memory.
 *
 * The family's program is fp_device_common.h, common.cl, gemm.cl, this file
 * and gemm_dw.cl, in that order (CMakeLists.txt, FP_CL_MORE_gemm). gemm.cl
 * describes the core and holds what these kernels build on (the loaders,
 * the MAC, fp_gemm_mainloop, the epilogue's stores; "above" in a comment
 * here may point into it). */

/* ---- gemm_<dt> ------------------------------------------------------------------------------ */

#ifndef FP_GEMM_BAND
#define FP_GEMM_BAND 8 /* row blocks per band of the group order (L2 reuse) */
#endif

/* The tile (row block *bm, column block *bn) of group g (fp_gemm_tile_of:
 * get_group_id(0)) of a 1-D grid of mb x nb groups (dimension 0 has the
 * largest group count on every device, 2^31 - 1 on NVIDIA against 65535 for
 * dimension 1). Groups go in bands of FP_GEMM_BAND row blocks, column
 * block by column block within a band, so that groups running together
 * share A's rows and B's columns in L2. */
static FP_INLINE void fp_gemm_tile_at(const long g, const long mb, const long nb, long *bm,
                                      long *bn) {
  const long band = FP_GEMM_BAND * nb;
  const long first = FP_GEMM_BAND * fp_div_narrow(g, band), r = g - fp_div_narrow(g, band) * band;
  const long rows = min(mb - first, (long)FP_GEMM_BAND);
  *bn = fp_div_narrow(r, rows);
  *bm = first + (r - *bn * rows);
}

static FP_INLINE void fp_gemm_tile_of(const long mb, const long nb, long *bm, long *bn) {
  fp_gemm_tile_at(get_group_id(0), mb, nb, bm, bn);
}

static FP_INLINE void fp_gemm_body(const int dt, const int WX, const int WY, const int TM,
                                   const int BK, __local float *lds, __global void *out,
                                   __global const void *a, __global const void *b,
                                   __global const void *bias, __global const void *add,
                                   const long M, const long N, const long K, const long lda,
                                   const long ldb, const int epi, const int trans_b) {
  const int BM = WY * TM, BN = WX * FP_GEMM_TN;
  const int pa = BM + FP_GEMM_PAD, pb = BN + FP_GEMM_PAD;
  __local float *As = lds;               /* [2][BK][pa] */
  __local float *Bs = lds + 2 * BK * pa; /* [2][BK][pb] */
  const int paired = FP_EPI_PAIRED(epi);
  const int split = paired ? BN / 2 : BN;
  long bm, bn;
  fp_gemm_tile_of((M + BM - 1) / BM, (N + split - 1) / split, &bm, &bn);
  const long m0 = bm * BM, n0 = bn * split;
  float4 acc[FP_GEMM_MAX_TM][2];
  fp_gemm_zero(acc);
  /* the right half's shift only where there is one: it decides B's float4 alignment */
  fp_gemm_mainloop(dt, WX, WY, TM, BK, 0, As, pa, Bs, pb, a, lda, m0, M, b, ldb, trans_b, n0, N,
                   split, paired ? N : 0, K, acc);
  const int tx = get_local_id(0), ty = get_local_id(1);
#if FP_GEMM_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
  for (int i = 0; i < TM; ++i) {
    const long row = m0 + (i / 4) * 4 * WY + 4 * ty + (i & 3);
    if (row >= M)
      continue;
    if (paired) {
      fp_gemm_store_paired(dt, epi, out, bias, row, n0 + 4 * tx, N, acc[i][0], acc[i][1]);
    } else {
      fp_gemm_store_unpaired(dt, epi, out, bias, add, row, n0 + 4 * tx, N, acc[i][0]);
      fp_gemm_store_unpaired(dt, epi, out, bias, add, row, n0 + 4 * WX + 4 * tx, N, acc[i][1]);
    }
  }
}

/* One kernel of a configuration: kernels.def's name for the smallest,
 * gemm_<c>_<dt> for the planner's others (no name a prefix of another:
 * Oclgrind 21.10 adds up the local memory of kernels whose names share a
 * prefix). */
#define FP_GEMM_KERNEL(name, T, dt, WX, WY, TM, BK)                                                \
  __kernel __attribute__((reqd_work_group_size(WX, WY, 1))) void name(                             \
      __global T *out, __global const T *a, __global const T *b, __global const T *bias,           \
      __global const T *add, __global uint *ws, long M, long N, long K, long lda, long ldb,        \
      int epilogue, int trans_b) {                                                                 \
    __local float4 lds[FP_GEMM_LDS(WX, WY, TM, BK) / 4]; /* float4: 16-byte aligned */             \
    (void)ws;                                                                                      \
    fp_gemm_body(dt, WX, WY, TM, BK, (__local float *)lds, out, a, b, bias, add, M, N, K, lda,     \
                 ldb, epilogue, trans_b);                                                          \
  }

#define FP_GEMM_KERNELS(prefix, WX, WY, TM, BK)                                                    \
  FP_GEMM_KERNEL(prefix##f32, float, FP_DT_F32, WX, WY, TM, BK)                                    \
  FP_GEMM_KERNEL(prefix##f16, ushort, FP_DT_F16, WX, WY, TM, BK)                                   \
  FP_GEMM_KERNEL(prefix##bf16, ushort, FP_DT_BF16, WX, WY, TM, BK)

/* The configurations (the host's table in opencl_gemm.c must match):
 *   WX, WY  work-items of a group along N and M
 *   TM      rows per work-item (4 or 8); 8 columns each
 *   BK      the K-step
 * gemm_<dt>: 32 x 64 tiles, groups of 64, 13 KiB; every device runs it. */
FP_GEMM_KERNELS(gemm_, 8, 8, 4, 16)
/* gemm_s_<dt>: 16 x 64 tiles, groups of 32: few rows (decode-like M). */
#if FP_GEMM_FITS(8, 4, 4, 8)
FP_GEMM_KERNELS(gemm_s_, 8, 4, 4, 8)
#endif
/* gemm_m_<dt>: 64 x 128 tiles, groups of 256. */
#if FP_GEMM_FITS(16, 16, 4, 16)
FP_GEMM_KERNELS(gemm_m_, 16, 16, 4, 16)
#endif
/* gemm_l_<dt>: 128 x 128 tiles, groups of 256, 8 x 8 per work-item, 33 KiB. */
#if FP_GEMM_FITS(16, 16, 8, 16)
FP_GEMM_KERNELS(gemm_l_, 16, 16, 8, 16)
#endif

/* ---- gemm2_<dt> -------------------------------------------------------------------------------
 * A group owns BM = 32 rows: phase 1 computes their [BM, N <= 128] block of
 * c = a @ B (as one 32 x 128 tile, columns past N zero), rounds it to the
 * storage type and keeps it transposed in local memory, Ct[n][row]; phase 2
 * multiplies it by 128-column tiles of d, Ct as a resident A operand.
 * Groups along dimension 0 split the P tiles (each recomputes phase 1), so
 * that few row blocks still fill the device. The host launches N <= 128
 * only (FP_CL_GEMM2_MAX_N). */
#define FP_GEMM2_WX 16
#define FP_GEMM2_WY 8
#define FP_GEMM2_TM 4
#define FP_GEMM2_BM (FP_GEMM2_WY * FP_GEMM2_TM)
#define FP_GEMM2_BN (FP_GEMM2_WX * FP_GEMM_TN) /* 128: the largest N */
/* K-step: 16 where the device's local memory holds it (40 KiB), else 8 (29 KiB) */
#define FP_GEMM2_LDS_BK(BK)                                                                        \
  (2 * (BK) * (FP_GEMM2_BM + FP_GEMM_PAD + FP_GEMM2_BN + FP_GEMM_PAD) +                            \
   FP_GEMM2_BN * (FP_GEMM2_BM + FP_GEMM_PAD))
#if 4 * FP_GEMM2_LDS_BK(16) <= FP_GEMM_LOCAL_BYTES
#define FP_GEMM2_BK 16
#else
#define FP_GEMM2_BK 8
#endif

static FP_INLINE void fp_gemm2_body(const int dt, __local float *lds, __global void *out,
                                    __global const void *a, __global const void *b,
                                    __global const void *d, const long M, const long N,
                                    const long K, const long P, const long lda, const long ldb,
                                    const long ldd, const int trans_b) {
  const int WX = FP_GEMM2_WX, WY = FP_GEMM2_WY, TM = FP_GEMM2_TM, BK = FP_GEMM2_BK;
  const int BM = FP_GEMM2_BM, BN = FP_GEMM2_BN;
  const int pa = BM + FP_GEMM_PAD, pb = BN + FP_GEMM_PAD;
  __local float *As = lds;              /* [2][BK][pa] */
  __local float *Bs = As + 2 * BK * pa; /* [2][BK][pb]: tiles of B, then of d */
  __local float *Ct = Bs + 2 * BK * pb; /* [BN][pa]: the rounded intermediate */
  const int tx = get_local_id(0), ty = get_local_id(1);
  /* group g: row block g / S, P tiles g % S, g % S + S, ... (S splits) */
  const long blocks = (M + BM - 1) / BM, g = get_group_id(0);
  const long step = fp_div_narrow(get_num_groups(0), blocks);
  const long block = fp_div_narrow(g, step), first_tile = g - block * step;
  const long m0 = block * BM, tiles = (P + BN - 1) / BN;
  float4 acc[FP_GEMM_MAX_TM][2];
  /* pass -1 is phase 1, then the group's P tiles: one main loop in the code
   * (a compiler's time grows with each copy), its trip count uniform */
  for (long pt = -1; pt < tiles; pt = pt < 0 ? first_tile : pt + step) {
    const int phase1 = pt < 0;
    const long p0 = phase1 ? 0 : pt * BN;
    fp_gemm_zero(acc);
    fp_gemm_mainloop(dt, WX, WY, TM, BK, !phase1, phase1 ? As : Ct, pa, Bs, pb, a, lda, m0, M,
                     phase1 ? b : d, phase1 ? ldb : ldd, phase1 ? trans_b : 0, p0, phase1 ? N : P,
                     BN, 0, phase1 ? K : N, acc);
    if (phase1) {
      /* round in place (a rolled loop where the epilogue is: one copy of
       * the conversions), then Ct[n][r] = c[m0 + r, n]: every entry
       * written, zero past M and N */
#if FP_GEMM_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
      for (int i = 0; i < 2 * TM; ++i)
        acc[i >> 1][i & 1] = fp_gemm_round4(dt, acc[i >> 1][i & 1]);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        /* scalar stores, once per call: Oclgrind 21.10 miscomputes or
         * crashes on the float4 transposes built from lanes */
        __local float *dst = Ct + (4 * WX * c + 4 * tx) * pa + 4 * ty;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float4 v = acc[i][c];
          dst[i] = v.x;
          dst[pa + i] = v.y;
          dst[2 * pa + i] = v.z;
          dst[3 * pa + i] = v.w;
        }
      }
    } else {
#if FP_GEMM_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
      for (int i = 0; i < TM; ++i) {
        const long row = m0 + 4 * ty + i;
        if (row < M) {
          fp_gemm_store_unpaired(dt, FP_EPI_NONE, out, NULL, NULL, row, p0 + 4 * tx, P, acc[i][0]);
          fp_gemm_store_unpaired(dt, FP_EPI_NONE, out, NULL, NULL, row, p0 + 4 * WX + 4 * tx, P,
                                 acc[i][1]);
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* Ct complete before any work-item reads it */
  }
}

#define FP_GEMM2_KERNEL(name, T, dt)                                                               \
  __kernel __attribute__((reqd_work_group_size(FP_GEMM2_WX, FP_GEMM2_WY, 1))) void name(           \
      __global T *out, __global const T *a, __global const T *b, __global const T *d,              \
      __global uint *ws, long M, long N, long K, long P, long lda, long ldb, long ldd,             \
      int trans_b) {                                                                               \
    __local float4 lds[FP_GEMM2_LDS_BK(FP_GEMM2_BK) / 4];                                          \
    (void)ws;                                                                                      \
    fp_gemm2_body(dt, (__local float *)lds, out, a, b, d, M, N, K, P, lda, ldb, ldd, trans_b);     \
  }

FP_GEMM2_KERNEL(gemm2_f32, float, FP_DT_F32)
FP_GEMM2_KERNEL(gemm2_f16, ushort, FP_DT_F16)
FP_GEMM2_KERNEL(gemm2_bf16, ushort, FP_DT_BF16)
