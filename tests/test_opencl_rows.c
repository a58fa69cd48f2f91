/* fuseport tests: the OpenCL backend's ROWS launch planner (opencl_rows.h),
 * on any machine. It picks the geometry and the kernel of a fused row
 * operator from what the device reports; the kernel it picks must exist and
 * its local memory must fit the device's, or the launch fails with
 * CL_OUT_OF_RESOURCES (Oclgrind, 32 KiB of local memory, did with
 * layernorm_fused_stream before the planner looked at local memory). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "opencl_rows.h"

enum { KIB = 1024 };

static ocl_rows_config device(uint32_t max_group, uint64_t local) {
  ocl_rows_config c;
  memset(&c, 0, sizeof c);
  c.max_group = max_group;
  c.device_local = local;
  c.row_vec = 4;
  c.row_local = true;
  c.stream_back = true;
  c.local_rows_fit = local >= FP_CL_PREFIX_ROW_BYTES;
  return c;
}

/* The host's request (ops/primitives.c fp_rows_range): one group per row. */
static ocl_rows_request request(ocl_rows_kind kind, int64_t M, int64_t N,
                                const int64_t local_bytes[OCL_ROW_KERNELS]) {
  ocl_rows_request rq;
  memset(&rq, 0, sizeof rq);
  rq.kind = kind;
  rq.planned = true;
  rq.M = M;
  rq.N = N;
  size_t local = 32;
  while ((int64_t)local < (N + 15) / 16 && local < 1024)
    local *= 2;
  rq.local = local;
  rq.global = (size_t)M * local;
  memcpy(rq.local_bytes, local_bytes, sizeof rq.local_bytes);
  return rq;
}

/* What Oclgrind 21.10 reports for layernorm's kernels (it adds the arrays
 * of every kernel whose name a kernel's name begins): generic, _cached,
 * _stream, _stream_back; no _local ones. */
static const int64_t layernorm_oclgrind[OCL_ROW_KERNELS] = {
    [OCL_ROW_CACHED] = 20480,      [OCL_ROW_STREAM] = 40960,  [OCL_ROW_LOCAL] = -1,
    [OCL_ROW_STREAM_BACK] = 20480, [OCL_ROW_LOCAL_BACK] = -1, [OCL_ROW_GENERIC] = 81920};
/* ... and what PoCL reports for softmax's (every kernel of the family) */
static const int64_t softmax_pocl[OCL_ROW_KERNELS] = {
    [OCL_ROW_CACHED] = 8192,      [OCL_ROW_STREAM] = 8192,      [OCL_ROW_LOCAL] = 40960,
    [OCL_ROW_STREAM_BACK] = 8192, [OCL_ROW_LOCAL_BACK] = 49152, [OCL_ROW_GENERIC] = 8192};

static ocl_rows_launch plan_ok(const ocl_rows_config *c, const ocl_rows_request *rq) {
  ocl_rows_launch out;
  char why[256] = "";
  if (!ocl_rows_plan(c, rq, &out, why, sizeof why))
    fail_msg("no plan: %s", why);
  return out;
}

/* A streamed layernorm row (130 floats: its cache holds 64) on a device of
 * 32 KiB: _stream takes 40 KiB there, so its sibling _stream_back (the same
 * results, the output pass the other way round) runs in the same geometry;
 * with 64 KiB _stream does. */
static void test_fits_the_reported_local_memory(void **state) {
  (void)state;
  const ocl_rows_config small = device(1024, 32 * KIB), large = device(1024, 64 * KIB);
  const ocl_rows_request rq = request(OCL_ROWS_LAYERNORM, 3, 130, layernorm_oclgrind);
  const ocl_rows_launch a = plan_ok(&small, &rq), b = plan_ok(&large, &rq);
  assert_int_equal(a.kernel, OCL_ROW_STREAM_BACK);
  assert_int_equal(b.kernel, OCL_ROW_STREAM);
  assert_int_equal(a.local, b.local);
  assert_int_equal(a.global, b.global);
  assert_int_equal(a.local, 256);
}

/* The host's geometry keeps the generic kernel where it fits, and takes a
 * streaming kernel (right for any geometry) where it does not. */
static void test_host_geometry_falls_back_to_streaming(void **state) {
  (void)state;
  ocl_rows_config c = device(1024, 32 * KIB);
  c.host_geometry = true;
  const ocl_rows_request rq = request(OCL_ROWS_LAYERNORM, 3, 5, layernorm_oclgrind);
  ocl_rows_launch out = plan_ok(&c, &rq);
  assert_int_equal(out.kernel, OCL_ROW_STREAM_BACK);
  assert_int_equal(out.local, rq.local);
  assert_int_equal(out.global, rq.global);
  c.device_local = 128 * KIB;
  out = plan_ok(&c, &rq);
  assert_int_equal(out.kernel, OCL_ROW_GENERIC);
}

/* A cached launch whose _cached kernel does not fit takes the generic
 * kernel (which caches where the planned team holds the row), then a
 * streaming one. */
static void test_cached_falls_back(void **state) {
  (void)state;
  const ocl_rows_config c = device(1024, 16 * KIB);
  int64_t bytes[OCL_ROW_KERNELS] = {20000, 8000, -1, 8000, -1, 12000};
  ocl_rows_request rq = request(OCL_ROWS_PLAIN, 3, 5, bytes);
  assert_int_equal(plan_ok(&c, &rq).kernel, OCL_ROW_GENERIC);
  rq.local_bytes[OCL_ROW_GENERIC] = 20000;
  assert_int_equal(plan_ok(&c, &rq).kernel, OCL_ROW_STREAM);
}

/* Nothing fits: an error that says how much the device has, never a
 * launch the driver refuses. */
static void test_nothing_fits_is_an_error(void **state) {
  (void)state;
  const ocl_rows_config c = device(1024, 16 * KIB);
  const ocl_rows_request rq = request(OCL_ROWS_LAYERNORM, 3, 130, layernorm_oclgrind);
  ocl_rows_launch out;
  char why[256] = "";
  assert_false(ocl_rows_plan(&c, &rq, &out, why, sizeof why));
  assert_non_null(strstr(why, "16384 bytes"));
  assert_non_null(strstr(why, "_stream_back 20480"));
}

/* The planned group never exceeds the device's largest (a power of two at
 * most); below 32 the host's geometry stands. Every kernel picked exists
 * and fits, for every kind of row and a sweep of shapes. */
static void test_every_plan_fits_the_device(void **state) {
  (void)state;
  static const uint32_t groups[] = {1024, 512, 256, 64, 32, 16};
  static const uint64_t locals[] = {32 * KIB, 48 * KIB, 64 * KIB, 2048 * KIB};
  static const int64_t shapes[][2] = {{1, 1},      {3, 5},     {2, 33},    {7, 130},
                                      {1000, 3},   {3, 1000},  {33, 4097}, {2, 7000},
                                      {66, 30001}, {2, 32771}, {1, 65537}, {1 << 21, 64}};
  for (size_t g = 0; g < sizeof groups / sizeof groups[0]; ++g)
    for (size_t l = 0; l < sizeof locals / sizeof locals[0]; ++l)
      for (int kind = OCL_ROWS_PLAIN; kind <= OCL_ROWS_HORIZONTAL; ++kind)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
          const ocl_rows_config c = device(groups[g], locals[l]);
          const int64_t *bytes = kind == OCL_ROWS_LAYERNORM ? layernorm_oclgrind : softmax_pocl;
          const ocl_rows_request rq =
              request((ocl_rows_kind)kind, shapes[s][0], shapes[s][1], bytes);
          ocl_rows_launch out;
          char why[256];
          if (!ocl_rows_plan(&c, &rq, &out, why, sizeof why)) {
            /* only layernorm's 20 KiB can be too much, and not here */
            fail_msg("group %u, local %llu, kind %d, %lldx%lld: %s", groups[g],
                     (unsigned long long)locals[l], kind, (long long)shapes[s][0],
                     (long long)shapes[s][1], why);
          }
          assert_true(rq.local_bytes[out.kernel] >= 0);
          assert_true((uint64_t)rq.local_bytes[out.kernel] <= c.device_local);
          if (groups[g] >= 32) {
            assert_true(out.local <= groups[g]);
            assert_int_equal(out.global % out.local, 0);
          } else {
            assert_int_equal(out.local, rq.local);
            assert_true(out.kernel == OCL_ROW_GENERIC || out.kernel == OCL_ROW_STREAM ||
                        out.kernel == OCL_ROW_STREAM_BACK);
          }
        }
}

/* The rule's choices where everything fits (PoCL's numbers): short rows
 * cached in shared groups of 256, long ones streamed, the longest last
 * vector first, rows of 6148..8195 floats through local memory. */
static void test_rule_where_everything_fits(void **state) {
  (void)state;
  const ocl_rows_config c = device(4096, 2048 * KIB);
  ocl_rows_request rq = request(OCL_ROWS_PLAIN, 3, 5, softmax_pocl);
  ocl_rows_launch out = plan_ok(&c, &rq);
  assert_int_equal(out.kernel, OCL_ROW_CACHED);
  assert_int_equal(out.local, 256);
  assert_int_equal(out.global, 256);
  rq = request(OCL_ROWS_PLAIN, 2, 5000, softmax_pocl);
  assert_int_equal(plan_ok(&c, &rq).kernel, OCL_ROW_STREAM);
  rq = request(OCL_ROWS_PLAIN, 2, 8192, softmax_pocl);
  assert_int_equal(plan_ok(&c, &rq).kernel, OCL_ROW_LOCAL);
  rq = request(OCL_ROWS_PLAIN, 2, 40000, softmax_pocl);
  assert_int_equal(plan_ok(&c, &rq).kernel, OCL_ROW_LOCAL_BACK);
  ocl_rows_config generic = c;
  generic.generic_rows = true;
  assert_int_equal(plan_ok(&generic, &rq).kernel, OCL_ROW_GENERIC);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fits_the_reported_local_memory),
      cmocka_unit_test(test_host_geometry_falls_back_to_streaming),
      cmocka_unit_test(test_cached_falls_back),
      cmocka_unit_test(test_nothing_fits_is_an_error),
      cmocka_unit_test(test_every_plan_fits_the_device),
      cmocka_unit_test(test_rule_where_everything_fits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
