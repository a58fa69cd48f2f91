/* fuseport CUDA GEMM core: the skinny path's configurations (M <= 16,
 * memory-bound: every operand read once; f32/f16/bf16, both B layouts, every
 * epilogue; gemm_skinny.cu instantiates exactly these rows). Plain C: the
 * planner (backend/cuda/gemm_plan.h) includes it too.
 *
 *   X(INDEX, BM, BN, BK, STAGES, THREADS, SMEM_BYTES, FLAGS)
 *
 * BM is 16. BN is the block's B tile width in columns (a paired block
 * writes BN / 2 outputs: left [n0, ..), right [N + n0, ..)); grid:
 * ceil(N / BN) (paired: N / (BN/2)) column tiles times split_k. Split-K
 * workspace tiles are 16 x BN; K is split over blocks in units of BK
 * (CUDA-core kernels: trans_b 32 * V; row-major BK, or BK / 2 in a
 * tensor-core row, whose CUDA-core fallback passes over BK / 2 rows).
 *
 * STAGES >= 2: f16 and bf16 with 16-byte aligned a, b, lda, ldb (and N,
 *   for a paired row-major B) run on tensor cores: A padded to 16 rows,
 *   B streamed through STAGES cp.async stages of BK x BN, mma.sync
 *   m16n8k16, THREADS / 32 warps side by side along N.
 * Every row also has the CUDA-core kernels (f32, other alignments; STAGES
 * 1: those only), rows padded to 1, 4, 8 or 16 inside:
 *   row-major B [K, NB]: 16-byte vectors of V = 16 / sizeof(T) columns;
 *     BN / V lanes along N, THREADS * V / BN rows of K in flight, each
 *     thread loading BK / that many rows per pass (16-byte loads in flight);
 *     warps sum through shared memory.
 *   trans_b [NB, K]: a warp per output column (4 columns at a time for
 *     M <= 4, 2 above), lanes along K in 16-byte vectors.
 * SMEM_BYTES = max(THREADS / 32 * 16 * BN * 4, (that BK) * 16 * 4, and with
 * STAGES >= 2: STAGES * (16 * BK + BK * BN) * 2).
 * Opt-in shared memory per block: sm_86 99 KiB, sm_80 163 KiB, sm_90 227 KiB.
 */
#ifndef FUSEPORT_GEMM_SKINNY_CONFIGS_H
#define FUSEPORT_GEMM_SKINNY_CONFIGS_H

#include "cuda/gemm_plan.h"

/* lab builds (lab/sm80_lab.cu) time candidate rows beside the table's */
#ifdef FP_GEMM_LAB_ROWS
#define FP_GEMM_SKINNY_LAB_ROWS(X)                                                                 \
  X(5, 16, 64, 128, 8, 128, 163840, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_SPLIT_K)                      \
  X(6, 16, 32, 128, 6, 64, 73728, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_SPLIT_K)
#else
#define FP_GEMM_SKINNY_LAB_ROWS(X)
#endif

/* clang-format off */
#define FP_GEMM_SKINNY_CONFIGS(X)                                                                  \
  /* CUDA cores: 64 B columns a block, 8 warps */                                                  \
  X(0, 16, 64, 256, 1, 256, 32768, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_SPLIT_K)                       \
  /* CUDA cores, wide N: 128 B columns a block, 4 warps */                                         \
  X(1, 16, 128, 64, 1, 128, 32768, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_SPLIT_K)                       \
  /* tensor cores: 64 columns, 4 stages of 128 k, 4 warps; fits sm_86 */                           \
  X(2, 16, 64, 128, 4, 128, 81920, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_SPLIT_K)                       \
  FP_GEMM_SKINNY_LAB_ROWS(X)
/* clang-format on */

#endif
