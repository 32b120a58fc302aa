/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU backend: every stream is a worker thread draining a FIFO (the queue engine, cpu_queue.c), events
 * are completion records (cpu_event.c), memory is a stream-ordered caching
 * pool (cpu_memory.c), and a capturing stream records instead of running
 * (cpu_capture.c). This file: the backend's life, streams, code, the vtable.
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

#include "backend/cpu_internal.h"
#include "kernels/builtin_table.h"

/* The CPU twin of built-in k (kernels/builtins_cpu.c). */
DLS__INTERNAL dls_host_kernel dls__cpu_builtin(size_t k);

#define g dls__cpu_g

/* ---- life ---- */

static int env_flag(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] == '1';
}

static dls_status_t cpu_probe(const dls__backend *be) {
  g.sync_mode = env_flag("DLSTREAM_CPU_SYNC");
  g.debug_alloc = env_flag("DLSTREAM_DEBUG_ALLOC");
  const char *j = getenv("DLSTREAM_CPU_JITTER");
  char *end = NULL;
  long us = j != NULL && j[0] != '\0' ? strtol(j, &end, 10) : 0;
  if (j != NULL && j[0] != '\0' && (*end != '\0' || us < 0 || us > 100000))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "cpu backend: DLSTREAM_CPU_JITTER=%s: expected microseconds, 0 to 100000",
                     j);
  g.jitter_us = (int)us;
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

static dls_status_t cpu_stream_destroy(const dls__backend *be, int dev, void *native) {
  (void)dev;
  cpu_stream *s = native;
  if (s == NULL)
    return DLS_OK;
  pthread_mutex_lock(&g.mu);
  if (s->cap != NULL)
    dls__cpu_capture_drop_stream(s);
  pthread_mutex_unlock(&g.mu);
  return dls__cpu_queue_end(s);
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
      cpu_stream_destroy(be, dev, n);
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
static const char *const g_builtin_names[DLS__NKERNEL] = {DLS__KERNELS(CPU_BUILTIN_NAME)};
#undef CPU_BUILTIN_NAME
static cpu_fn g_builtins[DLS__NKERNEL]; /* the built-ins and the core's twins (kernels/builtin_table.h) */
static pthread_once_t g_builtins_once = PTHREAD_ONCE_INIT;

static void builtins_init(void) {
  for (size_t i = 0; i < DLS__NKERNEL; i++) {
    g_builtins[i].fn = dls__cpu_builtin(i);
    snprintf(g_builtins[i].name, sizeof g_builtins[i].name, "%s", g_builtin_names[i]);
  }
}

static dls_status_t cpu_builtin_function(const dls__backend *be, int dev, const char *name, void **out) {
  (void)dev;
  pthread_once(&g_builtins_once, builtins_init);
  for (size_t i = 0; i < DLS__NKERNEL; i++) {
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
  dls__cpu_fn_unref(fn); /* queued launches hold their own references */
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
      cpu_stream_destroy(be, d, s);
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
    .stream_destroy = cpu_stream_destroy,
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
