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
/* The thread's pins, in one thread-local (one lookup of the thread's storage per pin, not one per field). */
typedef struct dls__pin_thread {
  int held;            /* pins held (they nest) */
  bool counted;        /* the outer pin is counted (not taken inside a change) */
  int changes;         /* changes this thread is in (they nest) */
  struct pin_slot *slot; /* NULL until the thread's first pin */
} dls__pin_thread;
DLS__INTERNAL extern _Thread_local dls__pin_thread dls__pins;
DLS__INTERNAL void dls__capture_pin_first(dls__pin_thread *t);
DLS__INTERNAL void dls__capture_unpin_last(dls__pin_thread *t);
static DLS__HOT_INLINE void dls__capture_pin(void) {
  dls__pin_thread *t = &dls__pins;
  if (t->held++ == 0)
    dls__capture_pin_first(t);
}
static DLS__HOT_INLINE void dls__capture_unpin(void) {
  dls__pin_thread *t = &dls__pins;
  if (--t->held == 0)
    dls__capture_unpin_last(t);
}
/* A change of the capture state (a capture's begin, end or discard): from change_begin to change_end no pin is
 * held by another thread. Changes nest on their thread and exclude each other. Inside one, pins are free. */
DLS__INTERNAL void dls__capture_change_begin(void);
DLS__INTERNAL void dls__capture_change_end(void);

#endif /* DLSTREAM_CORE_PIN_H */
