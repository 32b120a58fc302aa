/* SPDX-License-Identifier: Apache-2.0 */
/* Slot tables: handles as slot index plus generation, with lock-free lookup,
 * allocation and release; per-thread caches of freed slots and small objects. */
#include <stdlib.h>

#include "base/fault.h"
#include "base/handle.h"

static dls__slot *slot_at(dls__table *t, uint32_t index) {
  if (index >> DLS__CHUNK_SHIFT >= DLS__MAX_CHUNKS)
    return NULL;
  dls__slot *chunk = atomic_load_explicit(&t->chunks[index >> DLS__CHUNK_SHIFT], memory_order_acquire);
  return chunk ? &chunk[index & (DLS__CHUNK_SLOTS - 1)] : NULL;
}

/* A slot index from the free stack, or 0. The tag defeats ABA. */
static uint32_t pop_free(dls__table *t) {
  uint64_t head = atomic_load_explicit(&t->free_head, memory_order_acquire);
  for (;;) {
    uint32_t index = (uint32_t)head;
    if (index == 0)
      return 0;
    uint32_t next = atomic_load_explicit(&slot_at(t, index)->next_free, memory_order_relaxed);
    uint64_t want = (((head >> 32) + 1) << 32) | next;
    if (atomic_compare_exchange_weak_explicit(&t->free_head, &head, want, memory_order_acq_rel,
                                              memory_order_acquire))
      return index;
  }
}

static void push_free(dls__table *t, uint32_t index) {
  dls__slot *s = slot_at(t, index);
  uint64_t head = atomic_load_explicit(&t->free_head, memory_order_relaxed);
  for (;;) {
    atomic_store_explicit(&s->next_free, (uint32_t)head, memory_order_relaxed);
    uint64_t want = (((head >> 32) + 1) << 32) | index;
    if (atomic_compare_exchange_weak_explicit(&t->free_head, &head, want, memory_order_release,
                                              memory_order_relaxed))
      return;
  }
}

/* The table of each kind that has handed out a slot: where a finished
 * thread's cached slots go back. */
static _Atomic(dls__table *) g_tables[DLS_HANDLE_KIND_COUNT_];

/* A fresh slot from the end of the table, allocating its chunk if needed. */
static uint32_t take_new(dls__table *t) {
  atomic_store_explicit(&g_tables[t->kind], t, memory_order_release);
  uint32_t index = atomic_fetch_add_explicit(&t->nslots, 1, memory_order_acq_rel);
  if (index == 0) /* slot 0 is never handed out */
    index = atomic_fetch_add_explicit(&t->nslots, 1, memory_order_acq_rel);
  uint32_t c = index >> DLS__CHUNK_SHIFT;
  if (c >= DLS__MAX_CHUNKS) {
    dls__fail(DLS_ERR_OUT_OF_MEMORY, "too many live %s handles (limit %u)", t->kind_name,
              DLS__MAX_CHUNKS * DLS__CHUNK_SLOTS);
    return 0;
  }
  if (atomic_load_explicit(&t->chunks[c], memory_order_acquire) == NULL) {
    pthread_mutex_lock(&t->mu);
    if (atomic_load_explicit(&t->chunks[c], memory_order_relaxed) == NULL) {
      dls__slot *chunk = dls__calloc(DLS__CHUNK_SLOTS, sizeof *chunk);
      if (chunk == NULL) {
        pthread_mutex_unlock(&t->mu);
        dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for %s handles", t->kind_name);
        return 0;
      }
      for (uint32_t i = 0; i < DLS__CHUNK_SLOTS; i++) {
        atomic_init(&chunk[i].state, (uint64_t)1 << 32);
        chunk[i].index = c * DLS__CHUNK_SLOTS + i;
      }
      atomic_store_explicit(&t->chunks[c], chunk, memory_order_release);
    }
    pthread_mutex_unlock(&t->mu);
  }
  return index;
}

/* ---- the thread's caches (their fast paths are in handle.h) ---- */

_Thread_local dls__thread_cache dls__tls;
static pthread_key_t g_cache_key;
static pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;

static void cache_drain(dls__thread_cache *c) {
  for (int k = 0; k < DLS__OBJ_CLASSES; k++) {
    while (c->n[k] > 0)
      dls__free(c->items[k][--c->n[k]]);
  }
}

static void cache_thread_exit(void *p) {
  dls__thread_cache *c = p;
  cache_drain(c);
  for (int k = 0; k < DLS_HANDLE_KIND_COUNT_; k++) {
    while (c->nslots[k] > 0)
      push_free(atomic_load_explicit(&g_tables[k], memory_order_acquire), c->slots[k][--c->nslots[k]]);
  }
}

static void cache_key_init(void) { pthread_key_create(&g_cache_key, cache_thread_exit); }

/* The key's destructor hands a finished thread's cache back. */
static void cache_register(dls__thread_cache *c) {
  pthread_once(&g_cache_once, cache_key_init);
  pthread_setspecific(g_cache_key, c);
  c->registered = true;
}

/* ---- handles ---- */

uint64_t dls__table_add_shared(dls__table *t, void *obj) {
  uint32_t index = pop_free(t);
  if (index == 0 && (index = take_new(t)) == 0)
    return 0;
  dls__slot *s = slot_at(t, index);
  uint32_t gen = dls__slot_gen(atomic_load_explicit(&s->state, memory_order_relaxed));
  atomic_store_explicit(&s->obj, obj, memory_order_release);
  return ((uint64_t)gen << 32) | index;
}

static DLS__HOT_INLINE void slot_recycle(dls__table *t, uint32_t index) {
  dls__thread_cache *c = &dls__tls;
  dls_handle_kind_t kind = t->kind;
  if (c->nslots[kind] == DLS__SLOT_CACHE) {
    push_free(t, index);
    return;
  }
  if (DLS__UNLIKELY(!c->registered))
    cache_register(c);
  c->slots[kind][c->nslots[kind]++] = index;
}

void dls__slot_recycle(dls__table *t, uint32_t index) { slot_recycle(t, index); }

/* The object of an ended handle that no call holds (and, on a retiring table, past its grace period): the slot
 * goes back, then the kind's end runs. */
static DLS__HOT_INLINE void slot_free(dls__table *t, dls__slot *s) {
  void *obj = atomic_load_explicit(&s->obj, memory_order_acquire);
  atomic_store_explicit(&s->obj, NULL, memory_order_release);
  /* Lookups fail on the flags until here, on the NULL object after. */
  atomic_fetch_and_explicit(&s->state, ~(DLS__SLOT_DYING | DLS__SLOT_CLAIMED | DLS__SLOT_READ), memory_order_acq_rel);
  slot_recycle(t, s->index);
  if (obj != NULL)
    t->drop(obj);
}

/* Takes every slot the table has retired, waits one grace period, then frees them. */
static void reclaim_batch(dls__table *t) {
  uint64_t head = atomic_exchange_explicit(&t->retired, 0, memory_order_acq_rel);
  if (head == 0)
    return;
  t->grace(); /* each of them was retired before it began */
  for (uint32_t index = (uint32_t)head; index != 0;) {
    dls__slot *s = dls__slot_of(t, index); /* a retired slot's chunk exists */
    index = atomic_load_explicit(&s->next_free, memory_order_relaxed);
    slot_free(t, s);
  }
}

/* A retiring table's ended object: it stays in its slot (DYING, generation moved on) on the retired list, and the
 * list is freed in one batch once it is long enough and this thread may wait for a grace period. */
static void slot_retire(dls__table *t, dls__slot *s) {
  uint64_t head = atomic_load_explicit(&t->retired, memory_order_relaxed);
  uint64_t want;
  do { /* pushes only, and the batch takes all: no pop to fear an ABA from */
    atomic_store_explicit(&s->next_free, (uint32_t)head, memory_order_relaxed);
    want = ((((head >> 32) + 1)) << 32) | s->index;
  } while (!atomic_compare_exchange_weak_explicit(&t->retired, &head, want, memory_order_release,
                                                  memory_order_relaxed));
  if ((want >> 32) >= DLS__RETIRE_BATCH && t->grace_may_wait())
    reclaim_batch(t);
}

_Atomic bool dls__retire_off;

static void slot_drop(dls__table *t, dls__slot *s) {
  if (t->grace == NULL || atomic_load_explicit(&dls__retire_off, memory_order_relaxed)) {
    slot_free(t, s);
  } else if (!t->retire_read_only) {
    slot_retire(t, s);
  } else if ((atomic_load_explicit(&s->state, memory_order_acquire) & DLS__SLOT_READ) == 0) {
    slot_free(t, s); /* no call read it without a hold, and none can now: DYING is set */
  } else if (t->grace_may_wait()) {
    t->grace(); /* every call that read it without a hold has left its pin */
    slot_free(t, s);
  } else {
    slot_retire(t, s);
  }
}

void dls__table_reclaim(dls__table *t) {
  while (t->grace != NULL && atomic_load_explicit(&t->retired, memory_order_acquire) != 0)
    reclaim_batch(t);
}

bool dls__table_end(dls__table *t, uint64_t id) {
  dls__slot *s = dls__slot_named(t, id);
  uint32_t gen = (uint32_t)(id >> 32);
  if (DLS__UNLIKELY(s == NULL || (uint32_t)id == 0))
    return false;
  uint32_t next = gen + 1 == 0 || gen + 1 == DLS_STREAM_RESERVED_GENERATION ? 1 : gen + 1;
  uint64_t w = atomic_load_explicit(&s->state, memory_order_acquire);
  for (;;) {
    /* DYING: ended already (a retired object keeps its slot with the next generation, the one no caller holds) */
    if (dls__slot_gen(w) != gen || (w & DLS__SLOT_DYING) != 0 ||
        atomic_load_explicit(&s->obj, memory_order_acquire) == NULL)
      return false;
    uint64_t holds = w & DLS__SLOT_HOLDS;
    uint64_t want = ((uint64_t)next << 32) | holds | (w & DLS__SLOT_READ) | DLS__SLOT_DYING |
                    (holds == 0 ? DLS__SLOT_CLAIMED : 0);
    if (atomic_compare_exchange_weak_explicit(&s->state, &w, want, memory_order_acq_rel, memory_order_acquire))
      break;
  }
  if ((w & DLS__SLOT_HOLDS) == 0)
    slot_drop(t, s);
  return true;
}

void dls__slot_last_out(dls__table *t, dls__slot *s, uint64_t w) {
  /* Whoever sets CLAIMED with no hold left drops the object; a call that
   * holds the slot meanwhile (a stale lookup about to fail) lets go later
   * and gets here itself. */
  while ((w & (DLS__SLOT_DYING | DLS__SLOT_CLAIMED)) == DLS__SLOT_DYING && (w & DLS__SLOT_HOLDS) == 0) {
    if (atomic_compare_exchange_weak_explicit(&s->state, &w, w | DLS__SLOT_CLAIMED, memory_order_acq_rel,
                                              memory_order_acquire)) {
      slot_drop(t, s);
      return;
    }
  }
}

void *dls__table_miss(dls__table *t, uint64_t id, const char *call, const char *arg, dls_status_t *out_status) {
  uint32_t index = (uint32_t)id;
  uint32_t gen = (uint32_t)(id >> 32);
  dls__slot *s = index != 0 && index < atomic_load(&t->nslots) ? slot_at(t, index) : NULL;
  *out_status = DLS_ERR_INVALID_HANDLE;
  if (id == 0) {
    dls__fail(DLS_ERR_INVALID_HANDLE, "%s(%s): %s handle is 0 (never created, or already destroyed and zeroed)",
              call, arg, t->kind_name);
  } else if (s == NULL) {
    dls__fail(DLS_ERR_INVALID_HANDLE, "%s(%s): 0x%llx is not a %s handle (slot %u was never allocated)", call, arg,
              (unsigned long long)id, t->kind_name, index);
  } else {
    dls__fail(DLS_ERR_INVALID_HANDLE, "%s(%s): %s handle is stale: slot %u generation %u, now %u", call, arg,
              t->kind_name, index, gen, dls__slot_gen(atomic_load(&s->state)));
  }
  return NULL;
}

void *dls__table_reserved(dls__table *t, uint64_t id, const char *call, const char *arg, dls_status_t *out_status) {
  if (t->reserved != NULL)
    return t->reserved(id, call, arg, out_status);
  return dls__table_miss(t, id, call, arg, out_status);
}

void dls__table_each(dls__table *t, void (*fn)(uint64_t id, void *obj)) {
  uint32_t n = atomic_load_explicit(&t->nslots, memory_order_acquire);
  for (uint32_t i = 1; i < n; i++) {
    dls__slot *s = slot_at(t, i);
    if (s == NULL || atomic_load_explicit(&s->obj, memory_order_acquire) == NULL)
      continue;
    uint64_t id = ((uint64_t)dls__slot_gen(atomic_load_explicit(&s->state, memory_order_acquire)) << 32) | i;
    dls__slot *held;
    void *obj = dls__slot_hold(t, id, &held);
    if (obj != NULL) {
      fn(id, obj);
      dls__slot_let_go(t, held);
    }
  }
}

/* Counted by a scan: no counter to update on every handle made or freed. */
size_t dls__table_live(dls__table *t) {
  uint32_t n = atomic_load_explicit(&t->nslots, memory_order_acquire);
  size_t live = 0;
  for (uint32_t i = 1; i < n; i++) {
    dls__slot *s = slot_at(t, i); /* retired objects (DYING, still in their slots) are not live */
    live += s != NULL && atomic_load_explicit(&s->obj, memory_order_relaxed) != NULL &&
            (atomic_load_explicit(&s->state, memory_order_relaxed) & DLS__SLOT_DYING) == 0;
  }
  size_t owned = atomic_load_explicit(&t->owned, memory_order_relaxed);
  return live > owned ? live - owned : 0;
}

/* ---- small objects ---- */

void *dls__obj_alloc_slow(size_t size) { return dls__malloc(size); }

void dls__obj_free_slow(int cls, void *obj) {
  dls__thread_cache *c = &dls__tls;
  if (c->n[cls] == DLS__OBJ_CACHE) {
    dls__free(obj);
    return;
  }
  cache_register(c);
  c->items[cls][c->n[cls]++] = obj;
}

void dls__obj_flush(void) { cache_drain(&dls__tls); }
