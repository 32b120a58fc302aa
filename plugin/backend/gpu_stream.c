/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU backends' streams, events and host callbacks, written once for CUDA and HIP. */
#include "backend/gpu.h"

/* A stream or event query: *out_done 1 when its work is complete, 0 when
 * not yet; a driver error otherwise. */
static dls_status_t dls__gpu_query(dls__gpu *g, int dev, dls__gpu_result (*query)(void *), const char *name,
                                   const char *kind, void *handle, int *out_done) {
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  dls__gpu_result r = query(handle);
  dls__gpu_leave(g, &sc);
  if (DLS__LIKELY(r == DLS__GPU_OK) || g->classify(r) == DLS__GPU_ERROR_NOT_READY) {
    *out_done = r == DLS__GPU_OK;
    return DLS_OK;
  }
  return dls__gpu_fail(g, r, dev, "%s(%s=%p)", name, kind, handle);
}

/* ---- streams ---- */

dls_status_t dls__gpu_stream_create(const dls__backend *be, int dev, unsigned flags, int priority, void **out_stream) {
  dls__gpu *g = dls__gpu_of(be);
  unsigned vflags = (flags & DLS_STREAM_BLOCKING) ? g->k.stream_blocking : g->k.stream_non_blocking;
  void *s = NULL;
  DLS__GPU_CALL(g, dev, g->calls.stream_create(&s, vflags, priority), "%s(flags=%#x, priority=%d)",
                g->names.stream_create, vflags, priority);
  *out_stream = s;
  return DLS_OK;
}

dls_status_t dls__gpu_stream_destroy(const dls__backend *be, int dev, void *stream) {
  dls__gpu *g = dls__gpu_of(be);
  if (dls__gpu_special_stream(g, stream))
    return DLS_OK;
  /* Returns at once; the driver frees the stream after its queued work. */
  DLS__GPU_CALL(g, dev, g->calls.stream_destroy(stream), "%s(stream=%p)", g->names.stream_destroy, stream);
  return DLS_OK;
}

dls_status_t dls__gpu_stream_default(const dls__backend *be, int dev, int kind, void **out_stream) {
  dls__gpu *g = dls__gpu_of(be);
  dls__gpu_device *d;
  DLS__TRY(dls__gpu_device_get(g, dev, &d));
  if (kind == DLS__DEFAULT_LEGACY) {
    *out_stream = NULL; /* the legacy (CUDA) or null (HIP) stream of the current device */
    return DLS_OK;
  }
  if (kind == DLS__DEFAULT_PER_THREAD) {
    *out_stream = g->k.stream_per_thread;
    return DLS_OK;
  }
  return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s default stream kind %d: expected %d (legacy) or %d (per-thread)",
                   g->name, kind, DLS__DEFAULT_LEGACY, DLS__DEFAULT_PER_THREAD);
}

/* The device whose context `ctx` is, among those already open; -1: none. */
static int dls__gpu_owner_of_context(const dls__gpu *g, const void *ctx) {
  for (int i = 0; i < g->ndev; i++)
    if (atomic_load_explicit(&g->devs[i].ready, memory_order_acquire) && g->devs[i].ctx == ctx)
      return i;
  return -1;
}

/* A foreign stream must belong to the device (CUDA: to its primary context,
 * the one PyTorch, CuPy and the runtime API share): a stream of another
 * device or of a private context would run our work elsewhere. Where the
 * driver cannot tell (HIP without a stream-device query), it is trusted. */
dls_status_t dls__gpu_stream_check(const dls__backend *be, int dev, void *stream) {
  dls__gpu *g = dls__gpu_of(be);
  if (dls__gpu_special_stream(g, stream))
    return DLS_OK; /* they name the current device's streams, which we set */
  const dls__gpu_calls *c = &g->calls;
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  void *ctx = NULL;
  int sdev = -1;
  dls__gpu_result r = DLS__GPU_OK;
  const char *what = NULL;
  if (c->stream_context != NULL) {
    what = g->names.stream_context;
    r = c->stream_context(stream, &ctx);
  }
  bool in_ctx = c->stream_context != NULL && r == DLS__GPU_OK && ctx == d->ctx;
  if (r == DLS__GPU_OK && !in_ctx && c->stream_device != NULL) {
    dls__gpu_result rd = c->stream_device(stream, &sdev);
    if (rd != DLS__GPU_OK) {
      sdev = -1;
      if (c->stream_context == NULL) { /* the only check there is */
        what = g->names.stream_device;
        r = rd;
      }
    }
  }
  dls__gpu_leave(g, &sc);
  if (r != DLS__GPU_OK)
    return dls__gpu_fail(g, r, dev, "%s(stream=%p)", what, stream);
  if (in_ctx)
    return DLS_OK;
  if (c->stream_context == NULL) { /* devices only, no contexts */
    if (sdev < 0 || sdev == dev)
      return DLS_OK;
    return dls__fail(DLS_ERR_INVALID_DEVICE, "stream %p belongs to %s:%d, not to %s:%d", stream, g->devname, sdev,
                     g->devname, dev);
  }
  int owner = sdev >= 0 ? sdev : dls__gpu_owner_of_context(g, ctx);
  if (owner >= 0 && owner != dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE,
                     "stream %p belongs to %s:%d (context %p), not to %s:%d (primary context %p)", stream,
                     g->devname, owner, ctx, g->devname, dev, d->ctx);
  if (owner == dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE,
                     "stream %p belongs to a private context %p on %s:%d, not to its primary context %p (the one "
                     "PyTorch, CuPy and the runtime API share); create the stream in the primary context",
                     stream, ctx, g->devname, dev, d->ctx);
  return dls__fail(DLS_ERR_INVALID_DEVICE,
                   "stream %p belongs to context %p, which is not %s:%d's primary context %p (another device, or "
                   "a private context)",
                   stream, ctx, g->devname, dev, d->ctx);
}

/* A stream's or event's synchronize: a wait, which takes no capture lock. */
static dls_status_t dls__gpu_wait(dls__gpu *g, int dev, dls__gpu_result (*wait)(void *), const char *name,
                                  const char *kind, void *handle) {
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter_as(g, dev, &d, &sc, true));
  dls__gpu_result r = wait(handle);
  dls__gpu_leave(g, &sc);
  return DLS__LIKELY(r == DLS__GPU_OK) ? DLS_OK : dls__gpu_fail(g, r, dev, "%s(%s=%p)", name, kind, handle);
}

dls_status_t dls__gpu_stream_synchronize(const dls__backend *be, int dev, void *stream) {
  dls__gpu *g = dls__gpu_of(be);
  return dls__gpu_wait(g, dev, g->calls.stream_synchronize, g->names.stream_synchronize, "stream", stream);
}

dls_status_t dls__gpu_stream_query(const dls__backend *be, int dev, void *stream, int *out_idle) {
  dls__gpu *g = dls__gpu_of(be);
  return dls__gpu_query(g, dev, g->calls.stream_query, g->names.stream_query, "stream", stream, out_idle);
}

/* A wait made in the device's context: one the driver refused made directly, and every wait of a vendor whose
 * streams do not name their context (HIP: not cold there). */
static DLS__NOINLINE dls_status_t wait_in_context(dls__gpu *g, int dev, void *stream, void *event) {
  DLS__GPU_CALL(g, dev, g->calls.stream_wait_event(stream, event, 0), "%s(stream=%p, event=%p)",
                g->names.stream_wait_event, stream, event);
  return DLS_OK;
}

dls_status_t dls__gpu_stream_wait_event(const dls__backend *be, int dev, void *stream, void *event) {
  dls__gpu *g = dls__gpu_of(be);
  if (DLS__LIKELY(dls__gpu_stream_direct(g, stream)) &&
      DLS__LIKELY(g->calls.stream_wait_event(stream, event, 0) == DLS__GPU_OK))
    return DLS_OK;
  return wait_in_context(g, dev, stream, event);
}

dls_status_t dls__gpu_stream_priority_range(const dls__backend *be, int dev, int *out_least, int *out_greatest) {
  dls__gpu *g = dls__gpu_of(be);
  DLS__GPU_CALL(g, dev, g->calls.priority_range(out_least, out_greatest), "%s()", g->names.priority_range);
  return DLS_OK;
}

dls_status_t dls__gpu_host_callback(const dls__backend *be, int dev, void *stream, dls_host_fn fn, void *user_data) {
  dls__gpu *g = dls__gpu_of(be);
  DLS__GPU_CALL(g, dev, g->calls.host_func(stream, fn, user_data), "%s(stream=%p, fn=%p)", g->names.host_func,
                stream, (void *)(uintptr_t)fn);
  return DLS_OK;
}

/* ---- events ---- */

dls_status_t dls__gpu_event_create(const dls__backend *be, int dev, unsigned flags, void **out_event) {
  dls__gpu *g = dls__gpu_of(be);
  unsigned vflags = (flags & DLS_EVENT_TIMING) ? g->k.event_default : g->k.event_disable_timing;
  if (flags & DLS_EVENT_BLOCKING_SYNC)
    vflags |= g->k.event_blocking_sync;
  void *e = NULL;
  DLS__GPU_CALL(g, dev, g->calls.event_create(&e, vflags), "%s(flags=%#x)", g->names.event_create, vflags);
  *out_event = e;
  return DLS_OK;
}

dls_status_t dls__gpu_event_destroy(const dls__backend *be, int dev, void *event) {
  dls__gpu *g = dls__gpu_of(be);
  if (event == NULL)
    return DLS_OK;
  DLS__GPU_CALL(g, dev, g->calls.event_destroy(event), "%s(event=%p)", g->names.event_destroy, event);
  return DLS_OK;
}

/* The drivers cannot name an event's device; a query at least rejects a
 * handle that is not a live event. */
dls_status_t dls__gpu_event_check(const dls__backend *be, int dev, void *event) {
  dls__gpu *g = dls__gpu_of(be);
  if (event == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "event NULL is not a %s event", g->name);
  int complete = 0;
  if (dls__gpu_query(g, dev, g->calls.event_query, g->names.event_query, "event", event, &complete) == DLS_OK)
    return DLS_OK;
  return dls__fail_prefix(DLS_ERR_INVALID_ARGUMENT, "event %p is not a usable %s event", event, g->name);
}

/* A record made in the device's context: one the driver refused made directly, and every record of a vendor whose
 * streams do not name their context (HIP: not cold there). */
static DLS__NOINLINE dls_status_t record_in_context(dls__gpu *g, int dev, void *event, void *stream) {
  DLS__GPU_CALL(g, dev, g->calls.event_record(event, stream), "%s(event=%p, stream=%p)", g->names.event_record, event,
                stream);
  return DLS_OK;
}

dls_status_t dls__gpu_event_record(const dls__backend *be, int dev, void *event, void *stream) {
  dls__gpu *g = dls__gpu_of(be);
  if (DLS__LIKELY(dls__gpu_stream_direct(g, stream)) && DLS__LIKELY(g->calls.event_record(event, stream) == DLS__GPU_OK))
    return DLS_OK;
  return record_in_context(g, dev, event, stream);
}

dls_status_t dls__gpu_event_query(const dls__backend *be, int dev, void *event, int *out_complete) {
  dls__gpu *g = dls__gpu_of(be);
  return dls__gpu_query(g, dev, g->calls.event_query, g->names.event_query, "event", event, out_complete);
}

dls_status_t dls__gpu_event_synchronize(const dls__backend *be, int dev, void *event) {
  dls__gpu *g = dls__gpu_of(be);
  return dls__gpu_wait(g, dev, g->calls.event_synchronize, g->names.event_synchronize, "event", event);
}

dls_status_t dls__gpu_event_elapsed_ms(const dls__backend *be, int dev, void *start, void *end, float *out_ms) {
  dls__gpu *g = dls__gpu_of(be);
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  dls__gpu_result r = g->calls.event_elapsed(out_ms, start, end);
  dls__gpu_leave(g, &sc);
  if (DLS__LIKELY(r == DLS__GPU_OK))
    return DLS_OK;
  dls__gpu_error e = g->classify(r);
  if (e == DLS__GPU_ERROR_INVALID_HANDLE)
    return dls__gpu_fail_hint(g, DLS_ERR_STATE, r, dev,
                              "both events must be created with DLS_EVENT_TIMING and recorded before their times "
                              "can be compared",
                              "%s(start=%p, end=%p)", g->names.event_elapsed, start, end);
  if (e == DLS__GPU_ERROR_NOT_READY)
    return dls__gpu_fail_hint(g, DLS_ERR_STATE, r, dev,
                              "a record has not completed yet; synchronize the end event first", "%s(start=%p, end=%p)", g->names.event_elapsed, start, end);
  return dls__gpu_fail(g, r, dev, "%s(start=%p, end=%p)", g->names.event_elapsed, start, end);
}
