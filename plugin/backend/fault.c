/* SPDX-License-Identifier: Apache-2.0 */
/* The fault-injecting backend (test builds): a wrapper around each real
 * backend's vtable that makes every fallible method an injectable point and
 * counts the native objects created and released.
 *
 * A method has no context argument, so each backend gets its own set of
 * one-line thunks (index I baked in), generated from the vtable's method
 * list (DLS__BACKEND_METHODS, backend.h): a POINT method's thunk is a point,
 * then the call; an OWN method's passes backend I to its w_<method> below.
 * NULL methods stay NULL: a missing feature is not wrapped into existence.
 * probe, device_count and shutdown pass through: they make nothing the core
 * owns, and their outcome is cached for the runtime's life. Release methods
 * are counted, never failed: the core treats releases as infallible. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#include "backend/backend.h"
#include "backend/fault_ledger.h"
#include "base/fault.h"

#ifdef DLS_FAULT_INJECTION

#define DLS__NREAL 3
static const dls__backend *const g_real[DLS__NREAL] = {&dls__cpu_backend, &dls__cuda_backend, &dls__hip_backend};
static dls__backend g_wrapped[DLS__NREAL];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

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

/* ---- the OWN methods: w_<method>(backend index, arguments...) ---- */

static dls_status_t w_stream_create(int bi, int dev, unsigned flags, int prio, void **out) {
  DLS__FAULT_MAKE("stream_create", BACKEND, DLS_FAULT_STREAM, 1, g_real[bi]->stream_create(dev, flags, prio, out));
}
static dls_status_t w_stream_destroy(int bi, int dev, void *s) {
  DLS__FAULT_RELEASE(DLS_FAULT_STREAM, s, g_real[bi]->stream_destroy(dev, s));
}
static dls_status_t w_event_create(int bi, int dev, unsigned flags, void **out) {
  DLS__FAULT_MAKE("event_create", OOM, DLS_FAULT_EVENT, 1, g_real[bi]->event_create(dev, flags, out));
}
static dls_status_t w_event_destroy(int bi, int dev, void *e) {
  DLS__FAULT_RELEASE(DLS_FAULT_EVENT, e, g_real[bi]->event_destroy(dev, e));
}
/* Allocations are counted by the ledger, which knows the memory captures make. */
static dls_status_t w_mem_alloc(int bi, int dev, size_t n, void *s, void **out) {
  DLS__FAULT_POINT("mem_alloc", OOM);
  dls_status_t st = g_real[bi]->mem_alloc(dev, n, s, out);
  if (st == DLS_OK && *out != NULL)
    dls__fault_ledger_alloc(g_real[bi], dev, s, *out);
  return st;
}
static dls_status_t w_mem_free(int bi, int dev, void *p, void *s) {
  dls_status_t st = g_real[bi]->mem_free(dev, p, s);
  if (st == DLS_OK && p != NULL)
    dls__fault_ledger_free(g_real[bi], dev, p);
  return st;
}
static dls_status_t w_host_mapped_alloc(int bi, int dev, size_t n, void **host, void **device) {
  DLS__FAULT_MAKE("host_mapped_alloc", OOM, DLS_FAULT_MAPPED, *host != NULL,
                  g_real[bi]->host_mapped_alloc(dev, n, host, device));
}
static dls_status_t w_host_mapped_free(int bi, int dev, void *host) {
  DLS__FAULT_RELEASE(DLS_FAULT_MAPPED, host, g_real[bi]->host_mapped_free(dev, host));
}
static dls_status_t w_module_load(int bi, int dev, const void *image, size_t n, void **out) {
  DLS__FAULT_MAKE("module_load", BACKEND, DLS_FAULT_MODULE, 1, g_real[bi]->module_load(dev, image, n, out));
}
static dls_status_t w_module_unload(int bi, int dev, void *m) {
  DLS__FAULT_RELEASE(DLS_FAULT_MODULE, m, g_real[bi]->module_unload(dev, m));
}
static dls_status_t w_host_function(int bi, int dev, const char *name, dls_host_kernel fn, void **out) {
  DLS__FAULT_MAKE("host_function", BACKEND, DLS_FAULT_FUNCTION, 1, g_real[bi]->host_function(dev, name, fn, out));
}
static dls_status_t w_host_function_destroy(int bi, int dev, void *fn) {
  DLS__FAULT_RELEASE(DLS_FAULT_FUNCTION, fn, g_real[bi]->host_function_destroy(dev, fn));
}
static dls_status_t w_stream_end_capture(int bi, int dev, void *s, void **out) {
  dls_status_t fst;
  uint64_t cap = dls__fault_ledger_capture_of(g_real[bi], dev, s);
  if (DLS__UNLIKELY(dls__fault_hit("stream_end_capture", BACKEND, &fst))) {
    /* A failed end still ends the capture and leaves nothing behind (the
     * backend contract): so does an injected one. */
    char msg[256];
    snprintf(msg, sizeof msg, "%s", dls_last_error());
    void *graph = NULL;
    if (g_real[bi]->stream_end_capture(dev, s, &graph) == DLS_OK)
      (void)g_real[bi]->graph_destroy(dev, graph);
    dls__fault_ledger_end(g_real[bi], dev, cap, NULL);
    *out = NULL;
    return dls__fail(fst, "%s", msg);
  }
  dls_status_t st = g_real[bi]->stream_end_capture(dev, s, out);
  dls__fault_ledger_end(g_real[bi], dev, cap, st == DLS_OK ? *out : NULL);
  if (st == DLS_OK && *out != NULL)
    dls__fault_count(DLS_FAULT_GRAPH, +1);
  return st;
}
static dls_status_t w_graph_launch(int bi, int dev, void *graph, void *s) {
  DLS__FAULT_POINT("graph_launch", BACKEND);
  dls_status_t st = g_real[bi]->graph_launch(dev, graph, s);
  if (st == DLS_OK)
    dls__fault_ledger_launch(g_real[bi], dev, graph);
  return st;
}
static dls_status_t w_graph_destroy(int bi, int dev, void *graph) {
  dls_status_t st = g_real[bi]->graph_destroy(dev, graph);
  if (st == DLS_OK && graph != NULL) {
    dls__fault_ledger_destroy(g_real[bi], dev, graph);
    dls__fault_count(DLS_FAULT_GRAPH, -1);
  }
  return st;
}

/* X(method, parameters, arguments, fault, gpu) of DLS__BACKEND_METHODS, for backend I (DLS__FAULT_I). */
#define DLS__FAULT_CAT_(name, I) name##_##I
#define DLS__FAULT_CAT(name, I) DLS__FAULT_CAT_(name, I)
#define DLS__THUNK_POINT(I, name, params, args)      \
  static dls_status_t DLS__FAULT_CAT(name, I) params { \
    DLS__FAULT_POINT(#name, BACKEND);                \
    return g_real[I]->name args;                     \
  }
#define DLS__THUNK_OWN(I, name, params, args) \
  static dls_status_t DLS__FAULT_CAT(name, I) params { return w_##name(I, DLS__UNPAREN args); }
#define DLS__THUNK(name, params, args, fault, gpu) DLS__THUNK_##fault(DLS__FAULT_I, name, params, args)
#define DLS__SET(name, params, args, fault, gpu) \
  if (w->name != NULL)                           \
    w->name = DLS__FAULT_CAT(name, DLS__FAULT_I);
/* The thunks of backend DLS__FAULT_I and the function that puts them in its wrapper. */
#define DLS__FAULT_WRAPPER                \
  DLS__BACKEND_METHODS(DLS__THUNK)        \
  static void DLS__FAULT_CAT(install, DLS__FAULT_I)(dls__backend * w) { DLS__BACKEND_METHODS(DLS__SET) }

#define DLS__FAULT_I 0
DLS__FAULT_WRAPPER
#undef DLS__FAULT_I
#define DLS__FAULT_I 1
DLS__FAULT_WRAPPER
#undef DLS__FAULT_I
#define DLS__FAULT_I 2
DLS__FAULT_WRAPPER
#undef DLS__FAULT_I
_Static_assert(DLS__NREAL == 3, "one DLS__FAULT_WRAPPER(I) per real backend");

static void wrap_all(void) {
  void (*const install[DLS__NREAL])(dls__backend *) = {install_0, install_1, install_2};
  for (int i = 0; i < DLS__NREAL; i++) {
    g_wrapped[i] = *g_real[i]; /* name, type, version, probe, device_count, shutdown */
    install[i](&g_wrapped[i]);
  }
}

const dls__backend *dls__fault_backend(const dls__backend *real) {
  pthread_once(&g_once, wrap_all);
  for (int i = 0; i < DLS__NREAL; i++)
    if (g_real[i] == real)
      return &g_wrapped[i];
  return real;
}

#else
/* ISO C forbids an empty translation unit. */
typedef int dls__fault_backend_disabled;
#endif /* DLS_FAULT_INJECTION */
