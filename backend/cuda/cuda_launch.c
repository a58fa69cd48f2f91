/* fuseport CUDA backend: its kernels. A family's module is loaded on its
 * first kernel_prepare (the time that takes is the family's "compile" time);
 * a launch is checked against its kernel's geometry convention (kernels.def)
 * and then goes out on the context's stream: the planned families (GEMM,
 * convolutions, attention) through their own planners, ROWS kernels through
 * the row planner (cuda_plan.h) with the builds' shared-memory opt-ins (the
 * long-row stage, the streaming rows, the cluster shares) and non-portable
 * clusters, fused elementwise kernels through the ELEM grid and lean-build
 * planning; then cudaLaunchKernel, or cudaLaunchKernelExC for a cluster.
 *
 * The context's state is cuda_state.h's; devices, contexts, buffers, events
 * and the libraries are in cuda_backend.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "backend_impl.h"
#include "cuda_attention.h"
#include "cuda_kernels.h"
#include "cuda_state.h"

/* The most arguments a kernel signature has (backend.c caps launches at 32). */
#define CUDA_MAX_KERNEL_ARGS 32
/* Dynamic shared memory a kernel gets without opting in. */
#define CUDA_DEFAULT_DYNAMIC_SHARED (48u * 1024u)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- kernels -------------------------------------------------------------- */

bool fp_cuda_kernel_available(fp_context *ctx, fp_kernel_id id) {
  return fp_cuda_state_of(ctx)->kernels[id] != NULL;
}

/* Asks for a kernel's attributes, which makes the runtime load its module
 * (CUDA loads modules lazily). */
static fp_status load_kernel(fp_context *ctx, const void *fn, const char *name, const char *build) {
  struct cudaFuncAttributes attr;
  cudaError_t err = cudaFuncGetAttributes(&attr, fn);
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    (void)cudaGetLastError();
    return fp_ctx_error(ctx, FP_ERR_BACKEND,
                        "cudaFuncGetAttributes(%s%s) failed: %s (%s): this build has no code "
                        "for %s; reconfigure with -DCMAKE_CUDA_ARCHITECTURES=%u%u",
                        name, build, cudaGetErrorString(err), cudaGetErrorName(err),
                        ctx->info.api_version, ctx->info.cc_major, ctx->info.cc_minor);
  }
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaFuncGetAttributes(%s%s)", name, build);
  return FP_OK;
}

/* The first call for a family loads each of its kernels (and their tuned
 * builds); the time that took is the family's "compile" time. */
fp_status fp_cuda_kernel_prepare(fp_context *ctx, fp_kernel_id id, double *compile_ms) {
  cuda_state *s = fp_cuda_state_of(ctx);
  fp_kernel_family family = fp_kernel_family_of(id);
  if (!s->family_loaded[family]) {
    fp_status st = fp_cuda_use_device(ctx);
    if (st != FP_OK)
      return st;
    double start = now_ms();
    if (family == FPF_gemm || family == FPF_conv ||
        family == FPF_attention) { /* every instantiation of every path */
      const void *stubs[1024];
      const int n = family == FPF_gemm   ? fp_cuda_gemm_stubs(stubs, 1024)
                    : family == FPF_conv ? fp_cuda_conv_stubs(stubs, 1024)
                                         : fp_cuda_attention_stubs(stubs, 1024);
      for (int k = 0; k < n; ++k) {
        char which[40];
        snprintf(which, sizeof which, " (%s instantiation %d)",
                 family == FPF_gemm   ? "GEMM"
                 : family == FPF_conv ? "conv"
                                      : "attention",
                 k);
        st = load_kernel(ctx, stubs[k], fp_kernel_family_name(family), which);
        if (st != FP_OK)
          return st;
      }
    }
    for (int k = 0; k < FPK_COUNT; ++k) {
      if (fp_kernel_family_of((fp_kernel_id)k) != family || s->kernels[k] == NULL ||
          family == FPF_gemm || fp_cuda_conv_is_planned((fp_kernel_id)k) ||
          fp_cuda_attention_is_planned((fp_kernel_id)k))
        continue;
      const char *name = fp_kernel_name((fp_kernel_id)k);
      st = load_kernel(ctx, s->kernels[k], name, "");
      for (int b = 0; st == FP_OK && b < FP_CUDA_MAX_BUILDS; ++b)
        if (s->tuning[k].builds[b] != NULL)
          st = load_kernel(ctx, s->tuning[k].builds[b], name, s->tuning[k].names[b]);
      if (st != FP_OK)
        return st;
    }
    s->family_load_ms[family] = now_ms() - start;
    s->family_loaded[family] = true;
  }
  *compile_ms = s->family_load_ms[family];
  return FP_OK;
}

/* The geometry conventions of kernels.def the kernels are written for. */
typedef enum cuda_geometry {
  GEOMETRY_ELEM,
  GEOMETRY_ROWS,
  GEOMETRY_TEAMS,
  GEOMETRY_TILE,
  GEOMETRY_UNCHECKED
} cuda_geometry;

static cuda_geometry kernel_geometry(fp_kernel_id id) {
  switch (id) {
  case FPK_fill_uniform_f32:
  case FPK_prim_unary:
  case FPK_prim_binary:
  case FPK_prim_dropout:
  case FPK_fill_uniform_f16:
  case FPK_fill_uniform_bf16:
  case FPK_fill_bits_u32:
  case FPK_fill_bits_u8:
  case FPK_prim_unary_f16:
  case FPK_prim_unary_bf16:
  case FPK_prim_binary_f16:
  case FPK_prim_binary_bf16:
  case FPK_prim_pad_rows_f16:
  case FPK_prim_pad_rows_bf16:
  case FPK_pointwise_chain_fused:
  case FPK_bias_gelu_fused:
  case FPK_bias_dropout_add_fused:
  case FPK_relu_pack:
  case FPK_relu_unpack_backward:
  case FPK_cmp_group_scale:
  case FPK_cmp_quantize:
  case FPK_cmp_pack_codes:
  case FPK_cmp_unpack_codes:
  case FPK_cmp_dequantize:
  case FPK_cmp_to_bf16:
  case FPK_cmp_gt_zero:
  case FPK_cmp_pack_bits:
  case FPK_cmp_unpack_bits:
  case FPK_cmp_mul_mask:
  case FPK_attention_combine_f32:
  case FPK_attention_combine_f16:
  case FPK_attention_combine_bf16:
    return GEOMETRY_ELEM;
  case FPK_prim_reduce_rows:
  case FPK_softmax_fused:
  case FPK_double_softmax_fused:
  case FPK_softmax_backward_fused:
  case FPK_layernorm_fused:
  case FPK_norm_chain_fused:
  case FPK_hreduce_pointwise_fused:
  case FPK_hreduce_reduce_fused:
  case FPK_attn_softmax_f32:
  case FPK_attn_softmax_f16:
  case FPK_attn_softmax_bf16:
    return GEOMETRY_ROWS;
  case FPK_quant_pack:
  case FPK_dequant_unpack:
  case FPK_cmp_group_reduce:
    return GEOMETRY_TEAMS;
  case FPK_bias_dropout_add_fused_t:
    return GEOMETRY_TILE;
  default:
    return GEOMETRY_UNCHECKED;
  }
}

/* Whether dimensions from `first` on are absent or a single item. */
static bool trivial_from(const fp_ndrange *nd, uint32_t first) {
  for (uint32_t d = first; d < nd->dims; ++d)
    if (nd->global[d] != 1 || nd->local[d] != 1)
      return false;
  return true;
}

/* A launch outside a kernel's convention would compute garbage (a ROWS
 * kernel's block reduction needs whole warps, the tile kernel is written for
 * 32x8 blocks, a second dimension would run an ELEM kernel twice): refuse it
 * with a clear message instead. */
static fp_status check_geometry(fp_context *ctx, fp_kernel_id id, const fp_ndrange *nd) {
  const char *name = fp_kernel_name(id);
  switch (kernel_geometry(id)) {
  case GEOMETRY_ELEM:
    if (!trivial_from(nd, 1))
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "launch of '%s': an ELEM kernel takes a 1-D range", name);
    break;
  case GEOMETRY_ROWS: {
    uint32_t L = nd->local[0];
    if (!trivial_from(nd, 1))
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "launch of '%s': a ROWS kernel takes a 1-D range", name);
    if (L < 32 || L > 1024 || (L & (L - 1)) != 0)
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "launch of '%s': a ROWS kernel needs a local size that is a power of "
                          "two in [32, 1024], not %u",
                          name, L);
    break;
  }
  case GEOMETRY_TEAMS: { /* the kernels' shuffles need whole warps */
    uint32_t L = nd->local[0];
    if (!trivial_from(nd, 1))
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "launch of '%s': a TEAMS kernel takes a 1-D range", name);
    if (L < 32 || L > 1024 || L % 32 != 0)
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "launch of '%s': a TEAMS kernel needs a local size that is a multiple "
                          "of 32 in [32, 1024], not %u",
                          name, L);
    break;
  }
  case GEOMETRY_TILE:
    if (nd->dims < 2 || nd->local[0] != 32 || nd->local[1] != 8 || !trivial_from(nd, 2))
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "launch of '%s': a TILE kernel takes a 2-D range with local size "
                          "(32, 8)",
                          name);
    break;
  case GEOMETRY_UNCHECKED:
    break;
  }
  return FP_OK;
}

/* The logical [M, N] of a fused elementwise kernel's launch, its operands
 * (output first; at most 4) and whether its dropout path runs; false for
 * any other kernel. */
static bool elem_operands(fp_kernel_id id, const fp_karg *args, int nargs, int64_t *M, int64_t *N,
                          fp_elem_operand operands[4], int *count, bool *training) {
  *training = false;
  for (int a = 0; a < nargs && a < 4; ++a)
    operands[a].address = fp_arg_kind_is_buffer(args[a].kind)
                              ? (uint64_t)(uintptr_t)args[a].v.handle
                              : 1u; /* misaligned */
  switch (id) {
  case FPK_pointwise_chain_fused: /* (out, x, n): [1, n] */
    if (nargs != 3 || args[2].kind != FP_ARG_I64)
      return false;
    *M = 1;
    *N = args[2].v.i64;
    *count = 2;
    for (int k = 0; k < 2; ++k) {
      operands[k].s0 = *N;
      operands[k].s1 = 1;
    }
    return true;
  case FPK_bias_gelu_fused: /* (out, inp, bias, M, N) */
    if (nargs != 5 || args[3].kind != FP_ARG_I64 || args[4].kind != FP_ARG_I64)
      return false;
    *M = args[3].v.i64;
    *N = args[4].v.i64;
    *count = 3;
    operands[0].s0 = operands[1].s0 = *N;
    operands[2].s0 = 0;
    operands[0].s1 = operands[1].s1 = operands[2].s1 = 1;
    return true;
  case FPK_bias_dropout_add_fused: /* (out, inp, bias, res, M, N, sb0, sb1, sr0, sr1, so0, so1,
                                      p, scale, seed, training) */
    if (nargs != 16 || args[15].kind != FP_ARG_I32)
      return false;
    for (int a = 4; a < 12; ++a)
      if (args[a].kind != FP_ARG_I64)
        return false;
    *M = args[4].v.i64;
    *N = args[5].v.i64;
    *count = 4;
    operands[0].s0 = args[10].v.i64; /* out */
    operands[0].s1 = args[11].v.i64;
    operands[1].s0 = *N; /* inp, row-major */
    operands[1].s1 = 1;
    operands[2].s0 = args[6].v.i64; /* bias */
    operands[2].s1 = args[7].v.i64;
    operands[3].s0 = args[8].v.i64; /* res */
    operands[3].s1 = args[9].v.i64;
    *training = args[15].v.i32 != 0;
    return true;
  default:
    return false;
  }
}

/* Lets a build of a kernel have all the dynamic shared memory the device
 * allows a block beside its static shared memory, and stores that limit in
 * *limit (at least 1, so that 0 can mean "not asked yet"). */
static fp_status opt_in_dynamic_smem(fp_context *ctx, const void *kernel, const char *name,
                                     const char *build, size_t *limit) {
  const cuda_state *s = fp_cuda_state_of(ctx);
  struct cudaFuncAttributes attr;
  cudaError_t err = cudaFuncGetAttributes(&attr, kernel);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaFuncGetAttributes(%s (%s))", name, build);
  const size_t bytes =
      attr.sharedSizeBytes < s->smem_optin ? s->smem_optin - attr.sharedSizeBytes : 1;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err,
                        "cudaFuncSetAttribute(%s (%s), max dynamic shared memory %zu bytes)", name,
                        build, bytes);
  *limit = bytes;
  return FP_OK;
}

/* Whether a LONG_ROWS plan of kernel id stages its next row (cuda_plan.h),
 * and if so its dynamic shared memory and persistent grid: *shared_bytes
 * and plan->grid. The occupancy answers are cached per kernel and block
 * size. */
static fp_status plan_stage(fp_context *ctx, fp_kernel_id id, const void *kernel, int64_t N,
                            fp_rows_plan *plan, size_t *shared_bytes, bool *staged) {
  cuda_state *s = fp_cuda_state_of(ctx);
  const char *name = fp_kernel_name(id);
  *staged = false;
  const uint64_t bytes = fp_cuda_stage_bytes(&s->tuning[id].offer, plan, N);
  if (!s->row_stage || bytes == 0 || bytes > s->smem_optin)
    return FP_OK;
  int log2_block = 0;
  while (log2_block < 10 && (1u << log2_block) < plan->block)
    ++log2_block;
  if ((1u << log2_block) != plan->block)
    return FP_OK; /* the planner's blocks are powers of two */
  unsigned char *resident = s->stage_resident[id][log2_block];
  cudaError_t err;
  if (s->stage_limit[id] == 0) {
    fp_status st = opt_in_dynamic_smem(ctx, kernel, name, "long-row build", &s->stage_limit[id]);
    if (st != FP_OK)
      return st;
  }
  if (bytes > s->stage_limit[id])
    return FP_OK;
  if (resident[0] == 0) {
    int with = 0, without = 0;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&with, kernel, (int)plan->block,
                                                        (size_t)bytes);
    if (err == cudaSuccess)
      err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&without, kernel, (int)plan->block, 0);
    if (err != cudaSuccess)
      return fp_cuda_fail(ctx, err,
                          "cudaOccupancyMaxActiveBlocksPerMultiprocessor(%s (long-row build), "
                          "block %u, %llu bytes of shared memory)",
                          name, plan->block, (unsigned long long)bytes);
    resident[0] = (unsigned char)(with < 254 ? with + 1 : 255);
    resident[1] = (unsigned char)(without < 254 ? without + 1 : 255);
  }
  if (fp_cuda_plan_stage(plan, resident[0] - 1, resident[1] - 1, s->sm_count)) {
    *shared_bytes = (size_t)bytes;
    *staged = true;
  }
  return FP_OK;
}

/* The dynamic shared memory a STREAM plan of kernel id keeps its rows in
 * (cuda_plan.h), its attribute set on first use: *shared_bytes, and
 * *attribute_set when nonzero. */
static fp_status plan_stream_smem(fp_context *ctx, fp_kernel_id id, const void *kernel,
                                  const fp_rows_plan *plan, int64_t N, size_t *shared_bytes,
                                  bool *attribute_set) {
  cuda_state *s = fp_cuda_state_of(ctx);
  if (s->stream_smem == 0 || s->tuning[id].offer.stream_smem_min_n <= 0)
    return FP_OK;
  if (s->stream_smem_limit[id] == 0) {
    fp_status st = opt_in_dynamic_smem(ctx, kernel, fp_kernel_name(id), "streaming build",
                                       &s->stream_smem_limit[id]);
    if (st != FP_OK)
      return st;
  }
  *shared_bytes = (size_t)fp_cuda_stream_smem_bytes(&s->tuning[id].offer, plan, N,
                                                    (uint64_t)s->stream_smem_limit[id],
                                                    s->stream_smem == 2, s->sm_count);
  *attribute_set = *shared_bytes > 0;
  return FP_OK;
}

/* The GEMM family, the convolutions and attention plan their own launches
 * (kernels/cu/gemm.cu, kernels/cu/conv.cu, kernels/cu/attention.cu). */
static fp_status launch_gemm(fp_context *ctx, fp_kernel_id id, const fp_karg *args, int nargs) {
  cuda_state *s = fp_cuda_state_of(ctx);
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  fp_cuda_gemm_env env;
  env.cc_major = s->cc_major;
  env.cc_minor = s->cc_minor;
  env.sm_count = s->sm_count;
  env.smem_optin = (uint64_t)s->smem_optin;
  env.force_path = s->gemm_force_path;
  env.conv_gemm = s->conv_gemm;
  env.conv_cfg = s->conv_cfg;
  env.stream = s->stream;
  char msg[512];
  int launched = 0;
  cudaError_t err =
      fp_cuda_conv_is_planned(id)
          ? fp_cuda_conv_launch(id, args, nargs, &env, &launched, msg, sizeof msg)
      : fp_cuda_attention_is_planned(id)
          ? fp_cuda_attention_launch(id, args, nargs, &env, &launched, msg, sizeof msg)
          : fp_cuda_gemm_launch(id, args, nargs, &env, &launched, msg, sizeof msg);
  if (err == cudaSuccess)
    err = cudaGetLastError();
  if (err == cudaErrorNotSupported)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "launch of '%s': %s", fp_kernel_name(id), msg);
  if (err == cudaErrorInvalidValue && msg[0] != '\0')
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "launch of '%s': %s", fp_kernel_name(id),
                        msg);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "launch of '%s' (%s)", fp_kernel_name(id), msg);
  return FP_OK;
}

fp_status fp_cuda_launch(fp_context *ctx, fp_kernel_id id, const fp_ndrange *nd,
                         const fp_karg *args, int nargs) {
  cuda_state *s = fp_cuda_state_of(ctx);
  const char *name = fp_kernel_name(id);
  if (fp_kernel_family_of(id) == FPF_gemm || fp_cuda_conv_is_planned(id) ||
      fp_cuda_attention_is_planned(id))
    return launch_gemm(ctx, id, args, nargs);

  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  for (uint32_t d = 0; d < nd->dims; ++d) {
    uint64_t groups = nd->global[d] / nd->local[d];
    if (groups > (uint64_t)s->max_grid_dim[d])
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "launch of '%s': %llu groups in dimension %u exceed the CUDA grid "
                          "limit of %d",
                          name, (unsigned long long)groups, d, s->max_grid_dim[d]);
    if (nd->local[d] > (uint32_t)s->max_block_dim[d])
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "launch of '%s': local size %u in dimension %u exceeds the CUDA block "
                          "limit of %d",
                          name, nd->local[d], d, s->max_block_dim[d]);
    grid[d] = (unsigned)groups;
    block[d] = nd->local[d];
  }
  fp_status st = check_geometry(ctx, id, nd);
  if (st != FP_OK)
    return st;

  /* cudaLaunchKernel takes a pointer to each parameter's value; the union
   * member of each kind starts at the union's address and has the size of
   * the kernel's parameter (pointer, int, unsigned, long long, float). */
  if (nargs > CUDA_MAX_KERNEL_ARGS)
    return fp_ctx_error(ctx, FP_ERR_INTERNAL, "launch of '%s': %d arguments (at most %d)", name,
                        nargs, CUDA_MAX_KERNEL_ARGS);
  fp_karg values[CUDA_MAX_KERNEL_ARGS];
  void *params[CUDA_MAX_KERNEL_ARGS];
  int nparams = 0;
  size_t shared_bytes = 0;
  for (int a = 0; a < nargs; ++a) {
    if (args[a].kind == FP_ARG_LOCAL) {
      shared_bytes = (size_t)args[a].v.local_bytes;
      continue;
    }
    values[nparams] = args[a];
    params[nparams] = &values[nparams].v;
    ++nparams;
  }

  /* the device first: the stage's planning asks it about the kernel */
  st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;

  /* The registered build in the host's geometry, unless the planner picks
   * another build of a ROWS kernel (cuda_plan.h). */
  const fp_cuda_tuning *tuning = &s->tuning[id];
  const void *kernel = s->kernels[id];
  const char *build = "";
  unsigned cluster = 1;
  /* the long-row build's stage or the streaming build's rows in shared
   * memory, with the kernel's attribute set */
  bool staged = false;
  if (tuning->rows && nd->dims == 1 && shared_bytes == 0) {
    /* The cluster build's shared memory (its shares where its registers
     * cannot hold them): the attribute set once, and the offer told the
     * most it may have, before the first plan. */
    if (s->cluster_smem && !s->cluster_smem_asked[id] && s->cc_major >= 9 &&
        tuning->offer.cluster_smem_arrays > 0 && tuning->builds[FP_ROWS_CLUSTER] != NULL) {
      size_t limit = 0;
      st = opt_in_dynamic_smem(ctx, tuning->builds[FP_ROWS_CLUSTER], name, "cluster-per-row build",
                               &limit);
      if (st != FP_OK)
        return st;
      s->tuning[id].offer.cluster_smem_max = limit > 1 && limit <= UINT32_MAX ? (uint32_t)limit : 0;
      s->cluster_smem_asked[id] = true;
    }
    const unsigned host_block =
        s->rows_block_cap != 0 && block[0] > s->rows_block_cap ? s->rows_block_cap : block[0];
    fp_rows_plan plan = fp_cuda_plan_rows(s->row_policy, &tuning->offer, args[tuning->arg_m].v.i64,
                                          args[tuning->arg_n].v.i64, grid[0], host_block,
                                          s->cc_major, s->sm_count, s->max_cluster);
    /* A cluster over the portable size needs the kernel's permission,
     * asked once; a device that refuses it gets the portable plan. */
    if (plan.build == FP_ROWS_CLUSTER && plan.cluster > 8 && !s->nonportable_cluster[id]) {
      cudaError_t err = cudaFuncSetAttribute(tuning->builds[FP_ROWS_CLUSTER],
                                             cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
      if (err == cudaSuccess) {
        s->nonportable_cluster[id] = true;
      } else {
        (void)cudaGetLastError();
        s->max_cluster = 8;
        plan = fp_cuda_plan_rows(s->row_policy, &tuning->offer, args[tuning->arg_m].v.i64,
                                 args[tuning->arg_n].v.i64, grid[0], host_block, s->cc_major,
                                 s->sm_count, s->max_cluster);
      }
    }
    if (plan.build != FP_ROWS_REGISTERED) {
      kernel = tuning->builds[plan.build];
      build = tuning->names[plan.build];
    }
    if (kernel == NULL || plan.block == 0 || plan.block > (unsigned)s->max_block_dim[0] ||
        plan.grid == 0 || plan.grid > (unsigned)s->max_grid_dim[0] || plan.cluster == 0 ||
        plan.grid % plan.cluster != 0)
      return fp_ctx_error(ctx, FP_ERR_INTERNAL,
                          "launch of '%s': the planner chose an impossible launch%s (grid %u, "
                          "block %u, cluster %u)",
                          name, build, plan.grid, plan.block, plan.cluster);
    if (plan.build == FP_ROWS_LONG) {
      st = plan_stage(ctx, id, kernel, args[tuning->arg_n].v.i64, &plan, &shared_bytes, &staged);
      if (st != FP_OK)
        return st;
    } else if (plan.build == FP_ROWS_STREAM) {
      st = plan_stream_smem(ctx, id, kernel, &plan, args[tuning->arg_n].v.i64, &shared_bytes,
                            &staged);
      if (st != FP_OK)
        return st;
    } else if (plan.build == FP_ROWS_CLUSTER) {
      /* within the limit the attribute was set to (the planner kept to it) */
      shared_bytes =
          (size_t)fp_cuda_cluster_smem_bytes(&tuning->offer, &plan, args[tuning->arg_n].v.i64);
      staged = shared_bytes > 0;
    }
    grid[0] = plan.grid;
    block[0] = plan.block;
    cluster = plan.cluster;
  }

  int64_t elem_m = 0, elem_n = 0;
  fp_elem_operand operands[4];
  int n_operands = 0;
  bool training = false;
  if (elem_operands(id, args, nargs, &elem_m, &elem_n, operands, &n_operands, &training)) {
    if (s->elem_grid.kind != FP_ELEM_GRID_HOST)
      grid[0] = fp_cuda_plan_elem(s->elem_grid, elem_m * elem_n, id == FPK_bias_dropout_add_fused,
                                  grid[0], block[0], s->sm_count, (uint32_t)s->max_grid_dim[0]);
    /* the first lean build (fp_elem_build order) that the kernel has and
     * that fits these arguments in this grid */
    const unsigned fit = s->elem_lean
                             ? fp_cuda_plan_elem_builds(elem_m, elem_n, operands, n_operands,
                                                        training, (uint64_t)grid[0] * block[0])
                             : 0u;
    for (int b = 0; b < FP_ELEM_BUILD_COUNT; ++b) {
      if ((fit >> b & 1u) && tuning->builds[b] != NULL) {
        kernel = tuning->builds[b];
        build = tuning->names[b];
        grid[0] = fp_cuda_plan_elem_lean_grid(
            grid[0], elem_m * elem_n,
            id == FPK_bias_dropout_add_fused ? FP_ELEM_UNROLL_THREE_STREAMS : FP_ELEM_UNROLL,
            block[0]);
        break;
      }
    }
  }

  cudaError_t err;
  if (shared_bytes > CUDA_DEFAULT_DYNAMIC_SHARED && !staged) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)shared_bytes);
    if (err != cudaSuccess)
      return fp_cuda_fail(ctx, err, "cudaFuncSetAttribute(%s, max dynamic shared memory %zu bytes)",
                          name, shared_bytes);
  }
  dim3 grid_dim, block_dim;
  grid_dim.x = grid[0];
  grid_dim.y = grid[1];
  grid_dim.z = grid[2];
  block_dim.x = block[0];
  block_dim.y = block[1];
  block_dim.z = block[2];
  if (cluster > 1) {
    cudaLaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = cluster;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t config;
    memset(&config, 0, sizeof config);
    config.gridDim = grid_dim;
    config.blockDim = block_dim;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = s->stream;
    config.attrs = &attr;
    config.numAttrs = 1;
    err = cudaLaunchKernelExC(&config, kernel, params);
    if (err == cudaSuccess)
      err = cudaGetLastError();
    if (err == cudaSuccess)
      return FP_OK;
    /* A device that cannot place such a cluster (a partitioned GPU with
     * small GPCs) still runs the kernel: a non-portable size is planned
     * again at the portable one, from then on; otherwise the registered
     * build computes the same result in the host's geometry. Any other
     * error is reported. */
    if (err != cudaErrorInvalidClusterSize && err != cudaErrorLaunchOutOfResources)
      return fp_cuda_fail(ctx, err,
                          "cudaLaunchKernelExC(%s%s, grid %u, block %u, cluster %u, %zu bytes of "
                          "shared memory)",
                          name, build, grid[0], block[0], cluster, shared_bytes);
    (void)cudaGetLastError();
    if (cluster > 8 && s->max_cluster > 8) {
      s->max_cluster = 8;
      return fp_cuda_launch(ctx, id, nd, args, nargs);
    }
    kernel = s->kernels[id];
    build = "";
    grid_dim.x = grid[0] = (unsigned)(nd->global[0] / nd->local[0]);
    block_dim.x = block[0] = nd->local[0];
    shared_bytes = 0; /* the cluster's shares; the registered build streams */
  }
  err = cudaLaunchKernel(kernel, grid_dim, block_dim, params, shared_bytes, s->stream);
  if (err == cudaSuccess)
    err = cudaGetLastError();
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err,
                        "cudaLaunchKernel(%s%s, grid %ux%ux%u, block %ux%ux%u, %zu bytes of "
                        "shared memory)",
                        name, build, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                        shared_bytes);
  return FP_OK;
}
