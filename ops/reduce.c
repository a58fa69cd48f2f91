/* fuseport operators, family reduce: softmax, double_softmax,
 * softmax_backward, layernorm, norm_chain (SPEC.md, "Row reductions"). All
 * reduce over dim 1 (N) of a row-major [M, N] input. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "fp_device_common.h"
#include "ops_internal.h"

/* The fused recipes all launch one ROWS kernel with (outputs..., inputs...,
 * M, N); this launches it with the cost model of one read of each input and
 * one write of each output. */
static fp_status launch_rows(fp_recipe *rc, const fp_problem *p, fp_kernel_id kernel,
                             const fp_io_desc *io, double flops_per_elem, const fp_arg *extra,
                             int n_extra) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  fp_arg args[16];
  int n = 0;
  uint64_t read = 0, written = 0;
  for (int k = 0; k < io->n_out; ++k) {
    args[n++] = fp_arg_buf(fp_rc_out(rc, k));
    written += fp_tensor_bytes(&io->out[k]);
  }
  for (int k = 0; k < io->n_in; ++k) {
    args[n++] = fp_arg_buf(fp_rc_in(rc, k));
    read += fp_tensor_bytes(&io->in[k]);
  }
  args[n++] = fp_arg_i64(M);
  args[n++] = fp_arg_i64(N);
  for (int k = 0; k < n_extra; ++k)
    args[n++] = extra[k];
  fp_ndrange nd = fp_rows_range(rc, M, N);
  return fp_rc_launch(rc, kernel, &nd, args, n,
                      fp_kcost(read, written, flops_per_elem * (double)M * (double)N));
}

/* ---- references (float64) -------------------------------------------------------- */

/* softmax of one row in place: exp(x - max) / sum; NaN anywhere, or a row of
 * -inf, gives a NaN row as in PyTorch. */
static void softmax_row_f64(double *row, int64_t N) {
  double m = -INFINITY;
  for (int64_t j = 0; j < N; ++j)
    m = (isnan(row[j]) || row[j] > m) ? row[j] : m;
  double s = 0.0;
  for (int64_t j = 0; j < N; ++j) {
    row[j] = exp(row[j] - m);
    s += row[j];
  }
  for (int64_t j = 0; j < N; ++j)
    row[j] /= s;
}

static void load_row(const fp_host_tensor *t, int64_t i, int64_t N, double *row) {
  for (int64_t j = 0; j < N; ++j)
    row[j] = fp_host_at2(t, i, j);
}

static void softmax_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                              double *const *out) {
  int64_t N = P_INT(p, P_N);
  for (int64_t i = r0; i < r1; ++i) {
    double *row = out[0] + (i - r0) * N;
    load_row(&in[0], i, N, row);
    softmax_row_f64(row, N);
  }
}

static void double_softmax_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0,
                                     int64_t r1, double *const *out) {
  int64_t N = P_INT(p, P_N);
  for (int64_t i = r0; i < r1; ++i) {
    double *row = out[0] + (i - r0) * N;
    load_row(&in[0], i, N, row);
    softmax_row_f64(row, N);
    softmax_row_f64(row, N);
  }
}

static void softmax_backward_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0,
                                       int64_t r1, double *const *out) {
  int64_t N = P_INT(p, P_N);
  for (int64_t i = r0; i < r1; ++i) {
    double dot = 0.0;
    for (int64_t j = 0; j < N; ++j)
      dot += fp_host_at2(&in[0], i, j) * fp_host_at2(&in[1], i, j);
    for (int64_t j = 0; j < N; ++j)
      out[0][(i - r0) * N + j] = fp_host_at2(&in[1], i, j) * (fp_host_at2(&in[0], i, j) - dot);
  }
}

enum { P_EPS = 2 };

static void layernorm_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0,
                                int64_t r1, double *const *out) {
  int64_t N = P_INT(p, P_N);
  double eps = (float)p->v[P_EPS]; /* the kernels receive eps as a float */
  for (int64_t i = r0; i < r1; ++i) {
    double *row = out[0] + (i - r0) * N;
    load_row(&in[0], i, N, row);
    double mean = 0.0;
    for (int64_t j = 0; j < N; ++j)
      mean += row[j];
    mean /= (double)N;
    double var = 0.0;
    for (int64_t j = 0; j < N; ++j)
      var += (row[j] - mean) * (row[j] - mean);
    var /= (double)N; /* biased, as PyTorch */
    double rstd = 1.0 / sqrt(var + eps);
    for (int64_t j = 0; j < N; ++j)
      row[j] = (row[j] - mean) * rstd * fp_host_at1(&in[1], j) + fp_host_at1(&in[2], j);
    out[1][i - r0] = mean;
    out[2][i - r0] = rstd;
  }
}

static void norm_chain_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0,
                                 int64_t r1, double *const *out) {
  int64_t N = P_INT(p, P_N);
  for (int64_t i = r0; i < r1; ++i) {
    double *row = out[0] + (i - r0) * N;
    load_row(&in[0], i, N, row);
    for (int step = 0; step < 3; ++step) {
      double s = 0.0;
      for (int64_t j = 0; j < N; ++j)
        s += row[j];
      for (int64_t j = 0; j < N; ++j)
        row[j] *= s;
    }
  }
}

/* ---- descriptors ------------------------------------------------------------------------ */

static void one_in_one_out(const fp_problem *p, fp_io_desc *io, const char *in_name) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  io->n_in = 1;
  io->n_out = 1;
  fp_tensor_2d(&io->in[0], in_name, M, N);
  io->in[0].fill_scale = 4.0f; /* logits in [-4, 4): softmax spreads over ~e^8 */
  fp_tensor_2d(&io->out[0], "out", M, N);
}

static void softmax_describe(const fp_problem *p, fp_io_desc *io) { one_in_one_out(p, io, "x"); }

static void softmax_backward_describe(const fp_problem *p, fp_io_desc *io) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  io->n_in = 2;
  io->n_out = 1;
  fp_tensor_2d(&io->in[0], "grad_out", M, N);
  fp_tensor_2d(&io->in[1], "y", M, N);
  io->in[1].fill_positive = true; /* y is a softmax output: non-negative */
  fp_tensor_2d(&io->out[0], "grad_in", M, N);
}

static void layernorm_describe(const fp_problem *p, fp_io_desc *io) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  io->n_in = 3;
  io->n_out = 3;
  fp_tensor_2d(&io->in[0], "x", M, N);
  /* [0, 8): a mean of about 4 against a spread of about 2.3, so a variance
   * taken as E[x^2] - E[x]^2 would lose digits the reference shows. */
  io->in[0].fill_scale = 8.0f;
  io->in[0].fill_positive = true;
  fp_tensor_1d(&io->in[1], "weight", N);
  fp_tensor_1d(&io->in[2], "bias", N);
  fp_tensor_2d(&io->out[0], "out", M, N);
  fp_tensor_1d(&io->out[1], "mean", M);
  fp_tensor_1d(&io->out[2], "rstd", M);
}

static void norm_chain_describe(const fp_problem *p, fp_io_desc *io) {
  int64_t N = P_INT(p, P_N);
  one_in_one_out(p, io, "x");
  /* Positive values below 2^-ceil(log2 N): each row sum lands in [0.25, 0.5),
   * so x * s1 * s2 * s3 neither overflows nor loses itself in cancellation. */
  int shift = 0;
  while (shift < 62 && ((int64_t)1 << shift) < N)
    ++shift;
  io->in[0].fill_scale = ldexpf(1.0f, -shift);
  io->in[0].fill_positive = true;
}

/* ---- fused recipes ------------------------------------------------------------------------- */

static fp_status softmax_fused(fp_recipe *rc, const fp_problem *p) {
  fp_io_desc io;
  softmax_describe(p, &io);
  return launch_rows(rc, p, FPK_softmax_fused, &io, 5.0, NULL, 0);
}

static fp_status double_softmax_fused(fp_recipe *rc, const fp_problem *p) {
  fp_io_desc io;
  softmax_describe(p, &io);
  return launch_rows(rc, p, FPK_double_softmax_fused, &io, 10.0, NULL, 0);
}

static fp_status softmax_backward_fused(fp_recipe *rc, const fp_problem *p) {
  fp_io_desc io;
  softmax_backward_describe(p, &io);
  return launch_rows(rc, p, FPK_softmax_backward_fused, &io, 4.0, NULL, 0);
}

static fp_status layernorm_fused(fp_recipe *rc, const fp_problem *p) {
  fp_io_desc io;
  layernorm_describe(p, &io);
  fp_arg eps = fp_arg_f32((float)p->v[P_EPS]);
  return launch_rows(rc, p, FPK_layernorm_fused, &io, 8.0, &eps, 1);
}

static fp_status norm_chain_fused(fp_recipe *rc, const fp_problem *p) {
  fp_io_desc io;
  norm_chain_describe(p, &io);
  return launch_rows(rc, p, FPK_norm_chain_fused, &io, 6.0, NULL, 0);
}

/* ---- unfused recipes: the eager decomposition ----------------------------------------------- */

/* softmax(x) -> out with workspace ws_base.. : amax, sub, exp, sum, div. */
static fp_status softmax_steps(fp_recipe *rc, int64_t M, int64_t N, fp_view x, fp_view out,
                               int ws_base) {
  uint64_t row_bytes = 4u * (uint64_t)M, bytes = 4u * (uint64_t)(M * N);
  fp_buffer *m = fp_rc_ws(rc, ws_base + 0, row_bytes);
  fp_buffer *s = fp_rc_ws(rc, ws_base + 1, row_bytes);
  fp_view t = fp_view_rows(fp_rc_ws(rc, ws_base + 2, bytes), M, N);
  fp_view e = fp_view_rows(fp_rc_ws(rc, ws_base + 3, bytes), M, N);
  TRY(fp_prim_reduce_rows(rc, FP_REDUCE_MAX, m, x));
  TRY(fp_prim_binary(rc, FP_BINARY_SUB, t, x, fp_view_perrow(m, M, N)));
  TRY(fp_prim_unary(rc, FP_UNARY_EXP, 1.0f, 0.0f, e, t));
  TRY(fp_prim_reduce_rows(rc, FP_REDUCE_SUM, s, e));
  return fp_prim_binary(rc, FP_BINARY_DIV, out, e, fp_view_perrow(s, M, N));
}

static fp_status softmax_unfused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  return softmax_steps(rc, M, N, fp_view_rows(fp_rc_in(rc, 0), M, N),
                       fp_view_rows(fp_rc_out(rc, 0), M, N), 0);
}

static fp_status double_softmax_unfused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  fp_view first = fp_view_rows(fp_rc_ws(rc, 0, 4u * (uint64_t)(M * N)), M, N);
  TRY(softmax_steps(rc, M, N, fp_view_rows(fp_rc_in(rc, 0), M, N), first, 1));
  /* the second softmax reuses the first one's (now dead) intermediates */
  return softmax_steps(rc, M, N, first, fp_view_rows(fp_rc_out(rc, 0), M, N), 1);
}

static fp_status softmax_backward_unfused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  fp_view g = fp_view_rows(fp_rc_in(rc, 0), M, N);
  fp_view y = fp_view_rows(fp_rc_in(rc, 1), M, N);
  fp_view gy = fp_view_rows(fp_rc_ws(rc, 0, 4u * (uint64_t)(M * N)), M, N);
  fp_buffer *dot = fp_rc_ws(rc, 1, 4u * (uint64_t)M);
  TRY(fp_prim_binary(rc, FP_BINARY_MUL, gy, g, y));
  TRY(fp_prim_reduce_rows(rc, FP_REDUCE_SUM, dot, gy));
  /* gy is dead after the sum: g - dot reuses its buffer */
  TRY(fp_prim_binary(rc, FP_BINARY_SUB, gy, g, fp_view_perrow(dot, M, N)));
  return fp_prim_binary(rc, FP_BINARY_MUL, fp_view_rows(fp_rc_out(rc, 0), M, N), y, gy);
}

static fp_status layernorm_unfused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  uint64_t row_bytes = 4u * (uint64_t)M, bytes = 4u * (uint64_t)(M * N);
  float inv_n = (float)(1.0 / (double)N);
  fp_view x = fp_view_rows(fp_rc_in(rc, 0), M, N);
  fp_view w = fp_view_bias(fp_rc_in(rc, 1), M, N);
  fp_view b = fp_view_bias(fp_rc_in(rc, 2), M, N);
  fp_buffer *mean = fp_rc_out(rc, 1), *rstd = fp_rc_out(rc, 2);
  fp_buffer *sum = fp_rc_ws(rc, 0, row_bytes);
  fp_buffer *sumsq = fp_rc_ws(rc, 1, row_bytes);
  fp_buffer *var_eps = fp_rc_ws(rc, 2, row_bytes);
  fp_view xc = fp_view_rows(fp_rc_ws(rc, 3, bytes), M, N);
  fp_view sq = fp_view_rows(fp_rc_ws(rc, 4, bytes), M, N);
  fp_view mean_m = fp_view_rows(mean, M, 1), sum_m = fp_view_rows(sum, M, 1);
  TRY(fp_prim_reduce_rows(rc, FP_REDUCE_SUM, sum, x));
  TRY(fp_prim_unary(rc, FP_UNARY_AFFINE, inv_n, 0.0f, mean_m, sum_m)); /* mean = sum / N */
  TRY(fp_prim_binary(rc, FP_BINARY_SUB, xc, x, fp_view_perrow(mean, M, N)));
  TRY(fp_prim_binary(rc, FP_BINARY_MUL, sq, xc, xc));
  TRY(fp_prim_reduce_rows(rc, FP_REDUCE_SUM, sumsq, sq));
  TRY(fp_prim_unary(rc, FP_UNARY_AFFINE, inv_n, (float)p->v[P_EPS], fp_view_rows(var_eps, M, 1),
                    fp_view_rows(sumsq, M, 1))); /* var + eps */
  TRY(fp_prim_unary(rc, FP_UNARY_RSQRT, 1.0f, 0.0f, fp_view_rows(rstd, M, 1),
                    fp_view_rows(var_eps, M, 1)));
  /* sq and xc die in turn and take the normalised and the scaled values */
  TRY(fp_prim_binary(rc, FP_BINARY_MUL, sq, xc, fp_view_perrow(rstd, M, N)));
  TRY(fp_prim_binary(rc, FP_BINARY_MUL, xc, sq, w));
  return fp_prim_binary(rc, FP_BINARY_ADD, fp_view_rows(fp_rc_out(rc, 0), M, N), xc, b);
}

static fp_status norm_chain_unfused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  uint64_t bytes = 4u * (uint64_t)(M * N);
  fp_buffer *s = fp_rc_ws(rc, 0, 4u * (uint64_t)M);
  fp_view src = fp_view_rows(fp_rc_in(rc, 0), M, N);
  fp_view bufs[2] = {fp_view_rows(fp_rc_ws(rc, 1, bytes), M, N),
                     fp_view_rows(fp_rc_ws(rc, 2, bytes), M, N)};
  for (int step = 0; step < 3; ++step) {
    fp_view dst = step == 2 ? fp_view_rows(fp_rc_out(rc, 0), M, N) : bufs[step];
    TRY(fp_prim_reduce_rows(rc, FP_REDUCE_SUM, s, src));
    TRY(fp_prim_binary(rc, FP_BINARY_MUL, dst, src, fp_view_perrow(s, M, N)));
    src = dst;
  }
  return FP_OK;
}

/* grad_in = y * (g - s), s = sum(g * y): s rounds as an N-term row sum of
 * terms up to |g| * |y| (fp_row_sum_floor) even where it cancels towards 0,
 * and y carries that error into every element of the row -- seen at
 * 1 x 262144 on PoCL (unfused), 4.7e-5 off with max|grad_in| about 1.3. */
static double softmax_backward_floor(const fp_problem *p, int output) {
  (void)output;
  fp_io_desc io;
  p->op->describe(p, &io);
  const double g_scale = io.in[0].fill_scale, y_scale = io.in[1].fill_scale;
  return fp_row_sum_floor(g_scale * y_scale, P_INT(p, P_N)) * y_scale;
}

/* Layernorm's output is (x - mean) * rstd * w + b with mean rounded to float:
 * that rounding, a few ulps of |mean| (an N-term sum of same-signed values,
 * then a division or a multiply by float(1/N)), passes unchanged into x - mean
 * and is multiplied by rstd * |w|. A row whose values nearly agree has an
 * rstd of up to 1/sqrt(eps), so its outputs carry an error far above the
 * problem-wide floor however the kernel is written (PyTorch's float kernels
 * share it). The floor is 8 float epsilons of that term, about 8x the largest
 * error seen over 2000 seeds of rows of 1-8 values; a mean off by 1e-4 of
 * itself, or a dropped element (~|x|/N), still fails. */
static void layernorm_row_floor(const fp_problem *p, int output, const fp_host_tensor *in,
                                int64_t r0, int64_t r1, const double *const *ref, double *floor) {
  int64_t N = P_INT(p, P_N);
  double max_w = 0.0;
  if (output == 0)
    for (int64_t j = 0; j < N; ++j)
      max_w = fmax(max_w, fabs(fp_host_at1(&in[1], j)));
  for (int64_t i = r0; i < r1; ++i) {
    double mean = ref[1][i - r0], rstd = ref[2][i - r0];
    floor[i - r0] = output == 0 ? 8.0 * FLT_EPSILON * fabs(mean) * rstd * max_w : 0.0;
  }
}

/* ---- registration -------------------------------------------------------------------------- */

const fp_op fp_op_softmax = {
    .name = "softmax",
    .family = "reduce",
    .summary = "softmax(x, dim=1), max-subtracted",
    .n_params = 2,
    .params = {FP_DIM_PARAMS},
    .grid_param = {P_M, P_N},
    .describe = softmax_describe,
    .rows = fp_rows_param_m,
    .reference = softmax_reference,
    .tol = FP_TOL_REDUCTION_SMALL_OUTPUT,
    .n_variants = 2,
    .variants = {{"fused", "one kernel, one pass per row on chip", softmax_fused},
                 {"unfused", "amax, sub, exp, sum, div", softmax_unfused}},
};

const fp_op fp_op_double_softmax = {
    .name = "double_softmax",
    .family = "reduce",
    .summary = "softmax(softmax(x, 1), 1)",
    .n_params = 2,
    .params = {FP_DIM_PARAMS},
    .grid_param = {P_M, P_N},
    .describe = softmax_describe,
    .rows = fp_rows_param_m,
    .reference = double_softmax_reference,
    .tol = FP_TOL_REDUCTION_SMALL_OUTPUT,
    .n_variants = 2,
    .variants = {{"fused", "one kernel", double_softmax_fused},
                 {"unfused", "two eager softmaxes: ten kernels", double_softmax_unfused}},
};

const fp_op fp_op_softmax_backward = {
    .name = "softmax_backward",
    .family = "reduce",
    .summary = "grad_in = y * (grad_out - sum(grad_out * y, 1, keepdim))",
    .n_params = 2,
    .params = {FP_DIM_PARAMS},
    .grid_param = {P_M, P_N},
    .describe = softmax_backward_describe,
    .rows = fp_rows_param_m,
    .reference = softmax_backward_reference,
    .tol = FP_TOL_REDUCTION,
    .tol_abs = softmax_backward_floor,
    .n_variants = 2,
    .variants = {{"fused", "one kernel", softmax_backward_fused},
                 {"unfused", "mul, sum, sub, mul", softmax_backward_unfused}},
};

const fp_op fp_op_layernorm = {
    .name = "layernorm",
    .family = "reduce",
    .summary = "(x-mean)/sqrt(var+eps)*w[N]+b[N], biased var; also outputs mean and rstd",
    .n_params = 3,
    .params = {FP_DIM_PARAMS,
               {"eps", FP_PARAM_FLOAT, 1e-5, 0.0, 1.0, NULL, "added to the variance"}},
    .grid_param = {P_M, P_N},
    .describe = layernorm_describe,
    .rows = fp_rows_param_m,
    .reference = layernorm_reference,
    .tol = FP_TOL_REDUCTION,
    .row_tol_abs = layernorm_row_floor,
    .n_variants = 2,
    .variants = {{"fused", "one kernel", layernorm_fused},
                 {"unfused", "ten eager kernels (sum, scale, sub, square, sum, ...)",
                  layernorm_unfused}},
};

const fp_op fp_op_norm_chain = {
    .name = "norm_chain",
    .family = "reduce",
    .summary = "three times: s=sum(x,1,keepdim); x=x*s",
    .n_params = 2,
    .params = {FP_DIM_PARAMS},
    .grid_param = {P_M, P_N},
    .describe = norm_chain_describe,
    .rows = fp_rows_param_m,
    .reference = norm_chain_reference,
    .tol = FP_TOL_REDUCTION_SMALL_OUTPUT,
    .n_variants = 2,
    .variants = {{"fused", "one kernel", norm_chain_fused},
                 {"unfused", "sum, mul three times: six kernels", norm_chain_unfused}},
};
