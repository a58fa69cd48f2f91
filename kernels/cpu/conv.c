/* fuseport CPU kernels, family conv: the executable specification of
 * kernels.def's family conv (direct loops in the order the text states), and
 * the CPU backend's convolution library (a direct convolution, what the
 * unfused variant calls where CUDA calls cuDNN). */
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "fp_device_common.h"

/* A convolution's geometry (kernels.def, family conv). */
typedef struct conv_geom {
  int64_t N, C, H, W, K, R, S, P, Q, stride, pad, dil;
  bool nhwc;
} conv_geom;

static int64_t x_index(const conv_geom *g, int64_t n, int64_t c, int64_t h, int64_t w) {
  return g->nhwc ? ((n * g->H + h) * g->W + w) * g->C + c : ((n * g->C + c) * g->H + h) * g->W + w;
}
static int64_t w_index(const conv_geom *g, int64_t k, int64_t c, int64_t r, int64_t s) {
  return g->nhwc ? ((k * g->R + r) * g->S + s) * g->C + c : ((k * g->C + c) * g->R + r) * g->S + s;
}
static int64_t out_index(const conv_geom *g, int64_t n, int64_t k, int64_t p, int64_t q) {
  return g->nhwc ? ((n * g->P + p) * g->Q + q) * g->K + k : ((n * g->K + k) * g->P + p) * g->Q + q;
}

/* The im2col column of output pixel (n, p, q) in the layout's k order
 * (NHWC (r S + s) C + c, NCHW (c R + r) S + s), zeros for padding taps. */
static void gather_patch(const conv_geom *g, const void *x, fp_dtype dt, int64_t n, int64_t p,
                         int64_t q, float *col) {
  for (int64_t c = 0; c < g->C; ++c)
    for (int64_t r = 0; r < g->R; ++r)
      for (int64_t s = 0; s < g->S; ++s) {
        const int64_t h = p * g->stride - g->pad + r * g->dil;
        const int64_t w = q * g->stride - g->pad + s * g->dil;
        const int64_t kk = g->nhwc ? (r * g->S + s) * g->C + c : (c * g->R + r) * g->S + s;
        col[kk] = (h >= 0 && h < g->H && w >= 0 && w < g->W)
                      ? fp_cpu_load_elem(dt, x, x_index(g, n, c, h, w))
                      : 0.0f;
      }
}

/* The filters as float rows [K][C*R*S] in the same k order. */
static float *filters_f32(const conv_geom *g, const void *w, fp_dtype dt) {
  const int64_t crs = g->C * g->R * g->S;
  float *f = malloc(sizeof(float) * (size_t)(g->K * crs));
  if (f != NULL)
    for (int64_t i = 0; i < g->K * crs; ++i)
      f[i] = fp_cpu_load_elem(dt, w, i); /* both layouts store filter k's taps contiguously */
  return f;
}

/* Calls emit(n, k, p, q, acc) for every output, acc the float32 sum. The
 * filter layouts keep each filter's C*R*S taps contiguous in the k order of
 * gather_patch, so each output is one dot product. */
typedef void (*emit_fn)(void *user, const conv_geom *g, int64_t n, int64_t k, int64_t p, int64_t q,
                        float acc);
static bool direct_conv(const conv_geom *g, const void *x, const void *w, fp_dtype dt, emit_fn emit,
                        void *user) {
  const int64_t crs = g->C * g->R * g->S;
  float *f = filters_f32(g, w, dt);
  float *col = malloc(sizeof(float) * (size_t)crs);
  if (f == NULL || col == NULL) {
    free(f);
    free(col);
    return false;
  }
  (void)w_index;
  for (int64_t n = 0; n < g->N; ++n)
    for (int64_t p = 0; p < g->P; ++p)
      for (int64_t q = 0; q < g->Q; ++q) {
        gather_patch(g, x, dt, n, p, q, col);
        for (int64_t k = 0; k < g->K; ++k) {
          const float *fk = f + k * crs;
          float acc = 0.0f;
          for (int64_t i = 0; i < crs; ++i)
            acc += col[i] * fk[i];
          emit(user, g, n, k, p, q, acc);
        }
      }
  free(f);
  free(col);
  return true;
}

typedef struct conv_out {
  void *out;
  const void *v[4];
  fp_dtype dt;
  int epi;
  float eps;
} conv_out;

static void emit_epilogue(void *user, const conv_geom *g, int64_t n, int64_t k, int64_t p,
                          int64_t q, float acc) {
  const conv_out *o = user;
  const int64_t i = out_index(g, n, k, p, q);
  float v;
  if (o->epi == FP_CONV_EPI_BN) {
    v = fp_bn(acc, fp_cpu_load_elem(o->dt, o->v[0], k), fp_cpu_load_elem(o->dt, o->v[1], k),
              fp_cpu_load_elem(o->dt, o->v[2], k), fp_cpu_load_elem(o->dt, o->v[3], k), o->eps);
  } else {
    const float extra = FP_EPI_READS_BIAS(o->epi)  ? fp_cpu_load_elem(o->dt, o->v[0], k)
                        : FP_EPI_READS_ADD(o->epi) ? fp_cpu_load_elem(o->dt, o->v[0], i)
                                                   : 0.0f;
    v = fp_epilogue_unpaired(o->epi, acc, extra);
  }
  fp_cpu_store_elem(o->dt, o->out, i, v);
}

/* conv_<dt>(out, x, w, v0, v1, v2, v3, N, C, H, W, K, R, S, P, Q, stride,
 *           pad, dil, nhwc, epilogue, eps) */
static void conv_any(const fp_karg *args, fp_dtype dt) {
  conv_geom g;
  g.N = FP_CPU_I64(args, 7);
  g.C = FP_CPU_I64(args, 8);
  g.H = FP_CPU_I64(args, 9);
  g.W = FP_CPU_I64(args, 10);
  g.K = FP_CPU_I64(args, 11);
  g.R = FP_CPU_I64(args, 12);
  g.S = FP_CPU_I64(args, 13);
  g.P = FP_CPU_I64(args, 14);
  g.Q = FP_CPU_I64(args, 15);
  g.stride = FP_CPU_I64(args, 16);
  g.pad = FP_CPU_I64(args, 17);
  g.dil = FP_CPU_I64(args, 18);
  g.nhwc = FP_CPU_I32(args, 19) != 0;
  conv_out o;
  o.out = args[0].v.handle;
  for (int k = 0; k < 4; ++k)
    o.v[k] = args[3 + k].v.handle;
  o.dt = dt;
  o.epi = FP_CPU_I32(args, 20);
  o.eps = FP_CPU_F32(args, 21);
  /* no memory: the outputs keep their poison, which the check reports */
  (void)direct_conv(&g, args[1].v.handle, args[2].v.handle, dt, emit_epilogue, &o);
}

static void conv_f32(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  conv_any(args, FP_F32);
}
static void conv_f16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  conv_any(args, FP_F16);
}
static void conv_bf16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  conv_any(args, FP_BF16);
}

/* im2col_<dt>(col, x, N, C, H, W, R, S, P, Q, stride, pad, dil, nhwc) */
static void im2col_any(const fp_karg *args, fp_dtype dt) {
  conv_geom g;
  memset(&g, 0, sizeof g);
  g.N = FP_CPU_I64(args, 2);
  g.C = FP_CPU_I64(args, 3);
  g.H = FP_CPU_I64(args, 4);
  g.W = FP_CPU_I64(args, 5);
  g.R = FP_CPU_I64(args, 6);
  g.S = FP_CPU_I64(args, 7);
  g.P = FP_CPU_I64(args, 8);
  g.Q = FP_CPU_I64(args, 9);
  g.stride = FP_CPU_I64(args, 10);
  g.pad = FP_CPU_I64(args, 11);
  g.dil = FP_CPU_I64(args, 12);
  g.nhwc = FP_CPU_I32(args, 13) != 0;
  void *colbuf = args[0].v.handle;
  const void *x = args[1].v.handle;
  const int64_t crs = g.C * g.R * g.S, pq = g.P * g.Q;
  float *col = malloc(sizeof(float) * (size_t)crs);
  if (col == NULL)
    return;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t p = 0; p < g.P; ++p)
      for (int64_t q = 0; q < g.Q; ++q) {
        gather_patch(&g, x, dt, n, p, q, col);
        const int64_t pix = p * g.Q + q;
        for (int64_t kk = 0; kk < crs; ++kk)
          fp_cpu_store_elem(
              dt, colbuf, g.nhwc ? (n * pq + pix) * crs + kk : (n * crs + kk) * pq + pix, col[kk]);
      }
  free(col);
}

static void im2col_f32(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  im2col_any(args, FP_F32);
}
static void im2col_f16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  im2col_any(args, FP_F16);
}
static void im2col_bf16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  im2col_any(args, FP_BF16);
}

/* ---- the library convolution --------------------------------------------------- */

typedef struct lib_out {
  void *out;
  const void *bias, *z;
  fp_dtype dt;
  fp_lib_conv_epilogue epi;
} lib_out;

static void emit_library(void *user, const conv_geom *g, int64_t n, int64_t k, int64_t p, int64_t q,
                         float acc) {
  const lib_out *o = user;
  const int64_t i = out_index(g, n, k, p, q);
  float v = acc;
  if (o->epi != FP_LIB_CONV_NONE) {
    v += fp_cpu_load_elem(o->dt, o->bias, k);
    if (o->z != NULL)
      v += fp_cpu_load_elem(o->dt, o->z, i);
    if (o->epi == FP_LIB_CONV_BIAS_RELU)
      v = v > 0.0f || v != v ? v : 0.0f;
  }
  fp_cpu_store_elem(o->dt, o->out, i, v);
}

fp_status fp_cpu_library_conv(fp_context *ctx, const fp_lib_conv *c, void *x, void *w, void *bias,
                              void *z, void *out, void *ws, uint64_t ws_bytes) {
  (void)ws;
  (void)ws_bytes;
  conv_geom g;
  g.N = c->N;
  g.C = c->C;
  g.H = c->H;
  g.W = c->W;
  g.K = c->K;
  g.R = c->R;
  g.S = c->S;
  g.P = fp_conv_out_dim(c->H, c->R, c->stride, c->pad, c->dil);
  g.Q = fp_conv_out_dim(c->W, c->S, c->stride, c->pad, c->dil);
  g.stride = c->stride;
  g.pad = c->pad;
  g.dil = c->dil;
  g.nhwc = c->nhwc;
  lib_out o = {out, bias, c->add_z ? z : NULL, c->dtype, c->epilogue};
  if (!direct_conv(&g, x, w, c->dtype, emit_library, &o))
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "CPU convolution: no host memory");
  return FP_OK;
}

void fp_cpu_register_conv(fp_cpu_kernel_fn table[FPK_COUNT]) {
  table[FPK_conv_f32] = conv_f32;
  table[FPK_conv_f16] = conv_f16;
  table[FPK_conv_bf16] = conv_bf16;
  table[FPK_im2col_f32] = im2col_f32;
  table[FPK_im2col_f16] = im2col_f16;
  table[FPK_im2col_bf16] = im2col_bf16;
}
