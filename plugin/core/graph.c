/* SPDX-License-Identifier: Apache-2.0 */
/* Graphs: what a capture dlstream began makes when it ends (or drops when it
 * is discarded), their native replays, and the memory they own (outputs:
 * allocated in the capture and not freed in it). A capture's end and a
 * replay as work under the hazard rule are core/replay.c's. */
#include <stdlib.h>

#include "core/capture.h"
#include "core/deferred.h"
#include "core/graph.h"

void dls__graph_unref(dls__graph *gr) {
  if (atomic_fetch_sub_explicit(&gr->refs, 1, memory_order_acq_rel) != 1)
    return;
  dls__device *dev = gr->dev;
  /* Outputs whose latest replay's allocation was never freed: free it after that replay (once a capture begun on
   * that stream since is over). */
  for (int i = 0; gr->last != NULL && i < gr->nouts; i++)
    if (gr->outs[i].freed_at != gr->launches)
      dls__mem_free_eager(dev, gr->outs[i].ptr, gr->last);
  dls__graph_destroy_call(dev, gr->native);
  if (gr->uses != NULL)
    gr->uses_drop(gr->uses); /* after the replays queued: each is a use of that memory */
  atomic_fetch_sub(&dls__graphs_live, 1);
  if (gr->last != NULL)
    dls__stream_unref(gr->last);
  pthread_mutex_destroy(&gr->mu);
  dls__free(gr->outs);
  dls__free(gr);
}

dls__stream *dls__graph_release_output(dls__graph *gr, dls__device *dev, void *ptr, const dls__use *uses,
                                       int nuses) {
  dls__stream *later = NULL;
  pthread_mutex_lock(&gr->mu);
  dls__stream *last = gr->last;
  if (last != NULL)
    dls__stream_ref(last);
  for (int i = 0; i < gr->nouts; i++)
    if (gr->outs[i].ptr == ptr)
      gr->outs[i].freed_at = gr->launches;
  uint64_t launches = gr->launches;
  pthread_mutex_unlock(&gr->mu);
  uint64_t cap = 0;
  if (last != NULL) {
    /* The latest replay's allocation is freed after that replay and after
     * every eager use of it; the next replay allocates it afresh. Where that
     * stream captures now (the caller's pin holds it so), nothing can be
     * ordered on it: the caller frees later. */
    bool ordered = dls__stream_capture(last, &cap) == DLS__CAPTURE_NONE;
    for (int i = 0; i < nuses && ordered; i++)
      if (uses[i].cap_id == 0)
        ordered &= dev->be->stream_wait_event(dev->be, dev->id, last->native, dls__use_event(&uses[i])) == DLS_OK;
    if (launches > 0 && !ordered)
      later = last; /* the caller frees it once the eager uses completed */
    else if (launches > 0)
      dls__mem_free(dev, ptr, last);
    if (later == NULL)
      dls__stream_unref(last);
  }
  return later;
}

dls_status_t dls__graph_publish(dls__capture *c, void *native, void *uses, void (*uses_drop)(void *),
                                const char *call, dls_graph_t *out) {
  dls__device *dev = c->dev;
  dls__graph *gr = dls__calloc(1, sizeof *gr);
  dls__graph_out *outs = c->nallocs > 0 ? dls__calloc((size_t)c->nallocs, sizeof *outs) : NULL;
  if (gr == NULL || (c->nallocs > 0 && outs == NULL)) {
    dls__free(gr);
    dls__free(outs);
    dls__graph_destroy_call(dev, native);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory for a graph", call);
  }
  gr->dev = dev;
  gr->native = native;
  atomic_init(&gr->refs, 1);
  pthread_mutex_init(&gr->mu, NULL);
  gr->outs = outs;
  gr->uses = uses;
  gr->uses_drop = uses_drop;
  gr->id = dls__table_add(&dls__graph_table, gr);
  if (gr->id == 0) {
    pthread_mutex_destroy(&gr->mu);
    dls__free(gr);
    dls__free(outs);
    dls__graph_destroy_call(dev, native);
    return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
  }
  atomic_fetch_add(&dls__graphs_live, 1);
  /* Memory the capture allocated and did not free: the graph owns it now. */
  for (int i = 0; i < c->nallocs; i++) {
    dls__graph_owner *owner = c->allocs[i].owner;
    if (owner != NULL) {
      *owner = (dls__graph_owner){gr, &gr->launches};
      atomic_fetch_add(&gr->refs, 1);
    }
    gr->outs[gr->nouts].ptr = c->allocs[i].ptr;
    gr->outs[gr->nouts].freed_at = UINT64_MAX;
    gr->nouts++;
  }
  out->id = gr->id;
  return DLS_OK;
}

dls_status_t dls__graph_launch_locked(dls__graph *gr, dls__stream *s, dls__stream **out_old) {
  *out_old = NULL;
  dls_status_t st = s->dev->be->graph_launch(s->dev->be, s->dev->id, gr->native, s->native);
  if (st != DLS_OK)
    return st;
  __atomic_store_n(&gr->launches, gr->launches + 1, __ATOMIC_RELEASE); /* read unlocked through its outputs' owners */
  if (gr->last != s) {
    dls__stream_ref(s);
    *out_old = gr->last;
    gr->last = s;
  }
  return DLS_OK;
}

/* ---- public API (dls_stream_end_capture and dls_graph_launch: core/replay.c) ---- */

dls_status_t dls_stream_discard_capture(dls_stream_t stream) {
  static const char call[] = "dls_stream_discard_capture";
  DLS__ENTER(call);
  DLS__GET_OF(stream, s, stream, call, "stream");
  dls__capture *c = dls__capture_claim(s, false);
  if (c == NULL) {
    uint64_t id;
    char d[128];
    if (dls__stream_capture(s, &id) == DLS__CAPTURE_NONE)
      return DLS_OK; /* nothing to discard */
    return dls__fail(DLS_ERR_STATE, "%s: %s is capturing, but its capture was begun elsewhere: end it there", call,
                     dls__stream_describe(s, id, d, sizeof d));
  }
  dls__capture_end_dropping(c);
  dls_deferred_poll(); /* releases that waited for the capture to be over */
  return DLS_OK;
}

dls_status_t dls_graph_destroy(dls_graph_t graph) {
  static const char call[] = "dls_graph_destroy";
  if (graph.id == 0)
    return DLS_OK;
  DLS__ENTER(call);
  DLS__END(&dls__graph_table, graph, call, "graph");
  return DLS_OK;
}

void dls__graph_drop(void *obj) { dls__graph_unref(obj); }
dls__table dls__graph_table = DLS__TABLE("graph", DLS_HANDLE_GRAPH, dls__graph_drop, NULL);

