/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU backend's events: completion records, and placeholders recorded in captures. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_internal.h"

#define g dls__cpu_g

dls_status_t dls__cpu_event_create(const dls__backend *be, int dev, unsigned flags, void **out) {
  (void)dev;
  cpu_event *e = calloc(1, sizeof *e);
  if (e == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for an event");
  e->magic = CPU_EVENT_MAGIC;
  e->flags = flags;
  pthread_mutex_init(&e->mu, NULL);
  pthread_mutex_lock(&g.mu);
  link_push(&g.events, &e->link);
  pthread_mutex_unlock(&g.mu);
  *out = e;
  return DLS_OK;
}

dls_status_t dls__cpu_event_destroy(const dls__backend *be, int dev, void *native) {
  (void)dev;
  cpu_event *e = native;
  if (e == NULL)
    return DLS_OK;
  pthread_mutex_lock(&g.mu);
  link_remove(&g.events, &e->link);
  pthread_mutex_unlock(&g.mu);
  dls__cpu_node_unref(e->latest); /* queued records and waits hold their own references */
  pthread_mutex_destroy(&e->mu);
  e->magic = 0;
  free(e);
  return DLS_OK;
}

dls_status_t dls__cpu_event_check(const dls__backend *be, int dev, void *native) {
  (void)dev;
  pthread_mutex_lock(&g.mu);
  bool live = link_has(g.events, native);
  pthread_mutex_unlock(&g.mu);
  if (!live)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "native %p is not a live CPU event of this process", native);
  return DLS_OK;
}

static cpu_node *latest_ref(cpu_event *e) {
  pthread_mutex_lock(&e->mu);
  cpu_node *n = e->latest;
  if (n)
    atomic_fetch_add(&n->refs, 1);
  pthread_mutex_unlock(&e->mu);
  return n;
}

static void set_latest(cpu_event *e, cpu_node *n) {
  pthread_mutex_lock(&e->mu);
  cpu_node *old = e->latest;
  e->latest = n;
  pthread_mutex_unlock(&e->mu);
  dls__cpu_node_unref(old);
}

/* On a capturing stream the record is a placeholder: the event then names a
 * point of the capture, which only its graph's replays reach. */
dls_status_t dls__cpu_event_record(const dls__backend *be, int dev, void *ev, void *stream) {
  (void)dev;
  cpu_stream *s = stream;
  cpu_node *n = dls__cpu_node_new();
  cpu_cmd *c = dls__cpu_cmd_new(CMD_RECORD, 0);
  if (n == NULL || c == NULL) {
    dls__cpu_node_unref(n);
    free(c);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory to record an event");
  }
  pthread_mutex_lock(&g.mu);
  cpu_capture *cap = s->cap;
  if (cap != NULL) {
    n->cap_id = cap->id;
    n->cap_index = cap->nrecords;
    c->u.rec.index = n->cap_index;
    dls_status_t st = dls__cpu_capture_append(s, c);
    if (st == DLS_OK) {
      cap->nrecords++;
      set_latest(ev, n);
    } else {
      dls__cpu_node_unref(n);
    }
    pthread_mutex_unlock(&g.mu);
    return st;
  }
  pthread_mutex_unlock(&g.mu);
  atomic_fetch_add(&n->refs, 1); /* one for the event, one for the command */
  c->u.rec.node = n;
  /* A wait sees only a record already queued (CUDA's rule): queueing the
   * record and making it the event's latest are one step, so no stream can
   * queue a wait for a record that is not on its stream yet, and waits can
   * never form a cycle. Waits take the event's lock only to read it. */
  cpu_event *e = ev;
  pthread_mutex_lock(&e->mu);
  dls_status_t st = dls__cpu_enqueue(s, c);
  cpu_node *old = e->latest;
  e->latest = n;
  pthread_mutex_unlock(&e->mu);
  dls__cpu_node_unref(old);
  return st;
}

/* Waits on a placeholder record: a stream of its capture waits on that
 * point; a stream outside any capture joins the capture (CUDA's rule). */
static dls_status_t wait_placeholder(cpu_stream *s, cpu_node *n) {
  cpu_capture *src = dls__cpu_capture_find(n->cap_id);
  if (src == NULL)
    return dls__fail(DLS_ERR_STATE,
                     "cpu backend: the event was last recorded in capture %llu, which has ended: that record is a "
                     "node of its graph and is never reached outside a replay",
                     (unsigned long long)n->cap_id);
  if (s->cap != NULL && s->cap != src) {
    dls__cpu_capture_invalidate(s->cap, "waited on an event of another capture");
    dls__cpu_capture_invalidate(src, "an event of it was waited on by another capture");
    return dls__fail(DLS_ERR_STATE, "cpu backend: stream %p of capture %llu waits on an event of capture %llu",
                     (void *)s, (unsigned long long)s->cap->id, (unsigned long long)src->id);
  }
  if (s->cap == NULL)
    DLS__TRY(dls__cpu_capture_join(src, s));
  cpu_cmd *c = dls__cpu_cmd_new(CMD_WAIT, 0);
  if (c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory to wait on an event");
  c->u.rec.index = n->cap_index;
  return dls__cpu_capture_append(s, c);
}

dls_status_t dls__cpu_stream_wait_event(const dls__backend *be, int dev, void *stream, void *ev) {
  (void)dev;
  cpu_stream *s = stream;
  cpu_node *n = latest_ref(ev);
  if (n == NULL)
    return DLS_OK; /* never recorded: nothing to wait for */
  pthread_mutex_lock(&g.mu);
  dls_status_t st = DLS_OK;
  bool handled = true;
  if (n->cap_id != 0) {
    st = wait_placeholder(s, n);
  } else if (s->cap != NULL) {
    uint64_t id = s->cap->id;
    dls__cpu_capture_invalidate(s->cap, "waited on an event recorded outside the capture");
    st = dls__fail(DLS_ERR_STATE,
                   "cpu backend: stream %p is capturing (capture %llu) and waits on an event recorded outside it",
                   (void *)s, (unsigned long long)id);
  } else {
    handled = false;
  }
  pthread_mutex_unlock(&g.mu);
  if (handled || dls__cpu_node_done(n)) {
    dls__cpu_node_unref(n);
    return st;
  }
  cpu_cmd *c = dls__cpu_cmd_new(CMD_WAIT, 0);
  if (c == NULL) {
    dls__cpu_node_unref(n);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory to wait on an event");
  }
  c->u.rec.node = n;
  return dls__cpu_enqueue(s, c);
}

/* A placeholder record never completes outside a replay. */
static dls_status_t refuse_placeholder(cpu_node *n, const char *what) {
  if (n == NULL || n->cap_id == 0)
    return DLS_OK;
  uint64_t id = n->cap_id;
  dls__cpu_node_unref(n);
  return dls__fail(DLS_ERR_STATE, "cpu backend: %s of an event last recorded in capture %llu (a graph node)", what,
                   (unsigned long long)id);
}

dls_status_t dls__cpu_event_query(const dls__backend *be, int dev, void *ev, int *out_complete) {
  (void)dev;
  cpu_node *n = latest_ref(ev);
  DLS__TRY(refuse_placeholder(n, "query"));
  *out_complete = n == NULL || dls__cpu_node_done(n);
  dls__cpu_node_unref(n);
  return DLS_OK;
}

dls_status_t dls__cpu_event_synchronize(const dls__backend *be, int dev, void *ev) {
  (void)dev;
  cpu_node *n = latest_ref(ev);
  DLS__TRY(refuse_placeholder(n, "synchronize"));
  if (n) {
    dls__cpu_node_wait(n);
    dls__cpu_node_unref(n);
  }
  return DLS_OK;
}

dls_status_t dls__cpu_event_elapsed(const dls__backend *be, int dev, void *a, void *b, float *out_ms) {
  (void)dev;
  cpu_node *na = latest_ref(a), *nb = latest_ref(b);
  dls_status_t st = DLS_OK;
  if (na == NULL || nb == NULL)
    st = dls__fail(DLS_ERR_STATE, "cpu backend: %s event was never recorded", na == NULL ? "start" : "end");
  else if (na->cap_id != 0 || nb->cap_id != 0)
    st = dls__fail(DLS_ERR_STATE, "cpu backend: %s event was last recorded in a capture (a graph node)",
                   na->cap_id != 0 ? "start" : "end");
  else if (!dls__cpu_node_done(na) || !dls__cpu_node_done(nb))
    st = dls__fail(DLS_ERR_STATE, "cpu backend: %s event has not completed yet (synchronize it first)",
                   dls__cpu_node_done(na) ? "end" : "start");
  else
    *out_ms = (float)((double)((int64_t)nb->t_ns - (int64_t)na->t_ns) / 1e6);
  dls__cpu_node_unref(na);
  dls__cpu_node_unref(nb);
  return st;
}

