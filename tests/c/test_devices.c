/* SPDX-License-Identifier: Apache-2.0 */
/* Several devices: cross-device waits, copies between devices under the
 * deallocation rule, and each device's own default streams, pools and
 * built-ins. The CPU backend runs as two devices here (DLSTREAM_CPU_DEVICES=2);
 * CUDA needs two GPUs. */
#include "common.h"

static void two_cpu_devices(void) { setenv("DLSTREAM_CPU_DEVICES", "2", 1); }

TestSuite(devices, .init = two_cpu_devices, .fini = dlst_fini);

/* Device 1 of a backend, or skip saying why. */
static void two_devices(DLDeviceType type, DLDevice *d0, DLDevice *d1) {
  *d0 = dlst_device(type);
  int n = 0;
  OK(dls_device_count(type, &n));
  if (n < 2)
    cr_skip_test("one %s device only: the test needs two", type == kDLCPU ? "CPU" : "GPU");
  *d1 = dls_device(type, 1);
}

static void fill_i32(dls_stream_t s, dls_buffer_t b, int32_t v) { OK(dls_fill(s, dls_arg_buffer(b), 1, 4, &v)); }

static int32_t read_i32(dls_buffer_t b, dls_stream_t s) {
  int32_t v = -1;
  OK(dls_buffer_read(b, 0, &v, 4, s));
  OK(dls_stream_synchronize(s));
  return v;
}

typedef enum { BY_EVENT, BY_STREAM, NOT_ORDERED } how_t;

/* a (device 1) is held, then writes 7; b (device 0) copies it, ordered by an
 * event or a stream wait across devices, or not at all (the control). */
static int32_t cross_device(DLDevice d0, DLDevice d1, how_t how) {
  dls_stream_t a, b;
  dls_buffer_t src, dst;
  dls_latch_t l;
  dls_event_t e;
  OK(dls_stream_create(d1, NULL, &a));
  OK(dls_stream_create(d0, NULL, &b));
  OK(dls_event_create(d1, 0, &e));
  OK(dls_latch_create(d1, &l));
  OK(dls_buffer_alloc(a, 4, &src));
  OK(dls_buffer_alloc(b, 4, &dst));
  fill_i32(a, src, 0);
  fill_i32(b, dst, 0);
  OK(dls_stream_synchronize(a));
  OK(dls_stream_synchronize(b));
  OK(dls_latch_wait(l, a, DLST_LATCH_TIMEOUT_NS));
  fill_i32(a, src, 7);
  if (how == BY_EVENT) {
    OK(dls_event_record(e, a));
    OK(dls_stream_wait_event(b, e));
  } else if (how == BY_STREAM) {
    OK(dls_stream_wait_stream(b, a));
  }
  void *sp, *dp;
  OK(dls_buffer_ptr(src, &sp));
  OK(dls_buffer_ptr(dst, &dp));
  OK(dls_memcpy(b, dp, sp, 4)); /* raw: the ordering under test is the wait alone */
  if (how == NOT_ORDERED) {
    OK(dls_stream_synchronize(b));
  } else {
    int idle = 1;
    OK(dls_stream_query(b, &idle));
    cr_assert_eq(idle, 0, "device 0's stream must be held behind device 1's latch");
  }
  OK(dls_latch_open(l));
  OK(dls_stream_synchronize(a));
  int32_t got = read_i32(dst, b);
  OK(dls_latch_destroy(l));
  OK(dls_event_destroy(e));
  OK(dls_buffer_free(src));
  OK(dls_buffer_free(dst));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(b));
  return got;
}

BACKEND_TEST(devices, a_stream_waits_on_an_event_of_another_device) {
  DLDevice d0, d1;
  two_devices(*backend_type, &d0, &d1);
  dlst_need_async(d0);
  dlst_need_concurrency(d0);
  cr_assert_eq(cross_device(d0, d1, BY_EVENT), 7);
}

BACKEND_TEST(devices, a_stream_waits_for_a_stream_of_another_device) {
  DLDevice d0, d1;
  two_devices(*backend_type, &d0, &d1);
  dlst_need_async(d0);
  dlst_need_concurrency(d0);
  cr_assert_eq(cross_device(d0, d1, BY_STREAM), 7);
}

BACKEND_TEST(devices, negative_control_without_a_wait_the_copy_runs_first) {
  DLDevice d0, d1;
  two_devices(*backend_type, &d0, &d1);
  dlst_need_async(d0);
  dlst_need_concurrency(d0);
  cr_assert_eq(cross_device(d0, d1, NOT_ORDERED), 0);
}

/* The copy on device 0 reads device 1's buffer, which is freed at once: its
 * memory is not reused on device 1 until the copy has run. */
static int32_t copy_then_free(DLDevice d0, DLDevice d1, bool tracked) {
  dls_stream_t a, b;
  dls_buffer_t src, dst, again;
  dls_latch_t l;
  OK(dls_stream_create(d1, NULL, &a));
  OK(dls_stream_create(d0, NULL, &b));
  OK(dls_latch_create(d0, &l));
  OK(dls_buffer_alloc(a, 256, &src));
  OK(dls_buffer_alloc(b, 256, &dst));
  fill_i32(a, src, 7);
  fill_i32(b, dst, 0);
  OK(dls_stream_synchronize(a));
  OK(dls_stream_synchronize(b));
  OK(dls_latch_wait(l, b, DLST_LATCH_TIMEOUT_NS));
  if (tracked) {
    OK(dls_buffer_copy(b, dst, 0, src, 0, 4));
  } else {
    void *sp, *dp;
    OK(dls_buffer_ptr(src, &sp));
    OK(dls_buffer_ptr(dst, &dp));
    OK(dls_memcpy(b, dp, sp, 4));
  }
  OK(dls_buffer_free(src));
  OK(dls_buffer_alloc(a, 256, &again)); /* may reuse src's memory, in a's order */
  fill_i32(a, again, 9);
  if (!tracked)
    OK(dls_stream_synchronize(a)); /* nothing holds a: the 9 lands before the copy runs */
  OK(dls_latch_open(l));
  int32_t got = read_i32(dst, b);
  OK(dls_stream_synchronize(a));
  OK(dls_latch_destroy(l));
  OK(dls_buffer_free(again));
  OK(dls_buffer_free(dst));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(b));
  return got;
}

BACKEND_TEST(devices, a_copy_between_devices_holds_both_buffers) {
  DLDevice d0, d1;
  two_devices(*backend_type, &d0, &d1);
  dlst_need_async(d0);
  dlst_need_concurrency(d0);
  dlst_need_pooling();
  cr_assert_eq(copy_then_free(d0, d1, true), 7, "src's memory was reused before the copy read it");
}

/* Only the CPU pool reuses a block deterministically (CUDA's pool may hand
 * out other memory), so only there does the control show the race. */
Test(devices, negative_control_an_untracked_copy_reads_reused_memory) {
  DLDevice d0, d1;
  two_devices(kDLCPU, &d0, &d1);
  dlst_need_async(d0);
  dlst_need_pooling();
  cr_assert_eq(copy_then_free(d0, d1, false), 9, "the untracked copy should have read the reused block");
}

BACKEND_TEST(devices, device_one_has_its_own_defaults_pools_and_builtins) {
  DLDevice d0, d1;
  two_devices(*backend_type, &d0, &d1);
  dls_stream_t legacy = dls_stream_default(d1, DLS_STREAM_LEGACY), pooled;
  OK(dls_stream_acquire(d1, &pooled));
  DLDevice got;
  OK(dls_stream_device(pooled, &got));
  cr_assert_eq(got.device_id, 1);
  void *n0, *n1;
  dls_buffer_t x, y;
  OK(dls_buffer_alloc(legacy, 64 * sizeof(float), &x));
  OK(dls_buffer_alloc(pooled, 64 * sizeof(float), &y));
  float one = 1.0f, zero = 0.0f;
  OK(dls_fill(legacy, dls_arg_buffer(x), 64, 4, &one));
  OK(dls_fill(pooled, dls_arg_buffer(y), 64, 4, &zero));
  OK(dls_stream_wait_stream(pooled, legacy));
  OK(dls_axpy_f32(pooled, 64, 3.0f, dls_arg_buffer(x), dls_arg_buffer(y)));
  float v = 0;
  OK(dls_buffer_read(y, 60 * sizeof(float), &v, sizeof v, pooled));
  OK(dls_stream_synchronize(pooled));
  cr_assert_float_eq(v, 3.0f, 1e-6);
  OK(dls_stream_native(dls_stream_default(d0, DLS_STREAM_PER_THREAD), &n0));
  OK(dls_stream_native(dls_stream_default(d1, DLS_STREAM_PER_THREAD), &n1));
  if (*backend_type == kDLCPU)
    cr_assert_neq(n0, n1, "each CPU device has its own default stream");
  /* A launch may not mix devices: refused with both named. */
  dls_stream_t s0;
  OK(dls_stream_create(d0, NULL, &s0));
  FAILS(dls_axpy_f32(s0, 64, 1.0f, dls_arg_buffer(x), dls_arg_buffer(y)), DLS_ERR_INVALID_DEVICE, ":1");
  OK(dls_stream_destroy(s0));
  OK(dls_buffer_free(x));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(pooled));
}
