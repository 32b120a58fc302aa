/* SPDX-License-Identifier: Apache-2.0 */
/* Tensors out: versioned and legacy DLPack exports whose deleters free in stream order, and ordering before a consumer.
 *
 * An export is one heap block: the managed struct, the references it holds
 * (the core buffer and, when a consumer stream was named, that stream) and its
 * own shape and strides. The consumer calls the deleter once, from any thread;
 * the deleter records the consumer stream's use first, so the memory outlives
 * the work the consumer queued, then drops the references. */

#include <stdlib.h>
#include <string.h>

#include "interop/dlpack/dlpack_internal.h"

typedef struct dls__export {
  union {
    DLManagedTensorVersioned v;
    DLManagedTensor l;
  } m;                   /* first: the managed pointer is the block's address */
  dls__buffer *buf;      /* reference held */
  dls__stream *consumer; /* reference held; NULL when exported without sync */
  int64_t dims[];        /* shape[ndim] then strides[ndim] */
} dls__export;

_Atomic size_t dls__exports_live;

static void export_drop(dls__export *e) {
  atomic_fetch_sub_explicit(&dls__exports_live, 1, memory_order_relaxed);
  /* After dls_shutdown() the devices these objects name are gone: only the
   * block can be freed (exports must be deleted before shutdown). */
  if (atomic_load_explicit(&dls__state, memory_order_acquire) != 1) {
    dls__free(e);
    return;
  }
  if (e->consumer != NULL) {
    /* What the consumer queued while it held the export is its last write:
     * later uses and the free wait for it. */
    dls__buffer_export_end(e->buf, e->consumer);
    dls__stream_unref(e->consumer);
  }
  dls__buffer_unref(e->buf);
  dls__free(e);
  /* Runs releases whose streams have passed, as dls_tensor_release does. */
  (void)dls_deferred_poll();
}

static void export_deleter_versioned(DLManagedTensorVersioned *self) {
  if (self != NULL)
    export_drop((dls__export *)self->manager_ctx);
}

static void export_deleter_legacy(DLManagedTensor *self) {
  if (self != NULL)
    export_drop((dls__export *)self->manager_ctx);
}

/* The consumer stream of `t`, or NULL for {0}; it must be on the tensor's device. */
static dls_status_t resolve_consumer(const char *call, const dls__tensor *t, dls_stream_t consumer, dls__hold *h,
                                     dls__stream **out) {
  *out = NULL;
  if (consumer.id == 0)
    return DLS_OK;
  dls_status_t st;
  dls__stream *s = dls__stream_hold(h, consumer, call, "consumer", &st);
  if (s == NULL)
    return st;
  if (s->dev != t->buf->dev) {
    char a[32], b[32];
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: consumer stream is on %s but the tensor lives on %s", call,
                     dls_device_str(s->dev->device, a, sizeof a), dls_device_str(t->buf->dev->device, b, sizeof b));
  }
  *out = s;
  return DLS_OK;
}

/* Makes the block, orders the tensor's uses before the consumer and takes
 * the references. The caller fills in the head for its flavour. */
static dls_status_t export_common(const char *call, dls_tensor_t tensor, dls_stream_t consumer, bool legacy,
                                  dls__export **out, uint64_t *out_flags) {
  DLS__ENTER(call);
  DLS__GET(&dls__tensor_table, dls__tensor, t, tensor, call, "tensor");
  DLS__HOLD_VAR(cs_hold);
  dls_status_t st;
  if (legacy && (t->flags & DLS_TENSOR_READ_ONLY))
    return dls__fail(DLS_ERR_READ_ONLY,
                     "%s(tensor=%#llx): the tensor is read-only and a legacy DLManagedTensor cannot say so; "
                     "export it with dls_tensor_export_versioned",
                     call, (unsigned long long)tensor.id);
  if (legacy && (t->flags & DLS__TENSOR_SUBBYTE_PADDED))
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s(tensor=%#llx): the tensor holds padded sub-byte elements and a legacy DLManagedTensor "
                     "cannot say so; export it with dls_tensor_export_versioned",
                     call, (unsigned long long)tensor.id);
  dls__stream *cs;
  DLS__TRY(resolve_consumer(call, t, consumer, &cs_hold, &cs));

  const int32_t ndim = t->dl.ndim;
  dls__export *e = (dls__export *)dls__calloc(1, sizeof *e + 2u * (size_t)ndim * sizeof(int64_t));
  if (e == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory for the export of a %d-dimensional tensor", call,
                     (int)ndim);
  /* Its bytes may come back through an import: the registry makes that
   * import an alias of this buffer rather than another buffer. */
  st = dls__buffer_exported(t->buf);
  if (st == DLS_OK && cs != NULL) {
    /* The consumer may write: it is ordered as a writer now, every other
     * stream's use waits for it while it holds the export, and its entry,
     * made now, lets the deleter record its last use without memory. */
    st = dls__buffer_export_begin(t->buf, cs);
  }
  if (st != DLS_OK) {
    dls__free(e);
    return dls__fail_prefix(st, "%s(tensor=%#llx)", call, (unsigned long long)tensor.id);
  }

  DLTensor *dl = legacy ? &e->m.l.dl_tensor : &e->m.v.dl_tensor;
  *dl = t->dl;
  dl->shape = ndim > 0 ? e->dims : NULL;
  dl->strides = ndim > 0 ? e->dims + ndim : NULL;
  if (ndim > 0) {
    memcpy(e->dims, t->dl.shape, (size_t)ndim * sizeof(int64_t));
    memcpy(e->dims + ndim, t->dl.strides, (size_t)ndim * sizeof(int64_t));
  }
  dls__buffer_ref(t->buf);
  e->buf = t->buf;
  if (cs != NULL) {
    dls__stream_ref(cs);
    e->consumer = cs;
  }
  atomic_fetch_add_explicit(&dls__exports_live, 1, memory_order_relaxed);
  *out = e;
  *out_flags = t->flags;
  return DLS_OK;
}

dls_status_t dls_tensor_export_versioned(dls_tensor_t tensor, dls_stream_t consumer,
                                         DLManagedTensorVersioned **out_managed) {
  static const char call[] = "dls_tensor_export_versioned";
  DLS__OUT(call, out_managed);
  dls__export *e;
  uint64_t flags;
  DLS__TRY(export_common(call, tensor, consumer, false, &e, &flags));
  e->m.v.version.major = 1;
  e->m.v.version.minor = 1;
  e->m.v.manager_ctx = e;
  e->m.v.deleter = export_deleter_versioned;
  /* Shared memory, so never IS_COPIED; padding must travel with the bytes. */
  e->m.v.flags = flags & ((uint64_t)DLS_TENSOR_READ_ONLY | DLS__TENSOR_SUBBYTE_PADDED);
  *out_managed = &e->m.v;
  return DLS_OK;
}

dls_status_t dls_tensor_export_legacy(dls_tensor_t tensor, dls_stream_t consumer, DLManagedTensor **out_managed) {
  static const char call[] = "dls_tensor_export_legacy";
  DLS__OUT(call, out_managed);
  dls__export *e;
  uint64_t flags;
  DLS__TRY(export_common(call, tensor, consumer, true, &e, &flags));
  e->m.l.manager_ctx = e;
  e->m.l.deleter = export_deleter_legacy;
  *out_managed = &e->m.l;
  return DLS_OK;
}

dls_status_t dls_tensor_order_before(dls_tensor_t tensor, dls_stream_t consumer) {
  static const char call[] = "dls_tensor_order_before";
  DLS__ENTER(call);
  DLS__GET(&dls__tensor_table, dls__tensor, t, tensor, call, "tensor");
  DLS__HOLD_VAR(cs_hold);
  dls__stream *cs;
  DLS__TRY(resolve_consumer(call, t, consumer, &cs_hold, &cs));
  if (cs == NULL)
    return DLS_OK;
  return dls__buffer_access(t->buf, cs, DLS_ACCESS_WRITE, true);
}
