/* SPDX-License-Identifier: Apache-2.0 */
/* Side-by-side host-time benchmarks: dlstream against raw CUDA driver calls (CUDA) and a bare thread hand-off (CPU).
 *
 * Each figure is the median over 7 repetitions of N calls, after one
 * warm-up repetition, timed with clock_gettime(CLOCK_MONOTONIC). Queued GPU
 * work is drained between repetitions, outside the timed region. The raw
 * anchors use their own dlopen of libcuda.so.1 and the same primary context,
 * streams and kernels as dlstream.
 *
 * Usage: bench_c [--json FILE] [--device N] [--launch-batch N] [--gpu cuda|rocm]
 * --gpu rocm measures dlstream's HIP backend (kDLROCM) instead of its CUDA
 * one; on an NVIDIA GPU that means through the HIP-on-CUDA stand-in
 * (DLSTREAM_HIP_LIBRARY, DLSTREAM_HIP_BUILTINS: docs/hip.md). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

#ifdef DLS_HAVE_CUDA_KERNELS
/* The built-ins' fatbin inside dlstream_static: the anchors launch the very same kernels. */
extern const unsigned char dls__cuda_kernels_fatbin[];
extern const size_t dls__cuda_kernels_fatbin_size;
#endif

/* ---------------------------------------------------------------- timing */

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

figure measure(bench_body body, bench_drain drain, void *ctx, int n) {
  figure f = {0, 0, false};
  double t[REPS];
  if (body(ctx, n) != 0 || (drain != NULL && drain(ctx) != 0)) /* warm-up */
    return f;
  for (int r = 0; r < REPS; r++) {
    double t0 = now_s();
    int rc = body(ctx, n);
    double t1 = now_s();
    if (rc != 0 || (drain != NULL && drain(ctx) != 0))
      return f;
    t[r] = (t1 - t0) * 1e6 / n;
  }
  qsort(t, REPS, sizeof t[0], cmp_double);
  f.median_us = t[REPS / 2];
  f.spread = f.median_us > 0 ? (t[REPS - 1] - t[0]) / f.median_us : 0;
  f.ok = true;
  return f;
}

/* ---------------------------------------------------------------- results */

typedef struct row {
  const char *backend; /* "CUDA", "CPU" */
  char operation[96];
  char anchor_name[64]; /* "" when there is no anchor */
  figure anchor, dls;
  int n;
} row;

static row g_rows[MAX_ROWS];
static int g_nrows;
static char g_error[512]; /* the first failure inside a timed body */

void bench_error(const char *fmt, ...) {
  if (g_error[0] != '\0')
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_error, sizeof g_error, fmt, ap);
  va_end(ap);
}


void add_row(const char *backend, const char *op, const char *anchor_name, bench_body anchor,
                    bench_body dls, bench_drain drain, void *ctx, int n) {
  if (g_nrows == MAX_ROWS)
    return;
  row *r = &g_rows[g_nrows++];
  r->backend = backend;
  snprintf(r->operation, sizeof r->operation, "%s", op);
  snprintf(r->anchor_name, sizeof r->anchor_name, "%s", anchor_name != NULL ? anchor_name : "");
  r->n = n;
  g_error[0] = '\0';
  if (anchor != NULL) {
    r->anchor = measure(anchor, drain, ctx, n);
    if (!r->anchor.ok)
      fprintf(stderr, "bench: %s / %s anchor failed: %s\n", backend, op, g_error);
  }
  g_error[0] = '\0';
  r->dls = measure(dls, drain, ctx, n);
  if (!r->dls.ok)
    fprintf(stderr, "bench: %s / %s failed: %s\n", backend, op, g_error);
}

static void print_table(void) {
  printf("| backend | operation | anchor | anchor µs | dlstream µs | ratio | spread (anchor / dlstream) |\n");
  printf("| --- | --- | --- | ---: | ---: | ---: | ---: |\n");
  for (int i = 0; i < g_nrows; i++) {
    const row *r = &g_rows[i];
    char a[32] = "—", d[32] = "failed", ratio[32] = "—", spread[48];
    if (r->anchor.ok)
      snprintf(a, sizeof a, "%.3f", r->anchor.median_us);
    if (r->dls.ok)
      snprintf(d, sizeof d, "%.3f", r->dls.median_us);
    if (r->anchor.ok && r->dls.ok && r->anchor.median_us > 0)
      snprintf(ratio, sizeof ratio, "%.2f", r->dls.median_us / r->anchor.median_us);
    if (r->anchor.ok)
      snprintf(spread, sizeof spread, "%.0f%% / %.0f%%", 100 * r->anchor.spread, 100 * r->dls.spread);
    else
      snprintf(spread, sizeof spread, "— / %.0f%%", 100 * r->dls.spread);
    printf("| %s | %s | %s | %s | %s | %s | %s |\n", r->backend, r->operation,
           r->anchor_name[0] ? r->anchor_name : "—", a, d, ratio, spread);
  }
}

static void json_number(FILE *f, const char *key, bool ok, double v) {
  if (ok)
    fprintf(f, "\"%s\": %.6g", key, v);
  else
    fprintf(f, "\"%s\": null", key);
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", (unsigned char)*s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

static int write_json(const char *path, const char *cuda_device, const char *cuda_skipped) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  fprintf(f, "{\n  \"reps\": %d,\n  \"statistic\": \"median per operation, microseconds\",\n  \"cuda_device\": ",
          REPS);
  json_string(f, cuda_device);
  fprintf(f, ",\n  \"cuda_skipped\": ");
  if (cuda_skipped != NULL)
    json_string(f, cuda_skipped);
  else
    fprintf(f, "null");
  fprintf(f, ",\n  \"rows\": [\n");
  for (int i = 0; i < g_nrows; i++) {
    const row *r = &g_rows[i];
    fprintf(f, "    {\"backend\": ");
    json_string(f, r->backend);
    fprintf(f, ", \"operation\": ");
    json_string(f, r->operation);
    fprintf(f, ", \"anchor\": ");
    if (r->anchor_name[0])
      json_string(f, r->anchor_name);
    else
      fprintf(f, "null");
    fprintf(f, ", \"n\": %d, ", r->n);
    json_number(f, "anchor_us", r->anchor.ok, r->anchor.median_us);
    fprintf(f, ", ");
    json_number(f, "dlstream_us", r->dls.ok, r->dls.median_us);
    fprintf(f, ", ");
    json_number(f, "ratio", r->anchor.ok && r->dls.ok && r->anchor.median_us > 0,
                r->anchor.median_us > 0 ? r->dls.median_us / r->anchor.median_us : 0);
    fprintf(f, ", ");
    json_number(f, "anchor_spread", r->anchor.ok, r->anchor.spread);
    fprintf(f, ", ");
    json_number(f, "dlstream_spread", r->dls.ok, r->dls.spread);
    fprintf(f, "}%s\n", i + 1 < g_nrows ? "," : "");
  }
  fprintf(f, "  ],\n");
  write_speedups_json(f);
  fprintf(f, "\n}\n");
  return fclose(f) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- CUDA */

cuda_api cu;

/* The same loader rules as the backend: cuGetProcAddress at each symbol's
 * version, clamped to the driver's. Returns NULL or why not. */
static const char *cuda_load(void) {
  static char why[256];
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL)
    return "libcuda.so.1 not found";
  dls__PFN_cuGetProcAddress_v12000 gpa2 = (dls__PFN_cuGetProcAddress_v12000)dlsym(lib, "cuGetProcAddress_v2");
  dls__PFN_cuGetProcAddress_v11030 gpa1 = (dls__PFN_cuGetProcAddress_v11030)dlsym(lib, "cuGetProcAddress");
  if (gpa2 == NULL && gpa1 == NULL)
    return "libcuda.so.1 has no cuGetProcAddress";
  int driver = 0;
  void *fn = NULL;
#define RESOLVE(name, version, params)                                                                   \
  {                                                                                                      \
    int v_ = driver != 0 && (version) > driver ? driver : (version);                                     \
    dls__CUdriverProcAddressQueryResult found_ = DLS__CU_GET_PROC_ADDRESS_SUCCESS;                       \
    fn = NULL;                                                                                           \
    dls__CUresult r_ = gpa2 != NULL ? gpa2(#name, &fn, v_, DLS__CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found_) \
                                    : gpa1(#name, &fn, v_, DLS__CU_GET_PROC_ADDRESS_LEGACY_STREAM);      \
    cu.name = r_ == DLS__CUDA_SUCCESS && found_ == DLS__CU_GET_PROC_ADDRESS_SUCCESS ? (dls__PFN_##name)fn \
                                                                                     : NULL;             \
  }
  RESOLVE(cuDriverGetVersion, 2020, ())
  if (cu.cuDriverGetVersion == NULL || cu.cuDriverGetVersion(&driver) != DLS__CUDA_SUCCESS)
    return "cuDriverGetVersion failed";
  DLS__CUDA_REQUIRED_SYMBOLS(RESOLVE)
  DLS__CUDA_OPTIONAL_SYMBOLS(RESOLVE)
  DLS__CUDA_TOOLS_SYMBOLS(RESOLVE)
#undef RESOLVE
#define NEED(name, version, params)                                  \
  if (cu.name == NULL) {                                             \
    snprintf(why, sizeof why, "the driver lacks %s", #name);         \
    return why;                                                      \
  }
  DLS__CUDA_REQUIRED_SYMBOLS(NEED)
  DLS__CUDA_TOOLS_SYMBOLS(NEED)
#undef NEED
  return NULL;
}

typedef struct cuda_ctx {
  DLDevice device;
  dls__CUcontext ctx;
  dls__CUstream s1, s2;     /* raw streams, also wrapped for dlstream */
  dls_stream_t ds1, ds2;
  dls__CUevent ev;          /* raw event */
  dls_event_t dev_ev;       /* dlstream event */
  dls__CUfunction raw_empty, raw_axpy;
  dls_function_t dls_empty_fn, dls_axpy_fn;
  dls__CUdeviceptr x, y;    /* axpy operands, raw allocations */
  dls_buffer_t bx, by;      /* axpy operands, dlstream buffers */
  unsigned long long n_elems;
  float a;
} cuda_ctx;


static int cuda_drain(void *p) {
  cuda_ctx *c = p;
  CU_CHECK(cu.cuStreamSynchronize(c->s1));
  CU_CHECK(cu.cuStreamSynchronize(c->s2));
  return 0;
}

static int raw_launch_empty(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++)
    CU_CHECK(cu.cuLaunchKernel(c->raw_empty, 1, 1, 1, 32, 1, 1, 0, c->s1, NULL, NULL));
  return 0;
}

static int dls_launch_empty(void *p, int n) {
  cuda_ctx *c = p;
  dls_launch_config_t cfg = dls_config_1d(1, 32);
  for (int i = 0; i < n; i++)
    DLS_CHECK(dls_launch(c->dls_empty_fn, c->ds1, &cfg, NULL, 0));
  return 0;
}

static int raw_launch_axpy(void *p, int n) {
  cuda_ctx *c = p;
  void *params[4] = {&c->n_elems, &c->a, &c->x, &c->y};
  for (int i = 0; i < n; i++)
    CU_CHECK(cu.cuLaunchKernel(c->raw_axpy, 1, 1, 1, 256, 1, 1, 0, c->s1, params, NULL));
  return 0;
}

static int dls_launch_axpy_ptr(void *p, int n) {
  cuda_ctx *c = p;
  dls_launch_config_t cfg = dls_config_1d(1, 256);
  dls_arg_t args[4] = {dls_arg_u64(c->n_elems), dls_arg_f32(c->a), dls_arg_ptr((void *)(uintptr_t)c->x),
                       dls_arg_ptr((void *)(uintptr_t)c->y)};
  for (int i = 0; i < n; i++)
    DLS_CHECK(dls_launch(c->dls_axpy_fn, c->ds1, &cfg, args, 4));
  return 0;
}

static int dls_launch_axpy_buf(void *p, int n) {
  cuda_ctx *c = p;
  dls_launch_config_t cfg = dls_config_1d(1, 256);
  dls_arg_t args[4] = {dls_arg_u64(c->n_elems), dls_arg_f32(c->a), dls_arg_buffer(c->bx), dls_arg_buffer(c->by)};
  for (int i = 0; i < n; i++)
    DLS_CHECK(dls_launch(c->dls_axpy_fn, c->ds1, &cfg, args, 4));
  return 0;
}

static int raw_stream_create(void *p, int n) {
  (void)p;
  for (int i = 0; i < n; i++) {
    dls__CUstream s;
    CU_CHECK(cu.cuStreamCreate(&s, DLS__CU_STREAM_NON_BLOCKING));
    CU_CHECK(cu.cuStreamDestroy(s));
  }
  return 0;
}

static int dls_stream_pooled(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_stream_t s;
    DLS_CHECK(dls_stream_acquire(c->device, &s));
    DLS_CHECK(dls_stream_destroy(s));
  }
  return 0;
}

#define ALLOC_BYTES ((size_t)1 << 20)
static size_t g_scale_bytes; /* the size of the allocation-scaling rows */

static int raw_alloc_free_n(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls__CUdeviceptr ptr;
    CU_CHECK(cu.cuMemAllocAsync(&ptr, g_scale_bytes, c->s1));
    CU_CHECK(cu.cuMemFreeAsync(ptr, c->s1));
  }
  return 0;
}

static int dls_alloc_free_n(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_buffer_t b;
    DLS_CHECK(dls_buffer_alloc(c->ds1, g_scale_bytes, &b));
    DLS_CHECK(dls_buffer_free(b));
  }
  return 0;
}

static int raw_alloc_free(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls__CUdeviceptr ptr;
    CU_CHECK(cu.cuMemAllocAsync(&ptr, ALLOC_BYTES, c->s1));
    CU_CHECK(cu.cuMemFreeAsync(ptr, c->s1));
  }
  return 0;
}

static int dls_alloc_free(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_buffer_t b;
    DLS_CHECK(dls_buffer_alloc(c->ds1, ALLOC_BYTES, &b));
    DLS_CHECK(dls_buffer_free(b));
  }
  return 0;
}

/* The raw sequence that a free after a use on a second stream needs. */
static int raw_alloc_use_free(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls__CUdeviceptr ptr;
    CU_CHECK(cu.cuMemAllocAsync(&ptr, ALLOC_BYTES, c->s1));
    CU_CHECK(cu.cuEventRecord(c->ev, c->s2));
    CU_CHECK(cu.cuStreamWaitEvent(c->s1, c->ev, 0));
    CU_CHECK(cu.cuMemFreeAsync(ptr, c->s1));
  }
  return 0;
}

static int dls_alloc_use_free(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_buffer_t b;
    DLS_CHECK(dls_buffer_alloc(c->ds1, ALLOC_BYTES, &b));
    DLS_CHECK(dls_buffer_record_use(b, c->ds2));
    DLS_CHECK(dls_buffer_free(b));
  }
  return 0;
}

static int raw_record_wait(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    CU_CHECK(cu.cuEventRecord(c->ev, c->s1));
    CU_CHECK(cu.cuStreamWaitEvent(c->s2, c->ev, 0));
  }
  return 0;
}

static int dls_record_wait(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    DLS_CHECK(dls_event_record(c->dev_ev, c->ds1));
    DLS_CHECK(dls_stream_wait_event(c->ds2, c->dev_ev));
  }
  return 0;
}

static int raw_event_create(void *p, int n) {
  (void)p;
  for (int i = 0; i < n; i++) {
    dls__CUevent e;
    CU_CHECK(cu.cuEventCreate(&e, DLS__CU_EVENT_DISABLE_TIMING));
    CU_CHECK(cu.cuEventDestroy(e));
  }
  return 0;
}

static int dls_event_create_destroy(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_event_t e;
    DLS_CHECK(dls_event_create(c->device, DLS_EVENT_DEFAULT, &e));
    DLS_CHECK(dls_event_destroy(e));
  }
  return 0;
}

/* Sets everything up, runs the CUDA rows and tears down. Returns NULL, or
 * why the CUDA figures were skipped. */
DLDeviceType bench_gpu_type = kDLCUDA;
const char *bench_gpu_label = "CUDA";

static const char *run_cuda(int device, int launch_batch, char *device_name, size_t name_size) {
  static char why[600];
  if (dls_backend_probe(bench_gpu_type) != DLS_OK) {
    snprintf(why, sizeof why, "%s", dls_last_error());
    return why;
  }
  int count = 0;
  dls_device_count(bench_gpu_type, &count);
  if (device >= count) {
    snprintf(why, sizeof why, "cuda:%d requested but %d CUDA device(s) visible", device, count);
    return why;
  }
  const char *e = cuda_load();
  if (e != NULL) {
    snprintf(why, sizeof why, "raw driver anchors unavailable: %s", e);
    return why;
  }
  cuda_ctx c;
  memset(&c, 0, sizeof c);
  c.device = dls_device(bench_gpu_type, device);
  c.n_elems = 256;
  c.a = 2.0f;
  dls__CUdevice cudev;
  g_error[0] = '\0';
#define SETUP_CU(expr)                                                                      \
  do {                                                                                      \
    dls__CUresult r_ = (expr);                                                              \
    if (r_ != DLS__CUDA_SUCCESS) {                                                          \
      const char *name_ = "?";                                                              \
      cu.cuGetErrorName(r_, &name_);                                                        \
      snprintf(why, sizeof why, "setup: %s: %s", #expr, name_);                             \
      return why;                                                                           \
    }                                                                                       \
  } while (0)
#define SETUP_DLS(expr)                                                                     \
  do {                                                                                      \
    dls_status_t st_ = (expr);                                                              \
    if (st_ != DLS_OK) {                                                                    \
      snprintf(why, sizeof why, "setup: %s: %s", #expr, dls_last_error());                  \
      return why;                                                                           \
    }                                                                                       \
  } while (0)
  SETUP_CU(cu.cuDeviceGet(&cudev, device));
  char name[96] = "";
  int major = 0, minor = 0, driver = 0;
  cu.cuDeviceGetAttribute(&major, DLS__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cudev);
  cu.cuDeviceGetAttribute(&minor, DLS__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cudev);
  cu.cuDriverGetVersion(&driver);
  snprintf(name, sizeof name, "cuda:%d sm_%d%d, driver CUDA %d.%d", device, major, minor, driver / 1000,
           driver % 1000 / 10);
  snprintf(device_name, name_size, "%s", name);
  SETUP_CU(cu.cuDevicePrimaryCtxRetain(&c.ctx, cudev));
  SETUP_CU(cu.cuCtxSetCurrent(c.ctx));
  SETUP_CU(cu.cuStreamCreate(&c.s1, DLS__CU_STREAM_NON_BLOCKING));
  SETUP_CU(cu.cuStreamCreate(&c.s2, DLS__CU_STREAM_NON_BLOCKING));
  SETUP_CU(cu.cuEventCreate(&c.ev, DLS__CU_EVENT_DISABLE_TIMING));
  SETUP_DLS(dls_stream_wrap(c.device, c.s1, &c.ds1));
  SETUP_DLS(dls_stream_wrap(c.device, c.s2, &c.ds2));
  SETUP_DLS(dls_event_create(c.device, DLS_EVENT_DEFAULT, &c.dev_ev));
  /* The anchor's pool keeps its memory too, as dlstream's does. */
  dls__CUmemoryPool pool;
  SETUP_CU(cu.cuDeviceGetDefaultMemPool(&pool, cudev));
  dls__cuuint64_t keep = UINT64_MAX;
  SETUP_CU(cu.cuMemPoolSetAttribute(pool, DLS__CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
  SETUP_CU(cu.cuMemAlloc(&c.x, c.n_elems * sizeof(float)));
  SETUP_CU(cu.cuMemAlloc(&c.y, c.n_elems * sizeof(float)));
  SETUP_DLS(dls_buffer_alloc(c.ds1, c.n_elems * sizeof(float), &c.bx));
  SETUP_DLS(dls_buffer_alloc(c.ds1, c.n_elems * sizeof(float), &c.by));

  bool kernels = false;
  dls__CUmodule mod = NULL;
#ifdef DLS_HAVE_CUDA_KERNELS
  SETUP_CU(cu.cuModuleLoadDataEx(&mod, dls__cuda_kernels_fatbin, 0, NULL, NULL));
  SETUP_CU(cu.cuModuleGetFunction(&c.raw_empty, mod, "dls_empty"));
  SETUP_CU(cu.cuModuleGetFunction(&c.raw_axpy, mod, "dls_axpy_f32"));
  SETUP_DLS(dls_builtin_function(c.device, "dls_empty", &c.dls_empty_fn));
  SETUP_DLS(dls_builtin_function(c.device, "dls_axpy_f32", &c.dls_axpy_fn));
  kernels = true;
#endif
  if (kernels) {
    add_row(bench_gpu_label, "launch empty kernel", "cuLaunchKernel", raw_launch_empty, dls_launch_empty, cuda_drain, &c,
            launch_batch);
    add_row(bench_gpu_label, "launch axpy_f32, 4 args (raw pointers)", "cuLaunchKernel", raw_launch_axpy, dls_launch_axpy_ptr,
            cuda_drain, &c, launch_batch);
    add_row(bench_gpu_label, "launch axpy_f32, 4 args (buffers)", "cuLaunchKernel", raw_launch_axpy, dls_launch_axpy_buf,
            cuda_drain, &c, launch_batch);
  } else {
    fprintf(stderr, "bench: launch rows skipped: CUDA built-in kernels were not compiled in (no nvcc)\n");
  }
  add_row(bench_gpu_label, "stream: pooled acquire+destroy", "cuStreamCreate+cuStreamDestroy", raw_stream_create,
          dls_stream_pooled, cuda_drain, &c, 500);
  add_row(bench_gpu_label, "alloc+free 1 MiB, stream-ordered", "cuMemAllocAsync+cuMemFreeAsync", raw_alloc_free,
          dls_alloc_free, cuda_drain, &c, 1000);
  add_row(bench_gpu_label, "alloc+use on 2nd stream+free 1 MiB", "cuMemAllocAsync+cuEventRecord+cuStreamWaitEvent+cuMemFreeAsync",
          raw_alloc_use_free, dls_alloc_use_free, cuda_drain, &c, 1000);
  add_row(bench_gpu_label, "event record+wait", "cuEventRecord+cuStreamWaitEvent", raw_record_wait, dls_record_wait,
          cuda_drain, &c, 2000);
  add_row(bench_gpu_label, "event create+destroy", "cuEventCreate+cuEventDestroy", raw_event_create,
          dls_event_create_destroy, cuda_drain, &c, 1000);
  run_groups(c.device, c.ctx, kernels);
  static const size_t sizes[] = {(size_t)4 << 10, (size_t)64 << 10, (size_t)1 << 20, (size_t)16 << 20,
                                 (size_t)256 << 20, (size_t)1 << 30};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char op[96];
    g_scale_bytes = sizes[i];
    if (sizes[i] >= ((size_t)1 << 20))
      snprintf(op, sizeof op, "scaling: alloc+free %zu MiB, stream-ordered", sizes[i] >> 20);
    else
      snprintf(op, sizeof op, "scaling: alloc+free %zu KiB, stream-ordered", sizes[i] >> 10);
    add_row(bench_gpu_label, op, "cuMemAllocAsync+cuMemFreeAsync", raw_alloc_free_n, dls_alloc_free_n, cuda_drain, &c, 500);
  }

  cuda_drain(&c);
  dls_buffer_free(c.bx);
  dls_buffer_free(c.by);
  dls_event_destroy(c.dev_ev);
  dls_stream_destroy(c.ds1);
  dls_stream_destroy(c.ds2);
  dls_shutdown();
  cu.cuCtxSetCurrent(c.ctx);
  if (mod != NULL)
    cu.cuModuleUnload(mod);
  cu.cuMemFree(c.x);
  cu.cuMemFree(c.y);
  cu.cuEventDestroy(c.ev);
  cu.cuStreamDestroy(c.s1);
  cu.cuStreamDestroy(c.s2);
  cu.cuDevicePrimaryCtxRelease(cudev);
  return NULL;
}

/* ---------------------------------------------------------------- CPU */

/* The anchor: the least a worker-thread stream must do per round trip,
 * hand one job to a thread and wait for its completion. */
typedef struct handoff {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long posted, done;
  bool quit;
  pthread_t thread;
} handoff;

static void *handoff_worker(void *p) {
  handoff *h = p;
  pthread_mutex_lock(&h->mu);
  for (;;) {
    while (h->posted == h->done && !h->quit)
      pthread_cond_wait(&h->cv, &h->mu);
    if (h->quit)
      break;
    h->done++;
    pthread_cond_broadcast(&h->cv);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

typedef struct cpu_ctx {
  handoff h;
  DLDevice device;
  dls_stream_t s1, s2;
  dls_event_t ev;
  dls_function_t tiny;
} cpu_ctx;

static int tiny_kernel(const dls_launch_config_t *config, void *const *args, int nargs) {
  (void)config;
  (void)args;
  (void)nargs;
  return 0;
}

static int anchor_roundtrip(void *p, int n) {
  handoff *h = &((cpu_ctx *)p)->h;
  for (int i = 0; i < n; i++) {
    pthread_mutex_lock(&h->mu);
    long want = ++h->posted;
    pthread_cond_broadcast(&h->cv);
    while (h->done != want)
      pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
  }
  return 0;
}

static int dls_roundtrip(void *p, int n) {
  cpu_ctx *c = p;
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  for (int i = 0; i < n; i++) {
    DLS_CHECK(dls_launch(c->tiny, c->s1, &cfg, NULL, 0));
    DLS_CHECK(dls_stream_synchronize(c->s1));
  }
  return 0;
}

static int cpu_record_wait(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    DLS_CHECK(dls_event_record(c->ev, c->s1));
    DLS_CHECK(dls_stream_wait_event(c->s2, c->ev));
  }
  return 0;
}

static int cpu_acquire_release(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_stream_t s;
    DLS_CHECK(dls_stream_acquire(c->device, &s));
    DLS_CHECK(dls_stream_destroy(s));
  }
  return 0;
}

#define CPU_SPIN_NS 1000000ull /* 1 ms */

static int cpu_spin_serial(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < 4; k++)
      DLS_CHECK(dls_spin(c->s1, CPU_SPIN_NS));
    DLS_CHECK(dls_stream_synchronize(c->s1));
  }
  return 0;
}

static int cpu_spin_group(void *p, int n) {
  cpu_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_group_t g;
    DLS_CHECK(dls_group_begin(c->s1, &g));
    for (int k = 0; k < 4; k++) {
      dls_stream_t b;
      DLS_CHECK(dls_group_branch(g, &b));
      DLS_CHECK(dls_spin(b, CPU_SPIN_NS));
    }
    DLS_CHECK(dls_group_end(g));
    DLS_CHECK(dls_stream_synchronize(c->s1));
  }
  return 0;
}

static int cpu_drain(void *p) {
  cpu_ctx *c = p;
  DLS_CHECK(dls_stream_synchronize(c->s1));
  DLS_CHECK(dls_stream_synchronize(c->s2));
  return 0;
}

static const char *run_cpu(void) {
  static char why[600];
  cpu_ctx c;
  memset(&c, 0, sizeof c);
  c.device = dls_cpu();
  if (dls_stream_create(c.device, NULL, &c.s1) != DLS_OK || dls_stream_create(c.device, NULL, &c.s2) != DLS_OK ||
      dls_event_create(c.device, DLS_EVENT_DEFAULT, &c.ev) != DLS_OK ||
      dls_function_from_host(c.device, "bench_tiny", tiny_kernel, &c.tiny) != DLS_OK) {
    snprintf(why, sizeof why, "%s", dls_last_error());
    return why;
  }
  pthread_mutex_init(&c.h.mu, NULL);
  pthread_cond_init(&c.h.cv, NULL);
  if (pthread_create(&c.h.thread, NULL, handoff_worker, &c.h) != 0)
    return "pthread_create failed";
  add_row("CPU", "stream round trip: tiny host kernel + synchronize", "mutex+condvar hand-off to a thread",
          anchor_roundtrip, dls_roundtrip, cpu_drain, &c, 2000);
  add_row("CPU", "event record+wait", NULL, NULL, cpu_record_wait, cpu_drain, &c, 2000);
  add_row("CPU", "stream: pooled acquire+destroy", NULL, NULL, cpu_acquire_release, cpu_drain, &c, 2000);
  add_row("CPU", "fork/join: 4 x 1 ms spin on 4 worker-thread branches (ratio = 1/speedup)",
          "4 x 1 ms spin on one stream", cpu_spin_serial, cpu_spin_group, cpu_drain, &c, 20);
  pthread_mutex_lock(&c.h.mu);
  c.h.quit = true;
  pthread_cond_broadcast(&c.h.cv);
  pthread_mutex_unlock(&c.h.mu);
  pthread_join(c.h.thread, NULL);
  dls_function_destroy(c.tiny);
  dls_event_destroy(c.ev);
  dls_stream_destroy(c.s1);
  dls_stream_destroy(c.s2);
  return NULL;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
  const char *json = NULL;
  int device = 0, launch_batch = 2000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--launch-batch") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      launch_batch = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--gpu") == 0 && i + 1 < argc &&
               (strcmp(argv[i + 1], "cuda") == 0 || strcmp(argv[i + 1], "rocm") == 0)) {
      if (strcmp(argv[++i], "rocm") == 0) {
        bench_gpu_type = kDLROCM;
        bench_gpu_label = "HIP via HIP-on-CUDA stand-in";
      }
    } else {
      fprintf(stderr, "usage: %s [--json FILE] [--device N] [--launch-batch N] [--gpu cuda|rocm]\n", argv[0]);
      return 2;
    }
  }
  char cuda_device[128] = "";
  const char *cuda_skipped = run_cuda(device, launch_batch, cuda_device, sizeof cuda_device);
  if (cuda_skipped != NULL)
    printf("CUDA: skipped: %s\n", cuda_skipped);
  else
    printf("CUDA device: %s (dlstream's figures: %s backend)\n", cuda_device,
           bench_gpu_type == kDLROCM ? "HIP, through the HIP-on-CUDA stand-in" : "CUDA");
  const char *cpu_skipped = run_cpu();
  if (cpu_skipped != NULL)
    printf("CPU: skipped: %s\n", cpu_skipped);
  printf("median of %d repetitions after a warm-up; µs per operation; ratio = dlstream / anchor; spread = "
         "(max - min) / median\n\n",
         REPS);
  print_table();
  print_speedups();
  dls_shutdown();
  if (json != NULL && write_json(json, cuda_device, cuda_skipped) != 0)
    return 1;
  return 0;
}
