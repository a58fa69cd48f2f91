/* fuseport OpenCL backend: the launch planner of the ROWS kernels of
 * kernels/cl/reduce*.cl and horizontal.cl -- plain C (no OpenCL call), so
 * that tests/test_opencl_rows.c runs it against any device's limits. The
 * rule and its measurements are in opencl_rows.c. */
#ifndef FUSEPORT_OPENCL_ROWS_H
#define FUSEPORT_OPENCL_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The planner's constants and the defaults of its tuning variables. */
#define FP_CL_ROW_VEC 4         /* default FP_ROW_VEC of common.cl */
#define FP_CL_MIN_TEAM 4        /* FP_MIN_TEAM of common.cl */
#define FP_CL_ROWS_GROUP 256    /* smallest planned group */
#define FP_CL_CACHE_TEAM 256    /* largest team of cached rows (see opencl_rows.c) */
#define FP_CL_HREDUCE_VEC 8     /* FP_HREDUCE_VEC of horizontal.cl */
#define FP_CL_STREAM_VECTORS 16 /* float4 per work-item and pass of a streamed row */
#define FP_CL_ROWS_MAX_GROUPS (1u << 20)
#define FP_CL_MAX_GROUP 1024     /* FP_MAX_GROUP of common.cl */
#define FP_CL_LOCAL_ROW_VEC 2048 /* FP_LOCAL_ROW_VEC of common.cl */
/* Rows of fewer vectors stream without the local cache: on an H100
 * (NVIDIA OpenCL, 2026-11-23, docs/PERF.md) rows of 5000 and 6000 floats
 * ran 4-8% slower through it, rows of 8192 5-12% faster. */
#define FP_CL_LOCAL_ROW_MIN_VEC 1537
/* Local memory of a group of a _local kernel: lcache, then slots[] and
 * partials[] (FP_MAX_GROUP floats each). */
#define FP_CL_LOCAL_ROW_BYTES (16u * FP_CL_LOCAL_ROW_VEC + 8u * FP_CL_MAX_GROUP)
/* ... and of a group of a _local_back kernel, whose lcache holds
 * FP_PREFIX_ROW_VEC = 1.25 * FP_CL_LOCAL_ROW_VEC float4 (48 KiB in all) */
#define FP_CL_PREFIX_ROW_BYTES (20u * FP_CL_LOCAL_ROW_VEC + 8u * FP_CL_MAX_GROUP)
/* Streamed rows of at least this many floats take the _stream_back kernel
 * where the program has one (softmax, norm_chain, layernorm and
 * softmax_backward): its output pass writes each work-item's vectors last
 * first, so it starts on the end of the row, the part the pass before read
 * last and the likeliest still in L2. On an H100 (NVIDIA OpenCL,
 * 2026-11-25, three alternating rounds) from 32768 floats on: softmax,
 * norm_chain and layernorm 1.06-1.10x (softmax 2048 x 65536 535 -> 489 us),
 * softmax_backward 1.06-1.10x from 1024 rows (256 x 32768 52.8 -> 55.1 us
 * slower); at 8192-20001 floats the same order, in the _stream kernels,
 * lost up to 9% (softmax_backward 4096 x 10240), and _stream keeps its
 * forward loop. Where the row has its group to itself, softmax and
 * norm_chain take _local_back instead, which also keeps the row's first
 * 1.25 * FP_CL_LOCAL_ROW_VEC vectors (the part L2 has most likely lost by
 * the output pass) in local memory: against _stream_back, same call, with
 * 8192 floats 1.09-1.13x at 32768 floats (norm_chain 4096 x 32768 499 ->
 * 448 us), 1.04-1.06x at 65536; 10240 floats (48 KiB of local memory with
 * the reduction scratch) added 1.025-1.03x and 1.01-1.02x.
 * FUSEPORT_OPENCL_ROW_LOCAL=0 keeps them on _stream_back. */
#define FP_CL_STREAM_BACK_MIN_N 32768

/* A row operator's kernels: the specialisations of common.cl's
 * FP_ROWS_KERNELS by the suffix of their names, then the generic kernel
 * (kernels.def's name; both paths, any geometry). */
typedef enum ocl_row_kernel {
  OCL_ROW_CACHED = 0,  /* _cached: the row in registers; only the planned team */
  OCL_ROW_STREAM,      /* _stream: re-read from global memory for each pass */
  OCL_ROW_LOCAL,       /* _local: streamed once, the later passes from local memory */
  OCL_ROW_STREAM_BACK, /* _stream_back: _stream, its output pass last vector first */
  OCL_ROW_LOCAL_BACK,  /* _local_back: _stream_back, the row's first vectors from local memory */
  OCL_ROW_GENERIC,     /* <op>_fused itself */
  OCL_ROW_KERNELS
} ocl_row_kernel;
#define OCL_ROW_VARIANTS OCL_ROW_GENERIC /* the specialisations */

/* The per-operator exceptions of the rule (opencl_rows.c). */
typedef enum ocl_rows_kind {
  OCL_ROWS_PLAIN = 0,  /* softmax, double_softmax, norm_chain */
  OCL_ROWS_WIDE,       /* softmax_backward: caches up to teams of 512, streams with 1024 */
  OCL_ROWS_LAYERNORM,  /* caches rows of up to 4 * FP_ROW_VEC vectors only */
  OCL_ROWS_HORIZONTAL, /* hreduce_*: teams of FP_CL_HREDUCE_VEC vectors, one kernel */
} ocl_rows_kind;

/* The device and the context's tuning (FUSEPORT_OPENCL_*; 0: the rule's). */
typedef struct ocl_rows_config {
  uint32_t max_group;    /* the device's largest group (fp_device_info) */
  uint64_t device_local; /* CL_DEVICE_LOCAL_MEM_SIZE */
  uint32_t row_vec;      /* FP_ROW_VEC of the build */
  uint32_t rows_max_group, stream_group;
  bool host_geometry; /* keep the host's geometry (and the generic kernel where it fits) */
  bool generic_rows;  /* the generic kernel with the planned geometry */
  bool row_local, stream_back;
  bool local_rows_fit; /* the programs were built with their _local kernels */
} ocl_rows_config;

/* One launch: the op, M and N (planned only when `planned`: a 1-D launch
 * whose arguments look as kernels.def says), the host's geometry, and the
 * local memory each of the op's kernels takes as the driver reports it
 * (CL_KERNEL_LOCAL_MEM_SIZE), -1 where the program has no such kernel. */
typedef struct ocl_rows_request {
  ocl_rows_kind kind;
  bool planned;
  int64_t M, N;
  size_t global, local;
  int64_t local_bytes[OCL_ROW_KERNELS];
} ocl_rows_request;

typedef struct ocl_rows_launch {
  size_t global, local;
  ocl_row_kernel kernel;
} ocl_rows_launch;

/* The launch of rq on the device: the planned geometry and kernel, or the
 * host's geometry and the generic kernel (see opencl_rows.c), then the
 * first kernel in the fallback order of that choice whose local memory the
 * device holds. False, with `why` filled, when none does. */
bool ocl_rows_plan(const ocl_rows_config *cfg, const ocl_rows_request *rq, ocl_rows_launch *out,
                   char *why, size_t cap);

/* The suffix of a specialisation's name ("" for the generic kernel). */
const char *ocl_row_kernel_suffix(ocl_row_kernel k);

#endif
