/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU backends' memory shared with other processes: plain allocations, their interprocess handles,
 * interprocess events, the stream's waits on and writes of a 32-bit word, and the device's UUID.
 *
 * The stream-ordered pool's memory is not shareable by a handle of bytes (a pool exports through a file
 * descriptor of the OS, which another process can only receive over a socket), so memory another process maps is a
 * plain allocation of its own (gpu_memory.c's, reused from parked blocks as the pool-less path reuses them).
 * A vendor whose table lacks a call (HIP, whose IPC calls are not wired; a CUDA driver older than 11.7) refuses
 * each method with DLS_ERR_NOT_SUPPORTED, naming what is missing. */
#include <string.h>

#include "backend/gpu.h"

/* The refusal of a method whose driver call the vendor's table lacks. */
static dls_status_t dls__gpu_no_ipc(const dls__gpu *g, int dev, const char *what) {
  if (strcmp(what, "(none)") == 0)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s:%d cannot share memory with other processes: dlstream's %s backend does not wire its "
                     "interprocess calls yet (CUDA only)",
                     g->devname, dev, g->name);
  return dls__fail(DLS_ERR_NOT_SUPPORTED,
                   "%s:%d cannot share memory with other processes: the driver lacks %s (CUDA 11.7 or newer "
                   "needed)",
                   g->devname, dev, what);
}

#define DLS__GPU_NEEDS(g, dev, slot)                  \
  do {                                                \
    if (DLS__UNLIKELY((g)->calls.slot == NULL))       \
      return dls__gpu_no_ipc((g), (dev), (g)->names.slot); \
  } while (0)

/* A plain allocation (out_ptr set) or its free, in the device's context. */
static dls_status_t plain_in_device(dls__gpu *g, int dev, size_t size, void *ptr, void *stream, void **out_ptr) {
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  dls_status_t st = out_ptr != NULL ? dls__gpu_plain_alloc(g, dev, d, size, out_ptr)
                                    : dls__gpu_plain_free(g, dev, d, ptr, stream);
  dls__gpu_leave(g, &sc);
  return st;
}

dls_status_t dls__gpu_ipc_alloc(const dls__backend *be, int dev, size_t size, void **out_ptr) {
  dls__gpu *g = dls__gpu_of(be);
  *out_ptr = NULL;
  DLS__GPU_NEEDS(g, dev, ipc_mem_get);
  return size == 0 ? DLS_OK : plain_in_device(g, dev, size, NULL, NULL, out_ptr);
}

dls_status_t dls__gpu_ipc_free(const dls__backend *be, int dev, void *ptr, void *stream) {
  return ptr == NULL ? DLS_OK : plain_in_device(dls__gpu_of(be), dev, 0, ptr, stream, NULL);
}

dls_status_t dls__gpu_ipc_mem_export(const dls__backend *be, int dev, void *ptr, void *out_bytes) {
  dls__gpu *g = dls__gpu_of(be);
  DLS__GPU_NEEDS(g, dev, ipc_mem_get);
  DLS__GPU_CALL(g, dev, g->calls.ipc_mem_get(out_bytes, ptr), "%s(ptr=%p)", g->names.ipc_mem_get, ptr);
  return DLS_OK;
}

dls_status_t dls__gpu_ipc_mem_open(const dls__backend *be, int dev, const void *bytes, void **out_ptr) {
  dls__gpu *g = dls__gpu_of(be);
  *out_ptr = NULL;
  DLS__GPU_NEEDS(g, dev, ipc_mem_open);
  DLS__GPU_CALL(g, dev, g->calls.ipc_mem_open(out_ptr, bytes, g->k.ipc_lazy_peer), "%s(flags=lazy peer access)",
                g->names.ipc_mem_open);
  return DLS_OK;
}

dls_status_t dls__gpu_ipc_mem_close(const dls__backend *be, int dev, void *ptr) {
  dls__gpu *g = dls__gpu_of(be);
  DLS__GPU_NEEDS(g, dev, ipc_mem_close);
  DLS__GPU_CALL(g, dev, g->calls.ipc_mem_close(ptr), "%s(ptr=%p)", g->names.ipc_mem_close, ptr);
  return DLS_OK;
}

dls_status_t dls__gpu_ipc_event_create(const dls__backend *be, int dev, void **out_event, void *out_bytes) {
  dls__gpu *g = dls__gpu_of(be);
  *out_event = NULL;
  DLS__GPU_NEEDS(g, dev, ipc_event_get);
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  void *ev = NULL;
  const char *what = g->names.event_create;
  dls__gpu_result r = g->calls.event_create(&ev, g->k.event_interprocess);
  if (r == DLS__GPU_OK) {
    what = g->names.ipc_event_get;
    r = g->calls.ipc_event_get(out_bytes, ev);
    if (r != DLS__GPU_OK)
      g->calls.event_destroy(ev);
  }
  dls__gpu_leave(g, &sc);
  if (r != DLS__GPU_OK)
    return dls__gpu_fail(g, r, dev, "%s (an interprocess event)", what);
  *out_event = ev;
  return DLS_OK;
}

dls_status_t dls__gpu_ipc_event_open(const dls__backend *be, int dev, const void *bytes, void **out_event) {
  dls__gpu *g = dls__gpu_of(be);
  *out_event = NULL;
  DLS__GPU_NEEDS(g, dev, ipc_event_open);
  DLS__GPU_CALL(g, dev, g->calls.ipc_event_open(out_event, bytes), "%s", g->names.ipc_event_open);
  return DLS_OK;
}

dls_status_t dls__gpu_ipc_event_release(const dls__backend *be, int dev, void *event) {
  dls__gpu *g = dls__gpu_of(be);
  if (event != NULL)
    DLS__GPU_CALL(g, dev, g->calls.event_destroy(event), "%s(event=%p)", g->names.event_destroy, event);
  return DLS_OK;
}

dls_status_t dls__gpu_stream_wait_value(const dls__backend *be, int dev, void *stream, void *addr, uint32_t value) {
  dls__gpu *g = dls__gpu_of(be);
  DLS__GPU_NEEDS(g, dev, stream_wait_value32);
  DLS__GPU_CALL(g, dev, g->calls.stream_wait_value32(stream, addr, value, g->k.wait_value_geq),
                "%s(stream=%p, addr=%p, value=%u, flags=geq)", g->names.stream_wait_value32, stream, addr, value);
  return DLS_OK;
}

dls_status_t dls__gpu_stream_write_value(const dls__backend *be, int dev, void *stream, void *addr,
                                         uint32_t value) {
  dls__gpu *g = dls__gpu_of(be);
  DLS__GPU_NEEDS(g, dev, stream_write_value32);
  DLS__GPU_CALL(g, dev, g->calls.stream_write_value32(stream, addr, value, g->k.write_value_fenced),
                "%s(stream=%p, addr=%p, value=%u)", g->names.stream_write_value32, stream, addr, value);
  return DLS_OK;
}

/* Asked of every device by an importer looking for the exporter's: a device not opened yet stays so (its context is
 * not made for the question; the driver's device handle of an ordinal is the ordinal, for both vendors). */
dls_status_t dls__gpu_device_uuid(const dls__backend *be, int dev, uint8_t *out_uuid) {
  dls__gpu *g = dls__gpu_of(be);
  DLS__GPU_NEEDS(g, dev, device_uuid);
  if ((unsigned)dev >= (unsigned)g->ndev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s:%d does not exist: %d %s device(s) visible", g->devname, dev,
                     g->ndev, g->devname);
  dls__gpu_device *d = &g->devs[dev];
  int handle = atomic_load_explicit(&d->ready, memory_order_acquire) ? d->handle : dev;
  dls__gpu_result r = g->calls.device_uuid(out_uuid, handle);
  if (r != DLS__GPU_OK)
    return dls__gpu_fail(g, r, dev, "%s(device=%d)", g->names.device_uuid, handle);
  return DLS_OK;
}
