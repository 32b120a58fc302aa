/* SPDX-License-Identifier: Apache-2.0 */
/* DLPack round trips: import then export of every dtype code, flags and strides kept; export arguments. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack_fixtures.h"

TestSuite(dlpack_roundtrip, .init = dlpack_setup, .fini = dlpack_teardown);

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
  assert_message("dls_tensor_export_versioned(out_managed=NULL): output pointer is NULL");
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
