/* fuseport CUDA kernels, family gemm: the launcher of the GEMM core.
 *
 * gemm_<dt> and gemm2_<dt> are PLANNED kernels (kernels.def): the backend
 * hands their arguments here, the plain-C planner (backend/cuda/gemm_plan.h)
 * picks a path and a tile configuration -- the same plan the recipe's dry
 * run saw, so the workspace it sized fits -- and the path's launcher runs
 * it:
 *   SM90    kernels/cu/gemm_sm90.cu   (TMA + wgmma; compiled for sm_90a only)
 *   SM80    kernels/cu/gemm_sm80.cu   (cp.async + ldmatrix + mma.sync)
 *   SIMT    kernels/cu/gemm_simt.cu   (float32 on CUDA cores)
 *   SKINNY  kernels/cu/gemm_skinny.cu (M <= 16)
 * and dw_packed_<dt> (dw_from_packed: the dequantising loader) on its own
 * plan (fp_dw_plan_make): kernels/cu/gemm_dw_sm90.cu, kernels/cu/gemm_dw.cu.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda/gemm_plan.h"
#include "device_common.cuh"
#include "gemm_common.cuh"

namespace fpgemm {
#ifdef FUSEPORT_GEMM_SM90
cudaError_t sm90_run(const Problem &p, const Config &c, cudaStream_t stream);
cudaError_t sm90_run2(const Problem2 &p, const Config &c, cudaStream_t stream);
int sm90_kernel_stubs(const void **out, int cap);
#endif
cudaError_t sm80_run(const Problem &p, const Config &c, cudaStream_t stream);
cudaError_t sm80_run2(const Problem2 &p, const Config &c, cudaStream_t stream);
int sm80_kernel_stubs(const void **out, int cap);
cudaError_t simt_run(const Problem &p, const Config &c, cudaStream_t stream);
cudaError_t simt_run2(const Problem2 &p, const Config &c, cudaStream_t stream);
int simt_kernel_stubs(const void **out, int cap);
cudaError_t skinny_run(const Problem &p, const Config &c, cudaStream_t stream);
int skinny_kernel_stubs(const void **out, int cap);
#ifdef FUSEPORT_GEMM_SM90
cudaError_t sm90_dw_run(const ProblemDw &p, const fp_dw_plan &plan, cudaStream_t stream);
int sm90_dw_stubs(const void **out, int cap);
#endif
cudaError_t simt_dw_run(const ProblemDw &p, const fp_dw_plan &plan, cudaStream_t stream);
int simt_dw_stubs(const void **out, int cap);
} // namespace fpgemm

namespace {

int dtype_of(fp_kernel_id id) {
  switch (id) {
  case FPK_gemm_f16:
  case FPK_gemm2_f16:
    return 1;
  case FPK_gemm_bf16:
  case FPK_gemm2_bf16:
    return 2;
  default:
    return 0;
  }
}

bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

fpgemm::Config config_of(const fp_gemm_plan &plan) {
  fpgemm::Config c;
  c.path = (int)plan.path;
  c.index = plan.config;
  c.bm = plan.bm;
  c.bn = plan.bn;
  c.bk = plan.bk;
  c.stages = plan.stages;
  c.threads = plan.threads;
  c.split_k = plan.split_k;
  c.cluster = (plan.flags & FP_GEMM_CFG_CLUSTER2) != 0 ? 2 : 1;
  return c;
}

} // namespace

/* The 16-byte copies of the tensor-core paths need 16-byte aligned rows; a
 * recipe pads operands that lack them (prim_pad_rows), so a launch without
 * them is a bug of its caller, reported as such. */
static cudaError_t check_rows(const fp_gemm_plan &plan, int dtype, const void *a, long long lda,
                              const void *b, long long ldb, char *msg, size_t len) {
  if (!plan.aligned_rows || dtype == 0)
    return cudaSuccess;
  if (lda % 8 != 0 || ldb % 8 != 0 || !aligned16(a) || !aligned16(b)) {
    snprintf(msg, len,
             "the %s path loads 16-byte rows: lda %lld and ldb %lld must be multiples of 8 "
             "elements and A, B 16-byte aligned (pad with prim_pad_rows)",
             fp_gemm_path_name(plan.path), lda, ldb);
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

/* Runs p with the plan's path and configuration. */
static cudaError_t run_plan(const fp_gemm_plan &plan, const fpgemm::Problem &p, cudaStream_t s) {
  const fpgemm::Config c = config_of(plan);
  if (p.im2col != nullptr && plan.path != FP_GEMM_PATH_SM90)
    return cudaErrorInvalidValue; /* no other path loads an im2col operand */
  switch (plan.path) {
#ifdef FUSEPORT_GEMM_SM90
  case FP_GEMM_PATH_SM90:
    return fpgemm::sm90_run(p, c, s);
#endif
  case FP_GEMM_PATH_SM80:
    return fpgemm::sm80_run(p, c, s);
  case FP_GEMM_PATH_SIMT:
    return fpgemm::simt_run(p, c, s);
  case FP_GEMM_PATH_SKINNY:
    return fpgemm::skinny_run(p, c, s);
  default:
    return cudaErrorNotSupported;
  }
}

static cudaError_t run_plan2(const fp_gemm_plan &plan, const fpgemm::Problem2 &p, cudaStream_t s) {
  const fpgemm::Config c = config_of(plan);
  switch (plan.path) {
#ifdef FUSEPORT_GEMM_SM90
  case FP_GEMM_PATH_SM90:
    return fpgemm::sm90_run2(p, c, s);
#endif
  case FP_GEMM_PATH_SM80:
    return fpgemm::sm80_run2(p, c, s);
  case FP_GEMM_PATH_SIMT:
    return fpgemm::simt_run2(p, c, s);
  default:
    return cudaErrorNotSupported;
  }
}

/* Device time of one run of f, in microseconds: the median of three after
 * a warm-up (the tuning mode's measurement, on the real operands). */
template <class Run> static cudaError_t time_run(Run f, cudaStream_t s, double *us) {
  cudaEvent_t e[2];
  cudaError_t err = cudaEventCreate(&e[0]);
  if (err != cudaSuccess)
    return err;
  err = cudaEventCreate(&e[1]);
  if (err != cudaSuccess) {
    cudaEventDestroy(e[0]);
    return err;
  }
  float t[3] = {0, 0, 0};
  err = f(); /* warm-up: module load, L2 state */
  for (int k = 0; k < 3 && err == cudaSuccess; ++k) {
    err = cudaEventRecord(e[0], s);
    if (err == cudaSuccess)
      err = f();
    if (err == cudaSuccess)
      err = cudaEventRecord(e[1], s);
    if (err == cudaSuccess)
      err = cudaEventSynchronize(e[1]);
    if (err == cudaSuccess)
      err = cudaEventElapsedTime(&t[k], e[0], e[1]);
  }
  cudaEventDestroy(e[0]);
  cudaEventDestroy(e[1]);
  const float lo = fminf(t[0], fminf(t[1], t[2])), hi = fmaxf(t[0], fmaxf(t[1], t[2]));
  *us = 1e3 * (double)(t[0] + t[1] + t[2] - lo - hi);
  return err;
}

/* FUSEPORT_CUDA_GEMM_TUNE: times the path's candidates for a problem the
 * cache lacks, keeps the fastest (in *plan and the file). */
template <class Run>
static cudaError_t tune(const fp_gemm_request &req, const fp_gemm_device &dev, fp_gemm_plan *plan,
                        Run run, cudaStream_t s, char *msg, size_t msglen) {
  fp_gemm_plan cands[32];
  const int n = fp_gemm_plan_candidates(&req, &dev, plan, cands, 32);
  int best = -1;
  double best_us = 0.0;
  for (int k = 0; k < n; ++k) {
    double us = 0.0;
    cudaError_t err = time_run([&] { return run(cands[k]); }, s, &us);
    if (err != cudaSuccess) {
      snprintf(msg, msglen, "tuning: candidate %d of the %s path", cands[k].config,
               fp_gemm_path_name(cands[k].path));
      return err;
    }
    if (best < 0 || us < best_us) {
      best = k;
      best_us = us;
    }
  }
  if (best < 0)
    return cudaSuccess;
  *plan = cands[best];
  char why[256];
  if (!fp_gemm_tuning_record(&req, &dev, plan, best_us, why, sizeof why)) {
    snprintf(msg, msglen, "tuning: %s", why);
    return cudaErrorUnknown;
  }
  return cudaSuccess;
}

fp_gemm_device fpgemm::device_of(const fp_cuda_gemm_env *env) {
  fp_gemm_device dev;
  dev.cc_major = env->cc_major;
  dev.cc_minor = env->cc_minor;
  dev.sm_count = env->sm_count;
  dev.smem_optin = env->smem_optin;
  return dev;
}

/* The request gemm_<dt> makes for p (the planner's input). */
static fp_gemm_request request_of(const fpgemm::Problem &p) {
  fp_gemm_request req;
  memset(&req, 0, sizeof req);
  req.dtype = p.dtype;
  req.M = p.M;
  req.N = p.N;
  req.K = p.K;
  req.epilogue = p.epilogue;
  req.trans_b = p.trans_b != 0;
  req.lda = p.lda;
  req.ldb = p.ldb;
  return req;
}

cudaError_t fpgemm::run_view(const Problem &p, const fp_gemm_request &req, fp_gemm_path force,
                             const fp_cuda_gemm_env *env, bool *planned, fp_gemm_plan *plan,
                             char *msg, size_t msglen) {
  *planned = false;
  msg[0] = '\0';
  if (FP_EPI_PAIRED(p.epilogue) || !epilogue_known(p.epilogue) ||
      (p.im2col != nullptr) != req.im2col)
    return cudaSuccess;
  const fp_gemm_device dev = fpgemm::device_of(env);
  char why[256];
  if (!fp_gemm_plan_make(&req, &dev, force, plan, why, sizeof why) ||
      (plan->split_k > 1 && p.ws == nullptr))
    return cudaSuccess;
  if (check_rows(*plan, p.dtype, p.a, p.lda, p.b, p.ldb, why, sizeof why) != cudaSuccess)
    return cudaSuccess;
  *planned = true;
  Problem q = p;
  if (env->conv_cfg >= 0) {
    /* FUSEPORT_CUDA_CONV_CFG: the path's row of that index (unsplit), where it runs p */
    fp_gemm_plan cands[32];
    const int n = fp_gemm_plan_candidates(&req, &dev, plan, cands, 32);
    for (int k = 0; k < n; ++k)
      if (cands[k].config == env->conv_cfg && cands[k].split_k == 1) {
        *plan = cands[k];
        q.ws_bytes = 0;
        return run_plan(*plan, q, env->stream);
      }
  }
  if (fp_gemm_tuning_enabled() && !plan->tuned) {
    /* as gemm_<dt>: time the candidates (unsplit, and the planner's own) on these operands */
    const cudaError_t err = tune(
        req, dev, plan,
        [&](const fp_gemm_plan &c) {
          Problem t = p;
          t.ws_bytes = c.ws_bytes;
          return run_plan(c, t, env->stream);
        },
        env->stream, msg, msglen);
    if (err != cudaSuccess)
      return err;
  }
  q.ws_bytes = plan->ws_bytes;
  return run_plan(*plan, q, env->stream);
}

/* false (with msg) when the plan splits K and the recipe passed no workspace. */
static bool workspace_passed(uint64_t ws_bytes, int split_k, const void *ws, char *msg,
                             size_t msglen) {
  if (ws_bytes == 0 || ws != nullptr)
    return true;
  snprintf(msg, msglen, "the plan (split-K %d) needs a %llu-byte workspace, none was passed",
           split_k, (unsigned long long)ws_bytes);
  return false;
}

/* dw_packed_<dt>(out, dy, words, scale, min, ws, K, COUT, CIN, bits, lddy) */
static cudaError_t launch_dw(fp_kernel_id id, const fp_karg *args, int nargs,
                             const fp_cuda_gemm_env *env, int *kernels_launched, char *msg,
                             size_t msglen) {
  if (nargs != 11) {
    snprintf(msg, msglen, "%d arguments, dw_packed takes 11", nargs);
    return cudaErrorInvalidValue;
  }
  fpgemm::ProblemDw p;
  p.out = args[0].v.handle;
  p.dy = args[1].v.handle;
  p.words = static_cast<const uint32_t *>(args[2].v.handle);
  p.scale = args[3].v.handle;
  p.mins = args[4].v.handle;
  p.ws = args[5].v.handle;
  p.K = args[6].v.i64;
  p.COUT = args[7].v.i64;
  p.CIN = args[8].v.i64;
  p.bits = args[9].v.i32;
  p.lddy = args[10].v.i64;
  p.dtype = id == FPK_dw_packed_bf16 ? 2 : 0;
  if (p.bits != 1 && p.bits != 2 && p.bits != 4 && p.bits != 8) {
    snprintf(msg, msglen, "bits=%d: 1, 2, 4 or 8", p.bits);
    return cudaErrorInvalidValue;
  }
  if (p.lddy < p.COUT) {
    snprintf(msg, msglen, "lddy %lld < COUT %lld", p.lddy, p.COUT);
    return cudaErrorInvalidValue;
  }
  const fp_gemm_device dev = fpgemm::device_of(env);
  fp_dw_plan plan;
  char why[256];
  if (!fp_dw_plan_make(p.K, p.COUT, p.CIN, &dev, (fp_gemm_path)env->force_path, &plan, why,
                       sizeof why)) {
    snprintf(msg, msglen, "%s", why);
    return cudaErrorNotSupported;
  }
  if (!workspace_passed(plan.ws_bytes, plan.split_k, p.ws, msg, msglen))
    return cudaErrorInvalidValue;
  p.ws_bytes = plan.ws_bytes;
  if (plan.aligned_rows && (p.lddy % 8 != 0 || !aligned16(p.dy))) {
    snprintf(msg, msglen, "lddy %lld must be a multiple of 8 elements (pad dy)", p.lddy);
    return cudaErrorInvalidValue;
  }
  cudaError_t err = cudaErrorNotSupported;
#ifdef FUSEPORT_GEMM_SM90
  if (plan.path == FP_GEMM_PATH_SM90)
    err = fpgemm::sm90_dw_run(p, plan, env->stream);
#endif
  if (plan.path == FP_GEMM_PATH_SIMT)
    err = fpgemm::simt_dw_run(p, plan, env->stream);
  if (err == cudaSuccess)
    *kernels_launched = 1;
  else
    snprintf(msg, msglen, "dw_packed, the %s path (%dx%d tiles, split-K %d)",
             fp_gemm_path_name(plan.path), plan.bm, plan.bn, plan.split_k);
  return err;
}

extern "C" cudaError_t fp_cuda_gemm_launch(fp_kernel_id id, const fp_karg *args, int nargs,
                                           const fp_cuda_gemm_env *env, int *kernels_launched,
                                           char *msg, size_t msglen) {
  *kernels_launched = 0;
  msg[0] = '\0';
  if (id == FPK_dw_packed_f32 || id == FPK_dw_packed_bf16)
    return launch_dw(id, args, nargs, env, kernels_launched, msg, msglen);
  const bool b2b = id == FPK_gemm2_f32 || id == FPK_gemm2_f16 || id == FPK_gemm2_bf16;
  if (nargs != 13) {
    snprintf(msg, msglen, "%d arguments, the gemm kernels take 13", nargs);
    return cudaErrorInvalidValue;
  }
  const fp_gemm_device dev = fpgemm::device_of(env);
  fp_gemm_request req;
  memset(&req, 0, sizeof req);
  req.dtype = dtype_of(id);
  req.b2b = b2b;
  fp_gemm_plan plan;
  char why[256];
  if (!b2b) {
    /* (out, a, b, bias, add, ws, M, N, K, lda, ldb, epilogue, trans_b) */
    fpgemm::Problem p;
    p.out = args[0].v.handle;
    p.a = args[1].v.handle;
    p.b = args[2].v.handle;
    p.bias = args[3].v.handle;
    p.add = args[4].v.handle;
    p.ws = args[5].v.handle;
    p.ws_bytes = 0;
    p.M = args[6].v.i64;
    p.N = args[7].v.i64;
    p.K = args[8].v.i64;
    p.lda = args[9].v.i64;
    p.ldb = args[10].v.i64;
    p.epilogue = args[11].v.i32;
    p.trans_b = args[12].v.i32;
    p.dtype = req.dtype;
    if (p.epilogue < 0 || p.epilogue >= FP_EPI_COUNT) {
      snprintf(msg, msglen, "unknown epilogue %d", p.epilogue);
      return cudaErrorInvalidValue;
    }
    if ((FP_EPI_READS_BIAS(p.epilogue) && p.bias == nullptr) ||
        (FP_EPI_READS_ADD(p.epilogue) && p.add == nullptr)) {
      snprintf(msg, msglen, "epilogue %d reads a bias or add tensor that was passed as none",
               p.epilogue);
      return cudaErrorInvalidValue;
    }
    req = request_of(p);
    if (!fp_gemm_plan_make(&req, &dev, (fp_gemm_path)env->force_path, &plan, why, sizeof why)) {
      snprintf(msg, msglen, "%s", why);
      return cudaErrorNotSupported;
    }
    if (!workspace_passed(plan.ws_bytes, plan.split_k, p.ws, msg, msglen))
      return cudaErrorInvalidValue;
    p.ws_bytes = plan.ws_bytes;
    cudaError_t err = check_rows(plan, p.dtype, p.a, p.lda, p.b, p.ldb, msg, msglen);
    if (err != cudaSuccess)
      return err;
    if (fp_gemm_tuning_enabled() && !plan.tuned) {
      err = tune(
          req, dev, &plan,
          [&](const fp_gemm_plan &c) {
            fpgemm::Problem q = p;
            q.ws_bytes = c.ws_bytes;
            return run_plan(c, q, env->stream);
          },
          env->stream, msg, msglen);
      if (err != cudaSuccess)
        return err;
      p.ws_bytes = plan.ws_bytes;
    }
    err = run_plan(plan, p, env->stream);
    if (err == cudaErrorNotSupported) {
      snprintf(msg, msglen, "the %s path is not in this build", fp_gemm_path_name(plan.path));
      return err;
    }
    if (err == cudaSuccess)
      *kernels_launched = 1;
    else
      snprintf(msg, msglen, "the %s path, configuration %d (%dx%dx%d, %d stages, split-K %d)",
               fp_gemm_path_name(plan.path), plan.config, plan.bm, plan.bn, plan.bk, plan.stages,
               plan.split_k);
    return err;
  }
  /* (out, a, b, d, ws, M, N, K, P, lda, ldb, ldd, trans_b) */
  fpgemm::Problem2 p;
  p.out = args[0].v.handle;
  p.a = args[1].v.handle;
  p.b = args[2].v.handle;
  p.d = args[3].v.handle;
  p.ws = args[4].v.handle;
  p.ws_bytes = 0;
  p.M = args[5].v.i64;
  p.N = args[6].v.i64;
  p.K = args[7].v.i64;
  p.P = args[8].v.i64;
  p.lda = args[9].v.i64;
  p.ldb = args[10].v.i64;
  p.ldd = args[11].v.i64;
  p.trans_b = args[12].v.i32;
  p.dtype = req.dtype;
  req.M = p.M;
  req.N = p.N;
  req.K = p.K;
  req.P = p.P;
  req.trans_b = p.trans_b != 0;
  req.lda = p.lda;
  req.ldb = p.ldb;
  if (!fp_gemm_plan_make(&req, &dev, (fp_gemm_path)env->force_path, &plan, why, sizeof why)) {
    snprintf(msg, msglen, "%s", why);
    return cudaErrorNotSupported;
  }
  if (!plan.b2b_on_chip) {
    snprintf(msg, msglen,
             "N=%lld does not fit the %s path's back-to-back tile: the recipe runs two GEMMs", p.N,
             fp_gemm_path_name(plan.path));
    return cudaErrorInvalidValue;
  }
  p.ws_bytes = plan.ws_bytes;
  cudaError_t err = check_rows(plan, p.dtype, p.a, p.lda, p.b, p.ldb, msg, msglen);
  if (err == cudaSuccess && plan.aligned_rows && p.dtype != 0 &&
      (p.ldd % 8 != 0 || !aligned16(p.d))) {
    snprintf(msg, msglen, "ldd %lld must be a multiple of 8 elements (pad D)", p.ldd);
    err = cudaErrorInvalidValue;
  }
  if (err != cudaSuccess)
    return err;
  if (fp_gemm_tuning_enabled() && !plan.tuned) {
    err = tune(
        req, dev, &plan,
        [&](const fp_gemm_plan &c) {
          fpgemm::Problem2 q = p;
          q.ws_bytes = c.ws_bytes;
          return run_plan2(c, q, env->stream);
        },
        env->stream, msg, msglen);
    if (err != cudaSuccess)
      return err;
  }
  err = run_plan2(plan, p, env->stream);
  if (err == cudaErrorNotSupported) {
    snprintf(msg, msglen, "the %s path has no back-to-back kernel in this build",
             fp_gemm_path_name(plan.path));
    return err;
  }
  if (err == cudaSuccess)
    *kernels_launched = 1;
  else
    snprintf(msg, msglen, "the %s path's back-to-back kernel, configuration %d (%dx%d)",
             fp_gemm_path_name(plan.path), plan.config, plan.bm, plan.bn);
  return err;
}

/* Appends a path's stubs to out (at most cap in all). */
static int append_stubs(int (*path_stubs)(const void **, int), const void **out, int n, int cap) {
  const void *mine[512];
  int m = path_stubs(mine, 512);
  m = m < 512 ? m : 512;
  for (int k = 0; k < m && n < cap; ++k)
    out[n++] = mine[k];
  return n;
}

extern "C" int fp_cuda_gemm_stubs(const void **out, int cap) {
  int n = 0;
#ifdef FUSEPORT_GEMM_SM90
  n = append_stubs(fpgemm::sm90_kernel_stubs, out, n, cap);
#endif
  n = append_stubs(fpgemm::sm80_kernel_stubs, out, n, cap);
  n = append_stubs(fpgemm::simt_kernel_stubs, out, n, cap);
  n = append_stubs(fpgemm::skinny_kernel_stubs, out, n, cap);
#ifdef FUSEPORT_GEMM_SM90
  n = append_stubs(fpgemm::sm90_dw_stubs, out, n, cap);
#endif
  n = append_stubs(fpgemm::simt_dw_stubs, out, n, cap);
  return n;
}

/* The family's entries in the backend's kernel table: the launcher runs
 * them (fp_cuda_gemm_launch), so the table only marks them present; any
 * stub of the family serves for that. */
extern "C" void fp_cuda_register_gemm(const void *table[FPK_COUNT]) {
  const void *stubs[1];
  const void *marker = fp_cuda_gemm_stubs(stubs, 1) > 0 ? stubs[0] : nullptr;
  table[FPK_gemm_f32] = marker;
  table[FPK_gemm_f16] = marker;
  table[FPK_gemm_bf16] = marker;
  table[FPK_gemm2_f32] = marker;
  table[FPK_gemm2_f16] = marker;
  table[FPK_gemm2_bf16] = marker;
  table[FPK_dw_packed_f32] = marker;
  table[FPK_dw_packed_bf16] = marker;
}

extern "C" void fp_cuda_register_tuning_gemm(fp_cuda_tuning table[FPK_COUNT]) { (void)table; }
