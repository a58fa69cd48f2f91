/* fuseport backend layer: the GEMM library call (backend.h, fp_library_gemm:
 * cuBLAS/cuBLASLt, CLBlast, the CPU backend's GEMM). The layer validates the
 * descriptor, the device's library and the buffers' spans; the backend's
 * library_gemm runs it on the layer's stream and the layer counts the call. */
#include <stdint.h>
#include <string.h>

#include "backend_impl.h"

fp_lib_gemm fp_lib_gemm_plain(fp_dtype dtype, int64_t M, int64_t N, int64_t K, bool trans_b) {
  fp_lib_gemm g;
  memset(&g, 0, sizeof g);
  g.dtype = dtype;
  g.out_dtype = FP_DTYPE_COUNT;
  g.M = M;
  g.N = N;
  g.K = K;
  g.batch = 1;
  g.lda = K;
  g.ldb = trans_b ? K : N;
  g.ldc = N;
  g.ldd = N;
  g.trans_b = trans_b;
  g.alpha = 1.0f;
  g.beta = 0.0f;
  g.epilogue = FP_LIB_EPI_NONE;
  return g;
}

/* Elements a [rows, cols] operand with leading dimension ld spans in each
 * of `batch` items at `stride`: the last item's last element + 1, or -1 on
 * overflow. */
static int64_t operand_span(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld) {
  if (rows < 1 || cols < 1 || batch < 1 || ld < cols || stride < 0)
    return -1;
  if (rows - 1 > (INT64_MAX - cols) / ld)
    return -1;
  int64_t one = (rows - 1) * ld + cols;
  if (batch > 1 && (stride == 0 || batch - 1 > (INT64_MAX - one) / stride))
    return stride == 0 ? one : -1;
  return (batch - 1) * stride + one;
}

static fp_status gemm_shape_check(const fp_lib_gemm *g) {
  if (g->M < 1 || g->N < 1 || g->K < 1 || g->batch < 1)
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "library GEMM: M=%lld N=%lld K=%lld batch=%lld must all be >= 1",
                    (long long)g->M, (long long)g->N, (long long)g->K, (long long)g->batch);
  if (operand_span(g->batch, g->stride_a, g->trans_a ? g->K : g->M, g->trans_a ? g->M : g->K,
                   g->lda) < 0 ||
      operand_span(g->batch, g->stride_b, g->trans_b ? g->N : g->K, g->trans_b ? g->K : g->N,
                   g->ldb) < 0 ||
      operand_span(g->batch, g->stride_d, g->M, g->N, g->ldd) < 0 ||
      (g->beta != 0.0f && operand_span(g->batch, g->stride_c, g->M, g->N, g->ldc) < 0))
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "library GEMM: leading dimensions (lda %lld, ldb %lld, ldc %lld, ldd %lld) or "
                    "batch strides do not fit M=%lld N=%lld K=%lld%s, or the extent overflows",
                    (long long)g->lda, (long long)g->ldb, (long long)g->ldc, (long long)g->ldd,
                    (long long)g->M, (long long)g->N, (long long)g->K,
                    g->trans_b ? " (B is [N, K])" : "");
  if (g->dtype != FP_F32 && g->dtype != FP_F16 && g->dtype != FP_BF16)
    return fp_error(FP_ERR_UNSUPPORTED, "library GEMM: no GEMM of element type %s",
                    fp_dtype_name(g->dtype));
  const fp_dtype out = fp_lib_gemm_out_dtype(g);
  if (out != g->dtype && out != FP_F32)
    return fp_error(FP_ERR_UNSUPPORTED,
                    "library GEMM: %s inputs give %s or float32 outputs, not %s",
                    fp_dtype_name(g->dtype), fp_dtype_name(g->dtype), fp_dtype_name(out));
  if (out != g->dtype && (g->epilogue != FP_LIB_EPI_NONE || g->beta != 0.0f))
    return fp_error(FP_ERR_UNSUPPORTED,
                    "library GEMM: a float32 output of %s inputs takes no epilogue or beta*C",
                    fp_dtype_name(g->dtype));
  if ((unsigned)g->epilogue > FP_LIB_EPI_BIAS_RELU)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "library GEMM: unknown epilogue %d", (int)g->epilogue);
  return FP_OK;
}

fp_status fp_library_gemm_check(const fp_device_info *dev, const fp_lib_gemm *g) {
  if (dev == NULL || g == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_library_gemm_check: NULL argument");
  fp_status st = gemm_shape_check(g);
  if (st != FP_OK)
    return st;
  const char *backend = fp_backend_name(dev->backend);
  if (dev->gemm_library[0] == '\0')
    return fp_error(FP_ERR_UNSUPPORTED, "the %s backend on '%s' has no GEMM library", backend,
                    dev->name);
  if ((dev->gemm_library_dtypes & (1u << g->dtype)) == 0)
    return fp_error(FP_ERR_UNSUPPORTED, "%s on '%s' has no %s GEMM", dev->gemm_library, dev->name,
                    fp_dtype_name(g->dtype));
  if ((g->epilogue != FP_LIB_EPI_NONE || g->beta != 0.0f) && !dev->gemm_library_epilogues)
    return fp_error(FP_ERR_UNSUPPORTED,
                    "%s cannot fuse an epilogue or beta*C into its GEMM (cuBLASLt on CUDA can)",
                    dev->gemm_library);
  return FP_OK;
}

/* What PyTorch hands cuBLAS and cuBLASLt on Hopper (CUBLAS_WORKSPACE_CONFIG's
 * :4096:8, 32 MiB), so that their kernel choice is the one a user gets. */
#define FP_CUDA_GEMM_WORKSPACE (32ull << 20)

uint64_t fp_library_gemm_workspace(const fp_device_info *dev, const fp_lib_gemm *g) {
  if (dev == NULL || g == NULL || fp_library_gemm_check(dev, g) != FP_OK)
    return 0;
  return dev->backend == FP_BACKEND_CUDA ? FP_CUDA_GEMM_WORKSPACE : 0;
}

/* The buffer holds the operand's span of elements of g's type. */
static fp_status check_operand(fp_context *ctx, const fp_buffer *buf, const char *name,
                               int64_t span, fp_dtype dtype) {
  fp_status st = fp_check_buffer(ctx, buf, "fp_library_gemm", name);
  if (st != FP_OK)
    return st;
  const uint64_t need = (uint64_t)span * fp_dtype_size(dtype);
  if (buf->bytes < need)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "fp_library_gemm: %s holds %llu bytes, the GEMM reads or writes %llu", name,
                        (unsigned long long)buf->bytes, (unsigned long long)need);
  return FP_OK;
}

fp_status fp_library_gemm(fp_context *ctx, const fp_lib_gemm *g, fp_buffer *a, fp_buffer *b,
                          fp_buffer *c, fp_buffer *d, fp_buffer *bias, fp_buffer *workspace) {
  if (ctx == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_library_gemm: context is NULL");
  if (g == NULL)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "fp_library_gemm: descriptor is NULL");
  fp_status st = fp_library_gemm_check(&ctx->info, g);
  if (st != FP_OK)
    return fp_ctx_error(ctx, st, "%s", fp_last_error());
  if (ctx->ops->library_gemm == NULL)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "the %s backend has no GEMM library",
                        fp_backend_name(ctx->kind));
  const int64_t rows_b = g->trans_b ? g->N : g->K, cols_b = g->trans_b ? g->K : g->N;
  const int64_t rows_a = g->trans_a ? g->K : g->M, cols_a = g->trans_a ? g->M : g->K;
  const fp_dtype out = fp_lib_gemm_out_dtype(g);
  st = check_operand(ctx, a, "A", operand_span(g->batch, g->stride_a, rows_a, cols_a, g->lda),
                     g->dtype);
  if (st == FP_OK)
    st = check_operand(ctx, b, "B", operand_span(g->batch, g->stride_b, rows_b, cols_b, g->ldb),
                       g->dtype);
  if (st == FP_OK)
    st = check_operand(ctx, d, "D", operand_span(g->batch, g->stride_d, g->M, g->N, g->ldd), out);
  if (st == FP_OK && g->beta != 0.0f)
    st = check_operand(ctx, c, "C", operand_span(g->batch, g->stride_c, g->M, g->N, g->ldc), out);
  const bool wants_bias = g->epilogue == FP_LIB_EPI_BIAS || g->epilogue == FP_LIB_EPI_BIAS_RELU;
  if (st == FP_OK && wants_bias)
    st = check_operand(ctx, bias, "bias", g->N, out);
  if (st == FP_OK && workspace != NULL)
    st = fp_check_buffer(ctx, workspace, "fp_library_gemm", "workspace");
  if (st != FP_OK)
    return st;
  if (d == a || d == b || (wants_bias && d == bias))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "fp_library_gemm: D is also an input (A, B or bias)");
  st = ctx->ops->library_gemm(ctx, g, a->handle, b->handle, g->beta != 0.0f ? c->handle : NULL,
                              d->handle, wants_bias ? bias->handle : NULL,
                              workspace != NULL ? workspace->handle : NULL,
                              workspace != NULL ? workspace->bytes : 0);
  if (st == FP_OK)
    ctx->counters.library_calls++;
  return st;
}

fp_status fp_library_gemm_prepare(fp_context *ctx, fp_dtype dtype, double *compile_ms) {
  if (ctx == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_library_gemm_prepare: context is NULL");
  fp_lib_gemm g = fp_lib_gemm_plain(dtype, 1, 1, 1, false);
  fp_status st = fp_library_gemm_check(&ctx->info, &g);
  if (st != FP_OK)
    return fp_ctx_error(ctx, st, "%s", fp_last_error());
  double ms = 0.0;
  if (ctx->ops->library_prepare != NULL)
    st = ctx->ops->library_prepare(ctx, dtype, &ms);
  if (st == FP_OK && compile_ms != NULL)
    *compile_ms = ms;
  return st;
}
