/* SPDX-License-Identifier: Apache-2.0 */
/* The deferred release queue: borrowed memory whose uses on other streams
 * have not completed yet is released by a later call, never by a driver
 * callback and never while a capture forbids polling; and frees of eager
 * memory that wait for a capture on their stream to be over. */
#include <sched.h>
#include <stdlib.h>

#include "core/cache.h"
#include "core/capture.h"
#include "core/deferred.h"
#include "core/ranges.h"

struct dls__deferred {
  struct dls__deferred *next;
  dls__marker *marks; /* [0, nwait) eager records to wait on; [nwait, nevents) captured ones */
  int nwait, nevents;
  uint64_t cap_id; /* a capture that must be over first (0: none) */
  dls_release_fn release;
  void *user_data;
  DLDevice home;     /* a borrowed buffer's bytes [lo, hi) on `home` (hi 0: none), which a later import waits on */
  uintptr_t lo, hi;
  dls__marker marks_inline[DLS__DEFERRED_MARKS_INLINE]; /* `marks` when they fit */
};

static pthread_mutex_t g_deferred_mu = PTHREAD_MUTEX_INITIALIZER;
static dls__deferred *g_deferred;
_Atomic size_t dls__deferred_count;
_Atomic size_t dls__deferred_ranged;

dls__deferred *dls__deferred_entry(void) {
  dls__deferred *d = dls__obj_alloc(DLS__OBJ_DEFERRED, sizeof(dls__deferred));
  if (d != NULL)
    d->lo = d->hi = 0;
  return d;
}

void dls__deferred_range(dls__deferred *d, DLDevice home, uintptr_t lo, uintptr_t hi) {
  d->home = home;
  d->lo = lo;
  d->hi = hi;
}

/* Whether a queued entry's bytes overlap [lo, hi) on `home` (g_deferred_mu held). */
static bool overlapped(DLDevice home, uintptr_t lo, uintptr_t hi) {
  for (dls__deferred *d = g_deferred; d != NULL; d = d->next)
    if (d->hi > lo && hi > d->lo && dls__ranges_same_memory(d->home, home))
      return true;
  return false;
}

dls_status_t dls__deferred_order_after(DLDevice home, uintptr_t lo, uintptr_t hi, dls__stream *s) {
  if (atomic_load_explicit(&dls__deferred_ranged, memory_order_relaxed) == 0)
    return DLS_OK;
  pthread_mutex_lock(&g_deferred_mu);
  bool any = overlapped(home, lo, hi);
  pthread_mutex_unlock(&g_deferred_mu);
  if (!any)
    return DLS_OK;
  uint64_t cap = 0; /* asked with the queue let go: it may ask the driver */
  if (dls__stream_capture(s, &cap) != DLS__CAPTURE_NONE || cap != 0)
    return DLS_OK;
  const dls__backend *be = s->dev->be;
  dls_status_t st = DLS_OK;
  pthread_mutex_lock(&g_deferred_mu); /* the entries' events stay until they leave the queue, under it */
  for (dls__deferred *d = g_deferred; d != NULL && st == DLS_OK; d = d->next) {
    if (d->hi <= lo || hi <= d->lo || !dls__ranges_same_memory(d->home, home))
      continue;
    for (int i = 0; i < d->nwait && st == DLS_OK; i++)
      if (d->marks[i].dev->be == be)
        st = be->stream_wait_event(be, s->dev->id, s->native, d->marks[i].event);
  }
  pthread_mutex_unlock(&g_deferred_mu);
  return st;
}

void dls__deferred_entry_free(dls__deferred *d) {
  if (d != NULL)
    dls__obj_free(DLS__OBJ_DEFERRED, d);
}

dls__marker *dls__deferred_marks(dls__deferred *d, int n) {
  if (n <= DLS__DEFERRED_MARKS_INLINE)
    return d->marks_inline;
  return dls__malloc((size_t)n * sizeof(dls__marker));
}

void dls__deferred_enqueue(dls__deferred *d, dls__marker *marks, int nwait, int nevents, uint64_t cap_id,
                           dls_release_fn release, void *user_data) {
  d->marks = marks;
  d->nwait = nwait;
  d->nevents = nevents;
  d->cap_id = cap_id;
  d->release = release;
  d->user_data = user_data;
  pthread_mutex_lock(&g_deferred_mu);
  d->next = g_deferred;
  g_deferred = d;
  atomic_fetch_add(&dls__deferred_count, 1);
  if (d->hi != 0)
    atomic_fetch_add(&dls__deferred_ranged, 1);
  pthread_mutex_unlock(&g_deferred_mu);
}

static void deferred_finish(dls__deferred *d) {
  for (int i = 0; i < d->nevents; i++) {
    if (d->marks[i].keep != NULL)
      dls__stream_unref(d->marks[i].keep);
    else
      dls__event_pool_put(d->marks[i].dev, d->marks[i].event);
  }
  if (d->marks != d->marks_inline)
    dls__free(d->marks);
  if (d->release)
    d->release(d->user_data);
  dls__deferred_entry_free(d);
}

static bool deferred_ready(dls__deferred *d) {
  if (d->cap_id != 0 && dls__capture_underway(d->cap_id))
    return false;
  if (d->nwait == 0)
    return true;
  /* The capture mode is the calling thread's, and an entry's events are all
   * of one backend (its devices may differ): one switch serves them all. */
  dls__relaxed r;
  dls__relaxed_enter(&r, d->marks[0].dev);
  bool ready = true;
  for (int i = 0; i < d->nwait && ready; i++) {
    dls__device *dev = d->marks[i].dev;
    int done = 0;
    ready = dev->be->event_query(dev->be, dev->id, d->marks[i].event, &done) == DLS_OK && done;
  }
  dls__relaxed_leave(&r);
  return ready;
}

void dls__event_pool_put_after(dls__device *dev, void *event, uint64_t cap_id) {
  if (cap_id == 0) {
    dls__event_pool_put(dev, event);
    return;
  }
  /* Recorded in a capture underway: the driver ties the event to that
   * capture until it ends, and a record of it in another capture (another
   * thread's) could break both. It goes back to the pool once the capture is
   * over; without memory for that, it is destroyed (never reused). */
  dls__deferred *d = dls__deferred_entry();
  if (d == NULL) {
    (void)dev->be->event_destroy(dev->be, dev->id, event);
    return;
  }
  d->marks_inline[0] = (dls__marker){dev, event, NULL};
  dls__deferred_enqueue(d, d->marks_inline, 0, 1, cap_id, NULL, NULL);
}

size_t dls_deferred_poll(void) {
  if (atomic_load_explicit(&dls__deferred_count, memory_order_relaxed) == 0)
    return 0;
  /* Polling is dlstream's own initiative: never while a capture forbids it, nor inside a pin (capture.h), which
   * must not run release callbacks. */
  if (dls__pins.held > 0 || !dls__capture_polling_allowed())
    return atomic_load(&dls__deferred_count);
  dls__deferred *ready = NULL;
  pthread_mutex_lock(&g_deferred_mu);
  for (dls__deferred **pp = &g_deferred; *pp != NULL;) {
    dls__deferred *d = *pp;
    if (deferred_ready(d)) {
      *pp = d->next;
      d->next = ready;
      ready = d;
      atomic_fetch_sub(&dls__deferred_count, 1);
      if (d->hi != 0)
        atomic_fetch_sub(&dls__deferred_ranged, 1);
    } else {
      pp = &d->next;
    }
  }
  pthread_mutex_unlock(&g_deferred_mu);
  /* Release callbacks run unlocked: they may call back into dlstream. */
  while (ready != NULL) {
    dls__deferred *d = ready;
    ready = d->next;
    deferred_finish(d);
  }
  return atomic_load(&dls__deferred_count);
}

size_t dls_deferred_pending(void) { return atomic_load(&dls__deferred_count); }

void dls__event_wait(dls__device *dev, void *event) {
  if (dev->be->event_synchronize(dev->be, dev->id, event) == DLS_OK)
    return;
  int done = 0;
  while (dev->be->event_query(dev->be, dev->id, event, &done) == DLS_OK && !done)
    sched_yield();
}

void dls__deferred_drain(void) {
  for (;;) {
    pthread_mutex_lock(&g_deferred_mu);
    dls__deferred *d = g_deferred;
    if (d != NULL) {
      g_deferred = d->next;
      atomic_fetch_sub(&dls__deferred_count, 1);
      if (d->hi != 0)
        atomic_fetch_sub(&dls__deferred_ranged, 1);
    }
    pthread_mutex_unlock(&g_deferred_mu);
    if (d == NULL)
      return;
    for (int i = 0; i < d->nwait; i++)
      dls__event_wait(d->marks[i].dev, d->marks[i].event);
    deferred_finish(d);
  }
}

/* ---- frees of eager memory, kept out of captures ---- */

/* Owned memory whose free must wait for more than its stream's order: it runs from the queue. */
typedef struct late_free {
  dls__device *dev;
  void *ptr;
  dls__stream *stream; /* ref held */
  size_t cached_size;  /* the size asked of the cache when the block may go back to it; 0: the driver's */
} late_free;

void dls__late_free(void *late) {
  late_free *f = late;
  if (f->cached_size == 0 || !dls__cache_put(f->stream, f->ptr, f->cached_size))
    dls__mem_free_eager(f->dev, f->ptr, f->stream);
  dls__stream_unref(f->stream);
  dls__free(f);
}

void *dls__late_free_new(dls__device *dev, void *ptr, dls__stream *s, size_t cached_size) {
  late_free *f = dls__malloc(sizeof *f);
  if (f == NULL)
    return NULL;
  f->dev = dev;
  f->ptr = ptr;
  f->stream = s;
  f->cached_size = cached_size;
  dls__stream_ref(s);
  return f;
}

void dls__mem_free_eager(dls__device *dev, void *ptr, dls__stream *s) {
  dls__capture_pin();
  uint64_t cap = 0;
  if (dls__stream_capture(s, &cap) == DLS__CAPTURE_NONE) {
    dls__mem_free(dev, ptr, s);
    dls__capture_unpin();
    return;
  }
  /* `s` captures now (a capture begun since the free was decided): the free waits until that capture is over. */
  dls__deferred *d = dls__deferred_entry();
  void *f = d != NULL ? dls__late_free_new(dev, ptr, s, 0) : NULL;
  if (f != NULL)
    dls__deferred_enqueue(d, d->marks_inline, 0, 0, cap, dls__late_free, f);
  dls__capture_unpin();
  if (f == NULL) /* out of host memory, and the stream captures: the memory is lost rather than freed in a graph */
    dls__deferred_entry_free(d);
}
