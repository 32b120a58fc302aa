/* SPDX-License-Identifier: Apache-2.0 */
/* The DLPack Python protocol as a consumer: __dlpack__ and __dlpack_device__ calls, capsules taken and renamed, and
 * the releases of what a call borrowed (they run from dlstream calls, on any thread, with the GIL held or not). */
#include "protocol.h"

#include <string.h>

#include "../errors.h"

static bool python_gone(void) {
  return atomic_load_explicit(&dlspy_dead, memory_order_acquire) == DLSPY_DEAD || dlspy_py_finalizing();
}

void dlspy_release_pyobject(void *user_data) {
  if (python_gone())
    return; /* the interpreter is going away: leaking beats touching it */
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF((PyObject *)user_data);
  PyGILState_Release(g);
}

void dlspy_managed_release(void *managed, bool versioned) {
  if (managed == NULL || python_gone())
    return;
  PyGILState_STATE g = PyGILState_Ensure();
  /* A consumer that refuses a capsule releases it while its own error is set. The deleter may be Python code
   * (ctypes), which must not run with an exception pending: the error waits aside until the deleter is done. */
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (versioned) {
    DLManagedTensorVersioned *m = managed;
    if (m->deleter)
      m->deleter(m);
  } else {
    DLManagedTensor *m = managed;
    if (m->deleter)
      m->deleter(m);
  }
  if (PyErr_Occurred())
    PyErr_WriteUnraisable(NULL); /* a deleter must not raise; if it did, the caller's error still stands */
  PyErr_Restore(type, value, tb);
  PyGILState_Release(g);
}

void dlspy_release_managed_v(void *user_data) { dlspy_managed_release(user_data, true); }

void dlspy_release_managed_l(void *user_data) { dlspy_managed_release(user_data, false); }

PyObject *dlspy_call_dlpack(dlspy_state *st, PyObject *obj, PyObject *stream_value) {
  PyObject *argv[4] = {NULL, obj, stream_value, st->max_version};
  PyObject *cap = PyObject_VectorcallMethod(st->s_dlpack, argv + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                            st->kw_stream_maxv);
  if (cap != NULL || !PyErr_ExceptionMatches(PyExc_TypeError))
    return cap;
  /* A producer older than DLPack 1.0 knows no max_version. Should the older signatures fail too, the first
   * TypeError (which may be the producer's own) is the last one's __context__. */
  PyObject *first = dlspy_take_exception();
  if (stream_value != Py_None) {
    argv[0] = NULL;
    cap = PyObject_VectorcallMethod(st->s_dlpack, argv + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, st->kw_stream);
    if (cap == NULL && PyErr_ExceptionMatches(PyExc_TypeError))
      PyErr_Clear();
    else
      goto out;
  }
  cap = PyObject_CallMethodNoArgs(obj, st->s_dlpack);
out:
  if (cap == NULL && first != NULL) {
    PyObject *last = dlspy_take_exception();
    if (last != NULL) {
      PyException_SetContext(last, Py_NewRef(first));
      PyErr_SetObject((PyObject *)Py_TYPE(last), last);
      Py_DECREF(last);
    }
  }
  Py_XDECREF(first);
  return cap;
}

int dlspy_capsule_consume(dlspy_state *st, PyObject *cap, const char *pycall, void **out_managed,
                          bool *out_versioned) {
  if (!PyCapsule_CheckExact(cap)) {
    dlspy_type_error(st, "%s: __dlpack__() returned %R, not a PyCapsule", pycall, cap);
    return -1;
  }
  const char *name = PyCapsule_GetName(cap);
  if (name == NULL) {
    PyErr_Clear();
    name = "";
  }
  bool versioned;
  if (strcmp(name, "dltensor_versioned") == 0)
    versioned = true;
  else if (strcmp(name, "dltensor") == 0)
    versioned = false;
  else {
    if (strncmp(name, "used_", 5) == 0)
      dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s: the DLPack capsule was already consumed (named '%s')", pycall,
                   name);
    else
      dlspy_raisef(st, DLS_ERR_INVALID_TENSOR,
                   "%s: a DLPack capsule is named 'dltensor_versioned' or 'dltensor', not '%s'", pycall, name);
    return -1;
  }
  void *m = PyCapsule_GetPointer(cap, name);
  if (m == NULL)
    return -1;
  if (PyCapsule_SetName(cap, versioned ? "used_dltensor_versioned" : "used_dltensor") != 0)
    return -1;
  *out_managed = m;
  *out_versioned = versioned;
  return 0;
}

int dlspy_dlpack_device(dlspy_state *st, PyObject *obj, const char *pycall, DLDevice *out) {
  PyObject *meth = NULL;
  if (dlspy_getattr_opt(obj, st->s_dlpack_device, &meth) < 0)
    return -1;
  if (meth == NULL)
    return 1;
  PyObject *r = PyObject_CallNoArgs(meth);
  Py_DECREF(meth);
  if (r == NULL)
    return -1;
  if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2 || !PyLong_Check(PyTuple_GET_ITEM(r, 0)) ||
      !PyLong_Check(PyTuple_GET_ITEM(r, 1))) {
    dlspy_type_error(st, "%s: __dlpack_device__() returned %R; expected a (device_type, device_id) pair of ints",
                     pycall, r);
    Py_DECREF(r);
    return -1;
  }
  int o1 = 0, o2 = 0;
  long long type = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(r, 0), &o1);
  long long id = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(r, 1), &o2);
  if (o1 || o2 || type < 0 || id < 0 || type > INT32_MAX || id > INT32_MAX) {
    dlspy_range_error(st, "%s: __dlpack_device__() returned %R: out of range: device types and indices are 0 to "
                          "2**31 - 1",
                      pycall, r);
    Py_DECREF(r);
    return -1;
  }
  Py_DECREF(r);
  *out = dls_device((DLDeviceType)type, (int32_t)id);
  return 0;
}
