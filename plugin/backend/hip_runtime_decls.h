/* SPDX-License-Identifier: Apache-2.0 */
/* Our own declarations of the HIP runtime API subset dlstream uses, so neither ROCm nor its headers are needed to build.
 *
 * Names carry a dls__ prefix so this header coexists with the ROCm headers;
 * opaque handles use HIP's struct tags, so the function pointer types below
 * are type-compatible with hip_runtime_api.h's prototypes.
 * tests/c/test_hip_decls.c checks every value, layout and signature here
 * against the ROCm headers at compile time (where they are installed).
 *
 * HIP has no versioned lookup like cuGetProcAddress: every entry point is
 * found by name with dlsym in libamdhip64. The number next to each is the
 * ROCm release that has it (major * 10000 + minor * 100), read from the ELF
 * symbol version ROCm 5.2's libamdhip64.so.5 exports it under (hip_4.2 is
 * that library's oldest tag: "4.2 or older"); for the entry points 5.2's
 * library lacks, 60000 says that ROCm 6.0 has them. Their ABIs are the same
 * in ROCm 5 and 6. */
#ifndef DLSTREAM_BACKEND_HIP_RUNTIME_DECLS_H
#define DLSTREAM_BACKEND_HIP_RUNTIME_DECLS_H

#include <stddef.h>

/* ---- scalar types ----
 * hipError_t and the other enums have no negative value: unsigned int is
 * their compatible type with GCC and Clang, as for CUDA's. */
typedef unsigned int dls__hipError_t;
typedef unsigned int dls__hipDeviceAttribute_t;
typedef unsigned int dls__hipMemPoolAttr;
typedef unsigned int dls__hipMemcpyKind;
typedef unsigned int dls__hipStreamCaptureMode;
typedef unsigned int dls__hipStreamCaptureStatus;
typedef int dls__hipDevice_t;
typedef void *dls__hipDeviceptr_t;

/* ---- opaque handles: HIP's struct tags ---- */
typedef struct ihipStream_t *dls__hipStream_t;
typedef struct ihipEvent_t *dls__hipEvent_t;
typedef struct ihipModule_t *dls__hipModule_t;
typedef struct ihipModuleSymbol_t *dls__hipFunction_t;
typedef struct ihipMemPoolHandle_t *dls__hipMemPool_t;
typedef struct ihipGraph *dls__hipGraph_t;
typedef struct hipGraphExec *dls__hipGraphExec_t;

/* Host function queued by hipLaunchHostFunc (hipHostFn_t), and the older
 * stream callback of hipStreamAddCallback (hipStreamCallback_t). */
typedef void (*dls__hipHostFn_t)(void *user_data);
typedef void (*dls__hipStreamCallback_t)(dls__hipStream_t stream, dls__hipError_t status, void *user_data);

/* ---- constants ----
 * X(ROCm name, value). Each becomes DLS__<ROCm name>. hipError_t mostly
 * reuses CUDA's numbers, but not always (hipErrorInvalidKernelFile is
 * CUDA's INVALID_PTX, hipErrorInsufficientDriver 35 is not CUDA's 35), and
 * device attributes are numbered differently altogether. */
#define DLS__HIP_CONSTANTS(X)                             \
  X(hipSuccess, 0)                                        \
  X(hipErrorInvalidValue, 1)                              \
  X(hipErrorOutOfMemory, 2)                               \
  X(hipErrorNotInitialized, 3)                            \
  X(hipErrorDeinitialized, 4)                             \
  X(hipErrorInsufficientDriver, 35)                       \
  X(hipErrorInvalidDeviceFunction, 98)                    \
  X(hipErrorNoDevice, 100)                                \
  X(hipErrorInvalidDevice, 101)                           \
  X(hipErrorInvalidImage, 200)                            \
  X(hipErrorInvalidContext, 201)                          \
  X(hipErrorNoBinaryForGpu, 209)                          \
  X(hipErrorPeerAccessUnsupported, 217)                   \
  X(hipErrorInvalidKernelFile, 218)                       \
  X(hipErrorInvalidSource, 300)                           \
  X(hipErrorSharedObjectInitFailed, 303)                  \
  X(hipErrorInvalidHandle, 400)                           \
  X(hipErrorNotFound, 500)                                \
  X(hipErrorNotReady, 600)                                \
  X(hipErrorIllegalAddress, 700)                          \
  X(hipErrorLaunchOutOfResources, 701)                    \
  X(hipErrorPeerAccessAlreadyEnabled, 704)                \
  X(hipErrorPeerAccessNotEnabled, 705)                    \
  X(hipErrorContextIsDestroyed, 709)                      \
  X(hipErrorLaunchFailure, 719)                           \
  X(hipErrorNotSupported, 801)                            \
  X(hipErrorStreamCaptureUnsupported, 900)                \
  X(hipErrorStreamCaptureInvalidated, 901)                \
  X(hipErrorStreamCaptureMerge, 902)                      \
  X(hipErrorStreamCaptureUnmatched, 903)                  \
  X(hipErrorStreamCaptureUnjoined, 904)                   \
  X(hipErrorStreamCaptureIsolation, 905)                  \
  X(hipErrorStreamCaptureImplicit, 906)                   \
  X(hipErrorCapturedEvent, 907)                           \
  X(hipErrorStreamCaptureWrongThread, 908)                \
  X(hipErrorUnknown, 999)                                 \
  X(hipDeviceAttributeCanMapHostMemory, 3)                \
  X(hipDeviceAttributeComputeCapabilityMajor, 23)         \
  X(hipDeviceAttributeMaxThreadsPerMultiProcessor, 57)    \
  X(hipDeviceAttributeComputeCapabilityMinor, 61)         \
  X(hipDeviceAttributeMultiprocessorCount, 63)            \
  X(hipDeviceAttributeUnifiedAddressing, 85)              \
  X(hipDeviceAttributeMemoryPoolsSupported, 88)           \
  X(hipStreamDefault, 0x0)                                \
  X(hipStreamNonBlocking, 0x1)                            \
  X(hipEventDefault, 0x0)                                 \
  X(hipEventBlockingSync, 0x1)                            \
  X(hipEventDisableTiming, 0x2)                           \
  X(hipHostMallocPortable, 0x1)                           \
  X(hipHostMallocMapped, 0x2)                             \
  X(hipMemcpyDefault, 4)                                  \
  X(hipMemAllocationTypePinned, 0x1)                      \
  X(hipMemHandleTypeNone, 0x0)                            \
  X(hipMemLocationTypeDevice, 1)                          \
  X(hipMemAccessFlagsProtReadWrite, 3)                    \
  X(hipMemPoolAttrReleaseThreshold, 0x4)                  \
  X(hipStreamCaptureStatusNone, 0)                        \
  X(hipStreamCaptureStatusActive, 1)                      \
  X(hipStreamCaptureStatusInvalidated, 2)                 \
  X(hipStreamCaptureModeGlobal, 0)                        \
  X(hipStreamCaptureModeThreadLocal, 1)                   \
  X(hipStreamCaptureModeRelaxed, 2)                       \
  X(hipGraphInstantiateFlagAutoFreeOnLaunch, 1)

enum {
#define DLS__HIP_CONSTANT_ENUM(name, value) DLS__##name = (value),
  DLS__HIP_CONSTANTS(DLS__HIP_CONSTANT_ENUM)
#undef DLS__HIP_CONSTANT_ENUM
};

/* The per-thread default stream (hipStreamPerThread); the null stream is NULL. */
#define DLS__hipStreamPerThread ((dls__hipStream_t)2)

/* The first bytes of a clang offload bundle (what hipcc --genco writes) and
 * of its compressed form (newer ROCm); a bare code object is an ELF. */
#define DLS__HIP_BUNDLE_MAGIC "__CLANG_OFFLOAD_BUNDLE__"
#define DLS__HIP_COMPRESSED_BUNDLE_MAGIC "CCOB"

/* hipMemPoolCreate takes HIP's hipMemPoolProps: dlstream passes a
 * dls__gpu_pool_props (gpu_pool_props.h), which has its layout. */
struct hipMemPoolProps;
struct hipMemAccessDesc; /* read as dls__gpu_access_desc (gpu_pool_props.h) */

/* ---- entry points ----
 * X(ROCm version, name, (parameters)), oldest first within each group;
 * every one returns hipError_t except where DLS__HIP_STRING_SYMBOLS says
 * otherwise.
 * REQUIRED: the backend refuses to start without them.
 * OPTIONAL: features that degrade (no pools: hipMalloc, frees deferred
 *           behind events; no graph entry points: capture is refused with
 *           DLS_ERR_NOT_SUPPORTED; no stream-device query: a foreign
 *           stream's device is not checked).
 * NEWER:    optional, and missing from ROCm 5.2's library (hipLaunchHostFunc
 *           is declared by its headers but not exported: hipStreamAddCallback
 *           stands in for it). */
#define DLS__HIP_REQUIRED_SYMBOLS(X)                                                                  \
  X(40200, hipInit, (unsigned int flags))                                                             \
  X(40200, hipRuntimeGetVersion, (int *out_version))                                                  \
  X(40200, hipGetDeviceCount, (int *out_count))                                                       \
  X(40200, hipGetDevice, (int *out_device))                                                           \
  X(40200, hipSetDevice, (int device))                                                                \
  X(40200, hipDeviceGetAttribute, (int *out_value, dls__hipDeviceAttribute_t attribute, int device))  \
  X(40200, hipDeviceGetStreamPriorityRange, (int *out_least, int *out_greatest))                     \
  X(40200, hipStreamCreateWithPriority, (dls__hipStream_t *out_stream, unsigned int flags, int priority)) \
  X(40200, hipStreamDestroy, (dls__hipStream_t stream))                                               \
  X(40200, hipStreamSynchronize, (dls__hipStream_t stream))                                           \
  X(40200, hipStreamQuery, (dls__hipStream_t stream))                                                 \
  X(40200, hipStreamWaitEvent, (dls__hipStream_t stream, dls__hipEvent_t event, unsigned int flags))  \
  X(40200, hipStreamAddCallback, (dls__hipStream_t stream, dls__hipStreamCallback_t callback,         \
                                  void *user_data, unsigned int flags))                               \
  X(40200, hipEventCreateWithFlags, (dls__hipEvent_t *out_event, unsigned flags))                    \
  X(40200, hipEventDestroy, (dls__hipEvent_t event))                                                  \
  X(40200, hipEventRecord, (dls__hipEvent_t event, dls__hipStream_t stream))                          \
  X(40200, hipEventQuery, (dls__hipEvent_t event))                                                    \
  X(40200, hipEventSynchronize, (dls__hipEvent_t event))                                              \
  X(40200, hipEventElapsedTime, (float *out_ms, dls__hipEvent_t start, dls__hipEvent_t stop))         \
  X(40200, hipMalloc, (void **out_ptr, size_t size))                                                  \
  X(40200, hipFree, (void *ptr))                                                                      \
  X(40200, hipMemGetAddressRange, (dls__hipDeviceptr_t *out_base, size_t *out_size,                  \
                                   dls__hipDeviceptr_t ptr))                                          \
  X(40200, hipMemsetD8Async, (dls__hipDeviceptr_t dst, unsigned char value, size_t count,            \
                              dls__hipStream_t stream))                                               \
  X(40200, hipMemcpyAsync, (void *dst, const void *src, size_t size, dls__hipMemcpyKind kind,        \
                            dls__hipStream_t stream))                                                 \
  X(40200, hipHostMalloc, (void **out_host, size_t size, unsigned int flags))                         \
  X(40200, hipHostGetDevicePointer, (void **out_device, void *host, unsigned int flags))             \
  X(40200, hipHostFree, (void *host))                                                                 \
  X(40200, hipModuleLoadData, (dls__hipModule_t *out_module, const void *image))                     \
  X(40200, hipModuleUnload, (dls__hipModule_t module))                                                \
  X(40200, hipModuleGetFunction, (dls__hipFunction_t *out_function, dls__hipModule_t module,         \
                                  const char *name))                                                  \
  X(40200, hipModuleLaunchKernel, (dls__hipFunction_t f, unsigned int grid_x, unsigned int grid_y,   \
                                   unsigned int grid_z, unsigned int block_x, unsigned int block_y,   \
                                   unsigned int block_z, unsigned int shared_mem_bytes,               \
                                   dls__hipStream_t stream, void **params, void **extra))             \
  X(40200, hipDeviceCanAccessPeer, (int *out_can, int device, int peer))                              \
  X(40200, hipDeviceEnablePeerAccess, (int peer, unsigned int flags))

#define DLS__HIP_OPTIONAL_SYMBOLS(X)                                                                  \
  X(40300, hipStreamBeginCapture, (dls__hipStream_t stream, dls__hipStreamCaptureMode mode))          \
  X(40300, hipStreamEndCapture, (dls__hipStream_t stream, dls__hipGraph_t *out_graph))               \
  X(40300, hipGraphLaunch, (dls__hipGraphExec_t exec, dls__hipStream_t stream))                       \
  X(40300, hipGraphExecDestroy, (dls__hipGraphExec_t exec))                                           \
  X(40300, hipGraphDestroy, (dls__hipGraph_t graph))                                                  \
  X(40500, hipStreamGetCaptureInfo, (dls__hipStream_t stream, dls__hipStreamCaptureStatus *out_status, \
                                     unsigned long long *out_id))                                     \
  X(40500, hipGraphInstantiateWithFlags, (dls__hipGraphExec_t *out_exec, dls__hipGraph_t graph,      \
                                          unsigned long long flags))                                  \
  X(50000, hipThreadExchangeStreamCaptureMode, (dls__hipStreamCaptureMode *mode))                     \
  X(50100, hipMallocAsync, (void **out_ptr, size_t size, dls__hipStream_t stream))                    \
  X(50100, hipFreeAsync, (void *ptr, dls__hipStream_t stream))                                        \
  X(50100, hipMemPoolCreate, (dls__hipMemPool_t *out_pool, const struct hipMemPoolProps *props))     \
  X(50100, hipMemPoolDestroy, (dls__hipMemPool_t pool))                                               \
  X(50100, hipMemPoolSetAttribute, (dls__hipMemPool_t pool, dls__hipMemPoolAttr attribute, void *value)) \
  X(50100, hipMemPoolSetAccess, (dls__hipMemPool_t pool, const struct hipMemAccessDesc *desc, size_t count)) \
  X(50100, hipMallocFromPoolAsync, (void **out_ptr, size_t size, dls__hipMemPool_t pool,             \
                                    dls__hipStream_t stream))

#define DLS__HIP_NEWER_SYMBOLS(X)                                                                     \
  X(60000, hipLaunchHostFunc, (dls__hipStream_t stream, dls__hipHostFn_t fn, void *user_data))       \
  X(60000, hipStreamGetDevice, (dls__hipStream_t stream, dls__hipDevice_t *out_device))

/* The entry points that return something else than hipError_t. */
typedef const char *(*dls__PFN_hipGetErrorName)(dls__hipError_t error);
typedef const char *(*dls__PFN_hipGetErrorString)(dls__hipError_t error);
/* The device of a stream before hipStreamGetDevice (ROCm 5.2's profiler API). */
typedef int (*dls__PFN_hipGetStreamDeviceId)(dls__hipStream_t stream);
#define DLS__HIP_STRING_SYMBOLS(X)                                                                    \
  X(40200, hipGetErrorName, (dls__hipError_t error))                                                  \
  X(40200, hipGetErrorString, (dls__hipError_t error))

/* dls__PFN_<name>: the function pointer type of each entry point. */
#define DLS__HIP_PFN_TYPEDEF(version, name, params) typedef dls__hipError_t (*dls__PFN_##name) params;
DLS__HIP_REQUIRED_SYMBOLS(DLS__HIP_PFN_TYPEDEF)
DLS__HIP_OPTIONAL_SYMBOLS(DLS__HIP_PFN_TYPEDEF)
DLS__HIP_NEWER_SYMBOLS(DLS__HIP_PFN_TYPEDEF)
#undef DLS__HIP_PFN_TYPEDEF

#endif /* DLSTREAM_BACKEND_HIP_RUNTIME_DECLS_H */
