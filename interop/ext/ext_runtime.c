/* SPDX-License-Identifier: Apache-2.0 */
/* The extension's entries about the runtime as a whole: the streams still busy at interpreter exit, the exports
 * still alive, and the fault injector's object counts (ext.h says what each may do). */
#include "base/fault.h"
#include "base/spin.h"
#include "core/buffer.h"
#include "core/capture.h"
#include "core/device.h"
#include "core/runtime.h"
#include "core/stream.h"
#include "core/tables.h"
#include "core/tensor.h"
#include "interop/dlpack/dlpack_internal.h"
#include "ext.h"

#include <stdio.h>

size_t dls__ext_exports_live(void) { return atomic_load(&dls__exports_live); }

/* ---- the streams dlstream knows, and which of them still have work ---- */

typedef struct busy_scan {
  dls__ext_busy *out;
  int max, n, more;
  const void *seen[256]; /* natives already asked, so each is asked once */
  int nseen;
} busy_scan;

/* The scan being made: the callbacks of dls__each_device and dls__handle_each take no context. */
static _Thread_local busy_scan *g_scan;

static void note_native(dls__device *dev, void *native, const char *what) {
  busy_scan *b = g_scan;
  if (native == (void *)UINTPTR_MAX)
    return; /* the "no stream" producer: no work runs there */
  for (int i = 0; i < b->nseen; i++)
    if (b->seen[i] == native)
      return;
  if (b->nseen < (int)(sizeof b->seen / sizeof b->seen[0]))
    b->seen[b->nseen++] = native;
  int idle = 1;
  if (dev->be->stream_query(dev->be, dev->id, native, &idle) != DLS_OK || idle)
    return; /* a stream the driver cannot ask is not waited for */
  if (b->n == b->max) {
    b->more++;
    return;
  }
  dls__ext_busy *e = &b->out[b->n++];
  snprintf(e->device, sizeof e->device, "%s", dev->name);
  snprintf(e->what, sizeof e->what, "%s", what);
  e->native = native;
}

static void note_stream(dls__stream *s) {
  if (s == NULL)
    return;
  uint64_t cap;
  if (dls__stream_capture(s, &cap) != DLS__CAPTURE_NONE)
    return; /* captured work does not run: shutdown discards it */
  dls__device *d = s->dev;
  const char *what = s->kind == DLS__STREAM_OWNED    ? "owned"
                     : s->kind == DLS__STREAM_POOLED  ? "pooled"
                     : s->kind == DLS__STREAM_FOREIGN ? "foreign"
                     : s == d->defaults[DLS_STREAM_PER_THREAD] ? "per-thread default"
                                                               : "legacy default";
  note_native(d, s->native, what);
}

static void note_buffer(dls__buffer *b) {
  note_stream(b->stream);
  dls__spin_lock(&b->mu);
  int n = b->nuses;
  dls__stream *uses[DLS__USES_INLINE * 4];
  if (n > (int)(sizeof uses / sizeof uses[0]))
    n = (int)(sizeof uses / sizeof uses[0]);
  for (int i = 0; i < n; i++)
    uses[i] = b->uses[i].stream;
  dls__spin_unlock(&b->mu);
  for (int i = 0; i < n; i++)
    note_stream(uses[i]);
}

static void each_stream(uint64_t id, void *obj) {
  (void)id;
  note_stream(obj);
}
static void each_buffer(uint64_t id, void *obj) {
  (void)id;
  note_buffer(obj);
}
static void each_tensor(uint64_t id, void *obj) {
  (void)id;
  note_buffer(((dls__tensor *)obj)->buf);
}

static void each_device(dls__device *d) {
  note_stream(d->defaults[DLS_STREAM_LEGACY]);
  note_stream(d->defaults[DLS_STREAM_PER_THREAD]);
  /* Pooled streams given back with work still queued. */
  void *pool[64];
  size_t n = 0;
  pthread_mutex_lock(&d->mu);
  for (size_t i = 0; i < d->stream_pool_n && n < 64; i++)
    pool[n++] = d->stream_pool[i];
  pthread_mutex_unlock(&d->mu);
  for (size_t i = 0; i < n; i++)
    note_native(d, pool[i], "pooled");
}

int dls__ext_busy_streams(dls__ext_busy *out, int max, int *out_more) {
  busy_scan b = {.out = out, .max = max};
  g_scan = &b;
  dls__each_device(each_device);
  dls__table_each(&dls__stream_table, each_stream);
  dls__table_each(&dls__tensor_table, each_tensor);
  dls__table_each(&dls__buffer_table, each_buffer);
  g_scan = NULL;
  *out_more = b.more;
  return b.n;
}

#ifdef DLS_FAULT_INJECTION
const char *dls__ext_fault_objects(int kind, uint64_t *out_created, uint64_t *out_destroyed) {
  if (kind < 0 || kind >= DLS_FAULT_OBJECT_KINDS)
    return NULL;
  dls_fault_objects((dls_fault_object_t)kind, out_created, out_destroyed);
  return dls_fault_object_name((dls_fault_object_t)kind);
}
#endif
