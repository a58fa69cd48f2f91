/* fuseport OpenCL kernels, family reduce, continued: layernorm_fused and
 * norm_chain_fused, with layernorm's statistics (fp_stats_*, fp_team_stats,
 * fp_stream_stats, and fp_rc_stats over reduce.cl's register cache).
 *
 * The family's program is fp_device_common.h, common.cl, reduce.cl,
 * reduce_softmax.cl and this file, in that order (CMakeLists.txt,
 * FP_CL_MORE_reduce); nothing here uses reduce_softmax.cl. What this file
 * uses and does not define is reduce.cl's (the family's description, the
 * streaming passes, the register cache, the kernels' shape) or
 * common.cl's. */

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
 * kernels/cu/reduce_rows.cuh): where x is larger than the L2, the first pass's
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
