/* SPDX-License-Identifier: Apache-2.0 */
/* Tensors in: importing managed DLPack tensors, borrowed views, and new owned tensors (IPC-capable ones too).
 *
 * An imported tensor is a borrowed buffer (its release calls the producer's
 * deleter) under a tensor handle. The deleter runs exactly once: from the
 * buffer's release when the import succeeded (after every stream that used
 * the tensor has passed), or here, before returning, on every failure. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interop/dlpack/dlpack_internal.h"

static void release_versioned(void *user_data) {
  DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)user_data;
  if (m->deleter != NULL)
    m->deleter(m);
}

static void release_legacy(void *user_data) {
  DLManagedTensor *m = (DLManagedTensor *)user_data;
  if (m->deleter != NULL)
    m->deleter(m);
}

/* Runs the producer's release on a failure path, keeping this thread's error
 * message even if the deleter calls into dlstream itself. */
static dls_status_t fail_release(dls_status_t status, dls_release_fn release, void *user_data) {
  if (release == NULL)
    return status;
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", dls_last_error());
  release(user_data);
  return dls__fail(status, "%s", saved);
}

/* The stream the producer ordered its work before: `producer`, or the legacy
 * default stream of the tensor's device for {0}. It must be on that device. */
static dls_status_t resolve_producer(const char *call, dls_stream_t producer, DLDevice home, DLDevice device,
                                     dls__hold *held, dls__stream **out) {
  dls_stream_t h = producer.id == 0 ? dls_stream_default(home, DLS_STREAM_LEGACY) : producer;
  dls_status_t st;
  dls__stream *s = dls__stream_hold(held, h, call, "producer", &st);
  if (s == NULL)
    return st;
  if (!dls__device_eq(s->dev->device, home)) {
    char a[32], b[32];
    return dls__fail(DLS_ERR_INVALID_DEVICE,
                     "%s: producer stream is on %s but the tensor lives on %s (%s, device_id %d); a producer "
                     "stream must be on the tensor's device",
                     call, dls_device_str(s->dev->device, a, sizeof a), dls_device_str(home, b, sizeof b),
                     dls__dlpack_device_type_name((int32_t)device.device_type), (int)device.device_id);
  }
  *out = s;
  return DLS_OK;
}

/* Validates `meta`, wraps its memory in a borrowed buffer and makes the
 * tensor. `release(user_data)` runs exactly once whatever happens: here on a
 * failure before the buffer exists, through the buffer otherwise. */
static dls_status_t import_common(const char *call, const char *prefix, const DLTensor *meta, uint64_t flags,
                                  dls_stream_t producer, dls_release_fn release, void *user_data,
                                  dls_tensor_t *out_tensor) {
  dls__layout lay;
  dls_status_t st = dls__dlpack_check(meta, flags, 0, call, prefix, &lay);
  if (st != DLS_OK)
    return fail_release(st, release, user_data);
  dls__stream *ps = NULL;
  DLS__HOLD_VAR(ps_hold);
  st = resolve_producer(call, producer, lay.home, meta->device, &ps_hold, &ps);
  if (st != DLS_OK)
    return fail_release(st, release, user_data);
  /* Host memory (kDLCPU) is released only after the producer stream passes
   * too: the core does that for every borrowed buffer on a CPU device. */
  dls__buffer *buf = NULL;
  st = dls__buffer_borrow(ps->dev, (void *)lay.lo, lay.span, ps, release, user_data, &buf);
  if (st != DLS_OK)
    return fail_release(dls__fail_prefix(st, "%s", call), release, user_data);
  /* Memory no dlstream buffer exported is foreign: the import is entered beside its records. */
  if (buf->alias == NULL && lay.span > 0 && (st = dls__foreign_enter(buf, ps)) != DLS_OK) {
    buf->release = NULL; /* failure: released below */
    dls__buffer_unref(buf);
    return fail_release(dls__fail_prefix(st, "%s", call), release, user_data);
  }
  /* From here the buffer owns the release: dls__tensor_new steals it. */
  st = dls__tensor_new(buf, meta, flags & DLS__TENSOR_KEPT_FLAGS, out_tensor);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_tensor_import_versioned(DLManagedTensorVersioned *managed, dls_stream_t producer,
                                         dls_tensor_t *out_tensor) {
  static const char call[] = "dls_tensor_import_versioned";
  if (out_tensor != NULL)
    out_tensor->id = 0;
  if (managed == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s: managed is NULL", call);
  dls_status_t st = dls__dlpack_enter(call);
  if (st != DLS_OK)
    return fail_release(st, release_versioned, managed);
  if (out_tensor == NULL)
    return fail_release(dls__fail_out_null(call, "out_tensor"), release_versioned,
                        managed);
  /* A different major version may lay out everything after `flags`
   * differently: read nothing but the version and call only the deleter. */
  if (managed->version.major != DLPACK_MAJOR_VERSION)
    return fail_release(dls__fail(DLS_ERR_VERSION,
                                  "%s: managed->version = %u.%u; dlstream reads DLPack major version %d (up to "
                                  "%d.%d)",
                                  call, (unsigned)managed->version.major, (unsigned)managed->version.minor,
                                  DLPACK_MAJOR_VERSION, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION),
                        release_versioned, managed);
  return import_common(call, "managed->dl_tensor.", &managed->dl_tensor, managed->flags, producer,
                       release_versioned, managed, out_tensor);
}

dls_status_t dls_tensor_import_legacy(DLManagedTensor *managed, dls_stream_t producer, dls_tensor_t *out_tensor) {
  static const char call[] = "dls_tensor_import_legacy";
  if (out_tensor != NULL)
    out_tensor->id = 0;
  if (managed == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s: managed is NULL", call);
  dls_status_t st = dls__dlpack_enter(call);
  if (st != DLS_OK)
    return fail_release(st, release_legacy, managed);
  if (out_tensor == NULL)
    return fail_release(dls__fail_out_null(call, "out_tensor"), release_legacy,
                        managed);
  return import_common(call, "managed->dl_tensor.", &managed->dl_tensor, 0, producer, release_legacy, managed,
                       out_tensor);
}

dls_status_t dls_tensor_view(const DLTensor *tensor, uint64_t flags, dls_stream_t producer, dls_tensor_t *out_tensor) {
  static const char call[] = "dls_tensor_view";
  DLS__ENTER(call);
  DLS__OUT(call, out_tensor);
  if (tensor == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s: tensor is NULL", call);
  const uint64_t allowed = (uint64_t)DLS_TENSOR_READ_ONLY | DLS__TENSOR_SUBBYTE_PADDED;
  if (flags & ~allowed)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s: flags = %#llx has unknown bits %#llx (a view takes DLS_TENSOR_READ_ONLY and "
                     "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)",
                     call, (unsigned long long)flags, (unsigned long long)(flags & ~allowed));
  return import_common(call, "tensor->", tensor, flags, producer, NULL, NULL, out_tensor);
}

/* A new compact tensor on `stream`: of the stream-ordered pool's memory, or (`ipc`) of memory another process can
 * import (core/ipc.h). */
static dls_status_t tensor_empty(const char *call, dls_stream_t stream, int32_t ndim, const int64_t *shape,
                                 DLDataType dtype, bool ipc, dls_tensor_t *out_tensor) {
  DLS__ENTER(call);
  DLS__OUT(call, out_tensor);
  DLS__GET_OF(stream, s, stream, call, "stream");
  DLTensor meta;
  memset(&meta, 0, sizeof meta);
  meta.device = s->dev->device;
  meta.ndim = ndim;
  meta.dtype = dtype;
  meta.shape = (int64_t *)(uintptr_t)shape; /* read only; DLTensor has no const */
  dls__layout lay;
  DLS__TRY(dls__dlpack_check(&meta, 0, DLS__CHECK_NO_DATA, call, "", &lay));
  dls__buffer *buf = NULL;
  dls_status_t st = ipc ? dls__ipc_alloc(s, lay.span, &buf) : dls__buffer_alloc(s, lay.span, &buf);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(%zu bytes on %s)", call, lay.span, s->dev->name);
  meta.data = buf->ptr;
  st = dls__tensor_new(buf, &meta, 0, out_tensor);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_tensor_empty(dls_stream_t stream, int32_t ndim, const int64_t *shape, DLDataType dtype,
                              dls_tensor_t *out_tensor) {
  return tensor_empty("dls_tensor_empty", stream, ndim, shape, dtype, false, out_tensor);
}

dls_status_t dls_tensor_empty_ipc(dls_stream_t stream, int32_t ndim, const int64_t *shape, DLDataType dtype,
                                  dls_tensor_t *out_tensor) {
  return tensor_empty("dls_tensor_empty_ipc", stream, ndim, shape, dtype, true, out_tensor);
}
