/* SPDX-License-Identifier: Apache-2.0 */
/* A buffer's references, and the release its last one runs: where its free goes (release.c). */
#ifndef DLSTREAM_CORE_RELEASE_H
#define DLSTREAM_CORE_RELEASE_H

#include "core/access.h"

/* Takes a reference. */
DLS__INTERNAL void dls__buffer_ref(dls__buffer *b);
/* Drops a reference; the last one frees or releases the memory once every recorded use has passed, on a stream, a
 * deferred queue, or with its graph, and drops the record. */
DLS__INTERNAL void dls__buffer_unref(dls__buffer *b);
/* Whether every recorded use has already completed (a cheap query each), never asked while a capture forbids it
 * and never of a captured record: a use in a capture counts as complete only with `captured_done` (its graph is
 * gone). The caller holds the buffer's lock, or its last reference. */
DLS__INTERNAL bool dls__buffer_uses_complete(dls__buffer *b, bool captured_done);

#endif /* DLSTREAM_CORE_RELEASE_H */
