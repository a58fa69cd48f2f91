/* fuseport OpenCL backend: finding the device (platforms, devices, the
 * filters of fp_context_options), reading what it reports into ctx->info,
 * the tuning variables, and creating and releasing the context and queue. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CL/cl.h>

#include "opencl_internal.h"

/* Vendor device queries (cl_nv_device_attribute_query,
 * cl_amd_device_attribute_query), defined here so that no vendor header is
 * needed. */
#define FP_CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
#define FP_CL_DEVICE_WARP_SIZE_NV 0x4003
#define FP_CL_DEVICE_WAVEFRONT_WIDTH_AMD 0x4043
#define FP_CL_PLATFORM_NOT_FOUND_KHR (-1001)

#define FP_CL_DEFAULT_L2_BYTES (4ull << 20)

/* ---- strings ------------------------------------------------------------------------ */

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

int ocl_device_count(const char *platform) {
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
      return ocl_fail(ctx, FP_ERR_BACKEND, err, "clGetDeviceInfo(" #param ")");                    \
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
    return ocl_fail(ctx, FP_ERR_BACKEND, err, "clGetPlatformInfo(CL_PLATFORM_NAME/VERSION)");
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
      return ocl_fail(ctx, FP_ERR_BACKEND, err, "clGetDeviceInfo(%s)", queries[q].name);
  }
  if (dims < 1 || dims > 16)
    dims = dims < 1 ? 1 : 16;
  err = clGetDeviceInfo(cl->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof(size_t),
                        item_sizes, NULL);
  if (err != CL_SUCCESS)
    return ocl_fail(ctx, FP_ERR_BACKEND, err, "clGetDeviceInfo(CL_DEVICE_MAX_WORK_ITEM_SIZES)");

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
    return ocl_fail(ctx, FP_ERR_BACKEND, err, "clGetDeviceInfo(CL_DEVICE_EXTENSIONS)");
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
    return ocl_fail(ctx, FP_ERR_BACKEND, err, "clCreateContext(device '%s')", ctx->info.name);
  }
  /* clCreateCommandQueue is the 1.2 call (2.0 deprecates it for
   * clCreateCommandQueueWithProperties, which 1.2 platforms lack). */
  cl->queue = clCreateCommandQueue(cl->context, device, CL_QUEUE_PROFILING_ENABLE, &err);
  if (err != CL_SUCCESS) {
    cl->queue = NULL;
    release_state(cl);
    return ocl_fail(ctx, FP_ERR_BACKEND, err, "clCreateCommandQueue(device '%s', profiling)",
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
fp_status ocl_init(fp_context *ctx, const fp_context_options *opts) {
  if (opts->device_index < -1)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "OpenCL device index %d is invalid (-1 for the first matching device, "
                        "else 0, 1, ...)",
                        opts->device_index);
  cl_platform_id *platforms = NULL;
  cl_uint nplatforms = 0;
  cl_int err = list_platforms(&platforms, &nplatforms);
  if (err != CL_SUCCESS)
    return ocl_fail(ctx, FP_ERR_BACKEND, err, "clGetPlatformIDs");
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
      st = ocl_fail(ctx, FP_ERR_BACKEND, err, "clGetPlatformInfo(CL_PLATFORM_NAME)");
      break;
    }
    bool platform_match = contains_ignore_case(pname, opts->platform);
    platforms_matched += platform_match;
    ocl_appendf(all, sizeof all, "%splatform '%s':", p > 0 ? "; " : "", pname);
    cl_device_id *devices = NULL;
    cl_uint ndevices = 0;
    err = list_devices(platforms[p], &devices, &ndevices);
    if (err != CL_SUCCESS)
      ocl_appendf(all, sizeof all, " (clGetDeviceIDs failed: %s)", ocl_error_name(err));
    else if (ndevices == 0)
      ocl_appendf(all, sizeof all, " (no devices)");
    for (cl_uint d = 0; d < ndevices && st == FP_OK; ++d) {
      char *dname = NULL;
      err = device_string(devices[d], CL_DEVICE_NAME, &dname);
      if (err != CL_SUCCESS) {
        st = ocl_fail(ctx, FP_ERR_BACKEND, err, "clGetDeviceInfo(CL_DEVICE_NAME)");
        break;
      }
      ocl_appendf(all, sizeof all, "%s '%s'", d > 0 ? "," : "", dname);
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
        ocl_appendf(matching, sizeof matching, "%s[%zu] '%s' on '%s'", nchoices > 0 ? ", " : "",
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

void ocl_shutdown(fp_context *ctx) {
  release_state(ocl_state_of(ctx));
  ctx->impl = NULL;
}
