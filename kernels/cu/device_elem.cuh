/* fuseport CUDA kernels: the ELEM helpers of device_common.cuh -- elementwise
 * maps over a logical [M, N] index space with strided operands (elem_map_2d,
 * its three schedules), dropout_apply, and the lean ELEM builds (elem_flat32,
 * elem_rowvec32, elem_flatbias32, over chunked_unrolled / elem_chunks).
 * elementwise.cu uses them all, prim.cu elem_map_2d and dropout_apply. The
 * geometry they build on (grid_thread_index, strided_unrolled, elem_flat,
 * RowColCursor, View2D) and the lean builds' registration (elem_tuning) stay
 * in device_common.cuh.
 *
 * A part of device_common.cuh, not a header of its own: device_common.cuh
 * includes it once, inside namespace fpcu and its nvcc / FPCU_EMULATION
 * section, after device_rows.cuh. Kernels include device_common.cuh.
 */
#ifndef FUSEPORT_CUDA_DEVICE_ELEM_CUH
#define FUSEPORT_CUDA_DEVICE_ELEM_CUH

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

#endif
