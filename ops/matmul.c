/* fuseport operators, family matmul (SPEC.md, "Matmul family"): a GEMM with
 * a fused epilogue, two GEMMs back to back, the split-activation GEMM and
 * GeGLU, in float32 (no TF32), float16 and bfloat16 (float32 accumulation).
 *
 * Variants:
 *   fused    fuseport's GEMM core (kernels.def, family gemm): one launch, the
 *            epilogue applied to the accumulators before the only store;
 *            matmul_split_act and linear_geglu compute the left and right
 *            column blocks of the [M, 2N] product in the same block and
 *            multiply them in registers. matmul_matmul keeps the [M, N]
 *            intermediate on chip where N fits a block's tile (gemm2);
 *            beyond that it is two of fuseport's GEMM launches through a
 *            workspace. On CUDA an operand whose rows would not start
 *            16-byte aligned (K or the column count not a multiple of 8 in
 *            f16/bf16) is first copied into a padded workspace
 *            (prim_pad_rows, one more launch), where the planner's path
 *            loads with 16-byte copies; on the sm90 path big GEMMs also pad
 *            K-major rows that are not whole 128-byte lines (pad_rows128).
 *            The float64 reference and the tolerance: matmul_reference.c.
 *   unfused  what PyTorch eager runs: the backend's GEMM library (cuBLAS,
 *            CLBlast, the CPU GEMM), then one primitive kernel per epilogue
 *            step, every intermediate in device memory.
 *   vendor   cuBLASLt in one call where its epilogues express the op (bias,
 *            beta*C for a full add, relu, relu+bias); unsupported elsewhere.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp_device_common.h"
#include "gemm_plan.h"
#include "matmul_internal.h"

static const char *const dtype_choices[] = {"f32", "f16", "bf16", NULL};
static const char *const add_choices[] = {"bias", "full", NULL};
/* dtype choice index -> fp_dtype */
static const fp_dtype dtype_of_choice[] = {FP_F32, FP_F16, FP_BF16};

mm_problem fp_matmul_problem_of(const fp_problem *p) {
  mm_problem m;
  memset(&m, 0, sizeof m);
  const fp_op *op = p->op;
  if (fp_is_op(op, &fp_op_matmul_matmul)) {
    m.kind = KIND_B2B;
    m.M = P_INT(p, B2_M);
    m.N = P_INT(p, B2_N);
    m.K = P_INT(p, B2_K);
    m.P = P_INT(p, B2_P);
    m.dtype = dtype_of_choice[P_INT(p, B2_DTYPE)];
    m.trans_b = P_INT(p, B2_TRANS) != 0;
    m.NB = m.N;
    m.epi = FP_EPI_NONE;
    return m;
  }
  m.M = P_INT(p, MM_M);
  m.N = P_INT(p, MM_N);
  m.K = P_INT(p, MM_K);
  m.dtype = dtype_of_choice[P_INT(p, MM_DTYPE)];
  m.trans_b = P_INT(p, MM_TRANS) != 0;
  m.NB = m.N;
  if (fp_is_op(op, &fp_op_matmul_add) || fp_is_op(op, &fp_op_matmul_add_relu)) {
    const bool relu = fp_is_op(op, &fp_op_matmul_add_relu);
    m.kind = relu ? KIND_ADD_RELU : KIND_ADD;
    m.full_add = P_INT(p, MM_ADD) == ADD_FULL;
    m.epi = m.full_add ? (relu ? FP_EPI_ADD_RELU : FP_EPI_ADD)
                       : (relu ? FP_EPI_BIAS_RELU : FP_EPI_BIAS);
  } else if (fp_is_op(op, &fp_op_matmul_relu)) {
    m.kind = KIND_RELU;
    m.epi = FP_EPI_RELU;
  } else if (fp_is_op(op, &fp_op_matmul_split_act)) {
    m.kind = KIND_SPLIT_ACT;
    m.NB = 2 * m.N;
    m.epi = FP_EPI_SPLIT_ACT;
  } else {
    m.kind = KIND_GEGLU;
    m.NB = 2 * m.N;
    m.epi = FP_EPI_GEGLU;
  }
  return m;
}

static uint64_t esize(const mm_problem *m) { return fp_dtype_size(m->dtype); }

/* ---- validation and tensors ------------------------------------------------------- */

/* Element counts of every operand fit 64-bit byte counts and the kernels'
 * int64 indices. */
static fp_status mm_validate(const fp_problem *p) {
  const mm_problem m = fp_matmul_problem_of(p);
  const double limit = (double)(INT64_MAX / 16);
  const double sizes[] = {(double)m.M * (double)m.K, (double)m.K * (double)m.NB,
                          (double)m.M * (double)m.NB, (double)m.N * (double)m.P,
                          (double)m.M * (double)m.P};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k)
    if (sizes[k] > limit)
      return fp_error(FP_ERR_INVALID_ARGUMENT,
                      "op %s: an operand of M=%lld N=%lld K=%lld%s has %.4g elements; byte "
                      "counts would overflow",
                      p->op->name, (long long)m.M, (long long)m.N, (long long)m.K,
                      m.kind == KIND_B2B ? " P" : "", sizes[k]);
  return FP_OK;
}

static void mm_describe(const fp_problem *p, fp_io_desc *io) {
  const mm_problem m = fp_matmul_problem_of(p);
  memset(io, 0, sizeof *io);
  io->n_in = 2;
  io->n_out = 1;
  fp_tensor_2d(&io->in[0], m.kind == KIND_GEGLU ? "x" : "a", m.M, m.K);
  if (m.trans_b)
    fp_tensor_2d(&io->in[1], m.kind == KIND_GEGLU ? "w" : "b", m.NB, m.K);
  else
    fp_tensor_2d(&io->in[1], m.kind == KIND_GEGLU ? "w" : "b", m.K, m.NB);
  io->in[1].fill_scale = fp_sum_scale(m.K);
  switch (m.kind) {
  case KIND_ADD:
  case KIND_ADD_RELU:
    io->n_in = 3;
    if (m.full_add)
      fp_tensor_2d(&io->in[2], "c", m.M, m.N);
    else
      fp_tensor_1d(&io->in[2], "bias", m.N);
    break;
  case KIND_GEGLU:
    io->n_in = 3;
    fp_tensor_1d(&io->in[2], "bias", 2 * m.N);
    break;
  case KIND_B2B:
    io->n_in = 3;
    fp_tensor_2d(&io->in[2], "d", m.N, m.P);
    io->in[2].fill_scale = fp_sum_scale(m.N);
    break;
  default:
    break;
  }
  fp_tensor_2d(&io->out[0], "out", m.M, m.kind == KIND_B2B ? m.P : m.N);
  for (int k = 0; k < io->n_in; ++k)
    io->in[k].dtype = m.dtype;
  io->out[0].dtype = m.dtype;
}

static int64_t mm_rows(const fp_problem *p) { return P_INT(p, MM_M); }

static fp_dtype mm_compute_dtype(const fp_problem *p) { return fp_matmul_problem_of(p).dtype; }

/* ---- the fused variant ---------------------------------------------------------------------- */

static fp_kernel_id gemm_kernel(fp_dtype dtype) {
  return dtype == FP_F16 ? FPK_gemm_f16 : dtype == FP_BF16 ? FPK_gemm_bf16 : FPK_gemm_f32;
}
static fp_kernel_id gemm2_kernel(fp_dtype dtype) {
  return dtype == FP_F16 ? FPK_gemm2_f16 : dtype == FP_BF16 ? FPK_gemm2_bf16 : FPK_gemm2_f32;
}

/* OpenCL's gemm2 keeps the intermediate's [rows, N] block in local memory
 * up to this N (kernels/cl/gemm_kernels.cl); the CPU's has no limit. */
#define FP_CL_GEMM2_MAX_N 128

/* The CUDA planner's view of a launch (the same call the backend makes). */
static fp_status cuda_plan(fp_recipe *rc, const fp_gemm_request *req, fp_gemm_plan *plan) {
  fp_gemm_path force = FP_GEMM_PATH_AUTO;
  if (!fp_gemm_path_from_env(getenv("FUSEPORT_CUDA_GEMM_PATH"), &force)) {
    fp_status st = fp_error(FP_ERR_INVALID_ARGUMENT,
                            "FUSEPORT_CUDA_GEMM_PATH='%s': expected auto, sm90, sm80, simt or "
                            "skinny",
                            getenv("FUSEPORT_CUDA_GEMM_PATH"));
    if (rc->status == FP_OK)
      rc->status = st;
    return st;
  }
  const fp_gemm_device dev = fp_gemm_device_of(rc->dev);
  char why[256];
  if (!fp_gemm_plan_make(req, &dev, force, plan, why, sizeof why)) {
    fp_status st = fp_error(FP_ERR_UNSUPPORTED, "GEMM core on '%s': %s", rc->dev->name, why);
    if (rc->status == FP_OK)
      rc->status = st;
    return st;
  }
  return FP_OK;
}

/* The operands of one launch of the GEMM core, after any padding. */
typedef struct gemm_operands {
  fp_buffer *a, *b;
  int64_t lda, ldb;
} gemm_operands;

/* The leading dimension a padded copy gets: rows of 16 bytes for cp.async;
 * for TMA (the sm90 path) rows of 128 bytes, since a box row that starts
 * mid-line costs TMA a second L2 request (gemm_plan.c: 0.66-0.75 of the
 * speed on an H100) and a copy made anyway may as well avoid it. */
static int64_t padded_ld(const fp_gemm_plan *plan, int64_t cols) {
  const int64_t unit = plan->path == FP_GEMM_PATH_SM90 ? 64 : 8;
  return (cols + unit - 1) / unit * unit;
}

/* Whether a GEMM on the sm90 path pads its K-major operands (A, and B with
 * trans_b) whose rows are 16-byte but not 128-byte aligned (K not a
 * multiple of 64): TMA then splits every box row into two L2 requests. The
 * planner's cluster rows (B multicast) hide that where it takes them
 * (4096x4096x4104, f16, H200, 2026-11-28: 189 us, as fast as 4096^3), but
 * not where the tile rows are odd or too few: 4104^3 took 332 us, 301 with
 * A padded (cuBLAS 208). A row-major B alone is better left as it is
 * (4096x4104x4096: 209 us, 230 with B padded). A padded copy moves its
 * operand twice at copy speed; with about 200 f16 FLOPs a byte of copy
 * bandwidth (H100, H200) it pays when M * NB >= 1536 * (M + NB), squares
 * from 3072 up, and K is deep enough for the main loop to outweigh the
 * extra launch (3100x3100x200: 52 us as it is, 57 padded; K >= 1024).
 * FUSEPORT_CUDA_GEMM_PAD128=0 keeps such rows (for timing). */
static bool pad_rows128(const fp_gemm_plan *plan, int64_t M, int64_t NB, int64_t K) {
  if (plan->path != FP_GEMM_PATH_SM90 || (plan->flags & FP_GEMM_CFG_CLUSTER2) != 0 || K < 1024)
    return false;
  const char *knob = getenv("FUSEPORT_CUDA_GEMM_PAD128");
  if (knob != NULL && strcmp(knob, "0") == 0)
    return false;
  return (double)M * (double)NB >= 1536.0 * (double)(M + NB);
}

/* Pads A [M, K] and B ([NB, K] or [K, NB]) into workspaces *next_ws,
 * *next_ws+1 where the plan loads 16-byte rows and theirs are not (with
 * rows128, A and a trans_b B: where theirs are not 128-byte rows). */
static fp_status pad_operands(fp_recipe *rc, fp_dtype dtype, const fp_gemm_plan *plan, int64_t M,
                              int64_t NB, int64_t K, bool trans_b, bool rows128, gemm_operands *ops,
                              int *next_ws) {
  if (!plan->aligned_rows || dtype == FP_F32)
    return FP_OK;
  const uint64_t size = fp_dtype_size(dtype);
  if (ops->lda % (rows128 ? 64 : 8) != 0) {
    const int64_t ld = padded_ld(plan, K);
    fp_buffer *w = fp_rc_ws(rc, (*next_ws)++, (uint64_t)(M * ld) * size);
    TRY(fp_prim_pad_rows(rc, dtype, w, ops->a, M, K, ld));
    ops->a = w;
    ops->lda = ld;
  }
  if (ops->ldb % (rows128 && trans_b ? 64 : 8) != 0) {
    const int64_t rows = trans_b ? NB : K, cols = trans_b ? K : NB;
    const int64_t ld = padded_ld(plan, cols);
    fp_buffer *w = fp_rc_ws(rc, (*next_ws)++, (uint64_t)(rows * ld) * size);
    TRY(fp_prim_pad_rows(rc, dtype, w, ops->b, rows, cols, ld));
    ops->b = w;
    ops->ldb = ld;
  }
  return FP_OK;
}

/* One launch of gemm_<dt>: out[M, N] = epi(a @ B) with bias/add as the
 * epilogue reads them. Plans (CUDA), pads and sizes the split-K workspace. */
static fp_status launch_gemm(fp_recipe *rc, fp_dtype dtype, fp_buffer *out, fp_buffer *a,
                             fp_buffer *b, fp_buffer *bias, fp_buffer *add, int64_t M, int64_t N,
                             int64_t K, int epi, bool trans_b, int *next_ws) {
  const bool paired = FP_EPI_PAIRED(epi);
  const int64_t NB = paired ? 2 * N : N;
  gemm_operands ops = {a, b, K, trans_b ? K : NB};
  fp_buffer *ws = NULL;
  if (rc->dev->backend == FP_BACKEND_CUDA) {
    fp_gemm_request req = {(int)dtype, M, N, K, 0, epi, trans_b, false, 0, 0, false, false};
    fp_gemm_plan plan;
    TRY(cuda_plan(rc, &req, &plan));
    const int64_t lda = ops.lda, ldb = ops.ldb;
    TRY(pad_operands(rc, dtype, &plan, M, NB, K, trans_b, pad_rows128(&plan, M, NB, K), &ops,
                     next_ws));
    if (ops.lda != lda || ops.ldb != ldb) { /* the launch plans with the padded rows */
      req.lda = ops.lda;
      req.ldb = ops.ldb;
      TRY(cuda_plan(rc, &req, &plan));
    }
    if (plan.ws_bytes > 0)
      ws = fp_rc_ws_zeroed(rc, (*next_ws)++, plan.ws_bytes);
  }
  const uint64_t size = fp_dtype_size(dtype);
  uint64_t read = size * (uint64_t)(M * K + K * NB);
  if (FP_EPI_READS_BIAS(epi))
    read += size * (uint64_t)(paired ? 2 * N : N);
  if (FP_EPI_READS_ADD(epi))
    read += size * (uint64_t)(M * N);
  const double flops = 2.0 * (double)M * (double)NB * (double)K + 4.0 * (double)M * (double)N;
  fp_arg args[] = {fp_arg_tensor(out, dtype),
                   fp_arg_tensor(ops.a, dtype),
                   fp_arg_tensor(ops.b, dtype),
                   fp_arg_tensor(FP_EPI_READS_BIAS(epi) ? bias : NULL, dtype),
                   fp_arg_tensor(FP_EPI_READS_ADD(epi) ? add : NULL, dtype),
                   fp_arg_tensor(ws, FP_U32),
                   fp_arg_i64(M),
                   fp_arg_i64(N),
                   fp_arg_i64(K),
                   fp_arg_i64(ops.lda),
                   fp_arg_i64(ops.ldb),
                   fp_arg_i32(epi),
                   fp_arg_i32(trans_b ? 1 : 0)};
  fp_ndrange nd = fp_planned_range();
  return fp_rc_launch(rc, gemm_kernel(dtype), &nd, args, 13,
                      fp_kcost(read, size * (uint64_t)(M * N), flops));
}

/* matmul_matmul: gemm2 where the intermediate stays on chip, else two
 * launches of the GEMM core through a workspace (rounded to the storage
 * type in memory, as it would be on chip). */
static fp_status b2b_fused(fp_recipe *rc, const mm_problem *m) {
  fp_buffer *a = fp_rc_in(rc, 0), *b = fp_rc_in(rc, 1), *d = fp_rc_in(rc, 2);
  fp_buffer *out = fp_rc_out(rc, 0);
  int next_ws = 0;
  bool on_chip = true;
  gemm_operands ops = {a, b, m->K, m->trans_b ? m->K : m->N};
  int64_t ldd = m->P;
  fp_buffer *ws = NULL;
  if (rc->dev->backend == FP_BACKEND_CUDA) {
    fp_gemm_request req = {(int)m->dtype, m->M, m->N, m->K, m->P,  FP_EPI_NONE,
                           m->trans_b,    true, 0,    0,    false, false};
    fp_gemm_plan plan;
    TRY(cuda_plan(rc, &req, &plan));
    on_chip = plan.b2b_on_chip;
    if (on_chip) {
      TRY(pad_operands(rc, m->dtype, &plan, m->M, m->N, m->K, m->trans_b, false, &ops, &next_ws));
      if (plan.aligned_rows && m->dtype != FP_F32 && ldd % 8 != 0) {
        const int64_t ld = padded_ld(&plan, m->P);
        fp_buffer *w = fp_rc_ws(rc, next_ws++, (uint64_t)(m->N * ld) * esize(m));
        TRY(fp_prim_pad_rows(rc, m->dtype, w, d, m->N, m->P, ld));
        d = w;
        ldd = ld;
      }
      if (plan.ws_bytes > 0)
        ws = fp_rc_ws_zeroed(rc, next_ws++, plan.ws_bytes);
    }
  } else if (rc->dev->backend == FP_BACKEND_OPENCL) {
    on_chip = m->N <= FP_CL_GEMM2_MAX_N;
  }
  if (!on_chip) {
    fp_buffer *c = fp_rc_ws(rc, next_ws++, (uint64_t)(m->M * m->N) * esize(m));
    TRY(launch_gemm(rc, m->dtype, c, a, b, NULL, NULL, m->M, m->N, m->K, FP_EPI_NONE, m->trans_b,
                    &next_ws));
    return launch_gemm(rc, m->dtype, out, c, d, NULL, NULL, m->M, m->P, m->N, FP_EPI_NONE, false,
                       &next_ws);
  }
  const uint64_t size = esize(m);
  fp_arg args[] = {fp_arg_tensor(out, m->dtype),
                   fp_arg_tensor(ops.a, m->dtype),
                   fp_arg_tensor(ops.b, m->dtype),
                   fp_arg_tensor(d, m->dtype),
                   fp_arg_tensor(ws, FP_U32),
                   fp_arg_i64(m->M),
                   fp_arg_i64(m->N),
                   fp_arg_i64(m->K),
                   fp_arg_i64(m->P),
                   fp_arg_i64(ops.lda),
                   fp_arg_i64(ops.ldb),
                   fp_arg_i64(ldd),
                   fp_arg_i32(m->trans_b ? 1 : 0)};
  fp_ndrange nd = fp_planned_range();
  const double flops = 2.0 * (double)m->M * (double)m->N * ((double)m->K + (double)m->P);
  return fp_rc_launch(rc, gemm2_kernel(m->dtype), &nd, args, 13,
                      fp_kcost(size * (uint64_t)(m->M * m->K + m->K * m->N + m->N * m->P),
                               size * (uint64_t)(m->M * m->P), flops));
}

static fp_status mm_fused(fp_recipe *rc, const fp_problem *p) {
  const mm_problem m = fp_matmul_problem_of(p);
  if (m.kind == KIND_B2B)
    return b2b_fused(rc, &m);
  fp_buffer *third = (m.kind == KIND_ADD || m.kind == KIND_ADD_RELU || m.kind == KIND_GEGLU)
                         ? fp_rc_in(rc, 2)
                         : NULL;
  int next_ws = 0;
  return launch_gemm(rc, m.dtype, fp_rc_out(rc, 0), fp_rc_in(rc, 0), fp_rc_in(rc, 1),
                     FP_EPI_READS_BIAS(m.epi) ? third : NULL,
                     FP_EPI_READS_ADD(m.epi) ? third : NULL, m.M, m.N, m.K, m.epi, m.trans_b,
                     &next_ws);
}

/* ---- the unfused variant -----------------------------------------------------------------------
 */

/* out = a @ B through the backend's library, with its workspace at ws
 * index *next_ws when it wants one. */
static fp_status library_gemm(fp_recipe *rc, fp_lib_gemm *g, fp_buffer *a, fp_buffer *b,
                              fp_buffer *c, fp_buffer *out, fp_buffer *bias, int *next_ws) {
  const uint64_t size = fp_dtype_size(g->dtype);
  const uint64_t ws_bytes = fp_library_gemm_workspace(rc->dev, g);
  fp_buffer *ws = ws_bytes > 0 ? fp_rc_ws(rc, (*next_ws)++, ws_bytes) : NULL;
  uint64_t read = size * (uint64_t)(g->M * g->K + g->K * g->N);
  if (g->beta != 0.0f)
    read += size * (uint64_t)(g->M * g->N);
  if (g->epilogue == FP_LIB_EPI_BIAS || g->epilogue == FP_LIB_EPI_BIAS_RELU)
    read += size * (uint64_t)g->N;
  const double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K;
  return fp_rc_library_gemm(rc, g, a, b, c, out, bias, ws,
                            fp_kcost(read, size * (uint64_t)(g->M * g->N), flops));
}

static fp_status mm_unfused(fp_recipe *rc, const fp_problem *p) {
  const mm_problem m = fp_matmul_problem_of(p);
  const uint64_t size = esize(&m);
  int next_ws = 0;
  fp_buffer *a = fp_rc_in(rc, 0), *b = fp_rc_in(rc, 1);
  fp_buffer *out = fp_rc_out(rc, 0);
  /* the product, in memory as eager's matmul returns it */
  fp_buffer *c = fp_rc_ws(rc, next_ws++, (uint64_t)(m.M * m.NB) * size);
  fp_lib_gemm g = fp_lib_gemm_plain(m.dtype, m.M, m.NB, m.K, m.trans_b);
  TRY(library_gemm(rc, &g, a, b, NULL, c, NULL, &next_ws));
  const fp_dtype dt = m.dtype;
  const fp_view cv = fp_view_typed(fp_view_rows(c, m.M, m.NB), dt);
  const fp_view ov = fp_view_typed(fp_view_rows(out, m.M, m.N), dt);
  switch (m.kind) {
  case KIND_ADD:
  case KIND_ADD_RELU: {
    const fp_view extra = m.full_add ? fp_view_typed(fp_view_rows(fp_rc_in(rc, 2), m.M, m.N), dt)
                                     : fp_view_typed(fp_view_bias(fp_rc_in(rc, 2), m.M, m.N), dt);
    if (m.kind == KIND_ADD)
      return fp_prim_binary(rc, FP_BINARY_ADD, ov, cv, extra);
    const fp_view t = fp_view_typed(
        fp_view_rows(fp_rc_ws(rc, next_ws++, (uint64_t)(m.M * m.N) * size), m.M, m.N), dt);
    TRY(fp_prim_binary(rc, FP_BINARY_ADD, t, cv, extra));
    return fp_prim_unary(rc, FP_UNARY_RELU, 1.0f, 0.0f, ov, t);
  }
  case KIND_RELU:
    return fp_prim_unary(rc, FP_UNARY_RELU, 1.0f, 0.0f, ov, cv);
  case KIND_B2B: {
    fp_lib_gemm g2 = fp_lib_gemm_plain(m.dtype, m.M, m.P, m.N, false);
    return library_gemm(rc, &g2, c, fp_rc_in(rc, 2), NULL, out, NULL, &next_ws);
  }
  case KIND_SPLIT_ACT: {
    /* Cl, Cr = tensor_split(C, 2, dim=1): strided views of C */
    const fp_view left = fp_view_typed(fp_view_strided(c, m.M, m.N, 2 * m.N, 1), dt);
    const fp_view right = fp_view_offset(left, m.N);
    const uint64_t half = (uint64_t)(m.M * m.N) * size;
    const fp_view s = fp_view_typed(fp_view_rows(fp_rc_ws(rc, next_ws++, half), m.M, m.N), dt);
    const fp_view t = fp_view_typed(fp_view_rows(fp_rc_ws(rc, next_ws++, half), m.M, m.N), dt);
    TRY(fp_prim_unary(rc, FP_UNARY_SIGMOID, 1.0f, 0.0f, s, left));
    TRY(fp_prim_unary(rc, FP_UNARY_TANH, 1.0f, 0.0f, t, right));
    return fp_prim_binary(rc, FP_BINARY_MUL, ov, s, t);
  }
  case KIND_GEGLU: {
    /* z = x @ W^T + b; z1, z2 = chunk(z, 2); z1 * gelu(z2) */
    const fp_view z = fp_view_typed(
        fp_view_rows(fp_rc_ws(rc, next_ws++, (uint64_t)(m.M * m.NB) * size), m.M, m.NB), dt);
    const fp_view bias = fp_view_typed(fp_view_bias(fp_rc_in(rc, 2), m.M, m.NB), dt);
    TRY(fp_prim_binary(rc, FP_BINARY_ADD, z, cv, bias));
    const fp_view z1 = fp_view_typed(fp_view_strided(z.buf, m.M, m.N, 2 * m.N, 1), dt);
    const fp_view z2 = fp_view_offset(z1, m.N);
    const fp_view g2 = fp_view_typed(
        fp_view_rows(fp_rc_ws(rc, next_ws++, (uint64_t)(m.M * m.N) * size), m.M, m.N), dt);
    TRY(fp_prim_unary(rc, FP_UNARY_GELU_ERF, 1.0f, 0.0f, g2, z2));
    return fp_prim_binary(rc, FP_BINARY_MUL, ov, z1, g2);
  }
  }
  return FP_OK;
}

/* ---- the vendor variant: cuBLASLt's fused epilogues ---------------------------------------------
 */

static fp_status mm_vendor(fp_recipe *rc, const fp_problem *p) {
  const mm_problem m = fp_matmul_problem_of(p);
  fp_lib_gemm g = fp_lib_gemm_plain(m.dtype, m.M, m.N, m.K, m.trans_b);
  fp_buffer *c = NULL, *bias = NULL;
  switch (m.kind) {
  case KIND_ADD:
  case KIND_ADD_RELU:
    if (m.full_add) {
      g.beta = 1.0f;
      c = fp_rc_in(rc, 2);
      g.epilogue = m.kind == KIND_ADD ? FP_LIB_EPI_NONE : FP_LIB_EPI_RELU;
    } else {
      bias = fp_rc_in(rc, 2);
      g.epilogue = m.kind == KIND_ADD ? FP_LIB_EPI_BIAS : FP_LIB_EPI_BIAS_RELU;
    }
    break;
  case KIND_RELU:
    g.epilogue = FP_LIB_EPI_RELU;
    break;
  default: {
    fp_status st = fp_error(FP_ERR_UNSUPPORTED,
                            "op %s: no vendor library fuses it (cuBLASLt's epilogues are bias, "
                            "relu, gelu and beta*C on one product)",
                            p->op->name);
    if (rc->status == FP_OK)
      rc->status = st;
    return st;
  }
  }
  if (!rc->dev->gemm_library_epilogues) {
    fp_status st =
        fp_error(FP_ERR_UNSUPPORTED,
                 "op %s: the vendor variant is cuBLASLt's fused epilogue, and %s has "
                 "none",
                 p->op->name, rc->dev->gemm_library[0] ? rc->dev->gemm_library : "this backend");
    if (rc->status == FP_OK)
      rc->status = st;
    return st;
  }
  int next_ws = 0;
  return library_gemm(rc, &g, fp_rc_in(rc, 0), fp_rc_in(rc, 1), c, fp_rc_out(rc, 0), bias,
                      &next_ws);
}

/* ---- shapes and descriptors
 * ------------------------------------------------------------------------ */

/* `--shapes seed` for the family (bench/torch_bench.py keeps the same list):
 * squares, the seed study's 8192 x 1024-style tables, an LLM MLP, the split
 * activation notebook's sizes (M = n/2, N = K = n), decode-like M = 1..16,
 * and shapes that break alignment (odd, 4095, a vocabulary of 50257). */
static const int64_t mm_seed[] = {
    1024, 1024, 1024, 2048, 2048, 2048, 4096, 4096, 4096, 8192, 8192,  8192,
    8192, 1024, 4096, 8192, 4096, 1024, 4096, 1024, 8192, 2048, 11008, 4096,
    1024, 2048, 2048, 2048, 4096, 4096, 1,    4096, 4096, 4,    4096,  4096,
    16,   8192, 8192, 4097, 4097, 4097, 4096, 4095, 4096, 2048, 50257, 1024,
};
/* matmul_matmul: narrow intermediates (N <= 256, kept on chip) and wide. */
static const int64_t b2b_seed[] = {
    8192, 64,   4096,  4096, 8192, 128,  4096, 4096, 8192, 256,
    4096, 4096, 16384, 128,  1024, 1024, 4096, 1024, 4096, 4096,
};
/* The quick default of `fuseport bench` (small: the CPU backend runs it). */
static const int64_t mm_default[] = {128, 128, 128, 256, 256, 256};
static const int64_t b2b_default[] = {128, 64, 128, 128, 256, 128, 256, 256};
/* `fuseport check`: odd sizes and ones, every edge of the tiles. */
static const int64_t mm_check[] = {
    1,  1,   1,   7,    33, 100, 33, 7,    1000, 100, 100, 100,
    70, 129, 257, 1000, 33, 7,   16, 4097, 33,   130, 64,  4097,
};
static const int64_t b2b_check[] = {
    1, 1, 1, 1, 7, 33, 100, 17, 70, 64, 129, 96, 33, 300, 65, 7,
};

#define MM_COMMON_PARAMS(trans_default)                                                            \
  {"M", FP_PARAM_DIM, 1024, 1, FP_DIM_MAX, NULL, "rows of A and of the output"},                   \
      {"N", FP_PARAM_DIM, 1024, 1, FP_DIM_MAX, NULL, "columns of the output"},                     \
      {"K", FP_PARAM_DIM, 1024, 1, FP_DIM_MAX, NULL, "the reduced dimension"},                     \
      {"dtype",                                                                                    \
       FP_PARAM_CHOICE,                                                                            \
       1,                                                                                          \
       0,                                                                                          \
       2,                                                                                          \
       dtype_choices,                                                                              \
       "element type of every tensor: f32 (true float32, no TF32), f16 or bf16 (float32 "          \
       "accumulation)"},                                                                           \
  {                                                                                                \
    "trans_b", FP_PARAM_BOOL, trans_default, 0, 1, NULL,                                           \
        "B stored transposed ([N, K], x @ W^T as a linear layer keeps W)"                          \
  }

#define MM_ADD_PARAM                                                                               \
  {                                                                                                \
    "add", FP_PARAM_CHOICE, 0, 0, 1, add_choices,                                                  \
        "what is added: a bias [N] broadcast over rows, or a full [M, N] tensor"                   \
  }

#define MM_VARIANTS(n_variants_note)                                                               \
  .n_variants = 3,                                                                                 \
  .variants = {                                                                                    \
      {"fused", "fuseport's GEMM core, the epilogue on the accumulators", mm_fused},               \
      {"unfused", "the backend's GEMM library, then one primitive kernel per epilogue step",       \
       mm_unfused},                                                                                \
      {"vendor", "cuBLASLt with its fused epilogue, where it has one " n_variants_note,            \
       mm_vendor},                                                                                 \
  }

#define MM_SHAPES(seed, def, check)                                                                \
  .seed_shapes = seed, .n_seed_shapes = (int)(sizeof seed / sizeof seed[0]),                       \
  .default_shapes = def, .n_default_shapes = (int)(sizeof def / sizeof def[0]),                    \
  .check_shapes = check, .n_check_shapes = (int)(sizeof check / sizeof check[0])

const fp_op fp_op_matmul_add = {
    .name = "matmul_add",
    .family = "matmul",
    .summary = "out = A @ B + C, C a bias [N] or a full [M, N] tensor (add=bias|full)",
    .n_params = 6,
    .params = {MM_COMMON_PARAMS(0), MM_ADD_PARAM},
    .n_grid = 3,
    .grid_param = {MM_M, MM_N, MM_K},
    MM_SHAPES(mm_seed, mm_default, mm_check),
    .compute_dtype = mm_compute_dtype,
    .validate = mm_validate,
    .describe = mm_describe,
    .rows = mm_rows,
    .reference = fp_matmul_reference,
    .tolerance = fp_matmul_tolerance,
    MM_VARIANTS(""),
};

const fp_op fp_op_matmul_relu = {
    .name = "matmul_relu",
    .family = "matmul",
    .summary = "out = relu(A @ B)",
    .n_params = 5,
    .params = {MM_COMMON_PARAMS(0)},
    .n_grid = 3,
    .grid_param = {MM_M, MM_N, MM_K},
    MM_SHAPES(mm_seed, mm_default, mm_check),
    .compute_dtype = mm_compute_dtype,
    .validate = mm_validate,
    .describe = mm_describe,
    .rows = mm_rows,
    .reference = fp_matmul_reference,
    .tolerance = fp_matmul_tolerance,
    MM_VARIANTS(""),
};

const fp_op fp_op_matmul_add_relu = {
    .name = "matmul_add_relu",
    .family = "matmul",
    .summary = "out = relu(A @ B + C), C a bias [N] or a full [M, N] tensor (add=bias|full)",
    .n_params = 6,
    .params = {MM_COMMON_PARAMS(0), MM_ADD_PARAM},
    .n_grid = 3,
    .grid_param = {MM_M, MM_N, MM_K},
    MM_SHAPES(mm_seed, mm_default, mm_check),
    .compute_dtype = mm_compute_dtype,
    .validate = mm_validate,
    .describe = mm_describe,
    .rows = mm_rows,
    .reference = fp_matmul_reference,
    .tolerance = fp_matmul_tolerance,
    MM_VARIANTS(""),
};

const fp_op fp_op_matmul_matmul = {
    .name = "matmul_matmul",
    .family = "matmul",
    .summary = "out = (A @ B) @ D, D [N, P]; fused keeps the [M, N] intermediate on chip where N "
               "fits a block's tile (CUDA: up to 256, OpenCL: 128), else two fuseport GEMMs",
    .n_params = 6,
    .params = {{"M", FP_PARAM_DIM, 1024, 1, FP_DIM_MAX, NULL, "rows of A and of the output"},
               {"N", FP_PARAM_DIM, 128, 1, FP_DIM_MAX, NULL,
                "columns of the intermediate A @ B (the inner dimension of the second product)"},
               {"K", FP_PARAM_DIM, 1024, 1, FP_DIM_MAX, NULL,
                "the first product's reduced dimension"},
               {"P", FP_PARAM_DIM, 1024, 1, FP_DIM_MAX, NULL, "columns of D and of the output"},
               {"dtype", FP_PARAM_CHOICE, 1, 0, 2, dtype_choices,
                "element type of every tensor: f32 (true float32, no TF32), f16 or bf16 (float32 "
                "accumulation; the intermediate rounded to it, as eager stores it)"},
               {"trans_b", FP_PARAM_BOOL, 0, 0, 1, NULL, "B stored transposed ([N, K])"}},
    .n_grid = 4,
    .grid_param = {B2_M, B2_N, B2_K, B2_P},
    MM_SHAPES(b2b_seed, b2b_default, b2b_check),
    .compute_dtype = mm_compute_dtype,
    .validate = mm_validate,
    .describe = mm_describe,
    .rows = mm_rows,
    .reference = fp_matmul_reference,
    .tolerance = fp_matmul_tolerance,
    MM_VARIANTS("(none: it is two products)"),
};

const fp_op fp_op_matmul_split_act = {
    .name = "matmul_split_act",
    .family = "matmul",
    .summary = "C = A @ B with B [K, 2N]; out = sigmoid(C[:, :N]) * tanh(C[:, N:]) (the split "
               "activation notebook); fused never writes C",
    .n_params = 5,
    .params = {MM_COMMON_PARAMS(0)},
    .n_grid = 3,
    .grid_param = {MM_M, MM_N, MM_K},
    MM_SHAPES(mm_seed, mm_default, mm_check),
    .compute_dtype = mm_compute_dtype,
    .validate = mm_validate,
    .describe = mm_describe,
    .rows = mm_rows,
    .reference = fp_matmul_reference,
    .tolerance = fp_matmul_tolerance,
    MM_VARIANTS("(none: it pairs two column blocks)"),
};

const fp_op fp_op_linear_geglu = {
    .name = "linear_geglu",
    .family = "matmul",
    .summary = "Z = x @ W^T + b with W [2N, K]; z1, z2 = chunk(Z, 2); out = z1 * gelu(z2) (erf "
               "gelu); fused never writes Z",
    .n_params = 5,
    .params = {MM_COMMON_PARAMS(1)},
    .n_grid = 3,
    .grid_param = {MM_M, MM_N, MM_K},
    MM_SHAPES(mm_seed, mm_default, mm_check),
    .compute_dtype = mm_compute_dtype,
    .validate = mm_validate,
    .describe = mm_describe,
    .rows = mm_rows,
    .reference = fp_matmul_reference,
    .tolerance = fp_matmul_tolerance,
    MM_VARIANTS("(none: it pairs two column blocks)"),
};
