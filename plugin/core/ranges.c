/* SPDX-License-Identifier: Apache-2.0 */
/* Registries of memory by address range (ranges.h): entries sorted by their low address under one lock. Entries
 * may overlap (borrowed memory imported twice, both exported; foreign records that grew), so each position also
 * keeps the highest end of the entries up to it: a lookup walks down from the last entry starting below the range's
 * end while that reach still covers the range's start, which for entries that do not overlap is one step. */
#include <string.h>

#include "core/ranges.h"

_Atomic size_t dls__ranges_n;
_Atomic size_t dls__foreign_n;
dls__ranges dls__foreign_ranges = DLS__RANGES(dls__foreign_n, "foreign memory");

/* The position of `owner`, entered at `lo`, or n (mu held). */
static size_t position(const dls__ranges *r, const void *owner, uintptr_t lo) {
  for (size_t i = dls__ranges_lower_bound(r, lo); i < r->n && r->entries[i].lo == lo; i++)
    if (r->entries[i].owner == owner)
      return i;
  return r->n;
}

static void reach_from(dls__ranges *r, size_t i) {
  for (; i < r->n; i++) {
    uintptr_t before = i > 0 ? r->reach[i - 1] : 0;
    r->reach[i] = r->entries[i].hi > before ? r->entries[i].hi : before;
  }
}

/* n changed by `delta` (mu held). */
static void counted(dls__ranges *r, long delta) {
  atomic_store_explicit(r->count, r->n, memory_order_relaxed);
  if (delta > 0)
    atomic_fetch_add_explicit(&dls__ranges_n, (size_t)delta, memory_order_relaxed);
  else if (delta < 0)
    atomic_fetch_sub_explicit(&dls__ranges_n, (size_t)-delta, memory_order_relaxed);
}

static dls_status_t grow(dls__ranges *r) {
  size_t c = r->cap ? r->cap * 2 : 16;
  dls__range *e = dls__realloc(r->entries, c * sizeof *e);
  if (e == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for the registry of %s", r->what);
  r->entries = e;
  uintptr_t *reach = dls__realloc(r->reach, c * sizeof *reach);
  if (reach == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for the registry of %s", r->what);
  r->reach = reach;
  r->cap = c;
  return DLS_OK;
}

dls_status_t dls__ranges_add(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size, void *owner,
                             _Atomic int *refs) {
  return dls__ranges_add_busy(r, home, lo, size, owner, refs, NULL);
}

dls_status_t dls__ranges_add_busy(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size, void *owner,
                                  _Atomic int *refs, _Atomic int *busy) {
  if (size == 0)
    return DLS_OK;
  uintptr_t hi = dls__ranges_end(lo, size);
  dls_status_t st = DLS_OK;
  dls__spin_lock(&r->mu);
  if (position(r, owner, lo) == r->n && (r->n < r->cap || (st = grow(r)) == DLS_OK)) {
    size_t i = dls__ranges_lower_bound(r, lo); /* before the entries that start at lo too: any order among them does */
    memmove(r->entries + i + 1, r->entries + i, (r->n - i) * sizeof *r->entries);
    r->entries[i] = (dls__range){lo, hi, home, owner, refs, busy};
    r->n++;
    reach_from(r, i);
    counted(r, 1);
  }
  dls__spin_unlock(&r->mu);
  return st;
}

/* Whether entry `e` is in use without a reference (mu held: a use counts up under it). */
static bool busy(const dls__range *e) {
  return e->busy != NULL && atomic_load_explicit(e->busy, memory_order_acquire) != 0;
}

/* Takes entry i out (mu held). */
static void take_out(dls__ranges *r, size_t i) {
  memmove(r->entries + i, r->entries + i + 1, (r->n - i - 1) * sizeof *r->entries);
  r->n--;
  reach_from(r, i);
  counted(r, -1);
}

bool dls__ranges_remove(dls__ranges *r, void *owner, uintptr_t lo, int refs) {
  dls__spin_lock(&r->mu);
  size_t i = position(r, owner, lo);
  bool out = i < r->n && (refs == 0 || (atomic_load_explicit(r->entries[i].refs, memory_order_acquire) == refs &&
                                         !busy(&r->entries[i])));
  if (out)
    take_out(r, i);
  dls__spin_unlock(&r->mu);
  return out;
}

void dls__ranges_move(dls__ranges *r, void *owner, uintptr_t lo, uintptr_t new_lo, uintptr_t new_hi) {
  dls__spin_lock(&r->mu);
  size_t i = position(r, owner, lo);
  if (i < r->n) {
    dls__range e = r->entries[i];
    memmove(r->entries + i, r->entries + i + 1, (r->n - i - 1) * sizeof *r->entries);
    r->n--;
    size_t k = dls__ranges_lower_bound(r, new_lo);
    memmove(r->entries + k + 1, r->entries + k, (r->n - k) * sizeof *r->entries);
    e.lo = new_lo;
    e.hi = new_hi;
    r->entries[k] = e;
    r->n++;
    reach_from(r, i < k ? i : k);
  }
  dls__spin_unlock(&r->mu);
}

/* A reference on an owner whose count is above 0: one at 0 is being released (mu held). */
static bool try_ref(_Atomic int *refs) {
  int r = atomic_load_explicit(refs, memory_order_relaxed);
  while (r > 0)
    if (atomic_compare_exchange_weak_explicit(refs, &r, r + 1, memory_order_acq_rel, memory_order_relaxed))
      return true;
  return false;
}

/* Whether entry `e` is one a lookup of [lo, hi) on `home` sees: on that memory, overlapping, its owner alive. */
static bool seen(const dls__range *e, DLDevice home, uintptr_t lo) {
  return e->hi > lo && dls__ranges_same_memory(e->home, home) &&
         atomic_load_explicit(e->refs, memory_order_relaxed) > 0;
}

void *dls__ranges_find(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size) {
  if (size == 0 || atomic_load_explicit(r->count, memory_order_relaxed) == 0)
    return NULL;
  uintptr_t hi = dls__ranges_end(lo, size);
  void *found = NULL;
  dls__spin_lock(&r->mu);
  size_t partial = r->n;
  for (size_t i = dls__ranges_lower_bound(r, hi); i-- > 0 && r->reach[i] > lo;) {
    const dls__range *e = &r->entries[i];
    if (!seen(e, home, lo))
      continue;
    if (e->lo <= lo && e->hi >= hi && try_ref(e->refs)) {
      found = e->owner;
      break;
    }
    partial = i; /* walking down: the lowest overlapping entry */
  }
  if (found == NULL && partial < r->n && try_ref(r->entries[partial].refs))
    found = r->entries[partial].owner;
  dls__spin_unlock(&r->mu);
  return found;
}

void *dls__ranges_sole(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size, _Atomic int **out_refs) {
  if (size == 0 || atomic_load_explicit(r->count, memory_order_relaxed) == 0)
    return NULL;
  void *found = NULL;
  dls__spin_lock(&r->mu);
  const dls__range *e = dls__ranges_sole_entry(r, home, lo, dls__ranges_end(lo, size));
  if (e != NULL && try_ref(e->refs)) {
    found = e->owner;
    *out_refs = e->refs;
  }
  dls__spin_unlock(&r->mu);
  return found;
}

void dls__ranges_overlapping(dls__ranges *r, DLDevice home, uintptr_t lo, size_t size, dls__range *out, int max,
                             int *out_n, bool *out_holds) {
  *out_n = 0;
  *out_holds = false;
  if (size == 0 || atomic_load_explicit(r->count, memory_order_relaxed) == 0)
    return;
  uintptr_t hi = dls__ranges_end(lo, size);
  int n = 0;
  dls__spin_lock(&r->mu);
  for (size_t i = dls__ranges_lower_bound(r, hi); i-- > 0 && r->reach[i] > lo;) {
    const dls__range *e = &r->entries[i];
    if (!seen(e, home, lo))
      continue;
    if (n < max)
      out[n] = *e;
    n++;
    *out_holds |= e->lo <= lo && e->hi >= hi;
  }
  /* All of them or none: a caller that cannot take them all must not order against part of them. */
  for (int k = 0; k < n && n <= max; k++)
    if (!try_ref(out[k].refs))
      out[k].owner = NULL; /* gone meanwhile: nothing to join (refs hold the registry's while it is in) */
  dls__spin_unlock(&r->mu);
  *out_n = n;
}

size_t dls__ranges_take_idle(dls__ranges *r, bool (*idle)(void *owner), void **out, size_t max, size_t *out_left) {
  enum { BATCH = 64 };
  void *owner[BATCH];
  uintptr_t lo[BATCH];
  _Atomic int *refs[BATCH];
  size_t n = 0, taken = 0;
  if (max > BATCH)
    max = BATCH;
  /* The candidates, held: their idleness is asked (driver queries) with the lock let go. */
  dls__spin_lock(&r->mu);
  for (size_t i = 0; i < r->n && n < max; i++) {
    dls__range *e = &r->entries[i];
    if (atomic_load_explicit(e->refs, memory_order_acquire) == 1 && !busy(e) && try_ref(e->refs)) {
      owner[n] = e->owner;
      refs[n] = e->refs;
      lo[n++] = e->lo;
    }
  }
  dls__spin_unlock(&r->mu);
  bool go[BATCH];
  for (size_t k = 0; k < n; k++)
    go[k] = idle(owner[k]);
  dls__spin_lock(&r->mu);
  for (size_t k = 0; k < n; k++) {
    size_t i = go[k] ? position(r, owner[k], lo[k]) : r->n;
    /* Still only the registry's and this lookup's references: no one can take another but through the lock. */
    if (i < r->n && atomic_load_explicit(r->entries[i].refs, memory_order_acquire) == 2 && !busy(&r->entries[i])) {
      take_out(r, i);
      out[taken++] = owner[k];
    } else {
      atomic_fetch_sub_explicit(refs[k], 1, memory_order_acq_rel); /* the lookup's: the registry's remains */
    }
  }
  *out_left = r->n;
  dls__spin_unlock(&r->mu);
  return taken;
}

void dls__ranges_clear(dls__ranges *r, void (*drop)(void *owner)) {
  dls__spin_lock(&r->mu);
  dls__range *entries = r->entries;
  size_t n = r->n;
  dls__free(r->reach);
  r->entries = NULL;
  r->reach = NULL;
  r->cap = 0;
  r->n = 0;
  counted(r, -(long)n);
  dls__spin_unlock(&r->mu);
  for (size_t i = 0; drop != NULL && i < n; i++)
    drop(entries[i].owner);
  dls__free(entries);
}
