/* fuseport tests: the op checks of test_ops.c (ops_check.h): one problem
 * and variant against the float64 reference and the cost model's counts,
 * and the sweep of an op's variants, parameter combinations and shapes. */
#include <string.h>

#include "fp_device_common.h"
#include "ops_check.h"
#include "test_util.h"

#define CTX fp_env.ctx

/* Whether the backend may answer "unsupported" for this variant: the
 * vendor variant needs cuBLASLt's fused epilogues, the unfused one a GEMM
 * library of the problem's type (CLBlast has no bf16, and no f16 without
 * cl_khr_fp16). Everything else must run. */
static bool may_be_unsupported(const fp_problem *p, const fp_variant *v) {
  const fp_device_info *dev = fp_context_device(CTX);
  if (strcmp(p->op->name, "dw_from_packed") == 0 && strcmp(v->name, "unfused") == 0) {
    fp_lib_gemm g = fp_lib_gemm_plain(FP_BF16, 1, 1, 1, false);
    g.trans_a = true;
    return fp_library_gemm_check(dev, &g) != FP_OK; /* CLBlast: no bfloat16 */
  }
  if (strcmp(p->op->family, "conv") == 0) {
    /* vendor: cuDNN's conv-bias-activation only, never for batch-norm;
     * unfused: the convolution library, or on OpenCL CLBlast's GEMM of the
     * type (no bf16; f16 only with cl_khr_fp16) */
    fp_io_desc io;
    p->op->describe(p, &io);
    if (strcmp(v->name, "vendor") == 0)
      return !dev->conv_library_epilogues || strcmp(p->op->name, "conv_bn") == 0;
    if (strcmp(v->name, "unfused") == 0)
      return dev->backend == FP_BACKEND_OPENCL
                 ? fp_library_gemm_check(dev, &(fp_lib_gemm){.dtype = io.in[0].dtype,
                                                             .out_dtype = FP_DTYPE_COUNT,
                                                             .M = 1,
                                                             .N = 1,
                                                             .K = 1,
                                                             .batch = 1,
                                                             .lda = 1,
                                                             .ldb = 1,
                                                             .ldc = 1,
                                                             .ldd = 1,
                                                             .alpha = 1.0f}) != FP_OK
                 : dev->conv_library[0] == '\0';
    return false;
  }
  if (strcmp(p->op->family, "attention") == 0) { /* unfused: a GEMM library of the type */
    fp_io_desc io;
    p->op->describe(p, &io);
    fp_lib_gemm g = fp_lib_gemm_plain(io.in[0].dtype, 1, 1, 1, false);
    return strcmp(v->name, "unfused") == 0 && fp_library_gemm_check(dev, &g) != FP_OK;
  }
  if (strcmp(p->op->family, "matmul") != 0)
    return false;
  if (strcmp(v->name, "vendor") == 0)
    return !dev->gemm_library_epilogues || strcmp(p->op->name, "matmul_matmul") == 0 ||
           strcmp(p->op->name, "matmul_split_act") == 0 || strcmp(p->op->name, "linear_geglu") == 0;
  if (strcmp(v->name, "unfused") == 0) {
    fp_io_desc io;
    p->op->describe(p, &io);
    fp_lib_gemm g = fp_lib_gemm_plain(io.in[0].dtype, 1, 1, 1, false);
    return fp_library_gemm_check(dev, &g) != FP_OK;
  }
  return false;
}

/* Runs one problem with one variant and asserts the reference check and the
 * kernel and library-call counts of the cost model. */
void check_case(const fp_problem *p, const fp_variant *v) {
  char desc[256];
  fp_problem_describe(p, desc, sizeof desc);
  uint64_t seed = fp_test_next_seed();
  fp_io_desc io;
  p->op->describe(p, &io);
  fp_buffer *in[FP_MAX_TENSORS], *out[FP_MAX_TENSORS];
  fp_plan *plan = NULL;
  FP_ASSERT_OK(fp_io_alloc(CTX, &io, in, out));
  FP_ASSERT_OK(fp_io_fill_inputs(CTX, &io, seed, in));
  FP_ASSERT_OK(fp_io_poison_outputs(CTX, &io, out));
  fp_status created = fp_plan_create(CTX, p, v, &plan);
  if (created == FP_ERR_UNSUPPORTED && may_be_unsupported(p, v)) {
    fp_io_free(&io, in, out);
    return;
  }
  FP_ASSERT_OK(created);
  fp_counters before, after;
  fp_counters_get(CTX, &before);
  FP_ASSERT_OK(fp_plan_execute(plan, in, out));
  fp_counters_get(CTX, &after);
  fp_host_tensor views[FP_MAX_TENSORS];
  fp_host_inputs_generated(&io, seed, views);
  fp_row_sample all = fp_row_sample_for(p, &io, 0);
  fp_accuracy acc;
  FP_ASSERT_OK(fp_check_outputs(CTX, p, &io, views, out, &all, &acc));
  if (!acc.ok)
    fail_msg("%s %s %s (seed %llu): %lld of %lld bad; %s", p->op->name, v->name, desc,
             (unsigned long long)seed, (long long)acc.bad, (long long)acc.checked, acc.first_bad);
  assert_int_equal(after.kernels_launched - before.kernels_launched, fp_plan_cost(plan)->kernels);
  assert_int_equal(after.library_calls - before.library_calls, fp_plan_cost(plan)->library_calls);
  fp_plan_destroy(plan);
  fp_io_free(&io, in, out);
}

/* Every variant, every boolean/choice combination, every one of the shapes
 * (n_shapes shapes of the op's rank, flattened). */
void check_op_grid(const fp_op *op, const int64_t *shapes, int n_shapes) {
  const int rank = fp_op_grid_rank(op);
  int combos = 1;
  for (int k = 0; k < op->n_params; ++k)
    if (op->params[k].type == FP_PARAM_BOOL || op->params[k].type == FP_PARAM_CHOICE)
      combos *= (int)(op->params[k].max - op->params[k].min + 1);
  for (int s = 0; s < n_shapes; ++s)
    for (int c = 0; c < combos; ++c) {
      fp_problem p;
      fp_problem_init(&p, op);
      FP_ASSERT_OK(fp_problem_set_grid(&p, shapes + s * rank, rank));
      int rest = c;
      for (int k = 0; k < op->n_params; ++k) {
        const fp_param_decl *d = &op->params[k];
        if (d->type == FP_PARAM_BOOL || d->type == FP_PARAM_CHOICE) {
          int n = (int)(d->max - d->min + 1);
          p.v[k] = d->min + rest % n;
          rest /= n;
        }
      }
      for (int v = 0; v < op->n_variants; ++v)
        check_case(&p, &op->variants[v]);
    }
}

void check_op_shapes(const fp_op *op, const int64_t (*shapes)[2], int n_shapes) {
  check_op_grid(op, &shapes[0][0], n_shapes);
}
