/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers: allocation, borrowing, handles and the public calls. The record and its hazard state are access.h's, its
 * references and where its free goes release.c's. */
#include <stdlib.h>
#include <string.h>

#include "core/buffer.h"
#include "core/cache.h"
#include "core/capture.h"
#include "core/deferred.h"
#include "core/exported.h"
#include "core/ranges.h"


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
  b->record = false;
  b->entered = false;
  b->cached = false;
  b->release_unordered = false;
  b->release = NULL;
  b->user_data = NULL;
  atomic_flag_clear(&b->mu.f);
  b->writers = 1; /* the producer's bit */
  b->readers = 0;
  b->eager_uses = 0;
  b->exporting = 0;
  b->notes = 0;
  atomic_init(&b->inflight, 0);
  atomic_init(&b->noted_event, NULL);
  b->alloc_marked = false;
  b->alloc_exports = 0;
  b->uses = b->uses_inline;
  b->nuses = 0;
  b->cap = DLS__USES_INLINE;
  atomic_init(&b->refs, 1);
  atomic_init(&b->exported, false);
  b->alias = NULL;
  b->id = 0;
  b->cap_id = 0;
  b->owner = (dls__graph_owner){NULL, NULL};
  b->spare = NULL;
  return b;
}

/* The allocation's work, pinned: the capture asked about is the one the memory lands in, and a capture's end
 * cannot come between the allocation and its entry in the capture's list of what its graph will own. */
static inline dls_status_t buffer_alloc_pinned(dls__stream *s, size_t size, dls__buffer **out) {
  void *ptr = NULL;
  uint64_t cap = 0;
  if (DLS__UNLIKELY(dls__stream_capture(s, &cap) == DLS__CAPTURE_INVALIDATED))
    return dls__fail(DLS_ERR_STATE, "the capture of the allocation stream on %s was invalidated; end it first",
                     s->dev->name);
  /* Eager memory comes from the cache (or through it); in a capture, from the driver: a graph allocation. */
  bool cached = false;
  DLS__TRY(cap == 0 ? dls__cache_alloc(s, size, &ptr, &cached) : dls__cache_alloc_driver(s, size, &ptr));
  dls__buffer *b = buffer_new(s->dev, ptr, size, s);
  if (b == NULL) {
    if (!cached || !dls__cache_put(s, ptr, size))
      dls__mem_free(s->dev, ptr, s); /* in the same capture state: a graph free, or an eager one */
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a buffer record");
  }
  b->cached = cached;
  /* Allocated in a capture: a graph allocation, never touched eagerly. */
  b->cap_id = cap;
  if (DLS__UNLIKELY(cap != 0))
    dls__capture_alloc_add(cap, &b->owner, b->ptr);
  *out = b;
  return DLS_OK;
}

static inline dls_status_t buffer_alloc(dls__stream *s, size_t size, dls__buffer **out) {
  dls__capture_pin();
  dls_status_t st = buffer_alloc_pinned(s, size, out);
  dls__capture_unpin();
  return st;
}

dls_status_t dls__buffer_alloc(dls__stream *s, size_t size, dls__buffer **out) { return buffer_alloc(s, size, out); }

/* Borrowed memory inside a buffer that left through an export is that buffer's memory again (a tensor exported to
 * NumPy or torch and imported back): `b` becomes its alias, so uses of either order against uses of the other. A
 * range that only partly overlaps joins the whole buffer it overlaps (conservative). The producer's work queued so
 * far may have written the memory, as for any borrowed buffer's first writer: it is ordered as a write now. */
static dls_status_t join_exported(dls__buffer *b, dls__stream *producer) {
  dls__buffer *of = dls__exported_find(b->dev->device, (uintptr_t)b->ptr, b->size);
  if (of == NULL)
    return DLS_OK;
  b->alias = of; /* the reference find took */
  if (producer->native == (void *)UINTPTR_MAX)
    return DLS_OK; /* memory no stream produced */
  return dls__buffer_access(of, producer, DLS_ACCESS_WRITE, true);
}

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
  if (DLS__UNLIKELY(!dls__exported_none()) && size > 0) {
    dls_status_t st = join_exported(b, producer);
    if (st != DLS_OK) {
      b->release = NULL; /* failure: the caller keeps ownership */
      dls__buffer_unref(b);
      return st;
    }
  }
  *out = b;
  return DLS_OK;
}

dls_status_t dls__buffer_exported(dls__buffer *b) {
  if (atomic_load_explicit(&b->exported, memory_order_relaxed))
    return DLS_OK;
  DLS__TRY(dls__exported_add(b->dev->device, (uintptr_t)b->ptr, b->size, b, &b->refs));
  atomic_store_explicit(&b->exported, true, memory_order_relaxed);
  return DLS_OK;
}

/* ---- public API ---- */

dls_status_t dls_buffer_alloc(dls_stream_t stream, size_t size, dls_buffer_t *out_buffer) {
  static const char call[] = "dls_buffer_alloc";
  DLS__ENTER(call);
  DLS__OUT(call, out_buffer);
  DLS__GET_OF(stream, s, stream, call, "stream");
  dls__buffer *b = NULL;
  dls_status_t st = buffer_alloc(s, size, &b);
  if (DLS__UNLIKELY(st != DLS_OK))
    return dls__fail_prefix(st, "%s(size=%zu, stream on %s)", call, size, s->dev->name);
  return dls__buffer_handle_new(b, call, out_buffer);
}

dls_status_t dls__buffer_handle_new(dls__buffer *b, const char *call, dls_buffer_t *out) {
  b->id = dls__table_add(&dls__buffer_table, b);
  if (b->id == 0) {
    dls_status_t st = dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
    dls__buffer_unref(b);
    return st;
  }
  out->id = b->id;
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
dls__table dls__buffer_table = DLS__TABLE("buffer", DLS_HANDLE_BUFFER, dls__buffer_drop, NULL);

dls_status_t dls_buffer_record_use(dls_buffer_t buffer, dls_stream_t stream, dls_access_t access) {
  static const char call[] = "dls_buffer_record_use";
  DLS__ENTER(call);
  if (access != DLS_ACCESS_READ && access != DLS_ACCESS_WRITE)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(access=%d): DLS_ACCESS_READ (1) or DLS_ACCESS_WRITE (2)", call, (int)access);
  DLS__GET_OF(buffer, b, buffer, call, "buffer");
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (s->dev != b->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: buffer is on %s but stream is on %s", call, b->dev->name,
                     s->dev->name);
  dls_status_t st = dls__buffer_access(dls__buffer_hazards(b), s, (int)access, false);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_buffer_ptr(dls_buffer_t buffer, void **out_ptr) {
  static const char call[] = "dls_buffer_ptr";
  DLS__ENTER(call);
  DLS__OUT(call, out_ptr);
  DLS__GET_OF(buffer, b, buffer, call, "buffer");
  *out_ptr = b->ptr;
  return DLS_OK;
}

dls_status_t dls_buffer_size(dls_buffer_t buffer, size_t *out_size) {
  static const char call[] = "dls_buffer_size";
  DLS__ENTER(call);
  DLS__OUT(call, out_size);
  DLS__GET_OF(buffer, b, buffer, call, "buffer");
  *out_size = b->size;
  return DLS_OK;
}

dls_status_t dls_buffer_device(dls_buffer_t buffer, DLDevice *out_device) {
  static const char call[] = "dls_buffer_device";
  DLS__ENTER(call);
  DLS__OUT(call, out_device);
  DLS__GET_OF(buffer, b, buffer, call, "buffer");
  *out_device = b->dev->device;
  return DLS_OK;
}

dls_status_t dls_buffer_stream(dls_buffer_t buffer, dls_stream_t *out_stream) {
  static const char call[] = "dls_buffer_stream";
  DLS__ENTER(call);
  DLS__OUT(call, out_stream);
  DLS__GET_OF(buffer, b, buffer, call, "buffer");
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
