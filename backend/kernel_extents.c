/* fuseport backend layer: how many elements each buffer argument of a kernel
 * launch must hold, from the launch's scalar arguments and the kernel's rule
 * in kernels.def. fp_launch compares them with the buffers' sizes, so that a
 * too-small buffer is an error value rather than a write past its end. The
 * switch has no default: a kernel added to kernels.def without a rule here
 * is a compiler warning (-Wswitch), which -Werror makes an error. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend_impl.h"
#include "fp_device_common.h"

/* The arithmetic of one launch's extents: any negative size or overflowing
 * product is remembered and reported once, naming the first argument. */
typedef struct extent_calc {
  const fp_arg *args;
  int nargs;
  int bad_arg;     /* first scalar argument found negative, or -1 */
  bool overflow;   /* a product or sum left int64 */
  bool bad_stride; /* a view reaches below element 0 */
  int bad_bits;    /* a code width argument not 1, 2, 4 or 8, or -1 */
} extent_calc;

static int64_t add_ck(extent_calc *c, int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_add_overflow(x, y, &r)) {
    c->overflow = true;
    return 0;
  }
  return r;
}

static int64_t mul_ck(extent_calc *c, int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_mul_overflow(x, y, &r)) {
    c->overflow = true;
    return 0;
  }
  return r;
}

/* Scalar argument a as a count: int64 or int32, never negative. */
static int64_t count(extent_calc *c, int a) {
  if (a >= c->nargs)
    return 0;
  const fp_arg *g = &c->args[a];
  const int64_t v = g->kind == FP_ARG_I64   ? g->v.i64
                    : g->kind == FP_ARG_I32 ? g->v.i32
                    : g->kind == FP_ARG_U32 ? (int64_t)g->v.u32
                                            : 0;
  if (v < 0 && c->bad_arg < 0)
    c->bad_arg = a;
  return v < 0 ? 0 : v;
}

/* Scalar argument a as it is (a stride or an offset: may be negative). */
static int64_t signed_arg(const extent_calc *c, int a) {
  if (a >= c->nargs)
    return 0;
  const fp_arg *g = &c->args[a];
  return g->kind == FP_ARG_I64 ? g->v.i64 : g->kind == FP_ARG_I32 ? g->v.i32 : 0;
}

static int32_t int_arg(const extent_calc *c, int a) {
  return a < c->nargs && c->args[a].kind == FP_ARG_I32 ? c->args[a].v.i32 : 0;
}

static int64_t prod(extent_calc *c, int64_t x, int64_t y) { return mul_ck(c, x, y); }
static int64_t prod3(extent_calc *c, int64_t x, int64_t y, int64_t z) {
  return mul_ck(c, mul_ck(c, x, y), z);
}

/* Elements a strided [rows, cols] view at `offset` reaches: one past its
 * highest element (0 when it is empty); below element 0 is an error. */
static int64_t view(extent_calc *c, int64_t offset, int64_t rows, int64_t cols, int64_t s0,
                    int64_t s1) {
  if (rows <= 0 || cols <= 0)
    return 0;
  const int64_t r0 = mul_ck(c, rows - 1, s0), r1 = mul_ck(c, cols - 1, s1);
  const int64_t lo = add_ck(c, add_ck(c, offset, r0 < 0 ? r0 : 0), r1 < 0 ? r1 : 0);
  const int64_t hi = add_ck(c, add_ck(c, offset, r0 > 0 ? r0 : 0), r1 > 0 ? r1 : 0);
  if (lo < 0)
    c->bad_stride = true;
  return add_ck(c, hi, 1);
}

/* A row-major [rows, cols] operand with leading dimension ld (>= cols). */
static int64_t lead(extent_calc *c, int64_t rows, int64_t cols, int64_t ld) {
  return view(c, 0, rows, cols, ld, 1);
}

/* Compression layout (kernels.def, family compress). */
static int64_t groups_of(int64_t cols) { return (cols + 255) / 256; }
static int64_t mask_words_of(int64_t cols) { return (cols + 31) / 32; }
/* The code width argument: 1, 2, 4 or 8 (the kernels have no other; the
 * launch is refused), else remembered and taken as 8. */
static int32_t code_bits(extent_calc *c, int bits_arg) {
  const int32_t bits = int_arg(c, bits_arg);
  if (bits == 1 || bits == 2 || bits == 4 || bits == 8)
    return bits;
  if (c->bad_bits < 0)
    c->bad_bits = bits_arg;
  return 8;
}
static int64_t words_per_group(extent_calc *c, int bits_arg) { return 8 * code_bits(c, bits_arg); }
static int64_t values_per_word(extent_calc *c, int bits_arg) { return 32 / code_bits(c, bits_arg); }

/* need[a]: elements that buffer argument a must hold (0: nothing required);
 * must[a]: an optional (upper-case) buffer that this launch reads or writes,
 * so none is an error. A negative size or an overflow is left in c. */
static void kernel_extents(fp_kernel_id id, extent_calc *c, int64_t *need, bool *must) {
  switch (id) {
  case FPK_fill_uniform_f32:
  case FPK_fill_uniform_f16:
  case FPK_fill_uniform_bf16:
  case FPK_fill_bits_u32:
  case FPK_fill_bits_u8:
    need[0] = count(c, 1);
    break;
  case FPK_prim_unary:
  case FPK_prim_unary_f16:
  case FPK_prim_unary_bf16: { /* out, a, op, alpha, beta, M, N, so0, so1, sa0, sa1, oo, oa */
    const int64_t M = count(c, 5), N = count(c, 6);
    need[0] = view(c, signed_arg(c, 11), M, N, signed_arg(c, 7), signed_arg(c, 8));
    need[1] = view(c, signed_arg(c, 12), M, N, signed_arg(c, 9), signed_arg(c, 10));
    break;
  }
  case FPK_prim_binary:
  case FPK_prim_binary_f16:
  case FPK_prim_binary_bf16: { /* out, a, b, op, M, N, so0, so1, sa0, sa1, sb0, sb1, oo, oa, ob */
    const int64_t M = count(c, 4), N = count(c, 5);
    need[0] = view(c, signed_arg(c, 12), M, N, signed_arg(c, 6), signed_arg(c, 7));
    need[1] = view(c, signed_arg(c, 13), M, N, signed_arg(c, 8), signed_arg(c, 9));
    need[2] = view(c, signed_arg(c, 14), M, N, signed_arg(c, 10), signed_arg(c, 11));
    break;
  }
  case FPK_prim_pad_rows_f16:
  case FPK_prim_pad_rows_bf16: { /* out, in, rows, cols, ld_out */
    const int64_t rows = count(c, 2), cols = count(c, 3);
    need[0] = prod(c, rows, count(c, 4));
    need[1] = prod(c, rows, cols);
    break;
  }
  case FPK_prim_channel:
  case FPK_prim_channel_f16:
  case FPK_prim_channel_bf16: { /* out, a, v0, v1, v2, v3, op, total, inner, K, eps */
    const int64_t total = count(c, 7), K = count(c, 9);
    need[0] = need[1] = total;
    need[2] = K;
    must[2] = true;
    if (int_arg(c, 6) == FP_CHAN_BN)
      for (int a = 3; a <= 5; ++a) {
        need[a] = K;
        must[a] = true;
      }
    break;
  }
  case FPK_prim_reduce_rows: { /* out, a, op, M, N, sa0, sa1 */
    const int64_t M = count(c, 3), N = count(c, 4);
    need[0] = M;
    need[1] = view(c, 0, M, N, signed_arg(c, 5), signed_arg(c, 6));
    break;
  }
  case FPK_prim_dropout: { /* out, a, M, N, so0, so1, sa0, sa1, p, scale, seed, training */
    const int64_t M = count(c, 2), N = count(c, 3);
    need[0] = view(c, 0, M, N, signed_arg(c, 4), signed_arg(c, 5));
    need[1] = view(c, 0, M, N, signed_arg(c, 6), signed_arg(c, 7));
    break;
  }
  case FPK_pointwise_chain_fused: /* out, x, n */
    need[0] = need[1] = count(c, 2);
    break;
  case FPK_bias_gelu_fused: { /* out, inp, bias, M, N */
    const int64_t M = count(c, 3), N = count(c, 4);
    need[0] = need[1] = prod(c, M, N);
    need[2] = N;
    break;
  }
  case FPK_bias_dropout_add_fused:
  case FPK_bias_dropout_add_fused_t: {
    /* out, inp, bias, res, M, N, sb0, sb1, sr0, sr1, so0, so1, p, scale, seed, training */
    const int64_t M = count(c, 4), N = count(c, 5);
    need[1] = prod(c, M, N);
    need[2] = view(c, 0, M, N, signed_arg(c, 6), signed_arg(c, 7));
    need[3] = view(c, 0, M, N, signed_arg(c, 8), signed_arg(c, 9));
    need[0] = view(c, 0, M, N, signed_arg(c, 10), signed_arg(c, 11));
    break;
  }
  case FPK_softmax_fused:
  case FPK_double_softmax_fused:
  case FPK_norm_chain_fused: /* out, x, M, N */
    need[0] = need[1] = prod(c, count(c, 2), count(c, 3));
    break;
  case FPK_softmax_backward_fused: /* grad_in, grad_out, y, M, N */
    need[0] = need[1] = need[2] = prod(c, count(c, 3), count(c, 4));
    break;
  case FPK_layernorm_fused: { /* out, mean, rstd, x, w, b, M, N, eps */
    const int64_t M = count(c, 6), N = count(c, 7);
    need[0] = need[3] = prod(c, M, N);
    need[1] = need[2] = M;
    need[4] = need[5] = N;
    break;
  }
  case FPK_hreduce_pointwise_fused: { /* sum, cosx, a, M, N */
    const int64_t M = count(c, 3), N = count(c, 4);
    need[0] = M;
    need[1] = need[2] = prod(c, M, N);
    break;
  }
  case FPK_hreduce_reduce_fused: { /* sum, amax, a, M, N */
    const int64_t M = count(c, 3), N = count(c, 4);
    need[0] = need[1] = M;
    need[2] = prod(c, M, N);
    break;
  }
  case FPK_gemm_f32:
  case FPK_gemm_f16:
  case FPK_gemm_bf16: { /* out, a, b, bias, add, ws, M, N, K, lda, ldb, epilogue, trans_b */
    const int64_t M = count(c, 6), N = count(c, 7), K = count(c, 8);
    const int64_t lda = count(c, 9), ldb = count(c, 10);
    const int32_t epi = int_arg(c, 11);
    const int64_t cols_b = FP_EPI_PAIRED(epi) ? prod(c, 2, N) : N;
    need[0] = prod(c, M, N);
    need[1] = lead(c, M, K, lda);
    need[2] = int_arg(c, 12) ? lead(c, cols_b, K, ldb) : lead(c, K, cols_b, ldb);
    if (FP_EPI_READS_BIAS(epi)) {
      need[3] = epi == FP_EPI_GEGLU ? prod(c, 2, N) : N;
      must[3] = true;
    }
    if (FP_EPI_READS_ADD(epi)) {
      need[4] = prod(c, M, N);
      must[4] = true;
    }
    break; /* ws: sized by the backend's own planner, which checks it */
  }
  case FPK_gemm2_f32:
  case FPK_gemm2_f16:
  case FPK_gemm2_bf16: { /* out, a, b, d, ws, M, N, K, P, lda, ldb, ldd, trans_b */
    const int64_t M = count(c, 5), N = count(c, 6), K = count(c, 7), P = count(c, 8);
    need[0] = prod(c, M, P);
    need[1] = lead(c, M, K, count(c, 9));
    need[2] = int_arg(c, 12) ? lead(c, N, K, count(c, 10)) : lead(c, K, N, count(c, 10));
    need[3] = lead(c, N, P, count(c, 11));
    break;
  }
  case FPK_dw_packed_f32:
  case FPK_dw_packed_bf16: { /* out, dy, words, scale, min, ws, K, COUT, CIN, bits, lddy */
    const int64_t K = count(c, 6), COUT = count(c, 7), CIN = count(c, 8);
    const int64_t kg = prod(c, K, groups_of(CIN));
    need[0] = prod(c, COUT, CIN);
    need[1] = lead(c, K, COUT, count(c, 10));
    need[2] = prod(c, kg, words_per_group(c, 9));
    need[3] = need[4] = kg;
    break;
  }
  case FPK_quant_pack:       /* words, scale, min, x, K, C, bits */
  case FPK_dequant_unpack: { /* out, words, scale, min, K, C, bits */
    const int64_t K = count(c, 4), C = count(c, 5);
    const int64_t kg = prod(c, K, groups_of(C));
    const int w = id == FPK_quant_pack ? 0 : 1;
    need[w] = prod(c, kg, words_per_group(c, 6));
    need[w + 1] = need[w + 2] = kg;
    need[id == FPK_quant_pack ? 3 : 0] = prod(c, K, C);
    break;
  }
  case FPK_relu_pack:              /* y, mask, x, K, C */
  case FPK_relu_unpack_backward: { /* dx, dy, mask, K, C */
    const int64_t K = count(c, 3), C = count(c, 4);
    const int m = id == FPK_relu_pack ? 1 : 2;
    for (int a = 0; a < 3; ++a)
      need[a] = a == m ? prod(c, K, mask_words_of(C)) : prod(c, K, C);
    break;
  }
  case FPK_cmp_group_reduce: { /* out, x, K, C, op */
    const int64_t K = count(c, 2), C = count(c, 3);
    need[0] = prod(c, K, groups_of(C));
    need[1] = prod(c, K, C);
    break;
  }
  case FPK_cmp_group_scale: /* scale, inv, mn, mx, n, bits */
    need[0] = need[1] = need[2] = need[3] = count(c, 4);
    break;
  case FPK_cmp_quantize: { /* codes, x, mn, inv, K, C, bits */
    const int64_t K = count(c, 4), C = count(c, 5);
    const int64_t kg = prod(c, K, groups_of(C));
    need[0] = prod(c, kg, 256);
    need[1] = prod(c, K, C);
    need[2] = need[3] = kg;
    break;
  }
  case FPK_cmp_pack_codes: /* words, codes, nwords, bits */
  case FPK_cmp_unpack_codes: /* codes, words, nwords, bits */ {
    const int64_t words = count(c, 2), codes = prod(c, words, values_per_word(c, 3));
    need[0] = id == FPK_cmp_pack_codes ? words : codes;
    need[1] = id == FPK_cmp_pack_codes ? codes : words;
    break;
  }
  case FPK_cmp_dequantize: { /* out, codes, scale, min, K, C */
    const int64_t K = count(c, 4), C = count(c, 5);
    const int64_t kg = prod(c, K, groups_of(C));
    need[0] = prod(c, K, C);
    need[1] = prod(c, kg, 256);
    need[2] = need[3] = kg;
    break;
  }
  case FPK_cmp_to_bf16: /* out, in, n */
  case FPK_cmp_gt_zero: /* mask, x, n */
    need[0] = need[1] = count(c, 2);
    break;
  case FPK_cmp_mul_mask: /* dx, dy, mask, n */
    need[0] = need[1] = need[2] = count(c, 3);
    break;
  case FPK_cmp_pack_bits: /* words, mask, K, C */
  case FPK_cmp_unpack_bits: /* mask, words, K, C */ {
    const int64_t K = count(c, 2), C = count(c, 3);
    const int w = id == FPK_cmp_pack_bits ? 0 : 1;
    need[w] = prod(c, K, mask_words_of(C));
    need[1 - w] = prod(c, K, C);
    break;
  }
  case FPK_conv_f32:
  case FPK_conv_f16:
  case FPK_conv_bf16: {
    /* out, x, w, v0, v1, v2, v3, N, C, H, W, K, R, S, P, Q, stride, pad, dil, nhwc, epi, eps,
     * ws (sized by the backend's own planner) */
    const int64_t N = count(c, 7), C = count(c, 8), H = count(c, 9), W = count(c, 10);
    const int64_t K = count(c, 11), R = count(c, 12), S = count(c, 13);
    const int64_t P = count(c, 14), Q = count(c, 15);
    const int32_t epi = int_arg(c, 20);
    need[0] = prod(c, prod(c, N, K), prod(c, P, Q));
    need[1] = prod(c, prod(c, N, C), prod(c, H, W));
    need[2] = prod(c, prod(c, K, C), prod(c, R, S));
    if (FP_EPI_READS_BIAS(epi) || epi == FP_CONV_EPI_BN) {
      need[3] = K;
      must[3] = true;
    } else if (FP_EPI_READS_ADD(epi)) {
      need[3] = need[0];
      must[3] = true;
    }
    if (epi == FP_CONV_EPI_BN)
      for (int a = 4; a <= 6; ++a) {
        need[a] = K;
        must[a] = true;
      }
    break;
  }
  case FPK_im2col_f32:
  case FPK_im2col_f16:
  case FPK_im2col_bf16: { /* col, x, N, C, H, W, R, S, P, Q, stride, pad, dil, nhwc */
    const int64_t N = count(c, 2), C = count(c, 3), H = count(c, 4), W = count(c, 5);
    const int64_t R = count(c, 6), S = count(c, 7), P = count(c, 8), Q = count(c, 9);
    need[0] = prod(c, prod3(c, N, P, Q), prod3(c, C, R, S));
    need[1] = prod(c, prod(c, N, C), prod(c, H, W));
    break;
  }
  case FPK_attention_f32:
  case FPK_attention_f16:
  case FPK_attention_bf16: {
    /* out, lse, q, k, v, opart, lpart, B, H, S, SK, D, causal, scale, splits */
    const int64_t B = count(c, 7), H = count(c, 8), S = count(c, 9), SK = count(c, 10);
    const int64_t D = count(c, 11), splits = count(c, 14);
    const int64_t R = prod3(c, B, H, S);
    need[2] = prod(c, R, D);
    need[3] = need[4] = prod(c, prod3(c, B, H, SK), D);
    if (splits <= 1) {
      need[0] = prod(c, R, D);
      need[1] = R;
      must[0] = must[1] = true;
    } else {
      need[5] = prod3(c, splits, R, D);
      need[6] = prod(c, splits, R);
      must[5] = must[6] = true;
    }
    break;
  }
  case FPK_attention_combine_f32:
  case FPK_attention_combine_f16:
  case FPK_attention_combine_bf16: { /* out, lse, opart, lpart, R, D, splits */
    const int64_t R = count(c, 4), D = count(c, 5), splits = count(c, 6);
    need[0] = prod(c, R, D);
    need[1] = R;
    need[2] = prod3(c, splits, R, D);
    need[3] = prod(c, splits, R);
    break;
  }
  case FPK_attn_softmax_f32:
  case FPK_attn_softmax_f16:
  case FPK_attn_softmax_bf16: { /* p, lse, s, R, S, SK, causal */
    const int64_t R = count(c, 3), SK = count(c, 5);
    need[0] = need[2] = prod(c, R, SK);
    need[1] = R;
    (void)count(c, 4); /* S only picks the mask's rows: never negative either */
    break;
  }
  case FPK_COUNT:
    break;
  }
}

static size_t arg_elem_bytes(fp_arg_kind kind) {
  switch (kind) {
  case FP_ARG_BUF_F16:
  case FP_ARG_BUF_BF16:
    return 2;
  case FP_ARG_BUF_U8:
    return 1;
  default:
    return 4;
  }
}

fp_status fp_check_kernel_extents(fp_context *ctx, fp_kernel_id id, const fp_arg *args, int nargs) {
  int64_t need[FP_MAX_KERNEL_ARGS];
  bool must[FP_MAX_KERNEL_ARGS];
  memset(need, 0, sizeof need);
  memset(must, 0, sizeof must);
  extent_calc calc = {args, nargs, -1, false, false, -1};
  kernel_extents(id, &calc, need, must);
  const char *name = fp_kernel_name(id);
  if (calc.bad_arg >= 0)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "launch of '%s': argument %d is a size and negative", name, calc.bad_arg);
  if (calc.overflow)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "launch of '%s': the sizes its arguments imply overflow 64-bit integers",
                        name);
  if (calc.bad_stride)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "launch of '%s': a strided view reaches below its buffer's first element",
                        name);
  if (calc.bad_bits >= 0)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "launch of '%s': argument %d is bits=%d, expected 1, 2, 4 or 8", name,
                        calc.bad_bits, (int)int_arg(&calc, calc.bad_bits));
  for (int a = 0; a < nargs && a < FP_MAX_KERNEL_ARGS; ++a) {
    if (!fp_arg_kind_is_buffer(args[a].kind))
      continue;
    const fp_buffer *buf = args[a].v.buf;
    if (buf == NULL) {
      if (must[a])
        return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                            "launch of '%s': argument %d is none, but this launch uses it (%lld "
                            "elements)",
                            name, a, (long long)need[a]);
      continue;
    }
    const uint64_t elem = arg_elem_bytes(args[a].kind);
    if ((uint64_t)need[a] > UINT64_MAX / elem || (uint64_t)need[a] * elem > fp_buffer_size(buf))
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "launch of '%s': argument %d holds %llu bytes, the launch reaches %lld "
                          "elements of %llu bytes",
                          name, a, (unsigned long long)fp_buffer_size(buf), (long long)need[a],
                          (unsigned long long)elem);
  }
  return FP_OK;
}
