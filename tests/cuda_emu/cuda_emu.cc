/* fuseport tests: the CPU emulation of the CUDA execution model (see
 * cuda_emu.h). */
#include "cuda_emu.h"

#include <atomic>
#include <barrier>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

namespace fpemu {

thread_local uint3 thread_idx, block_idx, block_dim, grid_dim;

namespace {

/* Shared memory each block gets: more than any emulated kernel declares. */
constexpr size_t kSharedBytes = 4096;

struct Warp {
  explicit Warp(std::ptrdiff_t n) : bar(n) {}
  std::barrier<> bar;
  unsigned slot[32] = {};
};

struct Block {
  Block(std::ptrdiff_t n, size_t dynamic_bytes)
      : bar(n), dynamic((dynamic_bytes + sizeof(float4) - 1) / sizeof(float4),
                        make_float4(NAN, NAN, NAN, NAN)) {}
  std::barrier<> bar;
  alignas(16) unsigned char shared[kSharedBytes] = {};
  std::vector<float4> dynamic;
  std::vector<std::unique_ptr<Warp>> warps;
};

struct Cluster {
  explicit Cluster(std::ptrdiff_t n) : bar(n) {}
  std::barrier<> bar;
  std::vector<std::unique_ptr<Block>> blocks;
};

thread_local Cluster *my_cluster;
thread_local Block *my_block;
thread_local Warp *my_warp;
thread_local unsigned my_rank;

struct Trapped {};

} // namespace

void syncthreads() { my_block->bar.arrive_and_wait(); }

int lane() { return (int)(thread_idx.x & 31u); }

unsigned shuffle(unsigned value, int src_lane, unsigned mask) {
  if (((mask >> lane()) & 1u) == 0 || src_lane < 0 || src_lane > 31 ||
      ((mask >> src_lane) & 1u) == 0)
    trap();
  my_warp->slot[lane()] = value;
  my_warp->bar.arrive_and_wait();
  const unsigned r = my_warp->slot[src_lane];
  my_warp->bar.arrive_and_wait(); /* nobody overwrites a slot still being read */
  return r;
}

void *block_shared(size_t bytes) {
  if (bytes > kSharedBytes)
    trap();
  return my_block->shared;
}

namespace {
std::atomic<unsigned long long> async_copy_count{0};
}

void async_copy16(void *smem, const void *gmem) {
  std::memcpy(smem, gmem, 16);
  async_copy_count.fetch_add(1, std::memory_order_relaxed);
}

unsigned long long async_copies() { return async_copy_count.load(); }

void *dynamic_shared() { return my_block->dynamic.data(); }
size_t dynamic_shared_bytes() { return my_block->dynamic.size() * sizeof(float4); }

void *shared_of_rank(const void *p, unsigned rank) {
  const unsigned char *q = static_cast<const unsigned char *>(p);
  const ptrdiff_t offset = q - my_block->shared;
  if (offset < 0 || (size_t)offset >= kSharedBytes || rank >= my_cluster->blocks.size())
    trap();
  return my_cluster->blocks[rank]->shared + offset;
}

unsigned cluster_rank() { return my_rank; }
unsigned cluster_size() { return (unsigned)my_cluster->blocks.size(); }
void cluster_sync() { my_cluster->bar.arrive_and_wait(); }

void trap() { throw Trapped(); }

bool launch(unsigned grid, unsigned block, unsigned cluster, const std::function<void()> &kernel,
            size_t dynamic_bytes) {
  if (block == 0 || block % 32 != 0 || cluster == 0 || grid % cluster != 0) {
    std::fprintf(stderr, "fpemu: bad launch (grid %u, block %u, cluster %u)\n", grid, block,
                 cluster);
    return false;
  }
  std::atomic<bool> trapped{false};
  for (unsigned first = 0; first < grid; first += cluster) {
    Cluster c((std::ptrdiff_t)cluster * block);
    for (unsigned b = 0; b < cluster; ++b) {
      c.blocks.push_back(std::make_unique<Block>((std::ptrdiff_t)block, dynamic_bytes));
      for (unsigned w = 0; w < block / 32; ++w)
        c.blocks.back()->warps.push_back(std::make_unique<Warp>(32));
    }
    std::vector<std::thread> threads;
    threads.reserve((size_t)cluster * block);
    for (unsigned b = 0; b < cluster; ++b)
      for (unsigned t = 0; t < block; ++t)
        threads.emplace_back([&, b, t] {
          thread_idx = make_uint3(t, 0, 0);
          block_idx = make_uint3(first + b, 0, 0);
          block_dim = make_uint3(block, 1, 1);
          grid_dim = make_uint3(grid, 1, 1);
          my_cluster = &c;
          my_block = c.blocks[b].get();
          my_warp = my_block->warps[t / 32].get();
          my_rank = b;
          try {
            kernel();
          } catch (const Trapped &) {
            trapped = true;
          }
          /* an exited thread no longer holds back any barrier */
          my_warp->bar.arrive_and_drop();
          my_block->bar.arrive_and_drop();
          c.bar.arrive_and_drop();
        });
    for (std::thread &th : threads)
      th.join();
  }
  return !trapped;
}

} // namespace fpemu
