/* fuseport OpenCL backend: buffers (allocation with a first touch, release)
 * and what moves bytes between them and the host: writes, reads, fills,
 * copies, in pieces of at most 1 GiB; Oclgrind's mode through opencl_oclgrind.c. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <CL/cl.h>

#include "opencl_internal.h"

/* ---- buffers ------------------------------------------------------------------------------- */

static fp_status alloc_failure(fp_context *ctx, cl_state *cl, uint64_t bytes, const char *call,
                               cl_int err) {
  bool oom = err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
             err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE;
  if (!oom)
    return ocl_fail(ctx, FP_ERR_BACKEND, err, "%s(%llu bytes) on '%s'", call,
                    (unsigned long long)bytes, ctx->info.name);
  return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY,
                      "out of device memory: %s(%llu bytes) failed: %s (%d) on '%s' (global "
                      "memory %llu bytes, largest single allocation %llu bytes%s)",
                      call, (unsigned long long)bytes, ocl_error_name(err), (int)err,
                      ctx->info.name, (unsigned long long)ctx->info.global_mem_bytes,
                      (unsigned long long)cl->max_alloc_bytes,
                      bytes > cl->max_alloc_bytes ? ", which this request exceeds" : "");
}

fp_status ocl_alloc(fp_context *ctx, uint64_t bytes, void **handle) {
  cl_state *cl = ocl_state_of(ctx);
  if (bytes > SIZE_MAX)
    return alloc_failure(ctx, cl, bytes, "clCreateBuffer", CL_INVALID_BUFFER_SIZE);
  /* Seen on an H100 (driver 580.159, OpenCL 3.0 CUDA 13.0.98, 2026-11-23): a
   * kernel over a 16 GiB buffer broke the command queue
   * (CL_INVALID_COMMAND_QUEUE at the next clFinish) and every later call on
   * the context failed, while 8 GiB buffers ran correctly. Refusing such
   * buffers keeps the context, and a sweep, alive;
   * FUSEPORT_OPENCL_ALLOW_HUGE_BUFFERS=1 lifts the limit to try a driver. */
  const uint64_t nvidia_limit = 8ull << 30;
  const char *allow = getenv("FUSEPORT_OPENCL_ALLOW_HUGE_BUFFERS");
  if (bytes > nvidia_limit && strstr(ctx->info.vendor, "NVIDIA") != NULL &&
      (allow == NULL || strcmp(allow, "1") != 0))
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "buffer of %llu bytes refused: NVIDIA's OpenCL lost its command queue on "
                        "buffers over %llu bytes (H100, driver 580); "
                        "FUSEPORT_OPENCL_ALLOW_HUGE_BUFFERS=1 lifts this",
                        (unsigned long long)bytes, (unsigned long long)nvidia_limit);
  /* Earlier work must not fail inside the allocation below and pass for an
   * out-of-memory: settle the queue first (allocations are not timed). */
  cl_int err = clFinish(cl->queue);
  if (err != CL_SUCCESS)
    return ocl_fail(ctx, ocl_status_of(err), err, "clFinish (before allocating %llu bytes)",
                    (unsigned long long)bytes);
  cl_mem mem = clCreateBuffer(cl->context, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &err);
  if (err != CL_SUCCESS)
    return alloc_failure(ctx, cl, bytes, "clCreateBuffer", err);
  /* Oclgrind: no touch, whose bytes would pass for initialised (a kernel
   * reading memory nobody wrote would go unreported). */
  if (cl->oclgrind) {
    *handle = mem;
    return FP_OK;
  }
  /* Drivers (NVIDIA's) reserve device memory only when a buffer is first used
   * on the device. Touch the first bytes now so that an out-of-memory shows
   * here, at allocation, rather than at some later launch. The 0xFF bytes
   * read as NaN, like fresh memory on the CPU backend. */
  const cl_uchar poison = 0xFF;
  size_t touch = bytes < 4096 ? (size_t)bytes : 4096;
  err = clEnqueueFillBuffer(cl->queue, mem, &poison, 1, 0, touch, 0, NULL, NULL);
  const char *call = "clEnqueueFillBuffer";
  if (err == CL_SUCCESS) {
    err = clFinish(cl->queue);
    call = "clFinish (first use of a new buffer)";
  }
  if (err != CL_SUCCESS) {
    clReleaseMemObject(mem);
    return alloc_failure(ctx, cl, bytes, call, err);
  }
  *handle = mem;
  return FP_OK;
}

void ocl_release(fp_context *ctx, void *handle) {
  cl_state *cl = ocl_state_of(ctx);
  if (cl->oclgrind) { /* kept until the context ends (opencl_oclgrind.h) */
    if (cl->nkept == cl->kept_cap) {
      const size_t cap = cl->kept_cap != 0 ? 2 * cl->kept_cap : 64;
      cl_mem *grown = realloc(cl->kept, cap * sizeof *grown);
      if (grown != NULL) {
        cl->kept = grown;
        cl->kept_cap = cap;
      }
    }
    if (cl->nkept < cl->kept_cap) {
      cl->kept[cl->nkept++] = (cl_mem)handle;
      return;
    }
  }
  clReleaseMemObject((cl_mem)handle);
}

/* Transfers, fills and copies go in pieces of at most 1 GiB (a multiple of
 * every pattern size): on the H100 with NVIDIA's OpenCL (driver 580) a sweep
 * hung on the first 8 GiB tensor while 4 GiB ones ran, so no single command
 * is trusted with more than 32-bit byte counts. */
#define OCL_CHUNK_BYTES (1ull << 30)

static uint64_t chunk_of(uint64_t left) { return left < OCL_CHUNK_BYTES ? left : OCL_CHUNK_BYTES; }

ocl_xfer_env ocl_xfer_env_of(const cl_state *cl) {
  const ocl_xfer_env env = {cl->context, cl->device, cl->queue};
  return env;
}

fp_status ocl_write(fp_context *ctx, void *handle, uint64_t offset, const void *src,
                    uint64_t bytes) {
  cl_state *cl = ocl_state_of(ctx);
  if (cl->oclgrind) {
    const ocl_xfer_env env = ocl_xfer_env_of(cl);
    return ocl_xfer_write(ctx, cl->xfer, &env, (cl_mem)handle, offset, src, bytes);
  }
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = chunk_of(bytes - done);
    cl_int err = clEnqueueWriteBuffer(ocl_state_of(ctx)->queue, (cl_mem)handle, CL_TRUE,
                                      (size_t)(offset + done), (size_t)n, (const char *)src + done,
                                      0, NULL, NULL);
    if (err != CL_SUCCESS)
      return ocl_fail(ctx, ocl_status_of(err), err,
                      "clEnqueueWriteBuffer(%llu bytes at offset %llu)", (unsigned long long)n,
                      (unsigned long long)(offset + done));
    done += n;
  }
  return FP_OK;
}

fp_status ocl_read(fp_context *ctx, void *handle, uint64_t offset, void *dst, uint64_t bytes) {
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = chunk_of(bytes - done);
    cl_int err =
        clEnqueueReadBuffer(ocl_state_of(ctx)->queue, (cl_mem)handle, CL_TRUE,
                            (size_t)(offset + done), (size_t)n, (char *)dst + done, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      return ocl_fail(ctx, ocl_status_of(err), err,
                      "clEnqueueReadBuffer(%llu bytes at offset %llu)", (unsigned long long)n,
                      (unsigned long long)(offset + done));
    done += n;
  }
  return FP_OK;
}

fp_status ocl_fill(fp_context *ctx, void *handle, uint64_t offset, uint64_t bytes,
                   const void *pattern, size_t pattern_size) {
  cl_state *cl = ocl_state_of(ctx);
  if (cl->oclgrind) {
    const ocl_xfer_env env = ocl_xfer_env_of(cl);
    return ocl_xfer_fill(ctx, cl->xfer, &env, (cl_mem)handle, offset, bytes, pattern, pattern_size);
  }
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = chunk_of(bytes - done);
    cl_int err =
        clEnqueueFillBuffer(ocl_state_of(ctx)->queue, (cl_mem)handle, pattern, pattern_size,
                            (size_t)(offset + done), (size_t)n, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      return ocl_fail(ctx, ocl_status_of(err), err,
                      "clEnqueueFillBuffer(%llu bytes at offset %llu, %zu-byte pattern)",
                      (unsigned long long)n, (unsigned long long)(offset + done), pattern_size);
    done += n;
  }
  return FP_OK;
}

fp_status ocl_copy(fp_context *ctx, void *dst, uint64_t dst_offset, void *src, uint64_t src_offset,
                   uint64_t bytes) {
  cl_state *cl = ocl_state_of(ctx);
  if (cl->oclgrind) {
    const ocl_xfer_env env = ocl_xfer_env_of(cl);
    return ocl_xfer_copy(ctx, cl->xfer, &env, (cl_mem)dst, dst_offset, (cl_mem)src, src_offset,
                         bytes);
  }
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = chunk_of(bytes - done);
    cl_int err = clEnqueueCopyBuffer(ocl_state_of(ctx)->queue, (cl_mem)src, (cl_mem)dst,
                                     (size_t)(src_offset + done), (size_t)(dst_offset + done),
                                     (size_t)n, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      return ocl_fail(ctx, ocl_status_of(err), err,
                      "clEnqueueCopyBuffer(%llu bytes, offset %llu to offset %llu)",
                      (unsigned long long)n, (unsigned long long)(src_offset + done),
                      (unsigned long long)(dst_offset + done));
    done += n;
  }
  return FP_OK;
}

fp_status ocl_finish(fp_context *ctx) {
  cl_int err = clFinish(ocl_state_of(ctx)->queue);
  if (err != CL_SUCCESS)
    return ocl_fail(ctx, ocl_status_of(err), err, "clFinish");
  return FP_OK;
}
