/* SPDX-License-Identifier: Apache-2.0 */
/* Memory shared with other processes: IPC-capable buffers, their exports (the memory, an interprocess event recorded
 * after the last write, a gate word) and their imports (a borrowed buffer whose producer waited for that event), and
 * the frees on both sides, ordered on the device.
 *
 * Exporter: IPC-capable memory is a borrowed buffer of its allocation stream, whose release (run once the uses on
 * other streams passed) hands the memory to a private stream that waits for the allocation stream's work so far and
 * for each export's gate word, then frees it there: the host never waits, and the memory is reused only after every
 * import's close. Importer: an import is a borrowed buffer whose producer is the import's stream, which first waits
 * for the exporter's event; its release (run once the uses on other streams passed) writes the gate word on that
 * stream, after its own uses, and unmaps the memory once that write has run. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/capture.h"
#include "core/deferred.h"
#include "core/ipc.h"

static const char ipc_magic[8] = "dlsIPC";

/* DLSTREAM_TEST_IPC_NO_WAIT=1: imports do not wait for the exporter's event and frees do not wait for imports'
 * closes. A test-only switch: the negative control of the IPC tests, which must then see wrong answers. */
static bool ipc_unordered(void) {
  const char *v = getenv("DLSTREAM_TEST_IPC_NO_WAIT");
  return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

/* ---- the exporter's memory ---- */

typedef struct ipc_export {
  dls__ipc_gate gate;
  void *event; /* interprocess: the importer opens it, so it lives until the gate's wait passed */
} ipc_export;

typedef struct ipc_mem {
  dls__device *dev;
  void *ptr;
  dls__stream *stream; /* the allocation stream (ref held) */
  dls__spin mu;        /* exports */
  ipc_export *exports;
  int nexports, cap;
} ipc_mem;

static void ipc_mem_release(void *user_data);

/* The exporter's record of `b`'s memory; NULL when it is not IPC-capable memory. */
static ipc_mem *ipc_mem_of(const dls__buffer *b) {
  return b->borrowed && b->release == ipc_mem_release ? b->user_data : NULL;
}

/* Everything an export kept goes once the memory's free is past every gate (or was never made). */
static void ipc_mem_done(void *user_data) {
  ipc_mem *m = user_data;
  for (int i = 0; i < m->nexports; i++) {
    (void)m->dev->be->ipc_event_release(m->dev->be, m->dev->id, m->exports[i].event);
    dls__ipc_gate_return(&m->exports[i].gate);
  }
  dls__stream_unref(m->stream);
  dls__free(m->exports);
  dls__free(m);
}

/* Queues, on a private stream, the waits for the allocation stream's work so far and for every export's gate, then
 * the free; the records go once that stream has passed them. false when a step failed (nothing freed: the caller
 * tries again later). */
static bool free_past_gates(ipc_mem *m) {
  dls__device *dev = m->dev;
  const dls__backend *be = dev->be;
  void *g = NULL, *ev = NULL, *done = NULL;
  dls__deferred *entry = dls__deferred_entry();
  dls_status_t st = entry != NULL ? be->stream_create(be, dev->id, 0, 0, &g) : DLS_ERR_OUT_OF_MEMORY;
  if (st == DLS_OK && (st = dls__event_pool_get(dev, &ev)) == DLS_OK &&
      (st = be->event_record(be, dev->id, ev, m->stream->native)) == DLS_OK)
    st = be->stream_wait_event(be, dev->id, g, ev);
  for (int i = 0; st == DLS_OK && i < m->nexports; i++)
    st = be->stream_wait_value(be, dev->id, g, m->exports[i].gate.addr, m->exports[i].gate.value);
  if (st == DLS_OK && (st = dls__event_pool_get(dev, &done)) == DLS_OK)
    st = be->ipc_free(be, dev->id, m->ptr, g);
  bool freed = st == DLS_OK;
  int nwait = 1;
  if (freed && be->event_record(be, dev->id, done, g) != DLS_OK)
    nwait = 0; /* the records go at the next poll (an import not opened yet would then fail to open its event) */
  if (ev != NULL)
    dls__event_pool_put(dev, ev); /* the wait already took its record */
  if (g != NULL)
    (void)be->stream_destroy(be, dev->id, g); /* the driver keeps it until its work ran */
  if (!freed) {
    if (done != NULL)
      dls__event_pool_put(dev, done);
    dls__deferred_entry_free(entry);
    return false;
  }
  dls__marker *marks = dls__deferred_marks(entry, 1);
  marks[0] = (dls__marker){dev, done, NULL};
  dls__deferred_enqueue(entry, marks, nwait, 1, 0, ipc_mem_done, m);
  return true;
}

static void ipc_mem_release_pinned(ipc_mem *m);

/* The buffer's release: every use on another stream has passed. What it does follows the allocation stream's capture
 * state: pinned (core/capture.h), and it never waits on the host. */
static void ipc_mem_release(void *user_data) {
  dls__capture_pin();
  ipc_mem_release_pinned(user_data);
  dls__capture_unpin();
}

static void ipc_mem_release_pinned(ipc_mem *m) {
  dls__device *dev = m->dev;
  uint64_t cap = 0;
  bool closing = atomic_load(&dls__ipc_closing);
  if (m->ptr == NULL) {
    ipc_mem_done(m);
    return;
  }
  if (!closing && dls__stream_capture(m->stream, &cap) != DLS__CAPTURE_NONE) {
    /* Its work so far cannot be waited for from outside the capture: once it is over. */
    dls__deferred *d = dls__deferred_entry();
    if (d != NULL) {
      dls__deferred_enqueue(d, NULL, 0, 0, cap, ipc_mem_release, m);
      return;
    }
  }
  if (!closing && m->nexports > 0 && !ipc_unordered()) {
    if (free_past_gates(m))
      return;
    dls__deferred *d = dls__deferred_entry(); /* a driver failure: tried again at a later call */
    if (d != NULL) {
      dls__deferred_enqueue(d, NULL, 0, 0, 0, ipc_mem_release, m);
      return;
    }
  }
  /* No import to wait for (or shutdown, which opened every gate): in the allocation stream's order. */
  (void)dev->be->ipc_free(dev->be, dev->id, m->ptr, m->stream->native);
  ipc_mem_done(m);
}

static dls_status_t ipc_alloc_pinned(dls__stream *s, size_t size, dls__buffer **out);

/* Allocation, export and import act on what they read of a stream's capture state: pinned (core/capture.h). */
dls_status_t dls__ipc_alloc(dls__stream *s, size_t size, dls__buffer **out) {
  dls__capture_pin();
  dls_status_t st = ipc_alloc_pinned(s, size, out);
  dls__capture_unpin();
  return st;
}

static dls_status_t ipc_alloc_pinned(dls__stream *s, size_t size, dls__buffer **out) {
  dls__device *dev = s->dev;
  const dls__backend *be = dev->be;
  if (be->ipc_alloc == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s cannot share memory with other processes: the %s backend has no interprocess memory (%s)",
                     dev->name, be->name,
                     dev->device.device_type == kDLCPU ? "its devices are this process's own memory"
                                                       : "not wired for this backend");
  uint64_t cap = 0;
  if (dls__stream_capture(s, &cap) != DLS__CAPTURE_NONE)
    return dls__fail(DLS_ERR_STATE, "the stream on %s is capturing: memory shared with other processes is allocated "
                                    "outside captures", dev->name);
  ipc_mem *m = dls__calloc(1, sizeof *m);
  if (m == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a buffer record");
  dls_status_t st = be->ipc_alloc(be, dev->id, size, &m->ptr);
  if (st != DLS_OK) {
    dls__free(m);
    return st;
  }
  m->dev = dev;
  m->stream = s;
  atomic_flag_clear(&m->mu.f);
  dls__stream_ref(s);
  st = dls__buffer_borrow(dev, m->ptr, size, s, ipc_mem_release, m, out);
  if (st != DLS_OK) {
    (void)be->ipc_free(be, dev->id, m->ptr, s->native);
    ipc_mem_done(m);
  }
  return st;
}

/* ---- exports ---- */

static _Atomic uint64_t g_export_ids;

/* Why the memory of `b` cannot be exported. */
static dls_status_t refuse_memory(const char *call, const dls__buffer *b);

static dls_status_t ipc_export_pinned(const char *call, dls__buffer *b, dls__stream *s, dls__ipc_wire *out);

dls_status_t dls__ipc_export(const char *call, dls__buffer *b, dls__stream *s, dls__ipc_wire *out) {
  dls__capture_pin();
  dls_status_t st = ipc_export_pinned(call, b, s, out);
  dls__capture_unpin();
  return st;
}

static dls_status_t ipc_export_pinned(const char *call, dls__buffer *b, dls__stream *s, dls__ipc_wire *out) {
  dls__buffer *t = dls__buffer_hazards(b);
  dls__device *dev = t->dev;
  const dls__backend *be = dev->be;
  ipc_mem *m = ipc_mem_of(t);
  if (be->ipc_mem_export == NULL || m == NULL)
    return refuse_memory(call, t);
  if (s->dev != dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: the memory is on %s but the stream is on %s", call, dev->name,
                     s->dev->name);
  uint64_t cap = 0;
  if (dls__stream_capture(s, &cap) != DLS__CAPTURE_NONE)
    return dls__fail(DLS_ERR_STATE, "%s: the stream on %s is capturing; export outside captures", call, dev->name);
  memset(out, 0, sizeof *out);
  ipc_export e = {.event = NULL};
  /* Room for the record first: past the record of the event, nothing may fail. */
  dls__spin_lock(&m->mu);
  if (m->nexports == m->cap) {
    int ncap = m->cap != 0 ? m->cap * 2 : 4;
    ipc_export *p = dls__malloc((size_t)ncap * sizeof *p);
    if (p != NULL) {
      if (m->nexports > 0)
        memcpy(p, m->exports, (size_t)m->nexports * sizeof *p);
      dls__free(m->exports);
      m->exports = p;
      m->cap = ncap;
    }
  }
  bool room = m->nexports < m->cap;
  dls__spin_unlock(&m->mu);
  if (!room)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory for the export's record", call);
  DLS__TRY(dls__ipc_gate_take(dev, &e.gate, out->gate_mem));
  dls_status_t st = be->ipc_event_create(be, dev->id, &e.event, out->event);
  if (st == DLS_OK)
    st = be->ipc_mem_export(be, dev->id, m->ptr, out->mem);
  if (st == DLS_OK)
    st = be->device_uuid(be, dev->id, out->uuid);
  /* The stream waits for the last writer (a read, as the rule orders one), then the event marks that point. */
  if (st == DLS_OK)
    st = dls__buffer_access(t, s, DLS_ACCESS_READ, true);
  if (st == DLS_OK)
    st = be->event_record(be, dev->id, e.event, s->native);
  if (st != DLS_OK) {
    (void)be->ipc_event_release(be, dev->id, e.event);
    dls__ipc_gate_return(&e.gate);
    return dls__fail_prefix(st, "%s", call);
  }
  dls__spin_lock(&m->mu);
  m->exports[m->nexports++] = e;
  dls__spin_unlock(&m->mu);
  memcpy(out->magic, ipc_magic, sizeof out->magic);
  out->version = DLS__IPC_VERSION;
  out->wire_size = (uint32_t)sizeof *out;
  out->device_type = (int32_t)dev->device.device_type;
  out->device_id = dev->device.device_id;
  out->pid = (int64_t)getpid();
  out->export_id = atomic_fetch_add(&g_export_ids, 1) + 1;
  out->size = b->size;
  out->offset = (uint64_t)((uintptr_t)b->ptr - (uintptr_t)m->ptr);
  out->gate_slot = e.gate.slot;
  out->gate_value = e.gate.value;
  out->ndim = -1;
  return DLS_OK;
}

static void ipc_import_release(void *user_data);

static dls_status_t refuse_memory(const char *call, const dls__buffer *b) {
  const dls__backend *be = b->dev->be;
  if (be->ipc_mem_export == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s: %s cannot share memory with other processes: the %s backend has no interprocess memory",
                     call, b->dev->name, be->name);
  if (b->borrowed && b->release == ipc_import_release)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s: the buffer is memory this process imported from another; only its exporter shares it",
                     call);
  if (b->borrowed)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s: the buffer is borrowed memory (another framework's tensor, or a view): its owner decides "
                     "who maps it; copy it into memory from dls_buffer_alloc_ipc (Python: dlstream.empty(..., "
                     "ipc=True))",
                     call);
  return dls__fail(DLS_ERR_NOT_SUPPORTED,
                   "%s: the buffer's memory comes from the stream-ordered pool (dls_buffer_alloc), which the %s "
                   "driver shares only through a file descriptor; allocate it with dls_buffer_alloc_ipc (Python: "
                   "dlstream.empty(..., ipc=True))",
                   call, be->name);
}

/* ---- imports ---- */

typedef struct ipc_import {
  dls__device *dev;
  dls__stream *stream; /* the producer (ref held) */
  dls__ipc_map *mem, *gate;
  void *gate_addr;
  uint32_t gate_value;
  int64_t pid;
  uint64_t export_id;
  struct ipc_import *next; /* the open imports of this process */
} ipc_import;

static pthread_mutex_t g_imports_mu = PTHREAD_MUTEX_INITIALIZER;
static ipc_import *g_imports;

/* Enters the import in the open ones; false when that export is open here already. */
static bool imports_add(ipc_import *r) {
  pthread_mutex_lock(&g_imports_mu);
  bool fresh = true;
  for (ipc_import *o = g_imports; o != NULL && fresh; o = o->next)
    fresh = o->pid != r->pid || o->export_id != r->export_id;
  if (fresh) {
    r->next = g_imports;
    g_imports = r;
  }
  pthread_mutex_unlock(&g_imports_mu);
  return fresh;
}

static void imports_remove(ipc_import *r) {
  pthread_mutex_lock(&g_imports_mu);
  for (ipc_import **pp = &g_imports; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == r) {
      *pp = r->next;
      break;
    }
  }
  pthread_mutex_unlock(&g_imports_mu);
}

static void ipc_import_done(void *user_data) {
  ipc_import *r = user_data;
  dls__ipc_map_close(r->mem);
  dls__ipc_map_close(r->gate);
  imports_remove(r);
  dls__stream_unref(r->stream);
  dls__free(r);
}

/* The import's release: every use on another stream passed. The gate is written on the producer, after its own
 * uses; the mapping goes once that write has run. */
static void ipc_import_release(void *user_data) {
  ipc_import *r = user_data;
  dls__stream *s = r->stream;
  dls__device *dev = r->dev;
  const dls__backend *be = dev->be;
  uint64_t cap = 0;
  void *ev = NULL;
  dls__deferred *d = dls__deferred_entry();
  dls__capture_pin(); /* the write and the record follow what was read of the stream's capture state */
  int state = dls__stream_capture(s, &cap);
  if (d != NULL && state != DLS__CAPTURE_NONE) {
    dls__deferred_enqueue(d, NULL, 0, 0, cap, ipc_import_release, r); /* once the capture is over */
    dls__capture_unpin();
    return;
  }
  bool written = state == DLS__CAPTURE_NONE && be->stream_write_value(be, dev->id, s->native, r->gate_addr, r->gate_value) == DLS_OK;
  if (written && d != NULL && dls__event_pool_get(dev, &ev) == DLS_OK) {
    if (be->event_record(be, dev->id, ev, s->native) == DLS_OK) {
      dls__marker *marks = dls__deferred_marks(d, 1);
      marks[0] = (dls__marker){dev, ev, NULL};
      dls__deferred_enqueue(d, marks, 1, 1, 0, ipc_import_done, r);
      dls__capture_unpin();
      return;
    }
    dls__event_pool_put(dev, ev);
  }
  dls__capture_unpin();
  dls__deferred_entry_free(d);
  /* Out of events or memory: wait here for the producer rather than unmap under its work. */
  (void)be->stream_synchronize(be, dev->id, s);
  if (!written) /* the exporter waits for this word: a last try on a stream of its own */
    (void)be->stream_write_value(be, dev->id, NULL, r->gate_addr, r->gate_value);
  (void)be->stream_synchronize(be, dev->id, NULL);
  ipc_import_done(r);
}

dls_status_t dls__ipc_wire_read(const char *call, const dls_ipc_handle_t *h, dls__ipc_wire *out) {
  memcpy(out, h->bytes, sizeof *out);
  if (memcmp(out->magic, ipc_magic, sizeof ipc_magic) != 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s: the handle is not one dls_*_export_ipc made (its first bytes "
                                               "differ)", call);
  if (out->version != DLS__IPC_VERSION || out->wire_size != sizeof *out)
    return dls__fail(DLS_ERR_VERSION,
                     "%s: the handle is of version %u (%u bytes); this dlstream reads version %d (%zu bytes): export "
                     "and import with one dlstream",
                     call, out->version, out->wire_size, DLS__IPC_VERSION, sizeof *out);
  if (out->ndim < -1 || out->ndim > DLS__IPC_MAX_NDIM || out->gate_value == 0 ||
      out->size > UINTPTR_MAX - out->offset)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s: the handle is damaged (ndim %d, gate value %u, %llu bytes at "
                                               "%llu)",
                     call, (int)out->ndim, out->gate_value, (unsigned long long)out->size,
                     (unsigned long long)out->offset);
  return DLS_OK;
}

/* The device of this process whose UUID is the exporter's. */
static dls_status_t exporter_device(const char *call, const dls__ipc_wire *w, dls__device **out) {
  DLDeviceType type = (DLDeviceType)w->device_type;
  int n = 0;
  dls_status_t st = dls_device_count(type, &n);
  for (int i = 0; st == DLS_OK && i < n; i++) {
    dls__device *d = dls__device_get(dls_device(type, i), call, &st);
    uint8_t uuid[16];
    if (d != NULL && d->be->device_uuid != NULL && d->be->device_uuid(d->be, d->id, uuid) == DLS_OK &&
        memcmp(uuid, w->uuid, sizeof uuid) == 0) {
      *out = d;
      return DLS_OK;
    }
  }
  return dls__fail(DLS_ERR_INVALID_DEVICE,
                   "%s: the exporter's device (its device %d, UUID %02x%02x%02x%02x-...) is not visible in this "
                   "process (CUDA_VISIBLE_DEVICES?)",
                   call, (int)w->device_id, w->uuid[0], w->uuid[1], w->uuid[2], w->uuid[3]);
}

static dls_status_t ipc_import_pinned(const char *call, const dls__ipc_wire *w, dls__stream *s, dls__buffer **out);

dls_status_t dls__ipc_import(const char *call, const dls__ipc_wire *w, dls__stream *s, dls__buffer **out) {
  dls__capture_pin();
  dls_status_t st = ipc_import_pinned(call, w, s, out);
  dls__capture_unpin();
  return st;
}

static dls_status_t ipc_import_pinned(const char *call, const dls__ipc_wire *w, dls__stream *s, dls__buffer **out) {
  dls__device *dev = s->dev;
  const dls__backend *be = dev->be;
  if (w->pid == (int64_t)getpid())
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s: the handle was exported by this process (pid %lld); import it in another process, and "
                     "use the buffer itself here",
                     call, (long long)w->pid);
  if (be->ipc_mem_open == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s: %s cannot map memory of other processes: the %s backend has no interprocess memory", call,
                     dev->name, be->name);
  if (w->device_type != (int32_t)dev->device.device_type)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: the handle's memory is of DLPack device type %d, the stream's "
                                             "device is %s",
                     call, (int)w->device_type, dev->name);
  uint64_t cap = 0;
  if (dls__stream_capture(s, &cap) != DLS__CAPTURE_NONE)
    return dls__fail(DLS_ERR_STATE, "%s: the stream on %s is capturing; import outside captures", call, dev->name);
  dls__device *edev = NULL;
  DLS__TRY(exporter_device(call, w, &edev));
  ipc_import *r = dls__calloc(1, sizeof *r);
  if (r == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory for the import's record", call);
  r->dev = dev;
  r->pid = w->pid;
  r->export_id = w->export_id;
  r->gate_value = w->gate_value;
  if (!imports_add(r)) {
    dls__free(r);
    return dls__fail(DLS_ERR_STATE,
                     "%s: this process imported that handle already and has not closed it (each export is for one "
                     "import: export again for another)",
                     call);
  }
  void *base = NULL, *gbase = NULL, *ev = NULL;
  dls_status_t st = dls__ipc_map_open(dev, w->mem, &r->mem, &base);
  if (st == DLS_OK)
    st = dls__ipc_map_open(dev, w->gate_mem, &r->gate, &gbase);
  if (st == DLS_OK && !ipc_unordered()) {
    /* The exporter's event, opened in its device's context; the stream of this device waits for it. */
    st = edev->be->ipc_event_open(edev->be, edev->id, w->event, &ev);
    if (st == DLS_OK) {
      st = be->stream_wait_event(be, dev->id, s->native, ev);
      (void)edev->be->ipc_event_release(edev->be, edev->id, ev);
    }
  }
  if (st == DLS_OK) {
    r->gate_addr = (char *)gbase + (size_t)w->gate_slot * sizeof(uint32_t);
    r->stream = s;
    dls__stream_ref(s);
    st = dls__buffer_borrow(dev, (char *)base + w->offset, (size_t)w->size, s, ipc_import_release, r, out);
    if (st == DLS_OK)
      return DLS_OK;
    dls__stream_unref(s);
  }
  /* Nothing was imported: the exporter's gate stays closed for a later import of the same handle. */
  dls__ipc_map_close(r->mem);
  dls__ipc_map_close(r->gate);
  imports_remove(r);
  dls__free(r);
  return dls__fail_prefix(st, "%s", call);
}

/* ---- public API ---- */

dls_status_t dls_buffer_alloc_ipc(dls_stream_t stream, size_t size, dls_buffer_t *out_buffer) {
  static const char call[] = "dls_buffer_alloc_ipc";
  DLS__ENTER(call);
  DLS__OUT(call, out_buffer);
  DLS__GET_OF(stream, s, stream, call, "stream");
  dls__buffer *b = NULL;
  dls_status_t st = dls__ipc_alloc(s, size, &b);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(size=%zu)", call, size);
  return dls__buffer_handle_new(b, call, out_buffer);
}

dls_status_t dls_buffer_export_ipc(dls_buffer_t buffer, dls_stream_t stream, dls_ipc_handle_t *out_handle) {
  static const char call[] = "dls_buffer_export_ipc";
  DLS__ENTER(call);
  DLS__OUT(call, out_handle);
  DLS__GET(&dls__buffer_table, dls__buffer, b, buffer, call, "buffer");
  DLS__GET_OF(stream, s, stream, call, "stream");
  dls__ipc_wire w;
  DLS__TRY(dls__ipc_export(call, b, s, &w));
  memcpy(out_handle->bytes, &w, sizeof w);
  return DLS_OK;
}

dls_status_t dls_buffer_import_ipc(const dls_ipc_handle_t *handle, dls_stream_t stream, dls_buffer_t *out_buffer) {
  static const char call[] = "dls_buffer_import_ipc";
  DLS__ENTER(call);
  DLS__OUT(call, out_buffer);
  if (handle == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(handle=NULL): no handle", call);
  DLS__GET_OF(stream, s, stream, call, "stream");
  dls__ipc_wire w;
  DLS__TRY(dls__ipc_wire_read(call, handle, &w));
  dls__buffer *b = NULL;
  DLS__TRY(dls__ipc_import(call, &w, s, &b));
  return dls__buffer_handle_new(b, call, out_buffer); /* on failure, the import is closed */
}

dls_status_t dls_ipc_handle_device(const dls_ipc_handle_t *handle, DLDevice *out_device) {
  static const char call[] = "dls_ipc_handle_device";
  DLS__ENTER(call);
  if (handle == NULL || out_device == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(handle=%p, out_device=%p): NULL argument", call,
                     (const void *)handle, (void *)out_device);
  dls__ipc_wire w;
  DLS__TRY(dls__ipc_wire_read(call, handle, &w));
  dls__device *d = NULL;
  DLS__TRY(exporter_device(call, &w, &d));
  *out_device = d->device;
  return DLS_OK;
}
