/* fuseport tests: the CUDA GEMM planner (backend/cuda/gemm_plan.h), on any
 * machine. It picks the path and the tile configuration of every fused GEMM
 * on CUDA, and the recipes' dry runs size workspaces and padding from the
 * same answers; a wrong answer would launch a configuration a device
 * cannot hold, a b2b tile too narrow for N, or a workspace of the wrong
 * size. */
#define _POSIX_C_SOURCE 200809L /* setenv, mkstemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

#include "fp_device_common.h"
#include "gemm_plan.h"

static const fp_gemm_device h100 = {9, 0, 132, 227 * 1024};
static const fp_gemm_device a100 = {8, 0, 108, 163 * 1024};
static const fp_gemm_device rtx3090 = {8, 6, 82, 99 * 1024};
static const fp_gemm_device turing = {7, 5, 40, 64 * 1024};

static fp_gemm_request req(int dtype, int64_t M, int64_t N, int64_t K, int epi) {
  fp_gemm_request r;
  memset(&r, 0, sizeof r);
  r.dtype = dtype;
  r.M = M;
  r.N = N;
  r.K = K;
  r.epilogue = epi;
  return r;
}

static fp_gemm_plan must_plan(const fp_gemm_request *r, const fp_gemm_device *d,
                              fp_gemm_path force) {
  fp_gemm_plan p;
  char why[256] = "";
  if (!fp_gemm_plan_make(r, d, force, &p, why, sizeof why))
    fail_msg("no plan for %lldx%lldx%lld dtype %d: %s", (long long)r->M, (long long)r->N,
             (long long)r->K, r->dtype, why);
  assert_true(p.smem_bytes <= d->smem_optin);
  assert_true(p.split_k >= 1);
  return p;
}

/* The named predicates: f32 on CUDA cores, up to 16 rows skinny, f16/bf16
 * on Hopper's or Ampere's tensor cores, nothing below sm_80. */
static void test_paths(void **state) {
  (void)state;
  fp_gemm_request r = req(0, 4096, 4096, 4096, FP_EPI_NONE);
  assert_int_equal(must_plan(&r, &h100, FP_GEMM_PATH_AUTO).path, FP_GEMM_PATH_SIMT);
  r = req(1, 8, 4096, 4096, FP_EPI_BIAS);
  assert_int_equal(must_plan(&r, &h100, FP_GEMM_PATH_AUTO).path, FP_GEMM_PATH_SKINNY);
  r = req(1, 17, 4096, 4096, FP_EPI_BIAS);
  fp_gemm_plan p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_int_equal(p.path, fp_gemm_has_sm90() ? FP_GEMM_PATH_SM90 : FP_GEMM_PATH_SM80);
  assert_true(p.aligned_rows);
  r = req(2, 4096, 4096, 4096, FP_EPI_RELU);
  assert_int_equal(must_plan(&r, &a100, FP_GEMM_PATH_AUTO).path, FP_GEMM_PATH_SM80);
  p = must_plan(&r, &rtx3090, FP_GEMM_PATH_AUTO);
  assert_int_equal(p.path, FP_GEMM_PATH_SM80);
  assert_true(p.smem_bytes <= 99 * 1024); /* sm_86's limit */
  fp_gemm_plan none;
  char why[256] = "";
  assert_false(fp_gemm_plan_make(&r, &turing, FP_GEMM_PATH_AUTO, &none, why, sizeof why));
  assert_non_null(strstr(why, "8.0"));
  /* forced paths: the sm80 loop on a Hopper GPU; not for float32 */
  p = must_plan(&r, &h100, FP_GEMM_PATH_SM80);
  assert_int_equal(p.path, FP_GEMM_PATH_SM80);
  r.dtype = 0;
  assert_false(fp_gemm_plan_make(&r, &h100, FP_GEMM_PATH_SM80, &none, why, sizeof why));
  assert_non_null(strstr(why, "FUSEPORT_CUDA_GEMM_PATH"));
  fp_gemm_path path;
  assert_true(fp_gemm_path_from_env("sm80", &path) && path == FP_GEMM_PATH_SM80);
  assert_true(fp_gemm_path_from_env(NULL, &path) && path == FP_GEMM_PATH_AUTO);
  assert_false(fp_gemm_path_from_env("sm70", &path));
}

/* Paired epilogues get paired configurations; b2b keeps N on chip only
 * where a configuration's tile holds it. */
static void test_paired_and_b2b(void **state) {
  (void)state;
  const int dtypes[] = {0, 1, 2};
  for (int d = 0; d < 3; ++d) {
    fp_gemm_request r = req(dtypes[d], 2048, 2048, 1024, FP_EPI_SPLIT_ACT);
    fp_gemm_plan p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
    assert_true((p.flags & FP_GEMM_CFG_PAIRED) != 0);
    r = req(dtypes[d], 4096, 64, 1024, FP_EPI_NONE);
    r.b2b = true;
    r.P = 4096;
    p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
    assert_true(p.b2b_on_chip);
    assert_true((p.flags & FP_GEMM_CFG_B2B) != 0 && p.bn >= 64);
    r.N = 100000;
    p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
    assert_false(p.b2b_on_chip);
  }
  /* the narrowest b2b tile that holds N (n = 1, 128, 255): a wider one multiplies zeros */
  const fp_gemm_device *devs[] = {&h100, &a100, &rtx3090};
  for (int k = 0; k < 3; ++k)
    for (int64_t n = 1; n <= 256; n += 127) {
      fp_gemm_request r = req(1, 8192, n, 4096, FP_EPI_NONE);
      r.b2b = true;
      r.P = 4096;
      const fp_gemm_plan p = must_plan(&r, devs[k], FP_GEMM_PATH_AUTO);
      assert_true(p.b2b_on_chip);
      if (devs[k] == &h100 && fp_gemm_has_sm90()) { /* 64-row units: rows of 64, 128, 256 */
        assert_int_equal(p.bm, 64);
        assert_int_equal(p.bn, n <= 64 ? 64 : n <= 128 ? 128 : 256);
      } else { /* sm_80: b2b rows of 128 and 256 */
        assert_int_equal(p.bn, n <= 128 ? 128 : 256);
      }
    }
  /* 64-row units: one block an SM with the deep ring while one wave holds
   * the units (8192 rows: 128 units on 132 SMs), two an SM past that */
  for (int64_t m = 8192; m <= 16384 && fp_gemm_has_sm90(); m *= 2) {
    fp_gemm_request r = req(1, m, 128, 1024, FP_EPI_NONE);
    r.b2b = true;
    r.P = 1024;
    const fp_gemm_plan p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
    assert_int_equal(p.bm, 64);
    assert_int_equal(p.bn, 128);
    assert_int_equal(p.stages, m == 8192 ? 8 : 3);
  }
}

/* Outside the skinny path a row is instantiated for paired epilogues or
 * for the others, not both: the plan must match the epilogue (f32 129 x
 * 1032 x 200, unpaired, was planned on simt's paired row and failed to
 * launch). Over odd shapes, each dtype and device. */
static void test_paired_rows_match_epilogue(void **state) {
  (void)state;
  const fp_gemm_device *devs[] = {&h100, &a100, &rtx3090};
  const int64_t sizes[] = {17, 77, 129, 200, 1000, 1032, 4097};
  const int epis[] = {FP_EPI_NONE, FP_EPI_BIAS_RELU, FP_EPI_SPLIT_ACT, FP_EPI_GEGLU};
  for (int k = 0; k < 3; ++k)
    for (int dt = 0; dt < 3; ++dt)
      for (int e = 0; e < 4; ++e)
        for (int i = 0; i < 7; ++i)
          for (int j = 0; j < 7; ++j) {
            fp_gemm_request r = req(dt, sizes[i], sizes[j], sizes[(i + j) % 7], epis[e]);
            const fp_gemm_plan p = must_plan(&r, devs[k], FP_GEMM_PATH_AUTO);
            const bool paired_row = (p.flags & FP_GEMM_CFG_PAIRED) != 0;
            if (FP_EPI_PAIRED(epis[e]))
              assert_true(paired_row);
            else if (p.path != FP_GEMM_PATH_SKINNY)
              assert_false(paired_row);
          }
}

/* Split-K where the tiles leave the GPU idle and K is deep, with the
 * workspace gemm_common.cuh lays out; none for a GEMM that fills it. */
static void test_split_k(void **state) {
  (void)state;
  fp_gemm_request r = req(1, 256, 256, 65536, FP_EPI_BIAS);
  fp_gemm_plan p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_true(p.split_k > 1);
  const int64_t tiles = ((256 + p.bm - 1) / p.bm) * ((256 + p.bn - 1) / p.bn);
  const uint64_t counters = ((uint64_t)tiles * 4 + 255) / 256 * 256;
  assert_int_equal(p.ws_bytes,
                   counters + (uint64_t)p.split_k * (uint64_t)tiles * (uint64_t)p.bm * p.bn * 4);
  r = req(1, 8192, 8192, 8192, FP_EPI_BIAS);
  p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_int_equal(p.split_k, 1);
  assert_int_equal(p.ws_bytes, 0);
}

/* A caller without a workspace (conv.cu's 1x1 convolutions as GEMMs) is
 * never planned a split, on any path that would split the same shape, and
 * a convolution's batch-norm epilogue plans as an unpaired one. */
static void test_no_split(void **state) {
  (void)state;
  const fp_gemm_request shapes[] = {
      req(1, 256, 256, 65536, FP_EPI_BIAS), /* f16: the tensor-core paths */
      req(1, 1, 4096, 4096, FP_EPI_RELU),   /* skinny */
      req(0, 256, 256, 65536, FP_EPI_BIAS), /* f32: CUDA cores */
      req(1, 256, 256, 65536, FP_CONV_EPI_BN),
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
    fp_gemm_request r = shapes[i];
    const fp_gemm_plan split = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
    assert_true(split.split_k > 1);
    r.no_split = true;
    const fp_gemm_plan p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
    assert_int_equal(p.path, split.path);
    assert_int_equal(p.split_k, 1);
    assert_int_equal(p.ws_bytes, 0);
    assert_false((p.flags & FP_GEMM_CFG_PAIRED) != 0 && p.path != FP_GEMM_PATH_SKINNY);
  }
}

/* Which convolutions run on the GEMM core (fp_conv_gemm_request): NHWC 1x1
 * layers at stride 1 as plain GEMMs on any path; other NHWC f16/bf16 layers
 * that TMA's im2col mode takes as im2col GEMMs, on Hopper's path only; the
 * rest on conv's own kernels. The recipe sizes the split-K workspace from
 * the same request: a layer of few tiles and a long K splits. */
static fp_conv_gemm_shape conv_shape(int dtype, int64_t N, int64_t C, int64_t H, int64_t K,
                                     int64_t R, int64_t stride, int64_t pad) {
  fp_conv_gemm_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = dtype;
  s.epilogue = FP_EPI_BIAS_RELU;
  s.nhwc = true;
  s.N = N;
  s.C = C;
  s.H = s.W = H;
  s.K = K;
  s.R = s.S = R;
  s.stride = stride;
  s.pad = pad;
  s.dil = 1;
  s.P = s.Q = (H + 2 * pad - (R - 1) - 1) / stride + 1;
  return s;
}

static void test_conv_requests(void **state) {
  (void)state;
  fp_gemm_request r;
  fp_gemm_path force = FP_GEMM_PATH_AUTO;
  /* 1x1 at stride 1: x [N*H*W, C] @ w [K, C]^T on whatever path plans it */
  fp_conv_gemm_shape s = conv_shape(1, 32, 256, 56, 64, 1, 1, 0);
  assert_true(fp_conv_gemm_request(&s, &a100, true, &force, &r));
  assert_int_equal(force, FP_GEMM_PATH_AUTO);
  assert_false(r.im2col);
  assert_true(r.trans_b);
  assert_int_equal(r.M, 32 * 56 * 56);
  assert_int_equal(r.N, 64);
  assert_int_equal(r.K, 256);
  assert_int_equal(r.epilogue, FP_EPI_BIAS_RELU);
  assert_false(fp_conv_gemm_request(&s, &a100, false, &force, &r)); /* FUSEPORT_CUDA_CONV_GEMM=0 */
  s.nhwc = false;
  assert_false(fp_conv_gemm_request(&s, &h100, true, &force, &r));
  s = conv_shape(0, 32, 512, 28, 128, 1, 1, 0); /* f32 past C = 256: conv's own kernel */
  assert_false(fp_conv_gemm_request(&s, &h100, true, &force, &r));

  /* 3x3 (ResNet-50's 512 x 7 x 7 at batch 32): an im2col GEMM on Hopper */
  s = conv_shape(1, 32, 512, 7, 512, 3, 1, 1);
  const bool sm90 = fp_gemm_has_sm90();
  force = FP_GEMM_PATH_AUTO;
  assert_int_equal(fp_conv_gemm_request(&s, &h100, true, &force, &r), sm90);
  if (sm90) {
    assert_true(r.im2col);
    assert_int_equal(force, FP_GEMM_PATH_SM90);
    assert_int_equal(r.M, 32 * 7 * 7);
    assert_int_equal(r.K, 9 * 512);
    assert_int_equal(r.lda, 9 * 512);
    /* 13 x 4 tiles of 128 x 128 on 132 SMs, 72 k-blocks each: split-K */
    const fp_gemm_plan p = must_plan(&r, &h100, force);
    assert_int_equal(p.path, FP_GEMM_PATH_SM90);
    assert_true(p.split_k > 1);
    assert_true(p.ws_bytes > 0);
    assert_int_equal(p.flags & FP_GEMM_CFG_PAIRED, 0);
    r.no_split = true; /* no workspace passed */
    assert_int_equal(must_plan(&r, &h100, force).split_k, 1);
  }
  force = FP_GEMM_PATH_SM80; /* a forced path other than Hopper's: conv's own kernels */
  assert_false(fp_conv_gemm_request(&s, &h100, true, &force, &r));
  force = FP_GEMM_PATH_AUTO;
  assert_false(fp_conv_gemm_request(&s, &a100, true, &force, &r));
  const fp_conv_gemm_shape off[] = {
      conv_shape(1, 2, 72, 9, 64, 3, 1, 1),   /* C % 64 != 0 */
      conv_shape(1, 2, 64, 9, 60, 3, 1, 1),   /* K % 8 != 0 */
      conv_shape(0, 2, 64, 9, 64, 3, 1, 1),   /* f32 */
      conv_shape(1, 2, 64, 99, 64, 3, 9, 1),  /* stride past 8 */
      conv_shape(1, 1, 64, 300, 8, 131, 1, 0) /* (R - 1) dil past pad + 128 */
  };
  for (size_t i = 0; i < sizeof off / sizeof off[0]; ++i) {
    force = FP_GEMM_PATH_AUTO;
    assert_false(fp_conv_gemm_request(&off[i], &h100, true, &force, &r));
  }
}

/* The sm90 rules read the rows as launched: 4096 x 4096 x 4104 (rows of
 * 8208 bytes, not whole 128-byte lines) takes a cluster row, the same GEMM
 * on copies padded to 4160 does not. */
static void test_sm90_padded_rows(void **state) {
  (void)state;
  fp_gemm_request r = req(1, 4096, 4096, 4104, FP_EPI_RELU);
  r.trans_b = true;
  fp_gemm_plan p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  if (!fp_gemm_has_sm90()) { /* a build without the sm90 path (CI's): its rows are not there */
    assert_int_equal(p.path, FP_GEMM_PATH_SM80);
    return;
  }
  assert_int_equal(p.path, FP_GEMM_PATH_SM90);
  assert_true((p.flags & FP_GEMM_CFG_CLUSTER2) != 0);
  r.lda = 4160;
  r.ldb = 4160;
  p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_true((p.flags & FP_GEMM_CFG_CLUSTER2) == 0);
  r.lda = 4104; /* dense, as 0 means */
  r.ldb = 0;
  assert_true((must_plan(&r, &h100, FP_GEMM_PATH_AUTO).flags & FP_GEMM_CFG_CLUSTER2) != 0);
}

/* The swapped rows (out^T = B A^T, M cut in tiles of 192 or 224) where
 * they fit M to the SMs, on K-major B and per-column epilogues only:
 * 1568 x 2048 takes 7 x 16 tiles of 224 (cuBLASLt's choice on an H200),
 * 6272 x 512 33 x 4 of 192; 4096^3 keeps 128 x 256 in clusters; B
 * row-major, a full add tensor and N % 8 != 0 never swap; an im2col may. */
static void test_sm90_swap(void **state) {
  (void)state;
  if (!fp_gemm_has_sm90())
    skip(); /* a build without the sm90 path (CI's sanitizer builds): no rows to plan */
  fp_gemm_request r = req(1, 1568, 2048, 512, FP_EPI_BIAS);
  r.trans_b = true;
  fp_gemm_plan p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_true((p.flags & FP_GEMM_CFG_SWAP) != 0);
  assert_int_equal(p.bn, 224);
  assert_int_equal(p.split_k, 1);
  r = req(1, 6272, 512, 1024, FP_CONV_EPI_BN);
  r.trans_b = true;
  p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_true((p.flags & FP_GEMM_CFG_SWAP) != 0);
  assert_int_equal(p.bn, 192);
  r = req(1, 4096, 4096, 4096, FP_EPI_RELU);
  r.trans_b = true;
  assert_true((must_plan(&r, &h100, FP_GEMM_PATH_AUTO).flags & FP_GEMM_CFG_SWAP) == 0);
  r = req(1, 1568, 2048, 512, FP_EPI_BIAS); /* B [K, N] */
  assert_true((must_plan(&r, &h100, FP_GEMM_PATH_AUTO).flags & FP_GEMM_CFG_SWAP) == 0);
  r.trans_b = true;
  r.epilogue = FP_EPI_ADD;
  assert_true((must_plan(&r, &h100, FP_GEMM_PATH_AUTO).flags & FP_GEMM_CFG_SWAP) == 0);
  r.epilogue = FP_EPI_BIAS;
  r.N = 2044;
  assert_true((must_plan(&r, &h100, FP_GEMM_PATH_AUTO).flags & FP_GEMM_CFG_SWAP) == 0);
  /* a 3x3 layer's im2col GEMM at batch 32 (128x28 -> 128): 196 tiles of 128 x 128, or 131
   * swapped tiles of 192 */
  r = req(1, 25088, 128, 1152, FP_EPI_BIAS_RELU);
  r.trans_b = true;
  r.im2col = true;
  p = must_plan(&r, &h100, FP_GEMM_PATH_SM90);
  assert_true((p.flags & FP_GEMM_CFG_SWAP) != 0);
  assert_int_equal(p.bn, 192);
  /* few swapped tiles and a long K (ResNet-50's 2048x7 -> 512 1x1 layer at batch 32): a SWAP
   * row splits only where the tuning cache asks (test_tuning_cache) */
  r = req(1, 1568, 512, 2048, FP_EPI_BIAS_RELU);
  r.trans_b = true;
  p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_true((p.flags & FP_GEMM_CFG_SWAP) == 0 || p.split_k == 1);
  /* K <= 256 and many tiles (ResNet-50's 64x56 -> 256 and 128x28 -> 512 1x1 layers at batch
   * 32): the 128x256 rows pay for their borrowed stage, the swapped rows win; at K = 512 the
   * same M and N keep 128x256 tiles */
  r = req(1, 100352, 256, 64, FP_EPI_BIAS_RELU);
  r.trans_b = true;
  assert_true((must_plan(&r, &h100, FP_GEMM_PATH_AUTO).flags & FP_GEMM_CFG_SWAP) != 0);
  r.K = 512;
  p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_true((p.flags & FP_GEMM_CFG_SWAP) == 0 && p.bn == 256);
  r = req(1, 25088, 512, 128, FP_EPI_BIAS_RELU);
  r.trans_b = true;
  p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_true((p.flags & FP_GEMM_CFG_SWAP) != 0);
  assert_int_equal(p.bn, 192);
}

/* Skinny f16 (M <= 8) whose column tiles fill at most half the SMs splits
 * K to about one block an SM (1x4096x4096: 64 tiles of 64 columns, split 2
 * on 132 SMs); M = 16 and GEMMs with enough tiles stay unsplit. */
static void test_skinny_split(void **state) {
  (void)state;
  fp_gemm_request r = req(1, 1, 4096, 4096, FP_EPI_RELU);
  fp_gemm_plan p = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_int_equal(p.path, FP_GEMM_PATH_SKINNY);
  const int64_t tiles = (4096 + p.bn - 1) / p.bn;
  assert_true(tiles * 2 <= 132);
  assert_int_equal(p.split_k, 132 / tiles);
  assert_true(p.ws_bytes > 0);
  r.trans_b = true;
  assert_int_equal(must_plan(&r, &h100, FP_GEMM_PATH_AUTO).split_k, 132 / tiles);
  r = req(1, 8, 4096, 4096, FP_EPI_NONE);
  assert_int_equal(must_plan(&r, &h100, FP_GEMM_PATH_AUTO).split_k, 132 / tiles);
  r = req(1, 16, 4096, 4096, FP_EPI_NONE);
  assert_int_equal(must_plan(&r, &h100, FP_GEMM_PATH_AUTO).split_k, 1);
  r = req(1, 1, 11008, 4096, FP_EPI_NONE);
  assert_int_equal(must_plan(&r, &h100, FP_GEMM_PATH_AUTO).split_k, 1);
  r = req(1, 1, 4096, 128, FP_EPI_NONE); /* too shallow for two k-steps a share */
  assert_int_equal(must_plan(&r, &h100, FP_GEMM_PATH_AUTO).split_k, 1);
}

/* The planner is a function: the dry run and the launch agree. */
static void test_deterministic(void **state) {
  (void)state;
  const int64_t sizes[] = {1, 7, 16, 17, 100, 1000, 4097, 8192};
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      for (int e = 0; e < FP_EPI_COUNT; ++e) {
        fp_gemm_request r = req(e % 3, sizes[a], sizes[b], sizes[(a + b) % 8], e);
        fp_gemm_plan p1 = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
        fp_gemm_plan p2 = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
        assert_memory_equal(&p1, &p2, sizeof p1);
        fp_gemm_plan p3 = must_plan(&r, &rtx3090, FP_GEMM_PATH_AUTO);
        assert_true(p3.path != FP_GEMM_PATH_SM90);
      }
}

/* FUSEPORT_CUDA_GEMM_TUNE: a recorded candidate is what later plans of the
 * same problem and device use, and it is in the file; other problems and
 * devices are not affected. */
static void test_tuning_cache(void **state) {
  (void)state;
  char path[] = "/tmp/fuseport-tune-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(setenv("FUSEPORT_CUDA_GEMM_TUNE", path, 1), 0);
  assert_true(fp_gemm_tuning_enabled());
  fp_gemm_request r = req(1, 3000, 3000, 3000, FP_EPI_RELU);
  fp_gemm_plan planned = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_false(planned.tuned);
  fp_gemm_plan cands[32];
  int n = fp_gemm_plan_candidates(&r, &h100, &planned, cands, 32);
  assert_true(n >= 2);
  assert_memory_equal(&cands[0], &planned, sizeof planned);
  /* pick a candidate other than the heuristic's */
  const fp_gemm_plan *pick = &cands[n - 1];
  char why[256];
  assert_true(fp_gemm_tuning_record(&r, &h100, pick, 123.5, why, sizeof why));
  fp_gemm_plan tuned = must_plan(&r, &h100, FP_GEMM_PATH_AUTO);
  assert_true(tuned.tuned);
  assert_int_equal(tuned.config, pick->config);
  assert_int_equal(tuned.split_k, pick->split_k);
  fp_gemm_plan other = must_plan(&r, &a100, FP_GEMM_PATH_AUTO);
  assert_false(other.tuned);
  /* a convolution's im2col GEMM of the same M, N, K is a problem of its
   * own: not tuned by r's line, and its own line leaves r's choice (on a
   * build with the Hopper path: no other plans an im2col GEMM) */
  const bool sm90 = fp_gemm_has_sm90();
  if (sm90) {
    fp_gemm_request ri = r;
    ri.im2col = true;
    fp_gemm_plan im = must_plan(&ri, &h100, FP_GEMM_PATH_SM90);
    assert_false(im.tuned);
    n = fp_gemm_plan_candidates(&ri, &h100, &im, cands, 32);
    assert_true(n >= 2);
    const int im_config = cands[0].config == pick->config ? cands[1].config : cands[0].config;
    const fp_gemm_plan *im_pick = cands[0].config == pick->config ? &cands[1] : &cands[0];
    assert_true(fp_gemm_tuning_record(&ri, &h100, im_pick, 99.0, why, sizeof why));
    assert_int_equal(must_plan(&ri, &h100, FP_GEMM_PATH_SM90).config, im_config);
    assert_true(must_plan(&ri, &h100, FP_GEMM_PATH_SM90).tuned);
    /* a tuned split of a SWAP row (1568 x 512 x 2048: 4 x 7 tiles of 224) gets a workspace
     * with both rows of counters (arrivals, departures); a split that does not divide
     * BN / 8 is not taken */
    fp_gemm_request rs = req(1, 1568, 512, 2048, FP_EPI_BIAS);
    rs.trans_b = true;
    fp_gemm_plan sw = must_plan(&rs, &h100, FP_GEMM_PATH_SM90);
    fp_gemm_plan swap_cands[32]; /* cands still holds pick */
    const int ns = fp_gemm_plan_candidates(&rs, &h100, &sw, swap_cands, 32);
    int k224 = -1;
    for (int k = 0; k < ns; ++k)
      if ((swap_cands[k].flags & FP_GEMM_CFG_SWAP) != 0 && swap_cands[k].bn == 224)
        k224 = k;
    assert_true(k224 >= 0);
    fp_gemm_plan want = swap_cands[k224];
    want.split_k = 3; /* 28 % 3 != 0 */
    assert_true(fp_gemm_tuning_record(&rs, &h100, &want, 10.0, why, sizeof why));
    assert_false(must_plan(&rs, &h100, FP_GEMM_PATH_SM90).tuned);
    want.split_k = 4;
    assert_true(fp_gemm_tuning_record(&rs, &h100, &want, 9.0, why, sizeof why));
    const fp_gemm_plan got = must_plan(&rs, &h100, FP_GEMM_PATH_SM90);
    assert_true(got.tuned);
    assert_int_equal(got.split_k, 4);
    const uint64_t tiles = (512 / 128) * ((1568 + 223) / 224),
                   counters = (tiles * 4 + 255) / 256 * 256;
    assert_int_equal(got.ws_bytes, 2 * counters + 4 * tiles * 128 * 224 * 4);
    assert_int_equal(must_plan(&r, &h100, FP_GEMM_PATH_AUTO).config, pick->config);
  }
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[512];
  int lines = 0;
  while (fgets(line, sizeof line, f) != NULL)
    lines += strncmp(line, "v1 ", 3) == 0;
  fclose(f);
  assert_int_equal(lines, sm90 ? 4 : 1); /* r, ri and rs twice */
  assert_int_equal(unsetenv("FUSEPORT_CUDA_GEMM_TUNE"), 0);
  assert_false(must_plan(&r, &h100, FP_GEMM_PATH_AUTO).tuned);
  remove(path);
}

/* dw_from_packed: the Hopper path where the build has it, else CUDA cores;
 * one wave of blocks; on SM90 up to 16 slices of at least 8 k-blocks that
 * sum in parallel (a second row of counters in the workspace), elsewhere
 * slices of at least 32 k-blocks; the workspace fits the split;
 * FUSEPORT_CUDA_DW_SPLIT forces the split and is checked, and a forced
 * split past one wave sums in the last block. */
static void test_dw_plan(void **state) {
  (void)state;
  char why[256];
  fp_dw_plan p;
  assert_true(fp_dw_plan_make(8192, 768, 768, &h100, FP_GEMM_PATH_AUTO, &p, why, sizeof why));
  const bool sm90 = fp_gemm_has_sm90();
  assert_int_equal(p.path, sm90 ? FP_GEMM_PATH_SM90 : FP_GEMM_PATH_SIMT);
  assert_true(p.split_k == 1 || p.tiles * p.split_k <= 132);
  const uint64_t slices = (uint64_t)p.split_k * (uint64_t)p.tiles * (uint64_t)(p.bm * p.bn) * 4u;
  if (p.split_k > 1)
    assert_true(p.ws_bytes >= slices + (uint64_t)p.tiles * 4u);
  else
    assert_int_equal(p.ws_bytes, 0);
  if (sm90) { /* 18 tiles of 256 x 128: 7 slices of 18 k-blocks, summed in parallel */
    assert_int_equal(p.split_k, 7);
    assert_true(p.parallel_reduce);
    assert_true(p.ws_bytes >= slices + 2u * 256u); /* both rows of counters */
    assert_true(p.aligned_rows);
    assert_true(fp_dw_plan_make(100864, 768, 768, &h100, FP_GEMM_PATH_AUTO, &p, why, sizeof why));
    assert_int_equal(p.split_k, 7);
    assert_true(p.parallel_reduce);
    /* one tile: 16 slices at most */
    assert_true(fp_dw_plan_make(100864, 200, 100, &h100, FP_GEMM_PATH_AUTO, &p, why, sizeof why));
    assert_int_equal(p.split_k, 16);
    assert_true(p.parallel_reduce);
    /* 512 tiles: no split */
    assert_true(fp_dw_plan_make(8192, 4096, 4096, &h100, FP_GEMM_PATH_AUTO, &p, why, sizeof why));
    assert_int_equal(p.split_k, 1);
    assert_false(p.parallel_reduce);
    assert_int_equal(p.ws_bytes, 0);
    /* forced past one wave: the last block sums */
    setenv("FUSEPORT_CUDA_DW_SPLIT", "12", 1);
    assert_true(fp_dw_plan_make(8192, 768, 768, &h100, FP_GEMM_PATH_AUTO, &p, why, sizeof why));
    unsetenv("FUSEPORT_CUDA_DW_SPLIT");
    assert_int_equal(p.split_k, 12);
    assert_false(p.parallel_reduce);
    assert_true(p.ws_bytes >= 12u * 18u * 256u * 128u * 4u + 18u * 4u);
  } else {
    assert_true(8192 / (p.split_k * p.bk) >= 32 || p.split_k == 1);
    assert_false(p.parallel_reduce);
  }
  /* no sm_90: CUDA cores, any alignment; no split where the tiles fill the GPU */
  assert_true(fp_dw_plan_make(100864, 768, 768, &a100, FP_GEMM_PATH_AUTO, &p, why, sizeof why));
  assert_int_equal(p.path, FP_GEMM_PATH_SIMT);
  assert_false(p.aligned_rows);
  assert_false(p.parallel_reduce);
  assert_true(fp_dw_plan_make(16384, 4096, 4096, &a100, FP_GEMM_PATH_AUTO, &p, why, sizeof why));
  assert_int_equal(p.split_k, 1);
  assert_int_equal(p.ws_bytes, 0);
  assert_false(fp_dw_plan_make(8192, 768, 768, &a100, FP_GEMM_PATH_SM90, &p, why, sizeof why));
  assert_false(fp_dw_plan_make(0, 768, 768, &h100, FP_GEMM_PATH_AUTO, &p, why, sizeof why));
  setenv("FUSEPORT_CUDA_DW_SPLIT", "3", 1);
  assert_true(fp_dw_plan_make(8192, 768, 768, &a100, FP_GEMM_PATH_AUTO, &p, why, sizeof why));
  assert_int_equal(p.split_k, 3);
  assert_true(p.ws_bytes >= 3u * (uint64_t)p.tiles * (uint64_t)(p.bm * p.bn) * 4u);
  setenv("FUSEPORT_CUDA_DW_SPLIT", "3x", 1);
  assert_false(fp_dw_plan_make(8192, 768, 768, &a100, FP_GEMM_PATH_AUTO, &p, why, sizeof why));
  unsetenv("FUSEPORT_CUDA_DW_SPLIT");
}

/* fp_fastdiv (fp_device_common.h), the sm90 kernel's unit decode: exact
 * for every numerator below 2^31 it may see, on divisors of every size
 * (powers of two, their neighbours, primes, 1 and 2^31 - 1) and on the
 * numerators where a rounding error would show first (multiples of d and
 * their neighbours, the top of the range). */
static void check_fastdiv(fp_u32 d, fp_u64 *rng) {
  const fp_fastdiv f = fp_fastdiv_make(d);
  const fp_u32 top = 0x7fffffffu;
  const fp_u32 fixed[] = {0,   1,       d - 1,   d,           d + 1,          2 * d - 1,
                          top, top - 1, top - d, top / d * d, top / d * d - 1};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; ++i)
    if (fixed[i] <= top && fp_fastdiv_q(fixed[i], f) != fixed[i] / d)
      fail_msg("fastdiv %u / %u: %u, expected %u", fixed[i], d, fp_fastdiv_q(fixed[i], f),
               fixed[i] / d);
  for (int k = 0; k < 64; ++k) {
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    const fp_u32 n = (fp_u32)(*rng >> 33); /* 31 bits */
    const fp_u32 m = n / d * d;            /* a multiple of d and its neighbours */
    const fp_u32 cand[] = {n, m, m > 0 ? m - 1 : 0, m < top ? m + 1 : m};
    for (int c = 0; c < 4; ++c)
      if (fp_fastdiv_q(cand[c], f) != cand[c] / d)
        fail_msg("fastdiv %u / %u: %u, expected %u", cand[c], d, fp_fastdiv_q(cand[c], f),
                 cand[c] / d);
  }
}

static void test_fastdiv(void **state) {
  (void)state;
  fp_u64 rng = 0x9e3779b97f4a7c15ull;
  for (fp_u32 d = 1; d <= 2048; ++d)
    check_fastdiv(d, &rng);
  for (int b = 11; b <= 30; ++b) {
    const fp_u32 p = (fp_u32)1 << b;
    check_fastdiv(p - 1, &rng);
    check_fastdiv(p, &rng);
    check_fastdiv(p + 1, &rng);
  }
  const fp_u32 odd[] = {65537, 100003, 1000003, 16777259, 1073741827u, 2147483629u, 0x7fffffffu};
  for (size_t i = 0; i < sizeof odd / sizeof odd[0]; ++i)
    check_fastdiv(odd[i], &rng);
  for (int k = 0; k < 2000; ++k) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    check_fastdiv(1 + (fp_u32)(rng >> 34), &rng); /* 1 .. 2^30 */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_paths),
      cmocka_unit_test(test_paired_and_b2b),
      cmocka_unit_test(test_paired_rows_match_epilogue),
      cmocka_unit_test(test_split_k),
      cmocka_unit_test(test_no_split),
      cmocka_unit_test(test_conv_requests),
      cmocka_unit_test(test_skinny_split),
      cmocka_unit_test(test_sm90_padded_rows),
      cmocka_unit_test(test_sm90_swap),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_tuning_cache),
      cmocka_unit_test(test_dw_plan),
      cmocka_unit_test(test_fastdiv),
  };
  return cmocka_run_group_tests_name("gemm_plan", tests, NULL, NULL);
}
