/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU rows of bench_c: worker-thread streams, and the hot paths beside the CPU backend's own calls.
 *
 * The hot-path anchors call the CPU backend's vtable directly, with the very
 * native streams, events and host function dlstream uses: what a row costs
 * above its anchor is dlstream's core (handles, use sets, the rule). */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* The anchor: the least a worker-thread stream must do per round trip,
 * hand one job to a thread and wait for its completion. */
typedef struct handoff {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long posted, done;
  bool quit;
  pthread_t thread;
} handoff;

static void *handoff_worker(void *p) {
  handoff *h = p;
  pthread_mutex_lock(&h->mu);
  for (;;) {
    while (h->posted == h->done && !h->quit)
      pthread_cond_wait(&h->cv, &h->mu);
    if (h->quit)
      break;
    h->done++;
    pthread_cond_broadcast(&h->cv);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

typedef struct cpu_ctx {
  handoff h;
  DLDevice device;
  dls_stream_t s1, s2;
  dls_event_t ev;
  dls_function_t tiny;
  /* The hot-path rows: the same objects as the backend sees them. */
  const dls__backend *be;
  void *ns1, *ns2, *nev, *ntiny;
  dls_buffer_t bx, by;
  void *px, *py;
} cpu_ctx;

static int tiny_kernel(const dls_launch_config_t *config, void *const *args, int nargs) {
  (void)config;
  (void)args;
  (void)nargs;
  return 0;
}

static int anchor_roundtrip(void *p, int n) {
  handoff *h = &((cpu_ctx *)p)->h;
  for (int i = 0; i < n; i++) {
    pthread_mutex_lock(&h->mu);
    long want = ++h->posted;
    pthread_cond_broadcast(&h->cv);
    while (h->done != want)
      pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
  }
  return 0;
}

static int dls_roundtrip(void *p, int n) {
  cpu_ctx *c = p;
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  for (int i = 0; i < n; i++) {
    DLS_CHECK(dls_launch(c->tiny, c->s1, &cfg, NULL, 0));
    DLS_CHECK(dls_stream_synchronize(c->s1));
  }
  return 0;
}

static int cpu_record_wait(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    DLS_CHECK(dls_event_record(c->ev, c->s1));
    DLS_CHECK(dls_stream_wait_event(c->s2, c->ev));
  }
  return 0;
}

static int cpu_acquire_release(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_stream_t s;
    DLS_CHECK(dls_stream_acquire(c->device, &s));
    DLS_CHECK(dls_stream_destroy(s));
  }
  return 0;
}

#define CPU_SPIN_NS 1000000ull /* 1 ms */

static int cpu_spin_serial(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < 4; k++)
      DLS_CHECK(dls_spin(c->s1, CPU_SPIN_NS));
    DLS_CHECK(dls_stream_synchronize(c->s1));
  }
  return 0;
}

static int cpu_spin_group(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_group_t g;
    DLS_CHECK(dls_group_begin(c->s1, &g));
    for (int k = 0; k < 4; k++) {
      dls_stream_t b;
      DLS_CHECK(dls_group_branch(g, &b));
      DLS_CHECK(dls_spin(b, CPU_SPIN_NS));
    }
    DLS_CHECK(dls_group_end(g));
    DLS_CHECK(dls_stream_synchronize(c->s1));
  }
  return 0;
}

/* ---- the hot paths, dlstream beside the backend's own calls ---- */

#define ALLOC_BYTES ((size_t)1 << 20)

static int cpu_raw_alloc_free(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    void *ptr;
    DLS_CHECK(c->be->mem_alloc(c->be, 0, ALLOC_BYTES, c->ns1, &ptr));
    DLS_CHECK(c->be->mem_free(c->be, 0, ptr, c->ns1));
  }
  return 0;
}

static int cpu_dls_alloc_free(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_buffer_t b;
    DLS_CHECK(dls_buffer_alloc(c->s1, ALLOC_BYTES, &b));
    DLS_CHECK(dls_buffer_free(b));
  }
  return 0;
}

static int cpu_raw_alloc_use_free(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    void *ptr;
    DLS_CHECK(c->be->mem_alloc(c->be, 0, ALLOC_BYTES, c->ns1, &ptr));
    DLS_CHECK(c->be->event_record(c->be, 0, c->nev, c->ns2));
    DLS_CHECK(c->be->stream_wait_event(c->be, 0, c->ns1, c->nev));
    DLS_CHECK(c->be->mem_free(c->be, 0, ptr, c->ns1));
  }
  return 0;
}

static int cpu_dls_alloc_use_free(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_buffer_t b;
    DLS_CHECK(dls_buffer_alloc(c->s1, ALLOC_BYTES, &b));
    DLS_CHECK(dls_buffer_record_use(b, c->s2, DLS_ACCESS_WRITE));
    DLS_CHECK(dls_buffer_free(b));
  }
  return 0;
}

static int cpu_raw_event_create(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    void *e;
    DLS_CHECK(c->be->event_create(c->be, 0, DLS_EVENT_DEFAULT, &e));
    DLS_CHECK(c->be->event_destroy(c->be, 0, e));
  }
  return 0;
}

static int cpu_dls_event_create(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_event_t e;
    DLS_CHECK(dls_event_create(c->device, DLS_EVENT_DEFAULT, &e));
    DLS_CHECK(dls_event_destroy(e));
  }
  return 0;
}

static int cpu_raw_launch_buffers(void *p, int n) {
  cpu_ctx *c = p;
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  unsigned long long count = 256;
  float a = 2.0f;
  void *params[4] = {&count, &a, &c->px, &c->py};
  const uint32_t sizes[4] = {8, 4, sizeof(void *), sizeof(void *)};
  for (int i = 0; i < n; i++)
    DLS_CHECK(c->be->launch(c->be, 0, c->ntiny, c->ns1, &cfg, params, sizes, 4));
  return 0;
}

static int cpu_dls_launch_buffers(void *p, int n) {
  cpu_ctx *c = p;
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  dls_arg_t args[4] = {dls_arg_u64(256), dls_arg_f32(2.0f), dls_arg_buffer(c->bx), dls_arg_buffer(c->by)};
  for (int i = 0; i < n; i++)
    DLS_CHECK(dls_launch(c->tiny, c->s1, &cfg, args, 4));
  return 0;
}

static int cpu_drain(void *p) {
  cpu_ctx *c = p;
  DLS_CHECK(dls_stream_synchronize(c->s1));
  DLS_CHECK(dls_stream_synchronize(c->s2));
  return 0;
}

/* The backend's own objects for the anchors: its native streams, one
 * native event and a host function of its own. */
static const char *cpu_natives(cpu_ctx *c) {
  c->be = &dls__cpu_backend;
  if (dls_stream_native(c->s1, &c->ns1) != DLS_OK || dls_stream_native(c->s2, &c->ns2) != DLS_OK ||
      dls_buffer_alloc(c->s1, 1024, &c->bx) != DLS_OK || dls_buffer_alloc(c->s1, 1024, &c->by) != DLS_OK ||
      dls_buffer_ptr(c->bx, &c->px) != DLS_OK || dls_buffer_ptr(c->by, &c->py) != DLS_OK)
    return dls_last_error();
  if (c->be->event_create(c->be, 0, DLS_EVENT_DEFAULT, &c->nev) != DLS_OK ||
      c->be->host_function(c->be, 0, "bench_tiny_raw", tiny_kernel, &c->ntiny) != DLS_OK)
    return dls_last_error();
  return NULL;
}

const char *run_cpu(void) {
  static char why[600];
  cpu_ctx c;
  memset(&c, 0, sizeof c);
  c.device = dls_cpu();
  if (dls_stream_create(c.device, NULL, &c.s1) != DLS_OK || dls_stream_create(c.device, NULL, &c.s2) != DLS_OK ||
      dls_event_create(c.device, DLS_EVENT_DEFAULT, &c.ev) != DLS_OK ||
      dls_function_from_host(c.device, "bench_tiny", tiny_kernel, &c.tiny) != DLS_OK) {
    snprintf(why, sizeof why, "%s", dls_last_error());
    return why;
  }
  pthread_mutex_init(&c.h.mu, NULL);
  pthread_cond_init(&c.h.cv, NULL);
  if (pthread_create(&c.h.thread, NULL, handoff_worker, &c.h) != 0)
    return "pthread_create failed";
  const char *e = cpu_natives(&c);
  if (e != NULL) {
    snprintf(why, sizeof why, "%s", e);
    return why;
  }
  add_row("CPU", "alloc+free 1 MiB, stream-ordered", "backend mem_alloc+mem_free", cpu_raw_alloc_free,
          cpu_dls_alloc_free, cpu_drain, &c, 2000);
  add_row("CPU", "alloc+use on 2nd stream+free 1 MiB", "backend mem_alloc+event_record+stream_wait_event+mem_free",
          cpu_raw_alloc_use_free, cpu_dls_alloc_use_free, cpu_drain, &c, 2000);
  add_row("CPU", "event create+destroy", "backend event_create+event_destroy", cpu_raw_event_create,
          cpu_dls_event_create, cpu_drain, &c, 2000);
  add_row("CPU", "launch host kernel, 4 args (buffers)", "backend launch", cpu_raw_launch_buffers,
          cpu_dls_launch_buffers, cpu_drain, &c, 2000);
  add_row("CPU", "stream round trip: tiny host kernel + synchronize", "mutex+condvar hand-off to a thread",
          anchor_roundtrip, dls_roundtrip, cpu_drain, &c, 2000);
  add_row("CPU", "event record+wait", NULL, NULL, cpu_record_wait, cpu_drain, &c, 2000);
  add_row("CPU", "stream: pooled acquire+destroy", NULL, NULL, cpu_acquire_release, cpu_drain, &c, 2000);
  add_row("CPU", "fork/join: 4 x 1 ms spin on 4 worker-thread branches (ratio = 1/speedup)",
          "4 x 1 ms spin on one stream", cpu_spin_serial, cpu_spin_group, cpu_drain, &c, 20);
  pthread_mutex_lock(&c.h.mu);
  c.h.quit = true;
  pthread_cond_broadcast(&c.h.cv);
  pthread_mutex_unlock(&c.h.mu);
  pthread_join(c.h.thread, NULL);
  c.be->host_function_destroy(c.be, 0, c.ntiny);
  c.be->event_destroy(c.be, 0, c.nev);
  dls_buffer_free(c.bx);
  dls_buffer_free(c.by);
  dls_function_destroy(c.tiny);
  dls_event_destroy(c.ev);
  dls_stream_destroy(c.s1);
  dls_stream_destroy(c.s2);
  return NULL;
}
