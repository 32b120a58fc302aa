/* SPDX-License-Identifier: Apache-2.0 */
/* Devices: the backend registry, probing, devices made on first use, their
 * pools of native events, their compile targets, and their end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"

/* Registry: one entry per backend, in the order device types are resolved (backend.h, DLS__BACKENDS). */
static const dls__backend *const g_backends[DLS__NBACKENDS] = {DLS__BACKENDS(DLS__BACKEND_ADDRESS)};
#define DLS__BACKEND_TYPE_FITS(be, type, value)                                                   \
  _Static_assert(type == value && value < DLS__DEVICE_TYPES, "a backend's device type: its value, " \
                                                             "an index of dls__devices");
DLS__BACKENDS(DLS__BACKEND_TYPE_FITS)
#undef DLS__BACKEND_TYPE_FITS

typedef struct dls__backend_state {
  pthread_mutex_t mu;
  _Atomic int probed; /* 0 not yet, 1 available, 2 unavailable */
  dls_status_t status;
  char message[512];
  int ndevices;
  _Atomic int ready[DLS__MAX_DEVICES];
  dls__device devices[DLS__MAX_DEVICES];
} dls__backend_state;

#define DLS__BACKEND_STATE(be, type, value) {.mu = PTHREAD_MUTEX_INITIALIZER},
static dls__backend_state g_state[DLS__NBACKENDS] = {DLS__BACKENDS(DLS__BACKEND_STATE)};
#undef DLS__BACKEND_STATE

#define DLS__BACKEND_TYPE(be, type, value) type,
static const DLDeviceType g_types[DLS__NBACKENDS] = {DLS__BACKENDS(DLS__BACKEND_TYPE)};
#undef DLS__BACKEND_TYPE

static int backend_index(DLDeviceType type) {
  for (size_t i = 0; i < DLS__NBACKENDS; i++)
    if (g_types[i] == type)
      return (int)i;
  return -1;
}

const dls__backend *dls__backend_for(DLDeviceType type) {
  int i = backend_index(type);
  return i < 0 ? NULL : g_backends[i];
}

/* Probes once per runtime life; the outcome (and its message) is cached. */
static dls_status_t probe_backend(int bi) {
  dls__backend_state *bs = &g_state[bi];
  int p = atomic_load_explicit(&bs->probed, memory_order_acquire);
  if (DLS__LIKELY(p == 1))
    return DLS_OK;
  if (p == 0) {
    pthread_mutex_lock(&bs->mu);
    if (atomic_load(&bs->probed) == 0) {
      const dls__backend *be = g_backends[bi];
      dls_status_t st = be->device_type == g_types[bi]
                            ? be->probe(be)
                            : dls__fail(DLS_ERR_INTERNAL, "the %s backend runs device type %d; DLS__BACKENDS lists %d",
                                        be->name, (int)be->device_type, (int)g_types[bi]);
      int n = 0;
      if (st == DLS_OK)
        st = be->device_count(be, &n);
      if (st == DLS_OK && n <= 0)
        st = dls__fail(DLS_ERR_UNAVAILABLE, "%s backend: no devices found", be->name);
      if (st == DLS_OK) {
        bs->ndevices = n > DLS__MAX_DEVICES ? DLS__MAX_DEVICES : n;
        atomic_store_explicit(&bs->probed, 1, memory_order_release);
      } else {
        bs->status = st;
        snprintf(bs->message, sizeof bs->message, "%s", dls_last_error());
        atomic_store_explicit(&bs->probed, 2, memory_order_release);
      }
    }
    pthread_mutex_unlock(&bs->mu);
    if (atomic_load(&bs->probed) == 1)
      return DLS_OK;
  }
  return dls__fail(bs->status, "%s", bs->message);
}

dls_status_t dls_backend_probe(DLDeviceType device_type) {
  DLS__ENTER("dls_backend_probe");
  int bi = backend_index(device_type);
  if (bi < 0)
    return dls__fail(DLS_ERR_INVALID_DEVICE,
                     "dls_backend_probe(device_type=%d): no backend for this device type (one of:"
                     DLS__BACKEND_TYPE_NAMES ")",
                     (int)device_type);
  return probe_backend(bi);
}

dls_status_t dls_device_count(DLDeviceType device_type, int *out_count) {
  DLS__ENTER("dls_device_count");
  DLS__OUT("dls_device_count", out_count);
  int bi = backend_index(device_type);
  if (bi < 0)
    return dls__fail(DLS_ERR_INVALID_DEVICE,
                     "dls_device_count(device_type=%d): no backend for this device type (one of:"
                     DLS__BACKEND_TYPE_NAMES ")",
                     (int)device_type);
  if (probe_backend(bi) == DLS_OK)
    *out_count = g_state[bi].ndevices;
  return DLS_OK;
}
static const char *type_name(DLDeviceType t) {
  switch (t) {
  case kDLCPU: return "cpu";
  case kDLCUDA: return "cuda";
  case kDLCUDAHost: return "cuda_host";
  case kDLCUDAManaged: return "cuda_managed";
  case kDLROCM: return "rocm";
  case kDLROCMHost: return "rocm_host";
  default: return NULL;
  }
}

const char *dls_device_str(DLDevice device, char *buf, size_t size) {
  if (buf == NULL || size == 0)
    return "";
  const char *n = type_name(device.device_type);
  if (n)
    snprintf(buf, size, "%s:%d", n, (int)device.device_id);
  else
    snprintf(buf, size, "device_type%d:%d", (int)device.device_type, (int)device.device_id);
  return buf;
}

_Atomic(dls__device *) dls__devices[DLS__DEVICE_TYPES][DLS__MAX_DEVICES];

/* The built-in kernels are loaded with the device, before dlstream queues anything there. Loading code may wait for
 * the device to go idle (CUDA loads a module's code lazily by default, and a load can drain the device's work): at a
 * built-in's first call, behind a stream that waits for what the host releases later (a latch, another process's
 * event), that call would wait on the host until the wait timed out. Asked of the backend itself, not of the fault
 * injector's wrapper (no fault point); a failure (built without kernels, a failed load) is reported by the first
 * built-in call, which tries again. Loaded under the backend's lock, before the device is marked ready: another thread
 * opening the device meanwhile waits for the load rather than queue work behind it (tests/c/test_device_open.c).
 * DLSTREAM_TEST_LAZY_BUILTINS=1 leaves the load to that call (the negative control
 * of tests/python/test_ipc.py's load-order test). */
static void builtins_preload(const dls__backend *be, int id) {
  const char *lazy = getenv("DLSTREAM_TEST_LAZY_BUILTINS");
  void *native;
  if (lazy == NULL || lazy[0] != '1') /* any built-in's name: the backend loads them all at once */
    (void)be->builtin_function(be, id, "dls_fill", &native);
}

dls__device *dls__device_open(DLDevice device, const char *call, dls_status_t *out_status) {
  int bi = backend_index(device.device_type);
  char name[32];
  if (DLS__UNLIKELY(bi < 0)) {
    *out_status = dls__fail(DLS_ERR_INVALID_DEVICE,
                            "%s(device=%s): no backend runs this device type (use one of:"
                            DLS__BACKEND_TYPE_NAMES ")",
                            call, dls_device_str(device, name, sizeof name));
    return NULL;
  }
  dls__backend_state *bs = &g_state[bi];
  int id = device.device_id;
  if (DLS__LIKELY(id >= 0 && id < DLS__MAX_DEVICES &&
                  atomic_load_explicit(&bs->ready[id], memory_order_acquire)))
    return &bs->devices[id];
  dls_status_t st = probe_backend(bi);
  if (st != DLS_OK) {
    *out_status = dls__fail_prefix(st, "%s(device=%s)", call, dls_device_str(device, name, sizeof name));
    return NULL;
  }
  if (id < 0 || id >= bs->ndevices) {
    *out_status = dls__fail(DLS_ERR_INVALID_DEVICE, "%s(device=%s): device id %d out of range (%d %s device%s)", call,
                            dls_device_str(device, name, sizeof name), id, bs->ndevices, g_backends[bi]->name,
                            bs->ndevices == 1 ? "" : "s");
    return NULL;
  }
  pthread_mutex_lock(&bs->mu);
  if (!atomic_load(&bs->ready[id])) {
    /* Before the device is ready: a thread opening it meanwhile waits here, and queues nothing behind the load. */
    builtins_preload(g_backends[bi], id);
    dls__device *d = &bs->devices[id];
    memset(d, 0, sizeof *d);
    d->be = dls__fault_backend(g_backends[bi]);
    d->device = device;
    d->id = id;
    dls_device_str(device, d->name, sizeof d->name);
    pthread_mutex_init(&d->mu, NULL);
    atomic_store_explicit(&bs->ready[id], 1, memory_order_release);
    if ((unsigned)device.device_type < DLS__DEVICE_TYPES)
      atomic_store_explicit(&dls__devices[device.device_type][id], d, memory_order_release);
  }
  pthread_mutex_unlock(&bs->mu);
  return &bs->devices[id];
}

dls__device *dls__device_peek(DLDeviceType type, int id) {
  int bi = backend_index(type);
  if (bi < 0 || id < 0 || id >= DLS__MAX_DEVICES || !atomic_load(&g_state[bi].ready[id]))
    return NULL;
  return &g_state[bi].devices[id];
}

void dls__each_device(void (*fn)(dls__device *dev)) {
  for (size_t bi = 0; bi < DLS__NBACKENDS; bi++)
    for (int i = 0; i < DLS__MAX_DEVICES; i++)
      if (atomic_load(&g_state[bi].ready[i]))
        fn(&g_state[bi].devices[i]);
}

/* ---- the device's pool of native events (no timing) ---- */

/* Idle events a device keeps; more are destroyed when they come back. */
#define DLS__EVENT_POOL_MAX 1024

/* A spinlock, not the device mutex: the pool is taken and refilled on the
 * hot paths (a use on another stream, a pooled dls_event_create) and each
 * hold is one pointer move. */
dls_status_t dls__event_pool_get(dls__device *dev, void **out_event) {
  dls__spin_lock(&dev->event_mu);
  if (DLS__LIKELY(dev->event_pool_n > 0)) {
    *out_event = dev->event_pool[--dev->event_pool_n];
    dls__spin_unlock(&dev->event_mu);
    return DLS_OK;
  }
  dls__spin_unlock(&dev->event_mu);
  return dev->be->event_create(dev->be, dev->id, DLS_EVENT_DEFAULT, out_event);
}

void dls__event_pool_put(dls__device *dev, void *event) {
  void **fresh = NULL;
  for (;;) {
    dls__spin_lock(&dev->event_mu);
    if (DLS__LIKELY(dev->event_pool_n < dev->event_pool_cap)) {
      dev->event_pool[dev->event_pool_n++] = event;
      dls__spin_unlock(&dev->event_mu);
      dls__free(fresh);
      return;
    }
    if (dev->event_pool == NULL && fresh != NULL) { /* the array is made once, at its full size */
      dev->event_pool = fresh;
      dev->event_pool_cap = DLS__EVENT_POOL_MAX;
      fresh = NULL;
      dls__spin_unlock(&dev->event_mu);
      continue;
    }
    bool full = dev->event_pool != NULL;
    dls__spin_unlock(&dev->event_mu);
    if (full || (fresh = dls__malloc(DLS__EVENT_POOL_MAX * sizeof *fresh)) == NULL) {
      dev->be->event_destroy(dev->be, dev->id, event);
      dls__free(fresh);
      return;
    }
  }
}

/* ---- facts ---- */

dls_status_t dls__device_arch(dls__device *dev, char *out_arch, size_t size) {
  if (size > 0)
    out_arch[0] = '\0';
  if (dev->be->device_arch == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED, "the %s backend does not report the compile target of %s",
                     dev->be->name, dev->name);
  return dev->be->device_arch(dev->be, dev->id, out_arch, size);
}

uint64_t dls__device_threads(dls__device *dev) {
  uint64_t n = atomic_load_explicit(&dev->threads, memory_order_relaxed);
  if (DLS__LIKELY(n != 0))
    return n;
  if (dev->be->device_threads == NULL || dev->be->device_threads(dev->be, dev->id, &n) != DLS_OK || n == 0)
    n = (uint64_t)1 << 20; /* a size only, never a failure: the kernels loop over any grid */
  atomic_store_explicit(&dev->threads, n, memory_order_relaxed);
  return n;
}

/* ---- the end ---- */

void dls__devices_shutdown(void) {
  for (size_t bi = 0; bi < DLS__NBACKENDS; bi++) {
    dls__backend_state *bs = &g_state[bi];
    for (int i = 0; i < DLS__MAX_DEVICES; i++) {
      if (!atomic_load(&bs->ready[i]))
        continue;
      dls__device *d = &bs->devices[i];
      for (size_t k = 0; k < d->event_pool_n; k++)
        d->be->event_destroy(d->be, d->id, d->event_pool[k]);
      dls__free(d->event_pool);
      if ((unsigned)d->device.device_type < DLS__DEVICE_TYPES)
        atomic_store(&dls__devices[d->device.device_type][i], NULL);
      pthread_mutex_destroy(&d->mu);
      memset(d, 0, sizeof *d);
      atomic_store(&bs->ready[i], 0);
    }
    if (atomic_load(&bs->probed) == 1)
      g_backends[bi]->shutdown(g_backends[bi]);
    atomic_store(&bs->probed, 0);
  }
}
