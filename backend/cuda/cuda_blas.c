/* fuseport CUDA backend: cuBLAS and cuBLASLt as its GEMM library
 * (cuda_blas.h).
 *
 * fuseport's operands are row-major and cuBLAS's column-major, so every
 * call computes the transposed product: D^T [N, M] = op(B)^T A^T, with B's
 * storage as the first operand (transposed when B is stored [N, K]) and
 * A's as the second; a row-major bias over columns is then cuBLASLt's bias
 * over rows. */
#define _POSIX_C_SOURCE 200809L
#include "cuda_blas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublasLt.h>
#include <cublas_v2.h>

/* cuBLASLt descriptors kept for reuse: its heuristic query costs tens of
 * microseconds of host time, which a small GEMM would otherwise pay inside
 * its timing (the GPU idles while the host plans). */
#define LT_CACHE 32

typedef struct lt_entry {
  bool used;
  fp_lib_gemm key;
  uint64_t ws_bytes;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c, d;
  cublasLtMatmulAlgo_t algo;
} lt_entry;

struct fp_cuda_blas {
  cudaStream_t stream;
  double create_ms;
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  lt_entry cache[LT_CACHE];
  int next; /* round-robin victim */
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static fp_status blas_fail(fp_context *ctx, cublasStatus_t st, const char *call) {
  fp_status status = st == CUBLAS_STATUS_ALLOC_FAILED    ? FP_ERR_OUT_OF_MEMORY
                     : st == CUBLAS_STATUS_NOT_SUPPORTED ? FP_ERR_UNSUPPORTED
                                                         : FP_ERR_BACKEND;
  return fp_ctx_error(ctx, status, "%s failed: %s (%s, %d)", call, cublasGetStatusString(st),
                      cublasGetStatusName(st), (int)st);
}

static fp_status lt_fail(fp_context *ctx, cublasStatus_t st, const char *call) {
  fp_status status = st == CUBLAS_STATUS_ALLOC_FAILED    ? FP_ERR_OUT_OF_MEMORY
                     : st == CUBLAS_STATUS_NOT_SUPPORTED ? FP_ERR_UNSUPPORTED
                                                         : FP_ERR_BACKEND;
  return fp_ctx_error(ctx, status, "%s failed: %s (%d)", call, cublasLtGetStatusString(st),
                      (int)st);
}

fp_status fp_cuda_blas_prepare(fp_context *ctx, fp_cuda_blas **blas, cudaStream_t stream,
                               double *compile_ms) {
  if (*blas != NULL) {
    *compile_ms = (*blas)->create_ms;
    return FP_OK;
  }
  fp_cuda_blas *b = calloc(1, sizeof *b);
  if (b == NULL)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "cuBLAS: host allocation failed");
  const double t0 = now_ms();
  cublasStatus_t st = cublasCreate(&b->blas);
  if (st != CUBLAS_STATUS_SUCCESS) {
    free(b);
    return blas_fail(ctx, st, "cublasCreate()");
  }
  st = cublasSetStream(b->blas, stream);
  /* float32 accumulation throughout, split-K partial sums included: PyTorch
   * allows cuBLAS half-precision reductions by default, but fuseport's
   * float64 check of the unfused path holds it to float accumulation */
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasSetMathMode(b->blas, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  if (st != CUBLAS_STATUS_SUCCESS) {
    (void)cublasDestroy(b->blas);
    free(b);
    return blas_fail(ctx, st, "cublasSetStream/cublasSetMathMode()");
  }
  st = cublasLtCreate(&b->lt);
  if (st != CUBLAS_STATUS_SUCCESS) {
    (void)cublasDestroy(b->blas);
    free(b);
    return lt_fail(ctx, st, "cublasLtCreate()");
  }
  b->stream = stream;
  b->create_ms = now_ms() - t0;
  *blas = b;
  *compile_ms = b->create_ms;
  return FP_OK;
}

static void entry_release(lt_entry *e) {
  if (!e->used)
    return;
  (void)cublasLtMatrixLayoutDestroy(e->a);
  (void)cublasLtMatrixLayoutDestroy(e->b);
  (void)cublasLtMatrixLayoutDestroy(e->c);
  (void)cublasLtMatrixLayoutDestroy(e->d);
  (void)cublasLtMatmulDescDestroy(e->desc);
  memset(e, 0, sizeof *e);
}

void fp_cuda_blas_destroy(fp_cuda_blas *blas) {
  if (blas == NULL)
    return;
  for (int k = 0; k < LT_CACHE; ++k)
    entry_release(&blas->cache[k]);
  (void)cublasLtDestroy(blas->lt);
  (void)cublasDestroy(blas->blas);
  free(blas);
}

static cudaDataType_t cuda_type(fp_dtype dtype) {
  return dtype == FP_F16 ? CUDA_R_16F : dtype == FP_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* ---- cuBLAS: a plain GEMM -------------------------------------------------------- */

static fp_status gemm_blas(fp_context *ctx, fp_cuda_blas *b, const fp_lib_gemm *g, void *a_ptr,
                           void *b_ptr, void *d_ptr, void *ws, uint64_t ws_bytes) {
  cublasStatus_t st = cublasSetWorkspace(b->blas, ws, ws != NULL ? (size_t)ws_bytes : 0);
  if (st != CUBLAS_STATUS_SUCCESS)
    return blas_fail(ctx, st, "cublasSetWorkspace()");
  const cudaDataType_t t = cuda_type(g->dtype), to = cuda_type(fp_lib_gemm_out_dtype(g));
  const float alpha = g->alpha, beta = 0.0f;
  /* column-major: D^T = op(B)^T-side first; fuseport's A stored [K, M]
   * (trans_a) is the column-major [M, K], transposed */
  const cublasOperation_t ta = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g->batch == 1) {
    st = cublasGemmEx(b->blas, ta, tb, (int)g->N, (int)g->M, (int)g->K, &alpha, b_ptr, t,
                      (int)g->ldb, a_ptr, t, (int)g->lda, &beta, d_ptr, to, (int)g->ldd,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
      char call[160];
      snprintf(call, sizeof call, "cublasGemmEx(%lld x %lld x %lld, %s)", (long long)g->M,
               (long long)g->N, (long long)g->K, fp_dtype_name(g->dtype));
      return blas_fail(ctx, st, call);
    }
    return FP_OK;
  }
  st = cublasGemmStridedBatchedEx(b->blas, ta, tb, (int)g->N, (int)g->M, (int)g->K, &alpha, b_ptr,
                                  t, (int)g->ldb, g->stride_b, a_ptr, t, (int)g->lda, g->stride_a,
                                  &beta, d_ptr, to, (int)g->ldd, g->stride_d, (int)g->batch,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    char call[160];
    snprintf(call, sizeof call, "cublasGemmStridedBatchedEx(%lld x %lld x %lld x %lld, %s)",
             (long long)g->batch, (long long)g->M, (long long)g->N, (long long)g->K,
             fp_dtype_name(g->dtype));
    return blas_fail(ctx, st, call);
  }
  return FP_OK;
}

/* ---- cuBLASLt: an epilogue or beta*C in the same call -------------------------------- */

static bool same_key(const fp_lib_gemm *x, const fp_lib_gemm *y) {
  return x->dtype == y->dtype && x->M == y->M && x->N == y->N && x->K == y->K &&
         x->batch == y->batch && x->lda == y->lda && x->ldb == y->ldb && x->ldc == y->ldc &&
         x->ldd == y->ldd && x->stride_a == y->stride_a && x->stride_b == y->stride_b &&
         x->stride_c == y->stride_c && x->stride_d == y->stride_d && x->trans_b == y->trans_b &&
         x->trans_a == y->trans_a && fp_lib_gemm_out_dtype(x) == fp_lib_gemm_out_dtype(y) &&
         (x->beta != 0.0f) == (y->beta != 0.0f) && x->epilogue == y->epilogue;
}

static cublasStatus_t layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows,
                             int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  cublasStatus_t st = cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld);
  if (st == CUBLAS_STATUS_SUCCESS && batch > 1) {
    const int32_t count = (int32_t)batch;
    st = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                          sizeof count);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &stride, sizeof stride);
  }
  return st;
}

/* Builds the descriptors and asks the heuristic for an algorithm. */
static fp_status lt_prepare(fp_context *ctx, fp_cuda_blas *b, const fp_lib_gemm *g,
                            uint64_t ws_bytes, lt_entry *e) {
  memset(e, 0, sizeof *e);
  const cudaDataType_t t = cuda_type(g->dtype);
  cublasStatus_t st = cublasLtMatmulDescCreate(&e->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (st != CUBLAS_STATUS_SUCCESS)
    return lt_fail(ctx, st, "cublasLtMatmulDescCreate()");
  e->used = true; /* from here on entry_release frees what exists */
  const cublasOperation_t ta = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  switch (g->epilogue) {
  case FP_LIB_EPI_RELU:
    epi = CUBLASLT_EPILOGUE_RELU;
    break;
  case FP_LIB_EPI_BIAS:
    epi = CUBLASLT_EPILOGUE_BIAS;
    break;
  case FP_LIB_EPI_BIAS_RELU:
    epi = CUBLASLT_EPILOGUE_RELU_BIAS;
    break;
  default:
    break;
  }
  st = cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
  if (st == CUBLAS_STATUS_SUCCESS &&
      (g->epilogue == FP_LIB_EPI_BIAS || g->epilogue == FP_LIB_EPI_BIAS_RELU)) {
    /* the bias has the output's type (as PyTorch's addmm hands it) */
    st = cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof t);
  }
  /* A of the column-major call is fuseport's B: [N, K] (op N) or stored
   * [K, N] column-major when B is [N, K] row-major (op T) */
  if (st == CUBLAS_STATUS_SUCCESS)
    st = layout(&e->a, t, g->trans_b ? g->K : g->N, g->trans_b ? g->N : g->K, g->ldb, g->batch,
                g->stride_b);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = layout(&e->b, t, g->trans_a ? g->M : g->K, g->trans_a ? g->K : g->M, g->lda, g->batch,
                g->stride_a);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = layout(&e->c, t, g->N, g->M, g->beta != 0.0f ? g->ldc : g->ldd, g->batch,
                g->beta != 0.0f ? g->stride_c : g->stride_d);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = layout(&e->d, t, g->N, g->M, g->ldd, g->batch, g->stride_d);
  if (st != CUBLAS_STATUS_SUCCESS) {
    entry_release(e);
    return lt_fail(ctx, st, "cublasLt descriptor setup");
  }
  cublasLtMatmulPreference_t pref = NULL;
  st = cublasLtMatmulPreferenceCreate(&pref);
  if (st == CUBLAS_STATUS_SUCCESS) {
    const size_t bytes = (size_t)ws_bytes;
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &bytes, sizeof bytes);
  }
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(b->lt, e->desc, e->a, e->b, e->c, e->d, pref, 1, &result,
                                        &found);
  if (pref != NULL)
    (void)cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) {
    entry_release(e);
    return lt_fail(ctx, st, "cublasLtMatmulAlgoGetHeuristic()");
  }
  if (found < 1) {
    entry_release(e);
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "cuBLASLt has no algorithm for this GEMM (%lld x %lld x %lld %s, epilogue "
                        "%d, beta %g)",
                        (long long)g->M, (long long)g->N, (long long)g->K, fp_dtype_name(g->dtype),
                        (int)g->epilogue, (double)g->beta);
  }
  e->algo = result.algo;
  e->key = *g;
  e->ws_bytes = ws_bytes;
  return FP_OK;
}

static fp_status gemm_lt(fp_context *ctx, fp_cuda_blas *b, const fp_lib_gemm *g, void *a_ptr,
                         void *b_ptr, void *c_ptr, void *d_ptr, void *bias, void *ws,
                         uint64_t ws_bytes) {
  lt_entry *e = NULL;
  for (int k = 0; k < LT_CACHE && e == NULL; ++k)
    if (b->cache[k].used && b->cache[k].ws_bytes == ws_bytes && same_key(&b->cache[k].key, g))
      e = &b->cache[k];
  if (e == NULL) {
    e = &b->cache[b->next];
    b->next = (b->next + 1) % LT_CACHE;
    entry_release(e);
    fp_status st = lt_prepare(ctx, b, g, ws_bytes, e);
    if (st != FP_OK)
      return st;
  }
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  if (bias != NULL)
    st = cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                        sizeof bias);
  if (st != CUBLAS_STATUS_SUCCESS)
    return lt_fail(ctx, st, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  const float alpha = g->alpha, beta = g->beta;
  st = cublasLtMatmul(b->lt, e->desc, &alpha, b_ptr, e->a, a_ptr, e->b, &beta,
                      beta != 0.0f ? c_ptr : d_ptr, e->c, d_ptr, e->d, &e->algo, ws,
                      ws != NULL ? (size_t)ws_bytes : 0, b->stream);
  if (st != CUBLAS_STATUS_SUCCESS) {
    char call[160];
    snprintf(call, sizeof call, "cublasLtMatmul(%lld x %lld x %lld, %s, epilogue %d)",
             (long long)g->M, (long long)g->N, (long long)g->K, fp_dtype_name(g->dtype),
             (int)g->epilogue);
    return lt_fail(ctx, st, call);
  }
  return FP_OK;
}

fp_status fp_cuda_blas_gemm(fp_context *ctx, fp_cuda_blas *blas, const fp_lib_gemm *g, void *a,
                            void *b, void *c, void *d, void *bias, void *ws, uint64_t ws_bytes) {
  if (g->M > INT32_MAX || g->N > INT32_MAX || g->K > INT32_MAX || g->batch > INT32_MAX ||
      g->lda > INT32_MAX || g->ldb > INT32_MAX || g->ldc > INT32_MAX || g->ldd > INT32_MAX)
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                        "cuBLAS takes 32-bit sizes and leading dimensions (M=%lld N=%lld K=%lld)",
                        (long long)g->M, (long long)g->N, (long long)g->K);
  if (g->epilogue == FP_LIB_EPI_NONE && g->beta == 0.0f)
    return gemm_blas(ctx, blas, g, a, b, d, ws, ws_bytes);
  return gemm_lt(ctx, blas, g, a, b, c, d, bias, ws, ws != NULL ? ws_bytes : 0);
}
