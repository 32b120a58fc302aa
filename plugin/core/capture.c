/* SPDX-License-Identifier: Apache-2.0 */
/* Graph capture: the captures dlstream knows of, the rule that ties no
 * capturing stream to one outside its capture, own-initiative polling kept
 * away from captures, and graphs (capture, replay, the memory they own). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Memory an own capture allocated and did not free: a buffer (no ref), or
 * memory whose buffer is gone but could not be freed in the capture. */
typedef struct dls__capture_alloc {
  dls__buffer *b; /* NULL once orphaned */
  void *ptr;
} dls__capture_alloc;

/* A capture underway: begun through dls_stream_begin_capture (own), or seen
 * on a stream passed to dlstream (foreign, e.g. torch.cuda.graph). */
typedef struct dls__capture {
  uint64_t id;
  dls__device *dev;
  int mode;              /* DLS_CAPTURE_*; foreign captures count as global */
  bool own;
  bool ending;           /* a thread is ending it: it stays known until the driver has ended it */
  pthread_t thread;      /* the thread that began it */
  dls__stream *origin;   /* ref held */
  dls__capture_alloc *allocs; /* own: memory allocated in it and not freed in it */
  int nallocs, cap_allocs;
  struct dls__capture *next;
} dls__capture;

/* A graph output: memory a capture allocated and did not free. */
typedef struct dls__graph_out {
  void *ptr;
  uint64_t freed_at; /* the launch count when dlstream freed it, or UINT64_MAX */
} dls__graph_out;

struct dls__graph {
  dls__device *dev;
  void *native;
  _Atomic int refs;     /* the handle + buffers whose memory it owns */
  pthread_mutex_t mu;   /* last, launches, outs */
  dls__stream *last;    /* the stream of the latest replay (ref held), NULL before the first */
  uint64_t launches;
  dls__graph_out *outs;
  int nouts;
  uint64_t id;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* the registry; an own capture's allocs */
static dls__capture *g_captures;
_Atomic int dls__captures_known;

#define DLS__GET_GRAPH(var, handle, call, arg) DLS__GET(&dls__graph_table, dls__graph, var, handle, call, arg)

/* ---- what the driver says ---- */

/* The driver's answer, or its failure. */
static dls_status_t query(dls__stream *s, int *out_status, uint64_t *out_id) {
  *out_status = DLS__CAPTURE_NONE;
  *out_id = 0;
  const dls__backend *be = s->dev->be;
  if (be->stream_capture_status == NULL || dls__stream_legacy(s))
    return DLS_OK;
  dls_status_t st = be->stream_capture_status(s->dev->id, s->native, out_status, out_id);
  if (st != DLS_OK || *out_status == DLS__CAPTURE_NONE) {
    *out_status = DLS__CAPTURE_NONE;
    *out_id = 0;
  }
  return st;
}

static dls__capture *find(uint64_t id) {
  dls__capture *c = g_captures;
  while (c != NULL && c->id != id)
    c = c->next;
  return c;
}

/* The capture begun on `s` that dlstream knows of, NULL when none (g_mu held). */
static dls__capture *find_origin(const dls__stream *s) {
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

static void capture_free(dls__capture *c) {
  dls__stream_unref(c->origin);
  dls__free(c->allocs);
  dls__free(c);
}

/* Registers a capture (g_mu held). NULL when out of memory: then it is only
 * unknown, and relaxed mode still keeps polling from invalidating it. */
static dls__capture *note(dls__stream *s, uint64_t id, int mode, bool own) {
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

int dls__stream_capture_query(dls__stream *s, uint64_t *out_id) {
  int status;
  if (DLS__UNLIKELY(query(s, &status, out_id) != DLS_OK)) {
    /* The driver could not tell: a capture dlstream knows was begun on this
     * stream is still underway as far as it can tell (a stream that only
     * joined a capture is not known and counts as eager; the call itself
     * then meets the driver's refusal). */
    pthread_mutex_lock(&g_mu);
    dls__capture *c = find_origin(s);
    *out_id = c != NULL ? c->id : 0;
    pthread_mutex_unlock(&g_mu);
    return c != NULL ? DLS__CAPTURE_ACTIVE : DLS__CAPTURE_NONE;
  }
  if (DLS__LIKELY(status != DLS__CAPTURE_ACTIVE))
    return status;
  pthread_mutex_lock(&g_mu);
  if (find(*out_id) == NULL)
    (void)note(s, *out_id, DLS_CAPTURE_GLOBAL, false);
  pthread_mutex_unlock(&g_mu);
  return status;
}

/* A foreign capture is over once its stream is no longer in it; while the
 * driver cannot tell, it is not (g_mu held). */
static bool foreign_over(dls__capture *c) {
  int status;
  uint64_t id;
  return query(c->origin, &status, &id) == DLS_OK && (status != DLS__CAPTURE_ACTIVE || id != c->id);
}

static void forget_finished(void) {
  for (dls__capture *c = g_captures, *next; c != NULL; c = next) {
    next = c->next;
    if (!c->own && !c->ending && foreign_over(c)) {
      unlink_capture(c);
      capture_free(c);
    }
  }
}

/* The id and mode of a known capture that forbids this thread's unsafe
 * calls, or 0 when none does. */
static uint64_t forbidding(int *out_mode) {
  if (DLS__LIKELY(atomic_load_explicit(&dls__captures_known, memory_order_acquire) == 0))
    return 0;
  pthread_mutex_lock(&g_mu);
  forget_finished();
  uint64_t id = 0;
  pthread_t self = pthread_self();
  for (dls__capture *c = g_captures; c != NULL && id == 0; c = c->next) {
    if (c->mode == DLS_CAPTURE_GLOBAL || (c->mode == DLS_CAPTURE_THREAD_LOCAL && pthread_equal(c->thread, self))) {
      id = c->id;
      *out_mode = c->mode;
    }
  }
  pthread_mutex_unlock(&g_mu);
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
  forget_finished(); /* a capture another framework ended is known only once its stream says so */
  pthread_mutex_unlock(&g_mu);
  return atomic_load_explicit(&dev->captures, memory_order_acquire) > 0;
}

bool dls__capture_underway(uint64_t id) {
  if (id == 0 || atomic_load_explicit(&dls__captures_known, memory_order_acquire) == 0)
    return false;
  pthread_mutex_lock(&g_mu);
  forget_finished();
  bool underway = find(id) != NULL;
  pthread_mutex_unlock(&g_mu);
  return underway;
}

const char *dls__stream_describe(const dls__stream *s, uint64_t cap, char *buf, size_t size) {
  static const char *const kinds[] = {"", "owned", "pooled", "foreign", "default"};
  const char *kind = s->kind >= 1 && s->kind <= 4 ? kinds[s->kind] : "";
  char where[48];
  if (cap != 0)
    snprintf(where, sizeof where, "in capture %" PRIu64, cap);
  else
    snprintf(where, sizeof where, "not capturing");
  snprintf(buf, size, "%s stream %p on %s (%s)", kind, s->native, s->dev->name, where);
  return buf;
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
      r->be->thread_capture_mode(r->dev, DLS_CAPTURE_RELAXED, &r->prev) == DLS_OK)
    r->swapped = true;
}

void dls__relaxed_leave(dls__relaxed *r) {
  int ignored;
  if (r->swapped)
    (void)r->be->thread_capture_mode(r->dev, r->prev, &ignored);
}

/* The CUDA driver (580) crashes when stream-ordered pool allocations and
 * frees on some threads run at the same time as another thread begins or
 * ends a global or thread-local capture, instantiates its graph or destroys
 * it (seen under tests/c/test_chaos.c on an H100). So those calls never
 * overlap: while a capture or a graph exists, allocations and frees take
 * this lock, and the capture and graph calls always do. */
static pthread_mutex_t g_graph_calls_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_graphs_live;

static inline bool graph_calls_guarded(void) {
  return atomic_load_explicit(&dls__captures_known, memory_order_acquire) != 0 ||
         atomic_load_explicit(&g_graphs_live, memory_order_acquire) != 0;
}

dls_status_t dls__mem_alloc(dls__stream *s, size_t size, void **out_ptr) {
  dls__device *dev = s->dev;
  if (DLS__LIKELY(!graph_calls_guarded()))
    return dev->be->mem_alloc(dev->id, size, s->native, out_ptr);
  dls__relaxed r;
  pthread_mutex_lock(&g_graph_calls_mu);
  dls__relaxed_enter(&r, dev);
  dls_status_t st = dev->be->mem_alloc(dev->id, size, s->native, out_ptr);
  dls__relaxed_leave(&r);
  pthread_mutex_unlock(&g_graph_calls_mu);
  return st;
}

void dls__mem_free(dls__device *dev, void *ptr, dls__stream *s) {
  if (DLS__LIKELY(!graph_calls_guarded())) {
    (void)dev->be->mem_free(dev->id, ptr, s->native);
    return;
  }
  dls__relaxed r;
  pthread_mutex_lock(&g_graph_calls_mu);
  dls__relaxed_enter(&r, dev);
  (void)dev->be->mem_free(dev->id, ptr, s->native);
  dls__relaxed_leave(&r);
  pthread_mutex_unlock(&g_graph_calls_mu);
}

static dls_status_t begin_call(dls__stream *s, int mode) {
  pthread_mutex_lock(&g_graph_calls_mu);
  dls_status_t st = s->dev->be->stream_begin_capture(s->dev->id, s->native, mode);
  pthread_mutex_unlock(&g_graph_calls_mu);
  return st;
}

static dls_status_t end_call(dls__device *dev, void *native_stream, void **out_graph) {
  pthread_mutex_lock(&g_graph_calls_mu);
  dls_status_t st = dev->be->stream_end_capture(dev->id, native_stream, out_graph);
  pthread_mutex_unlock(&g_graph_calls_mu);
  return st;
}

static void destroy_call(dls__device *dev, void *graph) {
  pthread_mutex_lock(&g_graph_calls_mu);
  (void)dev->be->graph_destroy(dev->id, graph);
  pthread_mutex_unlock(&g_graph_calls_mu);
}

/* ---- memory allocated in a capture ---- */

void dls__capture_note_alloc(uint64_t id, dls__buffer *b) {
  pthread_mutex_lock(&g_mu);
  dls__capture *c = find(id);
  if (c != NULL && c->own) {
    if (c->nallocs == c->cap_allocs) {
      int n = c->cap_allocs ? 2 * c->cap_allocs : 8;
      dls__capture_alloc *p = dls__realloc(c->allocs, (size_t)n * sizeof *p);
      if (p != NULL) {
        c->allocs = p;
        c->cap_allocs = n;
      }
    }
    /* Out of memory: the buffer stays unknown to the graph, whose replays
     * then keep its memory until the graph is destroyed. */
    if (c->nallocs < c->cap_allocs)
      c->allocs[c->nallocs++] = (dls__capture_alloc){b, b->ptr};
  }
  pthread_mutex_unlock(&g_mu);
}

void dls__capture_forget_alloc(uint64_t id, dls__buffer *b) {
  pthread_mutex_lock(&g_mu);
  dls__capture *c = find(id);
  for (int i = 0; c != NULL && i < c->nallocs; i++) {
    if (c->allocs[i].b == b) {
      c->allocs[i] = c->allocs[--c->nallocs];
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
}

void dls__capture_orphan_alloc(uint64_t id, dls__buffer *b) {
  pthread_mutex_lock(&g_mu);
  dls__capture *c = find(id);
  for (int i = 0; c != NULL && i < c->nallocs; i++) {
    if (c->allocs[i].b == b) {
      c->allocs[i].b = NULL;
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
}

static void graph_unref(dls__graph *gr) {
  if (atomic_fetch_sub_explicit(&gr->refs, 1, memory_order_acq_rel) != 1)
    return;
  dls__device *dev = gr->dev;
  /* Outputs whose latest replay's allocation was never freed: free it after that replay. */
  for (int i = 0; gr->last != NULL && i < gr->nouts; i++)
    if (gr->outs[i].freed_at != gr->launches)
      dls__mem_free(dev, gr->outs[i].ptr, gr->last);
  destroy_call(dev, gr->native);
  atomic_fetch_sub(&g_graphs_live, 1);
  if (gr->last != NULL)
    dls__stream_unref(gr->last);
  pthread_mutex_destroy(&gr->mu);
  dls__free(gr->outs);
  dls__free(gr);
}

dls__stream *dls__graph_release_output(dls__buffer *b) {
  dls__graph *gr = b->graph;
  dls__device *dev = b->dev;
  dls__stream *later = NULL;
  pthread_mutex_lock(&gr->mu);
  dls__stream *last = gr->last;
  if (last != NULL)
    dls__stream_ref(last);
  for (int i = 0; i < gr->nouts; i++)
    if (gr->outs[i].ptr == b->ptr)
      gr->outs[i].freed_at = gr->launches;
  uint64_t launches = gr->launches;
  pthread_mutex_unlock(&gr->mu);
  if (last != NULL) {
    /* The latest replay's allocation is freed after that replay and after
     * every eager use of it; the next replay allocates it afresh. */
    bool ordered = true;
    for (int i = 0; i < b->nuses; i++)
      if (b->uses[i].cap_id == 0)
        ordered &= dev->be->stream_wait_event(dev->id, last->native, b->uses[i].event) == DLS_OK;
    if (launches > 0 && !ordered)
      later = last; /* the caller frees it once the eager uses completed */
    else if (launches > 0)
      dls__mem_free(dev, b->ptr, last);
    if (later == NULL)
      dls__stream_unref(last);
  }
  b->graph = NULL;
  graph_unref(gr);
  return later;
}

/* ---- public API ---- */

dls_status_t dls_stream_begin_capture(dls_stream_t stream, dls_capture_mode_t mode) {
  static const char call[] = "dls_stream_begin_capture";
  DLS__ENTER(call);
  if ((int)mode < DLS_CAPTURE_GLOBAL || (int)mode > DLS_CAPTURE_RELAXED)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(mode=%d): unknown capture mode (DLS_CAPTURE_GLOBAL 0, THREAD_LOCAL 1, RELAXED 2)", call,
                     (int)mode);
  DLS__GET_STREAM(s, stream, call, "stream");
  if (s->kind == DLS__STREAM_DEFAULT)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(stream): %s's default streams cannot be captured (the legacy stream never can); capture "
                     "a created, pooled or wrapped stream",
                     call, s->dev->name);
  const dls__backend *be = s->dev->be;
  if (be->stream_begin_capture == NULL || be->stream_end_capture == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED, "%s: the %s backend cannot capture graphs", call, be->name);
  uint64_t id;
  if (dls__stream_capture(s, &id) != DLS__CAPTURE_NONE) {
    char d[128];
    return dls__fail(DLS_ERR_STATE, "%s: %s is already capturing", call, dls__stream_describe(s, id, d, sizeof d));
  }
  dls_status_t st = begin_call(s, (int)mode);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(stream on %s)", call, s->dev->name);
  int status = DLS__CAPTURE_NONE;
  st = be->stream_capture_status(s->dev->id, s->native, &status, &id);
  pthread_mutex_lock(&g_mu);
  dls__capture *c = st == DLS_OK && status == DLS__CAPTURE_ACTIVE ? note(s, id, (int)mode, true) : NULL;
  pthread_mutex_unlock(&g_mu);
  if (c == NULL) {
    void *graph = NULL;
    if (end_call(s->dev, s->native, &graph) == DLS_OK)
      destroy_call(s->dev, graph);
    return st != DLS_OK ? dls__fail_prefix(st, "%s", call)
                        : dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory for a capture record", call);
  }
  return DLS_OK;
}

/* The own capture begun on `s` (on its native stream, or through this very
 * object), claimed for ending; NULL when none or another thread ends it. It
 * stays known until forget(): until the driver has ended it, its streams
 * are still in it (a pooled branch must not be handed out meanwhile). */
static dls__capture *claim_own(dls__stream *s, bool this_object) {
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

/* A claimed capture the driver has ended: forgotten and freed. */
static void forget(dls__capture *c) {
  pthread_mutex_lock(&g_mu);
  unlink_capture(c);
  pthread_mutex_unlock(&g_mu);
  capture_free(c);
}

static dls_status_t graph_publish(dls__capture *c, void *native, const char *call, dls_graph_t *out) {
  dls__device *dev = c->dev;
  dls__graph *gr = dls__calloc(1, sizeof *gr);
  dls__graph_out *outs = c->nallocs > 0 ? dls__calloc((size_t)c->nallocs, sizeof *outs) : NULL;
  if (gr == NULL || (c->nallocs > 0 && outs == NULL)) {
    dls__free(gr);
    dls__free(outs);
    destroy_call(dev, native);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory for a graph", call);
  }
  gr->dev = dev;
  gr->native = native;
  atomic_init(&gr->refs, 1);
  pthread_mutex_init(&gr->mu, NULL);
  gr->outs = outs;
  gr->id = dls__table_add(&dls__graph_table, gr);
  if (gr->id == 0) {
    pthread_mutex_destroy(&gr->mu);
    dls__free(gr);
    dls__free(outs);
    destroy_call(dev, native);
    return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
  }
  atomic_fetch_add(&g_graphs_live, 1);
  /* Memory the capture allocated and did not free: the graph owns it now. */
  for (int i = 0; i < c->nallocs; i++) {
    dls__buffer *b = c->allocs[i].b;
    if (b != NULL) {
      b->graph = gr;
      atomic_fetch_add(&gr->refs, 1);
    }
    gr->outs[gr->nouts].ptr = c->allocs[i].ptr;
    gr->outs[gr->nouts].freed_at = UINT64_MAX;
    gr->nouts++;
  }
  out->id = gr->id;
  return DLS_OK;
}

dls_status_t dls_stream_end_capture(dls_stream_t stream, dls_graph_t *out_graph) {
  static const char call[] = "dls_stream_end_capture";
  DLS__ENTER(call);
  if (out_graph == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_graph=NULL): output pointer is NULL", call);
  out_graph->id = 0;
  DLS__GET_STREAM(s, stream, call, "stream");
  /* A group begun in the capture has branches that have not rejoined: the
   * driver would fail the end and drop the capture. Refused first, so the
   * group can end and the capture go on. */
  pthread_mutex_lock(&g_mu);
  dls__capture *mine = find_origin(s);
  uint64_t mine_id = mine != NULL && mine->own ? mine->id : 0;
  pthread_mutex_unlock(&g_mu);
  int open = mine_id != 0 ? dls__groups_open_in_capture(mine_id) : 0;
  if (open > 0) {
    char d[128];
    return dls__fail(DLS_ERR_STATE,
                     "%s: %s: %d group(s) begun in the capture are still open, so their branches have not rejoined "
                     "it; end them first (nothing changed: the capture goes on)",
                     call, dls__stream_describe(s, mine_id, d, sizeof d), open);
  }
  dls__capture *c = claim_own(s, false);
  if (c == NULL) {
    uint64_t id;
    char d[128];
    int status = dls__stream_capture(s, &id);
    return dls__fail(DLS_ERR_STATE, "%s: %s has no capture begun by dls_stream_begin_capture%s", call,
                     dls__stream_describe(s, id, d, sizeof d),
                     status == DLS__CAPTURE_ACTIVE ? " (its capture was begun elsewhere: end it there)" : "");
  }
  void *native = NULL;
  dls_status_t st = end_call(s->dev, s->native, &native);
  if (st == DLS_OK)
    st = graph_publish(c, native, call, out_graph);
  else /* the backend's status: DLS_ERR_STATE when the capture was invalidated or a stream did not rejoin */
    st = dls__fail_prefix(st, "%s(stream on %s)", call, s->dev->name);
  forget(c);
  dls_deferred_poll(); /* releases that waited for the capture to be over */
  return st;
}

dls_status_t dls_stream_capture_status(dls_stream_t stream, dls_capture_status_t *out_status) {
  static const char call[] = "dls_stream_capture_status";
  DLS__ENTER(call);
  if (out_status == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_status=NULL): output pointer is NULL", call);
  DLS__GET_STREAM(s, stream, call, "stream");
  uint64_t id;
  *out_status = (dls_capture_status_t)dls__stream_capture(s, &id);
  return DLS_OK;
}

dls_status_t dls_graph_launch(dls_graph_t graph, dls_stream_t stream) {
  static const char call[] = "dls_graph_launch";
  DLS__ENTER(call);
  DLS__GET_GRAPH(gr, graph, call, "graph");
  DLS__GET_STREAM(s, stream, call, "stream");
  if (s->dev != gr->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: graph is on %s but stream is on %s", call, gr->dev->name,
                     s->dev->name);
  uint64_t id;
  if (dls__stream_capture(s, &id) != DLS__CAPTURE_NONE) {
    char d[128];
    return dls__fail(DLS_ERR_STATE, "%s: %s is capturing; replaying a graph inside a capture is not supported", call,
                     dls__stream_describe(s, id, d, sizeof d));
  }
  if (dls__stream_legacy(s) && dls__capture_on_device(s->dev))
    return dls__fail(DLS_ERR_STATE, "%s: a capture is underway on %s, so its legacy stream may not be used", call,
                     s->dev->name);
  pthread_mutex_lock(&gr->mu);
  dls_status_t st = s->dev->be->graph_launch(s->dev->id, gr->native, s->native);
  if (st == DLS_OK) {
    gr->launches++;
    if (gr->last != s) {
      dls__stream_ref(s);
      if (gr->last != NULL)
        dls__stream_unref(gr->last);
      gr->last = s;
    }
  }
  pthread_mutex_unlock(&gr->mu);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(stream on %s)", call, s->dev->name);
  dls_deferred_poll();
  return DLS_OK;
}

dls_status_t dls_graph_destroy(dls_graph_t graph) {
  static const char call[] = "dls_graph_destroy";
  if (graph.id == 0)
    return DLS_OK;
  DLS__ENTER(call);
  DLS__END(&dls__graph_table, graph, call, "graph");
  return DLS_OK;
}

void dls__graph_drop(void *obj) { graph_unref(obj); }
dls__table dls__graph_table = DLS__TABLE("graph", DLS_HANDLE_GRAPH, dls__graph_drop);

/* Ends a claimed capture: an own one is ended on its stream and what it
 * recorded is dropped (a failed end ends it too); a foreign one is only
 * forgotten. */
static void capture_drop(dls__capture *c) {
  void *native = NULL;
  if (c->own && end_call(c->dev, c->origin->native, &native) == DLS_OK && native != NULL)
    destroy_call(c->dev, native);
  forget(c);
}

void dls__capture_drop_on(dls__stream *s) {
  if (DLS__LIKELY(atomic_load_explicit(&dls__captures_known, memory_order_acquire) == 0))
    return;
  /* This stream object's own capture only: another wrapper of the same
   * native stream going away leaves a capture begun through this one. */
  dls__capture *c = claim_own(s, true);
  if (c != NULL)
    capture_drop(c);
}

dls_status_t dls_stream_discard_capture(dls_stream_t stream) {
  static const char call[] = "dls_stream_discard_capture";
  DLS__ENTER(call);
  DLS__GET_STREAM(s, stream, call, "stream");
  dls__capture *c = claim_own(s, false);
  if (c == NULL) {
    uint64_t id;
    char d[128];
    if (dls__stream_capture(s, &id) == DLS__CAPTURE_NONE)
      return DLS_OK; /* nothing to discard */
    return dls__fail(DLS_ERR_STATE, "%s: %s is capturing, but its capture was begun elsewhere: end it there", call,
                     dls__stream_describe(s, id, d, sizeof d));
  }
  capture_drop(c);
  dls_deferred_poll(); /* releases that waited for the capture to be over */
  return DLS_OK;
}

/* Ends the captures dlstream began (their graphs are dropped) and forgets the others. */
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
    capture_drop(c);
  }
}
