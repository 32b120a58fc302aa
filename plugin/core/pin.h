/* SPDX-License-Identifier: Apache-2.0 */
/* The capture state held still: pins (a decision read from the capture state and the calls that carry it out) and
 * changes (a capture's begin, end or discard), which wait for the pins held and keep new ones out. */
#ifndef DLSTREAM_CORE_PIN_H
#define DLSTREAM_CORE_PIN_H

#include "core/runtime.h"

/* A pin holds the capture state of every stream still: while a thread holds one, no capture dlstream begins, ends
 * or discards (a change) starts or finishes, so what the core reads of a stream's capture inside the pin
 * (dls__stream_capture) is where the backend puts the memory, the frees and the work it is given inside the same
 * pin. A change waits for the pins held, and keeps new ones out, for the span of its own backend calls. Pins
 * nest; the outer one writes a line of the thread's own twice (no locked instruction where the kernel lets a
 * change fence every thread itself: membarrier), and waits only while a change is underway. A pin is never held
 * across a user's callback, Python code or a host wait (a change held up by one could wait for it forever): only
 * the decision and the calls that carry it out. Captures dlstream did not begin (torch.cuda.graph) change outside
 * any pin: that race is the caller's. */
/* The thread's pins, in one thread-local (one lookup of the thread's storage per pin, not one per field; a call
 * that pins and reads inside its pin looks it up once and passes it on: in a shared library each lookup is a call). */
typedef struct dls__pin_thread {
  int held;            /* pins held (they nest) */
  bool counted;        /* the outer pin is counted (not taken inside a change) */
  bool epoch;          /* ... in a slot of the thread's own: a grace period (dls__pin_grace) waits for it */
  int changes;         /* changes this thread is in (they nest) */
  _Atomic long *own;   /* the word of the thread's own slot where changes fence every thread (pin.c: membarrier);
                          NULL until the first pin, or for a thread that pins otherwise: its pins go out of line */
  struct pin_slot *slot; /* NULL until the thread's first pin */
} dls__pin_thread;
DLS__INTERNAL extern _Thread_local dls__pin_thread dls__pins;
/* Set while a change is underway (pin.c). */
DLS__INTERNAL extern _Atomic int dls__capture_changing;
DLS__INTERNAL void dls__capture_pin_first(dls__pin_thread *t);
DLS__INTERNAL void dls__capture_unpin_last(dls__pin_thread *t);
/* The pin on the thread's own pins `t` (&dls__pins). Its common case (a slot of the thread's own, changes fencing
 * every thread, no change underway) is inline: a plain store to the slot's word, a plain load of whether a change
 * is underway (pin.c says why no fence is needed); everything else is dls__capture_pin_first's. */
static DLS__HOT_INLINE void dls__capture_pin_at(dls__pin_thread *t) {
  if (t->held++ != 0)
    return;
  _Atomic long *w = t->own;
  if (DLS__LIKELY(w != NULL && t->changes == 0)) {
    /* release: free on x86; a grace period that sees the word move past an unpin sees that section's reads */
    atomic_store_explicit(w, atomic_load_explicit(w, memory_order_relaxed) + 1, memory_order_release);
    atomic_signal_fence(memory_order_seq_cst); /* the compiler keeps the load after the store; the change fences */
    if (DLS__LIKELY(atomic_load_explicit(&dls__capture_changing, memory_order_relaxed) == 0)) {
      t->counted = true;
      t->epoch = true;
      return;
    }
  }
  dls__capture_pin_first(t); /* takes back a pin made above while a change is underway, and waits it out */
}
static DLS__HOT_INLINE void dls__capture_unpin_at(dls__pin_thread *t) {
  if (--t->held != 0)
    return;
  _Atomic long *w = t->own;
  if (DLS__LIKELY(w != NULL && t->epoch)) { /* counted in the slot `own` names */
    t->counted = false;
    t->epoch = false;
    atomic_store_explicit(w, atomic_load_explicit(w, memory_order_relaxed) + 1, memory_order_release);
    return;
  }
  dls__capture_unpin_last(t);
}
static DLS__HOT_INLINE void dls__capture_pin(void) { dls__capture_pin_at(&dls__pins); }
static DLS__HOT_INLINE void dls__capture_unpin(void) { dls__capture_unpin_at(&dls__pins); }
/* A change of the capture state (a capture's begin, end or discard): from change_begin to change_end no pin is
 * held by another thread. Changes nest on their thread and exclude each other. Inside one, pins are free. */
DLS__INTERNAL void dls__capture_change_begin(void);
DLS__INTERNAL void dls__capture_change_end(void);

/* ---- the pin as an epoch ----
 * A pin in a slot of the thread's own is also a read-side section: a grace period (dls__pin_grace) returns once
 * every thread pinned when it began has unpinned. Tables whose handles end by retirement (base/handle.h: their
 * objects are dropped, and their slots reused, only after a grace period) can then be read inside a pin without a
 * hold: no locked instruction, nothing to let go of. */
/* Waits until every other thread that pins now has unpinned (a few backend calls at most). The caller holds no
 * pin (dls__pin_grace_may_wait): two threads waiting inside their pins would wait for each other. */
DLS__INTERNAL void dls__pin_grace(void);
DLS__INTERNAL bool dls__pin_grace_may_wait(void);

/* The object of a live handle of a retiring table (event), looked up inside the caller's pin: the pin keeps it (no
 * hold) where the thread pins in its own slot; elsewhere (a thread past the slots, or inside a change) it is held
 * as dls__hold_get does. Stale handles fail with the message as there. The object may be used until the unpin:
 * a call that reads this way ends no handle of that table inside its pin. */
static DLS__HOT_INLINE void *dls__pinned_lookup(const dls__pin_thread *pt, dls__hold *h, dls__table *t, uint64_t id,
                                                const char *call, const char *arg, dls_status_t *out_status,
                                                bool mark_read) {
  if (DLS__LIKELY(pt->epoch)) {
    void *obj = mark_read ? dls__slot_peek_read(t, id) : dls__slot_peek_live(t, id);
    if (DLS__LIKELY(obj != NULL)) {
      h->table = t;
      return obj;
    }
  }
  return dls__hold_get(h, t, id, call, arg, out_status);
}
static DLS__HOT_INLINE void *dls__pinned_get(const dls__pin_thread *pt, dls__hold *h, dls__table *t, uint64_t id,
                                             const char *call, const char *arg, dls_status_t *out_status) {
  return dls__pinned_lookup(pt, h, t, id, call, arg, out_status, false);
}
/* The same for a table that retires what was read (stream: base/handle.h, .retire_read_only): the handle is marked
 * read at its first such lookup, and its end then waits for a grace period before the drop. Default streams'
 * reserved handles resolve as dls__hold_get resolves them (they live as long as their device). */
static DLS__HOT_INLINE void *dls__pinned_get_read(const dls__pin_thread *pt, dls__hold *h, dls__table *t, uint64_t id,
                                                  const char *call, const char *arg, dls_status_t *out_status) {
  return dls__pinned_lookup(pt, h, t, id, call, arg, out_status, true);
}
#endif /* DLSTREAM_CORE_PIN_H */
