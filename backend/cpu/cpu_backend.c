/* fuseport CPU backend: a device emulated on the host.
 *
 * Buffers are host allocations behind the same handles as device memory, the
 * queue is in order and synchronous (an enqueued operation has finished when
 * the call returns, so an event is a timestamp of the monotonic clock), and
 * kernels are plain C functions registered under the kernel names of
 * kernels.def. Memory is capped ($FUSEPORT_CPU_MEM_LIMIT, or half of
 * physical RAM): past the cap an allocation fails as a GPU out-of-memory does.
 * Fresh allocations are filled with 0xFF bytes (a NaN in every float), as
 * uninitialised device memory would hold garbage, so an unwritten output
 * cannot pass for a result.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_kernels.h"

typedef struct cpu_state {
  fp_cpu_kernel_fn kernels[FPK_COUNT];
} cpu_state;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cpu_device_count(const char *platform) {
  (void)platform;
  return 1;
}

/* Parses "123", "64K", "512M", "2G", "1T" (binary multiples). */
static int parse_size(const char *text, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long value = strtoull(text, &end, 10);
  if (errno != 0 || end == text)
    return -1;
  uint64_t mult = 1;
  if (*end != '\0') {
    switch (toupper((unsigned char)*end)) {
    case 'K':
      mult = 1ull << 10;
      break;
    case 'M':
      mult = 1ull << 20;
      break;
    case 'G':
      mult = 1ull << 30;
      break;
    case 'T':
      mult = 1ull << 40;
      break;
    default:
      return -1;
    }
    ++end;
    if (*end == 'i' || *end == 'I')
      ++end;
    if (*end == 'b' || *end == 'B')
      ++end;
    if (*end != '\0')
      return -1;
  }
  if (value == 0 || value > UINT64_MAX / mult)
    return -1;
  *out = (uint64_t)value * mult;
  return 0;
}

static void read_cpu_model(char *dst, size_t len) {
  fp_copy_string(dst, len, "host CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL)
    return;
  char line[512];
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "model name", 10) == 0) {
      char *colon = strchr(line, ':');
      if (colon != NULL) {
        colon++;
        while (*colon == ' ')
          colon++;
        colon[strcspn(colon, "\n")] = '\0';
        fp_copy_string(dst, len, colon);
      }
      break;
    }
  }
  fclose(f);
}

/* Size of the last-level cache from sysfs; 32 MiB when unknown. */
static uint64_t read_llc_bytes(void) {
  uint64_t best = 0;
  for (int index = 0; index < 8; ++index) {
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    FILE *f = fopen(path, "r");
    if (f == NULL)
      continue;
    char text[64] = {0};
    if (fgets(text, sizeof text, f) != NULL) {
      text[strcspn(text, "\n")] = '\0';
      uint64_t bytes = 0;
      if (parse_size(text, &bytes) == 0 && bytes > best)
        best = bytes;
    }
    fclose(f);
  }
  return best != 0 ? best : 32ull << 20;
}

static fp_status cpu_init(fp_context *ctx, const fp_context_options *opts) {
  if (opts->device_index > 0)
    return fp_ctx_error(ctx, FP_ERR_NOT_FOUND,
                        "cpu backend has one device (index 0); index %d was asked for",
                        opts->device_index);
  fp_device_info *info = &ctx->info;
  char model[200];
  read_cpu_model(model, sizeof model);
  snprintf(info->name, sizeof info->name, "CPU emulation (%s)", model);
  if (opts->device_name != NULL && strstr(info->name, opts->device_name) == NULL)
    return fp_ctx_error(ctx, FP_ERR_NOT_FOUND, "no cpu device matches the name '%s' (it is '%s')",
                        opts->device_name, info->name);
  fp_copy_string(info->vendor, sizeof info->vendor, "fuseport");
  fp_copy_string(info->driver_version, sizeof info->driver_version, "1");
  fp_copy_string(info->platform, sizeof info->platform, "fuseport CPU emulation");
  fp_copy_string(info->api_version, sizeof info->api_version, "C11");

  uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
  uint64_t cap = phys / 2;
  const char *env = getenv("FUSEPORT_CPU_MEM_LIMIT");
  if (env != NULL && *env != '\0' && parse_size(env, &cap) != 0)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "FUSEPORT_CPU_MEM_LIMIT='%s' is not a size (examples: 536870912, 512M, 2G)",
                        env);
  info->global_mem_bytes = cap;
  ctx->device_mem_limit = cap;
  info->l2_cache_bytes = read_llc_bytes();
  info->local_mem_bytes = 64 * 1024;
  info->max_group_size = 1024;
  info->subgroup_width = 1;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  info->compute_units = cores > 0 ? (uint32_t)cores : 1;
  /* its own blocked GEMM; no fused epilogues (those are cuBLASLt's) */
  fp_copy_string(info->gemm_library, sizeof info->gemm_library, "fuseport CPU GEMM");
  info->gemm_library_dtypes = (1u << FP_F32) | (1u << FP_F16) | (1u << FP_BF16);
  info->gemm_library_epilogues = false;
  fp_copy_string(info->conv_library, sizeof info->conv_library, "fuseport CPU direct convolution");
  info->conv_library_dtypes = (1u << FP_F32) | (1u << FP_F16) | (1u << FP_BF16);
  info->conv_library_epilogues = false;

  cpu_state *state = calloc(1, sizeof *state);
  if (state == NULL)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "cpu backend: host allocation failed");
#define FP_KERNEL_FAMILY(family) fp_cpu_register_##family(state->kernels);
#include "kernels.def"
#undef FP_KERNEL_FAMILY
  for (int k = 0; k < FPK_COUNT; ++k) {
    if (fp_kernel_required((fp_kernel_id)k) && state->kernels[k] == NULL) {
      free(state);
      return fp_ctx_error(ctx, FP_ERR_INTERNAL, "cpu backend: required kernel '%s' is missing",
                          fp_kernel_name((fp_kernel_id)k));
    }
  }
  ctx->impl = state;
  return FP_OK;
}

static void cpu_shutdown(fp_context *ctx) { free(ctx->impl); }

static fp_status cpu_alloc(fp_context *ctx, uint64_t bytes, void **handle) {
  void *ptr = NULL;
  if (bytes > SIZE_MAX || posix_memalign(&ptr, 64, (size_t)bytes) != 0)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY,
                        "out of memory: the host refused %llu bytes for the cpu device",
                        (unsigned long long)bytes);
  memset(ptr, 0xFF, (size_t)bytes);
  *handle = ptr;
  return FP_OK;
}

static void cpu_release(fp_context *ctx, void *handle) {
  (void)ctx;
  free(handle);
}

static fp_status cpu_write(fp_context *ctx, void *handle, uint64_t offset, const void *src,
                           uint64_t bytes) {
  (void)ctx;
  memcpy((char *)handle + offset, src, (size_t)bytes);
  return FP_OK;
}

static fp_status cpu_read(fp_context *ctx, void *handle, uint64_t offset, void *dst,
                          uint64_t bytes) {
  (void)ctx;
  memcpy(dst, (const char *)handle + offset, (size_t)bytes);
  return FP_OK;
}

static fp_status cpu_fill(fp_context *ctx, void *handle, uint64_t offset, uint64_t bytes,
                          const void *pattern, size_t pattern_size) {
  (void)ctx;
  char *dst = (char *)handle + offset;
  if (pattern_size == 1) {
    memset(dst, *(const unsigned char *)pattern, (size_t)bytes);
    return FP_OK;
  }
  /* Write the pattern once, then double the filled prefix. */
  memcpy(dst, pattern, pattern_size);
  uint64_t filled = pattern_size;
  while (filled < bytes) {
    uint64_t chunk = filled < bytes - filled ? filled : bytes - filled;
    memcpy(dst + filled, dst, (size_t)chunk);
    filled += chunk;
  }
  return FP_OK;
}

static fp_status cpu_copy(fp_context *ctx, void *dst, uint64_t dst_offset, void *src,
                          uint64_t src_offset, uint64_t bytes) {
  (void)ctx;
  memmove((char *)dst + dst_offset, (const char *)src + src_offset, (size_t)bytes);
  return FP_OK;
}

static fp_status cpu_finish(fp_context *ctx) {
  (void)ctx;
  return FP_OK;
}

static fp_status cpu_event_create(fp_context *ctx, void **event) {
  double *stamp = calloc(1, sizeof *stamp);
  if (stamp == NULL)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "cpu backend: host allocation failed");
  *event = stamp;
  return FP_OK;
}

static void cpu_event_destroy(fp_context *ctx, void *event) {
  (void)ctx;
  free(event);
}

static fp_status cpu_event_record(fp_context *ctx, void *event) {
  (void)ctx;
  *(double *)event = now_ms();
  return FP_OK;
}

static fp_status cpu_event_synchronize(fp_context *ctx, void *event) {
  (void)ctx;
  (void)event;
  return FP_OK;
}

static fp_status cpu_event_elapsed_ms(fp_context *ctx, void *start, void *end, double *ms) {
  (void)ctx;
  *ms = *(double *)end - *(double *)start;
  return FP_OK;
}

static bool cpu_kernel_available(fp_context *ctx, fp_kernel_id id) {
  return ((cpu_state *)ctx->impl)->kernels[id] != NULL;
}

static fp_status cpu_kernel_prepare(fp_context *ctx, fp_kernel_id id, double *compile_ms) {
  (void)ctx;
  (void)id;
  *compile_ms = 0.0; /* compiled into the binary */
  return FP_OK;
}

static fp_status cpu_launch(fp_context *ctx, fp_kernel_id id, const fp_ndrange *nd,
                            const fp_karg *args, int nargs) {
  (void)nargs;
  ((cpu_state *)ctx->impl)->kernels[id](nd, args);
  return FP_OK;
}

const fp_backend_ops fp_cpu_backend_ops = {
    .kind = FP_BACKEND_CPU,
    .device_count = cpu_device_count,
    .init = cpu_init,
    .shutdown = cpu_shutdown,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .write = cpu_write,
    .read = cpu_read,
    .fill = cpu_fill,
    .copy = cpu_copy,
    .finish = cpu_finish,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_synchronize = cpu_event_synchronize,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .kernel_available = cpu_kernel_available,
    .kernel_prepare = cpu_kernel_prepare,
    .launch = cpu_launch,
    .library_gemm = fp_cpu_library_gemm,
    .library_conv = fp_cpu_library_conv,
};
