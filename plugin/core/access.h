/* SPDX-License-Identifier: Apache-2.0 */
/* A buffer's state, in one place: its accesses and the hazard rule that orders them (uses, parties, what a piece
 * of work declares: what must a stream wait for before this use), and where its free goes (the deallocation rule). */
#ifndef DLSTREAM_CORE_ACCESS_H
#define DLSTREAM_CORE_ACCESS_H

#include "base/spin.h"
#include "core/capture.h"
#include "core/use.h"

struct dls__deferred;

typedef struct dls__buffer dls__buffer;
/* The fields a use reads and writes come first: the first cache line holds all that a use of the stream's own
 * memory touches (the lock included), the next one the hazard state and the first use entries. A crossing's
 * bookkeeping runs between driver calls that leave little of it in the first-level cache. */
struct dls__buffer {
  void *ptr;
  size_t size;
  dls__device *dev;
  dls__stream *stream;  /* allocation / producer stream, ref held */
  struct dls__buffer *alias; /* borrowed memory that lies in an exported buffer: that buffer (ref held), whose
                                hazard state its uses share (dls__buffer_hazards); NULL otherwise */
  dls__use *uses;       /* uses_inline or heap */
  uint64_t cap_id;      /* allocated in this capture (0: eagerly) */
  int nuses;
  dls__spin mu;         /* the use set and the hazards: held from a use's waits until its work is noted */
  bool borrowed;
  bool record;          /* a record of foreign memory (foreign.c): no producer, its range in that registry */
  bool entered;         /* borrowed foreign memory (an import) whose range is in the registry of foreign records
                           until its last reference goes (foreign.c), so that uses of its bytes join its state */
  bool cached;          /* owned memory of a size class of the cache (core/cache.c): its free may keep it there */
  bool alloc_marked;    /* the allocation stream's mark was recorded, eagerly, after its latest use (access.c:
                           once other streams use the buffer, a crossing from it waits on that, not on a record
                           made then) */
  uint16_t alloc_exports; /* live exports to the allocation stream as their consumer: it may write at any time */
  int cap;              /* the room in `uses` */
  /* The hazard state (access.c), a bit per party: bit 0 the allocation (producer) stream, bit 1 + i use entry i,
   * bit 63 every entry from the 62nd on (told apart by a walk). */
  uint64_t writers;     /* the last writer of each capture (and of eager work); the producer at first */
  uint64_t readers;     /* the parties that read since that write (each waited for the writer) */
  uint64_t eager_uses;  /* the entries of eager work (cap_id 0) */
  uint64_t exporting;   /* the parties holding a live export: they may write at any time */
  uint32_t notes;       /* counts the notes of uses (access.c): a use ordered earlier is noted as ordered only
                           while no other use was noted since */
  _Atomic int inflight; /* uses of a record noted as they were ordered (dls__buffer_order), their work not yet marked
                           (dls__buffers_note): meanwhile every note is a declared use's (access.c) */
  _Atomic(void *) noted_event; /* while `inflight`: the event their stream's entry waits on, which they record */
  dls__use uses_inline[DLS__USES_INLINE];
  _Atomic int refs;     /* handle + tensors + exports + aliases (+ a registry lookup, exported.c) */
  _Atomic bool exported; /* in the registry of exported memory (exported.c) until its last reference goes */
  bool release_unordered; /* the release frees at once (host memory): it must
                             also wait for work queued on the producer stream */
  dls_release_fn release; /* borrowed only */
  void *user_data;
  uint64_t id;          /* its handle, 0 if none */
  dls__graph_owner owner; /* allocated in a capture: the graph that owns its memory once the capture ended (ref
                            held) and its replay count */
  struct dls__deferred *spare; /* borrowed with a release: its deferred-queue entry, made with
                                  the buffer so that deferring the release needs no memory */
};

/* The buffer whose hazard state a use of `b` joins: `b`, or the exported buffer an alias lies in. */
static inline dls__buffer *dls__buffer_hazards(dls__buffer *b) {
  return DLS__UNLIKELY(b->alias != NULL) ? b->alias : b;
}

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
 * ordered against, for dls__buffers_note. Where `b` is a record no other stream writes (a write: nor reads), as
 * when the same memory is used again on the same stream, the use waits for nothing and is noted at once, as in
 * flight: its epoch says so, and dls__buffers_note then only records the stream's mark (docs/hazard-rule.md,
 * access_ordered.c). */
DLS__INTERNAL dls_status_t dls__buffer_order(dls__buffer *b, dls__stream *s, int mode, uint32_t *out_epoch);
/* Once that work was queued: notes the uses of `n` buffers on `s` in one pass (one event recorded on `s` for all),
 * each ordered earlier by dls__buffer_order with its epoch; a buffer whose state another use changed since is
 * noted as a declared use (a party more). A buffer named twice is noted once with both modes. *out_marked (NULL:
 * not asked): `s`'s mark where it was recorded eagerly after the work, for dls__buffer_mark_by; else NULL. */
DLS__INTERNAL dls_status_t dls__buffers_note(dls__stream *s, dls__buffer *const *bufs, const int *modes,
                                             const uint32_t *epochs, int n, void **out_marked);
/* dls__buffers_note where the caller knows that each use was noted as it was ordered (epoch DLS__EPOCH_NOTED) and
 * none is declared: they are not looked over first. */
DLS__INTERNAL dls_status_t dls__buffers_note_noted(dls__stream *s, dls__buffer *const *bufs, const int *modes,
                                                   const uint32_t *epochs, int n, void **out_marked);
/* dls__buffers_note for a block's uses (interop/python/call/block.h) where each was noted as it was ordered, on
 * `s`'s own mark: that mark is owed, not recorded (no driver call per call): each use's entry is left stale, so that
 * whatever waits on it or asks whether it completed first records the mark (dls__use_refresh), and each buffer not
 * in held[] (the `nheld` the caller holds for its settle already) is held into owed[] (*nowed of them, at most n)
 * for dls__buffers_settle at the block's end. Any other case is dls__buffers_note's (nothing owed). */
DLS__INTERNAL dls_status_t dls__buffers_note_owed(dls__stream *s, dls__buffer *const *bufs, const int *modes,
                                                  const uint32_t *epochs, int n, dls__buffer *const *held, int nheld,
                                                  dls__buffer **owed, int *nowed);
/* Records `s`'s mark once for the owed uses of `n` buffers (each held, the references dropped here), and clears the
 * stale flag of each one's entry on `s` that no use noted since the mark's record could have made stale again: the
 * owed marks settled at a block's end, so that no stale use is left behind it (a stream that begins a capture
 * later could not record it). Where `s` captures now or the record fails, the uses stay stale. */
DLS__INTERNAL void dls__buffers_settle(dls__stream *s, dls__buffer *const *bufs, int n);
/* A use ordered by dls__buffer_order whose work was not queued after all: a use noted as it was ordered is let go of
 * (its note stays: a party more); one only ordered needs nothing. */
DLS__INTERNAL void dls__buffer_unordered(dls__buffer *b, uint32_t epoch);
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
/* The same, where `recorded` (NULL: none) is `s`'s mark, recorded eagerly after the work to mark
 * (dls__buffers_note's *out_marked): an eager use entry that waits on it is marked by that record, with no other
 * made (a later record of the mark covers more work, never less). */
DLS__INTERNAL dls_status_t dls__buffer_mark_by(dls__buffer *b, dls__stream *s, const void *recorded);
/* A stale use's event missed its latest record: recording it now covers
 * everything queued on its stream so far (b->mu held). */
DLS__INTERNAL dls_status_t dls__use_refresh(dls__use *u);
/* ---- memory a capture used and did not allocate (core/replay.c) ---- */

/* A use in own capture `cap` of memory it did not allocate: the capture keeps a reference (dls__capture_keep),
 * which its graph takes over, so the memory outlives the graph's replays. Out of host memory: nothing kept,
 * the use fails. b->mu held. */
DLS__INTERNAL dls_status_t dls__buffer_hold_for_capture(dls__buffer *b, uint64_t cap);
/* How the work of capture `cap` (over) used the buffer, for the hazard rule: DLS_ACCESS_WRITE set when some
 * of it wrote, DLS_ACCESS_READ when some read (since its last write); 0 when none was queued. */
DLS__INTERNAL int dls__buffer_capture_mode(dls__buffer *b, uint64_t cap);

/* ---- the rule's parties, for its two files: access.c (the rule) and access_ordered.c (uses of work queued through
 * raw pointers, ordered first and noted once the work is queued) ---- */

/* The allocation stream, as a party. */
#define DLS__PARTY_ALLOC (-1)
/* No party yet. */
#define DLS__PARTY_NONE (-2)

/* A party's bit in the hazard state (buffer.h): DLS__PARTY_ALLOC's is bit 0, entry k's
 * bit 1 + k; the entries from DLS__SPILL_FROM on share bit 63. A spilled party is
 * never sure of its own role, so it waits for the writer, and a wait for the
 * spill bit waits for each spilled party of the capture: conservative, never
 * wrong. The spill bit, once set, stays. */
#define DLS__SPILL_FROM 62
#define DLS__SPILL ((uint64_t)1 << 63)
static inline uint64_t dls__party_bit(int k) { return k < DLS__SPILL_FROM ? (uint64_t)1 << (k + 1) : DLS__SPILL; }

/* The parties of capture `cap` (0: eager work). b->mu held. */
static inline uint64_t dls__parties_in(const dls__buffer *b, uint64_t cap) {
  uint64_t in = b->cap_id == cap ? 1 : 0;
  if (DLS__LIKELY(cap == 0))
    return in | b->eager_uses;
  for (int k = 0; k < b->nuses; k++)
    if (b->uses[k].cap_id == cap)
      in |= dls__party_bit(k);
  return in;
}

/* Who stream `s` in capture `cap` is to the buffer: DLS__PARTY_ALLOC, an entry, or DLS__PARTY_NONE. */
static DLS__HOT_INLINE int dls__entry_of(const dls__buffer *b, const dls__stream *s, uint64_t cap);
static DLS__HOT_INLINE int dls__party_of(const dls__buffer *b, const dls__stream *s, uint64_t cap) {
  if (cap == b->cap_id && dls__same_stream(b->stream, s))
    return DLS__PARTY_ALLOC;
  return dls__entry_of(b, s, cap);
}
/* dls__party_of among the use entries only: an entry, or DLS__PARTY_NONE. */
static DLS__HOT_INLINE int dls__entry_of(const dls__buffer *b, const dls__stream *s, uint64_t cap) {
  for (int i = 0; i < b->nuses; i++)
    if (b->uses[i].cap_id == cap && dls__same_stream(b->uses[i].stream, s))
      return i;
  return DLS__PARTY_NONE;
}

/* What a use dlstream did not order leaves: a party more, never one less (access.c). (b->mu held) */
DLS__INTERNAL void dls__note_declared(dls__buffer *b, uint64_t cap, int me, int mode);

/* What a use of `mode` by party `me` of capture `cap` leaves (b->mu held). */
static DLS__HOT_INLINE void dls__note_use(dls__buffer *b, uint64_t cap, int me, int mode) {
  b->notes++;
  /* A use noted as it was ordered may not be marked yet (its work not queued): no one takes the writer's place. */
  if (DLS__UNLIKELY(mode & DLS__ACCESS_DECLARED) ||
      DLS__UNLIKELY(atomic_load_explicit(&b->inflight, memory_order_relaxed) != 0)) {
    dls__note_declared(b, cap, me, mode);
    return;
  }
  if (mode & DLS_ACCESS_WRITE) {
    uint64_t in = dls__parties_in(b, cap) & ~DLS__SPILL; /* the spill bit stays: its other parties may have roles */
    b->writers = (b->writers & ~in) | dls__party_bit(me);
    b->readers &= ~in;
  } else {
    b->readers |= dls__party_bit(me);
  }
}

/* Lets go of the locks of the first `n` buffers of `x`. */
static inline void dls__unlock_all(dls__accesses *x, int n) {
  for (int i = 0; i < n; i++)
    dls__spin_unlock(&x->a[i].b->mu);
}

/* The use entry of `s` in capture `in_cap` (0: eager), added with a pooled event when missing. (b->mu held) */
DLS__INTERNAL dls_status_t dls__use_entry(dls__buffer *b, dls__stream *s, uint64_t in_cap, int *out);
/* One buffer's part of dls__access_begin: its waits, and the party the use is (*out_party), with the entry noting
 * it will need made now. (b->mu held, and left held whatever it returns) */
DLS__INTERNAL dls_status_t dls__access_begin_one(dls__buffer *b, dls__stream *s, uint64_t cap, int mode,
                                                 int *out_party);

/* ---- uses of records noted as they are ordered (access_ordered.c; foreign.c finds and orders them in one step) ---- */

/* The epoch of a use ordered by dls__buffer_order, for dls__buffers_note: the buffer's count of notes, and two
 * flags. */
#define DLS__EPOCH_NOTES 0x3fffffffu
#define DLS__EPOCH_UNSURE 0x40000000u /* uses noted as they were ordered were in flight: it is noted as a declared use */
#define DLS__EPOCH_NOTED 0x80000000u  /* noted as it was ordered: only its stream's mark is left to record */

/* Whether an eager use of `mode` (party `me`) of record `b` waits for nothing, so that it may be noted as it is
 * ordered: no other stream of the record is a writer, nor, for a write, a reader (the record's allocation party is
 * the "no stream" producer, whose work is none); no export. (b->mu held) */
static inline bool dls__noted_at_once(const dls__buffer *b, int me, int mode) {
  if (me < 0 || me >= DLS__SPILL_FROM || b->exporting != 0 || b->cap_id != 0)
    return false;
  const dls__use *u = &b->uses[me];
  uint64_t others = b->eager_uses & ~dls__party_bit(me); /* the other eager entries (not DLS__PARTY_ALLOC's bit) */
  uint64_t roles = (mode & DLS_ACCESS_WRITE) ? b->writers | b->readers : b->writers;
  /* A stale entry (its mark owed, or a record that failed) may be noted again: the record made before any wait on
   * it covers this use too. */
  return u->cap_id == 0 && u->event == NULL && (roles & others) == 0;
}

/* dls__buffer_order's quick way alone, for record `b` (eager work: `cap`, the capture state of `s` read by the caller,
 * is 0): whether the use was noted at once (its epoch DLS__EPOCH_NOTED); false, nothing done, where it must be
 * ordered. */
static DLS__HOT_INLINE bool dls__buffer_order_noted(dls__buffer *b, dls__stream *s, uint64_t cap, int mode) {
  /* Noted at once, with no pin: it queues nothing, and leaves the state as it was, `s` the only writer (the capture
   * state read by the caller only tells it apart: dls__buffers_note reads it again, in its pin, before the mark is
   * recorded). In flight until then: meanwhile every note is a declared use's, and a use ordered meanwhile notes as
   * one (DLS__EPOCH_UNSURE), so none takes the writer's place without having waited for this work. */
  if (cap != 0)
    return false;
  dls__spin_lock(&b->mu);
  /* A record's allocation party is the "no stream" producer, no stream work is queued on (a native no backend
   * has): `s` is one of its use entries or none of its parties. */
  int me = dls__entry_of(b, s, 0);
  bool noted = dls__noted_at_once(b, me, mode);
  if (noted) {
    dls__note_use(b, 0, me, mode);
    /* The entry's stream may be another handle of `s`: its mark is the one a later use waits on. It stays while in
     * flight (the entry keeps its role), and so does the event. */
    atomic_store_explicit(&b->noted_event, dls__use_event(&b->uses[me]), memory_order_relaxed);
    atomic_fetch_add_explicit(&b->inflight, 1, memory_order_relaxed);
  }
  dls__spin_unlock(&b->mu);
  return noted;
}

#endif /* DLSTREAM_CORE_ACCESS_H */
