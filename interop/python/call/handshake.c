/* SPDX-License-Identifier: Apache-2.0 */
/* The read pass of a call, its general way: it reads the call's arguments into its table (dlspy_call.args) up to
 * the first tensor argument and picks the call's stream as it goes, in current.h's order: explicit, the
 * use_stream() context, else its first tensor argument's current stream (read by protocol: decide_*), else the
 * legacy default stream. The conversion (tensorarg.c) reads the
 * arguments past it, each into its entry, and takes the ones read here from the table. The common case of
 * Function.launch (handshake.h) reads every argument in one pass; a call it does not fit goes on here from what it
 * read. */
#include "handshake.h"

#include <string.h>

#include "cupy.h"
#include "../errors.h"
#include "protocol.h"
#include "streamarg.h"
#include "tensortypes.h"

/* A handle naming `s` for the public calls of built-ins (dls__ext_stream_handle): a temporary one takes over the
 * reference dlspy_call_hold takes next (nothing runs in between), and dlspy_call_end ends it. */
static int handle_of(dlspy_call *c, dls__stream *s) {
  c->more = true;
  if (dls__ext_stream_handle(s, &c->stream, &c->temp_handle) != DLS_OK) {
    dlspy_raisef(c->st, DLS_ERR_OUT_OF_MEMORY, "%s: %s", c->pycall, dls_last_error());
    return -1;
  }
  return 0;
}

enum { ARG_NEXT = 0, ARG_DONE = 1, ARG_GENERAL = 2, ARG_ASK = 3 };

/* Where a tensor argument on `home` leaves the search: ARG_NEXT for host memory while no device is known and
 * `host_seen` is given (it is set); else its device is the call's unless one was known, and ARG_ASK when it is
 * the call's device (its current stream decides), ARG_DONE when it is another (staged or refused later). */
static int at_device(DLDevice home, DLDevice *dev, bool *dev_known, bool *host_seen) {
  if (home.device_type == kDLCPU && !*dev_known && host_seen != NULL) {
    *host_seen = true;
    return ARG_NEXT;
  }
  if (!*dev_known) {
    *dev = home;
    *dev_known = true;
  }
  return dlspy_same_device(home, *dev) ? ARG_ASK : ARG_DONE;
}

/* The stream of the call is the current stream that the framework of the tensor in slot `i` (of type `tp`; `api`
 * NULL: CuPy) names for `dev` (home: `home`): tensors of that type on that device need no ordering. */
static void decided_by(dlspy_call *c, int i, PyTypeObject *tp, const DLPackExchangeAPI *api, DLDevice dev,
                       DLDevice home, dls__stream *fs) {
  c->s = fs;
  c->sdev = home; /* the framework's stream was looked up on `home` */
  c->stream = c->cur_handle;
  c->ftype.type = tp; /* its home is sdev (ftype.home is not set) */
  c->ftype.api = api;
  c->ftype.dev = dev;
  c->fast |= (uint64_t)1 << i;
}

/* A dlstream.Tensor decides: dlstream is the framework, its stream the one the memory was allocated (or produced)
 * on (none: the default stream). */
static int decide_tensor(dlspy_call *c, PyObject *o, DLDevice *dev, bool *dev_known, bool *host_seen) {
  DLDevice td = ((TensorObject *)o)->device;
  int at = at_device(td, dev, dev_known, host_seen);
  if (at != ARG_ASK)
    return at;
  dlspy_stream_question q = {.kind = DLSPY_KIND_TENSOR, .dev = td, .home = td, .obj = o};
  dls_stream_t none;
  return dlspy_current_stream(c->st, c->pycall, &q, &none, &c->s) != 0 ? -1 : ARG_DONE;
}

/* A tensor of an exchange-API framework in slot `i` decides: its framework's current stream of its device (read
 * into its entry; a host tensor of the first pass is not read again). */
static int decide_xapi(dlspy_call *c, PyObject *o, int i, const DLPackExchangeAPI *api, DLDevice *dev,
                       bool *dev_known, bool *host_seen) {
  const dlspy_arg *a;
  if (dlspy_arg_xapi(c, o, i + c->desc->base, api, &a) != 0)
    return -1;
  DLDevice home;
  if (!dls__ext_home(a->dl.device, &home))
    return ARG_DONE;
  int at = at_device(home, dev, dev_known, host_seen);
  if (at != ARG_ASK)
    return at;
  dls__stream *fs;
  if (dlspy_framework_stream(c, api, a->dl.device, &fs) != 0)
    return -1;
  decided_by(c, i, Py_TYPE(o), api, a->dl.device, home, fs);
  return ARG_DONE;
}

/* A CuPy array in slot `i` decides: CuPy's current stream of its device (what the package's CuPy provider would
 * say). Read once, into its entry (and, for a call that wants views, with its shape into c->cai). CuPy memory is
 * device memory. ARG_GENERAL: the C path cannot tell (nothing raised). */
static int decide_cupy(dlspy_call *c, PyObject *o, int i, DLDevice *dev, bool *dev_known) {
  int rc = 1;
  if (c->desc->views && (rc = dlspy_cupy_read(c->st, o, true, &c->cai)) == 0) {
    c->cai_index = i;
    c->cai_cupy = true;
  } else if (rc > 0) {
    rc = dlspy_cupy_read(c->st, o, false, &c->cai);
  }
  if (rc != 0)
    return rc < 0 ? -1 : ARG_GENERAL;
  dlspy_arg *a = &c->args[i];
  a->ptr = c->cai.dl.data;
  a->dl.device = c->cai.dl.device;
  c->cupy |= (uint64_t)1 << i;
  DLDevice home = a->dl.device;
  if (at_device(home, dev, dev_known, NULL) != ARG_ASK)
    return ARG_DONE; /* refused later */
  dls__stream *fs;
  rc = dlspy_cupy_stream(c, home, &fs);
  if (rc != 0) {
    c->cai_index = -1; /* the general way below may read the array interface into c->cai */
    return rc < 0 ? -1 : ARG_GENERAL;
  }
  decided_by(c, i, Py_TYPE(o), NULL, home, home, fs);
  return ARG_DONE;
}

/* Any other object in slot `i`: its array interface (read into c->cai), its __dlpack_device__, its stream provider.
 * ARG_NEXT for an object that is no tensor. */
static int decide_other(dlspy_call *c, PyObject *o, int i, DLDevice *dev, bool *dev_known, bool *host_seen) {
  dlspy_state *st = c->st;
  if (PyCapsule_CheckExact(o))
    return ARG_DONE;
  dlspy_cai *cai = &c->cai;
  int has_cai = dlspy_read_cai(c, o, i + c->desc->base, cai);
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
  int at = at_device(home, dev, dev_known, host_seen);
  if (at == ARG_NEXT) {
    if (has_cai)
      dlspy_cai_clear(cai);
    return ARG_NEXT;
  }
  if (has_cai) {
    cai->dl.device = d;
    c->cai_index = i;
    c->cai_cupy = false;
    c->more |= cai->stream != NULL;
  }
  if (at != ARG_ASK)
    return ARG_DONE;
  /* Its provider looked up again: reading the interface may add types. */
  dlspy_stream_question q = {.kind = DLSPY_KIND_OTHER, .dev = d, .home = home, .obj = o,
                             .provider = dlspy_type_info(st, Py_TYPE(o))->provider,
                             .cai_stream = has_cai ? cai->stream : NULL, .arg = DLSPY_ARG(c, i + c->desc->base)};
  dls__stream *known;
  return dlspy_current_stream(st, c->pycall, &q, &c->stream, &known) != 0 ? -1 : ARG_DONE;
}

/* What the argument in slot `i` says about the call's stream and device, read into its entry, by what it is.
 * ARG_NEXT: look further (not a tensor, or host memory while the device is unknown and `host_seen` is given: it
 * is set); ARG_DONE: the search ends (c->s, c->stream or nothing chosen). With `host_seen` NULL host memory
 * decides like device memory. */
static int decide(dlspy_call *c, PyObject *o, int i, DLDevice *dev, bool *dev_known, bool *host_seen) {
  PyTypeObject *tp = Py_TYPE(o);
  if (tp == &PyLong_Type || tp == &PyFloat_Type || o == Py_None || tp == &PyBool_Type || PyBytes_Check(o))
    return ARG_NEXT; /* a plain value */
  const dlspy_type_entry info = *dlspy_type_info(c->st, tp);
  switch (info.kind) {
  case DLSPY_KIND_TENSOR: return decide_tensor(c, o, dev, dev_known, host_seen);
  case DLSPY_KIND_XAPI: return decide_xapi(c, o, i, info.api, dev, dev_known, host_seen);
  case DLSPY_KIND_CUPY: {
    int rc = decide_cupy(c, o, i, dev, dev_known);
    if (rc != ARG_GENERAL)
      return rc;
    break; /* not readable in C: the array interface and the provider */
  }
  }
  return decide_other(c, o, i, dev, dev_known, host_seen);
}

int dlspy_read_failed(dlspy_state *st, const char *pycall, const dlspy_call_desc *desc, int index) {
  char buf[24];
  return dlspy_xapi_failed(st, pycall, dlspy_desc_argname(desc, index, buf, sizeof buf));
}

void dlspy_call_from_common(dlspy_call *c, const dlspy_last_type *t, const dlspy_common *r) {
  dlspy_call_cold(c);
  c->counted = false;
  c->searching = false;
  c->stream = r->stream;
  c->s = r->s;
  c->xapi = r->xapi;
  c->cupy = r->cupy;
  c->fast = r->fast;
  c->sdev = t->home;
  c->ftype = *t;
  c->cur_api = t->api;
  c->cur_dev = t->dev;
  c->cur_stream = r->s;
  c->cur_handle = r->stream;
}


void dlspy_call_cold(dlspy_call *c) {
  c->cause = NULL;
  c->cur_ref = NULL;
  c->block = NULL;
  c->have_value = false;
  c->more = false;
  c->staged = false;
  c->in_block = false;
  c->nposts = 0;
  c->nquick = 0;
  c->nuse_posts = 0;
  c->nordered = 0;
  c->cai_index = -1;
  c->cai.stream = NULL;
  c->temp_handle = 0;
  c->extents = NULL;
}

int dlspy_call_read_from(dlspy_call *c, PyObject *stream, const DLDevice *device, PyObject *const *args,
                         Py_ssize_t nargs) {
  dlspy_state *st = c->st;
  const char *pycall = c->pycall;
  dlspy_call_cold(c);
  c->counted = false;
  c->searching = false;
  c->s = NULL;
  c->cur_api = NULL;
  c->stream.id = 0;
  c->ftype.type = NULL;
  c->fast = 0;
  if (dlspy_check_runtime(st, pycall) != 0)
    return -1;
  int n = (int)nargs;
  DLDevice dev = device ? *device : dls_cpu();
  bool dev_known = device != NULL;
  if (stream != NULL && stream != Py_None) {
    if (dlspy_stream_resolve(st, stream, dev_known ? dev : dlspy_default_device(), pycall, "stream", &c->stream) != 0)
      return -1;
  } else if (st->stream_var_set) {
    if (dlspy_context_stream(st, &c->stream) != 0)
      return -1;
    c->in_block = c->stream.id != 0;
  }
  if (c->stream.id == 0) {
    /* The first tensor argument decides. Host memory decides only when no argument lives on a device (host arrays
     * given to a GPU launch are staged: memory space decides blocking, not the device); then a second pass lets the
     * first host tensor decide. */
    bool host_seen = false;
    c->searching = true;
    for (int pass = 0; pass < 2 && c->s == NULL && c->stream.id == 0; pass++) {
      if (pass == 1 && (dev_known || !host_seen))
        break;
      for (int i = 0; i < n; i++) {
        int rc = decide(c, args[i], i, &dev, &dev_known, pass == 0 ? &host_seen : NULL);
        if (rc < 0) {
          c->searching = false;
          goto fail;
        }
        if (rc == ARG_DONE)
          break;
      }
    }
    c->searching = false;
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
  return 0;
fail:
  c->s = NULL; /* not held: the end drops only what the search read and held */
  (void)dlspy_call_end_slow(c, false);
  return -1;
}

