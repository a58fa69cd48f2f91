/* fuseport OpenCL backend: the convolution family's launch planner
 * (kernels/cl/conv.cl).
 *
 * conv.cl builds each tile configuration below as <prefix><layout>_<dt>
 * (conv_l_nhwc_f32, ...), those that fit the device's local memory and
 * group size (ocl_conv_build_options passes both); kernels.def's conv_<dt>
 * is the smallest, which every device runs, one kernel for both layouts.
 * A configuration is usable where the
 * built kernel's group fits what the device and the compiler report
 * (CL_KERNEL_WORK_GROUP_SIZE, CL_DEVICE_MAX_WORK_ITEM_SIZES,
 * CL_KERNEL_LOCAL_MEM_SIZE against CL_DEVICE_LOCAL_MEM_SIZE). Per launch it
 * picks, on the implicit GEMM's M = N P Q pixels and K channels:
 *   - where 64 x 64 tiles would leave compute units idle (fewer tiles than
 *     units: small batches of the 7 x 7 and 14 x 14 layers), conv_k_, whose
 *     groups split the K loop in 4 slices (conv.cl);
 *   - otherwise the usable configuration with the least estimated time,
 *     the GEMM planner's model (opencl_gemm.c):
 *       waves * BM * BN / efficiency, waves = ceil(tiles / compute units),
 *     efficiency the configuration's relative speed on a full tile (per
 *     layout), scaled by the share of its group that fills whole multiples
 *     of CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, among the
 *     configurations with at least as many tiles as units (all of them if
 *     none has). So a large layer takes 128 x 128 tiles (128 x 64 where
 *     K <= 64; 64 x 64 in NCHW) and a smaller one 64 x 64.
 * The grid is 1-D: ceil(M/BM) * ceil(K/BN) groups of (WX, WY * KS)
 * work-items.
 *
 * Environment (diagnostics and timing):
 *   FUSEPORT_OPENCL_CONV_TILE=t|k|m|w|l  force a configuration (an error
 *                                      where the device lacks it)
 *   FUSEPORT_OPENCL_CONV_REGS=R        NVIDIA: the family's register cap
 *                                      (32..255, default 128) */
#define _POSIX_C_SOURCE 200809L
#include "opencl_conv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp_device_common.h"
#include "opencl_gemm.h" /* ocl_env_u32 */
#include "opencl_planned.h"

/* ---- the configurations (kernels/cl/conv.cl, FP_CONV_KERNELS) ------------------------------ */

typedef struct conv_config {
  const char *prefix; /* of the kernel name: <prefix><layout>_<dt>, or <prefix><dt> */
  bool per_layout;    /* a kernel per layout (else one taking both) */
  char letter;        /* FUSEPORT_OPENCL_CONV_TILE */
  uint32_t wx, wy;    /* group: WX along the channels, WY along the pixels */
  uint32_t tm, tn;    /* pixels and channels per work-item */
  uint32_t ks;        /* K slices: groups of wx x (wy * ks) */
  /* relative throughput on full tiles, NHWC and NCHW (the cost model; the
   * NCHW gather loads scalars, which costs the 8 x 8 tiles most) */
  double efficiency[2];
} conv_config;

#define CONV_BK 16 /* conv.cl's K-step, every configuration */
#define CONV_CONFIGS 5
static const conv_config conv_configs[CONV_CONFIGS] = {
    {"conv_l_", true, 'l', 16, 16, 8, 8, 1, {1.0, 0.75}}, /* 128 x 128 */
    {"conv_w_", true, 'w', 8, 16, 8, 8, 1, {0.9, 0.6}},   /* 128 pixels x 64 channels */
    {"conv_m_", true, 'm', 16, 16, 4, 4, 1, {0.6, 0.65}}, /* 64 x 64 */
    {"conv_k_", true, 'k', 8, 8, 4, 4, 4, {0.3, 0.3}},    /* 32 x 32, 4 K slices */
    {"conv_", false, 't', 8, 8, 4, 4, 1, {0.4, 0.4}},     /* 32 x 32: kernels.def's conv_<dt> */
};
#define CONV_M 2     /* conv_m_: the yardstick of a device filled */
#define CONV_SPLIT 3 /* conv_k_: the configuration with K slices */
#define CONV_SMALLEST 4

/* NVIDIA's register cap for this family (FUSEPORT_OPENCL_CONV_REGS): the
 * other families' 64 would spill the 8 x 8 accumulators; no group here is
 * larger than 256 work-items. */
#define CONV_NV_MAXRREG 128

#define CONV_DTYPES 3 /* f32, f16, bf16: the index is the fp_dtype */
#define CONV_NARGS 23 /* kernels.def: conv_<dt>'s signature (ws, the last, unused by conv.cl) */
/* conv.cl keeps tap coordinates and kk digits in ints */
#define CONV_MAX_DIM (1ll << 30)

typedef ocl_planned_kernel conv_kernel;

struct ocl_conv {
  bool kernels_ready;
  conv_kernel conv[CONV_DTYPES][CONV_CONFIGS][2]; /* [..][layout: 0 NCHW, 1 NHWC] */
  uint32_t compute_units;
};

ocl_conv *ocl_conv_create(void) { return calloc(1, sizeof(ocl_conv)); }

void ocl_conv_destroy(ocl_conv *cv) {
  if (cv == NULL)
    return;
  for (int d = 0; d < CONV_DTYPES; ++d)
    for (int c = 0; c < CONV_CONFIGS; ++c)
      for (int l = 0; l < 2; ++l)
        ocl_planned_kernel_release(&cv->conv[d][c][l]);
  free(cv);
}

void ocl_conv_build_options(const fp_device_info *info, cl_device_id device, bool nv_options,
                            char *buf, size_t cap) {
  ocl_planned_build_options(info, device, nv_options, "FP_CONV", "FUSEPORT_OPENCL_CONV_REGS",
                            CONV_NV_MAXRREG, buf, cap);
}

bool ocl_conv_is_planned(fp_kernel_id id) {
  return id == FPK_conv_f32 || id == FPK_conv_f16 || id == FPK_conv_bf16;
}

/* ---- errors ---------------------------------------------------------------------------- */

/* ---- the kernels ------------------------------------------------------------------------ */

static const char *const dtype_suffix[CONV_DTYPES] = {"f32", "f16", "bf16"};

static fp_status ensure_kernels(fp_context *ctx, ocl_conv *cv, const ocl_conv_env *env) {
  if (cv->kernels_ready)
    return FP_OK;
  ocl_planned_limits lim;
  fp_status st = ocl_planned_limits_get(ctx, env->device, env->program, "conv", &lim);
  if (st != FP_OK)
    return st;
  cv->compute_units = lim.units;
  static const char *const layout_name[2] = {"nchw_", "nhwc_"};
  for (int d = 0; d < CONV_DTYPES && st == FP_OK; ++d) {
    for (int c = 0; c < CONV_CONFIGS && st == FP_OK; ++c) {
      const conv_config *cfg = &conv_configs[c];
      for (int l = 0; l < 2 && st == FP_OK; ++l) { /* a kernel object per slot, even if shared */
        char name[64];
        snprintf(name, sizeof name, "%s%s%s", cfg->prefix, cfg->per_layout ? layout_name[l] : "",
                 dtype_suffix[d]);
        st = ocl_planned_kernel_make(ctx, env->device, env->program, &lim, name, cfg->wx,
                                     cfg->wy * cfg->ks, &cv->conv[d][c][l]);
      }
    }
  }
  ocl_planned_limits_free(&lim);
  if (st != FP_OK) /* the next launch tries again from nothing */
    for (int d = 0; d < CONV_DTYPES; ++d)
      for (int c = 0; c < CONV_CONFIGS; ++c)
        for (int l = 0; l < 2; ++l)
          ocl_planned_kernel_release(&cv->conv[d][c][l]);
  cv->kernels_ready = st == FP_OK;
  return st;
}

/* ---- the planner ------------------------------------------------------------------------ */

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* FUSEPORT_OPENCL_CONV_TILE: -1 (unset or auto), else the configuration's
 * index; -2 for a value that names none. */
static int forced_config(void) {
  const char *text = getenv("FUSEPORT_OPENCL_CONV_TILE");
  if (text == NULL || *text == '\0' || strcmp(text, "auto") == 0)
    return -1;
  for (int c = 0; c < CONV_CONFIGS; ++c)
    if (text[0] == conv_configs[c].letter && text[1] == '\0')
      return c;
  return -2;
}

static fp_dtype dtype_of(fp_kernel_id id) {
  return id == FPK_conv_f16 ? FP_F16 : id == FPK_conv_bf16 ? FP_BF16 : FP_F32;
}

/* conv_<dt>(out, x, w, v0, v1, v2, v3, N, C, H, W, K, R, S, P, Q, stride,
 * pad, dil, nhwc, epilogue, eps): the arguments the kernel can take. */
static fp_status check_args(fp_context *ctx, fp_dtype dt, const fp_karg *args) {
  const int64_t N = args[7].v.i64, C = args[8].v.i64, H = args[9].v.i64, W = args[10].v.i64;
  const int64_t K = args[11].v.i64, R = args[12].v.i64, S = args[13].v.i64;
  const int64_t P = args[14].v.i64, Q = args[15].v.i64;
  const int64_t stride = args[16].v.i64, pad = args[17].v.i64, dil = args[18].v.i64;
  const int epi = args[20].v.i32;
  const char *name = dtype_suffix[dt];
  if (N < 1 || C < 1 || H < 1 || W < 1 || K < 1 || R < 1 || S < 1 || stride < 1 || pad < 0 ||
      dil < 1)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "conv_%s: N=%lld C=%lld H=%lld W=%lld K=%lld R=%lld S=%lld stride=%lld "
                        "pad=%lld dil=%lld: dimensions, stride and dilation >= 1, padding >= 0",
                        name, (long long)N, (long long)C, (long long)H, (long long)W, (long long)K,
                        (long long)R, (long long)S, (long long)stride, (long long)pad,
                        (long long)dil);
  const int64_t dims[] = {C, H, W, K, R, S, stride, pad, dil};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; ++i)
    if (dims[i] >= CONV_MAX_DIM)
      return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                          "conv_%s: C=%lld H=%lld W=%lld K=%lld R=%lld S=%lld stride=%lld "
                          "pad=%lld dil=%lld: the OpenCL kernel takes each below 2^30",
                          name, (long long)C, (long long)H, (long long)W, (long long)K,
                          (long long)R, (long long)S, (long long)stride, (long long)pad,
                          (long long)dil);
  /* the taps' coordinates (h0 + r dil) stay within ints */
  if (H + 2 * pad >= CONV_MAX_DIM || W + 2 * pad >= CONV_MAX_DIM ||
      (double)dil * (double)(R > S ? R : S) >= (double)CONV_MAX_DIM)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "conv_%s: H=%lld W=%lld pad=%lld dil=%lld R=%lld S=%lld: the OpenCL "
                        "kernel takes padded sizes and dilated filters below 2^30",
                        name, (long long)H, (long long)W, (long long)pad, (long long)dil,
                        (long long)R, (long long)S);
  const int64_t P_want = fp_conv_out_dim(H, R, stride, pad, dil),
                Q_want = fp_conv_out_dim(W, S, stride, pad, dil);
  if (P_want < 1 || Q_want < 1 || P != P_want || Q != Q_want)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "conv_%s: P=%lld Q=%lld for H=%lld W=%lld R=%lld S=%lld stride=%lld "
                        "pad=%lld dil=%lld: expected %lld x %lld (>= 1: the dilated filter must "
                        "fit the padded input)",
                        name, (long long)P, (long long)Q, (long long)H, (long long)W, (long long)R,
                        (long long)S, (long long)stride, (long long)pad, (long long)dil,
                        (long long)P_want, (long long)Q_want);
  /* element counts of x, w and out within int64 (the kernel's offsets) */
  const double big = 4.0e18;
  if ((double)N * (double)C * (double)H * (double)W >= big ||
      (double)K * (double)C * (double)R * (double)S >= big ||
      (double)N * (double)K * (double)P * (double)Q >= big || (double)P * (double)Q >= 2147483647.0)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "conv_%s: N=%lld C=%lld H=%lld W=%lld K=%lld R=%lld S=%lld: tensors too "
                        "large for the OpenCL kernel's offsets (P*Q below 2^31)",
                        name, (long long)N, (long long)C, (long long)H, (long long)W, (long long)K,
                        (long long)R, (long long)S);
  if (!FP_CONV_EPI_VALID(epi))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "conv_%s: epilogue %d: expected FP_EPI_NONE..FP_EPI_ADD_RELU or "
                        "FP_CONV_EPI_BN",
                        name, epi);
  const bool bn = epi == FP_CONV_EPI_BN;
  const int needed = bn ? 4 : (FP_EPI_READS_BIAS(epi) || FP_EPI_READS_ADD(epi)) ? 1 : 0;
  for (int v = 0; v < needed; ++v)
    if (args[3 + v].v.handle == NULL)
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "conv_%s: epilogue %d reads v%d (%s), passed as none", name, epi, v,
                          bn                      ? "mean, var, gamma, beta"
                          : FP_EPI_READS_ADD(epi) ? "the output-shaped addend"
                                                  : "the [K] bias");
  return FP_OK;
}

/* The cost model's estimate for one configuration (see the top). */
static uint64_t config_tiles(const conv_config *cfg, uint64_t M, uint64_t K) {
  return ceil_div(M, (uint64_t)cfg->wy * cfg->tm) * ceil_div(K, (uint64_t)cfg->wx * cfg->tn);
}

static double config_cost(const conv_config *cfg, size_t pref_multiple, uint64_t M, uint64_t K,
                          bool nhwc, uint32_t units) {
  const uint64_t bm = (uint64_t)cfg->wy * cfg->tm, bn = (uint64_t)cfg->wx * cfg->tn;
  const uint64_t waves = ceil_div(config_tiles(cfg, M, K), units);
  const uint64_t group = (uint64_t)cfg->wx * cfg->wy * cfg->ks;
  const double filled = (double)group / (double)(ceil_div(group, pref_multiple) * pref_multiple);
  return (double)waves * (double)(bm * bn) / (cfg->efficiency[nhwc ? 0 : 1] * filled);
}

fp_status ocl_conv_plan(fp_context *ctx, ocl_conv *cv, const ocl_conv_env *env, fp_kernel_id id,
                        const fp_karg *args, int nargs, cl_kernel *kernel, cl_uint *dims,
                        size_t global[3], size_t local[3]) {
  if (!ocl_conv_is_planned(id))
    return fp_ctx_error(ctx, FP_ERR_INTERNAL, "opencl conv: %s is not a planned kernel",
                        fp_kernel_name(id));
  if (nargs != CONV_NARGS)
    return fp_ctx_error(ctx, FP_ERR_INTERNAL, "opencl conv: %s with %d arguments, expected %d",
                        fp_kernel_name(id), nargs, CONV_NARGS);
  uint32_t regs;
  if (!ocl_env_u32("FUSEPORT_OPENCL_CONV_REGS", 32, 255, false, CONV_NV_MAXRREG, &regs))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_OPENCL_CONV_REGS='%s': expected 32..255",
                        getenv("FUSEPORT_OPENCL_CONV_REGS"));
  const int forced = forced_config();
  if (forced == -2)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_OPENCL_CONV_TILE='%s': expected auto, t, k, m, w or l",
                        getenv("FUSEPORT_OPENCL_CONV_TILE"));
  const fp_dtype dt = dtype_of(id);
  fp_status st = check_args(ctx, dt, args);
  if (st != FP_OK)
    return st;
  st = ensure_kernels(ctx, cv, env);
  if (st != FP_OK)
    return st;
  const uint64_t M = (uint64_t)args[7].v.i64 * (uint64_t)args[14].v.i64 * (uint64_t)args[15].v.i64;
  const uint64_t K = (uint64_t)args[11].v.i64;
  const bool nhwc = args[19].v.i32 != 0;
  /* Fewer 64 x 64 tiles than compute units: each group's time is its
   * K-steps' latency, whatever its tile, and K slices shorten it (the
   * 32 x 32 tiles of 4 slices ran ResNet's 7 x 7 layers at batch 8 1.6x
   * faster than any tile alone on an H100, docs/PERF.md). Otherwise the
   * cost model, over the configurations that fill the device at least once
   * where one does. */
  const uint32_t units = cv->compute_units;
  int best = -1;
  if (forced >= 0) {
    best = cv->conv[dt][forced][nhwc].kernel != NULL ? forced : -1;
  } else if (cv->conv[dt][CONV_SPLIT][nhwc].kernel != NULL &&
             config_tiles(&conv_configs[CONV_M], M, K) < units) {
    best = CONV_SPLIT;
  } else {
    double best_cost = 0.0;
    for (int pass = 0; pass < 2 && best < 0; ++pass) {
      for (int c = 0; c < CONV_CONFIGS; ++c) {
        const conv_kernel *k = &cv->conv[dt][c][nhwc];
        if (k->kernel == NULL || c == CONV_SPLIT ||
            (pass == 0 && config_tiles(&conv_configs[c], M, K) < units))
          continue;
        const double cost = config_cost(&conv_configs[c], k->pref_multiple, M, K, nhwc, units);
        if (best < 0 || cost < best_cost) {
          best = c;
          best_cost = cost;
        }
      }
    }
  }
  if (best < 0) {
    const int c = forced >= 0 ? forced : CONV_SMALLEST; /* the smallest: its reason */
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "conv_%s on '%s': no usable tile configuration%s: %s", dtype_suffix[dt],
                        ctx->info.name, forced >= 0 ? " (FUSEPORT_OPENCL_CONV_TILE)" : "",
                        cv->conv[dt][c][nhwc].why);
  }
  const conv_config *cfg = &conv_configs[best];
  const uint64_t bm = (uint64_t)cfg->wy * cfg->tm, bn = (uint64_t)cfg->wx * cfg->tn;
  const uint64_t groups = ceil_div(M, bm) * ceil_div(K, bn);
  if (groups > (uint64_t)(SIZE_MAX / cfg->wx) || groups * cfg->wx > 0xffffffffull)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "conv_%s: %llu groups of %u work-items along dimension 0: more than the "
                        "launch takes",
                        dtype_suffix[dt], (unsigned long long)groups, cfg->wx);
  *kernel = cv->conv[dt][best][nhwc].kernel;
  *dims = 2;
  local[0] = cfg->wx;
  local[1] = (size_t)cfg->wy * cfg->ks;
  local[2] = 1;
  global[0] = (size_t)(groups * cfg->wx);
  global[1] = (size_t)cfg->wy * cfg->ks;
  global[2] = 1;
  return FP_OK;
}
