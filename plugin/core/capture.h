/* SPDX-License-Identifier: Apache-2.0 */
/* The captures dlstream knows of: what the driver says, the rule that ties no capturing stream to one outside its
 * capture, own-initiative polling kept away from captures, and the lock that keeps pool calls apart from graph calls. */
#ifndef DLSTREAM_CORE_CAPTURE_H
#define DLSTREAM_CORE_CAPTURE_H

#include "core/pin.h"
#include "core/stream.h"

struct dls__graph;

DLS__INTERNAL extern _Atomic int dls__captures_known;
/* dls__stream_capture's question to the driver. */
DLS__INTERNAL int dls__stream_capture_query(dls__stream *s, uint64_t *out_id);
/* The capture state of a stream as the driver sees it now (DLS__CAPTURE_*),
 * captures dlstream did not begin included; *out_id is the capture's id
 * while one is active, else 0. A capture seen for the first time is noted,
 * so dlstream's own polling keeps away from it. A stream that is not
 * capture_unseen can only be capturing while dlstream knows of a capture
 * (it began it, or saw it on a stream it was given): the driver is asked
 * only then, which keeps the query off the eager hot paths. */
static inline int dls__stream_capture(dls__stream *s, uint64_t *out_id) {
  if (DLS__LIKELY(!s->capture_unseen) && atomic_load_explicit(&dls__captures_known, memory_order_acquire) == 0) {
    *out_id = 0;
    return DLS__CAPTURE_NONE;
  }
  return dls__stream_capture_query(s, out_id);
}
/* DLS_OK when `waiter` may wait for `target`: both outside any capture, or
 * both in one. Otherwise DLS_ERR_STATE naming both, before any driver call. */
DLS__INTERNAL dls_status_t dls__capture_check_pair(dls__stream *waiter, uint64_t waiter_cap, dls__stream *target,
                                                   uint64_t target_cap);
/* Whether dlstream may poll on its own initiative (query events, run
 * deferred releases) on this thread now: no capture it knows of forbids it. */
DLS__INTERNAL bool dls__capture_polling_allowed(void);
/* DLS_OK unless a known capture forbids this thread's synchronizing and
 * querying calls (the driver would invalidate it): DLS_ERR_STATE naming it. */
DLS__INTERNAL dls_status_t dls__capture_check_host_wait(const char *call);
/* Whether a capture dlstream knows of is underway on a device (captures
 * other frameworks ended are forgotten first). */
DLS__INTERNAL bool dls__capture_on_device(dls__device *dev);
/* Whether a capture is still underway as far as dlstream can tell. */
DLS__INTERNAL bool dls__capture_underway(uint64_t id);

/* ---- memory allocated in a capture dlstream began ---- */

/* Where memory allocated in a capture learns its graph when the capture ends (set by graph.c, inside the end's
 * change): the graph (a reference held), and its replay count, which the hazard rule reads without knowing
 * graphs (before the first replay the memory holds no output yet). Both NULL until then, or when orphaned. */
typedef struct dls__graph_owner {
  struct dls__graph *graph;
  const uint64_t *launches;
} dls__graph_owner;

/* Memory allocated in capture `id`: its graph will own it once the capture
 * ends, and `*owner` (the buffer's) then names that graph. Removed
 * when the memory is freed in the capture; orphaned when its buffer goes
 * without a free the capture could order after its uses (the graph still
 * owns the memory, as an output's whose buffer is gone: freed after the
 * graph's last replay). */
DLS__INTERNAL void dls__capture_alloc_add(uint64_t id, dls__graph_owner *owner, void *ptr);
DLS__INTERNAL void dls__capture_alloc_remove(uint64_t id, dls__graph_owner *owner);
DLS__INTERNAL void dls__capture_alloc_orphan(uint64_t id, dls__graph_owner *owner);

/* ---- memory an own capture uses but did not allocate (its graph's replays are uses of it) ---- */

/* An object an own capture's work used, held (a reference the caller took) until the capture's end hands it to
 * the graph, or dropped through `drop` when the capture is discarded. The capture names no buffer: it keeps
 * what it is given, as for its allocations. */
typedef struct dls__capture_hold {
  void *obj;
  void (*drop)(void *obj);
} dls__capture_hold;
/* Keeps `obj` (with the caller's reference) while capture `id` is an own capture underway and `obj_cap` (the
 * capture that allocated the memory, 0: none) is not one underway: *out_kept then says it was kept, and the
 * reference is the capture's. Otherwise nothing is kept (the caller drops its reference). Out of host memory:
 * DLS_ERR_OUT_OF_MEMORY, nothing kept. */
DLS__INTERNAL dls_status_t dls__capture_keep(uint64_t id, void *obj, void (*drop)(void *obj), uint64_t obj_cap,
                                             bool *out_kept);

/* ---- polling and pool calls beside captures ---- */

/* Driver queries dlstream makes on its own initiative run in relaxed capture
 * mode, so that a capture on another thread it cannot see is never
 * invalidated by them. */
typedef struct dls__relaxed {
  const dls__backend *be;
  int dev, prev;
  bool swapped;
} dls__relaxed;
DLS__INTERNAL void dls__relaxed_enter(dls__relaxed *r, dls__device *dev);
DLS__INTERNAL void dls__relaxed_leave(dls__relaxed *r);
/* Stream-ordered allocation and free (on `s`, eager or captured) while a
 * capture dlstream knows is underway, or a graph exists, run in relaxed
 * capture mode and under the lock of the graph calls: a global or
 * thread-local capture on another thread is then neither invalidated nor
 * raced by them (the CUDA driver crashed in cuGraphInstantiate and
 * cuMemFreeAsync when threads in global mode allocated from a pool while
 * another ended a capture). No driver call more while neither exists. */
DLS__INTERNAL dls_status_t dls__mem_alloc(dls__stream *s, size_t size, void **out_ptr);
DLS__INTERNAL void dls__mem_free(dls__device *dev, void *ptr, dls__stream *s);
/* Graphs alive (graph.c counts them): while any is, pool calls take the lock. */
DLS__INTERNAL extern _Atomic int dls__graphs_live;
/* The backend's end of a capture and destroy of a graph, under that lock. */
/* The driver's capture state of a native stream (the backend's method must exist), kept apart from the calls
 * above while a capture or a graph exists (the locked variant). */
DLS__INTERNAL dls_status_t dls__capture_status_locked(dls__device *dev, void *native_stream, int *out_status,
                                                      uint64_t *out_id);
static DLS__HOT_INLINE dls_status_t dls__capture_status_call(dls__device *dev, void *native_stream, int *out_status,
                                                    uint64_t *out_id) {
  if (DLS__LIKELY(atomic_load_explicit(&dls__captures_known, memory_order_acquire) == 0 &&
                  atomic_load_explicit(&dls__graphs_live, memory_order_acquire) == 0))
    return dev->be->stream_capture_status(dev->be, dev->id, native_stream, out_status, out_id);
  return dls__capture_status_locked(dev, native_stream, out_status, out_id);
}
DLS__INTERNAL dls_status_t dls__capture_end_call(dls__device *dev, void *native_stream, void **out_graph);
DLS__INTERNAL void dls__graph_destroy_call(dls__device *dev, void *graph);

/* ---- captures dlstream began, for their end (graph.c) ---- */

/* Memory an own capture allocated and did not free: where its graph goes
 * (the buffer's; NULL once orphaned), and the memory. */
typedef struct dls__capture_alloc {
  dls__graph_owner *owner;
  void *ptr;
} dls__capture_alloc;

/* A capture underway: begun through dls_stream_begin_capture (own), or seen
 * on a stream passed to dlstream (foreign, e.g. torch.cuda.graph). */
typedef struct dls__capture {
  uint64_t id;
  dls__device *dev;
  int mode;              /* DLS_CAPTURE_*; foreign captures count as global */
  bool own;
  bool ending;           /* a thread is ending it: it stays known until the driver has ended it */
  pthread_t thread;      /* the thread that began it */
  dls__stream *origin;   /* ref held */
  dls__capture_alloc *allocs; /* own: memory allocated in it and not freed in it */
  int nallocs, cap_allocs;
  dls__capture_hold *holds; /* own: what its work used and did not allocate (dls__capture_hold) */
  int nholds, cap_holds;
  struct dls__capture *next;
} dls__capture;

/* The id of the own capture begun on `s` (its native stream), 0 when none. */
DLS__INTERNAL uint64_t dls__capture_own_on(const dls__stream *s);
/* The own capture begun on `s` (on its native stream, or through this very
 * object), claimed for ending; NULL when none or another thread ends it. It
 * stays known until dls__capture_unlink: until the driver has ended it, its
 * streams are still in it (a pooled branch must not be handed out meanwhile). */
DLS__INTERNAL dls__capture *dls__capture_claim(dls__stream *s, bool this_object);
/* Takes what a claimed capture holds (dls__capture_hold): the caller owns the array (dls__free) and the
 * references. A hold made after this is dropped when the capture is forgotten. */
DLS__INTERNAL dls__capture_hold *dls__capture_take_holds(dls__capture *c, int *out_n);
/* A claimed capture the driver has ended leaves the registry (inside the change that ended it)... */
DLS__INTERNAL void dls__capture_unlink(dls__capture *c);
/* ...and its record is freed after that change, what it still holds dropped (a drop may run a release callback). */
DLS__INTERNAL void dls__capture_release(dls__capture *c);
/* Ends a claimed capture, in a change: an own one is ended on its stream
 * and what it recorded is dropped (a failed end ends it too); a foreign one
 * is only forgotten. */
DLS__INTERNAL void dls__capture_end_dropping(dls__capture *c);
/* The stream's handle is going away: a capture begun through it ends, and
 * what it recorded is dropped (no one could end it any more). */
DLS__INTERNAL void dls__capture_drop_on(dls__stream *s);
/* Ends the captures dlstream began (their graphs are dropped) and forgets the others (dls_shutdown). */
DLS__INTERNAL void dls__captures_shutdown(void);

#endif /* DLSTREAM_CORE_CAPTURE_H */
