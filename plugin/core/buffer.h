/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers: owned and borrowed memory with its allocation (producer) stream; their handles. The record itself and its
 * state: access.h; its references and the deallocation rule: release.h. */
#ifndef DLSTREAM_CORE_BUFFER_H
#define DLSTREAM_CORE_BUFFER_H

#include "core/release.h"

/* A new owned buffer allocated on `s` (no handle; refs = 1). */
DLS__INTERNAL dls_status_t dls__buffer_alloc(dls__stream *s, size_t size, dls__buffer **out);
/* A new borrowed buffer (no handle; refs = 1). release is NOT called on failure. When the memory lies in (or
 * overlaps) a buffer that was exported (exported.c) on the same memory, the new buffer is its alias: its uses join
 * that buffer's hazard state, the producer's work queued so far counts as a write of it (ordered now), and its
 * release waits for every stream that used that buffer (marked when the alias's last reference goes). */
DLS__INTERNAL dls_status_t dls__buffer_borrow(dls__device *dev, void *ptr, size_t size, dls__stream *producer,
                                              dls_release_fn release, void *user_data, dls__buffer **out);
/* Enters `b` in the registry of exported memory (at its first export; later ones find it there), so that imports
 * of its bytes become its aliases. The caller holds a reference. Fails only out of host memory. */
DLS__INTERNAL dls_status_t dls__buffer_exported(dls__buffer *b);
/* Gives `b` (a new buffer: its only reference) a handle in *out; out of memory for it, drops `b` (a borrowed
 * buffer's release runs) and fails naming `call`. */
DLS__INTERNAL dls_status_t dls__buffer_handle_new(dls__buffer *b, const char *call, dls_buffer_t *out);

#endif /* DLSTREAM_CORE_BUFFER_H */
