/* fuseport OpenCL kernels, family reduce: fused row reductions over a
 * contiguous row-major [M, N]. Semantics: kernels/kernels.def; the executable
 * specification is kernels/cpu/reduce.c (fp_device_common.h is prepended).
 *
 * The family's program is fp_device_common.h, common.cl, this file,
 * reduce_softmax.cl (softmax, double_softmax, softmax_backward) and
 * reduce_norm.cl (layernorm, norm_chain), in that order (CMakeLists.txt,
 * FP_CL_MORE_reduce). This file holds the family's description (below)
 * and what the kernels of both build on: the online softmax statistics,
 * the rows' vectors and cache hints, the streaming passes, the register
 * cache, and the kernels' shape ("the kernels") with fp_rowpart_streamed.
 *
 * ROWS geometry, in teams (common.cl): the group of L work-items splits into
 * teams of T, one row per team; work-item `lane` of a team handles the row's
 * float4 vectors lane, lane+T, ... (16-byte accesses, each of the team
 * coalesced) and its head and tail scalar `lane` (fp_rowpart: rows whose
 * start is not 16-byte aligned, N % 4 != 0).
 *
 * Two paths per kernel, chosen per launch (N and L are uniform):
 *  - cached: a row of at most T * FP_ROW_VEC vectors. Each work-item keeps
 *    its FP_ROW_VEC float4 (16 floats) in registers (fully unrolled loops
 *    with constant indices, so the arrays stay in registers), and the row is
 *    read from global memory once and written once, whatever the number of
 *    reductions. With the backend's planned geometry (opencl_backend.c,
 *    plan_rows) every row of up to 1024 * 16 = 16384 floats takes this path
 *    (T up to 1024), and shorter rows share a group (several teams).
 *    Previously 16 scalars per work-item at the host's L (8 for layernorm
 *    and softmax_backward, which therefore streamed for most N >= 1024).
 *  - streaming: longer rows (T = L) are re-read from global memory for each
 *    pass; softmax uses the online (running max, rescaled sum) form so that
 *    max and sum come from a single pass: read, read, write; layernorm's
 *    statistics likewise take one pass (fp_stream_stats), and so, mostly,
 *    do double_softmax's (its first softmax's power sums, below). The
 *    _local kernels (common.cl) read a row of up to FP_LOCAL_ROW_VEC
 *    vectors once: the first pass also stores each vector it loads in
 *    lcache (local memory), the later passes read it from there. Only
 *    softmax and norm_chain have one: double_softmax and layernorm are
 *    written for lcache too, but their _local kernels measured slower on
 *    an H100 (FP_ROWS_KERNELS_LOCAL_UNUSED, FP_ROWS_KERNELS_STATS,
 *    common.cl); softmax_backward would need two rows' worth. The
 *    _stream_back kernels (rows of 32768 floats or more, plan_rows) write
 *    each work-item's vectors last first in the output pass
 *    (fp_stream_first), where the first pass left them in L2; softmax's
 *    and norm_chain's _local_back kernels also keep the row's first
 *    FP_LOCAL_ROW_VEC vectors in lcache (fp_rows_local_prefix).
 * Reductions across the team (common.cl, fp_team_reduce: two barriers and
 * a few back-to-back local loads each) per row: softmax 2 (max, then sum;
 * see fp_softmax_stats), double_softmax 3 (a streamed row 2 where the
 * power sums' series holds, one of them of float4), norm_chain 3,
 * softmax_backward 1, layernorm 1 (fp_team_stats merges each work-item's
 * count, mean and centred squares, where a sum and then a sum of centred
 * squares took two). Between them the memory idles where a compute unit
 * holds few groups (long rows), so their latency counts.
 * Streaming loops issue FP_STREAM_UNROLL 16-byte loads (common.cl) before
 * any store: a compiler may not move a load above a store to a buffer that
 * might alias it (out may be x), so a plain load-compute-store loop keeps a
 * single load in flight.
 * Registers: the NVIDIA build caps a work-item at 64 registers (backend,
 * FP_CL_NV_BUILD_OPTIONS). softmax_backward keeps two rows (32 floats) and
 * layernorm one plus the w and b vectors of the output step. Not yet checked
 * against NVIDIA's compiler (bench/gpu_session.sh clrows reads its
 * -cl-nv-verbose report); the fallbacks are build options,
 * FUSEPORT_OPENCL_BUILD_OPTIONS="-DFP_ROW_VEC=2" (half the cache: the backend
 * still plans for 4, so rows of 8193..16384 stream, still correct) and
 * -DFP_STREAM_UNROLL=2 (half the loads in flight).
 */

/* ---- online softmax statistics -----------------------------------------------------
 * (m, s): running maximum and sum of exp(x - m). The special values follow the
 * two-pass form exp(x - max) / sum(exp(x - max)):
 *  - x = -inf adds exp(-inf - m) = 0, skipped so that a row that starts with
 *    -inf (m still -inf) does not compute exp(-inf - -inf) = NaN; a row of
 *    only -inf ends with m = -inf, and exp(x - m) = NaN in the output pass
 *    gives the NaN row PyTorch gives;
 *  - x = +inf: exp(x - x) = NaN poisons the sum, as exp(inf - inf) does in the
 *    two-pass form;
 *  - x = NaN fails x > m and adds exp(NaN) = NaN.
 * m itself is never NaN. */
static FP_INLINE void fp_online_add(float x, float *m, float *s) {
  if (x > *m) {
    *s = *s * exp(*m - x) + exp(x - x);
    *m = x;
  } else if (x != -INFINITY) {
    *s += exp(x - *m);
  }
}

/* Four values at once, with the same special values and one rescale at
 * most: fmax ignores a NaN (m stays a number), every NaN then adds
 * exp(NaN) = NaN; while m is -inf every value seen is -inf or NaN, and only
 * a NaN changes s. */
static FP_INLINE void fp_online_add4(float4 x, float *m, float *s) {
  const float mx = fmax(fmax(x.x, x.y), fmax(x.z, x.w));
  if (mx > *m) {
    *s *= exp(*m - mx); /* m = -inf: s * 0; s stays NaN if it was */
    *m = mx;
  }
  if (*m != -INFINITY)
    *s += (exp(x.x - *m) + exp(x.y - *m)) + (exp(x.z - *m) + exp(x.w - *m));
  else if (isnan(x.x) || isnan(x.y) || isnan(x.z) || isnan(x.w))
    *s = NAN;
}

/* Merges the statistics (m2, s2) of another part of the row into (m, s). */
static void fp_online_merge(float *m, float *s, float m2, float s2) {
  const float mm = fmax(*m, m2);
  /* equal maxima (including both -inf) need no rescaling: avoids inf - inf */
  const float a = *m == mm ? *s : *s * exp(*m - mm);
  const float b = m2 == mm ? s2 : s2 * exp(m2 - mm);
  *m = mm;
  *s = a + b;
}

/* A work-item's sum s of exp(x - m), rescaled to the row's maximum mm:
 * s * exp(m - mm); unchanged when m == mm (which covers -inf == -inf). */
static float fp_online_rescale(float s, float m, float mm) { return m == mm ? s : s * exp(m - mm); }

static FP_INLINE __global const float4 *fp_body(__global const float *xr, fp_rowpart p) {
  return (__global const float4 *)(xr + p.head);
}

static FP_INLINE __global float4 *fp_body_out(__global float *yr, fp_rowpart p) {
  return (__global float4 *)(yr + p.head);
}

/* The vector q of a row of w or b (not row-shifted): aligned when the row of
 * x is (head 0), else an unaligned vload4. */
static FP_INLINE float4 fp_load4(__global const float *base, long q, int aligned) {
  return aligned ? ((__global const float4 *)base)[q] : vload4(q, base);
}

/* Cache hints of a streamed row's reads (common.cl; plain loads where the
 * backend did not define FP_NV_PTX, i.e. off NVIDIA):
 *  - fp_ld4_pass1, the first read of a row that a later pass reads again:
 *    evict_last (fp_ld4_keep), as the CUDA kernels' ldg4, so that the lines
 *    outrank the output's and the flush's for the reread. -DFP_KEEP_STREAM=0
 *    loads them plainly;
 *  - fp_ld4_last_read, the output pass's read of the row, after which no pass
 *    reads it: evict-first (fp_ld4_first) with fp_ld4_keep's level, so that
 *    the lines it is done with go before the first-pass lines still to be
 *    reread; -DFP_LAST_READ_EVICT_FIRST=0 loads them plainly. (fp_body_at
 *    also serves double_softmax's middle pass where its power series does
 *    not hold, a rare row whose third pass then rereads from memory.)
 * On an H100 (NVIDIA OpenCL, 2026-11-26, 120e041:docs/results/2026-11-26-h100-cl-ptx/
 * r2, two alternating rounds) against plain loads: cells of 8-48 MiB
 * 1.12-1.13x (geometric mean per op; softmax 1024 x 1024 10.5 -> 8.8 us),
 * cells of 64 MiB-1.5 GiB 1.04-1.09x (softmax 2048 x 65536 460 -> 401 us,
 * softmax_backward 4096 x 32768 692 -> 565); in r1 the first-pass hint alone
 * gave 1.01-1.04x on the large cells. */
#if !defined(FP_KEEP_STREAM) || FP_KEEP_STREAM
#define fp_ld4_pass1(p) fp_ld4_keep(p)
#else
#define fp_ld4_pass1(p) (*(p))
#endif
#if defined(FP_NV_PTX) && FP_NV_PTX >= 2 &&                                                        \
    (!defined(FP_LAST_READ_EVICT_FIRST) || FP_LAST_READ_EVICT_FIRST)
#define fp_ld4_last_read(p) fp_ld4_first(p)
#else
#define fp_ld4_last_read(p) (*(p))
#endif

/* ---- streaming passes ----------------------------------------------------------------
 * A work-item visits its vectors q = lane, lane+T, ... in chunks of
 * FP_CHUNK / 4 vectors: inside a chunk, float4 accumulators take the vectors
 * FP_STREAM_UNROLL loads at a time; each chunk's result is then added to the work-item's
 * total. A long row with a small group would otherwise pile thousands of
 * terms onto one float accumulator, whose rounding error grows with the
 * count (measured on PoCL: 2.5e-5 relative on a double softmax of 262144 with
 * L = 32, 6e-7 blocked); blocking keeps it near the CPU's pairwise sums. The
 * head and tail scalars go straight to the total.
 *
 * The local row cache (mode LOCAL, fp_rows_local): the first pass over a
 * row stores each vector q it loads from global memory in lc[q] (`keep`),
 * the later passes and the output read lc[q] instead (`from_lc`), in the
 * same loops, so that the sums come out in the same order, bit for bit
 * those of _stream. The head and tail scalars still come from global
 * memory. No barrier guards lc: a work-item reads back only the vectors it
 * stored itself (q = lane, lane+T, ... of the same T), and the group's next
 * row (a grid of fewer groups than rows) overwrites each vector by the same
 * work-item, after it has read it for this row. That holds because
 * fp_rows_local requires the team to be the whole group: two teams would
 * store their rows at the same q. The functions are inlined so that in the
 * other specialisations, whose `keep` and `from_lc` are the constant 0, the
 * branches fold away. */

/* Vector q of the row's body: from lc where the first pass stored it, else
 * from global memory. */
static FP_INLINE float4 fp_body_at(__global const float4 *body, __local const float4 *lc,
                                   int from_lc, long q) {
  return from_lc ? lc[q] : fp_ld4_last_read(body + q);
}

/* Online statistics (m, s) of the work-item's share of the row x; stores
 * its vectors in lc if `keep`. */
static FP_INLINE void fp_online_row(__global const float *xr, fp_rowpart p, fp_team tm, float *m,
                                    float *s, __local float4 *lc, int keep) {
  const long T = tm.size;
  __global const float4 *body = fp_body(xr, p);
  if (p.mine_head)
    fp_online_add(xr[tm.lane], m, s);
  if (p.mine_tail)
    fp_online_add(xr[p.tail0 + tm.lane], m, s);
  long q = tm.lane;
  while (q < p.nvec) {
    const long end = min(p.nvec, q + (FP_CHUNK / 4) * T);
    float cm = -INFINITY, cs = 0.0f;
    for (; q + (FP_STREAM_UNROLL - 1) * T < end; q += FP_STREAM_UNROLL * T) {
      float4 v[FP_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u)
        v[u] = fp_ld4_pass1(body + q + u * T);
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u) {
        if (fp_keep_at(keep, q + u * T))
          lc[q + u * T] = v[u];
        fp_online_add4(v[u], &cm, &cs);
      }
    }
    for (; q < end; q += T) {
      const float4 a = fp_ld4_pass1(body + q);
      if (fp_keep_at(keep, q))
        lc[q] = a;
      fp_online_add4(a, &cm, &cs);
    }
    fp_online_merge(m, s, cm, cs);
  }
}

/* The work-item's share of sum_j x[j]; stores its vectors in lc if `keep`. */
static FP_INLINE float fp_stream_sum(__global const float *xr, fp_rowpart p, fp_team tm,
                                     __local float4 *lc, int keep) {
  const long T = tm.size;
  __global const float4 *body = fp_body(xr, p);
  float total = 0.0f;
  if (p.mine_head)
    total += xr[tm.lane];
  if (p.mine_tail)
    total += xr[p.tail0 + tm.lane];
  long q = tm.lane;
  while (q < p.nvec) {
    const long end = min(p.nvec, q + (FP_CHUNK / 4) * T);
    float4 acc[2] = {(float4)(0.0f), (float4)(0.0f)};
    for (; q + (FP_STREAM_UNROLL - 1) * T < end; q += FP_STREAM_UNROLL * T) {
      float4 v[FP_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u)
        v[u] = fp_ld4_pass1(body + q + u * T);
#pragma unroll
      for (int u = 0; u < FP_STREAM_UNROLL; ++u) {
        if (fp_keep_at(keep, q + u * T))
          lc[q + u * T] = v[u];
        acc[u & 1] += v[u];
      }
    }
    for (; q < end; q += T) {
      const float4 a = fp_ld4_pass1(body + q);
      if (fp_keep_at(keep, q))
        lc[q] = a;
      acc[0] += a;
    }
    total += fp_hsum4(acc[0] + acc[1]);
  }
  return total;
}

/* ---- the register cache ----------------------------------------------------------------
 * v[k] holds vector lane + k*T of the row for k < cnt, h and t the head and
 * tail scalars of the work-item (valid when mine_head / mine_tail). Every
 * loop is unrolled over the constant FP_ROW_VEC, so v[] stays in registers,
 * and leaves at k == cnt: a branch, uniform but for the team's last
 * vectors, so that slots past the share cost no issue slots. The row is
 * walked with one pointer, so that no per-slot 64-bit address has to stay
 * live. */

typedef struct fp_rowcache {
  float4 v[FP_ROW_VEC];
  float h, t;
} fp_rowcache;

static FP_INLINE void fp_rc_load(fp_rowcache *c, __global const float *xr, fp_rowpart p,
                                 fp_team tm) {
  __global const float4 *q = fp_body(xr, p) + tm.lane;
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k, q += tm.size) {
    if (k >= p.cnt)
      continue;
    c->v[k] = fp_ld4_keep(q);
  }
  c->h = p.mine_head ? xr[tm.lane] : 0.0f;
  c->t = p.mine_tail ? xr[p.tail0 + tm.lane] : 0.0f;
}

static FP_INLINE void fp_rc_store(__global float *yr, const fp_rowcache *c, fp_rowpart p,
                                  fp_team tm) {
  __global float4 *q = fp_body_out(yr, p) + tm.lane;
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k, q += tm.size) {
    if (k >= p.cnt)
      continue;
    *q = c->v[k];
  }
  if (p.mine_head)
    yr[tm.lane] = c->h;
  if (p.mine_tail)
    yr[p.tail0 + tm.lane] = c->t;
}

static FP_INLINE float fp_rc_sum(const fp_rowcache *c, fp_rowpart p) {
  float4 acc = (float4)(0.0f);
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k) {
    if (k >= p.cnt)
      continue;
    acc += c->v[k];
  }
  float s = fp_hsum4(acc);
  if (p.mine_head)
    s += c->h;
  if (p.mine_tail)
    s += c->t;
  return s;
}

/* torch.amax of the work-item's share: NaN propagates. */
static FP_INLINE float fp_rc_max(const fp_rowcache *c, fp_rowpart p) {
  float4 acc = (float4)(-INFINITY);
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k) {
    if (k >= p.cnt)
      continue;
    acc = fp_maximum4(acc, c->v[k]);
  }
  float m = fp_hmax4(acc);
  if (p.mine_head)
    m = fp_maximum(m, c->h);
  if (p.mine_tail)
    m = fp_maximum(m, c->t);
  return m;
}

/* v = exp(v - m) */
static FP_INLINE void fp_rc_exp_shift(fp_rowcache *c, float m, fp_rowpart p) {
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k) {
    if (k >= p.cnt)
      continue;
    c->v[k] = exp(c->v[k] - m);
  }
  c->h = exp(c->h - m);
  c->t = exp(c->t - m);
}

/* v *= s */
static FP_INLINE void fp_rc_scale(fp_rowcache *c, float s, fp_rowpart p) {
#pragma unroll
  for (int k = 0; k < FP_ROW_VEC; ++k) {
    if (k >= p.cnt)
      continue;
    c->v[k] *= s;
  }
  c->h *= s;
  c->t *= s;
}

/* ---- the kernels ----------------------------------------------------------------------------
 * Every kernel has the same shape: each group walks blocks of tm.count rows
 * (group g takes blocks g, g+G, ...; team i of a block its row i); per row,
 * the work-item's partial results (cached or streaming branch, no barrier
 * inside), a team reduction that every work-item of the group reaches
 * unconditionally (the block loop's condition is uniform; work-items of a
 * team past the last row, or past the last team, are idle: they load and
 * store nothing), then the output (cached or streaming branch). Keeping
 * barriers out of the uniform cached/streaming branches is legal either way,
 * but PoCL 3.1 miscompiles a barrier inside such a branch (rows came out
 * partly unwritten), and it saves barriers. One exception: double_softmax's
 * second sum, skipped where the power sums' series holds, behind a branch
 * uniform over the group (fp_double_softmax_rows), which PoCL 3.1 passes
 * (test_double_softmax_series, planned and host geometry).
 * No if/else right before a barrier (or the kernel's end) whose arms both
 * end in a branch of their own (a loop, an if): PoCL 5.0's kernel compiler
 * aborts on it ("Assertion region_entry_barrier != NULL" in Kernel.cc, the
 * assertion of pocl/pocl#2281). Its IsolateRegions splits the edges into
 * the barrier off every single-entry single-exit region ending there,
 * innermost first, so the if/else, whose edges its arms' regions have
 * taken already, gets a split block with no predecessors, from which
 * parallel-region formation finds no entry barrier. Which such branches
 * survive to that pass depends on LLVM; the ones that aborted (softmax's
 * statistics, hreduce_reduce, gemm.cl's main loop; Ubuntu 24.04's PoCL 5.0
 * with LLVM 16, and PoCL 5.0 built with LLVM 15) are written otherwise:
 * the work a work-item skips folded into its bounds, so that one arm runs
 * over nothing (fp_rowpart_streamed, hreduce_reduce's loops), or the
 * if/else moved off the barrier (gemm.cl). PoCL 3.1, NVIDIA's OpenCL and
 * Oclgrind build either shape.
 * Idle work-items point at row 0 (never dereferenced), so that no pointer
 * past the buffer is formed from a row index past M. */

/* The part of the row a streaming pass visits: p where the work-item
 * streams (`streams`), else nothing (no head, tail or vectors), so that the
 * pass runs over nothing rather than sitting in one arm of an if/else (see
 * above: PoCL 5.0). */
static FP_INLINE fp_rowpart fp_rowpart_streamed(fp_rowpart p, int streams) {
  if (!streams) {
    p.nvec = 0;
    p.mine_head = 0;
    p.mine_tail = 0;
  }
  return p;
}
