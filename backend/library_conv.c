/* fuseport backend layer: the convolution library call (backend.h,
 * fp_library_conv). The layer validates the descriptor and the buffers;
 * the backend's library_conv runs it (cuDNN, the CPU's direct convolution). */
#include <stdint.h>

#include "backend_impl.h"

int64_t fp_conv_out_dim(int64_t H, int64_t R, int64_t stride, int64_t pad, int64_t dil) {
  if (H < 1 || R < 1 || stride < 1 || pad < 0 || dil < 1 || pad > INT64_MAX / 4 ||
      R - 1 > (INT64_MAX / 4) / dil || H > INT64_MAX / 4)
    return 0;
  const int64_t span = H + 2 * pad - dil * (R - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

/* Elements of each operand, or -1 when a product leaves int64 (16 bytes an
 * element of headroom). */
static int64_t product(const int64_t *d, int n) {
  const int64_t limit = INT64_MAX / 64;
  int64_t v = 1;
  for (int k = 0; k < n; ++k) {
    if (d[k] < 1 || v > limit / d[k])
      return -1;
    v *= d[k];
  }
  return v;
}

typedef struct conv_sizes {
  int64_t P, Q, x, w, out;
} conv_sizes;

static fp_status conv_shape_check(const fp_lib_conv *c, conv_sizes *z) {
  if (c->N < 1 || c->C < 1 || c->H < 1 || c->W < 1 || c->K < 1 || c->R < 1 || c->S < 1)
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "library convolution: N=%lld C=%lld H=%lld W=%lld K=%lld R=%lld S=%lld must "
                    "all be >= 1",
                    (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W,
                    (long long)c->K, (long long)c->R, (long long)c->S);
  if (c->stride < 1 || c->pad < 0 || c->dil < 1)
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "library convolution: stride %lld and dilation %lld must be >= 1, padding "
                    "%lld >= 0",
                    (long long)c->stride, (long long)c->dil, (long long)c->pad);
  z->P = fp_conv_out_dim(c->H, c->R, c->stride, c->pad, c->dil);
  z->Q = fp_conv_out_dim(c->W, c->S, c->stride, c->pad, c->dil);
  if (z->P < 1 || z->Q < 1)
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "library convolution: the %lldx%lld filter (dilation %lld) is larger than the "
                    "%lldx%lld input padded by %lld",
                    (long long)c->R, (long long)c->S, (long long)c->dil, (long long)c->H,
                    (long long)c->W, (long long)c->pad);
  const int64_t dx[] = {c->N, c->C, c->H, c->W}, dw[] = {c->K, c->C, c->R, c->S},
                dout[] = {c->N, c->K, z->P, z->Q};
  z->x = product(dx, 4);
  z->w = product(dw, 4);
  z->out = product(dout, 4);
  if (z->x < 0 || z->w < 0 || z->out < 0)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "library convolution: an operand's size overflows");
  if (c->dtype != FP_F32 && c->dtype != FP_F16 && c->dtype != FP_BF16)
    return fp_error(FP_ERR_UNSUPPORTED, "library convolution: no convolution of element type %s",
                    fp_dtype_name(c->dtype));
  if ((unsigned)c->epilogue > FP_LIB_CONV_BIAS_RELU)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "library convolution: unknown epilogue %d",
                    (int)c->epilogue);
  if (c->add_z && c->epilogue == FP_LIB_CONV_NONE)
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "library convolution: a residual z goes with a bias epilogue");
  return FP_OK;
}

fp_status fp_library_conv_check(const fp_device_info *dev, const fp_lib_conv *c) {
  if (dev == NULL || c == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_library_conv_check: NULL argument");
  conv_sizes z;
  fp_status st = conv_shape_check(c, &z);
  if (st != FP_OK)
    return st;
  if (dev->conv_library[0] == '\0')
    return fp_error(FP_ERR_UNSUPPORTED, "the %s backend on '%s' has no convolution library%s",
                    fp_backend_name(dev->backend), dev->name,
                    dev->backend == FP_BACKEND_CUDA ? " (this build found no cuDNN)" : "");
  if ((dev->conv_library_dtypes & (1u << c->dtype)) == 0)
    return fp_error(FP_ERR_UNSUPPORTED, "%s on '%s' has no %s convolution", dev->conv_library,
                    dev->name, fp_dtype_name(c->dtype));
  if (c->epilogue != FP_LIB_CONV_NONE && !dev->conv_library_epilogues)
    return fp_error(FP_ERR_UNSUPPORTED,
                    "%s cannot fuse a bias, residual or relu into its "
                    "convolution",
                    dev->conv_library);
  return FP_OK;
}

/* cuDNN's share (cuda_dnn.h's fp_cuda_dnn_workspace_cap): the layer knows
 * it without the CUDA headers. */
#define FP_CUDNN_WORKSPACE (256ull << 20)

uint64_t fp_library_conv_workspace(const fp_device_info *dev, const fp_lib_conv *c) {
  if (dev == NULL || c == NULL || fp_library_conv_check(dev, c) != FP_OK)
    return 0;
  return dev->backend == FP_BACKEND_CUDA ? FP_CUDNN_WORKSPACE : 0;
}

static fp_status check_size(fp_context *ctx, const fp_buffer *buf, const char *name, int64_t elems,
                            fp_dtype dtype) {
  fp_status st = fp_check_buffer(ctx, buf, "fp_library_conv", name);
  if (st != FP_OK)
    return st;
  const uint64_t need = (uint64_t)elems * fp_dtype_size(dtype);
  if (buf->bytes < need)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "fp_library_conv: %s holds %llu bytes, the convolution reads or writes "
                        "%llu",
                        name, (unsigned long long)buf->bytes, (unsigned long long)need);
  return FP_OK;
}

fp_status fp_library_conv(fp_context *ctx, const fp_lib_conv *c, fp_buffer *x, fp_buffer *w,
                          fp_buffer *bias, fp_buffer *z, fp_buffer *out, fp_buffer *workspace) {
  if (ctx == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_library_conv: context is NULL");
  if (c == NULL)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "fp_library_conv: descriptor is NULL");
  fp_status st = fp_library_conv_check(&ctx->info, c);
  if (st != FP_OK)
    return fp_ctx_error(ctx, st, "%s", fp_last_error());
  if (ctx->ops->library_conv == NULL)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "the %s backend has no convolution library",
                        fp_backend_name(ctx->kind));
  conv_sizes sz;
  (void)conv_shape_check(c, &sz);
  const bool wants_bias = c->epilogue != FP_LIB_CONV_NONE;
  st = check_size(ctx, x, "x", sz.x, c->dtype);
  if (st == FP_OK)
    st = check_size(ctx, w, "w", sz.w, c->dtype);
  if (st == FP_OK)
    st = check_size(ctx, out, "out", sz.out, c->dtype);
  if (st == FP_OK && wants_bias)
    st = check_size(ctx, bias, "bias", c->K, c->dtype);
  if (st == FP_OK && c->add_z)
    st = check_size(ctx, z, "z", sz.out, c->dtype);
  if (st == FP_OK && workspace != NULL)
    st = fp_check_buffer(ctx, workspace, "fp_library_conv", "workspace");
  if (st != FP_OK)
    return st;
  if (out == x || out == w || (wants_bias && out == bias))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "fp_library_conv: out is also an input (x, w or bias)");
  st = ctx->ops->library_conv(ctx, c, x->handle, w->handle, wants_bias ? bias->handle : NULL,
                              c->add_z ? z->handle : NULL, out->handle,
                              workspace != NULL ? workspace->handle : NULL,
                              workspace != NULL ? workspace->bytes : 0);
  if (st == FP_OK)
    ctx->counters.library_calls++;
  return st;
}
