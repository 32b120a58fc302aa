/* SPDX-License-Identifier: Apache-2.0 */
/* Tensor.__dlpack__(copy=True)'s copy of any view: the strided-copy built-in takes 8 dimensions, so extents of 1
 * are dropped and dimensions contiguous with each other in the source merge first; a view still wider than 8 is
 * walked on the host, one copy per block of its 8 longest dimensions. */
#include "tensorcopy.h"

#include <string.h>

typedef struct copy_dim {
  int64_t n, src, dst; /* extent; strides in elements */
} copy_dim;

/* The dimensions of the copy, outermost first, merged; their count, or 0 for an empty tensor (nothing to copy). A
 * tensor of one element has one dimension of extent 1. */
static int copy_dims(const DLTensor *src, copy_dim *out) {
  int64_t dst_stride = 1;
  for (int i = src->ndim - 1; i >= 0; i--) {
    if (src->shape[i] == 0)
      return 0;
    dst_stride *= src->shape[i];
  }
  int nd = 0;
  for (int i = 0; i < src->ndim; i++) {
    dst_stride /= src->shape[i];
    copy_dim d = {src->shape[i], src->strides[i], dst_stride};
    if (d.n == 1)
      continue;
    copy_dim *prev = nd > 0 ? &out[nd - 1] : NULL;
    if (prev != NULL && prev->src == d.src * d.n && prev->dst == d.dst * d.n) {
      prev->n *= d.n;
      prev->src = d.src;
      prev->dst = d.dst;
    } else {
      out[nd++] = d;
    }
  }
  if (nd == 0)
    out[nd++] = (copy_dim){1, 1, 1};
  return nd;
}

static void fill_desc(dls_copy_desc_t *desc, uint32_t elem_size, const copy_dim *dims, int nd) {
  memset(desc, 0, sizeof *desc);
  desc->ndim = (uint32_t)nd;
  desc->elem_size = elem_size;
  for (int i = 0; i < nd; i++) {
    desc->shape[i] = dims[i].n;
    desc->src_strides[i] = dims[i].src;
    desc->dst_strides[i] = dims[i].dst;
  }
}

/* More than DLS_COPY_MAX_DIMS dimensions left: the longest ones make the block each copy takes, the others are
 * walked here (at least 2**8 elements a copy, as every extent left is 2 or more). */
static dls_status_t copy_blocks(dls_stream_t work, char *dst, const char *src, uint32_t elem_size,
                                const copy_dim *dims, int nd) {
  copy_dim inner[DLS_COPY_MAX_DIMS], outer[DLS__EXT_MAX_NDIM];
  bool taken[DLS__EXT_MAX_NDIM] = {false};
  for (int k = 0; k < DLS_COPY_MAX_DIMS; k++) {
    int best = -1;
    for (int i = 0; i < nd; i++)
      if (!taken[i] && (best < 0 || dims[i].n > dims[best].n))
        best = i;
    taken[best] = true;
  }
  int ni = 0, no = 0;
  for (int i = 0; i < nd; i++) {
    if (taken[i])
      inner[ni++] = dims[i];
    else
      outer[no++] = dims[i];
  }
  dls_copy_desc_t desc;
  fill_desc(&desc, elem_size, inner, ni);
  int64_t idx[DLS__EXT_MAX_NDIM] = {0};
  int64_t src_off = 0, dst_off = 0;
  for (;;) {
    dls_status_t rc = dls_copy_strided(work, dls_arg_ptr(dst + dst_off * (int64_t)elem_size),
                                       dls_arg_ptr((void *)(src + src_off * (int64_t)elem_size)), &desc);
    if (rc != DLS_OK)
      return rc;
    int k = no - 1;
    for (; k >= 0; k--) { /* the next block: an odometer over the outer dimensions */
      src_off += outer[k].src;
      dst_off += outer[k].dst;
      if (++idx[k] < outer[k].n)
        break;
      src_off -= outer[k].src * outer[k].n;
      dst_off -= outer[k].dst * outer[k].n;
      idx[k] = 0;
    }
    if (k < 0)
      return DLS_OK;
  }
}

dls_status_t dlspy_tensor_copy(const DLTensor *src, dls_tensor_t src_h, dls_stream_t work, dls_tensor_t *out) {
  out->id = 0;
  dls_status_t rc = dls_tensor_order_before(src_h, work);
  if (rc == DLS_OK)
    rc = dls_tensor_empty(work, src->ndim, src->shape, src->dtype, out);
  if (rc != DLS_OK)
    return rc;
  copy_dim dims[DLS__EXT_MAX_NDIM];
  int nd = copy_dims(src, dims);
  uint32_t elem_size = (uint32_t)dls_dtype_size(src->dtype);
  if (nd == 0)
    return DLS_OK;
  if (nd <= DLS_COPY_MAX_DIMS) {
    dls_copy_desc_t desc;
    fill_desc(&desc, elem_size, dims, nd);
    rc = dls_copy_strided(work, dls_arg_tensor(*out), dls_arg_tensor_in(src_h), &desc);
  } else {
    /* Raw addresses: the uses are declared once all blocks are queued, the source's even when one failed. */
    void *d = NULL, *s = NULL;
    rc = dls_tensor_data(*out, &d);
    if (rc == DLS_OK)
      rc = dls_tensor_data(src_h, &s);
    if (rc == DLS_OK)
      rc = copy_blocks(work, d, s, elem_size, dims, nd);
    dls_status_t r1 = dls_tensor_record_use(src_h, work, DLS_ACCESS_READ);
    dls_status_t r2 = dls_tensor_record_use(*out, work, DLS_ACCESS_WRITE);
    if (rc == DLS_OK)
      rc = r1 != DLS_OK ? r1 : r2;
  }
  if (rc != DLS_OK) {
    (void)dls_tensor_release(*out);
    out->id = 0;
  }
  return rc;
}
