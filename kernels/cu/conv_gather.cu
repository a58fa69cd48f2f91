/* fuseport CUDA kernels, family conv, path GATHER: implicit GEMM on tensor
 * cores (ldmatrix + mma.sync m16n8k16, f32 accumulate) for the NHWC f16/bf16
 * layers that the 16-byte loaders of the other tensor-core paths cannot
 * take: few input channels (C % 8 != 0: ResNet's stem, C = 3; C = 1, 17)
 * or x, w not 16-byte aligned, with a GEMM-K (C*R*S) of at most 256. Before
 * it those layers ran on CUDA cores (conv_simt.cu): the stem, 7x7 / 2 with
 * C*R*S = 147, at 0.2-0.3x of cuDNN. Semantics: kernels.def, family conv;
 * the fragment layouts: mma_sm80.cuh; the plan and the other paths: conv.cu.
 *
 * GEMM-M = N*P*Q pixels, GEMM-N = K channels, GEMM-K = C*R*S in NHWC order
 * kk = (r S + s) C + c (conv_common.cuh). The whole GEMM-K of a tile fits in
 * shared memory, so a tile is gathered once and multiplied once; there is
 * no k loop to pipeline:
 *   - B (the filters, w as [K, C*R*S]) for the block's 64 channels is loaded
 *     once: blocks are persistent over the pixel tiles of one channel tile
 *     (grid = channel tiles x as many pixel-tile walkers as fit the GPU);
 *   - a tile's 128 pixels are decomposed once, by 128 threads, into a table
 *     in shared memory (offset of tap (0, 0) in x, h0, w0), not once a
 *     thread and row;
 *   - lane l of a warp gathers columns kk = l + 32 j of a row, 16-bit loads
 *     (no alignment assumed): for a tap row (r fixed) the S*C values are
 *     contiguous in x, so a warp's loads touch a few sectors. Each lane
 *     keeps its columns' offsets from tap (0, 0) and their (r dil, s dil)
 *     in registers; a pixel whose whole window lies inside the image (95%
 *     of the stem's) skips the bounds tests;
 *   - rows are padded by 8 elements (row stride kp + 8 with kp % 16 == 0:
 *     an odd number of 16-byte chunks), so the eight rows an ldmatrix phase
 *     reads fall in eight different bank groups;
 *   - 8 warps, 4 along M x 2 along N, warp tiles of 32 x 32; two blocks an
 *     SM, so one block's gather overlaps the other's multiply and stores.
 * Epilogue: from registers, pairs (k, k + 1) of a pixel stored as one word
 * where out's alignment allows. Per-channel kinds (bias, relu, batch-norm)
 * as one fma with the channel's (scale, shift), computed once a block
 * (EPI_COLUMN below); a residual through fpconv::Epi per element, all
 * values before any store, as in conv_sm80.cu.
 */
#include <limits.h>
#include <stdint.h>

#include "conv_common.cuh"
#include "mma_sm80.cuh"

namespace fpconv {

namespace {

using namespace fpmma;

constexpr int kBM = 128, kBN = 64;    /* tile: pixels x channels */
constexpr int kThreads = 256;         /* 8 warps */
constexpr int kWarps = kThreads / 32; /* 4 along M (32 rows) x 2 along N (32 channels) */
constexpr int kMaxK = 256;            /* GEMM-K the shared tile holds */
constexpr int kJ = kMaxK / 32;        /* columns a lane gathers a row */
constexpr int kPadCols = 8;           /* the row pad (16 bytes), see above */
constexpr int kFar = -(1 << 30);      /* h0 of a row past M: every tap tests outside */

struct PixSlot {
  long long off; /* x offset of the pixel's tap (0, 0) (may be negative at edges) */
  int h0, w0;
};

template <class T> struct Args {
  T *out;
  const T *x, *w;
  Geom g;
  Epi<T> epi;
  long long tiles_m;
  int kp;            /* GEMM-K rounded up to 16 (one mma k-step) */
  int h_in, w_in;    /* a pixel with 0 <= h0 <= h_in, 0 <= w0 <= w_in reads no padding */
  int pairs_aligned; /* out 4-byte aligned and K even: each pair (k, k + 1), k even, is a word */
};

/* x[i] if ok, else 0 without reading: a predicated load into a zeroed
 * register, so that nothing waits for it before the value's first use. */
__device__ __forceinline__ uint16_t load_or_zero(const uint16_t *p, unsigned ok) {
  uint16_t v;
  asm("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %2, 0;\n\tmov.u16 %0, 0;\n\t"
      "@q ld.global.nc.u16 %0, [%1];\n\t}"
      : "=h"(v)
      : "l"(p), "r"(ok));
  return v;
}

/* The epilogue by kind: COLUMN is v = fma(acc, scale, shift) per channel,
 * then relu where asked (none, bias, relu, bias + relu, batch-norm: the
 * channels' (scale, shift) computed once a block into shared memory;
 * batch-norm folded as the GEMM core's epilogue folds it, scale = gamma /
 * sqrt(var + eps), shift = beta - mean scale); GENERIC is fpconv::Epi per
 * element (a residual: ADD, ADD_RELU). */
enum EpiMode { EPI_COLUMN = 0, EPI_GENERIC = 1 };

template <class T, int JN, int MODE>
__global__ void __launch_bounds__(kThreads, 2) conv_gather_kernel(const Args<T> args) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Geom &g = args.g;
  const int kp = args.kp, ld = kp + kPadCols;
  uint16_t *As = reinterpret_cast<uint16_t *>(smem);
  uint16_t *Bs = As + kBM * ld;
  PixSlot *pix = reinterpret_cast<PixSlot *>(Bs + kBN * ld); /* 16-byte aligned: ld % 8 == 0 */
  float2 *cols = reinterpret_cast<float2 *>(pix + kBM);      /* COLUMN: (scale, shift) */
  const uint16_t *xb = reinterpret_cast<const uint16_t *>(args.x);
  const uint16_t *wb = reinterpret_cast<const uint16_t *>(args.w);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = blockIdx.y * kBN;
  const int kg = (int)g.KG;

  /* this lane's columns kk = lane + 32 j (JN = ceil(kp / 32) of them): the
   * offset from tap (0, 0) and the tap's (r dil, s dil), packed 16 + 16 bits
   * (conv.cu admits (R-1) dil, (S-1) dil < 2^15). Columns past C*R*S keep
   * offset 0 (a readable element of any pixel inside the image) and load 0. */
  long long toff_bytes[JN];
  unsigned dhw[JN];
  unsigned kmask = 0; /* bit j: column lane + 32 j is a tap */
#pragma unroll
  for (int j = 0; j < JN; ++j) {
    const int kk = lane + 32 * j;
    toff_bytes[j] = 0;
    dhw[j] = 0;
    if (kk < kg) {
      const int rs = kk / g.C, c = kk - rs * g.C;
      const int r = rs / g.S, s = rs - r * g.S;
      toff_bytes[j] = 2 * (long long)((r * g.dil * g.W + s * g.dil) * g.C + c);
      dhw[j] = ((unsigned)(r * g.dil) << 16) | (unsigned)(s * g.dil);
      kmask |= 1u << j;
    }
  }

  /* B: the block's 64 filters, once */
  for (int i = warp; i < kBN; i += kWarps) {
    const int n = n0 + i;
#pragma unroll
    for (int j = 0; j < JN; ++j) {
      const int kk = lane + 32 * j;
      if (kk < kp) {
        uint16_t v = 0;
        if (n < g.K && kk < kg)
          v = __ldg(wb + (long long)n * kg + kk);
        Bs[i * ld + kk] = v;
      }
    }
  }

  const int wm = warp >> 1, wn = warp & 1;
  const uint32_t a_base =
      smem_addr(As) + (uint32_t)(((wm * 32 + (lane & 15)) * ld + (lane >> 4) * 8) * 2);
  const uint32_t b_base =
      smem_addr(Bs) +
      (uint32_t)(((wn * 32 + (lane & 7) + (lane >> 4) * 8) * ld + ((lane >> 3) & 1) * 8) * 2);
  const int gq = lane >> 2, t = lane & 3;
  const int k_first = n0 + wn * 32 + 2 * t; /* the thread's channels: k_first + 8 ni (+ 1) */

  /* COLUMN: the block's channels' (scale, shift), read after the first
   * barrier of the tile loop */
  const int kind = args.epi.kind;
  const bool relu = kind == FP_EPI_RELU || kind == FP_EPI_BIAS_RELU;
  if (MODE == EPI_COLUMN && threadIdx.x < kBN) {
    const int k = n0 + threadIdx.x;
    float2 c = make_float2(1.0f, -0.0f); /* acc + -0 is acc, -0 included */
    if (k < g.K && kind == FP_CONV_EPI_BN) {
      c.x = Storage<T>::to_float(args.epi.v2[k]) *
            rsqrtf(Storage<T>::to_float(args.epi.v1[k]) + args.epi.eps);
      c.y = Storage<T>::to_float(args.epi.v3[k]) - Storage<T>::to_float(args.epi.v0[k]) * c.x;
    } else if (k < g.K && FP_EPI_READS_BIAS(kind)) {
      c.y = Storage<T>::to_float(args.epi.v0[k]); /* fma(acc, 1, bias) is acc + bias */
    }
    cols[threadIdx.x] = c;
  }

  constexpr int kRows = JN <= 5 ? 8 : 4; /* rows a warp loads before it stores them */
  for (long long tm = blockIdx.x; tm < args.tiles_m; tm += gridDim.x) {
    const long long m0 = tm * kBM;
    __syncthreads(); /* the last tile's reads of As and pix are done (and B is in) */
    if (threadIdx.x < kBM) {
      const long long m = m0 + threadIdx.x;
      PixSlot ps{0, kFar, kFar};
      if (m < g.M) {
        const Pixel px = pixel_of(g, m);
        ps.off = px.base + ((long long)px.h0 * g.W + px.w0) * g.C;
        ps.h0 = px.h0;
        ps.w0 = px.w0;
      }
      pix[threadIdx.x] = ps;
    }
    __syncthreads();

    /* ---- gather: warp w owns rows w, w + 8, ...; kRows rows' loads are
     * issued before their stores. A row's bounds tests only clear bits of
     * its load mask, and the loads come after the branch, so that no load
     * is waited for before the stores (a select after each load inside the
     * branch made every row wait for its own). ---- */
    for (int i0 = 0; i0 < kBM / kWarps; i0 += kRows) {
      uint16_t v[kRows][JN];
#pragma unroll
      for (int u = 0; u < kRows; ++u) {
        const PixSlot ps = pix[warp + kWarps * (i0 + u)];
        unsigned ok = kmask; /* bit j: load column j */
        if (ps.h0 < 0 || ps.h0 > args.h_in || ps.w0 < 0 || ps.w0 > args.w_in) {
#pragma unroll
          for (int j = 0; j < JN; ++j) {
            const int h = ps.h0 + (int)(dhw[j] >> 16), w = ps.w0 + (int)(dhw[j] & 0xffffu);
            if ((unsigned)h >= (unsigned)g.H || (unsigned)w >= (unsigned)g.W)
              ok &= ~(1u << j);
          }
        }
        const char *row = reinterpret_cast<const char *>(xb + ps.off);
#pragma unroll
        for (int j = 0; j < JN; ++j) /* byte offsets: one 64-bit add an element */
          v[u][j] =
              load_or_zero(reinterpret_cast<const uint16_t *>(row + toff_bytes[j]), ok & (1u << j));
      }
#pragma unroll
      for (int u = 0; u < kRows; ++u) {
        uint16_t *dst = As + (warp + kWarps * (i0 + u)) * ld;
#pragma unroll
        for (int j = 0; j < JN; ++j)
          if (lane + 32 * j < kp)
            dst[lane + 32 * j] = v[u][j];
      }
    }
    __syncthreads();

    /* ---- multiply: the tile's whole K ---- */
    float acc[2][4][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[mi][ni][e] = 0.0f;
    for (int k0 = 0; k0 < kp; k0 += 16) {
      uint32_t af[2][4], bf[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        ldmatrix_x4(af[mi], a_base + (uint32_t)((mi * 16 * ld + k0) * 2));
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) {
        uint32_t q[4];
        ldmatrix_x4(q, b_base + (uint32_t)((nj * 16 * ld + k0) * 2));
        bf[2 * nj][0] = q[0];
        bf[2 * nj][1] = q[1];
        bf[2 * nj + 1][0] = q[2];
        bf[2 * nj + 1][1] = q[3];
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          Mma<T>::run(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    }

    /* ---- epilogue (registers only: the next tile's gather may begin) ---- */
    if (MODE == EPI_GENERIC) {
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const long long m = m0 + wm * 32 + mi * 16 + gq + 8 * h;
#pragma unroll
          for (int ni = 0; ni < 4; ++ni) {
            const int k = k_first + 8 * ni;
            if (m < g.M && k < g.K) {
              const long long idx = m * g.K + k; /* out is [M, K] row-major */
              acc[mi][ni][2 * h] = args.epi.apply(acc[mi][ni][2 * h], k, idx);
              if (k + 1 < g.K)
                acc[mi][ni][2 * h + 1] = args.epi.apply(acc[mi][ni][2 * h + 1], k + 1, idx + 1);
            }
          }
        }
    } else {
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const float4 c = *reinterpret_cast<const float4 *>(cols + (k_first - n0) + 8 * ni);
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float v = fmaf(acc[mi][ni][e], e & 1 ? c.z : c.x, e & 1 ? c.w : c.y);
            /* fp_epilogue_unpaired's relu: NaN passes, -0 and below become 0 */
            acc[mi][ni][e] = relu && !(v > 0.0f) && v == v ? 0.0f : v;
          }
      }
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const long long m = m0 + wm * 32 + mi * 16 + gq + 8 * h;
        if (m >= g.M)
          continue;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const int k = k_first + 8 * ni;
          const float2 pair = make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
          if (args.pairs_aligned && k + 1 < g.K)
            *reinterpret_cast<uint32_t *>(args.out + m * g.K + k) = pack2<T>(pair.x, pair.y);
          else if (k < g.K)
            fpgemm::store_pair(args.out, g.K, m, k, pair, k + 1 < g.K);
        }
      }
  }
}

int smem_bytes(int kp) {
  return (kBM + kBN) * (kp + kPadCols) * 2 + kBM * (int)sizeof(PixSlot) + kBN * (int)sizeof(float2);
}

template <class T, int JN, int MODE>
cudaError_t launch(const Problem &p, int sm_count, cudaStream_t stream) {
  Args<T> a;
  a.out = static_cast<T *>(p.out);
  a.x = static_cast<const T *>(p.x);
  a.w = static_cast<const T *>(p.w);
  a.g = geom_of(p);
  a.epi = epi_of<T>(p);
  a.kp = (int)((p.gemm_k() + 15) / 16 * 16);
  a.h_in = (int)(p.H - 1 - (p.R - 1) * p.dil);
  a.w_in = (int)(p.W - 1 - (p.S - 1) * p.dil);
  a.pairs_aligned = (reinterpret_cast<uintptr_t>(p.out) & 3u) == 0 && p.K % 2 == 0;
  a.tiles_m = (a.g.M + kBM - 1) / kBM;
  const int tiles_n = (int)((p.K + kBN - 1) / kBN);
  const int smem = smem_bytes(a.kp);
  auto kernel = conv_gather_kernel<T, JN, MODE>;
  cudaError_t err = fpgemm::set_smem(kernel, smem);
  if (err != cudaSuccess)
    return err;
  int per_sm = 0;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, (size_t)smem);
  if (err != cudaSuccess)
    return err;
  /* enough pixel-tile walkers a channel tile to fill the resident slots */
  long long walkers =
      ((long long)(per_sm > 0 ? per_sm : 1) * (sm_count > 0 ? sm_count : 1) + tiles_n - 1) /
      tiles_n;
  if (walkers > a.tiles_m)
    walkers = a.tiles_m;
  if (walkers < 1)
    walkers = 1;
  kernel<<<dim3((unsigned)walkers, (unsigned)tiles_n), kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

/* JN = ceil(C*R*S / 32) (gather columns a lane, 1..kJ), by recursion over
 * the instantiations */
template <class T, int MODE, int JN = 1>
cudaError_t run_jn(const Problem &p, int sm_count, cudaStream_t st) {
  if constexpr (JN < kJ)
    if ((p.gemm_k() + 31) / 32 > JN)
      return run_jn<T, MODE, JN + 1>(p, sm_count, st);
  return launch<T, JN, MODE>(p, sm_count, st);
}

template <class T> cudaError_t run_t(const Problem &p, int sm_count, cudaStream_t st) {
  const bool column = !FP_EPI_READS_ADD(p.epilogue);
  return column ? run_jn<T, EPI_COLUMN>(p, sm_count, st) : run_jn<T, EPI_GENERIC>(p, sm_count, st);
}

template <class T, int MODE, int JN = 1> void stubs_t(const void **out, int &n) {
  out[n++] = reinterpret_cast<const void *>(&conv_gather_kernel<T, JN, MODE>);
  if constexpr (JN < kJ)
    stubs_t<T, MODE, JN + 1>(out, n);
}

} // namespace

bool gather_eligible(const Problem &p) {
  if (p.dtype == Storage<float>::kDtype || !p.nhwc || p.gemm_k() > kMaxK)
    return false;
  /* the lane's packed (r dil, s dil) and int tap offsets; grid.y */
  const long long dh = (p.R - 1) * p.dil, dw = (p.S - 1) * p.dil;
  return dh < (1 << 15) && dw < (1 << 15) && (dh * p.W + dw + 1) * p.C < INT_MAX &&
         (p.K + kBN - 1) / kBN <= 65535;
}

cudaError_t gather_run(const Problem &p, int sm_count, cudaStream_t stream) {
  return p.dtype == Storage<__nv_bfloat16>::kDtype ? run_t<__nv_bfloat16>(p, sm_count, stream)
                                                   : run_t<__half>(p, sm_count, stream);
}

const char *gather_config_name(int cfg) { return cfg == 0 ? "128x64, whole K" : "?"; }

int gather_stubs(const void **out, int cap) {
  const void *mine[2 * 2 * kJ]; /* dtypes x epilogue modes x JN */
  int n = 0;
  stubs_t<__half, EPI_COLUMN>(mine, n);
  stubs_t<__half, EPI_GENERIC>(mine, n);
  stubs_t<__nv_bfloat16, EPI_COLUMN>(mine, n);
  stubs_t<__nv_bfloat16, EPI_GENERIC>(mine, n);
  return fpgemm::copy_stubs(mine, out, cap);
}

} // namespace fpconv
