/* SPDX-License-Identifier: Apache-2.0 */
/* The built-ins' own calls check the element types of tensors (issue 31 item 3), and dls_copy_convert converts as
 * NumPy's astype under its same_kind casting, refusing an unsafe cast (item 4): the dls_convert kernel on every
 * backend (its CPU twin; the CUDA kernel where there is a GPU). */
#include <math.h>

#include "common.h"

TestSuite(builtin_convert, .fini = dlst_fini);

enum { N = 8 };

typedef struct ctx_t {
  DLDevice d;
  dls_stream_t s;
  dls_buffer_t a, b; /* 8 * N bytes each */
  char *pa, *pb;
} ctx_t;

static ctx_t open_ctx(DLDeviceType t) {
  ctx_t c;
  c.d = dlst_device(t);
  OK(dls_stream_create(c.d, NULL, &c.s));
  OK(dls_buffer_alloc(c.s, 8 * N, &c.a));
  OK(dls_buffer_alloc(c.s, 8 * N, &c.b));
  OK(dls_buffer_ptr(c.a, (void **)&c.pa));
  OK(dls_buffer_ptr(c.b, (void **)&c.pb));
  return c;
}

static void close_ctx(ctx_t *c) {
  OK(dls_buffer_free(c->a));
  OK(dls_buffer_free(c->b));
  OK(dls_stream_destroy(c->s));
}

static dls_tensor_t view(ctx_t *c, void *p, DLDataType dt, int64_t n) { return dlst_view(c->d, c->s, p, dt, n); }

static const DLDataType F32 = {kDLFloat, 32, 1}, F64 = {kDLFloat, 64, 1}, I32 = {kDLInt, 32, 1},
                        U8 = {kDLUInt, 8, 1}, F16 = {kDLFloat, 16, 1}, BF16 = {kDLBfloat, 16, 1},
                        C64 = {kDLComplex, 64, 1};

static dls_convert_desc_t desc_of(DLDataType dst, DLDataType src, int64_t n) {
  return (dls_convert_desc_t){.ndim = 1, .dst_dtype = dst, .src_dtype = src, .shape = {n}, .dst_strides = {1},
                              .src_strides = {1}};
}

BACKEND_TEST(builtin_convert, own_calls_check_the_element_types_of_tensors) {
  ctx_t c = open_ctx(*backend_type);
  dls_tensor_t i32 = view(&c, c.pa, I32, N), f32 = view(&c, c.pb, F32, N), f64 = view(&c, c.pa, F64, N);
  FAILS(dls_axpy_f32(c.s, N, 2.0f, dls_arg_tensor_in(i32), dls_arg_tensor(f32)), DLS_ERR_INVALID_ARGUMENT,
        "dls_axpy_f32(args[2] x): its elements are int32, but dls_axpy_f32 takes float32 here");
  FAILS(dls_axpy_f64(c.s, N, 2.0, dls_arg_tensor_in(f64), dls_arg_tensor(f32)), DLS_ERR_INVALID_ARGUMENT,
        "dls_axpy_f64(args[3] y): its elements are float32, but dls_axpy_f64 takes float64 here");
  float one = 1.0f;
  FAILS(dls_fill(c.s, dls_arg_tensor(f64), N, 4, &one), DLS_ERR_INVALID_ARGUMENT,
        "dls_fill(args[0] dst): its elements are float64 (8 bytes), but elem_size=4");
  dls_copy_desc_t d = {.ndim = 1, .elem_size = 4, .shape = {N}, .dst_strides = {1}, .src_strides = {1}};
  FAILS(dls_copy_strided(c.s, dls_arg_tensor(i32), dls_arg_tensor_in(f32), &d), DLS_ERR_INVALID_ARGUMENT,
        "their elements are int32 and float32, but dls_copy_strided copies bits");
  OK(dls_fill(c.s, dls_arg_tensor(f32), N, 4, &one)); /* the right ones pass */
  OK(dls_axpy_f32(c.s, N, 2.0f, dls_arg_tensor_in(f32), dls_arg_tensor(f32)));
  float host[N];
  OK(dls_buffer_read(c.b, 0, host, sizeof host, c.s));
  OK(dls_stream_synchronize(c.s));
  cr_assert_float_eq(host[N - 1], 3.0f, 0);
  OK(dls_tensor_release(i32));
  OK(dls_tensor_release(f32));
  OK(dls_tensor_release(f64));
  close_ctx(&c);
}

BACKEND_TEST(builtin_convert, copy_convert_converts_as_numpys_astype) {
  ctx_t c = open_ctx(*backend_type);
  int32_t ints[N] = {1, -2, 3, -4, 16777217, 2147483647, -2147483647 - 1, 0};
  OK(dls_buffer_write(c.a, 0, ints, sizeof ints, c.s));
  dls_convert_desc_t d = desc_of(F32, I32, N);
  OK(dls_copy_convert(c.s, dls_arg_buffer(c.b), dls_arg_buffer(c.a), &d));
  float f[N];
  OK(dls_buffer_read(c.b, 0, f, sizeof f, c.s));
  OK(dls_stream_synchronize(c.s));
  for (int i = 0; i < N; i++)
    cr_assert_eq(f[i], (float)ints[i], "int32 %d -> float32 %g", ints[i], f[i]);
  /* float32 -> float16 (rounded once, to nearest even; past 65504 an infinity) and back to float64 */
  float in[N] = {1.5f, -2.0f, 65504.0f, 65520.0f, 1e-8f, 5.9604645e-08f, 0.1f, -0.0f};
  double want[N] = {1.5, -2.0, 65504.0, INFINITY, 0.0, 5.9604644775390625e-08, 0.0999755859375, -0.0};
  OK(dls_buffer_write(c.a, 0, in, sizeof in, c.s));
  d = desc_of(F16, F32, N);
  OK(dls_copy_convert(c.s, dls_arg_buffer(c.b), dls_arg_buffer(c.a), &d));
  d = desc_of(F64, F16, N);
  OK(dls_copy_convert(c.s, dls_arg_buffer(c.a), dls_arg_buffer(c.b), &d));
  double out[N];
  OK(dls_buffer_read(c.a, 0, out, sizeof out, c.s));
  OK(dls_stream_synchronize(c.s));
  for (int i = 0; i < N; i++)
    cr_assert(out[i] == want[i] && signbit(out[i]) == signbit(want[i]), "float32 %g -> float16 -> %g, not %g",
              (double)in[i], out[i], want[i]);
  /* uint8 -> bfloat16 -> float32: exact */
  uint8_t bytes[N] = {0, 1, 2, 127, 128, 200, 254, 255};
  OK(dls_buffer_write(c.a, 0, bytes, sizeof bytes, c.s));
  d = desc_of(BF16, U8, N);
  OK(dls_copy_convert(c.s, dls_arg_buffer(c.b), dls_arg_buffer(c.a), &d));
  d = desc_of(F32, BF16, N);
  OK(dls_copy_convert(c.s, dls_arg_buffer(c.a), dls_arg_buffer(c.b), &d));
  OK(dls_buffer_read(c.a, 0, f, sizeof f, c.s));
  OK(dls_stream_synchronize(c.s));
  for (int i = 0; i < N; i++)
    cr_assert_eq(f[i], (float)bytes[i], "uint8 %u -> bfloat16 -> float32 %g", bytes[i], f[i]);
  close_ctx(&c);
}

BACKEND_TEST(builtin_convert, an_unsafe_cast_is_refused_naming_both_types_and_the_rule) {
  ctx_t c = open_ctx(*backend_type);
  unsigned char was[8 * N], now[8 * N];
  memset(was, 0x5a, sizeof was);
  OK(dls_buffer_write(c.b, 0, was, sizeof was, c.s));
  dls_convert_desc_t d = desc_of(I32, F32, N);
  FAILS(dls_copy_convert(c.s, dls_arg_buffer(c.b), dls_arg_buffer(c.a), &d), DLS_ERR_INVALID_ARGUMENT,
        "dls_copy_convert(dst int32, src float32): an unsafe cast: NumPy's same_kind casting converts float32 only "
        "to a type of its kind or a later one (bool, unsigned, signed, float), never a float into int32");
  d = desc_of(U8, I32, N);
  FAILS(dls_copy_convert(c.s, dls_arg_buffer(c.b), dls_arg_buffer(c.a), &d), DLS_ERR_INVALID_ARGUMENT,
        "never a signed integer into uint8");
  d = desc_of(F32, C64, N);
  FAILS(dls_copy_convert(c.s, dls_arg_buffer(c.b), dls_arg_buffer(c.a), &d), DLS_ERR_NOT_SUPPORTED, "not complex64");
  d = desc_of(F32, I32, N);
  dls_tensor_t f64 = view(&c, c.pb, F64, N);
  FAILS(dls_copy_convert(c.s, dls_arg_tensor(f64), dls_arg_buffer(c.a), &d), DLS_ERR_INVALID_ARGUMENT,
        "dls_copy_convert(args[0] dst): its elements are float64, but desc.dst_dtype is float32");
  OK(dls_tensor_release(f64));
  FAILS(dls_copy_convert(c.s, dls_arg_ptr(c.pb + 2), dls_arg_buffer(c.a), &d), DLS_ERR_INVALID_ARGUMENT,
        "not aligned to its elements of 4 bytes");
  d.shape[0] = 2 * N + 1; /* past both buffers' 8 * N bytes */
  FAILS(dls_copy_convert(c.s, dls_arg_buffer(c.b), dls_arg_buffer(c.a), &d), DLS_ERR_INVALID_ARGUMENT,
        "dls_copy_convert(dst): needs bytes [0, 68)");
  FAILS(dls_copy_convert(c.s, dls_arg_buffer(c.b), dls_arg_buffer(c.a), NULL), DLS_ERR_INVALID_ARGUMENT,
        "dls_copy_convert(desc=NULL)");
  OK(dls_buffer_read(c.b, 0, now, sizeof now, c.s));
  OK(dls_stream_synchronize(c.s));
  cr_assert(memcmp(was, now, sizeof now) == 0, "a refused conversion wrote");
  close_ctx(&c);
}
