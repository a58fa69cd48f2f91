/* fuseport GEMM core, path SM90: the host side of gemm_sm90.cu -- the tensor
 * maps (encode_b), the argument checks (kMaxCoord, operand_ok, dtype_ok,
 * device_info: compute capability 9.0 and the SM count), the kernels'
 * shared-memory opt-in, once per device (KernelOnce, prepare), the GEMM and
 * gemm2 launches (launch_gemm, run_row, launch_gemm2, run2_row),
 * the compile-time check of gemm_sm90_configs.h's rows (row_ok) and the
 * kernel stubs (StubList, stubs_*). The exports that use them (sm90_run,
 * sm90_run2, sm90_kernel_stubs) are at the end of gemm_sm90.cu.
 *
 * A part of gemm_sm90.cu, not a header of its own: gemm_sm90.cu includes it
 * once, at the end of namespace fpgemm's anonymous namespace, after the
 * kernels.
 */
#ifndef FUSEPORT_GEMM_SM90_HOST_CUH
#define FUSEPORT_GEMM_SM90_HOST_CUH

/* ---- host: tensor maps -------------------------------------------------------------------- */

/* The B operand's map: [nb, K] K-major boxes of [BN / 2 rows, 64 k], or
 * [K, nb] MN-major boxes of [64 k, 64 n] (BTile). */
cudaError_t encode_b(CUtensorMap *map, int dtype, const void *b, bool trans_b, long long k,
                     long long nb, long long ldb, int bn) {
  return trans_b ? encode_2d(map, dtype, b, k, nb, ldb, kBK, bn / 2)
                 : encode_2d(map, dtype, b, nb, k, ldb, 64, kBK);
}

/* ---- host: checks ---------------------------------------------------------------------- */

constexpr long long kMaxCoord = INT_MAX - 1024; /* TMA coordinates and our indices are int */

bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/* A 16-bit operand TMA can read: 16-byte aligned start and rows, ld >= the
 * row length. */
bool operand_ok(const void *p, long long ld, long long row_len) {
  return p != nullptr && aligned16(p) && ld >= row_len && (ld * 2) % 16 == 0 && ld <= kMaxCoord;
}

bool dtype_ok(int dtype) {
  return dtype == Storage<__half>::kDtype || dtype == Storage<__nv_bfloat16>::kDtype;
}

/* The device runs sm_90a code (compute capability 9.0 exactly); SM count. */
cudaError_t device_info(int *sms) {
  int dev = 0, major = 0, minor = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess && (major != 9 || minor != 0))
    e = cudaErrorNoKernelImageForDevice;
  return e;
}

/* Per kernel instantiation and device: the shared-memory opt-in (set once)
 * and, for clusters, how many clusters fit at once (asked once). */
template <class Kernel> struct KernelOnce {
  static constexpr int kMaxDev = 64;
  std::atomic<int> smem_set[kMaxDev] = {};
  std::atomic<int> max_clusters[kMaxDev] = {};
};

template <class Kernel>
cudaError_t prepare(KernelOnce<Kernel> &once, Kernel kernel, int smem_bytes) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess)
    return e;
  if (dev < KernelOnce<Kernel>::kMaxDev && once.smem_set[dev].load(std::memory_order_acquire))
    return cudaSuccess;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e == cudaSuccess && dev < KernelOnce<Kernel>::kMaxDev)
    once.smem_set[dev].store(1, std::memory_order_release);
  return e;
}

/* ---- host: the GEMM launch ----------------------------------------------------------------- */

template <class T, class Epi, int BN, int STAGES, int CL, bool kSplit, bool kTransB,
          bool kIm2col = false, bool kSwap = false>
cudaError_t launch_gemm(const Problem &p, int split_k, cudaStream_t stream) {
  constexpr int kOutC = kSwap ? (BN + 63) / 64 * 64 : Epi::kPaired ? BN / 2 : BN;
  constexpr int kSmem = Smem<BN, STAGES, kOutC>::kBytes;
  auto kernel = gemm_kernel<T, Epi, BN, STAGES, CL, kSplit, kTransB, kIm2col, kSwap>;
  static KernelOnce<decltype(kernel)> once;

  int sms = 0;
  cudaError_t e = device_info(&sms);
  if (e != cudaSuccess)
    return e;
  const long long nb = Epi::kPaired ? 2 * p.N : p.N;
  /* paired with B [K, 2N] row-major and N % 8 != 0: the shifted layout */
  const bool shifted = Epi::kPaired && !p.trans_b && (p.N & 7) != 0;
  const int out_cols = !Epi::kPaired ? BN : shifted ? BN / 2 - 8 : BN / 2;
  GemmArgs<T, Epi> args;
  args.ep = EpiParamsOf<T, Epi>::make(p);
  args.out = static_cast<T *>(p.out);
  args.ws = p.ws;
  /* swapped: the kernel's rows are out's columns (B's rows), its columns out's rows (A's) */
  const long long km = kSwap ? p.N : p.M, kn = kSwap ? p.M : p.N;
  args.M = static_cast<int>(km);
  args.N = static_cast<int>(kn);
  args.NB = static_cast<int>(kSwap ? kn : nb);
  args.out_cols = out_cols;
  args.shift = shifted ? static_cast<int>(p.N & 7) : 0;
  /* TMA stores need 16-byte aligned rows: out aligned and N a multiple of 8 */
  args.tma_store = aligned16(p.out) && (p.N & 7) == 0;
  args.add_tma = args.tma_store && FP_EPI_READS_ADD(p.epilogue) && aligned16(p.add);

  Sched &sc = args.sched;
  sc.mtiles = static_cast<int>((km + kBM - 1) / kBM);
  sc.ntiles = static_cast<int>((kn + out_cols - 1) / out_cols);
  sc.split_k = split_k;
  sc.kblocks = static_cast<int>((p.K + kBK - 1) / kBK);
  sc.group_m = kGroupM;
#ifdef FP_SM90_LAB
  if (g_sm90_lab_group_m >= CL)
    sc.group_m = g_sm90_lab_group_m;
#endif
  args.tiles = sc.mtiles * sc.ntiles;
  if (shifted && split_k > 1 && p.ws != nullptr) {
    /* The narrower shifted tiles outnumber those the workspace was sized
     * for (ceil(2N / BN) per row of tiles): fewer splits, same result. */
    while (split_k > 1 &&
           p.ws_bytes < split_workspace_bytes(static_cast<long long>(sc.mtiles) * sc.ntiles,
                                              split_k, kBM, BN))
      --split_k;
    sc.split_k = split_k;
  }
  const long long mpairs = (sc.mtiles + CL - 1) / CL;
  const long long units = mpairs * sc.ntiles * split_k; /* split_k as adjusted above */
  if (static_cast<long long>(sc.mtiles) * sc.ntiles > kMaxCoord || units > kMaxCoord ||
      static_cast<long long>(split_k) * sc.kblocks > kMaxCoord) /* the decode's k-block range */
    return cudaErrorInvalidValue;
  sc.units = static_cast<int>(units);
  sc.prepare(CL);
  /* swapped and split: in one wave (a unit a block, all resident: a cooperative launch) every
   * block of a tile sums and stores BN / split_k of its columns (split_reduce_share); else the
   * last block sums the tile alone (split_reduce). Either needs the departures row. */
  args.parallel = 0;
  args.share_groups = BN / 8;
  if (split_k > 1) {
    const unsigned long long need =
        split_workspace_bytes(args.tiles, split_k, kBM, BN) +
        (kSwap ? split_counters_bytes(static_cast<long long>(args.tiles)) : 0ull);
    if (p.ws == nullptr || (reinterpret_cast<uintptr_t>(p.ws) & 15u) != 0 || p.ws_bytes < need ||
        (kSwap && (BN / 8) % split_k != 0))
      return cudaErrorInvalidValue;
    if (kSwap && units <= sms) {
      args.parallel = 1;
      args.share_groups = BN / 8 / split_k;
    }
  }

  CUtensorMap ta, tb, tc, tadd;
  memset(&tc, 0, sizeof tc);     /* unused unless tma_store */
  memset(&tadd, 0, sizeof tadd); /* unused unless add_tma */
  memset(&args.im, 0, sizeof args.im);
  if constexpr (kIm2col) { /* x through an im2col map: boxes of 64 channels x kBM pixels */
    const Im2col &v = *p.im2col;
    args.im.cblocks = static_cast<int>(v.C / kBK);
    args.im.S = v.S;
    args.im.dil = v.dil;
    args.im.stride = v.stride;
    args.im.pad = v.pad;
    args.im.Q = v.Q;
    args.im.PQ = v.P * v.Q; /* sm90_run checked: at most M */
    if constexpr (kSwap) {  /* the filter [N, K] as the kernel's A; x's boxes of BN / 2 pixels */
      e = encode_2d(&ta, p.dtype, p.b, p.K, p.N, p.ldb, kBK, kBM);
      if (e == cudaSuccess)
        e = encode_im2col_nhwc(&tb, p.dtype, p.a, v.N, v.H, v.W, v.C, v.R, v.S, v.stride, v.pad,
                               v.dil, kBK, BN / 2);
    } else {
      e = encode_im2col_nhwc(&ta, p.dtype, p.a, v.N, v.H, v.W, v.C, v.R, v.S, v.stride, v.pad,
                             v.dil, kBK, kBM);
    }
  } else if constexpr (kSwap) { /* B [N, K] as the kernel's A, A [M, K] as its B */
    e = encode_2d(&ta, p.dtype, p.b, p.K, p.N, p.ldb, kBK, kBM);
    if (e == cudaSuccess)
      e = encode_b(&tb, p.dtype, p.a, true, p.K, p.M, p.lda, BN);
  } else {
    e = encode_2d(&ta, p.dtype, p.a, p.K, p.M, p.lda, kBK, kBM);
  }
  if (e == cudaSuccess && !kSwap)
    e = encode_b(&tb, p.dtype, p.b, p.trans_b != 0, p.K, nb, p.ldb, BN);
  /* out [M, N]: staging boxes of 64 rows x 64 columns; swapped, of a block's share of BN rows */
  if (e == cudaSuccess && args.tma_store)
    e = encode_2d(&tc, p.dtype, p.out, p.N, p.M, p.N, kEpiCols, kSwap ? 8 * args.share_groups : 64);
  if (e == cudaSuccess && args.add_tma) /* add [M, N], the same boxes */
    e = encode_2d(&tadd, p.dtype, p.add, p.N, p.M, p.N, kEpiCols, 64);
  if (e == cudaSuccess)
    e = prepare(once, kernel, kSmem);
  if (e != cudaSuccess)
    return e;

  /* Persistent grid: as many CTAs (clusters) as fit at once, at most one
   * per unit. One CTA per SM (the shared memory allows no more). */
  long long slots = sms;
  if (CL > 1) {
    int dev = 0;
    e = cudaGetDevice(&dev);
    if (e != cudaSuccess)
      return e;
    int fit = dev < KernelOnce<decltype(kernel)>::kMaxDev ? once.max_clusters[dev].load() : 0;
    if (fit == 0) {
      cudaLaunchConfig_t q = {};
      cudaLaunchAttribute qa[1];
      qa[0].id = cudaLaunchAttributeClusterDimension;
      qa[0].val.clusterDim.x = CL;
      qa[0].val.clusterDim.y = 1;
      qa[0].val.clusterDim.z = 1;
      q.gridDim = dim3(static_cast<unsigned>(sms / CL * CL));
      q.blockDim = dim3(kThreads);
      q.dynamicSmemBytes = kSmem;
      q.attrs = qa;
      q.numAttrs = 1;
      e = cudaOccupancyMaxActiveClusters(&fit, kernel, &q);
      if (e != cudaSuccess)
        return e;
      if (fit <= 0)
        return cudaErrorInvalidConfiguration;
      if (dev < KernelOnce<decltype(kernel)>::kMaxDev)
        once.max_clusters[dev].store(fit);
    }
    slots = fit;
  }
  const long long clusters = units < slots ? units : slots;

  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CL;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * CL));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = CL > 1 ? 1 : 0;
  if (args.parallel) { /* CL == 1 (swapped): the only attribute asks for residency */
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cfg.numAttrs = 1;
    e = cudaLaunchKernelEx(&cfg, kernel, ta, tb, tc, tadd, args);
    if (e != cudaErrorCooperativeLaunchTooLarge)
      return e;
    /* the GPU is shared (MPS, a smaller partition): the blocks may run in waves, so the last
     * block of a tile sums it alone and stores the whole tile */
    (void)cudaGetLastError();
    args.parallel = 0;
    args.share_groups = BN / 8;
    if (args.tma_store) {
      e = encode_2d(&tc, p.dtype, p.out, p.N, p.M, p.N, kEpiCols, BN);
      if (e != cudaSuccess)
        return e;
    }
    cfg.numAttrs = 0;
  }
  return cudaLaunchKernelEx(&cfg, kernel, ta, tb, tc, tadd, args);
}

/* What a SWAP row runs (gemm_plan.c's row_fits asks the same of the shape):
 * B [N, K] K-major, an unpaired epilogue that reads no add tensor, out
 * stored by TMA (16-byte aligned, N % 8 == 0); A a matrix or an im2col. */
bool swap_ok(const Problem &p) {
  return p.trans_b && aligned16(p.out) && (p.N & 7) == 0 && FP_GEMM_SWAP_EPILOGUE(p.epilogue);
}

/* Picks T, trans_b and the epilogue at run time for one table row. */
template <int BN, int STAGES, unsigned FLAGS>
cudaError_t run_row(const Problem &p, const Config &c, cudaStream_t stream) {
  constexpr bool kPairedRow = (FLAGS & FP_GEMM_CFG_PAIRED) != 0;
  constexpr bool kSplit = (FLAGS & FP_GEMM_CFG_SPLIT_K) != 0;
  constexpr int CL = (FLAGS & FP_GEMM_CFG_CLUSTER2) ? 2 : 1;
  if constexpr ((FLAGS & FP_GEMM_CFG_B2B) != 0) {
    return cudaErrorInvalidValue; /* a gemm2 row */
  } else if constexpr ((FLAGS & FP_GEMM_CFG_SWAP) != 0) {
    if (!swap_ok(p)) { /* the planner asks the shape; the pointers may still refuse: row 1,
                        * unsplit (its tiles would not fit the workspace sized for these) */
      Config unsplit = c;
      unsplit.split_k = 1;
      return run_row<256, 4, 0u>(p, unsplit, stream);
    }
    const int split_k = c.split_k < 1 ? 1 : c.split_k;
    if (split_k > 1 && !kSplit)
      return cudaErrorInvalidValue;
    const auto for_t = [&](auto tag) -> cudaError_t {
      using T = decltype(tag);
      if (p.im2col != nullptr) /* a convolution's pixels as the kernel's B */
        return launch_gemm<T, EpiLinear<T>, BN, STAGES, 1, kSplit, true, true, true>(p, split_k,
                                                                                     stream);
      return launch_gemm<T, EpiLinear<T>, BN, STAGES, 1, kSplit, true, false, true>(p, split_k,
                                                                                    stream);
    };
    if (p.dtype == Storage<__half>::kDtype)
      return for_t(__half());
    return for_t(__nv_bfloat16());
  } else {
    const int split_k = c.split_k < 1 ? 1 : c.split_k;
    if (split_k > 1 && !kSplit) /* more splits than k-blocks is fine: the extra ones add zeros */
      return cudaErrorInvalidValue;
    if (FP_EPI_PAIRED(p.epilogue) != kPairedRow)
      return cudaErrorInvalidValue;
    const auto for_t = [&](auto tag) -> cudaError_t {
      using T = decltype(tag);
      const auto for_epi = [&](auto epi_tag) -> cudaError_t {
        using Epi = std::remove_pointer_t<decltype(epi_tag)>;
        if (p.im2col != nullptr) { /* a convolution: unpaired, trans_b (sm90_run) */
          if constexpr (kPairedRow)
            return cudaErrorInvalidValue;
          else
            return launch_gemm<T, Epi, BN, STAGES, CL, kSplit, true, true>(p, split_k, stream);
        }
        if (p.trans_b)
          return launch_gemm<T, Epi, BN, STAGES, CL, kSplit, true>(p, split_k, stream);
        return launch_gemm<T, Epi, BN, STAGES, CL, kSplit, false>(p, split_k, stream);
      };
      if constexpr (kPairedRow) {
        if (p.epilogue == FP_EPI_SPLIT_ACT)
          return for_epi(static_cast<EpiSplitAct<T> *>(nullptr));
        return for_epi(static_cast<EpiGeglu<T> *>(nullptr));
      } else {
        return for_epi(static_cast<EpiLinear<T> *>(nullptr));
      }
    };
    if (p.dtype == Storage<__half>::kDtype)
      return for_t(__half());
    return for_t(__nv_bfloat16());
  }
}

/* ---- host: the gemm2 launch ---------------------------------------------------------------- */

/* The P range split (pgroups) that minimises waves x (work per unit) when
 * the row units alone leave block slots idle: each group recomputes its
 * rows' intermediate. Work in MMAs of 64 rows x 64 columns x 64 deep:
 * `inter` per k-block of the intermediate, `per_chunk` per 64-deep chunk
 * of a 128-column P tile. */
inline int choose_pgroups(int mtiles, int ptiles, int kblocks, int nchunks, int inter,
                          int per_chunk, long long slots) {
  long long best_cost = LLONG_MAX;
  int best = 1;
  for (int pg = 1; pg <= ptiles; ++pg) {
    const long long units = static_cast<long long>(mtiles) * pg;
    const long long waves = (units + slots - 1) / slots;
    const long long per_unit = static_cast<long long>(kblocks) * inter +
                               static_cast<long long>((ptiles + pg - 1) / pg) * nchunks * per_chunk;
    const long long cost = waves * per_unit;
    if (cost < best_cost) {
      best_cost = cost;
      best = pg;
    }
    if (units >= slots)
      break; /* more groups only add waves */
  }
  return best;
}

/* A gemm2 launch's arguments for units of `rows` rows: the tile counts,
 * then the P split (choose_pgroups, in MMAs of `inter` per k-block and
 * `per_chunk` per d chunk) over `slots` blocks at once. */
template <class T>
cudaError_t gemm2_args(const Problem2 &p, int rows, int inter, int per_chunk, long long slots,
                       Gemm2Args<T> *args) {
  args->out = static_cast<T *>(p.out);
  args->M = static_cast<int>(p.M);
  args->N = static_cast<int>(p.N);
  args->P = static_cast<int>(p.P);
  args->mtiles = static_cast<int>((p.M + rows - 1) / rows);
  args->ptiles = static_cast<int>((p.P + kB2bBN2 - 1) / kB2bBN2);
  args->kblocks = static_cast<int>((p.K + kBK - 1) / kBK);
  args->nchunks = static_cast<int>((p.N + kBK - 1) / kBK);
  args->pgroups = choose_pgroups(args->mtiles, args->ptiles, args->kblocks, args->nchunks, inter,
                                 per_chunk, slots);
  const long long units = static_cast<long long>(args->mtiles) * args->pgroups;
  if (units > kMaxCoord)
    return cudaErrorInvalidValue;
  args->units = static_cast<int>(units);
  return cudaSuccess;
}

template <class T, int BN, int STAGES, bool kTransB>
cudaError_t launch_gemm2(const Problem2 &p, cudaStream_t stream) {
  constexpr int kSmem = Smem<BN, STAGES, 0>::kBytes;
  auto kernel = gemm2_kernel<T, BN, STAGES, kTransB>;
  static KernelOnce<decltype(kernel)> once;

  int sms = 0;
  cudaError_t e = device_info(&sms);
  if (e != cudaSuccess)
    return e;
  /* Split each row tile's P range over pgroups blocks when row tiles alone
   * leave SMs idle (choose_pgroups; the same proportions as its 128 x 128 x
   * 64 k-block MMAs of before). */
  Gemm2Args<T> args;
  e = gemm2_args(p, kBM, BN / 128, 1, sms, &args);
  if (e != cudaSuccess)
    return e;

  CUtensorMap ta, tb, td;
  e = encode_2d(&ta, p.dtype, p.a, p.K, p.M, p.lda, kBK, kBM);
  if (e == cudaSuccess)
    e = encode_b(&tb, p.dtype, p.b, p.trans_b != 0, p.K, p.N, p.ldb, BN);
  if (e == cudaSuccess)
    e = encode_2d(&td, p.dtype, p.d, p.P, p.N, p.ldd, 64, kBK);
  if (e == cudaSuccess)
    e = prepare(once, kernel, kSmem);
  if (e != cudaSuccess)
    return e;
  const long long grid = args.units < sms ? args.units : sms;
  kernel<<<static_cast<unsigned>(grid), kThreads, kSmem, stream>>>(ta, tb, td, args);
  return cudaGetLastError();
}

template <class T, int NI, int STAGES, bool kTransB>
cudaError_t launch_gemm2_rows64(const Problem2 &p, cudaStream_t stream) {
  using SmemT = Smem64<NI, STAGES>;
  constexpr int kSmem = SmemT::kBytes;
  auto kernel = gemm2_rows64_kernel<T, NI, STAGES, kTransB>;
  static KernelOnce<decltype(kernel)> once;

  int sms = 0;
  cudaError_t e = device_info(&sms);
  if (e != cudaSuccess)
    return e;
  const long long slots = static_cast<long long>(sms) * SmemT::kBlocksPerSm;
  Gemm2Args<T> args;
  e = gemm2_args(p, SmemT::kRows, NI / 64, kB2bBN2 / 64, slots, &args);
  if (e != cudaSuccess)
    return e;
  const int tma_store = aligned16(p.out) && (p.P & 7) == 0;

  CUtensorMap ta, tb, td, to;
  memset(&to, 0, sizeof to); /* unused unless tma_store */
  e = encode_2d(&ta, p.dtype, p.a, p.K, p.M, p.lda, kBK, SmemT::kRows);
  if (e == cudaSuccess)
    e = encode_b(&tb, p.dtype, p.b, p.trans_b != 0, p.K, p.N, p.ldb, NI);
  if (e == cudaSuccess)
    e = encode_2d(&td, p.dtype, p.d, p.P, p.N, p.ldd, 64, kBK);
  if (e == cudaSuccess && tma_store)
    e = encode_2d(&to, p.dtype, p.out, p.P, p.M, p.P, kEpiCols, SmemT::kRows);
  if (e == cudaSuccess)
    e = prepare(once, kernel, kSmem);
  if (e != cudaSuccess)
    return e;
  const long long grid = args.units < slots ? args.units : slots;
  kernel<<<static_cast<unsigned>(grid), kRows64Threads, kSmem, stream>>>(ta, tb, td, to, args,
                                                                         tma_store);
  return cudaGetLastError();
}

template <int BM, int BN, int STAGES, unsigned FLAGS>
cudaError_t run2_row(const Problem2 &p, cudaStream_t stream) {
  if constexpr ((FLAGS & FP_GEMM_CFG_B2B) == 0) {
    return cudaErrorInvalidValue; /* a gemm row */
  } else if constexpr (BM == 64) {
    if (p.N > BN)
      return cudaErrorInvalidValue;
    if (p.dtype == Storage<__half>::kDtype)
      return p.trans_b ? launch_gemm2_rows64<__half, BN, STAGES, true>(p, stream)
                       : launch_gemm2_rows64<__half, BN, STAGES, false>(p, stream);
    return p.trans_b ? launch_gemm2_rows64<__nv_bfloat16, BN, STAGES, true>(p, stream)
                     : launch_gemm2_rows64<__nv_bfloat16, BN, STAGES, false>(p, stream);
  } else {
    if (p.N > BN)
      return cudaErrorInvalidValue;
    if (p.dtype == Storage<__half>::kDtype)
      return p.trans_b ? launch_gemm2<__half, BN, STAGES, true>(p, stream)
                       : launch_gemm2<__half, BN, STAGES, false>(p, stream);
    return p.trans_b ? launch_gemm2<__nv_bfloat16, BN, STAGES, true>(p, stream)
                     : launch_gemm2<__nv_bfloat16, BN, STAGES, false>(p, stream);
  }
}

/* Every table row is one the kernels support (checked at compile time). */
template <int BM, int BN, int BK, int STAGES, int THREADS, int SMEM, unsigned FLAGS>
constexpr bool row_ok() {
  constexpr int kOutC = (FLAGS & FP_GEMM_CFG_B2B)      ? 0
                        : (FLAGS & FP_GEMM_CFG_PAIRED) ? BN / 2
                        : (FLAGS & FP_GEMM_CFG_SWAP)   ? (BN + 63) / 64 * 64
                                                       : BN;
  if constexpr (BM == 64) /* gemm2_rows64_kernel */
    return (FLAGS == FP_GEMM_CFG_B2B) && BK == kBK && THREADS == kRows64Threads &&
           (BN == 64 || BN == 128 || BN == 256) && SMEM == Smem64<BN, STAGES>::kBytes;
  else
    return BM == kBM && BK == kBK && THREADS == kThreads &&
           SMEM == Smem<BN, STAGES, kOutC>::kBytes &&
           (BN == 64 || BN == 128 || BN == 192 || BN == 256 ||
            (BN == 224 && (FLAGS & FP_GEMM_CFG_SWAP))) &&
           (!(FLAGS & FP_GEMM_CFG_SWAP) ||
            ((FLAGS & ~FP_GEMM_CFG_SPLIT_K) == FP_GEMM_CFG_SWAP && BN >= 128)) &&
           (BN != 192 ||
            !(FLAGS & (FP_GEMM_CFG_CLUSTER2 | FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_B2B))) &&
           (!(FLAGS & FP_GEMM_CFG_B2B) || (BN >= 128 && !(FLAGS & ~FP_GEMM_CFG_B2B))) &&
           (!(FLAGS & FP_GEMM_CFG_PAIRED) || BN >= 128) &&
           (!(FLAGS & FP_GEMM_CFG_CLUSTER2) || BN >= 128);
}
#define FP_SM90_CHECK_ROW(IDX, BM, BN, BK, ST, TH, SMEM, FL)                                       \
  static_assert(row_ok<BM, BN, BK, ST, TH, SMEM, (FL)>(), "gemm_sm90_configs.h row " #IDX);
FP_GEMM_SM90_CONFIGS(FP_SM90_CHECK_ROW)
#undef FP_SM90_CHECK_ROW

/* ---- host: kernel stubs ---------------------------------------------------------------------- */

struct StubList {
  const void **out;
  int cap, n;
  void add(const void *k) {
    if (n < cap && out != nullptr)
      out[n] = k;
    ++n;
  }
};

template <class T, class Epi, int BN, int STAGES, unsigned FLAGS> void stubs_epi(StubList &l) {
  constexpr bool kSplit = (FLAGS & FP_GEMM_CFG_SPLIT_K) != 0;
  constexpr int CL = (FLAGS & FP_GEMM_CFG_CLUSTER2) ? 2 : 1;
  if constexpr ((FLAGS & FP_GEMM_CFG_SWAP) != 0) {
    l.add(reinterpret_cast<const void *>(
        gemm_kernel<T, Epi, BN, STAGES, 1, kSplit, true, false, true>));
    l.add(reinterpret_cast<const void *>(
        gemm_kernel<T, Epi, BN, STAGES, 1, kSplit, true, true, true>));
  } else {
    l.add(reinterpret_cast<const void *>(
        gemm_kernel<T, Epi, BN, STAGES, CL, kSplit, false, false, false>));
    l.add(reinterpret_cast<const void *>(
        gemm_kernel<T, Epi, BN, STAGES, CL, kSplit, true, false, false>));
    if constexpr (!Epi::kPaired) /* the convolutions' im2col loader (run_row) */
      l.add(reinterpret_cast<const void *>(
          gemm_kernel<T, Epi, BN, STAGES, CL, kSplit, true, true, false>));
  }
}
template <class T, int BM, int BN, int STAGES, unsigned FLAGS> void stubs_t(StubList &l) {
  if constexpr ((FLAGS & FP_GEMM_CFG_B2B) != 0 && BM == 64) {
    l.add(reinterpret_cast<const void *>(gemm2_rows64_kernel<T, BN, STAGES, false>));
    l.add(reinterpret_cast<const void *>(gemm2_rows64_kernel<T, BN, STAGES, true>));
  } else if constexpr ((FLAGS & FP_GEMM_CFG_B2B) != 0) {
    l.add(reinterpret_cast<const void *>(gemm2_kernel<T, BN, STAGES, false>));
    l.add(reinterpret_cast<const void *>(gemm2_kernel<T, BN, STAGES, true>));
  } else if constexpr ((FLAGS & FP_GEMM_CFG_PAIRED) != 0) {
    stubs_epi<T, EpiSplitAct<T>, BN, STAGES, FLAGS>(l);
    stubs_epi<T, EpiGeglu<T>, BN, STAGES, FLAGS>(l);
  } else {
    stubs_epi<T, EpiLinear<T>, BN, STAGES, FLAGS>(l);
  }
}
template <int BM, int BN, int STAGES, unsigned FLAGS> void stubs_row(StubList &l) {
  stubs_t<__half, BM, BN, STAGES, FLAGS>(l);
  stubs_t<__nv_bfloat16, BM, BN, STAGES, FLAGS>(l);
}

#endif
