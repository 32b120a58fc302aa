/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU backend: every stream is a worker thread draining a FIFO, events
 * are completion records (cpu_event.c), memory is a stream-ordered caching
 * pool (cpu_memory.c), and a capturing stream records instead of running
 * (cpu_capture.c). This file: commands, workers, streams, code, the vtable.
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

#include "backend/cpu_internal.h"
#include "kernels/builtin_table.h"

/* The CPU twin of built-in k (kernels/builtins_cpu.c). */
DLS__INTERNAL dls_host_kernel dls__cpu_builtin(size_t k);

#define g dls__cpu_g

static void fn_unref(cpu_fn *f) {
  if (atomic_load(&f->refs) != 0 && atomic_fetch_sub(&f->refs, 1) == 1)
    free(f);
}

void dls__cpu_fn_ref(const cpu_fn *f) {
  cpu_fn *m = (cpu_fn *)f;
  if (atomic_load(&m->refs) != 0)
    atomic_fetch_add(&m->refs, 1);
}

cpu_globals dls__cpu_g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv_exit = PTHREAD_COND_INITIALIZER, .ndevices = 1};

uint64_t dls__cpu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- event records ---- */

cpu_node *dls__cpu_node_new(void) {
  cpu_node *n = calloc(1, sizeof *n);
  if (n == NULL)
    return NULL;
  atomic_init(&n->refs, 1);
  pthread_mutex_init(&n->mu, NULL);
  pthread_cond_init(&n->cv, NULL);
  return n;
}

void dls__cpu_node_unref(cpu_node *n) {
  if (n && atomic_fetch_sub(&n->refs, 1) == 1) {
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
    free(n);
  }
}

static void node_complete(cpu_node *n) {
  pthread_mutex_lock(&n->mu);
  n->t_ns = dls__cpu_now_ns();
  n->done = 1;
  pthread_cond_broadcast(&n->cv);
  pthread_mutex_unlock(&n->mu);
}

void dls__cpu_node_wait(cpu_node *n) {
  pthread_mutex_lock(&n->mu);
  while (!n->done)
    pthread_cond_wait(&n->cv, &n->mu);
  pthread_mutex_unlock(&n->mu);
}

int dls__cpu_node_done(cpu_node *n) {
  pthread_mutex_lock(&n->mu);
  int d = n->done;
  pthread_mutex_unlock(&n->mu);
  return d;
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
    dls__cpu_node_unref(c->u.rec.node);
    break;
  case CMD_WAIT:
    dls__cpu_node_wait(c->u.rec.node);
    dls__cpu_node_unref(c->u.rec.node);
    break;
  case CMD_CALLBACK:
    c->u.cb.fn(c->u.cb.user);
    break;
  case CMD_MEMCPY:
    memmove(c->u.cp.dst, c->u.cp.src, c->u.cp.n);
    break;
  case CMD_FREE:
    dls__cpu_exec_free(s, c->u.fr.blk, c->u.fr.seq);
    break;
  default:
    break;
  }
}

void dls__cpu_cmd_discard(cpu_cmd *c) {
  if (c == NULL)
    return;
  if (c->type == CMD_LAUNCH)
    fn_unref((cpu_fn *)c->u.launch.fn);
  free(c);
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

cpu_cmd *dls__cpu_cmd_new(int type, size_t extra) {
  cpu_cmd *c = calloc(1, sizeof *c + extra);
  if (c) {
    c->type = type;
    c->extra = extra;
  }
  return c;
}

/* Appends a command to a worker's FIFO; `counted` commands are what
 * synchronize waits for. */
static void fifo_push(cpu_stream *s, cpu_cmd *c, int counted) {
  pthread_mutex_lock(&s->mu);
  if (s->tail)
    s->tail->next = c;
  else
    s->head = c;
  s->tail = c;
  s->submitted += (uint64_t)counted;
  pthread_cond_signal(&s->cv_work);
  pthread_mutex_unlock(&s->mu);
}

dls_status_t dls__cpu_enqueue(cpu_stream *s, cpu_cmd *c) {
  if (c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a stream command");
  if (g.sync_mode) {
    exec(s, c);
    free(c);
    return DLS_OK;
  }
  fifo_push(s, c, 1);
  return DLS_OK;
}

/* Queues a command, or records it when the stream is capturing (steals c). */
dls_status_t dls__cpu_submit(cpu_stream *s, cpu_cmd *c) {
  if (c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a stream command");
  pthread_mutex_lock(&g.mu);
  if (s->cap != NULL) {
    dls_status_t st = dls__cpu_capture_append(s, c);
    pthread_mutex_unlock(&g.mu);
    return st;
  }
  pthread_mutex_unlock(&g.mu);
  return dls__cpu_enqueue(s, c);
}

/* Fails (and invalidates the capture, as CUDA does) when `s` is capturing:
 * `what` cannot be recorded or would look at work that does not run. */
dls_status_t dls__cpu_refuse_capturing(cpu_stream *s, const char *what) {
  pthread_mutex_lock(&g.mu);
  cpu_capture *cap = s->cap;
  uint64_t id = cap ? cap->id : 0;
  if (cap != NULL)
    dls__cpu_capture_invalidate(cap, what);
  pthread_mutex_unlock(&g.mu);
  if (cap == NULL)
    return DLS_OK;
  return dls__fail(DLS_ERR_STATE, "cpu backend: %s on stream %p, which is capturing (capture %llu, now invalidated)",
                   what, (void *)s, (unsigned long long)id);
}

/* ---- life ---- */

static int env_flag(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] == '1';
}

static dls_status_t cpu_probe(const dls__backend *be) {
  g.sync_mode = env_flag("DLSTREAM_CPU_SYNC");
  g.debug_alloc = env_flag("DLSTREAM_DEBUG_ALLOC");
  const char *v = getenv("DLSTREAM_CPU_DEVICES");
  int n = v != NULL ? atoi(v) : 1;
  if (n < 1 || n > CPU_MAX_DEVICES)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "cpu backend: DLSTREAM_CPU_DEVICES=%s: expected 1 to %d", v,
                     CPU_MAX_DEVICES);
  g.ndevices = n;
  return DLS_OK;
}

static dls_status_t cpu_device_count(const dls__backend *be, int *out) {
  *out = g.ndevices;
  return DLS_OK;
}

dls_status_t dls__cpu_stream_create(const dls__backend *be, int dev, unsigned flags, int priority, void **out) {
  (void)flags;
  (void)priority;
  cpu_stream *s = calloc(1, sizeof *s);
  if (s == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a stream");
  s->magic = CPU_STREAM_MAGIC;
  s->dev = dev;
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

dls_status_t dls__cpu_stream_destroy(const dls__backend *be, int dev, void *native) {
  (void)dev;
  cpu_stream *s = native;
  if (s == NULL)
    return DLS_OK;
  pthread_mutex_lock(&g.mu);
  if (s->cap != NULL)
    dls__cpu_capture_drop_stream(s);
  pthread_mutex_unlock(&g.mu);
  if (g.sync_mode) {
    pthread_mutex_lock(&g.mu);
    link_remove(&g.streams, &s->link);
    pthread_mutex_unlock(&g.mu);
    stream_free(s);
    return DLS_OK;
  }
  /* The worker drains what is queued, then frees the stream: no host wait. */
  cpu_cmd *c = dls__cpu_cmd_new(CMD_EXIT, 0);
  if (c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory to stop a stream");
  pthread_mutex_lock(&g.mu);
  g.exiting++;
  pthread_mutex_unlock(&g.mu);
  fifo_push(s, c, 0); /* not counted: synchronize never waits for it */
  return DLS_OK;
}

static dls_status_t cpu_stream_default(const dls__backend *be, int dev, int kind, void **out) {
  (void)kind;
  pthread_mutex_lock(&g.mu);
  cpu_stream *s = g.dflt[dev];
  pthread_mutex_unlock(&g.mu);
  if (s == NULL) {
    void *n;
    DLS__TRY(dls__cpu_stream_create(be, dev, 0, 0, &n));
    pthread_mutex_lock(&g.mu);
    if (g.dflt[dev] == NULL) {
      g.dflt[dev] = n;
      n = NULL;
    }
    s = g.dflt[dev];
    pthread_mutex_unlock(&g.mu);
    if (n)
      dls__cpu_stream_destroy(be, dev, n);
  }
  *out = s;
  return DLS_OK;
}

static dls_status_t cpu_stream_check(const dls__backend *be, int dev, void *native) {
  if (native == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "the CPU backend has no NULL stream (use dls_stream_default for the default stream)");
  pthread_mutex_lock(&g.mu);
  bool live = link_has(g.streams, native);
  int owner = live ? ((cpu_stream *)native)->dev : -1;
  pthread_mutex_unlock(&g.mu);
  if (!live)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "native %p is not a live CPU stream of this process", native);
  if (owner != dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "native %p is a stream of cpu:%d, not of cpu:%d", native, owner, dev);
  return DLS_OK;
}

static dls_status_t cpu_stream_synchronize(const dls__backend *be, int dev, void *native) {
  (void)dev;
  cpu_stream *s = native;
  DLS__TRY(dls__cpu_refuse_capturing(s, "synchronize"));
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

static dls_status_t cpu_stream_query(const dls__backend *be, int dev, void *native, int *out_idle) {
  (void)dev;
  cpu_stream *s = native;
  DLS__TRY(dls__cpu_refuse_capturing(s, "query"));
  pthread_mutex_lock(&s->mu);
  *out_idle = s->completed == s->submitted;
  pthread_mutex_unlock(&s->mu);
  return DLS_OK;
}

static dls_status_t cpu_priority_range(const dls__backend *be, int dev, int *least, int *greatest) {
  (void)dev;
  /* Accepted for portability with CUDA code; the CPU backend does not rank streams. */
  *least = 0;
  *greatest = -5;
  return DLS_OK;
}

static dls_status_t cpu_host_callback(const dls__backend *be, int dev, void *native, dls_host_fn fn, void *user) {
  (void)dev;
  cpu_cmd *c = dls__cpu_cmd_new(CMD_CALLBACK, 0);
  if (c) {
    c->u.cb.fn = fn;
    c->u.cb.user = user;
  }
  return dls__cpu_submit(native, c);
}

/* ---- code ---- */

#define CPU_BUILTIN_NAME(id, name, ...) name,
static const char *const g_builtin_names[DLS__NBUILTIN] = {DLS__BUILTINS(CPU_BUILTIN_NAME)};
#undef CPU_BUILTIN_NAME
static cpu_fn g_builtins[DLS__NBUILTIN];
static pthread_once_t g_builtins_once = PTHREAD_ONCE_INIT;

static void builtins_init(void) {
  for (size_t i = 0; i < DLS__NBUILTIN; i++) {
    g_builtins[i].fn = dls__cpu_builtin(i);
    snprintf(g_builtins[i].name, sizeof g_builtins[i].name, "%s", g_builtin_names[i]);
  }
}

static dls_status_t cpu_builtin_function(const dls__backend *be, int dev, const char *name, void **out) {
  (void)dev;
  pthread_once(&g_builtins_once, builtins_init);
  for (size_t i = 0; i < DLS__NBUILTIN; i++) {
    if (strcmp(g_builtin_names[i], name) == 0 && g_builtins[i].fn != NULL) {
      *out = &g_builtins[i];
      return DLS_OK;
    }
  }
  return dls__fail(DLS_ERR_NOT_FOUND, "cpu backend: no built-in named \"%s\"", name);
}

static dls_status_t cpu_host_function(const dls__backend *be, int dev, const char *name, dls_host_kernel fn,
                                      void **out) {
  (void)dev;
  cpu_fn *f = calloc(1, sizeof *f);
  if (f == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a function");
  f->fn = fn;
  snprintf(f->name, sizeof f->name, "%s", name);
  atomic_init(&f->refs, 1);
  *out = f;
  return DLS_OK;
}

static dls_status_t cpu_host_function_destroy(const dls__backend *be, int dev, void *fn) {
  (void)dev;
  fn_unref(fn); /* queued launches hold their own references */
  return DLS_OK;
}

static dls_status_t cpu_launch(const dls__backend *be, int dev, void *function, void *stream,
                               const dls_launch_config_t *cfg, void **params, const uint32_t *sizes, int n) {
  (void)dev;
  size_t extra = ((size_t)n * sizeof(void *) + 15) & ~(size_t)15;
  for (int i = 0; i < n; i++)
    extra += ((size_t)sizes[i] + 15) & ~(size_t)15;
  cpu_cmd *c = dls__cpu_cmd_new(CMD_LAUNCH, extra);
  if (c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for a launch");
  dls__cpu_fn_ref(function);
  c->u.launch.fn = function;
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
  return dls__cpu_submit(stream, c);
}

static void cpu_shutdown(const dls__backend *be) {
  for (int d = 0; d < CPU_MAX_DEVICES; d++) {
    pthread_mutex_lock(&g.mu);
    cpu_stream *s = g.dflt[d];
    g.dflt[d] = NULL;
    pthread_mutex_unlock(&g.mu);
    if (s)
      dls__cpu_stream_destroy(be, d, s);
  }
  /* Waits for the streams told to exit. A stream still referenced (by the
   * buffer of an export its consumer has not released yet) keeps its idle
   * worker: joining it would hang. */
  pthread_mutex_lock(&g.mu);
  while (g.exiting > 0)
    pthread_cond_wait(&g.cv_exit, &g.mu);
  pthread_mutex_unlock(&g.mu);
  dls__cpu_pool_drain();
  dls__cpu_captures_shutdown();
}

const dls__backend dls__cpu_backend = {
    .version = DLS__BACKEND_VERSION,
    .size = sizeof(dls__backend),
    .name = "cpu",
    .device_type = kDLCPU,
    .probe = cpu_probe,
    .device_count = cpu_device_count,
    .shutdown = cpu_shutdown,
    .stream_create = dls__cpu_stream_create,
    .stream_destroy = dls__cpu_stream_destroy,
    .stream_default = cpu_stream_default,
    .stream_check = cpu_stream_check,
    .stream_synchronize = cpu_stream_synchronize,
    .stream_query = cpu_stream_query,
    .stream_wait_event = dls__cpu_stream_wait_event,
    .stream_priority_range = cpu_priority_range,
    .host_callback = cpu_host_callback,
    .event_create = dls__cpu_event_create,
    .event_destroy = dls__cpu_event_destroy,
    .event_check = dls__cpu_event_check,
    .event_record = dls__cpu_event_record,
    .event_query = dls__cpu_event_query,
    .event_synchronize = dls__cpu_event_synchronize,
    .event_elapsed_ms = dls__cpu_event_elapsed,
    .mem_alloc = dls__cpu_mem_alloc,
    .mem_free = dls__cpu_mem_free,
    .memcpy_async = dls__cpu_memcpy,
    .host_mapped_alloc = dls__cpu_host_mapped_alloc,
    .host_mapped_free = dls__cpu_host_mapped_free,
    .module_load = NULL,
    .module_unload = NULL,
    .module_function = NULL,
    .builtin_function = cpu_builtin_function,
    .host_function = cpu_host_function,
    .host_function_destroy = cpu_host_function_destroy,
    .launch = cpu_launch,
    .stream_capture_status = dls__cpu_capture_status,
    .stream_begin_capture = dls__cpu_begin_capture,
    .stream_end_capture = dls__cpu_end_capture,
    .graph_launch = dls__cpu_graph_launch,
    .graph_destroy = dls__cpu_graph_destroy,
    .thread_capture_mode = NULL,
    .peer_access = dls__cpu_peer_access,
    .memcpy_peer_async = dls__cpu_memcpy_peer,
};
