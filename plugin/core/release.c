/* SPDX-License-Identifier: Apache-2.0 */
/* A buffer's references, and where its free goes once the last one is gone, answered from its use state
 * (access.c): on the allocation stream after every use has passed, on the deferred queue while uses are pending,
 * or with the graph that allocated it. */
#include <stdlib.h>

#include "core/cache.h"
#include "core/deferred.h"
#include "core/exported.h"
#include "core/graph.h"
#include "core/ranges.h"
#include "core/release.h"

/* A release waits on a marker per use: the uses a buffer keeps inline fit an entry's own markers. */
_Static_assert(DLS__USES_INLINE <= DLS__DEFERRED_MARKS_INLINE, "a buffer's inline uses fit a deferred entry");

/* deferred.c holds the releases that wait. */

bool dls__buffer_uses_complete(dls__buffer *b, bool captured_done) {
  if (!dls__capture_polling_allowed())
    return false;
  dls__relaxed r;
  dls__relaxed_enter(&r, b->dev);
  bool complete = true;
  for (int i = 0; i < b->nuses && complete; i++) {
    int done = 0;
    dls__device *ud = b->uses[i].stream->dev;
    if (b->uses[i].cap_id != 0)
      complete = captured_done;
    else if (b->uses[i].owed) /* its mark owed: the record, not yet made, is what says the work passed */
      complete = false;
    else
      complete = ud->be->event_query(ud->be, ud->id, dls__use_event(&b->uses[i]), &done) == DLS_OK && done;
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
  if (b->entered) /* an import: it left the registry of foreign memory; a later import of its bytes waits here */
    dls__deferred_range(d, b->dev->device, (uintptr_t)b->ptr, dls__ranges_end((uintptr_t)b->ptr, b->size));
  dls__deferred_enqueue(d, marks, nwait, b->nuses, cap != 0 ? cap : used_cap, release, user_data);
}

/* Frees `ptr` on `s` once the buffer's eager uses completed and capture
 * `cap` (0: none) is over, taking the use events. false: no memory for that
 * (nothing was done). */
static bool free_later(dls__buffer *b, void *ptr, dls__stream *s, uint64_t cap) {
  void *f = dls__late_free_new(s->dev, ptr, s, b->cached ? b->size : 0);
  if (f == NULL)
    return false;
  defer_release(b, cap, dls__late_free, f);
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
  if (!b->cached || !dls__cache_put(s, ptr, b->size))
    dls__mem_free_eager(s->dev, ptr, s);
}

/* What a pinned release leaves for after its pin (a last reference may run a release callback). */
typedef struct dls__after_pin {
  struct dls__graph *graph; /* the buffer's reference on its graph */
  dls__stream *stream;      /* a reference on a stream */
} dls__after_pin;

/* Frees owned memory by the rule, pinned (the capture state `a_status`,
 * `a_cap` of the allocation stream was read in the same pin); nothing here
 * blocks the host. */
static void release_owned(dls__buffer *b, int a_status, uint64_t a_cap, dls__after_pin *after) {
  dls__device *dev = b->dev;
  dls__stream *a = b->stream;
  if (b->cap_id != 0 && !(a_status == DLS__CAPTURE_ACTIVE && a_cap == b->cap_id)) {
    /* A graph allocation whose capture is over: its graph frees it. Should
     * dlstream still know the capture (the driver could not say that a
     * stream that joined it still captures), the memory is left to it. */
    if (b->owner.graph == NULL)
      dls__capture_alloc_orphan(b->cap_id, &b->owner);
    dls__graph *gr = b->owner.graph;
    b->owner = (dls__graph_owner){NULL, NULL};
    dls__stream *last = gr != NULL ? dls__graph_release_output(gr, b->dev, b->ptr, b->uses, b->nuses) : NULL;
    after->graph = gr;
    if (last != NULL) {
      free_unordered(b, b->ptr, last);
      after->stream = last;
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
      dls__capture_alloc_orphan(b->cap_id, &b->owner);
      for (int i = 0; i < b->nuses; i++)
        use_done(&b->uses[i]);
    }
    return;
  }
  for (int i = 0; i < b->nuses; i++)
    use_done(&b->uses[i]);
  /* `a` waits for every use: from here the memory is free in its order, for its cache too. */
  if (b->ptr != NULL && !(b->cached && dls__cache_put(a, b->ptr, b->size)))
    dls__mem_free(dev, b->ptr, a);
  if (b->cap_id != 0)
    dls__capture_alloc_remove(b->cap_id, &b->owner);
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
    /* The capture state read and the free (or its deferral, or its graph's) in one pin: a capture begun or
     * ended meanwhile would free eager memory in a graph, or graph memory eagerly. */
    dls__after_pin after = {NULL, NULL};
    dls__capture_pin();
    uint64_t a_cap = 0;
    int a_status = dls__stream_capture(a, &a_cap);
    release_owned(b, a_status, a_cap, &after);
    dls__capture_unpin();
    if (after.stream != NULL)
      dls__stream_unref(after.stream);
    if (after.graph != NULL)
      dls__graph_unref(after.graph);
  } else if (b->release == NULL || b->nuses == 0 || dls__buffer_uses_complete(b, false)) {
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
 * with nothing to wait for: into its cache (no pin, no capture question: the
 * cache hands it out again only to eager work), else to the driver. */
static void buffer_release(dls__buffer *b) {
  dls__stream *a = b->stream;
  if (DLS__UNLIKELY(b->borrowed || b->nuses != 0 || b->cap_id != 0)) {
    buffer_release_rule(b);
    return;
  }
  if (DLS__LIKELY(b->cached) && DLS__LIKELY(dls__cache_put(a, b->ptr, b->size))) {
    dls__stream_unref(a);
    dls__obj_free(DLS__OBJ_BUFFER, b);
    return;
  }
  /* Asked and freed in one pin: a capture begun in between would take the free of eager memory into its graph. */
  dls__capture_pin();
  uint64_t a_cap;
  bool eager = dls__stream_capture(a, &a_cap) == DLS__CAPTURE_NONE;
  if (DLS__LIKELY(eager) && b->ptr != NULL)
    dls__mem_free(b->dev, b->ptr, a);
  dls__capture_unpin();
  if (DLS__UNLIKELY(!eager)) {
    buffer_release_rule(b);
    return;
  }
  dls__stream_unref(a);
  dls__obj_free(DLS__OBJ_BUFFER, b);
}

void dls__buffer_ref(dls__buffer *b) { atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed); }

/* Marks the work queued so far on `s` as one that `b`'s release waits for (nothing when `s` is idle); out of
 * memory for the mark, waits for `s` here rather than release early. A stream capturing now cannot mark its eager
 * work: skipped. */
static void mark_stream(dls__buffer *b, dls__stream *s) {
  uint64_t cap = 0;
  int idle = 0;
  if (s->native == (void *)UINTPTR_MAX || dls__stream_capture(s, &cap) != DLS__CAPTURE_NONE ||
      (dls__capture_polling_allowed() &&
       s->dev->be->stream_query(s->dev->be, s->dev->id, s->native, &idle) == DLS_OK && idle))
    return;
  if (dls__buffer_mark(b, s) != DLS_OK)
    (void)s->dev->be->stream_synchronize(s->dev->be, s->dev->id, s->native);
}

/* An alias's release (the import's deleter) waits, as any borrowed buffer's, for the streams that used the memory:
 * its uses went to the exported buffer, so it waits for every stream that used that buffer (conservative), on the
 * work they queued so far. Eager uses only: the exported buffer's own release keeps its memory for a graph. Its use
 * entries are only ever appended while it lives, so they are walked by index, one at a time under its lock. */
static void mark_alias_uses(dls__buffer *b) {
  dls__buffer *of = b->alias;
  for (int i = -1;; i++) { /* -1: the allocation stream, which records no use entry */
    dls__spin_lock(&of->mu);
    bool more = i < of->nuses;
    dls__stream *s = NULL;
    if (i < 0 ? of->cap_id == 0 : more && of->uses[i].cap_id == 0) {
      s = i < 0 ? of->stream : of->uses[i].stream;
      dls__stream_ref(s);
    }
    dls__spin_unlock(&of->mu);
    if (!more)
      return;
    if (s != NULL) {
      mark_stream(b, s);
      dls__stream_unref(s);
    }
  }
}

void dls__buffer_unref(dls__buffer *b) {
  /* Holding the only reference, no one else can add one (a reference comes
   * from a holder or from the live handle): no locked instruction needed.
   * The registries of exported and foreign memory add references without
   * holding one, but only while the count is above 0: a buffer in one counts
   * down. */
  if ((atomic_load_explicit(&b->refs, memory_order_acquire) == 1 &&
       !atomic_load_explicit(&b->exported, memory_order_relaxed) && !b->entered) ||
      atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
    if (DLS__UNLIKELY(atomic_load_explicit(&b->exported, memory_order_relaxed)))
      dls__exported_remove(b, (uintptr_t)b->ptr);
    if (DLS__UNLIKELY(b->entered)) /* an import of foreign memory: its range goes with it */
      (void)dls__ranges_remove(&dls__foreign_ranges, b, (uintptr_t)b->ptr, 0);
    dls__buffer *alias = b->alias;
    if (DLS__UNLIKELY(alias != NULL) && b->release != NULL)
      mark_alias_uses(b);
    buffer_release(b);
    if (DLS__UNLIKELY(alias != NULL))
      dls__buffer_unref(alias);
  }
}
