/* fuseport OpenCL backend: what the planned families (gemm, conv) share --
 * their kernels are created once per context, each kept only where the
 * device runs its work-group shape, with the reason kept where it does not. */
#ifndef FUSEPORT_OPENCL_PLANNED_H
#define FUSEPORT_OPENCL_PLANNED_H

#include <stdint.h>

#include <CL/cl.h>

#include "backend_impl.h"

/* One configuration's kernel. */
typedef struct ocl_planned_kernel {
  cl_kernel kernel; /* NULL: not built for this device, or not usable */
  size_t pref_multiple;
  char why[192]; /* why it is not usable */
} ocl_planned_kernel;

/* What deciding needs of the device and the program. */
typedef struct ocl_planned_limits {
  size_t items[3]; /* CL_DEVICE_MAX_WORK_ITEM_SIZES */
  cl_ulong local;  /* CL_DEVICE_LOCAL_MEM_SIZE */
  cl_uint units;   /* CL_DEVICE_MAX_COMPUTE_UNITS, at least 1 */
  char *names;     /* CL_PROGRAM_KERNEL_NAMES (';'-separated); free with the limits */
} ocl_planned_limits;

/* An OpenCL failure of `what` (on `name`) through the context's error. */
fp_status ocl_planned_error(fp_context *ctx, cl_int err, const char *what, const char *name);
/* Queries the limits; `family` names the program in errors. */
fp_status ocl_planned_limits_get(fp_context *ctx, cl_device_id device, cl_program program,
                                 const char *family, ocl_planned_limits *out);
void ocl_planned_limits_free(ocl_planned_limits *l);
/* Whether `name` is one of a program's kernels, `names` its
 * CL_PROGRAM_KERNEL_NAMES (';'-separated). Asking clCreateKernel instead
 * makes a failing API call of every absent one (Oclgrind's --check-api
 * reports each). */
bool ocl_kernel_listed(const char *names, const char *name);
/* Creates kernel `name` and keeps it where the device runs a group of
 * wx x wy with its local memory; a kernel the program compiled out is absent,
 * with the reason in out->why. Errors only for failing OpenCL calls. */
fp_status ocl_planned_kernel_make(fp_context *ctx, cl_device_id device, cl_program program,
                                  const ocl_planned_limits *lim, const char *name, uint32_t wx,
                                  uint32_t wy, ocl_planned_kernel *out);
void ocl_planned_kernel_release(ocl_planned_kernel *k);
/* A planned family's build options: -D<MACRO>_LOCAL_BYTES and _MAX_GROUP
 * from the device, <MACRO>_UNROLL_EPILOGUE=0 on CPU devices (PoCL keeps the
 * accumulators in memory anyway, and an unrolled epilogue costs its compiler
 * seconds per kernel) and, on NVIDIA (nv_options), a register cap: the
 * variable regs_env (32..255) or default_regs. */
void ocl_planned_build_options(const fp_device_info *info, cl_device_id device, bool nv_options,
                               const char *macro, const char *regs_env, uint32_t default_regs,
                               char *buf, size_t cap);

#endif
