/* SPDX-License-Identifier: Apache-2.0 */
/* Pins and changes of the capture state (pin.h), as Dekker's pattern with the fence on the change's side.
 *
 * Each thread pins through a slot of its own (a cache line, taken at its first pin and given back when it ends,
 * for a later thread). A pin makes its slot's word odd (the word counts pins and unpins), then reads whether a
 * change is underway; a change sets its
 * flag, then reads every slot, so either the pin sees the flag (and backs off until the change is over) or the
 * change sees the pin (and waits for it). Both need a full fence between their store and their load. Pins come by
 * millions and changes by the handful, so where the kernel offers it (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED,
 * registered at the first pin) the change pays for both: it makes every running thread of the process pass a full
 * fence after its flag is set, and the pin is a plain store, a plain load and a plain store back (no locked
 * instruction). Without it (an old kernel, a seccomp filter) the pin fences itself. Threads past the slots share
 * one counted slot, locked as before.
 *
 * The same slots make the pin an epoch (pin.h): a grace period fences every thread as a change does, then waits for
 * each odd word to move on, so every pin that could have read what its caller made unreachable has ended. */
#include <sched.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__linux__) && __has_include(<linux/membarrier.h>)
#include <linux/membarrier.h>
#define DLS__HAVE_MEMBARRIER 1
#endif

#include "core/pin.h"

enum { PIN_SLOTS = 1024 };

typedef struct pin_slot {
  /* Own slots: how many pins and unpins the slot has seen, odd while its thread pins (a grace period waits for an
   * odd word to change). The shared slot: how many threads pin now. */
  _Atomic long held;
  _Atomic bool taken;  /* a thread owns the slot */
  char pad[64 - sizeof(long) - sizeof(bool)];
} pin_slot;

static pin_slot g_slots[PIN_SLOTS] __attribute__((aligned(64)));
static pin_slot g_crowd __attribute__((aligned(64))); /* threads past PIN_SLOTS, counted, with locked updates */
static _Atomic int g_nslots;                          /* slots handed out so far: a change reads [0, g_nslots) */
static bool g_asymmetric;                             /* the change fences every thread; set once, first */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
_Atomic int dls__capture_changing; /* a change is underway (pin.h reads it inline) */
static pthread_mutex_t g_change_mu = PTHREAD_MUTEX_INITIALIZER; /* held for a change's span */
_Thread_local dls__pin_thread dls__pins;

static void slot_give_back(void *slot) {
  if (slot != &g_crowd)
    atomic_store_explicit(&((pin_slot *)slot)->taken, false, memory_order_release);
}

static void pins_start(void) {
  (void)pthread_key_create(&g_key, slot_give_back);
#ifdef DLS__HAVE_MEMBARRIER
  g_asymmetric = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
}

/* The calling thread's slot: a free one of the array (given back by a thread that ended), or the shared one. */
static DLS__COLD pin_slot *slot_take(void) {
  pthread_once(&g_once, pins_start);
  pin_slot *s = &g_crowd;
  for (int i = 0; i < PIN_SLOTS; i++) {
    bool free_slot = false;
    if (atomic_compare_exchange_strong_explicit(&g_slots[i].taken, &free_slot, true, memory_order_acquire,
                                                memory_order_relaxed)) {
      s = &g_slots[i];
      int n = atomic_load_explicit(&g_nslots, memory_order_relaxed);
      while (n < i + 1 && !atomic_compare_exchange_weak_explicit(&g_nslots, &n, i + 1, memory_order_seq_cst,
                                                                 memory_order_relaxed)) {
      }
      break;
    }
  }
  (void)pthread_setspecific(g_key, s);
  return s;
}

/* pin_try on a slot of the thread's own where changes fence every thread (g_asymmetric): as the inline pin
 * (dls__capture_pin_at, pin.h). */
static inline bool pin_try_own(pin_slot *s) {
  long odd = atomic_load_explicit(&s->held, memory_order_relaxed) + 1;
  atomic_store_explicit(&s->held, odd, memory_order_release);
  atomic_signal_fence(memory_order_seq_cst);
  return atomic_load_explicit(&dls__capture_changing, memory_order_relaxed) == 0;
}

/* Stores that the thread pins, then reads whether a change is underway (the fence between: the change's, or ours). */
static inline bool pin_try(pin_slot *s) {
  if (DLS__LIKELY(s != &g_crowd)) { /* only its thread writes the word */
    if (DLS__LIKELY(g_asymmetric))
      return pin_try_own(s);
    long odd = atomic_load_explicit(&s->held, memory_order_relaxed) + 1;
    atomic_store_explicit(&s->held, odd, memory_order_seq_cst);
    return atomic_load_explicit(&dls__capture_changing, memory_order_seq_cst) == 0;
  }
  atomic_fetch_add_explicit(&s->held, 1, memory_order_seq_cst);
  return atomic_load_explicit(&dls__capture_changing, memory_order_seq_cst) == 0;
}

static inline void pin_drop(pin_slot *s) {
  if (s != &g_crowd)
    atomic_store_explicit(&s->held, atomic_load_explicit(&s->held, memory_order_relaxed) + 1, memory_order_release);
  else
    atomic_fetch_sub_explicit(&s->held, 1, memory_order_release);
}

/* dls__capture_pin_at past its common case (pin.h): no slot yet, the shared slot, pins that fence themselves, a
 * change underway or the thread's own. */
static DLS__NOINLINE void pin_first_slow(dls__pin_thread *t) {
  if (t->changes > 0)
    return; /* the thread's own change holds everything still */
  pin_slot *s = t->slot;
  if (DLS__UNLIKELY(s == NULL)) {
    s = t->slot = slot_take();
    if (s != &g_crowd && g_asymmetric)
      t->own = &s->held; /* from now on the common case is the inline one */
  }
  while (DLS__UNLIKELY(!pin_try(s))) {
    pin_drop(s);
    pthread_mutex_lock(&g_change_mu); /* waits the change out */
    pthread_mutex_unlock(&g_change_mu);
  }
  t->counted = true;
  t->epoch = s != &g_crowd;
}

void dls__capture_pin_first(dls__pin_thread *t) {
  /* The inline pin met a change underway: its pin (the slot's word made odd: the thread holds no other) is taken
   * back, and the slow path waits the change out and pins again. */
  if (t->own != NULL && (atomic_load_explicit(t->own, memory_order_relaxed) & 1) != 0)
    pin_drop(t->slot);
  pin_first_slow(t);
}

void dls__capture_unpin_last(dls__pin_thread *t) {
  if (!t->counted)
    return;
  t->counted = false;
  t->epoch = false;
  pin_drop(t->slot);
}

void dls__capture_change_begin(void) {
  dls__pin_thread *t = &dls__pins;
  if (t->changes++ > 0)
    return;
  pthread_once(&g_once, pins_start);
  pthread_mutex_lock(&g_change_mu);
  atomic_store_explicit(&dls__capture_changing, 1, memory_order_seq_cst);
#ifdef DLS__HAVE_MEMBARRIER
  if (g_asymmetric) /* every thread passes a full fence: a pin that missed the flag is seen below */
    (void)syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
#endif
  /* A pin of this very thread's (a capture begun or a stream destroyed from inside pinned work, which pins never
   * allow: see pin.h) is not waited for: nothing could release it. */
  long own = t->counted ? 1 : 0;
  for (;;) {
    long held = atomic_load_explicit(&g_crowd.held, memory_order_seq_cst);
    int n = atomic_load_explicit(&g_nslots, memory_order_seq_cst);
    for (int i = 0; i < n; i++)
      held += atomic_load_explicit(&g_slots[i].held, memory_order_seq_cst) & 1;
    if (held <= own)
      break;
    sched_yield(); /* a pin lasts a few backend calls */
  }
}

void dls__capture_change_end(void) {
  if (--dls__pins.changes > 0)
    return;
  atomic_store_explicit(&dls__capture_changing, 0, memory_order_release);
  pthread_mutex_unlock(&g_change_mu);
}

bool dls__pin_grace_may_wait(void) { return dls__pins.held == 0; }

void dls__pin_grace(void) {
  pthread_once(&g_once, pins_start);
  /* No other thread has pinned in a slot of its own (a single-threaded program): none can be reading what the
   * caller made unreachable, and one that takes a slot from now on reads after it (slot_take's update of g_nslots
   * is ordered before its first pin's reads; the fence orders the caller's update before the load here). */
  pin_slot *own = dls__pins.slot;
  atomic_thread_fence(memory_order_seq_cst);
  int n = atomic_load_explicit(&g_nslots, memory_order_seq_cst);
  if (n == 0 || (n == 1 && own == &g_slots[0]))
    return;
  /* What the caller made unreachable is stored; every thread passes a full fence after it (or the caller fences,
   * where pins fence themselves): a pin that missed it is in its slot's word below. */
#ifdef DLS__HAVE_MEMBARRIER
  if (g_asymmetric)
    (void)syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  else
#endif
    atomic_thread_fence(memory_order_seq_cst);
  n = atomic_load_explicit(&g_nslots, memory_order_seq_cst);
  for (int i = 0; i < n; i++) {
    if (&g_slots[i] == own)
      continue;
    long w = atomic_load_explicit(&g_slots[i].held, memory_order_seq_cst);
    while ((w & 1) != 0 && atomic_load_explicit(&g_slots[i].held, memory_order_acquire) == w)
      sched_yield(); /* a pin lasts a few backend calls */
  }
}
