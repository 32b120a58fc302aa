/* SPDX-License-Identifier: Apache-2.0 */
/* The module dlstream._dlstream: its function table, state and initialization. */
#include "call/cupy.h"
#include "errors.h"
#include "call/block.h"
#include "call/streamarg.h"
#include "call/tensortypes.h"

static PyMethodDef g_module_methods[] = {
    {"empty", (PyCFunction)(void (*)(void))dlspy_empty, METH_FASTCALL | METH_KEYWORDS,
     "empty($module, shape, dtype='float32', *, device=None, stream=None, ipc=False)\n--\n\n"
     "A new compact (row-major) Tensor of `shape` and `dtype` that dlstream owns, on `device` (default: "
     "default_device()). With ipc=True its memory can be shared with another process (Tensor.ipc_handle(); "
     "CUDA only).\n\n"
     "Asynchronous: the memory is allocated in stream order on `stream` (default: the use_stream() stream, else "
     "the device's legacy default stream), so work queued there after this call may use it at once, and work on "
     "other streams once ordered after it (handing the tensor over through DLPack does that). Its contents are "
     "undefined until written (fill, copy, a launch); read it on the host only after dlstream.synchronize() (or "
     "the stream's synchronize()). close() frees it in stream order; the host never waits."},
    {"from_dlpack", (PyCFunction)(void (*)(void))dlspy_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack($module, obj, *, stream=None)\n--\n\n"
     "A Tensor viewing the memory of any DLPack producer (torch, CuPy, NumPy, JAX ...) or of a DLPack capsule.\n\n"
     "Asynchronous: obj.__dlpack__(stream=S) asks the producer to order its pending work before `stream` S "
     "(default: the current stream of the producer's framework, else the legacy default stream) on the device; "
     "the host does not wait. The producer's memory is kept alive until every stream that used the view has "
     "passed. Calls on the view are asynchronous too: dlstream.synchronize() before the host reads the memory."},
    {"builtin_function", (PyCFunction)(void (*)(void))dlspy_builtin_function, METH_FASTCALL | METH_KEYWORDS,
     "builtin_function($module, name, device=None, signature=None)\n--\n\n"
     "A built-in kernel ('dls_fill', 'dls_axpy_f32', 'dls_axpy_f64', 'dls_copy_strided', 'dls_spin', 'dls_latch') "
     "as a Function for launch(), with its signature (dls_axpy_f32 is 'u64,f32,cp,p')."},
    {"fill", (PyCFunction)(void (*)(void))dlspy_fill, METH_FASTCALL | METH_KEYWORDS,
     "fill($module, dst, value, *, stream=None)\n--\n\n"
     "Sets every element of the contiguous tensor `dst` (any DLPack producer) to `value`.\n\n"
     DLSPY_ASYNC_DOC},
    {"axpy", (PyCFunction)(void (*)(void))dlspy_axpy, METH_FASTCALL | METH_KEYWORDS,
     "axpy($module, a, x, y, *, stream=None)\n--\n\n"
     "y = a * x + y, element by element, for contiguous float32 or float64 tensors x and y of one dtype and size "
     "(any DLPack producers: torch, CuPy, NumPy, JAX, dlstream.Tensor). `a` is a Python number.\n\n"
     DLSPY_ASYNC_DOC},
    {"copy", (PyCFunction)(void (*)(void))dlspy_copy, METH_FASTCALL | METH_KEYWORDS,
     "copy($module, dst, src, *, stream=None)\n--\n\n"
     "Copies `src` into `dst` element by element: tensors of one shape, any strides (up to 8 dimensions). "
     "Between dtypes it converts as NumPy's `np.copyto(dst, src)` does, under its same_kind casting: a cast stays "
     "in its kind or goes up bool < unsigned < signed < float (integers wrap, floats round to nearest even); an "
     "unsafe cast (float to int, signed to unsigned, anything to bool) raises InvalidArgumentError naming both "
     "dtypes and the rule, and complex or float8 ones NotSupportedError. With `src` on another device of the same "
     "backend, a peer copy of contiguous tensors of one dtype on a stream of dst's device.\n\n" DLSPY_ASYNC_DOC},
    {"spin", (PyCFunction)(void (*)(void))dlspy_spin, METH_FASTCALL | METH_KEYWORDS,
     "spin($module, seconds, *, stream=None, device=None)\n--\n\n"
     "Busy-waits on the stream for `seconds` (one GPU thread on CUDA): later work on the stream starts after it. "
     "For tests and benchmarks.\n\n"
     "Asynchronous: the host does not wait (synchronize() does)."},
    {"synchronize", (PyCFunction)(void (*)(void))dlspy_mod_synchronize, METH_FASTCALL | METH_KEYWORDS,
     "synchronize($module, device=None)\n--\n\n"
     "Blocks until all work queued so far on every stream dlstream holds on `device` has completed (C: "
     "dls_device_synchronize), then runs the releases that became due. The GIL is released while waiting.\n\n"
     "The streams are those dlstream holds: Stream objects (Stream.wrap() ones included), the streams of "
     "use_stream(), stream_parallel() and capture(), and the default streams, where torch's and CuPy's work runs "
     "unless they are told otherwise. Calls that ran on a framework's own stream (inside torch.cuda.stream(s) or "
     "a CuPy Stream block) are waited for by that framework's synchronize, or by Stream.wrap(s).synchronize(): "
     "dlstream does not keep such streams, which the framework may destroy. device=None: every device of every "
     "available backend (a device where dlstream holds no stream costs nothing). Raises StateError inside a "
     "capture that forbids host waits (the driver would invalidate it)."},
    {"empty_cache", (PyCFunction)(void (*)(void))dlspy_mod_empty_cache, METH_FASTCALL | METH_KEYWORDS,
     "empty_cache($module, device=None)\n--\n\n"
     "Gives the memory dlstream's caching allocator keeps idle on `device` back to the driver (C: dls_device_trim) "
     "and returns the bytes given back. Memory freed on a stream is kept for that stream's next allocations (no "
     "driver call), and another stream takes it over only after waiting for the block's stream; "
     "DLSTREAM_CACHE_LIMIT bounds what it keeps (default 1 GiB per device), and an allocation that finds the device "
     "out of memory empties the cache and tries again by itself. device=None: every device of every available "
     "backend. Blocks of a stream capturing now stay. Like torch.cuda.empty_cache(), it never waits for work to "
     "finish: each block is freed in its stream's order."},
    {"device_count", (PyCFunction)(void (*)(void))dlspy_mod_device_count, METH_FASTCALL,
     "device_count($module, kind='cuda', /)\n--\n\n"
     "Number of devices of a kind: 'cuda', 'rocm' or 'cpu' (0 when the backend is unavailable)."},
    {"backend_available", (PyCFunction)(void (*)(void))dlspy_mod_backend_available, METH_FASTCALL,
     "backend_available($module, kind='cuda', /)\n--\n\n"
     "(True, '') when a backend can be used, else (False, why): for example, no libcuda.so.1 on this machine."},
    {"default_device", dlspy_mod_default_device, METH_NOARGS,
     "default_device($module, /)\n--\n\n'cuda:0' when a CUDA device exists, else 'rocm:0' when a ROCm one does, "
     "else 'cpu:0'."},
    {"current_stream", (PyCFunction)(void (*)(void))dlspy_mod_current_stream, METH_FASTCALL,
     "current_stream($module, device=None, /)\n--\n\n"
     "The Stream of the innermost use_stream() block, else the legacy default stream of `device`."},
    {"register_stream_provider", (PyCFunction)(void (*)(void))dlspy_mod_register_stream_provider,
     METH_FASTCALL | METH_KEYWORDS,
     "register_stream_provider($module, type_or_module_name, fn)\n--\n\n"
     "fn(tensor) -> stream or None names the current stream of the framework that made `tensor`: a call whose "
     "first tensor argument is of that type (or of a type of that module, e.g. 'cupy') and that names no stream "
     "runs there. fn=None removes the provider. Types with the DLPack C exchange API use it instead."},
    {"_stream_providers", dlspy_mod_stream_providers, METH_NOARGS, "The registered stream providers (a copy)."},
    {"_set_cupy_provider", dlspy_mod_set_cupy_provider, METH_O,
     "Names the package's CuPy stream provider: while it is CuPy's, CuPy arrays are read in C."},
    {"_stream_var_set", dlspy_mod_stream_var_set, METH_O,
     "_stream_var.set(value) -> token: the only way the package sets use_stream's variable."},
    {"_block_release", dlspy_mod_block_release, METH_O,
     "_block_release(stream): lets go of what use_stream's calls on the Stream keep, after its work so far."},
    {"_readable", dlspy_mod_readable, METH_O, "Whether this process can read the byte at an address (tests)."},
    {"_live_handles", dlspy_mod_live_handles, METH_NOARGS, "Live handles of each kind (leak checks)."},
    {"_bench_exchange_import", (PyCFunction)(void (*)(void))dlspy_bench_exchange_import, METH_FASTCALL,
     "Seconds for n exchange-API imports as a launch does them (benchmarks)."},
    {"_bench_loop", (PyCFunction)(void (*)(void))dlspy_bench_loop, METH_FASTCALL,
     "_bench_loop(fn, args, n): fn(*args) n times from C (scripts/callgrind-python)."},
    {"_bench_raw_axpy", (PyCFunction)(void (*)(void))dlspy_bench_raw_axpy, METH_FASTCALL,
     "Seconds for n raw launches of dls_axpy_f32 through the CUDA backend (benchmarks)."},
    {"_deferred_pending", dlspy_mod_deferred_pending, METH_NOARGS, "Borrowed releases waiting for streams to pass."},
    {"_exchange_stats", dlspy_mod_exchange_stats, METH_NOARGS,
     "Calls of each entry of dlstream.Tensor's DLPack C exchange API so far (tests)."},
    {"_deferred_poll", dlspy_mod_deferred_poll, METH_NOARGS, "Runs the releases whose streams have passed; drops the records of foreign memory whose uses passed."},
    {"_test_foreign", dlspy_mod_test_foreign, METH_O,
     "_test_foreign($module, on, /)\n--\n\nTest-only: turns the record of foreign memory on or off; returns the "
     "previous setting."},
    {"_test_bind_branches", dlspy_mod_test_bind_branches, METH_O,
     "_test_bind_branches($module, on, /)\n--\n\nTest-only: turns the branches' binding to their group's origin on or "
     "off; returns the previous setting."},
    {"_test_hazards", dlspy_mod_test_hazards, METH_O,
     "_test_hazards($module, on, /)\n--\n\nTest-only: turns the hazard rule's waits on or off; returns the previous "
     "setting."},
    {"_clear_caches", dlspy_mod_clear_caches, METH_NOARGS, "Drops the cached stream wrappers and exchange-API types."},
    {"_cache_sizes", dlspy_mod_cache_sizes, METH_NOARGS, "Sizes of the module's caches."},
    {"_shutdown", dlspy_mod_shutdown, METH_NOARGS, "Tears the runtime down (registered with atexit)."},
    {NULL, NULL, 0, NULL},
};

/* ---- initialization ---- */

static int add_type(PyObject *m, PyType_Spec *spec, PyTypeObject **slot) {
  PyObject *t = PyType_FromModuleAndSpec(m, spec, NULL);
  if (t == NULL)
    return -1;
  *slot = (PyTypeObject *)t;
  return PyModule_AddType(m, (PyTypeObject *)t);
}

#define INTERN(field, text)                         \
  do {                                              \
    if ((st->field = PyUnicode_InternFromString(text)) == NULL) \
      return -1;                                    \
  } while (0)

static int module_exec(PyObject *m) {
  dlspy_state *st = dlspy_state_of_module(m);
  INTERN(s_dlpack, "__dlpack__");
  INTERN(s_dlpack_device, "__dlpack_device__");
  INTERN(s_cuda_stream, "__cuda_stream__");
  INTERN(s_stream, "stream");
  INTERN(s_max_version, "max_version");
  INTERN(s_xapi, "__dlpack_c_exchange_api__");
  INTERN(s_xapi_old, "__c_dlpack_exchange_api__");
  INTERN(s_cuda_event, "cuda_event");
  INTERN(s_ptr, "ptr");
  INTERN(s_handle, "handle");
  INTERN(s_device, "device");
  INTERN(s_device_index, "device_index");
  INTERN(s_device_id, "device_id");
  INTERN(s_type, "type");
  INTERN(s_index, "index");
  INTERN(s_name, "name");
  INTERN(s_module, "__module__");
  INTERN(s_cai, "__cuda_array_interface__");
  INTERN(s_data, "data");
  INTERN(s_shape, "shape");
  INTERN(s_strides, "strides");
  INTERN(s_c_contiguous, "_c_contiguous");
  INTERN(s_dtype, "dtype");
  INTERN(s_kind, "kind");
  INTERN(s_itemsize, "itemsize");
  INTERN(s_torch, "torch");
  INTERN(s_cuda, "cuda");
  if ((st->max_version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)) == NULL ||
      (st->kw_stream_maxv = PyTuple_Pack(2, st->s_stream, st->s_max_version)) == NULL ||
      (st->kw_stream = PyTuple_Pack(1, st->s_stream)) == NULL)
    return -1;

  if (dlspy_errors_init(m, st) != 0)
    return -1;
  st->stream_var = PyContextVar_New("dlstream.current_stream", NULL);
  if (st->stream_var == NULL || PyModule_AddObjectRef(m, "_stream_var", st->stream_var) != 0)
    return -1;

  if (add_type(m, &dlspy_stream_spec, &st->StreamType) != 0 || add_type(m, &dlspy_event_spec, &st->EventType) != 0 ||
      add_type(m, &dlspy_tensor_spec, &st->TensorType) != 0 || add_type(m, &dlspy_module_spec, &st->ModuleType) != 0 ||
      add_type(m, &dlspy_function_spec, &st->FunctionType) != 0 || add_type(m, &dlspy_latch_spec, &st->LatchType) != 0 ||
      add_type(m, &dlspy_group_spec, &st->GroupType) != 0 || add_type(m, &dlspy_graph_spec, &st->GraphType) != 0 ||
      add_type(m, &dlspy_capture_spec, &st->CaptureType) != 0 || add_type(m, &dlspy_branch_spec, &st->branch.type) != 0)
    return -1;
  if (PyModule_AddFunctions(m, dlspy_graph_functions) != 0 || PyModule_AddFunctions(m, dlspy_compile_methods) != 0 ||
      PyModule_AddFunctions(m, dlspy_xla_methods) != 0 || PyModule_AddFunctions(m, dlspy_ipc_methods) != 0 ||
      PyModule_AddFunctions(m, dlspy_builtin_table_methods) != 0 ||
      PyModule_AddFunctions(m, dlspy_branch_methods) != 0 || PyModule_AddFunctions(m, dlspy_carry_methods) != 0 || dlspy_ipc_init(st) != 0 ||
      dlspy_exchange_init(st) != 0)
    return -1;

  if (PyModule_AddStringConstant(m, "__version__", DLS_VERSION_STRING) != 0 ||
      PyModule_AddIntConstant(m, "DLPACK_STREAM_NO_SYNC", DLS_DLPACK_STREAM_NO_SYNC) != 0 ||
      PyModule_AddIntConstant(m, "kDLCPU", kDLCPU) != 0 || PyModule_AddIntConstant(m, "kDLCUDA", kDLCUDA) != 0 ||
      PyModule_AddIntConstant(m, "kDLCUDAHost", kDLCUDAHost) != 0 ||
      PyModule_AddIntConstant(m, "kDLROCM", kDLROCM) != 0)
    return -1;
  return PyModule_AddFunctions(m, dlspy_fault_methods);
}

static int module_traverse(PyObject *m, visitproc visit, void *arg) {
  dlspy_state *st = dlspy_state_of_module(m);
  if (st == NULL)
    return 0;
  Py_VISIT(st->StreamType);
  Py_VISIT(st->EventType);
  Py_VISIT(st->TensorType);
  Py_VISIT(st->ModuleType);
  Py_VISIT(st->FunctionType);
  Py_VISIT(st->LatchType);
  Py_VISIT(st->GroupType);
  Py_VISIT(st->GraphType);
  Py_VISIT(st->CaptureType);
  Py_VISIT(st->Error);
  Py_VISIT(st->ArgumentTypeError);
  Py_VISIT(st->OutOfRangeError);
  for (int i = 0; i < DLSPY_STATUS_COUNT; i++)
    Py_VISIT(st->exc[i]);
  Py_VISIT(st->providers);
  Py_VISIT(st->cupy_provider);
  Py_VISIT(st->branch.type);
  Py_VISIT(st->branch.group_var);
  Py_VISIT(st->branch.branch_var);
  Py_VISIT(st->carry.carriers);
  Py_VISIT(st->carry.tie);
  Py_VISIT(st->torch.module);
  Py_VISIT(st->torch.is_initialized);
  Py_VISIT(st->torch.is_capturing);
  Py_VISIT(st->torch.current_stream);
  Py_VISIT(st->cupy.ndarray);
  Py_VISIT(st->cupy.capsule);
  Py_VISIT(st->cupy.get_current_stream);
  for (int i = 0; i < st->cupy.ndtypes; i++)
    Py_VISIT(st->cupy.dtypes[i]);
  for (int i = 0; i < st->types_n; i++) {
    Py_VISIT(st->types[i].type);
    Py_VISIT(st->types[i].provider);
  }
  return 0;
}

static int module_clear(PyObject *m) {
  dlspy_state *st = dlspy_state_of_module(m);
  if (st == NULL)
    return 0;
  dlspy_type_cache_clear(st);
  dlspy_cupy_clear(st);
  dlspy_torch_clear(st);
  Py_CLEAR(st->cupy_provider);
  dlspy_branch_clear(st);
  dlspy_carry_clear(st);
  Py_CLEAR(st->branch.type);
  Py_CLEAR(st->providers);
  Py_CLEAR(st->StreamType);
  Py_CLEAR(st->EventType);
  Py_CLEAR(st->TensorType);
  Py_CLEAR(st->ModuleType);
  Py_CLEAR(st->FunctionType);
  Py_CLEAR(st->GroupType);
  Py_CLEAR(st->GraphType);
  Py_CLEAR(st->CaptureType);
  Py_CLEAR(st->LatchType);
  Py_CLEAR(st->Error);
  Py_CLEAR(st->ArgumentTypeError);
  Py_CLEAR(st->OutOfRangeError);
  for (int i = 0; i < DLSPY_STATUS_COUNT; i++)
    Py_CLEAR(st->exc[i]);
  Py_CLEAR(st->stream_var);
  Py_CLEAR(st->s_dlpack);
  Py_CLEAR(st->s_dlpack_device);
  Py_CLEAR(st->s_cuda_stream);
  Py_CLEAR(st->s_stream);
  Py_CLEAR(st->s_max_version);
  Py_CLEAR(st->s_xapi);
  Py_CLEAR(st->s_xapi_old);
  Py_CLEAR(st->s_cuda_event);
  Py_CLEAR(st->s_ptr);
  Py_CLEAR(st->s_handle);
  Py_CLEAR(st->s_device);
  Py_CLEAR(st->s_device_index);
  Py_CLEAR(st->s_device_id);
  Py_CLEAR(st->s_type);
  Py_CLEAR(st->s_index);
  Py_CLEAR(st->s_name);
  Py_CLEAR(st->s_module);
  Py_CLEAR(st->s_cai);
  Py_CLEAR(st->s_data);
  Py_CLEAR(st->s_shape);
  Py_CLEAR(st->s_strides);
  Py_CLEAR(st->s_c_contiguous);
  Py_CLEAR(st->s_dtype);
  Py_CLEAR(st->s_kind);
  Py_CLEAR(st->s_itemsize);
  Py_CLEAR(st->s_torch);
  Py_CLEAR(st->s_cuda);
  Py_CLEAR(st->max_version);
  Py_CLEAR(st->kw_stream_maxv);
  Py_CLEAR(st->kw_stream);
  return 0;
}

static void module_free(void *m) { module_clear((PyObject *)m); }

static PyModuleDef_Slot g_slots[] = {
    {Py_mod_exec, (void *)module_exec},
#if PY_VERSION_HEX >= 0x030C0000
    /* One C runtime per process: a second interpreter would share it. */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
    {0, NULL},
};

/* The module's contents, filled into its definition (dlspy.c) before Python first reads it. */
PyMODINIT_FUNC PyInit__dlstream(void);
PyMODINIT_FUNC PyInit__dlstream(void) {
  dlspy_moduledef.m_doc = "dlstream's CPython extension: streams, events, tensors and launches shared with array "
                          "frameworks through DLPack.";
  dlspy_moduledef.m_methods = g_module_methods;
  dlspy_moduledef.m_slots = g_slots;
  dlspy_moduledef.m_traverse = module_traverse;
  dlspy_moduledef.m_clear = module_clear;
  dlspy_moduledef.m_free = module_free;
  return PyModuleDef_Init(&dlspy_moduledef);
}
