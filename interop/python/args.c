/* SPDX-License-Identifier: Apache-2.0 */
/* Argument parsing shared by the extension's functions: FASTCALL keywords. */
#include "dlspy.h"

int dlspy_parse_kw(dlspy_state *st, const char *pycall, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                   const char *const *names, Py_ssize_t npos_max, PyObject **out) {
  Py_ssize_t nnames = 0;
  while (names[nnames] != NULL)
    out[nnames++] = NULL;
  if (nargs > npos_max) {
    dlspy_type_error(st, "%s() takes at most %zd positional argument%s (%zd given)", pycall, npos_max,
                     npos_max == 1 ? "" : "s", nargs);
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
