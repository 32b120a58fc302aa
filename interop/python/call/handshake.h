/* SPDX-License-Identifier: Apache-2.0 */
/* The read pass of a call (handshake.c): one read of each tensor argument into the call's table, the stream picked
 * as it goes. Its general way is handshake.c's; its common case is inline here, Function.launch's hot path: a call
 * shaped like the Function's last one, which names no stream and whose first tensor argument is of the
 * exchange-API type of the last call's tensors, on their device. That tensor decides (its framework's current
 * stream), as the general way would, and the pass reads on through plain values and tensors of that type, so the
 * table holds every tensor and the launch plan (launchplan.h) can decide over it. A call that is not the common
 * case goes the general way from what this pass read. */
#ifndef DLSTREAM_PY_HANDSHAKE_H
#define DLSTREAM_PY_HANDSHAKE_H

#include <string.h>

#include "call.h"
#include "../errors.h"
#include "streamarg.h"
#include "tensorarg.h"

/* Sets the fields of a call that the read pass's general way and the conversion use (a launch by the plan, from
 * the read pass's common case, does not: it ends with nothing held and calls no dlspy_call_end). */
void dlspy_call_cold(dlspy_call *c);
/* The read pass reads the call's arguments into its
 * table, each tensor argument once, and picks its stream in the same pass, in current.h's order: explicit `stream`
 * (may be NULL/None), the use_stream context, else the current stream of the first tensor argument among `args`
 * as it is read (dlspy_current_stream), else the legacy default stream of `device` (NULL: of the first tensor's
 * device). Host arrays decide only when no argument lives on a device. The pass ends at the tensor that decides; the conversion reads the arguments
 * past it, each into its entry (dlspy_call_fast_arg, dlspy_call_arg, dlspy_call_tensor). At most DLS_MAX_ARGS
 * arguments (the callers' check). The stream is not held yet (dlspy_call_hold, before anything runs Python code).
 * 0, or -1 with an exception and nothing held. dlspy_call_read_from goes on from c->xapi and c->cupy, the entries
 * the common case read already (not read again). */
int dlspy_call_read_from(dlspy_call *c, PyObject *stream, const DLDevice *device, PyObject *const *args,
                         Py_ssize_t nargs);
static inline int dlspy_call_read(dlspy_call *c, PyObject *stream, const DLDevice *device, PyObject *const *args,
                                  Py_ssize_t nargs) {
  c->xapi = c->cupy = 0;
  return dlspy_call_read_from(c, stream, device, args, nargs);
}
/* dlspy_call_read, dlspy_call_fast_check, then dlspy_call_hold. */
static inline int dlspy_call_begin(dlspy_call *c, PyObject *stream, const DLDevice *device, PyObject *const *args,
                                   Py_ssize_t nargs) {
  if (dlspy_call_read(c, stream, device, args, nargs) != 0)
    return -1;
  dlspy_call_fast_check(c, args, nargs);
  dlspy_call_hold(c);
  return 0;
}

/* A value converted without running Python code that is no tensor: an exact int, float, bool or bytes, None (a
 * subclass of bytes may define __index__ in Python: not plain). */
static inline bool dlspy_plain_value(PyObject *o) {
  PyTypeObject *tp = Py_TYPE(o);
  if (DLSPY_LIKELY(tp == &PyLong_Type) || DLSPY_LIKELY(tp == &PyFloat_Type))
    return true;
  return o == Py_None || tp == &PyBool_Type || tp == &PyBytes_Type;
}

/* A device as one word, for a compare in one step. */
static inline uint64_t dlspy_device_bits(DLDevice d) {
  uint64_t v;
  memcpy(&v, &d, sizeof v);
  return v;
}

/* Raises for the exchange-API read of argument `index` (named by `desc`) that failed; returns -1. */
int dlspy_read_failed(dlspy_state *st, const char *pycall, const dlspy_call_desc *desc, int index);

/* What the read pass's common case found (dlspy_call_read_common). */
typedef struct dlspy_common {
  uint64_t fast;        /* the tensors of the last type on its device (their entries read, their params set) */
  uint64_t same;        /* the arguments that are the last call's value objects (their params set) */
  uint64_t other;       /* the other plain values */
  uint64_t end;         /* the bit of the argument where the pass ended (1 << n, 0 for 64: it read them all) */
  uint64_t xapi, cupy;  /* every entry read, by how */
  dls_stream_t stream;  /* the stream they decided */
  dls__stream *s;
} dlspy_common;

/* What a call shaped like the last one of a Function looks like, which the read pass's common case tries first: the
 * exchange-API type of the last tensors read (`type`), the pointer slots, and the last call's plain values with
 * their conversions (a Function's memo). */
typedef struct dlspy_last_call {
  dlspy_state *st;          /* the module's */
  dlspy_last_type type;
  uint64_t slots;           /* bit i: a tensor is a tensor to the conversion of argument i */
  PyObject *const *values;  /* `nvalues` of them (NULL: none) */
  const dls_arg_t *conv;
  int nvalues;
} dlspy_last_call;

/* The common case of the read pass of a call that names no stream and names its arguments args[i]
 * (Function.launch), `n` of them (at most DLS_MAX_ARGS), shaped like the last call `L`: its arguments up to the
 * first tensor are plain values, and that tensor is of L's type, in a pointer slot, on that type's device. The pass
 * reads on through plain values and tensors of that type in pointer slots (no lookup: the type of the last tensor
 * read), each read into its entry of c->args in order, those on the type's device fast (their c->params pointing
 * at their pointers); a value that is the last call's object is same (its params pointing at its conversion; no
 * other field for plain values). A tensor of the type on another device is read and ends the pass (its conversion
 * runs Python code), and so does anything else (not read). The first tensor decides: its framework's current
 * stream of its device, asked once the pass has read on. Fills only c->args and c->params (the rest in *r, which
 * dlspy_call_from_common makes the call's). 0: decided; 1: not the common case (nothing raised; r->xapi, r->cupy:
 * the entries read, which dlspy_call_read_from reads no more); -1 with an exception. The framework is asked once
 * the tensors are read (as the plan always did): reading calls no Python code and cannot fail for the stream's
 * sake, so only which error a call failing both ways raises could differ from asking at the first tensor. */
DLSPY_ALWAYS_INLINE int dlspy_call_read_common(const char *pycall, const dlspy_last_call *L, dlspy_call *c,
                                               PyObject *const *args, Py_ssize_t n, dlspy_common *r) {
  r->xapi = r->cupy = r->fast = r->same = r->other = 0;
  if (L->st->stream_var_set ||
      DLSPY_UNLIKELY(atomic_load_explicit(&dlspy_dead, memory_order_relaxed) || !dls__ext_ready()))
    return 1; /* the general way: a use_stream() block; the runtime's check */
  /* An index and the argument's bit: with the call's table in the caller's frame, what the loop keeps alive across
   * the framework's calls fits the callee-saved registers (the rest is read from L and r). */
  uint64_t bit = 1;
  for (Py_ssize_t i = 0; i < n; i++, bit <<= 1) {
    PyObject *o = args[i];
    if (Py_TYPE(o) == L->type.type) {
      if (!(L->slots & bit))
        break; /* a scalar slot: its conversion runs Python code (__index__) */
      dlspy_arg *a = &c->args[i];
      if (DLSPY_UNLIKELY(L->type.api->dltensor_from_py_object_no_sync(o, &a->dl) != 0)) {
        r->xapi = (bit - 1) & ~(r->same | r->other);
        return dlspy_read_failed(L->st, pycall, &dlspy_call_plain, (int)i);
      }
      a->ptr = dlspy_view_data(&a->dl);
      if (DLSPY_UNLIKELY(dlspy_device_bits(a->dl.device) != dlspy_device_bits(L->type.dev))) {
        r->xapi = bit;
        break;
      }
      c->params[i] = &a->ptr; /* fast: every argument before the pass's end that is no plain value (below) */
      continue;
    }
    if (i < L->nvalues && o == L->values[i]) {
      c->params[i] = (void *)&L->conv[i].v; /* the backend copies the values at once */
      r->same |= bit;
    } else if (dlspy_plain_value(o)) {
      r->other |= bit;
    } else {
      break;
    }
  }
  r->end = bit;
  r->fast = (bit - 1) & ~(r->same | r->other);
  r->xapi |= r->fast;
  if (r->fast == 0) /* no tensor of the last type came first */
    return 1;
  /* Step a of current.h's order: the type is known to have the exchange API. */
  return dlspy_current_xapi(L->st, pycall, L->type.api, L->type.dev, &L->type.home, &r->stream, &r->s);
}

/* Makes `c` (dlspy_call_init'ed) the call whose read pass ended in the common case with `r` for the type `t`, as
 * the general way would have left it. */
void dlspy_call_from_common(dlspy_call *c, const dlspy_last_type *t, const dlspy_common *r);

#endif /* DLSTREAM_PY_HANDSHAKE_H */
