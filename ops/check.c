/* fuseport: inputs, outputs and the float64 reference check. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp_device_common.h"
#include "recipe.h"

/* A quiet NaN with a payload no arithmetic produces: an output element that
 * still holds it after a run was never written. */
#define FP_POISON_BITS 0x7FC0DEADu

fp_status fp_io_alloc(fp_context *ctx, const fp_io_desc *io, fp_buffer **in, fp_buffer **out) {
  if (ctx == NULL || io == NULL || in == NULL || out == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_io_alloc: NULL argument");
  for (int k = 0; k < io->n_in; ++k)
    in[k] = NULL;
  for (int k = 0; k < io->n_out; ++k)
    out[k] = NULL;
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
    if (t->dtype != FP_F32)
      return fp_error(FP_ERR_UNSUPPORTED, "fp_io_fill_inputs: input %s is %s; only f32 is filled",
                      t->name, fp_dtype_name(t->dtype));
    fp_arg args[] = {fp_arg_buf(in[k]),         fp_arg_i64(t->storage_elems),
                     fp_arg_i64((int64_t)seed), fp_arg_i32(k),
                     fp_arg_f32(t->fill_scale), fp_arg_i32(t->fill_positive ? 1 : 0)};
    fp_ndrange nd = fp_elem_range(&rc, t->storage_elems);
    fp_status st = fp_launch(ctx, FPK_fill_uniform_f32, &nd, args, 6);
    if (st != FP_OK)
      return st;
  }
  return FP_OK;
}

fp_status fp_io_poison_outputs(fp_context *ctx, const fp_io_desc *io, fp_buffer *const *out) {
  if (ctx == NULL || io == NULL || out == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_io_poison_outputs: NULL argument");
  const uint32_t poison = FP_POISON_BITS;
  for (int k = 0; k < io->n_out; ++k) {
    fp_status st = fp_buffer_fill(ctx, out[k], 0, fp_tensor_bytes(&io->out[k]), &poison, 4);
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

static void note_bad(fp_accuracy *acc, const fp_tensor_desc *t, int64_t r, int64_t c, float got,
                     double ref, double bound) {
  acc->bad++;
  if (acc->first_bad[0] != '\0')
    return;
  uint32_t bits;
  memcpy(&bits, &got, 4);
  if (bits == FP_POISON_BITS)
    snprintf(acc->first_bad, sizeof acc->first_bad,
             "output %s row %lld element %lld: never written (still poisoned), expected %.9g",
             t->name, (long long)r, (long long)c, ref);
  else
    snprintf(acc->first_bad, sizeof acc->first_bad,
             "output %s row %lld element %lld: got %.9g, expected %.9g (|err| %.3g > bound %.3g)",
             t->name, (long long)r, (long long)c, (double)got, ref, fabs((double)got - ref), bound);
}

/* Compares one output's rows [r0, r1) (got: float per logical element, in
 * row order) against ref. */
static void compare_rows(const fp_tensor_desc *t, fp_tolerance tol, const double *row_floor,
                         int64_t r0, int64_t r1, const float *got, const double *ref,
                         fp_accuracy *acc, err_acc *e) {
  int64_t per_row = row_elems(t);
  int64_t n = (r1 - r0) * per_row;
  double maxref = 0.0;
  for (int64_t i = 0; i < n; ++i)
    if (isfinite(ref[i]) && fabs(ref[i]) > maxref && fabs(ref[i]) <= FLT_MAX)
      maxref = fabs(ref[i]);
  double abs_floor = fmax(tol.abs, tol.atol * maxref);
  /* Relative error is reported only where the reference is not negligible
   * against the output's scale: near-zero references make it meaningless. */
  double rel_floor = 1e-6 * maxref;
  for (int64_t i = 0; i < n; ++i) {
    double r = ref[i];
    float g = got[i];
    int64_t row = r0 + i / per_row, col = i % per_row;
    acc->checked++;
    if (isnan(r)) {
      if (!isnan(g))
        note_bad(acc, t, row, col, g, r, 0.0);
      continue;
    }
    if (isnan(g)) {
      note_bad(acc, t, row, col, g, r, 0.0);
      continue;
    }
    if (isinf(r) || fabs(r) > FLT_MAX) {
      /* beyond float range: the float result must be the same infinity */
      if (g != (float)r)
        note_bad(acc, t, row, col, g, r, 0.0);
      continue;
    }
    double err = fabs((double)g - r);
    double floor_here = row_floor != NULL ? fmax(abs_floor, row_floor[i / per_row]) : abs_floor;
    double bound = floor_here + tol.rtol * fabs(r);
    if (!(err <= bound))
      note_bad(acc, t, row, col, g, r, bound);
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

/* Reads rows [r0, r1) of output t into got (float per logical element). A
 * row-contiguous output is read as one range; otherwise the whole storage is
 * read once into *whole and gathered. */
static fp_status read_rows(fp_context *ctx, const fp_tensor_desc *t, fp_buffer *buf, int64_t r0,
                           int64_t r1, float *got, float **whole) {
  int64_t per_row = row_elems(t);
  if (fp_tensor_row_contiguous(t))
    return fp_buffer_read(ctx, buf, (uint64_t)(r0 * per_row) * 4u, got,
                          (uint64_t)((r1 - r0) * per_row) * 4u);
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
      got[(r - r0) * per_row + c] = (*whole)[storage_offset(t, r, c)];
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
  float *whole[FP_MAX_TENSORS] = {NULL};
  double *ref[FP_MAX_TENSORS] = {NULL};
  float *got = NULL;
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
      got = malloc(sizeof(float) * (size_t)((r1 - r0) * row_elems(t)));
      if (got == NULL)
        st = fp_error(FP_ERR_OUT_OF_MEMORY, "check: no host memory for the outputs");
      if (st == FP_OK)
        st = read_rows(ctx, t, out[k], r0, r1, got, &whole[k]);
      fp_tolerance tol = p->op->tol;
      if (p->op->tol_abs != NULL)
        tol.abs = p->op->tol_abs(p, k);
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
