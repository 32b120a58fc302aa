/* SPDX-License-Identifier: Apache-2.0 */
/* The deferred release queue: releases that wait for work on other streams, or for a capture to be over. */
#ifndef DLSTREAM_CORE_DEFERRED_H
#define DLSTREAM_CORE_DEFERRED_H

#include "core/device.h"

/* A pooled event and the device whose pool it returns to; or, with `keep`,
 * a stream's mark (stream.h), which stays the stream's: the entry holds a
 * reference to the stream instead, let go of when it is done. */
typedef struct dls__marker {
  dls__device *dev;
  void *event;
  struct dls__stream *keep;
} dls__marker;
/* Deferred releases. An entry is made first (NULL when out of memory), so
 * that whoever must defer a release later (a borrowed buffer makes its entry
 * with the buffer) needs no memory then. */
typedef struct dls__deferred dls__deferred;
/* Markers an entry holds itself (more come from the heap). */
#define DLS__DEFERRED_MARKS_INLINE 4
DLS__INTERNAL dls__deferred *dls__deferred_entry(void);
/* Frees an entry never enqueued (NULL: nothing). */
DLS__INTERNAL void dls__deferred_entry_free(dls__deferred *d);
/* Room for `n` markers: the entry's own when they fit, else the heap (NULL
 * when out of memory). */
DLS__INTERNAL dls__marker *dls__deferred_marks(dls__deferred *d, int n);
/* Queues entry `d`: waits on the first `nwait` of `marks` (ownership of the
 * array and all `nevents` events moves in), and for capture `cap_id` (0:
 * none) to be over, then calls release. Events past `nwait` were recorded in
 * a capture: never queried, only returned to their pool. Cannot fail. */
DLS__INTERNAL void dls__deferred_enqueue(dls__deferred *d, dls__marker *marks, int nwait, int nevents,
                                         uint64_t cap_id, dls_release_fn release, void *user_data);
/* Returns a pooled event recorded in capture `cap_id` (0: eagerly) to its
 * pool once that capture is over. */
DLS__INTERNAL void dls__event_pool_put_after(dls__device *dev, void *event, uint64_t cap_id);
/* Blocks until `event` completes; should the driver fail to wait, polls it
 * instead: a release must never run before the work it waits for. */
DLS__INTERNAL void dls__event_wait(dls__device *dev, void *event);
/* Frees `ptr` (eager memory, or a replayed graph's output) on `s` in stream order outside any capture: now, when
 * `s` does not capture in the pin it takes, else from the queue once that capture is over (again, should another
 * capture have begun on it by then). */
DLS__INTERNAL void dls__mem_free_eager(dls__device *dev, void *ptr, struct dls__stream *s);
/* A release for dls__deferred_enqueue that frees `ptr` on `s` as dls__mem_free_eager does (`s` referenced until
 * then), or, with `cached_size` (the size asked of the cache, which said the block may go back to it; 0: not so),
 * into `s`'s cache: its user data, NULL when out of host memory. */
DLS__INTERNAL void *dls__late_free_new(dls__device *dev, void *ptr, struct dls__stream *s, size_t cached_size);
DLS__INTERNAL void dls__late_free(void *late);
/* Names the bytes [lo, hi) on `home` of the borrowed buffer whose release entry `d` is (before it is queued): an
 * import of foreign memory, which leaves the registry at its last reference while its uses may still be pending. */
DLS__INTERNAL void dls__deferred_range(dls__deferred *d, DLDevice home, uintptr_t lo, uintptr_t hi);
/* Queues on `s` waits for the pending uses of the queued releases whose bytes overlap [lo, hi) on `home`: memory
 * imported again before its earlier import's release ran. Nothing where `s` captures (an eager wait would tie the
 * capture to eager work). */
DLS__INTERNAL dls_status_t dls__deferred_order_after(DLDevice home, uintptr_t lo, uintptr_t hi, struct dls__stream *s);
/* Drains the queue, blocking on each event (shutdown). */
DLS__INTERNAL void dls__deferred_drain(void);
DLS__INTERNAL extern _Atomic size_t dls__deferred_count;
/* The queued entries that name bytes (dls__deferred_range): 0 while no import's release waits (read inline by a
 * call's straight uses, which look the queue over only when it is not). */
DLS__INTERNAL extern _Atomic size_t dls__deferred_ranged;

#endif /* DLSTREAM_CORE_DEFERRED_H */
