/* SPDX-License-Identifier: Apache-2.0 */
/* The HIP backend's vendor part: libamdhip64 through dlopen and dlsym, hipError_t names, devices made current with hipSetDevice, the embedded code objects.
 *
 * No ROCm is needed to build: the runtime's types come from
 * hip_runtime_decls.h. HIP has no contexts to share: every method makes its
 * device the thread's current one (and puts the caller's back), and a
 * stream remembers its device anyway. The methods themselves are the shared
 * ones of gpu_*.c. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/gpu.h"
#include "backend/hip_runtime_decls.h"
#include "base/hints.h"

#ifdef DLS_HAVE_HIP_KERNELS
/* The built-in kernels' code objects for DLS_HIP_ARCHS, embedded by cmake/DlsHipKernels.cmake. */
extern const unsigned char dls__hip_kernels_bundle[];
extern const size_t dls__hip_kernels_bundle_size;
#endif
#ifndef DLS_HIP_ARCHS
#define DLS_HIP_ARCHS "none"
#endif

_Static_assert(DLS__hipSuccess == DLS__GPU_OK, "hipSuccess is the shared success value");

/* ---- the runtime's entry points ---- */

static struct dls__hip_api {
#define DLS__HIP_API_FIELD(version, name, params) dls__PFN_##name name;
  DLS__HIP_REQUIRED_SYMBOLS(DLS__HIP_API_FIELD)
  DLS__HIP_OPTIONAL_SYMBOLS(DLS__HIP_API_FIELD)
  DLS__HIP_NEWER_SYMBOLS(DLS__HIP_API_FIELD)
#undef DLS__HIP_API_FIELD
#define DLS__HIP_STRING_FIELD(version, name, params) dls__PFN_##name name;
  DLS__HIP_STRING_SYMBOLS(DLS__HIP_STRING_FIELD)
#undef DLS__HIP_STRING_FIELD
  dls__PFN_hipGetStreamDeviceId hipGetStreamDeviceId;
} hip;

static pthread_once_t dls__hip_once = PTHREAD_ONCE_INIT;
static dls__gpu dls__hip_gpu;
static char dls__hip_path[256]; /* the file the runtime was loaded from */

/* ---- results ---- */

static const char *dls__hip_error_name(dls__gpu_result r) {
  const char *s = hip.hipGetErrorName != NULL ? hip.hipGetErrorName(r) : NULL;
  return s != NULL ? s : "unrecognized hipError_t";
}

static const char *dls__hip_error_string(dls__gpu_result r) {
  const char *s = hip.hipGetErrorString != NULL ? hip.hipGetErrorString(r) : NULL;
  return s != NULL ? s : "no description";
}

static dls__gpu_error dls__hip_classify(dls__gpu_result r) {
  switch (r) {
  case DLS__hipErrorNotReady: return DLS__GPU_ERROR_NOT_READY;
  case DLS__hipErrorOutOfMemory: return DLS__GPU_ERROR_OUT_OF_MEMORY;
  case DLS__hipErrorInvalidValue: return DLS__GPU_ERROR_INVALID_VALUE;
  case DLS__hipErrorInvalidDevice: return DLS__GPU_ERROR_INVALID_DEVICE;
  case DLS__hipErrorInvalidHandle:
  case DLS__hipErrorContextIsDestroyed: return DLS__GPU_ERROR_INVALID_HANDLE;
  case DLS__hipErrorNotSupported: return DLS__GPU_ERROR_NOT_SUPPORTED;
  case DLS__hipErrorNotFound: return DLS__GPU_ERROR_NOT_FOUND;
  case DLS__hipErrorInvalidImage:
  case DLS__hipErrorInvalidKernelFile:
  case DLS__hipErrorInvalidSource:
  case DLS__hipErrorSharedObjectInitFailed: return DLS__GPU_ERROR_BAD_IMAGE;
  case DLS__hipErrorNoBinaryForGpu: return DLS__GPU_ERROR_NO_BINARY;
  case DLS__hipErrorPeerAccessAlreadyEnabled: return DLS__GPU_ERROR_PEER_ENABLED;
  case DLS__hipErrorPeerAccessUnsupported: return DLS__GPU_ERROR_PEER_UNSUPPORTED;
  case DLS__hipErrorStreamCaptureUnsupported:
  case DLS__hipErrorStreamCaptureInvalidated:
  case DLS__hipErrorStreamCaptureMerge:
  case DLS__hipErrorStreamCaptureUnmatched:
  case DLS__hipErrorStreamCaptureUnjoined:
  case DLS__hipErrorStreamCaptureIsolation:
  case DLS__hipErrorStreamCaptureImplicit:
  case DLS__hipErrorCapturedEvent:
  case DLS__hipErrorStreamCaptureWrongThread: return DLS__GPU_ERROR_CAPTURE;
  default: return DLS__GPU_ERROR_OTHER;
  }
}

/* ---- adapters: where HIP's call is not the neutral one ----
 * A device's "context" is its ordinal + 1, so that NULL never names one. */

static dls__gpu_result dls__hip_hipGetDevice(void **out_ctx) {
  int dev = 0;
  dls__hipError_t r = hip.hipGetDevice(&dev);
  *out_ctx = (void *)(intptr_t)(dev + 1);
  return r;
}

static dls__gpu_result dls__hip_hipSetDevice(void *ctx) { return hip.hipSetDevice((int)(intptr_t)ctx - 1); }

static dls__gpu_result dls__hip_hipDeviceEnablePeerAccess(void *peer_ctx, unsigned flags) {
  return hip.hipDeviceEnablePeerAccess((int)(intptr_t)peer_ctx - 1, flags);
}

/* hipStreamGetDevice where the runtime has it (ROCm 6), else the profiler
 * API's hipGetStreamDeviceId (ROCm 5), which answers -1 for a bad stream. */
static dls__gpu_result dls__hip_hipStreamGetDevice(void *stream, int *out_device) {
  if (hip.hipStreamGetDevice != NULL)
    return hip.hipStreamGetDevice(stream, out_device);
  int dev = hip.hipGetStreamDeviceId(stream);
  if (dev < 0)
    return DLS__hipErrorInvalidHandle;
  *out_device = dev;
  return DLS__hipSuccess;
}

/* hipLaunchHostFunc where the runtime exports it (ROCm 5.2's library only
 * declares it), else a stream callback that carries the function: it runs
 * after the stream's earlier work, and holds the stream's later work until
 * it returns, as a host function does. */
typedef struct dls__hip_host_call {
  dls__gpu_host_fn fn;
  void *user_data;
} dls__hip_host_call;

static void dls__hip_host_call_run(dls__hipStream_t stream, dls__hipError_t status, void *box) {
  (void)stream;
  (void)status;
  dls__hip_host_call call = *(dls__hip_host_call *)box;
  free(box);
  call.fn(call.user_data);
}

static dls__gpu_result dls__hip_hipLaunchHostFunc(void *stream, dls__gpu_host_fn fn, void *user_data) {
  if (hip.hipLaunchHostFunc != NULL)
    return hip.hipLaunchHostFunc(stream, fn, user_data);
  dls__hip_host_call *box = malloc(sizeof *box);
  if (box == NULL)
    return DLS__hipErrorOutOfMemory;
  box->fn = fn;
  box->user_data = user_data;
  dls__hipError_t r = hip.hipStreamAddCallback(stream, dls__hip_host_call_run, box, 0);
  if (r != DLS__hipSuccess)
    free(box);
  return r;
}

static dls__gpu_result dls__hip_hipMemcpyAsync(void *dst, const void *src, size_t size, void *stream) {
  return hip.hipMemcpyAsync(dst, src, size, DLS__hipMemcpyDefault, stream);
}

/* hipModuleLoadDataEx ignores its options on AMD: there is no JIT log to ask for. */
static dls__gpu_result dls__hip_hipModuleLoadData(void **out_module, const void *image, unsigned noptions,
                                                  unsigned *options, void **values) {
  (void)noptions;
  (void)options;
  (void)values;
  return hip.hipModuleLoadData((dls__hipModule_t *)out_module, image);
}

/* ---- devices ---- */

static dls_status_t dls__hip_device_open(dls__gpu *g, int dev, dls__gpu_device *d) {
  (void)g;
  d->handle = dev;
  d->ctx = (void *)(intptr_t)(dev + 1);
  snprintf(d->arch, sizeof d->arch, "AMD GPU rocm:%d", dev);
  return DLS_OK;
}

static void dls__hip_device_close(dls__gpu *g, dls__gpu_device *d) {
  (void)g;
  (void)d; /* nothing retained */
}

/* DLSTREAM_HIP_BUILTINS=<file>: read once, kept for the life of the process. */
static pthread_once_t dls__hip_builtins_once = PTHREAD_ONCE_INIT;
static unsigned char *dls__hip_builtins_file;
static size_t dls__hip_builtins_file_size;
static char dls__hip_builtins_error[320];

static void dls__hip_builtins_read(void) {
  const char *path = getenv("DLSTREAM_HIP_BUILTINS");
  FILE *f = fopen(path, "rb");
  long n = -1;
  if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
    dls__hip_builtins_file = malloc((size_t)n);
    if (dls__hip_builtins_file != NULL && fread(dls__hip_builtins_file, 1, (size_t)n, f) == (size_t)n) {
      dls__hip_builtins_file_size = (size_t)n;
      fclose(f);
      return;
    }
  }
  int e = errno;
  snprintf(dls__hip_builtins_error, sizeof dls__hip_builtins_error,
           "DLSTREAM_HIP_BUILTINS=%s: cannot read the file (%s)", path,
           f == NULL ? strerror(e) : n == 0 ? "it is empty" : "read error");
  if (f != NULL)
    fclose(f);
  free(dls__hip_builtins_file);
  dls__hip_builtins_file = NULL;
}

static dls_status_t dls__hip_builtin_image(const void **out_image, size_t *out_size) {
  const char *path = getenv("DLSTREAM_HIP_BUILTINS");
  if (path != NULL && path[0] != '\0') {
    pthread_once(&dls__hip_builtins_once, dls__hip_builtins_read);
    if (dls__hip_builtins_file == NULL)
      return dls__fail(DLS_ERR_UNAVAILABLE, "%s", dls__hip_builtins_error);
    *out_image = dls__hip_builtins_file;
    *out_size = dls__hip_builtins_file_size;
    return DLS_OK;
  }
#ifdef DLS_HAVE_HIP_KERNELS
  *out_image = dls__hip_kernels_bundle;
  *out_size = dls__hip_kernels_bundle_size;
  return DLS_OK;
#else
  (void)out_image;
  (void)out_size;
  return dls__fail(DLS_ERR_UNAVAILABLE,
                   "HIP built-in kernels were not compiled in (hipcc was not found at build time; install hipcc "
                   "and rocm-device-libs and rebuild), and DLSTREAM_HIP_BUILTINS names no code object to load "
                   "instead");
#endif
}

/* ---- loading ---- */

static void *dls__hip_open(dls__gpu *g) {
  const char *env = getenv("DLSTREAM_HIP_LIBRARY");
  if (env != NULL && env[0] != '\0') {
    void *lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
      const char *why = dlerror();
      dls__gpu_unavailable(g, "DLSTREAM_HIP_LIBRARY=%s not found (dlopen: %s). Point it at libamdhip64.so, or "
                              "unset it to search the usual names.",
                           env, why != NULL ? why : "no reason given");
      return NULL;
    }
    snprintf(dls__hip_path, sizeof dls__hip_path, "%s", env);
    return lib;
  }
  static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
  char why[256] = "";
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) {
      snprintf(dls__hip_path, sizeof dls__hip_path, "%s", names[i]);
      return lib;
    }
    const char *e = dlerror(); /* the next dlopen overwrites it */
    if (why[0] == '\0' && e != NULL)
      snprintf(why, sizeof why, "%s", e);
  }
  dls__gpu_unavailable(g, "libamdhip64.so not found (dlopen: %s). Install ROCm's HIP runtime (Debian: apt-get "
                          "install libamdhip64-5), set DLSTREAM_HIP_LIBRARY=<path>, or use " DLS__HINT_CPU_BACKEND ".",
                       why[0] != '\0' ? why : "no reason given");
  return NULL;
}

static bool dls__hip_load_symbols(dls__gpu *g, void *lib) {
#define DLS__HIP_RESOLVE_REQUIRED(version, name, params)                                                      \
  hip.name = (dls__PFN_##name)dlsym(lib, #name);                                                              \
  if (hip.name == NULL) {                                                                                     \
    dls__gpu_unavailable(g, "%s lacks " #name " (in ROCm %d.%d and newer). Install a newer ROCm, or use "      \
                            DLS__HINT_CPU_BACKEND ".",                                                        \
                         dls__hip_path, (version) / 10000, (version) / 100 % 100);                            \
    return false;                                                                                             \
  }
  DLS__HIP_REQUIRED_SYMBOLS(DLS__HIP_RESOLVE_REQUIRED)
  DLS__HIP_STRING_SYMBOLS(DLS__HIP_RESOLVE_REQUIRED)
#undef DLS__HIP_RESOLVE_REQUIRED
#define DLS__HIP_RESOLVE_OPTIONAL(version, name, params) hip.name = (dls__PFN_##name)dlsym(lib, #name);
  DLS__HIP_OPTIONAL_SYMBOLS(DLS__HIP_RESOLVE_OPTIONAL)
  DLS__HIP_NEWER_SYMBOLS(DLS__HIP_RESOLVE_OPTIONAL)
  DLS__HIP_RESOLVE_OPTIONAL(40200, hipGetStreamDeviceId, ())
#undef DLS__HIP_RESOLVE_OPTIONAL
  return true;
}

/* Why there is no device, in words a user can act on. */
static const char *dls__hip_no_device_reason(void) {
  if (access("/dev/kfd", F_OK) != 0)
    return "/dev/kfd does not exist: no AMD GPU, the amdgpu kernel driver is not loaded, or a container was "
           "started without --device=/dev/kfd";
  if (access("/dev/kfd", R_OK | W_OK) != 0)
    return "/dev/kfd is not readable and writable by this user: add the user to the 'render' (or 'video') group";
  return "the runtime sees no GPU it supports: check rocminfo and HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES";
}

static bool dls__hip_load_devices(dls__gpu *g) {
  int version = 0;
  hip.hipRuntimeGetVersion(&version);
  dls__hipError_t r = hip.hipInit(0);
  int n = 0;
  if (r == DLS__hipSuccess)
    r = hip.hipGetDeviceCount(&n);
  if (r != DLS__hipSuccess || n <= 0) {
    dls__gpu_unavailable(g, "no ROCm device: %s (HIP runtime %d.%d) loaded, but hipInit/hipGetDeviceCount gives %s "
                            "(%s), count %d; %s. Use " DLS__HINT_CPU_BACKEND " meanwhile.",
                         dls__hip_path, version / 10000000, version / 100000 % 100, dls__hip_error_name(r),
                         dls__hip_error_string(r), n, dls__hip_no_device_reason());
    return false;
  }
  return dls__gpu_devices_init(g, n) == DLS_OK;
}

static void dls__hip_load(void) {
  dls__gpu *g = &dls__hip_gpu;
  void *lib = dls__hip_open(g);
  if (lib == NULL)
    return;
  if (!dls__hip_load_symbols(g, lib) || !dls__hip_load_devices(g)) {
    /* The runtime stays loaded: unloading ROCm's runtime after hipInit is not safe. */
    return;
  }
#define DLS__HIP_FILL(slot, params, cuda, hip) DLS__GPU_SET(g, slot, hip);
  DLS__GPU_CALLS(DLS__HIP_FILL)
#undef DLS__HIP_FILL
  if (hip.hipStreamGetDevice == NULL && hip.hipGetStreamDeviceId == NULL)
    g->calls.stream_device = NULL;
}

#define DLS__GPU_PREFIX dls__hip
DLS__GPU_DEFINE_BACKEND(dls__hip_backend, "hip", kDLROCM, "rocm",
                        "the code object has no code for this GPU's gfx target (the embedded built-ins cover "
                        DLS_HIP_ARCHS "); compile the kernels for it with hipcc --genco --offload-arch=<gfx> and "
                        "set DLSTREAM_HIP_BUILTINS=<file> (docs/hip.md)",
                        hip);
