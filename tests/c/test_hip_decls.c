/* SPDX-License-Identifier: Apache-2.0 */
/* Checks at compile time that plugin/backend/hip_runtime_decls.h agrees with the ROCm headers' hip_runtime_api.h. */
#include <stddef.h>
#include <stdio.h>

#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>

#include "backend/hip_runtime_decls.h"
#include "decls_check.h"

/* Every constant has the headers' value (enumerators and macros alike). */
#define CHECK_CONSTANT(name, value) DECLS_SAME_VALUE(DLS__##name, name)
DLS__HIP_CONSTANTS(CHECK_CONSTANT)

/* Scalar and handle types are HIP's (or compatible with them). */
#define SAME_TYPE DECLS_SAME_TYPE
SAME_TYPE(dls__hipError_t, hipError_t)
SAME_TYPE(dls__hipDeviceAttribute_t, hipDeviceAttribute_t)
SAME_TYPE(dls__hipMemPoolAttr, hipMemPoolAttr)
SAME_TYPE(dls__hipMemcpyKind, hipMemcpyKind)
SAME_TYPE(dls__hipStreamCaptureMode, hipStreamCaptureMode)
SAME_TYPE(dls__hipStreamCaptureStatus, hipStreamCaptureStatus)
SAME_TYPE(dls__hipDevice_t, hipDevice_t)
SAME_TYPE(dls__hipDeviceptr_t, hipDeviceptr_t)
SAME_TYPE(dls__hipStream_t, hipStream_t)
SAME_TYPE(dls__hipEvent_t, hipEvent_t)
SAME_TYPE(dls__hipModule_t, hipModule_t)
SAME_TYPE(dls__hipFunction_t, hipFunction_t)
SAME_TYPE(dls__hipMemPool_t, hipMemPool_t)
SAME_TYPE(dls__hipGraph_t, hipGraph_t)
SAME_TYPE(dls__hipGraphExec_t, hipGraphExec_t)
SAME_TYPE(dls__hipHostFn_t, hipHostFn_t)
SAME_TYPE(dls__hipStreamCallback_t, hipStreamCallback_t)

/* The pool properties we pass have hipMemPoolProps's layout (ROCm 5.2's: the
 * 64 bytes after the security attributes are `reserved`; ROCm 6 has maxSize
 * there first). */
#if HIP_VERSION_MAJOR >= 6
DECLS_POOL_PROPS(hipMemPoolProps, allocType, handleTypes, location, win32SecurityAttributes, maxSize)
DECLS_ACCESS_DESC(hipMemAccessDesc)
#else
DECLS_POOL_PROPS(hipMemPoolProps, allocType, handleTypes, location, win32SecurityAttributes, reserved)
DECLS_ACCESS_DESC(hipMemAccessDesc)
#endif
SAME_TYPE(const struct hipMemPoolProps *, const hipMemPoolProps *)

/* Each entry point's type is compatible with the headers' prototype. */
#define CHECK_PROTOTYPE(version, name, params) DECLS_SAME_PROTOTYPE(dls__PFN_##name, name)
DLS__HIP_REQUIRED_SYMBOLS(CHECK_PROTOTYPE)
DLS__HIP_OPTIONAL_SYMBOLS(CHECK_PROTOTYPE)
DLS__HIP_STRING_SYMBOLS(CHECK_PROTOTYPE)
DECLS_SAME_PROTOTYPE(dls__PFN_hipGetStreamDeviceId, hipGetStreamDeviceId)

/* Entry points newer than these headers are checked where the headers have them. */
#define ROCM_VERSION_OF_HEADERS (HIP_VERSION_MAJOR * 10000 + HIP_VERSION_MINOR * 100)
#if HIP_VERSION_MAJOR >= 6
DLS__HIP_NEWER_SYMBOLS(CHECK_PROTOTYPE)
#else
/* hipLaunchHostFunc: declared by 5.2's headers, exported only by newer libraries. */
DECLS_SAME_PROTOTYPE(dls__PFN_hipLaunchHostFunc, hipLaunchHostFunc)
#endif

/* No REQUIRED or OPTIONAL entry point claims a ROCm newer than the headers that checked it
 * (their versions come from the 5.2 library's symbol versions: docs in hip_runtime_decls.h). */
#define CHECK_NOT_NEWER(version, name, params) \
  _Static_assert((version) <= ROCM_VERSION_OF_HEADERS, #name ": version newer than these headers");
DLS__HIP_REQUIRED_SYMBOLS(CHECK_NOT_NEWER)
DLS__HIP_OPTIONAL_SYMBOLS(CHECK_NOT_NEWER)

int main(void) {
  if (DLS__hipStreamPerThread != hipStreamPerThread) {
    fprintf(stderr, "FAIL: hipStreamPerThread differs from hip_runtime_api.h\n");
    return 1;
  }
  int n = 0, newer = 0;
#define COUNT(version, name, params) ++n;
  DLS__HIP_REQUIRED_SYMBOLS(COUNT)
  DLS__HIP_OPTIONAL_SYMBOLS(COUNT)
#undef COUNT
#define COUNT_NEWER(version, name, params) ++newer;
  DLS__HIP_NEWER_SYMBOLS(COUNT_NEWER)
#undef COUNT_NEWER
  printf("hip_runtime_decls.h matches ROCm %d.%d's hip_runtime_api.h: %d entry points checked", HIP_VERSION_MAJOR,
         HIP_VERSION_MINOR, n + 3 + (HIP_VERSION_MAJOR >= 6 ? newer : 1));
  if (HIP_VERSION_MAJOR < 6)
    printf(" (hipStreamGetDevice is newer than these headers: not checked)");
  printf("\n");
  return 0;
}
