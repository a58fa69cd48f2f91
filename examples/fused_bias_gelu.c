/* One fused operator through fuseport's public API: bias_gelu,
 *   out[i, j] = gelu_tanh(inp[i, j] + bias[j]),
 * on the best backend present (CUDA, then OpenCL, then the CPU backend), on
 * inputs written from the host, checked against plain C. Exit 0 when every
 * element is within float32 rounding of the host's value.
 *
 * Build against an installed fuseport (examples/CMakeLists.txt):
 *   cmake -S examples -B build-example -DCMAKE_PREFIX_PATH=/usr/local
 * or with pkg-config:
 *   cc fused_bias_gelu.c $(pkg-config --cflags --libs fuseport) -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "op.h"

enum { ROWS = 3, COLS = 1000 };

static int fail(const char *what, fp_status status, const fp_context *ctx) {
  fprintf(stderr, "fused_bias_gelu: %s: %s: %s\n", what, fp_status_name(status),
          ctx != NULL ? fp_context_error(ctx) : fp_last_error());
  return 1;
}

/* CUDA, then OpenCL, then the CPU backend: the first with a device. */
static fp_context *best_context(void) {
  const fp_backend_kind order[] = {FP_BACKEND_CUDA, FP_BACKEND_OPENCL, FP_BACKEND_CPU};
  for (int k = 0; k < 3; ++k) {
    if (!fp_backend_compiled(order[k]) || fp_backend_device_count(order[k], NULL) < 1)
      continue;
    fp_context_options opts;
    fp_context_options_init(&opts);
    opts.backend = order[k];
    fp_context *ctx = NULL;
    if (fp_context_create(&opts, &ctx) == FP_OK)
      return ctx;
    fprintf(stderr, "fused_bias_gelu: %s: %s (trying the next backend)\n",
            fp_backend_name(order[k]), fp_last_error());
  }
  return NULL;
}

int main(void) {
  fp_context *ctx = best_context();
  if (ctx == NULL)
    return fail("no backend could create a context", FP_ERR_INVALID_ARGUMENT, NULL);
  printf("backend %s, device %s\n", fp_backend_name(fp_context_backend(ctx)),
         fp_context_device(ctx)->name);

  const fp_op *op = NULL;
  fp_status st = fp_op_lookup("bias_gelu", &op);
  if (st != FP_OK)
    return fail("bias_gelu", st, NULL);
  fp_problem problem;
  fp_problem_init(&problem, op);
  char rows[16], cols[16];
  snprintf(rows, sizeof rows, "%d", ROWS);
  snprintf(cols, sizeof cols, "%d", COLS);
  if ((st = fp_problem_set(&problem, "M", rows)) != FP_OK ||
      (st = fp_problem_set(&problem, "N", cols)) != FP_OK)
    return fail("problem", st, NULL);

  const fp_variant *fused = NULL;
  fp_plan *plan = NULL;
  if ((st = fp_op_variant_lookup(op, "fused", &fused)) != FP_OK ||
      (st = fp_plan_create(ctx, &problem, fused, &plan)) != FP_OK)
    return fail("plan", st, ctx);

  /* The op's inputs and outputs (inp [M, N], bias [N]; out [M, N], float32). */
  fp_io_desc io;
  op->describe(&problem, &io);
  fp_buffer *in[FP_MAX_TENSORS] = {0}, *out[FP_MAX_TENSORS] = {0};
  if ((st = fp_io_alloc(ctx, &io, in, out)) != FP_OK)
    return fail("buffers", st, ctx);

  static float inp[ROWS * COLS], bias[COLS], got[ROWS * COLS];
  for (int j = 0; j < COLS; ++j)
    bias[j] = (float)((j % 7) - 3) * 0.25f;
  for (int i = 0; i < ROWS * COLS; ++i)
    inp[i] = (float)((i * 37) % 101 - 50) * 0.08f;
  if ((st = fp_buffer_write(ctx, in[0], 0, inp, sizeof inp)) != FP_OK ||
      (st = fp_buffer_write(ctx, in[1], 0, bias, sizeof bias)) != FP_OK ||
      (st = fp_plan_execute(plan, in, out)) != FP_OK ||
      (st = fp_buffer_read(ctx, out[0], 0, got, sizeof got)) != FP_OK)
    return fail("run", st, ctx);

  int bad = 0;
  double worst = 0.0;
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) {
      const double x = (double)inp[i * COLS + j] + bias[j];
      const double want = x * 0.5 * (1.0 + tanh(0.79788456 * x * (1.0 + 0.044715 * x * x)));
      const double err = fabs(got[i * COLS + j] - want);
      worst = err > worst ? err : worst;
      bad += !(err <= 1e-5 + 1e-5 * fabs(want)); /* float32 rounding of a tanh-based gelu */
    }
  printf("bias_gelu fused, %d x %d: %d elements off, largest error %.2e\n", ROWS, COLS, bad, worst);

  fp_io_free(&io, in, out);
  fp_plan_destroy(plan);
  fp_context_destroy(ctx);
  return bad == 0 ? 0 : 1;
}
