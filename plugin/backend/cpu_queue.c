/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU backend's queue engine: every stream is a worker thread draining a FIFO of commands; event records; what
 * running each command does, a free handing its block to the pool included. DLSTREAM_CPU_SYNC=1 runs every command
 * inline on the calling thread (no workers); DLSTREAM_CPU_JITTER=<µs> makes each worker wait a random while before
 * every other command, so that a test which assumes one stream runs ahead of another fails often, not once a month. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu_queue.h"

#define g dls__cpu_g

#define CPU_POOL_LIMIT ((size_t)256 << 20) /* idle bytes kept before returning to the system */

void dls__cpu_fn_unref(cpu_fn *f) {
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

/* ---- the pool: a block a stream reached the free of ---- */

void dls__cpu_block_release(cpu_block *b) {
  if (g.debug_alloc)
    memset(cpu_block_data(b), 0xDB, b->size);
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
  if (b->state == BLOCK_GRAPH) { /* an instance's free (free_instance) */
    bool last = --b->frees_queued == 0 && b->orphan && !b->outstanding;
    pthread_mutex_unlock(&g.mu);
    if (last)
      dls__cpu_block_release(b);
    return;
  }
  if (b->state == BLOCK_PENDING && b->free_seq == seq && b->pending_on == s) {
    unlink_pending(s, b);
    b->pending_on = NULL;
    if (g.debug_alloc || g.pool_bytes + b->size > CPU_POOL_LIMIT) {
      pthread_mutex_unlock(&g.mu);
      dls__cpu_block_release(b);
      return;
    }
    b->state = BLOCK_POOLED;
    b->next = g.pool;
    g.pool = b;
    g.pool_bytes += b->size;
  }
  pthread_mutex_unlock(&g.mu);
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

/* Half the commands wait a random 0 to g.jitter_us µs first (the seed is the thread's own). */
static void jitter(void) {
  static _Thread_local unsigned seed;
  if (seed == 0)
    seed = (unsigned)(uintptr_t)&seed ^ (unsigned)time(NULL) ^ 1u;
  int r = rand_r(&seed) % (2 * g.jitter_us + 1);
  if (r <= g.jitter_us)
    nanosleep(&(struct timespec){0, (long)r * 1000}, NULL);
}

static void exec(cpu_stream *s, cpu_cmd *c) {
  if (g.jitter_us > 0)
    jitter();
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
    dls__cpu_fn_unref((cpu_fn *)c->u.launch.fn);
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
    exec_free(s, c->u.fr.blk, c->u.fr.seq);
    break;
  default:
    break;
  }
}

void dls__cpu_cmd_discard(cpu_cmd *c) {
  if (c == NULL)
    return;
  if (c->type == CMD_LAUNCH)
    dls__cpu_fn_unref((cpu_fn *)c->u.launch.fn);
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

/* ---- streams ---- */

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

dls_status_t dls__cpu_queue_end(cpu_stream *s) {
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
