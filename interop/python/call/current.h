/* SPDX-License-Identifier: Apache-2.0 */
/* What is this object's current stream (current.c): one answer, in one order, asked by the read pass's general
 * way (handshake.c, for a call's first tensor), its common case (handshake.h) and the conversion (call.c: the
 * stream a later tensor's framework orders it on).
 *
 * A call's stream, highest first:
 *   1. stream= given to the call (dlspy_stream_resolve);
 *   2. the use_stream() or branch block the call runs in (dlspy_context_stream);
 *   3. its first tensor argument on a device (host memory decides only when no argument lives on one), whose
 *      current stream is, by what the object is (dlspy_current_stream):
 *        a. a tensor of a framework with the DLPack C exchange API: current_work_stream(its device);
 *        b. a dlstream.Tensor: the stream its memory was allocated (or produced) on;
 *        c. a CuPy array read in C: CuPy's current stream of its device;
 *        d. anything else: its registered stream provider's answer, else its version-3
 *           __cuda_array_interface__'s stream;
 *      an answer of no stream (a dlstream.Tensor without a producer, d without either) leaves the call to 4;
 *   4. the legacy default stream of its device, or torch's capturing stream inside a torch.cuda.graph capture
 *      (dlspy_default_stream).
 * Nothing here is cached across calls: a framework's current stream can change between any two calls, and no
 * framework offers a cheaper check than asking (bench/results, docs/benchmarks.md). What is cached is the step
 * from a native stream to dlstream's (streamarg.h: the memo of the last pair, then the wrapper cache). */
#ifndef DLSTREAM_PY_CURRENT_H
#define DLSTREAM_PY_CURRENT_H

#include "streamarg.h"

/* What an object is, as far as its current stream goes. */
typedef struct dlspy_stream_question {
  int kind;                      /* DLSPY_KIND_* of its type; DLSPY_KIND_OTHER also for CuPy not readable in C */
  const DLPackExchangeAPI *api;  /* XAPI: its framework's */
  DLDevice dev;                  /* the device the object names (XAPI: as its framework names it) */
  DLDevice home;                 /* the same as dlstream names it: where the answer's stream lives */
  PyObject *obj;                 /* TENSOR, OTHER: the object */
  PyObject *provider;            /* OTHER: its type's registered stream provider (NULL: none) */
  PyObject *cai_stream;          /* OTHER: its __cuda_array_interface__'s stream (NULL: none) */
  const char *arg;               /* OTHER: the argument's name, for messages */
} dlspy_stream_question;

/* Raises for a framework whose current_work_stream(dev) failed (unless it raised); returns -1. */
int dlspy_framework_current_failed(dlspy_state *st, const char *pycall, DLDevice dev);
/* An exchange-API framework's current stream of `dev` as its native handle; -1 with an exception when the
 * framework fails. */
static inline int dlspy_framework_current(dlspy_state *st, const char *pycall, const DLPackExchangeAPI *api,
                                          DLDevice dev, void **out_native) {
  *out_native = NULL;
  if (DLSPY_LIKELY(api->current_work_stream(dev.device_type, dev.device_id, out_native) == 0))
    return 0;
  return dlspy_framework_current_failed(st, pycall, dev);
}

/* Step a of the order: an exchange-API framework's current stream of `dev` (`*home` as dlstream names it). The
 * read pass's common case, whose tensors' type is known to have the exchange API, asks this step directly (a
 * question built for dlspy_current_stream costs it 10 instructions a launch); everything else asks
 * dlspy_current_stream. */
DLSPY_ALWAYS_INLINE int dlspy_current_xapi(dlspy_state *st, const char *pycall, const DLPackExchangeAPI *api, DLDevice dev,
                                     const DLDevice *home, dls_stream_t *out, dls__stream **out_s) {
  void *native; /* `home` read once the framework answered: nothing held across its call */
  if (dlspy_framework_current(st, pycall, api, dev, &native) != 0)
    return -1;
  return dlspy_stream_lookup(st, *home, native, pycall, out, out_s);
}

/* dlspy_current_stream of a CuPy array on `home` (current.c). */
int dlspy_current_cupy(dlspy_state *st, const char *pycall, DLDevice home, dls_stream_t *out, dls__stream **out_s);
/* dlspy_current_stream of a dlstream.Tensor or any other object (current.c). */
int dlspy_current_stream_other(dlspy_state *st, const char *pycall, const dlspy_stream_question *q,
                               dls_stream_t *out, dls__stream **out_s);
/* The current stream of the object `q` describes, on q->home: its handle (*out, {0}: none named) and, where it is
 * known already, its core stream (*out_s, else NULL: the caller resolves *out). The order of 3 above, by q->kind.
 * 0 (answered, perhaps with no stream), 1 (CuPy only: the C path cannot ask; nothing raised: ask again as
 * DLSPY_KIND_OTHER), or -1 with an exception. */
DLSPY_ALWAYS_INLINE int dlspy_current_stream(dlspy_state *st, const char *pycall, const dlspy_stream_question *q,
                                             dls_stream_t *out, dls__stream **out_s) {
  if (DLSPY_LIKELY(q->kind == DLSPY_KIND_XAPI))
    return dlspy_current_xapi(st, pycall, q->api, q->dev, &q->home, out, out_s);
  if (q->kind == DLSPY_KIND_CUPY)
    return dlspy_current_cupy(st, pycall, q->home, out, out_s);
  return dlspy_current_stream_other(st, pycall, q, out, out_s);
}

#endif /* DLSTREAM_PY_CURRENT_H */
