/* SPDX-License-Identifier: Apache-2.0 */
/* Handles, devices, backends and the life of the runtime. */
#ifndef DLSTREAM_RUNTIME_H
#define DLSTREAM_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "dlpack.h"
#include "export.h"
#include "status.h"

/* Every object is named by a handle: low 32 bits slot, high 32 bits
 * generation. `id == 0` is never valid. Destroying an object bumps its slot's
 * generation, so a stale handle fails with DLS_ERR_INVALID_HANDLE and a
 * message, never a crash. Handles may be copied freely and used from any
 * thread; destroying a handle while another thread is inside a call that
 * uses the same handle is a race in the caller, as with free(). */
typedef struct dls_stream_t { uint64_t id; } dls_stream_t;
typedef struct dls_event_t { uint64_t id; } dls_event_t;
typedef struct dls_buffer_t { uint64_t id; } dls_buffer_t;
typedef struct dls_tensor_t { uint64_t id; } dls_tensor_t;
typedef struct dls_module_t { uint64_t id; } dls_module_t;
typedef struct dls_function_t { uint64_t id; } dls_function_t;
typedef struct dls_group_t { uint64_t id; } dls_group_t;
typedef struct dls_latch_t { uint64_t id; } dls_latch_t;
typedef struct dls_graph_t { uint64_t id; } dls_graph_t;

/* The kinds of handle, for dls_live_handles(). */
typedef enum dls_handle_kind_t {
  DLS_HANDLE_STREAM = 1,
  DLS_HANDLE_EVENT = 2,
  DLS_HANDLE_BUFFER = 3,
  DLS_HANDLE_TENSOR = 4,
  DLS_HANDLE_MODULE = 5,
  DLS_HANDLE_FUNCTION = 6,
  DLS_HANDLE_GROUP = 7,
  DLS_HANDLE_LATCH = 8,
  DLS_HANDLE_GRAPH = 9,
  DLS_HANDLE_KIND_COUNT_ = 10 /* not a kind: one past the last */
} dls_handle_kind_t;

DLS_EXTERN_C_BEGIN

/* Initializes the runtime. Optional: every call initializes it on first use.
 * Thread-safe and idempotent. Backends are probed lazily, at the first call
 * that needs one, so a missing GPU driver never fails here. */
DLS_API dls_status_t dls_init(void);

/* Tears the runtime down: waits for deferred releases (every borrowed tensor's
 * deleter has run when this returns), returns pooled streams and events,
 * stops CPU workers. Handles still alive are destroyed and become stale.
 * After it, the next call initializes again. Not to be called concurrently
 * with other dlstream calls. */
DLS_API dls_status_t dls_shutdown(void);

/* DLS_OK if the backend for `device_type` (kDLCPU, kDLCUDA, kDLROCM) can be
 * used; otherwise DLS_ERR_UNAVAILABLE with dls_last_error() saying why and how
 * to fix it (for example, no libcuda.so.1 on this machine). */
DLS_API dls_status_t dls_backend_probe(DLDeviceType device_type);

/* Number of devices of a type: 1 for kDLCPU; 0 when the backend is
 * unavailable (which is not an error here). */
DLS_API dls_status_t dls_device_count(DLDeviceType device_type, int *out_count);

/* Blocks the calling thread until all work queued so far on every stream
 * dlstream holds on `device` has completed: each live stream handle of the
 * device (owned, pooled, wrapped foreign, group branches) and its default
 * streams once used, as dls_stream_synchronize() would one by one; then runs
 * the deferred releases that became due. Streams dlstream does not hold (a
 * framework's streams it never wrapped, streams already destroyed or returned
 * to the pool) are not waited for. Like dls_stream_synchronize it refuses with
 * DLS_ERR_STATE while a capture forbids this thread's host waits (before
 * waiting for anything) and at the first stream it finds being captured
 * (the streams before it were waited for; no capture is disturbed). An
 * unavailable backend is DLS_ERR_UNAVAILABLE. Thread-safe; work other threads
 * queue meanwhile may or may not be waited for. */
DLS_API dls_status_t dls_device_synchronize(DLDevice device);
/* Writes "cuda:0", "cpu:0" ... into buf (always NUL-terminated); returns buf. */
DLS_API const char *dls_device_str(DLDevice device, char *buf, size_t size);

/* Number of live handles of a kind (leak checks in tests). */
DLS_API size_t dls_live_handles(dls_handle_kind_t kind);

/* Number of borrowed releases waiting for other streams to pass. */
DLS_API size_t dls_deferred_pending(void);

/* Runs every deferred release whose streams have passed; returns how many
 * are still waiting. Never blocks. Called for you by synchronize calls. */
DLS_API size_t dls_deferred_poll(void);

DLS_EXTERN_C_END

/* Convenience: DLDevice literals. */
static inline DLDevice dls_device(DLDeviceType type, int32_t id) {
  DLDevice d;
  d.device_type = type;
  d.device_id = id;
  return d;
}
static inline DLDevice dls_cpu(void) { return dls_device(kDLCPU, 0); }
static inline DLDevice dls_cuda(int32_t id) { return dls_device(kDLCUDA, id); }

#endif /* DLSTREAM_RUNTIME_H */
