/* fuseport CPU kernels, family attention: the executable specification of
 * kernels.def's attention_<dt>, attention_combine_<dt> and attn_softmax_<dt>
 * (float arithmetic, one query row at a time). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "fp_device_common.h"

/* The keys [0, end) of its head that query row i sees (bottom-right causal:
 * j <= i + SK - S); end may be 0 (a row that sees none). */
static int64_t visible_end(int64_t i, int64_t S, int64_t SK, bool causal) {
  if (!causal)
    return SK;
  const int64_t end = i + SK - S + 1;
  return end < 0 ? 0 : (end > SK ? SK : end);
}

/* Attention of one row (qrow, D floats) over keys [j0, j1) of its head's k
 * and v ([SK, D] floats) with an online softmax: o (D floats) the normalised
 * weighted sum of v, the return value the lse (-inf, o = 0 for an empty
 * range). */
static float attend_row(const float *qrow, const float *k, const float *v, int64_t j0, int64_t j1,
                        int64_t D, float scale, float *o) {
  for (int64_t d = 0; d < D; ++d)
    o[d] = 0.0f;
  float m = -INFINITY, sum = 0.0f;
  for (int64_t j = j0; j < j1; ++j) {
    float dot = 0.0f;
    for (int64_t d = 0; d < D; ++d)
      dot += qrow[d] * k[j * D + d];
    const float s = dot * scale;
    if (s > m) { /* a new maximum: rescale what was summed so far */
      const float c = expf(m - s);
      sum *= c;
      for (int64_t d = 0; d < D; ++d)
        o[d] *= c;
      m = s;
    }
    const float p = expf(s - m);
    sum += p;
    for (int64_t d = 0; d < D; ++d)
      o[d] += p * v[j * D + d];
  }
  if (!(sum > 0.0f))
    return -INFINITY;
  for (int64_t d = 0; d < D; ++d)
    o[d] /= sum;
  return m + logf(sum);
}

/* attention_<dt>(out, lse, q, k, v, opart, lpart, B, H, S, SK, D, causal,
 *                scale, splits) */
static void attention_any(const fp_karg *args, fp_dtype dt) {
  void *out = args[0].v.handle;
  float *lse = FP_CPU_F32P(args, 1);
  const void *q = args[2].v.handle, *k = args[3].v.handle, *v = args[4].v.handle;
  float *opart = FP_CPU_F32P(args, 5), *lpart = FP_CPU_F32P(args, 6);
  const int64_t B = FP_CPU_I64(args, 7), H = FP_CPU_I64(args, 8), S = FP_CPU_I64(args, 9);
  const int64_t SK = FP_CPU_I64(args, 10), D = FP_CPU_I64(args, 11);
  const bool causal = FP_CPU_I32(args, 12) != 0;
  const float scale = FP_CPU_F32(args, 13);
  const int64_t splits = FP_CPU_I32(args, 14) > 1 ? FP_CPU_I32(args, 14) : 1;
  if (D < 1 || D > FP_ATTN_MAX_D)
    return; /* the recipe refuses these */
  const int64_t R = B * H * S, chunk = (SK + splits - 1) / splits, head = SK * D;
  /* one head's k and v as float (float32 data is read in place) */
  float *kf = NULL, *vf = NULL;
  if (dt != FP_F32) {
    kf = malloc(sizeof(float) * (size_t)head);
    vf = malloc(sizeof(float) * (size_t)head);
    if (kf == NULL || vf == NULL) { /* a kernel cannot fail: the check then does */
      free(kf);
      free(vf);
      return;
    }
  }
  float qrow[FP_ATTN_MAX_D], o[FP_ATTN_MAX_D];
  const float *kh = NULL, *vh = NULL;
  int64_t loaded = -1;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t bh = r / S, i = r % S, end = visible_end(i, S, SK, causal);
    if (bh != loaded) {
      if (dt == FP_F32) {
        kh = (const float *)k + bh * head;
        vh = (const float *)v + bh * head;
      } else {
        for (int64_t e = 0; e < head; ++e) {
          kf[e] = fp_cpu_load_elem(dt, k, bh * head + e);
          vf[e] = fp_cpu_load_elem(dt, v, bh * head + e);
        }
        kh = kf;
        vh = vf;
      }
      loaded = bh;
    }
    for (int64_t d = 0; d < D; ++d)
      qrow[d] = fp_cpu_load_elem(dt, q, r * D + d);
    if (splits == 1) {
      lse[r] = attend_row(qrow, kh, vh, 0, end, D, scale, o);
      for (int64_t d = 0; d < D; ++d)
        fp_cpu_store_elem(dt, out, r * D + d, o[d]);
      continue;
    }
    for (int64_t c = 0; c < splits; ++c) {
      const int64_t j0 = c * chunk, j1 = (c + 1) * chunk < end ? (c + 1) * chunk : end;
      lpart[c * R + r] = attend_row(qrow, kh, vh, j0, j0 < j1 ? j1 : j0, D, scale, o);
      memcpy(opart + (c * R + r) * D, o, sizeof(float) * (size_t)D);
    }
  }
  free(kf);
  free(vf);
}

/* attention_combine_<dt>(out, lse, opart, lpart, R, D, splits) */
static void combine_any(const fp_karg *args, fp_dtype dt) {
  void *out = args[0].v.handle;
  float *lse = FP_CPU_F32P(args, 1);
  const float *opart = FP_CPU_F32P(args, 2), *lpart = FP_CPU_F32P(args, 3);
  const int64_t R = FP_CPU_I64(args, 4), D = FP_CPU_I64(args, 5);
  const int64_t splits = FP_CPU_I32(args, 6);
  for (int64_t r = 0; r < R; ++r) {
    float m = -INFINITY;
    for (int64_t c = 0; c < splits; ++c)
      m = lpart[c * R + r] > m ? lpart[c * R + r] : m;
    float sum = 0.0f;
    if (m > -INFINITY)
      for (int64_t c = 0; c < splits; ++c)
        sum += expf(lpart[c * R + r] - m);
    const float L = m > -INFINITY ? m + logf(sum) : -INFINITY;
    lse[r] = L;
    for (int64_t d = 0; d < D; ++d) {
      float acc = 0.0f;
      if (L > -INFINITY)
        for (int64_t c = 0; c < splits; ++c)
          if (lpart[c * R + r] > -INFINITY)
            acc += expf(lpart[c * R + r] - L) * opart[(c * R + r) * D + d];
      fp_cpu_store_elem(dt, out, r * D + d, acc);
    }
  }
}

/* attn_softmax_<dt>(p, lse, s, R, S, SK, causal) */
static void softmax_any(const fp_karg *args, fp_dtype dt) {
  void *p = args[0].v.handle;
  float *lse = FP_CPU_F32P(args, 1);
  const void *s = args[2].v.handle;
  const int64_t R = FP_CPU_I64(args, 3), S = FP_CPU_I64(args, 4), SK = FP_CPU_I64(args, 5);
  const bool causal = FP_CPU_I32(args, 6) != 0;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t end = visible_end(r % S, S, SK, causal), row = r * SK;
    float m = -INFINITY;
    for (int64_t j = 0; j < end; ++j) {
      const float x = fp_cpu_load_elem(dt, s, row + j);
      m = x > m ? x : m;
    }
    float sum = 0.0f;
    if (m > -INFINITY)
      for (int64_t j = 0; j < end; ++j)
        sum += expf(fp_cpu_load_elem(dt, s, row + j) - m);
    const float L = sum > 0.0f ? m + logf(sum) : -INFINITY;
    lse[r] = L;
    for (int64_t j = 0; j < SK; ++j)
      fp_cpu_store_elem(dt, p, row + j,
                        j < end && L > -INFINITY ? expf(fp_cpu_load_elem(dt, s, row + j) - L)
                                                 : 0.0f);
  }
}

#define FP_CPU_ATTN_DTYPES(X) X(f32, FP_F32) X(f16, FP_F16) X(bf16, FP_BF16)
#define FP_CPU_ATTN_WRAP(suffix, dt)                                                               \
  static void attention_##suffix(const fp_ndrange *nd, const fp_karg *args) {                      \
    (void)nd;                                                                                      \
    attention_any(args, dt);                                                                       \
  }                                                                                                \
  static void attention_combine_##suffix(const fp_ndrange *nd, const fp_karg *args) {              \
    (void)nd;                                                                                      \
    combine_any(args, dt);                                                                         \
  }                                                                                                \
  static void attn_softmax_##suffix(const fp_ndrange *nd, const fp_karg *args) {                   \
    (void)nd;                                                                                      \
    softmax_any(args, dt);                                                                         \
  }
FP_CPU_ATTN_DTYPES(FP_CPU_ATTN_WRAP)

void fp_cpu_register_attention(fp_cpu_kernel_fn table[FPK_COUNT]) {
#define FP_CPU_ATTN_REGISTER(suffix, dt)                                                           \
  table[FPK_attention_##suffix] = attention_##suffix;                                              \
  table[FPK_attention_combine_##suffix] = attention_combine_##suffix;                              \
  table[FPK_attn_softmax_##suffix] = attn_softmax_##suffix;
  FP_CPU_ATTN_DTYPES(FP_CPU_ATTN_REGISTER)
#undef FP_CPU_ATTN_REGISTER
}
