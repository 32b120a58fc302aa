/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU backend's memory: a stream-ordered caching pool (a free's command hands its block to the pool: cpu_queue.c),
 * capture-owned blocks, mapped memory and copies. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_internal.h"

#define g dls__cpu_g

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

static cpu_block *block_new(size_t rsize, int state) {
  cpu_block *b = aligned_alloc(CPU_ALIGN, CPU_ALIGN + rsize);
  if (b != NULL) {
    memset(b, 0, sizeof *b);
    b->size = rsize;
    b->state = state;
  }
  return b;
}

/* On a capturing stream the block belongs to the capture (then its graph):
 * its address is what every replay uses. */
dls_status_t dls__cpu_mem_alloc(const dls__backend *be, int dev, size_t size, void *stream, void **out) {
  (void)dev;
  if (size == 0) {
    *out = NULL;
    return DLS_OK;
  }
  if (size > SIZE_MAX - 2 * CPU_ALIGN)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: %zu bytes is more than can be allocated", size);
  size_t rsize = (size + CPU_ALIGN - 1) & ~(size_t)(CPU_ALIGN - 1);
  cpu_stream *s = stream;
  cpu_block *b = NULL;
  pthread_mutex_lock(&g.mu);
  cpu_capture *cap = s->cap;
  if (cap != NULL) {
    b = block_new(rsize, BLOCK_GRAPH);
    if (b != NULL) {
      b->cap_id = cap->id;
      b->next = cap->blocks;
      cap->blocks = b;
    }
  } else if (!g.debug_alloc) {
    /* A block freed on this very stream is reusable at once: this stream's
     * later work runs after the free (as with CUDA's stream-ordered pools). */
    b = take(&s->pending, rsize);
    if (b == NULL && (b = take(&g.pool, rsize)) != NULL)
      g.pool_bytes -= rsize;
    if (b) {
      b->pending_on = NULL;
      b->state = BLOCK_LIVE;
    }
  }
  pthread_mutex_unlock(&g.mu);
  if (b == NULL && cap == NULL)
    b = block_new(rsize, BLOCK_LIVE);
  if (b == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for %zu bytes", size);
  *out = cpu_block_data(b);
  return DLS_OK;
}

dls_status_t dls__cpu_mem_free(const dls__backend *be, int dev, void *ptr, void *stream) {
  (void)dev;
  if (ptr == NULL)
    return DLS_OK;
  cpu_stream *s = stream;
  cpu_block *b = cpu_block_of(ptr);
  pthread_mutex_lock(&g.mu);
  int state = b->state;
  bool capturing = s->cap != NULL;
  if (state == BLOCK_GRAPH && capturing && s->cap->id == b->cap_id) {
    b->temp = true; /* freed in its own capture: a graph free (a temporary of every replay) */
    pthread_mutex_unlock(&g.mu);
    return DLS_OK;
  }
  pthread_mutex_unlock(&g.mu);
  if (capturing)
    return dls__cpu_refuse_capturing(s, "free of memory allocated outside the capture");
  cpu_cmd *c = dls__cpu_cmd_new(CMD_FREE, 0);
  if (c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory to queue a free");
  pthread_mutex_lock(&g.mu);
  if (state == BLOCK_GRAPH) {
    /* After its capture: the free of the latest replay's instance of a graph output, in stream order. The graph
     * no longer keeps it; if the graph is gone when the free runs, the block goes then (cpu_queue.c). */
    b->outstanding = false;
    b->frees_queued++;
  } else {
    b->state = BLOCK_PENDING;
    b->free_seq++;
    b->pending_on = s;
    b->next = s->pending;
    s->pending = b;
  }
  c->u.fr.blk = b;
  c->u.fr.seq = b->free_seq;
  pthread_mutex_unlock(&g.mu);
  return dls__cpu_enqueue(s, c);
}

dls_status_t dls__cpu_memcpy(const dls__backend *be, int dev, void *dst, const void *src, size_t n, void *stream) {
  (void)dev;
  cpu_cmd *c = dls__cpu_cmd_new(CMD_MEMCPY, 0);
  if (c) {
    c->u.cp.dst = dst;
    c->u.cp.src = src;
    c->u.cp.n = n;
  }
  return dls__cpu_submit(stream, c);
}

dls_status_t dls__cpu_host_mapped_alloc(const dls__backend *be, int dev, size_t size, void **out_host,
                                        void **out_device) {
  (void)dev;
  void *p = calloc(1, size);
  if (p == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "cpu backend: out of host memory for %zu mapped bytes", size);
  *out_host = *out_device = p;
  return DLS_OK;
}

dls_status_t dls__cpu_host_mapped_free(const dls__backend *be, int dev, void *host) {
  (void)dev;
  free(host);
  return DLS_OK;
}

/* Every CPU device addresses all host memory. */
dls_status_t dls__cpu_peer_access(const dls__backend *be, int dev, int peer, int *out_can) {
  (void)dev;
  (void)peer;
  *out_can = 1;
  return DLS_OK;
}

dls_status_t dls__cpu_memcpy_peer(const dls__backend *be, int dev, void *dst, int src_dev, const void *src, size_t n,
                                  void *stream) {
  (void)src_dev;
  return dls__cpu_memcpy(be, dev, dst, src, n, stream);
}


void dls__cpu_pool_drain(void) {
  pthread_mutex_lock(&g.mu);
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
