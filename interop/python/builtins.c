/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in kernels from Python (fill, axpy, copy, spin) and dlstream.Latch. */
#include "args.h"
#include "errors.h"
#include "call/handshake.h"
#include "call/streamarg.h"
#include "call/tensorarg.h"

#include <math.h>
#include <string.h>

/* Ends a built-in call: reports `rc` (the launch's status) after the handshake's cleanup. */
static PyObject *finish(dlspy_call *c, dls_status_t rc) {
  bool ok = rc == DLS_OK;
  if (!ok)
    dlspy_raisef(c->st, rc, "%s", dls_last_error());
  if (dlspy_call_end(c, ok) != 0 || !ok)
    return NULL;
  Py_RETURN_NONE;
}

/* A tensor argument's view (dtype, count and contiguity; with want_meta also shape and strides). */
static int tensor_arg(dlspy_call *c, PyObject *o, int index, bool readonly_ok, bool want_meta, dlspy_view *v) {
  int rc = dlspy_call_tensor(c, o, index, readonly_ok, want_meta, v);
  if (rc > 0)
    dlspy_call_not_tensor(c, o, index, "a tensor (any DLPack producer)");
  return rc == 0 ? 0 : -1;
}

/* A fill value read before any handle is looked up (its __index__ or __float__ may close the tensor): an int
 * (exact, a new reference) or a double. */
typedef struct fill_value {
  PyObject *i; /* NULL: a float */
  double d;
} fill_value;

static int read_fill_value(dlspy_state *st, PyObject *v, fill_value *out) {
  out->i = NULL;
  out->d = 0;
  if (!PyFloat_Check(v) && (PyLong_Check(v) || PyIndex_Check(v))) {
    out->i = PyNumber_Index(v);
    if (out->i == NULL)
      dlspy_type_error(st, "fill(value=%R): its __index__ failed", v);
    return out->i ? 0 : -1;
  }
  return dlspy_as_double(st, v, "fill", "value", &out->d);
}

/* IEEE half precision of `d`, rounded to nearest even (the caller refuses what would overflow). */
static uint16_t half_bits(double d) {
  uint16_t sign = signbit(d) ? 0x8000u : 0u;
  double a = fabs(d);
  if (isnan(d))
    return sign | 0x7e00u;
  if (isinf(a) || a >= 65520.0)
    return sign | 0x7c00u;
  int e;
  (void)frexp(a, &e); /* a = m * 2**e, m in [0.5, 1) */
  if (a != 0.0 && e - 1 >= -14) {
    double r = nearbyint(ldexp(a, 10 - (e - 1))); /* 1024 to 2048 */
    int exp = e - 1;
    if (r >= 2048.0) {
      r = 1024.0;
      exp++;
    }
    return (uint16_t)(sign | (uint16_t)((exp + 15) << 10) | (uint16_t)((uint16_t)r - 1024u));
  }
  return (uint16_t)(sign | (uint16_t)nearbyint(ldexp(a, 24))); /* subnormal; 1024 is the smallest normal */
}

/* bfloat16 of `d`: the float's high half, rounded to nearest even. */
static uint16_t bfloat_bits(double d) {
  float f = (float)d;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (isnan(f))
    return (uint16_t)((u >> 16) | 0x40u); /* stays a NaN (rounding could make it an infinity) */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* The fill pattern of `v` for elements of `dt`. Out-of-range values are refused as NumPy refuses them
 * (OverflowError): nothing wraps; a float into integers truncates toward zero as in NumPy, NaN and infinities
 * are refused. */
static int fill_pattern(dlspy_state *st, PyObject *shown, const fill_value *v, DLDataType dt, uint64_t *out) {
  char name[48];
  dlspy_dtype_name(dt, name, sizeof name);
  size_t size = dls_dtype_size(dt);
  *out = 0;
  if (dt.lanes != 1 || (size != 1 && size != 2 && size != 4 && size != 8) || dt.code == kDLComplex ||
      (dt.code != kDLFloat && dt.code != kDLBfloat && dt.code != kDLInt && dt.code != kDLUInt && dt.code != kDLBool))
    goto unsupported;
  if (dt.code == kDLBool) {
    int t = v->i ? PyObject_IsTrue(v->i) : v->d != 0.0;
    if (t < 0)
      return -1;
    *out = (uint64_t)t;
    return 0;
  }
  if (dt.code == kDLFloat || dt.code == kDLBfloat) {
    double d = v->d;
    if (v->i != NULL && dlspy_as_double(st, v->i, "fill", "value", &d) != 0)
      return -1;
    uint16_t h = 0;
    bool inf = false;
    if (dt.bits == 64) {
      memcpy(out, &d, 8);
    } else if (dt.bits == 32) {
      float f = (float)d;
      inf = isinf(f);
      memcpy(out, &f, 4);
    } else {
      h = dt.code == kDLBfloat ? bfloat_bits(d) : half_bits(d);
      inf = (h & 0x7fffu) == (dt.code == kDLBfloat ? 0x7f80u : 0x7c00u);
      *out = h;
    }
    if (inf && isfinite(d)) {
      dlspy_range_error(st, "fill(value=%R): out of range for %s (its largest finite value is %s)", shown, name,
                        dt.bits == 32 || dt.code == kDLBfloat ? "about 3.4e38" : "65504");
      return -1;
    }
    return 0;
  }
  /* Integers. */
  bool is_signed = dt.code == kDLInt;
  int bits = (int)size * 8;
  int64_t lo = is_signed ? (bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1))) : 0;
  uint64_t hi = is_signed ? (uint64_t)(bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1)
                          : (bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1);
  PyObject *i = v->i;
  if (i == NULL) {
    if (isnan(v->d) || isinf(v->d)) {
      dlspy_range_error(st, "fill(value=%R): %s has no %s value", shown, isnan(v->d) ? "NaN" : "an infinity", name);
      return -1;
    }
    i = PyLong_FromDouble(trunc(v->d)); /* toward zero, as NumPy casts */
    if (i == NULL)
      return -1;
  } else {
    Py_INCREF(i);
  }
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(i, &overflow);
  unsigned long long u = 0;
  bool ok;
  if (overflow > 0 && !is_signed) {
    u = PyLong_AsUnsignedLongLong(i);
    ok = !(u == (unsigned long long)-1 && PyErr_Occurred());
    PyErr_Clear();
  } else {
    ok = overflow == 0 && x >= lo && (x < 0 || (unsigned long long)x <= hi);
    u = (unsigned long long)x;
  }
  Py_DECREF(i);
  if (!ok) {
    if (is_signed)
      dlspy_range_error(st, "fill(value=%R): out of range for %s (%lld to %llu)", shown, name, (long long)lo,
                        (unsigned long long)hi);
    else
      dlspy_range_error(st, "fill(value=%R): out of range for %s (0 to %llu)", shown, name, (unsigned long long)hi);
    return -1;
  }
  *out = size == 8 ? u : (u & (((uint64_t)1 << bits) - 1)); /* two's complement of a value that fits */
  return 0;
unsupported:
  dlspy_raisef(st, DLS_ERR_NOT_SUPPORTED,
               "fill(dst): %s elements are not supported (fill takes bool, integers, float16, bfloat16, float32 and "
               "float64)",
               name);
  return -1;
}

PyObject *dlspy_fill(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "fill";
  dlspy_state *st = dlspy_state_of_module(module);
  static const char *const names[] = {"dst", "value", "stream", NULL};
  PyObject *a[3];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 2, a) != 0)
    return NULL;
  if (a[0] == NULL || a[1] == NULL)
    return dlspy_type_error(st, "fill() takes dst and value");
  fill_value fv;
  if (read_fill_value(st, a[1], &fv) != 0)
    return NULL;
  static const dlspy_call_desc desc = {names, 0, true, DLSPY_HINT_WRITES, NULL};
  dlspy_call c;
  dlspy_call_init(&c, st, pycall, &desc, ~(uint64_t)0);
  if (dlspy_call_begin(&c, a[2], NULL, a, 1) != 0) {
    Py_XDECREF(fv.i);
    return NULL;
  }
  dlspy_view v;
  uint64_t pattern;
  int bad = tensor_arg(&c, a[0], 0, false, false, &v) != 0 || fill_pattern(st, a[1], &fv, v.dtype, &pattern) != 0;
  Py_XDECREF(fv.i);
  if (bad) {
    dlspy_call_end(&c, false);
    return NULL;
  }
  if (!v.contiguous) {
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "fill(dst=%R): the tensor must be contiguous", a[0]);
    dlspy_call_end(&c, false);
    return NULL;
  }
  if (v.count == 0)
    return finish(&c, DLS_OK); /* no element: nothing to queue (an empty tensor may have no data pointer) */
  return finish(&c, dls_fill(c.stream, v.arg, v.count, (uint32_t)dls_dtype_size(v.dtype), &pattern));
}

PyObject *dlspy_axpy(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "axpy";
  dlspy_state *st = dlspy_state_of_module(module);
  static const char *const names[] = {"a", "x", "y", "stream", NULL};
  PyObject *a[4];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 3, a) != 0)
    return NULL;
  if (a[0] == NULL || a[1] == NULL || a[2] == NULL)
    return dlspy_type_error(st, "axpy() takes a, x and y");
  double alpha;
  if (dlspy_as_double(st, a[0], pycall, "a", &alpha) != 0)
    return NULL;
  static const dlspy_call_desc desc = {names, 1, true, DLSPY_HINT_WRITES, NULL}; /* the table holds x and y */
  dlspy_call c;
  dlspy_call_init(&c, st, pycall, &desc, ~(uint64_t)0);
  if (dlspy_call_begin(&c, a[3], NULL, a + 1, 2) != 0)
    return NULL;
  dlspy_view x, y;
  if (tensor_arg(&c, a[1], 1, true, false, &x) != 0 || tensor_arg(&c, a[2], 2, false, false, &y) != 0) {
    dlspy_call_end(&c, false);
    return NULL;
  }
  if (x.dtype.code == kDLFloat && x.dtype.bits == 32 && isfinite(alpha) && isinf((float)alpha)) {
    dlspy_range_error(st, "axpy(a=%R): out of range for float32 tensors (about 3.4e38 at most)", a[0]);
    dlspy_call_end(&c, false);
    return NULL;
  }
  const char *why = NULL;
  if (x.dtype.code != kDLFloat || (x.dtype.bits != 32 && x.dtype.bits != 64) || x.dtype.lanes != 1)
    why = "x must be float32 or float64";
  else if (memcmp(&x.dtype, &y.dtype, sizeof x.dtype) != 0)
    why = "x and y must have one dtype";
  else if (x.count != y.count)
    why = "x and y must have as many elements";
  else if (!x.contiguous || !y.contiguous)
    why = "x and y must be contiguous";
  if (why != NULL) {
    char xd[48], yd[48];
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "axpy(x=%R, y=%R): %s (x: %s, %llu elements; y: %s, %llu elements)",
                 a[1], a[2], why, dlspy_dtype_name(x.dtype, xd, sizeof xd), (unsigned long long)x.count,
                 dlspy_dtype_name(y.dtype, yd, sizeof yd), (unsigned long long)y.count);
    dlspy_call_end(&c, false);
    return NULL;
  }
  if (x.count == 0)
    return finish(&c, DLS_OK);
  dls_status_t rc = x.dtype.bits == 32 ? dls_axpy_f32(c.stream, x.count, (float)alpha, x.arg, y.arg)
                                       : dls_axpy_f64(c.stream, x.count, alpha, x.arg, y.arg);
  return finish(&c, rc);
}

/* copy(dst, src) with src on another device of the call's backend: a peer copy (through the host where the
 * devices cannot reach each other), queued on the call's stream, which is on dst's device. */
static PyObject *copy_between_devices(dlspy_call *c, PyObject *const *a, dlspy_view *d, dlspy_view *s) {
  dlspy_state *st = c->st;
  const DLDevice sdev = c->sdev;
  char x[32], y[32], z[32];
  const char *why = NULL;
  if (d->device.device_id != sdev.device_id)
    why = "the copy runs on a stream of dst's device";
  else if (!d->has_meta || !s->has_meta || d->ndim != s->ndim ||
           memcmp(d->shape, s->shape, (size_t)d->ndim * sizeof d->shape[0]) != 0)
    why = "dst and src must have one shape";
  else if (memcmp(&d->dtype, &s->dtype, sizeof d->dtype) != 0 || dls_dtype_size(d->dtype) == 0)
    why = "a copy between devices takes one dtype (convert on one device first)";
  else if (!d->contiguous || !s->contiguous)
    why = "a copy between devices takes contiguous tensors";
  if (why != NULL) {
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "copy(dst on %s, src on %s, stream on %s): %s",
                 dls_device_str(d->device, x, sizeof x), dls_device_str(s->device, y, sizeof y),
                 dls_device_str(sdev, z, sizeof z), why);
    dlspy_call_end(c, false);
    return NULL;
  }
  size_t bytes = (size_t)d->count * dls_dtype_size(d->dtype);
  dls_status_t rc = dls__ext_copy_peer("copy", c->s, d->device, d->ptr, d->buf, s->device, s->ptr, bytes);
  if (rc == DLS_OK)
    dlspy_call_record_use(c, d, DLS_ACCESS_WRITE);
  return finish(c, rc);
}

PyObject *dlspy_copy(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "copy";
  dlspy_state *st = dlspy_state_of_module(module);
  static const char *const names[] = {"dst", "src", "stream", NULL};
  PyObject *a[3];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 2, a) != 0)
    return NULL;
  if (a[0] == NULL || a[1] == NULL)
    return dlspy_type_error(st, "copy() takes dst and src");
  static const dlspy_call_desc call_desc = {names, 0, true, DLSPY_HINT_WRITES, NULL};
  dlspy_call c;
  dlspy_call_init(&c, st, pycall, &call_desc, ~(uint64_t)0);
  if (dlspy_call_begin(&c, a[2], NULL, a, 2) != 0)
    return NULL;
  dlspy_view d, s;
  int rc = tensor_arg(&c, a[0], 0, false, true, &d);
  if (rc == 0 && (rc = dlspy_call_peer_tensor(&c, a[1], 1, &s)) > 0)
    rc = dlspy_call_not_tensor(&c, a[1], 1, "a tensor (any DLPack producer)");
  if (rc != 0) {
    dlspy_call_end(&c, false);
    return NULL;
  }
  const DLDevice sdev = c.sdev;
  if (s.device.device_type == sdev.device_type &&
      (s.device.device_id != sdev.device_id || d.device.device_id != sdev.device_id))
    return copy_between_devices(&c, a, &d, &s);
  const char *why = NULL;
  if (!d.has_meta || !s.has_meta)
    why = "at most 8 dimensions";
  else if (d.ndim != s.ndim || memcmp(d.shape, s.shape, (size_t)d.ndim * sizeof d.shape[0]) != 0)
    why = "dst and src must have one shape";
  if (why != NULL) {
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "copy(dst=%R, src=%R): %s", a[0], a[1], why);
    dlspy_call_end(&c, false);
    return NULL;
  }
  /* Between dtypes: NumPy's same_kind casting (np.copyto's default), or the cast is refused naming both. */
  dls_status_t cast = dls__cast_check(pycall, d.dtype, s.dtype);
  if (cast != DLS_OK || d.count == 0)
    return finish(&c, cast);
  dls_convert_desc_t desc;
  memset(&desc, 0, sizeof desc);
  desc.ndim = (uint32_t)d.ndim;
  desc.dst_dtype = d.dtype;
  desc.src_dtype = s.dtype;
  for (int i = 0; i < d.ndim; i++) {
    desc.shape[i] = d.shape[i];
    desc.dst_strides[i] = d.strides[i];
    desc.src_strides[i] = s.strides[i];
  }
  if (memcmp(&d.dtype, &s.dtype, sizeof d.dtype) != 0)
    return finish(&c, dls_copy_convert(c.stream, d.arg, s.arg, &desc));
  dls_copy_desc_t bits; /* one dtype: a copy of its bits */
  memset(&bits, 0, sizeof bits);
  bits.ndim = desc.ndim;
  bits.elem_size = (uint32_t)dls_dtype_size(d.dtype);
  memcpy(bits.shape, desc.shape, sizeof bits.shape);
  memcpy(bits.dst_strides, desc.dst_strides, sizeof bits.dst_strides);
  memcpy(bits.src_strides, desc.src_strides, sizeof bits.src_strides);
  return finish(&c, dls_copy_strided(c.stream, d.arg, s.arg, &bits));
}

PyObject *dlspy_spin(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "spin";
  dlspy_state *st = dlspy_state_of_module(module);
  static const char *const names[] = {"seconds", "stream", "device", NULL};
  PyObject *a[3];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 1, a) != 0)
    return NULL;
  if (a[0] == NULL)
    return dlspy_type_error(st, "spin() missing its argument 'seconds'");
  double secs;
  if (dlspy_as_double(st, a[0], pycall, "seconds", &secs) != 0)
    return NULL;
  if (!(secs >= 0 && secs <= 3600))
    return dlspy_range_error(st, "spin(seconds=%R): out of range: a spin lasts 0 to 3600 seconds", a[0]);
  DLDevice dev;
  bool have_dev = a[2] != NULL && a[2] != Py_None;
  if (have_dev && dlspy_parse_device(st, a[2], pycall, &dev) != 0)
    return NULL;
  dlspy_call c;
  dlspy_call_init(&c, st, pycall, &dlspy_call_plain, ~(uint64_t)0);
  if (dlspy_call_begin(&c, a[1], have_dev ? &dev : NULL, NULL, 0) != 0)
    return NULL;
  return finish(&c, dls_spin(c.stream, (uint64_t)(secs * 1e9)));
}

/* ---- latches ---- */

typedef struct LatchObject {
  PyObject_HEAD
  dls_latch_t handle;
  DLDevice device;
} LatchObject;

static PyObject *latch_tp_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
  dlspy_state *st = dlspy_state_of(tp);
  static char *kwlist[] = {"device", NULL};
  PyObject *dev_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Latch", kwlist, &dev_obj))
    return NULL;
  DLDevice dev;
  if (dlspy_check_runtime(st, "Latch") != 0 || dlspy_parse_device(st, dev_obj, "Latch", &dev) != 0)
    return NULL;
  LatchObject *l = (LatchObject *)tp->tp_alloc(tp, 0);
  if (l == NULL)
    return NULL;
  l->device = dev;
  dls_status_t rc = dls_latch_create(dev, &l->handle);
  if (rc != DLS_OK) {
    Py_DECREF(l);
    return dlspy_raise(st, rc, "Latch");
  }
  return (PyObject *)l;
}

static void latch_dealloc(LatchObject *l) {
  PyTypeObject *tp = Py_TYPE(l);
  if (l->handle.id != 0 && !atomic_load(&dlspy_dead))
    (void)dls_latch_destroy(l->handle); /* opens it first: no stream stays held */
  tp->tp_free(l);
  Py_DECREF(tp);
}

static int latch_live(dlspy_state *st, LatchObject *l, const char *pycall) {
  if (l->handle.id == 0) {
    dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s: the latch was closed", pycall);
    return -1;
  }
  return dlspy_check_runtime(st, pycall);
}

static PyObject *latch_wait(LatchObject *l, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames) {
  static const char pycall[] = "Latch.wait";
  dlspy_state *st = PyType_GetModuleState(cls);
  static const char *const names[] = {"stream", "timeout", NULL};
  PyObject *a[2];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 1, a) != 0 || latch_live(st, l, pycall) != 0)
    return NULL;
  double timeout = 10.0;
  if (a[1] != NULL && a[1] != Py_None) {
    if (dlspy_as_double(st, a[1], pycall, "timeout", &timeout) != 0)
      return NULL;
    if (!(timeout > 0) || timeout > 3600)
      return dlspy_range_error(st, "%s(timeout=%R): out of range: a latch timeout is more than 0 and at most 3600 "
                                   "seconds",
                               pycall, a[1]);
  }
  dls_stream_t s;
  if (dlspy_stream_resolve(st, a[0], l->device, pycall, "stream", &s) != 0)
    return NULL;
  if (s.id == 0 && dlspy_context_stream(st, &s) != 0)
    return NULL;
  if (s.id == 0 && dlspy_default_stream(st, l->device, pycall, &s) != 0)
    return NULL;
  if (latch_live(st, l, pycall) != 0) /* again: the stream's __cuda_stream__ may have closed the latch */
    return NULL;
  dls_status_t rc = dls_latch_wait(l->handle, s, (uint64_t)(timeout * 1e9));
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  Py_RETURN_NONE;
}

static PyObject *latch_open(LatchObject *l, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  if (latch_live(st, l, "Latch.open") != 0)
    return NULL;
  dls_status_t rc = dls_latch_open(l->handle);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "Latch.open");
  Py_RETURN_NONE;
}

static PyObject *latch_check(LatchObject *l, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
  dlspy_state *st = PyType_GetModuleState(cls);
  if (latch_live(st, l, "Latch.check") != 0)
    return NULL;
  dls_status_t rc = dls_latch_status(l->handle);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "Latch.check");
  Py_RETURN_NONE;
}

static PyObject *latch_get_timed_out(LatchObject *l, void *c) {
  if (l->handle.id == 0 || atomic_load(&dlspy_dead))
    Py_RETURN_FALSE;
  return PyBool_FromLong(dls_latch_status(l->handle) == DLS_ERR_TIMEOUT);
}

static PyObject *latch_get_device(LatchObject *l, void *c) { return dlspy_device_str(l->device); }
static PyObject *latch_get_handle(LatchObject *l, void *c) { return PyLong_FromUnsignedLongLong(l->handle.id); }

static PyObject *latch_close(LatchObject *l, PyObject *unused) {
  if (l->handle.id != 0) {
    dls_latch_t h = l->handle;
    l->handle.id = 0;
    if (!atomic_load(&dlspy_dead))
      (void)dls_latch_destroy(h);
  }
  Py_RETURN_NONE;
}

static PyObject *latch_enter(PyObject *l, PyObject *unused) { return Py_NewRef(l); }
static PyObject *latch_exit(LatchObject *l, PyObject *const *args, Py_ssize_t nargs) { return latch_close(l, NULL); }

static PyMethodDef latch_methods[] = {
    {"wait", (PyCFunction)(void (*)(void))latch_wait, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "wait($self, stream=None, *, timeout=10.0)\n--\n\nQueues a wait: the stream is held until open(), or gives up after "
     "`timeout` seconds and marks the latch timed out."},
    {"open", (PyCFunction)(void (*)(void))latch_open, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "open($self, /)\n--\n\nReleases every queued and future wait."},
    {"check", (PyCFunction)(void (*)(void))latch_check, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "check($self, /)\n--\n\nRaises TimedOutError if a wait gave up before open()."},
    {"close", (PyCFunction)latch_close, METH_NOARGS, "close($self, /)\n--\n\nOpens the latch, then frees it once its waits pass."},
    {"__enter__", latch_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))latch_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef latch_getset[] = {
    {"timed_out", (getter)latch_get_timed_out, NULL, "Whether a wait gave up before open().", NULL},
    {"device", (getter)latch_get_device, NULL, "The device.", NULL},
    {"handle", (getter)latch_get_handle, NULL, "The dlstream handle (0 once closed).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot latch_slots[] = {
    {Py_tp_doc, "Latch(device=None)\n--\n\nA host-controlled gate: streams that wait() on it are held until open(). "
                "Tests use it to make ordering observable."},
    {Py_tp_new, latch_tp_new},
    {Py_tp_dealloc, latch_dealloc},
    {Py_tp_methods, latch_methods},
    {Py_tp_getset, latch_getset},
    {0, NULL},
};

PyType_Spec dlspy_latch_spec = {
    .name = "dlstream.Latch",
    .basicsize = sizeof(LatchObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = latch_slots,
};
