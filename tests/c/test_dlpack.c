/* SPDX-License-Identifier: Apache-2.0 */
/* DLPack tensors dlstream accepts (edge cases of the spec), dtype sizes, and the ABI layout compared with
 * other dlpack.h headers. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack_fixtures.h"
#include "dlpack_layout.h"

TestSuite(dlpack, .init = dlpack_setup, .fini = dlpack_teardown);

/* ------------------------------------------------------------- accepted */

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
