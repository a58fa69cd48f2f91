/* fuseport OpenCL: helpers shared by every kernel family. Prepended to each
 * family's program after fp_device_common.h (see cmake/embed_cl.cmake), as
 * OpenCL programs built from source have no include path. */

#define FP_MAX_GROUP 1024 /* largest group the backend launches */
#define FP_PARTIALS 32    /* width of the second stage of a group reduction */
/* Elements a work-item adds into one partial sum before folding it into its
 * total: one accumulator taking thousands of terms (a small group on a long
 * row) would lose accuracy. */
#define FP_CHUNK 64

/* Grid-stride walk over the logical [M, N] index space of the 2-D ELEM
 * kernels: (i, j) advance incrementally, two 64-bit divisions per work-item
 * up front instead of one per element (GPUs emulate them in dozens of
 * instructions). Each work-item takes FP_ELEM_UNROLL elements per step: g,
 * g+S, g+2S, g+3S (S the global size; consecutive work-items stay on
 * consecutive elements, so each access is coalesced), all loaded before any
 * is stored: a compiler may not hoist a load above a store to a buffer that
 * might alias it, so otherwise each work-item would have one load in flight.
 * fp_walk_begin sets pos[0..3] and the (di, dj) of a step of 4S, and returns
 * 0 when the work-item has no element at all. */
#define FP_ELEM_UNROLL 4

typedef struct fp_pos {
  long i, j;
} fp_pos;

static fp_pos fp_pos_advance(fp_pos p, long N, long di, long dj) {
  p.i += di;
  p.j += dj;
  if (p.j >= N) {
    p.j -= N;
    p.i += 1;
  }
  return p;
}

static int fp_walk_begin(long M, long N, fp_pos *pos, long *di, long *dj) {
  const long first = (long)get_global_id(0);
  const long step = (long)get_global_size(0);
  if (first >= M * N)
    return 0;
  pos[0].i = first / N;
  pos[0].j = first - pos[0].i * N;
  const long si = step / N, sj = step - si * N;
#pragma unroll
  for (int u = 1; u < FP_ELEM_UNROLL; ++u)
    pos[u] = fp_pos_advance(pos[u - 1], N, si, sj);
  *di = (FP_ELEM_UNROLL * step) / N;
  *dj = FP_ELEM_UNROLL * step - *di * N;
  return 1;
}

static void fp_walk_next(fp_pos *pos, long N, long di, long dj) {
#pragma unroll
  for (int u = 0; u < FP_ELEM_UNROLL; ++u)
    pos[u] = fp_pos_advance(pos[u], N, di, dj);
}

/* Width of the second stage: ~sqrt(L), so that both serial stages stay short
 * (8 for L = 32, 32 for L = 1024). */
static uint fp_partials_width(uint n) {
  uint width = 1;
  while (width * width < n && width < FP_PARTIALS)
    width *= 2;
  return min(width, n);
}

/* Group reduction in two barriers (see reduce.cl for the reasoning): slots[]
 * take one value per work-item, the first ~sqrt(L) work-items fold strided shares
 * into partials[], every work-item folds the partials in the same order.
 * Called by the whole group. */
static float fp_group_sum(float v, __local float *slots, __local float *partials) {
  const uint lid = get_local_id(0), n = get_local_size(0);
  const uint width = fp_partials_width(n);
  slots[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < width) {
    float p = slots[lid];
    for (uint t = lid + width; t < n; t += width)
      p += slots[t];
    partials[lid] = p;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float total = partials[0];
  for (uint t = 1; t < width; ++t)
    total += partials[t];
  return total;
}
