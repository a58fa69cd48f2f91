/* fuseport tests: the backend contract, run against one backend
 * (argv[1]: cpu, opencl or cuda). Every backend must behave the same way
 * behind backend.h: same data movement, same errors, same counters. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp_device_common.h"
#include "test_util.h"

#define CTX fp_env.ctx

static void test_device_info(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const fp_device_info *d = fp_context_device(CTX);
  assert_non_null(d);
  assert_true(strlen(d->name) > 0);
  assert_true(d->global_mem_bytes > (1u << 20));
  assert_true(d->l2_cache_bytes > 0);
  assert_true(d->local_mem_bytes >= 16 * 1024);
  assert_true(d->max_group_size >= 32);
  assert_true(d->subgroup_width >= 1);
  assert_true(d->compute_units >= 1);
  assert_int_equal(fp_context_backend(CTX), fp_env.kind);
  assert_true(fp_context_mem_limit(CTX) > 0);
}

/* Writes and reads back odd sizes at odd offsets. */
static void test_write_read_roundtrip(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const uint64_t sizes[] = {1, 3, 1000, 65537};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
    uint64_t n = sizes[s];
    fp_buffer *buf = NULL;
    FP_ASSERT_OK(fp_buffer_alloc(CTX, n + 7, &buf));
    assert_int_equal(fp_buffer_size(buf), n + 7);
    assert_ptr_equal(fp_buffer_context(buf), CTX);
    unsigned char *src = malloc(n), *dst = malloc(n);
    uint64_t seed = fp_test_next_seed();
    for (uint64_t i = 0; i < n; ++i)
      src[i] = (unsigned char)(fp_philox_word(seed, i, 0, 0) & 0xFF);
    memset(dst, 0, n);
    FP_ASSERT_OK(fp_buffer_write(CTX, buf, 7, src, n));
    FP_ASSERT_OK(fp_buffer_read(CTX, buf, 7, dst, n));
    assert_memory_equal(src, dst, n);
    free(src);
    free(dst);
    fp_buffer_free(buf);
  }
}

static void test_fill_patterns(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const size_t psizes[] = {1, 2, 4, 8, 16};
  const unsigned char pattern[16] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                                     0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xF0, 0x0F};
  for (size_t k = 0; k < sizeof psizes / sizeof psizes[0]; ++k) {
    size_t ps = psizes[k];
    uint64_t n = ps * 1001, off = ps * 3;
    fp_buffer *buf = NULL;
    FP_ASSERT_OK(fp_buffer_alloc(CTX, n + 2 * off, &buf));
    unsigned char *host = malloc(n + 2 * off);
    memset(host, 0x5A, n + 2 * off);
    FP_ASSERT_OK(fp_buffer_write(CTX, buf, 0, host, n + 2 * off));
    FP_ASSERT_OK(fp_buffer_fill(CTX, buf, off, n, pattern, ps));
    FP_ASSERT_OK(fp_buffer_read(CTX, buf, 0, host, n + 2 * off));
    for (uint64_t i = 0; i < off; ++i) {
      assert_int_equal(host[i], 0x5A);           /* nothing written before the range */
      assert_int_equal(host[off + n + i], 0x5A); /* nor after it */
    }
    for (uint64_t i = 0; i < n; ++i)
      assert_int_equal(host[off + i], pattern[i % ps]);
    free(host);
    fp_buffer_free(buf);
  }
}

static void test_copy(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const uint64_t n = 4099;
  fp_buffer *a = NULL, *b = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(CTX, n, &a));
  FP_ASSERT_OK(fp_buffer_alloc(CTX, n, &b));
  unsigned char *src = malloc(n), *dst = malloc(n);
  for (uint64_t i = 0; i < n; ++i)
    src[i] = (unsigned char)(i * 7 + 1);
  FP_ASSERT_OK(fp_buffer_write(CTX, a, 0, src, n));
  unsigned char zero = 0;
  FP_ASSERT_OK(fp_buffer_fill(CTX, b, 0, n, &zero, 1));
  FP_ASSERT_OK(fp_buffer_copy(CTX, b, 5, a, 17, n - 100));
  FP_ASSERT_OK(fp_buffer_read(CTX, b, 0, dst, n));
  for (uint64_t i = 0; i < n; ++i)
    assert_int_equal(dst[i], (i >= 5 && i < 5 + n - 100) ? src[i - 5 + 17] : 0);
  /* overlapping ranges of one buffer are refused, not silently corrupted */
  FP_ASSERT_ERR(fp_buffer_copy(CTX, a, 0, a, 10, 100), FP_ERR_INVALID_ARGUMENT, "overlap");
  free(src);
  free(dst);
  fp_buffer_free(a);
  fp_buffer_free(b);
}

/* fill_uniform_f32 on the device equals the host's generator bit for bit:
 * the reference check regenerates inputs on the host and relies on it. */
static void test_fill_uniform_matches_host(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const int64_t n = 65537;
  fp_buffer *buf = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(CTX, (uint64_t)n * 4, &buf));
  float *host = malloc((size_t)n * 4);
  const float scales[] = {1.0f, 4.0f, 0.0009765625f};
  for (int positive = 0; positive < 2; ++positive)
    for (size_t s = 0; s < 3; ++s) {
      uint64_t seed = fp_test_next_seed();
      fp_arg args[] = {fp_arg_buf(buf), fp_arg_i64(n),         fp_arg_i64((int64_t)seed),
                       fp_arg_i32(3),   fp_arg_f32(scales[s]), fp_arg_i32(positive)};
      fp_ndrange nd = fp_ndrange_1d(7, 64);
      FP_ASSERT_OK(fp_launch(CTX, FPK_fill_uniform_f32, &nd, args, 6));
      FP_ASSERT_OK(fp_buffer_read(CTX, buf, 0, host, (uint64_t)n * 4));
      int64_t zeros = 0;
      for (int64_t i = 0; i < n; ++i) {
        float want = fp_uniform_f32(seed, 3, (uint64_t)i, scales[s], positive);
        if (memcmp(&want, &host[i], 4) != 0)
          fail_msg("element %lld: device %.9g, host %.9g", (long long)i, host[i], want);
        assert_true(positive ? (host[i] >= 0.0f && host[i] < scales[s])
                             : (host[i] >= -scales[s] && host[i] < scales[s]));
        zeros += host[i] == 0.0f;
      }
      assert_true(zeros < 8); /* random data, never a block of zeros */
    }
  free(host);
  fp_buffer_free(buf);
}

static void test_events_time_work(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  fp_event *start = NULL, *end = NULL;
  FP_ASSERT_OK(fp_event_create(CTX, &start));
  FP_ASSERT_OK(fp_event_create(CTX, &end));
  FP_ASSERT_ERR(fp_event_elapsed_ms(CTX, start, end, &(double){0}), FP_ERR_INVALID_ARGUMENT,
                "recorded");
  const uint64_t bytes = 64ull << 20;
  fp_buffer *buf = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(CTX, bytes, &buf));
  uint32_t pattern = 0x3F800000u;
  FP_ASSERT_OK(fp_event_record(CTX, start));
  for (int k = 0; k < 4; ++k)
    FP_ASSERT_OK(fp_buffer_fill(CTX, buf, 0, bytes, &pattern, 4));
  FP_ASSERT_OK(fp_event_record(CTX, end));
  FP_ASSERT_OK(fp_event_synchronize(CTX, end));
  double ms = -1.0;
  FP_ASSERT_OK(fp_event_elapsed_ms(CTX, start, end, &ms));
  /* 256 MiB of writes take measurable time on any device, and not minutes */
  assert_true(ms > 0.0);
  assert_true(ms < 60000.0);
  /* reversed order: no positive time */
  double back = 0.0;
  FP_ASSERT_OK(fp_event_elapsed_ms(CTX, end, start, &back));
  assert_true(back <= 0.0);
  FP_ASSERT_OK(fp_finish(CTX));
  fp_buffer_free(buf);
  fp_event_destroy(start);
  fp_event_destroy(end);
}

static void test_counters(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  fp_counters_reset(CTX);
  fp_counters c0, c1, c2, c3;
  fp_counters_get(CTX, &c0);
  assert_int_equal(c0.kernels_launched, 0);
  assert_int_equal(c0.allocations, 0);
  assert_int_equal(c0.bytes_peak, c0.bytes_current);
  fp_buffer *a = NULL, *b = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(CTX, 1000, &a));
  FP_ASSERT_OK(fp_buffer_alloc(CTX, 3000, &b));
  fp_counters_get(CTX, &c1);
  assert_int_equal(c1.allocations, 2);
  assert_int_equal(c1.bytes_allocated, 4000);
  assert_int_equal(c1.bytes_current, c0.bytes_current + 4000);
  assert_int_equal(c1.bytes_peak, c0.bytes_current + 4000);
  fp_arg args[] = {fp_arg_buf(b), fp_arg_i64(750),  fp_arg_i64(1),
                   fp_arg_i32(0), fp_arg_f32(1.0f), fp_arg_i32(0)};
  fp_ndrange nd = fp_ndrange_1d(3, 32);
  FP_ASSERT_OK(fp_launch(CTX, FPK_fill_uniform_f32, &nd, args, 6));
  FP_ASSERT_OK(fp_launch_by_name(CTX, "fill_uniform_f32", &nd, args, 6));
  fp_buffer_free(b);
  fp_counters_get(CTX, &c2);
  assert_int_equal(c2.kernels_launched, 2);
  assert_int_equal(c2.bytes_current, c0.bytes_current + 1000);
  assert_int_equal(c2.bytes_peak, c0.bytes_current + 4000); /* the high-water mark stays */
  /* a refused launch is not counted */
  assert_int_not_equal(fp_launch(CTX, FPK_fill_uniform_f32, &nd, args, 5), FP_OK);
  fp_buffer_free(a);
  fp_counters_reset(CTX);
  fp_counters_get(CTX, &c3);
  assert_int_equal(c3.kernels_launched, 0);
  assert_int_equal(c3.bytes_current, c0.bytes_current);
  assert_int_equal(c3.bytes_peak, c0.bytes_current);
}

/* Under a lowered cap an allocation fails as a device OOM does, says so,
 * changes no counter and leaves the context usable. */
static void test_out_of_memory_under_cap(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  uint64_t saved = fp_context_mem_limit(CTX);
  fp_counters before, after;
  fp_counters_get(CTX, &before);
  FP_ASSERT_OK(fp_context_set_mem_limit(CTX, before.bytes_current + (1u << 20)));
  fp_buffer *ok = NULL, *big = (fp_buffer *)&ok;
  FP_ASSERT_OK(fp_buffer_alloc(CTX, 512u << 10, &ok));
  FP_ASSERT_ERR(fp_buffer_alloc(CTX, 768u << 10, &big), FP_ERR_OUT_OF_MEMORY,
                "out of device memory");
  assert_null(big);
  assert_true(strstr(fp_context_error(CTX), "out of device memory") != NULL);
  fp_counters_get(CTX, &after);
  assert_int_equal(after.bytes_current, before.bytes_current + (512u << 10));
  fp_buffer_free(ok);
  FP_ASSERT_OK(fp_context_set_mem_limit(CTX, 0)); /* back to the device's own */
  assert_int_equal(fp_context_mem_limit(CTX), saved);
  FP_ASSERT_OK(fp_buffer_alloc(CTX, 768u << 10, &big));
  fp_buffer_free(big);
}

/* Every call refuses bad arguments with a status and a message naming them. */
static void test_bad_arguments(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  fp_buffer *buf = NULL, *none = NULL;
  char host[64] = {0};
  FP_ASSERT_ERR(fp_buffer_alloc(NULL, 16, &buf), FP_ERR_INVALID_ARGUMENT, "context is NULL");
  FP_ASSERT_ERR(fp_buffer_alloc(CTX, 0, &buf), FP_ERR_INVALID_ARGUMENT, "0 bytes");
  FP_ASSERT_ERR(fp_buffer_alloc(CTX, 16, NULL), FP_ERR_INVALID_ARGUMENT, "out is NULL");
  FP_ASSERT_ERR(fp_buffer_alloc(CTX, UINT64_MAX, &buf), FP_ERR_OUT_OF_MEMORY, "requested");
  FP_ASSERT_OK(fp_buffer_alloc(CTX, 64, &buf));
  FP_ASSERT_ERR(fp_buffer_write(CTX, none, 0, host, 4), FP_ERR_INVALID_ARGUMENT, "NULL");
  FP_ASSERT_ERR(fp_buffer_write(CTX, buf, 0, NULL, 4), FP_ERR_INVALID_ARGUMENT, "NULL");
  FP_ASSERT_ERR(fp_buffer_write(CTX, buf, 60, host, 8), FP_ERR_INVALID_ARGUMENT, "outside");
  FP_ASSERT_ERR(fp_buffer_read(CTX, buf, UINT64_MAX, host, 8), FP_ERR_INVALID_ARGUMENT, "outside");
  FP_ASSERT_ERR(fp_buffer_read(CTX, buf, 0, host, 0), FP_ERR_INVALID_ARGUMENT, "0");
  FP_ASSERT_ERR(fp_buffer_fill(CTX, buf, 0, 12, host, 3), FP_ERR_INVALID_ARGUMENT, "pattern");
  FP_ASSERT_ERR(fp_buffer_fill(CTX, buf, 2, 8, host, 4), FP_ERR_INVALID_ARGUMENT, "multiples");
  FP_ASSERT_ERR(fp_buffer_copy(CTX, buf, 0, NULL, 0, 4), FP_ERR_INVALID_ARGUMENT, "source");
  FP_ASSERT_ERR(fp_finish(NULL), FP_ERR_INVALID_ARGUMENT, "NULL");
  FP_ASSERT_ERR(fp_event_record(CTX, NULL), FP_ERR_INVALID_ARGUMENT, "event is NULL");

  /* a buffer of another context is refused */
  fp_context_options opts;
  fp_context_options_init(&opts);
  fp_context *cpu = NULL;
  FP_ASSERT_OK(fp_context_create(&opts, &cpu));
  fp_buffer *foreign = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(cpu, 64, &foreign));
  FP_ASSERT_ERR(fp_buffer_read(CTX, foreign, 0, host, 4), FP_ERR_INVALID_ARGUMENT,
                "another context");
  fp_buffer_free(foreign);
  fp_context_destroy(cpu);

  /* launches: arguments checked against the kernel's signature */
  fp_kernel_id id;
  FP_ASSERT_ERR(fp_kernel_lookup(CTX, "no_such_kernel", &id), FP_ERR_NOT_FOUND, "no_such_kernel");
  FP_ASSERT_OK(fp_kernel_lookup(CTX, "prim_unary", &id));
  assert_int_equal(id, FPK_prim_unary);
  fp_arg good[] = {fp_arg_buf(buf), fp_arg_i64(16),   fp_arg_i64(1),
                   fp_arg_i32(0),   fp_arg_f32(1.0f), fp_arg_i32(0)};
  fp_arg wrong_kind[] = {fp_arg_buf(buf), fp_arg_i32(16),   fp_arg_i64(1),
                         fp_arg_i32(0),   fp_arg_f32(1.0f), fp_arg_i32(0)};
  fp_arg null_buf[] = {fp_arg_buf(NULL), fp_arg_i64(16),   fp_arg_i64(1),
                       fp_arg_i32(0),    fp_arg_f32(1.0f), fp_arg_i32(0)};
  fp_ndrange nd = fp_ndrange_1d(1, 32);
  FP_ASSERT_ERR(fp_launch(CTX, FPK_fill_uniform_f32, &nd, good, 5), FP_ERR_INVALID_ARGUMENT,
                "5 arguments");
  FP_ASSERT_ERR(fp_launch(CTX, FPK_fill_uniform_f32, &nd, wrong_kind, 6), FP_ERR_INVALID_ARGUMENT,
                "argument 1");
  FP_ASSERT_ERR(fp_launch(CTX, FPK_fill_uniform_f32, &nd, null_buf, 6), FP_ERR_INVALID_ARGUMENT,
                "NULL");
  FP_ASSERT_ERR(fp_launch(CTX, FPK_fill_uniform_f32, NULL, good, 6), FP_ERR_INVALID_ARGUMENT,
                "ndrange");
  FP_ASSERT_ERR(fp_launch(CTX, FPK_COUNT, &nd, good, 6), FP_ERR_NOT_FOUND, "out of range");
  fp_ndrange ragged = nd;
  ragged.global[0] = 33;
  FP_ASSERT_ERR(fp_launch(CTX, FPK_fill_uniform_f32, &ragged, good, 6), FP_ERR_INVALID_ARGUMENT,
                "multiple");
  fp_ndrange huge = fp_ndrange_1d(1, fp_context_device(CTX)->max_group_size * 2);
  FP_ASSERT_ERR(fp_launch(CTX, FPK_fill_uniform_f32, &huge, good, 6), FP_ERR_INVALID_ARGUMENT,
                "exceeds");
  FP_ASSERT_OK(fp_launch(CTX, FPK_fill_uniform_f32, &nd, good, 6));
  FP_ASSERT_OK(fp_finish(CTX));
  fp_buffer_free(buf);
}

/* A launch's buffers must hold what the kernel reaches (kernels.def's rule,
 * from the scalar arguments): a too-small buffer, a negative or overflowing
 * size, a strided view below element 0 and an optional buffer that the
 * launch reads but was passed as none are refused before any backend runs
 * the kernel (without the check, softmax wrote past the 100-byte buffer). */
static void test_launch_extents(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  fp_buffer *small = NULL, *big = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(CTX, 100, &small));
  FP_ASSERT_OK(fp_buffer_alloc(CTX, 4096, &big));
  fp_ndrange rows = fp_ndrange_1d(32, 32);
  /* softmax_fused(out, x, M, N): 5 x 7 floats are 140 bytes */
  fp_arg sm[] = {fp_arg_buf(small), fp_arg_buf(big), fp_arg_i64(5), fp_arg_i64(7)};
  FP_ASSERT_ERR(fp_launch(CTX, FPK_softmax_fused, &rows, sm, 4), FP_ERR_INVALID_ARGUMENT,
                "argument 0 holds 100 bytes");
  sm[0] = fp_arg_buf(big);
  sm[1] = fp_arg_buf(small);
  FP_ASSERT_ERR(fp_launch(CTX, FPK_softmax_fused, &rows, sm, 4), FP_ERR_INVALID_ARGUMENT,
                "argument 1 holds 100 bytes");
  sm[1] = fp_arg_buf(big);
  sm[2] = fp_arg_i64(-5);
  FP_ASSERT_ERR(fp_launch(CTX, FPK_softmax_fused, &rows, sm, 4), FP_ERR_INVALID_ARGUMENT,
                "argument 2 is a size and negative");
  sm[2] = fp_arg_i64(INT64_MAX / 2);
  sm[3] = fp_arg_i64(3);
  FP_ASSERT_ERR(fp_launch(CTX, FPK_softmax_fused, &rows, sm, 4), FP_ERR_INVALID_ARGUMENT,
                "overflow");
  sm[2] = fp_arg_i64(5);
  FP_ASSERT_OK(fp_launch(CTX, FPK_softmax_fused, &rows, sm, 4)); /* 5 x 3 fits */
  /* prim_unary(out, a, op, alpha, beta, M, N, so0, so1, sa0, sa1, oo, oa):
   * a row stride of -8 from offset 8 reaches below element 0 by the third row */
  fp_ndrange elem = fp_ndrange_1d(64, 32);
  fp_arg un[] = {fp_arg_buf(big),  fp_arg_buf(big), fp_arg_i32(0), fp_arg_f32(1.0f),
                 fp_arg_f32(0.0f), fp_arg_i64(3),   fp_arg_i64(4), fp_arg_i64(4),
                 fp_arg_i64(1),    fp_arg_i64(-8),  fp_arg_i64(1), fp_arg_i64(0),
                 fp_arg_i64(8)};
  FP_ASSERT_ERR(fp_launch(CTX, FPK_prim_unary, &elem, un, 13), FP_ERR_INVALID_ARGUMENT, "below");
  un[9] = fp_arg_i64(-4); /* rows at 8, 4, 0: inside */
  FP_ASSERT_OK(fp_launch(CTX, FPK_prim_unary, &elem, un, 13));
  /* gemm_f32 with a bias epilogue reads bias, which may not be none then */
  fp_arg gm[] = {fp_arg_buf(big),  fp_arg_buf(big),  fp_arg_buf(big),
                 fp_arg_buf(NULL), fp_arg_buf(NULL), fp_arg_tensor(NULL, FP_U32),
                 fp_arg_i64(4),    fp_arg_i64(4),    fp_arg_i64(4),
                 fp_arg_i64(4),    fp_arg_i64(4),    fp_arg_i32(FP_EPI_BIAS),
                 fp_arg_i32(0)};
  fp_ndrange planned = fp_planned_range();
  FP_ASSERT_ERR(fp_launch(CTX, FPK_gemm_f32, &planned, gm, 13), FP_ERR_INVALID_ARGUMENT,
                "argument 3 is none");
  /* B of a transposed GEMM with a leading dimension: (N-1)*ldb + K floats */
  gm[11] = fp_arg_i32(FP_EPI_NONE);
  gm[12] = fp_arg_i32(1);
  gm[10] = fp_arg_i64(400);
  FP_ASSERT_ERR(fp_launch(CTX, FPK_gemm_f32, &planned, gm, 13), FP_ERR_INVALID_ARGUMENT,
                "argument 2 holds 4096 bytes, the launch reaches 1204 elements");
  /* the compress layout (kernels.def): dequant_unpack(out, words, scale, min,
   * K, C, bits) of 3 x 300 values has 2 groups a row: 6 x 8 * bits words and
   * 6 scales and mins. Words packed for C = 256 (3 x 16 at 2 bits) are too
   * few; so are the scales of one group a row; a width of 3 bits is refused
   * before any size */
  fp_arg dq[] = {fp_arg_tensor(big, FP_BF16),
                 fp_arg_tensor(small, FP_U32),
                 fp_arg_tensor(big, FP_BF16),
                 fp_arg_tensor(big, FP_BF16),
                 fp_arg_i64(3),
                 fp_arg_i64(300),
                 fp_arg_i32(2)};
  FP_ASSERT_ERR(fp_launch(CTX, FPK_dequant_unpack, &elem, dq, 7), FP_ERR_INVALID_ARGUMENT,
                "argument 1 holds 100 bytes, the launch reaches 96 elements");
  fp_buffer *six = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(CTX, 6, &six)); /* three bf16 scales */
  dq[1] = fp_arg_tensor(big, FP_U32);
  dq[2] = fp_arg_tensor(six, FP_BF16);
  FP_ASSERT_ERR(fp_launch(CTX, FPK_dequant_unpack, &elem, dq, 7), FP_ERR_INVALID_ARGUMENT,
                "argument 2 holds 6 bytes, the launch reaches 6 elements");
  dq[2] = fp_arg_tensor(big, FP_BF16);
  dq[6] = fp_arg_i32(3);
  FP_ASSERT_ERR(fp_launch(CTX, FPK_dequant_unpack, &elem, dq, 7), FP_ERR_INVALID_ARGUMENT,
                "argument 6 is bits=3, expected 1, 2, 4 or 8");
  dq[6] = fp_arg_i32(2);
  FP_ASSERT_OK(fp_launch(CTX, FPK_dequant_unpack, &elem, dq, 7)); /* 96 words, 6 groups fit */
  FP_ASSERT_OK(fp_finish(CTX));
  fp_buffer_free(six);
  fp_buffer_free(small);
  fp_buffer_free(big);
}

/* A freed buffer or event, freed again or passed to a call, is refused (or
 * ignored by the free) without its memory being read: the layer keeps the
 * set of live handles (AddressSanitizer, in CI, reported the read of the
 * freed magic word before). A context's leftovers go with it. */
static void test_freed_handles(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  fp_buffer *buf = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(CTX, 64, &buf));
  fp_counters before;
  fp_counters_get(CTX, &before);
  fp_buffer_free(buf);
  fp_buffer_free(buf); /* a second free is a no-op */
  fp_counters after;
  fp_counters_get(CTX, &after);
  assert_int_equal(after.bytes_current, before.bytes_current - 64);
  assert_int_equal(fp_buffer_size(buf), 0);
  assert_null(fp_buffer_context(buf));
  char host[16];
  FP_ASSERT_ERR(fp_buffer_read(CTX, buf, 0, host, 4), FP_ERR_INVALID_ARGUMENT, "not a live");
  fp_arg fill[] = {fp_arg_buf(buf), fp_arg_i64(16),   fp_arg_i64(1),
                   fp_arg_i32(0),   fp_arg_f32(1.0f), fp_arg_i32(0)};
  fp_ndrange nd = fp_ndrange_1d(1, 32);
  FP_ASSERT_ERR(fp_launch(CTX, FPK_fill_uniform_f32, &nd, fill, 6), FP_ERR_INVALID_ARGUMENT,
                "not a live");
  fp_event *ev = NULL;
  FP_ASSERT_OK(fp_event_create(CTX, &ev));
  fp_event_destroy(ev);
  fp_event_destroy(ev);
  FP_ASSERT_ERR(fp_event_record(CTX, ev), FP_ERR_INVALID_ARGUMENT, "not a live");
  /* buffers and events left on a destroyed context are freed with it */
  fp_context_options opts;
  fp_context_options_init(&opts);
  fp_context *cpu = NULL;
  FP_ASSERT_OK(fp_context_create(&opts, &cpu));
  fp_buffer *left = NULL;
  fp_event *left_ev = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(cpu, 64, &left));
  FP_ASSERT_OK(fp_event_create(cpu, &left_ev));
  fp_context_destroy(cpu);
  assert_int_equal(fp_buffer_size(left), 0);
  fp_buffer_free(left);
  fp_event_destroy(left_ev);
}

/* Every required kernel exists and its family builds/loads. */
static void test_kernels_prepare(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  for (int k = 0; k < FPK_COUNT; ++k) {
    fp_kernel_id id = (fp_kernel_id)k;
    if (!fp_kernel_required(id) && !fp_kernel_available(CTX, id))
      continue;
    if (!fp_kernel_available(CTX, id))
      fail_msg("required kernel %s is not available: %s", fp_kernel_name(id),
               fp_context_error(CTX));
    double ms = -1.0;
    FP_ASSERT_OK(fp_kernel_prepare(CTX, id, &ms));
    assert_true(ms >= 0.0);
    /* prepare is idempotent and reports the first build's time again */
    double again = -1.0;
    FP_ASSERT_OK(fp_kernel_prepare(CTX, id, &again));
    assert_true(again == ms);
  }
}

/* The backend's GEMM library (fp_library_gemm): a strided batch with B
 * transposed or not, beta*C and the epilogues where the library has them
 * (cuBLASLt), against a float64 product; its bad arguments; its counter. */
static void test_library_gemm(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  const fp_device_info *dev = fp_context_device(CTX);
  fp_lib_gemm probe = fp_lib_gemm_plain(FP_F32, 1, 1, 1, false);
  if (fp_library_gemm_check(dev, &probe) != FP_OK) {
    /* no GEMM library here (an OpenCL build without CLBlast): what is
     * checked then is that every call says so, rather than a skip */
    FP_ASSERT_ERR(fp_library_gemm_check(dev, &probe), FP_ERR_UNSUPPORTED, "GEMM");
    FP_ASSERT_ERR(fp_library_gemm(CTX, &probe, NULL, NULL, NULL, NULL, NULL, NULL),
                  FP_ERR_UNSUPPORTED, "GEMM");
    print_message("no GEMM library: %s\n", fp_last_error());
    return;
  }
  enum { B = 3, M = 7, N = 33, K = 65 };
  const int64_t sa = M * K + 5, sb = K * N + 3, sd = M * N + 1; /* gaps between items */
  float *a = malloc(sizeof(float) * B * sa), *b = malloc(sizeof(float) * B * sb);
  float *c = malloc(sizeof(float) * B * sd), *bias = malloc(sizeof(float) * N);
  float *d = malloc(sizeof(float) * B * sd);
  const uint64_t seed = fp_test_next_seed();
  for (int64_t i = 0; i < B * sa; ++i)
    a[i] = fp_uniform_f32(seed, 0, (uint64_t)i, 1.0f, 0);
  for (int64_t i = 0; i < B * sb; ++i)
    b[i] = fp_uniform_f32(seed, 1, (uint64_t)i, 0.125f, 0);
  for (int64_t i = 0; i < B * sd; ++i)
    c[i] = fp_uniform_f32(seed, 2, (uint64_t)i, 1.0f, 0);
  for (int64_t i = 0; i < N; ++i)
    bias[i] = fp_uniform_f32(seed, 3, (uint64_t)i, 1.0f, 0);
  fp_buffer *ba, *bb, *bc, *bd, *bbias, *ws = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(CTX, sizeof(float) * B * sa, &ba));
  FP_ASSERT_OK(fp_buffer_alloc(CTX, sizeof(float) * B * sb, &bb));
  FP_ASSERT_OK(fp_buffer_alloc(CTX, sizeof(float) * B * sd, &bc));
  FP_ASSERT_OK(fp_buffer_alloc(CTX, sizeof(float) * B * sd, &bd));
  FP_ASSERT_OK(fp_buffer_alloc(CTX, sizeof(float) * N, &bbias));
  FP_ASSERT_OK(fp_buffer_write(CTX, ba, 0, a, sizeof(float) * B * sa));
  FP_ASSERT_OK(fp_buffer_write(CTX, bb, 0, b, sizeof(float) * B * sb));
  FP_ASSERT_OK(fp_buffer_write(CTX, bc, 0, c, sizeof(float) * B * sd));
  FP_ASSERT_OK(fp_buffer_write(CTX, bbias, 0, bias, sizeof(float) * N));
  double compile_ms = -1.0;
  FP_ASSERT_OK(fp_library_gemm_prepare(CTX, FP_F32, &compile_ms));
  assert_true(compile_ms >= 0.0);
  for (int variant = 0; variant < 3; ++variant) {
    const bool trans_b = variant == 1;
    fp_lib_gemm g = fp_lib_gemm_plain(FP_F32, M, N, K, trans_b);
    g.batch = B;
    g.stride_a = sa;
    g.stride_b = sb;
    g.stride_c = sd;
    g.stride_d = sd;
    if (variant == 2) { /* beta*C, bias and relu in the same call */
      g.beta = 0.5f;
      g.epilogue = FP_LIB_EPI_BIAS_RELU;
      if (fp_library_gemm_check(dev, &g) != FP_OK) {
        FP_ASSERT_ERR(fp_library_gemm(CTX, &g, ba, bb, bc, bd, bbias, NULL), FP_ERR_UNSUPPORTED,
                      "epilogue");
        continue;
      }
    }
    const uint64_t ws_bytes = fp_library_gemm_workspace(dev, &g);
    if (ws_bytes > 0 && ws == NULL)
      FP_ASSERT_OK(fp_buffer_alloc(CTX, ws_bytes, &ws));
    fp_counters before, after;
    fp_counters_get(CTX, &before);
    FP_ASSERT_OK(fp_library_gemm(CTX, &g, ba, bb, bc, bd, bbias, ws));
    fp_counters_get(CTX, &after);
    assert_int_equal(after.library_calls - before.library_calls, 1);
    assert_int_equal(after.kernels_launched - before.kernels_launched, 0);
    FP_ASSERT_OK(fp_buffer_read(CTX, bd, 0, d, sizeof(float) * B * sd));
    for (int t = 0; t < B; ++t)
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          double ref = 0.0, scale = 0.0;
          for (int k = 0; k < K; ++k) {
            const double bv = trans_b ? b[t * sb + j * K + k] : b[t * sb + k * N + j];
            ref += (double)a[t * sa + i * K + k] * bv;
            scale += fabs((double)a[t * sa + i * K + k] * bv);
          }
          if (variant == 2) {
            ref += 0.5 * c[t * sd + i * N + j] + bias[j];
            ref = ref > 0.0 ? ref : 0.0;
          }
          const double got = d[t * sd + i * N + j];
          if (!(fabs(got - ref) <= 1e-5 * (scale + 1.0)))
            fail_msg("library GEMM variant %d item %d [%d, %d]: got %.9g, expected %.9g", variant,
                     t, i, j, got, ref);
        }
  }
  /* bad arguments: leading dimension too small, a buffer too small, D aliasing A */
  fp_lib_gemm g = fp_lib_gemm_plain(FP_F32, M, N, K, false);
  g.lda = K - 1;
  FP_ASSERT_ERR(fp_library_gemm(CTX, &g, ba, bb, NULL, bd, NULL, ws), FP_ERR_INVALID_ARGUMENT,
                "leading dimensions");
  g = fp_lib_gemm_plain(FP_F32, M, N, K, false);
  g.batch = 1000;
  g.stride_a = sa;
  g.stride_b = sb;
  g.stride_d = sd;
  FP_ASSERT_ERR(fp_library_gemm(CTX, &g, ba, bb, NULL, bd, NULL, ws), FP_ERR_INVALID_ARGUMENT,
                "bytes");
  g = fp_lib_gemm_plain(FP_F32, M, N, K, false);
  FP_ASSERT_ERR(fp_library_gemm(CTX, &g, ba, bb, NULL, ba, NULL, ws), FP_ERR_INVALID_ARGUMENT,
                "D is also an input");
  g.M = 0;
  FP_ASSERT_ERR(fp_library_gemm(CTX, &g, ba, bb, NULL, bd, NULL, ws), FP_ERR_INVALID_ARGUMENT,
                ">= 1");
  fp_buffer_free(ws);
  fp_buffer_free(ba);
  fp_buffer_free(bb);
  fp_buffer_free(bc);
  fp_buffer_free(bd);
  fp_buffer_free(bbias);
  free(a);
  free(b);
  free(c);
  free(d);
  free(bias);
}

/* Typed buffer arguments: a buffer passed as the wrong element type is
 * refused by the layer before any backend sees it, and none is accepted
 * only where the signature's letter is upper case. */
static void test_typed_arguments(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  fp_buffer *buf = NULL;
  FP_ASSERT_OK(fp_buffer_alloc(CTX, 4096, &buf));
  fp_ndrange nd = fp_ndrange_1d(1, 32);
  /* fill_uniform_f16 wants an f16 buffer */
  fp_arg args[] = {fp_arg_buf(buf), fp_arg_i64(16),   fp_arg_i64(1),
                   fp_arg_i32(0),   fp_arg_f32(1.0f), fp_arg_i32(0)};
  FP_ASSERT_ERR(fp_launch(CTX, FPK_fill_uniform_f16, &nd, args, 6), FP_ERR_INVALID_ARGUMENT,
                "f16 buffer");
  args[0] = fp_arg_tensor(buf, FP_F16);
  FP_ASSERT_OK(fp_launch(CTX, FPK_fill_uniform_f16, &nd, args, 6));
  /* a required buffer cannot be none */
  args[0] = fp_arg_none(FP_F16);
  FP_ASSERT_ERR(fp_launch(CTX, FPK_fill_uniform_f16, &nd, args, 6), FP_ERR_INVALID_ARGUMENT,
                "NULL");
  FP_ASSERT_OK(fp_finish(CTX));
  fp_buffer_free(buf);
}

/* attn_softmax_<dt>, the unfused attention's masked softmax, launched
 * directly: the OpenCL backends reach it through no op where their GEMM
 * library lacks the type (CLBlast without cl_khr_fp16), so it is checked
 * here on every backend against a double-precision softmax of the stored
 * scores, the masked keys exactly 0. Rows of 2 heads x S = 3 queries over
 * SK = 37 keys (the bottom-right causal mask leaves 35, 36, 37 keys). */
static void test_attn_softmax_kernel(void **state) {
  (void)state;
  FP_REQUIRE_DEVICE();
  enum { S = 3, SK = 37, R = 2 * S, N = R * SK };
  const fp_dtype dtypes[] = {FP_F32, FP_F16, FP_BF16};
  const fp_kernel_id ids[] = {FPK_attn_softmax_f32, FPK_attn_softmax_f16, FPK_attn_softmax_bf16};
  const double tols[] = {1e-6, ldexp(1.0, -10), ldexp(1.0, -7)};
  for (int t = 0; t < 3; ++t)
    for (int causal = 0; causal < 2; ++causal) {
      const fp_dtype dt = dtypes[t];
      const size_t esize = fp_dtype_size(dt);
      unsigned char sbytes[N * 4], pbytes[N * 4];
      float sval[N], lse[R];
      for (int i = 0; i < N; ++i) { /* scores in [-3, 3), as stored */
        const float x = (float)((i * 37 + 11) % 97 - 48) / 16.0f;
        if (dt == FP_F32) {
          memcpy(sbytes + 4 * i, &x, 4);
          sval[i] = x;
        } else {
          const uint16_t b = dt == FP_F16 ? fp_f32_to_f16_bits(x) : fp_f32_to_bf16_bits(x);
          memcpy(sbytes + 2 * i, &b, 2);
          sval[i] = dt == FP_F16 ? fp_f16_bits_to_f32(b) : fp_bf16_bits_to_f32(b);
        }
      }
      fp_buffer *s = NULL, *p = NULL, *l = NULL;
      FP_ASSERT_OK(fp_buffer_alloc(CTX, N * esize, &s));
      FP_ASSERT_OK(fp_buffer_alloc(CTX, N * esize, &p));
      FP_ASSERT_OK(fp_buffer_alloc(CTX, R * 4, &l));
      FP_ASSERT_OK(fp_buffer_write(CTX, s, 0, sbytes, N * esize));
      fp_arg args[] = {fp_arg_tensor(p, dt), fp_arg_buf(l),  fp_arg_tensor(s, dt), fp_arg_i64(R),
                       fp_arg_i64(S),        fp_arg_i64(SK), fp_arg_i32(causal)};
      fp_ndrange nd = fp_ndrange_1d(4, 64); /* fewer groups than rows: each takes several */
      FP_ASSERT_OK(fp_launch(CTX, ids[t], &nd, args, 7));
      FP_ASSERT_OK(fp_buffer_read(CTX, p, 0, pbytes, N * esize));
      FP_ASSERT_OK(fp_buffer_read(CTX, l, 0, lse, R * 4));
      for (int r = 0; r < R; ++r) {
        const int end = causal ? r % S + SK - S + 1 : SK;
        double m = -INFINITY, sum = 0.0;
        for (int j = 0; j < end; ++j)
          m = fmax(m, sval[r * SK + j]);
        for (int j = 0; j < end; ++j)
          sum += exp(sval[r * SK + j] - m);
        const double want_lse = m + log(sum);
        if (fabs(lse[r] - want_lse) > 1e-5 * (1.0 + fabs(want_lse)))
          fail_msg("%s causal=%d row %d: lse %.7g, want %.7g", fp_kernel_name(ids[t]), causal, r,
                   (double)lse[r], want_lse);
        for (int j = 0; j < SK; ++j) {
          float got;
          if (dt == FP_F32) {
            memcpy(&got, pbytes + 4 * (r * SK + j), 4);
          } else {
            uint16_t b;
            memcpy(&b, pbytes + 2 * (r * SK + j), 2);
            got = dt == FP_F16 ? fp_f16_bits_to_f32(b) : fp_bf16_bits_to_f32(b);
          }
          const double want = j < end ? exp(sval[r * SK + j] - want_lse) : 0.0;
          if (j >= end ? got != 0.0f : fabs(got - want) > tols[t] * want + 1e-7)
            fail_msg("%s causal=%d row %d key %d: %.7g, want %.7g", fp_kernel_name(ids[t]), causal,
                     r, j, (double)got, want);
        }
      }
      fp_buffer_free(s);
      fp_buffer_free(p);
      fp_buffer_free(l);
    }
}

int main(int argc, char **argv) {
  int rc = fp_test_env_open(argc, argv, "test_backend");
  if (rc != 0)
    return rc;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_info),
      cmocka_unit_test(test_write_read_roundtrip),
      cmocka_unit_test(test_fill_patterns),
      cmocka_unit_test(test_copy),
      cmocka_unit_test(test_fill_uniform_matches_host),
      cmocka_unit_test(test_events_time_work),
      cmocka_unit_test(test_counters),
      cmocka_unit_test(test_out_of_memory_under_cap),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_kernels_prepare),
      cmocka_unit_test(test_library_gemm),
      cmocka_unit_test(test_typed_arguments),
      cmocka_unit_test(test_launch_extents),
      cmocka_unit_test(test_freed_handles),
      cmocka_unit_test(test_attn_softmax_kernel),
  };
  int failures = cmocka_run_group_tests_name(fp_backend_name(fp_env.kind), tests, NULL, NULL);
  int code = fp_test_exit_code(failures); /* before close: it looks at the context */
  fp_test_env_close();
  return code;
}
