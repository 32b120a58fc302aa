/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile descriptors of dls_copy_strided and dls_copy_convert (and of the built-ins launched with one): every view
 * whose reach does not fit is refused by name before a launch, whatever its extents, strides and element size, and
 * the buffers around stay as they were. A view of 2^60 elements 2^60 + 1 elements apart, of 4096 bytes each, reaches
 * 2^132 bytes: its span computed in 128 bits wrapped to [0, 0), which the check took for a view of no byte, and the
 * kernel then wrote 4096 bytes past the destination's end (its offsets wrap to 4096, 8192 ...). */
#include "common.h"

TestSuite(builtin_hostile, .fini = dlst_fini);

enum { BYTES = 8192 };

typedef struct ctx_t {
  DLDevice d;
  dls_stream_t s;
  dls_buffer_t src, dst;
} ctx_t;

static ctx_t open_ctx(DLDeviceType t) {
  ctx_t c;
  c.d = dlst_device(t);
  OK(dls_stream_create(c.d, NULL, &c.s));
  OK(dls_buffer_alloc(c.s, BYTES, &c.src));
  OK(dls_buffer_alloc(c.s, BYTES, &c.dst));
  unsigned char host[BYTES];
  memset(host, 0x5a, sizeof host);
  OK(dls_buffer_write(c.dst, 0, host, sizeof host, c.s));
  OK(dls_buffer_write(c.src, 0, host, sizeof host, c.s));
  OK(dls_stream_synchronize(c.s));
  return c;
}

static void close_ctx(ctx_t *c) {
  unsigned char host[BYTES];
  OK(dls_buffer_read(c->dst, 0, host, sizeof host, c->s));
  OK(dls_stream_synchronize(c->s));
  for (size_t i = 0; i < sizeof host; i++)
    cr_assert_eq(host[i], 0x5a, "byte %zu of the destination changed", i);
  OK(dls_buffer_free(c->src));
  OK(dls_buffer_free(c->dst));
  OK(dls_stream_destroy(c->s));
}

/* Destination views whose reach overflows 128 bits once multiplied by the element size (the source: one element,
 * broadcast). */
static const struct {
  uint32_t ndim, elem;
  int64_t shape[2], stride[2];
} g_views[] = {
    {1, 4096, {1ll << 60}, {(1ll << 60) + 1}},
    {1, 4096, {1ll << 61}, {-((1ll << 61) + 1)}},
    {2, 4096, {1ll << 56, 1ll << 6}, {(1ll << 62) + 1, 1}},
    {2, 8, {1ll << 62, 1}, {INT64_MAX, 1}},
};

BACKEND_TEST(builtin_hostile, a_view_whose_reach_overflows_is_refused) {
  ctx_t c = open_ctx(*backend_type);
  dls_function_t f;
  OK(dls_builtin_function(c.d, "dls_copy_strided", &f));
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  for (size_t v = 0; v < sizeof g_views / sizeof g_views[0]; v++) {
    dls_copy_desc_t d;
    memset(&d, 0, sizeof d);
    d.ndim = g_views[v].ndim;
    d.elem_size = g_views[v].elem;
    memcpy(d.shape, g_views[v].shape, sizeof g_views[v].shape);
    memcpy(d.dst_strides, g_views[v].stride, sizeof g_views[v].stride);
    FAILS(dls_copy_strided(c.s, dls_arg_buffer(c.dst), dls_arg_buffer(c.src), &d), DLS_ERR_INVALID_ARGUMENT,
          "dls_copy_strided(desc): the dst view's extent overflows");
    dls_arg_t args[3] = {dls_arg_buffer(c.dst), dls_arg_buffer(c.src), dls_arg_bytes(&d, sizeof d)};
    FAILS(dls_launch(f, c.s, &cfg, args, 3), DLS_ERR_INVALID_ARGUMENT, "the dst view's extent overflows");
  }
  OK(dls_stream_synchronize(c.s));
  close_ctx(&c);
}

/* The same views with elements of 8 bytes through dls_copy_convert: float64 from float32 and back. */
BACKEND_TEST(builtin_hostile, a_conversion_whose_reach_overflows_is_refused) {
  ctx_t c = open_ctx(*backend_type);
  static const int64_t shapes[][2] = {{1ll << 62, 1}, {(1ll << 61) + (1ll << 60), 2}};
  for (size_t v = 0; v < 2; v++) {
    dls_convert_desc_t cd;
    memset(&cd, 0, sizeof cd);
    cd.ndim = 2;
    cd.shape[0] = shapes[v][0];
    cd.shape[1] = shapes[v][1];
    cd.dst_strides[0] = INT64_MAX;
    cd.dst_strides[1] = INT64_MIN + 1;
    cd.dst_dtype = (DLDataType){kDLFloat, 64, 1};
    cd.src_dtype = (DLDataType){kDLFloat, 32, 1};
    FAILS(dls_copy_convert(c.s, dls_arg_buffer(c.dst), dls_arg_buffer(c.src), &cd), DLS_ERR_INVALID_ARGUMENT,
          "dls_copy_convert(desc): the dst view's extent overflows");
  }
  OK(dls_stream_synchronize(c.s));
  close_ctx(&c);
}

/* A destination two of whose elements are one (strides that are not 0, so not a broadcast, yet overlap) writes that
 * element from two sources at once, a race on a GPU: refused by name as a broadcast destination is, through both
 * descriptors. Destinations whose elements are apart are copied, those whose steps interleave too. */
static const struct {
  uint32_t ndim;
  int64_t shape[3], dst[3];
  bool apart;
} g_dsts[] = {
    {2, {2, 2}, {1, 1}, false},       /* (0, 1) and (1, 0) */
    {2, {2, 2}, {1, -1}, false},      /* (0, 0) and (1, 1) */
    {2, {3, 4}, {2, 1}, false},       /* rows 2 elements apart, 4 long */
    {3, {2, 2, 3}, {4, 2, 1}, false}, /* (0, 1, 0) and (0, 0, 2) */
    {2, {4, 3}, {2, 3}, false},       /* (3, 0) and (0, 2): both at 6 */
    {2, {2, 3}, {3, 2}, true},        /* 0, 2, 4, 3, 5, 7: interleaved, apart */
    {2, {2, 2}, {1, 2}, true},        /* transposed */
    {2, {4, 1}, {1, 1}, true},        /* a dimension of one element: its stride is never used */
    {2, {0, 2}, {1, 1}, true},        /* no element */
};

BACKEND_TEST(builtin_hostile, a_destination_whose_elements_overlap_is_refused) {
  ctx_t c = open_ctx(*backend_type);
  for (size_t v = 0; v < sizeof g_dsts / sizeof g_dsts[0]; v++) {
    dls_copy_desc_t d;
    dls_convert_desc_t cd;
    memset(&d, 0, sizeof d);
    memset(&cd, 0, sizeof cd);
    d.ndim = cd.ndim = g_dsts[v].ndim;
    d.elem_size = 4;
    cd.dst_dtype = cd.src_dtype = (DLDataType){kDLFloat, 32, 1};
    for (uint32_t i = 0; i < d.ndim; i++) {
      d.shape[i] = cd.shape[i] = g_dsts[v].shape[i];
      d.dst_strides[i] = cd.dst_strides[i] = g_dsts[v].dst[i];
      d.src_strides[i] = cd.src_strides[i] = 1;
    }
    char *dst; /* 64 bytes in: room for the negative steps */
    OK(dls_buffer_ptr(c.dst, (void **)&dst));
    dls_status_t a = dls_copy_strided(c.s, dls_arg_ptr(dst + 64), dls_arg_buffer(c.src), &d);
    char said[512];
    snprintf(said, sizeof said, "%s", dls_last_error());
    dls_status_t b = dls_copy_convert(c.s, dls_arg_ptr(dst + 64), dls_arg_buffer(c.src), &cd);
    if (g_dsts[v].apart) {
      cr_assert(a == DLS_OK && b == DLS_OK, "view %zu (elements apart) refused: %s / %s", v, said, dls_last_error());
      continue;
    }
    cr_assert_eq(a, DLS_ERR_INVALID_ARGUMENT, "view %zu: an overlapping destination was queued", v);
    cr_assert_eq(b, DLS_ERR_INVALID_ARGUMENT, "view %zu: an overlapping destination was queued (convert)", v);
    cr_assert(strstr(said, "dls_copy_strided(desc.dst_strides): the destination's elements overlap") != NULL,
              "view %zu: %s", v, said);
    cr_assert(strstr(dls_last_error(), "dls_copy_convert(desc.dst_strides)") != NULL, "%s", dls_last_error());
  }
  OK(dls_stream_synchronize(c.s)); /* the copies made wrote the source's bytes: the destination's own */
  close_ctx(&c);
}
