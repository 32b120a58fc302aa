/* SPDX-License-Identifier: Apache-2.0 */
/* A call of the extension (call.c): its stream, what it must do once its work is queued (posts), the frameworks'
 * current streams it asked, and its arguments in messages. The stream choice is handshake.c's, the tensor
 * arguments tensorarg.c's. */
#ifndef DLSTREAM_PY_CALL_H
#define DLSTREAM_PY_CALL_H

#include "cai.h"

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
static inline bool dlspy_same_stream(const dls__stream *a, const dls__stream *b) {
  return a == b || dls__ext_stream_same(a, b);
}
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
