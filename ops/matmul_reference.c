/* fuseport operators, family matmul: the float64 reference over the inputs
 * as stored (f16/bf16 rounded) and the tolerance, for every op of the
 * family (ops/matmul.c holds the variants and the descriptors). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_internal.h"

/* ---- the float64 reference -------------------------------------------------------------- */

/* A GEMM's reference rereads all of B for every output row; regenerating it
 * from the generator each time would dominate a check. So the last operand
 * materialised (as float: exact for every storage type) is kept, per thread,
 * keyed by what generated it. */
typedef struct operand_cache {
  uint64_t seed;
  uint32_t stream;
  int64_t elems;
  fp_dtype dtype;
  float scale;
  bool positive;
  bool from_data;
  const void *data;
  float *values;
} operand_cache;

static _Thread_local operand_cache cache_b, cache_d;

static const float *cached_operand(operand_cache *c, const fp_host_tensor *t) {
  const fp_tensor_desc *d = t->desc;
  if (c->values != NULL && c->seed == t->seed && c->stream == t->stream &&
      c->elems == d->storage_elems && c->dtype == d->dtype && c->scale == d->fill_scale &&
      c->positive == d->fill_positive && c->from_data == (t->data != NULL) && c->data == t->data)
    return c->values;
  free(c->values);
  c->values = fp_host_storage_f32(t);
  c->seed = t->seed;
  c->stream = t->stream;
  c->elems = d->storage_elems;
  c->dtype = d->dtype;
  c->scale = d->fill_scale;
  c->positive = d->fill_positive;
  c->from_data = t->data != NULL;
  c->data = t->data;
  return c->values;
}

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }
static double gelu_erf_d(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

/* acc[j] = sum_k a_row[k] * B(k, j) over j < NB, in double. */
static void row_product(const mm_problem *m, const double *a_row, const float *b, double *acc) {
  for (int64_t j = 0; j < m->NB; ++j)
    acc[j] = 0.0;
  for (int64_t k = 0; k < m->K; ++k) {
    const double av = a_row[k];
    if (m->trans_b) {
      for (int64_t j = 0; j < m->NB; ++j)
        acc[j] += av * (double)b[j * m->K + k];
    } else {
      const float *brow = b + k * m->NB;
      for (int64_t j = 0; j < m->NB; ++j)
        acc[j] += av * (double)brow[j];
    }
  }
}

void fp_matmul_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                         double *const *out) {
  const mm_problem m = fp_matmul_problem_of(p);
  const float *b = cached_operand(&cache_b, &in[1]);
  const float *d = m.kind == KIND_B2B ? cached_operand(&cache_d, &in[2]) : NULL;
  double *a_row = malloc(sizeof(double) * (size_t)m.K);
  double *acc = malloc(sizeof(double) * (size_t)m.NB);
  const int64_t cols = m.kind == KIND_B2B ? m.P : m.N;
  if (b == NULL || (m.kind == KIND_B2B && d == NULL) || a_row == NULL || acc == NULL) {
    /* no host memory: NaN everywhere, which fails the check rather than
     * passing anything */
    for (int64_t i = 0; i < (r1 - r0) * cols; ++i)
      out[0][i] = NAN;
    free(a_row);
    free(acc);
    return;
  }
  for (int64_t i = r0; i < r1; ++i) {
    double *o = out[0] + (i - r0) * cols;
    for (int64_t k = 0; k < m.K; ++k)
      a_row[k] = fp_host_at2(&in[0], i, k);
    row_product(&m, a_row, b, acc);
    switch (m.kind) {
    case KIND_ADD:
    case KIND_ADD_RELU:
    case KIND_RELU:
      for (int64_t j = 0; j < m.N; ++j) {
        double v = acc[j];
        if (m.kind != KIND_RELU)
          v += m.full_add ? fp_host_at2(&in[2], i, j) : fp_host_at1(&in[2], j);
        o[j] = m.kind == KIND_ADD ? v : (v > 0.0 || isnan(v) ? v : 0.0);
      }
      break;
    case KIND_SPLIT_ACT:
      for (int64_t j = 0; j < m.N; ++j)
        o[j] = sigmoid_d(acc[j]) * tanh(acc[m.N + j]);
      break;
    case KIND_GEGLU:
      for (int64_t j = 0; j < m.N; ++j)
        o[j] = (acc[j] + fp_host_at1(&in[2], j)) *
               gelu_erf_d(acc[m.N + j] + fp_host_at1(&in[2], m.N + j));
      break;
    case KIND_B2B:
      for (int64_t q = 0; q < m.P; ++q)
        o[q] = 0.0;
      for (int64_t n = 0; n < m.N; ++n) {
        const float *drow = d + n * m.P;
        for (int64_t q = 0; q < m.P; ++q)
          o[q] += acc[n] * (double)drow[q];
      }
      break;
    }
  }
  free(a_row);
  free(acc);
}

/* The gate: float32 accumulation of K products of O(1) terms errs by about
 * 2^-24 * sqrt(K) of the output's scale (tree or blocked order), and every
 * rounding to the storage type costs up to its unit roundoff eps relative:
 * the fused kernels round once, the unfused chains (split_act: the product,
 * sigmoid, tanh, their product) a few times, and matmul_matmul's second GEMM
 * sums N rounded intermediates. So rtol = 4 eps; against max|ref|, atol =
 * 4 eps + 16 * 2^-24 * sqrt(K) (+ sqrt(N) for matmul_matmul); and since the
 * fill scales keep every operand and intermediate O(1) (fp_sum_scale), an
 * absolute floor of 8 eps covers outputs that cancel (A@B + C near 0 in the
 * unfused chain, whose rounded product errs by eps * |A@B|, not by eps of
 * the tiny result) -- about 10x the typical error, while a wrong element
 * (a lost k-step, a swapped half) costs O(1). */
fp_tolerance fp_matmul_tolerance(const fp_problem *p, int output) {
  (void)output;
  const mm_problem m = fp_matmul_problem_of(p);
  const double eps = m.dtype == FP_F16    ? ldexp(1.0, -11)
                     : m.dtype == FP_BF16 ? ldexp(1.0, -8)
                                          : ldexp(1.0, -24);
  double acc = 16.0 * ldexp(1.0, -24) * sqrt((double)m.K);
  if (m.kind == KIND_B2B)
    acc += 16.0 * ldexp(1.0, -24) * sqrt((double)m.N);
  fp_tolerance t = {4.0 * eps, 4.0 * eps + acc, 8.0 * eps + acc};
  return t;
}
