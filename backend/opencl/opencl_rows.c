/* fuseport OpenCL backend: the launch planner of the ROWS kernels
 * (opencl_rows.h). */
#include <stdio.h>

#include "opencl_rows.h"

/* The rule. kernels.def: a ROWS kernel's result never depends on the geometry, so the
 * backend may launch the fused row kernels of kernels/cl/reduce*.cl and
 * horizontal.cl with a geometry of its own. Those kernels split a group of L
 * into teams of T work-items, one row per team (common.cl, fp_team_of): T is
 * the smallest power of two >= FP_CL_MIN_TEAM for which each work-item has
 * at most FP_ROW_VEC float4 vectors of the row, capped at L; a row fits
 * the register cache (read from global memory once) when
 * floor(N/4) <= T * FP_ROW_VEC. FP_ROW_VEC is the backend's row_vec
 * (FUSEPORT_OPENCL_ROW_VEC, default 4), passed to every build as -D.
 * The host asks for L = pow2_ceil(N/16) in [32, 1024] and one group per row
 * (ops/primitives.c, fp_rows_range). The plan instead:
 *   - T = that team size for N with L unbounded, capped at 256 (512 for
 *     softmax_backward; FUSEPORT_OPENCL_ROWS_MAX_GROUP overrides; less
 *     where the device is smaller): rows of up to 256 * 4 * 4 = 4096
 *     floats (8192) are cached; longer rows stream, with
 *     L = N / 64 within [256, 1024] (16 float4 per work-item and pass),
 *     at least 512 for the row kernels' rows of more than 8192 floats
 *     (1024 for softmax_backward; FUSEPORT_OPENCL_STREAM_GROUP overrides).
 *     Groups of 512 against 256 (and against norm_chain's and
 *     double_softmax's former teams of 1024 caching 4096 or more rows of
 *     8193..16384 floats), on an H100 (NVIDIA OpenCL, 2026-11-25, three
 *     alternating rounds, 120e041:docs/results/2026-11-25-h100-series/r43-cl-groups/),
 *     at 512-16384 rows of 10240-16384 floats: double_softmax 1.05-1.64x
 *     (16384 x 16384 1252 -> 844 us), norm_chain 1.13-1.51x, softmax
 *     1.09-1.31x, layernorm 1.03-1.35x (16384 x 16384 1059 -> 787);
 *     softmax_backward lost up to 30% and keeps its own rule.
 *     Measured on an H200 (NVIDIA OpenCL, 2026-11-23, docs/PERF.md), CUDA
 *     time over OpenCL time: a 256-wide streaming group beat a cached
 *     1024-wide team at N = 8192 and 16384 (softmax 0.71 -> 1.01 at
 *     8192 x 8192, layernorm 0.59 -> 0.91 and hreduce_reduce 0.46 -> 0.95 at
 *     4096 x 16384), 512 was best at N = 32768 and 1024 at 65536 (a few long
 *     rows need the widest groups); per kernel:
 *       softmax_backward, which holds two rows and streams them twice,
 *       lost with the narrower groups (0.83 -> 0.61 at 4096 x 16384) and
 *       keeps 1024-wide streaming, and a cache up to a team of 512: with
 *       the team reductions of 9eed3a9, on an H100 (2026-11-24, two rounds,
 *       FUSEPORT_OPENCL_ROWS_MAX_GROUP=512 against 1024) streaming rows of
 *       16384 took 0.87-0.95 of the time of caching them (4096 x 16384
 *       291.6 -> 276.8 us, 128 x 16384 19.2 -> 16.8), rows of 8192 the same;
 *       norm_chain and double_softmax, in the same measurement, cached rows
 *       of 16384 in teams of 1024 faster than they streamed them where
 *       there are many (norm_chain 4096 x 16384 269.7 -> 237.1 us, 16384 x
 *       16384 1060 -> 911; double_softmax 333 -> 323 and 1338 -> 1250), but
 *       slower with 128-512 rows (double_softmax 512 x 16384 45.8 -> 51.9),
 *       and rows of 8192 in teams of 512 slower everywhere (4096 x 8192:
 *       norm_chain 96.0 -> 101.0, double_softmax 120.0 -> 128.1); softmax
 *       gained 1.6% at 16384 x 16384 only and layernorm lost everywhere;
 *       layernorm, whose cached kernel still spills (104 bytes at
 *       FP_ROW_VEC 4), caches rows of up to 64 floats only (a team of
 *       FP_CL_MIN_TEAM) and streams the rest: on an H200 a cap of 1024
 *       floats took 4096 x 4096 and 8192 x 4096 from 0.63 to 0.77, and on
 *       an H100 (2026-11-23, clcap_*.json) streaming rows of 128 to 1024
 *       floats took them from 0.67-0.80 to 0.86-1.09 (65536 x 1024: 0.69
 *       -> 0.94); the two reads then mostly hit L2;
 *       the horizontal kernels, which hold no row, size their teams with
 *       FP_HREDUCE_VEC = 8 float4 per work-item, so rows of up to 8192
 *       floats go to teams of up to 256 (their "cached" case below only
 *       sizes teams: they have one kernel, which streams);
 *   - cached: L = max(T, FP_CL_ROWS_GROUP): short rows share a group, L / T
 *     rows per group (a row of 128 is a team of 8, 32 rows per group of
 *     256), where the host's geometry gives each a 32-wide group, mostly
 *     idle, and the H100's limit of 32 resident groups per SM then caps it
 *     at half its threads (docs/PERF.md);
 *   - groups: enough for every row at L / T rows per group, at most 2^20 as
 *     the host's (larger M loops inside the kernel);
 *   - streamed rows with one row per group (T = L) whose body fits
 *     lcache but is not short, FP_CL_LOCAL_ROW_MIN_VEC <= N/4 <=
 *     FP_LOCAL_ROW_VEC = 2048 vectors (rows of 6148 to 8195 floats), take
 *     the _local kernel where the program has one (softmax, norm_chain):
 *     the row is read from global memory once, its later passes read
 *     local memory. The kernel checks the upper bound (fp_rows_local) and
 *     otherwise re-reads global memory. Measured on an H100 against
 *     _stream (FUSEPORT_OPENCL_ROW_LOCAL=0, docs/PERF.md): rows of 8192,
 *     1024 to 16384 of them, 5-12% faster; rows of 5000 and 6000 4-8%
 *     slower, hence the lower bound; double_softmax (exp-bound) within
 *     +-4%, and layernorm, whose _local kernel spills under the
 *     64-register cap, 10-20% slower, so their programs have none.
 * Measured on an H200 (docs/PERF.md): planned teams cached rows once, but
 * the generic kernels, which hold the cache and the streaming loop at
 * once, spilled under the 64-register cap and ran at 0.5-0.65 of CUDA;
 * hence the specialisations. */
/* The rule mirrors fp_team_of of common.cl: the kernel derives its team
 * from N and L alone, so a _cached launch is only planned where that team
 * fits the row (the kernel would otherwise write nothing), a _local one
 * only where it is the whole group (the kernel would otherwise re-read
 * global memory). The host's geometry (FUSEPORT_OPENCL_HOST_GEOMETRY, or
 * a launch the planner does not recognise) keeps the generic kernel.
 *
 * Then the local memory: a kernel whose static __local arrays exceed what
 * the device reports (CL_DEVICE_LOCAL_MEM_SIZE) cannot launch
 * (CL_OUT_OF_RESOURCES), and what a kernel takes is the driver's to say
 * (CL_KERNEL_LOCAL_MEM_SIZE: Oclgrind 21.10, for one, also counts the
 * arrays of every kernel whose name the kernel's name begins, so that
 * layernorm_fused_stream takes _stream_back's 20 KiB too). The choice falls
 * back along kernels that are right for the same geometry: _cached to the
 * generic kernel (which takes the cached path where the team holds the
 * row), then to the streaming ones (any geometry); a streaming kernel to
 * its sibling of the other output order, then to the generic kernel; the
 * generic kernel to the streaming ones. */

static int64_t pow2_floor_1024(uint32_t n) {
  int64_t p = 1;
  while (2 * p <= n && 2 * p <= 1024)
    p *= 2;
  return p;
}

/* The planned geometry and kernel before the local-memory check; false
 * where the launch keeps the host's. */
static bool plan_geometry(const ocl_rows_config *cfg, const ocl_rows_request *rq, size_t *global,
                          size_t *local, ocl_row_kernel *kernel) {
  const int64_t M = rq->M, N = rq->N;
  const int64_t max_local = pow2_floor_1024(cfg->max_group);
  if (cfg->host_geometry || !rq->planned || M <= 0 || N < 0 || max_local < 32)
    return false;
  /* the per-kernel exceptions of the rule above */
  const bool wide = rq->kind == OCL_ROWS_WIDE;
  const bool horizontal = rq->kind == OCL_ROWS_HORIZONTAL;
  int64_t cache_cap = FP_CL_CACHE_TEAM;
  if (cfg->rows_max_group != 0)
    cache_cap = cfg->rows_max_group;
  else if (wide)
    cache_cap = 512;
  else if (rq->kind == OCL_ROWS_LAYERNORM)
    cache_cap = FP_CL_MIN_TEAM;
  if (cache_cap > max_local)
    cache_cap = max_local;
  const int64_t vec = horizontal ? FP_CL_HREDUCE_VEC : cfg->row_vec;
  const int64_t need = ((N / 4) + vec - 1) / vec;
  int64_t team = FP_CL_MIN_TEAM;
  while (team < need && team < cache_cap)
    team *= 2;
  const bool cached = N / 4 <= team * vec;
  int64_t group;
  if (cached) {
    group = FP_CL_ROWS_GROUP < max_local ? FP_CL_ROWS_GROUP : max_local;
    if (team > group)
      group = team;
  } else {
    if (cfg->stream_group != 0) {
      group = cfg->stream_group;
    } else if (wide) {
      group = 1024;
    } else {
      /* FP_CL_STREAM_VECTORS per work-item, within [256, 1024]; from 512
       * for the row kernels' rows of more than 8192 floats */
      group = !horizontal && N > 8192 ? 512 : 256;
      while (group < 1024 && group * 4 * FP_CL_STREAM_VECTORS < N)
        group *= 2;
    }
    if (group > max_local)
      group = max_local;
    team = FP_CL_MIN_TEAM; /* fp_team_of's team for this group */
    while (team < need && team < group)
      team *= 2;
  }
  const uint64_t rows_per_group = (uint64_t)(group / team);
  uint64_t groups = ((uint64_t)M + rows_per_group - 1) / rows_per_group;
  if (groups > FP_CL_ROWS_MAX_GROUPS)
    groups = FP_CL_ROWS_MAX_GROUPS;
  *local = (size_t)group;
  *global = (size_t)(groups * (uint64_t)group);
  const int64_t *have = rq->local_bytes;
  ocl_row_kernel v = cached ? OCL_ROW_CACHED : OCL_ROW_STREAM;
  /* the body of a row has at most N/4 vectors, whatever its alignment */
  if (!cached && team == group && N / 4 >= FP_CL_LOCAL_ROW_MIN_VEC &&
      N / 4 <= FP_CL_LOCAL_ROW_VEC && cfg->row_local && cfg->local_rows_fit &&
      have[OCL_ROW_LOCAL] >= 0)
    v = OCL_ROW_LOCAL;
  if (v == OCL_ROW_STREAM && N >= FP_CL_STREAM_BACK_MIN_N && cfg->stream_back) {
    if (team == group && cfg->row_local && cfg->local_rows_fit && have[OCL_ROW_LOCAL_BACK] >= 0)
      v = OCL_ROW_LOCAL_BACK;
    else if (have[OCL_ROW_STREAM_BACK] >= 0)
      v = OCL_ROW_STREAM_BACK;
  }
  *kernel = cfg->generic_rows || have[v] < 0 ? OCL_ROW_GENERIC : v;
  return true;
}

/* Kernels right for the geometry of a launch planned for `first`, best
 * first; OCL_ROW_KERNELS ends a list. */
static const ocl_row_kernel fallbacks[OCL_ROW_KERNELS][4] = {
    [OCL_ROW_CACHED] = {OCL_ROW_CACHED, OCL_ROW_GENERIC, OCL_ROW_STREAM, OCL_ROW_STREAM_BACK},
    [OCL_ROW_STREAM] = {OCL_ROW_STREAM, OCL_ROW_STREAM_BACK, OCL_ROW_GENERIC, OCL_ROW_KERNELS},
    [OCL_ROW_LOCAL] = {OCL_ROW_LOCAL, OCL_ROW_STREAM, OCL_ROW_STREAM_BACK, OCL_ROW_GENERIC},
    [OCL_ROW_STREAM_BACK] = {OCL_ROW_STREAM_BACK, OCL_ROW_STREAM, OCL_ROW_GENERIC, OCL_ROW_KERNELS},
    [OCL_ROW_LOCAL_BACK] = {OCL_ROW_LOCAL_BACK, OCL_ROW_STREAM_BACK, OCL_ROW_STREAM,
                            OCL_ROW_GENERIC},
    [OCL_ROW_GENERIC] = {OCL_ROW_GENERIC, OCL_ROW_STREAM, OCL_ROW_STREAM_BACK, OCL_ROW_KERNELS},
};

const char *ocl_row_kernel_suffix(ocl_row_kernel k) {
  static const char *const suffixes[OCL_ROW_KERNELS] = {"_cached",      "_stream",     "_local",
                                                        "_stream_back", "_local_back", ""};
  return (unsigned)k < OCL_ROW_KERNELS ? suffixes[k] : "?";
}

bool ocl_rows_plan(const ocl_rows_config *cfg, const ocl_rows_request *rq, ocl_rows_launch *out,
                   char *why, size_t cap) {
  out->global = rq->global;
  out->local = rq->local;
  out->kernel = OCL_ROW_GENERIC;
  plan_geometry(cfg, rq, &out->global, &out->local, &out->kernel);
  const ocl_row_kernel *order = fallbacks[out->kernel];
  for (int k = 0; k < 4 && order[k] != OCL_ROW_KERNELS; ++k) {
    const int64_t bytes = rq->local_bytes[order[k]];
    if (bytes >= 0 && (uint64_t)bytes <= cfg->device_local) {
      out->kernel = order[k];
      return true;
    }
  }
  if (cap > 0) {
    int used = snprintf(why, cap,
                        "no kernel of the operator fits the device's %llu bytes of "
                        "local memory for this launch (needed:",
                        (unsigned long long)cfg->device_local);
    for (int k = 0; k < 4 && order[k] != OCL_ROW_KERNELS && used >= 0 && (size_t)used < cap; ++k) {
      const int64_t bytes = rq->local_bytes[order[k]];
      const char *suffix = ocl_row_kernel_suffix(order[k]);
      used += bytes < 0 ? snprintf(why + used, cap - (size_t)used, " %s absent",
                                   *suffix != '\0' ? suffix : "generic")
                        : snprintf(why + used, cap - (size_t)used, " %s %lld",
                                   *suffix != '\0' ? suffix : "generic", (long long)bytes);
    }
    if (used >= 0 && (size_t)used < cap)
      snprintf(why + used, cap - (size_t)used, ")");
  }
  return false;
}
