/* SPDX-License-Identifier: Apache-2.0 */
/* Aliases passed straight to a call (alias.c): a framework tensor over memory that a dlstream buffer exported
 * (`numpy.from_dlpack(t)`, `torch.from_dlpack(t)`, a view of either, of any framework) is a use of that buffer,
 * ordered and recorded as a dlstream tensor's use by raw-pointer work (dlspy_call_use), in addition to its
 * framework's own ordering. The ways that take a framework tensor's pointer for the call's stream (tensorarg.c) look
 * it up in the core's registry of exported memory (dls__ext_alias_find); the fast ways take no pointer through
 * them, so while any buffer is exported no tensor a call takes the fast way (dlspy_call.fast) is an alias: they are
 * looked up first (the general way's, dlspy_call_fast_check in tensorarg.h; a launch plan's, dlspy_plan_launch). */
#ifndef DLSTREAM_PY_ALIAS_H
#define DLSTREAM_PY_ALIAS_H

#include "call.h"

/* Whether any buffer's memory is exported: one relaxed load, the whole cost of the rule while none is. */
static inline bool dlspy_exported_any(void) {
  return DLSPY_UNLIKELY(atomic_load_explicit(&dls__exported_n, memory_order_relaxed) != 0);
}
/* The dlstream buffer whose exported memory the bytes of view `dl` lie in (or overlap), held (dls__buffer_unref);
 * NULL for none. The bytes are those its elements reach; where they cannot be told, its first element's first
 * byte. */
dls__buffer *dlspy_alias_of(const DLTensor *dl);
/* The framework tensor of view `dl` (on the call's device, or a peer's) is used by the call's work (with
 * `readonly_ok` a read, else a write): when it lies in exported dlstream memory, a use of that buffer. 0, or -1
 * with an exception. */
int dlspy_call_alias_slow(dlspy_call *c, const DLTensor *dl, int mode);
static inline int dlspy_call_alias(dlspy_call *c, const DLTensor *dl, bool readonly_ok) {
  if (DLSPY_LIKELY(!dlspy_exported_any()))
    return 0;
  return dlspy_call_alias_slow(c, dl, readonly_ok ? DLS_ACCESS_READ : DLS_ACCESS_WRITE);
}
/* Whether one of the table's exchange-API entries `entries` (bit i: args[i]) lies in exported dlstream memory
 * (nothing held, nothing ordered). */
bool dlspy_call_aliases_any(const dlspy_call *c, uint64_t entries);
/* The alias check of a CuPy array `obj` read as `v` (its pointer, perhaps its shape): its bytes are those of its
 * shape, read now where `v` lacks it. */
int dlspy_cupy_alias(dlspy_call *c, PyObject *obj, const dlspy_cai *v, bool readonly_ok);

/* Whether the entry of argument `i` (`o`), read into the table (an exchange-API view, or a CuPy array's pointer and
 * device), lies in exported dlstream memory (nothing held, nothing ordered); a failure to tell is one (its
 * conversion reads it again and says why). */
bool dlspy_call_entry_aliased(dlspy_call *c, PyObject *o, int i);

#endif /* DLSTREAM_PY_ALIAS_H */
