/* fuseport CUDA kernels, family conv: what the convolution paths share (the
 * problem as the launcher hands it over, the pixel decomposition of a GEMM
 * row, the epilogue). Semantics: kernels/kernels.def, family conv.
 *
 * Implicit GEMM: GEMM-M = N*P*Q output pixels, GEMM-N = K output channels,
 * GEMM-K = C*R*S taps in the layout's order (NHWC kk = (r S + s) C + c,
 * NCHW kk = (c R + r) S + s). Both filter layouts hold filter k's taps
 * contiguously in that order, so B is w as a row-major [K, C*R*S] matrix
 * (the GEMM core's trans_b form) on every path.
 */
#ifndef FUSEPORT_CONV_COMMON_CUH
#define FUSEPORT_CONV_COMMON_CUH

#include <stdint.h>

#include "gemm_common.cuh"

namespace fpconv {

using fpgemm::Storage;

/* The arguments of conv_<dt> (kernels.def), validated by the launcher: all
 * dims >= 1 (pad >= 0), P and Q from the formula, every dim below 2^30 (so
 * that pixel coordinates and their products with stride and dil fit an
 * int), the vectors the epilogue reads present. */
struct Problem {
  void *out;
  const void *x, *w;
  const void *v[4]; /* BIAS/ADD: v[0]; BN: mean, var, gamma, beta */
  long long N, C, H, W, K, R, S, P, Q, stride, pad, dil;
  int nhwc, epilogue;
  float eps;
  int dtype; /* FP_F32, FP_F16, FP_BF16 (Storage<T>::kDtype) */
  __host__ __device__ long long gemm_m() const { return N * P * Q; }
  __host__ __device__ long long gemm_k() const { return C * R * S; }
};

/* The launch-invariant geometry a kernel needs, as ints where they fit
 * (validated: every dim below 2^30) and the few products in 64 bits. */
struct Geom {
  int C, H, W, K, R, S, P, Q, stride, pad, dil;
  long long M, KG;  /* GEMM-M (N*P*Q) and GEMM-K (C*R*S) */
  long long PQ, HW; /* P*Q, H*W */
  long long CHW;    /* elements of one input image */
  int nhwc;
};

inline Geom geom_of(const Problem &p) {
  Geom g;
  g.C = (int)p.C;
  g.H = (int)p.H;
  g.W = (int)p.W;
  g.K = (int)p.K;
  g.R = (int)p.R;
  g.S = (int)p.S;
  g.P = (int)p.P;
  g.Q = (int)p.Q;
  g.stride = (int)p.stride;
  g.pad = (int)p.pad;
  g.dil = (int)p.dil;
  g.M = p.gemm_m();
  g.KG = p.gemm_k();
  g.PQ = p.P * p.Q;
  g.HW = p.H * p.W;
  g.CHW = p.C * g.HW;
  g.nhwc = p.nhwc;
  return g;
}

/* An output pixel (GEMM row m < M): its image's first input element and the
 * input coordinates of tap (0, 0), h0 = p stride - pad, w0 = q stride - pad.
 * Tap (r, s) reads h0 + r dil, w0 + s dil (zero padding outside). */
struct Pixel {
  long long base; /* n * C*H*W: the image's offset in x (both layouts) */
  int h0, w0;
};

/* a / b for a >= 0, b > 0: a 32-bit division when both fit (a 64-bit one is
 * a long subroutine, and every thread divides for each of its rows) */
__device__ __forceinline__ long long quotient(long long a, long long b) {
  if ((((unsigned long long)a | (unsigned long long)b) >> 32) == 0)
    return (long long)((unsigned)a / (unsigned)b);
  return a / b;
}

__device__ __forceinline__ Pixel pixel_of(const Geom &g, long long m) {
  const long long n = quotient(m, g.PQ);
  const int pq = (int)(m - n * g.PQ);
  const int p = pq / g.Q, q = pq - p * g.Q;
  return {n * g.CHW, p * g.stride - g.pad, q * g.stride - g.pad};
}

/* Offset in out (and in an ADD operand) of output row m, and the step from
 * one channel to the next: NHWC [M, K] row-major, NCHW [N, K, P*Q]. */
__device__ __forceinline__ long long out_row_offset(const Geom &g, long long m) {
  if (g.nhwc)
    return m * g.K;
  const long long n = quotient(m, g.PQ);
  return n * g.K * g.PQ + (m - n * g.PQ);
}
__device__ __forceinline__ long long out_col_step(const Geom &g) { return g.nhwc ? 1 : g.PQ; }

/* The epilogue of conv_<dt> on one float accumulator: FP_EPI_NONE ..
 * FP_EPI_ADD_RELU (fp_epilogue_unpaired, per output channel k; ADD reads
 * v[0] at the output's own index) or FP_CONV_EPI_BN (fpgemm::bn_apply). The kind is
 * uniform over the launch, so its branches cost nothing. */
template <class T> struct Epi {
  int kind;
  float eps;
  const T *v0, *v1, *v2, *v3;

  __device__ __forceinline__ float apply(float acc, int k, long long idx) const {
    if (kind == FP_CONV_EPI_BN)
      return fpgemm::bn_apply(acc, Storage<T>::to_float(v0[k]), Storage<T>::to_float(v1[k]),
                              Storage<T>::to_float(v2[k]), Storage<T>::to_float(v3[k]), eps);
    float extra = 0.0f;
    if (FP_EPI_READS_BIAS(kind))
      extra = Storage<T>::to_float(v0[k]);
    else if (FP_EPI_READS_ADD(kind))
      extra = Storage<T>::to_float(v0[idx]);
    return fp_epilogue_unpaired(kind, acc, extra);
  }
};

template <class T> inline Epi<T> epi_of(const Problem &p) {
  return {p.epilogue,
          p.eps,
          static_cast<const T *>(p.v[0]),
          static_cast<const T *>(p.v[1]),
          static_cast<const T *>(p.v[2]),
          static_cast<const T *>(p.v[3])};
}

/* Block (tm, tn) of a 1-D grid with the channel tiles fastest: the blocks
 * resident at one time share their pixel tiles (the large operand, read
 * once from DRAM) and sweep the filters, which stay in L2. */
__device__ __forceinline__ void tile_of(int tiles_n, long long &tm, int &tn) {
  const long long b = blockIdx.x;
  tm = quotient(b, tiles_n);
  tn = (int)(b - tm * tiles_n);
}

/* ---- the paths (conv.cu plans; conv_sm90.cu, conv_sm80.cu, conv_gather.cu and
 * conv_simt.cu run) ---- */

/* CUDA cores (conv_simt.cu), any dtype, layout and alignment. cfg: its table
 * row. simt_marker: one of its kernels, which marks conv_<dt> present. */
int simt_pick(const Problem &p, int sm_count);
cudaError_t simt_run(const Problem &p, int cfg, cudaStream_t stream);
const char *simt_config_name(int cfg);
int simt_stubs(const void **out, int cap);
const void *simt_marker();

/* Tensor cores (cp.async + ldmatrix + mma.sync), f16/bf16 NHWC with
 * C % 8 == 0 and x, w 16-byte aligned. cfg: conv_sm80.cu's table row. */
bool sm80_eligible(const Problem &p);
int sm80_pick(const Problem &p, int sm_count);
cudaError_t sm80_run(const Problem &p, int cfg, cudaStream_t stream);
const char *sm80_config_name(int cfg);
int sm80_stubs(const void **out, int cap);

/* Tensor cores (ldmatrix + mma.sync, conv_gather.cu) for f16/bf16 NHWC
 * layers with C*R*S <= 256 and any C and alignment: the taps gathered
 * element by element, the whole GEMM-K of a tile in shared memory. One
 * configuration (cfg 0). */
bool gather_eligible(const Problem &p);
cudaError_t gather_run(const Problem &p, int sm_count, cudaStream_t stream);
const char *gather_config_name(int cfg);
int gather_stubs(const void **out, int cap);

/* Hopper tensor cores (conv_sm90.cu, built for sm_90a only: call these
 * under FUSEPORT_GEMM_SM90, on compute capability 9.0): wgmma fed by TMA,
 * the input through an im2col tensor map, f16/bf16 NHWC with C % 64 == 0,
 * K % 8 == 0, x, w 16-byte aligned and a geometry within TMA's im2col
 * limits. cfg: conv_sm90.cu's table row. */
bool sm90_eligible(const Problem &p);
int sm90_pick(const Problem &p, int sm_count);
cudaError_t sm90_run(const Problem &p, int cfg, int sm_count, cudaStream_t stream);
const char *sm90_config_name(int cfg);
int sm90_stubs(const void **out, int cap);

} // namespace fpconv

#endif
