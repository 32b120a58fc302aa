/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU backends' life: probe, devices and their first use, error messages, capture scopes (the shutdown is
 * gpu_shutdown.c's). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/gpu.h"

/* ---- errors ---- */

static dls_status_t dls__gpu_status(const dls__gpu *g, dls__gpu_result r) {
  switch (g->classify(r)) {
  case DLS__GPU_ERROR_OUT_OF_MEMORY: return DLS_ERR_OUT_OF_MEMORY;
  case DLS__GPU_ERROR_INVALID_VALUE: return DLS_ERR_INVALID_ARGUMENT;
  case DLS__GPU_ERROR_INVALID_DEVICE: return DLS_ERR_INVALID_DEVICE;
  case DLS__GPU_ERROR_NOT_SUPPORTED: return DLS_ERR_NOT_SUPPORTED;
  case DLS__GPU_ERROR_CAPTURE: return DLS_ERR_STATE;
  default: return DLS_ERR_BACKEND;
  }
}

static dls_status_t dls__gpu_vfail(const dls__gpu *g, dls_status_t status, dls__gpu_result r, int dev,
                                   const char *hint, const char *fmt, va_list ap) DLS__PRINTF(6, 0);
static dls_status_t dls__gpu_vfail(const dls__gpu *g, dls_status_t status, dls__gpu_result r, int dev,
                                   const char *hint, const char *fmt, va_list ap) {
  char what[256];
  vsnprintf(what, sizeof what, fmt, ap);
  return dls__fail(status, "%s on %s:%d: %s (%s)%s%s", what, g->devname, dev, g->error_name(r), g->error_string(r),
                   hint != NULL ? ": " : "", hint != NULL ? hint : "");
}

dls_status_t dls__gpu_fail(const dls__gpu *g, dls__gpu_result r, int dev, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dls_status_t st = dls__gpu_vfail(g, dls__gpu_status(g, r), r, dev, NULL, fmt, ap);
  va_end(ap);
  return st;
}

dls_status_t dls__gpu_fail_hint(const dls__gpu *g, dls_status_t status, dls__gpu_result r, int dev, const char *hint,
                                const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dls_status_t st = dls__gpu_vfail(g, status, r, dev, hint, fmt, ap);
  va_end(ap);
  return st;
}

/* ---- loading ---- */

void dls__gpu_unavailable(dls__gpu *g, const char *fmt, ...) {
  int n = snprintf(g->load_message, sizeof g->load_message, "%s backend unavailable: ", g->name);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g->load_message + n, sizeof g->load_message - (size_t)n, fmt, ap);
  va_end(ap);
  g->load_status = DLS_ERR_UNAVAILABLE;
  memset(&g->calls, 0, sizeof g->calls);
}

dls_status_t dls__gpu_devices_init(dls__gpu *g, int ndev) {
  g->devs = calloc((size_t)ndev, sizeof *g->devs);
  _Atomic(unsigned char) *peers = calloc((size_t)ndev * (size_t)ndev, sizeof *peers);
  if (g->devs == NULL || peers == NULL) {
    free(g->devs);
    free(peers);
    g->devs = NULL;
    dls__gpu_unavailable(g, "out of host memory for %d device records", ndev);
    return DLS_ERR_UNAVAILABLE;
  }
  for (int i = 0; i < ndev; i++) {
    pthread_mutex_init(&g->devs[i].mu, NULL);
    pthread_mutex_init(&g->devs[i].free_mu, NULL);
    g->devs[i].peers = peers + (size_t)i * (size_t)ndev;
  }
  const char *dbg = getenv("DLSTREAM_DEBUG_ALLOC");
  g->debug_alloc = dbg != NULL && dbg[0] != '\0' && strcmp(dbg, "0") != 0;
  g->ndev = ndev;
  g->load_status = DLS_OK;
  return DLS_OK;
}

dls_status_t dls__gpu_probe(const dls__backend *be) {
  dls__gpu *g = dls__gpu_of(be);
  pthread_once(g->once, g->load);
  if (DLS__LIKELY(g->load_status == DLS_OK))
    return DLS_OK;
  return dls__fail(g->load_status, "%s", g->load_message);
}

dls_status_t dls__gpu_device_count(const dls__backend *be, int *out_count) {
  dls__gpu *g = dls__gpu_of(be);
  pthread_once(g->once, g->load);
  *out_count = g->load_status == DLS_OK ? g->ndev : 0;
  return DLS_OK;
}

/* ---- capture scopes: the relaxed capture mode while captures are open (gpu.h, dls__gpu_enter) ---- */

_Atomic int dls__gpu_captures_open;

/* Serializes the backend's calls while a capture is open, but for waits (a
 * wait holds no lock: what it waits for may need another thread's call). */
static pthread_mutex_t g_capture_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void dls__gpu_scope_relax(dls__gpu *g, dls__gpu_scope *sc, bool wait) {
  if (!wait) {
    pthread_mutex_lock(&g_capture_mu);
    sc->locked = true;
  }
  sc->mode = DLS_CAPTURE_RELAXED;
  sc->relaxed = g->calls.capture_mode_exchange != NULL && g->calls.capture_mode_exchange(&sc->mode) == DLS__GPU_OK;
}

void dls__gpu_scope_unrelax(dls__gpu *g, dls__gpu_scope *sc) {
  if (sc->relaxed)
    (void)g->calls.capture_mode_exchange(&sc->mode);
  if (sc->locked)
    pthread_mutex_unlock(&g_capture_mu);
  sc->relaxed = sc->locked = false;
}

/* ---- devices ---- */

/* A stream-ordered pool that keeps freed memory cached (release threshold
 * UINT64_MAX). NULL where pools are unsupported, off or failing: the device
 * then parks its frees behind events (gpu_memory.c), which is always
 * correct. Needs the device current. */
static void *dls__gpu_pool_create(dls__gpu *g, dls__gpu_device *d, int dev) {
  const dls__gpu_calls *c = &g->calls;
  int supported = 0;
  if (g->debug_alloc || c->pool_create == NULL || c->pool_destroy == NULL || c->pool_set_attribute == NULL ||
      c->pool_alloc_async == NULL || c->mem_free_async == NULL)
    return NULL;
  if (c->device_attribute(&supported, g->k.attr_memory_pools_supported, d->handle) != DLS__GPU_OK || !supported)
    return NULL;
  dls__gpu_pool_props props;
  memset(&props, 0, sizeof props);
  props.alloc_type = g->k.pool_pinned;
  props.handle_types = g->k.pool_handle_none;
  props.location.type = g->k.pool_location_device;
  props.location.id = dev;
  void *pool = NULL;
  if (c->pool_create(&pool, &props) != DLS__GPU_OK)
    return NULL;
  uint64_t keep = UINT64_MAX;
  if (c->pool_set_attribute(pool, g->k.pool_attr_release_threshold, &keep) != DLS__GPU_OK) {
    c->pool_destroy(pool);
    return NULL;
  }
  /* A pool's memory is its device's alone unless access is granted: every
   * device that can reach this one may read and write it (copies between
   * devices; nothing else changes). A refusal only means no peer access. */
  for (int p = 0; c->pool_set_access != NULL && c->peer_can_access != NULL && p < g->ndev; p++) {
    int can = 0;
    if (p == dev || c->peer_can_access(&can, p, d->handle) != DLS__GPU_OK || !can)
      continue;
    dls__gpu_access_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = g->k.pool_location_device;
    desc.location.id = p;
    desc.flags = g->k.pool_access_read_write;
    (void)c->pool_set_access(pool, &desc, 1);
  }
  return pool;
}

dls_status_t dls__gpu_device_open(dls__gpu *g, int dev, dls__gpu_device *d) {
  dls_status_t st = DLS_OK;
  pthread_mutex_lock(&d->mu);
  if (atomic_load_explicit(&d->ready, memory_order_relaxed))
    goto out;
  st = g->device_open(g, dev, d);
  if (st != DLS_OK)
    goto out;
  int unified = 1;
  if (g->k.attr_unified_addressing != 0 &&
      g->calls.device_attribute(&unified, g->k.attr_unified_addressing, d->handle) != DLS__GPU_OK)
    unified = 0;
  d->unified = unified != 0;
  /* The pool is made with the device current; a failure only means no pool. */
  void *prev = NULL;
  if (g->calls.ctx_get(&prev) == DLS__GPU_OK && g->calls.ctx_set(d->ctx) == DLS__GPU_OK) {
    d->pool = dls__gpu_pool_create(g, d, dev);
    if (prev != d->ctx)
      g->calls.ctx_set(prev);
  }
  atomic_store_explicit(&d->ready, 1, memory_order_release);
out:
  pthread_mutex_unlock(&d->mu);
  return st;
}

const char *dls__gpu_call_name(const char *column) {
  const char *dot = strrchr(column, '.');
  if (dot != NULL)
    return dot + 1;
  if (strncmp(column, "dls__", 5) == 0) {
    const char *under = strchr(column + 5, '_'); /* after the vendor's prefix */
    if (under != NULL)
      return under + 1;
  }
  return strcmp(column, "0") == 0 ? "(none)" : column;
}

/* The compile target the loader read when it opened the device ("sm_90"),
 * where the vendor names one. */
dls_status_t dls__gpu_device_arch(const dls__backend *be, int dev, char *out_arch, size_t size) {
  dls__gpu *g = dls__gpu_of(be);
  dls__gpu_device *d = NULL;
  DLS__TRY(dls__gpu_device_get(g, dev, &d));
  if (strncmp(d->arch, "sm_", 3) != 0 && strncmp(d->arch, "gfx", 3) != 0)
    return dls__fail(DLS_ERR_NOT_SUPPORTED, "%s:%d does not name its compile target (%s)", g->devname, dev, d->arch);
  if (strlen(d->arch) >= size)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s:%d: target \"%s\" does not fit in %zu bytes", g->devname, dev,
                     d->arch, size);
  memcpy(out_arch, d->arch, strlen(d->arch) + 1);
  return DLS_OK;
}

/* Multiprocessors times the threads each holds at once (the core's built-in grids; asked once per device). */
dls_status_t dls__gpu_device_threads(const dls__backend *be, int dev, uint64_t *out_threads) {
  dls__gpu *g = dls__gpu_of(be);
  dls__gpu_device *d = NULL;
  DLS__TRY(dls__gpu_device_get(g, dev, &d));
  int processors = 0, threads = 0;
  dls__gpu_result r = g->calls.device_attribute(&processors, g->k.attr_multiprocessors, d->handle);
  if (r == DLS__GPU_OK)
    r = g->calls.device_attribute(&threads, g->k.attr_threads_per_multiprocessor, d->handle);
  if (r != DLS__GPU_OK)
    return dls__gpu_fail(g, r, dev, "%s(multiprocessors and their threads, device=%d)", g->names.device_attribute,
                         d->handle);
  *out_threads = processors > 0 && threads > 0 ? (uint64_t)processors * (uint64_t)threads : 0;
  return DLS_OK;
}
