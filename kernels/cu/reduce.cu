/* fuseport CUDA kernels, family reduce: fused row reductions, all ROWS
 * geometry over contiguous row-major [M, N]. Semantics: kernels/kernels.def;
 * reference: kernels/cpu/reduce.c.
 *
 * Each row algorithm is written once over a team (fpcu::BlockTeam,
 * WarpTeam, ClusterTeam in device_rows.cuh): the threads that hold one row,
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
 *
 * The ops' row functions (<op>_row_cached, <op>_row_streamed) are in
 * reduce_rows.cuh, a part of this file, included in place.
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
  /* two empty partials stay empty; __fdividef (2 ulp, far below the sums'
   * own rounding) rather than the IEEE division's longer sequence, which
   * the streamed rows pay a float4: H200, 2026-11-29, two rounds, layernorm
   * 3776 x 14336 151.4 -> 146.5 us, 1000 x 14336 48.2 -> 47.0, eight other
   * shapes within 1-2% */
  const float wb = r.n > 0.0f ? __fdividef(b.n, r.n) : 0.0f;
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

/* ---- the ops' rows ---------------------------------------------------------- */
/* <op>_row_cached and <op>_row_streamed of softmax, double_softmax,
 * softmax_backward, layernorm and norm_chain: reduce_rows.cuh, a part of
 * this file. */
#include "reduce_rows.cuh"

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
        if (!dispatch_team_cache<kMaxK, 1>(team, p, [&](auto kc) {
              cached(kc, out_row, x_row, p, out_vec, cache_slots(kc, stage, team, p, 0), next);
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
        if (!dispatch_team_cache<kMaxK, 2>(team, p, [&](auto kc) {
              softmax_backward_row_cached<decltype(kc)::value>(
                  team, gin_row, g_row, y_row, p, g_vec, out_vec,
                  cache_slots(kc, stage, team, p, 0), cache_slots(kc, stage, team, p, 1), next);
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
        if (!dispatch_team_cache<kMaxK, 1>(team, p, [&](auto kc) {
              layernorm_row_cached<decltype(kc)::value>(team, r, p, eps, mean + row, rstd + row,
                                                        cache_slots(kc, stage, team, p, 0), next);
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
 *               persistent grid: RowStage in device_rows.cuh, kStage* below);
 *   warp_short  a warp per row (4 or 16 lanes of it for rows of up to 16
 *               or 64 floats: FP_ROWS_WARP_LANES_LOG2), 8 to 64
 *               rows per 256-thread block, <= 2 vectors per lane (rows
 *               <= 256 floats), 40 to 56 registers;
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
    FPCU_ROWS_WARP(N, ROWS_FN<2> ARGS);                                                            \
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
#define FPCU_ROW_BUILDS(kernel, arg_m, arg_n, long_k, stage_rows, smem_min_n, cluster_arrays,      \
                        cluster_min_n)                                                             \
  with_cluster_smem(                                                                               \
      with_stream_build(rows_tuning(reinterpret_cast<const void *>(&kernel##_long_rows),           \
                                    reinterpret_cast<const void *>(&kernel##_warp_short), nullptr, \
                                    reinterpret_cast<const void *>(&kernel##_cluster), arg_m,      \
                                    arg_n, 2, 0, 4, long_k, 0, stage_rows),                        \
                        reinterpret_cast<const void *>(&kernel##_stream), smem_min_n),             \
      cluster_arrays, cluster_min_n)

/* Every cluster build keeps the row arrays its row function caches (two
 * for softmax_backward: y and g) in shared memory where its registers
 * cannot hold a block's share (RowCache<kSmemCache>, device_rows.cuh), for
 * fewer rows than SMs longer than min_n floats (cuda_plan.c has the
 * measurements): 65536 for layernorm, whose streamed rows cost the most,
 * 131072 for the others (what a cluster of 8 holds in registers). */
constexpr int kClusterSmemMinN = 131072, kClusterSmemMinNLayerNorm = 65536;
static fp_cuda_tuning with_cluster_smem(fp_cuda_tuning t, int arrays, int min_n) {
  t.offer.cluster_smem_arrays = arrays;
  t.offer.cluster_smem_min_n = min_n;
  return t;
}

extern "C" void fp_cuda_register_tuning_reduce(fp_cuda_tuning table[FPK_COUNT]) {
  table[FPK_softmax_fused] =
      FPCU_ROW_BUILDS(softmax_fused, 2, 3, 8, kStageSoftmax, kStreamSmemMinN, 1, kClusterSmemMinN);
  table[FPK_double_softmax_fused] = FPCU_ROW_BUILDS(
      double_softmax_fused, 2, 3, 4, kStageDoubleSoftmax, kStreamSmemMinN, 1, kClusterSmemMinN);
  /* ... and for double_softmax from 12289 floats (cuda_plan.c) */
  table[FPK_double_softmax_fused].offer.stream_half_long_min_n = 12289;
  /* ... and in blocks of 128 or 256 for many rows of 4097..12288 floats */
  table[FPK_double_softmax_fused].offer.stream_l1_min_n = 4097;
  table[FPK_double_softmax_fused].offer.stream_l1_max_n = 12288;
  table[FPK_softmax_backward_fused] = FPCU_ROW_BUILDS(
      softmax_backward_fused, 3, 4, 4, kStageSoftmaxBackward, 0, 2, kClusterSmemMinN);
  /* two input rows: a cluster reads them once where a block would stream
   * both twice (cuda_plan.c) */
  table[FPK_softmax_backward_fused].offer.cluster_many_rows = true;
  /* ... and from 12545 floats, where a block of 1024 (one an SM: 56
   * registers) caches four float4 in more than 64 of its threads, the
   * streaming build in blocks of 512, two an SM. H200, 2026-11-29, two
   * rounds, 1000-8192 rows: the long-row build in blocks of 512 against
   * 1024 (FUSEPORT_CUDA_ROWS_BLOCK_CAP) 1.08-1.19x at N = 12800-14848,
   * 1.02-1.12x at 15360-15872, 1.00x at 16384, 0.95x at 12288-12289 (three
   * float4 a thread); this offer from 12292 (one thread with four) 0.95-0.97x
   * there and 1.07-1.20x at 12800-15360 (docs/PERF.md) */
  table[FPK_softmax_backward_fused].offer.stream_half_long_min_n = 12545;
  table[FPK_layernorm_fused] = FPCU_ROW_BUILDS(layernorm_fused, 6, 7, 4, kStageLayerNorm,
                                               kStreamSmemMinN, 1, kClusterSmemMinNLayerNorm);
  /* many rows of 8193..16384 floats: the streaming build in blocks of 512
   * rather than the long-row build in blocks of 1024 (cuda_plan.c) */
  table[FPK_layernorm_fused].offer.stream_half_long_min_n = 8193;
  /* ... in blocks of 256 up to 12288 floats (cuda_plan.c) */
  table[FPK_layernorm_fused].offer.stream_l1_min_n = 8193;
  table[FPK_layernorm_fused].offer.stream_l1_max_n = 12288;
  table[FPK_norm_chain_fused] = FPCU_ROW_BUILDS(norm_chain_fused, 2, 3, 8, kStageNormChain,
                                                kStreamSmemMinN, 1, kClusterSmemMinN);
}
