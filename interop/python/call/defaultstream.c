/* SPDX-License-Identifier: Apache-2.0 */
/* The stream of a call that names none and has no tensor to ask: the legacy default stream, except inside a
 * torch.cuda.graph capture, where it is torch's capturing stream (work on the legacy stream would run at once and
 * silently stay out of the graph). */
#include "streamarg.h"

#include "../errors.h"

void dlspy_torch_clear(dlspy_state *st) {
  Py_CLEAR(st->torch.module);
  Py_CLEAR(st->torch.is_initialized);
  Py_CLEAR(st->torch.is_capturing);
  Py_CLEAR(st->torch.current_stream);
}

/* torch.cuda's functions, looked up again when the torch module in sys.modules changes. 0: found; 1: torch is not
 * imported (or has no torch.cuda); -1 with an exception. */
static int torch_functions(dlspy_state *st) {
  PyObject *torch = PyImport_GetModule(st->s_torch);
  if (torch == NULL)
    return PyErr_Occurred() ? -1 : 1;
  if (torch == st->torch.module) {
    Py_DECREF(torch);
    return st->torch.current_stream != NULL ? 0 : 1;
  }
  dlspy_torch_clear(st);
  st->torch.module = torch;
  PyObject *cuda = NULL;
  if (dlspy_getattr_opt(torch, st->s_cuda, &cuda) < 0)
    return -1;
  if (cuda == NULL)
    return 1;
  static const char *const names[] = {"is_initialized", "is_current_stream_capturing", "current_stream"};
  PyObject *fns[3] = {NULL, NULL, NULL};
  int rc = 0;
  for (int i = 0; i < 3 && rc == 0; i++) {
    fns[i] = PyObject_GetAttrString(cuda, names[i]);
    if (fns[i] == NULL)
      rc = PyErr_ExceptionMatches(PyExc_AttributeError) ? 1 : -1;
  }
  Py_DECREF(cuda);
  if (rc != 0) {
    for (int i = 0; i < 3; i++)
      Py_XDECREF(fns[i]);
    if (rc > 0)
      PyErr_Clear(); /* a torch without them cannot be capturing */
    return rc;
  }
  st->torch.is_initialized = fns[0];
  st->torch.is_capturing = fns[1];
  st->torch.current_stream = fns[2];
  return 0;
}

/* Calls fn(*args) and reads the result's truth; -1 with an exception. */
static int call_true(PyObject *fn, PyObject *arg) {
  PyObject *r = arg ? PyObject_CallOneArg(fn, arg) : PyObject_CallNoArgs(fn);
  if (r == NULL)
    return -1;
  int t = PyObject_IsTrue(r);
  Py_DECREF(r);
  return t;
}

int dlspy_default_stream(dlspy_state *st, DLDevice dev, const char *pycall, dls_stream_t *out) {
  *out = dls_stream_default(dev, DLS_STREAM_LEGACY);
  if (dev.device_type != kDLCUDA && dev.device_type != kDLROCM)
    return 0;
  int rc = torch_functions(st);
  if (rc != 0)
    goto done;
  /* torch.cuda.is_initialized() first: asking an uninitialized torch whether it captures would initialize CUDA. */
  PyObject *fns[2] = {st->torch.is_initialized, st->torch.is_capturing};
  Py_INCREF(fns[0]);
  Py_INCREF(fns[1]);
  rc = call_true(fns[0], NULL);
  if (rc == 1)
    rc = call_true(fns[1], NULL); /* on torch's current device */
  Py_DECREF(fns[0]);
  Py_DECREF(fns[1]);
  if (rc != 1)
    goto done;
  /* Some capture is underway: is it on torch's current stream of this call's device? */
  PyObject *fn = Py_NewRef(st->torch.current_stream);
  PyObject *index = PyLong_FromLong(dev.device_id);
  PyObject *cur = index ? PyObject_CallOneArg(fn, index) : NULL;
  Py_XDECREF(index);
  Py_DECREF(fn);
  if (cur == NULL) {
    rc = -1;
    goto done;
  }
  dls_stream_t h;
  rc = dlspy_stream_resolve(st, cur, dev, pycall, "torch.cuda.current_stream()", &h);
  Py_DECREF(cur);
  if (rc != 0)
    goto done;
  dls_capture_status_t cs = DLS_CAPTURE_NONE;
  dls_status_t s = dls_stream_capture_status(h, &cs);
  if (s != DLS_OK) {
    dlspy_raise(st, s, pycall);
    rc = -1;
  } else if (cs != DLS_CAPTURE_NONE) {
    *out = h; /* the call is recorded into torch's graph, as torch's own ops are */
  }
done:
  if (rc < 0) {
    dlspy_raisef(st, DLS_ERR_STATE,
                 "%s: the call names no stream and has no tensor argument, so it would run on torch's current "
                 "stream if torch is capturing a graph; asking torch failed",
                 pycall);
    return -1;
  }
  return 0;
}
