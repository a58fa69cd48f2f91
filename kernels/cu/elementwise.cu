/* fuseport CUDA kernels, family elementwise: the fused elementwise operators.
 * Semantics: kernels/kernels.def; scalar formulas: fp_device_common.h;
 * reference: kernels/cpu/elementwise.c.
 *
 * The ELEM kernels are grid-stride loops over the logical [M, N] index
 * space (fpcu::elem_map_2d): 16-byte loads and stores when the layout
 * allows, several items in flight per thread, 64-bit indices throughout.
 * The TILE kernel transposes through shared memory. The unrolls
 * (FP_ELEM_UNROLL = 4, or 2 for bias_dropout_add's three streams) are also
 * the float4 per thread of the tuned grid from 2^22 elements
 * (fp_cuda_plan_elem). Each ELEM kernel also has lean builds, one schedule
 * in 32-bit offsets with Inductor's memory accesses, which the backend
 * launches where the arguments fit (device_elem.cuh, "lean ELEM builds").
 */
#include "device_common.cuh"

using namespace fpcu;

/* ---- the element functions, shared by each kernel's builds ---------------- */

struct PointwiseChain { /* y=cos(x); x=x*y; y=max(x,y); out=x+y */
  __device__ float operator()(const float (&a)[1], long long) const {
    return fp_pointwise_chain(a[0]);
  }
};
struct BiasGelu { /* gelu_tanh(inp + bias) */
  __device__ float operator()(const float (&a)[2], long long) const {
    return fp_gelu_tanh(a[0] + a[1]);
  }
};
struct BiasAdd { /* res + (inp + bias): bias_dropout_add when not training */
  __device__ float operator()(const float (&a)[3], long long) const { return a[2] + (a[0] + a[1]); }
};
struct BiasDropoutAdd { /* res + dropout(inp + bias), the counter the logical index */
  long long seed;
  float p, scale;
  __device__ float operator()(const float (&a)[3], long long e) const {
    return a[2] + dropout_apply(a[0] + a[1], seed, e, p, scale);
  }
};

/* ---- kernels ----------------------------------------------------------------- */

/* pointwise_chain_fused(out, x, n)                                     ELEM
 * y=cos(x); x=x*y; y=max(x,y); out=x+y. */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    pointwise_chain_fused(float *out, const float *x, long long n) {
  const View2D in[1] = {{x, 0, 1}}; /* [1, n] */
  elem_map_2d<FP_ELEM_UNROLL>(out, 0, 1, in, 1, n, PointwiseChain{});
}

/* bias_gelu_fused(out, inp, bias, M, N)                                ELEM
 * out[i,j] = gelu_tanh(inp[i,j] + bias[j]). */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    bias_gelu_fused(float *out, const float *inp, const float *bias, long long M, long long N) {
  const View2D in[2] = {{inp, N, 1}, {bias, 0, 1}};
  elem_map_2d<FP_ELEM_UNROLL>(out, N, 1, in, M, N, BiasGelu{});
}

/* bias_dropout_add_fused(out, inp, bias, res, M, N, sb0, sb1, sr0, sr1,
 *                        so0, so1, p, scale, seed, training)         ELEM
 * v = inp[i*N+j] + bias(i,j); v = dropout(v) when training;
 * out(i,j) = res(i,j) + v, the dropout counter being i*N+j. */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    bias_dropout_add_fused(float *out, const float *inp, const float *bias, const float *res,
                           long long M, long long N, long long sb0, long long sb1, long long sr0,
                           long long sr1, long long so0, long long so1, float p, float scale,
                           long long seed, int training) {
  const View2D in[3] = {{inp, N, 1}, {bias, sb0, sb1}, {res, sr0, sr1}};
  if (training)
    elem_map_2d<FP_ELEM_UNROLL_THREE_STREAMS>(out, so0, so1, in, M, N,
                                              BiasDropoutAdd{seed, p, scale});
  else
    elem_map_2d<FP_ELEM_UNROLL_THREE_STREAMS>(out, so0, so1, in, M, N, BiasAdd{});
}

/* ---- lean builds (device_elem.cuh): the same signatures and results, for
 * the arguments fp_cuda_plan_elem_builds (cuda_plan.h) lets them take; the
 * arguments their schedule implies go unnamed. */

static __global__ void __launch_bounds__(kMaxBlock, 1)
    pointwise_chain_fused_flat32(float *out, const float *x, long long n) {
  const float *const in[1] = {x};
  elem_flat32<FP_ELEM_UNROLL>(out, in, (unsigned)n, PointwiseChain{});
}

static __global__ void __launch_bounds__(kMaxBlock, 1)
    bias_gelu_fused_rowvec32(float *out, const float *inp, const float *bias, long long M,
                             long long N) {
  const float *const in[2] = {inp, bias};
  const unsigned s0[2] = {(unsigned)N, 0u};
  elem_rowvec32<FP_ELEM_UNROLL>(out, (unsigned)N, in, s0, (unsigned)M, (unsigned)N, BiasGelu{});
}

static __global__ void __launch_bounds__(kMaxBlock, 1)
    bias_dropout_add_fused_rowvec32(float *out, const float *inp, const float *bias,
                                    const float *res, long long M, long long N, long long sb0,
                                    long long, long long sr0, long long, long long so0, long long,
                                    float, float, long long, int) {
  const float *const in[3] = {inp, bias, res};
  const unsigned s0[3] = {(unsigned)N, (unsigned)sb0, (unsigned)sr0};
  elem_rowvec32<FP_ELEM_UNROLL_THREE_STREAMS>(out, (unsigned)so0, in, s0, (unsigned)M, (unsigned)N,
                                              BiasAdd{});
}

static __global__ void __launch_bounds__(kMaxBlock, 1)
    bias_dropout_add_fused_rowvec32_training(float *out, const float *inp, const float *bias,
                                             const float *res, long long M, long long N,
                                             long long sb0, long long, long long sr0, long long,
                                             long long so0, long long, float p, float scale,
                                             long long seed, int) {
  const float *const in[3] = {inp, bias, res};
  const unsigned s0[3] = {(unsigned)N, (unsigned)sb0, (unsigned)sr0};
  elem_rowvec32<FP_ELEM_UNROLL_THREE_STREAMS>(out, (unsigned)so0, in, s0, (unsigned)M, (unsigned)N,
                                              BiasDropoutAdd{seed, p, scale});
}

/* Rows whose length is not a multiple of 4 (flatbias32): contiguous inp, res
 * and out, the bias [N] broadcast along rows. */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    bias_gelu_fused_flatbias32(float *out, const float *inp, const float *bias, long long M,
                               long long N) {
  const float *const in[2] = {inp, bias};
  elem_flatbias32<FP_ELEM_UNROLL>(out, in, (unsigned)N, (unsigned)(M * N), BiasGelu{});
}

static __global__ void __launch_bounds__(kMaxBlock, 1)
    bias_dropout_add_fused_flatbias32(float *out, const float *inp, const float *bias,
                                      const float *res, long long M, long long N, long long,
                                      long long, long long, long long, long long, long long, float,
                                      float, long long, int) {
  const float *const in[3] = {inp, bias, res};
  elem_flatbias32<FP_ELEM_UNROLL_THREE_STREAMS>(out, in, (unsigned)N, (unsigned)(M * N), BiasAdd{});
}

static __global__ void __launch_bounds__(kMaxBlock, 1)
    bias_dropout_add_fused_flatbias32_training(float *out, const float *inp, const float *bias,
                                               const float *res, long long M, long long N,
                                               long long, long long, long long, long long,
                                               long long, long long, float p, float scale,
                                               long long seed, int) {
  const float *const in[3] = {inp, bias, res};
  elem_flatbias32<FP_ELEM_UNROLL_THREE_STREAMS>(out, in, (unsigned)N, (unsigned)(M * N),
                                                BiasDropoutAdd{seed, p, scale});
}

#ifndef FPCU_EMULATION /* static shared memory, which tests/cuda_emu does not model */
/* bias_dropout_add_fused_t: same arguments and result;                 TILE
 * meant for a column-major output (so0 == 1) and residual with the
 * row-major inp. Block (32, 8) (the backend checks it) handles 32x32 tiles:
 * it reads the inp tile along rows (lanes = consecutive j, coalesced),
 * transposes it through shared memory, and reads bias/res and writes out
 * along columns (lanes = consecutive i, coalesced when their row stride is
 * 1; a bias [N] broadcast is one address per warp). Any strides give the
 * right result. Group (x, y) starts at tile (x, y) and strides by the grid,
 * so a grid capped below ceil(M/32) groups in y (65535) still covers all. */
static __global__ void __launch_bounds__(256, 6) /* 6 blocks: sm_86 holds 1536 threads/SM */
    bias_dropout_add_fused_t(float *out, const float *inp, const float *bias, const float *res,
                             long long M, long long N, long long sb0, long long sb1, long long sr0,
                             long long sr1, long long so0, long long so1, float p, float scale,
                             long long seed, int training) {
  /* One float of padding per row: in the second phase a warp reads a tile
   * column, tile[lane][c], at word lane*33 + c, i.e. bank (lane + c) % 32,
   * 32 distinct banks; with [32][32] all 32 lanes would hit one bank. */
  __shared__ float tile[32][33];
  constexpr int kTile = 32, kRowsPerPass = 8, kPasses = kTile / kRowsPerPass;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long tiles_m = (M + kTile - 1) / kTile, tiles_n = (N + kTile - 1) / kTile;
  for (long long tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
    for (long long tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
      const long long i0 = tm * kTile, j0 = tn * kTile;
      /* Phase 1 reads inp (i0 + ty + 8k, j0 + tx), lanes along j; phase 2
       * handles (i0 + tx, j0 + ty + 8k), lanes along i. All twelve loads
       * are issued first and the phase-2 dropout decisions computed while
       * they are in flight (Philox needs no data). */
      const long long j1 = j0 + tx, i2 = i0 + tx;
      float v[kPasses], b[kPasses], r[kPasses];
#pragma unroll
      for (int k = 0; k < kPasses; ++k) {
        const long long i1 = i0 + ty + k * kRowsPerPass, j2 = j0 + ty + k * kRowsPerPass;
        const bool inside2 = i2 < M && j2 < N;
        v[k] = (i1 < M && j1 < N) ? __ldg(inp + i1 * N + j1) : 0.0f;
        b[k] = inside2 ? __ldg(bias + i2 * sb0 + j2 * sb1) : 0.0f;
        r[k] = inside2 ? __ldg(res + i2 * sr0 + j2 * sr1) : 0.0f;
      }
      unsigned keep = 0; /* bit k: element (i2, j0 + ty + 8k) survives dropout */
      if (training) {
#pragma unroll
        for (int k = 0; k < kPasses; ++k) {
          const long long j2 = j0 + ty + k * kRowsPerPass;
          keep |= (unsigned)fp_dropout_keep((fp_u64)seed, (fp_u64)(i2 * N + j2), p) << k;
        }
      }
#pragma unroll
      for (int k = 0; k < kPasses; ++k)
        tile[ty + k * kRowsPerPass][tx] = v[k];
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kPasses; ++k) {
        const int c = ty + k * kRowsPerPass;
        const long long j2 = j0 + c;
        if (i2 < M && j2 < N) {
          float x = tile[tx][c] + b[k];
          if (training)
            x = (keep >> k) & 1u ? x * scale : 0.0f;
          out[i2 * so0 + j2 * so1] = r[k] + x;
        }
      }
      __syncthreads(); /* the next tile overwrites `tile` */
    }
  }
}
#endif

extern "C" void fp_cuda_register_elementwise(const void *table[FPK_COUNT]) {
  table[FPK_pointwise_chain_fused] = reinterpret_cast<const void *>(&pointwise_chain_fused);
  table[FPK_bias_gelu_fused] = reinterpret_cast<const void *>(&bias_gelu_fused);
  table[FPK_bias_dropout_add_fused] = reinterpret_cast<const void *>(&bias_dropout_add_fused);
#ifndef FPCU_EMULATION
  table[FPK_bias_dropout_add_fused_t] = reinterpret_cast<const void *>(&bias_dropout_add_fused_t);
#endif
}

extern "C" void fp_cuda_register_tuning_elementwise(fp_cuda_tuning table[FPK_COUNT]) {
  table[FPK_pointwise_chain_fused] =
      elem_tuning(reinterpret_cast<const void *>(&pointwise_chain_fused_flat32), nullptr, nullptr,
                  nullptr, nullptr);
  table[FPK_bias_gelu_fused] =
      elem_tuning(nullptr, reinterpret_cast<const void *>(&bias_gelu_fused_rowvec32), nullptr,
                  reinterpret_cast<const void *>(&bias_gelu_fused_flatbias32), nullptr);
  table[FPK_bias_dropout_add_fused] =
      elem_tuning(nullptr, reinterpret_cast<const void *>(&bias_dropout_add_fused_rowvec32),
                  reinterpret_cast<const void *>(&bias_dropout_add_fused_rowvec32_training),
                  reinterpret_cast<const void *>(&bias_dropout_add_fused_flatbias32),
                  reinterpret_cast<const void *>(&bias_dropout_add_fused_flatbias32_training));
}
