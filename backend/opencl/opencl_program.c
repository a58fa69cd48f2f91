/* fuseport OpenCL backend: the programs, one per kernel family, built from
 * the embedded sources the first time one of their kernels is asked for, and
 * the cache of their kernels (with the row kernels' specialisations). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CL/cl.h>

#include "opencl_internal.h"
#include "opencl_planned.h" /* ocl_kernel_listed */

/* The embedded programs, one per family of kernels.def. */
#include "fp_cl_attention.h"
#include "fp_cl_compress.h"
#include "fp_cl_conv.h"
#include "fp_cl_elementwise.h"
#include "fp_cl_gemm.h"
#include "fp_cl_horizontal.h"
#include "fp_cl_prim.h"
#include "fp_cl_reduce.h"

static const char *const family_sources[FPF_COUNT] = {
#define FP_KERNEL_FAMILY(family) fp_cl_source_##family,
#include "kernels.def"
#undef FP_KERNEL_FAMILY
};

/* The options every program is built with: OpenCL C 1.2, and no fast-math
 * flag, since results are checked against a float64 reference. */
#define FP_CL_BUILD_OPTIONS "-cl-std=CL1.2"
/* NVIDIA only (cl_nv_compiler_options): without a register cap the compiler
 * may give a kernel more than 64 registers per work-item (seen: 122 to 154
 * for an earlier layernorm), and a group of 1024 work-items (65536
 * registers, a whole SM's file) could then not launch. The cap keeps every
 * kernel launchable at the max_group_size this backend reports; the kernels
 * are written to fit it without spilling (checked with -cl-nv-verbose on an
 * H100, driver 580). */
#define FP_CL_NV_BUILD_OPTIONS " -cl-nv-maxrregcount=64"

/* ---- programs and kernels ------------------------------------------------------------ */

/* Build log of the program on the device (heap; "" when unavailable). */
static char *build_log(cl_program program, cl_device_id device) {
  size_t size = 0;
  char *log = NULL;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) == CL_SUCCESS)
    log = calloc(size + 1, 1);
  if (log != NULL &&
      clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log, NULL) != CL_SUCCESS)
    log[0] = '\0';
  return log != NULL ? log : calloc(1, 1);
}

/* FUSEPORT_OPENCL_BUILD_LOG: a diagnostic the user asked for; a file that
 * cannot be opened is ignored rather than failing the build. */
static void append_build_log(cl_program program, cl_device_id device, const char *family,
                             const char *options) {
  const char *path = getenv("FUSEPORT_OPENCL_BUILD_LOG");
  if (path == NULL || *path == '\0')
    return;
  FILE *f = fopen(path, "a");
  if (f == NULL)
    return;
  char *log = build_log(program, device);
  fprintf(f, "== kernels/cl/%s.cl, options \"%s\"\n%s\n", family, options, log);
  free(log);
  fclose(f);
}

/* Builds one family's program and creates its kernels. On failure fills
 * fam->message (heap) and returns the status; touches neither ctx->error nor
 * the thread's error, so that kernel_available can build quietly. */
static fp_status build_family_now(fp_context *ctx, cl_state *cl, fp_kernel_family family) {
  cl_family_state *fam = &cl->families[family];
  const char *fname = fp_kernel_family_name(family);
  char message[FP_ERROR_MESSAGE_BYTES];
  message[0] = '\0';
  fp_status st = FP_OK;
  cl_int err;

  const char *extra = getenv("FUSEPORT_OPENCL_BUILD_OPTIONS");
  char options[1024];
  /* Without the local memory of a _local kernel, a device may fail the
   * whole program's build (NVIDIA's ptxas rejects a kernel that declares
   * more than the limit), so its programs have none. */
  const uint32_t ptx_level = cl->ptx_level;
  char ptx_option[32] = "";
  if (ptx_level > 0)
    snprintf(ptx_option, sizeof ptx_option, " -DFP_NV_PTX=%u", ptx_level);
  /* the gemm, conv and attention families: their tunables' device limits
   * and their own register cap */
  char family_options[256] = "";
  const bool own_nv_options = family == FPF_gemm || family == FPF_conv || family == FPF_attention;
  if (family == FPF_gemm)
    ocl_gemm_build_options(&ctx->info, cl->device, cl->nv_compiler_options, family_options,
                           sizeof family_options);
  else if (family == FPF_conv)
    ocl_conv_build_options(&ctx->info, cl->device, cl->nv_compiler_options, family_options,
                           sizeof family_options);
  else if (family == FPF_attention)
    ocl_attn_build_options(&ctx->info, cl->device, cl->nv_compiler_options, family_options,
                           sizeof family_options);
  snprintf(options, sizeof options, "%s -DFP_ROW_VEC=%u%s%s%s%s%s%s", FP_CL_BUILD_OPTIONS,
           cl->row_vec, cl->local_rows_fit ? "" : " -DFP_LOCAL_ROW_VEC=0",
           cl->nv_compiler_options && !own_nv_options ? FP_CL_NV_BUILD_OPTIONS : "", family_options,
           ptx_option, extra != NULL && *extra != '\0' ? " " : "", extra != NULL ? extra : "");

  const char *source = family_sources[family];
  cl_program program = clCreateProgramWithSource(cl->context, 1, &source, NULL, &err);
  if (err != CL_SUCCESS) {
    snprintf(message, sizeof message, "clCreateProgramWithSource(kernels/cl/%s.cl) failed: %s (%d)",
             fname, ocl_error_name(err), (int)err);
    st = ocl_status_of(err);
    program = NULL;
  }

  double t0 = ocl_now_ms();
  if (st == FP_OK) {
    err = clBuildProgram(program, 1, &cl->device, options, NULL, NULL);
    append_build_log(program, cl->device, fname, options);
    if (err != CL_SUCCESS) {
      char *log = build_log(program, cl->device);
      snprintf(message, sizeof message,
               "clBuildProgram(kernels/cl/%s.cl, \"%s\") failed: %s (%d) on '%s'; build log:\n%s",
               fname, options, ocl_error_name(err), (int)err, ctx->info.name, log);
      free(log);
      st = FP_ERR_BUILD;
    }
  }

  /* the kernels the program has: an absent one is not asked for (a failing
   * clCreateKernel, which Oclgrind's --check-api reports) */
  char *names = NULL;
  if (st == FP_OK) {
    size_t size = 0;
    err = clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &size);
    names = err == CL_SUCCESS ? calloc(size + 1, 1) : NULL;
    if (names != NULL)
      err = clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, size, names, NULL);
    if (err != CL_SUCCESS || names == NULL) {
      snprintf(message, sizeof message,
               "clGetProgramInfo(kernels/cl/%s.cl, CL_PROGRAM_KERNEL_NAMES) failed: %s (%d)", fname,
               ocl_error_name(err), (int)err);
      st = names == NULL && err == CL_SUCCESS ? FP_ERR_OUT_OF_MEMORY : FP_ERR_BACKEND;
    }
  }
  char missing[1024] = "";
  for (int k = 0; k < FPK_COUNT && st == FP_OK; ++k) {
    fp_kernel_id id = (fp_kernel_id)k;
    if (fp_kernel_family_of(id) != family)
      continue;
    if (!ocl_kernel_listed(names, fp_kernel_name(id))) {
      /* an optional kernel may be absent; a required one makes the program
       * unusable (reported once all kernels have been looked at) */
      if (fp_kernel_required(id))
        ocl_appendf(missing, sizeof missing, "%s'%s'", missing[0] != '\0' ? ", " : "",
                    fp_kernel_name(id));
      continue;
    }
    cl_kernel kernel = clCreateKernel(program, fp_kernel_name(id), &err);
    if (err != CL_SUCCESS) {
      snprintf(message, sizeof message, "clCreateKernel(%s, kernels/cl/%s.cl) failed: %s (%d)",
               fp_kernel_name(id), fname, ocl_error_name(err), (int)err);
      st = ocl_status_of(err);
      break;
    }
    cl->kernels[k] = kernel;
    size_t limit = 0;
    err = clGetKernelWorkGroupInfo(kernel, cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof limit,
                                   &limit, NULL);
    if (err != CL_SUCCESS) {
      snprintf(message, sizeof message,
               "clGetKernelWorkGroupInfo(%s, CL_KERNEL_WORK_GROUP_SIZE) failed: %s (%d)",
               fp_kernel_name(id), ocl_error_name(err), (int)err);
      st = FP_ERR_BACKEND;
      break;
    }
    cl->kernel_group_limit[k] = limit;
  }
  /* the specialisations of the row kernels, where the program has them,
   * and the local memory of each and of the kernel itself (plan_rows) */
  for (int k = 0; k < FPK_COUNT && st == FP_OK; ++k) {
    int m_arg, n_arg;
    if (fp_kernel_family_of((fp_kernel_id)k) != family || cl->kernels[k] == NULL ||
        !ocl_rows_mn_args((fp_kernel_id)k, &m_arg, &n_arg))
      continue;
    for (int v = 0; v < OCL_ROW_KERNELS && st == FP_OK; ++v) {
      cl->row_local_bytes[k][v] = -1;
      char vname[128];
      snprintf(vname, sizeof vname, "%s%s", fp_kernel_name((fp_kernel_id)k),
               ocl_row_kernel_suffix((ocl_row_kernel)v));
      cl_kernel kernel = cl->kernels[k];
      if (v != OCL_ROW_GENERIC) {
        if (!ocl_kernel_listed(names, vname))
          continue; /* none: plan_rows launches _stream or the generic kernel */
        kernel = clCreateKernel(program, vname, &err);
        if (err != CL_SUCCESS) {
          snprintf(message, sizeof message, "clCreateKernel(%s, kernels/cl/%s.cl) failed: %s (%d)",
                   vname, fname, ocl_error_name(err), (int)err);
          st = ocl_status_of(err);
          break;
        }
        cl->row_kernels[k][v] = kernel;
      }
      cl_ulong local = 0;
      err = clGetKernelWorkGroupInfo(kernel, cl->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local,
                                     &local, NULL);
      if (err != CL_SUCCESS) {
        snprintf(message, sizeof message,
                 "clGetKernelWorkGroupInfo(%s, CL_KERNEL_LOCAL_MEM_SIZE) failed: %s (%d)", vname,
                 ocl_error_name(err), (int)err);
        st = FP_ERR_BACKEND;
        break;
      }
      cl->row_local_bytes[k][v] = local <= INT64_MAX ? (int64_t)local : INT64_MAX;
    }
  }
  if (st == FP_OK && missing[0] != '\0') {
    snprintf(message, sizeof message,
             "kernels/cl/%s.cl built on '%s' but lacks required kernel(s) %s (kernels.def)", fname,
             ctx->info.name, missing);
    st = FP_ERR_BUILD;
  }
  free(names);
  fam->build_ms = ocl_now_ms() - t0;

  if (st != FP_OK) {
    for (int k = 0; k < FPK_COUNT; ++k) {
      if (fp_kernel_family_of((fp_kernel_id)k) != family)
        continue;
      if (cl->kernels[k] != NULL) {
        clReleaseKernel(cl->kernels[k]);
        cl->kernels[k] = NULL;
      }
      for (int v = 0; v < OCL_ROW_VARIANTS; ++v) {
        if (cl->row_kernels[k][v] != NULL) {
          clReleaseKernel(cl->row_kernels[k][v]);
          cl->row_kernels[k][v] = NULL;
        }
      }
    }
    if (program != NULL)
      clReleaseProgram(program);
    fam->message = malloc(strlen(message) + 1);
    if (fam->message != NULL)
      memcpy(fam->message, message, strlen(message) + 1);
    return st;
  }
  fam->program = program;
  return FP_OK;
}

/* The family's build outcome, building it on first need. */
static fp_status ensure_family(fp_context *ctx, cl_state *cl, fp_kernel_family family) {
  cl_family_state *fam = &cl->families[family];
  if (!fam->attempted) {
    fam->attempted = true;
    fam->status = build_family_now(ctx, cl, family);
    /* The cache hints are inline PTX, which a driver older than the hints
     * rejects: unless FUSEPORT_OPENCL_PTX asked for them, build without,
     * from here on (FUSEPORT_OPENCL_BUILD_LOG keeps the failed build's log). */
    const char *asked = getenv("FUSEPORT_OPENCL_PTX");
    if (fam->status == FP_ERR_BUILD && cl->ptx_level > 0 && (asked == NULL || *asked == '\0')) {
      free(fam->message);
      fam->message = NULL;
      cl->ptx_level = 0;
      fam->status = build_family_now(ctx, cl, family);
    }
  }
  return fam->status;
}

/* ensure_family, and on failure the family's message on the context. */
fp_status ocl_require_family(fp_context *ctx, cl_state *cl, fp_kernel_id id) {
  fp_kernel_family family = fp_kernel_family_of(id);
  fp_status st = ensure_family(ctx, cl, family);
  if (st != FP_OK) {
    const char *message = cl->families[family].message;
    return fp_ctx_error(ctx, st, "%s",
                        message != NULL ? message : "OpenCL program build failed (no message)");
  }
  return FP_OK;
}

/* A required kernel is reported available even when its family failed to
 * build: the shared layer answers "not implemented" for unavailable kernels
 * before calling kernel_prepare or launch, and that would hide the build log.
 * Reporting it available lets prepare/launch raise the FP_ERR_BUILD with the
 * log. An optional kernel of a failed family is simply unavailable. */
bool ocl_kernel_available(fp_context *ctx, fp_kernel_id id) {
  cl_state *cl = ocl_state_of(ctx);
  if (ensure_family(ctx, cl, fp_kernel_family_of(id)) != FP_OK)
    return fp_kernel_required(id);
  return cl->kernels[id] != NULL;
}

fp_status ocl_kernel_prepare(fp_context *ctx, fp_kernel_id id, double *compile_ms) {
  cl_state *cl = ocl_state_of(ctx);
  fp_status st = ocl_require_family(ctx, cl, id);
  if (st != FP_OK)
    return st;
  if (cl->kernels[id] == NULL)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "kernel '%s' is not in kernels/cl/%s.cl",
                        fp_kernel_name(id), fp_kernel_family_name(fp_kernel_family_of(id)));
  *compile_ms = cl->families[fp_kernel_family_of(id)].build_ms;
  return FP_OK;
}
