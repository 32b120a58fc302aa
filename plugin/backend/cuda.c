/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA backend: libcuda.so.1 loaded with dlopen, entry points from cuGetProcAddress, primary contexts, pooled memory.
 *
 * No toolkit is needed: the driver types come from cuda_driver.h. Every
 * method runs in the device's primary context (the one PyTorch, CuPy and
 * the runtime API share), so their streams and pointers work here. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda_driver.h"
#include "core/error.h"

#ifdef DLS_HAVE_CUDA_KERNELS
/* The built-in kernels' fatbin, embedded by cmake/DlsCudaKernels.cmake. */
extern const unsigned char dls__cuda_kernels_fatbin[];
extern const size_t dls__cuda_kernels_fatbin_size;
#endif

/* ---- the driver ---- */

typedef struct dls__cuda_api {
#define DLS__CUDA_API_FIELD(name, version, params) dls__PFN_##name name;
  DLS__CUDA_REQUIRED_SYMBOLS(DLS__CUDA_API_FIELD)
  DLS__CUDA_OPTIONAL_SYMBOLS(DLS__CUDA_API_FIELD)
#undef DLS__CUDA_API_FIELD
} dls__cuda_api;

static dls__cuda_api cu;

static const char *const dls__cuda_builtin_names[] = {"dls_fill",         "dls_axpy_f32", "dls_axpy_f64",
                                                      "dls_copy_strided", "dls_spin",     "dls_latch",
                                                      "dls_empty"};
#define DLS__CUDA_NBUILTINS (sizeof dls__cuda_builtin_names / sizeof dls__cuda_builtin_names[0])

typedef struct dls__cuda_device {
  pthread_mutex_t mu;     /* first use, the built-in module, shutdown */
  _Atomic int ready;      /* 1 once the primary context is retained */
  dls__CUdevice cudev;
  dls__CUcontext ctx;     /* the primary context, retained */
  dls__CUmemoryPool pool; /* NULL: plain cuMemAlloc (no pool support, or debug) */
  int cc_major, cc_minor;
  dls__CUmodule builtins; /* the embedded fatbin, loaded on first use */
  dls__CUfunction builtin_fns[DLS__CUDA_NBUILTINS];
} dls__cuda_device;

/* Set once by dls__cuda_load (pthread_once), read-only afterwards. */
static pthread_once_t dls__cuda_once = PTHREAD_ONCE_INIT;
static dls_status_t dls__cuda_load_status = DLS_ERR_UNAVAILABLE;
static char dls__cuda_load_message[512];
static int dls__cuda_driver_version;
static int dls__cuda_ndev;
static dls__cuda_device *dls__cuda_devs;
static bool dls__cuda_debug_alloc;
static dls__PFN_cuGetProcAddress_v12000 dls__cuda_gpa2;
static dls__PFN_cuGetProcAddress_v11030 dls__cuda_gpa1;

/* ---- errors ---- */

static const char *dls__cuda_error_name(dls__CUresult r) {
  const char *s = NULL;
  if (cu.cuGetErrorName != NULL && cu.cuGetErrorName(r, &s) == DLS__CUDA_SUCCESS && s != NULL)
    return s;
  return "unrecognized CUresult";
}

static const char *dls__cuda_error_string(dls__CUresult r) {
  const char *s = NULL;
  if (cu.cuGetErrorString != NULL && cu.cuGetErrorString(r, &s) == DLS__CUDA_SUCCESS && s != NULL)
    return s;
  return "no description";
}

static dls_status_t dls__cuda_status(dls__CUresult r) {
  switch (r) {
  case DLS__CUDA_ERROR_OUT_OF_MEMORY: return DLS_ERR_OUT_OF_MEMORY;
  case DLS__CUDA_ERROR_INVALID_VALUE: return DLS_ERR_INVALID_ARGUMENT;
  case DLS__CUDA_ERROR_INVALID_DEVICE: return DLS_ERR_INVALID_DEVICE;
  case DLS__CUDA_ERROR_NOT_SUPPORTED: return DLS_ERR_NOT_SUPPORTED;
  default: return DLS_ERR_BACKEND;
  }
}

static dls_status_t dls__cuda_vfail(dls_status_t status, dls__CUresult r, int dev, const char *hint, const char *fmt,
                                    va_list ap) DLS__PRINTF(5, 0);
static dls_status_t dls__cuda_vfail(dls_status_t status, dls__CUresult r, int dev, const char *hint, const char *fmt,
                                    va_list ap) {
  char what[256];
  vsnprintf(what, sizeof what, fmt, ap);
  return dls__fail(status, "%s on cuda:%d: %s (%s)%s%s", what, dev, dls__cuda_error_name(r), dls__cuda_error_string(r),
                   hint != NULL ? ": " : "", hint != NULL ? hint : "");
}

/* "<driver call(args)> on cuda:N: CUDA_ERROR_X (description)", with the
 * status that fits the driver's code. */
DLS__PRINTF(3, 4)
static dls_status_t dls__cuda_fail(dls__CUresult r, int dev, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dls_status_t st = dls__cuda_vfail(dls__cuda_status(r), r, dev, NULL, fmt, ap);
  va_end(ap);
  return st;
}

/* The same with a status the caller picks and a hint after the driver's words. */
DLS__PRINTF(5, 6)
static dls_status_t dls__cuda_fail_hint(dls_status_t status, dls__CUresult r, int dev, const char *hint,
                                        const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dls_status_t st = dls__cuda_vfail(status, r, dev, hint, fmt, ap);
  va_end(ap);
  return st;
}

/* ---- loading ---- */

DLS__PRINTF(2, 3)
static void dls__cuda_unavailable(void *lib, const char *fmt, ...) {
  int n = snprintf(dls__cuda_load_message, sizeof dls__cuda_load_message, "cuda backend unavailable: ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dls__cuda_load_message + n, sizeof dls__cuda_load_message - (size_t)n, fmt, ap);
  va_end(ap);
  dls__cuda_load_status = DLS_ERR_UNAVAILABLE;
  memset(&cu, 0, sizeof cu);
  if (lib != NULL)
    dlclose(lib);
}

/* Asks the driver for `name` at `version`, clamped to the driver's own
 * version: the driver refuses versions newer than itself, and an older one
 * still yields the ABI we declared as long as it is not older than the
 * entry point (then the symbol is simply missing). */
static void *dls__cuda_resolve(const char *name, int version, dls__CUresult *out_result) {
  int v = dls__cuda_driver_version != 0 && version > dls__cuda_driver_version ? dls__cuda_driver_version : version;
  void *fn = NULL;
  dls__CUresult r;
  if (dls__cuda_gpa2 != NULL) {
    dls__CUdriverProcAddressQueryResult found = DLS__CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    r = dls__cuda_gpa2(name, &fn, v, DLS__CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found);
    if (found != DLS__CU_GET_PROC_ADDRESS_SUCCESS)
      fn = NULL;
  } else {
    r = dls__cuda_gpa1(name, &fn, v, DLS__CU_GET_PROC_ADDRESS_LEGACY_STREAM);
  }
  if (out_result != NULL)
    *out_result = r;
  return r == DLS__CUDA_SUCCESS ? fn : NULL;
}

static void dls__cuda_load(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char *why = dlerror();
    dls__cuda_unavailable(NULL,
                          "libcuda.so.1 not found (dlopen: %s). Install the NVIDIA driver, or use the CPU backend "
                          "(kDLCPU).",
                          why != NULL ? why : "no reason given");
    return;
  }
  /* The only two symbols taken by name; everything else is versioned. */
  dls__cuda_gpa2 = (dls__PFN_cuGetProcAddress_v12000)dlsym(lib, "cuGetProcAddress_v2");
  if (dls__cuda_gpa2 == NULL)
    dls__cuda_gpa1 = (dls__PFN_cuGetProcAddress_v11030)dlsym(lib, "cuGetProcAddress");
  if (dls__cuda_gpa2 == NULL && dls__cuda_gpa1 == NULL) {
    dls__cuda_unavailable(lib,
                          "libcuda.so.1 has no cuGetProcAddress: the NVIDIA driver is older than CUDA 11.3. Update "
                          "the driver, or use the CPU backend (kDLCPU).");
    return;
  }
  dls__CUresult r = DLS__CUDA_SUCCESS;
  cu.cuDriverGetVersion = (dls__PFN_cuDriverGetVersion)dls__cuda_resolve("cuDriverGetVersion", 2020, &r);
  if (cu.cuDriverGetVersion != NULL)
    r = cu.cuDriverGetVersion(&dls__cuda_driver_version);
  if (r == DLS__CUDA_ERROR_STUB_LIBRARY) {
    dls__cuda_unavailable(lib,
                          "libcuda.so.1 is the CUDA toolkit's stub library, not the NVIDIA driver "
                          "(CUDA_ERROR_STUB_LIBRARY). Remove the toolkit's stubs directory from LD_LIBRARY_PATH, "
                          "install the driver, or use the CPU backend (kDLCPU).");
    return;
  }
  if (cu.cuDriverGetVersion == NULL || r != DLS__CUDA_SUCCESS || dls__cuda_driver_version <= 0) {
    dls__cuda_unavailable(lib,
                          "libcuda.so.1 does not answer cuDriverGetVersion (CUresult %u); the NVIDIA driver "
                          "installation looks broken. Check it with nvidia-smi, or use the CPU backend (kDLCPU).",
                          r);
    return;
  }
  const int dv_major = dls__cuda_driver_version / 1000, dv_minor = dls__cuda_driver_version % 1000 / 10;
#define DLS__CUDA_RESOLVE_REQUIRED(name, version, params)                                                     \
  cu.name = (dls__PFN_##name)dls__cuda_resolve(#name, version, NULL);                                         \
  if (cu.name == NULL) {                                                                                      \
    dls__cuda_unavailable(lib,                                                                                \
                          "the NVIDIA driver (CUDA %d.%d) lacks " #name " (ABI of CUDA %d.%d). Update the "   \
                          "driver, or use the CPU backend (kDLCPU).",                                         \
                          dv_major, dv_minor, (version) / 1000, (version) % 1000 / 10);                       \
    return;                                                                                                   \
  }
  DLS__CUDA_REQUIRED_SYMBOLS(DLS__CUDA_RESOLVE_REQUIRED)
#undef DLS__CUDA_RESOLVE_REQUIRED
#define DLS__CUDA_RESOLVE_OPTIONAL(name, version, params) \
  cu.name = (dls__PFN_##name)dls__cuda_resolve(#name, version, NULL);
  DLS__CUDA_OPTIONAL_SYMBOLS(DLS__CUDA_RESOLVE_OPTIONAL)
#undef DLS__CUDA_RESOLVE_OPTIONAL

  r = cu.cuInit(0);
  if (r == DLS__CUDA_ERROR_NO_DEVICE) {
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    dls__cuda_unavailable(lib,
                          "no CUDA device is visible (cuInit: CUDA_ERROR_NO_DEVICE; CUDA_VISIBLE_DEVICES=%s). Check "
                          "nvidia-smi, or use the CPU backend (kDLCPU).",
                          vis != NULL ? vis : "(unset)");
    return;
  }
  if (r == DLS__CUDA_ERROR_STUB_LIBRARY) {
    dls__cuda_unavailable(lib,
                          "libcuda.so.1 is the CUDA toolkit's stub library, not the NVIDIA driver (cuInit: "
                          "CUDA_ERROR_STUB_LIBRARY). Remove the stubs directory from LD_LIBRARY_PATH, or install "
                          "the driver.");
    return;
  }
  if (r != DLS__CUDA_SUCCESS) {
    dls__cuda_unavailable(lib,
                          "cuInit failed with %s (%s), driver CUDA %d.%d. Check the NVIDIA driver with nvidia-smi, "
                          "or use the CPU backend (kDLCPU).",
                          dls__cuda_error_name(r), dls__cuda_error_string(r), dv_major, dv_minor);
    return;
  }
  int n = 0;
  r = cu.cuDeviceGetCount(&n);
  if (r != DLS__CUDA_SUCCESS || n <= 0) {
    dls__cuda_unavailable(lib, "no CUDA device is visible (cuDeviceGetCount: %s, count %d). Check nvidia-smi and "
                               "CUDA_VISIBLE_DEVICES, or use the CPU backend (kDLCPU).",
                          dls__cuda_error_name(r), n);
    return;
  }
  dls__cuda_devs = calloc((size_t)n, sizeof *dls__cuda_devs);
  if (dls__cuda_devs == NULL) {
    dls__cuda_unavailable(lib, "out of host memory for %d device records", n);
    return;
  }
  for (int i = 0; i < n; i++)
    pthread_mutex_init(&dls__cuda_devs[i].mu, NULL);
  const char *dbg = getenv("DLSTREAM_DEBUG_ALLOC");
  dls__cuda_debug_alloc = dbg != NULL && dbg[0] != '\0' && strcmp(dbg, "0") != 0;
  dls__cuda_ndev = n;
  dls__cuda_load_status = DLS_OK;
  /* The library stays loaded for the life of the process. */
}

static dls_status_t dls__cuda_probe(void) {
  pthread_once(&dls__cuda_once, dls__cuda_load);
  if (DLS__LIKELY(dls__cuda_load_status == DLS_OK))
    return DLS_OK;
  return dls__fail(dls__cuda_load_status, "%s", dls__cuda_load_message);
}

static dls_status_t dls__cuda_device_count(int *out_count) {
  pthread_once(&dls__cuda_once, dls__cuda_load);
  *out_count = dls__cuda_load_status == DLS_OK ? dls__cuda_ndev : 0;
  return DLS_OK;
}

/* ---- devices and contexts ---- */

/* Makes a stream-ordered pool that keeps freed memory cached (release
 * threshold UINT64_MAX). NULL where pools are unsupported or fail: the
 * device then uses cuMemAlloc, which is always correct. Needs ctx current. */
static dls__CUmemoryPool dls__cuda_pool_create(dls__cuda_device *d, int dev) {
  int supported = 0;
  if (dls__cuda_debug_alloc || cu.cuMemPoolCreate == NULL || cu.cuMemPoolDestroy == NULL ||
      cu.cuMemPoolSetAttribute == NULL || cu.cuMemAllocFromPoolAsync == NULL || cu.cuMemFreeAsync == NULL)
    return NULL;
  if (cu.cuDeviceGetAttribute(&supported, DLS__CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, d->cudev) !=
          DLS__CUDA_SUCCESS ||
      !supported)
    return NULL;
  dls__CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.alloc_type = DLS__CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handle_types = DLS__CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = DLS__CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = dev;
  dls__CUmemoryPool pool = NULL;
  if (cu.cuMemPoolCreate(&pool, (const struct CUmemPoolProps_st *)(const void *)&props) != DLS__CUDA_SUCCESS)
    return NULL;
  dls__cuuint64_t keep = UINT64_MAX;
  if (cu.cuMemPoolSetAttribute(pool, DLS__CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) != DLS__CUDA_SUCCESS) {
    cu.cuMemPoolDestroy(pool);
    return NULL;
  }
  return pool;
}

static dls_status_t dls__cuda_device_open(int dev, dls__cuda_device *d) {
  dls_status_t st = DLS_OK;
  pthread_mutex_lock(&d->mu);
  if (atomic_load_explicit(&d->ready, memory_order_relaxed))
    goto out;
  dls__CUresult r = cu.cuDeviceGet(&d->cudev, dev);
  if (r != DLS__CUDA_SUCCESS) {
    st = dls__cuda_fail(r, dev, "cuDeviceGet(ordinal=%d)", dev);
    goto out;
  }
  r = cu.cuDevicePrimaryCtxRetain(&d->ctx, d->cudev);
  if (r != DLS__CUDA_SUCCESS) {
    st = dls__cuda_fail(r, dev, "cuDevicePrimaryCtxRetain(device=%d)", dev);
    goto out;
  }
  /* Only messages use the compute capability: a failed query leaves sm_00. */
  if (cu.cuDeviceGetAttribute(&d->cc_major, DLS__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->cudev) !=
          DLS__CUDA_SUCCESS ||
      cu.cuDeviceGetAttribute(&d->cc_minor, DLS__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->cudev) !=
          DLS__CUDA_SUCCESS)
    d->cc_major = d->cc_minor = 0;
  /* The pool is made in the context; a failure here only means no pool. */
  dls__CUcontext prev = NULL;
  if (cu.cuCtxGetCurrent(&prev) == DLS__CUDA_SUCCESS && cu.cuCtxSetCurrent(d->ctx) == DLS__CUDA_SUCCESS) {
    d->pool = dls__cuda_pool_create(d, dev);
    cu.cuCtxSetCurrent(prev);
  }
  atomic_store_explicit(&d->ready, 1, memory_order_release);
out:
  pthread_mutex_unlock(&d->mu);
  return st;
}

static inline dls_status_t dls__cuda_device_get(int dev, dls__cuda_device **out) {
  if (DLS__UNLIKELY((unsigned)dev >= (unsigned)dls__cuda_ndev))
    return dls__fail(DLS_ERR_INVALID_DEVICE, "cuda:%d does not exist: %d CUDA device(s) visible", dev,
                     dls__cuda_ndev);
  dls__cuda_device *d = &dls__cuda_devs[dev];
  if (DLS__UNLIKELY(!atomic_load_explicit(&d->ready, memory_order_acquire)))
    DLS__TRY(dls__cuda_device_open(dev, d));
  *out = d;
  return DLS_OK;
}

/* Which context to put back when a call leaves. */
typedef struct dls__cuda_scope {
  dls__CUcontext prev;
  bool restore;
} dls__cuda_scope;

/* Makes the device's primary context current on this thread, only when it
 * is not already (one cuCtxGetCurrent on the fast path). A context someone
 * else made current (torch on another device) is put back by
 * dls__cuda_leave; a thread with none keeps ours, so its next call is cheap. */
static inline dls_status_t dls__cuda_enter(int dev, dls__cuda_device **out_d, dls__cuda_scope *sc) {
  dls__cuda_device *d = NULL;
  DLS__TRY(dls__cuda_device_get(dev, &d));
  *out_d = d;
  sc->restore = false;
  dls__CUcontext cur;
  dls__CUresult r = cu.cuCtxGetCurrent(&cur);
  if (DLS__UNLIKELY(r != DLS__CUDA_SUCCESS))
    return dls__cuda_fail(r, dev, "cuCtxGetCurrent()");
  if (DLS__LIKELY(cur == d->ctx))
    return DLS_OK;
  r = cu.cuCtxSetCurrent(d->ctx);
  if (DLS__UNLIKELY(r != DLS__CUDA_SUCCESS))
    return dls__cuda_fail(r, dev, "cuCtxSetCurrent(primary context %p)", (void *)d->ctx);
  sc->prev = cur;
  sc->restore = cur != NULL;
  return DLS_OK;
}

static inline void dls__cuda_leave(const dls__cuda_scope *sc) {
  /* Nothing to report if this fails: ours simply stays current. */
  if (DLS__UNLIKELY(sc->restore))
    cu.cuCtxSetCurrent(sc->prev);
}

/* Runs one driver call in the device's context and fails with its name. */
#define DLS__CUDA_CALL(dev, call, ...)                              \
  do {                                                              \
    dls__cuda_device *dls__d_;                                      \
    dls__cuda_scope dls__sc_;                                       \
    DLS__TRY(dls__cuda_enter((dev), &dls__d_, &dls__sc_));          \
    dls__CUresult dls__r_ = (call);                                 \
    dls__cuda_leave(&dls__sc_);                                     \
    if (DLS__UNLIKELY(dls__r_ != DLS__CUDA_SUCCESS))                \
      return dls__cuda_fail(dls__r_, (dev), __VA_ARGS__);           \
  } while (0)

static bool dls__cuda_special_stream(const void *stream) {
  return stream == NULL || stream == (void *)DLS__CU_STREAM_LEGACY || stream == (void *)DLS__CU_STREAM_PER_THREAD;
}

/* ---- streams ---- */

static dls_status_t dls__cuda_stream_create(int dev, unsigned flags, int priority, void **out_stream) {
  unsigned cuflags = (flags & DLS_STREAM_BLOCKING) ? DLS__CU_STREAM_DEFAULT : DLS__CU_STREAM_NON_BLOCKING;
  dls__CUstream s = NULL;
  DLS__CUDA_CALL(dev, cu.cuStreamCreateWithPriority(&s, cuflags, priority),
                 "cuStreamCreateWithPriority(flags=%#x, priority=%d)", cuflags, priority);
  *out_stream = s;
  return DLS_OK;
}

static dls_status_t dls__cuda_stream_destroy(int dev, void *stream) {
  if (dls__cuda_special_stream(stream))
    return DLS_OK;
  /* Returns at once; the driver frees the stream after its queued work. */
  DLS__CUDA_CALL(dev, cu.cuStreamDestroy(stream), "cuStreamDestroy(stream=%p)", stream);
  return DLS_OK;
}

static dls_status_t dls__cuda_stream_default(int dev, int kind, void **out_stream) {
  dls__cuda_device *d;
  DLS__TRY(dls__cuda_device_get(dev, &d));
  if (kind == DLS__DEFAULT_LEGACY) {
    *out_stream = NULL; /* the legacy stream of the current context */
    return DLS_OK;
  }
  if (kind == DLS__DEFAULT_PER_THREAD) {
    *out_stream = (void *)DLS__CU_STREAM_PER_THREAD;
    return DLS_OK;
  }
  return dls__fail(DLS_ERR_INVALID_ARGUMENT, "cuda default stream kind %d: expected %d (legacy) or %d (per-thread)",
                   kind, DLS__DEFAULT_LEGACY, DLS__DEFAULT_PER_THREAD);
}

/* A foreign stream must live in the device's primary context: a stream of
 * another device or of a private context would run our work elsewhere. */
static dls_status_t dls__cuda_stream_check(int dev, void *stream) {
  if (dls__cuda_special_stream(stream))
    return DLS_OK; /* they name the current context's streams, which we set */
  dls__CUcontext ctx = NULL;
  DLS__CUDA_CALL(dev, cu.cuStreamGetCtx(stream, &ctx), "cuStreamGetCtx(stream=%p)", stream);
  dls__cuda_device *d = &dls__cuda_devs[dev];
  if (ctx == d->ctx)
    return DLS_OK;
  int owner = -1;
  dls__CUdevice sdev;
  if (cu.cuStreamGetDevice != NULL && cu.cuStreamGetDevice(stream, &sdev) == DLS__CUDA_SUCCESS) {
    owner = sdev;
  } else {
    for (int i = 0; i < dls__cuda_ndev && owner < 0; i++)
      if (atomic_load_explicit(&dls__cuda_devs[i].ready, memory_order_acquire) && dls__cuda_devs[i].ctx == ctx)
        owner = i;
  }
  if (owner >= 0 && owner != dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE,
                     "stream %p belongs to cuda:%d (context %p), not to cuda:%d (primary context %p)", stream, owner,
                     (void *)ctx, dev, (void *)d->ctx);
  if (owner == dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE,
                     "stream %p belongs to a private context %p on cuda:%d, not to its primary context %p (the one "
                     "PyTorch, CuPy and the runtime API share); create the stream in the primary context",
                     stream, (void *)ctx, dev, (void *)d->ctx);
  return dls__fail(DLS_ERR_INVALID_DEVICE,
                   "stream %p belongs to context %p, which is not cuda:%d's primary context %p (another device, or "
                   "a private context)",
                   stream, (void *)ctx, dev, (void *)d->ctx);
}

static dls_status_t dls__cuda_stream_synchronize(int dev, void *stream) {
  DLS__CUDA_CALL(dev, cu.cuStreamSynchronize(stream), "cuStreamSynchronize(stream=%p)", stream);
  return DLS_OK;
}

static dls_status_t dls__cuda_stream_query(int dev, void *stream, int *out_idle) {
  dls__cuda_device *d;
  dls__cuda_scope sc;
  DLS__TRY(dls__cuda_enter(dev, &d, &sc));
  dls__CUresult r = cu.cuStreamQuery(stream);
  dls__cuda_leave(&sc);
  if (r == DLS__CUDA_SUCCESS || r == DLS__CUDA_ERROR_NOT_READY) {
    *out_idle = r == DLS__CUDA_SUCCESS;
    return DLS_OK;
  }
  return dls__cuda_fail(r, dev, "cuStreamQuery(stream=%p)", stream);
}

static dls_status_t dls__cuda_stream_wait_event(int dev, void *stream, void *event) {
  DLS__CUDA_CALL(dev, cu.cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent(stream=%p, event=%p)", stream,
                 event);
  return DLS_OK;
}

static dls_status_t dls__cuda_stream_priority_range(int dev, int *out_least, int *out_greatest) {
  DLS__CUDA_CALL(dev, cu.cuCtxGetStreamPriorityRange(out_least, out_greatest), "cuCtxGetStreamPriorityRange()");
  return DLS_OK;
}

static dls_status_t dls__cuda_host_callback(int dev, void *stream, dls_host_fn fn, void *user_data) {
  DLS__CUDA_CALL(dev, cu.cuLaunchHostFunc(stream, fn, user_data), "cuLaunchHostFunc(stream=%p, fn=%p)", stream,
                 (void *)(uintptr_t)fn);
  return DLS_OK;
}

/* ---- events ---- */

static dls_status_t dls__cuda_event_create(int dev, unsigned flags, void **out_event) {
  unsigned cuflags = (flags & DLS_EVENT_TIMING) ? DLS__CU_EVENT_DEFAULT : DLS__CU_EVENT_DISABLE_TIMING;
  if (flags & DLS_EVENT_BLOCKING_SYNC)
    cuflags |= DLS__CU_EVENT_BLOCKING_SYNC;
  dls__CUevent e = NULL;
  DLS__CUDA_CALL(dev, cu.cuEventCreate(&e, cuflags), "cuEventCreate(flags=%#x)", cuflags);
  *out_event = e;
  return DLS_OK;
}

static dls_status_t dls__cuda_event_destroy(int dev, void *event) {
  if (event == NULL)
    return DLS_OK;
  DLS__CUDA_CALL(dev, cu.cuEventDestroy(event), "cuEventDestroy(event=%p)", event);
  return DLS_OK;
}

/* The driver cannot name an event's device; a query at least rejects a
 * handle that is not a live event. */
static dls_status_t dls__cuda_event_check(int dev, void *event) {
  dls__cuda_device *d;
  dls__cuda_scope sc;
  if (event == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "event NULL is not a CUevent");
  DLS__TRY(dls__cuda_enter(dev, &d, &sc));
  dls__CUresult r = cu.cuEventQuery(event);
  dls__cuda_leave(&sc);
  if (r == DLS__CUDA_SUCCESS || r == DLS__CUDA_ERROR_NOT_READY)
    return DLS_OK;
  return dls__cuda_fail_hint(DLS_ERR_INVALID_ARGUMENT, r, dev, "not a usable CUevent", "cuEventQuery(event=%p)", event);
}

static dls_status_t dls__cuda_event_record(int dev, void *event, void *stream) {
  DLS__CUDA_CALL(dev, cu.cuEventRecord(event, stream), "cuEventRecord(event=%p, stream=%p)", event, stream);
  return DLS_OK;
}

static dls_status_t dls__cuda_event_query(int dev, void *event, int *out_complete) {
  dls__cuda_device *d;
  dls__cuda_scope sc;
  DLS__TRY(dls__cuda_enter(dev, &d, &sc));
  dls__CUresult r = cu.cuEventQuery(event);
  dls__cuda_leave(&sc);
  if (r == DLS__CUDA_SUCCESS || r == DLS__CUDA_ERROR_NOT_READY) {
    *out_complete = r == DLS__CUDA_SUCCESS;
    return DLS_OK;
  }
  return dls__cuda_fail(r, dev, "cuEventQuery(event=%p)", event);
}

static dls_status_t dls__cuda_event_synchronize(int dev, void *event) {
  DLS__CUDA_CALL(dev, cu.cuEventSynchronize(event), "cuEventSynchronize(event=%p)", event);
  return DLS_OK;
}

static dls_status_t dls__cuda_event_elapsed_ms(int dev, void *start, void *end, float *out_ms) {
  dls__cuda_device *d;
  dls__cuda_scope sc;
  DLS__TRY(dls__cuda_enter(dev, &d, &sc));
  dls__CUresult r = cu.cuEventElapsedTime(out_ms, start, end);
  dls__cuda_leave(&sc);
  if (DLS__LIKELY(r == DLS__CUDA_SUCCESS))
    return DLS_OK;
  if (r == DLS__CUDA_ERROR_INVALID_HANDLE)
    return dls__cuda_fail_hint(DLS_ERR_STATE, r, dev,
                               "both events must be created with DLS_EVENT_TIMING and recorded before their times "
                               "can be compared",
                               "cuEventElapsedTime(start=%p, end=%p)", start, end);
  if (r == DLS__CUDA_ERROR_NOT_READY)
    return dls__cuda_fail_hint(DLS_ERR_STATE, r, dev,
                               "a record has not completed yet; synchronize the end event first",
                               "cuEventElapsedTime(start=%p, end=%p)", start, end);
  return dls__cuda_fail(r, dev, "cuEventElapsedTime(start=%p, end=%p)", start, end);
}

/* ---- memory ---- */

static dls_status_t dls__cuda_mem_alloc(int dev, size_t size, void *stream, void **out_ptr) {
  *out_ptr = NULL;
  if (size == 0)
    return DLS_OK;
  dls__cuda_device *d;
  dls__cuda_scope sc;
  DLS__TRY(dls__cuda_enter(dev, &d, &sc));
  dls__CUdeviceptr p = 0;
  dls__CUresult r;
  if (d->pool != NULL)
    r = cu.cuMemAllocFromPoolAsync(&p, size, d->pool, stream);
  else
    r = cu.cuMemAlloc(&p, size); /* synchronous: usable on every stream at once */
  dls__cuda_leave(&sc);
  if (DLS__UNLIKELY(r != DLS__CUDA_SUCCESS)) {
    if (d->pool != NULL)
      return dls__cuda_fail(r, dev, "cuMemAllocFromPoolAsync(size=%zu, stream=%p)", size, stream);
    return dls__cuda_fail(r, dev, "cuMemAlloc(size=%zu)", size);
  }
  *out_ptr = (void *)(uintptr_t)p;
  return DLS_OK;
}

/* Without a pool, and in debug mode, the stream is synchronized first:
 * cuMemFree does not wait for work queued on `stream`. Debug mode poisons
 * the memory with 0xDB in stream order, so a late reader sees garbage and
 * compute-sanitizer sees a use after free. */
static dls_status_t dls__cuda_mem_free(int dev, void *ptr, void *stream) {
  if (ptr == NULL)
    return DLS_OK;
  dls__cuda_device *d;
  dls__cuda_scope sc;
  DLS__TRY(dls__cuda_enter(dev, &d, &sc));
  dls__CUdeviceptr p = (dls__CUdeviceptr)(uintptr_t)ptr;
  dls__CUresult r;
  const char *what;
  if (d->pool != NULL) {
    what = "cuMemFreeAsync";
    r = cu.cuMemFreeAsync(p, stream);
  } else {
    r = DLS__CUDA_SUCCESS;
    what = "cuMemsetD8Async";
    if (dls__cuda_debug_alloc) {
      dls__CUdeviceptr base = 0;
      size_t size = 0;
      r = cu.cuMemGetAddressRange(&base, &size, p);
      if (r == DLS__CUDA_SUCCESS)
        r = cu.cuMemsetD8Async(base, 0xDB, size, stream);
      else
        what = "cuMemGetAddressRange";
    }
    if (r == DLS__CUDA_SUCCESS) {
      what = "cuStreamSynchronize";
      r = cu.cuStreamSynchronize(stream);
    }
    if (r == DLS__CUDA_SUCCESS) {
      what = "cuMemFree";
      r = cu.cuMemFree(p);
    }
  }
  dls__cuda_leave(&sc);
  if (DLS__UNLIKELY(r != DLS__CUDA_SUCCESS))
    return dls__cuda_fail(r, dev, "%s freeing ptr=%p on stream=%p", what, ptr, stream);
  return DLS_OK;
}

static dls_status_t dls__cuda_memcpy_async(int dev, void *dst, const void *src, size_t size, void *stream) {
  if (size == 0)
    return DLS_OK;
  /* Unified addressing: the driver tells host from device by the address. */
  DLS__CUDA_CALL(dev,
                 cu.cuMemcpyAsync((dls__CUdeviceptr)(uintptr_t)dst, (dls__CUdeviceptr)(uintptr_t)src, size, stream),
                 "cuMemcpyAsync(dst=%p, src=%p, size=%zu, stream=%p)", dst, src, size, stream);
  return DLS_OK;
}

static dls_status_t dls__cuda_host_mapped_alloc(int dev, size_t size, void **out_host, void **out_device) {
  *out_host = NULL;
  *out_device = NULL;
  if (size == 0)
    return DLS_OK;
  dls__cuda_device *d;
  dls__cuda_scope sc;
  DLS__TRY(dls__cuda_enter(dev, &d, &sc));
  void *host = NULL;
  dls__CUdeviceptr dptr = 0;
  dls_status_t st = DLS_OK;
  dls__CUresult r = cu.cuMemHostAlloc(&host, size, DLS__CU_MEMHOSTALLOC_DEVICEMAP | DLS__CU_MEMHOSTALLOC_PORTABLE);
  if (r != DLS__CUDA_SUCCESS) {
    st = dls__cuda_fail(r, dev, "cuMemHostAlloc(size=%zu, flags=DEVICEMAP|PORTABLE)", size);
  } else {
    r = cu.cuMemHostGetDevicePointer(&dptr, host, 0);
    if (r != DLS__CUDA_SUCCESS) {
      st = dls__cuda_fail(r, dev, "cuMemHostGetDevicePointer(host=%p)", host);
      cu.cuMemFreeHost(host);
    }
  }
  dls__cuda_leave(&sc);
  if (st != DLS_OK)
    return st;
  memset(host, 0, size);
  *out_host = host;
  *out_device = (void *)(uintptr_t)dptr;
  return DLS_OK;
}

static dls_status_t dls__cuda_host_mapped_free(int dev, void *host) {
  if (host == NULL)
    return DLS_OK;
  DLS__CUDA_CALL(dev, cu.cuMemFreeHost(host), "cuMemFreeHost(host=%p)", host);
  return DLS_OK;
}

/* ---- code ---- */

/* Lazy loading (the default since CUDA 12.2) defers a kernel's loading to
 * its first launch, and loading may wait for the whole context to go idle.
 * A latch held open by the host never lets it: a first launch on another
 * stream would hang until the latch times out. So every function is loaded
 * when it is looked up, before anything can be waiting on the host. */
static dls__CUresult dls__cuda_func_load(dls__CUfunction f) {
  if (cu.cuFuncLoad != NULL)
    return cu.cuFuncLoad(f);
  int regs = 0; /* older drivers: an attribute query loads the function */
  return cu.cuFuncGetAttribute(&regs, DLS__CU_FUNC_ATTRIBUTE_NUM_REGS, f);
}

/* cuModuleLoadData trusts the image: a PTX text without its NUL would be
 * read past its end, so it is checked here. */
static dls_status_t dls__cuda_image_check(const void *image, size_t size) {
  if (image == NULL || size == 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "module image %p of %zu bytes: no image", image, size);
  uint32_t magic = 0;
  if (size >= 4) {
    memcpy(&magic, image, 4);
    if (magic == DLS__CU_FATBIN_MAGIC || memcmp(image, DLS__CU_ELF_MAGIC, 4) == 0)
      return DLS_OK;
  }
  if (memchr(image, '\0', size) == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "module image of %zu bytes is neither a cubin (ELF) nor a fatbin, and as PTX it is not "
                     "NUL-terminated within its size",
                     size);
  return DLS_OK;
}

/* Loads an image in the device's context (caller entered it). */
static dls_status_t dls__cuda_load_image(int dev, dls__cuda_device *d, const void *image, size_t size,
                                         dls__CUmodule *out_module) {
  char log[2048];
  log[0] = '\0';
  dls__CUjit_option opts[2] = {DLS__CU_JIT_ERROR_LOG_BUFFER, DLS__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
  dls__CUresult r = cu.cuModuleLoadDataEx(out_module, image, 2, opts, vals);
  if (DLS__LIKELY(r == DLS__CUDA_SUCCESS))
    return DLS_OK;
  log[sizeof log - 1] = '\0';
  const char *why = NULL;
  dls_status_t st = dls__cuda_status(r);
  switch (r) {
  case DLS__CUDA_ERROR_INVALID_IMAGE:
  case DLS__CUDA_ERROR_INVALID_PTX:
  case DLS__CUDA_ERROR_INVALID_SOURCE:
    st = DLS_ERR_INVALID_ARGUMENT;
    why = "the image is not a valid cubin, fatbin or PTX";
    break;
  case DLS__CUDA_ERROR_NO_BINARY_FOR_GPU:
    st = DLS_ERR_NOT_SUPPORTED;
    why = "the image has neither code for this GPU nor PTX the driver can compile for it";
    break;
  case DLS__CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    st = DLS_ERR_NOT_SUPPORTED;
    why = "the PTX is newer than this driver: update the NVIDIA driver, or build with an older toolkit";
    break;
  case DLS__CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    st = DLS_ERR_NOT_SUPPORTED;
    why = "PTX needs the driver's JIT compiler (libnvidia-ptxjitcompiler), which is not installed";
    break;
  default:
    break;
  }
  char hint[sizeof log + 160];
  snprintf(hint, sizeof hint, "%s%s%s", why != NULL ? why : "", why != NULL && log[0] ? "; " : "",
           log[0] ? "JIT log: " : "");
  size_t used = strlen(hint);
  snprintf(hint + used, sizeof hint - used, "%s", log);
  return dls__cuda_fail_hint(st, r, dev, hint[0] ? hint : NULL, "cuModuleLoadData(image of %zu bytes, sm_%d%d)",
                             size, d->cc_major, d->cc_minor);
}

static dls_status_t dls__cuda_module_load(int dev, const void *image, size_t size, void **out_module) {
  DLS__TRY(dls__cuda_image_check(image, size));
  dls__cuda_device *d;
  dls__cuda_scope sc;
  DLS__TRY(dls__cuda_enter(dev, &d, &sc));
  dls__CUmodule m = NULL;
  dls_status_t st = dls__cuda_load_image(dev, d, image, size, &m);
  dls__cuda_leave(&sc);
  if (st == DLS_OK)
    *out_module = m;
  return st;
}

static dls_status_t dls__cuda_module_unload(int dev, void *module) {
  DLS__CUDA_CALL(dev, cu.cuModuleUnload(module), "cuModuleUnload(module=%p)", module);
  return DLS_OK;
}

static dls_status_t dls__cuda_module_function(int dev, void *module, const char *name, void **out_function) {
  dls__cuda_device *d;
  dls__cuda_scope sc;
  DLS__TRY(dls__cuda_enter(dev, &d, &sc));
  dls__CUfunction f = NULL;
  dls__CUresult r = cu.cuModuleGetFunction(&f, module, name);
  const char *what = "cuModuleGetFunction";
  if (r == DLS__CUDA_SUCCESS) {
    what = "cuFuncLoad";
    r = dls__cuda_func_load(f);
  }
  dls__cuda_leave(&sc);
  if (r == DLS__CUDA_ERROR_NOT_FOUND)
    return dls__fail(DLS_ERR_NOT_FOUND,
                     "no kernel named '%s' in module %p (a kernel is found by its unmangled name: declare it "
                     "extern \"C\")",
                     name, module);
  if (r != DLS__CUDA_SUCCESS)
    return dls__cuda_fail(r, dev, "%s(module=%p, name='%s')", what, module, name);
  *out_function = f;
  return DLS_OK;
}

static dls_status_t dls__cuda_builtin_function(int dev, const char *name, void **out_function) {
#ifndef DLS_HAVE_CUDA_KERNELS
  (void)dev;
  (void)name;
  (void)out_function;
  return dls__fail(DLS_ERR_UNAVAILABLE, "CUDA built-in kernels were not compiled in (nvcc was not found at build "
                                        "time; rebuild with nvcc on PATH)");
#else
  size_t k = 0;
  while (k < DLS__CUDA_NBUILTINS && strcmp(dls__cuda_builtin_names[k], name) != 0)
    k++;
  if (k == DLS__CUDA_NBUILTINS)
    return dls__fail(DLS_ERR_NOT_FOUND, "no CUDA built-in kernel named '%s'", name);
  dls__cuda_device *d;
  dls__cuda_scope sc;
  DLS__TRY(dls__cuda_enter(dev, &d, &sc));
  dls_status_t st = DLS_OK;
  pthread_mutex_lock(&d->mu);
  if (d->builtins == NULL) {
    /* All at once, so no later first use loads a kernel (see dls__cuda_func_load). */
    dls__CUmodule m = NULL;
    st = dls__cuda_load_image(dev, d, dls__cuda_kernels_fatbin, dls__cuda_kernels_fatbin_size, &m);
    for (size_t i = 0; st == DLS_OK && i < DLS__CUDA_NBUILTINS; i++) {
      dls__CUresult r = cu.cuModuleGetFunction(&d->builtin_fns[i], m, dls__cuda_builtin_names[i]);
      if (r == DLS__CUDA_SUCCESS)
        r = dls__cuda_func_load(d->builtin_fns[i]);
      if (r != DLS__CUDA_SUCCESS)
        st = dls__cuda_fail(r, dev, "loading built-in kernel '%s'", dls__cuda_builtin_names[i]);
    }
    if (st == DLS_OK) {
      d->builtins = m;
    } else {
      if (m != NULL)
        cu.cuModuleUnload(m);
      memset(d->builtin_fns, 0, sizeof d->builtin_fns);
    }
  }
  if (st == DLS_OK)
    *out_function = d->builtin_fns[k];
  pthread_mutex_unlock(&d->mu);
  dls__cuda_leave(&sc);
  return st;
#endif
}

/* The hot path: one cuCtxGetCurrent and the launch. `params` already is the
 * kernelParams array; the driver copies the values before returning. */
static dls_status_t dls__cuda_launch(int dev, void *function, void *stream, const dls_launch_config_t *c,
                                     void **params, const uint32_t *sizes, int nparams) {
  (void)sizes;
  (void)nparams;
  DLS__CUDA_CALL(dev,
                 cu.cuLaunchKernel(function, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1],
                                   c->block[2], c->shared_mem_bytes, stream, params, NULL),
                 "cuLaunchKernel(function=%p, grid=%ux%ux%u, block=%ux%ux%u, shared_mem_bytes=%u, stream=%p)",
                 function, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
                 c->shared_mem_bytes, stream);
  return DLS_OK;
}

/* ---- life ---- */

/* Unloads the built-ins, destroys the pools (memory still owed to a pool is
 * released by the driver once freed) and releases the primary contexts. The
 * library stays loaded, so a later probe and first use start afresh. */
static void dls__cuda_shutdown(void) {
  if (dls__cuda_load_status != DLS_OK)
    return;
  for (int i = 0; i < dls__cuda_ndev; i++) {
    dls__cuda_device *d = &dls__cuda_devs[i];
    pthread_mutex_lock(&d->mu);
    if (atomic_load_explicit(&d->ready, memory_order_relaxed)) {
      dls__CUcontext prev = NULL;
      cu.cuCtxGetCurrent(&prev);
      cu.cuCtxSetCurrent(d->ctx);
      if (d->builtins != NULL)
        cu.cuModuleUnload(d->builtins);
      if (d->pool != NULL)
        cu.cuMemPoolDestroy(d->pool);
      cu.cuCtxSetCurrent(prev);
      cu.cuDevicePrimaryCtxRelease(d->cudev);
      d->ctx = NULL;
      d->pool = NULL;
      d->builtins = NULL;
      memset(d->builtin_fns, 0, sizeof d->builtin_fns);
      atomic_store_explicit(&d->ready, 0, memory_order_release);
    }
    pthread_mutex_unlock(&d->mu);
  }
}

const dls__backend dls__cuda_backend = {
    .version = DLS__BACKEND_VERSION,
    .size = sizeof(dls__backend),
    .name = "cuda",
    .device_type = kDLCUDA,
    .probe = dls__cuda_probe,
    .device_count = dls__cuda_device_count,
    .shutdown = dls__cuda_shutdown,
    .stream_create = dls__cuda_stream_create,
    .stream_destroy = dls__cuda_stream_destroy,
    .stream_default = dls__cuda_stream_default,
    .stream_check = dls__cuda_stream_check,
    .stream_synchronize = dls__cuda_stream_synchronize,
    .stream_query = dls__cuda_stream_query,
    .stream_wait_event = dls__cuda_stream_wait_event,
    .stream_priority_range = dls__cuda_stream_priority_range,
    .host_callback = dls__cuda_host_callback,
    .event_create = dls__cuda_event_create,
    .event_destroy = dls__cuda_event_destroy,
    .event_check = dls__cuda_event_check,
    .event_record = dls__cuda_event_record,
    .event_query = dls__cuda_event_query,
    .event_synchronize = dls__cuda_event_synchronize,
    .event_elapsed_ms = dls__cuda_event_elapsed_ms,
    .mem_alloc = dls__cuda_mem_alloc,
    .mem_free = dls__cuda_mem_free,
    .memcpy_async = dls__cuda_memcpy_async,
    .host_mapped_alloc = dls__cuda_host_mapped_alloc,
    .host_mapped_free = dls__cuda_host_mapped_free,
    .module_load = dls__cuda_module_load,
    .module_unload = dls__cuda_module_unload,
    .module_function = dls__cuda_module_function,
    .builtin_function = dls__cuda_builtin_function,
    .host_function = NULL,
    .host_function_destroy = NULL,
    .launch = dls__cuda_launch,
};
