/* SPDX-License-Identifier: Apache-2.0 */
/* A Function's memo of its last launch (function.h): whether an argument that is not the object it remembered is an
 * equal immutable value of the same exact type. A loop that passes x.numel(), a grid computed at each call or the
 * floats a torch operator's implementation receives (torch makes new objects for its scalars at each call) passes new
 * objects of the same values; they convert exactly as the remembered ones did. */
#include "function.h"

#include <string.h>

static bool same_int(PyObject *a, PyObject *b) {
  if (Py_TYPE(a) != &PyLong_Type || Py_TYPE(b) != &PyLong_Type)
    return false;
  int oa = 0, ob = 0;
  long long va = PyLong_AsLongLongAndOverflow(a, &oa);
  long long vb = PyLong_AsLongLongAndOverflow(b, &ob);
  return !oa && !ob && va == vb; /* past 64 bits: not worth comparing, the general path converts it */
}

bool dlspy_equal_value(PyObject *o, PyObject *memo) {
  if (memo == NULL || Py_TYPE(o) != Py_TYPE(memo))
    return false;
  if (Py_TYPE(o) == &PyFloat_Type) {
    double a = PyFloat_AS_DOUBLE(o), b = PyFloat_AS_DOUBLE(memo);
    return memcmp(&a, &b, sizeof a) == 0; /* the bits: -0.0 is not 0.0 */
  }
  if (Py_TYPE(o) == &PyLong_Type)
    return same_int(o, memo);
  if (Py_TYPE(o) == &PyTuple_Type && PyTuple_GET_SIZE(o) == PyTuple_GET_SIZE(memo)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++)
      if (!same_int(PyTuple_GET_ITEM(o, i), PyTuple_GET_ITEM(memo, i)))
        return false;
    return true;
  }
  return false;
}
