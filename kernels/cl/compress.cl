/* fuseport OpenCL kernels, family compress: activation compression (SPEC.md,
 * "Activation compression"). Semantics: kernels/kernels.def; the executable
 * specification is kernels/cpu/compress.c; the quantisation steps are the
 * prepended fp_device_common.h's (fp_quant_scale, fp_recip_rn, fp_quant_code,
 * fp_dequant_value), so every backend packs the same words.
 *
 * No contraction: a multiply and an add fused into one fma would round once
 * where the specification rounds twice, and the words would differ from the
 * CPU's and CUDA's. */
#pragma OPENCL FP_CONTRACT OFF

/* Geometry (kernels.def, TEAMS): a team of work-items per unit, the units
 * strided over the whole launch. quant_pack and cmp_group_reduce: teams of
 * FP_CMP_TEAM = 8 work-items per group of 256 values, FP_CMP_PER = 32
 * consecutive values each, which at every BITS are whole words (32 * BITS
 * bits), so a work-item packs its own words; the team's minimum and maximum
 * go through local memory. dequant_unpack: teams of 32, 8 values (one
 * 16-byte store) each, no local memory. bfloat16 travels as 16-bit patterns
 * (NVIDIA's OpenCL has no cl_khr_fp16): eight of them are one 16-byte uint4
 * load, unpacked with shifts. Vectors built from lanes are stored with
 * vstore4 rather than through a uint4 pointer, which Oclgrind 21.10 reports
 * as a store of undefined values (gemm.cl's fp_gemm_put4 says the same). */
#define FP_CMP_TEAM 8
#define FP_CMP_PER (FP_QGROUP / FP_CMP_TEAM)
#define FP_CMP_DQ_TEAM 32 /* dequant_unpack: a work-item per 8 values of a group */

/* ---- bfloat16 in 32-bit words ------------------------------------------------------
 * Element 2i of eight consecutive bfloat16 is the low half of word i of their
 * uint4 on a little-endian device (every OpenCL GPU and PoCL), the high half
 * on a big-endian one. */
#if defined(__ENDIAN_LITTLE__)
#define FP_CMP_LO(w) ((w) << 16)
#define FP_CMP_HI(w) ((w)&0xFFFF0000u)
#define FP_CMP_PAIR(lo, hi) (((lo) >> 16) | ((hi)&0xFFFF0000u))
#define FP_CMP_BYTE(i) (i)
#else
#define FP_CMP_LO(w) ((w)&0xFFFF0000u)
#define FP_CMP_HI(w) ((w) << 16)
#define FP_CMP_PAIR(lo, hi) (((lo)&0xFFFF0000u) | ((hi) >> 16))
#define FP_CMP_BYTE(i) ((i) ^ 3) /* byte b of a word holds bits 8b..8b+7 */
#endif

/* The eight values of a uint4 as float bit patterns (bfloat16 << 16). */
static FP_INLINE void fp_cmp_unpack8(uint4 u, uint *f) {
  f[0] = FP_CMP_LO(u.x);
  f[1] = FP_CMP_HI(u.x);
  f[2] = FP_CMP_LO(u.y);
  f[3] = FP_CMP_HI(u.y);
  f[4] = FP_CMP_LO(u.z);
  f[5] = FP_CMP_HI(u.z);
  f[6] = FP_CMP_LO(u.w);
  f[7] = FP_CMP_HI(u.w);
}

/* Eight float bit patterns that are bfloat16 values (low 16 bits zero) as the
 * uint4 of their bfloat16. */
static FP_INLINE uint4 fp_cmp_pack8(const uint *f) {
  return (uint4)(FP_CMP_PAIR(f[0], f[1]), FP_CMP_PAIR(f[2], f[3]), FP_CMP_PAIR(f[4], f[5]),
                 FP_CMP_PAIR(f[6], f[7]));
}

/* Eight bfloat16 at p as float bit patterns, and the store of eight such
 * patterns as bfloat16: one 16-byte access where p is 16-byte aligned
 * (`aligned`), else vload8/vstore8 (any alignment). */
static FP_INLINE void fp_cmp_load8(__global const ushort *p, int aligned, uint *f) {
  if (aligned) {
    fp_cmp_unpack8(*(__global const uint4 *)p, f);
  } else {
    const uint8 h = convert_uint8(vload8(0, p)) << 16;
    f[0] = h.s0;
    f[1] = h.s1;
    f[2] = h.s2;
    f[3] = h.s3;
    f[4] = h.s4;
    f[5] = h.s5;
    f[6] = h.s6;
    f[7] = h.s7;
  }
}

static FP_INLINE void fp_cmp_store8(__global ushort *p, int aligned, const uint *f) {
  if (aligned)
    vstore4(fp_cmp_pack8(f), 0, (__global uint *)p);
  else
    vstore8(convert_ushort8((uint8)(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]) >> 16), 0, p);
}

/* ---- the walk of the TEAMS kernels -------------------------------------------------
 * Unit u = k*G + g (row k, group g). The group's L / T teams take units
 * first + team, first + team + S, ... (first = group id * L / T, S = all the
 * launch's teams), so consecutive teams read consecutive groups; (k, g)
 * advance by a step of S units without a division. `iters` is the same for
 * every work-item of a group (the loops around barriers need that); a team
 * past the last unit is dead (k >= K) and skips its loads and stores. */
typedef struct fp_cmp_walk {
  long k, g;   /* the team's unit */
  long dk, dg; /* S units as rows and groups, dg < G */
  long u;      /* the unit of team `lid` (the work-items that finish a unit, lid < L/T) */
  long step;   /* S */
  long iters;  /* iterations of the group */
  int lane;    /* work-item within the team */
  int team;    /* team within the group */
} fp_cmp_walk;

static FP_INLINE fp_cmp_walk fp_cmp_walk_begin(const int T, long K, long G) {
  fp_cmp_walk w;
  const int lid = (int)get_local_id(0);
  const long per_group = (long)get_local_size(0) / T, units = K * G;
  const long first = (long)get_group_id(0) * per_group;
  w.step = (long)get_num_groups(0) * per_group;
  w.team = lid / T;
  w.lane = lid - w.team * T;
  w.iters = first < units ? fp_div_narrow(units - first + w.step - 1, w.step) : 0;
  const long u = first + w.team;
  w.k = fp_div_narrow(u, G);
  w.g = u - w.k * G;
  w.dk = fp_div_narrow(w.step, G);
  w.dg = w.step - w.dk * G;
  w.u = first + lid;
  return w;
}

static FP_INLINE void fp_cmp_walk_next(fp_cmp_walk *w, long G) {
  w->k += w->dk;
  w->g += w->dg;
  if (w->g >= G) {
    w->g -= G;
    w->k += 1;
  }
  w->u += w->step;
}

/* The 32 values (float bit patterns) of columns c0 .. c0+31 of a row of C,
 * zeros past C. `aligned`: the row starts 16 bytes aligned (c0 is a
 * multiple of 32, so then every load is). */
static FP_INLINE void fp_cmp_load32(__global const ushort *row, long c0, long C, int aligned,
                                    uint *f) {
  if (c0 + FP_CMP_PER <= C) {
#pragma unroll
    for (int q = 0; q < FP_CMP_PER / 8; ++q)
      fp_cmp_load8(row + c0 + 8 * q, aligned, f + 8 * q);
  } else {
#pragma unroll
    for (int j = 0; j < FP_CMP_PER; ++j)
      f[j] = c0 + j < C ? (uint)row[c0 + j] << 16 : 0u;
  }
}

/* The minimum and maximum of the values, four independent chains each:
 * NaN is ignored (fmin, fmax), and values that are all NaN give +inf and
 * -inf, as the CPU's `v < mn ? v : mn` from +inf does. */
static FP_INLINE void fp_cmp_minmax32(const uint *f, float *mn, float *mx) {
  float a[4], b[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    a[c] = INFINITY;
    b[c] = -INFINITY;
  }
#pragma unroll
  for (int j = 0; j < FP_CMP_PER; ++j) {
    a[j & 3] = fmin(a[j & 3], as_float(f[j]));
    b[j & 3] = fmax(b[j & 3], as_float(f[j]));
  }
  *mn = fmin(fmin(a[0], a[1]), fmin(a[2], a[3]));
  *mx = fmax(fmax(b[0], b[1]), fmax(b[2], b[3]));
}

/* The team's minimum and maximum from its FP_CMP_TEAM partials at `base`
 * (a multiple of 8: two aligned float4 each). A zero comes out as +0: a
 * parallel fmin returns -0 or +0 by the order it met them in, and the
 * stored minimum must not depend on that (x + 0 is x except -0 + 0 = +0). */
static FP_INLINE float fp_cmp_team_min(__local const float *lmin, int base) {
  const float4 m =
      fmin(*(__local const float4 *)(lmin + base), *(__local const float4 *)(lmin + base + 4));
  return fmin(fmin(m.x, m.y), fmin(m.z, m.w)) + 0.0f;
}

static FP_INLINE float fp_cmp_team_max(__local const float *lmax, int base) {
  const float4 m =
      fmax(*(__local const float4 *)(lmax + base), *(__local const float4 *)(lmax + base + 4));
  return fmax(fmax(m.x, m.y), fmax(m.z, m.w)) + 0.0f;
}

/* ---- quant_pack -------------------------------------------------------------------
 * Per iteration, three phases and two barriers:
 *   1. every work-item loads its 32 values, folds their min and max and
 *      stores them in lmin/lmax[lid];
 *   2. work-item t < L/8 finishes team t's unit: its min and max, the scale
 *      and the reciprocal (two correctly rounded divisions, in double where
 *      the device has it: done once per unit here rather than on every
 *      work-item of the team, where they cost about as much as the
 *      quantisation itself), into lmn/linv[t]; it stores the unit's scale
 *      and min (consecutive t, consecutive units);
 *   3. every work-item quantises its 32 values with its team's lmn/linv and
 *      stores its BITS words.
 * One buffer of each suffices: phase 1 of the next iteration writes lmin
 * after the second barrier, which every reader of phase 2 has passed, and
 * phase 2 writes lmn after the next first barrier, past every reader of
 * phase 3. `bits` is a constant in each call (the kernel switches on it). */
static FP_INLINE void fp_quant_pack_body(const int bits, __global uint *words,
                                         __global ushort *scale, __global ushort *minv,
                                         __global const ushort *x, long K, long C,
                                         __local float *lmin, __local float *lmax,
                                         __local float *lmn, __local float *linv) {
  const long G = (C + FP_QGROUP - 1) / FP_QGROUP;
  const long units = K * G;
  const int lid = (int)get_local_id(0), teams = (int)get_local_size(0) / FP_CMP_TEAM;
  const int vpw = 32 / bits, nw = 8 * bits; /* values per word, words per unit */
  fp_cmp_walk w = fp_cmp_walk_begin(FP_CMP_TEAM, K, G);
  for (long it = 0; it < w.iters; ++it) {
    const int live = w.k < K;
    uint f[FP_CMP_PER];
    float mn = INFINITY, mx = -INFINITY;
    if (live) {
      fp_cmp_load32(x + w.k * C, w.g * FP_QGROUP + w.lane * FP_CMP_PER, C, ((w.k * C) & 7) == 0, f);
      fp_cmp_minmax32(f, &mn, &mx);
    }
    lmin[lid] = mn;
    lmax[lid] = mx;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < teams) {
      const float tmn = fp_cmp_team_min(lmin, lid * FP_CMP_TEAM);
      const float tmx = fp_cmp_team_max(lmax, lid * FP_CMP_TEAM);
      const float s = fp_quant_scale(tmn, tmx, bits);
      lmn[lid] = tmn;
      linv[lid] = fp_recip_rn(s);
      if (w.u < units) {
        scale[w.u] = fp_f32_to_bf16_bits(s);
        minv[w.u] = fp_f32_to_bf16_bits(tmn); /* exact: a bfloat16 value, or 0 */
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (live) {
      const float tmn = lmn[w.team], inv = linv[w.team];
      uint out[8];
#pragma unroll
      for (int o = 0; o < 8; ++o) {
        if (o < bits) {
          uint acc = 0;
#pragma unroll
          for (int j = 0; j < 32; ++j)
            if (j < vpw)
              acc |= fp_quant_code(as_float(f[o * vpw + j]), tmn, inv, bits) << (j * bits);
          out[o] = acc;
        }
      }
      __global uint *dst = words + (w.k * G + w.g) * nw + w.lane * bits;
      /* dst is aligned to BITS words (nw and the lane's offset are multiples) */
      if (bits == 8) {
        vstore4((uint4)(out[0], out[1], out[2], out[3]), 0, dst);
        vstore4((uint4)(out[4], out[5], out[6], out[7]), 1, dst);
      } else if (bits == 4) {
        vstore4((uint4)(out[0], out[1], out[2], out[3]), 0, dst);
      } else if (bits == 2) {
        vstore2((uint2)(out[0], out[1]), 0, dst);
      } else {
        dst[0] = out[0];
      }
    }
    fp_cmp_walk_next(&w, G);
  }
}

/* Local memory: lmin and lmax of FP_MAX_GROUP floats (float4 for the
 * alignment of phase 2's loads), lmn and linv of a float per team. */
#define FP_CMP_DECL_LOCAL                                                                          \
  __local float4 lmin4[FP_MAX_GROUP / 4], lmax4[FP_MAX_GROUP / 4];                                 \
  __local float lmn[FP_MAX_GROUP / FP_CMP_TEAM], linv[FP_MAX_GROUP / FP_CMP_TEAM]

__kernel void quant_pack(__global uint *words, __global ushort *scale, __global ushort *minv,
                         __global const ushort *x, long K, long C, int bits) {
  FP_CMP_DECL_LOCAL;
  __local float *lmin = (__local float *)lmin4, *lmax = (__local float *)lmax4;
  /* uniform: every work-item takes the same case, so the barriers inside
   * are reached by the whole group */
  switch (bits) {
  case 1:
    fp_quant_pack_body(1, words, scale, minv, x, K, C, lmin, lmax, lmn, linv);
    break;
  case 2:
    fp_quant_pack_body(2, words, scale, minv, x, K, C, lmin, lmax, lmn, linv);
    break;
  case 4:
    fp_quant_pack_body(4, words, scale, minv, x, K, C, lmin, lmax, lmn, linv);
    break;
  case 8:
    fp_quant_pack_body(8, words, scale, minv, x, K, C, lmin, lmax, lmn, linv);
    break;
  default:
    break; /* the recipe checks bits */
  }
}

/* ---- cmp_group_reduce -------------------------------------------------------------
 * quant_pack's phases 1 and 2: out[u] = the min (op 0) or max (op 1) of unit
 * u, zero as +0, written by work-item t < L/8 for team t. The second barrier
 * keeps phase 1 of the next iteration from overwriting lmin while phase 2
 * reads it. */
__kernel void cmp_group_reduce(__global float *out, __global const ushort *x, long K, long C,
                               int op) {
  __local float4 lred4[FP_MAX_GROUP / 4];
  __local float *lred = (__local float *)lred4;
  const long G = (C + FP_QGROUP - 1) / FP_QGROUP;
  const long units = K * G;
  const int lid = (int)get_local_id(0), teams = (int)get_local_size(0) / FP_CMP_TEAM;
  fp_cmp_walk w = fp_cmp_walk_begin(FP_CMP_TEAM, K, G);
  for (long it = 0; it < w.iters; ++it) {
    float mn = INFINITY, mx = -INFINITY;
    if (w.k < K) {
      uint f[FP_CMP_PER];
      fp_cmp_load32(x + w.k * C, w.g * FP_QGROUP + w.lane * FP_CMP_PER, C, ((w.k * C) & 7) == 0, f);
      fp_cmp_minmax32(f, &mn, &mx);
    }
    lred[lid] = op == 0 ? mn : mx;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < teams && w.u < units)
      out[w.u] = op == 0 ? fp_cmp_team_min(lred, lid * FP_CMP_TEAM)
                         : fp_cmp_team_max(lred, lid * FP_CMP_TEAM);
    barrier(CLK_LOCAL_MEM_FENCE);
    fp_cmp_walk_next(&w, G);
  }
}

/* ---- dequant_unpack ---------------------------------------------------------------
 * A team of 32 per unit, work-item c dequantises values 8c .. 8c+7 of it:
 * 8 * BITS bits of the unit's words at bit 8c * BITS (one word, two at 8
 * bits), and stores them as one 16-byte store where the row allows. No
 * barriers: each work-item just walks its units. */
static FP_INLINE void fp_dequant_body(const int bits, __global ushort *out,
                                      __global const uint *words, __global const ushort *scale,
                                      __global const ushort *minv, long K, long C) {
  const long G = (C + FP_QGROUP - 1) / FP_QGROUP;
  const int nw = 8 * bits;
  const uint mask = (1u << bits) - 1u;
  fp_cmp_walk w = fp_cmp_walk_begin(FP_CMP_DQ_TEAM, K, G);
  const long c_off = 8 * w.lane;
  for (; w.k < K; fp_cmp_walk_next(&w, G)) {
    const long c0 = w.g * FP_QGROUP + c_off;
    if (c0 >= C)
      continue; /* padding: not written */
    const long u = w.k * G + w.g;
    const float s = fp_bf16_bits_to_f32(scale[u]), m = fp_bf16_bits_to_f32(minv[u]);
    __global const uint *src = words + u * nw;
    uint q[8];
    if (bits == 8) {
      const uint2 v = ((__global const uint2 *)src)[w.lane];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        q[j] = (v.x >> (8 * j)) & 0xFFu;
        q[4 + j] = (v.y >> (8 * j)) & 0xFFu;
      }
    } else {
      /* 8 * bits <= 32 bits: one word */
      const int first_bit = w.lane * 8 * bits;
      const uint v = src[first_bit >> 5] >> (first_bit & 31);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        q[j] = (v >> (j * bits)) & mask;
    }
    uint f[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      f[j] = as_uint(fp_dequant_value(q[j], s, m)); /* a bfloat16 value: low half zero */
    __global ushort *dst = out + w.k * C + c0;
    if (c0 + 8 <= C) {
      fp_cmp_store8(dst, ((w.k * C) & 7) == 0, f); /* c0 is a multiple of 8 */
    } else {
      for (int j = 0; j < 8; ++j)
        if (c0 + j < C)
          dst[j] = (ushort)(f[j] >> 16);
    }
  }
}

__kernel void dequant_unpack(__global ushort *out, __global const uint *words,
                             __global const ushort *scale, __global const ushort *minv, long K,
                             long C, int bits) {
  switch (bits) {
  case 1:
    fp_dequant_body(1, out, words, scale, minv, K, C);
    break;
  case 2:
    fp_dequant_body(2, out, words, scale, minv, K, C);
    break;
  case 4:
    fp_dequant_body(4, out, words, scale, minv, K, C);
    break;
  case 8:
    fp_dequant_body(8, out, words, scale, minv, K, C);
    break;
  default:
    break;
  }
}

/* ---- relu_pack, relu_unpack_backward ----------------------------------------------
 * The mask is per row, [K, CW] words (CW = ceil(C / 32)). Both kernels walk
 * chunks of 8 elements, the [K, 4*CW] grid of the mask's bytes: chunk (k, b)
 * is columns 8b .. 8b+7 of row k (those below C) and byte b of the row's
 * mask (bits (b % 4) * 8 .. of word b / 4), so each access of a work-item is
 * one 16-byte load or store of the data and one byte of the mask, coalesced
 * with its neighbours'. relu_pack visits every byte of every mask word, so
 * that the bits past C are written (0). FP_ELEM_UNROLL chunks per step (the
 * walk of common.cl), all loaded before any is stored. A row that starts
 * 16-byte aligned (C % 8 == 0, or k * C % 8 == 0) takes aligned uint4
 * accesses, others vload8/vstore8. */

/* relu on a bfloat16 pattern, and whether it is > 0: 1 .. 0x7F80 are the
 * positive values up to +inf; NaN stays as it is; everything else is +0. */
static FP_INLINE uint fp_cmp_relu(uint h, uint *pos) {
  *pos = (h - 1u) < 0x7F80u;
  return *pos || (h & 0x7FFFu) > 0x7F80u ? h : 0u;
}

/* bfloat16(dy * (bit ? 1 : 0)) in float, as PyTorch's product (-x * 0 is
 * -0, NaN and inf * 0 NaN). */
static FP_INLINE uint fp_cmp_mul_bit(uint h, uint bit) {
  return fp_f32_to_bf16_bits(fp_bf16_bits_to_f32(h) * (float)bit);
}

__kernel void relu_pack(__global ushort *y, __global uint *mask, __global const ushort *x, long K,
                        long C) {
  const long CB = ((C + 31) >> 5) * 4; /* mask bytes per row */
  __global uchar *mbytes = (__global uchar *)mask;
  fp_pos pos[FP_ELEM_UNROLL];
  long di, dj;
  if (!fp_walk_begin(K, CB, pos, &di, &dj))
    return;
  for (; pos[0].i < K; fp_walk_next(pos, CB, di, dj)) {
    uint f[FP_ELEM_UNROLL][8];
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long k = pos[u].i, c0 = 8 * pos[u].j, e = k * C + c0;
      if (k < K && c0 + 8 <= C)
        fp_cmp_load8(x + e, (e & 7) == 0, f[u]);
    }
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long k = pos[u].i, c0 = 8 * pos[u].j, e = k * C + c0;
      if (k >= K)
        break;
      uint bits = 0, p;
      if (c0 + 8 <= C) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          f[u][j] = fp_cmp_relu(f[u][j] >> 16, &p) << 16;
          bits |= p << j;
        }
        fp_cmp_store8(y + e, (e & 7) == 0, f[u]);
      } else {
        for (int j = 0; j < 8 && c0 + j < C; ++j) {
          y[e + j] = (ushort)fp_cmp_relu(x[e + j], &p);
          bits |= p << j;
        }
      }
      mbytes[FP_CMP_BYTE(k * CB + pos[u].j)] = (uchar)bits;
    }
  }
}

__kernel void relu_unpack_backward(__global ushort *dx, __global const ushort *dy,
                                   __global const uint *mask, long K, long C) {
  const long CB = ((C + 31) >> 5) * 4, NB = (C + 7) >> 3; /* mask bytes, chunks with data */
  __global const uchar *mbytes = (__global const uchar *)mask;
  fp_pos pos[FP_ELEM_UNROLL];
  long di, dj;
  if (!fp_walk_begin(K, NB, pos, &di, &dj))
    return;
  for (; pos[0].i < K; fp_walk_next(pos, NB, di, dj)) {
    uint f[FP_ELEM_UNROLL][8], b[FP_ELEM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long k = pos[u].i, c0 = 8 * pos[u].j, e = k * C + c0;
      b[u] = k < K ? mbytes[FP_CMP_BYTE(k * CB + pos[u].j)] : 0u;
      if (k < K && c0 + 8 <= C)
        fp_cmp_load8(dy + e, (e & 7) == 0, f[u]);
    }
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long k = pos[u].i, c0 = 8 * pos[u].j, e = k * C + c0;
      if (k >= K)
        break;
      if (c0 + 8 <= C) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
          f[u][j] = fp_cmp_mul_bit(f[u][j] >> 16, (b[u] >> j) & 1u) << 16;
        fp_cmp_store8(dx + e, (e & 7) == 0, f[u]);
      } else {
        for (int j = 0; j < 8 && c0 + j < C; ++j)
          dx[e + j] = fp_cmp_mul_bit(dy[e + j], (b[u] >> j) & 1u);
      }
    }
  }
}

/* ---- the unfused steps --------------------------------------------------------------
 * The notebook's decomposition, one kernel per step with every intermediate
 * in memory: plain grid-stride loops (ELEM), FP_ELEM_UNROLL elements in
 * flight per work-item as in prim.cl, 2-D ones walking (row, column) with
 * fp_walk_begin (common.cl) instead of dividing per element. */

/* cmp_group_scale(scale, inv, mn, mx, n, bits) */
__kernel void cmp_group_scale(__global float *scale, __global float *inv, __global const float *mn,
                              __global const float *mx, long n, int bits) {
  const long step = (long)get_global_size(0);
  for (long i = (long)get_global_id(0); i < n; i += step) {
    const float s = fp_quant_scale(mn[i], mx[i], bits);
    scale[i] = s;
    inv[i] = fp_recip_rn(s);
  }
}

/* cmp_quantize(codes, x, mn, inv, K, C, bits): over the [K, G*256] padded
 * view, whose flat index is the codes' index. */
__kernel void cmp_quantize(__global uint *codes, __global const ushort *x, __global const float *mn,
                           __global const float *inv, long K, long C, int bits) {
  const long G = (C + FP_QGROUP - 1) / FP_QGROUP, GP = G * FP_QGROUP;
  fp_pos pos[FP_ELEM_UNROLL];
  long di, dj;
  if (!fp_walk_begin(K, GP, pos, &di, &dj))
    return;
  for (; pos[0].i < K; fp_walk_next(pos, GP, di, dj)) {
    float v[FP_ELEM_UNROLL], m[FP_ELEM_UNROLL], r[FP_ELEM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long k = pos[u].i, c = pos[u].j;
      const int live = k < K;
      const long unit = k * G + (c >> 8);
      v[u] = live && c < C ? fp_bf16_bits_to_f32(x[k * C + c]) : 0.0f;
      m[u] = live ? mn[unit] : 0.0f;
      r[u] = live ? inv[unit] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      if (pos[u].i < K)
        codes[pos[u].i * GP + pos[u].j] = fp_quant_code(v[u], m[u], r[u], bits);
  }
}

/* cmp_pack_codes(words, codes, nwords, bits): a word per work-item, its
 * 32/BITS codes read as aligned uint4 (w * VPW is a multiple of 4). */
__kernel void cmp_pack_codes(__global uint *words, __global const uint *codes, long nwords,
                             int bits) {
  const long step = (long)get_global_size(0);
  const int vpw = 32 / bits;
  for (long w = (long)get_global_id(0); w < nwords; w += step) {
    uint acc = 0;
    for (int q = 0; q < vpw / 4; ++q) {
      const uint4 c = ((__global const uint4 *)codes)[w * (vpw / 4) + q];
      const int j = 4 * q;
      acc |= (c.x << (j * bits)) | (c.y << ((j + 1) * bits)) | (c.z << ((j + 2) * bits)) |
             (c.w << ((j + 3) * bits));
    }
    words[w] = acc;
  }
}

/* log2(32 / bits) for bits in {1, 2, 4, 8} */
static FP_INLINE int fp_cmp_log2_vpw(int bits) { return (int)clz((uint)bits) - 26; }

/* cmp_unpack_codes(codes, words, nwords, bits) */
__kernel void cmp_unpack_codes(__global uint *codes, __global const uint *words, long nwords,
                               int bits) {
  const long step = (long)get_global_size(0);
  const int lv = fp_cmp_log2_vpw(bits);
  const long n = nwords << lv;
  const uint mask = (1u << bits) - 1u;
  for (long i = (long)get_global_id(0); i < n; i += step)
    codes[i] = (words[i >> lv] >> ((uint)(i & ((1 << lv) - 1)) * bits)) & mask;
}

/* cmp_dequantize(out, codes, scale, min, K, C) */
__kernel void cmp_dequantize(__global ushort *out, __global const uint *codes,
                             __global const ushort *scale, __global const ushort *minv, long K,
                             long C) {
  const long G = (C + FP_QGROUP - 1) / FP_QGROUP, GP = G * FP_QGROUP;
  fp_pos pos[FP_ELEM_UNROLL];
  long di, dj;
  if (!fp_walk_begin(K, C, pos, &di, &dj))
    return;
  for (; pos[0].i < K; fp_walk_next(pos, C, di, dj)) {
    uint q[FP_ELEM_UNROLL], s[FP_ELEM_UNROLL], m[FP_ELEM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long k = pos[u].i, c = pos[u].j;
      const int live = k < K;
      const long unit = k * G + (c >> 8);
      q[u] = live ? codes[k * GP + c] : 0u;
      s[u] = live ? scale[unit] : 0u;
      m[u] = live ? minv[unit] : 0u;
    }
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      if (pos[u].i < K)
        out[pos[u].i * C + pos[u].j] =
            (ushort)(as_uint(fp_dequant_value(q[u], fp_bf16_bits_to_f32(s[u]),
                                              fp_bf16_bits_to_f32(m[u]))) >>
                     16);
  }
}

/* cmp_to_bf16(out, in, n) */
__kernel void cmp_to_bf16(__global ushort *out, __global const float *in, long n) {
  const long step = (long)get_global_size(0);
  for (long i = (long)get_global_id(0); i < n; i += step)
    out[i] = fp_f32_to_bf16_bits(in[i]);
}

/* cmp_gt_zero(mask, x, n) */
__kernel void cmp_gt_zero(__global uchar *mask, __global const ushort *x, long n) {
  const long step = (long)get_global_size(0);
  for (long i = (long)get_global_id(0); i < n; i += step)
    mask[i] = fp_bf16_bits_to_f32(x[i]) > 0.0f ? 1 : 0;
}

/* Bit i of the result: byte i of x (little-endian: bits 8i .. 8i+7) is not
 * 0. A byte's top bit after adding 0x7F to its low 7 bits, or its own top
 * bit: set exactly when the byte is not 0 (no carry crosses bytes). */
static FP_INLINE uint fp_cmp_nonzero_bytes(uint x) {
  const uint nz = (((x & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | x) & 0x80808080u;
  return ((nz >> 7) & 1u) | ((nz >> 14) & 2u) | ((nz >> 21) & 4u) | ((nz >> 28) & 8u);
}

/* cmp_pack_bits(words, mask, K, C): a word per work-item, its 32 bytes as
 * two 16-byte loads where the word is whole (on a little-endian device). */
__kernel void cmp_pack_bits(__global uint *words, __global const uchar *mask, long K, long C) {
  const long CW = (C + 31) >> 5;
  fp_pos pos[FP_ELEM_UNROLL];
  long di, dj;
  if (!fp_walk_begin(K, CW, pos, &di, &dj))
    return;
  for (; pos[0].i < K; fp_walk_next(pos, CW, di, dj)) {
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long k = pos[u].i, c0 = 32 * pos[u].j;
      if (k >= K)
        break;
      __global const uchar *m = mask + k * C + c0;
      uint acc = 0;
#if defined(__ENDIAN_LITTLE__)
      if (c0 + 32 <= C) {
        const uint4 a = as_uint4(vload16(0, m)), b = as_uint4(vload16(1, m));
        acc = fp_cmp_nonzero_bytes(a.x) | fp_cmp_nonzero_bytes(a.y) << 4 |
              fp_cmp_nonzero_bytes(a.z) << 8 | fp_cmp_nonzero_bytes(a.w) << 12 |
              fp_cmp_nonzero_bytes(b.x) << 16 | fp_cmp_nonzero_bytes(b.y) << 20 |
              fp_cmp_nonzero_bytes(b.z) << 24 | fp_cmp_nonzero_bytes(b.w) << 28;
      } else
#endif
      {
        for (int j = 0; j < 32 && c0 + j < C; ++j)
          acc |= (uint)(m[j] != 0) << j;
      }
      words[k * CW + pos[u].j] = acc;
    }
  }
}

/* cmp_unpack_bits(mask, words, K, C) */
__kernel void cmp_unpack_bits(__global uchar *mask, __global const uint *words, long K, long C) {
  const long CW = (C + 31) >> 5;
  fp_pos pos[FP_ELEM_UNROLL];
  long di, dj;
  if (!fp_walk_begin(K, C, pos, &di, &dj))
    return;
  for (; pos[0].i < K; fp_walk_next(pos, C, di, dj)) {
    uint w[FP_ELEM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      w[u] = pos[u].i < K ? words[pos[u].i * CW + (pos[u].j >> 5)] : 0u;
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      if (pos[u].i < K)
        mask[pos[u].i * C + pos[u].j] = (uchar)((w[u] >> (pos[u].j & 31)) & 1u);
  }
}

/* cmp_mul_mask(dx, dy, mask, n) */
__kernel void cmp_mul_mask(__global ushort *dx, __global const ushort *dy,
                           __global const uchar *mask, long n) {
  const long step = (long)get_global_size(0);
  for (long i = (long)get_global_id(0); i < n; i += step)
    dx[i] = fp_cmp_mul_bit(dy[i], mask[i]);
}
