/* SPDX-License-Identifier: Apache-2.0 */
/* The backend vtable: the one place where CUDA, HIP and the CPU differ.
 *
 * Rules every backend follows:
 * - Native objects are opaque pointers (CUstream, CUevent, CUfunction ...).
 * - Every method takes the device index first, so a GPU backend can make the
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

#define DLS__BACKEND_VERSION 3

/* Capture states of a native stream (the values of CUDA's CUstreamCaptureStatus). */
enum { DLS__CAPTURE_NONE = 0, DLS__CAPTURE_ACTIVE = 1, DLS__CAPTURE_INVALIDATED = 2 };

/* Which default stream stream_default() names. */
#define DLS__DEFAULT_LEGACY DLS_STREAM_LEGACY
#define DLS__DEFAULT_PER_THREAD DLS_STREAM_PER_THREAD

typedef struct dls__backend {
  uint32_t version;         /* DLS__BACKEND_VERSION */
  uint32_t size;            /* sizeof(dls__backend) */
  const char *name;         /* "cpu", "cuda", "hip" */
  DLDeviceType device_type; /* kDLCPU, kDLCUDA, kDLROCM */

  /* ---- life ---- */
  /* Loads the driver once (thread-safe). DLS_OK, or DLS_ERR_UNAVAILABLE with
   * a how-to-fix message; must never abort the process. */
  dls_status_t (*probe)(void);
  dls_status_t (*device_count)(int *out_count);
  /* Releases everything the backend made itself (no user objects remain). */
  void (*shutdown)(void);

  /* ---- streams ---- */
  dls_status_t (*stream_create)(int dev, unsigned flags, int priority, void **out_stream);
  dls_status_t (*stream_destroy)(int dev, void *stream);
  /* The native value of a default stream (kind DLS__DEFAULT_*). May create
   * it; it belongs to the backend (freed by shutdown, never by stream_destroy). */
  dls_status_t (*stream_default)(int dev, int kind, void **out_stream);
  /* Checks that a foreign native stream belongs to device `dev`; NULL method:
   * the driver cannot tell. */
  dls_status_t (*stream_check)(int dev, void *stream);
  dls_status_t (*stream_synchronize)(int dev, void *stream);
  dls_status_t (*stream_query)(int dev, void *stream, int *out_idle);
  dls_status_t (*stream_wait_event)(int dev, void *stream, void *event);
  dls_status_t (*stream_priority_range)(int dev, int *out_least, int *out_greatest);
  dls_status_t (*host_callback)(int dev, void *stream, dls_host_fn fn, void *user_data);

  /* ---- events ---- */
  dls_status_t (*event_create)(int dev, unsigned flags, void **out_event);
  dls_status_t (*event_destroy)(int dev, void *event);
  /* Checks that a foreign native event is usable on device `dev`; may be NULL. */
  dls_status_t (*event_check)(int dev, void *event);
  dls_status_t (*event_record)(int dev, void *event, void *stream);
  dls_status_t (*event_query)(int dev, void *event, int *out_complete);
  dls_status_t (*event_synchronize)(int dev, void *event);
  dls_status_t (*event_elapsed_ms)(int dev, void *start, void *end, float *out_ms);

  /* ---- memory ---- */
  /* Stream-ordered allocation: usable by work queued on `stream` after this. */
  dls_status_t (*mem_alloc)(int dev, size_t size, void *stream, void **out_ptr);
  /* Stream-ordered free: the memory may be reused once `stream` passes here. */
  dls_status_t (*mem_free)(int dev, void *ptr, void *stream);
  /* Asynchronous copy between any two addresses the device can reach. */
  dls_status_t (*memcpy_async)(int dev, void *dst, const void *src, size_t size, void *stream);
  /* Host memory the device can read and write while the host does too
   * (mapped, page-locked). *out_device is the device's address for it. */
  dls_status_t (*host_mapped_alloc)(int dev, size_t size, void **out_host, void **out_device);
  dls_status_t (*host_mapped_free)(int dev, void *host);

  /* ---- code ---- */
  dls_status_t (*module_load)(int dev, const void *image, size_t size, void **out_module);
  dls_status_t (*module_unload)(int dev, void *module);
  dls_status_t (*module_function)(int dev, void *module, const char *name, void **out_function);
  /* Native function of a built-in ("dls_fill" ... see builtin.h). Owned by the
   * backend until shutdown. DLS_ERR_UNAVAILABLE when built without kernels. */
  dls_status_t (*builtin_function)(int dev, const char *name, void **out_function);
  /* Wraps a host C kernel (CPU only; NULL elsewhere). */
  dls_status_t (*host_function)(int dev, const char *name, dls_host_kernel fn, void **out_function);
  dls_status_t (*host_function_destroy)(int dev, void *function);
  /* Queues a launch. params[i] points at argument i's value, sizes[i] is its
   * size in bytes; both are borrowed for the call (CUDA copies them at once,
   * the CPU backend copies them into its command). */
  dls_status_t (*launch)(int dev, void *function, void *stream, const dls_launch_config_t *config,
                         void **params, const uint32_t *sizes, int nparams);

  /* ---- graph capture (version 2; every method NULL where the backend has none) ---- */
  /* The capture state of a native stream (DLS__CAPTURE_*) and the id of its
   * capture, unique in the process (0 when none). Legal during any capture. */
  dls_status_t (*stream_capture_status)(int dev, void *stream, int *out_status, uint64_t *out_id);
  /* Starts capturing the work queued on `stream` (mode: DLS_CAPTURE_*). */
  dls_status_t (*stream_begin_capture)(int dev, void *stream, int mode);
  /* Ends the capture begun on `stream` and instantiates it (GPU backends
   * with auto-free-on-launch): *out_graph is an executable graph. On failure
   * the capture is over and nothing is left behind. */
  dls_status_t (*stream_end_capture)(int dev, void *stream, void **out_graph);
  /* Replays an executable graph on `stream` (stream-ordered). */
  dls_status_t (*graph_launch)(int dev, void *graph, void *stream);
  /* Destroys an executable graph; replays already queued still run. */
  dls_status_t (*graph_destroy)(int dev, void *graph);
  /* Sets the calling thread's capture mode (DLS_CAPTURE_*), returning the
   * previous one (cuThreadExchangeStreamCaptureMode). NULL where no capture
   * ever forbids a call (CPU). */
  dls_status_t (*thread_capture_mode)(int dev, int mode, int *out_prev);

  /* ---- several devices (version 2) ---- */
  /* *out_can = 1 when kernels and copies queued on `dev` may address memory
   * of device `peer` directly (enabling peer access once); 0 otherwise. */
  dls_status_t (*peer_access)(int dev, int peer, int *out_can);
  /* Copies `size` bytes from `src` (memory of device `src_dev`) to `dst`
   * (memory of `dev`, or host), queued on `stream`, a stream of `dev`. The
   * driver copies directly where peer access works, else through the host. */
  dls_status_t (*memcpy_peer_async)(int dev, void *dst, int src_dev, const void *src, size_t size, void *stream);

  /* ---- code from source (version 3) ---- */
  /* The device's compile target, NUL-terminated in out_arch: "sm_90" on
   * CUDA, the gfx name on ROCm. DLS_ERR_NOT_SUPPORTED where it cannot tell. */
  dls_status_t (*device_arch)(int dev, char *out_arch, size_t size);
} dls__backend;

/* Latches (dls_latch_*) holding a stream, counted by the core: from a latch's
 * first wait until it is opened or destroyed. While one holds, a backend makes
 * no call of its own accord that waits for all work of a device (the debug
 * allocator's driver frees): that call would wait out the latch's timeout.
 * Backends only read it (backend.c). */
extern _Atomic int dls__latches_holding;

/* The backends compiled into this library. Each is always present: an
 * unavailable one fails its probe() with the reason. */
extern const dls__backend dls__cpu_backend;
extern const dls__backend dls__cuda_backend;
extern const dls__backend dls__hip_backend;

#ifdef DLS_FAULT_INJECTION
/* The fault-injecting wrapper of a real backend (fault.c; one per backend,
 * made once): every fallible method an injectable point (base/fault.h). */
DLS__INTERNAL const dls__backend *dls__fault_backend(const dls__backend *real);
#else
#define dls__fault_backend(real) (real)
#endif

#endif /* DLSTREAM_BACKEND_H */
