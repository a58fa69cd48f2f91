/* fuseport: launch geometry and the primitive kernels of the unfused
 * recipes (one elementwise or one reduction step per launch, every
 * intermediate in device memory: what an eager framework runs). */
#include "fp_device_common.h"
#include "ops_internal.h"

/* ---- geometry ---------------------------------------------------------------- */

static uint32_t pow2_floor(uint32_t x) {
  uint32_t p = 1;
  while (p * 2 <= x)
    p *= 2;
  return p;
}

static uint32_t pow2_ceil64(int64_t x) {
  uint32_t p = 1;
  while ((int64_t)p < x && p < (1u << 30))
    p *= 2;
  return p;
}

/* ELEM: 256 work-items a group; enough groups to fill the device several
 * times over, the rest is the kernels' grid-stride loop. */
fp_ndrange fp_elem_range(const fp_recipe *rc, int64_t n) {
  uint32_t local = rc->dev->max_group_size < 256 ? pow2_floor(rc->dev->max_group_size) : 256;
  int64_t wanted = (n + local - 1) / local;
  int64_t cap = (int64_t)rc->dev->compute_units * 32;
  if (cap < 1)
    cap = 1;
  return fp_ndrange_1d((uint64_t)(wanted < cap ? (wanted < 1 ? 1 : wanted) : cap), local);
}

/* ROWS: one group per row; about sixteen elements per work-item, 32..1024.
 * Measured on an H100 (NVIDIA OpenCL, softmax): at N=1000 a group of 64
 * moves 2848 GB/s against 2249 with 128 and 210 with 1024 -- wide groups on
 * short rows spend their time in barriers. */
fp_ndrange fp_rows_range(const fp_recipe *rc, int64_t M, int64_t N) {
  uint32_t max_local = pow2_floor(rc->dev->max_group_size < 1024 ? rc->dev->max_group_size : 1024);
  uint32_t local = pow2_ceil64((N + 15) / 16);
  if (local < 32)
    local = 32;
  if (local > max_local)
    local = max_local;
  int64_t groups = M < (1 << 20) ? M : (1 << 20);
  return fp_ndrange_1d((uint64_t)groups, local);
}

fp_ndrange fp_tile_range(const fp_recipe *rc, int64_t M, int64_t N) {
  (void)rc;
  return fp_ndrange_2d((uint64_t)((N + 31) / 32), 32, (uint64_t)((M + 31) / 32), 8);
}

/* ---- views -------------------------------------------------------------------- */

fp_view fp_view_strided(fp_buffer *b, int64_t M, int64_t N, int64_t s0, int64_t s1) {
  fp_view v = {b, M, N, s0, s1, FP_F32, 0};
  return v;
}

fp_view fp_view_offset(fp_view v, int64_t off) {
  v.off = off;
  return v;
}

fp_view fp_view_typed(fp_view v, fp_dtype dtype) {
  v.dtype = dtype;
  return v;
}

fp_view fp_view_rows(fp_buffer *b, int64_t M, int64_t N) { return fp_view_strided(b, M, N, N, 1); }
fp_view fp_view_bias(fp_buffer *b, int64_t M, int64_t N) { return fp_view_strided(b, M, N, 0, 1); }
fp_view fp_view_perrow(fp_buffer *b, int64_t M, int64_t N) {
  return fp_view_strided(b, M, N, 1, 0);
}

fp_view fp_view_of(fp_buffer *b, const fp_tensor_desc *t, int64_t M, int64_t N) {
  if (t->rank == 1)
    return fp_view_typed(fp_view_strided(b, M, N, 0, t->strides[0]), t->dtype);
  return fp_view_typed(fp_view_strided(b, M, N, t->strides[0], t->strides[1]), t->dtype);
}

/* Bytes a kernel must touch for a view: broadcast dimensions count once. */
static uint64_t view_bytes(fp_view v) {
  return (uint64_t)fp_dtype_size(v.dtype) * (uint64_t)(v.s0 != 0 ? v.M : 1) *
         (uint64_t)(v.s1 != 0 ? v.N : 1);
}

/* The build of a primitive for its operands' type; FP_ERR_INVALID_ARGUMENT
 * (through the recipe) for mixed or unsupported types. */
static fp_status prim_kernel(fp_recipe *rc, const char *what, fp_kernel_id f32, fp_kernel_id f16,
                             fp_kernel_id bf16, const fp_view *views, int n, fp_kernel_id *out) {
  for (int k = 1; k < n; ++k)
    if (views[k].dtype != views[0].dtype) {
      fp_status st = fp_error(FP_ERR_INVALID_ARGUMENT, "%s: operands of types %s and %s", what,
                              fp_dtype_name(views[0].dtype), fp_dtype_name(views[k].dtype));
      if (rc->status == FP_OK)
        rc->status = st;
      return st;
    }
  switch (views[0].dtype) {
  case FP_F32:
    *out = f32;
    return FP_OK;
  case FP_F16:
    *out = f16;
    return FP_OK;
  case FP_BF16:
    *out = bf16;
    return FP_OK;
  default:
    break;
  }
  fp_status st = fp_error(FP_ERR_INVALID_ARGUMENT, "%s: no primitive for %s", what,
                          fp_dtype_name(views[0].dtype));
  if (rc->status == FP_OK)
    rc->status = st;
  return st;
}

/* ---- primitives ----------------------------------------------------------------- */

fp_status fp_prim_unary(fp_recipe *rc, int op, float alpha, float beta, fp_view out, fp_view a) {
  const fp_view views[] = {out, a};
  fp_kernel_id id = FPK_COUNT;
  TRY(prim_kernel(rc, "prim_unary", FPK_prim_unary, FPK_prim_unary_f16, FPK_prim_unary_bf16, views,
                  2, &id));
  fp_arg args[] = {fp_arg_tensor(out.buf, out.dtype),
                   fp_arg_tensor(a.buf, a.dtype),
                   fp_arg_i32(op),
                   fp_arg_f32(alpha),
                   fp_arg_f32(beta),
                   fp_arg_i64(a.M),
                   fp_arg_i64(a.N),
                   fp_arg_i64(out.s0),
                   fp_arg_i64(out.s1),
                   fp_arg_i64(a.s0),
                   fp_arg_i64(a.s1),
                   fp_arg_i64(out.off),
                   fp_arg_i64(a.off)};
  double n = (double)a.M * (double)a.N;
  fp_ndrange nd = fp_elem_range(rc, a.M * a.N);
  return fp_rc_launch(rc, id, &nd, args, 13,
                      fp_kcost(view_bytes(a), view_bytes(out), op == FP_UNARY_AFFINE ? 2 * n : n));
}

fp_status fp_prim_binary(fp_recipe *rc, int op, fp_view out, fp_view a, fp_view b) {
  const fp_view views[] = {out, a, b};
  fp_kernel_id id = FPK_COUNT;
  TRY(prim_kernel(rc, "prim_binary", FPK_prim_binary, FPK_prim_binary_f16, FPK_prim_binary_bf16,
                  views, 3, &id));
  fp_arg args[] = {fp_arg_tensor(out.buf, out.dtype),
                   fp_arg_tensor(a.buf, a.dtype),
                   fp_arg_tensor(b.buf, b.dtype),
                   fp_arg_i32(op),
                   fp_arg_i64(a.M),
                   fp_arg_i64(a.N),
                   fp_arg_i64(out.s0),
                   fp_arg_i64(out.s1),
                   fp_arg_i64(a.s0),
                   fp_arg_i64(a.s1),
                   fp_arg_i64(b.s0),
                   fp_arg_i64(b.s1),
                   fp_arg_i64(out.off),
                   fp_arg_i64(a.off),
                   fp_arg_i64(b.off)};
  fp_ndrange nd = fp_elem_range(rc, a.M * a.N);
  return fp_rc_launch(
      rc, id, &nd, args, 15,
      fp_kcost(view_bytes(a) + view_bytes(b), view_bytes(out), (double)a.M * (double)a.N));
}

fp_status fp_prim_channel(fp_recipe *rc, int op, fp_dtype dtype, fp_buffer *out, fp_buffer *a,
                          fp_buffer *const v[4], int64_t total, int64_t inner, int64_t K,
                          float eps) {
  const fp_kernel_id id = dtype == FP_F16    ? FPK_prim_channel_f16
                          : dtype == FP_BF16 ? FPK_prim_channel_bf16
                                             : FPK_prim_channel;
  const int nvec = op == FP_CHAN_BN ? 4 : 1;
  fp_arg args[11];
  args[0] = fp_arg_tensor(out, dtype);
  args[1] = fp_arg_tensor(a, dtype);
  for (int k = 0; k < 4; ++k)
    args[2 + k] = fp_arg_tensor(k < nvec ? v[k] : NULL, dtype);
  args[6] = fp_arg_i32(op);
  args[7] = fp_arg_i64(total);
  args[8] = fp_arg_i64(inner);
  args[9] = fp_arg_i64(K);
  args[10] = fp_arg_f32(eps);
  const uint64_t size = fp_dtype_size(dtype);
  fp_ndrange nd = fp_elem_range(rc, total);
  return fp_rc_launch(rc, id, &nd, args, 11,
                      fp_kcost(size * (uint64_t)(total + nvec * K), size * (uint64_t)total,
                               (op == FP_CHAN_BN ? 5.0 : 1.0) * (double)total));
}

fp_status fp_prim_pad_rows(fp_recipe *rc, fp_dtype dtype, fp_buffer *out, fp_buffer *in,
                           int64_t rows, int64_t cols, int64_t ld_out) {
  fp_kernel_id id = dtype == FP_F16 ? FPK_prim_pad_rows_f16 : FPK_prim_pad_rows_bf16;
  if (dtype != FP_F16 && dtype != FP_BF16) {
    fp_status st =
        fp_error(FP_ERR_INVALID_ARGUMENT, "prim_pad_rows: no build for %s", fp_dtype_name(dtype));
    if (rc->status == FP_OK)
      rc->status = st;
    return st;
  }
  fp_arg args[] = {fp_arg_tensor(out, dtype), fp_arg_tensor(in, dtype), fp_arg_i64(rows),
                   fp_arg_i64(cols), fp_arg_i64(ld_out)};
  fp_ndrange nd = fp_elem_range(rc, rows * ld_out);
  const uint64_t size = fp_dtype_size(dtype);
  return fp_rc_launch(
      rc, id, &nd, args, 5,
      fp_kcost(size * (uint64_t)(rows * cols), size * (uint64_t)(rows * ld_out), 0));
}

fp_status fp_prim_reduce_rows(fp_recipe *rc, int op, fp_buffer *out, fp_view a) {
  fp_arg args[] = {fp_arg_buf(out), fp_arg_buf(a.buf), fp_arg_i32(op),  fp_arg_i64(a.M),
                   fp_arg_i64(a.N), fp_arg_i64(a.s0),  fp_arg_i64(a.s1)};
  fp_ndrange nd = fp_rows_range(rc, a.M, a.N);
  return fp_rc_launch(rc, FPK_prim_reduce_rows, &nd, args, 7,
                      fp_kcost(view_bytes(a), 4u * (uint64_t)a.M, (double)a.M * (double)a.N));
}

fp_status fp_prim_dropout(fp_recipe *rc, fp_view out, fp_view a, float p, float scale,
                          uint64_t seed, int training) {
  fp_arg args[] = {fp_arg_buf(out.buf), fp_arg_buf(a.buf),         fp_arg_i64(a.M),
                   fp_arg_i64(a.N),     fp_arg_i64(out.s0),        fp_arg_i64(out.s1),
                   fp_arg_i64(a.s0),    fp_arg_i64(a.s1),          fp_arg_f32(p),
                   fp_arg_f32(scale),   fp_arg_i64((int64_t)seed), fp_arg_i32(training)};
  fp_ndrange nd = fp_elem_range(rc, a.M * a.N);
  return fp_rc_launch(rc, FPK_prim_dropout, &nd, args, 12,
                      fp_kcost(view_bytes(a), view_bytes(out), 2.0 * (double)a.M * (double)a.N));
}
