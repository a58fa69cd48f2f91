/* fuseport GEMM core, dw_packed on CUDA cores (the SIMT path): the weight
 * gradient dW[COUT, CIN] = dy^T @ x' with x' dequantised from packed words
 * as the B tile is loaded (kernels.def, dw_packed_<dt>). Any architecture,
 * any shape and alignment: the path a device without the Hopper loop
 * (gemm_dw_sm90.cu) takes, and the one FUSEPORT_CUDA_GEMM_PATH=simt forces.
 *
 * A block computes a 64 x 64 tile over its slice of K (split-K: the plan's
 * split_k slices, gemm_common.cuh's workspace), 16 k at a time: the dy^T
 * and x' tiles go through shared memory as float, each of the 256 threads
 * accumulates 4 x 4 outputs in float, k in order.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda/gemm_plan.h"
#include "gemm_common.cuh"

namespace fpgemm {

cudaError_t simt_dw_run(const ProblemDw &p, const fp_dw_plan &plan, cudaStream_t stream);
int simt_dw_stubs(const void **out, int cap);

namespace {

constexpr int kTile = 64, kBK = 16, kThreads = 256;

/* x'(k, n): code n % 256 of group n / 256 of row k, dequantised. */
__device__ __forceinline__ float dequant_at(const ProblemDw &p, long long G, long long k,
                                            long long n) {
  const int vpw = 32 / p.bits;
  const long long g = n / FP_QGROUP;
  const int v = static_cast<int>(n % FP_QGROUP);
  const uint32_t w = p.words[(k * G + g) * 8 * p.bits + v / vpw];
  const uint32_t q = (w >> ((v % vpw) * p.bits)) & ((1u << p.bits) - 1u);
  const __nv_bfloat16 *scale = static_cast<const __nv_bfloat16 *>(p.scale);
  const __nv_bfloat16 *mins = static_cast<const __nv_bfloat16 *>(p.mins);
  return fp_dequant_value(q, __bfloat162float(scale[k * G + g]), __bfloat162float(mins[k * G + g]));
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    dw_simt_kernel(const ProblemDw p, int split_k, long long tiles, long long ntn) {
  /* +4: the inner loop reads a row of 4 consecutive columns per thread;
   * the pad staggers the rows' banks for the transposed writes */
  __shared__ float as[kBK][kTile + 4];
  __shared__ float bs[kBK][kTile + 4];
  __shared__ int flag;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const long long unit = blockIdx.x;
  const long long tile = unit / split_k;
  const int split = static_cast<int>(unit % split_k);
  const long long m0 = (tile / ntn) * kTile, n0 = (tile % ntn) * kTile;
  const long long kblocks = (p.K + kBK - 1) / kBK;
  const long long kb0 = split * kblocks / split_k, kb1 = (split + 1) * kblocks / split_k;
  const long long G = (p.CIN + FP_QGROUP - 1) / FP_QGROUP;
  const __nv_bfloat16 *dy = static_cast<const __nv_bfloat16 *>(p.dy);
  float acc[4][4] = {};
  for (long long kb = kb0; kb < kb1; ++kb) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = tid + kThreads * i, kk = e / kTile, c = e % kTile;
      const long long k = kb * kBK + kk;
      const bool krow = k < p.K;
      as[kk][c] = krow && m0 + c < p.COUT ? __bfloat162float(dy[k * p.lddy + m0 + c]) : 0.0f;
      bs[kk][c] = krow && n0 + c < p.CIN ? dequant_at(p, G, k, n0 + c) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        a[r] = as[kk][ty * 4 + r];
        b[r] = bs[kk][tx * 4 + r];
      }
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
    }
    __syncthreads();
  }
  T *out = static_cast<T *>(p.out);
  if (split_k == 1) {
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const long long m = m0 + ty * 4 + r, n = n0 + tx * 4 + c;
        if (m < p.COUT && n < p.CIN)
          out[m * p.CIN + n] = Storage<T>::from_float(acc[r][c]);
      }
    return;
  }
  float *mine = split_slice(p.ws, tiles, tile, split, kTile, kTile);
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      mine[(ty * 4 + r) * kTile + tx * 4 + c] = acc[r][c];
  if (!split_arrive_last(p.ws, tiles, tile, split_k, tid, &flag, [] { __syncthreads(); }))
    return;
  for (int e = tid; e < kTile * kTile; e += kThreads) {
    const long long m = m0 + e / kTile, n = n0 + e % kTile;
    float v = 0.0f;
    for (int s = 0; s < split_k; ++s)
      v += __ldcg(split_slice(p.ws, tiles, tile, s, kTile, kTile) + e); /* other SMs wrote it */
    if (m < p.COUT && n < p.CIN)
      out[m * p.CIN + n] = Storage<T>::from_float(v);
  }
}

} // namespace

cudaError_t simt_dw_run(const ProblemDw &p, const fp_dw_plan &plan, cudaStream_t stream) {
  if (plan.bm != kTile || plan.bn != kTile || plan.bk != kBK || plan.threads != kThreads)
    return cudaErrorInvalidValue;
  const long long ntn = (p.CIN + kTile - 1) / kTile;
  const long long tiles = ((p.COUT + kTile - 1) / kTile) * ntn;
  const long long units = tiles * plan.split_k;
  if (units > 0x7FFFFFFFll)
    return cudaErrorInvalidValue;
  if (plan.split_k > 1 &&
      (p.ws == nullptr || p.ws_bytes < split_workspace_bytes(tiles, plan.split_k, kTile, kTile)))
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(units));
  if (p.dtype == Storage<__nv_bfloat16>::kDtype)
    dw_simt_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(p, plan.split_k, tiles, ntn);
  else
    dw_simt_kernel<float><<<grid, kThreads, 0, stream>>>(p, plan.split_k, tiles, ntn);
  return cudaGetLastError();
}

int simt_dw_stubs(const void **out, int cap) {
  const void *mine[] = {reinterpret_cast<const void *>(&dw_simt_kernel<float>),
                        reinterpret_cast<const void *>(&dw_simt_kernel<__nv_bfloat16>)};
  return copy_stubs(mine, out, cap);
}

} // namespace fpgemm
