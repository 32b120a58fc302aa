/* SPDX-License-Identifier: Apache-2.0 */
/* What each side of memory shared between processes keeps: the exporter's gate pages (one per device, a word per
 * export whose import is not closed yet) and the importer's mappings of other processes' allocations.
 *
 * Why a word and not an event for the import's close: a stream's wait on an event takes the record the event holds
 * when the wait is queued, and the exporter's free may be queued before the importer closed (or even imported), when
 * the importer's event holds no record and the wait would pass at once. A wait for a word to reach a value
 * (cuStreamWaitValue32) waits for the write whenever it comes. Each export takes a word and the word's next value;
 * the import's close writes that value after its uses (cuStreamWriteValue32, fenced), and the exporter's free waits
 * for it. A word is taken again only once its wait passed, so its values only grow. */
#include <stdlib.h>
#include <string.h>

#include "core/ipc_gates.h"

#define GATE_SLOTS 4096

typedef struct gate_page {
  struct gate_page *next;
  dls__device *dev;
  void *ptr;                       /* GATE_SLOTS 32-bit words of device memory */
  uint8_t bytes[DLS__IPC_BYTES];   /* the page's interprocess bytes */
  uint32_t values[GATE_SLOTS];     /* each word's latest value (what it holds once its import closed) */
  bool taken[GATE_SLOTS];
  uint32_t next_slot;              /* where the search for a free word starts */
} gate_page;

struct dls__ipc_map {
  struct dls__ipc_map *next;
  dls__device *dev;
  uint8_t bytes[DLS__IPC_BYTES];
  void *base;
  int refs;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* pages and mappings */
static gate_page *g_pages;
static dls__ipc_map *g_maps;
_Atomic bool dls__ipc_closing;

/* Copies `size` host bytes to `dst` on `dev` through a stream of its own, and waits (a page's first zeros, and the
 * values shutdown writes: cold paths). */
static dls_status_t write_now(dls__device *dev, void *dst, const void *src, size_t size) {
  const dls__backend *be = dev->be;
  void *s = NULL;
  DLS__TRY(be->stream_create(be, dev->id, 0, 0, &s));
  dls_status_t st = be->memcpy_async(be, dev->id, dst, src, size, s);
  if (st == DLS_OK)
    st = be->stream_synchronize(be, dev->id, s);
  (void)be->stream_destroy(be, dev->id, s);
  return st;
}

/* The gate page of `dev`, made with zeros and exported at the device's first export (g_mu held). */
static dls_status_t page_of(dls__device *dev, gate_page **out) {
  for (gate_page *p = g_pages; p != NULL; p = p->next) {
    if (p->dev == dev) {
      *out = p;
      return DLS_OK;
    }
  }
  gate_page *p = dls__calloc(1, sizeof *p);
  if (p == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for %s's gate page", dev->name);
  const dls__backend *be = dev->be;
  dls_status_t st = be->ipc_alloc(be, dev->id, sizeof p->values, &p->ptr);
  if (st == DLS_OK)
    st = write_now(dev, p->ptr, p->values, sizeof p->values);
  if (st == DLS_OK)
    st = be->ipc_mem_export(be, dev->id, p->ptr, p->bytes);
  if (st != DLS_OK) {
    if (p->ptr != NULL)
      (void)be->ipc_free(be, dev->id, p->ptr, NULL);
    dls__free(p);
    return dls__fail_prefix(st, "making %s's gate page", dev->name);
  }
  p->dev = dev;
  p->next = g_pages;
  g_pages = p;
  *out = p;
  return DLS_OK;
}

dls_status_t dls__ipc_gate_take(dls__device *dev, dls__ipc_gate *out, uint8_t *out_page) {
  pthread_mutex_lock(&g_mu);
  gate_page *p = NULL;
  dls_status_t st = page_of(dev, &p);
  if (st != DLS_OK) {
    pthread_mutex_unlock(&g_mu);
    return st;
  }
  for (uint32_t i = 0; i < GATE_SLOTS; i++) {
    uint32_t k = (p->next_slot + i) % GATE_SLOTS;
    if (p->taken[k])
      continue;
    p->taken[k] = true;
    p->next_slot = (k + 1) % GATE_SLOTS;
    if (++p->values[k] == 0) /* a word's values never pass through 0, its first content */
      p->values[k] = 1;
    *out = (dls__ipc_gate){dev, (char *)p->ptr + (size_t)k * sizeof(uint32_t), k, p->values[k]};
    memcpy(out_page, p->bytes, DLS__IPC_BYTES);
    pthread_mutex_unlock(&g_mu);
    return DLS_OK;
  }
  pthread_mutex_unlock(&g_mu);
  return dls__fail(DLS_ERR_BUSY,
                   "%d exports of %s wait for their imports' close (the most a device has open): free or close some "
                   "first",
                   GATE_SLOTS, dev->name);
}

void dls__ipc_gate_return(const dls__ipc_gate *g) {
  pthread_mutex_lock(&g_mu);
  for (gate_page *p = g_pages; p != NULL; p = p->next)
    if (p->dev == g->dev)
      p->taken[g->slot] = false;
  pthread_mutex_unlock(&g_mu);
}

/* ---- the importer's mappings ---- */

dls_status_t dls__ipc_map_open(dls__device *dev, const uint8_t *bytes, dls__ipc_map **out, void **out_base) {
  pthread_mutex_lock(&g_mu);
  for (dls__ipc_map *m = g_maps; m != NULL; m = m->next) {
    if (m->dev == dev && memcmp(m->bytes, bytes, DLS__IPC_BYTES) == 0) {
      m->refs++;
      pthread_mutex_unlock(&g_mu);
      *out = m;
      *out_base = m->base;
      return DLS_OK;
    }
  }
  dls__ipc_map *m = dls__malloc(sizeof *m);
  dls_status_t st = m != NULL ? dev->be->ipc_mem_open(dev->be, dev->id, bytes, &m->base)
                              : dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a mapping's record");
  if (st != DLS_OK) {
    pthread_mutex_unlock(&g_mu);
    dls__free(m);
    return st;
  }
  m->dev = dev;
  memcpy(m->bytes, bytes, DLS__IPC_BYTES);
  m->refs = 1;
  m->next = g_maps;
  g_maps = m;
  pthread_mutex_unlock(&g_mu);
  *out = m;
  *out_base = m->base;
  return DLS_OK;
}

void dls__ipc_map_close(dls__ipc_map *m) {
  if (m == NULL)
    return;
  pthread_mutex_lock(&g_mu);
  bool last = --m->refs == 0;
  if (last) {
    for (dls__ipc_map **pp = &g_maps; *pp != NULL; pp = &(*pp)->next) {
      if (*pp == m) {
        *pp = m->next;
        break;
      }
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (last) {
    (void)m->dev->be->ipc_mem_close(m->dev->be, m->dev->id, m->base);
    dls__free(m);
  }
}

/* ---- shutdown ---- */

void dls__ipc_shutdown_begin(void) {
  atomic_store(&dls__ipc_closing, true);
  pthread_mutex_lock(&g_mu);
  /* A word holds its latest value once its import closed, and a free word always does: writing every latest value
   * opens exactly the gates still closed. */
  for (gate_page *p = g_pages; p != NULL; p = p->next)
    (void)write_now(p->dev, p->ptr, p->values, sizeof p->values);
  pthread_mutex_unlock(&g_mu);
}

void dls__ipc_shutdown_end(void) {
  pthread_mutex_lock(&g_mu);
  while (g_pages != NULL) {
    gate_page *p = g_pages;
    g_pages = p->next;
    (void)p->dev->be->ipc_free(p->dev->be, p->dev->id, p->ptr, NULL); /* no work uses it any more */
    dls__free(p);
  }
  while (g_maps != NULL) { /* imports never closed (handles still held past shutdown) */
    dls__ipc_map *m = g_maps;
    g_maps = m->next;
    (void)m->dev->be->ipc_mem_close(m->dev->be, m->dev->id, m->base);
    dls__free(m);
  }
  pthread_mutex_unlock(&g_mu);
  atomic_store(&dls__ipc_closing, false);
}
