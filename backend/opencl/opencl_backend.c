/* fuseport OpenCL backend: one device of one platform, through the OpenCL 1.2
 * host API and the ICD loader (PoCL on a CPU; NVIDIA, AMD, Intel GPUs).
 *
 * - One context and one in-order command queue with profiling enabled per
 *   fuseport context. A context is meant for one thread at a time; nothing in
 *   here is global except constant tables.
 * - Device code: one OpenCL program per kernel family (kernels/cl/<family>.cl
 *   and any <family>_*.cl after it, CMakeLists.txt's FP_CL_MORE_<family>,
 *   with fp_device_common.h and common.cl in front, embedded at build time as
 *   fp_cl_source_<family>), built lazily the first time a kernel of the
 *   family is asked for, then cached with one cl_kernel per kernel id.
 * - Buffers are cl_mem objects; transfers are blocking, fills, copies and
 *   kernels are enqueued.
 * - Events are markers whose completion timestamps give the time between two
 *   records; where a platform cannot time markers, records fall back to
 *   clFinish plus the host's monotonic clock (opencl_events.c).
 *
 * This file holds the ops table and the launch; the other pieces are listed
 * in opencl_internal.h, which holds what they share.
 *
 * The shared layer (backend.c) has validated every argument before a call
 * lands here; these files only talk to OpenCL and turn its error codes into
 * fp_status values with messages that name the call, the error and the
 * kernel or size involved.
 *
 * Environment (diagnostics and tuning, never needed):
 *   FUSEPORT_OPENCL_BUILD_OPTIONS  appended to the options of every program
 *                                  build (e.g. -DFP_ROW_VEC=2, or
 *                                  -cl-nv-verbose on NVIDIA for registers
 *                                  and spills)
 *   FUSEPORT_OPENCL_BUILD_LOG=FILE appends the options and the build log of
 *                                  every program built, failed or not, to
 *                                  FILE (with -cl-nv-verbose: ptxas's
 *                                  register and spill report per kernel)
 *   FUSEPORT_OPENCL_HOST_TIMING=1  time events with the host clock even where
 *                                  marker profiling works
 *   FUSEPORT_OPENCL_HOST_GEOMETRY=1  launch the ROWS kernels with the host's
 *                                  geometry instead of plan_rows' (to check
 *                                  that the kernels are right for any L)
 *   FUSEPORT_OPENCL_ROW_VEC=K      float4 per work-item in the row cache of
 *                                  reduce.cl (1..8, default 4): sets
 *                                  FP_ROW_VEC in the build and in plan_rows
 *   FUSEPORT_OPENCL_ROWS_MAX_GROUP=L  largest team of a row kernel whose
 *                                  rows fit the cache (4..1024, a power of
 *                                  two; default: plan_rows' rule): longer
 *                                  rows stream (4: all but rows of at most
 *                                  4 * 4 * FP_ROW_VEC floats)
 *   FUSEPORT_OPENCL_STREAM_GROUP=L the group of a row kernel whose rows
 *                                  stream (32..1024, a power of two;
 *                                  default: plan_rows' rule)
 *   FUSEPORT_OPENCL_ROW_VARIANTS=0 launch the generic row kernels (both
 *                                  paths in one) instead of their _cached,
 *                                  _stream and _local specialisations
 *   FUSEPORT_OPENCL_ROW_LOCAL=0|1  whether streamed rows of 6148 to 8195
 *                                  floats, one per group, go through the
 *                                  local-memory row cache of the _local
 *                                  kernels of softmax and norm_chain (and
 *                                  rows of 32768 or more through that of
 *                                  _local_back, the first 10240 floats)
 *                                  (default 1; 0: _stream re-reads them,
 *                                  for timing)
 *   FUSEPORT_OPENCL_STREAM_BACK=0|1  whether streamed rows of at least
 *                                  FP_CL_STREAM_BACK_MIN_N floats take the
 *                                  _stream_back and _local_back kernels,
 *                                  which write each work-item's vectors
 *                                  last first (default 1; 0: _stream, for
 *                                  timing)
 *   FUSEPORT_OPENCL_PTX=0|1|2      the L2 cache hints of the kernels on
 *                                  NVIDIA (inline PTX, kernels/cl/common.cl):
 *                                  0 none, 1 evict-first loads, 2 also
 *                                  evict_last (sm_80+). Default: the most
 *                                  the device takes, and none if its driver
 *                                  rejects them; set, a build that fails
 *                                  with them is an error. Other devices
 *                                  build without them whatever it says
 *   FUSEPORT_OPENCL_OCLGRIND=0|1   what Oclgrind's --uninitialized check
 *                                  needs (opencl_oclgrind.h): fills, copies
 *                                  and partial writes through kernels, no
 *                                  first touch of new buffers, released
 *                                  buffers kept until the context ends.
 *                                  Default: on Oclgrind only
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <CL/cl.h>

#include "opencl_internal.h"

/* The argument positions of M and N of the planned kernels; false for every
 * other kernel (host geometry). */
bool ocl_rows_mn_args(fp_kernel_id id, int *m_arg, int *n_arg) {
  switch (id) {
  case FPK_softmax_fused:
  case FPK_double_softmax_fused:
  case FPK_norm_chain_fused:
    *m_arg = 2;
    break;
  case FPK_softmax_backward_fused:
  case FPK_hreduce_pointwise_fused:
  case FPK_hreduce_reduce_fused:
    *m_arg = 3;
    break;
  case FPK_layernorm_fused:
    *m_arg = 6;
    break;
  default:
    return false;
  }
  *n_arg = *m_arg + 1;
  return true;
}

/* The ROWS kernels' launch (opencl_rows.c): the planner's geometry and
 * kernel in place of the host's 1-D geometry and the generic kernel, for the
 * fused row kernels; any other kernel is left alone. An error where no
 * kernel of the op fits the device's local memory. */
static fp_status plan_rows(fp_context *ctx, const cl_state *cl, fp_kernel_id id,
                           const fp_ndrange *nd, const fp_karg *args, int nargs, size_t *global,
                           size_t *local, cl_kernel *kernel) {
  int m_arg = 0, n_arg = 0;
  if (!ocl_rows_mn_args(id, &m_arg, &n_arg))
    return FP_OK;
  ocl_rows_request rq;
  rq.kind = id == FPK_softmax_backward_fused ? OCL_ROWS_WIDE
            : id == FPK_layernorm_fused      ? OCL_ROWS_LAYERNORM
            : id == FPK_hreduce_pointwise_fused || id == FPK_hreduce_reduce_fused
                ? OCL_ROWS_HORIZONTAL
                : OCL_ROWS_PLAIN;
  /* arguments not as kernels.def says: the shared layer has checked them,
   * this is defence */
  rq.planned = nd->dims == 1 && n_arg < nargs && args[m_arg].kind == FP_ARG_I64 &&
               args[n_arg].kind == FP_ARG_I64;
  rq.M = rq.planned ? args[m_arg].v.i64 : 0;
  rq.N = rq.planned ? args[n_arg].v.i64 : 0;
  rq.global = *global;
  rq.local = *local;
  memcpy(rq.local_bytes, cl->row_local_bytes[id], sizeof rq.local_bytes);
  const ocl_rows_config cfg = {
      .max_group = ctx->info.max_group_size,
      .device_local = ctx->info.local_mem_bytes,
      .row_vec = cl->row_vec,
      .rows_max_group = cl->rows_max_group,
      .stream_group = cl->stream_group,
      .host_geometry = cl->host_geometry,
      .generic_rows = cl->generic_rows,
      .row_local = cl->row_local,
      .stream_back = cl->stream_back,
      .local_rows_fit = cl->local_rows_fit,
  };
  ocl_rows_launch plan;
  char why[512];
  if (!ocl_rows_plan(&cfg, &rq, &plan, why, sizeof why))
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "%s on '%s': %s", fp_kernel_name(id),
                        ctx->info.name, why);
  *global = plan.global;
  *local = plan.local;
  *kernel = plan.kernel == OCL_ROW_GENERIC ? cl->kernels[id] : cl->row_kernels[id][plan.kernel];
  return FP_OK;
}

/* The backend's pieces the GEMM code (opencl_gemm.c) works with. */
static ocl_gemm_env gemm_env(const cl_state *cl) {
  ocl_gemm_env env = {cl->context, cl->device, cl->queue, cl->families[FPF_gemm].program};
  return env;
}

static fp_status ocl_launch(fp_context *ctx, fp_kernel_id id, const fp_ndrange *nd,
                            const fp_karg *args, int nargs) {
  cl_state *cl = ocl_state_of(ctx);
  const char *kname = fp_kernel_name(id);
  fp_status st = ocl_require_family(ctx, cl, id);
  if (st != FP_OK)
    return st;
  cl_kernel kernel = cl->kernels[id];
  if (kernel == NULL)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "kernel '%s' is not in kernels/cl/%s.cl", kname,
                        fp_kernel_family_name(fp_kernel_family_of(id)));

  size_t global[3] = {1, 1, 1}, local[3] = {1, 1, 1};
  cl_uint dims = nd->dims;
  for (uint32_t d = 0; d < nd->dims; ++d) {
    global[d] = (size_t)nd->global[d];
    local[d] = nd->local[d];
  }
  if (ocl_gemm_is_planned(id)) {
    const ocl_gemm_env env = gemm_env(cl);
    st = ocl_gemm_plan(ctx, cl->gemm, &env, id, args, nargs, &kernel, &dims, global, local);
    if (st != FP_OK)
      return st;
  } else if (ocl_conv_is_planned(id)) {
    const ocl_conv_env env = {cl->context, cl->device, cl->queue, cl->families[FPF_conv].program};
    st = ocl_conv_plan(ctx, cl->conv, &env, id, args, nargs, &kernel, &dims, global, local);
    if (st != FP_OK)
      return st;
  } else if (ocl_attn_is_planned(id)) {
    const ocl_attn_env env = {cl->context, cl->device, cl->queue,
                              cl->families[FPF_attention].program};
    st = ocl_attn_plan(ctx, cl->attn, &env, id, args, nargs, &kernel, &dims, global, local);
    if (st != FP_OK)
      return st;
  } else {
    st = plan_rows(ctx, cl, id, nd, args, nargs, &global[0], &local[0], &kernel);
    if (st != FP_OK)
      return st;
  }
  for (int a = 0; a < nargs; ++a) {
    cl_int err = CL_SUCCESS;
    switch (args[a].kind) {
    case FP_ARG_BUFFER:
    case FP_ARG_BUF_F16:
    case FP_ARG_BUF_BF16:
    case FP_ARG_BUF_U32:
    case FP_ARG_BUF_U8: {
      cl_mem mem = (cl_mem)args[a].v.handle; /* NULL: an optional buffer passed as none */
      err = clSetKernelArg(kernel, (cl_uint)a, sizeof mem, &mem);
      break;
    }
    case FP_ARG_I32: {
      cl_int v = args[a].v.i32;
      err = clSetKernelArg(kernel, (cl_uint)a, sizeof v, &v);
      break;
    }
    case FP_ARG_U32: {
      cl_uint v = args[a].v.u32;
      err = clSetKernelArg(kernel, (cl_uint)a, sizeof v, &v);
      break;
    }
    case FP_ARG_I64: {
      cl_long v = args[a].v.i64;
      err = clSetKernelArg(kernel, (cl_uint)a, sizeof v, &v);
      break;
    }
    case FP_ARG_F32: {
      cl_float v = args[a].v.f32;
      err = clSetKernelArg(kernel, (cl_uint)a, sizeof v, &v);
      break;
    }
    case FP_ARG_LOCAL: {
      /* OpenCL rejects a local argument of 0 bytes; 0 means "none needed" */
      size_t bytes = args[a].v.local_bytes != 0 ? (size_t)args[a].v.local_bytes : 1;
      err = clSetKernelArg(kernel, (cl_uint)a, bytes, NULL);
      break;
    }
    }
    if (err != CL_SUCCESS)
      return ocl_fail(ctx, FP_ERR_BACKEND, err, "clSetKernelArg(%s, argument %d of kind '%c')",
                      kname, a, (char)args[a].kind);
  }
  cl_int err = clEnqueueNDRangeKernel(cl->queue, kernel, dims, NULL, global, local, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    /* CL_KERNEL_WORK_GROUP_SIZE is only a hint in the message, not checked
     * up front: NVIDIA's driver (580, CUDA 13) reports 256 for every kernel,
     * even an empty one, yet runs groups of 1024. */
    char hint[128] = "";
    if (err == CL_INVALID_WORK_GROUP_SIZE || err == CL_OUT_OF_RESOURCES)
      snprintf(hint, sizeof hint, " (the driver reports CL_KERNEL_WORK_GROUP_SIZE %zu)",
               cl->kernel_group_limit[id]);
    return ocl_fail(ctx, ocl_status_of(err), err,
                    "clEnqueueNDRangeKernel(%s, global %zux%zux%zu, local %zux%zux%zu)%s", kname,
                    global[0], global[1], global[2], local[0], local[1], local[2], hint);
  }
  return FP_OK;
}

/* ---- the GEMM library (opencl_gemm.c) ------------------------------------------------------ */

static fp_status ocl_library_gemm(fp_context *ctx, const fp_lib_gemm *g, void *a, void *b, void *c,
                                  void *d, void *bias, void *ws, uint64_t ws_bytes) {
  cl_state *cl = ocl_state_of(ctx);
  const ocl_gemm_env env = gemm_env(cl);
  return ocl_gemm_library(ctx, cl->gemm, &env, g, a, b, c, d, bias, ws, ws_bytes);
}

static fp_status ocl_library_prepare(fp_context *ctx, fp_dtype dtype, double *compile_ms) {
  cl_state *cl = ocl_state_of(ctx);
  const ocl_gemm_env env = gemm_env(cl);
  return ocl_gemm_library_prepare(ctx, cl->gemm, &env, dtype, compile_ms);
}

const fp_backend_ops fp_opencl_backend_ops = {
    .kind = FP_BACKEND_OPENCL,
    .device_count = ocl_device_count,
    .init = ocl_init,
    .shutdown = ocl_shutdown,
    .alloc = ocl_alloc,
    .release = ocl_release,
    .write = ocl_write,
    .read = ocl_read,
    .fill = ocl_fill,
    .copy = ocl_copy,
    .finish = ocl_finish,
    .event_create = ocl_event_create,
    .event_destroy = ocl_event_destroy,
    .event_record = ocl_event_record,
    .event_synchronize = ocl_event_synchronize,
    .event_elapsed_ms = ocl_event_elapsed_ms,
    .kernel_available = ocl_kernel_available,
    .kernel_prepare = ocl_kernel_prepare,
    .launch = ocl_launch,
    .library_gemm = ocl_library_gemm,
    .library_prepare = ocl_library_prepare,
};
