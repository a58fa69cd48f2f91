/* fuseport benchmark core: pieces shared by its files (bench_measure.c,
 * bench_core.c); not part of the API. */
#ifndef FUSEPORT_BENCH_INTERNAL_H
#define FUSEPORT_BENCH_INTERNAL_H

#include "bench_core.h"

/* The last-level cache flush: a buffer of fp_bench_run_flush_bytes, written
 * with a new pattern before each timed repetition or, with --flush read,
 * summed by the backend's row-reduction primitive. */
typedef struct fp_flusher {
  fp_context *ctx;
  fp_buffer *buf;
  fp_buffer *sums; /* --flush read: the row sums */
  uint64_t bytes;
  bool read;
  uint32_t pattern;
} fp_flusher;

/* Allocates the buffers (all or nothing; a message names them). */
fp_status fp_flusher_init(fp_flusher *f, fp_context *ctx, const fp_bench_spec *s);
/* Enqueues one flush. */
fp_status fp_flusher_flush(fp_flusher *f);
void fp_flusher_free(fp_flusher *f);

/* Wall-clock milliseconds (CLOCK_MONOTONIC). */
double fp_bench_wall_ms(void);

#endif
