/* fuseport CUDA kernels, family compress: the unfused steps (cmp_*) that
 * model eager PyTorch's decomposition of quant_pack, dequant_unpack,
 * relu_pack and relu_unpack_backward (the fused kernels: compress.cu; the
 * helpers both files use: compress_common.cuh). fp_cuda_register_compress
 * registers them through fp_cuda_register_compress_steps.
 * Semantics: kernels/kernels.def; scalar formulas: fp_device_common.h.
 * The quantisation values go through fp_quant_scale, fp_recip_rn,
 * fp_quant_code and fp_dequant_value, as in the fused kernels (compress.cu
 * says why). bfloat16 travels as its 16-bit pattern.
 *
 * The cmp_* steps are plain grid-stride loops over items of four elements
 * (fpcu::elem_flat, four items in flight), with vector accesses where the
 * pointers allow; they model separate eager kernels, not a tuned path.
 */
#include "compress_common.cuh"

namespace {

constexpr int kStepUnroll = 4; /* items in flight, cmp_* steps */

__device__ __forceinline__ bool valid_bits(int bits) {
  return bits == 1 || bits == 2 || bits == 4 || bits == 8;
}

template <bool VEC, bool MAX, int T>
__device__ __forceinline__ void group_reduce_run(float *out, const unsigned short *x, long long K,
                                                 long long C) {
  const long long G = (C + kGroup - 1) / kGroup, n = K * C;
  const int r = Team<T>::rank();
  const int phase = VEC ? 0 : phase16(x);
  team_groups<T, kPackUnroll>(
      K * G,
      [&](long long unit, bool active) {
        return load_team_values<T, VEC>(x, unit, active, C, G, r, n, phase);
      },
      [&](long long unit, bool active, const RankValues<T> &rv) {
        const MinMaxBits b = team_min_max<T>(rv);
        if (active && r == 0)
          out[unit] = __fadd_rn(fp_bf16_bits_to_f32(MAX ? b.mx : b.mn), 0.0f); /* +0 */
      });
}

} // namespace

/* ---- the unfused steps ------------------------------------------------------------ */

/* cmp_group_reduce(out, x, K, C, op)                                    TEAMS
 * op 0: min; anything else: max (as prim_reduce_rows treats its op). */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    cmp_group_reduce(float *out, const unsigned short *x, long long K, long long C, int op) {
  if (K <= 0 || C <= 0)
    return;
  const bool vec = C % kLaneValues == 0 && aligned(x, 16);
  with_team(K * ((C + kGroup - 1) / kGroup), [&](auto t) {
    constexpr int T = decltype(t)::value;
    if (op == 0) {
      if (vec)
        group_reduce_run<true, false, T>(out, x, K, C);
      else
        group_reduce_run<false, false, T>(out, x, K, C);
    } else {
      if (vec)
        group_reduce_run<true, true, T>(out, x, K, C);
      else
        group_reduce_run<false, true, T>(out, x, K, C);
    }
  });
}

/* cmp_group_scale(scale, inv, mn, mx, n, bits)                          ELEM */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    cmp_group_scale(float *scale, float *inv, const float *mn, const float *mx, long long n,
                    int bits) {
  if (!valid_bits(bits))
    return;
  for (long long i = grid_thread_index(); i < n; i += grid_thread_count()) {
    const float s = fp_quant_scale(ldro(mn + i), ldro(mx + i), bits);
    scale[i] = s;
    inv[i] = fp_recip_rn(s);
  }
}

/* cmp_quantize(codes, x, mn, inv, K, C, bits)                  ELEM over K*G*256 */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    cmp_quantize(unsigned *codes, const unsigned short *x, const float *mn, const float *inv,
                 long long K, long long C, int bits) {
  if (K <= 0 || C <= 0 || !valid_bits(bits))
    return;
  const long long G = (C + kGroup - 1) / kGroup;
  struct Quad { /* values 4v..4v+3: one group, one row */
    uint2 x;
    float mn, inv;
  };
  struct One {
    float x, mn, inv;
  };
  /* the four values of an item share a row and lie all before or all past
   * column C when C % 4 == 0 */
  const bool vec = C % 4 == 0 && aligned(x, 8) && aligned(codes, 16);
  elem_flat<kStepUnroll>(
      K * G * kGroup, vec,
      [&](long long v) {
        const long long unit = v >> 6; /* 64 items per group */
        const GroupAt at = group_at(unit, C, G);
        const int c = 4 * (int)(v & 63);
        Quad q;
        q.x = c < at.valid ? ldro(reinterpret_cast<const uint2 *>(x + at.offset + c))
                           : make_uint2(0u, 0u);
        q.mn = ldro(mn + unit);
        q.inv = ldro(inv + unit);
        return q;
      },
      [&](long long v, const Quad &q) {
        uint4 o;
        o.x = fp_quant_code(fp_bf16_bits_to_f32(q.x.x & 0xFFFFu), q.mn, q.inv, bits);
        o.y = fp_quant_code(fp_bf16_bits_to_f32(q.x.x >> 16), q.mn, q.inv, bits);
        o.z = fp_quant_code(fp_bf16_bits_to_f32(q.x.y & 0xFFFFu), q.mn, q.inv, bits);
        o.w = fp_quant_code(fp_bf16_bits_to_f32(q.x.y >> 16), q.mn, q.inv, bits);
        *reinterpret_cast<uint4 *>(codes + 4 * v) = o;
      },
      [&](long long e) {
        const long long unit = e >> 8;
        const GroupAt at = group_at(unit, C, G);
        const int c = (int)(e & (kGroup - 1));
        One o;
        o.x = c < at.valid ? fp_bf16_bits_to_f32(ldro(x + at.offset + c)) : 0.0f;
        o.mn = ldro(mn + unit);
        o.inv = ldro(inv + unit);
        return o;
      },
      [&](long long e, const One &o) { codes[e] = fp_quant_code(o.x, o.mn, o.inv, bits); });
}

/* cmp_pack_codes(words, codes, nwords, bits)                            ELEM */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    cmp_pack_codes(unsigned *words, const unsigned *codes, long long nwords, int bits) {
  const bool vec = aligned(codes, 16); /* a word's VPW (>= 4) codes start 16-byte aligned */
  with_bits(bits, [&](auto b) {
    constexpr int BITS = decltype(b)::value, VPW = 32 / BITS;
    for (long long w = grid_thread_index(); w < nwords; w += grid_thread_count()) {
      const unsigned *c = codes + w * VPW;
      unsigned word = 0;
      if (vec) {
#pragma unroll
        for (int k = 0; k < VPW / 4; ++k) {
          const uint4 q = ldro(reinterpret_cast<const uint4 *>(c) + k);
          word |= q.x << (4 * k * BITS) | q.y << ((4 * k + 1) * BITS) |
                  q.z << ((4 * k + 2) * BITS) | q.w << ((4 * k + 3) * BITS);
        }
      } else {
#pragma unroll
        for (int j = 0; j < VPW; ++j)
          word |= ldro(c + j) << (j * BITS);
      }
      words[w] = word;
    }
  });
}

/* cmp_unpack_codes(codes, words, nwords, bits)                 ELEM over nwords*VPW */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    cmp_unpack_codes(unsigned *codes, const unsigned *words, long long nwords, int bits) {
  with_bits(bits, [&](auto b) {
    constexpr int BITS = decltype(b)::value, VPW = 32 / BITS;
    constexpr unsigned kQMax = (1u << BITS) - 1u;
    /* VPW % 4 == 0: an item's four codes come from one word */
    elem_flat<kStepUnroll>(
        nwords * VPW, aligned(codes, 16),
        [&](long long v) {
          const long long e = 4 * v;
          return ldro(words + e / VPW) >> ((int)(e % VPW) * BITS);
        },
        [&](long long v, unsigned w) {
          *reinterpret_cast<uint4 *>(codes + 4 * v) = make_uint4(
              w & kQMax, (w >> BITS) & kQMax, (w >> (2 * BITS)) & kQMax, (w >> (3 * BITS)) & kQMax);
        },
        [&](long long e) { return ldro(words + e / VPW) >> ((int)(e % VPW) * BITS); },
        [&](long long e, unsigned w) { codes[e] = w & kQMax; });
  });
}

/* cmp_dequantize(out, codes, scale, min, K, C)                      ELEM over K*C */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    cmp_dequantize(unsigned short *out, const unsigned *codes, const unsigned short *scale,
                   const unsigned short *mins, long long K, long long C) {
  if (K <= 0 || C <= 0)
    return;
  const long long G = (C + kGroup - 1) / kGroup;
  struct Quad {
    uint4 q;
    float s, mn;
  };
  struct One {
    unsigned q;
    float s, mn;
  };
  /* element i = k*C + c reads code (k*G + c/256)*256 + c%256 */
  const auto code_index = [&](long long i, long long &unit) {
    const long long k = RowColCursor::quotient(i, C), c = i - k * C;
    unit = k * G + (c >> 8);
    return unit * kGroup + (c & (kGroup - 1));
  };
  /* C % 4 == 0: an item's four elements share a row and a group, and their
   * codes start 16-byte aligned */
  const bool vec = C % 4 == 0 && aligned(out, 8) && aligned(codes, 16);
  elem_flat<kStepUnroll>(
      K * C, vec,
      [&](long long v) {
        long long unit;
        const long long ci = code_index(4 * v, unit);
        Quad q;
        q.q = ldro(reinterpret_cast<const uint4 *>(codes + ci));
        q.s = fp_bf16_bits_to_f32(ldro(scale + unit));
        q.mn = fp_bf16_bits_to_f32(ldro(mins + unit));
        return q;
      },
      [&](long long v, const Quad &q) {
        const unsigned h0 = FP_FLOAT_AS_BITS(fp_dequant_value(q.q.x, q.s, q.mn)) >> 16;
        const unsigned h1 = FP_FLOAT_AS_BITS(fp_dequant_value(q.q.y, q.s, q.mn)) >> 16;
        const unsigned h2 = FP_FLOAT_AS_BITS(fp_dequant_value(q.q.z, q.s, q.mn)) >> 16;
        const unsigned h3 = FP_FLOAT_AS_BITS(fp_dequant_value(q.q.w, q.s, q.mn)) >> 16;
        *reinterpret_cast<uint2 *>(out + 4 * v) = make_uint2(h0 | h1 << 16, h2 | h3 << 16);
      },
      [&](long long i) {
        long long unit;
        const long long ci = code_index(i, unit);
        One o;
        o.q = ldro(codes + ci);
        o.s = fp_bf16_bits_to_f32(ldro(scale + unit));
        o.mn = fp_bf16_bits_to_f32(ldro(mins + unit));
        return o;
      },
      [&](long long i, const One &o) {
        out[i] = (unsigned short)(FP_FLOAT_AS_BITS(fp_dequant_value(o.q, o.s, o.mn)) >> 16);
      });
}

/* cmp_to_bf16(out, in, n)                                               ELEM */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    cmp_to_bf16(unsigned short *out, const float *in, long long n) {
  elem_flat<kStepUnroll>(
      n, aligned(in, 16) && aligned(out, 8), [&](long long v) { return ldg4(in + 4 * v); },
      [&](long long v, float4 a) {
        *reinterpret_cast<uint2 *>(out + 4 * v) =
            make_uint2(fp_f32_to_bf16_bits(a.x) | (unsigned)fp_f32_to_bf16_bits(a.y) << 16,
                       fp_f32_to_bf16_bits(a.z) | (unsigned)fp_f32_to_bf16_bits(a.w) << 16);
      },
      [&](long long i) { return ldro(in + i); },
      [&](long long i, float a) { out[i] = fp_f32_to_bf16_bits(a); });
}

/* cmp_gt_zero(mask, x, n)                                               ELEM */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    cmp_gt_zero(unsigned char *mask, const unsigned short *x, long long n) {
  elem_flat<kStepUnroll>(
      n, aligned(x, 8) && aligned(mask, 4),
      [&](long long v) { return ldro(reinterpret_cast<const uint2 *>(x + 4 * v)); },
      [&](long long v, uint2 h) { /* four bool bytes, element 4v in the lowest */
                                  *reinterpret_cast<unsigned *>(mask + 4 * v) =
                                      bf16_positive(h.x & 0xFFFFu) | bf16_positive(h.x >> 16) << 8 |
                                      bf16_positive(h.y & 0xFFFFu) << 16 |
                                      bf16_positive(h.y >> 16) << 24;
      },
      [&](long long i) { return (unsigned)ldro(x + i); },
      [&](long long i, unsigned h) { mask[i] = (unsigned char)bf16_positive(h); });
}

/* cmp_pack_bits(words, mask, K, C)                             ELEM over K*CW
 * As relu_pack, [K, C] with C % 32 == 0 goes as [1, K*C]. */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    cmp_pack_bits(unsigned *words, const unsigned char *mask, long long K, long long C) {
  if (K <= 0 || C <= 0)
    return;
  const long long rows = C % 32 == 0 ? 1 : K, cols = C % 32 == 0 ? K * C : C;
  const long long cw = (cols + 31) / 32;
  const bool vec = cols % 32 == 0 && aligned(mask, 16); /* every word's 32 bytes aligned */
  /* bit b of the result: byte b of the four words is not 0 */
  const auto bits16 = [](uint4 q) {
    unsigned r = 0;
#pragma unroll
    for (int b = 0; b < 16; ++b)
      r |= (((word_of(q, b >> 2) >> (8 * (b & 3))) & 0xFFu) != 0 ? 1u : 0u) << b;
    return r;
  };
  for (long long i = grid_thread_index(); i < rows * cw; i += grid_thread_count()) {
    unsigned word = 0;
    if (vec) { /* rows == 1: word i holds bytes 32i.. */
      const uint4 *p = reinterpret_cast<const uint4 *>(mask + 32 * i);
      const uint4 a = ldro(p), b = ldro(p + 1);
      word = bits16(a) | bits16(b) << 16;
    } else {
      const long long k = RowColCursor::quotient(i, cw), c0 = 32 * (i - k * cw);
      for (int e = 0; e < 32 && c0 + e < cols; ++e)
        if (ldro(mask + k * cols + c0 + e) != 0)
          word |= 1u << e;
    }
    words[i] = word;
  }
}

/* cmp_unpack_bits(mask, words, K, C)                                ELEM over K*C */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    cmp_unpack_bits(unsigned char *mask, const unsigned *words, long long K, long long C) {
  if (K <= 0 || C <= 0)
    return;
  const long long cw = (C + 31) / 32;
  /* bit c%32 of word k*CW + c/32 for element i = k*C + c, shifted down */
  const auto bits_from = [&](long long i) {
    const long long k = RowColCursor::quotient(i, C), c = i - k * C;
    return ldro(words + k * cw + (c >> 5)) >> (int)(c & 31);
  };
  /* C % 4 == 0: an item's four elements share a row and a word */
  elem_flat<kStepUnroll>(
      K * C, C % 4 == 0 && aligned(mask, 4), [&](long long v) { return bits_from(4 * v); },
      [&](long long v, unsigned w) { /* bits 0..3 to bytes 0..3 */
                                     *reinterpret_cast<unsigned *>(mask + 4 * v) =
                                         (w & 1u) | (w >> 1 & 1u) << 8 | (w >> 2 & 1u) << 16 |
                                         (w >> 3 & 1u) << 24;
      },
      [&](long long i) { return bits_from(i); },
      [&](long long i, unsigned w) { mask[i] = (unsigned char)(w & 1u); });
}

/* cmp_mul_mask(dx, dy, mask, n)                                         ELEM
 * The mask byte as a number (0 or 1 from cmp_unpack_bits), as the CPU's. */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    cmp_mul_mask(unsigned short *dx, const unsigned short *dy, const unsigned char *mask,
                 long long n) {
  struct Quad {
    uint2 d;
    unsigned m;
  };
  struct One {
    unsigned d, m;
  };
  elem_flat<kStepUnroll>(
      n, aligned(dx, 8) && aligned(dy, 8) && aligned(mask, 4),
      [&](long long v) {
        Quad q;
        q.d = ldro(reinterpret_cast<const uint2 *>(dy + 4 * v));
        q.m = ldro(reinterpret_cast<const unsigned *>(mask + 4 * v));
        return q;
      },
      [&](long long v, const Quad &q) {
        const unsigned r0 = masked_bits(q.d.x & 0xFFFFu, (float)(q.m & 0xFFu));
        const unsigned r1 = masked_bits(q.d.x >> 16, (float)(q.m >> 8 & 0xFFu));
        const unsigned r2 = masked_bits(q.d.y & 0xFFFFu, (float)(q.m >> 16 & 0xFFu));
        const unsigned r3 = masked_bits(q.d.y >> 16, (float)(q.m >> 24));
        *reinterpret_cast<uint2 *>(dx + 4 * v) = make_uint2(r0 | r1 << 16, r2 | r3 << 16);
      },
      [&](long long i) {
        One o;
        o.d = ldro(dy + i);
        o.m = ldro(mask + i);
        return o;
      },
      [&](long long i, const One &o) { dx[i] = (unsigned short)masked_bits(o.d, (float)o.m); });
}

extern "C" void fp_cuda_register_compress_steps(const void *table[FPK_COUNT]) {
  table[FPK_cmp_group_reduce] = reinterpret_cast<const void *>(&cmp_group_reduce);
  table[FPK_cmp_group_scale] = reinterpret_cast<const void *>(&cmp_group_scale);
  table[FPK_cmp_quantize] = reinterpret_cast<const void *>(&cmp_quantize);
  table[FPK_cmp_pack_codes] = reinterpret_cast<const void *>(&cmp_pack_codes);
  table[FPK_cmp_unpack_codes] = reinterpret_cast<const void *>(&cmp_unpack_codes);
  table[FPK_cmp_dequantize] = reinterpret_cast<const void *>(&cmp_dequantize);
  table[FPK_cmp_to_bf16] = reinterpret_cast<const void *>(&cmp_to_bf16);
  table[FPK_cmp_gt_zero] = reinterpret_cast<const void *>(&cmp_gt_zero);
  table[FPK_cmp_pack_bits] = reinterpret_cast<const void *>(&cmp_pack_bits);
  table[FPK_cmp_unpack_bits] = reinterpret_cast<const void *>(&cmp_unpack_bits);
  table[FPK_cmp_mul_mask] = reinterpret_cast<const void *>(&cmp_mul_mask);
}
