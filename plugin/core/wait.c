/* SPDX-License-Identifier: Apache-2.0 */
/* Waits: a stream waits for another on the device (a pooled event between them); the host waits for a stream or a
 * device, then runs the releases that waited for it. Never across a capture's edge. */
#include "core/capture.h"
#include "core/deferred.h"
#include "core/stream.h"
#include "core/wait.h"

dls_status_t dls__stream_order(dls__stream *waiter, dls__stream *target) {
  if (waiter == target || (waiter->native == target->native && waiter->dev == target->dev))
    return DLS_OK;
  /* Both capture states read, and the record and wait queued, in one pin: a capture begun or ended in between
   * would tie a capture to eager work. */
  dls__capture_pin();
  uint64_t wcap = 0;
  (void)dls__stream_capture(waiter, &wcap);
  dls_status_t st = dls__stream_order_at(waiter, wcap, target);
  dls__capture_unpin();
  return st;
}

/* dls__stream_order_at's work, pinned by its caller. */
static dls_status_t order_pinned(dls__stream *waiter, uint64_t wcap, dls__stream *target) {
  uint64_t tcap = 0;
  (void)dls__stream_capture(target, &tcap);
  DLS__TRY(dls__capture_check_pair(waiter, wcap, target, tcap));
  /* The event is the target's device's; the waiter may be on another device
   * of the same backend (a cross-device wait, which CUDA allows). */
  dls__device *dev = target->dev;
  void *ev;
  DLS__TRY(dls__event_pool_get(dev, &ev));
  dls_status_t st = dev->be->event_record(dev->be, dev->id, ev, target->native);
  if (st == DLS_OK)
    st = waiter->dev->be->stream_wait_event(waiter->dev->be, waiter->dev->id, waiter->native, ev);
  /* A wait captures the record it saw, so an eager event can be reused at
   * once; one recorded in a capture only once the capture is over. */
  dls__event_pool_put_after(dev, ev, tcap);
  return st;
}

dls_status_t dls__stream_order_at(dls__stream *waiter, uint64_t wcap, dls__stream *target) {
  if (waiter == target || (waiter->native == target->native && waiter->dev == target->dev))
    return DLS_OK;
  dls__capture_pin(); /* nested in the caller's, which read `wcap` */
  dls_status_t st = order_pinned(waiter, wcap, target);
  dls__capture_unpin();
  return st;
}

/* ---- public API ---- */

dls_status_t dls_stream_wait_stream(dls_stream_t stream, dls_stream_t other) {
  static const char call[] = "dls_stream_wait_stream";
  DLS__ENTER(call);
  DLS__GET_OF(stream, s, stream, call, "stream");
  DLS__GET_OF(stream, o, other, call, "other");
  if (s->dev->be != o->dev->be)
    return dls__fail(DLS_ERR_INVALID_DEVICE,
                     "%s: stream is on %s but other is on %s; a stream can wait only for streams of its own backend",
                     call, s->dev->name, o->dev->name);
  dls_status_t st = dls__stream_order(s, o);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

/* Synchronizing or querying a capturing stream would invalidate its capture. */
static dls_status_t refuse_capturing(const char *call, dls__stream *s) {
  uint64_t id;
  int status = dls__stream_capture(s, &id);
  if (DLS__LIKELY(status == DLS__CAPTURE_NONE))
    return dls__capture_check_host_wait(call);
  char d[128];
  return dls__fail(DLS_ERR_STATE,
                   "%s: %s: its work is being recorded, not run, so there is nothing to wait for (the driver would "
                   "invalidate the capture); end the capture and replay the graph",
                   call, dls__stream_describe(s, id, d, sizeof d));
}

dls_status_t dls_stream_synchronize(dls_stream_t stream) {
  static const char call[] = "dls_stream_synchronize";
  DLS__ENTER(call);
  DLS__GET_OF(stream, s, stream, call, "stream");
  DLS__TRY(refuse_capturing(call, s));
  dls_status_t st = s->dev->be->stream_synchronize(s->dev->be, s->dev->id, s->native);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(stream on %s)", call, s->dev->name);
  dls_deferred_poll();
  return DLS_OK;
}

dls_status_t dls_stream_query(dls_stream_t stream, int *out_idle) {
  static const char call[] = "dls_stream_query";
  DLS__ENTER(call);
  DLS__OUT(call, out_idle);
  DLS__GET_OF(stream, s, stream, call, "stream");
  DLS__TRY(refuse_capturing(call, s));
  dls_status_t st = s->dev->be->stream_query(s->dev->be, s->dev->id, s->native, out_idle);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s(stream on %s)", call, s->dev->name);
}

/* dls_device_synchronize's walk over the stream handles: its device and its first failure. */
static _Thread_local struct { DLDevice device; dls_status_t status; } g_sync;

static void sync_stream(uint64_t id, void *obj) {
  (void)obj; /* looked up again by handle: the stream may go meanwhile (then it is skipped) */
  dls_stream_t s = {id};
  DLDevice d;
  if (g_sync.status == DLS_OK && dls_stream_device(s, &d) == DLS_OK && d.device_type == g_sync.device.device_type &&
      d.device_id == g_sync.device.device_id) {
    dls_status_t st = dls_stream_synchronize(s);
    g_sync.status = st == DLS_ERR_INVALID_HANDLE ? DLS_OK : st;
  }
}

/* The pool's idle streams: a pooled stream handed back (its object released) may still run what it was given.
 * A copy of the list is waited on outside the lock (a stream taken from the pool meanwhile is waited on too,
 * which is harmless); one still in a capture it joined is skipped, as a wait would invalidate the capture. */
static dls_status_t sync_pool(dls__device *dev) {
  enum { BATCH = 64 };
  void *natives[BATCH];
  dls_status_t first = DLS_OK;
  for (size_t from = 0;; from += BATCH) {
    pthread_mutex_lock(&dev->mu);
    size_t n = 0;
    for (size_t k = from; k < dev->stream_pool_n && n < BATCH; k++)
      natives[n++] = dev->stream_pool[k];
    pthread_mutex_unlock(&dev->mu);
    for (size_t k = 0; k < n; k++) {
      int status = DLS__CAPTURE_NONE;
      uint64_t id;
      if (dev->be->stream_capture_status != NULL &&
          (dls__capture_status_call(dev, natives[k], &status, &id) != DLS_OK || status != DLS__CAPTURE_NONE))
        continue;
      dls_status_t st = dev->be->stream_synchronize(dev->be, dev->id, natives[k]);
      if (first == DLS_OK)
        first = st;
    }
    if (n < BATCH)
      return first;
  }
}

dls_status_t dls_device_synchronize(DLDevice device) {
  static const char call[] = "dls_device_synchronize";
  DLS__ENTER(call);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  DLS__TRY(dls__capture_check_host_wait(call));
  g_sync.device = device;
  g_sync.status = DLS_OK;
  dls__table_each(&dls__stream_table, sync_stream);
  for (int k = DLS_STREAM_LEGACY; k <= DLS_STREAM_PER_THREAD; k++)
    if (dev->defaults[k] != NULL) /* only those in use: none is made just to be waited for */
      sync_stream(dls_stream_default(device, k).id, NULL);
  /* Streams whose handle is gone may still run what they were given: the live stream objects (held by buffers,
   * latches or uses), then the pool's idle streams. */
  dls_status_t more = g_sync.status == DLS_OK ? dls__stream_sync_live(dev) : DLS_OK;
  if (more == DLS_OK && g_sync.status == DLS_OK)
    more = sync_pool(dev);
  if (g_sync.status == DLS_OK)
    g_sync.status = more;
  dls_deferred_poll();
  return g_sync.status == DLS_OK ? DLS_OK : dls__fail_prefix(g_sync.status, "%s(device=%s)", call, dev->name);
}
