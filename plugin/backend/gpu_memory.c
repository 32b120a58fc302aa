/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU backends' memory: stream-ordered pools, the pool-less fallback that parks frees behind events, copies, mapped host memory.
 *
 * With a pool (the usual case) allocation and free are the driver's
 * stream-ordered calls. Without one (a runtime without pools, a device that
 * lacks them, or DLSTREAM_DEBUG_ALLOC) memory comes from the plain
 * allocator, and a free is stream-ordered by hand: an event is recorded on
 * the freeing stream and the block is parked until the event completes.
 * A parked block is then reused by a later allocation of this device (one
 * of at most twice its size), as a caching allocator would; the driver's own
 * free (cuMemFree, hipFree) synchronizes the device, so it runs only where
 * waiting is the lesser evil: at shutdown, on out-of-memory (then the
 * allocation is retried), and in debug mode (which never reuses, so that a
 * late reader meets freed memory; not while a latch holds a stream, whose
 * timeout that free would wait out). Parked blocks are checked at later
 * allocations and frees, never waited for.
 *
 * Capture: on a capturing stream even the pool-less path is stream-ordered
 * (the driver's default-pool cuMemAllocAsync / hipMallocAsync), so that the
 * allocation becomes a graph node; such memory is freed stream-ordered too.
 * Only these slow paths ask for the stream's capture state. Work done on
 * dlstream's own initiative (checking and freeing parked blocks, the plain
 * allocator) runs with the thread's capture mode relaxed, so that it never
 * breaks a capture another stream of this thread is making. */
#include <stdlib.h>
#include <string.h>

#include "backend/gpu.h"

/* ---- capture awareness (slow paths only) ---- */

/* *out_capturing: `stream` is capturing (or its capture was invalidated). */
static dls_status_t dls__gpu_capturing(dls__gpu *g, int dev, void *stream, bool *out_capturing) {
  *out_capturing = false;
  if (g->calls.capture_info == NULL)
    return DLS_OK; /* no capture in this runtime */
  unsigned status = DLS__CAPTURE_NONE;
  unsigned long long id = 0;
  dls__gpu_result r = dls__gpu_capture_ask(g, stream, &status, &id);
  if (r != DLS__GPU_OK)
    return dls__gpu_fail(g, r, dev, "%s(stream=%p)", g->names.capture_info, stream);
  *out_capturing = status != DLS__CAPTURE_NONE;
  return DLS_OK;
}

/* Relaxes the thread's capture mode; returns the previous one for dls__gpu_unrelax. */
static unsigned dls__gpu_relax(dls__gpu *g) {
  unsigned mode = DLS_CAPTURE_RELAXED;
  if (g->calls.capture_mode_exchange != NULL && g->calls.capture_mode_exchange(&mode) != DLS__GPU_OK)
    mode = DLS_CAPTURE_RELAXED;
  return mode;
}

static void dls__gpu_unrelax(dls__gpu *g, unsigned prev) {
  if (g->calls.capture_mode_exchange != NULL && prev != DLS_CAPTURE_RELAXED)
    g->calls.capture_mode_exchange(&prev);
}

/* ---- small arrays under free_mu ---- */

/* Room for one more item: `items` itself, or a larger copy (NULL: no memory,
 * `items` unchanged). */
static void *dls__gpu_room(void *items, size_t *cap, size_t n, size_t item_size) {
  if (n < *cap)
    return items;
  size_t ncap = *cap != 0 ? *cap * 2 : 8;
  void *p = realloc(items, ncap * item_size);
  if (p != NULL)
    *cap = ncap;
  return p;
}

static bool dls__gpu_graph_ptr_take(dls__gpu_device *d, void *ptr) {
  for (size_t i = 0; i < d->ngraph; i++) {
    if (d->graph_ptrs[i] == ptr) {
      d->graph_ptrs[i] = d->graph_ptrs[--d->ngraph];
      return true;
    }
  }
  return false;
}

static void dls__gpu_spare_event(dls__gpu *g, dls__gpu_device *d, void *event) {
  void **spares = dls__gpu_room(d->spare_events, &d->spare_cap, d->nspare, sizeof *spares);
  if (spares == NULL) {
    g->calls.event_destroy(event);
    return;
  }
  d->spare_events = spares;
  spares[d->nspare++] = event;
}

/* Frees parked blocks whose stream has passed (all of them when `everything`,
 * waiting for each: shutdown). Returns how many were freed. */
static size_t dls__gpu_release_parked(dls__gpu *g, dls__gpu_device *d, bool everything) {
  size_t freed = 0;
  for (size_t i = 0; i < d->nparked;) {
    dls__gpu_parked *b = &d->parked[i];
    if (!everything && (b->event == NULL || g->calls.event_query(b->event) != DLS__GPU_OK)) {
      i++; /* not yet, or not now (the thread is capturing), or only at shutdown */
      continue;
    }
    if (everything && b->event != NULL)
      g->calls.event_synchronize(b->event); /* shutdown: the stream passed long ago, or soon will */
    if (b->event != NULL)
      dls__gpu_spare_event(g, d, b->event);
    g->calls.mem_free(b->ptr);
    d->parked[i] = d->parked[--d->nparked];
    freed++;
  }
  return freed;
}

/* Debug mode frees passed blocks at once with the driver's free, which waits
 * for all work of the device (free_mu held): not while a latch holds a stream,
 * whose timeout it would wait out; they go at a later call, or at shutdown. */
static void dls__gpu_debug_release(dls__gpu *g, dls__gpu_device *d) {
  if (atomic_load_explicit(&dls__latches_holding, memory_order_acquire) == 0)
    dls__gpu_release_parked(g, d, false);
}

/* The parked block that fits `size` best and whose stream has passed; NULL: none. */
static void *dls__gpu_reuse_parked(dls__gpu *g, dls__gpu_device *d, size_t size) {
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < d->nparked; i++) {
    const dls__gpu_parked *b = &d->parked[i];
    bool fits = b->size >= size && b->size / 2 <= size && b->event != NULL; /* at most twice the request */
    if (fits && (best == SIZE_MAX || b->size < d->parked[best].size) && g->calls.event_query(b->event) == DLS__GPU_OK)
      best = i;
  }
  if (best == SIZE_MAX)
    return NULL;
  void *ptr = d->parked[best].ptr;
  dls__gpu_spare_event(g, d, d->parked[best].event);
  d->parked[best] = d->parked[--d->nparked];
  return ptr;
}

/* ---- allocation without a pool ---- */

static dls_status_t dls__gpu_alloc_unpooled(dls__gpu *g, int dev, dls__gpu_device *d, size_t size, void *stream,
                                            void **out_ptr) {
  bool capturing = false;
  DLS__TRY(dls__gpu_capturing(g, dev, stream, &capturing));
  dls__gpu_result r;
  if (capturing) {
    if (g->calls.mem_alloc_async == NULL)
      return dls__fail(DLS_ERR_NOT_SUPPORTED,
                       "allocating %zu bytes on stream %p of %s:%d, which is capturing: this %s runtime has no "
                       "stream-ordered allocator (%s), so no allocation can be captured",
                       size, stream, g->devname, dev, g->name, g->names.mem_alloc_async);
    pthread_mutex_lock(&d->free_mu);
    void **graph_ptrs = dls__gpu_room(d->graph_ptrs, &d->graph_cap, d->ngraph, sizeof *graph_ptrs);
    bool room = graph_ptrs != NULL;
    r = DLS__GPU_OK;
    if (room) {
      d->graph_ptrs = graph_ptrs;
      r = g->calls.mem_alloc_async(out_ptr, size, stream);
      if (r == DLS__GPU_OK)
        graph_ptrs[d->ngraph++] = *out_ptr;
    }
    pthread_mutex_unlock(&d->free_mu);
    if (!room)
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory to note a captured allocation");
    if (r != DLS__GPU_OK)
      return dls__gpu_fail(g, r, dev, "%s(size=%zu, stream=%p) in a capture", g->names.mem_alloc_async, size,
                           stream);
    return DLS_OK;
  }
  return dls__gpu_plain_alloc(g, dev, d, size, out_ptr);
}

dls_status_t dls__gpu_plain_alloc(dls__gpu *g, int dev, dls__gpu_device *d, size_t size, void **out_ptr) {
  unsigned mode = dls__gpu_relax(g);
  pthread_mutex_lock(&d->free_mu);
  void *p = NULL;
  dls__gpu_result r;
  if (g->debug_alloc)
    dls__gpu_debug_release(g, d);
  else
    p = dls__gpu_reuse_parked(g, d, size);
  r = DLS__GPU_OK;
  if (p == NULL) {
    r = g->calls.mem_alloc(&p, size); /* synchronous: usable on every stream at once */
    if (g->classify(r) == DLS__GPU_ERROR_OUT_OF_MEMORY && dls__gpu_release_parked(g, d, false) > 0)
      r = g->calls.mem_alloc(&p, size);
  }
  pthread_mutex_unlock(&d->free_mu);
  dls__gpu_unrelax(g, mode);
  if (r != DLS__GPU_OK)
    return dls__gpu_fail(g, r, dev, "%s(size=%zu)", g->names.mem_alloc, size);
  *out_ptr = p;
  return DLS_OK;
}

/* Parks `ptr` behind an event recorded on `stream`. Debug mode first
 * poisons it with 0xDB in stream order, so a late reader sees garbage and
 * compute-sanitizer sees a use after free once it is really freed. Where no
 * event can be had, the block is kept without one until shutdown: nothing
 * can tell when the stream passes, and waiting for it is not ours to do. */
static dls_status_t dls__gpu_park(dls__gpu *g, int dev, dls__gpu_device *d, void *ptr, void *stream) {
  void *base = ptr;
  size_t size = 0;
  const char *what = g->names.address_range;
  dls__gpu_result r = g->calls.address_range(&base, &size, ptr);
  if (r == DLS__GPU_OK && g->debug_alloc) {
    what = g->names.memset8_async;
    r = g->calls.memset8_async(base, 0xDB, size, stream);
  }
  void *event = NULL;
  pthread_mutex_lock(&d->free_mu);
  if (r == DLS__GPU_OK) {
    if (d->nspare > 0) {
      event = d->spare_events[--d->nspare];
    } else {
      what = g->names.event_create;
      r = g->calls.event_create(&event, g->k.event_disable_timing);
    }
  }
  if (r == DLS__GPU_OK) {
    what = g->names.event_record;
    r = g->calls.event_record(event, stream);
  }
  if (r != DLS__GPU_OK && event != NULL) {
    dls__gpu_spare_event(g, d, event);
    event = NULL;
  }
  dls__gpu_parked *blocks = dls__gpu_room(d->parked, &d->parked_cap, d->nparked, sizeof *blocks);
  if (blocks != NULL) {
    d->parked = blocks;
    blocks[d->nparked++] = (dls__gpu_parked){ptr, size, event};
  }
  pthread_mutex_unlock(&d->free_mu);
  if (blocks == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY,
                     "out of host memory to park ptr=%p freed on stream=%p: the device memory is lost", ptr, stream);
  if (r != DLS__GPU_OK)
    return dls__gpu_fail(g, r, dev, "%s while freeing ptr=%p on stream=%p (the memory is kept until shutdown)",
                         what, ptr, stream);
  return DLS_OK;
}

static dls_status_t dls__gpu_free_unpooled(dls__gpu *g, int dev, dls__gpu_device *d, void *ptr, void *stream) {
  pthread_mutex_lock(&d->free_mu);
  bool graph = d->ngraph > 0 && dls__gpu_graph_ptr_take(d, ptr);
  pthread_mutex_unlock(&d->free_mu);
  if (graph) { /* allocated in a capture: freed in stream order, in one or not */
    dls__gpu_result r = g->calls.mem_free_async(ptr, stream);
    if (r != DLS__GPU_OK)
      return dls__gpu_fail(g, r, dev, "%s(ptr=%p, stream=%p)", g->names.mem_free_async, ptr, stream);
    return DLS_OK;
  }
  bool capturing = false;
  DLS__TRY(dls__gpu_capturing(g, dev, stream, &capturing));
  if (capturing)
    return dls__fail(DLS_ERR_STATE,
                     "freeing ptr=%p on stream %p of %s:%d, which is capturing: the memory was allocated outside the "
                     "capture without a pool, so its free cannot be captured; free it after the capture ends",
                     ptr, stream, g->devname, dev);
  return dls__gpu_plain_free(g, dev, d, ptr, stream);
}

dls_status_t dls__gpu_plain_free(dls__gpu *g, int dev, dls__gpu_device *d, void *ptr, void *stream) {
  DLS__TRY(dls__gpu_park(g, dev, d, ptr, stream));
  if (g->debug_alloc) {
    unsigned mode = dls__gpu_relax(g);
    pthread_mutex_lock(&d->free_mu);
    dls__gpu_debug_release(g, d);
    pthread_mutex_unlock(&d->free_mu);
    dls__gpu_unrelax(g, mode);
  }
  return DLS_OK;
}

void dls__gpu_memory_release(dls__gpu *g, dls__gpu_device *d) {
  pthread_mutex_lock(&d->free_mu);
  dls__gpu_release_parked(g, d, true);
  for (size_t i = 0; i < d->nspare; i++)
    g->calls.event_destroy(d->spare_events[i]);
  free(d->parked);
  free(d->spare_events);
  free(d->graph_ptrs); /* graph memory is the graphs' to free */
  d->parked = NULL;
  d->spare_events = NULL;
  d->graph_ptrs = NULL;
  d->nparked = d->parked_cap = d->nspare = d->spare_cap = d->ngraph = d->graph_cap = 0;
  pthread_mutex_unlock(&d->free_mu);
}

/* ---- the methods ---- */

dls_status_t dls__gpu_mem_alloc(const dls__backend *be, int dev, size_t size, void *stream, void **out_ptr) {
  dls__gpu *g = dls__gpu_of(be);
  *out_ptr = NULL;
  if (size == 0)
    return DLS_OK;
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  void *p = NULL;
  if (DLS__LIKELY(d->pool != NULL)) {
    dls__gpu_result r = g->calls.pool_alloc_async(&p, size, d->pool, stream);
    dls__gpu_leave(g, &sc);
    if (DLS__UNLIKELY(r != DLS__GPU_OK))
      return dls__gpu_fail(g, r, dev, "%s(size=%zu, stream=%p)", g->names.pool_alloc_async, size, stream);
    *out_ptr = p;
    return DLS_OK;
  }
  dls_status_t st = dls__gpu_alloc_unpooled(g, dev, d, size, stream, &p);
  dls__gpu_leave(g, &sc);
  if (st == DLS_OK)
    *out_ptr = p;
  return st;
}

dls_status_t dls__gpu_mem_free(const dls__backend *be, int dev, void *ptr, void *stream) {
  dls__gpu *g = dls__gpu_of(be);
  if (ptr == NULL)
    return DLS_OK;
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  if (DLS__LIKELY(d->pool != NULL)) {
    dls__gpu_result r = g->calls.mem_free_async(ptr, stream);
    dls__gpu_leave(g, &sc);
    if (DLS__UNLIKELY(r != DLS__GPU_OK))
      return dls__gpu_fail(g, r, dev, "%s(ptr=%p, stream=%p)", g->names.mem_free_async, ptr, stream);
    return DLS_OK;
  }
  dls_status_t st = dls__gpu_free_unpooled(g, dev, d, ptr, stream);
  dls__gpu_leave(g, &sc);
  return st;
}

dls_status_t dls__gpu_memcpy_async(const dls__backend *be, int dev, void *dst, const void *src, size_t size,
                                   void *stream) {
  dls__gpu *g = dls__gpu_of(be);
  if (size == 0)
    return DLS_OK;
  /* One address space: the driver tells host from device by the address. */
  DLS__GPU_CALL(g, dev, g->calls.memcpy_async(dst, src, size, stream), "%s(dst=%p, src=%p, size=%zu, stream=%p)",
                g->names.memcpy_async, dst, src, size, stream);
  return DLS_OK;
}

dls_status_t dls__gpu_host_mapped_alloc(const dls__backend *be, int dev, size_t size, void **out_host,
                                        void **out_device) {
  dls__gpu *g = dls__gpu_of(be);
  *out_host = NULL;
  *out_device = NULL;
  if (size == 0)
    return DLS_OK;
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  void *host = NULL, *dptr = NULL;
  dls_status_t st = DLS_OK;
  dls__gpu_result r = g->calls.host_alloc(&host, size, g->k.host_alloc_mapped_portable);
  if (r != DLS__GPU_OK) {
    st = dls__gpu_fail(g, r, dev, "%s(size=%zu, flags=mapped|portable)", g->names.host_alloc, size);
  } else {
    r = g->calls.host_device_pointer(&dptr, host, 0);
    if (r != DLS__GPU_OK) {
      st = dls__gpu_fail(g, r, dev, "%s(host=%p)", g->names.host_device_pointer, host);
      g->calls.host_free(host);
    }
  }
  dls__gpu_leave(g, &sc);
  if (st != DLS_OK)
    return st;
  memset(host, 0, size);
  *out_host = host;
  *out_device = dptr;
  return DLS_OK;
}

dls_status_t dls__gpu_host_mapped_free(const dls__backend *be, int dev, void *host) {
  dls__gpu *g = dls__gpu_of(be);
  if (host != NULL) /* NULL: nothing to free */
    DLS__GPU_CALL(g, dev, g->calls.host_free(host), "%s(host=%p)", g->names.host_free, host);
  return DLS_OK;
}
