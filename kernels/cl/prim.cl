/* fuseport OpenCL kernels, family prim: the random fill and the unfused
 * building blocks. Semantics: kernels/kernels.def; the executable
 * specification is kernels/cpu/prim.c. fp_device_common.h is prepended to
 * this file when it is embedded (cmake/embed_cl.cmake), so it is not included.
 *
 * ELEM kernels are grid-stride loops over int64 indices. The 2-D ones walk
 * (i, j) incrementally: two 64-bit divisions per work-item up front instead
 * of one per element, which GPUs emulate in dozens of instructions.
 */

/* ---- fill_uniform_f32 ------------------------------------------------------------ */

__kernel void fill_uniform_f32(__global float *out, long n, long seed, int stream, float scale,
                               int positive) {
  const long step = (long)get_global_size(0);
  for (long i = (long)get_global_id(0); i < n; i += step)
    out[i] = fp_uniform_f32((ulong)seed, (uint)stream, (ulong)i, scale, positive);
}

/* ---- prim_unary -------------------------------------------------------------------- */

static float fp_unary(int op, float a, float alpha, float beta) {
  switch (op) {
  case FP_UNARY_COPY:
    return a;
  case FP_UNARY_NEG:
    return -a;
  case FP_UNARY_EXP:
    return exp(a);
  case FP_UNARY_COS:
    return cos(a);
  case FP_UNARY_TANH:
    return tanh(a);
  case FP_UNARY_RSQRT:
    return 1.0f / sqrt(a); /* the CPU's form, not rsqrt(), for the same rounding path */
  case FP_UNARY_RELU:
    return a > 0.0f ? a : (isnan(a) ? a : 0.0f);
  case FP_UNARY_AFFINE:
    return alpha * a + beta;
  case FP_UNARY_SIGMOID:
    return fp_sigmoid(a);
  case FP_UNARY_GELU_ERF:
    return fp_gelu_erf(a);
  default:
    return NAN;
  }
}

__kernel void prim_unary(__global float *out, __global const float *a, int op, float alpha,
                         float beta, long M, long N, long so0, long so1, long sa0, long sa1,
                         long oo, long oa) {
  out += oo;
  a += oa;
  fp_pos pos[FP_ELEM_UNROLL];
  long di, dj;
  if (!fp_walk_begin(M, N, pos, &di, &dj))
    return;
  for (; pos[0].i < M; fp_walk_next(pos, N, di, dj)) {
    float v[FP_ELEM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      v[u] = pos[u].i < M ? a[pos[u].i * sa0 + pos[u].j * sa1] : 0.0f;
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      if (pos[u].i < M)
        out[pos[u].i * so0 + pos[u].j * so1] = fp_unary(op, v[u], alpha, beta);
  }
}

/* ---- prim_binary ------------------------------------------------------------------- */

static float fp_binary(int op, float a, float b) {
  switch (op) {
  case FP_BINARY_ADD:
    return a + b;
  case FP_BINARY_SUB:
    return a - b;
  case FP_BINARY_MUL:
    return a * b;
  case FP_BINARY_DIV:
    return a / b;
  case FP_BINARY_MAX:
    return fp_maximum(a, b);
  default:
    return NAN;
  }
}

__kernel void prim_binary(__global float *out, __global const float *a, __global const float *b,
                          int op, long M, long N, long so0, long so1, long sa0, long sa1, long sb0,
                          long sb1, long oo, long oa, long ob) {
  out += oo;
  a += oa;
  b += ob;
  fp_pos pos[FP_ELEM_UNROLL];
  long di, dj;
  if (!fp_walk_begin(M, N, pos, &di, &dj))
    return;
  for (; pos[0].i < M; fp_walk_next(pos, N, di, dj)) {
    float va[FP_ELEM_UNROLL], vb[FP_ELEM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long i = pos[u].i, j = pos[u].j;
      va[u] = i < M ? a[i * sa0 + j * sa1] : 0.0f;
      vb[u] = i < M ? b[i * sb0 + j * sb1] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      if (pos[u].i < M)
        out[pos[u].i * so0 + pos[u].j * so1] = fp_binary(op, va[u], vb[u]);
  }
}

/* ---- prim_reduce_rows ------------------------------------------------------------------ */

/* ROWS: work-item t of the group combines elements t, t+L, ... of the row
 * (consecutive work-items read consecutive elements when sa1 == 1), four
 * independent accumulators keeping several loads in flight, in chunks of
 * FP_CHUNK elements whose results are then combined: one float accumulator
 * taking thousands of terms (a long row, a small group) would lose accuracy
 * against the CPU's pairwise sums. Then the group combines the work-items'
 * results. */

__kernel void prim_reduce_rows(__global float *out, __global const float *a, int op, long M, long N,
                               long sa0, long sa1) {
  __local float slots[FP_MAX_GROUP], partials[FP_PARTIALS];
  const long lid = (long)get_local_id(0);
  const long L = (long)get_local_size(0);
  const float identity = op == FP_REDUCE_SUM ? 0.0f : -INFINITY;
  for (long row = (long)get_group_id(0); row < M; row += (long)get_num_groups(0)) {
    __global const float *src = a + row * sa0;
    float mine = identity;
    long j = lid;
    while (j < N) {
      const long end = min(N, j + FP_CHUNK * L);
      float acc0 = identity, acc1 = identity, acc2 = identity, acc3 = identity;
      for (; j + 3 * L < end; j += 4 * L) {
        const float x0 = src[j * sa1], x1 = src[(j + L) * sa1];
        const float x2 = src[(j + 2 * L) * sa1], x3 = src[(j + 3 * L) * sa1];
        acc0 = fp_reduce_combine(op, acc0, x0);
        acc1 = fp_reduce_combine(op, acc1, x1);
        acc2 = fp_reduce_combine(op, acc2, x2);
        acc3 = fp_reduce_combine(op, acc3, x3);
      }
      for (; j < end; j += L)
        acc0 = fp_reduce_combine(op, acc0, src[j * sa1]);
      const float chunk = fp_reduce_combine(op, fp_reduce_combine(op, acc0, acc1),
                                            fp_reduce_combine(op, acc2, acc3));
      mine = fp_reduce_combine(op, mine, chunk);
    }
    const float total = fp_group_reduce(op, mine, slots, partials);
    if (lid == 0)
      out[row] = total;
  }
}

/* ---- prim_dropout ----------------------------------------------------------------------- */

__kernel void prim_dropout(__global float *out, __global const float *a, long M, long N, long so0,
                           long so1, long sa0, long sa1, float p, float scale, long seed,
                           int training) {
  fp_pos pos[FP_ELEM_UNROLL];
  long di, dj;
  if (!fp_walk_begin(M, N, pos, &di, &dj))
    return;
  for (; pos[0].i < M; fp_walk_next(pos, N, di, dj)) {
    float v[FP_ELEM_UNROLL];
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u)
      v[u] = pos[u].i < M ? a[pos[u].i * sa0 + pos[u].j * sa1] : 0.0f;
#pragma unroll
    for (int u = 0; u < FP_ELEM_UNROLL; ++u) {
      const long i = pos[u].i, j = pos[u].j;
      if (i < M) {
        float x = v[u];
        if (training)
          x = fp_dropout_keep((ulong)seed, (ulong)(i * N + j), p) ? x * scale : 0.0f;
        out[i * so0 + j * so1] = x;
      }
    }
  }
}

/* ---- reduced-precision storage and packed words -------------------------------------
 * Half and bfloat16 values travel as their 16-bit patterns (ushort) and are
 * converted with fp_device_common.h's bit functions: NVIDIA's OpenCL has no
 * cl_khr_fp16, and every backend then rounds identically. */

__kernel void fill_uniform_f16(__global ushort *out, long n, long seed, int stream, float scale,
                               int positive) {
  const long step = (long)get_global_size(0);
  for (long i = (long)get_global_id(0); i < n; i += step)
    out[i] = fp_uniform_f16_bits((ulong)seed, (uint)stream, (ulong)i, scale, positive);
}

__kernel void fill_uniform_bf16(__global ushort *out, long n, long seed, int stream, float scale,
                                int positive) {
  const long step = (long)get_global_size(0);
  for (long i = (long)get_global_id(0); i < n; i += step)
    out[i] = fp_uniform_bf16_bits((ulong)seed, (uint)stream, (ulong)i, scale, positive);
}

__kernel void fill_bits_u32(__global uint *out, long n, long seed, int stream) {
  const long step = (long)get_global_size(0);
  for (long i = (long)get_global_id(0); i < n; i += step)
    out[i] = fp_philox_word((ulong)seed, (ulong)i, (uint)stream, FP_PHILOX_DOMAIN_FILL);
}

__kernel void fill_bits_u8(__global uchar *out, long n, long seed, int stream) {
  const long step = (long)get_global_size(0);
  for (long i = (long)get_global_id(0); i < n; i += step)
    out[i] =
        (uchar)(fp_philox_word((ulong)seed, (ulong)i, (uint)stream, FP_PHILOX_DOMAIN_FILL) & 0xFFu);
}

/* The 16-bit primitives: one body per storage type (LOAD16: bits -> float,
 * STORE16: float -> bits), computed in float and rounded once. */
#define FP_PRIM16(SUFFIX, LOAD16, STORE16)                                                         \
  __kernel void prim_unary_##SUFFIX(__global ushort *out, __global const ushort *a, int op,        \
                                    float alpha, float beta, long M, long N, long so0, long so1,   \
                                    long sa0, long sa1, long oo, long oa) {                        \
    out += oo;                                                                                     \
    a += oa;                                                                                       \
    const long step = (long)get_global_size(0);                                                    \
    for (long e = (long)get_global_id(0); e < M * N; e += step) {                                  \
      const long i = e / N, j = e - (e / N) * N;                                                   \
      out[i * so0 + j * so1] = STORE16(fp_unary(op, LOAD16(a[i * sa0 + j * sa1]), alpha, beta));   \
    }                                                                                              \
  }                                                                                                \
  __kernel void prim_binary_##SUFFIX(__global ushort *out, __global const ushort *a,               \
                                     __global const ushort *b, int op, long M, long N, long so0,   \
                                     long so1, long sa0, long sa1, long sb0, long sb1, long oo,    \
                                     long oa, long ob) {                                           \
    out += oo;                                                                                     \
    a += oa;                                                                                       \
    b += ob;                                                                                       \
    const long step = (long)get_global_size(0);                                                    \
    for (long e = (long)get_global_id(0); e < M * N; e += step) {                                  \
      const long i = e / N, j = e - (e / N) * N;                                                   \
      out[i * so0 + j * so1] =                                                                     \
          STORE16(fp_binary(op, LOAD16(a[i * sa0 + j * sa1]), LOAD16(b[i * sb0 + j * sb1])));      \
    }                                                                                              \
  }                                                                                                \
  __kernel void prim_pad_rows_##SUFFIX(__global ushort *out, __global const ushort *in, long rows, \
                                       long cols, long ld) {                                       \
    const long step = (long)get_global_size(0);                                                    \
    for (long e = (long)get_global_id(0); e < rows * ld; e += step) {                              \
      const long i = e / ld, j = e - (e / ld) * ld;                                                \
      out[e] = j < cols ? in[i * cols + j] : (ushort)0;                                            \
    }                                                                                              \
  }

FP_PRIM16(f16, fp_f16_bits_to_f32, fp_f32_to_f16_bits)
FP_PRIM16(bf16, fp_bf16_bits_to_f32, fp_f32_to_bf16_bits)

/* prim_channel_<dt>(out, a, v0, v1, v2, v3, op, total, inner, K, eps)      ELEM
 * The per-channel step of a convolution's output: c = (i / inner) % K; the
 * unread vectors may be none (NULL), never dereferenced. */
#define FP_PRIM_CHANNEL(NAME, T, LOAD, STORE)                                                      \
  __kernel void NAME(__global T *out, __global const T *a, __global const T *v0,                   \
                     __global const T *v1, __global const T *v2, __global const T *v3, int op,     \
                     long total, long inner, long K, float eps) {                                  \
    const long step = (long)get_global_size(0);                                                    \
    for (long i = (long)get_global_id(0); i < total; i += step) {                                  \
      const long c = (i / inner) % K;                                                              \
      const float x = LOAD(a[i]);                                                                  \
      const float v = op == FP_CHAN_BN                                                             \
                          ? fp_bn(x, LOAD(v0[c]), LOAD(v1[c]), LOAD(v2[c]), LOAD(v3[c]), eps)      \
                          : x + LOAD(v0[c]);                                                       \
      out[i] = STORE(v);                                                                           \
    }                                                                                              \
  }
#define FP_CHAN_F32_ID(x) (x)
FP_PRIM_CHANNEL(prim_channel, float, FP_CHAN_F32_ID, FP_CHAN_F32_ID)
FP_PRIM_CHANNEL(prim_channel_f16, ushort, fp_f16_bits_to_f32, fp_f32_to_f16_bits)
FP_PRIM_CHANNEL(prim_channel_bf16, ushort, fp_bf16_bits_to_f32, fp_f32_to_bf16_bits)
