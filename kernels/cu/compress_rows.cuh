/* fuseport CUDA kernels, family compress: the rows loops of quant_pack
 * (every row and bits) and of dequant_unpack (rows off the 16-byte grid,
 * and 8 bits on it), and the dequantising helpers that dequant_unpack's
 * team loop (compress.cu, 1 to 4 bits on the grid) shares.
 *
 * Why loops of their own: quant_pack was bound by instruction issue, not by
 * memory (the same time at 1 and 8 bits, 2.3 TB/s of bfloat16 read on an
 * H200 whose copy runs at 4.0). Its team loop spent about 21 instructions
 * a value (SASS, 2 bits, 8 lanes a team): a division to find each group's
 * row, the group's float divisions rebuilt in every chunk (ptxas
 * rematerialised them), a clamp and floor in three float steps, a shuffle
 * and a store per chunk; rows off the 16-byte grid loaded 2 bytes at a
 * time. Here (about 12 a value):
 *   - warps stride over the groups with a row cursor (GroupCursor: one
 *     division per thread, not per group), so the host launches 8 blocks a
 *     compute unit (ops/compress.c, teams_range) and every warp loops;
 *   - the code is cvt.rzi.u32 of (x - mn) * inv + (0.5 - 1e-6), which
 *     clamps below 0 and sends NaN to 0 as fp_quant_code's clamp does, plus
 *     an integer min with 2^BITS - 1 only in a group whose largest value
 *     could pass it, and an add of the shifted code into the lane's words
 *     (the codes' bits are disjoint): six instructions a value with the
 *     bfloat16 unpacking and the three float steps;
 *   - a lane's codes of its four chunks sit in BITS registers (bit (8j + e) *
 *     BITS for value e of chunk j) and leave in one exchange: at 2 bits a
 *     pair of lanes swaps half words (one shuffle, two stores a lane), at 1
 *     bit four lanes transpose their bytes (two shuffles, one store);
 *   - rows off the grid load 16-byte grid chunks and write their codes
 *     rotated (load_grid_group, store_rotated).
 * A team is 8 lanes a group, as in the team loops; the min / max butterfly
 * is team_min_max: the words are the same bits.
 *
 * dequant_unpack_rows walks the groups the same way and loads the next
 * round's codes, scale and min before it dequantises and stores this one's
 * (a few registers), so a warp has loads in flight. 8 bits use the
 * exponent trick of 4 bits (dequant_chunk) with PRMT placing the byte: 3.5
 * instructions a value, where the team loop had the scalar formula (this
 * form spilled there at 64 registers). Off the grid, a warp's four groups,
 * which follow one another in memory, go through a span of shared memory
 * and leave in 16-byte grid chunks, where the team loop shifted values
 * across lanes and stored the chunks it shares with other groups 2 bytes at
 * a time.
 */
#ifndef FUSEPORT_COMPRESS_ROWS_CUH
#define FUSEPORT_COMPRESS_ROWS_CUH

#include "compress_common.cuh"
#include "dequant_lut.cuh"

#include <cuda_bf16.h>

namespace {

__device__ __forceinline__ void st16(unsigned short *p, uint4 v) {
  *reinterpret_cast<uint4 *>(p) = v;
}
__device__ __forceinline__ uint4 lds16(const unsigned short *p) {
  return *reinterpret_cast<const uint4 *>(p);
}

/* Value e (< 8) of eight bfloat16 patterns packed as a uint4 (value 2m in
 * the low half of word m), as the 16-bit pattern. */
__device__ __forceinline__ unsigned half_of(const uint4 &v, int e) {
  return (word_of(v, e >> 1) >> (16 * (e & 1))) & 0xFFFFu;
}

/* Stores the values of v at flat f .. f+7 inside [lo, hi): 16 bytes where
 * all eight are (f on the 16-byte grid), else one at a time. */
__device__ __forceinline__ void st8_window(unsigned short *p, long long f, const uint4 &v,
                                           long long lo, long long hi) {
  if (f >= lo && f + kLaneValues <= hi) {
    st16(p + f, v);
    return;
  }
#pragma unroll
  for (int e = 0; e < kLaneValues; ++e)
    if (f + e >= lo && f + e < hi)
      p[f + e] = (unsigned short)half_of(v, e);
}

/* A group's dequantisation in two registers: at 1 and 2 bits the table of
 * its 2 or 4 values (dequant_lut.cuh: values 0, 1 in lo, 2, 3 in hi), each
 * fp_dequant_value's; at 4 and 8 bits its scale and min as floats. */
struct GroupDequant {
  unsigned lo, hi;
};
template <int BITS>
__device__ __forceinline__ GroupDequant group_dequant(unsigned short scale, unsigned short mn) {
  const float s = fp_bf16_bits_to_f32(scale), m = fp_bf16_bits_to_f32(mn);
  if constexpr (BITS <= 2) {
    const auto bits = [&](unsigned q) {
      return FP_FLOAT_AS_BITS(fp_dequant_value(q, s, m)) >> 16; /* a bfloat16 value */
    };
    return {bits(0u) | bits(1u) << 16, BITS == 2 ? bits(2u) | bits(3u) << 16 : 0u};
  } else {
    return {__float_as_uint(s), __float_as_uint(m)};
  }
}

/* The 8 values of a rank's chunk as bfloat16 patterns (value e in the half
 * e % 2 of word e / 2), from its codes: 8 * BITS bits from bit 0 of lo.
 * 1 and 2 bits look the values up; 4 bits computes fp_dequant_value's
 * steps with fewer instructions: the code goes to float by the exponent
 * trick (0x4B000000 | q is 2^23 + q; one subtraction, exact), then the same
 * fma, and cvt.rn.bf16x2 rounds two at once as fp_f32_to_bf16_bits does
 * (to nearest even; a NaN, which NVIDIA's fma makes canonical, to 0x7FFF).
 * 8 bits: dequant_chunk8, below. */
template <int BITS>
__device__ __forceinline__ uint4 dequant_chunk(unsigned lo, const GroupDequant &g) {
  static_assert(BITS <= 4, "1, 2 or 4 bits");
  uint4 o;
  if constexpr (BITS <= 2) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      unsigned w01, w23;
      fpdq::lookup4<BITS>(lo >> (4 * BITS * h), g.lo, g.hi, w01, w23);
      set_word(o, 2 * h, w01);
      set_word(o, 2 * h + 1, w23);
    }
  } else {
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      float x[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const unsigned biased = 0x4B000000u | ((lo >> (8 * m + 4 * h)) & 0xFu);
        x[h] = __fmaf_rn(__uint_as_float(biased) - 8388608.0f, __uint_as_float(g.lo),
                         __uint_as_float(g.hi));
      }
      const __nv_bfloat162 p = __floats2bfloat162_rn(x[0], x[1]);
      set_word(o, m, *reinterpret_cast<const unsigned *>(&p));
    }
  }
  return o;
}

/* fp_quant_code from qf = (x - mn) * inv + (0.5 - 1e-6): cvt.rzi.u32.f32
 * truncates, gives 0 below 0 (it saturates) and for NaN, as the reference's
 * clamp to [0, qmax] before int() does; the min then clamps from above
 * (+inf saturates to 2^32 - 1 first). */
template <int BITS> __device__ __forceinline__ unsigned quant_code_rz(float qf) {
  return min(__float2uint_rz(qf), (1u << BITS) - 1u);
}

/* bfloat16 of a float that is not NaN, to nearest even (cvt.rn.bf16.f32:
 * fp_f32_to_bf16_bits's result where there is no NaN to quiet). */
__device__ __forceinline__ unsigned short bf16_bits_rn(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

/* Stores a team rank's codes of a group: lw holds chunk j's value e at bit
 * (8j + e) * BITS of the BITS words; the group's word of value v is v * BITS
 * / 32 (kernels.def), and rank r's chunk j starts at value 64j + 8r. */
template <int BITS>
__device__ __forceinline__ void store_rank_codes(unsigned *out, const unsigned (&lw)[BITS], int r,
                                                 bool active, bool pair_store) {
  if constexpr (BITS == 8) { /* chunk j: words 16j + 2r, +1 */
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (active) {
        if (pair_store) {
          *reinterpret_cast<uint2 *>(out + 16 * j + 2 * r) = make_uint2(lw[2 * j], lw[2 * j + 1]);
        } else {
          out[16 * j + 2 * r] = lw[2 * j];
          out[16 * j + 2 * r + 1] = lw[2 * j + 1];
        }
      }
  } else if constexpr (BITS == 4) { /* chunk j: word 8j + r */
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (active)
        out[8 * j + r] = lw[j];
  } else if constexpr (BITS == 2) {
    /* chunk j: the half (r & 1) of word 4j + r / 2; lw[0] = chunks 0 | 1,
     * lw[1] = chunks 2 | 3. The even rank of a pair writes chunks 0 and 2,
     * the odd one 1 and 3: each sends the halves it does not write. */
    const bool odd = (r & 1) != 0;
    const unsigned send = fpdq::prmt(lw[0], lw[1], odd ? 0x5410u : 0x7632u);
    const unsigned got = __shfl_xor_sync(kFullMask, send, 1);
    const unsigned first = fpdq::prmt(lw[0], got, odd ? 0x3254u : 0x5410u);
    const unsigned second = fpdq::prmt(lw[1], got, odd ? 0x3276u : 0x7610u);
    const int jo = odd ? 1 : 0;
    if (active) {
      out[4 * jo + (r >> 1)] = first;
      out[4 * (jo + 2) + (r >> 1)] = second;
    }
  } else {
    /* chunk j: byte r & 3 of word 2j + r / 4. The four ranks of a quad hold
     * a 4 x 4 byte matrix (rank b, chunk j); rank b stores column j = b. Two
     * exchanges: 2 x 2 blocks across ranks b ^ 2, then bytes across b ^ 1. */
    const int b = r & 3;
    unsigned w = lw[0];
    unsigned got = __shfl_xor_sync(kFullMask, (b & 2) ? w : w >> 16, 2);
    w = fpdq::prmt(w, got, (b & 2) ? 0x3254u : 0x5410u);
    got = __shfl_xor_sync(kFullMask, (b & 1) ? w : w >> 8, 1);
    w = fpdq::prmt(w, got, (b & 1) ? 0x3614u : 0x6240u);
    if (active)
      out[2 * b + (r >> 2)] = w;
  }
}

/* A rank's codes of its chunks: value e of chunk j at bit (8j + e) * BITS
 * of lw. CLAMP: the min with qmax (quant_code_rz); else the caller knows no
 * code passes qmax. */
template <int BITS, bool CLAMP, int J>
__device__ __forceinline__ void rank_codes(const uint4 (&v)[J], float mn, float inv,
                                           unsigned (&lw)[BITS]) {
#pragma unroll
  for (int i = 0; i < BITS; ++i)
    lw[i] = 0u;
#pragma unroll
  for (int j = 0; j < J; ++j)
#pragma unroll
    for (int e = 0; e < kLaneValues; ++e) {
      const unsigned w = word_of(v[j], e >> 1);
      const float h = __uint_as_float(e & 1 ? w & 0xFFFF0000u : w << 16);
      const float qf = __fadd_rn(__fmul_rn(__fsub_rn(h, mn), inv), 0.5f - 1e-6f);
      const unsigned q = CLAMP ? quant_code_rz<BITS>(qf) : __float2uint_rz(qf);
      const int bit = (kLaneValues * j + e) * BITS;
      lw[bit / 32] += q << (bit % 32); /* disjoint bits: + is | */
    }
}

/* The groups a team takes, a warp-grid step of units apart: the unit (k*G
 * + g), its first value's offset k*C + 256g and g, advanced by adds (one
 * division per thread, at the start). The unit's words, scale and min
 * follow from the unit alone; only the offset depends on where rows wrap. */
struct GroupCursor {
  long long unit, off; /* unit, and x's offset of its value 0 */
  long long g;         /* group of its row */
  long long dunit, doff, dg, wrap_off, G;
  __device__ __forceinline__ GroupCursor(long long first, long long step, long long G_,
                                         long long C) {
    G = G_;
    const long long k = RowColCursor::quotient(first, G), ks = RowColCursor::quotient(step, G);
    unit = first;
    g = first - k * G;
    off = k * C + g * kGroup;
    dunit = step;
    dg = step - ks * G;
    doff = ks * C + dg * kGroup;
    wrap_off = C - G * kGroup; /* the next row starts C - 256G values after the wrap */
  }
  __device__ __forceinline__ void advance() {
    unit += dunit;
    off += doff;
    g += dg;
    if (g >= G) {
      g -= G;
      off += wrap_off;
    }
  }
};

/* Rows off the 16-byte grid (quant_pack_rows<BITS, false>): a group that
 * starts a values past the grid spans 33 grid chunks. Rank r loads grid
 * chunks 8j + r (j < 4), so slot e of its chunk j holds the group's value
 * 64j + 8r + e - a, and rank 0 puts the first a values of chunk 32 (the
 * group's last a) into the first a slots of its chunk 0, which would hold
 * the previous group's: every slot then holds a value of the group, at
 * position (slot - a) mod 256. The min and max need no order; the codes go
 * to the group's bits rotated by a codes (grid_words), which the team puts
 * in shared memory and reads back two words at a time (a funnel shift).
 * Values past C in a row's last group are zeroed there (a team's branch).
 * Loads stay inside the array's n values (ld8_flat at its two ends). */
template <int J>
__device__ __forceinline__ void load_grid_group(uint4 (&v)[J], const unsigned short *x,
                                                long long gbase, long long n, int a, int r,
                                                int valid) {
  const bool inside = gbase >= 0 && gbase + (J * 64 + 8) <= n; /* no chunk at an array end */
#pragma unroll
  for (int j = 0; j < J; ++j) {
    /* a chunk with no value of the group (a short group: rows of 257) is not read */
    const long long f = gbase + 64 * j + kLaneValues * r;
    v[j] = 64 * j + kLaneValues * r - a >= valid ? make_uint4(0u, 0u, 0u, 0u)
           : inside                              ? ld16(x + f)
                                                 : ld8_flat(x, f, n);
  }
  if (r == 0 && a != 0 && valid > kGroup - a) {
    const long long f = gbase + 64 * J; /* chunk 32: the group's last a values first */
    const uint4 last = inside ? ld16(x + f) : ld8_flat(x, f, n);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const unsigned keep = (2 * m < a ? 0xFFFFu : 0u) | (2 * m + 1 < a ? 0xFFFF0000u : 0u);
      set_word(v[0], m, (word_of(last, m) & keep) | (word_of(v[0], m) & ~keep));
    }
  }
}

/* Zeroes the slots whose value lies past a partial group's `valid` (slot e
 * of chunk j holds position (64j + 8r + e - a) mod 256). */
template <int J> __device__ __forceinline__ void zero_past(uint4 (&v)[J], int valid, int a, int r) {
#pragma unroll
  for (int j = 0; j < J; ++j)
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int p0 = (64 * j + kLaneValues * r + 2 * m - a) & (kGroup - 1);
      const int p1 = (p0 + 1) & (kGroup - 1);
      const unsigned keep = (p0 < valid ? 0xFFFFu : 0u) | (p1 < valid ? 0xFFFF0000u : 0u);
      set_word(v[j], m, word_of(v[j], m) & keep);
    }
}

/* The team's words where its codes sit in grid slots (position p at slot
 * (p + a) mod 256): word w of the group is bits 32w + a*BITS on, cyclically,
 * of the slot order's words in sw. Rank r writes words r, r + 8, ... */
template <int BITS>
__device__ __forceinline__ void store_rotated(unsigned *out, const unsigned *sw, int a, int r,
                                              bool active) {
  constexpr int NW = 8 * BITS;
  const int sh = a * BITS, dw = sh >> 5, sb = sh & 31;
#pragma unroll
  for (int i = 0; i < NW / 8; ++i) {
    const int w = r + 8 * i;
    const unsigned lo = sw[(w + dw) & (NW - 1)], hi = sw[(w + dw + 1) & (NW - 1)];
    if (active)
      out[w] = __funnelshift_r(lo, hi, sb);
  }
}

/* quant_pack over rows on the 16-byte grid (GRID: C % 8 == 0, x aligned)
 * or off it (the loads and stores above). */
/* !GRID: team_words, shared memory of kMaxBlock / 32 warps x
 * kRotateWords words (the grid-order words, a warp's 4 teams'). */
constexpr int kRotateWords = 4 * 64;
template <int BITS, bool GRID>
__device__ __forceinline__ void quant_pack_rows(unsigned *words, unsigned short *scale,
                                                unsigned short *mins, const unsigned short *x,
                                                long long K, long long C, unsigned *team_words) {
  constexpr int T = 8, J = Team<T>::kChunks, P = Team<T>::kPerWarp;
  constexpr int NW = 8 * BITS; /* words per group */
  const long long G = (C + kGroup - 1) / kGroup, units = K * G, n = K * C;
  /* values in a row's last group (1..256); every other group is full */
  const int last_valid = (int)(C - (G - 1) * kGroup);
  const WarpGrid wg = warp_grid();
  const int r = wg.lane % T, team = wg.lane / T;
  const bool pair_store = aligned(words, 8);
  const int phase = phase16(x); /* !GRID: x's offset from the grid, in values */
  unsigned *sw = GRID ? nullptr : team_words + (threadIdx.x / 32) * kRotateWords + team * NW;
  GroupCursor at(wg.first * P + team, wg.step * P, G, C);
  /* warp-uniform: the warp runs while its first team has a group */
  for (long long base = wg.first * P; base < units; base += wg.step * P, at.advance()) {
    const bool active = at.unit < units;
    const int valid = !active ? 0 : at.g == G - 1 ? last_valid : kGroup;
    const int a = GRID ? 0 : (int)((at.off + phase) & 7);
    RankValues<T> rv;
    if constexpr (GRID) {
      /* valid is a multiple of 8: each chunk is in or out */
      const unsigned short *xr = x + at.off + r * kLaneValues;
#pragma unroll
      for (int j = 0; j < J; ++j)
        rv.v[j] = j * Team<T>::kChunkValues + r * kLaneValues < valid
                      ? ld16(xr + j * Team<T>::kChunkValues)
                      : make_uint4(0u, 0u, 0u, 0u);
    } else {
      load_grid_group(rv.v, x, at.off - a, n, a, r, valid);
      if (valid < kGroup)
        zero_past(rv.v, valid, a, r);
    }
    const MinMaxBits b = team_min_max<T>(rv);
    /* + 0.0f: a zero min or max is +0 (quant_pack_run) */
    const float mn = __fadd_rn(fp_bf16_bits_to_f32(b.mn), 0.0f);
    const float mx = __fadd_rn(fp_bf16_bits_to_f32(b.mx), 0.0f);
    const float s = fp_quant_scale(mn, mx, BITS);
    const float inv = fp_recip_rn(s);
    /* The steps are monotonic (correctly rounded, inv >= 0), so no code
     * passes the group max's: where that one is below qmax + 1, as it is
     * but for a subnormal scale or an infinite value, the clamp from above
     * can go (a team's branch: its lanes agree). */
    const float top = __fadd_rn(__fmul_rn(__fsub_rn(mx, mn), inv), 0.5f - 1e-6f);
    unsigned lw[BITS];
    if (top < (float)(1 << BITS))
      rank_codes<BITS, false>(rv.v, mn, inv, lw);
    else
      rank_codes<BITS, true>(rv.v, mn, inv, lw);
    if constexpr (GRID) {
      store_rank_codes<BITS>(words + at.unit * NW, lw, r, active, pair_store);
    } else {
      store_rank_codes<BITS>(sw, lw, r, true, true); /* slot order */
      __syncwarp();
      store_rotated<BITS>(words + at.unit * NW, sw, a, r, active);
      __syncwarp(); /* read before the next round writes */
    }
    if (active && r == 0) {
      scale[at.unit] = bf16_bits_rn(s);                            /* never NaN (fp_quant_scale) */
      mins[at.unit] = (unsigned short)(__float_as_uint(mn) >> 16); /* a bfloat16 value or +inf */
    }
  }
}

/* Rank r's codes of its chunk j (values 64j + 8r .. + 7 of the group: 8 *
 * BITS bits from bit 0 of lo[j], then hi[j] at 8 bits, as store_rank_codes
 * wrote them) and the group's stored scale and min: zeros where !active. */
struct RowCodes {
  unsigned lo[4], hi[4];
  unsigned short scale, min;
};
template <int BITS>
__device__ __forceinline__ RowCodes load_row_codes(const unsigned *words,
                                                   const unsigned short *scale,
                                                   const unsigned short *mins, long long unit,
                                                   bool active, int r, bool pair_load) {
  RowCodes c = {};
  if (!active)
    return c;
  const unsigned *w = words + unit * (8 * BITS);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (BITS == 8) {
      if (pair_load) {
        const uint2 p = ldro(reinterpret_cast<const uint2 *>(w + 16 * j + 2 * r));
        c.lo[j] = p.x;
        c.hi[j] = p.y;
      } else {
        c.lo[j] = ldro(w + 16 * j + 2 * r);
        c.hi[j] = ldro(w + 16 * j + 2 * r + 1);
      }
    } else if constexpr (BITS == 4) {
      c.lo[j] = ldro(w + 8 * j + r);
    } else if constexpr (BITS == 2) {
      c.lo[j] = ldro(w + 4 * j + (r >> 1)) >> (16 * (r & 1));
    } else {
      c.lo[j] = ldro(w + 2 * j + (r >> 2)) >> (8 * (r & 3));
    }
  }
  c.scale = ldro(scale + unit);
  c.min = ldro(mins + unit);
  return c;
}

/* 8 codes of 8 bits (lo: values 0-3, hi: 4-7) as bfloat16 pairs:
 * fp_dequant_value's steps, the code placed by PRMT into 0x4B0000qq (2^23 +
 * q, exact after the subtraction), cvt.rn.bf16x2 for two at once (the
 * rounding of fp_f32_to_bf16_bits; dequant_chunk's note on NaN). */
__device__ __forceinline__ uint4 dequant_chunk8(unsigned lo, unsigned hi, float s, float m) {
  uint4 o;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const unsigned src = p < 2 ? lo : hi;
    float x[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const unsigned byte = (unsigned)((2 * p + h) & 3);
      const float q = __uint_as_float(fpdq::prmt(src, 0x4B000000u, 0x7650u | byte)) - 8388608.0f;
      x[h] = __fmaf_rn(q, s, m);
    }
    const __nv_bfloat162 v = __floats2bfloat162_rn(x[0], x[1]);
    set_word(o, p, *reinterpret_cast<const unsigned *>(&v));
  }
  return o;
}

/* dequant_unpack's shared memory off the grid: a warp's span of four
 * groups (up to 1024 values) from the grid chunk that holds its first, 8
 * warps (in a larger block warps 8 on idle: TEAMS allows 1024 threads,
 * ops/compress.c launches 256). */
constexpr int kSpanValues = 4 * kGroup + 2 * kLaneValues;
constexpr int kSpanWarps = 8;
constexpr int kDequantSmemBytes = kSpanWarps * kSpanValues * 2;

/* Stores rank r's values of its chunk j (group values c .. c + 7, c = 64j +
 * 8r, those below valid) at span[rel + c ..]: four 4-byte stores where rel
 * is even and all eight are valid, else one value at a time. */
__device__ __forceinline__ void span_store(unsigned short *span, int rel, int c, int valid,
                                           const uint4 &v) {
  if (c >= valid)
    return;
  if ((rel & 1) == 0 && c + kLaneValues <= valid) {
    unsigned *w = reinterpret_cast<unsigned *>(span + rel + c);
#pragma unroll
    for (int m = 0; m < 4; ++m)
      w[m] = word_of(v, m);
    return;
  }
#pragma unroll
  for (int e = 0; e < kLaneValues; ++e)
    if (c + e < valid)
      span[rel + c + e] = (unsigned short)half_of(v, e);
}

/* dequant_unpack over rows on the 16-byte grid (GRID: C % 8 == 0, out
 * aligned; compress.cu takes it at 8 bits) or off it (every bits). A rank
 * dequantises values 64j + 8r .. of its group as on the grid; off it the
 * four teams of a warp write their groups, which follow one another in
 * memory, into a span of shared memory at their offsets from the grid
 * chunk that holds the first one's start, and the warp then stores the
 * span in grid chunks: 16 bytes a lane, only the span's two end chunks a
 * value at a time (they hold other warps' values too). The next round's
 * codes, scale and min are loaded before this one's are stored. */
template <int BITS, bool GRID>
__device__ __forceinline__ void
dequant_unpack_rows(unsigned short *out, const unsigned *words, const unsigned short *scale,
                    const unsigned short *mins, long long K, long long C, uint4 *smem) {
  constexpr int T = 8, J = Team<T>::kChunks, P = Team<T>::kPerWarp;
  const long long G = (C + kGroup - 1) / kGroup, units = K * G;
  const int last_valid = (int)(C - (G - 1) * kGroup);
  const int warp = (int)(threadIdx.x / 32);
  if (!GRID && warp >= kSpanWarps) /* the shared memory holds 8 warps' spans */
    return;
  const int wpb = GRID || (int)blockDim.x / 32 < kSpanWarps ? (int)blockDim.x / 32 : kSpanWarps;
  const WarpGrid wg = {(long long)blockIdx.x * wpb + warp, (long long)gridDim.x * wpb,
                       (int)(threadIdx.x & 31u)};
  const int r = wg.lane % T, team = wg.lane / T;
  const bool pair_load = aligned(words, 8);
  const int phase = phase16(out); /* !GRID: out's offset from the grid, in values */
  unsigned short *span = reinterpret_cast<unsigned short *>(smem) + warp * kSpanValues;
  GroupCursor at(wg.first * P + team, wg.step * P, G, C);
  RowCodes c = load_row_codes<BITS>(words, scale, mins, at.unit, at.unit < units, r, pair_load);
  for (long long base = wg.first * P; base < units; base += wg.step * P) {
    const bool active = at.unit < units;
    const int valid = !active ? 0 : at.g == G - 1 ? last_valid : kGroup;
    const long long off = at.off;
    const RowCodes now = c;
    at.advance(); /* the next round's codes in flight while this one's are stored */
    c = load_row_codes<BITS>(words, scale, mins, at.unit, at.unit < units, r, pair_load);
    const float s = fp_bf16_bits_to_f32(now.scale), m = fp_bf16_bits_to_f32(now.min);
    const GroupDequant gd = group_dequant < BITS == 8 ? 4 : BITS > (now.scale, now.min);
    const auto chunk = [&](int j) {
      if constexpr (BITS == 8)
        return dequant_chunk8(now.lo[j], now.hi[j], s, m);
      else
        return dequant_chunk < BITS == 8 ? 4 : BITS > (now.lo[j], gd);
    };
    if constexpr (GRID) {
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const int c0 = j * Team<T>::kChunkValues + r * kLaneValues;
        if (c0 < valid) /* valid is a multiple of 8 */
          st16(out + off + c0, chunk(j));
      }
    } else {
      /* the span: from the grid chunk of team 0's start to the last group's end */
      const long long off0 = __shfl_sync(kFullMask, off, 0);
      const long long lo = off0 - ((off0 + phase) & 7);
      const int rel = (int)(off - lo), end = active ? rel + valid : 0;
      const int span_end = (int)__reduce_max_sync(kFullMask, (unsigned)end);
#pragma unroll
      for (int j = 0; j < J; ++j)
        span_store(span, rel, j * Team<T>::kChunkValues + r * kLaneValues, valid, chunk(j));
      __syncwarp();
      for (int i = wg.lane * kLaneValues; i < span_end; i += 32 * kLaneValues)
        st8_window(out, lo + i, lds16(span + i), off0, lo + span_end);
      __syncwarp(); /* read before the next round writes */
    }
  }
}

} // namespace

#endif
