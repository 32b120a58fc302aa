/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU backends' end: each open device's built-ins, parked memory, pool and context. Above the other GPU files:
 * it calls them, and none calls it. */
#include <string.h>

#include "backend/gpu.h"

/* Unloads the built-ins, settles parked memory, destroys the pools (memory
 * still owed to a pool is released by the driver once freed) and lets the
 * vendor release what the device held. The library stays loaded, so a later
 * probe and first use start afresh. */
void dls__gpu_shutdown(const dls__backend *be) {
  dls__gpu *g = dls__gpu_of(be);
  if (g->load_status != DLS_OK)
    return;
  for (int i = 0; i < g->ndev; i++) {
    dls__gpu_device *d = &g->devs[i];
    pthread_mutex_lock(&d->mu);
    if (atomic_load_explicit(&d->ready, memory_order_relaxed)) {
      void *prev = NULL;
      g->calls.ctx_get(&prev);
      g->calls.ctx_set(d->ctx);
      if (d->builtins != NULL)
        g->calls.module_unload(d->builtins);
      dls__gpu_memory_release(g, d);
      if (d->pool != NULL)
        g->calls.pool_destroy(d->pool);
      if (prev != d->ctx)
        g->calls.ctx_set(prev);
      g->device_close(g, d);
      d->pool = NULL;
      d->builtins = NULL;
      memset(d->builtin_fns, 0, sizeof d->builtin_fns);
      for (int p = 0; p < g->ndev; p++)
        atomic_store_explicit(&d->peers[p], 0, memory_order_relaxed);
      atomic_store_explicit(&d->ready, 0, memory_order_release);
    }
    pthread_mutex_unlock(&d->mu);
  }
}
