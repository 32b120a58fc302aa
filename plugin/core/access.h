/* SPDX-License-Identifier: Apache-2.0 */
/* A buffer's state, in one place: its accesses and the hazard rule that orders them (uses, parties, what a piece
 * of work declares: what must a stream wait for before this use), and where its free goes (the deallocation rule). */
#ifndef DLSTREAM_CORE_ACCESS_H
#define DLSTREAM_CORE_ACCESS_H

#include "core/use.h"

typedef struct dls__buffer dls__buffer;

/* A mode bit beside DLS_ACCESS_READ / WRITE: a use dlstream did not order (dls_buffer_record_use), noted as a party
 * more that never takes the place of a writer no wait has covered (access.c). */
#define DLS__ACCESS_DECLARED 4

/* The buffers one piece of work uses on one stream, each with how. */
typedef struct dls__access {
  dls__buffer *b;
  uint8_t mode;  /* DLS_ACCESS_READ | DLS_ACCESS_WRITE (| DLS__ACCESS_DECLARED) */
  int party;     /* set by dls__access_begin */
} dls__access;
typedef struct dls__accesses {
  int n;
  bool own;      /* set by dls__access_begin: every buffer is the stream's own eager memory no other uses */
  dls__stream *s;
  uint64_t cap;
  dls__access a[DLS_MAX_ARGS + 2];
} dls__accesses;
/* Adds a buffer (once; a buffer read and written is written). */
static inline void dls__access_add(dls__accesses *x, dls__buffer *b, int mode) {
  for (int i = 0; i < x->n; i++) {
    if (x->a[i].b == b) {
      x->a[i].mode |= (uint8_t)mode;
      return;
    }
  }
  x->a[x->n].b = b;
  x->a[x->n].mode = (uint8_t)mode;
  x->n++;
}
/* Before the work is queued on `s`: locks the buffers and makes `s` wait,
 * on the device, for what each access must follow (a read: the last writer
 * on another stream; a write: that writer and every reader since). On
 * failure nothing is locked and nothing was queued on `s` but waits. */
DLS__INTERNAL dls_status_t dls__access_begin(dls__accesses *x, dls__stream *s);
/* After the work was queued (`queued`) or not: notes the uses and unlocks.
 * A failed event record leaves its use stale, recorded again before any
 * wait on it; its status is returned. Needs no memory. */
DLS__INTERNAL dls_status_t dls__access_end(dls__accesses *x, bool queued);
/* One access: `order` waits as dls__access_begin does, then notes it; without
 * `order`, work already queued on `s` is noted only (dls_buffer_record_use). */
DLS__INTERNAL dls_status_t dls__buffer_access(dls__buffer *b, dls__stream *s, int mode, bool order);
/* A use of `mode` on `s` by work that dlstream queues later through raw pointers (the extension's uses of foreign
 * memory): `s` waits as dls__access_begin makes it, and nothing is noted yet; *out_epoch says the state it was
 * ordered against, for dls__buffers_note. */
DLS__INTERNAL dls_status_t dls__buffer_order(dls__buffer *b, dls__stream *s, int mode, uint32_t *out_epoch);
/* Once that work was queued: notes the uses of `n` buffers on `s` in one pass (one event recorded on `s` for all),
 * each ordered earlier by dls__buffer_order with its epoch; a buffer whose state another use changed since is
 * noted as a declared use (a party more). A buffer named twice is noted once with both modes. */
DLS__INTERNAL dls_status_t dls__buffers_note(dls__stream *s, dls__buffer *const *bufs, const int *modes,
                                             const uint32_t *epochs, int n);
/* An export to `consumer`: ordered as a write by it, and from then on, until
 * dls__buffer_export_end, every other stream's use waits for whatever the
 * consumer queued so far (it may write at any time). */
DLS__INTERNAL dls_status_t dls__buffer_export_begin(dls__buffer *b, dls__stream *consumer);
DLS__INTERNAL void dls__buffer_export_end(dls__buffer *b, dls__stream *consumer);
/* Marks the work queued on `s` so far, any stream (the allocation stream
 * too), as one the buffer's release waits for. Fails only when no use entry
 * could be made; a failed record leaves the use stale, recorded again by the
 * release (which waits on the host only if that fails too). */
DLS__INTERNAL dls_status_t dls__buffer_mark(dls__buffer *b, dls__stream *s);
/* A stale use's event missed its latest record: recording it now covers
 * everything queued on its stream so far (b->mu held). */
DLS__INTERNAL dls_status_t dls__use_refresh(dls__use *u);
/* Whether every recorded use has already completed (a cheap query each), never asked while a capture forbids it
 * and never of a captured record: a use in a capture counts as complete only with `captured_done` (its graph is
 * gone). The caller holds the buffer's lock, or its last reference. */
DLS__INTERNAL bool dls__buffer_uses_complete(dls__buffer *b, bool captured_done);
/* ---- memory a capture used and did not allocate (core/replay.c) ---- */

/* A use in own capture `cap` of memory it did not allocate: the capture keeps a reference (dls__capture_keep),
 * which its graph takes over, so the memory outlives the graph's replays. Out of host memory: nothing kept,
 * the use fails. b->mu held. */
DLS__INTERNAL dls_status_t dls__buffer_hold_for_capture(dls__buffer *b, uint64_t cap);
/* How the work of capture `cap` (over) used the buffer, for the hazard rule: DLS_ACCESS_WRITE set when some
 * of it wrote, DLS_ACCESS_READ when some read (since its last write); 0 when none was queued. */
DLS__INTERNAL int dls__buffer_capture_mode(dls__buffer *b, uint64_t cap);
/* The last reference is gone (dls__buffer_unref): frees or releases the
 * memory once every recorded use has passed, on a stream, a deferred queue,
 * or with its graph; drops the record. */
DLS__INTERNAL void dls__buffer_release(dls__buffer *b);

#endif /* DLSTREAM_CORE_ACCESS_H */
