/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream._dlstream.Graph and the capture calls (dls_stream_begin_capture,
 * dls_stream_end_capture); dlstream.capture in dlstream/_capture.py is built on them. */
#include "dlspy.h"

typedef struct GraphObject {
  PyObject_HEAD
  dls_graph_t handle; /* {0} once closed */
  PyObject *stream;   /* the Stream the capture was made on */
  unsigned long long replays;
} GraphObject;

static const char *const g_modes[] = {"global", "thread_local", "relaxed"};

static int parse_mode(dlspy_state *st, PyObject *obj, const char *pycall, int *out) {
  if (PyLong_Check(obj)) {
    long v = PyLong_AsLong(obj);
    if (v >= 0 && v <= 2) {
      *out = (int)v;
      return 0;
    }
  } else if (PyUnicode_Check(obj)) {
    for (int i = 0; i < 3; i++) {
      if (PyUnicode_CompareWithASCIIString(obj, g_modes[i]) == 0) {
        *out = i;
        return 0;
      }
    }
  } else {
    dlspy_type_error(st, "%s(mode=%R): the mode is 'global', 'thread_local' or 'relaxed'", pycall, obj);
    return -1;
  }
  PyErr_Clear();
  dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(mode=%R): the mode is 'global', 'thread_local' or 'relaxed'",
               pycall, obj);
  return -1;
}

/* The open Stream object behind an argument (a dlstream.Stream only: the
 * capture object keeps it alive). */
static StreamObject *stream_arg(dlspy_state *st, PyObject *obj, const char *pycall) {
  if (!PyObject_TypeCheck(obj, st->StreamType)) {
    dlspy_type_error(st, "%s(stream=%R): expected a dlstream.Stream (use Stream.wrap)", pycall, obj);
    return NULL;
  }
  StreamObject *s = (StreamObject *)obj;
  if (s->handle.id == 0) {
    dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s(stream=%R): the stream was closed", pycall, obj);
    return NULL;
  }
  return s;
}

/* _begin_capture(stream, mode='global') */
static PyObject *py_begin_capture(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "capture";
  static const char *const names[] = {"stream", "mode", NULL};
  dlspy_state *st = dlspy_state_of_module(m);
  PyObject *a[2] = {NULL, NULL};
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 2, a) != 0 || dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  if (a[0] == NULL)
    return dlspy_type_error(st, "%s: missing the stream", pycall);
  int mode = DLS_CAPTURE_GLOBAL;
  if (a[1] != NULL && a[1] != Py_None && parse_mode(st, a[1], pycall, &mode) != 0)
    return NULL;
  StreamObject *s = stream_arg(st, a[0], pycall);
  if (s == NULL)
    return NULL;
  dls_status_t rc = dls_stream_begin_capture(s->handle, (dls_capture_mode_t)mode);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  Py_RETURN_NONE;
}

/* _end_capture(stream) -> Graph */
static PyObject *py_end_capture(PyObject *m, PyObject *obj) {
  static const char pycall[] = "capture";
  dlspy_state *st = dlspy_state_of_module(m);
  if (dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  StreamObject *s = stream_arg(st, obj, pycall);
  if (s == NULL)
    return NULL;
  GraphObject *g = PyObject_New(GraphObject, st->GraphType);
  if (g == NULL)
    return NULL;
  g->handle.id = 0;
  g->stream = NULL;
  g->replays = 0;
  dls_status_t rc = dls_stream_end_capture(s->handle, &g->handle);
  if (rc != DLS_OK) {
    Py_DECREF(g);
    return dlspy_raise(st, rc, pycall);
  }
  g->stream = Py_NewRef(obj);
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
  if (g->handle.id == 0)
    return dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s: the graph was closed", pycall);
  StreamObject *own = (StreamObject *)g->stream;
  dls_stream_t h = own->handle;
  if (a[0] != NULL && a[0] != Py_None && dlspy_stream_resolve(st, a[0], own->device, pycall, "stream", &h) != 0)
    return NULL;
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
    {"_begin_capture", (PyCFunction)(void (*)(void))py_begin_capture, METH_FASTCALL | METH_KEYWORDS,
     "_begin_capture($module, stream, mode='global')\n--\n\nStarts capturing on a dlstream.Stream."},
    {"_end_capture", (PyCFunction)py_end_capture, METH_O,
     "_end_capture($module, stream, /)\n--\n\nEnds the capture begun on `stream` and returns its Graph."},
    {"capture_status", (PyCFunction)py_capture_status, METH_O,
     "capture_status($module, stream, /)\n--\n\n'none', 'active' or 'invalidated': the capture state of any stream "
     "(torch's, CuPy's, a dlstream.Stream), including captures dlstream did not begin."},
    {NULL, NULL, 0, NULL},
};
