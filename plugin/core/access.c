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
 * The same state answers where a free goes (the end of this file): on the
 * allocation stream after every use has passed, on the deferred queue while
 * uses are pending, or with the graph that allocated it. */
#include <stdlib.h>
#include <string.h>

#include "core/access.h"
#include "core/buffer.h"
#include "core/capture.h"
#include "core/deferred.h"
#include "core/graph.h"
#include "core/wait.h"

/* A release waits on a marker per use: the uses a buffer keeps inline fit an entry's own markers. */
_Static_assert(DLS__USES_INLINE <= DLS__DEFERRED_MARKS_INLINE, "a buffer's inline uses fit a deferred entry");

/* The allocation stream, as a party. */
#define ALLOC (-1)
/* No party yet. */
#define NONE (-2)

/* The use entry of `s` in capture `in_cap` (0: eager), added with a pooled
 * event when missing. A use in a capture gets its own entry: re-recording an
 * eager use's event in a capture would lose the eager work it marks. b->mu
 * held. */
static dls_status_t use_entry(dls__buffer *b, dls__stream *s, uint64_t in_cap, int *out) {
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
  u->role = 0;
  u->stale = false;
  u->recorded = false;
  u->exports = 0;
  dls__stream_ref(s);
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
  u->recorded = true;
  return DLS_OK;
}

/* Who stream `s` in capture `cap` is to the buffer: ALLOC, an entry, or NONE. */
static int party_of(const dls__buffer *b, const dls__stream *s, uint64_t cap) {
  if (cap == b->cap_id && dls__same_stream(b->stream, s))
    return ALLOC;
  for (int i = 0; i < b->nuses; i++)
    if (b->uses[i].cap_id == cap && dls__same_stream(b->uses[i].stream, s))
      return i;
  return NONE;
}

static uint8_t *role_of(dls__buffer *b, int k) { return k == ALLOC ? &b->alloc_role : &b->uses[k].role; }

/* Makes `s` wait for party `k`'s work (b->mu held). */
static dls_status_t wait_for(dls__buffer *b, dls__stream *s, int k) {
  if (k == ALLOC) {
    dls__stream *a = b->stream;
    if (a->native == (void *)UINTPTR_MAX || dls__same_stream(a, s))
      return DLS_OK; /* memory no stream produced (latch flags) */
    return dls__stream_order(s, a);
  }
  dls__use *u = &b->uses[k];
  if (dls__same_stream(u->stream, s))
    return DLS_OK;
  if (u->exports > 0) /* a consumer holding an export may write at any time: whatever it queued so far */
    return dls__stream_order(s, u->stream);
  if (!u->recorded && !u->stale)
    return DLS_OK; /* its work was never queued (the launch failed): nothing to wait for */
  DLS__TRY(dls__use_refresh(u));
  return s->dev->be->stream_wait_event(s->dev->be, s->dev->id, s->native, dls__use_event(u));
}

/* The waits a use of `mode` on `s` (party `me` of capture `cap`) needs (b->mu held). */
static dls_status_t order_use(dls__buffer *b, dls__stream *s, uint64_t cap, int me, int mode) {
  if (DLS__UNLIKELY(atomic_load_explicit(&dls__hazards_off, memory_order_relaxed)))
    return DLS_OK;
  /* A borrowed buffer's producer is eager: a capturing stream cannot wait
   * for it, and silently skipping it would read before the producer. */
  if (b->borrowed && cap != b->cap_id && b->stream->native != (void *)UINTPTR_MAX &&
      !dls__same_stream(b->stream, s))
    return dls__capture_check_pair(s, cap, b->stream, b->cap_id);
  uint8_t mine = me == NONE ? 0 : *role_of(b, me);
  bool write = (mode & DLS_ACCESS_WRITE) != 0;
  int parties = b->nuses;
  for (int k = ALLOC; k < parties; k++) {
    if (k == me || (k == ALLOC ? b->cap_id : b->uses[k].cap_id) != cap)
      continue;
    uint8_t r = *role_of(b, k);
    /* The writer, unless `s` already waited for it (it reads since, or wrote it); the readers, for a write;
     * a consumer holding an export, always. */
    bool need = (r & DLS__ROLE_WRITER && !(mine & (DLS__ROLE_READER | DLS__ROLE_WRITER))) ||
                (write && (r & DLS__ROLE_READER)) || (k != ALLOC && b->uses[k].exports > 0);
    if (need)
      DLS__TRY(wait_for(b, s, k));
  }
  return DLS_OK;
}

/* What a use of `mode` by party `me` of capture `cap` leaves (b->mu held). */
static void note_use(dls__buffer *b, uint64_t cap, int me, int mode) {
  if (mode & DLS_ACCESS_WRITE) {
    if (b->cap_id == cap)
      b->alloc_role = 0;
    for (int k = 0; k < b->nuses; k++)
      if (b->uses[k].cap_id == cap)
        b->uses[k].role = 0;
    *role_of(b, me) = DLS__ROLE_WRITER;
  } else {
    *role_of(b, me) |= DLS__ROLE_READER;
  }
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

static void unlock_all(dls__accesses *x, int n) {
  for (int i = 0; i < n; i++)
    dls__spin_unlock(&x->a[i].b->mu);
}

dls_status_t dls__access_begin(dls__accesses *x, dls__stream *s) {
  x->s = s;
  x->cap = 0;
  (void)dls__stream_capture(s, &x->cap);
  /* Locked in address order (no two pieces of work can deadlock), until
   * the work is queued and its uses noted: the rule sees accesses in the
   * order their work reaches the streams. */
  if (x->n > 1)
    sort_by_address(x->a, x->n);
  for (int i = 0; i < x->n; i++)
    dls__spin_lock(&x->a[i].b->mu);
  for (int i = 0; i < x->n; i++) {
    dls__buffer *b = x->a[i].b;
    /* The common case: the allocation stream is the only party, and the use is on it (nothing to wait for). */
    if (DLS__LIKELY(b->nuses == 0 && b->cap_id == x->cap && dls__same_stream(b->stream, s))) {
      x->a[i].party = ALLOC;
      continue;
    }
    int me = party_of(b, s, x->cap);
    dls_status_t st = order_use(b, s, x->cap, me, x->a[i].mode);
    /* The entry a use needs is made before the work is queued, so noting
     * the use afterwards needs no memory. */
    if (st == DLS_OK && me == NONE)
      st = use_entry(b, s, x->cap, &me);
    if (st != DLS_OK) {
      unlock_all(x, x->n);
      return st;
    }
    x->a[i].party = me;
  }
  return DLS_OK;
}

dls_status_t dls__access_end(dls__accesses *x, bool queued) {
  if (DLS__UNLIKELY(!queued)) {
    unlock_all(x, x->n);
    return DLS_OK;
  }
  dls_status_t first = DLS_OK;
  void *marked = NULL; /* a stream mark this piece of work recorded already, and how that went */
  dls_status_t marked_st = DLS_OK;
  for (int i = 0; i < x->n; i++) {
    dls__buffer *b = x->a[i].b;
    int me = x->a[i].party;
    if (DLS__LIKELY(me == ALLOC && b->nuses == 0)) {
      /* The allocation stream, the only party: its role is all there is to note. */
      b->alloc_role = x->a[i].mode & DLS_ACCESS_WRITE ? DLS__ROLE_WRITER : b->alloc_role | DLS__ROLE_READER;
      dls__spin_unlock(&b->mu);
      continue;
    }
    if (me != ALLOC) {
      /* Re-recording moves the marker past this use; the earlier uses on
       * the same stream are before it in stream order. A failed record is
       * made again before anything waits on it (dls__use_refresh). */
      dls__use *u = &b->uses[me];
      void *ev = dls__use_event(u);
      dls_status_t st = marked_st;
      if (ev != marked) {
        const dls__backend *be = x->s->dev->be;
        st = be->event_record(be, x->s->dev->id, ev, x->s->native);
      }
      if (u->event == NULL) {
        marked = ev;
        marked_st = st;
      }
      u->stale = st != DLS_OK;
      u->recorded |= st == DLS_OK;
      if (st != DLS_OK && first == DLS_OK)
        first = st;
    }
    note_use(b, x->cap, me, x->a[i].mode);
    dls__spin_unlock(&b->mu);
  }
  return first;
}

/* ---- single accesses ---- */

dls_status_t dls__buffer_access(dls__buffer *b, dls__stream *s, int mode, bool order) {
  dls__accesses x = {.n = 0};
  dls__access_add(&x, b, mode);
  if (!order) {
    /* Work already queued on `s` (a use dlstream did not see): noted only. */
    x.s = s;
    (void)dls__stream_capture(s, &x.cap);
    dls__spin_lock(&b->mu);
    int me = party_of(b, s, x.cap);
    dls_status_t st = me == NONE ? use_entry(b, s, x.cap, &me) : DLS_OK;
    if (st != DLS_OK) {
      dls__spin_unlock(&b->mu);
      return st;
    }
    x.a[0].party = me;
    return dls__access_end(&x, true);
  }
  DLS__TRY(dls__access_begin(&x, s));
  return dls__access_end(&x, true);
}

dls_status_t dls__buffer_mark(dls__buffer *b, dls__stream *s) {
  uint64_t cap = 0;
  (void)dls__stream_capture(s, &cap);
  dls__spin_lock(&b->mu);
  int k;
  dls_status_t st = use_entry(b, s, cap, &k); /* its entry, made when missing */
  if (st == DLS_OK) {
    dls__use *u = &b->uses[k];
    /* A failed record leaves the use stale: the release records it again
     * (dls__use_refresh) before anything waits on it, and only if that
     * fails too does it wait for the stream on the host. */
    u->stale = s->dev->be->event_record(s->dev->be, s->dev->id, dls__use_event(u), s->native) != DLS_OK;
    u->recorded |= !u->stale;
  }
  dls__spin_unlock(&b->mu);
  return st;
}

dls_status_t dls__buffer_export_begin(dls__buffer *b, dls__stream *consumer) {
  dls__accesses x = {.n = 0};
  dls__access_add(&x, b, DLS_ACCESS_WRITE);
  DLS__TRY(dls__access_begin(&x, consumer));
  dls_status_t st = dls__access_end(&x, true);
  if (x.a[0].party != ALLOC) {
    dls__spin_lock(&b->mu);
    b->uses[x.a[0].party].exports++;
    dls__spin_unlock(&b->mu);
  }
  return st;
}

void dls__buffer_export_end(dls__buffer *b, dls__stream *consumer) {
  uint64_t cap = 0;
  (void)dls__stream_capture(consumer, &cap);
  dls__spin_lock(&b->mu);
  int me = party_of(b, consumer, cap);
  for (int k = 0; k < b->nuses && me == NONE; k++) /* the consumer's capture may be over: its eager entry */
    if (b->uses[k].exports > 0 && dls__same_stream(b->uses[k].stream, consumer))
      me = k;
  if (me >= 0 && b->uses[me].exports > 0) {
    /* What the consumer queued while it held the export: its last write.
     * Other streams may have used the buffer meanwhile (they waited for the
     * consumer): it becomes the last writer only once it waited for them in
     * turn; where it cannot (its capture state changed), it is one more
     * writer and the others keep their roles. */
    dls__use *u = &b->uses[me];
    u->exports--;
    dls__device *d = consumer->dev;
    bool ordered = cap == u->cap_id && order_use(b, consumer, cap, me, DLS_ACCESS_WRITE) == DLS_OK;
    u->stale = d->be->event_record(d->be, d->id, dls__use_event(u), consumer->native) != DLS_OK;
    u->recorded |= !u->stale;
    if (ordered)
      note_use(b, u->cap_id, me, DLS_ACCESS_WRITE);
    else
      u->role = DLS__ROLE_WRITER;
  }
  dls__spin_unlock(&b->mu);
}

/* ---- where a free goes: the stream-ordered deallocation rule (deferred.c holds the releases that wait) ---- */

/* Whether every recorded use has already completed (a cheap query each).
 * Never asked while a capture forbids it, and never of a captured record. */
static bool uses_complete(dls__buffer *b) {
  if (!dls__capture_polling_allowed())
    return false;
  dls__relaxed r;
  dls__relaxed_enter(&r, b->dev);
  bool complete = true;
  for (int i = 0; i < b->nuses && complete; i++) {
    int done = 0;
    dls__device *ud = b->uses[i].stream->dev;
    complete =
        b->uses[i].cap_id == 0 && ud->be->event_query(ud->be, ud->id, dls__use_event(&b->uses[i]), &done) == DLS_OK &&
        done;
  }
  dls__relaxed_leave(&r);
  return complete;
}

/* What a release that waits later waits on for an eager use: its stream's
 * mark may be recorded again by later work (waiting on more, for longer),
 * so an event of its own is recorded on that stream now (conservative);
 * when none can be (the stream captures now, or the record fails), the
 * mark itself, kept with a reference to its stream. */
static dls__marker eager_marker(const dls__use *u) {
  dls__stream *s = u->stream;
  dls__device *d = s->dev;
  uint64_t cap;
  void *ev;
  if (u->event != NULL)
    return (dls__marker){d, u->event, NULL};
  if (dls__stream_capture(s, &cap) == DLS__CAPTURE_NONE && dls__event_pool_get(d, &ev) == DLS_OK) {
    if (d->be->event_record(d->be, d->id, ev, s->native) == DLS_OK)
      return (dls__marker){d, ev, NULL};
    dls__event_pool_put(d, ev);
  }
  dls__stream_ref(s);
  return (dls__marker){d, dls__use_event(u), s};
}

/* Sorts a buffer's use events: eager ones first (to wait on), captured ones
 * after; returns the eager count and the capture of a captured one. */
static int sort_uses(dls__buffer *b, dls__marker *marks, uint64_t *out_cap) {
  int n = 0, k = b->nuses;
  *out_cap = 0;
  for (int i = 0; i < b->nuses; i++) {
    dls__marker m = {b->uses[i].stream->dev, b->uses[i].event, NULL};
    if (b->uses[i].cap_id == 0) {
      marks[n++] = eager_marker(&b->uses[i]);
    } else {
      marks[--k] = m;
      *out_cap = b->uses[i].cap_id;
    }
  }
  return n;
}

/* Returns a use's own event to its device's pool (an eager use's is its stream's mark). */
static void use_done(const dls__use *u) {
  if (u->event != NULL)
    dls__event_pool_put_after(u->stream->dev, u->event, u->cap_id);
}

/* Hands the use events to the deferred queue, which runs `release` once the
 * eager ones completed and capture `cap` is over. A borrowed buffer's entry
 * was made with it, so deferring its release needs no memory (unless more
 * streams used it than the entry holds inline); out of memory, waits here
 * rather than release early. */
static void defer_release(dls__buffer *b, uint64_t cap, dls_release_fn release, void *user_data) {
  dls__deferred *d = b->spare != NULL ? b->spare : dls__deferred_entry();
  b->spare = NULL;
  dls__marker *marks = d != NULL ? dls__deferred_marks(d, b->nuses) : NULL;
  if (marks == NULL) {
    for (int i = 0; i < b->nuses; i++) {
      if (b->uses[i].cap_id == 0)
        dls__event_wait(b->uses[i].stream->dev, dls__use_event(&b->uses[i]));
      use_done(&b->uses[i]);
    }
    dls__deferred_entry_free(d);
    if (release)
      release(user_data);
    return;
  }
  uint64_t used_cap = 0;
  int nwait = sort_uses(b, marks, &used_cap);
  dls__deferred_enqueue(d, marks, nwait, b->nuses, cap != 0 ? cap : used_cap, release, user_data);
}

/* Owned memory whose free must wait for more than its stream's order: it
 * runs from the deferred queue. */
typedef struct dls__late_free {
  dls__device *dev;
  void *ptr;
  dls__stream *stream; /* ref held */
} dls__late_free;

static void late_free(void *user_data) {
  dls__late_free *f = user_data;
  dls__mem_free(f->dev, f->ptr, f->stream);
  dls__stream_unref(f->stream);
  dls__free(f);
}

/* Frees `ptr` on `s` once the buffer's eager uses completed and capture
 * `cap` (0: none) is over, taking the use events. false: no memory for that
 * (nothing was done). */
static bool free_later(dls__buffer *b, void *ptr, dls__stream *s, uint64_t cap) {
  dls__late_free *f = dls__malloc(sizeof *f);
  if (f == NULL)
    return false;
  f->dev = s->dev;
  f->ptr = ptr;
  f->stream = s;
  dls__stream_ref(s);
  defer_release(b, cap, late_free, f);
  return true;
}

/* The allocation stream could not be made to wait on a use: the free waits
 * for the use events in the deferred queue, or here when out of memory. */
static void free_unordered(dls__buffer *b, void *ptr, dls__stream *s) {
  if (free_later(b, ptr, s, 0))
    return;
  for (int i = 0; i < b->nuses; i++) {
    if (b->uses[i].cap_id == 0)
      dls__event_wait(b->uses[i].stream->dev, dls__use_event(&b->uses[i]));
    use_done(&b->uses[i]);
  }
  dls__mem_free(s->dev, ptr, s);
}

/* Frees owned memory by the rule; nothing here blocks the host. */
static void release_owned(dls__buffer *b, int a_status, uint64_t a_cap) {
  dls__device *dev = b->dev;
  dls__stream *a = b->stream;
  if (b->cap_id != 0 && !(a_status == DLS__CAPTURE_ACTIVE && a_cap == b->cap_id)) {
    /* A graph allocation whose capture is over: its graph frees it. Should
     * dlstream still know the capture (the driver could not say that a
     * stream that joined it still captures), the memory is left to it. */
    if (b->graph == NULL)
      dls__capture_alloc_orphan(b->cap_id, &b->graph);
    dls__graph *gr = b->graph;
    b->graph = NULL;
    dls__stream *last = gr != NULL ? dls__graph_release_output(gr, b->dev, b->ptr, b->uses, b->nuses) : NULL;
    if (last != NULL) {
      free_unordered(b, b->ptr, last);
      dls__stream_unref(last);
      return;
    }
    for (int i = 0; i < b->nuses; i++)
      use_done(&b->uses[i]);
    return;
  }
  if (b->cap_id == 0 && a_status != DLS__CAPTURE_NONE) {
    if (free_later(b, b->ptr, a, a_cap))
      return;
    (void)dev->be->stream_synchronize(dev->be, dev->id, a->native); /* fails while capturing: the memory then leaks */
  }
  /* Eager memory waits on eager uses; memory freed in its own capture waits on that capture's uses. */
  bool ordered = true;
  for (int i = 0; i < b->nuses; i++)
    if (b->uses[i].cap_id == b->cap_id)
      ordered &= dev->be->stream_wait_event(dev->be, dev->id, a->native, dls__use_event(&b->uses[i])) == DLS_OK;
  if (!ordered && b->ptr != NULL) {
    if (b->cap_id == 0) {
      free_unordered(b, b->ptr, a);
    } else {
      /* Not freed in the capture: its graph owns the memory, like an output's. */
      dls__capture_alloc_orphan(b->cap_id, &b->graph);
      for (int i = 0; i < b->nuses; i++)
        use_done(&b->uses[i]);
    }
    return;
  }
  for (int i = 0; i < b->nuses; i++)
    use_done(&b->uses[i]);
  if (b->ptr != NULL)
    dls__mem_free(dev, b->ptr, a);
  if (b->cap_id != 0)
    dls__capture_alloc_remove(b->cap_id, &b->graph);
}

/* Entries whose event was never recorded (their work was never queued)
 * have nothing to wait for: their events go back to the pool unasked. */
static void drop_unrecorded(dls__buffer *b) {
  int n = 0;
  for (int i = 0; i < b->nuses; i++) {
    if (b->uses[i].recorded || b->uses[i].stale) {
      b->uses[n++] = b->uses[i];
    } else {
      use_done(&b->uses[i]);
      dls__stream_unref(b->uses[i].stream);
    }
  }
  b->nuses = n;
}

/* The last reference is gone: apply the rule. Never blocks the host. */
static void buffer_release_rule(dls__buffer *b) {
  drop_unrecorded(b);
  dls__device *dev = b->dev;
  dls__stream *a = b->stream;
  int idle = 1;
  if (b->borrowed && b->release_unordered && b->release != NULL && a->native != (void *)UINTPTR_MAX &&
      dls__capture_polling_allowed() && dev->be->stream_query(dev->be, dev->id, a->native, &idle) == DLS_OK && !idle &&
      dls__buffer_mark(b, a) != DLS_OK)
    dev->be->stream_synchronize(dev->be, dev->id, a->native); /* no memory to defer: wait rather than free early */
  /* A use whose latest record failed is recorded again now, covering its
   * work; failing that, its stream is waited for rather than free early. */
  for (int i = 0; i < b->nuses; i++) {
    dls__stream *us = b->uses[i].stream;
    if (dls__use_refresh(&b->uses[i]) != DLS_OK && b->uses[i].cap_id == 0)
      (void)us->dev->be->stream_synchronize(us->dev->be, us->dev->id, us->native);
  }
  if (!b->borrowed) {
    uint64_t a_cap = 0;
    int a_status = dls__stream_capture(a, &a_cap);
    release_owned(b, a_status, a_cap);
  } else if (b->release == NULL || b->nuses == 0 || uses_complete(b)) {
    /* No release to hold back: the use events go back to the pool. */
    for (int i = 0; i < b->nuses; i++)
      use_done(&b->uses[i]);
    if (b->release)
      b->release(b->user_data);
  } else {
    defer_release(b, 0, b->release, b->user_data);
  }
  /* The events carry the ordering now: the use streams' records may go. */
  for (int i = 0; i < b->nuses; i++)
    dls__stream_unref(b->uses[i].stream);
  dls__stream_unref(a);
  if (b->uses != b->uses_inline)
    dls__free(b->uses);
  dls__deferred_entry_free(b->spare); /* not needed: released at once */
  dls__obj_free(DLS__OBJ_BUFFER, b);
}

/* Where the last reference's free goes. The common case first: owned memory
 * used on its own stream only, all outside captures, is freed on that stream
 * with nothing to wait for. */
void dls__buffer_release(dls__buffer *b) {
  dls__stream *a = b->stream;
  uint64_t a_cap;
  if (DLS__UNLIKELY(b->borrowed || b->nuses != 0 || b->cap_id != 0) ||
      DLS__UNLIKELY(dls__stream_capture(a, &a_cap) != DLS__CAPTURE_NONE)) {
    buffer_release_rule(b);
    return;
  }
  if (b->ptr != NULL)
    dls__mem_free(b->dev, b->ptr, a);
  dls__stream_unref(a);
  dls__obj_free(DLS__OBJ_BUFFER, b);
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
  /* A write in the capture left its writer's role on one of the capture's entries (a later write there moves
   * it, never clears it); a read only, readers. A use that was never queued left none. */
  int mode = 0;
  dls__spin_lock(&b->mu);
  for (int k = 0; k < b->nuses; k++) {
    if (b->uses[k].cap_id != cap)
      continue;
    if (b->uses[k].role & DLS__ROLE_WRITER)
      mode |= DLS_ACCESS_WRITE;
    if (b->uses[k].role & DLS__ROLE_READER)
      mode |= DLS_ACCESS_READ;
  }
  dls__spin_unlock(&b->mu);
  return mode;
}
