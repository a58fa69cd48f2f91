/* fuseport OpenCL kernels, family conv: 2-D convolution as an implicit GEMM
 * with the epilogue fused. Semantics: kernels/kernels.def; the executable
 * specification is kernels/cpu/conv.c. fp_device_common.h and common.cl are
 * prepended (cmake/embed_cl.cmake).
 *
 * conv_<dt> is the GEMM out[m, k] = sum_kk A[m, kk] * Wt[k, kk] with
 *   m  = (n P + p) Q + q      GEMM-M = N P Q output pixels
 *   k                         GEMM-N = K output channels
 *   kk = (r S + s) C + c (NHWC), (c R + r) S + s (NCHW)   GEMM-K = C R S
 * A is im2col's column (kernels.def), gathered tile by tile into local
 * memory and never written; the filters are Wt [K, C R S] row-major in both
 * layouts. The core is gemm.cl's, with its phases:
 *   - a group of WX x WY work-items computes a BM x BN tile (BM = WY * TM
 *     pixels, BN = WX * TN channels); each work-item holds TM x TN float
 *     accumulators: pixels in float4 chunks (4 ty + chunk * 4 WY), channels
 *     in float4 chunks (4 tx + chunk * 4 WX);
 *   - GlobalToPrivate: each work-item stages "quads", 4 consecutive kk of
 *     one pixel (A) or one channel (W). A pixel's image, h0 = p stride - pad
 *     and w0 = q stride - pad are computed once per quad before the main
 *     loop; kk is a mixed-radix counter (fastest digit c, then s, then r in
 *     NHWC; s, r, c in NCHW) advanced by BK per K-step with carries, so the
 *     gather costs no division. NHWC with C % 4 == 0: a quad is 4
 *     consecutive channels of one tap, one vector load; otherwise 4 masked
 *     scalars. Work-items take NHWC quads along kk (contiguous in x) and
 *     NCHW quads along m (contiguous in x for stride 1): coalesced both ways;
 *   - LocalToPrivate + MAC from local tiles float [kk][m] and [kk][k] (the
 *     float4 reads of gemm.cl), double buffered, one barrier per K-step;
 *   - K slices (configurations with KS > 1): KS sets of WX x WY work-items
 *     share one tile, each set taking every KS-th K-step with its own
 *     buffers, and add up their accumulators through local memory before
 *     the epilogue: split-K inside a group, for deep filters on few output
 *     tiles, without a workspace;
 *   - the epilogue (FP_EPI_NONE .. FP_EPI_ADD_RELU per channel, or
 *     FP_CONV_EPI_BN) on the accumulators before the only store: NHWC a
 *     float4 of channels, NCHW a float4 of pixels where P Q % 4 == 0.
 * Every barrier is reached by the whole group: the K loop's trip count is
 * uniform; work-items past M or K only skip loads (zeros) and stores.
 *
 * The host (backend/opencl/opencl_conv.c) plans the launch: a configuration
 * per call among those built (each compiled only where it fits the
 * device's local memory and group size, FP_CONV_LOCAL_BYTES and
 * FP_CONV_MAX_GROUP) and a 1-D grid of ceil(M/BM) * ceil(K/BN) groups of
 * (WX, WY * KS) work-items: global (groups * WX, WY * KS). */

#ifndef FP_CONV_LOCAL_BYTES
#define FP_CONV_LOCAL_BYTES 32768
#endif
#ifndef FP_CONV_MAX_GROUP
#define FP_CONV_MAX_GROUP 256
#endif
#ifndef FP_CONV_UNROLL_EPILOGUE
/* 1: the epilogue's loops unrolled (GPUs: accumulators stay in registers);
 * the host passes 0 for CPU devices, where unrolling costs compile time. */
#define FP_CONV_UNROLL_EPILOGUE 1
#endif
#ifndef FP_CONV_BAND
#define FP_CONV_BAND 8 /* pixel blocks per band of the group order (L2 reuse) */
#endif

/* Storage types (a constant argument of the core). */
#define FP_CDT_F32 0
#define FP_CDT_F16 1
#define FP_CDT_BF16 2

#define FP_CONV_MAX_T 8     /* pixels / channels per work-item: 4 or 8 */
#define FP_CONV_MAX_LOADS 4 /* quads staged per work-item and operand */
#define FP_CONV_PAD 4       /* floats after each local tile row: keeps float4 alignment */

/* Floats of local memory of one K slice: two buffers of [BK][BM + pad] and
 * [BK][BN + pad]; of a group of KS slices: theirs, or the KS - 1 partial
 * BM x BN tiles of the slices' reduction if that is more. */
#define FP_CONV_LDS(WX, WY, TM, TN, BK)                                                            \
  (2 * (BK) * ((WY) * (TM) + FP_CONV_PAD + (WX) * (TN) + FP_CONV_PAD))
#define FP_CONV_MAXF(a, b) ((a) > (b) ? (a) : (b))
#define FP_CONV_LDS_ALL(WX, WY, TM, TN, BK, KS)                                                    \
  FP_CONV_MAXF((KS)*FP_CONV_LDS(WX, WY, TM, TN, BK), ((KS)-1) * (WY) * (TM) * (WX) * (TN))
#define FP_CONV_FITS(WX, WY, TM, TN, BK, KS)                                                       \
  ((WX) * (WY) * (KS) <= FP_CONV_MAX_GROUP &&                                                      \
   4 * FP_CONV_LDS_ALL(WX, WY, TM, TN, BK, KS) <= FP_CONV_LOCAL_BYTES)

/* ---- loads and stores of each storage type ---------------------------------------------- */

static FP_INLINE float fp_conv_ld1(const int dt, __global const void *p, long i) {
  if (dt == FP_CDT_F32)
    return ((__global const float *)p)[i];
  if (dt == FP_CDT_F16)
    return vload_half(0, (__global const half *)((__global const ushort *)p + i));
  return fp_bf16_bits_to_f32(((__global const ushort *)p)[i]);
}

/* p[i..i+3], i a multiple of 4 (16-byte / 8-byte aligned). */
static FP_INLINE float4 fp_conv_ld4(const int dt, __global const void *p, long i) {
  if (dt == FP_CDT_F32)
    return vload4(0, (__global const float *)p + i);
  if (dt == FP_CDT_F16)
    return vloada_half4(0, (__global const half *)((__global const ushort *)p + i));
  const uint4 u = convert_uint4(vload4(0, (__global const ushort *)p + i));
  return as_float4(u << 16);
}

/* The first n (>= 1) of p[o..o+3], zeros after; full: all 4, aligned. */
static FP_INLINE float4 fp_conv_get4(const int dt, __global const void *p, const long o,
                                     const long n, const int full) {
  if (full)
    return fp_conv_ld4(dt, p, o);
  float4 v = (float4)(0.0f);
  v.x = fp_conv_ld1(dt, p, o);
  if (n > 1)
    v.y = fp_conv_ld1(dt, p, o + 1);
  if (n > 2)
    v.z = fp_conv_ld1(dt, p, o + 2);
  if (n > 3)
    v.w = fp_conv_ld1(dt, p, o + 3);
  return v;
}

static FP_INLINE ushort fp_conv_bits(const int dt, float v) {
  return dt == FP_CDT_F16 ? fp_f32_to_f16_bits(v) : fp_f32_to_bf16_bits(v);
}

static FP_INLINE void fp_conv_put1(const int dt, __global void *p, const long o, const float v) {
  if (dt == FP_CDT_F32)
    ((__global float *)p)[o] = v;
  else
    ((__global ushort *)p)[o] = fp_conv_bits(dt, v);
}

/* p[o..o+3], the first n (>= 1) of them; full: all 4, aligned. Each value
 * is rounded once. vstore4 rather than a float4 pointer (Oclgrind 21.10
 * reports the latter, built from scalars, as a store of undefined values). */
static FP_INLINE void fp_conv_put4(const int dt, __global void *p, const long o, const long n,
                                   const int full, const float4 r) {
  if (full) {
    if (dt == FP_CDT_F32)
      vstore4(r, 0, (__global float *)p + o);
    else
      vstore4((ushort4)(fp_conv_bits(dt, r.x), fp_conv_bits(dt, r.y), fp_conv_bits(dt, r.z),
                        fp_conv_bits(dt, r.w)),
              0, (__global ushort *)p + o);
    return;
  }
  fp_conv_put1(dt, p, o, r.x);
  if (n > 1)
    fp_conv_put1(dt, p, o + 1, r.y);
  if (n > 2)
    fp_conv_put1(dt, p, o + 2, r.z);
  if (n > 3)
    fp_conv_put1(dt, p, o + 3, r.w);
}

static FP_INLINE float fp_conv_lane(const float4 v, const int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

/* ---- the problem ------------------------------------------------------------------------- */

/* The geometry, uniform over the launch. Dimensions below 2^30 (the host
 * checked), so tap coordinates and digits are ints; offsets are long. */
typedef struct fp_conv_geo {
  int C, H, W, K, R, S, Q, stride, pad, dil;
  long M, PQ, CRS, img; /* img: elements of one input image */
  int nhwc, vec_c;      /* vec_c: NHWC with C % 4 == 0 (a quad is one vector) */
  int e0, e1, e2;       /* extents of the kk counter's digits, fastest first */
  int d0, d1, d2;       /* BK as such a counter */
} fp_conv_geo;

/* A kk counter: digits (i0, i1, i2) of extents (e0, e1, e2). NHWC: (c, s,
 * r); NCHW: (s, r, c). kk >= C R S shows as i2 >= e2. */
typedef struct fp_kk {
  int i0, i1, i2;
} fp_kk;

static FP_INLINE fp_kk fp_kk_of(const fp_conv_geo *g, int kk) {
  fp_kk c;
  const int t = kk / g->e0;
  c.i0 = kk - t * g->e0;
  c.i2 = t / g->e1;
  c.i1 = t - c.i2 * g->e1;
  return c;
}

static FP_INLINE fp_kk fp_kk_next(const fp_conv_geo *g, fp_kk c) {
  if (++c.i0 == g->e0) {
    c.i0 = 0;
    if (++c.i1 == g->e1) {
      c.i1 = 0;
      ++c.i2;
    }
  }
  return c;
}

/* c + BK: one carry per digit at most (d0 < e0, d1 < e1). */
static FP_INLINE fp_kk fp_kk_step(const fp_conv_geo *g, fp_kk c) {
  c.i0 += g->d0;
  c.i1 += g->d1;
  c.i2 += g->d2;
  if (c.i0 >= g->e0) {
    c.i0 -= g->e0;
    ++c.i1;
  }
  if (c.i1 >= g->e1) {
    c.i1 -= g->e1;
    ++c.i2;
  }
  return c;
}

/* One pixel of the A tile: its image's offset in x (-1: past M), h0, w0. */
typedef struct fp_pix {
  long xb;
  int h0, w0;
} fp_pix;

static FP_INLINE fp_pix fp_pix_of(const fp_conv_geo *g, const long m) {
  fp_pix px;
  px.xb = -1;
  px.h0 = px.w0 = 0;
  if (m < g->M) {
    const long n = fp_div_narrow(m, g->PQ);
    const int pq = (int)(m - n * g->PQ);
    const int p = pq / g->Q, q = pq - p * g->Q;
    px.xb = n * g->img;
    px.h0 = p * g->stride - g->pad;
    px.w0 = q * g->stride - g->pad;
  }
  return px;
}

/* x at pixel px, tap kk (0 for padding, kk past C R S, pixels past M). */
static FP_INLINE float fp_conv_x1(const int dt, __global const void *x, const fp_conv_geo *g,
                                  const fp_pix px, const fp_kk c) {
  const int cc = g->nhwc ? c.i0 : c.i2;
  const int r = g->nhwc ? c.i2 : c.i1;
  const int s = g->nhwc ? c.i1 : c.i0;
  const int h = px.h0 + r * g->dil, w = px.w0 + s * g->dil;
  if (px.xb < 0 || c.i2 >= g->e2 || (uint)h >= (uint)g->H || (uint)w >= (uint)g->W)
    return 0.0f;
  const long off = g->nhwc ? ((long)h * g->W + w) * g->C + cc : ((long)cc * g->H + h) * g->W + w;
  return fp_conv_ld1(dt, x, px.xb + off);
}

/* The quad kk..kk+3 of pixel px. */
static FP_INLINE float4 fp_conv_x4(const int dt, __global const void *x, const fp_conv_geo *g,
                                   const fp_pix px, const fp_kk c) {
  if (g->vec_c) { /* NHWC, C % 4 == 0, c.i0 % 4 == 0: one tap, 4 channels */
    const int h = px.h0 + c.i2 * g->dil, w = px.w0 + c.i1 * g->dil;
    if (px.xb < 0 || c.i2 >= g->e2 || (uint)h >= (uint)g->H || (uint)w >= (uint)g->W)
      return (float4)(0.0f);
    return fp_conv_ld4(dt, x, px.xb + ((long)h * g->W + w) * g->C + c.i0);
  }
  const fp_kk c1 = fp_kk_next(g, c), c2 = fp_kk_next(g, c1), c3 = fp_kk_next(g, c2);
  return (float4)(fp_conv_x1(dt, x, g, px, c), fp_conv_x1(dt, x, g, px, c1),
                  fp_conv_x1(dt, x, g, px, c2), fp_conv_x1(dt, x, g, px, c3));
}

/* ---- the implicit GEMM -------------------------------------------------------------------- */

/* Quad idx of the A tile (BM pixels x BK/4 quads): NHWC along kk first
 * (consecutive channels of x), NCHW along the pixels first. */
static FP_INLINE void fp_conv_aquad(const int nhwc, const int BM, const int BK, const int idx,
                                    int *row, int *kq) {
  if (nhwc) {
    *row = idx / (BK / 4);
    *kq = idx - *row * (BK / 4);
  } else {
    *kq = idx / BM;
    *row = idx - *kq * BM;
  }
}

/* acc[i][j] (i < TM pixels, j < TN/4 float4 of channels) += over the BK
 * values of kk of the current tiles. */
static FP_INLINE void fp_conv_mac(const int WX, const int WY, const int TM, const int TN,
                                  const int BK, const int tx, const int ty, __local const float *As,
                                  const int pa, __local const float *Bs, const int pb,
                                  float4 acc[FP_CONV_MAX_T][FP_CONV_MAX_T / 4]) {
#pragma unroll
  for (int k = 0; k < BK; ++k) {
    float a[FP_CONV_MAX_T];
    float4 b[FP_CONV_MAX_T / 4];
#pragma unroll
    for (int ch = 0; ch < TM / 4; ++ch) {
      const float4 v = *(__local const float4 *)(As + k * pa + ch * 4 * WY + 4 * ty);
      a[4 * ch] = v.x;
      a[4 * ch + 1] = v.y;
      a[4 * ch + 2] = v.z;
      a[4 * ch + 3] = v.w;
    }
#pragma unroll
    for (int ch = 0; ch < TN / 4; ++ch)
      b[ch] = *(__local const float4 *)(Bs + k * pb + ch * 4 * WX + 4 * tx);
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int ch = 0; ch < TN / 4; ++ch)
        acc[i][ch] += a[i] * b[ch];
  }
}

/* out(m, k) = epilogue(v) for channel k of a float4 (4 consecutive k from
 * k0, those below K) of pixel m (< M), NHWC. */
static FP_INLINE void fp_conv_store_nhwc(const int dt, const int epi, __global void *out,
                                         __global const void *v0, const fp_conv_geo *g,
                                         const long m, const int k0, const float4 v,
                                         const float4 bias, const float4 *bn, const float eps) {
  const long o = m * g->K + k0, n = g->K - k0;
  const int full = n >= 4 && (g->K & 3) == 0;
  float4 r;
  if (epi == FP_CONV_EPI_BN) {
    r = (float4)(fp_bn(v.x, bn[0].x, bn[0].y, bn[0].z, bn[0].w, eps),
                 fp_bn(v.y, bn[1].x, bn[1].y, bn[1].z, bn[1].w, eps),
                 fp_bn(v.z, bn[2].x, bn[2].y, bn[2].z, bn[2].w, eps),
                 fp_bn(v.w, bn[3].x, bn[3].y, bn[3].z, bn[3].w, eps));
  } else {
    const float4 extra = FP_EPI_READS_ADD(epi) ? fp_conv_get4(dt, v0, o, n, full) : bias;
    r = (float4)(fp_epilogue_unpaired(epi, v.x, extra.x), fp_epilogue_unpaired(epi, v.y, extra.y),
                 fp_epilogue_unpaired(epi, v.z, extra.z), fp_epilogue_unpaired(epi, v.w, extra.w));
  }
  fp_conv_put4(dt, out, o, n, full, r);
}

/* The element out[o] of channel j of the float4 (bias, bn) = epilogue(v), NCHW. */
static FP_INLINE float fp_conv_epi1(const int dt, const int epi, __global const void *v0,
                                    const long o, const float v, const float bias, const float4 bn,
                                    const float eps) {
  if (epi == FP_CONV_EPI_BN)
    return fp_bn(v, bn.x, bn.y, bn.z, bn.w, eps);
  const float extra = FP_EPI_READS_ADD(epi) ? fp_conv_ld1(dt, v0, o) : bias;
  return fp_epilogue_unpaired(epi, v, extra);
}

/* The tile (pixel block *bm, channel block *bn) of group g of a 1-D grid of
 * mb x nb groups, in bands of FP_CONV_BAND pixel blocks (gemm_kernels.cl's order). */
static FP_INLINE void fp_conv_tile_at(const long g, const long mb, const long nb, long *bm,
                                      long *bn) {
  const long band = FP_CONV_BAND * nb;
  const long b = fp_div_narrow(g, band);
  const long first = FP_CONV_BAND * b, r = g - b * band;
  const long rows = min(mb - first, (long)FP_CONV_BAND);
  *bn = fp_div_narrow(r, rows);
  *bm = first + (r - *bn * rows);
}

/* StoreResults: out = epilogue(acc) for the work-item's TM x TN outputs of
 * the tile at (m0, n0), channel chunk by channel chunk. */
static FP_INLINE void fp_conv_epilogue(const int dt, const int WX, const int WY, const int TM,
                                       const int TN, const int tx, const int ty, __global void *out,
                                       __global const void *v0, __global const void *v1,
                                       __global const void *v2, __global const void *v3,
                                       const fp_conv_geo *gp, const long m0, const int n0,
                                       const int nhwc, const int epi, const float eps,
                                       float4 acc[FP_CONV_MAX_T][FP_CONV_MAX_T / 4]) {
  const fp_conv_geo g = *gp;
  const int reads_bias = FP_EPI_READS_BIAS(epi), bn_epi = epi == FP_CONV_EPI_BN;
#if FP_CONV_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
  for (int ch = 0; ch < TN / 4; ++ch) {
    const int kc = n0 + ch * 4 * WX + 4 * tx;
    if (kc >= g.K)
      continue;
    float4 bias = (float4)(0.0f);
    float4 bn[4] = {(float4)(0.0f), (float4)(0.0f), (float4)(0.0f), (float4)(0.0f)};
    if (reads_bias)
      bias = fp_conv_get4(dt, v0, kc, g.K - kc, 0);
    if (bn_epi) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (kc + j < g.K)
          bn[j] = (float4)(fp_conv_ld1(dt, v0, kc + j), fp_conv_ld1(dt, v1, kc + j),
                           fp_conv_ld1(dt, v2, kc + j), fp_conv_ld1(dt, v3, kc + j));
    }
#if FP_CONV_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
    for (int rc = 0; rc < TM / 4; ++rc) {
      const long mc = m0 + rc * 4 * WY + 4 * ty;
      if (mc >= g.M)
        continue;
      if (nhwc) {
#if FP_CONV_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
        for (int i = 0; i < 4; ++i)
          if (mc + i < g.M)
            fp_conv_store_nhwc(dt, epi, out, v0, &g, mc + i, kc, acc[rc * 4 + i][ch], bias, bn,
                               eps);
      } else if ((g.PQ & 3) == 0) { /* the 4 pixels: one image, contiguous, aligned */
        const long n = fp_div_narrow(mc, g.PQ);
        const long base = n * g.K * g.PQ + (mc - n * g.PQ);
#if FP_CONV_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
        for (int j = 0; j < 4; ++j) {
          if (kc + j >= g.K)
            continue;
          const long o = base + (long)(kc + j) * g.PQ;
          const float bj = fp_conv_lane(bias, j);
          const float4 v =
              (float4)(fp_conv_lane(acc[rc * 4][ch], j), fp_conv_lane(acc[rc * 4 + 1][ch], j),
                       fp_conv_lane(acc[rc * 4 + 2][ch], j), fp_conv_lane(acc[rc * 4 + 3][ch], j));
          float4 extra = (float4)(bj);
          if (FP_EPI_READS_ADD(epi))
            extra = fp_conv_ld4(dt, v0, o);
          float4 r;
          if (bn_epi)
            r = (float4)(fp_bn(v.x, bn[j].x, bn[j].y, bn[j].z, bn[j].w, eps),
                         fp_bn(v.y, bn[j].x, bn[j].y, bn[j].z, bn[j].w, eps),
                         fp_bn(v.z, bn[j].x, bn[j].y, bn[j].z, bn[j].w, eps),
                         fp_bn(v.w, bn[j].x, bn[j].y, bn[j].z, bn[j].w, eps));
          else
            r = (float4)(fp_epilogue_unpaired(epi, v.x, extra.x),
                         fp_epilogue_unpaired(epi, v.y, extra.y),
                         fp_epilogue_unpaired(epi, v.z, extra.z),
                         fp_epilogue_unpaired(epi, v.w, extra.w));
          fp_conv_put4(dt, out, o, 4, 1, r);
        }
      } else {
#if FP_CONV_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
        for (int i = 0; i < 4; ++i) {
          const long m = mc + i;
          if (m >= g.M)
            continue;
          const long n = fp_div_narrow(m, g.PQ);
          const long base = n * g.K * g.PQ + (m - n * g.PQ);
#if FP_CONV_UNROLL_EPILOGUE
#pragma unroll
#else
#pragma unroll 1
#endif
          for (int j = 0; j < 4; ++j) {
            if (kc + j >= g.K)
              continue;
            const long o = base + (long)(kc + j) * g.PQ;
            fp_conv_put1(dt, out, o,
                         fp_conv_epi1(dt, epi, v0, o, fp_conv_lane(acc[rc * 4 + i][ch], j),
                                      fp_conv_lane(bias, j), bn[j], eps));
          }
        }
      }
    }
  }
}

static FP_INLINE void
fp_conv_body(const int dt, const int WX, const int WY, const int TM, const int TN, const int BK,
             const int KS, __local float *lds, __global void *out, __global const void *x,
             __global const void *w, __global const void *v0, __global const void *v1,
             __global const void *v2, __global const void *v3, const long N, const long C,
             const long H, const long W, const long K, const long R, const long S, const long P,
             const long Q, const long stride, const long pad, const long dil, const int nhwc,
             const int epi, const float eps) {
  const int NT = WX * WY, BM = WY * TM, BN = WX * TN;
  const int pa = BM + FP_CONV_PAD, pb = BN + FP_CONV_PAD;
  /* K slice `slice` of the group's KS: work-items (tx, ty) of its own WX x WY */
  const int tx = get_local_id(0), slice = (int)get_local_id(1) / WY;
  const int ty = (int)get_local_id(1) - slice * WY;
  __local float *As = lds + slice * FP_CONV_LDS(WX, WY, TM, TN, BK); /* [2][BK][pa] */
  __local float *Bs = As + 2 * BK * pa;                              /* [2][BK][pb] */
  fp_conv_geo g;
  g.C = (int)C;
  g.H = (int)H;
  g.W = (int)W;
  g.K = (int)K;
  g.R = (int)R;
  g.S = (int)S;
  g.Q = (int)Q;
  g.stride = (int)stride;
  g.pad = (int)pad;
  g.dil = (int)dil;
  g.PQ = P * Q;
  g.M = N * g.PQ;
  g.CRS = C * R * S;
  g.img = C * H * W;
  g.nhwc = nhwc;
  g.vec_c = nhwc && (C & 3) == 0;
  g.e0 = nhwc ? g.C : g.S;
  g.e1 = nhwc ? g.S : g.R;
  g.e2 = nhwc ? g.R : g.C;
  {
    const fp_kk step = fp_kk_of(&g, BK * KS); /* a slice takes every KS-th K-step */
    g.d0 = step.i0;
    g.d1 = step.i1;
    g.d2 = step.i2;
  }
  const int t = ty * WX + tx;
  long bm, bn;
  fp_conv_tile_at(get_group_id(0), (g.M + BM - 1) / BM, (K + BN - 1) / BN, &bm, &bn);
  const long m0 = bm * BM;
  const int n0 = (int)bn * BN;

  /* this work-item's quads: pixels and kk counters of A, channels of W */
  const int qa = BM * (BK / 4), qb = BN * (BK / 4);
  fp_pix apx[FP_CONV_MAX_LOADS];
  fp_kk akk[FP_CONV_MAX_LOADS];
  int brow[FP_CONV_MAX_LOADS], bkq[FP_CONV_MAX_LOADS];
#pragma unroll
  for (int l = 0; l < FP_CONV_MAX_LOADS; ++l) {
    const int idx = t + l * NT;
    int row = 0, kq = 0;
    if (l * NT < qa && idx < qa)
      fp_conv_aquad(nhwc, BM, BK, idx, &row, &kq);
    apx[l] = fp_pix_of(&g, idx < qa ? m0 + row : g.M);
    akk[l] = fp_kk_of(&g, slice * BK + 4 * kq);
    brow[l] = idx / (BK / 4);
    bkq[l] = idx - brow[l] * (BK / 4);
  }
  const int wvec = (g.CRS & 3) == 0;

  float4 acc[FP_CONV_MAX_T][FP_CONV_MAX_T / 4];
#pragma unroll
  for (int i = 0; i < FP_CONV_MAX_T; ++i)
#pragma unroll
    for (int j = 0; j < FP_CONV_MAX_T / 4; ++j)
      acc[i][j] = (float4)(0.0f);

  float4 sa[FP_CONV_MAX_LOADS], sb[FP_CONV_MAX_LOADS];
  /* Each slice's K-steps: slice, slice + KS, ...; the same count for
   * every slice (a step past C R S loads zeros), so every work-item meets
   * every barrier. */
  const long nk = (g.CRS + BK * KS - 1) / (BK * KS);
  /* Step kt stages the slice's K-step kt and computes its K-step kt - 1
   * from buffer (kt - 1) & 1, then stores the staged tiles into buffer
   * kt & 1, whose last readers (the MAC of step kt - 1) passed the barrier
   * before. */
  for (long kt = 0; kt <= nk; ++kt) {
    const int load = kt < nk;
    const long k0 = (kt * KS + slice) * BK;
    if (load) {
#pragma unroll
      for (int l = 0; l < FP_CONV_MAX_LOADS; ++l) {
        if (l * NT >= qa)
          break;
        if (t + l * NT < qa) {
          sa[l] = fp_conv_x4(dt, x, &g, apx[l], akk[l]);
          akk[l] = fp_kk_step(&g, akk[l]);
        }
      }
#pragma unroll
      for (int l = 0; l < FP_CONV_MAX_LOADS; ++l) {
        if (l * NT >= qb)
          break;
        float4 v = (float4)(0.0f);
        const int k = n0 + brow[l];
        const long kk = k0 + 4 * bkq[l];
        if (t + l * NT < qb && k < g.K && kk < g.CRS) {
          const long base = (long)k * g.CRS + kk;
          v = fp_conv_get4(dt, w, base, g.CRS - kk, wvec && kk + 4 <= g.CRS);
        }
        sb[l] = v;
      }
    }
    if (kt > 0) {
      const int prev = (int)((kt - 1) & 1);
      fp_conv_mac(WX, WY, TM, TN, BK, tx, ty, As + prev * BK * pa, pa, Bs + prev * BK * pb, pb,
                  acc);
    }
    if (load) {
      __local float *as = As + (int)(kt & 1) * BK * pa, *bs = Bs + (int)(kt & 1) * BK * pb;
#pragma unroll
      for (int l = 0; l < FP_CONV_MAX_LOADS; ++l) {
        if (l * NT >= qa)
          break;
        const int idx = t + l * NT;
        if (idx < qa) {
          int row, kq;
          fp_conv_aquad(nhwc, BM, BK, idx, &row, &kq);
          __local float *dst = as + 4 * kq * pa + row;
          dst[0] = sa[l].x;
          dst[pa] = sa[l].y;
          dst[2 * pa] = sa[l].z;
          dst[3 * pa] = sa[l].w;
        }
      }
#pragma unroll
      for (int l = 0; l < FP_CONV_MAX_LOADS; ++l) {
        if (l * NT >= qb)
          break;
        if (t + l * NT < qb) {
          __local float *dst = bs + 4 * bkq[l] * pb + brow[l];
          dst[0] = sb[l].x;
          dst[pb] = sb[l].y;
          dst[2 * pb] = sb[l].z;
          dst[3 * pb] = sb[l].w;
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  /* the slices' sums: slices 1.. store theirs (the tiles are free after
   * the loop's last barrier), slice 0 adds them in slice order */
  if (KS > 1) {
    __local float4 *red = (__local float4 *)lds;
    const int per = TM * (TN / 4); /* float4 per work-item */
    if (slice > 0) {
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN / 4; ++j)
          red[((slice - 1) * per + i * (TN / 4) + j) * NT + t] = acc[i][j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int sl = 1; sl < KS; ++sl)
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN / 4; ++j)
          acc[i][j] += red[((sl - 1) * per + i * (TN / 4) + j) * NT + t];
  }

  if (KS == 1 || slice == 0)
    fp_conv_epilogue(dt, WX, WY, TM, TN, tx, ty, out, v0, v1, v2, v3, &g, m0, n0, nhwc, epi, eps,
                     acc);
}

/* The kernels of a configuration. The planner's configurations have one
 * kernel per layout, conv_<c>_nhwc_<dt> and conv_<c>_nchw_<dt>, the layout
 * a constant in each (the gather and the stores fold): measured on an H100
 * against one kernel with the layout as an argument, the NCHW 7 x 7
 * layers ran up to 1.7x faster. kernels.def's conv_<dt> takes the layout
 * as its argument and holds both bodies behind a uniform branch (PoCL 3.1
 * hung on that form with K slices, so the planner's kernels have no such
 * branch). No name is a prefix of another (Oclgrind 21.10 adds up the
 * local memory of kernels whose names share a prefix). */
#define FP_CONV_SIGNATURE(name, T, WX, WY, KS)                                                     \
  __kernel __attribute__((reqd_work_group_size(WX, (WY) * (KS), 1))) void name(                    \
      __global T *out, __global const T *x, __global const T *w, __global const T *v0,             \
      __global const T *v1, __global const T *v2, __global const T *v3, long N, long C, long H,    \
      long W, long K, long R, long S, long P, long Q, long stride, long pad, long dil, int nhwc,   \
      int epilogue, float eps, __global uint *ws /* kernels.def's split-K workspace: unused */)
#define FP_CONV_BODY(dt, WX, WY, TM, TN, BK, KS, layout)                                           \
  fp_conv_body(dt, WX, WY, TM, TN, BK, KS, (__local float *)lds, out, x, w, v0, v1, v2, v3, N, C,  \
               H, W, K, R, S, P, Q, stride, pad, dil, layout, epilogue, eps)
#define FP_CONV_LOCAL(WX, WY, TM, TN, BK, KS)                                                      \
  __local float4 lds[FP_CONV_LDS_ALL(WX, WY, TM, TN, BK, KS) / 4] /* 16-byte aligned */
/* both layouts, nhwc uniform */
#define FP_CONV_KERNEL_ANY(name, T, dt, WX, WY, TM, TN, BK, KS)                                    \
  FP_CONV_SIGNATURE(name, T, WX, WY, KS) {                                                         \
    FP_CONV_LOCAL(WX, WY, TM, TN, BK, KS);                                                         \
    if (nhwc)                                                                                      \
      FP_CONV_BODY(dt, WX, WY, TM, TN, BK, KS, 1);                                                 \
    else                                                                                           \
      FP_CONV_BODY(dt, WX, WY, TM, TN, BK, KS, 0);                                                 \
  }
/* one layout; the planner launches it for that layout only */
#define FP_CONV_KERNEL_ONE(name, T, dt, WX, WY, TM, TN, BK, KS, layout)                            \
  FP_CONV_SIGNATURE(name, T, WX, WY, KS) {                                                         \
    FP_CONV_LOCAL(WX, WY, TM, TN, BK, KS);                                                         \
    (void)nhwc;                                                                                    \
    FP_CONV_BODY(dt, WX, WY, TM, TN, BK, KS, layout);                                              \
  }

#define FP_CONV_KERNELS_ANY(prefix, WX, WY, TM, TN, BK, KS)                                        \
  FP_CONV_KERNEL_ANY(prefix##f32, float, FP_CDT_F32, WX, WY, TM, TN, BK, KS)                       \
  FP_CONV_KERNEL_ANY(prefix##f16, ushort, FP_CDT_F16, WX, WY, TM, TN, BK, KS)                      \
  FP_CONV_KERNEL_ANY(prefix##bf16, ushort, FP_CDT_BF16, WX, WY, TM, TN, BK, KS)
#define FP_CONV_KERNELS(prefix, WX, WY, TM, TN, BK, KS)                                            \
  FP_CONV_KERNEL_ONE(prefix##nhwc_f32, float, FP_CDT_F32, WX, WY, TM, TN, BK, KS, 1)               \
  FP_CONV_KERNEL_ONE(prefix##nhwc_f16, ushort, FP_CDT_F16, WX, WY, TM, TN, BK, KS, 1)              \
  FP_CONV_KERNEL_ONE(prefix##nhwc_bf16, ushort, FP_CDT_BF16, WX, WY, TM, TN, BK, KS, 1)            \
  FP_CONV_KERNEL_ONE(prefix##nchw_f32, float, FP_CDT_F32, WX, WY, TM, TN, BK, KS, 0)               \
  FP_CONV_KERNEL_ONE(prefix##nchw_f16, ushort, FP_CDT_F16, WX, WY, TM, TN, BK, KS, 0)              \
  FP_CONV_KERNEL_ONE(prefix##nchw_bf16, ushort, FP_CDT_BF16, WX, WY, TM, TN, BK, KS, 0)

/* The configurations (the host's table in opencl_conv.c must match):
 *   WX, WY  work-items of a group along K (channels) and M (pixels)
 *   TM, TN  pixels and channels per work-item (4 or 8)
 *   BK      the K-step
 *   KS      K slices: KS groups of WX x WY work-items, stacked along
 *           dimension 1, share the tile, each taking every KS-th K-step,
 *           and add up their accumulators in local memory at the end
 * Each stages at most FP_CONV_MAX_LOADS quads per operand:
 * BM * BK / 4 <= 4 * WX * WY and BN * BK / 4 <= 4 * WX * WY.
 * conv_<dt>: 32 x 32 tiles, groups of 64, 9 KiB; every device runs it (the
 * planner's t, both layouts in one kernel). */
FP_CONV_KERNELS_ANY(conv_, 8, 8, 4, 4, 16, 1)
/* conv_m_<layout>_<dt>: 64 x 64 tiles, groups of 256, 4 x 4 per work-item, 17 KiB. */
#if FP_CONV_FITS(16, 16, 4, 4, 16, 1)
FP_CONV_KERNELS(conv_m_, 16, 16, 4, 4, 16, 1)
#endif
/* conv_w_<layout>_<dt>: 128 pixels x 64 channels, groups of 128, 8 x 8, 25 KiB. */
#if FP_CONV_FITS(8, 16, 8, 8, 16, 1)
FP_CONV_KERNELS(conv_w_, 8, 16, 8, 8, 16, 1)
#endif
/* conv_l_<layout>_<dt>: 128 x 128 tiles, groups of 256, 8 x 8 per work-item, 33 KiB. */
#if FP_CONV_FITS(16, 16, 8, 8, 16, 1)
FP_CONV_KERNELS(conv_l_, 16, 16, 8, 8, 16, 1)
#endif
/* conv_k_<layout>_<dt>: 32 x 32 tiles, 4 K slices of 8 x 8 work-items, 37 KiB: deep
 * filters on few pixels and channels (ResNet's 7 x 7 and 14 x 14 layers at
 * small batch), where 32 x 32 tiles alone leave the device idle. */
#if FP_CONV_FITS(8, 8, 4, 4, 16, 4)
FP_CONV_KERNELS(conv_k_, 8, 8, 4, 4, 16, 4)
#endif

/* ---- im2col_<dt> ----------------------------------------------------------------------------
 * ELEM over the N P Q C R S elements of col (kernels.def's layouts), a copy
 * of storage bits (zeros for padding taps); the divisions run in 32 bits
 * where the values fit (fp_div_narrow). */
#define FP_IM2COL_KERNEL(name, T)                                                                  \
  __kernel void name(__global T *col, __global const T *x, long N, long C, long H, long W, long R, \
                     long S, long P, long Q, long stride, long pad, long dil, int nhwc) {          \
    const long PQ = P * Q, CRS = C * R * S, total = N * PQ * CRS;                                  \
    const long step = (long)get_global_size(0);                                                    \
    for (long i = (long)get_global_id(0); i < total; i += step) {                                  \
      long n, pq, c, r, s;                                                                         \
      if (nhwc) { /* col[(n P + p) Q + q][(r S + s) C + c] */                                      \
        const long m = fp_div_narrow(i, CRS), kk = i - m * CRS;                                    \
        n = fp_div_narrow(m, PQ);                                                                  \
        pq = m - n * PQ;                                                                           \
        const long rs = fp_div_narrow(kk, C);                                                      \
        c = kk - rs * C;                                                                           \
        r = fp_div_narrow(rs, S);                                                                  \
        s = rs - r * S;                                                                            \
      } else { /* col[n][(c R + r) S + s][p Q + q] */                                              \
        const long row = fp_div_narrow(i, PQ);                                                     \
        pq = i - row * PQ;                                                                         \
        n = fp_div_narrow(row, CRS);                                                               \
        const long kk = row - n * CRS, cr = fp_div_narrow(kk, S);                                  \
        s = kk - cr * S;                                                                           \
        c = fp_div_narrow(cr, R);                                                                  \
        r = cr - c * R;                                                                            \
      }                                                                                            \
      const long p = fp_div_narrow(pq, Q), q = pq - p * Q;                                         \
      const long h = p * stride - pad + r * dil, w = q * stride - pad + s * dil;                   \
      T v = (T)0;                                                                                  \
      if (h >= 0 && h < H && w >= 0 && w < W)                                                      \
        v = x[nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w];               \
      col[i] = v;                                                                                  \
    }                                                                                              \
  }

FP_IM2COL_KERNEL(im2col_f32, float)
FP_IM2COL_KERNEL(im2col_f16, ushort)
FP_IM2COL_KERNEL(im2col_bf16, ushort)
