/* fuseport operators: problems, tensor descriptors, recipes and plans. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fp_device_common.h"
#include "recipe.h"

/* ---- dtypes ------------------------------------------------------------------ */

size_t fp_dtype_size(fp_dtype dtype) {
  switch (dtype) {
  case FP_F32:
  case FP_I32:
  case FP_U32:
    return 4;
  case FP_F16:
  case FP_BF16:
    return 2;
  case FP_U8:
    return 1;
  case FP_DTYPE_COUNT:
    break;
  }
  return 0;
}

static const char *const dtype_names[FP_DTYPE_COUNT] = {"f32", "f16", "bf16", "i32", "u32", "u8"};

const char *fp_dtype_name(fp_dtype dtype) {
  return (unsigned)dtype < FP_DTYPE_COUNT ? dtype_names[dtype] : "unknown";
}

fp_status fp_dtype_parse(const char *name, fp_dtype *out) {
  if (name == NULL || out == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_dtype_parse: NULL argument");
  for (int k = 0; k < FP_DTYPE_COUNT; ++k)
    if (strcmp(name, dtype_names[k]) == 0) {
      *out = (fp_dtype)k;
      return FP_OK;
    }
  return fp_error(FP_ERR_NOT_FOUND, "unknown dtype '%s' (known: f32, f16, bf16, i32, u32, u8)",
                  name);
}

/* ---- problems ---------------------------------------------------------------- */

void fp_problem_init(fp_problem *p, const fp_op *op) {
  if (p == NULL)
    return;
  memset(p, 0, sizeof *p);
  p->op = op;
  if (op == NULL)
    return;
  for (int k = 0; k < op->n_params; ++k)
    p->v[k] = op->params[k].def;
}

/* By exact name, else case-insensitively where that names one parameter
 * (`--param r=3` for a convolution's R). */
int fp_op_param_index(const fp_op *op, const char *name) {
  int folded = -1, matches = 0;
  for (int k = 0; k < op->n_params; ++k) {
    if (strcmp(op->params[k].name, name) == 0)
      return k;
    if (strcasecmp(op->params[k].name, name) == 0) {
      folded = k;
      matches++;
    }
  }
  return matches == 1 ? folded : -1;
}

static void list_params(const fp_op *op, char *buf, size_t len) {
  buf[0] = '\0';
  for (int k = 0; k < op->n_params; ++k) {
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s", k ? ", " : "", op->params[k].name);
  }
}

static fp_status check_range(const fp_op *op, const fp_param_decl *d, double value) {
  if (!(value >= d->min && value <= d->max)) /* also rejects NaN */
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "op %s: parameter %s=%.17g is out of range [%.17g, %.17g]", op->name, d->name,
                    value, d->min, d->max);
  if (d->type != FP_PARAM_FLOAT && value != floor(value))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "op %s: parameter %s=%.17g must be an integer",
                    op->name, d->name, value);
  return FP_OK;
}

fp_status fp_problem_set(fp_problem *p, const char *name, const char *value) {
  if (p == NULL || p->op == NULL || name == NULL || value == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_problem_set: NULL argument");
  const fp_op *op = p->op;
  int k = fp_op_param_index(op, name);
  if (k < 0) {
    char names[512];
    list_params(op, names, sizeof names);
    return fp_error(FP_ERR_NOT_FOUND, "op %s has no parameter '%s' (its parameters: %s)", op->name,
                    name, names);
  }
  const fp_param_decl *d = &op->params[k];
  double parsed = 0.0;
  char *end = NULL;
  errno = 0;
  switch (d->type) {
  case FP_PARAM_DIM:
  case FP_PARAM_INT: {
    long long v = strtoll(value, &end, 10);
    if (end == value || *end != '\0' || errno != 0)
      return fp_error(FP_ERR_INVALID_ARGUMENT, "op %s: parameter %s='%s' is not an integer",
                      op->name, name, value);
    parsed = (double)v;
    break;
  }
  case FP_PARAM_FLOAT:
    parsed = strtod(value, &end);
    if (end == value || *end != '\0' || errno != 0)
      return fp_error(FP_ERR_INVALID_ARGUMENT, "op %s: parameter %s='%s' is not a number", op->name,
                      name, value);
    break;
  case FP_PARAM_BOOL:
    if (strcmp(value, "1") == 0 || strcasecmp(value, "true") == 0 ||
        strcasecmp(value, "yes") == 0 || strcasecmp(value, "on") == 0)
      parsed = 1.0;
    else if (strcmp(value, "0") == 0 || strcasecmp(value, "false") == 0 ||
             strcasecmp(value, "no") == 0 || strcasecmp(value, "off") == 0)
      parsed = 0.0;
    else
      return fp_error(FP_ERR_INVALID_ARGUMENT,
                      "op %s: parameter %s='%s' is not a boolean (true/false, 1/0)", op->name, name,
                      value);
    break;
  case FP_PARAM_CHOICE: {
    int found = -1;
    char names[256] = "";
    for (int c = 0; d->choices[c] != NULL; ++c) {
      size_t used = strlen(names);
      snprintf(names + used, sizeof names - used, "%s%s", c ? ", " : "", d->choices[c]);
      if (strcmp(d->choices[c], value) == 0)
        found = c;
    }
    if (found < 0)
      return fp_error(FP_ERR_INVALID_ARGUMENT, "op %s: parameter %s='%s' is not one of: %s",
                      op->name, name, value, names);
    parsed = found;
    break;
  }
  }
  fp_status st = check_range(op, d, parsed);
  if (st == FP_OK)
    p->v[k] = parsed;
  return st;
}

int fp_op_grid_rank(const fp_op *op) { return op == NULL ? 0 : (op->n_grid > 0 ? op->n_grid : 2); }

int fp_op_grid_param(const fp_op *op, int n, int g) {
  return op->grid_short && n == op->n_grid_min ? op->grid_param_short[g] : op->grid_param[g];
}

bool fp_op_takes_rank(const fp_op *op, int n) {
  const int rank = fp_op_grid_rank(op);
  const int lowest = op != NULL && op->n_grid_min > 0 ? op->n_grid_min : rank;
  return n >= lowest && n <= rank;
}

fp_status fp_problem_set_grid(fp_problem *p, const int64_t *dims, int n) {
  if (p == NULL || p->op == NULL || dims == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_problem_set_grid: NULL argument");
  if (!fp_op_takes_rank(p->op, n)) {
    char pattern[96] = "";
    for (int g = 0; g < fp_op_grid_rank(p->op); ++g) {
      const size_t used = strlen(pattern);
      snprintf(pattern + used, sizeof pattern - used, "%s%s", g ? "x" : "",
               p->op->params[p->op->grid_param[g]].name);
    }
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "op %s takes a shape of %d dimensions, not %d (its grid is %s%s)", p->op->name,
                    fp_op_grid_rank(p->op), n, pattern,
                    p->op->n_grid_min > 0 ? "; trailing dims may be left to --param" : "");
  }
  for (int g = 0; g < n; ++g) {
    int k = fp_op_grid_param(p->op, n, g);
    fp_status st = check_range(p->op, &p->op->params[k], (double)dims[g]);
    if (st != FP_OK)
      return st;
  }
  for (int g = 0; g < n; ++g)
    p->v[fp_op_grid_param(p->op, n, g)] = (double)dims[g];
  return FP_OK;
}

fp_status fp_problem_set_grid2(fp_problem *p, int64_t dim0, int64_t dim1) {
  const int64_t dims[2] = {dim0, dim1};
  return fp_problem_set_grid(p, dims, 2);
}

/* Elements past which a tensor's byte count (up to 16 bytes an element, with
 * room for offsets) could leave int64. */
#define FP_MAX_ELEMENTS (INT64_MAX / 64)

fp_status fp_problem_validate(const fp_problem *p) {
  if (p == NULL || p->op == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "problem or its op is NULL");
  const fp_op *op = p->op;
  double elements = 1.0;
  char dims[256] = "";
  for (int k = 0; k < op->n_params; ++k) {
    fp_status st = check_range(op, &op->params[k], p->v[k]);
    if (st != FP_OK)
      return st;
    if (op->params[k].type == FP_PARAM_DIM) {
      elements *= p->v[k];
      size_t used = strlen(dims);
      snprintf(dims + used, sizeof dims - used, "%s%s=%.0f", used ? "*" : "", op->params[k].name,
               p->v[k]);
    }
  }
  if (elements > (double)FP_MAX_ELEMENTS)
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "op %s: %s = %.4g elements: the byte count overflows 64-bit sizes", op->name,
                    dims, elements);
  return op->validate != NULL ? op->validate(p) : FP_OK;
}

int64_t fp_problem_int(const fp_problem *p, int index) { return (int64_t)p->v[index]; }

/* The shortest %g text (6 digits, as before, where they suffice) that reads
 * back as v: a cell's params text is its key in a results file, so two
 * values must never describe alike (p=0.1 and p=0.1000001). */
static void format_real(char *buf, size_t len, double v) {
  for (int digits = 6; digits <= 17; ++digits) {
    snprintf(buf, len, "%.*g", digits, v);
    if (strtod(buf, NULL) == v)
      return;
  }
}

void fp_problem_describe(const fp_problem *p, char *buf, size_t buflen) {
  if (buf == NULL || buflen == 0)
    return;
  buf[0] = '\0';
  if (p == NULL || p->op == NULL)
    return;
  for (int k = 0; k < p->op->n_params; ++k) {
    const fp_param_decl *d = &p->op->params[k];
    size_t used = strlen(buf);
    const char *sep = k ? " " : "";
    switch (d->type) {
    case FP_PARAM_DIM:
    case FP_PARAM_INT:
      snprintf(buf + used, buflen - used, "%s%s=%lld", sep, d->name, (long long)p->v[k]);
      break;
    case FP_PARAM_FLOAT: {
      char real[32];
      format_real(real, sizeof real, p->v[k]);
      snprintf(buf + used, buflen - used, "%s%s=%s", sep, d->name, real);
      break;
    }
    case FP_PARAM_BOOL:
      snprintf(buf + used, buflen - used, "%s%s=%s", sep, d->name, p->v[k] != 0 ? "true" : "false");
      break;
    case FP_PARAM_CHOICE:
      snprintf(buf + used, buflen - used, "%s%s=%s", sep, d->name, d->choices[(int)p->v[k]]);
      break;
    }
  }
}

/* ---- tensors ---------------------------------------------------------------------- */

static void tensor_init(fp_tensor_desc *t, const char *name, int rank) {
  memset(t, 0, sizeof *t);
  t->name = name;
  t->dtype = FP_F32;
  t->rank = rank;
  t->fill_scale = 1.0f;
}

/* A contiguous tensor of `rank` dims; storage_elems -1 (refused by
 * fp_io_alloc) when a dim is negative or their product leaves int64. */
static void tensor_contiguous(fp_tensor_desc *t, const char *name, int rank, const int64_t *dims) {
  tensor_init(t, name, rank);
  int64_t stride = 1;
  bool valid = true;
  for (int d = rank - 1; d >= 0; --d) {
    t->shape[d] = dims[d];
    t->strides[d] = stride;
    valid = valid && dims[d] >= 0 && !__builtin_mul_overflow(stride, dims[d], &stride);
  }
  t->storage_elems = valid ? stride : -1;
}

void fp_tensor_1d(fp_tensor_desc *t, const char *name, int64_t n) {
  tensor_contiguous(t, name, 1, &n);
}

void fp_tensor_2d(fp_tensor_desc *t, const char *name, int64_t rows, int64_t cols) {
  const int64_t dims[2] = {rows, cols};
  tensor_contiguous(t, name, 2, dims);
}

void fp_tensor_4d(fp_tensor_desc *t, const char *name, int64_t d0, int64_t d1, int64_t d2,
                  int64_t d3) {
  const int64_t dims[4] = {d0, d1, d2, d3};
  tensor_contiguous(t, name, 4, dims);
}

void fp_tensor_2d_transposed(fp_tensor_desc *t, const char *name, int64_t rows, int64_t cols) {
  fp_tensor_2d(t, name, rows, cols);
  t->strides[0] = 1;
  t->strides[1] = rows;
}

uint64_t fp_tensor_bytes(const fp_tensor_desc *t) {
  const uint64_t size = fp_dtype_size(t->dtype);
  if (t->storage_elems < 0 || (size > 0 && (uint64_t)t->storage_elems > UINT64_MAX / size))
    return UINT64_MAX; /* fp_io_alloc refuses it by name */
  return (uint64_t)t->storage_elems * size;
}

bool fp_tensor_row_contiguous(const fp_tensor_desc *t) {
  int64_t expect = 1;
  for (int d = t->rank - 1; d >= 0; --d) {
    if (t->shape[d] != 1 && t->strides[d] != expect)
      return false;
    expect *= t->shape[d];
  }
  return true;
}

/* A stored element of t's type as a double (exact for every type). */
static double stored_value(fp_dtype dtype, const void *data, int64_t index) {
  switch (dtype) {
  case FP_F32:
    return ((const float *)data)[index];
  case FP_F16:
    return fp_f16_bits_to_f32(((const uint16_t *)data)[index]);
  case FP_BF16:
    return fp_bf16_bits_to_f32(((const uint16_t *)data)[index]);
  case FP_I32:
    return ((const int32_t *)data)[index];
  case FP_U32:
    return ((const uint32_t *)data)[index];
  case FP_U8:
    return ((const uint8_t *)data)[index];
  case FP_DTYPE_COUNT:
    break;
  }
  return NAN;
}

/* What fp_io_fill_inputs wrote at storage index `index` (the fill kernels
 * of kernels.def, evaluated on the host). */
static double generated_value(const fp_host_tensor *t, int64_t index) {
  const fp_tensor_desc *d = t->desc;
  switch (d->dtype) {
  case FP_F16:
    return fp_f16_bits_to_f32(
        fp_uniform_f16_bits(t->seed, t->stream, (uint64_t)index, d->fill_scale, d->fill_positive));
  case FP_BF16:
    return fp_bf16_bits_to_f32(
        fp_uniform_bf16_bits(t->seed, t->stream, (uint64_t)index, d->fill_scale, d->fill_positive));
  case FP_U32:
  case FP_I32:
    return (double)fp_philox_word(t->seed, (uint64_t)index, t->stream, FP_PHILOX_DOMAIN_FILL);
  case FP_U8:
    return (double)(fp_philox_word(t->seed, (uint64_t)index, t->stream, FP_PHILOX_DOMAIN_FILL) &
                    0xFFu);
  case FP_F32:
  case FP_DTYPE_COUNT:
    break;
  }
  return fp_uniform_f32(t->seed, t->stream, (uint64_t)index, d->fill_scale, d->fill_positive);
}

double fp_host_load(const fp_host_tensor *t, int64_t index) {
  return t->data != NULL ? stored_value(t->desc->dtype, t->data, index) : generated_value(t, index);
}

double fp_host_at1(const fp_host_tensor *t, int64_t i) {
  return fp_host_load(t, i * t->desc->strides[0]);
}

double fp_host_at2(const fp_host_tensor *t, int64_t i, int64_t j) {
  return fp_host_load(t, i * t->desc->strides[0] + j * t->desc->strides[1]);
}

float *fp_host_storage_f32(const fp_host_tensor *t) {
  const int64_t n = t->desc->storage_elems;
  if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(float))
    return NULL;
  float *out = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  if (out == NULL)
    return NULL;
  for (int64_t i = 0; i < n; ++i)
    out[i] = (float)fp_host_load(t, i);
  return out;
}

void fp_host_inputs_generated(const fp_io_desc *io, uint64_t seed, fp_host_tensor *views) {
  for (int k = 0; k < io->n_in; ++k) {
    views[k].desc = &io->in[k];
    views[k].data = NULL;
    views[k].seed = seed;
    views[k].stream = (uint32_t)k;
  }
}

/* ---- recipes ---------------------------------------------------------------------- */

/* What a dry run assumes when no device is given: an H100-like GPU. */
static const fp_device_info generic_device = {
    .name = "generic GPU",
    .global_mem_bytes = 80ull << 30,
    .l2_cache_bytes = 50ull << 20,
    .local_mem_bytes = 48 * 1024,
    .local_mem_optin_bytes = 227 * 1024,
    .max_group_size = 1024,
    .subgroup_width = 32,
    .compute_units = 132,
    .cc_major = 9,
    .backend = FP_BACKEND_CUDA,
    .gemm_library = "cuBLAS/cuBLASLt (assumed: no device given)",
    .gemm_library_dtypes = (1u << FP_F32) | (1u << FP_F16) | (1u << FP_BF16),
    .gemm_library_epilogues = true,
};

fp_buffer *fp_rc_in(fp_recipe *rc, int k) { return rc->ctx != NULL ? rc->in[k] : NULL; }
fp_buffer *fp_rc_out(fp_recipe *rc, int k) { return rc->ctx != NULL ? rc->out[k] : NULL; }

static fp_status rc_fail(fp_recipe *rc, fp_status st) {
  if (rc->status == FP_OK)
    rc->status = st;
  return st;
}

fp_buffer *fp_rc_ws_zeroed(fp_recipe *rc, int k, uint64_t bytes) {
  fp_buffer *b = fp_rc_ws(rc, k, bytes);
  if (rc->ctx == NULL && k >= 0 && k < rc->n_ws)
    rc->ws_zeroed[k] = true;
  return b;
}

fp_buffer *fp_rc_ws(fp_recipe *rc, int k, uint64_t bytes) {
  if (k < 0 || k > rc->n_ws || k >= FP_MAX_WORKSPACE || bytes == 0) {
    rc_fail(rc,
            fp_error(FP_ERR_INTERNAL, "recipe asked for workspace %d of %llu bytes out of order", k,
                     (unsigned long long)bytes));
    return NULL;
  }
  if (rc->ctx == NULL) { /* dry run: size it */
    if (k == rc->n_ws) {
      rc->ws_bytes[rc->n_ws++] = bytes;
    } else if (bytes > rc->ws_bytes[k]) {
      rc->ws_bytes[k] = bytes;
    }
    return NULL;
  }
  if (k >= rc->n_ws || bytes > rc->ws_bytes[k]) {
    rc_fail(rc,
            fp_error(FP_ERR_INTERNAL, "recipe workspace %d differs between dry and real run", k));
    return NULL;
  }
  return rc->ws[k];
}

fp_status fp_rc_launch(fp_recipe *rc, fp_kernel_id id, const fp_ndrange *nd, const fp_arg *args,
                       int nargs, fp_kernel_cost cost) {
  if (rc->status != FP_OK)
    return rc->status;
  rc->cost.bytes_read += cost.bytes_read;
  rc->cost.bytes_written += cost.bytes_written;
  rc->cost.flops += cost.flops;
  rc->cost.kernels += 1;
  bool seen = false;
  for (int k = 0; k < rc->cost.n_kernel_ids; ++k)
    seen = seen || rc->cost.kernel_ids[k] == id;
  if (!seen && rc->cost.n_kernel_ids < FP_MAX_KERNEL_IDS)
    rc->cost.kernel_ids[rc->cost.n_kernel_ids++] = id;
  if (rc->ctx == NULL)
    return FP_OK;
  fp_status st = fp_launch(rc->ctx, id, nd, args, nargs);
  return st == FP_OK ? FP_OK : rc_fail(rc, st);
}

/* A library call's share of the cost model (both runs). */
static void add_library_call(fp_recipe *rc, fp_kernel_cost cost) {
  rc->cost.bytes_read += cost.bytes_read;
  rc->cost.bytes_written += cost.bytes_written;
  rc->cost.flops += cost.flops;
  rc->cost.library_calls += 1;
}

fp_status fp_rc_library_gemm(fp_recipe *rc, const fp_lib_gemm *g, fp_buffer *a, fp_buffer *b,
                             fp_buffer *c, fp_buffer *d, fp_buffer *bias, fp_buffer *workspace,
                             fp_kernel_cost cost) {
  if (rc->status != FP_OK)
    return rc->status;
  fp_status st = fp_library_gemm_check(rc->dev, g);
  if (st != FP_OK)
    return rc_fail(rc, st);
  add_library_call(rc, cost);
  if (rc->ctx == NULL)
    return FP_OK;
  st = fp_library_gemm(rc->ctx, g, a, b, c, d, bias, workspace);
  return st == FP_OK ? FP_OK : rc_fail(rc, st);
}

fp_status fp_rc_library_conv(fp_recipe *rc, const fp_lib_conv *c, fp_buffer *x, fp_buffer *w,
                             fp_buffer *bias, fp_buffer *z, fp_buffer *out, fp_buffer *workspace,
                             fp_kernel_cost cost) {
  if (rc->status != FP_OK)
    return rc->status;
  fp_status st = fp_library_conv_check(rc->dev, c);
  if (st != FP_OK)
    return rc_fail(rc, st);
  add_library_call(rc, cost);
  if (rc->ctx == NULL)
    return FP_OK;
  st = fp_library_conv(rc->ctx, c, x, w, bias, z, out, workspace);
  return st == FP_OK ? FP_OK : rc_fail(rc, st);
}

static void recipe_init(fp_recipe *rc, fp_context *ctx, const fp_device_info *dev) {
  memset(rc, 0, sizeof *rc);
  rc->ctx = ctx;
  rc->dev = dev != NULL ? dev : &generic_device;
}

static fp_status dry_run(const fp_problem *p, const fp_variant *v, const fp_device_info *dev,
                         fp_recipe *rc) {
  recipe_init(rc, NULL, dev);
  fp_status st = v->recipe(rc, p);
  if (st == FP_OK)
    st = rc->status;
  for (int k = 0; k < rc->n_ws; ++k)
    rc->cost.workspace_bytes += rc->ws_bytes[k];
  rc->cost.workspace_buffers = rc->n_ws;
  return st;
}

static bool variant_of(const fp_op *op, const fp_variant *v) {
  for (int k = 0; k < op->n_variants; ++k)
    if (&op->variants[k] == v)
      return true;
  return false;
}

fp_status fp_variant_cost(const fp_problem *p, const fp_variant *v, const fp_device_info *dev,
                          fp_cost *cost) {
  if (p == NULL || v == NULL || cost == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_variant_cost: NULL argument");
  fp_status st = fp_problem_validate(p);
  if (st != FP_OK)
    return st;
  if (!variant_of(p->op, v))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "variant '%s' is not a variant of op %s", v->name,
                    p->op->name);
  fp_recipe rc;
  st = dry_run(p, v, dev, &rc);
  *cost = rc.cost;
  return st;
}

/* ---- plans -------------------------------------------------------------------------- */

struct fp_plan {
  fp_context *ctx;
  fp_problem problem;
  const fp_variant *variant;
  fp_io_desc io;
  fp_recipe dry; /* sizes and cost; ws[] holds the allocated workspace */
};

fp_status fp_plan_create(fp_context *ctx, const fp_problem *p, const fp_variant *variant,
                         fp_plan **out) {
  if (out == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_plan_create: out is NULL");
  *out = NULL;
  if (ctx == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_plan_create: context is NULL");
  if (variant == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_plan_create: variant is NULL");
  fp_status st = fp_problem_validate(p);
  if (st != FP_OK)
    return st;
  if (!variant_of(p->op, variant))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "variant '%s' is not a variant of op %s",
                    variant->name, p->op->name);
  fp_plan *plan = calloc(1, sizeof *plan);
  if (plan == NULL)
    return fp_error(FP_ERR_OUT_OF_MEMORY, "fp_plan_create: host allocation failed");
  plan->ctx = ctx;
  plan->problem = *p;
  plan->variant = variant;
  p->op->describe(p, &plan->io);
  st = dry_run(p, variant, fp_context_device(ctx), &plan->dry);
  for (int k = 0; st == FP_OK && k < plan->dry.n_ws; ++k) {
    st = fp_buffer_alloc(ctx, plan->dry.ws_bytes[k], &plan->dry.ws[k]);
    if (st == FP_OK && plan->dry.ws_zeroed[k]) {
      const uint32_t zero = 0;
      const uint64_t bytes = plan->dry.ws_bytes[k];
      if (bytes >= 4) /* a workspace of 1-3 bytes (a [1] bf16 bias) has no whole word */
        st = fp_buffer_fill(ctx, plan->dry.ws[k], 0, bytes / 4 * 4, &zero, 4);
      if (st == FP_OK && bytes % 4 != 0)
        st = fp_buffer_fill(ctx, plan->dry.ws[k], bytes / 4 * 4, bytes % 4, &zero, 1);
    }
  }
  if (st != FP_OK) {
    fp_plan_destroy(plan);
    return st;
  }
  *out = plan;
  return FP_OK;
}

static fp_status check_io_buffer(const fp_plan *plan, fp_buffer *buf, const fp_tensor_desc *t,
                                 const char *role, int k) {
  const char *op = plan->problem.op->name;
  if (buf == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "op %s: %s %d (%s) buffer is NULL", op, role, k,
                    t->name);
  if (fp_buffer_context(buf) != plan->ctx)
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "op %s: %s %d (%s) is not a live buffer of the plan's context", op, role, k,
                    t->name);
  if (fp_buffer_size(buf) < fp_tensor_bytes(t))
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "op %s: %s %d (%s) holds %llu bytes, the shape needs %llu", op, role, k,
                    t->name, (unsigned long long)fp_buffer_size(buf),
                    (unsigned long long)fp_tensor_bytes(t));
  return FP_OK;
}

fp_status fp_plan_execute(fp_plan *plan, fp_buffer *const *in, fp_buffer *const *out) {
  if (plan == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_plan_execute: plan is NULL");
  if (in == NULL || out == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_plan_execute: buffer list is NULL");
  const fp_io_desc *io = &plan->io;
  for (int k = 0; k < io->n_in; ++k) {
    fp_status st = check_io_buffer(plan, in[k], &io->in[k], "input", k);
    if (st != FP_OK)
      return st;
  }
  for (int k = 0; k < io->n_out; ++k) {
    fp_status st = check_io_buffer(plan, out[k], &io->out[k], "output", k);
    if (st != FP_OK)
      return st;
    for (int j = 0; j < io->n_in; ++j)
      if (out[k] == in[j])
        return fp_error(FP_ERR_INVALID_ARGUMENT,
                        "op %s: output %d (%s) is the same buffer as input %d (%s); in-place "
                        "operation is not supported",
                        plan->problem.op->name, k, io->out[k].name, j, io->in[j].name);
  }
  fp_recipe rc = plan->dry;
  rc.ctx = plan->ctx;
  rc.in = in;
  rc.out = out;
  rc.status = FP_OK;
  memset(&rc.cost, 0, sizeof rc.cost);
  fp_status st = plan->variant->recipe(&rc, &plan->problem);
  return st != FP_OK ? st : rc.status;
}

void fp_plan_destroy(fp_plan *plan) {
  if (plan == NULL)
    return;
  for (int k = 0; k < FP_MAX_WORKSPACE; ++k)
    fp_buffer_free(plan->dry.ws[k]);
  free(plan);
}

const fp_cost *fp_plan_cost(const fp_plan *plan) { return plan != NULL ? &plan->dry.cost : NULL; }
