/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream.capture: the context manager that records the dlstream work of a block once and replays it. Written in
 * C so that no capture ever leaks: __enter__ begins the capture and does its bookkeeping with no point between
 * where a KeyboardInterrupt could land, and __exit__ ends it, or discards it when the end is refused. */
#include "args.h"
#include "errors.h"
#include "call/block.h"

typedef struct CaptureObject {
  PyObject_HEAD
  PyObject *arg;    /* the stream to capture as given (NULL: a pooled stream the capture owns) */
  PyObject *device; /* as given */
  PyObject *mode_obj;
  int mode;         /* DLS_CAPTURE_* */
  PyObject *stream; /* the Stream captured (NULL before __enter__) */
  PyObject *graph;  /* the Graph (NULL until the capture ended) */
  PyObject *token;  /* use_stream's token while the block runs */
  bool owned;       /* `stream` was acquired by the capture: close() returns it */
  bool active;      /* a capture was begun and is neither ended nor discarded */
} CaptureObject;

static const char *const g_modes[] = {"global", "thread_local", "relaxed"};

static int parse_mode(dlspy_state *st, PyObject *obj, int *out) {
  *out = DLS_CAPTURE_GLOBAL;
  if (obj == NULL || obj == Py_None)
    return 0;
  if (PyUnicode_Check(obj)) {
    for (int i = 0; i < 3; i++)
      if (PyUnicode_CompareWithASCIIString(obj, g_modes[i]) == 0) {
        *out = i;
        return 0;
      }
  } else if (PyLong_Check(obj) && !PyBool_Check(obj)) {
    int64_t v;
    if (dlspy_as_int(st, obj, "capture", "mode", "a capture mode", 0, 2, &v) != 0)
      return -1;
    *out = (int)v;
    return 0;
  } else {
    dlspy_type_error(st, "capture(mode=%R): the mode is 'global', 'thread_local' or 'relaxed'", obj);
    return -1;
  }
  dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "capture(mode=%R): the mode is 'global', 'thread_local' or 'relaxed'",
               obj);
  return -1;
}

static PyObject *capture_tp_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
  dlspy_state *st = dlspy_state_of(tp);
  static char *kwlist[] = {"stream", "mode", "device", NULL};
  PyObject *stream = Py_None, *mode = NULL, *device = Py_None;
  if (st == NULL || !PyArg_ParseTupleAndKeywords(args, kw, "|OOO:capture", kwlist, &stream, &mode, &device))
    return NULL;
  int m;
  if (parse_mode(st, mode, &m) != 0)
    return NULL;
  CaptureObject *c = (CaptureObject *)tp->tp_alloc(tp, 0);
  if (c == NULL)
    return NULL;
  c->arg = stream == Py_None ? NULL : Py_NewRef(stream);
  c->device = Py_NewRef(device);
  c->mode_obj = mode ? Py_NewRef(mode) : PyUnicode_FromString("global");
  c->mode = m;
  if (c->mode_obj == NULL) {
    Py_DECREF(c);
    return NULL;
  }
  return (PyObject *)c;
}

/* Ends nothing: drops a capture that was begun (the stream's recorded work is discarded). */
static void discard(CaptureObject *c) {
  if (!c->active)
    return;
  c->active = false;
  StreamObject *s = (StreamObject *)c->stream;
  if (s != NULL && s->handle.id != 0 && !atomic_load(&dlspy_dead))
    (void)dls_stream_discard_capture(s->handle);
}

/* The stream to capture, as a Stream object (a new reference): the argument (a Stream as is, else wrapped), or a
 * pooled stream. */
static PyObject *capture_stream(dlspy_state *st, CaptureObject *c, bool *owned) {
  *owned = c->arg == NULL;
  PyObject *dev = c->device;
  PyObject *dflt = NULL;
  if (c->arg == NULL && dev == Py_None) {
    dflt = dlspy_device_str(dlspy_default_device());
    if (dflt == NULL)
      return NULL;
    dev = dflt;
  }
  PyObject *r = c->arg == NULL ? PyObject_CallMethod((PyObject *)st->StreamType, "acquire", "O", dev)
                 : PyObject_TypeCheck(c->arg, st->StreamType) /* as is: a close() inside the block is seen */
                     ? Py_NewRef(c->arg)
                     : PyObject_CallMethod((PyObject *)st->StreamType, "wrap", "OO", c->arg, dev);
  Py_XDECREF(dflt);
  if (r != NULL && !PyObject_TypeCheck(r, st->StreamType)) {
    Py_DECREF(r);
    dlspy_type_error(st, "capture(stream=%R): expected a stream", c->arg);
    return NULL;
  }
  return r;
}

static PyObject *capture_enter(CaptureObject *c, PyObject *unused) {
  static const char pycall[] = "capture";
  dlspy_state *st = dlspy_state_of(Py_TYPE(c));
  if (st == NULL || dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  if (c->stream != NULL || c->graph != NULL)
    return dlspy_raisef(st, DLS_ERR_STATE, "%s: this capture was already used; make a new one", pycall);
  bool owned;
  PyObject *so = capture_stream(st, c, &owned); /* may run Python code: nothing is begun yet */
  if (so == NULL)
    return NULL;
  StreamObject *s = (StreamObject *)so;
  if (s->handle.id == 0) {
    Py_DECREF(so);
    return dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s(stream=%R): the stream was closed", pycall, c->arg);
  }
  dlspy_block_settle_before_capture(st, so); /* no owed mark left on an eager stream that begins a capture */
  dls_status_t rc = dls_stream_begin_capture(s->handle, (dls_capture_mode_t)c->mode);
  if (rc != DLS_OK) {
    dlspy_raise(st, rc, pycall);
    if (owned)
      Py_XDECREF(PyObject_CallMethod(so, "close", NULL));
    Py_DECREF(so);
    return NULL;
  }
  /* From here to the return no Python code runs in this frame, so no KeyboardInterrupt can land between the
   * capture's begin and its bookkeeping; the with statement then calls __exit__ whatever happens. */
  c->stream = so;
  c->owned = owned;
  c->active = true;
  PyObject *token = PyContextVar_Set(st->stream_var, so); /* calls in the block default to the stream */
  if (token == NULL) {
    discard(c);
    return NULL;
  }
  st->stream_var_set = true;
  c->token = token;
  return Py_NewRef((PyObject *)c);
}

static PyObject *capture_exit(CaptureObject *c, PyObject *const *args, Py_ssize_t nargs) {
  static const char pycall[] = "capture";
  dlspy_state *st = dlspy_state_of(Py_TYPE(c));
  bool failed = nargs > 0 && args[0] != Py_None; /* the block raised: its exception says more than ours */
  PyObject *err_type = NULL, *err_value = NULL, *err_tb = NULL;
  if (c->active && !atomic_load(&dlspy_dead)) {
    c->active = false;
    StreamObject *s = (StreamObject *)c->stream;
    dls_graph_t g = {0};
    dls_status_t rc = s->handle.id != 0 ? dls_stream_end_capture(s->handle, &g) : DLS_ERR_INVALID_HANDLE;
    if (rc == DLS_OK) {
      PyObject *graph = dlspy_graph_new(st, g, c->stream); /* owns g, even on failure */
      if (graph == NULL)
        PyErr_Fetch(&err_type, &err_value, &err_tb);
      else if (failed)
        Py_DECREF(graph); /* destroys it: the block did not finish, its work is not worth replaying */
      else
        c->graph = graph;
    } else {
      /* Refused (a group still open, an invalidated capture ...): the capture is dropped, never left open. */
      if (s->handle.id != 0)
        (void)dls_stream_discard_capture(s->handle);
      if (!failed) {
        if (s->handle.id == 0)
          dlspy_raisef(st, DLS_ERR_STATE, "%s: the capture's stream was closed inside the block; the capture was "
                       "discarded", pycall);
        else
          dlspy_raisef(st, rc, "%s: the capture could not end, so it was discarded: %s", pycall, dls_last_error());
        PyErr_Fetch(&err_type, &err_value, &err_tb);
      }
    }
  } else {
    c->active = false;
  }
  if (c->token != NULL) {
    PyObject *token = c->token;
    c->token = NULL;
    if (PyContextVar_Reset(st->stream_var, token) != 0) {
      if (err_type == NULL && !failed)
        PyErr_Fetch(&err_type, &err_value, &err_tb);
      else
        PyErr_Clear();
    }
    Py_DECREF(token);
  }
  if (err_type != NULL) {
    PyErr_Restore(err_type, err_value, err_tb);
    return NULL;
  }
  Py_RETURN_FALSE;
}

static PyObject *capture_replay(CaptureObject *c, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  dlspy_state *st = dlspy_state_of(Py_TYPE(c));
  if (c->graph == NULL)
    return dlspy_raisef(st, DLS_ERR_STATE,
                        "capture.replay: the capture has not ended (replay after the with block)");
  PyObject *meth = PyObject_GetAttrString(c->graph, "replay");
  if (meth == NULL)
    return NULL;
  PyObject *r = PyObject_Vectorcall(meth, args, (size_t)nargs, kwnames);
  Py_DECREF(meth);
  return r;
}

static PyObject *capture_close(CaptureObject *c, PyObject *unused) {
  discard(c);
  if (c->graph != NULL) {
    PyObject *r = PyObject_CallMethod(c->graph, "close", NULL);
    if (r == NULL)
      return NULL;
    Py_DECREF(r);
  }
  if (c->owned && c->stream != NULL) {
    c->owned = false;
    PyObject *r = PyObject_CallMethod(c->stream, "close", NULL);
    if (r == NULL)
      return NULL;
    Py_DECREF(r);
  }
  Py_RETURN_NONE;
}

static int capture_traverse(CaptureObject *c, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(c));
  Py_VISIT(c->arg);
  Py_VISIT(c->device);
  Py_VISIT(c->mode_obj);
  Py_VISIT(c->stream);
  Py_VISIT(c->graph);
  Py_VISIT(c->token);
  return 0;
}

static int capture_clear(CaptureObject *c) {
  discard(c); /* an abandoned capture (never exited) is dropped with its object */
  Py_CLEAR(c->arg);
  Py_CLEAR(c->device);
  Py_CLEAR(c->mode_obj);
  Py_CLEAR(c->stream);
  Py_CLEAR(c->graph);
  Py_CLEAR(c->token);
  return 0;
}

static void capture_dealloc(CaptureObject *c) {
  PyTypeObject *tp = Py_TYPE(c);
  PyObject_GC_UnTrack(c);
  capture_clear(c);
  tp->tp_free(c);
  Py_DECREF(tp);
}

static PyObject *capture_get_replays(CaptureObject *c, void *unused) {
  if (c->graph == NULL)
    return PyLong_FromLong(0);
  return PyObject_GetAttrString(c->graph, "replays");
}

static PyObject *capture_repr(CaptureObject *c) {
  if (c->graph == NULL)
    return PyUnicode_FromFormat("<dlstream.capture on %R: %s>", c->stream ? c->stream : Py_None,
                                c->active ? "open" : "not begun");
  PyObject *n = capture_get_replays(c, NULL);
  PyObject *r = n ? PyUnicode_FromFormat("<dlstream.capture on %R: %S replays>", c->stream, n) : NULL;
  Py_XDECREF(n);
  return r;
}

#define GETTER(field)                                                   \
  static PyObject *capture_get_##field(CaptureObject *c, void *unused) { \
    return Py_NewRef(c->field ? c->field : Py_None);                     \
  }
GETTER(stream)
GETTER(graph)
GETTER(device)
static PyObject *capture_get_mode(CaptureObject *c, void *unused) { return Py_NewRef(c->mode_obj); }

static PyMethodDef capture_methods[] = {
    {"__enter__", (PyCFunction)capture_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))capture_exit, METH_FASTCALL, NULL},
    {"replay", (PyCFunction)(void (*)(void))capture_replay, METH_FASTCALL | METH_KEYWORDS,
     "replay($self, /, stream=None)\n--\n\nQueues one replay on `stream` (default: the captured stream). "
     DLSPY_ASYNC_DOC},
    {"close", (PyCFunction)capture_close, METH_NOARGS,
     "close($self, /)\n--\n\nDestroys the graph once its queued replays have run, and returns an owned stream to the pool."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef capture_getset[] = {
    {"stream", (getter)capture_get_stream, NULL, "The stream captured (None before the block).", NULL},
    {"graph", (getter)capture_get_graph, NULL, "The dlstream.Graph, once the block ended.", NULL},
    {"device", (getter)capture_get_device, NULL, "The device argument.", NULL},
    {"mode", (getter)capture_get_mode, NULL, "The capture mode.", NULL},
    {"replays", (getter)capture_get_replays, NULL, "Replays queued so far.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot capture_slots[] = {
    {Py_tp_doc,
     "capture(stream=None, mode='global', device=None)\n--\n\n"
     "``with dlstream.capture() as g:`` records the dlstream work of the block; ``g.replay()`` runs it again.\n\n"
     "``stream`` is the stream to capture (a Stream, anything with __cuda_stream__ or an int pointer); by default a "
     "pooled stream of ``device`` that the capture owns. Inside the block every dlstream call that names no "
     "``stream=`` runs on it (as under use_stream). ``mode`` is 'global' (the default, as in torch.cuda.graph), "
     "'thread_local' or 'relaxed'. If the block raises, or the capture cannot end (a stream_parallel block still "
     "open, an invalidated capture), the capture is discarded: no capture outlives its block.\n\n"
     "Work in a capture is recorded, not run: nothing inside the block may wait for it on the host. Memory "
     "dlstream.empty allocates inside the block and closes inside it exists only during a replay; memory still open "
     "at the end is the graph's output, valid after each replay. Tensors and arrays the block used but did not "
     "allocate are kept by the graph until it is closed, and each replay is ordered with their uses on other streams "
     "as any dlstream call is (see docs/semantics.md)."},
    {Py_tp_new, capture_tp_new},
    {Py_tp_dealloc, capture_dealloc},
    {Py_tp_traverse, capture_traverse},
    {Py_tp_clear, capture_clear},
    {Py_tp_methods, capture_methods},
    {Py_tp_getset, capture_getset},
    {Py_tp_repr, capture_repr},
    {0, NULL},
};

PyType_Spec dlspy_capture_spec = {
    .name = "dlstream.capture",
    .basicsize = sizeof(CaptureObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = capture_slots,
};
