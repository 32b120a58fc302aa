/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream.Tensor: tensors dlstream owns (empty) or views (from_dlpack), exported through __dlpack__. */
#include "args.h"
#include "errors.h"
#include "call/current.h"
#include "call/protocol.h"
#include "call/streamarg.h"
#include "tensorcopy.h"
#include "tensornumpy.h"
#include "call/tensortypes.h"

#include <string.h>

/* ---- capsules ---- */

static void capsule_versioned_destructor(PyObject *cap) {
  /* Consumed capsules were renamed: only an unconsumed one still owns its tensor. */
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (m != NULL && m->deleter != NULL)
      m->deleter(m);
  }
}

static void capsule_legacy_destructor(PyObject *cap) {
  if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m != NULL && m->deleter != NULL)
      m->deleter(m);
  }
}

/* ---- the type ---- */

PyObject *dlspy_tensor_wrap(dlspy_state *st, dls_tensor_t t) {
  TensorObject *o = (TensorObject *)st->TensorType->tp_alloc(st->TensorType, 0);
  if (o == NULL) {
    (void)dls_tensor_release(t);
    return NULL;
  }
  o->handle = t;
  dls__ext_tensor ti;
  o->device = dls__ext_tensor_peek(t, &ti) ? ti.home : dls_cpu();
  return (PyObject *)o;
}

static void tensor_dealloc(TensorObject *t) {
  PyTypeObject *tp = Py_TYPE(t);
  if (t->handle.id != 0 && !atomic_load(&dlspy_dead))
    (void)dls_tensor_release(t->handle);
  tp->tp_free(t);
  Py_DECREF(tp);
}

/* The core tensor of `t` (no hold: valid until Python code runs); -1 with an exception when it is not live. */
static int tensor_live(dlspy_state *st, TensorObject *t, const char *pycall, dls__ext_tensor *out) {
  if (t->handle.id == 0) {
    dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s: the tensor was released", pycall);
    return -1;
  }
  if (dlspy_check_runtime(st, pycall) != 0)
    return -1;
  dls_status_t rc = dls__ext_tensor_get(t->handle, pycall, "self", out);
  if (rc != DLS_OK) {
    dlspy_raise(st, rc, pycall);
    return -1;
  }
  return 0;
}

/* The consumer stream a DLPack `stream` value names on `dev`: {0} for None on
 * the CPU and for -1; `*host_sync` when the host must wait (CPU, None). */
static int consumer_stream(dlspy_state *st, DLDevice dev, PyObject *v, const char *pycall, dls_stream_t *out,
                           bool *host_sync) {
  out->id = 0;
  *host_sync = false;
  if (v != NULL && v != Py_None && (!PyLong_Check(v) || PyBool_Check(v))) {
    /* A type error on every device, as torch and the DLPack spec have it. */
    dlspy_type_error(st, "%s(stream=%R): a DLPack stream is an int or None", pycall, v);
    return -1;
  }
  if (dev.device_type == kDLCPU) {
    if (v == NULL || v == Py_None) {
      *host_sync = true;
      return 0;
    }
    int overflow = 0;
    if (PyLong_AsLongLongAndOverflow(v, &overflow) == DLS_DLPACK_STREAM_NO_SYNC && !overflow)
      return 0;
    PyErr_Clear();
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT,
                 "%s(stream=%R): host memory is exchanged synchronously; CPU consumers pass stream=None", pycall, v);
    return -1;
  }
  if (v == NULL || v == Py_None) {
    /* DLPack: None means the legacy default stream. */
    *out = dls_stream_default(dev, DLS_STREAM_LEGACY);
    return 0;
  }
  return dlspy_stream_of_dlpack_value(st, dev, v, pycall, "stream", out);
}

/* dl_device=(device_type, device_id): read (running any __index__) before the tensor is looked up; {-1, -1}:
 * not given. */
static int parse_dl_device(dlspy_state *st, PyObject *v, const char *pycall, DLDevice *out) {
  out->device_type = (DLDeviceType)-1;
  out->device_id = -1;
  if (v == NULL || v == Py_None)
    return 0;
  if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) {
    dlspy_type_error(st, "%s(dl_device=%R): expected a (device_type, device_id) tuple", pycall, v);
    return -1;
  }
  int64_t type, id;
  if (dlspy_as_int(st, PyTuple_GET_ITEM(v, 0), pycall, "dl_device[0]", "a DLPack device type", 0, INT32_MAX,
                   &type) != 0 ||
      dlspy_as_int(st, PyTuple_GET_ITEM(v, 1), pycall, "dl_device[1]", "a device index", 0, INT32_MAX, &id) != 0)
    return -1;
  *out = dls_device((DLDeviceType)type, (int32_t)id);
  return 0;
}

static int check_dl_device(dlspy_state *st, DLDevice want, DLDevice own, const char *pycall) {
  if ((int)want.device_id < 0 || dlspy_same_device(want, own))
    return 0;
  char b[32];
  dlspy_raisef(st, DLS_ERR_INVALID_TENSOR,
               "%s(dl_device=(%d, %d)): the tensor lives on %s; dlstream exports only to the device it is on", pycall,
               (int)want.device_type, (int)want.device_id, dls_device_str(own, b, sizeof b));
  return -1;
}

static PyObject *tensor_dlpack(TensorObject *t, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
  static const char pycall[] = "Tensor.__dlpack__";
  dlspy_state *st = PyType_GetModuleState(cls);
  static const char *const names[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *a[4];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 1, a) != 0)
    return NULL;
  /* The arguments first: their __bool__ and __index__ run Python code, which may close this tensor. */
  int copy = 0;
  if (a[3] != NULL && a[3] != Py_None && (copy = PyObject_IsTrue(a[3])) < 0)
    return dlspy_type_error(st, "%s(copy=%R): its truth value failed", pycall, a[3]);
  bool versioned = false;
  if (a[1] != NULL && a[1] != Py_None) {
    int64_t major;
    if (!PyTuple_Check(a[1]) || PyTuple_GET_SIZE(a[1]) < 1)
      return dlspy_type_error(st, "%s(max_version=%R): expected a (major, minor) tuple", pycall, a[1]);
    if (dlspy_as_int(st, PyTuple_GET_ITEM(a[1], 0), pycall, "max_version[0]", "a DLPack major version", 0,
                     INT32_MAX, &major) != 0)
      return NULL;
    versioned = major >= 1;
  }
  DLDevice want;
  if (parse_dl_device(st, a[2], pycall, &want) != 0)
    return NULL;
  dls_stream_t consumer;
  bool host_sync;
  if (consumer_stream(st, t->device, a[0], pycall, &consumer, &host_sync) != 0)
    return NULL;
  dls__ext_tensor ti;
  if (tensor_live(st, t, pycall, &ti) != 0 || check_dl_device(st, want, ti.dl->device, pycall) != 0)
    return NULL;
  DLDevice dev = ti.home;

  dls_stream_t work = consumer, pooled = {0};
  dls_status_t rc = DLS_OK;
  if (host_sync || (copy && work.id == 0)) {
    rc = host_sync ? dls_stream_acquire(dev, &pooled) : DLS_OK;
    work = host_sync ? pooled : dls_stream_default(dev, DLS_STREAM_LEGACY);
  }
  dls_tensor_t src = t->handle, copied = {0};
  if (rc == DLS_OK && copy) {
    rc = dlspy_tensor_copy(ti.dl, t->handle, work, &copied);
    src = copied;
  }
  if (rc == DLS_OK && host_sync) {
    dls__ext_tensor si;
    dls_status_t g = dls__ext_tensor_get(src, pycall, "tensor", &si);
    dls__stream *ws = g == DLS_OK ? dls__ext_stream(pooled, pycall, "stream", &g) : NULL;
    rc = ws != NULL ? dls__buffer_access(si.buf, ws, DLS_ACCESS_WRITE, true) : g; /* the host may write it */
  }
  /* `ti` is not read past here: the wait lets other threads run. */
  bool waited = rc != DLS_OK || !host_sync || dlspy_stream_wait(st, pycall, pooled, dev) == 0;
  void *managed = NULL;
  if (rc == DLS_OK && waited) {
    dls_stream_t c = host_sync ? (dls_stream_t){0} : consumer;
    if (versioned)
      rc = dls_tensor_export_versioned(src, c, (DLManagedTensorVersioned **)&managed);
    else
      rc = dls_tensor_export_legacy(src, c, (DLManagedTensor **)&managed);
  }
  if (copied.id)
    (void)dls_tensor_release(copied); /* the export holds the copy's memory */
  if (pooled.id)
    (void)dls_stream_destroy(pooled);
  if (!waited)
    return NULL; /* interrupted: the copy stays queued and is freed in stream order */
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  if (versioned && copy)
    ((DLManagedTensorVersioned *)managed)->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
  PyObject *cap = versioned ? PyCapsule_New(managed, "dltensor_versioned", capsule_versioned_destructor)
                            : PyCapsule_New(managed, "dltensor", capsule_legacy_destructor);
  if (cap == NULL) {
    if (versioned)
      ((DLManagedTensorVersioned *)managed)->deleter(managed);
    else
      ((DLManagedTensor *)managed)->deleter(managed);
  }
  return cap;
}

static PyObject *tensor_dlpack_device(TensorObject *t, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                      PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  dls__ext_tensor ti;
  if (tensor_live(st, t, "Tensor.__dlpack_device__", &ti) != 0)
    return NULL;
  return Py_BuildValue("(ii)", (int)ti.dl->device.device_type, (int)ti.dl->device.device_id);
}

static PyObject *tensor_record_stream(TensorObject *t, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                      PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  if (nargs != 1 || kwnames)
    return dlspy_type_error(st, "Tensor.record_stream() takes one argument: the stream");
  dls_stream_t s;
  if (dlspy_stream_resolve(st, args[0], t->device, "Tensor.record_stream", "stream", &s) != 0)
    return NULL;
  if (s.id == 0)
    return dlspy_type_error(st, "Tensor.record_stream(None): a stream is needed");
  dls__ext_tensor ti;
  if (tensor_live(st, t, "Tensor.record_stream", &ti) != 0) /* after the stream: its __cuda_stream__ may close us */
    return NULL;
  dls_status_t rc = dls_tensor_record_use(t->handle, s, DLS_ACCESS_WRITE);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "Tensor.record_stream");
  Py_RETURN_NONE;
}

static PyObject *tensor_close(TensorObject *t, PyObject *unused) {
  if (t->handle.id != 0) {
    dls_tensor_t h = t->handle;
    t->handle.id = 0;
    if (!atomic_load(&dlspy_dead))
      (void)dls_tensor_release(h);
  }
  Py_RETURN_NONE;
}

static PyObject *tensor_enter(PyObject *t, PyObject *unused) { return Py_NewRef(t); }
static PyObject *tensor_exit(TensorObject *t, PyObject *const *args, Py_ssize_t nargs) { return tensor_close(t, NULL); }

/* ---- properties ---- */

/* What the properties and repr read, copied out of the core tensor before any Python object is made: making one
 * may run a garbage collection, whose finalizers may close this tensor. */
typedef struct tensor_info {
  int32_t ndim;
  int64_t shape[DLS__EXT_MAX_NDIM];
  int64_t strides[DLS__EXT_MAX_NDIM];
  DLDataType dtype;
  DLDevice device;
  void *data;
  uint64_t flags;
} tensor_info;

static int info_of(TensorObject *t, const char *pycall, tensor_info *out) {
  dls__ext_tensor ti;
  if (t->handle.id == 0 || atomic_load(&dlspy_dead) || !dls__ext_tensor_peek(t->handle, &ti)) {
    dlspy_state *st = dlspy_state_of(Py_TYPE(t));
    if (st != NULL && pycall != NULL)
      dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s: the tensor was released", pycall);
    return -1;
  }
  out->ndim = ti.dl->ndim > DLS__EXT_MAX_NDIM ? DLS__EXT_MAX_NDIM : ti.dl->ndim;
  memcpy(out->shape, ti.dl->shape, (size_t)out->ndim * sizeof out->shape[0]);
  memcpy(out->strides, ti.dl->strides, (size_t)out->ndim * sizeof out->strides[0]);
  out->dtype = ti.dl->dtype;
  out->device = ti.home;
  out->data = dlspy_view_data(ti.dl);
  out->flags = ti.flags;
  return 0;
}

#define TENSOR_GETTER(name, expr)                                    \
  static PyObject *tensor_get_##name(TensorObject *t, void *c) {      \
    tensor_info i;                                                    \
    if (info_of(t, "Tensor." #name, &i) != 0)                         \
      return NULL;                                                    \
    return (expr);                                                    \
  }

static PyObject *dims_tuple(const int64_t *d, int32_t n) {
  PyObject *r = PyTuple_New(n);
  for (int32_t i = 0; r && i < n; i++) {
    PyObject *v = PyLong_FromLongLong(d[i]);
    if (v == NULL) {
      Py_CLEAR(r);
      break;
    }
    PyTuple_SET_ITEM(r, i, v);
  }
  return r;
}

static uint64_t count_of(const tensor_info *ti) {
  uint64_t n = 1;
  for (int32_t i = 0; i < ti->ndim; i++)
    n *= (uint64_t)ti->shape[i];
  return n;
}

TENSOR_GETTER(shape, dims_tuple(i.shape, i.ndim))
TENSOR_GETTER(strides, dims_tuple(i.strides, i.ndim))
TENSOR_GETTER(ndim, PyLong_FromLong(i.ndim))
TENSOR_GETTER(dtype, dlspy_dtype_str(i.dtype))
TENSOR_GETTER(device, dlspy_device_str(i.device))
TENSOR_GETTER(size, PyLong_FromUnsignedLongLong(count_of(&i)))
TENSOR_GETTER(itemsize, PyLong_FromSize_t(dls_dtype_size(i.dtype)))
TENSOR_GETTER(nbytes, PyLong_FromUnsignedLongLong(count_of(&i) * dls_dtype_size(i.dtype)))
TENSOR_GETTER(data_ptr, PyLong_FromVoidPtr(i.data))
TENSOR_GETTER(read_only, PyBool_FromLong(!!(i.flags & DLS_TENSOR_READ_ONLY)))

static PyObject *tensor_get_handle(TensorObject *t, void *c) { return PyLong_FromUnsignedLongLong(t->handle.id); }
static PyObject *tensor_get_closed(TensorObject *t, void *c) { return PyBool_FromLong(t->handle.id == 0); }

static PyObject *tensor_repr(TensorObject *t) {
  tensor_info i;
  if (info_of(t, NULL, &i) != 0)
    return PyUnicode_FromString("dlstream.Tensor(released)");
  char dev[32], dt[48];
  PyObject *shape = dims_tuple(i.shape, i.ndim);
  PyObject *r = shape ? PyUnicode_FromFormat("dlstream.Tensor(shape=%R, dtype=%s, device='%s')", shape,
                                             dlspy_dtype_name(i.dtype, dt, sizeof dt),
                                             dls_device_str(i.device, dev, sizeof dev))
                      : NULL;
  Py_XDECREF(shape);
  return r;
}

static PyMethodDef tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__($self, stream=None, *, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "Exports the tensor (a DLPack capsule). Asynchronous on devices: the consumer's stream waits, on the device, "
     "for every queued use (-1: no sync); for host memory the host waits, as DLPack asks. The memory is freed in "
     "stream order after the consumer's stream."},
    {"__dlpack_device__", (PyCFunction)(void (*)(void))tensor_dlpack_device,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS, "__dlpack_device__($self, /)\n--\n\n(device_type, device_id), as DLPack numbers them."},
    {"record_stream", (PyCFunction)(void (*)(void))tensor_record_stream, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "record_stream($self, stream)\n--\n\nDeclares that work queued on `stream` so far uses the tensor."},
    {"__array__", (PyCFunction)(void (*)(void))dlspy_tensor_array, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "__array__($self, dtype=None, copy=None)\n--\n\n"
     "NumPy's array of a CPU tensor (np.asarray, np.array): a view of its memory after its pending work is done, as "
     "numpy.from_dlpack gives; copy=True copies, another dtype converts (a copy, refused with copy=False). A tensor "
     "on a GPU raises TypeError: copy it to the host first."},
    {"numpy", (PyCFunction)(void (*)(void))dlspy_tensor_numpy, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "numpy($self, /)\n--\n\n"
     "A NumPy array viewing this CPU tensor's memory, once the work queued on it is done (the host waits, as "
     "numpy.from_dlpack(t) does). A tensor on a GPU raises TypeError: copy it to the host first."},
    {"close", (PyCFunction)tensor_close, METH_NOARGS,
     "close($self, /)\n--\n\nReleases the tensor in stream order; the host does not wait (exports keep the memory alive). Idempotent."},
    {"__enter__", tensor_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))tensor_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_get_shape, NULL, "Extents.", NULL},
    {"strides", (getter)tensor_get_strides, NULL, "Strides in elements.", NULL},
    {"ndim", (getter)tensor_get_ndim, NULL, "Number of dimensions.", NULL},
    {"dtype", (getter)tensor_get_dtype, NULL, "Element type name ('float32' ...).", NULL},
    {"device", (getter)tensor_get_device, NULL, "Device as 'cuda:0' or 'cpu:0'.", NULL},
    {"size", (getter)tensor_get_size, NULL, "Number of elements.", NULL},
    {"itemsize", (getter)tensor_get_itemsize, NULL, "Bytes per element.", NULL},
    {"nbytes", (getter)tensor_get_nbytes, NULL, "size * itemsize.", NULL},
    {"data_ptr", (getter)tensor_get_data_ptr, NULL, "Address of the first element.", NULL},
    {"read_only", (getter)tensor_get_read_only, NULL, "Whether the producer marked it read-only.", NULL},
    {"handle", (getter)tensor_get_handle, NULL, "The dlstream handle (0 once closed).", NULL},
    {"closed", (getter)tensor_get_closed, NULL, "Whether close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot tensor_slots[] = {
    {Py_tp_doc, "A tensor dlstream owns (dlstream.empty) or views (dlstream.from_dlpack). It implements __dlpack__ "
                "and __dlpack_device__, so torch, CuPy and NumPy take it with from_dlpack. Work on it is "
                "asynchronous: after dlstream calls, synchronize before reading it on the host."},
    {Py_tp_dealloc, tensor_dealloc},
    {Py_tp_methods, tensor_methods},
    {Py_tp_getset, tensor_getset},
    {Py_tp_repr, tensor_repr},
    {0, NULL},
};

PyType_Spec dlspy_tensor_spec = {
    .name = "dlstream.Tensor",
    .basicsize = sizeof(TensorObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = tensor_slots,
};

/* ---- module functions ---- */

PyObject *dlspy_empty(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "empty";
  dlspy_state *st = dlspy_state_of_module(module);
  static const char *const names[] = {"shape", "dtype", "device", "stream", "ipc", NULL};
  PyObject *a[5];
  bool ipc = false;
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 2, a) != 0 ||
      (a[4] != NULL && dlspy_as_bool(st, a[4], pycall, "ipc", &ipc) != 0))
    return NULL;
  if (a[0] == NULL)
    return dlspy_type_error(st, "empty() missing its argument 'shape'");
  int64_t shape[DLS__EXT_MAX_NDIM];
  int32_t ndim;
  DLDataType dt;
  if (dlspy_check_runtime(st, pycall) != 0 || dlspy_parse_dtype(st, a[1], pycall, &dt) != 0 ||
      dlspy_parse_shape(st, a[0], dt, pycall, shape, &ndim) != 0)
    return NULL;
  bool have_dev = a[2] != NULL && a[2] != Py_None;
  DLDevice dev = dls_cpu();
  if (have_dev && dlspy_parse_device(st, a[2], pycall, &dev) != 0)
    return NULL;
  dls_stream_t s;
  if (dlspy_stream_resolve(st, a[3], have_dev ? dev : dlspy_default_device(), pycall, "stream", &s) != 0)
    return NULL;
  if (s.id == 0 && dlspy_context_stream(st, &s) != 0)
    return NULL;
  if (s.id != 0) {
    DLDevice sd;
    dls_status_t rc = dls_stream_device(s, &sd);
    if (rc != DLS_OK)
      return dlspy_raise(st, rc, pycall);
    if (have_dev && (sd.device_type != dev.device_type || sd.device_id != dev.device_id)) {
      if (a[3] != NULL && a[3] != Py_None) {
        char x[32], y[32];
        return dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "empty(device=%s, stream on %s): the devices differ",
                            dls_device_str(dev, x, sizeof x), dls_device_str(sd, y, sizeof y));
      }
      s.id = 0; /* the use_stream() stream is on another device */
    }
  }
  if (s.id == 0 && dlspy_default_stream(st, have_dev ? dev : dlspy_default_device(), pycall, &s) != 0)
    return NULL;
  dls_tensor_t t;
  dls_status_t rc = (ipc ? dls_tensor_empty_ipc : dls_tensor_empty)(s, ndim, shape, dt, &t);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  return dlspy_tensor_wrap(st, t);
}

/* The current stream of the framework that made `obj` on device `d` (call/current.h: its exchange API's current work
 * stream, or its registered stream provider's answer), or {0} when it names none. */
static int framework_current(dlspy_state *st, PyObject *obj, DLDevice d, DLDevice home, const char *pycall,
                             dls_stream_t *out) {
  const dlspy_type_entry *ti = dlspy_type_info(st, Py_TYPE(obj));
  dlspy_stream_question q = {.kind = ti->api != NULL ? DLSPY_KIND_XAPI : DLSPY_KIND_OTHER, .api = ti->api,
                             .dev = d, .home = home, .obj = obj, .provider = ti->provider, .arg = "obj"};
  dls__stream *s;
  return dlspy_current_stream(st, pycall, &q, out, &s);
}

PyObject *dlspy_from_dlpack(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "from_dlpack";
  dlspy_state *st = dlspy_state_of_module(module);
  static const char *const names[] = {"obj", "stream", NULL};
  PyObject *a[2];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 1, a) != 0)
    return NULL;
  if (a[0] == NULL)
    return dlspy_type_error(st, "from_dlpack() missing its argument 'obj'");
  if (dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  PyObject *obj = a[0], *cap;
  dls_stream_t producer = {0};
  if (PyCapsule_CheckExact(obj)) {
    cap = Py_NewRef(obj); /* no handshake possible: the producer's legacy stream */
  } else {
    DLDevice d, home;
    int rc = dlspy_dlpack_device(st, obj, pycall, &d);
    if (rc < 0)
      return NULL;
    if (rc == 1) {
      PyObject *meth = NULL;
      if (dlspy_getattr_opt(obj, st->s_dlpack, &meth) < 0)
        return NULL;
      if (meth == NULL)
        return dlspy_type_error(st, "from_dlpack(obj=%R): not a DLPack producer (no __dlpack__)", obj);
      Py_DECREF(meth);
      d = dls_cpu();
    }
    if (!dls__ext_home(d, &home)) /* BufferError, as the DLPack spec asks of a device the consumer cannot take */
      return dlspy_raisef(st, DLS_ERR_INVALID_TENSOR,
                          "from_dlpack(obj=%R): DLPack device type %d is not supported; dlstream takes kDLCPU, "
                          "kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM and kDLROCMHost",
                          obj, (int)d.device_type);
    if (dlspy_stream_resolve(st, a[1], home, pycall, "stream", &producer) != 0)
      return NULL;
    if (producer.id == 0 && dlspy_context_stream(st, &producer) != 0)
      return NULL;
    /* As for a launch: the producing framework's current stream (inside torch.cuda.graph, the capturing one). */
    if (producer.id == 0 && home.device_type != kDLCPU && framework_current(st, obj, d, home, pycall, &producer) != 0)
      return NULL;
    if (producer.id != 0) {
      DLDevice sd;
      if (dls_stream_device(producer, &sd) != DLS_OK || sd.device_type != home.device_type ||
          sd.device_id != home.device_id) {
        if (a[1] != NULL && a[1] != Py_None) {
          char x[32];
          return dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "from_dlpack(obj=%R, stream=%R): the tensor lives on %s",
                              obj, a[1], dls_device_str(home, x, sizeof x));
        }
        producer.id = 0;
      }
    }
    PyObject *sv;
    if (home.device_type == kDLCPU) {
      sv = Py_NewRef(Py_None);
    } else {
      if (producer.id == 0)
        producer = dls_stream_default(home, DLS_STREAM_LEGACY);
      int64_t v;
      dls_status_t r = dls_dlpack_stream_value(producer, &v);
      if (r != DLS_OK)
        return dlspy_raise(st, r, pycall);
      sv = PyLong_FromLongLong(v);
      if (sv == NULL)
        return NULL;
    }
    cap = dlspy_call_dlpack(st, obj, sv);
    Py_DECREF(sv);
    if (cap == NULL)
      return NULL;
  }
  void *managed;
  bool versioned;
  int rc = dlspy_capsule_consume(st, cap, pycall, &managed, &versioned);
  Py_DECREF(cap);
  if (rc != 0)
    return NULL;
  dls_tensor_t t;
  dls_status_t r = versioned ? dls_tensor_import_versioned(managed, producer, &t)
                             : dls_tensor_import_legacy(managed, producer, &t); /* steals managed */
  if (r != DLS_OK)
    return dlspy_raise(st, r, pycall);
  return dlspy_tensor_wrap(st, t);
}
