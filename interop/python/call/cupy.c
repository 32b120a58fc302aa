/* SPDX-License-Identifier: Apache-2.0 */
/* CuPy arrays read in C: through CuPy's public C API (CuPy >= 14.3) or, before it, a few attributes of the array
 * (data.ptr, data.device_id; for built-ins also dtype, shape, strides), and CuPy's current stream asked directly,
 * so a call on CuPy arrays builds no __cuda_array_interface__ dict and calls no Python stream provider. The path
 * stands in for the package's CuPy provider only while that provider is the one registered for CuPy's type:
 * register_stream_provider('cupy', fn) puts fn back in charge. What it cannot read goes the general way. */
#include "cupy.h"

#include <string.h>

/* CuPy's public C API (the capsule cupy._public_c_api, CuPy >= 14.3), as its header lays the table out: fields
 * are only appended; get_current_stream_ptr came with 14.3. Functions return -1 with a Python error. */
typedef struct dlspy_cupy_meta {
  void *ptr;
  int ndim;
  int device_id;
  size_t size;
  Py_ssize_t itemsize;
  const Py_ssize_t *shape;
  const Py_ssize_t *strides; /* bytes */
  PyObject *dtype;           /* borrowed numpy.dtype */
} dlspy_cupy_meta;

struct dlspy_cupy_api {
  int version_major;
  int version_minor;
  PyTypeObject *ndarray_type;
  int (*get_ndarray_ptr)(PyObject *arr, void **ptr);
  int (*get_ndarray_metadata)(PyObject *arr, dlspy_cupy_meta *out);
  int (*get_current_stream_ptr)(int device_id, void **ptr);
};

#define CUPY_CAPSULE "cupy._public_c_api"

void dlspy_cupy_clear(dlspy_state *st) {
  dlspy_cupy_state *cp = &st->cupy;
  Py_CLEAR(cp->ndarray);
  Py_CLEAR(cp->capsule);
  Py_CLEAR(cp->get_current_stream);
  for (int i = 0; i < cp->ndtypes; i++)
    Py_CLEAR(cp->dtypes[i]);
  memset(cp, 0, sizeof *cp);
}

/* `obj.name` of a module, or NULL (nothing raised). */
static PyObject *attr_or_null(PyObject *obj, const char *name) {
  PyObject *v = obj ? PyObject_GetAttrString(obj, name) : NULL;
  if (v == NULL)
    PyErr_Clear();
  return v;
}

/* Finds what the C path needs in the imported cupy module; DLSPY_CUPY_NONE when something is missing. */
static void probe(dlspy_state *st) {
  dlspy_cupy_state *cp = &st->cupy;
  cp->mode = DLSPY_CUPY_NONE;
  PyObject *name = PyUnicode_FromString("cupy");
  PyObject *cupy = name ? PyImport_GetModule(name) : NULL; /* only an imported CuPy: arrays of it exist */
  Py_XDECREF(name);
  if (cupy == NULL) {
    PyErr_Clear();
    return;
  }
  PyObject *cuda = attr_or_null(cupy, "cuda");
  PyObject *runtime = attr_or_null(cuda, "runtime");
  PyObject *hip = attr_or_null(runtime, "is_hip");
  cp->device_type = hip != NULL && PyObject_IsTrue(hip) == 1 ? kDLROCM : kDLCUDA;
  PyErr_Clear();
  PyObject *cap = attr_or_null(cupy, "_public_c_api");
  if (cap != NULL && PyCapsule_IsValid(cap, CUPY_CAPSULE)) {
    const struct dlspy_cupy_api *api = PyCapsule_GetPointer(cap, CUPY_CAPSULE);
    bool v14_3 = api != NULL && (api->version_major > 14 || (api->version_major == 14 && api->version_minor >= 3));
    if (v14_3 && api->ndarray_type != NULL && api->get_ndarray_metadata != NULL &&
        api->get_current_stream_ptr != NULL) {
      cp->api = api;
      cp->capsule = Py_NewRef(cap);
      cp->ndarray = (PyTypeObject *)Py_NewRef((PyObject *)api->ndarray_type);
      cp->mode = DLSPY_CUPY_CAPI;
    }
  }
  PyErr_Clear();
  if (cp->mode == DLSPY_CUPY_NONE) {
    PyObject *nd = attr_or_null(cupy, "ndarray");
    PyObject *gcs = attr_or_null(cuda, "get_current_stream");
    if (nd != NULL && PyType_Check(nd) && gcs != NULL && PyCallable_Check(gcs)) {
      cp->ndarray = (PyTypeObject *)Py_NewRef(nd);
      cp->get_current_stream = Py_NewRef(gcs);
      cp->mode = DLSPY_CUPY_ATTRS;
    }
    Py_XDECREF(nd);
    Py_XDECREF(gcs);
  }
  Py_XDECREF(cap);
  Py_XDECREF(hip);
  Py_XDECREF(runtime);
  Py_XDECREF(cuda);
  Py_DECREF(cupy);
}

bool dlspy_cupy_type(dlspy_state *st, PyTypeObject *tp, PyObject *provider) {
  if (provider == NULL || provider != st->cupy_provider)
    return false;
  if (st->cupy.mode == DLSPY_CUPY_UNPROBED)
    probe(st);
  return st->cupy.mode >= DLSPY_CUPY_ATTRS && PyType_IsSubtype(tp, st->cupy.ndarray);
}

/* numpy dtype -> DLPack, remembered per dtype object. false: not one dlstream reads (the general path says so). */
static bool dtype_of(dlspy_state *st, PyObject *dtype, DLDataType *out) {
  dlspy_cupy_state *cp = &st->cupy;
  for (int i = 0; i < cp->ndtypes; i++)
    if (cp->dtypes[i] == dtype) {
      *out = cp->dl_dtypes[i];
      return true;
    }
  PyObject *kind = PyObject_GetAttr(dtype, st->s_kind), *isz = PyObject_GetAttr(dtype, st->s_itemsize);
  const char *k = kind && PyUnicode_Check(kind) ? PyUnicode_AsUTF8(kind) : NULL;
  long size = isz && PyLong_Check(isz) ? PyLong_AsLong(isz) : -1;
  Py_XDECREF(kind);
  Py_XDECREF(isz);
  PyErr_Clear();
  if (k == NULL || k[0] == '\0' || k[1] != '\0' || !dlspy_dtype_of_kind(k[0], size, out))
    return false;
  int slot;
  if (cp->ndtypes < 8) {
    slot = cp->ndtypes++;
  } else {
    slot = cp->next_dtype;
    cp->next_dtype = (slot + 1) % 8;
    Py_CLEAR(cp->dtypes[slot]);
  }
  cp->dtypes[slot] = Py_NewRef(dtype);
  cp->dl_dtypes[slot] = *out;
  return true;
}

/* Shape and byte strides into out (elements); false when they do not fit the view (the general path refuses). */
static bool set_layout(dlspy_cai *out, Py_ssize_t ndim, const Py_ssize_t *shape, const Py_ssize_t *strides,
                       bool contiguous) {
  int64_t size = out->dl.dtype.bits / 8;
  if (ndim < 0 || ndim > DLS__EXT_MAX_NDIM || size <= 0)
    return false;
  out->dl.ndim = (int32_t)ndim;
  for (Py_ssize_t i = 0; i < ndim; i++) {
    out->shape[i] = shape[i];
    if (!contiguous) {
      if (strides[i] % size != 0)
        return false;
      out->strides[i] = strides[i] / size;
    }
  }
  out->dl.shape = out->shape;
  out->dl.strides = contiguous ? NULL : out->strides;
  out->meta = true;
  return true;
}

/* An int attribute of obj (a new reference), or NULL, nothing raised, when it is missing or not an int. */
static PyObject *int_attr(PyObject *obj, PyObject *name) {
  PyObject *v = obj ? PyObject_GetAttr(obj, name) : NULL;
  if (v == NULL)
    PyErr_Clear();
  else if (!PyLong_Check(v))
    Py_CLEAR(v);
  return v;
}

/* Tuple of ints -> Py_ssize_t array (at most DLS__EXT_MAX_NDIM). false: not that. */
static bool tuple_ints(PyObject *t, Py_ssize_t *out, Py_ssize_t *n) {
  if (t == NULL || !PyTuple_Check(t) || PyTuple_GET_SIZE(t) > DLS__EXT_MAX_NDIM)
    return false;
  *n = PyTuple_GET_SIZE(t);
  for (Py_ssize_t i = 0; i < *n; i++) {
    out[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
    if (out[i] == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
  }
  return true;
}

/* The attribute path's dtype, shape and strides. 1: not readable here. */
static int read_meta_attrs(dlspy_state *st, PyObject *obj, dlspy_cai *out) {
  PyObject *dtype = PyObject_GetAttr(obj, st->s_dtype), *shape = PyObject_GetAttr(obj, st->s_shape);
  PyObject *contig = PyObject_GetAttr(obj, st->s_c_contiguous);
  PyObject *strides = contig == Py_False ? PyObject_GetAttr(obj, st->s_strides) : NULL;
  Py_ssize_t sh[DLS__EXT_MAX_NDIM], sd[DLS__EXT_MAX_NDIM], n = 0, ns = -1;
  bool ok = dtype != NULL && PyBool_Check(contig) && dtype_of(st, dtype, &out->dl.dtype) &&
            tuple_ints(shape, sh, &n) && (contig == Py_True || (tuple_ints(strides, sd, &ns) && ns == n)) &&
            set_layout(out, n, sh, sd, contig == Py_True);
  Py_XDECREF(dtype);
  Py_XDECREF(shape);
  Py_XDECREF(contig);
  Py_XDECREF(strides);
  PyErr_Clear();
  return ok ? 0 : 1;
}

int dlspy_cupy_read(dlspy_state *st, PyObject *obj, bool want_meta, dlspy_cai *out) {
  dlspy_cupy_state *cp = &st->cupy;
  out->stream = NULL;
  out->read_only = false;
  out->meta = false;
  out->version = 3;
  out->dl.byte_offset = 0;
  out->dl.ndim = 0;
  out->dl.shape = out->shape;
  out->dl.strides = NULL;
  if (cp->mode == DLSPY_CUPY_CAPI) {
    dlspy_cupy_meta m;
    if (cp->api->get_ndarray_metadata(obj, &m) != 0)
      return -1;
    if (m.device_id < 0)
      return 1;
    out->dl.data = m.ptr;
    out->dl.device = dls_device(cp->device_type, m.device_id);
    if (want_meta) {
      bool contiguous = true;
      Py_ssize_t expect = m.itemsize;
      for (int i = m.ndim - 1; i >= 0; i--) {
        if (m.shape[i] > 1 && m.strides[i] != expect)
          contiguous = false;
        expect *= m.shape[i];
      }
      if (!dtype_of(st, m.dtype, &out->dl.dtype) || !set_layout(out, m.ndim, m.shape, m.strides, contiguous))
        return 1;
    }
    return 0;
  }
  if (cp->mode != DLSPY_CUPY_ATTRS)
    return 1;
  /* Anything unexpected here leaves the array to the general path, which names what is wrong. */
  PyObject *data = PyObject_GetAttr(obj, st->s_data);
  if (data == NULL)
    PyErr_Clear();
  PyObject *ptr = int_attr(data, st->s_ptr), *dev = ptr ? int_attr(data, st->s_device_id) : NULL;
  Py_XDECREF(data);
  void *p = dev ? PyLong_AsVoidPtr(ptr) : NULL;
  long id = dev ? PyLong_AsLong(dev) : -1;
  Py_XDECREF(ptr);
  Py_XDECREF(dev);
  if (PyErr_Occurred())
    PyErr_Clear();
  if (id < 0 || id > INT32_MAX)
    return 1;
  out->dl.data = p;
  out->dl.device = dls_device(cp->device_type, (int32_t)id);
  return want_meta ? read_meta_attrs(st, obj, out) : 0;
}

int dlspy_cupy_native(dlspy_state *st, int32_t device_id, void **out) {
  dlspy_cupy_state *cp = &st->cupy;
  if (cp->mode == DLSPY_CUPY_CAPI)
    return cp->api->get_current_stream_ptr(device_id, out) == 0 ? 0 : -1;
  if (cp->mode != DLSPY_CUPY_ATTRS)
    return 1;
  PyObject *id = PyLong_FromLong(device_id);
  PyObject *s = id ? PyObject_Vectorcall(cp->get_current_stream, &id, 1, NULL) : NULL;
  Py_XDECREF(id);
  if (s == NULL) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError))
      return -1;
    /* A CuPy whose get_current_stream takes no device: the provider knows how to ask it. */
    PyErr_Clear();
    cp->mode = DLSPY_CUPY_NONE;
    return 1;
  }
  PyObject *ptr = int_attr(s, st->s_ptr);
  Py_DECREF(s);
  if (ptr == NULL)
    return 1;
  *out = PyLong_AsVoidPtr(ptr);
  Py_DECREF(ptr);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return 1;
  }
  return 0;
}

