/* fuseport CUDA backend: its GEMM library, cuBLAS and cuBLASLt
 * (fp_library_gemm). Plain GEMMs go to cuBLAS (cublasGemmEx, what PyTorch
 * eager's matmul calls), GEMMs with an epilogue or beta*C to cuBLASLt in
 * one call (what the `vendor` variants time), both on the context's stream
 * with the caller's workspace and float32 compute (no TF32). */
#ifndef FUSEPORT_CUDA_BLAS_H
#define FUSEPORT_CUDA_BLAS_H

#include <cuda_runtime_api.h>

#include "backend_impl.h"

typedef struct fp_cuda_blas fp_cuda_blas;

/* Creates the handles on first use (*blas NULL) and reports the time that
 * took, the same number on later calls. */
fp_status fp_cuda_blas_prepare(fp_context *ctx, fp_cuda_blas **blas, cudaStream_t stream,
                               double *compile_ms);
/* Enqueues g (checked by the layer); c, bias and ws may be NULL. */
fp_status fp_cuda_blas_gemm(fp_context *ctx, fp_cuda_blas *blas, const fp_lib_gemm *g, void *a,
                            void *b, void *c, void *d, void *bias, void *ws, uint64_t ws_bytes);
void fp_cuda_blas_destroy(fp_cuda_blas *blas); /* NULL is fine */

#endif
