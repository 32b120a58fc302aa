/* SPDX-License-Identifier: Apache-2.0 */
/* The XLA handler's stream wrappers: one dlstream wrapper per XLA stream (and device), made at the first call that
 * runs on it and kept, so a call's execution pays a lookup, not a wrap.
 *
 * Readers take no lock. An entry is published once (native and device first, then its handle id) and its native
 * and device never change; only the id is replaced, by a wrapper of the same stream, when the old one went stale
 * (dls_shutdown ends every handle). A reader that read an id just before its replacement launches on a stale
 * handle, which fails cleanly, and then renews. */
#include <pthread.h>
#include <stdatomic.h>

#include "xla_internal.h"

#define CACHE_SLOTS 64

typedef struct entry {
  _Atomic(void *) native;
  _Atomic uint64_t device; /* device_type << 32 | device_id */
  _Atomic uint64_t id;     /* the wrapper's handle id; 0 while the entry is being filled */
} entry;

static entry g_entries[CACHE_SLOTS];
static _Atomic size_t g_count; /* entries published */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
_Atomic uint64_t dls__xla_wraps;

static uint64_t device_key(DLDevice d) { return (uint64_t)(uint32_t)d.device_type << 32 | (uint32_t)d.device_id; }

static uint64_t find(uint64_t dev, void *native) {
  size_t n = atomic_load_explicit(&g_count, memory_order_acquire);
  for (size_t i = 0; i < n; i++) {
    entry *e = &g_entries[i];
    if (atomic_load_explicit(&e->native, memory_order_relaxed) == native &&
        atomic_load_explicit(&e->device, memory_order_relaxed) == dev)
      return atomic_load_explicit(&e->id, memory_order_acquire);
  }
  return 0;
}

static dls_status_t wrap(DLDevice device, void *native, dls_stream_t *out) {
  if (native == NULL) { /* XLA on CUDA's legacy stream: the reserved handle, which needs no wrapper */
    *out = dls_stream_default(device, DLS_STREAM_LEGACY);
    return DLS_OK;
  }
  atomic_fetch_add_explicit(&dls__xla_wraps, 1, memory_order_relaxed);
  return dls_stream_wrap(device, native, out);
}

dls_status_t dls__xla_stream_get(DLDevice device, void *native, dls_stream_t *out_stream, int *out_owned) {
  uint64_t dev = device_key(device);
  *out_owned = 0;
  out_stream->id = find(dev, native);
  if (out_stream->id != 0)
    return DLS_OK;
  pthread_mutex_lock(&g_mu);
  out_stream->id = find(dev, native); /* another thread may have wrapped it meanwhile */
  dls_status_t st = DLS_OK;
  if (out_stream->id == 0) {
    size_t n = atomic_load_explicit(&g_count, memory_order_relaxed);
    st = wrap(device, native, out_stream);
    if (st == DLS_OK && n < CACHE_SLOTS) {
      atomic_store_explicit(&g_entries[n].native, native, memory_order_relaxed);
      atomic_store_explicit(&g_entries[n].device, dev, memory_order_relaxed);
      atomic_store_explicit(&g_entries[n].id, out_stream->id, memory_order_release);
      atomic_store_explicit(&g_count, n + 1, memory_order_release);
    } else if (st == DLS_OK) {
      *out_owned = 1; /* no room: this call's own wrapper */
    }
  }
  pthread_mutex_unlock(&g_mu);
  return st;
}

dls_status_t dls__xla_stream_renew(DLDevice device, void *native, dls_stream_t stale, dls_stream_t *out_stream) {
  uint64_t dev = device_key(device);
  pthread_mutex_lock(&g_mu);
  dls_status_t st = DLS_OK;
  size_t n = atomic_load_explicit(&g_count, memory_order_relaxed);
  out_stream->id = 0;
  for (size_t i = 0; i < n && out_stream->id == 0; i++) {
    entry *e = &g_entries[i];
    if (atomic_load_explicit(&e->native, memory_order_relaxed) != native ||
        atomic_load_explicit(&e->device, memory_order_relaxed) != dev)
      continue;
    uint64_t id = atomic_load_explicit(&e->id, memory_order_relaxed);
    if (id != stale.id) { /* renewed by another thread already */
      out_stream->id = id;
      break;
    }
    st = wrap(device, native, out_stream);
    if (st != DLS_OK)
      break;
    atomic_store_explicit(&e->id, out_stream->id, memory_order_release);
  }
  pthread_mutex_unlock(&g_mu);
  return st;
}

dls_status_t dls_xla_release(void) {
  pthread_mutex_lock(&g_mu);
  size_t n = atomic_load_explicit(&g_count, memory_order_relaxed);
  atomic_store_explicit(&g_count, 0, memory_order_release);
  for (size_t i = 0; i < n; i++) {
    dls_stream_t s = {atomic_exchange_explicit(&g_entries[i].id, 0, memory_order_acq_rel)};
    (void)dls_stream_destroy(s); /* stale after a dls_shutdown: nothing to free then */
  }
  pthread_mutex_unlock(&g_mu);
  return DLS_OK;
}
