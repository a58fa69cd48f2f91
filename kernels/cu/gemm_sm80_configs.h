/* fuseport CUDA GEMM core: the sm80 path's tile configurations (cp.async +
 * ldmatrix + mma.sync, f16/bf16; gemm_sm80.cu instantiates exactly these
 * rows). Plain C: the planner (backend/cuda/gemm_plan.h) includes it too.
 *
 *   X(INDEX, BM, BN, BK, STAGES, THREADS, SMEM_BYTES, FLAGS)
 *
 * BN is the width of the block's B tile (its accumulator tile): a PAIRED
 * row's block writes BN / 2 output columns (left half of the tile: B's
 * columns [n0, n0 + BN/2), right half: [N + n0, ..)), so its grid has
 * ceil(N / (BN/2)) column tiles, and the split-K workspace's tiles are
 * BM x BN (split_workspace_bytes(tiles, split_k, BM, BN)).
 * A B2B row is gemm2's: BN is the largest N it keeps on chip; its block
 * holds a BM x BN intermediate and streams d in 32 x 128 tiles (3 stages).
 * SMEM_BYTES is the dynamic shared memory the kernel asks for:
 *   STAGES * (BM*BK + BK*BN) * 2, and for B2B rows
 *   max(that, 3 * 32 * 128 * 2) + BM * BN * 2.
 * Warps: the warp grid is the one whose warp tile is closest to square
 * (ties: taller), e.g. 128x256 / 8 warps -> 2 x 4 warps of 64 x 64.
 * Opt-in shared memory per block: sm_86 99 KiB, sm_80 163 KiB, sm_90 227 KiB.
 */
#ifndef FUSEPORT_GEMM_SM80_CONFIGS_H
#define FUSEPORT_GEMM_SM80_CONFIGS_H

#include "cuda/gemm_plan.h"

/* lab builds (lab/sm80_lab.cu) time candidate rows beside the table's */
#ifdef FP_GEMM_LAB_ROWS
#define FP_GEMM_SM80_LAB_ROWS(X)                                                                   \
  X(13, 128, 256, 32, 6, 256, 147456, 0)                                                           \
  X(14, 128, 256, 64, 3, 256, 147456, 0)
#else
#define FP_GEMM_SM80_LAB_ROWS(X)
#endif

/* clang-format off */
#define FP_GEMM_SM80_CONFIGS(X)                                                                    \
  /* big squares: 2x4 warps of 64x64, 5 stages; sm_80 / sm_90 */                                   \
  X(0, 128, 256, 32, 5, 256, 122880, 0)                                                            \
  /* big squares, 4 stages: fits sm_86 */                                                          \
  X(1, 128, 256, 32, 4, 256, 98304, 0)                                                             \
  /* mid shapes: 2x2 warps of 64x64, two blocks an SM */                                           \
  X(2, 128, 128, 32, 4, 128, 65536, FP_GEMM_CFG_SPLIT_K)                                           \
  /* small M (or N): 1x4 warps of 64x32 */                                                         \
  X(3, 64, 128, 32, 4, 128, 49152, FP_GEMM_CFG_SPLIT_K)                                            \
  /* small M and N, long K: split-K's tile */                                                      \
  X(4, 64, 64, 64, 3, 128, 49152, FP_GEMM_CFG_SPLIT_K)                                             \
  /* paired (SPLIT_ACT, GEGLU), big: 128 x 128 outputs a block */                                  \
  X(5, 128, 256, 32, 4, 256, 98304, FP_GEMM_CFG_PAIRED)                                            \
  /* paired, small / split-K: 64 x 64 outputs a block */                                           \
  X(6, 64, 128, 32, 4, 128, 49152, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_SPLIT_K)                       \
  /* gemm2 (b2b), N <= 128: 2x4 warps */                                                           \
  X(7, 64, 128, 32, 3, 256, 53248, FP_GEMM_CFG_B2B)                                                \
  /* gemm2 (b2b), N <= 256: 1x8 warps */                                                           \
  X(8, 64, 256, 32, 3, 256, 94208, FP_GEMM_CFG_B2B)                                                \
  FP_GEMM_SM80_LAB_ROWS(X)
/* clang-format on */

#endif
