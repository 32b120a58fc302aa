/* SPDX-License-Identifier: Apache-2.0 */
/* The read pass of a call (see dlspy_call_read_slow in call.h), its common case inline: a launch's hot path. The
 * common case is a call that names no stream whose first tensor argument is of the type of the last tensor read
 * (dlspy_call.last_type: for a Function, its last call's tensors), on that type's device: that tensor decides (its
 * framework's current stream), and the pass reads on through plain scalars and tensors of that type. Anything else
 * goes the general way (handshake.c), which decides the same way for that case. */
#ifndef DLSTREAM_PY_CALLREAD_H
#define DLSTREAM_PY_CALLREAD_H

#include <string.h>

#include "call.h"
#include "errors.h"
#include "streamarg.h"

/* A value converted without running Python code that is no tensor: an exact int, float or bool, None, bytes. */
static inline bool dlspy_plain_value(PyObject *o) {
  PyTypeObject *tp = Py_TYPE(o);
  return tp == &PyLong_Type || tp == &PyFloat_Type || o == Py_None || tp == &PyBool_Type || PyBytes_Check(o);
}

/* A device as one word, for a compare in one step. */
static inline uint64_t dlspy_device_bits(DLDevice d) {
  uint64_t v;
  memcpy(&v, &d, sizeof v);
  return v;
}

/* Raises for the exchange-API read of slot `i` that failed in dlspy_call_read_ahead; returns -1. */
int dlspy_call_read_failed(dlspy_call *c, int i);

/* Past the tensor that decided, from slot `i`: plain values and tensors of the exchange-API type `t` in pointer
 * slots (no lookup: the type of the last tensor read), each read into its entry in order; those on t->dev are fast
 * (their params point at their pointers); a tensor of the type on another device is read and ends the pass (its
 * conversion runs Python code), and so does anything else (not read). Returns the slot where the pass ends, or -1
 * with an exception. */
static inline int dlspy_call_read_ahead(dlspy_call *c, PyObject *const *args, int i, int n, const dlspy_last_type *t) {
  /* What the loop keeps across the framework's calls is little (c, t, args, i, n): the rest is read from c and t. */
  for (; i < n; i++) {
    PyObject *o = args[i];
    if (Py_TYPE(o) == t->type) {
      if (!((c->ptrslots >> i) & 1))
        break; /* a scalar slot: its conversion runs Python code (__index__) */
      dlspy_arg *a = &c->args[i];
      if (DLSPY_UNLIKELY(t->api->dltensor_from_py_object_no_sync(o, &a->dl) != 0))
        return dlspy_call_read_failed(c, i);
      a->ptr = dlspy_view_data(&a->dl);
      if (DLSPY_UNLIKELY(dlspy_device_bits(a->dl.device) != dlspy_device_bits(t->dev))) {
        c->xapi |= (uint64_t)1 << i;
        i++;
        break;
      }
      c->params[i] = &a->ptr;
      c->fast |= (uint64_t)1 << i;
      continue;
    }
    if (!dlspy_plain_value(o))
      break;
  }
  c->xapi |= c->fast;
  return i;
}

/* The read pass of a call that names no stream, on `device`, of `n` (at most DLS_MAX_ARGS) arguments, whose
 * c->last is set: its common case here, the rest the general way (dlspy_call_read_from). The common case: the
 * arguments up to the first tensor are plain values and that tensor is of the last type, in a pointer slot, on the
 * last type's device. It decides: the framework's current stream of that device, asked once the pass has read on
 * as dlspy_call_read_ahead does. */
static inline __attribute__((always_inline)) int dlspy_call_read_last(dlspy_call *c, const DLDevice *device,
                                                                     PyObject *const *args, int n) {
  dlspy_state *st = c->st;
  const dlspy_last_type *last = c->last;
  c->counted = false;
  c->cold = false;
  c->searching = false;
  c->by_last = false;
  c->xapi = c->fast = 0;
  if (st->stream_var_set || DLSPY_UNLIKELY(atomic_load_explicit(&dlspy_dead, memory_order_relaxed) || !dls__ext_ready()))
    return dlspy_call_read_from(c, NULL, device, args, n, 0);
  int i = dlspy_call_read_ahead(c, args, 0, n, last);
  if (i < 0)
    return -1;
  if (c->fast == 0) /* no tensor of the last type came first */
    return dlspy_call_read_from(c, NULL, device, args, n, c->xapi);
  void *native;
  if (dlspy_framework_current(st, c->pycall, last->api, last->dev, &native) != 0 ||
      dlspy_stream_lookup(st, last->home, native, c->pycall, &c->stream, &c->s) != 0)
    return -1;
  c->by_last = true;
  c->nread = i;
  return 0;
}

#endif /* DLSTREAM_PY_CALLREAD_H */
