/* fuseport operators, family attention (SPEC.md, "Attention"):
 * out = softmax(q k^T * scale + mask) v and the per-row logsumexp, q
 * [B,H,S,D], k and v [B,H,SK,D], float16 / bfloat16 storage with float32
 * accumulation (float32 too, for checking), an optional causal mask aligned
 * to the bottom right (kernels.def, family attention).
 *
 * Variants:
 *   fused    FlashAttention-2 style (attention_<dt>): a query tile stays on
 *            chip while the keys stream by, online softmax, never an SxS
 *            tensor. One launch; where the heads and query tiles alone would
 *            leave the device idle (decoding: S = 1, long SK) the keys are
 *            split across blocks (flash-decoding) and a second kernel merges
 *            the splits by their logsumexp.
 *   memeff   memory-efficient attention, key-chunked (Rabe and Staats;
 *            xformers' memory_efficient_attention): the keys in chunks of
 *            `chunk` (2048 by default), each chunk's attention and logsumexp
 *            written out in float32, then merged -- two launches where there
 *            are several chunks, O(S D SK / chunk) memory, no SxS tensor.
 *   unfused  what the seed's attention_pytorch runs: the library's batched
 *            GEMM for the scaled scores (cuBLAS, CLBlast, the CPU's), the
 *            causal mask and softmax in one row kernel (eager adds the mask
 *            in a kernel of its own), the batched GEMM with v. Two SxS
 *            tensors in memory: where they do not fit the cell is `oom`.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp_device_common.h"
#include "ops_internal.h"

/* Parameter indices; the grid is B x H x S x SK x D, or B x H x S x D. */
enum { AT_B = 0, AT_H, AT_S, AT_SK, AT_D, AT_CAUSAL, AT_DTYPE, AT_SCALE, AT_SPLITS, AT_CHUNK };

static const char *const dtype_choices[] = {"f32", "f16", "bf16", NULL};
static const fp_dtype dtype_of_choice[] = {FP_F32, FP_F16, FP_BF16};

/* The fused kernels' split-key workspace is float32: one partial output row
 * and one logsumexp per split and query row. */
#define AT_MAX_SPLITS 256

typedef struct at_problem {
  fp_dtype dtype;
  int64_t B, H, S, SK, D;
  int64_t R; /* query rows, B*H*S */
  bool causal;
  float scale;
  int splits; /* the fused variant's request, 0 auto */
  int64_t chunk;
} at_problem;

static at_problem at_of(const fp_problem *p) {
  at_problem a;
  memset(&a, 0, sizeof a);
  a.B = P_INT(p, AT_B);
  a.H = P_INT(p, AT_H);
  a.S = P_INT(p, AT_S);
  a.SK = P_INT(p, AT_SK) > 0 ? P_INT(p, AT_SK) : a.S;
  a.D = P_INT(p, AT_D);
  a.R = a.B * a.H * a.S;
  a.causal = P_INT(p, AT_CAUSAL) != 0;
  a.dtype = dtype_of_choice[P_INT(p, AT_DTYPE)];
  a.scale = p->v[AT_SCALE] != 0.0 ? (float)p->v[AT_SCALE] : (float)(1.0 / sqrt((double)a.D));
  a.splits = (int)P_INT(p, AT_SPLITS);
  a.chunk = P_INT(p, AT_CHUNK);
  return a;
}

static uint64_t esize(const at_problem *a) { return fp_dtype_size(a->dtype); }

/* Keys [0, end) that query i sees (kernels.def's bottom-right causal mask). */
static int64_t visible_end(const at_problem *a, int64_t i) {
  if (!a->causal)
    return a->SK;
  const int64_t end = i + a->SK - a->S + 1;
  return end < 0 ? 0 : (end > a->SK ? a->SK : end);
}

/* (query, key) pairs one head computes: S SK, or under the causal mask the
 * triangle's (FlashAttention counts S^2 / 2 for S == SK). */
static double visible_pairs(const at_problem *a) {
  if (!a->causal)
    return (double)a->S * (double)a->SK;
  /* end(i) = clamp(i + SK - S + 1, 0, SK): 0 up to i0, then a ramp of
   * slope 1 up to SK (never past it, as i <= S - 1) */
  const int64_t i0 = a->S - a->SK > 0 ? a->S - a->SK : 0; /* first row that sees a key */
  const double n = (double)(a->S - i0), first = (double)visible_end(a, i0);
  return n * first + n * (n - 1.0) / 2.0;
}

/* ---- validation and tensors ------------------------------------------------------- */

static fp_status at_validate(const fp_problem *p) {
  const at_problem a = at_of(p);
  if (a.D > FP_ATTN_MAX_D)
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "op attention: head dim D=%lld is past the largest the kernels take (%d)",
                    (long long)a.D, FP_ATTN_MAX_D);
  const double limit = (double)(INT64_MAX / 64);
  const double bh = (double)a.B * (double)a.H;
  const double sizes[] = {bh * (double)a.S * (double)a.D, bh * (double)a.SK * (double)a.D,
                          /* the unfused variant's scores */
                          bh * (double)a.S * (double)a.SK};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k)
    if (sizes[k] > limit)
      return fp_error(FP_ERR_INVALID_ARGUMENT,
                      "op attention: B=%lld H=%lld S=%lld SK=%lld D=%lld makes a tensor of %.4g "
                      "elements; byte counts would overflow",
                      (long long)a.B, (long long)a.H, (long long)a.S, (long long)a.SK,
                      (long long)a.D, sizes[k]);
  if (!isfinite(a.scale))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "op attention: scale must be finite");
  return FP_OK;
}

/* Outputs are per query row (R = B*H*S rows) so that `check` can sample
 * rows of a long sequence: out viewed as [R, D], lse as [R]. */
static void at_describe(const fp_problem *p, fp_io_desc *io) {
  const at_problem a = at_of(p);
  memset(io, 0, sizeof *io);
  io->n_in = 3;
  io->n_out = 2;
  fp_tensor_4d(&io->in[0], "q", a.B, a.H, a.S, a.D);
  fp_tensor_4d(&io->in[1], "k", a.B, a.H, a.SK, a.D);
  fp_tensor_4d(&io->in[2], "v", a.B, a.H, a.SK, a.D);
  /* scores scale * q.k of about 2/3 standard deviation: the softmax is far
   * from uniform, yet exp stays tame in every type */
  io->in[0].fill_scale = 2.0f;
  for (int k = 0; k < 3; ++k)
    io->in[k].dtype = a.dtype;
  fp_tensor_2d(&io->out[0], "out", a.R, a.D);
  io->out[0].dtype = a.dtype;
  fp_tensor_1d(&io->out[1], "lse", a.R);
  io->out[1].dtype = FP_F32;
}

static int64_t at_rows(const fp_problem *p) { return at_of(p).R; }

static fp_dtype at_compute_dtype(const fp_problem *p) { return at_of(p).dtype; }

/* ---- the float64 reference ------------------------------------------------------------ */

static void at_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                         double *const *out) {
  const at_problem a = at_of(p);
  const int64_t head = a.SK * a.D;
  double *kh = malloc(sizeof(double) * (size_t)head);
  double *vh = malloc(sizeof(double) * (size_t)head);
  double *s = malloc(sizeof(double) * (size_t)a.SK);
  double qrow[FP_ATTN_MAX_D];
  if (kh == NULL || vh == NULL || s == NULL) {
    for (int64_t i = 0; i < (r1 - r0) * a.D; ++i)
      out[0][i] = NAN; /* fails the check rather than passing anything */
    for (int64_t i = 0; i < r1 - r0; ++i)
      out[1][i] = NAN;
    free(kh);
    free(vh);
    free(s);
    return;
  }
  int64_t loaded = -1; /* the head whose k and v are in kh, vh */
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t bh = r / a.S, i = r % a.S, end = visible_end(&a, i);
    if (bh != loaded) {
      for (int64_t e = 0; e < head; ++e) {
        kh[e] = fp_host_load(&in[1], bh * head + e);
        vh[e] = fp_host_load(&in[2], bh * head + e);
      }
      loaded = bh;
    }
    for (int64_t d = 0; d < a.D; ++d)
      qrow[d] = fp_host_load(&in[0], r * a.D + d);
    double m = -INFINITY;
    for (int64_t j = 0; j < end; ++j) {
      double dot = 0.0;
      for (int64_t d = 0; d < a.D; ++d)
        dot += qrow[d] * kh[j * a.D + d];
      s[j] = (double)a.scale * dot;
      m = s[j] > m ? s[j] : m;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < end; ++j) {
      s[j] = exp(s[j] - m); /* now the unnormalised probability */
      sum += s[j];
    }
    double *o = out[0] + (r - r0) * a.D;
    for (int64_t d = 0; d < a.D; ++d)
      o[d] = 0.0;
    for (int64_t j = 0; j < end; ++j)
      for (int64_t d = 0; d < a.D; ++d)
        o[d] += s[j] * vh[j * a.D + d];
    for (int64_t d = 0; d < a.D; ++d)
      o[d] = end > 0 ? o[d] / sum : 0.0;
    out[1][r - r0] = end > 0 ? m + log(sum) : -INFINITY;
  }
  free(kh);
  free(vh);
  free(s);
}

/* The gate. The output is a convex combination of v's rows: the kernels'
 * float32 sums err far below one rounding of the storage type, and the
 * probabilities rounded to the storage type (FlashAttention's P, the
 * unfused variant's stored P) add about eps relative. The unfused variant
 * also stores the scores (|s| up to ~3 here) in the storage type: each
 * probability then errs by up to 3 eps relative, and the logsumexp by 3 eps
 * absolute. float32 uses 2^-20 for the GPUs' approximate exp2 and log2. */
static fp_tolerance at_tolerance(const fp_problem *p, int output) {
  const at_problem a = at_of(p);
  const double eps = a.dtype == FP_F16    ? ldexp(1.0, -11)
                     : a.dtype == FP_BF16 ? ldexp(1.0, -8)
                                          : ldexp(1.0, -20);
  if (output == 1) {
    fp_tolerance t = {eps, 0.0, 8.0 * eps};
    return t;
  }
  fp_tolerance t = {4.0 * eps, 8.0 * eps, eps};
  return t;
}

/* ---- the fused and memeff variants ------------------------------------------------------ */

static fp_kernel_id attention_kernel(fp_dtype dt) {
  return dt == FP_F16 ? FPK_attention_f16 : dt == FP_BF16 ? FPK_attention_bf16 : FPK_attention_f32;
}

static fp_kernel_id combine_kernel(fp_dtype dt) {
  return dt == FP_F16    ? FPK_attention_combine_f16
         : dt == FP_BF16 ? FPK_attention_combine_bf16
                         : FPK_attention_combine_f32;
}

static int clamp_splits(const at_problem *a, int64_t splits) {
  if (splits > a->SK)
    splits = a->SK; /* no empty chunk */
  if (splits > AT_MAX_SPLITS)
    splits = AT_MAX_SPLITS;
  return splits < 1 ? 1 : (int)splits;
}

/* The fused variant's key split: 1 where the heads' query tiles fill the
 * device; else the split that makes tiles x splits about blocks_per_unit
 * blocks a compute unit, each split at least 256 keys. Decoding reads k and
 * v once whatever the split; what matters is that every SM streams at once,
 * to the end. On CUDA, one wave of two blocks an SM (the decode kernels'
 * occupancy): H200, 2026-11-29, fraction of the copy bandwidth at splits of
 * 1 / 2 / 3 / 4 / 8 / 12 / 16 / 32: 16x8x1x8192x128 (128 tiles) 0.77 /
 * 0.86 / 0.74 / 0.87 / 0.87 / 0.81 / 0.83 / 0.80 -- 2, 4 and 8 fill whole
 * waves of 264 blocks, 3 leaves a second wave half empty; 1x32x1x32768x64
 * (32 tiles) peaks at 8 (0.76; 16: 0.59), where the rule of eight blocks
 * an SM it replaces read 0.61-0.79. But where that takes more than eight
 * splits a head (under 30 tiles), one block an SM: the same day, times of
 * the best split over the two-an-SM one, 1x1x1x65536x128 (256 -> 128
 * splits) 0.95, 1x2 (132 -> 64) 0.84, 1x4 (66 -> 32) 0.91, 1x8 (33 -> 16)
 * 0.96, 3x5x1x30000x128 (17 -> 8) 0.98, 2x8x1x32768x128 (16 -> 8) 0.99,
 * 1x8x1x65536x64 0.94, 2x8x1x32768x64 0.98; at 32 tiles (8 splits) one
 * block an SM took 1.00-1.02x the time, at 128 tiles (2) 1.13-1.18x.
 * Other backends keep that earlier rule of eight blocks a unit (ceil), not
 * timed against these. */
static int auto_splits(const fp_recipe *rc, const at_problem *a) {
  if (a->splits > 0)
    return clamp_splits(a, a->splits);
  const int64_t units = rc->dev->compute_units > 0 ? (int64_t)rc->dev->compute_units : 1;
  const int64_t tiles = a->B * a->H * ((a->S + 127) / 128);
  if (tiles >= units || a->SK < 512)
    return 1;
  const int64_t blocks_per_unit = rc->dev->backend == FP_BACKEND_CUDA ? 2 : 8;
  int64_t splits = rc->dev->backend == FP_BACKEND_CUDA
                       ? blocks_per_unit * units / tiles /* whole waves: round down */
                       : (blocks_per_unit * units + tiles - 1) / tiles;
  if (rc->dev->backend == FP_BACKEND_CUDA && splits > 8)
    splits = units / tiles; /* few heads: one block an SM */
  if (splits > a->SK / 256)
    splits = a->SK / 256;
  if (splits > 1) {
    /* chunks of whole 128-key tiles (the decode kernels' 64 and 128): a
     * chunk of 993 keys ends in a 33-key tile that costs a whole one */
    const int64_t chunk = ((a->SK + splits - 1) / splits + 127) / 128 * 128;
    splits = (a->SK + chunk - 1) / chunk;
  }
  return clamp_splits(a, splits);
}

/* attention_<dt> over `splits` key chunks, then (splits > 1) the merge. */
static fp_status attend(fp_recipe *rc, const at_problem *a, int splits) {
  const uint64_t size = esize(a);
  const uint64_t q_bytes = size * (uint64_t)(a->R * a->D);
  const uint64_t kv_bytes = 2 * size * (uint64_t)(a->B * a->H * a->SK * a->D);
  const double flops = 4.0 * (double)a->D * visible_pairs(a) * (double)(a->B * a->H);
  fp_buffer *opart = NULL, *lpart = NULL;
  const uint64_t part_rows = (uint64_t)splits * (uint64_t)a->R;
  if (splits > 1) {
    opart = fp_rc_ws(rc, 0, 4 * part_rows * (uint64_t)a->D);
    lpart = fp_rc_ws(rc, 1, 4 * part_rows);
  }
  fp_buffer *out = splits > 1 ? NULL : fp_rc_out(rc, 0);
  fp_buffer *lse = splits > 1 ? NULL : fp_rc_out(rc, 1);
  fp_arg args[] = {fp_arg_tensor(out, a->dtype),
                   fp_arg_tensor(lse, FP_F32),
                   fp_arg_tensor(fp_rc_in(rc, 0), a->dtype),
                   fp_arg_tensor(fp_rc_in(rc, 1), a->dtype),
                   fp_arg_tensor(fp_rc_in(rc, 2), a->dtype),
                   fp_arg_tensor(opart, FP_F32),
                   fp_arg_tensor(lpart, FP_F32),
                   fp_arg_i64(a->B),
                   fp_arg_i64(a->H),
                   fp_arg_i64(a->S),
                   fp_arg_i64(a->SK),
                   fp_arg_i64(a->D),
                   fp_arg_i32(a->causal ? 1 : 0),
                   fp_arg_f32(a->scale),
                   fp_arg_i32(splits)};
  const uint64_t written =
      splits > 1 ? 4 * part_rows * (uint64_t)(a->D + 1) : q_bytes + 4 * (uint64_t)a->R;
  fp_ndrange nd = fp_planned_range();
  TRY(fp_rc_launch(rc, attention_kernel(a->dtype), &nd, args, 15,
                   fp_kcost(q_bytes + kv_bytes, written, flops)));
  if (splits == 1)
    return FP_OK;
  fp_arg cargs[] = {fp_arg_tensor(fp_rc_out(rc, 0), a->dtype),
                    fp_arg_tensor(fp_rc_out(rc, 1), FP_F32),
                    fp_arg_tensor(opart, FP_F32),
                    fp_arg_tensor(lpart, FP_F32),
                    fp_arg_i64(a->R),
                    fp_arg_i64(a->D),
                    fp_arg_i32(splits)};
  fp_ndrange cnd = fp_elem_range(rc, a->R * a->D);
  return fp_rc_launch(rc, combine_kernel(a->dtype), &cnd, cargs, 7,
                      fp_kcost(4 * part_rows * (uint64_t)(a->D + 1), q_bytes + 4 * (uint64_t)a->R,
                               3.0 * (double)part_rows * (double)a->D));
}

static fp_status at_fused(fp_recipe *rc, const fp_problem *p) {
  const at_problem a = at_of(p);
  return attend(rc, &a, auto_splits(rc, &a));
}

static fp_status at_memeff(fp_recipe *rc, const fp_problem *p) {
  const at_problem a = at_of(p);
  return attend(rc, &a, clamp_splits(&a, (a.SK + a.chunk - 1) / a.chunk));
}

/* ---- the unfused variant ---------------------------------------------------------------- */

static fp_status rc_fail(fp_recipe *rc, fp_status st) {
  if (rc->status == FP_OK)
    rc->status = st;
  return st;
}

/* out = g(a, b) through the backend's GEMM library, its workspace at index
 * *next_ws where it asks for one. */
static fp_status library_gemm(fp_recipe *rc, const fp_lib_gemm *g, fp_buffer *a, fp_buffer *b,
                              fp_buffer *out, int *next_ws, fp_kernel_cost cost) {
  fp_status st = fp_library_gemm_check(rc->dev, g);
  if (st != FP_OK)
    return rc_fail(rc, st);
  const uint64_t ws_bytes = fp_library_gemm_workspace(rc->dev, g);
  fp_buffer *ws = ws_bytes > 0 ? fp_rc_ws(rc, (*next_ws)++, ws_bytes) : NULL;
  return fp_rc_library_gemm(rc, g, a, b, NULL, out, NULL, ws, cost);
}

static fp_status at_unfused(fp_recipe *rc, const fp_problem *p) {
  const at_problem a = at_of(p);
  const uint64_t size = esize(&a);
  const int64_t bh = a.B * a.H, ss = a.S * a.SK;
  const uint64_t scores_bytes = size * (uint64_t)(bh * ss);
  const uint64_t q_bytes = size * (uint64_t)(a.R * a.D);
  const uint64_t kv_bytes = size * (uint64_t)(bh * a.SK * a.D);
  int next_ws = 2;
  fp_buffer *scores = fp_rc_ws(rc, 0, scores_bytes);
  fp_buffer *probs = fp_rc_ws(rc, 1, scores_bytes);
  /* scores [S, SK] = scale * q [S, D] @ k^T, per head (baddbmm's alpha) */
  fp_lib_gemm g1 = fp_lib_gemm_plain(a.dtype, a.S, a.SK, a.D, true);
  g1.batch = bh;
  g1.stride_a = a.S * a.D;
  g1.stride_b = a.SK * a.D;
  g1.stride_c = g1.stride_d = ss;
  g1.alpha = a.scale;
  TRY(library_gemm(rc, &g1, fp_rc_in(rc, 0), fp_rc_in(rc, 1), scores, &next_ws,
                   fp_kcost(q_bytes + kv_bytes, scores_bytes, 2.0 * (double)(bh * ss) * a.D)));
  const fp_kernel_id softmax = a.dtype == FP_F16    ? FPK_attn_softmax_f16
                               : a.dtype == FP_BF16 ? FPK_attn_softmax_bf16
                                                    : FPK_attn_softmax_f32;
  fp_arg sargs[] = {fp_arg_tensor(probs, a.dtype),
                    fp_arg_tensor(fp_rc_out(rc, 1), FP_F32),
                    fp_arg_tensor(scores, a.dtype),
                    fp_arg_i64(a.R),
                    fp_arg_i64(a.S),
                    fp_arg_i64(a.SK),
                    fp_arg_i32(a.causal ? 1 : 0)};
  fp_ndrange nd = fp_rows_range(rc, a.R, a.SK);
  TRY(fp_rc_launch(
      rc, softmax, &nd, sargs, 7,
      fp_kcost(scores_bytes, scores_bytes + 4 * (uint64_t)a.R, 4.0 * (double)(bh * ss))));
  /* out [S, D] = P [S, SK] @ v [SK, D], per head */
  fp_lib_gemm g2 = fp_lib_gemm_plain(a.dtype, a.S, a.D, a.SK, false);
  g2.batch = bh;
  g2.stride_a = ss;
  g2.stride_b = a.SK * a.D;
  g2.stride_c = g2.stride_d = a.S * a.D;
  return library_gemm(rc, &g2, probs, fp_rc_in(rc, 2), fp_rc_out(rc, 0), &next_ws,
                      fp_kcost(scores_bytes + kv_bytes, q_bytes, 2.0 * (double)(bh * ss) * a.D));
}

/* ---- shapes and the op ------------------------------------------------------------------- */

/* B x H x S x SK x D. The seed's sweep, as FlashAttention's benchmarks: 16k
 * tokens per batch (B = 16384 / S), S = 128 .. 16384, D = 64 with 32 heads
 * and D = 128 with 16. */
#define AT_SEED(S, D, H) 16384 / (S), H, S, S, D
#define AT_SEED_D(D, H)                                                                            \
  AT_SEED(128, D, H), AT_SEED(256, D, H), AT_SEED(512, D, H), AT_SEED(1024, D, H),                 \
      AT_SEED(2048, D, H), AT_SEED(4096, D, H), AT_SEED(8192, D, H), AT_SEED(16384, D, H)
static const int64_t at_seed[] = {AT_SEED_D(64, 32), AT_SEED_D(128, 16)};
/* the quick default: the goal's shapes, a long sequence and decoding */
static const int64_t at_default[] = {4,    16,  4096, 4096, 128,  4,     32, 4096, 4096,
                                     64,   1,   16,   8192, 8192, 128,   8,  32,   1,
                                     8192, 128, 1,    32,   1,    32768, 128};
/* odd shapes for `check`: S = 1, 17, 1000; D = 17, 80, 256; SK < S (rows
 * that see no key under the mask); decoding */
static const int64_t at_check[] = {1,    1,    1,  1,  64, 2,  3,   17,  17, 64, 1,  2,
                                   1000, 1000, 80, 2,  2,  1,  300, 128, 1,  2,  33, 17,
                                   256,  1,    1,  17, 40, 17, 2,   1,   65, 65, 128};

const fp_op fp_op_attention = {
    .name = "attention",
    .family = "attention",
    .summary = "softmax(q k^T * scale + causal mask) v and the row logsumexp; q [B,H,S,D], "
               "k, v [B,H,SK,D]",
    .n_params = 10,
    .params =
        {
            {"B", FP_PARAM_DIM, 4, 1, FP_DIM_MAX, NULL, "batch"},
            {"H", FP_PARAM_DIM, 16, 1, FP_DIM_MAX, NULL, "heads"},
            {"S", FP_PARAM_DIM, 1024, 1, FP_DIM_MAX, NULL, "query length"},
            {"SK", FP_PARAM_INT, 0, 0, FP_DIM_MAX, NULL,
             "key length; 0: the query length (cross-attention and decoding differ)"},
            {"D", FP_PARAM_DIM, 128, 1, FP_DIM_MAX, NULL, "head dimension (at most 256)"},
            {"causal", FP_PARAM_BOOL, 0, 0, 1, NULL,
             "mask the keys past the query's position, aligned to the bottom right: query i "
             "sees keys j <= i + SK - S"},
            {"dtype", FP_PARAM_CHOICE, 1, 0, 2, dtype_choices,
             "element type of q, k, v and out: f16 or bf16 (float32 accumulation), f32"},
            {"scale", FP_PARAM_FLOAT, 0, -1e30, 1e30, NULL, "score scale; 0: 1/sqrt(D)"},
            {"splits", FP_PARAM_INT, 0, 0, AT_MAX_SPLITS, NULL,
             "fused: key splits (flash-decoding); 0: enough to fill the device"},
            {"chunk", FP_PARAM_INT, 2048, 16, FP_DIM_MAX, NULL,
             "memeff: keys per chunk (Rabe and Staats used 4096)"},
        },
    .n_grid = 5,
    .grid_param = {AT_B, AT_H, AT_S, AT_SK, AT_D},
    .n_grid_min = 4,
    .grid_short = true,
    .grid_param_short = {AT_B, AT_H, AT_S, AT_D},
    .seed_shapes = at_seed,
    .n_seed_shapes = (int)(sizeof at_seed / sizeof at_seed[0]),
    .default_shapes = at_default,
    .n_default_shapes = (int)(sizeof at_default / sizeof at_default[0]),
    .check_shapes = at_check,
    .n_check_shapes = (int)(sizeof at_check / sizeof at_check[0]),
    .compute_dtype = at_compute_dtype,
    .validate = at_validate,
    .describe = at_describe,
    .rows = at_rows,
    .reference = at_reference,
    .tolerance = at_tolerance,
    .n_variants = 3,
    .variants =
        {
            {"fused",
             "FlashAttention-2 style: q tiles on chip, k/v streamed, online softmax; key splits "
             "merged by a second kernel where the device would idle (decoding)",
             at_fused},
            {"memeff",
             "memory-efficient attention: keys in chunks, each chunk's output and logsumexp in "
             "float32, merged by a second kernel",
             at_memeff},
            {"unfused",
             "the seed's attention_pytorch: batched GEMM (library), mask + softmax, batched GEMM; "
             "the SxS scores in memory",
             at_unfused},
        },
};
