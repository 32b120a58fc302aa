/* SPDX-License-Identifier: Apache-2.0 */
/* Tensor handles: a DLTensor view over a buffer. The DLPack protocol itself
 * (import, validation, export) lives in interop/dlpack. */
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"

dls_status_t dls__tensor_new(dls__buffer *buf, const DLTensor *meta, uint64_t flags, dls_tensor_t *out) {
  dls__tensor *t = dls__calloc(1, sizeof *t);
  int32_t ndim = meta->ndim;
  if (t == NULL) {
    dls__buffer_unref(buf);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a tensor record");
  }
  int64_t *shape = t->shape_inline, *strides = t->strides_inline;
  if (ndim > DLS__TENSOR_INLINE_DIMS) {
    t->dims_heap = dls__malloc(2 * (size_t)ndim * sizeof(int64_t));
    if (t->dims_heap == NULL) {
      dls__free(t);
      dls__buffer_unref(buf);
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "out of host memory for a tensor's %d dimensions", (int)ndim);
    }
    shape = t->dims_heap;
    strides = t->dims_heap + ndim;
  }
  t->buf = dls__buffer_hazards(buf);
  t->mem = t->buf != buf ? buf : NULL;
  t->dl = *meta;
  if (DLS__UNLIKELY(t->mem != NULL && t->mem->dev != t->buf->dev))
    t->dl.device = t->buf->dev->device; /* one memory on two CPU devices: the exported buffer's */
  t->flags = flags;
  if (ndim > 0)
    memcpy(shape, meta->shape, (size_t)ndim * sizeof *shape);
  if (meta->strides != NULL && ndim > 0) {
    memcpy(strides, meta->strides, (size_t)ndim * sizeof *strides);
  } else {
    int64_t stride = 1;
    for (int32_t i = ndim - 1; i >= 0; i--) {
      strides[i] = stride;
      stride *= shape[i] > 0 ? shape[i] : 1;
    }
  }
  t->dl.shape = shape;
  t->dl.strides = strides;
  t->id = dls__table_add(&dls__tensor_table, t);
  if (t->id == 0) {
    dls__free(t->dims_heap);
    dls__free(t);
    dls__buffer_unref(buf);
    return DLS_ERR_OUT_OF_MEMORY;
  }
  out->id = t->id;
  return DLS_OK;
}

dls__tensor *dls__tensor_get(dls_tensor_t t, const char *call, const char *arg, dls_status_t *out_status) {
  return (dls__tensor *)dls__table_get(&dls__tensor_table, t.id, call, arg, out_status);
}


dls_status_t dls_tensor_release(dls_tensor_t tensor) {
  static const char call[] = "dls_tensor_release";
  if (tensor.id == 0)
    return DLS_OK;
  DLS__ENTER(call);
  DLS__END(&dls__tensor_table, tensor, call, "tensor");
  dls_deferred_poll();
  return DLS_OK;
}

void dls__tensor_drop(void *obj) {
  dls__tensor *t = obj;
  dls__buffer_unref(t->mem != NULL ? t->mem : t->buf);
  dls__free(t->dims_heap);
  dls__free(t);
}
dls__table dls__tensor_table = DLS__TABLE("tensor", DLS_HANDLE_TENSOR, dls__tensor_drop, NULL);

dls_status_t dls_tensor_dltensor(dls_tensor_t tensor, const DLTensor **out_view) {
  static const char call[] = "dls_tensor_dltensor";
  DLS__ENTER(call);
  DLS__OUT(call, out_view);
  DLS__GET_OF(tensor, t, tensor, call, "tensor");
  *out_view = &t->dl;
  return DLS_OK;
}

dls_status_t dls_tensor_flags(dls_tensor_t tensor, uint64_t *out_flags) {
  static const char call[] = "dls_tensor_flags";
  DLS__ENTER(call);
  DLS__OUT(call, out_flags);
  DLS__GET_OF(tensor, t, tensor, call, "tensor");
  *out_flags = t->flags;
  return DLS_OK;
}

dls_status_t dls_tensor_data(dls_tensor_t tensor, void **out_ptr) {
  static const char call[] = "dls_tensor_data";
  DLS__ENTER(call);
  DLS__OUT(call, out_ptr);
  DLS__GET_OF(tensor, t, tensor, call, "tensor");
  *out_ptr = t->dl.data == NULL ? NULL : (char *)t->dl.data + t->dl.byte_offset;
  return DLS_OK;
}

dls_status_t dls_tensor_record_use(dls_tensor_t tensor, dls_stream_t stream, dls_access_t access) {
  static const char call[] = "dls_tensor_record_use";
  DLS__ENTER(call);
  if (access != DLS_ACCESS_READ && access != DLS_ACCESS_WRITE)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(access=%d): DLS_ACCESS_READ (1) or DLS_ACCESS_WRITE (2)", call, (int)access);
  DLS__GET_OF(tensor, t, tensor, call, "tensor");
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (s->dev != t->buf->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: tensor is on %s but stream is on %s", call, t->buf->dev->name,
                     s->dev->name);
  if (access == DLS_ACCESS_WRITE && (t->flags & DLS_TENSOR_READ_ONLY))
    return dls__fail(DLS_ERR_READ_ONLY, "%s(access=DLS_ACCESS_WRITE): the tensor is read-only", call);
  dls_status_t st = dls__buffer_access(t->buf, s, (int)access, false);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}
