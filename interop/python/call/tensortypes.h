/* SPDX-License-Identifier: Apache-2.0 */
/* What dlstream knows of each tensor type, cached per type (tensortypes.c): its kind, its DLPack C exchange API,
 * its stream provider. */
#ifndef DLSTREAM_PY_TENSORTYPES_H
#define DLSTREAM_PY_TENSORTYPES_H

#include "../dlspy.h"

/* Looks `tp` up and adds its entry (never NULL; valid until the next lookup of a new type). */
const dlspy_type_entry *dlspy_type_info_new(dlspy_state *st, PyTypeObject *tp);
/* What dlstream knows of `tp`, from the per-type cache (never NULL; valid until the next lookup of a new type, which
 * Python code run meanwhile may make: callers that call out copy the entry). */
static inline const dlspy_type_entry *dlspy_type_info(dlspy_state *st, PyTypeObject *tp) {
  for (int i = 0; i < st->types_n; i++)
    if (st->types[i].type == tp)
      return &st->types[i];
  return dlspy_type_info_new(st, tp);
}
/* The exchange API of a type, from the per-type cache (NULL: none). */
static inline const DLPackExchangeAPI *dlspy_xapi_of(dlspy_state *st, PyTypeObject *tp) {
  return dlspy_type_info(st, tp)->api;
}
/* Remembers that `tp`'s __cuda_array_interface__ is not worth reading (see dlspy_type_entry.cai_skip). */
void dlspy_type_skip_cai(dlspy_state *st, PyTypeObject *tp);
void dlspy_type_cache_clear(dlspy_state *st);
/* Calls `provider(obj)` and resolves its result (a stream-like or None: *out {0}) on `home`; a stream of
 * another device is refused. Returns 0, or -1 with an exception. */
int dlspy_provider_stream(dlspy_state *st, PyObject *provider, PyObject *obj, DLDevice home, const char *pycall,
                          const char *arg, dls_stream_t *out);
PyObject *dlspy_mod_register_stream_provider(PyObject *m, PyObject *const *args, Py_ssize_t nargs,
                                             PyObject *kwnames);
PyObject *dlspy_mod_stream_providers(PyObject *m, PyObject *unused);
/* _set_cupy_provider(fn): the package names its CuPy provider. */
PyObject *dlspy_mod_set_cupy_provider(PyObject *m, PyObject *fn);

#endif /* DLSTREAM_PY_TENSORTYPES_H */
