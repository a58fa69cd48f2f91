/* fuseport OpenCL backend: what running on Oclgrind (the OpenCL simulator,
 * tests/oclgrind.sh) needs of the backend. Its --uninitialized check keeps a
 * shadow of every buffer, and in 21.10 (Debian 12's; 26.03 the same):
 *   - each store the host makes (clEnqueueWriteBuffer, clEnqueueCopyBuffer,
 *     and every pattern-sized store of clEnqueueFillBuffer) replaces the
 *     buffer's shadow with one the size of that store, then writes it at the
 *     store's offset: any fill of more than one pattern, and any write or
 *     copy that is not the whole buffer, writes past it (Oclgrind's own heap:
 *     it crashed in Uninitialized::instructionExecuted), and a buffer the
 *     host once filled reads as uninitialised ever after;
 *   - the shadow of a released buffer stays, and the next buffer created
 *     with the same index inherits it, of the old buffer's size.
 * Stores made by kernels are tracked byte for byte, so in this mode the
 * backend fills and copies with the kernels of opencl_oclgrind.c, stages a
 * partial write through a whole-buffer write of its own, does not touch new
 * buffers (the touch would pass for initialised data), and keeps released
 * buffers until the context ends (Oclgrind's state is per context). */
#ifndef FUSEPORT_OPENCL_OCLGRIND_H
#define FUSEPORT_OPENCL_OCLGRIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <CL/cl.h>

#include "backend_impl.h"

/* Per-context state (the program, built at first use). */
typedef struct ocl_xfer ocl_xfer;

typedef struct ocl_xfer_env {
  cl_context context;
  cl_device_id device;
  cl_command_queue queue;
} ocl_xfer_env;

/* NULL when the host has no memory. */
ocl_xfer *ocl_xfer_create(void);
/* Releases the program and kernels (the queue must be idle); NULL is fine. */
void ocl_xfer_destroy(ocl_xfer *x);

/* Whether to work as above: on Oclgrind (by the platform's name), unless
 * FUSEPORT_OPENCL_OCLGRIND=0|1 says otherwise (1 on another platform tests
 * these paths); false with *bad set when that variable is neither. */
bool ocl_oclgrind_wanted(const char *platform_name, bool *bad);

/* bytes at offset of dst set to the pattern repeated (pattern_size 1, 2, 4,
 * 8 or 16; offset and bytes multiples of it, as the layer checks). Enqueued. */
fp_status ocl_xfer_fill(fp_context *ctx, ocl_xfer *x, const ocl_xfer_env *env, cl_mem dst,
                        uint64_t offset, uint64_t bytes, const void *pattern, size_t pattern_size);
/* bytes from src at src_offset to dst at dst_offset (not overlapping). Enqueued. */
fp_status ocl_xfer_copy(fp_context *ctx, ocl_xfer *x, const ocl_xfer_env *env, cl_mem dst,
                        uint64_t dst_offset, cl_mem src, uint64_t src_offset, uint64_t bytes);
/* bytes from the host into dst at offset: a whole-buffer write directly, any
 * other through a buffer of its own and ocl_xfer_copy. Blocking. */
fp_status ocl_xfer_write(fp_context *ctx, ocl_xfer *x, const ocl_xfer_env *env, cl_mem dst,
                         uint64_t offset, const void *src, uint64_t bytes);

#endif
