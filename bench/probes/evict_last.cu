/* Probe: do loads marked L2 evict_last survive the benchmarks' L2 write flush?
 *
 * torch.compile's dynamic-shape pointwise kernels load every input with
 * ld.global.L1::evict_last.L2::cache_hint (createpolicy evict_last 1.0).
 * fuseport bench, torch_bench.py and Triton's do_bench "flush" the L2 by
 * writing 2x its size with normal stores before each repetition. If lines a
 * kernel loaded evict_last outrank the flush's normal lines, they stay in L2
 * across the flush, and the next repetition of that kernel reads part of its
 * inputs from L2: a benchmark artifact, not a property of the kernel.
 *
 * Each condition: [pre: copy A -> O with load policy P] [flush: write 2x L2
 * with store policy Q] [timed: copy A -> O with load policy T], repeated,
 * events around the timed copy only; median us. A of 4-48 MiB.
 *
 *   nvcc -O3 -arch=sm_90 -o evict_last bench/probes/evict_last.cu && ./evict_last
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

__device__ __forceinline__ unsigned long long evict_last_policy() {
  unsigned long long pol;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

/* o = a, float4; EL: loads marked evict_last in L1 and L2 (Inductor's form) */
template <bool EL> __global__ void copy4(float4 *o, const float4 *a, size_t n4) {
  const unsigned long long pol = EL ? evict_last_policy() : 0ull;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
       i += (size_t)gridDim.x * blockDim.x) {
    float4 v;
    if (EL)
      asm volatile("ld.global.L1::evict_last.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;"
                   : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                   : "l"(a + i), "l"(pol));
    else
      v = a[i];
    o[i] = v;
  }
}

/* the flush: f[i] = v; EL: stores marked evict_last too */
template <bool EL> __global__ void fill(int *f, size_t n, int v) {
  const unsigned long long pol = EL ? evict_last_policy() : 0ull;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    if (EL)
      asm volatile("st.global.L2::cache_hint.b32 [%0], %1, %2;" ::"l"(f + i), "r"(v), "l"(pol));
    else
      f[i] = v;
  }
}

__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int l2 = 0;
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const size_t flush_n = 2 * (size_t)l2 / 4;
  int *f = nullptr;
  float4 *a = nullptr, *o = nullptr;
  const size_t max_bytes = 48u << 20;
  CK(cudaMalloc(&f, flush_n * 4));
  CK(cudaMalloc(&a, max_bytes));
  CK(cudaMalloc(&o, max_bytes));
  CK(cudaMemset(a, 1, max_bytes));
  const int reps = 200;
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto &e : ev)
    CK(cudaEventCreate(&e));
  const unsigned grid = 8 * sms, block = 256;
  std::printf("L2 %d MiB, flush %zu MiB; median us of the timed copy (min)\n", l2 >> 20,
              flush_n * 4 >> 20);
  std::printf("%-8s %-34s %12s\n", "A", "pre-load / flush stores / timed load", "us");
  for (size_t mib : {4, 12, 24, 48}) {
    const size_t n4 = (mib << 20) / 16;
    struct Cond {
      bool pre_el, flush_el, timed_el;
      const char *name;
    };
    const Cond conds[] = {{false, false, false, "normal / normal / normal"},
                          {true, false, false, "evict_last / normal / normal"},
                          {false, false, true, "normal / normal / evict_last"},
                          {true, false, true, "evict_last / normal / evict_last"},
                          {true, true, true, "evict_last / evict_last / evict_last"},
                          {true, true, false, "evict_last / evict_last / normal"}};
    for (const Cond &c : conds) {
      for (int k = 0; k < reps; ++k) {
        spin<<<1, 1>>>(20000); /* keeps the host's issue time out of the events */
        if (c.pre_el)
          copy4<true><<<grid, block>>>(o, a, n4);
        else
          copy4<false><<<grid, block>>>(o, a, n4);
        if (c.flush_el)
          fill<true><<<grid, block>>>(f, flush_n, k);
        else
          fill<false><<<grid, block>>>(f, flush_n, k);
        CK(cudaEventRecord(ev[2 * k]));
        if (c.timed_el)
          copy4<true><<<grid, block>>>(o, a, n4);
        else
          copy4<false><<<grid, block>>>(o, a, n4);
        CK(cudaEventRecord(ev[2 * k + 1]));
      }
      CK(cudaDeviceSynchronize());
      std::vector<float> t(reps);
      for (int k = 0; k < reps; ++k) {
        CK(cudaEventElapsedTime(&t[k], ev[2 * k], ev[2 * k + 1]));
        t[k] *= 1e3f;
      }
      std::sort(t.begin(), t.end());
      std::printf("%3zu MiB   %-36s %7.2f (%.2f)\n", mib, c.name, t[reps / 2], t[0]);
    }
  }
  return 0;
}
