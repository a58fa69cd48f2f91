/* fuseport OpenCL backend: the convolution family's launch planner, the
 * part of the backend behind kernels/cl/conv.cl's conv_<dt> (PLANNED).
 * opencl_backend.c owns the context, the queue and the conv family's
 * program and calls in here. */
#ifndef FUSEPORT_OPENCL_CONV_H
#define FUSEPORT_OPENCL_CONV_H

#include <stdbool.h>
#include <stddef.h>

#include <CL/cl.h>

#include "backend_impl.h"

/* Per-context state (the planned kernels). */
typedef struct ocl_conv ocl_conv;

/* What the planner uses of the backend's context. */
typedef struct ocl_conv_env {
  cl_context context;
  cl_device_id device;
  cl_command_queue queue;
  cl_program program; /* the conv family's program; NULL until built */
} ocl_conv_env;

/* NULL when the host has no memory. */
ocl_conv *ocl_conv_create(void);
/* Releases the kernels it created (the queue must be idle); NULL is fine. */
void ocl_conv_destroy(ocl_conv *cv);

/* The conv family's build options after FP_CL_BUILD_OPTIONS: the device's
 * local memory and group size, which decide the configurations compiled,
 * whether the epilogue is unrolled (not on CPU devices), and on NVIDIA
 * (nv_options) its register cap, in place of the other families' one. */
void ocl_conv_build_options(const fp_device_info *info, cl_device_id device, bool nv_options,
                            char *buf, size_t cap);

/* Whether the backend plans the kernel's launch here (conv_<dt>; im2col_<dt>
 * is ELEM). */
bool ocl_conv_is_planned(fp_kernel_id id);

/* Picks the tile configuration and the geometry of conv_<dt> from its
 * arguments (checked by the layer against the signature) and the device:
 * *kernel, *dims, global[] and local[]. An error for a geometry the kernel
 * cannot take (dims < 1, P or Q not the output size, an epilogue outside
 * FP_CONV_EPI_VALID or without the vectors it reads, sizes past its int
 * coordinates) or a device none of the configurations fits. */
fp_status ocl_conv_plan(fp_context *ctx, ocl_conv *cv, const ocl_conv_env *env, fp_kernel_id id,
                        const fp_karg *args, int nargs, cl_kernel *kernel, cl_uint *dims,
                        size_t global[3], size_t local[3]);

#endif
