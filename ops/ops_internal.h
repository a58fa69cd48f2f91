/* fuseport operators: shared helpers of the op family files. */
#ifndef FUSEPORT_OPS_INTERNAL_H
#define FUSEPORT_OPS_INTERNAL_H

#include <math.h>
#include <string.h>

#include "gemm_plan.h"
#include "recipe.h"

#define P_INT(p, k) fp_problem_int((p), (k))

/* Every 2-D op of the seed study: M rows (dim0) by N columns (dim1). */
enum { P_M = 0, P_N = 1 };
#define FP_DIM_MAX 1099511627776.0 /* 2^40 per dimension; products are checked too */
#define FP_DIM_PARAMS                                                                              \
  {"M", FP_PARAM_DIM, 1024, 1, FP_DIM_MAX, NULL, "rows (the seed's dim0)"}, {                      \
    "N", FP_PARAM_DIM, 1024, 1, FP_DIM_MAX, NULL,                                                  \
        "columns (dim1): contiguous, and the reduced dimension of row reductions"                  \
  }

/* Tolerances (see fp_tolerance): float32 elementwise math is a few ulps off
 * the float64 reference, with cancellation bounded by the inputs' O(1) scale
 * (hence the 1e-6 floor); reductions add the rounding of an N-term sum, and
 * norm_chain compounds three of them. Ops whose outputs are legitimately tiny
 * everywhere (softmax of long rows ~1/N, norm_chain ~1e-9) get no absolute
 * floor: it would hide real errors there. */
#define FP_TOL_ELEMENTWISE                                                                         \
  { 1e-5, 1e-6, 1e-6 }
#define FP_TOL_REDUCTION                                                                           \
  { 1e-4, 1e-5, 1e-6 }
#define FP_TOL_REDUCTION_SMALL_OUTPUT                                                              \
  { 1e-4, 1e-5, 0.0 }

/* The absolute floor of an output that carries an N-term float32 row sum of
 * terms up to term_scale in magnitude: the sum's rounding is about
 * eps * sqrt(N) * term_scale (pairwise or tree order) even when the sum
 * itself cancels towards 0, where a relative bound no longer covers it. The
 * floor is ~10x that typical error and still far below the ~term_scale/2
 * that a missing or doubled term would cost. */
static inline double fp_row_sum_floor(double term_scale, int64_t N) {
  return 1e-6 * term_scale * sqrt((double)N);
}

#define TRY(expr)                                                                                  \
  do {                                                                                             \
    fp_status try_status_ = (expr);                                                                \
    if (try_status_ != FP_OK)                                                                      \
      return try_status_;                                                                          \
  } while (0)

int64_t fp_rows_param_m(const fp_problem *p);

/* The op by name, not by address: the benchmark runs ops through copies of
 * their descriptors (a cached reference). */
static inline bool fp_is_op(const fp_op *op, const fp_op *which) {
  return strcmp(op->name, which->name) == 0;
}

/* Fill scale of an operand summed over X terms: uniform values in
 * [-s, s) with s = 2^(1 - ceil(ceil(log2 X) / 2)), about 2/sqrt(X), so that
 * products stay O(1) whatever the depth (the split activation's sigmoid and
 * tanh are then not saturated, and float16 never overflows). A power of two,
 * so the fill stays exact; torch_bench.py uses the same rule. */
static inline float fp_sum_scale(int64_t X) {
  int c = 0;
  while (c < 62 && ((int64_t)1 << c) < X)
    ++c;
  return ldexpf(1.0f, 1 - (c + 1) / 2);
}

/* The CUDA GEMM planner's view of a device. */
static inline fp_gemm_device fp_gemm_device_of(const fp_device_info *dev) {
  fp_gemm_device d;
  d.cc_major = (int)dev->cc_major;
  d.cc_minor = (int)dev->cc_minor;
  d.sm_count = (int)dev->compute_units;
  d.smem_optin = dev->local_mem_optin_bytes;
  return d;
}

static inline uint64_t fp_tensor_desc_elems(const fp_tensor_desc *t) {
  uint64_t n = 1;
  for (int d = 0; d < t->rank; ++d)
    n *= (uint64_t)t->shape[d];
  return n;
}

extern const fp_op fp_op_pointwise_chain, fp_op_bias_gelu, fp_op_bias_dropout_add;
extern const fp_op fp_op_softmax, fp_op_double_softmax, fp_op_softmax_backward, fp_op_layernorm,
    fp_op_norm_chain;
extern const fp_op fp_op_hreduce_pointwise, fp_op_hreduce_reduce;
extern const fp_op fp_op_matmul_add, fp_op_matmul_relu, fp_op_matmul_add_relu, fp_op_matmul_matmul,
    fp_op_matmul_split_act, fp_op_linear_geglu;
extern const fp_op fp_op_quant_pack, fp_op_dequant_unpack, fp_op_relu_pack,
    fp_op_relu_unpack_backward, fp_op_dw_from_packed;
extern const fp_op fp_op_conv_add, fp_op_conv_relu, fp_op_conv_bn;
extern const fp_op fp_op_attention;

#endif
