/* SPDX-License-Identifier: Apache-2.0 */
/* A buffer's accesses and the one rule that orders them on the device, for
 * every buffer dlstream knows (owned, borrowed, views, exports): a read on a
 * stream waits for the last writer on another stream; a write waits for the
 * last writer and for every reader on another stream since that write.
 *
 * The parties are the allocation stream (a borrowed buffer's producer: its
 * first writer) and one use entry per other stream (and capture). After a
 * piece of work, one event is recorded on its stream for all its buffers:
 * the stream's mark for eager entries (stream.h; a later record covers more
 * work, never less), an entry's own pooled event in a capture. A later
 * crossing waits on it, and a free on all of them (below). The allocation
 * stream records nothing: a crossing to it records an event on it then
 * (every piece of its work queued so far: conservative, never wrong).
 * Hazards are kept per capture: uses in a capture are ordered among the
 * streams of that capture, eager ones among eager streams.
 *
 * The same state answers where a free goes (release.c). */
#include <stdlib.h>
#include <string.h>

#include "core/access.h"
#include "core/capture.h"
#include "core/release.h"
#include "core/wait.h"

/* The use entry of `s` in capture `in_cap` (0: eager), added with a pooled
 * event when missing. A use in a capture gets its own entry: re-recording an
 * eager use's event in a capture would lose the eager work it marks. b->mu
 * held. */
dls_status_t dls__use_entry(dls__buffer *b, dls__stream *s, uint64_t in_cap, int *out) {
  for (int i = 0; i < b->nuses; i++) {
    if (dls__same_stream(b->uses[i].stream, s) && b->uses[i].cap_id == in_cap) {
      *out = i;
      return DLS_OK;
    }
  }
  if (DLS__UNLIKELY(in_cap != 0 && in_cap != b->cap_id))
    DLS__TRY(dls__buffer_hold_for_capture(b, in_cap)); /* memory a capture uses: its graph keeps it (below) */
  if (b->nuses == b->cap) {
    int cap = b->cap * 2;
    dls__use *p = dls__malloc((size_t)cap * sizeof *p);
    if (p == NULL)
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a buffer's use set");
    memcpy(p, b->uses, (size_t)b->nuses * sizeof *p);
    if (b->uses != b->uses_inline)
      dls__free(b->uses);
    b->uses = p;
    b->cap = cap;
  }
  void *ev = NULL; /* from the use stream's device: a record must be made in its context */
  if (in_cap != 0)
    DLS__TRY(dls__event_pool_get(s->dev, &ev));
  else
    DLS__TRY(dls__stream_mark(s, &(void *){NULL}));
  dls__use *u = &b->uses[b->nuses];
  u->stream = s;
  u->event = ev;
  u->cap_id = in_cap;
  u->stale = false;
  u->owed = false;
  u->recorded = false;
  u->exports = 0;
  dls__stream_ref(s);
  /* A new party has no role; a spilled one shares the bit of others that may have one. */
  if (in_cap == 0)
    b->eager_uses |= dls__party_bit(b->nuses);
  *out = b->nuses++;
  return DLS_OK;
}

dls_status_t dls__use_refresh(dls__use *u) {
  if (DLS__LIKELY(!u->stale))
    return DLS_OK;
  uint64_t now = 0;
  (void)dls__stream_capture(u->stream, &now);
  if (now != u->cap_id) {
    if (u->cap_id == 0)
      return dls__fail(DLS_ERR_STATE, "a use of the buffer missed its record and its stream captures now");
    u->stale = false;
    return DLS_OK;
  }
  dls__device *ud = u->stream->dev;
  DLS__TRY(ud->be->event_record(ud->be, ud->id, dls__use_event(u), u->stream->native));
  u->stale = false;
  u->owed = false;
  u->recorded = true;
  return DLS_OK;
}

/* Whether memory allocated in a capture holds a replay's output: its graph exists (the capture ended and was not
 * discarded) and was replayed. Before that nothing may use it outside its capture. Read in a pin: a capture's end
 * sets the owner inside its change. */
static inline bool owner_replayed(const dls__graph_owner *o) {
  return o->launches != NULL && __atomic_load_n(o->launches, __ATOMIC_ACQUIRE) > 0;
}

/* Whether a crossing from the allocation stream may wait on its mark: it
 * was recorded after the stream's latest use of owned memory, and no export
 * lets the stream write it unseen since. A producer of borrowed memory
 * writes it unseen (its framework's own work): that crossing waits for
 * whatever the producer queued so far. */
static bool alloc_mark_valid(const dls__buffer *b) {
  return b->alloc_marked && !b->borrowed && b->alloc_exports == 0;
}

/* Makes `s` (in capture `cap`) wait for party `k`'s work (b->mu held). */
static dls_status_t wait_for(dls__buffer *b, dls__stream *s, uint64_t cap, int k) {
  if (k == DLS__PARTY_ALLOC) {
    dls__stream *a = b->stream;
    if (a->native == (void *)UINTPTR_MAX || dls__same_stream(a, s))
      return DLS_OK; /* memory no stream produced (latch flags) */
    if (alloc_mark_valid(b)) /* an eager record, waited on by an eager use (the party's capture is the use's) */
      return s->dev->be->stream_wait_event(s->dev->be, s->dev->id, s->native,
                                           atomic_load_explicit(&a->mark, memory_order_acquire));
    return dls__stream_order_at(s, cap, a);
  }
  dls__use *u = &b->uses[k];
  if (dls__same_stream(u->stream, s))
    return DLS_OK;
  if (u->exports > 0) /* a consumer holding an export may write at any time: whatever it queued so far */
    return dls__stream_order_at(s, cap, u->stream);
  if (!u->recorded && !u->stale)
    return DLS_OK; /* its work was never queued (the launch failed): nothing to wait for */
  DLS__TRY(dls__use_refresh(u));
  return s->dev->be->stream_wait_event(s->dev->be, s->dev->id, s->native, dls__use_event(u));
}

/* Whether party bit `mine` (0: none yet) waited for every writer of the capture whose parties are `in`: it read
 * since their write, or it is their only writer. A spilled party is never sure (b->mu held). */
static inline bool synced(const dls__buffer *b, uint64_t in, uint64_t mine) {
  return mine != 0 && mine != DLS__SPILL && ((b->readers & mine) != 0 || (b->writers & in) == mine);
}

/* The waits a use of `mode` on `s` (party `me` of capture `cap`) needs (b->mu held). */
static DLS__HOT_INLINE dls_status_t order_use(dls__buffer *b, dls__stream *s, uint64_t cap, int me, int mode) {
  if (DLS__UNLIKELY(atomic_load_explicit(&dls__hazards_off, memory_order_relaxed)))
    return DLS_OK;
  /* A borrowed buffer's producer is eager: a capturing stream cannot wait
   * for it, and silently skipping it would read before the producer. */
  if (b->borrowed && cap != b->cap_id && b->stream->native != (void *)UINTPTR_MAX &&
      !dls__same_stream(b->stream, s))
    return dls__capture_check_pair(s, cap, b->stream, b->cap_id);
  /* A foreign allocation stream's uses while it was the only party were
   * noted without asking its capture state (dls__access_begin): some may
   * be in this capture. When it captures in it now, `s` waits for what it
   * captured so far (an edge of the capture: conservative, never wrong). */
  if (DLS__UNLIKELY(cap != 0 && b->cap_id == 0 && b->stream->capture_unseen) && !dls__same_stream(b->stream, s)) {
    uint64_t acap = 0;
    (void)dls__stream_capture(b->stream, &acap);
    if (acap == cap)
      DLS__TRY(dls__stream_order_at(s, cap, b->stream));
  }
  /* The writer, unless `s` already waited for it (it reads since, or is the capture's only writer); the readers,
   * for a write; a consumer holding an export, always: each a party of the use's capture other than `s` itself. */
  uint64_t mine = me == DLS__PARTY_NONE ? 0 : dls__party_bit(me);
  uint64_t in = dls__parties_in(b, cap);
  uint64_t need = b->exporting;
  if (!synced(b, in, mine))
    need |= b->writers;
  if (mode & DLS_ACCESS_WRITE)
    need |= b->readers;
  need &= in & ~(mine & ~DLS__SPILL);
  for (; need != 0; need &= need - 1) {
    int k = __builtin_ctzll(need) - 1;
    if (DLS__LIKELY(k < DLS__SPILL_FROM)) {
      DLS__TRY(wait_for(b, s, cap, k));
      continue;
    }
    for (k = DLS__SPILL_FROM; k < b->nuses; k++) /* wait_for skips `s` itself */
      if (b->uses[k].cap_id == cap)
        DLS__TRY(wait_for(b, s, cap, k));
  }
  return DLS_OK;
}

/* What a use dlstream did not order leaves (dls_buffer_record_use, an export's end that could not be ordered): a
 * party more, never one less. A write (or a read by a party that did not wait for the writer) is one more writer,
 * beside the writers no wait has covered; the readers since become writers too, as they did not wait for it. A
 * read by a party that waited for the writer is one more reader. (b->mu held) */
DLS__NOINLINE void dls__note_declared(dls__buffer *b, uint64_t cap, int me, int mode) {
  uint64_t in = dls__parties_in(b, cap), mine = dls__party_bit(me);
  if (!(mode & DLS_ACCESS_WRITE) && synced(b, in, mine)) {
    b->readers |= mine;
  } else if (mode & DLS_ACCESS_WRITE) {
    b->writers |= (b->readers & in) | mine;
    b->readers &= ~in;
  } else {
    b->writers |= mine;
  }
}

/* A record of foreign memory (foreign.c) outlives its uses, and each new stream that uses it would add an entry that
 * holds that stream (a pooled branch stream then never goes back to its pool): once a use is noted, the eager entries
 * with no role any more (no writer, no reader, no export: no later use waits for them, the last writer waited for
 * their work) leave, the bits of the others moved down with them. Their streams go into `out` (at most
 * DLS__SPILL_FROM), for the caller to drop once the lock is let go; how many. Spilled records are left as they are.
 * (b->mu held) */
static DLS__NOINLINE int forget_roleless(dls__buffer *b, dls__stream **out) {
  uint64_t role = b->writers | b->readers | b->exporting;
  if (b->nuses >= DLS__SPILL_FROM)
    return 0;
  uint64_t writers = b->writers & 1, readers = b->readers & 1, exporting = b->exporting & 1, eager = 0;
  int n = 0, j = 0;
  for (int k = 0; k < b->nuses; k++) {
    dls__use *u = &b->uses[k];
    uint64_t from = dls__party_bit(k), to = dls__party_bit(j);
    if (u->cap_id == 0 && u->exports == 0 && !(role & from)) {
      out[n++] = u->stream;
      continue;
    }
    b->uses[j] = *u;
    writers |= b->writers & from ? to : 0;
    readers |= b->readers & from ? to : 0;
    exporting |= b->exporting & from ? to : 0;
    eager |= u->cap_id == 0 ? to : 0;
    j++;
  }
  b->nuses = j;
  b->writers = writers;
  b->readers = readers;
  b->exporting = exporting;
  b->eager_uses = eager;
  return n;
}

/* ---- the accesses of one piece of work ---- */

/* Sorts the accesses by buffer address: an insertion sort, as a piece of
 * work names a handful of buffers (qsort cost 150 instructions for two). */
static void sort_by_address(dls__access *a, int n) {
  for (int i = 1; i < n; i++) {
    dls__access v = a[i];
    int j = i;
    for (; j > 0 && (uintptr_t)a[j - 1].b > (uintptr_t)v.b; j--)
      a[j] = a[j - 1];
    a[j] = v;
  }
}

static dls_status_t access_begin_parties(dls__accesses *x, dls__stream *s);
static dls_status_t access_end_parties(dls__accesses *x, bool queued);

dls_status_t dls__access_begin(dls__accesses *x, dls__stream *s) {
  x->s = s;
  x->cap = 0;
  /* Pinned until dls__access_end: the capture the uses are noted in is the one the work lands in. */
  dls__capture_pin();
  /* Locked in address order (no two pieces of work can deadlock), until
   * the work is queued and its uses noted: the rule sees accesses in the
   * order their work reaches the streams. */
  if (x->n == 2) {
    if ((uintptr_t)x->a[0].b > (uintptr_t)x->a[1].b) {
      dls__access t = x->a[0];
      x->a[0] = x->a[1];
      x->a[1] = t;
    }
  } else if (x->n > 2) {
    sort_by_address(x->a, x->n);
  }
  /* The common case, the stream's own eager memory that no other stream
   * used: nothing to wait for, whether `s` captures or not, so while no
   * capture is known the driver is not asked (a foreign stream in a capture
   * nobody saw notes the use as eager; order_use makes up for that should
   * another stream use the memory in that capture). */
  bool own = atomic_load_explicit(&dls__captures_known, memory_order_acquire) == 0;
  for (int i = 0; i < x->n; i++) {
    dls__buffer *b = x->a[i].b;
    dls__spin_lock(&b->mu);
    own = own && b->nuses == 0 && b->cap_id == 0 && dls__same_stream(b->stream, s);
    x->a[i].party = DLS__PARTY_ALLOC; /* read after the end by dls__buffer_export_begin */
  }
  x->own = own;
  if (DLS__LIKELY(own))
    return DLS_OK;
  dls_status_t st = access_begin_parties(x, s);
  if (st != DLS_OK)
    dls__capture_unpin();
  return st;
}

/* One buffer's part of dls__access_begin, locked: its waits, and the party the use is (*out_party), with the entry
 * noting it will need made now. Leaves b->mu locked, whatever it returns. */
DLS__HOT_INLINE dls_status_t dls__access_begin_one(dls__buffer *b, dls__stream *s, uint64_t cap, int mode,
                                                    int *out_party) {
  *out_party = DLS__PARTY_ALLOC;
  /* The allocation stream is the only party, and the use is on it (nothing to wait for). */
  if (DLS__LIKELY(b->nuses == 0 && b->cap_id == cap && dls__same_stream(b->stream, s)))
    return DLS_OK;
  if (DLS__UNLIKELY(b->cap_id != 0 && b->cap_id != cap) && !owner_replayed(&b->owner))
    return dls__fail(DLS_ERR_STATE,
                     "the memory was allocated in capture %llu and is its graph's: outside that capture it holds a "
                     "replay's output, so it may be used only once the graph has been replayed (it has not, or the "
                     "capture was discarded); nothing was queued",
                     (unsigned long long)b->cap_id);
  int me = dls__party_of(b, s, cap);
  DLS__TRY(order_use(b, s, cap, me, mode));
  /* The entry a use needs is made before the work is queued, so noting the use afterwards needs no memory. An eager
   * use by the allocation stream of owned memory others use records its mark (dls__access_end), made now. */
  if (me == DLS__PARTY_NONE)
    DLS__TRY(dls__use_entry(b, s, cap, &me));
  else if (me == DLS__PARTY_ALLOC && cap == 0 && !b->borrowed)
    DLS__TRY(dls__stream_mark(b->stream, &(void *){NULL})); /* its own (`s` may be another handle of its stream) */
  *out_party = me;
  return DLS_OK;
}

/* The rest of dls__access_begin, where some buffer is not the stream's own
 * alone: the capture state, and each buffer's waits and use entry. */
static DLS__NOINLINE dls_status_t access_begin_parties(dls__accesses *x, dls__stream *s) {
  (void)dls__stream_capture(s, &x->cap);
  for (int i = 0; i < x->n; i++) {
    dls_status_t st = dls__access_begin_one(x->a[i].b, s, x->cap, x->a[i].mode, &x->a[i].party);
    if (st != DLS_OK) {
      dls__unlock_all(x, x->n);
      return st;
    }
  }
  return DLS_OK;
}

dls_status_t dls__access_end(dls__accesses *x, bool queued) {
  if (DLS__LIKELY(x->own && queued)) {
    /* The stream's own memory alone: nothing to note. Its allocation stream
     * is the only party, and so its writer (its bit is cleared only by
     * another party's write): another stream's use waits for it, read or
     * write, whatever it did since. */
    dls__unlock_all(x, x->n);
    dls__capture_unpin();
    return DLS_OK;
  }
  dls_status_t st = access_end_parties(x, queued);
  dls__capture_unpin();
  return st;
}

/* The rest of dls__access_end: each use's record and role. */
static DLS__NOINLINE dls_status_t access_end_parties(dls__accesses *x, bool queued) {
  if (DLS__UNLIKELY(!queued)) {
    dls__unlock_all(x, x->n);
    return DLS_OK;
  }
  dls_status_t first = DLS_OK;
  /* The stream's mark, recorded once for the piece of work (when a buffer needs it), and how that went. */
  void *marked = NULL;
  dls_status_t marked_st = DLS_OK;
  const dls__backend *be = x->s->dev->be;
  for (int i = 0; i < x->n; i++) {
    dls__buffer *b = x->a[i].b;
    int me = x->a[i].party;
    if (DLS__LIKELY(me == DLS__PARTY_ALLOC && b->nuses == 0)) {
      dls__spin_unlock(&b->mu); /* the allocation stream, the only party and its writer: nothing to note */
      continue;
    }
    if (me == DLS__PARTY_ALLOC) {
      /* Others use the memory: the allocation stream's eager use of owned
       * memory is marked like theirs, so that a crossing from it waits on
       * the mark (a failed record: on a record made then, as before). */
      void *ev = atomic_load_explicit(&b->stream->mark, memory_order_acquire); /* recorded on its native */
      if (x->cap == 0 && !b->borrowed && ev != NULL && marked != ev) {
        marked = ev;
        marked_st = be->event_record(be, x->s->dev->id, ev, x->s->native);
      }
      b->alloc_marked = x->cap == 0 && !b->borrowed && ev != NULL && marked_st == DLS_OK;
    } else {
      /* Re-recording moves the marker past this use; the earlier uses on
       * the same stream are before it in stream order. A failed record is
       * made again before anything waits on it (dls__use_refresh). */
      dls__use *u = &b->uses[me];
      void *ev = dls__use_event(u);
      dls_status_t st = marked_st;
      if (ev != marked)
        st = be->event_record(be, x->s->dev->id, ev, x->s->native);
      if (u->event == NULL) {
        marked = ev;
        marked_st = st;
      }
      u->stale = st != DLS_OK;
      u->recorded |= st == DLS_OK;
      u->owed &= u->stale; /* a record made after the work pays what was owed */
      if (st != DLS_OK && first == DLS_OK)
        first = st;
    }
    dls__note_use(b, x->cap, me, x->a[i].mode);
    dls__stream *gone[DLS__SPILL_FROM];
    int ngone = DLS__UNLIKELY(b->record) && (b->eager_uses & ~(b->writers | b->readers | b->exporting)) != 0
                    ? forget_roleless(b, gone)
                    : 0;
    dls__spin_unlock(&b->mu);
    while (ngone > 0)
      dls__stream_unref(gone[--ngone]);
  }
  return first;
}

/* ---- single accesses ---- */

dls_status_t dls__buffer_access(dls__buffer *b, dls__stream *s, int mode, bool order) {
  dls__accesses x; /* not zeroed: its entries are written as they are added */
  x.n = 0;
  dls__access_add(&x, b, mode);
  if (!order) {
    /* Work already queued on `s` (a use dlstream did not see): noted only. */
    x.s = s;
    x.own = false;
    dls__capture_pin(); /* as dls__access_begin's, until dls__access_end */
    (void)dls__stream_capture(s, &x.cap);
    dls__spin_lock(&b->mu);
    int me = dls__party_of(b, s, x.cap);
    dls_status_t st = me == DLS__PARTY_NONE ? dls__use_entry(b, s, x.cap, &me) : DLS_OK;
    if (st != DLS_OK) {
      dls__spin_unlock(&b->mu);
      dls__capture_unpin();
      return st;
    }
    x.a[0].party = me;
    x.a[0].mode |= DLS__ACCESS_DECLARED; /* a party more: it never takes the place of a writer no wait covered */
    return dls__access_end(&x, true);
  }
  DLS__TRY(dls__access_begin(&x, s));
  return dls__access_end(&x, true);
}

dls_status_t dls__buffer_mark(dls__buffer *b, dls__stream *s) { return dls__buffer_mark_by(b, s, NULL); }

dls_status_t dls__buffer_mark_by(dls__buffer *b, dls__stream *s, const void *recorded) {
  uint64_t cap = 0;
  (void)dls__stream_capture(s, &cap);
  dls__spin_lock(&b->mu);
  int k;
  dls_status_t st = dls__use_entry(b, s, cap, &k); /* its entry, made when missing */
  if (st == DLS_OK) {
    dls__use *u = &b->uses[k];
    /* A failed record leaves the use stale: the release records it again
     * (dls__use_refresh) before anything waits on it, and only if that
     * fails too does it wait for the stream on the host. */
    void *ev = dls__use_event(u);
    if (recorded == NULL || cap != 0 || u->event != NULL || ev != recorded || u->stale)
      u->stale = s->dev->be->event_record(s->dev->be, s->dev->id, ev, s->native) != DLS_OK;
    u->recorded |= !u->stale;
    u->owed &= u->stale; /* a record made after the work pays what was owed */
  }
  dls__spin_unlock(&b->mu);
  return st;
}

dls_status_t dls__buffer_export_begin(dls__buffer *b, dls__stream *consumer) {
  dls__accesses x; /* not zeroed: its entries are written as they are added */
  x.n = 0;
  dls__access_add(&x, b, DLS_ACCESS_WRITE);
  DLS__TRY(dls__access_begin(&x, consumer));
  dls_status_t st = dls__access_end(&x, true);
  dls__spin_lock(&b->mu);
  if (x.a[0].party != DLS__PARTY_ALLOC)
    b->uses[x.a[0].party].exports++;
  else
    b->alloc_exports++;
  b->exporting |= dls__party_bit(x.a[0].party);
  dls__spin_unlock(&b->mu);
  return st;
}

void dls__buffer_export_end(dls__buffer *b, dls__stream *consumer) {
  uint64_t cap = 0;
  (void)dls__stream_capture(consumer, &cap);
  dls__spin_lock(&b->mu);
  int me = dls__party_of(b, consumer, cap);
  for (int k = 0; k < b->nuses && me == DLS__PARTY_NONE; k++) /* the consumer's capture may be over: its eager entry */
    if (b->uses[k].exports > 0 && dls__same_stream(b->uses[k].stream, consumer))
      me = k;
  if (me == DLS__PARTY_NONE && b->alloc_exports > 0 && dls__same_stream(b->stream, consumer))
    me = DLS__PARTY_ALLOC;
  if (me == DLS__PARTY_ALLOC && b->alloc_exports > 0) {
    /* As below, for the allocation stream; what it queued while it held
     * the export was not seen, so a crossing from it waits on a record
     * made then, not on its mark. */
    if (--b->alloc_exports == 0)
      b->exporting &= ~(uint64_t)1;
    b->alloc_marked = false;
    bool ordered = cap == b->cap_id && order_use(b, consumer, cap, DLS__PARTY_ALLOC, DLS_ACCESS_WRITE) == DLS_OK;
    dls__note_use(b, b->cap_id, DLS__PARTY_ALLOC, ordered ? DLS_ACCESS_WRITE : DLS_ACCESS_WRITE | DLS__ACCESS_DECLARED);
  } else if (me >= 0 && b->uses[me].exports > 0) {
    /* What the consumer queued while it held the export: its last write.
     * Other streams may have used the buffer meanwhile (they waited for the
     * consumer): it becomes the last writer only once it waited for them in
     * turn; where it cannot (its capture state changed), it is one more
     * writer and the others keep their roles. */
    dls__use *u = &b->uses[me];
    if (--u->exports == 0 && me < DLS__SPILL_FROM) /* a spilled party's bit stays (others may hold exports) */
      b->exporting &= ~dls__party_bit(me);
    dls__device *d = consumer->dev;
    bool ordered = cap == u->cap_id && order_use(b, consumer, cap, me, DLS_ACCESS_WRITE) == DLS_OK;
    /* A record made in another capture state than the use's would move its
     * event (an eager one: the stream's mark) into or out of a capture: the
     * use is left stale, recorded again (or refused) before any wait on it. */
    u->stale = cap != u->cap_id || d->be->event_record(d->be, d->id, dls__use_event(u), consumer->native) != DLS_OK;
    u->recorded |= !u->stale;
    u->owed &= u->stale; /* a record made after the work pays what was owed */
    dls__note_use(b, u->cap_id, me, ordered ? DLS_ACCESS_WRITE : DLS_ACCESS_WRITE | DLS__ACCESS_DECLARED);
  }
  dls__spin_unlock(&b->mu);
}

/* ---- memory a capture used and did not allocate: its graph's replays (core/replay.c) use it ---- */

static void drop_held(void *obj) { dls__buffer_unref(obj); }

dls_status_t dls__buffer_hold_for_capture(dls__buffer *b, uint64_t cap) {
  if (atomic_load_explicit(&b->refs, memory_order_acquire) == 0)
    return DLS_OK; /* its release marks a use: nothing to keep */
  dls__buffer_ref(b);
  bool kept = false;
  dls_status_t st = dls__capture_keep(cap, b, drop_held, b->cap_id, &kept);
  if (!kept)
    dls__buffer_unref(b); /* the caller's reference remains */
  return st;
}

int dls__buffer_capture_mode(dls__buffer *b, uint64_t cap) {
  /* A write in the capture left its writer's bit on one of the capture's entries (a later write there moves
   * it, never clears it); a read only, readers. A use that was never queued left none. (A spilled entry's bit
   * may be another's: conservative.) */
  int mode = 0;
  dls__spin_lock(&b->mu);
  uint64_t in = dls__parties_in(b, cap) & ~(uint64_t)1;
  if (b->writers & in)
    mode |= DLS_ACCESS_WRITE;
  if (b->readers & in)
    mode |= DLS_ACCESS_READ;
  dls__spin_unlock(&b->mu);
  return mode;
}
