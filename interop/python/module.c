/* SPDX-License-Identifier: Apache-2.0 */
/* The module dlstream._dlstream: its state, exceptions, devices and dtypes, module functions and initialization. */
#include "dlspy.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

_Atomic int dlspy_dead;
_Atomic int dlspy_nogil_calls;

dlspy_state *dlspy_state_of(PyTypeObject *tp) {
  PyObject *m = PyType_GetModuleByDef(tp, &dlspy_moduledef);
  if (m == NULL) {
    PyErr_Clear();
    return NULL;
  }
  return (dlspy_state *)PyModule_GetState(m);
}

/* ---- exceptions ---- */

typedef struct exc_def {
  int status;
  const char *name;
  const char *doc;
} exc_def;

/* One class per status; each also derives from the built-in it means. */
static const exc_def g_exc_defs[] = {
    {DLS_ERR_INVALID_ARGUMENT, "InvalidArgumentError", "An argument has a value dlstream refuses."},
    {DLS_ERR_INVALID_HANDLE, "InvalidHandleError", "A closed or stale stream, event, tensor, module or function."},
    {DLS_ERR_INVALID_DEVICE, "InvalidDeviceError", "A device that does not exist, or objects on different devices."},
    {DLS_ERR_UNAVAILABLE, "UnavailableError", "The backend cannot be used on this machine (the message says why)."},
    {DLS_ERR_BACKEND, "BackendError", "The GPU driver or a CPU stream reported a failure."},
    {DLS_ERR_OUT_OF_MEMORY, "OutOfMemoryError", "Device or host memory ran out."},
    {DLS_ERR_NOT_SUPPORTED, "NotSupportedError", "The backend does not implement this operation."},
    {DLS_ERR_BUSY, "BusyError", "A resource is in use."},
    {DLS_ERR_TIMEOUT, "TimedOutError", "A wait timed out (for example a latch that was never opened)."},
    {DLS_ERR_NOT_FOUND, "NotFoundError", "A kernel, built-in or file was not found."},
    {DLS_ERR_INVALID_TENSOR, "InvalidTensorError", "A DLPack tensor failed validation."},
    {DLS_ERR_VERSION, "VersionError", "A DLPack tensor of an unsupported major version."},
    {DLS_ERR_READ_ONLY, "ReadOnlyError", "A read-only tensor was passed where the kernel may write."},
    {DLS_ERR_STATE, "StateError", "The call is not valid now (for example after shutdown)."},
    {DLS_ERR_FORK, "ForkError", "dlstream was initialized before fork(); it cannot be used in the child."},
    {DLS_ERR_INTERNAL, "InternalError", "An internal error in dlstream."},
};

static PyObject *builtin_base(int status) {
  switch (status) {
  case DLS_ERR_INVALID_ARGUMENT:
  case DLS_ERR_INVALID_HANDLE:
  case DLS_ERR_INVALID_DEVICE:
    return PyExc_ValueError;
  case DLS_ERR_INVALID_TENSOR:
  case DLS_ERR_VERSION:
  case DLS_ERR_READ_ONLY:
    return PyExc_BufferError;
  case DLS_ERR_NOT_SUPPORTED:
    return PyExc_NotImplementedError;
  case DLS_ERR_OUT_OF_MEMORY:
    return PyExc_MemoryError;
  case DLS_ERR_NOT_FOUND:
    return PyExc_LookupError;
  default:
    return PyExc_RuntimeError;
  }
}

static PyObject *exc_for(dlspy_state *st, dls_status_t status) {
  if ((int)status > 0 && (int)status < DLSPY_STATUS_COUNT && st->exc[status] != NULL)
    return st->exc[status];
  return st->exc[DLS_ERR_INTERNAL];
}

PyObject *dlspy_raise(dlspy_state *st, dls_status_t status, const char *pycall) {
  PyErr_Format(exc_for(st, status), "%s: %s", pycall, dls_last_error());
  return NULL;
}

PyObject *dlspy_raisef(dlspy_state *st, dls_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (msg != NULL) {
    PyErr_SetObject(exc_for(st, status), msg);
    Py_DECREF(msg);
  }
  return NULL;
}

PyObject *dlspy_type_error(dlspy_state *st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (msg != NULL) {
    PyErr_SetObject(st->ArgumentTypeError, msg);
    Py_DECREF(msg);
  }
  return NULL;
}

int dlspy_check_runtime(dlspy_state *st, const char *pycall) {
  if (DLS__UNLIKELY(atomic_load_explicit(&dlspy_dead, memory_order_relaxed))) {
    dlspy_raisef(st, DLS_ERR_STATE, "%s: dlstream was shut down at interpreter exit", pycall);
    return -1;
  }
  if (DLS__LIKELY(atomic_load_explicit(&dls__state, memory_order_acquire) == 1))
    return 0;
  dls_status_t rc = dls__enter_slow(pycall);
  if (rc != DLS_OK) {
    dlspy_raisef(st, rc, "%s", dls_last_error());
    return -1;
  }
  return 0;
}

/* ---- keyword parsing ---- */

int dlspy_parse_kw(dlspy_state *st, const char *pycall, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                   const char *const *names, Py_ssize_t npos_max, PyObject **out) {
  Py_ssize_t nnames = 0;
  while (names[nnames] != NULL)
    out[nnames++] = NULL;
  if (nargs > npos_max) {
    dlspy_type_error(st, "%s() takes at most %zd positional argument%s (%zd given)", pycall, npos_max,
                     npos_max == 1 ? "" : "s", nargs);
    return -1;
  }
  for (Py_ssize_t i = 0; i < nargs; i++)
    out[i] = args[i];
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; k++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t j = 0;
    for (; j < nnames; j++)
      if (PyUnicode_CompareWithASCIIString(key, names[j]) == 0)
        break;
    if (j == nnames) {
      dlspy_type_error(st, "%s() got an unexpected keyword argument '%U'", pycall, key);
      return -1;
    }
    if (out[j] != NULL) {
      dlspy_type_error(st, "%s() got multiple values for argument '%s'", pycall, names[j]);
      return -1;
    }
    out[j] = args[nargs + k];
  }
  return 0;
}

/* ---- devices ---- */

static int device_type_from_name(const char *s, size_t n, DLDeviceType *out) {
  if (n == 3 && memcmp(s, "cpu", 3) == 0)
    *out = kDLCPU;
  else if (n == 4 && memcmp(s, "cuda", 4) == 0)
    *out = kDLCUDA;
  else if ((n == 4 && memcmp(s, "rocm", 4) == 0) || (n == 3 && memcmp(s, "hip", 3) == 0))
    *out = kDLROCM;
  else
    return -1;
  return 0;
}

DLDevice dlspy_default_device(void) {
  int n = 0;
  if (dls_device_count(kDLCUDA, &n) == DLS_OK && n > 0)
    return dls_cuda(0);
  return dls_cpu();
}

static int parse_device_str(dlspy_state *st, PyObject *obj, const char *pycall, DLDevice *out) {
  Py_ssize_t len;
  const char *s = PyUnicode_AsUTF8AndSize(obj, &len);
  if (s == NULL)
    return -1;
  const char *colon = memchr(s, ':', (size_t)len);
  size_t n = colon ? (size_t)(colon - s) : (size_t)len;
  DLDeviceType type;
  if (device_type_from_name(s, n, &type) != 0) {
    dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(device=%R): unknown device; use 'cpu', 'cuda', 'cuda:N' or 'rocm:N'",
                 pycall, obj);
    return -1;
  }
  long id = 0;
  if (colon != NULL) {
    char *end = NULL;
    id = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0' || id < 0 || id > 65535) {
      dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(device=%R): the device index must be a small non-negative integer",
                   pycall, obj);
      return -1;
    }
  }
  *out = dls_device(type, (int32_t)id);
  return 0;
}

int dlspy_parse_device(dlspy_state *st, PyObject *obj, const char *pycall, DLDevice *out) {
  if (obj == NULL || obj == Py_None) {
    *out = dlspy_default_device();
    return 0;
  }
  if (PyUnicode_Check(obj))
    return parse_device_str(st, obj, pycall, out);
  if (PyLong_Check(obj)) {
    long id = PyLong_AsLong(obj);
    if (id < 0 || id > 65535) {
      if (!PyErr_Occurred())
        dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(device=%R): a CUDA device ordinal must be >= 0", pycall, obj);
      return -1;
    }
    *out = dls_cuda((int32_t)id);
    return 0;
  }
  if (PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 2) {
    PyObject *t = PyTuple_GET_ITEM(obj, 0), *i = PyTuple_GET_ITEM(obj, 1);
    long id = PyLong_Check(i) ? PyLong_AsLong(i) : -1;
    if (id < 0 || id > 65535) {
      PyErr_Clear();
      dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(device=%R): the device index must be a non-negative int", pycall,
                   obj);
      return -1;
    }
    if (PyLong_Check(t)) {
      long type = PyLong_AsLong(t);
      DLDevice home;
      if (!dls__dlpack_home(dls_device((DLDeviceType)type, 0), &home)) {
        dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(device=%R): DLPack device type %ld is not supported", pycall, obj,
                     type);
        return -1;
      }
      *out = dls_device((DLDeviceType)type, (int32_t)id);
      return 0;
    }
    if (PyUnicode_Check(t)) {
      Py_ssize_t n;
      const char *s = PyUnicode_AsUTF8AndSize(t, &n);
      DLDeviceType type;
      if (s == NULL)
        return -1;
      if (device_type_from_name(s, (size_t)n, &type) != 0) {
        dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(device=%R): unknown device type", pycall, obj);
        return -1;
      }
      *out = dls_device(type, (int32_t)id);
      return 0;
    }
  }
  /* torch.device and the like: .type and .index */
  PyObject *type = PyObject_GetAttr(obj, st->s_type);
  if (type != NULL && PyUnicode_Check(type)) {
    PyObject *index = PyObject_GetAttr(obj, st->s_index);
    if (index == NULL) {
      Py_DECREF(type);
      PyErr_Clear();
      goto bad;
    }
    int rc = parse_device_str(st, type, pycall, out);
    Py_DECREF(type);
    if (rc == 0 && index != Py_None) {
      long id = PyLong_AsLong(index);
      if (id < 0) {
        Py_DECREF(index);
        PyErr_Clear();
        goto bad;
      }
      out->device_id = (int32_t)id;
    }
    Py_DECREF(index);
    return rc;
  }
  Py_XDECREF(type);
  PyErr_Clear();
bad:
  dlspy_type_error(st, "%s(device=%R): expected None, 'cpu', 'cuda:N', an int, a (type, index) tuple or a device object",
                   pycall, obj);
  return -1;
}

PyObject *dlspy_device_str(DLDevice d) {
  char buf[32];
  return PyUnicode_FromString(dls_device_str(d, buf, sizeof buf));
}

/* ---- dtypes ---- */

typedef struct dtype_name {
  const char *name;
  uint8_t code, bits;
} dtype_name;

static const dtype_name g_dtypes[] = {
    {"float32", kDLFloat, 32}, {"float64", kDLFloat, 64},     {"float16", kDLFloat, 16},
    {"bfloat16", kDLBfloat, 16}, {"int8", kDLInt, 8},         {"int16", kDLInt, 16},
    {"int32", kDLInt, 32},     {"int64", kDLInt, 64},         {"uint8", kDLUInt, 8},
    {"uint16", kDLUInt, 16},   {"uint32", kDLUInt, 32},       {"uint64", kDLUInt, 64},
    {"bool", kDLBool, 8},      {"complex64", kDLComplex, 64}, {"complex128", kDLComplex, 128},
    {"float", kDLFloat, 32},   {"double", kDLFloat, 64},      {"half", kDLFloat, 16},
    {"int", kDLInt, 64},       {"long", kDLInt, 64},
};

int dlspy_parse_dtype(dlspy_state *st, PyObject *obj, const char *pycall, DLDataType *out) {
  PyObject *s = NULL;
  if (obj == NULL || obj == Py_None) {
    out->code = kDLFloat;
    out->bits = 32;
    out->lanes = 1;
    return 0;
  }
  if (obj == (PyObject *)&PyFloat_Type)
    s = PyUnicode_FromString("float64");
  else if (obj == (PyObject *)&PyLong_Type)
    s = PyUnicode_FromString("int64");
  else if (obj == (PyObject *)&PyBool_Type)
    s = PyUnicode_FromString("bool");
  else if (PyUnicode_Check(obj))
    s = Py_NewRef(obj);
  else {
    PyObject *name = PyObject_GetAttr(obj, st->s_name); /* numpy dtypes */
    if (name != NULL && PyUnicode_Check(name)) {
      s = name;
    } else {
      Py_XDECREF(name);
      PyErr_Clear();
      s = PyObject_Str(obj); /* torch.float32 -> "torch.float32"; np.float32 -> "<class ...>" */
    }
  }
  if (s == NULL)
    return -1;
  const char *c = PyUnicode_AsUTF8(s);
  if (c == NULL) {
    Py_DECREF(s);
    return -1;
  }
  if (strncmp(c, "torch.", 6) == 0)
    c += 6;
  else if (strncmp(c, "<class 'numpy.", 14) == 0)
    c += 14;
  size_t n = strcspn(c, "'");
  for (size_t i = 0; i < sizeof g_dtypes / sizeof g_dtypes[0]; i++) {
    if (strlen(g_dtypes[i].name) == n && strncmp(g_dtypes[i].name, c, n) == 0) {
      out->code = g_dtypes[i].code;
      out->bits = g_dtypes[i].bits;
      out->lanes = 1;
      Py_DECREF(s);
      return 0;
    }
  }
  Py_DECREF(s);
  dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT,
               "%s(dtype=%R): unknown dtype; use float16/32/64, bfloat16, int8..int64, uint8..uint64, bool or "
               "complex64/128",
               pycall, obj);
  return -1;
}

PyObject *dlspy_dtype_str(DLDataType dt) {
  for (size_t i = 0; i < 15; i++)
    if (g_dtypes[i].code == dt.code && g_dtypes[i].bits == dt.bits && dt.lanes == 1)
      return PyUnicode_FromString(g_dtypes[i].name);
  return PyUnicode_FromFormat("dtype(code=%u, bits=%u, lanes=%u)", dt.code, dt.bits, dt.lanes);
}

/* ---- module functions ---- */

static int parse_device_type(dlspy_state *st, PyObject *obj, const char *pycall, DLDeviceType *out) {
  DLDevice d;
  if (obj == NULL || obj == Py_None) {
    *out = kDLCUDA;
    return 0;
  }
  if (dlspy_parse_device(st, obj, pycall, &d) != 0)
    return -1;
  *out = d.device_type;
  return 0;
}

static PyObject *py_device_count(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  DLDeviceType type;
  if (parse_device_type(st, nargs > 0 ? args[0] : NULL, "device_count", &type) != 0)
    return NULL;
  int n = 0;
  dls_status_t rc = dls_device_count(type, &n);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "device_count");
  return PyLong_FromLong(n);
}

static PyObject *py_backend_available(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  DLDeviceType type;
  if (parse_device_type(st, nargs > 0 ? args[0] : NULL, "backend_available", &type) != 0)
    return NULL;
  dls_status_t rc = dls_backend_probe(type);
  return Py_BuildValue("(Os)", rc == DLS_OK ? Py_True : Py_False, rc == DLS_OK ? "" : dls_last_error());
}

static PyObject *py_default_device(PyObject *m, PyObject *unused) { return dlspy_device_str(dlspy_default_device()); }

static PyObject *py_live_handles(PyObject *m, PyObject *unused) {
  static const char *const names[] = {NULL, "stream", "event", "buffer", "tensor", "module", "function", "group",
                                      "latch",  "graph"};
  _Static_assert(sizeof names / sizeof names[0] == DLS_HANDLE_KIND_COUNT_, "a name for every handle kind");
  PyObject *d = PyDict_New();
  if (d == NULL)
    return NULL;
  for (int k = 1; k < DLS_HANDLE_KIND_COUNT_; k++) {
    PyObject *v = PyLong_FromSize_t(dls_live_handles((dls_handle_kind_t)k));
    if (v == NULL || PyDict_SetItemString(d, names[k], v) != 0) {
      Py_XDECREF(v);
      Py_DECREF(d);
      return NULL;
    }
    Py_DECREF(v);
  }
  return d;
}

static PyObject *py_deferred_pending(PyObject *m, PyObject *unused) { return PyLong_FromSize_t(dls_deferred_pending()); }
static PyObject *py_deferred_poll(PyObject *m, PyObject *unused) {
  if (atomic_load(&dlspy_dead) != DLSPY_ALIVE || atomic_load(&dls__state) != 1)
    return PyLong_FromLong(0);
  return PyLong_FromSize_t(dls_deferred_poll());
}

static PyObject *py_clear_caches(PyObject *m, PyObject *unused) {
  dlspy_state *st = dlspy_state_of_module(m);
  dlspy_stream_cache_clear(st);
  dlspy_xapi_cache_clear(st);
  Py_RETURN_NONE;
}

static PyObject *py_cache_sizes(PyObject *m, PyObject *unused) {
  dlspy_state *st = dlspy_state_of_module(m);
  return Py_BuildValue("{sisi}", "streams", st->scache_n, "exchange_types", st->xapi_n);
}

/* The atexit hook: runs every deferred release while Python can still take
 * them (they drop references), then tears the C runtime down. Afterwards
 * deallocators and release callbacks leave the runtime alone. */
static PyObject *py_shutdown(PyObject *m, PyObject *unused) {
  dlspy_state *st = dlspy_state_of_module(m);
  if (atomic_load(&dlspy_dead) != DLSPY_ALIVE)
    Py_RETURN_NONE;
  /* The wrappers first, so that shutdown finds nothing of ours. */
  dlspy_stream_cache_clear(st);
  atomic_store(&dlspy_dead, DLSPY_CLOSING);
  /* Leave the runtime be (the process is ending; nothing is freed) when a
   * daemon thread is still inside a GIL-free call, or when exported tensors
   * are alive: their memory holds streams whose CPU workers dls_shutdown()
   * would wait for forever (see the report on interop/dlpack). */
  if (atomic_load(&dls__state) == 1 && atomic_load(&dlspy_nogil_calls) == 0 &&
      atomic_load(&dls__exports_live) == 0)
    (void)dls_shutdown();
  atomic_store(&dlspy_dead, DLSPY_DEAD);
  dlspy_xapi_cache_clear(st);
  Py_RETURN_NONE;
}

static PyObject *py_current_stream(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  PyObject *cur = NULL;
  if (PyContextVar_Get(st->stream_var, NULL, &cur) != 0)
    return NULL;
  if (cur != NULL && cur != Py_None)
    return cur;
  Py_XDECREF(cur);
  DLDevice dev;
  if (dlspy_parse_device(st, nargs > 0 ? args[0] : NULL, "current_stream", &dev) != 0)
    return NULL;
  return dlspy_stream_new_default(st, dev, DLS_STREAM_LEGACY);
}

static PyMethodDef g_module_methods[] = {
    {"empty", (PyCFunction)(void (*)(void))dlspy_empty, METH_FASTCALL | METH_KEYWORDS,
     "empty(shape, dtype='float32', *, device=None, stream=None) -> Tensor\n--\n\n"
     "A new compact tensor that dlstream owns, allocated in stream order."},
    {"from_dlpack", (PyCFunction)(void (*)(void))dlspy_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(obj, *, stream=None) -> Tensor\n--\n\n"
     "A view of any DLPack producer, ordered before `stream` through the handshake."},
    {"builtin_function", (PyCFunction)(void (*)(void))dlspy_builtin_function, METH_FASTCALL | METH_KEYWORDS,
     "builtin_function(name, device=None, signature=None) -> Function\n--\n\n"
     "A built-in kernel ('dls_axpy_f32' ...) as a Function that launch() takes."},
    {"fill", (PyCFunction)(void (*)(void))dlspy_fill, METH_FASTCALL | METH_KEYWORDS,
     "fill(dst, value, *, stream=None)\n--\n\nSets every element of a contiguous tensor to `value`."},
    {"axpy", (PyCFunction)(void (*)(void))dlspy_axpy, METH_FASTCALL | METH_KEYWORDS,
     "axpy(a, x, y, *, stream=None)\n--\n\ny = a * x + y for contiguous float32 or float64 tensors."},
    {"copy", (PyCFunction)(void (*)(void))dlspy_copy, METH_FASTCALL | METH_KEYWORDS,
     "copy(dst, src, *, stream=None)\n--\n\nCopies a strided tensor of up to 8 dimensions element by element."},
    {"spin", (PyCFunction)(void (*)(void))dlspy_spin, METH_FASTCALL | METH_KEYWORDS,
     "spin(seconds, *, stream=None, device=None)\n--\n\nBusy-waits on the stream (one GPU thread on CUDA)."},
    {"device_count", (PyCFunction)(void (*)(void))py_device_count, METH_FASTCALL,
     "device_count(kind='cuda') -> int\n--\n\nNumber of devices of a kind (0 when the backend is unavailable)."},
    {"backend_available", (PyCFunction)(void (*)(void))py_backend_available, METH_FASTCALL,
     "backend_available(kind='cuda') -> (bool, str)\n--\n\nWhether a backend can be used, and if not why."},
    {"default_device", py_default_device, METH_NOARGS, "default_device() -> str\n--\n\n'cuda:0' if any, else 'cpu:0'."},
    {"current_stream", (PyCFunction)(void (*)(void))py_current_stream, METH_FASTCALL,
     "current_stream(device=None) -> Stream\n--\n\nThe use_stream() stream, else the legacy default stream."},
    {"_live_handles", py_live_handles, METH_NOARGS, "Live handles of each kind (leak checks)."},
    {"_bench_exchange_import", (PyCFunction)(void (*)(void))dlspy_bench_exchange_import, METH_FASTCALL,
     "Seconds for n exchange-API imports as a launch does them (benchmarks)."},
    {"_bench_raw_axpy", (PyCFunction)(void (*)(void))dlspy_bench_raw_axpy, METH_FASTCALL,
     "Seconds for n raw launches of dls_axpy_f32 through the CUDA backend (benchmarks)."},
    {"_deferred_pending", py_deferred_pending, METH_NOARGS, "Borrowed releases waiting for streams to pass."},
    {"_deferred_poll", py_deferred_poll, METH_NOARGS, "Runs the releases whose streams have passed."},
    {"_clear_caches", py_clear_caches, METH_NOARGS, "Drops the cached stream wrappers and exchange-API types."},
    {"_cache_sizes", py_cache_sizes, METH_NOARGS, "Sizes of the module's caches."},
    {"_shutdown", py_shutdown, METH_NOARGS, "Tears the runtime down (registered with atexit)."},
    {NULL, NULL, 0, NULL},
};

/* ---- initialization ---- */

static int add_type(PyObject *m, PyType_Spec *spec, PyTypeObject **slot) {
  PyObject *t = PyType_FromModuleAndSpec(m, spec, NULL);
  if (t == NULL)
    return -1;
  *slot = (PyTypeObject *)t;
  return PyModule_AddType(m, (PyTypeObject *)t);
}

#define INTERN(field, text)                         \
  do {                                              \
    if ((st->field = PyUnicode_InternFromString(text)) == NULL) \
      return -1;                                    \
  } while (0)

static int module_exec(PyObject *m) {
  dlspy_state *st = dlspy_state_of_module(m);
  INTERN(s_dlpack, "__dlpack__");
  INTERN(s_dlpack_device, "__dlpack_device__");
  INTERN(s_cuda_stream, "__cuda_stream__");
  INTERN(s_stream, "stream");
  INTERN(s_max_version, "max_version");
  INTERN(s_xapi, "__dlpack_c_exchange_api__");
  INTERN(s_xapi_old, "__c_dlpack_exchange_api__");
  INTERN(s_cuda_event, "cuda_event");
  INTERN(s_ptr, "ptr");
  INTERN(s_handle, "handle");
  INTERN(s_device, "device");
  INTERN(s_device_index, "device_index");
  INTERN(s_device_id, "device_id");
  INTERN(s_type, "type");
  INTERN(s_index, "index");
  INTERN(s_name, "name");
  if ((st->max_version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)) == NULL ||
      (st->kw_stream_maxv = PyTuple_Pack(2, st->s_stream, st->s_max_version)) == NULL ||
      (st->kw_stream = PyTuple_Pack(1, st->s_stream)) == NULL)
    return -1;

  st->Error = PyErr_NewExceptionWithDoc("dlstream.Error",
                                        "Base of every dlstream exception; each also derives from the built-in "
                                        "exception it means (ValueError, BufferError, RuntimeError ...).",
                                        NULL, NULL);
  if (st->Error == NULL || PyModule_AddObjectRef(m, "Error", st->Error) != 0)
    return -1;
  for (size_t i = 0; i < sizeof g_exc_defs / sizeof g_exc_defs[0]; i++) {
    const exc_def *d = &g_exc_defs[i];
    char qual[64];
    snprintf(qual, sizeof qual, "dlstream.%s", d->name);
    PyObject *bases = PyTuple_Pack(2, st->Error, builtin_base(d->status));
    if (bases == NULL)
      return -1;
    PyObject *cls = PyErr_NewExceptionWithDoc(qual, d->doc, bases, NULL);
    Py_DECREF(bases);
    if (cls == NULL)
      return -1;
    PyObject *code = PyLong_FromLong(d->status);
    int rc = code ? PyObject_SetAttrString(cls, "status", code) : -1;
    Py_XDECREF(code);
    if (rc == 0) {
      PyObject *sname = PyUnicode_FromString(dls_status_name((dls_status_t)d->status));
      rc = sname ? PyObject_SetAttrString(cls, "status_name", sname) : -1;
      Py_XDECREF(sname);
    }
    st->exc[d->status] = cls;
    if (rc != 0 || PyModule_AddObjectRef(m, d->name, cls) != 0)
      return -1;
  }
  {
    PyObject *bases = PyTuple_Pack(2, st->Error, PyExc_TypeError);
    if (bases == NULL)
      return -1;
    st->ArgumentTypeError = PyErr_NewExceptionWithDoc("dlstream.ArgumentTypeError",
                                                      "An argument of the wrong Python type.", bases, NULL);
    Py_DECREF(bases);
    if (st->ArgumentTypeError == NULL || PyModule_AddObjectRef(m, "ArgumentTypeError", st->ArgumentTypeError) != 0)
      return -1;
  }
  st->stream_var = PyContextVar_New("dlstream.current_stream", NULL);
  if (st->stream_var == NULL || PyModule_AddObjectRef(m, "_stream_var", st->stream_var) != 0)
    return -1;

  if (add_type(m, &dlspy_stream_spec, &st->StreamType) != 0 || add_type(m, &dlspy_event_spec, &st->EventType) != 0 ||
      add_type(m, &dlspy_tensor_spec, &st->TensorType) != 0 || add_type(m, &dlspy_module_spec, &st->ModuleType) != 0 ||
      add_type(m, &dlspy_function_spec, &st->FunctionType) != 0 || add_type(m, &dlspy_latch_spec, &st->LatchType) != 0 ||
      add_type(m, &dlspy_group_spec, &st->GroupType) != 0 || add_type(m, &dlspy_graph_spec, &st->GraphType) != 0)
    return -1;
  if (PyModule_AddFunctions(m, dlspy_graph_functions) != 0)
    return -1;

  if (PyModule_AddStringConstant(m, "__version__", DLS_VERSION_STRING) != 0 ||
      PyModule_AddIntConstant(m, "DLPACK_STREAM_NO_SYNC", DLS_DLPACK_STREAM_NO_SYNC) != 0 ||
      PyModule_AddIntConstant(m, "kDLCPU", kDLCPU) != 0 || PyModule_AddIntConstant(m, "kDLCUDA", kDLCUDA) != 0 ||
      PyModule_AddIntConstant(m, "kDLCUDAHost", kDLCUDAHost) != 0 ||
      PyModule_AddIntConstant(m, "kDLROCM", kDLROCM) != 0)
    return -1;
  if (PyModule_AddFunctions(m, dlspy_compile_methods) != 0)
    return -1;
  return PyModule_AddFunctions(m, dlspy_fault_methods);
}

static int module_traverse(PyObject *m, visitproc visit, void *arg) {
  dlspy_state *st = dlspy_state_of_module(m);
  if (st == NULL)
    return 0;
  Py_VISIT(st->StreamType);
  Py_VISIT(st->EventType);
  Py_VISIT(st->TensorType);
  Py_VISIT(st->ModuleType);
  Py_VISIT(st->FunctionType);
  Py_VISIT(st->LatchType);
  Py_VISIT(st->GroupType);
  Py_VISIT(st->GraphType);
  Py_VISIT(st->Error);
  Py_VISIT(st->ArgumentTypeError);
  for (int i = 0; i < DLSPY_STATUS_COUNT; i++)
    Py_VISIT(st->exc[i]);
  for (int i = 0; i < st->xapi_n; i++)
    Py_VISIT(st->xapi[i].type);
  return 0;
}

static int module_clear(PyObject *m) {
  dlspy_state *st = dlspy_state_of_module(m);
  if (st == NULL)
    return 0;
  dlspy_xapi_cache_clear(st);
  Py_CLEAR(st->StreamType);
  Py_CLEAR(st->EventType);
  Py_CLEAR(st->TensorType);
  Py_CLEAR(st->ModuleType);
  Py_CLEAR(st->FunctionType);
  Py_CLEAR(st->GroupType);
  Py_CLEAR(st->GraphType);
  Py_CLEAR(st->LatchType);
  Py_CLEAR(st->Error);
  Py_CLEAR(st->ArgumentTypeError);
  for (int i = 0; i < DLSPY_STATUS_COUNT; i++)
    Py_CLEAR(st->exc[i]);
  Py_CLEAR(st->stream_var);
  Py_CLEAR(st->s_dlpack);
  Py_CLEAR(st->s_dlpack_device);
  Py_CLEAR(st->s_cuda_stream);
  Py_CLEAR(st->s_stream);
  Py_CLEAR(st->s_max_version);
  Py_CLEAR(st->s_xapi);
  Py_CLEAR(st->s_xapi_old);
  Py_CLEAR(st->s_cuda_event);
  Py_CLEAR(st->s_ptr);
  Py_CLEAR(st->s_handle);
  Py_CLEAR(st->s_device);
  Py_CLEAR(st->s_device_index);
  Py_CLEAR(st->s_device_id);
  Py_CLEAR(st->s_type);
  Py_CLEAR(st->s_index);
  Py_CLEAR(st->s_name);
  Py_CLEAR(st->max_version);
  Py_CLEAR(st->kw_stream_maxv);
  Py_CLEAR(st->kw_stream);
  return 0;
}

static void module_free(void *m) { module_clear((PyObject *)m); }

static PyModuleDef_Slot g_slots[] = {
    {Py_mod_exec, (void *)module_exec},
#if PY_VERSION_HEX >= 0x030C0000
    /* One C runtime per process: a second interpreter would share it. */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
    {0, NULL},
};

PyModuleDef dlspy_moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dlstream._dlstream",
    .m_doc = "dlstream's CPython extension: streams, events, tensors and launches shared with array frameworks "
             "through DLPack.",
    .m_size = sizeof(dlspy_state),
    .m_methods = g_module_methods,
    .m_slots = g_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__dlstream(void);
PyMODINIT_FUNC PyInit__dlstream(void) { return PyModuleDef_Init(&dlspy_moduledef); }
