/* SPDX-License-Identifier: Apache-2.0 */
/* The registry of exported memory (exported.h): entries sorted by their low address under one lock. Entries may
 * overlap (borrowed memory imported twice, both exported), so each position also keeps the highest end of the
 * entries up to it: a lookup walks down from the last entry starting below the range's end while that reach
 * still covers the range's start, which for entries that do not overlap is one step. */
#include <string.h>

#include "core/exported.h"

typedef struct entry {
  uintptr_t lo, hi; /* [lo, hi) */
  DLDevice home;
  void *owner;
  _Atomic int *refs;
} entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry *entries;   /* sorted by lo; n of cap */
static uintptr_t *reach; /* reach[i]: the highest hi of entries[0..i] */
static size_t n, cap;

_Atomic size_t dls__exported_n;

/* The first position whose entry starts at or above `lo` (mu held). */
static size_t lower_bound(uintptr_t lo) {
  size_t a = 0, b = n;
  while (a < b) {
    size_t m = a + (b - a) / 2;
    if (entries[m].lo < lo)
      a = m + 1;
    else
      b = m;
  }
  return a;
}

/* The position of `owner`, entered at `lo`, or n (mu held). */
static size_t position(const void *owner, uintptr_t lo) {
  for (size_t i = lower_bound(lo); i < n && entries[i].lo == lo; i++)
    if (entries[i].owner == owner)
      return i;
  return n;
}

static void reach_from(size_t i) {
  for (; i < n; i++) {
    uintptr_t before = i > 0 ? reach[i - 1] : 0;
    reach[i] = entries[i].hi > before ? entries[i].hi : before;
  }
}

static dls_status_t grow(void) {
  size_t c = cap ? cap * 2 : 16;
  entry *e = dls__realloc(entries, c * sizeof *e);
  if (e == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for the registry of exported memory");
  entries = e;
  uintptr_t *r = dls__realloc(reach, c * sizeof *r);
  if (r == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for the registry of exported memory");
  reach = r;
  cap = c;
  return DLS_OK;
}

/* The end of [lo, lo + size), kept inside the address space. */
static uintptr_t end_of(uintptr_t lo, size_t size) { return lo + size < lo ? UINTPTR_MAX : lo + size; }

dls_status_t dls__exported_add(DLDevice home, uintptr_t lo, size_t size, void *owner, _Atomic int *refs) {
  if (size == 0)
    return DLS_OK;
  uintptr_t hi = end_of(lo, size);
  dls_status_t st = DLS_OK;
  pthread_mutex_lock(&mu);
  if (position(owner, lo) == n && (n < cap || (st = grow()) == DLS_OK)) {
    size_t i = lower_bound(lo); /* before the entries that start at lo too: any order among them does */
    memmove(entries + i + 1, entries + i, (n - i) * sizeof *entries);
    entries[i] = (entry){lo, hi, home, owner, refs};
    n++;
    reach_from(i);
    atomic_store_explicit(&dls__exported_n, n, memory_order_relaxed);
  }
  pthread_mutex_unlock(&mu);
  return st;
}

void dls__exported_remove(void *owner, uintptr_t lo) {
  pthread_mutex_lock(&mu);
  size_t i = position(owner, lo);
  if (i < n) {
    memmove(entries + i, entries + i + 1, (n - i - 1) * sizeof *entries);
    n--;
    reach_from(i);
    atomic_store_explicit(&dls__exported_n, n, memory_order_relaxed);
  }
  pthread_mutex_unlock(&mu);
}

static bool same_memory(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && (a.device_id == b.device_id || a.device_type == kDLCPU);
}

/* A reference on an owner whose count is above 0: one at 0 is being released (mu held). */
static bool try_ref(_Atomic int *refs) {
  int r = atomic_load_explicit(refs, memory_order_relaxed);
  while (r > 0)
    if (atomic_compare_exchange_weak_explicit(refs, &r, r + 1, memory_order_acq_rel, memory_order_relaxed))
      return true;
  return false;
}

void *dls__exported_find(DLDevice home, uintptr_t lo, size_t size) {
  if (size == 0 || dls__exported_none())
    return NULL;
  uintptr_t hi = end_of(lo, size);
  void *found = NULL;
  pthread_mutex_lock(&mu);
  size_t partial = n;
  for (size_t i = lower_bound(hi); i-- > 0 && reach[i] > lo;) {
    const entry *e = &entries[i];
    if (e->hi <= lo || !same_memory(e->home, home) || atomic_load_explicit(e->refs, memory_order_relaxed) <= 0)
      continue;
    if (e->lo <= lo && e->hi >= hi && try_ref(e->refs)) {
      found = e->owner;
      break;
    }
    partial = i; /* walking down: the lowest overlapping entry */
  }
  if (found == NULL && partial < n && try_ref(entries[partial].refs))
    found = entries[partial].owner;
  pthread_mutex_unlock(&mu);
  return found;
}

void dls__exported_clear(void) {
  pthread_mutex_lock(&mu);
  dls__free(entries);
  dls__free(reach);
  entries = NULL;
  reach = NULL;
  n = cap = 0;
  atomic_store_explicit(&dls__exported_n, 0, memory_order_relaxed);
  pthread_mutex_unlock(&mu);
}
