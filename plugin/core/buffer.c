/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers and the stream-ordered deallocation rule (deferred.c holds the queue of releases that wait). */
#include <stdlib.h>
#include <string.h>

#include "core/buffer.h"
#include "core/capture.h"
#include "core/deferred.h"
#include "core/graph.h"

/* A release waits on a marker per use: the uses a buffer keeps inline fit an entry's own markers. */
_Static_assert(DLS__USES_INLINE <= DLS__DEFERRED_MARKS_INLINE, "a buffer's inline uses fit a deferred entry");

#define DLS__GET_BUFFER(var, handle, call, arg) DLS__GET(&dls__buffer_table, dls__buffer, var, handle, call, arg)

static inline dls__buffer *buffer_new(dls__device *dev, void *ptr, size_t size, dls__stream *s) {
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
  b->alloc_role = DLS__ROLE_WRITER;
  b->uses = b->uses_inline;
  b->nuses = 0;
  b->cap = DLS__USES_INLINE;
  atomic_init(&b->refs, 1);
  b->id = 0;
  b->cap_id = 0;
  b->graph = NULL;
  b->spare = NULL;
  return b;
}

static inline dls_status_t buffer_alloc(dls__stream *s, size_t size, dls__buffer **out) {
  void *ptr = NULL;
  uint64_t cap = 0;
  if (DLS__UNLIKELY(dls__stream_capture(s, &cap) == DLS__CAPTURE_INVALIDATED))
    return dls__fail(DLS_ERR_STATE, "the capture of the allocation stream on %s was invalidated; end it first",
                     s->dev->name);
  DLS__TRY(dls__mem_alloc(s, size, &ptr));
  dls__buffer *b = buffer_new(s->dev, ptr, size, s);
  if (b == NULL) {
    dls__mem_free(s->dev, ptr, s);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a buffer record");
  }
  /* Allocated in a capture: a graph allocation, never touched eagerly. */
  b->cap_id = cap;
  if (DLS__UNLIKELY(cap != 0))
    dls__capture_alloc_add(cap, &b->graph, b->ptr);
  *out = b;
  return DLS_OK;
}

dls_status_t dls__buffer_alloc(dls__stream *s, size_t size, dls__buffer **out) { return buffer_alloc(s, size, out); }

dls_status_t dls__buffer_borrow(dls__device *dev, void *ptr, size_t size, dls__stream *producer,
                                dls_release_fn release, void *user_data, dls__buffer **out) {
  /* The entry a deferred release will need: made now, so that releasing
   * never needs memory. */
  dls__deferred *spare = NULL;
  if (release != NULL && (spare = dls__deferred_entry()) == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a buffer record");
  dls__buffer *b = buffer_new(dev, ptr, size, producer);
  if (b == NULL) {
    dls__deferred_entry_free(spare);
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

/* Whether every recorded use has already completed (a cheap query each).
 * Never asked while a capture forbids it, and never of a captured record. */
static bool uses_complete(dls__buffer *b) {
  if (!dls__capture_polling_allowed())
    return false;
  dls__relaxed r;
  dls__relaxed_enter(&r, b->dev);
  bool complete = true;
  for (int i = 0; i < b->nuses && complete; i++) {
    int done = 0;
    dls__device *ud = b->uses[i].stream->dev;
    complete = b->uses[i].cap_id == 0 && ud->be->event_query(ud->id, b->uses[i].event, &done) == DLS_OK && done;
  }
  dls__relaxed_leave(&r);
  return complete;
}

/* Sorts a buffer's use events: eager ones first (to wait on), captured ones
 * after; returns the eager count and the capture of a captured one. */
static int sort_uses(dls__buffer *b, dls__marker *marks, uint64_t *out_cap) {
  int n = 0, k = b->nuses;
  *out_cap = 0;
  for (int i = 0; i < b->nuses; i++) {
    dls__marker m = {b->uses[i].stream->dev, b->uses[i].event};
    if (b->uses[i].cap_id == 0) {
      marks[n++] = m;
    } else {
      marks[--k] = m;
      *out_cap = b->uses[i].cap_id;
    }
  }
  return n;
}

/* Returns a use's event to its device's pool. */
static void use_done(const dls__use *u) { dls__event_pool_put_after(u->stream->dev, u->event, u->cap_id); }

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
        dls__event_wait(b->uses[i].stream->dev, b->uses[i].event);
      use_done(&b->uses[i]);
    }
    dls__deferred_entry_free(d);
    if (release)
      release(user_data);
    return;
  }
  uint64_t used_cap = 0;
  int nwait = sort_uses(b, marks, &used_cap);
  dls__deferred_enqueue(d, marks, nwait, b->nuses, cap != 0 ? cap : used_cap, release, user_data);
}

/* Owned memory whose free must wait for more than its stream's order: it
 * runs from the deferred queue. */
typedef struct dls__late_free {
  dls__device *dev;
  void *ptr;
  dls__stream *stream; /* ref held */
} dls__late_free;

static void late_free(void *user_data) {
  dls__late_free *f = user_data;
  dls__mem_free(f->dev, f->ptr, f->stream);
  dls__stream_unref(f->stream);
  dls__free(f);
}

/* Frees `ptr` on `s` once the buffer's eager uses completed and capture
 * `cap` (0: none) is over, taking the use events. false: no memory for that
 * (nothing was done). */
static bool free_later(dls__buffer *b, void *ptr, dls__stream *s, uint64_t cap) {
  dls__late_free *f = dls__malloc(sizeof *f);
  if (f == NULL)
    return false;
  f->dev = s->dev;
  f->ptr = ptr;
  f->stream = s;
  dls__stream_ref(s);
  defer_release(b, cap, late_free, f);
  return true;
}

/* The allocation stream could not be made to wait on a use: the free waits
 * for the use events in the deferred queue, or here when out of memory. */
static void free_unordered(dls__buffer *b, void *ptr, dls__stream *s) {
  if (free_later(b, ptr, s, 0))
    return;
  for (int i = 0; i < b->nuses; i++) {
    if (b->uses[i].cap_id == 0)
      dls__event_wait(b->uses[i].stream->dev, b->uses[i].event);
    use_done(&b->uses[i]);
  }
  dls__mem_free(s->dev, ptr, s);
}

/* Frees owned memory by the rule; nothing here blocks the host. */
static void release_owned(dls__buffer *b, int a_status, uint64_t a_cap) {
  dls__device *dev = b->dev;
  dls__stream *a = b->stream;
  if (b->cap_id != 0 && !(a_status == DLS__CAPTURE_ACTIVE && a_cap == b->cap_id)) {
    /* A graph allocation whose capture is over: its graph frees it. Should
     * dlstream still know the capture (the driver could not say that a
     * stream that joined it still captures), the memory is left to it. */
    if (b->graph == NULL)
      dls__capture_alloc_orphan(b->cap_id, &b->graph);
    dls__graph *gr = b->graph;
    b->graph = NULL;
    dls__stream *last = gr != NULL ? dls__graph_release_output(gr, b->dev, b->ptr, b->uses, b->nuses) : NULL;
    if (last != NULL) {
      free_unordered(b, b->ptr, last);
      dls__stream_unref(last);
      return;
    }
    for (int i = 0; i < b->nuses; i++)
      use_done(&b->uses[i]);
    return;
  }
  if (b->cap_id == 0 && a_status != DLS__CAPTURE_NONE) {
    if (free_later(b, b->ptr, a, a_cap))
      return;
    (void)dev->be->stream_synchronize(dev->id, a->native); /* fails while capturing: the memory then leaks */
  }
  /* Eager memory waits on eager uses; memory freed in its own capture waits on that capture's uses. */
  bool ordered = true;
  for (int i = 0; i < b->nuses; i++)
    if (b->uses[i].cap_id == b->cap_id)
      ordered &= dev->be->stream_wait_event(dev->id, a->native, b->uses[i].event) == DLS_OK;
  if (!ordered && b->ptr != NULL) {
    if (b->cap_id == 0) {
      free_unordered(b, b->ptr, a);
    } else {
      /* Not freed in the capture: its graph owns the memory, like an output's. */
      dls__capture_alloc_orphan(b->cap_id, &b->graph);
      for (int i = 0; i < b->nuses; i++)
        use_done(&b->uses[i]);
    }
    return;
  }
  for (int i = 0; i < b->nuses; i++)
    use_done(&b->uses[i]);
  if (b->ptr != NULL)
    dls__mem_free(dev, b->ptr, a);
  if (b->cap_id != 0)
    dls__capture_alloc_remove(b->cap_id, &b->graph);
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
      dls__capture_polling_allowed() && dev->be->stream_query(dev->id, a->native, &idle) == DLS_OK && !idle &&
      dls__buffer_mark(b, a) != DLS_OK)
    dev->be->stream_synchronize(dev->id, a->native); /* no memory to defer: wait rather than free early */
  /* A use whose latest record failed is recorded again now, covering its
   * work; failing that, its stream is waited for rather than free early. */
  for (int i = 0; i < b->nuses; i++) {
    dls__stream *us = b->uses[i].stream;
    if (dls__use_refresh(&b->uses[i]) != DLS_OK && b->uses[i].cap_id == 0)
      (void)us->dev->be->stream_synchronize(us->dev->id, us->native);
  }
  if (!b->borrowed) {
    uint64_t a_cap = 0;
    int a_status = dls__stream_capture(a, &a_cap);
    release_owned(b, a_status, a_cap);
  } else if (b->release == NULL || b->nuses == 0 || uses_complete(b)) {
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

/* The common case first: owned memory used on its own stream only, all
 * outside captures, is freed on that stream with nothing to wait for. */
static void buffer_release(dls__buffer *b) {
  dls__stream *a = b->stream;
  uint64_t a_cap;
  if (DLS__UNLIKELY(b->borrowed || b->nuses != 0 || b->cap_id != 0) ||
      DLS__UNLIKELY(dls__stream_capture(a, &a_cap) != DLS__CAPTURE_NONE)) {
    buffer_release_rule(b);
    return;
  }
  if (b->ptr != NULL)
    dls__mem_free(b->dev, b->ptr, a);
  dls__stream_unref(a);
  dls__obj_free(DLS__OBJ_BUFFER, b);
}

void dls__buffer_unref(dls__buffer *b) {
  /* Holding the only reference, no one else can add one (a reference comes
   * from a holder or from the live handle): no locked instruction needed. */
  if (atomic_load_explicit(&b->refs, memory_order_acquire) == 1 ||
      atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
    buffer_release(b);
}

/* ---- public API ---- */

dls_status_t dls_buffer_alloc(dls_stream_t stream, size_t size, dls_buffer_t *out_buffer) {
  static const char call[] = "dls_buffer_alloc";
  DLS__ENTER(call);
  DLS__OUT(call, out_buffer);
  DLS__GET_STREAM(s, stream, call, "stream");
  dls__buffer *b = NULL;
  dls_status_t st = buffer_alloc(s, size, &b);
  if (DLS__UNLIKELY(st != DLS_OK))
    return dls__fail_prefix(st, "%s(size=%zu, stream on %s)", call, size, s->dev->name);
  b->id = dls__table_add(&dls__buffer_table, b);
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
  DLS__OUT(call, out_buffer);
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
  b->id = dls__table_add(&dls__buffer_table, b);
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
  DLS__END(&dls__buffer_table, buffer, call, "buffer");
  dls_deferred_poll();
  return DLS_OK;
}

void dls__buffer_drop(void *obj) { dls__buffer_unref(obj); }
dls__table dls__buffer_table = DLS__TABLE("buffer", DLS_HANDLE_BUFFER, dls__buffer_drop);

dls_status_t dls_buffer_record_use(dls_buffer_t buffer, dls_stream_t stream, dls_access_t access) {
  static const char call[] = "dls_buffer_record_use";
  DLS__ENTER(call);
  if (access != DLS_ACCESS_READ && access != DLS_ACCESS_WRITE)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(access=%d): DLS_ACCESS_READ (1) or DLS_ACCESS_WRITE (2)", call, (int)access);
  DLS__GET_BUFFER(b, buffer, call, "buffer");
  DLS__GET_STREAM(s, stream, call, "stream");
  if (s->dev != b->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: buffer is on %s but stream is on %s", call, b->dev->name,
                     s->dev->name);
  dls_status_t st = dls__buffer_access(b, s, (int)access, false);
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
  if (dls__table_peek(&dls__stream_table, b->stream->id) != b->stream)
    return dls__fail(DLS_ERR_STATE, "%s: the buffer's allocation stream was destroyed (its work still orders the "
                                    "buffer's free)", call);
  out_stream->id = b->stream->id;
  return DLS_OK;
}
