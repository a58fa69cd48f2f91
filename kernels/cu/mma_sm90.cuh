/* Hopper (sm_90a) device primitives: mbarriers, TMA (bulk tensor copies),
 * wgmma (warpgroup MMA) and its shared-memory descriptors, setmaxnreg, and
 * the cluster and proxy fences they need. Thin wrappers over PTX, each
 * layout and encoding written down once here; the GEMM core
 * (gemm_sm90.cu) and attention build on them.
 *
 * Everything here is sm_90a-only machine code: call it only from device
 * code compiled under FP_SM90A (below). Unused inline functions emit
 * nothing, so including this header in other passes is harmless.
 *
 * Conventions: shared-memory addresses are 32-bit shared-window addresses
 * (smem_u32), as PTX's .shared state spaces take them. Barrier waits are
 * by phase parity: a barrier starts in phase 0; waiting on parity P returns
 * once the phase with parity P has completed, so a fresh barrier already
 * "completed" parity 1 (that is how a producer's first pass over empty
 * buffers skips its wait).
 */
#ifndef FUSEPORT_MMA_SM90_CUH
#define FUSEPORT_MMA_SM90_CUH

#include <cuda.h> /* CUtensorMap (the type only: the library never links libcuda) */
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

/* 1 in device passes that may use sm_90a instructions (wgmma, setmaxnreg). */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FP_SM90A 1
#else
#define FP_SM90A 0
#endif

namespace fpsm90 {

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* ---- mbarrier ------------------------------------------------------------------
 * A 64-bit shared-memory object counting pending arrivals and pending
 * transaction bytes (tx-count) of its current phase; the phase completes
 * when both reach zero, and the barrier re-arms with its initial count. */

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
/* Makes initialised barriers visible to the async proxy (TMA) and to the
 * other CTAs of the cluster; follow it with a CTA or cluster barrier. */
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
/* Arrives on the barrier at the same shared-memory offset in CTA `cta_rank`
 * of this cluster (itself included). Default semantics (release, CTA
 * scope): enough where the arrival only says "my wgmmas reading this buffer
 * have retired" (wgmma.wait_group), with no generic-proxy data to publish;
 * .release.cluster would add a GPU-wide MEMBAR to every arrival. */
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t cta_rank) {
  asm volatile("{\n\t.reg .b32 rbar;\n\t"
               "mapa.shared::cluster.u32 rbar, %0, %1;\n\t"
               "mbarrier.arrive.shared::cluster.b64 _, [rbar];\n\t}" ::"r"(bar),
               "r"(cta_rank)
               : "memory");
}
/* One arrival plus `bytes` more expected transaction bytes (the TMA copies
 * that complete on this barrier count them down). The copies may land
 * before this runs: tx-count goes transiently negative, which is allowed,
 * and the phase cannot complete while this arrival is pending. */
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
/* `count` arrivals at once (on this CTA's barrier, or on the barrier at the
 * same offset in CTA `cta_rank` of the cluster). */
__device__ __forceinline__ void mbar_arrive_cnt(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_cluster_cnt(uint32_t bar, uint32_t cta_rank,
                                                        uint32_t count) {
  asm volatile("{\n\t.reg .b32 rbar;\n\t"
               "mapa.shared::cluster.u32 rbar, %0, %1;\n\t"
               "mbarrier.arrive.shared::cluster.b64 _, [rbar], %2;\n\t}" ::"r"(bar),
               "r"(cta_rank), "r"(count)
               : "memory");
}
/* true once the phase of parity `parity` has completed (acquire, CTA
 * scope). try_wait may suspend the thread for a hardware-chosen while. */
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile("{\n\t.reg .pred p;\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
               "selp.u32 %0, 1, 0, p;\n\t}"
               : "=r"(done)
               : "r"(bar), "r"(parity)
               : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

/* ---- clusters ------------------------------------------------------------------ */

__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_id_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_count_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}
/* Every thread of every CTA of the cluster (not .aligned: callers may be
 * diverged); release/acquire orders shared-memory accesses across it. */
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

/* ---- TMA: cp.async.bulk.tensor ---------------------------------------------------
 * Copies one box of a tensor (described by a CUtensorMap built on the host
 * with cuTensorMapEncodeTiled and passed as a __grid_constant__ kernel
 * parameter) into shared memory, and counts its bytes down on `bar`.
 * Coordinates are in elements, innermost first; parts of the box outside
 * the tensor are filled with zeros and still count as bytes, so the
 * expected tx per box is always the full box size. With a swizzled map the
 * destination must be aligned to the swizzle's repeat (1024 bytes for
 * 128B). The .shared::cluster destination with a CTA-local address means
 * this CTA's own shared memory. */

__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap *map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                            int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                            int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
/* An im2col box of a 4-D NHWC tensor map (encode_im2col_nhwc): the channels
 * [c, c + channelsPerPixel) of pixelsPerColumn consecutive pixels of the
 * map's traversal, starting at input pixel (n, h, w), each read at
 * (h + off_h, w + off_w) (a filter tap), zeros outside the image. */
__device__ __forceinline__ void tma_load_im2col_4d(uint32_t dst, const CUtensorMap *map,
                                                   uint32_t bar, int c, int w, int h, int n,
                                                   uint16_t off_w, uint16_t off_h) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c), "r"(w), "r"(h), "r"(n),
               "h"(off_w), "h"(off_h)
               : "memory");
}
/* Pulls a box into L2 only (no shared memory, no barrier): a later load
 * of it then hits L2. */
__device__ __forceinline__ void tma_prefetch_l2_2d(const CUtensorMap *map, int c0, int c1) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global [%0, {%1, %2}];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1)
               : "memory");
}
/* Multicast: the box lands at offset `dst` of every CTA in `cta_mask`
 * (bit i = cluster rank i) and counts down the barrier at offset `bar` of
 * each of them. Each receiving CTA must expect these bytes itself. */
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const CUtensorMap *map,
                                                      uint32_t bar, int c0, int c1,
                                                      uint16_t cta_mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "h"(cta_mask), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void tma_load_3d_multicast(uint32_t dst, const CUtensorMap *map,
                                                      uint32_t bar, int c0, int c1, int c2,
                                                      uint16_t cta_mask) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%4, %5, %6}], [%2], %3;" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "h"(cta_mask), "r"(c0), "r"(c1),
               "r"(c2)
               : "memory");
}

/* ---- TMA stores: shared memory -> global, bulk async-groups ------------------------
 * The box at `src` (this CTA's shared memory, laid out as the map's swizzle
 * says) is written to the tensor at the coordinates; parts of the box
 * outside the tensor are not written. The copy reads shared memory after
 * the instruction issues: the issuing thread commits its copies into
 * bulk async-groups and waits on them (per thread state: the same thread
 * issues, commits and waits). Writers of `src` fence the async proxy
 * (fence_proxy_async) and synchronise with the issuing thread first. */
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, uint32_t src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
/* At most kPending of this thread's newest bulk groups still read shared
 * memory (their sources may be overwritten once this returns). */
template <int kPending> __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}
/* At most kPending of this thread's newest bulk groups are incomplete (the
 * older ones' global writes are done). */
template <int kPending> __device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kPending) : "memory");
}

/* stmatrix m8n8 x4: four 8x8 matrices of 16-bit values to shared memory.
 * Lane l gives the address of row l % 8 of matrix l / 8 (16 contiguous
 * bytes); register i of every lane holds its fragment of matrix i, laid
 * out as an mma accumulator pair: row l / 4, columns 2 (l % 4) + {0, 1}. */
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

/* stmatrix m8n8 x4 .trans: the same fragments, each matrix stored
 * transposed: lane l's address takes column l % 8 of matrix l / 8 (its 8
 * rows, 16 contiguous bytes). */
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1,
                                                  uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

/* ldmatrix m8n8 x4: the converse of stmatrix_x4 (same addresses, same
 * fragments). */
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                            uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}

/* A named barrier among `count` threads (a multiple of 32; id 0 is
 * __syncthreads). */
__device__ __forceinline__ void named_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

/* ---- proxies and registers ------------------------------------------------------- */

/* Orders this thread's ordinary (generic-proxy) shared-memory writes before
 * later async-proxy accesses (wgmma operand reads, TMA stores): each writing
 * thread fences, then a barrier, then the async operation. */
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* Register reallocation per warpgroup (sm_90a). Effective only when the
 * kernel has a register cap at entry (__launch_bounds__(threads, 1)) and
 * each warpgroup role is one branch of a single if/else; a warpgroup that
 * increases blocks until others have released enough. Counts are
 * multiples of 8 in [24, 256]. */
template <int kRegs> __device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg count");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <int kRegs> __device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg count");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

/* ---- wgmma: synchronisation -------------------------------------------------------
 * wgmma.mma_async is issued by a whole warpgroup (4 consecutive warps, the
 * first a multiple of 4) and runs asynchronously: it reads its shared-memory
 * operands and register operands, and writes its accumulators, after the
 * instruction issues.
 *   wgmma_fence()    before the first wgmma of a batch, whenever the
 *                    accumulators or register A operands were touched by
 *                    other instructions since the last wgmma;
 *   wgmma_commit()   closes the wgmma ops issued so far into a group;
 *   wgmma_wait<N>()  waits until at most N groups are pending: then the
 *                    older groups' accumulators are valid and their
 *                    shared-memory operands may be overwritten.
 * fence_operand() keeps the compiler from moving ordinary reads or writes
 * of an accumulator register across these points (it sees wgmma as a plain
 * asm statement that reads and writes the registers at issue). */

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void fence_operand(float &r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void fence_operand(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }
template <int kN> __device__ __forceinline__ void fence_operands(float (&r)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
    fence_operand(r[i]);
}

/* ---- wgmma: shared-memory matrix descriptors ----------------------------------------
 * A 64-bit descriptor of an operand tile in shared memory:
 *   bits  0-13  start address >> 4
 *   bits 16-29  leading-dimension byte offset (LBO) >> 4
 *   bits 32-45  stride-dimension byte offset (SBO) >> 4
 *   bits 49-51  base offset (0: tiles start on a 1024-byte boundary)
 *   bits 62-63  swizzle: 1 = 128B (2 = 64B, 3 = 32B, 0 = none)
 *
 * The 128B swizzle (what TMA's CU_TENSOR_MAP_SWIZZLE_128B writes): a tile
 * is a stack of 128-byte rows, and the 16-byte chunk c of row r is stored
 * at chunk c ^ (r % 8). The hardware applies the XOR to address bits [4:6]
 * from bits [7:9], so a tile must start 1024-byte aligned; moving the start
 * address inside a row (below) is then still decoded correctly.
 *
 * For 16-bit types (64 elements per 128-byte row):
 *   K-major (A, and B stored [N, K]): row = one M (N) index, its 64 K
 *     values. SBO = 1024 (8 rows to the next 8-row group); LBO unused
 *     (encoded as 1). The k16 step kk of a 64-wide K block starts at
 *     +32 * kk bytes.
 *   MN-major (B stored [K, N]): row = one K index, 64 N values; tiles of
 *     64 rows (64 K x 64 N, 8 KiB) side by side along N. SBO = 1024 (the next
 *     8 K rows), LBO = the byte distance between 64-wide N tiles. The k16
 *     step kk starts at +16 * 128 * kk bytes. wgmma's imm-trans-b = 1. */

__device__ __forceinline__ uint64_t make_smem_desc_sw128(uint32_t addr, uint32_t lbo,
                                                         uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) |
         (static_cast<uint64_t>((lbo & 0x3FFFFu) >> 4) << 16) |
         (static_cast<uint64_t>((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}
/* The descriptor moved by `bytes` (a multiple of 16) inside its tile. */
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  return desc + static_cast<uint64_t>(bytes >> 4);
}

/* ---- wgmma.mma_async m64nNk16, float accumulators ----------------------------------------
 * D[64, N] (+)= A[64, 16] * B[16, N], A and B f16 or bf16.
 *
 * Accumulator fragment (d[N / 2] per thread): thread t of the warpgroup,
 * warp w = t / 32, lane l; register i = 4 j + 2 h + c holds
 *   row 16 w + l / 4 + 8 h,  column 8 j + 2 (l % 4) + c
 * (j < N / 8, h, c in {0, 1}): adjacent column pairs, as mma.sync's C.
 *
 * Register A fragment (rs, K-major, a[4] = 8 packed 16-bit values):
 *   a[0] = (row r, k 2 (l % 4) + {0,1}),   a[1] = (row r + 8, same k),
 *   a[2] = (row r, k 8 + 2 (l % 4) + {0,1}), a[3] = (row r + 8, k + 8),
 * r = 16 w + l / 4, the low half the lower k: exactly an accumulator
 * fragment's registers 8 s .. 8 s + 7 for columns 16 s .. 16 s + 15 rounded
 * and packed in pairs, so a product can feed the next MMA without shared
 * memory (flash attention's P @ V, the b2b GEMM).
 *
 * ss: A and B from shared-memory descriptors (A K-major: imm-trans-a 0);
 * rs: A from registers. kTransB: 0 = B K-major, 1 = B MN-major.
 * scale_d = 0 ignores the old accumulators (D = A * B). */
template <int kN, class T> struct Wgmma;

/* Accumulator operand placeholders, 16 to a line. */
#define FP_SM90_D16_0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define FP_SM90_D16_1                                                                              \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FP_SM90_D16_2                                                                              \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define FP_SM90_D16_3                                                                              \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define FP_SM90_D16_4                                                                              \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define FP_SM90_D16_5                                                                              \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define FP_SM90_D16_6                                                                              \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
#define FP_SM90_D16_7                                                                              \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define FP_SM90_D32 FP_SM90_D16_0 ", " FP_SM90_D16_1
#define FP_SM90_D64 FP_SM90_D32 ", " FP_SM90_D16_2 ", " FP_SM90_D16_3
#define FP_SM90_D96 FP_SM90_D64 ", " FP_SM90_D16_4 ", " FP_SM90_D16_5
#define FP_SM90_D112 FP_SM90_D96 ", " FP_SM90_D16_6
#define FP_SM90_D128                                                                               \
  FP_SM90_D64 ", " FP_SM90_D16_4 ", " FP_SM90_D16_5 ", " FP_SM90_D16_6 ", " FP_SM90_D16_7

/* Accumulator operands: "+f"(d[i]) .. "+f"(d[i + 7]), and 32 of them. */
#define FP_SM90_F8(d, i)                                                                           \
  "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]),        \
      "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define FP_SM90_F32(d, i)                                                                          \
  FP_SM90_F8(d, (i) + 0), FP_SM90_F8(d, (i) + 8), FP_SM90_F8(d, (i) + 16), FP_SM90_F8(d, (i) + 24)
#define FP_SM90_OPS32(d) FP_SM90_F32(d, 0)
#define FP_SM90_OPS64(d) FP_SM90_F32(d, 0), FP_SM90_F32(d, 32)
#define FP_SM90_OPS96(d) FP_SM90_F32(d, 0), FP_SM90_F32(d, 32), FP_SM90_F32(d, 64)
#define FP_SM90_OPS112(d)                                                                          \
  FP_SM90_F32(d, 0), FP_SM90_F32(d, 32), FP_SM90_F32(d, 64), FP_SM90_F8(d, 96), FP_SM90_F8(d, 104)
#define FP_SM90_OPS128(d)                                                                          \
  FP_SM90_F32(d, 0), FP_SM90_F32(d, 32), FP_SM90_F32(d, 64), FP_SM90_F32(d, 96)

/* One specialisation per (N, type). The operands after the NR = N / 2
 * accumulators: ss: %NR desc A, %NR+1 desc B, %NR+2 scale_d, %NR+3
 * trans-b, %NR+4 trans-a (A MN-major: dw_from_packed's dy^T); rs: %NR..%NR+3 the A fragment, %NR+4
 * desc B, %NR+5 scale_d, %NR+6 trans-b (S0..S6 below spell those numbers). */
#define FP_SM90_DEFINE_WGMMA(N, T, TY, DREGS, OPS, S0, S1, S2, S3, S4, S5, S6)                     \
  template <> struct Wgmma<N, T> {                                                                 \
    template <int kTransB, int kTransA = 0>                                                        \
    __device__ __forceinline__ static void ss(float (&d)[(N) / 2], uint64_t desc_a,                \
                                              uint64_t desc_b, int scale_d) {                      \
      asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %" S2 ", 0;\n\t"                          \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" DREGS "}, "    \
                   "%" S0 ", %" S1 ", p, 1, 1, %" S4 ", %" S3 ";\n\t}"                             \
                   : OPS(d)                                                                        \
                   : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB), "n"(kTransA));          \
    }                                                                                              \
    template <int kTransB>                                                                         \
    __device__ __forceinline__ static void rs(float (&d)[(N) / 2], const uint32_t (&a)[4],         \
                                              uint64_t desc_b, int scale_d) {                      \
      asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %" S5 ", 0;\n\t"                          \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" DREGS "}, "    \
                   "{%" S0 ", %" S1 ", %" S2 ", %" S3 "}, %" S4 ", p, 1, 1, %" S6 ";\n\t}"         \
                   : OPS(d)                                                                        \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),        \
                     "n"(kTransB));                                                                \
    }                                                                                              \
  };

FP_SM90_DEFINE_WGMMA(64, __half, "f16", FP_SM90_D32, FP_SM90_OPS32, "32", "33", "34", "35", "36",
                     "37", "38")
FP_SM90_DEFINE_WGMMA(64, __nv_bfloat16, "bf16", FP_SM90_D32, FP_SM90_OPS32, "32", "33", "34", "35",
                     "36", "37", "38")
FP_SM90_DEFINE_WGMMA(128, __half, "f16", FP_SM90_D64, FP_SM90_OPS64, "64", "65", "66", "67", "68",
                     "69", "70")
FP_SM90_DEFINE_WGMMA(128, __nv_bfloat16, "bf16", FP_SM90_D64, FP_SM90_OPS64, "64", "65", "66", "67",
                     "68", "69", "70")
FP_SM90_DEFINE_WGMMA(192, __half, "f16", FP_SM90_D96, FP_SM90_OPS96, "96", "97", "98", "99", "100",
                     "101", "102")
FP_SM90_DEFINE_WGMMA(192, __nv_bfloat16, "bf16", FP_SM90_D96, FP_SM90_OPS96, "96", "97", "98", "99",
                     "100", "101", "102")
FP_SM90_DEFINE_WGMMA(224, __half, "f16", FP_SM90_D112, FP_SM90_OPS112, "112", "113", "114", "115",
                     "116", "117", "118")
FP_SM90_DEFINE_WGMMA(224, __nv_bfloat16, "bf16", FP_SM90_D112, FP_SM90_OPS112, "112", "113", "114",
                     "115", "116", "117", "118")
FP_SM90_DEFINE_WGMMA(256, __half, "f16", FP_SM90_D128, FP_SM90_OPS128, "128", "129", "130", "131",
                     "132", "133", "134")
FP_SM90_DEFINE_WGMMA(256, __nv_bfloat16, "bf16", FP_SM90_D128, FP_SM90_OPS128, "128", "129", "130",
                     "131", "132", "133", "134")

#undef FP_SM90_DEFINE_WGMMA

/* Two floats rounded (to nearest even) and packed as a register A operand
 * word: x in the low half (the lower k). */
template <class T> __device__ __forceinline__ uint32_t pack2(float x, float y);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float x, float y) {
  __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float x, float y) {
  __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<uint32_t *>(&h);
}

/* The converse of pack2: the two 16-bit values of a word as floats. */
template <class T> __device__ __forceinline__ float2 unpack2(uint32_t w);
template <> __device__ __forceinline__ float2 unpack2<__half>(uint32_t w) {
  __half2 h;
  memcpy(&h, &w, 4);
  return __half22float2(h);
}
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t w) {
  __nv_bfloat162 h;
  memcpy(&h, &w, 4);
  return __bfloat1622float2(h);
}

/* 16-byte stores of a wgmma accumulator fragment (acc[4 j + 2 h + e]: row
 * lane / 4 + 8 h, column 8 j + 2 (lane & 3) + e of the warp's tile): a
 * quad's lane q holds columns 2q, 2q + 1 of every 8-column block; four
 * rotations over the quad (round s: lane r sends its block (r + s) & 3 of the
 * group, lane q receives lane (q - s) & 3's) give lane q the eight columns of
 * block 4 g + q of row half h, packed to T, returned as one 16-byte word.
 * Every lane of the warp must call it (shuffles). */
template <class T, int N>
__device__ __forceinline__ uint4 quad_row16(const float (&acc)[N], int g, int h, int lane) {
  const int q = lane & 3;
  uint32_t u[4], v[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int l = 4 * (4 * g + t) + 2 * h;
    u[t] = pack2<T>(acc[l], acc[l + 1]);
  }
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const int send = (q + s) & 3, src = (q - s) & 3;
    const uint32_t x = send == 0 ? u[0] : send == 1 ? u[1] : send == 2 ? u[2] : u[3];
    const uint32_t y = __shfl_sync(0xffffffffu, x, (lane & ~3) | src);
#pragma unroll
    for (int r = 0; r < 4; ++r)
      v[r] = src == r ? y : v[r];
  }
  return make_uint4(v[0], v[1], v[2], v[3]);
}

/* ---- host: TMA tensor maps ------------------------------------------------------------
 * cuTensorMapEncodeTiled through the runtime's driver entry point (the
 * library links cudart only). */
inline PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

/* A row-major [outer, inner] 16-bit tensor (dtype: 1 f16, 2 bf16, as
 * fp_dtype) with leading dimension ld (elements), boxes of [box_outer,
 * box_inner], 128B swizzle, zero fill past the edges. */
inline cudaError_t encode_2d(CUtensorMap *map, int dtype, const void *ptr, long long inner,
                             long long outer, long long ld, int box_inner, int box_outer) {
  const PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn();
  if (fn == nullptr)
    return cudaErrorNotSupported;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2u};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_inner),
                             static_cast<cuuint32_t>(box_outer)};
  const cuuint32_t estrides[2] = {1, 1};
  const CUtensorMapDataType ty =
      dtype == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult r = fn(map, ty, 2, const_cast<void *>(ptr), dims, strides, box, estrides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

inline PFN_cuTensorMapEncodeIm2col_v12000 encode_im2col_fn() {
  static const PFN_cuTensorMapEncodeIm2col_v12000 fn = [] {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeIm2col", &p, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeIm2col_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeIm2col_v12000>(p);
  }();
  return fn;
}

/* The im2col map of a 16-bit NHWC input x [N, H, W, C] (dtype as in
 * encode_2d) for a convolution with an R x S filter, stride, padding pad
 * and dilation dil: a box is `channels` channels (128B swizzle) of `pixels`
 * output pixels in (n, p, q) order. The traversal walks the bounding box
 * of the filter's top-left tap, [-pad, H + pad - (R - 1) dil - 1] x
 * [-pad, W + pad - (S - 1) dil - 1], in steps of `stride`: exactly the P x Q
 * output pixels, image after image. The corners must fit TMA's signed
 * 8-bit range for 4-D maps ([-128, 127]) and stride its traversal steps
 * (<= 8): cudaErrorNotSupported where they do not. */
inline cudaError_t encode_im2col_nhwc(CUtensorMap *map, int dtype, const void *x, long long N,
                                      long long H, long long W, long long C, int R, int S,
                                      int stride, int pad, int dil, int channels, int pixels) {
  const int lo = -pad, hi_h = pad - (R - 1) * dil, hi_w = pad - (S - 1) * dil;
  if (lo < -128 || hi_h < -128 || hi_w < -128 || pad > 127 || stride > 8)
    return cudaErrorNotSupported;
  const PFN_cuTensorMapEncodeIm2col_v12000 fn = encode_im2col_fn();
  if (fn == nullptr)
    return cudaErrorNotSupported;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(C), static_cast<cuuint64_t>(W),
                              static_cast<cuuint64_t>(H), static_cast<cuuint64_t>(N)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(C) * 2u,
                                 static_cast<cuuint64_t>(W * C) * 2u,
                                 static_cast<cuuint64_t>(H * W * C) * 2u};
  const int lower[2] = {lo, lo};     /* W, H */
  const int upper[2] = {hi_w, hi_h}; /* W, H */
  const cuuint32_t estrides[4] = {1, static_cast<cuuint32_t>(stride),
                                  static_cast<cuuint32_t>(stride), 1};
  const CUtensorMapDataType ty =
      dtype == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult r = fn(map, ty, 4, const_cast<void *>(x), dims, strides, lower, upper,
                        static_cast<cuuint32_t>(channels), static_cast<cuuint32_t>(pixels),
                        estrides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

} // namespace fpsm90

#endif
