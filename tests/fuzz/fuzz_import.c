/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: bytes become a versioned, legacy or plain DLPack tensor that the importers must accept safely or refuse, running the deleter exactly once.
 *
 * Checks, each an abort() that libFuzzer reports as a crash:
 * - the producer's deleter ran exactly once (counted, and the managed struct
 *   is heap memory freed by the deleter, so a second call is a double free
 *   under ASan) after release, on every accepted and refused input;
 * - an accepted tensor is safe: an independent 128-bit computation of its
 *   byte range finds no overflow, no wrap below 0 or past the top of the
 *   address space, non-NULL data, and the view the handle gives back equals
 *   the input;
 * - an export of an accepted tensor imports back to the same view;
 * - no tensor or buffer handle outlives the input.
 *
 * Input layout (missing bytes read as 0): see decode() and make_corpus.py. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlstream/dlstream.h"

#define MAXD 40

static _Alignas(256) unsigned char g_arena[4096];
static int g_deleted;
static dls_stream_t g_stream; /* an owned CPU stream, as a producer */

typedef struct reader {
  const uint8_t *p;
  size_t n;
} reader;

static uint8_t rd8(reader *r) {
  if (r->n == 0)
    return 0;
  r->n--;
  return *r->p++;
}

static uint64_t rd64(reader *r) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)rd8(r) << (8 * i);
  return v;
}

/* Mostly small values, sometimes powers of two and raw 64-bit patterns. */
static int64_t rd_int(reader *r) {
  uint8_t sel = rd8(r);
  switch (sel & 3) {
  case 0: return (int64_t)(sel >> 2);
  case 1: return -(int64_t)(sel >> 2);
  case 2: return (int64_t)rd64(r);
  default: { /* +-2^k, +-2^k + small: unsigned arithmetic, converted */
    uint64_t v = (uint64_t)1 << (rd8(r) % 64);
    v = (sel & 4) ? 0 - v : v + (uint64_t)(sel >> 3) - 8u;
    return (int64_t)v;
  }
  }
}

static void *rd_data(reader *r) {
  uint8_t sel = rd8(r);
  switch (sel % 7) {
  case 0: return g_arena;
  case 1: return NULL;
  case 2: return g_arena + rd8(r);                         /* often misaligned */
  case 3: return (void *)(uintptr_t)rd64(r);               /* any address */
  case 4: return (void *)(UINTPTR_MAX - rd8(r) * 16u);     /* near the top */
  case 5: return (void *)(uintptr_t)(rd8(r) * 16u);        /* near 0 */
  default: return g_arena + 64 * (sel >> 3);
  }
}

static const int32_t k_device_types[] = {kDLCPU, kDLCPU, kDLCPU, kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged,
                                         kDLROCM, kDLROCMHost, kDLOpenCL, kDLExtDev, 0, 99, -1};

typedef struct input {
  int mode;       /* 0 versioned, 1 legacy, 2 view, 3 validate only */
  bool use_stream; /* producer: g_stream, else {0} */
  bool has_deleter;
  bool do_export;
  uint32_t major, minor;
  uint64_t flags;
  DLTensor t;
  int64_t shape[MAXD];
  int64_t strides[MAXD];
} input;

static void decode(reader *r, input *in) {
  memset(in, 0, sizeof *in);
  uint8_t head = rd8(r);
  in->mode = head & 3;
  in->use_stream = head & 4;
  in->has_deleter = !(head & 8);
  in->do_export = head & 16;
  uint8_t ver = rd8(r);
  in->major = ver < 240 ? 1u : (uint32_t)(ver - 240);
  in->minor = rd8(r);
  uint8_t fl = rd8(r);
  in->flags = fl & 0x80 ? rd64(r) : fl & 7;
  uint8_t dev = rd8(r);
  in->t.device.device_type = (DLDeviceType)k_device_types[dev % (sizeof k_device_types / sizeof k_device_types[0])];
  in->t.device.device_id = (int32_t)(dev / 16) - 1; /* -1 .. 14 */
  if (dev >= 240)
    in->t.device.device_id = (int32_t)rd64(r);
  in->t.dtype.code = rd8(r);
  in->t.dtype.bits = rd8(r);
  uint8_t lanes = rd8(r);
  in->t.dtype.lanes = lanes == 255 ? (uint16_t)rd64(r) : lanes;
  int8_t nd = (int8_t)rd8(r);
  in->t.ndim = nd; /* -128..127: outside 0..32 is refused before shape is read */
  uint8_t arrays = rd8(r);
  int dims = in->t.ndim < 0 ? 0 : in->t.ndim > MAXD ? MAXD : in->t.ndim;
  for (int i = 0; i < dims; i++)
    in->shape[i] = rd_int(r);
  for (int i = 0; i < dims; i++)
    in->strides[i] = rd_int(r);
  in->t.shape = (arrays & 1) && in->t.ndim > 0 ? NULL : in->shape;
  in->t.strides = (arrays & 2) ? in->strides : NULL;
  uint8_t off = rd8(r);
  in->t.byte_offset = off == 255 ? rd64(r) : off;
  in->t.data = rd_data(r);
}

static void deleter_versioned(DLManagedTensorVersioned *self) {
  g_deleted++;
  free(self);
}

static void deleter_legacy(DLManagedTensor *self) {
  g_deleted++;
  free(self);
}

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "fuzz_import: check failed at line %d: %s (last error: %s)\n", \
              __LINE__, #cond, dls_last_error());                                     \
      abort();                                                                       \
    }                                                                                \
  } while (0)

/* An independent oracle: the bytes an accepted tensor addresses, in 128 bits. */
static void check_accepted_is_safe(const input *in) {
  const DLTensor *t = &in->t;
  CHECK(t->ndim >= 0 && t->ndim <= 32);
  CHECK(t->dtype.lanes >= 1);
  size_t esize = dls_dtype_size(t->dtype);
  CHECK(esize > 0);
  __int128 count = 1, nonzero = 1, lo = 0, hi = 0;
  for (int i = 0; i < t->ndim; i++) {
    int64_t n = t->shape[i];
    CHECK(n >= 0);
    count *= n;
    if (n > 0)
      nonzero *= n;
    CHECK(nonzero <= INT64_MAX);
    if (n > 1 && t->strides != NULL) {
      __int128 reach = (__int128)t->strides[i] * (n - 1);
      if (reach < 0)
        lo += reach;
      else
        hi += reach;
    }
  }
  CHECK(nonzero * (__int128)esize <= INT64_MAX);
  if (t->strides == NULL && count > 0)
    hi = count - 1;
  __int128 base = (__int128)(uintptr_t)t->data + t->byte_offset;
  CHECK(base <= (__int128)UINTPTR_MAX);
  if (count == 0)
    return;
  CHECK(t->data != NULL);
  unsigned bits = (unsigned)t->dtype.bits * t->dtype.lanes;
  bool packed = bits % 8 != 0 && !(in->mode == 0 && (in->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)) &&
                !(in->mode == 2 && (in->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED));
  if (packed) {
    CHECK(base + (count * bits + 7) / 8 <= (__int128)UINTPTR_MAX + 1);
    return;
  }
  CHECK(base + lo * (__int128)esize >= 0);
  CHECK(base + (hi + 1) * (__int128)esize <= (__int128)UINTPTR_MAX);
  CHECK((hi - lo + 1) * (__int128)esize <= INT64_MAX);
  size_t align = esize & (~esize + 1);
  if (align > 16)
    align = 16;
  CHECK((uint64_t)base % align == 0);
}

static void check_view(const DLTensor *v, const DLTensor *in) {
  CHECK(v->data == in->data);
  CHECK(v->byte_offset == in->byte_offset);
  CHECK(v->ndim == in->ndim);
  CHECK(v->dtype.code == in->dtype.code && v->dtype.bits == in->dtype.bits && v->dtype.lanes == in->dtype.lanes);
  CHECK(v->device.device_type == in->device.device_type && v->device.device_id == in->device.device_id);
  for (int i = 0; i < in->ndim; i++) {
    CHECK(v->shape[i] == in->shape[i]);
    if (in->strides != NULL && in->shape[i] > 1)
      CHECK(v->strides[i] == in->strides[i]);
  }
}

/* Exports and re-imports an accepted tensor; releases the copies. */
static void round_trip(dls_tensor_t t, const DLTensor *orig) {
  DLManagedTensorVersioned *e = NULL;
  if (dls_tensor_export_versioned(t, (dls_stream_t){0}, &e) == DLS_OK) {
    dls_tensor_t t2;
    CHECK(dls_tensor_import_versioned(e, (dls_stream_t){0}, &t2) == DLS_OK);
    const DLTensor *v;
    CHECK(dls_tensor_dltensor(t2, &v) == DLS_OK);
    check_view(v, orig);
    CHECK(dls_tensor_release(t2) == DLS_OK);
  }
  DLManagedTensor *l = NULL;
  dls_status_t st = dls_tensor_export_legacy(t, g_stream, &l);
  uint64_t flags = 0;
  CHECK(dls_tensor_flags(t, &flags) == DLS_OK);
  if (flags & DLS_TENSOR_READ_ONLY)
    CHECK(st == DLS_ERR_READ_ONLY && l == NULL);
  if (st == DLS_OK)
    l->deleter(l);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  if (dls_init() != DLS_OK || dls_stream_create(dls_cpu(), NULL, &g_stream) != DLS_OK) {
    fprintf(stderr, "fuzz_import: setup failed: %s\n", dls_last_error());
    abort();
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader r = {data, size};
  input in;
  decode(&r, &in);
  dls_stream_t producer = in.use_stream ? g_stream : (dls_stream_t){0};
  dls_tensor_t t = {0};
  dls_status_t st;
  g_deleted = 0;
  int expect_deleted = 0;

  void *unowned = NULL; /* a managed struct without deleter: freed here at the end */
  switch (in.mode) {
  case 0: {
    DLManagedTensorVersioned *m = calloc(1, sizeof *m);
    CHECK(m != NULL);
    m->version.major = in.major;
    m->version.minor = in.minor;
    m->flags = in.flags;
    m->dl_tensor = in.t;
    m->deleter = in.has_deleter ? deleter_versioned : NULL;
    expect_deleted = in.has_deleter;
    unowned = in.has_deleter ? NULL : m;
    st = dls_tensor_import_versioned(m, producer, &t);
    if (st == DLS_ERR_VERSION)
      CHECK(in.major != DLPACK_MAJOR_VERSION);
    break;
  }
  case 1: {
    DLManagedTensor *m = calloc(1, sizeof *m);
    CHECK(m != NULL);
    m->dl_tensor = in.t;
    m->deleter = in.has_deleter ? deleter_legacy : NULL;
    expect_deleted = in.has_deleter;
    unowned = in.has_deleter ? NULL : m;
    st = dls_tensor_import_legacy(m, producer, &t);
    break;
  }
  case 2:
    st = dls_tensor_view(&in.t, in.flags & 0x7, producer, &t);
    break;
  default:
    st = dls_tensor_validate(&in.t);
    break;
  }

  if (st == DLS_OK && in.mode != 3) {
    CHECK(t.id != 0);
    check_accepted_is_safe(&in);
    const DLTensor *v;
    CHECK(dls_tensor_dltensor(t, &v) == DLS_OK);
    check_view(v, &in.t);
    CHECK(g_deleted == 0);
    if (in.do_export)
      round_trip(t, &in.t);
    CHECK(g_deleted == 0);
    CHECK(dls_tensor_release(t) == DLS_OK);
  } else if (st == DLS_OK) {
    check_accepted_is_safe(&in);
  } else {
    CHECK(t.id == 0);
    CHECK(dls_last_error()[0] != '\0');
  }
  if (in.do_export) {
    /* The legacy export names g_stream as its consumer, which records work on
     * both streams: let both pass so that every release is due now. */
    CHECK(dls_stream_synchronize(g_stream) == DLS_OK);
    CHECK(dls_stream_synchronize(dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY)) == DLS_OK);
  }
  dls_deferred_poll();
  CHECK(g_deleted == expect_deleted);
  free(unowned);
  CHECK(dls_live_handles(DLS_HANDLE_TENSOR) == 0);
  CHECK(dls_live_handles(DLS_HANDLE_BUFFER) == 0);
  CHECK(dls_deferred_pending() == 0);
  return 0;
}
