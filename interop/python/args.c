/* SPDX-License-Identifier: Apache-2.0 */
/* Argument parsing shared by the extension's functions: FASTCALL keywords, shapes. */
#include "args.h"

#include "errors.h"

#include <stdio.h>

int dlspy_parse_kw(dlspy_state *st, const char *pycall, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                   const char *const *names, Py_ssize_t npos_max, PyObject **out) {
  Py_ssize_t nnames = 0;
  while (names[nnames] != NULL)
    out[nnames++] = NULL;
  if (nargs > npos_max) {
    if (nnames <= npos_max) {
      dlspy_type_error(st, "%s() takes at most %zd positional argument%s (%zd given)", pycall, npos_max,
                       npos_max == 1 ? "" : "s", nargs);
      return -1;
    }
    /* The first extra value was most likely meant for the first keyword-only parameter: say how to write it. */
    char kw[160] = "";
    size_t used = 0;
    for (Py_ssize_t i = npos_max; i < nnames && used < sizeof kw; i++)
      used += (size_t)snprintf(kw + used, sizeof kw - used, "%s%s",
                               i == npos_max ? "" : i + 1 == nnames ? " and " : ", ", names[i]);
    dlspy_type_error(st, "%s() takes at most %zd positional argument%s (%zd given): %s %s keyword-only: write %s=%R",
                     pycall, npos_max, npos_max == 1 ? "" : "s", nargs, kw, nnames - npos_max == 1 ? "is" : "are",
                     names[npos_max], args[npos_max]);
    return -1;
  }
  for (Py_ssize_t i = 0; i < nargs; i++)
    out[i] = args[i];
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; k++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t j = 0;
    for (; j < nnames; j++)
      if (PyUnicode_CompareWithASCIIString(key, names[j]) == 0)
        break;
    if (j == nnames) {
      dlspy_type_error(st, "%s() got an unexpected keyword argument '%U'", pycall, key);
      return -1;
    }
    if (out[j] != NULL) {
      dlspy_type_error(st, "%s() got multiple values for argument '%s'", pycall, names[j]);
      return -1;
    }
    out[j] = args[nargs + k];
  }
  return 0;
}

/* ---- shapes ---- */

/* One extent: an int or an object with __index__ (NumPy integers), 0 to 2**63 - 1. */
static int parse_extent(dlspy_state *st, PyObject *shown, PyObject *v, Py_ssize_t i, const char *pycall,
                        int64_t *out) {
  if (PyFloat_Check(v) || !PyIndex_Check(v)) {
    if (i < 0)
      dlspy_type_error(st, "%s(shape=%R): expected an int or a sequence of ints", pycall, shown);
    else
      dlspy_type_error(st, "%s(shape=%R): extent %zd is %R, not an int", pycall, shown, i, v);
    return -1;
  }
  PyObject *n = PyNumber_Index(v);
  if (n == NULL) {
    dlspy_type_error(st, "%s(shape=%R): the extent's __index__ failed", pycall, shown);
    return -1;
  }
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(n, &overflow);
  Py_DECREF(n);
  if (x == -1 && !overflow && PyErr_Occurred())
    return -1;
  if (overflow || x < 0) {
    Py_ssize_t at = i < 0 ? 0 : i;
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(shape=%R): extent %zd is %R; extents are 0 to 2**63 - 1%s", pycall,
                 shown, at, v, x < 0 && !overflow ? " (negative dimensions are not allowed)" : "");
    return -1;
  }
  *out = x;
  return 0;
}

int dlspy_parse_shape(dlspy_state *st, PyObject *obj, DLDataType dtype, const char *pycall, int64_t *shape,
                      int32_t *ndim) {
  if (PyLong_Check(obj) || (PyIndex_Check(obj) && !PySequence_Check(obj))) {
    if (parse_extent(st, obj, obj, -1, pycall, &shape[0]) != 0)
      return -1;
    *ndim = 1;
  } else {
    /* A copy: the extents' __index__ may change a list while it is read. */
    PyObject *seq = PyUnicode_Check(obj) || PyBytes_Check(obj) ? NULL : PySequence_Tuple(obj);
    if (seq == NULL) {
      dlspy_type_error(st, "%s(shape=%R): expected an int or a sequence of ints", pycall, obj);
      return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    if (n > DLS__EXT_MAX_NDIM) {
      Py_DECREF(seq);
      dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(shape=%R): %zd dimensions; at most %d", pycall, obj, n,
                   DLS__EXT_MAX_NDIM);
      return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
      if (parse_extent(st, obj, PyTuple_GET_ITEM(seq, i), i, pycall, &shape[i]) != 0) {
        Py_DECREF(seq);
        return -1;
      }
    }
    *ndim = (int32_t)n;
    Py_DECREF(seq);
  }
  /* The byte size must fit (NumPy: "array is too big"); zero extents are left out of the product, as the
   * strides of the other dimensions must still be representable. */
  uint64_t bytes = (dtype.bits * (uint64_t)dtype.lanes + 7u) / 8u;
  bool over = false;
  for (int32_t i = 0; i < *ndim; i++)
    if (shape[i] != 0)
      over |= __builtin_mul_overflow(bytes, (uint64_t)shape[i], &bytes);
  if (over || bytes > (uint64_t)INT64_MAX) {
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(shape=%R): the tensor would take more than 2**63 - 1 bytes", pycall,
                 obj);
    return -1;
  }
  return 0;
}

/* ---- numbers ---- */

int dlspy_index_value(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, long long *out,
                      int *overflow, PyObject **opt_out_int) {
  PyObject *i;
  if (PyLong_CheckExact(v)) {
    i = Py_NewRef(v);
  } else if (PyFloat_Check(v) || !PyIndex_Check(v)) {
    dlspy_type_error(st, "%s(%s=%R): expected an int, not %s", pycall, arg, v, Py_TYPE(v)->tp_name);
    return -1;
  } else if ((i = PyNumber_Index(v)) == NULL) { /* an int subclass: an exact copy, its methods are not called */
    dlspy_type_error(st, "%s(%s=%R): its __index__ failed", pycall, arg, v);
    return -1;
  }
  *overflow = 0;
  *out = PyLong_AsLongLongAndOverflow(i, overflow);
  if (opt_out_int != NULL)
    *opt_out_int = i;
  else
    Py_DECREF(i);
  return 0;
}

int dlspy_as_int(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, const char *what, int64_t lo,
                 int64_t hi, int64_t *out) {
  long long x;
  int overflow;
  if (dlspy_index_value(st, v, pycall, arg, &x, &overflow, NULL) != 0)
    return -1;
  if (overflow || x < lo || x > hi) {
    dlspy_range_error(st, "%s(%s=%R): out of range: %s is %lld to %lld", pycall, arg, v, what, (long long)lo,
                      (long long)hi);
    return -1;
  }
  *out = x;
  return 0;
}

int dlspy_as_uint(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, const char *what, uint64_t lo,
                  uint64_t hi, uint64_t *out) {
  long long sx;
  int overflow;
  PyObject *i;
  if (dlspy_index_value(st, v, pycall, arg, &sx, &overflow, &i) != 0)
    return -1;
  unsigned long long x = sx < 0 ? 0 : (unsigned long long)sx;
  bool over = overflow < 0 || (overflow == 0 && sx < 0);
  if (overflow > 0) {
    x = PyLong_AsUnsignedLongLong(i);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
      PyErr_Clear(); /* beyond 2**64 - 1: the message below says so */
      over = true;
    }
  }
  Py_DECREF(i);
  if (over || x < lo || x > hi) {
    dlspy_range_error(st, "%s(%s=%R): out of range: %s is %llu to %llu", pycall, arg, v, what, (unsigned long long)lo,
                      (unsigned long long)hi);
    return -1;
  }
  *out = x;
  return 0;
}

int dlspy_as_double_slow(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, double *out) {
  double d = PyFloat_AsDouble(v);
  if (d == -1.0 && PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_OverflowError))
      dlspy_range_error(st, "%s(%s=%R): out of range: a float is at most about 1.8e308 in magnitude", pycall, arg, v);
    else
      dlspy_type_error(st, "%s(%s=%R): expected a number, not %s", pycall, arg, v, Py_TYPE(v)->tp_name);
    return -1;
  }
  *out = d;
  return 0;
}

int dlspy_as_bool(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, bool *out) {
  int t = v == NULL ? 0 : PyObject_IsTrue(v);
  if (t < 0) {
    dlspy_type_error(st, "%s(%s=%R): its truth value failed", pycall, arg, v);
    return -1;
  }
  *out = t != 0;
  return 0;
}
