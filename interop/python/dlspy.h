/* SPDX-License-Identifier: Apache-2.0 */
/* What the files of the CPython extension dlstream._dlstream share: module state, types, helpers. */
#ifndef DLSTREAM_PY_DLSPY_H
#define DLSTREAM_PY_DLSPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "interop/dlpack/dlpack_internal.h"
#include "dlstream/dlstream.h"

/* Calls that a fast path makes into the core's internals (dls__*) skip the
 * public entry guard, so they check the runtime state themselves. */
#define DLSPY_STATUS_COUNT 17 /* DLS_OK .. DLS_ERR_INTERNAL */

/* What a tensor argument's type is to the handshake, first match: a dlstream.Tensor (or a subclass); a type with
 * the DLPack C exchange API; CuPy's ndarray while the package's CuPy stream provider is registered (read in C,
 * cupyarg.c); anything else (providers, the array interface, __dlpack__). */
enum { DLSPY_KIND_OTHER = 0, DLSPY_KIND_TENSOR, DLSPY_KIND_XAPI, DLSPY_KIND_CUPY };

/* What dlstream knows of a tensor type (tensortypes.c), cached per type. */
typedef struct dlspy_type_entry {
  PyTypeObject *type;           /* strong reference */
  int kind;                     /* DLSPY_KIND_* */
  const DLPackExchangeAPI *api; /* its DLPack C exchange API; NULL: none */
  PyObject *provider;           /* its stream provider (strong reference); NULL: none */
  bool cai_skip;                /* its __cuda_array_interface__ has no stream (version < 3) and it has
                                   __dlpack__: the handshake orders it, so the interface is not read */
} dlspy_type_entry;
#define DLSPY_TYPE_CACHE 16

/* Foreign native streams seen on the hot path, wrapped once. */
typedef struct dlspy_stream_entry {
  DLDevice device;
  void *native;
  dls_stream_t handle; /* owned wrapper */
} dlspy_stream_entry;
#define DLSPY_STREAM_CACHE 16

/* The last (device, native) pair dlspy_stream_lookup resolved: a framework's current stream is the same call
 * after call. */
typedef struct dlspy_stream_memo {
  DLDevice device;
  void *native;
  dls_stream_t handle;
  dls__stream *s; /* NULL: empty */
  bool dflt;      /* a default stream (lives with its device); else s is only read once the handle is found live */
} dlspy_stream_memo;

/* What cupyarg.c found of CuPy (one per process, probed at the first CuPy array type). */
struct dlspy_cupy_api;
typedef struct dlspy_cupy_state {
  int mode;                           /* DLSPY_CUPY_* */
  PyTypeObject *ndarray;              /* cupy.ndarray (strong) */
  PyObject *capsule;                  /* cupy._public_c_api (strong; keeps `api` alive) */
  const struct dlspy_cupy_api *api;   /* CuPy's public C API table (CuPy >= 14.3), or NULL */
  PyObject *get_current_stream;       /* cupy.cuda.get_current_stream (strong), without the C API */
  DLDeviceType device_type;           /* kDLCUDA, kDLROCM on CuPy's HIP builds */
  PyObject *dtypes[8];                /* numpy dtypes seen (strong) ... */
  DLDataType dl_dtypes[8];            /* ... and what they are in DLPack */
  int ndtypes, next_dtype;
} dlspy_cupy_state;
enum { DLSPY_CUPY_UNPROBED = 0, DLSPY_CUPY_NONE, DLSPY_CUPY_ATTRS, DLSPY_CUPY_CAPI };

typedef struct dlspy_state {
  PyTypeObject *StreamType, *EventType, *TensorType, *ModuleType, *FunctionType, *LatchType, *GroupType;
  PyTypeObject *GraphType, *CaptureType;
  PyObject *Error;                        /* dlstream.Error */
  PyObject *exc[DLSPY_STATUS_COUNT];      /* one class per status (index 0 unused) */
  PyObject *ArgumentTypeError;            /* (Error, TypeError) */
  PyObject *OutOfRangeError;              /* (InvalidArgumentError, OverflowError) */
  PyObject *stream_var;                   /* contextvars.ContextVar of use_stream */
  PyObject *s_dlpack, *s_dlpack_device, *s_cuda_stream, *s_stream, *s_max_version;
  PyObject *s_xapi, *s_xapi_old, *s_cuda_event, *s_ptr, *s_handle, *s_device, *s_device_index;
  PyObject *s_device_id, *s_type, *s_index, *s_name, *s_module, *s_cai;
  PyObject *s_data, *s_shape, *s_strides, *s_c_contiguous, *s_dtype, *s_kind, *s_itemsize;
  PyObject *max_version;                  /* (1, 1) */
  PyObject *kw_stream_maxv, *kw_stream;   /* ("stream", "max_version"), ("stream",) */
  PyObject *providers;                    /* register_stream_provider: {type or module name: fn} */
  dlspy_type_entry types[DLSPY_TYPE_CACHE];
  int types_n, types_next;
  dlspy_stream_entry scache[DLSPY_STREAM_CACHE];
  int scache_n, scache_next;
  dlspy_stream_memo smemo;
  bool stream_var_set;                    /* _stream_var_set ran: use_stream's variable may hold a stream */
  PyObject *cupy_provider;                /* the package's CuPy stream provider (_set_cupy_provider) */
  dlspy_cupy_state cupy;
  struct {                                /* torch.cuda's functions (defaultstream.c), strong references */
    PyObject *module, *is_initialized, *is_capturing, *current_stream;
  } torch;
  PyObject *s_torch, *s_cuda;
} dlspy_state;

extern PyModuleDef dlspy_moduledef;

/* 0 while Python may use the runtime; DLSPY_CLOSING while our atexit hook
 * runs dls_shutdown (deallocators leave the runtime alone, release
 * callbacks still drop their references); DLSPY_DEAD afterwards (release
 * callbacks leak rather than touch a dying interpreter). The C runtime is one
 * per process, so this flag is too. */
enum { DLSPY_ALIVE = 0, DLSPY_CLOSING = 1, DLSPY_DEAD = 2 };
extern _Atomic int dlspy_dead;
/* Native calls running with the GIL released (shutdown waits for none). */
extern _Atomic int dlspy_nogil_calls;

static inline bool dlspy_py_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

/* getattr that returns 0 with *out NULL when the attribute is missing. */
#if PY_VERSION_HEX >= 0x030D0000
#define dlspy_getattr_opt PyObject_GetOptionalAttr
#else
#define dlspy_getattr_opt _PyObject_LookupAttr
#endif

/* The state of the module a type belongs to (walks the MRO for subclasses). */
dlspy_state *dlspy_state_of(PyTypeObject *tp);
static inline dlspy_state *dlspy_state_of_module(PyObject *m) { return (dlspy_state *)PyModule_GetState(m); }

/* ---- errors (errors.c) ---- */
/* Creates dlstream.Error, one class per status and ArgumentTypeError, and adds them to `m`. */
int dlspy_errors_init(PyObject *m, dlspy_state *st);
/* Raises the exception of `status` with "<pycall>: <dls_last_error()>"; returns NULL. */
PyObject *dlspy_raise(dlspy_state *st, dls_status_t status, const char *pycall);
/* Raises the exception of `status` with a formatted message; returns NULL. */
PyObject *dlspy_raisef(dlspy_state *st, dls_status_t status, const char *fmt, ...);
/* Raises dlstream.ArgumentTypeError (a TypeError); returns NULL. */
PyObject *dlspy_type_error(dlspy_state *st, const char *fmt, ...);
/* Raises dlstream.OutOfRangeError (an InvalidArgumentError and an OverflowError); returns NULL. */
PyObject *dlspy_range_error(dlspy_state *st, const char *fmt, ...);
/* The raising helpers format as PyUnicode_FromFormat does, but every %R, %S and %A is cut to DLSPY_REPR_MAX
 * characters (ending in "...") and a repr that raises becomes "<type object at 0x...>". An exception already set
 * when they are called becomes the new exception's __cause__ (what a user's __index__ or
 * __cuda_array_interface__ raised is kept), except one that is no Exception (KeyboardInterrupt, SystemExit):
 * that one is left as it is and nothing else is raised. */
#define DLSPY_REPR_MAX 100
/* The same formatting, for messages built in pieces (a new str, or NULL with an exception). */
PyObject *dlspy_format(const char *fmt, ...);
/* Fails with DLS_ERR_FORK (or INVALID_STATE after shutdown) unless the runtime is usable. */
int dlspy_check_runtime_slow(dlspy_state *st, const char *pycall);
static inline int dlspy_check_runtime(dlspy_state *st, const char *pycall) {
  if (DLS__LIKELY(!atomic_load_explicit(&dlspy_dead, memory_order_relaxed) &&
                  atomic_load_explicit(&dls__state, memory_order_acquire) == 1))
    return 0;
  return dlspy_check_runtime_slow(st, pycall);
}

/* ---- devices and dtypes (devices.c) ---- */
/* None, "cpu", "cuda:1", ("cuda", 0), (2, 0), an int (CUDA ordinal), torch.device ... */
int dlspy_parse_device(dlspy_state *st, PyObject *obj, const char *pycall, DLDevice *out);
/* cuda:0 when a CUDA device exists, else rocm:0 when a ROCm device does, else cpu:0. */
DLDevice dlspy_default_device(void);
/* Whether `obj` belongs to a ROCm build of torch (its type is of a torch module and torch.version.hip is set):
 * such builds name HIP devices and streams 'cuda'. */
bool dlspy_torch_hip(PyObject *obj);
PyObject *dlspy_device_str(DLDevice d);
int dlspy_parse_dtype(dlspy_state *st, PyObject *obj, const char *pycall, DLDataType *out);
/* A dtype's name for messages and Tensor.dtype: "float16", "int4", "float8_e4m3fn", "float32x4" (lanes). */
const char *dlspy_dtype_name(DLDataType dt, char *buf, size_t size);
PyObject *dlspy_dtype_str(DLDataType dt);
/* Module functions: device_count, backend_available, default_device. */
PyObject *dlspy_mod_device_count(PyObject *m, PyObject *const *args, Py_ssize_t nargs);
PyObject *dlspy_mod_backend_available(PyObject *m, PyObject *const *args, Py_ssize_t nargs);
PyObject *dlspy_mod_default_device(PyObject *m, PyObject *unused);

/* ---- module functions about the runtime (runtime.c) ---- */
PyObject *dlspy_mod_live_handles(PyObject *m, PyObject *unused);
PyObject *dlspy_mod_deferred_pending(PyObject *m, PyObject *unused);
PyObject *dlspy_mod_deferred_poll(PyObject *m, PyObject *unused);
PyObject *dlspy_mod_clear_caches(PyObject *m, PyObject *unused);
PyObject *dlspy_mod_cache_sizes(PyObject *m, PyObject *unused);
/* The atexit hook (exit.c): runs the pending releases, waits up to DLSTREAM_EXIT_TIMEOUT seconds for queued work,
 * then tears the runtime down, or abandons it with a RuntimeWarning naming the streams still busy. */
PyObject *dlspy_mod_shutdown(PyObject *m, PyObject *unused);
PyObject *dlspy_mod_current_stream(PyObject *m, PyObject *const *args, Py_ssize_t nargs);
/* _readable(addr): dlspy_addr_readable, for tests. */
PyObject *dlspy_mod_readable(PyObject *m, PyObject *arg);

/* ---- streams (stream.c; stream arguments in streamarg.c) ---- */
typedef struct StreamObject {
  PyObject_HEAD
  dls_stream_t handle;
  DLDevice device;
  void *native;
  int kind; /* DLSPY_STREAM_* */
  PyObject *owner; /* a foreign framework object kept alive (may be NULL) */
} StreamObject;
enum {
  DLSPY_STREAM_OWNED = 1,
  DLSPY_STREAM_POOLED,
  DLSPY_STREAM_FOREIGN,
  DLSPY_STREAM_LEGACY,
  DLSPY_STREAM_PER_THREAD,
  DLSPY_STREAM_BRANCH /* a group's branch: the group owns the handle */
};
/* A Stream object naming a group's branch (never destroys it). */
PyObject *dlspy_stream_new_branch(dlspy_state *st, dls_stream_t branch);
extern PyType_Spec dlspy_group_spec;
/* Graph capture: Graph (graph.c), capture (capture.c). */
extern PyType_Spec dlspy_graph_spec;
extern PyType_Spec dlspy_capture_spec;
extern PyMethodDef dlspy_graph_functions[];
/* A Graph object owning `handle` (destroyed if the object cannot be made), replayed on `stream` by default. */
PyObject *dlspy_graph_new(dlspy_state *st, dls_graph_t handle, PyObject *stream);

extern PyType_Spec dlspy_stream_spec;
/* Resolves a stream argument: a Stream, an object with __cuda_stream__, or an
 * int native pointer (0 legacy, 2 per-thread). Foreign natives are wrapped
 * through the module's cache, so no handle is made per call. `device` is the
 * device a bare pointer belongs to. Returns 0, or -1 with an exception. */
int dlspy_stream_resolve(dlspy_state *st, PyObject *obj, DLDevice device, const char *pycall, const char *arg,
                         dls_stream_t *out);
/* The handle of a (device, native) pair through the cache (NULL native: legacy). */
int dlspy_stream_cached(dlspy_state *st, DLDevice device, void *native, const char *pycall, dls_stream_t *out);
/* dlspy_stream_lookup past the memo. */
int dlspy_stream_lookup_slow(dlspy_state *st, DLDevice device, void *native, const char *pycall, dls_stream_t *out,
                             dls__stream **out_s);
/* The same, and the core stream it names; the last pair resolved is remembered (st->smemo): a default stream
 * lives as long as its device, a wrapper while its handle does (checked, so `s` is read only when live). */
static inline int dlspy_stream_lookup(dlspy_state *st, DLDevice device, void *native, const char *pycall,
                                      dls_stream_t *out, dls__stream **out_s) {
  const dlspy_stream_memo *m = &st->smemo;
  if (DLS__LIKELY(m->s != NULL && m->native == native && m->device.device_type == device.device_type &&
                  m->device.device_id == device.device_id &&
                  (m->dflt || dls__handle_peek(DLS_HANDLE_STREAM, m->handle.id) == m->s))) {
    *out = m->handle;
    *out_s = m->s;
    return 0;
  }
  return dlspy_stream_lookup_slow(st, device, native, pycall, out, out_s);
}
/* Drops the cache's wrappers. */
void dlspy_stream_cache_clear(dlspy_state *st);
/* The stream of a call that names none and has no tensor argument to ask, on `dev`: the legacy default stream,
 * except while torch (if imported) captures a graph on its current stream of `dev`: then that stream, so the call
 * is recorded with torch's work. 0, or -1 with an exception. */
int dlspy_default_stream(dlspy_state *st, DLDevice dev, const char *pycall, dls_stream_t *out);
/* Drops the torch functions dlspy_default_stream keeps. */
void dlspy_torch_clear(dlspy_state *st);
/* The use_stream() stream of this context as a handle, or {0}. Free (no context lookup) until _stream_var_set
 * first sets the variable: every set goes through it. */
int dlspy_context_stream(dlspy_state *st, dls_stream_t *out);
/* _stream_var_set(stream) -> token: use_stream's variable set (the package sets it only through this). */
PyObject *dlspy_mod_stream_var_set(PyObject *m, PyObject *value);
/* Calls obj.__cuda_stream__() and checks the result (version 0, a handle that can be a stream); sets *out_native. */
int dlspy_cuda_stream_protocol(dlspy_state *st, PyObject *obj, const char *pycall, const char *arg,
                               void **out_native);
/* The native stream an int names (0 and 1 legacy, 2 per-thread, else a pointer); refuses with
 * InvalidArgumentError, before anything reads it, values that cannot be a stream: negative, 3 to 4095, 2**63
 * and above. `shown` is what the message shows as the argument `arg` (the int itself, or the object it came
 * from). */
int dlspy_native_of_int(dlspy_state *st, PyObject *v, PyObject *shown, const char *pycall, const char *arg,
                        void **out);
/* The stream a DLPack `stream` integer names on `device` (-1: {0}); values below 4096 follow DLPack's rules for
 * the device type (dls_dlpack_stream_from_value), larger ones are pointers wrapped through the cache. */
int dlspy_stream_of_dlpack_value(dlspy_state *st, DLDevice device, PyObject *v, const char *pycall, const char *arg,
                                 dls_stream_t *out);
/* Whether this process can read the byte at `addr`, asked of the kernel (nothing faults). A GPU driver's
 * stream or event pointer points at readable host memory; any other would crash the driver that reads it. A
 * readable address may still be no stream: no driver can validate a plausible but dangling pointer. */
bool dlspy_addr_readable(uintptr_t addr);
/* Refuses (InvalidArgumentError) a native stream pointer of a GPU device that this process cannot read: the
 * driver would crash reading it. Every path that hands a native stream to dls_stream_wrap calls this first. */
int dlspy_native_readable(dlspy_state *st, DLDevice device, void *native, const char *pycall);
/* A new Stream object for a reserved default handle. */
PyObject *dlspy_stream_new_default(dlspy_state *st, DLDevice device, int kind);

/* ---- host waits that signals interrupt (waits.c) ---- */
/* One look at what a wait waits for, with the GIL held: 0 and *out_done, or -1 with an exception. */
typedef int (*dlspy_poll_fn)(void *ctx, int *out_done);
/* Polls until done, letting the GIL go between polls (naps of 2 us growing to 0.2 ms) and running the signal
 * handlers after each: a Ctrl-C raises KeyboardInterrupt at once and leaves the work queued. 0, or -1 with an
 * exception. */
int dlspy_wait(dlspy_poll_fn poll, void *ctx);
/* Stream.synchronize: waits for the work queued on `stream` so far (an event recorded now), interruptibly; refuses
 * what dls_stream_synchronize refuses; then runs the releases whose streams passed. 0, or -1 with an exception
 * naming `pycall`. */
int dlspy_stream_wait(dlspy_state *st, const char *pycall, dls_stream_t stream, DLDevice device);
/* dls_event_query in relaxed capture mode: the queries of a wait never invalidate a capture that another thread
 * runs in global mode (one dlstream may not have seen, such as torch.cuda.graph's). */
dls_status_t dlspy_event_query_relaxed(dls_event_t event, DLDevice device, int *out_done);
/* The same for a core stream the caller holds a reference on (staging, shutdown). */
int dlspy_core_stream_wait(dlspy_state *st, const char *pycall, dls__stream *s);

/* ---- events (event.c) ---- */
typedef struct EventObject {
  PyObject_HEAD
  dls_event_t handle;
  DLDevice device;
  unsigned flags;
  bool foreign;
  PyObject *owner;
} EventObject;
extern PyType_Spec dlspy_event_spec;
PyObject *dlspy_event_new(dlspy_state *st, DLDevice device, unsigned flags, const char *pycall);

/* ---- tensors (tensor.c) ---- */
typedef struct TensorObject {
  PyObject_HEAD
  dls_tensor_t handle;
  DLDevice device;
} TensorObject;
extern PyType_Spec dlspy_tensor_spec;
PyObject *dlspy_tensor_wrap(dlspy_state *st, dls_tensor_t t);
PyObject *dlspy_empty(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *dlspy_from_dlpack(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* ---- fault injection (fault.c): _fault_* in fault-injection builds, else empty ---- */
extern PyMethodDef dlspy_fault_methods[];

/* ---- benchmark hooks (benchhooks.c) ---- */
PyObject *dlspy_bench_exchange_import(PyObject *m, PyObject *const *args, Py_ssize_t nargs);
PyObject *dlspy_bench_loop(PyObject *m, PyObject *const *args, Py_ssize_t nargs);
PyObject *dlspy_bench_raw_axpy(PyObject *m, PyObject *const *args, Py_ssize_t nargs);

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
  int64_t shape[DLS__DLPACK_MAX_NDIM];
  int64_t strides[DLS__DLPACK_MAX_NDIM];
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
  dls__stream *s;        /* resolved; a reference is held while the call runs */
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
void dlspy_call_record_use(dlspy_call *c, const dlspy_view *v);

/* dlspy_call_end when there is more to do than dropping the stream reference. */
int dlspy_call_end_slow(dlspy_call *c, bool ok);
/* After the launch was queued (ok) or refused (!ok): keeps borrowed objects
 * alive until the stream passes, copies staged arrays back and blocks, drops
 * the stream reference. Returns 0, or -1 with an exception. */
static inline int dlspy_call_end(dlspy_call *c, bool ok) {
  if (DLS__LIKELY(c->s != NULL && c->nposts == 0 && !c->staged && c->temp_handle == 0 &&
                  c->first_cai.stream == NULL && c->cause == NULL && c->cur_ref == NULL)) {
    dls__stream_unref(c->s); /* not counted on default streams */
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
  if (DLS__LIKELY(api->current_work_stream(dev.device_type, dev.device_id, out_native) == 0))
    return 0;
  return dlspy_framework_current_failed(st, pycall, dev);
}
/* Where a DLTensor view's data starts (NULL for no data). */
static inline void *dlspy_view_data(const DLTensor *dl) {
  return dl->data != NULL ? (char *)dl->data + dl->byte_offset : NULL;
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
  return a == b || (a->dev == b->dev && a->native == b->native);
}
/* Fills dtype, ndim, count, contiguity and (with want_meta, up to DLS_COPY_MAX_DIMS) shape and strides. */
void dlspy_view_meta(dlspy_view *v, const DLTensor *dl, bool want_meta);
/* Appends a post (obj: a reference the post owns; managed: a consumed DLPack tensor). */
int dlspy_add_post(dlspy_call *c, int kind, PyObject *obj, void *managed);
/* Remembers `s` (handle `h`) as the current stream `api` names for `dev` in this call (see dlspy_call.cur_ref). */
void dlspy_call_set_current(dlspy_call *c, const void *api, DLDevice dev, dls__stream *s, dls_stream_t h);
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

/* ---- modules (modules.c), functions and launches (launch.c) ---- */
extern PyType_Spec dlspy_module_spec;
extern PyType_Spec dlspy_function_spec;
PyObject *dlspy_builtin_function(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
/* A Function object for `h` (module: the Module it belongs to, kept alive; NULL for built-ins); `signature` as
 * Module.function takes it. */
PyObject *dlspy_function_new(dlspy_state *st, dls_function_t h, DLDevice dev, PyObject *module, const char *name,
                             PyObject *signature, const char *pycall);

/* ---- built-ins (builtins.c) ---- */
extern PyType_Spec dlspy_latch_spec;
PyObject *dlspy_fill(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *dlspy_axpy(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *dlspy_copy(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *dlspy_spin(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* ---- small argument-parsing helpers (args.c) ---- */
/* Splits FASTCALL keywords into `out` slots named by `names` (NULL-terminated);
 * positional arguments beyond `npos_max` are an error. */
int dlspy_parse_kw(dlspy_state *st, const char *pycall, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                   const char *const *names, Py_ssize_t npos_max, PyObject **out);
/* A shape: an int or a sequence of ints (NumPy integers too), at most DLS__DLPACK_MAX_NDIM extents of 0 to
 * 2**63 - 1 whose elements of `dtype` fit in 2**63 - 1 bytes. Refusals are InvalidArgumentError (a ValueError,
 * as in NumPy) or ArgumentTypeError. */
int dlspy_parse_shape(dlspy_state *st, PyObject *obj, DLDataType dtype, const char *pycall, int64_t *shape,
                      int32_t *ndim);

/* Numbers from Python into narrower C types: nothing wraps. An integer argument is an int or has __index__ (a
 * float or a str is refused: ArgumentTypeError naming the call, the argument `arg` and the value); a value outside
 * [lo, hi] raises OutOfRangeError (an InvalidArgumentError and an OverflowError) with "<what> is <lo> to <hi>".
 * These run Python code (__index__, __float__): call them before looking up any handle the call then uses. */
int dlspy_as_int(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, const char *what, int64_t lo,
                 int64_t hi, int64_t *out);
/* The integer value of `v` as PyLong_AsLongLongAndOverflow reads it (*overflow -1 or 1 beyond 64 bits); with
 * opt_out_int also the int object (a new reference). A float, a str ... is refused (ArgumentTypeError). */
int dlspy_index_value(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, long long *out,
                      int *overflow, PyObject **opt_out_int);
int dlspy_as_uint(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, const char *what, uint64_t lo,
                  uint64_t hi, uint64_t *out);
/* A truth value (NULL: false); a __bool__ that raises is the cause of an ArgumentTypeError naming the call. */
int dlspy_as_bool(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, bool *out);
/* A real number (a float, an int, anything with __float__ or __index__) as a double; an int beyond the double
 * range raises OutOfRangeError. */
int dlspy_as_double(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, double *out);

/* ---- kernels from source (compile.c) ---- */
/* A Module object owning `handle` (unloaded if the object cannot be made). */
PyObject *dlspy_module_new(PyTypeObject *tp, dls_module_t handle, DLDevice device);
/* Whether a Module object is still loaded. */
bool dlspy_module_open(PyObject *module);
/* Module.from_source (a class method of dlstream.Module). */
PyObject *dlspy_module_from_source(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
#define DLSPY_MODULE_FROM_SOURCE_METHOD                                                                            \
  {"from_source", (PyCFunction)(void (*)(void))dlspy_module_from_source, METH_CLASS | METH_FASTCALL | METH_KEYWORDS, \
   "from_source(source, *, options=(), name_expressions=(), device=None, arch=None, cache=True) -> Module\n--\n\n" \
   "Compiles CUDA C++ with NVRTC (hipRTC on ROCm) for the device and loads it. Name expressions (\"scale<float>\") " \
   "become names function() accepts. Compiled images are cached in process and on disk; a repeat returns the same " \
   "Module."}
/* dlstream.compile and the compiler helpers, added to the module by module exec. */
extern PyMethodDef dlspy_compile_methods[];

#endif /* DLSTREAM_PY_DLSPY_H */
