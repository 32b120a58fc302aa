/* SPDX-License-Identifier: Apache-2.0 */
/* Events: owned or foreign markers recorded on streams. */
#include <stdlib.h>

#include "core/capture.h"
#include "core/deferred.h"

/* Calls on one event may race (two threads record it, one waits on it):
 * what they share is atomic, and a native is never freed while the event
 * lives, so a racing call uses a valid one. */
typedef struct dls__event {
  dls__device *dev;
  _Atomic(void *) native;
  unsigned flags;
  bool foreign;
  _Atomic bool recorded;   /* owned events: recorded at least once */
  _Atomic bool pooled;     /* owned, no flags, native never handed out: it came from the device's pool and goes back */
  _Atomic uint64_t cap_id; /* owned events: the capture of the latest record (0: eager) */
  void *displaced;         /* the pooled native dls_event_native replaced: back to the pool at the end */
  dls__spin mu;            /* dls_event_native's replacement of the native */
  uint64_t id;
} dls__event;

static inline void *native_of(dls__event *e) { return atomic_load_explicit(&e->native, memory_order_acquire); }


/* Inline in create (its hot path) and wrap. */
static DLS__HOT_INLINE dls_status_t event_publish(dls__device *dev, void *native, unsigned flags, bool foreign,
                                                  bool pooled, const char *call, dls_event_t *out) {
  dls__event *e = dls__obj_alloc(DLS__OBJ_EVENT, sizeof *e);
  if (e == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  e->dev = dev;
  atomic_init(&e->native, native);
  e->flags = flags;
  e->foreign = foreign;
  atomic_init(&e->recorded, false);
  atomic_init(&e->pooled, pooled);
  atomic_init(&e->cap_id, 0);
  e->displaced = NULL;
  atomic_flag_clear_explicit(&e->mu.f, memory_order_relaxed); /* unpublished yet: the table's store publishes it */
  e->id = dls__table_add(&dls__event_table, e);
  if (e->id == 0) {
    dls__obj_free(DLS__OBJ_EVENT, e);
    return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
  }
  out->id = e->id;
  return DLS_OK;
}

dls_status_t dls_event_create(DLDevice device, unsigned flags, dls_event_t *out_event) {
  static const char call[] = "dls_event_create";
  DLS__ENTER(call);
  DLS__OUT(call, out_event);
  const unsigned known = DLS_EVENT_TIMING | DLS_EVENT_BLOCKING_SYNC;
  if (flags & ~known)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(flags=0x%x): unknown flag bits 0x%x (known: DLS_EVENT_TIMING, DLS_EVENT_BLOCKING_SYNC)", call,
                     flags, flags & ~known);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  /* An event without flags is the kind the device pools for its own
   * markers: it is taken from the pool, and goes back on destroy. Its
   * native may hold an earlier record of the pool's, so until this event is
   * recorded, queries, waits and synchronizations treat it as never
   * recorded (complete) without asking the driver. */
  bool pooled = flags == DLS_EVENT_DEFAULT;
  void *native;
  st = pooled ? dls__event_pool_get(dev, &native) : dev->be->event_create(dev->be, dev->id, flags, &native);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(device=%s)", call, dev->name);
  st = event_publish(dev, native, flags, false, pooled, call, out_event);
  if (st != DLS_OK) {
    if (pooled)
      dls__event_pool_put(dev, native);
    else
      dev->be->event_destroy(dev->be, dev->id, native);
  }
  return st;
}

dls_status_t dls_event_wrap(DLDevice device, void *native, dls_event_t *out_event) {
  static const char call[] = "dls_event_wrap";
  DLS__ENTER(call);
  DLS__OUT(call, out_event);
  if (native == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(native=NULL): no event to wrap", call);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  if (dev->be->event_check != NULL) {
    st = dev->be->event_check(dev->be, dev->id, native);
    if (st != DLS_OK)
      return dls__fail_prefix(st, "%s(device=%s, native=%p)", call, dev->name, native);
  }
  /* Timing is unknown for a foreign event: elapsed time asks the driver. */
  return event_publish(dev, native, DLS_EVENT_TIMING, true, false, call, out_event);
}

dls_status_t dls_event_destroy(dls_event_t event) {
  static const char call[] = "dls_event_destroy";
  if (event.id == 0)
    return DLS_OK;
  DLS__ENTER(call);
  DLS__END(&dls__event_table, event, call, "event");
  return DLS_OK;
}

void dls__event_drop(void *obj) {
  dls__event *e = obj;
  void *native = native_of(e);
  if (atomic_load_explicit(&e->pooled, memory_order_relaxed))
    /* a pending record still completes; the next user re-records */
    dls__event_pool_put_after(e->dev, native, atomic_load_explicit(&e->cap_id, memory_order_relaxed));
  else if (!e->foreign)
    (void)e->dev->be->event_destroy(e->dev->be, e->dev->id, native);
  if (e->displaced != NULL)
    dls__event_pool_put(e->dev, e->displaced);
  dls__obj_free(DLS__OBJ_EVENT, e);
}
/* Events retire (base/handle.h): record and wait read them inside their pin without a hold (core/pin.h). */
dls__table dls__event_table =
    DLS__TABLE_RETIRING("event", DLS_HANDLE_EVENT, dls__event_drop, NULL, dls__pin_grace, dls__pin_grace_may_wait);

/* A record refused: the stream's capture was invalidated (the driver was not asked), or the driver refused. */
static DLS__NOINLINE DLS__COLD dls_status_t record_refused(const char *call, bool invalidated, dls_status_t st) {
  if (invalidated)
    return dls__fail(DLS_ERR_STATE, "%s: the stream's capture was invalidated; end it first", call);
  return dls__fail_prefix(st, "%s", call);
}

/* dls_event_record's work, inside its pin (pinned_on): the event and the stream read without a hold (the pin keeps
 * them).
 * The capture noted is the one the record lands in: a record taken for eager but made in a capture would be
 * queried eagerly, and its pooled native reused while the capture still holds it. */
static DLS__HOT_INLINE dls_status_t record_pinned(dls__event *e, dls__stream *s, const char *call) {
  if (DLS__UNLIKELY(e->dev != s->dev))
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: event is on %s but stream is on %s", call, e->dev->name,
                     s->dev->name);
  uint64_t cap = 0;
  bool invalidated = dls__stream_capture(s, &cap) == DLS__CAPTURE_INVALIDATED;
  dls_status_t st = DLS_ERR_STATE;
  if (DLS__LIKELY(!invalidated))
    st = e->dev->be->event_record(e->dev->be, e->dev->id, native_of(e), s->native);
  if (DLS__LIKELY(st == DLS_OK)) {
    atomic_store_explicit(&e->cap_id, cap, memory_order_relaxed);
    atomic_store_explicit(&e->recorded, true, memory_order_release);
    return DLS_OK;
  }
  return record_refused(call, invalidated, st);
}

/* A record's or a wait's frame: the stream and the event looked up and the work done inside the pin, which keeps
 * both (their tables retire: base/handle.h). Where the pin cannot keep them (dls__pinned_get), they are held, and
 * the holds end after the unpin (a stream's last hold may end its captures and release what keeps its native:
 * never inside a pin). A default stream's reserved handle is resolved before the pin (its first use makes the
 * device's default stream object: no such work inside a pin); it lives as long as its device. */
typedef dls_status_t (*pinned_work)(dls__event *, dls__stream *, const char *);
static DLS__NOINLINE dls_status_t pinned_on_held(dls_stream_t stream, dls_event_t event, const char *call,
                                                 pinned_work work) {
  DLS__HOLD_VAR(s_hold);
  DLS__HOLD_VAR(e_hold);
  dls_status_t st;
  dls__stream *s = NULL;
  if ((uint32_t)(stream.id >> 32) == DLS_STREAM_RESERVED_GENERATION &&
      (s = dls__stream_get_reserved(stream, call, "stream", &st)) == NULL)
    return st;
  dls__pin_thread *pt = &dls__pins; /* looked up once for the pin, the reads and the unpin */
  dls__capture_pin_at(pt);
  if (s == NULL)
    s = dls__pinned_get_read(pt, &s_hold, &dls__stream_table, stream.id, call, "stream", &st);
  if (s != NULL) {
    dls__event *e = dls__pinned_get(pt, &e_hold, &dls__event_table, event.id, call, "event", &st);
    if (e != NULL)
      st = work(e, s, call);
  }
  dls__capture_unpin_at(pt);
  return st;
}

/* The common case inline: a stream handle of the table, a pin in a slot of the thread's own (an epoch: both read
 * without a hold), both handles live. Anything else unpins and goes through pinned_on_held, which pins again. */
static DLS__HOT_INLINE dls_status_t pinned_on(dls_stream_t stream, dls_event_t event, const char *call,
                                              pinned_work work) {
  DLS__ENTER(call);
  if (DLS__LIKELY((uint32_t)(stream.id >> 32) != DLS_STREAM_RESERVED_GENERATION)) {
    dls__pin_thread *pt = &dls__pins;
    dls__capture_pin_at(pt);
    dls__stream *s;
    dls__event *e;
    if (DLS__LIKELY(pt->epoch) && DLS__LIKELY((s = dls__slot_peek_read(&dls__stream_table, stream.id)) != NULL) &&
        DLS__LIKELY((e = dls__slot_peek_live(&dls__event_table, event.id)) != NULL)) {
      dls_status_t st = work(e, s, call);
      dls__capture_unpin_at(pt);
      return st;
    }
    dls__capture_unpin_at(pt);
  }
  return pinned_on_held(stream, event, call, work);
}

dls_status_t dls_event_record(dls_event_t event, dls_stream_t stream) {
  return pinned_on(stream, event, "dls_event_record", record_pinned);
}

/* A record made in a capture is a node of the graph, not work that runs:
 * nothing outside that capture may wait for it, query it or block on it. */
static dls_status_t refuse_captured(const char *call, dls__event *e) {
  uint64_t cap = atomic_load_explicit(&e->cap_id, memory_order_relaxed);
  if (DLS__LIKELY(cap == 0))
    return dls__capture_check_host_wait(call);
  return dls__fail(DLS_ERR_STATE,
                   "%s: the event was last recorded in capture %llu: that record is a node of its graph and never "
                   "completes outside a replay; record the event again outside the capture",
                   call, (unsigned long long)cap);
}

/* A wait refused before the driver is asked: the stream (in capture `cap`) and the event (recorded in capture
 * `ecap`) are in different capture states. */
static DLS__NOINLINE DLS__COLD dls_status_t wait_across(const char *call, dls__stream *s, uint64_t cap, uint64_t ecap) {
  char d[128];
  if (ecap != 0)
    return dls__fail(DLS_ERR_STATE,
                     "%s: %s waits on an event recorded in capture %llu; only streams of that capture may wait on it "
                     "(use a group to fork work inside a capture); nothing was queued",
                     call, dls__stream_describe(s, cap, d, sizeof d), (unsigned long long)ecap);
  return dls__fail(DLS_ERR_STATE,
                   "%s: %s waits on an event recorded outside its capture; the wait would invalidate the capture, so "
                   "nothing was queued",
                   call, dls__stream_describe(s, cap, d, sizeof d));
}

/* dls_stream_wait_event's work, inside its pin (the event read without a hold, the stream held by the caller, as
 * for a record). Both in one capture state, or the wait would tie a capture to eager work: checked and queued in
 * the pin (a capture begun or ended in between would do the same). Nothing is known of a foreign event's record:
 * no capture state is read. */
static DLS__HOT_INLINE dls_status_t wait_pinned(dls__event *e, dls__stream *s, const char *call) {
  /* Another device of the same backend is fine: the driver orders across devices. */
  if (DLS__UNLIKELY(e->dev->be != s->dev->be))
    return dls__fail(DLS_ERR_INVALID_DEVICE,
                     "%s: stream is on %s but event is on %s; a stream can wait only for events of its own backend",
                     call, s->dev->name, e->dev->name);
  const dls__backend *be = s->dev->be;
  if (!e->foreign) {
    if (!atomic_load_explicit(&e->recorded, memory_order_acquire))
      return DLS_OK; /* a never-recorded event is complete: nothing to wait for */
    uint64_t cap = 0, ecap = atomic_load_explicit(&e->cap_id, memory_order_relaxed);
    (void)dls__stream_capture(s, &cap);
    if (DLS__UNLIKELY(cap != ecap))
      return wait_across(call, s, cap, ecap);
  }
  dls_status_t st = be->stream_wait_event(be, s->dev->id, s->native, native_of(e));
  return DLS__LIKELY(st == DLS_OK) ? DLS_OK : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_stream_wait_event(dls_stream_t stream, dls_event_t event) {
  return pinned_on(stream, event, "dls_stream_wait_event", wait_pinned);
}

dls_status_t dls_event_wait(dls_event_t event, dls_stream_t stream) { return dls_stream_wait_event(stream, event); }

dls_status_t dls_event_synchronize(dls_event_t event) {
  static const char call[] = "dls_event_synchronize";
  DLS__ENTER(call);
  DLS__GET_OF(event, e, event, call, "event");
  DLS__TRY(refuse_captured(call, e));
  if (!e->foreign && !atomic_load_explicit(&e->recorded, memory_order_acquire))
    return DLS_OK; /* never recorded: complete */
  dls_status_t st = e->dev->be->event_synchronize(e->dev->be, e->dev->id, native_of(e));
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s", call);
  dls_deferred_poll();
  return DLS_OK;
}

dls_status_t dls_event_query(dls_event_t event, int *out_complete) {
  static const char call[] = "dls_event_query";
  DLS__ENTER(call);
  DLS__OUT(call, out_complete);
  DLS__GET_OF(event, e, event, call, "event");
  DLS__TRY(refuse_captured(call, e));
  if (!e->foreign && !atomic_load_explicit(&e->recorded, memory_order_acquire)) {
    *out_complete = 1; /* never recorded: complete */
    return DLS_OK;
  }
  dls_status_t st = e->dev->be->event_query(e->dev->be, e->dev->id, native_of(e), out_complete);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_event_elapsed_ms(dls_event_t start, dls_event_t end, float *out_ms) {
  static const char call[] = "dls_event_elapsed_ms";
  DLS__ENTER(call);
  DLS__OUT(call, out_ms);
  DLS__GET_OF(event, a, start, call, "start");
  DLS__GET_OF(event, b, end, call, "end");
  if (a->dev != b->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: start is on %s but end is on %s", call, a->dev->name, b->dev->name);
  if (!(a->flags & DLS_EVENT_TIMING) || !(b->flags & DLS_EVENT_TIMING))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s: %s event was created without DLS_EVENT_TIMING", call,
                     (a->flags & DLS_EVENT_TIMING) ? "end" : "start");
  dls_status_t st = a->dev->be->event_elapsed_ms(a->dev->be, a->dev->id, native_of(a), native_of(b), out_ms);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_event_native(dls_event_t event, void **out_native) {
  static const char call[] = "dls_event_native";
  DLS__ENTER(call);
  DLS__OUT(call, out_native);
  DLS__GET_OF(event, e, event, call, "event");
  if (atomic_load_explicit(&e->pooled, memory_order_acquire)) {
    /* Its owner may now wait on the native outside dlstream: it must not
     * carry a record of the pool's, and it is destroyed, not pooled, at the
     * end. The pooled native it replaces stays with the event (a racing
     * record may still use it) and goes back to the pool at the end. */
    void *fresh = NULL;
    if (!atomic_load_explicit(&e->recorded, memory_order_acquire)) {
      dls_status_t st = e->dev->be->event_create(e->dev->be, e->dev->id, DLS_EVENT_DEFAULT, &fresh);
      if (st != DLS_OK)
        return dls__fail_prefix(st, "%s", call);
    }
    dls__spin_lock(&e->mu);
    if (atomic_load_explicit(&e->pooled, memory_order_relaxed)) {
      if (fresh != NULL) {
        e->displaced = native_of(e);
        atomic_store_explicit(&e->native, fresh, memory_order_release);
        fresh = NULL;
      }
      atomic_store_explicit(&e->pooled, false, memory_order_release);
    }
    dls__spin_unlock(&e->mu);
    if (fresh != NULL) /* another thread replaced it first */
      (void)e->dev->be->event_destroy(e->dev->be, e->dev->id, fresh);
  }
  *out_native = native_of(e);
  return DLS_OK;
}
