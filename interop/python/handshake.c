/* SPDX-License-Identifier: Apache-2.0 */
/* Which stream a call runs on: explicit, the use_stream() context, else what its first tensor argument's framework
 * says (the DLPack C exchange API, CuPy read in C, a stream provider, the array interface's stream), else the
 * legacy default stream. The arguments themselves are tensorarg.c's, the rest of the call call.c's. */
#include "call.h"

#include <string.h>

#include "cupy.h"
#include "errors.h"
#include "protocol.h"
#include "streamarg.h"
#include "tensortypes.h"

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
  c->s = NULL; /* not held yet: the end drops only what the search read and held */
  (void)dlspy_call_end_slow(c, false);
  return -1;
}

