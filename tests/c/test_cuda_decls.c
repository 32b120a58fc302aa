/* SPDX-License-Identifier: Apache-2.0 */
/* Checks at compile time that plugin/backend/cuda_driver.h agrees with the CUDA toolkit's cuda.h. */
#include <stddef.h>
#include <stdio.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "backend/cuda_driver.h"
#include "decls_check.h"

/* Every constant has the toolkit's value. */
#define CHECK_CONSTANT(name, value) DECLS_SAME_VALUE(DLS__##name, name)
DLS__CUDA_CONSTANTS(CHECK_CONSTANT)

/* Scalar and handle types are the toolkit's (or compatible with them). */
#define SAME_TYPE DECLS_SAME_TYPE
SAME_TYPE(dls__CUresult, CUresult)
SAME_TYPE(dls__CUdevice_attribute, CUdevice_attribute)
SAME_TYPE(dls__CUmemPool_attribute, CUmemPool_attribute)
SAME_TYPE(dls__CUjit_option, CUjit_option)
SAME_TYPE(dls__CUfunction_attribute, CUfunction_attribute)
SAME_TYPE(dls__CUdriverProcAddressQueryResult, CUdriverProcAddressQueryResult)
SAME_TYPE(dls__CUstreamCaptureStatus, CUstreamCaptureStatus)
SAME_TYPE(dls__CUstreamCaptureMode, CUstreamCaptureMode)
SAME_TYPE(dls__CUdevice, CUdevice)
SAME_TYPE(dls__CUdeviceptr, CUdeviceptr)
SAME_TYPE(dls__cuuint64_t, cuuint64_t)
SAME_TYPE(dls__CUcontext, CUcontext)
SAME_TYPE(dls__CUmodule, CUmodule)
SAME_TYPE(dls__CUfunction, CUfunction)
SAME_TYPE(dls__CUstream, CUstream)
SAME_TYPE(dls__CUevent, CUevent)
SAME_TYPE(dls__CUmemoryPool, CUmemoryPool)
SAME_TYPE(dls__CUgraph, CUgraph)
SAME_TYPE(dls__CUgraphExec, CUgraphExec)
SAME_TYPE(dls__CUhostFn, CUhostFn)

/* The pool properties we pass have CUmemPoolProps's layout. */
DECLS_POOL_PROPS(CUmemPoolProps, allocType, handleTypes, location, win32SecurityAttributes, maxSize)
SAME_TYPE(const struct CUmemPoolProps_st *, const CUmemPoolProps *)
DECLS_ACCESS_DESC(CUmemAccessDesc)
SAME_TYPE(const struct CUmemAccessDesc_st *, const CUmemAccessDesc *)

/* Each entry point's type equals cudaTypedefs.h's PFN_<name>_v<version>:
 * the authoritative map from (name, version) to signature, so the version
 * we ask cuGetProcAddress for yields exactly the ABI we call. */
#define CHECK_PFN_VERSION(name, version, params)                                              \
  _Static_assert(__builtin_types_compatible_p(dls__PFN_##name, PFN_##name##_v##version),      \
                 #name " at version " #version " has another signature than dls__PFN_" #name);
DLS__CUDA_REQUIRED_SYMBOLS(CHECK_PFN_VERSION)
DLS__CUDA_OPTIONAL_SYMBOLS(CHECK_PFN_VERSION)
DLS__CUDA_OLD_ABI_SYMBOLS(CHECK_PFN_VERSION)
DLS__CUDA_TOOLS_SYMBOLS(CHECK_PFN_VERSION)
_Static_assert(__builtin_types_compatible_p(dls__PFN_cuGetProcAddress_v12000, PFN_cuGetProcAddress_v12000),
               "cuGetProcAddress_v2");
_Static_assert(__builtin_types_compatible_p(dls__PFN_cuGetProcAddress_v11030, PFN_cuGetProcAddress_v11030),
               "cuGetProcAddress");

/* ... and is compatible with the prototype cuda.h declares for the name
 * (the name is macro-expanded first, so cuMemAlloc checks cuMemAlloc_v2).
 * DLS__CUDA_OLD_ABI_SYMBOLS are exempt by definition: cuda.h's name now
 * means a newer ABI than the one asked for (the PFN check above holds). */
#define CHECK_PROTOTYPE(name, version, params) DECLS_SAME_PROTOTYPE(dls__PFN_##name, name)
DLS__CUDA_REQUIRED_SYMBOLS(CHECK_PROTOTYPE)
DLS__CUDA_OPTIONAL_SYMBOLS(CHECK_PROTOTYPE)
DLS__CUDA_TOOLS_SYMBOLS(CHECK_PROTOTYPE)
DECLS_SAME_PROTOTYPE(dls__PFN_cuGetProcAddress_v12000, cuGetProcAddress_v2)
SAME_TYPE(dls__PFN_cuStreamGetCaptureInfo_v12030, PFN_cuStreamGetCaptureInfo_v12030)
DECLS_SAME_PROTOTYPE(dls__PFN_cuStreamGetCaptureInfo_v12030, cuStreamGetCaptureInfo)

/* No version is newer than the toolkit that checked it. */
#define CHECK_NOT_NEWER(name, version, params) \
  _Static_assert((version) <= CUDA_VERSION, #name ": version newer than this cuda.h");
DLS__CUDA_REQUIRED_SYMBOLS(CHECK_NOT_NEWER)
DLS__CUDA_OPTIONAL_SYMBOLS(CHECK_NOT_NEWER)
DLS__CUDA_OLD_ABI_SYMBOLS(CHECK_NOT_NEWER)
DLS__CUDA_TOOLS_SYMBOLS(CHECK_NOT_NEWER)

int main(void) {
  /* Pointer constants are not integer constant expressions: checked here. */
  if (DLS__CU_STREAM_LEGACY != CU_STREAM_LEGACY || DLS__CU_STREAM_PER_THREAD != CU_STREAM_PER_THREAD) {
    fprintf(stderr, "FAIL: special stream handles differ from cuda.h\n");
    return 1;
  }
  int n = 0;
#define COUNT(name, version, params) ++n;
  DLS__CUDA_REQUIRED_SYMBOLS(COUNT)
  DLS__CUDA_OPTIONAL_SYMBOLS(COUNT)
  DLS__CUDA_OLD_ABI_SYMBOLS(COUNT)
  DLS__CUDA_TOOLS_SYMBOLS(COUNT)
#undef COUNT
  printf("cuda_driver.h matches cuda.h %d.%d: %d entry points checked\n", CUDA_VERSION / 1000,
         (CUDA_VERSION % 1000) / 10, n);
  return 0;
}
