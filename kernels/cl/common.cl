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

/* ---- group reductions ------------------------------------------------------------
 * Two barriers per reduction instead of log2(L): every work-item stores its
 * value in slots[]; the first `width` work-items each fold a strided share of
 * the slots (consecutive addresses: no bank conflicts) into partials[]; then
 * every work-item folds the `width` partials itself, in the same order, so all
 * of them hold the same result without a broadcast. width ~ sqrt(L) balances
 * the two serial stages (8 for L = 32, 32 for L = 1024). Reuse is safe without
 * a third barrier: the next reduction writes slots[] only after this one's
 * second barrier, and partials[] only after its own first barrier, which no
 * work-item reaches before it has read this reduction's partials.
 * Must be called by the whole group (uniform control flow). `op` is an
 * FP_REDUCE_* code; the wrappers pass a constant, which the compiler folds. */

static float fp_reduce_combine(int op, float x, float y) {
  return op == FP_REDUCE_SUM ? x + y : fp_maximum(x, y); /* torch.amax: NaN propagates */
}

static float fp_group_reduce(int op, float v, __local float *slots, __local float *partials) {
  const uint lid = get_local_id(0), n = get_local_size(0);
  const uint width = fp_partials_width(n);
  slots[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < width) {
    float p = slots[lid];
    for (uint t = lid + width; t < n; t += width)
      p = fp_reduce_combine(op, p, slots[t]);
    partials[lid] = p;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float total = partials[0];
  for (uint t = 1; t < width; ++t)
    total = fp_reduce_combine(op, total, partials[t]);
  return total;
}

static float fp_group_sum(float v, __local float *slots, __local float *partials) {
  return fp_group_reduce(FP_REDUCE_SUM, v, slots, partials);
}

static float fp_group_max(float v, __local float *slots, __local float *partials) {
  return fp_group_reduce(FP_REDUCE_MAX, v, slots, partials);
}
