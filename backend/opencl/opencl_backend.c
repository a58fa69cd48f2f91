/* fuseport OpenCL backend: one device of one platform, through the OpenCL 1.2
 * host API and the ICD loader (PoCL on a CPU; NVIDIA, AMD, Intel GPUs).
 *
 * - One context and one in-order command queue with profiling enabled per
 *   fuseport context. A context is meant for one thread at a time; nothing in
 *   here is global except constant tables.
 * - Device code: one OpenCL program per kernel family (kernels/cl/<family>.cl
 *   with fp_device_common.h in front, embedded at build time as
 *   fp_cl_source_<family>), built lazily the first time a kernel of the
 *   family is asked for, then cached with one cl_kernel per kernel id.
 * - Buffers are cl_mem objects; transfers are blocking, fills, copies and
 *   kernels are enqueued.
 * - Events are markers whose completion timestamps give the time between two
 *   records; where a platform cannot time markers, records fall back to
 *   clFinish plus the host's monotonic clock (see the events section).
 *
 * The shared layer (backend.c) has validated every argument before a call
 * lands here; this file only talks to OpenCL and turns its error codes into
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <CL/cl.h>

#include "backend_impl.h"
#include "opencl_attention.h"
#include "opencl_conv.h"
#include "opencl_gemm.h"
#include "opencl_oclgrind.h"
#include "opencl_planned.h" /* ocl_kernel_listed */
#include "opencl_rows.h"

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

/* Vendor device queries (cl_nv_device_attribute_query,
 * cl_amd_device_attribute_query), defined here so that no vendor header is
 * needed. */
#define FP_CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
#define FP_CL_DEVICE_WARP_SIZE_NV 0x4003
#define FP_CL_DEVICE_WAVEFRONT_WIDTH_AMD 0x4043
#define FP_CL_PLATFORM_NOT_FOUND_KHR (-1001)

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

#define FP_CL_DEFAULT_L2_BYTES (4ull << 20)

/* The argument positions of M and N of the planned kernels; false for every
 * other kernel (host geometry). */
static bool rows_mn_args(fp_kernel_id id, int *m_arg, int *n_arg) {
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

/* ---- state ------------------------------------------------------------------ */

typedef struct cl_family_state {
  bool attempted;   /* the build ran (once per context, success or not) */
  fp_status status; /* its outcome */
  char *message;    /* why it failed (heap), re-raised on every later use */
  cl_program program;
  double build_ms; /* clBuildProgram + clCreateKernel wall time */
} cl_family_state;

typedef enum cl_timing_mode {
  CL_TIMING_UNKNOWN = 0, /* not probed yet (no event created) */
  CL_TIMING_MARKERS,     /* profiling timestamps of marker commands */
  CL_TIMING_HOST         /* clFinish + host monotonic clock at each record */
} cl_timing_mode;

typedef struct cl_state {
  cl_platform_id platform;
  cl_device_id device;
  cl_context context;
  cl_command_queue queue;
  uint64_t max_alloc_bytes; /* CL_DEVICE_MAX_MEM_ALLOC_SIZE, for messages */
  bool nv_compiler_options; /* cl_nv_compiler_options */
  /* The FP_NV_PTX level the programs are built with (kernels/cl/common.cl:
   * inline-PTX cache hints): the device's (NVIDIA's compiler: 1, and 2 from
   * compute capability 8.0), capped by FUSEPORT_OPENCL_PTX; 0 elsewhere.
   * Lowered to 0 for the rest of the context if a program fails to build
   * with it (a driver whose PTX is older than the hints), and rebuilt. */
  uint32_t ptx_level;
  cl_timing_mode timing;
  cl_family_state families[FPF_COUNT];
  cl_kernel kernels[FPK_COUNT];         /* NULL: not built yet, or absent */
  size_t kernel_group_limit[FPK_COUNT]; /* CL_KERNEL_WORK_GROUP_SIZE, for messages */
  bool host_geometry;                   /* FUSEPORT_OPENCL_HOST_GEOMETRY: no plan_rows */
  /* the specialisations of a row kernel, by ocl_row_kernel; NULL where the
   * program has none */
  cl_kernel row_kernels[FPK_COUNT][OCL_ROW_VARIANTS];
  /* CL_KERNEL_LOCAL_MEM_SIZE of a row kernel's specialisations and of the
   * kernel itself (OCL_ROW_GENERIC), -1 where absent (opencl_rows.c) */
  int64_t row_local_bytes[FPK_COUNT][OCL_ROW_KERNELS];
  uint32_t row_vec;        /* FUSEPORT_OPENCL_ROW_VEC */
  uint32_t rows_max_group; /* FUSEPORT_OPENCL_ROWS_MAX_GROUP; 0: plan_rows' rule */
  uint32_t stream_group;   /* FUSEPORT_OPENCL_STREAM_GROUP; 0: plan_rows' rule */
  bool generic_rows;       /* FUSEPORT_OPENCL_ROW_VARIANTS=0 */
  bool row_local;          /* FUSEPORT_OPENCL_ROW_LOCAL (default 1) */
  bool stream_back;        /* FUSEPORT_OPENCL_STREAM_BACK (default 1) */
  /* CL_DEVICE_LOCAL_MEM_SIZE holds FP_CL_PREFIX_ROW_BYTES; where it does not,
   * the programs are built without their _local kernels */
  bool local_rows_fit;
  ocl_gemm *gemm; /* the gemm family's planner and the GEMM library (opencl_gemm.c) */
  ocl_conv *conv; /* the conv family's planner (opencl_conv.c) */
  ocl_attn *attn; /* the attention family's planner (opencl_attention.c) */
  /* Oclgrind's mode (opencl_oclgrind.h; FUSEPORT_OPENCL_OCLGRIND): fills,
   * copies and partial writes through kernels, no first touch, released
   * buffers kept in `kept` until the context ends */
  bool oclgrind;
  ocl_xfer *xfer;
  cl_mem *kept;
  size_t nkept, kept_cap;
} cl_state;

/* What an fp_event handle points to. */
typedef struct cl_timestamp {
  cl_event marker; /* CL_TIMING_MARKERS: the last recorded marker (or NULL) */
  double host_ms;  /* CL_TIMING_HOST: the clock at the last record */
} cl_timestamp;

static cl_state *state_of(fp_context *ctx) { return (cl_state *)ctx->impl; }

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- errors --------------------------------------------------------------------- */

typedef struct cl_error_name {
  cl_int code;
  const char *name;
} cl_error_name;

/* Numeric codes rather than the header's macros, so that the 2.x codes and
 * the extension ones are named whatever CL_TARGET_OPENCL_VERSION says. */
static const cl_error_name cl_error_names[] = {
    {0, "CL_SUCCESS"},
    {-1, "CL_DEVICE_NOT_FOUND"},
    {-2, "CL_DEVICE_NOT_AVAILABLE"},
    {-3, "CL_COMPILER_NOT_AVAILABLE"},
    {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
    {-5, "CL_OUT_OF_RESOURCES"},
    {-6, "CL_OUT_OF_HOST_MEMORY"},
    {-7, "CL_PROFILING_INFO_NOT_AVAILABLE"},
    {-8, "CL_MEM_COPY_OVERLAP"},
    {-9, "CL_IMAGE_FORMAT_MISMATCH"},
    {-10, "CL_IMAGE_FORMAT_NOT_SUPPORTED"},
    {-11, "CL_BUILD_PROGRAM_FAILURE"},
    {-12, "CL_MAP_FAILURE"},
    {-13, "CL_MISALIGNED_SUB_BUFFER_OFFSET"},
    {-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
    {-15, "CL_COMPILE_PROGRAM_FAILURE"},
    {-16, "CL_LINKER_NOT_AVAILABLE"},
    {-17, "CL_LINK_PROGRAM_FAILURE"},
    {-18, "CL_DEVICE_PARTITION_FAILED"},
    {-19, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE"},
    {-30, "CL_INVALID_VALUE"},
    {-31, "CL_INVALID_DEVICE_TYPE"},
    {-32, "CL_INVALID_PLATFORM"},
    {-33, "CL_INVALID_DEVICE"},
    {-34, "CL_INVALID_CONTEXT"},
    {-35, "CL_INVALID_QUEUE_PROPERTIES"},
    {-36, "CL_INVALID_COMMAND_QUEUE"},
    {-37, "CL_INVALID_HOST_PTR"},
    {-38, "CL_INVALID_MEM_OBJECT"},
    {-39, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR"},
    {-40, "CL_INVALID_IMAGE_SIZE"},
    {-41, "CL_INVALID_SAMPLER"},
    {-42, "CL_INVALID_BINARY"},
    {-43, "CL_INVALID_BUILD_OPTIONS"},
    {-44, "CL_INVALID_PROGRAM"},
    {-45, "CL_INVALID_PROGRAM_EXECUTABLE"},
    {-46, "CL_INVALID_KERNEL_NAME"},
    {-47, "CL_INVALID_KERNEL_DEFINITION"},
    {-48, "CL_INVALID_KERNEL"},
    {-49, "CL_INVALID_ARG_INDEX"},
    {-50, "CL_INVALID_ARG_VALUE"},
    {-51, "CL_INVALID_ARG_SIZE"},
    {-52, "CL_INVALID_KERNEL_ARGS"},
    {-53, "CL_INVALID_WORK_DIMENSION"},
    {-54, "CL_INVALID_WORK_GROUP_SIZE"},
    {-55, "CL_INVALID_WORK_ITEM_SIZE"},
    {-56, "CL_INVALID_GLOBAL_OFFSET"},
    {-57, "CL_INVALID_EVENT_WAIT_LIST"},
    {-58, "CL_INVALID_EVENT"},
    {-59, "CL_INVALID_OPERATION"},
    {-60, "CL_INVALID_GL_OBJECT"},
    {-61, "CL_INVALID_BUFFER_SIZE"},
    {-62, "CL_INVALID_MIP_LEVEL"},
    {-63, "CL_INVALID_GLOBAL_WORK_SIZE"},
    {-64, "CL_INVALID_PROPERTY"},
    {-65, "CL_INVALID_IMAGE_DESCRIPTOR"},
    {-66, "CL_INVALID_COMPILER_OPTIONS"},
    {-67, "CL_INVALID_LINKER_OPTIONS"},
    {-68, "CL_INVALID_DEVICE_PARTITION_COUNT"},
    {-69, "CL_INVALID_PIPE_SIZE"},
    {-70, "CL_INVALID_DEVICE_QUEUE"},
    {-71, "CL_INVALID_SPEC_ID"},
    {-72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED"},
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
    /* NVIDIA's driver reports a kernel that faulted (an out-of-bounds access,
     * typically) with this undocumented code at the next synchronisation. */
    {-9999, "NVIDIA_KERNEL_FAULT"},
};

static const char *cl_error_string(cl_int code) {
  for (size_t k = 0; k < sizeof cl_error_names / sizeof cl_error_names[0]; ++k)
    if (cl_error_names[k].code == code)
      return cl_error_names[k].name;
  return "CL_UNKNOWN_ERROR";
}

const char *ocl_error_name(cl_int err) { return cl_error_string(err); }

/* Records "<call> failed: CL_NAME (code)" on the context; `call` is a printf
 * format naming the call and what it was doing. */
static fp_status cl_fail(fp_context *ctx, fp_status status, cl_int err, const char *call, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static fp_status cl_fail(fp_context *ctx, fp_status status, cl_int err, const char *call, ...) {
  char what[1024];
  va_list ap;
  va_start(ap, call);
  vsnprintf(what, sizeof what, call, ap);
  va_end(ap);
  return fp_ctx_error(ctx, status, "%s failed: %s (%d)", what, cl_error_string(err), (int)err);
}

/* A failure that means device memory ran out, wherever it surfaces. */
static bool is_out_of_memory(cl_int err) { return err == CL_MEM_OBJECT_ALLOCATION_FAILURE; }

static fp_status status_of(cl_int err) {
  return is_out_of_memory(err) ? FP_ERR_OUT_OF_MEMORY : FP_ERR_BACKEND;
}

/* ---- strings ------------------------------------------------------------------------ */

/* Appends to a fixed buffer, truncating silently (used for listings in
 * error messages). */
static void appendf(char *buf, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void appendf(char *buf, size_t cap, const char *fmt, ...) {
  size_t used = strlen(buf);
  if (used + 1 >= cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, cap - used, fmt, ap);
  va_end(ap);
}

static int lower_ascii(int c) { return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c; }

/* Case-insensitive substring test; a NULL or empty needle matches. */
static bool contains_ignore_case(const char *haystack, const char *needle) {
  if (needle == NULL || *needle == '\0')
    return true;
  size_t n = strlen(needle);
  for (const char *h = haystack; *h != '\0'; ++h) {
    size_t k = 0;
    while (k < n && h[k] != '\0' &&
           lower_ascii((unsigned char)h[k]) == lower_ascii((unsigned char)needle[k]))
      ++k;
    if (k == n)
      return true;
  }
  return false;
}

/* Queries a string of a platform or device into a heap buffer (*out; the
 * caller frees it). */
static cl_int platform_string(cl_platform_id platform, cl_platform_info what, char **out) {
  *out = NULL;
  size_t size = 0;
  cl_int err = clGetPlatformInfo(platform, what, 0, NULL, &size);
  if (err != CL_SUCCESS)
    return err;
  char *text = calloc(size + 1, 1);
  if (text == NULL)
    return CL_OUT_OF_HOST_MEMORY;
  err = clGetPlatformInfo(platform, what, size, text, NULL);
  if (err != CL_SUCCESS) {
    free(text);
    return err;
  }
  *out = text;
  return CL_SUCCESS;
}

static cl_int device_string(cl_device_id device, cl_device_info what, char **out) {
  *out = NULL;
  size_t size = 0;
  cl_int err = clGetDeviceInfo(device, what, 0, NULL, &size);
  if (err != CL_SUCCESS)
    return err;
  char *text = calloc(size + 1, 1);
  if (text == NULL)
    return CL_OUT_OF_HOST_MEMORY;
  err = clGetDeviceInfo(device, what, size, text, NULL);
  if (err != CL_SUCCESS) {
    free(text);
    return err;
  }
  *out = text;
  return CL_SUCCESS;
}

/* Whether a space-separated extension list names `ext` exactly. */
static bool has_extension(const char *extensions, const char *ext) {
  size_t n = strlen(ext);
  for (const char *p = extensions; (p = strstr(p, ext)) != NULL; p += n) {
    bool starts = p == extensions || p[-1] == ' ';
    bool ends = p[n] == '\0' || p[n] == ' ';
    if (starts && ends)
      return true;
  }
  return false;
}

/* ---- device discovery ---------------------------------------------------------------- */

/* All platform ids (heap array in *out, count in *count). No platform at all
 * (no ICD registered) is not an error: *count is 0. */
static cl_int list_platforms(cl_platform_id **out, cl_uint *count) {
  *out = NULL;
  *count = 0;
  cl_uint n = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &n);
  if (err == FP_CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && n == 0))
    return CL_SUCCESS;
  if (err != CL_SUCCESS)
    return err;
  cl_platform_id *ids = calloc(n, sizeof *ids);
  if (ids == NULL)
    return CL_OUT_OF_HOST_MEMORY;
  err = clGetPlatformIDs(n, ids, NULL);
  if (err != CL_SUCCESS) {
    free(ids);
    return err;
  }
  *out = ids;
  *count = n;
  return CL_SUCCESS;
}

/* The devices of a platform (heap array); none is not an error. */
static cl_int list_devices(cl_platform_id platform, cl_device_id **out, cl_uint *count) {
  *out = NULL;
  *count = 0;
  cl_uint n = 0;
  cl_int err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, NULL, &n);
  if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && n == 0))
    return CL_SUCCESS;
  if (err != CL_SUCCESS)
    return err;
  cl_device_id *ids = calloc(n, sizeof *ids);
  if (ids == NULL)
    return CL_OUT_OF_HOST_MEMORY;
  err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, ids, NULL);
  if (err != CL_SUCCESS) {
    free(ids);
    return err;
  }
  *out = ids;
  *count = n;
  return CL_SUCCESS;
}

static int ocl_device_count(const char *platform) {
  cl_platform_id *platforms = NULL;
  cl_uint nplatforms = 0;
  if (list_platforms(&platforms, &nplatforms) != CL_SUCCESS)
    return 0;
  int total = 0;
  for (cl_uint p = 0; p < nplatforms; ++p) {
    char *name = NULL;
    if (platform_string(platforms[p], CL_PLATFORM_NAME, &name) != CL_SUCCESS)
      continue;
    bool match = contains_ignore_case(name, platform);
    free(name);
    cl_uint ndevices = 0;
    if (match && clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, NULL, &ndevices) == CL_SUCCESS)
      total += (int)ndevices;
  }
  free(platforms);
  return total;
}

/* ---- init and shutdown ------------------------------------------------------------------- */

static void release_state(cl_state *cl) {
  if (cl == NULL)
    return;
  if (cl->queue != NULL)
    clFinish(cl->queue); /* nothing may still run on what is released below */
  ocl_gemm_destroy(cl->gemm);
  ocl_conv_destroy(cl->conv);
  ocl_attn_destroy(cl->attn);
  ocl_xfer_destroy(cl->xfer);
  for (size_t k = 0; k < cl->nkept; ++k)
    clReleaseMemObject(cl->kept[k]);
  free(cl->kept);
  for (int k = 0; k < FPK_COUNT; ++k) {
    if (cl->kernels[k] != NULL)
      clReleaseKernel(cl->kernels[k]);
    for (int v = 0; v < OCL_ROW_VARIANTS; ++v)
      if (cl->row_kernels[k][v] != NULL)
        clReleaseKernel(cl->row_kernels[k][v]);
  }
  for (int f = 0; f < FPF_COUNT; ++f) {
    if (cl->families[f].program != NULL)
      clReleaseProgram(cl->families[f].program);
    free(cl->families[f].message);
  }
  if (cl->queue != NULL)
    clReleaseCommandQueue(cl->queue);
  if (cl->context != NULL)
    clReleaseContext(cl->context);
  free(cl);
}

/* Fills ctx->info from the chosen device. */
static fp_status query_device(fp_context *ctx, cl_state *cl) {
  fp_device_info *info = &ctx->info;
  char *text = NULL;
  cl_int err;

#define FP_DEVICE_STRING(param, field)                                                             \
  do {                                                                                             \
    err = device_string(cl->device, param, &text);                                                 \
    if (err != CL_SUCCESS)                                                                         \
      return cl_fail(ctx, FP_ERR_BACKEND, err, "clGetDeviceInfo(" #param ")");                     \
    fp_copy_string(info->field, sizeof info->field, text);                                         \
    free(text);                                                                                    \
  } while (0)
  FP_DEVICE_STRING(CL_DEVICE_NAME, name);
  FP_DEVICE_STRING(CL_DEVICE_VENDOR, vendor);
  FP_DEVICE_STRING(CL_DRIVER_VERSION, driver_version);
  FP_DEVICE_STRING(CL_DEVICE_VERSION, api_version);
#undef FP_DEVICE_STRING

  char *platform_name = NULL, *platform_version = NULL;
  err = platform_string(cl->platform, CL_PLATFORM_NAME, &platform_name);
  if (err == CL_SUCCESS)
    err = platform_string(cl->platform, CL_PLATFORM_VERSION, &platform_version);
  if (err != CL_SUCCESS) {
    free(platform_name);
    return cl_fail(ctx, FP_ERR_BACKEND, err, "clGetPlatformInfo(CL_PLATFORM_NAME/VERSION)");
  }
  snprintf(info->platform, sizeof info->platform, "%s %s", platform_name, platform_version);
  free(platform_name);
  free(platform_version);

  cl_ulong global_mem = 0, cache = 0, local_mem = 0, max_alloc = 0;
  size_t max_group = 0;
  cl_uint units = 0, dims = 0;
  size_t item_sizes[16] = {0};
  struct {
    cl_device_info param;
    const char *name;
    void *value;
    size_t size;
  } queries[] = {
      {CL_DEVICE_GLOBAL_MEM_SIZE, "CL_DEVICE_GLOBAL_MEM_SIZE", &global_mem, sizeof global_mem},
      {CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, "CL_DEVICE_GLOBAL_MEM_CACHE_SIZE", &cache, sizeof cache},
      {CL_DEVICE_LOCAL_MEM_SIZE, "CL_DEVICE_LOCAL_MEM_SIZE", &local_mem, sizeof local_mem},
      {CL_DEVICE_MAX_MEM_ALLOC_SIZE, "CL_DEVICE_MAX_MEM_ALLOC_SIZE", &max_alloc, sizeof max_alloc},
      {CL_DEVICE_MAX_WORK_GROUP_SIZE, "CL_DEVICE_MAX_WORK_GROUP_SIZE", &max_group,
       sizeof max_group},
      {CL_DEVICE_MAX_COMPUTE_UNITS, "CL_DEVICE_MAX_COMPUTE_UNITS", &units, sizeof units},
      {CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, "CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS", &dims,
       sizeof dims},
  };
  for (size_t q = 0; q < sizeof queries / sizeof queries[0]; ++q) {
    err = clGetDeviceInfo(cl->device, queries[q].param, queries[q].size, queries[q].value, NULL);
    if (err != CL_SUCCESS)
      return cl_fail(ctx, FP_ERR_BACKEND, err, "clGetDeviceInfo(%s)", queries[q].name);
  }
  if (dims < 1 || dims > 16)
    dims = dims < 1 ? 1 : 16;
  err = clGetDeviceInfo(cl->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof(size_t),
                        item_sizes, NULL);
  if (err != CL_SUCCESS)
    return cl_fail(ctx, FP_ERR_BACKEND, err, "clGetDeviceInfo(CL_DEVICE_MAX_WORK_ITEM_SIZES)");

  info->global_mem_bytes = global_mem;
  info->l2_cache_bytes = cache != 0 ? cache : FP_CL_DEFAULT_L2_BYTES;
  /* NVIDIA's OpenCL reports a 4 MiB "global memory cache" on an H100 whose L2
   * is 50 MiB; the benchmark flushes 2x this number, so take an upper bound
   * of current NVIDIA L2 sizes (A100 40, H100 50, RTX 4090 72 MiB) instead.
   * Flushing too much costs time, flushing too little times a warm cache. */
  if (strstr(info->vendor, "NVIDIA") != NULL && info->l2_cache_bytes < (96ull << 20))
    info->l2_cache_bytes = 96ull << 20;
  info->local_mem_bytes = local_mem;
  /* 1024 at most (the kernels size their local scratch for it); also within
   * the first dimension's item limit, which 1-D launches are bound by. */
  size_t group = max_group < 1024 ? max_group : 1024;
  if (item_sizes[0] != 0 && item_sizes[0] < group)
    group = item_sizes[0];
  info->max_group_size = (uint32_t)group;
  info->compute_units = units;
  info->cc_major = info->cc_minor = 0;
  cl->max_alloc_bytes = max_alloc;
  ctx->device_mem_limit = global_mem;

  /* Warp/wavefront width where the vendor reports it; 1 otherwise. */
  err = device_string(cl->device, CL_DEVICE_EXTENSIONS, &text);
  if (err != CL_SUCCESS)
    return cl_fail(ctx, FP_ERR_BACKEND, err, "clGetDeviceInfo(CL_DEVICE_EXTENSIONS)");
  cl_uint width = 0;
  if (has_extension(text, "cl_nv_device_attribute_query"))
    err = clGetDeviceInfo(cl->device, FP_CL_DEVICE_WARP_SIZE_NV, sizeof width, &width, NULL);
  else if (has_extension(text, "cl_amd_device_attribute_query"))
    err = clGetDeviceInfo(cl->device, FP_CL_DEVICE_WAVEFRONT_WIDTH_AMD, sizeof width, &width, NULL);
  info->subgroup_width = (err == CL_SUCCESS && width != 0) ? width : 1;
  cl->nv_compiler_options = has_extension(text, "cl_nv_compiler_options");
  ocl_gemm_device_info(info, has_extension(text, "cl_khr_fp16"));
  /* Inline PTX is NVIDIA's compiler's; the L2 cache policies of level 2
   * need sm_80. A device that does not answer gets level 1 (PTX 2.0). */
  uint32_t ptx_device = 0;
  if (cl->nv_compiler_options && has_extension(text, "cl_nv_device_attribute_query")) {
    cl_uint cc_major = 0;
    err = clGetDeviceInfo(cl->device, FP_CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof cc_major,
                          &cc_major, NULL);
    ptx_device = err == CL_SUCCESS && cc_major >= 8 ? 2 : 1;
  }
  if (cl->ptx_level > ptx_device)
    cl->ptx_level = ptx_device;
  free(text);
  return FP_OK;
}

/* An unsigned tuning variable: `fallback` when unset or empty; false when it
 * is not a whole number in [lo, hi] (or not a power of two, if asked). */
bool ocl_env_u32(const char *name, uint32_t lo, uint32_t hi, bool pow2, uint32_t fallback,
                 uint32_t *value) {
  *value = fallback;
  const char *text = getenv(name);
  if (text == NULL || *text == '\0')
    return true;
  char *end = NULL;
  const unsigned long v = strtoul(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi || (pow2 && (v & (v - 1)) != 0))
    return false;
  *value = (uint32_t)v;
  return true;
}

static const char *env_or_unset(const char *name) {
  const char *text = getenv(name);
  return text != NULL ? text : "(unset)";
}

/* Creates the context and the queue on the chosen device. */
static fp_status open_device(fp_context *ctx, cl_platform_id platform, cl_device_id device) {
  cl_state *cl = calloc(1, sizeof *cl);
  if (cl == NULL)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "opencl backend: host allocation failed");
  cl->platform = platform;
  cl->device = device;
  const char *host_geometry = getenv("FUSEPORT_OPENCL_HOST_GEOMETRY");
  cl->host_geometry =
      host_geometry != NULL && *host_geometry != '\0' && strcmp(host_geometry, "0") != 0;
  const char *variants = getenv("FUSEPORT_OPENCL_ROW_VARIANTS");
  cl->generic_rows = variants != NULL && strcmp(variants, "0") == 0;
  fp_status st = FP_OK;
  uint32_t row_local = 1, stream_back = 1;
  cl->ptx_level = 2; /* capped by the device in query_device */
  cl->gemm = ocl_gemm_create();
  cl->conv = ocl_conv_create();
  cl->attn = ocl_attn_create();
  cl->xfer = ocl_xfer_create();
  if (cl->gemm == NULL || cl->conv == NULL || cl->attn == NULL || cl->xfer == NULL) {
    release_state(cl);
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "opencl backend: host allocation failed");
  }
  if (!ocl_env_u32("FUSEPORT_OPENCL_ROW_VEC", 1, 8, false, FP_CL_ROW_VEC, &cl->row_vec) ||
      !ocl_env_u32("FUSEPORT_OPENCL_ROWS_MAX_GROUP", FP_CL_MIN_TEAM, 1024, true, 0,
                   &cl->rows_max_group) ||
      !ocl_env_u32("FUSEPORT_OPENCL_STREAM_GROUP", 32, 1024, true, 0, &cl->stream_group))
    st = fp_ctx_error(
        ctx, FP_ERR_INVALID_ARGUMENT,
        "FUSEPORT_OPENCL_ROW_VEC must be 1..8, FUSEPORT_OPENCL_ROWS_MAX_GROUP a power "
        "of two in 4..1024 and FUSEPORT_OPENCL_STREAM_GROUP one in 32..1024 (got "
        "'%s', '%s', '%s')",
        env_or_unset("FUSEPORT_OPENCL_ROW_VEC"), env_or_unset("FUSEPORT_OPENCL_ROWS_MAX_GROUP"),
        env_or_unset("FUSEPORT_OPENCL_STREAM_GROUP"));
  else if (!ocl_env_u32("FUSEPORT_OPENCL_ROW_LOCAL", 0, 1, false, 1, &row_local))
    st = fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                      "FUSEPORT_OPENCL_ROW_LOCAL must be 0 or 1 (got '%s')",
                      env_or_unset("FUSEPORT_OPENCL_ROW_LOCAL"));
  else if (!ocl_env_u32("FUSEPORT_OPENCL_STREAM_BACK", 0, 1, false, 1, &stream_back))
    st = fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                      "FUSEPORT_OPENCL_STREAM_BACK must be 0 or 1 (got '%s')",
                      env_or_unset("FUSEPORT_OPENCL_STREAM_BACK"));
  else if (!ocl_env_u32("FUSEPORT_OPENCL_PTX", 0, 2, false, 2, &cl->ptx_level))
    st = fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                      "FUSEPORT_OPENCL_PTX must be 0, 1 or 2 (got '%s')",
                      env_or_unset("FUSEPORT_OPENCL_PTX"));
  cl->row_local = row_local != 0;
  cl->stream_back = stream_back != 0;
  if (st == FP_OK)
    st = query_device(ctx, cl);
  bool bad_mode = false;
  if (st == FP_OK)
    cl->oclgrind = ocl_oclgrind_wanted(ctx->info.platform, &bad_mode);
  if (st == FP_OK && bad_mode)
    st = fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                      "FUSEPORT_OPENCL_OCLGRIND must be 0 or 1 (got '%s')",
                      env_or_unset("FUSEPORT_OPENCL_OCLGRIND"));
  if (st != FP_OK) {
    release_state(cl);
    return st;
  }
  cl->local_rows_fit = ctx->info.local_mem_bytes >= FP_CL_PREFIX_ROW_BYTES;
  cl_int err;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
  cl->context = clCreateContext(props, 1, &device, NULL, NULL, &err);
  if (err != CL_SUCCESS) {
    cl->context = NULL;
    release_state(cl);
    return cl_fail(ctx, FP_ERR_BACKEND, err, "clCreateContext(device '%s')", ctx->info.name);
  }
  /* clCreateCommandQueue is the 1.2 call (2.0 deprecates it for
   * clCreateCommandQueueWithProperties, which 1.2 platforms lack). */
  cl->queue = clCreateCommandQueue(cl->context, device, CL_QUEUE_PROFILING_ENABLE, &err);
  if (err != CL_SUCCESS) {
    cl->queue = NULL;
    release_state(cl);
    return cl_fail(ctx, FP_ERR_BACKEND, err, "clCreateCommandQueue(device '%s', profiling)",
                   ctx->info.name);
  }
  ctx->impl = cl;
  return FP_OK;
}

typedef struct device_choice {
  cl_platform_id platform;
  cl_device_id device;
} device_choice;

/* Platforms filtered by opts->platform, their devices by opts->device_name
 * (both case-insensitive substrings), then opts->device_index picks from the
 * filtered list in platform order (-1: the first). */
static fp_status ocl_init(fp_context *ctx, const fp_context_options *opts) {
  if (opts->device_index < -1)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "OpenCL device index %d is invalid (-1 for the first matching device, "
                        "else 0, 1, ...)",
                        opts->device_index);
  cl_platform_id *platforms = NULL;
  cl_uint nplatforms = 0;
  cl_int err = list_platforms(&platforms, &nplatforms);
  if (err != CL_SUCCESS)
    return cl_fail(ctx, FP_ERR_BACKEND, err, "clGetPlatformIDs");
  if (nplatforms == 0)
    return fp_ctx_error(ctx, FP_ERR_NOT_FOUND,
                        "no OpenCL platform found: the ICD loader knows no driver (none "
                        "registered in /etc/OpenCL/vendors, or OCL_ICD_VENDORS points elsewhere)");

  /* Everything that exists, for the messages, and the matching devices. */
  char all[2048] = "", matching[2048] = "";
  device_choice *choices = NULL;
  size_t nchoices = 0, capacity = 0;
  int platforms_matched = 0;
  fp_status st = FP_OK;
  for (cl_uint p = 0; p < nplatforms && st == FP_OK; ++p) {
    char *pname = NULL;
    err = platform_string(platforms[p], CL_PLATFORM_NAME, &pname);
    if (err != CL_SUCCESS) {
      st = cl_fail(ctx, FP_ERR_BACKEND, err, "clGetPlatformInfo(CL_PLATFORM_NAME)");
      break;
    }
    bool platform_match = contains_ignore_case(pname, opts->platform);
    platforms_matched += platform_match;
    appendf(all, sizeof all, "%splatform '%s':", p > 0 ? "; " : "", pname);
    cl_device_id *devices = NULL;
    cl_uint ndevices = 0;
    err = list_devices(platforms[p], &devices, &ndevices);
    if (err != CL_SUCCESS)
      appendf(all, sizeof all, " (clGetDeviceIDs failed: %s)", cl_error_string(err));
    else if (ndevices == 0)
      appendf(all, sizeof all, " (no devices)");
    for (cl_uint d = 0; d < ndevices && st == FP_OK; ++d) {
      char *dname = NULL;
      err = device_string(devices[d], CL_DEVICE_NAME, &dname);
      if (err != CL_SUCCESS) {
        st = cl_fail(ctx, FP_ERR_BACKEND, err, "clGetDeviceInfo(CL_DEVICE_NAME)");
        break;
      }
      appendf(all, sizeof all, "%s '%s'", d > 0 ? "," : "", dname);
      if (platform_match && contains_ignore_case(dname, opts->device_name)) {
        if (nchoices == capacity) {
          size_t grown_capacity = capacity != 0 ? 2 * capacity : 4;
          device_choice *grown = realloc(choices, grown_capacity * sizeof *grown);
          if (grown == NULL) {
            free(dname);
            st = fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "opencl backend: host allocation failed");
            break;
          }
          choices = grown;
          capacity = grown_capacity;
        }
        appendf(matching, sizeof matching, "%s[%zu] '%s' on '%s'", nchoices > 0 ? ", " : "",
                nchoices, dname, pname);
        choices[nchoices].platform = platforms[p];
        choices[nchoices].device = devices[d];
        ++nchoices;
      }
      free(dname);
    }
    free(devices);
    free(pname);
  }
  free(platforms);
  if (st != FP_OK) {
    free(choices);
    return st;
  }

  const char *pfilter = opts->platform != NULL ? opts->platform : "";
  const char *dfilter = opts->device_name != NULL ? opts->device_name : "";
  size_t index = opts->device_index < 0 ? 0 : (size_t)opts->device_index;
  if (platforms_matched == 0)
    st = fp_ctx_error(ctx, FP_ERR_NOT_FOUND, "no OpenCL platform name contains '%s'; present: %s",
                      pfilter, all);
  else if (nchoices == 0)
    st = fp_ctx_error(ctx, FP_ERR_NOT_FOUND,
                      "no OpenCL device name contains '%s' on the platforms matching '%s'; "
                      "present: %s",
                      dfilter, pfilter, all);
  else if (index >= nchoices)
    st = fp_ctx_error(ctx, FP_ERR_NOT_FOUND,
                      "OpenCL device index %d is out of range: %zu device(s) match (platform "
                      "filter '%s', name filter '%s'): %s",
                      opts->device_index, nchoices, pfilter, dfilter, matching);
  if (st != FP_OK) {
    free(choices);
    return st;
  }
  device_choice chosen = choices[index];
  free(choices);
  return open_device(ctx, chosen.platform, chosen.device);
}

static void ocl_shutdown(fp_context *ctx) {
  release_state(state_of(ctx));
  ctx->impl = NULL;
}

/* ---- buffers ------------------------------------------------------------------------------- */

static fp_status alloc_failure(fp_context *ctx, cl_state *cl, uint64_t bytes, const char *call,
                               cl_int err) {
  bool oom = err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
             err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE;
  if (!oom)
    return cl_fail(ctx, FP_ERR_BACKEND, err, "%s(%llu bytes) on '%s'", call,
                   (unsigned long long)bytes, ctx->info.name);
  return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY,
                      "out of device memory: %s(%llu bytes) failed: %s (%d) on '%s' (global "
                      "memory %llu bytes, largest single allocation %llu bytes%s)",
                      call, (unsigned long long)bytes, cl_error_string(err), (int)err,
                      ctx->info.name, (unsigned long long)ctx->info.global_mem_bytes,
                      (unsigned long long)cl->max_alloc_bytes,
                      bytes > cl->max_alloc_bytes ? ", which this request exceeds" : "");
}

static fp_status ocl_alloc(fp_context *ctx, uint64_t bytes, void **handle) {
  cl_state *cl = state_of(ctx);
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
    return cl_fail(ctx, status_of(err), err, "clFinish (before allocating %llu bytes)",
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

static void ocl_release(fp_context *ctx, void *handle) {
  cl_state *cl = state_of(ctx);
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

static ocl_xfer_env xfer_env(const cl_state *cl) {
  const ocl_xfer_env env = {cl->context, cl->device, cl->queue};
  return env;
}

static fp_status ocl_write(fp_context *ctx, void *handle, uint64_t offset, const void *src,
                           uint64_t bytes) {
  cl_state *cl = state_of(ctx);
  if (cl->oclgrind) {
    const ocl_xfer_env env = xfer_env(cl);
    return ocl_xfer_write(ctx, cl->xfer, &env, (cl_mem)handle, offset, src, bytes);
  }
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = chunk_of(bytes - done);
    cl_int err =
        clEnqueueWriteBuffer(state_of(ctx)->queue, (cl_mem)handle, CL_TRUE, (size_t)(offset + done),
                             (size_t)n, (const char *)src + done, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      return cl_fail(ctx, status_of(err), err, "clEnqueueWriteBuffer(%llu bytes at offset %llu)",
                     (unsigned long long)n, (unsigned long long)(offset + done));
    done += n;
  }
  return FP_OK;
}

static fp_status ocl_read(fp_context *ctx, void *handle, uint64_t offset, void *dst,
                          uint64_t bytes) {
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = chunk_of(bytes - done);
    cl_int err =
        clEnqueueReadBuffer(state_of(ctx)->queue, (cl_mem)handle, CL_TRUE, (size_t)(offset + done),
                            (size_t)n, (char *)dst + done, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      return cl_fail(ctx, status_of(err), err, "clEnqueueReadBuffer(%llu bytes at offset %llu)",
                     (unsigned long long)n, (unsigned long long)(offset + done));
    done += n;
  }
  return FP_OK;
}

static fp_status ocl_fill(fp_context *ctx, void *handle, uint64_t offset, uint64_t bytes,
                          const void *pattern, size_t pattern_size) {
  cl_state *cl = state_of(ctx);
  if (cl->oclgrind) {
    const ocl_xfer_env env = xfer_env(cl);
    return ocl_xfer_fill(ctx, cl->xfer, &env, (cl_mem)handle, offset, bytes, pattern, pattern_size);
  }
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = chunk_of(bytes - done);
    cl_int err = clEnqueueFillBuffer(state_of(ctx)->queue, (cl_mem)handle, pattern, pattern_size,
                                     (size_t)(offset + done), (size_t)n, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      return cl_fail(ctx, status_of(err), err,
                     "clEnqueueFillBuffer(%llu bytes at offset %llu, %zu-byte pattern)",
                     (unsigned long long)n, (unsigned long long)(offset + done), pattern_size);
    done += n;
  }
  return FP_OK;
}

static fp_status ocl_copy(fp_context *ctx, void *dst, uint64_t dst_offset, void *src,
                          uint64_t src_offset, uint64_t bytes) {
  cl_state *cl = state_of(ctx);
  if (cl->oclgrind) {
    const ocl_xfer_env env = xfer_env(cl);
    return ocl_xfer_copy(ctx, cl->xfer, &env, (cl_mem)dst, dst_offset, (cl_mem)src, src_offset,
                         bytes);
  }
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = chunk_of(bytes - done);
    cl_int err = clEnqueueCopyBuffer(state_of(ctx)->queue, (cl_mem)src, (cl_mem)dst,
                                     (size_t)(src_offset + done), (size_t)(dst_offset + done),
                                     (size_t)n, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      return cl_fail(ctx, status_of(err), err,
                     "clEnqueueCopyBuffer(%llu bytes, offset %llu to offset %llu)",
                     (unsigned long long)n, (unsigned long long)(src_offset + done),
                     (unsigned long long)(dst_offset + done));
    done += n;
  }
  return FP_OK;
}

static fp_status ocl_finish(fp_context *ctx) {
  cl_int err = clFinish(state_of(ctx)->queue);
  if (err != CL_SUCCESS)
    return cl_fail(ctx, status_of(err), err, "clFinish");
  return FP_OK;
}

/* ---- events ----------------------------------------------------------------------------------
 * A record enqueues a marker (clEnqueueMarkerWithWaitList): in an in-order
 * queue it completes after everything enqueued before it, so the difference
 * of two markers' CL_PROFILING_COMMAND_END is the device time of the work
 * between them, with no synchronisation at record time.
 *
 * Not every platform times markers (the spec lets profiling info be
 * unavailable for some commands), so the first event created on a context
 * probes: marker, a 64 KiB fill, marker. If both timestamps come back and the
 * second is later, markers are used; otherwise every record becomes clFinish
 * plus the host's monotonic clock -- coarser, and it drains the queue at each
 * record, but never a made-up number. FUSEPORT_OPENCL_HOST_TIMING=1 forces
 * the fallback. */

static cl_int marker_end_ns(cl_event marker, cl_ulong *ns) {
  cl_int err = clWaitForEvents(1, &marker);
  if (err == CL_SUCCESS)
    err = clGetEventProfilingInfo(marker, CL_PROFILING_COMMAND_END, sizeof *ns, ns, NULL);
  return err;
}

/* Decides cl->timing; an error only when the probe itself cannot run. */
static fp_status probe_timing(fp_context *ctx, cl_state *cl) {
  const char *force = getenv("FUSEPORT_OPENCL_HOST_TIMING");
  if (force != NULL && *force != '\0' && strcmp(force, "0") != 0) {
    cl->timing = CL_TIMING_HOST;
    return FP_OK;
  }
  const size_t probe_bytes = 64 * 1024;
  cl_int err;
  cl_mem scratch = clCreateBuffer(cl->context, CL_MEM_READ_WRITE, probe_bytes, NULL, &err);
  if (err != CL_SUCCESS)
    return cl_fail(ctx, status_of(err), err, "clCreateBuffer(%zu bytes, marker timing probe)",
                   probe_bytes);
  cl_event first = NULL, second = NULL;
  const cl_uint zero = 0;
  const char *call = "clEnqueueMarkerWithWaitList";
  err = clEnqueueMarkerWithWaitList(cl->queue, 0, NULL, &first);
  fp_status st = FP_OK;
  if (err == CL_SUCCESS && cl->oclgrind) {
    const ocl_xfer_env env = xfer_env(cl);
    st = ocl_xfer_fill(ctx, cl->xfer, &env, scratch, 0, probe_bytes, &zero, sizeof zero);
  } else if (err == CL_SUCCESS) {
    call = "clEnqueueFillBuffer";
    err =
        clEnqueueFillBuffer(cl->queue, scratch, &zero, sizeof zero, 0, probe_bytes, 0, NULL, NULL);
  }
  if (err == CL_SUCCESS && st == FP_OK) {
    call = "clEnqueueMarkerWithWaitList";
    err = clEnqueueMarkerWithWaitList(cl->queue, 0, NULL, &second);
  }
  if (st == FP_OK && err != CL_SUCCESS) {
    st = cl_fail(ctx, status_of(err), err, "%s (marker timing probe)", call);
  } else if (st == FP_OK) {
    cl_ulong start_ns = 0, end_ns = 0;
    cl_int e1 = marker_end_ns(first, &start_ns);
    cl_int e2 = marker_end_ns(second, &end_ns);
    bool sane = e1 == CL_SUCCESS && e2 == CL_SUCCESS && start_ns != 0 && end_ns > start_ns;
    cl->timing = sane ? CL_TIMING_MARKERS : CL_TIMING_HOST;
  }
  if (first != NULL)
    clReleaseEvent(first);
  if (second != NULL)
    clReleaseEvent(second);
  clReleaseMemObject(scratch);
  return st;
}

static fp_status ocl_event_create(fp_context *ctx, void **event) {
  cl_state *cl = state_of(ctx);
  if (cl->timing == CL_TIMING_UNKNOWN) {
    fp_status st = probe_timing(ctx, cl);
    if (st != FP_OK)
      return st;
  }
  cl_timestamp *ts = calloc(1, sizeof *ts);
  if (ts == NULL)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "opencl backend: host allocation failed");
  *event = ts;
  return FP_OK;
}

static void ocl_event_destroy(fp_context *ctx, void *event) {
  (void)ctx;
  cl_timestamp *ts = event;
  if (ts->marker != NULL)
    clReleaseEvent(ts->marker);
  free(ts);
}

static fp_status ocl_event_record(fp_context *ctx, void *event) {
  cl_state *cl = state_of(ctx);
  cl_timestamp *ts = event;
  if (cl->timing == CL_TIMING_HOST) {
    cl_int err = clFinish(cl->queue);
    if (err != CL_SUCCESS)
      return cl_fail(ctx, status_of(err), err, "clFinish (event record, host timing)");
    ts->host_ms = now_ms();
    return FP_OK;
  }
  cl_event marker = NULL;
  cl_int err = clEnqueueMarkerWithWaitList(cl->queue, 0, NULL, &marker);
  if (err != CL_SUCCESS)
    return cl_fail(ctx, status_of(err), err, "clEnqueueMarkerWithWaitList (event record)");
  if (ts->marker != NULL)
    clReleaseEvent(ts->marker);
  ts->marker = marker;
  return FP_OK;
}

static fp_status ocl_event_synchronize(fp_context *ctx, void *event) {
  cl_timestamp *ts = event;
  if (ts->marker == NULL) /* host timing: the record already waited */
    return FP_OK;
  cl_int err = clWaitForEvents(1, &ts->marker);
  if (err != CL_SUCCESS)
    return cl_fail(ctx, status_of(err), err, "clWaitForEvents (event synchronize)");
  return FP_OK;
}

static fp_status ocl_event_elapsed_ms(fp_context *ctx, void *start, void *end, double *ms) {
  cl_state *cl = state_of(ctx);
  cl_timestamp *a = start, *b = end;
  if (cl->timing == CL_TIMING_HOST) {
    *ms = b->host_ms - a->host_ms;
    return FP_OK;
  }
  cl_ulong start_ns = 0, end_ns = 0;
  cl_int err = marker_end_ns(a->marker, &start_ns);
  if (err == CL_SUCCESS)
    err = marker_end_ns(b->marker, &end_ns);
  if (err != CL_SUCCESS)
    return cl_fail(ctx, status_of(err), err,
                   "clWaitForEvents/clGetEventProfilingInfo(CL_PROFILING_COMMAND_END)");
  /* difference in integers first: the timestamps are too large for a double
   * to keep every nanosecond */
  *ms = (double)(int64_t)(end_ns - start_ns) * 1e-6;
  return FP_OK;
}

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
             fname, cl_error_string(err), (int)err);
    st = status_of(err);
    program = NULL;
  }

  double t0 = now_ms();
  if (st == FP_OK) {
    err = clBuildProgram(program, 1, &cl->device, options, NULL, NULL);
    append_build_log(program, cl->device, fname, options);
    if (err != CL_SUCCESS) {
      char *log = build_log(program, cl->device);
      snprintf(message, sizeof message,
               "clBuildProgram(kernels/cl/%s.cl, \"%s\") failed: %s (%d) on '%s'; build log:\n%s",
               fname, options, cl_error_string(err), (int)err, ctx->info.name, log);
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
               cl_error_string(err), (int)err);
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
        appendf(missing, sizeof missing, "%s'%s'", missing[0] != '\0' ? ", " : "",
                fp_kernel_name(id));
      continue;
    }
    cl_kernel kernel = clCreateKernel(program, fp_kernel_name(id), &err);
    if (err != CL_SUCCESS) {
      snprintf(message, sizeof message, "clCreateKernel(%s, kernels/cl/%s.cl) failed: %s (%d)",
               fp_kernel_name(id), fname, cl_error_string(err), (int)err);
      st = status_of(err);
      break;
    }
    cl->kernels[k] = kernel;
    size_t limit = 0;
    err = clGetKernelWorkGroupInfo(kernel, cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof limit,
                                   &limit, NULL);
    if (err != CL_SUCCESS) {
      snprintf(message, sizeof message,
               "clGetKernelWorkGroupInfo(%s, CL_KERNEL_WORK_GROUP_SIZE) failed: %s (%d)",
               fp_kernel_name(id), cl_error_string(err), (int)err);
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
        !rows_mn_args((fp_kernel_id)k, &m_arg, &n_arg))
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
                   vname, fname, cl_error_string(err), (int)err);
          st = status_of(err);
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
                 cl_error_string(err), (int)err);
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
  fam->build_ms = now_ms() - t0;

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
static fp_status require_family(fp_context *ctx, cl_state *cl, fp_kernel_id id) {
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
static bool ocl_kernel_available(fp_context *ctx, fp_kernel_id id) {
  cl_state *cl = state_of(ctx);
  if (ensure_family(ctx, cl, fp_kernel_family_of(id)) != FP_OK)
    return fp_kernel_required(id);
  return cl->kernels[id] != NULL;
}

static fp_status ocl_kernel_prepare(fp_context *ctx, fp_kernel_id id, double *compile_ms) {
  cl_state *cl = state_of(ctx);
  fp_status st = require_family(ctx, cl, id);
  if (st != FP_OK)
    return st;
  if (cl->kernels[id] == NULL)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "kernel '%s' is not in kernels/cl/%s.cl",
                        fp_kernel_name(id), fp_kernel_family_name(fp_kernel_family_of(id)));
  *compile_ms = cl->families[fp_kernel_family_of(id)].build_ms;
  return FP_OK;
}

/* The ROWS kernels' launch (opencl_rows.c): the planner's geometry and
 * kernel in place of the host's 1-D geometry and the generic kernel, for the
 * fused row kernels; any other kernel is left alone. An error where no
 * kernel of the op fits the device's local memory. */
static fp_status plan_rows(fp_context *ctx, const cl_state *cl, fp_kernel_id id,
                           const fp_ndrange *nd, const fp_karg *args, int nargs, size_t *global,
                           size_t *local, cl_kernel *kernel) {
  int m_arg = 0, n_arg = 0;
  if (!rows_mn_args(id, &m_arg, &n_arg))
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
  cl_state *cl = state_of(ctx);
  const char *kname = fp_kernel_name(id);
  fp_status st = require_family(ctx, cl, id);
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
      return cl_fail(ctx, FP_ERR_BACKEND, err, "clSetKernelArg(%s, argument %d of kind '%c')",
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
    return cl_fail(ctx, status_of(err), err,
                   "clEnqueueNDRangeKernel(%s, global %zux%zux%zu, local %zux%zux%zu)%s", kname,
                   global[0], global[1], global[2], local[0], local[1], local[2], hint);
  }
  return FP_OK;
}

/* ---- the GEMM library (opencl_gemm.c) ------------------------------------------------------ */

static fp_status ocl_library_gemm(fp_context *ctx, const fp_lib_gemm *g, void *a, void *b, void *c,
                                  void *d, void *bias, void *ws, uint64_t ws_bytes) {
  cl_state *cl = state_of(ctx);
  const ocl_gemm_env env = gemm_env(cl);
  return ocl_gemm_library(ctx, cl->gemm, &env, g, a, b, c, d, bias, ws, ws_bytes);
}

static fp_status ocl_library_prepare(fp_context *ctx, fp_dtype dtype, double *compile_ms) {
  cl_state *cl = state_of(ctx);
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
