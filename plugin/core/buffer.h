/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers: owned and borrowed memory with its allocation (producer) stream, its uses and the deallocation rule. */
#ifndef DLSTREAM_CORE_BUFFER_H
#define DLSTREAM_CORE_BUFFER_H

#include "core/access.h"
#include "core/capture.h"

struct dls__graph;
struct dls__deferred;

/* The fields a use reads and writes come first: the first cache line holds all that a use of the stream's own
 * memory touches (the lock included), the next one the hazard state and the first use entries. A crossing's
 * bookkeeping runs between driver calls that leave little of it in the first-level cache. */
struct dls__buffer {
  void *ptr;
  size_t size;
  dls__device *dev;
  dls__stream *stream;  /* allocation / producer stream, ref held */
  struct dls__buffer *alias; /* borrowed memory that lies in an exported buffer: that buffer (ref held), whose
                                hazard state its uses share (dls__buffer_hazards); NULL otherwise */
  dls__use *uses;       /* uses_inline or heap */
  uint64_t cap_id;      /* allocated in this capture (0: eagerly) */
  int nuses;
  dls__spin mu;         /* the use set and the hazards: held from a use's waits until its work is noted */
  bool borrowed;
  bool record;          /* a record of foreign memory (foreign.c): no producer, its range in that registry */
  bool entered;         /* borrowed foreign memory (an import) whose range is in the registry of foreign records
                           until its last reference goes (foreign.c), so that uses of its bytes join its state */
  bool cached;          /* owned memory of a size class of the cache (core/cache.c): its free may keep it there */
  bool alloc_marked;    /* the allocation stream's mark was recorded, eagerly, after its latest use (access.c:
                           once other streams use the buffer, a crossing from it waits on that, not on a record
                           made then) */
  uint16_t alloc_exports; /* live exports to the allocation stream as their consumer: it may write at any time */
  int cap;              /* the room in `uses` */
  /* The hazard state (access.c), a bit per party: bit 0 the allocation (producer) stream, bit 1 + i use entry i,
   * bit 63 every entry from the 62nd on (told apart by a walk). */
  uint64_t writers;     /* the last writer of each capture (and of eager work); the producer at first */
  uint64_t readers;     /* the parties that read since that write (each waited for the writer) */
  uint64_t eager_uses;  /* the entries of eager work (cap_id 0) */
  uint64_t exporting;   /* the parties holding a live export: they may write at any time */
  uint32_t notes;       /* counts the notes of uses (access.c): a use ordered earlier is noted as ordered only
                           while no other use was noted since */
  dls__use uses_inline[DLS__USES_INLINE];
  _Atomic int refs;     /* handle + tensors + exports + aliases (+ a registry lookup, exported.c) */
  _Atomic bool exported; /* in the registry of exported memory (exported.c) until its last reference goes */
  bool release_unordered; /* the release frees at once (host memory): it must
                             also wait for work queued on the producer stream */
  dls_release_fn release; /* borrowed only */
  void *user_data;
  uint64_t id;          /* its handle, 0 if none */
  dls__graph_owner owner; /* allocated in a capture: the graph that owns its memory once the capture ended (ref
                            held) and its replay count */
  struct dls__deferred *spare; /* borrowed with a release: its deferred-queue entry, made with
                                  the buffer so that deferring the release needs no memory */
};

/* A new owned buffer allocated on `s` (no handle; refs = 1). */
DLS__INTERNAL dls_status_t dls__buffer_alloc(dls__stream *s, size_t size, dls__buffer **out);
/* A new borrowed buffer (no handle; refs = 1). release is NOT called on failure. When the memory lies in (or
 * overlaps) a buffer that was exported (exported.c) on the same memory, the new buffer is its alias: its uses join
 * that buffer's hazard state, the producer's work queued so far counts as a write of it (ordered now), and its
 * release waits for every stream that used that buffer (marked when the alias's last reference goes). */
DLS__INTERNAL dls_status_t dls__buffer_borrow(dls__device *dev, void *ptr, size_t size, dls__stream *producer,
                                              dls_release_fn release, void *user_data, dls__buffer **out);
DLS__INTERNAL void dls__buffer_ref(dls__buffer *b);
/* The buffer whose hazard state a use of `b` joins: `b`, or the exported buffer an alias lies in. */
static inline dls__buffer *dls__buffer_hazards(dls__buffer *b) {
  return DLS__UNLIKELY(b->alias != NULL) ? b->alias : b;
}
/* Enters `b` in the registry of exported memory (at its first export; later ones find it there), so that imports
 * of its bytes become its aliases. The caller holds a reference. Fails only out of host memory. */
DLS__INTERNAL dls_status_t dls__buffer_exported(dls__buffer *b);
/* Gives `b` (a new buffer: its only reference) a handle in *out; out of memory for it, drops `b` (a borrowed
 * buffer's release runs) and fails naming `call`. */
DLS__INTERNAL dls_status_t dls__buffer_handle_new(dls__buffer *b, const char *call, dls_buffer_t *out);
/* Drops a reference; the last one frees / releases in stream order. */
DLS__INTERNAL void dls__buffer_unref(dls__buffer *b);

#endif /* DLSTREAM_CORE_BUFFER_H */
