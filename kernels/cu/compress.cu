/* fuseport CUDA kernels, family compress: activation compression (the
 * compression notebook's quant_pack / dequant_unpack on groups of 256
 * bfloat16 values, relu with its mask packed 32 to a word) and the unfused
 * steps that model eager PyTorch's decomposition of them (those in
 * compress_steps.cu; the helpers both files use: compress_common.cuh).
 * Semantics: kernels/kernels.def; scalar formulas: fp_device_common.h.
 * Every quantisation value goes through fp_quant_scale, fp_recip_rn,
 * fp_quant_code and fp_dequant_value, whose steps are written so that nvcc
 * cannot contract them: the packed words match the CPU's and OpenCL's bit
 * for bit. bfloat16 travels as its 16-bit pattern.
 *
 * TEAMS kernels (quant_pack, dequant_unpack, cmp_group_reduce): a team of
 * 8 or 32 lanes per quantisation group (Team, in compress_common.cuh), grid
 * stride over the K*G groups. quant_pack, and dequant_unpack but at 1 to 4
 * bits on rows on the 16-byte grid, run the rows loops of compress_rows.cuh
 * (a cursor in place of a division a group, fewer instructions a value;
 * rows off the grid through grid chunks or shared memory). The rest (the
 * team loops below, and compress_steps.cu's cmp_group_reduce): a lane holds
 * 8 consecutive values per chunk, one 16-byte access where every row start
 * is 16-byte aligned (C % 8 == 0, base aligned); cmp_group_reduce loads rows
 * off the grid in grid chunks shifted across lanes (load_rank_values_grid).
 * A rank's codes of a chunk are 8*BITS consecutive bits of the group's
 * words (store_rank_codes writes them). The group's min and max:
 * min.bf16x2 / max.bf16x2 on the packed values, then a butterfly of
 * shuffles inside the team.
 *
 * relu_pack / relu_unpack_backward (ELEM; the mask per row, [K, CW]): a
 * warp per tile of 1024 columns of a row, i.e. 32 mask words (a [K, C] with
 * C % 32 == 0 is one row of K*C: the same words). Lane l holds columns
 * 256j + 8l .. 256j + 8l + 7 of the tile's chunk j < 4 (four 16-byte
 * accesses in flight, each coalesced over the warp), and four shuffles move
 * the mask bytes so that lane l reads or writes mask word l of the tile
 * (one 128-byte access per warp). Where C % 32 != 0 and the bases share
 * their offset from the 16-byte grid, the tiles run over the flat array
 * instead (relu_pack_flat: rows of odd C are not 16-byte aligned, and short
 * rows would leave most of a row tile idle).
 */
#include "compress_common.cuh"
#include "compress_rows.cuh"
#include "dequant_lut.cuh"

#include <cuda_bf16.h>

namespace {

/* groups a team of dequant_unpack has in flight: it holds only a few words
 * per group (cmp_group_reduce's kPackUnroll: compress_common.cuh) */
constexpr int kUnpackUnroll = 2;
constexpr int kReluChunks = 4;                            /* 16-byte accesses per lane and tile */
constexpr int kReluTile = kReluChunks * 32 * kLaneValues; /* values per warp and tile */

/* ---- memory access ----------------------------------------------------------- */

/* The first `valid` of eight bfloat16 values one at a time (ld8_scalar's
 * counterpart, in compress_common.cuh). */
__device__ __forceinline__ void st8_scalar(unsigned short *p, const uint4 &v, int valid) {
#pragma unroll
  for (int e = 0; e < kLaneValues; ++e)
    if (e < valid)
      p[e] = (unsigned short)half_of(v, e);
}

/* ---- quant_pack / dequant_unpack --------------------------------------------- */

/* A rank's codes of a group, chunk by chunk (its 4*BITS bits of chunk j
 * from bit 0 of lo[j]), and the group's stored scale and min. */
template <int T> struct RankCodes {
  unsigned lo[Team<T>::kChunks];
  unsigned short scale, min;
};

/* dequant_unpack at 1, 2 and 4 bits on rows on the 16-byte grid (C % 8 ==
 * 0, out aligned; the rest: dequant_unpack_rows, compress_rows.cuh),
 * kUnpackUnroll groups a team in flight. */
template <int BITS, int T>
__device__ __forceinline__ void
dequant_unpack_run(unsigned short *out, const unsigned *words, const unsigned short *scale,
                   const unsigned short *mins, long long K, long long C) {
  static_assert(BITS <= 4, "1, 2 or 4 bits");
  constexpr int NW = 8 * BITS;
  const long long G = (C + kGroup - 1) / kGroup;
  const int r = Team<T>::rank();
  team_groups<T, kUnpackUnroll>(
      K * G,
      [&](long long unit, bool active) {
        RankCodes<T> c = {};
        if (!active)
          return c;
        const unsigned *w = words + unit * NW;
    /* the word holding chunk j's codes of this rank (store_rank_codes,
     * compress_rows.cuh); at 1 and 2 bits, 4 and 2 ranks read one word:
     * one request */
#pragma unroll
        for (int j = 0; j < Team<T>::kChunks; ++j) {
          const int v = T * j + r;
          if constexpr (BITS == 4)
            c.lo[j] = ldro(w + v);
          else if constexpr (BITS == 2)
            c.lo[j] = ldro(w + (v >> 1)) >> (16 * (r & 1));
          else
            c.lo[j] = ldro(w + (v >> 2)) >> (8 * (r & 3));
        }
        c.scale = ldro(scale + unit);
        c.min = ldro(mins + unit);
        return c;
      },
      [&](long long unit, bool active, const RankCodes<T> &c) {
        const GroupDequant gd = group_dequant<BITS>(c.scale, c.min);
        const GroupAt at = active ? group_at(unit, C, G) : GroupAt{0, 0};
#pragma unroll
        for (int j = 0; j < Team<T>::kChunks; ++j) {
          const int col = j * Team<T>::kChunkValues + r * kLaneValues;
          if (active && col < at.valid) /* a multiple of 8 */
            st16(out + at.offset + col, dequant_chunk<BITS>(c.lo[j], gd));
        }
      });
}

/* ---- relu with a packed mask ------------------------------------------------------ */

/* relu of a bfloat16 pattern: x where positive, NaN as it is, +0 for the
 * rest (-0 and negatives), as kernels/cpu/compress.c writes it. */
__device__ __forceinline__ unsigned relu_bits(unsigned h) {
  return bf16_positive(h) || (h & 0x7FFFu) > 0x7F80u ? h : 0u;
}

/* relu_bits of both bfloat16 patterns of a word at once, as 16-bit lanes
 * (predicates for each of the 32 values of a tile made relu_pack spill):
 * *pos gets bf16_positive of the low half in bit 0, of the high one in bit 1.
 * No step carries across the halves: a = |h| <= 0x7FFF, so a + 0x7F and
 * a + 0x7FFF stay below 0x10000. */
__device__ __forceinline__ unsigned relu_pair(unsigned w, unsigned &pos) {
  const unsigned a = w & 0x7FFF7FFFu;
  const unsigned nan = (a + 0x007F007Fu) & 0x80008000u;     /* |h| > 0x7F80 */
  const unsigned nonzero = (a + 0x7FFF7FFFu) & 0x80008000u; /* |h| >= 1 */
  const unsigned p = ~w & nonzero & ~nan & 0x80008000u;     /* sign clear, not 0, not NaN */
  pos = (p >> 15 & 1u) | (p >> 30 & 2u);
  return w & ((p | nan) >> 15) * 0xFFFFu; /* each half: all ones or 0 */
}

/* dy times a mask bit (masked_bits: compress_common.cuh). */
__device__ __forceinline__ unsigned masked_bit(unsigned h, unsigned bit) {
  return masked_bits(h, bit != 0 ? 1.0f : 0.0f);
}

/* The relu kernels see x as [rows, cols] with a mask of cw = ceil(cols/32)
 * words per row; a tile is 1024 columns of one row, 32 mask words. The
 * recipes' [K, C] goes as [1, K*C] where C % 32 == 0 (the same words, and
 * no tile is cut short by a row end). Lane l holds columns t*1024 + 256j +
 * 8l .. +7 of chunk j < 4 of its tile: four 16-byte accesses, each
 * coalesced over the warp. VEC: cols % 8 == 0 and the bases 16-byte
 * aligned, so every row start is, and a chunk lies all before or all past
 * the row's end. */
struct ReluTile {
  long long at;   /* element offset of this lane's first column */
  long long word; /* offset of mask word l of the tile, or -1 past the row's words */
  int rest;       /* columns of the row from this lane's first on (<= 0: none), at most 1024 */
};

/* Grid stride over the [rows, ceil(cols/1024)] tiles, a warp per tile. */
template <class Tile>
__device__ __forceinline__ void relu_tiles(long long rows, long long cols, Tile tile) {
  const WarpGrid wg = warp_grid();
  const long long per_row = (cols + kReluTile - 1) / kReluTile, cw = (cols + 31) / 32;
  for (long long u = wg.first; u < rows * per_row; u += wg.step) { /* uniform over the warp */
    const long long k = RowColCursor::quotient(u, per_row), t = u - k * per_row;
    const long long first = t * kReluTile + wg.lane * kLaneValues, rest = cols - first;
    const long long w = t * 32 + wg.lane;
    tile(ReluTile{k * cols + first, w < cw ? k * cw + w : -1,
                  rest < kReluTile ? (int)rest : kReluTile},
         wg.lane);
  }
}

/* How many of chunk j's 8 values lie before the row's end (0..8). */
__device__ __forceinline__ int chunk_valid(const ReluTile &tl, int j) {
  const int r = tl.rest - j * 32 * kLaneValues;
  return r <= 0 ? 0 : r >= kLaneValues ? kLaneValues : r;
}

/* relu of a chunk's 8 values, and their mask bits (byte). */
__device__ __forceinline__ uint4 relu_chunk(const uint4 &v, unsigned &byte) {
  uint4 r = make_uint4(0u, 0u, 0u, 0u);
  byte = 0;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    unsigned pos;
    set_word(r, m, relu_pair(word_of(v, m), pos));
    byte |= pos << (2 * m);
  }
  return r;
}

/* dy * mask bit of a chunk's 8 values (bits 0..7 of byte). */
__device__ __forceinline__ uint4 unpack_chunk(const uint4 &v, unsigned byte) {
  uint4 r = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const unsigned w = word_of(v, m);
    set_word(r, m,
             masked_bit(w & 0xFFFFu, byte >> (2 * m) & 1u) |
                 masked_bit(w >> 16, byte >> (2 * m + 1) & 1u) << 16);
  }
  return r;
}

/* VEC: all four 16-byte loads in flight, then the four chunks. Otherwise
 * chunk by chunk, not unrolled: 8 scalar loads per chunk, which unrolled
 * made the kernels spill. */
template <bool VEC>
__device__ __forceinline__ void relu_pack_tile(unsigned short *y, unsigned *mask,
                                               const unsigned short *x, const ReluTile &tl,
                                               int lane) {
  const unsigned short *xl = x + tl.at;
  unsigned short *yl = y + tl.at;
  unsigned bytes = 0; /* byte j: the mask bits of this lane's values of chunk j */
  if constexpr (VEC) {
    uint4 v[kReluChunks] = {};
#pragma unroll
    for (int j = 0; j < kReluChunks; ++j)
      if (j * 32 * kLaneValues < tl.rest)
        v[j] = ld16(xl + j * 32 * kLaneValues);
#pragma unroll
    for (int j = 0; j < kReluChunks; ++j) {
      unsigned byte;
      const uint4 r = relu_chunk(v[j], byte);
      if (j * 32 * kLaneValues < tl.rest)
        st16(yl + j * 32 * kLaneValues, r);
      bytes |= byte << (8 * j);
    }
  } else {
#pragma unroll 1
    for (int j = 0; j < kReluChunks; ++j) {
      const int valid = chunk_valid(tl, j);
      unsigned byte;
      const uint4 r = relu_chunk(ld8_scalar(xl + j * 32 * kLaneValues, valid), byte);
      st8_scalar(yl + j * 32 * kLaneValues, r, valid);
      bytes |= byte << (8 * j);
    }
  }
  /* Mask word l of the tile covers columns 32l..32l+31 of it: chunk l/8,
   * lanes 4(l%8)..4(l%8)+3, whose byte l/8 of `bytes` are its bytes 0..3.
   * Columns past the row's end were read as 0, so their bits are 0. */
  unsigned word = 0;
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    const unsigned t = __shfl_sync(kFullMask, bytes, 4 * (lane & 7) + b);
    word |= ((t >> (8 * (lane >> 3))) & 0xFFu) << (8 * b);
  }
  if (tl.word >= 0)
    mask[tl.word] = word;
}

/* The same tile of relu_unpack_backward: lane l reads mask word l of the
 * tile, and the lane holding columns 8l'.. of chunk j gets its byte
 * (l' % 4) of word 8j + l'/4 by a shuffle. */
template <bool VEC>
__device__ __forceinline__ void relu_unpack_tile(unsigned short *dx, const unsigned short *dy,
                                                 const unsigned *mask, const ReluTile &tl,
                                                 int lane) {
  const unsigned short *dyl = dy + tl.at;
  unsigned short *dxl = dx + tl.at;
  const unsigned word = tl.word >= 0 ? ldro(mask + tl.word) : 0u;
  if constexpr (VEC) {
    uint4 v[kReluChunks] = {};
#pragma unroll
    for (int j = 0; j < kReluChunks; ++j)
      if (j * 32 * kLaneValues < tl.rest)
        v[j] = ld16(dyl + j * 32 * kLaneValues);
#pragma unroll
    for (int j = 0; j < kReluChunks; ++j) {
      const unsigned byte = __shfl_sync(kFullMask, word, 8 * j + (lane >> 2)) >> (8 * (lane & 3));
      const uint4 r = unpack_chunk(v[j], byte);
      if (j * 32 * kLaneValues < tl.rest)
        st16(dxl + j * 32 * kLaneValues, r);
    }
  } else {
#pragma unroll 1
    for (int j = 0; j < kReluChunks; ++j) { /* the shuffle stays uniform: j is */
      const int valid = chunk_valid(tl, j);
      const unsigned byte = __shfl_sync(kFullMask, word, 8 * j + (lane >> 2)) >> (8 * (lane & 3));
      const uint4 r = unpack_chunk(ld8_scalar(dyl + j * 32 * kLaneValues, valid), byte);
      st8_scalar(dxl + j * 32 * kLaneValues, r, valid);
    }
  }
}

/* ---- relu over the flat array: rows that break 16-byte alignment ----------------
 *
 * Where C % 32 != 0 the tiles above follow the rows: a row of odd C starts
 * at any 2-byte offset, so each lane's 8 values take eight 2-byte accesses,
 * and a short row leaves most of its tile's lanes idle (C = 257: 257 of
 * 1024). But x, y (dx, dy) are still one contiguous array of K*C values,
 * only the mask follows the rows. So these kernels tile the flat array
 * instead, on the 16-byte grid of the data's addresses: tile t holds flat
 * values [1024t - p, 1024t - p + 1024), p = the bases' offset in values
 * from a 16-byte boundary (both bases must share it), lane l its chunks
 * 256j + 8l, j < 4, as the row tiles do; only the array's first and last
 * chunks are partial. The mask bits of a tile form a 1024-bit bitmap, word
 * i (bits of values 32i..32i+31 of the tile) in lane i. A mask word (k, w)
 * holds the bits of flat values k*C + 32w .. + min(32, C - 32w) - 1: a
 * 32-bit window of the bitmap at any bit offset.
 *
 * relu_pack: the warp of the tile writes the mask words that start in it
 * (each written once, from one warp: deterministic, no atomics); a word
 * starting near the tile's end reaches up to 31 values into the next tile,
 * whose first 32 values lanes 0..3 load besides (bitmap word 32). The words
 * of a tile are consecutive mask indices: 32 per round, a division each.
 * relu_unpack_backward: lane i assembles bitmap word i from the mask words
 * its 32 values lie in (at most 3 where C >= 32; a loop over the rows below
 * that), then the bytes go to the chunks' lanes as in the row tiles. */
constexpr int kFlatTile = kReluTile;

/* Bits sh .. sh+31 of the 64-bit hi:lo. */
__device__ __forceinline__ unsigned window32(unsigned lo, unsigned hi, int sh) {
  return (unsigned)((((unsigned long long)hi << 32) | lo) >> sh);
}
__device__ __forceinline__ unsigned low_bits(int n) { return n >= 32 ? ~0u : (1u << n) - 1u; }

/* The first mask word (index into [K, CW]) whose first value is at flat
 * q or later (K*CW where none is). */
__device__ __forceinline__ long long first_word_from(long long q, long long n, long long C,
                                                     long long CW) {
  if (q >= n)
    return n / C * CW; /* K*CW (the last tile only) */
  const long long k = RowColCursor::quotient(q, C), c = q - k * C;
  const long long w = (c + 31) / 32; /* <= CW */
  return w == CW ? (k + 1) * CW : k * CW + w;
}

/* Grid stride over the flat tiles, a warp per tile: tile(T0) with T0 the
 * flat index of the tile's value 0 (negative for tile 0 where p > 0). */
template <class Tile> __device__ __forceinline__ void flat_tiles(long long n, int p, Tile tile) {
  const WarpGrid wg = warp_grid();
  const long long tiles = (n + p + kFlatTile - 1) / kFlatTile;
  for (long long t = wg.first; t < tiles; t += wg.step) /* uniform over the warp */
    tile(t * kFlatTile - p, wg.lane);
}

__device__ __forceinline__ void relu_pack_flat(unsigned short *y, unsigned *mask,
                                               const unsigned short *x, long long K, long long C) {
  const long long n = K * C, CW = (C + 31) / 32;
  flat_tiles(n, phase16(x), [&](long long T0, int lane) {
    uint4 v[kReluChunks];
#pragma unroll
    for (int j = 0; j < kReluChunks; ++j)
      v[j] = ld8_flat(x, T0 + j * 32 * kLaneValues + lane * kLaneValues, n);
    unsigned bytes = 0;
#pragma unroll
    for (int j = 0; j < kReluChunks; ++j) {
      unsigned byte;
      const uint4 r = relu_chunk(v[j], byte);
      st8_window(y, T0 + j * 32 * kLaneValues + lane * kLaneValues, r, 0, n);
      bytes |= byte << (8 * j);
    }
    /* bitmap word `lane`: as in relu_pack_tile */
    unsigned bm = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const unsigned t = __shfl_sync(kFullMask, bytes, 4 * (lane & 7) + b);
      bm |= ((t >> (8 * (lane >> 3))) & 0xFFu) << (8 * b);
    }
    /* bitmap word 32: the next tile's first 32 values */
    unsigned next = 0;
    if (lane < 4) {
      unsigned byte;
      relu_chunk(ld8_flat(x, T0 + kFlatTile + lane * kLaneValues, n), byte);
      next = byte << (8 * lane);
    }
    next |= __shfl_xor_sync(kFullMask, next, 1);
    next |= __shfl_xor_sync(kFullMask, next, 2);
    next = __shfl_sync(kFullMask, next, 0);
    /* the mask words starting in the tile, 32 a round */
    const long long w0 = first_word_from(T0 < 0 ? 0 : T0, n, C, CW);
    const long long w1 = first_word_from(T0 + kFlatTile, n, C, CW);
    for (long long wr = w0; wr < w1; wr += 32) { /* uniform */
      const long long wi = wr + lane;
      int o = 0, len = 0; /* bit offset in the bitmap, bits */
      if (wi < w1) {
        const long long k = RowColCursor::quotient(wi, CW), w = wi - k * CW;
        o = (int)(k * C + 32 * w - T0);
        len = C - 32 * w < 32 ? (int)(C - 32 * w) : 32;
      }
      const int a = o >> 5; /* 0..31 */
      const unsigned lo = __shfl_sync(kFullMask, bm, a);
      const unsigned hi = __shfl_sync(kFullMask, bm, (a + 1) & 31);
      const unsigned word = window32(lo, a == 31 ? next : hi, o & 31) & low_bits(len);
      if (wi < w1)
        mask[wi] = word;
    }
  });
}

__device__ __forceinline__ void relu_unpack_flat(unsigned short *dx, const unsigned short *dy,
                                                 const unsigned *mask, long long K, long long C) {
  const long long n = K * C, CW = (C + 31) / 32;
  flat_tiles(n, phase16(dy), [&](long long T0, int lane) {
    uint4 v[kReluChunks];
#pragma unroll
    for (int j = 0; j < kReluChunks; ++j)
      v[j] = ld8_flat(dy, T0 + j * 32 * kLaneValues + lane * kLaneValues, n);
    /* bitmap word `lane`: the bits of flat q .. q+31, row segment by row
     * segment (a segment: at most 32 bits of a row, within two words) */
    const long long q = T0 + 32 * lane, end = q + 32 < n ? q + 32 : n;
    long long f = q < 0 ? 0 : q;
    unsigned bm = 0;
    if (f < end) {
      long long k = RowColCursor::quotient(f, C), c = f - k * C;
      while (f < end) {
        const int take = (int)(end - f < C - c ? end - f : C - c);
        const unsigned *row = mask + k * CW + (c >> 5);
        const int sh = (int)(c & 31);
        const unsigned lo = ldro(row), hi = sh + take > 32 ? ldro(row + 1) : 0u;
        bm |= (window32(lo, hi, sh) & low_bits(take)) << (f - q);
        f += take;
        ++k;
        c = 0;
      }
    }
#pragma unroll
    for (int j = 0; j < kReluChunks; ++j) {
      const unsigned byte = __shfl_sync(kFullMask, bm, 8 * j + (lane >> 2)) >> (8 * (lane & 3));
      st8_window(dx, T0 + j * 32 * kLaneValues + lane * kLaneValues, unpack_chunk(v[j], byte), 0,
                 n);
    }
  });
}

/* The relu kernels where blocks hold partial warps (a block size that is no
 * multiple of 32), which the tiles' shuffles cannot use: a mask word per
 * thread, scalar accesses. Not inlined, so that this cold path does not
 * take registers from the tiles (inlined, the kernels spilled). */
__device__ __attribute__((noinline)) void relu_pack_words(unsigned short *y, unsigned *mask,
                                                          const unsigned short *x, long long rows,
                                                          long long cols) {
  const long long cw = (cols + 31) / 32;
  for (long long i = grid_thread_index(); i < rows * cw; i += grid_thread_count()) {
    const long long k = RowColCursor::quotient(i, cw), c0 = 32 * (i - k * cw);
    unsigned word = 0;
    for (int e = 0; e < 32 && c0 + e < cols; ++e) {
      const unsigned h = x[k * cols + c0 + e];
      y[k * cols + c0 + e] = (unsigned short)relu_bits(h);
      word |= bf16_positive(h) << e;
    }
    mask[i] = word;
  }
}
__device__ __attribute__((noinline)) void relu_unpack_words(unsigned short *dx,
                                                            const unsigned short *dy,
                                                            const unsigned *mask, long long rows,
                                                            long long cols) {
  const long long cw = (cols + 31) / 32;
  for (long long i = grid_thread_index(); i < rows * cw; i += grid_thread_count()) {
    const long long k = RowColCursor::quotient(i, cw), c0 = 32 * (i - k * cw);
    const unsigned word = mask[i];
    for (int e = 0; e < 32 && c0 + e < cols; ++e) {
      const long long at = k * cols + c0 + e;
      dx[at] = (unsigned short)masked_bit(dy[at], word >> e & 1u);
    }
  }
}

} // namespace

/* ---- kernels ----------------------------------------------------------------- */

/* quant_pack(words, scale, min, x, K, C, bits)                         TEAMS */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    quant_pack(unsigned *words, unsigned short *scale, unsigned short *mins,
               const unsigned short *x, long long K, long long C, int bits) {
  if (K <= 0 || C <= 0)
    return;
  /* !GRID's grid-order words, kRotateWords a warp */
  __shared__ unsigned team_words[kMaxBlock / 32 * kRotateWords];
  /* k*C + 256g + 8l is then a multiple of 8 for every row k */
  const bool grid = C % kLaneValues == 0 && aligned(x, 16);
  with_bits(bits, [&](auto b) {
    constexpr int BITS = decltype(b)::value;
    if (grid)
      quant_pack_rows<BITS, true>(words, scale, mins, x, K, C, team_words);
    else
      quant_pack_rows<BITS, false>(words, scale, mins, x, K, C, team_words);
  });
}

/* dequant_unpack(out, words, scale, min, K, C, bits)                   TEAMS */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    dequant_unpack(unsigned short *out, const unsigned *words, const unsigned short *scale,
                   const unsigned short *mins, long long K, long long C, int bits) {
  if (K <= 0 || C <= 0)
    return;
  __shared__ uint4 smem[kDequantSmemBytes / 16]; /* the spans off the grid */
  const bool grid = C % kLaneValues == 0 && aligned(out, 16);
  /* Off the grid and at 8 bits: the rows loop. 1 to 4 bits on the grid
   * keep the team loop: on an H200 the rows loop ran at 0.94-1.04x its
   * speed there (docs/results/2026-11-29-h200-compress-03bcfe3/ab/grid-*) */
  if (grid && bits != 8) {
    with_team(K * ((C + kGroup - 1) / kGroup), [&](auto t) {
      constexpr int T = decltype(t)::value;
      with_bits(bits, [&](auto b) {
        if constexpr (decltype(b)::value <= 4)
          dequant_unpack_run<decltype(b)::value, T>(out, words, scale, mins, K, C);
      });
    });
    return;
  }
  with_bits(bits, [&](auto b) {
    constexpr int BITS = decltype(b)::value;
    if (grid)
      dequant_unpack_rows<BITS, true>(out, words, scale, mins, K, C, smem);
    else
      dequant_unpack_rows<BITS, false>(out, words, scale, mins, K, C, smem);
  });
}

/* relu_pack(y, mask, x, K, C)                               ELEM over K*CW words */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    relu_pack(unsigned short *y, unsigned *mask, const unsigned short *x, long long K,
              long long C) {
  if (K <= 0 || C <= 0)
    return;
  const long long rows = C % 32 == 0 ? 1 : K, cols = C % 32 == 0 ? K * C : C;
  if ((blockDim.x & 31u) != 0) { /* partial warps (ELEM allows any block) */
    relu_pack_words(y, mask, x, rows, cols);
    return;
  }
  if (C % 32 != 0 && same_phase(x, y)) { /* rows off the 16-byte grid: the flat tiles */
    relu_pack_flat(y, mask, x, K, C);
    return;
  }
  if (cols % kLaneValues == 0 && aligned(x, 16) && aligned(y, 16))
    relu_tiles(rows, cols,
               [&](const ReluTile &tl, int lane) { relu_pack_tile<true>(y, mask, x, tl, lane); });
  else
    relu_tiles(rows, cols,
               [&](const ReluTile &tl, int lane) { relu_pack_tile<false>(y, mask, x, tl, lane); });
}

/* relu_unpack_backward(dx, dy, mask, K, C)                  ELEM over K*CW words */
static __global__ void __launch_bounds__(kMaxBlock, 1)
    relu_unpack_backward(unsigned short *dx, const unsigned short *dy, const unsigned *mask,
                         long long K, long long C) {
  if (K <= 0 || C <= 0)
    return;
  const long long rows = C % 32 == 0 ? 1 : K, cols = C % 32 == 0 ? K * C : C;
  if ((blockDim.x & 31u) != 0) { /* partial warps */
    relu_unpack_words(dx, dy, mask, rows, cols);
    return;
  }
  if (C % 32 != 0 && same_phase(dx, dy)) { /* rows off the 16-byte grid: the flat tiles */
    relu_unpack_flat(dx, dy, mask, K, C);
    return;
  }
  if (cols % kLaneValues == 0 && aligned(dx, 16) && aligned(dy, 16))
    relu_tiles(rows, cols, [&](const ReluTile &tl, int lane) {
      relu_unpack_tile<true>(dx, dy, mask, tl, lane);
    });
  else
    relu_tiles(rows, cols, [&](const ReluTile &tl, int lane) {
      relu_unpack_tile<false>(dx, dy, mask, tl, lane);
    });
}

extern "C" void fp_cuda_register_compress(const void *table[FPK_COUNT]) {
  table[FPK_quant_pack] = reinterpret_cast<const void *>(&quant_pack);
  table[FPK_dequant_unpack] = reinterpret_cast<const void *>(&dequant_unpack);
  table[FPK_relu_pack] = reinterpret_cast<const void *>(&relu_pack);
  table[FPK_relu_unpack_backward] = reinterpret_cast<const void *>(&relu_unpack_backward);
  fp_cuda_register_compress_steps(table); /* the cmp_* steps */
}

extern "C" void fp_cuda_register_tuning_compress(fp_cuda_tuning table[FPK_COUNT]) {
  (void)table; /* one build per kernel */
}
