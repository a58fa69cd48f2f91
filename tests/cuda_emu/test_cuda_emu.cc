/* fuseport tests: the CUDA row kernels (every build: block, long rows, warp
 * per row, cluster per row) run on the CPU emulation of cuda_emu.h against a
 * float64 reference. The geometries are chosen here, within each build's
 * precondition (backend/cuda/cuda_plan.h), so that each build also meets
 * odd row lengths, misaligned rows (odd N, and bases one float past a
 * 16-byte boundary), empty parts (a cluster wider than the row), several
 * rows per block, warp or cluster (the row loops, the cluster's exchange
 * buffers reused), and rows that the block builds stream instead of
 * caching. Outputs are poisoned with NaN first, so an unwritten element
 * fails. Structural mistakes give errors of order one; the tolerance
 * (1e-4 of the row's largest reference value) only absorbs float32
 * rounding. */
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
}

#include "cuda_emu.h"

#include "cu/device_common.cuh"

namespace {

typedef void (*RowsFn)(float *, const float *, long long, long long);
typedef void (*BackwardFn)(float *, const float *, const float *, long long, long long);
typedef void (*LayerNormFn)(float *, float *, float *, const float *, const float *, const float *,
                            long long, long long, float);
typedef void (*HReduceFn)(float *, float *, const float *, long long, long long);
typedef void (*PointwiseFn)(float *, const float *, long long);
typedef void (*BiasGeluFn)(float *, const float *, const float *, long long, long long);
typedef void (*BiasDropoutAddFn)(float *, const float *, const float *, const float *, long long,
                                 long long, long long, long long, long long, long long, long long,
                                 long long, float, float, long long, int);

struct Kernels {
  const void *registered[FPK_COUNT] = {};
  fp_cuda_tuning tuning[FPK_COUNT] = {};
  Kernels() {
    fp_cuda_register_reduce(registered);
    fp_cuda_register_tuning_reduce(tuning);
    fp_cuda_register_horizontal(registered);
    fp_cuda_register_tuning_horizontal(tuning);
    fp_cuda_register_elementwise(registered);
    fp_cuda_register_tuning_elementwise(tuning);
  }
  /* build -1: the registered one */
  const void *get(fp_kernel_id id, int build) const {
    return build < 0 ? registered[id] : tuning[id].builds[build];
  }
};

const Kernels &kernels() {
  static const Kernels k;
  return k;
}

/* A launch: build, rows, row length, geometry, and whether the bases are
 * one float past 16-byte alignment; stage_bytes of dynamic shared memory
 * turn on the long-row build's staging of the next row (RowStage). */
struct Case {
  int build;
  long long M, N;
  unsigned grid, block, cluster;
  bool misaligned;
  size_t stage_bytes = 0;
  bool stages = false;     /* the kernel's offer says its long-row build stages */
  bool smem_cache = false; /* a cluster build given shared memory for shares
                              its registers cannot hold (RowCache<kSmemCache>) */
};

std::string describe(const char *kernel, const Case &c) {
  char s[240];
  std::snprintf(s, sizeof s, "%s build %d, %lldx%lld, grid %u block %u cluster %u%s%s", kernel,
                c.build, c.M, c.N, c.grid, c.block, c.cluster, c.misaligned ? ", misaligned" : "",
                c.stage_bytes == 0           ? ""
                : c.build == FP_ROWS_STREAM  ? ", rows in shared memory"
                : c.build == FP_ROWS_CLUSTER ? ", shares in shared memory"
                                             : ", staged");
  return s;
}

/* A float array of n elements with its own storage, optionally starting
 * one float past a 16-byte boundary. */
struct Array {
  std::vector<float> storage;
  float *p;
  Array(size_t n, bool misaligned, float fill) : storage(n + 8, fill) {
    uintptr_t a = reinterpret_cast<uintptr_t>(storage.data());
    size_t skip = ((16 - a % 16) % 16) / 4 + (misaligned ? 1 : 0);
    p = storage.data() + skip;
  }
};

void fill_random(float *x, size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (size_t i = 0; i < n; ++i)
    x[i] = u(gen);
}

/* Row-relative comparison: |got - want| <= 1e-4 * max_j |want_j| + 1e-30. */
void expect_rows(const std::string &what, const float *got, const std::vector<double> &want,
                 long long M, long long N) {
  for (long long i = 0; i < M; ++i) {
    double scale = 0.0;
    for (long long j = 0; j < N; ++j)
      scale = std::fmax(scale, std::fabs(want[i * N + j]));
    for (long long j = 0; j < N; ++j) {
      const double g = got[i * N + j], w = want[i * N + j];
      if (!(std::fabs(g - w) <= 1e-4 * scale + 1e-30))
        fail_msg("%s: element (%lld, %lld) is %.9g, expected %.9g", what.c_str(), i, j, g, w);
    }
  }
}

/* Runs a case; one whose kernel stages, given its stage, must have staged
 * (cp.async) every row's vectors; any other none, whatever shared memory it
 * got (the offer and the kernel agree). */
bool run(const Case &c, const std::function<void()> &kernel) {
  const unsigned long long before = fpemu::async_copies();
  const bool ok = fpemu::launch(c.grid, c.block, c.cluster, kernel, c.stage_bytes);
  const unsigned long long copies = fpemu::async_copies() - before;
  /* a cluster's shares in shared memory: copied in, a vector at a time */
  if (c.smem_cache ? copies == 0
      : c.stages   ? copies < (unsigned long long)(c.M * (c.N / 4 - 1))
                   : copies != 0)
    fail_msg("%lldx%lld: %llu vectors staged with %zu bytes of stage", c.M, c.N, copies,
             c.stage_bytes);
  return ok;
}

/* ---- references, in double ---- */

std::vector<double> ref_softmax(const float *x, long long M, long long N, int times) {
  std::vector<double> y(x, x + M * N);
  for (int t = 0; t < times; ++t)
    for (long long i = 0; i < M; ++i) {
      double m = -INFINITY, s = 0.0;
      for (long long j = 0; j < N; ++j)
        m = std::fmax(m, y[i * N + j]);
      for (long long j = 0; j < N; ++j)
        s += std::exp(y[i * N + j] - m);
      for (long long j = 0; j < N; ++j)
        y[i * N + j] = std::exp(y[i * N + j] - m) / s;
    }
  return y;
}

/* ---- the cases of each kernel ---- */

/* Warp builds: rows up to their caches; block builds: cached and streamed
 * rows; the long-row build also given a stage (rows up to its cache of
 * long_vectors float4 per thread, 7 rows on 2 blocks: each stages 2 or 3
 * next rows; odd N: the rows' splits differ), which only a kernel whose
 * offer says so uses; cluster builds: every
 * cluster size, shares within the cache of 4 float4 per thread, and a
 * cluster wider than the row. Grids smaller than the row count, so that
 * every team takes several rows. */
std::vector<Case> cases(bool caches_row, int warp_short_n, int warp_n,
                        const fp_rows_builds *long_offer) {
  const bool has_long = long_offer != nullptr;
  std::vector<Case> v;
  for (bool mis : {false, true}) {
    if (warp_short_n > 0)
      for (long long N : {1LL, 3LL, 33LL, 255LL, (long long)warp_short_n})
        v.push_back({FP_ROWS_WARP_SHORT, 19, N, 2, 256, 1, mis});
    if (warp_n > 0)
      for (long long N : {1LL, 5LL, 257LL, (long long)warp_n})
        v.push_back({FP_ROWS_WARP, 19, N, 2, 256, 1, mis});
    /* teams of 4 and 16 lanes (FP_ROWS_WARP_LANES_LOG2) on each side of
     * their limits, 150 rows on 16 or 4 teams: each team takes 9 to 38
     * rows, and the teams of a warp different numbers of them (the last
     * rows leave some of its lanes out of the loop) */
    for (long long N : {7LL, 16LL, 17LL, 59LL, 64LL}) {
      if (warp_short_n > 0)
        v.push_back({FP_ROWS_WARP_SHORT, 150, N, 1, 64, 1, mis});
      if (warp_n > 0)
        v.push_back({FP_ROWS_WARP, 150, N, 1, 64, 1, mis});
    }
    /* block: 2 float4 per thread cached, more streamed (509: about one
     * round of two float4 per thread, the streaming builds' blocks of N/8
     * threads) */
    for (long long N : {1LL, 7LL, 255LL, 509LL, 1001LL})
      v.push_back({FP_ROWS_REGISTERED, 5, N, 2, 64, 1, mis});
    /* long rows: cached (201: fewer float4 than threads, as the planner's
     * blocks of a float4 per thread for few rows leave some threads
     * none), cached in 4 slots, streamed */
    if (has_long)
      for (long long N : {201LL, 1001LL, 4097LL})
        v.push_back({FP_ROWS_LONG, 3, N, 2, 64, 1, mis});
    if (has_long) {
      const long long cached = 4LL * long_offer->long_vectors * 64;
      const int arrays = long_offer->stage_rows > 0 ? long_offer->stage_rows : 2;
      const size_t bytes = (size_t)arrays * long_offer->long_vectors * 16 * 64;
      for (long long N : {5LL, 1001LL, cached - 3, cached}) {
        Case c = {FP_ROWS_LONG, 7, N, 2, 64, 1, mis};
        c.stage_bytes = bytes;
        c.stages = long_offer->stage_rows > 0;
        v.push_back(c);
      }
    }
    /* the streaming build: rows it caches (K = 1: up to 64 float4 here;
     * never launched on them), and streamed ones with their four loads in
     * flight ending in every remainder */
    if (has_long && long_offer->has[FP_ROWS_STREAM])
      for (long long N : {5LL, 1001LL, 1003LL, 4097LL, 20001LL})
        v.push_back({FP_ROWS_STREAM, 3, N, 2, 64, 1, mis});
    /* ... and with its row in shared memory (SmemRow): whole rows, as
     * the backend gives them (ceil(N/4) float4), and the first 1000 or 1
     * of 5000 vectors; three rows on two blocks, so that block 0 keeps a
     * second row over its first */
    if (has_long && long_offer->has[FP_ROWS_STREAM] && long_offer->stream_smem_min_n > 0) {
      const struct {
        long long N;
        size_t vectors;
      } kept[] = {{1003, 251}, {4097, 1025}, {20001, 1000}, {20001, 1}};
      for (const auto &k : kept) {
        Case c = {FP_ROWS_STREAM, 3, k.N, 2, 64, 1, mis};
        c.stage_bytes = k.vectors * 16;
        v.push_back(c);
      }
    }
    for (unsigned C : {2u, 4u, 8u}) {
      const long long fit = caches_row ? 4LL * 4 * 64 * C - 3 : 20001; /* share <= 4 x 64 */
      for (long long N : {3LL, 1001LL, fit})
        v.push_back({FP_ROWS_CLUSTER, 5, N, 2 * C, 64, C, mis});
    }
    /* shares longer than the register cache (4 float4 per thread): kept in
     * shared memory, room for two row arrays (softmax_backward's y and g)
     * of ceil(share / 64) slots per thread; just past the cache, with a
     * last block of a single vector, and several slots per thread */
    if (caches_row)
      for (unsigned C : {2u, 4u})
        for (long long N : {4LL * 4 * 64 * C + 5, 4LL * 4 * 64 * C * 3 + 4 * (long long)C + 1}) {
          const long long share = ((N + 3) / 4 + C - 1) / C;
          Case c = {FP_ROWS_CLUSTER, 5, N, 2 * C, 64, C, mis};
          c.stage_bytes = (size_t)(2 * ((share + 63) / 64) * 64 * 16);
          c.smem_cache = true;
          v.push_back(c);
        }
    /* the non-portable cluster of 16: one case, its 1024 emulated threads
     * a cluster being costly under ThreadSanitizer (make test-race) */
    if (!mis)
      v.push_back(
          {FP_ROWS_CLUSTER, 3, caches_row ? 4LL * 4 * 64 * 16 - 3 : 20001, 32, 64, 16, false});
  }
  return v;
}

/* The same case with special values in its first rows, PyTorch's
 * semantics: row 0 is -inf but for two finite values far below 0 (threads
 * that hold only -inf must give 0 there, not NaN, and no exp may overflow);
 * row 1 all -inf (NaN row); row 2 one NaN and row 3 one +inf (NaN rows);
 * row 4 its first half -inf. Expected NaN where the reference has NaN. */
void check_softmax_specials(const Case &c, const std::string &what, Array &x, RowsFn fn,
                            int times) {
  const long long N = c.N;
  for (long long j = 0; j < N && c.M > 0; ++j)
    x.p[j] = -INFINITY;
  x.p[N - 1] = -200.0f;
  if (N / 2 != N - 1)
    x.p[N / 2] = -201.0f;
  for (long long j = 0; j < N && c.M > 1; ++j)
    x.p[N + j] = -INFINITY;
  if (c.M > 2)
    x.p[2 * N + N / 3] = NAN;
  if (c.M > 3)
    x.p[3 * N + N / 5] = INFINITY;
  for (long long j = 0; j < N / 2 && c.M > 4; ++j)
    x.p[4 * N + j] = -INFINITY;
  Array out(c.M * N, c.misaligned, 12345.0f); /* poisoned: unwritten shows */
  if (!run(c, [&] { fn(out.p, x.p, c.M, N); }))
    fail_msg("%s, special values: trapped", what.c_str());
  const std::vector<double> want = ref_softmax(x.p, c.M, N, times);
  for (long long i = 0; i < c.M * N; ++i) {
    const double g = out.p[i], w = want[i];
    const bool ok = std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= 1e-4;
    if (!ok)
      fail_msg("%s, special values: element (%lld, %lld) is %.9g, expected %.9g", what.c_str(),
               i / N, i % N, g, w);
  }
}

void test_rows_kernel(fp_kernel_id id, const char *name, int times) {
  const std::vector<Case> all = cases(true, 256, 0, &kernels().tuning[id].offer);
  for (const Case &c : all) {
    const std::string what = describe(name, c);
    Array x(c.M * c.N, c.misaligned, 0.0f), out(c.M * c.N, c.misaligned, NAN);
    fill_random(x.p, c.M * c.N, 7 + (unsigned)c.N, id == FPK_norm_chain_fused ? 0.0f : -3.0f, 1.0f);
    RowsFn fn = reinterpret_cast<RowsFn>(kernels().get(id, c.build));
    assert_non_null(fn);
    if (!run(c, [&] { fn(out.p, x.p, c.M, c.N); }))
      fail_msg("%s: trapped", what.c_str());
    std::vector<double> want;
    if (id == FPK_norm_chain_fused) {
      want.assign(x.p, x.p + c.M * c.N);
      for (long long i = 0; i < c.M; ++i)
        for (int step = 0; step < 3; ++step) {
          double s = 0.0;
          for (long long j = 0; j < c.N; ++j)
            s += want[i * c.N + j];
          for (long long j = 0; j < c.N; ++j)
            want[i * c.N + j] *= s;
        }
    } else {
      want = ref_softmax(x.p, c.M, c.N, times);
    }
    expect_rows(what, out.p, want, c.M, c.N);
    if (times > 0)
      check_softmax_specials(c, what, x, fn, times);
  }
}

void test_softmax(void **) { test_rows_kernel(FPK_softmax_fused, "softmax_fused", 1); }
void test_double_softmax(void **) {
  test_rows_kernel(FPK_double_softmax_fused, "double_softmax_fused", 2);
}
void test_norm_chain(void **) { test_rows_kernel(FPK_norm_chain_fused, "norm_chain_fused", 0); }

/* double_softmax takes the second softmax's sum from the first one's power
 * sums (second_inv_from_powers in kernels/cu/reduce.cu) where its series'
 * remainder is under 2^-24 of the sum, i.e. where y = 1/sum_j exp(x_j -
 * max) is at most y_max = (24 N 2^-24 / e)^(1/3), and otherwise sums the
 * exps directly: a second read for a streamed row (the registered build's
 * always sum directly), a third reduction for a cached one (only the
 * cluster build's take the series). Rows here are U(-1, 1) but for one spike set so that 1/y
 * is 1 (all the weight on the spike), 1/2, 0.9, 1.1, 2 or 10 times
 * 1/y_max: both sides of the switch, tested to 1e-6 of each element (float
 * rounding is ~2e-7 here), which the series misses if it drops its y^2
 * term (2.7e-6 at 0.9 y_max, N = 1001), or is used where the remainder is
 * large (1.7e-4 at y = 1, N = 300). */
void test_double_softmax_series(void **) {
  const fp_rows_builds &offer = kernels().tuning[FPK_double_softmax_fused].offer;
  const double ratios[] = {0.0, 0.5, 0.9, 1.1, 2.0, 10.0}; /* 1/y over 1/y_max; 0: y = 1 */
  const long long M = (long long)(sizeof ratios / sizeof ratios[0]);
  std::vector<Case> all;
  for (bool mis : {false, true}) {
    for (long long N : {300LL, 1001LL, 20001LL})
      all.push_back({FP_ROWS_STREAM, M, N, 2, 64, 1, mis});
    Case kept = {FP_ROWS_STREAM, M, 1001, 2, 64, 1, mis};
    kept.stage_bytes = 251 * 16; /* the whole row in shared memory */
    if (offer.stream_smem_min_n > 0)
      all.push_back(kept);
    all.push_back({FP_ROWS_LONG, M, 4097, 2, 64, 1, mis});
    all.push_back({FP_ROWS_REGISTERED, M, 1001, 2, 64, 1, mis});
    /* cached rows: the cluster build's (two reductions), and a block's */
    all.push_back({FP_ROWS_CLUSTER, M, 2001, 4, 64, 2, mis});
    all.push_back({FP_ROWS_LONG, M, 1001, 2, 64, 1, mis});
  }
  for (const Case &c : all) {
    const std::string what = describe("double_softmax_fused, series", c);
    const long long N = c.N;
    Array x(c.M * N, c.misaligned, 0.0f), out(c.M * N, c.misaligned, NAN);
    fill_random(x.p, c.M * N, 11 + (unsigned)N, -1.0f, 1.0f);
    const double y_max = std::cbrt(24.0 * (double)N * 0x1p-24 / std::exp(1.0));
    for (long long i = 0; i < c.M; ++i) {
      float *row = x.p + i * N;
      double rest = 0.0; /* sum_j exp(x_j) over all but the spike, row[N / 2] */
      for (long long j = 0; j < N; ++j)
        rest += j == N / 2 ? 0.0 : std::exp((double)row[j]);
      /* with spike b the max: 1/y = 1 + rest exp(-b) */
      const double inv_y = ratios[i] / y_max;
      row[N / 2] = ratios[i] == 0.0 ? 40.0f : (float)std::log(rest / (inv_y - 1.0));
    }
    RowsFn fn = reinterpret_cast<RowsFn>(kernels().get(FPK_double_softmax_fused, c.build));
    if (!run(c, [&] { fn(out.p, x.p, c.M, N); }))
      fail_msg("%s: trapped", what.c_str());
    const std::vector<double> want = ref_softmax(x.p, c.M, N, 2);
    for (long long i = 0; i < c.M * N; ++i)
      if (!(std::fabs(out.p[i] - want[i]) <= 1e-6 * want[i]))
        fail_msg("%s: element (%lld, %lld) (1/y = %g / y_max) is %.9g, expected %.9g", what.c_str(),
                 i / N, i % N, ratios[i / N], (double)out.p[i], want[i]);
  }
}

void test_softmax_backward(void **) {
  for (const Case &c : cases(true, 256, 0, &kernels().tuning[FPK_softmax_backward_fused].offer)) {
    const std::string what = describe("softmax_backward_fused", c);
    const long long n = c.M * c.N;
    Array x(n, c.misaligned, 0.0f), y(n, c.misaligned, 0.0f), g(n, c.misaligned, 0.0f),
        out(n, c.misaligned, NAN);
    fill_random(x.p, n, 11 + (unsigned)c.N, -3.0f, 1.0f);
    fill_random(g.p, n, 13 + (unsigned)c.N, -1.0f, 1.0f);
    const std::vector<double> yd = ref_softmax(x.p, c.M, c.N, 1);
    for (long long k = 0; k < n; ++k)
      y.p[k] = (float)yd[k];
    BackwardFn fn =
        reinterpret_cast<BackwardFn>(kernels().get(FPK_softmax_backward_fused, c.build));
    if (!run(c, [&] { fn(out.p, g.p, y.p, c.M, c.N); }))
      fail_msg("%s: trapped", what.c_str());
    std::vector<double> want(n);
    for (long long i = 0; i < c.M; ++i) {
      double dot = 0.0;
      for (long long j = 0; j < c.N; ++j)
        dot += (double)g.p[i * c.N + j] * y.p[i * c.N + j];
      for (long long j = 0; j < c.N; ++j)
        want[i * c.N + j] = y.p[i * c.N + j] * (g.p[i * c.N + j] - dot);
    }
    expect_rows(what, out.p, want, c.M, c.N);
  }
}

void test_layernorm(void **) {
  for (const Case &c : cases(true, 256, 0, &kernels().tuning[FPK_layernorm_fused].offer)) {
    const std::string what = describe("layernorm_fused", c);
    const long long n = c.M * c.N;
    Array x(n, c.misaligned, 0.0f), w(c.N, c.misaligned, 0.0f), b(c.N, c.misaligned, 0.0f),
        out(n, c.misaligned, NAN), mean(c.M, false, NAN), rstd(c.M, false, NAN);
    fill_random(x.p, n, 17 + (unsigned)c.N, -2.0f, 3.0f);
    fill_random(w.p, c.N, 19, 0.5f, 1.5f);
    fill_random(b.p, c.N, 23, -1.0f, 1.0f);
    LayerNormFn fn = reinterpret_cast<LayerNormFn>(kernels().get(FPK_layernorm_fused, c.build));
    if (!run(c, [&] { fn(out.p, mean.p, rstd.p, x.p, w.p, b.p, c.M, c.N, 1e-5f); }))
      fail_msg("%s: trapped", what.c_str());
    std::vector<double> want(n), want_mean(c.M), want_rstd(c.M);
    for (long long i = 0; i < c.M; ++i) {
      double s = 0.0, q = 0.0;
      for (long long j = 0; j < c.N; ++j)
        s += x.p[i * c.N + j];
      const double mu = s / (double)c.N;
      for (long long j = 0; j < c.N; ++j)
        q += (x.p[i * c.N + j] - mu) * (x.p[i * c.N + j] - mu);
      const double r = 1.0 / std::sqrt(q / (double)c.N + 1e-5);
      want_mean[i] = mu;
      want_rstd[i] = r;
      for (long long j = 0; j < c.N; ++j)
        want[i * c.N + j] = (x.p[i * c.N + j] - mu) * r * w.p[j] + b.p[j];
    }
    expect_rows(what, out.p, want, c.M, c.N);
    for (long long i = 0; i < c.M; ++i)
      if (!(std::fabs(mean.p[i] - want_mean[i]) <= 1e-5 * 3.0 &&
            std::fabs(rstd.p[i] - want_rstd[i]) <= 1e-4 * want_rstd[i]))
        fail_msg("%s: row %lld mean/rstd %.9g/%.9g, expected %.9g/%.9g", what.c_str(), i, mean.p[i],
                 rstd.p[i], want_mean[i], want_rstd[i]);
  }
}

/* hreduce: streamed by every build, so the clusters take any share. */
void test_hreduce(fp_kernel_id id, const char *name) {
  for (const Case &c : cases(false, 0, 1024, nullptr)) {
    const std::string what = describe(name, c);
    const long long n = c.M * c.N;
    Array a(n, c.misaligned, 0.0f), sum(c.M, false, NAN),
        out2(id == FPK_hreduce_pointwise_fused ? n : c.M, c.misaligned, NAN);
    fill_random(a.p, n, 29 + (unsigned)c.N, -1.0f, 1.0f);
    HReduceFn fn = reinterpret_cast<HReduceFn>(kernels().get(id, c.build));
    assert_non_null(fn);
    if (!run(c, [&] { fn(sum.p, out2.p, a.p, c.M, c.N); }))
      fail_msg("%s: trapped", what.c_str());
    for (long long i = 0; i < c.M; ++i) {
      double s = 0.0, total = 0.0, m = -INFINITY;
      for (long long j = 0; j < c.N; ++j) {
        s += a.p[i * c.N + j];
        total += std::fabs(a.p[i * c.N + j]);
        m = std::fmax(m, a.p[i * c.N + j]);
      }
      if (!(std::fabs(sum.p[i] - s) <= 1e-5 * total + 1e-30))
        fail_msg("%s: row %lld sum %.9g, expected %.9g", what.c_str(), i, sum.p[i], s);
      if (id == FPK_hreduce_reduce_fused && out2.p[i] != (float)m)
        fail_msg("%s: row %lld max %.9g, expected %.9g", what.c_str(), i, out2.p[i], m);
    }
    if (id == FPK_hreduce_pointwise_fused) {
      std::vector<double> want(n);
      for (long long k = 0; k < n; ++k)
        want[k] = std::cos((double)a.p[k]);
      expect_rows(what, out2.p, want, c.M, c.N);
    }
  }
}

void test_hreduce_pointwise(void **) {
  test_hreduce(FPK_hreduce_pointwise_fused, "hreduce_pointwise_fused");
}
void test_hreduce_reduce(void **) {
  test_hreduce(FPK_hreduce_reduce_fused, "hreduce_reduce_fused");
}

/* ---- the lean ELEM builds (device_elem.cuh) ----
 * Each lean build against the registered kernel on the same arguments (the
 * same float operations: equal to the bit) and against float64, on shapes
 * within the build's precondition, which the planner must agree with
 * (fp_cuda_plan_elem_builds); grids from fewer threads than float4 items
 * (grid-stride rounds, a predicated last round) to more. Outputs are
 * poisoned with NaN, and padded output rows must keep their padding. */
struct ElemCase {
  long long M, N;
  unsigned grid, block;
};
/* the last two reach U float4 per thread (elem_chunks: at least kMinChunks
 * chunks of U * 32 vectors), with a partial last chunk */
const ElemCase kElemCases[] = {
    {1, 4, 1, 32},   {3, 8, 1, 32},    {5, 12, 2, 32},   {7, 1000, 3, 64},  {2, 4, 4, 64},
    {33, 36, 2, 64}, {1, 4100, 1, 32}, {64, 128, 8, 64}, {65, 1028, 5, 32}, {129, 516, 7, 32}};

std::string elem_what(const char *name, const char *build, const ElemCase &c, const char *more) {
  char s[200];
  std::snprintf(s, sizeof s, "%s %s, %lldx%lld, grid %u block %u%s", name, build, c.M, c.N, c.grid,
                c.block, more);
  return s;
}

bool elem_launch(const ElemCase &c, const std::function<void()> &kernel) {
  return fpemu::launch(c.grid, c.block, 1, kernel);
}

/* got (rows of stride ld) against want ([M, N]): |got - want| <= tol *
 * (|want| + 1); the padding of each row, beyond N, still NaN. */
void expect_elem(const std::string &what, const float *got, long long ld,
                 const std::vector<double> &want, long long M, long long N, double tol) {
  for (long long i = 0; i < M; ++i) {
    for (long long j = 0; j < N; ++j) {
      const double g = got[i * ld + j], w = want[i * N + j];
      if (!(std::fabs(g - w) <= tol * (std::fabs(w) + 1.0)))
        fail_msg("%s: element (%lld, %lld) is %.9g, expected %.9g", what.c_str(), i, j, g, w);
    }
    for (long long j = N; j < ld && i + 1 < M; ++j)
      if (!std::isnan(got[i * ld + j]))
        fail_msg("%s: padding (%lld, %lld) written", what.c_str(), i, j);
  }
}

void expect_same(const std::string &what, const float *a, const float *b, size_t n) {
  for (size_t k = 0; k < n; ++k)
    if (std::memcmp(a + k, b + k, sizeof(float)) != 0)
      fail_msg("%s: element %zu is %.9g, the registered build's %.9g", what.c_str(), k, a[k], b[k]);
}

uint64_t address_of(const float *p) { return (uint64_t) reinterpret_cast<uintptr_t>(p); }

void test_elem_pointwise_chain(void **) {
  const fp_kernel_id id = FPK_pointwise_chain_fused;
  PointwiseFn registered = reinterpret_cast<PointwiseFn>(kernels().get(id, -1));
  PointwiseFn lean = reinterpret_cast<PointwiseFn>(kernels().get(id, FP_ELEM_FLAT32));
  assert_non_null(registered);
  assert_non_null(lean);
  for (const ElemCase &c : kElemCases) {
    const long long n = c.M * c.N;
    const std::string what = elem_what("pointwise_chain_fused", "flat32", c, "");
    Array x(n, false, 0.0f), a(n, false, NAN), b(n, false, NAN);
    fill_random(x.p, n, 3 + (unsigned)n, -4.0f, 4.0f);
    const fp_elem_operand ops[2] = {{address_of(a.p), n, 1}, {address_of(x.p), n, 1}};
    if (!(fp_cuda_plan_elem_builds(1, n, ops, 2, false, (uint64_t)c.grid * c.block) &
          (1u << FP_ELEM_FLAT32)))
      fail_msg("%s: the planner refuses the case", what.c_str());
    if (!elem_launch(c, [&] { lean(a.p, x.p, n); }) ||
        !elem_launch(c, [&] { registered(b.p, x.p, n); }))
      fail_msg("%s: trapped", what.c_str());
    std::vector<double> want(n);
    for (long long k = 0; k < n; ++k) {
      double v = x.p[k], y = std::cos(v);
      v = v * y;
      y = std::fmax(v, y);
      want[k] = v + y;
    }
    expect_elem(what, a.p, n, want, 1, n, 1e-5);
    expect_same(what, a.p, b.p, (size_t)n);
  }
}

void test_elem_bias_gelu(void **) {
  const fp_kernel_id id = FPK_bias_gelu_fused;
  BiasGeluFn registered = reinterpret_cast<BiasGeluFn>(kernels().get(id, -1));
  BiasGeluFn lean = reinterpret_cast<BiasGeluFn>(kernels().get(id, FP_ELEM_ROWVEC32));
  assert_non_null(registered);
  assert_non_null(lean);
  for (const ElemCase &c : kElemCases) {
    const long long M = c.M, N = c.N, n = M * N;
    const std::string what = elem_what("bias_gelu_fused", "rowvec32", c, "");
    Array inp(n, false, 0.0f), bias(N, false, 0.0f), a(n, false, NAN), b(n, false, NAN);
    fill_random(inp.p, n, 5 + (unsigned)n, -3.0f, 3.0f);
    fill_random(bias.p, N, 6 + (unsigned)N, -1.0f, 1.0f);
    const fp_elem_operand ops[3] = {
        {address_of(a.p), N, 1}, {address_of(inp.p), N, 1}, {address_of(bias.p), 0, 1}};
    if (!(fp_cuda_plan_elem_builds(M, N, ops, 3, false, (uint64_t)c.grid * c.block) &
          (1u << FP_ELEM_ROWVEC32)))
      fail_msg("%s: the planner refuses the case", what.c_str());
    if (!elem_launch(c, [&] { lean(a.p, inp.p, bias.p, M, N); }) ||
        !elem_launch(c, [&] { registered(b.p, inp.p, bias.p, M, N); }))
      fail_msg("%s: trapped", what.c_str());
    std::vector<double> want(n);
    for (long long i = 0; i < M; ++i)
      for (long long j = 0; j < N; ++j) {
        const double v = (double)inp.p[i * N + j] + bias.p[j];
        want[i * N + j] =
            0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
      }
    expect_elem(what, a.p, N, want, M, N, 1e-5);
    expect_same(what, a.p, b.p, (size_t)n);
  }
}

/* bias_dropout_add: bias broadcast along rows or a full [M, N] with padded
 * rows, a residual and an output with padded rows (strides N + 4, N + 8),
 * training and not. Training draws the same mask in both builds; without
 * it the result is res + inp + bias. */
void test_elem_bias_dropout_add(void **) {
  const fp_kernel_id id = FPK_bias_dropout_add_fused;
  BiasDropoutAddFn registered = reinterpret_cast<BiasDropoutAddFn>(kernels().get(id, -1));
  assert_non_null(registered);
  for (int training = 0; training < 2; ++training)
    for (bool padded : {false, true})
      for (const ElemCase &c : kElemCases) {
        const fp_elem_build build = training ? FP_ELEM_ROWVEC32_TRAINING : FP_ELEM_ROWVEC32;
        BiasDropoutAddFn lean = reinterpret_cast<BiasDropoutAddFn>(kernels().get(id, build));
        assert_non_null(lean);
        const long long M = c.M, N = c.N, n = M * N;
        const long long sb0 = padded ? N + 4 : 0, sr0 = padded ? N + 4 : N,
                        so0 = padded ? N + 8 : N;
        const std::string what =
            elem_what("bias_dropout_add_fused", training ? "rowvec32 training" : "rowvec32", c,
                      padded ? ", padded rows" : "");
        Array inp(n, false, 0.0f), bias(padded ? M * sb0 : N, false, 0.0f),
            res(M * sr0, false, 0.0f), a(M * so0, false, NAN), b(M * so0, false, NAN);
        fill_random(inp.p, n, 8 + (unsigned)n, -2.0f, 2.0f);
        fill_random(bias.p, padded ? M * sb0 : N, 9 + (unsigned)N, -1.0f, 1.0f);
        fill_random(res.p, M * sr0, 10 + (unsigned)n, -2.0f, 2.0f);
        const fp_elem_operand ops[4] = {{address_of(a.p), so0, 1},
                                        {address_of(inp.p), N, 1},
                                        {address_of(bias.p), sb0, 1},
                                        {address_of(res.p), sr0, 1}};
        if (!(fp_cuda_plan_elem_builds(M, N, ops, 4, training != 0, (uint64_t)c.grid * c.block) &
              (1u << build)))
          fail_msg("%s: the planner refuses the case", what.c_str());
        const float p = 0.3f, scale = 1.0f / 0.7f;
        const long long seed = 20230814;
        if (!elem_launch(c,
                         [&] {
                           lean(a.p, inp.p, bias.p, res.p, M, N, sb0, 1, sr0, 1, so0, 1, p, scale,
                                seed, training);
                         }) ||
            !elem_launch(c, [&] {
              registered(b.p, inp.p, bias.p, res.p, M, N, sb0, 1, sr0, 1, so0, 1, p, scale, seed,
                         training);
            }))
          fail_msg("%s: trapped", what.c_str());
        std::vector<double> want(n);
        for (long long i = 0; i < M; ++i)
          for (long long j = 0; j < N; ++j) {
            double v = (double)inp.p[i * N + j] + bias.p[i * sb0 + j];
            if (training)
              v = fp_dropout_keep((fp_u64)seed, (fp_u64)(i * N + j), p) ? v * scale : 0.0;
            want[i * N + j] = res.p[i * sr0 + j] + v;
          }
        expect_elem(what, a.p, so0, want, M, N, 1e-5);
        expect_same(what, a.p, b.p, (size_t)(M * so0));
      }
}

/* The flatbias32 builds (rows whose length is not a multiple of 4): bias_gelu
 * and bias_dropout_add, training and not, over contiguous [M, N] with the
 * bias [N] broadcast (one float past 16-byte alignment: it is read per
 * element). N below 4 wraps the bias several times in one float4; the
 * n % 4 tail is scalar; the last cases reach U float4 per thread. Nothing
 * past the n outputs is written. */
const ElemCase kFlatBiasCases[] = {{1, 1, 1, 32},     {2, 1, 1, 32},    {5, 2, 1, 32},
                                   {3, 5, 2, 32},     {4, 3, 3, 32},    {13, 7, 1, 32},
                                   {13, 7, 4, 64},    {7, 4099, 3, 64}, {5, 10007, 4, 32},
                                   {1, 65537, 2, 32}, {3, 21851, 5, 32}};

void expect_flatbias(const std::string &what, const float *got, const float *registered,
                     const std::vector<double> &want, long long n) {
  expect_elem(what, got, n, want, 1, n, 1e-5);
  expect_same(what, got, registered, (size_t)n);
  for (long long k = n; k < n + 4; ++k)
    if (!std::isnan(got[k]))
      fail_msg("%s: element %lld past the end written", what.c_str(), k);
}

void test_elem_flatbias(void **) {
  const fp_kernel_id gelu_id = FPK_bias_gelu_fused, bda_id = FPK_bias_dropout_add_fused;
  BiasGeluFn gelu = reinterpret_cast<BiasGeluFn>(kernels().get(gelu_id, -1));
  BiasGeluFn gelu_lean = reinterpret_cast<BiasGeluFn>(kernels().get(gelu_id, FP_ELEM_FLATBIAS32));
  BiasDropoutAddFn bda = reinterpret_cast<BiasDropoutAddFn>(kernels().get(bda_id, -1));
  assert_non_null(gelu);
  assert_non_null(gelu_lean);
  assert_non_null(bda);
  for (const ElemCase &c : kFlatBiasCases) {
    const long long M = c.M, N = c.N, n = M * N;
    Array inp(n, false, 0.0f), bias(N, true, 0.0f), res(n, false, 0.0f), a(n, false, NAN),
        b(n, false, NAN);
    fill_random(inp.p, n, 11 + (unsigned)n, -3.0f, 3.0f);
    fill_random(bias.p, N, 12 + (unsigned)N, -1.0f, 1.0f);
    fill_random(res.p, n, 13 + (unsigned)n, -2.0f, 2.0f);
    const fp_elem_operand ops[4] = {{address_of(a.p), N, 1},
                                    {address_of(inp.p), N, 1},
                                    {address_of(bias.p), 0, 1},
                                    {address_of(res.p), N, 1}};
    const uint64_t threads = (uint64_t)c.grid * c.block;

    std::string what = elem_what("bias_gelu_fused", "flatbias32", c, "");
    if (fp_cuda_plan_elem_builds(M, N, ops, 3, false, threads) != (1u << FP_ELEM_FLATBIAS32))
      fail_msg("%s: the planner does not choose the build", what.c_str());
    if (!elem_launch(c, [&] { gelu_lean(a.p, inp.p, bias.p, M, N); }) ||
        !elem_launch(c, [&] { gelu(b.p, inp.p, bias.p, M, N); }))
      fail_msg("%s: trapped", what.c_str());
    std::vector<double> want(n);
    for (long long e = 0; e < n; ++e) {
      const double v = (double)inp.p[e] + bias.p[e % N];
      want[e] = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    }
    expect_flatbias(what, a.p, b.p, want, n);

    for (int training = 0; training < 2; ++training) {
      const fp_elem_build build = training ? FP_ELEM_FLATBIAS32_TRAINING : FP_ELEM_FLATBIAS32;
      BiasDropoutAddFn lean = reinterpret_cast<BiasDropoutAddFn>(kernels().get(bda_id, build));
      assert_non_null(lean);
      what = elem_what("bias_dropout_add_fused", training ? "flatbias32 training" : "flatbias32", c,
                       "");
      if (fp_cuda_plan_elem_builds(M, N, ops, 4, training != 0, threads) != (1u << build))
        fail_msg("%s: the planner does not choose the build", what.c_str());
      std::fill(a.p, a.p + n, NAN);
      std::fill(b.p, b.p + n, NAN);
      const float p = 0.3f, scale = 1.0f / 0.7f;
      const long long seed = 20261128;
      if (!elem_launch(c,
                       [&] {
                         lean(a.p, inp.p, bias.p, res.p, M, N, 0, 1, N, 1, N, 1, p, scale, seed,
                              training);
                       }) ||
          !elem_launch(c, [&] {
            bda(b.p, inp.p, bias.p, res.p, M, N, 0, 1, N, 1, N, 1, p, scale, seed, training);
          }))
        fail_msg("%s: trapped", what.c_str());
      for (long long e = 0; e < n; ++e) {
        double v = (double)inp.p[e] + bias.p[e % N];
        if (training)
          v = fp_dropout_keep((fp_u64)seed, (fp_u64)e, p) ? v * scale : 0.0;
        want[e] = res.p[e] + v;
      }
      expect_flatbias(what, a.p, b.p, want, n);
    }
  }
}

/* The emulation itself: a trap is reported, not swallowed. */
void test_trap_is_reported(void **) {
  assert_false(fpemu::launch(1, 32, 1, [] { __trap(); }));
  assert_true(fpemu::launch(2, 64, 2, [] { cooperative_groups::this_cluster().sync(); }));
}

} // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trap_is_reported), cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_double_softmax),   cmocka_unit_test(test_double_softmax_series),
      cmocka_unit_test(test_norm_chain),       cmocka_unit_test(test_softmax_backward),
      cmocka_unit_test(test_layernorm),        cmocka_unit_test(test_hreduce_pointwise),
      cmocka_unit_test(test_hreduce_reduce),   cmocka_unit_test(test_elem_pointwise_chain),
      cmocka_unit_test(test_elem_bias_gelu),   cmocka_unit_test(test_elem_bias_dropout_add),
      cmocka_unit_test(test_elem_flatbias),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
