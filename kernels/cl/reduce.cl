/* fuseport OpenCL kernels, family reduce: fused row reductions over a
 * contiguous row-major [M, N]. Semantics: kernels/kernels.def; the executable
 * specification is kernels/cpu/reduce.c (fp_device_common.h is prepended).
 *
 * ROWS geometry: a group of L work-items (a power of two in [32, 1024]) owns
 * rows g, g+G, ...; work-item t handles the elements t, t+L, t+2L, ... of the
 * row, so each load and store of the group is coalesced.
 *
 * Two paths per kernel, chosen per launch (N and L are uniform):
 *  - cached: N <= L * FP_ROW_CACHE (FP_ROW_CACHE_SMALL for two kernels).
 *    Each work-item keeps its elements in registers (fully unrolled loops
 *    with constant indices, so the arrays stay in registers), and the row is
 *    read from global memory once and written once, whatever the number of
 *    reductions. Measured on an H100: about 16 elements per work-item is the
 *    fastest geometry (softmax of 1000: 2850 GB/s with L = 64, 2260 with
 *    L = 128, 210 with L = 1024; a wide group on a short row idles and pays
 *    more for its reductions).
 *  - streaming: longer rows are re-read from global memory for each pass;
 *    softmax uses the online (running max, rescaled sum) form so that max and
 *    sum come from a single pass: read, read, write.
 * Streaming loops are unrolled by hand so that each work-item has four loads
 * in flight: a compiler may not move a load above a store to a buffer that
 * might alias it (out may be x), so a plain load-compute-store loop keeps a
 * single load in flight.
 */


/* Row elements each work-item keeps on chip in the cached path. Overridable
 * at build time (-DFP_ROW_CACHE=n) for tuning. */
#ifndef FP_ROW_CACHE
#define FP_ROW_CACHE 16
#endif
/* The same for the kernels that hold more than the row: softmax_backward
 * keeps grad_out and y, layernorm x and the w and b that the compiler keeps
 * in registers across rows. Measured on an H100 (NVIDIA OpenCL, 64-register
 * cap): with 16 layernorm spilled 176 bytes and ran at half the speed. */
#ifndef FP_ROW_CACHE_SMALL
#define FP_ROW_CACHE_SMALL 8
#endif

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
static void fp_online_add(float x, float *m, float *s) {
  if (x > *m) {
    *s = *s * exp(*m - x) + exp(x - x);
    *m = x;
  } else if (x != -INFINITY) {
    *s += exp(x - *m);
  }
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

/* ---- streaming passes ----------------------------------------------------------------
 * A work-item visits its elements j = lid, lid+L, ... in chunks of FP_CHUNK:
 * inside a chunk four accumulators take every fourth element (four loads in
 * flight, short dependency chains); each chunk's result is then added to the
 * work-item's total. A long row with a small group would otherwise pile
 * thousands of terms onto one float accumulator, whose rounding error grows
 * with the count (measured on PoCL: 2.5e-5 relative on a double softmax of
 * 262144 with L = 32, 6e-7 blocked); blocking keeps it near the CPU's
 * pairwise sums. */

/* Online statistics (m, s) of the work-item's share of softmax(x) when
 * `softmaxed` is 0; of y = exp(x - m1) * inv1 (double_softmax's first
 * softmax, recomputed) otherwise. */
static void fp_online_row(__global const float *x, long N, long lid, long L, int softmaxed,
                          float m1, float inv1, float *m, float *s) {
  long j = lid;
  while (j < N) {
    const long end = min(N, j + FP_CHUNK * L);
    float cm = -INFINITY, cs = 0.0f;
    for (; j + 3 * L < end; j += 4 * L) {
      float a = x[j], b = x[j + L], c = x[j + 2 * L], d = x[j + 3 * L];
      if (softmaxed) {
        a = exp(a - m1) * inv1;
        b = exp(b - m1) * inv1;
        c = exp(c - m1) * inv1;
        d = exp(d - m1) * inv1;
      }
      fp_online_add(a, &cm, &cs);
      fp_online_add(b, &cm, &cs);
      fp_online_add(c, &cm, &cs);
      fp_online_add(d, &cm, &cs);
    }
    for (; j < end; j += L)
      fp_online_add(softmaxed ? exp(x[j] - m1) * inv1 : x[j], &cm, &cs);
    fp_online_merge(m, s, cm, cs);
  }
}

/* The work-item's share of sum_j (x[j] * s1) * s2: norm_chain's running row
 * recomputed exactly as the CPU stores it; with s1 = s2 = 1 (exact products)
 * the plain sum. */
static float fp_stream_sum(__global const float *x, float s1, float s2, long N, long lid, long L) {
  float total = 0.0f;
  long j = lid;
  while (j < N) {
    const long end = min(N, j + FP_CHUNK * L);
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (; j + 3 * L < end; j += 4 * L) {
      a0 += (x[j] * s1) * s2;
      a1 += (x[j + L] * s1) * s2;
      a2 += (x[j + 2 * L] * s1) * s2;
      a3 += (x[j + 3 * L] * s1) * s2;
    }
    for (; j < end; j += L)
      a0 += (x[j] * s1) * s2;
    total += (a0 + a1) + (a2 + a3);
  }
  return total;
}

/* The work-item's share of sum_j (x[j] - mean)^2. */
static float fp_stream_centred_squares(__global const float *x, float mean, long N, long lid,
                                       long L) {
  float total = 0.0f;
  long j = lid;
  while (j < N) {
    const long end = min(N, j + FP_CHUNK * L);
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (; j + 3 * L < end; j += 4 * L) {
      const float d0 = x[j] - mean, d1 = x[j + L] - mean;
      const float d2 = x[j + 2 * L] - mean, d3 = x[j + 3 * L] - mean;
      a0 += d0 * d0;
      a1 += d1 * d1;
      a2 += d2 * d2;
      a3 += d3 * d3;
    }
    for (; j < end; j += L) {
      const float d = x[j] - mean;
      a0 += d * d;
    }
    total += (a0 + a1) + (a2 + a3);
  }
  return total;
}

/* The work-item's share of sum_j a[j] * b[j]. */
static float fp_stream_dot(__global const float *a, __global const float *b, long N, long lid,
                           long L) {
  float total = 0.0f;
  long j = lid;
  while (j < N) {
    const long end = min(N, j + FP_CHUNK * L);
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (; j + 3 * L < end; j += 4 * L) {
      a0 += a[j] * b[j];
      a1 += a[j + L] * b[j + L];
      a2 += a[j + 2 * L] * b[j + 2 * L];
      a3 += a[j + 3 * L] * b[j + 3 * L];
    }
    for (; j < end; j += L)
      a0 += a[j] * b[j];
    total += (a0 + a1) + (a2 + a3);
  }
  return total;
}

/* ---- the register cache ----------------------------------------------------------------
 * v[k] holds element lid + k*L of the row for k < count, the work-item's
 * share (count is the same for every row, so it is computed once). Every
 * loop is unrolled over the constant FP_ROW_CACHE, so v[] stays in registers,
 * and leaves at k == count: a branch, uniform but for the group's last
 * elements, so that slots past the share cost no issue slots, as predicated
 * instructions would. The row is walked with one pointer, so that no
 * per-slot 64-bit index or address has to stay live (on NVIDIA, with the
 * 64-register cap that 1024-wide groups need, those spilled). */

typedef struct fp_share {
  int lid, L; /* this work-item and the group size */
  int count;  /* elements of a row this work-item holds (cached path) */
} fp_share;

static fp_share fp_share_of(long N, int cache) {
  fp_share sh;
  sh.lid = (int)get_local_id(0);
  sh.L = (int)get_local_size(0);
  const long mine = N > sh.lid ? (N - sh.lid + sh.L - 1) / sh.L : 0;
  sh.count = (int)min(mine, (long)cache);
  return sh;
}

static void fp_cache_load(float *v, __global const float *x, fp_share sh) {
  __global const float *p = x + sh.lid;
#pragma unroll
  for (int k = 0; k < FP_ROW_CACHE; ++k, p += sh.L) {
    if (k >= sh.count)
      break;
    v[k] = *p;
  }
}

static float fp_cache_sum(const float *v, fp_share sh) {
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < FP_ROW_CACHE; ++k) {
    if (k >= sh.count)
      break;
    acc += v[k];
  }
  return acc;
}

static float fp_cache_max(const float *v, fp_share sh) {
  float acc = -INFINITY;
#pragma unroll
  for (int k = 0; k < FP_ROW_CACHE; ++k) {
    if (k >= sh.count)
      break;
    acc = fp_maximum(acc, v[k]);
  }
  return acc;
}

/* v = exp(v - m) */
static void fp_cache_exp_shift(float *v, float m, fp_share sh) {
#pragma unroll
  for (int k = 0; k < FP_ROW_CACHE; ++k) {
    if (k >= sh.count)
      break;
    v[k] = exp(v[k] - m);
  }
}

/* v *= s */
static void fp_cache_scale(float *v, float s, fp_share sh) {
#pragma unroll
  for (int k = 0; k < FP_ROW_CACHE; ++k) {
    if (k >= sh.count)
      break;
    v[k] *= s;
  }
}

static void fp_cache_store(__global float *y, const float *v, fp_share sh) {
  __global float *p = y + sh.lid;
#pragma unroll
  for (int k = 0; k < FP_ROW_CACHE; ++k, p += sh.L) {
    if (k >= sh.count)
      break;
    *p = v[k];
  }
}

/* ---- the kernels ----------------------------------------------------------------------------
 * Every kernel has the same shape per row: the work-item's partial results
 * (cached or streaming branch, no barrier inside), a group reduction that
 * every work-item reaches unconditionally, then the output (cached or
 * streaming branch). Keeping barriers out of the uniform cached/streaming
 * branches is legal either way, but PoCL 3.1 miscompiles a barrier inside
 * such a branch (rows came out partly unwritten), and it saves barriers. */

/* ---- softmax_fused ------------------------------------------------------------------------ */

/* exp(x - max) * (1 / sum), the CPU's order of operations. The row maximum
 * comes from a max-reduction; the cached path then takes exp(x - max) once
 * per element, the streaming path rescales its online sum to that maximum
 * (one exp per work-item), and a sum-reduction follows. Two cheap reductions
 * rather than one over (max, sum) pairs, whose merges cost two exp each. */
__kernel void softmax_fused(__global float *out, __global const float *x, long M, long N) {
  __local float slots[FP_MAX_GROUP], partials[FP_PARTIALS];
  const long lid = (long)get_local_id(0), L = (long)get_local_size(0);
  const int cached = N <= L * FP_ROW_CACHE;
  const fp_share sh = fp_share_of(N, FP_ROW_CACHE);
  for (long row = (long)get_group_id(0); row < M; row += (long)get_num_groups(0)) {
    __global const float *xr = x + row * N;
    __global float *yr = out + row * N;
    float v[FP_ROW_CACHE];
    float m = -INFINITY, s = 0.0f;
    if (cached) {
      fp_cache_load(v, xr, sh);
      m = fp_cache_max(v, sh);
    } else {
      fp_online_row(xr, N, lid, L, 0, 0.0f, 1.0f, &m, &s);
    }
    const float row_max = fp_group_max(m, slots, partials);
    if (cached) {
      fp_cache_exp_shift(v, row_max, sh);
      s = fp_cache_sum(v, sh);
    } else {
      s = fp_online_rescale(s, m, row_max);
    }
    const float inv = 1.0f / fp_group_sum(s, slots, partials);
    if (cached) {
      fp_cache_scale(v, inv, sh);
      fp_cache_store(yr, v, sh);
    } else {
      long j = lid;
      for (; j + 3 * L < N; j += 4 * L) {
        const float a = xr[j], b = xr[j + L], c = xr[j + 2 * L], d = xr[j + 3 * L];
        yr[j] = exp(a - row_max) * inv;
        yr[j + L] = exp(b - row_max) * inv;
        yr[j + 2 * L] = exp(c - row_max) * inv;
        yr[j + 3 * L] = exp(d - row_max) * inv;
      }
      for (; j < N; j += L)
        yr[j] = exp(xr[j] - row_max) * inv;
    }
  }
}

/* ---- double_softmax_fused ------------------------------------------------------------------- */

/* softmax(softmax(x)), each softmax as in softmax_fused. Streaming: pass 1
 * gives the statistics of x, pass 2 those of y = softmax(x) recomputed on the
 * fly, pass 3 writes softmax(y): three reads, one write. */
__kernel void double_softmax_fused(__global float *out, __global const float *x, long M, long N) {
  __local float slots[FP_MAX_GROUP], partials[FP_PARTIALS];
  const long lid = (long)get_local_id(0), L = (long)get_local_size(0);
  const int cached = N <= L * FP_ROW_CACHE;
  const fp_share sh = fp_share_of(N, FP_ROW_CACHE);
  for (long row = (long)get_group_id(0); row < M; row += (long)get_num_groups(0)) {
    __global const float *xr = x + row * N;
    __global float *yr = out + row * N;
    float v[FP_ROW_CACHE];
    float m1 = -INFINITY, s1 = 0.0f;
    if (cached) {
      fp_cache_load(v, xr, sh);
      m1 = fp_cache_max(v, sh);
    } else {
      fp_online_row(xr, N, lid, L, 0, 0.0f, 1.0f, &m1, &s1);
    }
    const float max1 = fp_group_max(m1, slots, partials);
    if (cached) {
      fp_cache_exp_shift(v, max1, sh);
      s1 = fp_cache_sum(v, sh);
    } else {
      s1 = fp_online_rescale(s1, m1, max1);
    }
    const float inv1 = 1.0f / fp_group_sum(s1, slots, partials);
    float m2 = -INFINITY, s2 = 0.0f;
    if (cached) {
      fp_cache_scale(v, inv1, sh);
      m2 = fp_cache_max(v, sh);
    } else {
      fp_online_row(xr, N, lid, L, 1, max1, inv1, &m2, &s2);
    }
    const float max2 = fp_group_max(m2, slots, partials);
    if (cached) {
      fp_cache_exp_shift(v, max2, sh);
      s2 = fp_cache_sum(v, sh);
    } else {
      s2 = fp_online_rescale(s2, m2, max2);
    }
    const float inv2 = 1.0f / fp_group_sum(s2, slots, partials);
    if (cached) {
      fp_cache_scale(v, inv2, sh);
      fp_cache_store(yr, v, sh);
    } else {
      long j = lid;
      for (; j + 3 * L < N; j += 4 * L) {
        const float a = xr[j], b = xr[j + L], c = xr[j + 2 * L], d = xr[j + 3 * L];
        yr[j] = exp(exp(a - max1) * inv1 - max2) * inv2;
        yr[j + L] = exp(exp(b - max1) * inv1 - max2) * inv2;
        yr[j + 2 * L] = exp(exp(c - max1) * inv1 - max2) * inv2;
        yr[j + 3 * L] = exp(exp(d - max1) * inv1 - max2) * inv2;
      }
      for (; j < N; j += L)
        yr[j] = exp(exp(xr[j] - max1) * inv1 - max2) * inv2;
    }
  }
}

/* ---- softmax_backward_fused ---------------------------------------------------------------- */

/* grad_in = y * (grad_out - sum_j grad_out*y). The cached path keeps both
 * rows in registers, FP_ROW_CACHE_SMALL elements of each per work-item. */
__kernel void softmax_backward_fused(__global float *grad_in, __global const float *grad_out,
                                     __global const float *y, long M, long N) {
  __local float slots[FP_MAX_GROUP], partials[FP_PARTIALS];
  const long lid = (long)get_local_id(0), L = (long)get_local_size(0);
  const int cached = N <= L * FP_ROW_CACHE_SMALL;
  const fp_share sh = fp_share_of(N, FP_ROW_CACHE_SMALL);
  for (long row = (long)get_group_id(0); row < M; row += (long)get_num_groups(0)) {
    __global const float *gr = grad_out + row * N;
    __global const float *yr = y + row * N;
    __global float *dr = grad_in + row * N;
    float g[FP_ROW_CACHE_SMALL], yv[FP_ROW_CACHE_SMALL];
    float part = 0.0f;
    if (cached) {
      __global const float *pg = gr + sh.lid, *py = yr + sh.lid;
#pragma unroll
      for (int k = 0; k < FP_ROW_CACHE_SMALL; ++k, pg += sh.L, py += sh.L) {
        if (k >= sh.count)
          break;
        g[k] = *pg;
        yv[k] = *py;
      }
#pragma unroll
      for (int k = 0; k < FP_ROW_CACHE_SMALL; ++k) {
        if (k >= sh.count)
          break;
        part += g[k] * yv[k];
      }
    } else {
      part = fp_stream_dot(gr, yr, N, lid, L);
    }
    const float dot = fp_group_sum(part, slots, partials);
    if (cached) {
      __global float *pd = dr + sh.lid;
#pragma unroll
      for (int k = 0; k < FP_ROW_CACHE_SMALL; ++k, pd += sh.L) {
        if (k >= sh.count)
          break;
        *pd = yv[k] * (g[k] - dot);
      }
    } else {
      long j = lid;
      for (; j + 3 * L < N; j += 4 * L) {
        const float g0 = gr[j], g1 = gr[j + L], g2 = gr[j + 2 * L], g3 = gr[j + 3 * L];
        const float y0 = yr[j], y1 = yr[j + L], y2 = yr[j + 2 * L], y3 = yr[j + 3 * L];
        dr[j] = y0 * (g0 - dot);
        dr[j + L] = y1 * (g1 - dot);
        dr[j + 2 * L] = y2 * (g2 - dot);
        dr[j + 3 * L] = y3 * (g3 - dot);
      }
      for (; j < N; j += L)
        dr[j] = yr[j] * (gr[j] - dot);
    }
  }
}

/* ---- layernorm_fused ------------------------------------------------------------------------ */

/* mean = sum/N; var = sum((x - mean)^2)/N (biased, two-pass: the centred sum
 * does not cancel as E[x^2] - mean^2 would); rstd = 1/sqrt(var + eps);
 * out = (x - mean) * rstd * w + b. Cached: FP_ROW_CACHE_SMALL elements per
 * work-item; streaming: three reads of x. */
__kernel void layernorm_fused(__global float *out, __global float *mean_out,
                              __global float *rstd_out, __global const float *x,
                              __global const float *w, __global const float *b, long M, long N,
                              float eps) {
  __local float slots[FP_MAX_GROUP], partials[FP_PARTIALS];
  const long lid = (long)get_local_id(0), L = (long)get_local_size(0);
  const int cached = N <= L * FP_ROW_CACHE_SMALL;
  const fp_share sh = fp_share_of(N, FP_ROW_CACHE_SMALL);
  for (long row = (long)get_group_id(0); row < M; row += (long)get_num_groups(0)) {
    __global const float *xr = x + row * N;
    __global float *yr = out + row * N;
    float v[FP_ROW_CACHE_SMALL];
    float part = 0.0f;
    if (cached) {
      __global const float *px = xr + sh.lid;
#pragma unroll
      for (int k = 0; k < FP_ROW_CACHE_SMALL; ++k, px += sh.L) {
        if (k >= sh.count)
          break;
        v[k] = *px;
        part += v[k];
      }
    } else {
      part = fp_stream_sum(xr, 1.0f, 1.0f, N, lid, L);
    }
    const float mean = fp_group_sum(part, slots, partials) / (float)N;
    float sq = 0.0f;
    if (cached) {
#pragma unroll
      for (int k = 0; k < FP_ROW_CACHE_SMALL; ++k) {
        if (k >= sh.count)
          break;
        v[k] -= mean;
        sq += v[k] * v[k];
      }
    } else {
      sq = fp_stream_centred_squares(xr, mean, N, lid, L);
    }
    const float var = fp_group_sum(sq, slots, partials) / (float)N;
    const float rstd = 1.0f / sqrt(var + eps);
    if (cached) {
      __global float *py = yr + sh.lid;
      __global const float *pw = w + sh.lid, *pb = b + sh.lid;
#pragma unroll
      for (int k = 0; k < FP_ROW_CACHE_SMALL; ++k, py += sh.L, pw += sh.L, pb += sh.L) {
        if (k >= sh.count)
          break;
        *py = v[k] * rstd * *pw + *pb;
      }
    } else {
      long j = lid;
      for (; j + L < N; j += 2 * L) {
        const float x0 = xr[j], x1 = xr[j + L];
        const float w0 = w[j], w1 = w[j + L], b0 = b[j], b1 = b[j + L];
        yr[j] = (x0 - mean) * rstd * w0 + b0;
        yr[j + L] = (x1 - mean) * rstd * w1 + b1;
      }
      for (; j < N; j += L)
        yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
    }
    if (lid == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

/* ---- norm_chain_fused -------------------------------------------------------------------- */

/* Three times: s = sum_j(row); row *= s. Streaming: the intermediate rows are
 * recomputed from x, never stored: four reads and one write instead of three
 * reads and three writes. */
__kernel void norm_chain_fused(__global float *out, __global const float *x, long M, long N) {
  __local float slots[FP_MAX_GROUP], partials[FP_PARTIALS];
  const long lid = (long)get_local_id(0), L = (long)get_local_size(0);
  const int cached = N <= L * FP_ROW_CACHE;
  const fp_share sh = fp_share_of(N, FP_ROW_CACHE);
  for (long row = (long)get_group_id(0); row < M; row += (long)get_num_groups(0)) {
    __global const float *xr = x + row * N;
    __global float *yr = out + row * N;
    float v[FP_ROW_CACHE];
    float s[3];
    if (cached)
      fp_cache_load(v, xr, sh);
#pragma unroll
    for (int step = 0; step < 3; ++step) { /* unrolled: s[] keeps constant indices */
      float part;
      if (cached)
        part = fp_cache_sum(v, sh);
      else /* s = 1 reproduces the row of the previous step exactly */
        part = fp_stream_sum(xr, step > 0 ? s[0] : 1.0f, step > 1 ? s[1] : 1.0f, N, lid, L);
      s[step] = fp_group_sum(part, slots, partials);
      if (cached)
        fp_cache_scale(v, s[step], sh);
    }
    if (cached) {
      fp_cache_store(yr, v, sh);
    } else {
      const float s1 = s[0], s2 = s[1], s3 = s[2];
      long j = lid;
      for (; j + 3 * L < N; j += 4 * L) {
        const float a = xr[j], b = xr[j + L], c = xr[j + 2 * L], d = xr[j + 3 * L];
        yr[j] = ((a * s1) * s2) * s3;
        yr[j + L] = ((b * s1) * s2) * s3;
        yr[j + 2 * L] = ((c * s1) * s2) * s3;
        yr[j + 3 * L] = ((d * s1) * s2) * s3;
      }
      for (; j < N; j += L)
        yr[j] = ((xr[j] * s1) * s2) * s3;
    }
  }
}
