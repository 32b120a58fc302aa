/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection from Python: the private _fault_* functions that
 * tests/python/test_fault.py drives. Only builds with DLS_FAULT_INJECTION
 * (the library's fault injector, whose control ext.h declares) have them; elsewhere the table is empty. */
#include "dlspy.h"

#ifdef DLS_FAULT_INJECTION

/* _fault_arm(n, status=0): fail injectable point n (1-based) once, counting from now. */
static PyObject *py_fault_arm(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  (void)m;
  if (nargs < 1 || nargs > 2)
    return PyErr_Format(PyExc_TypeError, "_fault_arm(n, status=0): %zd arguments given", nargs);
  unsigned long long n = PyLong_AsUnsignedLongLong(args[0]);
  long status = nargs == 2 ? PyLong_AsLong(args[1]) : 0;
  if (PyErr_Occurred())
    return NULL;
  dls_fault_arm((uint64_t)n, (dls_status_t)status);
  Py_RETURN_NONE;
}

static PyObject *py_fault_disarm(PyObject *m, PyObject *unused) {
  (void)m, (void)unused;
  dls_fault_disarm();
  Py_RETURN_NONE;
}

static PyObject *py_fault_points(PyObject *m, PyObject *unused) {
  (void)m, (void)unused;
  return PyLong_FromUnsignedLongLong(dls_fault_points());
}

static PyObject *py_fault_injected(PyObject *m, PyObject *unused) {
  (void)m, (void)unused;
  return PyLong_FromUnsignedLongLong(dls_fault_injected());
}

static PyObject *py_fault_last(PyObject *m, PyObject *unused) {
  (void)m, (void)unused;
  return PyUnicode_FromString(dls_fault_last());
}

/* _fault_objects() -> {kind: (created, destroyed)} of native backend objects. */
static PyObject *py_fault_objects(PyObject *m, PyObject *unused) {
  (void)m, (void)unused;
  PyObject *d = PyDict_New();
  uint64_t made, gone;
  const char *name;
  for (int k = 0; d != NULL && (name = dls__ext_fault_objects(k, &made, &gone)) != NULL; k++) {
    PyObject *v = Py_BuildValue("(KK)", (unsigned long long)made, (unsigned long long)gone);
    if (v == NULL || PyDict_SetItemString(d, name, v) != 0)
      Py_CLEAR(d);
    Py_XDECREF(v);
  }
  return d;
}

PyMethodDef dlspy_fault_methods[] = {
    {"_fault_arm", (PyCFunction)(void (*)(void))py_fault_arm, METH_FASTCALL,
     "_fault_arm(n, status=0)\n--\n\nFails injectable point n (1-based, counted from now) once (fault-injection "
     "builds)."},
    {"_fault_disarm", py_fault_disarm, METH_NOARGS, "Stops failing points; the count goes on."},
    {"_fault_points", py_fault_points, METH_NOARGS, "Injectable points passed since the latest _fault_arm."},
    {"_fault_injected", py_fault_injected, METH_NOARGS, "Failures injected since the latest _fault_arm."},
    {"_fault_last", py_fault_last, METH_NOARGS, "The name of the latest point that failed, or ''."},
    {"_fault_objects", py_fault_objects, METH_NOARGS, "{kind: (created, destroyed)} of native backend objects."},
    {NULL, NULL, 0, NULL},
};

#else

PyMethodDef dlspy_fault_methods[] = {{NULL, NULL, 0, NULL}};

#endif /* DLS_FAULT_INJECTION */
