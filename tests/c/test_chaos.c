/* SPDX-License-Identifier: Apache-2.0 */
/* Many threads doing random operations on shared and private handles at
 * once - create, destroy, launch, record, wait, groups, captures,
 * synchronize, allocations handed between streams by the cache, trims - where any handle may be ended by another thread at any
 * moment. Every call must return a status (never crash, hang or corrupt),
 * and each thread's own data must come out right. Run under ASan and TSan in
 * CI; DLSTREAM_CHAOS_OPS and DLSTREAM_CHAOS_SEED change its size and seed. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "common.h"

TestSuite(chaos, .fini = dlst_fini, .timeout = 600);

enum { SHARED = 6, MAX_THREADS = 16, NVALUES = 64 };

enum { OP_STREAM_NEW, OP_STREAM_END, OP_SYNC, OP_QUERY, OP_EVENT_NEW, OP_EVENT_END, OP_RECORD, OP_WAIT,
       OP_EVENT_SYNC, OP_BUFFER_NEW, OP_BUFFER_END, OP_FILL, OP_AXPY, OP_PRIVATE, OP_GROUP, OP_CAPTURE,
       OP_HANDED, OP_TRIM, OP_CROSS, OP_KINDS };
static const char *const g_op_names[OP_KINDS] = {
    "stream create", "stream destroy", "stream sync", "stream query", "event create", "event destroy",
    "event record", "stream wait", "event sync", "buffer alloc", "buffer free", "fill", "axpy",
    "private check", "group", "capture", "used elsewhere and freed", "trim or limit", "cross record/wait"};

typedef struct shared_t {
  DLDevice d;
  _Atomic uint64_t streams[SHARED];
  _Atomic uint64_t events[SHARED];
  _Atomic uint64_t buffers[SHARED]; /* NVALUES floats each */
} shared_t;

typedef struct worker_t {
  shared_t *sh;
  int index, ops;
  uint64_t rng;
  unsigned long long counts[OP_KINDS];
  int bad;           /* calls that returned a status no race can explain */
  char why[256];
  int wrong;         /* a private buffer that did not read back what was written */
  unsigned skip;     /* DLSTREAM_CHAOS_SKIP: a mask of operations not to run (to narrow a failure down) */
  int capture_knobs; /* DLSTREAM_CHAOS_CAPTURE: 1 relaxed mode only, 2 no group, 4 no fill, 8 end only */
} worker_t;

static uint64_t next_rand(worker_t *w) {
  w->rng ^= w->rng << 13;
  w->rng ^= w->rng >> 7;
  w->rng ^= w->rng << 17;
  return w->rng;
}

/* A race explains a stale handle, a refusal while another thread captures,
 * and a capture invalidated by another thread's work. */
static void expect(worker_t *w, dls_status_t st, const char *what) {
  if (st == DLS_OK || st == DLS_ERR_INVALID_HANDLE || st == DLS_ERR_STATE)
    return;
  if (w->bad++ == 0)
    snprintf(w->why, sizeof w->why, "%s -> %s: %s", what, dls_status_name(st), dls_last_error());
}

static dls_stream_t stream_at(worker_t *w) { return (dls_stream_t){atomic_load(&w->sh->streams[next_rand(w) % SHARED])}; }
static dls_event_t event_at(worker_t *w) { return (dls_event_t){atomic_load(&w->sh->events[next_rand(w) % SHARED])}; }
static dls_buffer_t buffer_at(worker_t *w) { return (dls_buffer_t){atomic_load(&w->sh->buffers[next_rand(w) % SHARED])}; }

/* Puts a new handle in a shared slot and ends the one it replaces. */
#define REPLACE(w, array, type, made, end_fn)                                       \
  do {                                                                               \
    uint64_t old_ = atomic_exchange(&(w)->sh->array[next_rand(w) % SHARED], (made).id); \
    expect((w), end_fn((type){old_}), #end_fn);                                      \
  } while (0)

/* A private stream and buffer: what this thread writes it must read back. */
static void private_check(worker_t *w, float value) {
  dls_stream_t s;
  dls_buffer_t b;
  expect(w, dls_stream_acquire(w->sh->d, &s), "dls_stream_acquire");
  if (dls_buffer_alloc(s, NVALUES * sizeof(float), &b) != DLS_OK) {
    dls_stream_destroy(s);
    return;
  }
  float got[NVALUES];
  expect(w, dls_fill(s, dls_arg_buffer(b), NVALUES, 4, &value), "dls_fill private");
  expect(w, dls_buffer_read(b, 0, got, sizeof got, s), "dls_buffer_read private");
  /* `got` must outlive the read: a synchronize refused while another
   * thread's global capture is underway is asked again. */
  dls_status_t st;
  while ((st = dls_stream_synchronize(s)) == DLS_ERR_STATE)
    sched_yield();
  expect(w, st, "dls_stream_synchronize private");
  if (st == DLS_OK && got[NVALUES - 1] != value)
    w->wrong++;
  expect(w, dls_buffer_free(b), "dls_buffer_free private");
  expect(w, dls_stream_destroy(s), "dls_stream_destroy private");
}

/* The caching allocator's traffic: memory allocated on one shared stream, written on another and freed (its stream
 * waits for that write, then caches the block), which later allocations anywhere take over, the private checks'
 * included: a block handed over before the writes queued on it ran would show there as a wrong value. */
static void handed_op(worker_t *w) {
  dls_buffer_t b;
  if (dls_buffer_alloc(stream_at(w), NVALUES * sizeof(float), &b) != DLS_OK)
    return;
  float v = -1.0f;
  for (int k = (int)(next_rand(w) % 3); k >= 0; k--)
    expect(w, dls_fill(stream_at(w), dls_arg_buffer(b), NVALUES, 4, &v), "dls_fill, then freed");
  expect(w, dls_buffer_free(b), "dls_buffer_free after uses elsewhere");
}

/* Trims the cache, or moves its limit (off, small, the default), while other threads allocate and free. */
static void trim_op(worker_t *w) {
  static const size_t limits[] = {0, 4096, (size_t)1 << 30};
  if (next_rand(w) % 4 == 0)
    expect(w, dls_device_set_cache_limit(w->sh->d, limits[next_rand(w) % 3]), "dls_device_set_cache_limit");
  else
    expect(w, dls_device_trim(w->sh->d, NULL), "dls_device_trim");
}

/* A group on a shared origin: branches work on the origin's shared buffers. */
static void group_op(worker_t *w) {
  dls_group_t g;
  if (dls_group_begin(stream_at(w), &g) != DLS_OK)
    return;
  int n = 1 + (int)(next_rand(w) % 3);
  for (int i = 0; i < n; i++) {
    dls_stream_t b;
    if (dls_group_branch(g, &b) == DLS_OK)
      expect(w, dls_spin(b, 1000), "dls_spin on a branch");
  }
  expect(w, dls_group_end(g), "dls_group_end");
}

/* A capture on a private stream, in a random mode, ended, discarded or
 * dropped with its stream; replayed when it ended. */
static void capture_op(worker_t *w) {
  dls_stream_t s;
  dls_buffer_t b;
  if (dls_stream_acquire(w->sh->d, &s) != DLS_OK)
    return;
  if (dls_buffer_alloc(s, NVALUES * sizeof(float), &b) != DLS_OK) {
    dls_stream_destroy(s);
    return;
  }
  int knobs = w->capture_knobs;
  dls_capture_mode_t mode = (knobs & 1) ? DLS_CAPTURE_RELAXED : (dls_capture_mode_t)(next_rand(w) % 3);
  if (dls_stream_begin_capture(s, mode) == DLS_OK) {
    float one = 1.0f;
    if (!(knobs & 4))
      expect(w, dls_fill(s, dls_arg_buffer(b), NVALUES, 4, &one), "dls_fill in a capture");
    dls_group_t g;
    bool grouped = !(knobs & 2) && next_rand(w) % 2 && dls_group_begin(s, &g) == DLS_OK;
    if (grouped) {
      dls_stream_t br;
      if (dls_group_branch(g, &br) == DLS_OK)
        expect(w, dls_spin(br, 100), "dls_spin on a captured branch");
      expect(w, dls_group_end(g), "dls_group_end in a capture");
    }
    switch ((knobs & 8) ? 0 : next_rand(w) % 3) {
    case 0: {
      dls_graph_t gr;
      if (dls_stream_end_capture(s, &gr) == DLS_OK) {
        expect(w, dls_graph_launch(gr, s), "dls_graph_launch");
        expect(w, dls_graph_destroy(gr), "dls_graph_destroy");
      } else {
        expect(w, dls_stream_discard_capture(s), "dls_stream_discard_capture after a refused end");
      }
      break;
    }
    case 1:
      expect(w, dls_stream_discard_capture(s), "dls_stream_discard_capture");
      break;
    default:
      break; /* the stream's destroy below drops the capture */
    }
  }
  expect(w, dls_buffer_free(b), "dls_buffer_free after a capture");
  expect(w, dls_stream_destroy(s), "dls_stream_destroy after a capture");
}

static void *work(void *arg) {
  worker_t *w = arg;
  DLDevice d = w->sh->d;
  for (int i = 0; i < w->ops; i++) {
    int op = (int)(next_rand(w) % OP_KINDS);
    if ((w->skip >> op) & 1)
      continue;
    w->counts[op]++;
    switch (op) {
    case OP_STREAM_NEW: {
      dls_stream_t s;
      if (dls_stream_create(d, NULL, &s) == DLS_OK)
        REPLACE(w, streams, dls_stream_t, s, dls_stream_destroy);
      break;
    }
    case OP_STREAM_END:
      expect(w, dls_stream_destroy((dls_stream_t){atomic_exchange(&w->sh->streams[next_rand(w) % SHARED], 0)}),
             "dls_stream_destroy");
      break;
    case OP_SYNC:
      expect(w, dls_stream_synchronize(stream_at(w)), "dls_stream_synchronize");
      break;
    case OP_QUERY: {
      int idle;
      expect(w, dls_stream_query(stream_at(w), &idle), "dls_stream_query");
      break;
    }
    case OP_EVENT_NEW: {
      dls_event_t e;
      if (dls_event_create(d, next_rand(w) % 2 ? DLS_EVENT_TIMING : DLS_EVENT_DEFAULT, &e) == DLS_OK)
        REPLACE(w, events, dls_event_t, e, dls_event_destroy);
      break;
    }
    case OP_EVENT_END:
      expect(w, dls_event_destroy((dls_event_t){atomic_exchange(&w->sh->events[next_rand(w) % SHARED], 0)}),
             "dls_event_destroy");
      break;
    case OP_RECORD:
      expect(w, dls_event_record(event_at(w), stream_at(w)), "dls_event_record");
      break;
    case OP_WAIT:
      expect(w, dls_stream_wait_event(stream_at(w), event_at(w)), "dls_stream_wait_event");
      break;
    case OP_EVENT_SYNC:
      expect(w, dls_event_synchronize(event_at(w)), "dls_event_synchronize");
      break;
    case OP_BUFFER_NEW: {
      dls_buffer_t b;
      if (dls_buffer_alloc(stream_at(w), NVALUES * sizeof(float), &b) == DLS_OK)
        REPLACE(w, buffers, dls_buffer_t, b, dls_buffer_free);
      break;
    }
    case OP_BUFFER_END:
      expect(w, dls_buffer_free((dls_buffer_t){atomic_exchange(&w->sh->buffers[next_rand(w) % SHARED], 0)}),
             "dls_buffer_free");
      break;
    case OP_FILL: {
      float v = (float)i;
      expect(w, dls_fill(stream_at(w), dls_arg_buffer(buffer_at(w)), NVALUES, 4, &v), "dls_fill");
      break;
    }
    case OP_AXPY: /* two shared buffers (maybe one), read and written on a random stream: ordered by dlstream */
      expect(w, dls_axpy_f32(stream_at(w), NVALUES, 0.5f, dls_arg_buffer(buffer_at(w)), dls_arg_buffer(buffer_at(w))),
             "dls_axpy_f32");
      break;
    case OP_PRIVATE:
      private_check(w, (float)(w->index * 100000 + i));
      break;
    case OP_GROUP:
      group_op(w);
      break;
    case OP_CAPTURE:
      capture_op(w);
      break;
    case OP_HANDED:
      handed_op(w);
      break;
    case OP_TRIM:
      trim_op(w);
      break;
    default: { /* the pattern that deadlocked the CPU backend: records and waits crossing two streams */
      dls_event_t e = event_at(w);
      expect(w, dls_event_record(e, (dls_stream_t){atomic_load(&w->sh->streams[w->index % 2])}), "cross record");
      expect(w, dls_stream_wait_event((dls_stream_t){atomic_load(&w->sh->streams[1 - w->index % 2])}, e),
             "cross wait");
      break;
    }
    }
  }
  return NULL;
}

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v != NULL && atoi(v) > 0 ? atoi(v) : dflt;
}

BACKEND_TEST(chaos, random_operations_from_many_threads_on_shared_handles) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_pooling(); /* debug frees wait for the device: the run would crawl */
  shared_t sh = {.d = d};
  for (int k = 0; k < SHARED; k++) {
    dls_stream_t s;
    dls_event_t e;
    dls_buffer_t b;
    OK(dls_stream_create(d, NULL, &s));
    OK(dls_event_create(d, DLS_EVENT_DEFAULT, &e));
    OK(dls_buffer_alloc(s, NVALUES * sizeof(float), &b));
    float zero = 0.0f;
    OK(dls_fill(s, dls_arg_buffer(b), NVALUES, 4, &zero)); /* loads the built-ins before any capture */
    OK(dls_spin(s, 1));
    atomic_init(&sh.streams[k], s.id);
    atomic_init(&sh.events[k], e.id);
    atomic_init(&sh.buffers[k], b.id);
  }
  int ops = env_int("DLSTREAM_CHAOS_OPS", 4000);
  int seed = env_int("DLSTREAM_CHAOS_SEED", 1);
  int threads = env_int("DLSTREAM_CHAOS_THREADS", 12);
  threads = threads > MAX_THREADS ? MAX_THREADS : threads;
  static worker_t w[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  for (int t = 0; t < threads; t++) {
    w[t] = (worker_t){.sh = &sh, .index = t, .ops = ops, .rng = 0x9e3779b97f4a7c15ull * (uint64_t)(seed * 64 + t + 1),
                      .skip = (unsigned)strtoul(getenv("DLSTREAM_CHAOS_SKIP") ? getenv("DLSTREAM_CHAOS_SKIP") : "0", NULL, 0),
                      .capture_knobs = env_int("DLSTREAM_CHAOS_CAPTURE", 0)};
    cr_assert_eq(pthread_create(&th[t], NULL, work, &w[t]), 0);
  }
  unsigned long long counts[OP_KINDS] = {0}, total = 0;
  int bad = 0, wrong = 0;
  for (int t = 0; t < threads; t++) {
    pthread_join(th[t], NULL);
    for (int k = 0; k < OP_KINDS; k++)
      counts[k] += w[t].counts[k];
    bad += w[t].bad;
    wrong += w[t].wrong;
    if (w[t].bad > 0)
      fprintf(stderr, "chaos thread %d: %s\n", t, w[t].why);
  }
  char line[1024];
  int at = 0;
  for (int k = 0; k < OP_KINDS; k++) {
    total += counts[k];
    at += snprintf(line + at, sizeof line - (size_t)at, "%s%s %llu", k ? ", " : "", g_op_names[k], counts[k]);
  }
  fprintf(stderr, "chaos on %s: %d threads, %llu operations (%s); seed %d\n",
          *backend_type == kDLCPU ? "cpu" : "gpu", threads, total, line, seed);
  for (int k = 0; k < SHARED; k++) {
    OK(dls_buffer_free((dls_buffer_t){atomic_load(&sh.buffers[k])}));
    OK(dls_event_destroy((dls_event_t){atomic_load(&sh.events[k])}));
    OK(dls_stream_destroy((dls_stream_t){atomic_load(&sh.streams[k])}));
  }
  cr_assert_eq(bad, 0, "%d calls failed in a way no race explains (first reasons above)", bad);
  cr_assert_eq(wrong, 0, "%d private buffers read back the wrong value", wrong);
}

/* Issue 31: captures begun, ended and discarded on one stream while other
 * threads allocate, use and free on it. Whether a piece of memory (or a use
 * of it) is the capture's or eager must be decided where it lands: memory
 * that lands in the capture while dlstream takes it for eager is freed twice
 * (once with the capture, once by its free), and eager memory the capture
 * uses unknown to dlstream is freed under the graph's replays. The capturer
 * alternates relaxed and global captures: a global one forbids some calls
 * of the other threads (a refusal, DLS_ERR_STATE, or an invalidated capture,
 * whose end then fails), which are expected outcomes, not failures. */
enum { RACE_THREADS = 3 };
typedef struct race_t {
  DLDevice d;
  dls_stream_t s;  /* the stream captured, and allocated on */
  _Atomic bool done;
  int rounds;
} race_t;

typedef struct racer_t {
  race_t *r;
  int index;
  uint64_t rng;
  unsigned long long ops, refused, captured, ended, discarded, replayed;
  int bad;
  char why[256];
} racer_t;

/* OK and DLS_ERR_STATE (refused while a capture forbids it, or the capture was invalidated) only. */
static dls_status_t race_expect(racer_t *t, dls_status_t st, const char *what) {
  t->ops++;
  if (st == DLS_ERR_STATE)
    t->refused++;
  else if (st != DLS_OK && t->bad++ == 0)
    snprintf(t->why, sizeof t->why, "%s -> %s: %s", what, dls_status_name(st), dls_last_error());
  return st;
}

static uint64_t race_rand(racer_t *t) {
  t->rng ^= t->rng << 13;
  t->rng ^= t->rng >> 7;
  t->rng ^= t->rng << 17;
  return t->rng;
}

/* A partially overlapping copy of a buffer onto itself: the built-in stages its source through a temporary. */
static dls_status_t race_overlapping_copy(dls_stream_t s, dls_buffer_t b) {
  dls_copy_desc_t desc = {.ndim = 1, .elem_size = 4, .shape = {NVALUES / 2}, .dst_strides = {1}, .src_strides = {2}};
  return dls_copy_strided(s, dls_arg_buffer(b), dls_arg_buffer(b), &desc);
}

/* Thread B: buffers allocated, filled, copied through a staged temporary and freed, and events recorded, on the
 * captured stream. */
static void race_buffers(racer_t *t) {
  dls_stream_t s = t->r->s;
  dls_buffer_t b;
  if (race_expect(t, dls_buffer_alloc(s, NVALUES * sizeof(float), &b), "dls_buffer_alloc") != DLS_OK)
    return;
  float v = (float)t->ops;
  race_expect(t, dls_fill(s, dls_arg_buffer(b), NVALUES, 4, &v), "dls_fill");
  if (race_rand(t) % 2)
    race_expect(t, race_overlapping_copy(s, b), "dls_copy_strided (staged)");
  race_expect(t, dls_axpy_f32(s, NVALUES, 0.5f, dls_arg_buffer(b), dls_arg_buffer(b)), "dls_axpy_f32");
  dls_event_t e; /* a pooled event recorded on the stream and ended at once */
  if (race_expect(t, dls_event_create(t->r->d, DLS_EVENT_DEFAULT, &e), "dls_event_create") == DLS_OK) {
    race_expect(t, dls_event_record(e, s), "dls_event_record");
    race_expect(t, dls_event_destroy(e), "dls_event_destroy");
  }
  race_expect(t, dls_buffer_free(b), "dls_buffer_free");
  if (race_rand(t) % 8 == 0) /* the cache given back while the other threads capture and allocate */
    race_expect(t, dls_device_trim(t->r->d, NULL), "dls_device_trim");
}

/* Thread C: tensors made, written and released on the captured stream. */
static void race_tensors(racer_t *t) {
  dls_stream_t s = t->r->s;
  const int64_t shape[1] = {NVALUES};
  dls_tensor_t x;
  if (race_expect(t, dls_tensor_empty(s, 1, shape, (DLDataType){kDLFloat, 32, 1}, &x), "dls_tensor_empty") != DLS_OK)
    return;
  float v = 2.0f;
  race_expect(t, dls_fill(s, dls_arg_tensor(x), NVALUES, 4, &v), "dls_fill on a tensor");
  race_expect(t, dls_tensor_release(x), "dls_tensor_release");
}

/* Inside a capture: a graph temporary (allocated and freed in it), a graph output (freed after the end), and
 * sometimes a group whose branch allocates and frees. */
static void race_capture_body(racer_t *t, dls_buffer_t *out) {
  dls_stream_t s = t->r->s;
  dls_buffer_t tmp;
  float v = 1.0f;
  if (race_expect(t, dls_buffer_alloc(s, NVALUES * sizeof(float), &tmp), "dls_buffer_alloc in a capture") == DLS_OK) {
    race_expect(t, dls_fill(s, dls_arg_buffer(tmp), NVALUES, 4, &v), "dls_fill in a capture");
    race_expect(t, dls_buffer_free(tmp), "dls_buffer_free in a capture");
  }
  if (race_expect(t, dls_buffer_alloc(s, NVALUES * sizeof(float), out), "dls_buffer_alloc of an output") == DLS_OK)
    race_expect(t, dls_fill(s, dls_arg_buffer(*out), NVALUES, 4, &v), "dls_fill of an output");
  dls_group_t g;
  if (race_rand(t) % 2 == 0 || race_expect(t, dls_group_begin(s, &g), "dls_group_begin in a capture") != DLS_OK)
    return;
  dls_stream_t br;
  if (race_expect(t, dls_group_branch(g, &br), "dls_group_branch in a capture") == DLS_OK) {
    dls_buffer_t bb;
    if (race_expect(t, dls_buffer_alloc(br, sizeof(float) * NVALUES, &bb), "dls_buffer_alloc, branch") == DLS_OK) {
      race_expect(t, dls_fill(br, dls_arg_buffer(bb), NVALUES, 4, &v), "dls_fill on a branch");
      race_expect(t, dls_buffer_free(bb), "dls_buffer_free on a branch");
    }
  }
  race_expect(t, dls_group_end(g), "dls_group_end in a capture");
}

/* Thread A: captures in relaxed and global mode, ended (and replayed, or not) or discarded. */
static void race_captures(racer_t *t) {
  dls_stream_t s = t->r->s;
  for (int i = 0; i < t->r->rounds; i++) {
    dls_capture_mode_t mode = i % 2 ? DLS_CAPTURE_GLOBAL : DLS_CAPTURE_RELAXED;
    if (race_expect(t, dls_stream_begin_capture(s, mode), "dls_stream_begin_capture") != DLS_OK)
      continue;
    t->captured++;
    dls_buffer_t out = {0};
    race_capture_body(t, &out);
    dls_graph_t gr;
    dls_status_t st = race_rand(t) % 3 == 0 ? DLS_ERR_STATE : dls_stream_end_capture(s, &gr);
    if (st == DLS_OK) {
      t->ended++;
      if (race_rand(t) % 2 && race_expect(t, dls_graph_launch(gr, s), "dls_graph_launch") == DLS_OK)
        t->replayed++;
      race_expect(t, dls_buffer_free(out), "dls_buffer_free of an output");
      race_expect(t, dls_graph_destroy(gr), "dls_graph_destroy");
    } else {
      if (st != DLS_ERR_STATE) /* the end was refused (the capture was invalidated): discarded */
        race_expect(t, st, "dls_stream_end_capture");
      t->discarded++;
      race_expect(t, dls_stream_discard_capture(s), "dls_stream_discard_capture");
      race_expect(t, dls_buffer_free(out), "dls_buffer_free of a discarded capture's output");
    }
  }
}

static void *racer(void *arg) {
  racer_t *t = arg;
  if (t->index == 0) {
    race_captures(t);
    atomic_store(&t->r->done, true);
    return NULL;
  }
  while (!atomic_load(&t->r->done)) {
    if (t->index == 1)
      race_buffers(t);
    else
      race_tensors(t);
  }
  return NULL;
}

BACKEND_TEST(chaos, captures_begun_and_ended_while_other_threads_allocate_on_the_stream) {
  race_t r = {.d = dlst_device(*backend_type), .rounds = env_int("DLSTREAM_CHAOS_CAPTURES", 600)};
  dlst_need_pooling(); /* debug frees wait for the device: the run would crawl */
  OK(dls_stream_create(r.d, NULL, &r.s));
  dls_buffer_t warm;
  float zero = 0.0f;
  OK(dls_buffer_alloc(r.s, NVALUES * sizeof(float), &warm));
  OK(dls_fill(r.s, dls_arg_buffer(warm), NVALUES, 4, &zero)); /* loads the built-ins before any capture */
  OK(race_overlapping_copy(r.s, warm));
  OK(dls_buffer_free(warm));
  static racer_t t[RACE_THREADS];
  pthread_t th[RACE_THREADS];
  for (int i = 0; i < RACE_THREADS; i++) {
    t[i] = (racer_t){.r = &r, .index = i, .rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 7)};
    cr_assert_eq(pthread_create(&th[i], NULL, racer, &t[i]), 0);
  }
  int bad = 0;
  for (int i = 0; i < RACE_THREADS; i++) {
    pthread_join(th[i], NULL);
    bad += t[i].bad;
    if (t[i].bad > 0)
      fprintf(stderr, "capture race thread %d: %s\n", i, t[i].why);
  }
  fprintf(stderr,
          "capture race on %s: %d captures begun (%llu ended, %llu replayed, %llu discarded); %llu buffer and %llu "
          "tensor calls beside them; %llu refusals (DLS_ERR_STATE)\n",
          *backend_type == kDLCPU ? "cpu" : "gpu", (int)t[0].captured, t[0].ended, t[0].replayed, t[0].discarded,
          t[1].ops, t[2].ops, t[0].refused + t[1].refused + t[2].refused);
  /* The stream is eager again and works. */
  dls_buffer_t b;
  float got[NVALUES], v = 3.0f;
  OK(dls_buffer_alloc(r.s, NVALUES * sizeof(float), &b));
  OK(dls_fill(r.s, dls_arg_buffer(b), NVALUES, 4, &v));
  OK(dls_buffer_read(b, 0, got, sizeof got, r.s));
  OK(dls_stream_synchronize(r.s));
  OK(dls_buffer_free(b));
  OK(dls_stream_destroy(r.s));
  cr_assert_eq(bad, 0, "%d calls failed in a way no race explains (first reasons above)", bad);
  cr_assert_eq(got[NVALUES - 1], 3.0f);
  cr_assert_gt(t[0].captured, 0, "no capture began");
}

/* Issue 18's deadlock, alone: 8 threads record on one stream and make the
 * other wait, crossing; synchronize must return. */
typedef struct cross_t {
  dls_stream_t s[2];
  dls_event_t e[2];
  int i, rounds, failures;
} cross_t;

static void *cross(void *arg) {
  cross_t *c = arg;
  for (int k = 0; k < c->rounds; k++) {
    c->failures += dls_event_record(c->e[c->i], c->s[c->i]) != DLS_OK;
    c->failures += dls_stream_wait_event(c->s[1 - c->i], c->e[c->i]) != DLS_OK;
  }
  return NULL;
}

BACKEND_TEST(chaos, crossing_records_and_waits_never_deadlock) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s[2];
  dls_event_t e[2];
  for (int i = 0; i < 2; i++) {
    OK(dls_stream_create(d, NULL, &s[i]));
    OK(dls_event_create(d, DLS_EVENT_DEFAULT, &e[i]));
  }
  enum { N = 8 };
  cross_t c[N];
  pthread_t th[N];
  for (int t = 0; t < N; t++) {
    c[t] = (cross_t){.s = {s[0], s[1]}, .e = {e[0], e[1]}, .i = t % 2, .rounds = env_int("DLSTREAM_CHAOS_CROSS", 20000)};
    cr_assert_eq(pthread_create(&th[t], NULL, cross, &c[t]), 0);
  }
  for (int t = 0; t < N; t++) {
    pthread_join(th[t], NULL);
    cr_assert_eq(c[t].failures, 0, "%s", dls_last_error());
  }
  OK(dls_stream_synchronize(s[0])); /* hung forever before: a cycle of waits */
  OK(dls_stream_synchronize(s[1]));
  for (int i = 0; i < 2; i++) {
    OK(dls_event_destroy(e[i]));
    OK(dls_stream_destroy(s[i]));
  }
}
