/* SPDX-License-Identifier: Apache-2.0 */
/* Fault-injection scenarios of ordering: fork/join groups (nested too),
 * latches, deferred releases, dls_shutdown with objects alive, graph
 * capture once the core has it, and the caching allocator's handover. */
#include "fault_fixture.h"

static dls_status_t sc_group(fx *x) {
  OWNED(x, o);
  dls_buffer_t *buf = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*o, 3 * N * sizeof(float), buf));
  void *base = NULL;
  STEP(x, dls_buffer_ptr(*buf, &base));
  dls_group_t *g = fx_group(x);
  STEP(x, dls_group_begin(*o, g));
  for (int i = 0; i < 3; i++) {
    dls_stream_t *br = fx_branch(x);
    STEP(x, dls_group_branch(*g, br));
    float v = (float)(i + 1);
    STEP(x, dls_fill(*br, dls_arg_ptr((float *)base + i * N), N, 4, &v));
    STEP(x, dls_buffer_record_use(*buf, *br, DLS_ACCESS_WRITE));
  }
  DROP(x, dls_group_end, *g);
  float *out = fx_host_out();
  STEP(x, dls_buffer_read(*buf, 0, out, 3 * N * sizeof(float), *o));
  STEP(x, dls_stream_synchronize(*o));
  for (int i = 0; i < 3; i++)
    EXPECT(x, fx_all_equal(out + i * N, N, (float)(i + 1)));
  return fx_release_all(x);
}

/* Nine branches (more than a group holds inline) and a group nested in one. */
static dls_status_t sc_group_nested(fx *x) {
  POOLED(x, o);
  dls_group_t *outer = fx_group(x);
  STEP(x, dls_group_begin(*o, outer));
  dls_stream_t first = {0};
  for (int i = 0; i < 9; i++) {
    dls_stream_t *br = fx_branch(x);
    STEP(x, dls_group_branch(*outer, br));
    if (i == 0)
      first = *br;
  }
  dls_group_t *inner = fx_group(x);
  STEP(x, dls_group_begin(first, inner));
  for (int i = 0; i < 2; i++) {
    dls_stream_t *br = fx_branch(x);
    STEP(x, dls_group_branch(*inner, br));
    STEP(x, dls_spin(*br, 1000));
  }
  int n = 0;
  STEP(x, dls_group_branch_count(*outer, &n));
  EXPECT(x, n == 9);
  DROP(x, dls_group_end, *inner);
  DROP(x, dls_group_end, *outer);
  STEP(x, dls_stream_synchronize(*o));
  return fx_release_all(x);
}

static dls_status_t sc_latch(fx *x) {
  dls_latch_t *l = fx_latch(x);
  STEP(x, dls_latch_create(x->d, l));
  OWNED(x, s);
  POOLED(x, t);
  STEP(x, dls_latch_wait(*l, *s, FX_LATCH_NS));
  STEP(x, dls_latch_wait(*l, *t, FX_LATCH_NS));
  dls_event_t *e = fx_event(x);
  STEP(x, dls_event_create(x->d, 0, e));
  STEP(x, dls_event_record(*e, *s));
  int done = 1;
  STEP(x, dls_event_query(*e, &done));
  EXPECT(x, done == 0);
  STEP(x, dls_latch_open(*l));
  STEP(x, dls_event_synchronize(*e));
  STEP(x, dls_stream_synchronize(*t));
  STEP(x, dls_latch_status(*l));
  return fx_release_all(x);
}

/* An imported tensor released while a held stream still uses it: its deleter
 * waits in the deferred queue until that stream passes. */
static dls_status_t sc_deferred_release(fx *x) {
  PRODUCER(x, p, N, 1.0f);
  dls_latch_t *l = fx_latch(x);
  STEP(x, dls_latch_create(x->d, l));
  POOLED(x, ps);
  OWNED(x, u);
  dls_tensor_t *t = fx_tensor(x);
  STEP(x, dls_tensor_import_versioned(fx_hand_versioned(p), *ps, t));
  STEP(x, dls_latch_wait(*l, *u, FX_LATCH_NS));
  dls_buffer_t *sum = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*u, N * sizeof(float), sum));
  float zero = 0.0f, *out = fx_host_out();
  STEP(x, dls_fill(*u, dls_arg_buffer(*sum), N, 4, &zero));
  STEP(x, dls_axpy_f32(*u, N, 2.0f, dls_arg_tensor_in(*t), dls_arg_buffer(*sum)));
  DROP(x, dls_tensor_release, *t); /* u still holds a use: deferred */
  STEP(x, dls_latch_open(*l));
  STEP(x, dls_buffer_read(*sum, 0, out, N * sizeof(float), *u));
  STEP(x, dls_stream_synchronize(*u));
  EXPECT(x, fx_all_equal(out, N, 2.0f));
  dls_deferred_poll();
  return fx_release_all(x);
}

/* dls_shutdown with objects of every kind alive, a held stream and an open
 * nested group among them. */
static dls_status_t sc_shutdown_alive(fx *x) {
  PRODUCER(x, p, N, 1.0f);
  OWNED(x, o);
  void *native = NULL;
  STEP(x, dls_stream_native(*o, &native));
  dls_stream_t *w = fx_stream(x);
  STEP(x, dls_stream_wrap(x->d, native, w));
  POOLED(x, pooled);
  dls_latch_t *l = fx_latch(x);
  STEP(x, dls_latch_create(x->d, l));
  STEP(x, dls_latch_wait(*l, *pooled, FX_LATCH_NS));
  dls_tensor_t *t = fx_tensor(x);
  STEP(x, dls_tensor_import_versioned(fx_hand_versioned(p), *o, t));
  STEP(x, dls_tensor_record_use(*t, *pooled, DLS_ACCESS_WRITE));
  dls_buffer_t *b = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*o, N * sizeof(float), b));
  STEP(x, dls_buffer_record_use(*b, *pooled, DLS_ACCESS_WRITE));
  dls_event_t *e = fx_event(x);
  STEP(x, dls_event_create(x->d, 0, e));
  STEP(x, dls_event_record(*e, *pooled));
  dls_group_t *g = fx_group(x);
  STEP(x, dls_group_begin(*o, g));
  dls_stream_t *br = fx_branch(x);
  STEP(x, dls_group_branch(*g, br));
  dls_group_t *inner = fx_group(x);
  STEP(x, dls_group_begin(*br, inner));
  dls_stream_t *br2 = fx_branch(x);
  STEP(x, dls_group_branch(*inner, br2));
  if (x->d.device_type == kDLCPU) {
    dls_function_t *f = fx_function(x);
    STEP(x, dls_function_from_host(x->d, "k_add", fx_k_add, f));
  }
  STEP(x, dls_shutdown()); /* destroys the latch, which opens it */
  return DLS_OK;
}

/* Graph capture (include/dlstream/graph.h): skipped until the core has it. */
/* A step inside a capture: on failure the capture is still ended (a graph it
 * may leave is the cleanup's). */
#define IN_CAPTURE(x, s, expr)                          \
  do {                                                  \
    dls_status_t cap_st_ = (expr);                      \
    if (cap_st_ != DLS_OK) {                            \
      fx_failed((x), cap_st_, #expr);                   \
      (void)dls_stream_end_capture((s), fx_graph(x));   \
      return cap_st_;                                   \
    }                                                   \
    (x)->last_out = NULL;                               \
  } while (0)

static dls_status_t sc_capture(fx *x) {
  if (dls_stream_begin_capture == NULL || dls_stream_end_capture == NULL || dls_graph_launch == NULL ||
      dls_graph_destroy == NULL)
    return fx_skip(x, "graph capture is not in this build yet (dls_stream_begin_capture is not defined)");
  OWNED(x, s);
  dls_buffer_t *buf = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*s, N * sizeof(float), buf));
  float zero = 0.0f, *out = fx_host_out();
  STEP(x, dls_fill(*s, dls_arg_buffer(*buf), N, 4, &zero));
  dls_status_t st = dls_stream_begin_capture(*s, DLS_CAPTURE_GLOBAL);
  if (st == DLS_ERR_NOT_SUPPORTED)
    return fx_skip(x, "dls_stream_begin_capture: DLS_ERR_NOT_SUPPORTED on this backend");
  STEP(x, st);
  float one = 1.0f;
  dls_buffer_t *tmp = fx_buffer(x);
  IN_CAPTURE(x, *s, dls_buffer_alloc(*s, N * sizeof(float), tmp));
  IN_CAPTURE(x, *s, dls_fill(*s, dls_arg_buffer(*tmp), N, 4, &one));
  IN_CAPTURE(x, *s, dls_axpy_f32(*s, N, 1.0f, dls_arg_buffer(*tmp), dls_arg_buffer(*buf)));
  IN_CAPTURE(x, *s, dls_buffer_free(*tmp));
  tmp->id = 0;
  dls_graph_t *g = fx_graph(x);
  STEP(x, dls_stream_end_capture(*s, g));
  STEP(x, dls_graph_launch(*g, *s));
  STEP(x, dls_graph_launch(*g, *s));
  STEP(x, dls_buffer_read(*buf, 0, out, N * sizeof(float), *s));
  STEP(x, dls_stream_synchronize(*s));
  EXPECT(x, fx_all_equal(out, N, 2.0f));
  return fx_release_all(x);
}

/* The caching allocator: a block freed while a held stream reads it goes to another stream only after that read;
 * an allocation the driver fails for memory gives the cache back and tries again; a trim; streams that end with
 * blocks cached (fx_release_all). */
static dls_status_t sc_cache(fx *x) {
  dls_latch_t *l = fx_latch(x);
  STEP(x, dls_latch_create(x->d, l));
  OWNED(x, a);
  OWNED(x, r);
  POOLED(x, b);
  dls_buffer_t *buf = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*a, N * sizeof(float), buf));
  float seven = 7.0f, nine = 9.0f, *out = fx_host_out();
  STEP(x, dls_fill(*a, dls_arg_buffer(*buf), N, 4, &seven));
  dls_buffer_t *copy = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*r, N * sizeof(float), copy));
  STEP(x, dls_latch_wait(*l, *r, FX_LATCH_NS));
  STEP(x, dls_buffer_copy(*r, *copy, 0, *buf, 0, N * sizeof(float)));
  DROP(x, dls_buffer_free, *buf); /* a waits for r's read; the block goes to a's cache */
  dls_buffer_t *again = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*b, N * sizeof(float), again)); /* a's block, once b waits for a */
  STEP(x, dls_fill(*b, dls_arg_buffer(*again), N, 4, &nine));
  STEP(x, dls_latch_open(*l));
  STEP(x, dls_buffer_read(*copy, 0, out, N * sizeof(float), *r));
  STEP(x, dls_stream_synchronize(*r));
  EXPECT(x, fx_all_equal(out, N, 7.0f));
  DROP(x, dls_buffer_free, *again); /* into b's cache */
  dls_buffer_t *big = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*a, 4 * N * sizeof(float), big)); /* a class no cache holds */
  DROP(x, dls_buffer_free, *big);
  size_t trimmed = 0;
  STEP(x, dls_device_trim(x->d, &trimmed));
  STEP(x, dls_latch_status(*l));
  return fx_release_all(x);
}

const fx_scenario fx_ordering[] = {
    {"group", sc_group, false},
    {"group_nested", sc_group_nested, false},
    {"latch", sc_latch, true},
    {"deferred_release", sc_deferred_release, true},
    {"shutdown_alive", sc_shutdown_alive, true},
    {"capture", sc_capture, false},
    {"cache", sc_cache, true},
};
const int fx_ordering_n = (int)(sizeof fx_ordering / sizeof fx_ordering[0]);
