/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers: owned and borrowed memory with its allocation (producer) stream, its uses and the deallocation rule. */
#ifndef DLSTREAM_CORE_BUFFER_H
#define DLSTREAM_CORE_BUFFER_H

#include "core/access.h"

struct dls__graph;
struct dls__deferred;

struct dls__buffer {
  dls__device *dev;
  void *ptr;
  size_t size;
  dls__stream *stream;  /* allocation / producer stream, ref held */
  bool borrowed;
  bool release_unordered; /* the release frees at once (host memory): it must
                             also wait for work queued on the producer stream */
  dls_release_fn release; /* borrowed only */
  void *user_data;
  dls__spin mu;         /* the use set and the hazards: held from a use's waits until its work is noted */
  uint8_t alloc_role;   /* the allocation (producer) stream's DLS__ROLE_*: the first writer */
  dls__use uses_inline[DLS__USES_INLINE];
  dls__use *uses;       /* uses_inline or heap */
  int nuses, cap;
  _Atomic int refs;     /* handle + tensors + exports */
  uint64_t id;          /* its handle, 0 if none */
  uint64_t cap_id;      /* allocated in this capture (0: eagerly) */
  struct dls__graph *graph; /* the graph that owns its memory once the capture ended (ref held) */
  struct dls__deferred *spare; /* borrowed with a release: its deferred-queue entry, made with
                                  the buffer so that deferring the release needs no memory */
};

/* A new owned buffer allocated on `s` (no handle; refs = 1). */
DLS__INTERNAL dls_status_t dls__buffer_alloc(dls__stream *s, size_t size, dls__buffer **out);
/* A new borrowed buffer (no handle; refs = 1). release is NOT called on failure. */
DLS__INTERNAL dls_status_t dls__buffer_borrow(dls__device *dev, void *ptr, size_t size, dls__stream *producer,
                                              dls_release_fn release, void *user_data, dls__buffer **out);
DLS__INTERNAL void dls__buffer_ref(dls__buffer *b);
/* Drops a reference; the last one frees / releases in stream order. */
DLS__INTERNAL void dls__buffer_unref(dls__buffer *b);

#endif /* DLSTREAM_CORE_BUFFER_H */
