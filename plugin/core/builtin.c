/* SPDX-License-Identifier: Apache-2.0 */
/* Built-in kernels (fill, axpy, strided copy, spin) and latches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The built-ins by index: the launches below name theirs without a string compare. */
enum { BI_FILL, BI_AXPY_F32, BI_AXPY_F64, BI_COPY_STRIDED, BI_SPIN, BI_LATCH, BI_EMPTY, DLS__NBUILTIN };
static const char *const g_builtin_names[DLS__NBUILTIN] = {"dls_fill",         "dls_axpy_f32", "dls_axpy_f64",
                                                           "dls_copy_strided", "dls_spin",     "dls_latch",
                                                           "dls_empty"};
_Static_assert(DLS__NBUILTIN <= 8, "dls__device.builtins has 8 slots");

static pthread_mutex_t g_builtin_mu = PTHREAD_MUTEX_INITIALIZER;

/* Built-in number k of a device, made at its first use. */
static dls_status_t builtin_at(dls__device *dev, size_t k, const char *call, dls__function **out) {
  const char *name = g_builtin_names[k];
  dls__function *f = __atomic_load_n(&dev->builtins[k], __ATOMIC_ACQUIRE);
  if (DLS__LIKELY(f != NULL)) {
    *out = f;
    return DLS_OK;
  }
  pthread_mutex_lock(&g_builtin_mu);
  f = dev->builtins[k];
  if (f == NULL) {
    void *native;
    dls_status_t st = dev->be->builtin_function(dev->id, name, &native);
    if (st != DLS_OK) {
      pthread_mutex_unlock(&g_builtin_mu);
      return dls__fail_prefix(st, "%s(\"%s\" on %s)", call, name, dev->name);
    }
    f = dls__calloc(1, sizeof *f);
    if (f == NULL) {
      pthread_mutex_unlock(&g_builtin_mu);
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
    }
    f->dev = dev;
    f->native = native;
    f->builtin = true;
    snprintf(f->name, sizeof f->name, "%s", name);
    f->id = dls__handle_new(DLS_HANDLE_FUNCTION, f);
    if (f->id == 0) {
      dls__free(f);
      pthread_mutex_unlock(&g_builtin_mu);
      return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
    }
    atomic_fetch_add(&dls__owned_handles[DLS_HANDLE_FUNCTION], 1);
    __atomic_store_n(&dev->builtins[k], f, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_builtin_mu);
  *out = f;
  return DLS_OK;
}

dls_status_t dls__builtin(dls__device *dev, const char *name, const char *call, dls__function **out) {
  size_t k = 0;
  while (k < DLS__NBUILTIN && strcmp(g_builtin_names[k], name) != 0)
    k++;
  if (k == DLS__NBUILTIN)
    return dls__fail(DLS_ERR_NOT_FOUND,
                     "%s(name=\"%s\"): no such built-in (dls_fill, dls_axpy_f32, dls_axpy_f64, dls_copy_strided, "
                     "dls_spin, dls_latch, dls_empty)",
                     call, name);
  return builtin_at(dev, k, call, out);
}

static void drop_builtins(dls__device *dev) {
  for (size_t k = 0; k < DLS__NBUILTIN; k++) {
    dls__function *f = dev->builtins[k];
    if (f != NULL) {
      atomic_fetch_sub(&dls__owned_handles[DLS_HANDLE_FUNCTION], 1);
      dev->builtins[k] = NULL;
      (void)dls__handle_end(DLS_HANDLE_FUNCTION, f->id); /* its drop frees it */
    }
  }
}

void dls__builtins_shutdown(void) { dls__each_device(drop_builtins); }

dls_status_t dls_builtin_function(DLDevice device, const char *name, dls_function_t *out_function) {
  static const char call[] = "dls_builtin_function";
  DLS__ENTER(call);
  if (out_function == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_function=NULL): output pointer is NULL", call);
  out_function->id = 0;
  if (name == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(name=NULL): no built-in named", call);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  dls__function *f;
  DLS__TRY(dls__builtin(dev, name, call, &f));
  out_function->id = f->id;
  return DLS_OK;
}

/* ---- bounds of memory arguments ---- */

/* Checks that bytes [lo, hi) relative to the argument's address fall inside
 * its buffer (buffers and tensors only; raw pointers are the caller's word). */
static dls_status_t check_span(const char *call, const char *arg, dls_arg_t a, int64_t lo, int64_t hi) {
  dls__buffer *b = NULL;
  char *base = NULL;
  dls_status_t st;
  DLS__HOLD_VAR(held);
  if (a.kind == DLS_ARG_BUFFER) {
    b = dls__hold_get(&held, DLS_HANDLE_BUFFER, a.v.buffer.id, call, arg, &st);
    if (b == NULL)
      return st;
    base = b->ptr;
  } else if (a.kind == DLS_ARG_TENSOR || a.kind == DLS_ARG_TENSOR_IN) {
    dls__tensor *t = dls__hold_get(&held, DLS_HANDLE_TENSOR, a.v.tensor.id, call, arg, &st);
    if (t == NULL)
      return st;
    b = t->buf;
    base = t->dl.data == NULL ? NULL : (char *)t->dl.data + t->dl.byte_offset;
  } else if (a.kind == DLS_ARG_PTR) {
    if (a.v.ptr == NULL && hi > lo)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(%s=NULL): NULL pointer for %lld bytes", call, arg,
                       (long long)(hi - lo));
    return DLS_OK;
  } else {
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(%s.kind=%d): memory argument must be a buffer, tensor or pointer (dls_arg_buffer, "
                     "dls_arg_tensor, dls_arg_ptr)",
                     call, arg, (int)a.kind);
  }
  if (hi <= lo)
    return DLS_OK;
  int64_t start = (int64_t)(base - (char *)b->ptr);
  if (base == NULL || start + lo < 0 || start + hi > (int64_t)b->size)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(%s): needs bytes [%lld, %lld) from its start, but only %lld..%lld lie in its memory", call,
                     arg, (long long)lo, (long long)hi, (long long)-start, (long long)((int64_t)b->size - start));
  return DLS_OK;
}

static dls_status_t builtin_launch(const char *call, dls_stream_t stream, size_t k, uint64_t n, const dls_arg_t *args,
                                   size_t nargs) {
  DLS__GET_STREAM(s, stream, call, "stream");
  dls__function *f;
  DLS__TRY(builtin_at(s->dev, k, call, &f));
  uint64_t blocks = n == 0 ? 1 : (n + 255) / 256;
  if (blocks > 4096)
    blocks = 4096; /* the kernels loop over the rest */
  dls_launch_config_t cfg = dls_config_1d((uint32_t)blocks, n == 0 ? 1 : 256);
  return dls__launch(call, f, s, &cfg, args, nargs);
}

static int mul_overflows(uint64_t a, uint64_t b, uint64_t *out) {
  if (a != 0 && b > UINT64_MAX / a)
    return 1;
  *out = a * b;
  return *out > (uint64_t)INT64_MAX;
}

dls_status_t dls_fill(dls_stream_t stream, dls_arg_t dst, uint64_t count, uint32_t elem_size, const void *value) {
  static const char call[] = "dls_fill";
  DLS__ENTER(call);
  if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(elem_size=%u): must be 1, 2, 4 or 8", call, elem_size);
  if (value == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(value=NULL): no fill value", call);
  uint64_t bytes;
  if (mul_overflows(count, elem_size, &bytes))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(count=%llu, elem_size=%u): size overflows", call,
                     (unsigned long long)count, elem_size);
  DLS__TRY(check_span(call, "dst", dst, 0, (int64_t)bytes));
  uint64_t pattern = 0;
  memcpy(&pattern, value, elem_size);
  dls_arg_t args[4] = {dst, dls_arg_u64(count), dls_arg_u32(elem_size), dls_arg_u64(pattern)};
  return builtin_launch(call, stream, BI_FILL, count, args, 4);
}

static dls_status_t axpy(const char *call, size_t k, dls_stream_t stream, uint64_t n, dls_arg_t a, dls_arg_t x,
                         dls_arg_t y, uint32_t elem) {
  DLS__ENTER(call);
  uint64_t bytes;
  if (mul_overflows(n, elem, &bytes))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(n=%llu): size overflows", call, (unsigned long long)n);
  DLS__TRY(check_span(call, "x", x, 0, (int64_t)bytes));
  DLS__TRY(check_span(call, "y", y, 0, (int64_t)bytes));
  dls_arg_t args[4] = {dls_arg_u64(n), a, x, y};
  return builtin_launch(call, stream, k, n, args, 4);
}

dls_status_t dls_axpy_f32(dls_stream_t stream, uint64_t n, float a, dls_arg_t x, dls_arg_t y) {
  return axpy("dls_axpy_f32", BI_AXPY_F32, stream, n, dls_arg_f32(a), x, y, 4);
}

dls_status_t dls_axpy_f64(dls_stream_t stream, uint64_t n, double a, dls_arg_t x, dls_arg_t y) {
  return axpy("dls_axpy_f64", BI_AXPY_F64, stream, n, dls_arg_f64(a), x, y, 8);
}

/* Byte range [lo, hi) a strided view touches, relative to its first element. */
static dls_status_t view_span(const char *call, const char *which, const dls_copy_desc_t *d, const int64_t *strides,
                              int64_t *lo, int64_t *hi) {
  __int128 min = 0, max = 0;
  for (uint32_t i = 0; i < d->ndim; i++) {
    if (d->shape[i] == 0) {
      *lo = *hi = 0;
      return DLS_OK;
    }
    __int128 reach = (__int128)(d->shape[i] - 1) * strides[i];
    if (reach < 0)
      min += reach;
    else
      max += reach;
  }
  min *= d->elem_size;
  max = (max + 1) * d->elem_size;
  if (min < INT64_MIN / 2 || max > INT64_MAX / 2)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc): the %s view's extent overflows", call, which);
  *lo = (int64_t)min;
  *hi = (int64_t)max;
  return DLS_OK;
}

dls_status_t dls_copy_strided(dls_stream_t stream, dls_arg_t dst, dls_arg_t src, const dls_copy_desc_t *desc) {
  static const char call[] = "dls_copy_strided";
  DLS__ENTER(call);
  if (desc == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc=NULL): no copy descriptor", call);
  if (desc->ndim > DLS_COPY_MAX_DIMS)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc.ndim=%u): at most %d dimensions", call, desc->ndim,
                     DLS_COPY_MAX_DIMS);
  if (desc->elem_size == 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc.elem_size=0): elements must have a size", call);
  uint64_t count = 1;
  for (uint32_t i = 0; i < desc->ndim; i++) {
    if (desc->shape[i] < 0)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc.shape[%u]=%lld): extents must be >= 0", call, i,
                       (long long)desc->shape[i]);
    if (mul_overflows(count, (uint64_t)desc->shape[i], &count))
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc.shape): element count overflows", call);
  }
  int64_t lo, hi;
  DLS__TRY(view_span(call, "dst", desc, desc->dst_strides, &lo, &hi));
  DLS__TRY(check_span(call, "dst", dst, lo, hi));
  DLS__TRY(view_span(call, "src", desc, desc->src_strides, &lo, &hi));
  DLS__TRY(check_span(call, "src", src, lo, hi));
  dls_arg_t args[3] = {dst, src, dls_arg_bytes(desc, sizeof *desc)};
  return builtin_launch(call, stream, BI_COPY_STRIDED, count, args, 3);
}

dls_status_t dls_spin(dls_stream_t stream, uint64_t nanoseconds) {
  static const char call[] = "dls_spin";
  DLS__ENTER(call);
  dls_arg_t args[1] = {dls_arg_u64(nanoseconds)};
  return builtin_launch(call, stream, BI_SPIN, 0, args, 1);
}

/* ---- latches ---- */

typedef struct dls__latch {
  dls__device *dev;
  dls__buffer *mem;     /* borrowed view of the mapped words; its release frees them */
  uint32_t *host;       /* [0] flag, [1] timed out */
  uint32_t *device;     /* the same words as the device sees them */
  uint64_t id;
  atomic_bool holding;  /* counted in dls__latches_holding: waited on, not opened yet */
} dls__latch;

_Atomic int dls__latches_holding;

/* The latch is waited on: it holds a stream until it is opened. */
static void latch_hold(dls__latch *l) {
  if (!atomic_exchange(&l->holding, true))
    atomic_fetch_add(&dls__latches_holding, 1);
}

/* Opened or destroyed: it holds nothing from now on. */
static void latch_let_go(dls__latch *l) {
  if (atomic_exchange(&l->holding, false))
    atomic_fetch_sub(&dls__latches_holding, 1);
}

typedef struct dls__mapped {
  dls__device *dev;
  void *host;
} dls__mapped;

static void mapped_release(void *user_data) {
  dls__mapped *m = user_data;
  m->dev->be->host_mapped_free(m->dev->id, m->host);
  dls__free(m);
}

dls_status_t dls_latch_create(DLDevice device, dls_latch_t *out_latch) {
  static const char call[] = "dls_latch_create";
  DLS__ENTER(call);
  if (out_latch == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_latch=NULL): output pointer is NULL", call);
  out_latch->id = 0;
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  dls__stream *none;
  st = dls__stream_default(dev, DLS__STREAM_NONE, &none);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(device=%s)", call, dev->name);
  dls__latch *l = dls__calloc(1, sizeof *l);
  dls__mapped *m = dls__calloc(1, sizeof *m);
  if (l == NULL || m == NULL) {
    dls__free(l);
    dls__free(m);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  }
  void *host, *dptr;
  st = dev->be->host_mapped_alloc(dev->id, 2 * sizeof(uint32_t), &host, &dptr);
  if (st != DLS_OK) {
    dls__free(l);
    dls__free(m);
    return dls__fail_prefix(st, "%s(device=%s)", call, dev->name);
  }
  m->dev = dev;
  m->host = host;
  st = dls__buffer_borrow(dev, dptr, 2 * sizeof(uint32_t), none, mapped_release, m, &l->mem);
  if (st != DLS_OK) {
    st = dls__fail_prefix(st, "%s(device=%s)", call, dev->name);
    mapped_release(m);
    dls__free(l);
    return st;
  }
  l->dev = dev;
  l->host = host;
  l->device = dptr;
  __atomic_store_n(&l->host[0], 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&l->host[1], 0u, __ATOMIC_RELEASE);
  l->id = dls__handle_new(DLS_HANDLE_LATCH, l);
  if (l->id == 0) {
    dls__buffer_unref(l->mem);
    dls__free(l);
    return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
  }
  out_latch->id = l->id;
  return DLS_OK;
}

#define DLS__GET_LATCH(var, handle, call, arg) DLS__GET(DLS_HANDLE_LATCH, dls__latch, var, handle, call, arg)

dls_status_t dls_latch_wait(dls_latch_t latch, dls_stream_t stream, uint64_t timeout_ns) {
  static const char call[] = "dls_latch_wait";
  DLS__ENTER(call);
  DLS__GET_LATCH(l, latch, call, "latch");
  DLS__GET_STREAM(s, stream, call, "stream");
  if (s->dev != l->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: latch is on %s but stream is on %s", call, l->dev->name,
                     s->dev->name);
  if (timeout_ns == 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(timeout_ns=0): a latch wait needs a timeout", call);
  uint64_t cap = 0;
  if (dls__stream_capture(s, &cap) != DLS__CAPTURE_NONE) {
    char d[128];
    return dls__fail(DLS_ERR_STATE,
                     "%s: %s: a latch is opened by the host once, but a graph replays its wait every time; "
                     "latches are refused in captures (nothing was queued, the capture is still valid)",
                     call, dls__stream_describe(s, cap, d, sizeof d));
  }
  dls__function *f;
  DLS__TRY(builtin_at(s->dev, BI_LATCH, call, &f));
  dls_arg_t args[3] = {dls_arg_ptr(l->device), dls_arg_u64(timeout_ns), dls_arg_ptr(l->device + 1)};
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  dls_status_t st = dls__buffer_reserve(l->mem, s);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s", call);
  DLS__TRY(dls__launch(call, f, s, &cfg, args, 3));
  latch_hold(l);
  if (__atomic_load_n(&l->host[0], __ATOMIC_ACQUIRE) != 0)
    latch_let_go(l); /* opened already, or meanwhile by another thread */
  /* The flag memory is freed only after every stream that waited passes. */
  st = dls__buffer_use(l->mem, s);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_latch_open(dls_latch_t latch) {
  static const char call[] = "dls_latch_open";
  DLS__ENTER(call);
  DLS__GET_LATCH(l, latch, call, "latch");
  __atomic_store_n(&l->host[0], 1u, __ATOMIC_RELEASE);
  latch_let_go(l);
  return DLS_OK;
}

dls_status_t dls_latch_status(dls_latch_t latch) {
  static const char call[] = "dls_latch_status";
  DLS__ENTER(call);
  DLS__GET_LATCH(l, latch, call, "latch");
  if (__atomic_load_n(&l->host[1], __ATOMIC_ACQUIRE) != 0)
    return dls__fail(DLS_ERR_TIMEOUT, "%s: a wait on the latch timed out before it was opened (its stream went on)",
                     call);
  return DLS_OK;
}

dls_status_t dls_latch_destroy(dls_latch_t latch) {
  static const char call[] = "dls_latch_destroy";
  if (latch.id == 0)
    return DLS_OK;
  DLS__ENTER(call);
  DLS__GET_LATCH(l, latch, call, "latch");
  /* Opened at once: no stream waits on a latch nobody can open any more. */
  __atomic_store_n(&l->host[0], 1u, __ATOMIC_RELEASE);
  latch_let_go(l);
  DLS__END(DLS_HANDLE_LATCH, latch, call, "latch");
  return DLS_OK;
}

void dls__latch_drop(void *obj) {
  dls__latch *l = obj;
  latch_let_go(l);
  dls__buffer_unref(l->mem);
  dls__free(l);
}
