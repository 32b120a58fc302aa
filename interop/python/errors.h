/* SPDX-License-Identifier: Apache-2.0 */
/* The extension's exceptions and the helpers that raise them (errors.c); the runtime check every call makes first. */
#ifndef DLSTREAM_PY_ERRORS_H
#define DLSTREAM_PY_ERRORS_H

#include "dlspy.h"

/* Creates dlstream.Error, one class per status and ArgumentTypeError, and adds them to `m`. */
int dlspy_errors_init(PyObject *m, dlspy_state *st);
/* Raises the exception of `status` with "<pycall>: <dls_last_error()>"; returns NULL. */
PyObject *dlspy_raise(dlspy_state *st, dls_status_t status, const char *pycall);
/* Raises the exception of `status` with a formatted message; returns NULL. */
PyObject *dlspy_raisef(dlspy_state *st, dls_status_t status, const char *fmt, ...);
/* A message as the raising helpers write it (a str in Python's words), for what reports a reason without raising;
 * a new reference, or NULL with an exception. */
PyObject *dlspy_message(const char *fmt, ...);
/* Raises dlstream.ArgumentTypeError (a TypeError); returns NULL. */
PyObject *dlspy_type_error(dlspy_state *st, const char *fmt, ...);
/* Raises dlstream.OutOfRangeError (an InvalidArgumentError and an OverflowError); returns NULL. */
PyObject *dlspy_range_error(dlspy_state *st, const char *fmt, ...);
/* The raising helpers format as PyUnicode_FromFormat does, but every %R, %S and %A is cut to DLSPY_REPR_MAX
 * characters (ending in "...") and a repr that raises becomes "<type object at 0x...>". An exception already set
 * when they are called becomes the new exception's __cause__ (what a user's __index__ or
 * __cuda_array_interface__ raised is kept), except one that is no Exception (KeyboardInterrupt, SystemExit):
 * that one is left as it is and nothing else is raised. */
#define DLSPY_REPR_MAX 100
/* Takes the exception set now, normalized with its traceback (a new reference; NULL when none is set). */
PyObject *dlspy_take_exception(void);
/* Fails with DLS_ERR_FORK (or INVALID_STATE after shutdown) unless the runtime is usable. */
int dlspy_check_runtime_slow(dlspy_state *st, const char *pycall);
static inline int dlspy_check_runtime(dlspy_state *st, const char *pycall) {
  if (DLSPY_LIKELY(!atomic_load_explicit(&dlspy_dead, memory_order_relaxed) && dls__ext_ready()))
    return 0;
  return dlspy_check_runtime_slow(st, pycall);
}

#endif /* DLSTREAM_PY_ERRORS_H */
