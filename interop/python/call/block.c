/* SPDX-License-Identifier: Apache-2.0 */
/* What a block keeps (block.h): the framework tensors of its calls, in one list of the block's Stream object, let
 * go of with one release. */
#include "block.h"

#include "protocol.h"

PyObject *dlspy_block_of(dlspy_state *st, dls_stream_t stream) {
  PyObject *cur = NULL;
  if (PyContextVar_Get(st->stream_var, NULL, &cur) != 0) {
    PyErr_Clear();
    return NULL;
  }
  if (cur != NULL && PyObject_TypeCheck(cur, st->StreamType) && ((StreamObject *)cur)->handle.id == stream.id)
    return cur;
  Py_XDECREF(cur);
  return NULL;
}

/* Lets go of Stream `so`'s list with one release after the work queued on `s` so far. */
static void release_on(StreamObject *so, dls__stream *s) {
  PyObject *list = so->keep;
  so->keep = NULL;
  if (list != NULL)
    dls__ext_release_after(s, dlspy_release_pyobject, list); /* steals */
}

void dlspy_block_keep(PyObject *block, dls__stream *s, PyObject *obj) {
  StreamObject *so = (StreamObject *)block;
  if (so->keep == NULL)
    so->keep = PyList_New(0);
  if (so->keep == NULL || PyList_Append(so->keep, obj) != 0) { /* no memory: a release of its own */
    PyErr_Clear();
    dls__ext_release_after(s, dlspy_release_pyobject, obj);
    return;
  }
  Py_DECREF(obj);
  if (PyList_GET_SIZE(so->keep) >= DLSPY_BLOCK_KEEP_MAX) /* a block that goes on and on: a release per so many */
    release_on(so, s);
}

/* Settles the owed marks of Stream `so` on `s` (one record for all) and drops their references. */
static void settle(StreamObject *so, dls__stream *s) {
  if (so->owed != NULL && so->owed->n > 0)
    dls__ext_uses_settle(s, so->owed->b, so->owed->n);
  if (so->owed != NULL)
    so->owed->n = 0;
}

dls_status_t dlspy_block_note(PyObject *block, dls__stream *s, dls__buffer *const *bufs, const int *modes,
                              const uint32_t *epochs, int n) {
  StreamObject *so = (StreamObject *)block;
  dls__buffer *owed[DLS_MAX_ARGS + 2];
  int k = 0;
  dlspy_owed *held = so->owed;
  dls_status_t rc = dls__ext_uses_note_owed(s, bufs, modes, epochs, n, held ? held->b : NULL, held ? held->n : 0, owed,
                                            &k);
  if (k > 0 && so->owed == NULL)
    so->owed = PyMem_RawCalloc(1, sizeof *so->owed);
  if (k > 0 && so->owed == NULL) { /* no memory to keep them: settled now */
    dls__ext_uses_settle(s, owed, k);
    return rc;
  }
  for (int i = 0; i < k; i++) { /* each new to the block (the core skips those it holds) */
    if (so->owed->n == DLSPY_BLOCK_OWED_MAX) /* a block that touches many: settled so far (its work is queued) */
      settle(so, s);
    so->owed->b[so->owed->n++] = owed[i];
  }
  return rc;
}

void dlspy_block_release(dlspy_state *st, PyObject *obj) {
  if (obj == NULL || !PyObject_TypeCheck(obj, st->StreamType))
    return;
  StreamObject *so = (StreamObject *)obj;
  if (so->keep == NULL && (so->owed == NULL || so->owed->n == 0))
    return;
  dls_status_t rc = DLS_ERR_INVALID_HANDLE;
  dls__stream *s = so->handle.id != 0 && !atomic_load(&dlspy_dead) ? dls__ext_stream(so->handle, "use_stream",
                                                                                       "stream", &rc)
                                                                     : NULL;
  if (s != NULL) {
    settle(so, s);
    release_on(so, s);
    return;
  }
  /* The owed uses stay stale: whatever waits on them records their stream's mark first (the entries hold it). */
  for (int i = 0; so->owed != NULL && i < so->owed->n; i++)
    dls__buffer_unref(so->owed->b[i]);
  if (so->owed != NULL)
    so->owed->n = 0;
  if (so->keep == NULL)
    return;
  /* The handle is gone (a view whose Stream was closed, a runtime shut down): every use in the list was queued on
   * that stream, which nothing can mark any more; the device's idle is the one sign left that it passed them. */
  PyObject *list = so->keep;
  so->keep = NULL;
  if (!atomic_load(&dlspy_dead)) {
    Py_BEGIN_ALLOW_THREADS
    (void)dls_device_synchronize(so->device);
    Py_END_ALLOW_THREADS
  }
  Py_DECREF(list);
}

void dlspy_block_settle_before_capture(dlspy_state *st, PyObject *so) {
  dlspy_block_release(st, so);
  PyObject *cur = NULL;
  if (PyContextVar_Get(st->stream_var, NULL, &cur) != 0) {
    PyErr_Clear();
    return;
  }
  if (cur != NULL && cur != so && PyObject_TypeCheck(cur, st->StreamType) &&
      ((StreamObject *)cur)->handle.id == ((StreamObject *)so)->handle.id)
    dlspy_block_release(st, cur);
  Py_XDECREF(cur);
}

PyObject *dlspy_mod_block_release(PyObject *m, PyObject *stream) {
  dlspy_block_release(dlspy_state_of_module(m), stream);
  Py_RETURN_NONE;
}
