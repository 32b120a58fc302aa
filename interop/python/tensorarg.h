/* SPDX-License-Identifier: Apache-2.0 */
/* Tensor arguments of a call as the kernel sees them (tensorarg.c): views, launch pointer arguments (the call's
 * fast type inline), sources of peer copies. */
#ifndef DLSTREAM_PY_TENSORARG_H
#define DLSTREAM_PY_TENSORARG_H

#include "call.h"

/* Fills dtype, ndim, count, contiguity and (with want_meta, up to DLS_COPY_MAX_DIMS) shape and strides. */
void dlspy_view_meta(dlspy_view *v, const DLTensor *dl, bool want_meta);
/* Resolves one tensor-like argument (a dlstream.Tensor, an exchange-API
 * object, any __dlpack__ producer, or a DLPack capsule) for the call's
 * stream. `readonly_ok` allows read-only tensors (never copied back).
 * `want_meta` fills shape and strides. Returns 0, 1 when `obj` is not
 * tensor-like (nothing raised), or -1 with an exception. */
int dlspy_call_tensor(dlspy_call *c, PyObject *obj, int index, bool readonly_ok, bool want_meta, dlspy_view *out);
/* Like dlspy_call_tensor, for the source of a copy that may live on another device of the call's backend (a
 * peer copy reads it): the call's stream waits for the source's producer on its own device, and the source is
 * kept (or its use recorded) until the call's stream passes. A source on the call's device, or in host memory
 * for a GPU call, goes through dlspy_call_tensor. out->device is where the memory lives. */
int dlspy_call_peer_tensor(dlspy_call *c, PyObject *obj, int index, dlspy_view *out);
/* A launch's pointer argument: dlspy_call_tensor without the view, exchange-API tensors and CuPy arrays on the
 * call's device taken without a detour. Returns 0, 1 when `obj` is not tensor-like (nothing raised), -1. */
int dlspy_call_arg(dlspy_call *c, PyObject *obj, int index, bool readonly_ok, dls_arg_t *out);
/* Notes that raw-pointer work on the call's stream uses the dlstream tensor of view `v` (launches through
 * dls_arg_tensor record it themselves): its use is recorded once the work is queued. No-op for other tensors. */
void dlspy_call_record_use(dlspy_call *c, const dlspy_view *v, int mode);

/* dlspy_call_fast_arg for a CuPy array. */
int dlspy_cupy_fast_arg(dlspy_call *c, PyObject *o, dls_arg_t *out);
/* A launch's pointer argument of the call's fast type (see dlspy_call.fast_type) on its device: the data pointer,
 * nothing to order (the call runs on the stream the framework names for it). 0 taken; 1 not this way (nothing
 * raised): dlspy_call_arg takes it; -1 with an exception. */
static inline int dlspy_call_fast_arg(dlspy_call *c, PyObject *o, int index, dls_arg_t *out) {
  if (Py_TYPE(o) != c->fast_type)
    return 1;
  if (c->fast_api == NULL)
    return dlspy_cupy_fast_arg(c, o, out);
  DLTensor dl;
  if (o == c->first_obj && c->first_kind == DLSPY_FIRST_XAPI)
    dl = c->first_dl;
  else if (c->fast_api->dltensor_from_py_object_no_sync(o, &dl) != 0)
    return dlspy_xapi_failed(c->st, c->pycall, DLSPY_ARG(c, index));
  if (dl.device.device_type != c->fast_dev.device_type || dl.device.device_id != c->fast_dev.device_id)
    return 1;
  *out = dls_arg_ptr(dlspy_view_data(&dl));
  if (DLSPY_UNLIKELY(c->extents != NULL))
    c->extents[index] = dlspy_view_extent(&dl);
  return 0;
}

#endif /* DLSTREAM_PY_TENSORARG_H */
