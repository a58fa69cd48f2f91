/* fuseport: inputs, outputs and the float64 reference check. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp_device_common.h"
#include "recipe.h"

/* A quiet NaN with a payload no arithmetic produces: an output element that
 * still holds it after a run was never written. Half and bfloat16 outputs
 * get NaNs of their own with an unusual payload; integer outputs a word no
 * test expects often (the check compares integers exactly anyway). */
#define FP_POISON_BITS 0x7FC0DEADu
#define FP_POISON_F16 0x7E5Du
#define FP_POISON_BF16 0x7FDEu
#define FP_POISON_WORD 0xDEADBEEFu

/* The poison pattern of a type, as a 4-byte fill pattern. */
static uint32_t poison_pattern(fp_dtype dtype) {
  switch (dtype) {
  case FP_F16:
    return FP_POISON_F16 | (FP_POISON_F16 << 16);
  case FP_BF16:
    return FP_POISON_BF16 | (FP_POISON_BF16 << 16);
  case FP_U32:
  case FP_I32:
  case FP_U8:
    return FP_POISON_WORD;
  default:
    return FP_POISON_BITS;
  }
}

fp_status fp_io_alloc(fp_context *ctx, const fp_io_desc *io, fp_buffer **in, fp_buffer **out) {
  if (ctx == NULL || io == NULL || in == NULL || out == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_io_alloc: NULL argument");
  for (int k = 0; k < io->n_in; ++k)
    in[k] = NULL;
  for (int k = 0; k < io->n_out; ++k)
    out[k] = NULL;
  for (int k = 0; k < io->n_in + io->n_out; ++k) {
    const fp_tensor_desc *t = k < io->n_in ? &io->in[k] : &io->out[k - io->n_in];
    if (fp_tensor_bytes(t) == UINT64_MAX)
      return fp_error(FP_ERR_INVALID_ARGUMENT,
                      "fp_io_alloc: tensor '%s' has a negative dim or more bytes than 64-bit "
                      "sizes hold",
                      t->name != NULL ? t->name : "?");
  }
  fp_status st = FP_OK;
  for (int k = 0; st == FP_OK && k < io->n_in; ++k)
    st = fp_buffer_alloc(ctx, fp_tensor_bytes(&io->in[k]), &in[k]);
  for (int k = 0; st == FP_OK && k < io->n_out; ++k)
    st = fp_buffer_alloc(ctx, fp_tensor_bytes(&io->out[k]), &out[k]);
  if (st != FP_OK)
    fp_io_free(io, in, out);
  return st;
}

void fp_io_free(const fp_io_desc *io, fp_buffer **in, fp_buffer **out) {
  if (io == NULL)
    return;
  for (int k = 0; in != NULL && k < io->n_in; ++k) {
    fp_buffer_free(in[k]);
    in[k] = NULL;
  }
  for (int k = 0; out != NULL && k < io->n_out; ++k) {
    fp_buffer_free(out[k]);
    out[k] = NULL;
  }
}

fp_status fp_io_fill_inputs(fp_context *ctx, const fp_io_desc *io, uint64_t seed,
                            fp_buffer *const *in) {
  if (ctx == NULL || io == NULL || in == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_io_fill_inputs: NULL argument");
  fp_recipe rc;
  memset(&rc, 0, sizeof rc);
  rc.dev = fp_context_device(ctx);
  for (int k = 0; k < io->n_in; ++k) {
    const fp_tensor_desc *t = &io->in[k];
    fp_kernel_id id;
    int nargs = 6;
    switch (t->dtype) {
    case FP_F32:
      id = FPK_fill_uniform_f32;
      break;
    case FP_F16:
      id = FPK_fill_uniform_f16;
      break;
    case FP_BF16:
      id = FPK_fill_uniform_bf16;
      break;
    case FP_U32:
      id = FPK_fill_bits_u32;
      nargs = 4;
      break;
    case FP_U8:
      id = FPK_fill_bits_u8;
      nargs = 4;
      break;
    default:
      return fp_error(FP_ERR_UNSUPPORTED, "fp_io_fill_inputs: input %s is %s, which has no fill",
                      t->name, fp_dtype_name(t->dtype));
    }
    fp_arg args[] = {fp_arg_tensor(in[k], t->dtype), fp_arg_i64(t->storage_elems),
                     fp_arg_i64((int64_t)seed),      fp_arg_i32(k),
                     fp_arg_f32(t->fill_scale),      fp_arg_i32(t->fill_positive ? 1 : 0)};
    fp_ndrange nd = fp_elem_range(&rc, t->storage_elems);
    fp_status st = fp_launch(ctx, id, &nd, args, nargs);
    if (st != FP_OK)
      return st;
  }
  return FP_OK;
}

fp_status fp_io_poison_outputs(fp_context *ctx, const fp_io_desc *io, fp_buffer *const *out) {
  if (ctx == NULL || io == NULL || out == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_io_poison_outputs: NULL argument");
  for (int k = 0; k < io->n_out; ++k) {
    const uint32_t poison = poison_pattern(io->out[k].dtype);
    const uint64_t bytes = fp_tensor_bytes(&io->out[k]);
    fp_status st = FP_OK;
    if (bytes >= 4)
      st = fp_buffer_fill(ctx, out[k], 0, bytes / 4 * 4, &poison, 4);
    if (st == FP_OK && bytes % 4 >= 2) /* an odd number of 16-bit elements */
      st = fp_buffer_fill(ctx, out[k], bytes / 4 * 4, 2, &poison, 2);
    if (st == FP_OK && bytes % 2 != 0)
      st = fp_buffer_fill(ctx, out[k], bytes - 1, 1, &poison, 1);
    if (st != FP_OK)
      return st;
  }
  return FP_OK;
}

/* ---- row samples ------------------------------------------------------------------- */

static int64_t row_elems(const fp_tensor_desc *t) {
  int64_t n = 1;
  for (int d = 1; d < t->rank; ++d)
    n *= t->shape[d];
  return n;
}

fp_row_sample fp_row_sample_for(const fp_problem *p, const fp_io_desc *io, int64_t max_elems) {
  fp_row_sample s;
  memset(&s, 0, sizeof s);
  int64_t rows = p->op->rows(p);
  /* What checking one row costs: the elements it writes plus those its
   * reference reads, so a row reduction ([M, N] in, [M] out) is sampled by
   * the N elements each of its rows reads, not by its one output. */
  double per_row = 0;
  for (int k = 0; k < io->n_out; ++k)
    per_row += (double)row_elems(&io->out[k]);
  for (int k = 0; k < io->n_in; ++k)
    per_row += (double)io->in[k].storage_elems / (double)(rows > 0 ? rows : 1);
  s.n = 1;
  s.r0[0] = 0;
  s.r1[0] = rows;
  if (max_elems <= 0 || rows <= 3 || (double)rows * per_row <= (double)max_elems)
    return s;
  int64_t k = (int64_t)((double)max_elems / (3.0 * per_row));
  if (k < 1)
    k = 1;
  if (3 * k >= rows)
    return s;
  s.n = 3;
  s.r0[0] = 0;
  s.r1[0] = k;
  s.r0[1] = rows / 2 - k / 2;
  s.r1[1] = s.r0[1] + k;
  s.r0[2] = rows - k;
  s.r1[2] = rows;
  return s;
}

/* ---- the check ----------------------------------------------------------------------- */

/* Storage offset of element c of row r of tensor t (c runs over shape[1:]). */
static int64_t storage_offset(const fp_tensor_desc *t, int64_t r, int64_t c) {
  int64_t off = r * t->strides[0];
  for (int d = t->rank - 1; d >= 1; --d) {
    off += (c % t->shape[d]) * t->strides[d];
    c /= t->shape[d];
  }
  return off;
}

typedef struct err_acc {
  double max_abs, max_rel, sum_sq_err, sum_sq_ref;
} err_acc;

/* An output element as read back: its value (exact) and whether it still
 * holds the poison. */
typedef struct got_elem {
  double v;
  bool poisoned;
} got_elem;

static void note_bad(fp_accuracy *acc, const fp_tensor_desc *t, int64_t r, int64_t c, got_elem g,
                     double ref, double bound) {
  acc->bad++;
  if (acc->first_bad[0] != '\0')
    return;
  double got = g.v;
  if (g.poisoned)
    snprintf(acc->first_bad, sizeof acc->first_bad,
             "output %s row %lld element %lld: never written (still poisoned), expected %.9g",
             t->name, (long long)r, (long long)c, ref);
  else
    snprintf(acc->first_bad, sizeof acc->first_bad,
             "output %s row %lld element %lld: got %.9g, expected %.9g (|err| %.3g > bound %.3g)",
             t->name, (long long)r, (long long)c, got, ref, fabs(got - ref), bound);
}

/* The largest finite value of an output type: a reference beyond it must
 * come out as the infinity of its sign. */
static double type_max(fp_dtype dtype) {
  switch (dtype) {
  case FP_F16:
    return 65504.0;
  case FP_BF16:
    return 3.3895313892515355e38;
  default:
    return FLT_MAX;
  }
}

static bool is_integer_type(fp_dtype dtype) {
  return dtype == FP_U32 || dtype == FP_I32 || dtype == FP_U8;
}

/* Compares one output's rows [r0, r1) (got: float per logical element, in
 * row order) against ref. */
static void compare_rows(const fp_tensor_desc *t, fp_tolerance tol, const double *row_floor,
                         int64_t r0, int64_t r1, const got_elem *got, const double *ref,
                         fp_accuracy *acc, err_acc *e) {
  int64_t per_row = row_elems(t);
  int64_t n = (r1 - r0) * per_row;
  const double tmax = type_max(t->dtype);
  if (is_integer_type(t->dtype)) { /* packed words and bytes: exact */
    for (int64_t i = 0; i < n; ++i) {
      acc->checked++;
      if (got[i].v != ref[i])
        note_bad(acc, t, r0 + i / per_row, i % per_row, got[i], ref[i], 0.0);
    }
    return;
  }
  double maxref = 0.0;
  for (int64_t i = 0; i < n; ++i)
    if (isfinite(ref[i]) && fabs(ref[i]) > maxref && fabs(ref[i]) <= tmax)
      maxref = fabs(ref[i]);
  double abs_floor = fmax(tol.abs, tol.atol * maxref);
  /* Relative error is reported only where the reference is not negligible
   * against the output's scale: near-zero references make it meaningless. */
  double rel_floor = 1e-6 * maxref;
  for (int64_t i = 0; i < n; ++i) {
    double r = ref[i];
    double g = got[i].v;
    int64_t row = r0 + i / per_row, col = i % per_row;
    acc->checked++;
    if (isnan(r)) {
      if (!isnan(g))
        note_bad(acc, t, row, col, got[i], r, 0.0);
      continue;
    }
    if (isnan(g)) {
      note_bad(acc, t, row, col, got[i], r, 0.0);
      continue;
    }
    if (isinf(r) || fabs(r) > tmax) {
      /* beyond the type's range: the result must be the infinity of that sign */
      if (!(isinf(g) && (g > 0) == (r > 0)))
        note_bad(acc, t, row, col, got[i], r, 0.0);
      continue;
    }
    double err = fabs(g - r);
    double floor_here = row_floor != NULL ? fmax(abs_floor, row_floor[i / per_row]) : abs_floor;
    double bound = floor_here + tol.rtol * fabs(r);
    if (!(err <= bound))
      note_bad(acc, t, row, col, got[i], r, bound);
    if (isfinite(err)) {
      if (err > e->max_abs)
        e->max_abs = err;
      if (fabs(r) >= rel_floor && fabs(r) > 0.0 && err / fabs(r) > e->max_rel)
        e->max_rel = err / fabs(r);
      e->sum_sq_err += err * err;
    } else {
      e->max_abs = INFINITY;
      e->sum_sq_err = INFINITY;
    }
    e->sum_sq_ref += r * r;
  }
}

/* Element `index` of storage of type dtype, decoded. */
static got_elem decode(fp_dtype dtype, const void *storage, int64_t index) {
  got_elem g;
  switch (dtype) {
  case FP_F16: {
    uint16_t h = ((const uint16_t *)storage)[index];
    g.v = fp_f16_bits_to_f32(h);
    g.poisoned = h == FP_POISON_F16;
    break;
  }
  case FP_BF16: {
    uint16_t h = ((const uint16_t *)storage)[index];
    g.v = fp_bf16_bits_to_f32(h);
    g.poisoned = h == FP_POISON_BF16;
    break;
  }
  case FP_U32:
  case FP_I32: {
    uint32_t w = ((const uint32_t *)storage)[index];
    g.v = dtype == FP_I32 ? (double)(int32_t)w : (double)w;
    g.poisoned = w == FP_POISON_WORD;
    break;
  }
  case FP_U8:
    g.v = ((const uint8_t *)storage)[index];
    g.poisoned = false;
    break;
  default: {
    float f = ((const float *)storage)[index];
    uint32_t bits;
    memcpy(&bits, &f, 4);
    g.v = f;
    g.poisoned = bits == FP_POISON_BITS;
    break;
  }
  }
  return g;
}

/* Reads rows [r0, r1) of output t into got (per logical element). A
 * row-contiguous output is read as one range; otherwise the whole storage is
 * read once into *whole and gathered. */
static fp_status read_rows(fp_context *ctx, const fp_tensor_desc *t, fp_buffer *buf, int64_t r0,
                           int64_t r1, got_elem *got, void **whole) {
  const int64_t per_row = row_elems(t);
  const size_t esize = fp_dtype_size(t->dtype);
  const int64_t n = (r1 - r0) * per_row;
  if (fp_tensor_row_contiguous(t)) {
    void *raw = malloc(esize * (size_t)(n > 0 ? n : 1));
    if (raw == NULL)
      return fp_error(FP_ERR_OUT_OF_MEMORY, "check: no host memory to read output %s", t->name);
    fp_status st =
        fp_buffer_read(ctx, buf, (uint64_t)(r0 * per_row) * esize, raw, (uint64_t)n * esize);
    for (int64_t i = 0; st == FP_OK && i < n; ++i)
      got[i] = decode(t->dtype, raw, i);
    free(raw);
    return st;
  }
  if (*whole == NULL) {
    *whole = malloc((size_t)fp_tensor_bytes(t));
    if (*whole == NULL)
      return fp_error(FP_ERR_OUT_OF_MEMORY, "check: no host memory to read output %s", t->name);
    fp_status st = fp_buffer_read(ctx, buf, 0, *whole, fp_tensor_bytes(t));
    if (st != FP_OK)
      return st;
  }
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = 0; c < per_row; ++c)
      got[(r - r0) * per_row + c] = decode(t->dtype, *whole, storage_offset(t, r, c));
  return FP_OK;
}

fp_status fp_check_outputs(fp_context *ctx, const fp_problem *p, const fp_io_desc *io,
                           const fp_host_tensor *in, fp_buffer *const *out,
                           const fp_row_sample *rows, fp_accuracy *acc) {
  if (ctx == NULL || p == NULL || io == NULL || in == NULL || out == NULL || rows == NULL ||
      acc == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_check_outputs: NULL argument");
  memset(acc, 0, sizeof *acc);
  fp_status st = fp_finish(ctx);
  if (st != FP_OK)
    return st;
  err_acc e = {0, 0, 0, 0};
  void *whole[FP_MAX_TENSORS] = {NULL};
  double *ref[FP_MAX_TENSORS] = {NULL};
  got_elem *got = NULL;
  double *row_floor = NULL;
  int64_t total_rows = p->op->rows(p);
  for (int s = 0; st == FP_OK && s < rows->n; ++s) {
    int64_t r0 = rows->r0[s], r1 = rows->r1[s] < total_rows ? rows->r1[s] : total_rows;
    if (r0 < 0 || r0 >= r1)
      continue;
    for (int k = 0; st == FP_OK && k < io->n_out; ++k) {
      ref[k] = malloc(sizeof(double) * (size_t)((r1 - r0) * row_elems(&io->out[k])));
      if (ref[k] == NULL)
        st = fp_error(FP_ERR_OUT_OF_MEMORY, "check: no host memory for the reference");
    }
    if (st == FP_OK)
      p->op->reference(p, in, r0, r1, ref);
    for (int k = 0; st == FP_OK && k < io->n_out; ++k) {
      const fp_tensor_desc *t = &io->out[k];
      got = malloc(sizeof(got_elem) * (size_t)((r1 - r0) * row_elems(t)));
      if (got == NULL)
        st = fp_error(FP_ERR_OUT_OF_MEMORY, "check: no host memory for the outputs");
      if (st == FP_OK)
        st = read_rows(ctx, t, out[k], r0, r1, got, &whole[k]);
      fp_tolerance tol = p->op->tol;
      if (p->op->tol_abs != NULL)
        tol.abs = p->op->tol_abs(p, k);
      if (p->op->tolerance != NULL)
        tol = p->op->tolerance(p, k);
      if (st == FP_OK && p->op->row_tol_abs != NULL) {
        row_floor = malloc(sizeof(double) * (size_t)(r1 - r0));
        if (row_floor == NULL)
          st = fp_error(FP_ERR_OUT_OF_MEMORY, "check: no host memory for the row floors");
        else
          p->op->row_tol_abs(p, k, in, r0, r1, (const double *const *)ref, row_floor);
      }
      if (st == FP_OK)
        compare_rows(t, tol, row_floor, r0, r1, got, ref[k], acc, &e);
      free(got);
      got = NULL;
      free(row_floor);
      row_floor = NULL;
    }
    for (int k = 0; k < io->n_out; ++k) {
      free(ref[k]);
      ref[k] = NULL;
    }
  }
  for (int k = 0; k < FP_MAX_TENSORS; ++k)
    free(whole[k]);
  if (st != FP_OK)
    return st;
  acc->max_abs_err = e.max_abs;
  acc->max_rel_err = e.max_rel;
  acc->rel_l2_err = e.sum_sq_ref > 0 ? sqrt(e.sum_sq_err / e.sum_sq_ref) : sqrt(e.sum_sq_err);
  acc->ok = acc->bad == 0 && acc->checked > 0;
  return FP_OK;
}
