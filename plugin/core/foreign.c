/* SPDX-License-Identifier: Apache-2.0 */
/* The record of foreign memory (foreign.h): records are borrowed buffers of the "no stream" producer, with no
 * release, in the registry of foreign memory (ranges.h); a record keeps its current low address in `ptr` (its size
 * stays 0: it owns no bytes). Imports are entered beside them with their own bytes and no reference of the
 * registry's (buffer.c takes one out before its last reference goes). Also the public dls_buffer_borrow, whose
 * buffers are entered as imports are. */
#include "core/deferred.h"
#include "core/foreign.h"
#include "core/ranges.h"
#include "core/tables.h"

/* The count at which adding a record sweeps first: twice what the last sweep left, at least 64. */
static _Atomic size_t sweep_at = 64;

/* A new record of [lo, hi) on `dev`, entered in the registry (its reference) and held once more (the caller's). */
static dls_status_t record_new(dls__device *dev, uintptr_t lo, uintptr_t hi, dls__buffer **out) {
  if (atomic_load_explicit(&dls__foreign_n, memory_order_relaxed) >= atomic_load(&sweep_at))
    dls__foreign_sweep();
  dls__stream *none = NULL;
  DLS__TRY(dls__stream_default(dev, DLS__STREAM_NONE, &none));
  dls__buffer *b = NULL;
  DLS__TRY(dls__buffer_borrow(dev, NULL, 0, none, NULL, NULL, &b)); /* 0 bytes: no alias of exported memory */
  b->record = true;
  b->ptr = (void *)lo;
  dls_status_t st = dls__ranges_add_busy(&dls__foreign_ranges, dev->device, lo, hi - lo, b, &b->refs, &b->inflight);
  if (st != DLS_OK) {
    dls__buffer_unref(b);
    return st;
  }
  dls__buffer_ref(b);
  *out = b;
  return DLS_OK;
}

/* Whether a record's uses have all completed (an import's count is its holders': never), none in flight. Its state
 * is read under its lock: a lookup may find it meanwhile. */
static bool idle(void *owner) {
  dls__buffer *b = owner;
  if (!b->record)
    return false;
  dls__spin_lock(&b->mu);
  bool done = atomic_load_explicit(&b->inflight, memory_order_acquire) == 0 && dls__buffer_uses_complete(b, true);
  dls__spin_unlock(&b->mu);
  return done;
}

void dls__foreign_retire(dls__buffer *rec, int held) {
  if (rec->record && dls__ranges_remove(&dls__foreign_ranges, rec, (uintptr_t)rec->ptr, 1 + held))
    dls__buffer_unref(rec); /* the registry's reference */
}

static void drop_all(dls__foreign_set *set) {
  for (int i = 0; i < set->n; i++)
    dls__buffer_unref(set->rec[i]);
  set->n = 0;
}

dls_status_t dls__foreign_find(dls__device *dev, uintptr_t lo, size_t size, bool add, dls__foreign_set *out) {
  out->n = 0;
  out->merged = false;
  if (size == 0 || DLS__UNLIKELY(atomic_load_explicit(&dls__foreign_off, memory_order_relaxed)))
    return DLS_OK;
  if (!add && !dls__ranges_may_overlap(&dls__foreign_ranges, lo, size))
    return DLS_OK; /* the common case of a use that only joins: records of other memory only */
  uintptr_t hi = dls__ranges_end(lo, size);
  /* The common case: one record, that holds the range (what the walk below finds). */
  _Atomic int *refs;
  dls__buffer *one = dls__ranges_sole(&dls__foreign_ranges, dev->device, lo, size, &refs);
  if (DLS__LIKELY(one != NULL) && one->record && (add || atomic_load_explicit(refs, memory_order_relaxed) != 2)) {
    out->rec[0] = one;
    out->n = 1;
    return DLS_OK;
  }
  if (one != NULL)
    dls__buffer_unref(one); /* an import, or a record that may go: the walk below */
  dls__range r[DLS__FOREIGN_MAX];
  int n;
  bool holds; /* by a record or an import: only a record's counts here */
  dls__ranges_overlapping(&dls__foreign_ranges, dev->device, lo, size, r, DLS__FOREIGN_MAX, &n, &holds);
  if (n > DLS__FOREIGN_MAX) {
    /* Memory used in small pieces, then as one (a pool's blocks handed out again together): the pieces' records
     * whose uses are over go, and the range is asked again. */
    dls__foreign_sweep();
    dls__ranges_overlapping(&dls__foreign_ranges, dev->device, lo, size, r, DLS__FOREIGN_MAX, &n, &holds);
  }
  if (n > DLS__FOREIGN_MAX)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%d records and imports of foreign memory overlap [%p, %p) on %s, more than one use may join "
                     "(%d): records of smaller views whose work has not finished (wait for it first), or imports of "
                     "overlapping memory that live at once",
                     n, (void *)lo, (void *)hi, dev->name, DLS__FOREIGN_MAX);
  /* The records first (the one that holds the range, else one other holders keep, else the first), imports after;
   * rr: the records' ranges, in the set's order. */
  dls__range rr[DLS__FOREIGN_MAX];
  int first = -1, nrec = 0;
  bool held = false;
  for (int k = 0; k < n; k++) {
    dls__buffer *b = r[k].owner;
    if (b == NULL || !b->record)
      continue;
    if (!add && atomic_load_explicit(r[k].refs, memory_order_relaxed) == 2 && idle(b)) {
      /* A use its framework orders meets a record whose uses are over (memory freed and reused, say): it goes now,
       * rather than at the next sweep, so that the framework's fast way is not left for nothing. */
      dls__foreign_retire(b, 1);
      dls__buffer_unref(b);
      continue;
    }
    bool h = r[k].lo <= lo && r[k].hi >= hi, other = atomic_load_explicit(r[k].refs, memory_order_relaxed) > 2;
    if (first < 0 || (h && !held) || (!held && other)) {
      first = nrec;
      held = h;
    }
    rr[nrec] = r[k];
    out->rec[nrec++] = b;
  }
  out->n = nrec;
  for (int k = 0; k < n; k++)
    if (r[k].owner != NULL && !((dls__buffer *)r[k].owner)->record)
      out->rec[out->n++] = r[k].owner;
  if (first > 0) {
    dls__range t = rr[0];
    rr[0] = rr[first];
    rr[first] = t;
    dls__buffer *b = out->rec[0];
    out->rec[0] = out->rec[first];
    out->rec[first] = b;
  }
  if (!add || held)
    return DLS_OK;
  if (nrec == 0) {
    if (out->n == DLS__FOREIGN_MAX) {
      drop_all(out);
      return dls__fail(DLS_ERR_NOT_SUPPORTED, "%d imports of foreign memory overlap [%p, %p) on %s, more than one "
                       "use may join", DLS__FOREIGN_MAX, (void *)lo, (void *)hi, dev->name);
    }
    dls__buffer *rec = NULL;
    dls_status_t st = record_new(dev, lo, hi, &rec);
    if (st != DLS_OK) {
      drop_all(out);
      return st;
    }
    out->rec[out->n] = out->rec[0];
    out->rec[0] = rec;
    out->n++;
    return DLS_OK;
  }
  /* rec[0] grows over the range and the other records; its state holds its own uses. The use is ordered as a write
   * of every record, after which the others (but records held elsewhere) leave, their uses covered by the first's
   * writer. */
  uintptr_t nlo = lo, nhi = hi;
  for (int k = 0; k < nrec; k++) {
    nlo = rr[k].lo < nlo ? rr[k].lo : nlo;
    nhi = rr[k].hi > nhi ? rr[k].hi : nhi;
  }
  dls__ranges_move(&dls__foreign_ranges, out->rec[0], rr[0].lo, nlo, nhi);
  out->rec[0]->ptr = (void *)nlo;
  out->merged = nrec > 1;
  return DLS_OK;
}

bool dls__foreign_quick_ready(dls__stream *s) {
  if (DLS__UNLIKELY(atomic_load_explicit(&dls__foreign_off, memory_order_relaxed)))
    return false;
  uint64_t cap = 0;
  (void)dls__stream_capture(s, &cap); /* before the registry's lock: it may ask the driver */
  return cap == 0;
}

dls__buffer *dls__foreign_use_noted(DLDevice home, uintptr_t lo, size_t size, dls__stream *s, int mode) {
  /* The record is used under the registry's lock: it cannot leave meanwhile, and once the use is in flight it stays
   * in until the use's mark is recorded (the registry's `busy`: its count of uses in flight), with no reference.
   * It calls nothing: no register is saved around it. */
  dls__buffer *b = dls__ranges_sole_locked(&dls__foreign_ranges, home, lo, size);
  if (b == NULL)
    return NULL;
  bool noted = b->record && dls__buffer_order_noted(b, s, 0, mode);
  dls__ranges_unlock(&dls__foreign_ranges);
  return noted ? b : NULL;
}

dls_status_t dls__foreign_enter(dls__buffer *b, dls__stream *producer) {
  if (DLS__UNLIKELY(atomic_load_explicit(&dls__foreign_off, memory_order_relaxed)))
    return DLS_OK;
  dls__foreign_set set;
  DLS__TRY(dls__foreign_find(b->dev, (uintptr_t)b->ptr, b->size, false, &set));
  dls_status_t st = DLS_OK;
  for (int i = 0; i < set.n && st == DLS_OK; i++) { /* waits only: its own work is its buffer's first writer */
    dls__accesses x; /* not zeroed: its entries are written as they are added */
    x.n = 0;
    dls__access_add(&x, set.rec[i], DLS_ACCESS_WRITE);
    if ((st = dls__access_begin(&x, producer)) == DLS_OK)
      (void)dls__access_end(&x, false);
  }
  drop_all(&set);
  if (st == DLS_OK) /* and for the uses of earlier imports of these bytes whose releases still wait */
    st = dls__deferred_order_after(b->dev->device, (uintptr_t)b->ptr, dls__ranges_end((uintptr_t)b->ptr, b->size),
                                   producer);
  if (st == DLS_OK)
    st = dls__ranges_add(&dls__foreign_ranges, b->dev->device, (uintptr_t)b->ptr, b->size, b, &b->refs);
  b->entered = st == DLS_OK;
  return st;
}

void dls__foreign_sweep(void) {
  enum { BATCH = 64 };
  if (atomic_load_explicit(&dls__foreign_n, memory_order_relaxed) == 0)
    return;
  void *out[BATCH];
  size_t taken, left;
  do {
    taken = dls__ranges_take_idle(&dls__foreign_ranges, idle, out, BATCH, &left);
    for (size_t i = 0; i < taken; i++) { /* the sweep's and the registry's references, the last: no use pending */
      dls__buffer_unref(out[i]);
      dls__buffer_unref(out[i]);
    }
  } while (taken == BATCH);
  atomic_store(&sweep_at, left * 2 > 64 ? left * 2 : 64);
}

static void drop_record(void *owner) {
  if (((dls__buffer *)owner)->record)
    dls__buffer_unref(owner); /* an import is only forgotten: its holders have it */
}

void dls__foreign_clear(void) {
  dls__ranges_clear(&dls__foreign_ranges, drop_record);
  atomic_store(&sweep_at, 64);
}

/* ---- public API ---- */

dls_status_t dls_buffer_borrow(DLDevice device, void *ptr, size_t size, dls_stream_t producer, dls_release_fn release,
                               void *user_data, dls_buffer_t *out_buffer) {
  static const char call[] = "dls_buffer_borrow";
  DLS__ENTER(call);
  DLS__OUT(call, out_buffer);
  if (ptr == NULL && size != 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(ptr=NULL, size=%zu): NULL memory of non-zero size", call, size);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  DLS__GET_OF(stream, s, producer, call, "producer");
  if (s->dev != dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: memory is on %s but the producer stream is on %s", call, dev->name,
                     s->dev->name);
  dls__buffer *b = NULL;
  st = dls__buffer_borrow(dev, ptr, size, s, release, user_data, &b);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(ptr=%p, size=%zu)", call, ptr, size);
  if (b->alias == NULL && size > 0)
    st = dls__foreign_enter(b, s);
  if (st == DLS_OK && (b->id = dls__table_add(&dls__buffer_table, b)) == 0)
    st = DLS_ERR_OUT_OF_MEMORY;
  if (st != DLS_OK) {
    st = dls__fail_prefix(st, "%s(ptr=%p, size=%zu)", call, ptr, size);
    b->release = NULL; /* failure: the caller keeps ownership */
    dls__buffer_unref(b);
    return st;
  }
  out_buffer->id = b->id;
  return DLS_OK;
}
