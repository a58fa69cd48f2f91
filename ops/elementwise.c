/* fuseport operators, family elementwise: pointwise_chain, bias_gelu,
 * bias_dropout_add (SPEC.md, "Elementwise"). */
#include <math.h>

#include "fp_device_common.h"
#include "ops_internal.h"

/* ---- pointwise_chain: y=cos(x); x=x*y; y=max(x,y); out=x+y ---------------------- */

static void chain_describe(const fp_problem *p, fp_io_desc *io) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  io->n_in = 1;
  io->n_out = 1;
  fp_tensor_2d(&io->in[0], "x", M, N);
  io->in[0].fill_scale = 4.0f; /* past pi, so cos changes sign within the data */
  fp_tensor_2d(&io->out[0], "out", M, N);
}

static void chain_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                            double *const *out) {
  int64_t N = P_INT(p, P_N);
  for (int64_t i = r0; i < r1; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double x = fp_host_at2(&in[0], i, j);
      double y = cos(x);
      x = x * y;
      y = fmax(x, y);
      out[0][(i - r0) * N + j] = x + y;
    }
}

static fp_status chain_fused(fp_recipe *rc, const fp_problem *p) {
  int64_t n = P_INT(p, P_M) * P_INT(p, P_N);
  fp_arg a[] = {fp_arg_buf(fp_rc_out(rc, 0)), fp_arg_buf(fp_rc_in(rc, 0)), fp_arg_i64(n)};
  fp_ndrange nd = fp_elem_range(rc, n);
  return fp_rc_launch(rc, FPK_pointwise_chain_fused, &nd, a, 3,
                      fp_kcost(4u * (uint64_t)n, 4u * (uint64_t)n, 4.0 * (double)n));
}

static fp_status chain_unfused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  uint64_t bytes = 4u * (uint64_t)(M * N);
  fp_view x = fp_view_rows(fp_rc_in(rc, 0), M, N);
  fp_view y = fp_view_rows(fp_rc_ws(rc, 0, bytes), M, N);
  fp_view x2 = fp_view_rows(fp_rc_ws(rc, 1, bytes), M, N);
  fp_view y2 = fp_view_rows(fp_rc_ws(rc, 2, bytes), M, N);
  fp_view out = fp_view_rows(fp_rc_out(rc, 0), M, N);
  TRY(fp_prim_unary(rc, FP_UNARY_COS, 1.0f, 0.0f, y, x));
  TRY(fp_prim_binary(rc, FP_BINARY_MUL, x2, x, y));
  TRY(fp_prim_binary(rc, FP_BINARY_MAX, y2, x2, y));
  return fp_prim_binary(rc, FP_BINARY_ADD, out, x2, y2);
}

/* ---- bias_gelu: x = inp + bias; tanh-approximated gelu -------------------------------- */

static void gelu_describe(const fp_problem *p, fp_io_desc *io) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  io->n_in = 2;
  io->n_out = 1;
  fp_tensor_2d(&io->in[0], "inp", M, N);
  io->in[0].fill_scale = 4.0f;
  fp_tensor_1d(&io->in[1], "bias", N);
  fp_tensor_2d(&io->out[0], "out", M, N);
}

static void gelu_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                           double *const *out) {
  int64_t N = P_INT(p, P_N);
  for (int64_t i = r0; i < r1; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double x = fp_host_at2(&in[0], i, j) + fp_host_at1(&in[1], j);
      out[0][(i - r0) * N + j] = x * 0.5 * (1.0 + tanh(0.79788456 * x * (1.0 + 0.044715 * x * x)));
    }
}

static fp_status gelu_fused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  fp_arg a[] = {fp_arg_buf(fp_rc_out(rc, 0)), fp_arg_buf(fp_rc_in(rc, 0)),
                fp_arg_buf(fp_rc_in(rc, 1)), fp_arg_i64(M), fp_arg_i64(N)};
  uint64_t mn = (uint64_t)(M * N);
  fp_ndrange nd = fp_elem_range(rc, M * N);
  return fp_rc_launch(rc, FPK_bias_gelu_fused, &nd, a, 5,
                      fp_kcost(4u * (mn + (uint64_t)N), 4u * mn, 10.0 * (double)mn));
}

/* PyTorch eager evaluates x*0.5*(1.0+tanh(0.79788456*x*(1+0.044715*x*x))) left
 * to right, one kernel per operator; dead intermediates are handed back for
 * reuse as its caching allocator does, so at most five are alive. */
static fp_status gelu_unfused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  uint64_t bytes = 4u * (uint64_t)(M * N);
  fp_view inp = fp_view_rows(fp_rc_in(rc, 0), M, N);
  fp_view bias = fp_view_bias(fp_rc_in(rc, 1), M, N);
  fp_view a = fp_view_rows(fp_rc_ws(rc, 0, bytes), M, N);
  fp_view b = fp_view_rows(fp_rc_ws(rc, 1, bytes), M, N);
  fp_view c = fp_view_rows(fp_rc_ws(rc, 2, bytes), M, N);
  fp_view d = fp_view_rows(fp_rc_ws(rc, 3, bytes), M, N);
  fp_view e = fp_view_rows(fp_rc_ws(rc, 4, bytes), M, N);
  fp_view out = fp_view_rows(fp_rc_out(rc, 0), M, N);
  TRY(fp_prim_binary(rc, FP_BINARY_ADD, a, inp, bias));             /* x = inp + bias    */
  TRY(fp_prim_unary(rc, FP_UNARY_AFFINE, 0.5f, 0.0f, b, a));        /* x * 0.5           */
  TRY(fp_prim_unary(rc, FP_UNARY_AFFINE, 0.79788456f, 0.0f, c, a)); /* 0.79788456 * x    */
  TRY(fp_prim_unary(rc, FP_UNARY_AFFINE, 0.044715f, 0.0f, d, a));   /* 0.044715 * x      */
  TRY(fp_prim_binary(rc, FP_BINARY_MUL, e, d, a));                  /* (0.044715*x) * x  */
  TRY(fp_prim_unary(rc, FP_UNARY_AFFINE, 1.0f, 1.0f, d, e));        /* 1 + ...           */
  TRY(fp_prim_binary(rc, FP_BINARY_MUL, e, c, d));                  /* 0.79788456*x*(..) */
  TRY(fp_prim_unary(rc, FP_UNARY_TANH, 1.0f, 0.0f, c, e));          /* tanh(...)         */
  TRY(fp_prim_unary(rc, FP_UNARY_AFFINE, 1.0f, 1.0f, d, c));        /* 1.0 + tanh(...)   */
  return fp_prim_binary(rc, FP_BINARY_MUL, out, b, d);              /* x*0.5 * (...)     */
}

/* ---- bias_dropout_add: out = residual + dropout(inp + bias, p) -------------------------- */

enum { P_PROB = 2, P_TRAINING, P_SEED, P_LAYOUT };
enum { LAYOUT_CONTIGUOUS = 0, LAYOUT_TRANSPOSED = 1 };
static const char *const layouts[] = {"contiguous", "transposed", NULL};

static void bda_describe(const fp_problem *p, fp_io_desc *io) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  io->n_in = 3;
  io->n_out = 1;
  fp_tensor_2d(&io->in[0], "inp", M, N);
  if (P_INT(p, P_LAYOUT) == LAYOUT_TRANSPOSED) {
    /* The seed's layout study: bias and residual are [N, M] tensors seen
     * through a transpose, and the output takes their layout. */
    fp_tensor_2d_transposed(&io->in[1], "bias", M, N);
    fp_tensor_2d_transposed(&io->in[2], "residual", M, N);
    fp_tensor_2d_transposed(&io->out[0], "out", M, N);
  } else {
    fp_tensor_1d(&io->in[1], "bias", N);
    fp_tensor_2d(&io->in[2], "residual", M, N);
    fp_tensor_2d(&io->out[0], "out", M, N);
  }
}

static float bda_scale(const fp_problem *p) { return (float)(1.0 / (1.0 - p->v[P_PROB])); }

static void bda_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                          double *const *out) {
  int64_t N = P_INT(p, P_N);
  bool training = P_INT(p, P_TRAINING) != 0;
  float prob = (float)p->v[P_PROB];
  double scale = 1.0 / (1.0 - p->v[P_PROB]);
  uint64_t seed = (uint64_t)P_INT(p, P_SEED);
  bool bias_2d = in[1].desc->rank == 2;
  for (int64_t i = r0; i < r1; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double v = fp_host_at2(&in[0], i, j) +
                 (bias_2d ? fp_host_at2(&in[1], i, j) : fp_host_at1(&in[1], j));
      if (training)
        v = fp_dropout_keep(seed, (uint64_t)(i * N + j), prob) ? v * scale : 0.0;
      out[0][(i - r0) * N + j] = fp_host_at2(&in[2], i, j) + v;
    }
}

static fp_status bda_fused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  fp_io_desc io;
  bda_describe(p, &io);
  fp_view bias = fp_view_of(fp_rc_in(rc, 1), &io.in[1], M, N);
  fp_view res = fp_view_of(fp_rc_in(rc, 2), &io.in[2], M, N);
  fp_view out = fp_view_of(fp_rc_out(rc, 0), &io.out[0], M, N);
  fp_arg a[] = {fp_arg_buf(out.buf),
                fp_arg_buf(fp_rc_in(rc, 0)),
                fp_arg_buf(bias.buf),
                fp_arg_buf(res.buf),
                fp_arg_i64(M),
                fp_arg_i64(N),
                fp_arg_i64(bias.s0),
                fp_arg_i64(bias.s1),
                fp_arg_i64(res.s0),
                fp_arg_i64(res.s1),
                fp_arg_i64(out.s0),
                fp_arg_i64(out.s1),
                fp_arg_f32((float)p->v[P_PROB]),
                fp_arg_f32(bda_scale(p)),
                fp_arg_i64(P_INT(p, P_SEED)),
                fp_arg_i32((int32_t)P_INT(p, P_TRAINING))};
  uint64_t mn = (uint64_t)(M * N);
  fp_kernel_cost cost = fp_kcost(4u * (2 * mn + fp_tensor_desc_elems(&io.in[1])), 4u * mn,
                                 (P_INT(p, P_TRAINING) ? 3.0 : 2.0) * (double)mn);
  /* A column-major output against the row-major inp: transpose through a
   * 32x32 tile so both sides stay coalesced (grid.y is bounded on CUDA). */
  if (out.s0 == 1 && M > 1 && (M + 31) / 32 <= 65535) {
    fp_ndrange nd = fp_tile_range(rc, M, N);
    return fp_rc_launch(rc, FPK_bias_dropout_add_fused_t, &nd, a, 16, cost);
  }
  fp_ndrange nd = fp_elem_range(rc, M * N);
  return fp_rc_launch(rc, FPK_bias_dropout_add_fused, &nd, a, 16, cost);
}

/* Eager: inp + bias, then F.dropout (no kernel at all when not training:
 * it returns its input), then residual + that, written in out's layout. */
static fp_status bda_unfused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  uint64_t bytes = 4u * (uint64_t)(M * N);
  fp_io_desc io;
  bda_describe(p, &io);
  fp_view inp = fp_view_rows(fp_rc_in(rc, 0), M, N);
  fp_view bias = fp_view_of(fp_rc_in(rc, 1), &io.in[1], M, N);
  fp_view res = fp_view_of(fp_rc_in(rc, 2), &io.in[2], M, N);
  fp_view out = fp_view_of(fp_rc_out(rc, 0), &io.out[0], M, N);
  fp_view sum = fp_view_rows(fp_rc_ws(rc, 0, bytes), M, N);
  TRY(fp_prim_binary(rc, FP_BINARY_ADD, sum, inp, bias));
  fp_view dropped = sum;
  if (P_INT(p, P_TRAINING)) {
    dropped = fp_view_rows(fp_rc_ws(rc, 1, bytes), M, N);
    TRY(fp_prim_dropout(rc, dropped, sum, (float)p->v[P_PROB], bda_scale(p),
                        (uint64_t)P_INT(p, P_SEED), 1));
  }
  return fp_prim_binary(rc, FP_BINARY_ADD, out, res, dropped);
}

/* ---- registration ------------------------------------------------------------------------ */

const fp_op fp_op_pointwise_chain = {
    .name = "pointwise_chain",
    .family = "elementwise",
    .summary = "y=cos(x); x=x*y; y=max(x,y); out=x+y",
    .n_params = 2,
    .params = {FP_DIM_PARAMS},
    .grid_param = {P_M, P_N},
    .describe = chain_describe,
    .rows = fp_rows_param_m,
    .reference = chain_reference,
    .tol = FP_TOL_ELEMENTWISE,
    .n_variants = 2,
    .variants = {{"fused", "one kernel", chain_fused},
                 {"unfused", "cos, mul, max, add: four kernels", chain_unfused}},
};

const fp_op fp_op_bias_gelu = {
    .name = "bias_gelu",
    .family = "elementwise",
    .summary = "x=inp+bias[N]; out=x*0.5*(1+tanh(0.79788456*x*(1+0.044715*x*x)))",
    .n_params = 2,
    .params = {FP_DIM_PARAMS},
    .grid_param = {P_M, P_N},
    .describe = gelu_describe,
    .rows = fp_rows_param_m,
    .reference = gelu_reference,
    .tol = FP_TOL_ELEMENTWISE,
    .n_variants = 2,
    .variants = {{"fused", "one kernel", gelu_fused},
                 {"unfused", "ten eager kernels, one per operator", gelu_unfused}},
};

const fp_op fp_op_bias_dropout_add = {
    .name = "bias_dropout_add",
    .family = "elementwise",
    .summary = "out = residual + dropout(inp + bias, p); Philox4x32-10 mask keyed by seed",
    .n_params = 6,
    .params = {FP_DIM_PARAMS,
               {"p", FP_PARAM_FLOAT, 0.5, 0.0, 1.0, NULL, "dropout probability"},
               {"training", FP_PARAM_BOOL, 0, 0, 1, NULL,
                "apply dropout (false: identity, as in the seed)"},
               {"seed", FP_PARAM_INT, 20230814, 0, 9007199254740992.0, NULL,
                "Philox key of the dropout mask"},
               {"layout", FP_PARAM_CHOICE, LAYOUT_CONTIGUOUS, 0, 1, layouts,
                "contiguous: bias [N], residual and out [M,N]; transposed: bias, residual "
                "and out are [N,M] storage seen as [M,N]"}},
    .grid_param = {P_M, P_N},
    .describe = bda_describe,
    .rows = fp_rows_param_m,
    .reference = bda_reference,
    .tol = FP_TOL_ELEMENTWISE,
    .n_variants = 2,
    .variants = {{"fused", "one kernel (a tiled transpose for the transposed layout)", bda_fused},
                 {"unfused", "add, dropout (when training), add", bda_unfused}},
};
