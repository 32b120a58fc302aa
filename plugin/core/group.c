/* SPDX-License-Identifier: Apache-2.0 */
/* Fork/join groups: branches on pooled streams, joined with events, no host sync. */
#include <stdlib.h>

#include "core/capture.h"
#include "core/deferred.h"
#include "core/group.h"
#include "core/wait.h"

typedef struct dls__branch {
  dls__stream *stream; /* an extra ref: the join works even if the handle was destroyed */
  uint64_t handle;     /* the pooled branch's handle; 0: a stream the caller added (dls_group_add) */
} dls__branch;

/* Calls on one group may come from several threads: `mu` orders its
 * branches and its end. */
typedef struct dls__group {
  dls__stream *origin; /* ref held */
  void *fork;          /* pooled event recorded on the origin at begin */
  dls__branch inline_branches[8];
  dls__branch *branches;
  int n, cap;
  uint64_t cap_id;     /* the origin's capture at begin (0: eager) */
  uint64_t id;
  pthread_mutex_t mu;
  _Atomic bool ended;  /* joined by dls_group_end: no branch is added any more */
} dls__group;


dls_status_t dls_group_begin(dls_stream_t origin, dls_group_t *out_group) {
  static const char call[] = "dls_group_begin";
  DLS__ENTER(call);
  DLS__OUT(call, out_group);
  DLS__GET_OF(stream, o, origin, call, "origin");
  dls__group *g = dls__calloc(1, sizeof *g);
  if (g == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  dls__device *dev = o->dev;
  /* In a capture the fork record is a node of it: each branch joins the
   * capture by waiting on it, and rejoins the origin at dls_group_end. The
   * capture noted is the one the record lands in (a pin). */
  dls__capture_pin();
  uint64_t cap = 0;
  bool invalidated = dls__stream_capture(o, &cap) == DLS__CAPTURE_INVALIDATED;
  dls_status_t st = invalidated ? DLS_ERR_STATE : dls__event_pool_get(dev, &g->fork);
  if (st == DLS_OK && !invalidated) {
    st = dev->be->event_record(dev->be, dev->id, g->fork, o->native);
    if (st != DLS_OK)
      dls__event_pool_put(dev, g->fork);
  }
  dls__capture_unpin();
  if (st != DLS_OK) {
    dls__free(g);
    if (invalidated)
      return dls__fail(DLS_ERR_STATE, "%s: the origin's capture on %s was invalidated; end it first", call,
                       dev->name);
    return dls__fail_prefix(st, "%s: recording the fork point", call);
  }
  g->origin = o;
  g->cap_id = cap;
  dls__stream_ref(o);
  g->branches = g->inline_branches;
  g->cap = 8;
  pthread_mutex_init(&g->mu, NULL);
  atomic_fetch_add(&o->open_groups, 1);
  g->id = dls__table_add(&dls__group_table, g);
  if (g->id == 0) {
    atomic_fetch_sub(&o->open_groups, 1);
    pthread_mutex_destroy(&g->mu);
    dls__event_pool_put(dev, g->fork);
    dls__stream_unref(o);
    dls__free(g);
    return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
  }
  out_group->id = g->id;
  return DLS_OK;
}

/* Room for one more branch (g->mu held). */
static dls_status_t branch_room(dls__group *g, const char *call) {
  if (g->n < g->cap)
    return DLS_OK;
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
  return DLS_OK;
}

/* A new branch (g->mu held): a pooled stream that waits on the fork point. */
static dls_status_t branch_add(dls__group *g, const char *call, dls_stream_t *out_branch) {
  dls__device *dev = g->origin->dev;
  DLS__TRY(branch_room(g, call));
  dls_stream_t h;
  dls_status_t st = dls__stream_acquire_branch(g->origin, call, &h); /* one bound to the origin: stream.h */
  if (st != DLS_OK)
    return st;
  DLS__HOLD_VAR(held);
  dls__stream *b = dls__hold_get(&held, &dls__stream_table, h.id, call, "branch", &st);
  if (b == NULL)
    return st; /* ended by another thread before it was handed out */
  /* The branch joins the group's capture (or the eager origin) in a pin: a capture discarded meanwhile would have
   * it wait on a record of a capture that is over. */
  dls__capture_pin();
  bool over = g->cap_id != 0 && !dls__capture_underway(g->cap_id);
  st = over ? DLS_ERR_STATE : dev->be->stream_wait_event(dev->be, dev->id, b->native, g->fork);
  dls__capture_unpin();
  if (st != DLS_OK) {
    dls_stream_destroy(h);
    if (over)
      return dls__fail(DLS_ERR_STATE, "%s: the group's capture (%llu) is over: it was ended or discarded", call,
                       (unsigned long long)g->cap_id);
    return dls__fail_prefix(st, "%s: waiting on the fork point", call);
  }
  dls__stream_ref(b);
  g->branches[g->n].stream = b;
  g->branches[g->n].handle = h.id;
  g->n++;
  *out_branch = h;
  return DLS_OK;
}

dls_status_t dls_group_add(dls_group_t group, dls_stream_t stream) {
  static const char call[] = "dls_group_add";
  DLS__ENTER(call);
  DLS__GET_OF(group, g, group, call, "group");
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (dls__same_stream(s, g->origin))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(stream): the stream is the group's origin, which cannot be its "
                     "branch", call);
  pthread_mutex_lock(&g->mu);
  dls_status_t st = atomic_load(&g->ended) ? dls__fail(DLS_ERR_INVALID_HANDLE, "%s(group): the group was ended", call)
                                            : branch_room(g, call);
  bool over = false;
  if (st == DLS_OK) { /* in a pin, as a pooled branch joins (branch_add) */
    dls__capture_pin();
    over = g->cap_id != 0 && !dls__capture_underway(g->cap_id);
    st = over ? DLS_ERR_STATE : s->dev->be->stream_wait_event(s->dev->be, s->dev->id, s->native, g->fork);
    dls__capture_unpin();
  }
  if (st == DLS_OK) {
    dls__stream_ref(s);
    g->branches[g->n].stream = s;
    g->branches[g->n].handle = 0; /* the caller's: not ended with the group */
    g->n++;
  } else if (over) {
    st = dls__fail(DLS_ERR_STATE, "%s: the group's capture (%llu) is over: it was ended or discarded", call,
                   (unsigned long long)g->cap_id);
  } else if (st != DLS_ERR_INVALID_HANDLE && st != DLS_ERR_OUT_OF_MEMORY) {
    st = dls__fail_prefix(st, "%s: waiting on the fork point", call);
  }
  pthread_mutex_unlock(&g->mu);
  return st;
}

dls_status_t dls_group_branch(dls_group_t group, dls_stream_t *out_branch) {
  static const char call[] = "dls_group_branch";
  DLS__ENTER(call);
  DLS__OUT(call, out_branch);
  DLS__GET_OF(group, g, group, call, "group");
  pthread_mutex_lock(&g->mu);
  dls_status_t st = atomic_load(&g->ended) ? dls__fail(DLS_ERR_INVALID_HANDLE, "%s(group): the group was ended", call)
                                            : branch_add(g, call, out_branch);
  pthread_mutex_unlock(&g->mu);
  return st;
}

/* The first branch that is the origin of a group still open, or -1. */
static int nested_open(const dls__group *g) {
  for (int i = 0; i < g->n; i++)
    if (atomic_load(&g->branches[i].stream->open_groups) > 0)
      return i;
  return -1;
}

dls_status_t dls_group_end(dls_group_t group) {
  static const char call[] = "dls_group_end";
  DLS__ENTER(call);
  DLS__GET_OF(group, g, group, call, "group");
  pthread_mutex_lock(&g->mu);
  if (atomic_load(&g->ended)) {
    pthread_mutex_unlock(&g->mu);
    return dls__fail(DLS_ERR_INVALID_HANDLE, "%s(group): ended concurrently", call);
  }
  int nested = nested_open(g);
  if (nested >= 0) {
    pthread_mutex_unlock(&g->mu);
    return dls__fail(DLS_ERR_STATE, "%s: branch %d is the origin of a group that is still open; end that group first",
                     call, nested);
  }
  dls_status_t first = DLS_OK;
  for (int i = 0; i < g->n; i++) {
    dls_status_t st = dls__stream_order(g->origin, g->branches[i].stream);
    if (st != DLS_OK && first == DLS_OK)
      first = dls__fail_prefix(st, "%s: joining branch %d", call, i);
  }
  atomic_store(&g->ended, true);
  pthread_mutex_unlock(&g->mu);
  /* The branches go back to the pool (their handles are stale from now on)
   * and the group ends; what it holds goes once no call holds it. */
  for (int i = 0; i < g->n; i++)
    if (g->branches[i].handle != 0) /* a stream added by the caller stays the caller's */
      (void)dls__table_end(&dls__stream_table, g->branches[i].handle);
  atomic_fetch_sub(&g->origin->open_groups, 1);
  (void)dls__table_end(&dls__group_table, g->id);
  return first;
}

void dls__group_drop(void *obj) {
  dls__group *g = obj;
  for (int i = 0; i < g->n; i++)
    dls__stream_unref(g->branches[i].stream);
  dls__event_pool_put_after(g->origin->dev, g->fork, g->cap_id);
  dls__stream_unref(g->origin);
  if (g->branches != g->inline_branches)
    dls__free(g->branches);
  pthread_mutex_destroy(&g->mu);
  dls__free(g);
}
dls__table dls__group_table = DLS__TABLE("group", DLS_HANDLE_GROUP, dls__group_drop, NULL);

dls_status_t dls_group_branch_count(dls_group_t group, int *out_count) {
  static const char call[] = "dls_group_branch_count";
  DLS__ENTER(call);
  DLS__OUT(call, out_count);
  DLS__GET_OF(group, g, group, call, "group");
  pthread_mutex_lock(&g->mu);
  *out_count = g->n;
  pthread_mutex_unlock(&g->mu);
  return DLS_OK;
}

/* Counting walks the group handles holding each (handle_each), so a group
 * ended meanwhile on another thread stays valid while it is looked at. */
typedef struct count_ctx {
  uint64_t cap;
  int n;
} count_ctx;
static _Thread_local count_ctx *t_count;

static void count_in_capture(uint64_t id, void *obj) {
  (void)id;
  dls__group *g = obj;
  if (g->cap_id == t_count->cap && !atomic_load(&g->ended))
    t_count->n++;
}

int dls__groups_open_in_capture(uint64_t cap_id) {
  count_ctx ctx = {cap_id, 0};
  t_count = &ctx;
  dls__table_each(&dls__group_table, count_in_capture);
  t_count = NULL;
  return ctx.n;
}
