/* fuseport CPU kernels, family gemm: the GEMM core on the emulated device,
 * and the CPU backend's "library" GEMM (fp_cpu_library_gemm). Semantics:
 * kernels/kernels.def; every product accumulates in float, k in order, and
 * reduced-precision values are rounded once, at the store, as on the GPUs.
 *
 * A plain cache-friendly loop nest, fast enough for the unit tests: four
 * rows of A against a row of B at a time, the inner loop over contiguous
 * columns (which the compiler vectorises), with B converted to a float
 * [K, NB] panel once per call. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "fp_device_common.h"

/* acc[M, NB] (row-major, float) = A @ bp, A [M, K] (a[i*lda + k]) or, trans_a,
 * stored [K, M] (a[k*lda + i]), bp a float [K, NB] panel. false when the
 * host has no memory for A's panel. */
static bool gemm_acc_panel(fp_dtype dtype, int64_t M, int64_t NB, int64_t K, const void *a,
                           int64_t lda, bool trans_a, const float *bp, float *acc) {
  float *ap = malloc(sizeof(float) * (size_t)(4 * K));
  if (ap == NULL)
    return false;
  memset(acc, 0, sizeof(float) * (size_t)(M * NB));
  for (int64_t i0 = 0; i0 < M; i0 += 4) {
    const int64_t rows = M - i0 < 4 ? M - i0 : 4;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < K; ++k)
        ap[r * K + k] = fp_cpu_load_elem(dtype, a, trans_a ? k * lda + i0 + r : (i0 + r) * lda + k);
    for (int64_t r = 0; r < rows; ++r) {
      float *restrict c = acc + (i0 + r) * NB;
      for (int64_t k = 0; k < K; ++k) {
        const float av = ap[r * K + k];
        const float *restrict brow = bp + k * NB;
        for (int64_t j = 0; j < NB; ++j)
          c[j] += av * brow[j];
      }
    }
  }
  free(ap);
  return true;
}

/* The same with B(k, j) = b[j*ldb + k] (trans_b) or b[k*ldb + j]. false
 * when the host has no memory for the panels (the caller leaves its output
 * unwritten: the check then sees the poison). */
static bool gemm_acc_t(fp_dtype dtype, int64_t M, int64_t NB, int64_t K, const void *a, int64_t lda,
                       bool trans_a, const void *b, int64_t ldb, bool trans_b, float *acc) {
  float *bp = malloc(sizeof(float) * (size_t)(K * NB));
  if (bp == NULL)
    return false;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < NB; ++j)
      bp[k * NB + j] = fp_cpu_load_elem(dtype, b, trans_b ? j * ldb + k : k * ldb + j);
  const bool ok = gemm_acc_panel(dtype, M, NB, K, a, lda, trans_a, bp, acc);
  free(bp);
  return ok;
}

static bool gemm_acc(fp_dtype dtype, int64_t M, int64_t NB, int64_t K, const void *a, int64_t lda,
                     const void *b, int64_t ldb, bool trans_b, float *acc) {
  return gemm_acc_t(dtype, M, NB, K, a, lda, false, b, ldb, trans_b, acc);
}

/* gemm_<dt>(out, a, b, bias, add, ws, M, N, K, lda, ldb, epilogue, trans_b) */
static void gemm_any(fp_dtype dtype, const fp_karg *args) {
  void *out = args[0].v.handle;
  const void *a = args[1].v.handle, *b = args[2].v.handle;
  const void *bias = args[3].v.handle, *add = args[4].v.handle;
  const int64_t M = FP_CPU_I64(args, 6), N = FP_CPU_I64(args, 7), K = FP_CPU_I64(args, 8);
  const int64_t lda = FP_CPU_I64(args, 9), ldb = FP_CPU_I64(args, 10);
  const int epi = FP_CPU_I32(args, 11);
  const bool trans_b = FP_CPU_I32(args, 12) != 0;
  const bool paired = FP_EPI_PAIRED(epi);
  const int64_t NB = paired ? 2 * N : N;
  float *acc = malloc(sizeof(float) * (size_t)(M * NB));
  if (acc == NULL || !gemm_acc(dtype, M, NB, K, a, lda, b, ldb, trans_b, acc)) {
    free(acc);
    return;
  }
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float v;
      if (paired) {
        float bl = 0.0f, br = 0.0f;
        if (epi == FP_EPI_GEGLU) {
          bl = fp_cpu_load_elem(dtype, bias, j);
          br = fp_cpu_load_elem(dtype, bias, N + j);
        }
        v = fp_epilogue_paired(epi, acc[i * NB + j], acc[i * NB + N + j], bl, br);
      } else {
        float extra = FP_EPI_READS_BIAS(epi)  ? fp_cpu_load_elem(dtype, bias, j)
                      : FP_EPI_READS_ADD(epi) ? fp_cpu_load_elem(dtype, add, i * N + j)
                                              : 0.0f;
        v = fp_epilogue_unpaired(epi, acc[i * NB + j], extra);
      }
      fp_cpu_store_elem(dtype, out, i * N + j, v);
    }
  free(acc);
}

/* gemm2_<dt>(out, a, b, d, ws, M, N, K, P, lda, ldb, ldd, trans_b): the
 * intermediate rounded to the storage type, as the GPUs keep it. */
static void gemm2_any(fp_dtype dtype, const fp_karg *args) {
  void *out = args[0].v.handle;
  const void *a = args[1].v.handle, *b = args[2].v.handle, *d = args[3].v.handle;
  const int64_t M = FP_CPU_I64(args, 5), N = FP_CPU_I64(args, 6), K = FP_CPU_I64(args, 7);
  const int64_t P = FP_CPU_I64(args, 8), lda = FP_CPU_I64(args, 9), ldb = FP_CPU_I64(args, 10);
  const int64_t ldd = FP_CPU_I64(args, 11);
  const bool trans_b = FP_CPU_I32(args, 12) != 0;
  float *c = malloc(sizeof(float) * (size_t)(M * N));
  float *o = malloc(sizeof(float) * (size_t)(M * P));
  if (c == NULL || o == NULL || !gemm_acc(dtype, M, N, K, a, lda, b, ldb, trans_b, c)) {
    free(c);
    free(o);
    return;
  }
  for (int64_t i = 0; i < M * N; ++i) /* round to the storage type, in place */
    c[i] = dtype == FP_F16    ? fp_f16_bits_to_f32(fp_f32_to_f16_bits(c[i]))
           : dtype == FP_BF16 ? fp_bf16_bits_to_f32(fp_f32_to_bf16_bits(c[i]))
                              : c[i];
  /* o = c @ d: c is float already, d of the storage type, converted once */
  float *df = malloc(sizeof(float) * (size_t)(N * P));
  if (df != NULL) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t p = 0; p < P; ++p)
        df[n * P + p] = fp_cpu_load_elem(dtype, d, n * ldd + p);
    if (gemm_acc(FP_F32, M, P, N, c, N, df, P, false, o))
      for (int64_t i = 0; i < M * P; ++i)
        fp_cpu_store_elem(dtype, out, i, o[i]);
    free(df);
  }
  free(c);
  free(o);
}

static void gemm_f32(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  gemm_any(FP_F32, args);
}
static void gemm_f16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  gemm_any(FP_F16, args);
}
static void gemm_bf16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  gemm_any(FP_BF16, args);
}
static void gemm2_f32(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  gemm2_any(FP_F32, args);
}
static void gemm2_f16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  gemm2_any(FP_F16, args);
}
static void gemm2_bf16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  gemm2_any(FP_BF16, args);
}

/* dw_packed_<dt>(out, dy, words, scale, min, ws, K, COUT, CIN, bits, lddy):
 * x' dequantised into the float B panel (kernels.def, family compress's
 * layout), then dy^T @ x'. */
static void dw_packed_any(fp_dtype dtype, const fp_karg *args) {
  void *out = args[0].v.handle;
  const void *dy = args[1].v.handle;
  const uint32_t *words = args[2].v.handle;
  const uint16_t *scale = args[3].v.handle, *mins = args[4].v.handle;
  const int64_t K = FP_CPU_I64(args, 6), COUT = FP_CPU_I64(args, 7), CIN = FP_CPU_I64(args, 8);
  const int bits = FP_CPU_I32(args, 9);
  const int64_t lddy = FP_CPU_I64(args, 10);
  const int64_t G = (CIN + FP_QGROUP - 1) / FP_QGROUP, NW = 8 * bits, vpw = 32 / bits;
  const uint32_t qmask = (1u << bits) - 1u;
  float *bp = malloc(sizeof(float) * (size_t)(K * CIN));
  float *acc = malloc(sizeof(float) * (size_t)(COUT * CIN));
  if (bp != NULL && acc != NULL) {
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < CIN; ++n) {
        const int64_t g = n / FP_QGROUP, v = n % FP_QGROUP;
        const uint32_t w = words[(k * G + g) * NW + v / vpw];
        const uint32_t q = (w >> ((v % vpw) * bits)) & qmask;
        bp[k * CIN + n] = fp_dequant_value(q, fp_bf16_bits_to_f32(scale[k * G + g]),
                                           fp_bf16_bits_to_f32(mins[k * G + g]));
      }
    if (gemm_acc_panel(FP_BF16, COUT, CIN, K, dy, lddy, true, bp, acc))
      for (int64_t i = 0; i < COUT * CIN; ++i)
        fp_cpu_store_elem(dtype, out, i, acc[i]);
  }
  free(bp);
  free(acc);
}

static void dw_packed_f32(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  dw_packed_any(FP_F32, args);
}
static void dw_packed_bf16(const fp_ndrange *nd, const fp_karg *args) {
  (void)nd;
  dw_packed_any(FP_BF16, args);
}

void fp_cpu_register_gemm(fp_cpu_kernel_fn table[FPK_COUNT]) {
  table[FPK_dw_packed_f32] = dw_packed_f32;
  table[FPK_dw_packed_bf16] = dw_packed_bf16;
  table[FPK_gemm_f32] = gemm_f32;
  table[FPK_gemm_f16] = gemm_f16;
  table[FPK_gemm_bf16] = gemm_bf16;
  table[FPK_gemm2_f32] = gemm2_f32;
  table[FPK_gemm2_f16] = gemm2_f16;
  table[FPK_gemm2_bf16] = gemm2_bf16;
}

/* ---- the CPU backend's library GEMM ----------------------------------------------- */

fp_status fp_cpu_library_gemm(fp_context *ctx, const fp_lib_gemm *g, void *a, void *b, void *c,
                              void *d, void *bias, void *ws, uint64_t ws_bytes) {
  (void)ws;
  (void)ws_bytes;
  const size_t esize = fp_dtype_size(g->dtype);
  const fp_dtype out = fp_lib_gemm_out_dtype(g);
  const size_t osize = fp_dtype_size(out);
  float *acc = malloc(sizeof(float) * (size_t)(g->M * g->N));
  if (acc == NULL)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "cpu GEMM: no host memory for %lld x %lld",
                        (long long)g->M, (long long)g->N);
  for (int64_t t = 0; t < g->batch; ++t) {
    const char *ab = (const char *)a + (size_t)(t * g->stride_a) * esize;
    const char *bb = (const char *)b + (size_t)(t * g->stride_b) * esize;
    if (!gemm_acc_t(g->dtype, g->M, g->N, g->K, ab, g->lda, g->trans_a, bb, g->ldb, g->trans_b,
                    acc)) {
      free(acc);
      return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "cpu GEMM: no host memory for its panels");
    }
    char *db = (char *)d + (size_t)(t * g->stride_d) * osize;
    const char *cb = c != NULL ? (const char *)c + (size_t)(t * g->stride_c) * osize : NULL;
    for (int64_t i = 0; i < g->M; ++i)
      for (int64_t j = 0; j < g->N; ++j) {
        float v = g->alpha * acc[i * g->N + j];
        if (cb != NULL)
          v += g->beta * fp_cpu_load_elem(out, cb, i * g->ldc + j);
        if (g->epilogue == FP_LIB_EPI_BIAS || g->epilogue == FP_LIB_EPI_BIAS_RELU)
          v += fp_cpu_load_elem(out, bias, j);
        if (g->epilogue == FP_LIB_EPI_RELU || g->epilogue == FP_LIB_EPI_BIAS_RELU)
          v = v > 0.0f ? v : (isnan(v) ? v : 0.0f);
        fp_cpu_store_elem(out, db, i * g->ldd + j, v);
      }
  }
  free(acc);
  return FP_OK;
}
