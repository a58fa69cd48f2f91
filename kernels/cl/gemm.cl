/* fuseport OpenCL kernels, family gemm: the GEMM core. Semantics:
 * kernels/kernels.def; the executable specification is kernels/cpu/gemm.c.
 * fp_device_common.h and common.cl are prepended (cmake/embed_cl.cmake).
 *
 * One tiled core, written once and inlined into every kernel with its tile
 * configuration and storage type as constant arguments (every branch on them
 * folds):
 *   - a group of WX x WY work-items computes a BM x BN tile of the product
 *     (BM = WY * TM rows, BN = WX * 8 columns); each work-item holds TM x 8
 *     float accumulators: rows in float4 chunks (ty*4 + chunk*WY*4), columns
 *     in two float4 chunks, tx*4 and WX*4 + tx*4;
 *   - phases, after CLBlast's names: GlobalToPrivate (the next K-step's A
 *     and B tiles into registers, float4 loads where a row's alignment and
 *     bounds allow, else masked scalars), LocalToPrivate + MAC (the current
 *     tiles from local memory, float4 reads, TM x 8 FMAs per k), then
 *     PrivateToLocal (the staged tiles into the other local buffer): double
 *     buffering, one barrier per K-step;
 *   - local tiles are float [k][row] (converted once at the load), so the
 *     MAC reads contiguous float4 of rows and of columns;
 *   - the epilogue (FP_EPI_*) is applied to the accumulators before the only
 *     store. The paired epilogues map the tile's left half of columns to B's
 *     columns [n0, n0 + BN/2) and its right half to [N + n0, N + n0 + BN/2):
 *     each work-item's two column chunks are then out[j] and its partner
 *     out[N + j], multiplied in registers; the [M, 2N] product never exists.
 * Any M, N, K, lda, ldb: every load is bounds-checked (zero outside), and the
 * float4 paths are taken only where the leading dimension (and, for the
 * right half, N) keeps 16-byte (f32) / 8-byte (f16, bf16) alignment.
 * Every barrier is reached by the whole group (the loops' trip counts are
 * uniform; work-items past M or N only skip their loads and stores), and
 * the MAC reads only local memory that the group stored, zeros included,
 * before the last barrier.
 *
 * The host (backend/opencl/opencl_gemm.c) plans the launch: it picks a
 * configuration per call among those built (a configuration is compiled
 * only where it fits the device's local memory and group size, passed as
 * FP_GEMM_LOCAL_BYTES and FP_GEMM_MAX_GROUP) and launches a 1-D grid of
 * ceil(M/BM) * ceil(N/BN') groups of (WX, WY) work-items: global (groups *
 * WX, WY), BN' = BN (BN/2 for a paired epilogue); gemm2 ceil(M/32) * S
 * groups of (16, 8), S splitting P; dw_packed (at the end: the same core
 * with a dequantising B loader) tiles * S groups, S splitting K. */

/* The device's limits, from the host: local memory per group
 * (CL_DEVICE_LOCAL_MEM_SIZE) and work-items per group. */
#ifndef FP_GEMM_LOCAL_BYTES
#define FP_GEMM_LOCAL_BYTES 32768
#endif
#ifndef FP_GEMM_MAX_GROUP
#define FP_GEMM_MAX_GROUP 256
#endif
#ifndef FP_GEMM_UNROLL_EPILOGUE
/* 1: the epilogue's row loop unrolled, the accumulators' indices constant
 * (GPUs: in registers). The host passes 0 for CPU devices, where the
 * unrolled conversions cost PoCL seconds of compile time per kernel. */
#define FP_GEMM_UNROLL_EPILOGUE 1
#endif
#ifndef FP_GEMM_VLOAD_HALF
#define FP_GEMM_VLOAD_HALF 1 /* f16 loads through vload_half (exact; 0: fp_f16_bits_to_f32) */
#endif

/* Storage types (a constant argument of the core). */
#define FP_DT_F32 0
#define FP_DT_F16 1
#define FP_DT_BF16 2

#define FP_GEMM_TN 8     /* columns per work-item: two float4 chunks (left, right) */
#define FP_GEMM_MAX_TM 8 /* rows per work-item: 4 or 8 */
#define FP_GEMM_MAX_BK 16
#define FP_GEMM_MAX_LOADS 4 /* float4 staged per work-item and operand */
#define FP_GEMM_PAD 4       /* floats after each local tile row: keeps float4 alignment */

/* Floats of local memory of a gemm configuration: two buffers of the A tile
 * [BK][BM + pad] and of the B tile [BK][BN + pad]. */
#define FP_GEMM_LDS(WX, WY, TM, BK)                                                                \
  (2 * (BK) * ((WY) * (TM) + FP_GEMM_PAD + (WX)*FP_GEMM_TN + FP_GEMM_PAD))
#define FP_GEMM_FITS(WX, WY, TM, BK)                                                               \
  ((WX) * (WY) <= FP_GEMM_MAX_GROUP && 4 * FP_GEMM_LDS(WX, WY, TM, BK) <= FP_GEMM_LOCAL_BYTES)

/* ---- loads and stores of each storage type ---------------------------------------- */

static FP_INLINE float fp_gemm_ld1(const int dt, __global const void *p, long i) {
  if (dt == FP_DT_F32)
    return ((__global const float *)p)[i];
  if (dt == FP_DT_F16) {
#if FP_GEMM_VLOAD_HALF
    return vload_half(0, (__global const half *)((__global const ushort *)p + i));
#else
    return fp_f16_bits_to_f32(((__global const ushort *)p)[i]);
#endif
  }
  return fp_bf16_bits_to_f32(((__global const ushort *)p)[i]);
}

/* p[i..i+3]: i a multiple of 4 (the buffer's start is aligned, the caller
 * checked the rest). */
static FP_INLINE float4 fp_gemm_ld4(const int dt, __global const void *p, long i) {
  if (dt == FP_DT_F32)
    return *(__global const float4 *)((__global const float *)p + i);
  if (dt == FP_DT_F16) {
#if FP_GEMM_VLOAD_HALF
    return vloada_half4(0, (__global const half *)((__global const ushort *)p + i));
#else
    const ushort4 u = *(__global const ushort4 *)((__global const ushort *)p + i);
    return (float4)(fp_f16_bits_to_f32(u.x), fp_f16_bits_to_f32(u.y), fp_f16_bits_to_f32(u.z),
                    fp_f16_bits_to_f32(u.w));
#endif
  }
  const uint4 u = convert_uint4(*(__global const ushort4 *)((__global const ushort *)p + i));
  return as_float4(u << 16);
}

/* The first min(n, 4) of 4 consecutive elements, zeros after: the ragged
 * end of a row, where a vector load would read past it. */
static FP_INLINE float4 fp_gemm_ld_upto4(const int dt, __global const void *p, long i, long n) {
  return (float4)(n > 0 ? fp_gemm_ld1(dt, p, i) : 0.0f, n > 1 ? fp_gemm_ld1(dt, p, i + 1) : 0.0f,
                  n > 2 ? fp_gemm_ld1(dt, p, i + 2) : 0.0f,
                  n > 3 ? fp_gemm_ld1(dt, p, i + 3) : 0.0f);
}

static FP_INLINE ushort fp_gemm_bits(const int dt, float v) {
  return dt == FP_DT_F16 ? fp_f32_to_f16_bits(v) : fp_f32_to_bf16_bits(v);
}

/* The values as the storage type holds them (gemm2's intermediate). */
static FP_INLINE float4 fp_gemm_round4(const int dt, const float4 v) {
  if (dt == FP_DT_F16)
    return (float4)(fp_f16_bits_to_f32(fp_f32_to_f16_bits(v.x)),
                    fp_f16_bits_to_f32(fp_f32_to_f16_bits(v.y)),
                    fp_f16_bits_to_f32(fp_f32_to_f16_bits(v.z)),
                    fp_f16_bits_to_f32(fp_f32_to_f16_bits(v.w)));
  if (dt == FP_DT_BF16)
    return (float4)(fp_bf16_bits_to_f32(fp_f32_to_bf16_bits(v.x)),
                    fp_bf16_bits_to_f32(fp_f32_to_bf16_bits(v.y)),
                    fp_bf16_bits_to_f32(fp_f32_to_bf16_bits(v.z)),
                    fp_bf16_bits_to_f32(fp_f32_to_bf16_bits(v.w)));
  return v;
}

/* ---- GlobalToPrivate / PrivateToLocal ---------------------------------------------------
 * An operand tile is `R` mapped lines by BK values of k. Line r of the tile is
 * the operand's logical line `start + r'` (r' = r, or r - split for r >=
 * split), valid below `lim`, at storage line `start + r' + (r >= split ?
 * shift : 0)`: split = R and shift 0 for a plain tile, split = R/2 and
 * shift = N for the paired epilogues' right half of B. Work-item t stages
 * float4 number t + l*NT of the tile (l < FP_GEMM_MAX_LOADS).
 *
 * k-major (A, and B when trans_b): lines are rows of the matrix, k runs
 * along them; the tile is stored transposed, [k][r]. */
static FP_INLINE void fp_gemm_load_kmajor(const int dt, const int NT, const int R, const int BK,
                                          const int t, __global const void *p, const long ld,
                                          const long start, const long lim, const int split,
                                          const long shift, const long k0, const long K,
                                          float4 *stage) {
  const int per_line = BK / 4, total = R * per_line;
  const int vec = (ld & 3) == 0;
#pragma unroll
  for (int l = 0; l < FP_GEMM_MAX_LOADS; ++l) {
    if (l * NT >= total)
      break;
    float4 v = (float4)(0.0f);
    const int idx = t + l * NT;
    if (idx < total) {
      const int r = idx / per_line, kq = idx - r * per_line;
      const int right = r >= split;
      const long line = start + (right ? r - split : r);
      const long k = k0 + 4 * kq;
      if (line < lim) {
        const long base = (line + (right ? shift : 0)) * ld + k;
        if (vec && k + 4 <= K) {
          v = fp_gemm_ld4(dt, p, base);
        } else {
          v = fp_gemm_ld_upto4(dt, p, base, K - k);
        }
      }
    }
    stage[l] = v;
  }
}

static FP_INLINE void fp_gemm_store_kmajor(const int NT, const int R, const int BK, const int t,
                                           const float4 *stage, __local float *tile,
                                           const int pitch) {
  const int per_line = BK / 4, total = R * per_line;
#pragma unroll
  for (int l = 0; l < FP_GEMM_MAX_LOADS; ++l) {
    if (l * NT >= total)
      break;
    const int idx = t + l * NT;
    if (idx < total) {
      const int r = idx / per_line, kq = idx - r * per_line;
      __local float *dst = tile + 4 * kq * pitch + r;
      dst[0] = stage[l].x;
      dst[pitch] = stage[l].y;
      dst[2 * pitch] = stage[l].z;
      dst[3 * pitch] = stage[l].w;
    }
  }
}

/* n-major (B, D row-major): rows of the matrix are k, the lines run along
 * them (float4 of 4 consecutive lines); stored as is, [k][r]. */
static FP_INLINE void fp_gemm_load_nmajor(const int dt, const int NT, const int R, const int BK,
                                          const int t, __global const void *p, const long ld,
                                          const long start, const long lim, const int split,
                                          const long shift, const long k0, const long K,
                                          float4 *stage) {
  const int per_k = R / 4, total = BK * per_k;
  const int vec = (ld & 3) == 0 && (shift & 3) == 0;
#pragma unroll
  for (int l = 0; l < FP_GEMM_MAX_LOADS; ++l) {
    if (l * NT >= total)
      break;
    float4 v = (float4)(0.0f);
    const int idx = t + l * NT;
    if (idx < total) {
      const int kk = idx / per_k, r = 4 * (idx - kk * per_k);
      const int right = r >= split;
      const long line = start + (right ? r - split : r);
      const long k = k0 + kk;
      if (k < K && line < lim) {
        const long base = k * ld + line + (right ? shift : 0);
        if (vec && line + 4 <= lim) {
          v = fp_gemm_ld4(dt, p, base);
        } else {
          v = fp_gemm_ld_upto4(dt, p, base, lim - line);
        }
      }
    }
    stage[l] = v;
  }
}

static FP_INLINE void fp_gemm_store_nmajor(const int NT, const int R, const int BK, const int t,
                                           const float4 *stage, __local float *tile,
                                           const int pitch) {
  const int per_k = R / 4, total = BK * per_k;
#pragma unroll
  for (int l = 0; l < FP_GEMM_MAX_LOADS; ++l) {
    if (l * NT >= total)
      break;
    const int idx = t + l * NT;
    if (idx < total) {
      const int kk = idx / per_k, r = 4 * (idx - kk * per_k);
      *(__local float4 *)(tile + kk * pitch + r) = stage[l];
    }
  }
}

/* ---- LocalToPrivate + MAC ------------------------------------------------------------------
 * acc[i][c] (i < TM, c < 2: float4 of columns) += A(k, row i) * B(k, cols)
 * over the BK values of k of the current tiles. */
static FP_INLINE void fp_gemm_mac(const int WX, const int WY, const int TM, const int BK,
                                  __local const float *As, const int pa, __local const float *Bs,
                                  const int pb, float4 acc[FP_GEMM_MAX_TM][2]) {
  const int tx = get_local_id(0), ty = get_local_id(1);
#pragma unroll
  for (int k = 0; k < FP_GEMM_MAX_BK; ++k) {
    if (k >= BK)
      break;
    const float4 a0 = *(__local const float4 *)(As + k * pa + 4 * ty);
    const float4 a1 =
        TM > 4 ? *(__local const float4 *)(As + k * pa + 4 * WY + 4 * ty) : (float4)(0.0f);
    const float4 b0 = *(__local const float4 *)(Bs + k * pb + 4 * tx);
    const float4 b1 = *(__local const float4 *)(Bs + k * pb + 4 * WX + 4 * tx);
    const float a[FP_GEMM_MAX_TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
    for (int i = 0; i < FP_GEMM_MAX_TM; ++i) {
      if (i < TM) {
        acc[i][0] += a[i] * b0;
        acc[i][1] += a[i] * b1;
      }
    }
  }
}

/* ---- the main loop ----------------------------------------------------------------------
 * acc += A[m0 .. m0+BM, 0..K) @ B(0..K, tile columns). A comes from global
 * memory (k-major, lda), or, a_resident, is already in local memory as
 * As[K][pa] (gemm2's intermediate). B is k-major (trans_b) or n-major, its
 * tile columns mapped by (n0, nlim, split, shift) as described above. Ends
 * with a barrier, so the caller may reuse the buffers. */
static FP_INLINE void fp_gemm_mainloop(const int dt, const int WX, const int WY, const int TM,
                                       const int BK, const int a_resident, __local float *As,
                                       const int pa, __local float *Bs, const int pb,
                                       __global const void *a, const long lda, const long m0,
                                       const long M, __global const void *b, const long ldb,
                                       const int b_kmajor, const long n0, const long nlim,
                                       const int split, const long shift, const long K,
                                       float4 acc[FP_GEMM_MAX_TM][2]) {
  const int NT = WX * WY, BM = WY * TM, BN = WX * FP_GEMM_TN;
  const int t = (int)get_local_id(1) * WX + (int)get_local_id(0);
  float4 sa[FP_GEMM_MAX_LOADS], sb[FP_GEMM_MAX_LOADS];
  const long nk = (K + BK - 1) / BK;
  /* Step kt stages K-step kt (GlobalToPrivate, in flight during the MAC)
   * and computes K-step kt - 1 from buffer (kt - 1) & 1, then stores the
   * staged tiles into buffer kt & 1, whose last readers (the MAC of step
   * kt - 1) passed the barrier before. One call site per phase keeps the
   * code small. The trip count is uniform. */
  for (long kt = 0; kt <= nk; ++kt) {
    const int load = kt < nk;
    const long k0 = kt * BK;
    __local float *as = As + (int)(kt & 1) * BK * pa, *bs = Bs + (int)(kt & 1) * BK * pb;
    if (load) {
      if (!a_resident)
        fp_gemm_load_kmajor(dt, NT, BM, BK, t, a, lda, m0, M, BM, 0, k0, K, sa);
      if (b_kmajor)
        fp_gemm_load_kmajor(dt, NT, BN, BK, t, b, ldb, n0, nlim, split, shift, k0, K, sb);
      else
        fp_gemm_load_nmajor(dt, NT, BN, BK, t, b, ldb, n0, nlim, split, shift, k0, K, sb);
    }
    if (kt > 0) {
      const int prev = (int)((kt - 1) & 1);
      __local const float *at = a_resident ? As + (kt - 1) * BK * pa : As + prev * BK * pa;
      fp_gemm_mac(WX, WY, TM, BK, at, pa, Bs + prev * BK * pb, pb, acc);
    }
    /* B's tile before A's: B's if/else of two stores, each a chain of
     * conditional stores, right before the barrier aborts PoCL 5.0's kernel
     * compiler (reduce.cl, "the kernels", says why) */
    if (load) {
      if (b_kmajor)
        fp_gemm_store_kmajor(NT, BN, BK, t, sb, bs, pb);
      else
        fp_gemm_store_nmajor(NT, BN, BK, t, sb, bs, pb);
      if (!a_resident)
        fp_gemm_store_kmajor(NT, BM, BK, t, sa, as, pa);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

static FP_INLINE void fp_gemm_zero(float4 acc[FP_GEMM_MAX_TM][2]) {
#pragma unroll
  for (int i = 0; i < FP_GEMM_MAX_TM; ++i) {
    acc[i][0] = (float4)(0.0f);
    acc[i][1] = (float4)(0.0f);
  }
}

/* ---- StoreResults ---------------------------------------------------------------------- */

/* p[o..o+3], those of the n >= 1 below the row's end; full: all 4, aligned. */
static FP_INLINE float4 fp_gemm_get4(const int dt, __global const void *p, const long o,
                                     const long n, const int full) {
  if (full)
    return fp_gemm_ld4(dt, p, o);
  float4 v = (float4)(0.0f);
  v.x = fp_gemm_ld1(dt, p, o);
  if (n > 1)
    v.y = fp_gemm_ld1(dt, p, o + 1);
  if (n > 2)
    v.z = fp_gemm_ld1(dt, p, o + 2);
  if (n > 3)
    v.w = fp_gemm_ld1(dt, p, o + 3);
  return v;
}

/* The store of fp_gemm_get4's elements; each value is converted once.
 * vstore4 rather than a float4 pointer: Oclgrind 21.10 reports the latter,
 * built from scalars, as a store of undefined values (its IR writes undef,
 * then the lanes). */
static FP_INLINE void fp_gemm_put4(const int dt, __global void *p, const long o, const long n,
                                   const int full, const float4 r) {
  if (dt == FP_DT_F32) {
    __global float *q = (__global float *)p + o;
    if (full) {
      vstore4(r, 0, q);
    } else {
      q[0] = r.x;
      if (n > 1)
        q[1] = r.y;
      if (n > 2)
        q[2] = r.z;
      if (n > 3)
        q[3] = r.w;
    }
  } else {
    __global ushort *q = (__global ushort *)p + o;
    const ushort4 u = (ushort4)(fp_gemm_bits(dt, r.x), fp_gemm_bits(dt, r.y), fp_gemm_bits(dt, r.z),
                                fp_gemm_bits(dt, r.w));
    if (full) {
      vstore4(u, 0, q);
    } else {
      q[0] = u.x;
      if (n > 1)
        q[1] = u.y;
      if (n > 2)
        q[2] = u.z;
      if (n > 3)
        q[3] = u.w;
    }
  }
}

/* out[row, col..col+3] (those below N) = epilogue(v); row < M. */
static FP_INLINE void fp_gemm_store_unpaired(const int dt, const int epi, __global void *out,
                                             __global const void *bias, __global const void *add,
                                             const long row, const long col, const long N,
                                             const float4 v) {
  if (col >= N)
    return;
  const long o = row * N + col, n = N - col;
  const int full = n >= 4 && (N & 3) == 0; /* an aligned float4 of out (and add) */
  float4 extra = (float4)(0.0f);
  if (FP_EPI_READS_BIAS(epi))
    extra = fp_gemm_get4(dt, bias, col, n, 0);
  else if (FP_EPI_READS_ADD(epi))
    extra = fp_gemm_get4(dt, add, o, n, full);
  const float4 r =
      (float4)(fp_epilogue_unpaired(epi, v.x, extra.x), fp_epilogue_unpaired(epi, v.y, extra.y),
               fp_epilogue_unpaired(epi, v.z, extra.z), fp_epilogue_unpaired(epi, v.w, extra.w));
  fp_gemm_put4(dt, out, o, n, full, r);
}

/* out[row, col..col+3] = epilogue(left, right), the right half at B's
 * column N + col. */
static FP_INLINE void fp_gemm_store_paired(const int dt, const int epi, __global void *out,
                                           __global const void *bias, const long row,
                                           const long col, const long N, const float4 left,
                                           const float4 right) {
  if (col >= N)
    return;
  const long o = row * N + col, n = N - col;
  const int full = n >= 4 && (N & 3) == 0;
  float4 bl = (float4)(0.0f), br = (float4)(0.0f);
  if (epi == FP_EPI_GEGLU) {
    bl = fp_gemm_get4(dt, bias, col, n, 0);
    br = fp_gemm_get4(dt, bias, N + col, n, 0);
  }
  const float4 r = (float4)(fp_epilogue_paired(epi, left.x, right.x, bl.x, br.x),
                            fp_epilogue_paired(epi, left.y, right.y, bl.y, br.y),
                            fp_epilogue_paired(epi, left.z, right.z, bl.z, br.z),
                            fp_epilogue_paired(epi, left.w, right.w, bl.w, br.w));
  fp_gemm_put4(dt, out, o, n, full, r);
}

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
