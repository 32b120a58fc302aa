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
/* A hot path's helper, inlined where the compiler would not (its callers keep few values across it). */
#if defined(__GNUC__)
#define DLSPY_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define DLSPY_ALWAYS_INLINE static inline
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
/* The statuses' count (DLS_STATUS_MAP's values run from 0 without a gap: errors.c's table checks). */
#define DLSPY_STATUS_ONE(name, value, msg) +1
enum { DLSPY_STATUS_COUNT = 0 DLS_STATUS_MAP(DLSPY_STATUS_ONE) };

/* What a tensor argument's type is to the handshake, first match: a dlstream.Tensor (or a subclass); a type with
 * the DLPack C exchange API; CuPy's ndarray while the package's CuPy stream provider is registered (read in C,
 * cupy.c); anything else (providers, the array interface, __dlpack__). */
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

/* What cupy.c found of CuPy (one per process, probed at the first CuPy array type). */
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
  struct {                                /* stream_parallel's branch blocks (branch.c), strong references */
    PyTypeObject *type;
    PyObject *group_var, *branch_var, *s_group, *s_origin;
  } branch;
  struct {                                /* the frameworks blocks carry (carry.c, dlstream/_carry.py) */
    PyObject *carriers, *tie, *s_module, *s_enter, *s_exit;
  } carry;
} dlspy_state;

/* The module's definition (dlspy.c; module.c fills in its contents at import). */
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

/* Whether two DLPack devices are one. */
static inline bool dlspy_same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}
/* Where a DLTensor view's data starts (NULL for no data). */
static inline void *dlspy_view_data(const DLTensor *dl) {
  return dl->data != NULL ? (char *)dl->data + dl->byte_offset : NULL;
}

/* The state of the module a type belongs to (walks the MRO for subclasses); NULL (nothing raised) for none. */
static inline dlspy_state *dlspy_state_of(PyTypeObject *tp) {
  PyObject *m = PyType_GetModuleByDef(tp, &dlspy_moduledef);
  if (m == NULL) {
    PyErr_Clear();
    return NULL;
  }
  return (dlspy_state *)PyModule_GetState(m);
}
static inline dlspy_state *dlspy_state_of_module(PyObject *m) { return (dlspy_state *)PyModule_GetState(m); }

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
PyObject *dlspy_mod_test_hazards(PyObject *m, PyObject *on);
PyObject *dlspy_mod_test_foreign(PyObject *m, PyObject *on);
PyObject *dlspy_mod_test_bind_branches(PyObject *m, PyObject *on);
PyObject *dlspy_mod_clear_caches(PyObject *m, PyObject *unused);
PyObject *dlspy_mod_cache_sizes(PyObject *m, PyObject *unused);
/* The atexit hook (exit.c): runs the pending releases, waits up to DLSTREAM_EXIT_TIMEOUT seconds for queued work,
 * then tears the runtime down, or abandons it with a RuntimeWarning naming the streams still busy. */
PyObject *dlspy_mod_shutdown(PyObject *m, PyObject *unused);
PyObject *dlspy_mod_current_stream(PyObject *m, PyObject *const *args, Py_ssize_t nargs);
/* synchronize(device=None): dls_device_synchronize on one device, or on every device of every backend. */
PyObject *dlspy_mod_synchronize(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *dlspy_mod_empty_cache(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
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
  PyObject *keep;  /* a list: the framework tensors of calls in its blocks, kept until it passes (call/block.h) */
  struct dlspy_owed *owed; /* the records whose mark its blocks' calls owe, held until settled (call/block.h) */
} StreamObject;
enum {
  DLSPY_STREAM_OWNED = 1,
  DLSPY_STREAM_POOLED,
  DLSPY_STREAM_FOREIGN,
  DLSPY_STREAM_LEGACY,
  DLSPY_STREAM_PER_THREAD,
  DLSPY_STREAM_BRANCH, /* a group's branch: the group owns the handle */
  DLSPY_STREAM_VIEW    /* Stream.wrap(a Stream): the other Stream's handle, never ended through this one */
};
/* A Stream object naming a group's branch (never destroys it). */
PyObject *dlspy_stream_new_branch(dlspy_state *st, dls_stream_t branch);
extern PyType_Spec dlspy_group_spec;
/* Group.branch() and Group.add(stream) of a Group object (group.c), for the branch blocks (branch.c). */
PyObject *dlspy_group_branch(PyObject *group);
PyObject *dlspy_group_add(PyObject *group, PyObject *stream);
/* The branch block (branch.c): its type, _set_branch_hooks, and dropping what the hooks hold. */
extern PyType_Spec dlspy_branch_spec;
extern PyMethodDef dlspy_branch_methods[];
void dlspy_branch_clear(dlspy_state *st);
/* The frameworks' carry (carry.c): _set_carry, _carry_enter, _carry_exit; enter returns what exit restores (None:
 * nothing carried; NULL: an error, nothing left carried); exit raises the first failure once all are restored. */
extern PyMethodDef dlspy_carry_methods[];
void dlspy_carry_clear(dlspy_state *st);
PyObject *dlspy_carry_enter(dlspy_state *st, PyObject *stream, PyObject *origin);
int dlspy_carry_exit(dlspy_state *st, PyObject *carried, PyObject *stream, PyObject *origin);
/* Graph capture: Graph (graph.c), capture (capture.c). */
extern PyType_Spec dlspy_graph_spec;
extern PyType_Spec dlspy_capture_spec;
extern PyMethodDef dlspy_graph_functions[];
/* A Graph object owning `handle` (destroyed if the object cannot be made), replayed on `stream` by default. */
PyObject *dlspy_graph_new(dlspy_state *st, dls_graph_t handle, PyObject *stream);

extern PyType_Spec dlspy_stream_spec;
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
  bool view;       /* Event.wrap(an Event): the other Event's handle (its owner), never ended through this one */
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

/* ---- the DLPack C exchange API of dlstream.Tensor (exchange.c): the type's capsule, its calls counted ---- */
int dlspy_exchange_init(dlspy_state *st);
/* The use_stream() stream when it is on `dev`, else {0}. 0, or -1 with an exception. */
int dlspy_context_stream_on(dlspy_state *st, DLDevice dev, dls_stream_t *out);
PyObject *dlspy_mod_exchange_stats(PyObject *m, PyObject *unused);

/* ---- tensors shared with other processes (ipc.c): from_ipc, and Tensor.ipc_handle added to the type ---- */
extern PyMethodDef dlspy_ipc_methods[];
int dlspy_ipc_init(dlspy_state *st);

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

/* ---- Module objects (modules.c) and kernels from source (compile.c) ---- */
/* dlstream.Module's object. */
typedef struct ModuleObject {
  PyObject_HEAD
  dls_module_t handle; /* {0} once closed */
  DLDevice device;
} ModuleObject;
/* Whether a Module object is still loaded. */
static inline bool dlspy_module_open(PyObject *module) { return ((ModuleObject *)module)->handle.id != 0; }
/* A Module object of type `tp` owning `handle` (unloaded if the object cannot be made). */
static inline PyObject *dlspy_module_new(PyTypeObject *tp, dls_module_t handle, DLDevice device) {
  ModuleObject *m = (ModuleObject *)tp->tp_alloc(tp, 0);
  if (m == NULL) {
    (void)dls_module_unload(handle);
    return NULL;
  }
  m->handle = handle;
  m->device = device;
  return (PyObject *)m;
}
/* Module.from_source (a class method of dlstream.Module). */
PyObject *dlspy_module_from_source(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
/* dlstream.compile and the compiler helpers, added to the module by module exec. */
extern PyMethodDef dlspy_compile_methods[];
/* _xla_handlers and _xla_release (xla.c): the XLA FFI handlers for dlstream.jax. */
extern PyMethodDef dlspy_xla_methods[];
/* _builtins and _builtin_check (builtin_table.c): the built-ins' table and checks. */
extern PyMethodDef dlspy_builtin_table_methods[];
/* The signature the built-ins' table gives the built-in `name` ("p,u64,u32,u64", in buf), or NULL for a name it does
 * not hold. */
const char *dlspy_builtin_signature(const char *name, char *buf, size_t size);

#endif /* DLSTREAM_PY_DLSPY_H */
