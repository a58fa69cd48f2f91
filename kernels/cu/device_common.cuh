/* fuseport CUDA kernels: the device helpers every kernels/cu/<family>.cu
 * shares -- launch-geometry indices, 128-bit accesses, block reductions, the
 * per-row split into 16-byte vectors, row teams and register caches. The
 * OpenCL kernels' twins are in kernels/cl/common.cl. It includes the
 * backend's interface (backend/cuda/cuda_kernels.h: the registration of the
 * kernels' host stubs and the planned families' launchers).
 *
 * Two parts of it are files of their own, which it includes in place
 * (inside namespace fpcu): the row helpers (the split, teams, register
 * caches, staging, streaming) in device_rows.cuh, the ELEM helpers
 * (elem_map_2d, the lean builds) in device_elem.cuh. Kernels include this
 * file only.
 */
#ifndef FUSEPORT_CUDA_DEVICE_COMMON_CUH
#define FUSEPORT_CUDA_DEVICE_COMMON_CUH

#include "cuda/cuda_kernels.h"

/* ==== device helpers shared by kernels/cu/<family>.cu (nvcc only) ======== */
/* FPCU_EMULATION: compiled as host C++ by tests/cuda_emu, which runs the
 * row kernels on CPU threads (barriers, warp shuffles and clusters
 * emulated) so that their logic is tested on machines without a GPU. */
#if defined(__CUDACC__) || defined(FPCU_EMULATION)

#ifndef FPCU_EMULATION
#include <cooperative_groups.h>
#endif
#include <math_constants.h>

#include <string.h>

#include <type_traits>

#include "fp_device_common.h"

namespace fpcu {

/* Every kernel must launch with blocks of up to 1024 threads (the largest
 * local size the host may pick), i.e. use at most 64 registers per thread:
 * __launch_bounds__(kMaxBlock, 1) (with the 1, ptxas may not aim for two
 * such blocks per SM, i.e. 32 registers, and spill: it did on sm_80), or a
 * lower __maxnreg__ where a kernel is tuned for occupancy (ROWS). */
constexpr int kMaxBlock = 1024;
constexpr unsigned kFullMask = 0xffffffffu;

/* ---- geometry ------------------------------------------------------------ */

/* ELEM: this thread's first index and the grid-wide step, in 64 bits (the
 * product gridDim.x * blockDim.x does not fit in 32). */
__device__ __forceinline__ long long grid_thread_index() {
  return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long grid_thread_count() {
  return (long long)gridDim.x * blockDim.x;
}

__device__ __forceinline__ bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

/* Visits indices begin, begin+step, ... < end, U at a time: the U loads of
 * a round are issued before the first use, so that U memory requests per
 * thread are in flight; the last round is predicated rather than run one
 * item at a time, which matters when a thread has only a few items (a
 * 64 MiB elementwise cell gives each thread about two). load(i) is called
 * in increasing order of i (loaders may keep a running cursor). */
template <int U, class Load, class Use>
__device__ __forceinline__ void strided_unrolled(long long begin, long long end, long long step,
                                                 Load load, Use use) {
  using Item = decltype(load(begin));
  long long i = begin;
  for (; i + (U - 1) * step < end; i += U * step) {
    Item items[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      items[u] = load(i + u * step);
#pragma unroll
    for (int u = 0; u < U; ++u)
      use(i + u * step, items[u]);
  }
  if constexpr (U > 1) {
    /* the last round, fewer than U items: the same loads first, predicated */
    if (i < end) {
      Item items[U - 1]{}; /* initialised: GCC's emulation build cannot see the predicate */
#pragma unroll
      for (int u = 0; u < U - 1; ++u)
        if (i + u * step < end)
          items[u] = load(i + u * step);
#pragma unroll
      for (int u = 0; u < U - 1; ++u)
        if (i + u * step < end)
          use(i + u * step, items[u]);
    }
  } else {
    for (; i < end; i += step)
      use(i, load(i));
  }
}

/* ELEM over n contiguous elements: float4 items (vec: every pointer 16-byte
 * aligned), then the n % 4 tail as scalars; otherwise all scalars. */
template <int U, class LoadV, class UseV, class LoadS, class UseS>
__device__ __forceinline__ void elem_flat(long long n, bool vec, LoadV load_vec, UseV use_vec,
                                          LoadS load_scalar, UseS use_scalar) {
  const long long first = grid_thread_index(), step = grid_thread_count();
  if (vec) {
    const long long nvec = n >> 2;
    strided_unrolled<U>(first, nvec, step, load_vec, use_vec);
    for (long long e = (nvec << 2) + first; e < n; e += step)
      use_scalar(e, load_scalar(e));
  } else {
    strided_unrolled<U>(first, n, step, load_scalar, use_scalar);
  }
}

/* The (row, column) of a flat row-major index that advances by a fixed step:
 * one 64-bit division at the start, then an add and a compare per step. */
struct RowColCursor {
  long long i, j;   /* current row and column */
  long long di, dj; /* the step as whole rows plus 0 <= dj < cols */
  long long cols;
  __device__ __forceinline__ RowColCursor(long long start, long long step, long long n_cols) {
    cols = n_cols;
    i = quotient(start, cols);
    j = start - i * cols;
    di = quotient(step, cols);
    dj = step - di * cols;
  }
  /* a / b for a >= 0, b > 0: a 32-bit division when both fit, as they do
   * below 2^32 elements (a 64-bit one is a long subroutine, and every
   * thread of an ELEM kernel divides twice before its first load) */
  static __device__ __forceinline__ long long quotient(long long a, long long b) {
    if ((((unsigned long long)a | (unsigned long long)b) >> 32) == 0)
      return (long long)((unsigned)a / (unsigned)b);
    return a / b;
  }
  __device__ __forceinline__ void advance() {
    i += di;
    j += dj;
    if (j >= cols) { /* j < 2*cols: one wrap at most */
      j -= cols;
      ++i;
    }
  }
};

/* A read-only [M, N] operand with element strides (0 broadcasts). */
struct View2D {
  const float *p;
  long long s0, s1;
  __device__ __forceinline__ const float *at(long long i, long long j) const {
    return p + i * s0 + j * s1;
  }
  /* Offsets equal the row-major index i*N+j for every (i, j) of [M, N]. */
  __device__ __forceinline__ bool flat(long long M, long long N) const {
    return (M == 1 || s0 == N) && (N == 1 || s1 == 1);
  }
  /* Four columns j..j+3 (j % 4 == 0, N % 4 == 0) load as one float4: a
   * row-contiguous view with 16-byte aligned rows, or a row broadcast. */
  __device__ __forceinline__ bool row_vec(void) const {
    return s1 == 0 || (s1 == 1 && s0 % 4 == 0 && aligned16(p));
  }
  __device__ __forceinline__ float4 load4(long long i, long long j) const {
    const float *q = at(i, j);
    if (s1 == 0) {
      const float v = __ldg(q);
      return make_float4(v, v, v, v);
    }
    return __ldg(reinterpret_cast<const float4 *>(q));
  }
};

/* ---- 128-bit accesses and float4 arithmetic ------------------------------- */

/* A 16-byte load, p 16-byte aligned, of data the kernel does not write
 * before reading it; marked evict_last in L1 and L2, as torch.compile's
 * Inductor marks its loads (eviction_policy='evict_last'). Against the
 * ld.global.nc it replaced, on an H100 after the bench's L2 write flush,
 * three alternating rounds on cells of 64 KiB-32 MiB (2026-11-24,
 * 120e041:docs/results/2026-11-24-h100-evict-last/rows/): geometric mean time over
 * 12 shapes 0.86-0.90x for the row ops (softmax_backward 256 x 2048 8.19 ->
 * 6.21 us, layernorm 1024 x 1024 9.82 -> 7.23; hreduce_reduce, whose loads
 * are mostly evict-first, unchanged) and, in the lean ELEM builds,
 * bias_dropout_add 1024 x 1024 9.82 -> 7.39 (access-b/). Part of that, on cells
 * that fit in L2, is the hint outliving the flush: lines a repetition
 * loaded evict_last outrank the flush's and are still there for the next
 * (bench/probes/evict_last.cu: a 12 MiB copy after an evict_last load and a
 * 100 MiB write flush 12.1 us, after a normal load 14.0); torch.compile's
 * kernels get the same, so both sides are timed alike (docs/PERF.md).
 * Before sm_80 (no cache hints): ld.global.nc. */
#if !defined(FPCU_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/* The L2 cache policy of ldg4's loads: evict_last for every line. */
__device__ __forceinline__ unsigned long long l2_evict_last_policy() {
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
#endif
__device__ __forceinline__ float4 ldg4(const float *p) {
#if !defined(FPCU_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float4 v;
  asm volatile("ld.global.L1::evict_last.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p), "l"(l2_evict_last_policy()));
  return v;
#else
  return __ldg(reinterpret_cast<const float4 *>(p));
#endif
}
/* A read-once stream: ld.global.cs marks the lines evict-first, so the
 * stream displaces its own lines rather than what the L2 held before the
 * kernel. Where a kernel reads much more than it writes and starts with
 * the L2 full of dirty lines (a previous kernel's output; the bench's write
 * flush), loads that allocate normally first pay for writing those lines
 * back: an H100 row reduction over 128 MiB took 57.0 us with ld.global.nc
 * and 50.4-53.8 with .cs. Streamed at length, .cs is about 3.5% slower
 * (4 GiB: 1347 against 1397 us), and for copies and maps, whose stores
 * evict the same lines either way, it bought nothing
 * (bench/probes/l2_policy.cu), so only hreduce_reduce uses it, and only up
 * to a size (kernels/cu/horizontal.cu). Same alignment and read-only rules
 * as ldg4. */
__device__ __forceinline__ float ldcs(const float *p) { return __ldcs(p); }
__device__ __forceinline__ float4 ldcs4(const float *p) {
  return __ldcs(reinterpret_cast<const float4 *>(p));
}
/* __stwb is the default store (st.global.wb) as an intrinsic the optimizer
 * keeps: in st4_any a plain float4 store and the four scalar stores of the
 * other branch are equivalent, and the compiler would merge both branches
 * into the scalar form. */
__device__ __forceinline__ void st4(float *p, float4 v) {
  __stwb(reinterpret_cast<float4 *>(p), v);
}

/* ldg4 without the hint (ld.global.nc, normal priority), for streams that
 * do not fit in L2 and are read again (layernorm's streamed rows: see
 * kLayerNormKeepFloats in kernels/cu/reduce_rows.cuh). */
__device__ __forceinline__ float4 ldg4_nc(const float *p) {
  return __ldg(reinterpret_cast<const float4 *>(p));
}

/* ldg4 that leaves L1 alone (L1::no_allocate; L2 evict_last as ldg4): for
 * an array read beside a row that a block streams twice, so that the
 * row's lines stay in L1 for the second pass (layernorm's w and b, see
 * layernorm_row_streamed in kernels/cu/reduce_rows.cuh). Same rules as ldg4. */
__device__ __forceinline__ float4 ldg4_l1skip(const float *p) {
#if !defined(FPCU_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float4 v;
  asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p), "l"(l2_evict_last_policy()));
  return v;
#else
  return __ldg(reinterpret_cast<const float4 *>(p));
#endif
}

/* Four consecutive floats, as one 128-bit access when vec (p 16-byte
 * aligned), else as four 32-bit ones. */
__device__ __forceinline__ float4 ldg4_any(const float *p, bool vec) {
  if (vec)
    return ldg4(p);
  return make_float4(__ldg(p), __ldg(p + 1), __ldg(p + 2), __ldg(p + 3));
}
__device__ __forceinline__ void st4_any(float *p, float4 v, bool vec) {
  if (vec) {
    st4(p, v);
  } else {
    p[0] = v.x;
    p[1] = v.y;
    p[2] = v.z;
    p[3] = v.w;
  }
}

template <class F> __device__ __forceinline__ float4 map4(float4 a, F f) {
  return make_float4(f(a.x), f(a.y), f(a.z), f(a.w));
}
template <class F> __device__ __forceinline__ float4 map4(float4 a, float4 b, F f) {
  return make_float4(f(a.x, b.x), f(a.y, b.y), f(a.z, b.z), f(a.w, b.w));
}

/* ---- reductions ---------------------------------------------------------- */

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
/* torch.amax: NaN propagates (fp_maximum); identity -inf. */
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fp_maximum(a, b); }
};

/* Largest value type a block reduction takes (four floats). */
constexpr int kMaxReduceBytes = 16;

/* Warp shuffles of any value made of 32-bit words (float, or a struct of
 * floats such as the reductions' running statistics): shuffle(word) moves
 * each word. */
template <class T, class Shuffle> __device__ __forceinline__ T shuffle_words(T v, Shuffle shuffle) {
  static_assert(sizeof(T) % 4 == 0 && sizeof(T) <= kMaxReduceBytes, "a struct of 32-bit words");
  unsigned w[sizeof(T) / 4];
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (unsigned k = 0; k < sizeof(T) / 4; ++k)
    w[k] = shuffle(w[k]);
  memcpy(&v, w, sizeof(T));
  return v;
}
template <class T> __device__ __forceinline__ T shfl_xor_words(T v, int lane_mask) {
  return shuffle_words(v, [=](unsigned w) { return __shfl_xor_sync(kFullMask, w, lane_mask); });
}
template <class T> __device__ __forceinline__ T shfl_from(T v, int lane) {
  return shuffle_words(v, [=](unsigned w) { return __shfl_sync(kFullMask, w, lane); });
}

/* Reduction of v over the warp, returned to every lane: a butterfly, then
 * lane 0's value everywhere (a combine whose rounding depends on operand
 * order, such as the Welford merge, would otherwise leave lanes a rounding
 * apart). */
template <class T, class Combine>
__device__ __forceinline__ T warp_allreduce(T v, Combine combine) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1)
    v = combine(v, shfl_xor_words(v, mask));
  return shfl_from(v, 0);
}

/* The same over a team of 2^LG lanes (LG 2..5: lanes first .. first +
 * 2^LG - 1 of the warp, first = lane & ~(2^LG - 1)), returned to every lane
 * of the team; for LG = 5, warp_allreduce itself. Only the team's lanes
 * take part (the shuffles' mask): the teams of one warp may run different
 * numbers of rows, so the others may have left the row loop. */
template <int LG, class T, class Combine>
__device__ __forceinline__ T lanes_allreduce(T v, Combine combine) {
  if constexpr (LG == 5) {
    return warp_allreduce(v, combine);
  } else {
    constexpr int w = 1 << LG;
    const int first = (int)(threadIdx.x & 31u) & ~(w - 1);
    const unsigned mask = ((1u << w) - 1u) << first;
#pragma unroll
    for (int o = w / 2; o > 0; o >>= 1)
      v = combine(v, shuffle_words(v, [=](unsigned x) { return __shfl_xor_sync(mask, x, o); }));
    return shuffle_words(v, [=](unsigned x) { return __shfl_sync(mask, x, first); });
  }
}

/* Shared memory of the block reductions: one slot per warp and the result.
 * The result lies after all 32 slots whatever the value type, so calls of
 * different types may follow each other on one scratch (see below). */
struct alignas(16) BlockScratch {
  unsigned char slot[32][kMaxReduceBytes];
  unsigned char result[kMaxReduceBytes];
  /* the cluster exchange's two buffers (ClusterTeam), and the slot its
   * combined result is broadcast through */
  unsigned char exchange[2][kMaxReduceBytes];
  unsigned char combined[kMaxReduceBytes];
};

/* Reduction of v over the whole block, returned to every thread.
 * blockDim.x must be a multiple of 32 (ROWS: a power of two in [32, 1024],
 * checked by the backend). Back-to-back calls on one scratch need no extra
 * barrier: each call writes the slots before its first barrier, when every
 * thread has passed the previous call's second barrier and so warp 0 has
 * read that call's slots; it writes the result between its two barriers,
 * when every thread has passed its first, after reading the previous
 * result. Every thread gets the value that warp 0's lane 0 computed, so a
 * combine whose rounding depends on the operand order still yields one
 * value. */
/* The block's one BlockScratch: a __shared__ variable of a device
 * function is one per kernel that uses it, and addressing it directly (not
 * through a pointer member) keeps shared-memory accesses 32-bit. */
__device__ __forceinline__ BlockScratch &block_scratch() {
#ifdef FPCU_EMULATION
  return *static_cast<BlockScratch *>(fpemu::block_shared(sizeof(BlockScratch)));
#else
  __shared__ BlockScratch scratch;
  return scratch;
#endif
}

template <class T, class Combine>
__device__ __forceinline__ T block_allreduce(T v, T identity, Combine combine) {
  BlockScratch &scratch = block_scratch();
  T *slots = reinterpret_cast<T *>(&scratch.slot[0][0]); /* T-sized, packed */
  T *result = reinterpret_cast<T *>(scratch.result);
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1)
    v = combine(v, shfl_xor_words(v, mask));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  if (lane == 0)
    slots[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? slots[lane] : identity;
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1)
      w = combine(w, shfl_xor_words(w, mask));
    if (lane == 0)
      *result = w;
  }
  __syncthreads();
  return *result;
}

__device__ __forceinline__ float block_sum(float v) { return block_allreduce(v, 0.0f, SumOp()); }
__device__ __forceinline__ float block_max(float v) {
  return block_allreduce(v, -CUDART_INF_F, MaxOp());
}

/* ---- rows: the split, teams, register caches, staging, streaming --------- */
/* RowSplit, BlockTeam / WarpTeam / ClusterTeam, RowCache, RowStage, SmemRow,
 * row_stream, part_stream, dispatch_cached: device_rows.cuh, a part of this
 * file. */
#include "device_rows.cuh"

/* ---- ELEM: elem_map_2d and the lean builds ------------------------------- */
/* elem_map_2d, dropout_apply, elem_flat32, elem_rowvec32, elem_flatbias32:
 * device_elem.cuh, a part of this file. */
#include "device_elem.cuh"

/* ---- the builds of a row kernel ------------------------------------------------
 * FPCU_ROWS_<TEAM>(call) declares `team` and runs call, a row loop over it;
 * the cluster form ends with cluster_done() and traps where clusters do
 * not exist (the planner never launches it there). */
/* variadic: a call's template arguments may hold commas */
#define FPCU_ROWS_BLOCK(...)                                                                       \
  const fpcu::BlockTeam team{};                                                                    \
  __VA_ARGS__
/* the warp builds: one instantiation per team width of FP_ROWS_WARP_LANES_LOG2
 * (a width known at compile time: the same registers as a warp per row) */
#define FPCU_ROWS_WARP(n, call)                                                                    \
  switch (FP_ROWS_WARP_LANES_LOG2(n)) {                                                            \
  case 2: {                                                                                        \
    const fpcu::WarpTeam<2> team{};                                                                \
    call;                                                                                          \
  } break;                                                                                         \
  case 4: {                                                                                        \
    const fpcu::WarpTeam<4> team{};                                                                \
    call;                                                                                          \
  } break;                                                                                         \
  default: {                                                                                       \
    const fpcu::WarpTeam<5> team{};                                                                \
    call;                                                                                          \
  } break;                                                                                         \
  }
#ifdef FPCU_HAVE_CLUSTERS
#define FPCU_ROWS_CLUSTER(call)                                                                    \
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();            \
  const fpcu::ClusterTeam team{cluster.block_rank(), cluster.num_blocks(), 0};                     \
  call;                                                                                            \
  fpcu::cluster_done()
#else
#define FPCU_ROWS_CLUSTER(call) __trap()
#endif

/* ---- registration of the ROWS builds (host code) ------------------------------ */

/* The tuning entry of a ROWS kernel: its builds (NULL where it has none),
 * where M and N are, and the cache of each build in float4 per thread (the
 * planner's preconditions; cluster_vectors 0: the cluster build streams),
 * and the row arrays the long-row build stages (RowStage; 0: none). */
inline fp_cuda_tuning rows_tuning(const void *long_rows, const void *warp_short, const void *warp,
                                  const void *cluster, int arg_m, int arg_n, int warp_short_vectors,
                                  int warp_vectors, int cluster_vectors, int long_vectors,
                                  unsigned full_block, int stage_rows) {
  fp_cuda_tuning t = {};
  const void *builds[FP_CUDA_MAX_BUILDS] = {};
  builds[FP_ROWS_LONG] = long_rows;
  builds[FP_ROWS_WARP_SHORT] = warp_short;
  builds[FP_ROWS_WARP] = warp;
  builds[FP_ROWS_CLUSTER] = cluster;
  t.names[FP_ROWS_LONG] = " (long-row build)";
  t.names[FP_ROWS_WARP_SHORT] = " (warp-per-row build, short rows)";
  t.names[FP_ROWS_WARP] = " (warp-per-row build)";
  t.names[FP_ROWS_CLUSTER] = " (cluster-per-row build)";
  for (int k = 0; k < FP_CUDA_MAX_BUILDS; ++k) {
    t.builds[k] = builds[k];
    t.offer.has[k] = builds[k] != nullptr;
  }
  t.rows = true;
  t.arg_m = arg_m;
  t.arg_n = arg_n;
  t.offer.warp_short_vectors = warp_short_vectors;
  t.offer.warp_vectors = warp_vectors;
  t.offer.cluster_vectors = cluster_vectors;
  t.offer.long_vectors = long_vectors;
  t.offer.full_block = full_block;
  t.offer.stage_rows = stage_rows;
  return t;
}

/* A ROWS kernel's tuning entry with its streaming build added, which keeps
 * its input rows of at least smem_min_n floats in shared memory (SmemRow;
 * 0: none). */
inline fp_cuda_tuning with_stream_build(fp_cuda_tuning t, const void *stream, int smem_min_n) {
  t.builds[FP_ROWS_STREAM] = stream;
  t.names[FP_ROWS_STREAM] = " (streaming build)";
  t.offer.has[FP_ROWS_STREAM] = stream != nullptr;
  t.offer.stream_smem_min_n = stream != nullptr ? smem_min_n : 0;
  return t;
}

/* The tuning entry of an ELEM kernel: its lean builds (NULL where it has
 * none), slots of fp_elem_build. */
inline fp_cuda_tuning elem_tuning(const void *flat32, const void *rowvec32,
                                  const void *rowvec32_training, const void *flatbias32,
                                  const void *flatbias32_training) {
  static_assert(FP_ELEM_BUILD_COUNT <= FP_CUDA_MAX_BUILDS, "fp_cuda_tuning.builds too small");
  fp_cuda_tuning t = {};
  t.builds[FP_ELEM_FLAT32] = flat32;
  t.builds[FP_ELEM_ROWVEC32] = rowvec32;
  t.builds[FP_ELEM_ROWVEC32_TRAINING] = rowvec32_training;
  t.builds[FP_ELEM_FLATBIAS32] = flatbias32;
  t.builds[FP_ELEM_FLATBIAS32_TRAINING] = flatbias32_training;
  t.names[FP_ELEM_FLAT32] = " (lean build, flat)";
  t.names[FP_ELEM_ROWVEC32] = " (lean build, rows)";
  t.names[FP_ELEM_ROWVEC32_TRAINING] = " (lean build, rows, training)";
  t.names[FP_ELEM_FLATBIAS32] = " (lean build, flat, row bias)";
  t.names[FP_ELEM_FLATBIAS32_TRAINING] = " (lean build, flat, row bias, training)";
  return t;
}

} // namespace fpcu

#endif /* __CUDACC__ || FPCU_EMULATION */

#endif
