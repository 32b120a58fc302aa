/* SPDX-License-Identifier: Apache-2.0 */
/* A capture's end and a graph's replays as work on the memory the capture
 * used and did not allocate (eager buffers, borrowed and framework tensors):
 * the end learns those buffers, each with how the capture used it, and the
 * graph keeps a reference on each, so the memory outlives its replays; each
 * replay is one piece of work under the hazard rule on its stream, ordered
 * after the eager uses it must follow and noted as a use of each buffer. */
#include <stdlib.h>

#include "core/access.h"
#include "core/buffer.h"
#include "core/graph.h"
#include "core/group.h"

/* What a graph's replays use: its buffers in address order (a reference held
 * on each), in groups of as many as one piece of work declares. A replay
 * begins the groups in order, so it takes their locks in address order, as
 * any work does. */
typedef struct replay_uses {
  int ngroups;
  dls__accesses groups[];
} replay_uses;

enum { GROUP = (int)(sizeof((dls__accesses *)0)->a / sizeof((dls__accesses *)0)->a[0]) };

static void uses_drop(void *p) {
  replay_uses *u = p;
  for (int g = 0; g < u->ngroups; g++)
    for (int i = 0; i < u->groups[g].n; i++)
      dls__buffer_unref(u->groups[g].a[i].b);
  dls__free(u);
}

static void holds_drop(dls__capture_hold *h, int n) {
  for (int i = 0; i < n; i++)
    if (h[i].obj != NULL)
      h[i].drop(h[i].obj);
}

static int by_address(const void *x, const void *y) {
  uintptr_t a = (uintptr_t)((const dls__capture_hold *)x)->obj, b = (uintptr_t)((const dls__capture_hold *)y)->obj;
  return (a > b) - (a < b);
}

/* The record of what capture `cap` used and did not allocate, from its holds
 * (access.c keeps buffers only; one per stream that used it): the references
 * of the holds it keeps move into it (their entries in `h` become NULL); the
 * others stay in `h` for the caller to drop (a drop may run a release
 * callback, so never inside the capture's change). *out is NULL when no use
 * of them was queued. */
static dls_status_t uses_make(dls__capture_hold *h, int n, uint64_t cap, const char *call, replay_uses **out) {
  *out = NULL;
  if (n == 0)
    return DLS_OK;
  qsort(h, (size_t)n, sizeof *h, by_address);
  int distinct = 0;
  for (int i = 0; i < n; i++)
    distinct += i == 0 || h[i].obj != h[i - 1].obj;
  int ngroups = (distinct + GROUP - 1) / GROUP;
  replay_uses *u = dls__malloc(sizeof *u + (size_t)ngroups * sizeof u->groups[0]);
  if (u == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY,
                     "%s: out of host memory for the graph's record of the %d buffer(s) its capture used and did "
                     "not allocate (the capture is over; no graph was made)",
                     call, distinct);
  u->ngroups = 0;
  dls__accesses *x = NULL;
  void *prev = NULL;
  for (int i = 0; i < n; i++) {
    dls__buffer *b = h[i].obj;
    int mode = i > 0 && b == prev ? 0 : dls__buffer_capture_mode(b, cap);
    prev = b;
    if (mode == 0) /* a second hold of one buffer, or one whose use was never queued: dropped by the caller */
      continue;
    if (x == NULL || x->n == GROUP) {
      x = &u->groups[u->ngroups++];
      x->n = 0;
    }
    x->a[x->n].b = b;
    x->a[x->n].mode = (uint8_t)mode;
    x->n++;
    h[i].obj = NULL; /* its reference is the record's */
  }
  if (u->ngroups == 0) {
    dls__free(u);
    u = NULL;
  }
  *out = u;
  return DLS_OK;
}

/* Before a replay on `s`: `s` waits for what each buffer's use must follow
 * (the hazard rule among eager streams); the buffers stay locked until
 * replay_end. On failure nothing is locked and nothing but waits was queued. */
static dls_status_t replay_begin(replay_uses *u, dls__stream *s) {
  for (int g = 0; g < u->ngroups; g++) {
    dls_status_t st = dls__access_begin(&u->groups[g], s);
    if (st != DLS_OK) {
      while (g-- > 0)
        (void)dls__access_end(&u->groups[g], false);
      return st;
    }
  }
  return DLS_OK;
}

/* After the replay was queued (`queued`) or not: notes its uses and unlocks. */
static dls_status_t replay_end(replay_uses *u, bool queued) {
  dls_status_t first = DLS_OK;
  for (int g = 0; g < u->ngroups; g++) {
    dls_status_t st = dls__access_end(&u->groups[g], queued);
    if (st != DLS_OK && first == DLS_OK)
      first = st;
  }
  return first;
}

/* ---- public API ---- */

dls_status_t dls_stream_end_capture(dls_stream_t stream, dls_graph_t *out_graph) {
  static const char call[] = "dls_stream_end_capture";
  DLS__ENTER(call);
  DLS__OUT(call, out_graph);
  DLS__GET_OF(stream, s, stream, call, "stream");
  /* A group begun in the capture has branches that have not rejoined: the
   * driver would fail the end and drop the capture. Refused first, so the
   * group can end and the capture go on. */
  uint64_t mine_id = dls__capture_own_on(s);
  int open = mine_id != 0 ? dls__groups_open_in_capture(mine_id) : 0;
  if (open > 0) {
    char d[128];
    return dls__fail(DLS_ERR_STATE,
                     "%s: %s: %d group(s) begun in the capture are still open, so their branches have not rejoined "
                     "it; end them first (nothing changed: the capture goes on)",
                     call, dls__stream_describe(s, mine_id, d, sizeof d), open);
  }
  /* The end is a change of the capture state: no pinned allocation, free or use of another thread's straddles it,
   * so the memory the capture allocated is exactly what its graph owns. */
  dls__capture_change_begin();
  dls__capture *c = dls__capture_claim(s, false);
  if (c == NULL) {
    dls__capture_change_end();
    uint64_t id;
    char d[128];
    int status = dls__stream_capture(s, &id);
    return dls__fail(DLS_ERR_STATE, "%s: %s has no capture begun by dls_stream_begin_capture%s", call,
                     dls__stream_describe(s, id, d, sizeof d),
                     status == DLS__CAPTURE_ACTIVE ? " (its capture was begun elsewhere: end it there)" : "");
  }
  void *native = NULL;
  dls_status_t st = dls__capture_end_call(s->dev, s->native, &native);
  /* Its work is all queued now: what it used, and how, is known. */
  int nholds = 0;
  dls__capture_hold *holds = dls__capture_take_holds(c, &nholds);
  replay_uses *uses = NULL;
  if (st != DLS_OK) {
    /* The backend's status: DLS_ERR_STATE when the capture was invalidated or a stream did not rejoin. */
    st = dls__fail_prefix(st, "%s(stream on %s)", call, s->dev->name);
  } else if ((st = uses_make(holds, nholds, c->id, call, &uses)) != DLS_OK) {
    dls__graph_destroy_call(s->dev, native);
  } else if ((st = dls__graph_publish(c, native, uses, uses_drop, call, out_graph)) == DLS_OK) {
    uses = NULL; /* the graph's */
  }
  dls__capture_unlink(c);
  dls__capture_change_end();
  /* Outside the change: drops may run release callbacks. */
  if (uses != NULL)
    uses_drop(uses);
  holds_drop(holds, nholds);
  dls__free(holds);
  dls__capture_release(c);
  dls_deferred_poll(); /* releases that waited for the capture to be over */
  return st;
}

/* dls_graph_launch's checks and replay, pinned; failures carry their message. */
static dls_status_t replay_pinned(const char *call, dls__graph *gr, dls__stream *s, dls__stream **out_old) {
  uint64_t id;
  if (dls__stream_capture(s, &id) != DLS__CAPTURE_NONE) {
    char d[128];
    return dls__fail(DLS_ERR_STATE, "%s: %s is capturing; replaying a graph inside a capture is not supported", call,
                     dls__stream_describe(s, id, d, sizeof d));
  }
  if (dls__stream_legacy(s) && dls__capture_on_device(s->dev))
    return dls__fail(DLS_ERR_STATE, "%s: a capture is underway on %s, so its legacy stream may not be used", call,
                     s->dev->name);
  /* One replay declares the graph's record at a time (the driver orders a graph's replays anyway). */
  pthread_mutex_lock(&gr->mu);
  replay_uses *u = gr->uses;
  dls_status_t st = u != NULL ? replay_begin(u, s) : DLS_OK;
  if (st != DLS_OK) {
    pthread_mutex_unlock(&gr->mu);
    return dls__fail_prefix(st, "%s(stream on %s): ordering after the other streams that use the memory its capture "
                                "used (nothing was replayed)",
                            call, s->dev->name);
  }
  st = dls__graph_launch_locked(gr, s, out_old);
  dls_status_t noted = u != NULL ? replay_end(u, st == DLS_OK) : DLS_OK;
  pthread_mutex_unlock(&gr->mu);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(stream on %s)", call, s->dev->name);
  if (noted != DLS_OK)
    return dls__fail_prefix(noted, "%s: recording a buffer use after the replay", call);
  return DLS_OK;
}

dls_status_t dls_graph_launch(dls_graph_t graph, dls_stream_t stream) {
  static const char call[] = "dls_graph_launch";
  DLS__ENTER(call);
  DLS__GET_OF(graph, gr, graph, call, "graph");
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (s->dev != gr->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: graph is on %s but stream is on %s", call, gr->dev->name,
                     s->dev->name);
  /* Checked and replayed in one pin: a capture begun in between would take the replay into its graph. */
  dls__capture_pin();
  dls__stream *old = NULL;
  dls_status_t st = replay_pinned(call, gr, s, &old);
  dls__capture_unpin();
  if (old != NULL)
    dls__stream_unref(old); /* its last reference may let go of a framework's stream object */
  if (st != DLS_OK)
    return st;
  dls_deferred_poll();
  return DLS_OK;
}
