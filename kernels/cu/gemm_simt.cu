/* fuseport CUDA GEMM core, path SIMT: float32 on CUDA cores, true float FMA
 * (fmaf, no TF32), any alignment. Semantics: kernels.def, family gemm; the
 * interface: gemm_common.cuh; the rows: gemm_simt_configs.h.
 *
 * Register blocking: a block owns a BM x BN tile, each thread 8 x 8 outputs
 * split as 2 x 2 quads of 4 x 4 (rows ty*4.. and BM/2 + ty*4.., columns
 * tx*4.. and BN/2 + tx*4..), so every k-step costs two LDS.128 of A and two
 * of B for 64 FFMA. The lanes of a warp form a 4 x 8 (ty x tx) patch: an
 * A read touches 64 contiguous bytes and a B read 128 (one wavefront
 * each).
 * Shared memory holds A transposed (As[k][m], rows padded by 4 floats so the
 * transposing scalar stores do not conflict) and B as [k][n] (padded alike;
 * trans_b transposes like A). Two buffers: the next k-tile is loaded into
 * registers while the current one is multiplied, then stored to the other
 * buffer at the tile's last k-step; one barrier per k-tile. The fragments
 * are double-buffered in registers too: step k + 1's are read from shared
 * memory (across the k-tile boundary as well) while step k's FMAs run.
 * Alignment: a kernel variant (VEC) loads 16-byte vectors when a, b (and d)
 * are 16-byte aligned and their leading dimensions multiples of 4 (and, for
 * a paired row-major B, N too, where its right half starts); vectors that
 * cross an edge and the other variant load predicated scalars.
 * Paired epilogues: a thread's column quads sit at tile columns c and
 * BN/2 + c, i.e. B columns n0 + c (left) and N + n0 + c (right) of the
 * paired tile, so both accumulators of a pair are in its registers.
 * Split-K: gemm_common.cuh's serial scheme (see gemm_sm80.cu; the last
 * block zeroes the slices as it sums them).
 * gemm2 (B2B row): the intermediate stays on chip for N <= BN: phase 1
 * computes c[BM, N] into registers and stores it transposed (Ct[n][m], the
 * A layout of the main loop) in shared memory; phase 2 streams d in BK x BN
 * tiles and multiplies from there, P tile by P tile. p.ws is not used.
 */
#include <limits.h>
#include <stdint.h> /* gemm_common.cuh uses uintptr_t */

#include <type_traits>

#include "gemm_common.cuh"
#include "gemm_simt_configs.h"

namespace fpgemm {

cudaError_t simt_run(const Problem &p, const Config &c, cudaStream_t stream);
cudaError_t simt_run2(const Problem2 &p, const Config &c, cudaStream_t stream);
int simt_kernel_stubs(const void **out, int cap);

namespace {

template <int BM_, int BN_, int BK_, int THREADS_, bool PAIRED_> struct STile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, THREADS = THREADS_;
  static constexpr bool PAIRED = PAIRED_;
  static constexpr int TY = BM / 8, TX = BN / 8; /* threads along M and N */
  static constexpr int WX = TX / 8;              /* warps along N (8 lanes each) */
  static constexpr int AS = BM + 4, BS = BN + 4; /* padded row strides */
  static constexpr int A_STAGE = BK * AS, B_STAGE = BK * BS;
  static constexpr int SMEM = 2 * (A_STAGE + B_STAGE) * 4;
  static constexpr int A_LOADS = BM * BK / 4 / THREADS; /* float4 a thread a k-tile */
  static constexpr int B_LOADS = BK * BN / 4 / THREADS;
  static constexpr int H = PAIRED ? BN / 2 : BN;
  /* 256 threads: one block an SM, up to 255 registers (at two blocks' 128,
   * ptxas rebuilt the loaders' pointers every k-tile: 130 instructions a
   * k-tile beside 512 FMAs, 37 TFLOP/s against 41); smaller blocks: 12
   * warps an SM (170 registers). The scalar (unaligned) variants take what
   * they need: their predicated loads would spill at 128. */
  static constexpr int MIN_BLOCKS = THREADS >= 256 ? 1 : 384 / THREADS;
  static_assert(TY * TX == THREADS, "8 x 8 outputs a thread");
  static_assert(TX % 8 == 0 && TY % 4 == 0, "warps of 4 x 8 threads");
  static_assert(BK % 4 == 0 && A_LOADS >= 1 && B_LOADS >= 1, "copy split");
  static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "copy split");
  static_assert(H % 4 == 0, "vectors do not straddle the halves");
  static_assert(BK % 2 == 0, "fragment buffers alternate across k-tiles");
};

__device__ __forceinline__ int clamp4(long long n) { return n <= 0 ? 0 : (n >= 4 ? 4 : (int)n); }

/* Up to 4 contiguous floats from p (`valid` of them; zeros after). */
template <bool VEC> __device__ __forceinline__ float4 load4(const float *p, int valid) {
  if (VEC && valid == 4)
    return __ldg(reinterpret_cast<const float4 *>(p));
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (valid > 0)
    v.x = __ldg(p);
  if (valid > 1)
    v.y = __ldg(p + 1);
  if (valid > 2)
    v.z = __ldg(p + 2);
  if (valid > 3)
    v.w = __ldg(p + 3);
  return v;
}

/* Loader of a tile whose rows are contiguous along k (A [M, K], or trans_b B
 * [NB, K]): ROWS x BK, stored transposed ([k][row], stride S). Rows past the
 * operand point at a valid row (their products only reach outputs that are
 * never stored), so whole k-tiles load without predicates; the partial
 * k-tile and the scalar variant use load_pred, which zero-fills. */
template <int ROWS, int BK, int THREADS, int S> struct KRowLoader {
  static constexpr int L = ROWS * BK / 4 / THREADS;
  static_assert(THREADS % (BK / 4) == 0, "a thread's k offset is the same in every load");
  const float *ptr[L]; /* row (clamped) at k = kq * 4 */
  bool ok[L];          /* the row exists */
  float4 reg[L];

  /* row_map(r, src) -> whether tile row r exists; src: its source row (a
   * valid one when it does not) */
  template <class RowMap>
  __device__ __forceinline__ void init(const float *base, long long ld, RowMap row_map) {
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int r = (threadIdx.x + l * THREADS) / (BK / 4);
      long long src;
      ok[l] = row_map(r, src);
      ptr[l] = base + src * ld + (threadIdx.x % (BK / 4)) * 4;
    }
  }
  /* a whole k-tile at k0 (VEC only) */
  __device__ __forceinline__ void load_full(long long k0) {
#pragma unroll
    for (int l = 0; l < L; ++l)
      reg[l] = __ldg(reinterpret_cast<const float4 *>(ptr[l] + k0));
  }
  template <bool VEC> __device__ __forceinline__ void load_pred(long long k0, long long K) {
    const long long k = k0 + (threadIdx.x % (BK / 4)) * 4;
#pragma unroll
    for (int l = 0; l < L; ++l)
      reg[l] = load4<VEC>(ptr[l] + k0, ok[l] ? clamp4(K - k) : 0);
  }
  __device__ __forceinline__ void store(float *s) const {
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int r = (threadIdx.x + l * THREADS) / (BK / 4), kq = threadIdx.x % (BK / 4);
      s[(kq * 4 + 0) * S + r] = reg[l].x;
      s[(kq * 4 + 1) * S + r] = reg[l].y;
      s[(kq * 4 + 2) * S + r] = reg[l].z;
      s[(kq * 4 + 3) * S + r] = reg[l].w;
    }
  }
};

/* Loader of a row-major tile with k along rows (B [K, NB], d [N, P]):
 * BK x COLS, stored as [k][col] (stride S). Tile columns c..c+3 come from
 * one 4-column run of the source; runs past the edge are zero-filled. */
template <int COLS, int BK, int THREADS, int S> struct KColLoader {
  static constexpr int L = BK * COLS / 4 / THREADS;
  const float *ptr[L]; /* row r of the tile at k = 0, its run (clamped) */
  int cvalid[L];       /* columns of the run inside the operand (0..4) */
  float4 reg[L];
  long long ld;

  /* col_map(c, src) -> columns valid from tile column c (0..4); src: the
   * run's source column (a valid, 4-aligned run when none is) */
  template <class ColMap>
  __device__ __forceinline__ void init(const float *base, long long ld_, ColMap col_map) {
    ld = ld_;
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int id = threadIdx.x + l * THREADS;
      const int r = id / (COLS / 4), cq = id % (COLS / 4);
      long long src;
      cvalid[l] = col_map(cq * 4, src);
      ptr[l] = base + (long long)r * ld + src;
    }
  }
  /* a whole k-tile (VEC only); runs that cross N still load element-wise,
   * so nothing past the operand's last column is read */
  __device__ __forceinline__ void load_full(long long k0) {
    const long long off = k0 * ld;
#pragma unroll
    for (int l = 0; l < L; ++l)
      reg[l] = load4<true>(ptr[l] + off, cvalid[l]);
  }
  template <bool VEC> __device__ __forceinline__ void load_pred(long long k0, long long K) {
    const long long off = k0 * ld;
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int r = (threadIdx.x + l * THREADS) / (COLS / 4);
      reg[l] = load4<VEC>(ptr[l] + off, k0 + r < K ? cvalid[l] : 0);
    }
  }
  __device__ __forceinline__ void store(float *s) const {
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int id = threadIdx.x + l * THREADS;
      const int r = id / (COLS / 4), cq = id % (COLS / 4);
      *reinterpret_cast<float4 *>(s + r * S + cq * 4) = reg[l];
    }
  }
};

/* The thread's place in the block: rows ty*4.. (+BM/2), columns tx*4.. (+BN/2). */
template <class TL> struct Place {
  int ty, tx;
  __device__ __forceinline__ Place() {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    ty = (warp / TL::WX) * 4 + (lane >> 3);
    tx = (warp % TL::WX) * 8 + (lane & 7);
  }
  __device__ __forceinline__ int row(int i) const {
    return i < 4 ? ty * 4 + i : TL::BM / 2 + ty * 4 + (i - 4);
  }
  __device__ __forceinline__ int col(int j) const {
    return j < 4 ? tx * 4 + j : TL::BN / 2 + tx * 4 + (j - 4);
  }
};

/* acc += As[k][rows] * Bs[k][cols] over the BK k-steps of a tile. */
template <class TL>
__device__ __forceinline__ void compute_tile(const float *As, const float *Bs, const Place<TL> &pl,
                                             float (&acc)[8][8]) {
#pragma unroll
  for (int k = 0; k < TL::BK; ++k) {
    const float4 a0 = *reinterpret_cast<const float4 *>(As + k * TL::AS + pl.ty * 4);
    const float4 a1 = *reinterpret_cast<const float4 *>(As + k * TL::AS + TL::BM / 2 + pl.ty * 4);
    const float4 b0 = *reinterpret_cast<const float4 *>(Bs + k * TL::BS + pl.tx * 4);
    const float4 b1 = *reinterpret_cast<const float4 *>(Bs + k * TL::BS + TL::BN / 2 + pl.tx * 4);
    const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j)
        acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
  }
}

template <class T, class Epi> struct SimtArgs {
  float *out;
  const float *a, *b;
  void *ws;
  long long M, N, K, lda, ldb;
  int tiles_m, tiles_n, split_k;
  typename Epi::Params ep;
};

/* acc = A[m0.., k-tiles kt0..kt1) * B[.., tile columns] (the main loop). The
 * partial k-tile (K % BK != 0), when this range holds it, goes first, so the
 * steady state of the VEC variant loads whole tiles without predicates. */
template <class TL, bool TRANS_B, bool VEC>
__device__ __forceinline__ void
simt_mainloop(const float *a, const float *b, long long M, long long N, long long K, long long lda,
              long long ldb, long long m0, long long n0, int kt0, int kt1, float *smem,
              const Place<TL> &pl, float (&acc)[8][8]) {
  if (kt0 >= kt1)
    return;
  KRowLoader<TL::BM, TL::BK, TL::THREADS, TL::AS> la;
  la.init(a, lda, [&](int r, long long &src) {
    src = m0 + r < M ? m0 + r : M - 1;
    return m0 + r < M;
  });
  using BLoader =
      typename std::conditional<TRANS_B, KRowLoader<TL::BN, TL::BK, TL::THREADS, TL::BS>,
                                KColLoader<TL::BN, TL::BK, TL::THREADS, TL::BS>>::type;
  BLoader lb;
  if constexpr (TRANS_B) {
    lb.init(b, ldb, [&](int r, long long &src) {
      const int part = r >= TL::H ? 1 : 0;
      const long long n = n0 + (r - part * TL::H);
      src = (n < N ? n : N - 1) + part * N;
      return n < N;
    });
  } else {
    lb.init(b, ldb, [&](int c, long long &src) {
      const int part = c >= TL::H ? 1 : 0;
      const long long n = n0 + (c - part * TL::H);
      src = (n < N ? n : (N - 1) / 4 * 4) + part * N;
      return clamp4(N - n);
    });
  }

  constexpr int STAGE = TL::A_STAGE + TL::B_STAGE;
  const bool tail = (long long)kt1 * TL::BK > K;
  {
    const long long k0 = (long long)(tail ? kt1 - 1 : kt0) * TL::BK;
    la.template load_pred<VEC>(k0, K);
    lb.template load_pred<VEC>(k0, K);
  }
  la.store(smem);
  lb.store(smem + TL::A_STAGE);
  __syncthreads();

  /* fragments of k-step k in f*[k & 1]: the next step's are read from shared
   * memory while this step's FMAs run; the next k-tile's global loads are in
   * flight during the whole tile and reach the other buffer at its last
   * step, before the tile's only barrier */
  float4 fa[2][2], fb[2][2];
  auto frags = [&](const float *st, int k, float4(&a2)[2], float4(&b2)[2]) {
    a2[0] = *reinterpret_cast<const float4 *>(st + k * TL::AS + pl.ty * 4);
    a2[1] = *reinterpret_cast<const float4 *>(st + k * TL::AS + TL::BM / 2 + pl.ty * 4);
    b2[0] = *reinterpret_cast<const float4 *>(st + TL::A_STAGE + k * TL::BS + pl.tx * 4);
    b2[1] =
        *reinterpret_cast<const float4 *>(st + TL::A_STAGE + k * TL::BS + TL::BN / 2 + pl.tx * 4);
  };
  /* the paired variants of smaller blocks keep one set: two would not fit
   * their 170 registers */
  constexpr bool DB = !TL::PAIRED || TL::MIN_BLOCKS == 1;
  if constexpr (DB)
    frags(smem, 0, fa[0], fb[0]);
  const int n = kt1 - kt0;
  for (int i = 0; i < n; ++i) {
    const bool more = i + 1 < n;
    const float *cur = smem + (i & 1) * STAGE;
    float *nxt = smem + ((i & 1) ^ 1) * STAGE;
    if (more) {
      const long long k0 = (long long)(tail ? kt0 + i : kt0 + i + 1) * TL::BK;
      if constexpr (VEC) {
        la.load_full(k0);
        lb.load_full(k0);
      } else {
        la.template load_pred<false>(k0, K);
        lb.template load_pred<false>(k0, K);
      }
    }
#pragma unroll
    for (int k = 0; k < TL::BK; ++k) {
      if constexpr (!DB)
        frags(cur, k, fa[0], fb[0]); /* before the barrier: the buffer is rewritten after it */
      if (k == TL::BK - 1) {
        if (more) {
          la.store(nxt);
          lb.store(nxt + TL::A_STAGE);
        }
        __syncthreads();
      }
      if constexpr (DB) {
        if (k + 1 < TL::BK)
          frags(cur, k + 1, fa[(k + 1) & 1], fb[(k + 1) & 1]);
        else if (more)
          frags(nxt, 0, fa[(k + 1) & 1], fb[(k + 1) & 1]);
      }
      const float4 *A4 = fa[DB ? k & 1 : 0], *B4 = fb[DB ? k & 1 : 0];
      const float a[8] = {A4[0].x, A4[0].y, A4[0].z, A4[0].w, A4[1].x, A4[1].y, A4[1].z, A4[1].w};
      const float b[8] = {B4[0].x, B4[0].y, B4[0].z, B4[0].w, B4[1].x, B4[1].y, B4[1].z, B4[1].w};
#pragma unroll
      for (int ii = 0; ii < 8; ++ii)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          acc[ii][j] = fmaf(a[ii], b[j], acc[ii][j]);
    }
  }
}

/* Serial split-K (gemm_common.cuh): true when this block arrived last, acc
 * then holding slices 0..nsplit-1 summed in order. smem[0] holds the flag
 * (free: the main loop ended with a barrier). */
template <class TL>
__device__ __forceinline__ bool split_reduce(void *ws, long long tiles, long long tile, int split,
                                             int nsplit, const Place<TL> &pl, float (&acc)[8][8],
                                             float *smem) {
  int &s_last = *reinterpret_cast<int *>(smem);
  float *mine = split_slice(ws, tiles, tile, split, TL::BM, TL::BN);
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      __stcg(reinterpret_cast<float4 *>(mine + pl.row(i) * TL::BN + pl.col(4 * h)),
             make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]));
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    s_last = atomicAdd(split_counters(ws) + tile, 1u) == (unsigned)(nsplit - 1);
  __syncthreads();
  if (!s_last)
    return false;
  __threadfence();
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int s = 0; s < nsplit; ++s) {
        float4 *q = reinterpret_cast<float4 *>(split_slice(ws, tiles, tile, s, TL::BM, TL::BN) +
                                               pl.row(i) * TL::BN + pl.col(4 * h));
        const float4 v = __ldcg(q);
        __stcg(q, make_float4(0.0f, 0.0f, 0.0f, 0.0f)); /* the workspace is left zeroed */
        sum = s == 0 ? v : make_float4(sum.x + v.x, sum.y + v.y, sum.z + v.z, sum.w + v.w);
      }
      acc[i][4 * h] = sum.x;
      acc[i][4 * h + 1] = sum.y;
      acc[i][4 * h + 2] = sum.z;
      acc[i][4 * h + 3] = sum.w;
    }
  if (threadIdx.x == 0)
    split_counters(ws)[tile] = 0u;
  return true;
}

__device__ __forceinline__ void tile_of(int pid, int tiles_m, int tiles_n, int &tm, int &tn) {
  constexpr int G = 8; /* groups of 8 tile rows share B's column tiles in L2 */
  const int width = G * tiles_n;
  const int first = (pid / width) * G;
  const int rows = tiles_m - first < G ? tiles_m - first : G;
  tm = first + (pid % width) % rows;
  tn = (pid % width) / rows;
}

template <class TL, bool TRANS_B, bool VEC, class Epi>
__global__ void __launch_bounds__(TL::THREADS, VEC ? TL::MIN_BLOCKS : 1)
    simt_gemm_kernel(const SimtArgs<float, Epi> args) {
  extern __shared__ __align__(16) float fsmem[];
  int tm, tn;
  tile_of(blockIdx.x, args.tiles_m, args.tiles_n, tm, tn);
  const long long m0 = (long long)tm * TL::BM, n0 = (long long)tn * TL::H;
  const int nk = (int)((args.K + TL::BK - 1) / TL::BK);
  int kt0 = 0, kt1 = nk;
  if (args.split_k > 1) {
    const int per = (nk + args.split_k - 1) / args.split_k;
    kt0 = min(nk, (int)blockIdx.y * per);
    kt1 = min(nk, kt0 + per);
  }
  const Place<TL> pl;
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
      acc[i][j] = 0.0f;
  simt_mainloop<TL, TRANS_B, VEC>(args.a, args.b, args.M, args.N, args.K, args.lda, args.ldb, m0,
                                  n0, kt0, kt1, fsmem, pl, acc);
  if (args.split_k > 1) {
    const long long tiles = (long long)args.tiles_m * args.tiles_n;
    if (!split_reduce<TL>(args.ws, tiles, (long long)tm * args.tiles_n + tn, blockIdx.y,
                          args.split_k, pl, acc, fsmem))
      return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const long long row = m0 + pl.row(i);
    if (row >= args.M)
      continue;
    constexpr int NP = TL::PAIRED ? 2 : 4; /* column pairs */
#pragma unroll
    for (int q = 0; q < NP; ++q) {
      const int j = 2 * q;
      const long long col = n0 + pl.col(j);
      if (col >= args.N)
        continue;
      const bool second = col + 1 < args.N;
      const float2 left = make_float2(acc[i][j], acc[i][j + 1]);
      float2 v;
      if constexpr (Epi::kPaired)
        v = Epi::apply(args.ep, row, col, left, make_float2(acc[i][j + 4], acc[i][j + 5]), second);
      else
        v = Epi::apply(args.ep, row, col, left, second);
      store_pair(args.out, args.N, row, col, v, second);
    }
  }
}

/* ---- gemm2 ----------------------------------------------------------------------- */

struct Simt2Args {
  float *out;
  const float *a, *b, *d;
  long long M, N, K, P, lda, ldb, ldd;
};

template <class TL> __host__ __device__ constexpr int b2b_smem() {
  return TL::SMEM + TL::BN * TL::AS * 4; /* + Ct[BN][BM + 4] */
}

template <class TL, bool TRANS_B, bool VEC>
__global__ void __launch_bounds__(TL::THREADS, VEC ? TL::MIN_BLOCKS : 1)
    simt_gemm2_kernel(const Simt2Args args) {
  extern __shared__ __align__(16) float fsmem[];
  float *ct = fsmem + 2 * (TL::A_STAGE + TL::B_STAGE); /* Ct[n][m], stride AS */
  const long long m0 = (long long)blockIdx.x * TL::BM;
  const Place<TL> pl;
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
      acc[i][j] = 0.0f;
  simt_mainloop<TL, TRANS_B, VEC>(args.a, args.b, args.M, args.N, args.K, args.lda, args.ldb, m0, 0,
                                  0, (int)((args.K + TL::BK - 1) / TL::BK), fsmem, pl, acc);
  /* c; columns >= N are zeros already (B's were zero-filled), and forced
   * so: d's zero-filled rows >= N must meet finite values; rows >= M only
   * reach outputs that are not stored */
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
      ct[pl.col(j) * TL::AS + pl.row(i)] = pl.col(j) < args.N ? acc[i][j] : 0.0f;
  __syncthreads();

  /* phase 2: P tiles of BN columns, N in steps of BK (a flat sequence) */
  KColLoader<TL::BN, TL::BK, TL::THREADS, TL::BS> ld;
  const int nsteps = (int)((args.N + TL::BK - 1) / TL::BK);
  const long long ptiles = (args.P + TL::BN - 1) / TL::BN;
  const long long total = ptiles * nsteps;
  long long cur_p0 = -1;
  auto setup = [&](long long p0) {
    if (p0 != cur_p0) {
      ld.init(args.d, args.ldd, [&](int c, long long &src) {
        src = p0 + c < args.P ? p0 + c : (args.P - 1) / 4 * 4;
        return clamp4(args.P - (p0 + c));
      });
      cur_p0 = p0;
    }
  };
  setup(0);
  ld.template load_pred<VEC>(0, args.N);
  ld.store(fsmem);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
      acc[i][j] = 0.0f;
  for (long long it = 0; it < total; ++it) {
    const int buf = (int)(it & 1);
    const bool more = it + 1 < total;
    if (more) {
      setup(((it + 1) / nsteps) * TL::BN);
      ld.template load_pred<VEC>(((it + 1) % nsteps) * TL::BK, args.N);
    }
    const int ns = (int)(it % nsteps);
    compute_tile<TL>(ct + ns * TL::BK * TL::AS, fsmem + buf * TL::B_STAGE, pl, acc);
    if (more)
      ld.store(fsmem + (buf ^ 1) * TL::B_STAGE);
    if (ns == nsteps - 1) {
      const long long p0 = (it / nsteps) * TL::BN;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const long long row = m0 + pl.row(i);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const long long col = p0 + pl.col(2 * q);
          if (row < args.M && col < args.P)
            store_pair(args.out, args.P, row, col, make_float2(acc[i][2 * q], acc[i][2 * q + 1]),
                       col + 1 < args.P);
          acc[i][2 * q] = 0.0f;
          acc[i][2 * q + 1] = 0.0f;
        }
      }
    }
    __syncthreads();
  }
}

/* ---- host side -------------------------------------------------------------------- */

inline bool vec_ok(const void *p, long long ld) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0 && ld % 4 == 0;
}

template <class TL, bool TRANS_B, bool VEC, class Epi>
cudaError_t launch_simt(const Problem &p, int split, cudaStream_t stream) {
  const long long tiles_m = (p.M + TL::BM - 1) / TL::BM;
  const long long tiles_n = (p.N + TL::H - 1) / TL::H;
  if (tiles_m * tiles_n > INT_MAX || split > 65535)
    return cudaErrorInvalidValue;
  if (split > 1 && (p.ws == nullptr ||
                    p.ws_bytes < split_workspace_bytes(tiles_m * tiles_n, split, TL::BM, TL::BN)))
    return cudaErrorInvalidValue;
  SimtArgs<float, Epi> args;
  args.out = static_cast<float *>(p.out);
  args.a = static_cast<const float *>(p.a);
  args.b = static_cast<const float *>(p.b);
  args.ws = p.ws;
  args.M = p.M;
  args.N = p.N;
  args.K = p.K;
  args.lda = p.lda;
  args.ldb = p.ldb;
  args.tiles_m = (int)tiles_m;
  args.tiles_n = (int)tiles_n;
  args.split_k = split;
  args.ep = EpiParamsOf<float, Epi>::make(p);
  auto kernel = simt_gemm_kernel<TL, TRANS_B, VEC, Epi>;
  cudaError_t e = set_smem(kernel, TL::SMEM);
  if (e != cudaSuccess)
    return e;
  void *params[] = {&args};
  return cudaLaunchKernel(reinterpret_cast<const void *>(kernel),
                          dim3((unsigned)(tiles_m * tiles_n), (unsigned)split), dim3(TL::THREADS),
                          params, TL::SMEM, stream);
}

template <class TL, bool TRANS_B, bool VEC>
cudaError_t launch_simt2(const Problem2 &p, cudaStream_t stream) {
  const long long tiles_m = (p.M + TL::BM - 1) / TL::BM;
  if (tiles_m > INT_MAX)
    return cudaErrorInvalidValue;
  Simt2Args args{static_cast<float *>(p.out),
                 static_cast<const float *>(p.a),
                 static_cast<const float *>(p.b),
                 static_cast<const float *>(p.d),
                 p.M,
                 p.N,
                 p.K,
                 p.P,
                 p.lda,
                 p.ldb,
                 p.ldd};
  auto kernel = simt_gemm2_kernel<TL, TRANS_B, VEC>;
  constexpr int SMEM = b2b_smem<TL>();
  cudaError_t e = set_smem(kernel, SMEM);
  if (e != cudaSuccess)
    return e;
  void *params[] = {&args};
  return cudaLaunchKernel(reinterpret_cast<const void *>(kernel), dim3((unsigned)tiles_m),
                          dim3(TL::THREADS), params, SMEM, stream);
}

template <int I, int BM, int BN, int BK, int S, int TH, int SM, unsigned F> struct Row {
  static constexpr bool PAIRED = (F & FP_GEMM_CFG_PAIRED) != 0;
  static constexpr bool SPLIT = (F & FP_GEMM_CFG_SPLIT_K) != 0;
  static constexpr bool B2B = (F & FP_GEMM_CFG_B2B) != 0;
  using TL = STile<BM, BN, BK, TH, PAIRED && !B2B>;
  static constexpr int SMEM = B2B ? b2b_smem<TL>() : TL::SMEM;
  static_assert(SMEM == SM, "gemm_simt_configs.h: SMEM_BYTES differs from the kernel's");
  static_assert(S == 2, "the SIMT loop double-buffers");

  static bool matches(const Config &c) {
    return c.bm == BM && c.bn == BN && c.bk == BK && c.stages == S && c.threads == TH;
  }

  template <bool TB, class Epi>
  static cudaError_t go(const Problem &p, int split, bool vec, cudaStream_t s) {
    return vec ? launch_simt<TL, TB, true, Epi>(p, split, s)
               : launch_simt<TL, TB, false, Epi>(p, split, s);
  }
  template <class Epi>
  static cudaError_t go_tb(const Problem &p, int split, bool vec, cudaStream_t s) {
    return p.trans_b ? go<true, Epi>(p, split, vec, s) : go<false, Epi>(p, split, vec, s);
  }

  static cudaError_t run(const Problem &p, const Config &c, cudaStream_t s) {
    const int split = c.split_k < 1 ? 1 : c.split_k;
    const bool paired = FP_EPI_PAIRED(p.epilogue);
    if (!matches(c) || (split > 1 && !SPLIT) || B2B || paired != PAIRED)
      return cudaErrorInvalidValue;
    const bool vec =
        vec_ok(p.a, p.lda) && vec_ok(p.b, p.ldb) && (!paired || p.trans_b || p.N % 4 == 0);
    if constexpr (!B2B) {
      if constexpr (PAIRED) {
        if (p.epilogue == FP_EPI_SPLIT_ACT)
          return go_tb<EpiSplitAct<float>>(p, split, vec, s);
        return go_tb<EpiGeglu<float>>(p, split, vec, s);
      } else {
        return go_tb<EpiLinear<float>>(p, split, vec, s);
      }
    }
    return cudaErrorInvalidValue;
  }

  static cudaError_t run2(const Problem2 &p, const Config &c, cudaStream_t s) {
    if (!matches(c) || c.split_k > 1)
      return cudaErrorInvalidValue;
    if constexpr (B2B) {
      if (p.N > BN)
        return cudaErrorInvalidValue;
      const bool vec = vec_ok(p.a, p.lda) && vec_ok(p.b, p.ldb) && vec_ok(p.d, p.ldd);
      if (p.trans_b)
        return vec ? launch_simt2<TL, true, true>(p, s) : launch_simt2<TL, true, false>(p, s);
      return vec ? launch_simt2<TL, false, true>(p, s) : launch_simt2<TL, false, false>(p, s);
    }
    return cudaErrorInvalidValue;
  }

  static int stubs(const void **out, int cap, int n) {
    auto put = [&](const void *f) {
      if (n < cap)
        out[n] = f;
      ++n;
    };
    if constexpr (B2B) {
      put(reinterpret_cast<const void *>(simt_gemm2_kernel<TL, false, false>));
      put(reinterpret_cast<const void *>(simt_gemm2_kernel<TL, false, true>));
      put(reinterpret_cast<const void *>(simt_gemm2_kernel<TL, true, false>));
      put(reinterpret_cast<const void *>(simt_gemm2_kernel<TL, true, true>));
    } else {
      using E0 = typename std::conditional<PAIRED, EpiSplitAct<float>, EpiLinear<float>>::type;
      using E1 = typename std::conditional<PAIRED, EpiGeglu<float>, EpiLinear<float>>::type;
      put(reinterpret_cast<const void *>(simt_gemm_kernel<TL, false, false, E0>));
      put(reinterpret_cast<const void *>(simt_gemm_kernel<TL, false, true, E0>));
      put(reinterpret_cast<const void *>(simt_gemm_kernel<TL, true, false, E0>));
      put(reinterpret_cast<const void *>(simt_gemm_kernel<TL, true, true, E0>));
      if constexpr (PAIRED) {
        put(reinterpret_cast<const void *>(simt_gemm_kernel<TL, false, false, E1>));
        put(reinterpret_cast<const void *>(simt_gemm_kernel<TL, false, true, E1>));
        put(reinterpret_cast<const void *>(simt_gemm_kernel<TL, true, false, E1>));
        put(reinterpret_cast<const void *>(simt_gemm_kernel<TL, true, true, E1>));
      }
    }
    return n;
  }
};

} // namespace

cudaError_t simt_run(const Problem &p, const Config &c, cudaStream_t stream) {
  if (c.path != FP_GEMM_PATH_SIMT || p.dtype != Storage<float>::kDtype || p.M < 1 || p.N < 1 ||
      p.K < 1 || p.out == nullptr || p.a == nullptr || p.b == nullptr ||
      !epilogue_known(p.epilogue) || (p.trans_b != 0 && p.trans_b != 1))
    return cudaErrorInvalidValue;
  const long long nb = FP_EPI_PAIRED(p.epilogue) ? 2 * p.N : p.N;
  if (p.lda < p.K || p.ldb < (p.trans_b ? p.K : nb))
    return cudaErrorInvalidValue;
  if ((FP_EPI_READS_BIAS(p.epilogue) && p.bias == nullptr) ||
      (FP_EPI_READS_ADD(p.epilogue) && p.add == nullptr))
    return cudaErrorInvalidValue;
  switch (c.index) {
#define FP_SIMT_RUN(I, BM, BN, BK, S, TH, SM, F)                                                   \
  case I:                                                                                          \
    return Row<I, BM, BN, BK, S, TH, SM, (unsigned)(F)>::run(p, c, stream);
    FP_GEMM_SIMT_CONFIGS(FP_SIMT_RUN)
#undef FP_SIMT_RUN
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t simt_run2(const Problem2 &p, const Config &c, cudaStream_t stream) {
  if (c.path != FP_GEMM_PATH_SIMT || p.dtype != Storage<float>::kDtype || p.M < 1 || p.N < 1 ||
      p.K < 1 || p.P < 1 || p.out == nullptr || p.a == nullptr || p.b == nullptr ||
      p.d == nullptr || (p.trans_b != 0 && p.trans_b != 1))
    return cudaErrorInvalidValue;
  if (p.lda < p.K || p.ldb < (p.trans_b ? p.K : p.N) || p.ldd < p.P)
    return cudaErrorInvalidValue;
  switch (c.index) {
#define FP_SIMT_RUN2(I, BM, BN, BK, S, TH, SM, F)                                                  \
  case I:                                                                                          \
    return Row<I, BM, BN, BK, S, TH, SM, (unsigned)(F)>::run2(p, c, stream);
    FP_GEMM_SIMT_CONFIGS(FP_SIMT_RUN2)
#undef FP_SIMT_RUN2
  default:
    return cudaErrorInvalidValue;
  }
}

int simt_kernel_stubs(const void **out, int cap) {
  int n = 0;
#define FP_SIMT_STUBS(I, BM, BN, BK, S, TH, SM, F)                                                 \
  n = Row<I, BM, BN, BK, S, TH, SM, (unsigned)(F)>::stubs(out, cap, n);
  FP_GEMM_SIMT_CONFIGS(FP_SIMT_STUBS)
#undef FP_SIMT_STUBS
  return n;
}

} // namespace fpgemm
