/* fuseport CUDA kernels, family attention: out = softmax(q k^T * scale +
 * mask) v. Semantics: kernels/kernels.def, family attention; reference:
 * kernels/cpu/attention.c.
 *
 * attention_<dt> is PLANNED: the backend hands its arguments to
 * fp_cuda_attention_launch (below), which validates them, picks a path and
 * launches one kernel:
 *   SM80  attention_sm80.cu: FlashAttention-2 on tensor cores (cp.async,
 *         ldmatrix, mma.sync), f16/bf16, any D <= FP_ATTN_MAX_D, compute
 *         capability >= 8.0;
 *   SIMT  this file: the same online softmax on CUDA cores in float32
 *         (f32 with true float FMA, no TF32), every dtype and D; f16/bf16
 *         take it only when forced or before sm_80.
 *   SM90  attention_sm90.cu: FlashAttention-3's scheme (TMA, wgmma,
 *         warp-specialised producer, intra-warpgroup overlap, ping-pong),
 *         f16/bf16, D 64 or 128, any split, 16-byte aligned buffers,
 *         compute capability 9.0, builds with FUSEPORT_GEMM_SM90 only;
 *         taken by default for S > kSm90MinS, split or not (decode keeps
 *         SM80's split-key tiles).
 * FUSEPORT_CUDA_GEMM_PATH=simt (env->force_path) forces SIMT, =sm80 SM80,
 * =sm90 SM90 wherever eligible. FUSEPORT_CUDA_ATTN_CFG=<name> forces a
 * configuration: an SM90 name (h64, h128, ...) takes SM90 where eligible,
 * an SM80 name (d128, ...) takes SM80.
 *
 * The SIMT kernel: a block of 256 threads owns 32 query rows and walks the
 * keys in tiles of 32, q, k and v tiles as float in shared memory (rows
 * padded by 4 floats: the float4 reads of 8 different k rows hit 32
 * distinct banks). Thread (r = tid / 8, c = tid % 8) computes the scores of
 * row r with keys c, c + 8, c + 16, c + 24; the 8 threads of a row reduce
 * its max by shuffles, keep the running max and sum (log2 units, exp2), put
 * the probabilities in shared memory and accumulate out columns
 * 4c + 32k .. +3 of row r. D is padded to DP (32, 64, 128, 256) with zeros.
 *
 * attention_combine_<dt> (ELEM) merges split partials; attn_softmax_<dt>
 * (ROWS) is the unfused path's masked softmax: a block per row, three
 * passes (max, sum, write).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_common.cuh"
#include "cuda/cuda_attention.h"
#include "cuda/gemm_plan.h"
#include "mma_sm80.cuh" /* fpmma::pack2 */

using namespace fpattn;

namespace {

enum AttnPath { PATH_SIMT, PATH_SM80, PATH_SM90 };

#ifdef FUSEPORT_GEMM_SM90
/* SM90 by default above this many query rows (below: decode-like, SM80's
 * split-key tiles) */
constexpr long long kSm90MinS = 64;
#endif

/* ---- the SIMT kernel --------------------------------------------------------------- */

constexpr int kSimtBM = 32, kSimtBN = 32, kSimtThreads = 256;

template <int DP> struct SimtTile {
  static constexpr int LD = DP + 4;       /* q and k rows */
  static constexpr int PLD = kSimtBN + 1; /* probabilities */
  static constexpr int SMEM = (kSimtBM * LD + kSimtBN * LD + kSimtBN * DP + kSimtBM * PLD) * 4;
  static_assert(DP % 32 == 0, "a thread's out columns: 4 of each 32");
};

/* rows [0, nrows) of a [*, D] tile starting at src into dst (row stride
 * ld floats), zeros past `valid` rows and D columns */
template <class T, int DP>
__device__ __forceinline__ void simt_load(float *dst, int ld, const T *src, int nrows,
                                          long long valid, int D) {
  for (int i = threadIdx.x; i < nrows * DP; i += kSimtThreads) {
    const int r = i / DP, d = i - r * DP;
    dst[r * ld + d] = r < valid && d < D ? Storage<T>::to_float(src[(long long)r * D + d]) : 0.0f;
  }
}

template <class T, int DP>
__global__ void __launch_bounds__(kSimtThreads, 1) attention_simt_kernel(const Params a) {
  using TL = SimtTile<DP>;
  extern __shared__ __align__(16) float fsm[];
  float *qs = fsm, *ks = qs + kSimtBM * TL::LD, *vs = ks + kSimtBN * TL::LD,
        *ps = vs + kSimtBN * DP;

  const long long ntiles = (a.S + kSimtBM - 1) / kSimtBM;
  const long long per_tile = (long long)a.bh * a.splits;
  long long tile = (long long)blockIdx.x / per_tile;
  const long long rem = (long long)blockIdx.x - tile * per_tile;
  const int bh = (int)(rem / a.splits), chunk = (int)(rem - (long long)bh * a.splits);
  if (a.causal)
    tile = ntiles - 1 - tile;
  const long long m0 = tile * kSimtBM, row0 = (long long)bh * a.S + m0;
  long long lo, hi;
  key_range(a, m0, kSimtBM, chunk, lo, hi);
  long long hic = (long long)chunk * a.chunk + a.chunk;
  if (hic > a.SK)
    hic = a.SK;

  const int r = threadIdx.x >> 3, c = threadIdx.x & 7;
  const long long row = m0 + r;
  const long long lim =
      a.causal ? (row + a.SK - a.S + 1 < hic ? row + a.SK - a.S + 1 : hic) : hic; /* keys < lim */

  const T *kg = static_cast<const T *>(a.k) + (long long)bh * a.SK * a.D;
  const T *vg = static_cast<const T *>(a.v) + (long long)bh * a.SK * a.D;
  simt_load<T, DP>(qs, TL::LD, static_cast<const T *>(a.q) + row0 * a.D, kSimtBM, a.S - m0, a.D);

  float o[DP / 32][4];
#pragma unroll
  for (int k = 0; k < DP / 32; ++k)
    o[k][0] = o[k][1] = o[k][2] = o[k][3] = 0.0f;
  float m = -CUDART_INF_F, l = 0.0f;

  for (long long n0 = lo; n0 < hi; n0 += kSimtBN) {
    __syncthreads(); /* the previous tile's reads are done */
    simt_load<T, DP>(ks, TL::LD, kg + n0 * a.D, kSimtBN, hic - n0, a.D);
    simt_load<T, DP>(vs, DP, vg + n0 * a.D, kSimtBN, hic - n0, a.D);
    __syncthreads();
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float *qr = qs + r * TL::LD;
#pragma unroll 4
    for (int d = 0; d < DP; d += 4) {
      const float4 q4 = *reinterpret_cast<const float4 *>(qr + d);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float4 k4 = *reinterpret_cast<const float4 *>(ks + (c + 8 * i) * TL::LD + d);
        s[i] = fmaf(q4.x, k4.x, s[i]);
        s[i] = fmaf(q4.y, k4.y, s[i]);
        s[i] = fmaf(q4.z, k4.z, s[i]);
        s[i] = fmaf(q4.w, k4.w, s[i]);
      }
    }
    float mx = -CUDART_INF_F;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s[i] = n0 + c + 8 * i < lim ? s[i] * a.scale_log2 : -CUDART_INF_F;
      mx = fmaxf(mx, s[i]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
    const float m_new = fmaxf(m, mx);
    const float m_use = m_new == -CUDART_INF_F ? 0.0f : m_new;
    const float alpha = fast_exp2(m - m_use);
    m = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float p = fast_exp2(s[i] - m_use);
      ps[r * TL::PLD + c + 8 * i] = p;
      sum += p;
    }
    l = l * alpha + sum;
#pragma unroll
    for (int k = 0; k < DP / 32; ++k) {
      o[k][0] *= alpha;
      o[k][1] *= alpha;
      o[k][2] *= alpha;
      o[k][3] *= alpha;
    }
    __syncwarp(); /* a row's 8 threads share a warp */
#pragma unroll 4
    for (int j = 0; j < kSimtBN; ++j) {
      const float p = ps[r * TL::PLD + j];
#pragma unroll
      for (int k = 0; k < DP / 32; ++k) {
        const float4 v4 = *reinterpret_cast<const float4 *>(vs + j * DP + 32 * k + 4 * c);
        o[k][0] = fmaf(p, v4.x, o[k][0]);
        o[k][1] = fmaf(p, v4.y, o[k][1]);
        o[k][2] = fmaf(p, v4.z, o[k][2]);
        o[k][3] = fmaf(p, v4.w, o[k][3]);
      }
    }
  }

  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  l += __shfl_xor_sync(0xffffffffu, l, 4);
  if (row >= a.S)
    return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  if (c == 0)
    store_row_lse(a, row0 + r, chunk, row_lse(m, l));
#pragma unroll
  for (int k = 0; k < DP / 32; ++k)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int d = 32 * k + 4 * c + e;
      if (d < a.D)
        store_row_value<T>(a, row0 + r, chunk, d, o[k][e] * inv);
    }
}

template <class T, int DP> const void *simt_stub() {
  return reinterpret_cast<const void *>(&attention_simt_kernel<T, DP>);
}

template <class T, int DP> cudaError_t simt_launch(const Problem &p, cudaStream_t stream) {
  const Params a = params_of(p);
  const long long blocks = ((p.S + kSimtBM - 1) / kSimtBM) * p.B * p.H * p.splits;
  if (blocks > 0x7fffffffLL)
    return cudaErrorInvalidConfiguration;
  void (*kernel)(const Params) = &attention_simt_kernel<T, DP>;
  cudaError_t err = fpgemm::set_smem(kernel, SimtTile<DP>::SMEM);
  if (err != cudaSuccess)
    return err;
  kernel<<<(unsigned)blocks, kSimtThreads, SimtTile<DP>::SMEM, stream>>>(a);
  return cudaGetLastError();
}

int simt_dp(long long D) { return D <= 32 ? 32 : D <= 64 ? 64 : D <= 128 ? 128 : 256; }

template <class T> cudaError_t simt_run_t(const Problem &p, cudaStream_t stream) {
  switch (simt_dp(p.D)) {
  case 32:
    return simt_launch<T, 32>(p, stream);
  case 64:
    return simt_launch<T, 64>(p, stream);
  case 128:
    return simt_launch<T, 128>(p, stream);
  default:
    return simt_launch<T, 256>(p, stream);
  }
}

cudaError_t simt_run(const Problem &p, cudaStream_t stream) {
  switch (p.dtype) {
  case FP_F16:
    return simt_run_t<__half>(p, stream);
  case FP_BF16:
    return simt_run_t<__nv_bfloat16>(p, stream);
  default:
    return simt_run_t<float>(p, stream);
  }
}

template <class T> void simt_stubs_t(const void **out, int &n) {
  out[n++] = simt_stub<T, 32>();
  out[n++] = simt_stub<T, 64>();
  out[n++] = simt_stub<T, 128>();
  out[n++] = simt_stub<T, 256>();
}

/* ---- attention_combine_<dt> (ELEM over R*D) ----------------------------------------
 * Three passes over a row's splits (max, sum, weighted sum); the result does
 * not depend on the launch's geometry, and each of the three paths below
 * sums in one fixed order. A split whose lse is -inf adds nothing (its
 * partial row may be unwritten, kernels.def: the team path does not read
 * it, the other two read it and drop it). Which path, by how the
 * launch's threads meet the rows:
 *   combine_team     fewer threads than elements (memeff: many rows, few
 *                    splits): a team of lanes a row, 4 vectors of the row a
 *                    lane (float4 where D % 4 == 0 and the pointers allow),
 *                    the row's weights worked out by every lane, a -inf
 *                    split's partial row not read. It replaced the element
 *                    path there, which divided 64-bit indices and rebuilt
 *                    the weights for every element: H200, 2026-11-29,
 *                    Nsight Compute, 4x16x4096x128 causal in 2 chunks:
 *                    420 -> 77 us for 260 MB.
 *   combine_block    a block for every row (decoding, one head): the
 *                    block's threads share the splits (1x1x1x65536x128, 256
 *                    splits: 37.9 -> 12.1 us under Nsight Compute).
 *   combine_element  else (decoding, many heads): a thread an element.
 * The split loops are unrolled by 8 so that eight loads are in flight: a
 * rolled loop waited out an L2 round trip a split (H200, 1x32x1x32768x128
 * in 33 splits: 18.6 us for 540 KB beside the main kernel's 146). */

template <int W> __device__ __forceinline__ void combine_load(float (&v)[W], const float *p) {
  if constexpr (W == 4) {
    const float4 t = __ldg(reinterpret_cast<const float4 *>(p));
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  } else {
    v[0] = __ldg(p);
  }
}

template <class T, int W> __device__ __forceinline__ void combine_store(T *p, const float (&v)[W]) {
  if constexpr (W == 4 && sizeof(T) == 4) {
    *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else if constexpr (W == 4) { /* 16-bit storage: 8 bytes */
    *reinterpret_cast<uint2 *>(p) =
        make_uint2(fpmma::pack2<T>(v[0], v[1]), fpmma::pack2<T>(v[2], v[3]));
  } else {
    p[0] = Storage<T>::from_float(v[0]);
  }
}

/* How many of splits first, first + step, ... there are. The split loops
 * count them (unit stride, a trip count known on entry): a loop striding
 * by a run-time step was unrolled with a bound check, and branch, before
 * each split's loads, which kept one split's loads in flight at a time
 * (SASS of combine_block; 1x1x1x65536x128's 256 splits: 20 us under Nsight
 * Compute). */
__device__ __forceinline__ int combine_share(int splits, int first, int step) {
  return first < splits ? (splits - 1 - first) / step + 1 : 0;
}

/* A row's logsumexp over its splits: a thread's strided share (first,
 * step), then `reduce` across the threads that share the row. */
template <class Max, class Sum>
__device__ __forceinline__ float combine_lse(const float *lrow, long long R, int splits, int first,
                                             int step, Max reduce_max, Sum reduce_sum) {
  const int n = combine_share(splits, first, step);
  float mx = -CUDART_INF_F;
#pragma unroll 8
  for (int i = 0; i < n; ++i)
    mx = fp_maximum(mx, __ldg(lrow + (long long)(first + i * step) * R));
  mx = reduce_max(mx);
  if (mx == -CUDART_INF_F)
    return mx;
  float sum = 0.0f;
#pragma unroll 8
  for (int i = 0; i < n; ++i) /* -inf splits add 0 */
    sum += expf(__ldg(lrow + (long long)(first + i * step) * R) - mx);
  return mx + logf(reduce_sum(sum));
}

constexpr int kCombineVecs = 4; /* the team path's vectors a lane */

template <class T, int W>
__device__ __forceinline__ void combine_team(T *out, float *lse, const float *opart,
                                             const float *lpart, long long R, long long D,
                                             int splits) {
  const long long nvec = D / W; /* W divides D */
  int lg = 0;                   /* the team: nvec / kCombineVecs lanes, a power of two <= 32 */
  while (lg < 5 && ((long long)kCombineVecs << lg) < nvec)
    ++lg;
  const int lanes = 1 << lg;
  const long long idx = fpcu::grid_thread_index(), teams = fpcu::grid_thread_count() >> lg;
  if (idx >= teams << lg)
    return; /* a part team past the last whole one */
  const int lane = (int)(idx & (lanes - 1));
  const auto same = [](float v) { return v; }; /* every lane has every split */
  for (long long r = idx >> lg; r < R; r += teams) {
    const float *lrow = lpart + r; /* split c at lrow[c * R] */
    const float L = combine_lse(lrow, R, splits, 0, 1, same, same);
    if (lane == 0)
      lse[r] = L;
    for (long long j0 = 0; j0 < nvec; j0 += (long long)lanes * kCombineVecs) {
      float acc[kCombineVecs][W] = {};
      if (L != -CUDART_INF_F) {
#pragma unroll 8
        for (int c = 0; c < splits; ++c) {
          const float lc = __ldg(lrow + (long long)c * R);
          if (lc == -CUDART_INF_F)
            continue; /* no key of split c: its bytes are not read */
          const float w = expf(lc - L);
          const float *orow = opart + ((long long)c * R + r) * D;
#pragma unroll
          for (int u = 0; u < kCombineVecs; ++u) {
            const long long j = j0 + (long long)u * lanes + lane;
            if (j < nvec) {
              float o[W];
              combine_load<W>(o, orow + j * W);
#pragma unroll
              for (int e = 0; e < W; ++e)
                acc[u][e] += w * o[e];
            }
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kCombineVecs; ++u) {
        const long long j = j0 + (long long)u * lanes + lane;
        if (j < nvec)
          combine_store<T, W>(out + r * D + j * W, acc[u]);
      }
    }
  }
}

/* blockDim.x: a multiple of 32. Warp w takes splits w, w + warps, ..., its
 * lanes the row's vectors; the warps' sums meet in shared memory. */
template <class T, int W>
__device__ __forceinline__ void combine_block(T *out, float *lse, const float *opart,
                                              const float *lpart, long long R, long long D,
                                              int splits) {
  __shared__ float sums[fpcu::kMaxBlock / 32][32 * W]; /* [warp][lane W + e] */
  const int warps = (int)(blockDim.x >> 5), warp = (int)(threadIdx.x >> 5),
            lane = (int)(threadIdx.x & 31);
  const long long nvec = D / W; /* W divides D */
  const auto bmax = [](float v) { return fpcu::block_max(v); };
  const auto bsum = [](float v) { return fpcu::block_sum(v); };
  for (long long r = blockIdx.x; r < R; r += gridDim.x) { /* uniform over the block */
    const float *lrow = lpart + r;
    const float L = combine_lse(lrow, R, splits, (int)threadIdx.x, (int)blockDim.x, bmax, bsum);
    if (threadIdx.x == 0)
      lse[r] = L;
    for (long long j0 = 0; j0 < nvec; j0 += 32) {
      const long long j = j0 + lane;
      float acc[W] = {};
      if (L != -CUDART_INF_F && j < nvec) {
        const int n = combine_share(splits, warp, warps);
#pragma unroll 8
        for (int i = 0; i < n; ++i) {
          const int c = warp + i * warps;
          const float lc = __ldg(lrow + (long long)c * R);
          float o[W];
          combine_load<W>(o, opart + ((long long)c * R + r) * D + j * W);
          const float w = expf(lc - L); /* 0 for -inf: dropped by the select */
#pragma unroll
          for (int e = 0; e < W; ++e)
            acc[e] = lc != -CUDART_INF_F ? fmaf(w, o[e], acc[e]) : acc[e];
        }
      }
#pragma unroll
      for (int e = 0; e < W; ++e)
        sums[warp][lane * W + e] = acc[e];
      __syncthreads();
      const long long left = (nvec - j0) * W; /* elements of this round */
      for (int t = (int)threadIdx.x; t < 32 * W && t < left; t += (int)blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < warps; ++w)
          v += sums[w][t];
        out[r * D + j0 * W + t] = Storage<T>::from_float(v);
      }
      __syncthreads();
    }
  }
}

template <class T>
__device__ __forceinline__ void combine_element(T *out, float *lse, const float *opart,
                                                const float *lpart, long long R, long long D,
                                                int splits) {
  const auto same = [](float v) { return v; };
  for (long long i = fpcu::grid_thread_index(); i < R * D; i += fpcu::grid_thread_count()) {
    const long long r = i / D, d = i - r * D;
    const float *lrow = lpart + r;         /* split c at lrow[c * R] */
    const float *orow = opart + r * D + d; /* split c at orow[c * R * D] */
    const float L = combine_lse(lrow, R, splits, 0, 1, same, same);
    float acc = 0.0f;
    if (L != -CUDART_INF_F) {
#pragma unroll 8
      for (int c = 0; c < splits; ++c) {
        const float lc = __ldg(lrow + (long long)c * R);
        const float oc = __ldg(orow + (long long)c * R * D);
        if (lc != -CUDART_INF_F)
          acc += expf(lc - L) * oc;
      }
    }
    out[i] = Storage<T>::from_float(acc);
    if (d == 0)
      lse[r] = L;
  }
}

template <class T>
__global__ void __launch_bounds__(fpcu::kMaxBlock)
    attention_combine(T *out, float *lse, const float *opart, const float *lpart, long long R,
                      long long D, int splits) {
  /* float4 partials and W-wide stores: D % 4 == 0 keeps every row on the
   * grid when the bases are */
  const bool vec = D % 4 == 0 && (reinterpret_cast<uintptr_t>(opart) & 15u) == 0 &&
                   (reinterpret_cast<uintptr_t>(out) & (4 * sizeof(T) - 1)) == 0;
  if (R <= (long long)gridDim.x && (blockDim.x & 31u) == 0) {
    if (vec)
      combine_block<T, 4>(out, lse, opart, lpart, R, D, splits);
    else
      combine_block<T, 1>(out, lse, opart, lpart, R, D, splits);
  } else if (R * D <= fpcu::grid_thread_count()) {
    combine_element<T>(out, lse, opart, lpart, R, D, splits);
  } else if (vec) {
    combine_team<T, 4>(out, lse, opart, lpart, R, D, splits);
  } else {
    combine_team<T, 1>(out, lse, opart, lpart, R, D, splits);
  }
}

/* ---- attn_softmax_<dt> (ROWS) ------------------------------------------------------- */

template <class T>
__global__ void __launch_bounds__(fpcu::kMaxBlock, 1)
    attn_softmax(T *p, float *lse, const T *s, long long R, long long S, long long SK, int causal) {
  for (long long row = blockIdx.x; row < R; row += gridDim.x) {
    const long long i = row % S;
    long long lim = SK;
    if (causal && i + SK - S + 1 < lim)
      lim = i + SK - S + 1; /* keys < lim; <= 0: none */
    const T *sr = s + row * SK;
    T *pr = p + row * SK;
    float mx = -CUDART_INF_F;
    for (long long j = threadIdx.x; j < lim; j += blockDim.x)
      mx = fp_maximum(mx, Storage<T>::to_float(sr[j]));
    mx = fpcu::block_max(mx);
    float L = -CUDART_INF_F;
    if (mx != -CUDART_INF_F) { /* else no key (or all -inf): p 0, lse -inf */
      float sum = 0.0f;
      for (long long j = threadIdx.x; j < lim; j += blockDim.x)
        sum += expf(Storage<T>::to_float(sr[j]) - mx);
      sum = fpcu::block_sum(sum);
      L = mx + logf(sum);
    }
    for (long long j = threadIdx.x; j < SK; j += blockDim.x)
      pr[j] = Storage<T>::from_float(
          j < lim && L != -CUDART_INF_F ? expf(Storage<T>::to_float(sr[j]) - L) : 0.0f);
    if (threadIdx.x == 0)
      lse[row] = L;
  }
}

/* ---- validation ---------------------------------------------------------------------- */

bool validate(const Problem &p, char *msg, size_t msglen) {
  const long long dims[] = {p.B, p.H, p.S, p.SK};
  const char *const names[] = {"B", "H", "S", "SK"};
  for (int i = 0; i < 4; ++i)
    if (dims[i] < 1) {
      snprintf(msg, msglen, "%s=%lld: must be at least 1", names[i], dims[i]);
      return false;
    }
  if (p.D < 1 || p.D > FP_ATTN_MAX_D) {
    snprintf(msg, msglen, "D=%lld: must be in [1, %d] (FP_ATTN_MAX_D)", p.D, FP_ATTN_MAX_D);
    return false;
  }
  /* keys index in int inside a block's range; heads in int */
  if (p.SK >= (1LL << 31) - (1LL << 16) || p.B * p.H >= (1LL << 31)) {
    snprintf(msg, msglen, "SK=%lld, B*H=%lld: the kernels take SK < 2^31 - 2^16, B*H < 2^31", p.SK,
             p.B * p.H);
    return false;
  }
  if (p.splits < 1) {
    snprintf(msg, msglen, "splits=%d: must be at least 1", p.splits);
    return false;
  }
  if (p.causal != 0 && p.causal != 1) {
    snprintf(msg, msglen, "causal=%d: must be 0 or 1", p.causal);
    return false;
  }
  if (p.q == nullptr || p.k == nullptr || p.v == nullptr) {
    snprintf(msg, msglen, "q, k and v must be buffers");
    return false;
  }
  if (p.splits == 1 && p.out == nullptr) {
    snprintf(msg, msglen, "splits=1 writes out, which was passed as none");
    return false;
  }
  if (p.splits > 1 && (p.opart == nullptr || p.lpart == nullptr)) {
    snprintf(msg, msglen, "splits=%d writes opart and lpart, passed as none", p.splits);
    return false;
  }
  return true;
}

int dtype_of(fp_kernel_id id) {
  return id == FPK_attention_f16 ? FP_F16 : (id == FPK_attention_bf16 ? FP_BF16 : FP_F32);
}

} // namespace

/* ---- the host interface (cuda_attention.h) ------------------------------------------- */

extern "C" bool fp_cuda_attention_is_planned(fp_kernel_id id) {
  return id == FPK_attention_f32 || id == FPK_attention_f16 || id == FPK_attention_bf16;
}

extern "C" cudaError_t fp_cuda_attention_launch(fp_kernel_id id, const fp_karg *args, int nargs,
                                                const fp_cuda_gemm_env *env, int *kernels_launched,
                                                char *msg, size_t msglen) {
  *kernels_launched = 0;
  msg[0] = '\0';
  if (!fp_cuda_attention_is_planned(id)) {
    snprintf(msg, msglen, "%s is not attention_<dt>", fp_kernel_name(id));
    return cudaErrorInvalidValue;
  }
  if (nargs != 15) {
    snprintf(msg, msglen, "%d arguments, attention takes 15", nargs);
    return cudaErrorInvalidValue;
  }
  /* (out, lse, q, k, v, opart, lpart, B, H, S, SK, D, causal, scale, splits) */
  Problem p;
  p.out = args[0].v.handle;
  p.lse = static_cast<float *>(args[1].v.handle);
  p.q = args[2].v.handle;
  p.k = args[3].v.handle;
  p.v = args[4].v.handle;
  p.opart = args[5].v.handle;
  p.lpart = args[6].v.handle;
  p.B = args[7].v.i64;
  p.H = args[8].v.i64;
  p.S = args[9].v.i64;
  p.SK = args[10].v.i64;
  p.D = args[11].v.i64;
  p.causal = args[12].v.i32;
  p.scale = args[13].v.f32;
  p.splits = args[14].v.i32;
  p.dtype = dtype_of(id);
  if (!validate(p, msg, msglen))
    return cudaErrorInvalidValue;
  p.chunk = (p.SK + p.splits - 1) / p.splits;

  AttnPath path = PATH_SIMT;
  const int force = env->force_path;
  if (force != FP_GEMM_PATH_SIMT && env->cc_major >= 8 && fpattn::sm80_eligible(p))
    path = PATH_SM80;
#ifdef FUSEPORT_GEMM_SM90
  static const char *const forced_cfg = getenv("FUSEPORT_CUDA_ATTN_CFG");
  int cfg90 = -1;
  if (path == PATH_SM80 && force != FP_GEMM_PATH_SM80 && env->cc_major == 9 && env->cc_minor == 0 &&
      fpattn::sm90_eligible(p)) {
    cfg90 = fpattn::sm90_find(forced_cfg, p);
    const bool forced80 = forced_cfg != nullptr && cfg90 < 0; /* an SM80 (or unknown) name */
    if (cfg90 >= 0 || force == FP_GEMM_PATH_SM90 || (!forced80 && p.S > kSm90MinS)) {
      path = PATH_SM90;
      if (cfg90 < 0)
        cfg90 = fpattn::sm90_pick(p);
    }
  }
#endif
  cudaError_t err;
  const char *name, *cfg_name;
#ifdef FUSEPORT_GEMM_SM90
  if (path == PATH_SM90) {
    err = fpattn::sm90_run(p, cfg90, env->stream);
    name = "sm90";
    cfg_name = fpattn::sm90_config_name(cfg90);
  } else
#endif
      if (path == PATH_SM80) {
    const int cfg = fpattn::sm80_pick(p);
    err = fpattn::sm80_run(p, cfg, env->stream);
    name = "sm80";
    cfg_name = fpattn::sm80_config_name(cfg);
  } else {
    err = simt_run(p, env->stream);
    name = "simt";
    cfg_name = "32x32";
  }
  if (err == cudaSuccess)
    *kernels_launched = 1;
  else
    snprintf(msg, msglen, "attention, the %s path (%s tiles, D=%lld)", name, cfg_name, p.D);
  return err;
}

extern "C" int fp_cuda_attention_stubs(const void **out, int cap) {
  const void *mine[128]; /* 12 SIMT + 2 x 14 SM80 + 2 x (8 + 2) SM90 today */
  int n = 0;
  simt_stubs_t<float>(mine, n);
  simt_stubs_t<__half>(mine, n);
  simt_stubs_t<__nv_bfloat16>(mine, n);
  n += fpattn::sm80_stubs(mine + n, 128 - n);
#ifdef FUSEPORT_GEMM_SM90
  n += fpattn::sm90_stubs(mine + n, 128 - n);
#endif
  int k = 0;
  for (; k < n && k < cap; ++k)
    out[k] = mine[k];
  return k;
}

extern "C" void fp_cuda_register_attention(const void *table[FPK_COUNT]) {
  /* attention_<dt> is planned: any stub marks it present */
  const void *marker = simt_stub<float, 32>();
  table[FPK_attention_f32] = marker;
  table[FPK_attention_f16] = marker;
  table[FPK_attention_bf16] = marker;
  table[FPK_attention_combine_f32] = reinterpret_cast<const void *>(&attention_combine<float>);
  table[FPK_attention_combine_f16] = reinterpret_cast<const void *>(&attention_combine<__half>);
  table[FPK_attention_combine_bf16] =
      reinterpret_cast<const void *>(&attention_combine<__nv_bfloat16>);
  table[FPK_attn_softmax_f32] = reinterpret_cast<const void *>(&attn_softmax<float>);
  table[FPK_attn_softmax_f16] = reinterpret_cast<const void *>(&attn_softmax<__half>);
  table[FPK_attn_softmax_bf16] = reinterpret_cast<const void *>(&attn_softmax<__nv_bfloat16>);
}

extern "C" void fp_cuda_register_tuning_attention(fp_cuda_tuning table[FPK_COUNT]) {
  (void)table; /* one build per kernel */
}
