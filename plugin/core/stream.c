/* SPDX-License-Identifier: Apache-2.0 */
/* Streams: owned, pooled, foreign and default; their pool; how messages name them. (wait.c: waits between streams
 * and of the host.) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/capture.h"
#include "core/stream.h"

static dls__stream *stream_new(dls__device *dev, void *native, int kind) {
  dls__stream *s = dls__obj_alloc(DLS__OBJ_STREAM, sizeof *s);
  if (s == NULL)
    return NULL;
  s->dev = dev;
  s->native = native;
  s->kind = kind;
  atomic_init(&s->refs, 1);
  s->id = 0;
  atomic_init(&s->open_groups, 0);
  s->capture_unseen = kind == DLS__STREAM_FOREIGN && dev->be->stream_capture_status != NULL;
  atomic_init(&s->mark, NULL);
  s->live_prev = NULL;
  s->owner = NULL;
  s->keep_release = NULL;
  s->keep_data = NULL;
  s->bound = NULL;
  atomic_init(&s->cache, NULL);
  s->cache_gone = NULL;
  /* A GPU's per-thread default stream is another stream on each thread: what one thread freed on it is in no order
   * with another thread's next allocation on it, so nothing is cached there. */
  atomic_init(&s->cache_off,
              dev->device.device_type != kDLCPU && native == (void *)(uintptr_t)DLS_STREAM_PER_THREAD);
  if (kind != DLS__STREAM_DEFAULT) {
    pthread_mutex_lock(&dev->mu);
    s->live_next = dev->live;
    if (dev->live != NULL)
      dev->live->live_prev = s;
    dev->live = s;
    pthread_mutex_unlock(&dev->mu);
  } else {
    s->live_next = NULL;
  }
  return s;
}

/* Off the device's list, once no reference is left (dev->mu held). */
static void live_remove(dls__stream *s) {
  if (s->live_prev != NULL)
    s->live_prev->live_next = s->live_next;
  else
    s->dev->live = s->live_next;
  if (s->live_next != NULL)
    s->live_next->live_prev = s->live_prev;
}

dls_status_t dls__stream_sync_live(dls__device *dev) {
  /* The live streams, each held by a reference, waited on outside the lock. */
  size_t n = 0;
  pthread_mutex_lock(&dev->mu);
  for (dls__stream *s = dev->live; s != NULL; s = s->live_next)
    n++;
  pthread_mutex_unlock(&dev->mu);
  size_t cap = n + 16; /* streams made meanwhile need not be waited for; a few more fit anyway */
  dls__stream **held = dls__malloc(cap * sizeof *held);
  if (held == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory to list %zu streams", n);
  size_t k = 0;
  pthread_mutex_lock(&dev->mu);
  for (dls__stream *s = dev->live; s != NULL && k < cap; s = s->live_next)
    if (dls__stream_ref_if_alive(s))
      held[k++] = s;
  pthread_mutex_unlock(&dev->mu);
  dls_status_t first = DLS_OK;
  for (size_t i = 0; i < k; i++) {
    uint64_t c;
    if (first == DLS_OK && dls__stream_capture(held[i], &c) == DLS__CAPTURE_NONE)
      first = dev->be->stream_synchronize(dev->be, dev->id, held[i]->native);
    dls__stream_unref(held[i]);
  }
  dls__free(held);
  return first;
}

/* Gives the object a handle; on failure releases it and returns the status. */
static dls_status_t stream_publish(dls__stream *s, const char *call, dls_stream_t *out) {
  s->id = dls__table_add(&dls__stream_table, s);
  if (s->id == 0) {
    dls_status_t st = dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
    dls__stream_unref(s);
    return st;
  }
  out->id = s->id;
  return DLS_OK;
}

dls_status_t dls__stream_default(dls__device *dev, int kind, dls__stream **out) {
  dls__stream *s = dev->defaults[kind];
  if (DLS__LIKELY(s != NULL)) {
    *out = s;
    return DLS_OK;
  }
  pthread_mutex_lock(&dev->mu);
  s = dev->defaults[kind];
  if (s == NULL) {
    /* DLS__STREAM_NONE names no real stream: no backend native behind it. */
    void *native = (void *)UINTPTR_MAX;
    dls_status_t st = kind == DLS__STREAM_NONE ? DLS_OK : dev->be->stream_default(dev->be, dev->id, kind, &native);
    if (st != DLS_OK) {
      pthread_mutex_unlock(&dev->mu);
      return st;
    }
    s = stream_new(dev, native, DLS__STREAM_DEFAULT);
    if (s == NULL) {
      pthread_mutex_unlock(&dev->mu);
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a default stream");
    }
    atomic_thread_fence(memory_order_release);
    dev->defaults[kind] = s;
  }
  pthread_mutex_unlock(&dev->mu);
  *out = s;
  return DLS_OK;
}

dls__stream *dls__stream_get_reserved(dls_stream_t stream, const char *call, const char *arg,
                                      dls_status_t *out_status) {
  int kind = (int)((stream.id >> 24) & 0xff);
  DLDevice device = dls_device((DLDeviceType)((stream.id >> 16) & 0xff), (int32_t)(stream.id & 0xffff));
  if (kind != DLS_STREAM_LEGACY && kind != DLS_STREAM_PER_THREAD) {
    *out_status = dls__fail(DLS_ERR_INVALID_HANDLE,
                            "%s(%s): 0x%llx is a reserved stream handle of unknown kind %d (use dls_stream_default)",
                            call, arg, (unsigned long long)stream.id, kind);
    return NULL;
  }
  dls__device *dev = dls__device_get(device, call, out_status);
  if (dev == NULL)
    return NULL;
  dls__stream *s = NULL;
  dls_status_t st = dls__stream_default(dev, kind, &s);
  if (st != DLS_OK) {
    *out_status = dls__fail_prefix(st, "%s(%s)", call, arg);
    return NULL;
  }
  return s;
}

_Atomic bool dls__bind_branches = true;

/* Grows a list of natives and its origins to room for one more (dev->mu held). */
static bool room(void ***natives, void ***origins, size_t n, size_t *cap) {
  if (n < *cap)
    return true;
  size_t c = *cap ? *cap * 2 : 8;
  void **p = dls__realloc(*natives, c * sizeof *p);
  if (p == NULL)
    return false;
  *natives = p;
  void **o = dls__realloc(*origins, c * sizeof *o);
  if (o == NULL)
    return false; /* the larger list stays: its cap is kept */
  *origins = o;
  *cap = c;
  return true;
}

/* An origin no stream has: an idle stream whose origin was destroyed while the stream was in a capture. */
#define ORIGIN_GONE ((void *)(uintptr_t)3)

/* Takes idle entry i out of the pool (dev->mu held). */
static void *pool_remove(dls__device *dev, size_t i) {
  void *native = dev->stream_pool[i];
  dev->stream_pool_bound -= dev->stream_pool_origin[i] != NULL;
  dev->stream_pool_n--;
  dev->stream_pool[i] = dev->stream_pool[dev->stream_pool_n];
  dev->stream_pool_origin[i] = dev->stream_pool_origin[dev->stream_pool_n];
  return native;
}

/* Pools an idle native, bound to `origin` (NULL: none); false when it could not be (dev->mu held). With
 * DLS__BOUND_MAX bound streams idle, the bound one lowest in the pool makes room (among the longest idle; into
 * *evicted, to destroy after the lock): the newest binding is the one a group is about to ask for. */
static bool pool_push(dls__device *dev, void *native, void *origin, void **evicted) {
  if (origin != NULL && dev->stream_pool_bound >= DLS__BOUND_MAX) {
    size_t i = 0;
    while (dev->stream_pool_origin[i] == NULL) /* one is bound: the count says so */
      i++;
    *evicted = pool_remove(dev, i);
  }
  if (!room(&dev->stream_pool, &dev->stream_pool_origin, dev->stream_pool_n, &dev->stream_pool_cap))
    return false;
  dev->stream_pool[dev->stream_pool_n] = native;
  dev->stream_pool_origin[dev->stream_pool_n++] = origin;
  dev->stream_pool_bound += origin != NULL;
  return true;
}

static void pool_put(dls__device *dev, void *native, void *origin) {
  void *evicted = NULL;
  pthread_mutex_lock(&dev->mu);
  dev->pooled_out--;
  bool pooled = pool_push(dev, native, origin, &evicted);
  pthread_mutex_unlock(&dev->mu);
  if (!pooled)
    dev->be->stream_destroy(dev->be, dev->id, native); /* after its queued work, by the driver's rule */
  if (evicted != NULL)
    dev->be->stream_destroy(dev->be, dev->id, evicted);
}

/* The origin `native` is destroyed (an owned stream's end): the idle streams bound to it first wait for its work so
 * far, then are bound to nothing, so that no stream made later at the same address inherits a binding it never
 * earned. One that cannot be made to wait is destroyed instead; one still in a capture keeps a binding nobody has. */
static void pool_unbind(dls__device *dev, void *native) {
  void *bound[DLS__BOUND_MAX];
  size_t n = 0;
  pthread_mutex_lock(&dev->mu);
  if (dev->stream_pool_bound == 0 && dev->in_capture_n == 0) {
    pthread_mutex_unlock(&dev->mu);
    return;
  }
  for (size_t i = dev->stream_pool_n; i-- > 0 && n < DLS__BOUND_MAX;)
    if (dev->stream_pool_origin[i] == native)
      bound[n++] = pool_remove(dev, i);
  for (size_t i = 0; i < dev->in_capture_n; i++)
    if (dev->in_capture_origin[i] == native)
      dev->in_capture_origin[i] = ORIGIN_GONE;
  pthread_mutex_unlock(&dev->mu);
  if (n == 0)
    return;
  const dls__backend *be = dev->be;
  void *ev = NULL;
  bool marked = dls__event_pool_get(dev, &ev) == DLS_OK && be->event_record(be, dev->id, ev, native) == DLS_OK;
  for (size_t i = 0; i < n; i++) {
    bool pooled = marked && be->stream_wait_event(be, dev->id, bound[i], ev) == DLS_OK;
    if (pooled) {
      void *none = NULL;
      pthread_mutex_lock(&dev->mu);
      pooled = pool_push(dev, bound[i], NULL, &none);
      pthread_mutex_unlock(&dev->mu);
    }
    if (!pooled)
      be->stream_destroy(be, dev->id, bound[i]);
  }
  if (ev != NULL)
    dls__event_pool_put(dev, ev);
}

/* Whether a native stream is in a capture (a branch that joined one stays in
 * it until the capture ends). Asked only while some capture is underway. */
static bool native_capturing(dls__device *dev, void *native) {
  int status = DLS__CAPTURE_NONE;
  uint64_t id;
  return dev->be->stream_capture_status != NULL && dls__capture_status_call(dev, native, &status, &id) == DLS_OK &&
         status != DLS__CAPTURE_NONE;
}

/* An idle pooled stream bound to `origin` (NULL: an unbound one), or NULL. A stream still in a capture is set aside
 * until the capture is over: work queued on it would be recorded, not run. */
static void *pool_take(dls__device *dev, void *origin) {
  void *native = NULL, *evicted = NULL;
  pthread_mutex_lock(&dev->mu);
  bool check = atomic_load_explicit(&dls__captures_known, memory_order_acquire) > 0 || dev->in_capture_n > 0;
  for (size_t i = 0; check && evicted == NULL && i < dev->in_capture_n;) { /* one eviction a call at most */
    if (!native_capturing(dev, dev->in_capture[i]) &&
        pool_push(dev, dev->in_capture[i], dev->in_capture_origin[i], &evicted)) {
      dev->in_capture_n--;
      dev->in_capture[i] = dev->in_capture[dev->in_capture_n];
      dev->in_capture_origin[i] = dev->in_capture_origin[dev->in_capture_n];
    } else {
      i++;
    }
  }
  for (size_t i = dev->stream_pool_n; native == NULL && i-- > 0;) {
    if (dev->stream_pool_origin[i] != origin)
      continue;
    void *o = dev->stream_pool_origin[i];
    native = pool_remove(dev, i);
    if (check && native_capturing(dev, native)) {
      if (!room(&dev->in_capture, &dev->in_capture_origin, dev->in_capture_n, &dev->in_capture_cap)) {
        void *none = NULL; /* it was just taken out: no eviction */
        (void)pool_push(dev, native, o, &none); /* keep it; make a new one instead */
        native = NULL;
        break;
      }
      dev->in_capture[dev->in_capture_n] = native;
      dev->in_capture_origin[dev->in_capture_n++] = o;
      native = NULL;
    }
  }
  dev->pooled_out++;
  pthread_mutex_unlock(&dev->mu);
  if (evicted != NULL)
    dev->be->stream_destroy(dev->be, dev->id, evicted);
  return native;
}

const char *dls__stream_describe(const dls__stream *s, uint64_t cap, char *buf, size_t size) {
  static const char *const kinds[] = {"", "owned", "pooled", "foreign", "default"};
  const char *kind = s->kind >= 1 && s->kind <= 4 ? kinds[s->kind] : "";
  char where[48];
  if (cap != 0)
    snprintf(where, sizeof where, "in capture %" PRIu64, cap);
  else
    snprintf(where, sizeof where, "not capturing");
  snprintf(buf, size, "%s stream %p on %s (%s)", kind, s->native, s->dev->name, where);
  return buf;
}

dls_status_t dls__stream_mark_make(dls__stream *s, void **out_event) {
  void *ev;
  DLS__TRY(dls__event_pool_get(s->dev, &ev));
  void *none = NULL;
  if (!atomic_compare_exchange_strong_explicit(&s->mark, &none, ev, memory_order_acq_rel, memory_order_acquire)) {
    dls__event_pool_put(s->dev, ev); /* another thread made it first */
    ev = none;
  }
  *out_event = ev;
  return DLS_OK;
}

void dls__stream_release(dls__stream *s) {
  if (atomic_load_explicit(&s->cache, memory_order_acquire) != NULL && !s->cache_gone(s, true))
    return; /* its cache keeps it until the stream's capture is over */
  pthread_mutex_lock(&s->dev->mu);
  live_remove(s);
  pthread_mutex_unlock(&s->dev->mu);
  switch (s->kind) {
  case DLS__STREAM_OWNED:
    pool_unbind(s->dev, s->native);
    s->dev->be->stream_destroy(s->dev->be, s->dev->id, s->native);
    break;
  case DLS__STREAM_POOLED:
    pool_put(s->dev, s->native, s->bound);
    break;
  default: /* foreign: the native stream is not ours (a wrap of one we made holds that stream) */
    break;
  }
  void *mark = atomic_load_explicit(&s->mark, memory_order_acquire);
  if (mark != NULL) /* recorded eagerly only: reusable at once */
    dls__event_pool_put(s->dev, mark);
  dls__stream *owner = s->owner;
  void (*keep_release)(void *) = s->keep_release;
  void *keep_data = s->keep_data;
  dls__obj_free(DLS__OBJ_STREAM, s);
  if (owner != NULL)
    dls__stream_unref(owner);
  if (keep_release != NULL) /* the native may go now */
    keep_release(keep_data);
}

/* The live stream dlstream made (owned or pooled) whose native stream is `native`, with a reference; NULL if
 * none: a wrap of its native keeps it, so that ending its handle cannot destroy a native stream in use. */
static dls__stream *maker_of(dls__device *dev, void *native) {
  dls__stream *found = NULL;
  pthread_mutex_lock(&dev->mu);
  for (dls__stream *o = dev->live; o != NULL && found == NULL; o = o->live_next)
    if (o->native == native && (o->kind == DLS__STREAM_OWNED || o->kind == DLS__STREAM_POOLED) &&
        dls__stream_ref_if_alive(o))
      found = o;
  pthread_mutex_unlock(&dev->mu);
  return found;
}

/* ---- public API ---- */

dls_status_t dls_stream_priority_range(DLDevice device, int *out_least, int *out_greatest) {
  static const char call[] = "dls_stream_priority_range";
  DLS__ENTER(call);
  DLS__OUT(call, out_least);
  DLS__OUT(call, out_greatest);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  st = dev->be->stream_priority_range(dev->be, dev->id, out_least, out_greatest);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s(device=%s)", call, dev->name);
}

dls_status_t dls_stream_create(DLDevice device, const dls_stream_options_t *opt_options, dls_stream_t *out_stream) {
  static const char call[] = "dls_stream_create";
  DLS__ENTER(call);
  DLS__OUT(call, out_stream);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  int priority = opt_options ? opt_options->priority : 0;
  unsigned flags = opt_options ? opt_options->flags : 0;
  if (flags & ~DLS_STREAM_BLOCKING)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(flags=0x%x): unknown flag bits 0x%x (known: DLS_STREAM_BLOCKING)",
                     call, flags, flags & ~DLS_STREAM_BLOCKING);
  if (priority != 0) {
    int least, greatest;
    st = dev->be->stream_priority_range(dev->be, dev->id, &least, &greatest);
    if (st != DLS_OK)
      return dls__fail_prefix(st, "%s(device=%s, priority=%d)", call, dev->name, priority);
    if (priority > least || priority < greatest)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                       "%s(priority=%d): out of range for %s: %d (most urgent) to %d (least urgent)", call, priority,
                       dev->name, greatest, least);
  }
  void *native;
  st = dev->be->stream_create(dev->be, dev->id, flags, priority, &native);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(device=%s)", call, dev->name);
  dls__stream *s = stream_new(dev, native, DLS__STREAM_OWNED);
  if (s == NULL) {
    dev->be->stream_destroy(dev->be, dev->id, native);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  }
  return stream_publish(s, call, out_stream);
}

/* A pooled stream of `dev`, one idle bound to `origin` first when that is not NULL, else an unbound one. */
static dls_status_t stream_acquire(dls__device *dev, void *origin, const char *call, dls_stream_t *out_stream) {
  void *native = origin != NULL ? pool_take(dev, origin) : NULL;
  if (native == NULL) {
    if (origin != NULL) { /* the pool_take above counted one out */
      pthread_mutex_lock(&dev->mu);
      dev->pooled_out--;
      pthread_mutex_unlock(&dev->mu);
    }
    native = pool_take(dev, NULL);
  }
  dls_status_t st;
  if (native == NULL) {
    st = dev->be->stream_create(dev->be, dev->id, DLS_STREAM_NON_BLOCKING, 0, &native);
    if (st != DLS_OK) {
      pthread_mutex_lock(&dev->mu);
      dev->pooled_out--;
      pthread_mutex_unlock(&dev->mu);
      return dls__fail_prefix(st, "%s(device=%s)", call, dev->name);
    }
  }
  dls__stream *s = stream_new(dev, native, DLS__STREAM_POOLED);
  if (s == NULL) {
    pool_put(dev, native, origin);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  }
  s->bound = origin;
  return stream_publish(s, call, out_stream);
}

dls_status_t dls__stream_acquire_branch(dls__stream *origin, const char *call, dls_stream_t *out) {
  /* The origin by its native (a legacy default stream's NULL as 1: both name it; NULL is "unbound"). */
  void *o = NULL;
  if (atomic_load_explicit(&dls__bind_branches, memory_order_relaxed))
    o = origin->native != NULL ? origin->native : (void *)(uintptr_t)1;
  return stream_acquire(origin->dev, o, call, out);
}

dls_status_t dls_stream_acquire(DLDevice device, dls_stream_t *out_stream) {
  static const char call[] = "dls_stream_acquire";
  DLS__ENTER(call);
  DLS__OUT(call, out_stream);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  return stream_acquire(dev, NULL, call, out_stream);
}

dls_status_t dls_stream_wrap(DLDevice device, void *native, dls_stream_t *out_stream) {
  static const char call[] = "dls_stream_wrap";
  DLS__ENTER(call);
  DLS__OUT(call, out_stream);
  /* Values no stream can have are refused before a driver reads them as a
   * pointer: the first page is never mapped, and user-space pointers are
   * never negative. NULL, 1 and 2 name the GPU default streams. */
  uintptr_t v = (uintptr_t)native;
  bool gpu = device.device_type == kDLCUDA || device.device_type == kDLROCM;
  if (v != 0 && !(gpu && (v == 1 || v == 2)) && (v < 4096 || (intptr_t)v < 0)) {
    char dev_name[32];
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(device=%s, native=%p): not a stream: values below 4096 other than NULL, 1 "
                     "(legacy) and 2 (per-thread) and values with the sign bit set name no stream",
                     call, dls_device_str(device, dev_name, sizeof dev_name), native);
  }
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  if (dev->be->stream_check != NULL) {
    st = dev->be->stream_check(dev->be, dev->id, native);
    if (st != DLS_OK)
      return dls__fail_prefix(st, "%s(device=%s, native=%p)", call, dev->name, native);
  }
  dls__stream *owner = native != NULL ? maker_of(dev, native) : NULL;
  dls__stream *s = stream_new(dev, native, DLS__STREAM_FOREIGN);
  if (s == NULL) {
    if (owner != NULL)
      dls__stream_unref(owner);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  }
  s->owner = owner;
  return stream_publish(s, call, out_stream);
}

dls_status_t dls_stream_destroy(dls_stream_t stream) {
  static const char call[] = "dls_stream_destroy";
  if (stream.id == 0 || (uint32_t)(stream.id >> 32) == DLS_STREAM_RESERVED_GENERATION)
    return DLS_OK;
  DLS__ENTER(call);
  DLS__END(&dls__stream_table, stream, call, "stream");
  return DLS_OK;
}

/* The handle's end: a capture begun through it is dropped (no one could end
 * it any more), and the handle's reference goes. */
void dls__stream_drop(void *obj) {
  dls__stream *s = obj;
  dls__capture_drop_on(s);
  if (s->kind == DLS__STREAM_FOREIGN) { /* its native need outlive the handle only: no memory is kept on it */
    atomic_store_explicit(&s->cache_off, true, memory_order_release);
    if (atomic_load_explicit(&s->cache, memory_order_acquire) != NULL)
      (void)s->cache_gone(s, false);
  }
  dls__stream_unref(s);
}
/* The table's resolver of reserved handles (the default streams). */
static void *reserved_stream(uint64_t id, const char *call, const char *arg, dls_status_t *out_status) {
  return dls__stream_get_reserved((dls_stream_t){id}, call, arg, out_status);
}

/* Streams retire what was read (base/handle.h, .retire_read_only): event record and wait read them inside their pin
 * without a hold (core/pin.h); the end of a stream one of them read waits for a grace period, then drops it at once,
 * so that its effects (captures begun through it dropped, its native destroyed or pooled, a framework's object let
 * go) are done when dls_stream_destroy returns, as for any other stream. */
dls__table dls__stream_table = DLS__TABLE_RETIRING_READ("stream", DLS_HANDLE_STREAM, dls__stream_drop, reserved_stream,
                                                        dls__pin_grace, dls__pin_grace_may_wait);

dls_status_t dls_stream_add_callback(dls_stream_t stream, dls_host_fn fn, void *user_data) {
  static const char call[] = "dls_stream_add_callback";
  DLS__ENTER(call);
  if (fn == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(fn=NULL): callback is NULL", call);
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (s->dev->be->host_callback == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED, "%s: the %s backend has no host callbacks", call, s->dev->be->name);
  dls_status_t st = s->dev->be->host_callback(s->dev->be, s->dev->id, s->native, fn, user_data);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_stream_native(dls_stream_t stream, void **out_native) {
  static const char call[] = "dls_stream_native";
  DLS__ENTER(call);
  DLS__OUT(call, out_native);
  DLS__GET_OF(stream, s, stream, call, "stream");
  *out_native = s->native;
  return DLS_OK;
}

dls_status_t dls_stream_device(dls_stream_t stream, DLDevice *out_device) {
  static const char call[] = "dls_stream_device";
  DLS__ENTER(call);
  DLS__OUT(call, out_device);
  DLS__GET_OF(stream, s, stream, call, "stream");
  *out_device = s->dev->device;
  return DLS_OK;
}

static void drop_stream_objects(dls__device *dev) {
  for (int k = 0; k < 3; k++) {
    void *mark = dev->defaults[k] != NULL ? atomic_load_explicit(&dev->defaults[k]->mark, memory_order_acquire) : NULL;
    if (mark != NULL)
      (void)dev->be->event_destroy(dev->be, dev->id, mark);
    dls__free(dev->defaults[k]);
    dev->defaults[k] = NULL;
  }
  for (size_t k = 0; k < dev->stream_pool_n; k++)
    dev->be->stream_destroy(dev->be, dev->id, dev->stream_pool[k]);
  for (size_t k = 0; k < dev->in_capture_n; k++)
    dev->be->stream_destroy(dev->be, dev->id, dev->in_capture[k]);
  dls__free(dev->stream_pool);
  dls__free(dev->stream_pool_origin);
  dls__free(dev->in_capture);
  dls__free(dev->in_capture_origin);
  dev->stream_pool = NULL;
  dev->stream_pool_origin = NULL;
  dev->in_capture = NULL;
  dev->in_capture_origin = NULL;
  dev->stream_pool_n = dev->stream_pool_cap = dev->stream_pool_bound = 0;
  dev->in_capture_n = dev->in_capture_cap = 0;
}

/* Called by dls_shutdown once no handle is left: default stream objects
 * (their natives belong to the backend) and the pool's idle streams. */
void dls__streams_shutdown(void) { dls__each_device(drop_stream_objects); }
