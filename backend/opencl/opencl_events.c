/* fuseport OpenCL backend: events, the device time between two records
 * (marker timestamps, or clFinish and the host's clock where a platform
 * cannot time markers). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <CL/cl.h>

#include "opencl_internal.h"

/* What an fp_event handle points to. */
typedef struct cl_timestamp {
  cl_event marker; /* CL_TIMING_MARKERS: the last recorded marker (or NULL) */
  double host_ms;  /* CL_TIMING_HOST: the clock at the last record */
} cl_timestamp;

double ocl_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
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
    return ocl_fail(ctx, ocl_status_of(err), err, "clCreateBuffer(%zu bytes, marker timing probe)",
                    probe_bytes);
  cl_event first = NULL, second = NULL;
  const cl_uint zero = 0;
  const char *call = "clEnqueueMarkerWithWaitList";
  err = clEnqueueMarkerWithWaitList(cl->queue, 0, NULL, &first);
  fp_status st = FP_OK;
  if (err == CL_SUCCESS && cl->oclgrind) {
    const ocl_xfer_env env = ocl_xfer_env_of(cl);
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
    st = ocl_fail(ctx, ocl_status_of(err), err, "%s (marker timing probe)", call);
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

fp_status ocl_event_create(fp_context *ctx, void **event) {
  cl_state *cl = ocl_state_of(ctx);
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

void ocl_event_destroy(fp_context *ctx, void *event) {
  (void)ctx;
  cl_timestamp *ts = event;
  if (ts->marker != NULL)
    clReleaseEvent(ts->marker);
  free(ts);
}

fp_status ocl_event_record(fp_context *ctx, void *event) {
  cl_state *cl = ocl_state_of(ctx);
  cl_timestamp *ts = event;
  if (cl->timing == CL_TIMING_HOST) {
    cl_int err = clFinish(cl->queue);
    if (err != CL_SUCCESS)
      return ocl_fail(ctx, ocl_status_of(err), err, "clFinish (event record, host timing)");
    ts->host_ms = ocl_now_ms();
    return FP_OK;
  }
  cl_event marker = NULL;
  cl_int err = clEnqueueMarkerWithWaitList(cl->queue, 0, NULL, &marker);
  if (err != CL_SUCCESS)
    return ocl_fail(ctx, ocl_status_of(err), err, "clEnqueueMarkerWithWaitList (event record)");
  if (ts->marker != NULL)
    clReleaseEvent(ts->marker);
  ts->marker = marker;
  return FP_OK;
}

fp_status ocl_event_synchronize(fp_context *ctx, void *event) {
  cl_timestamp *ts = event;
  if (ts->marker == NULL) /* host timing: the record already waited */
    return FP_OK;
  cl_int err = clWaitForEvents(1, &ts->marker);
  if (err != CL_SUCCESS)
    return ocl_fail(ctx, ocl_status_of(err), err, "clWaitForEvents (event synchronize)");
  return FP_OK;
}

fp_status ocl_event_elapsed_ms(fp_context *ctx, void *start, void *end, double *ms) {
  cl_state *cl = ocl_state_of(ctx);
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
    return ocl_fail(ctx, ocl_status_of(err), err,
                    "clWaitForEvents/clGetEventProfilingInfo(CL_PROFILING_COMMAND_END)");
  /* difference in integers first: the timestamps are too large for a double
   * to keep every nanosecond */
  *ms = (double)(int64_t)(end_ns - start_ns) * 1e-6;
  return FP_OK;
}
