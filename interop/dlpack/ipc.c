/* SPDX-License-Identifier: Apache-2.0 */
/* Tensors shared with another process: the handle of a buffer (core/ipc.c) with the tensor's view of it (dtype,
 * shape, strides, offset, flags), and the tensor an import of it makes, checked before anything is mapped. */
#include <string.h>

#include "interop/dlpack/dlpack_internal.h"

dls_status_t dls_tensor_export_ipc(dls_tensor_t tensor, dls_stream_t stream, dls_ipc_handle_t *out_handle) {
  static const char call[] = "dls_tensor_export_ipc";
  DLS__ENTER(call);
  DLS__OUT(call, out_handle);
  DLS__GET(&dls__tensor_table, dls__tensor, t, tensor, call, "tensor");
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (t->dl.ndim > DLS__IPC_MAX_NDIM)
    return dls__fail(DLS_ERR_NOT_SUPPORTED, "%s: a handle carries at most %d dimensions, not %d", call,
                     DLS__IPC_MAX_NDIM, (int)t->dl.ndim);
  dls__ipc_wire w;
  DLS__TRY(dls__ipc_export(call, t->buf, s, &w));
  w.ndim = t->dl.ndim;
  w.dtype = t->dl.dtype;
  w.flags = t->flags & DLS__TENSOR_KEPT_FLAGS;
  w.byte_offset = (uint64_t)((uintptr_t)t->dl.data + (uintptr_t)t->dl.byte_offset - (uintptr_t)t->buf->ptr);
  if (t->dl.ndim > 0) {
    memcpy(w.shape, t->dl.shape, (size_t)t->dl.ndim * sizeof w.shape[0]);
    memcpy(w.strides, t->dl.strides, (size_t)t->dl.ndim * sizeof w.strides[0]);
  }
  memcpy(out_handle->bytes, &w, sizeof w);
  return DLS_OK;
}

/* The view the handle describes, at `data` on `device`. */
static DLTensor view_of(dls__ipc_wire *w, void *data, DLDevice device) {
  DLTensor m;
  memset(&m, 0, sizeof m);
  m.data = data;
  m.device = device;
  m.ndim = w->ndim;
  m.dtype = w->dtype;
  m.shape = w->shape;
  m.strides = w->strides;
  m.byte_offset = w->byte_offset;
  return m;
}

dls_status_t dls_tensor_import_ipc(const dls_ipc_handle_t *handle, dls_stream_t stream, dls_tensor_t *out_tensor) {
  static const char call[] = "dls_tensor_import_ipc";
  DLS__ENTER(call);
  DLS__OUT(call, out_tensor);
  out_tensor->id = 0;
  if (handle == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(handle=NULL): no handle", call);
  DLS__GET_OF(stream, s, stream, call, "stream");
  dls__ipc_wire w;
  DLS__TRY(dls__ipc_wire_read(call, handle, &w));
  if (w.ndim < 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s: the handle carries a buffer, not a tensor (dls_buffer_export_ipc made it): import it with "
                     "dls_buffer_import_ipc",
                     call);
  /* The view is checked before anything is mapped, at an address with the mapping's alignment (the allocation's base
   * is aligned to at least 256 bytes), so that a damaged handle is refused with the exporter's gate left closed. */
  const uintptr_t probe = ((uintptr_t)1 << 40) + (uintptr_t)(w.offset % 256);
  DLTensor meta = view_of(&w, (void *)probe, s->dev->device);
  dls__layout lay;
  DLS__TRY(dls__dlpack_check(&meta, w.flags, 0, call, "handle's tensor: ", &lay));
  if (lay.span > 0 && (lay.lo < probe || lay.lo - probe > w.size || lay.span > w.size - (lay.lo - probe)))
    return dls__fail(DLS_ERR_INVALID_TENSOR,
                     "%s: the handle's tensor reaches bytes %lld to %lld of a %llu-byte buffer", call,
                     (long long)(lay.lo - probe), (long long)(lay.lo - probe + lay.span),
                     (unsigned long long)w.size);
  dls__buffer *buf = NULL;
  DLS__TRY(dls__ipc_import(call, &w, s, &buf));
  meta = view_of(&w, buf->ptr, s->dev->device);
  dls_status_t st = dls__tensor_new(buf, &meta, w.flags & DLS__TENSOR_KEPT_FLAGS, out_tensor); /* steals buf */
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}
