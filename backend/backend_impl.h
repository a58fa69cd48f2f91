/* fuseport backend layer: what a backend implements (not for library users).
 *
 * The shared layer (backend.c) validates every argument, keeps the counters
 * and the memory cap, and then calls the backend through this table. A
 * backend therefore never sees NULL handles, zero sizes, out-of-range
 * offsets, or arguments that do not match a kernel's signature; it only has
 * to talk to its device and report the vendor's errors through fp_ctx_error.
 */
#ifndef FUSEPORT_BACKEND_IMPL_H
#define FUSEPORT_BACKEND_IMPL_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A kernel argument as the backend receives it: buffers resolved to the
 * backend's own handle (CPU: host pointer; OpenCL: cl_mem; CUDA: device
 * pointer), NULL for an optional buffer passed as none; kind is the
 * argument's letter (fp_arg_kind_is_buffer for any buffer). */
typedef struct fp_karg {
  fp_arg_kind kind;
  union {
    void *handle;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    float f32;
    uint64_t local_bytes;
  } v;
} fp_karg;

typedef struct fp_backend_ops {
  fp_backend_kind kind;
  /* Devices present (0 when there is no platform or driver; never an error). */
  int (*device_count)(const char *platform);
  /* Opens the device chosen by opts, fills ctx->info and sets ctx->impl. */
  fp_status (*init)(fp_context *ctx, const fp_context_options *opts);
  void (*shutdown)(fp_context *ctx);

  fp_status (*alloc)(fp_context *ctx, uint64_t bytes, void **handle);
  void (*release)(fp_context *ctx, void *handle);
  fp_status (*write)(fp_context *ctx, void *handle, uint64_t offset, const void *src,
                     uint64_t bytes);
  fp_status (*read)(fp_context *ctx, void *handle, uint64_t offset, void *dst, uint64_t bytes);
  fp_status (*fill)(fp_context *ctx, void *handle, uint64_t offset, uint64_t bytes,
                    const void *pattern, size_t pattern_size);
  fp_status (*copy)(fp_context *ctx, void *dst, uint64_t dst_offset, void *src, uint64_t src_offset,
                    uint64_t bytes);

  fp_status (*finish)(fp_context *ctx);
  fp_status (*event_create)(fp_context *ctx, void **event);
  void (*event_destroy)(fp_context *ctx, void *event);
  fp_status (*event_record)(fp_context *ctx, void *event);
  fp_status (*event_synchronize)(fp_context *ctx, void *event);
  fp_status (*event_elapsed_ms)(fp_context *ctx, void *start, void *end, double *ms);

  bool (*kernel_available)(fp_context *ctx, fp_kernel_id id);
  /* Builds/loads the family of `id` once per context; reports the time the
   * build took (the same number on every later call). */
  fp_status (*kernel_prepare)(fp_context *ctx, fp_kernel_id id, double *compile_ms);
  fp_status (*launch)(fp_context *ctx, fp_kernel_id id, const fp_ndrange *nd, const fp_karg *args,
                      int nargs);
  /* The GEMM library (NULL: the backend has none). The layer has checked g
   * with fp_library_gemm_check against ctx->info and the buffers' sizes;
   * c, bias and ws may be NULL (ws_bytes 0). */
  fp_status (*library_gemm)(fp_context *ctx, const fp_lib_gemm *g, void *a, void *b, void *c,
                            void *d, void *bias, void *ws, uint64_t ws_bytes);
  /* fp_library_gemm_prepare (NULL: nothing to prepare, 0 ms); dtype is one
   * the library has (the layer checked). */
  fp_status (*library_prepare)(fp_context *ctx, fp_dtype dtype, double *compile_ms);
  /* The convolution library (NULL: none). The layer has checked c with
   * fp_library_conv_check and the buffers' sizes; bias, z and ws may be NULL. */
  fp_status (*library_conv)(fp_context *ctx, const fp_lib_conv *c, void *x, void *w, void *bias,
                            void *z, void *out, void *ws, uint64_t ws_bytes);
} fp_backend_ops;

#define FP_ERROR_MESSAGE_BYTES 8192

struct fp_context {
  const fp_backend_ops *ops;
  void *impl; /* the backend's own state */
  fp_backend_kind kind;
  fp_device_info info;
  uint64_t device_mem_limit; /* the cap the device itself implies */
  uint64_t mem_limit;        /* the cap in force */
  fp_counters counters;
  char error[FP_ERROR_MESSAGE_BYTES];
  /* what is still alive on it, freed by fp_context_destroy */
  struct fp_buffer *buffers;
  struct fp_event *events;
};

/* The longest signature in kernels.def has 22 arguments. */
#define FP_MAX_KERNEL_ARGS 32

#define FP_BUFFER_MAGIC 0x66704266u /* "fpBf" */

struct fp_buffer {
  uint32_t magic;
  fp_context *ctx;
  void *handle;
  uint64_t bytes;
  struct fp_buffer *prev, *next; /* the context's live buffers */
};

struct fp_event {
  uint32_t magic;
  fp_context *ctx;
  void *handle;
  bool recorded;
  struct fp_event *prev, *next; /* the context's live events */
};

/* The process-wide set of live buffer and event pointers (live_handles.c):
 * the layer checks a handle there before it reads the memory behind it. */
bool fp_live_add(const void *p);    /* false when the set cannot grow */
bool fp_live_remove(const void *p); /* true when p was live */
bool fp_live_contains(const void *p);

/* Records an error on the context (and the thread) and returns `status`. */
/* FP_OK when buf is a live buffer of ctx; else an error naming fn and what. */
fp_status fp_check_buffer(fp_context *ctx, const fp_buffer *buf, const char *fn, const char *what);
/* FP_OK when every buffer of a launch holds what the kernel's rule in
 * kernels.def reaches, from the scalar arguments (kernel_extents.c); the
 * buffers themselves are checked live beforehand. */
fp_status fp_check_kernel_extents(fp_context *ctx, fp_kernel_id id, const fp_arg *args, int nargs);
fp_status fp_ctx_error(fp_context *ctx, fp_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Copies src into a fixed-size info field, always terminated. */
void fp_copy_string(char *dst, size_t dstlen, const char *src);

/* The backends compiled into this build (NULL when not compiled). */
extern const fp_backend_ops fp_cpu_backend_ops;
#ifdef FUSEPORT_HAVE_OPENCL
extern const fp_backend_ops fp_opencl_backend_ops;
#endif
#ifdef FUSEPORT_HAVE_CUDA
extern const fp_backend_ops fp_cuda_backend_ops;
#endif

#ifdef __cplusplus
}
#endif

#endif
