/* fuseport OpenCL kernels, family attention. Semantics: kernels/kernels.def;
 * the executable specification is kernels/cpu/attention.c. fp_device_common.h
 * and common.cl are prepended (cmake/embed_cl.cmake).
 *
 * attention_<dt> (PLANNED) is FlashAttention's forward pass in float:
 *   - a group of WX x WY work-items owns BM = 4 WY query rows of one head
 *     (and one key chunk where splits > 1); work-item (tx, ty) holds rows
 *     4 ty .. 4 ty + 3;
 *   - the group's Q tile sits in local memory as float, transposed
 *     (qs[d][row]), for the whole key loop;
 *   - per tile of BN = 4 WX keys: S = Q K^T, work-item (tx, ty) computing
 *     its 4 rows x keys 4 tx .. 4 tx + 3 from float4 reads of qs and of the
 *     K tile (kv[d][key], loaded DK head dimensions at a time where the whole
 *     tile does not fit); scale and the masks; the rows' running max through
 *     red[row][tx]; P = exp(S - max) into ps[key][row]; the running sums
 *     stay per work-item (over its own keys) until the end;
 *   - O += P V: work-item (tx, ty) accumulates its 4 rows x the columns
 *     4 tx + 4 WX c (c < DT / (4 WX)) of the output, V going through local
 *     memory VK keys at a time (kv[key][d]);
 *   - tiles above the causal diagonal are not visited: the key loop of a
 *     group ends at the last key its last row sees (bottom-right aligned).
 * Every barrier sits in a loop whose trip count is uniform over the group
 * (tiles, K chunks, V chunks) or at the kernel's top level: no barrier
 * inside a branch (PoCL 3.1 miscompiles those, reduce.cl). Rows past S,
 * keys past the group's range and head dimensions past D load zeros and
 * store nothing.
 *
 * The host (backend/opencl/opencl_attention.c) plans the launch: a
 * configuration per call among those built (each compiled only where it
 * fits FP_ATTN_LOCAL_BYTES and FP_ATTN_MAX_GROUP) and a 1-D grid of
 * B H ceil(S / BM) splits groups of (WX, WY) work-items. */

#ifndef FP_ATTN_LOCAL_BYTES
#define FP_ATTN_LOCAL_BYTES 32768
#endif
#ifndef FP_ATTN_MAX_GROUP
#define FP_ATTN_MAX_GROUP 256
#endif

/* Storage types (a constant argument of the core). */
#define FP_ADT_F32 0
#define FP_ADT_F16 1
#define FP_ADT_BF16 2

#define FP_ATTN_MAX_NC 4 /* float4 output columns per row and work-item */

/* Floats of local memory: qs [DT][BM + 4], kv KVF, ps [BN][BM + 4],
 * red [BM][WX]. The + 4 keeps float4 alignment and spreads the transposed
 * stores over the banks. */
#define FP_ATTN_LDS(WX, WY, DT, KVF)                                                               \
  ((DT) * (4 * (WY) + 4) + (KVF) + 4 * (WX) * (4 * (WY) + 4) + 4 * (WY) * (WX))
#define FP_ATTN_FITS(WX, WY, DT, KVF)                                                              \
  ((WX) * (WY) <= FP_ATTN_MAX_GROUP && 4 * FP_ATTN_LDS(WX, WY, DT, KVF) <= FP_ATTN_LOCAL_BYTES)

/* ---- loads and stores of each storage type ---------------------------------------------- */

static FP_INLINE float fp_attn_ld1(const int dt, __global const void *p, const long i) {
  if (dt == FP_ADT_F32)
    return ((__global const float *)p)[i];
  if (dt == FP_ADT_F16)
    return vload_half(0, (__global const half *)((__global const ushort *)p + i));
  return fp_bf16_bits_to_f32(((__global const ushort *)p)[i]);
}

/* The first n (>= 1) of p[i..i+3], zeros after. vloadn needs only the
 * element's alignment, so any D takes the vector load where 4 fit. */
static FP_INLINE float4 fp_attn_get4(const int dt, __global const void *p, const long i,
                                     const int n) {
  if (n >= 4) {
    if (dt == FP_ADT_F32)
      return vload4(0, (__global const float *)p + i);
    if (dt == FP_ADT_F16)
      return vload_half4(0, (__global const half *)((__global const ushort *)p + i));
    const uint4 u = convert_uint4(vload4(0, (__global const ushort *)p + i));
    return as_float4(u << 16);
  }
  float4 v = (float4)(0.0f);
  v.x = fp_attn_ld1(dt, p, i);
  if (n > 1)
    v.y = fp_attn_ld1(dt, p, i + 1);
  if (n > 2)
    v.z = fp_attn_ld1(dt, p, i + 2);
  return v;
}

static FP_INLINE ushort fp_attn_bits(const int dt, const float v) {
  return dt == FP_ADT_F16 ? fp_f32_to_f16_bits(v) : fp_f32_to_bf16_bits(v);
}

static FP_INLINE void fp_attn_put1(const int dt, __global void *p, const long i, const float v) {
  if (dt == FP_ADT_F32)
    ((__global float *)p)[i] = v;
  else
    ((__global ushort *)p)[i] = fp_attn_bits(dt, v);
}

/* p[i..i+3], the first n (>= 1) of them, each value rounded once. */
static FP_INLINE void fp_attn_put4(const int dt, __global void *p, const long i, const int n,
                                   const float4 r) {
  if (n >= 4) {
    if (dt == FP_ADT_F32)
      vstore4(r, 0, (__global float *)p + i);
    else
      vstore4((ushort4)(fp_attn_bits(dt, r.x), fp_attn_bits(dt, r.y), fp_attn_bits(dt, r.z),
                        fp_attn_bits(dt, r.w)),
              0, (__global ushort *)p + i);
    return;
  }
  fp_attn_put1(dt, p, i, r.x);
  if (n > 1)
    fp_attn_put1(dt, p, i + 1, r.y);
  if (n > 2)
    fp_attn_put1(dt, p, i + 2, r.z);
}

static FP_INLINE float fp_attn_lane(const float4 v, const int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

static FP_INLINE float fp_attn_max4(const float4 v) { return fmax(fmax(v.x, v.y), fmax(v.z, v.w)); }

/* ---- attention_<dt> --------------------------------------------------------------------------
 * The configuration's constants: WX, WY the group (BN = 4 WX keys per tile,
 * BM = 4 WY rows), DT the largest D (a multiple of 4 WX), KVF the floats of
 * the K / V staging buffer. */
static FP_INLINE void fp_attn_body(const int dt, const int WX, const int WY, const int DT,
                                   const int KVF, __local float *lds, __global void *out,
                                   __global float *lse, __global const void *q,
                                   __global const void *k, __global const void *v,
                                   __global float *opart, __global float *lpart, const long B,
                                   const long H, const long S, const long SK, const long Dl,
                                   const int causal, const float scale, const int splits) {
  const int BM = 4 * WY, BN = 4 * WX, NT = WX * WY;
  const int BMP = BM + 4, BNP = BN + 4;
  const int NC = DT / (4 * WX);
  const int DK = (KVF / BNP) & ~3; /* head dimensions per K chunk */
  int VK = BN;                     /* keys per V chunk: a power of two dividing BN */
  while (VK * DT > KVF)
    VK >>= 1;
  __local float *qs = lds;
  __local float *kv = qs + DT * BMP;
  __local float *ps = kv + KVF;
  __local float *red = ps + BN * BMP;

  const int tx = get_local_id(0), ty = get_local_id(1), t = ty * WX + tx;
  const int D = (int)Dl;
  const int nsplit = splits > 1 ? splits : 1;
  const long mtiles = (S + BM - 1) / BM;
  /* quotients and remainders by subtraction: a % next to a / lets LLVM
   * insert a freeze, which Oclgrind 21.10's uninitialized-value checker
   * cannot run */
  const long g0 = get_group_id(0), g = g0 / nsplit, bh = g / mtiles;
  const long c = g0 - g * nsplit, mt = g - bh * mtiles;
  const long i0 = mt * BM; /* the tile's first query row in its head */
  const long chunk = (SK + nsplit - 1) / nsplit;
  const long c0 = c * chunk;
  long kend = min(SK, c0 + chunk); /* keys [c0, kend) of the chunk */
  if (causal)                      /* the last row of the tile sees keys < this */
    kend = min(kend, min(i0 + BM, S) + SK - S);
  const int ntiles = kend > c0 ? (int)((kend - c0 + BN - 1) / BN) : 0;

  /* the Q tile, transposed, zeros past S (rows) and past D */
  const int DQ = (D + 3) >> 2;
  const long qbase = (bh * S + i0) * Dl;
  for (int e = t; e < BM * DQ; e += NT) {
    const int row = e / DQ, d = 4 * (e - row * DQ);
    float4 x = (float4)(0.0f);
    if (i0 + row < S)
      x = fp_attn_get4(dt, q, qbase + (long)row * D + d, D - d);
    qs[d * BMP + row] = x.x;
    qs[(d + 1) * BMP + row] = x.y;
    qs[(d + 2) * BMP + row] = x.z;
    qs[(d + 3) * BMP + row] = x.w;
  }

  float m[4], l[4];
  float4 o[4][FP_ATTN_MAX_NC];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int cc = 0; cc < FP_ATTN_MAX_NC; ++cc)
      o[i][cc] = (float4)(0.0f);
  }
  /* the keys each of the work-item's rows sees end before lim[i] */
  long lim[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    lim[i] = causal ? min(kend, i0 + 4 * ty + i + 1 + SK - S) : kend;

  const long kvbase = bh * SK * Dl;
  for (int kt = 0; kt < ntiles; ++kt) {
    const long j0 = c0 + (long)kt * BN;
    /* S = Q K^T over the tile, DK head dimensions at a time */
    float4 s[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      s[i] = (float4)(0.0f);
    for (int d0 = 0; d0 < D; d0 += DK) {
      const int dn = min(DK, D - d0), nq = (dn + 3) >> 2;
      barrier(CLK_LOCAL_MEM_FENCE); /* the tile's previous readers are done */
      for (int e = t; e < BN * nq; e += NT) {
        const int key = e / nq, dd = 4 * (e - key * nq);
        float4 x = (float4)(0.0f);
        if (j0 + key < kend)
          x = fp_attn_get4(dt, k, kvbase + (j0 + key) * Dl + d0 + dd, dn - dd);
        kv[dd * BNP + key] = x.x;
        kv[(dd + 1) * BNP + key] = x.y;
        kv[(dd + 2) * BNP + key] = x.z;
        kv[(dd + 3) * BNP + key] = x.w;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      __local const float *qd = qs + d0 * BMP + 4 * ty;
      __local const float *kd = kv + 4 * tx;
#pragma unroll 4
      for (int dd = 0; dd < dn; ++dd) {
        const float4 a = *(__local const float4 *)(qd + dd * BMP);
        const float4 b = *(__local const float4 *)(kd + dd * BNP);
        s[0] += a.x * b;
        s[1] += a.y * b;
        s[2] += a.z * b;
        s[3] += a.w * b;
      }
    }
    /* scale, masks, the rows' partial maxima */
    const long key = j0 + 4 * tx;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float4 x = s[i] * scale;
      x.x = key < lim[i] ? x.x : -INFINITY;
      x.y = key + 1 < lim[i] ? x.y : -INFINITY;
      x.z = key + 2 < lim[i] ? x.z : -INFINITY;
      x.w = key + 3 < lim[i] ? x.w : -INFINITY;
      s[i] = x;
      red[(4 * ty + i) * WX + tx] = fp_attn_max4(x);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* the running max, P, the rescaled sums and accumulators */
    float4 p[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      __local const float4 *rr = (__local const float4 *)(red + (4 * ty + i) * WX);
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < WX / 4; ++w)
        mx = fmax(mx, fp_attn_max4(rr[w]));
      const float mnew = fmax(m[i], mx);
      /* no key seen yet (mnew -inf): subtracting 0 keeps P, alpha and
       * the zeros at 0 rather than exp(-inf + inf) */
      const float mref = mnew == -INFINITY ? 0.0f : mnew;
      const float alpha = exp(m[i] - mref);
      /* four scalar exps: Oclgrind 21.10's uninitialized-value checker
       * crashed on the float4 one (the same code on a GPU) */
      p[i] =
          (float4)(exp(s[i].x - mref), exp(s[i].y - mref), exp(s[i].z - mref), exp(s[i].w - mref));
      l[i] = l[i] * alpha + ((p[i].x + p[i].y) + (p[i].z + p[i].w));
      m[i] = mnew;
#pragma unroll
      for (int cc = 0; cc < FP_ATTN_MAX_NC; ++cc)
        if (cc < NC)
          o[i][cc] *= alpha;
    }
#pragma unroll
    for (int n = 0; n < 4; ++n)
      *(__local float4 *)(ps + (4 * tx + n) * BMP + 4 * ty) =
          (float4)(fp_attn_lane(p[0], n), fp_attn_lane(p[1], n), fp_attn_lane(p[2], n),
                   fp_attn_lane(p[3], n));
    /* O += P V, VK keys at a time; V rows past the range load zeros (P is
     * 0 there, and 0 * garbage could be NaN) */
    const int vq = DT / 4;
    for (int v0 = 0; v0 < BN; v0 += VK) {
      barrier(CLK_LOCAL_MEM_FENCE); /* ps written; kv's readers (S, the last chunk) done */
      for (int e = t; e < VK * vq; e += NT) {
        const int kk = e / vq, d = 4 * (e - kk * vq);
        float4 x = (float4)(0.0f);
        const long j = j0 + v0 + kk;
        if (j < kend && d < D)
          x = fp_attn_get4(dt, v, kvbase + j * Dl + d, D - d);
        *(__local float4 *)(kv + kk * DT + d) = x;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      __local const float *pj = ps + v0 * BMP + 4 * ty;
      __local const float *vj = kv + 4 * tx;
#pragma unroll 4
      for (int j = 0; j < VK; ++j) {
        const float4 pv = *(__local const float4 *)(pj + j * BMP);
#pragma unroll
        for (int cc = 0; cc < FP_ATTN_MAX_NC; ++cc) {
          if (cc < NC) {
            const float4 vv = *(__local const float4 *)(vj + j * DT + 4 * WX * cc);
            o[0][cc] += pv.x * vv;
            o[1][cc] += pv.y * vv;
            o[2][cc] += pv.z * vv;
            o[3][cc] += pv.w * vv;
          }
        }
      }
    }
  }

  /* the rows' sums over the group's work-items, then the output */
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    red[(4 * ty + i) * WX + tx] = l[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  const long R = B * H * S;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const long row = i0 + 4 * ty + i;
    if (row >= S)
      continue;
    __local const float4 *rr = (__local const float4 *)(red + (4 * ty + i) * WX);
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < WX / 4; ++w) {
      const float4 x = rr[w];
      sum += (x.x + x.y) + (x.z + x.w);
    }
    const int seen = sum > 0.0f;
    const float inv = seen ? 1.0f / sum : 0.0f;
    const float ls = seen ? m[i] + log(sum) : -INFINITY;
    const long r = bh * S + row;
    if (nsplit > 1) {
      if (tx == 0)
        lpart[c * R + r] = ls;
      const long base = (c * R + r) * Dl;
#pragma unroll
      for (int cc = 0; cc < FP_ATTN_MAX_NC; ++cc) {
        const int col = 4 * tx + 4 * WX * cc;
        if (cc < NC && col < D)
          fp_attn_put4(FP_ADT_F32, opart, base + col, D - col, seen ? o[i][cc] * inv : 0.0f);
      }
    } else {
      if (tx == 0)
        lse[r] = ls;
#pragma unroll
      for (int cc = 0; cc < FP_ATTN_MAX_NC; ++cc) {
        const int col = 4 * tx + 4 * WX * cc;
        if (cc < NC && col < D)
          fp_attn_put4(dt, out, r * Dl + col, D - col, seen ? o[i][cc] * inv : 0.0f);
      }
    }
  }
}

#define FP_ATTN_KERNEL(name, T, dt, WX, WY, DT, KVF)                                               \
  __kernel __attribute__((reqd_work_group_size(WX, WY, 1))) void name(                             \
      __global T *out, __global float *lse, __global const T *q, __global const T *k,              \
      __global const T *v, __global float *opart, __global float *lpart, long B, long H, long S,   \
      long SK, long D, int causal, float scale, int splits) {                                      \
    __local float4 lds[FP_ATTN_LDS(WX, WY, DT, KVF) / 4]; /* 16-byte aligned */                    \
    fp_attn_body(dt, WX, WY, DT, KVF, (__local float *)lds, out, lse, q, k, v, opart, lpart, B, H, \
                 S, SK, D, causal, scale, splits);                                                 \
  }
#define FP_ATTN_KERNELS(prefix, WX, WY, DT, KVF)                                                   \
  FP_ATTN_KERNEL(prefix##f32, float, FP_ADT_F32, WX, WY, DT, KVF)                                  \
  FP_ATTN_KERNEL(prefix##f16, ushort, FP_ADT_F16, WX, WY, DT, KVF)                                 \
  FP_ATTN_KERNEL(prefix##bf16, ushort, FP_ADT_BF16, WX, WY, DT, KVF)

/* The configurations (the host's table in opencl_attention.c must match):
 *   WX, WY  the group: BN = 4 WX keys per tile, BM = 4 WY query rows
 *   DT      the largest head dimension (FP_ATTN_MAX_NC >= DT / (4 WX))
 *   KVF     floats of the K / V staging buffer: K in chunks of
 *           KVF / (BN + 4) head dimensions, V in chunks of keys
 * attention_<dt>: 16 rows x 64 keys, D <= 256, groups of 64, 31.6 KiB (the
 * OpenCL minimum of 32 KiB): every device runs it (the planner's t). */
FP_ATTN_KERNELS(attention_, 16, 4, 256, 1280)
/* attention_s_<dt>: 64 rows x 32 keys, D <= 64, groups of 128, 37 KiB. */
#if FP_ATTN_FITS(8, 16, 64, 2304)
FP_ATTN_KERNELS(attention_s_, 8, 16, 64, 2304)
#endif
/* attention_m_<dt>: 32 rows x 32 keys, D <= 128, groups of 64, 42 KiB. */
#if FP_ATTN_FITS(8, 8, 128, 4608)
FP_ATTN_KERNELS(attention_m_, 8, 8, 128, 4608)
#endif
/* attention_l_<dt>: 16 rows x 64 keys, D <= 256, groups of 64, 42 KiB: as
 * attention_<dt> with K and V in fewer, larger chunks. */
#if FP_ATTN_FITS(16, 4, 256, 4096)
FP_ATTN_KERNELS(attention_l_, 16, 4, 256, 4096)
#endif

/* ---- attention_combine_<dt> ------------------------------------------------------------------
 * ELEM over R D: element r D + d merges the splits' partials of row r in
 * the order of the specification (max, sum, lse, weighted sum). */
#define FP_ATTN_COMBINE_KERNEL(name, T, dt)                                                        \
  __kernel void name(__global T *out, __global float *lse, __global const float *opart,            \
                     __global const float *lpart, long R, long D, int splits) {                    \
    const long total = R * D, step = (long)get_global_size(0);                                     \
    for (long e = (long)get_global_id(0); e < total; e += step) {                                  \
      const long r = fp_div_narrow(e, D), d = e - r * D;                                           \
      float mx = -INFINITY;                                                                        \
      for (int c = 0; c < splits; ++c) {                                                           \
        const float x = lpart[c * R + r];                                                          \
        mx = x > mx ? x : mx;                                                                      \
      }                                                                                            \
      float sum = 0.0f;                                                                            \
      if (mx > -INFINITY)                                                                          \
        for (int c = 0; c < splits; ++c)                                                           \
          sum += exp(lpart[c * R + r] - mx);                                                       \
      const float L = mx > -INFINITY ? mx + log(sum) : -INFINITY;                                  \
      if (d == 0)                                                                                  \
        lse[r] = L;                                                                                \
      float acc = 0.0f;                                                                            \
      if (L > -INFINITY)                                                                           \
        for (int c = 0; c < splits; ++c) {                                                         \
          const float x = lpart[c * R + r];                                                        \
          if (x > -INFINITY)                                                                       \
            acc += exp(x - L) * opart[(c * R + r) * D + d];                                        \
        }                                                                                          \
      fp_attn_put1(dt, out, e, acc);                                                               \
    }                                                                                              \
  }

FP_ATTN_COMBINE_KERNEL(attention_combine_f32, float, FP_ADT_F32)
FP_ATTN_COMBINE_KERNEL(attention_combine_f16, ushort, FP_ADT_F16)
FP_ATTN_COMBINE_KERNEL(attention_combine_bf16, ushort, FP_ADT_BF16)

/* ---- attn_softmax_<dt> -----------------------------------------------------------------------
 * ROWS: group g takes rows g, g + G, ... (a trip count uniform over the
 * group); its L work-items stride over the row: the max and the sum of the
 * seen keys through fp_group_max / fp_group_sum (common.cl), then the
 * probabilities, zeros for the keys the row does not see. */
#define FP_ATTN_SOFTMAX_KERNEL(name, T, dt)                                                        \
  __kernel void name(__global T *p, __global float *lse, __global const T *s, long R, long S,      \
                     long SK, int causal) {                                                        \
    __local float slots[FP_MAX_GROUP];                                                             \
    __local float partials[FP_PARTIALS];                                                           \
    const long lid = get_local_id(0), L = get_local_size(0);                                       \
    for (long r = get_group_id(0); r < R; r += (long)get_num_groups(0)) {                          \
      long end = SK;                                                                               \
      if (causal)                                                                                  \
        end = max(0L, min(SK, fp_mod_narrow(r, S) + SK - S + 1));                                  \
      const long row = r * SK;                                                                     \
      float mx = -INFINITY;                                                                        \
      for (long j = lid; j < end; j += L) {                                                        \
        const float x = fp_attn_ld1(dt, s, row + j);                                               \
        mx = x > mx ? x : mx;                                                                      \
      }                                                                                            \
      mx = fp_group_reduce(FP_REDUCE_MAX, mx, slots, partials);                                    \
      float sum = 0.0f;                                                                            \
      if (mx > -INFINITY)                                                                          \
        for (long j = lid; j < end; j += L)                                                        \
          sum += exp(fp_attn_ld1(dt, s, row + j) - mx);                                            \
      sum = fp_group_sum(sum, slots, partials);                                                    \
      const float ls = sum > 0.0f ? mx + log(sum) : -INFINITY;                                     \
      if (lid == 0)                                                                                \
        lse[r] = ls;                                                                               \
      for (long j = lid; j < SK; j += L)                                                           \
        fp_attn_put1(dt, p, row + j,                                                               \
                     j < end && ls > -INFINITY ? exp(fp_attn_ld1(dt, s, row + j) - ls) : 0.0f);    \
    }                                                                                              \
  }

FP_ATTN_SOFTMAX_KERNEL(attn_softmax_f32, float, FP_ADT_F32)
FP_ATTN_SOFTMAX_KERNEL(attn_softmax_f16, ushort, FP_ADT_F16)
FP_ATTN_SOFTMAX_KERNEL(attn_softmax_bf16, ushort, FP_ADT_BF16)
