/* fuseport: launch geometry and the primitive kernels of the unfused
 * recipes (one elementwise or one reduction step per launch, every
 * intermediate in device memory: what an eager framework runs). */
#include "fp_device_common.h"
#include "recipe.h"

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
  fp_view v = {b, M, N, s0, s1};
  return v;
}

fp_view fp_view_rows(fp_buffer *b, int64_t M, int64_t N) { return fp_view_strided(b, M, N, N, 1); }
fp_view fp_view_bias(fp_buffer *b, int64_t M, int64_t N) { return fp_view_strided(b, M, N, 0, 1); }
fp_view fp_view_perrow(fp_buffer *b, int64_t M, int64_t N) {
  return fp_view_strided(b, M, N, 1, 0);
}

fp_view fp_view_of(fp_buffer *b, const fp_tensor_desc *t, int64_t M, int64_t N) {
  if (t->rank == 1)
    return fp_view_strided(b, M, N, 0, t->strides[0]);
  return fp_view_strided(b, M, N, t->strides[0], t->strides[1]);
}

/* Bytes a kernel must touch for a view: broadcast dimensions count once. */
static uint64_t view_bytes(fp_view v) {
  return 4u * (uint64_t)(v.s0 != 0 ? v.M : 1) * (uint64_t)(v.s1 != 0 ? v.N : 1);
}

/* ---- primitives ----------------------------------------------------------------- */

fp_status fp_prim_unary(fp_recipe *rc, int op, float alpha, float beta, fp_view out, fp_view a) {
  fp_arg args[] = {fp_arg_buf(out.buf), fp_arg_buf(a.buf), fp_arg_i32(op),  fp_arg_f32(alpha),
                   fp_arg_f32(beta),    fp_arg_i64(a.M),   fp_arg_i64(a.N), fp_arg_i64(out.s0),
                   fp_arg_i64(out.s1),  fp_arg_i64(a.s0),  fp_arg_i64(a.s1)};
  double n = (double)a.M * (double)a.N;
  fp_ndrange nd = fp_elem_range(rc, a.M * a.N);
  return fp_rc_launch(rc, FPK_prim_unary, &nd, args, 11,
                      fp_kcost(view_bytes(a), view_bytes(out), op == FP_UNARY_AFFINE ? 2 * n : n));
}

fp_status fp_prim_binary(fp_recipe *rc, int op, fp_view out, fp_view a, fp_view b) {
  fp_arg args[] = {fp_arg_buf(out.buf), fp_arg_buf(a.buf), fp_arg_buf(b.buf),  fp_arg_i32(op),
                   fp_arg_i64(a.M),     fp_arg_i64(a.N),   fp_arg_i64(out.s0), fp_arg_i64(out.s1),
                   fp_arg_i64(a.s0),    fp_arg_i64(a.s1),  fp_arg_i64(b.s0),   fp_arg_i64(b.s1)};
  fp_ndrange nd = fp_elem_range(rc, a.M * a.N);
  return fp_rc_launch(
      rc, FPK_prim_binary, &nd, args, 12,
      fp_kcost(view_bytes(a) + view_bytes(b), view_bytes(out), (double)a.M * (double)a.N));
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
