/* fuseport operators, family horizontal: two results from one input
 * (SPEC.md, "Horizontal fusion"). Fused, the input is read once; unfused,
 * once per result. */
#include <math.h>

#include "fp_device_common.h"
#include "ops_internal.h"

static void hreduce_pointwise_describe(const fp_problem *p, fp_io_desc *io) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  io->n_in = 1;
  io->n_out = 2;
  fp_tensor_2d(&io->in[0], "a", M, N);
  io->in[0].fill_scale = 4.0f;
  fp_tensor_1d(&io->out[0], "sum", M);
  fp_tensor_2d(&io->out[1], "cos", M, N);
}

static void hreduce_reduce_describe(const fp_problem *p, fp_io_desc *io) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  io->n_in = 1;
  io->n_out = 2;
  fp_tensor_2d(&io->in[0], "a", M, N);
  fp_tensor_1d(&io->out[0], "sum", M);
  fp_tensor_1d(&io->out[1], "amax", M);
}

static void hreduce_pointwise_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0,
                                        int64_t r1, double *const *out) {
  int64_t N = P_INT(p, P_N);
  for (int64_t i = r0; i < r1; ++i) {
    double s = 0.0;
    for (int64_t j = 0; j < N; ++j) {
      double a = fp_host_at2(&in[0], i, j);
      s += a;
      out[1][(i - r0) * N + j] = cos(a);
    }
    out[0][i - r0] = s;
  }
}

static void hreduce_reduce_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0,
                                     int64_t r1, double *const *out) {
  int64_t N = P_INT(p, P_N);
  for (int64_t i = r0; i < r1; ++i) {
    double s = 0.0, m = -INFINITY;
    for (int64_t j = 0; j < N; ++j) {
      double a = fp_host_at2(&in[0], i, j);
      s += a;
      m = (isnan(a) || a > m) ? a : m;
    }
    out[0][i - r0] = s;
    out[1][i - r0] = m;
  }
}

/* Output 0 of both ops is a row sum of N values uniform in [-scale, scale)
 * (fp_row_sum_floor) -- seen at 1 x 262144, a sum of -0.0896 off by 4.3e-5
 * on PoCL. */
static double row_sum_floor(const fp_problem *p, int output) {
  if (output != 0)
    return 1e-6;
  fp_io_desc io;
  p->op->describe(p, &io);
  return fp_row_sum_floor(io.in[0].fill_scale, P_INT(p, P_N));
}

static fp_status launch_horizontal(fp_recipe *rc, const fp_problem *p, fp_kernel_id kernel,
                                   const fp_io_desc *io) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  fp_arg a[] = {fp_arg_buf(fp_rc_out(rc, 0)), fp_arg_buf(fp_rc_out(rc, 1)),
                fp_arg_buf(fp_rc_in(rc, 0)), fp_arg_i64(M), fp_arg_i64(N)};
  fp_ndrange nd = fp_rows_range(rc, M, N);
  return fp_rc_launch(rc, kernel, &nd, a, 5,
                      fp_kcost(fp_tensor_bytes(&io->in[0]),
                               fp_tensor_bytes(&io->out[0]) + fp_tensor_bytes(&io->out[1]),
                               2.0 * (double)M * (double)N));
}

static fp_status hreduce_pointwise_fused(fp_recipe *rc, const fp_problem *p) {
  fp_io_desc io;
  hreduce_pointwise_describe(p, &io);
  return launch_horizontal(rc, p, FPK_hreduce_pointwise_fused, &io);
}

static fp_status hreduce_reduce_fused(fp_recipe *rc, const fp_problem *p) {
  fp_io_desc io;
  hreduce_reduce_describe(p, &io);
  return launch_horizontal(rc, p, FPK_hreduce_reduce_fused, &io);
}

static fp_status hreduce_pointwise_unfused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  fp_view a = fp_view_rows(fp_rc_in(rc, 0), M, N);
  TRY(fp_prim_reduce_rows(rc, FP_REDUCE_SUM, fp_rc_out(rc, 0), a));
  return fp_prim_unary(rc, FP_UNARY_COS, 1.0f, 0.0f, fp_view_rows(fp_rc_out(rc, 1), M, N), a);
}

static fp_status hreduce_reduce_unfused(fp_recipe *rc, const fp_problem *p) {
  int64_t M = P_INT(p, P_M), N = P_INT(p, P_N);
  fp_view a = fp_view_rows(fp_rc_in(rc, 0), M, N);
  TRY(fp_prim_reduce_rows(rc, FP_REDUCE_SUM, fp_rc_out(rc, 0), a));
  return fp_prim_reduce_rows(rc, FP_REDUCE_MAX, fp_rc_out(rc, 1), a);
}

const fp_op fp_op_hreduce_pointwise = {
    .name = "hreduce_pointwise",
    .family = "horizontal",
    .summary = "b=sum(a,1) [M] and c=cos(a) [M,N] from one input",
    .n_params = 2,
    .params = {FP_DIM_PARAMS},
    .grid_param = {P_M, P_N},
    .describe = hreduce_pointwise_describe,
    .rows = fp_rows_param_m,
    .reference = hreduce_pointwise_reference,
    .tol = FP_TOL_REDUCTION,
    .tol_abs = row_sum_floor,
    .n_variants = 2,
    .variants = {{"fused", "one kernel, one read of a", hreduce_pointwise_fused},
                 {"unfused", "sum, cos: two kernels, two reads", hreduce_pointwise_unfused}},
};

const fp_op fp_op_hreduce_reduce = {
    .name = "hreduce_reduce",
    .family = "horizontal",
    .summary = "b=sum(a,1) and c=amax(a,1), both [M], from one input",
    .n_params = 2,
    .params = {FP_DIM_PARAMS},
    .grid_param = {P_M, P_N},
    .describe = hreduce_reduce_describe,
    .rows = fp_rows_param_m,
    .reference = hreduce_reduce_reference,
    .tol = FP_TOL_REDUCTION,
    .tol_abs = row_sum_floor,
    .n_variants = 2,
    .variants = {{"fused", "one kernel, one read of a", hreduce_reduce_fused},
                 {"unfused", "sum, amax: two kernels, two reads", hreduce_reduce_unfused}},
};
