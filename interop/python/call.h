/* SPDX-License-Identifier: Apache-2.0 */
/* A call of the extension and its arguments: tensor types, the array interface, CuPy arrays read in C, the call's
 * stream and each tensor argument as the kernel sees it (the handshake: handshake.c, tensorarg.c, cai.c, cupyarg.c,
 * tensortypes.c). Included by dlspy.h. */
#ifndef DLSTREAM_PY_CALL_H
#define DLSTREAM_PY_CALL_H

#include "dlspy.h"

/* ---- the argument handshake (handshake.c) ---- */

/* ---- tensor types (tensortypes.c) ---- */
/* Looks `tp` up and adds its entry (never NULL; valid until the next lookup of a new type). */
const dlspy_type_entry *dlspy_type_info_new(dlspy_state *st, PyTypeObject *tp);
/* What dlstream knows of `tp`, from the per-type cache (never NULL; valid until the next lookup of a new type, which
 * Python code run meanwhile may make: callers that call out copy the entry). */
static inline const dlspy_type_entry *dlspy_type_info(dlspy_state *st, PyTypeObject *tp) {
  for (int i = 0; i < st->types_n; i++)
    if (st->types[i].type == tp)
      return &st->types[i];
  return dlspy_type_info_new(st, tp);
}
/* The exchange API of a type, from the per-type cache (NULL: none). */
static inline const DLPackExchangeAPI *dlspy_xapi_of(dlspy_state *st, PyTypeObject *tp) {
  return dlspy_type_info(st, tp)->api;
}
/* Remembers that `tp`'s __cuda_array_interface__ is not worth reading (see dlspy_type_entry.cai_skip). */
void dlspy_type_skip_cai(dlspy_state *st, PyTypeObject *tp);
void dlspy_type_cache_clear(dlspy_state *st);
/* Calls `provider(obj)` and resolves its result (a stream-like or None: *out {0}) on `home`; a stream of
 * another device is refused. Returns 0, or -1 with an exception. */
int dlspy_provider_stream(dlspy_state *st, PyObject *provider, PyObject *obj, DLDevice home, const char *pycall,
                          const char *arg, dls_stream_t *out);
PyObject *dlspy_mod_register_stream_provider(PyObject *m, PyObject *const *args, Py_ssize_t nargs,
                                             PyObject *kwnames);
PyObject *dlspy_mod_stream_providers(PyObject *m, PyObject *unused);

/* ---- __cuda_array_interface__ (cai.c) ---- */
typedef struct dlspy_cai {
  PyObject *stream;                         /* the producer's stream (an int > 0), or NULL: nothing to wait for */
  bool read_only;
  bool meta;                                /* dtype, shape and strides read (a CuPy read for a launch reads only
                                               the pointer and the device) */
  int version;
  DLTensor dl;                              /* strides in elements (NULL: compact); device set by the reader */
  int64_t shape[DLS__EXT_MAX_NDIM];
  int64_t strides[DLS__EXT_MAX_NDIM];
} dlspy_cai;
/* Reads an interface dict `d` of argument `arg` into `out` (dlspy_cai_clear releases it, also after a failure).
 * Refusals: version above 3, a mask, big-endian or unknown typestr, strides that are not whole elements, a
 * stream before version 3 or not a stream value. Returns 0, or -1 with an exception. */
int dlspy_cai_read(dlspy_state *st, PyObject *d, DLDevice device, const char *pycall, const char *arg,
                   dlspy_cai *out);
void dlspy_cai_clear(dlspy_cai *cai);
/* A NumPy kind ('b', 'i', 'u', 'f', 'c') and item size in bytes as a DLPack dtype; false for those dlstream does
 * not read (bool b1, int and uint 1-8, float 2-8, complex 8-16). */
bool dlspy_dtype_of_kind(char kind, long size, DLDataType *out);

/* ---- CuPy arrays read in C (cupyarg.c) ---- */
/* Whether `tp` is CuPy's ndarray (or a subclass) and `provider`, the one registered for it, is the package's
 * CuPy provider, which the C path stands in for. Probes CuPy at the first such type. */
bool dlspy_cupy_type(dlspy_state *st, PyTypeObject *tp, PyObject *provider);
/* Reads a CuPy array's data pointer and device into out->dl (with want_meta also its dtype, shape and strides in
 * elements; out->meta says which). Returns 0; 1 when the C path cannot read it (nothing raised: the general path
 * takes it, and its messages); -1 with an exception. */
int dlspy_cupy_read(dlspy_state *st, PyObject *obj, bool want_meta, dlspy_cai *out);
/* Drops what was probed (register_stream_provider and _clear_caches probe again). */
void dlspy_cupy_clear(dlspy_state *st);
/* _set_cupy_provider(fn): the package names its CuPy provider. */
PyObject *dlspy_mod_set_cupy_provider(PyObject *m, PyObject *fn);
/* What to do once a launch was queued (or failed) for one argument. */
enum {
  DLSPY_POST_KEEP = 1,
  DLSPY_POST_MANAGED_V,
  DLSPY_POST_MANAGED_L,
  DLSPY_POST_STAGE,
  DLSPY_POST_USE, /* a dlstream buffer held by the call, used by raw-pointer work: its use is recorded at the end */
  DLSPY_POST_HOLD /* a dlstream buffer held by the call (its tensor may be closed meanwhile by Python code) */
};
typedef struct dlspy_post {
  int kind;
  PyObject *obj;        /* KEEP: strong reference held until the stream passes */
  dls__buffer *buf;     /* USE, HOLD: a dlstream tensor's buffer (reference held) */
  int mode;             /* USE: how the work used it (DLS_ACCESS_READ / DLS_ACCESS_WRITE) */
  void *managed;        /* MANAGED_*: the consumed DLPack tensor (deleter runs once) */
  int release_kind;     /* STAGE: how `managed` is released (MANAGED_V / MANAGED_L / KEEP) */
  dls__buffer *tmp;     /* STAGE: the stream-ordered temporary */
  void *host_lo;        /* STAGE: host bytes copied in (and back) */
  size_t span;
  bool copy_back;
} dlspy_post;

#define DLSPY_MAX_POSTS DLS_MAX_ARGS

/* A tensor argument as the kernel sees it. */
typedef struct dlspy_view {
  void *ptr;            /* first element, as the launch stream's device addresses it */
  DLDevice device;      /* where the memory lives (home device) */
  DLDataType dtype;
  int32_t ndim;
  int64_t shape[DLS_COPY_MAX_DIMS];
  int64_t strides[DLS_COPY_MAX_DIMS]; /* elements */
  bool contiguous;
  bool has_meta;        /* shape/strides filled (ndim <= DLS_COPY_MAX_DIMS) */
  uint64_t count;
  dls_arg_t arg;        /* what to pass: a pointer, or a dlstream tensor handle */
  dls__buffer *buf;     /* a dlstream tensor's buffer, held by the call until its end (NULL: another framework's) */
} dlspy_view;

typedef struct dlspy_call {
  dlspy_state *st;
  const char *pycall;
  const char *const *names; /* the call's argument names ("dst" ...): messages say dst=, else args[i] */
  int hint;                 /* DLSPY_HINT_*: what a read-only refusal suggests */
  const char *writer;       /* DLSPY_HINT_WRITES: what writes the argument (NULL: the call) */
  PyObject *cause;          /* an exception a protocol getter raised while an argument was read (a strong
                               reference): the __cause__ of "expected a tensor", should it come to that */
  dls_stream_t stream;   /* the launch stream */
  dls__stream *s;        /* resolved; a reference is held while the call runs (when `counted`) */
  DLDevice sdev;         /* the device of `s` */
  bool counted;          /* `s` is no default stream: the call holds a reference on it */
  bool have_value;
  int64_t dlpack_value;  /* the launch stream's DLPack value (GPU only) */
  int nposts;
  bool staged;           /* some host array was staged: the call blocks */
  dls__stream *ordered[8]; /* producer streams already waited on */
  int nordered;
  const void *cur_api;      /* the last framework asked for its current stream (an exchange API, or &st->cupy) */
  DLDevice cur_dev;
  dls__stream *cur_stream;
  dls_stream_t cur_handle;  /* cur_stream named by a cached handle */
  dls__stream *cur_ref;     /* cur_stream when it is not the call's stream: a reference held (Python code run by
                               later arguments may drop the cache's handle) */
  PyObject *first_obj;      /* the tensor argument read by dlspy_call_begin ... */
  int first_kind;           /* ... through the exchange API (DLSPY_FIRST_XAPI) or its CUDA array interface */
  DLTensor first_dl;        /* ... and its view, so it is not read twice */
  uint64_t temp_handle;     /* a handle made for a stream that had none live (freed by dlspy_call_end) */
  dls__ext_extent *extents;     /* a launch of a built-in: each pointer argument's extent, for its checks (else NULL) */
  /* Set when the call runs on the current stream that the framework of its first tensor (an exchange API, or CuPy
   * read in C) names for that tensor's device: tensors of that type on that device need no ordering
   * (dlspy_call_fast_arg). */
  PyTypeObject *fast_type;
  const DLPackExchangeAPI *fast_api; /* NULL: CuPy */
  DLDevice fast_dev;
  /* The large parts last: a launch on the fast path touches only their first lines. */
  dlspy_cai first_cai;
  dlspy_post posts[DLSPY_MAX_POSTS];
} dlspy_call;
enum { DLSPY_FIRST_XAPI = 1, DLSPY_FIRST_CAI, DLSPY_FIRST_CUPY };
/* What a read-only tensor where the kernel may write suggests: nothing (a built-in that writes the argument),
 * declaring a signature (Function.launch without one), or 'cp' in place of 'p' (a signature says 'p'). */
enum { DLSPY_HINT_WRITES = 0, DLSPY_HINT_NO_SIGNATURE, DLSPY_HINT_SIGNATURE };
/* "dst" (the call's names) or "args[3]". */
const char *dlspy_argname(const dlspy_call *c, int index, char *buf, size_t size);
/* The same as an expression (its buffer lives as long as the enclosing block). */
#define DLSPY_ARG(c, i) dlspy_argname((c), (i), (char[24]){0}, 24)
/* Keeps the exception set now (a protocol getter's failure that was not fatal) as the call's cause. */
void dlspy_call_note_cause(dlspy_call *c);
/* Raises "<call>(<arg>=<repr>): expected <what>", with the call's noted cause as __cause__; returns -1. */
int dlspy_call_not_tensor(dlspy_call *c, PyObject *obj, int index, const char *what);

/* Picks the stream of a call: explicit `stream` (may be NULL/None), the use_stream context, else what the first
 * tensor argument among `args` says: a dlstream.Tensor its allocation (or producer) stream; another framework's
 * tensor its framework's current stream (the DLPack C exchange API, else a registered stream provider, else a
 * version-3 __cuda_array_interface__'s stream); else the legacy default stream of `device` (NULL: of the first
 * tensor's device). Host arrays decide only when no argument lives on a device. Takes a reference on the
 * resolved stream (dlspy_call_end drops it); on failure nothing is held. */
int dlspy_call_begin(dlspy_call *c, dlspy_state *st, const char *pycall, PyObject *stream, const DLDevice *device,
                     PyObject *const *args, Py_ssize_t nargs);
/* Resolves one tensor-like argument (a dlstream.Tensor, an exchange-API
 * object, any __dlpack__ producer, or a DLPack capsule) for the call's
 * stream. `readonly_ok` allows read-only tensors (never copied back).
 * `want_meta` fills shape and strides. Returns 0, 1 when `obj` is not
 * tensor-like (nothing raised), or -1 with an exception. */
int dlspy_call_tensor(dlspy_call *c, PyObject *obj, int index, bool readonly_ok, bool want_meta, dlspy_view *out);
/* Like dlspy_call_tensor, for the source of a copy that may live on another device of the call's backend (a
 * peer copy reads it): the call's stream waits for the source's producer on its own device, and the source is
 * kept (or its use recorded) until the call's stream passes. A source on the call's device, or in host memory
 * for a GPU call, goes through dlspy_call_tensor. out->device is where the memory lives. */
int dlspy_call_peer_tensor(dlspy_call *c, PyObject *obj, int index, dlspy_view *out);
/* A launch's pointer argument: dlspy_call_tensor without the view, exchange-API tensors and CuPy arrays on the
 * call's device taken without a detour. Returns 0, 1 when `obj` is not tensor-like (nothing raised), -1. */
int dlspy_call_arg(dlspy_call *c, PyObject *obj, int index, bool readonly_ok, dls_arg_t *out);
/* Notes that raw-pointer work on the call's stream uses the dlstream tensor of view `v` (launches through
 * dls_arg_tensor record it themselves): its use is recorded once the work is queued. No-op for other tensors. */
void dlspy_call_record_use(dlspy_call *c, const dlspy_view *v, int mode);

/* dlspy_call_end when there is more to do than dropping the stream reference. */
int dlspy_call_end_slow(dlspy_call *c, bool ok);
/* After the launch was queued (ok) or refused (!ok): keeps borrowed objects
 * alive until the stream passes, copies staged arrays back and blocks, drops
 * the stream reference. Returns 0, or -1 with an exception. */
static inline int dlspy_call_end(dlspy_call *c, bool ok) {
  if (DLSPY_LIKELY(c->s != NULL && c->nposts == 0 && !c->staged && c->temp_handle == 0 &&
                  c->first_cai.stream == NULL && c->cause == NULL && c->cur_ref == NULL)) {
    if (c->counted)
      dls__ext_stream_unref(c->s);
    c->s = NULL;
    c->first_obj = NULL;
    return 0;
  }
  return dlspy_call_end_slow(c, ok);
}
/* dlspy_call_fast_arg for a CuPy array (cupyarg.c). */
int dlspy_cupy_fast_arg(dlspy_call *c, PyObject *o, dls_arg_t *out);
/* Raises for an exchange-API framework that could not describe argument `arg` of `pycall` (unless it raised);
 * returns -1. */
int dlspy_xapi_failed(dlspy_state *st, const char *pycall, const char *arg);
/* Raises ReadOnlyError for a read-only tensor argument where the call may write, with the hint that fits what the
 * user wrote (c->hint); `how` says how it is read-only. Returns -1. */
int dlspy_read_only(dlspy_call *c, int index, const char *how);
/* Raises for a framework whose current_work_stream(dev) failed (unless it raised); returns -1. */
int dlspy_framework_current_failed(dlspy_state *st, const char *pycall, DLDevice dev);
/* An exchange-API framework's current stream of `dev` as its native handle; -1 with an exception when the
 * framework fails. */
static inline int dlspy_framework_current(dlspy_state *st, const char *pycall, const DLPackExchangeAPI *api,
                                          DLDevice dev, void **out_native) {
  *out_native = NULL;
  if (DLSPY_LIKELY(api->current_work_stream(dev.device_type, dev.device_id, out_native) == 0))
    return 0;
  return dlspy_framework_current_failed(st, pycall, dev);
}
/* Where a DLTensor view's data starts (NULL for no data). */
static inline void *dlspy_view_data(const DLTensor *dl) {
  return dl->data != NULL ? (char *)dl->data + dl->byte_offset : NULL;
}
/* The bytes [lo, hi) around its first element that a view reaches (what a built-in given its data pointer may
 * touch); lo > hi when it cannot be told. */
static inline dls__ext_extent dlspy_meta_extent(int32_t ndim, const int64_t *shape, const int64_t *strides,
                                            DLDataType dtype) {
  int64_t lo = 0, hi = 0, size = ((int64_t)dtype.bits * dtype.lanes + 7) / 8, stride = 1;
  for (int32_t i = ndim - 1; i >= 0; i--) {
    if (shape[i] == 0)
      return (dls__ext_extent){0, 0};
    int64_t st = strides != NULL ? strides[i] : stride;
    int64_t reach;
    if (__builtin_mul_overflow(shape[i] - 1, st, &reach) || __builtin_mul_overflow(reach, size, &reach) ||
        __builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi) ||
        __builtin_mul_overflow(stride, shape[i], &stride))
      return (dls__ext_extent){1, 0};
  }
  return (dls__ext_extent){lo, hi + size};
}
static inline dls__ext_extent dlspy_view_extent(const DLTensor *dl) {
  return dlspy_meta_extent(dl->ndim, dl->shape, dl->strides, dl->dtype);
}
/* Where a launch of a built-in wants them (c->extents), the extent of argument `index`. */
static inline void dlspy_note_extent(dlspy_call *c, int index, dls__ext_extent e) {
  if (c->extents != NULL)
    c->extents[index] = e;
}
/* A launch's pointer argument of the call's fast type (see dlspy_call.fast_type) on its device: the data pointer,
 * nothing to order (the call runs on the stream the framework names for it). 0 taken; 1 not this way (nothing
 * raised): dlspy_call_arg takes it; -1 with an exception. */
static inline int dlspy_call_fast_arg(dlspy_call *c, PyObject *o, int index, dls_arg_t *out) {
  if (Py_TYPE(o) != c->fast_type)
    return 1;
  if (c->fast_api == NULL)
    return dlspy_cupy_fast_arg(c, o, out);
  DLTensor dl;
  if (o == c->first_obj && c->first_kind == DLSPY_FIRST_XAPI)
    dl = c->first_dl;
  else if (c->fast_api->dltensor_from_py_object_no_sync(o, &dl) != 0)
    return dlspy_xapi_failed(c->st, c->pycall, DLSPY_ARG(c, index));
  if (dl.device.device_type != c->fast_dev.device_type || dl.device.device_id != c->fast_dev.device_id)
    return 1;
  *out = dls_arg_ptr(dlspy_view_data(&dl));
  if (DLSPY_UNLIKELY(c->extents != NULL))
    c->extents[index] = dlspy_view_extent(&dl);
  return 0;
}

/* obj.__dlpack__(stream=..., max_version=(1, 1)), falling back to the legacy
 * signatures on TypeError. `stream_value` is borrowed (Py_None for host
 * memory). Returns a new reference. */
PyObject *dlspy_call_dlpack(dlspy_state *st, PyObject *obj, PyObject *stream_value);
/* Takes the managed tensor out of a capsule named dltensor_versioned or
 * dltensor and renames it used_*. */
int dlspy_capsule_consume(dlspy_state *st, PyObject *cap, const char *pycall, void **out_managed, bool *out_versioned);
/* Calls a consumed managed tensor's deleter (with the GIL; never after shutdown). */
void dlspy_managed_release(void *managed, bool versioned);
/* obj.__dlpack_device__(); returns 1 (nothing raised) when obj has none. */
int dlspy_dlpack_device(dlspy_state *st, PyObject *obj, const char *pycall, DLDevice *out);

/* ---- what handshake.c, tensorarg.c and cai.c share ---- */
static inline bool dlspy_same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}
static inline bool dlspy_same_stream(const dls__stream *a, const dls__stream *b) {
  return a == b || dls__ext_stream_same(a, b);
}
/* Fills dtype, ndim, count, contiguity and (with want_meta, up to DLS_COPY_MAX_DIMS) shape and strides. */
void dlspy_view_meta(dlspy_view *v, const DLTensor *dl, bool want_meta);
/* Appends a post (obj: a reference the post owns; managed: a consumed DLPack tensor). */
int dlspy_add_post(dlspy_call *c, int kind, PyObject *obj, void *managed);
/* Remembers `s` (handle `h`) as the current stream `api` names for `dev` in this call. The call's own stream is held
 * by the call; another one is held here (cur_ref): a cached wrapper's handle may be dropped by Python code that
 * later arguments run (an eviction, _clear_caches), and the call goes on reading `s`. */
static inline void dlspy_call_set_current(dlspy_call *c, const void *api, DLDevice dev, dls__stream *s,
                                          dls_stream_t h) {
  dls__stream *ref = c->s != NULL && s != c->s ? s : NULL;
  if (DLSPY_UNLIKELY(ref != NULL))
    dls__ext_stream_ref(ref); /* a no-op on default streams */
  if (DLSPY_UNLIKELY(c->cur_ref != NULL))
    dls__ext_stream_unref(c->cur_ref);
  c->cur_ref = ref;
  c->cur_api = api;
  c->cur_dev = dev;
  c->cur_stream = s;
  c->cur_handle = h;
}
/* dlspy_framework_stream when the call has not asked `api` about `dev` yet. */
int dlspy_framework_stream_ask(dlspy_call *c, const DLPackExchangeAPI *api, DLDevice dev, dls__stream **out);
/* An exchange-API framework's current stream of `dev` (cached for the call). */
static inline int dlspy_framework_stream(dlspy_call *c, const DLPackExchangeAPI *api, DLDevice dev,
                                         dls__stream **out) {
  if (c->cur_api == (const void *)api && c->cur_dev.device_type == dev.device_type &&
      c->cur_dev.device_id == dev.device_id) {
    *out = c->cur_stream;
    return 0;
  }
  return dlspy_framework_stream_ask(c, api, dev, out);
}
/* CuPy's current stream of `home` (cached for the call, as dlspy_framework_stream). 1: the C path cannot ask
 * (nothing raised: the provider is asked instead). */
int dlspy_cupy_stream(dlspy_call *c, DLDevice home, dls__stream **out);
/* Makes the call's stream wait for `producer` (NULL: nothing to wait for) unless it is that stream, and keeps
 * `obj` until the call's stream passes. */
int dlspy_order_after(dlspy_call *c, dls__stream *producer, PyObject *obj);
/* The call stream's DLPack value as a new int. */
int dlspy_launch_value(dlspy_call *c, PyObject **out);
/* Reads obj's __cuda_array_interface__ into `out` when it has one worth reading: 1 read, 0 none (or only a
 * stream-less one while __dlpack__ orders it), -1 with an exception. */
int dlspy_read_cai(dlspy_call *c, PyObject *obj, int index, dlspy_cai *out);
/* Where an interface's memory lives: __dlpack_device__, else the call's GPU, else the default GPU. */
int dlspy_cai_device(dlspy_call *c, PyObject *obj, const DLDevice *call_dev, DLDevice *out);

/* Keeps `obj` (a new reference is taken) alive until work queued on `s` so far has passed. */
int dlspy_keep_until(dlspy_state *st, dls__stream *s, PyObject *obj);

#endif /* DLSTREAM_PY_CALL_H */
