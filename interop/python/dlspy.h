/* SPDX-License-Identifier: Apache-2.0 */
/* What the files of the CPython extension dlstream._dlstream share: module state, types, helpers. */
#ifndef DLSTREAM_PY_DLSPY_H
#define DLSTREAM_PY_DLSPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlstream/dlstream.h"
#include "ext.h"

#if defined(__GNUC__)
#define DLSPY_LIKELY(x) __builtin_expect(!!(x), 1)
#define DLSPY_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define DLSPY_LIKELY(x) (x)
#define DLSPY_UNLIKELY(x) (x)
#endif

/* The docstrings' paragraph on what every queued call (fill, axpy, copy, Function.launch) shares. */
#define DLSPY_ASYNC_DOC                                                                                          \
  "Asynchronous: the work is queued on the call's stream (`stream`, else the use_stream() stream, else the "      \
  "current stream of the framework that made the first tensor, else the legacy default stream) and the call "     \
  "returns before it runs. Work queued on that stream later, a framework's own included, runs after it, so "     \
  "torch or CuPy code on their current stream needs no wait. To read the result on the host, wait first: "      \
  "dlstream.synchronize(), stream.synchronize(), or an Event recorded after the call. This holds for NumPy "     \
  "arrays on the CPU backend too (they are used in place); host arrays given for a GPU are staged through the "  \
  "device and the call blocks until they are written back."

/* The entries of ext.h skip the public entry guard, so their callers check the runtime state themselves
 * (dlspy_check_runtime). */
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
 * after call. The memo holds a reference on `s` (none is needed on a default stream), so `s` stays valid whatever
 * happens to the handle; the handle is one of the cache's, which forgets the memo before it ends one. */
typedef struct dlspy_stream_memo {
  DLDevice device;
  void *native;
  dls_stream_t handle;
  dls__stream *s; /* NULL: empty */
  bool counted;   /* a reference is held on `s` */
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
/* Takes the exception set now, normalized with its traceback (a new reference; NULL when none is set). */
PyObject *dlspy_take_exception(void);
/* Fails with DLS_ERR_FORK (or INVALID_STATE after shutdown) unless the runtime is usable. */
int dlspy_check_runtime_slow(dlspy_state *st, const char *pycall);
static inline int dlspy_check_runtime(dlspy_state *st, const char *pycall) {
  if (DLSPY_LIKELY(!atomic_load_explicit(&dlspy_dead, memory_order_relaxed) && dls__ext_ready()))
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
/* synchronize(device=None): dls_device_synchronize on one device, or on every device of every backend. */
PyObject *dlspy_mod_synchronize(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
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
/* The same, and the core stream it names; the last pair resolved is remembered (st->smemo). */
static inline int dlspy_stream_lookup(dlspy_state *st, DLDevice device, void *native, const char *pycall,
                                      dls_stream_t *out, dls__stream **out_s) {
  const dlspy_stream_memo *m = &st->smemo;
  if (DLSPY_LIKELY(m->s != NULL && m->native == native && m->device.device_type == device.device_type &&
                   m->device.device_id == device.device_id)) {
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
/* A shape: an int or a sequence of ints (NumPy integers too), at most DLS__EXT_MAX_NDIM extents of 0 to
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
int dlspy_as_double_slow(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, double *out);
static inline int dlspy_as_double(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, double *out) {
  if (DLSPY_LIKELY(PyFloat_CheckExact(v))) {
    *out = PyFloat_AS_DOUBLE(v);
    return 0;
  }
  return dlspy_as_double_slow(st, v, pycall, arg, out);
}

/* ---- kernels from source (compile.c) ---- */
/* A Module object owning `handle` (unloaded if the object cannot be made). */
PyObject *dlspy_module_new(PyTypeObject *tp, dls_module_t handle, DLDevice device);
/* Whether a Module object is still loaded. */
bool dlspy_module_open(PyObject *module);
/* Module.from_source (a class method of dlstream.Module). */
PyObject *dlspy_module_from_source(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
#define DLSPY_MODULE_FROM_SOURCE_METHOD                                                                            \
  {"from_source", (PyCFunction)(void (*)(void))dlspy_module_from_source, METH_CLASS | METH_FASTCALL | METH_KEYWORDS, \
   "from_source($type, source, *, options=(), name_expressions=(), device=None, arch=None, cache=True, "       \
   "program_name=None)\n--\n\n" \
   "Compiles CUDA C++ with NVRTC (hipRTC on ROCm) for the device and loads it. Name expressions (\"scale<float>\") " \
   "become names function() accepts. Compiled images are cached in process and on disk; a repeat returns the same " \
   "Module (until closed)."}
/* dlstream.compile and the compiler helpers, added to the module by module exec. */
extern PyMethodDef dlspy_compile_methods[];
/* _xla_handlers and _xla_release (xla.c): the XLA FFI handlers for dlstream.jax. */
extern PyMethodDef dlspy_xla_methods[];

/* A call and its arguments: the handshake's declarations. */
#include "call.h"

#endif /* DLSTREAM_PY_DLSPY_H */
