/* fuseport CPU kernels, family compress: activation compression. The
 * executable specification of kernels.def's family compress: plain loops in
 * the order the text states, the rounding rule from fp_device_common.h. */
#include "cpu_kernels.h"
#include "fp_device_common.h"

#define BF16P(args, i) ((uint16_t *)(args)[i].v.handle)
#define U32P(args, i) ((uint32_t *)(args)[i].v.handle)
#define U8P(args, i) ((uint8_t *)(args)[i].v.handle)

static float bf(uint16_t h) { return fp_bf16_bits_to_f32(h); }

/* Value v of group g of row k of x [K, C], 0 past C (the notebook's pad). */
static float group_value(const uint16_t *x, int64_t C, int64_t k, int64_t g, int64_t v) {
  const int64_t col = g * FP_QGROUP + v;
  return col < C ? bf(x[k * C + col]) : 0.0f;
}

/* quant_pack(words, scale, min, x, K, C, bits) */
static void quant_pack(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint32_t *words = U32P(args, 0);
  uint16_t *scale = BF16P(args, 1), *mins = BF16P(args, 2);
  const uint16_t *x = BF16P(args, 3);
  const int64_t K = FP_CPU_I64(args, 4), C = FP_CPU_I64(args, 5);
  const int bits = FP_CPU_I32(args, 6);
  const int64_t G = (C + FP_QGROUP - 1) / FP_QGROUP, NW = 8 * bits, vpw = 32 / bits;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t g = 0; g < G; ++g) {
      float mn = INFINITY, mx = -INFINITY;
      for (int64_t v = 0; v < FP_QGROUP; ++v) {
        const float val = group_value(x, C, k, g, v);
        mn = val < mn ? val : mn;
        mx = val > mx ? val : mx;
      }
      mn += 0.0f; /* a zero min or max is +0 (kernels.def) */
      mx += 0.0f;
      const float s = fp_quant_scale(mn, mx, bits);
      const float inv = fp_recip_rn(s);
      uint32_t *w = words + (k * G + g) * NW;
      for (int64_t i = 0; i < NW; ++i) {
        uint32_t word = 0;
        for (int64_t j = 0; j < vpw; ++j)
          word |= fp_quant_code(group_value(x, C, k, g, i * vpw + j), mn, inv, bits) << (j * bits);
        w[i] = word;
      }
      scale[k * G + g] = fp_f32_to_bf16_bits(s);
      mins[k * G + g] = fp_f32_to_bf16_bits(mn);
    }
}

/* Code of value v of group g of row k. */
static uint32_t code_at(const uint32_t *words, int64_t G, int bits, int64_t k, int64_t g,
                        int64_t v) {
  const int64_t vpw = 32 / bits;
  const uint32_t w = words[(k * G + g) * 8 * bits + v / vpw];
  return (w >> ((v % vpw) * bits)) & ((1u << bits) - 1u);
}

/* dequant_unpack(out, words, scale, min, K, C, bits) */
static void dequant_unpack(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint16_t *out = BF16P(args, 0);
  const uint32_t *words = U32P(args, 1);
  const uint16_t *scale = BF16P(args, 2), *mins = BF16P(args, 3);
  const int64_t K = FP_CPU_I64(args, 4), C = FP_CPU_I64(args, 5);
  const int bits = FP_CPU_I32(args, 6);
  const int64_t G = (C + FP_QGROUP - 1) / FP_QGROUP;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t g = c / FP_QGROUP;
      const float v = fp_dequant_value(code_at(words, G, bits, k, g, c % FP_QGROUP),
                                       bf(scale[k * G + g]), bf(mins[k * G + g]));
      out[k * C + c] = fp_f32_to_bf16_bits(v);
    }
}

/* relu_pack(y, mask, x, K, C) */
static void relu_pack(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint16_t *y = BF16P(args, 0);
  uint32_t *mask = U32P(args, 1);
  const uint16_t *x = BF16P(args, 2);
  const int64_t K = FP_CPU_I64(args, 3), C = FP_CPU_I64(args, 4), CW = (C + 31) / 32;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t w = 0; w < CW; ++w) {
      uint32_t word = 0;
      for (int64_t j = 0; j < 32 && 32 * w + j < C; ++j) {
        const int64_t i = k * C + 32 * w + j;
        const float v = bf(x[i]);
        y[i] = v > 0.0f || v != v ? x[i] : 0; /* relu; NaN stays NaN; -0 and negatives: +0 */
        word |= (uint32_t)(v > 0.0f) << j;
      }
      mask[k * CW + w] = word;
    }
}

/* relu_unpack_backward(dx, dy, mask, K, C) */
static void relu_unpack_backward(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint16_t *dx = BF16P(args, 0);
  const uint16_t *dy = BF16P(args, 1);
  const uint32_t *mask = U32P(args, 2);
  const int64_t K = FP_CPU_I64(args, 3), C = FP_CPU_I64(args, 4), CW = (C + 31) / 32;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) {
      const float m = (float)((mask[k * CW + c / 32] >> (c % 32)) & 1u);
      dx[k * C + c] = fp_f32_to_bf16_bits(bf(dy[k * C + c]) * m);
    }
}

/* ---- the unfused steps -------------------------------------------------------------- */

/* cmp_group_reduce(out, x, K, C, op): op 0 min, 1 max */
static void cmp_group_reduce(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *out = FP_CPU_F32P(args, 0);
  const uint16_t *x = BF16P(args, 1);
  const int64_t K = FP_CPU_I64(args, 2), C = FP_CPU_I64(args, 3);
  const int op = FP_CPU_I32(args, 4);
  const int64_t G = (C + FP_QGROUP - 1) / FP_QGROUP;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t g = 0; g < G; ++g) {
      float r = op == 0 ? INFINITY : -INFINITY;
      for (int64_t v = 0; v < FP_QGROUP; ++v) {
        const float val = group_value(x, C, k, g, v);
        r = op == 0 ? (val < r ? val : r) : (val > r ? val : r);
      }
      out[k * G + g] = r + 0.0f; /* a zero is +0 (kernels.def) */
    }
}

/* cmp_group_scale(scale, inv, mn, mx, n, bits) */
static void cmp_group_scale(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  float *scale = FP_CPU_F32P(args, 0), *inv = FP_CPU_F32P(args, 1);
  const float *mn = FP_CPU_F32P(args, 2), *mx = FP_CPU_F32P(args, 3);
  const int64_t n = FP_CPU_I64(args, 4);
  const int bits = FP_CPU_I32(args, 5);
  for (int64_t i = 0; i < n; ++i) {
    scale[i] = fp_quant_scale(mn[i], mx[i], bits);
    inv[i] = fp_recip_rn(scale[i]);
  }
}

/* cmp_quantize(codes, x, mn, inv, K, C, bits) */
static void cmp_quantize(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint32_t *codes = U32P(args, 0);
  const uint16_t *x = BF16P(args, 1);
  const float *mn = FP_CPU_F32P(args, 2), *inv = FP_CPU_F32P(args, 3);
  const int64_t K = FP_CPU_I64(args, 4), C = FP_CPU_I64(args, 5);
  const int bits = FP_CPU_I32(args, 6);
  const int64_t G = (C + FP_QGROUP - 1) / FP_QGROUP;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t v = 0; v < FP_QGROUP; ++v)
        codes[(k * G + g) * FP_QGROUP + v] =
            fp_quant_code(group_value(x, C, k, g, v), mn[k * G + g], inv[k * G + g], bits);
}

/* cmp_pack_codes(words, codes, nwords, bits) */
static void cmp_pack_codes(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint32_t *words = U32P(args, 0);
  const uint32_t *codes = U32P(args, 1);
  const int64_t nwords = FP_CPU_I64(args, 2);
  const int bits = FP_CPU_I32(args, 3), vpw = 32 / bits;
  for (int64_t w = 0; w < nwords; ++w) {
    uint32_t word = 0;
    for (int j = 0; j < vpw; ++j)
      word |= codes[w * vpw + j] << (j * bits);
    words[w] = word;
  }
}

/* cmp_unpack_codes(codes, words, nwords, bits) */
static void cmp_unpack_codes(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint32_t *codes = U32P(args, 0);
  const uint32_t *words = U32P(args, 1);
  const int64_t nwords = FP_CPU_I64(args, 2);
  const int bits = FP_CPU_I32(args, 3), vpw = 32 / bits;
  for (int64_t i = 0; i < nwords * vpw; ++i)
    codes[i] = (words[i / vpw] >> ((i % vpw) * bits)) & ((1u << bits) - 1u);
}

/* cmp_dequantize(out, codes, scale, min, K, C) */
static void cmp_dequantize(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint16_t *out = BF16P(args, 0);
  const uint32_t *codes = U32P(args, 1);
  const uint16_t *scale = BF16P(args, 2), *mins = BF16P(args, 3);
  const int64_t K = FP_CPU_I64(args, 4), C = FP_CPU_I64(args, 5);
  const int64_t G = (C + FP_QGROUP - 1) / FP_QGROUP;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t g = c / FP_QGROUP;
      out[k * C + c] =
          fp_f32_to_bf16_bits(fp_dequant_value(codes[(k * G + g) * FP_QGROUP + c % FP_QGROUP],
                                               bf(scale[k * G + g]), bf(mins[k * G + g])));
    }
}

/* cmp_to_bf16(out, in, n) */
static void cmp_to_bf16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint16_t *out = BF16P(args, 0);
  const float *in = FP_CPU_F32P(args, 1);
  const int64_t n = FP_CPU_I64(args, 2);
  for (int64_t i = 0; i < n; ++i)
    out[i] = fp_f32_to_bf16_bits(in[i]);
}

/* cmp_gt_zero(mask, x, n) */
static void cmp_gt_zero(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint8_t *mask = U8P(args, 0);
  const uint16_t *x = BF16P(args, 1);
  const int64_t n = FP_CPU_I64(args, 2);
  for (int64_t i = 0; i < n; ++i)
    mask[i] = bf(x[i]) > 0.0f;
}

/* cmp_pack_bits(words, mask, K, C) */
static void cmp_pack_bits(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint32_t *words = U32P(args, 0);
  const uint8_t *mask = U8P(args, 1);
  const int64_t K = FP_CPU_I64(args, 2), C = FP_CPU_I64(args, 3), CW = (C + 31) / 32;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t w = 0; w < CW; ++w) {
      uint32_t word = 0;
      for (int64_t j = 0; j < 32 && 32 * w + j < C; ++j)
        word |= (uint32_t)(mask[k * C + 32 * w + j] != 0) << j;
      words[k * CW + w] = word;
    }
}

/* cmp_unpack_bits(mask, words, K, C) */
static void cmp_unpack_bits(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint8_t *mask = U8P(args, 0);
  const uint32_t *words = U32P(args, 1);
  const int64_t K = FP_CPU_I64(args, 2), C = FP_CPU_I64(args, 3), CW = (C + 31) / 32;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      mask[k * C + c] = (uint8_t)((words[k * CW + c / 32] >> (c % 32)) & 1u);
}

/* cmp_mul_mask(dx, dy, mask, n) */
static void cmp_mul_mask(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  uint16_t *dx = BF16P(args, 0);
  const uint16_t *dy = BF16P(args, 1);
  const uint8_t *mask = U8P(args, 2);
  const int64_t n = FP_CPU_I64(args, 3);
  for (int64_t i = 0; i < n; ++i)
    dx[i] = fp_f32_to_bf16_bits(bf(dy[i]) * (float)mask[i]);
}

void fp_cpu_register_compress(fp_cpu_kernel_fn table[FPK_COUNT]) {
  table[FPK_quant_pack] = quant_pack;
  table[FPK_dequant_unpack] = dequant_unpack;
  table[FPK_relu_pack] = relu_pack;
  table[FPK_relu_unpack_backward] = relu_unpack_backward;
  table[FPK_cmp_group_reduce] = cmp_group_reduce;
  table[FPK_cmp_group_scale] = cmp_group_scale;
  table[FPK_cmp_quantize] = cmp_quantize;
  table[FPK_cmp_pack_codes] = cmp_pack_codes;
  table[FPK_cmp_unpack_codes] = cmp_unpack_codes;
  table[FPK_cmp_dequantize] = cmp_dequantize;
  table[FPK_cmp_to_bf16] = cmp_to_bf16;
  table[FPK_cmp_gt_zero] = cmp_gt_zero;
  table[FPK_cmp_pack_bits] = cmp_pack_bits;
  table[FPK_cmp_unpack_bits] = cmp_unpack_bits;
  table[FPK_cmp_mul_mask] = cmp_mul_mask;
}
