/* fuseport CUDA kernels, family reduce: fused row reductions, all ROWS
 * geometry over contiguous row-major [M, N]. Semantics: kernels/kernels.def;
 * reference: kernels/cpu/reduce.c.
 *
 * Each row algorithm is written once over a team (fpcu::BlockTeam,
 * WarpTeam, ClusterTeam in device_common.cuh): the threads that hold one row,
 * each keeping its part in registers (fpcu::RowCache), so that a row is
 * read from global memory exactly once and every later pass runs on chip.
 * The registered build is a block per row (the ROWS convention: group g
 * handles rows g, g+G, ...) caching up to 2*L float4 (8192 floats at L =
 * 1024); the other builds are listed with the kernels below. Rows longer
 * than a block build's cache are streamed: the statistics are gathered in
 * one read (online max/sum for softmax, Welford for layernorm) and the
 * output written in a second, which for rows of up to ~128 KiB mostly hits
 * L2 (the rows in flight on all SMs fit in it).
 *
 * Registers: the registered build's cache is capped at two vectors per
 * thread so that it fits in 32 registers (40 for the two with more
 * operands) without spills, i.e. 2048 (1536) resident threads per SM: short
 * rows need many rows in flight per SM to keep the memory busy, which a
 * deeper cache at 64 registers (half the threads) would cost. __maxnreg__
 * rather than __launch_bounds__(1024): the cap already lets 1024-thread
 * blocks launch.
 *
 * Team reductions: warp shuffles, then one slot per warp in shared memory
 * (fpcu::block_allreduce), then for a cluster one exchange through
 * distributed shared memory. NaN follows PyTorch: a NaN in a row makes the
 * max NaN and with it the whole softmax row; a row of -inf gives NaN.
 */
#include "device_common.cuh"

using namespace fpcu;

namespace {

/* ---- exp ------------------------------------------------------------------- */

/* exp by the hardware's exp2 (__expf: one multiply and ex2.approx, which
 * flushes denormal results to 0) instead of expf's range reduction around
 * it, as Triton's tl.exp in torch.compile's kernels: relative error about
 * 2^-22 + |x| * 6e-8, within the ops' 1e-4 (below 6e-6 for |x| < 88; lower
 * arguments give 0 either way, but for denormals); measured max_rel 6e-7
 * for softmax, 2e-7 for double_softmax (H100, `fuseport check`, 30 seeds).
 * Used where rows are streamed, which their exps bound rather than their
 * memory: double_softmax evaluated five per element there (three passes;
 * three exps and two passes since its power sums, below), and took 0.93-0.94 of its time with them
 * (4096 x 32768 564 -> 527 us, 2048 x 65536 565 -> 531, 1024 x 65536 299 -> 278; H100, 2026-11-24,
 * three alternating rounds, 120e041:docs/results/2026-11-24-h100-fastexp/),
 * softmax 0.99 (2048 x 65536 465 -> 459). The cached rows, memory-bound,
 * keep expf: there it bought nothing (double_softmax 4096 x 16384 200 ->
 * 201 us). */
__device__ __forceinline__ float fast_exp(float x) { return __expf(x); }

/* ---- online softmax statistics -------------------------------------------- */

/* Running max m (NaN-aware) and s = sum of exp(x - m) over the values seen
 * (fast_exp: these statistics are gathered only from streamed rows).
 * s is exact (up to rounding) whenever the row's max ends up finite; when it
 * is NaN or +-inf the row's softmax is NaN anyway (softmax_inv), so s may
 * then be anything. The empty state is (-inf, 0). */
struct MaxSum {
  float m, s;
};

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
  if (m != st.m) {              /* also true when m is NaN */
    st.s *= fast_exp(st.m - m); /* st.m == -inf: exp(-inf) = 0, and st.s is 0 */
    st.m = m;
  }
}

__device__ __forceinline__ void online_add(MaxSum &st, float x) {
  online_rescale(st, fp_maximum(st.m, x));
  if (st.m != -CUDART_INF_F) /* only -inf seen so far: x is -inf, adds 0 */
    st.s += fast_exp(x - st.m);
}

__device__ __forceinline__ void online_add4(MaxSum &st, float4 x) {
  online_rescale(st, fp_maximum(st.m, fp_maximum(fp_maximum(x.x, x.y), fp_maximum(x.z, x.w))));
  if (st.m != -CUDART_INF_F)
    st.s += (fast_exp(x.x - st.m) + fast_exp(x.y - st.m)) +
            (fast_exp(x.z - st.m) + fast_exp(x.w - st.m));
}

/* 1/sum of a row's statistics; NaN when the max is not finite (a NaN, a
 * +inf, or a row of -inf), as exp(x - max) then has a NaN term. */
__device__ __forceinline__ float softmax_inv(MaxSum t) {
  return 1.0f / (isfinite(t.m) ? t.s : CUDART_NAN_F);
}

/* A row's statistics in one streamed read, U float4 loads in flight per
 * thread: add(st, x) for each head and tail element, add4(st, x) for each
 * vector, then the block's combine from `empty`; the vectors that fit are
 * kept in shared memory (SmemRow). */
template <int U, class State, class Add, class Add4, class Combine, class Smem>
__device__ __forceinline__ State row_stream_stats(const float *x_row, const RowSplit &s,
                                                  const Smem &smem, State empty, Add add, Add4 add4,
                                                  Combine combine) {
  State st = empty;
  const float *body = x_row + s.head;
  row_stream<U>(
      s, [&](long long j) { add(st, __ldg(x_row + j)); },
      [&](long long v) { return ldg4(body + 4 * v); },
      [&](long long v, float4 x) {
        smem.keep(v, x);
        add4(st, x);
      });
  return block_allreduce(st, empty, combine);
}

/* (max, sum) of a row in one streamed read. */
template <int U, class Smem>
__device__ MaxSum row_max_sum(const float *x_row, const RowSplit &s, const Smem &smem) {
  return row_stream_stats<U>(
      x_row, s, smem, max_sum_empty(), [](MaxSum &st, float x) { online_add(st, x); },
      [](MaxSum &st, float4 x) { online_add4(st, x); }, CombineMaxSum());
}

/* ---- the power sums of double_softmax's first softmax ----------------------
 *
 * A streamed double_softmax row's first pass also gathers the power sums
 * p_k = sum_j e_j^k, k = 1..3, of e_j = exp(x_j - m) (p_1 is MaxSum's s).
 * With y = 1/p_1, the first softmax is s_j = e_j * y, in [0, y], and the
 * second one's sum follows without another read of the row:
 *   S = sum_j exp(s_j) = N + y p_1 + y^2 p_2/2 + y^3 p_3/6 + R,
 * every term positive (no cancellation), and the remainder
 *   R = sum_j sum_{k>=4} s_j^k/k! <= sum_j s_j^4 e/4! <= e y^3/24,
 * as s_j <= y <= 1 and sum_j s_j = 1. Against S >= N that is a relative
 * error of at most e y^3/(24 N): the series is used where that is under
 * 2^-24 (half a float's ulp; y <= 0.26 at N = 32768, i.e. p_1 >= 3.9, and
 * a row of random values has p_1 in the hundreds), and the row otherwise
 * takes a second read that sums exp(s_j - y) directly, as does a row whose
 * softmax is NaN (y NaN fails the test). Two reads and three exps per
 * element instead of three reads and five: on an H100 (2026-11-25, three
 * alternating rounds, 120e041:docs/results/2026-11-25-h100-series/) 1.12-1.26x on
 * every streamed cell of N >= 20001 (4096 x 32768 468 -> 410 us, bw 0.80
 * -> 0.92; 8192 x 65536 1820 -> 1619; 256 x 65536 70.6 -> 58.5). Four
 * floats: the size of a block reduction's slot (kMaxReduceBytes). */
struct MaxPowers {
  float m, p1, p2, p3;
};

struct CombineMaxPowers {
  __device__ __forceinline__ MaxPowers operator()(MaxPowers a, MaxPowers b) const {
    MaxPowers r;
    r.m = fp_maximum(a.m, b.m);
    /* as CombineMaxSum: a partial whose max is the overall one keeps its sums */
    const float fa = a.m == r.m ? 1.0f : expf(a.m - r.m);
    const float fb = b.m == r.m ? 1.0f : expf(b.m - r.m);
    const float fa2 = fa * fa, fb2 = fb * fb;
    r.p1 = a.p1 * fa + b.p1 * fb;
    r.p2 = a.p2 * fa2 + b.p2 * fb2;
    r.p3 = a.p3 * (fa2 * fa) + b.p3 * (fb2 * fb);
    return r;
  }
};

__device__ __forceinline__ MaxPowers max_powers_empty() {
  MaxPowers e;
  e.m = -CUDART_INF_F;
  e.p1 = e.p2 = e.p3 = 0.0f;
  return e;
}

/* Moves the running max to m (>= st.m, or NaN): p_k scales by r^k. */
__device__ __forceinline__ void powers_rescale(MaxPowers &st, float m) {
  if (m != st.m) {
    const float r = fast_exp(st.m - m), r2 = r * r;
    st.p1 *= r;
    st.p2 *= r2;
    st.p3 *= r2 * r;
    st.m = m;
  }
}

__device__ __forceinline__ void powers_add(MaxPowers &st, float x) {
  powers_rescale(st, fp_maximum(st.m, x));
  if (st.m != -CUDART_INF_F) {
    const float e = fast_exp(x - st.m), e2 = e * e;
    st.p1 += e;
    st.p2 += e2;
    st.p3 += e2 * e;
  }
}

__device__ __forceinline__ void powers_add4(MaxPowers &st, float4 x) {
  powers_rescale(st, fp_maximum(st.m, fp_maximum(fp_maximum(x.x, x.y), fp_maximum(x.z, x.w))));
  if (st.m != -CUDART_INF_F) {
    const float4 e = make_float4(fast_exp(x.x - st.m), fast_exp(x.y - st.m), fast_exp(x.z - st.m),
                                 fast_exp(x.w - st.m));
    const float4 e2 = make_float4(e.x * e.x, e.y * e.y, e.z * e.z, e.w * e.w);
    st.p1 += (e.x + e.y) + (e.z + e.w);
    st.p2 += (e2.x + e2.y) + (e2.z + e2.w);
    st.p3 += (e2.x * e.x + e2.y * e.y) + (e2.z * e.z + e2.w * e.w);
  }
}

/* (max, power sums) of a row in one streamed read. */
template <int U, class Smem>
__device__ MaxPowers row_max_powers(const float *x_row, const RowSplit &s, const Smem &smem) {
  return row_stream_stats<U>(
      x_row, s, smem, max_powers_empty(), [](MaxPowers &st, float x) { powers_add(st, x); },
      [](MaxPowers &st, float4 x) { powers_add4(st, x); }, CombineMaxPowers());
}

/* 1/sum_j exp(s_j - y), the second softmax's sum shifted by its max y =
 * 1/p_1, from the power sums of a row of n values; 0 where the series'
 * remainder may exceed 2^-24 of the sum, or y is NaN: the caller then sums
 * the exps itself. */
__device__ __forceinline__ float second_inv_from_powers(const MaxPowers &t, float y, long long n) {
  const float y2 = y * y, y3 = y2 * y;
  if (!(y3 * (2.7182818f / 24.0f) <= (float)n * 0x1p-24f))
    return 0.0f;
  const float series = (y3 * t.p3 * (1.0f / 6.0f) + y2 * t.p2 * 0.5f) + y * t.p1;
  return expf(y) / ((float)n + series); /* 1/(exp(-y) S) */
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

/* Softmax of the cached part in place: exp(x - max) / sum, PyTorch's form.
 * Returns 1/sum (the largest output value; NaN for a non-finite row).
 * after_first_reduce() runs once the cache has been read and reduced (the
 * row loop then reuses the stage, see RowStage). */
template <int K, class Team, class Hook>
__device__ __forceinline__ float softmax_in_cache(const Team &team, RowCache<K> &c,
                                                  const RowPart &p, Hook &&after_first_reduce) {
  float m = -CUDART_INF_F;
  cache_for_each(team, c, p, [&](float &v) { m = fp_maximum(m, v); });
  m = team.allreduce(m, -CUDART_INF_F, MaxOp());
  after_first_reduce();
  float sum = 0.0f;
  cache_for_each(team, c, p, [&](float &v) {
    v = expf(v - m);
    sum += v;
  });
  const float inv = 1.0f / team.allreduce(sum, 0.0f, SumOp());
  cache_for_each(team, c, p, [&](float &v) { v *= inv; });
  return inv;
}

/* The cached row functions take the row's staged slots (nullptr: load
 * from global) and the hook that starts staging the next row. */
template <int K, class Team, class Hook>
__device__ __forceinline__ void
softmax_row_cached(const Team &team, float *out_row, const float *x_row, const RowPart &p,
                   bool out_vec, const float4 *staged, Hook &&after_first_reduce) {
  RowCache<K> c;
  cache_load(team, c, x_row, p, true, staged);
  softmax_in_cache(team, c, p, after_first_reduce);
  cache_store(team, c, out_row, p, out_vec);
}

/* The streamed rows' passes keep U1 (the first) and U2 (the later ones)
 * float4 loads in flight per thread: 2 in the long-row build, whose
 * register cache leaves no room for more; more in the streaming build (see
 * kStreamU1 below). kSmem: the streaming build, whose later passes read
 * what of the row its shared memory holds from there (SmemRow). */
template <int U1, int U2, bool kSmem>
__device__ void softmax_row_streamed(float *out_row, const float *x_row, const RowSplit &s,
                                     bool out_vec) {
  const SmemRow<kSmem> smem(s.nvec);
  const MaxSum t = row_max_sum<U1>(x_row, s, smem);
  const float m = t.m, inv = softmax_inv(t);
  const auto f = [=](float v) { return fast_exp(v - m) * inv; };
  const float *x_body = x_row + s.head;
  const auto load_x = [&](long long v) { return smem.load(v, x_body); };
  float *out_body = out_row + s.head;
  row_stream<U2, true>(
      s, [&](long long j) { out_row[j] = f(__ldg(x_row + j)); }, load_x,
      [&](long long v, float4 x) { st4_any(out_body + 4 * v, map4(x, f), out_vec); });
}

/* ---- double softmax ----------------------------------------------------------- */

/* The power sums alone (the max is known): a team reduction's value. */
struct Powers {
  float p1, p2, p3;
};

/* The second softmax runs on y = softmax(x), whose max is 1/sum exactly
 * (exp(0) = 1 at the max element, exp(.) <= 1 elsewhere), so it is shifted by
 * that value without another max reduction: y - 1/sum lies in [-1, 0]. (Any
 * shift gives the same softmax; the max only keeps exp in range.)
 *
 * A cached row. kSeries: its max, then e = exp(x - max) in place with the
 * power sums in one team reduction, and where the series holds
 * (second_inv_from_powers) the output in one more pass over the cache: two
 * team reductions per row instead of three (max, sum, second sum). Only
 * the cluster build takes it: there a reduction is an exchange between
 * blocks, and on an H100 (2026-11-25, three alternating rounds,
 * 120e041:docs/results/2026-11-25-h100-series/r39-ds-cached/) 8 x 131072 went
 * 16.4 -> 14.8 us, 16 x 65536 15.1 -> 13.7; the block builds lost 1-5%
 * with it on cells of 16-256 MiB (more registers and work per element
 * against a block reduction's barrier pair). Without it, or for a peaked
 * row, the second softmax's sum is a third reduction. */
template <int K, bool kSeries, class Team, class Hook>
__device__ __forceinline__ void
double_softmax_row_cached(const Team &team, float *out_row, const float *x_row, const RowPart &p,
                          bool out_vec, const float4 *staged, Hook &&after_first_reduce) {
  RowCache<K> c;
  cache_load(team, c, x_row, p, true, staged);
  float inv = 0.0f, y_max;
  if constexpr (kSeries) {
    float m = -CUDART_INF_F;
    cache_for_each(team, c, p, [&](float &v) { m = fp_maximum(m, v); });
    m = team.allreduce(m, -CUDART_INF_F, MaxOp());
    after_first_reduce();
    Powers mine;
    mine.p1 = mine.p2 = mine.p3 = 0.0f;
    cache_for_each(team, c, p, [&](float &v) {
      v = expf(v - m);
      const float v2 = v * v;
      mine.p1 += v;
      mine.p2 += v2;
      mine.p3 += v2 * v;
    });
    Powers zero;
    zero.p1 = zero.p2 = zero.p3 = 0.0f;
    const Powers sums = team.allreduce(mine, zero, [](Powers a, Powers b) {
      Powers r;
      r.p1 = a.p1 + b.p1;
      r.p2 = a.p2 + b.p2;
      r.p3 = a.p3 + b.p3;
      return r;
    });
    MaxPowers t;
    t.m = m;
    t.p1 = sums.p1;
    t.p2 = sums.p2;
    t.p3 = sums.p3;
    MaxSum ms;
    ms.m = m;
    ms.s = sums.p1;
    y_max = softmax_inv(ms);
    inv = second_inv_from_powers(t, y_max, p.s.head + 4 * p.s.nvec + p.s.tail);
    if (inv > 0.0f) {
      cache_for_each(team, c, p, [&](float &v) { v = expf(v * y_max - y_max) * inv; });
      cache_store(team, c, out_row, p, out_vec);
      return;
    }
    cache_for_each(team, c, p, [&](float &v) { v *= y_max; });
  } else {
    y_max = softmax_in_cache(team, c, p, after_first_reduce);
  }
  float sum = 0.0f;
  cache_for_each(team, c, p, [&](float &v) {
    v = expf(v - y_max);
    sum += v;
  });
  inv = 1.0f / team.allreduce(sum, 0.0f, SumOp());
  cache_for_each(team, c, p, [&](float &v) { v *= inv; });
  cache_store(team, c, out_row, p, out_vec);
}

/* Two streamed reads where the first softmax's power sums give the second
 * one's sum (second_inv_from_powers): the statistics of x, then the output,
 * backwards (the end of the row is the most recently read). Otherwise
 * three, alternately forwards and backwards: then the second read sums the
 * second softmax's exps. y = softmax(x) is recomputed rather than stored
 * and reread. */
template <int U1, int U2, bool kSmem, bool kSeries>
__device__ void double_softmax_row_streamed(float *out_row, const float *x_row, const RowSplit &s,
                                            bool out_vec) {
  const SmemRow<kSmem> smem(s.nvec);
  MaxPowers t;
  if constexpr (kSeries) {
    t = row_max_powers<U1>(x_row, s, smem);
  } else {
    const MaxSum ms = row_max_sum<U1>(x_row, s, smem);
    t = max_powers_empty();
    t.m = ms.m;
    t.p1 = ms.s;
  }
  MaxSum ms;
  ms.m = t.m;
  ms.s = t.p1;
  const float m = t.m, y_max = softmax_inv(ms);
  const auto second_exp = [=](float v) { return fast_exp(fast_exp(v - m) * y_max - y_max); };
  const float *x_body = x_row + s.head;
  const auto load_x = [&](long long v) { return smem.load(v, x_body); };
  float *out_body = out_row + s.head;
  const long long n = s.head + 4 * s.nvec + s.tail;
  float inv = kSeries ? second_inv_from_powers(t, y_max, n) : 0.0f;
  if (inv > 0.0f) {
    const auto f = [=](float v) { return second_exp(v) * inv; };
    row_stream<U2, true>(
        s, [&](long long j) { out_row[j] = f(__ldg(x_row + j)); }, load_x,
        [&](long long v, float4 x) { st4_any(out_body + 4 * v, map4(x, f), out_vec); });
    return;
  }
  float sum = 0.0f;
  row_stream<U2, true>(
      s, [&](long long j) { sum += second_exp(__ldg(x_row + j)); }, load_x,
      [&](long long, float4 x) {
        const float4 e = map4(x, second_exp);
        sum += (e.x + e.y) + (e.z + e.w);
      });
  inv = 1.0f / block_sum(sum);
  const auto f = [=](float v) { return second_exp(v) * inv; };
  row_stream<U2>(
      s, [&](long long j) { out_row[j] = f(__ldg(x_row + j)); }, load_x,
      [&](long long v, float4 x) { st4_any(out_body + 4 * v, map4(x, f), out_vec); });
}

/* ---- softmax backward ------------------------------------------------------------ */

struct GradPair {
  float4 g, y;
};

/* grad_in = y * (g - sum_j g*y); both rows cached (g staged only where it
 * shares y's split). */
template <int K, class Team, class Hook>
__device__ __forceinline__ void
softmax_backward_row_cached(const Team &team, float *gin_row, const float *g_row,
                            const float *y_row, const RowPart &p, bool g_vec, bool out_vec,
                            const float4 *y_staged, const float4 *g_staged,
                            Hook &&after_first_reduce) {
  RowCache<K> y, g;
  cache_load(team, y, y_row, p, true, y_staged);
  cache_load(team, g, g_row, p, g_vec, g_vec ? g_staged : nullptr);
  float dot = 0.0f;
  cache_for_each2(team, y, g, p, [&](float &yv, float &gv) { dot += gv * yv; });
  dot = team.allreduce(dot, 0.0f, SumOp());
  after_first_reduce();
  cache_for_each2(team, y, g, p, [&](float &yv, float &gv) { yv = yv * (gv - dot); });
  cache_store(team, y, gin_row, p, out_vec);
}

/* Its rows stay out of shared memory (SmemRow): two of them, so it would
 * hold under half of each row of 50000 floats or more, about what L1 keeps
 * of them anyway, and the copies cost time: on an H100 (2026-11-25, three
 * alternating rounds, 120e041:docs/results/2026-11-25-h100-smem/) 64 x 65536 took
 * 28.4 us without and 31.5 us with, 100 x 65536 43.1 and 41.1. */
template <int U1, int U2>
__device__ void softmax_backward_row_streamed(float *gin_row, const float *g_row,
                                              const float *y_row, const RowSplit &s, bool g_vec,
                                              bool out_vec) {
  const float *g_body = g_row + s.head, *y_body = y_row + s.head;
  const auto load_pair = [&](long long v) {
    GradPair p;
    p.g = ldg4_any(g_body + 4 * v, g_vec);
    p.y = ldg4(y_body + 4 * v);
    return p;
  };
  float dot = 0.0f;
  row_stream<U1>(
      s, [&](long long j) { dot += __ldg(g_row + j) * __ldg(y_row + j); }, load_pair,
      [&](long long, const GradPair &p) {
        dot += (p.g.x * p.y.x + p.g.y * p.y.y) + (p.g.z * p.y.z + p.g.w * p.y.w);
      });
  dot = block_sum(dot);
  const auto f = [=](float gv, float yv) { return yv * (gv - dot); };
  float *gin_body = gin_row + s.head;
  row_stream<U2, true>(
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
  bool x_keep;  /* x fits in about an L2: its streamed loads may be evict_last */
};

/* Streamed layernorm rows read x twice. Marked evict_last, the first pass's
 * lines stay for the second where x fits in L2, and crowd it where it does
 * not: on an H100 (2026-11-24, 120e041:docs/results/2026-11-24-h100-evict-last/
 * layernorm-nc/, three rounds) 128 x 65536 (32 MiB) took 36.5 us with
 * evict_last and 39.7 without, 4096 x 32768 (512 MiB) 522 and 452. Up to
 * 32 MiB (below the L2 of an A100 or an H100) x is loaded evict_last, beyond
 * it not (layernorm/: 128 x 65536 36.6 us, 4096 x 32768 449). */
constexpr long long kLayerNormKeepFloats = 1LL << 23;

/* out = (x - mean) * rstd * w[j] + b[j], CPU evaluation order. */
__device__ __forceinline__ float layernorm_value(float centred, float rstd, float w, float b) {
  return centred * rstd * w + b;
}

template <int K, class Team, class Hook>
__device__ __forceinline__ void layernorm_row_cached(const Team &team, const LayerNormRow &r,
                                                     const RowPart &p, float eps, float *mean_out,
                                                     float *rstd_out, const float4 *staged,
                                                     Hook &&after_first_reduce) {
  RowCache<K> c;
  cache_load(team, c, r.x_row, p, true, staged);
  float sum = 0.0f;
  cache_for_each(team, c, p, [&](float &v) { sum += v; });
  const float mean = team.allreduce(sum, 0.0f, SumOp()) / (float)r.N;
  after_first_reduce();
  /* Two passes on the cached row: the centred sum of squares does not cancel
   * as E[x^2] - E[x]^2 would. */
  float sq = 0.0f;
  cache_for_each(team, c, p, [&](float &v) {
    v -= mean;
    sq += v * v;
  });
  const float var = team.allreduce(sq, 0.0f, SumOp()) / (float)r.N;
  const float rstd = 1.0f / sqrtf(var + eps);

  const int t = team.rank();
  if (has_head_elem(team, p))
    r.out_row[t] = layernorm_value(c.head, rstd, __ldg(r.w + t), __ldg(r.b + t));
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (slot_valid(team, p, k)) {
      const long long j = r.s.head + 4 * slot_vector(team, p, k);
      const float4 w4 = ldg4_any(r.w + j, r.wb_vec), b4 = ldg4_any(r.b + j, r.wb_vec);
      const float4 d = c.v[k];
      st4_any(r.out_row + j,
              make_float4(
                  layernorm_value(d.x, rstd, w4.x, b4.x), layernorm_value(d.y, rstd, w4.y, b4.y),
                  layernorm_value(d.z, rstd, w4.z, b4.z), layernorm_value(d.w, rstd, w4.w, b4.w)),
              r.out_vec);
    }
  }
  if (has_tail_elem(team, p)) {
    const long long j = tail_col(r.s, t);
    r.out_row[j] = layernorm_value(c.tail, rstd, __ldg(r.w + j), __ldg(r.b + j));
  }
  if (team.leader()) {
    *mean_out = mean;
    *rstd_out = rstd;
  }
}

/* Two streamed reads: Welford statistics, then the output. The second pass
 * reads w and b past L1 (ldg4_l1skip), which leaves more of L1 to the
 * row's lines for its reread: on an H100 (2026-11-24, three alternating
 * rounds, 120e041:docs/results/2026-11-24-h100-fastexp/) 256 x 32768 38.9 ->
 * 37.3 us, 128 x 65536 37.1 -> 36.0, 0.3-1.5% on larger cells. (The row's
 * own loads past L1 instead cost 10-27%: 4096 x 32768 450 -> 569 us.) */
template <int U1, int U2, bool kSmem>
__device__ void layernorm_row_streamed(const LayerNormRow &r, float eps, float *mean_out,
                                       float *rstd_out) {
  const SmemRow<kSmem> smem(r.s.nvec);
  const float *x_body = r.x_row + r.s.head;
  const auto load_x = [&](long long v) {
    return r.x_keep ? ldg4(x_body + 4 * v) : ldg4_nc(x_body + 4 * v);
  };
  MeanM2 st = mean_m2_empty();
  row_stream<U1>(
      r.s, [&](long long j) { welford_add(st, __ldg(r.x_row + j)); }, load_x,
      [&](long long v, float4 x) {
        smem.keep(v, x);
        welford_add4(st, x);
      });
  const MeanM2 tot = block_allreduce(st, mean_m2_empty(), CombineMeanM2());
  const float mean = tot.sum / (float)r.N;
  const float var = tot.m2 / (float)r.N;
  const float rstd = 1.0f / sqrtf(var + eps);
  row_stream<U2, true>(
      r.s,
      [&](long long j) {
        r.out_row[j] =
            layernorm_value(__ldg(r.x_row + j) - mean, rstd, __ldg(r.w + j), __ldg(r.b + j));
      },
      [&](long long v) { return smem.load(v, load_x); },
      [&](long long v, float4 x) {
        const long long j = r.s.head + 4 * v;
        const float4 w4 = r.wb_vec ? ldg4_l1skip(r.w + j) : ldg4_any(r.w + j, false);
        const float4 b4 = r.wb_vec ? ldg4_l1skip(r.b + j) : ldg4_any(r.b + j, false);
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

template <int K, class Team, class Hook>
__device__ __forceinline__ void
norm_chain_row_cached(const Team &team, float *out_row, const float *x_row, const RowPart &p,
                      bool out_vec, const float4 *staged, Hook &&after_first_reduce) {
  RowCache<K> c;
  cache_load(team, c, x_row, p, true, staged);
#pragma unroll 1
  for (int step = 0; step < 3; ++step) {
    float sum = 0.0f;
    cache_for_each(team, c, p, [&](float &v) { sum += v; });
    const float total = team.allreduce(sum, 0.0f, SumOp());
    if (step == 0)
      after_first_reduce();
    cache_for_each(team, c, p, [&](float &v) { v *= total; });
  }
  cache_store(team, c, out_row, p, out_vec);
}

/* A row too long for the cache is read twice, not four times: with
 * s1 = sum_j x_j, the later sums are s2 = sum_j x_j*s1 = s1^2 and
 * s3 = sum_j x_j*s1*s2 = s2^2 in exact arithmetic, so only s1 is reduced and
 * out = ((x*s1)*s2)*s3 is evaluated in the CPU's order. The result differs
 * from the literal chain by rounding only (and in the overflow case, where
 * the literal chain turns +-inf products into NaN sums). */
template <int U1, int U2, bool kSmem>
__device__ void norm_chain_row_streamed(float *out_row, const float *x_row, const RowSplit &s,
                                        bool out_vec) {
  const SmemRow<kSmem> smem(s.nvec);
  const float *x_body = x_row + s.head;
  float sum = 0.0f;
  row_stream<U1>(
      s, [&](long long j) { sum += __ldg(x_row + j); },
      [&](long long v) { return ldg4(x_body + 4 * v); },
      [&](long long v, float4 x) {
        smem.keep(v, x);
        sum += (x.x + x.y) + (x.z + x.w);
      });
  const float s1 = block_sum(sum);
  const float s2 = s1 * s1, s3 = s2 * s2;
  const auto f = [=](float v) { return v * s1 * s2 * s3; };
  float *out_body = out_row + s.head;
  row_stream<U2, true>(
      s, [&](long long j) { out_row[j] = f(__ldg(x_row + j)); },
      [&](long long v) { return smem.load(v, x_body); },
      [&](long long v, float4 x) { st4_any(out_body + 4 * v, map4(x, f), out_vec); });
}

/* ---- row loops ------------------------------------------------------------- */

/* A row whose part the team cannot cache: a block streams it; warp and
 * cluster builds are launched only for rows their cache holds (the
 * planner's precondition), so this is unreachable for them, and a trap
 * rather than a wrong result if the planner were ever wrong. next(): the
 * row loop's hook, called once the row is done. */
template <class F, class Next>
__device__ __forceinline__ void stream_row(const BlockTeam &, F f, Next &&next) {
  f();
  next();
}
template <class Team, class F, class Next>
__device__ __forceinline__ void stream_row(const Team &, F, Next &&) {
  __trap();
}

/* Row arrays each kernel's long-row build stages (RowStage; 0: none, the
 * code compiled out), in its row loop and in its offer to the planner
 * (FPCU_ROW_BUILDS below, where the measurements are). */
constexpr int kStageSoftmax = 0, kStageDoubleSoftmax = 1, kStageSoftmaxBackward = 0,
              kStageLayerNorm = 0, kStageNormChain = 0;

/* The row loop of every build: rows first_row(), first_row() + row_step(),
 * ... below M. With a RowStage on (the long-row build launched with its
 * dynamic shared memory), the first row is staged before the loop and each
 * row's body calls next() exactly once, as soon as its stage has been read,
 * to stage the next row while it reduces and writes this one (a stage is
 * on only where every row is cached; the streamed path calls next() too,
 * after the row). stage_row(row) copies a row's arrays into the stage. */
template <class Team, class Stage, class StageRow, class Body>
__device__ __forceinline__ void row_loop(const Team &team, long long M, const Stage &stage,
                                         StageRow stage_row, Body body) {
  long long row = team.first_row();
  if (stage.on() && row < M) {
    stage_row(row);
    stage.commit();
  }
  for (; row < M; row += team.row_step()) {
    stage.wait();
    body(row, [&]() {
      const long long next = row + team.row_step();
      if (stage.on() && next < M) {
        stage_row(next);
        stage.commit();
      }
    });
  }
}

/* The rows of the kernels that map a row of x to a row of out (softmax,
 * double_softmax, norm_chain): cached(kc, out_row, x_row, p, out_vec,
 * staged, next) for a row the team caches (kc: the cache depth, an
 * integral_constant), streamed(out_row, x_row, split, out_vec) otherwise. */
template <int kMaxK, int kStageRows, class Team, class Cached, class Streamed>
__device__ __forceinline__ void map_rows(const Team &team, float *out, const float *x, long long M,
                                         long long N, Cached cached, Streamed streamed) {
  const RowStage<kMaxK, kStageRows, Team> stage(team, N);
  row_loop(
      team, M, stage, [&](long long row) { stage.copy(0, x + row * N, N); },
      [&](long long row, auto &&next) {
        const float *x_row = x + row * N;
        float *out_row = out + row * N;
        const RowPart p = team.part(row_split(x_row, N));
        const bool out_vec = aligned16(out_row + p.s.head);
        if (!dispatch_cached<kMaxK>(p.nv, team.size(), [&](auto kc) {
              cached(kc, out_row, x_row, p, out_vec, stage.slots(0), next);
            }))
          stream_row(
              team, [&]() { streamed(out_row, x_row, p.s, out_vec); }, next);
      });
}

template <int kMaxK, int kU1 = 2, int kU2 = 2, bool kSmem = false, class Team>
__device__ __forceinline__ void softmax_rows(const Team &team, float *out, const float *x,
                                             long long M, long long N) {
  map_rows<kMaxK, kStageSoftmax>(
      team, out, x, M, N,
      [&](auto kc, float *out_row, const float *x_row, const RowPart &p, bool out_vec,
          const float4 *staged, auto &&next) {
        softmax_row_cached<decltype(kc)::value>(team, out_row, x_row, p, out_vec, staged, next);
      },
      [](float *out_row, const float *x_row, const RowSplit &split, bool out_vec) {
        softmax_row_streamed<kU1, kU2, kSmem>(out_row, x_row, split, out_vec);
      });
}

template <int kMaxK, int kU1 = 2, int kU2 = 2, bool kSmem = false, class Team>
__device__ __forceinline__ void double_softmax_rows(const Team &team, float *out, const float *x,
                                                    long long M, long long N) {
  map_rows<kMaxK, kStageDoubleSoftmax>(
      team, out, x, M, N,
      [&](auto kc, float *out_row, const float *x_row, const RowPart &p, bool out_vec,
          const float4 *staged, auto &&next) {
        double_softmax_row_cached<decltype(kc)::value, !Team::kWholeRow>(team, out_row, x_row, p,
                                                                         out_vec, staged, next);
      },
      [](float *out_row, const float *x_row, const RowSplit &split, bool out_vec) {
        /* the registered build (K = 2, 32 registers) would spill the power
         * sums: its streamed rows (none under the tuned plan) take three reads */
        double_softmax_row_streamed<kU1, kU2, kSmem, kMaxK != 2>(out_row, x_row, split, out_vec);
      });
}

/* Staged (kStageSoftmaxBackward = 2): y, and g where it shares y's split
 * (g_vec), as it is cached. kSmem is not used: its streamed rows stay out of
 * shared memory (softmax_backward_row_streamed says why). */
template <int kMaxK, int kU1 = 2, int kU2 = 2, bool kSmem = false, class Team>
__device__ __forceinline__ void softmax_backward_rows(const Team &team, float *grad_in,
                                                      const float *grad_out, const float *y,
                                                      long long M, long long N) {
  const RowStage<kMaxK, kStageSoftmaxBackward, Team> stage(team, N);
  row_loop(
      team, M, stage,
      [&](long long row) {
        const float *y_row = y + row * N, *g_row = grad_out + row * N;
        stage.copy(0, y_row, N);
        if (aligned16(g_row + row_split(y_row, N).head))
          stage.copy(1, g_row, N);
      },
      [&](long long row, auto &&next) {
        const float *g_row = grad_out + row * N, *y_row = y + row * N;
        float *gin_row = grad_in + row * N;
        const RowPart p = team.part(row_split(y_row, N));
        const bool g_vec = aligned16(g_row + p.s.head);
        const bool out_vec = aligned16(gin_row + p.s.head);
        if (!dispatch_cached<kMaxK>(p.nv, team.size(), [&](auto kc) {
              softmax_backward_row_cached<decltype(kc)::value>(team, gin_row, g_row, y_row, p,
                                                               g_vec, out_vec, stage.slots(0),
                                                               stage.slots(1), next);
            }))
          stream_row(
              team,
              [&]() {
                softmax_backward_row_streamed<kU1, kU2>(gin_row, g_row, y_row, p.s, g_vec, out_vec);
              },
              next);
      });
}

template <int kMaxK, int kU1 = 2, int kU2 = 2, bool kSmem = false, class Team>
__device__ __forceinline__ void
layernorm_rows(const Team &team, float *out, float *mean, float *rstd, const float *x,
               const float *w, const float *b, long long M, long long N, float eps) {
  const RowStage<kMaxK, kStageLayerNorm, Team> stage(team, N);
  row_loop(
      team, M, stage, [&](long long row) { stage.copy(0, x + row * N, N); },
      [&](long long row, auto &&next) {
        LayerNormRow r;
        r.x_row = x + row * N;
        r.out_row = out + row * N;
        r.w = w;
        r.b = b;
        r.N = N;
        r.s = row_split(r.x_row, N);
        r.out_vec = aligned16(r.out_row + r.s.head);
        r.wb_vec = aligned16(w + r.s.head) && aligned16(b + r.s.head);
        r.x_keep = M <= kLayerNormKeepFloats / N;
        const RowPart p = team.part(r.s);
        if (!dispatch_cached<kMaxK>(p.nv, team.size(), [&](auto kc) {
              layernorm_row_cached<decltype(kc)::value>(team, r, p, eps, mean + row, rstd + row,
                                                        stage.slots(0), next);
            }))
          stream_row(
              team,
              [&]() { layernorm_row_streamed<kU1, kU2, kSmem>(r, eps, mean + row, rstd + row); },
              next);
      });
}

template <int kMaxK, int kU1 = 2, int kU2 = 2, bool kSmem = false, class Team>
__device__ __forceinline__ void norm_chain_rows(const Team &team, float *out, const float *x,
                                                long long M, long long N) {
  map_rows<kMaxK, kStageNormChain>(
      team, out, x, M, N,
      [&](auto kc, float *out_row, const float *x_row, const RowPart &p, bool out_vec,
          const float4 *staged, auto &&next) {
        norm_chain_row_cached<decltype(kc)::value>(team, out_row, x_row, p, out_vec, staged, next);
      },
      [](float *out_row, const float *x_row, const RowSplit &split, bool out_vec) {
        norm_chain_row_streamed<kU1, kU2, kSmem>(out_row, x_row, split, out_vec);
      });
}

} // namespace

/* ---- kernels ----------------------------------------------------------------- */

/* Each kernel comes in up to five builds, one row loop over four kinds of
 * team (the backend's planner, backend/cuda/cuda_plan.c, picks one):
 *   registered  block per row, cache <= 2 vectors per thread: 32 or 40
 *               registers (2048 or 1536 resident threads per SM), longer
 *               rows streamed;
 *   long_rows   block per row, cache of 8 vectors (4 where 8 spills) under
 *               the full 64-register budget of a 1024-thread block: rows of
 *               up to 32768 floats read once; longer ones streamed with
 *               fewer rows in flight per SM, so the reread more often hits
 *               L2; double_softmax's also stages the next row in shared
 *               memory where an SM holds at most two of its blocks (a
 *               persistent grid: RowStage in device_common.cuh, kStage* below);
 *   warp_short  a warp per row, 8 rows per 256-thread block, <= 2 vectors
 *               per lane (rows <= 256 floats), 40 to 56 registers;
 *               (A warp build of 4 vectors per lane, rows <= 512, was
 *               measured on an H100 no faster than a block per row from
 *               N = 257 on, and removed.)
 *   cluster     a cluster of 2..8 blocks per row (sm_90), <= 4 vectors per
 *               thread (64 registers): rows of up to 8 * 16384 floats read
 *               once, and a few long rows spread over the whole GPU;
 *   stream      block per row for the rows long_rows would stream: no
 *               register cache (K = 1, for rows it is never launched on), so
 *               its passes keep more loads in flight (kStreamU1/U2) within
 *               64 registers without the spills that cost the caching
 *               builds' cached rows 3-23% when they did so; rows longer
 *               than L1 keeps (kStreamSmemMinN) it keeps in shared memory
 *               for its later passes, up to 227 KiB (SmemRow).
 * Registers: caps chosen so that ptxas spills nothing or a few words (to
 * L1) on sm_90.
 * Warp builds need no shared memory and no barriers: a block of 32-thread
 * groups would be capped at 32 blocks (1024 threads) per SM. */

/* The five builds of kernel NAME(PARAMS): ROWS_FN<K>(team, ARGS) over each
 * team, with the registered and warp_short builds' register caps and
 * the long-row build's cache depth. The cluster build caches 4 float4 per
 * thread at 64 registers (the planner's cluster_vectors). */
#define FPCU_ROW_KERNEL(NAME, ROWS_FN, REGS, REGS_WARP_SHORT, LONG_K, PARAMS, ARGS)                \
  static __global__ void __maxnreg__(REGS) NAME PARAMS { FPCU_ROWS_BLOCK(ROWS_FN<2> ARGS); }       \
  static __global__ void __launch_bounds__(kMaxBlock, 1) NAME##_long_rows PARAMS {                 \
    FPCU_ROWS_BLOCK(ROWS_FN<LONG_K> ARGS);                                                         \
  }                                                                                                \
  static __global__ void __maxnreg__(REGS_WARP_SHORT) NAME##_warp_short PARAMS {                   \
    FPCU_ROWS_WARP(ROWS_FN<2> ARGS);                                                               \
  }                                                                                                \
  static __global__ void __maxnreg__(64) NAME##_cluster PARAMS {                                   \
    FPCU_ROWS_CLUSTER(ROWS_FN<4> ARGS);                                                            \
  }                                                                                                \
  static __global__ void __launch_bounds__(kMaxBlock, 1) NAME##_stream PARAMS {                    \
    FPCU_ROWS_BLOCK(ROWS_FN<1, kStreamU1, kStreamU2, true> ARGS);                                  \
  }

/* The streaming build's loads in flight per thread in a row's first pass
 * and in its later ones (2 and 2 in the caching builds, which have no
 * registers for more). Measured on an H100 (2026-11-24, three alternating
 * rounds, 120e041:docs/results/2026-11-24-h100-stream/r24-stream-build/) against
 * the long-row build streaming with 2 and 2: with 4 and 4, double_softmax
 * 4096 x 32768 526 -> 447 us, 8192 x 65536 2024 -> 1838; layernorm
 * 4096 x 32768 447 -> 409, 2048 x 65536 501 -> 484; softmax 2048 x 65536
 * 460 -> 449; softmax_backward and norm_chain within 0.6% (the former's
 * long rows mostly take clusters); 4 and 2 gained about half as much, the
 * build alone (2 and 2) up to 3%. 8 spills. */
constexpr int kStreamU1 = 4, kStreamU2 = 4;

#define FPCU_ROWS_PARAMS (float *out, const float *x, long long M, long long N)
#define FPCU_ROWS_ARGS (team, out, x, M, N)

/* softmax_fused(out, x, M, N)                                          ROWS */
FPCU_ROW_KERNEL(softmax_fused, softmax_rows, 32, 40, 8, FPCU_ROWS_PARAMS, FPCU_ROWS_ARGS)

/* double_softmax_fused(out, x, M, N): softmax(softmax(x)). Its long-row
 * cache of 8 float4 spills: 4 (rows of up to 16384 floats read once; on
 * sm_90 the cluster build takes the longer ones).                      ROWS */
FPCU_ROW_KERNEL(double_softmax_fused, double_softmax_rows, 32, 40, 4, FPCU_ROWS_PARAMS,
                FPCU_ROWS_ARGS)

/* softmax_backward_fused(grad_in, grad_out, y, M, N): two rows cached, so
 * more registers for the warp builds.                                  ROWS */
FPCU_ROW_KERNEL(softmax_backward_fused, softmax_backward_rows, 40, 48, 4,
                (float *grad_in, const float *grad_out, const float *y, long long M, long long N),
                (team, grad_in, grad_out, y, M, N))

/* layernorm_fused(out, mean, rstd, x, w, b, M, N, eps)                  ROWS */
FPCU_ROW_KERNEL(layernorm_fused, layernorm_rows, 40, 56, 4,
                (float *out, float *mean, float *rstd, const float *x, const float *w,
                 const float *b, long long M, long long N, float eps),
                (team, out, mean, rstd, x, w, b, M, N, eps))

/* norm_chain_fused(out, x, M, N): three times s = sum_j(x); x = x*s.     ROWS */
FPCU_ROW_KERNEL(norm_chain_fused, norm_chain_rows, 32, 40, 8, FPCU_ROWS_PARAMS, FPCU_ROWS_ARGS)

extern "C" void fp_cuda_register_reduce(const void *table[FPK_COUNT]) {
  table[FPK_softmax_fused] = reinterpret_cast<const void *>(&softmax_fused);
  table[FPK_double_softmax_fused] = reinterpret_cast<const void *>(&double_softmax_fused);
  table[FPK_softmax_backward_fused] = reinterpret_cast<const void *>(&softmax_backward_fused);
  table[FPK_layernorm_fused] = reinterpret_cast<const void *>(&layernorm_fused);
  table[FPK_norm_chain_fused] = reinterpret_cast<const void *>(&norm_chain_fused);
}

/* The rows the streaming builds keep in shared memory (SmemRow; the
 * backend's fp_cuda_stream_smem_bytes): those of more than 32768 floats,
 * which L1 does not keep between passes. Shorter ones gained nothing: on an
 * H100 (2026-11-25, three alternating rounds, FUSEPORT_CUDA_STREAM_SMEM=0
 * and 1, 120e041:docs/results/2026-11-25-h100-smem/) 0.98-1.02x for layernorm and
 * double_softmax at 256-4096 x 32768, against 1.11-1.14x for softmax,
 * 1.12-1.19x for norm_chain, 1.06-1.12x for layernorm and 1.02-1.11x for
 * double_softmax at N = 65536, and 1.02-1.15x for the first three at
 * N = 36864-57344. softmax_backward keeps none (its comment says why). */
constexpr int kStreamSmemMinN = 32769;

/* The builds of each kernel, where its M and N are, its long-row build's
 * cache depth (LONG_K of FPCU_ROW_KERNEL above: must match), the row
 * arrays that build stages (kStage*, shared with its row loop) and the
 * shortest row its streaming build keeps in shared memory (0: none).
 * Only double_softmax stages: timed on an H100 (2026-11-23, stage off /
 * on, docs/PERF.md), its long-row build took 0.83-0.88 of the time at
 * N = 16384 (one 1024-thread block per SM, three reductions per row) and
 * 0.95 at 8192, but 1.03-1.12 at N <= 4096; the other four lost 2-10%
 * wherever they staged (little work between a row's load and store, and
 * a persistent grid of one wave against the hardware's block scheduling),
 * and the stage code alone cost layernorm and norm_chain registers. */
#define FPCU_ROW_BUILDS(kernel, arg_m, arg_n, long_k, stage_rows, smem_min_n)                      \
  with_stream_build(rows_tuning(reinterpret_cast<const void *>(&kernel##_long_rows),               \
                                reinterpret_cast<const void *>(&kernel##_warp_short), nullptr,     \
                                reinterpret_cast<const void *>(&kernel##_cluster), arg_m, arg_n,   \
                                2, 0, 4, long_k, 0, stage_rows),                                   \
                    reinterpret_cast<const void *>(&kernel##_stream), smem_min_n)

extern "C" void fp_cuda_register_tuning_reduce(fp_cuda_tuning table[FPK_COUNT]) {
  table[FPK_softmax_fused] =
      FPCU_ROW_BUILDS(softmax_fused, 2, 3, 8, kStageSoftmax, kStreamSmemMinN);
  table[FPK_double_softmax_fused] =
      FPCU_ROW_BUILDS(double_softmax_fused, 2, 3, 4, kStageDoubleSoftmax, kStreamSmemMinN);
  /* ... and for double_softmax from 12289 floats (cuda_plan.c) */
  table[FPK_double_softmax_fused].offer.stream_half_long_min_n = 12289;
  table[FPK_softmax_backward_fused] =
      FPCU_ROW_BUILDS(softmax_backward_fused, 3, 4, 4, kStageSoftmaxBackward, 0);
  /* two input rows: a cluster reads them once where a block would stream
   * both twice (cuda_plan.c) */
  table[FPK_softmax_backward_fused].offer.cluster_many_rows = true;
  table[FPK_layernorm_fused] =
      FPCU_ROW_BUILDS(layernorm_fused, 6, 7, 4, kStageLayerNorm, kStreamSmemMinN);
  /* many rows of 8193..16384 floats: the streaming build in blocks of 512
   * rather than the long-row build in blocks of 1024 (cuda_plan.c) */
  table[FPK_layernorm_fused].offer.stream_half_long_min_n = 8193;
  table[FPK_norm_chain_fused] =
      FPCU_ROW_BUILDS(norm_chain_fused, 2, 3, 8, kStageNormChain, kStreamSmemMinN);
}
