/* fuseport command: shared pieces of the subcommands. */
#ifndef FUSEPORT_CLI_H
#define FUSEPORT_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "op.h"
#include "results.h"

/* Exit codes of every subcommand. */
enum { FP_EXIT_OK = 0, FP_EXIT_FAIL = 1, FP_EXIT_USAGE = 2 };

/* Where a subcommand runs: --backend, --device, --platform. */
typedef struct fp_cli_target {
  const char *backend; /* NULL: not given */
  int device;          /* -1: first */
  const char *platform;
} fp_cli_target;

/* Handles --backend/--device/--platform at argv[*i] (advancing *i past a
 * value). Returns 1 if it consumed the option, 0 if the option is not one of
 * these, -1 on a usage error (message printed). */
int fp_cli_target_option(fp_cli_target *t, int argc, char **argv, int *i);
/* Opens the context the target names; prints the error and returns NULL on
 * failure. */
fp_context *fp_cli_open(const fp_cli_target *t);

/* The value of option argv[*i] (advancing *i), or NULL after printing a
 * usage error when it is missing. */
const char *fp_cli_value(int argc, char **argv, int *i);
/* Parses a decimal integer in [min, max]; prints a usage error naming the
 * option and returns false otherwise. */
bool fp_cli_parse_i64(const char *option, const char *text, int64_t min, int64_t max, int64_t *out);
/* Parses "MxN[xK...][,...]" (each shape 2 to FP_SHAPE_MAX_DIMS dims in [1,
 * FP_SHAPE_MAX_DIM]) into up to max shapes; false (message printed) on
 * error. */
bool fp_cli_parse_shape_list(const char *option, const char *text, fp_shape *shapes, int max,
                             int *count);
/* The op's shape as its grid parameters' names: "MxN", "MxNxK", ... */
void fp_cli_shape_pattern(const fp_op *op, char *buf, size_t len);
/* Splits a comma list of op names ("all" for every op) into ops; false on an
 * unknown name (message printed). */
bool fp_cli_parse_ops(const char *text, const fp_op **ops, int max, int *count);
/* Parses a real number in [min, max]; prints a usage error naming the option
 * and returns false otherwise. */
bool fp_cli_parse_f64(const char *option, const char *text, double min, double max, double *out);
/* Parses a comma list of integers in [1, FP_SHAPE_MAX_DIM] ("128,256,512")
 * into up to max values; false (message printed) on error. */
bool fp_cli_parse_dims(const char *option, const char *text, int64_t *dims, int max, int *count);

int fp_cmd_list(int argc, char **argv);
int fp_cmd_check(int argc, char **argv);
/* The benchmark's subcommands (cli_bench.c, cli_compare.c, cli_merge.c,
 * cli_report.c). */
int fp_cmd_bench(int argc, char **argv);
int fp_cmd_compare(int argc, char **argv);
int fp_cmd_merge(int argc, char **argv);
int fp_cmd_report(int argc, char **argv);

#endif
