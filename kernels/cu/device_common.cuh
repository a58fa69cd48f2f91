/* fuseport CUDA kernels: the device helpers every kernels/cu/<family>.cu
 * shares -- launch-geometry indices, 128-bit accesses, block reductions, the
 * per-row split into 16-byte vectors, row teams and register caches. The
 * OpenCL kernels' twins are in kernels/cl/common.cl. It includes the
 * backend's interface (backend/cuda/cuda_kernels.h: the registration of the
 * kernels' host stubs and the planned families' launchers).
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
 * kLayerNormKeepFloats in kernels/cu/reduce.cu). */
__device__ __forceinline__ float4 ldg4_nc(const float *p) {
  return __ldg(reinterpret_cast<const float4 *>(p));
}

/* ldg4 that leaves L1 alone (L1::no_allocate; L2 evict_last as ldg4): for
 * an array read beside a row that a block streams twice, so that the
 * row's lines stay in L1 for the second pass (layernorm's w and b, see
 * layernorm_row_streamed in kernels/cu/reduce.cu). Same rules as ldg4. */
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

/* ---- rows: head scalars, 16-byte vectors, tail scalars ------------------- */

/* A row of n floats at `row` splits into `head` (0..3) scalars up to the
 * first 16-byte boundary, nvec float4 and `tail` (0..3) scalars. Any row of
 * any N is thereby read with 128-bit loads; another array indexed like the
 * row (same row offset) shares the split when its base has the same
 * alignment modulo 16, which the kernels test (a cudaMalloc base always
 * does) and otherwise access with 32-bit operations. */
struct RowSplit {
  long long nvec;
  int head, tail;
};

__device__ __forceinline__ RowSplit row_split(const float *row, long long n) {
  RowSplit s;
  long long head = (long long)(((16u - (reinterpret_cast<uintptr_t>(row) & 15u)) & 15u) >> 2);
  if (head > n)
    head = n;
  s.head = (int)head;
  s.nvec = (n - head) >> 2;
  s.tail = (int)(n - head - (s.nvec << 2));
  return s;
}

/* Column of a tail element. */
__device__ __forceinline__ long long tail_col(const RowSplit &s, int t) {
  return s.head + (s.nvec << 2) + t;
}

/* ---- teams: the threads that share a row ------------------------------------
 * A team of size() threads (this one being rank()) holds a part of one row
 * at a time: vectors [v0, v0 + nv) of the row's split, plus the head and
 * tail scalars where it holds them. It reduces over the whole row with allreduce()
 * (every thread of every team of the row gets the same value), and one
 * thread of the row, leader(), writes per-row results. Three kinds:
 *   BlockTeam    the block holds the whole row (ROWS convention);
 *   WarpTeam     each warp holds a whole row: short rows, several per block;
 *   ClusterTeam  the C blocks of a thread-block cluster (sm_90) each hold a
 *                contiguous C-th of the row and exchange their partial
 *                results through distributed shared memory: a long row is
 *                spread over several SMs and still read once.
 * Every thread of a team must call allreduce() the same number of times. */
struct RowPart {
  RowSplit s;
  long long v0, nv; /* whole-row teams: 0 and s.nvec */
};

struct BlockTeam {
  static constexpr bool kWholeRow = true;
  __device__ __forceinline__ int rank() const { return threadIdx.x; }
  __device__ __forceinline__ int size() const { return blockDim.x; }
  __device__ __forceinline__ bool leader() const { return threadIdx.x == 0; }
  __device__ __forceinline__ long long first_row() const { return blockIdx.x; }
  __device__ __forceinline__ long long row_step() const { return gridDim.x; }
  __device__ __forceinline__ RowPart part(const RowSplit &s) const {
    RowPart p = {s, 0, s.nvec};
    return p;
  }
  template <class T, class Combine>
  __device__ __forceinline__ T allreduce(T v, T identity, Combine combine) const {
    return block_allreduce(v, identity, combine);
  }
};

struct WarpTeam {
  static constexpr bool kWholeRow = true;
  __device__ __forceinline__ int rank() const { return threadIdx.x & 31; }
  __device__ __forceinline__ int size() const { return 32; }
  __device__ __forceinline__ bool leader() const { return (threadIdx.x & 31) == 0; }
  __device__ __forceinline__ long long first_row() const {
    return (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  }
  __device__ __forceinline__ long long row_step() const {
    return (long long)gridDim.x * (blockDim.x >> 5);
  }
  __device__ __forceinline__ RowPart part(const RowSplit &s) const {
    RowPart p = {s, 0, s.nvec};
    return p;
  }
  template <class T, class Combine>
  __device__ __forceinline__ T allreduce(T v, T, Combine combine) const {
    return warp_allreduce(v, combine);
  }
};

#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || defined(FPCU_EMULATION)
/* Thread-block clusters need sm_90; the cluster builds compile to a trap
 * elsewhere, and the planner only chooses them on sm_90 and later. */
#define FPCU_HAVE_CLUSTERS 1
struct ClusterTeam {
  static constexpr bool kWholeRow = false;
  unsigned rank_in_cluster, blocks; /* this block's rank; blocks per cluster */
  mutable int parity;               /* which exchange buffer is next */
  __device__ __forceinline__ int rank() const { return threadIdx.x; }
  __device__ __forceinline__ int size() const { return blockDim.x; }
  __device__ __forceinline__ bool leader() const {
    return rank_in_cluster == 0 && threadIdx.x == 0;
  }
  __device__ __forceinline__ long long first_row() const { return blockIdx.x / blocks; }
  __device__ __forceinline__ long long row_step() const { return gridDim.x / blocks; }
  /* Contiguous shares of ceil(nvec / blocks) vectors; the first block takes
   * the head scalars and the last the tail, the blocks whose shares they
   * border. */
  __device__ __forceinline__ RowPart part(const RowSplit &s) const {
    const long long share = (s.nvec + blocks - 1) / blocks;
    RowPart p;
    p.s = s;
    p.v0 = share * rank_in_cluster;
    p.nv = s.nvec - p.v0 < share ? s.nvec - p.v0 : share;
    if (p.nv < 0)
      p.nv = 0;
    return p;
  }
  __device__ __forceinline__ bool holds_head() const { return rank_in_cluster == 0; }
  __device__ __forceinline__ bool holds_tail() const { return rank_in_cluster == blocks - 1; }
  /* The block's value goes to one of two exchange buffers, alternately:
   * a block writes a buffer again two exchanges later, after the cluster
   * barrier of the exchange in between, which every block reaches only
   * once it has read this one. Thread 0 alone reads the C values from
   * distributed shared memory and combines them in rank order (so every
   * block gets the same bits), then broadcasts through `combined`: every
   * thread reading all C remote values (measured on an H100) made the
   * cluster builds slower than one block per row. `combined` is written
   * again in the next exchange only after its block_allreduce's barriers,
   * which every thread reaches after reading it here. Kernels end with
   * cluster_done(). */
  template <class T, class Combine>
  __device__ __forceinline__ T allreduce(T v, T identity, Combine combine) const {
    const T mine = block_allreduce(v, identity, combine);
    BlockScratch &scratch = block_scratch();
    T *buffer = reinterpret_cast<T *>(scratch.exchange[parity]);
    T *result = reinterpret_cast<T *>(scratch.combined);
    parity ^= 1;
    if (threadIdx.x == 0)
      *buffer = mine;
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    cluster.sync();
    if (threadIdx.x == 0) {
      T r = *cluster.map_shared_rank(buffer, 0);
      for (unsigned b = 1; b < blocks; ++b)
        r = combine(r, *cluster.map_shared_rank(buffer, b));
      *result = r;
    }
    __syncthreads();
    return *result;
  }
};
/* No block may exit while another can still read its shared memory. */
__device__ __forceinline__ void cluster_done() { cooperative_groups::this_cluster().sync(); }
#endif

/* Whether this team holds the row's head (tail) scalars: a whole-row team
 * always does; a cluster's first (last) block does. */
template <class Team> __device__ __forceinline__ bool holds_head(const Team &t) {
  if constexpr (Team::kWholeRow)
    return true;
  else
    return t.holds_head();
}
template <class Team> __device__ __forceinline__ bool holds_tail(const Team &t) {
  if constexpr (Team::kWholeRow)
    return true;
  else
    return t.holds_tail();
}

/* The head (tail) scalar this thread holds: element rank() of the row's
 * head (tail) when its team holds that end. */
template <class Team>
__device__ __forceinline__ bool has_head_elem(const Team &t, const RowPart &p) {
  return holds_head(t) && t.rank() < p.s.head;
}
template <class Team>
__device__ __forceinline__ bool has_tail_elem(const Team &t, const RowPart &p) {
  return holds_tail(t) && t.rank() < p.s.tail;
}

/* The part of a row one thread keeps in registers: the team's vectors
 * rank() + k*size() for k < K, plus a head and a tail element where it
 * holds them. Rows whose part has up to K*size() vectors are thereby read
 * from global memory exactly once. */
template <int K> struct RowCache {
  float4 v[K];
  float head, tail;
};

/* Index in the row's split of slot k of this thread, and whether the part
 * has it (K is unrolled, so the cache stays in registers). 32-bit: a cached
 * row has at most 8 * 8 * 1024 vectors (64-bit index math costs the
 * register pairs that made these kernels spill). */
template <class Team> __device__ __forceinline__ int slot_offset(const Team &t, int k) {
  return t.rank() + k * t.size();
}
template <class Team>
__device__ __forceinline__ bool slot_valid(const Team &t, const RowPart &p, int k) {
  if constexpr (Team::kWholeRow)
    return slot_offset(t, k) < p.s.nvec;
  else
    return slot_offset(t, k) < p.nv;
}
template <class Team>
__device__ __forceinline__ int slot_vector(const Team &t, const RowPart &p, int k) {
  if constexpr (Team::kWholeRow)
    return slot_offset(t, k);
  else
    return (int)p.v0 + slot_offset(t, k);
}

/* Loads this thread's part of a row split as p.s; vec: row + p.s.head is
 * 16-byte aligned (true for the row the split was computed from). All K
 * loads are issued before any is used. staged: the vectors come from a
 * RowStage that copied this row (wait() done), the head and tail from
 * global. */
template <int K, class Team>
__device__ __forceinline__ void cache_load(const Team &t, RowCache<K> &c, const float *row,
                                           const RowPart &p, bool vec,
                                           const float4 *staged = nullptr) {
  c.head = has_head_elem(t, p) ? __ldg(row + t.rank()) : 0.0f;
  const float *body = row + p.s.head;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (!slot_valid(t, p, k))
      c.v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    else if (staged != nullptr) /* a RowStage's slots: whole-row teams only */
      c.v[k] = staged[slot_offset(t, k)];
    else
      c.v[k] = ldg4_any(body + 4 * slot_vector(t, p, k), vec);
  }
  c.tail = has_tail_elem(t, p) ? __ldg(row + tail_col(p.s, t.rank())) : 0.0f;
}

/* f(float &) on every element this thread holds. */
template <int K, class Team, class F>
__device__ __forceinline__ void cache_for_each(const Team &t, RowCache<K> &c, const RowPart &p,
                                               F f) {
  if (has_head_elem(t, p))
    f(c.head);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (slot_valid(t, p, k)) {
      f(c.v[k].x);
      f(c.v[k].y);
      f(c.v[k].z);
      f(c.v[k].w);
    }
  }
  if (has_tail_elem(t, p))
    f(c.tail);
}

/* f(float &, float &) on the elements of two caches of the same part, in
 * lockstep. */
template <int K, class Team, class F>
__device__ __forceinline__ void cache_for_each2(const Team &t, RowCache<K> &a, RowCache<K> &b,
                                                const RowPart &p, F f) {
  if (has_head_elem(t, p))
    f(a.head, b.head);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (slot_valid(t, p, k)) {
      f(a.v[k].x, b.v[k].x);
      f(a.v[k].y, b.v[k].y);
      f(a.v[k].z, b.v[k].z);
      f(a.v[k].w, b.v[k].w);
    }
  }
  if (has_tail_elem(t, p))
    f(a.tail, b.tail);
}

/* Writes the cache to a row split like the one it was loaded from; vec:
 * out_row + p.s.head is 16-byte aligned. */
template <int K, class Team>
__device__ __forceinline__ void cache_store(const Team &t, const RowCache<K> &c, float *out_row,
                                            const RowPart &p, bool vec) {
  if (has_head_elem(t, p))
    out_row[t.rank()] = c.head;
  float *body = out_row + p.s.head;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (slot_valid(t, p, k))
      st4_any(body + 4 * slot_vector(t, p, k), c.v[k], vec);
  if (has_tail_elem(t, p))
    out_row[tail_col(p.s, t.rank())] = c.tail;
}

/* ---- staging the next row (long-row build) -----------------------------------
 * A block that caches whole rows works in phases: load the row, reduce it
 * (barriers, no memory traffic), write it. With one or two such blocks per
 * SM, memory idles during the reductions. A long-row build that stages
 * (double_softmax's; reduce.cu's kStage* say which) then runs as a
 * persistent grid (each block loops over many rows) and, while it reduces
 * row r, copies its slots of row r + row_step from global into dynamic
 * shared memory with cp.async (sm_80+, through L2 only): the load of the
 * next row overlaps the work on this one.
 *
 * Layout: staged row array a (0, or 1 for a kernel with two input rows,
 * as softmax_backward's row loop is written to stage), slot k
 * of thread t at stage[(a * kMaxK + k) * blockDim.x + t], the same slots as
 * RowCache (vector t + k * blockDim.x of the row's split). Each thread
 * copies and later reads only its own slots, so cp.async.wait_all is the
 * only synchronisation the data needs; a slot is overwritten by the next
 * copy only after the row's first team reduction, i.e. after its value has
 * been read into registers and used. The backend enables staging by
 * launching with dynamic shared memory for it (fp_cuda_stage_bytes), and
 * only for rows that every block caches (N <= 4 * kMaxK * blockDim.x). */
__device__ __forceinline__ unsigned dynamic_smem_bytes() {
#ifdef FPCU_EMULATION
  return (unsigned)fpemu::dynamic_shared_bytes();
#else
  unsigned r;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
#endif
}

__device__ __forceinline__ float4 *dynamic_smem_f4() {
#ifdef FPCU_EMULATION
  return static_cast<float4 *>(fpemu::dynamic_shared());
#else
  extern __shared__ float4 fpcu_dynamic_smem[];
  return fpcu_dynamic_smem;
#endif
}

/* 16 bytes global -> shared, asynchronously (gmem 16-byte aligned). */
__device__ __forceinline__ void cp_async16(float4 *smem, const float *gmem) {
#if defined(FPCU_EMULATION)
  fpemu::async_copy16(smem, gmem);
#elif __CUDA_ARCH__ >= 800
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#else
  *smem = ldg4(gmem);
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if !defined(FPCU_EMULATION) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cp_async_wait_all() {
#if !defined(FPCU_EMULATION) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

/* The staging area of a block-per-row build that caches up to kMaxK float4
 * per thread, for kRows row arrays (0: a kernel that never stages, the code
 * compiled out); off for other teams, when the launch gave too little
 * dynamic shared memory, or when a row might not fit the cache (the
 * backend's fp_cuda_stage_bytes keeps the same rule). Only a flag is kept:
 * the slots' address is the shared-memory symbol's, which costs no
 * register. */
template <int kMaxK, int kRows, class Team> struct RowStage {
  /* only the long-row build (a block, a cache of 4 or 8) can stage: the
   * code is compiled out of the others */
  static constexpr bool kCan = std::is_same<Team, BlockTeam>::value && kMaxK >= 4 && kRows > 0;
  bool enabled = false;

  __device__ __forceinline__ RowStage(const Team &, long long N) {
    if constexpr (kCan) {
      const long long need = (long long)kRows * kMaxK * 16 * blockDim.x;
      enabled = N <= 4LL * kMaxK * blockDim.x && (long long)dynamic_smem_bytes() >= need;
    }
  }
  __device__ __forceinline__ bool on() const { return kCan && enabled; }
  /* the slots of row array a, or nullptr (load from global) */
  __device__ __forceinline__ const float4 *slots(int a) const {
    return on() ? dynamic_smem_f4() + a * kMaxK * (int)blockDim.x : nullptr;
  }
  /* Starts copying this thread's slots of `row` (n floats, split by its own
   * alignment) into array a. */
  __device__ __forceinline__ void copy(int a, const float *row, long long n) const {
    if (!on())
      return;
    const RowSplit s = row_split(row, n);
    const float *body = row + s.head;
    float4 *dst = dynamic_smem_f4() + a * kMaxK * (int)blockDim.x + threadIdx.x;
#pragma unroll
    for (int k = 0; k < kMaxK; ++k) {
      const int v = (int)threadIdx.x + k * (int)blockDim.x;
      if (v < s.nvec)
        cp_async16(dst + k * blockDim.x, body + 4 * v);
    }
  }
  __device__ __forceinline__ void commit() const {
    if (on())
      cp_async_commit();
  }
  __device__ __forceinline__ void wait() const {
    if (on())
      cp_async_wait_all();
  }
};

/* ---- the streaming build's rows in shared memory -----------------------------
 * The streaming build holds no register cache, so every pass after a row's
 * first rereads it: from L1 while the row fits there (up to about 128 KiB,
 * N = 32768), beyond that from L2 at best. Launched with dynamic shared
 * memory (the backend gives it up to the whole row for rows longer than
 * that, fp_cuda_stream_smem_bytes in cuda_plan.h), its first pass also
 * keeps vectors 0 .. cap-1 of the row's split there and the later passes
 * read them from it: only the rest of a row longer than the shared memory
 * (on an H100, 227 KiB: beyond 58000 floats) is reread from global memory.
 *
 * Slot v holds vector v. A slot is written by the thread that streams
 * vector v in the first (forward) pass and read by whichever thread visits
 * v later (a backward pass visits the vectors in another order): the team
 * reduction between the first pass and the next (block_allreduce, barriers)
 * orders the two. The constructor's barrier keeps a row's first pass from
 * overwriting slots that a slower thread still reads for the block's
 * previous row. kOn false (every other build): no code, no barrier. */
template <bool kOn> struct SmemRow {
  long long cap = 0; /* vectors kept; the same in every thread */

  __device__ __forceinline__ explicit SmemRow(long long nvec) {
    if constexpr (kOn) {
      const long long have = (long long)(dynamic_smem_bytes() / 16u);
      cap = nvec < have ? nvec : have;
      if (cap > 0)
        __syncthreads();
    }
  }
  __device__ __forceinline__ void keep(long long v, float4 x) const {
    if constexpr (kOn) {
      if (v < cap)
        dynamic_smem_f4()[v] = x;
    }
  }
  /* vector v, from shared memory if kept, else global(v) */
  template <class Global> __device__ __forceinline__ float4 load(long long v, Global global) const {
    if constexpr (kOn) {
      if (v < cap)
        return dynamic_smem_f4()[v];
    }
    return global(v);
  }
  /* the same for a row whose vectors load with ldg4 from body */
  __device__ __forceinline__ float4 load(long long v, const float *body) const {
    return load(v, [=](long long u) { return ldg4(body + 4 * u); });
  }
};

/* Streams a row through the block with U vector loads in flight per thread:
 * scalar(col) for the head and tail elements, load_vec(v)/use_vec(v, item)
 * for vector v (columns s.head + 4v .. +3). kBackward visits the vectors
 * from the end of the row (still coalesced: a warp reads 32 consecutive
 * vectors, in descending order): a pass that rereads a row it has just
 * streamed then starts with the part most likely still in L2. Block teams
 * only (rows longer than any cache). */
template <int U, bool kBackward = false, class Scalar, class LoadV, class UseV>
__device__ __forceinline__ void row_stream(const RowSplit &s, Scalar scalar, LoadV load_vec,
                                           UseV use_vec) {
  const int t = threadIdx.x;
  if (t < s.head)
    scalar((long long)t);
  if constexpr (kBackward) {
    const long long last = s.nvec - 1;
    strided_unrolled<U>(
        t, s.nvec, blockDim.x, [&](long long i) { return load_vec(last - i); },
        [&](long long i, const auto &item) { use_vec(last - i, item); });
  } else {
    strided_unrolled<U>(t, s.nvec, blockDim.x, load_vec, use_vec);
  }
  if (t < s.tail)
    scalar(tail_col(s, t));
}

/* Streams a team's part of a row with U vector loads in flight per thread:
 * scalar(col) for the head and tail elements the thread holds,
 * load_vec(v)/use_vec(v, item) for its vectors v (columns s.head + 4v ..
 * +3, v an index in the row's split), in increasing order. */
template <int U, class Team, class Scalar, class LoadV, class UseV>
__device__ __forceinline__ void part_stream(const Team &t, const RowPart &p, Scalar scalar,
                                            LoadV load_vec, UseV use_vec) {
  if (has_head_elem(t, p))
    scalar((long long)t.rank());
  strided_unrolled<U>(p.v0 + t.rank(), p.v0 + p.nv, t.size(), load_vec, use_vec);
  if (has_tail_elem(t, p))
    scalar(tail_col(p.s, t.rank()));
}

/* Calls body(std::integral_constant<int, K>()) with the smallest K in
 * {1, 2, 4, 8} (K <= kMaxK) whose cache holds nv vectors per thread of a
 * team of `size`; false when none does (the caller streams the row
 * instead). The branch is uniform over the team. */
template <int kMaxK, class Body>
__device__ __forceinline__ bool dispatch_cached(long long nv, int size, Body &&body) {
  const long long L = size;
  if (nv <= L) {
    body(std::integral_constant<int, 1>());
    return true;
  }
  if constexpr (kMaxK >= 2) {
    if (nv <= 2 * L) {
      body(std::integral_constant<int, 2>());
      return true;
    }
  }
  if constexpr (kMaxK >= 4) {
    if (nv <= 4 * L) {
      body(std::integral_constant<int, 4>());
      return true;
    }
  }
  if constexpr (kMaxK >= 8) {
    if (nv <= 8 * L) {
      body(std::integral_constant<int, 8>());
      return true;
    }
  }
  return false;
}

/* ---- ELEM over a logical [M, N] index space -------------------------------- */

/* r.x = f(a0, e), r.y = f(a1, e + 1), ...: component c of every input, with
 * the logical index of that element. */
template <int NIN, class F>
__device__ __forceinline__ float4 apply4(const float4 (&x)[NIN], long long e, F &f) {
  float a[NIN];
  float4 r;
#pragma unroll
  for (int k = 0; k < NIN; ++k)
    a[k] = x[k].x;
  r.x = f(a, e);
#pragma unroll
  for (int k = 0; k < NIN; ++k)
    a[k] = x[k].y;
  r.y = f(a, e + 1);
#pragma unroll
  for (int k = 0; k < NIN; ++k)
    a[k] = x[k].z;
  r.z = f(a, e + 2);
#pragma unroll
  for (int k = 0; k < NIN; ++k)
    a[k] = x[k].w;
  r.w = f(a, e + 3);
  return r;
}

/* out[i*so0 + j*so1] = f({in[0](i,j), ..., in[NIN-1](i,j)}, i*N + j) for
 * every (i, j) of [M, N], ELEM geometry, U items in flight per thread.
 * f: float(const float (&)[NIN], long long logical_index). Three schedules,
 * chosen uniformly from the arguments:
 *   flat     every operand is row-major contiguous: 1-D over M*N, float4
 *            when all bases are 16-byte aligned (any N), scalar tail;
 *   row-vec  N % 4 == 0, out row-contiguous with 16-byte aligned rows, each
 *            input row-contiguous likewise or broadcast along the row:
 *            float4 items that never straddle a row;
 *   scalar   anything else (any strides, broadcasts, transposes).
 * Inputs are read with ld.global.nc: an input may alias out only element for
 * element (in place), never shifted. */
template <int U, int NIN, class F>
__device__ __forceinline__ void elem_map_2d(float *out, long long so0, long long so1,
                                            const View2D (&in)[NIN], long long M, long long N,
                                            F f) {
  if (M <= 0 || N <= 0)
    return;
  const long long n = M * N;
  const long long first = grid_thread_index(), step = grid_thread_count();
  bool flat = (M == 1 || so0 == N) && (N == 1 || so1 == 1);
  bool flat_vec = aligned16(out);
  bool row_vec = N % 4 == 0 && so1 == 1 && so0 % 4 == 0 && aligned16(out);
#pragma unroll
  for (int k = 0; k < NIN; ++k) {
    flat = flat && in[k].flat(M, N);
    flat_vec = flat_vec && aligned16(in[k].p);
    row_vec = row_vec && in[k].row_vec();
  }

  if (flat) {
    struct VecItem {
      float4 x[NIN];
    };
    struct ScalarItem {
      float x[NIN];
    };
    elem_flat<U>(
        n, flat_vec,
        [&](long long v) {
          VecItem it;
#pragma unroll
          for (int k = 0; k < NIN; ++k)
            it.x[k] = ldg4(in[k].p + 4 * v);
          return it;
        },
        [&](long long v, const VecItem &it) { st4(out + 4 * v, apply4(it.x, 4 * v, f)); },
        [&](long long e) {
          ScalarItem it;
#pragma unroll
          for (int k = 0; k < NIN; ++k)
            it.x[k] = __ldg(in[k].p + e);
          return it;
        },
        [&](long long e, const ScalarItem &it) { out[e] = f(it.x, e); });
    return;
  }

  if (row_vec) {
    /* vector v holds elements 4v..4v+3 = (i, j..j+3) of one row */
    RowColCursor cur(4 * first, 4 * step, N);
    struct RowItem {
      float4 x[NIN];
      long long i, j;
    };
    strided_unrolled<U>(
        first, n >> 2, step,
        [&](long long) {
          RowItem it;
          it.i = cur.i;
          it.j = cur.j;
#pragma unroll
          for (int k = 0; k < NIN; ++k)
            it.x[k] = in[k].load4(cur.i, cur.j);
          cur.advance();
          return it;
        },
        [&](long long v, const RowItem &it) {
          st4(out + it.i * so0 + it.j, apply4(it.x, 4 * v, f));
        });
    return;
  }

  RowColCursor cur(first, step, N);
  struct StridedItem {
    float x[NIN];
    long long out_offset;
  };
  strided_unrolled<U>(
      first, n, step,
      [&](long long) {
        StridedItem it;
#pragma unroll
        for (int k = 0; k < NIN; ++k)
          it.x[k] = __ldg(in[k].at(cur.i, cur.j));
        it.out_offset = cur.i * so0 + cur.j * so1;
        cur.advance();
        return it;
      },
      [&](long long e, const StridedItem &it) { out[it.out_offset] = f(it.x, e); });
}

/* Dropout of one element: kept with probability 1-p and scaled, else 0;
 * `index` is the logical row-major index i*N+j (the Philox counter). */
__device__ __forceinline__ float dropout_apply(float v, long long seed, long long index, float p,
                                               float scale) {
  return fp_dropout_keep((fp_u64)seed, (fp_u64)index, p) ? v * scale : 0.0f;
}

/* ---- lean ELEM builds ------------------------------------------------------
 * elem_map_2d settles its schedule in every thread, in 64-bit indices, and
 * so carries all three: 45-69 KB of code for each fused elementwise kernel,
 * and many instructions per thread before its first load (ncu, H100,
 * 2026-11-24: bias_dropout_add at 1024 x 1024 issued 223 instructions per
 * warp for one float4 per thread; Inductor's kernel, 118 for two). A lean
 * build is the same function for one schedule in 32-bit offsets; the host
 * launches it only where the arguments meet its precondition
 * (fp_cuda_plan_elem_builds, cuda_plan.h), elem_map_2d elsewhere:
 *   flat32    every operand row-major contiguous and 16-byte aligned,
 *             n % 4 == 0: float4 items over the flat index;
 *   rowvec32  N % 4 == 0, every operand row-contiguous (s1 == 1) with a
 *             row stride s0 >= 0, s0 % 4 == 0 (0: a row broadcast) and a
 *             16-byte aligned base: float4 items that never straddle a row;
 *   flatbias32  N % 4 != 0, in[1] a row-broadcast bias [N], every other
 *             operand flat and 16-byte aligned: float4 items over the flat
 *             index, the bias read per element at column flat % N, a
 *             scalar tail. Without it these rows took elem_map_2d, at
 *             0.74-0.85x of static-shape torch.compile (H100, 2026-11-28:
 *             bias_gelu 7094 x 21631 508.6 us against 426.4, 0.83 of copy
 *             bandwidth; bias_dropout_add 7094 x 21631 746 against 602).
 * All: every element offset and 4 * (grid * block) below 2^31.
 *
 * Their memory accesses are Inductor's: a block's U float4 per thread
 * cover one contiguous span of each operand (chunked_unrolled), the loads
 * are ldg4's (evict_last), the stores plain. Against the first lean builds
 * (grid-stride items, ld.global.nc, st.wb), on an H100 after the bench's
 * write flush, three alternating rounds (2026-11-24,
 * 120e041:docs/results/2026-11-24-h100-evict-last/): bias_dropout_add 1024 x 1024
 * 9.82 -> 7.39 us, 256 x 4096 9.82 -> 7.33, bias_gelu 512 x 4096 11.36 ->
 * 8.29, 4096 x 4096 50.9 -> 49.7; the loads' hint made most of it. */

__device__ __forceinline__ void st4_plain(float *p, float4 v) {
  *reinterpret_cast<float4 *>(p) = v;
}

/* Visits the vectors v < nvec by chunks of U * blockDim.x: block b takes
 * chunks b, b + gridDim.x, ..., thread t of a chunk starting at c the
 * vectors c + u * blockDim.x + t (u < U), all U loads issued before the
 * first use. */
template <int U, class Load, class Use>
__device__ __forceinline__ void chunked_unrolled(unsigned nvec, Load load, Use use) {
  const unsigned B = blockDim.x, span = U * B;
  for (unsigned c = blockIdx.x * span; c < nvec; c += gridDim.x * span) {
    if constexpr (U == 1) {
      if (c + threadIdx.x < nvec)
        use(c + threadIdx.x, load(c + threadIdx.x));
    } else {
      decltype(load(0u)) items[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (c + u * B + threadIdx.x < nvec)
          items[u] = load(c + u * B + threadIdx.x);
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (c + u * B + threadIdx.x < nvec)
          use(c + u * B + threadIdx.x, items[u]);
    }
  }
}

/* chunked_unrolled with U float4 per thread where that still leaves
 * FP_ELEM_MIN_CHUNKS chunks (about one per SM; cuda_plan.h, whose
 * fp_cuda_plan_elem_lean_grid launches no more blocks than there are
 * chunks), else one: a small cell in chunks of
 * U * blockDim.x runs on few SMs and serializes its arithmetic there
 * (pointwise_chain 128 x 128 in 4 chunks of 4 x 256 float4: 5.4-5.8 us on
 * an H100, against 4.9-5.2 with one float4 per thread). */
template <int U, class Load, class Use>
__device__ __forceinline__ void elem_chunks(unsigned nvec, Load load, Use use) {
  if (U > 1 && nvec < FP_ELEM_MIN_CHUNKS * U * blockDim.x)
    chunked_unrolled<1>(nvec, load, use);
  else
    chunked_unrolled<U>(nvec, load, use);
}

template <int U, int NIN, class F>
__device__ __forceinline__ void elem_flat32(float *out, const float *const (&in)[NIN], unsigned n,
                                            F f) {
  struct Item {
    float4 x[NIN];
  };
  elem_chunks<U>(
      n >> 2,
      [&](unsigned v) {
        Item it;
#pragma unroll
        for (int k = 0; k < NIN; ++k)
          it.x[k] = ldg4(in[k] + 4 * v);
        return it;
      },
      [&](unsigned v, const Item &it) {
        st4_plain(out + 4 * v, apply4(it.x, 4 * (long long)v, f));
      });
}

template <int U, int NIN, class F>
__device__ __forceinline__ void
elem_rowvec32(float *out, unsigned so0, const float *const (&in)[NIN], const unsigned (&s0)[NIN],
              unsigned M, unsigned N, F f) {
  struct Item {
    float4 x[NIN];
    unsigned out_offset;
  };
  elem_chunks<U>((M * N) >> 2,
                 [&](unsigned v) { /* vector v: elements 4v..4v+3 = (i, j..j+3) */
                                   const unsigned i = 4 * v / N, j = 4 * v - i * N;
                                   Item it;
#pragma unroll
                                   for (int k = 0; k < NIN; ++k)
                                     it.x[k] = ldg4(in[k] + (i * s0[k] + j));
                                   it.out_offset = i * so0 + j;
                                   return it;
                 },
                 [&](unsigned v, const Item &it) {
                   st4_plain(out + it.out_offset, apply4(it.x, 4 * (long long)v, f));
                 });
}

/* out = f({in[0], bias, in[2], ...}) over n = M * N flat elements, in[1]
 * being the bias [N] broadcast along rows: one 32-bit modulo per float4
 * item, its 4 columns by wrap-around increments (N may be below 4); the
 * bias is small and stays in L1/L2, so its scalar loads cost little. The
 * n % 4 last elements go to the first threads of block 0. */
template <int U, int NIN, class F>
__device__ __forceinline__ void elem_flatbias32(float *out, const float *const (&in)[NIN],
                                                unsigned N, unsigned n, F f) {
  static_assert(NIN >= 2, "in[1] is the bias");
  struct Item {
    float4 x[NIN];
  };
  elem_chunks<U>(
      n >> 2,
      [&](unsigned v) {
        Item it;
#pragma unroll
        for (int k = 0; k < NIN; ++k)
          if (k != 1)
            it.x[k] = ldg4(in[k] + 4 * v);
        float b[4];
        unsigned j = 4 * v % N;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          b[c] = __ldg(in[1] + j);
          j = j + 1 == N ? 0u : j + 1;
        }
        it.x[1] = make_float4(b[0], b[1], b[2], b[3]);
        return it;
      },
      [&](unsigned v, const Item &it) {
        st4_plain(out + 4 * v, apply4(it.x, 4 * (long long)v, f));
      });
  const unsigned e = (n & ~3u) + threadIdx.x;
  if (blockIdx.x == 0 && e < n) {
    float a[NIN];
#pragma unroll
    for (int k = 0; k < NIN; ++k)
      a[k] = __ldg(in[k] + (k == 1 ? e % N : e));
    out[e] = f(a, (long long)e);
  }
}

/* ---- the builds of a row kernel ------------------------------------------------
 * FPCU_ROWS_<TEAM>(call) declares `team` and runs call, a row loop over it;
 * the cluster form ends with cluster_done() and traps where clusters do
 * not exist (the planner never launches it there). */
/* variadic: a call's template arguments may hold commas */
#define FPCU_ROWS_BLOCK(...)                                                                       \
  const fpcu::BlockTeam team{};                                                                    \
  __VA_ARGS__
#define FPCU_ROWS_WARP(call)                                                                       \
  const fpcu::WarpTeam team{};                                                                     \
  call
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
