/* fuseport OpenCL kernels, family reduce, continued: the softmax kernels,
 * softmax_fused, double_softmax_fused and softmax_backward_fused, with the
 * helpers only they use: the streamed sum of the second softmax
 * (FP_FAST_EXP, fp_stream_second_exp_sum), the power sums of
 * double_softmax's first softmax (fp_powers_*, fp_second_inv_from_powers)
 * and softmax_backward's streamed dot product (fp_stream_dot).
 *
 * The family's program is fp_device_common.h, common.cl, reduce.cl, this
 * file and reduce_norm.cl, in that order (CMakeLists.txt,
 * FP_CL_MORE_reduce). What this file uses and does not define is
 * reduce.cl's (the family's description, the online softmax statistics,
 * the streaming passes, the register cache) or common.cl's; "above" in a
 * comment here may point into reduce.cl, notably at its "the kernels". */

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
