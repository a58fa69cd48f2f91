/* fuseport CUDA GEMM planner (gemm_plan.h): path selection by named
 * predicates, then a tile configuration per shape from the path's table
 * (or from the tuning cache). */
#define _POSIX_C_SOURCE 200809L
#include "gemm_plan.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/common/fp_device_common.h"
#include "../../kernels/cu/gemm_simt_configs.h"
#include "../../kernels/cu/gemm_skinny_configs.h"
#include "../../kernels/cu/gemm_sm80_configs.h"
#include "../../kernels/cu/gemm_sm90_configs.h"

/* fp_dtype values (backend.h; not included here to keep this file plain C
 * without the layer). */
enum { DT_F32 = 0, DT_F16 = 1, DT_BF16 = 2 };

typedef struct cfg_row {
  int index, bm, bn, bk, stages, threads;
  uint32_t smem, flags;
} cfg_row;

#define FP_GEMM_ROW(INDEX, BM, BN, BK, STAGES, THREADS, SMEM, FLAGS)                               \
  {INDEX, BM, BN, BK, STAGES, THREADS, SMEM, FLAGS},
static const cfg_row sm90_rows[] = {FP_GEMM_SM90_CONFIGS(FP_GEMM_ROW)};
static const cfg_row sm80_rows[] = {FP_GEMM_SM80_CONFIGS(FP_GEMM_ROW)};
static const cfg_row simt_rows[] = {FP_GEMM_SIMT_CONFIGS(FP_GEMM_ROW)};
static const cfg_row skinny_rows[] = {FP_GEMM_SKINNY_CONFIGS(FP_GEMM_ROW)};
#undef FP_GEMM_ROW

static const struct {
  const cfg_row *rows;
  int n;
} tables[FP_GEMM_PATH_COUNT] = {
    {sm90_rows, (int)(sizeof sm90_rows / sizeof sm90_rows[0])},
    {sm80_rows, (int)(sizeof sm80_rows / sizeof sm80_rows[0])},
    {simt_rows, (int)(sizeof simt_rows / sizeof simt_rows[0])},
    {skinny_rows, (int)(sizeof skinny_rows / sizeof skinny_rows[0])},
};

static const char *const path_names[FP_GEMM_PATH_COUNT] = {"sm90", "sm80", "simt", "skinny"};

const char *fp_gemm_path_name(fp_gemm_path path) {
  return (unsigned)path < FP_GEMM_PATH_COUNT ? path_names[path] : "auto";
}

bool fp_gemm_path_from_env(const char *text, fp_gemm_path *out) {
  *out = FP_GEMM_PATH_AUTO;
  if (text == NULL || *text == '\0' || strcmp(text, "auto") == 0)
    return true;
  for (int p = 0; p < FP_GEMM_PATH_COUNT; ++p)
    if (strcmp(text, path_names[p]) == 0) {
      *out = (fp_gemm_path)p;
      return true;
    }
  return false;
}

static bool fail(char *why, size_t len, const char *fmt, ...) {
  if (why != NULL && len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
  }
  return false;
}

/* ---- path predicates --------------------------------------------------------------- */

static bool is_half(int dtype) { return dtype == DT_F16 || dtype == DT_BF16; }

/* wgmma and TMA: the sm_90a code runs on compute capability 9.0 only, and
 * exists in builds whose architectures include 90 (CMakeLists.txt). */
static bool use_sm90(const fp_gemm_request *r, const fp_gemm_device *d) {
#ifdef FUSEPORT_GEMM_SM90
  return is_half(r->dtype) && d->cc_major == 9 && d->cc_minor == 0;
#else
  (void)r;
  (void)d;
  return false;
#endif
}
/* mma.sync m16n8k16 with bf16: Ampere and later. */
static bool use_sm80(const fp_gemm_request *r, const fp_gemm_device *d) {
  return is_half(r->dtype) && d->cc_major >= 8;
}
/* Up to 16 rows the product is a matrix-vector product per row: it moves
 * B once at memory speed, which a tile of 64-256 rows would mostly waste. */
static bool use_skinny(const fp_gemm_request *r) { return !r->b2b && r->M <= 16; }
static bool use_simt(const fp_gemm_request *r) { return r->dtype == DT_F32; }

bool fp_gemm_has_sm90(void) {
#ifdef FUSEPORT_GEMM_SM90
  return true;
#else
  return false;
#endif
}

static bool path_can(fp_gemm_path p, const fp_gemm_request *r, const fp_gemm_device *d) {
  switch (p) {
  case FP_GEMM_PATH_SM90:
    return use_sm90(r, d);
  case FP_GEMM_PATH_SM80:
    return use_sm80(r, d);
  case FP_GEMM_PATH_SIMT:
    return use_simt(r);
  case FP_GEMM_PATH_SKINNY:
    return !r->b2b;
  default:
    return false;
  }
}

/* ---- configurations ------------------------------------------------------------------- */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Relative time of a configuration on the shape: the waves of tiles the
 * grid takes times the work of a tile (padding waste included), over the
 * tile's arithmetic intensity (bm*bn/(bm+bn): bytes loaded per MMA), which
 * saturates at the largest tiles. */
static double config_cost(const cfg_row *c, int64_t M, int64_t NB, int64_t K, int sms,
                          int split_k) {
  const int64_t tiles = ceil_div(M, c->bm) * ceil_div(NB, c->bn);
  const double waves = (double)ceil_div(tiles * split_k, sms > 0 ? sms : 1);
  const double intensity = (double)c->bm * c->bn / (c->bm + c->bn);
  const double best = 128.0 * 256.0 / (128.0 + 256.0);
  const double eff = intensity < best ? intensity / best : 1.0;
  const double k_share = (double)ceil_div(K, split_k);
  return waves * (double)c->bm * (double)c->bn * k_share / eff;
}

/* Split K over more blocks when the tiles alone fill at most 1/idle_share
 * of the SMs and K is deep enough that each share keeps min_ksteps k-steps
 * (sm80 and simt: half the SMs, 4 k-steps; sm90: a quarter, 32). */
static int choose_split(const cfg_row *c, int64_t M, int64_t NB, int64_t K, int sms, int idle_share,
                        int min_ksteps) {
  if ((c->flags & FP_GEMM_CFG_SPLIT_K) == 0)
    return 1;
  const int64_t tiles = ceil_div(M, c->bm) * ceil_div(NB, c->bn);
  if (tiles * idle_share > sms)
    return 1;
  int64_t s = sms / tiles;
  const int64_t by_depth = K / (min_ksteps * (int64_t)c->bk);
  if (s > by_depth)
    s = by_depth;
  if (s > 16)
    s = 16;
  return s >= 2 ? (int)s : 1;
}

static bool row_fits(const cfg_row *c, const fp_gemm_request *r, const fp_gemm_device *d,
                     bool paired);

/* SKINNY (M <= 16) moves B once at memory speed. Measured on an H100
 * (lab/sm80_lab.cu, f16, M = 1..16, N and K 1024..50257, both layouts):
 *  - f16/bf16 take the tensor-core row (STAGES >= 2; its kernel falls back
 *    to CUDA cores for unaligned operands) without split-K: one block a
 *    column tile moved B fastest, 1900-2950 GB/s with L2 flushed clean,
 *    and splits were slower (16x8192x8192: 2063 GB/s unsplit, 1840 at 2,
 *    1408 at 3), except where the tiles alone leave most SMs idle (below a
 *    quarter: a split to about half the SMs; 8x1024x8192: 930 GB/s at 4,
 *    750 unsplit);
 *  - with the cache flushed by writing (the bench's default, and do_bench's),
 *    M <= 8 and tiles for at most half the SMs: a split to one block an SM
 *    (H200, 132 SMs, 2026-11-28, 64 tiles of N = 4096: 1x4096x4096 1590 GB/s
 *    unsplit, 1847 at 2, 1760 at 4; 1x4096x11008 2101 -> 2572 at 2;
 *    4x4096x4096 1636 -> 1766; 8x4096x4096 1583 -> 1647; 16x4096x4096 1563
 *    unsplit, 1430 at 2, so M > 8 keeps the rule above; N >= 8192, 128 or
 *    more tiles: unsplit is fastest, 1x8192x8192 3031 GB/s, 2917 at 2);
 *  - f32 takes the CUDA-core row 0 with split-K to about two blocks an SM
 *    (f16 on that kernel, M = 1: 1x4096x4096 940 GB/s at 1, 1455 at 4;
 *    1x8192x8192 2220 at 2; 1x50257x4096 2773 at 1).
 * A split keeps at least two k-steps of its row. */
static bool skinny_choose(const fp_gemm_request *r, const fp_gemm_device *d, bool paired,
                          int64_t NB, const cfg_row **row, int *split) {
  const bool tc = r->dtype != DT_F32;
  const int sms = d->sm_count > 0 ? d->sm_count : 1;
  *row = NULL;
  for (int k = 0; k < tables[FP_GEMM_PATH_SKINNY].n && *row == NULL; ++k) {
    const cfg_row *c = &tables[FP_GEMM_PATH_SKINNY].rows[k];
    if (row_fits(c, r, d, paired) && (c->stages > 1) == tc)
      *row = c;
  }
  for (int k = 0; k < tables[FP_GEMM_PATH_SKINNY].n && *row == NULL; ++k) /* any that fits */
    if (row_fits(&tables[FP_GEMM_PATH_SKINNY].rows[k], r, d, paired))
      *row = &tables[FP_GEMM_PATH_SKINNY].rows[k];
  if (*row == NULL)
    return false;
  const cfg_row *c = *row;
  const int64_t tiles = ceil_div(NB, c->bn);
  int64_t s = 1;
  if (c->stages > 1) {
    if (r->M <= 8 && tiles * 2 <= sms)
      s = sms / tiles;
    else if (tiles * 4 < sms)
      s = sms / (2 * tiles);
  } else {
    s = (2 * sms + tiles / 2) / tiles;
  }
  const int64_t by_depth = r->K / (2 * (int64_t)c->bk);
  if (s > by_depth)
    s = by_depth;
  if (s > 16)
    s = 16;
  *split = (c->flags & FP_GEMM_CFG_SPLIT_K) != 0 && s >= 2 ? (int)s : 1;
  return true;
}

/* A row of per-tile counters, padded to 256 bytes (gemm_common.cuh's
 * split_counters_bytes). */
static uint64_t split_counters_bytes(int64_t tiles) {
  return ((uint64_t)tiles * 4u + 255u) / 256u * 256u;
}

static uint64_t split_ws_bytes(int64_t tiles, int split, int bm, int bn) {
  if (split <= 1)
    return 0;
  return split_counters_bytes(tiles) +
         (uint64_t)split * (uint64_t)tiles * (uint64_t)bm * (uint64_t)bn * 4u;
}

/* ---- the tuning cache ------------------------------------------------------------------
 * One line per tuned problem:
 *   v1 CC SMS PATH DTYPE M N K P PAIRED TRANS_B B2B CONFIG SPLIT_K MEDIAN_US
 * e.g. "v1 9.0 132 sm90 1 4096 4096 4096 0 0 0 0 2 1 171.3". The problem
 * key keeps only what the configuration filter depends on (paired or not,
 * rather than the epilogue). P: gemm2's P, 0 for a GEMM, -1 for a
 * convolution's im2col GEMM (fp_gemm_request.im2col). */

typedef struct tuned_entry {
  int cc_major, cc_minor, sms, path, dtype;
  int64_t M, N, K, P;
  int paired, trans_b, b2b, config, split_k;
  double median_us;
} tuned_entry;

static pthread_once_t tuning_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t tuning_lock = PTHREAD_MUTEX_INITIALIZER;
static tuned_entry *tuned;
static int n_tuned, cap_tuned;

static const char *tuning_path(void) {
  const char *p = getenv("FUSEPORT_CUDA_GEMM_TUNE");
  return p != NULL && *p != '\0' ? p : NULL;
}

bool fp_gemm_tuning_enabled(void) { return tuning_path() != NULL; }

static bool tuned_append(const tuned_entry *e) {
  if (n_tuned == cap_tuned) {
    int cap = cap_tuned > 0 ? 2 * cap_tuned : 64;
    tuned_entry *grown = realloc(tuned, sizeof *grown * (size_t)cap);
    if (grown == NULL)
      return false;
    tuned = grown;
    cap_tuned = cap;
  }
  tuned[n_tuned++] = *e;
  return true;
}

/* Reads the file once per process; lines that do not parse are skipped (a
 * cache is an optimisation: a bad line costs a re-tune, never a wrong plan,
 * since every entry is checked against the tables before use). */
static void tuning_load(void) {
  const char *path = tuning_path();
  FILE *f = path != NULL ? fopen(path, "r") : NULL;
  if (f == NULL)
    return;
  char line[512], name[16];
  while (fgets(line, sizeof line, f) != NULL) {
    tuned_entry e;
    long long M, N, K, P;
    if (sscanf(line, "v1 %d.%d %d %15s %d %lld %lld %lld %lld %d %d %d %d %d %lf", &e.cc_major,
               &e.cc_minor, &e.sms, name, &e.dtype, &M, &N, &K, &P, &e.paired, &e.trans_b, &e.b2b,
               &e.config, &e.split_k, &e.median_us) != 15)
      continue;
    fp_gemm_path p;
    if (!fp_gemm_path_from_env(name, &p) || p == FP_GEMM_PATH_AUTO)
      continue;
    e.path = (int)p;
    e.M = M;
    e.N = N;
    e.K = K;
    e.P = P;
    (void)tuned_append(&e);
  }
  fclose(f);
}

static tuned_entry key_of(const fp_gemm_request *r, const fp_gemm_device *d, fp_gemm_path path) {
  tuned_entry e;
  memset(&e, 0, sizeof e);
  e.cc_major = d->cc_major;
  e.cc_minor = d->cc_minor;
  e.sms = d->sm_count;
  e.path = (int)path;
  e.dtype = r->dtype;
  e.M = r->M;
  e.N = r->N;
  e.K = r->K;
  e.P = r->b2b ? r->P : r->im2col ? -1 : 0; /* the cache file's P column: -1 marks im2col */
  e.paired = !r->b2b && FP_EPI_PAIRED(r->epilogue);
  e.trans_b = r->trans_b;
  e.b2b = r->b2b;
  return e;
}

static bool same_problem(const tuned_entry *x, const tuned_entry *y) {
  return x->cc_major == y->cc_major && x->cc_minor == y->cc_minor && x->sms == y->sms &&
         x->path == y->path && x->dtype == y->dtype && x->M == y->M && x->N == y->N &&
         x->K == y->K && x->P == y->P && x->paired == y->paired && x->trans_b == y->trans_b &&
         x->b2b == y->b2b;
}

/* The tuned configuration of the problem, if the cache holds one. */
static bool tuning_lookup(const tuned_entry *key, int *config, int *split_k) {
  if (tuning_path() == NULL)
    return false;
  pthread_once(&tuning_once, tuning_load);
  bool found = false;
  pthread_mutex_lock(&tuning_lock);
  for (int k = n_tuned - 1; k >= 0 && !found; --k) /* the newest line wins */
    if (same_problem(&tuned[k], key)) {
      *config = tuned[k].config;
      *split_k = tuned[k].split_k;
      found = true;
    }
  pthread_mutex_unlock(&tuning_lock);
  return found;
}

static bool write_tuning_file(const char *path, char *why, size_t whylen) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (f == NULL)
    return fail(why, whylen, "cannot write %s", tmp);
  fprintf(f, "# fuseport GEMM tuning cache (FUSEPORT_CUDA_GEMM_TUNE): v1 CC SMS PATH DTYPE M N K "
             "P PAIRED TRANS_B B2B CONFIG SPLIT_K MEDIAN_US\n");
  for (int k = 0; k < n_tuned; ++k) {
    const tuned_entry *e = &tuned[k];
    fprintf(f, "v1 %d.%d %d %s %d %lld %lld %lld %lld %d %d %d %d %d %.3f\n", e->cc_major,
            e->cc_minor, e->sms, path_names[e->path], e->dtype, (long long)e->M, (long long)e->N,
            (long long)e->K, (long long)e->P, e->paired, e->trans_b, e->b2b, e->config, e->split_k,
            e->median_us);
  }
  bool ok = fflush(f) == 0;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    remove(tmp);
    return fail(why, whylen, "cannot write the GEMM tuning cache %s", path);
  }
  return true;
}

bool fp_gemm_tuning_record(const fp_gemm_request *r, const fp_gemm_device *d,
                           const fp_gemm_plan *best, double median_us, char *why, size_t whylen) {
  const char *path = tuning_path();
  if (path == NULL)
    return fail(why, whylen, "FUSEPORT_CUDA_GEMM_TUNE is not set");
  pthread_once(&tuning_once, tuning_load);
  tuned_entry e = key_of(r, d, best->path);
  e.config = best->config;
  e.split_k = best->split_k;
  e.median_us = median_us;
  pthread_mutex_lock(&tuning_lock);
  bool ok = tuned_append(&e);
  if (!ok)
    fail(why, whylen, "no host memory for the GEMM tuning cache");
  else
    ok = write_tuning_file(path, why, whylen);
  pthread_mutex_unlock(&tuning_lock);
  return ok;
}

/* The output tiles row c cuts an M x NB product into (a SWAP row's: BM of
 * N by BN of M). */
static int64_t row_tiles(const cfg_row *c, int64_t M, int64_t NB) {
  return (c->flags & FP_GEMM_CFG_SWAP) != 0 ? ceil_div(NB, c->bm) * ceil_div(M, c->bn)
                                            : ceil_div(M, c->bm) * ceil_div(NB, c->bn);
}

/* Fills the plan of configuration row c with split_k. */
static void plan_from_row(const cfg_row *c, int split, const fp_gemm_request *r, int64_t NB,
                          fp_gemm_plan *out) {
  out->config = c->index;
  out->bm = c->bm;
  out->bn = c->bn;
  out->bk = c->bk;
  out->stages = c->stages;
  out->threads = c->threads;
  out->smem_bytes = c->smem;
  out->flags = c->flags;
  out->split_k = split;
  out->b2b_on_chip = r->b2b;
  const int64_t tiles = row_tiles(c, r->M, NB);
  out->ws_bytes = split_ws_bytes(tiles, split, c->bm, c->bn);
  if ((c->flags & FP_GEMM_CFG_SWAP) != 0 &&
      split > 1) /* the departures row of the parallel sum (gemm_sm90_configs.h) */
    out->ws_bytes += split_counters_bytes(tiles);
}

/* What a SWAP row (out^T = B A^T) runs: B [N, K] K-major, an unpaired
 * epilogue without an add tensor, out's rows 16-byte aligned (N % 8 == 0;
 * gemm_sm90_host.cuh's swap_ok also asks out's address, and runs row 1
 * where it is not aligned); A a matrix or a convolution's im2col. */
static bool swap_fits(const fp_gemm_request *r) {
  return !r->b2b && r->trans_b && r->N % 8 == 0 && FP_GEMM_SWAP_EPILOGUE(r->epilogue);
}

/* Whether row c can run r on d (before any cost). A cluster of two blocks
 * along M shares B's tiles, so its grid needs an even number of tile rows. */
static bool row_fits(const cfg_row *c, const fp_gemm_request *r, const fp_gemm_device *d,
                     bool paired) {
  if (c->smem > d->smem_optin)
    return false;
  if ((c->flags & FP_GEMM_CFG_CLUSTER2) != 0 && ceil_div(r->M, c->bm) % 2 != 0)
    return false;
  const bool b2b_row = (c->flags & FP_GEMM_CFG_B2B) != 0;
  if (b2b_row != r->b2b)
    return false;
  if (r->b2b && c->bn < r->N)
    return false; /* the intermediate would not fit on chip */
  if (paired && (c->flags & FP_GEMM_CFG_PAIRED) == 0)
    return false;
  if ((c->flags & FP_GEMM_CFG_SWAP) != 0 && !swap_fits(r))
    return false;
  /* A skinny row is built for both kinds of epilogue; the other paths
   * build a PAIRED row for the paired ones only (their launchers refuse an
   * unpaired epilogue there: f32 129 x 1032 x 200 was planned on simt's
   * paired row 3 and failed to launch). */
  const bool skinny_row = c >= tables[FP_GEMM_PATH_SKINNY].rows &&
                          c < tables[FP_GEMM_PATH_SKINNY].rows + tables[FP_GEMM_PATH_SKINNY].n;
  if (!paired && !skinny_row && (c->flags & FP_GEMM_CFG_PAIRED) != 0)
    return false;
  return true;
}

int fp_gemm_plan_candidates(const fp_gemm_request *r, const fp_gemm_device *d,
                            const fp_gemm_plan *planned, fp_gemm_plan *out, int max) {
  if (max < 1 || (unsigned)planned->path >= FP_GEMM_PATH_COUNT || planned->config < 0)
    return 0;
  const bool paired = !r->b2b && FP_EPI_PAIRED(r->epilogue);
  const int64_t NB = paired ? 2 * r->N : r->N;
  int n = 0;
  out[n++] = *planned;
  for (int k = 0; k < tables[planned->path].n && n < max; ++k) {
    const cfg_row *c = &tables[planned->path].rows[k];
    if (!row_fits(c, r, d, paired) || (c->index == planned->config && planned->split_k == 1))
      continue;
    out[n] = *planned;
    plan_from_row(c, 1, r, NB, &out[n]);
    out[n].tuned = false;
    n++;
  }
  return n;
}

/* The Hopper path's own rules, from timings on an H100 (lab/sm90_lab.cu,
 * cuBLAS beside):
 *  - per tile width, the rate of a tile relative to 128x256 (on shapes
 *    that all fill the GPU alike): 128x192 0.84-0.9, 128x128 0.78-0.84,
 *    128x64 0.5-0.57 (the intensity ratio says 0.9, 0.75, 0.5);
 *  - split-K's partial sums (written, fenced, read back by the last block)
 *    cost a few microseconds, more than the idle SMs it fills unless the
 *    tiles are very few and each share keeps >= 32 k-steps; a convolution's
 *    im2col GEMM splits up to half the SMs (ResNet-50's 512-channel 3x3
 *    layers at batch 32: 52 tiles of 72 k-blocks, H200, see docs/PERF.md);
 *  - clusters of two (B multicast) win only on large grids (>= 8 waves of
 *    tiles) and lose up to 5% on smaller ones, except where rows of A or B
 *    are not 128-byte aligned (K, or row-major B's width, not a multiple
 *    of 64): TMA then splits each box row into two L2 requests, and rows
 *    without multicast run at 0.66-0.75 of those with (4096x4104x4096);
 *  - a paired row never runs an unpaired epilogue (nor the reverse);
 *  - the unpaired 128x256 rows stage half of a tile's output in the stage
 *    of its last k-block, kept from the producer until the copy engine has
 *    read it (gemm_sm90.cu): with K <= 256 (at most 4 k-blocks a tile)
 *    that takes one of their 4 stages for part of every tile. On H200
 *    (2026-11-29, every ResNet-50 layer at batch 8 and 32 on every unsplit
 *    row) such a tile cost as if 48 columns of K deeper: 100352 x 256 x 64
 *    ran 26.2 us on 128x256 tiles and 23.0 on 128x224 swapped ones,
 *    25088 x 512 x 128 18.7 and 17.0 on 128x192; the term moves these three
 *    layers and none of the other 41 (above K = 256 it is not charged:
 *    not measured there). */
static bool sm90_misaligned(const fp_gemm_request *r, int64_t NB) {
  const int64_t lda = r->lda > 0 ? r->lda : r->K;
  const int64_t ldb = r->ldb > 0 ? r->ldb : r->trans_b ? r->K : NB;
  return lda % 64 != 0 || ldb % 64 != 0;
}
static double sm90_config_cost(const cfg_row *c, int64_t M, int64_t NB, int64_t K, int sms,
                               int split_k) {
  const int64_t tiles = row_tiles(c, M, NB);
  const double waves = (double)ceil_div(tiles * split_k, sms > 0 ? sms : 1);
  const double eff = c->bn >= 256   ? 1.0
                     : c->bn >= 224 ? 0.95
                     : c->bn >= 192 ? 0.87
                     : c->bn >= 128 ? 0.81
                                    : 0.53;
  const double k_share = (double)ceil_div(K, split_k);
  /* the unpaired 128x256 rows' borrowed stage at small K (above) */
  const bool borrows = c->bn >= 256 && (c->flags & (FP_GEMM_CFG_PAIRED | FP_GEMM_CFG_B2B)) == 0;
  const double epi_k = borrows && k_share <= 256.0 ? 48.0 : 0.0;
  return waves * (double)c->bm * (double)c->bn * (k_share / eff + epi_k);
}

static double sm90_row_factor(const cfg_row *c, const fp_gemm_request *r, int64_t NB) {
  return sm90_misaligned(r, NB) && (c->flags & FP_GEMM_CFG_CLUSTER2) == 0 ? 1.33 : 1.0;
}
static bool sm90_row_ok(const cfg_row *c, const fp_gemm_request *r, int64_t NB, int sms,
                        bool paired) {
  if (paired != ((c->flags & FP_GEMM_CFG_PAIRED) != 0))
    return false;
  const int64_t tiles = ceil_div(r->M, c->bm) * ceil_div(NB, c->bn);
  return (c->flags & FP_GEMM_CFG_CLUSTER2) == 0 || tiles >= 8 * (int64_t)sms ||
         sm90_misaligned(r, NB);
}

/* A gemm2 row's work: each block of BM rows computes its [BM, BN]
 * intermediate (K deep) and multiplies it by d ([BN, P]); a row wider than N
 * multiplies zeros, so the narrowest row that holds N wins (on an H100, a
 * 256-wide row took 8192 x 128 x 4096 x 4096 in 128 us, two cuBLAS calls
 * 68 us). The 64-row rows (gemm_sm90_configs.h) halve a wave's work and run
 * two blocks an SM where shared memory holds two; on a tie (one wave either
 * way) the deeper ring, listed first, wins. */
static double b2b_cost(const cfg_row *c, const fp_gemm_request *r, const fp_gemm_device *d) {
  const int sms = d->sm_count > 0 ? d->sm_count : 1;
  const int per_sm = c->bm == 64 && 2 * ((uint64_t)c->smem + 1024) <= d->smem_optin + 1024 ? 2 : 1;
  const double waves = (double)ceil_div(ceil_div(r->M, c->bm), (int64_t)sms * per_sm);
  return waves * (double)c->bm * (double)c->bn * (double)(r->K + r->P);
}

bool fp_gemm_plan_make(const fp_gemm_request *r, const fp_gemm_device *d, fp_gemm_path force,
                       fp_gemm_plan *out, char *why, size_t whylen) {
  memset(out, 0, sizeof *out);
  if (r->M < 1 || r->N < 1 || r->K < 1 || (r->b2b && r->P < 1))
    return fail(why, whylen, "empty GEMM (M=%lld N=%lld K=%lld)", (long long)r->M, (long long)r->N,
                (long long)r->K);
  if (r->dtype != DT_F32 && !is_half(r->dtype))
    return fail(why, whylen, "no GEMM path for element type %d", r->dtype);
  const bool paired = !r->b2b && FP_EPI_PAIRED(r->epilogue);
  const int64_t NB = paired ? 2 * r->N : r->N;

  fp_gemm_path path;
  if (force != FP_GEMM_PATH_AUTO) {
    if (!path_can(force, r, d))
      return fail(why, whylen,
                  "FUSEPORT_CUDA_GEMM_PATH=%s cannot run this GEMM (%s, compute capability "
                  "%d.%d%s)",
                  path_names[force], r->dtype == DT_F32 ? "f32" : "f16/bf16", d->cc_major,
                  d->cc_minor, r->b2b ? ", back-to-back" : "");
    path = force;
  } else if (use_skinny(r)) {
    path = FP_GEMM_PATH_SKINNY;
  } else if (use_simt(r)) {
    path = FP_GEMM_PATH_SIMT;
  } else if (use_sm90(r, d)) {
    path = FP_GEMM_PATH_SM90;
  } else if (use_sm80(r, d)) {
    path = FP_GEMM_PATH_SM80;
  } else {
    return fail(why, whylen,
                "f16/bf16 GEMMs need tensor cores of compute capability 8.0 or later (this "
                "device is %d.%d)",
                d->cc_major, d->cc_minor);
  }

  out->path = path;
  out->aligned_rows = path == FP_GEMM_PATH_SM90 || path == FP_GEMM_PATH_SM80;
  /* a tuned configuration, if the cache has one that still fits the tables */
  const tuned_entry key = key_of(r, d, path);
  int tuned_config = -1, tuned_split = 1;
  if (tuning_lookup(&key, &tuned_config, &tuned_split)) {
    for (int k = 0; k < tables[path].n; ++k) {
      const cfg_row *c = &tables[path].rows[k];
      if (c->index != tuned_config || !row_fits(c, r, d, paired) || tuned_split < 1 ||
          (tuned_split > 1 && ((c->flags & FP_GEMM_CFG_SPLIT_K) == 0 || r->no_split)) ||
          (tuned_split > 1 && (c->flags & FP_GEMM_CFG_SWAP) != 0 && (c->bn / 8) % tuned_split))
        continue;
      plan_from_row(c, tuned_split, r, NB, out);
      out->tuned = true;
      return true;
    }
  }

  const cfg_row *best = NULL;
  double best_cost = 0.0;
  int best_split = 1;
  if (path == FP_GEMM_PATH_SKINNY && skinny_choose(r, d, paired, NB, &best, &best_split)) {
    plan_from_row(best, r->no_split ? 1 : best_split, r, NB, out);
    return true;
  }
  for (int k = 0; k < tables[path].n; ++k) {
    const cfg_row *c = &tables[path].rows[k];
    if (!row_fits(c, r, d, paired))
      continue;
    if (path == FP_GEMM_PATH_SM90 && !r->b2b && !sm90_row_ok(c, r, NB, d->sm_count, paired))
      continue;
    const bool sm90 = path == FP_GEMM_PATH_SM90;
    /* A SWAP row splits K only where the tuning cache asks (a split that
     * divides BN / 8): on ResNet-50's few-tile layers (H200, 2026-11-29)
     * every split of 2-7 summed in parallel ran slower than the unswapped
     * rows' plans, 10-20 us above what its main loops need; with the sum's
     * loads issued together (34e54ba) 2-4 us less, and still slower on every
     * one of the 24 cells forced (docs/results/2026-11-29-h200-conv-561287a,
     * split/). */
    const bool swap = (c->flags & FP_GEMM_CFG_SWAP) != 0;
    const int split = r->b2b || r->no_split || swap ? 1
                      : sm90 ? choose_split(c, r->M, NB, r->K, d->sm_count, r->im2col ? 2 : 4, 32)
                             : choose_split(c, r->M, NB, r->K, d->sm_count, 2, 4);
    const double cost =
        r->b2b ? b2b_cost(c, r, d)
        : sm90 ? sm90_config_cost(c, r->M, NB, r->K, d->sm_count, split) * sm90_row_factor(c, r, NB)
               : config_cost(c, r->M, NB, r->K, d->sm_count, split);
    if (best == NULL || cost < best_cost) {
      best = c;
      best_cost = cost;
      best_split = split;
    }
  }
  if (best == NULL) {
    if (r->b2b) { /* no tile holds the intermediate: two GEMMs through memory */
      out->config = -1;
      out->b2b_on_chip = false;
      out->split_k = 1;
      return true;
    }
    return fail(why, whylen,
                "the %s path has no configuration for this GEMM on %llu bytes of "
                "shared memory%s",
                path_names[path], (unsigned long long)d->smem_optin,
                paired ? " (paired epilogue)" : "");
  }
  plan_from_row(best, best_split, r, NB, out);
  return true;
}

/* ---- convolutions ----------------------------------------------------------------------- */

bool fp_conv_gemm_request(const fp_conv_gemm_shape *s, const fp_gemm_device *d, bool gemm_view,
                          fp_gemm_path *force, fp_gemm_request *req) {
  memset(req, 0, sizeof *req);
  if (!gemm_view || !s->nhwc)
    return false;
  req->dtype = s->dtype;
  req->epilogue = s->epilogue;
  req->trans_b = true;
  req->M = s->N * s->P * s->Q;
  req->N = s->K;
  req->K = s->C * s->R * s->S;
  req->lda = req->K;
  req->ldb = req->K;
  /* f32 runs on CUDA cores either way: the GEMM's SIMT tiles won for
   * C <= 256 (1.01-1.38x) and conv's implicit kernel for C >= 512 (GEMM
   * 0.68-1.03x) on ResNet-50's 1x1 layers at batch 32 (H200, 2026-11-28) */
  if (s->R == 1 && s->S == 1 && s->stride == 1 && s->pad == 0 &&
      (s->dtype != DT_F32 || s->C <= 256))
    return true;
  const int64_t coord_max = INT32_MAX - 1024; /* the Hopper kernel's int coordinates */
  const bool tma_im2col = s->pad <= 127 && s->pad - (s->R - 1) * s->dil >= -128 &&
                          s->pad - (s->S - 1) * s->dil >= -128 && s->stride <= 8;
  if (use_sm90(req, d) && (*force == FP_GEMM_PATH_AUTO || *force == FP_GEMM_PATH_SM90) &&
      s->C % 64 == 0 && s->K % 8 == 0 && tma_im2col && req->M <= coord_max && req->K <= coord_max) {
    req->im2col = true;
    *force = FP_GEMM_PATH_SM90;
    return true;
  }
  return false;
}

/* ---- dw_from_packed ---------------------------------------------------------------------- */

/* The split: the most K slices that keep every block in one wave (one
 * block an SM), each slice at least `depth` k-blocks deep, at most `cap`.
 * SIMT (the workspace reduction): depth 32, cap 16. Measured on an H100
 * (bits=2, 2026-11-27): a second wave costs more than the idle SMs
 * (100864 x 1024 x 1024: 324 us at 4 slices, 516 at 5), and short slices
 * lost to their pipeline fill and the workspace reduction. SM90, whose
 * blocks sum their tile's slices in parallel: depth 8, cap 16 (the most
 * gemm_dw_sm90.cu's sum holds in flight, kMaxParallelSplit). Measured on an
 * H200 (bits=2, 2026-11-28, forced splits 4..9): 8192 x 768 x 768 fastest
 * at 7 slices of 18 k-blocks (31.5 us; 39.0 at 4), 100864 x 768 x 768 at 7
 * (186.6), 8192 x 1024 x 1024 at 4 (42.1; from 5 slices, two waves). */
static int dw_split(int64_t tiles, int64_t K, int bk, int sms, int depth, int cap) {
  const int64_t kblocks = ceil_div(K, bk);
  int64_t s = sms / (tiles > 0 ? tiles : 1);
  if (s > kblocks / depth)
    s = kblocks / depth;
  if (s > cap)
    s = cap;
  return s >= 1 ? (int)s : 1;
}

bool fp_dw_plan_make(int64_t K, int64_t COUT, int64_t CIN, const fp_gemm_device *d,
                     fp_gemm_path force, fp_dw_plan *out, char *why, size_t whylen) {
  memset(out, 0, sizeof *out);
  if (K < 1 || COUT < 1 || CIN < 1 || K > INT32_MAX - 1024 || COUT > INT32_MAX - 1024 ||
      CIN > INT32_MAX - 1024) {
    snprintf(why, whylen, "K=%lld COUT=%lld CIN=%lld: each must be in [1, 2^31 - 1024)",
             (long long)K, (long long)COUT, (long long)CIN);
    return false;
  }
  const bool sm90 =
      fp_gemm_has_sm90() && d->cc_major == 9 && d->cc_minor == 0 && d->smem_optin >= 200u * 1024u;
  if (force == FP_GEMM_PATH_SM90 && !sm90) {
    snprintf(why, whylen,
             "the sm90 path needs an sm_90 device and a build with 90 among the "
             "CUDA architectures");
    return false;
  }
  if (sm90 && (force == FP_GEMM_PATH_AUTO || force == FP_GEMM_PATH_SM90)) {
    out->path = FP_GEMM_PATH_SM90;
    out->bm = 256; /* a dequantised B tile feeds 256 rows: half the loader's work a FLOP */
    out->bn = 128;
    out->bk = 64;
    out->stages = 4;
    out->threads = 512; /* two producer and two consumer warpgroups */
    out->aligned_rows = true;
  } else {
    out->path = FP_GEMM_PATH_SIMT;
    out->bm = 64;
    out->bn = 64;
    out->bk = 16;
    out->stages = 1;
    out->threads = 256;
    out->aligned_rows = false;
  }
  out->tiles = ceil_div(COUT, out->bm) * ceil_div(CIN, out->bn);
  const bool on_sm90 = out->path == FP_GEMM_PATH_SM90;
  out->split_k =
      dw_split(out->tiles, K, out->bk, d->sm_count > 0 ? d->sm_count : 1, on_sm90 ? 8 : 32, 16);
  /* FUSEPORT_CUDA_DW_SPLIT=N (1..64) forces the split, for tuning; the
   * recipe sizes its workspace from this same call */
  const char *forced = getenv("FUSEPORT_CUDA_DW_SPLIT");
  if (forced != NULL && *forced != '\0') {
    char *end = NULL;
    const long v = strtol(forced, &end, 10);
    if (*end != '\0' || v < 1 || v > 64) {
      snprintf(why, whylen, "FUSEPORT_CUDA_DW_SPLIT='%s': expected an integer in [1, 64]", forced);
      return false;
    }
    out->split_k = (int)v;
  }
  /* SM90's slices sum in parallel where the grid fits at once (gemm_dw_sm90.cu;
   * 16: its kMaxParallelSplit); its workspace has a second row of counters */
  out->parallel_reduce = on_sm90 && out->split_k >= 2 && out->split_k <= 16 &&
                         out->tiles * out->split_k <= (d->sm_count > 0 ? d->sm_count : 1);
  out->ws_bytes = split_ws_bytes(out->tiles, out->split_k, out->bm, out->bn);
  if (on_sm90 && out->ws_bytes > 0)
    out->ws_bytes += split_counters_bytes(out->tiles);
  return true;
}
