/* fuseport CUDA GEMM core, path SM80: the main loop of gemm_sm80.cu -- the
 * operands (Operands, load_stage: the general cp.async copy of a k-tile,
 * gathered where B is not 16-byte aligned), the fast copy of a whole k-tile
 * (FastCopy), the fragments' shared-memory offsets (FragOffsets, pair_rows,
 * load_frags) and mainloop, with its pipeline's schedule. The path's
 * description (swizzle, warp tiles, paired epilogues, split-K, gemm2), the
 * tile geometry (Tile), the kernels and the host side are in gemm_sm80.cu.
 *
 * A part of gemm_sm80.cu, not a header of its own: gemm_sm80.cu includes it
 * once, inside namespace fpgemm's anonymous namespace (using namespace
 * fpmma), after the geometry and before the kernels.
 */
#ifndef FUSEPORT_GEMM_SM80_MAINLOOP_CUH
#define FUSEPORT_GEMM_SM80_MAINLOOP_CUH

/* ---- operands ------------------------------------------------------------------ */

/* What the main loop needs to fill a stage: operand pointers, the block's
 * origin and the edges. n0 is the first B column of the (left) half. */
template <class T> struct Operands {
  const T *a, *b;
  long long M, N, K, lda, ldb;
  long long m0, n0;
  bool right_gather; /* paired row-major B with N % 8 != 0: right half by 2-byte loads */
};

__device__ __forceinline__ int clamp_bytes(long long elems) {
  return elems <= 0 ? 0 : (elems >= 8 ? 16 : (int)elems * 2);
}

/* 8 elements of row-major B row k from column col (n valid of them) into a
 * 16-byte shared chunk, without cp.async (the source is not 16-byte aligned). */
template <class T> __device__ __forceinline__ void gather8(char *dst, const T *src, int n) {
  alignas(16) unsigned short v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    v[e] = e < n ? __ldg(reinterpret_cast<const unsigned short *>(src) + e) : (unsigned short)0;
  *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(v);
}

/* Issues the cp.async copies of k-tile kt into the stage at sA (shared
 * address; generic pointer gA for the gather fallback). */
template <class T, class TL, bool TRANS_B>
__device__ __forceinline__ void load_stage(const Operands<T> &op, uint32_t sA, char *gA, int kt) {
  const int tid = threadIdx.x;
  const long long k0 = (long long)kt * TL::BK;
#pragma unroll
  for (int i = 0; i < TL::A_CHUNKS; ++i) {
    const int id = tid + i * TL::THREADS;
    const int r = id / TL::WA, kc = id % TL::WA;
    const long long m = op.m0 + r, k = k0 + kc * 8;
    const int bytes = m < op.M ? clamp_bytes(op.K - k) : 0;
    const T *src = bytes > 0 ? op.a + m * op.lda + k : op.a;
    cp_async_16(sA + swz<TL::WA>(r, kc) * 2, src, bytes);
  }
  const uint32_t sB = sA + TL::A_ELEMS * 2;
#pragma unroll
  for (int i = 0; i < TL::B_CHUNKS; ++i) {
    const int id = tid + i * TL::THREADS;
    if constexpr (TRANS_B) {
      /* [BN][BK] tile: row = tile column */
      const int r = id / TL::WA, kc = id % TL::WA;
      const int part = r >= TL::H ? 1 : 0;
      const long long n = op.n0 + (r - part * TL::H), k = k0 + kc * 8;
      const int bytes = n < op.N ? clamp_bytes(op.K - k) : 0;
      const T *src = bytes > 0 ? op.b + (n + part * op.N) * op.ldb + k : op.b;
      cp_async_16(sB + swz<TL::WA>(r, kc) * 2, src, bytes);
    } else {
      /* [BK][BN] tile */
      const int r = id / TL::WB, cc = id % TL::WB;
      const int c = cc * 8;
      const int part = c >= TL::H ? 1 : 0;
      const long long n = op.n0 + (c - part * TL::H), k = k0 + r;
      const int bytes = k < op.K ? clamp_bytes(op.N - n) : 0;
      const T *src = bytes > 0 ? op.b + k * op.ldb + n + part * op.N : op.b;
      if (TL::PAIRED && part == 1 && op.right_gather) {
        gather8(gA + TL::A_ELEMS * 2 + swz<TL::WB>(r, cc) * 2, src, bytes / 2);
      } else {
        cp_async_16(sB + swz<TL::WB>(r, cc) * 2, src, bytes);
      }
    }
  }
}

/* ---- the fast copy of a whole k-tile ----------------------------------------------
 * A thread's chunks of a tile sit at fixed places: its k chunk (A, trans_b
 * B) or column chunk (row-major B) is the same in every copy, and its rows
 * are r0, r0 + RS, r0 + 2 RS, ... So their global addresses are one base
 * plus i * step, moving by one k-tile a copy, and their shared offsets are
 * one offset plus constants. Every whole k-tile takes this path; a partial
 * last k-tile of K is copied first, by load_stage (see mainloop). Chunks
 * past M or N copy nothing from a clamped, valid address. */
template <class T, class TL, bool TRANS_B> struct FastCopy {
  static constexpr int A_RS = TL::THREADS / TL::WA; /* rows between a thread's A chunks */
  static constexpr int B_W = TRANS_B ? TL::WA : TL::WB;
  static constexpr int B_RS = TL::THREADS / B_W;
  static constexpr int A_ALIGN = TL::WA == 4 ? 16 : 8; /* row steps that keep the swizzle */
  static constexpr int B_ALIGN = B_W == 4 ? 16 : 8;
  static_assert(TL::THREADS % TL::WA == 0 && TL::THREADS % TL::WB == 0, "fixed chunk columns");
  static_assert(A_RS % A_ALIGN == 0 && B_RS % B_ALIGN == 0, "chunk offsets add");
  static_assert(!TRANS_B || !TL::PAIRED || TL::H % B_RS == 0, "a chunk's half is fixed");
  static_assert(TL::A_CHUNKS <= 32 && TL::B_CHUNKS <= 32, "validity masks");

  const T *ga, *gb;        /* chunk 0 at the next k-tile (rows clamped into the operand) */
  long long a_step;        /* elements from A chunk i to i + 1 */
  long long b_step;        /* elements from B chunk i to i + 1 */
  long long b_more;        /* row-major: elements a k-tile moves B; trans_b paired: the
                              right half's extra offset */
  uint32_t a_soff, b_soff; /* shared byte offsets of chunk 0 (B: from the stage's B tile) */
  unsigned a_ok, b_ok;     /* bit i: chunk i's row (A, trans_b B) exists */
  int b_bytes;             /* row-major B: bytes of the column chunk (0..16); bit 8: gather */

  __device__ __forceinline__ void init(const Operands<T> &op, int kt) {
    const int tid = threadIdx.x;
    const long long k0 = (long long)kt * TL::BK;
    {
      const int r0 = tid / TL::WA, kc = tid % TL::WA;
      const long long m = op.m0 + r0;
      ga = op.a + (m < op.M ? m : op.M - 1) * op.lda + k0 + kc * 8;
      a_step = (long long)A_RS * op.lda;
      a_soff = swz<TL::WA>(r0, kc) * 2;
      a_ok = 0;
#pragma unroll
      for (int i = 0; i < TL::A_CHUNKS; ++i)
        a_ok |= (m + i * A_RS < op.M ? 1u : 0u) << i;
    }
    if constexpr (TRANS_B) {
      const int r0 = tid / TL::WA, kc = tid % TL::WA;
      const long long n = op.n0 + r0; /* r0 < B_RS <= H: the left half */
      gb = op.b + (n < op.N ? n : op.N - 1) * op.ldb + k0 + kc * 8;
      b_step = (long long)B_RS * op.ldb;
      b_more = TL::PAIRED ? (op.N - TL::H) * op.ldb : 0;
      b_soff = swz<TL::WA>(r0, kc) * 2;
      b_ok = 0;
#pragma unroll
      for (int i = 0; i < TL::B_CHUNKS; ++i) {
        const int r = r0 + i * B_RS, part = r >= TL::H ? 1 : 0;
        b_ok |= (op.n0 + (r - part * TL::H) < op.N ? 1u : 0u) << i;
      }
      b_bytes = 16;
    } else {
      const int r0 = tid / TL::WB, cc = tid % TL::WB;
      const int c = cc * 8, part = c >= TL::H ? 1 : 0;
      const long long n = op.n0 + (c - part * TL::H);
      b_bytes = clamp_bytes(op.N - n);
      gb = op.b + (k0 + r0) * op.ldb + (b_bytes > 0 ? n + part * op.N : 0);
      b_step = (long long)B_RS * op.ldb;
      b_more = (long long)TL::BK * op.ldb;
      b_soff = swz<TL::WB>(r0, cc) * 2;
      b_ok = b_bytes > 0 ? ~0u : 0u;
      if (TL::PAIRED && part == 1 && op.right_gather)
        b_bytes |= 256;
    }
  }

  /* copies the k-tile at ga/gb into the stage at shared address sA (generic
   * gA) and moves to the next k-tile */
  /* (the chunk addresses step from one to the next: hoisting i * step for
   * every i would hold two registers a chunk) */
  __device__ __forceinline__ void copy(uint32_t sA, char *gA) {
    const T *p = ga;
#pragma unroll
    for (int i = 0; i < TL::A_CHUNKS; ++i) {
      const bool ok = (a_ok >> i) & 1u;
      cp_async_16(sA + a_soff + i * (A_RS * TL::WA * 16), ok ? p : ga, ok ? 16 : 0);
      p += a_step;
    }
    const uint32_t sB = sA + TL::A_ELEMS * 2;
    p = gb;
#pragma unroll
    for (int i = 0; i < TL::B_CHUNKS; ++i) {
      const bool ok = (b_ok >> i) & 1u;
      const uint32_t dst = b_soff + i * (B_RS * B_W * 16);
      if constexpr (TRANS_B) {
        if (TL::PAIRED && i > 0 && i * B_RS == TL::H)
          p += b_more; /* the right half's rows */
        cp_async_16(sB + dst, ok ? p : gb, ok ? 16 : 0);
      } else if (TL::PAIRED && (b_bytes & 256)) {
        gather8(gA + TL::A_ELEMS * 2 + dst, p, (b_bytes & 255) / 2);
      } else {
        cp_async_16(sB + dst, p, b_bytes);
      }
      p += b_step;
    }
    ga += TL::BK;
    gb += TRANS_B ? (long long)TL::BK : b_more;
  }
};

/* Per-thread shared-memory offsets (bytes from a stage's start) of the
 * warp's ldmatrix rows. A fragments: a(ks) + mi * 16 rows; B fragments
 * (row-major B): b_off[nj] + ks * 16 k-rows; trans_b: bt(ks) + the column
 * pair's rows. Adding whole 16-row blocks keeps the swizzle phase (row & 7,
 * and the 128-byte line & 7 of 64-byte rows), so those parts are constants.
 * The k16 step ks reads chunk 2 ks (+1) of a row of at most 8 chunks: its
 * swizzled place is chunk 0's XOR 2 ks, i.e. the byte offset XOR 32 ks. */
template <class TL, bool TRANS_B> struct FragOffsets {
  static_assert(TL::WA <= 8, "k16 steps by XOR: rows of at most 8 chunks");
  uint32_t a0, bt0;
  uint32_t b_off[TRANS_B ? 1 : TL::NI / 2];

  __device__ __forceinline__ void init(int wm, int wn, int lane) {
    a0 = swz<TL::WA>(wm * TL::WTM + (lane & 15), lane >> 4) * 2;
    if constexpr (TRANS_B) {
      const int n = TL::col(wn, 0) + (lane & 7) + (lane >> 4) * 8;
      bt0 = TL::A_ELEMS * 2 + swz<TL::WA>(n, (lane >> 3) & 1) * 2;
      b_off[0] = 0;
    } else {
      bt0 = 0;
      const int k = (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int nj = 0; nj < TL::NI / 2; ++nj)
        b_off[nj] = TL::A_ELEMS * 2 + swz<TL::WB>(k, (TL::col(wn, 2 * nj) >> 3) + (lane >> 4)) * 2;
    }
  }
  __device__ __forceinline__ uint32_t a(int ks) const { return a0 ^ (uint32_t)(ks << 5); }
  __device__ __forceinline__ uint32_t bt(int ks) const { return bt0 ^ (uint32_t)(ks << 5); }
};

/* Rows (trans_b: tile columns) from the warp's first n8 tile to the pair nj. */
template <class TL> __host__ __device__ constexpr int pair_rows(int nj) {
  return TL::PAIRED ? (2 * nj < TL::NI / 2 ? 16 * nj : TL::BN / 2 + (2 * nj - TL::NI / 2) * 8)
                    : 16 * nj;
}

/* The A fragments (MI tiles of 16 x 16) and B fragments (NI tiles of
 * 16 x 8) of k16 step ks of the stage at shared address st. */
template <class TL, bool TRANS_B>
__device__ __forceinline__ void load_frags(uint32_t st, int ks, const FragOffsets<TL, TRANS_B> &fo,
                                           uint32_t (&af)[TL::MI][4], uint32_t (&bf)[TL::NI][2]) {
#pragma unroll
  for (int mi = 0; mi < TL::MI; ++mi)
    ldmatrix_x4(af[mi], st + fo.a(ks) + mi * 16 * TL::BK * 2);
#pragma unroll
  for (int nj = 0; nj < TL::NI / 2; ++nj) {
    uint32_t t[4];
    if constexpr (TRANS_B)
      ldmatrix_x4(t, st + fo.bt(ks) + pair_rows<TL>(nj) * TL::BK * 2);
    else
      ldmatrix_x4_trans(t, st + fo.b_off[nj] + ks * 16 * TL::BN * 2);
    bf[2 * nj][0] = t[0];
    bf[2 * nj][1] = t[1];
    bf[2 * nj + 1][0] = t[2];
    bf[2 * nj + 1][1] = t[3];
  }
}

/* acc += A[m0.., kt_begin*BK ..] * B[.., n0..] over k-tiles [kt_begin,
 * kt_end). Leaves cp.async idle, but no barrier after the last reads of
 * shared memory (callers that reuse it sync first).
 *
 * The pipeline: fragments are double-buffered across every k16 step,
 * k-tile boundaries included (the last step of k-tile `it` loads the first
 * fragments of it + 1 while its MMAs run). In k-tile `it`, the first k16
 * step issues the copy of k-tile it + STAGES - 1, into the stage read
 * during it - 1, after the block's one barrier of the k-tile, which also
 * publishes k-tile it + 1 (awaited just before it):
 *   STAGES >= 4 (EARLY): the barrier sits in the first k16 step, so the
 *     last step's loads of the next k-tile's fragments have nothing in
 *     front of them and overlap that step's MMAs (STAGES - 2 k-tiles in
 *     flight while a k-tile is awaited);
 *   STAGES 3: the barrier sits in the last k16 step (STAGES - 1 in
 *     flight, but the next fragments wait behind it). */
template <class T, class TL, bool TRANS_B>
__device__ __forceinline__ void mainloop(const Operands<T> &op, char *smem, int kt_begin,
                                         int kt_end, float (&acc)[TL::MI][TL::NI][4]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / TL::WN, wn = warp % TL::WN;
  const uint32_t s0 = smem_addr(smem);
  const int nk = kt_end - kt_begin;
  if (nk <= 0)
    return;
  constexpr uint32_t STAGE_BYTES = TL::STAGE_ELEMS * 2;
  constexpr bool EARLY = TL::STAGES >= 4;
  /* A partial last k-tile of K, when this range holds it, is copied first
   * (by the general load_stage), so the loop copies whole k-tiles only. */
  const bool partial = op.K % TL::BK != 0 && (long long)kt_end * TL::BK > op.K;

  FastCopy<T, TL, TRANS_B> fc;
  fc.init(op, kt_begin);
#pragma unroll
  for (int s = 0; s < TL::STAGES - 1; ++s) {
    if (s < nk) {
      if (s == 0 && partial)
        load_stage<T, TL, TRANS_B>(op, s0, smem, kt_end - 1);
      else
        fc.copy(s0 + s * STAGE_BYTES, smem + s * STAGE_BYTES);
    }
    cp_async_commit();
  }

  FragOffsets<TL, TRANS_B> fo;
  fo.init(wm, wn, lane);
  uint32_t af[2][TL::MI][4];
  uint32_t bf[2][TL::NI][2];

  cp_async_wait<TL::STAGES - 2>();
  __syncthreads();
  /* stages read and written (shared addresses and the index of the latter) */
  const uint32_t s_end = s0 + TL::STAGES * STAGE_BYTES;
  uint32_t rd = s0, wr = s0 + (TL::STAGES - 1) * STAGE_BYTES;
  load_frags<TL, TRANS_B>(rd, 0, fo, af[0], bf[0]);

  for (int it = 0; it < nk; ++it) {
#pragma unroll
    for (int ks = 0; ks < TL::KSTEPS; ++ks) {
      if (EARLY && ks == 0) {
        /* k-tile it + 1 has landed; every warp is past its reads of it - 1 */
        cp_async_wait<TL::STAGES - 3>();
        __syncthreads();
      }
      if (!EARLY && ks == TL::KSTEPS - 1) {
        /* k-tile it + 1 has landed; every warp is past its reads of it - 1 */
        cp_async_wait<TL::STAGES - 2>();
        __syncthreads();
      }
      if (ks == TL::KSTEPS - 1) {
        rd += STAGE_BYTES;
        if (rd == s_end)
          rd = s0;
      }
      if (ks + 1 < TL::KSTEPS || it + 1 < nk)
        load_frags<TL, TRANS_B>(rd, (ks + 1) % TL::KSTEPS, fo, af[(ks + 1) & 1], bf[(ks + 1) & 1]);
      if (ks == 0) {
        const int nxt = it + TL::STAGES - 1;
        if (nxt < nk)
          fc.copy(wr, smem + (wr - s0));
        cp_async_commit();
        wr += STAGE_BYTES;
        if (wr == s_end)
          wr = s0;
      }
#pragma unroll
      for (int mi = 0; mi < TL::MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < TL::NI; ++ni)
          Mma<T>::run(acc[mi][ni], af[ks & 1][mi], bf[ks & 1][ni][0], bf[ks & 1][ni][1]);
    }
  }
  cp_async_wait<0>();
}

#endif
