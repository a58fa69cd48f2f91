/* fuseport benchmark results: cell records, the JSON and CSV files, atomic
 * writes, and the (op, params) x dim0 x dim1 grids that the table, compare
 * and report views print.
 *
 * A results file is JSON (written and read with cJSON):
 *
 *   {"meta": {device, driver, backend, platform, fuseport_version,
 *             git_commit, date, host, options, copy_gbps, ...},
 *    "cells": [{op, variant, backend, params, shape: [dim0, dim1], status,
 *               median_us, ..., ok, message}, ...]}
 *
 * one cell a line, in the canonical order of the sweep (bench_core.h).
 * Numbers that do not apply to a cell (the timing of an oom cell, the
 * bandwidth fraction when the copy bandwidth is unknown) are null in the file
 * and NaN in memory.
 */
#ifndef FUSEPORT_RESULTS_H
#define FUSEPORT_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fp_status.h"

typedef struct cJSON cJSON;

/* A problem's shape in a sweep: the op's grid dimensions (ops/op.h,
 * FP_MAX_GRID_DIMS), "MxN" for the row ops, "MxNxK" for a GEMM. */
#define FP_SHAPE_MAX_DIMS 5
typedef struct fp_shape {
  int n;
  int64_t d[FP_SHAPE_MAX_DIMS];
} fp_shape;

/* "1024x1024x1024" into buf. */
void fp_shape_format(const fp_shape *s, char *buf, size_t len);
bool fp_shape_equal(const fp_shape *a, const fp_shape *b);

/* What happened to a cell.
 *   ok     correct result, timed
 *   fail   timed, but the result is outside the tolerance (or the layer
 *          counted a different number of kernels than the cost model says)
 *   oom    the cell did not fit in device memory (or under the memory cap)
 *   error  anything else went wrong; `message` says what */
typedef enum fp_cell_status {
  FP_CELL_OK = 0,
  FP_CELL_FAIL,
  FP_CELL_OOM,
  FP_CELL_ERROR,
  FP_CELL_STATUS_COUNT
} fp_cell_status;

const char *fp_cell_status_name(fp_cell_status s);
/* false when the name is not one of ok, fail, oom, error */
bool fp_cell_status_parse(const char *name, fp_cell_status *out);

typedef struct fp_cell {
  char op[64];
  char variant[32];
  char backend[16];
  char params[256]; /* the op's non-shape parameters, "p=0.5 training=false ..."; "" if none */
  int64_t dim0, dim1;
  fp_cell_status status;
  /* NaN where it does not apply */
  double median_us, min_us, max_us;
  double reps;            /* timed repetitions */
  double kernels;         /* launches per call, counted by the backend layer */
  double bytes;           /* cost model: bytes read + written per call */
  double gbps;            /* bytes / median */
  double bw_frac;         /* gbps / the run's device-to-device copy bandwidth */
  double flops, gflops;   /* cost model per call; flops / median */
  double footprint_bytes; /* intermediates the variant's plan allocated */
  double peak_bytes;      /* device high-water mark of the cell over the run's baseline */
  double compile_ms;      /* build/load of the variant's kernel families, once per run */
  double max_abs_err, max_rel_err, rel_l2_err;
  bool ok; /* the reference check passed (and the kernel count matched) */
  char message[512];
} fp_cell;

/* A cell with every number NaN, status error, ok false. */
void fp_cell_init(fp_cell *c);
/* Same (op, params, shape, variant): the identity of a cell within a file. */
bool fp_cell_same_key(const fp_cell *a, const fp_cell *b);

typedef struct fp_results_meta {
  char device[256];
  char driver[128];
  char backend[16];
  char platform[256];
  char fuseport_version[32];
  char git_commit[64];
  char date[40]; /* ISO 8601, UTC */
  char host[256];
  double copy_gbps; /* NaN: not measured */
  cJSON *options;   /* owned; the sweep's options (bench_core.h) */
  cJSON *extra;     /* owned; any other meta fields, kept as read (may be NULL) */
  /* Set in the file while a group runs ("running": {op, params, shape}): a
   * file that still holds it was left by a process that died inside that
   * group (a hang killed by a timeout, a crash in a driver). */
  bool running;
  fp_cell running_key; /* op, params, dim0, dim1 */
} fp_results_meta;

typedef struct fp_results {
  fp_results_meta meta;
  fp_cell *cells;
  int n_cells, cap_cells;
  char **cell_json; /* cache of each cell's one-line JSON (NULL: not built yet) */
} fp_results;

void fp_results_init(fp_results *r);
void fp_results_free(fp_results *r);
/* Appends a copy of the cell. */
fp_status fp_results_add(fp_results *r, const fp_cell *c);
/* Removes the cells of status s; returns how many. */
int fp_results_remove_status(fp_results *r, fp_cell_status s);
/* Index of the cell with c's key, or -1. */
int fp_results_find(const fp_results *r, const fp_cell *key);
/* Reorders the cells by rank[k] (the new position of cell k is the k-th
 * smallest rank; equal ranks keep their order). */
fp_status fp_results_reorder(fp_results *r, const int64_t *rank);

/* ---- files ------------------------------------------------------------------ */

/* The whole file as text (caller frees). */
fp_status fp_results_to_json(fp_results *r, char **text);
fp_status fp_results_from_json(const char *text, const char *name, fp_results *r);
fp_status fp_results_read_file(const char *path, fp_results *r);
/* One header line and one line per cell (caller frees). */
fp_status fp_results_to_csv(const fp_results *r, char **text);

/* Writes path atomically: a temporary file in the same directory, flushed to
 * disk, renamed over path. Readers see the old or the new file, never half. */
fp_status fp_write_file_atomic(const char *path, const char *data, size_t len);
/* Reads a whole file (caller frees). */
fp_status fp_read_file(const char *path, char **data, size_t *len);

/* ---- grids --------------------------------------------------------------------- */

/* The cells of one (op, params) laid out on their dim0 x dim1 grid. */
typedef struct fp_grid {
  char op[64];
  char params[256];
  int n0, n1;
  int64_t *dim0, *dim1; /* ascending */
} fp_grid;

typedef struct fp_grid_set {
  fp_grid *grids; /* in order of first appearance */
  int n;
} fp_grid_set;

/* Groups the cells of r by (op, params); each grid's axes are the distinct
 * dims of its cells. */
fp_status fp_grid_set_build(const fp_results *r, fp_grid_set *set);
void fp_grid_set_free(fp_grid_set *set);
/* The cell of (grid, dim0, dim1, variant) in r, or NULL. */
const fp_cell *fp_grid_cell(const fp_results *r, const fp_grid *g, int64_t dim0, int64_t dim1,
                            const char *variant);

/* Short marks for cells without a number. */
const char *fp_cell_mark(const fp_cell *c); /* "-" (NULL), "OOM", "FAIL", "ERR", or NULL if ok */

/* Relative performance of a grid point: 100 * unfused median / fused median.
 * Returns false (and *mark says why: "-", "OOM", "FAIL", "ERR") when either
 * cell is missing or not ok. */
bool fp_relperf(const fp_cell *fused, const fp_cell *unfused, double *pct, const char **mark);

/* Writes a text grid: a title line, a header "dim0\dim1 ...", one row per
 * dim0; value(user, dim0, dim1, buf, len) fills each cell's text. */
void fp_grid_print(FILE *f, const fp_grid *g, const char *title,
                   void (*value)(void *user, int64_t dim0, int64_t dim1, char *buf, size_t len),
                   void *user);

#endif
