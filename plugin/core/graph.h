/* SPDX-License-Identifier: Apache-2.0 */
/* Graphs: what a capture's end makes, their native replays, and the memory they own. */
#ifndef DLSTREAM_CORE_GRAPH_H
#define DLSTREAM_CORE_GRAPH_H

#include "core/capture.h"
#include "core/use.h"


/* A graph output: memory a capture allocated and did not free. */
typedef struct dls__graph_out {
  void *ptr;
  uint64_t freed_at; /* the launch count when dlstream freed it, or UINT64_MAX */
} dls__graph_out;

typedef struct dls__graph {
  dls__device *dev;
  void *native;
  _Atomic int refs;     /* the handle + buffers whose memory it owns */
  pthread_mutex_t mu;   /* last, launches, outs; a replay's declaration of `uses` */
  dls__stream *last;    /* the stream of the latest replay (ref held), NULL before the first */
  uint64_t launches;     /* written under mu; read without by its outputs' owners (dls__graph_owner) */
  dls__graph_out *outs;
  int nouts;
  uint64_t id;
  void *uses;           /* what each replay uses besides its own memory (core/replay.c), NULL: nothing */
  void (*uses_drop)(void *uses); /* drops `uses` with the graph */
} dls__graph;

/* Makes the graph of claimed capture `c`, ended by the driver into `native`: it owns the memory `c` allocated
 * and did not free, and `uses` (dropped through `uses_drop` with the graph). On failure `native` is destroyed and
 * `uses` stays the caller's (this runs inside the capture's change, where nothing may be dropped). */
DLS__INTERNAL dls_status_t dls__graph_publish(dls__capture *c, void *native, void *uses, void (*uses_drop)(void *),
                                              const char *call, dls_graph_t *out);
/* Drops a reference; the last one frees the memory the graph still owns and destroys it. Never pinned: what its
 * replays used is dropped with it. */
DLS__INTERNAL void dls__graph_unref(dls__graph *gr);
/* Queues one replay of `gr` on eager stream `s` (gr->mu held) and notes it as the latest; *out_old is the
 * reference on the stream of the replay before, if another, for the caller to drop (unpinned, unlocked). */
DLS__INTERNAL dls_status_t dls__graph_launch_locked(dls__graph *gr, dls__stream *s, dls__stream **out_old);
/* Frees a graph output after the capture, its buffer gone (memory `ptr` on
 * `dev`, the buffer's `uses`), pinned: stream-ordered after the graph's last
 * replay and the buffer's eager uses. Returns the stream of that replay (ref
 * held) when the free could not be ordered after an eager use, or that
 * stream captures now: the caller then frees the memory on it once those
 * uses completed (dls__mem_free_eager). NULL otherwise. The buffer's
 * reference on `gr` stays the caller's, to drop after its pin
 * (dls__graph_unref). */
DLS__INTERNAL dls__stream *dls__graph_release_output(dls__graph *gr, dls__device *dev, void *ptr,
                                                     const dls__use *uses, int nuses);

#endif /* DLSTREAM_CORE_GRAPH_H */
