/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU backend: every stream is a worker thread draining a FIFO, events
 * are completion records, memory is a stream-ordered caching pool.
 *
 * DLSTREAM_CPU_SYNC=1 runs every command inline on the calling thread (no
 * workers): a debugging aid in which streams cannot overlap, so latches
 * block their caller until they time out. DLSTREAM_DEBUG_ALLOC=1 turns the
 * pool off and poisons freed memory before it is returned to the system. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "core/error.h"

DLS__INTERNAL dls_host_kernel dls__cpu_builtin(const char *name);

#define CPU_STREAM_MAGIC 0x5354524du /* "STRM" */
#define CPU_EVENT_MAGIC 0x45564e54u  /* "EVNT" */
#define CPU_ALIGN 256

enum { CMD_LAUNCH = 1, CMD_RECORD, CMD_WAIT, CMD_CALLBACK, CMD_MEMCPY, CMD_FREE, CMD_EXIT };

typedef struct cpu_fn {
  dls_host_kernel fn;
  char name[64];
  _Atomic int refs; /* owner + queued launches; built-ins are static (0) */
} cpu_fn;

static void fn_unref(cpu_fn *f) {
  if (atomic_load(&f->refs) != 0 && atomic_fetch_sub(&f->refs, 1) == 1)
    free(f);
}

typedef struct cpu_node { /* one record of an event */
  _Atomic int refs;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  uint64_t t_ns;
} cpu_node;

/* A registry of live objects, so a foreign pointer can be checked before it
 * is used. The link is each object's first member: a link's address is its
 * object's. Guarded by g.mu. */
typedef struct cpu_link {
  struct cpu_link *prev, *next;
} cpu_link;

static void link_push(cpu_link **head, cpu_link *l) {
  l->prev = NULL;
  l->next = *head;
  if (*head)
    (*head)->prev = l;
  *head = l;
}

static void link_remove(cpu_link **head, cpu_link *l) {
  if (l->prev)
    l->prev->next = l->next;
  else
    *head = l->next;
  if (l->next)
    l->next->prev = l->prev;
}

static bool link_has(const cpu_link *head, const void *obj) {
  while (head != NULL && (const void *)head != obj)
    head = head->next;
  return head != NULL;
}

typedef struct cpu_event {
  cpu_link link; /* first: the registry of live events */
  uint32_t magic;
  unsigned flags;
  pthread_mutex_t mu;
  cpu_node *latest; /* NULL: never recorded */
} cpu_event;

typedef struct cpu_block cpu_block;
typedef struct cpu_stream cpu_stream;

struct cpu_block { /* header in front of every allocation */
  size_t size;     /* rounded size of the data */
  int state;       /* BLOCK_* */
  uint64_t free_seq;
  cpu_stream *pending_on;
  cpu_block *next;
};
enum { BLOCK_LIVE = 1, BLOCK_PENDING, BLOCK_POOLED };
_Static_assert(sizeof(cpu_block) <= CPU_ALIGN, "block header fits in front of the data");

typedef struct cpu_cmd {
  struct cpu_cmd *next;
  int type;
  union {
    struct { const cpu_fn *fn; dls_launch_config_t cfg; int n; void **ptrs; } launch;
    struct { cpu_node *node; } rec;
    struct { dls_host_fn fn; void *user; } cb;
    struct { void *dst; const void *src; size_t n; } cp;
    struct { cpu_block *blk; uint64_t seq; } fr;
  } u;
  _Alignas(16) unsigned char data[];
} cpu_cmd;

struct cpu_stream {
  cpu_link link; /* first: the registry of live streams */
  uint32_t magic;
  pthread_mutex_t mu;
  pthread_cond_t cv_work, cv_idle;
  cpu_cmd *head, *tail;
  uint64_t submitted, completed;
  int error;
  char errmsg[160];
  cpu_block *pending; /* blocks freed on this stream, not yet pooled */
};

static struct {
  pthread_mutex_t mu;      /* registry, pool, workers */
  pthread_cond_t cv_exit;  /* a worker exited */
  int sync_mode;
  int debug_alloc;
  int workers;             /* live worker threads */
  int exiting;             /* workers told to exit and not yet gone */
  cpu_link *events;        /* registry of live events (for wrap checks) */
  cpu_link *streams;       /* registry of live streams */
  cpu_stream *dflt;        /* the device's default stream */
  cpu_block *pool;         /* idle blocks */
  size_t pool_bytes;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv_exit = PTHREAD_COND_INITIALIZER};

#define CPU_POOL_LIMIT ((size_t)256 << 20) /* idle bytes kept before returning to the system */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- event records ---- */

static cpu_node *node_new(void) {
  cpu_node *n = calloc(1, sizeof *n);
  if (n == NULL)
    return NULL;
  atomic_init(&n->refs, 1);
  pthread_mutex_init(&n->mu, NULL);
  pthread_cond_init(&n->cv, NULL);
  return n;
}

static void node_unref(cpu_node *n) {
  if (n && atomic_fetch_sub(&n->refs, 1) == 1) {
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
    free(n);
  }
}

static void node_complete(cpu_node *n) {
  pthread_mutex_lock(&n->mu);
  n->t_ns = now_ns();
  n->done = 1;
  pthread_cond_broadcast(&n->cv);
  pthread_mutex_unlock(&n->mu);
}

static void node_wait(cpu_node *n) {
  pthread_mutex_lock(&n->mu);
  while (!n->done)
    pthread_cond_wait(&n->cv, &n->mu);
  pthread_mutex_unlock(&n->mu);
}

static int node_done(cpu_node *n) {
  pthread_mutex_lock(&n->mu);
  int d = n->done;
  pthread_mutex_unlock(&n->mu);
  return d;
}

/* ---- memory blocks ---- */

static cpu_block *block_of(void *ptr) { return (cpu_block *)((char *)ptr - CPU_ALIGN); }
static void *block_data(cpu_block *b) { return (char *)b + CPU_ALIGN; }

static void block_release(cpu_block *b) {
  if (g.debug_alloc)
    memset(block_data(b), 0xDB, b->size);
  free(b);
}

static void unlink_pending(cpu_stream *s, cpu_block *b) {
  for (cpu_block **pp = &s->pending; *pp; pp = &(*pp)->next) {
    if (*pp == b) {
      *pp = b->next;
      return;
    }
  }
}

/* Runs when the stream reaches the free: the block may now go to any stream. */
static void exec_free(cpu_stream *s, cpu_block *b, uint64_t seq) {
  pthread_mutex_lock(&g.mu);
  if (b->state == BLOCK_PENDING && b->free_seq == seq && b->pending_on == s) {
    unlink_pending(s, b);
    b->pending_on = NULL;
    if (g.debug_alloc || g.pool_bytes + b->size > CPU_POOL_LIMIT) {
      pthread_mutex_unlock(&g.mu);
      block_release(b);
      return;
    }
    b->state = BLOCK_POOLED;
    b->next = g.pool;
    g.pool = b;
    g.pool_bytes += b->size;
  }
  pthread_mutex_unlock(&g.mu);
}

/* ---- commands ---- */

static void exec(cpu_stream *s, cpu_cmd *c) {
  switch (c->type) {
  case CMD_LAUNCH: {
    int rc = c->u.launch.fn->fn(&c->u.launch.cfg, c->u.launch.ptrs, c->u.launch.n);
    if (rc != 0) {
      pthread_mutex_lock(&s->mu);
      if (s->error == 0) {
        s->error = rc;
        snprintf(s->errmsg, sizeof s->errmsg, "kernel \"%s\" returned %d", c->u.launch.fn->name, rc);
      }
      pthread_mutex_unlock(&s->mu);
    }
    fn_unref((cpu_fn *)c->u.launch.fn);
    break;
  }
  case CMD_RECORD:
    node_complete(c->u.rec.node);
    node_unref(c->u.rec.node);
    break;
  case CMD_WAIT:
    node_wait(c->u.rec.node);
    node_unref(c->u.rec.node);
    break;
  case CMD_CALLBACK:
    c->u.cb.fn(c->u.cb.user);
    break;
  case CMD_MEMCPY:
    memmove(c->u.cp.dst, c->u.cp.src, c->u.cp.n);
    break;
  case CMD_FREE:
    exec_free(s, c->u.fr.blk, c->u.fr.seq);
    break;
  default:
    break;
  }
}

static void stream_free(cpu_stream *s) {
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv_work);
  pthread_cond_destroy(&s->cv_idle);
  s->magic = 0;
  free(s);
}

static void *worker(void *arg) {
  cpu_stream *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (s->head == NULL)
      pthread_cond_wait(&s->cv_work, &s->mu);
    cpu_cmd *c = s->head;
    s->head = c->next;
    if (s->head == NULL)
      s->tail = NULL;
    pthread_mutex_unlock(&s->mu);
    if (c->type == CMD_EXIT) {
      free(c);
      pthread_mutex_lock(&g.mu);
      link_remove(&g.streams, &s->link);
      g.workers--;
      g.exiting--;
      pthread_cond_broadcast(&g.cv_exit);
      pthread_mutex_unlock(&g.mu);
      stream_free(s);
      return NULL;
    }
    exec(s, c);
    free(c);
    pthread_mutex_lock(&s->mu);
    s->completed++;
    pthread_cond_broadcast(&s->cv_idle);
    pthread_mutex_unlock(&s->mu);
  }
}

static cpu_cmd *cmd_new(int type, size_t extra) {
  cpu_cmd *c = calloc(1, sizeof *c + extra);
  if (c)
    c->type = type;
  return c;
}

static dls_status_t submit(cpu_stream *s, cpu_cmd *c) {
  if (c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a stream command");
  if (g.sync_mode) {
    exec(s, c);
    free(c);
    return DLS_OK;
  }
  pthread_mutex_lock(&s->mu);
  if (s->tail)
    s->tail->next = c;
  else
    s->head = c;
  s->tail = c;
  s->submitted++;
  pthread_cond_signal(&s->cv_work);
  pthread_mutex_unlock(&s->mu);
  return DLS_OK;
}

/* ---- life ---- */

static dls_status_t cpu_probe(void) {
  const char *v = getenv("DLSTREAM_CPU_SYNC");
  g.sync_mode = v != NULL && v[0] == '1';
  v = getenv("DLSTREAM_DEBUG_ALLOC");
  g.debug_alloc = v != NULL && v[0] == '1';
  return DLS_OK;
}

static dls_status_t cpu_device_count(int *out) {
  *out = 1;
  return DLS_OK;
}

static dls_status_t cpu_stream_create(int dev, unsigned flags, int priority, void **out) {
  cpu_stream *s = calloc(1, sizeof *s);
  if (s == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a stream");
  s->magic = CPU_STREAM_MAGIC;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv_work, NULL);
  pthread_cond_init(&s->cv_idle, NULL);
  pthread_mutex_lock(&g.mu);
  if (!g.sync_mode) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, worker, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      pthread_mutex_unlock(&g.mu);
      stream_free(s);
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: pthread_create for a stream worker failed: %s",
                       strerror(rc));
    }
    g.workers++;
  }
  link_push(&g.streams, &s->link);
  pthread_mutex_unlock(&g.mu);
  *out = s;
  return DLS_OK;
}

static dls_status_t cpu_stream_destroy(int dev, void *native) {
  cpu_stream *s = native;
  if (s == NULL)
    return DLS_OK;
  if (g.sync_mode) {
    pthread_mutex_lock(&g.mu);
    link_remove(&g.streams, &s->link);
    pthread_mutex_unlock(&g.mu);
    stream_free(s);
    return DLS_OK;
  }
  /* The worker drains what is queued, then frees the stream: no host wait. */
  cpu_cmd *c = cmd_new(CMD_EXIT, 0);
  if (c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory to stop a stream");
  pthread_mutex_lock(&g.mu);
  g.exiting++;
  pthread_mutex_unlock(&g.mu);
  pthread_mutex_lock(&s->mu);
  if (s->tail)
    s->tail->next = c;
  else
    s->head = c;
  s->tail = c;
  pthread_cond_signal(&s->cv_work);
  pthread_mutex_unlock(&s->mu);
  return DLS_OK;
}

static dls_status_t cpu_stream_default(int dev, int kind, void **out) {
  pthread_mutex_lock(&g.mu);
  cpu_stream *s = g.dflt;
  pthread_mutex_unlock(&g.mu);
  if (s == NULL) {
    void *n;
    DLS__TRY(cpu_stream_create(dev, 0, 0, &n));
    pthread_mutex_lock(&g.mu);
    if (g.dflt == NULL) {
      g.dflt = n;
      n = NULL;
    }
    s = g.dflt;
    pthread_mutex_unlock(&g.mu);
    if (n)
      cpu_stream_destroy(dev, n);
  }
  *out = s;
  return DLS_OK;
}

static dls_status_t cpu_stream_check(int dev, void *native) {
  if (native == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "the CPU backend has no NULL stream (use dls_stream_default for the default stream)");
  pthread_mutex_lock(&g.mu);
  bool live = link_has(g.streams, native);
  pthread_mutex_unlock(&g.mu);
  if (!live)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "native %p is not a live CPU stream of this process", native);
  return DLS_OK;
}

static dls_status_t cpu_stream_synchronize(int dev, void *native) {
  cpu_stream *s = native;
  pthread_mutex_lock(&s->mu);
  uint64_t target = s->submitted;
  while (s->completed < target)
    pthread_cond_wait(&s->cv_idle, &s->mu);
  int err = s->error;
  char msg[sizeof s->errmsg];
  memcpy(msg, s->errmsg, sizeof msg);
  s->error = 0;
  pthread_mutex_unlock(&s->mu);
  if (err)
    return dls__fail(DLS_ERR_BACKEND, "cpu stream %p: %s", native, msg);
  return DLS_OK;
}

static dls_status_t cpu_stream_query(int dev, void *native, int *out_idle) {
  cpu_stream *s = native;
  pthread_mutex_lock(&s->mu);
  *out_idle = s->completed == s->submitted;
  pthread_mutex_unlock(&s->mu);
  return DLS_OK;
}

static dls_status_t cpu_priority_range(int dev, int *least, int *greatest) {
  /* Accepted for portability with CUDA code; the CPU backend does not rank streams. */
  *least = 0;
  *greatest = -5;
  return DLS_OK;
}

static dls_status_t cpu_host_callback(int dev, void *native, dls_host_fn fn, void *user) {
  cpu_cmd *c = cmd_new(CMD_CALLBACK, 0);
  if (c) {
    c->u.cb.fn = fn;
    c->u.cb.user = user;
  }
  return submit(native, c);
}

/* ---- events ---- */

static dls_status_t cpu_event_create(int dev, unsigned flags, void **out) {
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

static dls_status_t cpu_event_destroy(int dev, void *native) {
  cpu_event *e = native;
  if (e == NULL)
    return DLS_OK;
  pthread_mutex_lock(&g.mu);
  link_remove(&g.events, &e->link);
  pthread_mutex_unlock(&g.mu);
  node_unref(e->latest); /* queued records and waits hold their own references */
  pthread_mutex_destroy(&e->mu);
  e->magic = 0;
  free(e);
  return DLS_OK;
}

static dls_status_t cpu_event_check(int dev, void *native) {
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

static dls_status_t cpu_event_record(int dev, void *ev, void *stream) {
  cpu_event *e = ev;
  cpu_node *n = node_new();
  cpu_cmd *c = cmd_new(CMD_RECORD, 0);
  if (n == NULL || c == NULL) {
    node_unref(n);
    free(c);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory to record an event");
  }
  atomic_fetch_add(&n->refs, 1); /* one for the event, one for the command */
  c->u.rec.node = n;
  pthread_mutex_lock(&e->mu);
  cpu_node *old = e->latest;
  e->latest = n;
  pthread_mutex_unlock(&e->mu);
  node_unref(old);
  return submit(stream, c);
}

static dls_status_t cpu_stream_wait_event(int dev, void *stream, void *ev) {
  cpu_node *n = latest_ref(ev);
  if (n == NULL)
    return DLS_OK; /* never recorded: nothing to wait for */
  if (node_done(n)) {
    node_unref(n);
    return DLS_OK;
  }
  cpu_cmd *c = cmd_new(CMD_WAIT, 0);
  if (c == NULL) {
    node_unref(n);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory to wait on an event");
  }
  c->u.rec.node = n;
  return submit(stream, c);
}

static dls_status_t cpu_event_query(int dev, void *ev, int *out_complete) {
  cpu_node *n = latest_ref(ev);
  *out_complete = n == NULL || node_done(n);
  node_unref(n);
  return DLS_OK;
}

static dls_status_t cpu_event_synchronize(int dev, void *ev) {
  cpu_node *n = latest_ref(ev);
  if (n) {
    node_wait(n);
    node_unref(n);
  }
  return DLS_OK;
}

static dls_status_t cpu_event_elapsed(int dev, void *a, void *b, float *out_ms) {
  cpu_node *na = latest_ref(a), *nb = latest_ref(b);
  dls_status_t st = DLS_OK;
  if (na == NULL || nb == NULL)
    st = dls__fail(DLS_ERR_STATE, "cpu backend: %s event was never recorded", na == NULL ? "start" : "end");
  else if (!node_done(na) || !node_done(nb))
    st = dls__fail(DLS_ERR_STATE, "cpu backend: %s event has not completed yet (synchronize it first)",
                   node_done(na) ? "end" : "start");
  else
    *out_ms = (float)((double)((int64_t)nb->t_ns - (int64_t)na->t_ns) / 1e6);
  node_unref(na);
  node_unref(nb);
  return st;
}

/* ---- memory ---- */

static cpu_block *take(cpu_block **list, size_t size) {
  for (cpu_block **pp = list; *pp; pp = &(*pp)->next) {
    if ((*pp)->size == size) {
      cpu_block *b = *pp;
      *pp = b->next;
      return b;
    }
  }
  return NULL;
}

static dls_status_t cpu_mem_alloc(int dev, size_t size, void *stream, void **out) {
  if (size == 0) {
    *out = NULL;
    return DLS_OK;
  }
  if (size > SIZE_MAX - 2 * CPU_ALIGN)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: %zu bytes is more than can be allocated", size);
  size_t rsize = (size + CPU_ALIGN - 1) & ~(size_t)(CPU_ALIGN - 1);
  cpu_stream *s = stream;
  cpu_block *b = NULL;
  if (!g.debug_alloc) {
    pthread_mutex_lock(&g.mu);
    /* A block freed on this very stream is reusable at once: this stream's
     * later work runs after the free (as with CUDA's stream-ordered pools). */
    b = take(&s->pending, rsize);
    if (b == NULL && (b = take(&g.pool, rsize)) != NULL)
      g.pool_bytes -= rsize;
    if (b) {
      b->pending_on = NULL;
      b->state = BLOCK_LIVE;
    }
    pthread_mutex_unlock(&g.mu);
  }
  if (b == NULL) {
    b = aligned_alloc(CPU_ALIGN, CPU_ALIGN + rsize);
    if (b == NULL)
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for %zu bytes", size);
    memset(b, 0, sizeof *b);
    b->size = rsize;
    b->state = BLOCK_LIVE;
  }
  *out = block_data(b);
  return DLS_OK;
}

static dls_status_t cpu_mem_free(int dev, void *ptr, void *stream) {
  if (ptr == NULL)
    return DLS_OK;
  cpu_stream *s = stream;
  cpu_block *b = block_of(ptr);
  cpu_cmd *c = cmd_new(CMD_FREE, 0);
  if (c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory to queue a free");
  pthread_mutex_lock(&g.mu);
  b->state = BLOCK_PENDING;
  b->free_seq++;
  b->pending_on = s;
  b->next = s->pending;
  s->pending = b;
  c->u.fr.blk = b;
  c->u.fr.seq = b->free_seq;
  pthread_mutex_unlock(&g.mu);
  return submit(s, c);
}

static dls_status_t cpu_memcpy(int dev, void *dst, const void *src, size_t n, void *stream) {
  cpu_cmd *c = cmd_new(CMD_MEMCPY, 0);
  if (c) {
    c->u.cp.dst = dst;
    c->u.cp.src = src;
    c->u.cp.n = n;
  }
  return submit(stream, c);
}

static dls_status_t cpu_host_mapped_alloc(int dev, size_t size, void **out_host, void **out_device) {
  void *p = calloc(1, size);
  if (p == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for %zu mapped bytes", size);
  *out_host = *out_device = p;
  return DLS_OK;
}

static dls_status_t cpu_host_mapped_free(int dev, void *host) {
  free(host);
  return DLS_OK;
}

/* ---- code ---- */

static const char *const g_builtin_names[] = {"dls_fill", "dls_axpy_f32", "dls_axpy_f64", "dls_copy_strided",
                                              "dls_spin", "dls_latch",    "dls_empty"};
#define NBUILTIN (sizeof g_builtin_names / sizeof g_builtin_names[0])
static cpu_fn g_builtins[NBUILTIN];
static pthread_once_t g_builtins_once = PTHREAD_ONCE_INIT;

static void builtins_init(void) {
  for (size_t i = 0; i < NBUILTIN; i++) {
    g_builtins[i].fn = dls__cpu_builtin(g_builtin_names[i]);
    snprintf(g_builtins[i].name, sizeof g_builtins[i].name, "%s", g_builtin_names[i]);
  }
}

static dls_status_t cpu_builtin_function(int dev, const char *name, void **out) {
  pthread_once(&g_builtins_once, builtins_init);
  for (size_t i = 0; i < NBUILTIN; i++) {
    if (strcmp(g_builtin_names[i], name) == 0 && g_builtins[i].fn != NULL) {
      *out = &g_builtins[i];
      return DLS_OK;
    }
  }
  return dls__fail(DLS_ERR_NOT_FOUND, "cpu backend: no built-in named \"%s\"", name);
}

static dls_status_t cpu_host_function(int dev, const char *name, dls_host_kernel fn, void **out) {
  cpu_fn *f = calloc(1, sizeof *f);
  if (f == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a function");
  f->fn = fn;
  snprintf(f->name, sizeof f->name, "%s", name);
  atomic_init(&f->refs, 1);
  *out = f;
  return DLS_OK;
}

static dls_status_t cpu_host_function_destroy(int dev, void *fn) {
  fn_unref(fn); /* queued launches hold their own references */
  return DLS_OK;
}

static dls_status_t cpu_launch(int dev, void *function, void *stream, const dls_launch_config_t *cfg, void **params,
                               const uint32_t *sizes, int n) {
  size_t extra = ((size_t)n * sizeof(void *) + 15) & ~(size_t)15;
  for (int i = 0; i < n; i++)
    extra += ((size_t)sizes[i] + 15) & ~(size_t)15;
  cpu_cmd *c = cmd_new(CMD_LAUNCH, extra);
  if (c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a launch");
  cpu_fn *f = function;
  if (atomic_load(&f->refs) != 0)
    atomic_fetch_add(&f->refs, 1);
  c->u.launch.fn = f;
  c->u.launch.cfg = *cfg;
  c->u.launch.n = n;
  void **ptrs = (void **)(void *)c->data;
  unsigned char *p = c->data + (((size_t)n * sizeof(void *) + 15) & ~(size_t)15);
  for (int i = 0; i < n; i++) {
    memcpy(p, params[i], sizes[i]);
    ptrs[i] = p;
    p += ((size_t)sizes[i] + 15) & ~(size_t)15;
  }
  c->u.launch.ptrs = ptrs;
  return submit(stream, c);
}

static void cpu_shutdown(void) {
  pthread_mutex_lock(&g.mu);
  cpu_stream *d = g.dflt;
  g.dflt = NULL;
  pthread_mutex_unlock(&g.mu);
  if (d)
    cpu_stream_destroy(0, d);
  /* Waits for the streams told to exit. A stream still referenced (by the
   * buffer of an export its consumer has not released yet) keeps its idle
   * worker: joining it would hang. */
  pthread_mutex_lock(&g.mu);
  while (g.exiting > 0)
    pthread_cond_wait(&g.cv_exit, &g.mu);
  cpu_block *b = g.pool;
  g.pool = NULL;
  g.pool_bytes = 0;
  pthread_mutex_unlock(&g.mu);
  while (b) {
    cpu_block *next = b->next;
    free(b);
    b = next;
  }
}

const dls__backend dls__cpu_backend = {
    .version = DLS__BACKEND_VERSION,
    .size = sizeof(dls__backend),
    .name = "cpu",
    .device_type = kDLCPU,
    .probe = cpu_probe,
    .device_count = cpu_device_count,
    .shutdown = cpu_shutdown,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_default = cpu_stream_default,
    .stream_check = cpu_stream_check,
    .stream_synchronize = cpu_stream_synchronize,
    .stream_query = cpu_stream_query,
    .stream_wait_event = cpu_stream_wait_event,
    .stream_priority_range = cpu_priority_range,
    .host_callback = cpu_host_callback,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_check = cpu_event_check,
    .event_record = cpu_event_record,
    .event_query = cpu_event_query,
    .event_synchronize = cpu_event_synchronize,
    .event_elapsed_ms = cpu_event_elapsed,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .memcpy_async = cpu_memcpy,
    .host_mapped_alloc = cpu_host_mapped_alloc,
    .host_mapped_free = cpu_host_mapped_free,
    .module_load = NULL,
    .module_unload = NULL,
    .module_function = NULL,
    .builtin_function = cpu_builtin_function,
    .host_function = cpu_host_function,
    .host_function_destroy = cpu_host_function_destroy,
    .launch = cpu_launch,
};
