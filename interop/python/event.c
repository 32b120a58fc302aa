/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream.Event: owned and foreign events, recorded on streams and waited on by other streams or the host. */
#include "args.h"
#include "errors.h"
#include "call/streamarg.h"

static EventObject *event_alloc(PyTypeObject *tp) { return (EventObject *)tp->tp_alloc(tp, 0); }

PyObject *dlspy_event_new(dlspy_state *st, DLDevice device, unsigned flags, const char *pycall) {
  EventObject *e = event_alloc(st->EventType);
  if (e == NULL)
    return NULL;
  dls_status_t rc = dls_event_create(device, flags, &e->handle);
  if (rc != DLS_OK) {
    Py_DECREF(e);
    return dlspy_raise(st, rc, pycall);
  }
  e->device = device;
  e->flags = flags;
  return (PyObject *)e;
}

static PyObject *event_tp_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
  dlspy_state *st = dlspy_state_of(tp);
  static char *kwlist[] = {"timing", "blocking", "device", NULL};
  PyObject *timing_obj = NULL, *blocking_obj = NULL, *dev_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO$O:Event", kwlist, &timing_obj, &blocking_obj, &dev_obj))
    return NULL;
  DLDevice dev;
  bool timing, blocking;
  if (dlspy_as_bool(st, timing_obj, "Event", "timing", &timing) != 0 ||
      dlspy_as_bool(st, blocking_obj, "Event", "blocking", &blocking) != 0 || dlspy_check_runtime(st, "Event") != 0 ||
      dlspy_parse_device(st, dev_obj, "Event", &dev) != 0)
    return NULL;
  EventObject *e = event_alloc(tp);
  if (e == NULL)
    return NULL;
  unsigned flags = (timing ? DLS_EVENT_TIMING : 0u) | (blocking ? DLS_EVENT_BLOCKING_SYNC : 0u);
  dls_status_t rc = dls_event_create(dev, flags, &e->handle);
  if (rc != DLS_OK) {
    Py_DECREF(e);
    return dlspy_raise(st, rc, "Event");
  }
  e->device = dev;
  e->flags = flags;
  return (PyObject *)e;
}

static void event_dealloc(EventObject *e) {
  PyTypeObject *tp = Py_TYPE(e);
  if (e->handle.id != 0 && !atomic_load(&dlspy_dead) && !e->view)
    (void)dls_event_destroy(e->handle);
  Py_CLEAR(e->owner);
  tp->tp_free(e);
  Py_DECREF(tp);
}

/* The native event of a foreign object: torch's .cuda_event, CuPy's .ptr, cuda.core's .handle. */
static int foreign_native(dlspy_state *st, PyObject *obj, void **out) {
  PyObject *v = NULL;
  if (PyLong_Check(obj) && !PyBool_Check(obj)) {
    v = Py_NewRef(obj);
  } else {
    PyObject *names[] = {st->s_cuda_event, st->s_ptr, st->s_handle};
    for (int i = 0; i < 3 && v == NULL; i++)
      if (dlspy_getattr_opt(obj, names[i], &v) < 0)
        return -1;
    if (v == NULL) {
      dlspy_type_error(st, "Event.wrap(obj=%R): expected an int CUevent, or an object with .cuda_event (torch), .ptr "
                           "(CuPy) or .handle (cuda.core)",
                       obj);
      return -1;
    }
    if (!PyLong_Check(v)) {
      PyObject *i = PyNumber_Index(v);
      Py_DECREF(v);
      if (i == NULL) {
        dlspy_type_error(st, "Event.wrap(obj=%R): its event handle is not an int", obj);
        return -1;
      }
      v = i;
    }
  }
  unsigned long long p = PyLong_AsUnsignedLongLong(v);
  Py_DECREF(v);
  if (p == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "Event.wrap(obj=%R): an event handle is a non-negative pointer", obj);
    return -1;
  }
  if (p != 0 && (p < 4096 || p >> 63)) {
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT,
                 "Event.wrap(obj=%R): 0x%llx is not an event: no event lives below 4096 or at 2**63 and above", obj,
                 p);
    return -1;
  }
  if (p == 0) {
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT,
                 "Event.wrap(obj=%R): the event handle is 0 (torch creates its event at the first record(): record "
                 "it before wrapping)",
                 obj);
    return -1;
  }
  *out = (void *)(uintptr_t)p;
  return 0;
}

static PyObject *event_wrap(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  dlspy_state *st = dlspy_state_of((PyTypeObject *)cls);
  static const char *const names[] = {"obj", "device", NULL};
  PyObject *a[2];
  if (dlspy_parse_kw(st, "Event.wrap", args, nargs, kwnames, names, 2, a) != 0)
    return NULL;
  if (a[0] == NULL)
    return dlspy_type_error(st, "Event.wrap() missing its argument 'obj'");
  if (PyObject_TypeCheck(a[0], st->EventType)) {
    /* An Event of its own on the same handle, keeping the given one alive: its close() never closes that one. */
    EventObject *of = (EventObject *)a[0], *e = event_alloc((PyTypeObject *)cls);
    if (e == NULL)
      return NULL;
    e->handle = of->handle;
    e->device = of->device;
    e->flags = of->flags;
    e->foreign = e->view = true;
    e->owner = Py_NewRef(a[0]);
    return (PyObject *)e;
  }
  void *native;
  DLDevice dev;
  if (dlspy_check_runtime(st, "Event.wrap") != 0 || foreign_native(st, a[0], &native) != 0 ||
      dlspy_parse_device(st, a[1], "Event.wrap", &dev) != 0)
    return NULL;
  if ((dev.device_type == kDLCUDA || dev.device_type == kDLROCM) && !dlspy_addr_readable((uintptr_t)native))
    return dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT,
                        "Event.wrap(obj=%R): %p is not an event: this process cannot read memory there (a freed or "
                        "made-up pointer)",
                        a[0], native);
  EventObject *e = event_alloc((PyTypeObject *)cls);
  if (e == NULL)
    return NULL;
  dls_status_t rc = dls_event_wrap(dev, native, &e->handle);
  if (rc != DLS_OK) {
    Py_DECREF(e);
    return dlspy_raise(st, rc, "Event.wrap");
  }
  e->device = dev;
  e->flags = DLS_EVENT_TIMING;
  e->foreign = true;
  if (!PyLong_Check(a[0]))
    e->owner = Py_NewRef(a[0]);
  return (PyObject *)e;
}

static int live(dlspy_state *st, EventObject *e, const char *pycall) {
  if (e->handle.id == 0) {
    dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s: the event was closed", pycall);
    return -1;
  }
  return dlspy_check_runtime(st, pycall);
}

/* The stream argument of record/wait: explicit, use_stream(), else legacy default. */
static int event_stream(dlspy_state *st, EventObject *e, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                        const char *pycall, dls_stream_t *out) {
  static const char *const names[] = {"stream", NULL};
  PyObject *a[1];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 1, a) != 0 || live(st, e, pycall) != 0)
    return -1;
  if (dlspy_stream_resolve(st, a[0], e->device, pycall, "stream", out) != 0)
    return -1;
  if (out->id == 0 && dlspy_context_stream(st, out) != 0)
    return -1;
  if (out->id == 0 && dlspy_default_stream(st, e->device, pycall, out) != 0)
    return -1;
  return live(st, e, pycall); /* again: the stream's __cuda_stream__ may have closed the event */
}

static PyObject *event_record(EventObject *e, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  dls_stream_t s;
  if (event_stream(st, e, args, nargs, kwnames, "Event.record", &s) != 0)
    return NULL;
  dls_status_t rc = dls_event_record(e->handle, s);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "Event.record");
  return Py_NewRef((PyObject *)e);
}

static PyObject *event_wait(EventObject *e, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  dls_stream_t s;
  if (event_stream(st, e, args, nargs, kwnames, "Event.wait", &s) != 0)
    return NULL;
  dls_status_t rc = dls_stream_wait_event(s, e->handle);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "Event.wait");
  Py_RETURN_NONE;
}

typedef struct event_sync {
  dlspy_state *st;
  EventObject *e;
} event_sync;

/* One look at the event's latest record. The handle is read again each time: another thread may close the event
 * while the GIL is let go between looks. */
static int poll_sync(void *ctx, int *done) {
  event_sync *p = ctx;
  if (live(p->st, p->e, "Event.synchronize") != 0)
    return -1;
  dls_status_t rc = dlspy_event_query_relaxed(p->e->handle, p->e->device, done);
  if (rc != DLS_OK) {
    dlspy_raise(p->st, rc, "Event.synchronize");
    return -1;
  }
  return 0;
}

static PyObject *event_synchronize(EventObject *e, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  if (live(st, e, "Event.synchronize") != 0)
    return NULL;
  event_sync p = {st, e};
  if (dlspy_wait(poll_sync, &p) != 0)
    return NULL;
  (void)dls_deferred_poll(); /* as dls_event_synchronize: releases whose streams passed */
  Py_RETURN_NONE;
}

static PyObject *event_query(EventObject *e, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  if (live(st, e, "Event.query") != 0)
    return NULL;
  int done = 0;
  dls_status_t rc = dls_event_query(e->handle, &done);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "Event.query");
  return PyBool_FromLong(done);
}

static PyObject *event_elapsed_time(EventObject *e, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  if (nargs != 1 || kwnames != NULL)
    return dlspy_type_error(st, "Event.elapsed_time() takes one argument: the end event");
  if (!PyObject_TypeCheck(args[0], st->EventType))
    return dlspy_type_error(st, "Event.elapsed_time(end=%R): expected a dlstream.Event", args[0]);
  EventObject *end = (EventObject *)args[0];
  if (live(st, e, "Event.elapsed_time") != 0 || live(st, end, "Event.elapsed_time") != 0)
    return NULL;
  float ms = 0;
  dls_status_t rc = dls_event_elapsed_ms(e->handle, end->handle, &ms);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "Event.elapsed_time");
  return PyFloat_FromDouble(ms);
}

static PyObject *event_close(EventObject *e, PyObject *unused) {
  if (e->handle.id != 0) {
    dls_event_t h = e->handle;
    e->handle.id = 0;
    if (!atomic_load(&dlspy_dead) && !e->view) {
      dls_status_t rc = dls_event_destroy(h);
      if (rc != DLS_OK && rc != DLS_ERR_INVALID_HANDLE)
        return dlspy_raise(dlspy_state_of(Py_TYPE(e)), rc, "Event.close");
    }
  }
  Py_RETURN_NONE;
}

static PyObject *event_enter(PyObject *e, PyObject *unused) { return Py_NewRef(e); }
static PyObject *event_exit(EventObject *e, PyObject *const *args, Py_ssize_t nargs) { return event_close(e, NULL); }

static PyObject *event_get_ptr(EventObject *e, void *c) {
  void *native = NULL;
  if (e->handle.id != 0 && !atomic_load(&dlspy_dead))
    (void)dls_event_native(e->handle, &native);
  return PyLong_FromVoidPtr(native);
}
static PyObject *event_get_handle(EventObject *e, void *c) { return PyLong_FromUnsignedLongLong(e->handle.id); }
static PyObject *event_get_device(EventObject *e, void *c) { return dlspy_device_str(e->device); }
static PyObject *event_get_timing(EventObject *e, void *c) { return PyBool_FromLong(!!(e->flags & DLS_EVENT_TIMING)); }
static PyObject *event_get_foreign(EventObject *e, void *c) { return PyBool_FromLong(e->foreign); }
static PyObject *event_get_closed(EventObject *e, void *c) { return PyBool_FromLong(e->handle.id == 0); }

static PyObject *event_repr(EventObject *e) {
  char dev[32];
  return PyUnicode_FromFormat("dlstream.Event(device='%s'%s%s%s)", dls_device_str(e->device, dev, sizeof dev),
                              (e->flags & DLS_EVENT_TIMING) && !e->foreign ? ", timing=True" : "",
                              e->foreign ? ", foreign" : "", e->handle.id ? "" : ", closed");
}

static PyMethodDef event_methods[] = {
    {"wrap", (PyCFunction)(void (*)(void))event_wrap, METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "wrap($type, obj, device=None)\n--\n\nA non-owning Event for an int CUevent or an object with .cuda_event "
     "(torch.cuda.Event), .ptr (CuPy) or .handle (cuda.core); for an Event, an Event of its own on the same event "
     "(its close() never closes the one given)."},
    {"record", (PyCFunction)(void (*)(void))event_record, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "record($self, stream=None)\n--\n\nCaptures the work queued on the stream so far (default: the use_stream() "
     "stream, else the legacy default stream). Returns self. Asynchronous: synchronize() waits for that work."},
    {"wait", (PyCFunction)(void (*)(void))event_wait, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "wait($self, stream=None)\n--\n\nThe stream's later work waits for the latest record; the host does not wait."},
    {"synchronize", (PyCFunction)(void (*)(void))event_synchronize, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "synchronize($self, /)\n--\n\nBlocks the host until the latest record completes (the GIL is released; Ctrl-C "
     "interrupts the wait)."},
    {"query", (PyCFunction)(void (*)(void))event_query, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "query($self, /)\n--\n\nTrue when the latest record has completed (or none was made)."},
    {"elapsed_time", (PyCFunction)(void (*)(void))event_elapsed_time, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "elapsed_time($self, end, /)\n--\n\nMilliseconds (a float) from this event's record to end's (timing events)."},
    {"close", (PyCFunction)event_close, METH_NOARGS, "close($self, /)\n--\n\nDestroys an owned event; frees a wrapper."},
    {"__enter__", event_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))event_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef event_getset[] = {
    {"ptr", (getter)event_get_ptr, NULL, "The native event (CUevent) as an int.", NULL},
    {"handle", (getter)event_get_handle, NULL, "The dlstream handle (0 once closed).", NULL},
    {"device", (getter)event_get_device, NULL, "The device, as 'cuda:0' or 'cpu:0'.", NULL},
    {"timing", (getter)event_get_timing, NULL, "Whether the event records timestamps.", NULL},
    {"foreign", (getter)event_get_foreign, NULL, "Whether the event was wrapped rather than created.", NULL},
    {"closed", (getter)event_get_closed, NULL, "Whether close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot event_slots[] = {
    {Py_tp_doc, "Event(timing=False, blocking=False, *, device=None)\n--\n\n"
                "A marker recorded on a stream: other streams wait on it, the host synchronizes on it."},
    {Py_tp_new, event_tp_new},
    {Py_tp_dealloc, event_dealloc},
    {Py_tp_methods, event_methods},
    {Py_tp_getset, event_getset},
    {Py_tp_repr, event_repr},
    {0, NULL},
};

PyType_Spec dlspy_event_spec = {
    .name = "dlstream.Event",
    .basicsize = sizeof(EventObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = event_slots,
};
