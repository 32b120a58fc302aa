/* SPDX-License-Identifier: Apache-2.0 */
/* Latches: host-visible flags a stream waits on until the host opens them (the latch built-in). */
#include <pthread.h>
#include <stdlib.h>

#include "core/access.h"
#include "core/buffer.h"
#include "core/builtin.h"
#include "core/capture.h"
#include "core/latch.h"
#include "core/launch.h"

typedef struct dls__latch {
  dls__device *dev;
  dls__buffer *mem;     /* borrowed view of the mapped words; its release frees them */
  uint32_t *host;       /* [0] flag, [1] timed out */
  uint32_t *device;     /* the same words as the device sees them */
  uint64_t id;
  atomic_bool holding;  /* counted in dls__latches_holding: waited on, not opened yet */
} dls__latch;

/* The latch is waited on: it holds a stream until it is opened. */
static void latch_hold(dls__latch *l) {
  if (!atomic_exchange(&l->holding, true))
    atomic_fetch_add(&dls__latches_holding, 1);
}

/* Opened or destroyed: it holds nothing from now on. */
static void latch_let_go(dls__latch *l) {
  if (atomic_exchange(&l->holding, false))
    atomic_fetch_sub(&dls__latches_holding, 1);
}

/* A latch's two words, host-mapped. A latch's release keeps them for the next latch of its device instead of freeing
 * them: the driver's free of page-locked memory (cuMemFreeHost) may wait for the whole device, and a release runs
 * from the deferred queue at any later call, when another latch may hold a stream; that free would then wait out the
 * other latch's timeout on the host. The kept words go back to the driver at dls_shutdown. */
typedef struct dls__mapped {
  dls__device *dev;
  void *host;
  void *device;
  struct dls__mapped *next;
} dls__mapped;

static pthread_mutex_t g_spare_mu = PTHREAD_MUTEX_INITIALIZER;
static dls__mapped *g_spare; /* kept words, any device's */

static void mapped_release(void *user_data) {
  dls__mapped *m = user_data;
  pthread_mutex_lock(&g_spare_mu);
  m->next = g_spare;
  g_spare = m;
  pthread_mutex_unlock(&g_spare_mu);
}

/* Kept words of `dev`, or NULL. */
static dls__mapped *mapped_reuse(dls__device *dev) {
  pthread_mutex_lock(&g_spare_mu);
  dls__mapped **at = &g_spare;
  while (*at != NULL && (*at)->dev != dev)
    at = &(*at)->next;
  dls__mapped *m = *at;
  if (m != NULL)
    *at = m->next;
  pthread_mutex_unlock(&g_spare_mu);
  return m;
}

void dls__latches_shutdown(void) {
  pthread_mutex_lock(&g_spare_mu);
  dls__mapped *m = g_spare;
  g_spare = NULL;
  pthread_mutex_unlock(&g_spare_mu);
  while (m != NULL) {
    dls__mapped *next = m->next;
    m->dev->be->host_mapped_free(m->dev->be, m->dev->id, m->host);
    dls__free(m);
    m = next;
  }
}

dls_status_t dls_latch_create(DLDevice device, dls_latch_t *out_latch) {
  static const char call[] = "dls_latch_create";
  DLS__ENTER(call);
  DLS__OUT(call, out_latch);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  dls__stream *none;
  st = dls__stream_default(dev, DLS__STREAM_NONE, &none);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(device=%s)", call, dev->name);
  dls__latch *l = dls__calloc(1, sizeof *l);
  if (l == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  dls__mapped *m = mapped_reuse(dev);
  if (m == NULL) {
    m = dls__calloc(1, sizeof *m);
    void *host, *dptr;
    st = m == NULL ? dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call)
                   : dev->be->host_mapped_alloc(dev->be, dev->id, 2 * sizeof(uint32_t), &host, &dptr);
    if (st != DLS_OK) {
      dls__free(l);
      dls__free(m);
      return dls__fail_prefix(st, "%s(device=%s)", call, dev->name);
    }
    m->dev = dev;
    m->host = host;
    m->device = dptr;
  }
  void *host = m->host, *dptr = m->device;
  st = dls__buffer_borrow(dev, dptr, 2 * sizeof(uint32_t), none, mapped_release, m, &l->mem);
  if (st != DLS_OK) {
    st = dls__fail_prefix(st, "%s(device=%s)", call, dev->name);
    mapped_release(m);
    dls__free(l);
    return st;
  }
  l->dev = dev;
  l->host = host;
  l->device = dptr;
  __atomic_store_n(&l->host[0], 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&l->host[1], 0u, __ATOMIC_RELEASE);
  l->id = dls__table_add(&dls__latch_table, l);
  if (l->id == 0) {
    dls__buffer_unref(l->mem);
    dls__free(l);
    return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
  }
  out_latch->id = l->id;
  return DLS_OK;
}


/* dls_latch_wait's checks and queued wait, pinned. */
static dls_status_t latch_wait_pinned(const char *call, dls__latch *l, dls__stream *s, uint64_t timeout_ns) {
  uint64_t cap = 0;
  if (dls__stream_capture(s, &cap) != DLS__CAPTURE_NONE) {
    char d[128];
    return dls__fail(DLS_ERR_STATE,
                     "%s: %s: a latch is opened by the host once, but a graph replays its wait every time; "
                     "latches are refused in captures (nothing was queued, the capture is still valid)",
                     call, dls__stream_describe(s, cap, d, sizeof d));
  }
  dls__function *f;
  DLS__TRY(dls__builtin_at(s->dev, DLS__BI_LATCH, call, &f));
  dls_arg_t args[3] = {dls_arg_ptr(l->device), dls_arg_u64(timeout_ns), dls_arg_ptr(l->device + 1)};
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  /* The flag memory is freed only after every stream that waited passes:
   * its use entry is made first, so noting the wait after needs no memory.
   * Waits are reads, so streams held by one latch are not ordered after
   * each other. */
  dls__accesses acc = {.n = 0};
  dls__access_add(&acc, l->mem, DLS_ACCESS_READ);
  dls_status_t st = dls__access_begin(&acc, s);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s", call);
  (void)dls__access_end(&acc, false);
  return dls__launch_args(call, f, s, &cfg, args, 3);
}

dls_status_t dls_latch_wait(dls_latch_t latch, dls_stream_t stream, uint64_t timeout_ns) {
  static const char call[] = "dls_latch_wait";
  DLS__ENTER(call);
  DLS__GET_OF(latch, l, latch, call, "latch");
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (s->dev != l->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: latch is on %s but stream is on %s", call, l->dev->name,
                     s->dev->name);
  if (timeout_ns == 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(timeout_ns=0): a latch wait needs a timeout", call);
  /* Checked and queued in one pin: a capture begun in between would take the wait into its graph. */
  dls__capture_pin();
  dls_status_t st = latch_wait_pinned(call, l, s, timeout_ns);
  dls__capture_unpin();
  DLS__TRY(st);
  latch_hold(l);
  if (__atomic_load_n(&l->host[0], __ATOMIC_ACQUIRE) != 0)
    latch_let_go(l); /* opened already, or meanwhile by another thread */
  st = dls__buffer_access(l->mem, s, DLS_ACCESS_READ, false);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_latch_open(dls_latch_t latch) {
  static const char call[] = "dls_latch_open";
  DLS__ENTER(call);
  DLS__GET_OF(latch, l, latch, call, "latch");
  __atomic_store_n(&l->host[0], 1u, __ATOMIC_RELEASE);
  latch_let_go(l);
  return DLS_OK;
}

dls_status_t dls_latch_status(dls_latch_t latch) {
  static const char call[] = "dls_latch_status";
  DLS__ENTER(call);
  DLS__GET_OF(latch, l, latch, call, "latch");
  if (__atomic_load_n(&l->host[1], __ATOMIC_ACQUIRE) != 0)
    return dls__fail(DLS_ERR_TIMEOUT, "%s: a wait on the latch timed out before it was opened (its stream went on)",
                     call);
  return DLS_OK;
}

dls_status_t dls_latch_destroy(dls_latch_t latch) {
  static const char call[] = "dls_latch_destroy";
  if (latch.id == 0)
    return DLS_OK;
  DLS__ENTER(call);
  DLS__GET_OF(latch, l, latch, call, "latch");
  /* Opened at once: no stream waits on a latch nobody can open any more. */
  __atomic_store_n(&l->host[0], 1u, __ATOMIC_RELEASE);
  latch_let_go(l);
  DLS__END(&dls__latch_table, latch, call, "latch");
  return DLS_OK;
}

void dls__latch_drop(void *obj) {
  dls__latch *l = obj;
  latch_let_go(l);
  dls__buffer_unref(l->mem);
  dls__free(l);
}
dls__table dls__latch_table = DLS__TABLE("latch", DLS_HANDLE_LATCH, dls__latch_drop, NULL);
