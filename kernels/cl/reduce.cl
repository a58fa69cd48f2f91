/* fuseport OpenCL kernels, family reduce: fused row reductions over a
 * contiguous row-major [M, N]. Semantics: kernels/kernels.def; the executable
 * specification is kernels/cpu/reduce.c (fp_device_common.h is prepended).
 *
 * ROWS geometry, in teams (common.cl): the group of L work-items splits into
 * teams of T, one row per team; work-item `lane` of a team handles the row's
 * float4 vectors lane, lane+T, ... (16-byte accesses, each of the team
 * coalesced) and its head and tail scalar `lane` (fp_rowpart: rows whose
 * start is not 16-byte aligned, N % 4 != 0).
 *
 * Two paths per kernel, chosen per launch (N and L are uniform):
 *  - cached: a row of at most T * FP_ROW_VEC vectors. Each work-item keeps
 *    its FP_ROW_VEC float4 (16 floats) in registers (fully unrolled loops
 *    with constant indices, so the arrays stay in registers), and the row is
 *    read from global memory once and written once, whatever the number of
 *    reductions. With the backend's planned geometry (opencl_backend.c,
 *    plan_rows) every row of up to 1024 * 16 = 16384 floats takes this path
 *    (T up to 1024), and shorter rows share a group (several teams).
 *    Previously 16 scalars per work-item at the host's L (8 for layernorm
 *    and softmax_backward, which therefore streamed for most N >= 1024).
 *  - streaming: longer rows (T = L) are re-read from global memory for each
 *    pass; softmax uses the online (running max, rescaled sum) form so that
 *    max and sum come from a single pass: read, read, write; layernorm's
 *    statistics likewise take one pass (fp_stream_stats), and so, mostly,
 *    do double_softmax's (its first softmax's power sums, below). The
 *    _local kernels (common.cl) read a row of up to FP_LOCAL_ROW_VEC
 *    vectors once: the first pass also stores each vector it loads in
 *    lcache (local memory), the later passes read it from there. Only
 *    softmax and norm_chain have one: double_softmax and layernorm are
 *    written for lcache too, but their _local kernels measured slower on
 *    an H100 (FP_ROWS_KERNELS_LOCAL_UNUSED, FP_ROWS_KERNELS_STATS,
 *    common.cl); softmax_backward would need two rows' worth. The
 *    _stream_back kernels (rows of 32768 floats or more, plan_rows) write
 *    each work-item's vectors last first in the output pass
 *    (fp_stream_first), where the first pass left them in L2; softmax's
 *    and norm_chain's _local_back kernels also keep the row's first
 *    FP_LOCAL_ROW_VEC vectors in lcache (fp_rows_local_prefix).
 * Reductions across the team (common.cl, fp_team_reduce: two barriers and
 * a few back-to-back local loads each) per row: softmax 2 (max, then sum;
 * see fp_softmax_stats), double_softmax 3 (a streamed row 2 where the
 * power sums' series holds, one of them of float4), norm_chain 3,
 * softmax_backward 1, layernorm 1 (fp_team_stats merges each work-item's
 * count, mean and centred squares, where a sum and then a sum of centred
 * squares took two). Between them the memory idles where a compute unit
 * holds few groups (long rows), so their latency counts.
 * Streaming loops issue FP_STREAM_UNROLL 16-byte loads (common.cl) before
 * any store: a compiler may not move a load above a store to a buffer that
 * might alias it (out may be x), so a plain load-compute-store loop keeps a
 * single load in flight.
 * Registers: the NVIDIA build caps a work-item at 64 registers (backend,
 * FP_CL_NV_BUILD_OPTIONS). softmax_backward keeps two rows (32 floats) and
 * layernorm one plus the w and b vectors of the output step. Not yet checked
 * against NVIDIA's compiler (bench/gpu_session.sh clrows reads its
 * -cl-nv-verbose report); the fallbacks are build options,
 * FUSEPORT_OPENCL_BUILD_OPTIONS="-DFP_ROW_VEC=2" (half the cache: the backend
 * still plans for 4, so rows of 8193..16384 stream, still correct) and
 * -DFP_STREAM_UNROLL=2 (half the loads in flight).
 */

/* ---- online softmax statistics -----------------------------------------------------
 * (m, s): running maximum and sum of exp(x - m). The special values follow the
 * two-pass form exp(x - max) / sum(exp(x - max)):
 *  - x = -inf adds exp(-inf - m) = 0, skipped so that a row that starts with
 *    -inf (m still -inf) does not compute exp(-inf - -inf) = NaN; a row of
 *    only -inf ends with m = -inf, and exp(x - m) = NaN in the output pass
 *    gives the NaN row PyTorch gives;
 *  - x = +inf: exp(x - x) = NaN poisons the sum, as exp(inf - inf) does in the
 *    two-pass form;
 *  - x = NaN fails x > m and adds exp(NaN) = NaN.
 * m itself is never NaN. */
static FP_INLINE void fp_online_add(float x, float *m, float *s) {
  if (x > *m) {
    *s = *s * exp(*m - x) + exp(x - x);
    *m = x;
  } else if (x != -INFINITY) {
    *s += exp(x - *m);
  }
}

/* Four values at once, with the same special values and one rescale at
 * most: fmax ignores a NaN (m stays a number), every NaN then adds
 * exp(NaN) = NaN; while m is -inf every value seen is -inf or NaN, and only
 * a NaN changes s. */
static FP_INLINE void fp_online_add4(float4 x, float *m, float *s) {
  const float mx = fmax(fmax(x.x, x.y), fmax(x.z, x.w));
  if (mx > *m) {
    *s *= exp(*m - mx); /* m = -inf: s * 0; s stays NaN if it was */
    *m = mx;
  }
  if (*m != -INFINITY)
    *s += (exp(x.x - *m) + exp(x.y - *m)) + (exp(x.z - *m) + exp(x.w - *m));
  else if (isnan(x.x) || isnan(x.y) || isnan(x.z) || isnan(x.w))
    *s = NAN;
}

/* Merges the statistics (m2, s2) of another part of the row into (m, s). */
static void fp_online_merge(float *m, float *s, float m2, float s2) {
  const float mm = fmax(*m, m2);
  /* equal maxima (including both -inf) need no rescaling: avoids inf - inf */
  const float a = *m == mm ? *s : *s * exp(*m - mm);
  const float b = m2 == mm ? s2 : s2 * exp(m2 - mm);
  *m = mm;
  *s = a + b;
}

/* A work-item's sum s of exp(x - m), rescaled to the row's maximum mm:
 * s * exp(m - mm); unchanged when m == mm (which covers -inf == -inf). */
static float fp_online_rescale(float s, float m, float mm) { return m == mm ? s : s * exp(m - mm); }

static FP_INLINE __global const float4 *fp_body(__global const float *xr, fp_rowpart p) {
  return (__global const float4 *)(xr + p.head);
}

static FP_INLINE __global float4 *fp_body_out(__global float *yr, fp_rowpart p) {
  return (__global float4 *)(yr + p.head);
}

/* The vector q of a row of w or b (not row-shifted): aligned when the row of
 * x is (head 0), else an unaligned vload4. */
static FP_INLINE float4 fp_load4(__global const float *base, long q, int aligned) {
  return aligned ? ((__global const float4 *)base)[q] : vload4(q, base);
}

/* Cache hints of a streamed row's reads (common.cl; plain loads where the
 * backend did not define FP_NV_PTX, i.e. off NVIDIA):
 *  - fp_ld4_pass1, the first read of a row that a later pass reads again:
 *    evict_last (fp_ld4_keep), as the CUDA kernels' ldg4, so that the lines
 *    outrank the output's and the flush's for the reread. -DFP_KEEP_STREAM=0
 *    loads them plainly;
 *  - fp_ld4_last_read, the output pass's read of the row, after which no pass
 *    reads it: evict-first (fp_ld4_first) with fp_ld4_keep's level, so that
 *    the lines it is done with go before the first-pass lines still to be
 *    reread; -DFP_LAST_READ_EVICT_FIRST=0 loads them plainly. (fp_body_at
 *    also serves double_softmax's middle pass where its power series does
 *    not hold, a rare row whose third pass then rereads from memory.)
 * On an H100 (NVIDIA OpenCL, 2026-11-26, 120e041:docs/results/2026-11-26-h100-cl-ptx/
 * r2, two alternating rounds) against plain loads: cells of 8-48 MiB
 * 1.12-1.13x (geometric mean per op; softmax 1024 x 1024 10.5 -> 8.8 us),
 * cells of 64 MiB-1.5 GiB 1.04-1.09x (softmax 2048 x 65536 460 -> 401 us,
 * softmax_backward 4096 x 32768 692 -> 565); in r1 the first-pass hint alone
 * gave 1.01-1.04x on the large cells. */
#if !defined(FP_KEEP_STREAM) || FP_KEEP_STREAM
#define fp_ld4_pass1(p) fp_ld4_keep(p)
#else
#define fp_ld4_pass1(p) (*(p))
#endif
#if defined(FP_NV_PTX) && FP_NV_PTX >= 2 &&                                                        \
    (!defined(FP_LAST_READ_EVICT_FIRST) || FP_LAST_READ_EVICT_FIRST)
#define fp_ld4_last_read(p) fp_ld4_first(p)
#else
#define fp_ld4_last_read(p) (*(p))
#endif

/* ---- streaming passes ----------------------------------------------------------------
 * A work-item visits its vectors q = lane, lane+T, ... in chunks of
 * FP_CHUNK / 4 vectors: inside a chunk, float4 accumulators take the vectors
 * FP_STREAM_UNROLL loads at a time; each chunk's result is then added to the work-item's
 * total. A long row with a small group would otherwise pile thousands of
 * terms onto one float accumulator, whose rounding error grows with the
 * count (measured on PoCL: 2.5e-5 relative on a double softmax of 262144 with
 * L = 32, 6e-7 blocked); blocking keeps it near the CPU's pairwise sums. The
 * head and tail scalars go straight to the total.
 *
 * The local row cache (mode LOCAL, fp_rows_local): the first pass over a
 * row stores each vector q it loads from global memory in lc[q] (`keep`),
 * the later passes and the output read lc[q] instead (`from_lc`), in the
 * same loops, so that the sums come out in the same order, bit for bit
 * those of _stream. The head and tail scalars still come from global
 * memory. No barrier guards lc: a work-item reads back only the vectors it
 * stored itself (q = lane, lane+T, ... of the same T), and the group's next
 * row (a grid of fewer groups than rows) overwrites each vector by the same
 * work-item, after it has read it for this row. That holds because
 * fp_rows_local requires the team to be the whole group: two teams would
 * store their rows at the same q. The functions are inlined so that in the
 * other specialisations, whose `keep` and `from_lc` are the constant 0, the
 * branches fold away. */

/* Vector q of the row's body: from lc where the first pass stored it, else
 * from global memory. */
static FP_INLINE float4 fp_body_at(__global const float4 *body, __local const float4 *lc,
                                   int from_lc, long q) {
  return from_lc ? lc[q] : fp_ld4_last_read(body + q);
}

/* Online statistics (m, s) of the work-item's share of the row x; stores
 * its vectors in lc if `keep`. */
static FP_INLINE void fp_online_row(__global const float *xr, fp_rowpart p, fp_team tm, float *m,
                                    float *s, __local float4 *lc, int keep) {
  const long T = tm.size;
  __global const float4 *body = fp_body(xr, p);
  if (p.mine_head)
    fp_online_add(xr[tm.lane], m, s);
  if (p.mine_tail)
    fp_online_add(xr[p.tail0 + tm.lane], m, s);
  long q = tm.lane;
  while (q < p.nvec) {
    const long end = min(p.nvec, q + (FP_CHUNK / 4) * T);
    float cm = -INFINITY, cs = 0.0f;
    for (; q + (FP_STREAM_UNROLL - 1) * T < end; q += FP_STREAM_UNROLL * T) {
      float4 v[FP_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u)
        v[u] = fp_ld4_pass1(body + q + u * T);
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u) {
        if (fp_keep_at(keep, q + u * T))
          lc[q + u * T] = v[u];
        fp_online_add4(v[u], &cm, &cs);
      }
    }
    for (; q < end; q += T) {
      const float4 a = fp_ld4_pass1(body + q);
      if (fp_keep_at(keep, q))
        lc[q] = a;
      fp_online_add4(a, &cm, &cs);
    }
    fp_online_merge(m, s, cm, cs);
  }
}

/* The work-item's share of sum_j x[j]; stores its vectors in lc if `keep`. */
static FP_INLINE float fp_stream_sum(__global const float *xr, fp_rowpart p, fp_team tm,
                                     __local float4 *lc, int keep) {
  const long T = tm.size;
  __global const float4 *body = fp_body(xr, p);
  float total = 0.0f;
  if (p.mine_head)
    total += xr[tm.lane];
  if (p.mine_tail)
    total += xr[p.tail0 + tm.lane];
  long q = tm.lane;
  while (q < p.nvec) {
    const long end = min(p.nvec, q + (FP_CHUNK / 4) * T);
    float4 acc[2] = {(float4)(0.0f), (float4)(0.0f)};
    for (; q + (FP_STREAM_UNROLL - 1) * T < end; q += FP_STREAM_UNROLL * T) {
      float4 v[FP_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u)
        v[u] = fp_ld4_pass1(body + q + u * T);
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u) {
        if (fp_keep_at(keep, q + u * T))
          lc[q + u * T] = v[u];
        acc[u & 1] += v[u];
      }
    }
    for (; q < end; q += T) {
      const float4 a = fp_ld4_pass1(body + q);
      if (fp_keep_at(keep, q))
        lc[q] = a;
      acc[0] += a;
    }
    total += fp_hsum4(acc[0] + acc[1]);
  }
  return total;
}

/* exp as the hardware's exp2 of x * log2(e) rounded to float: on NVIDIA's
 * OpenCL exp2 is one ex2.approx, against exp's range reduction around it,
 * and the relative error, about |x| * 6e-8 (below 6e-6 for |x| < 88), is
 * far inside the ops' 1e-4; as the CUDA kernels' fast_exp. For the
 * streamed double_softmax rows, which evaluate four exps per element in
 * passes 2 and 3 and are bound by them. */
#define FP_FAST_EXP(x) exp2((x)*M_LOG2E_F)

/* The work-item's share of sum_j exp(y[j] - m2), y = exp(x - m1) * inv1:
 * the second softmax's sum, y recomputed rather than stored and reread; the
 * vectors of x from lc if `from_lc`. */
static FP_INLINE float fp_stream_second_exp_sum(__global const float *xr, fp_rowpart p, fp_team tm,
                                                float m1, float inv1, float m2,
                                                __local const float4 *lc, int from_lc) {
  const long T = tm.size;
  __global const float4 *body = fp_body(xr, p);
  float total = 0.0f;
  if (p.mine_head)
    total += FP_FAST_EXP(FP_FAST_EXP(xr[tm.lane] - m1) * inv1 - m2);
  if (p.mine_tail)
    total += FP_FAST_EXP(FP_FAST_EXP(xr[p.tail0 + tm.lane] - m1) * inv1 - m2);
  long q = tm.lane;
  while (q < p.nvec) {
    const long end = min(p.nvec, q + (FP_CHUNK / 4) * T);
    float4 acc[2] = {(float4)(0.0f), (float4)(0.0f)};
    for (; q + (FP_STREAM_UNROLL - 1) * T < end; q += FP_STREAM_UNROLL * T) {
      float4 v[FP_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u)
        v[u] = fp_body_at(body, lc, from_lc, q + u * T);
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u)
        acc[u & 1] += FP_FAST_EXP(FP_FAST_EXP(v[u] - m1) * inv1 - m2);
    }
    for (; q < end; q += T)
      acc[0] += FP_FAST_EXP(FP_FAST_EXP(fp_body_at(body, lc, from_lc, q) - m1) * inv1 - m2);
    total += fp_hsum4(acc[0] + acc[1]);
  }
  return total;
}

/* ---- the power sums of double_softmax's first softmax ------------------------------
 * As the CUDA kernels' (kernels/cu/reduce.cu, MaxPowers and
 * second_inv_from_powers): a streamed row's first read also gathers
 * p_k = sum_j e_j^k, k = 1..3, of e_j = exp(x_j - m) (p_1 the softmax's
 * sum), each rescaled by r^k, r = exp(m_old - m_new), where the running
 * max moves. With y = 1/p_1 the first softmax is s_j = e_j y, in [0, y],
 * and the second one's sum is, every term positive,
 *   S = sum_j exp(s_j) = N + y p_1 + y^2 p_2/2 + y^3 p_3/6 + R,
 *   R = sum_j sum_{k>=4} s_j^k/k! <= e/4! sum_j s_j^4 <= e y^3/24
 * (s_j <= y <= 1, sum_j s_j = 1): against S >= N a relative error of at
 * most e y^3/(24 N). Where that is at most 2^-24 (y <= 0.26 at N = 32768,
 * i.e. p_1 >= 3.9; random rows have p_1 in the hundreds) the row is
 * written in its second read; otherwise (a peaked row, or a NaN y: a NaN,
 * +inf or all -inf row) the second read sums exp(s_j - y) and a third
 * writes: two reads and three exps per element instead of three and five.
 * The state is a float4 (m, p_1, p_2, p_3). The special values follow
 * fp_online_add4: m never NaN, a NaN or +inf makes the sums NaN, and
 * while m is -inf nothing is added (no exp(-inf - -inf)), so a work-item
 * with only -inf values contributes p_k = 0 at any row max. */

/* The state moved to the max mx >= m: p_k times r^k, r = 0 from m = -inf. */
static FP_INLINE float4 fp_powers_moved(float4 st, float mx) {
  const float r = st.x == mx ? 1.0f : FP_FAST_EXP(st.x - mx), r2 = r * r;
  return (float4)(mx, st.y * r, st.z * r2, st.w * (r2 * r));
}

static FP_INLINE void fp_powers_add(float x, float4 *st) {
  if (x > st->x)
    *st = fp_powers_moved(*st, x);
  if (x != -INFINITY) { /* a NaN x adds NaN */
    const float e = FP_FAST_EXP(x - st->x), e2 = e * e;
    *st += (float4)(0.0f, e, e2, e2 * e);
  }
}

static FP_INLINE void fp_powers_add4(float4 x, float4 *st) {
  const float mx = fmax(fmax(x.x, x.y), fmax(x.z, x.w));
  if (mx > st->x)
    *st = fp_powers_moved(*st, mx);
  if (st->x != -INFINITY) {
    const float4 e = FP_FAST_EXP(x - st->x), e2 = e * e;
    *st += (float4)(0.0f, fp_hsum4(e), fp_hsum4(e2), fp_hsum4(e2 * e));
  } else if (isnan(x.x) || isnan(x.y) || isnan(x.z) || isnan(x.w)) {
    st->yzw = (float3)(NAN);
  }
}

/* The union of two states; equal maxima (both -inf included) keep their
 * sums as they are. */
static FP_INLINE float4 fp_powers_merge(float4 a, float4 b) {
  const float mm = fmax(a.x, b.x);
  return fp_powers_moved(a, mm) + (float4)(0.0f, fp_powers_moved(b, mm).yzw);
}

/* (m, p_1, p_2, p_3) of the work-item's share of the row x, in FP_CHUNK
 * blocks as fp_online_row. */
static FP_INLINE float4 fp_powers_row(__global const float *xr, fp_rowpart p, fp_team tm) {
  const long T = tm.size;
  __global const float4 *body = fp_body(xr, p);
  float4 st = (float4)(-INFINITY, 0.0f, 0.0f, 0.0f);
  if (p.mine_head)
    fp_powers_add(xr[tm.lane], &st);
  if (p.mine_tail)
    fp_powers_add(xr[p.tail0 + tm.lane], &st);
  long q = tm.lane;
  while (q < p.nvec) {
    const long end = min(p.nvec, q + (FP_CHUNK / 4) * T);
    float4 ch = (float4)(-INFINITY, 0.0f, 0.0f, 0.0f);
    for (; q + (FP_STREAM_UNROLL - 1) * T < end; q += FP_STREAM_UNROLL * T) {
      float4 v[FP_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u)
        v[u] = fp_ld4_pass1(body + q + u * T);
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u)
        fp_powers_add4(v[u], &ch);
    }
    for (; q < end; q += T)
      fp_powers_add4(fp_ld4_pass1(body + q), &ch);
    st = fp_powers_merge(st, ch);
  }
  return st;
}

/* 1/sum_j exp(s_j - y), the second softmax's sum shifted by its max y =
 * 1/p_1, from the row's power sums t = (p_1, p_2, p_3) of n values; 0
 * where the series' remainder may exceed 2^-24 of the sum or y is NaN
 * (the test is written so that NaN fails it): the row then sums the exps
 * itself. */
static FP_INLINE float fp_second_inv_from_powers(float4 t, float y, long n) {
  const float y2 = y * y, y3 = y2 * y;
  if (!(y3 * (2.7182818f / 24.0f) <= (float)n * 0x1p-24f))
    return 0.0f;
  const float series = (y3 * t.z * (1.0f / 6.0f) + y2 * t.y * 0.5f) + y * t.x;
  return exp(y) / ((float)n + series); /* 1/(exp(-y) S) */
}

/* ---- layernorm's statistics ---------------------------------------------------------
 * A float4 (n, c, e, q) summarises a part of a row: its count n, a centre c
 * near its mean (the sum over n as rounded; 0 for an empty part), and the
 * moments about c, e = sum (x - c) and q = sum (x - c)^2. The part's mean is
 * c + e/n and its centred sum of squares q - e^2/n; parts merge exactly
 * about any new centre C (Chan et al.'s update, written for moments about a
 * centre): with d_i = c_i - C, e = sum e_i + n_i d_i and
 * q = sum q_i + d_i (2 e_i + n_i d_i). With every centre near its part's
 * mean, c_i - C is exact (Sterbenz) and e small, so no step cancels: the
 * form of (n, mean, M2) that keeps its rounded mean's error out of M2
 * (merging M2 about a rounded mean adds n * (its error)^2: on PoCL, rstd
 * came out 1.4% off for a row of 1e4 + U(-0.02, 0.02), 1e-8 this way). So
 * the row's statistics take one team reduction of these summaries
 * (fp_team_stats) instead of a sum reduction and then one of centred
 * squares, and a streamed row one read of x instead of two. The mean used
 * and reported is C + e/N (more accurate than the CPU's sum/N); a non-finite
 * C (a NaN or inf in the row, or an overflowing sum) is the mean itself, as
 * sum/N is.
 * Special values: a part holding an inf or NaN has c inf or NaN and e, q
 * NaN (x - c is), so the variance and rstd are NaN, as the two-pass form
 * gives. Empty parts: n_i * d_i and d_i * (2 e_i + n_i d_i) are 0 for a
 * finite C (0 * d, never 0 * d^2, which would overflow to 0 * inf = NaN);
 * counts are exact floats (up to 2^24). */

/* One value x. */
static FP_INLINE float4 fp_stats_one(float x) {
  const float e = x - x; /* NaN for an inf or NaN x */
  return (float4)(1.0f, x, e, e * e);
}

/* The centre of two or more parts, sum n_i c_i / n: the weighted mean,
 * inf where one is (a + (b - a) * w would make it inf - inf = NaN). */
static FP_INLINE float fp_stats_centre(float n, float nc) { return n > 0.0f ? nc / n : 0.0f; }

/* Part a's moments moved to centre C, added to (e, q). */
static FP_INLINE void fp_stats_add_moved(float4 a, float C, float *e, float *q) {
  const float d = a.y - C;
  *e += a.z + a.x * d;
  *q += a.w + d * (2.0f * a.z + a.x * d);
}

/* The union of two parts (one division). */
static FP_INLINE float4 fp_stats_merge(float4 a, float4 b) {
  const float n = a.x + b.x;
  const float C = fp_stats_centre(n, a.x * a.y + b.x * b.y);
  float e = 0.0f, q = 0.0f;
  fp_stats_add_moved(a, C, &e, &q);
  fp_stats_add_moved(b, C, &e, &q);
  return (float4)(n, C, e, q);
}

/* (n, c) of summary *a: pass 1 of the folds below reads only those, so
 * that the compiler does not keep pass 1's float4 live for pass 2 (it
 * spilled 30-60 bytes more of layernorm under ptxas -maxrregcount=64 with
 * clang's NVPTX backend). */
static FP_INLINE float2 fp_stats_nc(__local const float4 *a) {
  return ((__local const float2 *)a)[0];
}

/* Stage 1 of fp_team_stats on lane < W: the union of the team's summaries
 * lane + k * W, k < 4 * tm.fold (it points at the first): the count and
 * centre first, then the moments about them in a second pass, two
 * accumulators per pass, the loads in blocks of 4 that issue back to back.
 * Past the first block (T > 32) the stride is the constant FP_TEAM_WIDTH
 * (see fp_team_fold_slots). */
static FP_INLINE float4 fp_stats_fold(__local const float4 *it, fp_team tm) {
  const int cnt = 4 * tm.fold;
  float n[2] = {0.0f, 0.0f}, nc[2] = {0.0f, 0.0f};
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const float2 a = fp_stats_nc(it + u * tm.width);
    n[u & 1] += a.x;
    nc[u & 1] += a.x * a.y;
  }
  for (int k = 4; k < cnt; k += 4) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const float2 a = fp_stats_nc(it + (k + u) * FP_TEAM_WIDTH);
      n[u & 1] += a.x;
      nc[u & 1] += a.x * a.y;
    }
  }
  const float nn = n[0] + n[1];
  const float C = fp_stats_centre(nn, nc[0] + nc[1]);
  float e[2] = {0.0f, 0.0f}, q[2] = {0.0f, 0.0f};
#pragma unroll
  for (int u = 0; u < 4; ++u)
    fp_stats_add_moved(it[u * tm.width], C, &e[u & 1], &q[u & 1]);
  for (int k = 4; k < cnt; k += 4) {
#pragma unroll
    for (int u = 0; u < 4; ++u)
      fp_stats_add_moved(it[(k + u) * FP_TEAM_WIDTH], C, &e[u & 1], &q[u & 1]);
  }
  return (float4)(nn, C, e[0] + e[1], q[0] + q[1]);
}

/* Stage 2 of fp_team_stats: the union of the team's W <= FP_TEAM_WIDTH
 * partial summaries, unrolled, each load predicated on W. */
static FP_INLINE float4 fp_stats_fold_partials(__local const float4 *part, int cnt) {
  float n = 0.0f, nc = 0.0f;
#pragma unroll
  for (int j = 0; j < FP_TEAM_WIDTH; ++j) {
    if (j < cnt) {
      const float2 a = fp_stats_nc(part + j);
      n += a.x;
      nc += a.x * a.y;
    }
  }
  const float C = fp_stats_centre(n, nc);
  float e[2] = {0.0f, 0.0f}, q[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < FP_TEAM_WIDTH; ++j)
    if (j < cnt)
      fp_stats_add_moved(part[j], C, &e[j & 1], &q[j & 1]);
  return (float4)(n, C, e[0] + e[1], q[0] + q[1]);
}

/* The team's statistics from each work-item's `mine`: the two-barrier
 * scheme of fp_team_reduce (common.cl) over float4 summaries, the same on
 * every work-item of a whole team. stats[] holds FP_TEAM_STATS float4: the
 * work-items' summaries, then at FP_MAX_GROUP + base / 4 the team's W
 * partial ones (W <= T / 4 of them: the teams' ranges do not overlap).
 * Stage 1: work-item lane < W folds summaries lane, lane + W, ...
 * (4 * tm.fold of them; consecutive work-items read consecutive 16 bytes);
 * stage 2: every work-item folds the W partials (the same addresses across
 * the team: broadcasts). Reuse without a third
 * barrier is safe as for fp_team_reduce. Must be reached by the whole
 * group. */
static float4 fp_team_stats(float4 mine, fp_team tm, __local float4 *stats) {
  const int real = tm.index < tm.count;
  __local float4 *part = stats + FP_MAX_GROUP + (tm.base >> 2);
  stats[tm.base + tm.lane] = mine;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (real && tm.lane < tm.width)
    part[tm.lane] = fp_stats_fold(stats + tm.base + tm.lane, tm);
  barrier(CLK_LOCAL_MEM_FENCE);
  float4 total = mine;
  if (real)
    total = fp_stats_fold_partials(part, tm.width);
  return total;
}

/* layernorm's streamed x is loaded evict_last (fp_ld4_pass1) only up to
 * this many floats, the CUDA kernel's rule (kLayerNormKeepFloats in
 * kernels/cu/reduce.cu): where x is larger than the L2, the first pass's
 * evict_last lines crowd out the ones the second pass is about to reread. */
#ifndef FP_LAYERNORM_KEEP_FLOATS
#define FP_LAYERNORM_KEEP_FLOATS (1L << 23)
#endif

/* The statistics of the work-item's share of the row x, in one read;
 * stores its vectors in lc if `keep`, loads them evict_last if `keep_l2`
 * (fp_ld4_pass1). Each group of FP_STREAM_UNROLL
 * vectors loaded at once is summarised in registers (its mean as the
 * centre, the moments about it) and merged into the total: a division per
 * 16 elements. The total's sum is n * C + e, e the deviations from C: no
 * accumulator takes thousands of terms of the row's magnitude, so the
 * FP_CHUNK blocking of the sums is not needed. */
static FP_INLINE float4 fp_stream_stats(__global const float *xr, fp_rowpart p, fp_team tm,
                                        __local float4 *lc, int keep, int keep_l2) {
  const long T = tm.size;
  __global const float4 *body = fp_body(xr, p);
  float4 total = (float4)(0.0f);
  if (p.mine_head)
    total = fp_stats_one(xr[tm.lane]);
  if (p.mine_tail)
    total = fp_stats_merge(total, fp_stats_one(xr[p.tail0 + tm.lane]));
  long q = tm.lane;
  for (; q + (FP_STREAM_UNROLL - 1) * T < p.nvec; q += FP_STREAM_UNROLL * T) {
    float4 v[FP_STREAM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_STREAM_UNROLL; ++u)
      v[u] = keep_l2 ? fp_ld4_pass1(body + q + u * T) : body[q + u * T];
    float4 acc = (float4)(0.0f);
#pragma unroll
    for (int u = 0; u < FP_STREAM_UNROLL; ++u) {
      if (keep)
        lc[q + u * T] = v[u];
      acc += v[u];
    }
    const float c = fp_hsum4(acc) * (1.0f / (4 * FP_STREAM_UNROLL));
    float4 e = (float4)(0.0f), sq = (float4)(0.0f);
#pragma unroll
    for (int u = 0; u < FP_STREAM_UNROLL; ++u) {
      const float4 d = v[u] - c;
      e += d;
      sq += d * d;
    }
    total = fp_stats_merge(total,
                           (float4)((float)(4 * FP_STREAM_UNROLL), c, fp_hsum4(e), fp_hsum4(sq)));
  }
  for (; q < p.nvec; q += T) {
    const float4 a = keep_l2 ? fp_ld4_pass1(body + q) : body[q];
    if (keep)
      lc[q] = a;
    const float c = fp_hsum4(a) * 0.25f;
    const float4 d = a - c;
    total = fp_stats_merge(total, (float4)(4.0f, c, fp_hsum4(d), fp_hsum4(d * d)));
  }
  return total;
}

/* The work-item's share of sum_j a[j] * b[j] (a and b rows of the same
 * alignment: both at row * N). */
static float fp_stream_dot(__global const float *ar, __global const float *br, fp_rowpart p,
                           fp_team tm) {
  const long T = tm.size;
  __global const float4 *a4 = fp_body(ar, p), *b4 = fp_body(br, p);
  float total = 0.0f;
  if (p.mine_head)
    total += ar[tm.lane] * br[tm.lane];
  if (p.mine_tail)
    total += ar[p.tail0 + tm.lane] * br[p.tail0 + tm.lane];
  long q = tm.lane;
  while (q < p.nvec) {
    const long end = min(p.nvec, q + (FP_CHUNK / 4) * T);
    float4 acc[2] = {(float4)(0.0f), (float4)(0.0f)};
    for (; q + (FP_STREAM_UNROLL - 1) * T < end; q += FP_STREAM_UNROLL * T) {
      float4 x[FP_STREAM_UNROLL], y[FP_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u) {
        x[u] = fp_ld4_pass1(a4 + q + u * T);
        y[u] = fp_ld4_pass1(b4 + q + u * T);
      }
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u)
        acc[u & 1] += x[u] * y[u];
    }
    for (; q < end; q += T)
      acc[0] += fp_ld4_pass1(a4 + q) * fp_ld4_pass1(b4 + q);
    total += fp_hsum4(acc[0] + acc[1]);
  }
  return total;
}

/* ---- the register cache ----------------------------------------------------------------
 * v[k] holds vector lane + k*T of the row for k < cnt, h and t the head and
 * tail scalars of the work-item (valid when mine_head / mine_tail). Every
 * loop is unrolled over the constant FP_ROW_VEC, so v[] stays in registers,
 * and leaves at k == cnt: a branch, uniform but for the team's last
 * vectors, so that slots past the share cost no issue slots. The row is
 * walked with one pointer, so that no per-slot 64-bit address has to stay
 * live. */

typedef struct fp_rowcache {
  float4 v[FP_ROW_VEC];
  float h, t;
} fp_rowcache;

static FP_INLINE void fp_rc_load(fp_rowcache *c, __global const float *xr, fp_rowpart p,
                                 fp_team tm) {
  __global const float4 *q = fp_body(xr, p) + tm.lane;
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k, q += tm.size) {
    if (k >= p.cnt)
      continue;
    c->v[k] = fp_ld4_keep(q);
  }
  c->h = p.mine_head ? xr[tm.lane] : 0.0f;
  c->t = p.mine_tail ? xr[p.tail0 + tm.lane] : 0.0f;
}

static FP_INLINE void fp_rc_store(__global float *yr, const fp_rowcache *c, fp_rowpart p,
                                  fp_team tm) {
  __global float4 *q = fp_body_out(yr, p) + tm.lane;
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k, q += tm.size) {
    if (k >= p.cnt)
      continue;
    *q = c->v[k];
  }
  if (p.mine_head)
    yr[tm.lane] = c->h;
  if (p.mine_tail)
    yr[p.tail0 + tm.lane] = c->t;
}

static FP_INLINE float fp_rc_sum(const fp_rowcache *c, fp_rowpart p) {
  float4 acc = (float4)(0.0f);
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k) {
    if (k >= p.cnt)
      continue;
    acc += c->v[k];
  }
  float s = fp_hsum4(acc);
  if (p.mine_head)
    s += c->h;
  if (p.mine_tail)
    s += c->t;
  return s;
}

/* torch.amax of the work-item's share: NaN propagates. */
static FP_INLINE float fp_rc_max(const fp_rowcache *c, fp_rowpart p) {
  float4 acc = (float4)(-INFINITY);
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k) {
    if (k >= p.cnt)
      continue;
    acc = fp_maximum4(acc, c->v[k]);
  }
  float m = fp_hmax4(acc);
  if (p.mine_head)
    m = fp_maximum(m, c->h);
  if (p.mine_tail)
    m = fp_maximum(m, c->t);
  return m;
}

/* The statistics (n, c, e, q) of the work-item's share: its sum over n as
 * the centre, then the moments about it; two passes over the registers. */
static FP_INLINE float4 fp_rc_stats(const fp_rowcache *c, fp_rowpart p) {
  const float n = (float)(4 * p.cnt + p.mine_head + p.mine_tail);
  const float ctr = fp_stats_centre(n, fp_rc_sum(c, p));
  float4 e = (float4)(0.0f), q = (float4)(0.0f);
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k) {
    if (k >= p.cnt)
      continue;
    const float4 d = c->v[k] - ctr;
    e += d;
    q += d * d;
  }
  float es = fp_hsum4(e), qs = fp_hsum4(q);
  if (p.mine_head) {
    es += c->h - ctr;
    qs += (c->h - ctr) * (c->h - ctr);
  }
  if (p.mine_tail) {
    es += c->t - ctr;
    qs += (c->t - ctr) * (c->t - ctr);
  }
  return (float4)(n, ctr, es, qs);
}

/* v = exp(v - m) */
static FP_INLINE void fp_rc_exp_shift(fp_rowcache *c, float m, fp_rowpart p) {
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k) {
    if (k >= p.cnt)
      continue;
    c->v[k] = exp(c->v[k] - m);
  }
  c->h = exp(c->h - m);
  c->t = exp(c->t - m);
}

/* v *= s */
static FP_INLINE void fp_rc_scale(fp_rowcache *c, float s, fp_rowpart p) {
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k) {
    if (k >= p.cnt)
      continue;
    c->v[k] *= s;
  }
  c->h *= s;
  c->t *= s;
}

/* ---- the kernels ----------------------------------------------------------------------------
 * Every kernel has the same shape: each group walks blocks of tm.count rows
 * (group g takes blocks g, g+G, ...; team i of a block its row i); per row,
 * the work-item's partial results (cached or streaming branch, no barrier
 * inside), a team reduction that every work-item of the group reaches
 * unconditionally (the block loop's condition is uniform; work-items of a
 * team past the last row, or past the last team, are idle: they load and
 * store nothing), then the output (cached or streaming branch). Keeping
 * barriers out of the uniform cached/streaming branches is legal either way,
 * but PoCL 3.1 miscompiles a barrier inside such a branch (rows came out
 * partly unwritten), and it saves barriers. One exception: double_softmax's
 * second sum, skipped where the power sums' series holds, behind a branch
 * uniform over the group (fp_double_softmax_rows), which PoCL 3.1 passes
 * (test_double_softmax_series, planned and host geometry).
 * No if/else right before a barrier (or the kernel's end) whose arms both
 * end in a branch of their own (a loop, an if): PoCL 5.0's kernel compiler
 * aborts on it ("Assertion region_entry_barrier != NULL" in Kernel.cc, the
 * assertion of pocl/pocl#2281). Its IsolateRegions splits the edges into
 * the barrier off every single-entry single-exit region ending there,
 * innermost first, so the if/else, whose edges its arms' regions have
 * taken already, gets a split block with no predecessors, from which
 * parallel-region formation finds no entry barrier. Which such branches
 * survive to that pass depends on LLVM; the ones that aborted (softmax's
 * statistics, hreduce_reduce, gemm.cl's main loop; Ubuntu 24.04's PoCL 5.0
 * with LLVM 16, and PoCL 5.0 built with LLVM 15) are written otherwise:
 * the work a work-item skips folded into its bounds, so that one arm runs
 * over nothing (fp_rowpart_streamed, hreduce_reduce's loops), or the
 * if/else moved off the barrier (gemm.cl). PoCL 3.1, NVIDIA's OpenCL and
 * Oclgrind build either shape.
 * Idle work-items point at row 0 (never dereferenced), so that no pointer
 * past the buffer is formed from a row index past M. */

/* The part of the row a streaming pass visits: p where the work-item
 * streams (`streams`), else nothing (no head, tail or vectors), so that the
 * pass runs over nothing rather than sitting in one arm of an if/else (see
 * above: PoCL 5.0). */
static FP_INLINE fp_rowpart fp_rowpart_streamed(fp_rowpart p, int streams) {
  if (!streams) {
    p.nvec = 0;
    p.mine_head = 0;
    p.mine_tail = 0;
  }
  return p;
}

/* ---- softmax_fused ------------------------------------------------------------------------ */

/* The statistics of the row's softmax, reached by the whole group: its
 * maximum and 1 / sum(exp(v - max)), over the values v the cache holds
 * (cached) or that fp_online_row reads from xr (and stores in lc if
 * use_lc). The cache then holds exp(v - max). The row maximum comes from a
 * max-reduction; the cached path then takes exp(v - max) once per element,
 * the streaming path rescales its online sum to that maximum (one exp per
 * work-item, all in parallel), and a sum-reduction follows. One reduction
 * of (max, sum) pairs, as the CUDA kernels do with warp shuffles, would
 * save a reduction's two barriers but moves those rescales into the
 * reduction, where fp_online_merge costs an exp per pair: stage 1's W
 * work-items would take T / W exps each, one after another, and every
 * work-item W in stage 2 (at T = 1024, W = 8: 128 exps on each of 8
 * work-items of one warp, then 8192 for the group, some 500 cycles of an
 * SM's 16 exps per cycle, where a whole max-reduction takes a few hundred,
 * common.cl). Without subgroup shuffles two cheap reductions cost less. */
static FP_INLINE void fp_softmax_stats(fp_rowcache *c, int cached, int active,
                                       __global const float *xr, fp_rowpart p, fp_team tm,
                                       __local float4 *lc, int use_lc, __local float *slots,
                                       __local float *partials, float *row_max, float *inv) {
  float m = -INFINITY, s = 0.0f;
  if (cached)
    m = fp_rc_max(c, p);
  /* not `else if (active)`: an if/else before the barrier (see above).
   * Where `cached` is the constant 0 (_stream, _local) the code is the
   * same. */
  if (active)
    fp_online_row(xr, fp_rowpart_streamed(p, !cached), tm, &m, &s, lc, use_lc);
  *row_max = fp_team_max(m, tm, slots, partials);
  if (cached) {
    fp_rc_exp_shift(c, *row_max, p);
    s = fp_rc_sum(c, p);
  } else {
    s = fp_online_rescale(s, m, *row_max);
  }
  *inv = 1.0f / fp_team_sum(s, tm, slots, partials);
}

/* exp(x - max) * (1 / sum), the CPU's order of operations. */
static FP_INLINE void fp_softmax_rows(__global float *out, __global const float *x, long M, long N,
                                      __local float *slots, __local float *partials,
                                      __local float4 *lcache, const int mode) {
  const fp_team tm = fp_team_of(N);
  const int cached = fp_rows_cached(mode, N, tm);
  const int use_lc = fp_rows_local(mode, N, tm);
  /* LOCAL_BACK: the row's first vectors in lcache (fp_rows_local_prefix) */
  const int prefix_lc = fp_rows_local_prefix(mode, tm), keep_back = prefix_lc ? 2 : 0;
  if (mode == FP_ROWS_CACHED && !cached)
    return; /* the planner broke its rule: outputs stay unwritten, tests see it */
  const long T = tm.size;
  for (long rb = (long)get_group_id(0); rb * tm.count < M; rb += (long)get_num_groups(0)) {
    long row;
    const int active = fp_team_row(rb, M, tm, &row);
    const fp_rowpart p = fp_rowpart_of(row, N, tm, active);
    __global const float *xr = x + row * N;
    __global float *yr = out + row * N;
    fp_rowcache c;
    if (cached)
      fp_rc_load(&c, xr, p, tm);
    float row_max, inv;
    fp_softmax_stats(&c, cached, active, xr, p, tm, lcache,
                     use_lc      ? 1
                     : prefix_lc ? 2
                                 : 0,
                     slots, partials, &row_max, &inv);
    if (cached) {
      fp_rc_scale(&c, inv, p);
      fp_rc_store(yr, &c, p, tm);
    } else if (active) {
      __global const float4 *xb = fp_body(xr, p);
      __global float4 *yb = fp_body_out(yr, p);
      if (p.mine_head)
        yr[tm.lane] = exp(xr[tm.lane] - row_max) * inv;
      if (p.mine_tail)
        yr[p.tail0 + tm.lane] = exp(xr[p.tail0 + tm.lane] - row_max) * inv;
      if (mode == FP_ROWS_STREAM_BACK || mode == FP_ROWS_LOCAL_BACK) { /* fp_stream_first */
        long k, step;
        long q = fp_stream_first(p, tm, 1, &k, &step);
        for (; k >= FP_STREAM_UNROLL; k -= FP_STREAM_UNROLL, q += FP_STREAM_UNROLL * step) {
          float4 v[FP_STREAM_UNROLL];
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u)
            v[u] = fp_body_at(xb, lcache, fp_keep_at(keep_back, q + u * step), q + u * step);
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u)
            yb[q + u * step] = exp(v[u] - row_max) * inv;
        }
        for (; k > 0; --k, q += step)
          yb[q] = exp(fp_body_at(xb, lcache, fp_keep_at(keep_back, q), q) - row_max) * inv;
      } else {
        long q = tm.lane;
        for (; q + (FP_STREAM_UNROLL - 1) * T < p.nvec; q += FP_STREAM_UNROLL * T) {
          float4 v[FP_STREAM_UNROLL];
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u)
            v[u] = fp_body_at(xb, lcache, use_lc, q + u * T);
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u)
            yb[q + u * T] = exp(v[u] - row_max) * inv;
        }
        for (; q < p.nvec; q += T)
          yb[q] = exp(fp_body_at(xb, lcache, use_lc, q) - row_max) * inv;
      }
    }
  }
}
FP_ROWS_KERNELS(softmax, (__global float *out, __global const float *x, long M, long N),
                (out, x, M, N, slots, partials, lcache, mode))

/* ---- double_softmax_fused ------------------------------------------------------------------- */

/* Writes a streamed row's double softmax, exp(y - max2) * inv2, y =
 * exp(x - max1) * inv1 recomputed, the vectors of x from lc if `from_lc`;
 * each work-item's vectors last first if `back`: after a single read the
 * end of the row is the most recently read (the CUDA kernel's order). */
static FP_INLINE void fp_double_softmax_write(__global float *yr, __global const float *xr,
                                              fp_rowpart p, fp_team tm, float max1, float inv1,
                                              float max2, float inv2, __local const float4 *lc,
                                              int from_lc, int back) {
  __global const float4 *xb = fp_body(xr, p);
  __global float4 *yb = fp_body_out(yr, p);
  if (p.mine_head)
    yr[tm.lane] = FP_FAST_EXP(FP_FAST_EXP(xr[tm.lane] - max1) * inv1 - max2) * inv2;
  if (p.mine_tail)
    yr[p.tail0 + tm.lane] =
        FP_FAST_EXP(FP_FAST_EXP(xr[p.tail0 + tm.lane] - max1) * inv1 - max2) * inv2;
  long k, step;
  long q = fp_stream_first(p, tm, back, &k, &step);
  for (; k >= FP_STREAM_UNROLL; k -= FP_STREAM_UNROLL, q += FP_STREAM_UNROLL * step) {
    float4 v[FP_STREAM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_STREAM_UNROLL; ++u)
      v[u] = fp_body_at(xb, lc, from_lc, q + u * step);
#pragma unroll
    for (int u = 0; u < FP_STREAM_UNROLL; ++u)
      yb[q + u * step] = FP_FAST_EXP(FP_FAST_EXP(v[u] - max1) * inv1 - max2) * inv2;
  }
  for (; k > 0; --k, q += step)
    yb[q] = FP_FAST_EXP(FP_FAST_EXP(fp_body_at(xb, lc, from_lc, q) - max1) * inv1 - max2) * inv2;
}

/* softmax(softmax(x)), each softmax as in softmax_fused. Streaming (_stream
 * and the generic kernel): pass 1 gives the row's max and the power sums of
 * its first softmax (fp_powers_row), and the second softmax's sum follows
 * from them where their series holds (fp_second_inv_from_powers): pass 2
 * writes, backwards, two reads and one write. Otherwise pass 2 sums the
 * second softmax's exps, y = softmax(x) recomputed on the fly, and pass 3
 * writes: three reads. The _local kernel (narrow slots:
 * FP_ROWS_KERNELS_LOCAL_UNUSED) takes the three passes always, the
 * statistics of x from fp_softmax_stats, passes 2 and 3 reading lcache.
 * Reductions per streamed row: the max, the power sums in one float4
 * reduction (fp_team_sum4), and without the series the second sum: 4
 * barriers or 6, where max, sum, sum took 6. The generic kernel reduces its
 * cached rows' sum as a float4 too, so that the reductions stay out of the
 * cached/streaming branches (it spills more: 156 bytes, 36 before; _stream
 * none, at 64 registers, ptxas sm_90); _cached keeps max, sum, sum of
 * floats. On an H100 (NVIDIA OpenCL, 2026-11-25, least of three medians,
 * against three passes): 2048 x 65536 647 -> 504 us, 1024 x 65536 326 ->
 * 260, 512 x 16384 44.7 -> 38.1, 4096 x 6000 98.9 -> 93.2; 8192 x 8192
 * 211 -> 216 (its three reads ran at 0.90 of copy bandwidth already) and
 * 128 x 32768 23.5 -> 23.8 slower. Writing forwards: 2048 x 65536 542 us. */
static FP_INLINE void fp_double_softmax_rows(__global float *out, __global const float *x, long M,
                                             long N, __local float *slots, __local float *partials,
                                             __local float4 *lcache, const int mode) {
  const fp_team tm = fp_team_of(N);
  const int cached = fp_rows_cached(mode, N, tm);
  const int use_lc = fp_rows_local(mode, N, tm);
  /* the kernels whose slots are wide (FP_ROWS_DECL_WIDE) take the power sums */
  const int powers = mode == FP_ROWS_ANY || mode == FP_ROWS_STREAM;
  if (mode == FP_ROWS_CACHED && !cached)
    return; /* the planner broke its rule: outputs stay unwritten, tests see it */
  for (long rb = (long)get_group_id(0); rb * tm.count < M; rb += (long)get_num_groups(0)) {
    long row;
    const int active = fp_team_row(rb, M, tm, &row);
    const fp_rowpart p = fp_rowpart_of(row, N, tm, active);
    __global const float *xr = x + row * N;
    __global float *yr = out + row * N;
    fp_rowcache c;
    if (cached)
      fp_rc_load(&c, xr, p, tm);
    float max1, inv1, inv2 = 0.0f; /* inv2 > 0: from the power sums */
    if (powers) {                  /* a constant of the kernel */
      float4 st = (float4)(-INFINITY, 0.0f, 0.0f, 0.0f);
      if (cached)
        st.x = fp_rc_max(&c, p);
      else if (active)
        st = fp_powers_row(xr, p, tm);
      max1 = fp_team_max(st.x, tm, slots, partials);
      float4 mine; /* (p_1, p_2, p_3) at the row's max */
      if (cached) {
        fp_rc_exp_shift(&c, max1, p);
        mine = (float4)(fp_rc_sum(&c, p), 0.0f, 0.0f, 0.0f);
      } else {
        mine = (float4)(fp_powers_moved(st, max1).yzw, 0.0f);
      }
      const float4 t = fp_team_sum4(mine, tm, (__local float4 *)slots, partials);
      inv1 = 1.0f / t.x;
      /* The branch on inv2 below holds a barrier, so the series only where
       * the team is the whole group, whose work-items all hold t: several
       * rows per group, or idle work-items (a _stream launch off the
       * planner's geometry), take the three passes. */
      if (!cached && tm.size == (int)get_local_size(0))
        inv2 = fp_second_inv_from_powers(t, inv1, N);
    } else {
      fp_softmax_stats(&c, cached, active, xr, p, tm, lcache, use_lc, slots, partials, &max1,
                       &inv1);
    }
    /* y = softmax(x) has the maximum exp(0) * inv1 = inv1 exactly, so the
     * second softmax is shifted by it without a max-reduction (any shift
     * gives the same softmax; y - inv1 <= 0 keeps exp in range). A row
     * whose softmax is NaN (a NaN, +inf, all -inf) stays NaN. */
    const float max2 = inv1;
    const int series = inv2 > 0.0f; /* uniform over the group */
    if (!series) {
      float s2 = 0.0f;
      if (cached) {
        fp_rc_scale(&c, inv1, p); /* the cache holds y = softmax(x) */
        fp_rc_exp_shift(&c, max2, p);
        s2 = fp_rc_sum(&c, p);
      } else if (active) {
        s2 = fp_stream_second_exp_sum(xr, p, tm, max1, inv1, max2, lcache, use_lc);
      }
      inv2 = 1.0f / fp_team_sum(s2, tm, slots, partials);
    }
    if (cached) {
      fp_rc_scale(&c, inv2, p);
      fp_rc_store(yr, &c, p, tm);
    } else if (active) {
      fp_double_softmax_write(yr, xr, p, tm, max1, inv1, max2, inv2, lcache, use_lc, series);
    }
  }
}
FP_ROWS_KERNELS_LOCAL_UNUSED(double_softmax,
                             (__global float *out, __global const float *x, long M, long N),
                             (out, x, M, N, slots, partials, lcache, mode))

/* ---- softmax_backward_fused ---------------------------------------------------------------- */

/* grad_in = y * (grad_out - sum_j grad_out*y). The cached path keeps both
 * rows in registers, FP_ROW_VEC vectors of each per work-item. */
static FP_INLINE void fp_softmax_backward_rows(__global float *grad_in,
                                               __global const float *grad_out,
                                               __global const float *y, long M, long N,
                                               __local float *slots, __local float *partials,
                                               const int mode) {
  const fp_team tm = fp_team_of(N);
  const int cached = fp_rows_cached(mode, N, tm);
  if (mode == FP_ROWS_CACHED && !cached)
    return; /* the planner broke its rule: outputs stay unwritten, tests see it */
  const long T = tm.size;
  for (long rb = (long)get_group_id(0); rb * tm.count < M; rb += (long)get_num_groups(0)) {
    long row;
    const int active = fp_team_row(rb, M, tm, &row);
    const fp_rowpart p = fp_rowpart_of(row, N, tm, active);
    const long off = row * N;
    __global const float *gr = grad_out + off, *yr = y + off;
    __global float *dr = grad_in + off;
    fp_rowcache g, yv;
    float part = 0.0f;
    if (cached) {
      fp_rc_load(&g, gr, p, tm);
      fp_rc_load(&yv, yr, p, tm);
      float4 acc = (float4)(0.0f);
#pragma unroll
      for (int k = 0; k < FP_ROW_VEC; ++k) {
        if (k >= p.cnt)
          continue;
        acc += g.v[k] * yv.v[k];
      }
      part = fp_hsum4(acc);
      if (p.mine_head)
        part += g.h * yv.h;
      if (p.mine_tail)
        part += g.t * yv.t;
    } else if (active) {
      part = fp_stream_dot(gr, yr, p, tm);
    }
    const float dot = fp_team_sum(part, tm, slots, partials);
    if (cached) {
      __global float4 *pd = fp_body_out(dr, p) + tm.lane;
#pragma unroll
      for (int k = 0; k < FP_ROW_VEC; ++k, pd += tm.size) {
        if (k >= p.cnt)
          continue;
        *pd = yv.v[k] * (g.v[k] - dot);
      }
      if (p.mine_head)
        dr[tm.lane] = yv.h * (g.h - dot);
      if (p.mine_tail)
        dr[p.tail0 + tm.lane] = yv.t * (g.t - dot);
    } else if (active) {
      __global const float4 *gb = fp_body(gr, p), *yb = fp_body(yr, p);
      __global float4 *db = fp_body_out(dr, p);
      if (p.mine_head)
        dr[tm.lane] = yr[tm.lane] * (gr[tm.lane] - dot);
      if (p.mine_tail)
        dr[p.tail0 + tm.lane] = yr[p.tail0 + tm.lane] * (gr[p.tail0 + tm.lane] - dot);
      if (mode == FP_ROWS_STREAM_BACK) { /* see fp_stream_first */
        long k, step;
        long q = fp_stream_first(p, tm, 1, &k, &step);
        for (; k >= FP_STREAM_UNROLL; k -= FP_STREAM_UNROLL, q += FP_STREAM_UNROLL * step) {
          float4 g4[FP_STREAM_UNROLL], y4[FP_STREAM_UNROLL];
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u) {
            g4[u] = fp_ld4_last_read(gb + q + u * step);
            y4[u] = fp_ld4_last_read(yb + q + u * step);
          }
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u)
            db[q + u * step] = y4[u] * (g4[u] - dot);
        }
        for (; k > 0; --k, q += step)
          db[q] = fp_ld4_last_read(yb + q) * (fp_ld4_last_read(gb + q) - dot);
      } else {
        long q = tm.lane;
        for (; q + (FP_STREAM_UNROLL - 1) * T < p.nvec; q += FP_STREAM_UNROLL * T) {
          float4 g4[FP_STREAM_UNROLL], y4[FP_STREAM_UNROLL];
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u) {
            g4[u] = fp_ld4_last_read(gb + q + u * T);
            y4[u] = fp_ld4_last_read(yb + q + u * T);
          }
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u)
            db[q + u * T] = y4[u] * (g4[u] - dot);
        }
        for (; q < p.nvec; q += T)
          db[q] = fp_ld4_last_read(yb + q) * (fp_ld4_last_read(gb + q) - dot);
      }
    }
  }
}
FP_ROWS_KERNELS_NO_LOCAL(softmax_backward,
                         (__global float *grad_in, __global const float *grad_out,
                          __global const float *y, long M, long N),
                         (grad_in, grad_out, y, M, N, slots, partials, mode))

/* ---- layernorm_fused ------------------------------------------------------------------------ */

/* mean = sum/N (computed as C + e/N: layernorm's statistics above); var =
 * sum((x - mean)^2)/N (biased; centred squares, which do not cancel as
 * E[x^2] - mean^2 would); rstd = 1/sqrt(var + eps);
 * out = (x - mean) * rstd * w + b. Both paths summarise each work-item's
 * share as (count, centre, moments about it) and merge the summaries in
 * one team reduction (fp_team_stats), where the sum and then the centred
 * squares took two. Cached: FP_ROW_VEC vectors per work-item, w and b read
 * at the output step (they stay in L1/L2 across rows); streaming: two
 * reads of x (statistics, output), where the sum and the centred squares
 * took one each, or one through lcache (local). The group's scratch is
 * stats[] (FP_ROWS_KERNELS_STATS), no slots[] or partials[]. */
static FP_INLINE void fp_layernorm_rows(__global float *out, __global float *mean_out,
                                        __global float *rstd_out, __global const float *x,
                                        __global const float *w, __global const float *b, long M,
                                        long N, float eps, __local float4 *stats,
                                        __local float4 *lcache, const int mode) {
  const fp_team tm = fp_team_of(N);
  const int cached = fp_rows_cached(mode, N, tm);
  const int use_lc = fp_rows_local(mode, N, tm);
  if (mode == FP_ROWS_CACHED && !cached)
    return; /* the planner broke its rule: outputs stay unwritten, tests see it */
  const long T = tm.size;
  for (long rb = (long)get_group_id(0); rb * tm.count < M; rb += (long)get_num_groups(0)) {
    long row;
    const int active = fp_team_row(rb, M, tm, &row);
    const fp_rowpart p = fp_rowpart_of(row, N, tm, active);
    __global const float *xr = x + row * N;
    __global float *yr = out + row * N;
    /* w and b from element head on: aligned vectors when head is 0 */
    __global const float *wh = w + p.head, *bh = b + p.head;
    const int waligned = p.head == 0;
    fp_rowcache c;
    float4 mine = (float4)(0.0f);
    if (cached) {
      fp_rc_load(&c, xr, p, tm);
      mine = fp_rc_stats(&c, p);
    } else if (active) {
      mine = fp_stream_stats(xr, p, tm, lcache, use_lc, M * N <= FP_LAYERNORM_KEEP_FLOATS);
    }
    const float4 st = fp_team_stats(mine, tm, stats); /* n = N: (N, C, e, q) */
    const float mean = isfinite(st.y) ? st.y + st.z / (float)N : st.y;
    float m2 = st.w - st.z * (st.z / (float)N);
    m2 = m2 < 0.0f ? 0.0f : m2; /* rounding (a constant row); NaN stays NaN */
    const float rstd = 1.0f / sqrt(m2 / (float)N + eps);
    if (cached) {
      __global float4 *py = fp_body_out(yr, p) + tm.lane;
      long q = tm.lane;
#pragma unroll
      for (int k = 0; k < FP_ROW_VEC; ++k, py += tm.size, q += T) {
        if (k >= p.cnt)
          continue;
        *py = (c.v[k] - mean) * rstd * fp_load4(wh, q, waligned) + fp_load4(bh, q, waligned);
      }
      if (p.mine_head)
        yr[tm.lane] = (c.h - mean) * rstd * w[tm.lane] + b[tm.lane];
      if (p.mine_tail)
        yr[p.tail0 + tm.lane] = (c.t - mean) * rstd * w[p.tail0 + tm.lane] + b[p.tail0 + tm.lane];
    } else if (active) {
      __global const float4 *xb = fp_body(xr, p);
      __global float4 *yb = fp_body_out(yr, p);
      if (p.mine_head)
        yr[tm.lane] = (xr[tm.lane] - mean) * rstd * w[tm.lane] + b[tm.lane];
      if (p.mine_tail) {
        const long j = p.tail0 + tm.lane;
        yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
      }
      if (mode == FP_ROWS_STREAM_BACK) { /* see fp_stream_first */
        long k, step;
        long q = fp_stream_first(p, tm, 1, &k, &step);
        for (; k >= 2; k -= 2, q += 2 * step) {
          const long q1 = q + step;
          const float4 x0 = fp_ld4_last_read(xb + q), x1 = fp_ld4_last_read(xb + q1);
          const float4 w0 = fp_load4(wh, q, waligned), w1 = fp_load4(wh, q1, waligned);
          const float4 b0 = fp_load4(bh, q, waligned), b1 = fp_load4(bh, q1, waligned);
          yb[q] = (x0 - mean) * rstd * w0 + b0;
          yb[q1] = (x1 - mean) * rstd * w1 + b1;
        }
        if (k > 0)
          yb[q] = (fp_ld4_last_read(xb + q) - mean) * rstd * fp_load4(wh, q, waligned) +
                  fp_load4(bh, q, waligned);
      } else {
        long q = tm.lane;
        for (; q + T < p.nvec; q += 2 * T) {
          const float4 x0 = fp_body_at(xb, lcache, use_lc, q);
          const float4 x1 = fp_body_at(xb, lcache, use_lc, q + T);
          const float4 w0 = fp_load4(wh, q, waligned), w1 = fp_load4(wh, q + T, waligned);
          const float4 b0 = fp_load4(bh, q, waligned), b1 = fp_load4(bh, q + T, waligned);
          yb[q] = (x0 - mean) * rstd * w0 + b0;
          yb[q + T] = (x1 - mean) * rstd * w1 + b1;
        }
        for (; q < p.nvec; q += T)
          yb[q] = (fp_body_at(xb, lcache, use_lc, q) - mean) * rstd * fp_load4(wh, q, waligned) +
                  fp_load4(bh, q, waligned);
      }
    }
    if (active && tm.lane == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}
FP_ROWS_KERNELS_STATS(layernorm,
                      (__global float *out, __global float *mean_out, __global float *rstd_out,
                       __global const float *x, __global const float *w, __global const float *b,
                       long M, long N, float eps),
                      (out, mean_out, rstd_out, x, w, b, M, N, eps, stats, lcache, mode))

/* ---- norm_chain_fused -------------------------------------------------------------------- */

/* Three times: s = sum_j(row); row *= s. Streaming: the intermediate rows are
 * recomputed from x, never stored: two reads (see below; one through
 * lcache, use_lc) and one write instead of three reads and three writes. */
static FP_INLINE void fp_norm_chain_rows(__global float *out, __global const float *x, long M,
                                         long N, __local float *slots, __local float *partials,
                                         __local float4 *lcache, const int mode) {
  const fp_team tm = fp_team_of(N);
  const int cached = fp_rows_cached(mode, N, tm);
  const int use_lc = fp_rows_local(mode, N, tm);
  /* LOCAL_BACK: the row's first vectors in lcache (fp_rows_local_prefix) */
  const int prefix_lc = fp_rows_local_prefix(mode, tm), keep_back = prefix_lc ? 2 : 0;
  if (mode == FP_ROWS_CACHED && !cached)
    return; /* the planner broke its rule: outputs stay unwritten, tests see it */
  const long T = tm.size;
  for (long rb = (long)get_group_id(0); rb * tm.count < M; rb += (long)get_num_groups(0)) {
    long row;
    const int active = fp_team_row(rb, M, tm, &row);
    const fp_rowpart p = fp_rowpart_of(row, N, tm, active);
    __global const float *xr = x + row * N;
    __global float *yr = out + row * N;
    fp_rowcache c;
    if (cached)
      fp_rc_load(&c, xr, p, tm);
    /* A cached row takes the three sums literally. A streamed one is read
     * twice, not four times: with s1 = sum_j x_j, the later sums are
     * s2 = sum_j x_j*s1 = s1^2 and s3 = sum_j x_j*s1*s2 = s2^2 in exact
     * arithmetic, so only s1 is read (as the CUDA kernel does); the result
     * differs from the literal chain by rounding, and where the literal
     * chain turns +-inf products into NaN sums. Every work-item still meets
     * the three reductions' barriers (a streamed row reduces zeros in the
     * last two: barriers stay out of the cached/streaming branches). */
    float s[3];
#pragma unroll
    for (int step = 0; step < 3; ++step) { /* unrolled: s[] keeps constant indices */
      float part = 0.0f;
      if (cached)
        part = fp_rc_sum(&c, p);
      else if (active && step == 0)
        part = fp_stream_sum(xr, p, tm, lcache, use_lc ? 1 : prefix_lc ? 2 : 0);
      s[step] = fp_team_sum(part, tm, slots, partials);
      if (cached)
        fp_rc_scale(&c, s[step], p);
    }
    const float s1 = s[0], s2 = cached ? s[1] : s1 * s1, s3 = cached ? s[2] : s2 * s2;
    if (cached) {
      fp_rc_store(yr, &c, p, tm);
    } else if (active) {
      __global const float4 *xb = fp_body(xr, p);
      __global float4 *yb = fp_body_out(yr, p);
      if (p.mine_head)
        yr[tm.lane] = ((xr[tm.lane] * s1) * s2) * s3;
      if (p.mine_tail)
        yr[p.tail0 + tm.lane] = ((xr[p.tail0 + tm.lane] * s1) * s2) * s3;
      if (mode == FP_ROWS_STREAM_BACK || mode == FP_ROWS_LOCAL_BACK) { /* fp_stream_first */
        long k, step;
        long q = fp_stream_first(p, tm, 1, &k, &step);
        for (; k >= FP_STREAM_UNROLL; k -= FP_STREAM_UNROLL, q += FP_STREAM_UNROLL * step) {
          float4 v[FP_STREAM_UNROLL];
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u)
            v[u] = fp_body_at(xb, lcache, fp_keep_at(keep_back, q + u * step), q + u * step);
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u)
            yb[q + u * step] = ((v[u] * s1) * s2) * s3;
        }
        for (; k > 0; --k, q += step)
          yb[q] = ((fp_body_at(xb, lcache, fp_keep_at(keep_back, q), q) * s1) * s2) * s3;
      } else {
        long q = tm.lane;
        for (; q + (FP_STREAM_UNROLL - 1) * T < p.nvec; q += FP_STREAM_UNROLL * T) {
          float4 v[FP_STREAM_UNROLL];
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u)
            v[u] = fp_body_at(xb, lcache, use_lc, q + u * T);
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u)
            yb[q + u * T] = ((v[u] * s1) * s2) * s3;
        }
        for (; q < p.nvec; q += T)
          yb[q] = ((fp_body_at(xb, lcache, use_lc, q) * s1) * s2) * s3;
      }
    }
  }
}
FP_ROWS_KERNELS(norm_chain, (__global float *out, __global const float *x, long M, long N),
                (out, x, M, N, slots, partials, lcache, mode))
