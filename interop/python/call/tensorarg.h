/* SPDX-License-Identifier: Apache-2.0 */
/* Tensor arguments of a call as the kernel sees them (tensorarg.c): views, launch pointer arguments (the call's
 * fast type inline), sources of peer copies. */
#ifndef DLSTREAM_PY_TENSORARG_H
#define DLSTREAM_PY_TENSORARG_H

#include "alias.h"
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

/* dlspy_call_fast_check while a range is registered. */
void dlspy_call_fast_aliases(dlspy_call *c, PyObject *const *args, Py_ssize_t nargs);
/* After the read pass, before the first of the call's arguments `args` (its table's) is taken: while a range is
 * registered (exported dlstream memory, foreign records), every tensor of the fast type is read now and looked up,
 * and one that aliases or overlaps one takes the way that orders it (not fast). Nothing else while none is (one
 * load). */
static inline void dlspy_call_fast_check(dlspy_call *c, PyObject *const *args, Py_ssize_t nargs) {
  if (dlspy_ranges_any())
    dlspy_call_fast_aliases(c, args, nargs);
}
/* dlspy_call_fast_arg for an argument of the fast type past the read pass's reach: reads it into its entry (slot
 * `i`). 0: on the fast device; 1: not (nothing raised); -1 with an exception. */
int dlspy_call_fast_read(dlspy_call *c, PyObject *o, int i);
/* A launch's pointer argument, slot `i` of a call whose table starts at its first argument (Function.launch), that
 * is a tensor of the call's fast type (see dlspy_call.ftype) on its device: the data pointer from its entry,
 * nothing to order (the call runs on the stream the framework names for it, and no fast tensor is an alias:
 * dlspy_call_fast_check). 0 taken; 1 not this way (nothing raised): dlspy_call_arg takes it; -1 with an exception. */
static inline int dlspy_call_fast_arg(dlspy_call *c, PyObject *o, int i, dls_arg_t *out) {
  if (!((c->fast >> i) & 1)) {
    if (Py_TYPE(o) != c->ftype.type || (((c->xapi | c->cupy) >> i) & 1)) /* read already, and not on its device */
      return 1;
    int rc = dlspy_call_fast_read(c, o, i);
    if (rc != 0)
      return rc;
  }
  *out = dls_arg_ptr(c->args[i].ptr);
  if (DLSPY_UNLIKELY(c->extents != NULL) && ((c->xapi >> i) & 1))
    dlspy_note_extent(c, i, dlspy_view_extent(&c->args[i].dl));
  return 0;
}

#endif /* DLSTREAM_PY_TENSORARG_H */
