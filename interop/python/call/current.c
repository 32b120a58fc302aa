/* SPDX-License-Identifier: Apache-2.0 */
/* What is this object's current stream: the kinds past the exchange API's (which current.h answers inline), in
 * the order current.h draws. */
#include "current.h"

#include "../errors.h"
#include "cupy.h"
#include "tensortypes.h"

int dlspy_framework_current_failed(dlspy_state *st, const char *pycall, DLDevice dev) {
  if (!PyErr_Occurred())
    dlspy_raisef(st, DLS_ERR_BACKEND, "%s: the framework's current_work_stream(device=%d:%d) failed", pycall,
                 (int)dev.device_type, (int)dev.device_id);
  return -1;
}

/* b. A dlstream.Tensor: its allocation (or producer) stream, none for memory no stream produced. */
static int tensor_stream(const dlspy_stream_question *q, dls__stream **out_s) {
  TensorObject *t = (TensorObject *)q->obj;
  dls__ext_tensor ti;
  if (t->handle.id != 0 && dls__ext_tensor_peek(t->handle, &ti))
    *out_s = ti.producer;
  return 0;
}

/* c. A CuPy array: CuPy's current stream of its device, asked in C (1: it cannot be). As for any stream a
 * provider names, nothing that cannot be a stream reaches the driver. */
int dlspy_current_cupy(dlspy_state *st, const char *pycall, DLDevice home, dls_stream_t *out, dls__stream **out_s) {
  void *native = NULL;
  int rc = dlspy_cupy_native(st, home.device_id, &native);
  if (rc != 0)
    return rc;
  uintptr_t v = (uintptr_t)native;
  if ((v > DLS_STREAM_PER_THREAD && v < 4096) || (intptr_t)v < 0) {
    char dev[32];
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s: CuPy's current stream of %s is %p, which cannot be a stream",
                 pycall, dls_device_str(home, dev, sizeof dev), native);
    return -1;
  }
  return dlspy_stream_lookup(st, home, native, pycall, out, out_s);
}

/* d. Anything else: its stream provider's answer, else its array interface's stream (version 3). */
static int other_stream(dlspy_state *st, const char *pycall, const dlspy_stream_question *q, dls_stream_t *out) {
  if (q->provider != NULL) {
    if (dlspy_provider_stream(st, q->provider, q->obj, q->home, pycall, q->arg, out) != 0)
      return -1;
    if (out->id != 0)
      return 0;
  }
  if (q->cai_stream != NULL)
    return dlspy_stream_of_dlpack_value(st, q->home, q->cai_stream, pycall, "__cuda_array_interface__['stream']",
                                        out);
  return 0;
}

int dlspy_current_stream_other(dlspy_state *st, const char *pycall, const dlspy_stream_question *q,
                               dls_stream_t *out, dls__stream **out_s) {
  out->id = 0;
  *out_s = NULL;
  return q->kind == DLSPY_KIND_TENSOR ? tensor_stream(q, out_s) : other_stream(st, pycall, q, out);
}
