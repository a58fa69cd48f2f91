/* fuseport OpenCL kernels, family horizontal: two results from one read of
 * a contiguous row-major [M, N]. Semantics: kernels/kernels.def; the
 * executable specification is kernels/cpu/horizontal.c (fp_device_common.h is
 * prepended).
 *
 * ROWS geometry: group g owns rows g, g+G, ...; work-item t of the L in a
 * group handles elements t, t+L, ... (coalesced). Both kernels make a single
 * pass over the row and finish with one group reduction; no row cache is
 * needed.
 */


/* Sum and torch.amax (NaN propagates) of the group in one pass of the same
 * two-barrier scheme. */
static void fp_group_sum_max(float *sum, float *max, __local float *slots_sum,
                             __local float *slots_max, __local float *partials_sum,
                             __local float *partials_max) {
  const uint lid = get_local_id(0), n = get_local_size(0);
  const uint width = fp_partials_width(n);
  slots_sum[lid] = *sum;
  slots_max[lid] = *max;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < width) {
    float ps = slots_sum[lid], pm = slots_max[lid];
    for (uint t = lid + width; t < n; t += width) {
      ps += slots_sum[t];
      pm = fp_maximum(pm, slots_max[t]);
    }
    partials_sum[lid] = ps;
    partials_max[lid] = pm;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float ts = partials_sum[0], tm = partials_max[0];
  for (uint t = 1; t < width; ++t) {
    ts += partials_sum[t];
    tm = fp_maximum(tm, partials_max[t]);
  }
  *sum = ts;
  *max = tm;
}

/* ---- the kernels ----------------------------------------------------------------------
 * A work-item visits its elements j = lid, lid+L, ... in chunks of FP_CHUNK,
 * four at a time (loads before stores: the outputs may alias the input as far
 * as the compiler knows), with each chunk's partial sums added to the
 * work-item's total: with a small group and a long row, one accumulator
 * taking thousands of terms would lose accuracy (see common.cl). */

/* sum[i] = sum_j a[i,j]; cosx[i,j] = cos(a[i,j]). */
__kernel void hreduce_pointwise_fused(__global float *sum, __global float *cosx,
                                      __global const float *a, long M, long N) {
  __local float slots[FP_MAX_GROUP], partials[FP_PARTIALS];
  const long lid = (long)get_local_id(0), L = (long)get_local_size(0);
  for (long row = (long)get_group_id(0); row < M; row += (long)get_num_groups(0)) {
    __global const float *ar = a + row * N;
    __global float *cr = cosx + row * N;
    float total = 0.0f;
    long j = lid;
    while (j < N) {
      const long end = min(N, j + FP_CHUNK * L);
      float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
      for (; j + 3 * L < end; j += 4 * L) {
        const float x0 = ar[j], x1 = ar[j + L], x2 = ar[j + 2 * L], x3 = ar[j + 3 * L];
        cr[j] = cos(x0);
        cr[j + L] = cos(x1);
        cr[j + 2 * L] = cos(x2);
        cr[j + 3 * L] = cos(x3);
        a0 += x0;
        a1 += x1;
        a2 += x2;
        a3 += x3;
      }
      for (; j < end; j += L) {
        const float x0 = ar[j];
        cr[j] = cos(x0);
        a0 += x0;
      }
      total += (a0 + a1) + (a2 + a3);
    }
    total = fp_group_sum(total, slots, partials);
    if (lid == 0)
      sum[row] = total;
  }
}

/* sum[i] = sum_j a[i,j]; amax[i] = max_j a[i,j] (NaN propagates). */
__kernel void hreduce_reduce_fused(__global float *sum, __global float *amax,
                                   __global const float *a, long M, long N) {
  __local float slots_sum[FP_MAX_GROUP], slots_max[FP_MAX_GROUP];
  __local float partials_sum[FP_PARTIALS], partials_max[FP_PARTIALS];
  const long lid = (long)get_local_id(0), L = (long)get_local_size(0);
  for (long row = (long)get_group_id(0); row < M; row += (long)get_num_groups(0)) {
    __global const float *ar = a + row * N;
    float total = 0.0f, top = -INFINITY;
    long j = lid;
    while (j < N) {
      const long end = min(N, j + FP_CHUNK * L);
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
      float m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
      for (; j + 3 * L < end; j += 4 * L) {
        const float x0 = ar[j], x1 = ar[j + L], x2 = ar[j + 2 * L], x3 = ar[j + 3 * L];
        s0 += x0;
        s1 += x1;
        s2 += x2;
        s3 += x3;
        m0 = fp_maximum(m0, x0);
        m1 = fp_maximum(m1, x1);
        m2 = fp_maximum(m2, x2);
        m3 = fp_maximum(m3, x3);
      }
      for (; j < end; j += L) {
        const float x0 = ar[j];
        s0 += x0;
        m0 = fp_maximum(m0, x0);
      }
      total += (s0 + s1) + (s2 + s3);
      top = fp_maximum(top, fp_maximum(fp_maximum(m0, m1), fp_maximum(m2, m3)));
    }
    fp_group_sum_max(&total, &top, slots_sum, slots_max, partials_sum, partials_max);
    if (lid == 0) {
      sum[row] = total;
      amax[row] = top;
    }
  }
}
