/* fuseport OpenCL backend: the attention family's launch planner, the part
 * of the backend behind kernels/cl/attention.cl's attention_<dt> (PLANNED).
 * opencl_backend.c owns the context, the queue and the family's program and
 * calls in here. */
#ifndef FUSEPORT_OPENCL_ATTENTION_H
#define FUSEPORT_OPENCL_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>

#include <CL/cl.h>

#include "backend_impl.h"

/* Per-context state (the planned kernels). */
typedef struct ocl_attn ocl_attn;

/* What the planner uses of the backend's context. */
typedef struct ocl_attn_env {
  cl_context context;
  cl_device_id device;
  cl_command_queue queue;
  cl_program program; /* the attention family's program; NULL until built */
} ocl_attn_env;

/* NULL when the host has no memory. */
ocl_attn *ocl_attn_create(void);
/* Releases the kernels it created (the queue must be idle); NULL is fine. */
void ocl_attn_destroy(ocl_attn *at);

/* The attention family's build options after FP_CL_BUILD_OPTIONS: the
 * device's local memory and group size, which decide the configurations
 * compiled, and on NVIDIA (nv_options) its register cap, in place of the
 * other families' one. */
void ocl_attn_build_options(const fp_device_info *info, cl_device_id device, bool nv_options,
                            char *buf, size_t cap);

/* Whether the backend plans the kernel's launch here (attention_<dt>; the
 * combine kernels are ELEM, attn_softmax_<dt> ROWS). */
bool ocl_attn_is_planned(fp_kernel_id id);

/* Picks the tile configuration and the geometry of attention_<dt> from its
 * arguments (checked by the layer against the signature) and the device:
 * *kernel, *dims, global[] and local[]. An error for arguments the kernel
 * cannot take (sizes < 1, D past FP_ATTN_MAX_D, splits < 1, a buffer the
 * split mode writes passed as none, sizes past its int tile counts) or a
 * device none of the configurations fits. */
fp_status ocl_attn_plan(fp_context *ctx, ocl_attn *at, const ocl_attn_env *env, fp_kernel_id id,
                        const fp_karg *args, int nargs, cl_kernel *kernel, cl_uint *dims,
                        size_t global[3], size_t local[3]);

#endif
