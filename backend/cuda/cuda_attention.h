/* fuseport CUDA backend: the attention family's planned kernel
 * (kernels/cu/attention.cu). Kept out of cuda_kernels.h, which every .cu
 * includes.
 *
 * attention_<dt> is PLANNED: the backend hands its arguments to
 * fp_cuda_attention_launch, which validates them, picks a path (tensor cores
 * for f16/bf16 on sm_80 and later, else CUDA cores) and launches one kernel
 * on env->stream; *kernels_launched says how many kernels that took, msg why
 * a launch failed (cudaErrorInvalidValue with a message: the arguments break
 * the contract). */
#ifndef FUSEPORT_CUDA_ATTENTION_H
#define FUSEPORT_CUDA_ATTENTION_H

#include "cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

bool fp_cuda_attention_is_planned(fp_kernel_id id);
cudaError_t fp_cuda_attention_launch(fp_kernel_id id, const fp_karg *args, int nargs,
                                     const fp_cuda_gemm_env *env, int *kernels_launched, char *msg,
                                     size_t msglen);
/* Every __global__ function attention_<dt>'s paths instantiate (up to cap),
 * for loading the family's module. */
int fp_cuda_attention_stubs(const void **out, int cap);

#ifdef __cplusplus
}
#endif

#endif
