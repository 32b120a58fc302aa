/* SPDX-License-Identifier: Apache-2.0 */
/* Devices: the backends behind them, each device's defaults and pools, and the device's facts. */
#ifndef DLSTREAM_CORE_DEVICE_H
#define DLSTREAM_CORE_DEVICE_H

#include "backend/backend.h"
#include "base/spin.h"
#include "core/runtime.h"
#include "kernels/builtin_table.h"

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
  void **stream_pool_origin; /* of each: the origin whose group's branch it is bound to (stream.c), or NULL */
  size_t stream_pool_n, stream_pool_cap, stream_pool_bound;
  dls__spin event_mu;  /* the event pool */
  void **event_pool;   /* idle native events (no timing); made at full size on first use */
  size_t event_pool_n, event_pool_cap;
  size_t pooled_out;   /* pooled streams handed out now */
  struct dls__function *builtins[DLS__NKERNEL]; /* cached built-ins and the core's twins (builtin.c) */
  void **in_capture;   /* pooled native streams still in a capture they joined: pooled again once it is over */
  void **in_capture_origin; /* of each, as stream_pool_origin */
  size_t in_capture_n, in_capture_cap;
  _Atomic int captures; /* captures dlstream knows to be underway on the device */
  struct dls__stream *live; /* stream objects alive on the device but its defaults (stream.c) */
  /* The caching allocator (cache.c): its state (0 until first used, then DLS__CACHE_ON or _OFF), the most bytes
   * it keeps idle (DLSTREAM_CACHE_LIMIT, dls_device_set_cache_limit), the bytes it keeps now, and the test-only
   * switch that hands blocks to another stream without the wait (DLSTREAM_TEST_CACHE_NO_WAIT=1). */
  _Atomic int cache_state;
  _Atomic size_t cache_limit;
  _Atomic size_t cache_bytes;
  bool cache_no_wait;
  _Atomic uint64_t threads; /* the threads it holds at once (dls__device_threads); 0: not asked yet */
} dls__device;

/* Devices already made, by DLDeviceType and id: the lookup of the hot paths. */
#define DLS__DEVICE_TYPES 16 /* above every backend's device type (device.c checks) */
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

/* Writes the device's compile target into out ("sm_90" on CUDA, the gfx
 * name on ROCm), for compiling kernels from source. DLS_ERR_NOT_SUPPORTED
 * (message set) when the backend cannot say (the HIP backend does not read
 * the gfx name yet): dls_module_compile then asks the compiler for its
 * default target (PTX on CUDA, which the driver compiles for the device when
 * the module loads). */
DLS__INTERNAL dls_status_t dls__device_arch(dls__device *dev, char *out_arch, size_t size);

/* The threads the device holds at once (its multiprocessors times the threads each holds), asked of the backend
 * once; where it cannot say (CPU, a failed query), 2^20: the grids of the core's built-in calls (builtin.c). */
DLS__INTERNAL uint64_t dls__device_threads(dls__device *dev);

/* Called by dls_shutdown once no stream is left: the event pools go, the
 * devices are forgotten, and each probed backend shuts down. */
DLS__INTERNAL void dls__devices_shutdown(void);

#endif /* DLSTREAM_CORE_DEVICE_H */
