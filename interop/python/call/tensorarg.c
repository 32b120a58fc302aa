/* SPDX-License-Identifier: Apache-2.0 */
/* Tensor arguments of a call, as the kernel sees them: dlstream tensors, tensors of exchange-API frameworks,
 * __cuda_array_interface__ producers and any __dlpack__ producer; host arrays staged through stream-ordered
 * temporaries; sources on another device for copies. */
#include "tensorarg.h"

#include <string.h>

#include "cupy.h"
#include "../errors.h"
#include "protocol.h"
#include "streamarg.h"
#include "tensortypes.h"

void dlspy_view_meta(dlspy_view *v, const DLTensor *dl, bool want_meta) {
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

/* The capsule of a __dlpack__ producer on the call's device (or host memory, staged), asked for the call's stream
 * (a bare capsule as it is). NULL with an exception. */
static PyObject *dlpack_capsule(dlspy_call *c, PyObject *obj, int index) {
  if (PyCapsule_CheckExact(obj))
    return Py_NewRef(obj);
  dlspy_state *st = c->st;
  const DLDevice sdev = c->sdev;
  DLDevice d, home;
  int rc = dlspy_dlpack_device(st, obj, c->pycall, &d);
  if (rc < 0)
    return NULL;
  if (rc == 0 && dls__ext_home(d, &home) && !dlspy_same_device(home, sdev) &&
      !(home.device_type == kDLCPU && sdev.device_type != kDLCPU)) {
    char x[32], y[32];
    dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(%s): the tensor lives on %s but the call runs on %s", c->pycall,
                 DLSPY_ARG(c, index), dls_device_str(home, x, sizeof x), dls_device_str(sdev, y, sizeof y));
    return NULL;
  }
  PyObject *sv;
  if (sdev.device_type != kDLCPU && (rc == 1 || d.device_type != kDLCPU)) {
    if (dlspy_launch_value(c, &sv) != 0)
      return NULL;
  } else {
    sv = Py_NewRef(Py_None);
  }
  PyObject *cap = dlspy_call_dlpack(st, obj, sv);
  Py_DECREF(sv);
  return cap;
}

/* Consumes `cap` (its reference taken; NULL: a failure raised already): the tensor it held (`managed`, versioned
 * or not), or NULL with an exception. */
static DLTensor *consume_capsule(dlspy_call *c, PyObject *cap, void **managed, bool *versioned) {
  if (cap == NULL)
    return NULL;
  int rc = dlspy_capsule_consume(c->st, cap, c->pycall, managed, versioned);
  Py_DECREF(cap);
  if (rc != 0)
    return NULL;
  return *versioned ? &((DLManagedTensorVersioned *)*managed)->dl_tensor : &((DLManagedTensor *)*managed)->dl_tensor;
}

/* Host memory (`managed`, laid out as `lay`, its first element `first`) for device execution: staged through a
 * temporary, and the call blocks. Not in a capture: the blocking copy back would wait for work that is only
 * recorded. The post (or, on an early failure, the caller) releases `managed`: 0, -1 with an exception, -2 with an
 * exception and `managed` still the caller's. */
static int stage_host(dlspy_call *c, int index, void *managed, bool versioned, const dls__ext_layout *lay,
                      char *first, bool readonly_ok, dlspy_view *out) {
  uint64_t capture = 0;
  if (dls__ext_stream_capturing(c->s, &capture)) {
    dlspy_raisef(c->st, DLS_ERR_STATE,
                 "%s(%s): a host array would be staged through the device and the call would block, but "
                 "the stream is capturing (capture %llu): pass a device tensor inside a capture",
                 c->pycall, DLSPY_ARG(c, index), (unsigned long long)capture);
    return -2;
  }
  if (dlspy_add_post(c, DLSPY_POST_STAGE, NULL, managed) != 0)
    return -2;
  dlspy_post *p = &c->posts[c->nposts - 1];
  p->release_kind = versioned ? DLSPY_POST_MANAGED_V : DLSPY_POST_MANAGED_L;
  p->host_lo = (void *)lay->lo;
  p->span = lay->span;
  p->copy_back = !readonly_ok && lay->span > 0;
  c->staged = true; /* c->more: the post set it */
  void *tmp_ptr;
  dls_status_t r = dls__ext_stage_in(c->s, p->host_lo, lay->span, &p->tmp, &tmp_ptr);
  if (r != DLS_OK) {
    dlspy_raise(c->st, r, c->pycall);
    return -1; /* the post releases `managed` and the temporary */
  }
  char *dptr = lay->span ? (char *)tmp_ptr + ((uintptr_t)first - lay->lo) : NULL;
  out->ptr = dptr;
  out->device = c->sdev;
  out->arg = dls_arg_ptr(dptr);
  return 0;
}

/* Any __dlpack__ producer, or a bare capsule. */
static int generic_tensor(dlspy_call *c, PyObject *obj, int index, bool readonly_ok, bool want_meta,
                          dlspy_view *out) {
  dlspy_state *st = c->st;
  const DLDevice sdev = c->sdev;
  void *managed;
  bool versioned;
  DLTensor *dl = consume_capsule(c, dlpack_capsule(c, obj, index), &managed, &versioned);
  if (dl == NULL)
    return -1;
  int rc;
  uint64_t flags = versioned ? ((DLManagedTensorVersioned *)managed)->flags : 0;
  if (versioned && ((DLManagedTensorVersioned *)managed)->version.major != DLPACK_MAJOR_VERSION) {
    dlspy_raisef(st, DLS_ERR_VERSION, "%s(%s): DLPack version %u.%u; dlstream reads major version %d",
                 c->pycall, DLSPY_ARG(c, index), ((DLManagedTensorVersioned *)managed)->version.major,
                 ((DLManagedTensorVersioned *)managed)->version.minor, DLPACK_MAJOR_VERSION);
    goto fail;
  }
  char prefix[32];
  snprintf(prefix, sizeof prefix, "%s.", DLSPY_ARG(c, index));
  dls__ext_layout lay;
  dls_status_t st_rc = dls__ext_dlpack_check(dl, flags, c->pycall, prefix, &lay);
  if (st_rc != DLS_OK) {
    dlspy_raisef(st, st_rc, "%s", dls_last_error());
    goto fail;
  }
  bool read_only = (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  if (read_only && !readonly_ok) {
    dlspy_read_only(c, index, "");
    goto fail;
  }
  dlspy_view_meta(out, dl, want_meta);
  char *first = dl->data == NULL ? NULL : (char *)dl->data + dl->byte_offset;
  if (dlspy_same_device(lay.home, sdev)) {
    out->ptr = first;
    out->device = lay.home;
    out->arg = dls_arg_ptr(first);
    if (dlspy_add_post(c, versioned ? DLSPY_POST_MANAGED_V : DLSPY_POST_MANAGED_L, NULL, managed) != 0)
      goto fail;
    return dlspy_call_memory(c, dl, readonly_ok, NULL); /* `dl` lives while the post holds it */
  }
  if (lay.home.device_type == kDLCPU && sdev.device_type != kDLCPU) {
    rc = stage_host(c, index, managed, versioned, &lay, first, readonly_ok, out);
    if (rc != -2)
      return rc;
    goto fail;
  }
  {
    char a[32], b[32];
    dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(%s): the tensor lives on %s but the call runs on %s",
                 c->pycall, DLSPY_ARG(c, index), dls_device_str(lay.home, a, sizeof a), dls_device_str(sdev, b, sizeof b));
  }
fail:
  dlspy_managed_release(managed, versioned);
  return -1;
}

/* An exchange-API tensor `dl` whose memory the call's stream reaches (its own device, or a peer for copies):
 * ordered after its framework's stream (and as a use of the dlstream buffer it aliases), passed as a pointer. */
static int xapi_tensor(dlspy_call *c, const DLPackExchangeAPI *api, PyObject *obj, const dlspy_arg *a, DLDevice home,
                       bool readonly_ok, bool want_meta, dlspy_view *out) {
  dls__stream *producer;
  if (dlspy_framework_stream(c, api, a->dl.device, &producer) != 0 || dlspy_order_after(c, producer, obj) != 0 ||
      dlspy_call_memory(c, &a->dl, readonly_ok, producer) != 0)
    return -1;
  dlspy_view_meta(out, &a->dl, want_meta);
  out->ptr = a->ptr;
  out->device = home;
  out->arg = dls_arg_ptr(out->ptr);
  return 0;
}

/* A tensor read through its __cuda_array_interface__ (`cai`, its device set): validated, ordered after the
 * interface's stream (CUDA Array Interface v3: the consumer's stream waits for the producer's `stream`). */
static int cai_tensor(dlspy_call *c, PyObject *obj, int index, dlspy_cai *cai, bool readonly_ok, bool want_meta,
                      dlspy_view *out, bool peer) {
  dlspy_state *st = c->st;
  const DLDevice sdev = c->sdev;
  char prefix[48];
  snprintf(prefix, sizeof prefix, "%s.__cuda_array_interface__.", DLSPY_ARG(c, index));
  dls__ext_layout lay;
  dls_status_t rc = dls__ext_dlpack_check(&cai->dl, cai->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0, c->pycall,
                                          prefix, &lay);
  if (rc != DLS_OK) {
    dlspy_raisef(st, rc, "%s", dls_last_error());
    return -1;
  }
  if (!dlspy_same_device(lay.home, sdev) && !(peer && lay.home.device_type == sdev.device_type)) {
    char a[32], b[32];
    dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(%s): the tensor lives on %s but the call runs on %s",
                 c->pycall, DLSPY_ARG(c, index), dls_device_str(lay.home, a, sizeof a), dls_device_str(sdev, b, sizeof b));
    return -1;
  }
  if (cai->read_only && !readonly_ok)
    return dlspy_read_only(c, index, " (__cuda_array_interface__['data'][1])");
  dls__stream *producer = NULL;
  if (cai->stream != NULL) {
    dls_stream_t h;
    if (dlspy_stream_of_dlpack_value(st, lay.home, cai->stream, c->pycall, "__cuda_array_interface__['stream']",
                                     &h) != 0)
      return -1;
    producer = dls__ext_stream(h, c->pycall, "__cuda_array_interface__['stream']", &rc);
    if (producer == NULL) {
      dlspy_raise(st, rc, c->pycall);
      return -1;
    }
  }
  if (dlspy_order_after(c, producer, obj) != 0 || dlspy_call_memory(c, &cai->dl, readonly_ok, producer) != 0)
    return -1;
  dlspy_view_meta(out, &cai->dl, want_meta);
  out->ptr = cai->dl.data;
  out->device = lay.home;
  out->arg = dls_arg_ptr(out->ptr);
  return 0;
}

/* A CuPy array read in C (its entry, or the call's view of it with its shape, when they have what is asked), on
 * the call's device or (peer) on another of its backend: ordered after CuPy's current stream of its device (and as
 * a use of the dlstream buffer it aliases). 1: the C path cannot take it (nothing raised). */
static int cupy_tensor(dlspy_call *c, PyObject *obj, int index, bool readonly_ok, bool want_meta, bool peer,
                       dlspy_view *out) {
  int i = index - c->desc->base;
  dlspy_cai tmp, *v = &tmp;
  if (c->cai_index == i && c->cai_cupy && (c->cai.meta || !(want_meta || peer))) {
    v = &c->cai;
  } else if (!(want_meta || peer) && ((c->cupy >> i) & 1)) {
    tmp.meta = false;
    tmp.dl.data = c->args[i].ptr;
    tmp.dl.device = c->args[i].dl.device;
  } else {
    int rc = dlspy_cupy_read(c->st, obj, want_meta || peer, &tmp);
    if (rc != 0)
      return rc;
  }
  DLDevice home = v->dl.device, sdev = c->sdev;
  if (!dlspy_same_device(home, sdev) && !(peer && home.device_type == sdev.device_type)) {
    char a[32], b[32];
    dlspy_raisef(c->st, DLS_ERR_INVALID_DEVICE, "%s(%s): the tensor lives on %s but the call runs on %s",
                 c->pycall, DLSPY_ARG(c, index), dls_device_str(home, a, sizeof a), dls_device_str(sdev, b, sizeof b));
    return -1;
  }
  dls__stream *producer;
  int rc = dlspy_cupy_stream(c, home, &producer);
  if (rc != 0)
    return rc;
  if (dlspy_order_after(c, producer, obj) != 0 || dlspy_cupy_memory(c, obj, v, readonly_ok, producer) != 0)
    return -1;
  if (v->meta)
    dlspy_view_meta(out, &v->dl, want_meta);
  out->ptr = v->dl.data;
  out->device = home;
  out->arg = dls_arg_ptr(out->ptr);
  return 0;
}

int dlspy_call_arg(dlspy_call *c, PyObject *obj, int index, bool readonly_ok, dls_arg_t *out) {
  const dlspy_type_entry info = *dlspy_type_info(c->st, Py_TYPE(obj));
  if (info.kind == DLSPY_KIND_XAPI) {
    const dlspy_arg *a;
    DLDevice home;
    if (dlspy_arg_xapi(c, obj, index, info.api, &a) != 0)
      return -1;
    if (dls__ext_home(a->dl.device, &home) && dlspy_same_device(home, c->sdev)) {
      dls__stream *producer;
      if (dlspy_framework_stream(c, info.api, a->dl.device, &producer) != 0 ||
          dlspy_order_after(c, producer, obj) != 0 || dlspy_call_memory(c, &a->dl, readonly_ok, producer) != 0)
        return -1;
      *out = dls_arg_ptr(a->ptr);
      dlspy_note_extent(c, index, dlspy_view_extent(&a->dl));
      return 0;
    }
  }
  /* A built-in's checks need the extents of pointer arguments: their views' shapes and strides. */
  bool want_meta = c->extents != NULL;
  dlspy_view v;
  v.has_meta = false; /* the readers set it only where they read the shape */
  v.buf = NULL;
  int rc = info.kind == DLSPY_KIND_CUPY ? cupy_tensor(c, obj, index, readonly_ok, want_meta, false, &v) : 1;
  if (rc > 0)
    rc = dlspy_call_tensor(c, obj, index, readonly_ok, want_meta, &v);
  if (rc == 0) {
    *out = v.arg;
    if (v.has_meta)
      dlspy_note_extent(c, index, dlspy_meta_extent(v.ndim, v.shape, v.strides, v.dtype));
  }
  return rc;
}

/* A dlstream tensor's view (out->buf: its buffer, which the caller holds for the call). */
static void own_view(dls_tensor_t h, const dls__ext_tensor *ti, bool readonly_ok, bool want_meta, dlspy_view *out) {
  dlspy_view_meta(out, ti->dl, want_meta);
  out->ptr = dlspy_view_data(ti->dl);
  out->device = ti->home;
  out->arg = readonly_ok ? dls_arg_tensor_in(h) : dls_arg_tensor(h);
  out->buf = ti->buf;
}

/* A dlstream tensor's view; its buffer is held until the call ends (a HOLD post), so its memory outlives Python
 * code that later arguments run, even if that code closes the tensor (the launch then finds the handle closed and
 * refuses; raw-pointer work still has live memory). */
static int hold_tensor(dlspy_call *c, dls_tensor_t h, const dls__ext_tensor *ti, bool readonly_ok, bool want_meta,
                       dlspy_view *out) {
  if (dlspy_add_post(c, DLSPY_POST_HOLD, NULL, NULL) != 0)
    return -1;
  dls__ext_buffer_ref(ti->buf);
  c->posts[c->nposts - 1].buf = ti->buf;
  c->posts[c->nposts - 1].mode = readonly_ok ? DLS_ACCESS_READ : DLS_ACCESS_WRITE;
  own_view(h, ti, readonly_ok, want_meta, out);
  return 0;
}

int dlspy_call_tensor(dlspy_call *c, PyObject *obj, int index, bool readonly_ok, bool want_meta, dlspy_view *out) {
  out->buf = NULL;
  int i = index - c->desc->base;
  if (Py_TYPE(obj) == c->ftype.type && c->ftype.api != NULL && !(((c->fast | c->xapi) >> i) & 1) &&
      dlspy_call_fast_read(c, obj, i) < 0)
    return -1; /* else read into its entry, fast when on the fast device */
  if (((c->fast & c->xapi) >> i) & 1 && c->cur_api == (const void *)c->ftype.api &&
      dlspy_same_device(c->cur_dev, c->ftype.dev)) {
    /* A tensor of the call's fast type on its device, its framework's current stream still the call's: what
     * xapi_tensor would find (nothing to order, and no alias: dlspy_call.fast), from its entry. */
    const dlspy_arg *a = &c->args[i];
    dlspy_view_meta(out, &a->dl, want_meta);
    out->ptr = a->ptr;
    out->device = c->sdev;
    out->arg = dls_arg_ptr(out->ptr);
    return 0;
  }
  dlspy_state *st = c->st;
  PyTypeObject *tp = Py_TYPE(obj);
  const dlspy_type_entry info = *dlspy_type_info(st, tp);
  if (info.kind == DLSPY_KIND_TENSOR) {
    TensorObject *t = (TensorObject *)obj;
    dls__ext_tensor ti;
    dls_status_t rc = dls__ext_tensor_get(t->handle, c->pycall, "tensor", &ti);
    if (rc != DLS_OK) {
      if (t->handle.id == 0)
        dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s(%s): the tensor was released", c->pycall, DLSPY_ARG(c, index));
      else
        dlspy_raise(st, rc, c->pycall);
      return -1;
    }
    if (!readonly_ok && (ti.flags & DLS_TENSOR_READ_ONLY))
      return dlspy_read_only(c, index, "");
    return hold_tensor(c, t->handle, &ti, readonly_ok, want_meta, out);
  }
  const DLPackExchangeAPI *api = info.kind == DLSPY_KIND_XAPI ? info.api : NULL;
  if (api != NULL) {
    const dlspy_arg *a;
    if (dlspy_arg_xapi(c, obj, index, api, &a) != 0)
      return -1;
    DLDevice home;
    if (dls__ext_home(a->dl.device, &home) && dlspy_same_device(home, c->sdev))
      return xapi_tensor(c, api, obj, a, home, readonly_ok, want_meta, out);
    /* Another device (a CPU tensor for a GPU launch ...): the general path stages or refuses it. */
  } else if (info.kind == DLSPY_KIND_CUPY) {
    int rc = cupy_tensor(c, obj, index, readonly_ok, true, false, out);
    if (rc <= 0)
      return rc;
  }
  if (!PyCapsule_CheckExact(obj)) {
    if (c->cai_index == index - c->desc->base && !c->cai_cupy)
      return cai_tensor(c, obj, index, &c->cai, readonly_ok, want_meta, out, false);
    if (api == NULL) {
      dlspy_cai cai;
      int has = dlspy_read_cai(c, obj, index, &cai);
      if (has < 0)
        return -1;
      if (has > 0) {
        int rc = dlspy_cai_device(c, obj, &c->sdev, &cai.dl.device);
        if (rc == 0)
          rc = cai_tensor(c, obj, index, &cai, readonly_ok, want_meta, out, false);
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

void dlspy_call_record_use(dlspy_call *c, const dlspy_view *v, int mode) {
  for (int i = 0; v->buf != NULL && i < c->nposts; i++) {
    if ((c->posts[i].kind == DLSPY_POST_HOLD || c->posts[i].kind == DLSPY_POST_USE) && c->posts[i].buf == v->buf) {
      bool more = c->posts[i].kind != DLSPY_POST_USE || (mode & ~c->posts[i].mode) != 0;
      c->nuse_posts += c->posts[i].kind != DLSPY_POST_USE;
      c->posts[i].mode = c->posts[i].kind == DLSPY_POST_USE ? c->posts[i].mode | mode : mode;
      c->posts[i].ordered &= !more; /* a use not ordered first is noted as a declared one */
      c->posts[i].kind = DLSPY_POST_USE;
    }
  }
}

/* The device a tensor argument lives on (its home), without reading it twice later. 1: not tensor-like. */
static int home_of(dlspy_call *c, PyObject *obj, int index, DLDevice *out) {
  dlspy_state *st = c->st;
  if (PyObject_TypeCheck(obj, st->TensorType)) {
    *out = ((TensorObject *)obj)->device;
    return 0;
  }
  DLDevice d;
  const dlspy_type_entry info = *dlspy_type_info(st, Py_TYPE(obj));
  const DLPackExchangeAPI *api = info.api;
  dlspy_cai cp;
  int rc;
  int i = index - c->desc->base;
  if (api != NULL) {
    const dlspy_arg *a;
    if (dlspy_arg_xapi(c, obj, index, api, &a) != 0)
      return -1;
    d = a->dl.device;
  } else if (c->cai_index == i) {
    d = c->cai.dl.device;
  } else if (info.kind == DLSPY_KIND_CUPY && ((c->cupy >> i) & 1)) {
    d = c->args[i].dl.device;
  } else if (info.kind == DLSPY_KIND_CUPY && (rc = dlspy_cupy_read(st, obj, false, &cp)) <= 0) {
    if (rc < 0)
      return -1;
    d = cp.dl.device;
  } else if (PyCapsule_CheckExact(obj)) {
    return 1;
  } else if ((rc = dlspy_dlpack_device(st, obj, c->pycall, &d)) != 0) {
    return rc;
  }
  return dls__ext_home(d, out) ? 0 : 1;
}

/* A dlstream tensor on another device of the call's backend: its read is a use of its buffer. */
static int peer_own(dlspy_call *c, PyObject *obj, DLDevice home, dlspy_view *out) {
  dls_tensor_t h = ((TensorObject *)obj)->handle;
  dls__ext_tensor ti;
  dls_status_t r = dls__ext_tensor_get(h, c->pycall, "src", &ti);
  if (r != DLS_OK) {
    dlspy_raise(c->st, r, c->pycall);
    return -1;
  }
  dls__ext_buffer_ref(ti.buf);
  if (dlspy_call_use(c, ti.buf, DLS_ACCESS_READ) != 0)
    return -1;
  own_view(h, &ti, true, true, out);
  out->device = home;
  out->arg = dls_arg_ptr(out->ptr);
  return 0;
}

/* A __dlpack__ producer on another device of the call's backend. The DLPack protocol: the producer orders its work
 * before the legacy default stream of its own device, and the call's stream waits for that stream. Host memory
 * (another CPU device's) is exchanged synchronously: its producer is asked with stream=None, and there is no stream
 * to wait for. */
static int peer_dlpack(dlspy_call *c, PyObject *obj, int index, DLDevice home, dlspy_view *out) {
  dlspy_state *st = c->st;
  dls_status_t r;
  dls__stream *ls = NULL;
  PyObject *sv;
  if (home.device_type == kDLCPU) {
    sv = Py_NewRef(Py_None);
  } else {
    dls_stream_t legacy = dls_stream_default(home, DLS_STREAM_LEGACY);
    ls = dls__ext_stream(legacy, c->pycall, "the source's default stream", &r);
    if (ls == NULL) {
      dlspy_raise(st, r, c->pycall);
      return -1;
    }
    int64_t value;
    if ((r = dls_dlpack_stream_value(legacy, &value)) != DLS_OK) {
      dlspy_raise(st, r, c->pycall);
      return -1;
    }
    sv = PyLong_FromLongLong(value);
    if (sv == NULL)
      return -1;
  }
  PyObject *cap = PyCapsule_CheckExact(obj) ? Py_NewRef(obj) : dlspy_call_dlpack(st, obj, sv);
  Py_DECREF(sv);
  void *managed;
  bool versioned;
  DLTensor *dl = consume_capsule(c, cap, &managed, &versioned);
  if (dl == NULL)
    return -1;
  char prefix[32];
  snprintf(prefix, sizeof prefix, "%s.", DLSPY_ARG(c, index));
  dls__ext_layout lay;
  r = dls__ext_dlpack_check(dl, versioned ? ((DLManagedTensorVersioned *)managed)->flags : 0, c->pycall, prefix,
                            &lay);
  if (r == DLS_OK && !dlspy_same_device(lay.home, home)) {
    dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(%s): __dlpack_device__ and the tensor disagree", c->pycall,
                 DLSPY_ARG(c, index));
    dlspy_managed_release(managed, versioned);
    return -1;
  }
  if (r == DLS_OK && ls != NULL)
    r = dls__stream_order(c->s, ls);
  if (r != DLS_OK) {
    dlspy_raisef(st, r, "%s", dls_last_error());
    dlspy_managed_release(managed, versioned);
    return -1;
  }
  dlspy_view_meta(out, dl, true);
  out->ptr = dlspy_view_data(dl);
  out->device = home;
  out->arg = dls_arg_ptr(out->ptr);
  if (dlspy_add_post(c, versioned ? DLSPY_POST_MANAGED_V : DLSPY_POST_MANAGED_L, NULL, managed) != 0) {
    dlspy_managed_release(managed, versioned);
    return -1;
  }
  return dlspy_call_memory(c, dl, true, NULL); /* `dl` lives while the post holds it */
}

int dlspy_call_peer_tensor(dlspy_call *c, PyObject *obj, int index, dlspy_view *out) {
  dlspy_state *st = c->st;
  out->buf = NULL;
  const DLDevice sdev = c->sdev;
  DLDevice home;
  int rc = home_of(c, obj, index, &home);
  if (rc < 0)
    return -1;
  if (rc > 0 || dlspy_same_device(home, sdev) || home.device_type != sdev.device_type ||
      (home.device_type == kDLCPU) != (sdev.device_type == kDLCPU))
    return dlspy_call_tensor(c, obj, index, true, true, out);
  /* Another device of the call's backend, by protocol. */
  if (PyObject_TypeCheck(obj, st->TensorType))
    return peer_own(c, obj, home, out);
  const dlspy_type_entry info = *dlspy_type_info(st, Py_TYPE(obj));
  const DLPackExchangeAPI *api = info.api;
  if (api != NULL) {
    const dlspy_arg *a;
    if (dlspy_arg_xapi(c, obj, index, api, &a) != 0)
      return -1;
    return xapi_tensor(c, api, obj, a, home, true, true, out);
  }
  if (info.kind == DLSPY_KIND_CUPY && (rc = cupy_tensor(c, obj, index, true, true, true, out)) <= 0)
    return rc;
  if (c->cai_index == index - c->desc->base && !c->cai_cupy)
    return cai_tensor(c, obj, index, &c->cai, true, true, out, true);
  dlspy_cai cai;
  int has = dlspy_read_cai(c, obj, index, &cai);
  if (has < 0)
    return -1;
  if (has > 0) {
    cai.dl.device = home;
    rc = cai_tensor(c, obj, index, &cai, true, true, out, true);
    dlspy_cai_clear(&cai);
    return rc;
  }
  return peer_dlpack(c, obj, index, home, out);
}

void dlspy_call_fast_aliases(dlspy_call *c, PyObject *const *args, Py_ssize_t nargs) {
  /* The tensors of the fast type past the read pass's reach are read now, as their conversion would read them,
   * so that each fast one is looked up once, here. */
  for (Py_ssize_t i = 0; i < nargs && c->ftype.type != NULL; i++) {
    uint64_t bit = (uint64_t)1 << i;
    if (Py_TYPE(args[i]) == c->ftype.type && (c->ptrslots & bit) && !((c->fast | c->xapi | c->cupy) & bit) &&
        dlspy_call_fast_read(c, args[i], (int)i) < 0)
      PyErr_Clear(); /* its conversion reads it again and raises */
  }
  for (uint64_t m = c->fast; m != 0; m &= m - 1) {
    int i = __builtin_ctzll(m);
    if (dlspy_call_entry_aliased(c, args[i], i))
      c->fast &= ~((uint64_t)1 << i); /* its conversion orders it as a use of the buffer */
  }
}

int dlspy_call_fast_read(dlspy_call *c, PyObject *o, int i) {
  dlspy_arg *a = &c->args[i];
  if (c->ftype.api != NULL) {
    const dlspy_arg *r;
    if (dlspy_arg_xapi(c, o, i + c->desc->base, c->ftype.api, &r) != 0)
      return -1;
  } else {
    dlspy_cai v;
    int rc = dlspy_cupy_read(c->st, o, false, &v);
    if (rc != 0)
      return rc;
    a->ptr = v.dl.data;
    a->dl.device = v.dl.device;
    c->cupy |= (uint64_t)1 << i;
  }
  if (!dlspy_same_device(a->dl.device, c->ftype.dev))
    return 1;
  c->fast |= (uint64_t)1 << i;
  return 0;
}
