/* SPDX-License-Identifier: Apache-2.0 */
/* Registries of memory by address range: entries of (home device, [lo, hi)) naming an owner and the owner's
 * reference count, sorted by address under one lock. The registry of exported memory (exported.c) and the record
 * of foreign memory (foreign.c) are two of them. Knows no buffer: an owner is anything with a reference count.
 *
 * A lookup takes a reference on an owner under the registry's lock, and only while its count is above 0, so an
 * owner's last reference may go without the lock as long as the owner leaves the registry before it goes. CPU
 * devices are one address space: an entry on any CPU device matches a CPU home. */
#ifndef DLSTREAM_CORE_RANGES_H
#define DLSTREAM_CORE_RANGES_H

#include <string.h>

#include "base/spin.h"
#include "core/runtime.h"

typedef struct dls__range {
  uintptr_t lo, hi; /* [lo, hi) */
  DLDevice home;
  void *owner;
  _Atomic int *refs;
  _Atomic int *busy; /* while not 0, the owner is in use without a reference (dls__ranges_sole_locked): it stays */
} dls__range;

typedef struct dls__ranges {
  dls__spin mu;        /* short sections only: a lookup, an insertion; no driver call is made under it */
  dls__range *entries; /* sorted by lo; n of cap */
  uintptr_t *reach;    /* reach[i]: the highest hi of entries[0..i] (entries may overlap) */
  size_t n, cap;
  _Atomic size_t *count; /* kept equal to n: a relaxed load tells an empty registry */
  const char *what;      /* "exported memory": messages */
} dls__ranges;
#define DLS__RANGES(count, what) {{ATOMIC_FLAG_INIT}, NULL, NULL, 0, 0, &(count), (what)}

/* Entries in every registry together (exported memory and foreign records): 0 while a call has no range to look
 * up (one relaxed load for both). */
DLS__INTERNAL extern _Atomic size_t dls__ranges_n;

/* The registry of foreign memory (foreign.h: records, and the imports entered beside them), here so that a buffer's
 * last reference (buffer.c) takes an import out. */
DLS__INTERNAL extern dls__ranges dls__foreign_ranges;
DLS__INTERNAL extern _Atomic size_t dls__foreign_n;

/* Enters [lo, lo + size) on `home` with its owner and the owner's reference count; an owner already entered at
 * `lo` is left as it is. size 0 enters nothing. The caller holds a reference. Fails only out of host memory. */
DLS__INTERNAL dls_status_t dls__ranges_add(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size, void *owner,
                                           _Atomic int *refs);
/* dls__ranges_add for an owner used without a reference while *busy is not 0 (taken by its user under the registry's
 * lock, after dls__ranges_sole_locked): dls__ranges_remove with a count and dls__ranges_take_idle leave it in. */
DLS__INTERNAL dls_status_t dls__ranges_add_busy(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size, void *owner,
                                                _Atomic int *refs, _Atomic int *busy);
/* Takes `owner` (entered at `lo`) out when its count is `refs` and it is not busy (refs 0: whatever they are);
 * whether it was taken out. */
DLS__INTERNAL bool dls__ranges_remove(dls__ranges *r, void *owner, uintptr_t lo, int refs);
/* Moves `owner`'s entry (entered at `lo`) to [new_lo, new_hi); nothing when it is not in. */
DLS__INTERNAL void dls__ranges_move(dls__ranges *r, void *owner, uintptr_t lo, uintptr_t new_lo, uintptr_t new_hi);
/* The owner of an entry on `home` whose bytes hold all of [lo, lo + size), or failing that the owner of the lowest
 * entry overlapping it; a reference taken (the caller drops it). NULL when none matches, or size is 0. */
DLS__INTERNAL void *dls__ranges_find(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size);
/* The common case of dls__ranges_overlapping, walking no further: when the one entry [lo, lo + size) overlaps on
 * `home` holds all of it, its owner with a reference taken (*out_refs: its count); NULL otherwise (none, several,
 * one that holds part: the caller asks dls__ranges_overlapping). */
DLS__INTERNAL void *dls__ranges_sole(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size, _Atomic int **out_refs);
/* dls__ranges_sole's entry, with no reference taken: its owner is returned with the registry's lock held, for the
 * caller to use (an owner entered with `busy`, which the caller counts up while it holds the lock), then
 * dls__ranges_unlock; NULL (the lock let go) when there is no such entry. Inline (the record's quick way, once per
 * foreign tensor); the caller has seen entries in the registry (its count), which an empty one answers right too. */
static DLS__HOT_INLINE void *dls__ranges_sole_locked(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size);
static inline void dls__ranges_unlock(dls__ranges *r) { dls__spin_unlock(&r->mu); }
/* Every entry on `home` overlapping [lo, lo + size), each owner with a reference taken, at most `max` (*out_n: how
 * many overlap, which may be more than `max`: then none is taken); *out_holds: one of them holds all of the range. */
DLS__INTERNAL void dls__ranges_overlapping(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size, dls__range *out,
                                           int max, int *out_n, bool *out_holds);
/* Takes out every entry whose owner only the registry holds (count 1), not busy, and for which `idle(owner)` says so (asked
 * with no lock held, the owner held meanwhile), at most `max`, into `out`; returns how many. Each owner taken out
 * comes with two references, the registry's and the lookup's: the caller drops both. Entries left: *out_left. */
DLS__INTERNAL size_t dls__ranges_take_idle(dls__ranges *r, bool (*idle)(void *owner), void **out, size_t max,
                                           size_t *out_left);
/* Forgets every entry; `drop` (NULL: none) then runs on each owner, the lock let go (shutdown). */
DLS__INTERNAL void dls__ranges_clear(dls__ranges *r, void (*drop)(void *owner));

/* ---- the lookup of the one entry that holds a range, inline (mu held unless said) ---- */

/* The end of [lo, lo + size), kept inside the address space. */
static inline uintptr_t dls__ranges_end(uintptr_t lo, size_t size) { return lo + size < lo ? UINTPTR_MAX : lo + size; }

/* Whether a and b are one memory (CPU devices are one address space): the common case, the same device, in one
 * compare of their 8 bytes. */
static inline bool dls__ranges_same_memory(DLDevice a, DLDevice b) {
  _Static_assert(sizeof(DLDevice) == sizeof(uint64_t), "a DLDevice is two 32-bit fields");
  uint64_t x, y;
  memcpy(&x, &a, sizeof x);
  memcpy(&y, &b, sizeof y);
  return x == y || (a.device_type == kDLCPU && b.device_type == kDLCPU);
}

/* The first position whose entry starts at or above `lo`: a halving with no branch on the comparisons. */
static DLS__HOT_INLINE size_t dls__ranges_lower_bound(const dls__ranges *r, uintptr_t lo) {
  const dls__range *e = r->entries;
  size_t n = r->n, base = 0;
  if (n == 0)
    return 0;
  while (n > 1) { /* the answer lies in [base, base + n] */
    size_t half = n / 2;
    base = e[base + half].lo < lo ? base + half : base;
    n -= half;
  }
  return base + (e[base].lo < lo);
}

/* The one entry [lo, hi) overlaps on `home`, when it holds all of it, its owner alive; NULL otherwise. */
static DLS__HOT_INLINE const dls__range *dls__ranges_sole_entry(const dls__ranges *r, DLDevice home, uintptr_t lo,
                                                              uintptr_t hi) {
  /* Entries from lower_bound(hi) on start at or past hi: the last one below it is the only candidate, when no entry
   * before it reaches past lo. */
  size_t i = dls__ranges_lower_bound(r, hi);
  if (i == 0 || (i > 1 && r->reach[i - 2] > lo))
    return NULL;
  const dls__range *e = &r->entries[i - 1];
  bool holds = e->lo <= lo && e->hi >= hi && dls__ranges_same_memory(e->home, home) &&
               atomic_load_explicit(e->refs, memory_order_relaxed) > 0;
  return holds ? e : NULL;
}

/* Whether an entry may overlap [lo, lo + size), on any device (the caller asks the entries when one may): one search
 * under the lock, nothing held. For the uses that only join what is there (a framework's own work), most of which
 * meet nothing. size 0: none. */
static DLS__HOT_INLINE bool dls__ranges_may_overlap(dls__ranges *r, uintptr_t lo, size_t size) {
  if (size == 0)
    return false;
  uintptr_t hi = dls__ranges_end(lo, size);
  dls__spin_lock(&r->mu);
  size_t i = dls__ranges_lower_bound(r, hi); /* entries[0, i) start below hi: one overlaps when one reaches past lo */
  bool may = i > 0 && r->reach[i - 1] > lo;
  dls__spin_unlock(&r->mu);
  return may;
}

static DLS__HOT_INLINE void *dls__ranges_sole_locked(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size) {
  dls__spin_lock(&r->mu);
  const dls__range *e = size != 0 ? dls__ranges_sole_entry(r, home, lo, dls__ranges_end(lo, size)) : NULL;
  if (e == NULL)
    dls__spin_unlock(&r->mu);
  return e != NULL ? e->owner : NULL;
}

#endif /* DLSTREAM_CORE_RANGES_H */
