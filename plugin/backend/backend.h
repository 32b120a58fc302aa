/* SPDX-License-Identifier: Apache-2.0 */
/* The backend vtable: the one place where CUDA, HIP and the CPU differ.
 *
 * Rules every backend follows:
 * - Native objects are opaque pointers (CUstream, CUevent, CUfunction ...).
 * - Every method takes its backend first (`be`, the vtable it was reached
 *   through), so one implementation serves several backends (the GPU code
 *   finds its vendor through it) and a wrapper finds what it wraps (fault
 *   injection); then the device index, so a GPU backend can make the
 *   device's primary context current on the calling thread.
 * - Methods return DLS_OK or fail through dls__fail() with a message that
 *   names the driver call and its error name.
 * - Nothing here knows DLPack tensors, handles or Python.
 * - Version and size come first; fields are only ever appended; a NULL method
 *   is an optional feature the backend lacks. */
#ifndef DLSTREAM_BACKEND_H
#define DLSTREAM_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "dlstream/dlstream.h"

/* 4: every method takes its backend first. 5: memory shared with other processes (ipc_*). 6: device_threads. */
#define DLS__BACKEND_VERSION 6

/* The size of the opaque bytes an ipc_* method exports or opens (CUDA's CU_IPC_HANDLE_SIZE). */
#define DLS__IPC_BYTES 64

/* Capture states of a native stream (the values of CUDA's CUstreamCaptureStatus). */
enum { DLS__CAPTURE_NONE = 0, DLS__CAPTURE_ACTIVE = 1, DLS__CAPTURE_INVALIDATED = 2 };

/* Which default stream stream_default() names. */
#define DLS__DEFAULT_LEGACY DLS_STREAM_LEGACY
#define DLS__DEFAULT_PER_THREAD DLS_STREAM_PER_THREAD

typedef struct dls__backend dls__backend;

/* The methods after shutdown, written once: the vtable's fields (below), the
 * shared GPU implementation's declarations and its vendors' vtables (gpu.h)
 * and fault injection's thunks (fault.c) all come from this list; a method
 * appended here is one line. X(method, parameters, arguments, fault, gpu):
 * - parameters and arguments: those after the backend, which every method
 *   takes first (DLS__BACKEND_SELF adds it: `const dls__backend *be`);
 * - fault: how fault injection wraps it: POINT, an injectable point, then the
 *   call; OWN, written out in fault.c (it makes or releases a native object
 *   the fault counts or the ledger follow);
 * - gpu: GPU where the shared GPU implementation (gpu_*.c) has it, NONE
 *   where the GPU backends leave it NULL. */
#define DLS__BACKEND_METHODS(X)                                                                                 \
  /* ---- streams ---- */                                                                                      \
  X(stream_create, (int dev, unsigned flags, int priority, void **out_stream), (dev, flags, priority, out_stream), \
    OWN, GPU)                                                                                                   \
  X(stream_destroy, (int dev, void *stream), (dev, stream), OWN, GPU)                                           \
  /* The native value of a default stream (kind DLS__DEFAULT_*). May create                                     \
   * it; it belongs to the backend (freed by shutdown, never by stream_destroy). */                             \
  X(stream_default, (int dev, int kind, void **out_stream), (dev, kind, out_stream), POINT, GPU)                \
  /* Checks that a foreign native stream belongs to device `dev`; NULL method:                                  \
   * the driver cannot tell. */                                                                                 \
  X(stream_check, (int dev, void *stream), (dev, stream), POINT, GPU)                                           \
  X(stream_synchronize, (int dev, void *stream), (dev, stream), OWN, GPU)                                       \
  X(stream_query, (int dev, void *stream, int *out_idle), (dev, stream, out_idle), POINT, GPU)                  \
  X(stream_wait_event, (int dev, void *stream, void *event), (dev, stream, event), POINT, GPU)                  \
  X(stream_priority_range, (int dev, int *out_least, int *out_greatest), (dev, out_least, out_greatest), POINT, \
    GPU)                                                                                                        \
  X(host_callback, (int dev, void *stream, dls_host_fn fn, void *user_data), (dev, stream, fn, user_data),      \
    POINT, GPU)                                                                                                 \
  /* ---- events ---- */                                                                                       \
  X(event_create, (int dev, unsigned flags, void **out_event), (dev, flags, out_event), OWN, GPU)               \
  X(event_destroy, (int dev, void *event), (dev, event), OWN, GPU)                                              \
  /* Checks that a foreign native event is usable on device `dev`; may be NULL. */                              \
  X(event_check, (int dev, void *event), (dev, event), POINT, GPU)                                              \
  X(event_record, (int dev, void *event, void *stream), (dev, event, stream), POINT, GPU)                       \
  X(event_query, (int dev, void *event, int *out_complete), (dev, event, out_complete), POINT, GPU)             \
  X(event_synchronize, (int dev, void *event), (dev, event), OWN, GPU)                                          \
  X(event_elapsed_ms, (int dev, void *start, void *end, float *out_ms), (dev, start, end, out_ms), POINT, GPU)  \
  /* ---- memory ---- */                                                                                       \
  /* Stream-ordered allocation: usable by work queued on `stream` after this. */                                \
  X(mem_alloc, (int dev, size_t size, void *stream, void **out_ptr), (dev, size, stream, out_ptr), OWN, GPU)    \
  /* Stream-ordered free: the memory may be reused once `stream` passes here. */                                \
  X(mem_free, (int dev, void *ptr, void *stream), (dev, ptr, stream), OWN, GPU)                                 \
  /* Asynchronous copy between any two addresses the device can reach. */                                      \
  X(memcpy_async, (int dev, void *dst, const void *src, size_t size, void *stream),                             \
    (dev, dst, src, size, stream), POINT, GPU)                                                                  \
  /* Host memory the device can read and write while the host does too                                          \
   * (mapped, page-locked). *out_device is the device's address for it. */                                      \
  X(host_mapped_alloc, (int dev, size_t size, void **out_host, void **out_device),                              \
    (dev, size, out_host, out_device), OWN, GPU)                                                                \
  X(host_mapped_free, (int dev, void *host), (dev, host), OWN, GPU)                                             \
  /* ---- code ---- */                                                                                         \
  X(module_load, (int dev, const void *image, size_t size, void **out_module), (dev, image, size, out_module),  \
    OWN, GPU)                                                                                                   \
  X(module_unload, (int dev, void *module), (dev, module), OWN, GPU)                                            \
  X(module_function, (int dev, void *module, const char *name, void **out_function),                            \
    (dev, module, name, out_function), POINT, GPU)                                                              \
  /* Native function of a built-in ("dls_fill" ... see builtin.h). Owned by the                                 \
   * backend until shutdown. DLS_ERR_UNAVAILABLE when built without kernels. */                                 \
  X(builtin_function, (int dev, const char *name, void **out_function), (dev, name, out_function), POINT, GPU)  \
  /* Wraps a host C kernel (CPU only; NULL elsewhere). */                                                       \
  X(host_function, (int dev, const char *name, dls_host_kernel fn, void **out_function),                        \
    (dev, name, fn, out_function), OWN, NONE)                                                                   \
  X(host_function_destroy, (int dev, void *function), (dev, function), OWN, NONE)                               \
  /* Queues a launch. params[i] points at argument i's value, sizes[i] is its                                   \
   * size in bytes; both are borrowed for the call (CUDA copies them at once,                                   \
   * the CPU backend copies them into its command). */                                                          \
  X(launch,                                                                                                     \
    (int dev, void *function, void *stream, const dls_launch_config_t *config, void **params,                   \
     const uint32_t *sizes, int nparams),                                                                       \
    (dev, function, stream, config, params, sizes, nparams), POINT, GPU)                                        \
  /* ---- graph capture (version 2; every method NULL where the backend has none) ---- */                       \
  /* The capture state of a native stream (DLS__CAPTURE_*) and the id of its                                    \
   * capture, unique in the process (0 when none). Legal during any capture. */                                 \
  X(stream_capture_status, (int dev, void *stream, int *out_status, uint64_t *out_id),                          \
    (dev, stream, out_status, out_id), POINT, GPU)                                                              \
  /* Starts capturing the work queued on `stream` (mode: DLS_CAPTURE_*). */                                     \
  X(stream_begin_capture, (int dev, void *stream, int mode), (dev, stream, mode), POINT, GPU)                   \
  /* Ends the capture begun on `stream` and instantiates it (GPU backends                                       \
   * with auto-free-on-launch): *out_graph is an executable graph. On failure                                   \
   * the capture is over and nothing is left behind. */                                                         \
  X(stream_end_capture, (int dev, void *stream, void **out_graph), (dev, stream, out_graph), OWN, GPU)          \
  /* Replays an executable graph on `stream` (stream-ordered). */                                               \
  X(graph_launch, (int dev, void *graph, void *stream), (dev, graph, stream), OWN, GPU)                         \
  /* Destroys an executable graph; replays already queued still run. */                                        \
  X(graph_destroy, (int dev, void *graph), (dev, graph), OWN, GPU)                                              \
  /* Sets the calling thread's capture mode (DLS_CAPTURE_*), returning the                                      \
   * previous one (cuThreadExchangeStreamCaptureMode). NULL where no capture                                    \
   * ever forbids a call (CPU). */                                                                              \
  X(thread_capture_mode, (int dev, int mode, int *out_prev), (dev, mode, out_prev), POINT, GPU)                 \
  /* ---- several devices (version 2) ---- */                                                                  \
  /* *out_can = 1 when kernels and copies queued on `dev` may address memory                                    \
   * of device `peer` directly (enabling peer access once); 0 otherwise. */                                     \
  X(peer_access, (int dev, int peer, int *out_can), (dev, peer, out_can), POINT, GPU)                           \
  /* Copies `size` bytes from `src` (memory of device `src_dev`) to `dst`                                       \
   * (memory of `dev`, or host), queued on `stream`, a stream of `dev`. The                                     \
   * driver copies directly where peer access works, else through the host. */                                 \
  X(memcpy_peer_async, (int dev, void *dst, int src_dev, const void *src, size_t size, void *stream),           \
    (dev, dst, src_dev, src, size, stream), POINT, GPU)                                                         \
  /* ---- code from source (version 3) ---- */                                                                 \
  /* The device's compile target, NUL-terminated in out_arch: "sm_90" on                                        \
   * CUDA, the gfx name on ROCm. DLS_ERR_NOT_SUPPORTED where it cannot tell. */                                 \
  X(device_arch, (int dev, char *out_arch, size_t size), (dev, out_arch, size), POINT, GPU)                    \
  /* ---- memory shared with other processes (version 5; NULL where the backend has none: CPU) ---- */          \
  /* Memory another process can map: an allocation of its own (not from the stream-ordered pool), usable by     \
   * work on every stream of the device at once. */                                                            \
  X(ipc_alloc, (int dev, size_t size, void **out_ptr), (dev, size, out_ptr), POINT, GPU)                        \
  /* Frees ipc_alloc's memory once the work queued on `stream` so far has passed. */                            \
  X(ipc_free, (int dev, void *ptr, void *stream), (dev, ptr, stream), POINT, GPU)                               \
  /* The DLS__IPC_BYTES bytes by which another process maps ipc_alloc's allocation at `ptr` (its base). */       \
  X(ipc_mem_export, (int dev, void *ptr, void *out_bytes), (dev, ptr, out_bytes), POINT, GPU)                   \
  /* Maps another process's allocation for device `dev` (peer access enabled when it lives on another device); \
   * *out_ptr is its base here, valid until ipc_mem_close. */                                                   \
  X(ipc_mem_open, (int dev, const void *bytes, void **out_ptr), (dev, bytes, out_ptr), POINT, GPU)              \
  X(ipc_mem_close, (int dev, void *ptr), (dev, ptr), POINT, GPU)                                                \
  /* An event other processes can open (no timing) and its DLS__IPC_BYTES bytes; ipc_event_release ends it. */  \
  X(ipc_event_create, (int dev, void **out_event, void *out_bytes), (dev, out_event, out_bytes), POINT, GPU)    \
  /* Opens another process's event in device `dev`'s context. */                                               \
  X(ipc_event_open, (int dev, const void *bytes, void **out_event), (dev, bytes, out_event), POINT, GPU)        \
  X(ipc_event_release, (int dev, void *event), (dev, event), POINT, GPU)                                        \
  /* On the device, in stream order: `stream` waits until the 32-bit word at `addr` reaches `value` (a cyclic    \
   * comparison: (int32_t)(*addr - value) >= 0), and writes `value` there after the work queued before (with a  \
   * system-wide memory fence). `addr` may be memory of another process (ipc_mem_open). */                      \
  X(stream_wait_value, (int dev, void *stream, void *addr, uint32_t value), (dev, stream, addr, value), POINT,   \
    GPU)                                                                                                        \
  X(stream_write_value, (int dev, void *stream, void *addr, uint32_t value), (dev, stream, addr, value), POINT,  \
    GPU)                                                                                                        \
  /* The device's 16-byte UUID: how another process finds the same device under its own ordinals. */           \
  X(device_uuid, (int dev, uint8_t *out_uuid), (dev, out_uuid), POINT, GPU)                                    \
  /* ---- the device's size (version 6; NULL where the backend has none: CPU) ---- */                          \
  /* The threads the device holds at once: its multiprocessors (compute units) times the threads each holds.    \
   * The core sizes the grid of its own built-in calls by it. */                                                \
  X(device_threads, (int dev, uint64_t *out_threads), (dev, out_threads), POINT, GPU)

/* A method's full parameter list: its backend, then `params` of the list. */
#define DLS__BACKEND_SELF(...) (const dls__backend *be, __VA_ARGS__)

struct dls__backend {
  uint32_t version;         /* DLS__BACKEND_VERSION */
  uint32_t size;            /* sizeof(dls__backend) */
  const char *name;         /* "cpu", "cuda", "hip" */
  DLDeviceType device_type; /* kDLCPU, kDLCUDA, kDLROCM */

  /* ---- life ---- */
  /* Loads the driver once (thread-safe). DLS_OK, or DLS_ERR_UNAVAILABLE with
   * a how-to-fix message; must never abort the process. */
  dls_status_t (*probe)(const dls__backend *be);
  dls_status_t (*device_count)(const dls__backend *be, int *out_count);
  /* Releases everything the backend made itself (no user objects remain). */
  void (*shutdown)(const dls__backend *be);

  /* ---- every other method (DLS__BACKEND_METHODS) ---- */
#define DLS__BACKEND_FIELD(method, params, args, fault, gpu) dls_status_t(*method) DLS__BACKEND_SELF params;
  DLS__BACKEND_METHODS(DLS__BACKEND_FIELD)
#undef DLS__BACKEND_FIELD
};

/* Latches (dls_latch_*) holding a stream, counted by the core: from a latch's
 * first wait until it is opened or destroyed. While one holds, a backend makes
 * no call of its own accord that waits for all work of a device (the debug
 * allocator's driver frees): that call would wait out the latch's timeout.
 * Backends only read it (backend.c). */
extern _Atomic int dls__latches_holding;

/* The backends compiled into this library. Each is always present: an
 * unavailable one fails its probe() with the reason. A GPU backend is a
 * dls__gpu_backend (gpu.h): its dls__backend first, then its vendor; the
 * rest of the code sees only the dls__backend (DLS__GPU_BACKEND_BASE). */
extern const dls__backend dls__cpu_backend;
typedef struct dls__gpu_backend dls__gpu_backend;
extern const dls__gpu_backend dls__cuda_backend;
extern const dls__gpu_backend dls__hip_backend;
/* The dls__backend a GPU backend begins with (an address constant). */
#define DLS__GPU_BACKEND_BASE(gpu_backend) ((const dls__backend *)(const void *)&(gpu_backend))

/* Every backend compiled in, written once, in the order device types are resolved:
 * X(its dls__backend, the DLPack device type it runs, that type's value). core/device.c's registry and its messages
 * naming the device types, and fault.c's wrappers, are made from it; a new backend is a line here, its extern above
 * and its vtable (docs/design.md, "Where to change what"). */
#define DLS__BACKENDS(X)                                     \
  X(&dls__cpu_backend, kDLCPU, 1)                            \
  X(DLS__GPU_BACKEND_BASE(dls__cuda_backend), kDLCUDA, 2)    \
  X(DLS__GPU_BACKEND_BASE(dls__hip_backend), kDLROCM, 10)
#define DLS__BACKEND_ADDRESS(be, type, value) be,
#define DLS__BACKEND_ONE(be, type, value) +1
#define DLS__BACKEND_TYPE_NAME(be, type, value) " " #type "=" #value
/* How many backends there are (a macro: the list is expanded where it is used, above the backends). */
#define DLS__NBACKENDS (0 DLS__BACKENDS(DLS__BACKEND_ONE))
/* The device types a backend runs, for messages: " kDLCPU=1 kDLCUDA=2 kDLROCM=10". */
#define DLS__BACKEND_TYPE_NAMES DLS__BACKENDS(DLS__BACKEND_TYPE_NAME)

#ifdef DLS_FAULT_INJECTION
/* The fault-injecting wrapper of a real backend (fault.c; one per backend,
 * made once): every fallible method an injectable point (base/fault.h). */
DLS__INTERNAL const dls__backend *dls__fault_backend(const dls__backend *real);
#else
#define dls__fault_backend(real) (real)
#endif

#endif /* DLSTREAM_BACKEND_H */
