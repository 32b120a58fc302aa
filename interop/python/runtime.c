/* SPDX-License-Identifier: Apache-2.0 */
/* Module functions about the runtime: leak counters, deferred releases, caches and current_stream (the atexit
 * shutdown: exit.c). */
#include "args.h"
#include "call/cupy.h"
#include "errors.h"
#include "call/streamarg.h"
#include "call/tensortypes.h"

PyObject *dlspy_mod_live_handles(PyObject *m, PyObject *unused) {
  static const char *const names[] = {NULL, "stream", "event", "buffer", "tensor", "module", "function", "group",
                                      "latch",  "graph"};
  _Static_assert(sizeof names / sizeof names[0] == DLS_HANDLE_KIND_COUNT_, "a name for every handle kind");
  PyObject *d = PyDict_New();
  if (d == NULL)
    return NULL;
  for (int k = 1; k < DLS_HANDLE_KIND_COUNT_; k++) {
    PyObject *v = PyLong_FromSize_t(dls_live_handles((dls_handle_kind_t)k));
    if (v == NULL || PyDict_SetItemString(d, names[k], v) != 0) {
      Py_XDECREF(v);
      Py_DECREF(d);
      return NULL;
    }
    Py_DECREF(v);
  }
  return d;
}

PyObject *dlspy_mod_deferred_pending(PyObject *m, PyObject *unused) { return PyLong_FromSize_t(dls_deferred_pending()); }
PyObject *dlspy_mod_deferred_poll(PyObject *m, PyObject *unused) {
  if (atomic_load(&dlspy_dead) != DLSPY_ALIVE || !dls__ext_ready())
    return PyLong_FromLong(0);
  dls__ext_foreign_sweep(); /* and the records of foreign memory whose uses passed */
  return PyLong_FromSize_t(dls_deferred_poll());
}

/* _test_hazards(on): the test-only switch of the hazard rule (DLSTREAM_TEST_NO_HAZARDS at start-up), for tests
 * that watch which stream a call picks and must not see the rule's waits; returns the previous setting. */
PyObject *dlspy_mod_test_hazards(PyObject *m, PyObject *on) {
  int v = PyObject_IsTrue(on);
  if (v < 0)
    return NULL;
  return PyBool_FromLong(dls__ext_hazards_set(v != 0));
}

/* _test_foreign(on): the test-only switch of the record of foreign memory (DLSTREAM_TEST_NO_FOREIGN at start-up);
 * returns the previous setting. */
PyObject *dlspy_mod_test_foreign(PyObject *m, PyObject *on) {
  int v = PyObject_IsTrue(on);
  if (v < 0)
    return NULL;
  return PyBool_FromLong(dls__ext_foreign_set_on(v != 0));
}

/* _test_bind_branches(on): the test-only switch of the branches' binding to their group's origin; returns the
 * previous setting. */
PyObject *dlspy_mod_test_bind_branches(PyObject *m, PyObject *on) {
  int v = PyObject_IsTrue(on);
  if (v < 0)
    return NULL;
  return PyBool_FromLong(dls__ext_bind_branches_set(v != 0));
}

PyObject *dlspy_mod_clear_caches(PyObject *m, PyObject *unused) {
  dlspy_state *st = dlspy_state_of_module(m);
  dlspy_stream_cache_clear(st);
  dlspy_type_cache_clear(st);
  dlspy_cupy_clear(st);
  dlspy_torch_clear(st);
  Py_RETURN_NONE;
}

PyObject *dlspy_mod_cache_sizes(PyObject *m, PyObject *unused) {
  dlspy_state *st = dlspy_state_of_module(m);
  int xapi = 0;
  for (int i = 0; i < st->types_n; i++)
    xapi += st->types[i].api != NULL;
  return Py_BuildValue("{sisisi}", "streams", st->scache_n, "types", st->types_n, "exchange_types", xapi);
}

PyObject *dlspy_mod_current_stream(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  PyObject *cur = NULL;
  if (PyContextVar_Get(st->stream_var, NULL, &cur) != 0)
    return NULL;
  if (cur != NULL && cur != Py_None)
    return cur;
  Py_XDECREF(cur);
  DLDevice dev;
  if (dlspy_parse_device(st, nargs > 0 ? args[0] : NULL, "current_stream", &dev) != 0)
    return NULL;
  return dlspy_stream_new_default(st, dev, DLS_STREAM_LEGACY);
}

/* Waits for one device without the GIL (deferred releases take it themselves). */
static dls_status_t synchronize_nogil(DLDevice dev) {
  dls_status_t rc;
  atomic_fetch_add(&dlspy_nogil_calls, 1);
  Py_BEGIN_ALLOW_THREADS
  rc = dls_device_synchronize(dev);
  Py_END_ALLOW_THREADS
  atomic_fetch_sub(&dlspy_nogil_calls, 1);
  return rc;
}

PyObject *dlspy_mod_synchronize(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "synchronize";
  static const char *const names[] = {"device", NULL};
  dlspy_state *st = dlspy_state_of_module(m);
  PyObject *a[1] = {NULL};
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 1, a) != 0 || dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  /* The cached wrappers name frameworks' streams, which the framework may have destroyed since (a CuPy stream
   * collected): waiting on one would hand the driver a dangling stream. They go; calls wrap again. */
  dlspy_stream_cache_clear(st);
  DLDevice dev;
  dls_status_t rc = DLS_OK;
  if (a[0] != NULL && a[0] != Py_None) {
    if (dlspy_parse_device(st, a[0], pycall, &dev) != 0)
      return NULL;
    rc = synchronize_nogil(dev);
  } else { /* every device: one where dlstream holds no stream costs a lookup */
    static const DLDeviceType types[] = {kDLCPU, kDLCUDA, kDLROCM};
    for (size_t t = 0; t < sizeof types / sizeof types[0] && rc == DLS_OK; t++) {
      int n = 0;
      (void)dls_device_count(types[t], &n); /* 0 when the backend is unavailable */
      for (int i = 0; i < n && rc == DLS_OK; i++)
        rc = synchronize_nogil(dls_device(types[t], i));
    }
  }
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  dls__ext_foreign_sweep(); /* the records of foreign memory whose uses are over go */
  Py_RETURN_NONE;
}

PyObject *dlspy_mod_empty_cache(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "empty_cache";
  static const char *const names[] = {"device", NULL};
  dlspy_state *st = dlspy_state_of_module(m);
  PyObject *a[1] = {NULL};
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 1, a) != 0 || dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  (void)dls_deferred_poll(); /* frees that became due land in the cache first */
  size_t total = 0, bytes = 0;
  dls_status_t rc = DLS_OK;
  if (a[0] != NULL && a[0] != Py_None) {
    DLDevice dev;
    if (dlspy_parse_device(st, a[0], pycall, &dev) != 0)
      return NULL;
    rc = dls_device_trim(dev, &total);
  } else { /* every device of every available backend */
    static const DLDeviceType types[] = {kDLCPU, kDLCUDA, kDLROCM};
    for (size_t t = 0; t < sizeof types / sizeof types[0] && rc == DLS_OK; t++) {
      int n = 0;
      (void)dls_device_count(types[t], &n); /* 0 when the backend is unavailable */
      for (int i = 0; i < n && rc == DLS_OK; i++, total += bytes)
        rc = dls_device_trim(dls_device(types[t], i), &bytes);
    }
  }
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  return PyLong_FromSize_t(total);
}

PyObject *dlspy_mod_readable(PyObject *m, PyObject *arg) {
  unsigned long long v = PyLong_AsUnsignedLongLong(arg);
  if (v == (unsigned long long)-1 && PyErr_Occurred())
    return NULL;
  return PyBool_FromLong(dlspy_addr_readable((uintptr_t)v));
}
