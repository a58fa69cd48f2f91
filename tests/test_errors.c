#define _POSIX_C_SOURCE 200809L
/* fuseport tests: every error path of the op layer and of context creation
 * returns a status and a message that names the problem, crashes nothing and
 * leaks nothing (this binary runs under AddressSanitizer in CI). CPU backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define CTX fp_env.ctx

static void test_unknown_names(void **state) {
  (void)state;
  const fp_op *op = NULL;
  FP_ASSERT_ERR(fp_op_lookup("softmaxx", &op), FP_ERR_NOT_FOUND, "softmaxx");
  assert_true(strstr(fp_last_error(), "layernorm") != NULL); /* lists the known ops */
  assert_null(fp_op_find("nope"));
  assert_null(fp_op_find(NULL));
  FP_ASSERT_OK(fp_op_lookup("softmax", &op));
  const fp_variant *v = NULL;
  FP_ASSERT_ERR(fp_op_variant_lookup(op, "half-fused", &v), FP_ERR_NOT_FOUND, "fused, unfused");
  fp_backend_kind kind;
  FP_ASSERT_ERR(fp_backend_parse("vulkan", &kind), FP_ERR_NOT_FOUND, "vulkan");
  FP_ASSERT_ERR(fp_backend_parse(NULL, &kind), FP_ERR_INVALID_ARGUMENT, "NULL");
}

static void test_bad_parameters(void **state) {
  (void)state;
  const fp_op *op = fp_op_find("bias_dropout_add");
  fp_problem p;
  fp_problem_init(&p, op);
  FP_ASSERT_ERR(fp_problem_set(&p, "K", "3"), FP_ERR_NOT_FOUND, "layout");
  FP_ASSERT_ERR(fp_problem_set(&p, "M", "0"), FP_ERR_INVALID_ARGUMENT, "M=0");
  FP_ASSERT_ERR(fp_problem_set(&p, "M", "-5"), FP_ERR_INVALID_ARGUMENT, "out of range");
  FP_ASSERT_ERR(fp_problem_set(&p, "M", "12x"), FP_ERR_INVALID_ARGUMENT, "not an integer");
  FP_ASSERT_ERR(fp_problem_set(&p, "M", ""), FP_ERR_INVALID_ARGUMENT, "not an integer");
  FP_ASSERT_ERR(fp_problem_set(&p, "p", "1.5"), FP_ERR_INVALID_ARGUMENT, "p=1.5");
  FP_ASSERT_ERR(fp_problem_set(&p, "p", "nan"), FP_ERR_INVALID_ARGUMENT, "p=");
  FP_ASSERT_ERR(fp_problem_set(&p, "training", "maybe"), FP_ERR_INVALID_ARGUMENT, "boolean");
  FP_ASSERT_ERR(fp_problem_set(&p, "layout", "diagonal"), FP_ERR_INVALID_ARGUMENT,
                "contiguous, transposed");
  FP_ASSERT_ERR(fp_problem_set_grid2(&p, 0, 5), FP_ERR_INVALID_ARGUMENT, "M=0");
  FP_ASSERT_ERR(fp_problem_set_grid2(&p, 5, -1), FP_ERR_INVALID_ARGUMENT, "N=-1");
  /* each dimension in range, the product past 64-bit byte counts */
  FP_ASSERT_OK(fp_problem_set(&p, "M", "1099511627776"));
  FP_ASSERT_OK(fp_problem_set(&p, "N", "1099511627776"));
  FP_ASSERT_ERR(fp_problem_validate(&p), FP_ERR_INVALID_ARGUMENT, "overflows");
  FP_ASSERT_ERR(fp_problem_validate(NULL), FP_ERR_INVALID_ARGUMENT, "NULL");
  fp_cost cost;
  FP_ASSERT_ERR(fp_variant_cost(&p, &op->variants[0], NULL, &cost), FP_ERR_INVALID_ARGUMENT,
                "overflows");
  /* a variant of another op */
  fp_problem q;
  fp_problem_init(&q, fp_op_find("softmax"));
  FP_ASSERT_ERR(fp_variant_cost(&q, &op->variants[0], NULL, &cost), FP_ERR_INVALID_ARGUMENT,
                "not a variant");
}

/* Attention's bad input: a head dim past the kernels', a length of 0; a
 * 4-dim shape is B x H x S x D (the key length from the parameters). */
static void test_attention_bad_input(void **state) {
  (void)state;
  const fp_op *op = fp_op_find("attention");
  assert_non_null(op);
  fp_problem p;
  fp_problem_init(&p, op);
  const int64_t wide[] = {1, 2, 5, 300};
  FP_ASSERT_OK(fp_problem_set_grid(&p, wide, 4));
  FP_ASSERT_ERR(fp_problem_validate(&p), FP_ERR_INVALID_ARGUMENT, "D=300");
  const int64_t short_shape[] = {2, 3, 7, 80};
  FP_ASSERT_OK(fp_problem_set_grid(&p, short_shape, 4));
  FP_ASSERT_OK(fp_problem_set(&p, "SK", "11"));
  FP_ASSERT_OK(fp_problem_validate(&p));
  assert_int_equal(fp_problem_int(&p, 4), 80); /* D */
  assert_int_equal(fp_problem_int(&p, 3), 11); /* SK, not a shape dim */
  fp_io_desc io;
  op->describe(&p, &io);
  assert_int_equal(io.in[1].shape[2], 11);
  assert_int_equal(io.out[0].shape[0], 2 * 3 * 7);
  const int64_t zero[] = {1, 2, 0, 64};
  FP_ASSERT_ERR(fp_problem_set_grid(&p, zero, 4), FP_ERR_INVALID_ARGUMENT, "S");
  FP_ASSERT_ERR(fp_problem_set(&p, "S", "0"), FP_ERR_INVALID_ARGUMENT, "S=0");
  const int64_t three[] = {1, 2, 3};
  FP_ASSERT_ERR(fp_problem_set_grid(&p, three, 3), FP_ERR_INVALID_ARGUMENT, "BxHxSxSKxD");
}

/* A convolution's bad input: a filter past the padded input, dims or a
 * stride of 0, and the library call's own checks. */
static void test_conv_bad_input(void **state) {
  (void)state;
  const fp_op *op = fp_op_find("conv_relu");
  fp_problem p;
  fp_problem_init(&p, op);
  const int64_t small[] = {1, 3, 4, 4, 8, 7, 1};
  FP_ASSERT_OK(fp_problem_set_grid(&p, small, 7));
  FP_ASSERT_OK(fp_problem_set(&p, "padding", "1"));
  FP_ASSERT_ERR(fp_problem_validate(&p), FP_ERR_INVALID_ARGUMENT, "does not fit");
  FP_ASSERT_ERR(fp_problem_set(&p, "stride", "0"), FP_ERR_INVALID_ARGUMENT, "out of range");
  FP_ASSERT_ERR(fp_problem_set(&p, "C", "0"), FP_ERR_INVALID_ARGUMENT, "C=0");
  FP_ASSERT_ERR(fp_problem_set(&p, "dilation", "-1"), FP_ERR_INVALID_ARGUMENT, "out of range");
  const int64_t four[] = {1, 3, 4, 4};
  FP_ASSERT_ERR(fp_problem_set_grid(&p, four, 4), FP_ERR_INVALID_ARGUMENT, "NxCxHxWxKxRxstride");
  FP_ASSERT_OK(fp_problem_set(&p, "r", "3")); /* case-insensitive where unique */
  FP_ASSERT_OK(fp_problem_validate(&p));
  fp_lib_conv c;
  memset(&c, 0, sizeof c);
  c.dtype = FP_F32;
  c.N = c.C = c.H = c.W = c.K = c.R = c.S = c.stride = c.dil = 1;
  fp_device_info dev;
  memset(&dev, 0, sizeof dev);
  snprintf(dev.conv_library, sizeof dev.conv_library, "test");
  dev.conv_library_dtypes = 1u << FP_F32;
  FP_ASSERT_OK(fp_library_conv_check(&dev, &c));
  c.stride = 0;
  FP_ASSERT_ERR(fp_library_conv_check(&dev, &c), FP_ERR_INVALID_ARGUMENT, "stride");
  c.stride = 1;
  c.R = 3;
  FP_ASSERT_ERR(fp_library_conv_check(&dev, &c), FP_ERR_INVALID_ARGUMENT, "larger than");
  c.R = 1;
  c.dtype = FP_F16;
  FP_ASSERT_ERR(fp_library_conv_check(&dev, &c), FP_ERR_UNSUPPORTED, "no f16");
  assert_int_equal(fp_conv_out_dim(56, 3, 2, 1, 1), 28);
  assert_int_equal(fp_conv_out_dim(224, 7, 2, 3, 1), 112);
  assert_int_equal(fp_conv_out_dim(3, 5, 1, 0, 1), 0);
}

static void test_context_errors(void **state) {
  (void)state;
  fp_context *ctx = (fp_context *)&ctx;
  fp_context_options opts;
  fp_context_options_init(&opts);
  opts.device_index = 3;
  FP_ASSERT_ERR(fp_context_create(&opts, &ctx), FP_ERR_NOT_FOUND, "index 3");
  assert_null(ctx);
  FP_ASSERT_ERR(fp_context_create(NULL, &ctx), FP_ERR_INVALID_ARGUMENT, "NULL");
  opts.device_index = -1;
  opts.device_name = "TPU";
  FP_ASSERT_ERR(fp_context_create(&opts, &ctx), FP_ERR_NOT_FOUND, "TPU");
  opts.device_name = NULL;
  opts.backend = (fp_backend_kind)42;
  FP_ASSERT_ERR(fp_context_create(&opts, &ctx), FP_ERR_NOT_FOUND, "42");
  for (int k = 0; k < FP_BACKEND_COUNT; ++k) {
    if (fp_backend_compiled((fp_backend_kind)k))
      continue;
    opts.backend = (fp_backend_kind)k;
    FP_ASSERT_ERR(fp_context_create(&opts, &ctx), FP_ERR_UNSUPPORTED, "not compiled");
  }
}

/* The CPU device's memory cap from the environment, and a bad value. */
static void test_cpu_mem_limit_env(void **state) {
  (void)state;
  fp_context_options opts;
  fp_context_options_init(&opts);
  fp_context *ctx = NULL;
  setenv("FUSEPORT_CPU_MEM_LIMIT", "lots", 1);
  FP_ASSERT_ERR(fp_context_create(&opts, &ctx), FP_ERR_INVALID_ARGUMENT, "FUSEPORT_CPU_MEM_LIMIT");
  assert_null(ctx);
  setenv("FUSEPORT_CPU_MEM_LIMIT", "3M", 1);
  FP_ASSERT_OK(fp_context_create(&opts, &ctx));
  assert_int_equal(fp_context_mem_limit(ctx), 3u << 20);
  assert_int_equal(fp_context_device(ctx)->global_mem_bytes, 3u << 20);
  fp_buffer *buf = NULL;
  FP_ASSERT_ERR(fp_buffer_alloc(ctx, 4u << 20, &buf), FP_ERR_OUT_OF_MEMORY, "out of device memory");
  fp_context_destroy(ctx);
  unsetenv("FUSEPORT_CPU_MEM_LIMIT");
}

/* Runs an op under a cap too small for it: io or plan allocation fails with
 * OOM, and every byte allocated on the way is given back. */
static void test_op_out_of_memory(void **state) {
  (void)state;
  const fp_op *op = fp_op_find("double_softmax");
  fp_problem p;
  fp_problem_init(&p, op);
  FP_ASSERT_OK(fp_problem_set_grid2(&p, 256, 1024)); /* 1 MiB per [M,N] tensor */
  fp_io_desc io;
  op->describe(&p, &io);
  fp_counters base;
  fp_counters_get(CTX, &base);
  fp_buffer *in[FP_MAX_TENSORS], *out[FP_MAX_TENSORS];
  /* inputs and outputs fit (2 MiB), the unfused workspace (3 MiB + rows) does not */
  FP_ASSERT_OK(fp_context_set_mem_limit(CTX, base.bytes_current + (3u << 20)));
  FP_ASSERT_OK(fp_io_alloc(CTX, &io, in, out));
  fp_plan *plan = (fp_plan *)&plan;
  FP_ASSERT_ERR(fp_plan_create(CTX, &p, fp_op_variant(op, "unfused"), &plan), FP_ERR_OUT_OF_MEMORY,
                "out of device memory");
  assert_null(plan);
  fp_counters mid;
  fp_counters_get(CTX, &mid);
  assert_int_equal(mid.bytes_current, base.bytes_current + (2u << 20)); /* workspace freed */
  /* the fused variant needs no workspace and runs */
  FP_ASSERT_OK(fp_plan_create(CTX, &p, fp_op_variant(op, "fused"), &plan));
  FP_ASSERT_OK(fp_plan_execute(plan, in, out));
  fp_plan_destroy(plan);
  fp_io_free(&io, in, out);
  /* now not even the inputs fit: all or nothing */
  FP_ASSERT_OK(fp_context_set_mem_limit(CTX, base.bytes_current + (1u << 20) + 512));
  FP_ASSERT_ERR(fp_io_alloc(CTX, &io, in, out), FP_ERR_OUT_OF_MEMORY, "out of device memory");
  fp_counters end;
  fp_counters_get(CTX, &end);
  assert_int_equal(end.bytes_current, base.bytes_current);
  FP_ASSERT_OK(fp_context_set_mem_limit(CTX, 0));
}

/* Buffers handed to a plan are checked: NULL, too small, another context's,
 * an output that is also an input. */
static void test_plan_buffer_errors(void **state) {
  (void)state;
  const fp_op *op = fp_op_find("bias_gelu");
  fp_problem p;
  fp_problem_init(&p, op);
  FP_ASSERT_OK(fp_problem_set_grid2(&p, 3, 1000));
  fp_io_desc io;
  op->describe(&p, &io);
  fp_buffer *in[FP_MAX_TENSORS], *out[FP_MAX_TENSORS];
  FP_ASSERT_OK(fp_io_alloc(CTX, &io, in, out));
  fp_plan *plan = NULL;
  FP_ASSERT_ERR(fp_plan_create(CTX, &p, NULL, &plan), FP_ERR_INVALID_ARGUMENT, "variant");
  FP_ASSERT_ERR(fp_plan_create(NULL, &p, &op->variants[0], &plan), FP_ERR_INVALID_ARGUMENT,
                "context");
  FP_ASSERT_ERR(fp_plan_create(CTX, &p, &fp_op_find("softmax")->variants[0], &plan),
                FP_ERR_INVALID_ARGUMENT, "not a variant");
  FP_ASSERT_OK(fp_plan_create(CTX, &p, &op->variants[0], &plan));
  FP_ASSERT_ERR(fp_plan_execute(NULL, in, out), FP_ERR_INVALID_ARGUMENT, "plan is NULL");
  FP_ASSERT_ERR(fp_plan_execute(plan, NULL, out), FP_ERR_INVALID_ARGUMENT, "NULL");
  fp_buffer *bad_in[2] = {in[0], NULL};
  FP_ASSERT_ERR(fp_plan_execute(plan, bad_in, out), FP_ERR_INVALID_ARGUMENT, "bias");
  fp_buffer *small = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(CTX, 100, &small));
  fp_buffer *small_out[1] = {small};
  FP_ASSERT_ERR(fp_plan_execute(plan, in, small_out), FP_ERR_INVALID_ARGUMENT, "needs 12000");
  fp_buffer *alias_out[1] = {in[0]};
  FP_ASSERT_ERR(fp_plan_execute(plan, in, alias_out), FP_ERR_INVALID_ARGUMENT, "same buffer");
  fp_context_options opts;
  fp_context_options_init(&opts);
  fp_context *other = NULL;
  FP_ASSERT_OK(fp_context_create(&opts, &other));
  fp_buffer *foreign = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(other, 12000, &foreign));
  fp_buffer *foreign_out[1] = {foreign};
  FP_ASSERT_ERR(fp_plan_execute(plan, in, foreign_out), FP_ERR_INVALID_ARGUMENT, "context");
  FP_ASSERT_OK(fp_plan_execute(plan, in, out)); /* and the right buffers still work */
  fp_buffer_free(foreign);
  fp_context_destroy(other);
  fp_buffer_free(small);
  fp_plan_destroy(plan);
  fp_io_free(&io, in, out);
}

/* Tensor descriptions through the public helpers: a negative dim or a
 * product past int64 is marked invalid (it was signed overflow, undefined)
 * and fp_io_alloc refuses it by name instead of asking for a wrapped byte
 * count. */
static void test_tensor_overflow(void **state) {
  (void)state;
  fp_io_desc io;
  memset(&io, 0, sizeof io);
  io.n_in = 1;
  io.n_out = 1;
  fp_tensor_2d(&io.in[0], "x", INT64_MAX / 2, 3);
  assert_int_equal(io.in[0].storage_elems, -1);
  assert_true(fp_tensor_bytes(&io.in[0]) == UINT64_MAX);
  fp_tensor_4d(&io.out[0], "y", 1 << 20, 1 << 20, 1 << 20, 1 << 4);
  assert_int_equal(io.out[0].storage_elems, -1);
  fp_tensor_1d(&io.out[0], "y", -3);
  assert_int_equal(io.out[0].storage_elems, -1);
  /* in range, but 2^62 floats are more bytes than uint64 holds */
  fp_tensor_2d(&io.out[0], "y", INT64_C(1) << 31, INT64_C(1) << 31);
  assert_int_equal(io.out[0].storage_elems, INT64_C(1) << 62);
  assert_true(fp_tensor_bytes(&io.out[0]) == UINT64_MAX);
  fp_tensor_2d(&io.in[0], "x", 3, 5);
  assert_int_equal(fp_tensor_bytes(&io.in[0]), 60);
  fp_buffer *in[FP_MAX_TENSORS], *out[FP_MAX_TENSORS];
  FP_ASSERT_ERR(fp_io_alloc(CTX, &io, in, out), FP_ERR_INVALID_ARGUMENT, "tensor 'y'");
  assert_null(in[0]);
}

/* The cost model: fused moves the minimum; unfused launches a kernel (or
 * calls a library) per step and moves more; both count what runs. On the
 * CPU backend's device, where no GEMM operand needs padding or split-K. */
static void test_cost_model(void **state) {
  (void)state;
  const fp_device_info *dev = fp_context_device(fp_env.ctx);
  for (int k = 0; k < fp_op_count(); ++k) {
    const fp_op *op = fp_op_at(k);
    fp_problem p;
    fp_problem_init(&p, op);
    const int64_t shape[4] = {512, fp_op_grid_rank(op) == 4 ? 128 : 2048, 256, 384};
    const int64_t conv_shape[7] = {8, 64, 28, 28, 64, 3, 1}; /* N x C x H x W x K x R x stride */
    const int64_t attn_shape[5] = {2, 4, 256, 256, 64};      /* B x H x S x SK x D */
    const int rank = fp_op_grid_rank(op);
    assert_true(rank == 7 || rank == 5 || rank <= 4);
    FP_ASSERT_OK(fp_problem_set_grid(&p,
                                     rank == 7   ? conv_shape
                                     : rank == 5 ? attn_shape
                                                 : shape,
                                     rank));
    fp_io_desc io;
    op->describe(&p, &io);
    uint64_t in_bytes = 0, out_bytes = 0;
    for (int t = 0; t < io.n_in; ++t)
      in_bytes += fp_tensor_bytes(&io.in[t]);
    for (int t = 0; t < io.n_out; ++t)
      out_bytes += fp_tensor_bytes(&io.out[t]);
    fp_cost fused, unfused;
    FP_ASSERT_OK(fp_variant_cost(&p, fp_op_variant(op, "fused"), dev, &fused));
    FP_ASSERT_OK(fp_variant_cost(&p, fp_op_variant(op, "unfused"), dev, &unfused));
    assert_int_equal(fused.kernels, 1);
    assert_int_equal(fused.library_calls, 0);
    assert_int_equal(fused.bytes_read, in_bytes);
    assert_int_equal(fused.bytes_written, out_bytes);
    assert_int_equal(fused.workspace_bytes, 0);
    assert_true(unfused.kernels + unfused.library_calls >= 2);
    assert_true(unfused.bytes_read + unfused.bytes_written >
                fused.bytes_read + fused.bytes_written);
    assert_true(fused.flops > 0 && unfused.flops > 0);
    assert_true((unfused.n_kernel_ids >= 1 || unfused.library_calls >= 2) &&
                fused.n_kernel_ids == 1);
  }
}

int main(int argc, char **argv) {
  (void)argc;
  int rc = fp_test_env_open(1, argv, "test_errors"); /* always the CPU backend */
  if (rc != 0 || fp_env.ctx == NULL)
    return rc != 0 ? rc : 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unknown_names),       cmocka_unit_test(test_bad_parameters),
      cmocka_unit_test(test_context_errors),      cmocka_unit_test(test_cpu_mem_limit_env),
      cmocka_unit_test(test_op_out_of_memory),    cmocka_unit_test(test_plan_buffer_errors),
      cmocka_unit_test(test_cost_model),          cmocka_unit_test(test_conv_bad_input),
      cmocka_unit_test(test_attention_bad_input), cmocka_unit_test(test_tensor_overflow),
  };
  int failures = cmocka_run_group_tests_name("errors", tests, NULL, NULL);
  fp_test_env_close();
  return failures;
}
