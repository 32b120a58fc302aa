/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in kernels on every backend: fill, axpy, strided copy, spin. */
#include "common.h"

TestSuite(builtin, .fini = dlst_fini);

typedef struct ctx_t {
  DLDevice d;
  dls_stream_t s;
} ctx_t;

static ctx_t open_ctx(DLDeviceType t) {
  ctx_t c;
  c.d = dlst_device(t);
  OK(dls_stream_create(c.d, NULL, &c.s));
  return c;
}

static dls_buffer_t upload(ctx_t c, const void *host, size_t n) {
  dls_buffer_t b;
  OK(dls_buffer_alloc(c.s, n, &b));
  OK(dls_buffer_write(b, 0, host, n, c.s));
  OK(dls_stream_synchronize(c.s));
  return b;
}

static void download(ctx_t c, dls_buffer_t b, void *host, size_t n) {
  OK(dls_buffer_read(b, 0, host, n, c.s));
  OK(dls_stream_synchronize(c.s));
}

BACKEND_TEST(builtin, fill_every_element_size) {
  ctx_t c = open_ctx(*backend_type);
  uint64_t host[100];
  for (uint32_t size = 1; size <= 8; size *= 2) {
    memset(host, 0, sizeof host);
    dls_buffer_t b = upload(c, host, sizeof host);
    uint64_t v = 0x1122334455667788ull;
    uint64_t count = (sizeof host - 8) / size; /* leave the last 8 bytes alone */
    OK(dls_fill(c.s, dls_arg_buffer(b), count, size, &v));
    download(c, b, host, sizeof host);
    unsigned char *bytes = (unsigned char *)host;
    for (uint64_t i = 0; i < count; i++)
      cr_assert_eq(memcmp(bytes + i * size, &v, size), 0, "element %llu of size %u", (unsigned long long)i, size);
    cr_assert_eq(host[99], 0, "fill wrote past its count");
    OK(dls_buffer_free(b));
  }
  OK(dls_stream_destroy(c.s));
}

BACKEND_TEST(builtin, fill_rejects_bad_input) {
  ctx_t c = open_ctx(*backend_type);
  dls_buffer_t b;
  OK(dls_buffer_alloc(c.s, 16, &b));
  int32_t v = 0;
  FAILS(dls_fill(c.s, dls_arg_buffer(b), 4, 3, &v), DLS_ERR_INVALID_ARGUMENT, "elem_size=3");
  FAILS(dls_fill(c.s, dls_arg_buffer(b), 4, 4, NULL), DLS_ERR_INVALID_ARGUMENT, "value=NULL");
  FAILS(dls_fill(c.s, dls_arg_buffer(b), 5, 4, &v), DLS_ERR_INVALID_ARGUMENT, "dls_fill(dst): needs bytes [0, 20)");
  FAILS(dls_fill(c.s, dls_arg_buffer(b), UINT64_MAX / 2, 8, &v), DLS_ERR_INVALID_ARGUMENT, "overflows");
  FAILS(dls_fill(c.s, dls_arg_i32(1), 1, 4, &v), DLS_ERR_INVALID_ARGUMENT, "must be a buffer, tensor or pointer");
  FAILS(dls_fill(c.s, dls_arg_ptr(NULL), 1, 4, &v), DLS_ERR_INVALID_ARGUMENT, "dst=NULL");
  OK(dls_fill(c.s, dls_arg_buffer(b), 0, 4, &v));
  OK(dls_buffer_free(b));
  FAILS(dls_fill(c.s, dls_arg_buffer(b), 1, 4, &v), DLS_ERR_INVALID_HANDLE, "dls_fill(dst)");
  OK(dls_stream_destroy(c.s));
}

BACKEND_TEST(builtin, axpy_f32_and_f64) {
  ctx_t c = open_ctx(*backend_type);
  enum { N = 3000 };
  static float xf[N], yf[N];
  static double xd[N], yd[N];
  for (int i = 0; i < N; i++) {
    xf[i] = (float)i;
    yf[i] = 1.0f;
    xd[i] = i * 0.5;
    yd[i] = -1.0;
  }
  dls_buffer_t bx = upload(c, xf, sizeof xf), by = upload(c, yf, sizeof yf);
  dls_buffer_t dx = upload(c, xd, sizeof xd), dy = upload(c, yd, sizeof yd);
  OK(dls_axpy_f32(c.s, N, 2.0f, dls_arg_buffer(bx), dls_arg_buffer(by)));
  OK(dls_axpy_f64(c.s, N, 4.0, dls_arg_buffer(dx), dls_arg_buffer(dy)));
  download(c, by, yf, sizeof yf);
  download(c, dy, yd, sizeof yd);
  for (int i = 0; i < N; i++) {
    cr_assert_float_eq(yf[i], 2.0f * i + 1.0f, 1e-3, "yf[%d]", i);
    cr_assert_float_eq(yd[i], 2.0 * i - 1.0, 1e-12, "yd[%d]", i);
  }
  FAILS(dls_axpy_f32(c.s, N + 1, 1.0f, dls_arg_buffer(bx), dls_arg_buffer(by)), DLS_ERR_INVALID_ARGUMENT,
        "dls_axpy_f32(x)");
  OK(dls_buffer_free(bx));
  OK(dls_buffer_free(by));
  OK(dls_buffer_free(dx));
  OK(dls_buffer_free(dy));
  OK(dls_stream_destroy(c.s));
}

/* Reference strided copy on the host, element by element. */
static void host_copy(unsigned char *dst, const unsigned char *src, const dls_copy_desc_t *d) {
  int64_t idx[DLS_COPY_MAX_DIMS] = {0};
  uint64_t total = 1;
  for (uint32_t i = 0; i < d->ndim; i++)
    total *= (uint64_t)d->shape[i];
  for (uint64_t k = 0; k < total; k++) {
    int64_t so = 0, dof = 0;
    for (uint32_t i = 0; i < d->ndim; i++) {
      so += idx[i] * d->src_strides[i];
      dof += idx[i] * d->dst_strides[i];
    }
    memcpy(dst + dof * d->elem_size, src + so * d->elem_size, d->elem_size);
    for (int i = (int)d->ndim - 1; i >= 0; i--) {
      if (++idx[i] < d->shape[i])
        break;
      idx[i] = 0;
    }
  }
}

static void check_copy(ctx_t c, dls_copy_desc_t desc, size_t src_bytes, size_t dst_bytes, int64_t src_off_elems) {
  unsigned char *src = malloc(src_bytes), *dst = calloc(1, dst_bytes), *want = calloc(1, dst_bytes);
  for (size_t i = 0; i < src_bytes; i++)
    src[i] = (unsigned char)(i * 31 + 7);
  dls_buffer_t bs = upload(c, src, src_bytes), bd = upload(c, dst, dst_bytes);
  host_copy(want, src + src_off_elems * desc.elem_size, &desc);
  void *sp;
  OK(dls_buffer_ptr(bs, &sp));
  dls_arg_t sarg = src_off_elems ? dls_arg_ptr((char *)sp + src_off_elems * desc.elem_size) : dls_arg_buffer(bs);
  OK(dls_copy_strided(c.s, dls_arg_buffer(bd), sarg, &desc));
  OK(dls_buffer_record_use(bs, c.s, DLS_ACCESS_WRITE));
  download(c, bd, dst, dst_bytes);
  cr_assert_eq(memcmp(dst, want, dst_bytes), 0, "strided copy (ndim %u, elem %u) differs", desc.ndim,
               desc.elem_size);
  OK(dls_buffer_free(bs));
  OK(dls_buffer_free(bd));
  free(src);
  free(dst);
  free(want);
}

BACKEND_TEST(builtin, copy_transpose_2d) {
  ctx_t c = open_ctx(*backend_type);
  dls_copy_desc_t d = {.ndim = 2, .elem_size = 4, .shape = {37, 53}, .dst_strides = {53, 1}, .src_strides = {1, 37}};
  check_copy(c, d, 37 * 53 * 4, 37 * 53 * 4, 0);
  OK(dls_stream_destroy(c.s));
}

BACKEND_TEST(builtin, copy_odd_element_sizes) {
  ctx_t c = open_ctx(*backend_type);
  for (uint32_t es = 1; es <= 24; es += (es < 4 ? 1 : 5)) {
    dls_copy_desc_t d = {.ndim = 2, .elem_size = es, .shape = {9, 11}, .dst_strides = {11, 1}, .src_strides = {1, 9}};
    check_copy(c, d, 99 * es, 99 * es, 0);
  }
  OK(dls_stream_destroy(c.s));
}

BACKEND_TEST(builtin, copy_eight_dimensions) {
  ctx_t c = open_ctx(*backend_type);
  dls_copy_desc_t d = {.ndim = 8, .elem_size = 2, .shape = {2, 3, 2, 3, 2, 2, 3, 2}};
  int64_t s = 1, t = 1;
  for (int i = 7; i >= 0; i--) {
    d.dst_strides[i] = s;
    s *= d.shape[i];
  }
  for (int i = 0; i < 8; i++) { /* source in reversed (column-major) order */
    d.src_strides[i] = t;
    t *= d.shape[i];
  }
  check_copy(c, d, (size_t)s * 2, (size_t)s * 2, 0);
  OK(dls_stream_destroy(c.s));
}

BACKEND_TEST(builtin, copy_negative_and_zero_strides) {
  ctx_t c = open_ctx(*backend_type);
  /* Reverse a row: src starts at its last element, stride -1. */
  dls_copy_desc_t rev = {.ndim = 1, .elem_size = 8, .shape = {100}, .dst_strides = {1}, .src_strides = {-1}};
  check_copy(c, rev, 100 * 8, 100 * 8, 99);
  /* Broadcast one row to 7 rows. */
  dls_copy_desc_t bc = {.ndim = 2, .elem_size = 4, .shape = {7, 13}, .dst_strides = {13, 1}, .src_strides = {0, 1}};
  check_copy(c, bc, 13 * 4, 7 * 13 * 4, 0);
  /* A scalar (ndim 0) copies one element. */
  dls_copy_desc_t sc = {.ndim = 0, .elem_size = 4};
  check_copy(c, sc, 4, 4, 0);
  OK(dls_stream_destroy(c.s));
}

BACKEND_TEST(builtin, copy_rejects_bad_descriptors) {
  ctx_t c = open_ctx(*backend_type);
  dls_buffer_t a, b;
  OK(dls_buffer_alloc(c.s, 64, &a));
  OK(dls_buffer_alloc(c.s, 64, &b));
  dls_copy_desc_t d = {.ndim = 9, .elem_size = 4};
  FAILS(dls_copy_strided(c.s, dls_arg_buffer(a), dls_arg_buffer(b), &d), DLS_ERR_INVALID_ARGUMENT, "desc.ndim=9");
  d.ndim = 1;
  d.elem_size = 0;
  FAILS(dls_copy_strided(c.s, dls_arg_buffer(a), dls_arg_buffer(b), &d), DLS_ERR_INVALID_ARGUMENT,
        "desc.elem_size=0");
  d.elem_size = 4;
  d.shape[0] = -1;
  FAILS(dls_copy_strided(c.s, dls_arg_buffer(a), dls_arg_buffer(b), &d), DLS_ERR_INVALID_ARGUMENT,
        "desc.shape[0]=-1");
  d.shape[0] = 17;
  d.dst_strides[0] = d.src_strides[0] = 1;
  FAILS(dls_copy_strided(c.s, dls_arg_buffer(a), dls_arg_buffer(b), &d), DLS_ERR_INVALID_ARGUMENT,
        "dls_copy_strided(dst): needs bytes [0, 68)");
  d.shape[0] = 4;
  d.src_strides[0] = -1;
  FAILS(dls_copy_strided(c.s, dls_arg_buffer(a), dls_arg_buffer(b), &d), DLS_ERR_INVALID_ARGUMENT,
        "dls_copy_strided(src): needs bytes [-12, 4)");
  d.shape[0] = INT64_MAX;
  d.src_strides[0] = INT64_MAX;
  FAILS(dls_copy_strided(c.s, dls_arg_buffer(a), dls_arg_buffer(b), &d), DLS_ERR_INVALID_ARGUMENT, "overflows");
  FAILS(dls_copy_strided(c.s, dls_arg_buffer(a), dls_arg_buffer(b), NULL), DLS_ERR_INVALID_ARGUMENT, "desc=NULL");
  OK(dls_buffer_free(a));
  OK(dls_buffer_free(b));
  OK(dls_stream_destroy(c.s));
}

BACKEND_TEST(builtin, spin_takes_at_least_its_time) {
  ctx_t c = open_ctx(*backend_type);
  dls_event_t a, b;
  OK(dls_event_create(c.d, DLS_EVENT_TIMING, &a));
  OK(dls_event_create(c.d, DLS_EVENT_TIMING, &b));
  OK(dls_event_record(a, c.s));
  OK(dls_spin(c.s, 5000000));
  OK(dls_event_record(b, c.s));
  OK(dls_stream_synchronize(c.s));
  float ms = 0;
  OK(dls_event_elapsed_ms(a, b, &ms));
  cr_assert_geq(ms, 4.9f, "spin of 5 ms took %f ms", ms);
  OK(dls_event_destroy(a));
  OK(dls_event_destroy(b));
  OK(dls_stream_destroy(c.s));
}

BACKEND_TEST(builtin, empty_builtin_launches) {
  ctx_t c = open_ctx(*backend_type);
  dls_function_t f;
  OK(dls_builtin_function(c.d, "dls_empty", &f));
  dls_launch_config_t cfg = dls_config_1d(1, 32);
  OK(dls_launch(f, c.s, &cfg, NULL, 0));
  OK(dls_stream_synchronize(c.s));
  OK(dls_stream_destroy(c.s));
}
