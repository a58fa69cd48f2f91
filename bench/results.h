/* fuseport benchmark results: cell records, the JSON and CSV files, atomic
 * writes, and the views that the table, compare and report print: the
 * (op, params) x dim0 x dim1 grids of rank-2 cells and, for cells of rank 3
 * and more (a GEMM's M x N x K), one list per op.
 *
 * A results file is JSON (written and read with cJSON):
 *
 *   {"meta": {device, driver, backend, platform, fuseport_version,
 *             git_commit, date, host, options, copy_gbps,
 *             peak_tflops: {"f16": {"tflops": x, "source": "..."}, ...}, ...},
 *    "cells": [{op, variant, backend, params, shape: [d0, d1, ...], status,
 *               median_us, ..., ok, message}, ...]}
 *
 * one cell a line, in the canonical order of the sweep (bench_core.h). A
 * shape has 2 to FP_SHAPE_MAX_DIMS dimensions; files from before N-dim shapes
 * (every shape [dim0, dim1], no peak_tflops, no library_calls or roof_frac)
 * read as they are. Numbers that do not apply to a cell (the timing of an oom
 * cell, the bandwidth fraction when the copy bandwidth is unknown) are null in
 * the file and NaN in memory.
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
#define FP_SHAPE_MAX_DIMS 7
/* The largest dimension: 2^53, the largest integer of a results file's
 * numbers (doubles) above which not every integer is exact. The command
 * line takes no larger one, so that every sweep's file reads back. */
#define FP_SHAPE_MAX_DIM 9007199254740992ll
typedef struct fp_shape {
  int n;
  int64_t d[FP_SHAPE_MAX_DIMS];
} fp_shape;

/* The shape as a JSON array [d0, d1, ...] (NULL: no memory), and back:
 * false unless an array of 2 to FP_SHAPE_MAX_DIMS integers in [1,
 * FP_SHAPE_MAX_DIM]. */
cJSON *fp_shape_to_json(const fp_shape *s);
bool fp_shape_from_json(const cJSON *a, fp_shape *s);
/* "1024x1024x1024" into buf. */
void fp_shape_format(const fp_shape *s, char *buf, size_t len);
bool fp_shape_equal(const fp_shape *a, const fp_shape *b);
/* A rank-2 shape (dim0 x dim1). */
fp_shape fp_shape_2d(int64_t dim0, int64_t dim1);
/* Lexicographic order (rank first): <0, 0, >0. */
int fp_shape_compare(const fp_shape *a, const fp_shape *b);

/* What happened to a cell.
 *   ok     correct result, timed
 *   fail   timed, but the result is outside the tolerance (or the layer
 *          counted a different number of kernels than the cost model says)
 *   oom    the cell did not fit in device memory (or under the memory cap)
 *   error  anything else went wrong; `message` says what
 *   unsupported  the backend cannot run the variant (FP_ERR_UNSUPPORTED from
 *          its cost model or its run: vendor off CUDA, a type the backend's
 *          library lacks); `message` says why. Not a failure: never counted
 *          as one, marked n/a in the tables, not retried by --retry-errors. */
typedef enum fp_cell_status {
  FP_CELL_OK = 0,
  FP_CELL_FAIL,
  FP_CELL_OOM,
  FP_CELL_ERROR,
  FP_CELL_UNSUPPORTED,
  FP_CELL_STATUS_COUNT
} fp_cell_status;

/* "ok", "fail", "oom", "error", "unsupported". */
const char *fp_cell_status_name(fp_cell_status s);
/* false when the name is not one of them */
bool fp_cell_status_parse(const char *name, fp_cell_status *out);

typedef struct fp_cell {
  char op[64];
  char variant[32];
  char backend[16];
  char params[256]; /* the op's non-shape parameters, "p=0.5 training=false ..."; "" if none */
  fp_shape shape;   /* the op's grid dimensions: dim0 x dim1, M x N x K, ... */
  fp_cell_status status;
  /* NaN where it does not apply */
  double median_us, min_us, max_us;
  double reps;          /* timed repetitions */
  double kernels;       /* launches per call, counted by the backend layer */
  double library_calls; /* vendor-library calls per call (cuBLAS...), counted there too */
  double bytes;         /* cost model: bytes read + written per call */
  double gbps;          /* bytes / median */
  double bw_frac;       /* gbps / the run's device-to-device copy bandwidth */
  /* the roofline: max(bytes / copy bandwidth, flops / peak FLOP/s of the
   * cell's compute type) / median; the bandwidth term alone where the peak
   * is unknown, the FLOP term alone where the copy bandwidth is */
  double roof_frac;
  double flops, gflops;   /* cost model per call; flops / median */
  double footprint_bytes; /* intermediates the variant's plan allocated */
  double peak_bytes;      /* device high-water mark of the cell over the run's baseline */
  double compile_ms;      /* build/load of the variant's kernel families, once per run */
  double max_abs_err, max_rel_err, rel_l2_err;
  bool ok; /* the reference check passed (and the kernel and library call counts matched) */
  char message[512];
} fp_cell;

/* A cell with every number NaN, status error, ok false. */
void fp_cell_init(fp_cell *c);
/* Same (op, params, shape, variant): the identity of a cell within a file. */
bool fp_cell_same_key(const fp_cell *a, const fp_cell *b);

/* The peak FLOP/s of one compute type, for the roofline (meta.peak_tflops). */
#define FP_RESULTS_MAX_PEAKS 8
typedef struct fp_peak {
  char dtype[8];    /* "f32", "f16", "bf16" */
  double tflops;    /* NaN: unknown (null in the file) */
  char source[192]; /* "measured: cuBLAS ... 8192^3 f16", "stated: FUSEPORT_PEAK_TFLOPS" */
} fp_peak;

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
  /* the peaks of the compute types the sweep's cells use; has_peaks: the
   * file holds "peak_tflops" (written only then, so older files round-trip) */
  bool has_peaks;
  int n_peaks;
  fp_peak peaks[FP_RESULTS_MAX_PEAKS];
  cJSON *options; /* owned; the sweep's options (bench_core.h) */
  cJSON *extra;   /* owned; any other meta fields, kept as read (may be NULL) */
  /* Set in the file while a group runs ("running": {op, params, shape,
   * attempt}): a file that still holds it was left by a process that died
   * inside that group (SIGKILL, a preemption, a hang killed by a timeout, a
   * crash in a driver). */
  bool running;
  fp_cell running_key; /* op, params, shape */
  /* Which run of the group this is: 1 the first, 2 the retry of --resume
   * (bench_core.h, FP_BENCH_GROUP_ATTEMPTS). Files without "attempt" (from
   * before it) read as 1. */
  int running_attempt;
} fp_results_meta;

/* The peak of dtype in TFLOP/s, NaN when unknown or not recorded. */
double fp_results_peak(const fp_results_meta *m, const char *dtype);
/* Records (or replaces) the peak of dtype; sets has_peaks. */
fp_status fp_results_set_peak(fp_results_meta *m, const char *dtype, double tflops,
                              const char *source);

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
/* One header line and one line per cell (caller frees): the columns of
 * FP_RESULTS_CSV_HEADER, the cell's JSON fields with its shape as "MxNxK"
 * and, for rank-2 cells only, dim0 and dim1 again (empty otherwise); an
 * empty field is a null. */
#define FP_RESULTS_CSV_HEADER                                                                      \
  "op,variant,backend,params,shape,dim0,dim1,status,median_us,min_us,max_us,reps,kernels,"         \
  "library_calls,bytes,gbps,bw_frac,roof_frac,flops,gflops,footprint_bytes,peak_bytes,"            \
  "compile_ms,max_abs_err,max_rel_err,rel_l2_err,ok,message"
fp_status fp_results_to_csv(const fp_results *r, char **text);

/* Writes path atomically: a temporary file in the same directory, flushed to
 * disk, renamed over path. Readers see the old or the new file, never half. */
fp_status fp_write_file_atomic(const char *path, const char *data, size_t len);
/* Reads a whole file (caller frees). */
fp_status fp_read_file(const char *path, char **data, size_t *len);

/* ---- views: grids and lists ------------------------------------------------------ */

/* A rank-2 (op, params) laid out on its dim0 x dim1 grid, or (rank >= 3)
 * the cells of one op of that rank as a list: one row per (shape, params). */
typedef struct fp_grid_row {
  fp_shape shape;
  char params[256];
} fp_grid_row;

typedef struct fp_grid {
  char op[64];
  char params[256]; /* rank 2; "" for a list, whose rows carry their own */
  int rank;         /* 2: a grid; >= 3: a list */
  int n0, n1;
  int64_t *dim0, *dim1; /* rank 2: ascending */
  int n_rows;
  fp_grid_row *rows; /* rank >= 3: in order of first appearance */
} fp_grid;

typedef struct fp_grid_set {
  fp_grid *grids; /* in order of first appearance */
  int n;
} fp_grid_set;

/* Groups the cells of r: rank-2 cells by (op, params), each grid's axes the
 * distinct dims of its cells; cells of rank >= 3 by (op, rank). */
fp_status fp_grid_set_build(const fp_results *r, fp_grid_set *set);
void fp_grid_set_free(fp_grid_set *set);
/* The cell of (grid, dim0, dim1, variant) in r, or NULL (rank-2 grids). */
const fp_cell *fp_grid_cell(const fp_results *r, const fp_grid *g, int64_t dim0, int64_t dim1,
                            const char *variant);
/* The cell of (list, row, variant) in r, or NULL (lists). */
const fp_cell *fp_list_cell(const fp_results *r, const fp_grid *g, const fp_grid_row *row,
                            const char *variant);
/* The distinct variants of the cells of g in r, in order of first
 * appearance; returns how many (at most max). */
int fp_grid_variants(const fp_results *r, const fp_grid *g, const char **names, int max);

/* Short marks for cells without a number. */
const char *
fp_cell_mark(const fp_cell *c); /* "-" (NULL), "OOM", "FAIL", "ERR", "n/a", or NULL if ok */
/* The most telling mark of two cells (ERR > FAIL > OOM > n/a > -), NULL
 * when both are ok. */
const char *fp_cell_mark_pair(const fp_cell *a, const fp_cell *b);

/* Relative performance of a grid point: 100 * unfused median / fused median.
 * Returns false (and *mark says why: "-", "OOM", "FAIL", "ERR", "n/a") when
 * either cell is missing or not ok. */
bool fp_relperf(const fp_cell *fused, const fp_cell *unfused, double *pct, const char **mark);

/* Writes a text grid: a title line, a header "dim0\dim1 ...", one row per
 * dim0; value(user, dim0, dim1, buf, len) fills each cell's text. */
void fp_grid_print(FILE *f, const fp_grid *g, const char *title,
                   void (*value)(void *user, int64_t dim0, int64_t dim1, char *buf, size_t len),
                   void *user);

/* A text table: ncols columns, a header row, then rows; each cell is
 * cells[row * ncols + col]. The first `left` columns are left-aligned, the
 * others right-aligned. */
void fp_text_table_print(FILE *f, const char *const *header, int ncols, const char *const *cells,
                         int nrows, int left);

#endif
