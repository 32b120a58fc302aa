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

/* Raises for the exchange-API read of argument `index` (named by `desc`) that failed; returns -1. */
int dlspy_read_failed(dlspy_state *st, const char *pycall, const dlspy_call_desc *desc, int index);

/* The read pass's common case from slot `i` (dlspy_call_read_common): plain values and tensors of the exchange-API
 * type `t` in pointer slots (`slots`; no lookup: the type of the last tensor read), each read into its entry of
 * `table` in order; those on t->dev are fast (set in *fast, their `params` pointing at their pointers); a tensor of
 * the type on another device is read (set in *xapi) and ends the pass (its conversion runs Python code), and so does
 * anything else (not read). Returns the slot where the pass ends; -1 when the framework could not describe the
 * tensor in slot *bad (nothing raised). */
static inline __attribute__((always_inline)) int dlspy_read_type(const dlspy_last_type *t, uint64_t slots,
                                                                PyObject *const *args, int i, int n,
                                                                dlspy_arg *table, void **params, uint64_t *fast,
                                                                uint64_t *xapi, int *bad) {
  for (; i < n; i++) {
    PyObject *o = args[i];
    if (Py_TYPE(o) == t->type) {
      if (!((slots >> i) & 1))
        break; /* a scalar slot: its conversion runs Python code (__index__) */
      dlspy_arg *a = &table[i];
      if (DLSPY_UNLIKELY(t->api->dltensor_from_py_object_no_sync(o, &a->dl) != 0)) {
        *xapi |= *fast;
        *bad = i;
        return -1;
      }
      a->ptr = dlspy_view_data(&a->dl);
      if (DLSPY_UNLIKELY(dlspy_device_bits(a->dl.device) != dlspy_device_bits(t->dev))) {
        *xapi |= (uint64_t)1 << i;
        i++;
        break;
      }
      params[i] = &a->ptr;
      *fast |= (uint64_t)1 << i;
      continue;
    }
    if (!dlspy_plain_value(o))
      break;
  }
  *xapi |= *fast;
  return i;
}

/* What the read pass's common case found (dlspy_call_read_common). */
typedef struct dlspy_common {
  uint64_t fast;        /* the tensors of the last type on its device */
  uint64_t xapi, cupy;  /* every entry read, by how */
  dls_stream_t stream;  /* the stream they decided */
  dls__stream *s;
} dlspy_common;

/* The common case of the read pass of a call that names no stream and names its arguments args[i]
 * (Function.launch), `n` of them (at most DLS_MAX_ARGS), given `t`, the type of the last tensor read (a Function's
 * last call's), and its pointer slots: the arguments up to the first tensor are plain values and that tensor is of
 * the exchange-API type `t`, in a pointer slot, on t's device. It decides: its framework's current stream of that
 * device, asked once the pass has read on as dlspy_read_type does. Fills only c->args and c->params (the rest in *r, which dlspy_call_from_common makes the call's). 0:
 * decided; 1: not the common case (nothing raised; r->xapi, r->cupy: the entries read, which dlspy_call_read_from
 * reads no more); -1 with an exception. */
static inline __attribute__((always_inline)) int dlspy_call_read_common(dlspy_state *st, const char *pycall,
                                                                       const dlspy_last_type *t, uint64_t slots,
                                                                       dlspy_call *c, PyObject *const *args, int n,
                                                                       dlspy_common *r) {
  r->xapi = r->cupy = 0;
  if (st->stream_var_set || DLSPY_UNLIKELY(atomic_load_explicit(&dlspy_dead, memory_order_relaxed) || !dls__ext_ready()))
    return 1;
  uint64_t fast = 0, xapi = 0;
  int bad;
  int i = dlspy_read_type(t, slots, args, 0, n, c->args, c->params, &fast, &xapi, &bad);
  if (i < 0)
    return dlspy_read_failed(st, pycall, &dlspy_call_plain, bad);
  r->xapi = xapi;
  if (fast == 0) /* no tensor of the last type came first */
    return 1;
  void *native;
  if (dlspy_framework_current(st, pycall, t->api, t->dev, &native) != 0 ||
      dlspy_stream_lookup(st, t->home, native, pycall, &r->stream, &r->s) != 0)
    return -1;
  r->fast = fast;
  return 0;
}

/* Makes `c` (dlspy_call_init'ed) the call whose read pass ended in the common case with `r` for the type `t`, as
 * the general way would have left it. */
void dlspy_call_from_common(dlspy_call *c, const dlspy_last_type *t, const dlspy_common *r);

#endif /* DLSTREAM_PY_CALLREAD_H */
