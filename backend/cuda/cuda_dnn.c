/* fuseport CUDA backend: cuDNN 9 as its convolution library (cuda_dnn.h).
 *
 * The legacy (v7-style) descriptor API, which cuDNN 9 still ships: tensor,
 * filter and convolution descriptors, cudnnGetConvolutionForwardAlgorithm_v7
 * for the heuristics' ranking, cudnnConvolutionForward for a plain
 * convolution and cudnnConvolutionBiasActivationForward for
 *   y = act(conv(x, w) + alpha2 * z + bias).
 * Cross-correlation (PyTorch's conv2d), float32 compute; f32 runs on FMA math
 * only (no TF32). */
#include "cuda_dnn.h"

/* The workspace cap is part of the footprint fuseport states: PyTorch lets
 * cuDNN take whatever its caching allocator can give, a fixed cap keeps the
 * number in the benchmark's tables honest and the same on every card. */
uint64_t fp_cuda_dnn_workspace_cap(void) { return 256ull << 20; }

#ifndef FUSEPORT_HAVE_CUDNN

bool fp_cuda_dnn_version(char *buf, size_t cap) {
  if (buf != NULL && cap > 0)
    buf[0] = '\0';
  return false;
}

fp_status fp_cuda_dnn_conv(fp_context *ctx, fp_cuda_dnn **dnn, cudaStream_t stream,
                           const fp_lib_conv *c, void *x, void *w, void *bias, void *z, void *out,
                           void *ws, uint64_t ws_bytes) {
  (void)dnn, (void)stream, (void)c, (void)x, (void)w, (void)bias, (void)z, (void)out, (void)ws,
      (void)ws_bytes;
  return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "cuda backend: this build has no cuDNN");
}

void fp_cuda_dnn_destroy(fp_cuda_dnn *dnn) { (void)dnn; }

#else

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cudnn.h>

/* Descriptors and the heuristics' choice kept per distinct convolution: the
 * heuristic query costs host time that a small convolution would otherwise
 * pay inside its timing. */
#define DNN_CACHE 32
#define DNN_ALGOS CUDNN_CONVOLUTION_FWD_ALGO_COUNT

typedef struct dnn_entry {
  bool used;
  fp_lib_conv key; /* add_z ignored: z shares y's descriptor */
  uint64_t ws_bytes;
  cudnnTensorDescriptor_t x, y, bias;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  cudnnActivationDescriptor_t act;
  /* the algorithms that fit ws_bytes, in the heuristics' order; pick is the
   * first one the call accepted (a later one is tried only where cuDNN
   * answers "not supported", which it does before launching anything) */
  int n_algo, pick;
  cudnnConvolutionFwdAlgo_t algo[DNN_ALGOS];
  cudnnMathType_t math[DNN_ALGOS];
  cudnnMathType_t math_now; /* what conv carries */
} dnn_entry;

struct fp_cuda_dnn {
  cudnnHandle_t handle;
  cudaStream_t stream;
  dnn_entry cache[DNN_CACHE];
  int next; /* round-robin victim */
};

static fp_status dnn_fail(fp_context *ctx, cudnnStatus_t st, const char *call) {
  const int category = CUDNN_STATUS_CATEGORY(st);
  fp_status status = category == CUDNN_STATUS_NOT_SUPPORTED ? FP_ERR_UNSUPPORTED
                     : st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                             st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
                         ? FP_ERR_OUT_OF_MEMORY
                         : FP_ERR_BACKEND;
  char detail[512];
  cudnnGetLastErrorString(detail, sizeof detail);
  return fp_ctx_error(ctx, status, "%s failed: %s (%d)%s%s", call, cudnnGetErrorString(st), (int)st,
                      detail[0] != '\0' ? "; cuDNN: " : "", detail);
}

/* "conv 32x64x56x56 (nhwc) K=64 3x3 stride 1 pad 1 dil 1 f16" for messages */
static void describe(char *buf, size_t cap, const fp_lib_conv *c) {
  snprintf(buf, cap,
           "conv %lldx%lldx%lldx%lld (%s) K=%lld %lldx%lld stride %lld pad %lld dil %lld %s",
           (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W,
           c->nhwc ? "nhwc" : "nchw", (long long)c->K, (long long)c->R, (long long)c->S,
           (long long)c->stride, (long long)c->pad, (long long)c->dil, fp_dtype_name(c->dtype));
}

bool fp_cuda_dnn_version(char *buf, size_t cap) {
  /* the library the process loaded, not the headers': 9.x encodes
   * major * 10000 + minor * 100 + patch */
  const size_t v = cudnnGetVersion();
  if (buf != NULL && cap > 0)
    snprintf(buf, cap, "cuDNN %zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
  return true;
}

static void entry_release(dnn_entry *e) {
  if (!e->used)
    return;
  if (e->x != NULL)
    (void)cudnnDestroyTensorDescriptor(e->x);
  if (e->y != NULL)
    (void)cudnnDestroyTensorDescriptor(e->y);
  if (e->bias != NULL)
    (void)cudnnDestroyTensorDescriptor(e->bias);
  if (e->w != NULL)
    (void)cudnnDestroyFilterDescriptor(e->w);
  if (e->conv != NULL)
    (void)cudnnDestroyConvolutionDescriptor(e->conv);
  if (e->act != NULL)
    (void)cudnnDestroyActivationDescriptor(e->act);
  memset(e, 0, sizeof *e);
}

void fp_cuda_dnn_destroy(fp_cuda_dnn *dnn) {
  if (dnn == NULL)
    return;
  for (int k = 0; k < DNN_CACHE; ++k)
    entry_release(&dnn->cache[k]);
  (void)cudnnDestroy(dnn->handle);
  free(dnn);
}

static fp_status dnn_create(fp_context *ctx, fp_cuda_dnn **dnn, cudaStream_t stream) {
  fp_cuda_dnn *d = calloc(1, sizeof *d);
  if (d == NULL)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "cuDNN: host allocation failed");
  cudnnStatus_t st = cudnnCreate(&d->handle);
  if (st != CUDNN_STATUS_SUCCESS) {
    free(d);
    return dnn_fail(ctx, st, "cudnnCreate()");
  }
  st = cudnnSetStream(d->handle, stream);
  if (st != CUDNN_STATUS_SUCCESS) {
    (void)cudnnDestroy(d->handle);
    free(d);
    return dnn_fail(ctx, st, "cudnnSetStream()");
  }
  d->stream = stream;
  *dnn = d;
  return FP_OK;
}

static bool same_key(const fp_lib_conv *a, const fp_lib_conv *b) {
  return a->dtype == b->dtype && a->N == b->N && a->C == b->C && a->H == b->H && a->W == b->W &&
         a->K == b->K && a->R == b->R && a->S == b->S && a->stride == b->stride &&
         a->pad == b->pad && a->dil == b->dil && a->nhwc == b->nhwc && a->epilogue == b->epilogue;
}

static cudnnDataType_t dnn_type(fp_dtype dtype) {
  return dtype == FP_F16    ? CUDNN_DATA_HALF
         : dtype == FP_BF16 ? CUDNN_DATA_BFLOAT16
                            : CUDNN_DATA_FLOAT;
}

/* f32: FMA only, so TF32 never enters. f16: tensor ops (what PyTorch sets);
 * bf16: default math, which lets cuDNN use tensor cores (PyTorch's choice). */
static cudnnMathType_t dnn_math(fp_dtype dtype) {
  return dtype == FP_F32   ? CUDNN_FMA_MATH
         : dtype == FP_F16 ? CUDNN_TENSOR_OP_MATH
                           : CUDNN_DEFAULT_MATH;
}

/* Builds the descriptors and ranks the algorithms that fit ws_bytes. */
static fp_status entry_prepare(fp_context *ctx, fp_cuda_dnn *d, const fp_lib_conv *c,
                               uint64_t ws_bytes, dnn_entry *e) {
  char what[192];
  describe(what, sizeof what, c);
  memset(e, 0, sizeof *e);
  e->used = true; /* from here on entry_release frees what exists */
  const cudnnDataType_t t = dnn_type(c->dtype);
  const cudnnTensorFormat_t f = c->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const int P = (int)fp_conv_out_dim(c->H, c->R, c->stride, c->pad, c->dil);
  const int Q = (int)fp_conv_out_dim(c->W, c->S, c->stride, c->pad, c->dil);
  const char *call = "cudnnCreateTensorDescriptor()";
  cudnnStatus_t st = cudnnCreateTensorDescriptor(&e->x);
  if (st == CUDNN_STATUS_SUCCESS)
    st = cudnnCreateTensorDescriptor(&e->y);
  if (st == CUDNN_STATUS_SUCCESS) {
    call = "cudnnSetTensor4dDescriptor(x)";
    st = cudnnSetTensor4dDescriptor(e->x, f, t, (int)c->N, (int)c->C, (int)c->H, (int)c->W);
  }
  if (st == CUDNN_STATUS_SUCCESS) {
    call = "cudnnSetTensor4dDescriptor(y)";
    st = cudnnSetTensor4dDescriptor(e->y, f, t, (int)c->N, (int)c->K, P, Q);
  }
  if (st == CUDNN_STATUS_SUCCESS) {
    call = "cudnnCreateFilterDescriptor()";
    st = cudnnCreateFilterDescriptor(&e->w);
  }
  if (st == CUDNN_STATUS_SUCCESS) { /* NHWC filters are KRSC */
    call = "cudnnSetFilter4dDescriptor(w)";
    st = cudnnSetFilter4dDescriptor(e->w, t, f, (int)c->K, (int)c->C, (int)c->R, (int)c->S);
  }
  if (st == CUDNN_STATUS_SUCCESS) {
    call = "cudnnCreateConvolutionDescriptor()";
    st = cudnnCreateConvolutionDescriptor(&e->conv);
  }
  if (st == CUDNN_STATUS_SUCCESS) {
    call = "cudnnSetConvolution2dDescriptor()";
    st = cudnnSetConvolution2dDescriptor(e->conv, (int)c->pad, (int)c->pad, (int)c->stride,
                                         (int)c->stride, (int)c->dil, (int)c->dil,
                                         CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  }
  if (st == CUDNN_STATUS_SUCCESS) {
    call = "cudnnSetConvolutionMathType()";
    e->math_now = dnn_math(c->dtype);
    st = cudnnSetConvolutionMathType(e->conv, e->math_now);
  }
  if (st == CUDNN_STATUS_SUCCESS && c->epilogue != FP_LIB_CONV_NONE) {
    /* [1, K, 1, 1] of y's type: cuDNN's table of supported types gives the
     * bias y's type for float and half data (float only for int8 data);
     * bf16 is taken to follow half, and cuDNN says "not supported" if not */
    call = "cudnnSetTensor4dDescriptor(bias)";
    st = cudnnCreateTensorDescriptor(&e->bias);
    if (st == CUDNN_STATUS_SUCCESS)
      st = cudnnSetTensor4dDescriptor(e->bias, CUDNN_TENSOR_NCHW, t, 1, (int)c->K, 1, 1);
    if (st == CUDNN_STATUS_SUCCESS) {
      call = "cudnnCreateActivationDescriptor()";
      st = cudnnCreateActivationDescriptor(&e->act);
    }
    /* the fused call refuses any NaN option but NOT_PROPAGATE_NAN */
    if (st == CUDNN_STATUS_SUCCESS) {
      call = "cudnnSetActivationDescriptor()";
      st = cudnnSetActivationDescriptor(
          e->act,
          c->epilogue == FP_LIB_CONV_BIAS_RELU ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
          CUDNN_NOT_PROPAGATE_NAN, 0.0);
    }
  }
  if (st != CUDNN_STATUS_SUCCESS) {
    char msg[320];
    snprintf(msg, sizeof msg, "%s for %s", call, what);
    entry_release(e);
    return dnn_fail(ctx, st, msg);
  }

  if (c->epilogue == FP_LIB_CONV_BIAS) {
    /* IDENTITY works only with IMPLICIT_PRECOMP_GEMM (cudnnActivationMode_t) */
    size_t need = 0;
    st = cudnnGetConvolutionForwardWorkspaceSize(d->handle, e->x, e->w, e->conv, e->y,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                                 &need);
    if (st != CUDNN_STATUS_SUCCESS) {
      char msg[320];
      snprintf(msg, sizeof msg,
               "cudnnGetConvolutionForwardWorkspaceSize(IMPLICIT_PRECOMP_GEMM) for %s", what);
      entry_release(e);
      return dnn_fail(ctx, st, msg);
    }
    if (need > ws_bytes) {
      entry_release(e);
      return fp_ctx_error(
          ctx, FP_ERR_UNSUPPORTED,
          "cuDNN: conv + bias without an activation needs IMPLICIT_PRECOMP_GEMM, whose "
          "workspace (%zu bytes) exceeds the %llu given, for %s",
          need, (unsigned long long)ws_bytes, what);
    }
    e->algo[0] = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    e->math[0] = e->math_now;
    e->n_algo = 1;
  } else {
    /* what PyTorch does with cudnn.benchmark off: the heuristics' order, the
     * first that succeeds within the workspace */
    cudnnConvolutionFwdAlgoPerf_t perf[DNN_ALGOS];
    int found = 0;
    st = cudnnGetConvolutionForwardAlgorithm_v7(d->handle, e->x, e->w, e->conv, e->y, DNN_ALGOS,
                                                &found, perf);
    if (st != CUDNN_STATUS_SUCCESS) {
      char msg[320];
      snprintf(msg, sizeof msg, "cudnnGetConvolutionForwardAlgorithm_v7() for %s", what);
      entry_release(e);
      return dnn_fail(ctx, st, msg);
    }
    for (int k = 0; k < found && k < DNN_ALGOS; ++k) {
      if (perf[k].status != CUDNN_STATUS_SUCCESS || perf[k].memory > ws_bytes)
        continue;
      if (c->dtype == FP_F32 && perf[k].mathType != CUDNN_FMA_MATH)
        continue; /* never TF32 */
      e->algo[e->n_algo] = perf[k].algo;
      e->math[e->n_algo] = c->dtype == FP_F32 ? CUDNN_FMA_MATH : perf[k].mathType;
      e->n_algo++;
    }
    if (e->n_algo == 0) {
      entry_release(e);
      return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                          "cuDNN's heuristics offer no algorithm for %s within a %llu-byte "
                          "workspace%s (%d ranked)",
                          what, (unsigned long long)ws_bytes,
                          c->dtype == FP_F32 ? " without TF32" : "", found);
    }
  }
  e->key = *c;
  e->ws_bytes = ws_bytes;
  return FP_OK;
}

static fp_status check_sizes(fp_context *ctx, const fp_lib_conv *c) {
  const int64_t P = fp_conv_out_dim(c->H, c->R, c->stride, c->pad, c->dil);
  const int64_t Q = fp_conv_out_dim(c->W, c->S, c->stride, c->pad, c->dil);
  const int64_t dims[] = {c->N, c->C, c->H, c->W, c->K, c->R, c->S, c->stride, c->pad, c->dil};
  bool ok = P > 0 && Q > 0;
  for (size_t k = 0; k < sizeof dims / sizeof dims[0]; ++k)
    ok = ok && dims[k] <= INT_MAX;
  /* the legacy descriptors hold at most 2^31 - 1 elements a tensor */
  const double big = (double)INT_MAX;
  ok = ok && (double)c->N * (double)c->C * (double)c->H * (double)c->W <= big &&
       (double)c->K * (double)c->C * (double)c->R * (double)c->S <= big &&
       (double)c->N * (double)c->K * (double)P * (double)Q <= big;
  if (ok)
    return FP_OK;
  char what[192];
  describe(what, sizeof what, c);
  return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                      "cuDNN takes 32-bit sizes and tensors of fewer than 2^31 elements (%s)",
                      what);
}

fp_status fp_cuda_dnn_conv(fp_context *ctx, fp_cuda_dnn **dnn, cudaStream_t stream,
                           const fp_lib_conv *c, void *x, void *w, void *bias, void *z, void *out,
                           void *ws, uint64_t ws_bytes) {
  fp_status fs = check_sizes(ctx, c);
  if (fs != FP_OK)
    return fs;
  const bool fused = c->epilogue != FP_LIB_CONV_NONE;
  if ((fused && bias == NULL) || (c->add_z && (!fused || z == NULL)))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "cuDNN conv: epilogue %d needs a bias%s",
                        (int)c->epilogue, c->add_z ? " and z" : "");
  if (*dnn == NULL) {
    fs = dnn_create(ctx, dnn, stream);
    if (fs != FP_OK)
      return fs;
  }
  fp_cuda_dnn *d = *dnn;
  cudnnStatus_t st;
  if (d->stream != stream) {
    st = cudnnSetStream(d->handle, stream);
    if (st != CUDNN_STATUS_SUCCESS)
      return dnn_fail(ctx, st, "cudnnSetStream()");
    d->stream = stream;
  }
  if (ws == NULL)
    ws_bytes = 0;

  dnn_entry *e = NULL;
  for (int k = 0; k < DNN_CACHE && e == NULL; ++k)
    if (d->cache[k].used && d->cache[k].ws_bytes == ws_bytes && same_key(&d->cache[k].key, c))
      e = &d->cache[k];
  if (e == NULL) {
    e = &d->cache[d->next];
    d->next = (d->next + 1) % DNN_CACHE;
    entry_release(e);
    fs = entry_prepare(ctx, d, c, ws_bytes, e);
    if (fs != FP_OK)
      return fs;
  }

  const float one = 1.0f, zero = 0.0f;
  st = CUDNN_STATUS_NOT_SUPPORTED;
  for (; e->pick < e->n_algo; ++e->pick) {
    const int k = e->pick;
    if (e->math[k] != e->math_now) {
      st = cudnnSetConvolutionMathType(e->conv, e->math[k]);
      if (st != CUDNN_STATUS_SUCCESS)
        return dnn_fail(ctx, st, "cudnnSetConvolutionMathType()");
      e->math_now = e->math[k];
    }
    if (!fused)
      st = cudnnConvolutionForward(d->handle, &one, e->x, x, e->w, w, e->conv, e->algo[k], ws,
                                   (size_t)ws_bytes, &zero, e->y, out);
    else /* no z: alpha2 = 0 and z = out (cuDNN wants one), as PyTorch's conv-relu passes */
      st = cudnnConvolutionBiasActivationForward(
          d->handle, &one, e->x, x, e->w, w, e->conv, e->algo[k], ws, (size_t)ws_bytes,
          c->add_z ? &one : &zero, e->y, c->add_z ? z : out, e->bias, bias, e->act, e->y, out);
    /* "not supported" is answered before anything runs: try the next */
    if (CUDNN_STATUS_CATEGORY(st) != CUDNN_STATUS_NOT_SUPPORTED)
      break;
  }
  if (st != CUDNN_STATUS_SUCCESS) {
    char what[192], msg[320];
    describe(what, sizeof what, c);
    const int k = e->pick < e->n_algo ? e->pick : e->n_algo - 1;
    snprintf(msg, sizeof msg, "%s(%s, algo %d of %d ranked, epilogue %d)",
             fused ? "cudnnConvolutionBiasActivationForward" : "cudnnConvolutionForward", what,
             (int)e->algo[k], e->n_algo, (int)c->epilogue);
    if (e->pick >= e->n_algo)
      e->pick = 0; /* all refused: the next call starts from the first again */
    return dnn_fail(ctx, st, msg);
  }
  return FP_OK;
}

#endif /* FUSEPORT_HAVE_CUDNN */
