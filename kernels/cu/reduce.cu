/* fuseport CUDA kernels, family reduce: fused row reductions, all ROWS
 * geometry over contiguous row-major [M, N]. Semantics: kernels/kernels.def;
 * reference: kernels/cpu/reduce.c.
 *
 * Group g handles rows g, g+G, ...; its L threads cooperate on one row at a
 * time. A row of up to 2*L 16-byte vectors (8*L floats: 8192 at L = 1024)
 * is kept in registers (fpcu::RowCache), so it is read from global memory
 * exactly once and every later pass runs on chip. Longer rows are streamed:
 * the statistics are gathered in one read (online max/sum for softmax,
 * Welford for layernorm) and the output written in a second, which for rows
 * of up to ~128 KiB mostly hits L2 (the rows in flight on all SMs fit in it).
 *
 * Registers: the cache is capped at two vectors per thread so that the
 * kernels fit in 32 registers (40 for the two with more operands) without
 * spills, i.e. 2048 (1536) resident threads per SM: short rows need many
 * rows in flight per SM to keep the memory busy, which a deeper cache at 64
 * registers (half the threads) would cost. __maxnreg__ rather than
 * __launch_bounds__(1024): the cap already lets 1024-thread blocks launch.
 *
 * Block reductions: warp shuffles, then one slot per warp in shared memory
 * (fpcu::block_allreduce). NaN follows PyTorch: a NaN in a row makes the max
 * NaN and with it the whole softmax row; a row of -inf gives NaN.
 */
#include "cuda/cuda_kernels.h"

using namespace fpcu;

namespace {

/* ---- online softmax statistics -------------------------------------------- */

/* Running max m (NaN-aware) and s = sum of exp(x - m) over the values seen.
 * s is exact (up to rounding) whenever the row's max ends up finite; when it
 * is NaN or +-inf the row's softmax is NaN anyway (softmax_inv), so s may
 * then be anything. The empty state is (-inf, 0). */
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum shfl_xor(MaxSum v, int mask) {
  v.m = __shfl_xor_sync(kFullMask, v.m, mask);
  v.s = __shfl_xor_sync(kFullMask, v.s, mask);
  return v;
}

struct CombineMaxSum {
  __device__ __forceinline__ MaxSum operator()(MaxSum a, MaxSum b) const {
    MaxSum r;
    r.m = fp_maximum(a.m, b.m);
    /* A partial whose max is the overall max keeps its sum as is: this also
     * covers two empty partials, where exp(-inf - -inf) would be NaN. */
    const float fa = a.m == r.m ? 1.0f : expf(a.m - r.m);
    const float fb = b.m == r.m ? 1.0f : expf(b.m - r.m);
    r.s = a.s * fa + b.s * fb;
    return r;
  }
};

__device__ __forceinline__ MaxSum max_sum_empty() {
  MaxSum e;
  e.m = -CUDART_INF_F;
  e.s = 0.0f;
  return e;
}

/* Moves the running max to m (>= st.m, or NaN), rescaling the sum. */
__device__ __forceinline__ void online_rescale(MaxSum &st, float m) {
  if (m != st.m) {          /* also true when m is NaN */
    st.s *= expf(st.m - m); /* st.m == -inf: exp(-inf) = 0, and st.s is 0 */
    st.m = m;
  }
}

__device__ __forceinline__ void online_add(MaxSum &st, float x) {
  online_rescale(st, fp_maximum(st.m, x));
  if (st.m != -CUDART_INF_F) /* only -inf seen so far: x is -inf, adds 0 */
    st.s += expf(x - st.m);
}

__device__ __forceinline__ void online_add4(MaxSum &st, float4 x) {
  online_rescale(st, fp_maximum(st.m, fp_maximum(fp_maximum(x.x, x.y), fp_maximum(x.z, x.w))));
  if (st.m != -CUDART_INF_F)
    st.s += (expf(x.x - st.m) + expf(x.y - st.m)) + (expf(x.z - st.m) + expf(x.w - st.m));
}

/* 1/sum of a row's statistics; NaN when the max is not finite (a NaN, a
 * +inf, or a row of -inf), as exp(x - max) then has a NaN term. */
__device__ __forceinline__ float softmax_inv(MaxSum t) {
  return 1.0f / (isfinite(t.m) ? t.s : CUDART_NAN_F);
}

/* (max, sum) of a row in one streamed read. */
__device__ MaxSum row_max_sum(const float *x_row, const RowSplit &s, MaxSum *scratch) {
  MaxSum st = max_sum_empty();
  const float *body = x_row + s.head;
  row_stream<2>(
      s, [&](long long j) { online_add(st, __ldg(x_row + j)); },
      [&](long long v) { return ldg4(body + 4 * v); },
      [&](long long, float4 x) { online_add4(st, x); });
  return block_allreduce(st, max_sum_empty(), CombineMaxSum(), scratch);
}

/* ---- Welford statistics for layernorm --------------------------------------- */

/* Count, mean and centred sum of squares (Chan et al.'s pairwise update),
 * plus the plain sum: the mean reported and used is sum/N, as on the CPU;
 * m2 does not depend on which estimate of the mean it was accumulated
 * around. Counts are floats (exact to 2^24 per partial; beyond that only the
 * weights of a merge round). */
struct MeanM2 {
  float sum, n, mean, m2;
};

__device__ __forceinline__ MeanM2 shfl_xor(MeanM2 v, int mask) {
  v.sum = __shfl_xor_sync(kFullMask, v.sum, mask);
  v.n = __shfl_xor_sync(kFullMask, v.n, mask);
  v.mean = __shfl_xor_sync(kFullMask, v.mean, mask);
  v.m2 = __shfl_xor_sync(kFullMask, v.m2, mask);
  return v;
}

__device__ __forceinline__ MeanM2 mean_m2_merge(MeanM2 a, MeanM2 b) {
  MeanM2 r;
  r.sum = a.sum + b.sum;
  r.n = a.n + b.n;
  const float wb = r.n > 0.0f ? b.n / r.n : 0.0f; /* two empty partials stay empty */
  const float d = b.mean - a.mean;
  r.mean = a.mean + d * wb;
  r.m2 = a.m2 + b.m2 + d * d * a.n * wb;
  return r;
}

struct CombineMeanM2 {
  __device__ __forceinline__ MeanM2 operator()(MeanM2 a, MeanM2 b) const {
    return mean_m2_merge(a, b);
  }
};

__device__ __forceinline__ MeanM2 mean_m2_empty() {
  MeanM2 e;
  e.sum = e.n = e.mean = e.m2 = 0.0f;
  return e;
}

__device__ __forceinline__ void welford_add(MeanM2 &st, float x) {
  MeanM2 one;
  one.sum = x;
  one.n = 1.0f;
  one.mean = x;
  one.m2 = 0.0f;
  st = mean_m2_merge(st, one);
}

/* The four values are first summarised exactly as a group (two-pass on
 * registers), then merged: one division per vector. */
__device__ __forceinline__ void welford_add4(MeanM2 &st, float4 x) {
  MeanM2 g;
  g.sum = (x.x + x.y) + (x.z + x.w);
  g.n = 4.0f;
  g.mean = g.sum * 0.25f;
  const float dx = x.x - g.mean, dy = x.y - g.mean, dz = x.z - g.mean, dw = x.w - g.mean;
  g.m2 = (dx * dx + dy * dy) + (dz * dz + dw * dw);
  st = mean_m2_merge(st, g);
}

/* ---- softmax --------------------------------------------------------------- */

/* Softmax of the cached row in place: exp(x - max) / sum, PyTorch's form.
 * Returns 1/sum (the largest output value; NaN for a non-finite row). */
template <int K>
__device__ __forceinline__ float softmax_in_cache(RowCache<K> &c, const RowSplit &s,
                                                  float *scratch) {
  float m = -CUDART_INF_F;
  cache_for_each(c, s, [&](float &v) { m = fp_maximum(m, v); });
  m = block_max(m, scratch);
  float sum = 0.0f;
  cache_for_each(c, s, [&](float &v) {
    v = expf(v - m);
    sum += v;
  });
  const float inv = 1.0f / block_sum(sum, scratch);
  cache_for_each(c, s, [&](float &v) { v *= inv; });
  return inv;
}

template <int K>
__device__ __forceinline__ void softmax_row_cached(float *out_row, const float *x_row,
                                                   const RowSplit &s, bool out_vec,
                                                   float *scratch) {
  RowCache<K> c;
  cache_load(c, x_row, s, true);
  softmax_in_cache(c, s, scratch);
  cache_store(c, out_row, s, out_vec);
}

__device__ void softmax_row_streamed(float *out_row, const float *x_row, const RowSplit &s,
                                     bool out_vec, MaxSum *scratch) {
  const MaxSum t = row_max_sum(x_row, s, scratch);
  const float m = t.m, inv = softmax_inv(t);
  const auto f = [=](float v) { return expf(v - m) * inv; };
  const float *x_body = x_row + s.head;
  float *out_body = out_row + s.head;
  row_stream<2, true>(
      s, [&](long long j) { out_row[j] = f(__ldg(x_row + j)); },
      [&](long long v) { return ldg4(x_body + 4 * v); },
      [&](long long v, float4 x) { st4_any(out_body + 4 * v, map4(x, f), out_vec); });
}

/* ---- double softmax ----------------------------------------------------------- */

/* The second softmax runs on y = softmax(x), whose max is 1/sum exactly
 * (exp(0) = 1 at the max element, exp(.) <= 1 elsewhere), so it is shifted by
 * that value without another max reduction: y - 1/sum lies in [-1, 0]. (Any
 * shift gives the same softmax; the max only keeps exp in range.) */
template <int K>
__device__ __forceinline__ void double_softmax_row_cached(float *out_row, const float *x_row,
                                                          const RowSplit &s, bool out_vec,
                                                          float *scratch) {
  RowCache<K> c;
  cache_load(c, x_row, s, true);
  const float y_max = softmax_in_cache(c, s, scratch);
  float sum = 0.0f;
  cache_for_each(c, s, [&](float &v) {
    v = expf(v - y_max);
    sum += v;
  });
  const float inv = 1.0f / block_sum(sum, scratch);
  cache_for_each(c, s, [&](float &v) { v *= inv; });
  cache_store(c, out_row, s, out_vec);
}

/* Three streamed reads, alternately forwards and backwards: (max, sum) of x,
 * the sum of the second softmax, then the output; y = softmax(x) is
 * recomputed rather than stored and reread. */
__device__ void double_softmax_row_streamed(float *out_row, const float *x_row, const RowSplit &s,
                                            bool out_vec, MaxSum *scratch_ms, float *scratch) {
  const MaxSum t = row_max_sum(x_row, s, scratch_ms);
  const float m = t.m, y_max = softmax_inv(t);
  const auto second_exp = [=](float v) { return expf(expf(v - m) * y_max - y_max); };
  const float *x_body = x_row + s.head;
  float sum = 0.0f;
  row_stream<2, true>(
      s, [&](long long j) { sum += second_exp(__ldg(x_row + j)); },
      [&](long long v) { return ldg4(x_body + 4 * v); },
      [&](long long, float4 x) {
        const float4 e = map4(x, second_exp);
        sum += (e.x + e.y) + (e.z + e.w);
      });
  const float inv = 1.0f / block_sum(sum, scratch);
  const auto f = [=](float v) { return second_exp(v) * inv; };
  float *out_body = out_row + s.head;
  row_stream<2>(
      s, [&](long long j) { out_row[j] = f(__ldg(x_row + j)); },
      [&](long long v) { return ldg4(x_body + 4 * v); },
      [&](long long v, float4 x) { st4_any(out_body + 4 * v, map4(x, f), out_vec); });
}

/* ---- softmax backward ------------------------------------------------------------ */

struct GradPair {
  float4 g, y;
};

/* grad_in = y * (g - sum_j g*y); both rows cached. */
template <int K>
__device__ __forceinline__ void
softmax_backward_row_cached(float *gin_row, const float *g_row, const float *y_row,
                            const RowSplit &s, bool g_vec, bool out_vec, float *scratch) {
  RowCache<K> y, g;
  cache_load(y, y_row, s, true);
  cache_load(g, g_row, s, g_vec);
  float dot = 0.0f;
  cache_for_each2(y, g, s, [&](float &yv, float &gv) { dot += gv * yv; });
  dot = block_sum(dot, scratch);
  cache_for_each2(y, g, s, [&](float &yv, float &gv) { yv = yv * (gv - dot); });
  cache_store(y, gin_row, s, out_vec);
}

__device__ void softmax_backward_row_streamed(float *gin_row, const float *g_row,
                                              const float *y_row, const RowSplit &s, bool g_vec,
                                              bool out_vec, float *scratch) {
  const float *g_body = g_row + s.head, *y_body = y_row + s.head;
  const auto load_pair = [&](long long v) {
    GradPair p;
    p.g = ldg4_any(g_body + 4 * v, g_vec);
    p.y = ldg4(y_body + 4 * v);
    return p;
  };
  float dot = 0.0f;
  row_stream<2>(
      s, [&](long long j) { dot += __ldg(g_row + j) * __ldg(y_row + j); }, load_pair,
      [&](long long, const GradPair &p) {
        dot += (p.g.x * p.y.x + p.g.y * p.y.y) + (p.g.z * p.y.z + p.g.w * p.y.w);
      });
  dot = block_sum(dot, scratch);
  const auto f = [=](float gv, float yv) { return yv * (gv - dot); };
  float *gin_body = gin_row + s.head;
  row_stream<2, true>(
      s, [&](long long j) { gin_row[j] = f(__ldg(g_row + j), __ldg(y_row + j)); }, load_pair,
      [&](long long v, const GradPair &p) {
        st4_any(gin_body + 4 * v, map4(p.g, p.y, f), out_vec);
      });
}

/* ---- layernorm ----------------------------------------------------------------------- */

/* Everything a row's output pass needs. */
struct LayerNormRow {
  float *out_row;
  const float *x_row, *w, *b;
  long long N;
  RowSplit s;
  bool out_vec; /* out_row + s.head is 16-byte aligned */
  bool wb_vec;  /* w + s.head and b + s.head are */
};

/* out = (x - mean) * rstd * w[j] + b[j], CPU evaluation order. */
__device__ __forceinline__ float layernorm_value(float centred, float rstd, float w, float b) {
  return centred * rstd * w + b;
}

template <int K>
__device__ __forceinline__ void layernorm_row_cached(const LayerNormRow &r, float eps,
                                                     float *mean_out, float *rstd_out,
                                                     float *scratch) {
  RowCache<K> c;
  cache_load(c, r.x_row, r.s, true);
  float sum = 0.0f;
  cache_for_each(c, r.s, [&](float &v) { sum += v; });
  const float mean = block_sum(sum, scratch) / (float)r.N;
  /* Two passes on the cached row: the centred sum of squares does not cancel
   * as E[x^2] - E[x]^2 would. */
  float sq = 0.0f;
  cache_for_each(c, r.s, [&](float &v) {
    v -= mean;
    sq += v * v;
  });
  const float var = block_sum(sq, scratch) / (float)r.N;
  const float rstd = 1.0f / sqrtf(var + eps);

  const int t = threadIdx.x;
  if (t < r.s.head)
    r.out_row[t] = layernorm_value(c.head, rstd, __ldg(r.w + t), __ldg(r.b + t));
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (slot_valid(r.s, k)) {
      const long long j = r.s.head + 4 * slot_vector(k);
      const float4 w4 = ldg4_any(r.w + j, r.wb_vec), b4 = ldg4_any(r.b + j, r.wb_vec);
      const float4 d = c.v[k];
      st4_any(r.out_row + j,
              make_float4(
                  layernorm_value(d.x, rstd, w4.x, b4.x), layernorm_value(d.y, rstd, w4.y, b4.y),
                  layernorm_value(d.z, rstd, w4.z, b4.z), layernorm_value(d.w, rstd, w4.w, b4.w)),
              r.out_vec);
    }
  }
  if (t < r.s.tail) {
    const long long j = tail_col(r.s, t);
    r.out_row[j] = layernorm_value(c.tail, rstd, __ldg(r.w + j), __ldg(r.b + j));
  }
  if (t == 0) {
    *mean_out = mean;
    *rstd_out = rstd;
  }
}

/* Two streamed reads: Welford statistics, then the output. */
__device__ void layernorm_row_streamed(const LayerNormRow &r, float eps, float *mean_out,
                                       float *rstd_out, MeanM2 *scratch) {
  const float *x_body = r.x_row + r.s.head;
  MeanM2 st = mean_m2_empty();
  row_stream<2>(
      r.s, [&](long long j) { welford_add(st, __ldg(r.x_row + j)); },
      [&](long long v) { return ldg4(x_body + 4 * v); },
      [&](long long, float4 x) { welford_add4(st, x); });
  const MeanM2 tot = block_allreduce(st, mean_m2_empty(), CombineMeanM2(), scratch);
  const float mean = tot.sum / (float)r.N;
  const float var = tot.m2 / (float)r.N;
  const float rstd = 1.0f / sqrtf(var + eps);
  row_stream<2, true>(
      r.s,
      [&](long long j) {
        r.out_row[j] =
            layernorm_value(__ldg(r.x_row + j) - mean, rstd, __ldg(r.w + j), __ldg(r.b + j));
      },
      [&](long long v) { return ldg4(x_body + 4 * v); },
      [&](long long v, float4 x) {
        const long long j = r.s.head + 4 * v;
        const float4 w4 = ldg4_any(r.w + j, r.wb_vec), b4 = ldg4_any(r.b + j, r.wb_vec);
        st4_any(r.out_row + j,
                make_float4(layernorm_value(x.x - mean, rstd, w4.x, b4.x),
                            layernorm_value(x.y - mean, rstd, w4.y, b4.y),
                            layernorm_value(x.z - mean, rstd, w4.z, b4.z),
                            layernorm_value(x.w - mean, rstd, w4.w, b4.w)),
                r.out_vec);
      });
  if (threadIdx.x == 0) {
    *mean_out = mean;
    *rstd_out = rstd;
  }
}

/* ---- norm chain ----------------------------------------------------------------------- */

template <int K>
__device__ __forceinline__ void norm_chain_row_cached(float *out_row, const float *x_row,
                                                      const RowSplit &s, bool out_vec,
                                                      float *scratch) {
  RowCache<K> c;
  cache_load(c, x_row, s, true);
#pragma unroll 1
  for (int step = 0; step < 3; ++step) {
    float sum = 0.0f;
    cache_for_each(c, s, [&](float &v) { sum += v; });
    const float total = block_sum(sum, scratch);
    cache_for_each(c, s, [&](float &v) { v *= total; });
  }
  cache_store(c, out_row, s, out_vec);
}

/* A row too long for the cache is read twice, not four times: with
 * s1 = sum_j x_j, the later sums are s2 = sum_j x_j*s1 = s1^2 and
 * s3 = sum_j x_j*s1*s2 = s2^2 in exact arithmetic, so only s1 is reduced and
 * out = ((x*s1)*s2)*s3 is evaluated in the CPU's order. The result differs
 * from the literal chain by rounding only (and in the overflow case, where
 * the literal chain turns +-inf products into NaN sums). */
__device__ void norm_chain_row_streamed(float *out_row, const float *x_row, const RowSplit &s,
                                        bool out_vec, float *scratch) {
  const float *x_body = x_row + s.head;
  float sum = 0.0f;
  row_stream<2>(
      s, [&](long long j) { sum += __ldg(x_row + j); },
      [&](long long v) { return ldg4(x_body + 4 * v); },
      [&](long long, float4 x) { sum += (x.x + x.y) + (x.z + x.w); });
  const float s1 = block_sum(sum, scratch);
  const float s2 = s1 * s1, s3 = s2 * s2;
  const auto f = [=](float v) { return v * s1 * s2 * s3; };
  float *out_body = out_row + s.head;
  row_stream<2, true>(
      s, [&](long long j) { out_row[j] = f(__ldg(x_row + j)); },
      [&](long long v) { return ldg4(x_body + 4 * v); },
      [&](long long v, float4 x) { st4_any(out_body + 4 * v, map4(x, f), out_vec); });
}

/* ---- row loops ------------------------------------------------------------- */

/* Each kernel is a loop over the group's rows, built twice: kMaxK = 2 for
 * rows of up to 2*L vectors (the host's geometry gives every row up to 8192
 * floats that; 32 or 40 registers, high occupancy), and a long-row build
 * with kMaxK = 8 (4 where 8 would spill) under the full 64-register budget
 * for L = 1024, selected by the backend (fp_cuda_register_alternates_reduce).
 * Beyond the cache both stream; the long-row build then also has fewer rows
 * in flight per SM, so the reread of a row more often hits L2. */

template <int kMaxK>
__device__ __forceinline__ void softmax_rows(float *out, const float *x, long long M, long long N) {
  __shared__ float scratch[33];
  __shared__ MaxSum scratch_ms[33];
  for (long long row = blockIdx.x; row < M; row += gridDim.x) {
    const float *x_row = x + row * N;
    float *out_row = out + row * N;
    const RowSplit s = row_split(x_row, N);
    const bool out_vec = aligned16(out_row + s.head);
    if (!dispatch_cached<kMaxK>(s.nvec, [&](auto kc) {
          softmax_row_cached<decltype(kc)::value>(out_row, x_row, s, out_vec, scratch);
        }))
      softmax_row_streamed(out_row, x_row, s, out_vec, scratch_ms);
  }
}

template <int kMaxK>
__device__ __forceinline__ void double_softmax_rows(float *out, const float *x, long long M,
                                                    long long N) {
  __shared__ float scratch[33];
  __shared__ MaxSum scratch_ms[33];
  for (long long row = blockIdx.x; row < M; row += gridDim.x) {
    const float *x_row = x + row * N;
    float *out_row = out + row * N;
    const RowSplit s = row_split(x_row, N);
    const bool out_vec = aligned16(out_row + s.head);
    if (!dispatch_cached<kMaxK>(s.nvec, [&](auto kc) {
          double_softmax_row_cached<decltype(kc)::value>(out_row, x_row, s, out_vec, scratch);
        }))
      double_softmax_row_streamed(out_row, x_row, s, out_vec, scratch_ms, scratch);
  }
}

template <int kMaxK>
__device__ __forceinline__ void softmax_backward_rows(float *grad_in, const float *grad_out,
                                                      const float *y, long long M, long long N) {
  __shared__ float scratch[33];
  for (long long row = blockIdx.x; row < M; row += gridDim.x) {
    const float *g_row = grad_out + row * N, *y_row = y + row * N;
    float *gin_row = grad_in + row * N;
    const RowSplit s = row_split(y_row, N);
    const bool g_vec = aligned16(g_row + s.head);
    const bool out_vec = aligned16(gin_row + s.head);
    if (!dispatch_cached<kMaxK>(s.nvec, [&](auto kc) {
          softmax_backward_row_cached<decltype(kc)::value>(gin_row, g_row, y_row, s, g_vec, out_vec,
                                                           scratch);
        }))
      softmax_backward_row_streamed(gin_row, g_row, y_row, s, g_vec, out_vec, scratch);
  }
}

template <int kMaxK>
__device__ __forceinline__ void layernorm_rows(float *out, float *mean, float *rstd, const float *x,
                                               const float *w, const float *b, long long M,
                                               long long N, float eps) {
  __shared__ float scratch[33];
  __shared__ MeanM2 scratch_w[33];
  for (long long row = blockIdx.x; row < M; row += gridDim.x) {
    LayerNormRow r;
    r.x_row = x + row * N;
    r.out_row = out + row * N;
    r.w = w;
    r.b = b;
    r.N = N;
    r.s = row_split(r.x_row, N);
    r.out_vec = aligned16(r.out_row + r.s.head);
    r.wb_vec = aligned16(w + r.s.head) && aligned16(b + r.s.head);
    if (!dispatch_cached<kMaxK>(r.s.nvec, [&](auto kc) {
          layernorm_row_cached<decltype(kc)::value>(r, eps, mean + row, rstd + row, scratch);
        }))
      layernorm_row_streamed(r, eps, mean + row, rstd + row, scratch_w);
  }
}

template <int kMaxK>
__device__ __forceinline__ void norm_chain_rows(float *out, const float *x, long long M,
                                                long long N) {
  __shared__ float scratch[33];
  for (long long row = blockIdx.x; row < M; row += gridDim.x) {
    const float *x_row = x + row * N;
    float *out_row = out + row * N;
    const RowSplit s = row_split(x_row, N);
    const bool out_vec = aligned16(out_row + s.head);
    if (!dispatch_cached<kMaxK>(s.nvec, [&](auto kc) {
          norm_chain_row_cached<decltype(kc)::value>(out_row, x_row, s, out_vec, scratch);
        }))
      norm_chain_row_streamed(out_row, x_row, s, out_vec, scratch);
  }
}

/* The long-row builds pay off once a row has more than 2*L vectors. */
bool rows_longer_than_cache(long long N, const fp_ndrange *nd) {
  return N / 4 > 2 * (long long)nd->local[0];
}
bool softmax_wants_long(const fp_karg *args, const fp_ndrange *nd) { /* (out, x, M, N) */
  return rows_longer_than_cache(args[3].v.i64, nd);
}
bool softmax_backward_wants_long(const fp_karg *args, const fp_ndrange *nd) { /* (.., M, N) */
  return rows_longer_than_cache(args[4].v.i64, nd);
}
bool layernorm_wants_long(const fp_karg *args, const fp_ndrange *nd) { /* (.., M, N, eps) */
  return rows_longer_than_cache(args[7].v.i64, nd);
}

} // namespace

/* ---- kernels ----------------------------------------------------------------- */

/* softmax_fused(out, x, M, N)                                         ROWS */
static __global__ void __maxnreg__(32)
    softmax_fused(float *out, const float *x, long long M, long long N) {
  softmax_rows<2>(out, x, M, N);
}
static __global__ void __launch_bounds__(kMaxBlock, 1)
    softmax_fused_long_rows(float *out, const float *x, long long M, long long N) {
  softmax_rows<8>(out, x, M, N);
}

/* double_softmax_fused(out, x, M, N): softmax(softmax(x))              ROWS */
static __global__ void __maxnreg__(32)
    double_softmax_fused(float *out, const float *x, long long M, long long N) {
  double_softmax_rows<2>(out, x, M, N);
}
/* Its 8-vector cache spills on sm_80/86 (not on sm_90): 4 there. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define FPCU_DOUBLE_SOFTMAX_LONG_K 4
#else
#define FPCU_DOUBLE_SOFTMAX_LONG_K 8
#endif
static __global__ void __launch_bounds__(kMaxBlock, 1)
    double_softmax_fused_long_rows(float *out, const float *x, long long M, long long N) {
  double_softmax_rows<FPCU_DOUBLE_SOFTMAX_LONG_K>(out, x, M, N);
}

/* softmax_backward_fused(grad_in, grad_out, y, M, N)                   ROWS */
static __global__ void __maxnreg__(40)
    softmax_backward_fused(float *grad_in, const float *grad_out, const float *y, long long M,
                           long long N) {
  softmax_backward_rows<2>(grad_in, grad_out, y, M, N);
}
static __global__ void __launch_bounds__(kMaxBlock, 1)
    softmax_backward_fused_long_rows(float *grad_in, const float *grad_out, const float *y,
                                     long long M, long long N) {
  softmax_backward_rows<4>(grad_in, grad_out, y, M, N);
}

/* layernorm_fused(out, mean, rstd, x, w, b, M, N, eps)                  ROWS */
static __global__ void __maxnreg__(40)
    layernorm_fused(float *out, float *mean, float *rstd, const float *x, const float *w,
                    const float *b, long long M, long long N, float eps) {
  layernorm_rows<2>(out, mean, rstd, x, w, b, M, N, eps);
}
static __global__ void __launch_bounds__(kMaxBlock, 1)
    layernorm_fused_long_rows(float *out, float *mean, float *rstd, const float *x, const float *w,
                              const float *b, long long M, long long N, float eps) {
  layernorm_rows<4>(out, mean, rstd, x, w, b, M, N, eps);
}

/* norm_chain_fused(out, x, M, N): three times s = sum_j(x); x = x*s.     ROWS */
static __global__ void __maxnreg__(32)
    norm_chain_fused(float *out, const float *x, long long M, long long N) {
  norm_chain_rows<2>(out, x, M, N);
}
static __global__ void __launch_bounds__(kMaxBlock, 1)
    norm_chain_fused_long_rows(float *out, const float *x, long long M, long long N) {
  norm_chain_rows<8>(out, x, M, N);
}

extern "C" void fp_cuda_register_reduce(const void *table[FPK_COUNT]) {
  table[FPK_softmax_fused] = reinterpret_cast<const void *>(&softmax_fused);
  table[FPK_double_softmax_fused] = reinterpret_cast<const void *>(&double_softmax_fused);
  table[FPK_softmax_backward_fused] = reinterpret_cast<const void *>(&softmax_backward_fused);
  table[FPK_layernorm_fused] = reinterpret_cast<const void *>(&layernorm_fused);
  table[FPK_norm_chain_fused] = reinterpret_cast<const void *>(&norm_chain_fused);
}

extern "C" void fp_cuda_register_alternates_reduce(fp_cuda_alternate table[FPK_COUNT]) {
  const fp_cuda_alternate softmax = {reinterpret_cast<const void *>(&softmax_fused_long_rows),
                                     softmax_wants_long};
  const fp_cuda_alternate double_softmax = {
      reinterpret_cast<const void *>(&double_softmax_fused_long_rows), softmax_wants_long};
  const fp_cuda_alternate backward = {
      reinterpret_cast<const void *>(&softmax_backward_fused_long_rows),
      softmax_backward_wants_long};
  const fp_cuda_alternate layernorm = {reinterpret_cast<const void *>(&layernorm_fused_long_rows),
                                       layernorm_wants_long};
  const fp_cuda_alternate norm_chain = {reinterpret_cast<const void *>(&norm_chain_fused_long_rows),
                                        softmax_wants_long};
  table[FPK_softmax_fused] = softmax;
  table[FPK_double_softmax_fused] = double_softmax;
  table[FPK_softmax_backward_fused] = backward;
  table[FPK_layernorm_fused] = layernorm;
  table[FPK_norm_chain_fused] = norm_chain;
}
