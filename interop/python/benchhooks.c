/* SPDX-License-Identifier: Apache-2.0 */
/* Private hooks for bench/bench_python.py: anchors measured in C inside the
 * same process, so the Python figures have a floor from the same run. */
#include "call/tensortypes.h"

#include <time.h>

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* _bench_exchange_import(obj, n) -> seconds for n imports the way a launch
 * does one: the per-type exchange-API lookup, the DLTensor read and the
 * framework's current stream. */
PyObject *dlspy_bench_exchange_import(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  long n;
  if (nargs != 2 || (n = PyLong_AsLong(args[1])) <= 0) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "_bench_exchange_import(obj, n): n > 0 calls");
    return NULL;
  }
  PyObject *obj = args[0];
  const DLPackExchangeAPI *api = dlspy_xapi_of(st, Py_TYPE(obj));
  if (api == NULL) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "_bench_exchange_import: %s offers no DLPack exchange API",
                   Py_TYPE(obj)->tp_name);
    return NULL;
  }
  double t0 = seconds();
  for (long i = 0; i < n; i++) {
    DLTensor dl;
    void *stream = NULL;
    if (dlspy_xapi_of(st, Py_TYPE(obj)) != api || api->dltensor_from_py_object_no_sync(obj, &dl) != 0 ||
        api->current_work_stream(dl.device.device_type, dl.device.device_id, &stream) != 0) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "_bench_exchange_import: the framework refused");
      return NULL;
    }
  }
  return PyFloat_FromDouble(seconds() - t0);
}

/* _bench_loop(fn, args, n) -> None: calls fn(*args) n times from C. scripts/callgrind-python counts the
 * instructions of exactly these calls (callgrind --toggle-collect=dlspy_bench_loop): the call's own and Python's
 * dispatch into it, without the interpreter's loop around it. */
PyObject *dlspy_bench_loop(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  long n;
  if (nargs != 3 || !PyTuple_Check(args[1]) || (n = PyLong_AsLong(args[2])) < 0) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "_bench_loop(fn, args, n): args a tuple, n >= 0 calls");
    return NULL;
  }
  PyObject *fn = args[0];
  PyObject *const *argv = &PyTuple_GET_ITEM(args[1], 0);
  size_t argc = (size_t)PyTuple_GET_SIZE(args[1]);
  for (long i = 0; i < n; i++) {
    PyObject *r = PyObject_Vectorcall(fn, argv, argc, NULL);
    if (r == NULL)
      return NULL;
    Py_DECREF(r);
  }
  Py_RETURN_NONE;
}

/* _bench_raw_axpy(native_stream, x, y, n_elems, calls) -> seconds for `calls` launches of the built-in
 * dls_axpy_f32 straight through the CUDA backend's launch (cuLaunchKernel plus its context check), skipping every
 * dlstream and Python layer: the floor the Python launch is held to. x and y are int device pointers; or two
 * tensors of a type with the DLPack C exchange API, read through it at every launch with the framework's current
 * stream asked each time (native_stream is then unused): the floor of any launcher that takes that framework's
 * tensors on its current stream. */
PyObject *dlspy_bench_raw_axpy(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 5) {
    PyErr_SetString(PyExc_TypeError, "_bench_raw_axpy(native_stream, x, y, n_elems, calls)");
    return NULL;
  }
  const DLPackExchangeAPI *api = NULL;
  if (!PyLong_Check(args[1])) {
    api = dlspy_xapi_of(dlspy_state_of_module(m), Py_TYPE(args[1]));
    if (api == NULL || Py_TYPE(args[2]) != Py_TYPE(args[1])) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "_bench_raw_axpy: x and y: int pointers, or exchange-API tensors");
      return NULL;
    }
  }
  void *stream = PyLong_AsVoidPtr(args[0]);
  void *x = api ? NULL : PyLong_AsVoidPtr(args[1]);
  void *y = api ? NULL : PyLong_AsVoidPtr(args[2]);
  unsigned long long n = PyLong_AsUnsignedLongLong(args[3]);
  long calls = PyLong_AsLong(args[4]);
  if (PyErr_Occurred())
    return NULL;
  dls_function_t fh;
  dls_status_t rc = dls_builtin_function(dls_cuda(0), "dls_axpy_f32", &fh);
  if (rc != DLS_OK) {
    PyErr_Format(PyExc_RuntimeError, "_bench_raw_axpy: %s", dls_last_error());
    return NULL;
  }
  dls__ext_raw_launch f;
  if ((rc = dls__ext_raw_launch_of(fh, &f)) != DLS_OK) {
    PyErr_Format(PyExc_RuntimeError, "_bench_raw_axpy: %s", dls_last_error());
    return NULL;
  }
  float a = 1.0f;
  void *params[4] = {&n, &a, &x, &y};
  uint32_t sizes[4] = {8, 4, sizeof(void *), sizeof(void *)};
  dls_launch_config_t cfg = dls_config_1d((uint32_t)((n + 255) / 256), 256);
  double t0 = seconds();
  for (long i = 0; i < calls; i++) {
    if (api != NULL) {
      DLTensor dx, dy;
      if (api->dltensor_from_py_object_no_sync(args[1], &dx) != 0 ||
          api->dltensor_from_py_object_no_sync(args[2], &dy) != 0 ||
          api->current_work_stream(dx.device.device_type, dx.device.device_id, &stream) != 0) {
        if (!PyErr_Occurred())
          PyErr_SetString(PyExc_RuntimeError, "_bench_raw_axpy: the framework refused");
        return NULL;
      }
      x = (char *)dx.data + dx.byte_offset;
      y = (char *)dy.data + dy.byte_offset;
    }
    rc = f.launch(f.be, f.dev, f.function, stream, &cfg, params, sizes, 4);
    if (rc != DLS_OK) {
      PyErr_Format(PyExc_RuntimeError, "_bench_raw_axpy: %s", dls_last_error());
      return NULL;
    }
  }
  return PyFloat_FromDouble(seconds() - t0);
}
