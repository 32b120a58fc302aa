/* SPDX-License-Identifier: Apache-2.0 */
/* The HIP-on-CUDA stand-in: a libamdhip64 look-alike whose every hip* entry point the HIP backend uses forwards to the
 * CUDA driver.
 *
 * Loaded by the HIP backend through DLSTREAM_HIP_LIBRARY=<this .so>, it
 * runs dlstream's HIP code path on an NVIDIA GPU: same streams, events,
 * pools, modules and graphs, real asynchronous hardware. It translates what
 * HIP numbers differently (hipError_t, device attributes, flags), maps
 * hipSetDevice/hipGetDevice onto the devices' primary contexts (so a HIP
 * stream is a CUstream of the primary context, as a CUDA framework's is),
 * and loads functions at lookup (CUDA's lazy loading would otherwise wait
 * for a held latch). It needs nothing at build time but dlstream's own
 * declarations, and libcuda.so.1 at run time.
 *
 * HOC_WITHOUT_POOLS (the _nopools build) leaves the pool entry points out,
 * as a runtime without pools would; DLS_HIP_ON_CUDA_NO_POOLS=1 at run time
 * makes the full build report that its devices lack pools. hipMallocAsync
 * and hipFreeAsync stay in both: capture needs them. Built for tests only. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda_driver.h"
#include "backend/gpu_pool_props.h"
#include "backend/hip_runtime_decls.h"

#define HOC_EXPORT __attribute__((visibility("default")))
#define HOC_MAX_DEVICES 64

/* Every export is declared from dlstream's HIP declarations, so a definition
 * below with another signature does not compile. */
#define HOC_DECLARE(version, name, params) HOC_EXPORT dls__hipError_t name params;
DLS__HIP_REQUIRED_SYMBOLS(HOC_DECLARE)
DLS__HIP_OPTIONAL_SYMBOLS(HOC_DECLARE)
DLS__HIP_NEWER_SYMBOLS(HOC_DECLARE)
#undef HOC_DECLARE
#define HOC_DECLARE_STRING(version, name, params) HOC_EXPORT const char *name params;
DLS__HIP_STRING_SYMBOLS(HOC_DECLARE_STRING)
#undef HOC_DECLARE_STRING

/* ---- the CUDA driver, resolved at the versions cuda_driver.h declares ---- */

static struct {
#define HOC_FIELD(name, version, params) dls__PFN_##name name;
  DLS__CUDA_REQUIRED_SYMBOLS(HOC_FIELD)
  DLS__CUDA_OPTIONAL_SYMBOLS(HOC_FIELD)
  DLS__CUDA_OLD_ABI_SYMBOLS(HOC_FIELD)
  DLS__CUDA_TOOLS_SYMBOLS(HOC_FIELD)
#undef HOC_FIELD
} cu;

static dls__PFN_cuStreamGetCaptureInfo_v12030 hoc_capture_info_v3; /* CUDA 12.3's ABI, where served */
static pthread_once_t hoc_once = PTHREAD_ONCE_INIT;
static dls__CUresult hoc_init_result = DLS__CUDA_ERROR_NOT_INITIALIZED;
static volatile int hoc_ready;
static pthread_mutex_t hoc_mu = PTHREAD_MUTEX_INITIALIZER;
static dls__CUcontext hoc_primary_ctx[HOC_MAX_DEVICES];

static void hoc_load(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  dls__PFN_cuGetProcAddress_v12000 gpa =
      lib != NULL ? (dls__PFN_cuGetProcAddress_v12000)dlsym(lib, "cuGetProcAddress_v2") : NULL;
  if (gpa == NULL) {
    hoc_init_result = DLS__CUDA_ERROR_NO_DEVICE; /* no CUDA 12 driver: as if no GPU */
    return;
  }
#define HOC_RESOLVE(name, version, params)                                                                             \
  {                                                                                                                    \
    void *fn = NULL;                                                                                                   \
    dls__CUdriverProcAddressQueryResult found = DLS__CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                             \
    if (gpa(#name, &fn, version, DLS__CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) == DLS__CUDA_SUCCESS &&               \
        found == DLS__CU_GET_PROC_ADDRESS_SUCCESS)                                                                     \
      cu.name = (dls__PFN_##name)fn;                                                                                   \
  }
  DLS__CUDA_REQUIRED_SYMBOLS(HOC_RESOLVE)
  DLS__CUDA_OPTIONAL_SYMBOLS(HOC_RESOLVE)
  DLS__CUDA_OLD_ABI_SYMBOLS(HOC_RESOLVE)
  DLS__CUDA_TOOLS_SYMBOLS(HOC_RESOLVE)
#undef HOC_RESOLVE
  void *v3 = NULL;
  dls__CUdriverProcAddressQueryResult found = DLS__CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (gpa("cuStreamGetCaptureInfo", &v3, 12030, DLS__CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) == DLS__CUDA_SUCCESS &&
      found == DLS__CU_GET_PROC_ADDRESS_SUCCESS)
    hoc_capture_info_v3 = (dls__PFN_cuStreamGetCaptureInfo_v12030)v3;
  if (cu.cuInit == NULL || cu.cuCtxGetDevice == NULL) {
    hoc_init_result = DLS__CUDA_ERROR_NOT_SUPPORTED;
    return;
  }
  hoc_init_result = cu.cuInit(0);
  hoc_ready = hoc_init_result == DLS__CUDA_SUCCESS;
}

/* ---- results: CUDA's numbers to HIP's ---- */

#define HOC_ERRORS(X)                                                                                                  \
  X(CUDA_SUCCESS, hipSuccess)                                                                                          \
  X(CUDA_ERROR_INVALID_VALUE, hipErrorInvalidValue)                                                                    \
  X(CUDA_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory)                                                                     \
  X(CUDA_ERROR_NOT_INITIALIZED, hipErrorNotInitialized)                                                                \
  X(CUDA_ERROR_DEINITIALIZED, hipErrorDeinitialized)                                                                   \
  X(CUDA_ERROR_STUB_LIBRARY, hipErrorInsufficientDriver)                                                               \
  X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, hipErrorInsufficientDriver)                                                     \
  X(CUDA_ERROR_NO_DEVICE, hipErrorNoDevice)                                                                            \
  X(CUDA_ERROR_INVALID_DEVICE, hipErrorInvalidDevice)                                                                  \
  X(CUDA_ERROR_INVALID_IMAGE, hipErrorInvalidImage)                                                                    \
  X(CUDA_ERROR_INVALID_CONTEXT, hipErrorInvalidContext)                                                                \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU, hipErrorNoBinaryForGpu)                                                              \
  X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, hipErrorPeerAccessUnsupported)                                                 \
  X(CUDA_ERROR_INVALID_PTX, hipErrorInvalidKernelFile)                                                                 \
  X(CUDA_ERROR_INVALID_SOURCE, hipErrorInvalidSource)                                                                  \
  X(CUDA_ERROR_INVALID_HANDLE, hipErrorInvalidHandle)                                                                  \
  X(CUDA_ERROR_NOT_FOUND, hipErrorNotFound)                                                                            \
  X(CUDA_ERROR_NOT_READY, hipErrorNotReady)                                                                            \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, hipErrorIllegalAddress)                                                                \
  X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, hipErrorLaunchOutOfResources)                                                  \
  X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, hipErrorPeerAccessAlreadyEnabled)                                          \
  X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, hipErrorPeerAccessNotEnabled)                                                  \
  X(CUDA_ERROR_LAUNCH_FAILED, hipErrorLaunchFailure)                                                                   \
  X(CUDA_ERROR_NOT_PERMITTED, hipErrorNotSupported)                                                                    \
  X(CUDA_ERROR_NOT_SUPPORTED, hipErrorNotSupported)                                                                    \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, hipErrorStreamCaptureUnsupported)                                           \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, hipErrorStreamCaptureInvalidated)                                           \
  X(CUDA_ERROR_STREAM_CAPTURE_MERGE, hipErrorStreamCaptureMerge)                                                       \
  X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, hipErrorStreamCaptureUnmatched)                                               \
  X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, hipErrorStreamCaptureUnjoined)                                                 \
  X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, hipErrorStreamCaptureIsolation)                                               \
  X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, hipErrorStreamCaptureImplicit)                                                 \
  X(CUDA_ERROR_CAPTURED_EVENT, hipErrorCapturedEvent)                                                                  \
  X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, hipErrorStreamCaptureWrongThread)                                          \
  X(CUDA_ERROR_UNKNOWN, hipErrorUnknown)

static dls__hipError_t hoc_err(dls__CUresult r) {
  switch (r) {
#define HOC_CASE(cuda, hip)                                                                                            \
  case DLS__##cuda: return DLS__##hip;
    HOC_ERRORS(HOC_CASE)
#undef HOC_CASE
  default: return DLS__hipErrorUnknown;
  }
}

/* An entry point that only hands its one handle over to CUDA's. */
#define HOC_FORWARD(name, type, cuda, cuda_type)                 \
  HOC_EXPORT dls__hipError_t name(type handle) {                 \
    HOC_NEED_INIT();                                             \
    return hoc_err(cu.cuda((cuda_type)(void *)handle));          \
  }

/* Every entry point but the first ones needs hipInit to have run. */
#define HOC_NEED_INIT()                                                                                                \
  do {                                                                                                                 \
    if (!hoc_ready)                                                                                                    \
      return DLS__hipErrorNotInitialized;                                                                              \
  } while (0)

HOC_EXPORT const char *hipGetErrorName(dls__hipError_t e) {
#define HOC_FIND(cuda, hip)                                                                                            \
  if (e == DLS__##hip)                                                                                                 \
    return #hip;
  HOC_ERRORS(HOC_FIND)
#undef HOC_FIND
  return "hipErrorUnknown";
}

HOC_EXPORT const char *hipGetErrorString(dls__hipError_t e) {
  const char *s = NULL;
#define HOC_FIND(cuda, hip)                                                                                            \
  if (s == NULL && e == DLS__##hip && cu.cuGetErrorString != NULL)                                                     \
    cu.cuGetErrorString(DLS__##cuda, &s);
  HOC_ERRORS(HOC_FIND)
#undef HOC_FIND
  return s != NULL ? s : "unknown error (HIP-on-CUDA stand-in)";
}

/* ---- devices: each is its primary context ---- */

HOC_EXPORT dls__hipError_t hipInit(unsigned int flags) {
  (void)flags;
  pthread_once(&hoc_once, hoc_load);
  return hoc_err(hoc_init_result);
}

/* The HIP API level modelled: ROCm 5.2's signatures (HIP_VERSION encoding). */
HOC_EXPORT dls__hipError_t hipRuntimeGetVersion(int *out_version) {
  *out_version = 5 * 10000000 + 2 * 100000;
  return DLS__hipSuccess;
}

HOC_EXPORT dls__hipError_t hipGetDeviceCount(int *out_count) {
  *out_count = 0;
  pthread_once(&hoc_once, hoc_load);
  HOC_NEED_INIT();
  dls__CUresult r = cu.cuDeviceGetCount(out_count);
  if (r == DLS__CUDA_SUCCESS && *out_count == 0)
    return DLS__hipErrorNoDevice;
  return hoc_err(r);
}

static dls__CUresult hoc_primary(int dev, dls__CUcontext *out_ctx) {
  if (dev < 0 || dev >= HOC_MAX_DEVICES)
    return DLS__CUDA_ERROR_INVALID_DEVICE;
  dls__CUresult r = DLS__CUDA_SUCCESS;
  pthread_mutex_lock(&hoc_mu);
  if (hoc_primary_ctx[dev] == NULL) {
    dls__CUdevice d = 0;
    r = cu.cuDeviceGet(&d, dev);
    if (r == DLS__CUDA_SUCCESS)
      r = cu.cuDevicePrimaryCtxRetain(&hoc_primary_ctx[dev], d); /* kept for the life of the process */
  }
  *out_ctx = hoc_primary_ctx[dev];
  pthread_mutex_unlock(&hoc_mu);
  return r;
}

HOC_EXPORT dls__hipError_t hipSetDevice(int device) {
  HOC_NEED_INIT();
  dls__CUcontext ctx = NULL;
  dls__CUresult r = hoc_primary(device, &ctx);
  if (r == DLS__CUDA_SUCCESS)
    r = cu.cuCtxSetCurrent(ctx);
  return hoc_err(r);
}

/* HIP's thread starts on device 0: so does this one, on its first question. */
HOC_EXPORT dls__hipError_t hipGetDevice(int *out_device) {
  HOC_NEED_INIT();
  dls__CUcontext cur = NULL;
  dls__CUresult r = cu.cuCtxGetCurrent(&cur);
  if (r == DLS__CUDA_SUCCESS && cur == NULL) {
    *out_device = 0;
    return hipSetDevice(0);
  }
  dls__CUdevice d = 0;
  if (r == DLS__CUDA_SUCCESS)
    r = cu.cuCtxGetDevice(&d);
  *out_device = d;
  return hoc_err(r);
}

/* hipDeviceAttribute_t (ROCm 5.2 numbering) to CUdevice_attribute. */
HOC_EXPORT dls__hipError_t hipDeviceGetAttribute(int *out_value, dls__hipDeviceAttribute_t attribute, int device) {
  HOC_NEED_INIT();
  dls__CUdevice_attribute a;
  switch (attribute) {
  case DLS__hipDeviceAttributeCanMapHostMemory: a = DLS__CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY; break;
  case DLS__hipDeviceAttributeComputeCapabilityMajor: a = DLS__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR; break;
  case DLS__hipDeviceAttributeComputeCapabilityMinor: a = DLS__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR; break;
  case DLS__hipDeviceAttributeMultiprocessorCount: a = DLS__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT; break;
  case DLS__hipDeviceAttributeMaxThreadsPerMultiProcessor:
    a = DLS__CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR;
    break;
  case DLS__hipDeviceAttributeUnifiedAddressing: a = DLS__CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING; break;
  case DLS__hipDeviceAttributeMemoryPoolsSupported: {
    const char *off = getenv("DLS_HIP_ON_CUDA_NO_POOLS");
    if (off != NULL && strcmp(off, "1") == 0) {
      *out_value = 0;
      return DLS__hipSuccess;
    }
    a = DLS__CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED;
    break;
  }
  default: return DLS__hipErrorInvalidValue; /* an attribute the backend does not use */
  }
  dls__CUdevice d = 0;
  dls__CUresult r = cu.cuDeviceGet(&d, device);
  if (r == DLS__CUDA_SUCCESS)
    r = cu.cuDeviceGetAttribute(out_value, a, d);
  return hoc_err(r);
}

HOC_EXPORT dls__hipError_t hipDeviceGetStreamPriorityRange(int *out_least, int *out_greatest) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuCtxGetStreamPriorityRange(out_least, out_greatest));
}

HOC_EXPORT dls__hipError_t hipDeviceCanAccessPeer(int *out_can, int device, int peer) {
  HOC_NEED_INIT();
  dls__CUdevice d = 0, p = 0;
  dls__CUresult r = cu.cuDeviceGet(&d, device);
  if (r == DLS__CUDA_SUCCESS)
    r = cu.cuDeviceGet(&p, peer);
  if (r == DLS__CUDA_SUCCESS)
    r = cu.cuDeviceCanAccessPeer(out_can, d, p);
  return hoc_err(r);
}

HOC_EXPORT dls__hipError_t hipDeviceEnablePeerAccess(int peer, unsigned int flags) {
  HOC_NEED_INIT();
  dls__CUcontext ctx = NULL;
  dls__CUresult r = hoc_primary(peer, &ctx);
  if (r == DLS__CUDA_SUCCESS)
    r = cu.cuCtxEnablePeerAccess(ctx, flags);
  return hoc_err(r);
}

/* ---- streams ---- */

HOC_EXPORT dls__hipError_t hipStreamCreateWithPriority(dls__hipStream_t *out_stream, unsigned int flags, int priority) {
  HOC_NEED_INIT();
  if ((flags & ~(unsigned)DLS__hipStreamNonBlocking) != 0)
    return DLS__hipErrorInvalidValue;
  unsigned cuflags = (flags & DLS__hipStreamNonBlocking) ? DLS__CU_STREAM_NON_BLOCKING : DLS__CU_STREAM_DEFAULT;
  return hoc_err(cu.cuStreamCreateWithPriority((dls__CUstream *)(void *)out_stream, cuflags, priority));
}

/* A HIP stream is a CUstream: the handles pass through, NULL (the null
 * stream: CUDA's legacy stream) and hipStreamPerThread (2, CUDA's
 * CU_STREAM_PER_THREAD) included. */
#define HOC_S(s) ((dls__CUstream)(void *)(s))
#define HOC_E(e) ((dls__CUevent)(void *)(e))

HOC_FORWARD(hipStreamDestroy, dls__hipStream_t, cuStreamDestroy, dls__CUstream)
HOC_FORWARD(hipStreamSynchronize, dls__hipStream_t, cuStreamSynchronize, dls__CUstream)
HOC_FORWARD(hipStreamQuery, dls__hipStream_t, cuStreamQuery, dls__CUstream)

HOC_EXPORT dls__hipError_t hipStreamWaitEvent(dls__hipStream_t s, dls__hipEvent_t e, unsigned int flags) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuStreamWaitEvent(HOC_S(s), HOC_E(e), flags));
}

HOC_EXPORT dls__hipError_t hipLaunchHostFunc(dls__hipStream_t s, dls__hipHostFn_t fn, void *user_data) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuLaunchHostFunc(HOC_S(s), fn, user_data));
}

/* The older stream callback, on cuLaunchHostFunc: the box carries it. */
typedef struct hoc_callback {
  dls__hipStream_t stream;
  dls__hipStreamCallback_t callback;
  void *user_data;
} hoc_callback;

static void hoc_callback_run(void *p) {
  hoc_callback c = *(hoc_callback *)p;
  free(p);
  c.callback(c.stream, DLS__hipSuccess, c.user_data);
}

HOC_EXPORT dls__hipError_t hipStreamAddCallback(dls__hipStream_t s, dls__hipStreamCallback_t callback, void *user_data,
                                                unsigned int flags) {
  HOC_NEED_INIT();
  if (flags != 0)
    return DLS__hipErrorInvalidValue;
  hoc_callback *c = malloc(sizeof *c);
  if (c == NULL)
    return DLS__hipErrorOutOfMemory;
  *c = (hoc_callback){s, callback, user_data};
  dls__CUresult r = cu.cuLaunchHostFunc(HOC_S(s), hoc_callback_run, c);
  if (r != DLS__CUDA_SUCCESS)
    free(c);
  return hoc_err(r);
}

/* The device the stream's context belongs to, through cuStreamGetDevice
 * where the driver has it (12.8), else the stream's context. */
HOC_EXPORT dls__hipError_t hipStreamGetDevice(dls__hipStream_t s, dls__hipDevice_t *out_device) {
  HOC_NEED_INIT();
  if (cu.cuStreamGetDevice != NULL)
    return hoc_err(cu.cuStreamGetDevice(HOC_S(s), out_device));
  dls__CUcontext ctx = NULL, prev = NULL;
  dls__CUresult r = cu.cuStreamGetCtx(HOC_S(s), &ctx);
  if (r == DLS__CUDA_SUCCESS)
    r = cu.cuCtxGetCurrent(&prev);
  if (r == DLS__CUDA_SUCCESS && (r = cu.cuCtxSetCurrent(ctx)) == DLS__CUDA_SUCCESS) {
    r = cu.cuCtxGetDevice(out_device);
    cu.cuCtxSetCurrent(prev);
  }
  return hoc_err(r);
}

/* ---- events ---- */

HOC_EXPORT dls__hipError_t hipEventCreateWithFlags(dls__hipEvent_t *out_event, unsigned flags) {
  HOC_NEED_INIT();
  if ((flags & ~(unsigned)(DLS__hipEventBlockingSync | DLS__hipEventDisableTiming)) != 0)
    return DLS__hipErrorInvalidValue;
  unsigned cuflags = ((flags & DLS__hipEventBlockingSync) ? DLS__CU_EVENT_BLOCKING_SYNC : 0u) |
                     ((flags & DLS__hipEventDisableTiming) ? DLS__CU_EVENT_DISABLE_TIMING : 0u);
  return hoc_err(cu.cuEventCreate((dls__CUevent *)(void *)out_event, cuflags));
}

HOC_FORWARD(hipEventDestroy, dls__hipEvent_t, cuEventDestroy, dls__CUevent)
HOC_FORWARD(hipEventQuery, dls__hipEvent_t, cuEventQuery, dls__CUevent)
HOC_FORWARD(hipEventSynchronize, dls__hipEvent_t, cuEventSynchronize, dls__CUevent)

HOC_EXPORT dls__hipError_t hipEventRecord(dls__hipEvent_t e, dls__hipStream_t s) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuEventRecord(HOC_E(e), HOC_S(s)));
}

HOC_EXPORT dls__hipError_t hipEventElapsedTime(float *out_ms, dls__hipEvent_t start, dls__hipEvent_t stop) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuEventElapsedTime(out_ms, HOC_E(start), HOC_E(stop)));
}

/* ---- memory ---- */

#define HOC_P(p) ((dls__CUdeviceptr)(uintptr_t)(p))

HOC_EXPORT dls__hipError_t hipMalloc(void **out_ptr, size_t size) {
  HOC_NEED_INIT();
  dls__CUdeviceptr p = 0;
  dls__CUresult r = cu.cuMemAlloc(&p, size);
  *out_ptr = (void *)(uintptr_t)p;
  return hoc_err(r);
}

HOC_EXPORT dls__hipError_t hipFree(void *ptr) {
  HOC_NEED_INIT();
  return ptr == NULL ? DLS__hipSuccess : hoc_err(cu.cuMemFree(HOC_P(ptr)));
}

HOC_EXPORT dls__hipError_t hipMallocAsync(void **out_ptr, size_t size, dls__hipStream_t s) {
  HOC_NEED_INIT();
  dls__CUdeviceptr p = 0;
  dls__CUresult r = cu.cuMemAllocAsync(&p, size, HOC_S(s));
  *out_ptr = (void *)(uintptr_t)p;
  return hoc_err(r);
}

HOC_EXPORT dls__hipError_t hipFreeAsync(void *ptr, dls__hipStream_t s) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuMemFreeAsync(HOC_P(ptr), HOC_S(s)));
}

HOC_EXPORT dls__hipError_t hipMemGetAddressRange(dls__hipDeviceptr_t *out_base, size_t *out_size,
                                                 dls__hipDeviceptr_t ptr) {
  HOC_NEED_INIT();
  dls__CUdeviceptr base = 0;
  dls__CUresult r = cu.cuMemGetAddressRange(&base, out_size, HOC_P(ptr));
  *out_base = (void *)(uintptr_t)base;
  return hoc_err(r);
}

HOC_EXPORT dls__hipError_t hipMemsetD8Async(dls__hipDeviceptr_t dst, unsigned char value, size_t count,
                                            dls__hipStream_t s) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuMemsetD8Async(HOC_P(dst), value, count, HOC_S(s)));
}

/* One address space: every hipMemcpyKind is what cuMemcpyAsync infers. */
HOC_EXPORT dls__hipError_t hipMemcpyAsync(void *dst, const void *src, size_t size, dls__hipMemcpyKind kind,
                                          dls__hipStream_t s) {
  HOC_NEED_INIT();
  if (kind > DLS__hipMemcpyDefault)
    return DLS__hipErrorInvalidValue;
  return hoc_err(cu.cuMemcpyAsync(HOC_P(dst), HOC_P(src), size, HOC_S(s)));
}

HOC_EXPORT dls__hipError_t hipHostMalloc(void **out_host, size_t size, unsigned int flags) {
  HOC_NEED_INIT();
  if ((flags & ~(unsigned)(DLS__hipHostMallocPortable | DLS__hipHostMallocMapped)) != 0)
    return DLS__hipErrorInvalidValue;
  unsigned cuflags = ((flags & DLS__hipHostMallocPortable) ? DLS__CU_MEMHOSTALLOC_PORTABLE : 0u) |
                     ((flags & DLS__hipHostMallocMapped) ? DLS__CU_MEMHOSTALLOC_DEVICEMAP : 0u);
  return hoc_err(cu.cuMemHostAlloc(out_host, size, cuflags));
}

HOC_EXPORT dls__hipError_t hipHostGetDevicePointer(void **out_device, void *host, unsigned int flags) {
  HOC_NEED_INIT();
  dls__CUdeviceptr p = 0;
  dls__CUresult r = cu.cuMemHostGetDevicePointer(&p, host, flags);
  *out_device = (void *)(uintptr_t)p;
  return hoc_err(r);
}

HOC_EXPORT dls__hipError_t hipHostFree(void *host) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuMemFreeHost(host));
}

#ifndef HOC_WITHOUT_POOLS
static int hoc_pools_off(void) {
  const char *off = getenv("DLS_HIP_ON_CUDA_NO_POOLS");
  return off != NULL && strcmp(off, "1") == 0;
}

/* The two vendors' pool properties share one layout (gpu_pool_props.h);
 * the values are translated all the same. */
HOC_EXPORT dls__hipError_t hipMemPoolCreate(dls__hipMemPool_t *out_pool, const struct hipMemPoolProps *props) {
  HOC_NEED_INIT();
  if (hoc_pools_off() || cu.cuMemPoolCreate == NULL)
    return DLS__hipErrorNotSupported;
  dls__gpu_pool_props p = *(const dls__gpu_pool_props *)(const void *)props;
  if (p.alloc_type != DLS__hipMemAllocationTypePinned || p.handle_types != DLS__hipMemHandleTypeNone ||
      p.location.type != DLS__hipMemLocationTypeDevice)
    return DLS__hipErrorInvalidValue;
  p.alloc_type = DLS__CU_MEM_ALLOCATION_TYPE_PINNED;
  p.handle_types = DLS__CU_MEM_HANDLE_TYPE_NONE;
  p.location.type = DLS__CU_MEM_LOCATION_TYPE_DEVICE;
  return hoc_err(
      cu.cuMemPoolCreate((dls__CUmemoryPool *)(void *)out_pool, (const struct CUmemPoolProps_st *)(const void *)&p));
}

HOC_FORWARD(hipMemPoolDestroy, dls__hipMemPool_t, cuMemPoolDestroy, dls__CUmemoryPool)

HOC_EXPORT dls__hipError_t hipMemPoolSetAttribute(dls__hipMemPool_t pool, dls__hipMemPoolAttr attribute, void *value) {
  HOC_NEED_INIT();
  if (attribute != DLS__hipMemPoolAttrReleaseThreshold)
    return DLS__hipErrorInvalidValue; /* the only one the backend sets */
  return hoc_err(
      cu.cuMemPoolSetAttribute((dls__CUmemoryPool)(void *)pool, DLS__CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, value));
}

HOC_EXPORT dls__hipError_t hipMemPoolSetAccess(dls__hipMemPool_t pool, const struct hipMemAccessDesc *desc,
                                               size_t count) {
  HOC_NEED_INIT();
  /* The same layout (a location, then flags with the same values): checked by test_hip_decls. */
  return hoc_err(cu.cuMemPoolSetAccess((dls__CUmemoryPool)(void *)pool, (const struct CUmemAccessDesc_st *)(const void *)desc,
                                       count));
}

HOC_EXPORT dls__hipError_t hipMallocFromPoolAsync(void **out_ptr, size_t size, dls__hipMemPool_t pool,
                                                  dls__hipStream_t s) {
  HOC_NEED_INIT();
  dls__CUdeviceptr p = 0;
  dls__CUresult r = cu.cuMemAllocFromPoolAsync(&p, size, (dls__CUmemoryPool)(void *)pool, HOC_S(s));
  *out_ptr = (void *)(uintptr_t)p;
  return hoc_err(r);
}
#endif /* HOC_WITHOUT_POOLS */

/* ---- modules and launches ---- */

HOC_EXPORT dls__hipError_t hipModuleLoadData(dls__hipModule_t *out_module, const void *image) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuModuleLoadDataEx((dls__CUmodule *)(void *)out_module, image, 0, NULL, NULL));
}

HOC_FORWARD(hipModuleUnload, dls__hipModule_t, cuModuleUnload, dls__CUmodule)

/* Loads the function now: AMD's runtime has no lazy loading to wait on. */
HOC_EXPORT dls__hipError_t hipModuleGetFunction(dls__hipFunction_t *out_function, dls__hipModule_t module,
                                                const char *name) {
  HOC_NEED_INIT();
  dls__CUfunction f = NULL;
  dls__CUresult r = cu.cuModuleGetFunction(&f, (dls__CUmodule)(void *)module, name);
  if (r == DLS__CUDA_SUCCESS && cu.cuFuncLoad != NULL)
    r = cu.cuFuncLoad(f);
  *out_function = (dls__hipFunction_t)(void *)f;
  return hoc_err(r);
}

HOC_EXPORT dls__hipError_t hipModuleLaunchKernel(dls__hipFunction_t f, unsigned int grid_x, unsigned int grid_y,
                                                 unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                                                 unsigned int block_z, unsigned int shared_mem_bytes,
                                                 dls__hipStream_t s, void **params, void **extra) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuLaunchKernel((dls__CUfunction)(void *)f, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                                   shared_mem_bytes, HOC_S(s), params, extra));
}

/* ---- graphs: the values of modes, states and flags are CUDA's ---- */

#define HOC_G(g) ((dls__CUgraph)(void *)(g))
#define HOC_X(x) ((dls__CUgraphExec)(void *)(x))

HOC_EXPORT dls__hipError_t hipStreamBeginCapture(dls__hipStream_t s, dls__hipStreamCaptureMode mode) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuStreamBeginCapture(HOC_S(s), mode));
}

HOC_EXPORT dls__hipError_t hipStreamEndCapture(dls__hipStream_t s, dls__hipGraph_t *out_graph) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuStreamEndCapture(HOC_S(s), (dls__CUgraph *)(void *)out_graph));
}

HOC_EXPORT dls__hipError_t hipStreamGetCaptureInfo(dls__hipStream_t s, dls__hipStreamCaptureStatus *out_status,
                                                   unsigned long long *out_id) {
  HOC_NEED_INIT();
  dls__cuuint64_t id = 0;
  dls__CUresult r = DLS__CUDA_ERROR_NOT_SUPPORTED;
  if (hoc_capture_info_v3 != NULL)
    r = hoc_capture_info_v3(HOC_S(s), out_status, &id, NULL, NULL, NULL, NULL);
  else if (cu.cuStreamGetCaptureInfo != NULL)
    r = cu.cuStreamGetCaptureInfo(HOC_S(s), out_status, &id);
  if (out_id != NULL)
    *out_id = id;
  return hoc_err(r);
}

HOC_EXPORT dls__hipError_t hipGraphInstantiateWithFlags(dls__hipGraphExec_t *out_exec, dls__hipGraph_t graph,
                                                        unsigned long long flags) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuGraphInstantiateWithFlags((dls__CUgraphExec *)(void *)out_exec, HOC_G(graph), flags));
}

HOC_EXPORT dls__hipError_t hipGraphLaunch(dls__hipGraphExec_t exec, dls__hipStream_t s) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuGraphLaunch(HOC_X(exec), HOC_S(s)));
}

HOC_FORWARD(hipGraphExecDestroy, dls__hipGraphExec_t, cuGraphExecDestroy, dls__CUgraphExec)
HOC_FORWARD(hipGraphDestroy, dls__hipGraph_t, cuGraphDestroy, dls__CUgraph)

HOC_EXPORT dls__hipError_t hipThreadExchangeStreamCaptureMode(dls__hipStreamCaptureMode *mode) {
  HOC_NEED_INIT();
  return hoc_err(cu.cuThreadExchangeStreamCaptureMode(mode));
}
