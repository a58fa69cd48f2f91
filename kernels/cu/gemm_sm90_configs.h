/* fuseport GEMM, path SM90 (TMA + wgmma, Hopper sm_90a): the tile
 * configurations, as data (the X-macro convention of
 * backend/cuda/gemm_plan.h). Plain C: the planner includes it too; FLAGS
 * name FP_GEMM_CFG_* bits, so include gemm_plan.h before expanding.
 *
 *   X(INDEX, BM, BN, BK, STAGES, THREADS, SMEM_BYTES, FLAGS)
 *
 * Every row but the last five: BM = 128 (two consumer warpgroups of 64
 * rows; one producer warpgroup issues TMA), BK = 64 (one 128-byte swizzle
 * row of 16-bit values), THREADS = 384, a persistent grid. Rows 13-17 are
 * gemm2 in 64-row units (gemm2_rows64_kernel, gemm_sm90_b2b.cuh): THREADS =
 * 160 (one consumer warpgroup and a producer warp), SMEM_BYTES = 1024 +
 * STAGES * max((64 + BN) * BK * 2, 16384) (a stage holds A and B, or one
 * [64, 128] d chunk) + B * 16384 (B buffers of a 64 x 128 out tile) +
 * STAGES * 16: two blocks an SM with B = 2 where that fits 228 KiB, else
 * one with B = as many as fit the opt-in, at most 4 (gemm_sm90_b2b.cuh).
 * BN is the width of one wgmma (m64nBNk16) per consumer warpgroup (64,
 * 128, 192 or 256; 192: no CLUSTER2, PAIRED or B2B; 224: SWAP only); a
 * PAIRED row's block stores BN / 2 output columns (the left and right
 * halves of its B tile; BN / 2 - 8 when B is [K, 2N] row-major and N % 8
 * != 0, see gemm_sm90.cu). A B2B row computes gemm2_<dt> for N <= BN: its
 * [BM, N] intermediate stays in registers, and d is streamed in [64, 128]
 * chunks through the same stages.
 *
 * A SWAP row computes out^T = B A^T with the same main loop: its 128 tile
 * rows are B's (out's columns), its BN tile columns A's (out's rows, a
 * convolution's pixels by im2col), so M is cut in tiles of any multiple of
 * 8 (gemm_sm90.cu, the swapped epilogue).
 *
 * SMEM_BYTES = 1024 (alignment slack: swizzled tiles start 1024-aligned)
 *            + STAGES * (BM + BN) * BK * 2 (the A and B tiles of a stage)
 *            + 2 * E * 8192 (each consumer warpgroup's E staging boxes of
 *              64 x 64 output values: E = min(OUT / 64, as many as fit
 *              beside the rest in the 232448-byte opt-in; the other
 *              OUT / 64 - E go into the stage of the tile's last k-block);
 *              OUT = BN, BN / 2 for PAIRED, 0 for B2B, BN rounded up to
 *              64 for SWAP, whose warpgroup stages its BN x 64 transposed
 *              tile in its E = OUT / 64 boxes at once, never borrowing)
 *            + 2 * OUT * 2 (each consumer warpgroup's bias row: OUT values)
 *            + STAGES * 16 (a full and an empty mbarrier per stage)
 *            + 32 unless B2B (two mbarriers per consumer warpgroup) + 16,
 * the exact dynamic shared memory the kernel asks for (gemm_sm90.cu
 * checks it at compile time); all are within the H100's 227 KiB opt-in.
 * A SPLIT_K row's workspace counts tiles = ceil(M / BM) * ceil(N / W),
 * W = BN (BN / 2 for PAIRED), with bm = BM and bn = BN in
 * split_workspace_bytes (a tile's slice holds its whole BN-wide product);
 * the narrower shifted PAIRED tiles use fewer splits if that does not fit.
 * A SWAP row's tiles are ceil(N / BM) * ceil(M / BN), its split_k divides
 * BN / 8 (each block of a tile sums and stores BN / split_k of its columns:
 * gemm_sm90.cu), and its workspace has a second row of counters
 * (split_counters_bytes(tiles) more, the departures).
 * The planner's rules for these rows (measured on an H100): gemm_plan.c,
 * sm90_config_cost and its neighbours.
 */
#ifndef FUSEPORT_GEMM_SM90_CONFIGS_H
#define FUSEPORT_GEMM_SM90_CONFIGS_H

/* clang-format off */
#define FP_GEMM_SM90_CONFIGS(X)                                                                    \
  /* big GEMMs: 128x256 tiles in M-pairs, B multicast to both (half the L2 reads of B) */          \
  X(0, 128, 256, 64, 4, 384, 231536, FP_GEMM_CFG_CLUSTER2)                                         \
  /* big GEMMs without clusters (odd tile rows, or when pairs do not fill the GPU) */              \
  X(1, 128, 256, 64, 4, 384, 231536, 0)                                                            \
  /* mid sizes (more tiles than 128x256 gives); split-K for few tiles and long K */                \
  X(2, 128, 128, 64, 6, 384, 231056, FP_GEMM_CFG_SPLIT_K)                                          \
  /* small N (<= 64) or too few 128x128 tiles; split-K likewise */                                 \
  X(3, 128, 64, 64, 8, 384, 214448, FP_GEMM_CFG_SPLIT_K)                                           \
  /* paired epilogues (SPLIT_ACT, GEGLU), big: 128 x 128 outputs from a 128x256 product tile */    \
  X(4, 128, 256, 64, 4, 384, 231024, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_CLUSTER2)                    \
  /* paired epilogues, mid and small (128 x 64 outputs per block); split-K */                      \
  X(5, 128, 128, 64, 6, 384, 214416, FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_SPLIT_K)                     \
  /* gemm2 (b2b) for N <= 128 */                                                                   \
  X(6, 128, 128, 64, 6, 384, 197744, FP_GEMM_CFG_B2B)                                              \
  /* gemm2 (b2b) for N <= 256 */                                                                   \
  X(7, 128, 256, 64, 4, 384, 197712, FP_GEMM_CFG_B2B)                                              \
  /* paired epilogues, big, without clusters (odd tile rows) */                                    \
  X(8, 128, 256, 64, 4, 384, 231024, FP_GEMM_CFG_PAIRED)                                           \
  /* sizes that 256-wide tiles quantise badly (N or the tile count: 3072, 1536) */                 \
  X(9, 128, 192, 64, 4, 384, 214896, 0)                                                            \
  /* B multicast on 128x128 tiles: rows of A or B that are not 128-byte aligned */                 \
  X(10, 128, 128, 64, 6, 384, 231056, FP_GEMM_CFG_CLUSTER2)                                        \
  /* swapped (out^T = B A^T): M in tiles of 192 or 224 rows, to fit M to the SMs (6272 x 512 */    \
  /* takes 33 x 4 tiles of 192 x 128 on 132 SMs; 1568 x 2048, 7 x 16 of 224 x 128); split-K */     \
  /* (summed in parallel) only where the tuning cache asks: gemm_plan.c */                          \
  X(11, 128, 192, 64, 4, 384, 214896, FP_GEMM_CFG_SWAP | FP_GEMM_CFG_SPLIT_K)                      \
  X(12, 128, 224, 64, 3, 384, 202848, FP_GEMM_CFG_SWAP | FP_GEMM_CFG_SPLIT_K)                     \
  /* gemm2 (b2b) in 64-row units, N <= 64 / 128 / 256: deep rings one block an SM, */             \
  /* shallow ones two (the planner takes two an SM where one wave of one leaves rows over) */      \
  X(13, 64, 64, 64, 8, 160, 197760, FP_GEMM_CFG_B2B)                                               \
  X(14, 64, 64, 64, 4, 160, 99392, FP_GEMM_CFG_B2B)                                                \
  X(15, 64, 128, 64, 8, 160, 230528, FP_GEMM_CFG_B2B)                                              \
  X(16, 64, 128, 64, 3, 160, 107568, FP_GEMM_CFG_B2B)                                              \
  X(17, 64, 256, 64, 4, 160, 230464, FP_GEMM_CFG_B2B)
/* clang-format on */

#endif
