/* SPDX-License-Identifier: Apache-2.0 */
/* What a block keeps (block.h): the framework tensors of its calls, in one list of the block's Stream object, let
 * go of with one release. */
#include "block.h"

#include "protocol.h"

/* The block's Stream object (a new reference) when this context's use_stream() variable still names the call's
 * stream; else NULL (nothing raised). */
static PyObject *block_of(dlspy_call *c) {
  PyObject *cur = NULL;
  if (PyContextVar_Get(c->st->stream_var, NULL, &cur) != 0) {
    PyErr_Clear();
    return NULL;
  }
  if (cur != NULL && PyObject_TypeCheck(cur, c->st->StreamType) && ((StreamObject *)cur)->handle.id == c->stream.id)
    return cur;
  Py_XDECREF(cur);
  return NULL;
}

int dlspy_block_post(dlspy_call *c, PyObject *obj) {
  if (c->block == NULL)
    c->block = block_of(c);
  int kind = c->block != NULL ? DLSPY_POST_BLOCK : DLSPY_POST_KEEP;
  if (dlspy_add_post(c, kind, Py_NewRef(obj), NULL) != 0) {
    Py_DECREF(obj);
    return -1;
  }
  return 0;
}

/* Lets go of Stream `so`'s list with one release after the work queued on `s` so far. */
static void release_on(StreamObject *so, dls__stream *s) {
  PyObject *list = so->keep;
  so->keep = NULL;
  if (list != NULL)
    dls__ext_release_after(s, dlspy_release_pyobject, list); /* steals */
}

void dlspy_block_keep(dlspy_call *c, dls__stream *s, PyObject *obj) {
  StreamObject *so = (StreamObject *)c->block;
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

void dlspy_block_release(dlspy_state *st, PyObject *obj) {
  if (obj == NULL || !PyObject_TypeCheck(obj, st->StreamType))
    return;
  StreamObject *so = (StreamObject *)obj;
  if (so->keep == NULL)
    return;
  dls_status_t rc = DLS_ERR_INVALID_HANDLE;
  dls__stream *s = so->handle.id != 0 && !atomic_load(&dlspy_dead) ? dls__ext_stream(so->handle, "use_stream",
                                                                                       "stream", &rc)
                                                                     : NULL;
  if (s != NULL) {
    release_on(so, s);
    return;
  }
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

PyObject *dlspy_mod_block_release(PyObject *m, PyObject *stream) {
  dlspy_block_release(dlspy_state_of_module(m), stream);
  Py_RETURN_NONE;
}
