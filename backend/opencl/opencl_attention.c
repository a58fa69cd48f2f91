/* fuseport OpenCL backend: the attention family's launch planner
 * (kernels/cl/attention.cl).
 *
 * attention.cl builds each tile configuration below as <prefix><dt>
 * (attention_s_f32, ...), those that fit the device's local memory and
 * group size (ocl_attn_build_options passes both); kernels.def's
 * attention_<dt> is the configuration t, which fits the OpenCL minimum of
 * 32 KiB, so every device runs it. A configuration is usable where the
 * built kernel's group fits what the device and the compiler report
 * (opencl_planned.c). Per launch it picks, among the usable configurations
 * whose largest head dimension DT holds D, the least estimated work
 *   ceil(S / BM) * BM * (D + DT) / efficiency
 * (the rows a head's tiles cover, padding included, times the S and the
 * P V halves of the work, the latter over DT columns): a 64-row tile for
 * long sequences with D <= 64, 32 rows for D <= 128, 16 rows for D <= 256
 * and for short query blocks (decode, S = 1, whatever D).
 * The grid is 1-D: B H ceil(S / BM) splits groups of (WX, WY) work-items,
 * the split fastest (a head's groups are neighbours: K and V stay in L2).
 *
 * Environment (diagnostics and timing):
 *   FUSEPORT_OPENCL_ATTN_TILE=t|s|m|l  force a configuration (an error where
 *                                      the device lacks it or D > its DT)
 *   FUSEPORT_OPENCL_ATTN_REGS=R        NVIDIA: the family's register cap
 *                                      (32..255, default 128) */
#define _POSIX_C_SOURCE 200809L
#include "opencl_attention.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp_device_common.h"
#include "opencl_gemm.h" /* ocl_env_u32 */
#include "opencl_planned.h"

/* ---- the configurations (kernels/cl/attention.cl, FP_ATTN_KERNELS) ----------------------------
 */

typedef struct attn_config {
  const char *prefix; /* of the kernel name: <prefix><dt> */
  char letter;        /* FUSEPORT_OPENCL_ATTN_TILE */
  uint32_t wx, wy;    /* group: BN = 4 WX keys per tile, BM = 4 WY query rows */
  uint32_t dt;        /* the largest head dimension */
  double efficiency;  /* relative throughput per padded row (the cost model) */
} attn_config;

#define ATTN_CONFIGS 4
static const attn_config attn_configs[ATTN_CONFIGS] = {
    {"attention_s_", 's', 8, 16, 64, 1.0},  /* 64 rows x 32 keys, D <= 64 */
    {"attention_m_", 'm', 8, 8, 128, 0.9},  /* 32 x 32, D <= 128 */
    {"attention_l_", 'l', 16, 4, 256, 0.8}, /* 16 x 64, D <= 256 */
    {"attention_", 't', 16, 4, 256, 0.5},   /* 16 x 64, D <= 256, 32 KiB: kernels.def's */
};
#define ATTN_SMALLEST 3

/* NVIDIA's register cap for this family (FUSEPORT_OPENCL_ATTN_REGS): a
 * work-item holds 16 score and up to 64 output accumulators; no group here
 * is larger than 128 work-items. */
#define ATTN_NV_MAXRREG 128

#define ATTN_DTYPES 3 /* f32, f16, bf16: the index is the fp_dtype */
#define ATTN_NARGS 15 /* kernels.def: attention_<dt>'s signature */

_Static_assert(FP_ATTN_MAX_D <= 256, "attention.cl's configuration t takes D <= 256");

struct ocl_attn {
  bool kernels_ready;
  ocl_planned_kernel attn[ATTN_DTYPES][ATTN_CONFIGS];
};

ocl_attn *ocl_attn_create(void) { return calloc(1, sizeof(ocl_attn)); }

void ocl_attn_destroy(ocl_attn *at) {
  if (at == NULL)
    return;
  for (int d = 0; d < ATTN_DTYPES; ++d)
    for (int c = 0; c < ATTN_CONFIGS; ++c)
      ocl_planned_kernel_release(&at->attn[d][c]);
  free(at);
}

void ocl_attn_build_options(const fp_device_info *info, cl_device_id device, bool nv_options,
                            char *buf, size_t cap) {
  ocl_planned_build_options(info, device, nv_options, "FP_ATTN", "FUSEPORT_OPENCL_ATTN_REGS",
                            ATTN_NV_MAXRREG, buf, cap);
}

bool ocl_attn_is_planned(fp_kernel_id id) {
  return id == FPK_attention_f32 || id == FPK_attention_f16 || id == FPK_attention_bf16;
}

/* ---- the kernels ------------------------------------------------------------------------ */

static const char *const dtype_suffix[ATTN_DTYPES] = {"f32", "f16", "bf16"};

static fp_status ensure_kernels(fp_context *ctx, ocl_attn *at, const ocl_attn_env *env) {
  if (at->kernels_ready)
    return FP_OK;
  ocl_planned_limits lim;
  fp_status st = ocl_planned_limits_get(ctx, env->device, env->program, "attention", &lim);
  if (st != FP_OK)
    return st;
  for (int d = 0; d < ATTN_DTYPES && st == FP_OK; ++d) {
    for (int c = 0; c < ATTN_CONFIGS && st == FP_OK; ++c) {
      const attn_config *cfg = &attn_configs[c];
      char name[64];
      snprintf(name, sizeof name, "%s%s", cfg->prefix, dtype_suffix[d]);
      st = ocl_planned_kernel_make(ctx, env->device, env->program, &lim, name, cfg->wx, cfg->wy,
                                   &at->attn[d][c]);
    }
  }
  ocl_planned_limits_free(&lim);
  if (st != FP_OK) /* the next launch tries again from nothing */
    for (int d = 0; d < ATTN_DTYPES; ++d)
      for (int c = 0; c < ATTN_CONFIGS; ++c)
        ocl_planned_kernel_release(&at->attn[d][c]);
  at->kernels_ready = st == FP_OK;
  return st;
}

/* ---- the planner ------------------------------------------------------------------------ */

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* FUSEPORT_OPENCL_ATTN_TILE: -1 (unset or auto), else the configuration's
 * index; -2 for a value that names none. */
static int forced_config(void) {
  const char *text = getenv("FUSEPORT_OPENCL_ATTN_TILE");
  if (text == NULL || *text == '\0' || strcmp(text, "auto") == 0)
    return -1;
  for (int c = 0; c < ATTN_CONFIGS; ++c)
    if (text[0] == attn_configs[c].letter && text[1] == '\0')
      return c;
  return -2;
}

static fp_dtype dtype_of(fp_kernel_id id) {
  return id == FPK_attention_f16 ? FP_F16 : id == FPK_attention_bf16 ? FP_BF16 : FP_F32;
}

/* attention_<dt>(out, lse, q, k, v, opart, lpart, B, H, S, SK, D, causal,
 * scale, splits): the arguments the kernel can take. */
static fp_status check_args(fp_context *ctx, fp_dtype dt, const fp_karg *args) {
  const int64_t B = args[7].v.i64, H = args[8].v.i64, S = args[9].v.i64, SK = args[10].v.i64;
  const int64_t D = args[11].v.i64;
  const int splits = args[14].v.i32 > 1 ? args[14].v.i32 : 1;
  const char *name = dtype_suffix[dt];
  if (B < 1 || H < 1 || S < 1 || SK < 0 || D < 1 || D > FP_ATTN_MAX_D)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "attention_%s: B=%lld H=%lld S=%lld SK=%lld D=%lld: B, H, S >= 1, "
                        "SK >= 0, 1 <= D <= %d",
                        name, (long long)B, (long long)H, (long long)S, (long long)SK, (long long)D,
                        FP_ATTN_MAX_D);
  /* element counts within int64 (the kernel's offsets, the split partials
   * included); sequences below 2^31 (its tile counts) */
  const double big = 4.0e18;
  if ((double)B * (double)H * (double)S * (double)D * (double)splits >= big ||
      (double)B * (double)H * (double)SK * (double)D >= big || S >= 2147483647ll ||
      SK >= 2147483647ll)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "attention_%s: B=%lld H=%lld S=%lld SK=%lld D=%lld splits=%d: tensors "
                        "too large for the OpenCL kernel (S and SK below 2^31)",
                        name, (long long)B, (long long)H, (long long)S, (long long)SK, (long long)D,
                        splits);
  if (splits > 1 && (args[5].v.handle == NULL || args[6].v.handle == NULL))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "attention_%s: splits=%d writes opart and lpart, passed as none", name,
                        splits);
  if (splits == 1 && (args[0].v.handle == NULL || args[1].v.handle == NULL))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "attention_%s: splits=1 writes out and lse, passed as none", name);
  return FP_OK;
}

static double config_cost(const attn_config *cfg, uint64_t S, uint64_t D) {
  const uint64_t bm = 4ull * cfg->wy;
  return (double)(ceil_div(S, bm) * bm) * (double)(D + cfg->dt) / cfg->efficiency;
}

fp_status ocl_attn_plan(fp_context *ctx, ocl_attn *at, const ocl_attn_env *env, fp_kernel_id id,
                        const fp_karg *args, int nargs, cl_kernel *kernel, cl_uint *dims,
                        size_t global[3], size_t local[3]) {
  if (!ocl_attn_is_planned(id))
    return fp_ctx_error(ctx, FP_ERR_INTERNAL, "opencl attention: %s is not a planned kernel",
                        fp_kernel_name(id));
  if (nargs != ATTN_NARGS)
    return fp_ctx_error(ctx, FP_ERR_INTERNAL, "opencl attention: %s with %d arguments, expected %d",
                        fp_kernel_name(id), nargs, ATTN_NARGS);
  uint32_t regs;
  if (!ocl_env_u32("FUSEPORT_OPENCL_ATTN_REGS", 32, 255, false, ATTN_NV_MAXRREG, &regs))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_OPENCL_ATTN_REGS='%s': expected 32..255",
                        getenv("FUSEPORT_OPENCL_ATTN_REGS"));
  const int forced = forced_config();
  if (forced == -2)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_OPENCL_ATTN_TILE='%s': expected auto, t, s, m or l",
                        getenv("FUSEPORT_OPENCL_ATTN_TILE"));
  const fp_dtype dt = dtype_of(id);
  fp_status st = check_args(ctx, dt, args);
  if (st != FP_OK)
    return st;
  st = ensure_kernels(ctx, at, env);
  if (st != FP_OK)
    return st;
  const uint64_t B = (uint64_t)args[7].v.i64, H = (uint64_t)args[8].v.i64;
  const uint64_t S = (uint64_t)args[9].v.i64, D = (uint64_t)args[11].v.i64;
  const uint64_t splits = args[14].v.i32 > 1 ? (uint64_t)args[14].v.i32 : 1;
  int best = -1;
  if (forced >= 0) {
    if (at->attn[dt][forced].kernel == NULL)
      return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                          "attention_%s on '%s': configuration %c (FUSEPORT_OPENCL_ATTN_TILE) is "
                          "not usable: %s",
                          dtype_suffix[dt], ctx->info.name, attn_configs[forced].letter,
                          at->attn[dt][forced].why);
    if (attn_configs[forced].dt < D)
      return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                          "attention_%s: configuration %c (FUSEPORT_OPENCL_ATTN_TILE) takes D <= "
                          "%u, not %llu",
                          dtype_suffix[dt], attn_configs[forced].letter, attn_configs[forced].dt,
                          (unsigned long long)D);
    best = forced;
  } else {
    double best_cost = 0.0;
    for (int c = 0; c < ATTN_CONFIGS; ++c) {
      if (at->attn[dt][c].kernel == NULL || attn_configs[c].dt < D)
        continue;
      const double cost = config_cost(&attn_configs[c], S, D);
      if (best < 0 || cost < best_cost) {
        best = c;
        best_cost = cost;
      }
    }
  }
  if (best < 0)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "attention_%s on '%s': no usable tile configuration: %s", dtype_suffix[dt],
                        ctx->info.name, at->attn[dt][ATTN_SMALLEST].why);
  const attn_config *cfg = &attn_configs[best];
  const uint64_t groups = B * H * ceil_div(S, 4ull * cfg->wy) * splits;
  if (groups > (uint64_t)(SIZE_MAX / cfg->wx) || groups * cfg->wx > 0xffffffffull)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "attention_%s: %llu groups of %u work-items along dimension 0: more than "
                        "the launch takes",
                        dtype_suffix[dt], (unsigned long long)groups, cfg->wx);
  *kernel = at->attn[dt][best].kernel;
  *dims = 2;
  local[0] = cfg->wx;
  local[1] = cfg->wy;
  local[2] = 1;
  global[0] = (size_t)(groups * cfg->wx);
  global[1] = cfg->wy;
  global[2] = 1;
  return FP_OK;
}
