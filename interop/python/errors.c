/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream's exceptions: one class per status, each also the built-in it means, and the helpers that raise
 * them. */
#include "dlspy.h"

#include <stdarg.h>
#include <stdio.h>

typedef struct exc_def {
  int status;
  const char *name;
  const char *doc;
} exc_def;

/* One class per status; each also derives from the built-in it means. */
static const exc_def g_exc_defs[] = {
    {DLS_ERR_INVALID_ARGUMENT, "InvalidArgumentError", "An argument has a value dlstream refuses."},
    {DLS_ERR_INVALID_HANDLE, "InvalidHandleError", "A closed or stale stream, event, tensor, module or function."},
    {DLS_ERR_INVALID_DEVICE, "InvalidDeviceError", "A device that does not exist, or objects on different devices."},
    {DLS_ERR_UNAVAILABLE, "UnavailableError", "The backend cannot be used on this machine (the message says why)."},
    {DLS_ERR_BACKEND, "BackendError", "The GPU driver or a CPU stream reported a failure."},
    {DLS_ERR_OUT_OF_MEMORY, "OutOfMemoryError", "Device or host memory ran out."},
    {DLS_ERR_NOT_SUPPORTED, "NotSupportedError", "The backend does not implement this operation."},
    {DLS_ERR_BUSY, "BusyError", "A resource is in use."},
    {DLS_ERR_TIMEOUT, "TimedOutError", "A wait timed out (for example a latch that was never opened)."},
    {DLS_ERR_NOT_FOUND, "NotFoundError", "A kernel, built-in or file was not found."},
    {DLS_ERR_INVALID_TENSOR, "InvalidTensorError", "A DLPack tensor failed validation."},
    {DLS_ERR_VERSION, "VersionError", "A DLPack tensor of an unsupported major version."},
    {DLS_ERR_READ_ONLY, "ReadOnlyError", "A read-only tensor was passed where the kernel may write."},
    {DLS_ERR_STATE, "StateError", "The call is not valid now (for example after shutdown)."},
    {DLS_ERR_FORK, "ForkError", "dlstream was initialized before fork(); it cannot be used in the child."},
    {DLS_ERR_INTERNAL, "InternalError", "An internal error in dlstream."},
};

static PyObject *builtin_base(int status) {
  switch (status) {
  case DLS_ERR_INVALID_ARGUMENT:
  case DLS_ERR_INVALID_HANDLE:
  case DLS_ERR_INVALID_DEVICE:
    return PyExc_ValueError;
  case DLS_ERR_INVALID_TENSOR:
  case DLS_ERR_VERSION:
  case DLS_ERR_READ_ONLY:
    return PyExc_BufferError;
  case DLS_ERR_NOT_SUPPORTED:
    return PyExc_NotImplementedError;
  case DLS_ERR_OUT_OF_MEMORY:
    return PyExc_MemoryError;
  case DLS_ERR_NOT_FOUND:
    return PyExc_LookupError;
  default:
    return PyExc_RuntimeError;
  }
}

static PyObject *exc_for(dlspy_state *st, dls_status_t status) {
  if ((int)status > 0 && (int)status < DLSPY_STATUS_COUNT && st->exc[status] != NULL)
    return st->exc[status];
  return st->exc[DLS_ERR_INTERNAL];
}

PyObject *dlspy_raise(dlspy_state *st, dls_status_t status, const char *pycall) {
  PyErr_Format(exc_for(st, status), "%s: %s", pycall, dls_last_error());
  return NULL;
}

PyObject *dlspy_raisef(dlspy_state *st, dls_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (msg != NULL) {
    PyErr_SetObject(exc_for(st, status), msg);
    Py_DECREF(msg);
  }
  return NULL;
}

PyObject *dlspy_type_error(dlspy_state *st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (msg != NULL) {
    PyErr_SetObject(st->ArgumentTypeError, msg);
    Py_DECREF(msg);
  }
  return NULL;
}

int dlspy_check_runtime_slow(dlspy_state *st, const char *pycall) {
  if (DLS__UNLIKELY(atomic_load_explicit(&dlspy_dead, memory_order_relaxed))) {
    dlspy_raisef(st, DLS_ERR_STATE, "%s: dlstream was shut down at interpreter exit", pycall);
    return -1;
  }
  if (DLS__LIKELY(atomic_load_explicit(&dls__state, memory_order_acquire) == 1))
    return 0;
  dls_status_t rc = dls__enter_slow(pycall);
  if (rc != DLS_OK) {
    dlspy_raisef(st, rc, "%s", dls_last_error());
    return -1;
  }
  return 0;
}

int dlspy_errors_init(PyObject *m, dlspy_state *st) {
  st->Error = PyErr_NewExceptionWithDoc("dlstream.Error",
                                        "Base of every dlstream exception; each also derives from the built-in "
                                        "exception it means (ValueError, BufferError, RuntimeError ...).",
                                        NULL, NULL);
  if (st->Error == NULL || PyModule_AddObjectRef(m, "Error", st->Error) != 0)
    return -1;
  for (size_t i = 0; i < sizeof g_exc_defs / sizeof g_exc_defs[0]; i++) {
    const exc_def *d = &g_exc_defs[i];
    char qual[64];
    snprintf(qual, sizeof qual, "dlstream.%s", d->name);
    PyObject *bases = PyTuple_Pack(2, st->Error, builtin_base(d->status));
    if (bases == NULL)
      return -1;
    PyObject *cls = PyErr_NewExceptionWithDoc(qual, d->doc, bases, NULL);
    Py_DECREF(bases);
    if (cls == NULL)
      return -1;
    PyObject *code = PyLong_FromLong(d->status);
    int rc = code ? PyObject_SetAttrString(cls, "status", code) : -1;
    Py_XDECREF(code);
    if (rc == 0) {
      PyObject *sname = PyUnicode_FromString(dls_status_name((dls_status_t)d->status));
      rc = sname ? PyObject_SetAttrString(cls, "status_name", sname) : -1;
      Py_XDECREF(sname);
    }
    st->exc[d->status] = cls;
    if (rc != 0 || PyModule_AddObjectRef(m, d->name, cls) != 0)
      return -1;
  }
  {
    PyObject *bases = PyTuple_Pack(2, st->Error, PyExc_TypeError);
    if (bases == NULL)
      return -1;
    st->ArgumentTypeError = PyErr_NewExceptionWithDoc("dlstream.ArgumentTypeError",
                                                      "An argument of the wrong Python type.", bases, NULL);
    Py_DECREF(bases);
    if (st->ArgumentTypeError == NULL || PyModule_AddObjectRef(m, "ArgumentTypeError", st->ArgumentTypeError) != 0)
      return -1;
  }
  return 0;
}
