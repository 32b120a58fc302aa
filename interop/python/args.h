/* SPDX-License-Identifier: Apache-2.0 */
/* Argument parsing the extension's functions share (args.c): FASTCALL keywords, shapes, numbers into C types. */
#ifndef DLSTREAM_PY_ARGS_H
#define DLSTREAM_PY_ARGS_H

#include "dlspy.h"

/* Splits FASTCALL keywords into `out` slots named by `names` (NULL-terminated);
 * positional arguments beyond `npos_max` are an error. */
int dlspy_parse_kw(dlspy_state *st, const char *pycall, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                   const char *const *names, Py_ssize_t npos_max, PyObject **out);
/* A shape: an int or a sequence of ints (NumPy integers too), at most DLS__EXT_MAX_NDIM extents of 0 to
 * 2**63 - 1 whose elements of `dtype` fit in 2**63 - 1 bytes. Refusals are InvalidArgumentError (a ValueError,
 * as in NumPy) or ArgumentTypeError. */
int dlspy_parse_shape(dlspy_state *st, PyObject *obj, DLDataType dtype, const char *pycall, int64_t *shape,
                      int32_t *ndim);

/* Numbers from Python into narrower C types: nothing wraps. An integer argument is an int or has __index__ (a
 * float or a str is refused: ArgumentTypeError naming the call, the argument `arg` and the value); a value outside
 * [lo, hi] raises OutOfRangeError (an InvalidArgumentError and an OverflowError) with "<what> is <lo> to <hi>".
 * These run Python code (__index__, __float__): call them before looking up any handle the call then uses. */
int dlspy_as_int(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, const char *what, int64_t lo,
                 int64_t hi, int64_t *out);
/* The integer value of `v` as PyLong_AsLongLongAndOverflow reads it (*overflow -1 or 1 beyond 64 bits); with
 * opt_out_int also the int object (a new reference). A float, a str ... is refused (ArgumentTypeError). */
int dlspy_index_value(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, long long *out,
                      int *overflow, PyObject **opt_out_int);
int dlspy_as_uint(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, const char *what, uint64_t lo,
                  uint64_t hi, uint64_t *out);
/* A truth value (NULL: false); a __bool__ that raises is the cause of an ArgumentTypeError naming the call. */
int dlspy_as_bool(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, bool *out);
/* A real number (a float, an int, anything with __float__ or __index__) as a double; an int beyond the double
 * range raises OutOfRangeError. */
int dlspy_as_double_slow(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, double *out);
static inline int dlspy_as_double(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, double *out) {
  if (DLSPY_LIKELY(PyFloat_CheckExact(v))) {
    *out = PyFloat_AS_DOUBLE(v);
    return 0;
  }
  return dlspy_as_double_slow(st, v, pycall, arg, out);
}

#endif /* DLSTREAM_PY_ARGS_H */
