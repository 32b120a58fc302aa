/* SPDX-License-Identifier: Apache-2.0 */
/* The runtime's internal objects and the functions the core files share. */
#ifndef DLSTREAM_CORE_INTERNAL_H
#define DLSTREAM_CORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/fault.h"
#include "base/handle.h"
#include "base/spin.h"
#include "dlstream/dlstream.h"

/* The size classes of the thread's cache of small objects (base/handle.h). */
enum { DLS__OBJ_STREAM, DLS__OBJ_EVENT, DLS__OBJ_BUFFER, DLS__OBJ_TENSOR, DLS__OBJ_DEFERRED, DLS__OBJ_KINDS };
_Static_assert(DLS__OBJ_KINDS <= DLS__OBJ_CLASSES, "a class of small objects the thread cache has no room for");

/* Each handle kind's table (defined by the kind's file) and what ending one
 * of its handles does once no call holds the object (core/kinds.h lists the
 * kinds). */
DLS__INTERNAL extern dls__table dls__stream_table, dls__event_table, dls__buffer_table, dls__tensor_table,
    dls__module_table, dls__function_table, dls__group_table, dls__latch_table, dls__graph_table;
DLS__INTERNAL void dls__stream_drop(void *obj);
DLS__INTERNAL void dls__event_drop(void *obj);
DLS__INTERNAL void dls__buffer_drop(void *obj);
DLS__INTERNAL void dls__tensor_drop(void *obj);
DLS__INTERNAL void dls__module_drop(void *obj);
DLS__INTERNAL void dls__function_drop(void *obj);
DLS__INTERNAL void dls__group_drop(void *obj);
DLS__INTERNAL void dls__latch_drop(void *obj);
DLS__INTERNAL void dls__graph_drop(void *obj);

/* ---------------------------------------------------------------- runtime */

/* Fast-path guard at the top of every public call: initializes on first use,
 * refuses use after fork(). Returns from the caller on failure. */
DLS__INTERNAL extern _Atomic int dls__state; /* 0 uninit, 1 ready, 2 forked */
DLS__INTERNAL dls_status_t dls__enter_slow(const char *call);
/* DLSTREAM_TEST_NO_HAZARDS=1, read when the runtime starts: the hazard rule
 * notes uses but orders nothing (access.c). A test-only switch: the negative
 * control of the ordering tests, which must then see wrong answers. */
DLS__INTERNAL extern _Atomic bool dls__hazards_off;
#define DLS__ENTER(call)                                                 \
  do {                                                                   \
    if (DLS__UNLIKELY(atomic_load_explicit(&dls__state, memory_order_acquire) != 1)) \
      DLS__TRY(dls__enter_slow(call));                                   \
  } while (0)

#define DLS__MAX_DEVICES 64

typedef struct dls__stream dls__stream;

/* One device of one backend: its default streams and its pools. */
typedef struct dls__device {
  const dls__backend *be;
  DLDevice device;
  int id;
  char name[24];       /* "cuda:0" */
  pthread_mutex_t mu;  /* pools and lazily made default streams */
  dls__stream *defaults[3]; /* [DLS_STREAM_LEGACY], [DLS_STREAM_PER_THREAD]; [0] "no stream" */
  void **stream_pool;  /* idle pooled native streams */
  size_t stream_pool_n, stream_pool_cap;
  dls__spin event_mu;  /* the event pool */
  void **event_pool;   /* idle native events (no timing); made at full size on first use */
  size_t event_pool_n, event_pool_cap;
  size_t pooled_out;   /* pooled streams handed out now */
  struct dls__function *builtins[8]; /* cached built-in functions (builtin.c) */
  void **parked;       /* pooled native streams still in a capture they joined */
  size_t parked_n, parked_cap;
  _Atomic int captures; /* captures dlstream knows to be underway on the device */
} dls__device;

/* Devices already made, by DLDeviceType and id: the lookup of the hot paths. */
#define DLS__DEVICE_TYPES 16 /* kDLCPU 1, kDLCUDA 2, kDLROCM 10 */
DLS__INTERNAL extern _Atomic(dls__device *) dls__devices[DLS__DEVICE_TYPES][DLS__MAX_DEVICES];
/* dls__device_get's first use of a device: probes its backend and makes it. */
DLS__INTERNAL dls__device *dls__device_open(DLDevice device, const char *call, dls_status_t *out_status);
/* The device for a DLDevice, probing its backend; NULL and a message naming
 * `call` on failure (*out_status set). */
static inline dls__device *dls__device_get(DLDevice device, const char *call, dls_status_t *out_status) {
  if (DLS__LIKELY((unsigned)device.device_type < DLS__DEVICE_TYPES &&
                  (unsigned)device.device_id < DLS__MAX_DEVICES)) {
    dls__device *d = atomic_load_explicit(&dls__devices[device.device_type][device.device_id], memory_order_acquire);
    if (DLS__LIKELY(d != NULL))
      return d;
  }
  return dls__device_open(device, call, out_status);
}
DLS__INTERNAL const dls__backend *dls__backend_for(DLDeviceType type);
/* The device if it was already made, else NULL; never probes. */
DLS__INTERNAL dls__device *dls__device_peek(DLDeviceType type, int id);
/* Calls fn on every device already made, of every backend (shutdown). */
DLS__INTERNAL void dls__each_device(void (*fn)(dls__device *dev));

/* Native events from the device's pool (no timing). */
DLS__INTERNAL dls_status_t dls__event_pool_get(dls__device *dev, void **out_event);
DLS__INTERNAL void dls__event_pool_put(dls__device *dev, void *event);

/* ---------------------------------------------------------------- streams */

enum { DLS__STREAM_OWNED = 1, DLS__STREAM_POOLED, DLS__STREAM_FOREIGN, DLS__STREAM_DEFAULT };

struct dls__stream {
  dls__device *dev;
  void *native;
  int kind;             /* DLS__STREAM_* */
  _Atomic int refs;     /* the handle + buffers and uses that name it */
  uint64_t id;          /* its handle; 0 for default streams */
  _Atomic int open_groups; /* groups begun on it and not yet ended */
  bool capture_unseen;  /* foreign, on a backend that reports captures: it may be
                           capturing without dlstream knowing, so the driver is asked */
};

/* Resolves a reserved default-stream handle (dls_stream_default). */
DLS__INTERNAL dls__stream *dls__stream_get_reserved(dls_stream_t stream, const char *call, const char *arg,
                                                    dls_status_t *out_status);
/* Resolves a stream handle, reserved default handles included, without a
 * hold (the caller holds the stream by other means: a reference). */
static inline dls__stream *dls__stream_get(dls_stream_t stream, const char *call, const char *arg,
                                           dls_status_t *out_status) {
  if (DLS__UNLIKELY((uint32_t)(stream.id >> 32) == DLS_STREAM_RESERVED_GENERATION))
    return dls__stream_get_reserved(stream, call, arg, out_status);
  return (dls__stream *)dls__table_get(&dls__stream_table, stream.id, call, arg, out_status);
}
/* Resolves and holds a stream handle in *h (default streams live as long as
 * their device: nothing to hold). */
static inline dls__stream *dls__stream_hold(dls__hold *h, dls_stream_t stream, const char *call, const char *arg,
                                            dls_status_t *out_status) {
  if (DLS__UNLIKELY((uint32_t)(stream.id >> 32) == DLS_STREAM_RESERVED_GENERATION))
    return dls__stream_get_reserved(stream, call, arg, out_status);
  return (dls__stream *)dls__hold_get(h, &dls__stream_table, stream.id, call, arg, out_status);
}
/* DLS__GET for streams: held until the end of the enclosing block. */
#define DLS__GET_STREAM(var, handle, call, arg)                                \
  DLS__HOLD_VAR(var##_hold_);                                                  \
  dls__stream *var;                                                            \
  do {                                                                         \
    dls_status_t dls__gst_;                                                    \
    var = dls__stream_hold(&var##_hold_, (handle), (call), (arg), &dls__gst_); \
    if (DLS__UNLIKELY(var == NULL))                                            \
      return dls__gst_;                                                        \
  } while (0)
/* Takes a reference. Default streams live as long as their device: they are
 * not counted (their buffers skip a locked instruction each way). */
static inline void dls__stream_ref(dls__stream *s) {
  if (s->kind != DLS__STREAM_DEFAULT)
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}
/* Releases the native stream by its kind and frees the object (no references left). */
DLS__INTERNAL void dls__stream_release(dls__stream *s);
/* Drops a reference; the last one releases the native stream by its kind.
 * Default streams are never released. */
static inline void dls__stream_unref(dls__stream *s) {
  if (s->kind != DLS__STREAM_DEFAULT && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
    dls__stream_release(s);
}
/* Slot 0 of dls__device.defaults: a stream object that names no real stream,
 * the producer of memory no stream produced (latch flags), so every real use
 * of it is recorded. */
#define DLS__STREAM_NONE 0
/* The default stream object of a device (kind DLS_STREAM_LEGACY/PER_THREAD,
 * or DLS__STREAM_NONE). */
DLS__INTERNAL dls_status_t dls__stream_default(dls__device *dev, int kind, dls__stream **out);
/* The legacy default stream (or the "no stream" producer): never captured,
 * and on a GPU, work on it would merge with any capture underway on its device. */
static inline bool dls__stream_legacy(const dls__stream *s) {
  if (s->native == (void *)UINTPTR_MAX)
    return true;
  return s->dev->device.device_type == kDLCPU ? s == s->dev->defaults[DLS_STREAM_LEGACY]
                                              : s->native == NULL || s->native == (void *)(uintptr_t)1;
}
/* Makes `waiter` wait for all work queued on `target` so far (pooled event). */
DLS__INTERNAL dls_status_t dls__stream_order(dls__stream *waiter, dls__stream *target);

/* ---------------------------------------------------------------- buffers */

/* A party's part in a buffer's hazards (access.c): the last writer of its
 * capture (or of eager work), or a reader since that write (which waited
 * for the writer). */
#define DLS__ROLE_WRITER 1
#define DLS__ROLE_READER 2

/* Two streams are the same stream: one object, or two wrappers of one native. */
static inline bool dls__same_stream(const dls__stream *a, const dls__stream *b) {
  return a == b || (a->dev == b->dev && a->native == b->native);
}

typedef struct dls__use {
  dls__stream *stream; /* ref held */
  void *event;         /* pooled native event, recorded after the latest use */
  uint64_t cap_id;     /* the capture the use was recorded in (0: eager work) */
  uint8_t role;        /* DLS__ROLE_* */
  bool stale;          /* the latest record failed: record it again before ordering on it */
  bool recorded;       /* recorded at least once: until then its pooled event may carry an older record of
                          someone else's (a capture's, even), so nothing waits on it or queries it */
  uint16_t exports;    /* live exports to this stream as their consumer: it may write at any time */
} dls__use;

#define DLS__USES_INLINE 4

typedef struct dls__buffer {
  dls__device *dev;
  void *ptr;
  size_t size;
  dls__stream *stream;  /* allocation / producer stream, ref held */
  bool borrowed;
  bool release_unordered; /* the release frees at once (host memory): it must
                             also wait for work queued on the producer stream */
  dls_release_fn release; /* borrowed only */
  void *user_data;
  dls__spin mu;         /* the use set and the hazards: held from a use's waits until its work is noted */
  uint8_t alloc_role;   /* the allocation (producer) stream's DLS__ROLE_*: the first writer */
  dls__use uses_inline[DLS__USES_INLINE];
  dls__use *uses;       /* uses_inline or heap */
  int nuses, cap;
  _Atomic int refs;     /* handle + tensors + exports */
  uint64_t id;          /* its handle, 0 if none */
  uint64_t cap_id;      /* allocated in this capture (0: eagerly) */
  struct dls__graph *graph; /* the graph that owns its memory once the capture ended (ref held) */
  struct dls__deferred *spare; /* borrowed with a release: its deferred-queue entry, made with
                                  the buffer so that deferring the release needs no memory */
} dls__buffer;

/* A new owned buffer allocated on `s` (no handle; refs = 1). */
DLS__INTERNAL dls_status_t dls__buffer_alloc(dls__stream *s, size_t size, dls__buffer **out);
/* A new borrowed buffer (no handle; refs = 1). release is NOT called on failure. */
DLS__INTERNAL dls_status_t dls__buffer_borrow(dls__device *dev, void *ptr, size_t size, dls__stream *producer,
                                              dls_release_fn release, void *user_data, dls__buffer **out);
DLS__INTERNAL void dls__buffer_ref(dls__buffer *b);
/* Drops a reference; the last one frees / releases in stream order. */
DLS__INTERNAL void dls__buffer_unref(dls__buffer *b);
/* ---- a buffer's accesses (access.c): the hazard rule ---- */

/* The buffers one piece of work uses on one stream, each with how. */
typedef struct dls__access {
  dls__buffer *b;
  uint8_t mode;  /* DLS_ACCESS_READ | DLS_ACCESS_WRITE */
  int party;     /* set by dls__access_begin */
} dls__access;
typedef struct dls__accesses {
  int n;
  dls__stream *s;
  uint64_t cap;
  dls__access a[DLS_MAX_ARGS + 2];
} dls__accesses;
/* Adds a buffer (once; a buffer read and written is written). */
DLS__INTERNAL void dls__access_add(dls__accesses *x, dls__buffer *b, int mode);
/* Before the work is queued on `s`: locks the buffers and makes `s` wait,
 * on the device, for what each access must follow (a read: the last writer
 * on another stream; a write: that writer and every reader since). On
 * failure nothing is locked and nothing was queued on `s` but waits. */
DLS__INTERNAL dls_status_t dls__access_begin(dls__accesses *x, dls__stream *s);
/* After the work was queued (`queued`) or not: notes the uses and unlocks.
 * A failed event record leaves its use stale, recorded again before any
 * wait on it; its status is returned. Needs no memory. */
DLS__INTERNAL dls_status_t dls__access_end(dls__accesses *x, bool queued);
/* One access: `order` waits as dls__access_begin does, then notes it; without
 * `order`, work already queued on `s` is noted only (dls_buffer_record_use). */
DLS__INTERNAL dls_status_t dls__buffer_access(dls__buffer *b, dls__stream *s, int mode, bool order);
/* An export to `consumer`: ordered as a write by it, and from then on, until
 * dls__buffer_export_end, every other stream's use waits for whatever the
 * consumer queued so far (it may write at any time). */
DLS__INTERNAL dls_status_t dls__buffer_export_begin(dls__buffer *b, dls__stream *consumer);
DLS__INTERNAL void dls__buffer_export_end(dls__buffer *b, dls__stream *consumer);
/* Marks the work queued on `s` so far, any stream (the allocation stream
 * too), as one the buffer's release waits for. */
DLS__INTERNAL dls_status_t dls__buffer_mark(dls__buffer *b, dls__stream *s);
/* A stale use's event missed its latest record: recording it now covers
 * everything queued on its stream so far (b->mu held). */
DLS__INTERNAL dls_status_t dls__use_refresh(dls__use *u);

/* A pooled event and the device whose pool it returns to. */
typedef struct dls__marker {
  dls__device *dev;
  void *event;
} dls__marker;
/* Deferred releases. An entry is made first (NULL when out of memory), so
 * that whoever must defer a release later (a borrowed buffer makes its entry
 * with the buffer) needs no memory then. */
typedef struct dls__deferred dls__deferred;
DLS__INTERNAL dls__deferred *dls__deferred_entry(void);
/* Frees an entry never enqueued (NULL: nothing). */
DLS__INTERNAL void dls__deferred_entry_free(dls__deferred *d);
/* Room for `n` markers: the entry's own when they fit, else the heap (NULL
 * when out of memory). */
DLS__INTERNAL dls__marker *dls__deferred_marks(dls__deferred *d, int n);
/* Queues entry `d`: waits on the first `nwait` of `marks` (ownership of the
 * array and all `nevents` events moves in), and for capture `cap_id` (0:
 * none) to be over, then calls release. Events past `nwait` were recorded in
 * a capture: never queried, only returned to their pool. Cannot fail. */
DLS__INTERNAL void dls__deferred_enqueue(dls__deferred *d, dls__marker *marks, int nwait, int nevents,
                                         uint64_t cap_id, dls_release_fn release, void *user_data);
/* Returns a pooled event recorded in capture `cap_id` (0: eagerly) to its
 * pool once that capture is over. */
DLS__INTERNAL void dls__event_pool_put_after(dls__device *dev, void *event, uint64_t cap_id);
/* Blocks until `event` completes; should the driver fail to wait, polls it
 * instead: a release must never run before the work it waits for. */
DLS__INTERNAL void dls__event_wait(dls__device *dev, void *event);
/* Drains the queue, blocking on each event (shutdown). */
DLS__INTERNAL void dls__deferred_drain(void);
DLS__INTERNAL extern _Atomic size_t dls__deferred_count;

/* ---------------------------------------------------------------- tensors */

#define DLS__TENSOR_INLINE_DIMS 8

typedef struct dls__tensor {
  dls__buffer *buf;     /* ref held */
  DLTensor dl;          /* shape/strides point at the arrays below */
  uint64_t flags;       /* DLS_TENSOR_* */
  int64_t shape_inline[DLS__TENSOR_INLINE_DIMS];
  int64_t strides_inline[DLS__TENSOR_INLINE_DIMS];
  int64_t *dims_heap;   /* 2*ndim when ndim > inline */
  uint64_t id;
} dls__tensor;

/* Makes a tensor handle over `buf` (reference stolen, also on failure)
 * viewing it as `meta` (shape and strides copied; NULL strides become compact
 * strides). */
DLS__INTERNAL dls_status_t dls__tensor_new(dls__buffer *buf, const DLTensor *meta, uint64_t flags,
                                           dls_tensor_t *out);
DLS__INTERNAL dls__tensor *dls__tensor_get(dls_tensor_t t, const char *call, const char *arg,
                                           dls_status_t *out_status);

/* ---------------------------------------------------------------- functions */

typedef struct dls__module {
  dls__device *dev;
  void *native;
  uint64_t id;
  _Atomic int refs;      /* the handle + each function looked up in it: the last unloads the native */
} dls__module;

typedef struct dls__function {
  dls__device *dev;
  void *native;
  dls__module *module; /* NULL for host and built-in functions */
  bool builtin;        /* owned by the runtime */
  bool host;           /* made by dls_function_from_host */
  char name[64];
  uint64_t id;
} dls__function;

/* The bytes of a scalar or raw-pointer argument, DLS_ARG_I32 to DLS_ARG_PTR. */
static inline uint32_t dls__arg_scalar_size(int32_t kind) {
  static const uint8_t sizes[DLS_ARG_PTR + 1] = {0, 4, 8, 4, 8, 4, 8, sizeof(void *)};
  return sizes[kind];
}
/* Bytes [lo, hi) around a raw pointer argument that belong to it (a
 * framework tensor's view), for the checks of built-ins; lo > hi: unknown. */
typedef struct dls__extent {
  int64_t lo, hi;
} dls__extent;
/* A launch with typed arguments (dls_launch, the Python layer): a built-in's
 * arguments are checked first (builtin_args.c), and a partial overlap of
 * what it reads and writes is refused. `extents` (NULL: none) has one entry
 * per argument. */
DLS__INTERNAL dls_status_t dls__launch_ext(const char *call, dls__function *fn, dls__stream *s,
                                           const dls_launch_config_t *config, const dls_arg_t *args, size_t nargs,
                                           const dls__extent *extents);
static inline dls_status_t dls__launch(const char *call, dls__function *fn, dls__stream *s,
                                       const dls_launch_config_t *config, const dls_arg_t *args, size_t nargs) {
  return dls__launch_ext(call, fn, s, config, args, nargs, NULL);
}
/* The launch itself, for callers that checked a built-in's arguments already. */
DLS__INTERNAL dls_status_t dls__launch_args(const char *call, dls__function *fn, dls__stream *s,
                                            const dls_launch_config_t *config, const dls_arg_t *args, size_t nargs);
/* A launch whose arguments are values already (scalars and raw pointers: nothing to order or record): params[i]
 * points at argument i's sizes[i] bytes. The caller vouches for the configuration (every dimension >= 1) and for
 * the arguments (at most DLS_MAX_ARGS, DLS_MAX_ARG_BYTES in all; a built-in's checked by dls__builtin_check);
 * the function and stream are checked. */
DLS__INTERNAL dls_status_t dls__launch_params(const char *call, dls__function *fn, dls__stream *s,
                                              const dls_launch_config_t *config, void **params,
                                              const uint32_t *sizes, int nargs);
/* The built-ins by index (dls__device.builtins). */
enum { DLS__BI_FILL, DLS__BI_AXPY_F32, DLS__BI_AXPY_F64, DLS__BI_COPY_STRIDED, DLS__BI_SPIN, DLS__BI_LATCH,
       DLS__BI_EMPTY, DLS__NBUILTIN };
_Static_assert(DLS__NBUILTIN <= 8, "dls__device.builtins has 8 slots");
/* A built-in function object of a device (cached), by name or by index. */
DLS__INTERNAL dls_status_t dls__builtin(dls__device *dev, const char *name, const char *call,
                                        dls__function **out);
DLS__INTERNAL dls_status_t dls__builtin_at(dls__device *dev, size_t k, const char *call, dls__function **out);
/* Checks a launch of built-in `fn`: argument count and kinds, counts inside
 * every buffer and tensor (and raw pointer of known extent; others are the
 * caller's word, but not NULL), a well-formed copy descriptor. *out_overlap:
 * what it reads partially overlaps what it writes. */
DLS__INTERNAL dls_status_t dls__builtin_check(const char *call, const dls__function *fn, const dls_arg_t *args,
                                              size_t nargs, const dls__extent *extents, bool *out_overlap);
/* How a built-in's kernel uses its memory argument i (DLS_ACCESS_*). */
DLS__INTERNAL int dls__builtin_access(const dls__function *fn, size_t i);
/* A copy descriptor's own checks (dimensions, element size, extents, no
 * zero destination stride over more than one element); its element count. */
DLS__INTERNAL dls_status_t dls__copy_desc_check(const char *call, const dls_copy_desc_t *d, uint64_t *out_count);
/* Bytes [lo, hi) a strided view of a copy reaches, relative to its first element. */
DLS__INTERNAL dls_status_t dls__copy_view_span(const char *call, const char *which, const dls_copy_desc_t *d,
                                               const int64_t *strides, int64_t *lo, int64_t *hi);

/* ---------------------------------------------------------------- captures */

typedef struct dls__graph dls__graph;

DLS__INTERNAL extern _Atomic int dls__captures_known;
/* dls__stream_capture's question to the driver. */
DLS__INTERNAL int dls__stream_capture_query(dls__stream *s, uint64_t *out_id);
/* The capture state of a stream as the driver sees it now (DLS__CAPTURE_*),
 * captures dlstream did not begin included; *out_id is the capture's id
 * while one is active, else 0. A capture seen for the first time is noted,
 * so dlstream's own polling keeps away from it. A stream that is not
 * capture_unseen can only be capturing while dlstream knows of a capture
 * (it began it, or saw it on a stream it was given): the driver is asked
 * only then, which keeps the query off the eager hot paths. */
static inline int dls__stream_capture(dls__stream *s, uint64_t *out_id) {
  if (DLS__LIKELY(!s->capture_unseen) && atomic_load_explicit(&dls__captures_known, memory_order_acquire) == 0) {
    *out_id = 0;
    return DLS__CAPTURE_NONE;
  }
  return dls__stream_capture_query(s, out_id);
}
/* DLS_OK when `waiter` may wait for `target`: both outside any capture, or
 * both in one. Otherwise DLS_ERR_STATE naming both, before any driver call. */
DLS__INTERNAL dls_status_t dls__capture_check_pair(dls__stream *waiter, uint64_t waiter_cap, dls__stream *target,
                                                   uint64_t target_cap);
/* Whether dlstream may poll on its own initiative (query events, run
 * deferred releases) on this thread now: no capture it knows of forbids it. */
DLS__INTERNAL bool dls__capture_polling_allowed(void);
/* DLS_OK unless a known capture forbids this thread's synchronizing and
 * querying calls (the driver would invalidate it): DLS_ERR_STATE naming it. */
DLS__INTERNAL dls_status_t dls__capture_check_host_wait(const char *call);
/* Whether a capture dlstream knows of is underway on a device (captures
 * other frameworks ended are forgotten first). */
DLS__INTERNAL bool dls__capture_on_device(dls__device *dev);
/* Groups begun in capture `cap_id` and not ended yet (their branches have
 * not rejoined: the capture cannot end). */
DLS__INTERNAL int dls__groups_open_in_capture(uint64_t cap_id);
/* Whether a capture is still underway as far as dlstream can tell. */
DLS__INTERNAL bool dls__capture_underway(uint64_t id);
/* A buffer allocated in capture `id` (a capture dlstream began: its graph
 * will own the memory), and its free inside that capture. */
DLS__INTERNAL void dls__capture_note_alloc(uint64_t id, dls__buffer *b);
DLS__INTERNAL void dls__capture_forget_alloc(uint64_t id, dls__buffer *b);
/* A buffer allocated in capture `id` whose free in it could not be ordered
 * after its uses there: its memory becomes the graph's, as an output's whose
 * buffer is gone (freed after the graph's last replay). */
DLS__INTERNAL void dls__capture_orphan_alloc(uint64_t id, dls__buffer *b);
/* Frees a graph output after the capture: stream-ordered after the graph's
 * last replay and the buffer's eager uses; drops the buffer's graph ref.
 * Returns the stream of that replay (ref held) when the free could not be
 * ordered after an eager use: the caller then frees the memory on it once
 * those uses completed. NULL otherwise. */
DLS__INTERNAL dls__stream *dls__graph_release_output(dls__buffer *b);
/* The stream's handle is going away: a capture begun through it ends, and
 * what it recorded is dropped (no one could end it any more). */
DLS__INTERNAL void dls__capture_drop_on(dls__stream *s);
/* Describes a stream for messages: "pooled stream 0x5f.. on cuda:0 (in capture 3)". */
DLS__INTERNAL const char *dls__stream_describe(const dls__stream *s, uint64_t cap, char *buf, size_t size);
/* Driver queries dlstream makes on its own initiative run in relaxed capture
 * mode, so that a capture on another thread it cannot see is never
 * invalidated by them. */
typedef struct dls__relaxed {
  const dls__backend *be;
  int dev, prev;
  bool swapped;
} dls__relaxed;
DLS__INTERNAL void dls__relaxed_enter(dls__relaxed *r, dls__device *dev);
DLS__INTERNAL void dls__relaxed_leave(dls__relaxed *r);
/* Stream-ordered allocation and free (on `s`, eager or captured) while a
 * capture dlstream knows is underway run in relaxed capture mode: a global
 * or thread-local capture on another thread is then neither invalidated nor
 * raced by them (the CUDA driver crashed in cuGraphInstantiate and
 * cuMemFreeAsync when threads in global mode allocated from a pool while
 * another ended a capture). No driver call more while no capture is known. */
DLS__INTERNAL dls_status_t dls__mem_alloc(dls__stream *s, size_t size, void **out_ptr);
DLS__INTERNAL void dls__mem_free(dls__device *dev, void *ptr, dls__stream *s);

/* ---------------------------------------------------------------- shutdown hooks */

DLS__INTERNAL void dls__streams_shutdown(void);
DLS__INTERNAL void dls__builtins_shutdown(void);
DLS__INTERNAL void dls__captures_shutdown(void);

/* ---- handles by their kind's public value: the names the Python extension uses ---- */

#include "core/kinds.h"

static inline void *dls__handle_peek(dls_handle_kind_t kind, uint64_t id) {
  return dls__table_peek(dls__kind_table(kind), id);
}
static inline void *dls__handle_get(dls_handle_kind_t kind, uint64_t id, const char *call, const char *arg,
                                    dls_status_t *out_status) {
  return dls__table_get(dls__kind_table(kind), id, call, arg, out_status);
}
static inline uint64_t dls__handle_new(dls_handle_kind_t kind, void *obj) {
  return dls__table_add(dls__kind_table(kind), obj);
}
static inline bool dls__handle_end(dls_handle_kind_t kind, uint64_t id) {
  return dls__table_end(dls__kind_table(kind), id);
}
static inline void dls__handle_each(dls_handle_kind_t kind, void (*fn)(uint64_t id, void *obj)) {
  dls__table_each(dls__kind_table(kind), fn);
}

#endif /* DLSTREAM_CORE_INTERNAL_H */
