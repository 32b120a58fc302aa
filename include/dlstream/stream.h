/* SPDX-License-Identifier: Apache-2.0 */
/* Streams: ordered queues of device work, owned, pooled, foreign or default. */
#ifndef DLSTREAM_STREAM_H
#define DLSTREAM_STREAM_H

#include "runtime.h"

/* The reserved default streams. Their values are the DLPack stream values
 * for CUDA (1 legacy, 2 per-thread); use dls_stream_default() for a handle. */
#define DLS_STREAM_LEGACY 1
#define DLS_STREAM_PER_THREAD 2

/* Reserved handles carry this generation; slot bits hold kind and device. */
#define DLS_STREAM_RESERVED_GENERATION 0xFFFFFFFFu

/* Stream creation flags. */
#define DLS_STREAM_NON_BLOCKING 0u /* default: no implicit sync with the legacy stream */
#define DLS_STREAM_BLOCKING 1u     /* syncs with the legacy default stream (CUDA rules) */

typedef struct dls_stream_options_t {
  int32_t priority; /* 0 = default; lower is more urgent (CUDA convention); checked
                       against dls_stream_priority_range() */
  uint32_t flags;   /* DLS_STREAM_* flags */
} dls_stream_options_t;

/* Host callback: runs on a backend thread once the work queued before it on
 * the stream has completed. It must not call dlstream or the driver, and must
 * return promptly (later work on the stream waits for it). */
typedef void (*dls_host_fn)(void *user_data);

DLS_EXTERN_C_BEGIN

/* A handle naming the legacy (kind = DLS_STREAM_LEGACY) or per-thread
 * (DLS_STREAM_PER_THREAD) default stream of a device. Needs no init and is
 * never stale; destroying it is a no-op. On the CPU backend both name one
 * shared worker stream per device. */
static inline dls_stream_t dls_stream_default(DLDevice device, int kind) {
  dls_stream_t s;
  s.id = ((uint64_t)DLS_STREAM_RESERVED_GENERATION << 32) |
         ((uint64_t)(kind & 0xff) << 24) | ((uint64_t)(device.device_type & 0xff) << 16) |
         (uint64_t)(device.device_id & 0xffff);
  return s;
}

/* Creates an owned stream (non-blocking unless DLS_STREAM_BLOCKING). opt_options
 * may be NULL. Owned by caller: dls_stream_destroy(). */
DLS_API dls_status_t dls_stream_create(DLDevice device, const dls_stream_options_t *opt_options,
                                       dls_stream_t *out_stream);

/* Hands out a pooled stream of the device, distinct from every other pooled
 * stream currently handed out. Much cheaper than create. Owned by caller:
 * dls_stream_destroy() returns it to the pool. */
DLS_API dls_status_t dls_stream_acquire(DLDevice device, dls_stream_t *out_stream);

/* Wraps a native stream made by someone else (torch, CuPy, JAX, the driver):
 * a CUstream on CUDA, a hipStream_t on ROCm. NULL names the legacy default
 * stream, (void *)2 the per-thread one (CUDA's CU_STREAM_PER_THREAD). The
 * stream must belong to `device` (checked where the driver can tell). The
 * wrapper is owned by caller (dls_stream_destroy frees it); the native stream
 * is never destroyed by dlstream and must outlive the wrapper. */
DLS_API dls_status_t dls_stream_wrap(DLDevice device, void *native, dls_stream_t *out_stream);

/* Owned: destroys the native stream once its queued work completes (the host
 * does not wait). Pooled: returns it to the pool. Foreign: frees the wrapper.
 * Default handles and {0}: no-op, DLS_OK. The handle is stale afterwards. */
DLS_API dls_status_t dls_stream_destroy(dls_stream_t stream);

/* Blocks the calling thread until all work queued on the stream completes. */
DLS_API dls_status_t dls_stream_synchronize(dls_stream_t stream);

/* *out_idle = 1 when all queued work has completed, 0 otherwise. */
DLS_API dls_status_t dls_stream_query(dls_stream_t stream, int *out_idle);

/* Work queued on `stream` after this call waits until `event`'s most recent
 * record (at the time of this call) completes. The host does not wait. */
DLS_API dls_status_t dls_stream_wait_event(dls_stream_t stream, dls_event_t event);

/* Work queued on `stream` after this call waits for all work queued on
 * `other` before it. Both on one device; the host does not wait. */
DLS_API dls_status_t dls_stream_wait_stream(dls_stream_t stream, dls_stream_t other);

/* Queues a host callback (see dls_host_fn). */
DLS_API dls_status_t dls_stream_add_callback(dls_stream_t stream, dls_host_fn fn, void *user_data);

/* The native stream (CUstream ...; NULL for CUDA's legacy stream). Borrowed:
 * valid while the handle is. */
DLS_API dls_status_t dls_stream_native(dls_stream_t stream, void **out_native);

/* The device of a stream. */
DLS_API dls_status_t dls_stream_device(dls_stream_t stream, DLDevice *out_device);

/* Priorities the device accepts: `greatest` is the most urgent (lowest number). */
DLS_API dls_status_t dls_stream_priority_range(DLDevice device, int *out_least, int *out_greatest);

DLS_EXTERN_C_END

#endif /* DLSTREAM_STREAM_H */
