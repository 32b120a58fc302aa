/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU backends' graph capture: capture state, begin and end (instantiated at once), replay, the thread's capture mode. */
#include "backend/gpu.h"

/* DLS_CAPTURE_* and DLS__CAPTURE_* are CUDA's values, and HIP's are CUDA's:
 * modes and states pass to either driver unchanged (the decls tests pin
 * both vendors' values). */
_Static_assert(DLS_CAPTURE_GLOBAL == 0 && DLS_CAPTURE_THREAD_LOCAL == 1 && DLS_CAPTURE_RELAXED == 2,
               "capture modes are the drivers' values");
_Static_assert(DLS__CAPTURE_NONE == 0 && DLS__CAPTURE_ACTIVE == 1 && DLS__CAPTURE_INVALIDATED == 2,
               "capture states are the drivers' values");

/* The first graph entry point this runtime lacks; NULL: it has them all. */
static const char *dls__gpu_graph_missing(const dls__gpu *g) {
  const dls__gpu_calls *c = &g->calls;
  const dls__gpu_names *n = &g->names;
  const struct {
    bool have;
    const char *name;
  } need[] = {
      {c->capture_begin != NULL, n->capture_begin},         {c->capture_end != NULL, n->capture_end},
      {c->capture_info != NULL, n->capture_info},           {c->graph_instantiate != NULL, n->graph_instantiate},
      {c->graph_launch != NULL, n->graph_launch},           {c->graph_exec_destroy != NULL, n->graph_exec_destroy},
      {c->graph_destroy != NULL, n->graph_destroy},
  };
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (!need[i].have)
      return need[i].name;
  return NULL;
}

static dls_status_t dls__gpu_no_graphs(const dls__gpu *g, const char *call, const char *missing) {
  return dls__fail(DLS_ERR_NOT_SUPPORTED,
                   "%s: this %s runtime lacks %s, so it cannot capture or replay graphs (a newer runtime has it)",
                   call, g->name, missing);
}

static dls_status_t dls__gpu_mode_check(const dls__gpu *g, const char *call, int mode) {
  if (mode == DLS_CAPTURE_GLOBAL || mode == DLS_CAPTURE_THREAD_LOCAL || mode == DLS_CAPTURE_RELAXED)
    return DLS_OK;
  return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                   "%s(mode=%d) on %s: expected %d (global), %d (thread-local) or %d (relaxed)", call, mode, g->name, DLS_CAPTURE_GLOBAL, DLS_CAPTURE_THREAD_LOCAL, DLS_CAPTURE_RELAXED);
}

/* The capture state the usual way: no capture in this runtime (nothing captures), the special streams, and a
 * stream whose direct question was refused, asked in the device's context. */
static DLS__NOINLINE DLS__COLD dls_status_t capture_status_in_context(dls__gpu *g, int dev, void *stream,
                                                                      int *out_status, uint64_t *out_id) {
  *out_status = DLS__CAPTURE_NONE;
  *out_id = 0;
  if (g->calls.capture_info == NULL) {
    dls__gpu_device *d;
    return dls__gpu_device_get(g, dev, &d);
  }
  unsigned status = DLS__CAPTURE_NONE;
  unsigned long long id = 0;
  DLS__GPU_CALL(g, dev, dls__gpu_capture_ask(g, stream, &status, &id), "%s(stream=%p)", g->names.capture_info, stream);
  *out_status = (int)status;
  *out_id = status != DLS__CAPTURE_NONE ? (uint64_t)id | g->k.capture_id_tag : 0;
  return DLS_OK;
}

dls_status_t dls__gpu_stream_capture_status(const dls__backend *be, int dev, void *stream, int *out_status,
                                            uint64_t *out_id) {
  dls__gpu *g = dls__gpu_of(be);
  unsigned status = DLS__CAPTURE_NONE;
  unsigned long long id = 0;
  /* A created stream names its context (and device) itself: it is asked as it is, without making the device
   * current first (a context check each: this runs at every alloc, free, record and wait on a wrapped stream). A
   * refusal, such as a thread with no context where the driver wants one, is asked again the usual way; a
   * failed query is no stream work, so it cannot harm a capture. */
  if (DLS__UNLIKELY(g->calls.capture_info == NULL || dls__gpu_special_stream(g, stream)) ||
      DLS__UNLIKELY(dls__gpu_capture_ask(g, stream, &status, &id) != DLS__GPU_OK))
    return capture_status_in_context(g, dev, stream, out_status, out_id);
  *out_status = (int)status;
  /* Each vendor counts its own captures: the tag keeps CUDA's and HIP's ids apart. */
  *out_id = status != DLS__CAPTURE_NONE ? (uint64_t)id | g->k.capture_id_tag : 0;
  return DLS_OK;
}

dls_status_t dls__gpu_stream_begin_capture(const dls__backend *be, int dev, void *stream, int mode) {
  dls__gpu *g = dls__gpu_of(be);
  DLS__TRY(dls__gpu_mode_check(g, g->names.capture_begin, mode));
  const char *missing = dls__gpu_graph_missing(g);
  if (missing != NULL)
    return dls__gpu_no_graphs(g, "beginning a capture", missing);
  /* Counted first: from here the other threads' calls take the lock, and the begin waits for those that hold it. */
  atomic_fetch_add_explicit(&dls__gpu_captures_open, 1, memory_order_seq_cst);
  dls__gpu_device *d;
  dls__gpu_scope sc;
  dls_status_t st = dls__gpu_enter(g, dev, &d, &sc);
  dls__gpu_result r = DLS__GPU_OK;
  if (st == DLS_OK) {
    r = g->calls.capture_begin(stream, (unsigned)mode);
    dls__gpu_leave(g, &sc);
  }
  if (st == DLS_OK && r == DLS__GPU_OK)
    return DLS_OK;
  atomic_fetch_sub_explicit(&dls__gpu_captures_open, 1, memory_order_release);
  return st != DLS_OK ? st
                      : dls__gpu_fail(g, r, dev, "%s(stream=%p, mode=%d)", g->names.capture_begin, stream, mode);
}

/* Ends the capture, instantiates it and drops the graph (the executable
 * keeps what it needs). On any failure the capture is over and nothing is
 * left behind. */
dls_status_t dls__gpu_stream_end_capture(const dls__backend *be, int dev, void *stream, void **out_graph) {
  dls__gpu *g = dls__gpu_of(be);
  *out_graph = NULL;
  const char *missing = dls__gpu_graph_missing(g);
  if (missing != NULL)
    return dls__gpu_no_graphs(g, "ending a capture", missing);
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  void *graph = NULL, *exec = NULL;
  dls__gpu_result r = g->calls.capture_end(stream, &graph);
  const char *what = g->names.capture_end;
  if (r == DLS__GPU_OK || g->classify(r) == DLS__GPU_ERROR_CAPTURE) /* over, ended or invalidated */
    (void)atomic_fetch_sub_explicit(&dls__gpu_captures_open, 1, memory_order_release);
  if (r == DLS__GPU_OK) {
    what = g->names.graph_instantiate;
    r = g->calls.graph_instantiate(&exec, graph, g->k.graph_auto_free);
  }
  if (graph != NULL)
    g->calls.graph_destroy(graph);
  dls__gpu_leave(g, &sc);
  if (r == DLS__GPU_OK) {
    *out_graph = exec;
    return DLS_OK;
  }
  if (g->classify(r) == DLS__GPU_ERROR_CAPTURE)
    return dls__gpu_fail_hint(g, DLS_ERR_STATE, r, dev,
                              "the capture was invalidated by an operation it does not allow, or a stream that "
                              "joined it did not rejoin the capturing stream before its end; it is discarded",
                              "%s(stream=%p)", what, stream);
  return dls__gpu_fail(g, r, dev, "%s(stream=%p)", what, stream);
}

dls_status_t dls__gpu_graph_launch(const dls__backend *be, int dev, void *graph, void *stream) {
  dls__gpu *g = dls__gpu_of(be);
  if (g->calls.graph_launch == NULL)
    return dls__gpu_no_graphs(g, "replaying a graph", g->names.graph_launch);
  DLS__GPU_CALL(g, dev, g->calls.graph_launch(graph, stream), "%s(graph=%p, stream=%p)", g->names.graph_launch,
                graph, stream);
  return DLS_OK;
}

dls_status_t dls__gpu_graph_destroy(const dls__backend *be, int dev, void *graph) {
  dls__gpu *g = dls__gpu_of(be);
  if (graph == NULL)
    return DLS_OK;
  if (g->calls.graph_exec_destroy == NULL)
    return dls__gpu_no_graphs(g, "destroying a graph", g->names.graph_exec_destroy);
  DLS__GPU_CALL(g, dev, g->calls.graph_exec_destroy(graph), "%s(graph=%p)", g->names.graph_exec_destroy, graph);
  return DLS_OK;
}

/* The mode is the calling thread's, in no device's context. */
dls_status_t dls__gpu_thread_capture_mode(const dls__backend *be, int dev, int mode, int *out_prev) {
  dls__gpu *g = dls__gpu_of(be);
  DLS__TRY(dls__gpu_mode_check(g, g->names.capture_mode_exchange, mode));
  dls__gpu_device *d;
  DLS__TRY(dls__gpu_device_get(g, dev, &d));
  if (g->calls.capture_mode_exchange == NULL) { /* no capture in this runtime forbids anything */
    *out_prev = DLS_CAPTURE_GLOBAL;
    return DLS_OK;
  }
  unsigned m = (unsigned)mode;
  dls__gpu_result r = g->calls.capture_mode_exchange(&m);
  if (r != DLS__GPU_OK)
    return dls__gpu_fail(g, r, dev, "%s(mode=%d)", g->names.capture_mode_exchange, mode);
  *out_prev = (int)m;
  return DLS_OK;
}
