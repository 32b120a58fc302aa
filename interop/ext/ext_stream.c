/* SPDX-License-Identifier: Apache-2.0 */
/* The extension's entries on streams: lookups and references, handles for public calls, releases after a stream
 * passes, marks that host waits poll, and the copies of staged host arrays (ext.h says what each may do). */
#include "base/error.h"
#include "core/access.h"
#include "core/buffer.h"
#include "core/capture.h"
#include "core/device.h"
#include "core/stream.h"
#include "core/tables.h"
#include "core/wait.h"
#include "ext.h"

dls__stream *dls__ext_stream(dls_stream_t stream, const char *call, const char *arg, dls_status_t *out_status) {
  return dls__stream_get(stream, call, arg, out_status);
}

void dls__ext_stream_ref(dls__stream *s) { dls__stream_ref(s); }
void dls__ext_stream_unref(dls__stream *s) { dls__stream_unref(s); }
DLDevice dls__ext_stream_device(const dls__stream *s) { return s->dev->device; }
bool dls__ext_stream_same(const dls__stream *a, const dls__stream *b) { return dls__same_stream(a, b); }

bool dls__ext_stream_capturing(dls__stream *s, uint64_t *out_id) {
  *out_id = 0;
  return dls__stream_capture(s, out_id) != DLS__CAPTURE_NONE;
}

dls_status_t dls__ext_stream_handle(dls__stream *s, dls_stream_t *out, uint64_t *out_temp) {
  dls__device *dev = s->dev;
  *out_temp = 0;
  if (s->kind == DLS__STREAM_DEFAULT) {
    int kind = s == dev->defaults[DLS_STREAM_PER_THREAD] ? DLS_STREAM_PER_THREAD : DLS_STREAM_LEGACY;
    *out = dls_stream_default(dev->device, kind);
    return DLS_OK;
  }
  if (s->id != 0 && dls__table_peek(&dls__stream_table, s->id) == s) {
    out->id = s->id;
    return DLS_OK;
  }
  uint64_t id = dls__table_add(&dls__stream_table, s);
  if (id == 0)
    return DLS_ERR_OUT_OF_MEMORY; /* the message is set */
  *out_temp = id;
  out->id = id;
  return DLS_OK;
}

void dls__ext_stream_temp_end(uint64_t temp) {
  (void)dls__table_end(&dls__stream_table, temp); /* its drop lets go of the reference it took over */
}

void dls__ext_stream_keep(dls__stream *s, dls_release_fn release, void *user_data) {
  if (s->kind != DLS__STREAM_FOREIGN || s->keep_release != NULL) {
    release(user_data);
    return;
  }
  s->keep_data = user_data;
  s->keep_release = release;
}

void dls__ext_stream_uncached(dls__stream *s) { atomic_store_explicit(&s->cache_off, true, memory_order_release); }

/* A borrowed buffer of the "no stream" producer, used on `s` and dropped at once: the deallocation rule runs its
 * release once the use's event completes. */
void dls__ext_release_marked(dls__stream *s, const void *marked, dls_release_fn release, void *user_data) {
  dls__stream *none = NULL;
  dls__buffer *b = NULL;
  dls_status_t rc = dls__stream_default(s->dev, DLS__STREAM_NONE, &none);
  if (rc == DLS_OK)
    rc = dls__buffer_borrow(s->dev, NULL, 0, none, release, user_data, &b);
  if (rc == DLS_OK) {
    /* `s`'s mark recorded after the work already (the call's uses of foreign memory): the use is marked by it */
    rc = marked != NULL ? dls__buffer_mark_by(b, s, marked) : dls__buffer_access(b, s, DLS_ACCESS_READ, false);
    if (rc != DLS_OK) /* the use is unknown: never release early */
      (void)s->dev->be->stream_synchronize(s->dev->be, s->dev->id, s->native);
    dls__buffer_unref(b);
    return;
  }
  /* No memory for the record: wait here rather than release early. */
  (void)s->dev->be->stream_synchronize(s->dev->be, s->dev->id, s->native);
  release(user_data);
}

void dls__ext_release_after(dls__stream *s, dls_release_fn release, void *user_data) {
  dls__ext_release_marked(s, NULL, release, user_data);
}

_Static_assert(DLS__EXT_ACCESS_DECLARED == DLS__ACCESS_DECLARED, "ext.h's declared bit is the core's");
_Static_assert(DLS__EXT_EPOCH_NOTED == DLS__EPOCH_NOTED, "ext.h's epoch of a quick use is the core's");

dls_status_t dls__ext_use_order(dls__buffer *b, dls__stream *s, int mode, uint32_t *out_epoch) {
  return dls__buffer_order(b, s, mode, out_epoch);
}

void dls__ext_use_unordered(dls__buffer *b, uint32_t epoch) { dls__buffer_unordered(b, epoch); }

dls_status_t dls__ext_uses_note(dls__stream *s, dls__buffer *const *bufs, const int *modes, const uint32_t *epochs,
                                int n, bool all_noted, const void **out_marked) {
  void *marked = NULL;
  dls_status_t rc = all_noted ? dls__buffers_note_noted(s, bufs, modes, epochs, n, &marked)
                              : dls__buffers_note(s, bufs, modes, epochs, n, &marked);
  *out_marked = marked;
  return rc;
}

dls_status_t dls__ext_uses_note_owed(dls__stream *s, dls__buffer *const *bufs, const int *modes, const uint32_t *epochs,
                                     int n, dls__buffer *const *held, int nheld, dls__buffer **owed, int *nowed) {
  return dls__buffers_note_owed(s, bufs, modes, epochs, n, held, nheld, owed, nowed);
}

void dls__ext_uses_settle(dls__stream *s, dls__buffer *const *bufs, int n) { dls__buffers_settle(s, bufs, n); }

/* ---- marks and relaxed queries ---- */

dls_status_t dls__ext_mark_record(dls__stream *s, dls__ext_mark *out) {
  out->dev = s->dev;
  out->event = NULL;
  dls_status_t rc = dls__event_pool_get(s->dev, &out->event);
  if (rc == DLS_OK && (rc = s->dev->be->event_record(s->dev->be, s->dev->id, out->event, s->native)) != DLS_OK) {
    dls__event_pool_put(s->dev, out->event);
    out->event = NULL;
  }
  return rc;
}

dls_status_t dls__ext_mark_query(const dls__ext_mark *m, int *out_done) {
  dls__relaxed r;
  dls__relaxed_enter(&r, m->dev);
  dls_status_t rc = m->dev->be->event_query(m->dev->be, m->dev->id, m->event, out_done);
  dls__relaxed_leave(&r);
  return rc;
}

void dls__ext_mark_end(dls__ext_mark *m) {
  if (m->event != NULL)
    dls__event_pool_put(m->dev, m->event); /* a record still pending is harmless: the next user records it again */
  m->event = NULL;
}

/* The queries of a host wait run in relaxed capture mode: they ask about work that is not captured (the core
 * refuses a capturing stream, an event recorded in a capture and a wait a capture it knows of forbids). */
static dls_status_t query_relaxed(DLDevice device, const dls_event_t *event, const dls_stream_t *stream, int *out) {
  dls__device *dev = dls__device_peek(device.device_type, device.device_id);
  dls__relaxed r;
  if (dev != NULL)
    dls__relaxed_enter(&r, dev);
  dls_status_t rc = event != NULL ? dls_event_query(*event, out) : dls_stream_query(*stream, out);
  if (dev != NULL)
    dls__relaxed_leave(&r);
  return rc;
}

dls_status_t dls__ext_event_query_relaxed(dls_event_t event, DLDevice device, int *out_done) {
  return query_relaxed(device, &event, NULL, out_done);
}

dls_status_t dls__ext_stream_query_relaxed(dls_stream_t stream, DLDevice device, int *out_idle) {
  return query_relaxed(device, NULL, &stream, out_idle);
}

/* ---- staged host arrays and peer copies ---- */

void dls__ext_buffer_ref(dls__buffer *b) { dls__buffer_ref(b); }

dls_status_t dls__ext_stage_in(dls__stream *s, const void *host, size_t span, dls__buffer **out_tmp, void **out_dev) {
  *out_dev = NULL;
  dls_status_t rc = dls__buffer_alloc(s, span, out_tmp);
  if (rc == DLS_OK && span > 0)
    rc = s->dev->be->memcpy_async(s->dev->be, s->dev->id, (*out_tmp)->ptr, host, span, s->native);
  if (rc == DLS_OK)
    *out_dev = (*out_tmp)->ptr;
  return rc;
}

dls_status_t dls__ext_stage_out(dls__stream *s, dls__buffer *tmp, void *host, size_t span) {
  return s->dev->be->memcpy_async(s->dev->be, s->dev->id, host, tmp->ptr, span, s->native);
}

dls_status_t dls__ext_copy_peer(const char *call, dls__stream *s, DLDevice dst_dev, void *dst, dls__buffer *dst_buf,
                                DLDevice src_dev, const void *src, size_t bytes) {
  dls__device *dev = s->dev;
  char x[32], y[32];
  if (dev->be->memcpy_peer_async == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED, "%s(dst on %s, src on %s): the %s backend cannot copy between devices",
                     call, dls_device_str(dst_dev, x, sizeof x), dls_device_str(src_dev, y, sizeof y), dev->be->name);
  dls_status_t rc = DLS_OK;
  if (dst_buf != NULL)
    rc = dls__buffer_access(dst_buf, s, DLS_ACCESS_WRITE, true); /* dst's earlier uses on other streams first */
  if (rc == DLS_OK && bytes > 0)
    rc = dev->be->memcpy_peer_async(dev->be, dev->id, dst, src_dev.device_id, src, bytes, s->native);
  if (rc != DLS_OK && rc != DLS_ERR_NOT_SUPPORTED)
    return dls__fail_prefix(rc, "%s(%zu bytes from %s to %s)", call, bytes, dls_device_str(src_dev, y, sizeof y),
                            dls_device_str(dst_dev, x, sizeof x));
  return rc;
}
