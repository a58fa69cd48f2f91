/* fuseport: Ampere-class (sm_80 and later) tensor-core building blocks:
 * cp.async, ldmatrix and mma.sync m16n8k16 (f16/bf16 in, f32 accumulate),
 * as thin inline-PTX wrappers, with the fragment layouts written down once.
 * Used by the GEMM core's sm80 path (gemm_sm80.cu) and by attention.
 *
 * ---- fragment layouts of mma.sync.m16n8k16 (PTX ISA, "Matrix fragments
 * for mma.m16n8k16"), per lane of the warp:
 *
 *   g = lane >> 2 (the "group", 0..7), t = lane & 3 (the lane in the group)
 *
 *   A (16 x 16, row-major, 4 x .b32, two 16-bit values each, low half first):
 *     a0 = A[g    ][2t, 2t+1]      a1 = A[g + 8][2t, 2t+1]
 *     a2 = A[g    ][2t+8, 2t+9]    a3 = A[g + 8][2t+8, 2t+9]
 *   B (16 x 8, "col": k-pairs of one column, 2 x .b32):
 *     b0 = B[2t, 2t+1][g]          b1 = B[2t+8, 2t+9][g]
 *   C, D (16 x 8, f32, 4 registers):
 *     c0, c1 = C[g][2t, 2t+1]      c2, c3 = C[g + 8][2t, 2t+1]
 *   so a thread's C fragment holds adjacent column pairs (2t, 2t+1), which
 *   is what the GEMM epilogues (gemm_common.cuh) consume.
 *
 * ---- ldmatrix.m8n8 (.x4): lanes 8i..8i+7 give the addresses of the eight
 * 16-byte rows of matrix i (i = 0..3); register i receives matrix i as
 *   plain:  lane holds M_i[g][2t, 2t+1]            (row g, two columns)
 *   .trans: lane holds M_i[2t][g], M_i[2t+1][g]    (one column, two rows)
 * Hence, from shared memory (16-byte rows, any row order):
 *   A fragment (row-major A tile, rows m, k contiguous), plain x4:
 *     lane l points at row (l & 15), k-chunk (l >> 4) of the 16 x 16 block
 *     -> regs = a0, a1, a2, a3.
 *   B fragments of two n8 tiles from a row-major B tile (rows k, n
 *   contiguous), .trans x4: lane l points at k-row (l & 7) + 8 * ((l >> 3) & 1),
 *     n-chunk (l >> 4) -> regs = b0, b1 of n-tile 0, then b0, b1 of n-tile 1.
 *   B fragments of two n8 tiles from an [n][k] tile (trans_b: rows n, k
 *   contiguous), plain x4: lane l points at n-row (l & 7) + 8 * (l >> 4),
 *     k-chunk (l >> 3) & 1 -> regs = b0, b1 of n-tile 0, b0, b1 of n-tile 1.
 *
 * ---- cp.async: 16-byte global -> shared copies that bypass the registers
 * (and L1: .cg), grouped by commit_group and awaited by wait_group N (at
 * most N newest groups still pending). The src-size operand copies only the
 * first src_bytes (0..16) and zero-fills the rest: the way tiles at the edges
 * of M, N and K are loaded without branches and without reading past them.
 */
#ifndef FUSEPORT_MMA_SM80_CUH
#define FUSEPORT_MMA_SM80_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace fpmma {

/* Shared-memory address (32-bit, .shared window) of a generic pointer. */
__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* ---- swizzled tiles ------------------------------------------------------------
 * Element offset (16-bit elements) of 16-byte chunk c of row r in a tile of
 * W chunks a row, swizzled rather than padded: chunk c of row r lives at
 * chunk c ^ (r & 7) (W >= 8), or, for 64-byte rows (W = 4), rows pair into
 * 128-byte lines whose eight chunks are XORed with the line index. Eight
 * rows read at one logical chunk (an ldmatrix phase) then cover all 32
 * banks, and a warp's cp.async stores fill whole 128-byte lines. */
template <int W> __device__ __forceinline__ int swz(int r, int c) {
  static_assert(W == 4 || W % 8 == 0, "swizzle: rows of 64 bytes or multiples of 128");
  if constexpr (W == 4) {
    const int line = r >> 1;
    const int l = ((r & 1) << 2) | c;
    return (line * 8 + (l ^ (line & 7))) * 8;
  } else {
    return (r * W + (c ^ (r & 7))) * 8;
  }
}

/* ---- cp.async ------------------------------------------------------------------ */

/* Copies src_bytes (0..16) from global src to the 16-byte aligned shared
 * address dst and zero-fills the rest of the 16 bytes. With src_bytes == 0
 * nothing is read (src must still be a valid-looking global address). */
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most N of this thread's committed groups are pending. The
 * copies become visible to other threads only after a barrier. */
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ---- ldmatrix ------------------------------------------------------------------ */

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

/* x2: lanes 0..15 give the addresses (matrices 0 and 1). */
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr)
               : "memory");
}

/* ---- mma.sync m16n8k16, f32 accumulation ------------------------------------------ */

/* d += A * B for one 16 x 8 x 16 step (fragments as laid out above). T is
 * the 16-bit input type: __half or __nv_bfloat16. Not volatile: a pure
 * function of its registers, which the compiler may schedule freely. */
template <class T> struct Mma;

template <> struct Mma<__half> {
  __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <> struct Mma<__nv_bfloat16> {
  __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

/* Two floats rounded to nearest even into a packed 16-bit pair (x in the low
 * half: the element at the lower address / lower column). */
template <class T> __device__ __forceinline__ uint32_t pack2(float x, float y);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float x, float y) {
  __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float x, float y) {
  __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<uint32_t *>(&h);
}

} // namespace fpmma

#endif
