/* fuseport CUDA kernels, family horizontal: two results from one read of the
 * input, ROWS geometry over contiguous row-major [M, N]. Semantics:
 * kernels/kernels.def; reference: kernels/cpu/horizontal.c.
 *
 * Both kernels stream each row once (head scalars, 16-byte vectors with two
 * loads in flight per thread, tail scalars; fpcu::part_stream), accumulate per
 * thread and finish with one team reduction per row (a block, a warp or a
 * cluster holds the row; see the builds below). No row cache is needed:
 * nothing is read twice. hreduce_reduce, which writes only two floats a
 * row, streams with evict-first loads up to a size (ldcs4, see below). 32
 * and 40 registers (2048 and 1536 resident threads per SM) without spills
 * but for 4 bytes in hreduce_pointwise's cluster build; see reduce.cu for
 * why __maxnreg__. The 32-byte stack frame of hreduce_pointwise_fused is
 * cosf's own: its Payne-Hanek argument reduction, taken only for
 * |x| > 105615, works on a local array.
 */
#include "device_common.cuh"

using namespace fpcu;

namespace {

/* sum and NaN-propagating max, reduced together (one pair of barriers). */
struct SumMax {
  float sum, max;
};

struct CombineSumMax {
  __device__ __forceinline__ SumMax operator()(SumMax a, SumMax b) const {
    SumMax r;
    r.sum = a.sum + b.sum;
    r.max = fp_maximum(a.max, b.max);
    return r;
  }
};

__device__ __forceinline__ SumMax sum_max_empty() {
  SumMax e;
  e.sum = 0.0f;
  e.max = -CUDART_INF_F;
  return e;
}

__device__ __forceinline__ void sum_max_add(SumMax &st, float v) {
  st.sum += v;
  st.max = fp_maximum(st.max, v);
}

template <class Team>
__device__ __forceinline__ void hreduce_pointwise_rows(const Team &team, float *sum, float *cosx,
                                                       const float *a, long long M, long long N) {
  for (long long row = team.first_row(); row < M; row += team.row_step()) {
    const float *a_row = a + row * N;
    float *cos_row = cosx + row * N;
    const RowPart p = team.part(row_split(a_row, N));
    const bool cos_vec = aligned16(cos_row + p.s.head);
    const float *a_body = a_row + p.s.head;
    float *cos_body = cos_row + p.s.head;
    float acc = 0.0f;
    part_stream<2>(
        team, p,
        [&](long long j) {
          const float v = __ldg(a_row + j);
          cos_row[j] = cosf(v);
          acc += v;
        },
        [&](long long v) { return ldg4(a_body + 4 * v); },
        [&](long long v, float4 x) {
          st4_any(cos_body + 4 * v, map4(x, [](float e) { return cosf(e); }), cos_vec);
          acc += (x.x + x.y) + (x.z + x.w);
        });
    acc = team.allreduce(acc, 0.0f, SumOp());
    if (team.leader())
      sum[row] = acc;
  }
}

/* Evict-first loads (ldcs4) save writing back what the L2 held dirty
 * before the kernel, and cost about 3.5% of the streaming rate. On the
 * H100 (50 MiB of L2; 120e041:docs/results/2026-11-23-h100-l2hint/) they were
 * 1.06-1.20x faster up to 128 MiB, 1.00-1.03x at 256 MiB and 0.96-0.97x
 * from 512 MiB on, so inputs larger than this read with ldg4. Below
 * kEvictFirstMinBytes ldg4's evict_last did better still (three alternating
 * rounds, 2026-11-24, 120e041:docs/results/2026-11-24-h100-evict-last/hreduce/):
 * 128-256 rows of 512-4096 1.14-1.34x, 1024 x 1024 8.00 -> 5.86 us. */
constexpr long long kEvictFirstMaxBytes = 256ll << 20;
constexpr long long kEvictFirstMinBytes = 16ll << 20;

template <class Team>
__device__ __forceinline__ void hreduce_reduce_rows(const Team &team, float *sum, float *amax,
                                                    const float *a, long long M, long long N) {
  const bool evict_first = M * N >= kEvictFirstMinBytes / (long long)sizeof(float) &&
                           M * N <= kEvictFirstMaxBytes / (long long)sizeof(float);
  for (long long row = team.first_row(); row < M; row += team.row_step()) {
    const float *a_row = a + row * N;
    const RowPart p = team.part(row_split(a_row, N));
    const float *a_body = a_row + p.s.head;
    SumMax st = sum_max_empty();
    part_stream<2>(
        team, p,
        [&](long long j) { sum_max_add(st, evict_first ? ldcs(a_row + j) : __ldg(a_row + j)); },
        [&](long long v) { return evict_first ? ldcs4(a_body + 4 * v) : ldg4(a_body + 4 * v); },
        [&](long long, float4 x) {
          st.sum += (x.x + x.y) + (x.z + x.w);
          st.max = fp_maximum(st.max, fp_maximum(fp_maximum(x.x, x.y), fp_maximum(x.z, x.w)));
        });
    st = team.allreduce(st, sum_max_empty(), CombineSumMax());
    if (team.leader()) {
      sum[row] = st.sum;
      amax[row] = st.max;
    }
  }
}

} // namespace

/* ---- kernels ----------------------------------------------------------------- */

/* Three builds each: a block per row (the registered one), a warp per row
 * for rows of up to 1024 floats (8 rows per block: a block of 32 threads
 * per short row would be capped at 32 blocks, 1024 threads, per SM; rows
 * of up to 16 or 64 floats on 4 or 16 of its lanes, FP_ROWS_WARP_LANES_LOG2), and a
 * cluster of blocks per row on sm_90 (a few long rows spread over the GPU).
 * Nothing is cached, so any row length suits every build. */

#define FPCU_HREDUCE_PARAMS (float *sum, float *out2, const float *a, long long M, long long N)
#define FPCU_HREDUCE_KERNEL(NAME, ROWS_FN, REGS_BLOCK, REGS)                                       \
  static __global__ void __maxnreg__(REGS_BLOCK) NAME FPCU_HREDUCE_PARAMS {                        \
    FPCU_ROWS_BLOCK(ROWS_FN(team, sum, out2, a, M, N));                                            \
  }                                                                                                \
  static __global__ void __maxnreg__(REGS) NAME##_warp FPCU_HREDUCE_PARAMS {                       \
    FPCU_ROWS_WARP(N, ROWS_FN(team, sum, out2, a, M, N));                                          \
  }                                                                                                \
  static __global__ void __maxnreg__(REGS) NAME##_cluster FPCU_HREDUCE_PARAMS {                    \
    FPCU_ROWS_CLUSTER(ROWS_FN(team, sum, out2, a, M, N));                                          \
  }

/* hreduce_pointwise_fused(sum, cosx, a, M, N)                         ROWS
 * sum[i] = sum_j a[i,j]; cosx[i,j] = cos(a[i,j]). 40 registers: 32 would
 * spill around cosf. */
FPCU_HREDUCE_KERNEL(hreduce_pointwise_fused, hreduce_pointwise_rows, 40, 40)

/* hreduce_reduce_fused(sum, amax, a, M, N)                            ROWS
 * sum[i] = sum_j a[i,j]; amax[i] = max_j a[i,j] (NaN propagates). The
 * block build fits 32 registers; the warp build spills there, so 40. */
FPCU_HREDUCE_KERNEL(hreduce_reduce_fused, hreduce_reduce_rows, 32, 40)

extern "C" void fp_cuda_register_horizontal(const void *table[FPK_COUNT]) {
  table[FPK_hreduce_pointwise_fused] = reinterpret_cast<const void *>(&hreduce_pointwise_fused);
  table[FPK_hreduce_reduce_fused] = reinterpret_cast<const void *>(&hreduce_reduce_fused);
}

extern "C" void fp_cuda_register_tuning_horizontal(fp_cuda_tuning table[FPK_COUNT]) {
  /* (sum, out2, a, M, N): M and N are arguments 3 and 4; the warp build
   * takes rows of up to 1024 floats, and the cluster's blocks (which cache
   * nothing) any share; hreduce_pointwise's 40 registers fit one block of
   * 1024 per SM but three of 512 (its full_block) */
  table[FPK_hreduce_pointwise_fused] = rows_tuning(
      nullptr, nullptr, reinterpret_cast<const void *>(&hreduce_pointwise_fused_warp),
      reinterpret_cast<const void *>(&hreduce_pointwise_fused_cluster), 3, 4, 0, 8, 0, 0, 512, 0);
  table[FPK_hreduce_reduce_fused] = rows_tuning(
      nullptr, nullptr, reinterpret_cast<const void *>(&hreduce_reduce_fused_warp),
      reinterpret_cast<const void *>(&hreduce_reduce_fused_cluster), 3, 4, 0, 8, 0, 0, 0, 0);
  /* many rows of 1025..4096 floats: blocks of N/8 threads, up to these
   * (cuda_plan.c has the measurements) */
  table[FPK_hreduce_pointwise_fused].offer.stream_block_cap = 512;
  table[FPK_hreduce_reduce_fused].offer.stream_block_cap = 256;
}
