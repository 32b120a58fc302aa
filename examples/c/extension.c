/* SPDX-License-Identifier: Apache-2.0 */
/* An extension-style C function that takes DLPack tensors and a stream from its host framework, computes 2 * x + y in the host's stream order and returns a DLPack result; main() plays the host on the CPU device.
 *
 * What the extension shows:
 * - the caller's native stream is wrapped, never created or synchronized:
 *   every launch is queued after the caller's work and before what the caller
 *   queues next, with no host wait;
 * - the inputs are imported (validated in full; their deleters run once,
 *   after the last stream that used them has passed);
 * - temporaries come from dls_tensor_empty on that stream and are released in
 *   stream order while the work that uses them may still be queued;
 * - the result leaves as a DLManagedTensorVersioned whose deleter frees it in
 *   stream order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlstream/dlstream.h"

/* ------------------------------------------------------------ the extension */

int scale_add(DLManagedTensorVersioned *x, DLManagedTensorVersioned *y, void *native_stream,
              DLManagedTensorVersioned **out);

/* Calls a managed tensor's deleter (ownership came to us and we are done). */
static void drop(DLManagedTensorVersioned *m) {
  if (m != NULL && m->deleter != NULL)
    m->deleter(m);
}

/* Copies `src` (any strides) into `dst` (same shape), queued on `stream`. */
static dls_status_t compact_copy(dls_stream_t stream, dls_tensor_t dst, dls_tensor_t src) {
  const DLTensor *d, *s;
  dls_status_t st = dls_tensor_dltensor(dst, &d);
  if (st == DLS_OK)
    st = dls_tensor_dltensor(src, &s);
  if (st != DLS_OK)
    return st;
  dls_copy_desc_t desc;
  memset(&desc, 0, sizeof desc);
  desc.ndim = (uint32_t)s->ndim;
  desc.elem_size = (uint32_t)dls_dtype_size(s->dtype);
  for (int i = 0; i < s->ndim; i++) {
    desc.shape[i] = s->shape[i];
    desc.dst_strides[i] = d->strides[i];
    desc.src_strides[i] = s->strides[i];
  }
  return dls_copy_strided(stream, dls_arg_tensor(dst), dls_arg_tensor_in(src), &desc);
}

/* out = 2 * x + y, for float32 tensors of one shape (any strides, up to 8
 * dimensions) on one device. Steals x and y: their deleters run exactly once,
 * on success and on failure. The work is queued on `native_stream` (the
 * caller's CUstream on CUDA; on the CPU device a native stream handle from
 * dls_stream_native). *out is owned by the caller (call its deleter); it is
 * ready once the caller's stream passes this point. Returns 0 or a
 * dls_status_t, with dls_last_error() (or a line on stderr) saying why. */
int scale_add(DLManagedTensorVersioned *x, DLManagedTensorVersioned *y, void *native_stream,
              DLManagedTensorVersioned **out) {
  dls_status_t st;
  dls_stream_t stream = {0};
  dls_tensor_t tx = {0}, ty = {0}, xc = {0}, res = {0};
  const DLTensor *vx, *vy;

  if (out == NULL || x == NULL || y == NULL) {
    fprintf(stderr, "scale_add: x, y and out must not be NULL\n");
    drop(x);
    drop(y);
    return DLS_ERR_INVALID_ARGUMENT;
  }
  *out = NULL;
  /* The device comes from x; a major version we cannot read fails in the import. */
  DLDevice device = x->version.major == DLPACK_MAJOR_VERSION ? x->dl_tensor.device : dls_cpu();
  if (device.device_type == kDLCUDAHost || device.device_type == kDLCUDAManaged)
    device.device_type = kDLCUDA;

#define TRY(expr)          \
  do {                     \
    st = (expr);           \
    if (st != DLS_OK)      \
      goto done;           \
  } while (0)

  TRY(dls_stream_wrap(device, native_stream, &stream));
  /* Produced on the caller's stream: no wait is needed to read them there. */
  st = dls_tensor_import_versioned(x, stream, &tx);
  x = NULL; /* the import owns it now, also when it failed */
  if (st != DLS_OK)
    goto done;
  st = dls_tensor_import_versioned(y, stream, &ty);
  y = NULL;
  if (st != DLS_OK)
    goto done;

  TRY(dls_tensor_dltensor(tx, &vx));
  TRY(dls_tensor_dltensor(ty, &vy));
  if (vx->dtype.code != kDLFloat || vx->dtype.bits != 32 || vx->dtype.lanes != 1 ||
      memcmp(&vx->dtype, &vy->dtype, sizeof vx->dtype) != 0 || vx->ndim != vy->ndim ||
      vx->ndim > DLS_COPY_MAX_DIMS ||
      (vx->ndim > 0 && memcmp(vx->shape, vy->shape, (size_t)vx->ndim * sizeof(int64_t)) != 0)) {
    fprintf(stderr, "scale_add: x and y must be float32 tensors of one shape, at most %d dimensions\n",
            DLS_COPY_MAX_DIMS);
    st = DLS_ERR_INVALID_ARGUMENT;
    goto done;
  }
  uint64_t n = 1;
  for (int i = 0; i < vx->ndim; i++)
    n *= (uint64_t)vx->shape[i];

  /* The result starts as a compact copy of y; x goes through a compact
   * temporary so that axpy sees both dense. */
  TRY(dls_tensor_empty(stream, vx->ndim, vx->shape, vx->dtype, &res));
  TRY(dls_tensor_empty(stream, vx->ndim, vx->shape, vx->dtype, &xc));
  TRY(compact_copy(stream, res, ty));
  TRY(compact_copy(stream, xc, tx));
  TRY(dls_axpy_f32(stream, n, 2.0f, dls_arg_tensor_in(xc), dls_arg_tensor(res)));
  /* Ordered before the caller's stream, which is ours already: no wait. */
  TRY(dls_tensor_export_versioned(res, stream, out));

done:
  /* All stream-ordered: nothing here waits for the queued work. */
  dls_tensor_release(xc);
  dls_tensor_release(res);
  dls_tensor_release(tx);
  dls_tensor_release(ty);
  dls_stream_destroy(stream); /* the wrapper only; the caller's stream lives on */
  drop(x);
  drop(y);
  return (int)st;
#undef TRY
}

/* -------------------------------------------------- the host framework */

typedef struct host_tensor {
  DLManagedTensorVersioned managed;
  int64_t shape[2];
  int64_t strides[2];
  float *data;
  const char *name;
} host_tensor;

static void host_deleter(DLManagedTensorVersioned *self) {
  host_tensor *h = (host_tensor *)self->manager_ctx;
  printf("host: %s released by the extension\n", h->name);
  free(h->data);
  free(h);
}

/* A rows x cols float32 tensor; column-major storage when `transposed`. */
static DLManagedTensorVersioned *host_matrix(const char *name, int64_t rows, int64_t cols, int transposed,
                                             float first, float step) {
  host_tensor *h = calloc(1, sizeof *h);
  if (h == NULL || (h->data = malloc((size_t)(rows * cols) * sizeof(float))) == NULL)
    abort();
  h->name = name;
  h->shape[0] = rows;
  h->shape[1] = cols;
  h->strides[0] = transposed ? 1 : cols;
  h->strides[1] = transposed ? rows : 1;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      h->data[r * h->strides[0] + c * h->strides[1]] = first + step * (float)(r * cols + c);
  DLManagedTensorVersioned *m = &h->managed;
  m->version.major = DLPACK_MAJOR_VERSION;
  m->version.minor = DLPACK_MINOR_VERSION;
  m->manager_ctx = h;
  m->deleter = host_deleter;
  m->dl_tensor.data = h->data;
  m->dl_tensor.device = dls_cpu();
  m->dl_tensor.ndim = 2;
  m->dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
  m->dl_tensor.shape = h->shape;
  m->dl_tensor.strides = h->strides;
  return m;
}

#define CHECK(expr)                                                                   \
  do {                                                                                \
    dls_status_t c_st_ = (dls_status_t)(expr);                                        \
    if (c_st_ != DLS_OK) {                                                            \
      fprintf(stderr, "%s failed: %s: %s\n", #expr, dls_status_name(c_st_), dls_last_error()); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

int main(void) {
  /* The host's own stream, as torch.cuda.current_stream() would be. */
  dls_stream_t host_stream;
  void *native;
  CHECK(dls_stream_create(dls_cpu(), NULL, &host_stream));
  CHECK(dls_stream_native(host_stream, &native));

  DLManagedTensorVersioned *x = host_matrix("x", 2, 3, 0, 1.0f, 1.0f);   /* 1..6 */
  DLManagedTensorVersioned *y = host_matrix("y", 2, 3, 1, 10.0f, 10.0f); /* 10..60, column-major */
  DLManagedTensorVersioned *out = NULL;
  CHECK(scale_add(x, y, native, &out));

  /* The host reads the result once its stream has passed the extension's work. */
  CHECK(dls_stream_synchronize(host_stream));
  const DLTensor *r = &out->dl_tensor;
  const float *v = (const float *)((const char *)r->data + r->byte_offset);
  int good = r->ndim == 2 && r->shape[0] == 2 && r->shape[1] == 3;
  printf("out = 2 * x + y, shape [%lld, %lld], DLPack %u.%u:\n", (long long)r->shape[0], (long long)r->shape[1],
         out->version.major, out->version.minor);
  for (int64_t i = 0; good && i < 2; i++) {
    printf("  ");
    for (int64_t j = 0; j < 3; j++) {
      float got = v[i * r->strides[0] + j * r->strides[1]];
      float want = 2.0f * (float)(1 + i * 3 + j) + 10.0f * (float)(1 + i * 3 + j);
      printf(" %6.1f", (double)got);
      good = good && got == want;
    }
    printf("\n");
  }
  out->deleter(out);
  CHECK(dls_stream_destroy(host_stream));
  CHECK(dls_shutdown());
  if (!good) {
    fprintf(stderr, "wrong result\n");
    return 1;
  }
  printf("ok\n");
  return 0;
}
