/* SPDX-License-Identifier: Apache-2.0 */
/* Fork/join groups: branches on pooled streams, joined with events, no host sync. */
#include <stdlib.h>

#include "internal.h"

typedef struct dls__branch {
  dls__stream *stream; /* an extra ref: the join works even if the handle was destroyed */
  uint64_t handle;
} dls__branch;

typedef struct dls__group {
  dls__stream *origin; /* ref held */
  void *fork;          /* pooled event recorded on the origin at begin */
  dls__branch inline_branches[8];
  dls__branch *branches;
  int n, cap;
  uint64_t cap_id;     /* the origin's capture at begin (0: eager) */
  uint64_t id;
} dls__group;

#define DLS__GET_GROUP(var, handle, call, arg) DLS__GET(DLS_HANDLE_GROUP, dls__group, var, handle, call, arg)

dls_status_t dls_group_begin(dls_stream_t origin, dls_group_t *out_group) {
  static const char call[] = "dls_group_begin";
  DLS__ENTER(call);
  if (out_group == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_group=NULL): output pointer is NULL", call);
  out_group->id = 0;
  DLS__GET_STREAM(o, origin, call, "origin");
  dls__group *g = dls__calloc(1, sizeof *g);
  if (g == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  dls__device *dev = o->dev;
  uint64_t cap = 0;
  if (dls__stream_capture(o, &cap) == DLS__CAPTURE_INVALIDATED) {
    dls__free(g);
    return dls__fail(DLS_ERR_STATE, "%s: the origin's capture on %s was invalidated; end it first", call, dev->name);
  }
  /* In a capture the fork record is a node of it: each branch joins the
   * capture by waiting on it, and rejoins the origin at dls_group_end. */
  dls_status_t st = dls__event_pool_get(dev, &g->fork);
  if (st == DLS_OK) {
    st = dev->be->event_record(dev->id, g->fork, o->native);
    if (st != DLS_OK)
      dls__event_pool_put(dev, g->fork);
  }
  if (st != DLS_OK) {
    dls__free(g);
    return dls__fail_prefix(st, "%s: recording the fork point", call);
  }
  g->origin = o;
  g->cap_id = cap;
  dls__stream_ref(o);
  g->branches = g->inline_branches;
  g->cap = 8;
  g->id = dls__handle_new(DLS_HANDLE_GROUP, g);
  if (g->id == 0) {
    dls__event_pool_put(dev, g->fork);
    dls__stream_unref(o);
    dls__free(g);
    return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
  }
  atomic_fetch_add(&o->open_groups, 1);
  out_group->id = g->id;
  return DLS_OK;
}

dls_status_t dls_group_branch(dls_group_t group, dls_stream_t *out_branch) {
  static const char call[] = "dls_group_branch";
  DLS__ENTER(call);
  if (out_branch == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_branch=NULL): output pointer is NULL", call);
  out_branch->id = 0;
  DLS__GET_GROUP(g, group, call, "group");
  dls__device *dev = g->origin->dev;
  if (g->n == g->cap) {
    int cap = g->cap * 2;
    dls__branch *p = dls__malloc((size_t)cap * sizeof *p);
    if (p == NULL)
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
    for (int i = 0; i < g->n; i++)
      p[i] = g->branches[i];
    if (g->branches != g->inline_branches)
      dls__free(g->branches);
    g->branches = p;
    g->cap = cap;
  }
  dls_stream_t h;
  dls_status_t st = dls_stream_acquire(dev->device, &h);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s", call);
  dls__stream *b = dls__handle_peek(DLS_HANDLE_STREAM, h.id);
  st = dev->be->stream_wait_event(dev->id, b->native, g->fork);
  if (st != DLS_OK) {
    dls_stream_destroy(h);
    return dls__fail_prefix(st, "%s: waiting on the fork point", call);
  }
  dls__stream_ref(b);
  g->branches[g->n].stream = b;
  g->branches[g->n].handle = h.id;
  g->n++;
  *out_branch = h;
  return DLS_OK;
}

dls_status_t dls_group_end(dls_group_t group) {
  static const char call[] = "dls_group_end";
  DLS__ENTER(call);
  DLS__GET_GROUP(g, group, call, "group");
  for (int i = 0; i < g->n; i++)
    if (atomic_load(&g->branches[i].stream->open_groups) > 0)
      return dls__fail(DLS_ERR_STATE, "%s: branch %d is the origin of a group that is still open; end that group first",
                       call, i);
  dls__stream *o = g->origin;
  dls_status_t first = DLS_OK;
  for (int i = 0; i < g->n; i++) {
    dls_status_t st = dls__stream_order(o, g->branches[i].stream);
    if (st != DLS_OK && first == DLS_OK)
      first = dls__fail_prefix(st, "%s: joining branch %d", call, i);
  }
  if (dls__handle_free(DLS_HANDLE_GROUP, g->id) == NULL)
    return dls__fail(DLS_ERR_INVALID_HANDLE, "%s(group): ended concurrently", call);
  for (int i = 0; i < g->n; i++) {
    dls__stream *b = dls__handle_free(DLS_HANDLE_STREAM, g->branches[i].handle);
    if (b != NULL)
      dls__stream_unref(b); /* the handle's reference */
    dls__stream_unref(g->branches[i].stream); /* the group's */
  }
  dls__event_pool_put(o->dev, g->fork);
  atomic_fetch_sub(&o->open_groups, 1);
  dls__stream_unref(o);
  if (g->branches != g->inline_branches)
    dls__free(g->branches);
  dls__free(g);
  return first;
}

dls_status_t dls_group_branch_count(dls_group_t group, int *out_count) {
  static const char call[] = "dls_group_branch_count";
  DLS__ENTER(call);
  if (out_count == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_count=NULL): output pointer is NULL", call);
  DLS__GET_GROUP(g, group, call, "group");
  *out_count = g->n;
  return DLS_OK;
}

static _Thread_local uint64_t t_count_cap;
static _Thread_local int t_count;

static void count_in_capture(uint64_t id, void *obj) {
  (void)id;
  if (((dls__group *)obj)->cap_id == t_count_cap)
    t_count++;
}

int dls__groups_open_in_capture(uint64_t cap_id) {
  t_count_cap = cap_id;
  t_count = 0;
  dls__handle_each(DLS_HANDLE_GROUP, count_in_capture);
  return t_count;
}
