/* SPDX-License-Identifier: Apache-2.0 */
/* Slot tables: handles as slot index plus generation, with lock-free lookup. */
#include <stdlib.h>

#include "internal.h"

#define DLS__KIND(k, n) [k] = {.kind_name = n, .kind = k, .mu = PTHREAD_MUTEX_INITIALIZER}
dls__table dls__tables[DLS_HANDLE_KIND_COUNT_] = {
    DLS__KIND(DLS_HANDLE_STREAM, "stream"),     DLS__KIND(DLS_HANDLE_EVENT, "event"),
    DLS__KIND(DLS_HANDLE_BUFFER, "buffer"),     DLS__KIND(DLS_HANDLE_TENSOR, "tensor"),
    DLS__KIND(DLS_HANDLE_MODULE, "module"),     DLS__KIND(DLS_HANDLE_FUNCTION, "function"),
    DLS__KIND(DLS_HANDLE_GROUP, "group"),       DLS__KIND(DLS_HANDLE_LATCH, "latch"),
};
#undef DLS__KIND

static dls__slot *slot_at(dls__table *t, uint32_t index) {
  dls__slot *chunk = atomic_load_explicit(&t->chunks[index >> DLS__CHUNK_SHIFT], memory_order_acquire);
  return chunk ? &chunk[index & (DLS__CHUNK_SLOTS - 1)] : NULL;
}

static uint32_t next_generation(uint32_t gen) {
  gen++;
  /* 0 never names a live object, and the all-ones generation is reserved
   * for the default-stream handles. */
  if (gen == 0 || gen == DLS_STREAM_RESERVED_GENERATION)
    gen = 1;
  return gen;
}

uint64_t dls__handle_new(dls_handle_kind_t kind, void *obj) {
  dls__table *t = &dls__tables[kind];
  uint32_t index;
  dls__slot *s;
  pthread_mutex_lock(&t->mu);
  if (t->free_head != 0) {
    index = t->free_head;
    s = slot_at(t, index);
    t->free_head = s->next_free;
  } else {
    index = atomic_load_explicit(&t->nslots, memory_order_relaxed);
    if (index == 0)
      index = 1; /* slot 0 is never handed out */
    uint32_t c = index >> DLS__CHUNK_SHIFT;
    if (c >= DLS__MAX_CHUNKS) {
      pthread_mutex_unlock(&t->mu);
      dls__fail(DLS_ERR_OUT_OF_MEMORY, "too many live %s handles (limit %u)", t->kind_name,
                DLS__MAX_CHUNKS * DLS__CHUNK_SLOTS);
      return 0;
    }
    if (atomic_load_explicit(&t->chunks[c], memory_order_relaxed) == NULL) {
      dls__slot *chunk = calloc(DLS__CHUNK_SLOTS, sizeof *chunk);
      if (chunk == NULL) {
        pthread_mutex_unlock(&t->mu);
        dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for %s handles", t->kind_name);
        return 0;
      }
      for (uint32_t i = 0; i < DLS__CHUNK_SLOTS; i++)
        atomic_init(&chunk[i].gen, 1);
      atomic_store_explicit(&t->chunks[c], chunk, memory_order_release);
    }
    s = slot_at(t, index);
    atomic_store_explicit(&t->nslots, index + 1, memory_order_release);
  }
  uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
  atomic_store_explicit(&s->obj, obj, memory_order_release);
  atomic_fetch_add_explicit(&t->live, 1, memory_order_relaxed);
  pthread_mutex_unlock(&t->mu);
  return ((uint64_t)gen << 32) | index;
}

void *dls__handle_peek(dls_handle_kind_t kind, uint64_t id) {
  dls__table *t = &dls__tables[kind];
  uint32_t index = (uint32_t)id;
  uint32_t gen = (uint32_t)(id >> 32);
  if (index == 0 || index >= atomic_load_explicit(&t->nslots, memory_order_acquire))
    return NULL;
  dls__slot *s = slot_at(t, index);
  if (s == NULL || atomic_load_explicit(&s->gen, memory_order_acquire) != gen)
    return NULL;
  return atomic_load_explicit(&s->obj, memory_order_acquire);
}

void *dls__handle_get(dls_handle_kind_t kind, uint64_t id, const char *call, const char *arg,
                      dls_status_t *out_status) {
  void *obj = dls__handle_peek(kind, id);
  if (DLS__LIKELY(obj != NULL))
    return obj;
  dls__table *t = &dls__tables[kind];
  uint32_t index = (uint32_t)id;
  uint32_t gen = (uint32_t)(id >> 32);
  *out_status = DLS_ERR_INVALID_HANDLE;
  if (id == 0) {
    dls__fail(DLS_ERR_INVALID_HANDLE, "%s(%s): %s handle is 0 (never created, or already destroyed and zeroed)",
              call, arg, t->kind_name);
  } else if (index == 0 || index >= atomic_load_explicit(&t->nslots, memory_order_acquire)) {
    dls__fail(DLS_ERR_INVALID_HANDLE, "%s(%s): 0x%llx is not a %s handle (slot %u was never allocated)", call, arg,
              (unsigned long long)id, t->kind_name, index);
  } else {
    dls__slot *s = slot_at(t, index);
    dls__fail(DLS_ERR_INVALID_HANDLE, "%s(%s): %s handle is stale: slot %u generation %u, now %u", call, arg,
              t->kind_name, index, gen, s ? atomic_load(&s->gen) : 0u);
  }
  return NULL;
}

void *dls__handle_free(dls_handle_kind_t kind, uint64_t id) {
  dls__table *t = &dls__tables[kind];
  uint32_t index = (uint32_t)id;
  uint32_t gen = (uint32_t)(id >> 32);
  void *obj = NULL;
  pthread_mutex_lock(&t->mu);
  if (index != 0 && index < atomic_load_explicit(&t->nslots, memory_order_relaxed)) {
    dls__slot *s = slot_at(t, index);
    if (atomic_load_explicit(&s->gen, memory_order_relaxed) == gen) {
      atomic_store_explicit(&s->gen, next_generation(gen), memory_order_release);
      obj = atomic_exchange_explicit(&s->obj, NULL, memory_order_acq_rel);
      s->next_free = t->free_head;
      t->free_head = index;
      atomic_fetch_sub_explicit(&t->live, 1, memory_order_relaxed);
    }
  }
  pthread_mutex_unlock(&t->mu);
  return obj;
}

void dls__handle_each(dls_handle_kind_t kind, void (*fn)(uint64_t id, void *obj)) {
  dls__table *t = &dls__tables[kind];
  uint32_t n = atomic_load_explicit(&t->nslots, memory_order_acquire);
  for (uint32_t i = 1; i < n; i++) {
    dls__slot *s = slot_at(t, i);
    void *obj = s ? atomic_load_explicit(&s->obj, memory_order_acquire) : NULL;
    if (obj != NULL)
      fn(((uint64_t)atomic_load(&s->gen) << 32) | i, obj);
  }
}

_Atomic size_t dls__owned_handles[DLS_HANDLE_KIND_COUNT_];

size_t dls_live_handles(dls_handle_kind_t kind) {
  if ((int)kind <= 0 || kind >= DLS_HANDLE_KIND_COUNT_)
    return 0;
  return atomic_load_explicit(&dls__tables[kind].live, memory_order_relaxed) -
         atomic_load_explicit(&dls__owned_handles[kind], memory_order_relaxed);
}
