/* fuseport bench: the command-line side of the benchmark core (option
 * parsing, resume checks, the text tables), split out so the tests can call
 * each piece in-process. */
#ifndef FUSEPORT_CLI_BENCH_H
#define FUSEPORT_CLI_BENCH_H

#include <stdbool.h>
#include <stdio.h>

#include "bench_core.h"
#include "cli.h"
#include "results.h"

typedef enum fp_out_format { FP_FORMAT_TABLE = 0, FP_FORMAT_CSV, FP_FORMAT_JSON } fp_out_format;

/* Which sweep options the command line set explicitly (for --resume). */
enum {
  FP_GIVEN_OPS = 1 << 0,
  FP_GIVEN_VARIANTS = 1 << 1,
  FP_GIVEN_SHAPES = 1 << 2,
  FP_GIVEN_PARAMS = 1 << 3,
  FP_GIVEN_SEED = 1 << 4,
  FP_GIVEN_REPS = 1 << 5, /* --reps or --rep-ms */
  FP_GIVEN_WARMUP = 1 << 6,
  FP_GIVEN_SAMPLE = 1 << 7,
  FP_GIVEN_SHARD = 1 << 8,
  FP_GIVEN_FLUSH = 1 << 9,
  FP_GIVEN_FLUSH_MODE = 1 << 10
};

typedef struct fp_bench_cli {
  fp_cli_target target;
  fp_bench_spec spec;
  unsigned given;
  fp_out_format format;
  const char *out;    /* NULL: stdout only */
  const char *resume; /* NULL: a fresh run */
  bool quiet;
  bool retry_errors;    /* --resume: run the error cells (and a group a run died in) again */
  char backend_buf[16]; /* the backend taken from a --resume file */
} fp_bench_cli;

/* Parses `bench` arguments (argv[0] is "bench"). Returns FP_EXIT_OK,
 * FP_EXIT_USAGE after printing a message that names the bad flag or value,
 * or -1 when --help was printed. */
int fp_bench_parse_args(int argc, char **argv, fp_bench_cli *cli);

/* --resume: takes the sweep options the command line did not set from the
 * file's meta.options and checks that those it did set, the backend and the
 * device (and, in fp_bench_resume_device, the FUSEPORT_* environment)
 * agree with the file. On a mismatch returns false after printing
 * what differs. */
bool fp_bench_resume_spec(fp_bench_cli *cli, const fp_results *file, const char *path);
bool fp_bench_resume_device(const fp_results *file, const char *path, fp_context *ctx);
/* --resume: says on stderr what becomes of the group a process died inside
 * (meta.running), if any: retried once, or recorded as error after
 * FP_BENCH_GROUP_ATTEMPTS deaths. Nothing with --retry-errors, which says it
 * itself. */
void fp_bench_resume_note(const fp_results *file, bool retry_errors);

/* The per-op tables: for rank-2 ops the dim0 x dim1 grids of relative
 * performance (unfused/fused %), the fused median time (us) and its
 * bandwidth fraction (TFLOP/s and roofline fraction for a compute-bound
 * op); for ops of rank 3 and more a list, one row per (shape, params): each
 * variant's median, the other variants' medians over fused, and fused's
 * TFLOP/s (bandwidth fraction for a memory-bound op) and roofline fraction.
 * Then any failed cells, and how many are n/a. */
void fp_bench_print_table(FILE *f, const fp_results *r);

/* ---- shared by the tables of bench, compare and report (cli_table.c) ---- */

/* Whether the op's headline is compute -- TFLOP/s and the roofline fraction
 * -- rather than the bandwidth fraction: an op of the registry with a compute
 * type (its compute_dtype hook is set: the matmul family). Other ops, and
 * names the registry does not know, are memory-bound. */
bool fp_op_name_compute_bound(const char *op);
/* The variants a view shows at most. */
#define FP_RESULTS_MAX_VARIANTS 8
/* "fused" when among names, else the first. */
const char *fp_headline_variant(const char *const *names, int n);
/* "softmax (training=true)" for a grid, "matmul_add (shape MxNxK)" for a list. */
void fp_view_title(const fp_grid *g, char *buf, size_t len);
/* A time in us; a cell's median (ok or fail) or its mark; TFLOP/s or the
 * mark; a fraction as a percentage (or the cell's mark, "-" for NaN). */
void fp_fmt_time(double us, char *buf, size_t len);
void fp_fmt_cell_time(const fp_cell *c, char *buf, size_t len);
void fp_fmt_tflops(const fp_cell *c, char *buf, size_t len);
void fp_fmt_frac(const fp_cell *c, double frac, char *buf, size_t len);
/* num median / den median ("1.23"), or the pair's mark; returns the ratio,
 * NaN where there is none. */
double fp_fmt_ratio(const fp_cell *num, const fp_cell *den, char *buf, size_t len);

#endif
