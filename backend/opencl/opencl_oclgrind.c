/* fuseport OpenCL backend: fills, copies and writes through kernels, for
 * Oclgrind (opencl_oclgrind.h says why). Byte by byte in a grid-stride loop:
 * these serve a simulator and the tests, not a fast path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_gemm.h" /* ocl_error_name */
#include "opencl_oclgrind.h"

/* The pattern arrives as a uchar16 (byte k in element k, whatever the
 * device's byte order) and is indexed through a private copy. */
static const char xfer_source[] =
    "__kernel void fp_xfer_fill(__global uchar *dst, ulong offset, ulong bytes,\n"
    "                           uchar16 pattern, uint size) {\n"
    "  uchar p[16];\n"
    "  vstore16(pattern, 0, p);\n"
    "  const ulong step = get_global_size(0);\n"
    "  for (ulong i = get_global_id(0); i < bytes; i += step)\n"
    "    dst[offset + i] = p[i % size];\n"
    "}\n"
    "__kernel void fp_xfer_copy(__global uchar *dst, ulong dst_offset,\n"
    "                           __global const uchar *src, ulong src_offset, ulong bytes) {\n"
    "  const ulong step = get_global_size(0);\n"
    "  for (ulong i = get_global_id(0); i < bytes; i += step)\n"
    "    dst[dst_offset + i] = src[src_offset + i];\n"
    "}\n";

/* work-items of a launch at most: a simulator runs each one */
#define XFER_MAX_ITEMS 4096u

struct ocl_xfer {
  bool attempted;
  fp_status status;
  char message[FP_ERROR_MESSAGE_BYTES];
  cl_program program;
  cl_kernel fill, copy;
};

ocl_xfer *ocl_xfer_create(void) { return calloc(1, sizeof(ocl_xfer)); }

void ocl_xfer_destroy(ocl_xfer *x) {
  if (x == NULL)
    return;
  if (x->fill != NULL)
    clReleaseKernel(x->fill);
  if (x->copy != NULL)
    clReleaseKernel(x->copy);
  if (x->program != NULL)
    clReleaseProgram(x->program);
  free(x);
}

bool ocl_oclgrind_wanted(const char *platform_name, bool *bad) {
  *bad = false;
  const char *set = getenv("FUSEPORT_OPENCL_OCLGRIND");
  if (set != NULL && *set != '\0') {
    if (strcmp(set, "0") == 0 || strcmp(set, "1") == 0)
      return set[0] == '1';
    *bad = true;
    return false;
  }
  return platform_name != NULL && strstr(platform_name, "Oclgrind") != NULL;
}

/* Builds the program once per context; a failure is kept and re-raised. */
static fp_status ensure_built(fp_context *ctx, ocl_xfer *x, const ocl_xfer_env *env) {
  if (!x->attempted) {
    x->attempted = true;
    x->status = FP_OK;
    cl_int err;
    const char *src = xfer_source;
    const char *what = "clCreateProgramWithSource";
    x->program = clCreateProgramWithSource(env->context, 1, &src, NULL, &err);
    if (err == CL_SUCCESS) {
      what = "clBuildProgram";
      err = clBuildProgram(x->program, 1, &env->device, "-cl-std=CL1.2", NULL, NULL);
    }
    if (err == CL_SUCCESS) {
      what = "clCreateKernel(fp_xfer_fill)";
      x->fill = clCreateKernel(x->program, "fp_xfer_fill", &err);
    }
    if (err == CL_SUCCESS) {
      what = "clCreateKernel(fp_xfer_copy)";
      x->copy = clCreateKernel(x->program, "fp_xfer_copy", &err);
    }
    if (err != CL_SUCCESS) {
      char log[2048] = "";
      if (x->program != NULL)
        clGetProgramBuildInfo(x->program, env->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log,
                              NULL);
      snprintf(x->message, sizeof x->message,
               "opencl transfer kernels: %s failed: %s (%d); build log:\n%s", what,
               ocl_error_name(err), (int)err, log);
      x->status = err == CL_OUT_OF_HOST_MEMORY ? FP_ERR_OUT_OF_MEMORY : FP_ERR_BUILD;
    }
  }
  if (x->status != FP_OK)
    return fp_ctx_error(ctx, x->status, "%s", x->message);
  return FP_OK;
}

static fp_status run(fp_context *ctx, const ocl_xfer_env *env, cl_kernel k, const char *name,
                     uint64_t bytes) {
  size_t global = bytes < XFER_MAX_ITEMS ? (size_t)bytes : XFER_MAX_ITEMS;
  cl_int err = clEnqueueNDRangeKernel(env->queue, k, 1, NULL, &global, NULL, 0, NULL, NULL);
  if (err != CL_SUCCESS)
    return fp_ctx_error(
        ctx, err == CL_MEM_OBJECT_ALLOCATION_FAILURE ? FP_ERR_OUT_OF_MEMORY : FP_ERR_BACKEND,
        "clEnqueueNDRangeKernel(%s, %llu bytes) failed: %s (%d)", name, (unsigned long long)bytes,
        ocl_error_name(err), (int)err);
  return FP_OK;
}

static fp_status arg_error(fp_context *ctx, cl_int err, const char *name) {
  return fp_ctx_error(ctx, FP_ERR_BACKEND, "clSetKernelArg(%s) failed: %s (%d)", name,
                      ocl_error_name(err), (int)err);
}

fp_status ocl_xfer_fill(fp_context *ctx, ocl_xfer *x, const ocl_xfer_env *env, cl_mem dst,
                        uint64_t offset, uint64_t bytes, const void *pattern, size_t pattern_size) {
  if (bytes == 0)
    return FP_OK;
  fp_status st = ensure_built(ctx, x, env);
  if (st != FP_OK)
    return st;
  cl_uchar16 p;
  memset(&p, 0, sizeof p);
  memcpy(&p, pattern, pattern_size < sizeof p ? pattern_size : sizeof p);
  const cl_ulong off = offset, n = bytes;
  const cl_uint size = (cl_uint)pattern_size;
  cl_int err = clSetKernelArg(x->fill, 0, sizeof dst, &dst);
  if (err == CL_SUCCESS)
    err = clSetKernelArg(x->fill, 1, sizeof off, &off);
  if (err == CL_SUCCESS)
    err = clSetKernelArg(x->fill, 2, sizeof n, &n);
  if (err == CL_SUCCESS)
    err = clSetKernelArg(x->fill, 3, sizeof p, &p);
  if (err == CL_SUCCESS)
    err = clSetKernelArg(x->fill, 4, sizeof size, &size);
  if (err != CL_SUCCESS)
    return arg_error(ctx, err, "fp_xfer_fill");
  return run(ctx, env, x->fill, "fp_xfer_fill", bytes);
}

fp_status ocl_xfer_copy(fp_context *ctx, ocl_xfer *x, const ocl_xfer_env *env, cl_mem dst,
                        uint64_t dst_offset, cl_mem src, uint64_t src_offset, uint64_t bytes) {
  if (bytes == 0)
    return FP_OK;
  fp_status st = ensure_built(ctx, x, env);
  if (st != FP_OK)
    return st;
  const cl_ulong doff = dst_offset, soff = src_offset, n = bytes;
  cl_int err = clSetKernelArg(x->copy, 0, sizeof dst, &dst);
  if (err == CL_SUCCESS)
    err = clSetKernelArg(x->copy, 1, sizeof doff, &doff);
  if (err == CL_SUCCESS)
    err = clSetKernelArg(x->copy, 2, sizeof src, &src);
  if (err == CL_SUCCESS)
    err = clSetKernelArg(x->copy, 3, sizeof soff, &soff);
  if (err == CL_SUCCESS)
    err = clSetKernelArg(x->copy, 4, sizeof n, &n);
  if (err != CL_SUCCESS)
    return arg_error(ctx, err, "fp_xfer_copy");
  return run(ctx, env, x->copy, "fp_xfer_copy", bytes);
}

fp_status ocl_xfer_write(fp_context *ctx, ocl_xfer *x, const ocl_xfer_env *env, cl_mem dst,
                         uint64_t offset, const void *src, uint64_t bytes) {
  if (bytes == 0)
    return FP_OK;
  size_t size = 0;
  cl_int err = clGetMemObjectInfo(dst, CL_MEM_SIZE, sizeof size, &size, NULL);
  if (err != CL_SUCCESS)
    return fp_ctx_error(ctx, FP_ERR_BACKEND, "clGetMemObjectInfo(CL_MEM_SIZE) failed: %s (%d)",
                        ocl_error_name(err), (int)err);
  cl_mem target = dst;
  if (offset != 0 || bytes != size) {
    target = clCreateBuffer(env->context, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &err);
    if (err != CL_SUCCESS)
      return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY,
                          "clCreateBuffer(%llu bytes, staging a write) failed: %s (%d)",
                          (unsigned long long)bytes, ocl_error_name(err), (int)err);
  }
  err = clEnqueueWriteBuffer(env->queue, target, CL_TRUE, 0, (size_t)bytes, src, 0, NULL, NULL);
  fp_status st = FP_OK;
  if (err != CL_SUCCESS)
    st = fp_ctx_error(ctx, FP_ERR_BACKEND, "clEnqueueWriteBuffer(%llu bytes) failed: %s (%d)",
                      (unsigned long long)bytes, ocl_error_name(err), (int)err);
  if (st == FP_OK && target != dst)
    st = ocl_xfer_copy(ctx, x, env, dst, offset, target, 0, bytes);
  if (st == FP_OK && target != dst) {
    err = clFinish(env->queue);
    if (err != CL_SUCCESS)
      st = fp_ctx_error(ctx, FP_ERR_BACKEND, "clFinish (staged write) failed: %s (%d)",
                        ocl_error_name(err), (int)err);
  }
  if (target != dst)
    clReleaseMemObject(target);
  return st;
}
