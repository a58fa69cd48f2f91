/* fuseport CUDA kernels: dequantising 1- and 2-bit codes by table lookup,
 * shared by dequant_unpack (compress.cu) and dw_packed's operand loader
 * (gemm_dw_sm90.cu). A group's 2 or 4 possible values, as bfloat16
 * patterns (value q in bytes 2q, 2q + 1 of the 8-byte table lo:hi), are
 * computed once with the exact formula; then PRMT picks two of them at a
 * time: the selector nibbles of code q are 2q and 2q + 1, i.e. the byte
 * 34q + 16, so four codes spread to one a byte give four selector bytes in
 * one multiply-add. About 2 instructions a value instead of the 4.5 of
 * computing it (shift, mask, the exponent trick's subtraction, fma, half a
 * conversion), or the 12 or so of the scalar formula with its conversions.
 */
#ifndef FUSEPORT_CUDA_DEQUANT_LUT_CUH
#define FUSEPORT_CUDA_DEQUANT_LUT_CUH

#include <stdint.h>

namespace fpdq {

/* Four codes of BITS (1 or 2) bits each (the low 4 * BITS bits of x), one
 * to a byte. */
template <int BITS> __device__ __forceinline__ uint32_t spread4(uint32_t x) {
  static_assert(BITS == 1 || BITS == 2, "table lookup: 1 or 2 bits");
  if constexpr (BITS == 1) {
    /* x * (1 + 2^7 + 2^14 + 2^21) puts bit k at 8k: four 4-bit copies
     * that do not overlap, so no carries */
    return ((x & 0xFu) * 0x00204081u) & 0x01010101u;
  } else {
    x &= 0xFFu;
    x = (x | (x << 12)) & 0x000F000Fu; /* q1q0 stay, q3q2 to bits 16.. */
    return (x | (x << 6)) & 0x03030303u;
  }
}

/* Bytes of the 8-byte table lo:hi chosen by the four selector nibbles of sel. */
__device__ __forceinline__ uint32_t prmt(uint32_t lo, uint32_t hi, uint32_t sel) {
#ifdef FPCU_EMULATION
  const uint64_t t = static_cast<uint64_t>(hi) << 32 | lo;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k)
    r |= static_cast<uint32_t>((t >> (8 * ((sel >> (4 * k)) & 7u))) & 0xFFu) << (8 * k);
  return r;
#else
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
  return r;
#endif
}

/* The values of four codes (the low 4 * BITS bits of codes, code i at bits
 * i * BITS), as two words of bfloat16 pairs: codes 0 and 1 in *w01 (code 0
 * in the low half), 2 and 3 in *w23. */
template <int BITS>
__device__ __forceinline__ void lookup4(uint32_t codes, uint32_t lo, uint32_t hi, uint32_t &w01,
                                        uint32_t &w23) {
  const uint32_t sel = spread4<BITS>(codes) * 34u + 0x10101010u;
  w01 = prmt(lo, hi, sel);
  w23 = prmt(lo, hi, sel >> 16);
}

} // namespace fpdq

#endif
