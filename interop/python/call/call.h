/* SPDX-License-Identifier: Apache-2.0 */
/* interop/python/call/: the call machinery of the extension, from a call's Python arguments to the launch.
 *
 *   Function.launch (launch.c)                     fill / axpy / copy ... (builtins.c), Tensor, Event ...
 *        | shaped like its last call?                    |
 *        v                                               v
 *   handshake.h  the read pass's common case --no--> handshake.c  the read pass's general way: the stream
 *     one loop over the arguments, each tensor         stream=, use_stream() (streamarg), else the first
 *     of the last type read into the table                tensor decides (decide_tensor/_xapi/_cupy/_other)
 *        |                                                 else the default stream (defaultstream)
 *        |        both ask current.h: what is this object's current stream (the one precedence order)
 *        v                                               |
 *   launchplan.h  the plan: a fit launches from       tensorarg.c  the conversion: each tensor from the table
 *     the table (dls__launch_params); else the          by protocol (exchange API, cupy, cai, protocol's
 *     general way goes on from the table  ------------>  __dlpack__), ordered after its producer (call.c),
 *                                                        a use where it aliases dlstream memory (alias)
 *                                                        |
 *                                                        v
 *                                                 dls__launch_ext; dlspy_call_end: the posts (call.c)
 *
 * Beside them: tensortypes (what each type is: kind, exchange API, stream provider), streamarg (stream values,
 * the wrapper cache and its memo), function (a Function's object and memo).
 *
 * This file: a call (call.c): its stream, what it must do once its work is queued (posts), the frameworks' current
 * streams it asked, and its arguments in messages. The stream choice is handshake.c's (each object's answer
 * current.h's), the tensor arguments tensorarg.c's. */
#ifndef DLSTREAM_PY_CALL_H
#define DLSTREAM_PY_CALL_H

#include "cai.h"
#include "current.h"

/* What to do once a launch was queued (or failed) for one argument. */
enum {
  DLSPY_POST_KEEP = 1,
  DLSPY_POST_MANAGED_V,
  DLSPY_POST_MANAGED_L,
  DLSPY_POST_STAGE,
  DLSPY_POST_USE, /* a dlstream buffer held by the call, used by raw-pointer work: its use is recorded at the end */
  DLSPY_POST_HOLD, /* a dlstream buffer held by the call (its tensor may be closed meanwhile by Python code) */
  DLSPY_POST_BLOCK /* a strong reference kept in the block's list until the block's stream passes (block.h) */
};
typedef struct dlspy_post {
  int kind;
  PyObject *obj;        /* KEEP, BLOCK: strong reference held until the stream passes */
  dls__buffer *buf;     /* USE, HOLD: a dlstream tensor's buffer (reference held) */
  int mode;             /* USE: how the work used it (DLS_ACCESS_READ / DLS_ACCESS_WRITE) */
  uint32_t epoch;       /* USE ordered before the work (dlspy_call_use): the state it was ordered against */
  bool ordered;         /* USE: ordered before the work (else noted as a declared use) */
  void *managed;        /* MANAGED_*: the consumed DLPack tensor (deleter runs once) */
  int release_kind;     /* STAGE: how `managed` is released (MANAGED_V / MANAGED_L / KEEP) */
  dls__buffer *tmp;     /* STAGE: the stream-ordered temporary */
  void *host_lo;        /* STAGE: host bytes copied in (and back) */
  size_t span;
  bool copy_back;
} dlspy_post;

/* Posts of a call: each tensor argument's object (KEEP, MANAGED_*, STAGE, HOLD or BLOCK) and its uses of recorded
 * memory (USE), which with the quick ones are at most DLSPY_MAX_USES (dls__ext_uses_note takes as many). */
#define DLSPY_MAX_USES DLS_MAX_ARGS
#define DLSPY_MAX_POSTS (2 * DLS_MAX_ARGS)

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

/* One argument of a call in its table (dlspy_call.args): what the one read of a tensor argument left. An entry is
 * filled where the read pass (dlspy_call_read) or, past its reach, the conversion first reads the argument, and
 * every later step takes it from there. Plain scalars (exact int, float, bool, None, bytes) get no entry. */
typedef struct dlspy_arg {
  void *ptr;   /* the first element's address: what a kernel is given for the tensor (the one place the call
                  knows a tensor argument's pointer) */
  DLTensor dl; /* XAPI: the framework's view (valid while the caller holds the object: the whole call);
                  CUPY: only dl.device (its data pointer is ptr) */
} dlspy_arg;

/* A tensor type whose tensors decided a call's stream and needed nothing more: an exchange-API type (`api`), whose
 * framework's current stream of `dev` (`home` as dlstream names it) the call ran on. */
typedef struct dlspy_last_type {
  PyTypeObject *type; /* NULL: none */
  const DLPackExchangeAPI *api;
  DLDevice dev, home;
} dlspy_last_type;

/* What a read-only tensor where the kernel may write suggests: nothing (a built-in that writes the argument),
 * declaring a signature (Function.launch without one), or 'cp' in place of 'p' (a signature says 'p'). */
enum { DLSPY_HINT_WRITES = 0, DLSPY_HINT_NO_SIGNATURE, DLSPY_HINT_SIGNATURE };

/* How a kind of call names its arguments and what it reads of them (one static description per kind; a Function
 * keeps its own). */
typedef struct dlspy_call_desc {
  const char *const *names; /* the argument names ("dst" ...): messages say dst=; NULL: args[i] */
  int base;                 /* the names' index of the table's first entry (axpy's table starts at x: 1) */
  bool views;               /* the call wants each tensor's view (shape, strides), not only its pointer */
  int hint;                 /* DLSPY_HINT_*: what a read-only refusal suggests */
  const char *writer;       /* DLSPY_HINT_WRITES: what writes the argument (NULL: the call) */
} dlspy_call_desc;
/* No names, the table from args[0], pointers only, nothing to suggest. */
extern const dlspy_call_desc dlspy_call_plain;

typedef struct dlspy_call {
  dlspy_state *st;
  const char *pycall;
  const dlspy_call_desc *desc; /* how it names its arguments, what it reads of them */
  uint64_t ptrslots;        /* bit i: a tensor is a tensor to the conversion of argument i (else a scalar slot) */
  /* Set by every read pass. */
  bool counted;          /* `s` is no default stream and the call holds a reference on it (dlspy_call_hold) */
  bool searching;        /* the stream search runs: it names arguments args[i] by their place in the table */
  dls_stream_t stream;   /* the launch stream */
  dls__stream *s;        /* resolved; a reference is held while the call runs (when `counted`) */
  /* The table: which entries hold a read, and how. */
  uint64_t xapi;   /* bit i: args[i] holds an exchange-API view */
  uint64_t cupy;   /* bit i: args[i] holds a CuPy array's pointer and device */
  uint64_t fast;   /* bit i: argument i is a tensor of ftype on ftype.dev: the kernel takes args[i].ptr, with
                      nothing to order (and no alias of exported dlstream memory, dlspy_call_fast_check) */
  DLDevice sdev;         /* the device of `s` */
  /* Set when the call runs on the current stream that the framework of its first tensor (an exchange API, or CuPy
   * read in C: api NULL) names for that tensor's device: tensors of that type on that device need no ordering
   * (type NULL: none). */
  dlspy_last_type ftype;
  const void *cur_api;      /* the last framework asked for its current stream (an exchange API, or &st->cupy) */
  DLDevice cur_dev;
  dls__stream *cur_stream;
  dls_stream_t cur_handle;  /* cur_stream named by a cached handle */
  PyObject *cause;          /* an exception a protocol getter raised while an argument was read (a strong
                               reference): the __cause__ of "expected a tensor", should it come to that */
  PyObject *block;          /* in a block with BLOCK posts: its Stream object (a reference), whose list takes them */
  dls__stream *cur_ref;     /* cur_stream when it is not the call's stream: a reference held (Python code run by
                               later arguments may drop the cache's handle) */
  bool have_value;
  bool more;             /* the end has more to do than dropping the stream: posts, a staged array, a temporary
                            handle, an interface's stream value, a cause or a current-stream reference (set with
                            each of them) */
  bool staged;           /* some host array was staged: the call blocks */
  bool in_block;         /* the stream is a use_stream() or branch block's: the frameworks' current streams are that
                            stream (dlstream/_carry.py), and their tensors' uses on it are recorded (alias.h); set
                            with the three above (one store) */
  bool cai_cupy;         /* `cai` holds a CuPy view read in C, not an array interface */
  int nposts;
  int nquick;            /* uses of records noted as they were ordered (dlspy_call_memory_slow's quick way): quick_* */
  int nuse_posts;        /* USE posts (dlspy_call_use, dlspy_call_record_use): with nquick, at most DLSPY_MAX_USES */
  int nordered;
  int cai_index;         /* the slot whose array interface (or CuPy view with its shape) `cai` holds; -1: none */
  int64_t dlpack_value;  /* the launch stream's DLPack value (GPU only) */
  uint64_t temp_handle;     /* a handle made for a stream that had none live (freed by dlspy_call_end) */
  dls__ext_extent *extents;     /* a launch of a built-in: room for each pointer argument's extent, for its checks
                                   (else NULL); unknown until one is noted (dlspy_call_extents) */
  int nextents;                 /* its arguments */
  bool extents_set;             /* the room holds them (else every one is unknown) */
  dls__stream *ordered[8]; /* producer streams already waited on */
  /* The large parts last: a launch on the fast path touches only the lines of what it uses. */
  dlspy_cai cai;
  dlspy_post posts[DLSPY_MAX_POSTS];
  dlspy_arg args[DLS_MAX_ARGS];
  void *params[DLS_MAX_ARGS]; /* a planned launch's values: a fast tensor's &args[i].ptr, a scalar's conversion */
  /* The uses of records noted as they were ordered, unheld (dls__foreign_use_noted), in the arrays
   * dls__ext_uses_note takes: with the USE posts, at most DLSPY_MAX_USES in all. */
  dls__buffer *quick_buf[DLSPY_MAX_USES];
  int quick_mode[DLSPY_MAX_USES];
  uint32_t quick_epoch[DLSPY_MAX_USES];
} dlspy_call;
/* What `desc` names argument `index`: its name, else "args[3]". */
const char *dlspy_desc_argname(const dlspy_call_desc *desc, int index, char *buf, size_t size);
/* "dst" (the call's names) or "args[3]" (while the stream search runs: the place in the table). */
const char *dlspy_argname(const dlspy_call *c, int index, char *buf, size_t size);
/* The same as an expression (its buffer lives as long as the enclosing block). */
#define DLSPY_ARG(c, i) dlspy_argname((c), (i), (char[24]){0}, 24)
/* Keeps the exception set now (a protocol getter's failure that was not fatal) as the call's cause. */
void dlspy_call_note_cause(dlspy_call *c);
/* Raises "<call>(<arg>=<repr>): expected <what>", with the call's noted cause as __cause__; returns -1. */
int dlspy_call_not_tensor(dlspy_call *c, PyObject *obj, int index, const char *what);

/* Makes `c` a call of `pycall`, described by `desc`, that has read nothing; `ptrslots`: the arguments a tensor may
 * be given for (~0: all). */
static inline void dlspy_call_init(dlspy_call *c, dlspy_state *st, const char *pycall, const dlspy_call_desc *desc,
                                   uint64_t ptrslots) {
  c->st = st;
  c->pycall = pycall;
  c->desc = desc;
  c->ptrslots = ptrslots;
}
/* Holds the call's stream until dlspy_call_end (a no-op on default streams), before anything runs Python code. A
 * reentrant call may drop the handle meanwhile; only a reserved handle names a default stream, which lives as long
 * as its device. */
static inline void dlspy_call_hold(dlspy_call *c) {
  /* The reserved generation (the handle's high half) is the highest: one compare of the whole handle. */
  bool counted = c->stream.id < (uint64_t)DLS_STREAM_RESERVED_GENERATION << 32;
  c->counted = counted;
  if (counted)
    dls__ext_stream_ref(c->s);
}
/* dlspy_call_end when there is more to do than dropping the stream reference. */
int dlspy_call_end_slow(dlspy_call *c, bool ok);
/* After the launch was queued (ok) or refused (!ok): keeps borrowed objects
 * alive until the stream passes, copies staged arrays back and blocks, drops
 * the stream reference. Returns 0, or -1 with an exception. */
static inline int dlspy_call_end(dlspy_call *c, bool ok) {
  if (DLSPY_LIKELY(!c->more && c->s != NULL)) {
    if (c->counted)
      dls__ext_stream_unref(c->s);
    c->s = NULL;
    return 0;
  }
  return dlspy_call_end_slow(c, ok);
}
/* Raises for an exchange-API framework that could not describe argument `arg` of `pycall` (unless it raised);
 * returns -1. */
int dlspy_xapi_failed(dlspy_state *st, const char *pycall, const char *arg);
/* The table entry of argument `index` (the names' index) read through the exchange API `api`: read now unless the
 * call read it before. 0, or -1 with an exception. */
static inline int dlspy_arg_xapi(dlspy_call *c, PyObject *obj, int index, const DLPackExchangeAPI *api,
                                 const dlspy_arg **out) {
  int i = index - c->desc->base;
  dlspy_arg *a = &c->args[i];
  *out = a;
  if (!((c->xapi >> i) & 1)) {
    if (api->dltensor_from_py_object_no_sync(obj, &a->dl) != 0)
      return dlspy_xapi_failed(c->st, c->pycall, DLSPY_ARG(c, index));
    a->ptr = dlspy_view_data(&a->dl);
    c->xapi |= (uint64_t)1 << i;
  }
  return 0;
}
/* Raises ReadOnlyError for a read-only tensor argument where the call may write, with the hint that fits what the
 * user wrote (c->desc->hint); `how` says how it is read-only. Returns -1. */
int dlspy_read_only(dlspy_call *c, int index, const char *how);
/* The bytes [lo, hi) around its first element that a view reaches (what a built-in given its data pointer may
 * touch; lo > hi when it cannot be told), and its element type. */
static inline dls__ext_extent dlspy_meta_extent(int32_t ndim, const int64_t *shape, const int64_t *strides,
                                            DLDataType dtype) {
  int64_t lo = 0, hi = 0, size = (int64_t)(((uint32_t)dtype.bits * dtype.lanes + 7) >> 3), stride = 1;
  for (int32_t i = ndim - 1; i >= 0; i--) {
    if (shape[i] == 0)
      return (dls__ext_extent){0, 0, dtype};
    int64_t st = strides != NULL ? strides[i] : stride;
    int64_t reach;
    if (__builtin_mul_overflow(shape[i] - 1, st, &reach) || __builtin_mul_overflow(reach, size, &reach) ||
        __builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi) ||
        __builtin_mul_overflow(stride, shape[i], &stride))
      return (dls__ext_extent){1, 0, dtype};
  }
  return (dls__ext_extent){lo, hi + size, dtype};
}
static inline bool dlspy_same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}
static inline dls__ext_extent dlspy_view_extent(const DLTensor *dl) {
  return dlspy_meta_extent(dl->ndim, dl->shape, dl->strides, dl->dtype);
}
/* Extents none of which is known ({1, 0}), one per argument. */
extern const dls__ext_extent dlspy_unknown_extents[DLS_MAX_ARGS];
/* Makes every extent of the call's room unknown (the first extent noted). */
void dlspy_call_extents_init(dlspy_call *c);
/* Where a launch of a built-in wants them (c->extents), the extent of argument `index`. */
static inline void dlspy_note_extent(dlspy_call *c, int index, dls__ext_extent e) {
  if (c->extents != NULL) {
    if (!c->extents_set)
      dlspy_call_extents_init(c);
    c->extents[index] = e;
  }
}
/* The extents a launch of a built-in passes its checks (NULL for another). */
static inline const dls__ext_extent *dlspy_call_extents(const dlspy_call *c) {
  return c->extents == NULL ? NULL : c->extents_set ? c->extents : dlspy_unknown_extents;
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
  c->more |= ref != NULL;
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
 * `obj` until the call's stream passes (in a block also when it is: dlspy_call.in_block, in the block's list,
 * block.h). */
int dlspy_order_after(dlspy_call *c, dls__stream *producer, PyObject *obj);
/* Work the call queues on its stream uses dlstream buffer `b` (`mode`: DLS_ACCESS_READ or DLS_ACCESS_WRITE)
 * through a raw pointer (a dlstream tensor on another device that a copy reads, a framework tensor over dlstream
 * memory): the call's stream waits now for what the use must follow (the hazard rule, dls__buffer_access), and the
 * use is recorded once the work is queued (a USE post, which holds `b` until the call ends). Steals a reference on
 * `b`. 0, or -1 with an exception. */
int dlspy_call_use(dlspy_call *c, dls__buffer *b, int mode);

/* In a block (c->in_block), the call's tensor `obj` on the block's stream: kept until the stream passes, in the
 * block's list once the work is queued (a BLOCK post, block.h), else (the block's Stream object is not at hand) with
 * a release of its own (a KEEP post). 0, or -1 with an exception. */
int dlspy_block_post(dlspy_call *c, PyObject *obj);

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
