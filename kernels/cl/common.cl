/* fuseport OpenCL: helpers shared by every kernel family. Prepended to each
 * family's program after fp_device_common.h (see cmake/embed_cl.cmake), as
 * OpenCL programs built from source have no include path. */

#define FP_MAX_GROUP 1024 /* largest group the backend launches */
#define FP_PARTIALS 32    /* width of the second stage of a group reduction */
/* Elements a work-item adds into one partial sum before folding it into its
 * total: one accumulator taking thousands of terms (a small group on a long
 * row) would lose accuracy. */
#define FP_CHUNK 64

/* Helpers that take a private array by pointer (the register cache of
 * reduce.cl, the accumulators of the reductions below) keep it in registers
 * only if they are inlined, which generic clang at -O2 declined for the
 * larger ones (checked on the LLVM IR of clang 15: fp_rc_max stayed a call
 * with the cache on the stack). -DFP_NO_FORCE_INLINE leaves inlining to the
 * compiler: Oclgrind 21.10 cannot run the llvm.experimental.noalias.scope.decl
 * calls that clang's always-inliner leaves at -O0, where tests/oclgrind.sh
 * builds (see there why). */
#if defined(__clang__) && !defined(FP_NO_FORCE_INLINE)
#define FP_INLINE inline __attribute__((always_inline))
#else
#define FP_INLINE inline
#endif

/* a / b and a % b for 0 <= a, 0 < b: in 32 bits where both fit, as they do
 * for the work-item indices and global sizes this is used with. A GPU has
 * no integer divider; a 64-bit quotient is a long software routine, a
 * 32-bit one a few instructions around a reciprocal. */
static FP_INLINE long fp_div_narrow(long a, long b) {
  return ((ulong)a | (ulong)b) <= 0xffffffffUL ? (long)((uint)a / (uint)b) : a / b;
}

static FP_INLINE long fp_mod_narrow(long a, long b) {
  return ((ulong)a | (ulong)b) <= 0xffffffffUL ? (long)((uint)a % (uint)b) : a % b;
}

/* Grid-stride walk over the logical [M, N] index space of the 2-D ELEM
 * kernels: (i, j) advance incrementally, three divisions per work-item up
 * front (fp_div_narrow) instead of one per element. Each work-item takes
 * FP_ELEM_UNROLL elements per step: g, g+S, g+2S, g+3S (S the global size;
 * consecutive work-items stay on consecutive elements, so each access is
 * coalesced), all loaded before any is stored: a compiler may not hoist a
 * load above a store to a buffer that might alias it, so otherwise each
 * work-item would have one load in flight. fp_walk_begin sets pos[0..3] and
 * the (di, dj) of a step of 4S, and returns 0 when the work-item has no
 * element at all. */
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
  pos[0].i = fp_div_narrow(first, N);
  pos[0].j = first - pos[0].i * N;
  const long si = fp_div_narrow(step, N), sj = step - si * N;
#pragma unroll
  for (int u = 1; u < FP_ELEM_UNROLL; ++u)
    pos[u] = fp_pos_advance(pos[u - 1], N, si, sj);
  *di = fp_div_narrow(FP_ELEM_UNROLL * step, N);
  *dj = FP_ELEM_UNROLL * step - *di * N;
  return 1;
}

static void fp_walk_next(fp_pos *pos, long N, long di, long dj) {
#pragma unroll
  for (int u = 0; u < FP_ELEM_UNROLL; ++u)
    pos[u] = fp_pos_advance(pos[u], N, di, dj);
}

/* ---- L2 cache hints on NVIDIA (inline PTX) ---------------------------------------
 * NVIDIA's OpenCL compiler takes inline PTX (asm), as its CUDA compiler
 * does, which gives OpenCL C the cache hints the CUDA kernels use
 * (kernels/cu/device_common.cuh). The backend defines FP_NV_PTX on NVIDIA
 * devices only (FUSEPORT_OPENCL_PTX picks the level; every other device,
 * PoCL included, builds the plain loads below):
 *   1  fp_ld4_first: ld.global.cs, lines marked evict-first (PTX 2.0), for a
 *      stream read once that should displace its own lines rather than
 *      what the L2 held before the kernel (CUDA's ldcs4);
 *   2  also fp_ld4_keep: evict_last in L1 and L2 through an L2 cache
 *      policy (createpolicy; PTX ISA 7.4, sm_80 and later), for a row's
 *      first read where a later pass reads it again and for the inputs of
 *      one-pass kernels (CUDA's ldg4; reduce.cl says where each is used).
 * The loads are volatile asm, so the compiler never moves them across the
 * kernel's stores; each still issues at once, several in flight. p is a
 * 16-byte aligned global address that the kernel does not write before
 * reading it. */
#if defined(FP_NV_PTX) && FP_NV_PTX >= 1
static FP_INLINE float4 fp_ld4_first(__global const float4 *p) {
  float x, y, z, w;
  asm volatile("ld.global.cs.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(x), "=f"(y), "=f"(z), "=f"(w)
               : "l"(p));
  return (float4)(x, y, z, w);
}
#else
#define fp_ld4_first(p) (*(p))
#endif
#if defined(FP_NV_PTX) && FP_NV_PTX >= 2
static FP_INLINE float4 fp_ld4_keep(__global const float4 *p) {
  float x, y, z, w;
  asm volatile("{\n\t.reg .b64 pol;\n\t"
               "createpolicy.fractional.L2::evict_last.b64 pol, 1.0;\n\t"
               "ld.global.L1::evict_last.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], pol;\n\t}"
               : "=f"(x), "=f"(y), "=f"(z), "=f"(w)
               : "l"(p));
  return (float4)(x, y, z, w);
}
#else
#define fp_ld4_keep(p) (*(p))
#endif

/* ---- float4 helpers -------------------------------------------------------------- */

static FP_INLINE float fp_hsum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

static FP_INLINE float fp_hmax4(float4 v) {
  return fp_maximum(fp_maximum(v.x, v.y), fp_maximum(v.z, v.w));
}

static FP_INLINE float4 fp_maximum4(float4 a, float4 b) {
  return (float4)(fp_maximum(a.x, b.x), fp_maximum(a.y, b.y), fp_maximum(a.z, b.z),
                  fp_maximum(a.w, b.w));
}

/* ---- group reductions ------------------------------------------------------------
 * Two barriers per reduction instead of log2(L): every work-item stores its
 * value in slots[]; after a barrier, stage 1: the first `width` work-items
 * each fold a strided share of the slots (consecutive work-items read
 * consecutive addresses: no bank conflicts) into partials[]; after a second
 * barrier, stage 2: every work-item folds the `width` partials itself, in
 * the same order, so all of them hold the same result without a broadcast.
 *
 * Both folds are unrolled over a compile-time bound, each step predicated
 * on the (uniform) trip count, into independent accumulators combined at
 * the end: no load waits for another, so they issue back to back, and the
 * combines form short chains. A loop with a run-time trip count and one
 * accumulator is a chain of dependent local load + combine steps, some 30
 * cycles each on a GPU (32 steps per stage at L = 1024), while the rest of
 * the group waits at the barrier.
 *
 * Reuse is safe without a third barrier: the next reduction writes slots[]
 * only after this one's second barrier, which no work-item passes before
 * stage 1 has read the slots, and partials[] only after its own first
 * barrier, which no work-item reaches before it has read this reduction's
 * partials (stage 2). Must be called by the whole group (uniform control
 * flow). `op` is an FP_REDUCE_* code; the wrappers pass a constant, which
 * the compiler folds. */

static FP_INLINE float fp_reduce_combine(int op, float x, float y) {
  return op == FP_REDUCE_SUM ? x + y : fp_maximum(x, y); /* torch.amax: NaN propagates */
}

/* x op identity == x: 0 for a sum, -inf for fp_maximum (a NaN stays NaN). */
static FP_INLINE float fp_reduce_identity(int op) { return op == FP_REDUCE_SUM ? 0.0f : -INFINITY; }

static FP_INLINE float4 fp_reduce_combine4(int op, float4 x, float4 y) {
  return op == FP_REDUCE_SUM ? x + y : fp_maximum4(x, y);
}

/* (x op y) op (z op w) */
static FP_INLINE float fp_reduce_hcombine4(int op, float4 v) {
  return fp_reduce_combine(op, fp_reduce_combine(op, v.x, v.y), fp_reduce_combine(op, v.z, v.w));
}

/* Four accumulators, combined as (a0 op a1) op (a2 op a3). */
static FP_INLINE float fp_reduce_acc4(int op, const float *acc) {
  return fp_reduce_combine(op, fp_reduce_combine(op, acc[0], acc[1]),
                           fp_reduce_combine(op, acc[2], acc[3]));
}

/* Width of the second stage of fp_group_reduce: ~sqrt(L), so that both
 * stages stay short (8 for L = 32, 32 for L = 1024). Then neither stage
 * folds more than FP_PARTIALS values: ceil(L / width) <= width below 32, and
 * L <= FP_MAX_GROUP = 32 * FP_PARTIALS. */
static uint fp_partials_width(uint n) {
  uint width = 1;
  while (width * width < n && width < FP_PARTIALS)
    width *= 2;
  return min(width, n);
}

/* The group reduction of prim.cl, for any L (not necessarily a power of
 * two), with partials[] of FP_PARTIALS floats: scalar loads, as nothing
 * aligns its arrays (the teams below read float4). */
static float fp_group_reduce(int op, float v, __local float *slots, __local float *partials) {
  const uint lid = get_local_id(0), n = get_local_size(0);
  const uint width = fp_partials_width(n);
  slots[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < width) {
    float acc[4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
      acc[a] = fp_reduce_identity(op);
#pragma unroll
    for (uint k = 0; k < FP_PARTIALS; ++k) {
      const uint t = lid + k * width;
      if (t < n)
        acc[k & 3] = fp_reduce_combine(op, acc[k & 3], slots[t]);
    }
    partials[lid] = fp_reduce_acc4(op, acc);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float acc[4];
#pragma unroll
  for (int a = 0; a < 4; ++a)
    acc[a] = fp_reduce_identity(op);
#pragma unroll
  for (uint t = 0; t < FP_PARTIALS; ++t)
    if (t < width)
      acc[t & 3] = fp_reduce_combine(op, acc[t & 3], partials[t]);
  return fp_reduce_acc4(op, acc);
}

static float fp_group_sum(float v, __local float *slots, __local float *partials) {
  return fp_group_reduce(FP_REDUCE_SUM, v, slots, partials);
}

static float fp_group_max(float v, __local float *slots, __local float *partials) {
  return fp_group_reduce(FP_REDUCE_MAX, v, slots, partials);
}

/* ---- teams: one or several rows per group ------------------------------------------
 * The ROWS kernels of reduce*.cl and horizontal.cl split their group of L
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

#ifndef FP_ROW_VEC
#define FP_ROW_VEC 4 /* float4 per work-item: must match FP_CL_ROW_VEC of the backend */
#endif
#define FP_MIN_TEAM 4
/* The first stage of a team reduction (fp_team_reduce): at most
 * FP_TEAM_WIDTH work-items, each folding at most FP_TEAM_FOLD =
 * 2^FP_TEAM_FOLD_LOG2 float4 of slots (a team of FP_MAX_GROUP). */
#define FP_TEAM_WIDTH 8
#define FP_TEAM_FOLD_LOG2 5
#define FP_TEAM_FOLD (FP_MAX_GROUP / (4 * FP_TEAM_WIDTH))
/* Local arrays of FP_MAX_GROUP floats for the team reductions, which read
 * them as float4: declared as float4 for the alignment, used through a
 * float pointer `name`. In a kernel's body (OpenCL C 1.2 allows __local
 * variables only at kernel scope). */
#define FP_TEAM_SCRATCH(name)                                                                      \
  __local float4 name##_f4[FP_MAX_GROUP / 4];                                                      \
  __local float *const name = (__local float *)name##_f4
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
  int width; /* work-items of the first reduction stage, W (fp_team_reduce) */
  int fold;  /* float4 of slots each of them folds, T / (4 * W) */
} fp_team;

/* The team for rows of N with `vec` float4 per work-item (FP_ROW_VEC for
 * the cached kernels of reduce*.cl; horizontal.cl, which streams every row
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
  tm.width = min(FP_TEAM_WIDTH, t >> 2);
  tm.fold = (t >> 2) / tm.width;
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

/* ---- one kernel per mode and row operator -----------------------------------------
 * Each row kernel of reduce*.cl is written once, as fp_<op>_rows(..., mode),
 * and compiled once per mode (FP_ROWS_KERNELS):
 *   <op>_fused         mode ANY: chooses the cached or the streaming path at
 *                      run time; correct for any geometry (kernels.def's
 *                      contract, and what the host geometry launches);
 *   <op>_fused_cached  mode CACHED: only the register-cache path; a launch
 *                      whose rows do not fit returns at once (uniformly,
 *                      before any barrier) and writes nothing;
 *   <op>_fused_stream  mode STREAM: only the streaming path; any geometry;
 *   <op>_fused_stream_back  mode STREAM_BACK: the same, its output pass
 *                      writing each work-item's vectors last first
 *                      (fp_stream_first); softmax, norm_chain, layernorm
 *                      and softmax_backward, for long rows (plan_rows);
 *   <op>_fused_local_back  mode LOCAL_BACK: _stream_back, its first pass
 *                      also storing the row's first FP_PREFIX_ROW_VEC
 *                      vectors in lcache, which the output pass reads
 *                      back (fp_rows_local_prefix); softmax and norm_chain;
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
 * FP_ROWS_KERNELS_LOCAL_UNUSED for double_softmax and
 * FP_ROWS_KERNELS_STATS for layernorm;
 * softmax_backward, which holds two rows, is not written for one
 * (FP_ROWS_KERNELS_NO_LOCAL). */
#define FP_ROWS_ANY 0
#define FP_ROWS_CACHED 1
#define FP_ROWS_STREAM 2
#define FP_ROWS_LOCAL 3
#define FP_ROWS_STREAM_BACK 4
#define FP_ROWS_LOCAL_BACK 5

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
/* _local_back's prefix: FP_LOCAL_ROW_VEC + 1/4, 40 KiB, with slots and
 * partials the 48 KiB a kernel may declare on NVIDIA's OpenCL. */
#define FP_PREFIX_ROW_VEC (FP_LOCAL_ROW_VEC + FP_LOCAL_ROW_VEC / 4)

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

/* Whether a LOCAL_BACK kernel keeps the first FP_PREFIX_ROW_VEC vectors of
 * its rows' bodies in lcache: where the team is the whole group, as for
 * fp_rows_local. A long row's output pass, written last vector first,
 * finds its end in L2 (the first pass read it last) and its start, the
 * part L2 has most likely lost, in lcache. Uniform. */
static FP_INLINE int fp_rows_local_prefix(int mode, fp_team tm) {
  return mode == FP_ROWS_LOCAL_BACK && tm.size == (int)get_local_size(0);
}

/* Whether the first pass stores vector q in lcache: `keep` is 0 (never),
 * 1 (fp_rows_local: every vector) or 2 (fp_rows_local_prefix: the first
 * FP_PREFIX_ROW_VEC), a constant in each specialisation. */
static FP_INLINE int fp_keep_at(int keep, long q) {
  return keep == 1 || (keep == 2 && q < FP_PREFIX_ROW_VEC);
}

/* The group's reduction scratch is declared in each kernel (OpenCL 1.2
 * allows __local variables only at kernel scope), and so is the mode, as a
 * constant: `args` is the call's argument list in parentheses and names
 * the scratch (slots and partials, or stats), lcache (where the operator
 * has a _local kernel) and mode last (OpenCL C 1.2 has no variadic macros,
 * so the list cannot be extended here). `decls` declares them:
 * FP_ROWS_DECL_LOCAL slots, partials and the lcache array (the _local
 * kernel); FP_ROWS_DECL_NULL slots, partials and lcache as a null pointer,
 * never dereferenced (fp_rows_local is constant 0 there); FP_ROWS_DECL_NONE
 * slots and partials (an operator without a _local kernel);
 * FP_ROWS_DECL_WIDE slots of FP_MAX_GROUP float4 (16 KiB, for
 * fp_team_sum4; the float reductions use its first FP_MAX_GROUP floats),
 * partials and lcache as a null pointer; FP_ROWS_DECL_STATS stats
 * (fp_team_stats of reduce_norm.cl: FP_TEAM_STATS float4, 20 KiB) and lcache as
 * a null pointer. */
#define FP_TEAM_STATS (FP_MAX_GROUP + FP_MAX_GROUP / 4)
#define FP_ROWS_DECL_NONE                                                                          \
  FP_TEAM_SCRATCH(slots);                                                                          \
  FP_TEAM_SCRATCH(partials)
#define FP_ROWS_DECL_LOCAL                                                                         \
  FP_ROWS_DECL_NONE;                                                                               \
  __local float4 lcache[FP_LOCAL_ROW_VEC]
#define FP_ROWS_DECL_PREFIX                                                                        \
  FP_ROWS_DECL_NONE;                                                                               \
  __local float4 lcache[FP_PREFIX_ROW_VEC]
#define FP_ROWS_DECL_NULL                                                                          \
  FP_ROWS_DECL_NONE;                                                                               \
  __local float4 *const lcache = 0
#define FP_ROWS_DECL_WIDE                                                                          \
  __local float4 slots_f4[FP_MAX_GROUP];                                                           \
  __local float *const slots = (__local float *)slots_f4;                                          \
  FP_TEAM_SCRATCH(partials);                                                                       \
  __local float4 *const lcache = 0
#define FP_ROWS_DECL_STATS                                                                         \
  __local float4 stats[FP_TEAM_STATS];                                                             \
  __local float4 *const lcache = 0
#define FP_ROWS_KERNEL_AS(kernel, op, row_mode, decls, params, args)                               \
  __kernel void kernel params {                                                                    \
    decls;                                                                                         \
    const int mode = row_mode;                                                                     \
    fp_##op##_rows args;                                                                           \
  }
#if FP_LOCAL_ROW_VEC > 0
#define FP_ROWS_KERNEL_LOCAL(op, params, args)                                                     \
  FP_ROWS_KERNEL_AS(op##_fused_local, op, FP_ROWS_LOCAL, FP_ROWS_DECL_LOCAL, params, args)         \
  FP_ROWS_KERNEL_AS(op##_fused_local_back, op, FP_ROWS_LOCAL_BACK, FP_ROWS_DECL_PREFIX, params,    \
                    args)
#else /* no _local kernels: the backend launches _stream */
#define FP_ROWS_KERNEL_LOCAL(op, params, args)
#endif
#define FP_ROWS_KERNELS(op, params, args)                                                          \
  FP_ROWS_KERNEL_AS(op##_fused, op, FP_ROWS_ANY, FP_ROWS_DECL_NULL, params, args)                  \
  FP_ROWS_KERNEL_AS(op##_fused_cached, op, FP_ROWS_CACHED, FP_ROWS_DECL_NULL, params, args)        \
  FP_ROWS_KERNEL_AS(op##_fused_stream, op, FP_ROWS_STREAM, FP_ROWS_DECL_NULL, params, args)        \
  FP_ROWS_KERNEL_AS(op##_fused_stream_back, op, FP_ROWS_STREAM_BACK, FP_ROWS_DECL_NULL, params,    \
                    args)                                                                          \
  FP_ROWS_KERNEL_LOCAL(op, params, args)
/* double_softmax: written for lcache, built without its _local kernel.
 * Timed on an H100 against _stream (2026-11-23, docs/PERF.md), it ran
 * within +-4%, bound by its exponentials. Its streamed rows reduce float4
 * power sums (fp_team_sum4): _fused and _stream declare the wide slots
 * (FP_ROWS_DECL_WIDE, 20 KiB with partials), _cached the usual 8 KiB. Add
 * FP_ROWS_KERNEL_LOCAL(op, params, args) to build the _local kernel again:
 * it keeps the narrow slots (lcache's 32 KiB and 16 more would pass the
 * 48 KiB of NVIDIA's OpenCL) and with them the three passes. */
#define FP_ROWS_KERNELS_LOCAL_UNUSED(op, params, args)                                             \
  FP_ROWS_KERNEL_AS(op##_fused, op, FP_ROWS_ANY, FP_ROWS_DECL_WIDE, params, args)                  \
  FP_ROWS_KERNEL_AS(op##_fused_cached, op, FP_ROWS_CACHED, FP_ROWS_DECL_NULL, params, args)        \
  FP_ROWS_KERNEL_AS(op##_fused_stream, op, FP_ROWS_STREAM, FP_ROWS_DECL_WIDE, params, args)
#define FP_ROWS_KERNELS_NO_LOCAL(op, params, args)                                                 \
  FP_ROWS_KERNEL_AS(op##_fused, op, FP_ROWS_ANY, FP_ROWS_DECL_NONE, params, args)                  \
  FP_ROWS_KERNEL_AS(op##_fused_cached, op, FP_ROWS_CACHED, FP_ROWS_DECL_NONE, params, args)        \
  FP_ROWS_KERNEL_AS(op##_fused_stream, op, FP_ROWS_STREAM, FP_ROWS_DECL_NONE, params, args)        \
  FP_ROWS_KERNEL_AS(op##_fused_stream_back, op, FP_ROWS_STREAM_BACK, FP_ROWS_DECL_NONE, params,    \
                    args)
/* layernorm: its scratch is stats[] (fp_team_stats), and it is written for
 * lcache too (its streaming pass stores the row there, the output pass
 * reads it back), built without its _local kernel: timed on an H100
 * against _stream (2026-11-23, docs/PERF.md), that kernel, which then read
 * x three times and spilled 20 bytes under NVIDIA's 64-register cap, ran
 * 10-20% slower. lcache's 32 KiB and stats' 20 KiB would also exceed the
 * 48 KiB of local memory a kernel may declare on NVIDIA's OpenCL. */
#define FP_ROWS_KERNELS_STATS(op, params, args)                                                    \
  FP_ROWS_KERNEL_AS(op##_fused, op, FP_ROWS_ANY, FP_ROWS_DECL_STATS, params, args)                 \
  FP_ROWS_KERNEL_AS(op##_fused_cached, op, FP_ROWS_CACHED, FP_ROWS_DECL_STATS, params, args)       \
  FP_ROWS_KERNEL_AS(op##_fused_stream, op, FP_ROWS_STREAM, FP_ROWS_DECL_STATS, params, args)       \
  FP_ROWS_KERNEL_AS(op##_fused_stream_back, op, FP_ROWS_STREAM_BACK, FP_ROWS_DECL_STATS, params,   \
                    args)

/* ---- team reductions ---------------------------------------------------------------
 * fp_group_reduce's two-barrier scheme, each team over its own T slots (at
 * its base), with loads of 16 bytes:
 *   stage 1: W = min(FP_TEAM_WIDTH, T / 4) work-items of the team each fold
 *     T / (4W) float4 of its slots, lane, lane + W, ... (consecutive
 *     work-items read consecutive 16 bytes: no bank conflicts), into two
 *     float4 accumulators (8 independent chains), and store the result as
 *     partial `lane` at the team's base;
 *   stage 2: every work-item of the team reads the W partials as float4
 *     (at most 2 loads, the same address across the team: a broadcast) and
 *     folds them in the same order.
 * Why W = 8 rather than ~sqrt(T): local memory returns one 32-bit register
 * per warp and cycle (128 bytes per SM on NVIDIA), a load that every
 * work-item of a warp makes at the same address included, and a uniform
 * 128-bit load returns its four in about two cycles (NVIDIA's forum on
 * sm_70: 2 requests instead of 4). Stage 2 costs the SM (T / 32) * W
 * returns, 1024 cycles for T = 1024 with W = 32 scalar loads, 128 with W = 8
 * read as float4; stage 1 costs one warp T / W returns, 128 at T = 1024 (32
 * back-to-back 16-byte loads per work-item). The sum, T / W + T * W / 64, is
 * least at W = 8 for every T. Stage 1 is unrolled over FP_TEAM_FOLD, the
 * most float4 a work-item folds (T = FP_MAX_GROUP), in blocks behind uniform
 * branches.
 * A team of T < 16 (W < 4) pads its partials with the identity up to 4
 * (work-items W..3 store it), so that stage 2 reads a whole float4.
 * The reuse argument of fp_group_reduce holds as it is. slots[] and
 * partials[] hold FP_MAX_GROUP floats each, 16-byte aligned (declare them
 * with FP_TEAM_SCRATCH); T >= FP_MIN_TEAM = 4 keeps each team's base a
 * multiple of 4 (a group of L < 4, which the backend never launches, would
 * also lose the head and tail scalars of fp_rowpart). Must be reached by
 * the whole group, idle work-items included (a group of L not a multiple
 * of T has some). */

/* Stage 1 on a work-item of a whole team with lane < W: the fold of its
 * share of the team's slots, s[k * W] for k < tm.fold. tm.fold is a power
 * of two, so the loads come in blocks k in [2^b, 2^(b+1)), each behind one
 * uniform branch and unconditional inside it: a block's loads issue back
 * to back (a branch per load would keep the compiler from hoisting the
 * next load above it). A team with tm.fold > 1 has T > 32 and W =
 * FP_TEAM_WIDTH, a constant stride: each load addresses s plus an
 * immediate offset. (With the stride W in a register, clang's NVPTX
 * backend kept an address per load live and spilled 100-200 bytes more
 * per kernel under ptxas -maxrregcount=64, sm_90.) */
static FP_INLINE float fp_team_fold_slots(int op, __local const float *slots, fp_team tm) {
  __local const float4 *s = (__local const float4 *)(slots + tm.base) + tm.lane;
  float4 acc[2];
  acc[0] = s[0];
  acc[1] = (float4)(fp_reduce_identity(op));
#pragma unroll
  for (int b = 0; b < FP_TEAM_FOLD_LOG2; ++b) {
    if ((1 << b) < tm.fold) {
#pragma unroll
      for (int k = 1 << b; k < 2 << b; ++k)
        acc[k & 1] = fp_reduce_combine4(op, acc[k & 1], s[k * FP_TEAM_WIDTH]);
    }
  }
  return fp_reduce_hcombine4(op, fp_reduce_combine4(op, acc[0], acc[1]));
}

/* Stage 1 on a work-item of a whole team: lanes below W store their fold
 * as partial `lane`, lanes W..3 the identity (the padding). */
static FP_INLINE void fp_team_store_partial(int op, __local const float *slots,
                                            __local float *partials, fp_team tm) {
  if (tm.lane < tm.width)
    partials[tm.base + tm.lane] = fp_team_fold_slots(op, slots, tm);
  else if (tm.lane < 4)
    partials[tm.base + tm.lane] = fp_reduce_identity(op);
}

/* Stage 2 on a work-item of a whole team: the fold of the team's partials,
 * the same on every work-item. */
static FP_INLINE float fp_team_fold_partials(int op, __local const float *partials, fp_team tm) {
  __local const float4 *p = (__local const float4 *)(partials + tm.base);
  float4 acc = p[0];
#pragma unroll
  for (int j = 1; j < FP_TEAM_WIDTH / 4; ++j)
    if (4 * j < tm.width)
      acc = fp_reduce_combine4(op, acc, p[j]);
  return fp_reduce_hcombine4(op, acc);
}

static float fp_team_reduce(int op, float v, fp_team tm, __local float *slots,
                            __local float *partials) {
  const int real = tm.index < tm.count;
  slots[tm.base + tm.lane] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (real)
    fp_team_store_partial(op, slots, partials, tm);
  barrier(CLK_LOCAL_MEM_FENCE);
  float total = v;
  if (real)
    total = fp_team_fold_partials(op, partials, tm);
  return total;
}

static float fp_team_sum(float v, fp_team tm, __local float *slots, __local float *partials) {
  return fp_team_reduce(FP_REDUCE_SUM, v, tm, slots, partials);
}

/* The team's sum of float4 values, fp_team_reduce's two barriers over
 * slots4[] of FP_MAX_GROUP float4 (FP_ROWS_DECL_WIDE): stage 1, work-item
 * lane < W adds the T / W >= 4 float4 lane, lane + W, ... (consecutive
 * work-items read consecutive 16 bytes), four loads at a time into two
 * accumulators, as fp_stats_fold, and stores float4 partial `lane` at the
 * team's base of partials[] (4W <= T floats: the team's own range); stage
 * 2, every work-item adds the W partials in the same order. One reduction
 * where three of floats would take six barriers: on NVIDIA, by
 * fp_team_reduce's count, stage 1 costs 4T / W returns and stage 2
 * T * W / 16, least at W = 8 again (T = 1024: about 1024 cycles, four
 * float reductions' worth). The reuse argument of fp_team_reduce holds,
 * with the float reductions too (slots4 is their slots, partials theirs).
 * Must be reached by the whole group. */
static float4 fp_team_sum4(float4 v, fp_team tm, __local float4 *slots4, __local float *partials) {
  const int real = tm.index < tm.count;
  __local float4 *part = (__local float4 *)(partials + tm.base);
  slots4[tm.base + tm.lane] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (real && tm.lane < tm.width) {
    __local const float4 *s = slots4 + tm.base + tm.lane;
    float4 acc[2] = {s[0], s[tm.width]};
    acc[0] += s[2 * tm.width];
    acc[1] += s[3 * tm.width];
    for (int k = 4; k < 4 * tm.fold; k += 4) { /* T > 32: W = FP_TEAM_WIDTH */
#pragma unroll
      for (int u = 0; u < 4; ++u)
        acc[u & 1] += s[(k + u) * FP_TEAM_WIDTH];
    }
    part[tm.lane] = acc[0] + acc[1];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float4 total = v;
  if (real) {
    float4 acc[2] = {part[0], (float4)(0.0f)};
#pragma unroll
    for (int j = 1; j < FP_TEAM_WIDTH; ++j)
      if (j < tm.width)
        acc[j & 1] += part[j];
    total = acc[0] + acc[1];
  }
  return total;
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

/* The output pass of a streamed row (fp_rowpart): work-item lane writes the
 * vectors lane, lane + T, ... below nvec; *k of them. With `back` it takes
 * them last first (returns the last, *step = -T): the pass before read the
 * row forwards, so its end is the most recently read and the likeliest to
 * be still in L2. The CUDA streaming kernels write that way. */
static FP_INLINE long fp_stream_first(fp_rowpart p, fp_team tm, int back, long *k, long *step) {
  *k = tm.lane < p.nvec ? fp_div_narrow(p.nvec - 1 - tm.lane, tm.size) + 1 : 0;
  *step = back ? -(long)tm.size : (long)tm.size;
  return back ? tm.lane + (*k - 1) * tm.size : tm.lane;
}
