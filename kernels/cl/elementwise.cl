/* fuseport OpenCL kernels, family elementwise: the fused elementwise
 * operators. Semantics: kernels/kernels.def; the executable specification is
 * kernels/cpu/elementwise.c; the scalar formulas come from the prepended
 * fp_device_common.h, so every backend evaluates them in the same order.
 * Loads are fp_ld4_keep's (common.cl): evict_last on NVIDIA, as the CUDA
 * lean builds' ldg4, plain elsewhere; bias_gelu's are plain (below).
 */

/* ---- pointwise_chain_fused ------------------------------------------------------- */

/* Buffers come whole from clCreateBuffer, whose base is aligned far beyond 16
 * bytes, so the float4 views are aligned: 16-byte accesses, FP_ELEM_UNROLL of
 * them in flight per work-item, then a scalar tail for the last n % 4. */
__kernel void pointwise_chain_fused(__global float *out, __global const float *x, long n) {
  const long first = (long)get_global_id(0);
  const long step = (long)get_global_size(0);
  const long quads = n / 4;
  __global const float4 *x4 = (__global const float4 *)x;
  __global float4 *out4 = (__global float4 *)out;
  for (long q = first; q < quads; q += FP_ELEM_UNROLL * step) {
    float4 v[FP_ELEM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      v[u] = q + u * step < quads ? fp_ld4_keep(x4 + q + u * step) : (float4)(0.0f);
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      if (q + u * step < quads)
        out4[q + u * step] = (float4)(fp_pointwise_chain(v[u].x), fp_pointwise_chain(v[u].y),
                                      fp_pointwise_chain(v[u].z), fp_pointwise_chain(v[u].w));
  }
  for (long i = quads * 4 + first; i < n; i += step)
    out[i] = fp_pointwise_chain(x[i]);
}

/* ---- bias_gelu_fused -------------------------------------------------------------- */

static float4 fp_gelu_tanh4(float4 v) {
  return (float4)(fp_gelu_tanh(v.x), fp_gelu_tanh(v.y), fp_gelu_tanh(v.z), fp_gelu_tanh(v.w));
}

/* The flat walk over rows of NQ whole quads (fp_bias_gelu_rows4,
 * fp_bda_rows4): a work-item's quads are k, k + S, ... (S the global size),
 * `unroll` of them per step, and of each only its column j = quad mod NQ is
 * tracked, for a broadcast bias: j0 that of the step's first quad, sj the
 * column step between its quads, sj_step between steps; each advances by a
 * conditional subtraction (fp_col_add) instead of a division. */
typedef struct fp_cols {
  long j0, sj, sj_step;
} fp_cols;

static FP_INLINE fp_cols fp_cols_of(long k, long S, long NQ, int unroll) {
  fp_cols c;
  c.j0 = fp_mod_narrow(k, NQ);
  c.sj = fp_mod_narrow(S, NQ);
  c.sj_step = fp_mod_narrow(unroll * S, NQ);
  return c;
}

/* (j + d) mod NQ for j, d < NQ */
static FP_INLINE long fp_col_add(long j, long d, long NQ) {
  j += d;
  return j >= NQ ? j - NQ : j;
}

/* Rows of whole quads (N % 4 == 0): the M * N/4 quads as one flat range,
 * as pointwise_chain_fused walks them, with only the bias column j = k mod
 * N/4 of quad k tracked (fp_bda_rows4 below does the same with three
 * streams). The [M, N] walk of common.cl, which this path replaced, kept an
 * (i, j) pair of 64-bit indices per unrolled quad and set them up with three
 * 64-bit divisions per work-item: on an H100 (NVIDIA OpenCL) it ran at
 * 0.73 of the CUDA kernel's speed at 64 MiB and 0.49 at 16 MiB, where a
 * work-item handles one or two quads and its setup is most of its work.
 * This path, three alternating rounds (2026-11-25): 64 MiB cells 37.2 ->
 * 31.7 us, 1024 x 2048 16.5 -> 14.9, 1.01x from 128 MiB on. */
static FP_INLINE void fp_bias_gelu_rows4(__global float *out, __global const float *inp,
                                         __global const float *bias, long M, long N) {
  const long NQ = N / 4, quads = M * NQ;
  const long S = (long)get_global_size(0);
  long k = (long)get_global_id(0);
  if (k >= quads)
    return;
  __global const float4 *inp4 = (__global const float4 *)inp;
  __global const float4 *bias4 = (__global const float4 *)bias;
  __global float4 *out4 = (__global float4 *)out;
  fp_cols c = fp_cols_of(k, S, NQ, FP_ELEM_UNROLL);
  for (; k < quads; k += FP_ELEM_UNROLL * S) {
    float4 v[FP_ELEM_UNROLL];
    long j = c.j0;
    /* plain loads: with fp_ld4_keep on inp and bias this kernel ran 0.91x
     * as fast on cells of 64 MiB and more (H100, NVIDIA OpenCL, 2026-11-26,
     * two rounds; 4096 x 2048 31.6 -> 35.2 us), where the other elementwise
     * kernels gained 1.02-1.03x */
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long ku = k + u * S;
      v[u] = ku < quads ? inp4[ku] + bias4[j] : (float4)(0.0f);
      j = fp_col_add(j, c.sj, NQ);
    }
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long ku = k + u * S;
      if (ku < quads)
        out4[ku] = fp_gelu_tanh4(v[u]);
    }
    c.j0 = fp_col_add(c.j0, c.sj_step, NQ);
  }
}

__kernel void bias_gelu_fused(__global float *out, __global const float *inp,
                              __global const float *bias, long M, long N) {
  if ((N & 3) == 0) {
    fp_bias_gelu_rows4(out, inp, bias, M, N);
    return;
  }
  fp_pos pos[FP_ELEM_UNROLL];
  long di, dj;
  if (!fp_walk_begin(M, N, pos, &di, &dj))
    return;
  for (; pos[0].i < M; fp_walk_next(pos, N, di, dj)) {
    float v[FP_ELEM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      v[u] = pos[u].i < M ? inp[pos[u].i * N + pos[u].j] + bias[pos[u].j] : 0.0f;
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      if (pos[u].i < M)
        out[pos[u].i * N + pos[u].j] = fp_gelu_tanh(v[u]);
  }
}

/* ---- bias_dropout_add_fused (ELEM, any strides) -------------------------------------- */

/* v = (inp + bias), then dropout with the logical index i*N + j as Philox
 * counter, then res + v: the CPU's order of operations. */
static float fp_bda_one(float v, float r, long idx, float p, float scale, long seed, int training) {
  if (training)
    v = fp_dropout_keep((ulong)seed, (ulong)idx, p) ? v * scale : 0.0f;
  return r + v;
}

/* The common layout: out and res row-major [M, N], bias a broadcast [N]
 * (sb0 == 0, sb1 == 1), N % 4 == 0. The rows are then whole quads, so the
 * kernel walks the M * N/4 quads as one flat range with 16-byte accesses
 * (aligned: see pointwise_chain_fused), FP_BDA_UNROLL quads of each of inp,
 * bias and res in flight per work-item; the bias quads come from cache after
 * the first row. Quad k is element (i, 4j..4j+3) with i*N + 4j = 4k, so the
 * logical index 4k + c is the dropout counter (exactly the same elements
 * drop as on the generic path) and only the bias column j = k mod N/4 is
 * tracked: j0 for the first quad of the step, advanced by a conditional
 * subtraction, the others derived from it each step. Register budget: the
 * earlier walk kept (i, j) pairs of 64-bit indices per unrolled quad beside
 * 8 float4 of data and spilled 188 bytes under NVIDIA's 64-register cap
 * (-cl-nv-verbose, H200, driver 580), measured at 0.56-0.64 of CUDA's speed
 * where bias_gelu's walk of two streams reached 0.95. Two quads per stream
 * rather than FP_ELEM_UNROLL's four: with three streams, four kept twelve
 * 64-bit addresses beside 32 floats of data and still spilled (clang's PTX
 * through ptxas at the same cap), and 6 x 16 bytes per work-item at 1024
 * work-items per SM is still about four times the bytes in flight an SM
 * needs to cover the memory latency of an H200. */
#define FP_BDA_UNROLL 2
static FP_INLINE void fp_bda_rows4(__global float *out, __global const float *inp,
                                   __global const float *bias, __global const float *res, long M,
                                   long N, float p, float scale, long seed, int training) {
  const long NQ = N / 4, quads = M * NQ;
  const long S = (long)get_global_size(0);
  long k = (long)get_global_id(0);
  if (k >= quads)
    return;
  __global const float4 *inp4 = (__global const float4 *)inp;
  __global const float4 *bias4 = (__global const float4 *)bias;
  __global const float4 *res4 = (__global const float4 *)res;
  __global float4 *out4 = (__global float4 *)out;
  fp_cols c = fp_cols_of(k, S, NQ, FP_BDA_UNROLL);
  for (; k < quads; k += FP_BDA_UNROLL * S) {
    float4 v[FP_BDA_UNROLL], rv[FP_BDA_UNROLL];
    long j = c.j0;
#pragma unroll
    for (int u = 0; u < FP_BDA_UNROLL; ++u) {
      const long ku = k + u * S;
      v[u] = ku < quads ? fp_ld4_keep(inp4 + ku) + fp_ld4_keep(bias4 + j) : (float4)(0.0f);
      rv[u] = ku < quads ? fp_ld4_keep(res4 + ku) : (float4)(0.0f);
      j = fp_col_add(j, c.sj, NQ);
    }
#pragma unroll
    for (int u = 0; u < FP_BDA_UNROLL; ++u) {
      const long ku = k + u * S, idx = 4 * ku; /* i*N + 4j */
      if (ku < quads) {
        float4 o;
        o.x = fp_bda_one(v[u].x, rv[u].x, idx, p, scale, seed, training);
        o.y = fp_bda_one(v[u].y, rv[u].y, idx + 1, p, scale, seed, training);
        o.z = fp_bda_one(v[u].z, rv[u].z, idx + 2, p, scale, seed, training);
        o.w = fp_bda_one(v[u].w, rv[u].w, idx + 3, p, scale, seed, training);
        out4[ku] = o;
      }
    }
    c.j0 = fp_col_add(c.j0, c.sj_step, NQ);
  }
}

/* Any strides: the [M, N] walk of common.cl, FP_ELEM_UNROLL elements of each
 * operand in flight per work-item. */
__kernel void bias_dropout_add_fused(__global float *out, __global const float *inp,
                                     __global const float *bias, __global const float *res, long M,
                                     long N, long sb0, long sb1, long sr0, long sr1, long so0,
                                     long so1, float p, float scale, long seed, int training) {
  if ((N & 3) == 0 && sb0 == 0 && sb1 == 1 && sr0 == N && sr1 == 1 && so0 == N && so1 == 1) {
    /* two inlined copies, training a constant in each: the evaluation loop
     * then keeps no Philox state live (its own register allocation) */
    if (training)
      fp_bda_rows4(out, inp, bias, res, M, N, p, scale, seed, 1);
    else
      fp_bda_rows4(out, inp, bias, res, M, N, p, scale, seed, 0);
    return;
  }
  fp_pos pos[FP_ELEM_UNROLL];
  long di, dj;
  if (!fp_walk_begin(M, N, pos, &di, &dj))
    return;
  for (; pos[0].i < M; fp_walk_next(pos, N, di, dj)) {
    float v[FP_ELEM_UNROLL], rv[FP_ELEM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long i = pos[u].i, j = pos[u].j;
      v[u] = i < M ? inp[i * N + j] + bias[i * sb0 + j * sb1] : 0.0f;
      rv[u] = i < M ? res[i * sr0 + j * sr1] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long i = pos[u].i, j = pos[u].j;
      if (i < M)
        out[i * so0 + j * so1] = fp_bda_one(v[u], rv[u], i * N + j, p, scale, seed, training);
    }
  }
}

/* ---- bias_dropout_add_fused_t (TILE) ------------------------------------------------- */

#define FP_TILE 32
#define FP_TILE_BATCH 4 /* FP_TILE / 8, the rows of the TILE geometry */

/* For a column-major output (so0 == 1) computed from a row-major inp. A
 * 32x32 tile is handled in two phases through local memory:
 *   phase 1, "row side": consecutive work-items (dimension 0) take
 *     consecutive columns j, so the row-major inp is read coalesced;
 *   phase 2, "column side": consecutive work-items take consecutive rows i,
 *     so the column-major out is written coalesced.
 * bias and res are each read in whichever phase suits their own strides: an
 * operand whose column stride is 1 (row-major, or a broadcast [N] bias) on the
 * row side, any other (column-major, a per-row [M] vector, a scalar) on the
 * column side. The arithmetic order is the CPU's: (inp + bias), then dropout,
 * then res + v.
 * The tile rows are padded to 33 floats: the column-side reads tile[tx][c]
 * then fall in 32 different banks instead of one.
 * Groups loop over tiles with a group stride, so any grid is correct; the
 * TILE geometry of kernels.def (local (32, 8), one group per tile) is the
 * fast one. */
__kernel void bias_dropout_add_fused_t(__global float *out, __global const float *inp,
                                       __global const float *bias, __global const float *res,
                                       long M, long N, long sb0, long sb1, long sr0, long sr1,
                                       long so0, long so1, float p, float scale, long seed,
                                       int training) {
  __local float tile_v[FP_TILE][FP_TILE + 1];
  __local float tile_res[FP_TILE][FP_TILE + 1];
  const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
  const int nx = (int)get_local_size(0), ny = (int)get_local_size(1);
  const int bias_on_row_side = sb1 == 1;
  const int res_on_row_side = sr1 == 1;
  const long tiles_m = (M + FP_TILE - 1) / FP_TILE;
  const long tiles_n = (N + FP_TILE - 1) / FP_TILE;
  /* Each work-item moves FP_TILE_BATCH elements per batch, all loads first;
   * with local (32, 8) a batch is the work-item's whole share of the tile. */
  for (long tm = (long)get_group_id(1); tm < tiles_m; tm += (long)get_num_groups(1)) {
    for (long tn = (long)get_group_id(0); tn < tiles_n; tn += (long)get_num_groups(0)) {
      const long i0 = tm * FP_TILE, j0 = tn * FP_TILE;
      /* phase 1, row side: column c = tx along dimension 0, rows r = ty + u*ny */
      for (int c = tx; c < FP_TILE; c += nx) {
        for (int r0 = ty; r0 < FP_TILE; r0 += FP_TILE_BATCH * ny) {
          float v[FP_TILE_BATCH], rv[FP_TILE_BATCH];
#pragma unroll
          for (int u = 0; u < FP_TILE_BATCH; ++u) {
            const int r = r0 + u * ny;
            const long i = i0 + r, j = j0 + c;
            const int inside = r < FP_TILE && i < M && j < N;
            v[u] = inside ? inp[i * N + j] : 0.0f;
            if (inside && bias_on_row_side)
              v[u] += bias[i * sb0 + j * sb1];
            rv[u] = inside && res_on_row_side ? res[i * sr0 + j * sr1] : 0.0f;
          }
#pragma unroll
          for (int u = 0; u < FP_TILE_BATCH; ++u) {
            const int r = r0 + u * ny;
            if (r < FP_TILE) {
              tile_v[r][c] = v[u];
              tile_res[r][c] = rv[u];
            }
          }
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      /* phase 2, column side: row r = tx along dimension 0, columns c = ty + u*ny */
      for (int r = tx; r < FP_TILE; r += nx) {
        for (int c0 = ty; c0 < FP_TILE; c0 += FP_TILE_BATCH * ny) {
          float v[FP_TILE_BATCH], rv[FP_TILE_BATCH];
#pragma unroll
          for (int u = 0; u < FP_TILE_BATCH; ++u) {
            const int c = c0 + u * ny;
            const long i = i0 + r, j = j0 + c;
            const int inside = c < FP_TILE && i < M && j < N;
            v[u] = inside ? tile_v[r][c] : 0.0f;
            if (inside && !bias_on_row_side)
              v[u] += bias[i * sb0 + j * sb1];
            rv[u] = !inside ? 0.0f : res_on_row_side ? tile_res[r][c] : res[i * sr0 + j * sr1];
          }
#pragma unroll
          for (int u = 0; u < FP_TILE_BATCH; ++u) {
            const int c = c0 + u * ny;
            const long i = i0 + r, j = j0 + c;
            if (c < FP_TILE && i < M && j < N) {
              float x = v[u];
              if (training)
                x = fp_dropout_keep((ulong)seed, (ulong)(i * N + j), p) ? x * scale : 0.0f;
              out[i * so0 + j * so1] = rv[u] + x;
            }
          }
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE); /* the tile is rewritten for the next one */
    }
  }
}
