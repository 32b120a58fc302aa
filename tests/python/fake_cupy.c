/* SPDX-License-Identifier: Apache-2.0 */
/* _dls_fake_cupy: a stand-in for CuPy's array and stream types, written in C as CuPy's are (Cython), so that
 * dlstream's CuPy path runs and can be counted (scripts/callgrind-python) and tested without CuPy or a GPU (on
 * the null driver). tests/python/fake_cupy/cupy/__init__.py makes it importable as `cupy`. It offers what
 * dlstream reads of CuPy: ndarray's data.ptr, data.device_id, shape, strides, _c_contiguous, dtype, device and
 * __cuda_array_interface__ (version 3, its stream the current one); cuda.get_current_stream(device_id) and
 * Stream (a context manager that makes itself current, or use(); also ExternalStream(ptr, device_id)),
 * runtime.getDevice(); and a public C API table laid out as CuPy 14.3
 * documents it (version, ndarray type, get_ndarray_ptr, get_ndarray_metadata, get_current_stream_ptr). Memory
 * is never touched: pointers are whatever the test gives. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>

#define MAX_DIMS 8
#define MAX_DEVICES 4

typedef struct {
  PyObject_HEAD
  intptr_t ptr;
  int device_id;
} MemoryPointer;

typedef struct {
  PyObject_HEAD
  intptr_t ptr;
  int device_id;
  PyObject *prev; /* the stream that was current before __enter__ */
} Stream;

typedef struct {
  PyObject_HEAD
  int id;
} Device;

typedef struct {
  PyObject_HEAD
  MemoryPointer *data;
  PyObject *dtype; /* a numpy.dtype */
  Py_ssize_t itemsize;
  int ndim;
  Py_ssize_t size;
  Py_ssize_t shape[MAX_DIMS];
  Py_ssize_t strides[MAX_DIMS]; /* bytes */
  int c_contiguous;
} NDArray;

/* The table of the public C API, in the order CuPy 14.3 documents. */
typedef struct {
  void *ptr;
  int ndim;
  int device_id;
  size_t size;
  Py_ssize_t itemsize;
  const Py_ssize_t *shape;
  const Py_ssize_t *strides;
  PyObject *dtype;
} Metadata;
typedef struct {
  int version_major;
  int version_minor;
  PyTypeObject *ndarray_type;
  int (*get_ndarray_ptr)(PyObject *arr, void **ptr);
  int (*get_ndarray_metadata)(PyObject *arr, Metadata *out);
  int (*get_current_stream_ptr)(int device_id, void **ptr);
} Api;

static PyTypeObject *g_ndarray_type, *g_memptr_type, *g_stream_type, *g_device_type;
static PyObject *g_current[MAX_DEVICES]; /* the current Stream of each device (strong) */
static int g_device;                     /* the current device */
static long g_cai_reads, g_stream_calls, g_capi_calls;

/* ---- streams ---- */

static PyObject *current_stream(int device_id) {
  if (device_id < 0)
    device_id = g_device;
  if (device_id >= MAX_DEVICES) {
    PyErr_Format(PyExc_ValueError, "fake cupy: no device %d", device_id);
    return NULL;
  }
  if (g_current[device_id] == NULL) {
    Stream *s = PyObject_New(Stream, g_stream_type);
    if (s == NULL)
      return NULL;
    s->ptr = 0; /* CuPy's null stream: the legacy default stream */
    s->device_id = device_id;
    s->prev = NULL;
    g_current[device_id] = (PyObject *)s;
  }
  return Py_NewRef(g_current[device_id]);
}

static int stream_init(Stream *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"ptr", "device_id", NULL};
  unsigned long long ptr = 0;
  self->device_id = g_device;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|Ki", kwlist, &ptr, &self->device_id))
    return -1;
  self->ptr = (intptr_t)ptr;
  return 0;
}

static PyObject *stream_enter(Stream *self, PyObject *unused) {
  PyObject *prev = current_stream(self->device_id);
  if (prev == NULL)
    return NULL;
  Py_XSETREF(self->prev, prev);
  Py_XSETREF(g_current[self->device_id], Py_NewRef((PyObject *)self));
  return Py_NewRef((PyObject *)self);
}

static PyObject *stream_exit(Stream *self, PyObject *args) {
  if (self->prev != NULL) {
    Py_XSETREF(g_current[self->device_id], self->prev);
    self->prev = NULL;
  }
  Py_RETURN_NONE;
}

static PyObject *stream_cuda_stream(Stream *self, PyObject *unused) { return Py_BuildValue("(in)", 0, self->ptr); }

/* use(): makes the stream current on its device (CuPy checks it is the current device). */
static PyObject *stream_use(Stream *self, PyObject *unused) {
  if (self->device_id != g_device) {
    PyErr_Format(PyExc_RuntimeError, "fake cupy: the stream's device (%d) is not the current one (%d)",
                 self->device_id, g_device);
    return NULL;
  }
  Py_XSETREF(g_current[self->device_id], Py_NewRef((PyObject *)self));
  return Py_NewRef((PyObject *)self);
}

static void stream_dealloc(Stream *self) {
  PyTypeObject *tp = Py_TYPE(self);
  Py_CLEAR(self->prev);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyMemberDef stream_members[] = {
    {"ptr", T_PYSSIZET, offsetof(Stream, ptr), READONLY, NULL},
    {"device_id", T_INT, offsetof(Stream, device_id), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};
static PyMethodDef stream_methods[] = {
    {"__enter__", (PyCFunction)stream_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)stream_exit, METH_VARARGS, NULL},
    {"__cuda_stream__", (PyCFunction)stream_cuda_stream, METH_NOARGS, NULL},
    {"use", (PyCFunction)stream_use, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};
static PyType_Slot stream_slots[] = {
    {Py_tp_init, stream_init},       {Py_tp_new, PyType_GenericNew}, {Py_tp_dealloc, stream_dealloc},
    {Py_tp_members, stream_members}, {Py_tp_methods, stream_methods}, {0, NULL},
};
static PyType_Spec stream_spec = {"cupy.cuda.stream.Stream", sizeof(Stream), 0, Py_TPFLAGS_DEFAULT, stream_slots};

/* get_current_stream(device_id=-1) */
static PyObject *get_current_stream(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  long dev = -1;
  if (nargs > 1 || (nargs == 1 && (dev = PyLong_AsLong(args[0])) == -1 && PyErr_Occurred())) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "get_current_stream(device_id=-1)");
    return NULL;
  }
  g_stream_calls++;
  return current_stream((int)dev);
}

/* ---- memory pointers and devices ---- */

static PyMemberDef memptr_members[] = {
    {"ptr", T_PYSSIZET, offsetof(MemoryPointer, ptr), READONLY, NULL},
    {"device_id", T_INT, offsetof(MemoryPointer, device_id), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};
static void plain_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}
static PyType_Slot memptr_slots[] = {{Py_tp_dealloc, plain_dealloc}, {Py_tp_members, memptr_members}, {0, NULL}};
static PyType_Spec memptr_spec = {"cupy.cuda.memory.MemoryPointer", sizeof(MemoryPointer), 0, Py_TPFLAGS_DEFAULT,
                                  memptr_slots};
static PyMemberDef device_members[] = {{"id", T_INT, offsetof(Device, id), READONLY, NULL}, {NULL, 0, 0, 0, NULL}};
static PyType_Slot device_slots[] = {{Py_tp_dealloc, plain_dealloc}, {Py_tp_members, device_members}, {0, NULL}};
static PyType_Spec device_spec = {"cupy.cuda.device.Device", sizeof(Device), 0, Py_TPFLAGS_DEFAULT, device_slots};

/* ---- arrays ---- */

/* ndarray(ptr, shape, dtype, strides=None, device_id=0): strides in bytes; None is C order. */
static int ndarray_init(NDArray *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"ptr", "shape", "dtype", "strides", "device_id", NULL};
  unsigned long long ptr;
  PyObject *shape, *dtype, *strides = Py_None;
  int device_id = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "KOO|Oi", kwlist, &ptr, &shape, &dtype, &strides, &device_id))
    return -1;
  PyObject *isz = PyObject_GetAttrString(dtype, "itemsize");
  self->itemsize = isz ? PyLong_AsSsize_t(isz) : -1;
  Py_XDECREF(isz);
  if (self->itemsize <= 0)
    return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_ValueError, "dtype.itemsize"), -1);
  PyObject *sh = PySequence_Tuple(shape), *sd = strides == Py_None ? NULL : PySequence_Tuple(strides);
  if (sh == NULL || (strides != Py_None && sd == NULL) || PyTuple_GET_SIZE(sh) > MAX_DIMS ||
      (sd && PyTuple_GET_SIZE(sd) != PyTuple_GET_SIZE(sh))) {
    Py_XDECREF(sh);
    Py_XDECREF(sd);
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError, "fake cupy: shape and strides of at most 8 dimensions, of one length");
    return -1;
  }
  self->ndim = (int)PyTuple_GET_SIZE(sh);
  self->size = 1;
  Py_ssize_t expect = self->itemsize;
  for (int i = self->ndim - 1; i >= 0; i--) {
    self->shape[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(sh, i));
    self->strides[i] = sd ? PyLong_AsSsize_t(PyTuple_GET_ITEM(sd, i)) : expect;
    expect *= self->shape[i];
    self->size *= self->shape[i];
  }
  self->c_contiguous = 1;
  expect = self->itemsize;
  for (int i = self->ndim - 1; i >= 0; i--) {
    if (self->shape[i] > 1 && self->strides[i] != expect)
      self->c_contiguous = 0;
    expect *= self->shape[i];
  }
  Py_DECREF(sh);
  Py_XDECREF(sd);
  if (PyErr_Occurred())
    return -1;
  MemoryPointer *mp = PyObject_New(MemoryPointer, g_memptr_type);
  if (mp == NULL)
    return -1;
  mp->ptr = (intptr_t)ptr;
  mp->device_id = device_id;
  Py_XSETREF(self->data, mp);
  Py_XSETREF(self->dtype, Py_NewRef(dtype));
  return 0;
}

static void ndarray_dealloc(NDArray *self) {
  PyTypeObject *tp = Py_TYPE(self);
  Py_CLEAR(self->data);
  Py_CLEAR(self->dtype);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyObject *ints(const Py_ssize_t *v, int n) {
  PyObject *t = PyTuple_New(n);
  for (int i = 0; t != NULL && i < n; i++) {
    PyObject *x = PyLong_FromSsize_t(v[i]);
    if (x == NULL) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, i, x);
  }
  return t;
}

static PyObject *ndarray_data(NDArray *a, void *c) { return Py_NewRef((PyObject *)a->data); }
static PyObject *ndarray_shape(NDArray *a, void *c) { return ints(a->shape, a->ndim); }
static PyObject *ndarray_strides(NDArray *a, void *c) { return ints(a->strides, a->ndim); }
static PyObject *ndarray_contiguous(NDArray *a, void *c) { return PyBool_FromLong(a->c_contiguous); }
static PyObject *ndarray_dtype(NDArray *a, void *c) { return Py_NewRef(a->dtype); }
static PyObject *ndarray_size(NDArray *a, void *c) { return PyLong_FromSsize_t(a->size); }
static PyObject *ndarray_device(NDArray *a, void *c) {
  Device *d = PyObject_New(Device, g_device_type);
  if (d != NULL)
    d->id = a->data->device_id;
  return (PyObject *)d;
}

/* As CuPy builds it: shape, typestr, descr, stream (the current one; 0 is given as 1), version, strides, data. */
static PyObject *ndarray_cai(NDArray *a, void *c) {
  g_cai_reads++;
  PyObject *d = PyDict_New(), *v;
  if (d == NULL)
    return NULL;
#define PUT(key, expr)                                                          \
  do {                                                                          \
    if ((v = (expr)) == NULL || PyDict_SetItemString(d, key, v) != 0) {         \
      Py_XDECREF(v);                                                            \
      Py_DECREF(d);                                                             \
      return NULL;                                                              \
    }                                                                           \
    Py_DECREF(v);                                                               \
  } while (0)
  PUT("shape", ints(a->shape, a->ndim));
  PUT("typestr", PyObject_GetAttrString(a->dtype, "str"));
  PUT("descr", PyObject_GetAttrString(a->dtype, "descr"));
  PyObject *s = current_stream(a->data->device_id);
  if (s == NULL) {
    Py_DECREF(d);
    return NULL;
  }
  intptr_t sp = ((Stream *)s)->ptr;
  Py_DECREF(s);
  PUT("stream", PyLong_FromSsize_t(sp == 0 ? 1 : sp));
  PUT("version", PyLong_FromLong(3));
  PUT("strides", a->c_contiguous ? Py_NewRef(Py_None) : ints(a->strides, a->ndim));
  PUT("data", Py_BuildValue("(nO)", a->data->ptr, Py_False));
#undef PUT
  return d;
}

static PyObject *ndarray_dlpack_device(NDArray *a, PyObject *unused) {
  return Py_BuildValue("(ii)", 2, a->data->device_id);
}

static PyGetSetDef ndarray_getset[] = {
    {"data", (getter)ndarray_data, NULL, NULL, NULL},
    {"shape", (getter)ndarray_shape, NULL, NULL, NULL},
    {"strides", (getter)ndarray_strides, NULL, NULL, NULL},
    {"_c_contiguous", (getter)ndarray_contiguous, NULL, NULL, NULL},
    {"dtype", (getter)ndarray_dtype, NULL, NULL, NULL},
    {"size", (getter)ndarray_size, NULL, NULL, NULL},
    {"device", (getter)ndarray_device, NULL, NULL, NULL},
    {"__cuda_array_interface__", (getter)ndarray_cai, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyMethodDef ndarray_methods[] = {
    {"__dlpack_device__", (PyCFunction)ndarray_dlpack_device, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};
static PyType_Slot ndarray_slots[] = {
    {Py_tp_init, ndarray_init},       {Py_tp_new, PyType_GenericNew},     {Py_tp_dealloc, ndarray_dealloc},
    {Py_tp_getset, ndarray_getset},   {Py_tp_methods, ndarray_methods},   {0, NULL},
};
static PyType_Spec ndarray_spec = {"cupy._core.core.ndarray", sizeof(NDArray), 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, ndarray_slots};

/* ---- the public C API ---- */

static int api_ptr(PyObject *arr, void **ptr) {
  g_capi_calls++;
  *ptr = (void *)((NDArray *)arr)->data->ptr;
  return 0;
}

static int api_metadata(PyObject *arr, Metadata *out) {
  NDArray *a = (NDArray *)arr;
  g_capi_calls++;
  out->ptr = (void *)a->data->ptr;
  out->ndim = a->ndim;
  out->device_id = a->data->device_id;
  out->size = (size_t)a->size;
  out->itemsize = a->itemsize;
  out->shape = a->shape;
  out->strides = a->strides;
  out->dtype = a->dtype;
  return 0;
}

static int api_stream(int device_id, void **ptr) {
  g_capi_calls++;
  if (device_id < 0) {
    PyErr_SetString(PyExc_ValueError, "get_current_stream_ptr: device_id must be >= 0");
    return -1;
  }
  PyObject *s = current_stream(device_id);
  if (s == NULL)
    return -1;
  *ptr = (void *)((Stream *)s)->ptr;
  Py_DECREF(s);
  return 0;
}

static Api g_api = {14, 3, NULL, api_ptr, api_metadata, api_stream};

/* ---- the module ---- */

static PyObject *counters(PyObject *m, PyObject *unused) {
  return Py_BuildValue("{slslsl}", "cai", g_cai_reads, "get_current_stream", g_stream_calls, "c_api", g_capi_calls);
}

static PyObject *get_device(PyObject *m, PyObject *unused) { return PyLong_FromLong(g_device); }

static PyObject *set_device(PyObject *m, PyObject *arg) {
  long d = PyLong_AsLong(arg);
  if (d < 0 || d >= MAX_DEVICES) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError, "set_device: 0 to 3");
    return NULL;
  }
  g_device = (int)d;
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"get_current_stream", (PyCFunction)(void (*)(void))get_current_stream, METH_FASTCALL,
     "get_current_stream(device_id=-1): the current Stream of a device."},
    {"counters", counters, METH_NOARGS, "Reads of __cuda_array_interface__, get_current_stream and C API calls."},
    {"set_device", set_device, METH_O, "Makes a device current."},
    {"get_device", get_device, METH_NOARGS, "The current device."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_dls_fake_cupy", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__dls_fake_cupy(void);
PyMODINIT_FUNC PyInit__dls_fake_cupy(void) {
  PyObject *m = PyModule_Create(&moddef);
  if (m == NULL)
    return NULL;
  g_ndarray_type = (PyTypeObject *)PyType_FromSpec(&ndarray_spec);
  g_memptr_type = (PyTypeObject *)PyType_FromSpec(&memptr_spec);
  g_stream_type = (PyTypeObject *)PyType_FromSpec(&stream_spec);
  g_device_type = (PyTypeObject *)PyType_FromSpec(&device_spec);
  g_api.ndarray_type = g_ndarray_type;
  PyObject *cap = PyCapsule_New(&g_api, "cupy._public_c_api", NULL);
  if (!g_ndarray_type || !g_memptr_type || !g_stream_type || !g_device_type || !cap ||
      PyModule_AddObjectRef(m, "ndarray", (PyObject *)g_ndarray_type) != 0 ||
      PyModule_AddObjectRef(m, "MemoryPointer", (PyObject *)g_memptr_type) != 0 ||
      PyModule_AddObjectRef(m, "Stream", (PyObject *)g_stream_type) != 0 ||
      PyModule_AddObjectRef(m, "Device", (PyObject *)g_device_type) != 0 ||
      PyModule_AddObjectRef(m, "public_c_api", cap) != 0) {
    Py_XDECREF(cap);
    Py_DECREF(m);
    return NULL;
  }
  Py_DECREF(cap);
  return m;
}
