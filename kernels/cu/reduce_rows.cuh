/* fuseport CUDA kernels, family reduce: the row functions of its ops --
 * softmax, double_softmax, softmax_backward, layernorm (with
 * kLayerNormKeepFloats) and norm_chain, each as <op>_row_cached (a team's
 * part of a row in registers, fpcu::RowCache) and <op>_row_streamed (a block
 * streams a row longer than its cache). The family's description, the
 * statistics these functions gather (fast_exp, the online softmax's MaxSum,
 * double_softmax's MaxPowers, Welford's MeanM2), the row loops that call them
 * and the kernels are in reduce.cu.
 *
 * A part of reduce.cu, not a header of its own: reduce.cu includes it once,
 * inside its anonymous namespace (using namespace fpcu), between the
 * statistics and the row loops; tests/cuda_emu/emu_reduce.cc compiles it
 * through reduce.cu.
 */
#ifndef FUSEPORT_REDUCE_ROWS_CUH
#define FUSEPORT_REDUCE_ROWS_CUH

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
 * kStreamU1 in reduce.cu). kSmem: the streaming build, whose later passes read
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
  /* a misaligned g is not staged; the shared-memory cache's region is
   * given either way */
  cache_load(team, g, g_row, p, g_vec, g_vec || K == kSmemCache ? g_staged : nullptr);
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
  cache_for_each_vector(team, c, p, [&](int k, const float4 &d) {
    const long long j = r.s.head + 4 * slot_vector(team, p, k);
    const float4 w4 = ldg4_any(r.w + j, r.wb_vec), b4 = ldg4_any(r.b + j, r.wb_vec);
    st4_any(
        r.out_row + j,
        make_float4(layernorm_value(d.x, rstd, w4.x, b4.x), layernorm_value(d.y, rstd, w4.y, b4.y),
                    layernorm_value(d.z, rstd, w4.z, b4.z), layernorm_value(d.w, rstd, w4.w, b4.w)),
        r.out_vec);
  });
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

#endif
