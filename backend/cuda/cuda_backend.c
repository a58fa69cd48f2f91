/* fuseport CUDA backend: one device, one non-blocking stream.
 *
 * Buffers are cudaMalloc allocations; transfers, fills and copies are
 * enqueued on the context's stream (host transfers then wait for it, being
 * blocking by contract), events are CUDA events on that stream, and kernels
 * are the __global__ functions of kernels/cu/<family>.cu, registered by
 * kernel id (cuda_kernels.h) and launched with cudaLaunchKernel.
 *
 * Every CUDA call is checked; a failure becomes FP_ERR_OUT_OF_MEMORY for
 * cudaErrorMemoryAllocation, FP_ERR_BACKEND otherwise, with the call and the
 * runtime's error string and name in the message. Each entry point first
 * makes the context's device current, so that contexts on several devices
 * can be used from one thread.
 *
 * This file holds the devices and contexts (device choice, the timing knobs
 * of the environment, the context's lifecycle), the buffers, the queue and
 * events, the GEMM and convolution libraries and the ops table; the kernels
 * (loading and launch, with the ROWS and ELEM planning glue) are in
 * cuda_launch.c, the state both share in cuda_state.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_api.h> /* cublasGetProperty */
#include <cuda_runtime_api.h>

#include "backend_impl.h"
#include "cuda_blas.h"
#include "cuda_dnn.h"
#include "cuda_kernels.h"
#include "cuda_state.h"
#include "gemm_plan.h"

/* ---- the helpers cuda_launch.c shares (cuda_state.h) ------------------------ */

fp_status fp_cuda_fail(fp_context *ctx, cudaError_t err, const char *fmt, ...) {
  char call[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(call, sizeof call, fmt, ap);
  va_end(ap);
  (void)cudaGetLastError();
  fp_status status = err == cudaErrorMemoryAllocation ? FP_ERR_OUT_OF_MEMORY : FP_ERR_BACKEND;
  return fp_ctx_error(ctx, status, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                      cudaGetErrorName(err));
}

fp_status fp_cuda_use_device(fp_context *ctx) {
  const cuda_state *s = fp_cuda_state_of(ctx);
  cudaError_t err = cudaSetDevice(s->device);
  return err == cudaSuccess ? FP_OK : fp_cuda_fail(ctx, err, "cudaSetDevice(%d)", s->device);
}

/* For entry points that cannot report: make the device current and drop any
 * error. */
static void use_device_quietly(fp_context *ctx) {
  if (cudaSetDevice(fp_cuda_state_of(ctx)->device) != cudaSuccess)
    (void)cudaGetLastError();
}

/* ---- devices and contexts -------------------------------------------------- */

static int cuda_device_count(const char *platform) {
  (void)platform; /* OpenCL only */
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) { /* no driver, no device, ... */
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

/* "13.0" from 13000. */
static void format_cuda_version(char *dst, size_t len, const char *prefix, int version) {
  snprintf(dst, len, "%s%d.%d", prefix, version / 1000, (version % 1000) / 10);
}

/* Picks the device opts asks for (index, name substring); on failure the
 * message lists the devices there are. */
static fp_status choose_device(fp_context *ctx, const fp_context_options *opts, int *device,
                               struct cudaDeviceProp *prop) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fp_ctx_error(ctx, FP_ERR_NOT_FOUND,
                        "no CUDA device: cudaGetDeviceCount() failed: %s (%s)",
                        cudaGetErrorString(err), cudaGetErrorName(err));
  }
  if (count <= 0)
    return fp_ctx_error(ctx, FP_ERR_NOT_FOUND, "no CUDA device: cudaGetDeviceCount() found none");

  char list[2048] = "";
  size_t used = 0;
  int chosen = -1;
  for (int d = 0; d < count; ++d) {
    struct cudaDeviceProp p;
    err = cudaGetDeviceProperties(&p, d);
    if (err != cudaSuccess)
      return fp_cuda_fail(ctx, err, "cudaGetDeviceProperties(device %d)", d);
    if (used < sizeof list) {
      int n = snprintf(list + used, sizeof list - used, "%s%d: %s (sm_%d%d)", d > 0 ? ", " : "", d,
                       p.name, p.major, p.minor);
      used += n > 0 ? (size_t)n : 0;
    }
    bool index_ok = opts->device_index < 0 || opts->device_index == d;
    bool name_ok = opts->device_name == NULL || strstr(p.name, opts->device_name) != NULL;
    if (chosen < 0 && index_ok && name_ok) {
      chosen = d;
      *prop = p;
    }
  }
  if (chosen >= 0) {
    *device = chosen;
    return FP_OK;
  }
  if (opts->device_index >= count)
    return fp_ctx_error(ctx, FP_ERR_NOT_FOUND,
                        "CUDA device index %d does not exist; the devices are %s",
                        opts->device_index, list);
  if (opts->device_index >= 0)
    return fp_ctx_error(ctx, FP_ERR_NOT_FOUND,
                        "CUDA device %d does not match the name '%s'; the devices are %s",
                        opts->device_index, opts->device_name, list);
  return fp_ctx_error(ctx, FP_ERR_NOT_FOUND,
                      "no CUDA device matches the name '%s'; the devices are %s", opts->device_name,
                      list);
}

/* A timing knob that is 1 (the default, also when unset or empty) or 0. */
static fp_status env_switch(fp_context *ctx, const char *name, bool *value) {
  const char *v = getenv(name);
  *value = true;
  if (v == NULL || *v == '\0')
    return FP_OK;
  if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "%s='%s': expected 1 (the default) or 0",
                        name, v);
  *value = v[0] == '1';
  return FP_OK;
}

static void fill_device_info(fp_device_info *info, const struct cudaDeviceProp *prop,
                             int driver_version, int runtime_version) {
  fp_copy_string(info->name, sizeof info->name, prop->name);
  fp_copy_string(info->vendor, sizeof info->vendor, "NVIDIA");
  format_cuda_version(info->driver_version, sizeof info->driver_version, "", driver_version);
  format_cuda_version(info->platform, sizeof info->platform, "CUDA runtime ", runtime_version);
  snprintf(info->api_version, sizeof info->api_version, "sm_%d%d", prop->major, prop->minor);
  info->global_mem_bytes = (uint64_t)prop->totalGlobalMem;
  info->l2_cache_bytes = prop->l2CacheSize > 0 ? (uint64_t)prop->l2CacheSize : 0;
  info->local_mem_bytes = (uint64_t)prop->sharedMemPerBlock;
  info->local_mem_optin_bytes = (uint64_t)prop->sharedMemPerBlockOptin;
  info->max_group_size = (uint32_t)prop->maxThreadsPerBlock;
  info->subgroup_width = prop->warpSize > 0 ? (uint32_t)prop->warpSize : 1;
  info->compute_units = (uint32_t)prop->multiProcessorCount;
  info->cc_major = (uint32_t)prop->major;
  info->cc_minor = (uint32_t)prop->minor;
}

static fp_status cuda_init(fp_context *ctx, const fp_context_options *opts) {
  int device = 0;
  struct cudaDeviceProp prop;
  fp_status st = choose_device(ctx, opts, &device, &prop);
  if (st != FP_OK)
    return st;

  cuda_state *s = calloc(1, sizeof *s);
  if (s == NULL)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "cuda backend: host allocation failed");
  s->device = device;
  s->cc_major = prop.major;
  s->cc_minor = prop.minor;
  fp_gemm_path force = FP_GEMM_PATH_AUTO;
  const char *gemm_path = getenv("FUSEPORT_CUDA_GEMM_PATH");
  if (!fp_gemm_path_from_env(gemm_path, &force)) {
    free(s);
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_CUDA_GEMM_PATH='%s': expected auto (the default), sm90, sm80, "
                        "simt or skinny",
                        gemm_path);
  }
  s->gemm_force_path = (int)force;
  s->sm_count = prop.multiProcessorCount;
  bool unknown_policy = false;
  const char *policy = getenv("FUSEPORT_CUDA_ROW_BUILDS");
  s->row_policy = fp_rows_policy_from_env(policy, &unknown_policy);
  if (unknown_policy) {
    free(s);
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_CUDA_ROW_BUILDS='%s': expected 'tuned' (the default), 'block' "
                        "or 'cluster'",
                        policy);
  }
  /* A timing knob: the largest block of the block-per-row builds (the
   * host asks for N/16 threads, up to 1024). */
  const char *block_cap = getenv("FUSEPORT_CUDA_ROWS_BLOCK_CAP");
  if (block_cap != NULL && *block_cap != '\0') {
    char *end = NULL;
    const unsigned long cap = strtoul(block_cap, &end, 10);
    if (end == block_cap || *end != '\0' || cap < 32 || cap > 1024 || (cap & (cap - 1)) != 0) {
      free(s);
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "FUSEPORT_CUDA_ROWS_BLOCK_CAP='%s': expected a power of two in 32..1024",
                          block_cap);
    }
    s->rows_block_cap = (unsigned)cap;
  }
  /* A timing knob: 0 turns off the long-row builds' staging of the next row
   * (cuda_plan.h), 1 or unset keeps it. */
  fp_status knob_row_stage = env_switch(ctx, "FUSEPORT_CUDA_ROW_STAGE", &s->row_stage);
  if (knob_row_stage != FP_OK) {
    free(s);
    return knob_row_stage;
  }
  /* A timing knob: 0 turns off the streaming builds' rows in shared memory
   * (cuda_plan.h), 1 or unset keeps them where they were measured faster,
   * all keeps every row those builds get. */
  const char *stream_smem = getenv("FUSEPORT_CUDA_STREAM_SMEM");
  s->stream_smem = 1;
  if (stream_smem != NULL && *stream_smem != '\0') {
    if (strcmp(stream_smem, "0") == 0 || strcmp(stream_smem, "1") == 0) {
      s->stream_smem = stream_smem[0] - '0';
    } else if (strcmp(stream_smem, "all") == 0) {
      s->stream_smem = 2;
    } else {
      free(s);
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "FUSEPORT_CUDA_STREAM_SMEM='%s': expected 1 (the default), 0 or all",
                          stream_smem);
    }
  }
  /* A timing knob: row N of the convolution's implicit paths' tile tables
   * (kernels/cu/conv.cu) instead of their planners' pick. */
  const char *conv_cfg = getenv("FUSEPORT_CUDA_CONV_CFG");
  s->conv_cfg = -1;
  if (conv_cfg != NULL && *conv_cfg != '\0') {
    char *end = NULL;
    const long row = strtol(conv_cfg, &end, 10);
    if (end == conv_cfg || *end != '\0' || row < 0 || row > 63) {
      free(s);
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "FUSEPORT_CUDA_CONV_CFG='%s': expected a tile-table row, 0..63",
                          conv_cfg);
    }
    s->conv_cfg = (int)row;
  }
  /* A timing knob: 0 keeps 1x1 convolutions on conv.cu's implicit-GEMM
   * kernels instead of running them as plain GEMMs on the GEMM core. */
  fp_status knob_conv_gemm = env_switch(ctx, "FUSEPORT_CUDA_CONV_GEMM", &s->conv_gemm);
  if (knob_conv_gemm != FP_OK) {
    free(s);
    return knob_conv_gemm;
  }
  /* A timing knob: 0 keeps the cluster builds to rows their registers
   * hold (cuda_plan.h, fp_cuda_cluster_smem_bytes). */
  fp_status knob_cluster_smem = env_switch(ctx, "FUSEPORT_CUDA_CLUSTER_SMEM", &s->cluster_smem);
  if (knob_cluster_smem != FP_OK) {
    free(s);
    return knob_cluster_smem;
  }
  /* A timing knob: 8 keeps the ROWS clusters at the portable size. */
  const char *max_cluster = getenv("FUSEPORT_CUDA_MAX_CLUSTER");
  s->max_cluster = 16;
  if (max_cluster != NULL && *max_cluster != '\0') {
    if (strcmp(max_cluster, "8") != 0 && strcmp(max_cluster, "16") != 0) {
      free(s);
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "FUSEPORT_CUDA_MAX_CLUSTER='%s': expected 16 (the default) or 8",
                          max_cluster);
    }
    s->max_cluster = atoi(max_cluster);
  }
  s->smem_optin = prop.sharedMemPerBlockOptin;
  const char *elem_grid = getenv("FUSEPORT_CUDA_ELEM_GRID");
  if (!fp_elem_grid_policy_from_env(elem_grid, &s->elem_grid)) {
    free(s);
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_CUDA_ELEM_GRID='%s': expected 'tuned' (the default), 'host', "
                        "'waves:K' or 'items:K' with K in 1..64, or 'full'",
                        elem_grid);
  }
  const char *elem_builds = getenv("FUSEPORT_CUDA_ELEM_BUILDS");
  if (!fp_elem_builds_from_env(elem_builds, &s->elem_lean)) {
    free(s);
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_CUDA_ELEM_BUILDS='%s': expected 'lean' (the default) or "
                        "'registered'",
                        elem_builds);
  }
  for (int d = 0; d < 3; ++d) {
    s->max_block_dim[d] = prop.maxThreadsDim[d];
    s->max_grid_dim[d] = prop.maxGridSize[d];
  }

  int driver_version = 0, runtime_version = 0;
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) {
    st = fp_cuda_fail(ctx, err, "cudaSetDevice(%d)", device);
    goto fail;
  }
  /* Creates the device's primary context now, so that the first timed
   * operation does not pay for it. */
  err = cudaFree(NULL);
  if (err != cudaSuccess) {
    st = fp_cuda_fail(ctx, err, "cudaFree(NULL) (context creation on device %d)", device);
    goto fail;
  }
  err = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
  if (err != cudaSuccess) {
    s->stream = NULL;
    st = fp_cuda_fail(ctx, err, "cudaStreamCreateWithFlags(cudaStreamNonBlocking)");
    goto fail;
  }
  err = cudaDriverGetVersion(&driver_version);
  if (err != cudaSuccess) {
    st = fp_cuda_fail(ctx, err, "cudaDriverGetVersion()");
    goto fail;
  }
  err = cudaRuntimeGetVersion(&runtime_version);
  if (err != cudaSuccess) {
    st = fp_cuda_fail(ctx, err, "cudaRuntimeGetVersion()");
    goto fail;
  }
  fill_device_info(&ctx->info, &prop, driver_version, runtime_version);
  ctx->device_mem_limit = ctx->info.global_mem_bytes;
  {
    /* the library the process loaded, not the headers' */
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
      major = minor = patch = -1;
    snprintf(ctx->info.gemm_library, sizeof ctx->info.gemm_library, "cuBLAS/cuBLASLt %d.%d.%d",
             major, minor, patch);
    ctx->info.gemm_library_dtypes = (1u << FP_F32) | (1u << FP_F16) | (1u << FP_BF16);
    ctx->info.gemm_library_epilogues = true;
    if (fp_cuda_dnn_version(ctx->info.conv_library, sizeof ctx->info.conv_library)) {
      ctx->info.conv_library_dtypes = (1u << FP_F32) | (1u << FP_F16) | (1u << FP_BF16);
      ctx->info.conv_library_epilogues = true;
    }
  }

#define FP_KERNEL_FAMILY(family)                                                                   \
  fp_cuda_register_##family(s->kernels);                                                           \
  fp_cuda_register_tuning_##family(s->tuning);
#include "kernels.def"
#undef FP_KERNEL_FAMILY
  for (int k = 0; k < FPK_COUNT; ++k) {
    if (fp_kernel_required((fp_kernel_id)k) && s->kernels[k] == NULL) {
      st = fp_ctx_error(ctx, FP_ERR_INTERNAL, "cuda backend: required kernel '%s' is missing",
                        fp_kernel_name((fp_kernel_id)k));
      goto fail;
    }
  }
  ctx->impl = s;
  return FP_OK;

fail:
  if (s->stream != NULL && cudaStreamDestroy(s->stream) != cudaSuccess)
    (void)cudaGetLastError();
  free(s);
  return st;
}

static void cuda_shutdown(fp_context *ctx) {
  cuda_state *s = fp_cuda_state_of(ctx);
  if (s == NULL)
    return;
  use_device_quietly(ctx);
  /* Work still queued finishes first; errors cannot be reported any more. */
  if (cudaStreamSynchronize(s->stream) != cudaSuccess)
    (void)cudaGetLastError();
  fp_cuda_blas_destroy(s->blas);
  fp_cuda_dnn_destroy(s->dnn);
  if (cudaStreamDestroy(s->stream) != cudaSuccess)
    (void)cudaGetLastError();
  free(s);
  ctx->impl = NULL;
}

/* ---- buffers -------------------------------------------------------------- */

static fp_status cuda_alloc(fp_context *ctx, uint64_t bytes, void **handle) {
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  void *ptr = NULL;
  cudaError_t err = cudaMalloc(&ptr, (size_t)bytes);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaMalloc(%llu bytes) on '%s'", (unsigned long long)bytes,
                        ctx->info.name);
  *handle = ptr;
  return FP_OK;
}

static void cuda_release(fp_context *ctx, void *handle) {
  use_device_quietly(ctx);
  /* cudaFree waits for the device, so queued work using the buffer is done. */
  if (cudaFree(handle) != cudaSuccess)
    (void)cudaGetLastError();
}

static fp_status cuda_write(fp_context *ctx, void *handle, uint64_t offset, const void *src,
                            uint64_t bytes) {
  cuda_state *s = fp_cuda_state_of(ctx);
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  cudaError_t err = cudaMemcpyAsync((char *)handle + offset, src, (size_t)bytes,
                                    cudaMemcpyHostToDevice, s->stream);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaMemcpyAsync(host to device, %llu bytes)",
                        (unsigned long long)bytes);
  err = cudaStreamSynchronize(s->stream);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaStreamSynchronize() after a host-to-device copy");
  return FP_OK;
}

static fp_status cuda_read(fp_context *ctx, void *handle, uint64_t offset, void *dst,
                           uint64_t bytes) {
  cuda_state *s = fp_cuda_state_of(ctx);
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  cudaError_t err = cudaMemcpyAsync(dst, (const char *)handle + offset, (size_t)bytes,
                                    cudaMemcpyDeviceToHost, s->stream);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaMemcpyAsync(device to host, %llu bytes)",
                        (unsigned long long)bytes);
  err = cudaStreamSynchronize(s->stream);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaStreamSynchronize() after a device-to-host copy");
  return FP_OK;
}

static fp_status cuda_fill(fp_context *ctx, void *handle, uint64_t offset, uint64_t bytes,
                           const void *pattern, size_t pattern_size) {
  cuda_state *s = fp_cuda_state_of(ctx);
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  char *dst = (char *)handle + offset;
  cudaError_t err;
  if (pattern_size == 1) {
    err = cudaMemsetAsync(dst, *(const unsigned char *)pattern, (size_t)bytes, s->stream);
    if (err != cudaSuccess)
      return fp_cuda_fail(ctx, err, "cudaMemsetAsync(%llu bytes)", (unsigned long long)bytes);
    return FP_OK;
  }
  err = fp_cuda_fill_pattern(dst, bytes, pattern, pattern_size, s->stream);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "launch of the fill kernel (%zu-byte pattern, %llu bytes)",
                        pattern_size, (unsigned long long)bytes);
  return FP_OK;
}

static fp_status cuda_copy(fp_context *ctx, void *dst, uint64_t dst_offset, void *src,
                           uint64_t src_offset, uint64_t bytes) {
  cuda_state *s = fp_cuda_state_of(ctx);
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  cudaError_t err = cudaMemcpyAsync((char *)dst + dst_offset, (const char *)src + src_offset,
                                    (size_t)bytes, cudaMemcpyDeviceToDevice, s->stream);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaMemcpyAsync(device to device, %llu bytes)",
                        (unsigned long long)bytes);
  return FP_OK;
}

/* ---- queue and events ------------------------------------------------------- */

static fp_status cuda_finish(fp_context *ctx) {
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  cudaError_t err = cudaStreamSynchronize(fp_cuda_state_of(ctx)->stream);
  return err == cudaSuccess ? FP_OK : fp_cuda_fail(ctx, err, "cudaStreamSynchronize()");
}

static fp_status cuda_event_create(fp_context *ctx, void **event) {
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  cudaEvent_t ev = NULL;
  cudaError_t err = cudaEventCreateWithFlags(&ev, cudaEventDefault); /* timing enabled */
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaEventCreateWithFlags(cudaEventDefault)");
  *event = ev;
  return FP_OK;
}

static void cuda_event_destroy(fp_context *ctx, void *event) {
  use_device_quietly(ctx);
  if (cudaEventDestroy((cudaEvent_t)event) != cudaSuccess)
    (void)cudaGetLastError();
}

static fp_status cuda_event_record(fp_context *ctx, void *event) {
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  cudaError_t err = cudaEventRecord((cudaEvent_t)event, fp_cuda_state_of(ctx)->stream);
  return err == cudaSuccess ? FP_OK : fp_cuda_fail(ctx, err, "cudaEventRecord()");
}

static fp_status cuda_event_synchronize(fp_context *ctx, void *event) {
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  cudaError_t err = cudaEventSynchronize((cudaEvent_t)event);
  return err == cudaSuccess ? FP_OK : fp_cuda_fail(ctx, err, "cudaEventSynchronize()");
}

static fp_status cuda_event_elapsed_ms(fp_context *ctx, void *start, void *end, double *ms) {
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  cudaError_t err = cudaEventSynchronize((cudaEvent_t)start);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaEventSynchronize() of the start event");
  err = cudaEventSynchronize((cudaEvent_t)end);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaEventSynchronize() of the end event");
  float elapsed = 0.0f;
  err = cudaEventElapsedTime(&elapsed, (cudaEvent_t)start, (cudaEvent_t)end);
  if (err != cudaSuccess)
    return fp_cuda_fail(ctx, err, "cudaEventElapsedTime()");
  *ms = (double)elapsed;
  return FP_OK;
}

/* ---- the GEMM library ----------------------------------------------------------- */

static fp_status cuda_library_prepare(fp_context *ctx, fp_dtype dtype, double *compile_ms) {
  (void)dtype;
  cuda_state *s = fp_cuda_state_of(ctx);
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  return fp_cuda_blas_prepare(ctx, &s->blas, s->stream, compile_ms);
}

static fp_status cuda_library_gemm(fp_context *ctx, const fp_lib_gemm *g, void *a, void *b, void *c,
                                   void *d, void *bias, void *ws, uint64_t ws_bytes) {
  cuda_state *s = fp_cuda_state_of(ctx);
  double ms = 0.0;
  fp_status st = cuda_library_prepare(ctx, g->dtype, &ms);
  if (st != FP_OK)
    return st;
  return fp_cuda_blas_gemm(ctx, s->blas, g, a, b, c, d, bias, ws, ws_bytes);
}

/* ---- the convolution library ------------------------------------------------------ */

static fp_status cuda_library_conv(fp_context *ctx, const fp_lib_conv *c, void *x, void *w,
                                   void *bias, void *z, void *out, void *ws, uint64_t ws_bytes) {
  cuda_state *s = fp_cuda_state_of(ctx);
  fp_status st = fp_cuda_use_device(ctx);
  if (st != FP_OK)
    return st;
  return fp_cuda_dnn_conv(ctx, &s->dnn, s->stream, c, x, w, bias, z, out, ws, ws_bytes);
}

const fp_backend_ops fp_cuda_backend_ops = {
    .kind = FP_BACKEND_CUDA,
    .device_count = cuda_device_count,
    .init = cuda_init,
    .shutdown = cuda_shutdown,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .write = cuda_write,
    .read = cuda_read,
    .fill = cuda_fill,
    .copy = cuda_copy,
    .finish = cuda_finish,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_synchronize = cuda_event_synchronize,
    .event_elapsed_ms = cuda_event_elapsed_ms,
    .kernel_available = fp_cuda_kernel_available,
    .kernel_prepare = fp_cuda_kernel_prepare,
    .launch = fp_cuda_launch,
    .library_gemm = cuda_library_gemm,
    .library_prepare = cuda_library_prepare,
    .library_conv = cuda_library_conv,
};
