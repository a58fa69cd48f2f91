/* fuseport CUDA kernels, family attention: what attention.cu (the plan, the
 * SIMT path, combine and softmax) and attention_sm80.cu (the tensor-core
 * path) share. Semantics: kernels/kernels.def, family attention. */
#ifndef FUSEPORT_ATTENTION_COMMON_CUH
#define FUSEPORT_ATTENTION_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "device_common.cuh"
#include "gemm_common.cuh" /* fpgemm::Storage, fpgemm::set_smem */

namespace fpattn {

using fpgemm::Storage;

/* One attention_<dt> launch, as validated by attention.cu. */
struct Problem {
  void *out, *opart, *lpart;
  float *lse;
  const void *q, *k, *v;
  long long B, H, S, SK, D;
  int causal, splits, dtype; /* dtype: FP_F32, FP_F16, FP_BF16 */
  float scale;
  long long chunk; /* keys per split: ceil(SK / splits) */
  long long rows() const { return B * H * S; }
};

/* What a kernel needs of a Problem (passed by value). */
struct Params {
  void *out, *opart, *lpart; /* out: T; opart, lpart: float */
  float *lse;
  const void *q, *k, *v;
  long long S, SK, R, chunk; /* R = B*H*S */
  int D, causal, splits, bh, vec;
  float scale_log2; /* scale * log2(e): scores go through exp2 */
};

inline Params params_of(const Problem &p) {
  Params a;
  a.out = p.out;
  a.opart = p.opart;
  a.lpart = p.lpart;
  a.lse = p.lse;
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.S = p.S;
  a.SK = p.SK;
  a.R = p.rows();
  a.chunk = p.chunk;
  a.D = (int)p.D;
  a.causal = p.causal;
  a.splits = p.splits;
  a.bh = (int)(p.B * p.H);
  a.vec = 0;
  a.scale_log2 = p.scale * 1.4426950408889634f;
  return a;
}

/* The keys [lo, hi) a block of query rows [m0, m0 + rows) of chunk c reads:
 * the chunk's keys, cut by the causal mask at the last row's limit
 * (i + SK - S). hi <= lo: the block sees no key. */
__device__ __forceinline__ void key_range(const Params &a, long long m0, int rows, int c,
                                          long long &lo, long long &hi) {
  lo = (long long)c * a.chunk;
  hi = lo + a.chunk < a.SK ? lo + a.chunk : a.SK;
  if (a.causal) {
    long long last = m0 + rows - 1;
    if (last > a.S - 1)
      last = a.S - 1;
    const long long lim = last + a.SK - a.S + 1; /* keys < lim */
    if (lim < hi)
      hi = lim;
  }
}

/* 2^x by the hardware's ex2.approx.ftz (FlashAttention's exp2f under
 * --use_fast_math): relative error about 2^-22, results below 2^-126 flush
 * to 0 (probabilities that small add nothing to a row's sum of >= 1);
 * 2^-inf = 0, NaN stays NaN. */
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* A row's result from its running max m (log2 units, -inf: no key), sum l
 * and unnormalised o: lse in natural log, and the factor for o. */
__device__ __forceinline__ float row_lse(float m, float l) {
  return l > 0.0f ? (m + __log2f(l)) * 0.6931471805599453f : -CUDART_INF_F;
}

/* Where row r (0 <= r < R) of chunk c writes: out + r*D and lse[r] for one
 * split, opart + (c*R + r)*D and lpart[c*R + r] otherwise. */
template <class T>
__device__ __forceinline__ void store_row_value(const Params &a, long long r, int c, int d,
                                                float o) {
  if (a.splits == 1)
    static_cast<T *>(a.out)[r * a.D + d] = Storage<T>::from_float(o);
  else
    static_cast<float *>(a.opart)[((long long)c * a.R + r) * a.D + d] = o;
}
__device__ __forceinline__ void store_row_lse(const Params &a, long long r, int c, float lse) {
  if (a.splits == 1) {
    if (a.lse != nullptr)
      a.lse[r] = lse;
  } else {
    static_cast<float *>(a.lpart)[(long long)c * a.R + r] = lse;
  }
}

/* ---- the tensor-core path (attention_sm80.cu) ---------------------------------- */
/* Whether it takes p (f16/bf16, D <= FP_ATTN_MAX_D). */
bool sm80_eligible(const Problem &p);
/* The configuration it would launch and its name (messages). */
int sm80_pick(const Problem &p);
const char *sm80_config_name(int cfg);
cudaError_t sm80_run(const Problem &p, int cfg, cudaStream_t stream);
int sm80_stubs(const void **out, int cap);

/* ---- the Hopper path (attention_sm90.cu, sm_90a only: FUSEPORT_GEMM_SM90) ------ */
/* Whether it takes p (f16/bf16, D 64 or 128, 16-byte aligned q, k, v and
 * out, or opart where split); the caller adds compute capability 9.0. */
bool sm90_eligible(const Problem &p);
/* The configuration named `name` for p's D, or -1. */
int sm90_find(const char *name, const Problem &p);
int sm90_pick(const Problem &p);
const char *sm90_config_name(int cfg);
cudaError_t sm90_run(const Problem &p, int cfg, cudaStream_t stream);
int sm90_stubs(const void **out, int cap);

} // namespace fpattn

#endif
