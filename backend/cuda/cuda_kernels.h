/* fuseport CUDA backend: the interface between the backend (C11,
 * backend/cuda/cuda_backend.c) and the kernels (CUDA C++17,
 * kernels/cu/<family>.cu).
 *
 * Each family registers the host stubs of its __global__ functions under the
 * kernel ids of kernels.def; the backend launches them with cudaLaunchKernel,
 * passing one pointer per non-'L' argument, so every kernel's parameter list
 * must match its signature exactly: b -> float * (const float * for inputs),
 * i -> int, u -> unsigned, l -> long long, f -> float.
 *
 * The second half of this header (compiled by nvcc only) holds the device
 * helpers the four .cu files share: launch-geometry indices, 128-bit
 * accesses, block reductions and the per-row split into 16-byte vectors.
 */
#ifndef FUSEPORT_CUDA_KERNELS_H
#define FUSEPORT_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fp_cuda_register_<family>(table): table[FPK_name] = the kernel's host stub
 * for every kernel of the family this build implements. */
#define FP_KERNEL_FAMILY(family) void fp_cuda_register_##family(const void *table[FPK_COUNT]);
#include "kernels.def"
#undef FP_KERNEL_FAMILY

/* A second build of a kernel, tuned for part of its argument range and
 * launched instead of the registered one when wanted(args, nd) says so (the
 * arguments as the backend resolved them; nd already checked against the
 * kernel's geometry convention). Both compute the same function. The reduce
 * kernels have one for rows longer than 8 floats per thread: a deeper row
 * cache in registers, which costs occupancy the short rows need. */
typedef struct fp_cuda_alternate {
  const void *kernel; /* NULL: none */
  bool (*wanted)(const fp_karg *args, const fp_ndrange *nd);
} fp_cuda_alternate;

#define FP_KERNEL_FAMILY(family)                                                                   \
  void fp_cuda_register_alternates_##family(fp_cuda_alternate table[FPK_COUNT]);
#include "kernels.def"
#undef FP_KERNEL_FAMILY

/* Enqueues on `stream` the repetition of a 2, 4, 8 or 16-byte pattern over
 * `bytes` bytes at dst (dst and bytes multiples of pattern_size). Returns the
 * launch status (cudaErrorInvalidValue for another pattern size). */
cudaError_t fp_cuda_fill_pattern(void *dst, uint64_t bytes, const void *pattern,
                                 size_t pattern_size, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

/* ==== device helpers shared by kernels/cu/<family>.cu (nvcc only) ======== */
#if defined(__CUDACC__)

#include <math_constants.h>

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

/* Visits indices begin, begin+step, ... < end: U loads are issued before the
 * first use so that U memory requests per thread are in flight. load(i) is
 * called in increasing order of i (loaders may keep a running cursor). */
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
  for (; i < end; i += step)
    use(i, load(i));
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
    i = start / cols;
    j = start - i * cols;
    di = step / cols;
    dj = step - di * cols;
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

/* p must be 16-byte aligned; the data must not be written by the kernel
 * before it is read (ld.global.nc). */
__device__ __forceinline__ float4 ldg4(const float *p) {
  return __ldg(reinterpret_cast<const float4 *>(p));
}
/* __stwb is the default store (st.global.wb) as an intrinsic the optimizer
 * keeps: in st4_any a plain float4 store and the four scalar stores of the
 * other branch are equivalent, and the compiler would merge both branches
 * into the scalar form. */
__device__ __forceinline__ void st4(float *p, float4 v) {
  __stwb(reinterpret_cast<float4 *>(p), v);
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

__device__ __forceinline__ float shfl_xor(float v, int lane_mask) {
  return __shfl_xor_sync(kFullMask, v, lane_mask);
}

/* Reduction of v over the whole block, returned to every thread.
 * blockDim.x must be a multiple of 32 (ROWS: a power of two in [32, 1024],
 * checked by the backend). scratch: 33 entries of shared memory, private to
 * this call site or reused only by calls that every thread reaches in the
 * same order: each call writes slots 0..31 before its first barrier and
 * slot 32 only between its two barriers, after every thread has read the
 * slot 32 of the previous call, so back-to-back calls need no extra barrier.
 * Every thread gets the value that warp 0's lane 0 computed, so a combine
 * whose rounding depends on the operand order still yields one value. */
template <class T, class Combine>
__device__ __forceinline__ T block_allreduce(T v, T identity, Combine combine, T *scratch) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1)
    v = combine(v, shfl_xor(v, mask));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? scratch[lane] : identity;
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1)
      w = combine(w, shfl_xor(w, mask));
    if (lane == 0)
      scratch[32] = w;
  }
  __syncthreads();
  return scratch[32];
}

__device__ __forceinline__ float block_sum(float v, float *scratch) {
  return block_allreduce(v, 0.0f, SumOp(), scratch);
}
__device__ __forceinline__ float block_max(float v, float *scratch) {
  return block_allreduce(v, -CUDART_INF_F, MaxOp(), scratch);
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

/* The part of a row one thread keeps in registers: vectors threadIdx.x +
 * k*blockDim.x for k < K, plus head element threadIdx.x and tail element
 * threadIdx.x where those exist. Rows of up to K*blockDim.x vectors are
 * thereby read from global memory exactly once. */
template <int K> struct RowCache {
  float4 v[K];
  float head, tail;
};

/* Vector index of slot k of this thread, and whether the row has it (K is
 * unrolled, so the cache stays in registers). 32-bit: a cached row has at
 * most 8 * 1024 vectors. */
__device__ __forceinline__ int slot_vector(int k) { return (int)(threadIdx.x + k * blockDim.x); }
__device__ __forceinline__ bool slot_valid(const RowSplit &s, int k) {
  return slot_vector(k) < s.nvec;
}

/* Loads this thread's part of a row split as s; vec: row + s.head is 16-byte
 * aligned (true for the row s was computed from). All K loads are issued
 * before any is used. */
template <int K>
__device__ __forceinline__ void cache_load(RowCache<K> &c, const float *row, const RowSplit &s,
                                           bool vec) {
  const int t = threadIdx.x;
  c.head = t < s.head ? __ldg(row + t) : 0.0f;
  const float *body = row + s.head;
#pragma unroll
  for (int k = 0; k < K; ++k)
    c.v[k] = slot_valid(s, k) ? ldg4_any(body + 4 * slot_vector(k), vec)
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  c.tail = t < s.tail ? __ldg(row + tail_col(s, t)) : 0.0f;
}

/* f(float &) on every element this thread holds. */
template <int K, class F>
__device__ __forceinline__ void cache_for_each(RowCache<K> &c, const RowSplit &s, F f) {
  const int t = threadIdx.x;
  if (t < s.head)
    f(c.head);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (slot_valid(s, k)) {
      f(c.v[k].x);
      f(c.v[k].y);
      f(c.v[k].z);
      f(c.v[k].w);
    }
  }
  if (t < s.tail)
    f(c.tail);
}

/* f(float &, float &) on the elements of two caches of the same row split,
 * in lockstep. */
template <int K, class F>
__device__ __forceinline__ void cache_for_each2(RowCache<K> &a, RowCache<K> &b, const RowSplit &s,
                                                F f) {
  const int t = threadIdx.x;
  if (t < s.head)
    f(a.head, b.head);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (slot_valid(s, k)) {
      f(a.v[k].x, b.v[k].x);
      f(a.v[k].y, b.v[k].y);
      f(a.v[k].z, b.v[k].z);
      f(a.v[k].w, b.v[k].w);
    }
  }
  if (t < s.tail)
    f(a.tail, b.tail);
}

/* Writes the cache to a row split like the one it was loaded from; vec:
 * out_row + s.head is 16-byte aligned. */
template <int K>
__device__ __forceinline__ void cache_store(const RowCache<K> &c, float *out_row, const RowSplit &s,
                                            bool vec) {
  const int t = threadIdx.x;
  if (t < s.head)
    out_row[t] = c.head;
  float *body = out_row + s.head;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (slot_valid(s, k))
      st4_any(body + 4 * slot_vector(k), c.v[k], vec);
  if (t < s.tail)
    out_row[tail_col(s, t)] = c.tail;
}

/* Streams a row through the block with U vector loads in flight per thread:
 * scalar(col) for the head and tail elements, load_vec(v)/use_vec(v, item)
 * for vector v (columns s.head + 4v .. +3). kBackward visits the vectors
 * from the end of the row (still coalesced: a warp reads 32 consecutive
 * vectors, in descending order): a pass that rereads a row it has just
 * streamed then starts with the part most likely still in L2. */
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

/* Calls body(std::integral_constant<int, K>()) with the smallest K in
 * {1, 2, 4, 8} (K <= kMaxK) whose cache holds nvec vectors per thread;
 * false when none does (the caller streams the row instead). The branch is
 * uniform over the block: it depends on nvec and blockDim.x only. */
template <int kMaxK, class Body>
__device__ __forceinline__ bool dispatch_cached(long long nvec, Body &&body) {
  const long long L = blockDim.x;
  if (nvec <= L) {
    body(std::integral_constant<int, 1>());
    return true;
  }
  if constexpr (kMaxK >= 2) {
    if (nvec <= 2 * L) {
      body(std::integral_constant<int, 2>());
      return true;
    }
  }
  if constexpr (kMaxK >= 4) {
    if (nvec <= 4 * L) {
      body(std::integral_constant<int, 4>());
      return true;
    }
  }
  if constexpr (kMaxK >= 8) {
    if (nvec <= 8 * L) {
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

} // namespace fpcu

#endif /* __CUDACC__ */

#endif
