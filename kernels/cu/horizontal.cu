/* fuseport CUDA kernels, family horizontal: two results from one read of the
 * input, ROWS geometry over contiguous row-major [M, N]. Semantics:
 * kernels/kernels.def; reference: kernels/cpu/horizontal.c.
 *
 * Both kernels stream each row once (head scalars, 16-byte vectors with two
 * loads in flight per thread, tail scalars; fpcu::row_stream), accumulate per
 * thread and finish with one block reduction per row. No row cache is needed:
 * nothing is read twice. 32 and 40 registers (2048 and 1536 resident threads
 * per SM) without spills; see reduce.cu for why __maxnreg__. The 32-byte
 * stack frame of hreduce_pointwise_fused is cosf's own: its Payne-Hanek
 * argument reduction, taken only for |x| > 105615, works on a local array.
 */
#include "cuda/cuda_kernels.h"

using namespace fpcu;

namespace {

/* sum and NaN-propagating max, reduced together (one pair of barriers). */
struct SumMax {
  float sum, max;
};

__device__ __forceinline__ SumMax shfl_xor(SumMax v, int mask) {
  v.sum = __shfl_xor_sync(kFullMask, v.sum, mask);
  v.max = __shfl_xor_sync(kFullMask, v.max, mask);
  return v;
}

struct CombineSumMax {
  __device__ __forceinline__ SumMax operator()(SumMax a, SumMax b) const {
    SumMax r;
    r.sum = a.sum + b.sum;
    r.max = fp_maximum(a.max, b.max);
    return r;
  }
};

__device__ __forceinline__ SumMax sum_max_empty() {
  SumMax e;
  e.sum = 0.0f;
  e.max = -CUDART_INF_F;
  return e;
}

__device__ __forceinline__ void sum_max_add(SumMax &st, float v) {
  st.sum += v;
  st.max = fp_maximum(st.max, v);
}

} // namespace

/* ---- kernels ----------------------------------------------------------------- */

/* hreduce_pointwise_fused(sum, cosx, a, M, N)                         ROWS
 * sum[i] = sum_j a[i,j]; cosx[i,j] = cos(a[i,j]). */
static __global__ void __maxnreg__(40) /* 32 would spill around cosf */
    hreduce_pointwise_fused(float *sum, float *cosx, const float *a, long long M, long long N) {
  __shared__ float scratch[33];
  for (long long row = blockIdx.x; row < M; row += gridDim.x) {
    const float *a_row = a + row * N;
    float *cos_row = cosx + row * N;
    const RowSplit s = row_split(a_row, N);
    const bool cos_vec = aligned16(cos_row + s.head);
    const float *a_body = a_row + s.head;
    float *cos_body = cos_row + s.head;
    float acc = 0.0f;
    row_stream<2>(
        s,
        [&](long long j) {
          const float v = __ldg(a_row + j);
          cos_row[j] = cosf(v);
          acc += v;
        },
        [&](long long v) { return ldg4(a_body + 4 * v); },
        [&](long long v, float4 x) {
          st4_any(cos_body + 4 * v, map4(x, [](float e) { return cosf(e); }), cos_vec);
          acc += (x.x + x.y) + (x.z + x.w);
        });
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0)
      sum[row] = acc;
  }
}

/* hreduce_reduce_fused(sum, amax, a, M, N)                            ROWS
 * sum[i] = sum_j a[i,j]; amax[i] = max_j a[i,j] (NaN propagates). */
static __global__ void __maxnreg__(32)
    hreduce_reduce_fused(float *sum, float *amax, const float *a, long long M, long long N) {
  __shared__ SumMax scratch[33];
  for (long long row = blockIdx.x; row < M; row += gridDim.x) {
    const float *a_row = a + row * N;
    const RowSplit s = row_split(a_row, N);
    const float *a_body = a_row + s.head;
    SumMax st = sum_max_empty();
    row_stream<2>(
        s, [&](long long j) { sum_max_add(st, __ldg(a_row + j)); },
        [&](long long v) { return ldg4(a_body + 4 * v); },
        [&](long long, float4 x) {
          st.sum += (x.x + x.y) + (x.z + x.w);
          st.max = fp_maximum(st.max, fp_maximum(fp_maximum(x.x, x.y), fp_maximum(x.z, x.w)));
        });
    st = block_allreduce(st, sum_max_empty(), CombineSumMax(), scratch);
    if (threadIdx.x == 0) {
      sum[row] = st.sum;
      amax[row] = st.max;
    }
  }
}

extern "C" void fp_cuda_register_horizontal(const void *table[FPK_COUNT]) {
  table[FPK_hreduce_pointwise_fused] = reinterpret_cast<const void *>(&hreduce_pointwise_fused);
  table[FPK_hreduce_reduce_fused] = reinterpret_cast<const void *>(&hreduce_reduce_fused);
}

extern "C" void fp_cuda_register_alternates_horizontal(fp_cuda_alternate table[FPK_COUNT]) {
  (void)table; /* one build per kernel */
}
