/* fuseport OpenCL backend: the planned families' shared kernel setup
 * (opencl_planned.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_gemm.h" /* ocl_error_name */
#include "opencl_planned.h"

fp_status ocl_planned_error(fp_context *ctx, cl_int err, const char *what, const char *name) {
  return fp_ctx_error(
      ctx, err == CL_MEM_OBJECT_ALLOCATION_FAILURE ? FP_ERR_OUT_OF_MEMORY : FP_ERR_BACKEND,
      "%s(%s) failed: %s (%d)", what, name, ocl_error_name(err), (int)err);
}

fp_status ocl_planned_limits_get(fp_context *ctx, cl_device_id device, cl_program program,
                                 const char *family, ocl_planned_limits *out) {
  memset(out, 0, sizeof *out);
  if (program == NULL)
    return fp_ctx_error(ctx, FP_ERR_INTERNAL, "opencl %s: the %s program is not built", family,
                        family);
  cl_int err =
      clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof out->items, out->items, NULL);
  if (err != CL_SUCCESS)
    return ocl_planned_error(ctx, err, "clGetDeviceInfo", "CL_DEVICE_MAX_WORK_ITEM_SIZES");
  err = clGetDeviceInfo(device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof out->local, &out->local, NULL);
  if (err != CL_SUCCESS)
    return ocl_planned_error(ctx, err, "clGetDeviceInfo", "CL_DEVICE_LOCAL_MEM_SIZE");
  err = clGetDeviceInfo(device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof out->units, &out->units, NULL);
  if (err != CL_SUCCESS)
    return ocl_planned_error(ctx, err, "clGetDeviceInfo", "CL_DEVICE_MAX_COMPUTE_UNITS");
  if (out->units == 0)
    out->units = 1;
  size_t names_size = 0;
  err = clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &names_size);
  out->names = err == CL_SUCCESS ? calloc(names_size + 1, 1) : NULL;
  if (err == CL_SUCCESS && out->names == NULL)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "opencl %s: host allocation failed", family);
  if (err == CL_SUCCESS)
    err = clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, names_size, out->names, NULL);
  if (err != CL_SUCCESS) {
    ocl_planned_limits_free(out);
    return ocl_planned_error(ctx, err, "clGetProgramInfo", "CL_PROGRAM_KERNEL_NAMES");
  }
  return FP_OK;
}

void ocl_planned_limits_free(ocl_planned_limits *l) {
  free(l->names);
  l->names = NULL;
}

void ocl_planned_build_options(const fp_device_info *info, cl_device_id device, bool nv_options,
                               const char *macro, const char *regs_env, uint32_t default_regs,
                               char *buf, size_t cap) {
  char nv[64] = "";
  uint32_t regs = default_regs; /* a bad value is reported at the first launch */
  if (!ocl_env_u32(regs_env, 32, 255, false, default_regs, &regs))
    regs = default_regs;
  if (nv_options)
    snprintf(nv, sizeof nv, " -cl-nv-maxrregcount=%u", regs);
  cl_device_type type = 0;
  const bool cpu =
      clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL) == CL_SUCCESS &&
      (type & CL_DEVICE_TYPE_CPU) != 0;
  snprintf(buf, cap, " -D%s_LOCAL_BYTES=%llu -D%s_MAX_GROUP=%u%s%s%s", macro,
           (unsigned long long)info->local_mem_bytes, macro, info->max_group_size, cpu ? " -D" : "",
           cpu ? macro : "", cpu ? "_UNROLL_EPILOGUE=0" : "");
  const size_t used = strlen(buf);
  if (used < cap)
    snprintf(buf + used, cap - used, "%s", nv);
}

void ocl_planned_kernel_release(ocl_planned_kernel *k) {
  if (k->kernel != NULL)
    clReleaseKernel(k->kernel);
  k->kernel = NULL;
}

bool ocl_kernel_listed(const char *names, const char *name) {
  const size_t n = strlen(name);
  for (const char *p = names; (p = strstr(p, name)) != NULL; p += n)
    if ((p == names || p[-1] == ';') && (p[n] == '\0' || p[n] == ';'))
      return true;
  return false;
}

fp_status ocl_planned_kernel_make(fp_context *ctx, cl_device_id device, cl_program program,
                                  const ocl_planned_limits *lim, const char *name, uint32_t wx,
                                  uint32_t wy, ocl_planned_kernel *out) {
  const char *names = lim->names;
  const size_t *items = lim->items;
  const cl_ulong device_local = lim->local;
  if (!ocl_kernel_listed(names, name)) {
    snprintf(out->why, sizeof out->why, "%s is not built for this device's limits", name);
    return FP_OK;
  }
  cl_int err;
  cl_kernel k = clCreateKernel(program, name, &err);
  if (err != CL_SUCCESS)
    return ocl_planned_error(ctx, err, "clCreateKernel", name);
  size_t group = 0, multiple = 1;
  cl_ulong local = 0;
  err = clGetKernelWorkGroupInfo(k, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof group, &group, NULL);
  const char *what = "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)";
  if (err == CL_SUCCESS) {
    what = "clGetKernelWorkGroupInfo(CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE)";
    err = clGetKernelWorkGroupInfo(k, device, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                   sizeof multiple, &multiple, NULL);
  }
  if (err == CL_SUCCESS) {
    what = "clGetKernelWorkGroupInfo(CL_KERNEL_LOCAL_MEM_SIZE)";
    err = clGetKernelWorkGroupInfo(k, device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
  }
  if (err != CL_SUCCESS) {
    clReleaseKernel(k);
    return ocl_planned_error(ctx, err, what, name);
  }
  const size_t need = (size_t)wx * wy;
  if (need > group || need > ctx->info.max_group_size || wx > items[0] || wy > items[1] ||
      local > device_local) {
    snprintf(out->why, sizeof out->why,
             "%s: a group of %ux%u needs %zu work-items and %llu bytes of local memory; the "
             "device allows %zu (this kernel), %u (device), %zux%zu per dimension and %llu bytes",
             name, wx, wy, need, (unsigned long long)local, group, ctx->info.max_group_size,
             items[0], items[1], (unsigned long long)device_local);
    clReleaseKernel(k);
    return FP_OK;
  }
  out->kernel = k;
  out->pref_multiple = multiple != 0 ? multiple : 1;
  return FP_OK;
}
