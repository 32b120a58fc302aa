/* SPDX-License-Identifier: Apache-2.0 */
/* A buffer's accesses and the one rule that orders them on the device, for
 * every buffer dlstream knows (owned, borrowed, views, exports): a read on a
 * stream waits for the last writer on another stream; a write waits for the
 * last writer and for every reader on another stream since that write.
 *
 * The parties are the allocation stream (a borrowed buffer's producer: its
 * first writer) and one use entry per other stream (and capture). An entry's
 * pooled event is recorded after each of its uses, so a later crossing
 * waits on it (and a free waits on all of them, buffer.c); the allocation
 * stream records nothing, and a crossing to it records an event on it then
 * (every piece of its work queued so far: conservative, never wrong).
 * Hazards are kept per capture: uses in a capture are ordered among the
 * streams of that capture, eager ones among eager streams. */
#include <stdlib.h>
#include <string.h>

#include "core/access.h"
#include "core/buffer.h"
#include "core/capture.h"
#include "core/wait.h"

/* The allocation stream, as a party. */
#define ALLOC (-1)
/* No party yet. */
#define NONE (-2)

/* The use entry of `s` in capture `in_cap` (0: eager), added with a pooled
 * event when missing. A use in a capture gets its own entry: re-recording an
 * eager use's event in a capture would lose the eager work it marks. b->mu
 * held. */
static dls_status_t use_entry(dls__buffer *b, dls__stream *s, uint64_t in_cap, int *out) {
  for (int i = 0; i < b->nuses; i++) {
    if (dls__same_stream(b->uses[i].stream, s) && b->uses[i].cap_id == in_cap) {
      *out = i;
      return DLS_OK;
    }
  }
  if (b->nuses == b->cap) {
    int cap = b->cap * 2;
    dls__use *p = dls__malloc((size_t)cap * sizeof *p);
    if (p == NULL)
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a buffer's use set");
    memcpy(p, b->uses, (size_t)b->nuses * sizeof *p);
    if (b->uses != b->uses_inline)
      dls__free(b->uses);
    b->uses = p;
    b->cap = cap;
  }
  void *ev; /* from the use stream's device: a record must be made in its context */
  DLS__TRY(dls__event_pool_get(s->dev, &ev));
  dls__use *u = &b->uses[b->nuses];
  u->stream = s;
  u->event = ev;
  u->cap_id = in_cap;
  u->role = 0;
  u->stale = false;
  u->recorded = false;
  u->exports = 0;
  dls__stream_ref(s);
  *out = b->nuses++;
  return DLS_OK;
}

dls_status_t dls__use_refresh(dls__use *u) {
  if (DLS__LIKELY(!u->stale))
    return DLS_OK;
  uint64_t now = 0;
  (void)dls__stream_capture(u->stream, &now);
  if (now != u->cap_id) {
    if (u->cap_id == 0)
      return dls__fail(DLS_ERR_STATE, "a use of the buffer missed its record and its stream captures now");
    u->stale = false;
    return DLS_OK;
  }
  dls__device *ud = u->stream->dev;
  DLS__TRY(ud->be->event_record(ud->id, u->event, u->stream->native));
  u->stale = false;
  u->recorded = true;
  return DLS_OK;
}

/* Who stream `s` in capture `cap` is to the buffer: ALLOC, an entry, or NONE. */
static int party_of(const dls__buffer *b, const dls__stream *s, uint64_t cap) {
  if (cap == b->cap_id && dls__same_stream(b->stream, s))
    return ALLOC;
  for (int i = 0; i < b->nuses; i++)
    if (b->uses[i].cap_id == cap && dls__same_stream(b->uses[i].stream, s))
      return i;
  return NONE;
}

static uint8_t *role_of(dls__buffer *b, int k) { return k == ALLOC ? &b->alloc_role : &b->uses[k].role; }

/* Makes `s` wait for party `k`'s work (b->mu held). */
static dls_status_t wait_for(dls__buffer *b, dls__stream *s, int k) {
  if (k == ALLOC) {
    dls__stream *a = b->stream;
    if (a->native == (void *)UINTPTR_MAX || dls__same_stream(a, s))
      return DLS_OK; /* memory no stream produced (latch flags) */
    return dls__stream_order(s, a);
  }
  dls__use *u = &b->uses[k];
  if (dls__same_stream(u->stream, s))
    return DLS_OK;
  if (u->exports > 0) /* a consumer holding an export may write at any time: whatever it queued so far */
    return dls__stream_order(s, u->stream);
  if (!u->recorded && !u->stale)
    return DLS_OK; /* its work was never queued (the launch failed): nothing to wait for */
  DLS__TRY(dls__use_refresh(u));
  return s->dev->be->stream_wait_event(s->dev->id, s->native, u->event);
}

/* The waits a use of `mode` on `s` (party `me` of capture `cap`) needs (b->mu held). */
static dls_status_t order_use(dls__buffer *b, dls__stream *s, uint64_t cap, int me, int mode) {
  if (DLS__UNLIKELY(atomic_load_explicit(&dls__hazards_off, memory_order_relaxed)))
    return DLS_OK;
  /* A borrowed buffer's producer is eager: a capturing stream cannot wait
   * for it, and silently skipping it would read before the producer. */
  if (b->borrowed && cap != b->cap_id && b->stream->native != (void *)UINTPTR_MAX &&
      !dls__same_stream(b->stream, s))
    return dls__capture_check_pair(s, cap, b->stream, b->cap_id);
  uint8_t mine = me == NONE ? 0 : *role_of(b, me);
  bool write = (mode & DLS_ACCESS_WRITE) != 0;
  int parties = b->nuses;
  for (int k = ALLOC; k < parties; k++) {
    if (k == me || (k == ALLOC ? b->cap_id : b->uses[k].cap_id) != cap)
      continue;
    uint8_t r = *role_of(b, k);
    /* The writer, unless `s` already waited for it (it reads since, or wrote it); the readers, for a write;
     * a consumer holding an export, always. */
    bool need = (r & DLS__ROLE_WRITER && !(mine & (DLS__ROLE_READER | DLS__ROLE_WRITER))) ||
                (write && (r & DLS__ROLE_READER)) || (k != ALLOC && b->uses[k].exports > 0);
    if (need)
      DLS__TRY(wait_for(b, s, k));
  }
  return DLS_OK;
}

/* What a use of `mode` by party `me` of capture `cap` leaves (b->mu held). */
static void note_use(dls__buffer *b, uint64_t cap, int me, int mode) {
  if (mode & DLS_ACCESS_WRITE) {
    if (b->cap_id == cap)
      b->alloc_role = 0;
    for (int k = 0; k < b->nuses; k++)
      if (b->uses[k].cap_id == cap)
        b->uses[k].role = 0;
    *role_of(b, me) = DLS__ROLE_WRITER;
  } else {
    *role_of(b, me) |= DLS__ROLE_READER;
  }
}

/* ---- the accesses of one piece of work ---- */

void dls__access_add(dls__accesses *x, dls__buffer *b, int mode) {
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

static int by_address(const void *p, const void *q) {
  uintptr_t a = (uintptr_t)((const dls__access *)p)->b, b = (uintptr_t)((const dls__access *)q)->b;
  return a < b ? -1 : a > b;
}

static void unlock_all(dls__accesses *x, int n) {
  for (int i = 0; i < n; i++)
    dls__spin_unlock(&x->a[i].b->mu);
}

dls_status_t dls__access_begin(dls__accesses *x, dls__stream *s) {
  x->s = s;
  x->cap = 0;
  (void)dls__stream_capture(s, &x->cap);
  /* Locked in address order (no two pieces of work can deadlock), until
   * the work is queued and its uses noted: the rule sees accesses in the
   * order their work reaches the streams. */
  if (x->n > 1)
    qsort(x->a, (size_t)x->n, sizeof x->a[0], by_address);
  for (int i = 0; i < x->n; i++)
    dls__spin_lock(&x->a[i].b->mu);
  for (int i = 0; i < x->n; i++) {
    dls__buffer *b = x->a[i].b;
    int me = party_of(b, s, x->cap);
    dls_status_t st = order_use(b, s, x->cap, me, x->a[i].mode);
    /* The entry a use needs is made before the work is queued, so noting
     * the use afterwards needs no memory. */
    if (st == DLS_OK && me == NONE)
      st = use_entry(b, s, x->cap, &me);
    if (st != DLS_OK) {
      unlock_all(x, x->n);
      return st;
    }
    x->a[i].party = me;
  }
  return DLS_OK;
}

dls_status_t dls__access_end(dls__accesses *x, bool queued) {
  dls_status_t first = DLS_OK;
  for (int i = 0; queued && i < x->n; i++) {
    dls__buffer *b = x->a[i].b;
    int me = x->a[i].party;
    if (me != ALLOC) {
      /* Re-recording moves the marker past this use; the earlier uses on
       * the same stream are before it in stream order. A failed record is
       * made again before anything waits on it (dls__use_refresh). */
      dls__use *u = &b->uses[me];
      dls_status_t st = x->s->dev->be->event_record(x->s->dev->id, u->event, x->s->native);
      u->stale = st != DLS_OK;
      u->recorded |= st == DLS_OK;
      if (st != DLS_OK && first == DLS_OK)
        first = st;
    }
    note_use(b, x->cap, me, x->a[i].mode);
  }
  unlock_all(x, x->n);
  return first;
}

/* ---- single accesses ---- */

dls_status_t dls__buffer_access(dls__buffer *b, dls__stream *s, int mode, bool order) {
  dls__accesses x = {.n = 0};
  dls__access_add(&x, b, mode);
  if (!order) {
    /* Work already queued on `s` (a use dlstream did not see): noted only. */
    x.s = s;
    (void)dls__stream_capture(s, &x.cap);
    dls__spin_lock(&b->mu);
    int me = party_of(b, s, x.cap);
    dls_status_t st = me == NONE ? use_entry(b, s, x.cap, &me) : DLS_OK;
    if (st != DLS_OK) {
      dls__spin_unlock(&b->mu);
      return st;
    }
    x.a[0].party = me;
    return dls__access_end(&x, true);
  }
  DLS__TRY(dls__access_begin(&x, s));
  return dls__access_end(&x, true);
}

dls_status_t dls__buffer_mark(dls__buffer *b, dls__stream *s) {
  uint64_t cap = 0;
  (void)dls__stream_capture(s, &cap);
  dls__spin_lock(&b->mu);
  int k = NONE;
  for (int i = 0; i < b->nuses && k == NONE; i++)
    if (b->uses[i].cap_id == cap && dls__same_stream(b->uses[i].stream, s))
      k = i;
  dls_status_t st = k == NONE ? use_entry(b, s, cap, &k) : DLS_OK;
  if (st == DLS_OK) {
    dls__use *u = &b->uses[k];
    st = s->dev->be->event_record(s->dev->id, u->event, s->native);
    u->stale = st != DLS_OK;
    u->recorded |= st == DLS_OK;
  }
  dls__spin_unlock(&b->mu);
  return st;
}

dls_status_t dls__buffer_export_begin(dls__buffer *b, dls__stream *consumer) {
  dls__accesses x = {.n = 0};
  dls__access_add(&x, b, DLS_ACCESS_WRITE);
  DLS__TRY(dls__access_begin(&x, consumer));
  dls_status_t st = dls__access_end(&x, true);
  if (x.a[0].party != ALLOC) {
    dls__spin_lock(&b->mu);
    b->uses[x.a[0].party].exports++;
    dls__spin_unlock(&b->mu);
  }
  return st;
}

void dls__buffer_export_end(dls__buffer *b, dls__stream *consumer) {
  uint64_t cap = 0;
  (void)dls__stream_capture(consumer, &cap);
  dls__spin_lock(&b->mu);
  int me = party_of(b, consumer, cap);
  for (int k = 0; k < b->nuses && me == NONE; k++) /* the consumer's capture may be over: its eager entry */
    if (b->uses[k].exports > 0 && dls__same_stream(b->uses[k].stream, consumer))
      me = k;
  if (me >= 0 && b->uses[me].exports > 0) {
    /* What the consumer queued while it held the export: its last write. */
    dls__use *u = &b->uses[me];
    u->exports--;
    dls__device *d = consumer->dev;
    u->stale = d->be->event_record(d->id, u->event, consumer->native) != DLS_OK;
    u->recorded |= !u->stale;
    note_use(b, u->cap_id, me, DLS_ACCESS_WRITE);
  }
  dls__spin_unlock(&b->mu);
}
