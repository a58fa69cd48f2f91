/* fuseport CUDA GEMM planner: which main loop and which tile configuration
 * a GEMM runs with, as plain C (tested without a GPU, like cuda_plan.h).
 *
 * The paths (kernels/cu/gemm_common.cuh):
 *   SM90    TMA + wgmma, warp-specialised (Hopper; f16/bf16)
 *   SM80    cp.async + ldmatrix + mma.sync, multistage (Ampere and later;
 *           f16/bf16)
 *   SIMT    float32 on CUDA cores (no TF32), any alignment
 *   SKINNY  M <= 16 (decode-like): memory-bound, every operand read once
 *
 * Tile configurations are data: each path's table is an X-macro in its own
 * header (kernels/cu/gemm_<path>_configs.h), included by the path's .cu,
 * which instantiates exactly those rows, and by the planner, which picks a
 * row per shape. A row is
 *   X(INDEX, BM, BN, BK, STAGES, THREADS, SMEM_BYTES, FLAGS)
 * with FLAGS a set of FP_GEMM_CFG_* bits.
 */
#ifndef FUSEPORT_GEMM_PLAN_H
#define FUSEPORT_GEMM_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fp_gemm_path {
  FP_GEMM_PATH_SM90 = 0,
  FP_GEMM_PATH_SM80,
  FP_GEMM_PATH_SIMT,
  FP_GEMM_PATH_SKINNY,
  FP_GEMM_PATH_COUNT,
  FP_GEMM_PATH_AUTO = -1
} fp_gemm_path;

/* Configuration flags. */
#define FP_GEMM_CFG_PAIRED 1u   /* instantiated for the paired epilogues */
#define FP_GEMM_CFG_SPLIT_K 2u  /* supports split_k > 1 */
#define FP_GEMM_CFG_B2B 4u      /* a gemm2 configuration: BN is the largest N it keeps on chip */
#define FP_GEMM_CFG_CLUSTER2 8u /* launched in clusters of 2 along M (TMA multicast of B) */
/* computes out^T = B A^T (sm90): the tile's 128 rows are N, its BN columns M,
 * so M's tiles can be any multiple of 8 wide; trans_b, unpaired, per-column
 * epilogues (none, relu, bias, BN), N % 8 == 0 */
#define FP_GEMM_CFG_SWAP 16u
/* The epilogues a SWAP row applies (FP_EPI_* and FP_CONV_EPI_BN of
 * fp_device_common.h): the planner's row filter and the launcher ask this. */
#define FP_GEMM_SWAP_EPILOGUE(k)                                                                   \
  ((k) == FP_EPI_NONE || (k) == FP_EPI_RELU || (k) == FP_EPI_BIAS || (k) == FP_EPI_BIAS_RELU ||    \
   (k) == FP_CONV_EPI_BN)

/* What a GEMM asks for: gemm_<dt> (b2b false) or gemm2_<dt> (b2b true). */
typedef struct fp_gemm_request {
  int dtype; /* fp_dtype: FP_F32, FP_F16, FP_BF16 */
  int64_t M, N, K;
  int64_t P;    /* gemm2: out is [M, P] */
  int epilogue; /* FP_EPI_* (gemm) */
  bool trans_b;
  bool b2b;
  /* leading dimensions of A and B in elements as launched (a padded copy's
   * may be wider); 0: dense (K, and K or NB). The sm90 rules ask whether
   * rows start 128-byte aligned. */
  int64_t lda, ldb;
  /* the caller has no split-K workspace (a convolution run as a GEMM,
   * kernels/cu/conv.cu): split_k stays 1 */
  bool no_split;
  /* A is a convolution's im2col, read by TMA's im2col mode (conv.cu's
   * implicit GEMM on the SM90 path, which the caller forces): tuned apart
   * from a plain GEMM of the same M, N, K */
  bool im2col;
} fp_gemm_request;

/* The device as the planner sees it (from fp_device_info). */
typedef struct fp_gemm_device {
  int cc_major, cc_minor;
  int sm_count;
  uint64_t smem_optin; /* dynamic shared memory a block may opt into */
} fp_gemm_device;

typedef struct fp_gemm_plan {
  fp_gemm_path path;
  int config; /* row of the path's table */
  int bm, bn, bk, stages, threads;
  uint32_t smem_bytes, flags;
  int split_k;       /* 1: none */
  uint64_t ws_bytes; /* split-K workspace (zeroed once, left zeroed), 0: none */
  /* the path loads A and B with 16-byte copies (TMA, cp.async): their rows
   * must start 16-byte aligned, i.e. lda and ldb multiples of 8 elements */
  bool aligned_rows;
  /* gemm2: N fits the tile, the intermediate stays on chip; false: the
   * recipe runs two GEMMs through a workspace */
  bool b2b_on_chip;
  bool tuned; /* the configuration came from the tuning cache */
} fp_gemm_plan;

/* Whether this build has the Hopper path (CUDA architectures with 90). */
bool fp_gemm_has_sm90(void);

/* FUSEPORT_CUDA_GEMM_PATH: auto (default), sm90, sm80, simt, skinny -- a
 * knob that forces a path (for timing the sm80 loop on an H100). false with
 * a message for another value. */
bool fp_gemm_path_from_env(const char *text, fp_gemm_path *out);
const char *fp_gemm_path_name(fp_gemm_path path);

/* Plans r on d, forcing `force` unless FP_GEMM_PATH_AUTO. false (with why)
 * when no path can run it (a forced path that lacks the dtype, a device
 * without tensor cores for f16/bf16 below sm_80...). Pure: the same request
 * and device give the same plan, so a recipe's dry run sizes exactly the
 * workspace the launch then uses. */
bool fp_gemm_plan_make(const fp_gemm_request *r, const fp_gemm_device *d, fp_gemm_path force,
                       fp_gemm_plan *out, char *why, size_t whylen);

/* ---- dw_from_packed: the GEMM with a dequantising B loader ---------------------------
 * dw_packed_<dt> (kernels.def): out[COUT, CIN] = dy^T @ x', x' dequantised
 * from packed words in the operand loader. Two paths: SM90 (TMA for dy,
 * two producer warpgroups dequantising x' into wgmma's shared-memory layout)
 * and SIMT (CUDA cores, any architecture). Both split K so that the few
 * output tiles of a 768 x 768 gradient fill the GPU; the slices meet in
 * gemm_common.cuh's split-K workspace. */
typedef struct fp_dw_plan {
  fp_gemm_path path; /* FP_GEMM_PATH_SM90 or FP_GEMM_PATH_SIMT */
  int bm, bn, bk, stages, threads;
  int split_k;
  int64_t tiles;
  uint64_t ws_bytes;
  bool aligned_rows;    /* dy's rows start 16-byte aligned (lddy % 8 == 0; TMA) */
  bool parallel_reduce; /* SM90: every block sums a share of its tile's slices (one wave) */
} fp_dw_plan;

/* false (with why) for shapes no path runs (a dimension past 2^31) or a
 * forced path this device or build lacks. force: AUTO, SM90, or any other
 * path for SIMT (FUSEPORT_CUDA_GEMM_PATH=sm80 or simt). */
bool fp_dw_plan_make(int64_t K, int64_t COUT, int64_t CIN, const fp_gemm_device *d,
                     fp_gemm_path force, fp_dw_plan *out, char *why, size_t whylen);

/* ---- the tuning cache -----------------------------------------------------------
 * Opt-in, in the spirit of Inductor's max-autotune and CLBlast's tuning
 * database: with FUSEPORT_CUDA_GEMM_TUNE=FILE, the first launch of a GEMM
 * whose shape the file does not hold times the path's candidate
 * configurations on the real operands (fp_gemm_plan_candidates), keeps the
 * fastest in the file, and launches it; every later plan of that shape and
 * device -- the recipes' dry runs included, so workspaces stay consistent --
 * reads it back. Without the variable nothing is read or written. The file
 * is text, one line per (device, path, problem): see gemm_plan.c. */

/* Whether FUSEPORT_CUDA_GEMM_TUNE names a cache. */
bool fp_gemm_tuning_enabled(void);
/* The plans of r on d for every configuration of `path` that can run it
 * without split-K, plus `planned` (the heuristic's choice) first; at most
 * max. Returns how many. */
int fp_gemm_plan_candidates(const fp_gemm_request *r, const fp_gemm_device *d,
                            const fp_gemm_plan *planned, fp_gemm_plan *out, int max);
/* Keeps `best` (a candidate) as the tuned plan of r on d, in memory and in
 * the file (rewritten atomically). false with why when the file cannot be
 * written. */
bool fp_gemm_tuning_record(const fp_gemm_request *r, const fp_gemm_device *d,
                           const fp_gemm_plan *best, double median_us, char *why, size_t whylen);

/* ---- convolutions on the GEMM core -------------------------------------------------------
 * conv_<dt>'s arguments as the planner needs them (kernels.def, family conv;
 * dtype an fp_dtype, epilogue FP_EPI_* or FP_CONV_EPI_BN). */
typedef struct fp_conv_gemm_shape {
  int dtype, epilogue;
  bool nhwc;
  int64_t N, C, H, W, K, R, S, P, Q, stride, pad, dil;
} fp_conv_gemm_shape;

/* Whether the CUDA backend runs the convolution s as a GEMM on the GEMM core
 * on d, and the request it plans (kernels/cu/conv.cu launches it, ops/conv.c
 * sizes the split-K workspace from the same plan; no_split is left false):
 *   an NHWC 1x1 convolution at stride 1 without padding (f32: C <= 256):
 *     the plain GEMM x [N*H*W, C] @ w [K, C]^T, on the path *force allows;
 *   else an NHWC f16/bf16 convolution that TMA's im2col mode takes (C % 64
 *     == 0, K % 8 == 0, padding <= 127, (R-1) dil and (S-1) dil at most
 *     padding + 128, stride <= 8) on compute capability 9.0 in a build with
 *     the Hopper path, unless *force names another path: A is the input's
 *     im2col (req->im2col), and *force becomes FP_GEMM_PATH_SM90.
 * gemm_view false (FUSEPORT_CUDA_CONV_GEMM=0): never. The launch also needs
 * x and w 16-byte aligned for the im2col view; without that it runs conv's
 * own kernels, and a workspace sized here goes unused. */
bool fp_conv_gemm_request(const fp_conv_gemm_shape *s, const fp_gemm_device *d, bool gemm_view,
                          fp_gemm_path *force, fp_gemm_request *req);

#ifdef __cplusplus
}
#endif

#endif
