/* fuseport OpenCL backend: the GEMM core's launch planner and the GEMM
 * library (CLBlast), the part of the backend behind kernels/cl/gemm*.cl and
 * fp_library_gemm. opencl_backend.c owns the context, the queue and the
 * gemm family's program and calls in here; nothing here is shared between
 * contexts except CLBlast's own program cache (see ocl_gemm_destroy). */
#ifndef FUSEPORT_OPENCL_GEMM_H
#define FUSEPORT_OPENCL_GEMM_H

#include <stdbool.h>
#include <stddef.h>

#include <CL/cl.h>

#include "backend_impl.h"

/* Per-context state (the planned kernels, the library's preparation). */
typedef struct ocl_gemm ocl_gemm;

/* What the GEMM code uses of the backend's context. */
typedef struct ocl_gemm_env {
  cl_context context;
  cl_device_id device;
  cl_command_queue queue;
  cl_program program; /* the gemm family's program; NULL until built */
} ocl_gemm_env;

/* NULL when the host has no memory. */
ocl_gemm *ocl_gemm_create(void);
/* Releases the kernels it created (the queue must be idle); NULL is fine. */
void ocl_gemm_destroy(ocl_gemm *g);

/* Fills the device info's gemm_library fields: CLBlast where it was built
 * in (f32, and f16 where the device has cl_khr_fp16), else none. */
void ocl_gemm_device_info(fp_device_info *info, bool has_fp16);

/* The gemm family's build options after FP_CL_BUILD_OPTIONS: the device's
 * local memory and group size, which decide the configurations compiled,
 * whether the epilogue is unrolled (not on CPU devices), and on NVIDIA
 * (nv_options) its register cap, in place of the other families' one. */
void ocl_gemm_build_options(const fp_device_info *info, cl_device_id device, bool nv_options,
                            char *buf, size_t cap);

/* Whether the backend plans the kernel's launch here (the PLANNED gemm family). */
bool ocl_gemm_is_planned(fp_kernel_id id);

/* Picks the kernel variant and the geometry of a planned kernel from its
 * arguments (checked by the layer against the signature) and the device:
 * *kernel, *dims, global[] and local[]. An error for arguments the kernel
 * cannot take (gemm2 with N > 128, leading dimensions below the row length,
 * dw_packed with bits not 1, 2, 4 or 8) or a device none of the variants
 * fits. dw_packed splits K only as far as its workspace argument holds the
 * partial tiles (its size is read from the cl_mem; none: no split). */
fp_status ocl_gemm_plan(fp_context *ctx, ocl_gemm *g, const ocl_gemm_env *env, fp_kernel_id id,
                        const fp_karg *args, int nargs, cl_kernel *kernel, cl_uint *dims,
                        size_t global[3], size_t local[3]);

/* fp_backend_ops.library_gemm and .library_prepare (backend_impl.h). */
fp_status ocl_gemm_library(fp_context *ctx, ocl_gemm *g, const ocl_gemm_env *env,
                           const fp_lib_gemm *lg, void *a, void *b, void *c, void *d, void *bias,
                           void *ws, uint64_t ws_bytes);
fp_status ocl_gemm_library_prepare(fp_context *ctx, ocl_gemm *g, const ocl_gemm_env *env,
                                   fp_dtype dtype, double *compile_ms);

/* Defined in opencl_errors.c: "CL_INVALID_VALUE" etc. for an OpenCL code. */
const char *ocl_error_name(cl_int err);
/* An unsigned tuning variable: `fallback` when unset or empty; false when it
 * is not a whole number in [lo, hi] (or not a power of two, if pow2).
 * (opencl_device.c) */
bool ocl_env_u32(const char *name, uint32_t lo, uint32_t hi, bool pow2, uint32_t fallback,
                 uint32_t *value);

#endif
