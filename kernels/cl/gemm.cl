/* fuseport OpenCL kernels, family gemm: the GEMM core. Semantics:
 * kernels/kernels.def; the executable specification is kernels/cpu/gemm.c.
 * fp_device_common.h and common.cl are prepended (cmake/embed_cl.cmake).
 *
 * The family's program is fp_device_common.h, common.cl, this file,
 * gemm_kernels.cl (gemm_<dt>, gemm2_<dt>) and gemm_dw.cl (dw_packed_<dt>),
 * in that order (CMakeLists.txt, FP_CL_MORE_gemm). This file holds the core
 * they share: the device's limits and the configurations' sizes, the loads
 * and stores of each storage type, the tile loaders (GlobalToPrivate,
 * PrivateToLocal), the MAC, the main loop and the epilogue's stores.
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
 * groups of (16, 8), S splitting P; dw_packed (gemm_dw.cl: the same core
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
