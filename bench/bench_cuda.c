/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA rows of bench_c: each dlstream call sequence beside the raw driver sequence it stands for.
 *
 * The anchors use their own dlopen of libcuda.so.1 and the same primary
 * context, streams and kernels as dlstream. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"

#ifdef DLS_HAVE_CUDA_KERNELS
/* The built-ins' fatbin inside dlstream_static: the anchors launch the very same kernels. */
extern const unsigned char dls__cuda_kernels_fatbin[];
extern const size_t dls__cuda_kernels_fatbin_size;
#endif

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
  /* the capture query at the ABI the backend prefers (12.3's), then at the old one (fn: the last found) */
  RESOLVE(cuStreamGetCaptureInfo, 12030, ())
  cu.capture_info_v3 = (dls__PFN_cuStreamGetCaptureInfo_v12030)fn;
  if (driver < 12030)
    cu.capture_info_v3 = NULL;
  RESOLVE(cuStreamGetCaptureInfo, 10010, ())
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

int cuda_drain(void *p) {
  cuda_ctx *c = p;
  CU_CHECK(cu.cuStreamSynchronize(c->s1));
  CU_CHECK(cu.cuStreamSynchronize(c->s2));
  if (c->os1.id != 0 && (dls_stream_synchronize(c->os1) != DLS_OK || dls_stream_synchronize(c->os2) != DLS_OK))
    return -1;
  return 0;
}

void cuda_use_set(cuda_ctx *c, bool own) {
  c->u1 = own ? c->os1 : c->ds1;
  c->u2 = own ? c->os2 : c->ds2;
  c->ux = own ? c->obx : c->bx;
  c->uy = own ? c->oby : c->by;
  c->ux2 = own ? c->obx2 : c->bx2;
  c->uy2 = own ? c->oby2 : c->by2;
  c->ut = own ? c->otb : c->tb;
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

int raw_launch_axpy(void *p, int n) {
  cuda_ctx *c = p;
  void *params[4] = {&c->n_elems, &c->a, &c->x, &c->y};
  for (int i = 0; i < n; i++)
    CU_CHECK(cu.cuLaunchKernel(c->raw_axpy, 1, 1, 1, 256, 1, 1, 0, c->s1, params, NULL));
  return 0;
}

int dls_launch_axpy_ptr(void *p, int n) {
  cuda_ctx *c = p;
  dls_launch_config_t cfg = dls_config_1d(1, 256);
  dls_arg_t args[4] = {dls_arg_u64(c->n_elems), dls_arg_f32(c->a), dls_arg_ptr((void *)(uintptr_t)c->x),
                       dls_arg_ptr((void *)(uintptr_t)c->y)};
  for (int i = 0; i < n; i++)
    DLS_CHECK(dls_launch(c->dls_axpy_fn, c->u1, &cfg, args, 4));
  return 0;
}

int dls_launch_axpy_buf(void *p, int n) {
  cuda_ctx *c = p;
  dls_launch_config_t cfg = dls_config_1d(1, 256);
  dls_arg_t args[4] = {dls_arg_u64(c->n_elems), dls_arg_f32(c->a), dls_arg_buffer(c->ux), dls_arg_buffer(c->uy)};
  for (int i = 0; i < n; i++)
    DLS_CHECK(dls_launch(c->dls_axpy_fn, c->u1, &cfg, args, 4));
  return 0;
}

/* Two streams taking turns writing one output: every launch crosses from the other stream's write (the
 * hazard rule: dlstream makes the stream wait; the anchor records an event and waits on it by hand). */

int dls_launch_axpy_alternate(void *p, int n) {
  cuda_ctx *c = p;
  dls_launch_config_t cfg = dls_config_1d(1, 256);
  dls_arg_t args[4] = {dls_arg_u64(c->n_elems), dls_arg_f32(c->a), dls_arg_buffer_in(c->ux), dls_arg_buffer(c->uy)};
  for (int i = 0; i < n; i++)
    DLS_CHECK(dls_launch(c->dls_axpy_fn, i % 2 ? c->u2 : c->u1, &cfg, args, 4));
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

/* Two streams taking turns writing one output: every launch crosses from the other stream's write (the
 * hazard rule: dlstream makes the stream wait; the anchor records an event and waits on it by hand). With
 * `ask`, the launch stream's capture state is asked first, as dlstream must on a stream it did not make. */
static inline __attribute__((always_inline)) int alternate_loop(cuda_ctx *c, int n, const bool ask) {
  void *params[4] = {&c->n_elems, &c->a, &c->x, &c->y};
  for (int i = 0; i < n; i++) {
    dls__CUstream on = i % 2 ? c->s2 : c->s1, other = i % 2 ? c->s1 : c->s2;
    if (ask && ask_capture(on) != 0)
      return -1;
    CU_CHECK(cu.cuEventRecord(c->ev, other));
    CU_CHECK(cu.cuStreamWaitEvent(on, c->ev, 0));
    CU_CHECK(cu.cuLaunchKernel(c->raw_axpy, 1, 1, 1, 256, 1, 1, 0, on, params, NULL));
  }
  return 0;
}

/* The same launches taking turns on two streams with nothing ordering them (raw pointers): what the crossing rows
 * pay besides the crossing. */
int raw_launch_axpy_turns(void *p, int n) {
  cuda_ctx *c = p;
  void *params[4] = {&c->n_elems, &c->a, &c->x, &c->y};
  for (int i = 0; i < n; i++)
    CU_CHECK(cu.cuLaunchKernel(c->raw_axpy, 1, 1, 1, 256, 1, 1, 0, i % 2 ? c->s2 : c->s1, params, NULL));
  return 0;
}

int dls_launch_axpy_ptr_turns(void *p, int n) {
  cuda_ctx *c = p;
  dls_launch_config_t cfg = dls_config_1d(1, 256);
  dls_arg_t args[4] = {dls_arg_u64(c->n_elems), dls_arg_f32(c->a), dls_arg_ptr((void *)(uintptr_t)c->x),
                       dls_arg_ptr((void *)(uintptr_t)c->y)};
  for (int i = 0; i < n; i++)
    DLS_CHECK(dls_launch(c->dls_axpy_fn, i % 2 ? c->u2 : c->u1, &cfg, args, 4));
  return 0;
}


int raw_launch_axpy_alternate(void *p, int n) {
  cuda_ctx *c = p;
  return c->ask ? alternate_loop(c, n, true) : alternate_loop(c, n, false);
}

/* The raw loops, inlined with `ask` constant: without it they are the bare driver sequence. */
static inline __attribute__((always_inline)) int alloc_free_loop(cuda_ctx *c, int n, const bool ask) {
  for (int i = 0; i < n; i++) {
    dls__CUdeviceptr ptr;
    if (ask && ask_capture(c->s1) != 0)
      return -1;
    CU_CHECK(cu.cuMemAllocAsync(&ptr, c->bytes, c->s1));
    if (ask && ask_capture(c->s1) != 0)
      return -1;
    CU_CHECK(cu.cuMemFreeAsync(ptr, c->s1));
  }
  return 0;
}

int raw_alloc_free(void *p, int n) {
  cuda_ctx *c = p;
  return c->ask ? alloc_free_loop(c, n, true) : alloc_free_loop(c, n, false);
}

int dls_alloc_free(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_buffer_t b;
    DLS_CHECK(dls_buffer_alloc(c->u1, c->bytes, &b));
    DLS_CHECK(dls_buffer_free(b));
  }
  return 0;
}

/* The raw sequence that a free after a use on a second stream needs. */
static inline __attribute__((always_inline)) int alloc_use_free_loop(cuda_ctx *c, int n, const bool ask) {
  for (int i = 0; i < n; i++) {
    dls__CUdeviceptr ptr;
    if (ask && ask_capture(c->s1) != 0)
      return -1;
    CU_CHECK(cu.cuMemAllocAsync(&ptr, c->bytes, c->s1));
    if (ask && ask_capture(c->s2) != 0)
      return -1;
    CU_CHECK(cu.cuEventRecord(c->ev, c->s2));
    if (ask && ask_capture(c->s1) != 0)
      return -1;
    CU_CHECK(cu.cuStreamWaitEvent(c->s1, c->ev, 0));
    CU_CHECK(cu.cuMemFreeAsync(ptr, c->s1));
  }
  return 0;
}

int raw_alloc_use_free(void *p, int n) {
  cuda_ctx *c = p;
  return c->ask ? alloc_use_free_loop(c, n, true) : alloc_use_free_loop(c, n, false);
}

int dls_alloc_use_free(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_buffer_t b;
    DLS_CHECK(dls_buffer_alloc(c->u1, c->bytes, &b));
    DLS_CHECK(dls_buffer_record_use(b, c->u2, DLS_ACCESS_WRITE));
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
    DLS_CHECK(dls_event_record(c->dev_ev, c->u1));
    DLS_CHECK(dls_stream_wait_event(c->u2, c->dev_ev));
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


const char *run_cuda(int device, int launch_batch, char *device_name, size_t name_size) {
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
  SETUP_CU(cu.cuEventCreate(&c.ev2[0], DLS__CU_EVENT_DISABLE_TIMING));
  SETUP_CU(cu.cuEventCreate(&c.ev2[1], DLS__CU_EVENT_DISABLE_TIMING));
  SETUP_DLS(dls_stream_wrap(c.device, c.s1, &c.ds1));
  SETUP_DLS(dls_stream_wrap(c.device, c.s2, &c.ds2));
  SETUP_DLS(dls_stream_create(c.device, NULL, &c.os1));
  SETUP_DLS(dls_stream_create(c.device, NULL, &c.os2));
  c.bytes = (size_t)1 << 20;
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
  SETUP_DLS(dls_buffer_alloc(c.os1, c.n_elems * sizeof(float), &c.obx));
  SETUP_DLS(dls_buffer_alloc(c.os1, c.n_elems * sizeof(float), &c.oby));
  SETUP_DLS(dls_buffer_alloc(c.ds2, c.n_elems * sizeof(float), &c.bx2));
  SETUP_DLS(dls_buffer_alloc(c.ds2, c.n_elems * sizeof(float), &c.by2));
  SETUP_DLS(dls_buffer_alloc(c.os2, c.n_elems * sizeof(float), &c.obx2));
  SETUP_DLS(dls_buffer_alloc(c.os2, c.n_elems * sizeof(float), &c.oby2));
  for (int i = 0; i < 4; i++) {
    SETUP_DLS(dls_buffer_alloc(c.ds1, c.n_elems * sizeof(float), &c.tb[i]));
    SETUP_DLS(dls_buffer_alloc(c.os1, c.n_elems * sizeof(float), &c.otb[i]));
  }
  cuda_use_set(&c, false);

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
    /* The hazard rule's cost on the common path: the same launch with its two own buffers on their stream (one
     * read, one written, nothing to wait for) against raw pointers, which nothing tracks. */
    add_row(bench_gpu_label, "launch axpy_f32, 2 own buffers on their stream (hazard rule)",
            "dls_launch, raw pointers", dls_launch_axpy_ptr, dls_launch_axpy_buf, cuda_drain, &c, launch_batch);
    /* A crossing at every launch: two wrapped streams take turns writing y. */
    add_row(bench_gpu_label, "axpy_f32 alternating between 2 streams on one y (a crossing each)",
            "cuEventRecord + cuStreamWaitEvent + cuLaunchKernel", raw_launch_axpy_alternate,
            dls_launch_axpy_alternate, cuda_drain, &c, launch_batch);
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
  uncached_rows(&c, "");
  step_rows(&c, "");
  /* The same rows against the raw sequence with the capture-state questions in it: what is left is dlstream's
   * own bookkeeping. */
  if (cu.capture_info_v3 != NULL || cu.cuStreamGetCaptureInfo != NULL) {
    add_row(bench_gpu_label, "event record+wait (anchor asks the capture state as dlstream does)",
            "cuStreamGetCaptureInfo+cuEventRecord+cuStreamGetCaptureInfo+cuStreamWaitEvent", raw_record_wait_asking,
            dls_record_wait, cuda_drain, &c, 2000);
    c.ask = true;
    add_row(bench_gpu_label, "alloc+free 1 MiB, stream-ordered (anchor asks the capture state as dlstream does)",
            "cuStreamGetCaptureInfo+cuMemAllocAsync+cuStreamGetCaptureInfo+cuMemFreeAsync", raw_alloc_free,
            dls_alloc_free, cuda_drain, &c, 1000);
    add_row(bench_gpu_label, "alloc+use on 2nd stream+free 1 MiB (anchor asks the capture state as dlstream does)",
            "the raw sequence + 3 x cuStreamGetCaptureInfo", raw_alloc_use_free, dls_alloc_use_free, cuda_drain, &c,
            1000);
    if (c.raw_axpy != NULL)
      add_row(bench_gpu_label,
              "axpy_f32 alternating between 2 streams on one y (a crossing each; anchor asks the capture state as "
              "dlstream does)",
              "cuStreamGetCaptureInfo + cuEventRecord + cuStreamWaitEvent + cuLaunchKernel", raw_launch_axpy_alternate,
              dls_launch_axpy_alternate, cuda_drain, &c, launch_batch);
    c.ask = false;
  }
  /* The same on streams dlstream made (dls_stream_create), as C code of its own uses: a wrapped stream may
   * be put into a capture by its framework at any time, so each alloc, free and record on one asks the
   * driver for its capture state; a stream dlstream made is asked only while a capture is known. */
  cuda_use_set(&c, true);
  add_row(bench_gpu_label, "alloc+free 1 MiB, stream-ordered, dlstream's own stream", "cuMemAllocAsync+cuMemFreeAsync",
          raw_alloc_free, dls_alloc_free, cuda_drain, &c, 1000);
  add_row(bench_gpu_label, "alloc+use on 2nd stream+free 1 MiB, dlstream's own streams",
          "cuMemAllocAsync+cuEventRecord+cuStreamWaitEvent+cuMemFreeAsync", raw_alloc_use_free, dls_alloc_use_free,
          cuda_drain, &c, 1000);
  add_row(bench_gpu_label, "event record+wait, dlstream's own streams", "cuEventRecord+cuStreamWaitEvent",
          raw_record_wait, dls_record_wait, cuda_drain, &c, 2000);
  uncached_rows(&c, ", dlstream's own streams");
  step_rows(&c, ", dlstream's own streams");
  if (kernels) {
    /* The hazard rule's two rows again on streams dlstream made, with buffers allocated on os1: no capture-state
     * question to the driver (see above), so what is left is the rule's own bookkeeping. */
    add_row(bench_gpu_label, "launch axpy_f32, 2 own buffers on their stream, dlstream's own stream (hazard rule)",
            "dls_launch, raw pointers", dls_launch_axpy_ptr, dls_launch_axpy_buf, cuda_drain, &c, launch_batch);
    add_row(bench_gpu_label, "axpy_f32 alternating between 2 streams on one y, dlstream's own streams (a crossing each)",
            "cuEventRecord + cuStreamWaitEvent + cuLaunchKernel", raw_launch_axpy_alternate,
            dls_launch_axpy_alternate, cuda_drain, &c, launch_batch);
  }
  cuda_use_set(&c, false);
  if (kernels)
    held_rows(&c);
  run_groups(c.device, c.ctx, kernels);
  static const size_t sizes[] = {(size_t)4 << 10, (size_t)64 << 10, (size_t)1 << 20, (size_t)16 << 20,
                                 (size_t)256 << 20, (size_t)1 << 30};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char op[96];
    c.bytes = sizes[i];
    if (sizes[i] >= ((size_t)1 << 20))
      snprintf(op, sizeof op, "scaling: alloc+free %zu MiB, stream-ordered", sizes[i] >> 20);
    else
      snprintf(op, sizeof op, "scaling: alloc+free %zu KiB, stream-ordered", sizes[i] >> 10);
    add_row(bench_gpu_label, op, "cuMemAllocAsync+cuMemFreeAsync", raw_alloc_free, dls_alloc_free, cuda_drain, &c, 500);
  }

  cuda_drain(&c);
  dls_buffer_free(c.bx);
  dls_buffer_free(c.by);
  dls_buffer_free(c.obx);
  dls_buffer_free(c.oby);
  dls_buffer_free(c.bx2);
  dls_buffer_free(c.by2);
  dls_buffer_free(c.obx2);
  dls_buffer_free(c.oby2);
  for (int i = 0; i < 4; i++) {
    dls_buffer_free(c.tb[i]);
    dls_buffer_free(c.otb[i]);
  }
  dls_event_destroy(c.dev_ev);
  dls_stream_destroy(c.ds1);
  dls_stream_destroy(c.ds2);
  dls_stream_destroy(c.os1);
  dls_stream_destroy(c.os2);
  dls_shutdown();
  cu.cuCtxSetCurrent(c.ctx);
  if (mod != NULL)
    cu.cuModuleUnload(mod);
  cu.cuMemFree(c.x);
  cu.cuMemFree(c.y);
  cu.cuEventDestroy(c.ev);
  cu.cuEventDestroy(c.ev2[0]);
  cu.cuEventDestroy(c.ev2[1]);
  cu.cuStreamDestroy(c.s1);
  cu.cuStreamDestroy(c.s2);
  cu.cuDevicePrimaryCtxRelease(cudev);
  return NULL;
}
