/* SPDX-License-Identifier: Apache-2.0 */
/* Criterion tests of the DLPack interop: rejected tensors, round trips of every dtype code, stream-ordered release, stream values and the ABI layout.
 *
 * Everything runs on the CPU device; CUDA and ROCm cases that need a device
 * skip visibly when the backend is unavailable. Each test runs in its own
 * process (Criterion's default), and every suite's .fini shuts the runtime
 * down and asserts that no handle of any kind is left. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "dlpack_layout.h"
#include "dlstream/dlstream.h"

/* ------------------------------------------------------------------ fixtures */

#define MAXD 40

static _Alignas(64) unsigned char g_arena[1 << 16];
static atomic_int g_deleted; /* producer deleters run, all kinds */

typedef struct probe {
  DLManagedTensorVersioned m;
  int64_t shape[MAXD];
  int64_t strides[MAXD];
} probe;

typedef struct probe_legacy {
  DLManagedTensor m;
  int64_t shape[MAXD];
  int64_t strides[MAXD];
} probe_legacy;

static void probe_deleter(DLManagedTensorVersioned *self) {
  atomic_fetch_add(&g_deleted, 1);
  free(self->manager_ctx);
}

static void probe_legacy_deleter(DLManagedTensor *self) {
  atomic_fetch_add(&g_deleted, 1);
  free(self->manager_ctx);
}

static void fill_valid(DLTensor *t, int64_t *shape) {
  t->data = g_arena;
  t->device = dls_cpu();
  t->ndim = 2;
  t->dtype = (DLDataType){kDLFloat, 32, 1};
  shape[0] = 4;
  shape[1] = 8;
  t->shape = shape;
  t->strides = NULL;
  t->byte_offset = 0;
}

/* A valid float32 [4, 8] compact tensor over g_arena, with a counting deleter. */
static probe *probe_new(void) {
  probe *p = calloc(1, sizeof *p);
  cr_assert_not_null(p);
  p->m.version.major = DLPACK_MAJOR_VERSION;
  p->m.version.minor = DLPACK_MINOR_VERSION;
  p->m.manager_ctx = p;
  p->m.deleter = probe_deleter;
  fill_valid(&p->m.dl_tensor, p->shape);
  return p;
}

static probe_legacy *probe_legacy_new(void) {
  probe_legacy *p = calloc(1, sizeof *p);
  cr_assert_not_null(p);
  p->m.manager_ctx = p;
  p->m.deleter = probe_legacy_deleter;
  fill_valid(&p->m.dl_tensor, p->shape);
  return p;
}

static void setup(void) {
  atomic_store(&g_deleted, 0);
  memset(g_arena, 0, sizeof g_arena);
  cr_assert_eq(dls_init(), DLS_OK, "%s", dls_last_error());
}

/* Criterion does not count assertions made in .fini, so a leak logs and
 * aborts the test process, which fails the test. Nothing the test made may be
 * alive before dls_shutdown(), and nothing of any kind after it. */
static void teardown(void) {
  static const char *names[] = {"", "stream", "event", "buffer", "tensor", "module", "function", "group", "latch"};
  int bad = 0;
  for (int k = DLS_HANDLE_STREAM; k < DLS_HANDLE_KIND_COUNT_; k++) {
    size_t n = dls_live_handles((dls_handle_kind_t)k);
    if (n != 0) {
      cr_log_error("leak: %zu %s handle(s) alive at the end of the test", n, names[k]);
      bad = 1;
    }
  }
  if (dls_shutdown() != DLS_OK) {
    cr_log_error("dls_shutdown: %s", dls_last_error());
    bad = 1;
  }
  for (int k = DLS_HANDLE_STREAM; k < DLS_HANDLE_KIND_COUNT_; k++) {
    size_t n = dls_live_handles((dls_handle_kind_t)k);
    if (n != 0) {
      cr_log_error("%zu %s handle(s) alive after dls_shutdown", n, names[k]);
      bad = 1;
    }
  }
  if (dls_deferred_pending() != 0) {
    cr_log_error("%zu deferred release(s) pending after dls_shutdown", dls_deferred_pending());
    bad = 1;
  }
  if (bad)
    abort();
}

TestSuite(dlpack, .init = setup, .fini = teardown);
TestSuite(dlpack_reject, .init = setup, .fini = teardown);
TestSuite(dlpack_roundtrip, .init = setup, .fini = teardown);
TestSuite(dlpack_deferred, .init = setup, .fini = teardown);
TestSuite(dlpack_stream, .init = setup, .fini = teardown);

static void assert_message(const char *text) {
  cr_assert(strstr(dls_last_error(), text) != NULL, "message \"%s\" lacks \"%s\"", dls_last_error(), text);
}

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
  assert_message("out_tensor is NULL");
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
  assert_message("out_tensor is NULL");
}

/* ------------------------------------------------------------- accepted */

static dls_tensor_t import_ok(DLManagedTensorVersioned *m, dls_stream_t producer) {
  dls_tensor_t t = {0};
  dls_status_t st = dls_tensor_import_versioned(m, producer, &t);
  cr_assert_eq(st, DLS_OK, "import: %s", dls_last_error());
  cr_assert_neq(t.id, 0);
  return t;
}

Test(dlpack, zero_size_with_null_data_is_valid) {
  probe *p = probe_new();
  p->m.dl_tensor.data = NULL;
  p->shape[0] = 0;
  p->m.dl_tensor.byte_offset = 3; /* never dereferenced: no elements */
  dls_tensor_t t = import_ok(&p->m, (dls_stream_t){0});
  void *data = (void *)1;
  cr_assert_eq(dls_tensor_data(t, &data), DLS_OK);
  cr_assert_null(data);
  cr_assert_eq(atomic_load(&g_deleted), 0);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 1);
}

Test(dlpack, scalar_with_null_shape) {
  probe *p = probe_new();
  p->m.dl_tensor.ndim = 0;
  p->m.dl_tensor.shape = NULL;
  dls_tensor_t t = import_ok(&p->m, (dls_stream_t){0});
  const DLTensor *v;
  cr_assert_eq(dls_tensor_dltensor(t, &v), DLS_OK);
  cr_assert_eq(v->ndim, 0);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 1);
}

Test(dlpack, negative_strides_numpy_style) {
  /* x[::-1] of 32 floats: data points at the last element in memory. */
  probe *p = probe_new();
  p->m.dl_tensor.ndim = 1;
  p->shape[0] = 32;
  p->m.dl_tensor.strides = p->strides;
  p->strides[0] = -1;
  p->m.dl_tensor.data = g_arena + 31 * sizeof(float);
  dls_tensor_t t = import_ok(&p->m, (dls_stream_t){0});
  /* The whole span is usable: a fill through the tensor covers 32 floats. */
  float one = 1.0f;
  dls_stream_t s = dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY);
  dls_copy_desc_t d = {.ndim = 1, .elem_size = 4, .shape = {32}, .dst_strides = {-1}, .src_strides = {0}};
  cr_assert_eq(dls_copy_strided(s, dls_arg_tensor(t), dls_arg_ptr(&one), &d), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_stream_synchronize(s), DLS_OK);
  for (int i = 0; i < 32; i++)
    cr_assert_eq(((float *)(void *)g_arena)[i], 1.0f, "element %d", i);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 1);
}

Test(dlpack, broadcast_zero_stride) {
  probe *p = probe_new();
  p->m.dl_tensor.strides = p->strides;
  p->strides[0] = 0;
  p->strides[1] = 1;
  dls_tensor_t t = import_ok(&p->m, (dls_stream_t){0});
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 1);
}

Test(dlpack, ndim_32_and_newer_minor_version) {
  probe *p = probe_new();
  p->m.version.minor = 9; /* a newer minor only adds enum values */
  p->m.dl_tensor.ndim = 32;
  for (int i = 0; i < 32; i++)
    p->shape[i] = i == 31 ? 3 : 1;
  dls_tensor_t t = import_ok(&p->m, (dls_stream_t){0});
  const DLTensor *v;
  cr_assert_eq(dls_tensor_dltensor(t, &v), DLS_OK);
  cr_assert_eq(v->ndim, 32);
  cr_assert_eq(v->shape[31], 3);
  cr_assert_eq(v->strides[31], 1);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 1);
}

Test(dlpack, null_deleter_is_allowed) {
  probe *p = probe_new();
  p->m.deleter = NULL;
  dls_tensor_t t = import_ok(&p->m, (dls_stream_t){0});
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  p->m.version.major = 3; /* error path with a NULL deleter too */
  cr_assert_eq(dls_tensor_import_versioned(&p->m, (dls_stream_t){0}, &t), DLS_ERR_VERSION);
  cr_assert_eq(atomic_load(&g_deleted), 0);
  free(p);
}

Test(dlpack, read_only_flag_is_kept) {
  probe *p = probe_new();
  p->m.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  dls_tensor_t t = import_ok(&p->m, (dls_stream_t){0});
  uint64_t flags = 0;
  cr_assert_eq(dls_tensor_flags(t, &flags), DLS_OK);
  cr_assert_eq(flags & DLS_TENSOR_READ_ONLY, DLS_TENSOR_READ_ONLY);
  /* ... and checked at use as an output by the launches. */
  float v = 2.0f;
  dls_status_t st = dls_fill(dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY), dls_arg_tensor(t), 32, 4, &v);
  cr_assert_eq(st, DLS_ERR_READ_ONLY, "%s", dls_last_error());
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
}

Test(dlpack, view_is_not_owned) {
  DLTensor d;
  int64_t shape[2];
  fill_valid(&d, shape);
  dls_tensor_t v;
  cr_assert_eq(dls_tensor_view(&d, DLS_TENSOR_READ_ONLY, (dls_stream_t){0}, &v), DLS_OK, "%s", dls_last_error());
  shape[0] = 999; /* the metadata was copied */
  const DLTensor *got;
  cr_assert_eq(dls_tensor_dltensor(v, &got), DLS_OK);
  cr_assert_eq(got->shape[0], 4);
  cr_assert_eq(got->strides[0], 8);
  cr_assert_eq(got->data, (void *)g_arena);
  uint64_t flags;
  cr_assert_eq(dls_tensor_flags(v, &flags), DLS_OK);
  cr_assert_eq(flags, DLS_TENSOR_READ_ONLY);
  cr_assert_eq(dls_tensor_release(v), DLS_OK);
}

Test(dlpack, empty_is_compact_and_usable) {
  dls_stream_t s;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &s), DLS_OK);
  int64_t shape[3] = {2, 3, 5};
  dls_tensor_t t;
  cr_assert_eq(dls_tensor_empty(s, 3, shape, (DLDataType){kDLFloat, 64, 1}, &t), DLS_OK, "%s", dls_last_error());
  const DLTensor *v;
  cr_assert_eq(dls_tensor_dltensor(t, &v), DLS_OK);
  cr_assert_eq(v->device.device_type, kDLCPU);
  cr_assert_eq(v->strides[0], 15);
  cr_assert_eq(v->strides[1], 5);
  cr_assert_eq(v->strides[2], 1);
  cr_assert_eq((uintptr_t)v->data % 8, 0);
  double x = 0.5;
  cr_assert_eq(dls_fill(s, dls_arg_tensor(t), 30, 8, &x), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_stream_synchronize(s), DLS_OK);
  for (int i = 0; i < 30; i++)
    cr_assert_eq(((double *)v->data)[i], 0.5);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  /* zero-size */
  shape[1] = 0;
  cr_assert_eq(dls_tensor_empty(s, 3, shape, (DLDataType){kDLFloat, 64, 1}, &t), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(dls_stream_destroy(s), DLS_OK);
}

Test(dlpack, validate_accepts_what_import_accepts) {
  DLTensor d;
  int64_t shape[2], strides[2] = {-8, 1};
  fill_valid(&d, shape);
  cr_assert_eq(dls_tensor_validate(&d), DLS_OK, "%s", dls_last_error());
  d.strides = strides;
  d.data = g_arena + 3 * 8 * sizeof(float);
  cr_assert_eq(dls_tensor_validate(&d), DLS_OK, "%s", dls_last_error());
  d.dtype = (DLDataType){kDLFloat6_e3m2fn, 6, 4}; /* 3-byte elements: byte-aligned */
  d.data = g_arena + 1;
  d.strides = NULL;
  cr_assert_eq(dls_tensor_validate(&d), DLS_OK, "%s", dls_last_error());
  d.dtype = (DLDataType){kDLUInt, 1, 1}; /* packed bits */
  cr_assert_eq(dls_tensor_validate(&d), DLS_OK, "%s", dls_last_error());
}

Test(dlpack, dtype_sizes) {
  struct {
    DLDataType dt;
    size_t size;
  } cases[] = {
      {{kDLFloat, 32, 1}, 4},         {{kDLFloat, 32, 4}, 16},         {{kDLComplex, 128, 1}, 16},
      {{kDLBool, 8, 1}, 1},           {{kDLBfloat, 16, 1}, 2},         {{kDLFloat4_e2m1fn, 4, 1}, 1},
      {{kDLFloat4_e2m1fn, 4, 2}, 1},  {{kDLFloat6_e2m3fn, 6, 4}, 3},   {{kDLUInt, 1, 1}, 1},
      {{kDLOpaqueHandle, 64, 1}, 8},  {{kDLFloat8_e5m2, 8, 1}, 1},     {{kDLInt, 64, 2}, 16},
      {{kDLFloat, 8, 1}, 0},          {{kDLInt, 3, 1}, 0},             {{kDLFloat, 32, 0}, 0},
      {{18, 32, 1}, 0},               {{kDLBool, 1, 1}, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_assert_eq(dls_dtype_size(cases[i].dt), cases[i].size, "case %zu (code %u bits %u lanes %u)", i,
                 cases[i].dt.code, cases[i].dt.bits, cases[i].dt.lanes);
}

/* ---------------------------------------------------------------- round trips */

typedef struct rt_case {
  uint8_t code, bits;
  uint16_t lanes;
  uint64_t flags; /* DLPack flag bits of the producer */
  int strided;    /* column-major strides (else NULL) */
} rt_case;

ParameterizedTestParameters(dlpack_roundtrip, every_dtype_code) {
  static rt_case cases[] = {
      {kDLInt, 32, 1, 0, 1},
      {kDLInt, 4, 1, 0, 0}, /* packed sub-byte int */
      {kDLUInt, 8, 1, DLPACK_FLAG_BITMASK_READ_ONLY, 1},
      {kDLFloat, 32, 1, 0, 1},
      {kDLFloat, 16, 2, DLPACK_FLAG_BITMASK_READ_ONLY, 1},
      {kDLOpaqueHandle, 64, 1, 0, 1},
      {kDLBfloat, 16, 1, 0, 1},
      {kDLComplex, 64, 1, DLPACK_FLAG_BITMASK_READ_ONLY, 1},
      {kDLComplex, 128, 1, 0, 0},
      {kDLBool, 8, 1, 0, 1},
      {kDLFloat8_e3m4, 8, 1, 0, 1},
      {kDLFloat8_e4m3, 8, 1, DLPACK_FLAG_BITMASK_READ_ONLY, 1},
      {kDLFloat8_e4m3b11fnuz, 8, 1, 0, 1},
      {kDLFloat8_e4m3fn, 8, 1, 0, 0},
      {kDLFloat8_e4m3fnuz, 8, 1, 0, 1},
      {kDLFloat8_e5m2, 8, 1, 0, 1},
      {kDLFloat8_e5m2fnuz, 8, 1, DLPACK_FLAG_BITMASK_READ_ONLY, 1},
      {kDLFloat8_e8m0fnu, 8, 1, 0, 1},
      {kDLFloat6_e2m3fn, 6, 1, 0, 0},                                          /* packed, compact */
      {kDLFloat6_e3m2fn, 6, 1, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 1}, /* padded, strided */
      {kDLFloat4_e2m1fn, 4, 1, 0, 0},
      {kDLFloat4_e2m1fn, 4, 1, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED | DLPACK_FLAG_BITMASK_READ_ONLY, 1},
      {kDLFloat4_e2m1fn, 4, 2, 0, 1}, /* two lanes make a byte: byte-addressed */
  };
  return cr_make_param_array(rt_case, cases, sizeof cases / sizeof cases[0]);
}

static void assert_same_view(const DLTensor *a, const DLTensor *b) {
  cr_assert_eq(a->data, b->data);
  cr_assert_eq(a->byte_offset, b->byte_offset);
  cr_assert_eq(a->device.device_type, b->device.device_type);
  cr_assert_eq(a->device.device_id, b->device.device_id);
  cr_assert_eq(a->ndim, b->ndim);
  cr_assert_eq(a->dtype.code, b->dtype.code);
  cr_assert_eq(a->dtype.bits, b->dtype.bits);
  cr_assert_eq(a->dtype.lanes, b->dtype.lanes);
  for (int i = 0; i < a->ndim; i++) {
    cr_assert_eq(a->shape[i], b->shape[i], "shape[%d]", i);
    cr_assert_eq(a->strides[i], b->strides[i], "strides[%d]", i);
  }
}

ParameterizedTest(rt_case *c, dlpack_roundtrip, every_dtype_code) {
  probe *p = probe_new();
  DLTensor *d = &p->m.dl_tensor;
  d->dtype = (DLDataType){c->code, c->bits, c->lanes};
  size_t esize = dls_dtype_size(d->dtype);
  cr_assert_gt(esize, 0);
  p->shape[0] = 3;
  p->shape[1] = 4;
  d->byte_offset = 2 * (esize >= 16 ? 16 : esize);
  if (c->strided) {
    d->strides = p->strides;
    p->strides[0] = 1;
    p->strides[1] = 3;
  }
  p->m.flags = c->flags;
  const bool read_only = c->flags & DLPACK_FLAG_BITMASK_READ_ONLY;
  const bool padded = c->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;

  dls_tensor_t t = import_ok(&p->m, (dls_stream_t){0});
  const DLTensor *v;
  cr_assert_eq(dls_tensor_dltensor(t, &v), DLS_OK);
  cr_assert_eq(v->data, (void *)g_arena);
  cr_assert_eq(v->byte_offset, d->byte_offset);
  cr_assert_eq(v->strides[0], c->strided ? 1 : 4);
  cr_assert_eq(v->strides[1], c->strided ? 3 : 1);
  uint64_t flags;
  cr_assert_eq(dls_tensor_flags(t, &flags), DLS_OK);
  cr_assert_eq(!!(flags & DLS_TENSOR_READ_ONLY), read_only);

  /* Versioned export: DLPack 1.1, own shape/strides, flags carried. */
  DLManagedTensorVersioned *e;
  cr_assert_eq(dls_tensor_export_versioned(t, (dls_stream_t){0}, &e), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(e->version.major, 1);
  cr_assert_eq(e->version.minor, 1);
  cr_assert_not_null(e->deleter);
  cr_assert_eq(!!(e->flags & DLPACK_FLAG_BITMASK_READ_ONLY), read_only);
  cr_assert_eq(!!(e->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED), padded);
  cr_assert_eq(e->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0);
  cr_assert_neq(e->dl_tensor.shape, v->shape);
  assert_same_view(&e->dl_tensor, v);

  /* ... and back in: the same view. */
  dls_tensor_t t2 = import_ok(e, (dls_stream_t){0});
  const DLTensor *v2;
  cr_assert_eq(dls_tensor_dltensor(t2, &v2), DLS_OK);
  assert_same_view(v2, v);
  cr_assert_eq(dls_tensor_flags(t2, &flags), DLS_OK);
  cr_assert_eq(!!(flags & DLS_TENSOR_READ_ONLY), read_only);

  /* Legacy export: refused for read-only (and padded) tensors. */
  DLManagedTensor *l = (DLManagedTensor *)(uintptr_t)1;
  dls_status_t st = dls_tensor_export_legacy(t2, (dls_stream_t){0}, &l);
  dls_tensor_t t3 = {0};
  if (read_only) {
    cr_assert_eq(st, DLS_ERR_READ_ONLY, "%s", dls_last_error());
    assert_message("dls_tensor_export_legacy");
    assert_message("read-only");
    cr_assert_null(l);
  } else if (padded) {
    cr_assert_eq(st, DLS_ERR_NOT_SUPPORTED, "%s", dls_last_error());
    assert_message("padded sub-byte");
  } else {
    cr_assert_eq(st, DLS_OK, "%s", dls_last_error());
    assert_same_view(&l->dl_tensor, v);
    cr_assert_eq(dls_tensor_import_legacy(l, (dls_stream_t){0}, &t3), DLS_OK, "%s", dls_last_error());
    const DLTensor *v3;
    cr_assert_eq(dls_tensor_dltensor(t3, &v3), DLS_OK);
    assert_same_view(v3, v);
  }

  /* The producer's deleter runs once, after the last holder lets go. */
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(dls_tensor_release(t3), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 0);
  cr_assert_eq(dls_tensor_release(t2), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 1);
}

Test(dlpack_roundtrip, owned_tensor_outlives_its_handle_through_export) {
  dls_stream_t s;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &s), DLS_OK);
  int64_t shape[1] = {64};
  dls_tensor_t t;
  cr_assert_eq(dls_tensor_empty(s, 1, shape, (DLDataType){kDLInt, 32, 1}, &t), DLS_OK);
  int32_t seven = 7;
  cr_assert_eq(dls_fill(s, dls_arg_tensor(t), 64, 4, &seven), DLS_OK);
  DLManagedTensorVersioned *e;
  cr_assert_eq(dls_tensor_export_versioned(t, s, &e), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(s), DLS_OK);
  const int32_t *x = (const int32_t *)((char *)e->dl_tensor.data + e->dl_tensor.byte_offset);
  for (int i = 0; i < 64; i++)
    cr_assert_eq(x[i], 7);
  e->deleter(e);
  cr_assert_eq(dls_stream_synchronize(s), DLS_OK);
  cr_assert_eq(dls_stream_destroy(s), DLS_OK);
}

Test(dlpack_roundtrip, export_arguments) {
  DLManagedTensorVersioned *e = (DLManagedTensorVersioned *)(uintptr_t)1;
  cr_assert_eq(dls_tensor_export_versioned((dls_tensor_t){0}, (dls_stream_t){0}, &e), DLS_ERR_INVALID_HANDLE);
  cr_assert_null(e);
  cr_assert_eq(dls_tensor_export_versioned((dls_tensor_t){0}, (dls_stream_t){0}, NULL), DLS_ERR_INVALID_ARGUMENT);
  assert_message("dls_tensor_export_versioned: out_managed is NULL");
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, (dls_stream_t){0});
  dls_stream_t s;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &s), DLS_OK);
  cr_assert_eq(dls_stream_destroy(s), DLS_OK);
  cr_assert_eq(dls_tensor_export_versioned(t, s, &e), DLS_ERR_INVALID_HANDLE);
  assert_message("consumer");
  cr_assert_eq(dls_tensor_order_before(t, s), DLS_ERR_INVALID_HANDLE);
  cr_assert_eq(dls_tensor_order_before(t, (dls_stream_t){0}), DLS_OK);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 1);
}

/* ------------------------------------------------------- deferred release */

typedef struct latched {
  dls_stream_t a, b;
  dls_latch_t latch;
} latched;

/* Streams A (producer) and B, with B held by a closed latch. */
static latched latched_streams(void) {
  dlst_need_async(dls_cpu());
  latched L;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &L.a), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &L.b), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_latch_create(dls_cpu(), &L.latch), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_latch_wait(L.latch, L.b, DLST_LATCH_TIMEOUT_NS), DLS_OK, "%s", dls_last_error());
  return L;
}

static void latched_finish(latched *L) {
  cr_assert_eq(dls_latch_open(L->latch), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(L->b), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(L->a), DLS_OK);
  cr_assert_eq(dls_latch_status(L->latch), DLS_OK, "the latch timed out: %s", dls_last_error());
  dls_deferred_poll();
}

static void latched_destroy(latched *L) {
  cr_assert_eq(dls_latch_destroy(L->latch), DLS_OK);
  cr_assert_eq(dls_stream_destroy(L->a), DLS_OK);
  cr_assert_eq(dls_stream_destroy(L->b), DLS_OK);
}

Test(dlpack_deferred, release_waits_for_a_stream_that_used_the_tensor) {
  latched L = latched_streams();
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, L.a);
  float one = 1.0f;
  cr_assert_eq(dls_fill(L.b, dls_arg_tensor(t), 32, 4, &one), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 0, "deleter ran while stream B (which uses the memory) is latched");
  cr_assert_gt(dls_deferred_poll(), 0);
  cr_assert_eq(atomic_load(&g_deleted), 0);
  latched_finish(&L);
  cr_assert_eq(atomic_load(&g_deleted), 1, "deleter ran %d times after B passed", atomic_load(&g_deleted));
  cr_assert_eq(dls_deferred_pending(), 0);
  cr_assert_eq(((float *)(void *)g_arena)[31], 1.0f);
  latched_destroy(&L);
}

Test(dlpack_deferred, negative_control_unrecorded_use_releases_at_once) {
  /* The same, but B gets the raw pointer: no use is recorded, so nothing
   * holds the release back. This shows the test above can fail. */
  latched L = latched_streams();
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, L.a);
  void *data;
  cr_assert_eq(dls_tensor_data(t, &data), DLS_OK);
  float one = 1.0f;
  cr_assert_eq(dls_fill(L.b, dls_arg_ptr(data), 32, 4, &one), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 1, "without a recorded use the deleter runs at once, B still latched");
  cr_assert_eq(dls_deferred_poll(), 0);
  latched_finish(&L);
  cr_assert_eq(atomic_load(&g_deleted), 1);
  latched_destroy(&L);
}

Test(dlpack_deferred, export_deleter_records_the_consumer_use) {
  /* The consumer of an export queues work on B (held), then calls the
   * deleter: the producer's memory must stay until B passes. */
  latched L = latched_streams();
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, L.a);
  DLManagedTensorVersioned *e;
  cr_assert_eq(dls_tensor_export_versioned(t, L.b, &e), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 0, "the export still holds the memory");
  float two = 2.0f;
  cr_assert_eq(dls_fill(L.b, dls_arg_ptr(e->dl_tensor.data), 32, 4, &two), DLS_OK);
  e->deleter(e);
  cr_assert_eq(atomic_load(&g_deleted), 0, "deleter ran while the consumer stream B is latched");
  cr_assert_gt(dls_deferred_poll(), 0);
  latched_finish(&L);
  cr_assert_eq(atomic_load(&g_deleted), 1);
  latched_destroy(&L);
}

Test(dlpack_deferred, negative_control_export_without_consumer_releases_at_once) {
  latched L = latched_streams();
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, L.a);
  DLManagedTensorVersioned *e;
  cr_assert_eq(dls_tensor_export_versioned(t, (dls_stream_t){0}, &e), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  float two = 2.0f;
  cr_assert_eq(dls_fill(L.b, dls_arg_ptr(e->dl_tensor.data), 32, 4, &two), DLS_OK);
  e->deleter(e);
  cr_assert_eq(atomic_load(&g_deleted), 1, "no consumer stream named: nothing holds the release");
  latched_finish(&L);
  latched_destroy(&L);
}

Test(dlpack_deferred, release_waits_for_work_queued_on_the_producer_stream) {
  /* Host memory: the producer's deleter frees at once, so the release must
   * wait for the producer's own stream too when work that uses it is queued. */
  dlst_need_async(dls_cpu());
  dls_stream_t a;
  dls_latch_t latch;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &a), DLS_OK);
  cr_assert_eq(dls_latch_create(dls_cpu(), &latch), DLS_OK);
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, a);
  cr_assert_eq(dls_latch_wait(latch, a, DLST_LATCH_TIMEOUT_NS), DLS_OK);
  float three = 3.0f;
  cr_assert_eq(dls_fill(a, dls_arg_tensor(t), 32, 4, &three), DLS_OK);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 0, "deleter ran while the producer stream still has work queued on it");
  cr_assert_gt(dls_deferred_poll(), 0);
  cr_assert_eq(dls_latch_open(latch), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(a), DLS_OK);
  dls_deferred_poll();
  cr_assert_eq(atomic_load(&g_deleted), 1);
  cr_assert_eq(((float *)(void *)g_arena)[31], 3.0f);
  cr_assert_eq(dls_latch_destroy(latch), DLS_OK);
  cr_assert_eq(dls_stream_destroy(a), DLS_OK);
}

Test(dlpack_deferred, negative_control_idle_producer_releases_at_once) {
  /* The same work, finished before the release: nothing to wait for. */
  dls_stream_t a;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &a), DLS_OK);
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, a);
  float three = 3.0f;
  cr_assert_eq(dls_fill(a, dls_arg_tensor(t), 32, 4, &three), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(a), DLS_OK);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 1);
  cr_assert_eq(dls_deferred_pending(), 0);
  cr_assert_eq(dls_stream_destroy(a), DLS_OK);
}

/* A write through the tensor on A (held by a latch), then a write of another
 * value on B by raw pointer: the final value says which ran last. */
static float order_experiment(bool order) {
  dlst_need_async(dls_cpu());
  dls_stream_t a, b;
  dls_latch_t latch;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &a), DLS_OK);
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &b), DLS_OK);
  cr_assert_eq(dls_latch_create(dls_cpu(), &latch), DLS_OK);
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, a);
  cr_assert_eq(dls_latch_wait(latch, a, DLST_LATCH_TIMEOUT_NS), DLS_OK);
  float one = 1.0f, two = 2.0f;
  cr_assert_eq(dls_fill(a, dls_arg_tensor(t), 32, 4, &one), DLS_OK);
  if (order)
    cr_assert_eq(dls_tensor_order_before(t, b), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_fill(b, dls_arg_ptr(g_arena), 32, 4, &two), DLS_OK);
  if (!order)
    cr_assert_eq(dls_stream_synchronize(b), DLS_OK); /* B finishes while A is held */
  cr_assert_eq(dls_latch_open(latch), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(a), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(b), DLS_OK);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(dls_latch_destroy(latch), DLS_OK);
  cr_assert_eq(dls_stream_destroy(a), DLS_OK);
  cr_assert_eq(dls_stream_destroy(b), DLS_OK);
  dls_deferred_poll();
  cr_assert_eq(atomic_load(&g_deleted), 1);
  return ((float *)(void *)g_arena)[0];
}

Test(dlpack_deferred, order_before_makes_the_consumer_wait) {
  cr_assert_eq(order_experiment(true), 2.0f, "B's write ran before A's: order_before did not order");
}

Test(dlpack_deferred, negative_control_without_order_before) {
  cr_assert_eq(order_experiment(false), 1.0f, "without ordering, B's write runs first (A is held)");
}

Test(dlpack_deferred, shutdown_runs_pending_deleters) {
  latched L = latched_streams();
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, L.a);
  float one = 1.0f;
  cr_assert_eq(dls_fill(L.b, dls_arg_tensor(t), 32, 4, &one), DLS_OK);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 0);
  cr_assert_eq(dls_latch_open(L.latch), DLS_OK); /* shutdown waits for B, so B must be able to pass */
  cr_assert_eq(dls_shutdown(), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(atomic_load(&g_deleted), 1, "dls_shutdown returned before the deferred deleter ran");
}

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

/* -------------------------------------------------------------- ABI layout */

static void compare_layouts(const dls_layout_entry *theirs, size_t n, const char *version) {
  size_t nours;
  const char *ours_version;
  const dls_layout_entry *ours = dls_layout_ours(&nours, &ours_version);
  cr_assert_gt(n, 20, "too few entries recorded for %s", version);
  for (size_t i = 0; i < n; i++) {
    size_t j = 0;
    while (j < nours && strcmp(ours[j].name, theirs[i].name) != 0)
      j++;
    cr_assert_lt(j, nours, "%s: %s has no counterpart in our dlpack.h", version, theirs[i].name);
    cr_assert_eq(ours[j].value, theirs[i].value, "%s differs: ours %lld, %s %lld", theirs[i].name, ours[j].value,
                 version, theirs[i].value);
  }
  cr_log_info("layout: %zu entries of %s match ours (%s)", n, version, ours_version);
}

Test(dlpack, layout_matches_system_dlpack_h) {
#ifdef DLS_HAVE_SYSTEM_DLPACK
  size_t n;
  const char *version;
  const dls_layout_entry *e = dls_layout_system(&n, &version);
  compare_layouts(e, n, version);
#else
  cr_skip_test("no system dlpack.h (install libdlpack-dev, or set DLS_SYSTEM_DLPACK_HEADER)");
#endif
}

Test(dlpack, layout_matches_extra_dlpack_h) {
#ifdef DLS_HAVE_EXTRA_DLPACK
  size_t n;
  const char *version;
  const dls_layout_entry *e = dls_layout_extra(&n, &version);
  compare_layouts(e, n, version);
#else
  cr_skip_test("no DLS_EXTRA_DLPACK_HEADER given (e.g. torch's or CuPy's dlpack.h)");
#endif
}
