/* SPDX-License-Identifier: Apache-2.0 */
/* A stream's use of a buffer: the record the hazard rule (access.c), the deallocation rule (buffer.c) and a graph's
 * outputs (graph.c) read. A type, no code. */
#ifndef DLSTREAM_CORE_USE_H
#define DLSTREAM_CORE_USE_H

#include "core/stream.h"

/* A stream's use of a buffer (one entry per stream and capture). */
typedef struct dls__use {
  dls__stream *stream; /* ref held */
  void *event;         /* in a capture: its own pooled event, recorded after the latest use; eager: NULL, as
                          the stream's mark is recorded after each use (a release that waits later records
                          an event of its own then: access.c) */
  uint64_t cap_id;     /* the capture the use was recorded in (0: eager work) */
  bool stale;          /* the latest record failed, or is owed: record it again before ordering on it */
  bool owed;           /* stale because a block's use owes its stream's mark (access_ordered.c): never complete
                          until recorded (a failed record's use is complete once its earlier record is) */
  bool recorded;       /* recorded at least once: until then its pooled event may carry an older record of
                          someone else's (a capture's, even), so nothing waits on it or queries it */
  uint16_t exports;    /* live exports to this stream as their consumer: it may write at any time */
} dls__use;

#define DLS__USES_INLINE 4

/* The event recorded after a use's latest work: its own, or its stream's
 * mark (which a later use of any buffer on that stream may record again:
 * waiting on it then waits for more, never for less). */
static inline void *dls__use_event(const dls__use *u) {
  return u->event != NULL ? u->event : atomic_load_explicit(&u->stream->mark, memory_order_acquire);
}

#endif /* DLSTREAM_CORE_USE_H */
