/* fuseport CUDA backend: its convolution library, cuDNN (fp_library_conv).
 * A plain convolution is cudnnConvolutionForward with the algorithm cuDNN's
 * heuristics rank first among those that fit the caller's workspace (what
 * PyTorch eager runs with cudnn.benchmark off); one with a bias, a residual
 * z and relu is cudnnConvolutionBiasActivationForward in one call (what the
 * `vendor` variants time). Both on the context's stream, float32 compute,
 * no TF32. A build without cuDNN (FUSEPORT_HAVE_CUDNN unset) has no
 * convolution library: fp_cuda_dnn_version reports false. */
#ifndef FUSEPORT_CUDA_DNN_H
#define FUSEPORT_CUDA_DNN_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "backend_impl.h"

typedef struct fp_cuda_dnn fp_cuda_dnn;

/* "cuDNN 9.x.y" of the library the process loaded into buf; false when this
 * build has no cuDNN. */
bool fp_cuda_dnn_version(char *buf, size_t cap);
/* The workspace fp_library_conv_workspace gives cuDNN (bytes). */
uint64_t fp_cuda_dnn_workspace_cap(void);
/* Enqueues c (checked by the layer) on stream, creating the handle on first
 * use (*dnn NULL); bias, z and ws may be NULL. cuDNN's refusals (a layout or
 * type it lacks) come back as FP_ERR_UNSUPPORTED with its message. */
fp_status fp_cuda_dnn_conv(fp_context *ctx, fp_cuda_dnn **dnn, cudaStream_t stream,
                           const fp_lib_conv *c, void *x, void *w, void *bias, void *z, void *out,
                           void *ws, uint64_t ws_bytes);
void fp_cuda_dnn_destroy(fp_cuda_dnn *dnn); /* NULL is fine */

#endif
