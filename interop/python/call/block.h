/* SPDX-License-Identifier: Apache-2.0 */
/* What a block keeps (block.c): a framework tensor used inside a use_stream() or branch block, on the block's
 * stream (the framework's current stream there, dlstream/_carry.py), must stay alive until that stream passes the
 * use: its framework frees in order on the stream its memory came from (perhaps another branch's, or the block's
 * itself once the block is over). A call outside blocks keeps such a tensor with a release of its own (a mark
 * recorded after the call, an entry of the deferred queue); in a block the tensors of every call go into one list
 * of the block's Stream object instead, once each call's work is queued, and the list is let go of with one
 * release: at the block's exit (an exception's exit too), at the Stream's close or its end, and whenever it holds
 * DLSPY_BLOCK_KEEP_MAX objects. Each release marks the work queued on the stream so far, which covers every use of
 * every object in the list (each was queued before it went in). */
#ifndef DLSTREAM_PY_BLOCK_H
#define DLSTREAM_PY_BLOCK_H

#include "../dlspy.h"

/* The objects a Stream's list holds at most before it is let go of (one release per this many calls' tensors in a
 * block that never ends). */
#define DLSPY_BLOCK_KEEP_MAX 256

/* The uses of foreign memory a block's calls note owe their stream's mark (docs/hazard-rule.md, "Owed marks"):
 * their records are held in the block's Stream object, distinct ones, at most this many before they are settled. */
#define DLSPY_BLOCK_OWED_MAX 64
typedef struct dlspy_owed {
  int n;
  dls__buffer *b[DLSPY_BLOCK_OWED_MAX];
} dlspy_owed;

/* The block's Stream object (a new reference) when this context's use_stream() variable names `stream`; else NULL
 * (nothing raised). */
PyObject *dlspy_block_of(dlspy_state *st, dls_stream_t stream);
/* A BLOCK post's object once the call's work was queued on `s` (the stream of Stream `block`): into the list
 * (stolen). */
void dlspy_block_keep(PyObject *block, dls__stream *s, PyObject *obj);
/* Notes a block's call's uses of `n` buffers on `s` once its work is queued (dls__ext_uses_note_owed), the records
 * whose mark is owed kept in Stream `block` until dlspy_block_release settles them. Its status. */
dls_status_t dlspy_block_note(PyObject *block, dls__stream *s, dls__buffer *const *bufs, const int *modes,
                              const uint32_t *epochs, int n);
/* Settles the owed marks of Stream `so` (any object: not a Stream, or none, does nothing) with one record, and lets
 * go of its list with one release after the work queued on its stream so far; where its handle is gone, the owed
 * uses stay stale (recorded before any wait) and the list goes once its device is idle. Never raises. */
void dlspy_block_release(dlspy_state *st, PyObject *so);
/* Before a capture begins on Stream `so`: dlspy_block_release of it and of this context's block Stream on the same
 * stream, so that no owed mark is left on a stream that captures (its record would be refused then). */
void dlspy_block_settle_before_capture(dlspy_state *st, PyObject *so);
/* _block_release(stream): dlspy_block_release, for use_stream's exit. */
PyObject *dlspy_mod_block_release(PyObject *m, PyObject *stream);

#endif /* DLSTREAM_PY_BLOCK_H */
