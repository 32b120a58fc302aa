/* SPDX-License-Identifier: Apache-2.0 */
/* The fault-injecting backend (test builds): a wrapper around each real
 * backend's vtable that makes every fallible method an injectable point and
 * counts the native objects created and released.
 *
 * A method has no context argument, so each backend gets its own set of
 * one-line thunks (index I baked in) generated from the method lists below.
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

/* X(I, method, parameters, arguments, own status): one point, then the call. */
#define DLS__FAULT_PLAIN(X, I)                                                                                    \
  X(I, stream_default, (int dev, int kind, void **out), (dev, kind, out), BACKEND)                               \
  X(I, stream_check, (int dev, void *s), (dev, s), BACKEND)                                                      \
  X(I, stream_synchronize, (int dev, void *s), (dev, s), BACKEND)                                                \
  X(I, stream_query, (int dev, void *s, int *out), (dev, s, out), BACKEND)                                       \
  X(I, stream_wait_event, (int dev, void *s, void *e), (dev, s, e), BACKEND)                                     \
  X(I, stream_priority_range, (int dev, int *least, int *greatest), (dev, least, greatest), BACKEND)             \
  X(I, host_callback, (int dev, void *s, dls_host_fn fn, void *user), (dev, s, fn, user), BACKEND)               \
  X(I, event_check, (int dev, void *e), (dev, e), BACKEND)                                                       \
  X(I, event_record, (int dev, void *e, void *s), (dev, e, s), BACKEND)                                          \
  X(I, event_query, (int dev, void *e, int *out), (dev, e, out), BACKEND)                                        \
  X(I, event_synchronize, (int dev, void *e), (dev, e), BACKEND)                                                 \
  X(I, event_elapsed_ms, (int dev, void *a, void *b, float *out), (dev, a, b, out), BACKEND)                     \
  X(I, memcpy_async, (int dev, void *dst, const void *src, size_t n, void *s), (dev, dst, src, n, s), BACKEND)   \
  X(I, module_function, (int dev, void *m, const char *name, void **out), (dev, m, name, out), BACKEND)          \
  X(I, builtin_function, (int dev, const char *name, void **out), (dev, name, out), BACKEND)                     \
  X(I, launch,                                                                                                    \
    (int dev, void *fn, void *s, const dls_launch_config_t *cfg, void **params, const uint32_t *sizes, int n),    \
    (dev, fn, s, cfg, params, sizes, n), BACKEND)                                                                 \
  X(I, stream_capture_status, (int dev, void *s, int *out, uint64_t *out_id), (dev, s, out, out_id), BACKEND)    \
  X(I, stream_begin_capture, (int dev, void *s, int mode), (dev, s, mode), BACKEND)                              \
  X(I, thread_capture_mode, (int dev, int mode, int *out_prev), (dev, mode, out_prev), BACKEND)                  \
  X(I, peer_access, (int dev, int peer, int *out_can), (dev, peer, out_can), BACKEND)                            \
  X(I, memcpy_peer_async, (int dev, void *dst, int src_dev, const void *src, size_t n, void *s),                 \
    (dev, dst, src_dev, src, n, s), BACKEND)                                                                      \
  X(I, device_arch, (int dev, char *out, size_t n), (dev, out, n), BACKEND)

/* X(I, method, parameters, arguments): methods that make or release a native
 * object (a replay remakes its graph's memory), written out below as
 * w_<method>(backend index, arguments...). */
#define DLS__FAULT_COUNTED(X, I)                                                                  \
  X(I, stream_create, (int dev, unsigned flags, int prio, void **out), (dev, flags, prio, out))  \
  X(I, stream_destroy, (int dev, void *s), (dev, s))                                              \
  X(I, event_create, (int dev, unsigned flags, void **out), (dev, flags, out))                    \
  X(I, event_destroy, (int dev, void *e), (dev, e))                                               \
  X(I, mem_alloc, (int dev, size_t n, void *s, void **out), (dev, n, s, out))                     \
  X(I, mem_free, (int dev, void *p, void *s), (dev, p, s))                                        \
  X(I, host_mapped_alloc, (int dev, size_t n, void **host, void **device), (dev, n, host, device)) \
  X(I, host_mapped_free, (int dev, void *host), (dev, host))                                      \
  X(I, module_load, (int dev, const void *image, size_t n, void **out), (dev, image, n, out))     \
  X(I, module_unload, (int dev, void *m), (dev, m))                                               \
  X(I, host_function, (int dev, const char *name, dls_host_kernel fn, void **out), (dev, name, fn, out)) \
  X(I, host_function_destroy, (int dev, void *fn), (dev, fn))                                     \
  X(I, stream_end_capture, (int dev, void *s, void **out), (dev, s, out))                         \
  X(I, graph_launch, (int dev, void *graph, void *s), (dev, graph, s))                            \
  X(I, graph_destroy, (int dev, void *graph), (dev, graph))

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

#define DLS__PLAIN_THUNK(I, name, params, args, own) \
  static dls_status_t name##_##I params {            \
    DLS__FAULT_POINT(#name, own);                    \
    return g_real[I]->name args;                     \
  }
#define DLS__COUNTED_THUNK(I, name, params, args) \
  static dls_status_t name##_##I params { return w_##name(I, DLS__UNPAREN args); }
#define DLS__SET_PLAIN(I, name, params, args, own) \
  if (w->name != NULL)                             \
    w->name = name##_##I;
#define DLS__SET_COUNTED(I, name, params, args) \
  if (w->name != NULL)                          \
    w->name = name##_##I;

/* The thunks of backend I and the function that puts them in its wrapper. */
#define DLS__FAULT_WRAPPER(I)                      \
  DLS__FAULT_PLAIN(DLS__PLAIN_THUNK, I)            \
  DLS__FAULT_COUNTED(DLS__COUNTED_THUNK, I)        \
  static void install_##I(dls__backend *w) {       \
    DLS__FAULT_PLAIN(DLS__SET_PLAIN, I)            \
    DLS__FAULT_COUNTED(DLS__SET_COUNTED, I)        \
  }

DLS__FAULT_WRAPPER(0)
DLS__FAULT_WRAPPER(1)
DLS__FAULT_WRAPPER(2)
_Static_assert(DLS__NREAL == 3, "one DLS__FAULT_WRAPPER(I) per real backend");
/* Every method after shutdown is listed above, plain or counted: a method
 * appended to the vtable is one line in one list (the assertion counts them). */
#define DLS__ONE_METHOD(...) +1
enum { DLS__METHODS_LISTED = 0 DLS__FAULT_PLAIN(DLS__ONE_METHOD, 0) DLS__FAULT_COUNTED(DLS__ONE_METHOD, 0) };
_Static_assert(offsetof(dls__backend, shutdown) + sizeof(void (*)(void)) * (1 + DLS__METHODS_LISTED) ==
                   sizeof(dls__backend),
               "a vtable method this wrapper does not list: add it to DLS__FAULT_PLAIN (a point, then the call) "
               "or DLS__FAULT_COUNTED (it makes or releases a native object)");

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
