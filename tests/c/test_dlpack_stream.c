/* SPDX-License-Identifier: Apache-2.0 */
/* DLPack stream values (the `stream=` integer of __dlpack__) to and from stream handles. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack_fixtures.h"

TestSuite(dlpack_stream, .init = dlpack_setup, .fini = dlpack_teardown);

/* ------------------------------------------------------------ stream values */

static void expect_from_value_fails(DLDevice dev, int64_t value, dls_status_t want, const char *text) {
  dls_stream_t s = {99};
  dls_status_t st = dls_dlpack_stream_from_value(dev, value, &s);
  cr_assert_eq(st, want, "value %lld: got %s: %s", (long long)value, dls_status_name(st), dls_last_error());
  assert_message("dls_dlpack_stream_from_value");
  assert_message(text);
  cr_assert_eq(s.id, 0);
}

Test(dlpack_stream, cpu_streams_have_no_value) {
  dls_stream_t s;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &s), DLS_OK);
  int64_t v = 5;
  cr_assert_eq(dls_dlpack_stream_value(s, &v), DLS_ERR_INVALID_ARGUMENT);
  assert_message("dls_dlpack_stream_value");
  assert_message("cpu:0 streams have no DLPack value");
  cr_assert_eq(dls_dlpack_stream_value(dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY), &v),
               DLS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(dls_stream_destroy(s), DLS_OK);
}

Test(dlpack_stream, no_stream_is_minus_one) {
  int64_t v = 0;
  cr_assert_eq(dls_dlpack_stream_value((dls_stream_t){0}, &v), DLS_OK);
  cr_assert_eq(v, -1);
  cr_assert_eq(dls_dlpack_stream_value((dls_stream_t){0}, NULL), DLS_ERR_INVALID_ARGUMENT);
  assert_message("dls_dlpack_stream_value(out_value=NULL): output pointer is NULL");
}

Test(dlpack_stream, stale_stream_value) {
  dls_stream_t s;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &s), DLS_OK);
  cr_assert_eq(dls_stream_destroy(s), DLS_OK);
  int64_t v;
  cr_assert_eq(dls_dlpack_stream_value(s, &v), DLS_ERR_INVALID_HANDLE);
  assert_message("stale");
}

Test(dlpack_stream, minus_one_is_no_sync_everywhere) {
  DLDevice devs[] = {dls_cpu(), dls_cuda(0), dls_device(kDLROCM, 0), dls_device(kDLCUDAHost, 0)};
  for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) {
    dls_stream_t s = {99};
    cr_assert_eq(dls_dlpack_stream_from_value(devs[i], -1, &s), DLS_OK, "%s", dls_last_error());
    cr_assert_eq(s.id, 0);
  }
}

Test(dlpack_stream, cpu_takes_only_none) {
  expect_from_value_fails(dls_cpu(), 0, DLS_ERR_INVALID_ARGUMENT, "CPU consumers pass stream=None");
  expect_from_value_fails(dls_cpu(), 1, DLS_ERR_INVALID_ARGUMENT, "value=1");
  expect_from_value_fails(dls_cpu(), 0x7f00aa00, DLS_ERR_INVALID_ARGUMENT, "no streams for host memory");
}

Test(dlpack_stream, cuda_zero_is_ambiguous) {
  expect_from_value_fails(dls_cuda(0), 0, DLS_ERR_INVALID_ARGUMENT,
                          "0 is ambiguous on CUDA; pass 1 for the legacy default stream");
}

Test(dlpack_stream, negative_values_are_invalid) {
  expect_from_value_fails(dls_cuda(0), -2, DLS_ERR_INVALID_ARGUMENT, "negative stream values other than -1");
  expect_from_value_fails(dls_device(kDLROCM, 0), INT64_MIN, DLS_ERR_INVALID_ARGUMENT, "negative");
}

Test(dlpack_stream, rocm_one_and_two_are_reserved) {
  expect_from_value_fails(dls_device(kDLROCM, 0), 1, DLS_ERR_INVALID_ARGUMENT, "reserves 1 and 2 on ROCm");
  expect_from_value_fails(dls_device(kDLROCM, 0), 2, DLS_ERR_INVALID_ARGUMENT, "reserves 1 and 2 on ROCm");
}

Test(dlpack_stream, unsupported_devices) {
  expect_from_value_fails(dls_device(kDLOpenCL, 0), 5, DLS_ERR_INVALID_DEVICE, "device_type = 4 (kDLOpenCL)");
  expect_from_value_fails(dls_cuda(-1), 1, DLS_ERR_INVALID_DEVICE, "device_id = -1 is negative");
  cr_assert_eq(dls_dlpack_stream_from_value(dls_cpu(), -1, NULL), DLS_ERR_INVALID_ARGUMENT);
  assert_message("dls_dlpack_stream_from_value(out_stream=NULL): output pointer is NULL");
}

Test(dlpack_stream, cuda_values) {
  if (dls_backend_probe(kDLCUDA) != DLS_OK) {
    /* The default-stream values need the device: they fail cleanly here. */
    expect_from_value_fails(dls_cuda(0), 1, DLS_ERR_UNAVAILABLE, "cuda");
    cr_skip_test("CUDA unavailable: %s", dls_last_error());
  }
  dls_stream_t s;
  int64_t v;
  cr_assert_eq(dls_dlpack_stream_from_value(dls_cuda(0), 1, &s), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(s.id, dls_stream_default(dls_cuda(0), DLS_STREAM_LEGACY).id);
  cr_assert_eq(dls_dlpack_stream_value(s, &v), DLS_OK);
  cr_assert_eq(v, 1);
  cr_assert_eq(dls_dlpack_stream_from_value(dls_cuda(0), 2, &s), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(s.id, dls_stream_default(dls_cuda(0), DLS_STREAM_PER_THREAD).id);
  cr_assert_eq(dls_dlpack_stream_value(s, &v), DLS_OK);
  cr_assert_eq(v, 2);
  dls_stream_t own, wrapped;
  cr_assert_eq(dls_stream_create(dls_cuda(0), NULL, &own), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_dlpack_stream_value(own, &v), DLS_OK);
  void *native;
  cr_assert_eq(dls_stream_native(own, &native), DLS_OK);
  cr_assert_eq(v, (int64_t)(uintptr_t)native);
  cr_assert_eq(dls_dlpack_stream_from_value(dls_cuda(0), v, &wrapped), DLS_OK, "%s", dls_last_error());
  void *native2;
  cr_assert_eq(dls_stream_native(wrapped, &native2), DLS_OK);
  cr_assert_eq(native2, native);
  int64_t v2;
  cr_assert_eq(dls_dlpack_stream_value(wrapped, &v2), DLS_OK);
  cr_assert_eq(v2, v);
  cr_assert_eq(dls_stream_destroy(wrapped), DLS_OK);
  cr_assert_eq(dls_stream_destroy(own), DLS_OK);
}

Test(dlpack_stream, rocm_values) {
  if (dls_backend_probe(kDLROCM) != DLS_OK) {
    expect_from_value_fails(dls_device(kDLROCM, 0), 0, DLS_ERR_UNAVAILABLE, "rocm");
    cr_skip_test("ROCm unavailable: %s", dls_last_error());
  }
  dls_stream_t s;
  int64_t v = 9;
  cr_assert_eq(dls_dlpack_stream_from_value(dls_device(kDLROCM, 0), 0, &s), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_dlpack_stream_value(s, &v), DLS_OK);
  cr_assert_eq(v, 0);
}

/* ---------------------------------------------------- hostile stream values */

/* Values below 4096 (other than DLPack's) and negative values are refused
 * before any driver call: these tests pass whether or not a GPU exists. */
Test(dlpack_stream, small_values_are_refused_before_the_driver) {
  static const int64_t bad[] = {3, 4, 5, 7, 255, 1000, 4095};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    expect_from_value_fails(dls_cuda(0), bad[i], DLS_ERR_INVALID_ARGUMENT, "no stream has this value");
    expect_from_value_fails(dls_cuda(3), bad[i], DLS_ERR_INVALID_ARGUMENT, "stream pointers (4096 and above)");
    expect_from_value_fails(dls_device(kDLROCM, 0), bad[i], DLS_ERR_INVALID_ARGUMENT, "0 (default stream)");
  }
  expect_from_value_fails(dls_cuda(0), 5, DLS_ERR_INVALID_ARGUMENT, "value=5");
  expect_from_value_fails(dls_cuda(0), -5, DLS_ERR_INVALID_ARGUMENT, "negative stream values other than -1");
}

static void expect_wrap_refused(DLDevice dev, uintptr_t native, const char *text) {
  dls_stream_t s = {77};
  FAILS(dls_stream_wrap(dev, (void *)native, &s), DLS_ERR_INVALID_ARGUMENT, text);
  assert_message("dls_stream_wrap");
  cr_assert_eq(s.id, 0, "out_stream set on failure");
}

Test(dlpack_stream, wrap_refuses_values_that_cannot_be_streams) {
  static const uintptr_t bad[] = {3, 5, 8, 4095, (uintptr_t)-1, (uintptr_t)-4096, (uintptr_t)INTPTR_MIN};
  DLDevice gpus[] = {dls_cuda(0), dls_cuda(7), dls_device(kDLROCM, 0)};
  for (size_t d = 0; d < sizeof gpus / sizeof gpus[0]; d++)
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
      expect_wrap_refused(gpus[d], bad[i], "not a stream");
  /* On the CPU, 1 and 2 are no default streams either. */
  expect_wrap_refused(dls_cpu(), 1, "not a stream");
  expect_wrap_refused(dls_cpu(), 2, "not a stream");
  expect_wrap_refused(dls_cpu(), 4095, "native=0xfff");
  /* A plausible pointer reaches the backend's check (the CPU knows its streams). */
  static int not_a_stream;
  expect_wrap_refused(dls_cpu(), (uintptr_t)&not_a_stream, "is not a live CPU stream");
}

/* A fixed-seed sweep of 64-bit values through both entry points: each is
 * refused with a message (never a crash), except DLPack's defined values. On
 * GPUs only values refused before the driver are drawn: a plausible pointer
 * would be read by the driver, and no driver can validate one. */
Test(dlpack_stream, random_values_are_refused_cleanly) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  int refused = 0;
  for (int i = 0; i < 20000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int64_t value = (int64_t)x;
    if (i % 3 == 0)
      value = (int64_t)(x % 4096); /* small values */
    else if (i % 3 == 1 && value > 0)
      value = -value; /* negatives */
    dls_stream_t s = {0};
    /* The CPU's registry decides any value without dereferencing it. */
    dls_status_t st = dls_stream_wrap(dls_cpu(), (void *)(uintptr_t)value, &s);
    cr_assert(st != DLS_OK || s.id != 0);
    if (st == DLS_OK)
      cr_assert_eq(dls_stream_destroy(s), DLS_OK);
    bool gpu_safe = value < 4096; /* refused or defined: never reaches a pointer read */
    if (gpu_safe && value != -1 && value != 1 && value != 2) {
      st = dls_dlpack_stream_from_value(dls_cuda(0), value, &s);
      cr_assert_eq(st, DLS_ERR_INVALID_ARGUMENT, "value %lld: %s", (long long)value, dls_last_error());
      cr_assert_eq(s.id, 0);
      st = dls_stream_wrap(dls_cuda(0), (void *)(uintptr_t)value, &s);
      if (value != 0) {
        cr_assert_eq(st, DLS_ERR_INVALID_ARGUMENT, "native %lld: %s", (long long)value, dls_last_error());
        refused++;
      } else if (st == DLS_OK) {
        cr_assert_eq(dls_stream_destroy(s), DLS_OK);
      }
    }
  }
  cr_assert_gt(refused, 10000, "the sweep drew too few refused values (%d)", refused);
}
