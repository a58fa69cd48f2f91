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

/* ---- teams: one or several rows per group ------------------------------------------
 * The ROWS kernels of reduce.cl and horizontal.cl split their group of L
 * work-items into teams of T (a power of two, FP_MIN_TEAM <= T <= L), one
 * row per team, L / T rows per group at a time. T is the smallest power of
 * two (at least FP_MIN_TEAM) for which every work-item holds at most
 * FP_ROW_VEC float4 vectors of the row, capped at L; it depends on N and L
 * only, so every work-item of the group computes the same team size, and the
 * backend (opencl_backend.c, plan_rows) picks L knowing this rule: a result
 * never depends on the geometry, so any L is correct, the planned one is
 * the fast one.
 * Short rows then fill a group with several rows instead of leaving most of
 * a 32-wide group idle (a row of 128 is 32 vectors: a team of 8 work-items,
 * 4 vectors each), and the group-wide barriers of the reductions are shared
 * by all the rows of the group. FP_MIN_TEAM is 4 so that the up to 3 head
 * and 3 tail scalars of a row (fp_rowpart) each have a work-item. */
/* The register cache (reduce.cl) is an array in a struct handed to helper
 * functions by pointer: it stays in registers only if they are inlined, which
 * generic clang at -O2 declined for the larger ones (checked on the LLVM IR
 * of clang 15: fp_rc_max stayed a call with the cache on the stack). */
#if defined(__clang__)
#define FP_INLINE inline __attribute__((always_inline))
#else
#define FP_INLINE inline
#endif

#ifndef FP_ROW_VEC
#define FP_ROW_VEC 4 /* float4 per work-item: must match FP_CL_ROW_VEC of the backend */
#endif
#define FP_MIN_TEAM 4
/* 16-byte loads in flight per work-item in the streaming loops of the row
 * kernels (rows that do not fit the register cache). 4 keeps 64 KiB in
 * flight per SM at 1024 work-items; -DFP_STREAM_UNROLL=2 halves the loop's
 * registers should a compiler spill. */
#ifndef FP_STREAM_UNROLL
#define FP_STREAM_UNROLL 4
#endif

typedef struct fp_team {
  int lane;  /* work-item within the team */
  int size;  /* T */
  int base;  /* local id of the team's first work-item */
  int index; /* team within the group */
  int count; /* teams per group, L / T */
  int width; /* width of the second reduction stage */
} fp_team;

/* The team for rows of N with `vec` float4 per work-item (FP_ROW_VEC for
 * the cached kernels of reduce.cl; horizontal.cl, which streams every row
 * once, sizes its teams with FP_HREDUCE_VEC). */
static FP_INLINE fp_team fp_team_of_vec(long N, int vec) {
  const int L = (int)get_local_size(0), lid = (int)get_local_id(0);
  const long need = ((N >> 2) + vec - 1) / vec; /* lanes for whole vectors */
  int t = FP_MIN_TEAM;
  while (t < need && 2 * t <= L)
    t *= 2;
  t = min(t, L);
  fp_team tm;
  tm.size = t;
  tm.index = lid / t;
  tm.lane = lid - tm.index * t;
  tm.base = tm.index * t;
  tm.count = L / t;
  tm.width = (int)fp_partials_width((uint)t);
  return tm;
}

static FP_INLINE fp_team fp_team_of(long N) { return fp_team_of_vec(N, FP_ROW_VEC); }

/* The row of the work-item's team in the group's block rb of tm.count rows,
 * and whether it has one (its team is whole and the row exists). An idle
 * work-item gets row 0, so that the row pointers it forms (never
 * dereferenced) stay inside the buffers. */
static FP_INLINE int fp_team_row(long rb, long M, fp_team tm, long *row) {
  const long r = rb * tm.count + tm.index;
  const int active = tm.index < tm.count && r < M;
  *row = active ? r : 0;
  return active;
}

/* Whether a row of N fits the team's registers: at most FP_ROW_VEC vectors
 * per work-item (the head and tail scalars come on top). Uniform. */
static FP_INLINE int fp_row_cached(long N, fp_team tm) {
  return (N >> 2) <= (long)tm.size * FP_ROW_VEC;
}

/* ---- four kernels per row operator -------------------------------------------------
 * Each row kernel of reduce.cl is written once, as fp_<op>_rows(..., mode),
 * and compiled four times (FP_ROWS_KERNELS):
 *   <op>_fused         mode ANY: chooses the cached or the streaming path at
 *                      run time; correct for any geometry (kernels.def's
 *                      contract, and what the host geometry launches);
 *   <op>_fused_cached  mode CACHED: only the register-cache path; a launch
 *                      whose rows do not fit returns at once (uniformly,
 *                      before any barrier) and writes nothing;
 *   <op>_fused_stream  mode STREAM: only the streaming path; any geometry;
 *   <op>_fused_local   mode LOCAL: the streaming path through a row cache in
 *                      local memory, lcache: the first pass stores the
 *                      vectors it reads there, the later passes read them
 *                      back instead of global memory, so a row is read from
 *                      global memory once. Any geometry: it uses lcache
 *                      only where fp_rows_local holds (one row per group,
 *                      and the row fits), and otherwise re-reads global
 *                      memory as _stream does (the same results; a launch
 *                      that breaks the planner's rule is slower, not
 *                      unwritten as with _cached).
 * With the mode a constant, each specialisation carries the registers of
 * one path. The generic kernel allocates for both at once: the cache array
 * and the unrolled streaming loads together spilled 100-208 bytes per
 * work-item under NVIDIA's 64-register cap (-cl-nv-verbose, H200, driver
 * 580). Likewise only _local declares lcache: its 32 KiB would cut the
 * groups resident per compute unit of the others. The backend (plan_rows)
 * launches the specialisation its planned geometry calls for. The whole
 * kernel sits in one uniform branch of the mode rather than in per-row
 * branches, which PoCL 3.1 miscompiles with a barrier inside (see
 * reduce.cl). Only softmax and norm_chain have a _local kernel: see
 * FP_ROWS_KERNELS_LOCAL_UNUSED for double_softmax and layernorm;
 * softmax_backward, which holds two rows, is not written for one
 * (FP_ROWS_KERNELS_NO_LOCAL). */
#define FP_ROWS_ANY 0
#define FP_ROWS_CACHED 1
#define FP_ROWS_STREAM 2
#define FP_ROWS_LOCAL 3

/* float4 in lcache: 32 KiB, with the 2 * FP_MAX_GROUP floats of slots and
 * partials 40 KiB per group, under the 48 KiB of local memory a kernel may
 * declare on NVIDIA's OpenCL. Must match FP_CL_LOCAL_ROW_VEC of the backend,
 * which plans _local only where a row fits and the device's local memory
 * holds the group's 40 KiB, and builds with -DFP_LOCAL_ROW_VEC=0 (no _local
 * kernels) where it does not. A smaller value passed to the build keeps the
 * results right: longer rows then re-read global memory. */
#ifndef FP_LOCAL_ROW_VEC
#define FP_LOCAL_ROW_VEC 2048
#endif

static FP_INLINE int fp_rows_cached(int mode, long N, fp_team tm) {
  return (mode == FP_ROWS_ANY || mode == FP_ROWS_CACHED) && fp_row_cached(N, tm);
}

/* Whether a LOCAL kernel keeps its rows in lcache, indexed by the vector q
 * of the row's body: only when the team is the whole group (T = L, one row
 * per group: two teams would store their rows at the same q) and every
 * row's body fits (it has at most floor(N/4) vectors). Uniform. */
static FP_INLINE int fp_rows_local(int mode, long N, fp_team tm) {
  return mode == FP_ROWS_LOCAL && tm.size == (int)get_local_size(0) && (N >> 2) <= FP_LOCAL_ROW_VEC;
}

/* The group's reduction slots are declared in each kernel (OpenCL 1.2
 * allows __local variables only at kernel scope), and so is the mode, as a
 * constant: `args` is the call's argument list in parentheses and names
 * slots, partials, lcache (where the operator has a _local kernel) and mode
 * last (OpenCL C 1.2 has no variadic macros, so the list cannot be extended
 * here). `lcache_decl` declares lcache: the array in the _local kernel
 * (FP_ROWS_LCACHE), a null pointer, never dereferenced (fp_rows_local is
 * constant 0 there), in the others (FP_ROWS_LCACHE_NULL), nothing for an
 * operator without a _local kernel (FP_ROWS_LCACHE_NONE). */
#define FP_ROWS_LCACHE __local float4 lcache[FP_LOCAL_ROW_VEC]
#define FP_ROWS_LCACHE_NULL __local float4 *const lcache = 0
#define FP_ROWS_LCACHE_NONE
#define FP_ROWS_KERNEL_AS(kernel, op, row_mode, lcache_decl, params, args)                         \
  __kernel void kernel params {                                                                    \
    __local float slots[FP_MAX_GROUP], partials[FP_MAX_GROUP];                                     \
    lcache_decl;                                                                                   \
    const int mode = row_mode;                                                                     \
    fp_##op##_rows args;                                                                           \
  }
#if FP_LOCAL_ROW_VEC > 0
#define FP_ROWS_KERNEL_LOCAL(op, params, args)                                                     \
  FP_ROWS_KERNEL_AS(op##_fused_local, op, FP_ROWS_LOCAL, FP_ROWS_LCACHE, params, args)
#else /* no _local kernels: the backend launches _stream */
#define FP_ROWS_KERNEL_LOCAL(op, params, args)
#endif
#define FP_ROWS_KERNELS(op, params, args)                                                          \
  FP_ROWS_KERNEL_AS(op##_fused, op, FP_ROWS_ANY, FP_ROWS_LCACHE_NULL, params, args)                \
  FP_ROWS_KERNEL_AS(op##_fused_cached, op, FP_ROWS_CACHED, FP_ROWS_LCACHE_NULL, params, args)      \
  FP_ROWS_KERNEL_AS(op##_fused_stream, op, FP_ROWS_STREAM, FP_ROWS_LCACHE_NULL, params, args)      \
  FP_ROWS_KERNEL_LOCAL(op, params, args)
/* double_softmax and layernorm: written for lcache, built without their
 * _local kernels. Timed on an H100 against _stream (2026-11-23,
 * docs/PERF.md), layernorm's _local, which spills 20 bytes under NVIDIA's
 * 64-register cap, ran 10-20% slower, double_softmax's, bound by its
 * exponentials, within +-4%. Replace the macro with FP_ROWS_KERNELS to
 * build them again. */
#define FP_ROWS_KERNELS_LOCAL_UNUSED(op, params, args)                                             \
  FP_ROWS_KERNEL_AS(op##_fused, op, FP_ROWS_ANY, FP_ROWS_LCACHE_NULL, params, args)                \
  FP_ROWS_KERNEL_AS(op##_fused_cached, op, FP_ROWS_CACHED, FP_ROWS_LCACHE_NULL, params, args)      \
  FP_ROWS_KERNEL_AS(op##_fused_stream, op, FP_ROWS_STREAM, FP_ROWS_LCACHE_NULL, params, args)
#define FP_ROWS_KERNELS_NO_LOCAL(op, params, args)                                                 \
  FP_ROWS_KERNEL_AS(op##_fused, op, FP_ROWS_ANY, FP_ROWS_LCACHE_NONE, params, args)                \
  FP_ROWS_KERNEL_AS(op##_fused_cached, op, FP_ROWS_CACHED, FP_ROWS_LCACHE_NONE, params, args)      \
  FP_ROWS_KERNEL_AS(op##_fused_stream, op, FP_ROWS_STREAM, FP_ROWS_LCACHE_NONE, params, args)

/* Team reductions: fp_group_reduce's two-barrier scheme, each team over its
 * own slots; slots[] and partials[] hold FP_MAX_GROUP floats (a team's
 * partials are at its own base). Must be reached by the whole group, idle
 * work-items included (a group of L not a multiple of T has some). */
static float fp_team_reduce(int op, float v, fp_team tm, __local float *slots,
                            __local float *partials) {
  const int lid = tm.base + tm.lane;
  const int real = tm.index < tm.count;
  slots[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (real && tm.lane < tm.width) {
    float p = slots[lid];
    for (int t = tm.lane + tm.width; t < tm.size; t += tm.width)
      p = fp_reduce_combine(op, p, slots[tm.base + t]);
    partials[lid] = p;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float total = v;
  if (real) {
    total = partials[tm.base];
    for (int t = 1; t < tm.width; ++t)
      total = fp_reduce_combine(op, total, partials[tm.base + t]);
  }
  return total;
}

static float fp_team_sum(float v, fp_team tm, __local float *slots, __local float *partials) {
  return fp_team_reduce(FP_REDUCE_SUM, v, tm, slots, partials);
}

static float fp_team_max(float v, fp_team tm, __local float *slots, __local float *partials) {
  return fp_team_reduce(FP_REDUCE_MAX, v, tm, slots, partials);
}

/* ---- a row as head scalars, aligned float4 vectors, tail scalars -------------------------
 * Buffers come whole from clCreateBuffer (base aligned far beyond 16 bytes),
 * so row r starts (r*N) % 4 floats past a 16-byte boundary: `head` scalars
 * (0..3, at most N) up to the boundary, then `nvec` aligned float4 vectors,
 * then `tail` scalars (0..3). Work-item `lane` of the team takes vectors
 * lane, lane+T, ... (each access of the team coalesced) and the head and
 * tail scalars of index lane. With N % 4 == 0 the head and tail are empty. */
typedef struct fp_rowpart {
  long head;     /* scalars before the first vector */
  long nvec;     /* vectors of the body, starting at element head */
  long tail0;    /* first tail element: head + 4 * nvec */
  int tail;      /* tail scalars */
  int cnt;       /* vectors this work-item holds in the cached path (<= FP_ROW_VEC) */
  int mine_head; /* this work-item holds head element lane */
  int mine_tail; /* this work-item holds tail element tail0 + lane */
} fp_rowpart;

static FP_INLINE fp_rowpart fp_rowpart_of(long row, long N, fp_team tm, int active) {
  fp_rowpart p;
  const long mis = (row * N) & 3;
  p.head = min(N, (4 - mis) & 3);
  p.nvec = (N - p.head) >> 2;
  p.tail0 = p.head + 4 * p.nvec;
  p.tail = (int)(N - p.tail0);
  p.cnt = 0;
  if (active) {
    /* min(FP_ROW_VEC, ceil((nvec - lane) / T)) without a 64-bit division */
    for (int k = 0; k < FP_ROW_VEC; ++k)
      if (tm.lane + (long)k * tm.size < p.nvec)
        p.cnt = k + 1;
  }
  p.mine_head = active && tm.lane < p.head;
  p.mine_tail = active && tm.lane < p.tail;
  return p;
}

static FP_INLINE float fp_hsum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

static FP_INLINE float fp_hmax4(float4 v) {
  return fp_maximum(fp_maximum(v.x, v.y), fp_maximum(v.z, v.w));
}

static FP_INLINE float4 fp_maximum4(float4 a, float4 b) {
  return (float4)(fp_maximum(a.x, b.x), fp_maximum(a.y, b.y), fp_maximum(a.z, b.z),
                  fp_maximum(a.w, b.w));
}
