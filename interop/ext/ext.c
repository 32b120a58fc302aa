/* SPDX-License-Identifier: Apache-2.0 */
/* The extension's entries on tensors and launches: what a tensor handle holds, DLPack validation of a view, the
 * buffer a framework tensor aliases, and the launches of typed arguments and of values (ext.h says what each may
 * do). */
#include "core/builtin_args.h"
#include "core/deferred.h"
#include "core/device.h"
#include "core/exported.h"
#include "core/foreign.h"
#include "core/ranges.h"
#include "core/launch.h"
#include "core/module.h"
#include "core/stream.h"
#include "core/tables.h"
#include "core/tensor.h"
#include "interop/dlpack/dlpack_internal.h"
#include "ext.h"

#include <stddef.h>

_Static_assert(DLS__EXT_MAX_NDIM == DLS__DLPACK_MAX_NDIM, "ext.h's ndim limit is DLPack validation's");
_Static_assert(sizeof(dls__ext_extent) == sizeof(dls__extent) &&
                   offsetof(dls__ext_extent, lo) == offsetof(dls__extent, lo) &&
                   offsetof(dls__ext_extent, hi) == offsetof(dls__extent, hi) &&
                   offsetof(dls__ext_extent, dtype) == offsetof(dls__extent, dtype),
               "dls__ext_extent is the core's dls__extent");

static void tensor_fill(const dls__tensor *t, dls__ext_tensor *out) {
  dls__stream *p = t->buf->stream;
  out->dl = &t->dl;
  out->flags = t->flags;
  out->home = t->buf->dev->device;
  out->buf = t->buf;
  out->producer = p != NULL && p != p->dev->defaults[DLS__STREAM_NONE] ? p : NULL;
}

bool dls__ext_tensor_peek(dls_tensor_t tensor, dls__ext_tensor *out) {
  const dls__tensor *t = dls__table_peek(&dls__tensor_table, tensor.id);
  if (t == NULL)
    return false;
  tensor_fill(t, out);
  return true;
}

dls_status_t dls__ext_tensor_get(dls_tensor_t tensor, const char *call, const char *arg, dls__ext_tensor *out) {
  dls_status_t rc = DLS_OK;
  const dls__tensor *t = dls__tensor_get(tensor, call, arg, &rc);
  if (t == NULL)
    return rc;
  tensor_fill(t, out);
  return DLS_OK;
}

dls_status_t dls__ext_dlpack_check(const DLTensor *t, uint64_t flags, const char *call, const char *prefix,
                                   dls__ext_layout *out) {
  dls__layout lay;
  dls_status_t rc = dls__dlpack_check(t, flags, 0, call, prefix, &lay);
  if (rc == DLS_OK)
    *out = (dls__ext_layout){lay.home, lay.lo, lay.span};
  return rc;
}

bool dls__ext_home_slow(DLDevice device, DLDevice *out_home) { return dls__dlpack_home(device, out_home); }

dls__buffer *dls__ext_alias_find_slow(DLDevice home, const void *ptr, size_t nbytes) {
  return dls__exported_find(home, (uintptr_t)ptr, nbytes); /* the registry's owners are buffers */
}

_Static_assert(DLS__EXT_FOREIGN_MAX == DLS__FOREIGN_MAX, "ext.h's foreign set is the core's");

dls_status_t dls__ext_foreign_find(DLDevice home, const void *lo, size_t nbytes, bool add, dls__ext_foreign *out) {
  out->n = 0;
  out->merged = false;
  if (nbytes == 0 || (!add && atomic_load_explicit(&dls__foreign_n, memory_order_relaxed) == 0))
    return DLS_OK;
  dls_status_t rc;
  dls__device *dev = dls__device_get(home, "the record of foreign memory", &rc);
  if (dev == NULL)
    return rc;
  dls__foreign_set set;
  DLS__TRY(dls__foreign_find(dev, (uintptr_t)lo, nbytes, add, &set));
  for (int i = 0; i < set.n; i++)
    out->rec[i] = set.rec[i];
  out->n = set.n;
  out->merged = set.merged;
  return DLS_OK;
}

void dls__ext_foreign_retire(dls__buffer *rec, int held) { dls__foreign_retire(rec, held); }

dls_status_t dls__ext_deferred_order_after(DLDevice home, const void *lo, size_t nbytes, dls__stream *s) {
  if (nbytes == 0 || atomic_load_explicit(&dls__foreign_off, memory_order_relaxed))
    return DLS_OK;
  return dls__deferred_order_after(home, (uintptr_t)lo, dls__ranges_end((uintptr_t)lo, nbytes), s);
}

bool dls__ext_foreign_overlaps(DLDevice home, const void *lo, size_t nbytes) {
  if (atomic_load_explicit(&dls__foreign_off, memory_order_relaxed) ||
      !dls__ranges_may_overlap(&dls__foreign_ranges, (uintptr_t)lo, nbytes))
    return false; /* the common case: records of other memory only (a framework's own calls ask) */
  dls__device *dev = dls__device_peek(home.device_type, home.device_id);
  dls__foreign_set set;
  if (dev == NULL || nbytes == 0 || dls__foreign_find(dev, (uintptr_t)lo, nbytes, false, &set) != DLS_OK)
    return dev != NULL && nbytes != 0; /* too many to tell: one */
  for (int i = 0; i < set.n; i++)
    dls__buffer_unref(set.rec[i]);
  return set.n > 0;
}

void dls__ext_foreign_sweep(void) { dls__foreign_sweep(); }

bool dls__ext_foreign_set_on(bool on) { return !atomic_exchange(&dls__foreign_off, !on); }

bool dls__ext_bind_branches_set(bool on) { return atomic_exchange(&dls__bind_branches, on); }

/* ---- launches ---- */

dls__function *dls__ext_function(dls_function_t fn) { return dls__table_peek(&dls__function_table, fn.id); }

dls_status_t dls__ext_function_stale(dls_function_t fn, const char *call) {
  dls_status_t rc = DLS_ERR_INVALID_HANDLE;
  (void)dls__table_miss(&dls__function_table, fn.id, call, "function", &rc);
  return rc;
}

dls_status_t dls__ext_raw_launch_of(dls_function_t fn, dls__ext_raw_launch *out) {
  dls_status_t rc;
  dls__function *f = dls__table_get(&dls__function_table, fn.id, "dls__ext_raw_launch_of", "fn", &rc);
  if (f == NULL)
    return rc;
  out->launch = f->dev->be->launch;
  out->be = f->dev->be;
  out->dev = f->dev->id;
  out->function = f->native;
  return DLS_OK;
}
