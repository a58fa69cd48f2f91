/* fuseport OpenCL kernels, family horizontal: two results from one read of
 * a contiguous row-major [M, N]. Semantics: kernels/kernels.def; the
 * executable specification is kernels/cpu/horizontal.c (fp_device_common.h is
 * prepended).
 *
 * ROWS geometry, in teams (common.cl, as in reduce.cl): a team of T
 * work-items per row, L / T rows per group; work-item `lane` handles the
 * row's float4 vectors lane, lane+T, ... (16-byte accesses, coalesced) and
 * its head and tail scalar `lane` (fp_rowpart). Both kernels make a single
 * pass over the row and finish with one team reduction; no row cache is
 * needed. With the backend's planned geometry a work-item has at most
 * FP_ROW_VEC vectors of a row of up to 16384 floats, all loaded at once.
 */

/* Sum and torch.amax (NaN propagates) of the team in one pass of the
 * two-barrier scheme of fp_team_reduce (common.cl), over two pairs of
 * arrays declared with FP_TEAM_SCRATCH. */
static void fp_team_sum_max(float *sum, float *max, fp_team tm, __local float *slots_sum,
                            __local float *slots_max, __local float *partials_sum,
                            __local float *partials_max) {
  const int real = tm.index < tm.count;
  slots_sum[tm.base + tm.lane] = *sum;
  slots_max[tm.base + tm.lane] = *max;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (real) {
    fp_team_store_partial(FP_REDUCE_SUM, slots_sum, partials_sum, tm);
    fp_team_store_partial(FP_REDUCE_MAX, slots_max, partials_max, tm);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (real) {
    *sum = fp_team_fold_partials(FP_REDUCE_SUM, partials_sum, tm);
    *max = fp_team_fold_partials(FP_REDUCE_MAX, partials_max, tm);
  }
}

static float4 fp_cos4(float4 v) { return (float4)(cos(v.x), cos(v.y), cos(v.z), cos(v.w)); }

/* ---- the kernels ----------------------------------------------------------------------
 * A work-item visits its vectors q = lane, lane+T, ... in chunks of
 * FP_CHUNK / 4 vectors, FP_STREAM_UNROLL loads in flight (loads before stores: the
 * outputs may alias the input as far as the compiler knows), with each
 * chunk's partial sums added to the work-item's total: with a small group
 * and a long row, one accumulator taking thousands of terms would lose
 * accuracy (see common.cl). The block-of-rows loop is reduce.cl's: uniform
 * trip count, idle work-items load and store nothing and point at row 0. */

/* float4 per work-item that sets the team size (common.cl, fp_team_of_vec):
 * these kernels hold no row, so a team only has to keep enough loads in
 * flight. Must match FP_CL_HREDUCE_VEC of the backend's planner (a
 * mismatch costs speed, never correctness). Measured on an H200 (NVIDIA
 * OpenCL, 2026-11-23), CUDA time over OpenCL time with teams of 8 against
 * FP_ROW_VEC's 4: hreduce_reduce 0.72 -> 0.92 at 8192 x 4096, 0.88 ->
 * 1.08 at 65536 x 512; hreduce_pointwise 0.89 -> 0.98 at 8192 x 4096. */
#define FP_HREDUCE_VEC 8

/* sum[i] = sum_j a[i,j]; cosx[i,j] = cos(a[i,j]). */
__kernel void hreduce_pointwise_fused(__global float *sum, __global float *cosx,
                                      __global const float *a, long M, long N) {
  FP_TEAM_SCRATCH(slots);
  FP_TEAM_SCRATCH(partials);
  const fp_team tm = fp_team_of_vec(N, FP_HREDUCE_VEC);
  const long T = tm.size;
  for (long rb = (long)get_group_id(0); rb * tm.count < M; rb += (long)get_num_groups(0)) {
    long row;
    const int active = fp_team_row(rb, M, tm, &row);
    const fp_rowpart p = fp_rowpart_of(row, N, tm, active);
    __global const float *ar = a + row * N;
    __global float *cr = cosx + row * N;
    float total = 0.0f;
    if (active) {
      __global const float4 *ab = (__global const float4 *)(ar + p.head);
      __global float4 *cb = (__global float4 *)(cr + p.head);
      if (p.mine_head) {
        const float x0 = ar[tm.lane];
        cr[tm.lane] = cos(x0);
        total += x0;
      }
      if (p.mine_tail) {
        const float x0 = ar[p.tail0 + tm.lane];
        cr[p.tail0 + tm.lane] = cos(x0);
        total += x0;
      }
      long q = tm.lane;
      while (q < p.nvec) {
        const long end = min(p.nvec, q + (FP_CHUNK / 4) * T);
        float4 acc[2] = {(float4)(0.0f), (float4)(0.0f)};
        for (; q + (FP_STREAM_UNROLL - 1) * T < end; q += FP_STREAM_UNROLL * T) {
          float4 v[FP_STREAM_UNROLL];
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u)
            v[u] = fp_ld4_keep(ab + q + u * T);
#pragma unroll
          for (int u = 0; u < FP_STREAM_UNROLL; ++u) {
            cb[q + u * T] = fp_cos4(v[u]);
            acc[u & 1] += v[u];
          }
        }
        for (; q < end; q += T) {
          const float4 x0 = fp_ld4_keep(ab + q);
          cb[q] = fp_cos4(x0);
          acc[0] += x0;
        }
        total += fp_hsum4(acc[0] + acc[1]);
      }
    }
    total = fp_team_sum(total, tm, slots, partials);
    if (active && tm.lane == 0)
      sum[row] = total;
  }
}

/* The input sizes, in floats, that hreduce_reduce loads evict-first
 * (fp_ld4_first, on NVIDIA; common.cl), the CUDA kernel's window
 * (kEvictFirstMinBytes, kEvictFirstMaxBytes in kernels/cu/horizontal.cu):
 * the kernel reads much and writes little, and after the L2 has been left
 * full of dirty lines (an earlier kernel's output; the bench's write flush)
 * evict-first loads displace their own lines instead of paying for those
 * lines' write-back. Outside it, and in hreduce_pointwise, evict_last
 * (fp_ld4_keep), as the CUDA kernels' ldg4. */
#ifndef FP_EVICT_FIRST_MIN_FLOATS
#define FP_EVICT_FIRST_MIN_FLOATS (4L << 20)
#endif
#ifndef FP_EVICT_FIRST_MAX_FLOATS
#define FP_EVICT_FIRST_MAX_FLOATS (64L << 20)
#endif

/* The sum and torch.amax of a work-item's vectors q, q+T, ... < nvec of a
 * row body, added into *total and *top, loaded evict-first if `first` (a
 * constant at each call), else evict_last. */
static FP_INLINE void fp_sum_max_vectors(__global const float4 *ab, long q, long nvec, long T,
                                         const int first, float *total, float *top) {
  while (q < nvec) {
    const long end = min(nvec, q + (FP_CHUNK / 4) * T);
    float4 sums[2] = {(float4)(0.0f), (float4)(0.0f)};
    float4 tops[2] = {(float4)(-INFINITY), (float4)(-INFINITY)};
    for (; q + (FP_STREAM_UNROLL - 1) * T < end; q += FP_STREAM_UNROLL * T) {
      float4 v[FP_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u)
        v[u] = first ? fp_ld4_first(ab + q + u * T) : fp_ld4_keep(ab + q + u * T);
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u) {
        sums[u & 1] += v[u];
        tops[u & 1] = fp_maximum4(tops[u & 1], v[u]);
      }
    }
    for (; q < end; q += T) {
      const float4 x0 = first ? fp_ld4_first(ab + q) : fp_ld4_keep(ab + q);
      sums[0] += x0;
      tops[0] = fp_maximum4(tops[0], x0);
    }
    *total += fp_hsum4(sums[0] + sums[1]);
    *top = fp_maximum(*top, fp_hmax4(fp_maximum4(tops[0], tops[1])));
  }
}

/* sum[i] = sum_j a[i,j]; amax[i] = max_j a[i,j] (NaN propagates). */
__kernel void hreduce_reduce_fused(__global float *sum, __global float *amax,
                                   __global const float *a, long M, long N) {
  FP_TEAM_SCRATCH(slots_sum);
  FP_TEAM_SCRATCH(slots_max);
  FP_TEAM_SCRATCH(partials_sum);
  FP_TEAM_SCRATCH(partials_max);
  const fp_team tm = fp_team_of_vec(N, FP_HREDUCE_VEC);
  const long T = tm.size;
  const int evict_first = M * N >= FP_EVICT_FIRST_MIN_FLOATS && M * N <= FP_EVICT_FIRST_MAX_FLOATS;
  for (long rb = (long)get_group_id(0); rb * tm.count < M; rb += (long)get_num_groups(0)) {
    long row;
    const int active = fp_team_row(rb, M, tm, &row);
    const fp_rowpart p = fp_rowpart_of(row, N, tm, active);
    __global const float *ar = a + row * N;
    float total = 0.0f, top = -INFINITY;
    if (active) {
      __global const float4 *ab = (__global const float4 *)(ar + p.head);
      if (p.mine_head) {
        total += ar[tm.lane];
        top = fp_maximum(top, ar[tm.lane]);
      }
      if (p.mine_tail) {
        total += ar[p.tail0 + tm.lane];
        top = fp_maximum(top, ar[p.tail0 + tm.lane]);
      }
      /* one loop per kind of load: a choice per load inside one loop cost
       * the 512 MiB cell (2048 x 65536, plain loads there) 11-17% on an
       * H100 (NVIDIA OpenCL, 2026-11-26). Both loops are reached, the one
       * not chosen over no vectors, rather than one of them behind an
       * if/else: an if/else whose arms both end in a loop, right before
       * the barrier of fp_team_sum_max, aborts PoCL 5.0's kernel compiler
       * (reduce.cl, "the kernels", says why). */
      const long nvec_first = evict_first ? p.nvec : 0;
      fp_sum_max_vectors(ab, tm.lane, nvec_first, T, 1, &total, &top);
      fp_sum_max_vectors(ab, tm.lane, p.nvec - nvec_first, T, 0, &total, &top);
    }
    fp_team_sum_max(&total, &top, tm, slots_sum, slots_max, partials_sum, partials_max);
    if (active && tm.lane == 0) {
      sum[row] = total;
      amax[row] = top;
    }
  }
}
