/* SPDX-License-Identifier: Apache-2.0 */
/* Host waits that signals interrupt: the work is polled with the GIL held and the GIL is let go between polls, so
 * a Ctrl-C raises KeyboardInterrupt within a fraction of a millisecond (the work stays queued), and no other
 * thread can close what is polled while a poll runs. */
#include "errors.h"

#include <time.h>

#define NAP_MIN_NS 2000L   /* the first nap: short waits end almost as soon as the work */
#define NAP_MAX_NS 200000L /* the longest: a long wait costs about 5000 polls a second */

static void nap(long ns) {
  struct timespec ts = {0, ns};
  Py_BEGIN_ALLOW_THREADS
  nanosleep(&ts, NULL); /* a signal cuts it short: the handler runs at once */
  Py_END_ALLOW_THREADS
}

int dlspy_wait(dlspy_poll_fn poll, void *ctx) {
  long ns = NAP_MIN_NS;
  for (;;) {
    int done = 0;
    if (poll(ctx, &done) != 0)
      return -1;
    if (done)
      return 0;
    if (PyErr_CheckSignals() != 0)
      return -1;
    nap(ns);
    ns = ns * 2 < NAP_MAX_NS ? ns * 2 : NAP_MAX_NS;
  }
}

/* The queries of a wait run in relaxed capture mode (ext.h): a capture another thread runs in global mode - one
 * dlstream may never have seen, such as torch.cuda.graph's - is not invalidated by them. */
dls_status_t dlspy_event_query_relaxed(dls_event_t event, DLDevice device, int *out_done) {
  return dls__ext_event_query_relaxed(event, device, out_done);
}

typedef struct event_poll {
  dlspy_state *st;
  const char *pycall;
  dls_event_t event;
  DLDevice device;
} event_poll;

static int poll_event(void *ctx, int *done) {
  event_poll *p = ctx;
  dls_status_t rc = dlspy_event_query_relaxed(p->event, p->device, done);
  if (rc != DLS_OK) {
    dlspy_raise(p->st, rc, p->pycall);
    return -1;
  }
  return 0;
}

int dlspy_stream_wait(dlspy_state *st, const char *pycall, dls_stream_t stream, DLDevice device) {
  int idle = 0;
  /* refuses what synchronize refuses (a capturing stream ...) */
  dls_status_t rc = dls__ext_stream_query_relaxed(stream, device, &idle);
  if (rc != DLS_OK) {
    dlspy_raise(st, rc, pycall);
    return -1;
  }
  if (!idle) {
    /* An event marks the work queued so far: later work other threads queue is not waited for, and the wait
     * holds nothing a close could take away (the event is this call's own). */
    event_poll p = {st, pycall, {0}, device};
    rc = dls_event_create(device, DLS_EVENT_DEFAULT, &p.event);
    if (rc == DLS_OK)
      rc = dls_event_record(p.event, stream);
    if (rc != DLS_OK) {
      (void)dls_event_destroy(p.event);
      dlspy_raise(st, rc, pycall);
      return -1;
    }
    int waited = dlspy_wait(poll_event, &p);
    (void)dls_event_destroy(p.event);
    if (waited != 0)
      return -1;
  }
  (void)dls_deferred_poll(); /* as dls_stream_synchronize: releases whose streams passed */
  return 0;
}

typedef struct mark_poll {
  dlspy_state *st;
  const char *pycall;
  dls__ext_mark mark;
} mark_poll;

static int poll_mark(void *ctx, int *done) {
  mark_poll *p = ctx;
  dls_status_t rc = dls__ext_mark_query(&p->mark, done);
  if (rc != DLS_OK) {
    dlspy_raisef(p->st, rc, "%s: %s", p->pycall, dls_last_error());
    return -1;
  }
  return 0;
}

int dlspy_core_stream_wait(dlspy_state *st, const char *pycall, dls__stream *s) {
  mark_poll p = {st, pycall, {NULL, NULL}};
  dls_status_t rc = dls__ext_mark_record(s, &p.mark);
  if (rc != DLS_OK) {
    dlspy_raisef(st, rc, "%s: %s", pycall, dls_last_error());
    return -1;
  }
  int r = dlspy_wait(poll_mark, &p);
  dls__ext_mark_end(&p.mark);
  return r;
}
