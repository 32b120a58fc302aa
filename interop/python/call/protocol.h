/* SPDX-License-Identifier: Apache-2.0 */
/* The DLPack Python protocol as a consumer (protocol.c): __dlpack__ and __dlpack_device__, capsules, and the
 * releases of borrowed objects and consumed tensors. */
#ifndef DLSTREAM_PY_PROTOCOL_H
#define DLSTREAM_PY_PROTOCOL_H

#include "../dlspy.h"

/* obj.__dlpack__(stream=..., max_version=(1, 1)), falling back to the legacy
 * signatures on TypeError. `stream_value` is borrowed (Py_None for host
 * memory). Returns a new reference. */
PyObject *dlspy_call_dlpack(dlspy_state *st, PyObject *obj, PyObject *stream_value);
/* Takes the managed tensor out of a capsule named dltensor_versioned or
 * dltensor and renames it used_*. */
int dlspy_capsule_consume(dlspy_state *st, PyObject *cap, const char *pycall, void **out_managed, bool *out_versioned);
/* obj.__dlpack_device__(); returns 1 (nothing raised) when obj has none. */
int dlspy_dlpack_device(dlspy_state *st, PyObject *obj, const char *pycall, DLDevice *out);

/* Releases for dls_release_fn (any thread; they take the GIL, and leak rather than touch an interpreter that is
 * going away): a strong reference, a consumed versioned or legacy managed tensor. */
void dlspy_release_pyobject(void *user_data);
void dlspy_release_managed_v(void *user_data);
void dlspy_release_managed_l(void *user_data);
/* Calls a consumed managed tensor's deleter (with the GIL; never after shutdown). An exception set meanwhile is
 * kept aside while the deleter runs (it may be Python code) and set again afterwards. */
void dlspy_managed_release(void *managed, bool versioned);

#endif /* DLSTREAM_PY_PROTOCOL_H */
