/* fuseport operators: descriptors, cost models, references, variants, and
 * the one registry every tool iterates.
 *
 * An operator is written once on the host: its parameters, the tensors it
 * reads and writes (shape, dtype, strides, how to fill them), the bytes and
 * FLOPs each variant must move, a float64 reference, and a recipe per variant
 * that launches kernels through the backend layer. `fuseport list`, the
 * tests and the benchmark all walk fp_op_at(0..fp_op_count()-1), so an op
 * added to the registry is checked and benchmarked everywhere.
 */
#ifndef FUSEPORT_OP_H
#define FUSEPORT_OP_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FP_MAX_PARAMS 16
#define FP_MAX_TENSORS 6
#define FP_MAX_WORKSPACE 6
#define FP_MAX_VARIANTS 4
#define FP_MAX_KERNEL_IDS 16

/* A problem's shape in a sweep: up to this many dimensions (the op's grid
 * parameters: M x N for the row ops, M x N x K for a GEMM, ...). */
#define FP_MAX_GRID_DIMS 7

/* ---- parameters ------------------------------------------------------------ */

typedef enum fp_param_type {
  FP_PARAM_DIM,   /* a tensor dimension: an integer >= 1; the product of an
                     op's dimensions must keep byte counts inside int64 */
  FP_PARAM_INT,   /* an integer (seeds, counts) */
  FP_PARAM_FLOAT, /* a real number */
  FP_PARAM_BOOL,  /* 0/1, also "true"/"false" */
  FP_PARAM_CHOICE /* one of `choices`; the value is its index */
} fp_param_type;

typedef struct fp_param_decl {
  const char *name;
  fp_param_type type;
  double def, min, max;       /* default and inclusive range */
  const char *const *choices; /* FP_PARAM_CHOICE: NULL-terminated names */
  const char *help;
} fp_param_decl;

struct fp_op;

/* A concrete problem: an op and a value for each of its parameters. */
typedef struct fp_problem {
  const struct fp_op *op;
  double v[FP_MAX_PARAMS];
} fp_problem;

/* Starts from the op's defaults. */
void fp_problem_init(fp_problem *p, const struct fp_op *op);
/* Sets one parameter from text ("4096", "0.1", "true", "transposed"). */
fp_status fp_problem_set(fp_problem *p, const char *name, const char *value);
/* Sets the op's shape from a benchmark grid cell: dims[d] -> the op's
 * grid_param[d]; n must be the op's n_grid. */
fp_status fp_problem_set_grid(fp_problem *p, const int64_t *dims, int n);
/* The same for an op of rank 2 (dim0 x dim1). */
fp_status fp_problem_set_grid2(fp_problem *p, int64_t dim0, int64_t dim1);
/* Full validation: ranges, shapes that overflow, op-specific rules. */
fp_status fp_problem_validate(const fp_problem *p);
int64_t fp_problem_int(const fp_problem *p, int index);
/* "M=128 N=1000 p=0.5 ..." into buf. */
void fp_problem_describe(const fp_problem *p, char *buf, size_t buflen);

/* ---- tensors ------------------------------------------------------------------ */

typedef struct fp_tensor_desc {
  const char *name;
  fp_dtype dtype;
  int rank; /* 1..4 */
  int64_t shape[4];
  int64_t strides[4];    /* in elements; the logical index i of dim d -> i*strides[d] */
  int64_t storage_elems; /* elements the buffer holds */
  float fill_scale;      /* inputs: random values in [-scale, scale) (power of two) */
  bool fill_positive;    /* inputs: [0, scale) instead */
} fp_tensor_desc;

typedef struct fp_io_desc {
  int n_in, n_out;
  fp_tensor_desc in[FP_MAX_TENSORS];
  fp_tensor_desc out[FP_MAX_TENSORS];
} fp_io_desc;

/* Helpers for describe(): a contiguous row-major tensor / a strided view. A
 * negative dim or a product past int64 gives storage_elems -1, which
 * fp_tensor_bytes reports as UINT64_MAX and fp_io_alloc refuses. */
void fp_tensor_1d(fp_tensor_desc *t, const char *name, int64_t n);
void fp_tensor_2d(fp_tensor_desc *t, const char *name, int64_t rows, int64_t cols);
/* A contiguous [d0, d1, d2, d3] (the last dim fastest). */
void fp_tensor_4d(fp_tensor_desc *t, const char *name, int64_t d0, int64_t d1, int64_t d2,
                  int64_t d3);
/* [rows, cols] viewed from a column-major [cols, rows] storage (a transpose). */
void fp_tensor_2d_transposed(fp_tensor_desc *t, const char *name, int64_t rows, int64_t cols);
uint64_t fp_tensor_bytes(const fp_tensor_desc *t);
bool fp_tensor_row_contiguous(const fp_tensor_desc *t);

/* A host view of an input, for the reference: either the float data as
 * stored, or (data == NULL) regenerated on the fly from the same counter-based
 * generator that filled the device buffer. */
typedef struct fp_host_tensor {
  const fp_tensor_desc *desc;
  const void *data; /* storage of desc->dtype, or NULL: regenerate */
  uint64_t seed;
  uint32_t stream;
} fp_host_tensor;

/* Logical element (i) of a rank-1 tensor, (i, j) of a rank-2 tensor, as
 * stored (f16/bf16 values exactly; packed words as their integer value). */
double fp_host_at1(const fp_host_tensor *t, int64_t i);
double fp_host_at2(const fp_host_tensor *t, int64_t i, int64_t j);
/* Storage element `index` (of storage_elems), as fp_host_at* reads it. */
double fp_host_load(const fp_host_tensor *t, int64_t index);
/* The whole storage as float (storage_elems values; exact for f32, f16,
 * bf16): a host copy for references that reread an operand many times (a
 * GEMM's B). NULL when the host has no memory; the caller frees. */
float *fp_host_storage_f32(const fp_host_tensor *t);

/* ---- cost model ------------------------------------------------------------------ */

/* What a variant must move and compute, summed over the kernels it launches:
 * each kernel counts the bytes it must read and write at the least (every
 * operand once) and its floating-point operations. */
typedef struct fp_cost {
  uint64_t bytes_read;
  uint64_t bytes_written;
  double flops;
  int kernels;              /* launches per call */
  int library_calls;        /* vendor-library calls per call (fp_library_gemm) */
  uint64_t workspace_bytes; /* intermediates in device memory */
  int workspace_buffers;
  int n_kernel_ids; /* distinct kernels the variant launches */
  fp_kernel_id kernel_ids[FP_MAX_KERNEL_IDS];
} fp_cost;

/* ---- variants and ops ------------------------------------------------------------- */

/* A recipe is the host side of a variant (ops/recipe.h). It is written once
 * and serves three purposes: run for real, or dry (no context) to size the
 * workspace and to sum the cost model, so the kernel count, the bytes and the
 * intermediates the benchmark reports can never drift from what runs. */
typedef struct fp_recipe fp_recipe;

typedef struct fp_variant {
  const char *name; /* "fused", "unfused" */
  const char *summary;
  fp_status (*recipe)(fp_recipe *rc, const fp_problem *p);
} fp_variant;

/* Cost model of a variant on a device (dev may be NULL: a generic GPU). */
fp_status fp_variant_cost(const fp_problem *p, const fp_variant *v, const fp_device_info *dev,
                          fp_cost *cost);

/* Accuracy gate, elementwise:
 *   |out - ref| <= max(abs, atol * max|ref|) + rtol * |ref|
 * The atol term scales with the output, so the gate holds whatever the data's
 * magnitude; `abs` is a floor in the units of the op's O(1) inputs, for
 * outputs that cancel (1 + tanh(z) near z = -4 in bias_gelu) in a tensor so
 * small that max|ref| is itself tiny. NaN passes only where the reference is
 * NaN; a reference past float range must come out as that infinity. */
typedef struct fp_tolerance {
  double rtol;
  double atol;
  double abs;
} fp_tolerance;

typedef struct fp_op {
  const char *name;
  const char *family;
  const char *summary;
  int n_params;
  fp_param_decl params[FP_MAX_PARAMS];
  /* The grid shape: n_grid dimensions (0 is read as 2), dims[d] -> parameter
   * grid_param[d]. The row ops have M x N; a GEMM M x N x K. */
  int n_grid;
  int grid_param[FP_MAX_GRID_DIMS];
  /* A shape may omit trailing grid dims down to n_grid_min (0: none may be
   * omitted); the omitted ones keep their parameter's value (a convolution's
   * NxCxHxWxK takes R and stride from --param). */
  int n_grid_min;
  /* Where set, a shape of exactly n_grid_min dims maps to these parameters
   * instead of grid_param's leading ones (attention: BxHxSxD beside
   * BxHxSxSKxD, the key length left to --param). */
  bool grid_short;
  int grid_param_short[FP_MAX_GRID_DIMS];
  /* Shapes (n_grid dims each, flattened) for `--shapes seed`, for the
   * benchmark's quick default and for `check`'s default; NULL: the row ops'
   * lists (the seed's 10 x 10 grid, ...). */
  const int64_t *seed_shapes;
  int n_seed_shapes;
  const int64_t *default_shapes;
  int n_default_shapes;
  const int64_t *check_shapes;
  int n_check_shapes;
  /* The element type of the cell's arithmetic (for the roofline's peak):
   * NULL is float32. */
  fp_dtype (*compute_dtype)(const fp_problem *p);
  /* Op-specific validation beyond ranges (may be NULL). */
  fp_status (*validate)(const fp_problem *p);
  void (*describe)(const fp_problem *p, fp_io_desc *io);
  /* Output rows: the leading dimension every output shares. */
  int64_t (*rows)(const fp_problem *p);
  /* float64 reference for output rows [r0, r1): out[k] holds rows r0..r1-1 of
   * output k, each row of prod(shape[1:]) elements, contiguous. */
  void (*reference)(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                    double *const *out);
  fp_tolerance tol;
  /* Optional: the absolute floor of output k when it depends on the problem
   * (replaces tol.abs), e.g. a row sum of N symmetric values, whose float
   * rounding grows as sqrt(N) times the input scale however much the sum
   * itself cancels. */
  double (*tol_abs)(const fp_problem *p, int output);
  /* Optional: the whole gate of output k when it depends on the problem
   * (a GEMM's grows with K and with its element type's epsilon); replaces
   * tol and tol_abs. */
  fp_tolerance (*tolerance)(const fp_problem *p, int output);
  /* Optional: a per-row absolute floor of output k, for outputs whose float32
   * rounding depends on the row's data, not only on the problem (layernorm:
   * the float mean's rounding, amplified by the row's rstd). Writes floor[i]
   * for row r0 + i of [r0, r1); ref[j] holds the reference of every output j
   * over those rows (rows as in `reference`). A row's bound uses the larger of
   * this and the problem's floor. */
  void (*row_tol_abs)(const fp_problem *p, int output, const fp_host_tensor *in, int64_t r0,
                      int64_t r1, const double *const *ref, double *floor);
  int n_variants;
  fp_variant variants[FP_MAX_VARIANTS];
} fp_op;

/* The op's grid rank (n_grid, 2 when unset). */
int fp_op_grid_rank(const fp_op *op);
/* The index of the op's parameter `name` (exact, else case-insensitive where
 * that is unique), or -1. */
int fp_op_param_index(const fp_op *op, const char *name);
/* The parameter that dim g of an n-dim shape sets (grid_param, or
 * grid_param_short for a short shape). */
int fp_op_grid_param(const fp_op *op, int n, int g);
/* Whether the op takes shapes of n dims (n_grid_min..n_grid). */
bool fp_op_takes_rank(const fp_op *op, int n);

int fp_op_count(void);
const fp_op *fp_op_at(int index);
/* NULL when unknown; fp_op_lookup reports the known names instead. */
const fp_op *fp_op_find(const char *name);
fp_status fp_op_lookup(const char *name, const fp_op **out);
const fp_variant *fp_op_variant(const fp_op *op, const char *name);
fp_status fp_op_variant_lookup(const fp_op *op, const char *name, const fp_variant **out);

/* ---- running: plans ---------------------------------------------------------------- */

/* A plan binds (context, problem, variant) and owns the workspace. Creating
 * it validates the problem and allocates the intermediates, so that what
 * execute() times is the kernels alone. */
typedef struct fp_plan fp_plan;

fp_status fp_plan_create(fp_context *ctx, const fp_problem *p, const fp_variant *variant,
                         fp_plan **out);
/* Checks that in/out are live buffers of the context and large enough. */
fp_status fp_plan_execute(fp_plan *plan, fp_buffer *const *in, fp_buffer *const *out);
void fp_plan_destroy(fp_plan *plan);
/* The plan's cost model (workspace sized for its context's device). */
const fp_cost *fp_plan_cost(const fp_plan *plan);

/* ---- inputs, outputs and the reference check ------------------------------------------ */

/* Allocates every input and output of io (all or nothing). */
fp_status fp_io_alloc(fp_context *ctx, const fp_io_desc *io, fp_buffer **in, fp_buffer **out);
void fp_io_free(const fp_io_desc *io, fp_buffer **in, fp_buffer **out);
/* Fills input k on the device from (seed, stream k): never zeros. */
fp_status fp_io_fill_inputs(fp_context *ctx, const fp_io_desc *io, uint64_t seed,
                            fp_buffer *const *in);
/* Fills every output with a NaN pattern so an unwritten element shows. */
fp_status fp_io_poison_outputs(fp_context *ctx, const fp_io_desc *io, fp_buffer *const *out);

typedef struct fp_accuracy {
  double max_abs_err;
  double max_rel_err; /* |out-ref| / (|ref| + tiny) */
  double rel_l2_err;  /* ||out-ref|| / ||ref|| */
  int64_t checked;    /* elements compared */
  int64_t bad;        /* elements outside the tolerance */
  bool ok;
  char first_bad[256]; /* where and what, for the first failure */
} fp_accuracy;

/* Row ranges to check; rows beyond the op's count are clipped. */
typedef struct fp_row_sample {
  int n;
  int64_t r0[4], r1[4];
} fp_row_sample;

/* All rows when checking them touches at most max_elems elements (outputs
 * written plus inputs read; 0: always all), else a sample of first, middle
 * and last rows within that budget. */
fp_row_sample fp_row_sample_for(const fp_problem *p, const fp_io_desc *io, int64_t max_elems);

/* Compares outputs on the device against the float64 reference computed from
 * `in` (one host view per input). */
fp_status fp_check_outputs(fp_context *ctx, const fp_problem *p, const fp_io_desc *io,
                           const fp_host_tensor *in, fp_buffer *const *out,
                           const fp_row_sample *rows, fp_accuracy *acc);

/* Host views of inputs filled by fp_io_fill_inputs(seed). */
void fp_host_inputs_generated(const fp_io_desc *io, uint64_t seed, fp_host_tensor *views);

#ifdef __cplusplus
}
#endif

#endif
