/* SPDX-License-Identifier: Apache-2.0 */
/* The registry of exported memory: the address ranges of buffers whose bytes left dlstream through DLPack, so that
 * an import of those bytes finds the buffer it aliases instead of becoming an unrelated one (buffer.c joins them).
 *
 * An entry names its owner (a buffer) and the owner's reference count: a lookup takes a reference under the
 * registry's lock, and only while the count is above 0, so the owner's last reference may go without the lock as
 * long as the owner leaves the registry (dls__exported_remove) before its memory does. Knows no buffer: the core's
 * buffers sit above it. */
#ifndef DLSTREAM_CORE_EXPORTED_H
#define DLSTREAM_CORE_EXPORTED_H

#include "core/runtime.h"

/* Entries in the registry: 0 on every path that never exported (one relaxed load tells). */
DLS__INTERNAL extern _Atomic size_t dls__exported_n;
static inline bool dls__exported_none(void) {
  return atomic_load_explicit(&dls__exported_n, memory_order_relaxed) == 0;
}

/* Enters [lo, lo + size) on `home` (the device whose backend handles the memory) with its owner and the owner's
 * reference count; an owner already entered is left as it is. size 0 enters nothing. The caller holds a
 * reference. Fails only out of host memory. */
DLS__INTERNAL dls_status_t dls__exported_add(DLDevice home, uintptr_t lo, size_t size, void *owner, _Atomic int *refs);
/* Takes `owner` (entered at `lo`) out; nothing when it is not in. */
DLS__INTERNAL void dls__exported_remove(void *owner, uintptr_t lo);
/* The owner of an entry on `home` whose bytes hold all of [lo, lo + size), or failing that the owner of the
 * lowest entry overlapping it; a reference taken (the caller drops it). CPU devices are one address space: an
 * entry on any CPU device matches a CPU `home`. NULL when none matches, or size is 0. */
DLS__INTERNAL void *dls__exported_find(DLDevice home, uintptr_t lo, size_t size);
/* Forgets every entry (dls_shutdown: buffers still held past it are never released). */
DLS__INTERNAL void dls__exported_clear(void);

#endif /* DLSTREAM_CORE_EXPORTED_H */
