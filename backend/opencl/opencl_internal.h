/* fuseport OpenCL backend: what the backend's own files share -- the
 * per-context state, the error helpers, and the entry points that the ops
 * table (opencl_backend.c) lists. The planned families (opencl_gemm.h,
 * opencl_conv.h, opencl_attention.h) see only their env structs.
 *
 *   opencl_backend.c  the ops table and kernel launch (plan_rows, the planned
 *                     families, arguments, the NDRange)
 *   opencl_device.c   device discovery, ctx->info, the tuning variables,
 *                     context and queue creation and release
 *   opencl_program.c  program build per kernel family and the kernel cache
 *   opencl_buffers.c  buffers, transfers, fills, copies, finish
 *   opencl_events.c   events and their timing
 *   opencl_errors.c   OpenCL error names and the messages that carry them */
#ifndef FUSEPORT_OPENCL_INTERNAL_H
#define FUSEPORT_OPENCL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <CL/cl.h>

#include "backend_impl.h"
#include "opencl_attention.h"
#include "opencl_conv.h"
#include "opencl_gemm.h"
#include "opencl_oclgrind.h"
#include "opencl_rows.h"

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

static inline cl_state *ocl_state_of(fp_context *ctx) { return (cl_state *)ctx->impl; }

/* ---- opencl_errors.c ---- */

/* Records "<call> failed: CL_NAME (code)" on the context; `call` is a printf
 * format naming the call and what it was doing. */
fp_status ocl_fail(fp_context *ctx, fp_status status, cl_int err, const char *call, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* FP_ERR_OUT_OF_MEMORY where the error means device memory ran out, else
 * FP_ERR_BACKEND. */
fp_status ocl_status_of(cl_int err);
/* Appends to a fixed buffer, truncating silently (used for listings in
 * error messages). */
void ocl_appendf(char *buf, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- opencl_device.c ---- */

int ocl_device_count(const char *platform);
fp_status ocl_init(fp_context *ctx, const fp_context_options *opts);
void ocl_shutdown(fp_context *ctx);

/* ---- opencl_buffers.c ---- */

fp_status ocl_alloc(fp_context *ctx, uint64_t bytes, void **handle);
void ocl_release(fp_context *ctx, void *handle);
fp_status ocl_write(fp_context *ctx, void *handle, uint64_t offset, const void *src,
                    uint64_t bytes);
fp_status ocl_read(fp_context *ctx, void *handle, uint64_t offset, void *dst, uint64_t bytes);
fp_status ocl_fill(fp_context *ctx, void *handle, uint64_t offset, uint64_t bytes,
                   const void *pattern, size_t pattern_size);
fp_status ocl_copy(fp_context *ctx, void *dst, uint64_t dst_offset, void *src, uint64_t src_offset,
                   uint64_t bytes);
fp_status ocl_finish(fp_context *ctx);
/* The backend's pieces the Oclgrind transfers (opencl_oclgrind.c) work with. */
ocl_xfer_env ocl_xfer_env_of(const cl_state *cl);

/* ---- opencl_events.c ---- */

/* The host's monotonic clock in milliseconds. */
double ocl_now_ms(void);
fp_status ocl_event_create(fp_context *ctx, void **event);
void ocl_event_destroy(fp_context *ctx, void *event);
fp_status ocl_event_record(fp_context *ctx, void *event);
fp_status ocl_event_synchronize(fp_context *ctx, void *event);
fp_status ocl_event_elapsed_ms(fp_context *ctx, void *start, void *end, double *ms);

/* ---- opencl_program.c ---- */

/* The kernel's family built (at first need), or its build error on the
 * context. */
fp_status ocl_require_family(fp_context *ctx, cl_state *cl, fp_kernel_id id);
bool ocl_kernel_available(fp_context *ctx, fp_kernel_id id);
fp_status ocl_kernel_prepare(fp_context *ctx, fp_kernel_id id, double *compile_ms);

/* ---- opencl_backend.c ---- */

/* The argument positions of M and N of the planned row kernels; false for
 * every other kernel (host geometry). */
bool ocl_rows_mn_args(fp_kernel_id id, int *m_arg, int *n_arg);

#endif
