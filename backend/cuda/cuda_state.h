/* fuseport CUDA backend: its private state, shared by cuda_backend.c
 * (devices, contexts, buffers, events, the libraries, the ops table) and
 * cuda_launch.c (kernel loading and launch), and the helpers both use. */
#ifndef FUSEPORT_CUDA_STATE_H
#define FUSEPORT_CUDA_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "backend_impl.h"
#include "cuda_blas.h"
#include "cuda_dnn.h"
#include "cuda_kernels.h"

typedef struct cuda_state {
  int device;
  cudaStream_t stream;
  const void *kernels[FPK_COUNT];   /* host stubs; NULL: not implemented */
  fp_cuda_tuning tuning[FPK_COUNT]; /* extra builds: ROWS kernels, lean ELEM builds */
  fp_rows_policy row_policy;        /* FUSEPORT_CUDA_ROW_BUILDS */
  fp_elem_grid_policy elem_grid;    /* FUSEPORT_CUDA_ELEM_GRID */
  bool elem_lean;                   /* FUSEPORT_CUDA_ELEM_BUILDS: launch lean builds */
  unsigned rows_block_cap;          /* FUSEPORT_CUDA_ROWS_BLOCK_CAP; 0: none */
  bool row_stage;                   /* FUSEPORT_CUDA_ROW_STAGE (default on) */
  int stream_smem;                  /* FUSEPORT_CUDA_STREAM_SMEM: 0 off, 1 (default), 2 all */
  size_t smem_optin;                /* sharedMemPerBlockOptin */
  /* the long-row builds' stage: the most dynamic shared memory each may
   * have (smem_optin less its static shared memory; 0: not asked yet), to
   * which its attribute is then set, and the resident blocks with and
   * without the stage per block size 2^0..2^10, plus one (0: not asked) */
  size_t stage_limit[FPK_COUNT];
  /* the streaming builds' rows in shared memory: the most dynamic shared
   * memory each may have, its attribute then set (0: not asked yet) */
  size_t stream_smem_limit[FPK_COUNT];
  /* the cluster builds' shares in shared memory (FUSEPORT_CUDA_CLUSTER_SMEM,
   * default on): their attribute set and the offer's cluster_smem_max
   * filled on a kernel's first launch (cluster_smem_asked) */
  bool cluster_smem;
  bool cluster_smem_asked[FPK_COUNT];
  unsigned char stage_resident[FPK_COUNT][11][2];
  int cc_major, sm_count;
  /* the largest cluster the ROWS planner may take: 16 on sm_90+ (the
   * cluster builds allowed non-portable sizes on first use, in
   * cuda_launch.c), 8 if the device refused that or
   * FUSEPORT_CUDA_MAX_CLUSTER=8 */
  int max_cluster;
  bool nonportable_cluster[FPK_COUNT]; /* attribute set on that cluster build */
  bool family_loaded[FPF_COUNT];
  double family_load_ms[FPF_COUNT];
  int max_block_dim[3];
  int max_grid_dim[3];
  int cc_minor;
  int gemm_force_path; /* FUSEPORT_CUDA_GEMM_PATH: fp_gemm_path, -1 auto */
  bool conv_gemm;      /* FUSEPORT_CUDA_CONV_GEMM: 1x1 convolutions as GEMMs (default) */
  int conv_cfg;        /* FUSEPORT_CUDA_CONV_CFG: a forced implicit-path row, -1 none */
  fp_cuda_blas *blas;  /* cuBLAS and cuBLASLt, created on first use (cuda_blas.c) */
  fp_cuda_dnn *dnn;    /* cuDNN, created on first use (cuda_dnn.c) */
} cuda_state;

/* Reports a failed runtime call described by fmt. The runtime's last-error
 * slot is cleared, so that a later check does not pick up this error again
 * (a sticky error, after which the device is unusable, stays anyway). */
fp_status fp_cuda_fail(fp_context *ctx, cudaError_t err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static inline cuda_state *fp_cuda_state_of(fp_context *ctx) { return (cuda_state *)ctx->impl; }

/* Makes the context's device current; every entry point that can report
 * calls it first. */
fp_status fp_cuda_use_device(fp_context *ctx);

/* ---- kernels (cuda_launch.c): the ops table's entries ---------------------- */

bool fp_cuda_kernel_available(fp_context *ctx, fp_kernel_id id);
fp_status fp_cuda_kernel_prepare(fp_context *ctx, fp_kernel_id id, double *compile_ms);
fp_status fp_cuda_launch(fp_context *ctx, fp_kernel_id id, const fp_ndrange *nd,
                         const fp_karg *args, int nargs);

#endif
