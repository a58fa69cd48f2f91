/* fuseport: writing an operator's variants (for op implementers).
 *
 * A recipe is called with an fp_recipe that either runs for real (ctx set)
 * or dry (ctx NULL: no buffers, nothing launched). Through it the recipe gets
 * its tensors, asks for workspace and launches kernels, declaring for each
 * launch the bytes it must move and the FLOPs it does. A dry run therefore
 * yields the workspace sizes and the cost model from the very code that runs.
 *
 *   static fp_status softmax_fused(fp_recipe *rc, const fp_problem *p) {
 *     int64_t M = fp_problem_int(p, 0), N = fp_problem_int(p, 1);
 *     fp_arg a[] = {fp_arg_buf(fp_rc_out(rc, 0)), fp_arg_buf(fp_rc_in(rc, 0)),
 *                   fp_arg_i64(M), fp_arg_i64(N)};
 *     fp_ndrange nd = fp_rows_range(rc, M, N);
 *     return fp_rc_launch(rc, FPK_softmax_fused, &nd, a, 4,
 *                         fp_kcost(4 * M * N, 4 * M * N, 5.0 * M * N));
 *   }
 */
#ifndef FUSEPORT_RECIPE_H
#define FUSEPORT_RECIPE_H

#include "op.h"

struct fp_recipe {
  fp_context *ctx;           /* NULL: dry run */
  const fp_device_info *dev; /* never NULL (a generic device in a dry run without one) */
  fp_buffer *const *in;
  fp_buffer *const *out;
  fp_buffer *ws[FP_MAX_WORKSPACE]; /* real run: allocated from the dry run's sizes */
  uint64_t ws_bytes[FP_MAX_WORKSPACE];
  bool ws_zeroed[FP_MAX_WORKSPACE]; /* zero-filled when the plan is created */
  int n_ws;
  fp_cost cost;
  fp_status status; /* first failure (dry run: a recipe error) */
};

/* Bytes and FLOPs of one launch. */
typedef struct fp_kernel_cost {
  uint64_t bytes_read, bytes_written;
  double flops;
} fp_kernel_cost;

static inline fp_kernel_cost fp_kcost(uint64_t read, uint64_t written, double flops) {
  fp_kernel_cost c;
  c.bytes_read = read;
  c.bytes_written = written;
  c.flops = flops;
  return c;
}

/* Input/output k (NULL in a dry run). */
fp_buffer *fp_rc_in(fp_recipe *rc, int k);
fp_buffer *fp_rc_out(fp_recipe *rc, int k);
/* Workspace buffer k of `bytes` (NULL in a dry run). Indices are dense from
 * 0; asking for the same index again reuses that buffer (it must fit), which
 * is how a recipe models a caching allocator handing back a dead
 * intermediate. */
fp_buffer *fp_rc_ws(fp_recipe *rc, int k, uint64_t bytes);
/* The same, zero-filled once when the plan is created (not per run): for
 * kernels that leave their workspace zeroed again (split-K counters). */
fp_buffer *fp_rc_ws_zeroed(fp_recipe *rc, int k, uint64_t bytes);

/* Enqueues a kernel (real run) and adds its cost (both runs). */
fp_status fp_rc_launch(fp_recipe *rc, fp_kernel_id id, const fp_ndrange *nd, const fp_arg *args,
                       int nargs, fp_kernel_cost cost);

/* Enqueues a call of the backend's GEMM library (real run) and adds its
 * cost (both runs): a library call, counted apart from kernel launches.
 * FP_ERR_UNSUPPORTED, in the dry run already, when the library cannot
 * compute g (fp_library_gemm_check). */
fp_status fp_rc_library_gemm(fp_recipe *rc, const fp_lib_gemm *g, fp_buffer *a, fp_buffer *b,
                             fp_buffer *c, fp_buffer *d, fp_buffer *bias, fp_buffer *workspace,
                             fp_kernel_cost cost);

/* The same for the backend's convolution library (fp_library_conv). */
fp_status fp_rc_library_conv(fp_recipe *rc, const fp_lib_conv *c, fp_buffer *x, fp_buffer *w,
                             fp_buffer *bias, fp_buffer *z, fp_buffer *out, fp_buffer *workspace,
                             fp_kernel_cost cost);

/* Geometry helpers for the conventions of kernels.def. */
fp_ndrange fp_elem_range(const fp_recipe *rc, int64_t n);
/* ROWS: one group per row (up to a cap), local size from N and the device. */
fp_ndrange fp_rows_range(const fp_recipe *rc, int64_t M, int64_t N);
fp_ndrange fp_tile_range(const fp_recipe *rc, int64_t M, int64_t N);

/* ---- the unfused building blocks: one primitive kernel each ---------------- */

/* A 2-D [M, N] view of a buffer with element strides; stride 0 broadcasts
 * (a bias [N] is (0, 1), a per-row value [M] is (1, 0)). The element type is
 * float32 unless fp_view_typed says otherwise; a primitive's operands share
 * one type (f32, f16 or bf16), computed in float and rounded once. */
typedef struct fp_view {
  fp_buffer *buf;
  int64_t M, N, s0, s1;
  fp_dtype dtype;
  int64_t off; /* storage offset, elements */
} fp_view;

fp_view fp_view_rows(fp_buffer *b, int64_t M, int64_t N);   /* row-major [M,N] */
fp_view fp_view_bias(fp_buffer *b, int64_t M, int64_t N);   /* [N] over rows */
fp_view fp_view_perrow(fp_buffer *b, int64_t M, int64_t N); /* [M] over columns */
fp_view fp_view_strided(fp_buffer *b, int64_t M, int64_t N, int64_t s0, int64_t s1);
/* View of tensor desc t (rank 1 [N] broadcast over M rows, or rank 2), of its type. */
fp_view fp_view_of(fp_buffer *b, const fp_tensor_desc *t, int64_t M, int64_t N);
/* v with element type dtype. */
fp_view fp_view_typed(fp_view v, fp_dtype dtype);
/* v starting `off` elements into its buffer (a column block of a wider tensor). */
fp_view fp_view_offset(fp_view v, int64_t off);

fp_status fp_prim_unary(fp_recipe *rc, int op, float alpha, float beta, fp_view out, fp_view a);
fp_status fp_prim_binary(fp_recipe *rc, int op, fp_view out, fp_view a, fp_view b);
/* out [M] contiguous = reduce over each row of a. */
fp_status fp_prim_reduce_rows(fp_recipe *rc, int op, fp_buffer *out, fp_view a);
fp_status fp_prim_dropout(fp_recipe *rc, fp_view out, fp_view a, float p, float scale,
                          uint64_t seed, int training);
/* The per-channel step of a convolution's output (prim_channel_<dt>):
 * out[i] = a[i] + v[0][c] (FP_CHAN_ADD) or fp_bn(a[i], v[0..3][c], eps)
 * (FP_CHAN_BN), c = (i / inner) % K; out may be a (in place). */
fp_status fp_prim_channel(fp_recipe *rc, int op, fp_dtype dtype, fp_buffer *out, fp_buffer *a,
                          fp_buffer *const v[4], int64_t total, int64_t inner, int64_t K,
                          float eps);
/* out [rows, ld_out] = in [rows, cols] with columns cols..ld_out-1 zero
 * (f16/bf16): a GEMM operand whose rows start 16-byte aligned. */
fp_status fp_prim_pad_rows(fp_recipe *rc, fp_dtype dtype, fp_buffer *out, fp_buffer *in,
                           int64_t rows, int64_t cols, int64_t ld_out);

#endif
