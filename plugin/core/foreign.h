/* SPDX-License-Identifier: Apache-2.0 */
/* The record of foreign memory: memory that dlstream neither allocated nor exported (another framework's tensors,
 * NumPy arrays, any DLPack producer's), used by dlstream's work. A record is a buffer that no stream produced,
 * entered by (home device, address range) in the registry of foreign memory (ranges.h): its hazard state
 * (access.c) holds the uses of that range, so uses on different streams are ordered as uses of dlstream's own
 * tensors are, per range. Imports of foreign memory (dls_tensor_import_*, dls_tensor_view, dls_buffer_borrow) keep
 * their own state (their producer as their first writer) and are entered beside the records while they live: a
 * use of foreign memory joins every record and import its bytes overlap, and is noted in a record that holds all of
 * them; an import's producer first waits for the uses of its bytes that are already noted.
 *
 * A record leaves the registry once nothing but the registry holds it and every use of it has completed: records
 * are swept when their number doubled since the last sweep (at least 64) and at dls__foreign_sweep (after a host
 * wait). Memory freed and reused at the same address meets the old record: waits on completed (or still pending)
 * work of the old memory, never fewer waits. */
#ifndef DLSTREAM_CORE_FOREIGN_H
#define DLSTREAM_CORE_FOREIGN_H

#include "core/buffer.h"

/* Records and imports one use may join at most (records merge as uses overlap them: more are left only by imports
 * of overlapping memory that live at once). */
#define DLS__FOREIGN_MAX 32

/* The records and imports one use joins, each held (the caller drops each with dls__buffer_unref, or hands it
 * on). rec[0] is a record that holds the use's range (with `add`). */
typedef struct dls__foreign_set {
  dls__buffer *rec[DLS__FOREIGN_MAX];
  int n;
  /* rec[0] grew over other records the set names, which leave once the use is ordered: the use is ordered and
   * noted as a write of every record of the set (dls__foreign_retire then takes the others out). */
  bool merged;
} dls__foreign_set;

/* What a use of [lo, lo + size) of memory on `dev` joins: every record and import it overlaps. With `add`, where
 * no record holds all of the range, one is made to: a new record first in the set when none overlaps, else one of
 * them grown over the range and the records it overlaps (merged). size 0: none. Fails (nothing held) out of host
 * memory, or when more than DLS__FOREIGN_MAX overlap the range. */
DLS__INTERNAL dls_status_t dls__foreign_find(dls__device *dev, uintptr_t lo, size_t size, bool add,
                                             dls__foreign_set *out);
/* The quick way of a use of [lo, lo + size) of memory on `home` by eager work on `s`: where one record holds all of
 * the range and the use is noted at once on it (dls__buffer_order_noted: `s` is already its only writer), that
 * record, its epoch DLS__EPOCH_NOTED. The record is not held: it stays while the use is in flight, until
 * dls__buffers_note (or dls__buffer_unordered) lets go of it, after which the caller must not touch it. NULL (nothing
 * done): dls__foreign_find and dls__buffer_order. Asked only once dls__foreign_quick_ready(s) said yes, for the
 * caller's call's first such use (its later ones on `s` are not asked again: dls__buffers_note reads the capture
 * state before it records the mark, as for a capture begun after the first use). */
DLS__INTERNAL dls__buffer *dls__foreign_use_noted(DLDevice home, uintptr_t lo, size_t size, dls__stream *s, int mode);
/* Whether work on `s` may take the quick way: the record on, `s` eager (its capture state read, perhaps from the
 * driver). */
DLS__INTERNAL bool dls__foreign_quick_ready(dls__stream *s);
/* After a merged use was ordered: takes `rec` (a record of the set other than the first) out of the registry when
 * nothing else holds it (the registry's reference and `held` of the caller's), dropping the registry's reference.
 * Imports are left as they are. */
DLS__INTERNAL void dls__foreign_retire(dls__buffer *rec, int held);
/* An import of foreign memory `b` (borrowed, no alias, `size` > 0) produced on `producer`: the producer first
 * waits for the uses of its bytes noted so far (every record and import they overlap), then `b` is entered in the
 * registry until its last reference goes. */
DLS__INTERNAL dls_status_t dls__foreign_enter(dls__buffer *b, dls__stream *producer);
/* Takes out every record whose uses have all completed and that nothing but the registry holds. */
DLS__INTERNAL void dls__foreign_sweep(void);
/* Drops every record (dls_shutdown, once no handle is left). */
DLS__INTERNAL void dls__foreign_clear(void);

#endif /* DLSTREAM_CORE_FOREIGN_H */
