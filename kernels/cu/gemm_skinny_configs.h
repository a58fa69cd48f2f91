/* fuseport CUDA GEMM core: the skinny path's configurations (M <= 16,
 * memory-bound: every operand read once; f32/f16/bf16, both B layouts, every
 * epilogue; gemm_skinny.cu instantiates exactly these rows). Plain C: the
 * planner (backend/cuda/gemm_plan.h) includes it too.
 *
 *   X(INDEX, BM, BN, BK, STAGES, THREADS, SMEM_BYTES, FLAGS)
 *
 * BM is 16 (rows are padded to 1, 4, 8 or 16 inside). BN is the block's B
 * tile width in columns (a paired block writes BN / 2 outputs: left
 * [n0, ..), right [N + n0, ..)); grid: ceil(N / BN) (paired: N / (BN/2))
 * column tiles times split_k. Split-K workspace tiles are 16 x BN.
 *   row-major B [K, NB]: 16-byte vectors of V = 16 / sizeof(T) columns;
 *     BN / V lanes along N, THREADS * V / BN rows of K in flight, each
 *     thread loading BK / that many rows per pass (16-byte loads in flight);
 *     warps sum through shared memory.
 *   trans_b [NB, K]: a warp per output column (4 columns at a time for
 *     M <= 4, 2 above), lanes along K in 16-byte vectors.
 * K is split over blocks in units of BK (trans_b: 32 * V).
 * SMEM_BYTES = max(THREADS / 32 * 16 * BN * 4, BK * 16 * 4).
 */
#ifndef FUSEPORT_GEMM_SKINNY_CONFIGS_H
#define FUSEPORT_GEMM_SKINNY_CONFIGS_H

#include "cuda/gemm_plan.h"

/* clang-format off */
#define FP_GEMM_SKINNY_CONFIGS(X)                                                                  \
  /* default: 64 B columns a block, 8 warps */                                                     \
  X(0, 16, 64, 256, 1, 256, 32768, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_SPLIT_K)                       \
  /* wide N: 128 B columns a block, 4 warps */                                                     \
  X(1, 16, 128, 64, 1, 128, 32768, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_SPLIT_K)
/* clang-format on */

#endif
