/* SPDX-License-Identifier: Apache-2.0 */
/* CuPy arrays and CuPy's current stream read in C (cupy.c), standing in for the package's CuPy provider. */
#ifndef DLSTREAM_PY_CUPY_H
#define DLSTREAM_PY_CUPY_H

#include "cai.h"

/* Whether `tp` is CuPy's ndarray (or a subclass) and `provider`, the one registered for it, is the package's
 * CuPy provider, which the C path stands in for. Probes CuPy at the first such type. */
bool dlspy_cupy_type(dlspy_state *st, PyTypeObject *tp, PyObject *provider);
/* Reads a CuPy array's data pointer and device into out->dl (with want_meta also its dtype, shape and strides in
 * elements; out->meta says which). Returns 0; 1 when the C path cannot read it (nothing raised: the general path
 * takes it, and its messages); -1 with an exception. */
int dlspy_cupy_read(dlspy_state *st, PyObject *obj, bool want_meta, dlspy_cai *out);
/* CuPy's current stream of a device, as a native pointer. 1: not askable here (nothing raised). */
int dlspy_cupy_native(dlspy_state *st, int32_t device_id, void **out);
/* Drops what was probed (register_stream_provider and _clear_caches probe again). */
void dlspy_cupy_clear(dlspy_state *st);

#endif /* DLSTREAM_PY_CUPY_H */
