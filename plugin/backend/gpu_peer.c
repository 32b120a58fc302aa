/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU backends' several devices: peer access, enabled once per pair, and copies between devices. */
#include "backend/gpu.h"

enum { DLS__GPU_PEER_UNKNOWN = 0, DLS__GPU_PEER_ENABLED = 1, DLS__GPU_PEER_IMPOSSIBLE = 2 };

/* Asks once per (dev, peer) pair; enabling happens in dev's context. */
static dls_status_t dls__gpu_peer_settle(dls__gpu *g, int dev, dls__gpu_device *d, int peer, dls__gpu_device *p,
                                         unsigned char *out_state) {
  int can = 0;
  dls__gpu_result r = g->calls.peer_can_access(&can, d->handle, p->handle);
  if (r != DLS__GPU_OK)
    return dls__gpu_fail(g, r, dev, "%s(device=%d, peer=%d)", g->names.peer_can_access, dev, peer);
  if (!can) {
    *out_state = DLS__GPU_PEER_IMPOSSIBLE;
    return DLS_OK;
  }
  dls__gpu_scope sc;
  dls__gpu_device *entered;
  DLS__TRY(dls__gpu_enter(g, dev, &entered, &sc));
  r = g->calls.peer_enable(p->ctx, 0);
  dls__gpu_leave(g, &sc);
  dls__gpu_error e = g->classify(r);
  if (r == DLS__GPU_OK || e == DLS__GPU_ERROR_PEER_ENABLED) { /* someone else (torch) enabled it: fine */
    *out_state = DLS__GPU_PEER_ENABLED;
    return DLS_OK;
  }
  if (e == DLS__GPU_ERROR_PEER_UNSUPPORTED) {
    *out_state = DLS__GPU_PEER_IMPOSSIBLE;
    return DLS_OK;
  }
  return dls__gpu_fail(g, r, dev, "%s(peer %s:%d)", g->names.peer_enable, g->devname, peer);
}

dls_status_t dls__gpu_peer_access(const dls__backend *be, int dev, int peer, int *out_can) {
  dls__gpu *g = dls__gpu_of(be);
  *out_can = 0;
  dls__gpu_device *d = NULL, *p = NULL;
  DLS__TRY(dls__gpu_device_get(g, dev, &d));
  DLS__TRY(dls__gpu_device_get(g, peer, &p));
  if (peer == dev) {
    *out_can = 1;
    return DLS_OK;
  }
  unsigned char state = atomic_load_explicit(&d->peers[peer], memory_order_acquire);
  dls_status_t st = DLS_OK;
  if (state == DLS__GPU_PEER_UNKNOWN) {
    pthread_mutex_lock(&d->mu);
    state = atomic_load_explicit(&d->peers[peer], memory_order_relaxed);
    if (state == DLS__GPU_PEER_UNKNOWN) {
      st = dls__gpu_peer_settle(g, dev, d, peer, p, &state);
      if (st == DLS_OK)
        atomic_store_explicit(&d->peers[peer], state, memory_order_release);
    }
    pthread_mutex_unlock(&d->mu);
  }
  *out_can = state == DLS__GPU_PEER_ENABLED;
  return st;
}

/* With one address space (every 64-bit CUDA device, every HIP device) the
 * plain copy finds both devices from the addresses, and copies directly
 * where peer access is enabled, else through the host; without one, the
 * explicit peer copy names both contexts. */
dls_status_t dls__gpu_memcpy_peer_async(const dls__backend *be, int dev, void *dst, int src_dev, const void *src,
                                        size_t size, void *stream) {
  dls__gpu *g = dls__gpu_of(be);
  if (size == 0)
    return DLS_OK;
  dls__gpu_device *p = NULL;
  DLS__TRY(dls__gpu_device_get(g, src_dev, &p));
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  bool plain = d->unified || g->calls.memcpy_peer_async == NULL;
  dls__gpu_result r = plain ? g->calls.memcpy_async(dst, src, size, stream)
                            : g->calls.memcpy_peer_async(dst, d->ctx, src, p->ctx, size, stream);
  dls__gpu_leave(g, &sc);
  if (DLS__UNLIKELY(r != DLS__GPU_OK))
    return dls__gpu_fail(g, r, dev, "%s(dst=%p on %s:%d, src=%p on %s:%d, size=%zu, stream=%p)",
                         plain ? g->names.memcpy_async : g->names.memcpy_peer_async, dst, g->devname, dev, src,
                         g->devname, src_dev, size, stream);
  return DLS_OK;
}
