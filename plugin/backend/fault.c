/* SPDX-License-Identifier: Apache-2.0 */
/* The fault-injecting backend (test builds): a wrapper around each real
 * backend's vtable that makes every fallible method an injectable point and
 * counts the native objects created and released.
 *
 * A wrapper is a dls__backend followed by the backend it wraps, so one set
 * of thunks, generated from the vtable's method list (DLS__BACKEND_METHODS,
 * backend.h), serves every wrapper: each finds the real backend through the
 * `be` it is called with. A POINT method's thunk is a point, then the call;
 * an OWN method's is its w_<method> below. NULL methods stay NULL: a missing
 * feature is not wrapped into existence. probe, device_count and shutdown
 * pass through: they make nothing the core owns, and their outcome is cached
 * for the runtime's life. Release methods are counted, never failed: the
 * core treats releases as infallible. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "backend/backend.h"
#include "backend/fault_ledger.h"
#include "base/fault.h"

#ifdef DLS_FAULT_INJECTION

/* A wrapper: its vtable (thunks), then the backend it wraps. */
typedef struct fault_backend {
  dls__backend be; /* first: the wrapper's dls__backend * points here */
  const dls__backend *real;
} fault_backend;

static const dls__backend *const g_real[DLS__NBACKENDS] = {DLS__BACKENDS(DLS__BACKEND_ADDRESS)};
static fault_backend g_wrapped[DLS__NBACKENDS];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The backend a wrapper wraps. */
static inline const dls__backend *real_of(const dls__backend *be) { return ((const fault_backend *)be)->real; }

#define DLS__UNPAREN(...) __VA_ARGS__
#define OOM DLS_ERR_OUT_OF_MEMORY
#define BACKEND DLS_ERR_BACKEND

#define DLS__FAULT_POINT(name, own)                                   \
  do {                                                                \
    dls_status_t fst_;                                                \
    if (DLS__UNLIKELY(dls__fault_hit(name, own, &fst_)))              \
      return fst_;                                                    \
  } while (0)

/* A make: a point, then the call; counted when it made something. */
#define DLS__FAULT_MAKE(name, own, kind, made, call) \
  DLS__FAULT_POINT(name, own);                       \
  dls_status_t st = (call);                          \
  if (st == DLS_OK && (made))                        \
    dls__fault_count(kind, +1);                      \
  return st

/* A release: the call, counted when it released something. */
#define DLS__FAULT_RELEASE(kind, obj, call) \
  dls_status_t st = (call);                 \
  if (st == DLS_OK && (obj) != NULL)        \
    dls__fault_count(kind, -1);             \
  return st

/* ---- the OWN methods: w_<method>(wrapper, arguments...); r is the real backend ---- */

static dls_status_t w_stream_create(const dls__backend *be, int dev, unsigned flags, int prio, void **out) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_MAKE("stream_create", BACKEND, DLS_FAULT_STREAM, 1, r->stream_create(r, dev, flags, prio, out));
}
static dls_status_t w_stream_destroy(const dls__backend *be, int dev, void *s) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_RELEASE(DLS_FAULT_STREAM, s, r->stream_destroy(r, dev, s));
}
static dls_status_t w_event_create(const dls__backend *be, int dev, unsigned flags, void **out) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_MAKE("event_create", OOM, DLS_FAULT_EVENT, 1, r->event_create(r, dev, flags, out));
}
static dls_status_t w_event_destroy(const dls__backend *be, int dev, void *e) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_RELEASE(DLS_FAULT_EVENT, e, r->event_destroy(r, dev, e));
}
/* Allocations are counted by the ledger, which knows the memory captures make. */
static dls_status_t w_mem_alloc(const dls__backend *be, int dev, size_t n, void *s, void **out) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_POINT("mem_alloc", OOM);
  dls_status_t st = r->mem_alloc(r, dev, n, s, out);
  if (st == DLS_OK && *out != NULL)
    dls__fault_ledger_alloc(r, dev, s, *out);
  return st;
}
static dls_status_t w_mem_free(const dls__backend *be, int dev, void *p, void *s) {
  const dls__backend *r = real_of(be);
  dls_status_t st = r->mem_free(r, dev, p, s);
  if (st == DLS_OK && p != NULL)
    dls__fault_ledger_free(r, dev, p);
  return st;
}
static dls_status_t w_host_mapped_alloc(const dls__backend *be, int dev, size_t n, void **host, void **device) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_MAKE("host_mapped_alloc", OOM, DLS_FAULT_MAPPED, *host != NULL,
                  r->host_mapped_alloc(r, dev, n, host, device));
}
static _Atomic uint64_t g_blocked_waits;
static inline bool latch_holding(void) { return atomic_load_explicit(&dls__latches_holding, memory_order_acquire) > 0; }

/* The driver's free of page-locked memory may wait for the whole device: while a latch holds a stream, that is a
 * host wait only the latch's timeout ends (counted as one, dls_fault_blocked_waits). */
static dls_status_t w_host_mapped_free(const dls__backend *be, int dev, void *host) {
  const dls__backend *r = real_of(be);
  if (DLS__UNLIKELY(latch_holding()) && host != NULL)
    atomic_fetch_add(&g_blocked_waits, 1);
  DLS__FAULT_RELEASE(DLS_FAULT_MAPPED, host, r->host_mapped_free(r, dev, host));
}
static dls_status_t w_module_load(const dls__backend *be, int dev, const void *image, size_t n, void **out) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_MAKE("module_load", BACKEND, DLS_FAULT_MODULE, 1, r->module_load(r, dev, image, n, out));
}
static dls_status_t w_module_unload(const dls__backend *be, int dev, void *m) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_RELEASE(DLS_FAULT_MODULE, m, r->module_unload(r, dev, m));
}
static dls_status_t w_host_function(const dls__backend *be, int dev, const char *name, dls_host_kernel fn,
                                    void **out) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_MAKE("host_function", BACKEND, DLS_FAULT_FUNCTION, 1, r->host_function(r, dev, name, fn, out));
}
static dls_status_t w_host_function_destroy(const dls__backend *be, int dev, void *fn) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_RELEASE(DLS_FAULT_FUNCTION, fn, r->host_function_destroy(r, dev, fn));
}
static dls_status_t w_stream_end_capture(const dls__backend *be, int dev, void *s, void **out) {
  const dls__backend *r = real_of(be);
  dls_status_t fst;
  uint64_t cap = dls__fault_ledger_capture_of(r, dev, s);
  if (DLS__UNLIKELY(dls__fault_hit("stream_end_capture", BACKEND, &fst))) {
    /* A failed end still ends the capture and leaves nothing behind (the
     * backend contract): so does an injected one. */
    char msg[256];
    snprintf(msg, sizeof msg, "%s", dls_last_error());
    void *graph = NULL;
    if (r->stream_end_capture(r, dev, s, &graph) == DLS_OK)
      (void)r->graph_destroy(r, dev, graph);
    dls__fault_ledger_end(r, dev, cap, NULL);
    *out = NULL;
    return dls__fail(fst, "%s", msg);
  }
  dls_status_t st = r->stream_end_capture(r, dev, s, out);
  dls__fault_ledger_end(r, dev, cap, st == DLS_OK ? *out : NULL);
  if (st == DLS_OK && *out != NULL)
    dls__fault_count(DLS_FAULT_GRAPH, +1);
  return st;
}
static dls_status_t w_graph_launch(const dls__backend *be, int dev, void *graph, void *s) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_POINT("graph_launch", BACKEND);
  dls_status_t st = r->graph_launch(r, dev, graph, s);
  if (st == DLS_OK)
    dls__fault_ledger_launch(r, dev, graph);
  return st;
}
static dls_status_t w_graph_destroy(const dls__backend *be, int dev, void *graph) {
  const dls__backend *r = real_of(be);
  dls_status_t st = r->graph_destroy(r, dev, graph);
  if (st == DLS_OK && graph != NULL) {
    dls__fault_ledger_destroy(r, dev, graph);
    dls__fault_count(DLS_FAULT_GRAPH, -1);
  }
  return st;
}

/* Host waits: a point, then the wait. One on work not complete while a latch holds a stream is counted
 * (dls_fault_blocked_waits): only the latch's timeout may end it. The question costs a query, made only while a
 * latch holds (it asks what the wait itself is about to wait for). */
uint64_t dls_fault_blocked_waits(void) { return atomic_load(&g_blocked_waits); }

/* A stream's (`event` false) or an event's synchronize. */
static dls_status_t host_wait(const dls__backend *be, int dev, void *obj, bool event) {
  const dls__backend *r = real_of(be);
  DLS__FAULT_POINT(event ? "event_synchronize" : "stream_synchronize", BACKEND);
  int done = 1;
  if (DLS__UNLIKELY(latch_holding()) &&
      (event ? r->event_query(r, dev, obj, &done) : r->stream_query(r, dev, obj, &done)) == DLS_OK && !done)
    atomic_fetch_add(&g_blocked_waits, 1);
  return event ? r->event_synchronize(r, dev, obj) : r->stream_synchronize(r, dev, obj);
}
static dls_status_t w_stream_synchronize(const dls__backend *be, int dev, void *s) {
  return host_wait(be, dev, s, false);
}
static dls_status_t w_event_synchronize(const dls__backend *be, int dev, void *e) {
  return host_wait(be, dev, e, true);
}

/* X(method, parameters, arguments, fault, gpu) of DLS__BACKEND_METHODS: a
 * POINT method's thunk t_<method>; an OWN method's is w_<method> above. */
#define DLS__THUNK_POINT(name, params, args)                        \
  static dls_status_t t_##name DLS__BACKEND_SELF params {           \
    DLS__FAULT_POINT(#name, BACKEND);                               \
    const dls__backend *r = real_of(be);                            \
    return r->name(r, DLS__UNPAREN args);                           \
  }
#define DLS__THUNK_OWN(name, params, args)
#define DLS__THUNK(name, params, args, fault, gpu) DLS__THUNK_##fault(name, params, args)
DLS__BACKEND_METHODS(DLS__THUNK)
#undef DLS__THUNK

static dls_status_t t_probe(const dls__backend *be) {
  const dls__backend *r = real_of(be);
  return r->probe(r);
}
static dls_status_t t_device_count(const dls__backend *be, int *out_count) {
  const dls__backend *r = real_of(be);
  return r->device_count(r, out_count);
}
static void t_shutdown(const dls__backend *be) {
  const dls__backend *r = real_of(be);
  r->shutdown(r);
}

/* The wrapper of `real`: its identity and life pass through; each method it
 * has becomes its thunk. */
static void wrap(fault_backend *w, const dls__backend *real) {
  w->be = *real; /* version, size, name, type */
  w->real = real;
  w->be.probe = t_probe;
  w->be.device_count = t_device_count;
  w->be.shutdown = t_shutdown;
#define DLS__THUNK_OF_POINT(name) t_##name
#define DLS__THUNK_OF_OWN(name) w_##name
#define DLS__SET(name, params, args, fault, gpu) \
  if (real->name != NULL)                        \
    w->be.name = DLS__THUNK_OF_##fault(name);
  DLS__BACKEND_METHODS(DLS__SET)
#undef DLS__SET
}

static void wrap_all(void) {
  for (int i = 0; i < DLS__NBACKENDS; i++)
    wrap(&g_wrapped[i], g_real[i]);
}

const dls__backend *dls__fault_backend(const dls__backend *real) {
  pthread_once(&g_once, wrap_all);
  for (int i = 0; i < DLS__NBACKENDS; i++)
    if (g_real[i] == real)
      return &g_wrapped[i].be;
  return real;
}

#else
/* ISO C forbids an empty translation unit. */
typedef int dls__fault_backend_disabled;
#endif /* DLS_FAULT_INJECTION */
