/* fuseport CPU backend: how plain-C kernels are declared and registered.
 *
 * A CPU kernel receives the launch geometry and the resolved arguments
 * (buffers are host pointers) and computes the kernel's whole result, in
 * whatever order suits the CPU: kernels.def defines the result, never the
 * schedule. Each kernels/cpu/<family>.c registers its kernels by id.
 */
#ifndef FUSEPORT_CPU_KERNELS_H
#define FUSEPORT_CPU_KERNELS_H

#include "backend_impl.h"
#include "fp_device_common.h"

typedef void (*fp_cpu_kernel_fn)(const fp_ndrange *nd, const fp_karg *args);

#define FP_KERNEL_FAMILY(family) void fp_cpu_register_##family(fp_cpu_kernel_fn table[FPK_COUNT]);
#include "kernels.def"
#undef FP_KERNEL_FAMILY

/* The CPU backend's library GEMM (kernels/cpu/gemm.c): the same float
 * accumulation as its gemm kernels, with alpha, beta*C and batches. */
fp_status fp_cpu_library_gemm(fp_context *ctx, const fp_lib_gemm *g, void *a, void *b, void *c,
                              void *d, void *bias, void *ws, uint64_t ws_bytes);

/* The CPU backend's library convolution (kernels/cpu/conv.c): a direct
 * convolution with float accumulation (no fused epilogue). */
fp_status fp_cpu_library_conv(fp_context *ctx, const fp_lib_conv *c, void *x, void *w, void *bias,
                              void *z, void *out, void *ws, uint64_t ws_bytes);

/* Element i of a buffer of f32, f16 or bf16 as float; stored from float,
 * rounded to nearest even (the conversions of fp_device_common.h). */
static inline float fp_cpu_load_elem(fp_dtype dtype, const void *p, int64_t i) {
  switch (dtype) {
  case FP_F16:
    return fp_f16_bits_to_f32(((const uint16_t *)p)[i]);
  case FP_BF16:
    return fp_bf16_bits_to_f32(((const uint16_t *)p)[i]);
  default:
    return ((const float *)p)[i];
  }
}
static inline void fp_cpu_store_elem(fp_dtype dtype, void *p, int64_t i, float v) {
  switch (dtype) {
  case FP_F16:
    ((uint16_t *)p)[i] = fp_f32_to_f16_bits(v);
    break;
  case FP_BF16:
    ((uint16_t *)p)[i] = fp_f32_to_bf16_bits(v);
    break;
  default:
    ((float *)p)[i] = v;
    break;
  }
}

/* Argument accessors for kernel bodies. */
#define FP_CPU_F32P(args, i) ((float *)(args)[i].v.handle)
#define FP_CPU_I64(args, i) ((args)[i].v.i64)
#define FP_CPU_I32(args, i) ((args)[i].v.i32)
#define FP_CPU_F32(args, i) ((args)[i].v.f32)

/* Sum of n floats at stride, in float with eight interleaved partial sums
 * combined pairwise -- the error behaviour of a GPU tree reduction rather
 * than of one long serial chain. */
float fp_cpu_sum_f32(const float *x, int64_t n, int64_t stride);
/* torch.amax over n floats at stride: NaN propagates. */
float fp_cpu_max_f32(const float *x, int64_t n, int64_t stride);

#endif
