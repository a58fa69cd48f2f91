/* fuseport CUDA kernels: the row helpers of device_common.cuh -- the split of
 * a row into head scalars, 16-byte vectors and tail scalars (RowSplit), the
 * teams that share a row (BlockTeam, WarpTeam, ClusterTeam), the register
 * caches of a team's part of a row (RowCache, cache_*), the staging of the
 * next row (RowStage, cp.async), the streaming build's rows in shared memory
 * (SmemRow), the row streams (row_stream, part_stream) and dispatch_cached.
 * The ROWS kernels build on them (reduce.cu and its reduce_rows.cuh,
 * horizontal.cu, prim.cu's row helpers); their builds' macros (FPCU_ROWS_*)
 * and registration (rows_tuning) stay in device_common.cuh.
 *
 * A part of device_common.cuh, not a header of its own: device_common.cuh
 * includes it once, inside namespace fpcu and its nvcc / FPCU_EMULATION
 * section, after the block reductions these helpers use and before
 * device_elem.cuh. Kernels include device_common.cuh.
 */
#ifndef FUSEPORT_CUDA_DEVICE_ROWS_CUH
#define FUSEPORT_CUDA_DEVICE_ROWS_CUH

/* ---- rows: head scalars, 16-byte vectors, tail scalars ------------------- */

/* A row of n floats at `row` splits into `head` (0..3) scalars up to the
 * first 16-byte boundary, nvec float4 and `tail` (0..3) scalars. Any row of
 * any N is thereby read with 128-bit loads; another array indexed like the
 * row (same row offset) shares the split when its base has the same
 * alignment modulo 16, which the kernels test (a cudaMalloc base always
 * does) and otherwise access with 32-bit operations. */
struct RowSplit {
  long long nvec;
  int head, tail;
};

__device__ __forceinline__ RowSplit row_split(const float *row, long long n) {
  RowSplit s;
  long long head = (long long)(((16u - (reinterpret_cast<uintptr_t>(row) & 15u)) & 15u) >> 2);
  if (head > n)
    head = n;
  s.head = (int)head;
  s.nvec = (n - head) >> 2;
  s.tail = (int)(n - head - (s.nvec << 2));
  return s;
}

/* Column of a tail element. */
__device__ __forceinline__ long long tail_col(const RowSplit &s, int t) {
  return s.head + (s.nvec << 2) + t;
}

/* ---- teams: the threads that share a row ------------------------------------
 * A team of size() threads (this one being rank()) holds a part of one row
 * at a time: vectors [v0, v0 + nv) of the row's split, plus the head and
 * tail scalars where it holds them. It reduces over the whole row with allreduce()
 * (every thread of every team of the row gets the same value), and one
 * thread of the row, leader(), writes per-row results. Three kinds:
 *   BlockTeam    the block holds the whole row (ROWS convention);
 *   WarpTeam     4, 16 or 32 lanes of a warp hold a whole row: short
 *                rows, several per warp or block;
 *   ClusterTeam  the C blocks of a thread-block cluster (sm_90) each hold a
 *                contiguous C-th of the row and exchange their partial
 *                results through distributed shared memory: a long row is
 *                spread over several SMs and still read once.
 * Every thread of a team must call allreduce() the same number of times. */
struct RowPart {
  RowSplit s;
  long long v0, nv; /* whole-row teams: 0 and s.nvec */
};

struct BlockTeam {
  static constexpr bool kWholeRow = true;
  __device__ __forceinline__ int rank() const { return threadIdx.x; }
  __device__ __forceinline__ int size() const { return blockDim.x; }
  __device__ __forceinline__ bool leader() const { return threadIdx.x == 0; }
  __device__ __forceinline__ long long first_row() const { return blockIdx.x; }
  __device__ __forceinline__ long long row_step() const { return gridDim.x; }
  __device__ __forceinline__ RowPart part(const RowSplit &s) const {
    RowPart p = {s, 0, s.nvec};
    return p;
  }
  template <class T, class Combine>
  __device__ __forceinline__ T allreduce(T v, T identity, Combine combine) const {
    return block_allreduce(v, identity, combine);
  }
};

/* 2^LG lanes (LG 2, 4 or 5: FP_ROWS_WARP_LANES_LOG2 of the row length,
 * cuda_plan.h, the rule the planner sizes the grid by). The width is a
 * template argument: with a width known only at run time, ptxas spilled
 * the warp builds under their register caps (16-44 bytes each), and rows of
 * 97-128 floats took 10-25% longer. */
template <int LG> struct WarpTeam {
  static constexpr bool kWholeRow = true;
  static constexpr int kLanes = 1 << LG;
  __device__ __forceinline__ int rank() const { return threadIdx.x & (kLanes - 1); }
  __device__ __forceinline__ int size() const { return kLanes; }
  __device__ __forceinline__ bool leader() const { return rank() == 0; }
  __device__ __forceinline__ long long first_row() const {
    return (long long)blockIdx.x * (blockDim.x >> LG) + (threadIdx.x >> LG);
  }
  __device__ __forceinline__ long long row_step() const {
    return (long long)gridDim.x * (blockDim.x >> LG);
  }
  __device__ __forceinline__ RowPart part(const RowSplit &s) const {
    RowPart p = {s, 0, s.nvec};
    return p;
  }
  template <class T, class Combine>
  __device__ __forceinline__ T allreduce(T v, T, Combine combine) const {
    return lanes_allreduce<LG>(v, combine);
  }
};

#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || defined(FPCU_EMULATION)
/* Thread-block clusters need sm_90; the cluster builds compile to a trap
 * elsewhere, and the planner only chooses them on sm_90 and later. */
#define FPCU_HAVE_CLUSTERS 1
struct ClusterTeam {
  static constexpr bool kWholeRow = false;
  unsigned rank_in_cluster, blocks; /* this block's rank; blocks per cluster */
  mutable int parity;               /* which exchange buffer is next */
  __device__ __forceinline__ int rank() const { return threadIdx.x; }
  __device__ __forceinline__ int size() const { return blockDim.x; }
  __device__ __forceinline__ bool leader() const {
    return rank_in_cluster == 0 && threadIdx.x == 0;
  }
  __device__ __forceinline__ long long first_row() const { return blockIdx.x / blocks; }
  __device__ __forceinline__ long long row_step() const { return gridDim.x / blocks; }
  /* Contiguous shares of ceil(nvec / blocks) vectors; the first block takes
   * the head scalars and the last the tail, the blocks whose shares they
   * border. */
  __device__ __forceinline__ RowPart part(const RowSplit &s) const {
    const long long share = (s.nvec + blocks - 1) / blocks;
    RowPart p;
    p.s = s;
    p.v0 = share * rank_in_cluster;
    p.nv = s.nvec - p.v0 < share ? s.nvec - p.v0 : share;
    if (p.nv < 0)
      p.nv = 0;
    return p;
  }
  __device__ __forceinline__ bool holds_head() const { return rank_in_cluster == 0; }
  __device__ __forceinline__ bool holds_tail() const { return rank_in_cluster == blocks - 1; }
  /* The block's value goes to one of two exchange buffers, alternately:
   * a block writes a buffer again two exchanges later, after the cluster
   * barrier of the exchange in between, which every block reaches only
   * once it has read this one. Thread 0 alone reads the C values from
   * distributed shared memory and combines them in rank order (so every
   * block gets the same bits), then broadcasts through `combined`: every
   * thread reading all C remote values (measured on an H100) made the
   * cluster builds slower than one block per row. `combined` is written
   * again in the next exchange only after its block_allreduce's barriers,
   * which every thread reaches after reading it here. Kernels end with
   * cluster_done(). */
  template <class T, class Combine>
  __device__ __forceinline__ T allreduce(T v, T identity, Combine combine) const {
    const T mine = block_allreduce(v, identity, combine);
    BlockScratch &scratch = block_scratch();
    T *buffer = reinterpret_cast<T *>(scratch.exchange[parity]);
    T *result = reinterpret_cast<T *>(scratch.combined);
    parity ^= 1;
    if (threadIdx.x == 0)
      *buffer = mine;
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    cluster.sync();
    if (threadIdx.x == 0) {
      T r = *cluster.map_shared_rank(buffer, 0);
      for (unsigned b = 1; b < blocks; ++b)
        r = combine(r, *cluster.map_shared_rank(buffer, b));
      *result = r;
    }
    __syncthreads();
    return *result;
  }
};
/* No block may exit while another can still read its shared memory. */
__device__ __forceinline__ void cluster_done() { cooperative_groups::this_cluster().sync(); }
#endif

/* Whether this team holds the row's head (tail) scalars: a whole-row team
 * always does; a cluster's first (last) block does. */
template <class Team> __device__ __forceinline__ bool holds_head(const Team &t) {
  if constexpr (Team::kWholeRow)
    return true;
  else
    return t.holds_head();
}
template <class Team> __device__ __forceinline__ bool holds_tail(const Team &t) {
  if constexpr (Team::kWholeRow)
    return true;
  else
    return t.holds_tail();
}

/* The head (tail) scalar this thread holds: element rank() of the row's
 * head (tail) when its team holds that end. */
template <class Team>
__device__ __forceinline__ bool has_head_elem(const Team &t, const RowPart &p) {
  return holds_head(t) && t.rank() < p.s.head;
}
template <class Team>
__device__ __forceinline__ bool has_tail_elem(const Team &t, const RowPart &p) {
  return holds_tail(t) && t.rank() < p.s.tail;
}

/* The part of a row one thread keeps in registers: the team's vectors
 * rank() + k*size() for k < K, plus a head and a tail element where it
 * holds them. Rows whose part has up to K*size() vectors are thereby read
 * from global memory exactly once. */
template <int K> struct RowCache {
  float4 v[K];
  float head, tail;
};

/* Index in the row's split of slot k of this thread, and whether the part
 * has it (K is unrolled, so the cache stays in registers). 32-bit: a cached
 * row has at most 8 * 8 * 1024 vectors (64-bit index math costs the
 * register pairs that made these kernels spill). */
template <class Team> __device__ __forceinline__ int slot_offset(const Team &t, int k) {
  return t.rank() + k * t.size();
}
template <class Team>
__device__ __forceinline__ bool slot_valid(const Team &t, const RowPart &p, int k) {
  if constexpr (Team::kWholeRow)
    return slot_offset(t, k) < p.s.nvec;
  else
    return slot_offset(t, k) < p.nv;
}
template <class Team>
__device__ __forceinline__ int slot_vector(const Team &t, const RowPart &p, int k) {
  if constexpr (Team::kWholeRow)
    return slot_offset(t, k);
  else
    return (int)p.v0 + slot_offset(t, k);
}

/* Loads this thread's part of a row split as p.s; vec: row + p.s.head is
 * 16-byte aligned (true for the row the split was computed from). All K
 * loads are issued before any is used. staged: the vectors come from a
 * RowStage that copied this row (wait() done), the head and tail from
 * global. */
template <int K, class Team>
__device__ __forceinline__ void cache_load(const Team &t, RowCache<K> &c, const float *row,
                                           const RowPart &p, bool vec,
                                           const float4 *staged = nullptr) {
  c.head = has_head_elem(t, p) ? __ldg(row + t.rank()) : 0.0f;
  const float *body = row + p.s.head;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (!slot_valid(t, p, k))
      c.v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    else if (staged != nullptr) /* a RowStage's slots: whole-row teams only */
      c.v[k] = staged[slot_offset(t, k)];
    else
      c.v[k] = ldg4_any(body + 4 * slot_vector(t, p, k), vec);
  }
  c.tail = has_tail_elem(t, p) ? __ldg(row + tail_col(p.s, t.rank())) : 0.0f;
}

/* f(float &) on every element this thread holds. */
template <int K, class Team, class F>
__device__ __forceinline__ void cache_for_each(const Team &t, RowCache<K> &c, const RowPart &p,
                                               F f) {
  if (has_head_elem(t, p))
    f(c.head);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (slot_valid(t, p, k)) {
      f(c.v[k].x);
      f(c.v[k].y);
      f(c.v[k].z);
      f(c.v[k].w);
    }
  }
  if (has_tail_elem(t, p))
    f(c.tail);
}

/* f(float &, float &) on the elements of two caches of the same part, in
 * lockstep. */
template <int K, class Team, class F>
__device__ __forceinline__ void cache_for_each2(const Team &t, RowCache<K> &a, RowCache<K> &b,
                                                const RowPart &p, F f) {
  if (has_head_elem(t, p))
    f(a.head, b.head);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (slot_valid(t, p, k)) {
      f(a.v[k].x, b.v[k].x);
      f(a.v[k].y, b.v[k].y);
      f(a.v[k].z, b.v[k].z);
      f(a.v[k].w, b.v[k].w);
    }
  }
  if (has_tail_elem(t, p))
    f(a.tail, b.tail);
}

/* Writes the cache to a row split like the one it was loaded from; vec:
 * out_row + p.s.head is 16-byte aligned. */
template <int K, class Team>
__device__ __forceinline__ void cache_store(const Team &t, const RowCache<K> &c, float *out_row,
                                            const RowPart &p, bool vec) {
  if (has_head_elem(t, p))
    out_row[t.rank()] = c.head;
  float *body = out_row + p.s.head;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (slot_valid(t, p, k))
      st4_any(body + 4 * slot_vector(t, p, k), c.v[k], vec);
  if (has_tail_elem(t, p))
    out_row[tail_col(p.s, t.rank())] = c.tail;
}

/* ---- staging the next row (long-row build) -----------------------------------
 * A block that caches whole rows works in phases: load the row, reduce it
 * (barriers, no memory traffic), write it. With one or two such blocks per
 * SM, memory idles during the reductions. A long-row build that stages
 * (double_softmax's; reduce.cu's kStage* say which) then runs as a
 * persistent grid (each block loops over many rows) and, while it reduces
 * row r, copies its slots of row r + row_step from global into dynamic
 * shared memory with cp.async (sm_80+, through L2 only): the load of the
 * next row overlaps the work on this one.
 *
 * Layout: staged row array a (0, or 1 for a kernel with two input rows,
 * as softmax_backward's row loop is written to stage), slot k
 * of thread t at stage[(a * kMaxK + k) * blockDim.x + t], the same slots as
 * RowCache (vector t + k * blockDim.x of the row's split). Each thread
 * copies and later reads only its own slots, so cp.async.wait_all is the
 * only synchronisation the data needs; a slot is overwritten by the next
 * copy only after the row's first team reduction, i.e. after its value has
 * been read into registers and used. The backend enables staging by
 * launching with dynamic shared memory for it (fp_cuda_stage_bytes), and
 * only for rows that every block caches (N <= 4 * kMaxK * blockDim.x). */
__device__ __forceinline__ unsigned dynamic_smem_bytes() {
#ifdef FPCU_EMULATION
  return (unsigned)fpemu::dynamic_shared_bytes();
#else
  unsigned r;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
#endif
}

__device__ __forceinline__ float4 *dynamic_smem_f4() {
#ifdef FPCU_EMULATION
  return static_cast<float4 *>(fpemu::dynamic_shared());
#else
  extern __shared__ float4 fpcu_dynamic_smem[];
  return fpcu_dynamic_smem;
#endif
}

/* 16 bytes global -> shared, asynchronously (gmem 16-byte aligned). */
__device__ __forceinline__ void cp_async16(float4 *smem, const float *gmem) {
#if defined(FPCU_EMULATION)
  fpemu::async_copy16(smem, gmem);
#elif __CUDA_ARCH__ >= 800
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#else
  *smem = ldg4(gmem);
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if !defined(FPCU_EMULATION) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cp_async_wait_all() {
#if !defined(FPCU_EMULATION) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

/* The staging area of a block-per-row build that caches up to kMaxK float4
 * per thread, for kRows row arrays (0: a kernel that never stages, the code
 * compiled out); off for other teams, when the launch gave too little
 * dynamic shared memory, or when a row might not fit the cache (the
 * backend's fp_cuda_stage_bytes keeps the same rule). Only a flag is kept:
 * the slots' address is the shared-memory symbol's, which costs no
 * register. */
template <int kMaxK, int kRows, class Team> struct RowStage {
  /* only the long-row build (a block, a cache of 4 or 8) can stage: the
   * code is compiled out of the others */
  static constexpr bool kCan = std::is_same<Team, BlockTeam>::value && kMaxK >= 4 && kRows > 0;
  bool enabled = false;

  __device__ __forceinline__ RowStage(const Team &, long long N) {
    if constexpr (kCan) {
      const long long need = (long long)kRows * kMaxK * 16 * blockDim.x;
      enabled = N <= 4LL * kMaxK * blockDim.x && (long long)dynamic_smem_bytes() >= need;
    }
  }
  __device__ __forceinline__ bool on() const { return kCan && enabled; }
  /* the slots of row array a, or nullptr (load from global) */
  __device__ __forceinline__ const float4 *slots(int a) const {
    return on() ? dynamic_smem_f4() + a * kMaxK * (int)blockDim.x : nullptr;
  }
  /* Starts copying this thread's slots of `row` (n floats, split by its own
   * alignment) into array a. */
  __device__ __forceinline__ void copy(int a, const float *row, long long n) const {
    if (!on())
      return;
    const RowSplit s = row_split(row, n);
    const float *body = row + s.head;
    float4 *dst = dynamic_smem_f4() + a * kMaxK * (int)blockDim.x + threadIdx.x;
#pragma unroll
    for (int k = 0; k < kMaxK; ++k) {
      const int v = (int)threadIdx.x + k * (int)blockDim.x;
      if (v < s.nvec)
        cp_async16(dst + k * blockDim.x, body + 4 * v);
    }
  }
  __device__ __forceinline__ void commit() const {
    if (on())
      cp_async_commit();
  }
  __device__ __forceinline__ void wait() const {
    if (on())
      cp_async_wait_all();
  }
};

/* ---- the streaming build's rows in shared memory -----------------------------
 * The streaming build holds no register cache, so every pass after a row's
 * first rereads it: from L1 while the row fits there (up to about 128 KiB,
 * N = 32768), beyond that from L2 at best. Launched with dynamic shared
 * memory (the backend gives it up to the whole row for rows longer than
 * that, fp_cuda_stream_smem_bytes in cuda_plan.h), its first pass also
 * keeps vectors 0 .. cap-1 of the row's split there and the later passes
 * read them from it: only the rest of a row longer than the shared memory
 * (on an H100, 227 KiB: beyond 58000 floats) is reread from global memory.
 *
 * Slot v holds vector v. A slot is written by the thread that streams
 * vector v in the first (forward) pass and read by whichever thread visits
 * v later (a backward pass visits the vectors in another order): the team
 * reduction between the first pass and the next (block_allreduce, barriers)
 * orders the two. The constructor's barrier keeps a row's first pass from
 * overwriting slots that a slower thread still reads for the block's
 * previous row. kOn false (every other build): no code, no barrier. */
template <bool kOn> struct SmemRow {
  long long cap = 0; /* vectors kept; the same in every thread */

  __device__ __forceinline__ explicit SmemRow(long long nvec) {
    if constexpr (kOn) {
      const long long have = (long long)(dynamic_smem_bytes() / 16u);
      cap = nvec < have ? nvec : have;
      if (cap > 0)
        __syncthreads();
    }
  }
  __device__ __forceinline__ void keep(long long v, float4 x) const {
    if constexpr (kOn) {
      if (v < cap)
        dynamic_smem_f4()[v] = x;
    }
  }
  /* vector v, from shared memory if kept, else global(v) */
  template <class Global> __device__ __forceinline__ float4 load(long long v, Global global) const {
    if constexpr (kOn) {
      if (v < cap)
        return dynamic_smem_f4()[v];
    }
    return global(v);
  }
  /* the same for a row whose vectors load with ldg4 from body */
  __device__ __forceinline__ float4 load(long long v, const float *body) const {
    return load(v, [=](long long u) { return ldg4(body + 4 * u); });
  }
};

/* Streams a row through the block with U vector loads in flight per thread:
 * scalar(col) for the head and tail elements, load_vec(v)/use_vec(v, item)
 * for vector v (columns s.head + 4v .. +3). kBackward visits the vectors
 * from the end of the row (still coalesced: a warp reads 32 consecutive
 * vectors, in descending order): a pass that rereads a row it has just
 * streamed then starts with the part most likely still in L2. Block teams
 * only (rows longer than any cache). */
template <int U, bool kBackward = false, class Scalar, class LoadV, class UseV>
__device__ __forceinline__ void row_stream(const RowSplit &s, Scalar scalar, LoadV load_vec,
                                           UseV use_vec) {
  const int t = threadIdx.x;
  if (t < s.head)
    scalar((long long)t);
  if constexpr (kBackward) {
    const long long last = s.nvec - 1;
    strided_unrolled<U>(
        t, s.nvec, blockDim.x, [&](long long i) { return load_vec(last - i); },
        [&](long long i, const auto &item) { use_vec(last - i, item); });
  } else {
    strided_unrolled<U>(t, s.nvec, blockDim.x, load_vec, use_vec);
  }
  if (t < s.tail)
    scalar(tail_col(s, t));
}

/* Streams a team's part of a row with U vector loads in flight per thread:
 * scalar(col) for the head and tail elements the thread holds,
 * load_vec(v)/use_vec(v, item) for its vectors v (columns s.head + 4v ..
 * +3, v an index in the row's split), in increasing order. */
template <int U, class Team, class Scalar, class LoadV, class UseV>
__device__ __forceinline__ void part_stream(const Team &t, const RowPart &p, Scalar scalar,
                                            LoadV load_vec, UseV use_vec) {
  if (has_head_elem(t, p))
    scalar((long long)t.rank());
  strided_unrolled<U>(p.v0 + t.rank(), p.v0 + p.nv, t.size(), load_vec, use_vec);
  if (has_tail_elem(t, p))
    scalar(tail_col(p.s, t.rank()));
}

/* ---- the cluster build's cache in shared memory --------------------------------
 * A cluster's blocks hold at most 4 float4 per thread in registers (C * 4096
 * float4 in blocks of 1024 threads: 131072 floats at C = 8, 262144 at 16).
 * For a longer row, or for a cluster narrower than that where it fills the
 * GPU in one wave and a wider one would not, the cluster build keeps its
 * part in dynamic shared memory instead (up to 227 KiB a block on an H100:
 * 58112 floats, 464896 per cluster of 8): the same row functions, written
 * over RowCache, on a RowCache<kSmemCache> whose slot k of thread t lies at
 * region[k * size() + t] of the row array's region. The backend gives the
 * launch that memory (fp_cuda_cluster_smem_bytes in cuda_plan.h); the part
 * is copied in with cp.async (each thread its own slots, so the wait alone
 * orders them; a row's copy overwrites only the thread's own slots of the
 * row before) and never read from global memory again. */
constexpr int kSmemCache = 0;

template <> struct RowCache<kSmemCache> {
  float4 *v; /* this thread's slot 0; slot k at v[k * size()] */
  int slots; /* slots per thread: ceil(part's vectors / size()) */
  float head, tail;
};

/* Slots of one row array per thread, times the team's size: the float4 a
 * block's region of shared memory holds. */
template <class Team>
__device__ __forceinline__ long long smem_cache_vectors(const Team &t, const RowPart &p) {
  return (p.nv + t.size() - 1) / t.size() * t.size();
}

/* Loads the part into the region (its first slot: `region`, a row array's
 * region of dynamic shared memory, cache_slots below). vec: as for the
 * register cache; a misaligned row is copied through registers. */
template <class Team>
__device__ __forceinline__ void cache_load(const Team &t, RowCache<kSmemCache> &c, const float *row,
                                           const RowPart &p, bool vec, const float4 *region) {
  c.v = const_cast<float4 *>(region) + t.rank();
  c.slots = (int)((p.nv + t.size() - 1) / t.size());
  c.head = has_head_elem(t, p) ? __ldg(row + t.rank()) : 0.0f;
  const float *body = row + p.s.head;
  for (int k = 0; k < c.slots; ++k) {
    if (!slot_valid(t, p, k))
      break;
    const float *src = body + 4 * slot_vector(t, p, k);
    if (vec)
      cp_async16(c.v + k * t.size(), src);
    else
      c.v[k * t.size()] = ldg4_any(src, false);
  }
  cp_async_commit();
  cp_async_wait_all();
  c.tail = has_tail_elem(t, p) ? __ldg(row + tail_col(p.s, t.rank())) : 0.0f;
}

/* f(k, float4 &) on each vector slot k the part has, in registers or in
 * shared memory. */
template <int K, class Team, class F>
__device__ __forceinline__ void cache_for_each_vector(const Team &t, RowCache<K> &c,
                                                      const RowPart &p, F f) {
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (slot_valid(t, p, k))
      f(k, c.v[k]);
}
template <class Team, class F>
__device__ __forceinline__ void cache_for_each_vector(const Team &t, RowCache<kSmemCache> &c,
                                                      const RowPart &p, F f) {
  for (int k = 0; k < c.slots && slot_valid(t, p, k); ++k)
    f(k, c.v[k * t.size()]);
}

template <class Team, class F>
__device__ __forceinline__ void cache_for_each(const Team &t, RowCache<kSmemCache> &c,
                                               const RowPart &p, F f) {
  if (has_head_elem(t, p))
    f(c.head);
  cache_for_each_vector(t, c, p, [&](int, float4 &v) {
    f(v.x);
    f(v.y);
    f(v.z);
    f(v.w);
  });
  if (has_tail_elem(t, p))
    f(c.tail);
}

template <class Team, class F>
__device__ __forceinline__ void cache_for_each2(const Team &t, RowCache<kSmemCache> &a,
                                                RowCache<kSmemCache> &b, const RowPart &p, F f) {
  if (has_head_elem(t, p))
    f(a.head, b.head);
  cache_for_each_vector(t, a, p, [&](int k, float4 &v) {
    float4 &w = b.v[k * t.size()];
    f(v.x, w.x);
    f(v.y, w.y);
    f(v.z, w.z);
    f(v.w, w.w);
  });
  if (has_tail_elem(t, p))
    f(a.tail, b.tail);
}

template <class Team>
__device__ __forceinline__ void cache_store(const Team &t, RowCache<kSmemCache> &c, float *out_row,
                                            const RowPart &p, bool vec) {
  if (has_head_elem(t, p))
    out_row[t.rank()] = c.head;
  float *body = out_row + p.s.head;
  cache_for_each_vector(
      t, c, p, [&](int k, float4 &v) { st4_any(body + 4 * slot_vector(t, p, k), v, vec); });
  if (has_tail_elem(t, p))
    out_row[tail_col(p.s, t.rank())] = c.tail;
}

/* Calls body(std::integral_constant<int, K>()) with the smallest K in
 * {1, 2, 4, 8} (K <= kMaxK) whose cache holds nv vectors per thread of a
 * team of `size`; false when none does (the caller streams the row
 * instead). The branch is uniform over the team. */
template <int kMaxK, class Body>
__device__ __forceinline__ bool dispatch_cached(long long nv, int size, Body &&body) {
  const long long L = size;
  if (nv <= L) {
    body(std::integral_constant<int, 1>());
    return true;
  }
  if constexpr (kMaxK >= 2) {
    if (nv <= 2 * L) {
      body(std::integral_constant<int, 2>());
      return true;
    }
  }
  if constexpr (kMaxK >= 4) {
    if (nv <= 4 * L) {
      body(std::integral_constant<int, 4>());
      return true;
    }
  }
  if constexpr (kMaxK >= 8) {
    if (nv <= 8 * L) {
      body(std::integral_constant<int, 8>());
      return true;
    }
  }
  return false;
}

/* dispatch_cached over the team's part, and where no register cache holds
 * it, for a cluster team, the shared-memory cache (K = kSmemCache) when the
 * launch's dynamic shared memory holds kArrays row arrays of the part (the
 * planner gave it that, fp_cuda_cluster_smem_bytes); false otherwise. The
 * blocks of a cluster may take different caches (the last one's part can be
 * shorter): each makes the same team reductions either way. */
template <int kMaxK, int kArrays, class Team, class Body>
__device__ __forceinline__ bool dispatch_team_cache(const Team &t, const RowPart &p, Body &&body) {
  if (dispatch_cached<kMaxK>(p.nv, t.size(), body))
    return true;
  if constexpr (!Team::kWholeRow) {
    if (kArrays * smem_cache_vectors(t, p) * 16 <= (long long)dynamic_smem_bytes()) {
      /* Inlined, its loops make ptxas spill a few words in the cluster
       * builds of softmax_backward and norm_chain (44 and 12 bytes of
       * loads); a __noinline__ call instead took every cluster launch
       * 1.4-2.5x longer on an H200 (the captured row state then lives in
       * local memory), so it stays inline. */
      body(std::integral_constant<int, kSmemCache>());
      return true;
    }
  }
  return false;
}

/* What a row function's cache of depth K is given for row array a: the
 * stage's slots for a register cache (nullptr where it does not stage), the
 * array's region of dynamic shared memory for the shared-memory cache. */
template <int K, class Stage, class Team>
__device__ __forceinline__ const float4 *cache_slots(std::integral_constant<int, K>,
                                                     const Stage &stage, const Team &t,
                                                     const RowPart &p, int a) {
  if constexpr (K == kSmemCache)
    return dynamic_smem_f4() + a * smem_cache_vectors(t, p);
  else
    return stage.slots(a);
}

#endif
