/* fuseport CUDA GEMM core, path SKINNY: the tensor-core kernel of
 * gemm_skinny.cu (f16 / bf16 with 16-byte aligned operands; mma.sync m16n8k16
 * on A padded to 16 rows): its shape (TcShape), its copies of B's k-tiles
 * (TcCopy: whole k-tiles; tc_copy_general: a partial one) and
 * skinny_tc_kernel. The path's description, the 16-byte vectors, the shared
 * tail (split-K and the epilogue: finish), the CUDA-core kernels and the host
 * side are in gemm_skinny.cu.
 *
 * A part of gemm_skinny.cu, not a header of its own: gemm_skinny.cu includes
 * it once, inside namespace fpgemm's anonymous namespace, after the CUDA-core
 * kernels and before the host side.
 */
#ifndef FUSEPORT_GEMM_SKINNY_TC_CUH
#define FUSEPORT_GEMM_SKINNY_TC_CUH

/* ---- f16 / bf16 on tensor cores ------------------------------------------------------
 * With 16-byte aligned operands (a, b, lda, ldb; and N, for a paired
 * row-major B's right half), f16 and bf16 take mma.sync m16n8k16: at M = 16
 * the CUDA cores would need 16 FMAs per 2-byte element of B, more than they
 * issue at memory speed. A is padded to 16 rows (rows >= M are zeros in
 * shared memory, set once), B streams through STAGES cp.async stages of
 * BK x BN (trans_b: BN x BK), swizzled as in the sm80 path; warp w owns
 * tile columns [w * BN / WARPS, ..) over the whole k-tile. The product
 * lands in res[16][BN] (shared) and finish() does split-K and the epilogue.
 * K's partial last k-tile, where a block's range holds it, is copied first
 * (by the general copy); the loop copies whole k-tiles from per-thread
 * constants, a few instructions a 16-byte chunk. */
template <int BN, int BK, int STAGES, int THREADS, bool PAIRED> struct TcShape {
  static constexpr int WARPS = THREADS / 32;
  static constexpr int WCOLS = BN / WARPS; /* tile columns a warp */
  static constexpr int NP = WCOLS / 16;    /* n16 column pairs a warp */
  static constexpr int H = PAIRED ? BN / 2 : BN;
  static constexpr int KSTEPS = BK / 16;
  static constexpr int WA = BK / 8; /* chunks a row of A, and of a trans_b B tile */
  static constexpr int WB = BN / 8; /* chunks a row of a row-major B tile */
  static constexpr int A_BYTES = 16 * BK * 2, B_BYTES = BK * BN * 2;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int SMEM = STAGES * STAGE_BYTES;
  static constexpr int A_CHUNKS = (16 * WA + THREADS - 1) / THREADS;
  static constexpr int B_CHUNKS = BK * BN / 8 / THREADS;
  static constexpr int RS_TB = THREADS / WA; /* tile columns between a thread's chunks */
  static_assert(WCOLS % 16 == 0 && NP >= 1, "warps own n16 pairs");
  static_assert(BK % 16 == 0 && (WA == 4 || WA % 8 == 0) && (WB == 4 || WB % 8 == 0),
                "tile widths");
  static_assert((BK * BN / 8) % THREADS == 0 && THREADS % WB == 0 && THREADS % WA == 0,
                "fixed chunk columns");
  static_assert(!PAIRED || H % RS_TB == 0, "a trans_b chunk's half is fixed");
  static_assert(16 * BN * 4 <= SMEM && STAGES >= 2, "res reuses the stages");
};

/* The block's copies: per-thread constants of whole k-tiles, and the
 * general copy of a partial one. */
template <class T, class S, bool TRANS_B> struct TcCopy {
  const T *pa[S::A_CHUNKS], *pb[S::B_CHUNKS];
  uint32_t a_on; /* bit i: A chunk i is a row < M */
  int b_bytes[S::B_CHUNKS];
  long long b_kstep;

  template <class Epi>
  __device__ __forceinline__ void init(const SkArgs<T, Epi> &args, long long n0, long long k0) {
    const int tid = threadIdx.x;
    a_on = 0;
#pragma unroll
    for (int i = 0; i < S::A_CHUNKS; ++i) {
      const int id = tid + i * (S::WARPS * 32), row = id / S::WA, kc = id % S::WA;
      const bool on = id < 16 * S::WA && row < args.M;
      a_on |= (on ? 1u : 0u) << i;
      pa[i] = args.a + (on ? row * args.lda + k0 + kc * 8 : 0);
    }
#pragma unroll
    for (int i = 0; i < S::B_CHUNKS; ++i) {
      const int id = tid + i * (S::WARPS * 32);
      if constexpr (TRANS_B) {
        const int r = id / S::WA, kc = id % S::WA, part = r >= S::H ? 1 : 0;
        const long long n = n0 + (r - part * S::H);
        const bool ok = n < args.N;
        b_bytes[i] = ok ? 16 : 0; /* past N: row 0's chunk, copying nothing */
        pb[i] = args.b + (ok ? (n + part * args.N) * args.ldb : 0) + k0 + kc * 8;
      } else {
        const int r = id / S::WB, cc = id % S::WB, c = cc * 8, part = c >= S::H ? 1 : 0;
        const long long n = n0 + (c - part * S::H);
        b_bytes[i] = clampn(args.N - n, 8) * 2;
        pb[i] = args.b + (k0 + r) * args.ldb + (b_bytes[i] > 0 ? n + part * args.N : 0);
      }
    }
    b_kstep = TRANS_B ? (long long)S::WA * 8 : (long long)S::WA * 8 * args.ldb;
  }

  /* a whole k-tile into the stage at shared address st, then the next */
  __device__ __forceinline__ void copy(uint32_t st) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < S::A_CHUNKS; ++i) {
      if ((a_on >> i) & 1u) {
        const int id = tid + i * (S::WARPS * 32);
        fpmma::cp_async_16(st + fpmma::swz<S::WA>(id / S::WA, id % S::WA) * 2, pa[i], 16);
      }
      pa[i] += S::WA * 8;
    }
#pragma unroll
    for (int i = 0; i < S::B_CHUNKS; ++i) {
      const int id = tid + i * (S::WARPS * 32);
      const int off = TRANS_B ? fpmma::swz<S::WA>(id / S::WA, id % S::WA)
                              : fpmma::swz<S::WB>(id / S::WB, id % S::WB);
      fpmma::cp_async_16(st + S::A_BYTES + off * 2, pb[i], b_bytes[i]);
      pb[i] += b_kstep;
    }
  }
};

template <class T, class S, bool TRANS_B, class Epi>
__device__ __forceinline__ void tc_copy_general(const SkArgs<T, Epi> &args, uint32_t st,
                                                long long n0, long long k0) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < S::A_CHUNKS; ++i) {
    const int id = tid + i * (S::WARPS * 32), row = id / S::WA, kc = id % S::WA;
    const long long k = k0 + kc * 8;
    if (id < 16 * S::WA && row < args.M) {
      const int bytes = clampn(args.K - k, 8) * 2;
      fpmma::cp_async_16(st + fpmma::swz<S::WA>(row, kc) * 2,
                         bytes > 0 ? args.a + row * args.lda + k : args.a, bytes);
    }
  }
#pragma unroll
  for (int i = 0; i < S::B_CHUNKS; ++i) {
    const int id = tid + i * (S::WARPS * 32);
    if constexpr (TRANS_B) {
      const int r = id / S::WA, kc = id % S::WA, part = r >= S::H ? 1 : 0;
      const long long n = n0 + (r - part * S::H), k = k0 + kc * 8;
      const int bytes = n < args.N ? clampn(args.K - k, 8) * 2 : 0;
      fpmma::cp_async_16(st + S::A_BYTES + fpmma::swz<S::WA>(r, kc) * 2,
                         bytes > 0 ? args.b + (n + part * args.N) * args.ldb + k : args.b, bytes);
    } else {
      const int r = id / S::WB, cc = id % S::WB, c = cc * 8, part = c >= S::H ? 1 : 0;
      const long long n = n0 + (c - part * S::H), k = k0 + r;
      const int bytes = k < args.K ? clampn(args.N - n, 8) * 2 : 0;
      fpmma::cp_async_16(st + S::A_BYTES + fpmma::swz<S::WB>(r, cc) * 2,
                         bytes > 0 ? args.b + k * args.ldb + n + part * args.N : args.b, bytes);
    }
  }
}

template <class T, int BN, int BK, int STAGES, int THREADS, bool TRANS_B, class Epi>
__global__ void __launch_bounds__(THREADS) skinny_tc_kernel(const SkArgs<T, Epi> args) {
  using S = TcShape<BN, BK, STAGES, THREADS, Epi::kPaired>;
  extern __shared__ __align__(128) float tc_smem[]; /* (the CUDA-core kernels' fsmem is 16) */
  float *fsmem = tc_smem;
  char *smem = reinterpret_cast<char *>(fsmem);
  const uint32_t s0 = fpmma::smem_addr(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const long long n0 = (long long)blockIdx.x * S::H;
  long long kb, ke;
  k_range(args.K, args.split_k, BK, kb, ke);
  const int nk = (int)((ke - kb + BK - 1) / BK);
  const bool partial = (ke - kb) % BK != 0; /* the last split's last k-tile, at K's end */

  /* A's rows >= M: zeros in every stage, once (seen after the first barrier) */
  for (int e = tid; e < STAGES * 16 * S::WA; e += THREADS) {
    const int st = e / (16 * S::WA), id = e % (16 * S::WA), row = id / S::WA;
    if (row >= args.M)
      *reinterpret_cast<uint4 *>(smem + st * S::STAGE_BYTES +
                                 fpmma::swz<S::WA>(row, id % S::WA) * 2) =
          make_uint4(0u, 0u, 0u, 0u);
  }

  TcCopy<T, S, TRANS_B> cp;
  cp.init(args, n0, kb);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nk) {
      if (s == 0 && partial)
        tc_copy_general<T, S, TRANS_B>(args, s0, n0, kb + (long long)(nk - 1) * BK);
      else
        cp.copy(s0 + s * S::STAGE_BYTES);
    }
    fpmma::cp_async_commit();
  }

  float acc[S::NP][2][4];
#pragma unroll
  for (int p = 0; p < S::NP; ++p)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[p][h][e] = 0.0f;
  const int wc = warp * S::WCOLS; /* the warp's first tile column */

  for (int it = 0; it < nk; ++it) {
    fpmma::cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int nxt = it + STAGES - 1;
    if (nxt < nk)
      cp.copy(s0 + (nxt % STAGES) * S::STAGE_BYTES);
    fpmma::cp_async_commit();
    const uint32_t st = s0 + (it % STAGES) * S::STAGE_BYTES, sb = st + S::A_BYTES;
#pragma unroll
    for (int ks = 0; ks < S::KSTEPS; ++ks) {
      uint32_t af[4];
      fpmma::ldmatrix_x4(af, st + fpmma::swz<S::WA>(lane & 15, ks * 2 + (lane >> 4)) * 2);
#pragma unroll
      for (int p = 0; p < S::NP; ++p) {
        const int c = wc + p * 16;
        uint32_t b[4];
        if constexpr (TRANS_B)
          fpmma::ldmatrix_x4(b, sb + fpmma::swz<S::WA>(c + (lane & 7) + (lane >> 4) * 8,
                                                       ks * 2 + ((lane >> 3) & 1)) *
                                         2);
        else
          fpmma::ldmatrix_x4_trans(
              b, sb + fpmma::swz<S::WB>(ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                        (c >> 3) + (lane >> 4)) *
                          2);
        fpmma::Mma<T>::run(acc[p][0], af, b[0], b[1]);
        fpmma::Mma<T>::run(acc[p][1], af, b[2], b[3]);
      }
    }
  }
  fpmma::cp_async_wait<0>();
  __syncthreads();    /* the stages are free for res */
  float *res = fsmem; /* [16][BN] */
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int p = 0; p < S::NP; ++p)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int c = wc + p * 16 + h * 8 + 2 * t;
      *reinterpret_cast<float2 *>(res + g * BN + c) = make_float2(acc[p][h][0], acc[p][h][1]);
      *reinterpret_cast<float2 *>(res + (g + 8) * BN + c) = make_float2(acc[p][h][2], acc[p][h][3]);
    }
  __syncthreads();
  finish<T, Epi, 16, BN, THREADS, Epi::kPaired>(res, args, n0);
}

#endif
