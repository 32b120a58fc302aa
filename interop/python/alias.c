/* SPDX-License-Identifier: Apache-2.0 */
/* Aliases passed straight to a call (alias.h): framework tensors looked up in the registry of exported memory by
 * the bytes their elements reach, and used as the buffer found. */
#include "alias.h"

#include "cupy.h"

dls__buffer *dlspy_alias_of(const DLTensor *dl) {
  DLDevice home;
  char *first = dlspy_view_data(dl);
  if (first == NULL || !dls__ext_home(dl->device, &home))
    return NULL;
  dls__ext_extent e = dlspy_view_extent(dl);
  if (e.lo > e.hi)
    e = (dls__ext_extent){.lo = 0, .hi = 1};
  return dls__ext_alias_find(home, first + e.lo, (size_t)(e.hi - e.lo)); /* none for no element (0 bytes) */
}

int dlspy_call_alias_slow(dlspy_call *c, const DLTensor *dl, int mode) {
  dls__buffer *b = dlspy_alias_of(dl);
  return b == NULL ? 0 : dlspy_call_use(c, b, mode);
}

/* Whether the bytes of view `dl` lie in exported dlstream memory: a lookup, nothing held. */
static bool aliased(const DLTensor *dl) {
  dls__buffer *b = dlspy_alias_of(dl);
  if (b != NULL)
    dls__buffer_unref(b); /* the export holds it too */
  return b != NULL;
}

bool dlspy_call_aliases_any(const dlspy_call *c, uint64_t entries) {
  for (; entries != 0; entries &= entries - 1)
    if (aliased(&c->args[__builtin_ctzll(entries)].dl))
      return true;
  return false;
}

/* A CuPy array `obj` read as `v` (its pointer, perhaps its shape) as a view with its shape, for an alias lookup:
 * `v`'s own, or read again into `m` (where the C path cannot read it, its first element's byte). -1 with an
 * exception. */
static int cupy_bytes(dlspy_call *c, PyObject *obj, const dlspy_cai *v, dlspy_cai *m, const DLTensor **out) {
  *out = &v->dl;
  if (v->meta)
    return 0;
  int rc = dlspy_cupy_read(c->st, obj, true, m);
  if (rc < 0)
    return -1;
  if (rc > 0)
    m->dl = (DLTensor){.data = v->dl.data, .device = v->dl.device, .dtype = {kDLUInt, 8, 1}};
  *out = &m->dl;
  return 0;
}

int dlspy_cupy_alias(dlspy_call *c, PyObject *obj, const dlspy_cai *v, bool readonly_ok) {
  dlspy_cai m;
  const DLTensor *dl;
  if (cupy_bytes(c, obj, v, &m, &dl) != 0)
    return -1;
  return dlspy_call_alias_slow(c, dl, readonly_ok ? DLS_ACCESS_READ : DLS_ACCESS_WRITE);
}

bool dlspy_call_entry_aliased(dlspy_call *c, PyObject *o, int i) {
  dlspy_cai v, m;
  const DLTensor *dl = &c->args[i].dl;
  if (!((c->xapi >> i) & 1)) { /* a CuPy array: its pointer and device */
    v.meta = false;
    v.dl.data = c->args[i].ptr;
    v.dl.device = c->args[i].dl.device;
    if (cupy_bytes(c, o, &v, &m, &dl) != 0) {
      PyErr_Clear();
      return true;
    }
  }
  return aliased(dl);
}
