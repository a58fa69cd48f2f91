/* fuseport CUDA GEMM core: the SIMT path's tile configurations (float32 on
 * CUDA cores, true FMA, any alignment; gemm_simt.cu instantiates exactly
 * these rows). Plain C: the planner (backend/cuda/gemm_plan.h) includes it.
 *
 *   X(INDEX, BM, BN, BK, STAGES, THREADS, SMEM_BYTES, FLAGS)
 *
 * Each thread computes 8 x 8 outputs (THREADS = BM * BN / 64) from shared
 * memory double-buffered in registers (STAGES 2). BN is the B tile's width:
 * a PAIRED row's block writes BN / 2 output columns (as in the sm80 table),
 * and split-K workspace tiles are BM x BN. SMEM_BYTES (dynamic) is
 *   2 * BK * ((BM + 4) + (BN + 4)) * 4   (rows padded by 4 floats).
 * The B2B row (gemm2 for f32, N <= BN) keeps its [BM, N] intermediate in
 * shared memory, transposed: SMEM_BYTES adds BN * (BM + 4) * 4; p.ws is not
 * used (larger N: the recipe's two GEMMs through memory).
 */
#ifndef FUSEPORT_GEMM_SIMT_CONFIGS_H
#define FUSEPORT_GEMM_SIMT_CONFIGS_H

#include "cuda/gemm_plan.h"

/* clang-format off */
/* lab builds (lab/sm80_lab.cu) time candidate rows beside the table's */
#ifdef FP_GEMM_LAB_ROWS
#define FP_GEMM_SIMT_LAB_ROWS(X) X(6, 128, 128, 8, 2, 256, 16896, FP_GEMM_CFG_SPLIT_K)
#else
#define FP_GEMM_SIMT_LAB_ROWS(X)
#endif

#define FP_GEMM_SIMT_CONFIGS(X)                                                                    \
  /* big squares: 128x128, 256 threads, 16-deep k-tiles */                                        \
  X(0, 128, 128, 16, 2, 256, 33792, FP_GEMM_CFG_SPLIT_K)                                           \
  /* mid / narrow N: 128x64, 128 threads */                                                        \
  X(1, 128, 64, 8, 2, 128, 12800, FP_GEMM_CFG_SPLIT_K)                                             \
  /* small M and N: 64x64, 64 threads; split-K for long K */                                       \
  X(2, 64, 64, 8, 2, 64, 8704, FP_GEMM_CFG_SPLIT_K)                                                \
  /* paired, big: 128 x 64 outputs a block */                                                      \
  X(3, 128, 128, 8, 2, 256, 16896, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_SPLIT_K)                       \
  /* paired, small: 64 x 32 outputs a block */                                                     \
  X(4, 64, 64, 8, 2, 64, 8704, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_SPLIT_K)                           \
  /* gemm2 (f32), N <= 128: 64 rows' intermediate on chip */                                      \
  X(5, 64, 128, 8, 2, 128, 47616, FP_GEMM_CFG_B2B)                                                 \
  FP_GEMM_SIMT_LAB_ROWS(X)
/* clang-format on */

#endif
