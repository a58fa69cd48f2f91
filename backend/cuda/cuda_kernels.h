/* fuseport CUDA backend: the interface between the backend (C11,
 * backend/cuda/cuda_backend.c) and the kernels (CUDA C++17,
 * kernels/cu/<family>.cu).
 *
 * Each family registers the host stubs of its __global__ functions under the
 * kernel ids of kernels.def; the backend launches them with cudaLaunchKernel,
 * passing one pointer per non-'L' argument, so every kernel's parameter list
 * must match its signature exactly: b -> float * (const float * for inputs),
 * i -> int, u -> unsigned, l -> long long, f -> float.
 *
 * The device helpers the .cu files share are in kernels/cu/device_common.cuh
 * (with its parts device_rows.cuh and device_elem.cuh), beside the kernels
 * (as the OpenCL ones are in kernels/cl/common.cl).
 */
#ifndef FUSEPORT_CUDA_KERNELS_H
#define FUSEPORT_CUDA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend_impl.h"
#include "cuda_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fp_cuda_register_<family>(table): table[FPK_name] = the kernel's host stub
 * for every kernel of the family this build implements. */
#define FP_KERNEL_FAMILY(family) void fp_cuda_register_##family(const void *table[FPK_COUNT]);
#include "kernels.def"
#undef FP_KERNEL_FAMILY

/* ---- tuned builds --------------------------------------------------------------
 * A family may hold further builds of a ROWS kernel (the same function of
 * the arguments, written for part of their range: a warp per short row, a
 * cluster of blocks per long row, a deeper register cache); the backend
 * picks one per launch with fp_cuda_plan_rows (cuda_plan.h), which states
 * each build's precondition. */
#define FP_CUDA_MAX_BUILDS 5

typedef struct fp_cuda_tuning {
  /* the builds, indexed by fp_rows_build (NULL: none), loaded with their
   * family; their names in messages */
  const void *builds[FP_CUDA_MAX_BUILDS];
  const char *names[FP_CUDA_MAX_BUILDS];
  bool rows;        /* planned by fp_cuda_plan_rows; false: no tuning */
  int arg_m, arg_n; /* positions of the int64 M and N in the signature */
  fp_rows_builds offer;
} fp_cuda_tuning;

#define FP_KERNEL_FAMILY(family)                                                                   \
  void fp_cuda_register_tuning_##family(fp_cuda_tuning table[FPK_COUNT]);
#include "kernels.def"
#undef FP_KERNEL_FAMILY

/* ---- the GEMM family (kernels/cu/gemm.cu) ----------------------------------------
 * gemm_<dt> and gemm2_<dt> are PLANNED: the backend hands their arguments to
 * fp_cuda_gemm_launch, which plans (backend/cuda/gemm_plan.h) and launches
 * on `stream`; *kernels_launched says how many kernels that took, msg why
 * a launch failed. */
typedef struct fp_cuda_gemm_env {
  int cc_major, cc_minor, sm_count;
  uint64_t smem_optin;
  int force_path; /* fp_gemm_path, -1 auto (FUSEPORT_CUDA_GEMM_PATH) */
  bool conv_gemm; /* 1x1 convolutions on the GEMM core (FUSEPORT_CUDA_CONV_GEMM, default on) */
  int conv_cfg;   /* a forced row of conv's implicit paths (FUSEPORT_CUDA_CONV_CFG), -1 none */
  cudaStream_t stream;
} fp_cuda_gemm_env;

cudaError_t fp_cuda_gemm_launch(fp_kernel_id id, const fp_karg *args, int nargs,
                                const fp_cuda_gemm_env *env, int *kernels_launched, char *msg,
                                size_t msglen);
/* Every __global__ function the GEMM paths instantiate (up to cap), for
 * loading the family's module. */
int fp_cuda_gemm_stubs(const void **out, int cap);

/* ---- the convolutions (kernels/cu/conv.cu) ----------------------------------------
 * conv_<dt> is PLANNED: the backend hands its arguments to
 * fp_cuda_conv_launch, which picks a path (tensor cores where the layout and
 * type allow, else CUDA cores) and launches on env->stream. */
bool fp_cuda_conv_is_planned(fp_kernel_id id);
cudaError_t fp_cuda_conv_launch(fp_kernel_id id, const fp_karg *args, int nargs,
                                const fp_cuda_gemm_env *env, int *kernels_launched, char *msg,
                                size_t msglen);
int fp_cuda_conv_stubs(const void **out, int cap);

/* Enqueues on `stream` the repetition of a 2, 4, 8 or 16-byte pattern over
 * `bytes` bytes at dst (dst and bytes multiples of pattern_size). Returns the
 * launch status (cudaErrorInvalidValue for another pattern size). */
cudaError_t fp_cuda_fill_pattern(void *dst, uint64_t bytes, const void *pattern,
                                 size_t pattern_size, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
