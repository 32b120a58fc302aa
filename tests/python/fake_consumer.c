/* SPDX-License-Identifier: Apache-2.0 */
/* _dls_fake_consumer: a consumer of the DLPack C exchange API, as torch or tvm-ffi read one, for the tests of
 * dlstream.Tensor's table (tests/python/test_exchange_producer.py): it finds the table on the object's type (a
 * capsule named "dlpack_exchange_api", its major version checked through prev_api) and calls each entry. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <string.h>

#include "dlstream/dlpack.h"

/* The table of `type`, as a consumer finds it; NULL with an exception when there is none it can use. */
static const DLPackExchangeAPI *api_of(PyObject *type) {
  PyObject *cap = PyObject_GetAttrString(type, "__dlpack_c_exchange_api__");
  if (cap == NULL)
    return NULL;
  const DLPackExchangeAPIHeader *h = NULL;
  if (PyCapsule_IsValid(cap, "dlpack_exchange_api"))
    h = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
  Py_DECREF(cap);
  while (h != NULL && h->version.major != DLPACK_MAJOR_VERSION)
    h = h->prev_api;
  if (h == NULL)
    PyErr_SetString(PyExc_TypeError, "fake consumer: no exchange API table of major version 1");
  return (const DLPackExchangeAPI *)h;
}

static PyObject *info(PyObject *m, PyObject *type) {
  const DLPackExchangeAPI *a = api_of(type);
  if (a == NULL)
    return NULL;
  return Py_BuildValue("{s(II)sOsOsOsOsOsO}", "version", a->header.version.major, a->header.version.minor, "prev_api",
                       a->header.prev_api ? Py_True : Py_False, "allocator",
                       a->managed_tensor_allocator ? Py_True : Py_False, "from_object",
                       a->managed_tensor_from_py_object_no_sync ? Py_True : Py_False, "to_object",
                       a->managed_tensor_to_py_object_no_sync ? Py_True : Py_False, "dltensor",
                       a->dltensor_from_py_object_no_sync ? Py_True : Py_False, "current_work_stream",
                       a->current_work_stream ? Py_True : Py_False);
}

static PyObject *dims(const int64_t *d, int32_t n) {
  PyObject *t = PyTuple_New(d != NULL ? n : 0);
  for (int32_t i = 0; t != NULL && d != NULL && i < n; i++)
    PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(d[i]));
  return t;
}

/* What a consumer reads of a managed tensor: its fields, and its first float32 in host memory. */
static PyObject *describe(const DLManagedTensorVersioned *mt) {
  const DLTensor *d = &mt->dl_tensor;
  PyObject *first = Py_NewRef(Py_None);
  bool host = d->device.device_type == kDLCPU && d->dtype.code == kDLFloat && d->dtype.bits == 32 && d->ndim > 0 &&
              d->shape[0] > 0;
  if (host)
    Py_SETREF(first, PyFloat_FromDouble(*(const float *)((const char *)d->data + d->byte_offset)));
  return Py_BuildValue("{s(II)sKsKs(ii)sNsNs(iii)sKsN}", "version", mt->version.major, mt->version.minor, "flags",
                       (unsigned long long)mt->flags, "data", (unsigned long long)(uintptr_t)d->data, "device",
                       (int)d->device.device_type, (int)d->device.device_id, "shape", dims(d->shape, d->ndim),
                       "strides", dims(d->strides, d->ndim), "dtype", (int)d->dtype.code, (int)d->dtype.bits,
                       (int)d->dtype.lanes, "byte_offset", (unsigned long long)d->byte_offset, "first", first);
}

static PyObject *managed(PyObject *m, PyObject *obj) {
  const DLPackExchangeAPI *a = api_of((PyObject *)Py_TYPE(obj));
  DLManagedTensorVersioned *mt = NULL;
  if (a == NULL || a->managed_tensor_from_py_object_no_sync(obj, &mt) != 0)
    return NULL;
  PyObject *r = describe(mt);
  if (mt->deleter != NULL)
    mt->deleter(mt);
  return r;
}

/* The managed tensor kept (a capsule whose end calls its deleter): a consumer holding the export. */
static void held_end(PyObject *cap) {
  DLManagedTensorVersioned *mt = PyCapsule_GetPointer(cap, "dls_test_held");
  if (mt != NULL && mt->deleter != NULL)
    mt->deleter(mt);
}

static PyObject *hold(PyObject *m, PyObject *obj) {
  const DLPackExchangeAPI *a = api_of((PyObject *)Py_TYPE(obj));
  DLManagedTensorVersioned *mt = NULL;
  if (a == NULL || a->managed_tensor_from_py_object_no_sync(obj, &mt) != 0)
    return NULL;
  PyObject *cap = PyCapsule_New(mt, "dls_test_held", held_end);
  if (cap == NULL && mt->deleter != NULL)
    mt->deleter(mt);
  return cap;
}

static PyObject *held_info(PyObject *m, PyObject *cap) {
  DLManagedTensorVersioned *mt = PyCapsule_GetPointer(cap, "dls_test_held");
  return mt != NULL ? describe(mt) : NULL;
}

static PyObject *stream(PyObject *m, PyObject *args) {
  PyObject *type;
  int dt, id;
  if (!PyArg_ParseTuple(args, "Oii", &type, &dt, &id))
    return NULL;
  const DLPackExchangeAPI *a = api_of(type);
  void *s = (void *)1;
  if (a == NULL || a->current_work_stream((DLDeviceType)dt, id, &s) != 0)
    return NULL;
  return PyLong_FromVoidPtr(s);
}

/* The allocator's errors, as a consumer collects them. */
typedef struct {
  char kind[64], message[512];
} alloc_error;

static void set_error(void *ctx, const char *kind, const char *message) {
  alloc_error *e = ctx;
  snprintf(e->kind, sizeof e->kind, "%s", kind);
  snprintf(e->message, sizeof e->message, "%s", message);
}

/* allocate(type, shape, code, bits, device_type, device_id): the table's allocator, then its object of the result. */
static PyObject *allocate(PyObject *m, PyObject *args) {
  PyObject *type, *shape;
  int code, bits, dt, id;
  if (!PyArg_ParseTuple(args, "OOiiii", &type, &shape, &code, &bits, &dt, &id))
    return NULL;
  const DLPackExchangeAPI *a = api_of(type);
  if (a == NULL)
    return NULL;
  int64_t ext[8];
  Py_ssize_t n = PySequence_Size(shape);
  for (Py_ssize_t i = 0; i < n && i < 8; i++) {
    PyObject *v = PySequence_GetItem(shape, i);
    ext[i] = v != NULL ? PyLong_AsLongLong(v) : -1;
    Py_XDECREF(v);
  }
  if (PyErr_Occurred() || n < 0 || n > 8)
    return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "at most 8 dimensions");
  DLTensor proto;
  memset(&proto, 0, sizeof proto);
  proto.device.device_type = (DLDeviceType)dt;
  proto.device.device_id = id;
  proto.ndim = (int32_t)n;
  proto.dtype.code = (uint8_t)code;
  proto.dtype.bits = (uint8_t)bits;
  proto.dtype.lanes = 1;
  proto.shape = ext;
  DLManagedTensorVersioned *mt = NULL;
  alloc_error e = {"", ""};
  Py_BEGIN_ALLOW_THREADS /* as tvm-ffi allocates: inside a kernel that runs without the GIL */
  if (a->managed_tensor_allocator(&proto, &mt, &e, set_error) != 0)
    mt = NULL;
  Py_END_ALLOW_THREADS
  if (mt == NULL)
    return PyErr_Format(PyExc_RuntimeError, "allocator: %s: %s", e.kind, e.message);
  void *out = NULL;
  if (a->managed_tensor_to_py_object_no_sync(mt, &out) != 0)
    return NULL;
  return out;
}

/* to_object(type, capsule): a versioned DLPack capsule (consumed) made the table's object. */
static PyObject *to_object(PyObject *m, PyObject *args) {
  PyObject *type, *cap;
  if (!PyArg_ParseTuple(args, "OO", &type, &cap))
    return NULL;
  const DLPackExchangeAPI *a = api_of(type);
  if (a == NULL)
    return NULL;
  DLManagedTensorVersioned *mt = PyCapsule_GetPointer(cap, "dltensor_versioned");
  if (mt == NULL || PyCapsule_SetName(cap, "used_dltensor_versioned") != 0)
    return NULL;
  void *out = NULL;
  if (a->managed_tensor_to_py_object_no_sync(mt, &out) != 0)
    return NULL;
  return out;
}

static PyMethodDef methods[] = {
    {"info", info, METH_O, "The table of a type: version, chain, which entries it has."},
    {"managed", managed, METH_O, "managed_tensor_from_py_object_no_sync: the managed tensor's fields, then its deleter."},
    {"hold", hold, METH_O, "The same, kept in a capsule until it goes (its end calls the deleter)."},
    {"held_info", held_info, METH_O, "The fields of a held managed tensor."},
    {"stream", stream, METH_VARARGS, "stream(type, device_type, device_id): current_work_stream."},
    {"allocate", allocate, METH_VARARGS, "allocate(type, shape, code, bits, device_type, device_id)."},
    {"to_object", to_object, METH_VARARGS, "to_object(type, capsule): managed_tensor_to_py_object_no_sync."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_dls_fake_consumer", NULL, -1, methods};

PyMODINIT_FUNC PyInit__dls_fake_consumer(void);
PyMODINIT_FUNC PyInit__dls_fake_consumer(void) { return PyModule_Create(&moddef); }
