/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream.Stream: owned, pooled, foreign and default streams; stream arguments and the wrapper cache. */
#include "args.h"
#include "errors.h"
#include "call/block.h"
#include "call/protocol.h"
#include "call/streamarg.h"

#include <limits.h>
#include <string.h>

static const char *kind_name(int kind) {
  switch (kind) {
  case DLSPY_STREAM_OWNED: return "owned";
  case DLSPY_STREAM_POOLED: return "pooled";
  case DLSPY_STREAM_FOREIGN: return "foreign";
  case DLSPY_STREAM_LEGACY: return "legacy";
  case DLSPY_STREAM_PER_THREAD: return "per_thread";
  case DLSPY_STREAM_BRANCH: return "branch";
  case DLSPY_STREAM_VIEW: return "foreign";
  default: return "unknown";
  }
}

static bool is_gpu(DLDevice d) { return d.device_type == kDLCUDA || d.device_type == kDLROCM; }

/* ---- the type ---- */

static StreamObject *stream_alloc(dlspy_state *st, PyTypeObject *tp) {
  StreamObject *s = (StreamObject *)tp->tp_alloc(tp, 0);
  return s;
}

/* Fills native and device from the handle; on failure the handle is destroyed. */
static PyObject *stream_finish(dlspy_state *st, StreamObject *s, const char *pycall) {
  dls_status_t rc = dls_stream_native(s->handle, &s->native);
  if (rc == DLS_OK)
    rc = dls_stream_device(s->handle, &s->device);
  if (rc != DLS_OK) {
    dlspy_raise(st, rc, pycall);
    Py_DECREF(s);
    return NULL;
  }
  return (PyObject *)s;
}

PyObject *dlspy_stream_new_default(dlspy_state *st, DLDevice device, int kind) {
  if (dlspy_check_runtime(st, "Stream.legacy") != 0)
    return NULL;
  StreamObject *s = stream_alloc(st, st->StreamType);
  if (s == NULL)
    return NULL;
  s->handle = dls_stream_default(device, kind);
  s->kind = kind == DLS_STREAM_LEGACY ? DLSPY_STREAM_LEGACY : DLSPY_STREAM_PER_THREAD;
  return stream_finish(st, s, kind == DLS_STREAM_LEGACY ? "Stream.legacy" : "Stream.per_thread");
}

PyObject *dlspy_stream_new_branch(dlspy_state *st, dls_stream_t branch) {
  StreamObject *s = stream_alloc(st, st->StreamType);
  if (s == NULL)
    return NULL;
  s->handle = branch;
  s->kind = DLSPY_STREAM_BRANCH;
  return stream_finish(st, s, "Group.branch");
}

static PyObject *stream_tp_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
  dlspy_state *st = dlspy_state_of(tp);
  static char *kwlist[] = {"device", "priority", "blocking", NULL};
  PyObject *dev_obj = Py_None, *prio_obj = NULL, *blocking_obj = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO$O:Stream", kwlist, &dev_obj, &prio_obj, &blocking_obj))
    return NULL;
  bool blocking;
  if (dlspy_as_bool(st, blocking_obj, "Stream", "blocking", &blocking) != 0)
    return NULL;
  int priority = 0;
  if (prio_obj != NULL) {
    int64_t p;
    if (dlspy_as_int(st, prio_obj, "Stream", "priority", "a stream priority", INT_MIN, INT_MAX, &p) != 0)
      return NULL;
    priority = (int)p;
  }
  if (dlspy_check_runtime(st, "Stream") != 0)
    return NULL;
  DLDevice dev;
  if (dlspy_parse_device(st, dev_obj, "Stream", &dev) != 0)
    return NULL;
  StreamObject *s = stream_alloc(st, tp);
  if (s == NULL)
    return NULL;
  dls_stream_options_t opt = {.priority = priority, .flags = blocking ? DLS_STREAM_BLOCKING : DLS_STREAM_NON_BLOCKING};
  dls_status_t rc = dls_stream_create(dev, &opt, &s->handle);
  if (rc != DLS_OK) {
    Py_DECREF(s);
    return dlspy_raise(st, rc, "Stream");
  }
  s->kind = DLSPY_STREAM_OWNED;
  return stream_finish(st, s, "Stream");
}

static void stream_dealloc(StreamObject *s) {
  PyTypeObject *tp = Py_TYPE(s);
  dlspy_block_release(dlspy_state_of(tp), (PyObject *)s);
  PyMem_RawFree(s->owed);
  if (s->handle.id != 0 && !atomic_load(&dlspy_dead) && s->kind != DLSPY_STREAM_BRANCH && s->kind != DLSPY_STREAM_VIEW)
    (void)dls_stream_destroy(s->handle);
  Py_CLEAR(s->owner);
  tp->tp_free(s);
  Py_DECREF(tp);
}

/* The device a foreign stream object says it is on. */
static int foreign_device(dlspy_state *st, PyObject *obj, DLDevice *out) {
  PyObject *v = NULL;
  PyObject *names[] = {st->s_device_index, st->s_device_id};
  for (int i = 0; i < 2; i++) {
    if (dlspy_getattr_opt(obj, names[i], &v) < 0)
      return -1;
    if (v != NULL && PyLong_Check(v)) {
      long id = PyLong_AsLong(v);
      Py_DECREF(v);
      if (id > 65535) {
        dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "Stream.wrap(obj=%R): its %U is %ld; a device index is 0 to 65535",
                     obj, names[i], id);
        return -1;
      }
      if (id >= 0) {
        /* torch's ROCm builds report HIP streams through torch.cuda */
        *out = dls_device(dlspy_torch_hip(obj) ? kDLROCM : kDLCUDA, (int32_t)id);
        return 0;
      }
      PyErr_Clear();
    } else {
      Py_XDECREF(v);
    }
  }
  if (dlspy_getattr_opt(obj, st->s_device, &v) < 0)
    return -1;
  if (v != NULL) {
    PyObject *id = NULL;
    int rc = -1;
    long n = -1;
    if (dlspy_getattr_opt(v, st->s_device_id, &id) >= 0 && id != NULL && PyLong_Check(id) &&
        (n = PyLong_AsLong(id)) >= 0 && n <= 65535) {
      *out = dls_cuda((int32_t)n); /* cuda.core's Device */
      rc = 0;
    } else {
      PyErr_Clear();
      rc = dlspy_parse_device(st, v, "Stream.wrap", out); /* torch.device */
      if (rc != 0)
        PyErr_Clear();
    }
    Py_XDECREF(id);
    Py_DECREF(v);
    if (rc == 0)
      return 0;
  }
  *out = dlspy_default_device();
  return 0;
}

/* Stream.wrap of a Stream: a Stream on the same handle that keeps `of` alive; its close() ends only itself, so a
 * library that closes what it wrapped never closes its caller's stream. */
static PyObject *stream_view(PyTypeObject *tp, StreamObject *of) {
  StreamObject *s = (StreamObject *)tp->tp_alloc(tp, 0);
  if (s == NULL)
    return NULL;
  s->handle = of->handle;
  s->device = of->device;
  s->native = of->native;
  s->kind = of->kind == DLSPY_STREAM_LEGACY || of->kind == DLSPY_STREAM_PER_THREAD ? of->kind : DLSPY_STREAM_VIEW;
  s->owner = Py_NewRef((PyObject *)of);
  return (PyObject *)s;
}

static PyObject *stream_wrap(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  dlspy_state *st = dlspy_state_of((PyTypeObject *)cls);
  static const char *const names[] = {"obj", "device", NULL};
  PyObject *a[2];
  if (dlspy_parse_kw(st, "Stream.wrap", args, nargs, kwnames, names, 2, a) != 0)
    return NULL;
  PyObject *obj = a[0];
  if (obj == NULL)
    return dlspy_type_error(st, "Stream.wrap() missing its argument 'obj'");
  if (PyObject_TypeCheck(obj, st->StreamType))
    return stream_view((PyTypeObject *)cls, (StreamObject *)obj);
  if (dlspy_check_runtime(st, "Stream.wrap") != 0)
    return NULL;
  void *native;
  DLDevice dev;
  PyObject *owner = NULL;
  if (PyLong_Check(obj) && !PyBool_Check(obj)) {
    if (dlspy_native_of_int(st, obj, obj, "Stream.wrap", "obj", &native) != 0)
      return NULL;
    if (dlspy_parse_device(st, a[1], "Stream.wrap", &dev) != 0)
      return NULL;
  } else {
    PyObject *meth = NULL;
    if (dlspy_getattr_opt(obj, st->s_cuda_stream, &meth) < 0)
      return NULL;
    if (meth == NULL)
      return dlspy_type_error(st,
                              "Stream.wrap(obj=%R): expected an object with __cuda_stream__ (torch, CuPy, cuda.core), "
                              "an int pointer or a dlstream.Stream",
                              obj);
    Py_DECREF(meth);
    if (dlspy_cuda_stream_protocol(st, obj, "Stream.wrap", "obj", &native) != 0)
      return NULL;
    if (a[1] != NULL && a[1] != Py_None) {
      if (dlspy_parse_device(st, a[1], "Stream.wrap", &dev) != 0)
        return NULL;
    } else if (foreign_device(st, obj, &dev) != 0) {
      return NULL;
    }
    owner = obj;
  }
  uintptr_t v = (uintptr_t)native;
  if (v == 0 || v == DLS_STREAM_LEGACY || v == DLS_STREAM_PER_THREAD) {
    PyObject *r = dlspy_stream_new_default(st, dev, v == DLS_STREAM_PER_THREAD ? DLS_STREAM_PER_THREAD
                                                                                 : DLS_STREAM_LEGACY);
    return r;
  }
  if (dlspy_native_readable(st, dev, native, "Stream.wrap") != 0)
    return NULL;
  StreamObject *s = stream_alloc(st, (PyTypeObject *)cls);
  if (s == NULL)
    return NULL;
  dls_status_t rc = dls_stream_wrap(dev, native, &s->handle);
  if (rc != DLS_OK) {
    Py_DECREF(s);
    return dlspy_raise(st, rc, "Stream.wrap");
  }
  s->kind = DLSPY_STREAM_FOREIGN;
  s->owner = Py_XNewRef(owner);
  if (owner != NULL) {
    /* The stream object keeps the framework's too: buffers and uses on it outlive this wrapper, and their frees
     * and records must find the native stream alive. */
    dls__stream *cs = dls__ext_stream(s->handle, "Stream.wrap", "obj", &rc);
    if (cs != NULL)
      dls__ext_stream_keep(cs, dlspy_release_pyobject, Py_NewRef(owner));
  }
  return stream_finish(st, s, "Stream.wrap");
}

static PyObject *stream_default_cm(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, int kind, const char *name) {
  dlspy_state *st = dlspy_state_of((PyTypeObject *)cls);
  if (nargs > 1)
    return dlspy_type_error(st, "%s() takes at most 1 argument (device)", name);
  DLDevice dev;
  if (dlspy_parse_device(st, nargs ? args[0] : NULL, name, &dev) != 0)
    return NULL;
  return dlspy_stream_new_default(st, dev, kind);
}

static PyObject *stream_legacy(PyObject *cls, PyObject *const *args, Py_ssize_t nargs) {
  return stream_default_cm(cls, args, nargs, DLS_STREAM_LEGACY, "Stream.legacy");
}

static PyObject *stream_per_thread(PyObject *cls, PyObject *const *args, Py_ssize_t nargs) {
  return stream_default_cm(cls, args, nargs, DLS_STREAM_PER_THREAD, "Stream.per_thread");
}

static PyObject *stream_acquire(PyObject *cls, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of((PyTypeObject *)cls);
  DLDevice dev;
  if (nargs > 1)
    return dlspy_type_error(st, "Stream.acquire() takes at most 1 argument (device)");
  if (dlspy_check_runtime(st, "Stream.acquire") != 0 ||
      dlspy_parse_device(st, nargs ? args[0] : NULL, "Stream.acquire", &dev) != 0)
    return NULL;
  StreamObject *s = stream_alloc(st, (PyTypeObject *)cls);
  if (s == NULL)
    return NULL;
  dls_status_t rc = dls_stream_acquire(dev, &s->handle);
  if (rc != DLS_OK) {
    Py_DECREF(s);
    return dlspy_raise(st, rc, "Stream.acquire");
  }
  s->kind = DLSPY_STREAM_POOLED;
  return stream_finish(st, s, "Stream.acquire");
}

static int live(dlspy_state *st, StreamObject *s, const char *pycall) {
  if (s->handle.id == 0) {
    dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s: the stream was closed", pycall);
    return -1;
  }
  return dlspy_check_runtime(st, pycall);
}

static PyObject *stream_synchronize(StreamObject *s, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  if (live(st, s, "Stream.synchronize") != 0 || dlspy_stream_wait(st, "Stream.synchronize", s->handle, s->device) != 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *stream_query(StreamObject *s, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  if (live(st, s, "Stream.query") != 0)
    return NULL;
  int idle = 0;
  dls_status_t rc = dls_stream_query(s->handle, &idle);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "Stream.query");
  return PyBool_FromLong(idle);
}

static PyObject *stream_wait(StreamObject *s, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  if (nargs != 1 || kwnames != NULL)
    return dlspy_type_error(st, "Stream.wait() takes one argument: an Event or a stream");
  if (live(st, s, "Stream.wait") != 0)
    return NULL;
  PyObject *o = args[0];
  dls_status_t rc;
  if (Py_IS_TYPE(o, st->EventType) || PyObject_TypeCheck(o, st->EventType)) {
    EventObject *e = (EventObject *)o;
    if (e->handle.id == 0)
      return dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "Stream.wait(%R): the event was closed", o);
    rc = dls_stream_wait_event(s->handle, e->handle);
  } else {
    dls_stream_t other;
    if (dlspy_stream_resolve(st, o, s->device, "Stream.wait", "event_or_stream", &other) != 0)
      return NULL;
    if (other.id == 0)
      return dlspy_type_error(st, "Stream.wait(None): expected an Event or a stream");
    if (live(st, s, "Stream.wait") != 0) /* again: the argument's __cuda_stream__ may have closed it */
      return NULL;
    rc = dls_stream_wait_stream(s->handle, other);
  }
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "Stream.wait");
  Py_RETURN_NONE;
}

static PyObject *stream_record(StreamObject *s, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  static const char *const names[] = {"event", NULL};
  PyObject *a[1];
  if (dlspy_parse_kw(st, "Stream.record", args, nargs, kwnames, names, 1, a) != 0 ||
      live(st, s, "Stream.record") != 0)
    return NULL;
  PyObject *ev;
  if (a[0] == NULL || a[0] == Py_None) {
    ev = dlspy_event_new(st, s->device, DLS_EVENT_DEFAULT, "Stream.record");
    if (ev == NULL)
      return NULL;
  } else if (PyObject_TypeCheck(a[0], st->EventType)) {
    ev = Py_NewRef(a[0]);
  } else {
    return dlspy_type_error(st, "Stream.record(event=%R): expected a dlstream.Event or None", a[0]);
  }
  EventObject *e = (EventObject *)ev;
  if (live(st, s, "Stream.record") != 0) { /* again: making the event may run finalizers */
    Py_DECREF(ev);
    return NULL;
  }
  dls_status_t rc = e->handle.id ? dls_event_record(e->handle, s->handle) : DLS_ERR_INVALID_HANDLE;
  if (rc != DLS_OK) {
    Py_DECREF(ev);
    if (e->handle.id == 0)
      return dlspy_raisef(st, rc, "Stream.record: the event was closed");
    return dlspy_raise(st, rc, "Stream.record");
  }
  return ev;
}

static PyObject *stream_cuda_stream(StreamObject *s, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  if (!is_gpu(s->device)) {
    char dev[32];
    return dlspy_raisef(st, DLS_ERR_NOT_SUPPORTED,
                        "Stream.__cuda_stream__: the stream is on %s, not a CUDA device (nor a ROCm one: a hipStream_t)",
                        dls_device_str(s->device, dev, sizeof dev));
  }
  if (live(st, s, "Stream.__cuda_stream__") != 0)
    return NULL;
  return Py_BuildValue("(iK)", 0, (unsigned long long)(uintptr_t)s->native);
}

static PyObject *stream_close(StreamObject *s, PyObject *unused) {
  dlspy_block_release(dlspy_state_of(Py_TYPE(s)), (PyObject *)s); /* what its blocks keep, while it is marked */
  if (s->handle.id != 0) {
    dls_stream_t h = s->handle;
    s->handle.id = 0;
    if (!atomic_load(&dlspy_dead) && (s->kind == DLSPY_STREAM_OWNED || s->kind == DLSPY_STREAM_POOLED ||
                                      s->kind == DLSPY_STREAM_FOREIGN)) {
      dls_status_t rc = dls_stream_destroy(h);
      if (rc != DLS_OK && rc != DLS_ERR_INVALID_HANDLE)
        return dlspy_raise(dlspy_state_of(Py_TYPE(s)), rc, "Stream.close");
    }
  }
  Py_RETURN_NONE;
}

static PyObject *stream_enter(PyObject *s, PyObject *unused) { return Py_NewRef(s); }
static PyObject *stream_exit(StreamObject *s, PyObject *const *args, Py_ssize_t nargs) { return stream_close(s, NULL); }

static PyObject *stream_get_ptr(StreamObject *s, void *c) { return PyLong_FromVoidPtr(s->native); }
static PyObject *stream_get_handle(StreamObject *s, void *c) { return PyLong_FromUnsignedLongLong(s->handle.id); }
static PyObject *stream_get_device(StreamObject *s, void *c) { return dlspy_device_str(s->device); }
static PyObject *stream_get_kind(StreamObject *s, void *c) { return PyUnicode_FromString(kind_name(s->kind)); }
static PyObject *stream_get_closed(StreamObject *s, void *c) { return PyBool_FromLong(s->handle.id == 0); }
static PyObject *stream_get_dlpack(StreamObject *s, void *c) {
  if (!is_gpu(s->device))
    Py_RETURN_NONE;
  int64_t v;
  if (s->handle.id == 0 || dls_dlpack_stream_value(s->handle, &v) != DLS_OK)
    Py_RETURN_NONE;
  return PyLong_FromLongLong(v);
}

static PyObject *stream_repr(StreamObject *s) {
  char dev[32];
  return PyUnicode_FromFormat("dlstream.Stream(device='%s', kind='%s', ptr=%p%s)",
                              dls_device_str(s->device, dev, sizeof dev), kind_name(s->kind), s->native,
                              s->handle.id ? "" : ", closed");
}

static Py_hash_t stream_hash(StreamObject *s) {
  Py_hash_t h = (Py_hash_t)((uintptr_t)s->native ^ ((uintptr_t)s->device.device_type << 56) ^
                            ((uintptr_t)s->device.device_id << 48));
  return h == -1 ? -2 : h;
}

static PyObject *stream_richcompare(PyObject *a, PyObject *b, int op) {
  if ((op != Py_EQ && op != Py_NE) || (!PyObject_TypeCheck(b, Py_TYPE(a)) && !PyObject_TypeCheck(a, Py_TYPE(b))))
    Py_RETURN_NOTIMPLEMENTED;
  StreamObject *x = (StreamObject *)a, *y = (StreamObject *)b;
  bool eq = x->native == y->native && x->device.device_type == y->device.device_type &&
            x->device.device_id == y->device.device_id;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyMethodDef stream_methods[] = {
    {"wrap", (PyCFunction)(void (*)(void))stream_wrap, METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "wrap($type, obj, device=None)\n--\n\nA non-owning Stream for an object with __cuda_stream__, an int "
     "pointer (0 legacy, 2 per-thread) or a Stream (a Stream of its own on the same stream: its close() never closes "
     "the one given)."},
    {"legacy", (PyCFunction)(void (*)(void))stream_legacy, METH_FASTCALL | METH_CLASS,
     "legacy($type, device=None, /)\n--\n\nThe legacy default stream of a device (a Stream)."},
    {"per_thread", (PyCFunction)(void (*)(void))stream_per_thread, METH_FASTCALL | METH_CLASS,
     "per_thread($type, device=None, /)\n--\n\nThe per-thread default stream of a device (a Stream)."},
    {"acquire", (PyCFunction)(void (*)(void))stream_acquire, METH_FASTCALL | METH_CLASS,
     "acquire($type, device=None, /)\n--\n\nA Stream from the device's pool; close() returns it."},
    {"synchronize", (PyCFunction)(void (*)(void))stream_synchronize, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "synchronize($self, /)\n--\n\nBlocks until the work queued on the stream so far completes (the GIL is released; "
     "Ctrl-C interrupts the wait and leaves the work queued). dlstream.synchronize() waits for every stream of a "
     "device."},
    {"query", (PyCFunction)(void (*)(void))stream_query, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "query($self, /)\n--\n\nTrue when all queued work has completed; never blocks."},
    {"wait", (PyCFunction)(void (*)(void))stream_wait, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "wait($self, event_or_stream, /)\n--\n\nLater work on this stream waits for the event or for the other stream's queued "
     "work; the host does not wait."},
    {"record", (PyCFunction)(void (*)(void))stream_record, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "record($self, event=None)\n--\n\nRecords an event (a new one if None) after the work queued on the stream so far and "
     "returns it; event.synchronize() then waits for that work only. Asynchronous."},
    {"__cuda_stream__", (PyCFunction)(void (*)(void))stream_cuda_stream, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "__cuda_stream__($self, /)\n--\n\nThe CUDA stream protocol: (0, ptr)."},
    {"close", (PyCFunction)stream_close, METH_NOARGS,
     "close($self, /)\n--\n\nDestroys an owned stream once its work completes (the host does not wait), returns a pooled one, "
     "frees a foreign wrapper. Idempotent."},
    {"__enter__", stream_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))stream_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stream_getset[] = {
    {"ptr", (getter)stream_get_ptr, NULL, "The native stream (CUstream) as an int; 0 for CUDA's legacy stream.", NULL},
    {"handle", (getter)stream_get_handle, NULL, "The dlstream handle (0 once closed).", NULL},
    {"device", (getter)stream_get_device, NULL, "The device, as 'cuda:0' or 'cpu:0'.", NULL},
    {"kind", (getter)stream_get_kind, NULL, "'owned', 'pooled', 'foreign', 'legacy' or 'per_thread'.", NULL},
    {"closed", (getter)stream_get_closed, NULL, "Whether close() was called.", NULL},
    {"dlpack_value", (getter)stream_get_dlpack, NULL, "The DLPack stream integer (None on the CPU).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot stream_slots[] = {
    {Py_tp_doc, "Stream(device=None, priority=0, *, blocking=False)\n--\n\n"
                "A stream of device work. Stream() creates an owned stream; Stream.wrap() wraps torch's, CuPy's or "
                "cuda.core's; Stream.legacy() and Stream.per_thread() name the default streams. Equal when they name "
                "the same native stream. `with Stream() as s:` closes it at the end."},
    {Py_tp_new, stream_tp_new},
    {Py_tp_dealloc, stream_dealloc},
    {Py_tp_methods, stream_methods},
    {Py_tp_getset, stream_getset},
    {Py_tp_repr, stream_repr},
    {Py_tp_hash, stream_hash},
    {Py_tp_richcompare, stream_richcompare},
    {0, NULL},
};

PyType_Spec dlspy_stream_spec = {
    .name = "dlstream.Stream",
    .basicsize = sizeof(StreamObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = stream_slots,
};
