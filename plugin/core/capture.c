/* SPDX-License-Identifier: Apache-2.0 */
/* The captures dlstream knows of: what the driver says about a stream, the
 * registry of captures underway (begun here, or seen on a stream dlstream
 * was given), the rule that ties no capturing stream to one outside its
 * capture, own-initiative polling kept away from captures, the memory an
 * own capture allocates, and the lock that keeps pool calls apart from
 * graph calls. What a capture's end makes, a graph, is graph.c's. */
#include <inttypes.h>
#include <stdlib.h>

#include "core/capture.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* the registry; an own capture's allocs */
static dls__capture *g_captures;
_Atomic int dls__captures_known;

/* ---- what the driver says ---- */

/* The driver's answer about a stream's capture, or its failure. */
static DLS__HOT_INLINE dls_status_t driver_status(dls__stream *s, int *out_status, uint64_t *out_id) {
  *out_status = DLS__CAPTURE_NONE;
  *out_id = 0;
  const dls__backend *be = s->dev->be;
  if (be->stream_capture_status == NULL || dls__stream_legacy(s))
    return DLS_OK;
  dls_status_t st = dls__capture_status_call(s->dev, s->native, out_status, out_id);
  if (st != DLS_OK || *out_status == DLS__CAPTURE_NONE) {
    *out_status = DLS__CAPTURE_NONE;
    *out_id = 0;
  }
  return st;
}

/* The known capture of an id, NULL when none (g_mu held). */
static dls__capture *known(uint64_t id) {
  dls__capture *c = g_captures;
  while (c != NULL && c->id != id)
    c = c->next;
  return c;
}

/* The capture begun on `s` that dlstream knows of, NULL when none (g_mu held). */
static dls__capture *known_begun_on(const dls__stream *s) {
  dls__capture *c = g_captures;
  while (c != NULL && !(c->origin->dev == s->dev && c->origin->native == s->native))
    c = c->next;
  return c;
}

static void unlink_capture(dls__capture *c) {
  for (dls__capture **pp = &g_captures; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  }
  atomic_fetch_sub(&dls__captures_known, 1);
  atomic_fetch_sub(&c->dev->captures, 1);
}

/* Frees a capture record; what it still holds is dropped (a drop may free a buffer, so an own capture's record
 * is never freed under g_mu; a foreign one holds nothing). */
static void capture_free(dls__capture *c) {
  for (int i = 0; i < c->nholds; i++)
    c->holds[i].drop(c->holds[i].obj);
  dls__free(c->holds);
  dls__stream_unref(c->origin);
  dls__free(c->allocs);
  dls__free(c);
}

/* Adds a capture to the registry (g_mu held). NULL when out of memory: then
 * it is only unknown, and relaxed mode still keeps polling from invalidating it. */
static dls__capture *remember(dls__stream *s, uint64_t id, int mode, bool own) {
  dls__capture *c = dls__calloc(1, sizeof *c);
  if (c == NULL)
    return NULL;
  c->id = id;
  c->dev = s->dev;
  c->mode = mode;
  c->own = own;
  c->thread = pthread_self();
  c->origin = s;
  dls__stream_ref(s);
  c->next = g_captures;
  g_captures = c;
  atomic_fetch_add(&dls__captures_known, 1);
  atomic_fetch_add(&s->dev->captures, 1);
  return c;
}

/* dls__stream_capture_query past the driver's plain answer: its failure, or a capture underway (noted). */
static DLS__NOINLINE int capture_query_more(dls__stream *s, dls_status_t st, int status, uint64_t *out_id) {
  if (DLS__UNLIKELY(st != DLS_OK)) {
    /* The driver could not tell: a capture dlstream knows was begun on this
     * stream is still underway as far as it can tell (a stream that only
     * joined a capture is not known and counts as eager; the call itself
     * then meets the driver's refusal). */
    pthread_mutex_lock(&g_mu);
    dls__capture *c = known_begun_on(s);
    *out_id = c != NULL ? c->id : 0;
    pthread_mutex_unlock(&g_mu);
    return c != NULL ? DLS__CAPTURE_ACTIVE : DLS__CAPTURE_NONE;
  }
  pthread_mutex_lock(&g_mu);
  if (known(*out_id) == NULL)
    (void)remember(s, *out_id, DLS_CAPTURE_GLOBAL, false);
  pthread_mutex_unlock(&g_mu);
  return status;
}

int dls__stream_capture_query(dls__stream *s, uint64_t *out_id) {
  int status;
  dls_status_t st = driver_status(s, &status, out_id);
  if (DLS__LIKELY(st == DLS_OK && status != DLS__CAPTURE_ACTIVE))
    return status;
  return capture_query_more(s, st, status, out_id);
}

/* A foreign capture is over once its stream is no longer in it; while the
 * driver cannot tell, it is not (g_mu held). */
static bool foreign_over(dls__capture *c) {
  int status;
  uint64_t id;
  return driver_status(c->origin, &status, &id) == DLS_OK && (status != DLS__CAPTURE_ACTIVE || id != c->id);
}

/* Unlinks the foreign captures that are over (g_mu held); their records are freed by forgotten_free once g_mu is
 * let go: a record holds its stream, whose release (a cache giving memory back, a framework's stream let go) must
 * not run under g_mu. */
static dls__capture *forget_finished_foreign(void) {
  dls__capture *gone = NULL;
  for (dls__capture *c = g_captures, *next; c != NULL; c = next) {
    next = c->next;
    if (!c->own && !c->ending && foreign_over(c)) {
      unlink_capture(c);
      c->next = gone;
      gone = c;
    }
  }
  return gone;
}

static void forgotten_free(dls__capture *gone) {
  for (dls__capture *next; gone != NULL; gone = next) {
    next = gone->next;
    capture_free(gone);
  }
}

/* The id and mode of a known capture that forbids this thread's unsafe
 * calls, or 0 when none does. */
static uint64_t forbidding(int *out_mode) {
  if (DLS__LIKELY(atomic_load_explicit(&dls__captures_known, memory_order_acquire) == 0))
    return 0;
  pthread_mutex_lock(&g_mu);
  dls__capture *gone = forget_finished_foreign();
  uint64_t id = 0;
  pthread_t self = pthread_self();
  for (dls__capture *c = g_captures; c != NULL && id == 0; c = c->next) {
    if (c->mode == DLS_CAPTURE_GLOBAL || (c->mode == DLS_CAPTURE_THREAD_LOCAL && pthread_equal(c->thread, self))) {
      id = c->id;
      *out_mode = c->mode;
    }
  }
  pthread_mutex_unlock(&g_mu);
  forgotten_free(gone);
  return id;
}

bool dls__capture_polling_allowed(void) {
  int mode;
  return forbidding(&mode) == 0;
}

dls_status_t dls__capture_check_host_wait(const char *call) {
  int mode = DLS_CAPTURE_GLOBAL;
  uint64_t id = forbidding(&mode);
  if (DLS__LIKELY(id == 0))
    return DLS_OK;
  return dls__fail(DLS_ERR_STATE,
                   "%s: capture %" PRIu64 " (%s mode) is underway and forbids this thread's synchronizing calls: the "
                   "driver would invalidate it; wait after the capture ends, or capture in relaxed mode",
                   call, id, mode == DLS_CAPTURE_GLOBAL ? "global" : "thread-local");
}

bool dls__capture_on_device(dls__device *dev) {
  if (DLS__LIKELY(atomic_load_explicit(&dev->captures, memory_order_acquire) == 0))
    return false;
  pthread_mutex_lock(&g_mu);
  dls__capture *gone = forget_finished_foreign(); /* a capture another framework ended is known only once its stream
                                                     says so */
  pthread_mutex_unlock(&g_mu);
  forgotten_free(gone);
  return atomic_load_explicit(&dev->captures, memory_order_acquire) > 0;
}

bool dls__capture_underway(uint64_t id) {
  if (id == 0 || atomic_load_explicit(&dls__captures_known, memory_order_acquire) == 0)
    return false;
  pthread_mutex_lock(&g_mu);
  dls__capture *gone = forget_finished_foreign();
  bool underway = known(id) != NULL;
  pthread_mutex_unlock(&g_mu);
  forgotten_free(gone);
  return underway;
}

dls_status_t dls__capture_check_pair(dls__stream *waiter, uint64_t waiter_cap, dls__stream *target,
                                     uint64_t target_cap) {
  if (DLS__LIKELY(waiter_cap == target_cap))
    return DLS_OK;
  char a[128], b[128];
  return dls__fail(DLS_ERR_STATE,
                   "%s would wait for %s: a stream in a capture and a stream outside it (or in another capture) "
                   "are never tied, since the wait would invalidate the capture or pull eager work into it; "
                   "nothing was queued and the capture is still valid",
                   dls__stream_describe(waiter, waiter_cap, a, sizeof a),
                   dls__stream_describe(target, target_cap, b, sizeof b));
}

void dls__relaxed_enter(dls__relaxed *r, dls__device *dev) {
  r->swapped = false;
  r->be = dev->be;
  r->dev = dev->id;
  if (r->be->thread_capture_mode != NULL &&
      r->be->thread_capture_mode(r->be, r->dev, DLS_CAPTURE_RELAXED, &r->prev) == DLS_OK)
    r->swapped = true;
}

void dls__relaxed_leave(dls__relaxed *r) {
  int ignored;
  if (r->swapped)
    (void)r->be->thread_capture_mode(r->be, r->dev, r->prev, &ignored);
}

/* The CUDA driver (580) crashes when stream-ordered pool allocations and
 * frees on some threads run at the same time as another thread begins or
 * ends a global or thread-local capture, instantiates its graph or destroys
 * it, and when one thread asks about the capture of a stream (a pooled
 * branch) whose capture another thread is ending (both seen under
 * tests/c/test_chaos.c on an H100). So those calls never overlap: while a
 * capture or a graph exists, allocations, frees and capture queries take
 * this lock, and the capture and graph calls always do. */
static pthread_mutex_t g_graph_calls_mu = PTHREAD_MUTEX_INITIALIZER;
_Atomic int dls__graphs_live;

static inline bool graph_calls_guarded(void) {
  return atomic_load_explicit(&dls__captures_known, memory_order_acquire) != 0 ||
         atomic_load_explicit(&dls__graphs_live, memory_order_acquire) != 0;
}

dls_status_t dls__mem_alloc(dls__stream *s, size_t size, void **out_ptr) {
  dls__device *dev = s->dev;
  if (DLS__LIKELY(!graph_calls_guarded()))
    return dev->be->mem_alloc(dev->be, dev->id, size, s->native, out_ptr);
  dls__relaxed r;
  pthread_mutex_lock(&g_graph_calls_mu);
  dls__relaxed_enter(&r, dev);
  dls_status_t st = dev->be->mem_alloc(dev->be, dev->id, size, s->native, out_ptr);
  dls__relaxed_leave(&r);
  pthread_mutex_unlock(&g_graph_calls_mu);
  return st;
}

void dls__mem_free(dls__device *dev, void *ptr, dls__stream *s) {
  if (DLS__LIKELY(!graph_calls_guarded())) {
    (void)dev->be->mem_free(dev->be, dev->id, ptr, s->native);
    return;
  }
  dls__relaxed r;
  pthread_mutex_lock(&g_graph_calls_mu);
  dls__relaxed_enter(&r, dev);
  (void)dev->be->mem_free(dev->be, dev->id, ptr, s->native);
  dls__relaxed_leave(&r);
  pthread_mutex_unlock(&g_graph_calls_mu);
}

dls_status_t dls__capture_status_locked(dls__device *dev, void *native_stream, int *out_status, uint64_t *out_id) {
  pthread_mutex_lock(&g_graph_calls_mu);
  dls_status_t st = dev->be->stream_capture_status(dev->be, dev->id, native_stream, out_status, out_id);
  pthread_mutex_unlock(&g_graph_calls_mu);
  return st;
}

static dls_status_t begin_call(dls__stream *s, int mode) {
  pthread_mutex_lock(&g_graph_calls_mu);
  dls_status_t st = s->dev->be->stream_begin_capture(s->dev->be, s->dev->id, s->native, mode);
  pthread_mutex_unlock(&g_graph_calls_mu);
  return st;
}

dls_status_t dls__capture_end_call(dls__device *dev, void *native_stream, void **out_graph) {
  pthread_mutex_lock(&g_graph_calls_mu);
  dls_status_t st = dev->be->stream_end_capture(dev->be, dev->id, native_stream, out_graph);
  pthread_mutex_unlock(&g_graph_calls_mu);
  return st;
}

void dls__graph_destroy_call(dls__device *dev, void *graph) {
  pthread_mutex_lock(&g_graph_calls_mu);
  (void)dev->be->graph_destroy(dev->be, dev->id, graph);
  pthread_mutex_unlock(&g_graph_calls_mu);
}

/* ---- memory allocated in a capture ---- */

/* Array `p` of `n` elements of `size` bytes (capacity *cap), with room for
 * one more: `p` itself, or grown (doubled, from 8). NULL when out of host
 * memory: `p` is unchanged. */
static void *room_for_one(void *p, int n, int *cap, size_t size) {
  if (n < *cap)
    return p;
  int more = *cap ? 2 * *cap : 8;
  void *q = dls__realloc(p, (size_t)more * size);
  if (q != NULL)
    *cap = more;
  return q;
}

void dls__capture_alloc_add(uint64_t id, dls__graph_owner *owner, void *ptr) {
  pthread_mutex_lock(&g_mu);
  dls__capture *c = known(id);
  if (c != NULL && c->own) {
    void *p = room_for_one(c->allocs, c->nallocs, &c->cap_allocs, sizeof *c->allocs);
    if (p != NULL)
      c->allocs = p;
    /* Out of memory: the buffer stays unknown to the graph, whose replays
     * then keep its memory until the graph is destroyed. */
    if (c->nallocs < c->cap_allocs)
      c->allocs[c->nallocs++] = (dls__capture_alloc){owner, ptr};
  }
  pthread_mutex_unlock(&g_mu);
}

void dls__capture_alloc_remove(uint64_t id, dls__graph_owner *owner) {
  pthread_mutex_lock(&g_mu);
  dls__capture *c = known(id);
  for (int i = 0; c != NULL && i < c->nallocs; i++) {
    if (c->allocs[i].owner == owner) {
      c->allocs[i] = c->allocs[--c->nallocs];
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
}

void dls__capture_alloc_orphan(uint64_t id, dls__graph_owner *owner) {
  pthread_mutex_lock(&g_mu);
  dls__capture *c = known(id);
  for (int i = 0; c != NULL && i < c->nallocs; i++) {
    if (c->allocs[i].owner == owner) {
      c->allocs[i].owner = NULL;
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
}

/* ---- memory a capture uses but did not allocate ---- */

dls_status_t dls__capture_keep(uint64_t id, void *obj, void (*drop)(void *obj), uint64_t obj_cap, bool *out_kept) {
  *out_kept = false;
  dls_status_t st = DLS_OK;
  pthread_mutex_lock(&g_mu);
  dls__capture *c = known(id);
  /* Memory of another capture still underway is that capture's (a replay could not use it); kept, it could also
   * tie two graphs that hold each other. */
  if (c != NULL && c->own && (obj_cap == 0 || known(obj_cap) == NULL)) {
    void *p = room_for_one(c->holds, c->nholds, &c->cap_holds, sizeof *c->holds);
    if (p != NULL) {
      c->holds = p;
      c->holds[c->nholds++] = (dls__capture_hold){obj, drop};
      *out_kept = true;
    } else {
      st = dls__fail(DLS_ERR_OUT_OF_MEMORY,
                     "out of host memory for capture %" PRIu64 "'s record of the memory its work uses", id);
    }
  }
  pthread_mutex_unlock(&g_mu);
  return st;
}

dls__capture_hold *dls__capture_take_holds(dls__capture *c, int *out_n) {
  pthread_mutex_lock(&g_mu);
  dls__capture_hold *h = c->holds;
  *out_n = c->nholds;
  c->holds = NULL;
  c->nholds = c->cap_holds = 0;
  pthread_mutex_unlock(&g_mu);
  return h;
}

/* ---- public API ---- */

/* dls_stream_begin_capture's work, inside its change. */
static dls_status_t begin_changing(dls__stream *s, int mode, const char *call) {
  uint64_t id;
  if (dls__stream_capture(s, &id) != DLS__CAPTURE_NONE) {
    char d[128];
    return dls__fail(DLS_ERR_STATE, "%s: %s is already capturing", call, dls__stream_describe(s, id, d, sizeof d));
  }
  dls_status_t st = begin_call(s, mode);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(stream on %s)", call, s->dev->name);
  int status = DLS__CAPTURE_NONE;
  st = dls__capture_status_call(s->dev, s->native, &status, &id);
  pthread_mutex_lock(&g_mu);
  dls__capture *c = st == DLS_OK && status == DLS__CAPTURE_ACTIVE ? remember(s, id, mode, true) : NULL;
  pthread_mutex_unlock(&g_mu);
  if (c == NULL) {
    void *graph = NULL;
    if (dls__capture_end_call(s->dev, s->native, &graph) == DLS_OK)
      dls__graph_destroy_call(s->dev, graph);
    return st != DLS_OK ? dls__fail_prefix(st, "%s", call)
                        : dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory for a capture record", call);
  }
  return DLS_OK;
}

dls_status_t dls_stream_begin_capture(dls_stream_t stream, dls_capture_mode_t mode) {
  static const char call[] = "dls_stream_begin_capture";
  DLS__ENTER(call);
  if ((int)mode < DLS_CAPTURE_GLOBAL || (int)mode > DLS_CAPTURE_RELAXED)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(mode=%d): unknown capture mode (DLS_CAPTURE_GLOBAL 0, THREAD_LOCAL 1, RELAXED 2)", call,
                     (int)mode);
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (s->kind == DLS__STREAM_DEFAULT)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(stream): %s's default streams cannot be captured (the legacy stream never can); capture "
                     "a created, pooled or wrapped stream",
                     call, s->dev->name);
  const dls__backend *be = s->dev->be;
  if (be->stream_begin_capture == NULL || be->stream_end_capture == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED, "%s: the %s backend cannot capture graphs", call, be->name);
  /* A change: no pinned decision of another thread's (an allocation, a free, a use) straddles the begin. */
  dls__capture_change_begin();
  dls_status_t st = begin_changing(s, (int)mode, call);
  dls__capture_change_end();
  return st;
}

dls_status_t dls_stream_capture_status(dls_stream_t stream, dls_capture_status_t *out_status) {
  static const char call[] = "dls_stream_capture_status";
  DLS__ENTER(call);
  DLS__OUT(call, out_status);
  DLS__GET_OF(stream, s, stream, call, "stream");
  uint64_t id;
  *out_status = (dls_capture_status_t)dls__stream_capture(s, &id);
  return DLS_OK;
}

uint64_t dls__capture_own_on(const dls__stream *s) {
  pthread_mutex_lock(&g_mu);
  dls__capture *c = known_begun_on(s);
  uint64_t id = c != NULL && c->own ? c->id : 0;
  pthread_mutex_unlock(&g_mu);
  return id;
}

dls__capture *dls__capture_claim(dls__stream *s, bool this_object) {
  pthread_mutex_lock(&g_mu);
  dls__capture *c = g_captures;
  while (c != NULL && !(c->own && !c->ending &&
                        (this_object ? c->origin == s : c->origin->dev == s->dev && c->origin->native == s->native)))
    c = c->next;
  if (c != NULL)
    c->ending = true;
  pthread_mutex_unlock(&g_mu);
  return c;
}

void dls__capture_unlink(dls__capture *c) {
  pthread_mutex_lock(&g_mu);
  unlink_capture(c);
  pthread_mutex_unlock(&g_mu);
}

void dls__capture_release(dls__capture *c) { capture_free(c); }

void dls__capture_end_dropping(dls__capture *c) {
  void *native = NULL;
  dls__capture_change_begin();
  if (c->own && dls__capture_end_call(c->dev, c->origin->native, &native) == DLS_OK && native != NULL)
    dls__graph_destroy_call(c->dev, native);
  dls__capture_unlink(c);
  dls__capture_change_end();
  capture_free(c); /* outside the change: a drop may run a release callback */
}

void dls__capture_drop_on(dls__stream *s) {
  if (DLS__LIKELY(atomic_load_explicit(&dls__captures_known, memory_order_acquire) == 0))
    return;
  /* This stream object's own capture only: another wrapper of the same
   * native stream going away leaves a capture begun through this one. */
  dls__capture *c = dls__capture_claim(s, true);
  if (c != NULL)
    dls__capture_end_dropping(c);
}

void dls__captures_shutdown(void) {
  for (;;) {
    pthread_mutex_lock(&g_mu);
    dls__capture *c = g_captures;
    while (c != NULL && c->ending)
      c = c->next;
    if (c != NULL)
      c->ending = true;
    pthread_mutex_unlock(&g_mu);
    if (c == NULL)
      return;
    dls__capture_end_dropping(c);
  }
}
