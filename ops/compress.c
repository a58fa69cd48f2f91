/* fuseport operators, family compress (SPEC.md, "Activation compression";
 * the compression notebook): group-wise 1/2/4/8-bit packing of bfloat16
 * activations, ReLU masks of one bit per value, and the weight gradient
 * computed straight from the packed activations.
 *
 * Layout and rounding: kernels.def, family compress. Packing is bit-exact:
 * every backend evaluates the notebook's rule as the same IEEE float32 steps
 * (fp_device_common.h), so the check wants the very words, scales and mins
 * of the reference, and dequantised values equal to the last bit.
 *
 * Variants:
 *   fused    one kernel (quant_pack, dequant_unpack, relu_pack,
 *            relu_unpack_backward); dw_from_packed dequantises in the GEMM's
 *            operand loader (dw_packed_<dt>: x' is never written), split
 *            over K so a 768 x 768 gradient fills the GPU.
 *   unfused  the notebook's decomposition as eager PyTorch runs it, one
 *            kernel per step (group min, group max, scale, quantise, pack,
 *            casts), intermediates in device memory; dw_from_packed writes
 *            x' with dequant_unpack and calls the backend's GEMM library
 *            (cuBLAS, the CPU GEMM; CLBlast has no bfloat16).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp_device_common.h"
#include "gemm_plan.h"
#include "ops_internal.h"

/* Parameter indices: the pack ops (K, C, bits) and dw_from_packed. */
enum { CP_K = 0, CP_C, CP_BITS };
enum { DW_K = 0, DW_CIN, DW_COUT, DW_BITS, DW_DTYPE };

static const char *const dw_dtype_choices[] = {"f32", "bf16", NULL};
/* bits is a choice (its value the index: bits = 1 << index), so `check`
 * runs every width unless --param fixes one. */
static const char *const bits_choices[] = {"1", "2", "4", "8", NULL};

typedef enum cp_kind {
  KIND_QUANT,
  KIND_DEQUANT,
  KIND_RELU_PACK,
  KIND_RELU_UNPACK,
  KIND_DW
} cp_kind;

/* A problem of the family, decoded. */
typedef struct cp_problem {
  cp_kind kind;
  int64_t K, C; /* x [K, C] (dw: C = CIN) */
  int64_t COUT; /* dw only */
  int bits;
  int64_t G;          /* groups per row: ceil(C / 256) */
  int64_t NW;         /* words per group: 8 * bits */
  int64_t CW;         /* mask words per row: ceil(C / 32) */
  fp_dtype out_dtype; /* dw: f32 or bf16 */
} cp_problem;

static cp_problem cp_of(const fp_problem *p) {
  cp_problem c;
  memset(&c, 0, sizeof c);
  const fp_op *op = p->op;
  if (fp_is_op(op, &fp_op_dw_from_packed)) {
    c.kind = KIND_DW;
    c.K = P_INT(p, DW_K);
    c.C = P_INT(p, DW_CIN);
    c.COUT = P_INT(p, DW_COUT);
    c.bits = 1 << P_INT(p, DW_BITS);
    c.out_dtype = P_INT(p, DW_DTYPE) == 1 ? FP_BF16 : FP_F32;
  } else {
    c.K = P_INT(p, CP_K);
    c.C = P_INT(p, CP_C);
    c.kind = fp_is_op(op, &fp_op_quant_pack)       ? KIND_QUANT
             : fp_is_op(op, &fp_op_dequant_unpack) ? KIND_DEQUANT
             : fp_is_op(op, &fp_op_relu_pack)      ? KIND_RELU_PACK
                                                   : KIND_RELU_UNPACK;
    c.bits = (c.kind == KIND_QUANT || c.kind == KIND_DEQUANT) ? 1 << P_INT(p, CP_BITS) : 1;
  }
  c.G = (c.C + FP_QGROUP - 1) / FP_QGROUP;
  c.NW = 8 * (int64_t)c.bits;
  c.CW = (c.C + 31) / 32;
  return c;
}

static bool has_bits_param(cp_kind kind) {
  return kind == KIND_QUANT || kind == KIND_DEQUANT || kind == KIND_DW;
}

/* ---- validation and tensors ------------------------------------------------------- */

static fp_status cp_validate(const fp_problem *p) {
  const cp_problem c = cp_of(p);
  if (has_bits_param(c.kind) && c.bits != 1 && c.bits != 2 && c.bits != 4 && c.bits != 8)
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "op %s: bits=%d; packing takes 1, 2, 4 or 8 bits per value (32 / bits "
                    "values to a 32-bit word)",
                    p->op->name, c.bits);
  /* every tensor's element count (x padded to whole groups, as the
   * unfused codes are) inside int64 byte counts */
  const double limit = (double)(INT64_MAX / 16);
  const double padded = (double)c.K * (double)c.G * FP_QGROUP;
  const double sizes[] = {(double)c.K * (double)c.C, padded, (double)c.K * (double)c.COUT,
                          (double)c.COUT * (double)c.C};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k)
    if (sizes[k] > limit)
      return fp_error(FP_ERR_INVALID_ARGUMENT,
                      "op %s: a tensor of K=%lld C=%lld%s has %.4g elements; byte counts would "
                      "overflow",
                      p->op->name, (long long)c.K, (long long)c.C, c.kind == KIND_DW ? " COUT" : "",
                      sizes[k]);
  return FP_OK;
}

static void packed_tensors(const cp_problem *c, fp_tensor_desc *words, fp_tensor_desc *scale,
                           fp_tensor_desc *mins) {
  fp_tensor_2d(words, "words", c->K, c->G * c->NW);
  words->dtype = FP_U32;
  fp_tensor_2d(scale, "scale", c->K, c->G);
  scale->dtype = FP_BF16;
  fp_tensor_2d(mins, "min", c->K, c->G);
  mins->dtype = FP_BF16;
}

/* Random packed inputs: any bits, a positive scale of 2^-bits at most and
 * a min in [-1, 1), so that x' = q * scale + min stays in [-1, 2). */
static void packed_inputs(const cp_problem *c, fp_tensor_desc *in) {
  packed_tensors(c, &in[0], &in[1], &in[2]);
  in[1].fill_scale = ldexpf(1.0f, -c->bits);
  in[1].fill_positive = true;
}

static void cp_describe(const fp_problem *p, fp_io_desc *io) {
  const cp_problem c = cp_of(p);
  memset(io, 0, sizeof *io);
  switch (c.kind) {
  case KIND_QUANT:
    io->n_in = 1;
    io->n_out = 3;
    fp_tensor_2d(&io->in[0], "x", c.K, c.C);
    io->in[0].dtype = FP_BF16;
    packed_tensors(&c, &io->out[0], &io->out[1], &io->out[2]);
    break;
  case KIND_DEQUANT:
    io->n_in = 3;
    io->n_out = 1;
    packed_inputs(&c, io->in);
    fp_tensor_2d(&io->out[0], "out", c.K, c.C);
    io->out[0].dtype = FP_BF16;
    break;
  case KIND_RELU_PACK:
    io->n_in = 1;
    io->n_out = 2;
    fp_tensor_2d(&io->in[0], "x", c.K, c.C);
    io->in[0].dtype = FP_BF16;
    fp_tensor_2d(&io->out[0], "y", c.K, c.C);
    io->out[0].dtype = FP_BF16;
    fp_tensor_2d(&io->out[1], "mask", c.K, c.CW);
    io->out[1].dtype = FP_U32;
    break;
  case KIND_RELU_UNPACK:
    io->n_in = 2;
    io->n_out = 1;
    fp_tensor_2d(&io->in[0], "dy", c.K, c.C);
    io->in[0].dtype = FP_BF16;
    fp_tensor_2d(&io->in[1], "mask", c.K, c.CW);
    io->in[1].dtype = FP_U32;
    fp_tensor_2d(&io->out[0], "dx", c.K, c.C);
    io->out[0].dtype = FP_BF16;
    break;
  case KIND_DW:
    io->n_in = 4;
    io->n_out = 1;
    fp_tensor_2d(&io->in[0], "dy", c.K, c.COUT);
    io->in[0].dtype = FP_BF16;
    io->in[0].fill_scale = fp_sum_scale(c.K);
    packed_inputs(&c, &io->in[1]);
    fp_tensor_2d(&io->out[0], "dw", c.COUT, c.C);
    io->out[0].dtype = c.out_dtype;
    break;
  }
}

static int64_t cp_rows(const fp_problem *p) {
  const cp_problem c = cp_of(p);
  return c.kind == KIND_DW ? c.COUT : c.K;
}

static fp_dtype cp_compute_dtype(const fp_problem *p) {
  return cp_of(p).kind == KIND_DW ? FP_BF16 : FP_F32;
}

/* ---- the reference ------------------------------------------------------------------
 * The packing rule is the float32 steps of fp_device_common.h (the rule
 * itself, shared with the kernels); everything else is float64 over the
 * stored values. */

/* Code of value v (0..255) of group g of row k. */
static uint32_t packed_code(const cp_problem *c, const fp_host_tensor *words, int64_t k, int64_t g,
                            int64_t v) {
  const int vpw = 32 / c->bits;
  const uint32_t w = (uint32_t)fp_host_at2(words, k, g * c->NW + v / vpw);
  return (w >> ((v % vpw) * c->bits)) & ((1u << c->bits) - 1u);
}

/* x' of row k, columns [0, C), into row (floats: exactly bf16 values). */
static void dequant_row(const cp_problem *c, const fp_host_tensor *in, int64_t k, float *row) {
  for (int64_t g = 0; g < c->G; ++g) {
    const float scale = (float)fp_host_at2(&in[1], k, g), mn = (float)fp_host_at2(&in[2], k, g);
    for (int64_t v = 0; v < FP_QGROUP && g * FP_QGROUP + v < c->C; ++v)
      row[g * FP_QGROUP + v] = fp_dequant_value(packed_code(c, &in[0], k, g, v), scale, mn);
  }
}

static void quant_reference_row(const cp_problem *c, const fp_host_tensor *x, int64_t k,
                                double *words, double *scale, double *mins) {
  const int vpw = 32 / c->bits;
  float vals[FP_QGROUP];
  for (int64_t g = 0; g < c->G; ++g) {
    float mn = INFINITY, mx = -INFINITY;
    for (int64_t v = 0; v < FP_QGROUP; ++v) {
      const int64_t col = g * FP_QGROUP + v;
      vals[v] = col < c->C ? (float)fp_host_at2(x, k, col) : 0.0f; /* the notebook's pad */
      mn = vals[v] < mn ? vals[v] : mn;
      mx = vals[v] > mx ? vals[v] : mx;
    }
    mn += 0.0f; /* a zero min or max is +0 (kernels.def) */
    mx += 0.0f;
    const float s = fp_quant_scale(mn, mx, c->bits);
    const float inv = fp_recip_rn(s);
    for (int64_t w = 0; w < c->NW; ++w) {
      uint32_t word = 0;
      for (int j = 0; j < vpw; ++j)
        word |= fp_quant_code(vals[w * vpw + j], mn, inv, c->bits) << (j * c->bits);
      words[g * c->NW + w] = (double)word;
    }
    scale[g] = fp_bf16_bits_to_f32(fp_f32_to_bf16_bits(s));
    mins[g] = mn;
  }
}

static void cp_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                         double *const *out) {
  const cp_problem c = cp_of(p);
  switch (c.kind) {
  case KIND_QUANT:
    for (int64_t k = r0; k < r1; ++k)
      quant_reference_row(&c, &in[0], k, out[0] + (k - r0) * c.G * c.NW, out[1] + (k - r0) * c.G,
                          out[2] + (k - r0) * c.G);
    break;
  case KIND_DEQUANT: {
    float *row = malloc(sizeof(float) * (size_t)c.C);
    for (int64_t k = r0; k < r1; ++k) {
      double *o = out[0] + (k - r0) * c.C;
      if (row == NULL) { /* no host memory: NaN fails the check, never passes it */
        for (int64_t j = 0; j < c.C; ++j)
          o[j] = NAN;
        continue;
      }
      dequant_row(&c, in, k, row);
      for (int64_t j = 0; j < c.C; ++j)
        o[j] = row[j];
    }
    free(row);
    break;
  }
  case KIND_RELU_PACK:
    for (int64_t k = r0; k < r1; ++k) {
      double *y = out[0] + (k - r0) * c.C, *mask = out[1] + (k - r0) * c.CW;
      for (int64_t w = 0; w < c.CW; ++w)
        mask[w] = 0.0;
      uint32_t word = 0;
      for (int64_t j = 0; j < c.C; ++j) {
        const double x = fp_host_at2(&in[0], k, j);
        y[j] = x > 0.0 || isnan(x) ? x : 0.0;
        if (x > 0.0)
          word |= 1u << (j % 32);
        if (j % 32 == 31 || j == c.C - 1) {
          mask[j / 32] = (double)word;
          word = 0;
        }
      }
    }
    break;
  case KIND_RELU_UNPACK:
    for (int64_t k = r0; k < r1; ++k) {
      double *dx = out[0] + (k - r0) * c.C;
      for (int64_t j = 0; j < c.C; ++j) {
        const uint32_t w = (uint32_t)fp_host_at2(&in[1], k, j / 32);
        dx[j] = fp_host_at2(&in[0], k, j) * (double)((w >> (j % 32)) & 1u);
      }
    }
    break;
  case KIND_DW: {
    /* dW[m, :] = sum_k dy[k, m] * x'[k, :]: x' regenerated row by row */
    float *row = malloc(sizeof(float) * (size_t)c.C);
    const int64_t rows = r1 - r0;
    for (int64_t i = 0; i < rows * c.C; ++i)
      out[0][i] = row != NULL ? 0.0 : NAN;
    if (row == NULL)
      break;
    for (int64_t k = 0; k < c.K; ++k) {
      dequant_row(&c, &in[1], k, row);
      for (int64_t m = r0; m < r1; ++m) {
        const double d = fp_host_at2(&in[0], k, m);
        double *o = out[0] + (m - r0) * c.C;
        for (int64_t j = 0; j < c.C; ++j)
          o[j] += d * (double)row[j];
      }
    }
    free(row);
    break;
  }
  }
}

/* Packing and unpacking are exact (shared float32 steps, correctly rounded
 * divisions and fma); dW is a GEMM: float32 accumulation of K exact bf16
 * products errs by about 2^-24 * sqrt(K) of its scale (matmul.c's gate),
 * and a bf16 output adds one rounding. */
static fp_tolerance cp_tolerance(const fp_problem *p, int output) {
  (void)output;
  const cp_problem c = cp_of(p);
  fp_tolerance exact = {0.0, 0.0, 0.0};
  if (c.kind != KIND_DW)
    return exact;
  const double eps = c.out_dtype == FP_BF16 ? ldexp(1.0, -8) : ldexp(1.0, -24);
  const double acc = 16.0 * ldexp(1.0, -24) * sqrt((double)c.K);
  fp_tolerance t = {4.0 * eps, 4.0 * eps + acc, 8.0 * eps + acc};
  return t;
}

/* ---- launches -------------------------------------------------------------------------- */

/* TEAMS (kernels.def): blocks of 256 work-items, one per 32 units (the CUDA
 * and OpenCL kernels then work in teams of 8 lanes a unit, 4 units a warp:
 * the per-group reduction and divisions spread over a warp's lanes), at
 * most blocks_per_cu blocks a compute unit where that is not 0 (else 2^18
 * blocks): the kernels stride over the rest.
 * quant_pack asks for 8: its CUDA rows loop walks the groups with adds
 * (compress_rows.cuh). On an H200 (docs/results/2026-11-29-h200-compress-
 * 03bcfe3/ab/caps-*) 32 blocks took 0.96-1.13x the time of 8 (better only
 * at 8 bits, by up to 4%), a round a warp (0 here) 1.03-1.22x. The 8-bit
 * dequant_unpack rows loop ran 2-4% faster at a round a warp than capped
 * at 16 (ab/grid-*), and stays there. */
static fp_ndrange teams_range(const fp_recipe *rc, int64_t units, int blocks_per_cu) {
  int64_t groups = (units + 31) / 32;
  int64_t cap = (int64_t)1 << 18;
  if (blocks_per_cu > 0 && (int64_t)rc->dev->compute_units * blocks_per_cu < cap)
    cap = (int64_t)rc->dev->compute_units * blocks_per_cu;
  if (cap < 1)
    cap = 1;
  if (groups > cap)
    groups = cap;
  return fp_ndrange_1d((uint64_t)(groups > 0 ? groups : 1), 256);
}

static uint64_t packed_bytes(const cp_problem *c) {
  return (uint64_t)(c->K * c->G) * (uint64_t)(4 * c->NW + 4);
}

static fp_status launch_quant_pack(fp_recipe *rc, const cp_problem *c, fp_buffer *words,
                                   fp_buffer *scale, fp_buffer *mins, fp_buffer *x) {
  fp_arg a[] = {fp_arg_tensor(words, FP_U32),
                fp_arg_tensor(scale, FP_BF16),
                fp_arg_tensor(mins, FP_BF16),
                fp_arg_tensor(x, FP_BF16),
                fp_arg_i64(c->K),
                fp_arg_i64(c->C),
                fp_arg_i32(c->bits)};
  fp_ndrange nd = teams_range(rc, c->K * c->G, 8);
  const uint64_t n = (uint64_t)(c->K * c->C);
  return fp_rc_launch(rc, FPK_quant_pack, &nd, a, 7,
                      fp_kcost(2 * n, packed_bytes(c), 5.0 * (double)n));
}

static fp_status launch_dequant(fp_recipe *rc, const cp_problem *c, fp_buffer *out,
                                fp_buffer *words, fp_buffer *scale, fp_buffer *mins) {
  fp_arg a[] = {fp_arg_tensor(out, FP_BF16),
                fp_arg_tensor(words, FP_U32),
                fp_arg_tensor(scale, FP_BF16),
                fp_arg_tensor(mins, FP_BF16),
                fp_arg_i64(c->K),
                fp_arg_i64(c->C),
                fp_arg_i32(c->bits)};
  fp_ndrange nd = teams_range(rc, c->K * c->G, 0);
  const uint64_t n = (uint64_t)(c->K * c->C);
  return fp_rc_launch(rc, FPK_dequant_unpack, &nd, a, 7,
                      fp_kcost(packed_bytes(c), 2 * n, 2.0 * (double)n));
}

static fp_status cp_fused(fp_recipe *rc, const fp_problem *p);

/* ---- dw_from_packed -------------------------------------------------------------------- */

static fp_kernel_id dw_kernel(fp_dtype out) {
  return out == FP_BF16 ? FPK_dw_packed_bf16 : FPK_dw_packed_f32;
}

static fp_status dw_fused(fp_recipe *rc, const cp_problem *c) {
  fp_buffer *dy = fp_rc_in(rc, 0);
  int64_t lddy = c->COUT;
  fp_buffer *ws = NULL;
  int next_ws = 0;
  if (rc->dev->backend == FP_BACKEND_CUDA) {
    /* the planner's view of the launch (the same call gemm.cu makes) */
    const fp_gemm_device dev = fp_gemm_device_of(rc->dev);
    fp_gemm_path force = FP_GEMM_PATH_AUTO;
    (void)fp_gemm_path_from_env(getenv("FUSEPORT_CUDA_GEMM_PATH"), &force); /* matmul checks it */
    fp_dw_plan plan;
    char why[256];
    if (!fp_dw_plan_make(c->K, c->COUT, c->C, &dev, force, &plan, why, sizeof why)) {
      fp_status st = fp_error(FP_ERR_UNSUPPORTED, "dw_packed on '%s': %s", rc->dev->name, why);
      if (rc->status == FP_OK)
        rc->status = st;
      return st;
    }
    if (plan.aligned_rows && lddy % 8 != 0) {
      /* TMA reads dy's rows: pad them to 128 bytes (matmul.c's padded_ld) */
      const int64_t ld = (c->COUT + 63) / 64 * 64;
      fp_buffer *w = fp_rc_ws(rc, next_ws++, (uint64_t)(c->K * ld) * 2u);
      TRY(fp_prim_pad_rows(rc, FP_BF16, w, dy, c->K, c->COUT, ld));
      dy = w;
      lddy = ld;
    }
    if (plan.ws_bytes > 0)
      ws = fp_rc_ws_zeroed(rc, next_ws++, plan.ws_bytes);
  } else if (rc->dev->backend == FP_BACKEND_OPENCL) {
    /* opencl_gemm.c splits K over at most S slices that fit the workspace
     * (fewer, or none, as its cost model says): S from the 128 x 128 tiles
     * against two blocks a compute unit, the counters (one per 32 x 64
     * tile) and S float slices of the tiles rounded up to 128 */
    const int64_t t128 = ((c->COUT + 127) / 128) * ((c->C + 127) / 128);
    const int64_t cu = rc->dev->compute_units > 0 ? (int64_t)rc->dev->compute_units : 1;
    int64_t S = (2 * cu + t128 - 1) / t128;
    S = S < 16 ? S : 16;
    S = S < (c->K + 15) / 16 ? S : (c->K + 15) / 16;
    if (S > 1) {
      const uint64_t counters = (uint64_t)((c->COUT + 31) / 32) * (uint64_t)((c->C + 63) / 64) * 4u;
      const uint64_t bytes = (counters + 255u) / 256u * 256u +
                             4u * (uint64_t)S * (uint64_t)((c->COUT + 127) / 128 * 128) *
                                 (uint64_t)((c->C + 127) / 128 * 128);
      ws = fp_rc_ws_zeroed(rc, next_ws++, bytes);
    }
  }
  fp_arg a[] = {fp_arg_tensor(fp_rc_out(rc, 0), c->out_dtype),
                fp_arg_tensor(dy, FP_BF16),
                fp_arg_tensor(fp_rc_in(rc, 1), FP_U32),
                fp_arg_tensor(fp_rc_in(rc, 2), FP_BF16),
                fp_arg_tensor(fp_rc_in(rc, 3), FP_BF16),
                fp_arg_tensor(ws, FP_U32),
                fp_arg_i64(c->K),
                fp_arg_i64(c->COUT),
                fp_arg_i64(c->C),
                fp_arg_i32(c->bits),
                fp_arg_i64(lddy)};
  fp_ndrange nd = fp_planned_range();
  const double flops = 2.0 * (double)c->K * (double)c->COUT * (double)c->C;
  const uint64_t read = (uint64_t)(c->K * c->COUT) * 2u + packed_bytes(c);
  return fp_rc_launch(
      rc, dw_kernel(c->out_dtype), &nd, a, 11,
      fp_kcost(read, (uint64_t)(c->COUT * c->C) * fp_dtype_size(c->out_dtype), flops));
}

/* dequant_unpack into x' [K, CIN], then dW = dy^T @ x' by the library. */
static fp_status dw_unfused(fp_recipe *rc, const cp_problem *c) {
  const uint64_t xbytes = (uint64_t)(c->K * c->C) * 2u;
  fp_buffer *x = fp_rc_ws(rc, 0, xbytes);
  TRY(launch_dequant(rc, c, x, fp_rc_in(rc, 1), fp_rc_in(rc, 2), fp_rc_in(rc, 3)));
  fp_lib_gemm g = fp_lib_gemm_plain(FP_BF16, c->COUT, c->C, c->K, false);
  g.trans_a = true; /* dy [K, COUT] */
  g.lda = c->COUT;
  g.out_dtype = c->out_dtype;
  const uint64_t ws_bytes = fp_library_gemm_workspace(rc->dev, &g);
  fp_buffer *ws = ws_bytes > 0 ? fp_rc_ws(rc, 1, ws_bytes) : NULL;
  const double flops = 2.0 * (double)c->K * (double)c->COUT * (double)c->C;
  return fp_rc_library_gemm(rc, &g, fp_rc_in(rc, 0), x, NULL, fp_rc_out(rc, 0), NULL, ws,
                            fp_kcost((uint64_t)(c->K * c->COUT) * 2u + xbytes,
                                     (uint64_t)(c->COUT * c->C) * fp_dtype_size(c->out_dtype),
                                     flops));
}

/* ---- the variants ------------------------------------------------------------------------ */

static fp_status cp_fused(fp_recipe *rc, const fp_problem *p) {
  const cp_problem c = cp_of(p);
  const uint64_t n = (uint64_t)(c.K * c.C);
  switch (c.kind) {
  case KIND_QUANT:
    return launch_quant_pack(rc, &c, fp_rc_out(rc, 0), fp_rc_out(rc, 1), fp_rc_out(rc, 2),
                             fp_rc_in(rc, 0));
  case KIND_DEQUANT:
    return launch_dequant(rc, &c, fp_rc_out(rc, 0), fp_rc_in(rc, 0), fp_rc_in(rc, 1),
                          fp_rc_in(rc, 2));
  case KIND_RELU_PACK: {
    fp_arg a[] = {fp_arg_tensor(fp_rc_out(rc, 0), FP_BF16), fp_arg_tensor(fp_rc_out(rc, 1), FP_U32),
                  fp_arg_tensor(fp_rc_in(rc, 0), FP_BF16), fp_arg_i64(c.K), fp_arg_i64(c.C)};
    fp_ndrange nd = fp_elem_range(rc, c.K * c.CW);
    return fp_rc_launch(rc, FPK_relu_pack, &nd, a, 5,
                        fp_kcost(2 * n, 2 * n + 4u * (uint64_t)(c.K * c.CW), 2.0 * (double)n));
  }
  case KIND_RELU_UNPACK: {
    fp_arg a[] = {fp_arg_tensor(fp_rc_out(rc, 0), FP_BF16), fp_arg_tensor(fp_rc_in(rc, 0), FP_BF16),
                  fp_arg_tensor(fp_rc_in(rc, 1), FP_U32), fp_arg_i64(c.K), fp_arg_i64(c.C)};
    fp_ndrange nd = fp_elem_range(rc, c.K * c.CW);
    return fp_rc_launch(rc, FPK_relu_unpack_backward, &nd, a, 5,
                        fp_kcost(2 * n + 4u * (uint64_t)(c.K * c.CW), 2 * n, (double)n));
  }
  case KIND_DW:
    return dw_fused(rc, &c);
  }
  return FP_OK;
}

/* quant_pack as eager runs the notebook's steps: amin, amax, the scale (and
 * its reciprocal), the codes as one int32 per value, the shift-and-or sum,
 * and the two casts of scale and min to bfloat16. */
static fp_status quant_unfused(fp_recipe *rc, const cp_problem *c) {
  const int64_t groups = c->K * c->G, codes_n = groups * FP_QGROUP, nwords = groups * c->NW;
  const uint64_t gbytes = 4u * (uint64_t)groups;
  fp_buffer *x = fp_rc_in(rc, 0);
  fp_buffer *mn = fp_rc_ws(rc, 0, gbytes), *mx = fp_rc_ws(rc, 1, gbytes);
  fp_buffer *sc = fp_rc_ws(rc, 2, gbytes), *inv = fp_rc_ws(rc, 3, gbytes);
  fp_buffer *codes = fp_rc_ws(rc, 4, 4u * (uint64_t)codes_n);
  const uint64_t n = (uint64_t)(c->K * c->C);
  for (int op = 0; op < 2; ++op) {
    fp_arg a[] = {fp_arg_tensor(op == 0 ? mn : mx, FP_F32), fp_arg_tensor(x, FP_BF16),
                  fp_arg_i64(c->K), fp_arg_i64(c->C), fp_arg_i32(op)};
    fp_ndrange nd = teams_range(rc, groups, 0);
    TRY(fp_rc_launch(rc, FPK_cmp_group_reduce, &nd, a, 5, fp_kcost(2 * n, gbytes, (double)n)));
  }
  {
    fp_arg a[] = {fp_arg_tensor(sc, FP_F32), fp_arg_tensor(inv, FP_F32), fp_arg_tensor(mn, FP_F32),
                  fp_arg_tensor(mx, FP_F32), fp_arg_i64(groups),         fp_arg_i32(c->bits)};
    fp_ndrange nd = fp_elem_range(rc, groups);
    TRY(fp_rc_launch(rc, FPK_cmp_group_scale, &nd, a, 6,
                     fp_kcost(2 * gbytes, 2 * gbytes, 3.0 * (double)groups)));
  }
  {
    fp_arg a[] = {
        fp_arg_tensor(codes, FP_U32), fp_arg_tensor(x, FP_BF16), fp_arg_tensor(mn, FP_F32),
        fp_arg_tensor(inv, FP_F32),   fp_arg_i64(c->K),          fp_arg_i64(c->C),
        fp_arg_i32(c->bits)};
    fp_ndrange nd = fp_elem_range(rc, codes_n);
    TRY(fp_rc_launch(rc, FPK_cmp_quantize, &nd, a, 7,
                     fp_kcost(2 * n + 2 * gbytes, 4u * (uint64_t)codes_n, 4.0 * (double)codes_n)));
  }
  {
    fp_arg a[] = {fp_arg_tensor(fp_rc_out(rc, 0), FP_U32), fp_arg_tensor(codes, FP_U32),
                  fp_arg_i64(nwords), fp_arg_i32(c->bits)};
    fp_ndrange nd = fp_elem_range(rc, nwords);
    TRY(fp_rc_launch(
        rc, FPK_cmp_pack_codes, &nd, a, 4,
        fp_kcost(4u * (uint64_t)codes_n, 4u * (uint64_t)nwords, 2.0 * (double)codes_n)));
  }
  for (int k = 0; k < 2; ++k) {
    fp_arg a[] = {fp_arg_tensor(fp_rc_out(rc, 1 + k), FP_BF16),
                  fp_arg_tensor(k == 0 ? sc : mn, FP_F32), fp_arg_i64(groups)};
    fp_ndrange nd = fp_elem_range(rc, groups);
    TRY(fp_rc_launch(rc, FPK_cmp_to_bf16, &nd, a, 3, fp_kcost(gbytes, gbytes / 2, 0.0)));
  }
  return FP_OK;
}

/* dequant_unpack: shift-and-mask into one code per value, then q*scale+min. */
static fp_status dequant_unfused(fp_recipe *rc, const cp_problem *c) {
  const int64_t groups = c->K * c->G, codes_n = groups * FP_QGROUP, nwords = groups * c->NW;
  fp_buffer *codes = fp_rc_ws(rc, 0, 4u * (uint64_t)codes_n);
  {
    fp_arg a[] = {fp_arg_tensor(codes, FP_U32), fp_arg_tensor(fp_rc_in(rc, 0), FP_U32),
                  fp_arg_i64(nwords), fp_arg_i32(c->bits)};
    fp_ndrange nd = fp_elem_range(rc, codes_n);
    TRY(fp_rc_launch(
        rc, FPK_cmp_unpack_codes, &nd, a, 4,
        fp_kcost(4u * (uint64_t)nwords, 4u * (uint64_t)codes_n, 2.0 * (double)codes_n)));
  }
  const uint64_t n = (uint64_t)(c->K * c->C);
  fp_arg a[] = {fp_arg_tensor(fp_rc_out(rc, 0), FP_BF16),
                fp_arg_tensor(codes, FP_U32),
                fp_arg_tensor(fp_rc_in(rc, 1), FP_BF16),
                fp_arg_tensor(fp_rc_in(rc, 2), FP_BF16),
                fp_arg_i64(c->K),
                fp_arg_i64(c->C)};
  fp_ndrange nd = fp_elem_range(rc, c->K * c->C);
  return fp_rc_launch(rc, FPK_cmp_dequantize, &nd, a, 6,
                      fp_kcost(4 * n + 4u * (uint64_t)groups, 2 * n, 2.0 * (double)n));
}

/* relu_pack: torch.relu, then (x > 0) as bool bytes, then the bits packed. */
static fp_status relu_pack_unfused(fp_recipe *rc, const cp_problem *c) {
  const int64_t n = c->K * c->C;
  const fp_view x = fp_view_typed(fp_view_rows(fp_rc_in(rc, 0), c->K, c->C), FP_BF16);
  const fp_view y = fp_view_typed(fp_view_rows(fp_rc_out(rc, 0), c->K, c->C), FP_BF16);
  TRY(fp_prim_unary(rc, FP_UNARY_RELU, 1.0f, 0.0f, y, x));
  fp_buffer *bytes = fp_rc_ws(rc, 0, (uint64_t)n);
  {
    fp_arg a[] = {fp_arg_tensor(bytes, FP_U8), fp_arg_tensor(fp_rc_in(rc, 0), FP_BF16),
                  fp_arg_i64(n)};
    fp_ndrange nd = fp_elem_range(rc, n);
    TRY(fp_rc_launch(rc, FPK_cmp_gt_zero, &nd, a, 3,
                     fp_kcost(2u * (uint64_t)n, (uint64_t)n, (double)n)));
  }
  fp_arg a[] = {fp_arg_tensor(fp_rc_out(rc, 1), FP_U32), fp_arg_tensor(bytes, FP_U8),
                fp_arg_i64(c->K), fp_arg_i64(c->C)};
  fp_ndrange nd = fp_elem_range(rc, c->K * c->CW);
  return fp_rc_launch(rc, FPK_cmp_pack_bits, &nd, a, 4,
                      fp_kcost((uint64_t)n, 4u * (uint64_t)(c->K * c->CW), (double)n));
}

/* relu_unpack_backward: the bits to bool bytes, then dy * mask. */
static fp_status relu_unpack_unfused(fp_recipe *rc, const cp_problem *c) {
  const int64_t n = c->K * c->C;
  fp_buffer *bytes = fp_rc_ws(rc, 0, (uint64_t)n);
  {
    fp_arg a[] = {fp_arg_tensor(bytes, FP_U8), fp_arg_tensor(fp_rc_in(rc, 1), FP_U32),
                  fp_arg_i64(c->K), fp_arg_i64(c->C)};
    fp_ndrange nd = fp_elem_range(rc, n);
    TRY(fp_rc_launch(rc, FPK_cmp_unpack_bits, &nd, a, 4,
                     fp_kcost(4u * (uint64_t)(c->K * c->CW), (uint64_t)n, (double)n)));
  }
  fp_arg a[] = {fp_arg_tensor(fp_rc_out(rc, 0), FP_BF16), fp_arg_tensor(fp_rc_in(rc, 0), FP_BF16),
                fp_arg_tensor(bytes, FP_U8), fp_arg_i64(n)};
  fp_ndrange nd = fp_elem_range(rc, n);
  return fp_rc_launch(rc, FPK_cmp_mul_mask, &nd, a, 4,
                      fp_kcost(3u * (uint64_t)n, 2u * (uint64_t)n, (double)n));
}

static fp_status cp_unfused(fp_recipe *rc, const fp_problem *p) {
  const cp_problem c = cp_of(p);
  switch (c.kind) {
  case KIND_QUANT:
    return quant_unfused(rc, &c);
  case KIND_DEQUANT:
    return dequant_unfused(rc, &c);
  case KIND_RELU_PACK:
    return relu_pack_unfused(rc, &c);
  case KIND_RELU_UNPACK:
    return relu_unpack_unfused(rc, &c);
  case KIND_DW:
    return dw_unfused(rc, &c);
  }
  return FP_OK;
}

/* ---- shapes and descriptors ----------------------------------------------------------------
 * `--shapes seed` (bench/torch_bench.py keeps the same lists): the
 * notebook's K = 8192 and 100864 (ViT tokens) at 768 channels, wider
 * layers (1024, 4096), cells of 64 MiB and more for the bandwidth goal,
 * and rows that break every alignment (C odd, not a multiple of 256). */
static const int64_t pack_seed[] = {
    8192, 768,   100864, 768,    8192, 1024,  100864, 1024, 8192,
    4096, 32768, 4096,   100003, 1000, 65537, 257,    4096, 65537,
};
static const int64_t pack_default[] = {256, 512, 1000, 300};
/* `fuseport check`: ones, a part group, a group and a bit, odd rows. */
static const int64_t pack_check[] = {
    1, 1, 3, 1000, 7, 257, 2, 256, 5, 300, 33, 512, 17, 33, 1, 65537, 64, 31,
};
/* dw_from_packed: K x CIN x COUT. */
static const int64_t dw_seed[] = {
    8192,  768,  768,  100864, 768,  768,  8192, 1024, 1024, 100864, 1024, 1024,
    16384, 4096, 4096, 8192,   4096, 1024, 8191, 768,  768,  100003, 1000, 1000,
};
static const int64_t dw_default[] = {512, 256, 256, 1000, 300, 100};
static const int64_t dw_check[] = {
    1, 1, 1, 7, 33, 17, 1000, 300, 100, 257, 768, 64, 33, 256, 129, 100, 1, 5, 300, 513, 136,
};

#define CP_SHAPES(seed, def, check)                                                                \
  .seed_shapes = seed, .n_seed_shapes = (int)(sizeof seed / sizeof seed[0]),                       \
  .default_shapes = def, .n_default_shapes = (int)(sizeof def / sizeof def[0]),                    \
  .check_shapes = check, .n_check_shapes = (int)(sizeof check / sizeof check[0])

#define CP_KC_PARAMS                                                                               \
  {"K", FP_PARAM_DIM, 8192, 1, FP_DIM_MAX, NULL, "rows: tokens (the GEMM's reduced dimension)"}, { \
    "C", FP_PARAM_DIM, 768, 1, FP_DIM_MAX, NULL,                                                   \
        "channels per row (groups of 256; the last one padded with zeros)"                         \
  }
#define CP_BITS_PARAM                                                                              \
  {                                                                                                \
    "bits", FP_PARAM_CHOICE, 1, 0, 3, bits_choices,                                                \
        "bits per value: 1, 2, 4 or 8 (32 / bits values to a word)"                                \
  }

#define CP_VARIANTS(fused_note, unfused_note)                                                      \
  .n_variants = 2, .variants = {                                                                   \
                       {"fused", fused_note, cp_fused},                                            \
                       {"unfused", unfused_note, cp_unfused},                                      \
  }

#define CP_PACK_OP(op_name, op_summary, n_par, par, fused_note, unfused_note)                      \
  {                                                                                                \
    .name = op_name, .family = "compress", .summary = op_summary, .n_params = n_par,               \
    .params = par, .grid_param = {CP_K, CP_C}, CP_SHAPES(pack_seed, pack_default, pack_check),     \
    .compute_dtype = cp_compute_dtype, .validate = cp_validate, .describe = cp_describe,           \
    .rows = cp_rows, .reference = cp_reference, .tolerance = cp_tolerance,                         \
    CP_VARIANTS(fused_note, unfused_note),                                                         \
  }

#define CP_PARAMS_BITS                                                                             \
  { CP_KC_PARAMS, CP_BITS_PARAM }
#define CP_PARAMS_KC                                                                               \
  { CP_KC_PARAMS }

const fp_op fp_op_quant_pack = CP_PACK_OP(
    "quant_pack",
    "bf16 x [K, C] -> per group of 256: min, scale = (max - min) / (2^bits - 1) (bf16), values "
    "rounded to bits and packed 32 / bits to a word (the compression notebook's rule, bit-exact)",
    3, CP_PARAMS_BITS, "one kernel: a warp per group, min/max by shuffles, packed in registers",
    "amin, amax, scale, quantise (int32 codes in memory), shift-and-or, two casts: 7 kernels");

const fp_op fp_op_dequant_unpack = CP_PACK_OP(
    "dequant_unpack", "x' [K, C] = bf16(q * scale + min) from packed words, scale and min", 3,
    CP_PARAMS_BITS, "one kernel",
    "shift-and-mask into int32 codes, then q * scale + min: 2 kernels");

const fp_op fp_op_relu_pack = CP_PACK_OP(
    "relu_pack", "y = relu(x) and the mask x > 0, 1 bit per value (32 to a word, per row)", 2,
    CP_PARAMS_KC, "one kernel", "relu, x > 0 as bool bytes, pack the bits: 3 kernels");

const fp_op fp_op_relu_unpack_backward = CP_PACK_OP(
    "relu_unpack_backward", "dx = dy * mask, the mask unpacked from relu_pack's bits", 2,
    CP_PARAMS_KC, "one kernel", "unpack the bits to bool bytes, then dy * mask: 2 kernels");

const fp_op fp_op_dw_from_packed = {
    .name = "dw_from_packed",
    .family = "compress",
    .summary = "dW [COUT, CIN] = dy^T @ x', dy bf16 [K, COUT], x' dequantised from "
               "quant_pack's words; fused never writes x'",
    .n_params = 5,
    .params = {{"K", FP_PARAM_DIM, 8192, 1, FP_DIM_MAX, NULL,
                "tokens: rows of dy and x, the reduced dimension"},
               {"CIN", FP_PARAM_DIM, 768, 1, FP_DIM_MAX, NULL,
                "input channels: columns of x (packed) and of dW"},
               {"COUT", FP_PARAM_DIM, 768, 1, FP_DIM_MAX, NULL,
                "output channels: columns of dy, rows of dW"},
               CP_BITS_PARAM,
               {"dtype", FP_PARAM_CHOICE, 0, 0, 1, dw_dtype_choices,
                "element type of dW: f32 or bf16 (float32 accumulation either way)"}},
    .n_grid = 3,
    .grid_param = {DW_K, DW_CIN, DW_COUT},
    CP_SHAPES(dw_seed, dw_default, dw_check),
    .compute_dtype = cp_compute_dtype,
    .validate = cp_validate,
    .describe = cp_describe,
    .rows = cp_rows,
    .reference = cp_reference,
    .tolerance = cp_tolerance,
    .n_variants = 2,
    .variants = {{"fused",
                  "fuseport's GEMM with a dequantising operand loader, split over K (x' never "
                  "written)",
                  cp_fused},
                 {"unfused", "dequant_unpack into x', then the backend's GEMM library",
                  cp_unfused}},
};
