/* SPDX-License-Identifier: Apache-2.0 */
/* Every way into a built-in checks its arguments (dls_launch included), and
 * overlapping sources give NumPy's answer (or are refused where a launch
 * cannot stage them). */
#include "common.h"

TestSuite(builtin_args, .fini = dlst_fini);

enum { N = 64 };

typedef struct ctx_t {
  DLDevice d;
  dls_stream_t s;
  dls_buffer_t b; /* N floats: 0, 1, 2, ... */
  char *base;     /* its device address */
} ctx_t;

static ctx_t open_ctx(DLDeviceType t) {
  ctx_t c;
  c.d = dlst_device(t);
  OK(dls_stream_create(c.d, NULL, &c.s));
  float host[N];
  for (int i = 0; i < N; i++)
    host[i] = (float)i;
  OK(dls_buffer_alloc(c.s, sizeof host, &c.b));
  OK(dls_buffer_write(c.b, 0, host, sizeof host, c.s));
  OK(dls_stream_synchronize(c.s)); /* the write reads `host` in stream order */
  OK(dls_buffer_ptr(c.b, (void **)&c.base));
  return c;
}

static void close_ctx(ctx_t *c) {
  OK(dls_buffer_free(c->b));
  OK(dls_stream_destroy(c->s));
}

static void read_all(ctx_t *c, float *host) {
  OK(dls_buffer_read(c->b, 0, host, N * sizeof(float), c->s));
  OK(dls_stream_synchronize(c->s));
}

static dls_function_t builtin(ctx_t *c, const char *name) {
  dls_function_t f;
  OK(dls_builtin_function(c->d, name, &f));
  return f;
}

BACKEND_TEST(builtin_args, a_generic_launch_of_fill_checks_its_count) {
  ctx_t c = open_ctx(*backend_type);
  dls_function_t f = builtin(&c, "dls_fill");
  dls_launch_config_t cfg = dls_config_1d(1, 64);
  dls_arg_t past[4] = {dls_arg_buffer(c.b), dls_arg_u64(N + 1), dls_arg_u32(4), dls_arg_u64(0)};
  FAILS(dls_launch(f, c.s, &cfg, past, 4), DLS_ERR_INVALID_ARGUMENT, "dls_launch(dst): needs bytes [0, 260)");
  dls_arg_t size[4] = {dls_arg_buffer(c.b), dls_arg_u64(1), dls_arg_u32(3), dls_arg_u64(0)};
  FAILS(dls_launch(f, c.s, &cfg, size, 4), DLS_ERR_INVALID_ARGUMENT, "elem_size=3");
  dls_arg_t kinds[4] = {dls_arg_buffer(c.b), dls_arg_i32(1), dls_arg_u32(4), dls_arg_u64(0)};
  FAILS(dls_launch(f, c.s, &cfg, kinds, 4), DLS_ERR_INVALID_ARGUMENT, "args[1] count");
  FAILS(dls_launch(f, c.s, &cfg, past, 3), DLS_ERR_INVALID_ARGUMENT, "takes 4 arguments");
  dls_arg_t null_dst[4] = {dls_arg_ptr(NULL), dls_arg_u64(1), dls_arg_u32(4), dls_arg_u64(0)};
  FAILS(dls_launch(f, c.s, &cfg, null_dst, 4), DLS_ERR_INVALID_ARGUMENT, "dst=NULL");
  float host[N];
  read_all(&c, host);
  cr_assert_float_eq(host[N - 1], (float)(N - 1), 0, "a refused launch changed the buffer");
  dls_arg_t ok[4] = {dls_arg_buffer(c.b), dls_arg_u64(N), dls_arg_u32(4), dls_arg_u64(0)};
  OK(dls_launch(f, c.s, &cfg, ok, 4));
  read_all(&c, host);
  cr_assert_float_eq(host[N - 1], 0.0f, 0);
  close_ctx(&c);
}

BACKEND_TEST(builtin_args, a_generic_launch_of_axpy_checks_tensors_and_kinds) {
  ctx_t c = open_ctx(*backend_type);
  dls_function_t f = builtin(&c, "dls_axpy_f32");
  dls_launch_config_t cfg = dls_config_1d(1, 64);
  int64_t shape[1] = {N / 2};
  DLTensor view = {c.base, c.d, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  dls_tensor_t t;
  OK(dls_tensor_view(&view, 0, c.s, &t));
  dls_arg_t inside[4] = {dls_arg_u64(N / 2), dls_arg_f32(1.0f), dls_arg_tensor_in(t), dls_arg_ptr(c.base + N * 2)};
  OK(dls_launch(f, c.s, &cfg, inside, 4));
  dls_arg_t beyond[4] = {dls_arg_u64(N / 2 + 1), dls_arg_f32(1.0f), dls_arg_tensor_in(t), dls_arg_buffer(c.b)};
  FAILS(dls_launch(f, c.s, &cfg, beyond, 4), DLS_ERR_INVALID_ARGUMENT, "dls_launch(x): needs bytes [0, 132)");
  dls_arg_t f64[4] = {dls_arg_u64(N), dls_arg_f64(1.0), dls_arg_buffer(c.b), dls_arg_buffer(c.b)};
  FAILS(dls_launch(f, c.s, &cfg, f64, 4), DLS_ERR_INVALID_ARGUMENT, "args[1] a");
  OK(dls_tensor_release(t));
  close_ctx(&c);
}

BACKEND_TEST(builtin_args, a_generic_launch_of_latch_and_copy_checks_pointers_and_descriptors) {
  ctx_t c = open_ctx(*backend_type);
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  dls_arg_t latch[3] = {dls_arg_ptr(NULL), dls_arg_u64(1000), dls_arg_ptr(NULL)};
  FAILS(dls_launch(builtin(&c, "dls_latch"), c.s, &cfg, latch, 3), DLS_ERR_INVALID_ARGUMENT, "flag=NULL");
  dls_function_t copy = builtin(&c, "dls_copy_strided");
  dls_copy_desc_t d = {.ndim = 99, .elem_size = 4};
  dls_arg_t bad_ndim[3] = {dls_arg_buffer(c.b), dls_arg_buffer(c.b), dls_arg_bytes(&d, sizeof d)};
  FAILS(dls_launch(copy, c.s, &cfg, bad_ndim, 3), DLS_ERR_INVALID_ARGUMENT, "at most 8 dimensions");
  dls_arg_t short_desc[3] = {dls_arg_buffer(c.b), dls_arg_buffer(c.b), dls_arg_bytes(&d, 8)};
  FAILS(dls_launch(copy, c.s, &cfg, short_desc, 3), DLS_ERR_INVALID_ARGUMENT, "a copy descriptor is");
  d = (dls_copy_desc_t){.ndim = 1, .elem_size = 4, .shape = {N + 1}, .dst_strides = {1}, .src_strides = {1}};
  dls_arg_t long_copy[3] = {dls_arg_buffer(c.b), dls_arg_ptr(c.base), dls_arg_bytes(&d, sizeof d)};
  FAILS(dls_launch(copy, c.s, &cfg, long_copy, 3), DLS_ERR_INVALID_ARGUMENT, "dls_launch(dst): needs bytes [0, 260)");
  d = (dls_copy_desc_t){.ndim = 1, .elem_size = 4, .shape = {2}, .dst_strides = {0}, .src_strides = {1}};
  FAILS(dls_copy_strided(c.s, dls_arg_buffer(c.b), dls_arg_ptr(c.base), &d), DLS_ERR_INVALID_ARGUMENT,
        "dst_strides[0]=0");
  close_ctx(&c);
}

/* copy(x[1:], x[:-1]) and copy(x[:-1], x[1:]): NumPy's answers, whichever way the kernel walks. */
BACKEND_TEST(builtin_args, overlapping_copies_give_numpys_answer) {
  ctx_t c = open_ctx(*backend_type);
  dls_copy_desc_t d = {.ndim = 1, .elem_size = 4, .shape = {N - 1}, .dst_strides = {1}, .src_strides = {1}};
  OK(dls_copy_strided(c.s, dls_arg_ptr(c.base + 4), dls_arg_buffer(c.b), &d));
  float host[N];
  read_all(&c, host);
  cr_assert_float_eq(host[0], 0.0f, 0);
  for (int i = 1; i < N; i++)
    cr_assert_float_eq(host[i], (float)(i - 1), 0, "x[1:] = x[:-1]: element %d is %g", i, host[i]);
  OK(dls_copy_strided(c.s, dls_arg_buffer(c.b), dls_arg_ptr(c.base + 4), &d));
  read_all(&c, host);
  for (int i = 0; i < N - 1; i++) /* x was 0, 0, 1, 2, ...: shifted back it is 0, 1, 2, ... */
    cr_assert_float_eq(host[i], (float)i, 0, "x[:-1] = x[1:]: element %d is %g", i, host[i]);
  /* reversed onto itself (strides -1 against 1): the whole view overlaps */
  float fresh[N];
  for (int i = 0; i < N; i++)
    fresh[i] = (float)i;
  OK(dls_buffer_write(c.b, 0, fresh, sizeof fresh, c.s));
  OK(dls_stream_synchronize(c.s));
  d = (dls_copy_desc_t){.ndim = 1, .elem_size = 4, .shape = {N}, .dst_strides = {1}, .src_strides = {-1}};
  OK(dls_copy_strided(c.s, dls_arg_buffer(c.b), dls_arg_ptr(c.base + (N - 1) * 4), &d));
  read_all(&c, host);
  for (int i = 0; i < N; i++)
    cr_assert_float_eq(host[i], (float)(N - 1 - i), 0, "x[:] = x[::-1]: element %d is %g", i, host[i]);
  close_ctx(&c);
}

BACKEND_TEST(builtin_args, overlapping_axpy_reads_x_before_y_changes) {
  ctx_t c = open_ctx(*backend_type);
  /* y = x[1:], x = x[:-1]: y[i] += x[i], with x[i+1] = y[i] written meanwhile in a naive kernel */
  OK(dls_axpy_f32(c.s, N - 1, 1.0f, dls_arg_buffer(c.b), dls_arg_ptr(c.base + 4)));
  float host[N];
  read_all(&c, host);
  for (int i = 1; i < N; i++)
    cr_assert_float_eq(host[i], (float)(i + (i - 1)), 0, "element %d is %g", i, host[i]);
  dls_launch_config_t cfg = dls_config_1d(1, 64);
  dls_arg_t args[4] = {dls_arg_u64(N - 1), dls_arg_f32(1.0f), dls_arg_buffer(c.b), dls_arg_ptr(c.base + 4)};
  FAILS(dls_launch(builtin(&c, "dls_axpy_f32"), c.s, &cfg, args, 4), DLS_ERR_INVALID_ARGUMENT,
        "partially overlaps");
  /* the very same view is no overlap: y = 2y */
  OK(dls_axpy_f32(c.s, N, 1.0f, dls_arg_buffer(c.b), dls_arg_buffer(c.b)));
  read_all(&c, host);
  cr_assert_float_eq(host[N - 1], 2.0f * (float)(N - 1 + N - 2), 0);
  close_ctx(&c);
}
