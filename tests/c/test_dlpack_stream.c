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
  assert_message("out_value is NULL");
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
  assert_message("out_stream is NULL");
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
