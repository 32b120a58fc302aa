/* SPDX-License-Identifier: Apache-2.0 */
/* The hazard rule (access.c) for work queued through raw pointers (the extension's uses of foreign memory): each
 * use ordered before the work is queued (dls__buffer_order), all of a call's noted in one pass once it is
 * (dls__buffers_note). A use of a record on the stream that is already its only writer is noted as it is ordered,
 * in flight until its stream's mark is recorded after the work (docs/hazard-rule.md, "Uses noted as they are
 * ordered"). */
#include "core/access.h"
#include "core/release.h"
#include "core/runtime.h"

dls_status_t dls__buffer_order(dls__buffer *b, dls__stream *s, int mode, uint32_t *out_epoch) {
  if (DLS__LIKELY(b->record)) {
    uint64_t cap = 0;
    (void)dls__stream_capture(s, &cap);
    if (dls__buffer_order_noted(b, s, cap, mode)) {
      *out_epoch = DLS__EPOCH_NOTED;
      return DLS_OK;
    }
  }
  /* dls__access_begin and dls__access_end(not queued) of one buffer, in one pin. */
  dls__capture_pin();
  uint64_t cap = 0;
  (void)dls__stream_capture(s, &cap);
  dls__spin_lock(&b->mu);
  int me;
  dls_status_t st = dls__access_begin_one(b, s, cap, mode, &me);
  /* acquire: a use whose count went back to 0 (release) recorded the mark this use's waits saw */
  *out_epoch = (b->notes & DLS__EPOCH_NOTES) |
               (atomic_load_explicit(&b->inflight, memory_order_acquire) != 0 ? DLS__EPOCH_UNSURE : 0);
  dls__spin_unlock(&b->mu);
  dls__capture_unpin();
  return st;
}

/* The uses of `n` buffers on `s` noted as they were ordered, once their work was queued: the mark each one's entry
 * waits on (`s`'s own, or another handle's of its stream) recorded after it, once for all that share it, then each
 * let go of; *marked: `s`'s own mark when it was one of them (recorded eagerly after the work: dls__buffer_mark_by).
 * Where that cannot be (`s` captures now, a record failed), none is let go of and DLS_ERR_STATE or the record's
 * status is returned: the caller notes them as declared uses (a party more), then lets go of them. */
static dls_status_t noted_mark(dls__stream *s, dls__buffer *const *bufs, int n, void **marked) {
  dls__capture_pin(); /* the capture state read, and the records made, in one pin */
  uint64_t cap = 0;
  (void)dls__stream_capture(s, &cap);
  dls_status_t st = cap == 0 ? DLS_OK : DLS_ERR_STATE;
  bool broken = atomic_load_explicit(&dls__noted_broken, memory_order_relaxed);
  void *last = NULL, *own = atomic_load_explicit(&s->mark, memory_order_acquire);
  bool own_recorded = false;
  for (int i = 0; i < n && st == DLS_OK; i++) {
    void *ev = atomic_load_explicit(&bufs[i]->noted_event, memory_order_relaxed);
    if (ev != last && !DLS__UNLIKELY(broken)) {
      st = s->dev->be->event_record(s->dev->be, s->dev->id, ev, s->native);
      own_recorded |= ev == own;
    }
    last = ev;
  }
  dls__capture_unpin();
  if (st == DLS_OK && own_recorded && own != NULL)
    *marked = own;
  for (int i = 0; i < n && st == DLS_OK; i++) /* release: an order that reads 0 waits on this record */
    atomic_fetch_sub_explicit(&bufs[i]->inflight, 1, memory_order_release);
  return st;
}

/* The entry of `s`'s eager use of `b` that waits on `s`'s own mark, or NULL. (b->mu held) */
static dls__use *own_entry(dls__buffer *b, dls__stream *s) {
  int me = dls__party_of(b, s, 0);
  dls__use *u = me >= 0 ? &b->uses[me] : NULL;
  return u != NULL && u->event == NULL && u->cap_id == 0 && u->stream == s ? u : NULL;
}

/* noted_mark with `s`'s mark owed: each use's entry left stale instead of the mark's record, each buffer not in
 * held[] held into owed[] (distinct ones). Only where every entry waits on `s`'s own mark (not another handle's of
 * its stream) and `s` captures nothing: else DLS_ERR_STATE, nothing done (noted_mark then records as usual). */
static dls_status_t noted_owed(dls__stream *s, dls__buffer *const *bufs, int n, dls__buffer *const *held, int nheld,
                               dls__buffer **owed, int *nowed) {
  void *own = atomic_load_explicit(&s->mark, memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (own == NULL || atomic_load_explicit(&bufs[i]->noted_event, memory_order_relaxed) != own)
      return DLS_ERR_STATE;
  dls__capture_pin(); /* the capture state read and the entries left stale in one pin, as noted_mark's record */
  uint64_t cap = 0;
  (void)dls__stream_capture(s, &cap);
  if (cap != 0) {
    dls__capture_unpin();
    return DLS_ERR_STATE;
  }
  bool broken = atomic_load_explicit(&dls__noted_broken, memory_order_relaxed), record = false;
  for (int i = 0; i < n; i++) {
    dls__buffer *b = bufs[i];
    bool again = false, kept = false;
    for (int k = 0; k < *nowed && !again; k++)
      again = owed[k] == b;
    for (int k = 0; k < nheld && !kept && !again; k++)
      kept = held[k] == b;
    if (again)
      continue;
    dls__spin_lock(&b->mu);
    dls__use *u = own_entry(b, s); /* (in flight, the entry keeps its role: it is there) */
    if (u != NULL && !broken) /* owed: recorded before any wait on it (dls__use_refresh), never complete till then */
      u->stale = u->owed = true;
    dls__spin_unlock(&b->mu);
    record |= u == NULL;
    if (kept)
      continue; /* the caller holds it already */
    dls__buffer_ref(b); /* until dls__buffers_settle: the record may leave the registry meanwhile */
    owed[(*nowed)++] = b;
  }
  if (record && !broken) /* an entry not found (never expected): the mark recorded after all covers every use */
    (void)s->dev->be->event_record(s->dev->be, s->dev->id, own, s->native);
  dls__capture_unpin();
  for (int i = 0; i < n; i++) /* release: an order that reads 0 finds the entry stale */
    atomic_fetch_sub_explicit(&bufs[i]->inflight, 1, memory_order_release);
  return DLS_OK;
}

dls_status_t dls__buffers_note_owed(dls__stream *s, dls__buffer *const *bufs, const int *modes, const uint32_t *epochs,
                                    int n, dls__buffer *const *held, int nheld, dls__buffer **owed, int *nowed) {
  *nowed = 0;
  int quick = 0;
  while (quick < n && epochs[quick] == DLS__EPOCH_NOTED && !(modes[quick] & DLS__ACCESS_DECLARED))
    quick++;
  if (quick == n && n <= DLS_MAX_ARGS + 2 && noted_owed(s, bufs, n, held, nheld, owed, nowed) == DLS_OK)
    return DLS_OK;
  return dls__buffers_note(s, bufs, modes, epochs, n, NULL);
}

void dls__buffers_settle(dls__stream *s, dls__buffer *const *bufs, int n) {
  enum { MAX = 64 };
  uint32_t notes[MAX];
  bool quiet[MAX];
  for (int i = 0; i < n && i < MAX; i++) { /* the state before the record: no use in flight, its count of notes */
    dls__buffer *b = bufs[i];
    dls__spin_lock(&b->mu);
    notes[i] = b->notes;
    quiet[i] = atomic_load_explicit(&b->inflight, memory_order_acquire) == 0;
    dls__spin_unlock(&b->mu);
  }
  dls__capture_pin();
  uint64_t cap = 0;
  (void)dls__stream_capture(s, &cap);
  void *own = atomic_load_explicit(&s->mark, memory_order_acquire);
  bool recorded = cap == 0 && own != NULL &&
                  s->dev->be->event_record(s->dev->be, s->dev->id, own, s->native) == DLS_OK;
  dls__capture_unpin();
  for (int i = 0; i < n; i++) {
    dls__buffer *b = bufs[i];
    if (recorded && i < MAX && quiet[i]) {
      /* No use noted since the snapshot, none in flight then: every use the entry owes was queued before the
       * record, which covers them. */
      dls__spin_lock(&b->mu);
      dls__use *u = b->notes == notes[i] && atomic_load_explicit(&b->inflight, memory_order_relaxed) == 0
                        ? own_entry(b, s)
                        : NULL;
      if (u != NULL && u->owed) {
        u->stale = u->owed = false;
        u->recorded = true;
      }
      dls__spin_unlock(&b->mu);
    }
    dls__buffer_unref(b);
  }
}

void dls__buffer_unordered(dls__buffer *b, uint32_t epoch) {
  if (epoch == DLS__EPOCH_NOTED) /* nothing was queued: the mark as it is covers it */
    atomic_fetch_sub_explicit(&b->inflight, 1, memory_order_release);
}

static dls_status_t note_ordered(dls__stream *s, dls__buffer *const *bufs, const int *modes, const uint32_t *epochs,
                                 int n);

/* dls__buffers_note; `all_noted`: the caller knows each use was noted as it was ordered, none declared (no scan). */
static DLS__HOT_INLINE dls_status_t note_uses(dls__stream *s, dls__buffer *const *bufs, const int *modes,
                                              const uint32_t *epochs, int n, void **out_marked, bool all_noted) {
  void *unused = NULL;
  if (out_marked == NULL)
    out_marked = &unused;
  *out_marked = NULL;
  /* Those noted as they were ordered (noted[], let go of once their mark is recorded), and the others (rest[]): a use
   * noted so that was used in more ways since (DLS__ACCESS_DECLARED) is in both, noted again as a declared use. */
  enum { MAX = DLS_MAX_ARGS + 2 };
  dls__buffer *noted[MAX], *rest[2 * MAX]; /* rest: each, and each noted one again */
  int rest_modes[2 * MAX];
  uint32_t rest_epochs[2 * MAX];
  int nn = 0, nr = 0;
  bool mark = false; /* some use noted as it was ordered needs the mark recorded (noted_mark) */
  if (n > MAX)
    n = MAX;
  int quick = all_noted ? n : 0; /* the common case: each noted as it was ordered, to be marked (nothing to sort) */
  while (quick < n && epochs[quick] == DLS__EPOCH_NOTED && !(modes[quick] & DLS__ACCESS_DECLARED))
    quick++;
  bool tried = DLS__LIKELY(quick == n);
  if (tried && noted_mark(s, bufs, n, out_marked) == DLS_OK)
    return DLS_OK;
  for (int i = 0; i < n; i++) {
    bool at_once = epochs[i] == DLS__EPOCH_NOTED, declared = (modes[i] & DLS__ACCESS_DECLARED) != 0;
    if (at_once)
      noted[nn++] = bufs[i];
    mark |= at_once && !declared;
    if (!at_once || declared) {
      rest[nr] = bufs[i];
      rest_modes[nr] = modes[i];
      rest_epochs[nr++] = at_once ? DLS__EPOCH_UNSURE : epochs[i];
    }
  }
  if (!tried && nr == 0 && mark && noted_mark(s, noted, nn, out_marked) == DLS_OK)
    return DLS_OK;
  if (!tried && mark && nr > 0 && noted_mark(s, noted, nn, out_marked) == DLS_OK)
    return note_ordered(s, rest, rest_modes, rest_epochs, nr);
  /* None noted as ordered, or their mark could not be recorded (`s` captures now, the record failed): those noted
   * in the capture `s` is in now, or recorded again (a failed record leaves its use stale), as declared uses: a
   * party more. Let go of once noted. */
  for (int i = 0; i < nn && mark; i++) {
    rest[nr] = noted[i];
    rest_modes[nr] = DLS_ACCESS_WRITE | DLS__ACCESS_DECLARED;
    rest_epochs[nr++] = DLS__EPOCH_UNSURE;
  }
  dls_status_t st = nr > 0 ? note_ordered(s, rest, rest_modes, rest_epochs, nr) : DLS_OK;
  for (int i = 0; i < nn; i++)
    atomic_fetch_sub_explicit(&noted[i]->inflight, 1, memory_order_release);
  return st;
}

dls_status_t dls__buffers_note(dls__stream *s, dls__buffer *const *bufs, const int *modes, const uint32_t *epochs,
                               int n, void **out_marked) {
  return note_uses(s, bufs, modes, epochs, n, out_marked, false);
}

dls_status_t dls__buffers_note_noted(dls__stream *s, dls__buffer *const *bufs, const int *modes,
                                     const uint32_t *epochs, int n, void **out_marked) {
  return note_uses(s, bufs, modes, epochs, n, out_marked, true);
}

/* dls__buffers_note for uses ordered (not noted) by dls__buffer_order. */
static dls_status_t note_ordered(dls__stream *s, dls__buffer *const *bufs, const int *modes, const uint32_t *epochs,
                                 int n) {
  dls__accesses x; /* not zeroed: its entries are written as they are added */
  x.n = 0;
  x.s = s;
  x.own = false;
  uint32_t epoch[DLS_MAX_ARGS + 2];
  for (int i = 0; i < n && x.n < DLS_MAX_ARGS + 2; i++) {
    int k = x.n;
    dls__access_add(&x, bufs[i], modes[i]);
    if (x.n > k)
      epoch[k] = epochs[i];
    else
      for (k = 0; x.a[k].b != bufs[i]; k++)
        ;
    if (epochs[i] != epoch[k]) /* the same buffer ordered twice with other notes between: not sure of its role */
      x.a[k].mode |= DLS__ACCESS_DECLARED;
  }
  dls__capture_pin(); /* as dls__access_begin's, until dls__access_end */
  (void)dls__stream_capture(s, &x.cap);
  for (int i = 1; i < x.n; i++) { /* address order, as every piece of work locks its buffers */
    dls__access v = x.a[i];
    uint32_t e = epoch[i];
    int j = i;
    for (; j > 0 && (uintptr_t)x.a[j - 1].b > (uintptr_t)v.b; j--) {
      x.a[j] = x.a[j - 1];
      epoch[j] = epoch[j - 1];
    }
    x.a[j] = v;
    epoch[j] = e;
  }
  for (int i = 0; i < x.n; i++) {
    dls__buffer *b = x.a[i].b;
    dls__spin_lock(&b->mu);
    int me = dls__party_of(b, s, x.cap);
    dls_status_t st = me == DLS__PARTY_NONE ? dls__use_entry(b, s, x.cap, &me) : DLS_OK;
    if (st != DLS_OK) {
      dls__unlock_all(&x, i + 1);
      dls__capture_unpin();
      return st;
    }
    x.a[i].party = me;
    if ((b->notes & DLS__EPOCH_NOTES) != epoch[i]) /* another use was noted since it was ordered: a party more, no more */
      x.a[i].mode |= DLS__ACCESS_DECLARED;
  }
  return dls__access_end(&x, true);
}
