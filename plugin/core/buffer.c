/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers and the stream-ordered deallocation rule; the deferred release queue. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DLS__GET_BUFFER(var, handle, call, arg) DLS__GET(DLS_HANDLE_BUFFER, dls__buffer, var, handle, call, arg)

/* An entry of the deferred release queue. */
typedef struct dls__deferred {
  struct dls__deferred *next;
  dls__device *dev;
  void **events;
  int nevents;
  dls_release_fn release;
  void *user_data;
  void *events_inline[DLS__USES_INLINE]; /* `events` when they fit */
} dls__deferred;

static void deferred_enqueue(dls__deferred *d, dls__device *dev, void **events, int nevents, dls_release_fn release,
                             void *user_data);

static dls__buffer *buffer_new(dls__device *dev, void *ptr, size_t size, dls__stream *s) {
  dls__buffer *b = dls__obj_alloc(DLS__OBJ_BUFFER, sizeof *b);
  if (b == NULL)
    return NULL;
  b->dev = dev;
  b->ptr = ptr;
  b->size = size;
  b->stream = s;
  dls__stream_ref(s);
  b->borrowed = false;
  b->release_unordered = false;
  b->release = NULL;
  b->user_data = NULL;
  atomic_flag_clear(&b->mu.f);
  b->uses = b->uses_inline;
  b->nuses = 0;
  b->cap = DLS__USES_INLINE;
  atomic_init(&b->refs, 1);
  b->id = 0;
  b->spare = NULL;
  return b;
}

dls_status_t dls__buffer_alloc(dls__stream *s, size_t size, dls__buffer **out) {
  void *ptr = NULL;
  DLS__TRY(s->dev->be->mem_alloc(s->dev->id, size, s->native, &ptr));
  dls__buffer *b = buffer_new(s->dev, ptr, size, s);
  if (b == NULL) {
    s->dev->be->mem_free(s->dev->id, ptr, s->native);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a buffer record");
  }
  *out = b;
  return DLS_OK;
}

dls_status_t dls__buffer_borrow(dls__device *dev, void *ptr, size_t size, dls__stream *producer,
                                dls_release_fn release, void *user_data, dls__buffer **out) {
  dls__deferred *spare = NULL;
  if (release != NULL && (spare = dls__obj_alloc(DLS__OBJ_DEFERRED, sizeof *spare)) == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a buffer record");
  dls__buffer *b = buffer_new(dev, ptr, size, producer);
  if (b == NULL) {
    dls__obj_free(DLS__OBJ_DEFERRED, spare);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a buffer record");
  }
  b->spare = spare;
  b->borrowed = true;
  /* A GPU framework frees in stream order on its producer stream; host
   * memory is freed by its owner at once, while CPU streams may still run
   * work queued on the producer. */
  b->release_unordered = dev->device.device_type == kDLCPU;
  b->release = release;
  b->user_data = user_data;
  *out = b;
  return DLS_OK;
}

void dls__buffer_ref(dls__buffer *b) { atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed); }

static bool same_stream(const dls__stream *a, const dls__stream *b) {
  return a == b || (a->dev == b->dev && a->native == b->native);
}

/* The use entry of `s`, added with a pooled event when missing. b->mu held. */
static dls_status_t use_entry(dls__buffer *b, dls__stream *s, dls__use **out) {
  for (int i = 0; i < b->nuses; i++) {
    if (same_stream(b->uses[i].stream, s)) {
      *out = &b->uses[i];
      return DLS_OK;
    }
  }
  if (b->nuses == b->cap) {
    int cap = b->cap * 2;
    dls__use *p = malloc((size_t)cap * sizeof *p);
    if (p == NULL)
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a buffer's use set");
    memcpy(p, b->uses, (size_t)b->nuses * sizeof *p);
    if (b->uses != b->uses_inline)
      free(b->uses);
    b->uses = p;
    b->cap = cap;
  }
  void *ev;
  DLS__TRY(dls__event_pool_get(b->dev, &ev));
  dls__use *u = &b->uses[b->nuses++];
  u->stream = s;
  u->event = ev;
  u->stale = false;
  dls__stream_ref(s);
  *out = u;
  return DLS_OK;
}

/* Records work queued on `s` so far as a use, whatever stream it is. */
static dls_status_t record_use(dls__buffer *b, dls__stream *s) {
  dls__spin_lock(&b->mu);
  dls__use *u;
  dls_status_t st = use_entry(b, s, &u);
  if (st == DLS_OK) {
    /* Re-recording moves the marker past this use; the earlier uses on the
     * same stream are before it in stream order. */
    st = b->dev->be->event_record(b->dev->id, u->event, s->native);
    u->stale = st != DLS_OK;
  }
  dls__spin_unlock(&b->mu);
  return st;
}

/* A stale use's event missed its latest record: recording it now covers
 * everything queued on its stream so far. */
static dls_status_t use_refresh(dls__buffer *b, dls__use *u) {
  if (DLS__LIKELY(!u->stale))
    return DLS_OK;
  DLS__TRY(b->dev->be->event_record(b->dev->id, u->event, u->stream->native));
  u->stale = false;
  return DLS_OK;
}

dls_status_t dls__buffer_use(dls__buffer *b, dls__stream *s) {
  if (same_stream(b->stream, s))
    return DLS_OK;
  return record_use(b, s);
}

dls_status_t dls__buffer_reserve(dls__buffer *b, dls__stream *s) {
  if (same_stream(b->stream, s))
    return DLS_OK;
  dls__spin_lock(&b->mu);
  dls__use *u;
  dls_status_t st = use_entry(b, s, &u);
  dls__spin_unlock(&b->mu);
  return st;
}

dls_status_t dls__buffer_order_before(dls__buffer *b, dls__stream *consumer) {
  dls__device *dev = b->dev;
  DLS__TRY(dls__stream_order(consumer, b->stream));
  dls_status_t st = DLS_OK;
  dls__spin_lock(&b->mu);
  for (int i = 0; i < b->nuses && st == DLS_OK; i++) {
    if (!same_stream(b->uses[i].stream, consumer)) {
      st = use_refresh(b, &b->uses[i]);
      if (st == DLS_OK)
        st = dev->be->stream_wait_event(dev->id, consumer->native, b->uses[i].event);
    }
  }
  dls__spin_unlock(&b->mu);
  return st;
}

/* Blocks until an event completes. Should the driver fail to wait, polls
 * instead: a release must never run before the work it waits for. */
static void event_wait(dls__device *dev, void *ev) {
  if (dev->be->event_synchronize(dev->id, ev) == DLS_OK)
    return;
  int done = 0;
  while (dev->be->event_query(dev->id, ev, &done) == DLS_OK && !done)
    sched_yield();
}

/* Whether every recorded use has already completed (a cheap query each). */
static bool uses_complete(dls__buffer *b) {
  for (int i = 0; i < b->nuses; i++) {
    int done = 0;
    if (b->dev->be->event_query(b->dev->id, b->uses[i].event, &done) != DLS_OK || !done)
      return false;
  }
  return true;
}

/* The deferred release of an owned buffer: its uses have completed. */
static void owned_free(void *user_data) {
  dls__buffer *b = user_data;
  b->dev->be->mem_free(b->dev->id, b->ptr, b->stream->native);
  dls__stream_unref(b->stream);
  dls__obj_free(DLS__OBJ_BUFFER, b);
}

/* The allocation stream could not be made to wait on a use: the buffer
 * record waits in the deferred queue for the use events instead, then frees
 * in stream order. false: no memory for the entry. */
static bool defer_owned_free(dls__buffer *b) {
  dls__deferred *d = dls__obj_alloc(DLS__OBJ_DEFERRED, sizeof *d);
  void **events = d == NULL                     ? NULL
                  : b->nuses <= DLS__USES_INLINE ? d->events_inline
                                                 : malloc((size_t)b->nuses * sizeof *events);
  if (events == NULL) {
    dls__obj_free(DLS__OBJ_DEFERRED, d);
    return false;
  }
  for (int i = 0; i < b->nuses; i++) {
    events[i] = b->uses[i].event;
    dls__stream_unref(b->uses[i].stream);
  }
  if (b->uses != b->uses_inline)
    free(b->uses);
  deferred_enqueue(d, b->dev, events, b->nuses, owned_free, b);
  return true;
}

/* The last reference is gone: apply the rule. Never blocks the host. */
static void buffer_release(dls__buffer *b) {
  dls__device *dev = b->dev;
  dls__stream *a = b->stream;
  int idle = 1;
  if (b->borrowed && b->release_unordered && b->release != NULL && a->native != (void *)UINTPTR_MAX &&
      dev->be->stream_query(dev->id, a->native, &idle) == DLS_OK && !idle && record_use(b, a) != DLS_OK)
    dev->be->stream_synchronize(dev->id, a->native); /* no memory to defer: wait rather than free early */
  for (int i = 0; i < b->nuses; i++)
    if (use_refresh(b, &b->uses[i]) != DLS_OK) /* the use's work is not covered: wait rather than free early */
      dev->be->stream_synchronize(dev->id, b->uses[i].stream->native);
  if (!b->borrowed) {
    bool ordered = true;
    for (int i = 0; i < b->nuses; i++)
      ordered &= dev->be->stream_wait_event(dev->id, a->native, b->uses[i].event) == DLS_OK;
    if (!ordered && b->ptr != NULL && defer_owned_free(b))
      return;
    for (int i = 0; i < b->nuses; i++) {
      if (!ordered) /* no memory to defer: wait rather than free early */
        event_wait(dev, b->uses[i].event);
      dls__event_pool_put(dev, b->uses[i].event);
    }
    if (b->ptr != NULL)
      dev->be->mem_free(dev->id, b->ptr, a->native);
  } else if (b->release == NULL || b->nuses == 0 || uses_complete(b)) {
    /* No release to hold back: the use events may go back to the pool. */
    for (int i = 0; i < b->nuses; i++)
      dls__event_pool_put(dev, b->uses[i].event);
    if (b->release)
      b->release(b->user_data);
  } else {
    /* The entry was made with the buffer: deferring needs no memory, unless
     * more streams used it than the entry holds inline. */
    dls__deferred *d = b->spare;
    b->spare = NULL;
    void **events = b->nuses <= DLS__USES_INLINE ? d->events_inline : malloc((size_t)b->nuses * sizeof *events);
    if (events == NULL) {
      /* No memory to defer: wait here rather than release early. */
      for (int i = 0; i < b->nuses; i++) {
        event_wait(dev, b->uses[i].event);
        dls__event_pool_put(dev, b->uses[i].event);
      }
      dls__obj_free(DLS__OBJ_DEFERRED, d);
      b->release(b->user_data);
    } else {
      for (int i = 0; i < b->nuses; i++)
        events[i] = b->uses[i].event;
      deferred_enqueue(d, dev, events, b->nuses, b->release, b->user_data);
    }
  }
  /* The events carry the ordering now: the use streams' records may go. */
  for (int i = 0; i < b->nuses; i++)
    dls__stream_unref(b->uses[i].stream);
  dls__stream_unref(a);
  if (b->uses != b->uses_inline)
    free(b->uses);
  dls__obj_free(DLS__OBJ_DEFERRED, b->spare); /* not needed: released at once */
  dls__obj_free(DLS__OBJ_BUFFER, b);
}

void dls__buffer_unref(dls__buffer *b) {
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
    buffer_release(b);
}

/* ---- the deferred queue ---- */

static pthread_mutex_t g_deferred_mu = PTHREAD_MUTEX_INITIALIZER;
static dls__deferred *g_deferred;
_Atomic size_t dls__deferred_count;

dls_status_t dls__deferred_push(dls__device *dev, void **events, int nevents, dls_release_fn release,
                                void *user_data) {
  dls__deferred *d = dls__obj_alloc(DLS__OBJ_DEFERRED, sizeof *d);
  if (d == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a deferred release");
  deferred_enqueue(d, dev, events, nevents, release, user_data);
  return DLS_OK;
}

static void deferred_enqueue(dls__deferred *d, dls__device *dev, void **events, int nevents, dls_release_fn release,
                             void *user_data) {
  d->dev = dev;
  d->events = events;
  d->nevents = nevents;
  d->release = release;
  d->user_data = user_data;
  pthread_mutex_lock(&g_deferred_mu);
  d->next = g_deferred;
  g_deferred = d;
  atomic_fetch_add(&dls__deferred_count, 1);
  pthread_mutex_unlock(&g_deferred_mu);
}

static void deferred_finish(dls__deferred *d) {
  for (int i = 0; i < d->nevents; i++)
    dls__event_pool_put(d->dev, d->events[i]);
  if (d->events != d->events_inline)
    free(d->events);
  if (d->release)
    d->release(d->user_data);
  dls__obj_free(DLS__OBJ_DEFERRED, d);
}

static bool deferred_ready(dls__deferred *d) {
  for (int i = 0; i < d->nevents; i++) {
    int done = 0;
    if (d->dev->be->event_query(d->dev->id, d->events[i], &done) != DLS_OK || !done)
      return false;
  }
  return true;
}

size_t dls_deferred_poll(void) {
  if (atomic_load_explicit(&dls__deferred_count, memory_order_relaxed) == 0)
    return 0;
  dls__deferred *ready = NULL;
  pthread_mutex_lock(&g_deferred_mu);
  for (dls__deferred **pp = &g_deferred; *pp != NULL;) {
    dls__deferred *d = *pp;
    if (deferred_ready(d)) {
      *pp = d->next;
      d->next = ready;
      ready = d;
      atomic_fetch_sub(&dls__deferred_count, 1);
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

void dls__deferred_drain(void) {
  for (;;) {
    pthread_mutex_lock(&g_deferred_mu);
    dls__deferred *d = g_deferred;
    if (d != NULL) {
      g_deferred = d->next;
      atomic_fetch_sub(&dls__deferred_count, 1);
    }
    pthread_mutex_unlock(&g_deferred_mu);
    if (d == NULL)
      return;
    for (int i = 0; i < d->nevents; i++)
      event_wait(d->dev, d->events[i]);
    deferred_finish(d);
  }
}

/* ---- public API ---- */

dls_status_t dls_buffer_alloc(dls_stream_t stream, size_t size, dls_buffer_t *out_buffer) {
  static const char call[] = "dls_buffer_alloc";
  DLS__ENTER(call);
  if (out_buffer == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_buffer=NULL): output pointer is NULL", call);
  out_buffer->id = 0;
  DLS__GET_STREAM(s, stream, call, "stream");
  dls__buffer *b = NULL;
  dls_status_t st = dls__buffer_alloc(s, size, &b);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(size=%zu, stream on %s)", call, size, s->dev->name);
  b->id = dls__handle_new(DLS_HANDLE_BUFFER, b);
  if (b->id == 0) {
    st = dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
    dls__buffer_unref(b);
    return st;
  }
  out_buffer->id = b->id;
  return DLS_OK;
}

dls_status_t dls_buffer_borrow(DLDevice device, void *ptr, size_t size, dls_stream_t producer, dls_release_fn release,
                               void *user_data, dls_buffer_t *out_buffer) {
  static const char call[] = "dls_buffer_borrow";
  DLS__ENTER(call);
  if (out_buffer == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_buffer=NULL): output pointer is NULL", call);
  out_buffer->id = 0;
  if (ptr == NULL && size != 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(ptr=NULL, size=%zu): NULL memory of non-zero size", call, size);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  DLS__GET_STREAM(s, producer, call, "producer");
  if (s->dev != dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: memory is on %s but the producer stream is on %s", call, dev->name,
                     s->dev->name);
  dls__buffer *b = NULL;
  DLS__TRY(dls__buffer_borrow(dev, ptr, size, s, release, user_data, &b));
  b->id = dls__handle_new(DLS_HANDLE_BUFFER, b);
  if (b->id == 0) {
    st = dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
    b->release = NULL; /* failure: the caller keeps ownership */
    dls__buffer_unref(b);
    return st;
  }
  out_buffer->id = b->id;
  return DLS_OK;
}

dls_status_t dls_buffer_free(dls_buffer_t buffer) {
  static const char call[] = "dls_buffer_free";
  if (buffer.id == 0)
    return DLS_OK;
  DLS__ENTER(call);
  DLS__GET_BUFFER(b, buffer, call, "buffer");
  if (dls__handle_free(DLS_HANDLE_BUFFER, buffer.id) == NULL)
    return dls__fail(DLS_ERR_INVALID_HANDLE, "%s(buffer): buffer handle freed concurrently", call);
  dls__buffer_unref(b);
  dls_deferred_poll();
  return DLS_OK;
}

dls_status_t dls_buffer_record_use(dls_buffer_t buffer, dls_stream_t stream) {
  static const char call[] = "dls_buffer_record_use";
  DLS__ENTER(call);
  DLS__GET_BUFFER(b, buffer, call, "buffer");
  DLS__GET_STREAM(s, stream, call, "stream");
  if (s->dev != b->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: buffer is on %s but stream is on %s", call, b->dev->name,
                     s->dev->name);
  dls_status_t st = dls__buffer_use(b, s);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_buffer_ptr(dls_buffer_t buffer, void **out_ptr) {
  static const char call[] = "dls_buffer_ptr";
  DLS__ENTER(call);
  if (out_ptr == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_ptr=NULL): output pointer is NULL", call);
  DLS__GET_BUFFER(b, buffer, call, "buffer");
  *out_ptr = b->ptr;
  return DLS_OK;
}

dls_status_t dls_buffer_size(dls_buffer_t buffer, size_t *out_size) {
  static const char call[] = "dls_buffer_size";
  DLS__ENTER(call);
  if (out_size == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_size=NULL): output pointer is NULL", call);
  DLS__GET_BUFFER(b, buffer, call, "buffer");
  *out_size = b->size;
  return DLS_OK;
}

dls_status_t dls_buffer_device(dls_buffer_t buffer, DLDevice *out_device) {
  static const char call[] = "dls_buffer_device";
  DLS__ENTER(call);
  if (out_device == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_device=NULL): output pointer is NULL", call);
  DLS__GET_BUFFER(b, buffer, call, "buffer");
  *out_device = b->dev->device;
  return DLS_OK;
}

dls_status_t dls_buffer_stream(dls_buffer_t buffer, dls_stream_t *out_stream) {
  static const char call[] = "dls_buffer_stream";
  DLS__ENTER(call);
  if (out_stream == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_stream=NULL): output pointer is NULL", call);
  DLS__GET_BUFFER(b, buffer, call, "buffer");
  if (b->stream->kind == DLS__STREAM_DEFAULT) {
    for (int k = DLS_STREAM_LEGACY; k <= DLS_STREAM_PER_THREAD; k++)
      if (b->dev->defaults[k] == b->stream)
        *out_stream = dls_stream_default(b->dev->device, k);
    return DLS_OK;
  }
  if (dls__handle_peek(DLS_HANDLE_STREAM, b->stream->id) != b->stream)
    return dls__fail(DLS_ERR_STATE, "%s: the buffer's allocation stream was destroyed (its work still orders the "
                                    "buffer's free)", call);
  out_stream->id = b->stream->id;
  return DLS_OK;
}

static dls_status_t check_range(const char *call, const dls__buffer *b, size_t offset, size_t size) {
  if (offset > b->size || size > b->size - offset)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(offset=%zu, size=%zu): out of the buffer's %zu bytes", call, offset,
                     size, b->size);
  return DLS_OK;
}

static dls_status_t buffer_copy(const char *call, dls_buffer_t buffer, size_t offset, void *host, size_t size,
                                dls_stream_t stream, bool to_device) {
  DLS__ENTER(call);
  if (host == NULL && size != 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(%s=NULL, size=%zu): host pointer is NULL", call,
                     to_device ? "src" : "dst", size);
  DLS__GET_BUFFER(b, buffer, call, "buffer");
  DLS__GET_STREAM(s, stream, call, "stream");
  if (s->dev != b->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: buffer is on %s but stream is on %s", call, b->dev->name,
                     s->dev->name);
  DLS__TRY(check_range(call, b, offset, size));
  if (size == 0)
    return DLS_OK;
  char *dev_ptr = (char *)b->ptr + offset;
  dls_status_t st = dls__buffer_reserve(b, s);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s", call);
  st = to_device ? s->dev->be->memcpy_async(s->dev->id, dev_ptr, host, size, s->native)
                              : s->dev->be->memcpy_async(s->dev->id, host, dev_ptr, size, s->native);
  if (st == DLS_OK)
    st = dls__buffer_use(b, s);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_buffer_write(dls_buffer_t buffer, size_t offset, const void *src, size_t size, dls_stream_t stream) {
  return buffer_copy("dls_buffer_write", buffer, offset, (void *)(uintptr_t)src, size, stream, true);
}

dls_status_t dls_buffer_read(dls_buffer_t buffer, size_t offset, void *dst, size_t size, dls_stream_t stream) {
  return buffer_copy("dls_buffer_read", buffer, offset, dst, size, stream, false);
}

dls_status_t dls_memcpy(dls_stream_t stream, void *dst, const void *src, size_t size) {
  static const char call[] = "dls_memcpy";
  DLS__ENTER(call);
  if ((dst == NULL || src == NULL) && size != 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(dst=%p, src=%p, size=%zu): NULL pointer", call, dst, src, size);
  DLS__GET_STREAM(s, stream, call, "stream");
  if (size == 0)
    return DLS_OK;
  dls_status_t st = s->dev->be->memcpy_async(s->dev->id, dst, src, size, s->native);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}
