/* SPDX-License-Identifier: Apache-2.0 */
/* NumPy's view of a CPU tensor: Tensor.__array__ (np.asarray, np.array; NumPy 2's dtype and copy rules) and
 * Tensor.numpy(). Both go through numpy.from_dlpack(t), so the host waits for the tensor's pending work first, as
 * DLPack asks of host memory; a tensor elsewhere is a TypeError saying how to bring it to the host. */
#include "args.h"
#include "errors.h"
#include "tensornumpy.h"

/* numpy.from_dlpack(t), or NULL with an exception naming `pycall`. */
static PyObject *numpy_view(dlspy_state *st, TensorObject *t, const char *pycall) {
  if (t->handle.id == 0)
    return dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s: the tensor was released", pycall);
  if (dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  if (t->device.device_type != kDLCPU) {
    char d[32];
    return dlspy_type_error(st,
                            "%s: the tensor is on %s, and NumPy reads host memory only: copy it into a NumPy array "
                            "(out = numpy.empty(t.shape, t.dtype); dlstream.copy(out, t); dlstream.synchronize()), "
                            "or take it with the framework of its device (torch.from_dlpack(t), cupy.from_dlpack(t))",
                            pycall, dls_device_str(t->device, d, sizeof d));
  }
  PyObject *np = PyImport_ImportModule("numpy");
  if (np == NULL)
    return dlspy_raisef(st, DLS_ERR_UNAVAILABLE, "%s: NumPy is not importable (pip install numpy)", pycall);
  PyObject *a = PyObject_CallMethod(np, "from_dlpack", "O", (PyObject *)t);
  Py_DECREF(np);
  return a;
}

PyObject *dlspy_tensor_array(TensorObject *t, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
  static const char pycall[] = "Tensor.__array__";
  dlspy_state *st = PyType_GetModuleState(cls);
  static const char *const names[] = {"dtype", "copy", NULL};
  PyObject *a[2];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 2, a) != 0)
    return NULL;
  PyObject *dtype = a[0] != NULL && a[0] != Py_None ? a[0] : NULL;
  int copy = -1; /* None: copy only when needed */
  if (a[1] != NULL && a[1] != Py_None && (copy = PyObject_IsTrue(a[1])) < 0)
    return NULL;
  PyObject *view = numpy_view(st, t, pycall);
  if (view == NULL)
    return NULL;
  if (dtype != NULL) {
    PyObject *np = PyImport_ImportModule("numpy"), *have = PyObject_GetAttrString(view, "dtype");
    dtype = np != NULL && have != NULL ? PyObject_CallMethod(np, "dtype", "O", dtype) : NULL; /* named as NumPy does */
    int same = dtype != NULL ? PyObject_RichCompareBool(have, dtype, Py_EQ) : -1;
    Py_XDECREF(np);
    PyObject *r = NULL;
    if (same == 0 && copy == 0)
      dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT,
                   "%s(dtype=%S, copy=False): the tensor holds %S; another dtype needs a copy (copy=None or True)",
                   pycall, dtype, have);
    else if (same == 0)
      r = PyObject_CallMethod(view, "astype", "O", dtype); /* a new array */
    Py_XDECREF(have);
    Py_XDECREF(dtype);
    if (same != 1) {
      Py_DECREF(view);
      return r;
    }
  }
  if (copy == 1) {
    PyObject *r = PyObject_CallMethod(view, "copy", NULL);
    Py_DECREF(view);
    return r;
  }
  return view;
}

PyObject *dlspy_tensor_numpy(TensorObject *t, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
  static const char pycall[] = "Tensor.numpy";
  dlspy_state *st = PyType_GetModuleState(cls);
  if (nargs != 0 || kwnames != NULL)
    return dlspy_type_error(st, "Tensor.numpy() takes no arguments");
  return numpy_view(st, t, pycall);
}
