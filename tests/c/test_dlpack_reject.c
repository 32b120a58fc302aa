/* SPDX-License-Identifier: Apache-2.0 */
/* DLPack tensors dlstream refuses: every field validated, the producer's deleter run exactly once, the
 * message naming the field. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack_fixtures.h"

TestSuite(dlpack_reject, .init = dlpack_setup, .fini = dlpack_teardown);

static void expect_import_rejected(DLManagedTensorVersioned *m, dls_stream_t producer, dls_status_t want,
                                   const char *text) {
  dls_tensor_t t = {12345};
  dls_status_t st = dls_tensor_import_versioned(m, producer, &t);
  cr_assert_eq(st, want, "got %s, want %s: %s", dls_status_name(st), dls_status_name(want), dls_last_error());
  assert_message(text);
  assert_message("dls_tensor_import_versioned");
  cr_assert_eq(t.id, 0, "out_tensor set on failure");
  cr_assert_eq(atomic_load(&g_deleted), 1, "the producer's deleter ran %d times, not once", atomic_load(&g_deleted));
}

/* A bad tensor: dls_tensor_validate refuses it with the same field named, and
 * the import refuses it and runs the deleter exactly once. */
static void expect_tensor_rejected(probe *p, const char *text) {
  dls_status_t st = dls_tensor_validate(&p->m.dl_tensor);
  cr_assert_eq(st, DLS_ERR_INVALID_TENSOR, "validate: got %s: %s", dls_status_name(st), dls_last_error());
  assert_message(text);
  assert_message("dls_tensor_validate: tensor->");
  cr_assert_eq(atomic_load(&g_deleted), 0);
  expect_import_rejected(&p->m, (dls_stream_t){0}, DLS_ERR_INVALID_TENSOR, text);
  assert_message("managed->dl_tensor.");
}

/* One Test per bad input: `body` edits the valid probe `p` (DLTensor `t`). */
#define REJECT(name, text, ...)                 \
  Test(dlpack_reject, name) {                   \
    probe *p = probe_new();                     \
    DLTensor *t = &p->m.dl_tensor;              \
    (void)t;                                    \
    __VA_ARGS__;                                \
    expect_tensor_rejected(p, text);            \
  }

/* ------------------------------------------------------------ rejected: device */

REJECT(device_type_opencl, "device.device_type = 4 (kDLOpenCL) is not supported", t->device.device_type = kDLOpenCL)
REJECT(device_type_zero, "device.device_type = 0 (unknown)", t->device.device_type = (DLDeviceType)0)
REJECT(device_type_oneapi, "device.device_type = 14 (kDLOneAPI)", t->device.device_type = kDLOneAPI)
REJECT(device_type_ext_dev, "device.device_type = 12 (kDLExtDev)", t->device.device_type = kDLExtDev)
REJECT(device_type_beyond_enum, "device.device_type = 99 (unknown)", t->device.device_type = (DLDeviceType)99)
REJECT(device_id_negative, "device.device_id = -1 is negative", t->device.device_id = -1)
REJECT(cpu_device_id_out_of_range, "device.device_id = 1 is out of range for kDLCPU", t->device.device_id = 1)

/* ------------------------------------------------------------- rejected: dtype */

REJECT(dtype_code_18, "dtype.code = 18 is not a DLPack type code", t->dtype.code = 18)
REJECT(dtype_code_255, "dtype.code = 255 is not a DLPack type code", t->dtype.code = 255)
REJECT(int_bits_3, "dtype.bits = 3 is not valid for kDLInt", t->dtype = (DLDataType){kDLInt, 3, 1})
REJECT(int_bits_12, "dtype.bits = 12 is not valid for kDLInt", t->dtype = (DLDataType){kDLInt, 12, 1})
REJECT(uint_bits_128, "dtype.bits = 128 is not valid for kDLUInt", t->dtype = (DLDataType){kDLUInt, 128, 1})
REJECT(float_bits_8, "dtype.bits = 8 is not valid for kDLFloat", t->dtype = (DLDataType){kDLFloat, 8, 1})
REJECT(float_bits_0, "dtype.bits = 0 is not valid for kDLFloat", t->dtype = (DLDataType){kDLFloat, 0, 1})
REJECT(bfloat_bits_32, "dtype.bits = 32 is not valid for kDLBfloat", t->dtype = (DLDataType){kDLBfloat, 32, 1})
REJECT(complex_bits_16, "dtype.bits = 16 is not valid for kDLComplex", t->dtype = (DLDataType){kDLComplex, 16, 1})
REJECT(bool_bits_1, "dtype.bits = 1 is not valid for kDLBool", t->dtype = (DLDataType){kDLBool, 1, 1})
REJECT(float8_bits_16, "dtype.bits = 16 is not valid for kDLFloat8_e4m3fn",
       t->dtype = (DLDataType){kDLFloat8_e4m3fn, 16, 1})
REJECT(float6_bits_8, "dtype.bits = 8 is not valid for kDLFloat6_e2m3fn",
       t->dtype = (DLDataType){kDLFloat6_e2m3fn, 8, 1})
REJECT(float4_bits_8, "dtype.bits = 8 is not valid for kDLFloat4_e2m1fn",
       t->dtype = (DLDataType){kDLFloat4_e2m1fn, 8, 1})
REJECT(opaque_bits_0, "dtype.bits = 0 is not valid for kDLOpaqueHandle",
       t->dtype = (DLDataType){kDLOpaqueHandle, 0, 1})
REJECT(lanes_zero, "dtype.lanes = 0", t->dtype.lanes = 0)

/* ------------------------------------------------------- rejected: ndim, shape */

REJECT(ndim_negative, "ndim = -1 is out of range 0..32", t->ndim = -1)
REJECT(ndim_33, "ndim = 33 is out of range 0..32", t->ndim = 33; for (int i = 0; i < 33; i++) p->shape[i] = 1)
REJECT(shape_null, "shape is NULL with ndim = 2", t->shape = NULL)
REJECT(shape_negative, "shape[1] = -3 is negative", p->shape[1] = -3)
REJECT(count_overflow, "overflows size_t", p->shape[0] = INT64_C(1) << 32; p->shape[1] = INT64_C(1) << 32)
REJECT(count_overflow_despite_zero_extent, "shape = [0, 4611686018427387904, 4611686018427387904]",
       t->ndim = 3; p->shape[0] = 0; p->shape[1] = INT64_C(1) << 62; p->shape[2] = INT64_C(1) << 62)
REJECT(bytes_overflow, "of 64-bit elements overflows size_t",
       t->dtype = (DLDataType){kDLFloat, 64, 1}; p->shape[0] = INT64_C(1) << 61; p->shape[1] = 2)
REJECT(lanes_make_bytes_overflow, "of 2097088-bit elements overflows",
       t->dtype = (DLDataType){kDLComplex, 64, 32767}; p->shape[0] = INT64_C(1) << 40; p->shape[1] = 1 << 20)

/* ------------------------------------------------- rejected: data and offsets */

REJECT(null_data_with_elements, "data is NULL but the tensor has 32 elements", t->data = NULL)
REJECT(null_data_scalar, "data is NULL but the tensor has 1 element", t->data = NULL; t->ndim = 0; t->shape = NULL)
REJECT(byte_offset_overflows_address, "overflows the address space", t->byte_offset = UINT64_MAX - 8)
REJECT(misaligned_data, "is not aligned to 4 bytes", t->data = g_arena + 1)
REJECT(misaligned_byte_offset, "is not aligned to 8 bytes",
       t->dtype = (DLDataType){kDLFloat, 64, 1}; t->byte_offset = 4)
REJECT(misaligned_complex128, "is not aligned to 16 bytes",
       t->dtype = (DLDataType){kDLComplex, 128, 1}; t->data = g_arena + 8)
REJECT(misaligned_float16_vector, "is not aligned to 8 bytes",
       t->dtype = (DLDataType){kDLFloat, 16, 4}; t->byte_offset = 2)

/* -------------------------------------------------------- rejected: strides */

REJECT(stride_reach_overflow, "strides[0] = 9223372036854775807 with shape[0] = 4 reaches beyond",
       t->strides = p->strides; p->strides[0] = INT64_MAX; p->strides[1] = 1)
REJECT(negative_stride_reach_overflow, "strides[1] = -9223372036854775807 with shape[1] = 8",
       t->strides = p->strides; p->strides[0] = 8; p->strides[1] = -INT64_MAX)
REJECT(stride_sum_overflow, "strides[0] = 2305843009213693952 with shape[0] = 3 reaches beyond",
       t->strides = p->strides; p->shape[0] = 3; p->shape[1] = 3;
       p->strides[0] = INT64_C(1) << 61; p->strides[1] = INT64_C(1) << 61)
REJECT(stride_span_bytes_overflow, "span more than",
       t->dtype = (DLDataType){kDLFloat, 64, 1}; t->ndim = 1; p->shape[0] = 2;
       t->strides = p->strides; p->strides[0] = INT64_C(1) << 61)
REJECT(negative_stride_below_address_zero, "past address 0",
       t->data = (void *)(uintptr_t)64; t->ndim = 1; p->shape[0] = 100; t->strides = p->strides; p->strides[0] = -1)
REJECT(span_past_top_of_address_space, "past the top of the address space",
       t->data = (void *)(UINTPTR_MAX - 63); t->ndim = 1; p->shape[0] = 1000)
REJECT(packed_subbyte_must_be_compact, "packed 4-bit kDLFloat4_e2m1fn elements must be compact",
       t->dtype = (DLDataType){kDLFloat4_e2m1fn, 4, 1}; t->strides = p->strides;
       p->strides[0] = 1; p->strides[1] = 4)

/* ----------------------------------------------------- rejected: the import */

Test(dlpack_reject, version_major_2_reads_only_the_deleter) {
  probe *p = probe_new();
  p->m.version.major = 2;
  p->m.version.minor = 0;
  /* Fields past `flags` may mean anything in 2.x: poison them so that any
   * read would fault (and ASan would name it). */
  memset(&p->m.dl_tensor, 0xA5, sizeof p->m.dl_tensor);
  p->m.dl_tensor.shape = (int64_t *)(uintptr_t)0x10;
  p->m.dl_tensor.strides = (int64_t *)(uintptr_t)0x18;
  expect_import_rejected(&p->m, (dls_stream_t){0}, DLS_ERR_VERSION, "managed->version = 2.0");
  assert_message("major version 1");
}

Test(dlpack_reject, version_major_0) {
  probe *p = probe_new();
  p->m.version.major = 0;
  p->m.version.minor = 8;
  expect_import_rejected(&p->m, (dls_stream_t){0}, DLS_ERR_VERSION, "managed->version = 0.8");
}

Test(dlpack_reject, null_out_tensor_still_runs_deleter) {
  probe *p = probe_new();
  dls_status_t st = dls_tensor_import_versioned(&p->m, (dls_stream_t){0}, NULL);
  cr_assert_eq(st, DLS_ERR_INVALID_ARGUMENT);
  assert_message("(out_tensor=NULL): output pointer is NULL");
  cr_assert_eq(atomic_load(&g_deleted), 1);
}

Test(dlpack_reject, null_managed) {
  dls_tensor_t t = {7};
  cr_assert_eq(dls_tensor_import_versioned(NULL, (dls_stream_t){0}, &t), DLS_ERR_INVALID_ARGUMENT);
  assert_message("dls_tensor_import_versioned: managed is NULL");
  cr_assert_eq(t.id, 0);
  cr_assert_eq(dls_tensor_import_legacy(NULL, (dls_stream_t){0}, &t), DLS_ERR_INVALID_ARGUMENT);
  assert_message("dls_tensor_import_legacy: managed is NULL");
}

Test(dlpack_reject, producer_on_another_device) {
  /* A tensor on cuda:0 announced as produced on a CPU stream. */
  probe *p = probe_new();
  p->m.dl_tensor.device = dls_cuda(0);
  p->m.dl_tensor.data = (void *)(uintptr_t)0x7f0000000000ull;
  dls_stream_t cpu_stream;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &cpu_stream), DLS_OK);
  expect_import_rejected(&p->m, cpu_stream, DLS_ERR_INVALID_DEVICE, "producer stream is on cpu:0");
  assert_message("the tensor lives on cuda:0");
  cr_assert_eq(dls_stream_destroy(cpu_stream), DLS_OK);
}

Test(dlpack_reject, stale_producer_stream) {
  probe *p = probe_new();
  dls_stream_t s;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &s), DLS_OK);
  cr_assert_eq(dls_stream_destroy(s), DLS_OK);
  expect_import_rejected(&p->m, s, DLS_ERR_INVALID_HANDLE, "stale");
  assert_message("producer");
}

Test(dlpack_reject, legacy_bad_dtype_runs_legacy_deleter) {
  probe_legacy *p = probe_legacy_new();
  p->m.dl_tensor.dtype = (DLDataType){kDLFloat, 8, 1};
  dls_tensor_t t = {1};
  dls_status_t st = dls_tensor_import_legacy(&p->m, (dls_stream_t){0}, &t);
  cr_assert_eq(st, DLS_ERR_INVALID_TENSOR, "%s", dls_last_error());
  assert_message("dls_tensor_import_legacy: managed->dl_tensor.dtype.bits = 8 is not valid for kDLFloat");
  cr_assert_eq(t.id, 0);
  cr_assert_eq(atomic_load(&g_deleted), 1);
}

Test(dlpack_reject, legacy_padded_subbyte_has_no_flag) {
  /* Legacy tensors cannot be padded: a strided float4 is refused. */
  probe_legacy *p = probe_legacy_new();
  p->m.dl_tensor.dtype = (DLDataType){kDLFloat4_e2m1fn, 4, 1};
  p->m.dl_tensor.strides = p->strides;
  p->strides[0] = 16;
  p->strides[1] = 2;
  dls_tensor_t t;
  cr_assert_eq(dls_tensor_import_legacy(&p->m, (dls_stream_t){0}, &t), DLS_ERR_INVALID_TENSOR);
  assert_message("must be compact");
  cr_assert_eq(atomic_load(&g_deleted), 1);
}

Test(dlpack_reject, view_unknown_flags) {
  DLTensor t;
  int64_t shape[2];
  fill_valid(&t, shape);
  dls_tensor_t v = {3};
  cr_assert_eq(dls_tensor_view(&t, DLS_TENSOR_IS_COPIED, (dls_stream_t){0}, &v), DLS_ERR_INVALID_ARGUMENT);
  assert_message("dls_tensor_view: flags = 0x2 has unknown bits 0x2");
  cr_assert_eq(v.id, 0);
}

Test(dlpack_reject, view_of_bad_tensor_names_view_fields) {
  DLTensor t;
  int64_t shape[2];
  fill_valid(&t, shape);
  shape[0] = -5;
  dls_tensor_t v;
  cr_assert_eq(dls_tensor_view(&t, 0, (dls_stream_t){0}, &v), DLS_ERR_INVALID_TENSOR);
  assert_message("dls_tensor_view: tensor->shape[0] = -5 is negative");
}

Test(dlpack_reject, validate_null) {
  cr_assert_eq(dls_tensor_validate(NULL), DLS_ERR_INVALID_ARGUMENT);
  assert_message("dls_tensor_validate: tensor is NULL");
}

Test(dlpack_reject, empty_bad_arguments) {
  dls_stream_t s = dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY);
  int64_t shape[2] = {3, -1};
  dls_tensor_t t;
  cr_assert_eq(dls_tensor_empty(s, 2, shape, (DLDataType){kDLFloat, 32, 1}, &t), DLS_ERR_INVALID_TENSOR);
  assert_message("dls_tensor_empty: shape[1] = -1 is negative");
  shape[1] = 2;
  cr_assert_eq(dls_tensor_empty(s, 2, shape, (DLDataType){kDLBfloat, 8, 1}, &t), DLS_ERR_INVALID_TENSOR);
  assert_message("dls_tensor_empty: dtype.bits = 8 is not valid for kDLBfloat");
  cr_assert_eq(dls_tensor_empty(s, 40, shape, (DLDataType){kDLFloat, 32, 1}, &t), DLS_ERR_INVALID_TENSOR);
  assert_message("dls_tensor_empty: ndim = 40");
  cr_assert_eq(dls_tensor_empty(s, 2, NULL, (DLDataType){kDLFloat, 32, 1}, &t), DLS_ERR_INVALID_TENSOR);
  assert_message("dls_tensor_empty: shape is NULL");
  cr_assert_eq(dls_tensor_empty(s, 2, shape, (DLDataType){kDLFloat, 32, 1}, NULL), DLS_ERR_INVALID_ARGUMENT);
  assert_message("(out_tensor=NULL): output pointer is NULL");
}
