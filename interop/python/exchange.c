/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream.Tensor as a producer of the DLPack C exchange API: type(t).__dlpack_c_exchange_api__, a capsule named
 * "dlpack_exchange_api" holding the table, read by consumers that take tensors without calling __dlpack__ (torch
 * >= 2.10, tvm-ffi, cuda.core).
 *
 * The table's work stream of a device is the stream a dlstream call on it would run on when it names none: the
 * use_stream() stream, else the legacy default stream (inside a torch.cuda.graph capture, torch's capturing
 * stream). A consumer that launches there, as the exchange API asks, needs no synchronization: each managed tensor
 * this table makes is exported to that stream exactly as __dlpack__(stream=<that stream>) would export it (the
 * stream waits for the tensor's earlier uses, and counts as a writer while the export lives); host memory is
 * exchanged synchronously, as __dlpack__ does. dltensor_from_py_object_no_sync is NULL: a view without an owner has
 * no end, so its use could not be ordered before the tensor's later uses (consumers fall back to the managed form). */
#include "errors.h"
#include "call/streamarg.h"

/* The table's functions get no module: they find its state here (one interpreter per process: module.c). */
static dlspy_state *g_st;
/* Calls of each entry, for tests (dlstream._dlstream._exchange_stats). */
static _Atomic unsigned long g_from_object, g_to_object, g_alloc, g_stream;

int dlspy_context_stream_on(dlspy_state *st, DLDevice dev, dls_stream_t *out) {
  if (dlspy_context_stream(st, out) != 0)
    return -1;
  DLDevice sd;
  if (out->id != 0 && (dls_stream_device(*out, &sd) != DLS_OK || sd.device_type != dev.device_type ||
                       sd.device_id != dev.device_id))
    out->id = 0; /* the use_stream() stream is on another device */
  return 0;
}

/* The work stream of `dev` (a device dlstream handles): see above. */
static int work_stream(DLDevice dev, const char *pycall, dls_stream_t *out) {
  if (dlspy_context_stream_on(g_st, dev, out) != 0)
    return -1;
  return out->id != 0 ? 0 : dlspy_default_stream(g_st, dev, pycall, out);
}

static int current_work_stream(DLDeviceType type, int32_t id, void **out_stream) {
  static const char pycall[] = "dlpack_exchange_api.current_work_stream";
  atomic_fetch_add_explicit(&g_stream, 1, memory_order_relaxed);
  *out_stream = NULL;
  DLDevice home;
  if (type == kDLCPU)
    return 0; /* host memory: nothing to order on */
  if (dlspy_check_runtime(g_st, pycall) != 0)
    return -1;
  if (!dls__ext_home(dls_device(type, id), &home)) {
    dlspy_raisef(g_st, DLS_ERR_INVALID_DEVICE, "%s(device_type=%d, device_id=%d): not a device dlstream handles",
                 pycall, (int)type, (int)id);
    return -1;
  }
  dls_stream_t s;
  if (work_stream(home, pycall, &s) != 0)
    return -1;
  dls_status_t rc = dls_stream_native(s, out_stream);
  if (rc != DLS_OK) {
    dlspy_raise(g_st, rc, pycall);
    return -1;
  }
  return 0;
}

/* Host memory: the tensor's queued uses have run when this returns (as __dlpack__ on the host: the consumer reads
 * it at once). Releases the GIL while it waits; 0 or -1 with an exception. */
static int host_ready(dls_tensor_t t, DLDevice dev, const char *pycall) {
  dls_stream_t p;
  dls_status_t rc = dls_stream_acquire(dev, &p);
  if (rc != DLS_OK) {
    dlspy_raise(g_st, rc, pycall);
    return -1;
  }
  rc = dls_tensor_order_before(t, p); /* p waits for every use queued so far */
  int waited = rc == DLS_OK ? dlspy_stream_wait(g_st, pycall, p, dev) : 0;
  (void)dls_stream_destroy(p);
  if (rc != DLS_OK)
    dlspy_raise(g_st, rc, pycall);
  return rc == DLS_OK && waited == 0 ? 0 : -1;
}

static int managed_tensor_from_py_object(void *py_object, DLManagedTensorVersioned **out) {
  static const char pycall[] = "dlpack_exchange_api.managed_tensor_from_py_object_no_sync";
  atomic_fetch_add_explicit(&g_from_object, 1, memory_order_relaxed);
  *out = NULL;
  PyObject *obj = py_object;
  if (!PyObject_TypeCheck(obj, g_st->TensorType)) {
    dlspy_type_error(g_st, "%s(%R): not a dlstream.Tensor", pycall, obj);
    return -1;
  }
  TensorObject *t = (TensorObject *)obj;
  if (dlspy_check_runtime(g_st, pycall) != 0)
    return -1;
  if (t->handle.id == 0) {
    dlspy_raisef(g_st, DLS_ERR_INVALID_HANDLE, "%s: the tensor was released", pycall);
    return -1;
  }
  dls_stream_t s = {0};
  if (t->device.device_type == kDLCPU ? host_ready(t->handle, t->device, pycall) != 0
                                      : work_stream(t->device, pycall, &s) != 0)
    return -1;
  /* The stream ran Python code (a context variable, torch's capture state): the handle may have gone since. */
  dls_status_t rc = t->handle.id != 0 ? dls_tensor_export_versioned(t->handle, s, out) : DLS_ERR_INVALID_HANDLE;
  if (rc != DLS_OK) {
    dlspy_raisef(g_st, rc, "%s: %s", pycall, t->handle.id != 0 ? dls_last_error() : "the tensor was released");
    return -1;
  }
  return 0;
}

static int managed_tensor_to_py_object(DLManagedTensorVersioned *managed, void **out_py_object) {
  static const char pycall[] = "dlpack_exchange_api.managed_tensor_to_py_object_no_sync";
  atomic_fetch_add_explicit(&g_to_object, 1, memory_order_relaxed);
  *out_py_object = NULL;
  DLDevice home;
  dls_stream_t producer = {0};
  if (managed == NULL) {
    dlspy_raisef(g_st, DLS_ERR_INVALID_ARGUMENT, "%s(tensor=NULL): no tensor", pycall);
    return -1;
  }
  /* Any failure from here on still runs the producer's deleter: the import steals `managed`. */
  int rc = dlspy_check_runtime(g_st, pycall);
  if (rc == 0 && managed->version.major == DLPACK_MAJOR_VERSION &&
      dls__ext_home(managed->dl_tensor.device, &home) && home.device_type != kDLCPU)
    rc = work_stream(home, pycall, &producer); /* the producer's work is ordered before the table's stream */
  if (rc != 0) {
    if (managed->deleter != NULL)
      managed->deleter(managed);
    return -1;
  }
  dls_tensor_t t;
  dls_status_t st = dls_tensor_import_versioned(managed, producer, &t);
  if (st != DLS_OK) {
    dlspy_raise(g_st, st, pycall);
    return -1;
  }
  *out_py_object = dlspy_tensor_wrap(g_st, t);
  return *out_py_object != NULL ? 0 : -1;
}

/* A new compact tensor shaped like `prototype`, allocated on the table's work stream of its device and exported to
 * it; host memory is ready for the host when this returns. Called with or without the GIL (tvm-ffi allocates inside
 * kernels that run without it): takes it. Reports through SetError, never raises. */
static int managed_tensor_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                                    void (*set_error)(void *error_ctx, const char *kind, const char *message)) {
  static const char pycall[] = "dlpack_exchange_api.managed_tensor_allocator";
  atomic_fetch_add_explicit(&g_alloc, 1, memory_order_relaxed);
  *out = NULL;
  if (!Py_IsInitialized() || atomic_load(&dlspy_dead)) {
    if (set_error != NULL)
      set_error(error_ctx, "RuntimeError", "dlpack_exchange_api.managed_tensor_allocator: dlstream has shut down");
    return -1;
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  DLDevice home;
  dls_stream_t s = {0};
  dls_tensor_t t = {0};
  int rc = -1;
  if (prototype == NULL || !dls__ext_home(prototype->device, &home)) {
    dlspy_raisef(g_st, DLS_ERR_INVALID_DEVICE, "%s: the prototype's device is not one dlstream handles", pycall);
  } else if (work_stream(home, pycall, &s) == 0) {
    dls_status_t st = dls_tensor_empty(s, prototype->ndim, prototype->shape, prototype->dtype, &t);
    if (st == DLS_OK && home.device_type == kDLCPU)
      st = dls_stream_synchronize(s); /* the consumer's host writes it at once */
    if (st == DLS_OK)
      st = dls_tensor_export_versioned(t, home.device_type == kDLCPU ? (dls_stream_t){0} : s, out);
    (void)dls_tensor_release(t); /* the export holds the memory */
    rc = st == DLS_OK ? 0 : -1;
    if (st != DLS_OK)
      dlspy_raise(g_st, st, pycall);
  }
  if (rc != 0) {
    /* The exception becomes the consumer's error: its type's name and its message. */
    PyObject *e = dlspy_take_exception();
    PyObject *msg = e != NULL ? PyObject_Str(e) : NULL;
    const char *text = msg != NULL ? PyUnicode_AsUTF8(msg) : NULL;
    if (set_error != NULL)
      set_error(error_ctx, e != NULL ? Py_TYPE(e)->tp_name : "RuntimeError", text != NULL ? text : pycall);
    PyErr_Clear();
    Py_XDECREF(msg);
    Py_XDECREF(e);
  }
  PyGILState_Release(gil);
  return rc;
}

static DLPackExchangeAPI g_api = {
    /* The table's layout is DLPack 1.3's (that of dlstream/dlpack.h); consumers check the major version. */
    .header = {.version = {DLPACK_MAJOR_VERSION, 3}, .prev_api = NULL},
    .managed_tensor_allocator = managed_tensor_allocator,
    .managed_tensor_from_py_object_no_sync = managed_tensor_from_py_object,
    .managed_tensor_to_py_object_no_sync = managed_tensor_to_py_object,
    .dltensor_from_py_object_no_sync = NULL,
    .current_work_stream = current_work_stream,
};

int dlspy_exchange_init(dlspy_state *st) {
  g_st = st;
  PyObject *cap = PyCapsule_New(&g_api, "dlpack_exchange_api", NULL);
  if (cap == NULL)
    return -1;
  int rc = PyObject_SetAttr((PyObject *)st->TensorType, st->s_xapi, cap);
  Py_DECREF(cap);
  return rc;
}

PyObject *dlspy_mod_exchange_stats(PyObject *m, PyObject *unused) {
  (void)m;
  (void)unused;
  return Py_BuildValue("{sksksksk}", "managed_tensor_from_py_object_no_sync", atomic_load(&g_from_object),
                       "managed_tensor_to_py_object_no_sync", atomic_load(&g_to_object), "managed_tensor_allocator",
                       atomic_load(&g_alloc), "current_work_stream", atomic_load(&g_stream));
}
