/* fuseport CUDA kernels, family compress: the device helpers that both
 * compress.cu (the fused kernels) and compress_steps.cu (the unfused steps)
 * use: 16-byte and read-only accesses, the quantisation teams (Team,
 * group_at, load_team_values, team_min_max, team_groups) that
 * dequant_unpack and cmp_group_reduce share (quant_pack's rows loop,
 * compress_rows.cuh, uses Team and team_min_max), and the relu mask's bfloat16
 * test and product. Helpers of one file alone stay in that file. Semantics:
 * kernels/kernels.def, family compress; the layout of a team's values:
 * compress.cu's opening comment.
 *
 * The helpers are in an anonymous namespace, as they were in compress.cu:
 * each of the two files gets its own copy (all inline or templates).
 */
#ifndef FUSEPORT_COMPRESS_COMMON_CUH
#define FUSEPORT_COMPRESS_COMMON_CUH

#include "device_common.cuh"

#include <type_traits>

/* compress_steps.cu: table[FPK_cmp_*] = the unfused steps' host stubs;
 * fp_cuda_register_compress (compress.cu) calls it. */
extern "C" void fp_cuda_register_compress_steps(const void *table[FPK_COUNT]);

using namespace fpcu;

namespace {

constexpr int kGroup = FP_QGROUP; /* values per quantisation group */
constexpr int kLaneValues = 8;    /* bfloat16 values per lane and chunk: 16 bytes */
/* groups a team of cmp_group_reduce has in flight: it keeps its loaded
 * values in registers (two groups of 4 x 16 bytes a lane spilled beside
 * the scalar path of the team loop that quant_pack had) */
constexpr int kPackUnroll = 1;

/* ---- memory access ----------------------------------------------------------- */

__device__ __forceinline__ bool aligned(const void *p, unsigned bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1u)) == 0;
}

/* A read-only load (ld.global.nc; the emulation has no __ldg for these types). */
template <class T> __device__ __forceinline__ T ldro(const T *p) {
#ifdef FPCU_EMULATION
  return *p;
#else
  return __ldg(p);
#endif
}

/* 16 bytes of read-only bits at p (16-byte aligned), with ldg4's cache policy. */
__device__ __forceinline__ uint4 ld16(const unsigned short *p) {
  const float4 v = ldg4(reinterpret_cast<const float *>(p));
  return make_uint4(FP_FLOAT_AS_BITS(v.x), FP_FLOAT_AS_BITS(v.y), FP_FLOAT_AS_BITS(v.z),
                    FP_FLOAT_AS_BITS(v.w));
}

/* Word m of a uint4 (m a constant after unrolling). */
__device__ __forceinline__ unsigned word_of(const uint4 &v, int m) {
  return m == 0 ? v.x : m == 1 ? v.y : m == 2 ? v.z : v.w;
}
__device__ __forceinline__ void set_word(uint4 &v, int m, unsigned w) {
  if (m == 0)
    v.x = w;
  else if (m == 1)
    v.y = w;
  else if (m == 2)
    v.z = w;
  else
    v.w = w;
}

/* Eight bfloat16 values one at a time, those from `valid` on as 0 (p is
 * only dereferenced below valid). */
__device__ __forceinline__ uint4 ld8_scalar(const unsigned short *p, int valid) {
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const unsigned lo = 2 * m < valid ? ldro(p + 2 * m) : 0u;
    const unsigned hi = 2 * m + 1 < valid ? ldro(p + 2 * m + 1) : 0u;
    set_word(v, m, lo | hi << 16);
  }
  return v;
}

/* The element offset of p from the 16-byte grid (p 2-byte aligned). */
__device__ __forceinline__ int phase16(const void *p) {
  return (int)((reinterpret_cast<uintptr_t>(p) >> 1) & 7u);
}
/* Both bases 2-byte aligned and at the same offset from the 16-byte grid. */
__device__ __forceinline__ bool same_phase(const void *a, const void *b) {
  return aligned(a, 2) && aligned(b, 2) && phase16(a) == phase16(b);
}

/* The 8 values at flat f .. f+7 of an n-value array, 0 outside [0, n): one
 * 16-byte load where all are inside (f on the 16-byte grid). */
__device__ __forceinline__ uint4 ld8_flat(const unsigned short *p, long long f, long long n) {
  if (f >= 0 && f + kLaneValues <= n)
    return ld16(p + f);
  /* the array's first or last chunk: a loop, not unrolled (unrolled, the
   * eight predicated loads per chunk took registers the callers' 16-byte
   * paths need: the kernels run at 64 a thread) */
  unsigned long long lo = 0, hi = 0;
#pragma unroll 1
  for (int e = 0; e < kLaneValues; ++e) {
    const unsigned long long h = f + e >= 0 && f + e < n ? ldro(p + f + e) : 0u;
    if (e < 4)
      lo |= h << (16 * e);
    else
      hi |= h << (16 * (e - 4));
  }
  return make_uint4((unsigned)lo, (unsigned)(lo >> 32), (unsigned)hi, (unsigned)(hi >> 32));
}
/* Values s .. s + 7 (s in 0..8) of the 16 values lo, hi (lo's first). With
 * constant register indices: a barrel shift of the eight words by s / 2,
 * then a half word where s is odd. */
__device__ __forceinline__ uint4 values_at(const uint4 &lo, const uint4 &hi, int s) {
  unsigned t[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
  for (int d = 4; d >= 1; d >>= 1)
    if (s & (2 * d)) {
#pragma unroll
      for (int i = 0; i < 8; ++i)
        t[i] = i + d < 8 ? t[i + d] : 0u;
    }
  uint4 r;
#pragma unroll
  for (int m = 0; m < 4; ++m)
    set_word(r, m, (s & 1) ? (t[m] >> 16 | t[m + 1] << 16) : t[m]);
  return r;
}

/* v from lane src. */
__device__ __forceinline__ uint4 shfl4(const uint4 &v, int src) {
  return make_uint4(__shfl_sync(kFullMask, v.x, src), __shfl_sync(kFullMask, v.y, src),
                    __shfl_sync(kFullMask, v.z, src), __shfl_sync(kFullMask, v.w, src));
}

/* ---- warps, teams and groups ---------------------------------------------------------- */

/* This warp's index in the grid, the number of warps and the lane: needs a
 * block size that is a multiple of 32 (TEAMS; the relu kernels check). */
struct WarpGrid {
  long long first, step;
  int lane;
};
__device__ __forceinline__ WarpGrid warp_grid() {
  return {grid_thread_index() >> 5, grid_thread_count() >> 5, (int)(threadIdx.x & 31u)};
}

/* A team of T lanes per quantisation group (T = 8 or 32), 32 / T groups
 * per warp at a time. Rank r of a team holds values 8Tj + 8r .. 8Tj + 8r + 7
 * of its group for chunk j < 32 / T: one 16-byte access per lane and chunk,
 * 16T contiguous bytes per team.
 *
 * T = 8 is the cheaper schedule: a warp instruction serves four groups in
 * the per-group work (the min/max exchange, the two divisions, the bf16
 * scale, the index arithmetic), which with a warp per group costs about as
 * many instructions as the per-value work (a count of quant_pack's PTX;
 * not measured on a device). But a launch with a warp per group or more
 * (ops/compress.c's teams_range gives a block of 256 per 8 groups) would
 * leave three warps in four without a group, most blocks starting only to
 * exit; there T = 32 keeps every warp busy. The kernels pick T from the
 * launch (team_size); the results are the same bits either way (min, max
 * and the codes do not depend on the order). */
template <int T> struct Team {
  static_assert(T == 8 || T == 32, "8 or 32 lanes per group");
  static constexpr int kPerWarp = 32 / T;                    /* groups a warp holds */
  static constexpr int kChunks = kGroup / (T * kLaneValues); /* 16-byte accesses per lane */
  static constexpr int kChunkValues = T * kLaneValues;
  static __device__ __forceinline__ int rank() { return (int)(threadIdx.x % T); }
};

/* 32 where the launch has at least a warp per group, else 8 (see Team). */
__device__ __forceinline__ int team_size(long long groups) {
  return (grid_thread_count() >> 5) >= groups ? 32 : 8;
}

/* Group `unit` = k*G + g of x [K, C]: the offset of its first value, and how
 * many of its values lie before column C (1..256; the rest read as 0). One
 * division, in 32 bits below 2^32 groups. */
struct GroupAt {
  long long offset;
  int valid;
};
__device__ __forceinline__ GroupAt group_at(long long unit, long long C, long long G) {
  const long long k = RowColCursor::quotient(unit, G);
  const long long c0 = (unit - k * G) * kGroup, rest = C - c0;
  return {k * C + c0, rest < kGroup ? (int)rest : kGroup};
}

/* A rank's values of a group, chunk by chunk (bfloat16 patterns). */
template <int T> struct RankValues { uint4 v[Team<T>::kChunks]; };

/* Loads rank r's values of a group, 0 past column C, where x and every row
 * start are 16-byte aligned (C % 8 == 0): each chunk's 8 values are all
 * before or all past C (valid is then a multiple of 8). */
template <int T>
__device__ __forceinline__ RankValues<T> load_rank_values(const unsigned short *x,
                                                          const GroupAt &at, int r) {
  RankValues<T> rv;
#pragma unroll
  for (int j = 0; j < Team<T>::kChunks; ++j) {
    const int c = j * Team<T>::kChunkValues + r * kLaneValues;
    rv.v[j] = c < at.valid ? ld16(x + at.offset + c) : make_uint4(0u, 0u, 0u, 0u);
  }
  return rv;
}

/* load_rank_values where rows start off the 16-byte grid (C % 8 != 0: a
 * row of odd C starts at any 2-byte offset; or x itself off it), in place
 * of eight 2-byte loads a chunk: the group starts a values past the grid
 * (x's phase: its offset from the grid in values), so rank r's values of
 * chunk j lie in the grid chunk that starts a values before them (loaded
 * by r with one 16-byte load) and in the next one, which the next rank
 * loads (rank 0's of chunk j + 1 for rank T - 1; rank T - 1 loads the one
 * past the group's last chunk itself): a shuffle, then values_at. Loads
 * stay inside the array's n values (ld8_flat); values past column C read
 * as 0. Every lane of the warp calls it (the shuffles), active or not. */
template <int T>
__device__ __forceinline__ RankValues<T> load_rank_values_grid(const unsigned short *x,
                                                               const GroupAt &at, bool active,
                                                               int r, long long n, int phase) {
  constexpr int J = Team<T>::kChunks;
  const int a = (int)((at.offset + phase) & 7);
  const int right = (int)(threadIdx.x & 31u & ~(unsigned)(T - 1)) | ((r + 1) & (T - 1));
  RankValues<T> rv;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int c = j * Team<T>::kChunkValues + r * kLaneValues - a; /* from the group's start */
    rv.v[j] = active && c < at.valid ? ld8_flat(x, at.offset + c, n) : make_uint4(0u, 0u, 0u, 0u);
  }
  const bool last = r == T - 1, first = r == 0;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    /* one shuffle: rank 0's chunk goes only to rank T - 1, which needs it
     * from the next chunk; past the group's last chunk rank T - 1 loads the
     * grid chunk itself (here, late: held over the loop it made quant_pack
     * spill). Word by word: a select of two uint4 went through local memory. */
    uint4 hi;
    if (j + 1 < J) {
      const uint4 &g = rv.v[j], &g1 = rv.v[j + 1];
      hi = shfl4(make_uint4(first ? g1.x : g.x, first ? g1.y : g.y, first ? g1.z : g.z,
                            first ? g1.w : g.w),
                 right);
    } else {
      hi = shfl4(rv.v[j], right);
      if (active && last && kGroup - a < at.valid)
        hi = ld8_flat(x, at.offset + kGroup - a, n);
    }
    uint4 v = values_at(rv.v[j], hi, a);
    const int lim = at.valid - (j * Team<T>::kChunkValues + r * kLaneValues); /* values < C */
#pragma unroll
    for (int m = 0; m < 4; ++m)
      set_word(v, m,
               word_of(v, m) &
                   ((2 * m < lim ? 0xFFFFu : 0u) | (2 * m + 1 < lim ? 0xFFFF0000u : 0u)));
    rv.v[j] = v;
  }
  return rv;
}

/* A rank's values of group `unit` (all lanes call it: the shuffles of the
 * grid loader); zeros where !active. VEC: rows on the 16-byte grid; else
 * load_rank_values_grid. */
template <int T, bool VEC>
__device__ __forceinline__ RankValues<T> load_team_values(const unsigned short *x, long long unit,
                                                          bool active, long long C, long long G,
                                                          int r, long long n, int phase) {
  const GroupAt at = active ? group_at(unit, C, G) : GroupAt{0, 0};
  if constexpr (VEC) {
    RankValues<T> rv = {};
    if (active)
      rv = load_rank_values<T>(x, at, r);
    return rv;
  } else {
    return load_rank_values_grid<T>(x, at, active, r, n, phase);
  }
}

/* min / max of the two bfloat16 halves of a and b, half by half (min.bf16x2,
 * sm_80): a NaN loses to a number, two NaNs give the canonical 0x7FFF. On
 * bfloat16 values this is fminf / fmaxf's result exactly. */
__device__ __forceinline__ unsigned bf16x2_min(unsigned a, unsigned b) {
#if !defined(FPCU_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned r;
  asm("min.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  unsigned r = 0;
  for (int h = 0; h < 2; ++h) {
    const float m = fminf(fp_bf16_bits_to_f32(a >> (16 * h)), fp_bf16_bits_to_f32(b >> (16 * h)));
    r |= (m != m ? 0x7FFFu : FP_FLOAT_AS_BITS(m) >> 16) << (16 * h);
  }
  return r;
#endif
}
__device__ __forceinline__ unsigned bf16x2_max(unsigned a, unsigned b) {
#if !defined(FPCU_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned r;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  unsigned r = 0;
  for (int h = 0; h < 2; ++h) {
    const float m = fmaxf(fp_bf16_bits_to_f32(a >> (16 * h)), fp_bf16_bits_to_f32(b >> (16 * h)));
    r |= (m != m ? 0x7FFFu : FP_FLOAT_AS_BITS(m) >> 16) << (16 * h);
  }
  return r;
#endif
}

/* The min and max of a team's group, in every rank of the team, as bfloat16
 * patterns: pairwise on the packed words (no conversion to float), then
 * min(mn, -mx) in one word, so that one shuffle and one min.bf16x2 per
 * butterfly step carry both (-x is exact: the sign bit). NaN is ignored,
 * as by the CPU's `v < mn ? v : mn`; every rank gets the same bits (the
 * butterfly combines commutatively). The xor distances stay inside the
 * team. Which zero a group of -0 and +0 reports may differ from the CPU's
 * (its first); the codes do not depend on it. */
struct MinMaxBits {
  unsigned mn, mx;
};
template <int T> __device__ __forceinline__ MinMaxBits team_min_max(const RankValues<T> &rv) {
  unsigned lo = bf16x2_min(bf16x2_min(rv.v[0].x, rv.v[0].y), bf16x2_min(rv.v[0].z, rv.v[0].w));
  unsigned hi = bf16x2_max(bf16x2_max(rv.v[0].x, rv.v[0].y), bf16x2_max(rv.v[0].z, rv.v[0].w));
#pragma unroll
  for (int j = 1; j < Team<T>::kChunks; ++j) {
    lo = bf16x2_min(lo,
                    bf16x2_min(bf16x2_min(rv.v[j].x, rv.v[j].y), bf16x2_min(rv.v[j].z, rv.v[j].w)));
    hi = bf16x2_max(hi,
                    bf16x2_max(bf16x2_max(rv.v[j].x, rv.v[j].y), bf16x2_max(rv.v[j].z, rv.v[j].w)));
  }
  const unsigned neg_hi = hi ^ 0x80008000u;
  /* (min, -max) of the even values against those of the odd ones */
  unsigned both = bf16x2_min((lo & 0xFFFFu) | neg_hi << 16, (lo >> 16) | (neg_hi & 0xFFFF0000u));
#pragma unroll
  for (int mask = T / 2; mask > 0; mask >>= 1)
    both = bf16x2_min(both, __shfl_xor_sync(kFullMask, both, mask));
  /* a group of NaNs alone: min +inf and max -inf, as the CPU's loop from
   * those starting values leaves them (both halves NaN together) */
  if ((both & 0x7FFFu) > 0x7F80u)
    return {0x7F80u, 0xFF80u};
  return {both & 0xFFFFu, (both >> 16) ^ 0x8000u};
}

/* f(std::integral_constant<int, BITS>) for bits in {1, 2, 4, 8}; nothing
 * for another value (the layer's callers pass only those). */
template <class F> __device__ __forceinline__ void with_bits(int bits, F f) {
  switch (bits) {
  case 1:
    f(std::integral_constant<int, 1>());
    break;
  case 2:
    f(std::integral_constant<int, 2>());
    break;
  case 4:
    f(std::integral_constant<int, 4>());
    break;
  case 8:
    f(std::integral_constant<int, 8>());
    break;
  default:
    break;
  }
}

/* f(std::integral_constant<int, T>) for the team size of this launch. */
template <class F> __device__ __forceinline__ void with_team(long long groups, F f) {
  if (team_size(groups) == 32)
    f(std::integral_constant<int, 32>());
  else
    f(std::integral_constant<int, 8>());
}

/* Runs use(unit, active, load(unit, active)) over the `groups` groups with
 * a team of T lanes per group: the warps stride over rounds of 32 / T
 * consecutive groups (team t of the round takes the t-th, so a warp's
 * accesses to the packed words are contiguous), U rounds in flight
 * (strided_unrolled: the U loads first). Every lane runs every round of its
 * warp, a team past the last group with active false (loading nothing,
 * storing nothing), because the team's shuffles need the whole warp. */
template <int T, int U, class Load, class Use>
__device__ __forceinline__ void team_groups(long long groups, Load load, Use use) {
  constexpr int P = Team<T>::kPerWarp;
  const WarpGrid wg = warp_grid();
  const int team = wg.lane / T;
  strided_unrolled<U>(
      wg.first, (groups + P - 1) / P, wg.step,
      [&](long long round) {
        const long long unit = round * P + team;
        return load(unit, unit < groups);
      },
      [&](long long round, const auto &item) {
        const long long unit = round * P + team;
        use(unit, unit < groups, item);
      });
}

/* ---- the relu mask -------------------------------------------------------------- */

/* bfloat16 x > 0: the patterns 0x0001 (least positive subnormal) to 0x7F80
 * (+inf); 0, negatives and NaN are not. */
__device__ __forceinline__ unsigned bf16_positive(unsigned h) { return h - 1u < 0x7F80u ? 1u : 0u; }

/* dy * m in float, rounded to bfloat16: the product's rules (NaN * 0 and
 * inf * 0 are NaN, -x * 0 is -0). */
__device__ __forceinline__ unsigned masked_bits(unsigned h, float m) {
  return fp_f32_to_bf16_bits(fp_fmul_rn(fp_bf16_bits_to_f32(h), m));
}

} // namespace

#endif
