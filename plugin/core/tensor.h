/* SPDX-License-Identifier: Apache-2.0 */
/* Tensors: typed views of buffers. */
#ifndef DLSTREAM_CORE_TENSOR_H
#define DLSTREAM_CORE_TENSOR_H

#include "core/buffer.h"

#define DLS__TENSOR_INLINE_DIMS 8

typedef struct dls__tensor {
  dls__buffer *buf;     /* ref held; for an alias import, the exported buffer it aliases (held through mem) */
  dls__buffer *mem;     /* an alias import (exported.c): the borrowed buffer of its own bytes and release (ref
                           held), which holds buf; NULL otherwise */
  DLTensor dl;          /* shape/strides point at the arrays below */
  uint64_t flags;       /* DLS_TENSOR_* */
  int64_t shape_inline[DLS__TENSOR_INLINE_DIMS];
  int64_t strides_inline[DLS__TENSOR_INLINE_DIMS];
  int64_t *dims_heap;   /* 2*ndim when ndim > inline */
  uint64_t id;
} dls__tensor;

/* Makes a tensor handle over `buf` (reference stolen, also on failure)
 * viewing it as `meta` (shape and strides copied; NULL strides become compact
 * strides). Over an alias (buffer.h), the tensor's buffer is the exported one
 * it lies in, on that buffer's device (CPU devices share their memory). */
DLS__INTERNAL dls_status_t dls__tensor_new(dls__buffer *buf, const DLTensor *meta, uint64_t flags,
                                           dls_tensor_t *out);
DLS__INTERNAL dls__tensor *dls__tensor_get(dls_tensor_t t, const char *call, const char *arg,
                                           dls_status_t *out_status);

#endif /* DLSTREAM_CORE_TENSOR_H */
