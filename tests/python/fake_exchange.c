/* SPDX-License-Identifier: Apache-2.0 */
/* _dls_fake_exchange: a tiny "framework" whose tensor types publish the DLPack C exchange API (the capsule form,
 * the older int form, and a table of an unknown major version), so the tests exercise dlstream's fast path
 * without torch. A FakeTensor views memory someone else owns (`owner` is kept alive). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "dlstream/dlpack.h"

typedef struct {
  PyObject_HEAD
  PyObject *owner;
  void *data;
  DLDevice device;
  DLDataType dtype;
  int32_t ndim;
  int64_t shape[8];
  int64_t alternate; /* FakeTensorAlt: each read moves data by this many bytes and negates it (two addresses) */
} FakeTensor;

static void *g_current_stream;  /* what current_work_stream reports */
static long g_dltensor_calls, g_stream_calls, g_managed_calls, g_deleter_calls;
static long g_fail_next;        /* the dltensor call that fails: 1 the next one, 2 the one after ...; 0 none */

static int fake_dltensor(void *obj, DLTensor *out) {
  FakeTensor *t = obj;
  g_dltensor_calls++;
  if (g_fail_next > 0 && --g_fail_next == 0) {
    PyErr_SetString(PyExc_BufferError, "fake framework: cannot describe this tensor");
    return -1;
  }
  out->data = t->data;
  out->device = t->device;
  out->ndim = t->ndim;
  out->dtype = t->dtype;
  out->shape = t->shape;
  out->strides = NULL;
  out->byte_offset = 0;
  return 0;
}

/* FakeTensorAlt's read: another data pointer at each read, two in turn (scripts/callgrind-python's launch2-alt). */
static int fake_dltensor_alt(void *obj, DLTensor *out) {
  FakeTensor *t = obj;
  int rc = fake_dltensor(obj, out);
  t->data = (char *)t->data + t->alternate;
  t->alternate = -t->alternate;
  return rc;
}

static int fake_current(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  g_stream_calls++;
  *out = g_current_stream;
  return 0;
}

typedef struct {
  DLManagedTensorVersioned m;
  PyObject *tensor;
} FakeManaged;

static void fake_deleter(DLManagedTensorVersioned *self) {
  FakeManaged *fm = (FakeManaged *)self;
  g_deleter_calls++;
  if (Py_IsInitialized()) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(fm->tensor);
    PyGILState_Release(g);
  }
  free(fm);
}

static int fake_managed(void *obj, DLManagedTensorVersioned **out) {
  FakeTensor *t = obj;
  g_managed_calls++;
  FakeManaged *fm = calloc(1, sizeof *fm);
  if (fm == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  fm->m.version.major = DLPACK_MAJOR_VERSION;
  fm->m.version.minor = DLPACK_MINOR_VERSION;
  fm->m.manager_ctx = fm;
  fm->m.deleter = fake_deleter;
  DLTensor *d = &fm->m.dl_tensor;
  fake_dltensor(obj, d);
  g_dltensor_calls--;
  fm->tensor = Py_NewRef((PyObject *)t);
  *out = &fm->m;
  return 0;
}

static int fake_to_py(DLManagedTensorVersioned *m, void **out) {
  (void)m;
  (void)out;
  PyErr_SetString(PyExc_NotImplementedError, "fake framework: no import");
  return -1;
}

static int fake_alloc(DLTensor *p, DLManagedTensorVersioned **out, void *ctx,
                      void (*set_error)(void *, const char *, const char *)) {
  (void)p;
  (void)out;
  if (set_error)
    set_error(ctx, "NotImplementedError", "fake framework: no allocator");
  return -1;
}

static DLPackExchangeAPI g_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, .prev_api = NULL},
    .managed_tensor_allocator = fake_alloc,
    .managed_tensor_from_py_object_no_sync = fake_managed,
    .managed_tensor_to_py_object_no_sync = fake_to_py,
    .dltensor_from_py_object_no_sync = fake_dltensor,
    .current_work_stream = fake_current,
};

static DLPackExchangeAPI g_api_alt = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, .prev_api = NULL},
    .managed_tensor_allocator = fake_alloc,
    .managed_tensor_from_py_object_no_sync = fake_managed,
    .managed_tensor_to_py_object_no_sync = fake_to_py,
    .dltensor_from_py_object_no_sync = fake_dltensor_alt,
    .current_work_stream = fake_current,
};

/* A table of a future major version that chains no older one: unusable. */
static DLPackExchangeAPI g_api_future = {
    .header = {.version = {DLPACK_MAJOR_VERSION + 1, 0}, .prev_api = NULL},
    .managed_tensor_allocator = fake_alloc,
    .managed_tensor_from_py_object_no_sync = fake_managed,
    .managed_tensor_to_py_object_no_sync = fake_to_py,
    .dltensor_from_py_object_no_sync = fake_dltensor,
    .current_work_stream = fake_current,
};

static int fake_init(FakeTensor *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"owner", "ptr", "shape", "code", "bits", "device_type", "device_id", "alternate", NULL};
  PyObject *owner, *shape;
  unsigned long long ptr;
  long long alternate = 0;
  int code = kDLFloat, bits = 32, dtype = kDLCPU, did = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OKO|iiiiL", kwlist, &owner, &ptr, &shape, &code, &bits, &dtype, &did,
                                   &alternate))
    return -1;
  PyObject *seq = PySequence_Fast(shape, "shape must be a sequence");
  if (seq == NULL)
    return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n > 8) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_ValueError, "at most 8 dimensions");
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++)
    self->shape[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
  Py_DECREF(seq);
  if (PyErr_Occurred())
    return -1;
  Py_XSETREF(self->owner, Py_NewRef(owner));
  self->data = (void *)(uintptr_t)ptr;
  self->alternate = alternate;
  self->ndim = (int32_t)n;
  self->dtype.code = (uint8_t)code;
  self->dtype.bits = (uint8_t)bits;
  self->dtype.lanes = 1;
  self->device.device_type = (DLDeviceType)dtype;
  self->device.device_id = did;
  return 0;
}

static void fake_dealloc(FakeTensor *self) {
  PyTypeObject *tp = Py_TYPE(self);
  Py_CLEAR(self->owner);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static void capsule_destructor(PyObject *cap) {
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    m->deleter(m);
  }
}

static PyObject *fake_dlpack(FakeTensor *self, PyObject *args, PyObject *kw) {
  DLManagedTensorVersioned *m;
  if (fake_managed(self, &m) != 0)
    return NULL;
  return PyCapsule_New(m, "dltensor_versioned", capsule_destructor);
}

static PyObject *fake_dlpack_device(FakeTensor *self, PyObject *unused) {
  return Py_BuildValue("(ii)", (int)self->device.device_type, (int)self->device.device_id);
}

static PyMethodDef fake_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))fake_dlpack, METH_VARARGS | METH_KEYWORDS, NULL},
    {"__dlpack_device__", (PyCFunction)fake_dlpack_device, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot fake_slots[] = {
    {Py_tp_init, fake_init},     {Py_tp_new, PyType_GenericNew}, {Py_tp_dealloc, fake_dealloc},
    {Py_tp_methods, fake_methods}, {0, NULL},
};

static PyType_Spec fake_spec = {"_dls_fake_exchange.FakeTensor", sizeof(FakeTensor), 0, Py_TPFLAGS_DEFAULT, fake_slots};
static PyType_Spec fake_int_spec = {"_dls_fake_exchange.FakeTensorInt", sizeof(FakeTensor), 0, Py_TPFLAGS_DEFAULT,
                                    fake_slots};
static PyType_Spec fake_alt_spec = {"_dls_fake_exchange.FakeTensorAlt", sizeof(FakeTensor), 0, Py_TPFLAGS_DEFAULT,
                                    fake_slots};
static PyType_Spec fake_future_spec = {"_dls_fake_exchange.FakeTensorFuture", sizeof(FakeTensor), 0,
                                       Py_TPFLAGS_DEFAULT, fake_slots};

static PyObject *set_current_stream(PyObject *m, PyObject *arg) {
  g_current_stream = PyLong_AsVoidPtr(arg);
  if (PyErr_Occurred())
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *current_stream(PyObject *m, PyObject *unused) { return PyLong_FromVoidPtr(g_current_stream); }

static PyObject *counters(PyObject *m, PyObject *unused) {
  return Py_BuildValue("{slslslsl}", "dltensor", g_dltensor_calls, "current_stream", g_stream_calls, "managed",
                       g_managed_calls, "deleter", g_deleter_calls);
}

static PyObject *fail_next(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  long n = nargs > 0 ? PyLong_AsLong(args[0]) : 1;
  if (n < 1) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError, "fail_next(n=1): n >= 1");
    return NULL;
  }
  g_fail_next = n;
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"set_current_stream", set_current_stream, METH_O, "What current_work_stream reports (an int pointer)."},
    {"current_stream", current_stream, METH_NOARGS, "What current_work_stream reports now."},
    {"counters", counters, METH_NOARGS, "Calls made into the exchange API so far."},
    {"fail_next", (PyCFunction)(void (*)(void))fail_next, METH_FASTCALL,
     "fail_next(n=1): the n-th next dltensor_from_py_object_no_sync fails."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_dls_fake_exchange", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__dls_fake_exchange(void);
PyMODINIT_FUNC PyInit__dls_fake_exchange(void) {
  PyObject *m = PyModule_Create(&moddef);
  if (m == NULL)
    return NULL;
  PyObject *t1 = PyType_FromSpec(&fake_spec), *t2 = PyType_FromSpec(&fake_int_spec),
           *t3 = PyType_FromSpec(&fake_future_spec);
  PyObject *cap = PyCapsule_New(&g_api, "dlpack_exchange_api", NULL);
  PyObject *cap3 = PyCapsule_New(&g_api_future, "dlpack_exchange_api", NULL);
  PyObject *addr = PyLong_FromVoidPtr(&g_api);
  if (!t1 || !t2 || !t3 || !cap || !cap3 || !addr ||
      PyObject_SetAttrString(t1, "__dlpack_c_exchange_api__", cap) != 0 ||
      PyObject_SetAttrString(t2, "__c_dlpack_exchange_api__", addr) != 0 ||
      PyObject_SetAttrString(t3, "__dlpack_c_exchange_api__", cap3) != 0 ||
      PyModule_AddObjectRef(m, "FakeTensor", t1) != 0 || PyModule_AddObjectRef(m, "FakeTensorInt", t2) != 0 ||
      PyModule_AddObjectRef(m, "FakeTensorFuture", t3) != 0) {
    Py_XDECREF(t1);
    Py_XDECREF(t2);
    Py_XDECREF(t3);
    Py_XDECREF(cap);
    Py_XDECREF(cap3);
    Py_XDECREF(addr);
    Py_DECREF(m);
    return NULL;
  }
  Py_DECREF(t1);
  Py_DECREF(t2);
  Py_DECREF(t3);
  Py_DECREF(cap);
  Py_DECREF(cap3);
  Py_DECREF(addr);
  PyObject *t4 = PyType_FromSpec(&fake_alt_spec), *cap4 = PyCapsule_New(&g_api_alt, "dlpack_exchange_api", NULL);
  if (!t4 || !cap4 || PyObject_SetAttrString(t4, "__dlpack_c_exchange_api__", cap4) != 0 ||
      PyModule_AddObjectRef(m, "FakeTensorAlt", t4) != 0) {
    Py_DECREF(m);
    m = NULL;
  }
  Py_XDECREF(t4);
  Py_XDECREF(cap4);
  return m;
}
