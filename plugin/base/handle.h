/* SPDX-License-Identifier: Apache-2.0 */
/* Handles: slot tables, lookups, holds, and the thread's caches of freed slots and small objects (hot paths inline).
 * The mechanism only: each kind's table, with what ending one of its handles does, is defined by the kind's own file
 * (core/tables.h lists them). */
#ifndef DLSTREAM_BASE_HANDLE_H
#define DLSTREAM_BASE_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dlstream/dlstream.h"
#include "base/error.h"

#define DLS__CHUNK_SHIFT 10
#define DLS__CHUNK_SLOTS (1u << DLS__CHUNK_SHIFT)
#define DLS__MAX_CHUNKS 4096 /* 4M live objects of one kind */

/* A slot's state word: the generation (high 32 bits), DYING (the handle was
 * ended: its object is going; no new hold succeeds), CLAIMED (one thread is
 * dropping the object: the last to let go, or the ender when none held it),
 * READ (a call has read the object inside its pin without a hold: on a table
 * that retires what was read, its drop waits for a grace period) and how many
 * calls hold it now (the low 29 bits). The flags stay set until the object
 * pointer is cleared, so a lookup racing the drop never finds it. */
#define DLS__SLOT_DYING (1ull << 31)
#define DLS__SLOT_CLAIMED (1ull << 30)
#define DLS__SLOT_READ (1ull << 29)
#define DLS__SLOT_HOLDS (DLS__SLOT_READ - 1)

typedef struct dls__slot {
  _Atomic uint64_t state;       /* generation | DYING | holds */
  _Atomic uint32_t next_free;   /* free-list link (slot index); a retired slot's link in its table's retired list */
  uint32_t index;               /* its own index in the table */
  _Atomic(void *) obj;          /* the object, NULL when free */
} dls__slot;

/* The handles of one kind. Lock-free: slots come from the thread's own
 * cache of freed slots, a tagged free stack or the end; only a new chunk of
 * slots takes the mutex. Live handles are counted by scanning
 * (dls__table_live), not on the hot paths. */
typedef struct dls__table {
  const char *kind_name; /* "stream", "event" ... */
  dls_handle_kind_t kind;
  /* What ending a handle does to its object, once no call holds it. */
  void (*drop)(void *obj);
  /* Retirement (NULL: none, the object is dropped at once): where calls may read the kind's objects without a
   * hold (inside a pin: core/pin.h), an object no call holds is retired instead: its handle is stale at once and
   * no longer live, but the object stays in its slot (DYING) until a grace period has passed (grace: every thread
   * that could have found it has left the calls that did), in batches of DLS__RETIRE_BATCH, each after one grace
   * period; only then is it dropped and the slot reused. grace_may_wait: false where the calling thread may not
   * wait now (it pins), so the batch waits for a later retirement. */
  void (*grace)(void);
  bool (*grace_may_wait)(void);
  /* Retirement of what was read only (streams): an ended object no call read without a hold (READ unset) is
   * dropped at once; one that was read is dropped at once after a grace period where the ending thread may wait
   * for one, else retired as above. The end's effects then happen before the end returns, as without retirement,
   * at the cost of a grace period for objects read without a hold. */
  bool retire_read_only;
  /* Resolves a handle of the reserved generation (DLS_STREAM_RESERVED_GENERATION: the default streams, named by
   * device and kind, never in a slot), as dls__hold_get does (no hold needed: they live as long as their device);
   * NULL for kinds that have none, whose reserved-generation handles are stale. */
  void *(*reserved)(uint64_t id, const char *call, const char *arg, dls_status_t *out_status);
  pthread_mutex_t mu;      /* chunk allocation only */
  /* Handles the runtime owns itself (built-in functions): not counted by
   * dls__table_live, which reports what callers must release. */
  _Atomic size_t owned;
  _Atomic(dls__slot *) chunks[DLS__MAX_CHUNKS];
  _Atomic uint32_t nslots; /* slots handed out from the end so far (index 0 reserved) */
  _Atomic uint64_t free_head; /* (tag << 32) | index; index 0 = empty */
  _Atomic uint64_t retired;   /* retired slots: (count << 32) | first index, linked by next_free; 0 = none */
} dls__table;

#define DLS__RETIRE_BATCH 64
/* DLSTREAM_TEST_NO_RETIRE=1 (read at the runtime's start, core/runtime.c): retiring tables drop at once, as the
 * negative control of test_event_retire.c. */
DLS__INTERNAL extern _Atomic bool dls__retire_off;

/* A kind's table, for its file's definition: `dls__table dls__event_table =
 * DLS__TABLE("event", DLS_HANDLE_EVENT, dls__event_drop, NULL);` (reserved_fn: see .reserved). */
#define DLS__TABLE(name, kind_value, drop_fn, reserved_fn) DLS__TABLE_RETIRING(name, kind_value, drop_fn, reserved_fn, NULL, NULL)
/* A table whose ended objects retire (see .grace). */
#define DLS__TABLE_RETIRING(name, kind_value, drop_fn, reserved_fn, grace_fn, may_wait_fn)                  \
  {.kind_name = (name), .kind = (kind_value), .drop = (drop_fn), .reserved = (reserved_fn), .grace = (grace_fn), \
   .grace_may_wait = (may_wait_fn), .mu = PTHREAD_MUTEX_INITIALIZER}
/* A table whose ended objects wait for a grace period only where a call read them without a hold (see
 * .retire_read_only). */
#define DLS__TABLE_RETIRING_READ(name, kind_value, drop_fn, reserved_fn, grace_fn, may_wait_fn)                    \
  {.kind_name = (name), .kind = (kind_value), .drop = (drop_fn), .reserved = (reserved_fn), .grace = (grace_fn), \
   .grace_may_wait = (may_wait_fn), .retire_read_only = true, .mu = PTHREAD_MUTEX_INITIALIZER}

/* Calls fn on every live object of a table, holding each while fn runs (a
 * concurrent end of the handle then drops the object after fn). */
DLS__INTERNAL void dls__table_each(dls__table *t, void (*fn)(uint64_t id, void *obj));
/* The live handles of a table, less those the runtime owns (a scan). */
DLS__INTERNAL size_t dls__table_live(dls__table *t);
/* Why a lookup failed: sets the message naming `call` and `arg`, stores
 * DLS_ERR_INVALID_HANDLE in *out_status and returns NULL. */
DLS__INTERNAL DLS__COLD void *dls__table_miss(dls__table *t, uint64_t id, const char *call, const char *arg,
                                              dls_status_t *out_status);
/* A handle of the reserved generation: the table's .reserved resolves it, else it misses (dls__table_miss). */
DLS__INTERNAL void *dls__table_reserved(dls__table *t, uint64_t id, const char *call, const char *arg,
                                                  dls_status_t *out_status);
/* The last call holding an ended handle let go: drops its object and frees
 * the slot (once, whoever gets there). */
DLS__INTERNAL DLS__COLD void dls__slot_last_out(dls__table *t, dls__slot *s, uint64_t state);

static inline uint32_t dls__slot_gen(uint64_t state) { return (uint32_t)(state >> 32); }

/* The slot a handle names, or NULL when its index was never handed out. */
static inline dls__slot *dls__slot_named(dls__table *t, uint64_t id) {
  uint32_t c = (uint32_t)id >> DLS__CHUNK_SHIFT;
  if (DLS__UNLIKELY(c >= DLS__MAX_CHUNKS))
    return NULL;
  dls__slot *chunk = atomic_load_explicit(&t->chunks[c], memory_order_acquire);
  if (DLS__UNLIKELY(chunk == NULL))
    return NULL;
  return &chunk[(uint32_t)id & (DLS__CHUNK_SLOTS - 1)];
}

/* Lets go of a slot held by dls__slot_hold. */
static inline void dls__slot_let_go(dls__table *t, dls__slot *s) {
  uint64_t w = atomic_fetch_sub_explicit(&s->state, 1, memory_order_acq_rel) - 1;
  if (DLS__UNLIKELY((w & (DLS__SLOT_DYING | DLS__SLOT_CLAIMED)) == DLS__SLOT_DYING) && (w & DLS__SLOT_HOLDS) == 0)
    dls__slot_last_out(t, s, w);
}

/* Holds the object of a live handle, so that a concurrent end of the handle
 * (on any thread) cannot drop it until dls__slot_let_go: the object or NULL
 * (nothing held). Two locked instructions in all, no lock. */
static inline void *dls__slot_hold(dls__table *t, uint64_t id, dls__slot **out_slot) {
  dls__slot *s = dls__slot_named(t, id);
  if (DLS__UNLIKELY(s == NULL))
    return NULL;
  uint64_t w = atomic_fetch_add_explicit(&s->state, 1, memory_order_acquire);
  void *obj = atomic_load_explicit(&s->obj, memory_order_acquire);
  if (DLS__UNLIKELY(dls__slot_gen(w) != (uint32_t)(id >> 32) || (w & DLS__SLOT_DYING) != 0 || obj == NULL)) {
    dls__slot_let_go(t, s);
    return NULL;
  }
  *out_slot = s;
  return obj;
}

/* The object of a live handle (not ended), without a hold: only for a retiring table's reader inside a grace
 * period's read-side section (core/pin.h), where the object outlives the section. NULL when stale or never made. */
static inline void *dls__slot_peek_live(dls__table *t, uint64_t id) {
  dls__slot *s = dls__slot_named(t, id);
  if (DLS__UNLIKELY(s == NULL))
    return NULL;
  uint64_t w = atomic_load_explicit(&s->state, memory_order_acquire);
  if (DLS__UNLIKELY(dls__slot_gen(w) != (uint32_t)(id >> 32) || (w & DLS__SLOT_DYING) != 0))
    return NULL;
  return atomic_load_explicit(&s->obj, memory_order_acquire);
}

/* The object of a live handle (not ended), without a hold, for a reader inside a grace period's read-side section
 * on a table that retires what was read (.retire_read_only): the slot is marked READ (one locked instruction, at
 * the handle's first such read), so that the handle's end waits for a grace period before the drop. NULL when
 * stale or never made. */
static inline void *dls__slot_peek_read(dls__table *t, uint64_t id) {
  dls__slot *s = dls__slot_named(t, id);
  if (DLS__UNLIKELY(s == NULL))
    return NULL;
  uint64_t w = atomic_load_explicit(&s->state, memory_order_acquire);
  for (;;) {
    if (DLS__UNLIKELY(dls__slot_gen(w) != (uint32_t)(id >> 32) || (w & DLS__SLOT_DYING) != 0))
      return NULL;
    if (DLS__LIKELY((w & DLS__SLOT_READ) != 0))
      break;
    /* On the state word, as the end's own update: either the end sees READ, or this sees DYING. */
    if (atomic_compare_exchange_weak_explicit(&s->state, &w, w | DLS__SLOT_READ, memory_order_acq_rel,
                                              memory_order_acquire))
      break;
  }
  return atomic_load_explicit(&s->obj, memory_order_acquire);
}

/* Drops every object a table has retired, after one grace period (shutdown, tests). */
DLS__INTERNAL void dls__table_reclaim(dls__table *t);

/* Fast check without a message or a hold: the object or NULL. Only for
 * callers that hold the object by other means (a reference, a hold of
 * their own). Slot 0 is never handed out (its object stays NULL), so id 0
 * fails like any stale handle. */
static inline void *dls__table_peek(dls__table *t, uint64_t id) {
  dls__slot *s = dls__slot_named(t, id);
  if (DLS__UNLIKELY(s == NULL))
    return NULL;
  if (DLS__UNLIKELY(dls__slot_gen(atomic_load_explicit(&s->state, memory_order_acquire)) != (uint32_t)(id >> 32)))
    return NULL;
  return atomic_load_explicit(&s->obj, memory_order_acquire);
}

/* The object of a live handle, or NULL (and a message naming `call` and
 * `arg`) with DLS_ERR_INVALID_HANDLE in *out_status. No hold: see
 * dls__table_peek. */
static inline void *dls__table_get(dls__table *t, uint64_t id, const char *call, const char *arg,
                                   dls_status_t *out_status) {
  void *obj = dls__table_peek(t, id);
  return DLS__LIKELY(obj != NULL) ? obj : dls__table_miss(t, id, call, arg, out_status);
}

/* ---- holds for the length of a call ---- */

/* What a call holds; let go of when the variable leaves scope. */
typedef struct dls__hold {
  dls__slot *slot; /* NULL: nothing held */
  dls__table *table;
} dls__hold;

static inline void dls__hold_end(dls__hold *h) {
  if (h->slot != NULL) {
    dls__slot_let_go(h->table, h->slot);
    h->slot = NULL;
  }
}

/* Holds the object of a live handle in *h, or returns NULL with the message
 * naming `call` and `arg` and DLS_ERR_INVALID_HANDLE in *out_status. */
static inline void *dls__hold_get(dls__hold *h, dls__table *t, uint64_t id, const char *call, const char *arg,
                                  dls_status_t *out_status) {
  h->table = t;
  if (DLS__UNLIKELY((uint32_t)(id >> 32) == DLS_STREAM_RESERVED_GENERATION))
    return dls__table_reserved(t, id, call, arg, out_status);
  void *obj = dls__slot_hold(t, id, &h->slot);
  return DLS__LIKELY(obj != NULL) ? obj : dls__table_miss(t, id, call, arg, out_status);
}

/* A hold that ends where the variable's scope does, on every return path. */
#define DLS__HOLD_VAR(name) dls__hold name __attribute__((cleanup(dls__hold_end))) = {NULL, NULL}

/* Looks a handle up and holds its object until the end of the enclosing
 * block, or returns the failure status from the calling function. Every
 * public call holds what it uses: a concurrent end of the handle makes it
 * stale at once, and the object is dropped once the call is done with it. */
#define DLS__GET(table, type, var, handle, call, arg)                           \
  DLS__HOLD_VAR(var##_hold_);                                                   \
  type *var;                                                                    \
  do {                                                                          \
    dls_status_t dls__gst_;                                                     \
    var = (type *)dls__hold_get(&var##_hold_, (table), (handle).id, (call), (arg), &dls__gst_); \
    if (DLS__UNLIKELY(var == NULL))                                             \
      return dls__gst_;                                                         \
  } while (0)

/* Ends a handle: it is stale from now on, and its object is dropped now when
 * no call holds it, else by the last call to let go (the caller's own hold
 * included). false when the handle was not live (ended before, or never
 * made). Only one of two racing ends wins. Generation 0 never names a live
 * object and the all-ones one is reserved for the default-stream handles:
 * both are skipped. */
DLS__INTERNAL bool dls__table_end(dls__table *t, uint64_t id);

/* Ends a handle or returns DLS_ERR_INVALID_HANDLE, with the message, from
 * the calling function. */
#define DLS__END(table, handle, call, arg)                                      \
  do {                                                                          \
    if (DLS__UNLIKELY(!dls__table_end((table), (handle).id))) {                 \
      dls_status_t dls__tst_;                                                   \
      dls__table_miss((table), (handle).id, (call), (arg), &dls__tst_);         \
      return dls__tst_;                                                         \
    }                                                                           \
  } while (0)

/* ---- the thread's caches ---- */

/* Small objects, of one size class each, so the hot paths (buffers, events,
 * streams) skip malloc/free. Objects come back uninitialized. The classes
 * are numbered by their users (DLS__OBJ_* in core/runtime.h). */
#define DLS__OBJ_CLASSES 5

#define DLS__SLOT_CACHE 64 /* freed slots of one kind a thread keeps for its next handles (a retired batch) */
#define DLS__OBJ_CACHE 64  /* freed objects of one class a thread keeps (a retired batch) */

/* Hot paths make and free handles and objects on one thread: what the
 * thread freed comes back to it without a locked instruction. A finished
 * thread's cache goes back to the tables and to malloc (handle.c). */
typedef struct dls__thread_cache {
  uint32_t slots[DLS_HANDLE_KIND_COUNT_][DLS__SLOT_CACHE];
  int nslots[DLS_HANDLE_KIND_COUNT_];
  void *items[DLS__OBJ_CLASSES][DLS__OBJ_CACHE];
  int n[DLS__OBJ_CLASSES];
  bool registered; /* its thread-exit destructor is set */
} dls__thread_cache;

DLS__INTERNAL extern _Thread_local dls__thread_cache dls__tls;

/* The slow paths: the shared free stack or a new slot; a full or
 * unregistered cache; malloc and free. */
DLS__INTERNAL DLS__COLD uint64_t dls__table_add_shared(dls__table *t, void *obj);
/* Gives a slot whose object is gone back to the thread's cache or the table. */
DLS__INTERNAL void dls__slot_recycle(dls__table *t, uint32_t index);
DLS__INTERNAL DLS__COLD void *dls__obj_alloc_slow(size_t size);
DLS__INTERNAL DLS__COLD void dls__obj_free_slow(int cls, void *obj);

/* Slot `index` of a table; the caller knows its chunk exists. */
static inline dls__slot *dls__slot_of(dls__table *t, uint32_t index) {
  dls__slot *chunk = atomic_load_explicit(&t->chunks[index >> DLS__CHUNK_SHIFT], memory_order_acquire);
  return &chunk[index & (DLS__CHUNK_SLOTS - 1)];
}

/* Stores obj in a fresh slot; returns the handle id, or 0 (message set). */
static inline uint64_t dls__table_add(dls__table *t, void *obj) {
  dls__thread_cache *c = &dls__tls;
  dls_handle_kind_t kind = t->kind;
  if (DLS__UNLIKELY(c->nslots[kind] == 0))
    return dls__table_add_shared(t, obj);
  uint32_t index = c->slots[kind][--c->nslots[kind]];
  dls__slot *s = dls__slot_of(t, index);
  uint32_t gen = dls__slot_gen(atomic_load_explicit(&s->state, memory_order_relaxed));
  atomic_store_explicit(&s->obj, obj, memory_order_release);
  return ((uint64_t)gen << 32) | index;
}

static inline void *dls__obj_alloc(int cls, size_t size) {
  dls__thread_cache *c = &dls__tls;
  if (DLS__LIKELY(c->n[cls] > 0))
    return c->items[cls][--c->n[cls]];
  return dls__obj_alloc_slow(size);
}

static inline void dls__obj_free(int cls, void *obj) {
  dls__thread_cache *c = &dls__tls;
  if (DLS__LIKELY(obj != NULL && c->n[cls] < DLS__OBJ_CACHE && c->registered))
    c->items[cls][c->n[cls]++] = obj;
  else if (obj != NULL)
    dls__obj_free_slow(cls, obj);
}

/* Frees the calling thread's cached objects (shutdown). */
DLS__INTERNAL void dls__obj_flush(void);

#endif /* DLSTREAM_BASE_HANDLE_H */
