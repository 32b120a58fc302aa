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
DLS__INTERNAL extern _Thread_local int dls__pins_held;
DLS__INTERNAL void dls__capture_pin_first(void);
DLS__INTERNAL void dls__capture_unpin_last(void);
static DLS__HOT_INLINE void dls__capture_pin(void) {
  if (dls__pins_held++ == 0)
    dls__capture_pin_first();
}
static DLS__HOT_INLINE void dls__capture_unpin(void) {
  if (--dls__pins_held == 0)
    dls__capture_unpin_last();
}
/* A change of the capture state (a capture's begin, end or discard): from change_begin to change_end no pin is
 * held by another thread. Changes nest on their thread and exclude each other. Inside one, pins are free. */
DLS__INTERNAL void dls__capture_change_begin(void);
DLS__INTERNAL void dls__capture_change_end(void);

#endif /* DLSTREAM_CORE_PIN_H */
