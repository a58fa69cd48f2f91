/* fuseport tests: a CPU emulation of the CUDA execution model, just enough
 * of it to run the row kernels of kernels/cu/reduce.cu and horizontal.cu
 * (compiled as host C++ with FPCU_EMULATION, force-included before them) on
 * a machine without a GPU.
 *
 * Every CUDA thread is an OS thread. __syncthreads is a barrier of the
 * block's threads, a warp shuffle is a store to the warp's exchange slots
 * between two barriers of its 32 threads, cluster.sync() a barrier of the
 * cluster's threads, and each block has its own shared memory, which
 * map_shared_rank() finds for another block of the cluster. The blocks of
 * one cluster run at once; clusters (and blocks without clusters) run one
 * after another. A thread that returns leaves every barrier, as an exited
 * CUDA thread stops counting at __syncthreads.
 *
 * What it checks: the kernels' logic (which thread holds which element,
 * the reductions, the cluster exchange and its buffers, the row loops).
 * What it cannot: timing, memory ordering weaker than a barrier, the
 * compiler's register allocation, or CUDA API behaviour; the GPU session
 * (bench/gpu_session.sh) runs the same kernels on the device. */
#ifndef FUSEPORT_CUDA_EMU_H
#define FUSEPORT_CUDA_EMU_H

#include <cuda_runtime_api.h>
#include <math_constants.h>
#include <vector_functions.h>

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

/* The qualifiers mean nothing on the host. */
#undef __host__
#undef __device__
#undef __global__
#undef __shared__
#undef __forceinline__
#undef __maxnreg__
#undef __launch_bounds__
#define __host__
#define __device__
#define __global__
#define __shared__ static_assert(false, "emulated kernels use fpemu::block_shared");
#define __forceinline__ inline
#define __maxnreg__(n)
#define __launch_bounds__(...)

namespace fpemu {

extern thread_local uint3 thread_idx, block_idx, block_dim, grid_dim;

void syncthreads();
/* A shuffle among the lanes of `mask`; traps unless this lane and src_lane
 * are in it (a mask that leaves out a lane of the team would be undefined on
 * the GPU). All live lanes of the warp meet at each shuffle's barriers,
 * whatever their masks: each lane reads only its team's slots, which its
 * team wrote in the same phase. */
unsigned shuffle(unsigned value, int src_lane, unsigned mask);
int lane();
void *block_shared(size_t bytes);
/* The block's dynamic shared memory (extern __shared__) and its size, as
 * the launch gave it. */
void *dynamic_shared();
size_t dynamic_shared_bytes();
/* cp.async of 16 bytes, done at once; counted, so that tests can tell that
 * a kernel staged. */
void async_copy16(void *smem, const void *gmem);
unsigned long long async_copies();
void *shared_of_rank(const void *p, unsigned rank);
unsigned cluster_rank();
unsigned cluster_size();
void cluster_sync();
[[noreturn]] void trap();

/* Runs kernel() on grid blocks of `block` threads in clusters of `cluster`
 * blocks (grid a multiple of it), each with dynamic_bytes of dynamic shared
 * memory (filled with NaN: a read of a slot nobody wrote shows). Returns
 * false when a thread trapped. */
bool launch(unsigned grid, unsigned block, unsigned cluster, const std::function<void()> &kernel,
            size_t dynamic_bytes = 0);

} // namespace fpemu

#define threadIdx (fpemu::thread_idx)
#define blockIdx (fpemu::block_idx)
#define blockDim (fpemu::block_dim)
#define gridDim (fpemu::grid_dim)

inline void __syncthreads() { fpemu::syncthreads(); }
inline void __trap() { fpemu::trap(); }

inline unsigned __shfl_sync(unsigned lanes, unsigned v, int src) {
  return fpemu::shuffle(v, src, lanes);
}
inline unsigned __shfl_xor_sync(unsigned lanes, unsigned v, int mask) {
  return fpemu::shuffle(v, fpemu::lane() ^ mask, lanes);
}
inline float __shfl_xor_sync(unsigned lanes, float v, int mask) {
  unsigned w;
  std::memcpy(&w, &v, 4);
  w = fpemu::shuffle(w, fpemu::lane() ^ mask, lanes);
  std::memcpy(&v, &w, 4);
  return v;
}

/* math_constants.h spells its constants with these device intrinsics. */
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline double __longlong_as_double(long long i) {
  double d;
  std::memcpy(&d, &i, 8);
  return d;
}

inline float __ldg(const float *p) { return *p; }
inline float4 __ldg(const float4 *p) { return *p; }
inline float __ldcs(const float *p) { return *p; }
inline float4 __ldcs(const float4 *p) { return *p; }
inline void __stwb(float4 *p, float4 v) { *p = v; }
/* __expf as the hardware evaluates it: exp2 of x * log2(e) rounded to
 * float (the main source of its error; ex2.approx's own 2^-22 is not
 * modelled), denormal results flushed to 0. */
inline float __expf(float x) {
  const float r = std::exp2(x * 1.44269504f);
  return std::fabs(r) < FLT_MIN ? 0.0f : r;
}

/* __fdividef: the hardware's approximate division (2 ulp) as an exact one. */
inline float __fdividef(float a, float b) { return a / b; }

namespace cooperative_groups {
struct cluster_group {
  unsigned block_rank() const { return fpemu::cluster_rank(); }
  unsigned num_blocks() const { return fpemu::cluster_size(); }
  void sync() const { fpemu::cluster_sync(); }
  template <class T> T *map_shared_rank(T *p, unsigned rank) const {
    return static_cast<T *>(fpemu::shared_of_rank(p, rank));
  }
};
inline cluster_group this_cluster() { return cluster_group(); }
} // namespace cooperative_groups

#endif
