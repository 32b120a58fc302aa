/* SPDX-License-Identifier: Apache-2.0 */
/* Memory passed straight to a call (alias.c): a framework tensor (any framework's, NumPy's, any DLPack producer's)
 * whose memory is not a dlstream tensor's. Over memory that a dlstream buffer exported (`numpy.from_dlpack(t)`,
 * `torch.from_dlpack(t)`, a view of either) it is a use of that buffer; over other memory, a use of the records of
 * foreign memory it overlaps (plugin/core/foreign.h): ordered and recorded as a dlstream tensor's use by raw-pointer
 * work is (dlspy_call_use), in addition to its framework's own ordering. A tensor on its framework's current stream
 * outside dlstream's blocks is its framework's work (the framework orders it): it makes no record, and joins the
 * records its bytes overlap, if any. The ways that take a framework tensor's pointer for the call's stream
 * (tensorarg.c) look it up; the fast ways take no pointer through them, so while any range is registered no tensor
 * a call takes the fast way (dlspy_call.fast) overlaps one: they are looked up first (the general way's,
 * dlspy_call_fast_check in tensorarg.h; a launch plan's, dlspy_plan_launch). */
#ifndef DLSTREAM_PY_ALIAS_H
#define DLSTREAM_PY_ALIAS_H

#include "call.h"

/* Whether any range is registered (exported dlstream memory, foreign records and imports): one relaxed load, the
 * whole cost of both while there is none. */
static inline bool dlspy_ranges_any(void) {
  return DLSPY_UNLIKELY(atomic_load_explicit(&dls__ranges_n, memory_order_relaxed) != 0);
}
/* Whether any dlstream buffer's memory is exported. */
static inline bool dlspy_exported_any(void) {
  return DLSPY_UNLIKELY(atomic_load_explicit(&dls__exported_n, memory_order_relaxed) != 0);
}
/* The dlstream buffer whose exported memory the bytes of view `dl` lie in (or overlap), held (dls__buffer_unref);
 * NULL for none. The bytes are those its elements reach; where they cannot be told, its first element's first
 * byte. */
dls__buffer *dlspy_alias_of(const DLTensor *dl);
/* The framework tensor of view `dl` (on the call's device, or a peer's) is used by the call's work (`mode`): a use of
 * the dlstream buffer it aliases, else of its foreign records (`framework`: the framework orders it, so only records
 * already there are joined). 0, or -1 with an exception. */
int dlspy_call_memory_slow(dlspy_call *c, const DLTensor *dl, int mode, bool framework);
/* Whether a tensor ordered after `producer` (its framework's current stream; NULL: none) is its framework's work:
 * on that stream, outside dlstream's blocks. */
static inline bool dlspy_framework_orders(const dlspy_call *c, const dls__stream *producer) {
  return producer != NULL && !c->in_block && dlspy_same_stream(producer, c->s);
}
/* The use of the memory of a framework tensor of view `dl` ordered after `producer` (dlspy_order_after), with
 * `readonly_ok` a read, else a write. */
static inline int dlspy_call_memory(dlspy_call *c, const DLTensor *dl, bool readonly_ok, const dls__stream *producer) {
  bool framework = dlspy_framework_orders(c, producer);
  if (DLSPY_LIKELY(framework) && !dlspy_ranges_any())
    return 0;
  return dlspy_call_memory_slow(c, dl, readonly_ok ? DLS_ACCESS_READ : DLS_ACCESS_WRITE, framework);
}
/* Whether one of the table's exchange-API entries `entries` (bit i: args[i]) lies in exported dlstream memory or
 * overlaps a foreign record (nothing held, nothing ordered). */
bool dlspy_call_aliases_any(const dlspy_call *c, uint64_t entries);
/* dlspy_call_memory for a CuPy array `obj` read as `v` (its pointer, perhaps its shape): its bytes are those of its
 * shape, read now where `v` lacks it. */
int dlspy_cupy_memory(dlspy_call *c, PyObject *obj, const dlspy_cai *v, bool readonly_ok, const dls__stream *producer);

/* Whether the entry of argument `i` (`o`), read into the table (an exchange-API view, or a CuPy array's pointer and
 * device), lies in exported dlstream memory or overlaps a foreign record (nothing held, nothing ordered); a failure
 * to tell is one (its conversion reads it again and says why). */
bool dlspy_call_entry_aliased(dlspy_call *c, PyObject *o, int i);

#endif /* DLSTREAM_PY_ALIAS_H */
