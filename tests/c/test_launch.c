/* SPDX-License-Identifier: Apache-2.0 */
/* Typed launches, host functions, modules, and their errors. */
#include <math.h>
#include <pthread.h>

#include "common.h"

TestSuite(launch, .fini = dlst_fini);

typedef struct seen_t {
  int32_t i32;
  int64_t i64;
  uint32_t u32;
  uint64_t u64;
  float f32;
  double f64;
  void *ptr;
  void *buf;
  struct { int32_t a, b, c; } bytes;
  uint32_t grid0, block0, shared;
  int nargs;
} seen_t;

static seen_t g_seen;

static int record_args(const dls_launch_config_t *cfg, void *const *args, int n) {
  g_seen.i32 = *(int32_t *)args[0];
  g_seen.i64 = *(int64_t *)args[1];
  g_seen.u32 = *(uint32_t *)args[2];
  g_seen.u64 = *(uint64_t *)args[3];
  g_seen.f32 = *(float *)args[4];
  g_seen.f64 = *(double *)args[5];
  g_seen.ptr = *(void **)args[6];
  g_seen.buf = *(void **)args[7];
  memcpy(&g_seen.bytes, args[8], sizeof g_seen.bytes);
  g_seen.grid0 = cfg->grid[0];
  g_seen.block0 = cfg->block[0];
  g_seen.shared = cfg->shared_mem_bytes;
  g_seen.nargs = n;
  return 0;
}

Test(launch, host_function_receives_every_argument_kind) {
  DLDevice d = dls_cpu();
  dls_stream_t s;
  dls_function_t f;
  dls_buffer_t b;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_function_from_host(d, "record_args", record_args, &f));
  OK(dls_buffer_alloc(s, 32, &b));
  void *bp;
  OK(dls_buffer_ptr(b, &bp));
  struct { int32_t a, b, c; } bytes = {1, 2, 3};
  int marker;
  dls_arg_t args[] = {dls_arg_i32(-5),       dls_arg_i64(-(1ll << 40)), dls_arg_u32(0xfffffff0u),
                      dls_arg_u64(1ull << 63), dls_arg_f32(1.5f),         dls_arg_f64(-2.25),
                      dls_arg_ptr(&marker),  dls_arg_buffer(b),         dls_arg_bytes(&bytes, sizeof bytes)};
  dls_launch_config_t cfg = {.grid = {3, 1, 1}, .block = {64, 2, 1}, .shared_mem_bytes = 128};
  OK(dls_launch(f, s, &cfg, args, 9));
  bytes.a = 99; /* the launch copied the bytes at the call */
  OK(dls_stream_synchronize(s));
  cr_assert_eq(g_seen.i32, -5);
  cr_assert_eq(g_seen.i64, -(1ll << 40));
  cr_assert_eq(g_seen.u32, 0xfffffff0u);
  cr_assert_eq(g_seen.u64, 1ull << 63);
  cr_assert_float_eq(g_seen.f32, 1.5f, 0);
  cr_assert_float_eq(g_seen.f64, -2.25, 0);
  cr_assert_eq(g_seen.ptr, &marker);
  cr_assert_eq(g_seen.buf, bp);
  cr_assert_eq(g_seen.bytes.a, 1);
  cr_assert_eq(g_seen.bytes.c, 3);
  cr_assert_eq(g_seen.grid0, 3);
  cr_assert_eq(g_seen.block0, 64);
  cr_assert_eq(g_seen.shared, 128);
  cr_assert_eq(g_seen.nargs, 9);
  const char *name;
  OK(dls_function_name(f, &name));
  cr_assert_str_eq(name, "record_args");
  OK(dls_buffer_free(b));
  OK(dls_function_destroy(f));
  OK(dls_stream_destroy(s));
}

static int fails(const dls_launch_config_t *cfg, void *const *args, int n) { return 42; }

Test(launch, a_failing_host_kernel_is_reported_at_synchronize) {
  dls_stream_t s;
  dls_function_t f;
  OK(dls_stream_create(dls_cpu(), NULL, &s));
  OK(dls_function_from_host(dls_cpu(), "fails", fails, &f));
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  OK(dls_launch(f, s, &cfg, NULL, 0));
  FAILS(dls_stream_synchronize(s), DLS_ERR_BACKEND, "kernel \"fails\" returned 42");
  OK(dls_stream_synchronize(s)); /* reported once */
  OK(dls_function_destroy(f));
  OK(dls_stream_destroy(s));
}

Test(launch, bad_configs_and_arguments_are_rejected_and_nothing_runs) {
  dls_stream_t s;
  dls_function_t f;
  OK(dls_stream_create(dls_cpu(), NULL, &s));
  OK(dls_function_from_host(dls_cpu(), "record_args", record_args, &f));
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  FAILS(dls_launch(f, s, NULL, NULL, 0), DLS_ERR_INVALID_ARGUMENT, "config=NULL");
  cfg.grid[1] = 0;
  FAILS(dls_launch(f, s, &cfg, NULL, 0), DLS_ERR_INVALID_ARGUMENT, "config.grid[1]=0");
  cfg = dls_config_1d(1, 1);
  cfg.block[2] = 0;
  FAILS(dls_launch(f, s, &cfg, NULL, 0), DLS_ERR_INVALID_ARGUMENT, "config.block[2]=0");
  cfg = dls_config_1d(1, 1);
  FAILS(dls_launch(f, s, &cfg, NULL, 3), DLS_ERR_INVALID_ARGUMENT, "args=NULL, nargs=3");
  dls_arg_t many[DLS_MAX_ARGS + 1];
  for (int i = 0; i <= DLS_MAX_ARGS; i++)
    many[i] = dls_arg_i32(i);
  FAILS(dls_launch(f, s, &cfg, many, DLS_MAX_ARGS + 1), DLS_ERR_INVALID_ARGUMENT, "at most 64 arguments");
  dls_arg_t bad = dls_arg_i32(0);
  bad.kind = 77;
  FAILS(dls_launch(f, s, &cfg, &bad, 1), DLS_ERR_INVALID_ARGUMENT, "args[0].kind=77");
  dls_buffer_t gone;
  OK(dls_buffer_alloc(s, 4, &gone));
  OK(dls_buffer_free(gone));
  dls_arg_t stale = dls_arg_buffer(gone);
  FAILS(dls_launch(f, s, &cfg, &stale, 1), DLS_ERR_INVALID_HANDLE, "dls_launch(args[0]): buffer handle is stale");
  static char big[DLS_MAX_ARG_BYTES];
  dls_arg_t huge[2] = {dls_arg_bytes(big, sizeof big), dls_arg_i32(1)};
  FAILS(dls_launch(f, s, &cfg, huge, 2), DLS_ERR_INVALID_ARGUMENT, "more than 4096");
  dls_arg_t empty = dls_arg_bytes(NULL, 4);
  FAILS(dls_launch(f, s, &cfg, &empty, 1), DLS_ERR_INVALID_ARGUMENT, "bytes argument");
  OK(dls_stream_synchronize(s));
  OK(dls_function_destroy(f));
  OK(dls_stream_destroy(s));
}

Test(launch, function_errors) {
  dls_function_t f;
  FAILS(dls_function_from_host(dls_cpu(), "x", NULL, &f), DLS_ERR_INVALID_ARGUMENT, "fn=NULL");
  FAILS(dls_function_from_host(dls_cpu(), "x", fails, NULL), DLS_ERR_INVALID_ARGUMENT, "out_function=NULL");
  OK(dls_function_from_host(dls_cpu(), NULL, fails, &f));
  const char *name;
  OK(dls_function_name(f, &name));
  cr_assert_str_eq(name, "host_function");
  OK(dls_function_destroy(f));
  FAILS(dls_function_destroy(f), DLS_ERR_INVALID_HANDLE, "function handle is stale");
  dls_function_t z = {0};
  OK(dls_function_destroy(z));
  dls_function_t fill;
  OK(dls_builtin_function(dls_cpu(), "dls_fill", &fill));
  FAILS(dls_function_destroy(fill), DLS_ERR_STATE, "built-in functions belong to the runtime");
  FAILS(dls_builtin_function(dls_cpu(), "dls_nope", &fill), DLS_ERR_NOT_FOUND, "no such built-in");
}

Test(launch, cpu_loads_no_modules) {
  dls_module_t m;
  char image[16] = {1};
  FAILS(dls_module_load(dls_cpu(), image, sizeof image, &m), DLS_ERR_NOT_SUPPORTED, "dls_function_from_host");
  FAILS(dls_module_load(dls_cpu(), NULL, 0, &m), DLS_ERR_INVALID_ARGUMENT, "empty image");
  FAILS(dls_module_load_file(dls_cpu(), "/nonexistent/x.cubin", &m), DLS_ERR_NOT_FOUND, "cannot open the file");
  dls_module_t z = {0};
  OK(dls_module_unload(z));
}

Test(launch, host_functions_are_cpu_only) {
  DLDevice g = dlst_device(kDLCUDA);
  dls_function_t f;
  FAILS(dls_function_from_host(g, "x", fails, &f), DLS_ERR_NOT_SUPPORTED, "host functions run only on CPU devices");
}

BACKEND_TEST(launch, function_and_stream_of_different_devices_are_rejected) {
  DLDevice d = dlst_device(*backend_type);
  if (dls_backend_probe(kDLCUDA) != DLS_OK)
    cr_skip_test("needs two backends");
  DLDevice other = d.device_type == kDLCPU ? dls_cuda(0) : dls_cpu();
  dls_function_t f;
  OK(dls_builtin_function(d, "dls_spin", &f));
  dls_arg_t a = dls_arg_u64(1);
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  FAILS(dls_launch(f, dls_stream_default(other, DLS_STREAM_LEGACY), &cfg, &a, 1), DLS_ERR_INVALID_DEVICE,
        "function \"dls_spin\" is on");
}

static int g_order[3];
static int g_order_n;
static int note(const dls_launch_config_t *cfg, void *const *args, int n) {
  g_order[g_order_n++] = *(int32_t *)args[0];
  return 0;
}

Test(launch, launches_run_in_submission_order) {
  dls_stream_t s;
  dls_function_t f;
  OK(dls_stream_create(dls_cpu(), NULL, &s));
  OK(dls_function_from_host(dls_cpu(), "note", note, &f));
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  for (int32_t i = 0; i < 3; i++) {
    dls_arg_t a = dls_arg_i32(i);
    OK(dls_launch(f, s, &cfg, &a, 1));
  }
  OK(dls_function_destroy(f)); /* queued launches keep the function alive */
  OK(dls_stream_synchronize(s));
  cr_assert_eq(g_order_n, 3);
  cr_assert_eq(g_order[0], 0);
  cr_assert_eq(g_order[2], 2);
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(launch, launch_on_a_second_stream_records_the_buffer_use) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_pooling();
  dls_stream_t a, b;
  dls_buffer_t buf;
  dls_latch_t l;
  OK(dls_stream_create(d, NULL, &a));
  OK(dls_stream_create(d, NULL, &b));
  OK(dls_latch_create(d, &l));
  OK(dls_buffer_alloc(a, 64, &buf));
  OK(dls_latch_wait(l, b, DLST_LATCH_TIMEOUT_NS));
  int32_t v = 1;
  OK(dls_fill(b, dls_arg_buffer(buf), 16, 4, &v));
  OK(dls_buffer_free(buf));
  dls_event_t e;
  OK(dls_event_create(d, 0, &e));
  OK(dls_event_record(e, a));
  int done = 1;
  OK(dls_event_query(e, &done));
  cr_assert_eq(done, 0, "a's free waits for b's launch");
  OK(dls_latch_open(l));
  OK(dls_event_synchronize(e));
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
  OK(dls_event_destroy(e));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(b));
}

/* Two empty kernels as PTX, which every CUDA driver compiles. */
static const char k_two_kernels_ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n"
                                        ".visible .entry dls_test_a()\n{\n\tret;\n}\n"
                                        ".visible .entry dls_test_b()\n{\n\tret;\n}\n";

typedef struct lookup_job {
  dls_module_t m;
  uint64_t ids[50];
} lookup_job;

static void *look_up_a(void *p) {
  lookup_job *j = p;
  for (int i = 0; i < 50; i++) {
    dls_function_t f = {0};
    if (dls_module_function(j->m, "dls_test_a", &f) != DLS_OK)
      return (void *)1;
    j->ids[i] = f.id;
  }
  return NULL;
}

Test(launch, looking_a_name_up_again_gives_the_same_function) {
  DLDevice d = dlst_device(kDLCUDA); /* PTX: CUDA only */
  dls_module_t m;
  OK(dls_module_load(d, k_two_kernels_ptx, sizeof k_two_kernels_ptx, &m));
  size_t before = dls_live_handles(DLS_HANDLE_FUNCTION);
  dls_function_t a, again, b;
  OK(dls_module_function(m, "dls_test_a", &a));
  for (int i = 0; i < 100; i++) { /* a RawKernel-style loop: no handle per call */
    OK(dls_module_function(m, "dls_test_a", &again));
    cr_assert_eq(again.id, a.id, "lookup %d of the same name gave another handle", i);
  }
  OK(dls_module_function(m, "dls_test_b", &b));
  cr_assert_neq(b.id, a.id, "another name, another function");
  cr_assert_eq(dls_live_handles(DLS_HANDLE_FUNCTION), before + 2, "one handle per name, however often looked up");
  enum { T = 4 };
  pthread_t th[T];
  lookup_job jobs[T];
  for (int t = 0; t < T; t++) {
    jobs[t].m = m;
    cr_assert_eq(pthread_create(&th[t], NULL, look_up_a, &jobs[t]), 0);
  }
  for (int t = 0; t < T; t++) {
    void *r;
    pthread_join(th[t], &r);
    cr_assert_null(r, "thread %d: %s", t, dls_last_error());
    for (int i = 0; i < 50; i++)
      cr_assert_eq(jobs[t].ids[i], a.id, "thread %d, lookup %d gave another handle", t, i);
  }
  cr_assert_eq(dls_live_handles(DLS_HANDLE_FUNCTION), before + 2);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  OK(dls_launch(again, s, &cfg, NULL, 0));
  OK(dls_stream_synchronize(s));
  OK(dls_module_unload(m));
  FAILS(dls_launch(a, s, &cfg, NULL, 0), DLS_ERR_INVALID_HANDLE, "function handle is stale");
  cr_assert_eq(dls_live_handles(DLS_HANDLE_FUNCTION), before);
  OK(dls_stream_destroy(s));
}
