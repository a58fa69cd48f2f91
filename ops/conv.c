/* fuseport operators, family conv (SPEC.md, "Convolution"): a 2-D
 * convolution with its epilogue -- a bias or a residual, relu, inference
 * batch-norm -- in float32 (no TF32), float16 and bfloat16 (float32
 * accumulation), NCHW or NHWC.
 *
 * Variants:
 *   fused    fuseport's implicit GEMM (kernels.def, family conv): the im2col
 *            tile is gathered in the operand loader, never written, and the
 *            epilogue is applied to the accumulators before the only store.
 *            One launch.
 *   unfused  what PyTorch eager runs: the backend's convolution (cuDNN on
 *            CUDA, a direct convolution on the CPU; on OpenCL, which has no
 *            convolution library, im2col into memory and CLBlast's GEMM),
 *            then one primitive kernel per epilogue step. A bias is added in
 *            place on the convolution's output, as eager's conv2d does;
 *            relu, batch-norm and a residual write a new tensor.
 *   vendor   cuDNN's conv-bias-activation in one call where it expresses
 *            the op (conv_add, conv_relu; a residual rides its z input with
 *            a zero bias); unsupported for conv_bn and off CUDA.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp_device_common.h"
#include "ops_internal.h"

/* Parameter indices; the grid is N x C x H x W x K [x R [x stride]]. */
enum {
  CV_N = 0,
  CV_C,
  CV_H,
  CV_W,
  CV_K,
  CV_R,
  CV_STRIDE,
  CV_S,
  CV_PAD,
  CV_DIL,
  CV_LAYOUT,
  CV_DTYPE,
  CV_EXTRA /* conv_add: add; conv_relu: bias; conv_bn: eps */
};
enum { LAYOUT_NCHW = 0, LAYOUT_NHWC = 1 };
enum { ADD_BIAS = 0, ADD_FULL = 1 };

static const char *const layout_choices[] = {"nchw", "nhwc", NULL};
static const char *const dtype_choices[] = {"f32", "f16", "bf16", NULL};
static const char *const add_choices[] = {"bias", "full", NULL};
static const fp_dtype dtype_of_choice[] = {FP_F32, FP_F16, FP_BF16};

typedef enum cv_kind { KIND_ADD, KIND_RELU, KIND_BN } cv_kind;

/* A problem of the family, decoded. */
typedef struct cv_problem {
  cv_kind kind;
  fp_dtype dtype;
  int64_t N, C, H, W, K, R, S, P, Q, stride, pad, dil;
  bool nhwc;
  bool full_add; /* conv_add add=full */
  bool bias;     /* conv_add add=bias, conv_relu bias=true */
  float eps;     /* conv_bn */
  int epi;       /* FP_EPI_* / FP_CONV_EPI_BN of the fused kernel */
} cv_problem;

static cv_problem cv_of(const fp_problem *p) {
  cv_problem c;
  memset(&c, 0, sizeof c);
  c.N = P_INT(p, CV_N);
  c.C = P_INT(p, CV_C);
  c.H = P_INT(p, CV_H);
  c.W = P_INT(p, CV_W);
  c.K = P_INT(p, CV_K);
  c.R = P_INT(p, CV_R);
  c.S = P_INT(p, CV_S) > 0 ? P_INT(p, CV_S) : c.R;
  c.stride = P_INT(p, CV_STRIDE);
  c.dil = P_INT(p, CV_DIL);
  c.pad = P_INT(p, CV_PAD) >= 0 ? P_INT(p, CV_PAD) : c.dil * (c.R - 1) / 2;
  c.nhwc = P_INT(p, CV_LAYOUT) == LAYOUT_NHWC;
  c.dtype = dtype_of_choice[P_INT(p, CV_DTYPE)];
  c.P = fp_conv_out_dim(c.H, c.R, c.stride, c.pad, c.dil);
  c.Q = fp_conv_out_dim(c.W, c.S, c.stride, c.pad, c.dil);
  const char *name = p->op->name;
  if (strcmp(name, "conv_add") == 0) {
    c.kind = KIND_ADD;
    c.full_add = P_INT(p, CV_EXTRA) == ADD_FULL;
    c.bias = !c.full_add;
    c.epi = c.full_add ? FP_EPI_ADD : FP_EPI_BIAS;
  } else if (strcmp(name, "conv_relu") == 0) {
    c.kind = KIND_RELU;
    c.bias = P_INT(p, CV_EXTRA) != 0;
    c.epi = c.bias ? FP_EPI_BIAS_RELU : FP_EPI_RELU;
  } else {
    c.kind = KIND_BN;
    c.eps = (float)p->v[CV_EXTRA];
    c.epi = FP_CONV_EPI_BN;
  }
  return c;
}

static int64_t crs_of(const cv_problem *c) { return c->C * c->R * c->S; }
static int64_t out_elems(const cv_problem *c) { return c->N * c->K * c->P * c->Q; }
static uint64_t esize(const cv_problem *c) { return fp_dtype_size(c->dtype); }

/* ---- validation and tensors ------------------------------------------------------- */

static fp_status cv_validate(const fp_problem *p) {
  const cv_problem c = cv_of(p);
  if (c.P < 1 || c.Q < 1)
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "op %s: the %lldx%lld filter (dilation %lld) does not fit the %lldx%lld input "
                    "padded by %lld",
                    p->op->name, (long long)c.R, (long long)c.S, (long long)c.dil, (long long)c.H,
                    (long long)c.W, (long long)c.pad);
  if (c.pad > 1000000)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "op %s: padding %lld is past any input", p->op->name,
                    (long long)c.pad);
  const double limit = (double)(INT64_MAX / 64);
  const double sizes[] = {(double)c.N * (double)c.C * (double)c.H * (double)c.W,
                          (double)c.K * (double)c.C * (double)c.R * (double)c.S,
                          (double)c.N * (double)c.K * (double)c.P * (double)c.Q,
                          /* the unfused OpenCL path's im2col matrix */
                          (double)c.N * (double)c.P * (double)c.Q * (double)c.C * (double)c.R *
                              (double)c.S};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k)
    if (sizes[k] > limit)
      return fp_error(FP_ERR_INVALID_ARGUMENT,
                      "op %s: an operand of N=%lld C=%lld H=%lld W=%lld K=%lld R=%lld S=%lld has "
                      "%.4g elements; byte counts would overflow",
                      p->op->name, (long long)c.N, (long long)c.C, (long long)c.H, (long long)c.W,
                      (long long)c.K, (long long)c.R, (long long)c.S, sizes[k]);
  if (c.kind == KIND_BN && !(c.eps > 0.0f))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "op conv_bn: eps must be > 0, not %g", (double)c.eps);
  return FP_OK;
}

static void out_desc(const cv_problem *c, fp_tensor_desc *t, const char *name) {
  if (c->nhwc)
    fp_tensor_4d(t, name, c->N, c->P, c->Q, c->K);
  else
    fp_tensor_4d(t, name, c->N, c->K, c->P, c->Q);
}

static void cv_describe(const fp_problem *p, fp_io_desc *io) {
  const cv_problem c = cv_of(p);
  memset(io, 0, sizeof *io);
  io->n_in = 2;
  io->n_out = 1;
  if (c.nhwc) {
    fp_tensor_4d(&io->in[0], "x", c.N, c.H, c.W, c.C);
    fp_tensor_4d(&io->in[1], "w", c.K, c.R, c.S, c.C);
  } else {
    fp_tensor_4d(&io->in[0], "x", c.N, c.C, c.H, c.W);
    fp_tensor_4d(&io->in[1], "w", c.K, c.C, c.R, c.S);
  }
  /* products summed over C*R*S taps stay O(1) (and within float16) */
  io->in[1].fill_scale = fp_sum_scale(crs_of(&c));
  if (c.full_add) {
    io->n_in = 3;
    out_desc(&c, &io->in[2], "t");
  } else if (c.bias) {
    io->n_in = 3;
    fp_tensor_1d(&io->in[2], "bias", c.K);
  } else if (c.kind == KIND_BN) {
    static const char *const names[] = {"mean", "var", "gamma", "beta"};
    io->n_in = 6;
    for (int k = 0; k < 4; ++k)
      fp_tensor_1d(&io->in[2 + k], names[k], c.K);
    io->in[3].fill_positive = true; /* a variance */
  }
  out_desc(&c, &io->out[0], "out");
  for (int k = 0; k < io->n_in; ++k)
    io->in[k].dtype = c.dtype;
  io->out[0].dtype = c.dtype;
}

/* Output rows are images: each of K*P*Q values in the layout's order. */
static int64_t cv_rows(const fp_problem *p) { return P_INT(p, CV_N); }

static fp_dtype cv_compute_dtype(const fp_problem *p) { return cv_of(p).dtype; }

/* ---- the float64 reference ------------------------------------------------------------ */

static int64_t x_at(const cv_problem *c, int64_t n, int64_t ch, int64_t h, int64_t w) {
  return c->nhwc ? ((n * c->H + h) * c->W + w) * c->C + ch
                 : ((n * c->C + ch) * c->H + h) * c->W + w;
}
static int64_t w_at(const cv_problem *c, int64_t k, int64_t ch, int64_t r, int64_t s) {
  return c->nhwc ? ((k * c->R + r) * c->S + s) * c->C + ch
                 : ((k * c->C + ch) * c->R + r) * c->S + s;
}
/* Index of output (k, p, q) within its image's row. */
static int64_t out_at(const cv_problem *c, int64_t k, int64_t p, int64_t q) {
  return c->nhwc ? (p * c->Q + q) * c->K + k : (k * c->P + p) * c->Q + q;
}

static void cv_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                         double *const *out) {
  const cv_problem c = cv_of(p);
  const int64_t image = c.C * c.H * c.W, row = c.K * c.P * c.Q, crs = crs_of(&c);
  double *x = malloc(sizeof(double) * (size_t)image);
  double *w = malloc(sizeof(double) * (size_t)(c.K * crs));
  double *vec = malloc(sizeof(double) * (size_t)(4 * c.K));
  if (x == NULL || w == NULL || vec == NULL) {
    for (int64_t i = 0; i < (r1 - r0) * row; ++i)
      out[0][i] = NAN; /* fails the check rather than passing anything */
    free(x);
    free(w);
    free(vec);
    return;
  }
  for (int64_t i = 0; i < c.K * crs; ++i)
    w[i] = fp_host_load(&in[1], i);
  const int nvec = c.kind == KIND_BN ? 4 : (c.bias ? 1 : 0);
  for (int v = 0; v < nvec; ++v)
    for (int64_t k = 0; k < c.K; ++k)
      vec[v * c.K + k] = fp_host_load(&in[2 + v], k);
  for (int64_t n = r0; n < r1; ++n) {
    for (int64_t i = 0; i < image; ++i)
      x[i] = fp_host_load(&in[0], n * image + i);
    double *o = out[0] + (n - r0) * row;
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t pp = 0; pp < c.P; ++pp)
        for (int64_t q = 0; q < c.Q; ++q) {
          double acc = 0.0;
          for (int64_t ch = 0; ch < c.C; ++ch)
            for (int64_t r = 0; r < c.R; ++r) {
              const int64_t h = pp * c.stride - c.pad + r * c.dil;
              if (h < 0 || h >= c.H)
                continue;
              for (int64_t s = 0; s < c.S; ++s) {
                const int64_t ww = q * c.stride - c.pad + s * c.dil;
                if (ww >= 0 && ww < c.W)
                  acc += x[x_at(&c, 0, ch, h, ww)] * w[w_at(&c, k, ch, r, s)];
              }
            }
          const int64_t at = out_at(&c, k, pp, q);
          double v = acc;
          if (c.kind == KIND_BN) {
            v = (acc - vec[k]) / sqrt(vec[c.K + k] + (double)c.eps) * vec[2 * c.K + k] +
                vec[3 * c.K + k];
          } else {
            if (c.bias)
              v += vec[k];
            if (c.full_add)
              v += fp_host_load(&in[2], n * row + at);
            if (c.kind == KIND_RELU)
              v = v > 0.0 || isnan(v) ? v : 0.0;
          }
          o[at] = v;
        }
  }
  free(x);
  free(w);
  free(vec);
}

/* The gate, as the GEMM's (ops/matmul.c): a float32 sum of C*R*S O(1)
 * products errs by about 2^-24 sqrt(CRS) of the output's scale, each
 * rounding to the storage type by eps relative (the unfused chains round
 * the convolution's output once more before the epilogue). Batch-norm
 * scales each channel by gamma / sqrt(var + eps), up to ~300 for a variance
 * near 0: those outputs carry their channel's factor in their own |ref|,
 * and the gate's atol term follows the largest of them. */
static fp_tolerance cv_tolerance(const fp_problem *p, int output) {
  (void)output;
  const cv_problem c = cv_of(p);
  const double eps = c.dtype == FP_F16    ? ldexp(1.0, -11)
                     : c.dtype == FP_BF16 ? ldexp(1.0, -8)
                                          : ldexp(1.0, -24);
  const double acc = 16.0 * ldexp(1.0, -24) * sqrt((double)crs_of(&c));
  fp_tolerance t = {4.0 * eps, 4.0 * eps + acc, 8.0 * eps + acc};
  return t;
}

/* ---- the fused variant ----------------------------------------------------------------------- */

static fp_kernel_id conv_kernel(fp_dtype dtype) {
  return dtype == FP_F16 ? FPK_conv_f16 : dtype == FP_BF16 ? FPK_conv_bf16 : FPK_conv_f32;
}

/* CUDA: the split-K workspace of the GEMM core's plan where conv_<dt> runs
 * on the GEMM core (fp_conv_gemm_request: the same question
 * kernels/cu/conv.cu asks at launch, with the same knobs); NULL where it
 * does not, or does not split. */
static fp_buffer *cuda_split_ws(fp_recipe *rc, const cv_problem *c) {
  if (rc->dev->backend != FP_BACKEND_CUDA)
    return NULL;
  fp_gemm_path force = FP_GEMM_PATH_AUTO;
  if (!fp_gemm_path_from_env(getenv("FUSEPORT_CUDA_GEMM_PATH"), &force))
    return NULL; /* the backend refuses the knob */
  const char *view = getenv("FUSEPORT_CUDA_CONV_GEMM");
  const fp_conv_gemm_shape s = {(int)c->dtype, c->epi, c->nhwc,   c->N,   c->C,
                                c->H,          c->W,   c->K,      c->R,   c->S,
                                c->P,          c->Q,   c->stride, c->pad, c->dil};
  const fp_gemm_device dev = fp_gemm_device_of(rc->dev);
  fp_gemm_request req;
  fp_gemm_plan plan;
  char why[256];
  if (!fp_conv_gemm_request(&s, &dev, view == NULL || strcmp(view, "0") != 0, &force, &req) ||
      !fp_gemm_plan_make(&req, &dev, force, &plan, why, sizeof why) || plan.ws_bytes == 0)
    return NULL;
  return fp_rc_ws_zeroed(rc, 0, plan.ws_bytes);
}

static fp_status cv_fused(fp_recipe *rc, const fp_problem *p) {
  const cv_problem c = cv_of(p);
  const uint64_t size = esize(&c);
  fp_buffer *v[4] = {NULL, NULL, NULL, NULL};
  uint64_t read = size * (uint64_t)(c.N * c.C * c.H * c.W + c.K * crs_of(&c));
  if (c.kind == KIND_BN) {
    for (int k = 0; k < 4; ++k)
      v[k] = fp_rc_in(rc, 2 + k);
    read += size * 4 * (uint64_t)c.K;
  } else if (c.bias || c.full_add) {
    v[0] = fp_rc_in(rc, 2);
    read += size * (uint64_t)(c.full_add ? out_elems(&c) : c.K);
  }
  fp_arg args[23];
  args[0] = fp_arg_tensor(fp_rc_out(rc, 0), c.dtype);
  args[1] = fp_arg_tensor(fp_rc_in(rc, 0), c.dtype);
  args[2] = fp_arg_tensor(fp_rc_in(rc, 1), c.dtype);
  for (int k = 0; k < 4; ++k)
    args[3 + k] = fp_arg_tensor(v[k], c.dtype);
  const int64_t dims[] = {c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.P, c.Q, c.stride, c.pad, c.dil};
  for (int k = 0; k < 12; ++k)
    args[7 + k] = fp_arg_i64(dims[k]);
  args[19] = fp_arg_i32(c.nhwc ? 1 : 0);
  args[20] = fp_arg_i32(c.epi);
  args[21] = fp_arg_f32(c.eps);
  args[22] = fp_arg_tensor(cuda_split_ws(rc, &c), FP_U32);
  const double flops =
      2.0 * (double)out_elems(&c) * (double)crs_of(&c) + 2.0 * (double)out_elems(&c);
  fp_ndrange nd = fp_planned_range();
  return fp_rc_launch(rc, conv_kernel(c.dtype), &nd, args, 23,
                      fp_kcost(read, size * (uint64_t)out_elems(&c), flops));
}

/* ---- the unfused and vendor variants ------------------------------------------------------- */

static fp_lib_conv lib_conv_of(const cv_problem *c) {
  fp_lib_conv l;
  memset(&l, 0, sizeof l);
  l.dtype = c->dtype;
  l.N = c->N;
  l.C = c->C;
  l.H = c->H;
  l.W = c->W;
  l.K = c->K;
  l.R = c->R;
  l.S = c->S;
  l.stride = c->stride;
  l.pad = c->pad;
  l.dil = c->dil;
  l.nhwc = c->nhwc;
  l.epilogue = FP_LIB_CONV_NONE;
  return l;
}

static fp_status rc_fail(fp_recipe *rc, fp_status st) {
  if (rc->status == FP_OK)
    rc->status = st;
  return st;
}

/* Enqueues the library convolution (and adds its cost); FP_ERR_UNSUPPORTED
 * in the dry run already when the backend's library cannot. */
static fp_status library_conv(fp_recipe *rc, const cv_problem *c, const fp_lib_conv *l,
                              fp_buffer *bias, fp_buffer *z, fp_buffer *out, int *next_ws) {
  fp_status st = fp_library_conv_check(rc->dev, l);
  if (st != FP_OK)
    return rc_fail(rc, st);
  const uint64_t size = esize(c);
  const uint64_t ws_bytes = fp_library_conv_workspace(rc->dev, l);
  fp_buffer *ws = ws_bytes > 0 ? fp_rc_ws(rc, (*next_ws)++, ws_bytes) : NULL;
  uint64_t read = size * (uint64_t)(c->N * c->C * c->H * c->W + c->K * crs_of(c));
  if (l->epilogue != FP_LIB_CONV_NONE)
    read += size * (uint64_t)c->K;
  if (l->add_z)
    read += size * (uint64_t)out_elems(c);
  return fp_rc_library_conv(rc, l, fp_rc_in(rc, 0), fp_rc_in(rc, 1), bias, z, out, ws,
                            fp_kcost(read, size * (uint64_t)out_elems(c),
                                     2.0 * (double)out_elems(c) * (double)crs_of(c)));
}

/* OpenCL's convolution: im2col into a workspace, then the GEMM library
 * (CLBlast): NHWC out [N*P*Q, K] = col @ w^T; NCHW per image out[n] [K, P*Q]
 * = w [K, C*R*S] @ col[n], one batched call. */
static fp_status im2col_gemm(fp_recipe *rc, const cv_problem *c, fp_buffer *out, int *next_ws) {
  const uint64_t size = esize(c);
  const int64_t crs = crs_of(c), pq = c->P * c->Q;
  fp_lib_gemm g;
  if (c->nhwc) {
    g = fp_lib_gemm_plain(c->dtype, c->N * pq, c->K, crs, true);
  } else {
    g = fp_lib_gemm_plain(c->dtype, c->K, pq, crs, false);
    g.batch = c->N;
    g.stride_a = 0; /* the filters, shared by every image */
    g.stride_b = crs * pq;
    g.stride_c = g.stride_d = c->K * pq;
  }
  fp_status st = fp_library_gemm_check(rc->dev, &g);
  if (st != FP_OK)
    return rc_fail(rc, st);
  fp_buffer *col = fp_rc_ws(rc, (*next_ws)++, size * (uint64_t)(c->N * pq * crs));
  fp_arg args[14];
  args[0] = fp_arg_tensor(col, c->dtype);
  args[1] = fp_arg_tensor(fp_rc_in(rc, 0), c->dtype);
  const int64_t dims[] = {c->N, c->C, c->H,      c->W,   c->R,  c->S,
                          c->P, c->Q, c->stride, c->pad, c->dil};
  for (int k = 0; k < 11; ++k)
    args[2 + k] = fp_arg_i64(dims[k]);
  args[13] = fp_arg_i32(c->nhwc ? 1 : 0);
  const fp_kernel_id id = c->dtype == FP_F16    ? FPK_im2col_f16
                          : c->dtype == FP_BF16 ? FPK_im2col_bf16
                                                : FPK_im2col_f32;
  fp_ndrange nd = fp_elem_range(rc, c->N * pq * crs);
  TRY(fp_rc_launch(rc, id, &nd, args, 14,
                   fp_kcost(size * (uint64_t)(c->N * c->C * c->H * c->W),
                            size * (uint64_t)(c->N * pq * crs), 0.0)));
  const uint64_t ws_bytes = fp_library_gemm_workspace(rc->dev, &g);
  fp_buffer *ws = ws_bytes > 0 ? fp_rc_ws(rc, (*next_ws)++, ws_bytes) : NULL;
  fp_buffer *a = c->nhwc ? col : fp_rc_in(rc, 1), *b = c->nhwc ? fp_rc_in(rc, 1) : col;
  return fp_rc_library_gemm(rc, &g, a, b, NULL, out, NULL, ws,
                            fp_kcost(size * (uint64_t)(c->N * pq * crs + c->K * crs),
                                     size * (uint64_t)out_elems(c),
                                     2.0 * (double)out_elems(c) * (double)crs));
}

/* The convolution alone into out, the way the backend runs it. */
static fp_status plain_conv(fp_recipe *rc, const cv_problem *c, fp_buffer *out, int *next_ws) {
  const fp_lib_conv l = lib_conv_of(c);
  if (rc->dev->backend == FP_BACKEND_OPENCL && fp_library_conv_check(rc->dev, &l) != FP_OK)
    return im2col_gemm(rc, c, out, next_ws);
  return library_conv(rc, c, &l, NULL, NULL, out, next_ws);
}

static fp_status cv_unfused(fp_recipe *rc, const fp_problem *p) {
  const cv_problem c = cv_of(p);
  int next_ws = 0;
  const int64_t total = out_elems(&c), inner = c.nhwc ? 1 : c.P * c.Q;
  fp_buffer *out = fp_rc_out(rc, 0);
  if (c.kind == KIND_ADD && c.bias) { /* conv2d(x, w, bias): the bias added in place */
    TRY(plain_conv(rc, &c, out, &next_ws));
    fp_buffer *v[4] = {fp_rc_in(rc, 2), NULL, NULL, NULL};
    return fp_prim_channel(rc, FP_CHAN_ADD, c.dtype, out, out, v, total, inner, c.K, 0.0f);
  }
  fp_buffer *y = fp_rc_ws(rc, next_ws++, esize(&c) * (uint64_t)total);
  TRY(plain_conv(rc, &c, y, &next_ws));
  const fp_view yv = fp_view_typed(fp_view_rows(y, 1, total), c.dtype);
  const fp_view ov = fp_view_typed(fp_view_rows(out, 1, total), c.dtype);
  switch (c.kind) {
  case KIND_ADD: /* + t, a new tensor */
    return fp_prim_binary(rc, FP_BINARY_ADD, ov, yv,
                          fp_view_typed(fp_view_rows(fp_rc_in(rc, 2), 1, total), c.dtype));
  case KIND_RELU:
    if (c.bias) {
      fp_buffer *v[4] = {fp_rc_in(rc, 2), NULL, NULL, NULL};
      TRY(fp_prim_channel(rc, FP_CHAN_ADD, c.dtype, y, y, v, total, inner, c.K, 0.0f));
    }
    return fp_prim_unary(rc, FP_UNARY_RELU, 0.0f, 0.0f, ov, yv);
  case KIND_BN: {
    fp_buffer *v[4] = {fp_rc_in(rc, 2), fp_rc_in(rc, 3), fp_rc_in(rc, 4), fp_rc_in(rc, 5)};
    return fp_prim_channel(rc, FP_CHAN_BN, c.dtype, out, y, v, total, inner, c.K, c.eps);
  }
  }
  return FP_ERR_INTERNAL;
}

static fp_status cv_vendor(fp_recipe *rc, const fp_problem *p) {
  const cv_problem c = cv_of(p);
  if (c.kind == KIND_BN)
    return rc_fail(rc, fp_error(FP_ERR_UNSUPPORTED,
                                "conv_bn: cuDNN's conv-bias-activation has no per-channel scale "
                                "(batch-norm); no vendor fusion here"));
  fp_lib_conv l = lib_conv_of(&c);
  l.epilogue = c.kind == KIND_RELU ? FP_LIB_CONV_BIAS_RELU : FP_LIB_CONV_BIAS;
  l.add_z = c.full_add;
  int next_ws = 0;
  fp_buffer *bias = NULL, *z = NULL;
  if (c.bias) {
    bias = fp_rc_in(rc, 2);
  } else { /* the call takes a bias: a zero one (zeroed once, at plan creation) */
    bias = fp_rc_ws_zeroed(rc, next_ws++, esize(&c) * (uint64_t)c.K);
    if (c.full_add)
      z = fp_rc_in(rc, 2);
  }
  return library_conv(rc, &c, &l, bias, z, fp_rc_out(rc, 0), &next_ws);
}

/* ---- shapes and the ops -----------------------------------------------------------------------
 */

/* N x C x H x W x K x R x stride. ResNet-50's distinct convolutions (padding
 * R / 2) at batch 1, 8, 32 and 128, and two odd shapes. */
#define RN(n)                                                                                      \
  n, 3, 224, 224, 64, 7, 2, n, 64, 56, 56, 64, 1, 1, n, 64, 56, 56, 64, 3, 1, n, 64, 56, 56, 256,  \
      1, 1, n, 256, 56, 56, 64, 1, 1, n, 256, 56, 56, 128, 1, 1, n, 128, 56, 56, 128, 3, 2, n,     \
      128, 28, 28, 512, 1, 1, n, 256, 56, 56, 512, 1, 2, n, 512, 28, 28, 128, 1, 1, n, 128, 28,    \
      28, 128, 3, 1, n, 512, 28, 28, 256, 1, 1, n, 256, 28, 28, 256, 3, 2, n, 256, 14, 14, 1024,   \
      1, 1, n, 512, 28, 28, 1024, 1, 2, n, 1024, 14, 14, 256, 1, 1, n, 256, 14, 14, 256, 3, 1, n,  \
      1024, 14, 14, 512, 1, 1, n, 512, 14, 14, 512, 3, 2, n, 512, 7, 7, 2048, 1, 1, n, 1024, 14,   \
      14, 2048, 1, 2, n, 2048, 7, 7, 512, 1, 1, n, 512, 7, 7, 512, 3, 1
static const int64_t cv_seed[] = {RN(1), RN(8), RN(32), RN(128), 8, 3, 33, 33, 17,
                                  3,     2,     3,      17,      7, 7, 5,  3,  1};
/* the quick default: ResNet-50's 3x3 and two 1x1 layers at batch 32 */
static const int64_t cv_default[] = {32, 64,  56, 56, 64,  3, 1, 32, 128,  28, 28, 128, 3, 1,
                                     32, 256, 14, 14, 256, 3, 1, 32, 512,  7,  7,  512, 3, 1,
                                     32, 256, 56, 56, 64,  1, 1, 32, 1024, 14, 14, 256, 1, 1};
/* odd shapes for `check`: C = 1, 3, 17; H = W = 1, 7, 33; stride 2; a 7x7
 * filter; channel counts that take the tensor-core paths (multiples of 8;
 * of 64 for CUDA's Hopper path: 64 x 14 x 14, and 64 x 9 x 11 at stride 2
 * with 60 pixels and 40 filters, tails of both tile sides); 1x1 filters at
 * stride 1, which CUDA runs as plain GEMMs (M = 1: the skinny path; 98 and
 * 429 rows, C = 8 and 72: a k-tail on the tensor cores) */
static const int64_t cv_check[] = {
    1, 1,  1, 1, 1,  1,  1,  2, 3,  7, 7,  5, 3,  1,  3,  17, 33, 33, 8,  3,  2,  2,  8,  7, 7,  17,
    1, 1,  1, 3, 33, 33, 16, 7, 2,  2, 16, 9, 9,  8,  3,  1,  1,  64, 14, 14, 64, 3,  1,  4, 32, 8,
    8, 24, 1, 2, 2,  24, 1,  1, 40, 3, 1,  3, 72, 11, 13, 40, 1,  1,  2,  64, 9,  11, 40, 3, 2};

#define CV_PARAMS(...)                                                                             \
  {                                                                                                \
    {"N", FP_PARAM_DIM, 8, 1, FP_DIM_MAX, NULL, "batch"},                                          \
        {"C", FP_PARAM_DIM, 64, 1, FP_DIM_MAX, NULL, "input channels"},                            \
        {"H", FP_PARAM_DIM, 56, 1, FP_DIM_MAX, NULL, "input height"},                              \
        {"W", FP_PARAM_DIM, 56, 1, FP_DIM_MAX, NULL, "input width"},                               \
        {"K", FP_PARAM_DIM, 64, 1, FP_DIM_MAX, NULL, "output channels (filters)"},                 \
        {"R", FP_PARAM_DIM, 3, 1, 1024, NULL, "filter height"},                                    \
        {"stride", FP_PARAM_DIM, 1, 1, 1024, NULL, "stride of both axes (>= 1)"},                  \
        {"S", FP_PARAM_INT, 0, 0, 1024, NULL, "filter width; 0: the same as R"},                   \
        {"padding",                                                                                \
         FP_PARAM_INT,                                                                             \
         -1,                                                                                       \
         -1,                                                                                       \
         1000000,                                                                                  \
         NULL,                                                                                     \
         "zero padding of both axes; -1: dilation*(R-1)/2 (a 3x3 filter keeps the size)"},         \
        {"dilation", FP_PARAM_DIM, 1, 1, 1024, NULL, "dilation of both axes (>= 1)"},              \
        {"layout",                                                                                 \
         FP_PARAM_CHOICE,                                                                          \
         0,                                                                                        \
         0,                                                                                        \
         1,                                                                                        \
         layout_choices,                                                                           \
         "nchw: x [N,C,H,W], w [K,C,R,S], out [N,K,P,Q]; nhwc (channels-last): x [N,H,W,C], "      \
         "w [K,R,S,C], out [N,P,Q,K]"},                                                            \
        {"dtype",                                                                                  \
         FP_PARAM_CHOICE,                                                                          \
         0,                                                                                        \
         0,                                                                                        \
         2,                                                                                        \
         dtype_choices,                                                                            \
         "element type: f32 (float32 arithmetic, no TF32), f16 or bf16 (float32 accumulation)"},   \
        __VA_ARGS__                                                                                \
  }

#define CV_VARIANTS(vendor_summary)                                                                \
  .n_variants = 3,                                                                                 \
  .variants = {                                                                                    \
      {"fused",                                                                                    \
       "fuseport's implicit GEMM: im2col gathered in the operand loader (CUDA: 1x1 NHWC "          \
       "layers at stride 1 as plain GEMMs), the epilogue in registers, one launch",                \
       cv_fused},                                                                                  \
      {"unfused",                                                                                  \
       "the backend's convolution (cuDNN; CPU direct; OpenCL im2col + CLBlast), then one kernel "  \
       "per epilogue step",                                                                        \
       cv_unfused},                                                                                \
      {"vendor", vendor_summary, cv_vendor},                                                       \
  }

#define CV_COMMON                                                                                  \
  .family = "conv", .n_params = 13, .n_grid = 7, .n_grid_min = 5,                                  \
  .grid_param = {CV_N, CV_C, CV_H, CV_W, CV_K, CV_R, CV_STRIDE}, .seed_shapes = cv_seed,           \
  .n_seed_shapes = (int)(sizeof cv_seed / sizeof cv_seed[0]), .default_shapes = cv_default,        \
  .n_default_shapes = (int)(sizeof cv_default / sizeof cv_default[0]), .check_shapes = cv_check,   \
  .n_check_shapes = (int)(sizeof cv_check / sizeof cv_check[0]),                                   \
  .compute_dtype = cv_compute_dtype, .validate = cv_validate, .describe = cv_describe,             \
  .rows = cv_rows, .reference = cv_reference, .tolerance = cv_tolerance

const fp_op fp_op_conv_add = {
    .name = "conv_add",
    .summary = "conv2d(x, w) + t: t a per-channel bias [K] or an output-shaped residual",
    .params = CV_PARAMS({"add", FP_PARAM_CHOICE, 0, 0, 1, add_choices,
                         "bias: + bias[K]; full: + t, shaped as the output (a residual)"}),
    CV_COMMON,
    CV_VARIANTS("cuDNN's conv-bias-activation (identity) in one call; a residual as its z "
                "input with a zero bias"),
};

const fp_op fp_op_conv_relu = {
    .name = "conv_relu",
    .summary = "relu(conv2d(x, w) [+ bias[K]])",
    .params = CV_PARAMS({"bias", FP_PARAM_BOOL, 0, 0, 1, NULL, "add a per-channel bias [K]"}),
    CV_COMMON,
    CV_VARIANTS("cuDNN's conv-bias-activation (relu) in one call (a zero bias without one)"),
};

const fp_op fp_op_conv_bn = {
    .name = "conv_bn",
    .summary = "inference batch-norm after conv: (conv2d(x, w) - mean) / sqrt(var + eps) * gamma "
               "+ beta, per channel",
    .params = CV_PARAMS({"eps", FP_PARAM_FLOAT, 1e-5, 1e-30, 1.0, NULL,
                         "batch-norm epsilon (PyTorch's default 1e-5)"}),
    CV_COMMON,
    CV_VARIANTS("unsupported: cuDNN's conv-bias-activation has no per-channel scale"),
};
