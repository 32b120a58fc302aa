/* SPDX-License-Identifier: Apache-2.0 */
/* The argument handshake: which stream a call runs on, tensor arguments through the DLPack C exchange API or
 * __dlpack__, host arrays staged through stream-ordered temporaries, and borrowed objects kept alive until
 * every stream that used them has passed. */
#include "dlspy.h"

#include <string.h>

/* ---- releases (they run from dlstream calls, on any thread, GIL held or not) ---- */

static bool python_gone(void) {
  return atomic_load_explicit(&dlspy_dead, memory_order_acquire) == DLSPY_DEAD || dlspy_py_finalizing();
}

static void release_pyobject(void *user_data) {
  if (python_gone())
    return; /* the interpreter is going away: leaking beats touching it */
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF((PyObject *)user_data);
  PyGILState_Release(g);
}

void dlspy_managed_release(void *managed, bool versioned) {
  if (managed == NULL || python_gone())
    return;
  PyGILState_STATE g = PyGILState_Ensure();
  if (versioned) {
    DLManagedTensorVersioned *m = managed;
    if (m->deleter)
      m->deleter(m);
  } else {
    DLManagedTensor *m = managed;
    if (m->deleter)
      m->deleter(m);
  }
  PyGILState_Release(g);
}

static void release_managed_v(void *user_data) { dlspy_managed_release(user_data, true); }
static void release_managed_l(void *user_data) { dlspy_managed_release(user_data, false); }

/* Runs `release(user_data)` once the work queued on `s` so far has passed: a
 * borrowed buffer whose producer is no stream, used on `s`, dropped at once.
 * The deallocation rule then defers the release until the use's event completes. */
static void keep_release(dls__stream *s, dls_release_fn release, void *user_data) {
  dls__stream *none = NULL;
  dls__buffer *b = NULL;
  dls_status_t rc = dls__stream_default(s->dev, DLS__STREAM_NONE, &none);
  if (rc == DLS_OK)
    rc = dls__buffer_borrow(s->dev, NULL, 0, none, release, user_data, &b);
  if (rc == DLS_OK) {
    if (dls__buffer_use(b, s) != DLS_OK) /* the use is unknown: the release must not run early */
      (void)s->dev->be->stream_synchronize(s->dev->id, s->native);
    dls__buffer_unref(b);
    return;
  }
  /* No memory for the record: wait here rather than release early. */
  (void)s->dev->be->stream_synchronize(s->dev->id, s->native);
  release(user_data);
}

int dlspy_keep_until(dlspy_state *st, dls__stream *s, PyObject *obj) {
  Py_INCREF(obj);
  keep_release(s, release_pyobject, obj);
  return 0;
}

/* ---- the DLPack Python protocol ---- */

PyObject *dlspy_call_dlpack(dlspy_state *st, PyObject *obj, PyObject *stream_value) {
  PyObject *argv[4] = {NULL, obj, stream_value, st->max_version};
  PyObject *cap = PyObject_VectorcallMethod(st->s_dlpack, argv + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                            st->kw_stream_maxv);
  if (cap != NULL || !PyErr_ExceptionMatches(PyExc_TypeError))
    return cap;
  /* A producer older than DLPack 1.0 knows no max_version. */
  PyErr_Clear();
  if (stream_value != Py_None) {
    argv[0] = NULL;
    cap = PyObject_VectorcallMethod(st->s_dlpack, argv + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, st->kw_stream);
    if (cap != NULL || !PyErr_ExceptionMatches(PyExc_TypeError))
      return cap;
    PyErr_Clear();
  }
  return PyObject_CallMethodNoArgs(obj, st->s_dlpack);
}

int dlspy_capsule_consume(dlspy_state *st, PyObject *cap, const char *pycall, void **out_managed,
                          bool *out_versioned) {
  if (!PyCapsule_CheckExact(cap)) {
    dlspy_type_error(st, "%s: __dlpack__() returned %R, not a PyCapsule", pycall, cap);
    return -1;
  }
  const char *name = PyCapsule_GetName(cap);
  if (name == NULL) {
    PyErr_Clear();
    name = "";
  }
  bool versioned;
  if (strcmp(name, "dltensor_versioned") == 0)
    versioned = true;
  else if (strcmp(name, "dltensor") == 0)
    versioned = false;
  else {
    if (strncmp(name, "used_", 5) == 0)
      dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s: the DLPack capsule was already consumed (named '%s')", pycall,
                   name);
    else
      dlspy_raisef(st, DLS_ERR_INVALID_TENSOR,
                   "%s: a DLPack capsule is named 'dltensor_versioned' or 'dltensor', not '%s'", pycall, name);
    return -1;
  }
  void *m = PyCapsule_GetPointer(cap, name);
  if (m == NULL)
    return -1;
  if (PyCapsule_SetName(cap, versioned ? "used_dltensor_versioned" : "used_dltensor") != 0)
    return -1;
  *out_managed = m;
  *out_versioned = versioned;
  return 0;
}

int dlspy_dlpack_device(dlspy_state *st, PyObject *obj, const char *pycall, DLDevice *out) {
  PyObject *meth = NULL;
  if (dlspy_getattr_opt(obj, st->s_dlpack_device, &meth) < 0)
    return -1;
  if (meth == NULL)
    return 1;
  PyObject *r = PyObject_CallNoArgs(meth);
  Py_DECREF(meth);
  if (r == NULL)
    return -1;
  long type = -1, id = -1;
  if (PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2) {
    type = PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
    id = PyLong_AsLong(PyTuple_GET_ITEM(r, 1));
  }
  if (type < 0 || id < 0) {
    PyErr_Clear();
    dlspy_type_error(st, "%s: __dlpack_device__() returned %R; expected a (device_type, device_id) pair of ints",
                     pycall, r);
    Py_DECREF(r);
    return -1;
  }
  Py_DECREF(r);
  *out = dls_device((DLDeviceType)type, (int32_t)id);
  return 0;
}

/* ---- views ---- */

static void view_meta(dlspy_view *v, const DLTensor *dl, bool want_meta) {
  v->dtype = dl->dtype;
  v->ndim = dl->ndim;
  v->has_meta = false;
  uint64_t count = 1;
  for (int32_t i = 0; i < dl->ndim; i++)
    count *= (uint64_t)(dl->shape[i] > 0 ? dl->shape[i] : 0);
  v->count = count;
  bool contiguous = true;
  int64_t expect = 1;
  for (int32_t i = dl->ndim - 1; i >= 0; i--) {
    if (dl->strides != NULL && dl->shape[i] > 1 && dl->strides[i] != expect)
      contiguous = false;
    expect *= dl->shape[i];
  }
  v->contiguous = contiguous;
  if (want_meta && dl->ndim <= DLS_COPY_MAX_DIMS) {
    int64_t stride = 1;
    for (int32_t i = dl->ndim - 1; i >= 0; i--) {
      v->shape[i] = dl->shape[i];
      v->strides[i] = dl->strides ? dl->strides[i] : stride;
      stride *= dl->shape[i] > 0 ? dl->shape[i] : 1;
    }
    v->has_meta = true;
  }
}

static inline bool same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

static inline bool same_stream(const dls__stream *a, const dls__stream *b) {
  return a == b || (a->dev == b->dev && a->native == b->native);
}

/* ---- the call ---- */

static int add_post(dlspy_call *c, int kind, PyObject *obj, void *managed) {
  if (c->nposts == DLSPY_MAX_POSTS) {
    dlspy_raisef(c->st, DLS_ERR_INVALID_ARGUMENT, "%s: more than %d tensor arguments", c->pycall, DLSPY_MAX_POSTS);
    return -1;
  }
  dlspy_post *p = &c->posts[c->nposts++];
  p->kind = kind;
  p->obj = obj;
  p->managed = managed;
  p->tmp = NULL;
  return 0;
}

/* The framework's current stream for a device, as a core stream. */
static int framework_stream(dlspy_call *c, const DLPackExchangeAPI *api, DLDevice dev, dls__stream **out) {
  if (c->cur_api == api && same_device(c->cur_dev, dev)) {
    *out = c->cur_stream;
    return 0;
  }
  void *native = NULL;
  if (api->current_work_stream(dev.device_type, dev.device_id, &native) != 0) {
    if (!PyErr_Occurred())
      dlspy_raisef(c->st, DLS_ERR_BACKEND, "%s: the framework's current_work_stream(device=%d:%d) failed", c->pycall,
                   (int)dev.device_type, (int)dev.device_id);
    return -1;
  }
  DLDevice home;
  if (!dls__dlpack_home(dev, &home))
    home = dev;
  dls_stream_t h;
  if (dlspy_stream_cached(c->st, home, native, c->pycall, &h) != 0)
    return -1;
  dls_status_t rc;
  dls__stream *s = dls__stream_get(h, c->pycall, "the framework's current stream", &rc);
  if (s == NULL) {
    dlspy_raise(c->st, rc, c->pycall);
    return -1;
  }
  c->cur_api = api;
  c->cur_dev = dev;
  c->cur_stream = s;
  c->cur_handle = h;
  *out = s;
  return 0;
}

/* A handle naming `s` for the public calls of built-ins: its default-stream handle, its own handle while that is
 * live, else a temporary one that dlspy_call_end frees (the call holds a reference on `s` meanwhile). */
static int handle_of(dlspy_call *c, dls__stream *s) {
  dls__device *dev = s->dev;
  if (s->kind == DLS__STREAM_DEFAULT) {
    int kind = s == dev->defaults[DLS_STREAM_PER_THREAD] ? DLS_STREAM_PER_THREAD : DLS_STREAM_LEGACY;
    c->stream = dls_stream_default(dev->device, kind);
    return 0;
  }
  if (s->id != 0 && dls__handle_peek(DLS_HANDLE_STREAM, s->id) == s) {
    c->stream.id = s->id;
    return 0;
  }
  uint64_t id = dls__handle_new(DLS_HANDLE_STREAM, s);
  if (id == 0) {
    dlspy_raisef(c->st, DLS_ERR_OUT_OF_MEMORY, "%s: %s", c->pycall, dls_last_error());
    return -1;
  }
  c->temp_handle = id;
  c->stream.id = id;
  return 0;
}

/* Reads obj's __cuda_array_interface__ into `out` when it has one worth reading. Returns 1 when it was read, 0
 * when the object has none (or only a stream-less one while __dlpack__ orders it), -1 with an exception. */
static int read_cai(dlspy_call *c, PyObject *obj, int index, dlspy_cai *out) {
  dlspy_state *st = c->st;
  if (dlspy_type_info(st, Py_TYPE(obj))->cai_skip)
    return 0;
  PyObject *d = NULL;
  if (dlspy_getattr_opt(obj, st->s_cai, &d) < 0) {
    /* torch raises for host tensors ("Can't get __cuda_array_interface__ on non-CUDA tensor"). */
    if (!PyErr_ExceptionMatches(PyExc_AttributeError) && !PyErr_ExceptionMatches(PyExc_RuntimeError) &&
        !PyErr_ExceptionMatches(PyExc_TypeError))
      return -1;
    PyErr_Clear();
    return 0;
  }
  if (d == NULL)
    return 0;
  int rc = dlspy_cai_read(st, d, dls_cuda(0), c->pycall, index, out);
  Py_DECREF(d);
  if (rc != 0) {
    dlspy_cai_clear(out);
    return -1;
  }
  if (out->version < 3) {
    PyObject *meth = NULL;
    if (dlspy_getattr_opt(obj, st->s_dlpack, &meth) < 0)
      PyErr_Clear();
    if (meth != NULL) {
      /* No stream to honour: the DLPack handshake orders it, and the interface is not read again. */
      Py_DECREF(meth);
      dlspy_type_skip_cai(st, Py_TYPE(obj));
      dlspy_cai_clear(out);
      return 0;
    }
  }
  return 1;
}

/* The device of a tensor read through its array interface: its __dlpack_device__ if it has one (the interface
 * names none), else the call's GPU, else rocm:0 on a machine with ROCm devices only, else cuda:0. */
static int cai_device(dlspy_call *c, PyObject *obj, const DLDevice *call_dev, DLDevice *out) {
  int rc = dlspy_dlpack_device(c->st, obj, c->pycall, out);
  if (rc <= 0)
    return rc;
  DLDevice dflt = dlspy_default_device();
  if (call_dev != NULL && (call_dev->device_type == kDLCUDA || call_dev->device_type == kDLROCM))
    *out = *call_dev;
  else
    *out = dflt.device_type == kDLROCM ? dflt : dls_cuda(0);
  return 0;
}

enum { ARG_NEXT = 0, ARG_DONE = 1 };

/* What one argument says about the call's stream and device. ARG_NEXT: look further (not a tensor, or host
 * memory while the device is unknown); ARG_DONE: the search ends (c->s, c->stream or nothing chosen). */
static int decide(dlspy_call *c, PyObject *o, Py_ssize_t i, DLDevice *dev, bool *dev_known, bool *host_seen) {
  dlspy_state *st = c->st;
  PyTypeObject *tp = Py_TYPE(o);
  if (tp == &PyLong_Type || tp == &PyFloat_Type || o == Py_None || tp == &PyBool_Type || PyBytes_Check(o))
    return ARG_NEXT;
  if (PyObject_TypeCheck(o, st->TensorType)) {
    /* dlstream is the framework: its stream is the one the memory was allocated (or produced) on. */
    DLDevice td = ((TensorObject *)o)->device;
    if (!*dev_known && td.device_type == kDLCPU) {
      *host_seen = true;
      return ARG_NEXT;
    }
    if (!*dev_known) {
      *dev = td;
      *dev_known = true;
    }
    dls__tensor *ti = ((TensorObject *)o)->handle.id ? dls__handle_peek(DLS_HANDLE_TENSOR, ((TensorObject *)o)->handle.id)
                                                     : NULL;
    if (ti != NULL && same_device(td, *dev)) {
      dls__stream *s = ti->buf->stream;
      if (s != NULL && s != s->dev->defaults[DLS__STREAM_NONE])
        c->s = s;
    }
    return ARG_DONE;
  }
  const DLPackExchangeAPI *api = dlspy_xapi_of(st, tp);
  if (api != NULL) {
    DLTensor dl;
    if (api->dltensor_from_py_object_no_sync(o, &dl) != 0) {
      if (!PyErr_Occurred())
        dlspy_raisef(st, DLS_ERR_INVALID_TENSOR, "%s(args[%zd]): the framework could not describe the tensor",
                     c->pycall, i);
      return -1;
    }
    DLDevice home;
    if (!dls__dlpack_home(dl.device, &home))
      return ARG_DONE;
    if (home.device_type == kDLCPU && !*dev_known) {
      *host_seen = true;
      return ARG_NEXT;
    }
    /* The view stays valid while the caller holds the object (the whole call): dlspy_call_tensor reuses it. */
    c->first_obj = o;
    c->first_kind = DLSPY_FIRST_XAPI;
    c->first_dl = dl;
    if (!*dev_known) {
      *dev = home;
      *dev_known = true;
    }
    if (!same_device(home, *dev))
      return ARG_DONE; /* staged or refused later */
    dls__stream *fs;
    if (framework_stream(c, api, dl.device, &fs) != 0)
      return -1;
    c->s = fs;
    c->stream = c->cur_handle;
    return ARG_DONE;
  }
  if (PyCapsule_CheckExact(o))
    return ARG_DONE;
  /* Another framework: its array interface, its __dlpack_device__, its stream provider. */
  dlspy_cai *cai = &c->first_cai;
  int has_cai = read_cai(c, o, (int)i, cai);
  if (has_cai < 0)
    return -1;
  DLDevice d, home;
  int rc = has_cai ? cai_device(c, o, *dev_known ? dev : NULL, &d) : dlspy_dlpack_device(st, o, c->pycall, &d);
  if (rc != 0) {
    if (has_cai)
      dlspy_cai_clear(cai);
    if (rc < 0)
      return -1;
    PyObject *meth = NULL;
    if (dlspy_getattr_opt(o, st->s_dlpack, &meth) < 0)
      return -1;
    Py_XDECREF(meth);
    return meth == NULL ? ARG_NEXT : ARG_DONE; /* not a tensor / a producer that names no device */
  }
  if (!dls__dlpack_home(d, &home)) {
    if (has_cai)
      dlspy_cai_clear(cai);
    return ARG_DONE; /* refused later */
  }
  if (home.device_type == kDLCPU && !*dev_known) {
    if (has_cai)
      dlspy_cai_clear(cai);
    *host_seen = true;
    return ARG_NEXT;
  }
  if (!*dev_known) {
    *dev = home;
    *dev_known = true;
  }
  if (has_cai) {
    cai->dl.device = d;
    c->first_obj = o;
    c->first_kind = DLSPY_FIRST_CAI;
  }
  if (!same_device(home, *dev))
    return ARG_DONE;
  PyObject *provider = dlspy_type_info(st, tp)->provider;
  if (provider != NULL) {
    if (dlspy_provider_stream(st, provider, o, home, c->pycall, (int)i, &c->stream) != 0)
      return -1;
    if (c->stream.id != 0)
      return ARG_DONE;
  }
  if (has_cai && cai->stream != NULL &&
      dlspy_stream_of_dlpack_value(st, home, cai->stream, c->pycall, "__cuda_array_interface__['stream']",
                                   &c->stream) != 0)
    return -1;
  return ARG_DONE;
}

int dlspy_call_begin(dlspy_call *c, dlspy_state *st, const char *pycall, PyObject *stream, const DLDevice *device,
                     PyObject *const *args, Py_ssize_t nargs) {
  c->st = st;
  c->pycall = pycall;
  c->s = NULL;
  c->have_value = false;
  c->nposts = 0;
  c->staged = false;
  c->nordered = 0;
  c->cur_api = NULL;
  c->first_obj = NULL;
  c->first_kind = 0;
  c->first_cai.stream = NULL;
  c->temp_handle = 0;
  c->stream.id = 0;
  if (dlspy_check_runtime(st, pycall) != 0)
    return -1;
  DLDevice dev = device ? *device : dls_cpu();
  bool dev_known = device != NULL;
  if (stream != NULL && stream != Py_None) {
    if (dlspy_stream_resolve(st, stream, dev_known ? dev : dlspy_default_device(), pycall, "stream", &c->stream) != 0)
      return -1;
  } else if (dlspy_context_stream(st, &c->stream) != 0) {
    return -1;
  }
  if (c->stream.id == 0) {
    /* The first tensor argument decides. Host memory decides only when no argument lives on a device (host
     * arrays given to a GPU launch are staged: memory space decides blocking, not the device); then a second
     * pass lets the first host tensor decide. */
    bool host_seen = false;
    for (int pass = 0; pass < 2 && c->s == NULL && c->stream.id == 0; pass++) {
      if (pass == 1) {
        if (dev_known || !host_seen)
          break;
        dev = dls_cpu();
        dev_known = true;
      }
      for (Py_ssize_t i = 0; i < nargs; i++) {
        int rc = decide(c, args[i], i, &dev, &dev_known, &host_seen);
        if (rc < 0)
          goto fail;
        if (rc == ARG_DONE)
          break;
      }
    }
    if (!dev_known && host_seen) {
      dev = dls_cpu();
      dev_known = true;
    }
  }
  if (c->s == NULL) {
    if (c->stream.id == 0)
      c->stream = dls_stream_default(dev_known ? dev : dlspy_default_device(), DLS_STREAM_LEGACY);
    dls_status_t rc;
    c->s = dls__stream_get(c->stream, pycall, "stream", &rc);
    if (c->s == NULL) {
      dlspy_raise(st, rc, pycall);
      goto fail;
    }
  } else if (c->stream.id == 0 && handle_of(c, c->s) != 0) {
    c->s = NULL;
    goto fail;
  }
  if (c->s->kind != DLS__STREAM_DEFAULT)
    dls__stream_ref(c->s); /* a reentrant call may drop the handle meanwhile */
  return 0;
fail:
  dlspy_cai_clear(&c->first_cai);
  c->first_obj = NULL;
  c->s = NULL;
  return -1;
}

static int launch_value(dlspy_call *c, PyObject **out) {
  if (!c->have_value) {
    dls_status_t rc = dls_dlpack_stream_value(c->stream, &c->dlpack_value);
    if (rc != DLS_OK) {
      dlspy_raise(c->st, rc, c->pycall);
      return -1;
    }
    c->have_value = true;
  }
  *out = PyLong_FromLongLong(c->dlpack_value);
  return *out ? 0 : -1;
}

/* Any __dlpack__ producer, or a bare capsule. */
static int generic_tensor(dlspy_call *c, PyObject *obj, int index, bool readonly_ok, bool want_meta,
                          dlspy_view *out) {
  dlspy_state *st = c->st;
  const DLDevice sdev = c->s->dev->device;
  PyObject *cap;
  if (PyCapsule_CheckExact(obj)) {
    cap = Py_NewRef(obj);
  } else {
    PyObject *sv = Py_NewRef(Py_None);
    DLDevice d, home;
    int rc = dlspy_dlpack_device(st, obj, c->pycall, &d);
    if (rc < 0) {
      Py_DECREF(sv);
      return -1;
    }
    if (rc == 0 && dls__dlpack_home(d, &home) && !same_device(home, sdev) &&
        !(home.device_type == kDLCPU && sdev.device_type != kDLCPU)) {
      char x[32], y[32];
      Py_DECREF(sv);
      dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(args[%d]): the tensor lives on %s but the call runs on %s",
                   c->pycall, index, dls_device_str(home, x, sizeof x), dls_device_str(sdev, y, sizeof y));
      return -1;
    }
    if (sdev.device_type != kDLCPU && (rc == 1 || d.device_type != kDLCPU)) {
      Py_DECREF(sv);
      if (launch_value(c, &sv) != 0)
        return -1;
    }
    cap = dlspy_call_dlpack(st, obj, sv);
    Py_DECREF(sv);
    if (cap == NULL)
      return -1;
  }
  void *managed;
  bool versioned;
  int rc = dlspy_capsule_consume(st, cap, c->pycall, &managed, &versioned);
  Py_DECREF(cap);
  if (rc != 0)
    return -1;
  DLTensor *dl = versioned ? &((DLManagedTensorVersioned *)managed)->dl_tensor : &((DLManagedTensor *)managed)->dl_tensor;
  uint64_t flags = versioned ? ((DLManagedTensorVersioned *)managed)->flags : 0;
  if (versioned && ((DLManagedTensorVersioned *)managed)->version.major != DLPACK_MAJOR_VERSION) {
    dlspy_raisef(st, DLS_ERR_VERSION, "%s(args[%d]): DLPack version %u.%u; dlstream reads major version %d",
                 c->pycall, index, ((DLManagedTensorVersioned *)managed)->version.major,
                 ((DLManagedTensorVersioned *)managed)->version.minor, DLPACK_MAJOR_VERSION);
    goto fail;
  }
  char prefix[32];
  snprintf(prefix, sizeof prefix, "args[%d].", index);
  dls__layout lay;
  dls_status_t st_rc = dls__dlpack_check(dl, flags, 0, c->pycall, prefix, &lay);
  if (st_rc != DLS_OK) {
    dlspy_raisef(st, st_rc, "%s", dls_last_error());
    goto fail;
  }
  bool read_only = (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  if (read_only && !readonly_ok) {
    dlspy_raisef(st, DLS_ERR_READ_ONLY,
                 "%s(args[%d]): the tensor is read-only but the kernel may write it (declare the argument 'cp' "
                 "in the signature for inputs)",
                 c->pycall, index);
    goto fail;
  }
  view_meta(out, dl, want_meta);
  char *first = dl->data == NULL ? NULL : (char *)dl->data + dl->byte_offset;
  if (same_device(lay.home, sdev)) {
    out->ptr = first;
    out->device = lay.home;
    out->arg = dls_arg_ptr(first);
    return add_post(c, versioned ? DLSPY_POST_MANAGED_V : DLSPY_POST_MANAGED_L, NULL, managed);
  }
  if (lay.home.device_type == kDLCPU && sdev.device_type != kDLCPU) {
    /* Host memory, device execution: stage through a temporary; the call blocks. */
    if (add_post(c, DLSPY_POST_STAGE, NULL, managed) != 0)
      goto fail;
    dlspy_post *p = &c->posts[c->nposts - 1];
    p->release_kind = versioned ? DLSPY_POST_MANAGED_V : DLSPY_POST_MANAGED_L;
    p->host_lo = (void *)lay.lo;
    p->span = lay.span;
    p->copy_back = !readonly_ok && lay.span > 0;
    c->staged = true;
    dls_status_t r = dls__buffer_alloc(c->s, lay.span, &p->tmp);
    if (r == DLS_OK && lay.span > 0)
      r = c->s->dev->be->memcpy_async(c->s->dev->id, p->tmp->ptr, p->host_lo, lay.span, c->s->native);
    if (r != DLS_OK) {
      dlspy_raise(st, r, c->pycall);
      return -1; /* the post releases `managed` */
    }
    char *dptr = lay.span ? (char *)p->tmp->ptr + ((uintptr_t)first - lay.lo) : NULL;
    out->ptr = dptr;
    out->device = sdev;
    out->arg = dls_arg_ptr(dptr);
    return 0;
  }
  {
    char a[32], b[32];
    dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(args[%d]): the tensor lives on %s but the call runs on %s",
                 c->pycall, index, dls_device_str(lay.home, a, sizeof a), dls_device_str(sdev, b, sizeof b));
  }
fail:
  dlspy_managed_release(managed, versioned);
  return -1;
}

/* A tensor of another framework used on the call's stream: unless `producer` is that stream, the call's stream
 * waits for the work queued on `producer` (once per producer; NULL: no producer to wait for), and `obj` is
 * held until the call's stream passes (its framework frees in order on its own stream, not ours). */
static int order_after(dlspy_call *c, dls__stream *producer, PyObject *obj) {
  if (producer != NULL && same_stream(producer, c->s))
    return 0;
  bool done = producer == NULL;
  for (int i = 0; i < c->nordered && !done; i++)
    done = c->ordered[i] == producer;
  if (!done) {
    dls_status_t rc = dls__stream_order(c->s, producer);
    if (rc != DLS_OK) {
      dlspy_raise(c->st, rc, c->pycall);
      return -1;
    }
    if (c->nordered < (int)(sizeof c->ordered / sizeof c->ordered[0]))
      c->ordered[c->nordered++] = producer;
  }
  if (add_post(c, DLSPY_POST_KEEP, Py_NewRef(obj), NULL) != 0) {
    Py_DECREF(obj);
    return -1;
  }
  return 0;
}

/* A tensor read through its __cuda_array_interface__ (`cai`, its device set): validated, ordered after the
 * interface's stream (CUDA Array Interface v3: the consumer's stream waits for the producer's `stream`). */
static int cai_tensor(dlspy_call *c, PyObject *obj, int index, dlspy_cai *cai, bool readonly_ok, bool want_meta,
                      dlspy_view *out) {
  dlspy_state *st = c->st;
  const DLDevice sdev = c->s->dev->device;
  char prefix[48];
  snprintf(prefix, sizeof prefix, "args[%d].__cuda_array_interface__.", index);
  dls__layout lay;
  dls_status_t rc = dls__dlpack_check(&cai->dl, cai->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0, 0, c->pycall,
                                      prefix, &lay);
  if (rc != DLS_OK) {
    dlspy_raisef(st, rc, "%s", dls_last_error());
    return -1;
  }
  if (!same_device(lay.home, sdev)) {
    char a[32], b[32];
    dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(args[%d]): the tensor lives on %s but the call runs on %s",
                 c->pycall, index, dls_device_str(lay.home, a, sizeof a), dls_device_str(sdev, b, sizeof b));
    return -1;
  }
  if (cai->read_only && !readonly_ok) {
    dlspy_raisef(st, DLS_ERR_READ_ONLY,
                 "%s(args[%d]): the tensor is read-only (__cuda_array_interface__['data'][1]) but the kernel may "
                 "write it (declare it 'cp')",
                 c->pycall, index);
    return -1;
  }
  dls__stream *producer = NULL;
  if (cai->stream != NULL) {
    dls_stream_t h;
    if (dlspy_stream_of_dlpack_value(st, lay.home, cai->stream, c->pycall, "__cuda_array_interface__['stream']",
                                     &h) != 0)
      return -1;
    producer = dls__stream_get(h, c->pycall, "__cuda_array_interface__['stream']", &rc);
    if (producer == NULL) {
      dlspy_raise(st, rc, c->pycall);
      return -1;
    }
  }
  if (order_after(c, producer, obj) != 0)
    return -1;
  view_meta(out, &cai->dl, want_meta);
  out->ptr = cai->dl.data;
  out->device = lay.home;
  out->arg = dls_arg_ptr(out->ptr);
  return 0;
}

int dlspy_call_tensor(dlspy_call *c, PyObject *obj, int index, bool readonly_ok, bool want_meta, dlspy_view *out) {
  dlspy_state *st = c->st;
  PyTypeObject *tp = Py_TYPE(obj);
  if (PyObject_TypeCheck(obj, st->TensorType)) {
    TensorObject *t = (TensorObject *)obj;
    dls_status_t rc;
    dls__tensor *ti = dls__tensor_get(t->handle, c->pycall, "tensor", &rc);
    if (ti == NULL) {
      if (t->handle.id == 0)
        dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s(args[%d]): the tensor was released", c->pycall, index);
      else
        dlspy_raise(st, rc, c->pycall);
      return -1;
    }
    if (!readonly_ok && (ti->flags & DLS_TENSOR_READ_ONLY)) {
      dlspy_raisef(st, DLS_ERR_READ_ONLY,
                   "%s(args[%d]): the tensor is read-only but the kernel may write it (declare it 'cp')", c->pycall,
                   index);
      return -1;
    }
    view_meta(out, &ti->dl, want_meta);
    out->ptr = ti->dl.data ? (char *)ti->dl.data + ti->dl.byte_offset : NULL;
    out->device = ti->buf->dev->device;
    out->arg = readonly_ok ? dls_arg_tensor_in(t->handle) : dls_arg_tensor(t->handle);
    return 0;
  }
  const DLPackExchangeAPI *api = dlspy_xapi_of(st, tp);
  if (api != NULL) {
    DLTensor dl;
    if (obj == c->first_obj) {
      dl = c->first_dl;
    } else if (api->dltensor_from_py_object_no_sync(obj, &dl) != 0) {
      if (!PyErr_Occurred())
        dlspy_raisef(st, DLS_ERR_INVALID_TENSOR, "%s(args[%d]): the framework could not describe the tensor",
                     c->pycall, index);
      return -1;
    }
    DLDevice home;
    if (dls__dlpack_home(dl.device, &home) && same_device(home, c->s->dev->device)) {
      dls__stream *producer;
      if (framework_stream(c, api, dl.device, &producer) != 0)
        return -1;
      if (order_after(c, producer, obj) != 0)
        return -1;
      view_meta(out, &dl, want_meta);
      out->ptr = dl.data ? (char *)dl.data + dl.byte_offset : NULL;
      out->device = home;
      out->arg = dls_arg_ptr(out->ptr);
      return 0;
    }
    /* Another device (a CPU tensor for a GPU launch ...): the general path stages or refuses it. */
  }
  if (!PyCapsule_CheckExact(obj)) {
    if (obj == c->first_obj && c->first_kind == DLSPY_FIRST_CAI)
      return cai_tensor(c, obj, index, &c->first_cai, readonly_ok, want_meta, out);
    if (api == NULL) {
      dlspy_cai cai;
      int has = read_cai(c, obj, index, &cai);
      if (has < 0)
        return -1;
      if (has > 0) {
        int rc = cai_device(c, obj, &c->s->dev->device, &cai.dl.device);
        if (rc == 0)
          rc = cai_tensor(c, obj, index, &cai, readonly_ok, want_meta, out);
        dlspy_cai_clear(&cai);
        return rc;
      }
    }
    PyObject *meth = NULL;
    if (dlspy_getattr_opt(obj, st->s_dlpack, &meth) < 0)
      return -1;
    if (meth == NULL)
      return 1;
    Py_DECREF(meth);
  }
  return generic_tensor(c, obj, index, readonly_ok, want_meta, out);
}

int dlspy_call_end(dlspy_call *c, bool ok) {
  dlspy_state *st = c->st;
  int result = 0;
  dls__stream *s = c->s;
  dlspy_cai_clear(&c->first_cai);
  c->first_obj = NULL;
  if (s == NULL)
    return 0;
  /* Staged host arrays: copy back, then block until the stream has passed. */
  if (c->staged) {
    dls_status_t rc = DLS_OK;
    for (int i = 0; i < c->nposts && ok; i++) {
      dlspy_post *p = &c->posts[i];
      if (p->kind == DLSPY_POST_STAGE && p->copy_back && p->tmp != NULL && rc == DLS_OK)
        rc = s->dev->be->memcpy_async(s->dev->id, p->host_lo, p->tmp->ptr, p->span, s->native);
    }
    dls_status_t src;
    atomic_fetch_add(&dlspy_nogil_calls, 1);
    Py_BEGIN_ALLOW_THREADS
    src = s->dev->be->stream_synchronize(s->dev->id, s->native);
    Py_END_ALLOW_THREADS
    atomic_fetch_sub(&dlspy_nogil_calls, 1);
    if (rc == DLS_OK)
      rc = src;
    if (rc != DLS_OK && ok) {
      dlspy_raise(st, rc, c->pycall);
      result = -1;
    }
  }
  for (int i = 0; i < c->nposts; i++) {
    dlspy_post *p = &c->posts[i];
    switch (p->kind) {
    case DLSPY_POST_KEEP:
      if (ok)
        keep_release(s, release_pyobject, p->obj); /* steals */
      else
        Py_DECREF(p->obj);
      break;
    case DLSPY_POST_MANAGED_V:
    case DLSPY_POST_MANAGED_L: {
      bool v = p->kind == DLSPY_POST_MANAGED_V;
      if (ok)
        keep_release(s, v ? release_managed_v : release_managed_l, p->managed);
      else
        dlspy_managed_release(p->managed, v);
      break;
    }
    case DLSPY_POST_STAGE:
      if (p->tmp != NULL)
        dls__buffer_unref(p->tmp); /* stream-ordered free on the launch stream */
      dlspy_managed_release(p->managed, p->release_kind == DLSPY_POST_MANAGED_V);
      break;
    }
  }
  c->nposts = 0;
  if (c->temp_handle != 0)
    (void)dls__handle_free(DLS_HANDLE_STREAM, c->temp_handle); /* the stream itself: our reference, below */
  c->temp_handle = 0;
  if (s->kind != DLS__STREAM_DEFAULT)
    dls__stream_unref(s);
  c->s = NULL;
  return result;
}
