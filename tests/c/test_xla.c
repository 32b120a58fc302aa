/* SPDX-License-Identifier: Apache-2.0 */
/* The XLA FFI handlers (dlstream/xla.h) driven by hand-made call frames and a stand-in of XLA's API: the metadata
 * call, the stages, launches on the CPU (and on CUDA where there is a device), and every refusal's message. */
#include "common.h"
#include "xla/xla_ffi.h"

TestSuite(xla, .fini = dlst_fini);

/* The stand-in's errors: XLA's type is opaque to the handler, so the test defines it. */
struct XLA_FFI_Error {
  int code;
  char message[1024];
};

static struct XLA_FFI_Error *fake_error_create(dls__xla_error_create_args *a) {
  cr_assert_eq(a->struct_size, DLS__XLA_ERROR_CREATE_ARGS_SIZE);
  struct XLA_FFI_Error *e = calloc(1, sizeof *e);
  e->code = a->errc;
  snprintf(e->message, sizeof e->message, "%s", a->message);
  return e;
}

static void *g_stream;        /* what the stand-in's XLA_FFI_Stream_Get hands out */
static int g_stream_get_fails; /* ... or its failure */

static struct XLA_FFI_Error *fake_stream_get(dls__xla_stream_get_args *a) {
  cr_assert_eq(a->struct_size, DLS__XLA_STREAM_GET_ARGS_SIZE);
  if (g_stream_get_fails) {
    dls__xla_error_create_args e = {DLS__XLA_ERROR_CREATE_ARGS_SIZE, NULL, "XLA FFI GPU stream is not available",
                                    DLS__XLA_ERROR_UNIMPLEMENTED};
    return fake_error_create(&e);
  }
  a->stream = g_stream;
  return NULL;
}

static const dls__xla_api g_api = {
    .struct_size = sizeof(dls__xla_api),
    .api_version = {DLS__XLA_API_VERSION_SIZE, NULL, DLS__XLA_API_MAJOR, DLS__XLA_API_MINOR},
    .error_create = fake_error_create,
    .stream_get = fake_stream_get,
};

/* A call frame with up to 6 attributes and 4 operands and results, all held here. */
typedef struct frame {
  dls__xla_call_frame f;
  dls__xla_span names[6], *name_ptrs[6];
  int attr_types[6];
  void *attrs[6];
  dls__xla_array arrays[6];
  dls__xla_buffer bufs[8];
  int64_t dims[8];
  void *arg_ptrs[4], *ret_ptrs[4];
  int arg_types[4], ret_types[4];
  int64_t cfg[DLS_XLA_CFG_LEN];
  int64_t args[8];
  uint8_t vals[64];
} frame;

static void add_array(frame *fr, const char *name, int dtype, void *data, size_t n) {
  cr_assert_lt(fr->f.attrs.size, 6, "the test frame holds 6 attributes");
  int64_t i = fr->f.attrs.size++;
  fr->names[i] = (dls__xla_span){name, strlen(name)};
  fr->name_ptrs[i] = &fr->names[i];
  fr->arrays[i] = (dls__xla_array){dtype, n, data};
  fr->attr_types[i] = DLS__XLA_ATTR_ARRAY;
  fr->attrs[i] = &fr->arrays[i];
}

/* An operand or result of `n` elements of XLA type `dtype` (a vector). */
static void add_buffer_of(frame *fr, int result, void *data, int dtype, int64_t n) {
  int64_t k = fr->f.args.size + fr->f.rets.size;
  dls__xla_buffer *b = &fr->bufs[k];
  fr->dims[k] = n;
  *b = (dls__xla_buffer){sizeof *b, NULL, dtype, data, 1, &fr->dims[k]};
  if (result) {
    fr->ret_ptrs[fr->f.rets.size] = b;
    fr->ret_types[fr->f.rets.size++] = DLS__XLA_RET_BUFFER;
  } else {
    fr->arg_ptrs[fr->f.args.size] = b;
    fr->arg_types[fr->f.args.size++] = DLS__XLA_ARG_BUFFER;
  }
}

/* One float32. */
static void add_buffer(frame *fr, int result, void *data) { add_buffer_of(fr, result, data, DLS__XLA_DTYPE_F32, 1); }

/* A frame for `op` on `handle` of `device`, 1 block of 1 thread, no attributes added yet but dls_cfg. */
static void frame_init(frame *fr, int stage, int op, uint64_t handle, DLDevice device) {
  memset(fr, 0, sizeof *fr);
  fr->f.struct_size = DLS__XLA_CALL_FRAME_SIZE;
  fr->f.api = &g_api;
  fr->f.stage = stage;
  fr->f.attrs = (dls__xla_attrs){sizeof(dls__xla_attrs), NULL, 0, fr->attr_types, fr->name_ptrs, fr->attrs};
  fr->f.args = (dls__xla_args){sizeof(dls__xla_args), NULL, 0, fr->arg_types, fr->arg_ptrs};
  fr->f.rets = (dls__xla_rets){sizeof(dls__xla_rets), NULL, 0, fr->ret_types, fr->ret_ptrs};
  int64_t c[DLS_XLA_CFG_LEN] = {op, (int64_t)handle, 1, 1, 1, 1, 1, 1, 0, device.device_type, device.device_id};
  memcpy(fr->cfg, c, sizeof c);
  add_array(fr, "dls_cfg", DLS__XLA_DTYPE_S64, fr->cfg, DLS_XLA_CFG_LEN);
}

/* An axpy_f32 call: y (result 0, aliased) = a * x (operand 0) + y, n and a from dls_vals. */
static void axpy_frame(frame *fr, int stage, dls_function_t f, DLDevice d, uint64_t n, float a, void *x, void *y) {
  frame_init(fr, stage, DLS_XLA_OP_LAUNCH, f.id, d);
  memcpy(fr->vals, &n, 8);
  memcpy(fr->vals + 8, &a, 4);
  fr->args[0] = DLS_XLA_ARG(DLS_XLA_FROM_VALUE, 0, 8);
  fr->args[1] = DLS_XLA_ARG(DLS_XLA_FROM_VALUE, 8, 4);
  fr->args[2] = DLS_XLA_ARG(DLS_XLA_FROM_OPERAND, 0, 0);
  fr->args[3] = DLS_XLA_ARG(DLS_XLA_FROM_RESULT, 0, 0);
  add_array(fr, "dls_args", DLS__XLA_DTYPE_S64, fr->args, 4);
  add_array(fr, "dls_vals", DLS__XLA_DTYPE_U8, fr->vals, 12);
  add_buffer_of(fr, 0, x, DLS__XLA_DTYPE_F32, (int64_t)n);
  add_buffer_of(fr, 0, y, DLS__XLA_DTYPE_F32, (int64_t)n); /* the aliased operand: XLA passes it too */
  add_buffer_of(fr, 1, y, DLS__XLA_DTYPE_F32, (int64_t)n);
}

static struct XLA_FFI_Error *call_cpu(frame *fr) { return dls_xla_call_cpu((struct XLA_FFI_CallFrame *)&fr->f); }
static struct XLA_FFI_Error *call_cuda(frame *fr) { return dls_xla_call_cuda((struct XLA_FFI_CallFrame *)&fr->f); }

/* Asserts the call failed with XLA code `code` and a message containing `part`; frees the error. */
#define XLA_FAILS(expr, code_, part)                                                                      \
  do {                                                                                                   \
    struct XLA_FFI_Error *e_ = (expr);                                                                   \
    cr_assert_not_null(e_, "%s succeeded", #expr);                                                       \
    cr_assert_eq(e_->code, (code_), "%s: code %d (wanted %d): %s", #expr, e_->code, (code_), e_->message); \
    cr_assert(strstr(e_->message, (part)) != NULL, "%s: \"%s\" lacks \"%s\"", #expr, e_->message, (part)); \
    free(e_);                                                                                            \
  } while (0)

#define XLA_OK(expr)                                                              \
  do {                                                                            \
    struct XLA_FFI_Error *e_ = (expr);                                            \
    cr_assert_null(e_, "%s: %s", #expr, e_ ? e_->message : "");                   \
  } while (0)

static void metadata_of(struct XLA_FFI_Error *(*handler)(struct XLA_FFI_CallFrame *), uint32_t traits) {
  dls__xla_metadata m;
  memset(&m, 0xab, sizeof m);
  m.struct_size = DLS__XLA_METADATA_SIZE;
  dls__xla_metadata_extension ext = {{DLS__XLA_METADATA_EXTENSION_SIZE, DLS__XLA_EXTENSION_METADATA, NULL}, &m};
  dls__xla_call_frame f;
  memset(&f, 0, sizeof f); /* as XLA's metadata frame: no api, no attributes */
  f.struct_size = DLS__XLA_CALL_FRAME_SIZE;
  f.extension_start = &ext.extension_base;
  f.stage = DLS__XLA_STAGE_EXECUTE;
  cr_assert_null(handler((struct XLA_FFI_CallFrame *)&f));
  cr_assert_eq(m.api_version.struct_size, DLS__XLA_API_VERSION_SIZE);
  cr_assert_eq(m.api_version.major_version, 0);
  cr_assert_eq(m.api_version.minor_version, DLS__XLA_API_MINOR);
  cr_assert_eq(m.traits, traits);
}

Test(xla, the_metadata_call_gives_the_api_version_and_the_command_buffer_trait_on_cuda) {
  metadata_of(dls_xla_call_cuda, DLS__XLA_TRAIT_COMMAND_BUFFER_COMPATIBLE);
  metadata_of(dls_xla_call_cuda_nocapture, 0);
  metadata_of(dls_xla_call_cpu, 0);
}

Test(xla, prepare_and_initialize_do_nothing) {
  frame fr;
  frame_init(&fr, DLS__XLA_STAGE_PREPARE, 99, 0, dls_cpu()); /* nothing is read */
  XLA_OK(call_cpu(&fr));
  fr.f.stage = DLS__XLA_STAGE_INITIALIZE;
  XLA_OK(call_cuda(&fr));
}

static int add_one(const dls_launch_config_t *cfg, void *const *args, int n) {
  float *x = *(float *const *)args[0];
  x[0] += 1.0f;
  return 0;
}

static int fails(const dls_launch_config_t *cfg, void *const *args, int n) { return 7; }

Test(xla, instantiate_checks_that_the_function_is_alive) {
  dls_function_t f;
  OK(dls_function_from_host(dls_cpu(), "add_one", add_one, &f));
  frame fr;
  frame_init(&fr, DLS__XLA_STAGE_INSTANTIATE, DLS_XLA_OP_LAUNCH, f.id, dls_cpu());
  fr.args[0] = DLS_XLA_ARG(DLS_XLA_FROM_OPERAND, 0, 0);
  add_array(&fr, "dls_args", DLS__XLA_DTYPE_S64, fr.args, 1);
  XLA_OK(call_cpu(&fr));
  OK(dls_function_destroy(f));
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_NOT_FOUND, "dlstream XLA call (cpu): dls_function_name(function)");
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_NOT_FOUND, "stale");
  fr.f.stage = DLS__XLA_STAGE_EXECUTE; /* a function gone between compile and run: the launch says so */
  float x = 1.0f;
  add_buffer(&fr, 0, &x);
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_NOT_FOUND, "dls_launch(function)");
  cr_assert_eq(x, 1.0f);
}

Test(xla, a_cpu_call_runs_the_builtin_on_the_buffers_before_it_returns) {
  dls_function_t f;
  OK(dls_builtin_function(dls_cpu(), "dls_axpy_f32", &f));
  float x[100], y[100];
  for (int i = 0; i < 100; i++)
    x[i] = (float)i, y[i] = 1.0f;
  frame fr;
  axpy_frame(&fr, DLS__XLA_STAGE_INSTANTIATE, f, dls_cpu(), 100, 2.0f, x, y);
  XLA_OK(call_cpu(&fr));
  fr.f.stage = DLS__XLA_STAGE_EXECUTE;
  dls_xla_stats_t before = dls_xla_stats();
  XLA_OK(call_cpu(&fr));
  cr_assert_eq(dls_xla_stats().executions, before.executions + 1);
  for (int i = 0; i < 100; i++) {
    cr_assert_eq(y[i], 2.0f * (float)i + 1.0f, "y[%d] = %g", i, y[i]);
    cr_assert_eq(x[i], (float)i);
  }
  XLA_OK(call_cpu(&fr)); /* again: same frame, same result one step on */
  cr_assert_eq(y[3], 13.0f);
}

Test(xla, a_failing_cpu_kernel_comes_back_as_an_xla_error) {
  dls_function_t f;
  OK(dls_function_from_host(dls_cpu(), "fails", fails, &f));
  frame fr;
  frame_init(&fr, DLS__XLA_STAGE_EXECUTE, DLS_XLA_OP_LAUNCH, f.id, dls_cpu());
  add_array(&fr, "dls_args", DLS__XLA_DTYPE_S64, fr.args, 0);
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INTERNAL, "kernel \"fails\" returned 7");
  OK(dls_function_destroy(f));
}

Test(xla, a_latch_wait_holds_the_cpu_call_until_the_latch_is_open) {
  dls_latch_t l;
  OK(dls_latch_create(dls_cpu(), &l));
  frame fr;
  frame_init(&fr, DLS__XLA_STAGE_INSTANTIATE, DLS_XLA_OP_LATCH_WAIT, l.id, dls_cpu());
  fr.cfg[DLS_XLA_CFG_TIMEOUT_NS] = (int64_t)DLST_LATCH_TIMEOUT_NS;
  XLA_OK(call_cpu(&fr));
  OK(dls_latch_open(l)); /* opened first: the wait passes (the call blocks its thread until then) */
  fr.f.stage = DLS__XLA_STAGE_EXECUTE;
  XLA_OK(call_cpu(&fr));
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
  fr.f.stage = DLS__XLA_STAGE_INSTANTIATE;
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_NOT_FOUND, "dls_latch_status(latch)");
}

/* A built-in's memory is what XLA's buffers hold: their sizes bound its descriptors and counts, their element types
 * must be the built-in's, and partially overlapping buffers are refused; nothing is written (issue 31 items 2, 3). */
Test(xla, a_builtins_memory_is_bounded_by_xlas_buffers) {
  dls_function_t copy, axpy;
  OK(dls_builtin_function(dls_cpu(), "dls_copy_strided", &copy));
  OK(dls_builtin_function(dls_cpu(), "dls_axpy_f32", &axpy));
  /* The operand static and the result on the heap: the descriptor's 256 KiB from the result reach no operand (as
   * in XLA's own buffers), so only the bound by the result's size can refuse it. */
  static float in[4] = {1, 2, 3, 4};
  float *out = malloc(4 * sizeof *out);
  for (int i = 0; i < 4; i++)
    out[i] = 9;
  dls_copy_desc_t d = {.ndim = 1, .elem_size = 4, .shape = {65536}, .dst_strides = {1}, .src_strides = {0}};
  frame fr;
  frame_init(&fr, DLS__XLA_STAGE_EXECUTE, DLS_XLA_OP_LAUNCH, copy.id, dls_cpu());
  static uint8_t vals[sizeof(dls_copy_desc_t)];
  memcpy(vals, &d, sizeof d);
  fr.args[0] = DLS_XLA_ARG(DLS_XLA_FROM_RESULT, 0, 0);
  fr.args[1] = DLS_XLA_ARG(DLS_XLA_FROM_OPERAND, 0, 0);
  fr.args[2] = DLS_XLA_ARG(DLS_XLA_FROM_VALUE, 0, sizeof d);
  add_array(&fr, "dls_args", DLS__XLA_DTYPE_S64, fr.args, 3);
  add_array(&fr, "dls_vals", DLS__XLA_DTYPE_U8, vals, sizeof vals);
  add_buffer_of(&fr, 0, in, DLS__XLA_DTYPE_F32, 4);
  add_buffer_of(&fr, 1, out, DLS__XLA_DTYPE_F32, 4);
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "dls_launch(dst): needs bytes [0, 262144) from its "
                                                            "start, but only 0..16 lie in its memory");
  d.shape[0] = 4; /* inside: the copy runs */
  memcpy(vals, &d, sizeof d);
  XLA_OK(call_cpu(&fr));
  cr_assert_eq(out[3], 1.0f, "a broadcast of in[0]");
  for (int i = 0; i < 4; i++)
    out[i] = 9;
  fr.bufs[1].dtype = DLS__XLA_DTYPE_S32; /* the result int32, the operand float32: a copy of bits between types */
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "their elements are int32 and float32");
  fr.bufs[1].dtype = 20; /* an XLA type dlstream does not know (F8E4M3FN) */
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "of a type dlstream does not know");
  cr_assert(out[0] == 9 && out[3] == 9, "a refused call wrote its result");
  free(out);

  float xy[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  axpy_frame(&fr, DLS__XLA_STAGE_EXECUTE, axpy, dls_cpu(), 8, 2.0f, xy, xy + 1);
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "partially overlaps");
  double x64[8] = {0}, y64[8] = {0};
  axpy_frame(&fr, DLS__XLA_STAGE_EXECUTE, axpy, dls_cpu(), 8, 2.0f, x64, y64);
  for (int i = 0; i < 3; i++)
    fr.bufs[i].dtype = DLS__XLA_DTYPE_F64;
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "dls_launch(args[2] x): its elements are float64, but "
                                                            "dls_axpy_f32 takes float32 here");
  axpy_frame(&fr, DLS__XLA_STAGE_EXECUTE, axpy, dls_cpu(), 9, 2.0f, xy, xy); /* n past the 9-element buffers' 8 */
  fr.dims[0] = fr.dims[1] = fr.dims[2] = 8;
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "needs bytes [0, 36)");
  for (int i = 0; i < 9; i++)
    cr_assert_eq(xy[i], 1.0f, "a refused call wrote xy[%d]", i);
  cr_assert(x64[0] == 0 && y64[0] == 0);
}

/* Each malformed call is refused with a message naming the attribute, and nothing runs. */
Test(xla, malformed_attributes_are_refused_with_what_is_wrong) {
  dls_function_t f;
  OK(dls_function_from_host(dls_cpu(), "add_one", add_one, &f));
  float x = 1.0f;
  frame fr;
  int stages[] = {DLS__XLA_STAGE_INSTANTIATE, DLS__XLA_STAGE_EXECUTE};
  int stage = 0;
#define SETUP()                                                 \
  frame_init(&fr, stage, DLS_XLA_OP_LAUNCH, f.id, dls_cpu());    \
  fr.args[0] = DLS_XLA_ARG(DLS_XLA_FROM_OPERAND, 0, 0);          \
  add_buffer(&fr, 0, &x)
#define ARGS() add_array(&fr, "dls_args", DLS__XLA_DTYPE_S64, fr.args, 1)
  for (int s = 0; s < 2; s++) {
    stage = stages[s];
    SETUP();
    XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "no dls_args attribute");
    SETUP();
    fr.f.attrs.size = 0;
    XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "no dls_cfg attribute: this custom call was not made");
    SETUP();
    ARGS();
    add_array(&fr, "other", DLS__XLA_DTYPE_S64, fr.args, 1);
    XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "unknown attribute \"other\"");
    SETUP();
    ARGS();
    fr.arrays[0].size = 3;
    XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "dls_cfg: expected an int64 array of 11 entries");
    SETUP();
    ARGS();
    fr.arrays[1].dtype = DLS__XLA_DTYPE_S32;
    XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "dls_args: expected an int64 array");
    SETUP();
    ARGS();
    fr.cfg[DLS_XLA_CFG_OP] = 5;
    XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "dls_cfg[0]=5: unknown operation");
    SETUP();
    ARGS();
    fr.cfg[DLS_XLA_CFG_BLOCK + 1] = 0;
    XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "dls_cfg: block[1]=0 is not in [1, 2^32)");
    SETUP();
    ARGS();
    fr.cfg[DLS_XLA_CFG_DEVICE_TYPE] = -3;
    XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "device type -3, id 0 is not a device");
    SETUP();
    fr.args[0] = DLS_XLA_ARG(9, 0, 0);
    ARGS();
    XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "dls_args[0]: source 9 is not 1 (operand)");
    SETUP();
    fr.args[0] = DLS_XLA_ARG(DLS_XLA_FROM_VALUE, 4, 8);
    ARGS();
    add_array(&fr, "dls_vals", DLS__XLA_DTYPE_U8, fr.vals, 8);
    XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "dls_args[0]: 8 value bytes at 4 do not fit dls_vals");
    SETUP();
    fr.cfg[DLS_XLA_CFG_DEVICE_TYPE] = kDLCUDA;
    ARGS();
    XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT,
              "the function is on cuda:0, but XLA runs this call on its cpu platform");
  }
  /* Buffers are known at execution only. */
  SETUP();
  fr.args[0] = DLS_XLA_ARG(DLS_XLA_FROM_RESULT, 2, 0);
  ARGS();
  fr.f.stage = DLS__XLA_STAGE_INSTANTIATE;
  XLA_OK(call_cpu(&fr));
  fr.f.stage = DLS__XLA_STAGE_EXECUTE;
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT,
            "dls_args[0]: result 2 is not a buffer of this call (it has 1 operands and 0 results)");
  cr_assert_eq(x, 1.0f, "nothing ran");
  fr.args[0] = DLS_XLA_ARG(DLS_XLA_FROM_OPERAND, 0, 0);
  XLA_OK(call_cpu(&fr));
  cr_assert_eq(x, 2.0f, "the well-formed call ran");
#undef SETUP
#undef ARGS
  OK(dls_function_destroy(f));
}

/* The CUDA handler: XLA's stream is wrapped (once) and the launch queued there; without a device the wrap's
 * message comes back. */
Test(xla, a_cuda_call_launches_on_xlas_stream) {
  g_stream_get_fails = 0;
  dls_function_t cpu_fn;
  OK(dls_builtin_function(dls_cpu(), "dls_axpy_f32", &cpu_fn));
  frame fr;
  float hx = 1.0f, hy = 1.0f;
  axpy_frame(&fr, DLS__XLA_STAGE_EXECUTE, cpu_fn, dls_cuda(0), 1, 2.0f, &hx, &hy);
  if (dls_backend_probe(kDLCUDA) != DLS_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", dls_last_error());
    g_stream = (void *)0x1234;
    XLA_FAILS(call_cuda(&fr), DLS__XLA_ERROR_UNAVAILABLE, "dlstream XLA call (cuda): dls_stream_wrap");
    g_stream_get_fails = 1;
    XLA_FAILS(call_cuda(&fr), DLS__XLA_ERROR_UNIMPLEMENTED, "XLA FFI GPU stream is not available");
    g_stream_get_fails = 0;
    cr_skip_test("the launch itself needs a CUDA device: %s", why);
  }
  DLDevice d = dls_cuda(0);
  dls_function_t f;
  dls_stream_t s;
  dls_buffer_t x, y;
  OK(dls_builtin_function(d, "dls_axpy_f32", &f));
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_native(s, &g_stream));
  OK(dls_buffer_alloc(s, 256 * sizeof(float), &x));
  OK(dls_buffer_alloc(s, 256 * sizeof(float), &y));
  float one = 1.0f, three = 3.0f;
  OK(dls_fill(s, dls_arg_buffer(x), 256, 4, &three));
  OK(dls_fill(s, dls_arg_buffer(y), 256, 4, &one));
  void *px, *py;
  OK(dls_buffer_ptr(x, &px));
  OK(dls_buffer_ptr(y, &py));
  axpy_frame(&fr, DLS__XLA_STAGE_EXECUTE, f, d, 256, 2.0f, px, py);
  fr.cfg[DLS_XLA_CFG_GRID] = 1;
  fr.cfg[DLS_XLA_CFG_BLOCK] = 256;
  size_t streams = dls_live_handles(DLS_HANDLE_STREAM);
  dls_xla_stats_t before = dls_xla_stats();
  XLA_OK(call_cuda(&fr));
  cr_assert_eq(dls_live_handles(DLS_HANDLE_STREAM), streams + 1, "XLA's stream is wrapped once");
  XLA_OK(call_cuda(&fr));
  cr_assert_eq(dls_live_handles(DLS_HANDLE_STREAM), streams + 1, "... and the wrapper kept");
  dls_xla_stats_t after = dls_xla_stats();
  cr_assert_eq(after.executions - before.executions, 2);
  cr_assert_eq(after.stream_wraps - before.stream_wraps, 1);
  float out[256];
  OK(dls_buffer_read(y, 0, out, sizeof out, s));
  OK(dls_stream_synchronize(s));
  for (int i = 0; i < 256; i++)
    cr_assert_eq(out[i], 13.0f, "y[%d] = %g: two axpy calls in stream order after the fills", i, out[i]);
  fr.cfg[DLS_XLA_CFG_DEVICE_ID] = 99;
  XLA_FAILS(call_cuda(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "cuda:99");
  OK(dls_xla_release());
  cr_assert_eq(dls_live_handles(DLS_HANDLE_STREAM), streams);
  OK(dls_buffer_free(x));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(s));
}

/* ---- the device XLA runs a call on (interop/xla/devices.c) ---- */

static int32_t g_ordinal;    /* what the stand-in's XLA_FFI_DeviceOrdinal_Get says */
static int g_ordinal_fails;  /* ... or its failure (the handler must destroy the error) */
static int g_errors_destroyed;

static struct XLA_FFI_Error *fake_device_ordinal_get(dls__xla_device_ordinal_get_args *a) {
  cr_assert_eq(a->struct_size, DLS__XLA_DEVICE_ORDINAL_GET_ARGS_SIZE);
  if (g_ordinal_fails) {
    dls__xla_error_create_args e = {DLS__XLA_ERROR_CREATE_ARGS_SIZE, NULL, "no device here",
                                    DLS__XLA_ERROR_UNIMPLEMENTED};
    return fake_error_create(&e);
  }
  a->device_ordinal = g_ordinal;
  return NULL;
}

static void fake_error_destroy(dls__xla_error_destroy_args *a) {
  cr_assert_eq(a->struct_size, DLS__XLA_ERROR_DESTROY_ARGS_SIZE);
  g_errors_destroyed++;
  free(a->error);
}

static const dls__xla_api g_api_devices = {
    .struct_size = sizeof(dls__xla_api),
    .api_version = {DLS__XLA_API_VERSION_SIZE, NULL, DLS__XLA_API_MAJOR, DLS__XLA_API_MINOR},
    .error_create = fake_error_create,
    .error_destroy = (void *)fake_error_destroy,
    .stream_get = fake_stream_get,
    .device_ordinal_get = fake_device_ordinal_get,
};

Test(xla, each_device_takes_its_own_function_from_dls_fns) {
  dls_function_t f;
  OK(dls_builtin_function(dls_cpu(), "dls_axpy_f32", &f));
  float x[4] = {1, 2, 3, 4}, y[4] = {1, 1, 1, 1};
  int64_t none_then_f[2] = {0, (int64_t)f.id}, only_f[1] = {(int64_t)f.id};
  frame fr;
  axpy_frame(&fr, DLS__XLA_STAGE_EXECUTE, (dls_function_t){12345}, dls_cpu(), 4, 2.0f, x, y);
  fr.f.api = &g_api_devices;
  add_array(&fr, "dls_fns", DLS__XLA_DTYPE_S64, only_f, 1);
  g_ordinal = 0;
  XLA_OK(call_cpu(&fr)); /* dls_cfg's handle (stale) is not the one that runs: device 0's is */
  cr_assert_eq(y[3], 9.0f);
  fr.arrays[3] = (dls__xla_array){DLS__XLA_DTYPE_S64, 2, none_then_f};
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT,
            "XLA runs this call on cpu:0, for which the kernel has no function");
  g_ordinal = 5;
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "XLA runs this call on cpu:5");
  /* XLA cannot say: the device dls_cfg names (0), whose function is missing here */
  g_ordinal_fails = 1;
  int destroyed = g_errors_destroyed;
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "on cpu:0, for which");
  cr_assert_eq(g_errors_destroyed, destroyed + 1, "XLA's error was not destroyed");
  g_ordinal_fails = 0;
  fr.arrays[3] = (dls__xla_array){DLS__XLA_DTYPE_S64, 0, none_then_f};
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "dls_fns: expected an int64 array of 1 to 65535");
  cr_assert_eq(y[3], 9.0f, "a refused call ran");
}

Test(xla, a_function_bound_to_one_device_is_refused_on_another) {
  dls_function_t f;
  OK(dls_builtin_function(dls_cpu(), "dls_axpy_f32", &f));
  float x[4] = {1, 2, 3, 4}, y[4] = {1, 1, 1, 1};
  frame fr;
  axpy_frame(&fr, DLS__XLA_STAGE_INSTANTIATE, f, dls_cpu(), 4, 2.0f, x, y);
  fr.f.api = &g_api_devices;
  g_ordinal = 1;
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT,
            "the function is bound to cpu:0, but XLA runs this call on cpu:1 (shard_map, pmap and a sharded jit run "
            "it on every device of the mesh): give dlstream.jax.kernel a kernel for each device");
  g_ordinal = 0;
  XLA_OK(call_cpu(&fr));
  fr.f.stage = DLS__XLA_STAGE_EXECUTE;
  XLA_OK(call_cpu(&fr));
  cr_assert_eq(y[0], 3.0f);
}

/* A call whose dls_cfg (and dls_fns) name a GPU's function, run by XLA on its CPU platform: dls_cpu_fn's function
 * runs there; without it the call is refused as before, and a GPU platform's call never takes it. */
Test(xla, a_cpu_platform_call_takes_dls_cpu_fn) {
  dls_function_t f;
  OK(dls_builtin_function(dls_cpu(), "dls_axpy_f32", &f));
  float x[4] = {1, 2, 3, 4}, y[4] = {1, 1, 1, 1};
  int64_t gpus[1] = {12345}, cpu[1] = {(int64_t)f.id}, none[1] = {0};
  DLDevice gpu = {kDLCUDA, 0};
  frame fr;
  axpy_frame(&fr, DLS__XLA_STAGE_EXECUTE, (dls_function_t){12345}, gpu, 4, 2.0f, x, y);
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "the function is on cuda:0, but XLA runs this call on "
                                                            "its cpu platform");
  add_array(&fr, "dls_fns", DLS__XLA_DTYPE_S64, gpus, 1);
  add_array(&fr, "dls_cpu_fn", DLS__XLA_DTYPE_S64, cpu, 1);
  XLA_OK(call_cpu(&fr));
  cr_assert_eq(y[3], 9.0f, "dls_cpu_fn's axpy did not run");
  fr.arrays[fr.f.attrs.size - 1] = (dls__xla_array){DLS__XLA_DTYPE_S64, 1, none};
  XLA_FAILS(call_cpu(&fr), DLS__XLA_ERROR_INVALID_ARGUMENT, "dls_cpu_fn: expected an int64 array of one function");
  cr_assert_eq(y[3], 9.0f, "a refused call ran");
}
