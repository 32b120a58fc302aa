/* SPDX-License-Identifier: Apache-2.0 */
/* Handles: slot tables, lookups, and the thread's caches of freed slots and small objects (hot paths inline). */
#ifndef DLSTREAM_CORE_HANDLE_H
#define DLSTREAM_CORE_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlstream/dlstream.h"
#include "error.h"

#define DLS__CHUNK_SHIFT 10
#define DLS__CHUNK_SLOTS (1u << DLS__CHUNK_SHIFT)
#define DLS__MAX_CHUNKS 4096 /* 4M live objects of one kind */

typedef struct dls__slot {
  _Atomic uint32_t gen;         /* generation; bumped on free */
  _Atomic uint32_t next_free;   /* free-list link (slot index) */
  _Atomic(void *) obj;          /* the object, NULL when free */
} dls__slot;

/* Lock-free: slots come from the thread's own cache of freed slots, a
 * tagged free stack or the end; only a new chunk of slots takes the mutex.
 * Live handles are counted by scanning (dls_live_handles), not on the hot
 * paths. */
typedef struct dls__table {
  const char *kind_name; /* "stream", "event" ... */
  dls_handle_kind_t kind;
  pthread_mutex_t mu;      /* chunk allocation only */
  _Atomic(dls__slot *) chunks[DLS__MAX_CHUNKS];
  _Atomic uint32_t nslots; /* slots handed out from the end so far (index 0 reserved) */
  _Atomic uint64_t free_head; /* (tag << 32) | index; index 0 = empty */
} dls__table;

DLS__INTERNAL extern dls__table dls__tables[DLS_HANDLE_KIND_COUNT_];
/* Handles the runtime owns itself (built-in functions): not counted by
 * dls_live_handles, which reports what callers must release. */
DLS__INTERNAL extern _Atomic size_t dls__owned_handles[DLS_HANDLE_KIND_COUNT_];

/* Calls fn on every live object of a kind (shutdown). */
DLS__INTERNAL void dls__handle_each(dls_handle_kind_t kind, void (*fn)(uint64_t id, void *obj));
/* Why a lookup failed: sets the message naming `call` and `arg`, stores
 * DLS_ERR_INVALID_HANDLE in *out_status and returns NULL. */
DLS__INTERNAL DLS__COLD void *dls__handle_miss(dls_handle_kind_t kind, uint64_t id, const char *call, const char *arg,
                                     dls_status_t *out_status);

/* Fast check without a message: the object or NULL. Slot 0 is never handed
 * out (its generation stays 1, its object NULL), so id 0 fails the
 * generation check like any stale handle. */
static inline void *dls__handle_peek(dls_handle_kind_t kind, uint64_t id) {
  uint32_t c = (uint32_t)id >> DLS__CHUNK_SHIFT;
  if (DLS__UNLIKELY(c >= DLS__MAX_CHUNKS))
    return NULL;
  dls__slot *chunk = atomic_load_explicit(&dls__tables[kind].chunks[c], memory_order_acquire);
  if (DLS__UNLIKELY(chunk == NULL))
    return NULL;
  dls__slot *s = &chunk[(uint32_t)id & (DLS__CHUNK_SLOTS - 1)];
  if (DLS__UNLIKELY(atomic_load_explicit(&s->gen, memory_order_acquire) != (uint32_t)(id >> 32)))
    return NULL;
  return atomic_load_explicit(&s->obj, memory_order_acquire);
}

/* The object of a live handle, or NULL (and a message naming `call` and
 * `arg`) with DLS_ERR_INVALID_HANDLE in *out_status. */
static inline void *dls__handle_get(dls_handle_kind_t kind, uint64_t id, const char *call, const char *arg,
                                    dls_status_t *out_status) {
  void *obj = dls__handle_peek(kind, id);
  return DLS__LIKELY(obj != NULL) ? obj : dls__handle_miss(kind, id, call, arg, out_status);
}

/* Looks a handle up or returns the failure status from the calling function. */
#define DLS__GET(kind, type, var, handle, call, arg)                         \
  type *var;                                                                 \
  do {                                                                       \
    dls_status_t dls__gst_;                                                  \
    var = (type *)dls__handle_get((kind), (handle).id, (call), (arg), &dls__gst_); \
    if (DLS__UNLIKELY(var == NULL))                                          \
      return dls__gst_;                                                      \
  } while (0)

/* Frees a handle and takes its object, or returns the failure status from
 * the calling function (the handle was not live, or another caller freed
 * it first). For destroy calls that need nothing of the object before. */
#define DLS__TAKE(kind, type, var, handle, call, arg)                       \
  type *var = (type *)dls__handle_free((kind), (handle).id);                \
  do {                                                                      \
    if (DLS__UNLIKELY(var == NULL)) {                                       \
      dls_status_t dls__tst_;                                               \
      dls__handle_miss((kind), (handle).id, (call), (arg), &dls__tst_);     \
      return dls__tst_;                                                     \
    }                                                                       \
  } while (0)

/* ---- the thread's caches ---- */

/* Small objects of one size class each, so the hot paths (buffers, events,
 * streams) skip malloc/free. Objects come back uninitialized. */
enum { DLS__OBJ_STREAM, DLS__OBJ_EVENT, DLS__OBJ_BUFFER, DLS__OBJ_TENSOR, DLS__OBJ_DEFERRED, DLS__OBJ_KINDS };

#define DLS__SLOT_CACHE 16 /* freed slots of one kind a thread keeps for its next handles */
#define DLS__OBJ_CACHE 32  /* freed objects of one kind a thread keeps */

/* Hot paths make and free handles and objects on one thread: what the
 * thread freed comes back to it without a locked instruction. A finished
 * thread's cache goes back to the tables and to malloc (handle.c). */
typedef struct dls__thread_cache {
  uint32_t slots[DLS_HANDLE_KIND_COUNT_][DLS__SLOT_CACHE];
  int nslots[DLS_HANDLE_KIND_COUNT_];
  void *items[DLS__OBJ_KINDS][DLS__OBJ_CACHE];
  int n[DLS__OBJ_KINDS];
  bool registered; /* its thread-exit destructor is set */
} dls__thread_cache;

DLS__INTERNAL extern _Thread_local dls__thread_cache dls__tls;

/* The slow paths: the shared free stack or a new slot; a full or
 * unregistered cache; malloc and free. */
DLS__INTERNAL DLS__COLD uint64_t dls__handle_new_shared(dls_handle_kind_t kind, void *obj);
DLS__INTERNAL DLS__COLD void *dls__slot_release_slow(dls_handle_kind_t kind, uint32_t index, void *obj);
DLS__INTERNAL DLS__COLD void *dls__obj_alloc_slow(size_t size);
DLS__INTERNAL DLS__COLD void dls__obj_free_slow(int kind, void *obj);

/* Slot `index` of a table; the caller knows its chunk exists. */
static inline dls__slot *dls__slot_of(dls_handle_kind_t kind, uint32_t index) {
  dls__slot *chunk = atomic_load_explicit(&dls__tables[kind].chunks[index >> DLS__CHUNK_SHIFT], memory_order_acquire);
  return &chunk[index & (DLS__CHUNK_SLOTS - 1)];
}

/* Stores obj in a fresh slot; returns the handle id, or 0 (message set). */
static inline uint64_t dls__handle_new(dls_handle_kind_t kind, void *obj) {
  dls__thread_cache *c = &dls__tls;
  if (DLS__UNLIKELY(c->nslots[kind] == 0))
    return dls__handle_new_shared(kind, obj);
  uint32_t index = c->slots[kind][--c->nslots[kind]];
  dls__slot *s = dls__slot_of(kind, index);
  uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
  atomic_store_explicit(&s->obj, obj, memory_order_release);
  return ((uint64_t)gen << 32) | index;
}

/* Frees the slot (the handle goes stale). Returns the object it held, or
 * NULL when the handle was not live (another caller freed it first). Only
 * one caller can move the generation on: the winner owns the slot until it
 * is handed out again, so its object needs no atomic exchange. A slot never
 * handed out, or free, holds no object: winning it changes its generation
 * only. Generation 0 never names a live object and the all-ones one is
 * reserved for the default-stream handles: both are skipped. */
static inline void *dls__handle_free(dls_handle_kind_t kind, uint64_t id) {
  uint32_t index = (uint32_t)id, gen = (uint32_t)(id >> 32);
  if (DLS__UNLIKELY(index >> DLS__CHUNK_SHIFT >= DLS__MAX_CHUNKS))
    return NULL;
  dls__slot *chunk = atomic_load_explicit(&dls__tables[kind].chunks[index >> DLS__CHUNK_SHIFT], memory_order_acquire);
  if (DLS__UNLIKELY(chunk == NULL))
    return NULL;
  dls__slot *s = &chunk[index & (DLS__CHUNK_SLOTS - 1)];
  uint32_t next = gen + 1 == 0 || gen + 1 == DLS_STREAM_RESERVED_GENERATION ? 1 : gen + 1;
  if (DLS__UNLIKELY(!atomic_compare_exchange_strong_explicit(&s->gen, &gen, next, memory_order_acq_rel,
                                                             memory_order_relaxed)))
    return NULL;
  void *obj = atomic_load_explicit(&s->obj, memory_order_relaxed);
  atomic_store_explicit(&s->obj, NULL, memory_order_release);
  if (DLS__UNLIKELY(obj == NULL))
    return NULL; /* a slot that was not live: never hand it out twice */
  dls__thread_cache *c = &dls__tls;
  if (DLS__UNLIKELY(c->nslots[kind] == DLS__SLOT_CACHE || !c->registered))
    return dls__slot_release_slow(kind, index, obj);
  c->slots[kind][c->nslots[kind]++] = index;
  return obj;
}

static inline void *dls__obj_alloc(int kind, size_t size) {
  dls__thread_cache *c = &dls__tls;
  if (DLS__LIKELY(c->n[kind] > 0))
    return c->items[kind][--c->n[kind]];
  return dls__obj_alloc_slow(size);
}

static inline void dls__obj_free(int kind, void *obj) {
  dls__thread_cache *c = &dls__tls;
  if (DLS__LIKELY(obj != NULL && c->n[kind] < DLS__OBJ_CACHE && c->registered))
    c->items[kind][c->n[kind]++] = obj;
  else if (obj != NULL)
    dls__obj_free_slow(kind, obj);
}

/* Frees the calling thread's cached objects (shutdown). */
DLS__INTERNAL void dls__obj_flush(void);

#endif /* DLSTREAM_CORE_HANDLE_H */
