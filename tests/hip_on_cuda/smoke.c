/* SPDX-License-Identifier: Apache-2.0 */
/* Smoke test of the HIP-on-CUDA stand-in: its exports, and where a CUDA GPU is present, a round trip through it.
 *
 *   hip_on_cuda_smoke <libdls_hip_on_cuda*.so> pools|nopools
 *
 * Without libcuda.so.1 or a GPU (CI) only the exports are checked, and the
 * program says so. Exit status 0: passed; 1: failed. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "backend/gpu_pool_props.h"
#include "backend/hip_runtime_decls.h"

static struct {
#define SMOKE_FIELD(version, name, params) dls__PFN_##name name;
  DLS__HIP_REQUIRED_SYMBOLS(SMOKE_FIELD)
  DLS__HIP_OPTIONAL_SYMBOLS(SMOKE_FIELD)
  DLS__HIP_NEWER_SYMBOLS(SMOKE_FIELD)
  DLS__HIP_STRING_SYMBOLS(SMOKE_FIELD)
#undef SMOKE_FIELD
} hip;

static int failures;

#define EXPECT(cond, ...)                                                                                              \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      fprintf(stderr, "FAIL: " __VA_ARGS__);                                                                           \
      fprintf(stderr, "\n");                                                                                           \
      failures++;                                                                                                      \
    }                                                                                                                  \
  } while (0)

#define HIP_OK(call)                                                                                                   \
  do {                                                                                                                 \
    dls__hipError_t r_ = (call);                                                                                       \
    EXPECT(r_ == DLS__hipSuccess, "%s -> %u %s", #call, r_, hip.hipGetErrorName(r_));                                  \
  } while (0)

static int is_pool_symbol(const char *name) {
  return strcmp(name, "hipMemPoolCreate") == 0 || strcmp(name, "hipMemPoolDestroy") == 0 ||
         strcmp(name, "hipMemPoolSetAttribute") == 0 || strcmp(name, "hipMallocFromPoolAsync") == 0 ||
         strcmp(name, "hipMemPoolSetAccess") == 0;
}

/* Every entry point the backend may use is exported (pool ones only with pools). */
static void check_exports(void *lib, int pools) {
  int n = 0;
#define SMOKE_REQUIRE(version, name, params)                                                                           \
  hip.name = (dls__PFN_##name)dlsym(lib, #name);                                                                       \
  EXPECT(hip.name != NULL, "the stand-in does not export %s", #name);                                                  \
  n++;
  DLS__HIP_REQUIRED_SYMBOLS(SMOKE_REQUIRE)
  DLS__HIP_STRING_SYMBOLS(SMOKE_REQUIRE)
  DLS__HIP_NEWER_SYMBOLS(SMOKE_REQUIRE)
#undef SMOKE_REQUIRE
#define SMOKE_OPTIONAL(version, name, params)                                                                          \
  hip.name = (dls__PFN_##name)dlsym(lib, #name);                                                                       \
  if (is_pool_symbol(#name) && !pools)                                                                                 \
    EXPECT(hip.name == NULL, "the no-pools stand-in exports %s", #name);                                               \
  else                                                                                                                 \
    EXPECT(hip.name != NULL, "the stand-in does not export %s", #name);                                                \
  n++;
  DLS__HIP_OPTIONAL_SYMBOLS(SMOKE_OPTIONAL)
#undef SMOKE_OPTIONAL
  printf("exports: %d entry points checked (%s)\n", n, pools ? "with pools" : "without pools");
}

/* A stream-ordered round trip on device 0: memset, copy to mapped host
 * memory, event; then the same memset captured in a graph and replayed. */
static void round_trip(int pools) {
  int n = 0, dev = -1;
  HIP_OK(hip.hipGetDeviceCount(&n));
  EXPECT(n > 0, "no device");
  HIP_OK(hip.hipSetDevice(0));
  HIP_OK(hip.hipGetDevice(&dev));
  EXPECT(dev == 0, "hipGetDevice gave %d after hipSetDevice(0)", dev);
  dls__hipStream_t s = NULL;
  HIP_OK(hip.hipStreamCreateWithPriority(&s, DLS__hipStreamNonBlocking, 0));
  dls__hipDevice_t sdev = -1;
  HIP_OK(hip.hipStreamGetDevice(s, &sdev));
  EXPECT(sdev == 0, "hipStreamGetDevice gave %d", sdev);
  void *d = NULL, *h = NULL, *hd = NULL;
  HIP_OK(hip.hipMalloc(&d, 4096));
  HIP_OK(hip.hipHostMalloc(&h, 4096, DLS__hipHostMallocMapped | DLS__hipHostMallocPortable));
  HIP_OK(hip.hipHostGetDevicePointer(&hd, h, 0));
  dls__hipEvent_t e = NULL;
  HIP_OK(hip.hipEventCreateWithFlags(&e, DLS__hipEventDisableTiming));
  HIP_OK(hip.hipMemsetD8Async(d, 0x5A, 4096, s));
  HIP_OK(hip.hipMemcpyAsync(h, d, 4096, DLS__hipMemcpyDefault, s));
  HIP_OK(hip.hipEventRecord(e, s));
  HIP_OK(hip.hipEventSynchronize(e));
  HIP_OK(hip.hipEventQuery(e));
  EXPECT(((unsigned char *)h)[0] == 0x5A && ((unsigned char *)h)[4095] == 0x5A, "the copy did not arrive");
  /* Capture the memset with another value, replay twice. */
  dls__hipGraph_t graph = NULL;
  dls__hipGraphExec_t exec = NULL;
  dls__hipStreamCaptureStatus st = 9;
  unsigned long long id = 0;
  HIP_OK(hip.hipStreamBeginCapture(s, DLS__hipStreamCaptureModeGlobal));
  HIP_OK(hip.hipStreamGetCaptureInfo(s, &st, &id));
  EXPECT(st == DLS__hipStreamCaptureStatusActive && id != 0, "capture status %u id %llu", st, id);
  HIP_OK(hip.hipMemsetD8Async(d, 0x3C, 4096, s));
  HIP_OK(hip.hipMemcpyAsync(h, d, 4096, DLS__hipMemcpyDefault, s));
  HIP_OK(hip.hipStreamEndCapture(s, &graph));
  HIP_OK(hip.hipGraphInstantiateWithFlags(&exec, graph, DLS__hipGraphInstantiateFlagAutoFreeOnLaunch));
  HIP_OK(hip.hipGraphDestroy(graph));
  HIP_OK(hip.hipGraphLaunch(exec, s));
  HIP_OK(hip.hipGraphLaunch(exec, s));
  HIP_OK(hip.hipStreamSynchronize(s));
  EXPECT(((unsigned char *)h)[100] == 0x3C, "the replayed graph did not run");
  HIP_OK(hip.hipGraphExecDestroy(exec));
  int has_pools = -1;
  HIP_OK(hip.hipDeviceGetAttribute(&has_pools, DLS__hipDeviceAttributeMemoryPoolsSupported, 0));
  if (pools && has_pools) {
    dls__gpu_pool_props props;
    memset(&props, 0, sizeof props);
    props.alloc_type = DLS__hipMemAllocationTypePinned;
    props.location.type = DLS__hipMemLocationTypeDevice;
    dls__hipMemPool_t pool = NULL;
    void *p = NULL;
    HIP_OK(hip.hipMemPoolCreate(&pool, (const struct hipMemPoolProps *)(const void *)&props));
    HIP_OK(hip.hipMallocFromPoolAsync(&p, 1 << 20, pool, s));
    HIP_OK(hip.hipFreeAsync(p, s));
    HIP_OK(hip.hipStreamSynchronize(s));
    HIP_OK(hip.hipMemPoolDestroy(pool));
  }
  /* An error comes back in HIP's numbering, with HIP's name. */
  dls__hipError_t r = hip.hipSetDevice(1 << 20);
  EXPECT(r == DLS__hipErrorInvalidDevice, "hipSetDevice(huge) gave %u %s", r, hip.hipGetErrorName(r));
  EXPECT(strcmp(hip.hipGetErrorName(DLS__hipErrorNotReady), "hipErrorNotReady") == 0, "hipGetErrorName");
  HIP_OK(hip.hipEventDestroy(e));
  HIP_OK(hip.hipHostFree(h));
  HIP_OK(hip.hipFree(d));
  HIP_OK(hip.hipStreamDestroy(s));
  printf("round trip on device 0: %s (memory pools reported: %d)\n", failures ? "FAILED" : "passed", has_pools);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <libdls_hip_on_cuda*.so> pools|nopools\n", argv[0]);
    return 2;
  }
  int pools = strcmp(argv[2], "pools") == 0;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "FAIL: dlopen(%s): %s\n", argv[1], dlerror());
    return 1;
  }
  check_exports(lib, pools);
  if (failures)
    return 1;
  dls__hipError_t r = hip.hipInit(0);
  EXPECT(strcmp(hip.hipGetErrorName(r), "hipErrorUnknown") != 0 || r == DLS__hipErrorUnknown,
         "hipInit's result %u has no HIP name", r);
  if (r != DLS__hipSuccess) {
    printf("hipInit: %s (%s): no CUDA driver or GPU here, so only the exports were checked\n", hip.hipGetErrorName(r),
           hip.hipGetErrorString(r));
    return failures ? 1 : 0;
  }
  round_trip(pools);
  return failures ? 1 : 0;
}
