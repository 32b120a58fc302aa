/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream.Graph (dls_graph_*), made by dlstream.capture (capture.c), and dlstream.capture_status. */
#include "args.h"
#include "errors.h"
#include "call/streamarg.h"

typedef struct GraphObject {
  PyObject_HEAD
  dls_graph_t handle; /* {0} once closed */
  PyObject *stream;   /* the Stream the capture was made on */
  unsigned long long replays;
} GraphObject;

PyObject *dlspy_graph_new(dlspy_state *st, dls_graph_t handle, PyObject *stream) {
  GraphObject *g = PyObject_New(GraphObject, st->GraphType);
  if (g == NULL) {
    (void)dls_graph_destroy(handle);
    return NULL;
  }
  g->handle = handle;
  g->stream = Py_NewRef(stream);
  g->replays = 0;
  return (PyObject *)g;
}

/* _capture_status(stream) -> 'none' | 'active' | 'invalidated' */
static PyObject *py_capture_status(PyObject *m, PyObject *obj) {
  static const char pycall[] = "capture_status";
  static const char *const names[] = {"none", "active", "invalidated"};
  dlspy_state *st = dlspy_state_of_module(m);
  if (dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  dls_stream_t h;
  if (dlspy_stream_resolve(st, obj, dlspy_default_device(), pycall, "stream", &h) != 0)
    return NULL;
  dls_capture_status_t cs;
  dls_status_t rc = dls_stream_capture_status(h, &cs);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  return PyUnicode_FromString(names[(int)cs]);
}

static PyObject *graph_replay(GraphObject *g, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "Graph.replay";
  static const char *const names[] = {"stream", NULL};
  dlspy_state *st = dlspy_state_of(Py_TYPE(g));
  PyObject *a[1] = {NULL};
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 1, a) != 0 || dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  StreamObject *own = (StreamObject *)g->stream;
  dls_stream_t h = {0};
  if (a[0] != NULL && a[0] != Py_None && dlspy_stream_resolve(st, a[0], own->device, pycall, "stream", &h) != 0)
    return NULL;
  if (h.id == 0)
    h = own->handle; /* read after the argument: its __cuda_stream__ may close it */
  if (g->handle.id == 0)
    return dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s: the graph was closed", pycall);
  if (h.id == 0)
    return dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s: the capture's stream was closed; pass stream=", pycall);
  dls_status_t rc = dls_graph_launch(g->handle, h);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  g->replays++;
  Py_RETURN_NONE;
}

static PyObject *graph_close(GraphObject *g, PyObject *unused) {
  if (g->handle.id != 0 && !atomic_load(&dlspy_dead))
    (void)dls_graph_destroy(g->handle);
  g->handle.id = 0;
  Py_RETURN_NONE;
}

static PyObject *graph_get_stream(GraphObject *g, void *c) { return Py_NewRef(g->stream ? g->stream : Py_None); }
static PyObject *graph_get_replays(GraphObject *g, void *c) { return PyLong_FromUnsignedLongLong(g->replays); }
static PyObject *graph_get_closed(GraphObject *g, void *c) { return PyBool_FromLong(g->handle.id == 0); }

static void graph_dealloc(GraphObject *g) {
  PyTypeObject *tp = Py_TYPE(g);
  if (g->handle.id != 0 && !atomic_load(&dlspy_dead))
    (void)dls_graph_destroy(g->handle); /* queued replays still run */
  Py_CLEAR(g->stream);
  PyObject_Free(g);
  Py_DECREF(tp);
}

static PyMethodDef graph_methods[] = {
    {"replay", (PyCFunction)(void (*)(void))graph_replay, METH_FASTCALL | METH_KEYWORDS,
     "replay($self, stream=None)\n--\n\nQueues one replay of the captured work on `stream` (default: the stream it "
     "was captured on). Asynchronous: the host does not wait; stream.synchronize() or dlstream.synchronize() "
     "does, before the graph's outputs are read on the host."},
    {"close", (PyCFunction)graph_close, METH_NOARGS,
     "close($self, /)\n--\n\nDestroys the graph once its queued replays have run (the host does not wait)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef graph_getset[] = {
    {"stream", (getter)graph_get_stream, NULL, "The stream the work was captured on.", NULL},
    {"replays", (getter)graph_get_replays, NULL, "Replays queued so far.", NULL},
    {"closed", (getter)graph_get_closed, NULL, "Whether close() ran.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot graph_slots[] = {
    {Py_tp_dealloc, graph_dealloc},
    {Py_tp_methods, graph_methods},
    {Py_tp_getset, graph_getset},
    {Py_tp_doc, "Captured work that replays (dls_graph_*). Made by dlstream.capture."},
    {0, NULL},
};

PyType_Spec dlspy_graph_spec = {
    .name = "dlstream.Graph",
    .basicsize = sizeof(GraphObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = graph_slots,
};

PyMethodDef dlspy_graph_functions[] = {
    {"capture_status", (PyCFunction)py_capture_status, METH_O,
     "capture_status($module, stream, /)\n--\n\n'none', 'active' or 'invalidated': the capture state of any stream "
     "(torch's, CuPy's, a dlstream.Stream), including captures dlstream did not begin."},
    {NULL, NULL, 0, NULL},
};
