/* fuseport backend layer: the one interface every backend fills.
 *
 * A context is one device of one backend (CPU emulation, OpenCL, CUDA) with
 * one in-order queue. Everything that touches the device goes through this
 * layer -- allocations, copies, fills, kernel launches -- so the layer itself
 * keeps the counters the benchmark reads (kernels launched, bytes allocated,
 * current and peak bytes) instead of trusting each operator to report them.
 *
 * Kernels are named in kernels/kernels.def (family, name, argument
 * signature). A backend provides an implementation per name: plain C for the
 * CPU backend, kernels/cl/<family>*.cl for OpenCL, kernels/cu/<family>.cu for
 * CUDA. fp_launch checks the arguments against the signature before any
 * backend sees them.
 *
 * Every call returns an fp_status; on failure fp_context_error(ctx) (and
 * fp_last_error()) says why, including the vendor's code and message.
 */
#ifndef FUSEPORT_BACKEND_H
#define FUSEPORT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- element types ------------------------------------------------------ */

typedef enum fp_dtype {
  FP_F32 = 0,
  FP_F16, /* IEEE binary16 */
  FP_BF16,
  FP_I32,
  FP_U32, /* packed words */
  FP_U8,  /* bytes */
  FP_DTYPE_COUNT
} fp_dtype;
size_t fp_dtype_size(fp_dtype dtype);
const char *fp_dtype_name(fp_dtype dtype); /* "f32", "f16", "bf16", "i32", "u32", "u8" */
/* Parses a dtype name; FP_ERR_NOT_FOUND (with the names) otherwise. */
fp_status fp_dtype_parse(const char *name, fp_dtype *out);

/* ---- backends ----------------------------------------------------------- */

typedef enum fp_backend_kind {
  FP_BACKEND_CPU = 0,
  FP_BACKEND_OPENCL = 1,
  FP_BACKEND_CUDA = 2,
  FP_BACKEND_COUNT
} fp_backend_kind;

/* "cpu", "opencl", "cuda". */
const char *fp_backend_name(fp_backend_kind kind);
/* Parses a backend name; FP_ERR_NOT_FOUND (with the list of names) otherwise. */
fp_status fp_backend_parse(const char *name, fp_backend_kind *out);
/* Whether support for the backend was compiled into this build. */
bool fp_backend_compiled(fp_backend_kind kind);
/* Number of usable devices of the backend on this machine (0 when it is not
 * compiled in or no platform/driver/device is present; that is not an error).
 * `platform` filters OpenCL platforms by name substring (NULL: all). */
int fp_backend_device_count(fp_backend_kind kind, const char *platform);

/* ---- contexts ----------------------------------------------------------- */

typedef struct fp_context fp_context;
typedef struct fp_buffer fp_buffer;
typedef struct fp_event fp_event;

typedef struct fp_context_options {
  fp_backend_kind backend;
  int device_index;        /* -1: the first device that matches the filters */
  const char *platform;    /* OpenCL: platform name substring; NULL: any */
  const char *device_name; /* device name substring; NULL: any */
  /* Cap on bytes allocated through the context; an allocation that would
   * pass it fails with FP_ERR_OUT_OF_MEMORY exactly as a device OOM does.
   * 0: the device's own memory (CPU backend: $FUSEPORT_CPU_MEM_LIMIT, else
   * half of physical RAM). */
  uint64_t mem_limit_bytes;
} fp_context_options;

void fp_context_options_init(fp_context_options *opts);

/* Creates a context. On failure *out is NULL and fp_last_error() says why. */
fp_status fp_context_create(const fp_context_options *opts, fp_context **out);
/* Also frees the buffers and events still alive on the context. NULL is fine. */
void fp_context_destroy(fp_context *ctx);

/* Message of the last error raised on this context ("" if none). */
const char *fp_context_error(const fp_context *ctx);
fp_backend_kind fp_context_backend(const fp_context *ctx);

typedef struct fp_device_info {
  char name[256];
  char vendor[128];
  char driver_version[128];
  char platform[256];    /* OpenCL platform; "CUDA <runtime>" or "fuseport CPU emulation" */
  char api_version[128]; /* OpenCL version string, CUDA compute capability, ... */
  uint64_t global_mem_bytes;
  uint64_t l2_cache_bytes;        /* last-level cache the benchmark flushes */
  uint64_t local_mem_bytes;       /* per work-group (shared memory per block) */
  uint64_t local_mem_optin_bytes; /* the most a kernel may opt into (CUDA); else local_mem_bytes */
  uint32_t max_group_size;        /* work-items per work-group (threads per block) */
  uint32_t subgroup_width;        /* warp/wavefront/subgroup width; 1 if unknown */
  uint32_t compute_units;         /* SMs / CUs / cores */
  uint32_t cc_major, cc_minor;    /* CUDA compute capability; 0 elsewhere */
  fp_backend_kind backend;
  /* The backend's GEMM library (fp_library_gemm): its name and version
   * ("" when there is none), the element types it multiplies (bit 1 << dtype)
   * and whether it fuses epilogues and beta*C (cuBLASLt). */
  char gemm_library[128];
  uint32_t gemm_library_dtypes;
  bool gemm_library_epilogues;
  /* The backend's convolution library (fp_library_conv): name and version
   * ("" when there is none), element types (bit 1 << dtype) and whether it
   * fuses bias, residual and relu into the convolution (cuDNN's
   * conv-bias-activation). */
  char conv_library[128];
  uint32_t conv_library_dtypes;
  bool conv_library_epilogues;
} fp_device_info;

const fp_device_info *fp_context_device(const fp_context *ctx);

/* Lowers (or, with 0, restores) the allocation cap; see mem_limit_bytes. */
fp_status fp_context_set_mem_limit(fp_context *ctx, uint64_t bytes);
uint64_t fp_context_mem_limit(const fp_context *ctx);

/* ---- buffers -------------------------------------------------------------- */

/* bytes >= 1. FP_ERR_OUT_OF_MEMORY when the device or the cap refuses. */
fp_status fp_buffer_alloc(fp_context *ctx, uint64_t bytes, fp_buffer **out);
/* NULL, and a buffer already freed (or gone with its context), are fine: the
 * layer keeps the set of live buffers and never reads a freed one. */
void fp_buffer_free(fp_buffer *buf);
/* Size in bytes; 0 for NULL or a freed buffer. */
uint64_t fp_buffer_size(const fp_buffer *buf);
/* The context a live buffer belongs to; NULL for NULL or a freed buffer. */
fp_context *fp_buffer_context(const fp_buffer *buf);

/* Blocking host<->device transfers (they wait for queued work first). */
fp_status fp_buffer_write(fp_context *ctx, fp_buffer *dst, uint64_t offset, const void *src,
                          uint64_t bytes);
fp_status fp_buffer_read(fp_context *ctx, const fp_buffer *src, uint64_t offset, void *dst,
                         uint64_t bytes);
/* Enqueued: repeats a pattern of 1, 2, 4, 8 or 16 bytes; offset and bytes must
 * be multiples of the pattern size. */
fp_status fp_buffer_fill(fp_context *ctx, fp_buffer *dst, uint64_t offset, uint64_t bytes,
                         const void *pattern, size_t pattern_size);
/* Enqueued device-to-device copy. */
fp_status fp_buffer_copy(fp_context *ctx, fp_buffer *dst, uint64_t dst_offset, const fp_buffer *src,
                         uint64_t src_offset, uint64_t bytes);

/* ---- queue and events ----------------------------------------------------- */

/* Waits until everything enqueued on the context has completed. */
fp_status fp_finish(fp_context *ctx);

fp_status fp_event_create(fp_context *ctx, fp_event **out);
void fp_event_destroy(fp_event *ev); /* NULL and a destroyed event are fine */
/* Marks the point in the queue after all work enqueued so far. */
fp_status fp_event_record(fp_context *ctx, fp_event *ev);
fp_status fp_event_synchronize(fp_context *ctx, fp_event *ev);
/* Device time between two recorded events, in milliseconds (waits for end). */
fp_status fp_event_elapsed_ms(fp_context *ctx, fp_event *start, fp_event *end, double *ms);

/* ---- kernels -------------------------------------------------------------- */

typedef enum fp_kernel_id {
#define FP_KERNEL(family, name, signature, required) FPK_##name,
#include "kernels.def"
#undef FP_KERNEL
  FPK_COUNT
} fp_kernel_id;

typedef enum fp_kernel_family {
#define FP_KERNEL_FAMILY(family) FPF_##family,
#include "kernels.def"
#undef FP_KERNEL_FAMILY
  FPF_COUNT
} fp_kernel_family;

const char *fp_kernel_name(fp_kernel_id id);
const char *fp_kernel_signature(fp_kernel_id id);
fp_kernel_family fp_kernel_family_of(fp_kernel_id id);
const char *fp_kernel_family_name(fp_kernel_family family);
/* Required kernels exist on every backend; the others are tuned extras a
 * backend may lack (host code checks fp_kernel_available first). */
bool fp_kernel_required(fp_kernel_id id);

/* Looks a kernel up by name: FP_ERR_NOT_FOUND for an unknown name,
 * FP_ERR_UNSUPPORTED when this backend has no implementation. */
fp_status fp_kernel_lookup(fp_context *ctx, const char *name, fp_kernel_id *out);
bool fp_kernel_available(fp_context *ctx, fp_kernel_id id);

/* Builds or loads the device code of a kernel's family (an OpenCL program, a
 * CUDA module) if that has not happened on this context yet. *compile_ms
 * (may be NULL) receives the time that the first build of the family took,
 * whenever it happened. */
fp_status fp_kernel_prepare(fp_context *ctx, fp_kernel_id id, double *compile_ms);

/* Launch geometry, OpenCL-style: global[d] work-items in total (a multiple of
 * local[d]), in groups of local[d]. CUDA: grid = global/local, block = local.
 * Each kernel documents in kernels.def the geometry it expects; the CPU
 * backend's kernels compute the same result whatever the geometry. */
typedef struct fp_ndrange {
  uint32_t dims; /* 1..3 */
  uint64_t global[3];
  uint32_t local[3];
} fp_ndrange;

fp_ndrange fp_ndrange_1d(uint64_t groups, uint32_t local);
fp_ndrange fp_ndrange_2d(uint64_t groups_x, uint32_t local_x, uint64_t groups_y, uint32_t local_y);

/* PLANNED geometry (kernels.def): the backend plans the launch. */
fp_ndrange fp_planned_range(void);

/* Kernel arguments; the kind letters are those of kernels.def signatures.
 * Buffers carry their element type (the signature's letter; an upper-case
 * signature letter also accepts none). */
typedef enum fp_arg_kind {
  FP_ARG_BUFFER = 'b',   /* float32 */
  FP_ARG_BUF_F16 = 'h',  /* float16 */
  FP_ARG_BUF_BF16 = 'q', /* bfloat16 */
  FP_ARG_BUF_U32 = 'p',  /* uint32 words */
  FP_ARG_BUF_U8 = 'y',   /* bytes */
  FP_ARG_I32 = 'i',
  FP_ARG_U32 = 'u',
  FP_ARG_I64 = 'l',
  FP_ARG_F32 = 'f',
  FP_ARG_LOCAL = 'L' /* bytes of dynamic local/shared memory; last argument only */
} fp_arg_kind;

typedef struct fp_arg {
  fp_arg_kind kind;
  union {
    fp_buffer *buf;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    float f32;
    uint64_t local_bytes;
  } v;
} fp_arg;

static inline bool fp_arg_kind_is_buffer(fp_arg_kind k) {
  return k == FP_ARG_BUFFER || k == FP_ARG_BUF_F16 || k == FP_ARG_BUF_BF16 || k == FP_ARG_BUF_U32 ||
         k == FP_ARG_BUF_U8;
}
/* The buffer letter of an element type ('?' for one no kernel takes). */
char fp_dtype_arg_letter(fp_dtype dtype);

static inline fp_arg fp_arg_buf(fp_buffer *b) {
  fp_arg a;
  a.kind = FP_ARG_BUFFER;
  a.v.buf = b;
  return a;
}
/* A buffer of the given element type; NULL is "none", accepted only where
 * the signature's letter is upper case. */
static inline fp_arg fp_arg_tensor(fp_buffer *b, fp_dtype dtype) {
  fp_arg a;
  a.kind = (fp_arg_kind)fp_dtype_arg_letter(dtype);
  a.v.buf = b;
  return a;
}
static inline fp_arg fp_arg_none(fp_dtype dtype) { return fp_arg_tensor(NULL, dtype); }
static inline fp_arg fp_arg_i32(int32_t x) {
  fp_arg a;
  a.kind = FP_ARG_I32;
  a.v.i32 = x;
  return a;
}
static inline fp_arg fp_arg_u32(uint32_t x) {
  fp_arg a;
  a.kind = FP_ARG_U32;
  a.v.u32 = x;
  return a;
}
static inline fp_arg fp_arg_i64(int64_t x) {
  fp_arg a;
  a.kind = FP_ARG_I64;
  a.v.i64 = x;
  return a;
}
static inline fp_arg fp_arg_f32(float x) {
  fp_arg a;
  a.kind = FP_ARG_F32;
  a.v.f32 = x;
  return a;
}
static inline fp_arg fp_arg_local(uint64_t bytes) {
  fp_arg a;
  a.kind = FP_ARG_LOCAL;
  a.v.local_bytes = bytes;
  return a;
}

/* Enqueues a kernel. The arguments must match the kernel's signature in
 * kind and number; buffers must belong to ctx. */
fp_status fp_launch(fp_context *ctx, fp_kernel_id id, const fp_ndrange *nd, const fp_arg *args,
                    int nargs);
fp_status fp_launch_by_name(fp_context *ctx, const char *name, const fp_ndrange *nd,
                            const fp_arg *args, int nargs);

/* ---- vendor libraries -------------------------------------------------------
 * A backend's GEMM library is a backend operation, not a kernel: cuBLAS
 * (cuBLASLt for epilogues and beta*C) on CUDA, CLBlast on OpenCL, the CPU
 * backend's own blocked GEMM on the CPU. It runs on the context's queue, the
 * layer counts each call (fp_counters.library_calls) and the caller passes
 * its workspace (a buffer it allocated, so the footprint counts it). What a
 * backend's library cannot do is FP_ERR_UNSUPPORTED, never a stand-in. */

typedef enum fp_lib_epilogue {
  FP_LIB_EPI_NONE = 0,
  FP_LIB_EPI_RELU,
  FP_LIB_EPI_BIAS, /* + bias[N] */
  FP_LIB_EPI_BIAS_RELU
} fp_lib_epilogue;

/* D = epilogue(alpha * op(A) @ op(B) + beta * C), for each of `batch`
 * problems: A [M, K] (lda) or, trans_a, [K, M]; B [K, N] (ldb) or, trans_b,
 * [N, K]; C and D [M, N] (ldc, ldd); all row-major. A and B are of element
 * type `dtype`, C and D of out_dtype (float32 accumulation; no TF32 for
 * float32), batch item b at element offset b * stride_x. */
typedef struct fp_lib_gemm {
  fp_dtype dtype;
  fp_dtype out_dtype; /* FP_DTYPE_COUNT (fp_lib_gemm_plain's): dtype */
  int64_t M, N, K, batch;
  int64_t lda, ldb, ldc, ldd;
  int64_t stride_a, stride_b, stride_c, stride_d;
  bool trans_a, trans_b;
  float alpha, beta;
  fp_lib_epilogue epilogue;
} fp_lib_gemm;

/* The element type of C and D. */
static inline fp_dtype fp_lib_gemm_out_dtype(const fp_lib_gemm *g) {
  return g->out_dtype == FP_DTYPE_COUNT ? g->dtype : g->out_dtype;
}

/* A plain GEMM descriptor: batch 1, contiguous leading dimensions, alpha 1,
 * beta 0, no epilogue. */
fp_lib_gemm fp_lib_gemm_plain(fp_dtype dtype, int64_t M, int64_t N, int64_t K, bool trans_b);
/* FP_OK when dev's library computes g, else FP_ERR_UNSUPPORTED saying why
 * (no library, a type it lacks, an epilogue or beta it cannot fuse), or
 * FP_ERR_INVALID_ARGUMENT for a malformed descriptor. Depends on dev only. */
fp_status fp_library_gemm_check(const fp_device_info *dev, const fp_lib_gemm *g);
/* Workspace the library may use for g (0: none): the caller allocates it. */
uint64_t fp_library_gemm_workspace(const fp_device_info *dev, const fp_lib_gemm *g);
/* Enqueues g. c and bias may be NULL where beta is 0 / the epilogue has no
 * bias; workspace may be NULL (the library then runs without one). Buffers
 * are checked for size against the descriptor. */
fp_status fp_library_gemm(fp_context *ctx, const fp_lib_gemm *g, fp_buffer *a, fp_buffer *b,
                          fp_buffer *c, fp_buffer *d, fp_buffer *bias, fp_buffer *workspace);

/* Readies the library for GEMMs of `dtype` on this context (CUDA: the cuBLAS
 * and cuBLASLt handles; OpenCL: CLBlast's kernels for that precision, which
 * it compiles on first use) and reports how long that first preparation
 * took -- the same number on every later call, as fp_kernel_prepare does for
 * kernel families: the library's share of a variant's compile time. */
fp_status fp_library_gemm_prepare(fp_context *ctx, fp_dtype dtype, double *compile_ms);

/* A convolution library call: cuDNN on CUDA, the CPU backend's direct
 * convolution; OpenCL has none (its unfused path is im2col + CLBlast).
 *   out = act(conv2d(x, w) + bias[k] + z)
 * with x, w, out in the layouts of kernels.def's family conv (NCHW:
 * [N,C,H,W], [K,C,R,S], [N,K,P,Q]; NHWC: [N,H,W,C], [K,R,S,C], [N,P,Q,K]),
 * float32 accumulation (no TF32). NONE is the convolution alone (what an
 * eager framework calls); BIAS and BIAS_RELU add a [K] bias and, with
 * add_z, an output-shaped z, in one call where the library fuses them
 * (conv_library_epilogues). */
typedef enum fp_lib_conv_epilogue {
  FP_LIB_CONV_NONE = 0,
  FP_LIB_CONV_BIAS,
  FP_LIB_CONV_BIAS_RELU
} fp_lib_conv_epilogue;

typedef struct fp_lib_conv {
  fp_dtype dtype;
  int64_t N, C, H, W, K, R, S;
  int64_t stride, pad, dil;
  bool nhwc;
  fp_lib_conv_epilogue epilogue;
  bool add_z; /* + z (output-shaped); needs a BIAS epilogue */
} fp_lib_conv;

/* The output's spatial size along one axis: (H + 2 pad - dil (R - 1) - 1) /
 * stride + 1, or 0 when the (dilated) filter does not fit the padded input. */
int64_t fp_conv_out_dim(int64_t H, int64_t R, int64_t stride, int64_t pad, int64_t dil);
/* FP_OK when dev's library computes c; FP_ERR_UNSUPPORTED saying why, or
 * FP_ERR_INVALID_ARGUMENT for a malformed descriptor (dims < 1, stride < 1,
 * pad < 0, a filter larger than the padded input, sizes that overflow). */
fp_status fp_library_conv_check(const fp_device_info *dev, const fp_lib_conv *c);
/* Workspace the caller allocates for c (0: none): the most the library may
 * use (cuDNN: the first algorithm of its heuristics' order that fits it). */
uint64_t fp_library_conv_workspace(const fp_device_info *dev, const fp_lib_conv *c);
/* Enqueues c on the context's queue. bias and z may be NULL where the
 * epilogue reads none; workspace may be NULL. Sizes are checked. */
fp_status fp_library_conv(fp_context *ctx, const fp_lib_conv *c, fp_buffer *x, fp_buffer *w,
                          fp_buffer *bias, fp_buffer *z, fp_buffer *out, fp_buffer *workspace);

/* ---- counters --------------------------------------------------------------- */

typedef struct fp_counters {
  uint64_t kernels_launched; /* fp_launch calls that reached the device */
  uint64_t library_calls;    /* fp_library_* calls that reached the library */
  uint64_t allocations;      /* successful fp_buffer_alloc calls */
  uint64_t bytes_allocated;  /* sum of their sizes */
  uint64_t bytes_current;    /* live bytes now */
  uint64_t bytes_peak;       /* high-water mark of bytes_current */
} fp_counters;

void fp_counters_get(const fp_context *ctx, fp_counters *out);
/* Zeroes the running totals and sets the peak to the current live bytes. */
void fp_counters_reset(fp_context *ctx);

#ifdef __cplusplus
}
#endif

#endif
