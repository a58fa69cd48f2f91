/* fuseport CUDA kernels, family conv: 2-D convolution with a fused epilogue.
 * Semantics: kernels/kernels.def, family conv; reference: kernels/cpu/conv.c.
 *
 * conv_<dt> is PLANNED: the backend hands its arguments to
 * fp_cuda_conv_launch (below), which validates them, picks a path and
 * launches one kernel:
 *   SM90  conv_sm90.cu: implicit GEMM on Hopper tensor cores (wgmma, TMA
 *         for both operands, the input through an im2col tensor map),
 *         f16/bf16, NHWC, C % 64 == 0, K % 8 == 0, x and w 16-byte
 *         aligned, padding and filter extent within TMA's im2col limits,
 *         compute capability 9.0, builds with FUSEPORT_GEMM_SM90 only. The
 *         planner takes it wherever it is eligible (kSm90Auto, below);
 *   SM80  conv_sm80.cu: implicit GEMM on tensor cores (cp.async + ldmatrix
 *         + mma.sync), f16/bf16, NHWC, C % 8 == 0, x and w 16-byte
 *         aligned, compute capability >= 8.0;
 *   GATHER conv_gather.cu: implicit GEMM on tensor cores (mma.sync) with
 *         the taps gathered element by element, for what SM80 cannot load:
 *         f16/bf16 NHWC with C*R*S <= 256, any C (the stem's 3) and
 *         alignment, compute capability >= 8.0;
 *   SIMT  conv_simt.cu: implicit GEMM on CUDA cores, every dtype (f16/bf16
 *         stored, float math; f32 with true float FMA, no TF32), both
 *         layouts, any shape and alignment.
 * Before those, the GEMM core takes what it can (run_as_gemm below), with
 * the path and tiles its planner picks (split-K in the workspace ops/conv.c
 * sizes from the same plan, fp_conv_gemm_request):
 *   an NHWC 1x1 convolution with stride 1 and no padding is a plain GEMM
 *     [N*H*W, C] x [K, C]^T (f32: for C <= 256 only), on any path whose
 *     rows load it;
 *   an NHWC convolution the SM90 path above is eligible for runs on the
 *     GEMM core's Hopper kernel instead, A loaded by TMA's im2col mode:
 *     [N*P*Q, R*S*C] x [K, R*S*C]^T with the GEMM's persistent tiles,
 *     clusters, split-K and overlapped TMA-store epilogue;
 * unless FUSEPORT_CUDA_CONV_GEMM=0 or no GEMM path takes it (rows a
 * tensor-core path cannot load: C % 8 != 0 or x, w not 16-byte aligned;
 * FUSEPORT_CUDA_GEMM_PATH=sm80 or simt for the im2col view); then it goes
 * on to the paths above.
 * FUSEPORT_CUDA_GEMM_PATH (env->force_path): simt forces the SIMT path for
 * every convolution, sm80 the SM80 path wherever it is eligible (GATHER,
 * then SIMT elsewhere), sm90 the SM90 path wherever it is eligible (else as auto);
 * other values leave the choice to the planner (f32 has no tensor-core
 * path at all).
 *
 * im2col_<dt> (ELEM): the unfused OpenCL path's gathered operand, a
 * grid-stride loop; 16-bit types are copied as bits (one kernel for both).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "conv_common.cuh"
#include "cuda/gemm_plan.h"
#include "device_common.cuh"

using namespace fpconv;

namespace {

/* The planner's own choice of the SM90 path where it is eligible. Measured
 * on an H200, 2026-11-28, ResNet-50 layers at batch 32, f16 NHWC, with
 * bias+relu: the SM90 path (its planner's row) took 26.6-48.2 us on the 3x3
 * layers against SM80's 40.8-61.8 (0.86x at 64 x 56 x 56, 0.44x at
 * 512 x 7 x 7), 36.4-44.7 against 45.0-48.8 on two strided 1x1 layers and
 * 73.9 against 68.3 on the third (256 x 56 x 56 -> 512 / 2). */
#ifdef FUSEPORT_GEMM_SM90
constexpr bool kSm90Auto = true;
#endif

enum ConvPath { PATH_SIMT, PATH_SM80, PATH_SM90, PATH_GATHER };

/* ---- im2col (ELEM over N*P*Q*C*R*S) ----------------------------------------------- */

template <class T>
__global__ void __launch_bounds__(fpcu::kMaxBlock, 1)
    im2col_kernel(T *col, const T *x, long long N, long long C, long long H, long long W,
                  long long R, long long S, long long P, long long Q, long long stride,
                  long long pad, long long dil, int nhwc) {
  const long long crs = C * R * S, pq = P * Q, total = N * pq * crs;
  for (long long i = fpcu::grid_thread_index(); i < total; i += fpcu::grid_thread_count()) {
    long long n, pix, kk, c, r, s;
    if (nhwc) { /* col[(n P + p) Q + q][(r S + s) C + c] */
      const long long m = i / crs;
      kk = i - m * crs;
      n = m / pq;
      pix = m - n * pq;
      c = kk % C;
      s = (kk / C) % S;
      r = kk / (C * S);
    } else { /* col[n][(c R + r) S + s][p Q + q] */
      const long long nk = i / pq;
      pix = i - nk * pq;
      n = nk / crs;
      kk = nk - n * crs;
      s = kk % S;
      r = (kk / S) % R;
      c = kk / (R * S);
    }
    const long long p = pix / Q, q = pix - p * Q;
    const long long h = p * stride - pad + r * dil, w = q * stride - pad + s * dil;
    T v = T(0); /* 16-bit types move as bits: one instantiation serves f16 and bf16 */
    if (h >= 0 && h < H && w >= 0 && w < W)
      v = x[nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w];
    col[i] = v;
  }
}

/* ---- validation ---------------------------------------------------------------------- */

long long out_dim(long long H, long long R, long long stride, long long pad, long long dil) {
  const long long span = H + 2 * pad - dil * (R - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

/* false, with msg, when the arguments break kernels.def's contract or the
 * kernels' limits (every dim and C*R*S below 2^30, so the in-kernel int
 * arithmetic on coordinates cannot overflow; tensors may pass 2^31). */
bool validate(const Problem &p, char *msg, size_t msglen) {
  const long long lim = 1LL << 30;
  const long long dims[] = {p.N, p.C, p.H, p.W, p.K, p.R, p.S, p.stride, p.dil};
  const char *const names[] = {"N", "C", "H", "W", "K", "R", "S", "stride", "dil"};
  for (int i = 0; i < 9; ++i)
    if (dims[i] < 1 || dims[i] >= lim) {
      snprintf(msg, msglen, "%s=%lld: must be in [1, 2^30)", names[i], dims[i]);
      return false;
    }
  if (p.pad < 0 || p.pad >= lim) {
    snprintf(msg, msglen, "pad=%lld: must be in [0, 2^30)", p.pad);
    return false;
  }
  /* the kernels step tap digits up to BK past the last tap and form
   * p*stride - pad + r*dil in int: keep those below 2^30 too */
  const long long span = (p.R > p.S ? p.R : p.S) + 32;
  if (p.C * p.R * p.S >= lim || p.dil * span >= lim || p.H + 2 * p.pad >= lim ||
      p.W + 2 * p.pad >= lim) {
    snprintf(msg, msglen,
             "C*R*S=%lld, the dilated filter or the padded input is too large for the kernels' "
             "32-bit coordinates",
             p.C * p.R * p.S);
    return false;
  }
  const long long P = out_dim(p.H, p.R, p.stride, p.pad, p.dil);
  const long long Q = out_dim(p.W, p.S, p.stride, p.pad, p.dil);
  if (P < 1 || Q < 1) {
    snprintf(msg, msglen,
             "the %lldx%lld filter (dilation %lld) is larger than the padded %lldx%lld input", p.R,
             p.S, p.dil, p.H + 2 * p.pad, p.W + 2 * p.pad);
    return false;
  }
  if (p.P != P || p.Q != Q) {
    snprintf(msg, msglen, "P=%lld, Q=%lld: the formula gives %lld, %lld", p.P, p.Q, P, Q);
    return false;
  }
  if (!FP_CONV_EPI_VALID(p.epilogue)) {
    snprintf(msg, msglen, "unknown convolution epilogue %d", p.epilogue);
    return false;
  }
  const int nvec = p.epilogue == FP_CONV_EPI_BN                                      ? 4
                   : (FP_EPI_READS_BIAS(p.epilogue) || FP_EPI_READS_ADD(p.epilogue)) ? 1
                                                                                     : 0;
  for (int i = 0; i < nvec; ++i)
    if (p.v[i] == nullptr) {
      snprintf(msg, msglen, "epilogue %d reads v%d, which was passed as none", p.epilogue, i);
      return false;
    }
  if (p.out == nullptr || p.x == nullptr || p.w == nullptr) {
    snprintf(msg, msglen, "out, x and w must be buffers");
    return false;
  }
  return true;
}

int dtype_of(fp_kernel_id id) {
  return id == FPK_conv_f16 ? FP_F16 : (id == FPK_conv_bf16 ? FP_BF16 : FP_F32);
}

/* ---- convolutions on the GEMM core ----------------------------------------------------
 * fp_conv_gemm_request (gemm_plan.c) says which convolutions the GEMM core
 * runs and with what request; ops/conv.c sizes the split-K workspace from
 * the same answer. A 1x1 NHWC layer at stride 1 is a plain GEMM: x is A
 * [N*H*W, C] row-major, w is B [K, C] (trans_b), out is [N*H*W, K], and the
 * ADD operand has out's layout. Other NHWC layers that TMA's im2col mode
 * takes run on the GEMM core's Hopper kernel with A loaded through an
 * im2col tensor map (gemm_sm90.cu's ImTap): the same persistent kernel,
 * tiles, clusters, B multicast, split-K and overlapped TMA-store epilogue
 * (residual by TMA) as gemm_<dt>, for [N*P*Q, R*S*C] x [K, R*S*C]^T. The
 * epilogue is the GEMM core's (EpiLinear knows the batch-norm). */
fp_conv_gemm_shape shape_of(const Problem &p) {
  fp_conv_gemm_shape s;
  s.dtype = p.dtype;
  s.epilogue = p.epilogue;
  s.nhwc = p.nhwc != 0;
  s.N = p.N;
  s.C = p.C;
  s.H = p.H;
  s.W = p.W;
  s.K = p.K;
  s.R = p.R;
  s.S = p.S;
  s.P = p.P;
  s.Q = p.Q;
  s.stride = p.stride;
  s.pad = p.pad;
  s.dil = p.dil;
  return s;
}

/* The GEMM core's view of p: out [N*P*Q, K] = A [N*P*Q, C*R*S] @ w^T, A the
 * input itself (a 1x1 layer at stride 1: x [N*H*W, C]) or, with
 * g.im2col set, its im2col (kk = (r S + s) C + c, NHWC's order). */
fpgemm::Problem gemm_view(const Problem &p, void *ws) {
  fpgemm::Problem g;
  g.out = p.out;
  g.a = p.x;
  g.b = p.w;
  g.bias = FP_EPI_READS_BIAS(p.epilogue) ? p.v[0] : nullptr;
  g.add = FP_EPI_READS_ADD(p.epilogue) ? p.v[0] : nullptr;
  g.ws = ws;
  g.ws_bytes = 0; /* run_view: the plan's */
  g.M = p.gemm_m();
  g.N = p.K;
  g.K = p.gemm_k();
  g.lda = g.K;
  g.ldb = g.K;
  g.epilogue = p.epilogue;
  g.trans_b = 1;
  g.dtype = p.dtype;
  if (p.epilogue == FP_CONV_EPI_BN)
    for (int i = 0; i < 4; ++i)
      g.bn[i] = p.v[i];
  g.eps = p.eps;
  return g;
}

fpgemm::Im2col im2col_of(const Problem &p) {
  fpgemm::Im2col v;
  v.N = p.N;
  v.H = p.H;
  v.W = p.W;
  v.C = p.C;
  v.R = (int)p.R;
  v.S = (int)p.S;
  v.P = (int)p.P;
  v.Q = (int)p.Q;
  v.stride = (int)p.stride;
  v.pad = (int)p.pad;
  v.dil = (int)p.dil;
  return v;
}

bool aligned16(const void *ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

/* Runs p on the GEMM core where fp_conv_gemm_request says so (ws: the
 * recipe's split-K workspace, or nullptr). false: it does not, or no GEMM
 * path takes it; nothing launched. */
bool run_as_gemm(const Problem &p, void *ws, const fp_cuda_gemm_env *env, cudaError_t *err,
                 int *kernels_launched, char *msg, size_t msglen) {
  const fp_gemm_device dev = fpgemm::device_of(env);
  const fp_conv_gemm_shape shape = shape_of(p);
  fp_gemm_path force = static_cast<fp_gemm_path>(env->force_path);
  fp_gemm_request req;
  if (!fp_conv_gemm_request(&shape, &dev, env->conv_gemm, &force, &req) ||
      (req.im2col && (!aligned16(p.x) || !aligned16(p.w))))
    return false;
  req.no_split = ws == nullptr;
  const fpgemm::Im2col im = im2col_of(p);
  fpgemm::Problem g = gemm_view(p, ws);
  if (req.im2col)
    g.im2col = &im;
  bool planned = false;
  fp_gemm_plan plan;
  char why[256];
  *err = fpgemm::run_view(g, req, force, env, &planned, &plan, why, sizeof why);
  if (!planned)
    return false;
  if (*err == cudaSuccess)
    *kernels_launched = 1;
  else
    snprintf(msg, msglen, "conv as %s GEMM, the %s path (configuration %d, %dx%dx%d, split %d)%s%s",
             req.im2col ? "an im2col" : "a", fp_gemm_path_name(plan.path), plan.config, plan.bm,
             plan.bn, plan.bk, plan.split_k, why[0] != '\0' ? ": " : "", why);
  return true;
}

/* the planner's row, or the one FUSEPORT_CUDA_CONV_CFG forces (a timing
 * knob, -1: none; cuda_backend.c checks it) where the path's table has it */
int row_of(int picked, int forced, const char *(*name_of)(int)) {
  return forced >= 0 && strcmp(name_of(forced), "?") != 0 ? forced : picked;
}

} // namespace

/* ---- the host interface (cuda_kernels.h) ------------------------------------------- */

extern "C" bool fp_cuda_conv_is_planned(fp_kernel_id id) {
  return id == FPK_conv_f32 || id == FPK_conv_f16 || id == FPK_conv_bf16;
}

extern "C" cudaError_t fp_cuda_conv_launch(fp_kernel_id id, const fp_karg *args, int nargs,
                                           const fp_cuda_gemm_env *env, int *kernels_launched,
                                           char *msg, size_t msglen) {
  *kernels_launched = 0;
  msg[0] = '\0';
  if (!fp_cuda_conv_is_planned(id)) {
    snprintf(msg, msglen, "%s is not a convolution", fp_kernel_name(id));
    return cudaErrorInvalidValue;
  }
  if (nargs != 23) {
    snprintf(msg, msglen, "%d arguments, conv takes 23", nargs);
    return cudaErrorInvalidValue;
  }
  /* (out, x, w, v0, v1, v2, v3, N, C, H, W, K, R, S, P, Q, stride, pad, dil,
   *  nhwc, epilogue, eps, ws) */
  Problem p;
  p.out = args[0].v.handle;
  p.x = args[1].v.handle;
  p.w = args[2].v.handle;
  for (int i = 0; i < 4; ++i)
    p.v[i] = args[3 + i].v.handle;
  long long *dims[] = {&p.N, &p.C, &p.H, &p.W,      &p.K,   &p.R,
                       &p.S, &p.P, &p.Q, &p.stride, &p.pad, &p.dil};
  for (int i = 0; i < 12; ++i)
    *dims[i] = args[7 + i].v.i64;
  p.nhwc = args[19].v.i32 != 0;
  p.epilogue = args[20].v.i32;
  p.eps = args[21].v.f32;
  p.dtype = dtype_of(id);
  if (!validate(p, msg, msglen))
    return cudaErrorInvalidValue;

  const int force = env->force_path;
  cudaError_t err;
  if (run_as_gemm(p, args[22].v.handle, env, &err, kernels_launched, msg, msglen))
    return err;
  ConvPath path = PATH_SIMT;
#ifdef FUSEPORT_GEMM_SM90
  if ((kSm90Auto ? force != FP_GEMM_PATH_SIMT && force != FP_GEMM_PATH_SM80
                 : force == FP_GEMM_PATH_SM90) &&
      env->cc_major == 9 && env->cc_minor == 0 && fpconv::sm90_eligible(p))
    path = PATH_SM90;
#endif
  if (path == PATH_SIMT && force != FP_GEMM_PATH_SIMT && env->cc_major >= 8 &&
      fpconv::sm80_eligible(p))
    path = PATH_SM80;
  if (path == PATH_SIMT && force != FP_GEMM_PATH_SIMT && env->cc_major >= 8 &&
      fpconv::gather_eligible(p))
    path = PATH_GATHER;
  int cfg;
  const char *name, *cfg_name;
  switch (path) {
#ifdef FUSEPORT_GEMM_SM90
  case PATH_SM90:
    cfg = row_of(fpconv::sm90_pick(p, env->sm_count), env->conv_cfg, fpconv::sm90_config_name);
    err = fpconv::sm90_run(p, cfg, env->sm_count, env->stream);
    name = "sm90";
    cfg_name = fpconv::sm90_config_name(cfg);
    break;
#endif
  case PATH_SM80:
    cfg = row_of(fpconv::sm80_pick(p, env->sm_count), env->conv_cfg, fpconv::sm80_config_name);
    err = fpconv::sm80_run(p, cfg, env->stream);
    name = "sm80";
    cfg_name = fpconv::sm80_config_name(cfg);
    break;
  case PATH_GATHER:
    cfg = 0;
    err = fpconv::gather_run(p, env->sm_count, env->stream);
    name = "gather";
    cfg_name = fpconv::gather_config_name(cfg);
    break;
  default:
    cfg = row_of(fpconv::simt_pick(p, env->sm_count), env->conv_cfg, fpconv::simt_config_name);
    err = fpconv::simt_run(p, cfg, env->stream);
    name = "simt";
    cfg_name = fpconv::simt_config_name(cfg);
    break;
  }
  if (err == cudaSuccess)
    *kernels_launched = 1;
  else
    snprintf(msg, msglen, "conv, the %s path (%s tiles)", name, cfg_name);
  return err;
}

extern "C" int fp_cuda_conv_stubs(const void **out, int cap) {
  const void *mine[128];
  int n = 0;
  n += fpconv::simt_stubs(mine + n, 128 - n);
  n += fpconv::sm80_stubs(mine + n, 128 - n);
  n += fpconv::gather_stubs(mine + n, 128 - n);
#ifdef FUSEPORT_GEMM_SM90
  n += fpconv::sm90_stubs(mine + n, 128 - n);
#endif
  int k = 0;
  for (; k < n && k < cap; ++k)
    out[k] = mine[k];
  return k;
}

extern "C" void fp_cuda_register_conv(const void *table[FPK_COUNT]) {
  /* conv_<dt> is planned: any stub marks it present */
  const void *marker = fpconv::simt_marker();
  table[FPK_conv_f32] = marker;
  table[FPK_conv_f16] = marker;
  table[FPK_conv_bf16] = marker;
  table[FPK_im2col_f32] = reinterpret_cast<const void *>(&im2col_kernel<float>);
  table[FPK_im2col_f16] = reinterpret_cast<const void *>(&im2col_kernel<unsigned short>);
  table[FPK_im2col_bf16] = reinterpret_cast<const void *>(&im2col_kernel<unsigned short>);
}

extern "C" void fp_cuda_register_tuning_conv(fp_cuda_tuning table[FPK_COUNT]) {
  (void)table; /* one build per kernel */
}
