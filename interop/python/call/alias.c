/* SPDX-License-Identifier: Apache-2.0 */
/* Memory passed straight to a call (alias.h): framework tensors looked up in the registry of exported memory, and
 * in the record of foreign memory, by the bytes their elements reach, and used as what was found. */
#include "alias.h"

#include "cupy.h"
#include "../errors.h"

/* The bytes view `dl` reaches: [*lo, *lo + *n) on *home; false when it names no memory dlstream handles. */
static bool bytes_of(const DLTensor *dl, DLDevice *home, char **lo, size_t *n) {
  char *first = dlspy_view_data(dl);
  if (first == NULL || !dls__ext_home(dl->device, home))
    return false;
  dls__ext_extent e = dlspy_view_extent(dl);
  if (e.lo > e.hi)
    e = (dls__ext_extent){.lo = 0, .hi = 1};
  *lo = first + e.lo;
  *n = (size_t)(e.hi - e.lo); /* none for no element (0 bytes) */
  return true;
}

dls__buffer *dlspy_alias_of(const DLTensor *dl) {
  DLDevice home;
  char *lo;
  size_t n;
  return bytes_of(dl, &home, &lo, &n) ? dls__ext_alias_find(home, lo, n) : NULL;
}

int dlspy_call_memory_slow(dlspy_call *c, const DLTensor *dl, int mode, bool framework) {
  DLDevice home;
  char *lo;
  size_t n;
  if (!bytes_of(dl, &home, &lo, &n))
    return 0;
  dls__buffer *b = dlspy_exported_any() ? dls__ext_alias_find(home, lo, n) : NULL;
  if (b != NULL)
    return dlspy_call_use(c, b, mode);
  dls_status_t rc;
  if (DLSPY_UNLIKELY(atomic_load_explicit(&dls__deferred_ranged, memory_order_relaxed) != 0) && !framework &&
      (rc = dls__ext_deferred_order_after(home, lo, n, c->s)) != DLS_OK) { /* an earlier import's pending uses */
    dlspy_raisef(c->st, rc, "%s: %s", c->pycall, dls_last_error());
    return -1;
  }
  int q = c->nquick;
  if (!framework && atomic_load_explicit(&dls__foreign_n, memory_order_relaxed) != 0 &&
      q + c->nuse_posts < DLSPY_MAX_USES &&
      (q > 0 || dls__foreign_quick_ready(c->s)) && /* a use of the call took this way already: `s` eager then */
      (c->quick_buf[q] = dls__foreign_use_noted(home, (uintptr_t)lo, n, c->s, mode)) != NULL) {
    c->quick_mode[q] = mode; /* in the quick list: noted once the work is queued (dlspy_call_end), unheld */
    c->quick_epoch[q] = DLS__EXT_EPOCH_NOTED;
    c->nquick = q + 1;
    c->more = true;
    return 0;
  }
  dls__ext_foreign f;
  rc = dls__ext_foreign_find(home, lo, n, !framework, &f);
  if (rc != DLS_OK) {
    dlspy_raisef(c->st, rc, "%s: %s", c->pycall, dls_last_error());
    return -1;
  }
  int m = f.merged ? DLS_ACCESS_WRITE : mode; /* the records that go: everything they held is waited for */
  for (int i = 0; i < f.n; i++) {
    if (dlspy_call_use(c, f.rec[i], m) != 0) { /* it took rec[i] */
      while (++i < f.n)
        dls__buffer_unref(f.rec[i]);
      return -1;
    }
  }
  for (int i = 1; f.merged && i < f.n; i++)
    dls__ext_foreign_retire(f.rec[i], 1); /* the call's post holds it until its use is noted */
  return 0;
}

/* Whether the bytes of view `dl` lie in exported dlstream memory or overlap a foreign record: a lookup, nothing
 * held. */
static bool aliased(const DLTensor *dl) {
  DLDevice home;
  char *lo;
  size_t n;
  if (!bytes_of(dl, &home, &lo, &n))
    return false;
  dls__buffer *b = dlspy_exported_any() ? dls__ext_alias_find(home, lo, n) : NULL;
  if (b != NULL)
    dls__buffer_unref(b); /* the export holds it too */
  return b != NULL || dls__ext_foreign_overlaps(home, lo, n);
}

bool dlspy_call_aliases_any(const dlspy_call *c, uint64_t entries) {
  for (; entries != 0; entries &= entries - 1)
    if (aliased(&c->args[__builtin_ctzll(entries)].dl))
      return true;
  return false;
}

/* A CuPy array `obj` read as `v` (its pointer, perhaps its shape) as a view with its shape, for a lookup: `v`'s own,
 * or read again into `m` (where the C path cannot read it, its first element's byte). -1 with an exception. */
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

int dlspy_cupy_memory(dlspy_call *c, PyObject *obj, const dlspy_cai *v, bool readonly_ok, const dls__stream *producer) {
  bool framework = dlspy_framework_orders(c, producer);
  if (DLSPY_LIKELY(framework) && !dlspy_ranges_any())
    return 0;
  dlspy_cai m;
  const DLTensor *dl;
  if (cupy_bytes(c, obj, v, &m, &dl) != 0)
    return -1;
  return dlspy_call_memory_slow(c, dl, readonly_ok ? DLS_ACCESS_READ : DLS_ACCESS_WRITE, framework);
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
