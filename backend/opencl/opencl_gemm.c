/* fuseport OpenCL backend: the GEMM core's launch planner (kernels/cl/gemm*.cl)
 * and the GEMM library, CLBlast (fp_library_gemm).
 *
 * The planner. kernels/cl/gemm_kernels.cl builds each tile configuration below as
 * <prefix><dt> (gemm_l_f32, ...), those that fit the device's local memory
 * and group size (ocl_gemm_build_options passes both); kernels.def's
 * gemm_<dt> is the smallest, which every device runs. A configuration is usable where
 * the built kernel's group fits what the device and the compiler report
 * (CL_KERNEL_WORK_GROUP_SIZE, CL_DEVICE_MAX_WORK_ITEM_SIZES,
 * CL_KERNEL_LOCAL_MEM_SIZE against CL_DEVICE_LOCAL_MEM_SIZE). Per launch it
 * takes the usable configuration with the least estimated time:
 *   waves * BM * BN / efficiency, waves = ceil(tiles / compute units),
 * efficiency the configuration's relative speed on a full tile, scaled by
 * the share of its group that fills whole multiples of
 * CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE. So a large problem takes
 * 128 x 128 tiles and a small one the tile that still gives every compute
 * unit work; few rows (M <= 16) take the 16-row tiles.
 * gemm2 has one configuration (32 rows per group, N <= 128); S groups per
 * row block split P's 128-column tiles where the row blocks alone leave the
 * device idle (fewer than 2 per compute unit), each recomputing the first
 * product, at most doubling the work (S <= 1 + P / K).
 * dw_packed (the weight gradient from packed activations) builds gemm's
 * t, m and l configurations as dw_packed<prefix><dt> and picks one and a
 * split of K, S: groups = tiles * S, S <= DW_MAX_SPLIT and only as far as
 * the recipe's workspace holds the partial tiles (gemm_dw.cl, fp_dw_body: none
 * passed, S = 1), by the same cost model with K in it:
 *   waves * BM * BN * (ceil(nk / S) + split overhead) / efficiency,
 * nk the K-steps; so few output tiles over a long K (768 x 768 over 8192
 * tokens: 36 tiles of 128 x 128) still fill the device.
 * All launch a 1-D grid of groups (dimension 0 allows the most groups).
 *
 * Environment (diagnostics and timing):
 *   FUSEPORT_OPENCL_GEMM_TILE=t|s|m|l  force a gemm configuration (an error
 *                                      where the device lacks it)
 *   FUSEPORT_OPENCL_GEMM2_SPLIT=S      gemm2's P splits (1..4096; default:
 *                                      the rule above)
 *   FUSEPORT_OPENCL_DW_SPLIT=S         dw_packed's K splits (1..16; an
 *                                      error where the workspace is too
 *                                      small for S; default: the model)
 *   FUSEPORT_OPENCL_GEMM_REGS=R        NVIDIA: the family's register cap
 *                                      (32..255, default 128)
 *
 * The library. CLBlast's C API (CLBlastSgemm, CLBlastHgemm, and their
 * StridedBatched forms for batch > 1), row-major, on the context's queue,
 * A and B transposed as the descriptor says (trans_a: A stored [K, M]). C
 * and D are of the inputs' type: a float32 output from half inputs
 * (out_dtype) is unsupported, as is bfloat16, which CLBlast lacks.
 * The device info says it fuses no epilogue, so beta is 0 and the epilogue
 * none here (the layer checked; asserted again). CLBlast compiles one
 * program per routine and precision on first use (the plain GEMM's holds
 * its direct and indirect kernels alike): ocl_gemm_library_prepare times a
 * 1 x 1 x 1 GEMM of the type, which is that compilation, and every GEMM
 * prepares its type first, so the compile time is never inside a timed
 * GEMM. The batched routine compiles on its first call (no recipe batches
 * yet). */
#define _POSIX_C_SOURCE 200809L
#include "opencl_gemm.h"
#include "opencl_planned.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fp_device_common.h"

#ifdef FUSEPORT_HAVE_CLBLAST
#include <clblast_c.h>
#endif

/* ---- the configurations (kernels/cl/gemm_kernels.cl, FP_GEMM_KERNELS) ---------------------- */

typedef struct gemm_config {
  const char *prefix; /* of the kernel name: <prefix><dt> */
  char letter;        /* FUSEPORT_OPENCL_GEMM_TILE */
  uint32_t wx, wy;    /* group: WX along N, WY along M */
  uint32_t tm;        /* rows per work-item; 8 columns each */
  double efficiency;  /* relative throughput on full tiles (the cost model) */
} gemm_config;

#define GEMM_TN 8
#define GEMM_CONFIGS 4
static const gemm_config gemm_configs[GEMM_CONFIGS] = {
    {"gemm_l_", 'l', 16, 16, 8, 1.0},  /* 128 x 128 */
    {"gemm_m_", 'm', 16, 16, 4, 0.75}, /* 64 x 128 */
    {"gemm_", 't', 8, 8, 4, 0.5},      /* 32 x 64: kernels.def's gemm_<dt> */
    {"gemm_s_", 's', 8, 4, 4, 0.4},    /* 16 x 64 */
};
/* gemm2 (FP_GEMM2_*): groups of 16 x 8, 32 rows, 128 columns */
#define GEMM2_WX 16
#define GEMM2_WY 8
#define GEMM2_BM 32
#define GEMM2_BN 128
#define GEMM2_MAX_N 128 /* ops/matmul.c's FP_CL_GEMM2_MAX_N */
/* dw_packed: the configurations are gemm's, BK 16 for those it builds */
#define DW_BK 16
#define DW_MAX_SPLIT 16
/* K-steps of work a split adds per output element: the partial's atomic
 * store and, for the last group, the loads and adds of every slice (a
 * guess that only has to keep S from being raised for a few percent) */
#define DW_SPLIT_STEPS(S) (2.0 + 0.5 * (double)(S))

/* NVIDIA's register cap for this family (FUSEPORT_OPENCL_GEMM_REGS): the
 * other families' 64 would spill the 8 x 8 accumulators of the 128 x 128
 * tiles; no group here is larger than 256 work-items, and 256 x 128
 * registers still leave room for two groups per SM. */
#define GEMM_NV_MAXRREG 128

#define GEMM_DTYPES 3 /* f32, f16, bf16: the index is the fp_dtype */

typedef ocl_planned_kernel gemm_kernel;

struct ocl_gemm {
  bool kernels_ready;
  gemm_kernel gemm[GEMM_DTYPES][GEMM_CONFIGS];
  gemm_kernel gemm2[GEMM_DTYPES];
  gemm_kernel dw[GEMM_DTYPES][GEMM_CONFIGS]; /* [FP_F16] unused: dw_packed is f32 or bf16 */
  uint32_t compute_units;
  /* the library */
  bool lib_used; /* counted in clblast_contexts */
  bool lib_prepared[GEMM_DTYPES];
  double lib_ms[GEMM_DTYPES];
};

ocl_gemm *ocl_gemm_create(void) { return calloc(1, sizeof(ocl_gemm)); }

#ifdef FUSEPORT_HAVE_CLBLAST
/* Contexts that have called CLBlast and are still alive: CLBlast keeps
 * every program it compiled (and so its OpenCL context) in a process-wide
 * cache; the last such context to go clears it. */
static atomic_int clblast_contexts;
#endif

void ocl_gemm_destroy(ocl_gemm *g) {
  if (g == NULL)
    return;
  for (int d = 0; d < GEMM_DTYPES; ++d) {
    for (int c = 0; c < GEMM_CONFIGS; ++c) {
      ocl_planned_kernel_release(&g->gemm[d][c]);
      ocl_planned_kernel_release(&g->dw[d][c]);
    }
    ocl_planned_kernel_release(&g->gemm2[d]);
  }
#ifdef FUSEPORT_HAVE_CLBLAST
  if (g->lib_used && atomic_fetch_sub(&clblast_contexts, 1) == 1)
    (void)CLBlastClearCache(); /* nothing to report it to: a cache, released at exit anyway */
#endif
  free(g);
}

void ocl_gemm_build_options(const fp_device_info *info, cl_device_id device, bool nv_options,
                            char *buf, size_t cap) {
  ocl_planned_build_options(info, device, nv_options, "FP_GEMM", "FUSEPORT_OPENCL_GEMM_REGS",
                            GEMM_NV_MAXRREG, buf, cap);
}

bool ocl_gemm_is_planned(fp_kernel_id id) { return fp_kernel_family_of(id) == FPF_gemm; }

/* ---- errors ---------------------------------------------------------------------------- */

/* ---- the planner ------------------------------------------------------------------------ */

static fp_dtype dtype_of(fp_kernel_id id) {
  switch (id) {
  case FPK_gemm_f16:
  case FPK_gemm2_f16:
    return FP_F16;
  case FPK_gemm_bf16:
  case FPK_gemm2_bf16:
  case FPK_dw_packed_bf16:
    return FP_BF16;
  default:
    return FP_F32;
  }
}

static const char *const dtype_suffix[GEMM_DTYPES] = {"f32", "f16", "bf16"};

static fp_status ensure_kernels(fp_context *ctx, ocl_gemm *g, const ocl_gemm_env *env) {
  if (g->kernels_ready)
    return FP_OK;
  ocl_planned_limits lim;
  fp_status st = ocl_planned_limits_get(ctx, env->device, env->program, "gemm", &lim);
  if (st != FP_OK)
    return st;
  g->compute_units = lim.units;
  for (int d = 0; d < GEMM_DTYPES && st == FP_OK; ++d) {
    char name[64];
    for (int c = 0; c < GEMM_CONFIGS && st == FP_OK; ++c) {
      const gemm_config *cfg = &gemm_configs[c];
      snprintf(name, sizeof name, "%s%s", cfg->prefix, dtype_suffix[d]);
      st = ocl_planned_kernel_make(ctx, env->device, env->program, &lim, name, cfg->wx, cfg->wy,
                                   &g->gemm[d][c]);
    }
    snprintf(name, sizeof name, "gemm2_%s", dtype_suffix[d]);
    if (st == FP_OK)
      st = ocl_planned_kernel_make(ctx, env->device, env->program, &lim, name, GEMM2_WX, GEMM2_WY,
                                   &g->gemm2[d]);
    /* dw_packed<prefix minus "gemm"><dt>: dw_packed_f32, dw_packed_l_f32, ... */
    for (int c = 0; c < GEMM_CONFIGS && st == FP_OK && d != FP_F16; ++c) {
      const gemm_config *cfg = &gemm_configs[c];
      if (cfg->letter == 's') { /* few rows: gemm_dw.cl builds no dw_packed of them */
        snprintf(g->dw[d][c].why, sizeof g->dw[d][c].why,
                 "dw_packed has gemm's t, m and l tiles, not s");
        continue;
      }
      snprintf(name, sizeof name, "dw_packed%s%s", cfg->prefix + 4, dtype_suffix[d]);
      st = ocl_planned_kernel_make(ctx, env->device, env->program, &lim, name, cfg->wx, cfg->wy,
                                   &g->dw[d][c]);
    }
  }
  ocl_planned_limits_free(&lim);
  if (st != FP_OK) /* the next launch tries again from nothing */
    for (int d = 0; d < GEMM_DTYPES; ++d) {
      for (int c = 0; c < GEMM_CONFIGS; ++c) {
        ocl_planned_kernel_release(&g->gemm[d][c]);
        ocl_planned_kernel_release(&g->dw[d][c]);
      }
      ocl_planned_kernel_release(&g->gemm2[d]);
    }
  g->kernels_ready = st == FP_OK;
  return st;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* The cost model's estimate for one configuration (see the top). */
static double config_cost(const gemm_config *cfg, size_t pref_multiple, int64_t M, int64_t N,
                          bool paired, uint32_t units) {
  const uint64_t bm = (uint64_t)cfg->wy * cfg->tm, bn = (uint64_t)cfg->wx * GEMM_TN;
  const uint64_t tiles = ceil_div((uint64_t)M, bm) * ceil_div((uint64_t)N, paired ? bn / 2 : bn);
  const uint64_t waves = ceil_div(tiles, units);
  const uint64_t group = (uint64_t)cfg->wx * cfg->wy;
  const double filled = (double)group / (double)(ceil_div(group, pref_multiple) * pref_multiple);
  return (double)waves * (double)(bm * bn) / (cfg->efficiency * filled);
}

/* FUSEPORT_OPENCL_GEMM_TILE: -1 (unset or auto), else the configuration's
 * index; -2 for a value that names none. */
static int forced_config(void) {
  const char *text = getenv("FUSEPORT_OPENCL_GEMM_TILE");
  if (text == NULL || *text == '\0' || strcmp(text, "auto") == 0)
    return -1;
  for (int c = 0; c < GEMM_CONFIGS; ++c)
    if (text[0] == gemm_configs[c].letter && text[1] == '\0')
      return c;
  return -2;
}

static fp_status plan_gemm(fp_context *ctx, ocl_gemm *g, fp_dtype dt, const fp_karg *args,
                           cl_kernel *kernel, size_t global[3], size_t local[3]) {
  const int64_t M = args[6].v.i64, N = args[7].v.i64, K = args[8].v.i64;
  const int64_t lda = args[9].v.i64, ldb = args[10].v.i64;
  const int epi = args[11].v.i32;
  const bool trans_b = args[12].v.i32 != 0;
  const bool paired = FP_EPI_PAIRED(epi);
  const int64_t NB = paired ? 2 * N : N;
  if (M < 1 || N < 1 || K < 0 || epi < 0 || epi >= FP_EPI_COUNT || lda < K ||
      ldb < (trans_b ? K : NB))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "gemm_%s: M=%lld N=%lld K=%lld lda=%lld ldb=%lld epilogue=%d trans_b=%d: "
                        "M, N >= 1, K >= 0, an FP_EPI_* epilogue, lda >= K and ldb >= %s",
                        dtype_suffix[dt], (long long)M, (long long)N, (long long)K, (long long)lda,
                        (long long)ldb, epi, (int)trans_b, trans_b ? "K" : (paired ? "2N" : "N"));
  const int forced = forced_config();
  if (forced == -2)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_OPENCL_GEMM_TILE='%s': expected auto, t, s, m or l",
                        getenv("FUSEPORT_OPENCL_GEMM_TILE"));
  int best = -1;
  double best_cost = 0.0;
  for (int c = 0; c < GEMM_CONFIGS; ++c) {
    const gemm_kernel *k = &g->gemm[dt][c];
    if (k->kernel == NULL || (forced >= 0 && c != forced))
      continue;
    const double cost =
        config_cost(&gemm_configs[c], k->pref_multiple, M, N, paired, g->compute_units);
    if (best < 0 || cost < best_cost) {
      best = c;
      best_cost = cost;
    }
  }
  if (best < 0) {
    const int c = forced >= 0 ? forced : 2; /* the smallest: its reason */
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "gemm_%s on '%s': no usable tile configuration%s: %s", dtype_suffix[dt],
                        ctx->info.name, forced >= 0 ? " (FUSEPORT_OPENCL_GEMM_TILE)" : "",
                        g->gemm[dt][c].why);
  }
  const gemm_config *cfg = &gemm_configs[best];
  const uint64_t bm = (uint64_t)cfg->wy * cfg->tm, bn = (uint64_t)cfg->wx * GEMM_TN;
  *kernel = g->gemm[dt][best].kernel;
  local[0] = cfg->wx;
  local[1] = cfg->wy;
  /* a 1-D grid of groups (gemm_kernels.cl, fp_gemm_tile_of) */
  const uint64_t groups = ceil_div((uint64_t)N, paired ? bn / 2 : bn) * ceil_div((uint64_t)M, bm);
  global[0] = (size_t)(groups * cfg->wx);
  global[1] = cfg->wy;
  return FP_OK;
}

static fp_status plan_gemm2(fp_context *ctx, ocl_gemm *g, fp_dtype dt, const fp_karg *args,
                            cl_kernel *kernel, size_t global[3], size_t local[3]) {
  const int64_t M = args[5].v.i64, N = args[6].v.i64, K = args[7].v.i64, P = args[8].v.i64;
  const int64_t lda = args[9].v.i64, ldb = args[10].v.i64, ldd = args[11].v.i64;
  const bool trans_b = args[12].v.i32 != 0;
  if (N > GEMM2_MAX_N)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "gemm2_%s: N=%lld: the OpenCL kernel keeps the [rows, N] intermediate in "
                        "local memory up to N=%d; beyond that, two gemm launches through a "
                        "workspace (ops/matmul.c does so)",
                        dtype_suffix[dt], (long long)N, GEMM2_MAX_N);
  if (M < 1 || N < 1 || P < 1 || K < 0 || lda < K || ldb < (trans_b ? K : N) || ldd < P)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "gemm2_%s: M=%lld N=%lld K=%lld P=%lld lda=%lld ldb=%lld ldd=%lld "
                        "trans_b=%d: M, N, P >= 1, K >= 0, lda >= K, ldb >= %s, ldd >= P",
                        dtype_suffix[dt], (long long)M, (long long)N, (long long)K, (long long)P,
                        (long long)lda, (long long)ldb, (long long)ldd, (int)trans_b,
                        trans_b ? "K" : "N");
  if (g->gemm2[dt].kernel == NULL)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "gemm2_%s on '%s': %s", dtype_suffix[dt],
                        ctx->info.name, g->gemm2[dt].why);
  const uint64_t blocks = ceil_div((uint64_t)M, GEMM2_BM);
  const uint64_t ptiles = ceil_div((uint64_t)P, GEMM2_BN);
  uint32_t forced = 0;
  if (!ocl_env_u32("FUSEPORT_OPENCL_GEMM2_SPLIT", 1, 4096, false, 0, &forced))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_OPENCL_GEMM2_SPLIT='%s': expected 1..4096",
                        getenv("FUSEPORT_OPENCL_GEMM2_SPLIT"));
  uint64_t split = 1;
  if (forced != 0) {
    split = forced;
  } else if (blocks < 2ull * g->compute_units) {
    split = ceil_div(2ull * g->compute_units, blocks);
    const uint64_t cap = 1 + (uint64_t)P / (uint64_t)(K > 0 ? K : 1);
    if (split > cap)
      split = cap;
  }
  if (split > ptiles)
    split = ptiles;
  *kernel = g->gemm2[dt].kernel;
  local[0] = GEMM2_WX;
  local[1] = GEMM2_WY;
  global[0] = (size_t)(blocks * split * GEMM2_WX);
  global[1] = GEMM2_WY;
  return FP_OK;
}

/* Bytes of dw_packed's split-K workspace for S > 1 (gemm_dw.cl, fp_dw_body;
 * gemm_common.cuh's layout): the tiles' counters, padded to 256 bytes, and S
 * partial tiles of bm x bn floats each. */
static uint64_t dw_ws_bytes(uint64_t tiles, uint64_t S, uint64_t bm, uint64_t bn) {
  return ceil_div(tiles * 4, 256) * 256 + S * tiles * bm * bn * 4;
}

/* dw_packed_<dt>(out, dy, words, scale, min, ws, K, COUT, CIN, bits, lddy):
 * the configuration and K split of least estimated time (see the top). */
static fp_status plan_dw(fp_context *ctx, ocl_gemm *g, fp_dtype dt, const fp_karg *args,
                         cl_kernel *kernel, size_t global[3], size_t local[3]) {
  const int64_t K = args[6].v.i64, COUT = args[7].v.i64, CIN = args[8].v.i64;
  const int bits = args[9].v.i32;
  const int64_t lddy = args[10].v.i64;
  if (K < 1 || COUT < 1 || CIN < 1 || (bits != 1 && bits != 2 && bits != 4 && bits != 8) ||
      lddy < COUT)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "dw_packed_%s: K=%lld COUT=%lld CIN=%lld bits=%d lddy=%lld: K, COUT, CIN "
                        ">= 1, bits 1, 2, 4 or 8 and lddy >= COUT",
                        dtype_suffix[dt], (long long)K, (long long)COUT, (long long)CIN, bits,
                        (long long)lddy);
  /* the workspace's size decides how far K may be split */
  uint64_t ws_bytes = 0;
  cl_mem ws = (cl_mem)args[5].v.handle;
  if (ws != NULL) {
    size_t size = 0;
    cl_int err = clGetMemObjectInfo(ws, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
      return ocl_planned_error(ctx, err, "clGetMemObjectInfo(CL_MEM_SIZE)",
                               "dw_packed's workspace");
    ws_bytes = size;
  }
  const int forced = forced_config();
  if (forced == -2)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_OPENCL_GEMM_TILE='%s': expected auto, t, s, m or l",
                        getenv("FUSEPORT_OPENCL_GEMM_TILE"));
  uint32_t forced_split = 0;
  if (!ocl_env_u32("FUSEPORT_OPENCL_DW_SPLIT", 1, DW_MAX_SPLIT, false, 0, &forced_split))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_OPENCL_DW_SPLIT='%s': expected 1..%d",
                        getenv("FUSEPORT_OPENCL_DW_SPLIT"), DW_MAX_SPLIT);
  const uint64_t nk = ceil_div((uint64_t)K, DW_BK);
  int best = -1, usable = -1;
  uint64_t best_split = 1;
  double best_cost = 0.0;
  for (int c = 0; c < GEMM_CONFIGS; ++c) {
    const gemm_kernel *k = &g->dw[dt][c];
    if (k->kernel == NULL || (forced >= 0 && c != forced))
      continue;
    usable = c;
    const gemm_config *cfg = &gemm_configs[c];
    const uint64_t bm = (uint64_t)cfg->wy * cfg->tm, bn = (uint64_t)cfg->wx * GEMM_TN;
    const uint64_t tiles = ceil_div((uint64_t)COUT, bm) * ceil_div((uint64_t)CIN, bn);
    const uint64_t group = (uint64_t)cfg->wx * cfg->wy;
    const double filled =
        (double)group / (double)(ceil_div(group, k->pref_multiple) * k->pref_multiple);
    for (uint64_t S = 1; S <= DW_MAX_SPLIT && S <= nk; ++S) {
      if (S > 1 && dw_ws_bytes(tiles, S, bm, bn) > ws_bytes)
        break;
      if (forced_split != 0 && S != forced_split)
        continue;
      const double steps = (double)ceil_div(nk, S) + (S > 1 ? DW_SPLIT_STEPS(S) : 0.0);
      const double cost = (double)ceil_div(tiles * S, g->compute_units) * (double)(bm * bn) *
                          steps / (cfg->efficiency * filled);
      if (best < 0 || cost < best_cost) {
        best = c;
        best_split = S;
        best_cost = cost;
      }
    }
  }
  if (best < 0 && usable >= 0) { /* only FUSEPORT_OPENCL_DW_SPLIT excludes every choice */
    const int c = usable;
    const uint64_t bm = (uint64_t)gemm_configs[c].wy * gemm_configs[c].tm;
    const uint64_t bn = (uint64_t)gemm_configs[c].wx * GEMM_TN;
    const uint64_t tiles = ceil_div((uint64_t)COUT, bm) * ceil_div((uint64_t)CIN, bn);
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_OPENCL_DW_SPLIT=%u: dw_packed_%s splits at most its K-steps "
                        "(K=%lld: %llu of %d) and needs, for tiles of %llu x %llu, %llu bytes of "
                        "workspace for that split; the launch passed %llu",
                        forced_split, dtype_suffix[dt], (long long)K, (unsigned long long)nk, DW_BK,
                        (unsigned long long)bm, (unsigned long long)bn,
                        (unsigned long long)dw_ws_bytes(tiles, forced_split, bm, bn),
                        (unsigned long long)ws_bytes);
  }
  if (best < 0) {
    const int c = forced >= 0 ? forced : 2; /* the smallest: its reason */
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "dw_packed_%s on '%s': no usable tile configuration%s: %s",
                        dtype_suffix[dt], ctx->info.name,
                        forced >= 0 ? " (FUSEPORT_OPENCL_GEMM_TILE)" : "", g->dw[dt][c].why);
  }
  const gemm_config *cfg = &gemm_configs[best];
  const uint64_t bm = (uint64_t)cfg->wy * cfg->tm, bn = (uint64_t)cfg->wx * GEMM_TN;
  const uint64_t tiles = ceil_div((uint64_t)COUT, bm) * ceil_div((uint64_t)CIN, bn);
  *kernel = g->dw[dt][best].kernel;
  local[0] = cfg->wx;
  local[1] = cfg->wy;
  global[0] = (size_t)(tiles * best_split * cfg->wx);
  global[1] = cfg->wy;
  return FP_OK;
}

fp_status ocl_gemm_plan(fp_context *ctx, ocl_gemm *g, const ocl_gemm_env *env, fp_kernel_id id,
                        const fp_karg *args, int nargs, cl_kernel *kernel, cl_uint *dims,
                        size_t global[3], size_t local[3]) {
  const bool dw = id == FPK_dw_packed_f32 || id == FPK_dw_packed_bf16;
  const int want = dw ? 11 : 13;
  if (nargs != want)
    return fp_ctx_error(ctx, FP_ERR_INTERNAL, "opencl gemm: %s with %d arguments, expected %d",
                        fp_kernel_name(id), nargs, want);
  uint32_t regs;
  if (!ocl_env_u32("FUSEPORT_OPENCL_GEMM_REGS", 32, 255, false, GEMM_NV_MAXRREG, &regs))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_OPENCL_GEMM_REGS='%s': expected 32..255",
                        getenv("FUSEPORT_OPENCL_GEMM_REGS"));
  fp_status st = ensure_kernels(ctx, g, env);
  if (st != FP_OK)
    return st;
  const fp_dtype dt = dtype_of(id);
  global[2] = local[2] = 1;
  *dims = 2;
  switch (id) {
  case FPK_gemm_f32:
  case FPK_gemm_f16:
  case FPK_gemm_bf16:
    return plan_gemm(ctx, g, dt, args, kernel, global, local);
  case FPK_gemm2_f32:
  case FPK_gemm2_f16:
  case FPK_gemm2_bf16:
    return plan_gemm2(ctx, g, dt, args, kernel, global, local);
  case FPK_dw_packed_f32:
  case FPK_dw_packed_bf16:
    return plan_dw(ctx, g, dt, args, kernel, global, local);
  default:
    return fp_ctx_error(ctx, FP_ERR_INTERNAL, "opencl gemm: %s is not a planned kernel",
                        fp_kernel_name(id));
  }
}

/* ---- the library: CLBlast ------------------------------------------------------------------ */

void ocl_gemm_device_info(fp_device_info *info, bool has_fp16) {
#ifdef FUSEPORT_HAVE_CLBLAST
  snprintf(info->gemm_library, sizeof info->gemm_library, "CLBlast %d.%d.%d", CLBLAST_VERSION_MAJOR,
           CLBLAST_VERSION_MINOR, CLBLAST_VERSION_PATCH);
  /* CLBlast has no bfloat16; its half GEMM needs cl_khr_fp16 */
  info->gemm_library_dtypes = (1u << FP_F32) | (has_fp16 ? 1u << FP_F16 : 0u);
#else
  (void)has_fp16;
  info->gemm_library[0] = '\0';
  info->gemm_library_dtypes = 0;
#endif
  info->gemm_library_epilogues = false;
}

#ifdef FUSEPORT_HAVE_CLBLAST
typedef struct clblast_name {
  int code;
  const char *name;
} clblast_name;

/* CLBlast's own codes; the ones it shares with OpenCL are named by
 * ocl_error_name. */
static const clblast_name clblast_names[] = {
    {CLBlastNotImplemented, "CLBlastNotImplemented"},
    {CLBlastInvalidMatrixA, "CLBlastInvalidMatrixA"},
    {CLBlastInvalidMatrixB, "CLBlastInvalidMatrixB"},
    {CLBlastInvalidMatrixC, "CLBlastInvalidMatrixC"},
    {CLBlastInvalidDimension, "CLBlastInvalidDimension"},
    {CLBlastInvalidLeadDimA, "CLBlastInvalidLeadDimA"},
    {CLBlastInvalidLeadDimB, "CLBlastInvalidLeadDimB"},
    {CLBlastInvalidLeadDimC, "CLBlastInvalidLeadDimC"},
    {CLBlastInsufficientMemoryA, "CLBlastInsufficientMemoryA"},
    {CLBlastInsufficientMemoryB, "CLBlastInsufficientMemoryB"},
    {CLBlastInsufficientMemoryC, "CLBlastInsufficientMemoryC"},
    {CLBlastInsufficientMemoryTemp, "CLBlastInsufficientMemoryTemp"},
    {CLBlastInvalidBatchCount, "CLBlastInvalidBatchCount"},
    {CLBlastInvalidLocalMemUsage, "CLBlastInvalidLocalMemUsage"},
    {CLBlastNoHalfPrecision, "CLBlastNoHalfPrecision"},
    {CLBlastNoDoublePrecision, "CLBlastNoDoublePrecision"},
    {CLBlastDatabaseError, "CLBlastDatabaseError"},
    {CLBlastUnknownError, "CLBlastUnknownError"},
    {CLBlastUnexpectedError, "CLBlastUnexpectedError"},
};

static const char *clblast_status_name(CLBlastStatusCode s) {
  for (size_t k = 0; k < sizeof clblast_names / sizeof clblast_names[0]; ++k)
    if (clblast_names[k].code == (int)s)
      return clblast_names[k].name;
  return (int)s > -1000 ? ocl_error_name((cl_int)s) : "CLBlast status";
}

static fp_status clblast_fail(fp_context *ctx, CLBlastStatusCode s, const char *what,
                              const fp_lib_gemm *lg) {
  fp_status st = s == CLBlastTempBufferAllocFailure || s == CLBlastOpenCLOutOfResources ||
                         s == CLBlastOpenCLOutOfHostMemory
                     ? FP_ERR_OUT_OF_MEMORY
                 : s == CLBlastNoHalfPrecision ? FP_ERR_UNSUPPORTED
                                               : FP_ERR_BACKEND;
  return fp_ctx_error(ctx, st,
                      "%s(%s, M=%lld N=%lld K=%lld batch=%lld lda=%lld ldb=%lld ldd=%lld%s%s) on "
                      "'%s' failed: %s (%d)",
                      what, fp_dtype_name(lg->dtype), (long long)lg->M, (long long)lg->N,
                      (long long)lg->K, (long long)lg->batch, (long long)lg->lda,
                      (long long)lg->ldb, (long long)lg->ldd, lg->trans_a ? ", A transposed" : "",
                      lg->trans_b ? ", B transposed" : "", ctx->info.name, clblast_status_name(s),
                      (int)s);
}

/* Enqueues lg on the queue (no wait). */
static fp_status clblast_run(fp_context *ctx, const ocl_gemm_env *env, const fp_lib_gemm *lg,
                             cl_mem a, cl_mem b, cl_mem d) {
  cl_command_queue queue = env->queue;
  const CLBlastTranspose ta = lg->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
  const CLBlastTranspose tb = lg->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
  const size_t M = (size_t)lg->M, N = (size_t)lg->N, K = (size_t)lg->K;
  const size_t lda = (size_t)lg->lda, ldb = (size_t)lg->ldb, ldd = (size_t)lg->ldd;
  CLBlastStatusCode s;
  const char *what;
  if (lg->dtype == FP_F16) {
    const cl_half alpha = fp_f32_to_f16_bits(lg->alpha), zero = 0; /* half bits */
    if (lg->batch == 1) {
      what = "CLBlastHgemm";
      s = CLBlastHgemm(CLBlastLayoutRowMajor, ta, tb, M, N, K, alpha, a, 0, lda, b, 0, ldb, zero, d,
                       0, ldd, &queue, NULL);
    } else {
      what = "CLBlastHgemmStridedBatched";
      s = CLBlastHgemmStridedBatched(CLBlastLayoutRowMajor, ta, tb, M, N, K, alpha, a, 0, lda,
                                     (size_t)lg->stride_a, b, 0, ldb, (size_t)lg->stride_b, zero, d,
                                     0, ldd, (size_t)lg->stride_d, (size_t)lg->batch, &queue, NULL);
    }
  } else {
    if (lg->batch == 1) {
      what = "CLBlastSgemm";
      s = CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, M, N, K, lg->alpha, a, 0, lda, b, 0, ldb,
                       0.0f, d, 0, ldd, &queue, NULL);
    } else {
      what = "CLBlastSgemmStridedBatched";
      s = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, ta, tb, M, N, K, lg->alpha, a, 0, lda,
                                     (size_t)lg->stride_a, b, 0, ldb, (size_t)lg->stride_b, 0.0f, d,
                                     0, ldd, (size_t)lg->stride_d, (size_t)lg->batch, &queue, NULL);
    }
  }
  return s == CLBlastSuccess ? FP_OK : clblast_fail(ctx, s, what, lg);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static fp_status prepare(fp_context *ctx, ocl_gemm *g, const ocl_gemm_env *env, fp_dtype dtype) {
  if (g->lib_prepared[dtype])
    return FP_OK;
  if (!g->lib_used) {
    g->lib_used = true;
    atomic_fetch_add(&clblast_contexts, 1);
  }
  /* 1 x 1 x 1 operands of their own, zeroed (outside the timing) */
  cl_mem bufs[3] = {NULL, NULL, NULL};
  cl_int err = CL_SUCCESS;
  const cl_uint zero = 0;
  for (int k = 0; k < 3 && err == CL_SUCCESS; ++k) {
    bufs[k] = clCreateBuffer(env->context, CL_MEM_READ_WRITE, 64, NULL, &err);
    if (err == CL_SUCCESS)
      err = clEnqueueFillBuffer(env->queue, bufs[k], &zero, sizeof zero, 0, 64, 0, NULL, NULL);
  }
  if (err == CL_SUCCESS)
    err = clFinish(env->queue);
  fp_status st = FP_OK;
  if (err != CL_SUCCESS) {
    st = ocl_planned_error(ctx, err, "clCreateBuffer/clEnqueueFillBuffer/clFinish",
                           "CLBlast preparation operands");
  } else {
    const double t0 = now_ms();
    fp_lib_gemm one = fp_lib_gemm_plain(dtype, 1, 1, 1, false);
    st = clblast_run(ctx, env, &one, bufs[0], bufs[1], bufs[2]);
    if (st == FP_OK) {
      err = clFinish(env->queue);
      if (err != CL_SUCCESS)
        st = ocl_planned_error(ctx, err, "clFinish", "after CLBlast's first GEMM");
    }
    if (st == FP_OK) {
      g->lib_ms[dtype] = now_ms() - t0;
      g->lib_prepared[dtype] = true;
    }
  }
  for (int k = 0; k < 3; ++k)
    if (bufs[k] != NULL)
      clReleaseMemObject(bufs[k]);
  return st;
}
#endif

fp_status ocl_gemm_library_prepare(fp_context *ctx, ocl_gemm *g, const ocl_gemm_env *env,
                                   fp_dtype dtype, double *compile_ms) {
#ifdef FUSEPORT_HAVE_CLBLAST
  if (dtype != FP_F32 && dtype != FP_F16)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "CLBlast has no %s GEMM", fp_dtype_name(dtype));
  fp_status st = prepare(ctx, g, env, dtype);
  if (st == FP_OK)
    *compile_ms = g->lib_ms[dtype];
  return st;
#else
  (void)g;
  (void)env;
  (void)compile_ms;
  return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                      "no %s GEMM library: fuseport was built without CLBlast",
                      fp_dtype_name(dtype));
#endif
}

fp_status ocl_gemm_library(fp_context *ctx, ocl_gemm *g, const ocl_gemm_env *env,
                           const fp_lib_gemm *lg, void *a, void *b, void *c, void *d, void *bias,
                           void *ws, uint64_t ws_bytes) {
  (void)c;
  (void)bias;
  (void)ws; /* CLBlast allocates what its indirect path needs itself */
  (void)ws_bytes;
  /* the device info says no epilogues: the layer has refused anything else */
  if (lg->beta != 0.0f || lg->epilogue != FP_LIB_EPI_NONE)
    return fp_ctx_error(ctx, FP_ERR_INTERNAL,
                        "CLBlast GEMM with beta %g and epilogue %d: the layer should have refused "
                        "it (gemm_library_epilogues is false)",
                        (double)lg->beta, (int)lg->epilogue);
#ifdef FUSEPORT_HAVE_CLBLAST
  if (lg->dtype != FP_F32 && lg->dtype != FP_F16)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "CLBlast has no %s GEMM",
                        fp_dtype_name(lg->dtype));
  const fp_dtype out = fp_lib_gemm_out_dtype(lg);
  if (out != lg->dtype)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "CLBlast writes a %s GEMM's output as %s, not %s (no mixed-type GEMM)",
                        fp_dtype_name(lg->dtype), fp_dtype_name(lg->dtype), fp_dtype_name(out));
  fp_status st = prepare(ctx, g, env, lg->dtype);
  if (st != FP_OK)
    return st;
  return clblast_run(ctx, env, lg, (cl_mem)a, (cl_mem)b, (cl_mem)d);
#else
  (void)g;
  (void)env;
  (void)a;
  (void)b;
  (void)d;
  return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                      "no %s GEMM library: fuseport was built without CLBlast",
                      fp_dtype_name(lg->dtype));
#endif
}
