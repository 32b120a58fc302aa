/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA backend's vendor part: libcuda.so.1 through dlopen and cuGetProcAddress, CUresult names, primary contexts, the embedded fatbin.
 *
 * No toolkit is needed: the driver's types come from cuda_driver.h. Every
 * method runs in the device's primary context (the one PyTorch, CuPy and
 * the runtime API share), so their streams and pointers work here. The
 * methods themselves are the shared ones of gpu_*.c. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda_driver.h"
#include "backend/gpu.h"
#include "base/hints.h"

#ifdef DLS_HAVE_CUDA_KERNELS
/* The built-in kernels' fatbin, embedded by cmake/DlsCudaKernels.cmake. */
extern const unsigned char dls__cuda_kernels_fatbin[];
extern const size_t dls__cuda_kernels_fatbin_size;
#endif

_Static_assert(DLS__CUDA_SUCCESS == DLS__GPU_OK, "CUDA_SUCCESS is the shared success value");
_Static_assert(sizeof(dls__CUdeviceptr) == sizeof(void *), "device addresses travel as pointers");
_Static_assert(sizeof(struct CUipcMemHandle_st) == DLS__IPC_BYTES && sizeof(struct CUipcEventHandle_st) == DLS__IPC_BYTES,
               "interprocess handles are the bytes the backend methods carry");

/* ---- the driver's entry points ---- */

static struct dls__cuda_api {
#define DLS__CUDA_API_FIELD(name, version, params) dls__PFN_##name name;
  DLS__CUDA_REQUIRED_SYMBOLS(DLS__CUDA_API_FIELD)
  DLS__CUDA_OPTIONAL_SYMBOLS(DLS__CUDA_API_FIELD)
  DLS__CUDA_OLD_ABI_SYMBOLS(DLS__CUDA_API_FIELD)
#undef DLS__CUDA_API_FIELD
} cu;

static dls__PFN_cuStreamGetCaptureInfo_v12030 dls__cuda_capture_info_v3;
static int dls__cuda_driver_version;
static dls__PFN_cuGetProcAddress_v12000 dls__cuda_gpa2;
static dls__PFN_cuGetProcAddress_v11030 dls__cuda_gpa1;
static pthread_once_t dls__cuda_once = PTHREAD_ONCE_INIT;
static dls__gpu dls__cuda_gpu;

/* ---- results ---- */

static const char *dls__cuda_error_name(dls__gpu_result r) {
  const char *s = NULL;
  if (cu.cuGetErrorName != NULL && cu.cuGetErrorName(r, &s) == DLS__CUDA_SUCCESS && s != NULL)
    return s;
  return "unrecognized CUresult";
}

static const char *dls__cuda_error_string(dls__gpu_result r) {
  const char *s = NULL;
  if (cu.cuGetErrorString != NULL && cu.cuGetErrorString(r, &s) == DLS__CUDA_SUCCESS && s != NULL)
    return s;
  return "no description";
}

static dls__gpu_error dls__cuda_classify(dls__gpu_result r) {
  switch (r) {
  case DLS__CUDA_ERROR_NOT_READY: return DLS__GPU_ERROR_NOT_READY;
  case DLS__CUDA_ERROR_OUT_OF_MEMORY: return DLS__GPU_ERROR_OUT_OF_MEMORY;
  case DLS__CUDA_ERROR_INVALID_VALUE: return DLS__GPU_ERROR_INVALID_VALUE;
  case DLS__CUDA_ERROR_INVALID_DEVICE: return DLS__GPU_ERROR_INVALID_DEVICE;
  case DLS__CUDA_ERROR_INVALID_HANDLE: return DLS__GPU_ERROR_INVALID_HANDLE;
  case DLS__CUDA_ERROR_NOT_SUPPORTED: return DLS__GPU_ERROR_NOT_SUPPORTED;
  case DLS__CUDA_ERROR_NOT_FOUND: return DLS__GPU_ERROR_NOT_FOUND;
  case DLS__CUDA_ERROR_INVALID_IMAGE:
  case DLS__CUDA_ERROR_INVALID_PTX:
  case DLS__CUDA_ERROR_INVALID_SOURCE: return DLS__GPU_ERROR_BAD_IMAGE;
  case DLS__CUDA_ERROR_NO_BINARY_FOR_GPU: return DLS__GPU_ERROR_NO_BINARY;
  case DLS__CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return DLS__GPU_ERROR_PTX_TOO_NEW;
  case DLS__CUDA_ERROR_JIT_COMPILER_NOT_FOUND: return DLS__GPU_ERROR_NO_JIT;
  case DLS__CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: return DLS__GPU_ERROR_PEER_ENABLED;
  case DLS__CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: return DLS__GPU_ERROR_PEER_UNSUPPORTED;
  case DLS__CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
  case DLS__CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
  case DLS__CUDA_ERROR_STREAM_CAPTURE_MERGE:
  case DLS__CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
  case DLS__CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
  case DLS__CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
  case DLS__CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
  case DLS__CUDA_ERROR_CAPTURED_EVENT:
  case DLS__CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: return DLS__GPU_ERROR_CAPTURE;
  default: return DLS__GPU_ERROR_OTHER;
  }
}

/* ---- adapters: where CUDA's call is not the neutral one ---- */

/* Loads a function now (see gpu_code.c): cuFuncLoad, or on drivers older
 * than 12.4 an attribute query, which loads it too. */
static dls__gpu_result dls__cuda_cuFuncLoad(void *function) {
  if (cu.cuFuncLoad != NULL)
    return cu.cuFuncLoad(function);
  int regs = 0;
  return cu.cuFuncGetAttribute(&regs, DLS__CU_FUNC_ATTRIBUTE_NUM_REGS, function);
}

/* A stream's capture state and id through whichever ABI the driver serves (NULL slot when it has neither: then
 * nothing captures). The state alone (cuStreamIsCapturing, the capture_state slot) is asked first by the shared
 * methods (dls__gpu_capture_ask, gpu.h); this is the full question. */
static dls__gpu_result dls__cuda_cuStreamGetCaptureInfo(void *stream, unsigned *out_status,
                                                        unsigned long long *out_id) {
  dls__cuuint64_t id = 0;
  dls__CUresult r = dls__cuda_capture_info_v3 != NULL
                        ? dls__cuda_capture_info_v3(stream, out_status, &id, NULL, NULL, NULL, NULL)
                        : cu.cuStreamGetCaptureInfo(stream, out_status, &id);
  *out_id = id;
  return r;
}

/* The interprocess handles travel by value: the neutral slots take their bytes. */
static dls__gpu_result dls__cuda_cuIpcOpenMemHandle(void **out_ptr, const void *bytes, unsigned flags) {
  struct CUipcMemHandle_st h;
  memcpy(&h, bytes, sizeof h);
  dls__CUdeviceptr p = 0;
  dls__CUresult r = cu.cuIpcOpenMemHandle(&p, h, flags);
  *out_ptr = (void *)(uintptr_t)p;
  return r;
}

static dls__gpu_result dls__cuda_cuIpcOpenEventHandle(void **out_event, const void *bytes) {
  struct CUipcEventHandle_st h;
  memcpy(&h, bytes, sizeof h);
  dls__CUevent e = NULL;
  dls__CUresult r = cu.cuIpcOpenEventHandle(&e, h);
  *out_event = e;
  return r;
}

/* ---- devices: primary contexts ---- */

static dls_status_t dls__cuda_device_open(dls__gpu *g, int dev, dls__gpu_device *d) {
  dls__CUdevice cudev = 0;
  dls__CUresult r = cu.cuDeviceGet(&cudev, dev);
  if (r != DLS__CUDA_SUCCESS)
    return dls__gpu_fail(g, r, dev, "cuDeviceGet(ordinal=%d)", dev);
  dls__CUcontext ctx = NULL;
  r = cu.cuDevicePrimaryCtxRetain(&ctx, cudev);
  if (r != DLS__CUDA_SUCCESS)
    return dls__gpu_fail(g, r, dev, "cuDevicePrimaryCtxRetain(device=%d)", dev);
  d->handle = cudev;
  d->ctx = ctx;
  /* Only messages use the compute capability: a failed query leaves sm_00. */
  int major = 0, minor = 0;
  if (cu.cuDeviceGetAttribute(&major, DLS__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cudev) != DLS__CUDA_SUCCESS ||
      cu.cuDeviceGetAttribute(&minor, DLS__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cudev) != DLS__CUDA_SUCCESS)
    major = minor = 0;
  snprintf(d->arch, sizeof d->arch, "sm_%d%d", major, minor);
  return DLS_OK;
}

static void dls__cuda_device_close(dls__gpu *g, dls__gpu_device *d) {
  (void)g;
  cu.cuDevicePrimaryCtxRelease(d->handle);
  d->ctx = NULL;
}

static dls_status_t dls__cuda_builtin_image(const void **out_image, size_t *out_size) {
#ifdef DLS_HAVE_CUDA_KERNELS
  *out_image = dls__cuda_kernels_fatbin;
  *out_size = dls__cuda_kernels_fatbin_size;
  return DLS_OK;
#else
  (void)out_image;
  (void)out_size;
  return dls__fail(DLS_ERR_UNAVAILABLE, "CUDA built-in kernels were not compiled in (nvcc was not found at build "
                                        "time; rebuild with nvcc on PATH)");
#endif
}

/* ---- loading ---- */

/* Asks the driver for `name` at `version`. A required entry point is asked
 * for at most at the driver's own version (the driver refuses newer ones,
 * and an older driver still serves the ABI we declared unless the entry
 * point is younger than it, when it is simply missing). An optional one
 * newer than the driver is missing: a clamped version could hand over an
 * older variant with another signature. */
static void *dls__cuda_resolve(const char *name, int version, bool required) {
  const int driver = dls__cuda_driver_version; /* 0 until known */
  if (!required && driver != 0 && version > driver)
    return NULL;
  int v = driver != 0 && version > driver ? driver : version;
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
  return r == DLS__CUDA_SUCCESS ? fn : NULL;
}

/* The version query comes first: it tells the driver from the toolkit's stub. */
static bool dls__cuda_load_version(dls__gpu *g) {
  dls__CUresult r = DLS__CUDA_ERROR_NOT_FOUND;
  cu.cuDriverGetVersion = (dls__PFN_cuDriverGetVersion)dls__cuda_resolve("cuDriverGetVersion", 2020, true);
  if (cu.cuDriverGetVersion != NULL)
    r = cu.cuDriverGetVersion(&dls__cuda_driver_version);
  if (r == DLS__CUDA_ERROR_STUB_LIBRARY) {
    dls__gpu_unavailable(g, "libcuda.so.1 is the CUDA toolkit's stub library, not the NVIDIA driver "
                            "(CUDA_ERROR_STUB_LIBRARY). Remove the toolkit's stubs directory from LD_LIBRARY_PATH, "
                            "install the driver, or use " DLS__HINT_CPU_BACKEND ".");
    return false;
  }
  if (cu.cuDriverGetVersion == NULL || r != DLS__CUDA_SUCCESS || dls__cuda_driver_version <= 0) {
    dls__gpu_unavailable(g, "libcuda.so.1 does not answer cuDriverGetVersion (CUresult %u); the NVIDIA driver "
                            "installation looks broken. Check it with nvidia-smi, or use " DLS__HINT_CPU_BACKEND ".",
                         r);
    return false;
  }
  return true;
}

static bool dls__cuda_load_symbols(dls__gpu *g) {
  const int dv_major = dls__cuda_driver_version / 1000, dv_minor = dls__cuda_driver_version % 1000 / 10;
#define DLS__CUDA_RESOLVE_REQUIRED(name, version, params)                                                      \
  cu.name = (dls__PFN_##name)dls__cuda_resolve(#name, version, true);                                          \
  if (cu.name == NULL) {                                                                                       \
    dls__gpu_unavailable(g,                                                                                    \
                         "the NVIDIA driver (CUDA %d.%d) lacks " #name " (ABI of CUDA %d.%d). Update the "     \
                         "driver, or use " DLS__HINT_CPU_BACKEND ".",                                       \
                         dv_major, dv_minor, (version) / 1000, (version) % 1000 / 10);                         \
    return false;                                                                                              \
  }
  DLS__CUDA_REQUIRED_SYMBOLS(DLS__CUDA_RESOLVE_REQUIRED)
#undef DLS__CUDA_RESOLVE_REQUIRED
#define DLS__CUDA_RESOLVE_OPTIONAL(name, version, params) \
  cu.name = (dls__PFN_##name)dls__cuda_resolve(#name, version, false);
  DLS__CUDA_OPTIONAL_SYMBOLS(DLS__CUDA_RESOLVE_OPTIONAL)
  DLS__CUDA_OLD_ABI_SYMBOLS(DLS__CUDA_RESOLVE_OPTIONAL)
#undef DLS__CUDA_RESOLVE_OPTIONAL
  dls__cuda_capture_info_v3 =
      (dls__PFN_cuStreamGetCaptureInfo_v12030)dls__cuda_resolve("cuStreamGetCaptureInfo", 12030, false);
  return true;
}

static bool dls__cuda_load_devices(dls__gpu *g) {
  const int dv_major = dls__cuda_driver_version / 1000, dv_minor = dls__cuda_driver_version % 1000 / 10;
  dls__CUresult r = cu.cuInit(0);
  if (r == DLS__CUDA_ERROR_NO_DEVICE) {
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    dls__gpu_unavailable(g, "no CUDA device is visible (cuInit: CUDA_ERROR_NO_DEVICE; CUDA_VISIBLE_DEVICES=%s). "
                            "Check nvidia-smi, or use " DLS__HINT_CPU_BACKEND ".",
                         vis != NULL ? vis : "(unset)");
    return false;
  }
  if (r == DLS__CUDA_ERROR_STUB_LIBRARY) {
    dls__gpu_unavailable(g, "libcuda.so.1 is the CUDA toolkit's stub library, not the NVIDIA driver (cuInit: "
                            "CUDA_ERROR_STUB_LIBRARY). Remove the stubs directory from LD_LIBRARY_PATH, or install "
                            "the driver.");
    return false;
  }
  if (r != DLS__CUDA_SUCCESS) {
    dls__gpu_unavailable(g, "cuInit failed with %s (%s), driver CUDA %d.%d. Check the NVIDIA driver with "
                            "nvidia-smi, or use " DLS__HINT_CPU_BACKEND ".",
                         dls__cuda_error_name(r), dls__cuda_error_string(r), dv_major, dv_minor);
    return false;
  }
  int n = 0;
  r = cu.cuDeviceGetCount(&n);
  if (r != DLS__CUDA_SUCCESS || n <= 0) {
    dls__gpu_unavailable(g, "no CUDA device is visible (cuDeviceGetCount: %s, count %d). Check nvidia-smi and "
                            "CUDA_VISIBLE_DEVICES, or use " DLS__HINT_CPU_BACKEND ".",
                         dls__cuda_error_name(r), n);
    return false;
  }
  return dls__gpu_devices_init(g, n) == DLS_OK;
}

static void dls__cuda_load(void) {
  dls__gpu *g = &dls__cuda_gpu;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char *why = dlerror();
    dls__gpu_unavailable(g, "libcuda.so.1 not found (dlopen: %s). Install the NVIDIA driver, or use "
                            DLS__HINT_CPU_BACKEND ".",
                         why != NULL ? why : "no reason given");
    return;
  }
  /* The only two symbols taken by name; everything else is versioned. */
  dls__cuda_gpa2 = (dls__PFN_cuGetProcAddress_v12000)dlsym(lib, "cuGetProcAddress_v2");
  if (dls__cuda_gpa2 == NULL)
    dls__cuda_gpa1 = (dls__PFN_cuGetProcAddress_v11030)dlsym(lib, "cuGetProcAddress");
  bool ok = dls__cuda_gpa2 != NULL || dls__cuda_gpa1 != NULL;
  if (!ok)
    dls__gpu_unavailable(g, "libcuda.so.1 has no cuGetProcAddress: the NVIDIA driver is older than CUDA 11.3. "
                            "Update the driver, or use " DLS__HINT_CPU_BACKEND ".");
  ok = ok && dls__cuda_load_version(g) && dls__cuda_load_symbols(g) && dls__cuda_load_devices(g);
  if (!ok) {
    memset(&cu, 0, sizeof cu);
    dlclose(lib);
    return;
  }
#define DLS__CUDA_FILL(slot, params, cuda, hip) DLS__GPU_SET(g, slot, cuda);
  DLS__GPU_CALLS(DLS__CUDA_FILL)
#undef DLS__CUDA_FILL
  if (cu.cuStreamGetCaptureInfo == NULL && dls__cuda_capture_info_v3 == NULL)
    g->calls.capture_info = NULL, g->calls.capture_state = NULL; /* never the state alone without the full one */
  if (cu.cuIpcOpenMemHandle == NULL) /* adapters of entry points the driver lacks */
    g->calls.ipc_mem_open = NULL;
  if (cu.cuIpcOpenEventHandle == NULL)
    g->calls.ipc_event_open = NULL;
  /* The library stays loaded for the life of the process. */
}

#define DLS__GPU_PREFIX dls__cuda
DLS__GPU_DEFINE_BACKEND(dls__cuda_backend, "cuda", kDLCUDA, "cuda",
                        "the image has neither code for this GPU nor PTX the driver can compile for it",
                        cuda);
