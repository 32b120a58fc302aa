/* SPDX-License-Identifier: Apache-2.0 */
/* Streams: owned, pooled, foreign and default; their lookups and references (hot paths inline). */
#ifndef DLSTREAM_CORE_STREAM_H
#define DLSTREAM_CORE_STREAM_H

#include "core/device.h"

enum { DLS__STREAM_OWNED = 1, DLS__STREAM_POOLED, DLS__STREAM_FOREIGN, DLS__STREAM_DEFAULT };

struct dls__stream {
  dls__device *dev;
  void *native;
  int kind;             /* DLS__STREAM_* */
  _Atomic int refs;     /* the handle + buffers and uses that name it */
  uint64_t id;          /* its handle; 0 for default streams */
  _Atomic int open_groups; /* groups begun on it and not yet ended */
  bool capture_unseen;  /* foreign, on a backend that reports captures: it may be
                           capturing without dlstream knowing, so the driver is asked */
  _Atomic(void *) mark; /* a pooled event of its device, recorded after each eager piece of work that uses a
                           buffer on it (access.c), made at the first such use: every eager use entry on the
                           stream waits on it (one record per piece of work, whatever the number of buffers) */
  struct dls__stream *live_prev, *live_next; /* the device's live streams (dev->live, under dev->mu) */
  struct dls__stream *owner; /* foreign, wrapping a native stream dlstream made: that stream (ref held), so the
                                native lives as long as the wrap (its handle's end would destroy it); else NULL */
  void (*keep_release)(void *); /* foreign: lets go of what keeps its native alive (a framework's stream object,
                                   interop/ext), once the stream object goes; NULL: nothing kept */
  void *keep_data;
  void *bound;          /* pooled, a group's branch: the native of the origin it is bound to, back in the pool */
  /* Memory freed on the stream and kept for its next allocations (core/cache.c), made at the first such free;
   * NULL: none. While it is there, the stream's release first calls cache_gone (set with it, `release` true),
   * which gives the memory back in the stream's order and returns true, or, while the stream captures, keeps the
   * object (a reference of the cache's, let go of by a later trim) and returns false: the release stops there.
   * A foreign stream's native need outlive its handle only: the handle's end gives the memory back (`release`
   * false) and sets cache_off, so that later frees on it go to the driver. */
  _Atomic(struct dls__stream_cache *) cache;
  bool (*cache_gone)(struct dls__stream *s, bool release);
  _Atomic bool cache_off; /* frees on it go to the driver, never into a cache (see above; and a wrap the extension
                             makes of a framework's stream it does not keep alive) */
};
/* A reference unless the last one is already gone (the object is then on its way out); default streams are always
 * alive (not counted). */
static inline bool dls__stream_ref_if_alive(dls__stream *s) {
  if (s->kind == DLS__STREAM_DEFAULT)
    return true;
  int n = atomic_load_explicit(&s->refs, memory_order_relaxed);
  while (n > 0)
    if (atomic_compare_exchange_weak_explicit(&s->refs, &n, n + 1, memory_order_acquire, memory_order_relaxed))
      return true;
  return false;
}
/* Branch streams are bound to their group's origin (on unless a test turns it off): a pooled stream that was a
 * branch of a group on origin O goes back to the pool for O's groups only. A framework's caching allocator (torch,
 * CuPy) reuses a freed block on the stream that allocated it with no wait: memory a branch allocated and the origin
 * used after the join is then reused only by branches of later groups on O, which begin after the origin's work
 * queued before them (their fork). At most DLS__BOUND_MAX bound streams idle per device; past that one of the
 * longest idle is destroyed. An owned origin's end unbinds its streams after they wait for its work: a stream made
 * later at the same address inherits nothing. */
#define DLS__BOUND_MAX 64
DLS__INTERNAL extern _Atomic bool dls__bind_branches;
/* A pooled stream for a branch of a group on `origin` (its handle in *out, as dls_stream_acquire). */
DLS__INTERNAL dls_status_t dls__stream_acquire_branch(dls__stream *origin, const char *call, dls_stream_t *out);
/* Synchronizes every live stream object of `dev` (default streams excluded), handle or none: a stream whose
 * handle was closed may still run work it was given (dls_device_synchronize). First failure. */
DLS__INTERNAL dls_status_t dls__stream_sync_live(dls__device *dev);

/* The stream's mark (made on first use; DLS_ERR_OUT_OF_MEMORY or the
 * driver's error when no event could be had). */
DLS__INTERNAL dls_status_t dls__stream_mark_make(dls__stream *s, void **out_event);
static inline dls_status_t dls__stream_mark(dls__stream *s, void **out_event) {
  *out_event = atomic_load_explicit(&s->mark, memory_order_acquire);
  return DLS__LIKELY(*out_event != NULL) ? DLS_OK : dls__stream_mark_make(s, out_event);
}

/* Resolves a reserved default-stream handle (dls_stream_default). */
DLS__INTERNAL dls__stream *dls__stream_get_reserved(dls_stream_t stream, const char *call, const char *arg,
                                                    dls_status_t *out_status);
/* Resolves a stream handle, reserved default handles included, without a
 * hold (the caller holds the stream by other means: a reference). */
static inline dls__stream *dls__stream_get(dls_stream_t stream, const char *call, const char *arg,
                                           dls_status_t *out_status) {
  if (DLS__UNLIKELY((uint32_t)(stream.id >> 32) == DLS_STREAM_RESERVED_GENERATION))
    return dls__stream_get_reserved(stream, call, arg, out_status);
  return (dls__stream *)dls__table_get(&dls__stream_table, stream.id, call, arg, out_status);
}
/* Resolves and holds a stream handle in *h (default streams live as long as
 * their device: nothing to hold). */
static inline dls__stream *dls__stream_hold(dls__hold *h, dls_stream_t stream, const char *call, const char *arg,
                                            dls_status_t *out_status) {
  return (dls__stream *)dls__hold_get(h, &dls__stream_table, stream.id, call, arg, out_status);
}
/* Takes a reference. Default streams live as long as their device: they are
 * not counted (their buffers skip a locked instruction each way). */
static inline void dls__stream_ref(dls__stream *s) {
  if (s->kind != DLS__STREAM_DEFAULT)
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}
/* Releases the native stream by its kind and frees the object (no references left). */
DLS__INTERNAL void dls__stream_release(dls__stream *s);
/* Drops a reference; the last one releases the native stream by its kind.
 * Default streams are never released. */
static inline void dls__stream_unref(dls__stream *s) {
  if (s->kind != DLS__STREAM_DEFAULT && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
    dls__stream_release(s);
}
/* Slot 0 of dls__device.defaults: a stream object that names no real stream,
 * the producer of memory no stream produced (latch flags), so every real use
 * of it is recorded. */
#define DLS__STREAM_NONE 0
/* The default stream object of a device (kind DLS_STREAM_LEGACY/PER_THREAD,
 * or DLS__STREAM_NONE). */
DLS__INTERNAL dls_status_t dls__stream_default(dls__device *dev, int kind, dls__stream **out);
/* The legacy default stream (or the "no stream" producer): never captured,
 * and on a GPU, work on it would merge with any capture underway on its device. */
static inline bool dls__stream_legacy(const dls__stream *s) {
  if (s->native == (void *)UINTPTR_MAX)
    return true;
  return s->dev->device.device_type == kDLCPU ? s == s->dev->defaults[DLS_STREAM_LEGACY]
                                              : s->native == NULL || s->native == (void *)(uintptr_t)1;
}
/* Two streams are the same stream: one object, or two wrappers of one native. */
static inline bool dls__same_stream(const dls__stream *a, const dls__stream *b) {
  return a == b || (a->dev == b->dev && a->native == b->native);
}
/* Describes a stream for messages: "pooled stream 0x5f.. on cuda:0 (in capture 3)". */
DLS__INTERNAL const char *dls__stream_describe(const dls__stream *s, uint64_t cap, char *buf, size_t size);

/* Called by dls_shutdown once no handle is left: default stream objects
 * (their natives belong to the backend) and the pool's idle streams. */
DLS__INTERNAL void dls__streams_shutdown(void);

#endif /* DLSTREAM_CORE_STREAM_H */
