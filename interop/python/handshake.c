/* SPDX-License-Identifier: Apache-2.0 */
/* The argument handshake: which stream a call runs on, tensor arguments through the DLPack C exchange API or
 * __dlpack__ (arguments themselves: tensorarg.c), and borrowed objects kept alive until every stream that used
 * them has passed. */
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

int dlspy_keep_until(dlspy_state *st, dls__stream *s, PyObject *obj) {
  Py_INCREF(obj);
  dls__ext_release_after(s, release_pyobject, obj);
  return 0;
}

/* ---- the DLPack Python protocol ---- */

PyObject *dlspy_call_dlpack(dlspy_state *st, PyObject *obj, PyObject *stream_value) {
  PyObject *argv[4] = {NULL, obj, stream_value, st->max_version};
  PyObject *cap = PyObject_VectorcallMethod(st->s_dlpack, argv + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                            st->kw_stream_maxv);
  if (cap != NULL || !PyErr_ExceptionMatches(PyExc_TypeError))
    return cap;
  /* A producer older than DLPack 1.0 knows no max_version. Should the older signatures fail too, the first
   * TypeError (which may be the producer's own) is the last one's __context__. */
  PyObject *first = dlspy_take_exception();
  if (stream_value != Py_None) {
    argv[0] = NULL;
    cap = PyObject_VectorcallMethod(st->s_dlpack, argv + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, st->kw_stream);
    if (cap == NULL && PyErr_ExceptionMatches(PyExc_TypeError))
      PyErr_Clear();
    else
      goto out;
  }
  cap = PyObject_CallMethodNoArgs(obj, st->s_dlpack);
out:
  if (cap == NULL && first != NULL) {
    PyObject *last = dlspy_take_exception();
    if (last != NULL) {
      PyException_SetContext(last, Py_NewRef(first));
      PyErr_SetObject((PyObject *)Py_TYPE(last), last);
      Py_DECREF(last);
    }
  }
  Py_XDECREF(first);
  return cap;
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
  if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2 || !PyLong_Check(PyTuple_GET_ITEM(r, 0)) ||
      !PyLong_Check(PyTuple_GET_ITEM(r, 1))) {
    dlspy_type_error(st, "%s: __dlpack_device__() returned %R; expected a (device_type, device_id) pair of ints",
                     pycall, r);
    Py_DECREF(r);
    return -1;
  }
  int o1 = 0, o2 = 0;
  long long type = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(r, 0), &o1);
  long long id = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(r, 1), &o2);
  if (o1 || o2 || type < 0 || id < 0 || type > INT32_MAX || id > INT32_MAX) {
    dlspy_range_error(st, "%s: __dlpack_device__() returned %R: out of range: device types and indices are 0 to "
                          "2**31 - 1",
                      pycall, r);
    Py_DECREF(r);
    return -1;
  }
  Py_DECREF(r);
  *out = dls_device((DLDeviceType)type, (int32_t)id);
  return 0;
}

/* ---- the call ---- */

int dlspy_add_post(dlspy_call *c, int kind, PyObject *obj, void *managed) {
  if (c->nposts == DLSPY_MAX_POSTS) {
    dlspy_raisef(c->st, DLS_ERR_INVALID_ARGUMENT, "%s: more than %d tensor arguments", c->pycall, DLSPY_MAX_POSTS);
    return -1;
  }
  dlspy_post *p = &c->posts[c->nposts++];
  p->kind = kind;
  p->obj = obj;
  p->managed = managed;
  p->tmp = NULL;
  p->buf = NULL;
  return 0;
}

/* The framework's current stream for a device, as a core stream. */
int dlspy_framework_current_failed(dlspy_state *st, const char *pycall, DLDevice dev) {
  if (!PyErr_Occurred())
    dlspy_raisef(st, DLS_ERR_BACKEND, "%s: the framework's current_work_stream(device=%d:%d) failed", pycall,
                 (int)dev.device_type, (int)dev.device_id);
  return -1;
}

int dlspy_framework_stream_ask(dlspy_call *c, const DLPackExchangeAPI *api, DLDevice dev, dls__stream **out) {
  void *native;
  if (dlspy_framework_current(c->st, c->pycall, api, dev, &native) != 0)
    return -1;
  DLDevice home;
  if (!dls__ext_home(dev, &home))
    home = dev;
  dls_stream_t h;
  dls__stream *s;
  if (dlspy_stream_lookup(c->st, home, native, c->pycall, &h, &s) != 0)
    return -1;
  dlspy_call_set_current(c, api, dev, s, h);
  *out = s;
  return 0;
}



/* A handle naming `s` for the public calls of built-ins (dls__ext_stream_handle): a temporary one takes over the
 * call's reference on `s`, and dlspy_call_end ends it. */
static int handle_of(dlspy_call *c, dls__stream *s) {
  if (dls__ext_stream_handle(s, &c->stream, &c->temp_handle) != DLS_OK) {
    dlspy_raisef(c->st, DLS_ERR_OUT_OF_MEMORY, "%s: %s", c->pycall, dls_last_error());
    return -1;
  }
  return 0;
}

enum { ARG_NEXT = 0, ARG_DONE = 1, ARG_GENERAL = 2 };

/* A CuPy array decides: CuPy's current stream of its device (what the package's CuPy provider would say), the
 * array read once for dlspy_call_arg. CuPy memory is device memory. ARG_GENERAL: the C path cannot tell (nothing
 * raised). */
static int decide_cupy(dlspy_call *c, PyObject *o, DLDevice *dev, bool *dev_known) {
  int rc = dlspy_cupy_read(c->st, o, false, &c->first_cai);
  if (rc != 0)
    return rc < 0 ? -1 : ARG_GENERAL;
  DLDevice home = c->first_cai.dl.device;
  if (!*dev_known) {
    *dev = home;
    *dev_known = true;
  }
  c->first_obj = o;
  c->first_kind = DLSPY_FIRST_CUPY;
  if (!dlspy_same_device(home, *dev))
    return ARG_DONE; /* refused later */
  dls__stream *fs;
  rc = dlspy_cupy_stream(c, home, &fs);
  if (rc != 0) {
    c->first_obj = NULL;
    c->first_kind = 0;
    return rc < 0 ? -1 : ARG_GENERAL;
  }
  c->s = fs;
  c->sdev = home;
  c->stream = c->cur_handle;
  c->fast_type = Py_TYPE(o);
  c->fast_api = NULL;
  c->fast_dev = home;
  return ARG_DONE;
}

/* What one argument says about the call's stream and device. ARG_NEXT: look further (not a tensor, or host
 * memory while the device is unknown and `host_seen` is given: it is set); ARG_DONE: the search ends (c->s,
 * c->stream or nothing chosen). With `host_seen` NULL host memory decides like device memory. */
static int decide(dlspy_call *c, PyObject *o, Py_ssize_t i, DLDevice *dev, bool *dev_known, bool *host_seen) {
  dlspy_state *st = c->st;
  PyTypeObject *tp = Py_TYPE(o);
  if (tp == &PyLong_Type || tp == &PyFloat_Type || o == Py_None || tp == &PyBool_Type || PyBytes_Check(o))
    return ARG_NEXT;
  const dlspy_type_entry info = *dlspy_type_info(st, tp);
  if (info.kind == DLSPY_KIND_TENSOR) {
    /* dlstream is the framework: its stream is the one the memory was allocated (or produced) on. */
    DLDevice td = ((TensorObject *)o)->device;
    if (!*dev_known && td.device_type == kDLCPU && host_seen != NULL) {
      *host_seen = true;
      return ARG_NEXT;
    }
    if (!*dev_known) {
      *dev = td;
      *dev_known = true;
    }
    dls__ext_tensor ti;
    if (((TensorObject *)o)->handle.id != 0 && dls__ext_tensor_peek(((TensorObject *)o)->handle, &ti) &&
        dlspy_same_device(td, *dev) && ti.producer != NULL)
      c->s = ti.producer;
    return ARG_DONE;
  }
  if (info.kind == DLSPY_KIND_CUPY) {
    int rc = decide_cupy(c, o, dev, dev_known);
    if (rc != ARG_GENERAL)
      return rc;
    /* Not readable in C: the array interface and the provider below. */
  }
  const DLPackExchangeAPI *api = info.api;
  if (info.kind == DLSPY_KIND_XAPI) {
    DLTensor dl;
    if (api->dltensor_from_py_object_no_sync(o, &dl) != 0)
      return dlspy_xapi_failed(st, c->pycall, DLSPY_ARG(c, (int)i));
    DLDevice home;
    if (!dls__ext_home(dl.device, &home))
      return ARG_DONE;
    if (home.device_type == kDLCPU && !*dev_known && host_seen != NULL) {
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
    if (!dlspy_same_device(home, *dev))
      return ARG_DONE; /* staged or refused later */
    dls__stream *fs;
    if (dlspy_framework_stream(c, api, dl.device, &fs) != 0)
      return -1;
    c->s = fs;
    c->sdev = home; /* the framework's stream was looked up on `home` */
    c->stream = c->cur_handle;
    c->fast_type = tp;
    c->fast_api = api;
    c->fast_dev = dl.device;
    return ARG_DONE;
  }
  if (PyCapsule_CheckExact(o))
    return ARG_DONE;
  /* Another framework: its array interface, its __dlpack_device__, its stream provider. */
  dlspy_cai *cai = &c->first_cai;
  int has_cai = dlspy_read_cai(c, o, (int)i, cai);
  if (has_cai < 0)
    return -1;
  DLDevice d, home;
  int rc = has_cai ? dlspy_cai_device(c, o, *dev_known ? dev : NULL, &d) : dlspy_dlpack_device(st, o, c->pycall, &d);
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
  if (!dls__ext_home(d, &home)) {
    if (has_cai)
      dlspy_cai_clear(cai);
    return ARG_DONE; /* refused later */
  }
  if (home.device_type == kDLCPU && !*dev_known && host_seen != NULL) {
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
  if (!dlspy_same_device(home, *dev))
    return ARG_DONE;
  PyObject *provider = dlspy_type_info(st, tp)->provider; /* looked up again: reading the interface may add types */
  if (provider != NULL) {
    if (dlspy_provider_stream(st, provider, o, home, c->pycall, DLSPY_ARG(c, (int)i), &c->stream) != 0)
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
  c->names = NULL;
  c->hint = DLSPY_HINT_WRITES;
  c->writer = NULL;
  c->cause = NULL;
  c->cur_ref = NULL;
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
  c->extents = NULL;
  c->stream.id = 0;
  c->fast_type = NULL;
  if (dlspy_check_runtime(st, pycall) != 0)
    return -1;
  DLDevice dev = device ? *device : dls_cpu();
  bool dev_known = device != NULL;
  if (stream != NULL && stream != Py_None) {
    if (dlspy_stream_resolve(st, stream, dev_known ? dev : dlspy_default_device(), pycall, "stream", &c->stream) != 0)
      return -1;
  } else if (st->stream_var_set && dlspy_context_stream(st, &c->stream) != 0) {
    return -1;
  }
  if (c->stream.id == 0) {
    /* The first tensor argument decides. Host memory decides only when no argument lives on a device (host
     * arrays given to a GPU launch are staged: memory space decides blocking, not the device); then a second
     * pass lets the first host tensor decide. */
    bool host_seen = false;
    for (int pass = 0; pass < 2 && c->s == NULL && c->stream.id == 0; pass++) {
      if (pass == 1 && (dev_known || !host_seen))
        break;
      for (Py_ssize_t i = 0; i < nargs; i++) {
        int rc = decide(c, args[i], i, &dev, &dev_known, pass == 0 ? &host_seen : NULL);
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
    if (c->stream.id == 0 && dlspy_default_stream(st, dev_known ? dev : dlspy_default_device(), pycall, &c->stream) != 0)
      goto fail;
    dls_status_t rc;
    c->s = dls__ext_stream(c->stream, pycall, "stream", &rc);
    if (c->s == NULL) {
      dlspy_raise(st, rc, pycall);
      goto fail;
    }
    c->sdev = dls__ext_stream_device(c->s);
  } else if (c->stream.id == 0) { /* a dlstream tensor's producer */
    if (handle_of(c, c->s) != 0) {
      c->s = NULL;
      goto fail;
    }
    c->sdev = dls__ext_stream_device(c->s);
  } /* else the framework's stream, looked up on c->sdev */
  /* A reentrant call may drop the handle meanwhile. Only a reserved handle names a default stream, which lives as
   * long as its device. */
  c->counted = (uint32_t)(c->stream.id >> 32) != DLS_STREAM_RESERVED_GENERATION;
  if (c->counted)
    dls__ext_stream_ref(c->s);
  return 0;
fail:
  dlspy_cai_clear(&c->first_cai);
  Py_CLEAR(c->cause);
  if (c->cur_ref != NULL)
    dls__ext_stream_unref(c->cur_ref);
  c->cur_ref = NULL;
  c->first_obj = NULL;
  c->s = NULL;
  return -1;
}

int dlspy_launch_value(dlspy_call *c, PyObject **out) {
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

int dlspy_call_end_slow(dlspy_call *c, bool ok) {
  dlspy_state *st = c->st;
  int result = 0;
  dls__stream *s = c->s;
  dlspy_cai_clear(&c->first_cai);
  Py_CLEAR(c->cause);
  if (c->cur_ref != NULL)
    dls__ext_stream_unref(c->cur_ref);
  c->cur_ref = NULL;
  c->first_obj = NULL;
  if (s == NULL)
    return 0;
  /* Staged host arrays: copy back, then wait (interruptibly) until the stream has passed. An interrupted wait
   * leaves the copies queued: the host arrays are then kept like any borrowed object, until the stream passes. */
  bool queued = ok;
  if (c->staged) {
    dls_status_t rc = DLS_OK;
    for (int i = 0; i < c->nposts && ok; i++) {
      dlspy_post *p = &c->posts[i];
      if (p->kind == DLSPY_POST_STAGE && p->copy_back && p->tmp != NULL && rc == DLS_OK)
        rc = dls__ext_stage_out(s, p->tmp, p->host_lo, p->span);
    }
    if (rc != DLS_OK && ok) {
      dlspy_raise(st, rc, c->pycall);
      result = -1;
    }
    queued = true; /* the copies in may be queued even when the launch was refused */
    if (dlspy_core_stream_wait(st, c->pycall, s) == 0)
      queued = false;
    else if (result == 0)
      result = -1;
    else
      PyErr_Clear(); /* the first failure says more */
  }
  for (int i = 0; i < c->nposts; i++) {
    dlspy_post *p = &c->posts[i];
    switch (p->kind) {
    case DLSPY_POST_KEEP:
      if (ok)
        dls__ext_release_after(s, release_pyobject, p->obj); /* steals */
      else
        Py_DECREF(p->obj);
      break;
    case DLSPY_POST_MANAGED_V:
    case DLSPY_POST_MANAGED_L: {
      bool v = p->kind == DLSPY_POST_MANAGED_V;
      if (ok)
        dls__ext_release_after(s, v ? release_managed_v : release_managed_l, p->managed);
      else
        dlspy_managed_release(p->managed, v);
      break;
    }
    case DLSPY_POST_STAGE:
      if (p->tmp != NULL)
        dls__buffer_unref(p->tmp); /* stream-ordered free on the launch stream */
      if (queued && p->managed != NULL)
        dls__ext_release_after(s, p->release_kind == DLSPY_POST_MANAGED_V ? release_managed_v : release_managed_l, p->managed);
      else
        dlspy_managed_release(p->managed, p->release_kind == DLSPY_POST_MANAGED_V);
      break;
    case DLSPY_POST_USE:
      if (ok && dls__buffer_access(p->buf, s, p->mode, false) != DLS_OK && result == 0) {
        dlspy_raise(st, DLS_ERR_BACKEND, c->pycall);
        result = -1;
      }
      dls__buffer_unref(p->buf);
      break;
    case DLSPY_POST_HOLD:
      dls__buffer_unref(p->buf);
      break;
    }
  }
  c->nposts = 0;
  if (c->temp_handle != 0)
    dls__ext_stream_temp_end(c->temp_handle); /* it lets go of our reference */
  else if (c->counted)
    dls__ext_stream_unref(s);
  c->temp_handle = 0;
  c->s = NULL;
  return result;
}
