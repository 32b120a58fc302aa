/* SPDX-License-Identifier: Apache-2.0 */
/* Our own declarations of the CUDA driver API subset dlstream uses, so no toolkit is needed to build.
 *
 * Names carry a dls__ prefix so this header coexists with the toolkit's
 * cuda.h; opaque handles use the toolkit's struct tags, so the function
 * pointer types below are type-compatible with cuda.h's prototypes.
 * tests/c/test_cuda_decls.c checks every value, layout and signature here
 * against the toolkit at compile time.
 *
 * Versions: each symbol is resolved with cuGetProcAddress at the CUDA
 * version written next to it, which is the version that introduced the ABI
 * its typedef describes (cudaTypedefs.h's PFN_<name>_v<version>). The driver
 * returns the newest variant not newer than the version asked for, so a
 * later variant with another signature (cuStreamGetCtx at 12050 takes three
 * arguments) is never handed to us. Everything needs cuGetProcAddress,
 * hence a driver of CUDA 11.3 or newer. */
#ifndef DLSTREAM_BACKEND_CUDA_DRIVER_H
#define DLSTREAM_BACKEND_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/* ---- scalar types ---- */

/* CUresult, CUdevice_attribute, CUmemPool_attribute, CUjit_option and
 * CUdriverProcAddressQueryResult are enums with no negative value: GCC and
 * Clang give them unsigned int as compatible type, and so do we. */
typedef unsigned int dls__CUresult;
typedef unsigned int dls__CUdevice_attribute;
typedef unsigned int dls__CUmemPool_attribute;
typedef unsigned int dls__CUjit_option;
typedef unsigned int dls__CUfunction_attribute;
typedef unsigned int dls__CUdriverProcAddressQueryResult;
typedef unsigned int dls__CUstreamCaptureStatus;
typedef unsigned int dls__CUstreamCaptureMode;
typedef int dls__CUdevice;                   /* CUdevice_v1 */
typedef unsigned long long dls__CUdeviceptr; /* CUdeviceptr_v2 (64-bit hosts) */
typedef uint64_t dls__cuuint64_t;
typedef uint32_t dls__cuuint32_t;

/* ---- opaque handles: the toolkit's struct tags ---- */
typedef struct CUctx_st *dls__CUcontext;
typedef struct CUmod_st *dls__CUmodule;
typedef struct CUfunc_st *dls__CUfunction;
typedef struct CUstream_st *dls__CUstream;
typedef struct CUevent_st *dls__CUevent;
typedef struct CUmemPoolHandle_st *dls__CUmemoryPool;
typedef struct CUgraph_st *dls__CUgraph;
typedef struct CUgraphExec_st *dls__CUgraphExec;

/* Host function queued by cuLaunchHostFunc (CUhostFn). */
typedef void (*dls__CUhostFn)(void *user_data);

/* ---- constants ----
 * X(toolkit name, value). Each becomes DLS__<toolkit name>; the decls test
 * compares every one with the toolkit's. */
#define DLS__CUDA_CONSTANTS(X)                             \
  X(CUDA_SUCCESS, 0)                                       \
  X(CUDA_ERROR_INVALID_VALUE, 1)                           \
  X(CUDA_ERROR_OUT_OF_MEMORY, 2)                           \
  X(CUDA_ERROR_NOT_INITIALIZED, 3)                         \
  X(CUDA_ERROR_DEINITIALIZED, 4)                           \
  X(CUDA_ERROR_STUB_LIBRARY, 34)                           \
  X(CUDA_ERROR_NO_DEVICE, 100)                             \
  X(CUDA_ERROR_INVALID_DEVICE, 101)                        \
  X(CUDA_ERROR_INVALID_IMAGE, 200)                         \
  X(CUDA_ERROR_INVALID_CONTEXT, 201)                       \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU, 209)                     \
  X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, 217)               \
  X(CUDA_ERROR_INVALID_PTX, 218)                           \
  X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, 221)                \
  X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222)               \
  X(CUDA_ERROR_INVALID_SOURCE, 300)                        \
  X(CUDA_ERROR_INVALID_HANDLE, 400)                        \
  X(CUDA_ERROR_NOT_FOUND, 500)                             \
  X(CUDA_ERROR_NOT_READY, 600)                             \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, 700)                       \
  X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701)               \
  X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, 704)           \
  X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, 705)               \
  X(CUDA_ERROR_LAUNCH_FAILED, 719)                         \
  X(CUDA_ERROR_NOT_PERMITTED, 800)                         \
  X(CUDA_ERROR_NOT_SUPPORTED, 801)                         \
  X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803)                \
  X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804)        \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900)            \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 901)            \
  X(CUDA_ERROR_STREAM_CAPTURE_MERGE, 902)                  \
  X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, 903)              \
  X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, 904)               \
  X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, 905)              \
  X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, 906)               \
  X(CUDA_ERROR_CAPTURED_EVENT, 907)                        \
  X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, 908)           \
  X(CUDA_ERROR_UNKNOWN, 999)                               \
  X(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 16)          \
  X(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 39) \
  X(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 19)           \
  X(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 41)            \
  X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 75)      \
  X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 76)      \
  X(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 115)       \
  X(CU_STREAM_DEFAULT, 0x0)                                \
  X(CU_STREAM_NON_BLOCKING, 0x1)                           \
  X(CU_EVENT_DEFAULT, 0x0)                                 \
  X(CU_EVENT_BLOCKING_SYNC, 0x1)                           \
  X(CU_EVENT_DISABLE_TIMING, 0x2)                          \
  X(CU_MEMHOSTALLOC_PORTABLE, 0x01)                        \
  X(CU_MEMHOSTALLOC_DEVICEMAP, 0x02)                       \
  X(CU_MEM_ALLOCATION_TYPE_PINNED, 0x1)                    \
  X(CU_MEM_HANDLE_TYPE_NONE, 0x0)                          \
  X(CU_MEM_LOCATION_TYPE_DEVICE, 0x1)                      \
  X(CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 0x3)               \
  X(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 4)                  \
  X(CU_FUNC_ATTRIBUTE_NUM_REGS, 4)                         \
  X(CU_JIT_ERROR_LOG_BUFFER, 5)                            \
  X(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, 6)                 \
  X(CU_GET_PROC_ADDRESS_DEFAULT, 0)                        \
  X(CU_GET_PROC_ADDRESS_LEGACY_STREAM, 1)                  \
  X(CU_GET_PROC_ADDRESS_SUCCESS, 0)                        \
  X(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, 1)               \
  X(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, 2)         \
  X(CU_STREAM_CAPTURE_STATUS_NONE, 0)                      \
  X(CU_STREAM_CAPTURE_STATUS_ACTIVE, 1)                    \
  X(CU_STREAM_CAPTURE_STATUS_INVALIDATED, 2)               \
  X(CU_STREAM_CAPTURE_MODE_GLOBAL, 0)                      \
  X(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, 1)                \
  X(CU_STREAM_CAPTURE_MODE_RELAXED, 2)                     \
  X(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, 1)   \
  X(CU_EVENT_INTERPROCESS, 0x4)                            \
  X(CU_IPC_HANDLE_SIZE, 64)                                \
  X(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, 0x1)               \
  X(CU_STREAM_WAIT_VALUE_GEQ, 0x0)                         \
  X(CU_STREAM_WRITE_VALUE_DEFAULT, 0x0)

enum {
#define DLS__CUDA_CONSTANT_ENUM(name, value) DLS__##name = (value),
  DLS__CUDA_CONSTANTS(DLS__CUDA_CONSTANT_ENUM)
#undef DLS__CUDA_CONSTANT_ENUM
};

/* The special stream handles (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD). */
#define DLS__CU_STREAM_LEGACY ((dls__CUstream)0x1)
#define DLS__CU_STREAM_PER_THREAD ((dls__CUstream)0x2)

/* The first bytes of the images cuModuleLoadData accepts besides PTX. */
#define DLS__CU_FATBIN_MAGIC 0xBA55ED50u /* little-endian, at offset 0 */
#define DLS__CU_ELF_MAGIC "\x7f" "ELF"

/* cuMemPoolCreate takes the toolkit's CUmemPoolProps: dlstream passes a
 * dls__gpu_pool_props (gpu_pool_props.h), which has its layout. */
struct CUmemPoolProps_st;
struct CUmemAccessDesc_st; /* read as dls__gpu_access_desc (gpu_pool_props.h) */

/* The interprocess handles and the device UUID, passed by value or pointer:
 * their layout is the toolkit's (64 and 16 bytes), and so are their tags. A
 * file that includes cuda.h first (the decls test) takes the toolkit's
 * definitions, which these repeat. */
#ifndef __cuda_cuda_h__
struct CUipcMemHandle_st {
  char reserved[64];
};
struct CUipcEventHandle_st {
  char reserved[64];
};
#endif
#ifndef CU_UUID_HAS_BEEN_DEFINED
#define CU_UUID_HAS_BEEN_DEFINED
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;
#endif

/* ---- entry points ----
 * X(name, version, (parameters)); every one returns CUresult.
 * REQUIRED: the backend refuses to start without them.
 * OPTIONAL: features that degrade (no pools: cuMemAlloc; no cuFuncLoad:
 *           cuFuncGetAttribute loads the function; no cuStreamGetDevice: a
 *           vaguer wrong-device message; no graph entry points: capture is
 *           refused with DLS_ERR_NOT_SUPPORTED; no IPC or stream memory
 *           operations: memory shared with other processes is refused).
 * OLD_ABI:  optional, asked for at an older ABI than cuda.h's prototype of
 *           the name now declares (cuStreamGetCaptureInfo is _v3 in cuda.h
 *           13; its 10.1 ABI is all we need and every driver serves it).
 * TOOLS:    not used by the backend; resolved by bench/bench_c.c for its
 *           raw-driver anchors. */
#define DLS__CUDA_REQUIRED_SYMBOLS(X)                                                                 \
  X(cuGetErrorName, 6000, (dls__CUresult error, const char **out_name))                               \
  X(cuGetErrorString, 6000, (dls__CUresult error, const char **out_string))                           \
  X(cuInit, 2000, (unsigned int flags))                                                               \
  X(cuDriverGetVersion, 2020, (int *out_version))                                                     \
  X(cuDeviceGetCount, 2000, (int *out_count))                                                         \
  X(cuDeviceGet, 2000, (dls__CUdevice *out_device, int ordinal))                                      \
  X(cuDeviceGetAttribute, 2000, (int *out_value, dls__CUdevice_attribute attribute, dls__CUdevice device)) \
  X(cuDevicePrimaryCtxRetain, 7000, (dls__CUcontext *out_ctx, dls__CUdevice device))                  \
  X(cuDevicePrimaryCtxRelease, 11000, (dls__CUdevice device))                                         \
  X(cuCtxGetCurrent, 4000, (dls__CUcontext *out_ctx))                                                 \
  X(cuCtxSetCurrent, 4000, (dls__CUcontext ctx))                                                      \
  X(cuCtxGetStreamPriorityRange, 5050, (int *out_least, int *out_greatest))                           \
  X(cuStreamCreateWithPriority, 5050, (dls__CUstream *out_stream, unsigned int flags, int priority))  \
  X(cuStreamDestroy, 4000, (dls__CUstream stream))                                                    \
  X(cuStreamSynchronize, 2000, (dls__CUstream stream))                                                \
  X(cuStreamQuery, 2000, (dls__CUstream stream))                                                      \
  X(cuStreamWaitEvent, 3020, (dls__CUstream stream, dls__CUevent event, unsigned int flags))          \
  X(cuStreamGetCtx, 9020, (dls__CUstream stream, dls__CUcontext *out_ctx))                            \
  X(cuLaunchHostFunc, 10000, (dls__CUstream stream, dls__CUhostFn fn, void *user_data))               \
  X(cuEventCreate, 2000, (dls__CUevent *out_event, unsigned int flags))                               \
  X(cuEventDestroy, 4000, (dls__CUevent event))                                                       \
  X(cuEventRecord, 2000, (dls__CUevent event, dls__CUstream stream))                                  \
  X(cuEventQuery, 2000, (dls__CUevent event))                                                         \
  X(cuEventSynchronize, 2000, (dls__CUevent event))                                                   \
  X(cuEventElapsedTime, 12080, (float *out_ms, dls__CUevent start, dls__CUevent end))                 \
  X(cuMemAlloc, 3020, (dls__CUdeviceptr *out_ptr, size_t size))                                       \
  X(cuMemFree, 3020, (dls__CUdeviceptr ptr))                                                          \
  X(cuMemGetAddressRange, 3020, (dls__CUdeviceptr *out_base, size_t *out_size, dls__CUdeviceptr ptr)) \
  X(cuMemsetD8Async, 3020, (dls__CUdeviceptr dst, unsigned char value, size_t count, dls__CUstream stream)) \
  X(cuMemcpyAsync, 4000, (dls__CUdeviceptr dst, dls__CUdeviceptr src, size_t size, dls__CUstream stream)) \
  X(cuMemHostAlloc, 2020, (void **out_host, size_t size, unsigned int flags))                         \
  X(cuMemHostGetDevicePointer, 3020, (dls__CUdeviceptr *out_device, void *host, unsigned int flags))  \
  X(cuMemFreeHost, 2000, (void *host))                                                                \
  X(cuModuleLoadDataEx, 2010, (dls__CUmodule *out_module, const void *image, unsigned int noptions,   \
                               dls__CUjit_option *options, void **option_values))                     \
  X(cuModuleUnload, 2000, (dls__CUmodule module))                                                     \
  X(cuModuleGetFunction, 2000, (dls__CUfunction *out_function, dls__CUmodule module, const char *name)) \
  X(cuFuncGetAttribute, 2020, (int *out_value, dls__CUfunction_attribute attribute, dls__CUfunction f)) \
  X(cuLaunchKernel, 4000, (dls__CUfunction f, unsigned int grid_x, unsigned int grid_y,               \
                           unsigned int grid_z, unsigned int block_x, unsigned int block_y,           \
                           unsigned int block_z, unsigned int shared_mem_bytes, dls__CUstream stream, \
                           void **params, void **extra))                                          \
  X(cuDeviceCanAccessPeer, 4000, (int *out_can, dls__CUdevice device, dls__CUdevice peer))            \
  X(cuCtxEnablePeerAccess, 4000, (dls__CUcontext peer_ctx, unsigned int flags))                       \
  X(cuMemcpyPeerAsync, 4000, (dls__CUdeviceptr dst, dls__CUcontext dst_ctx, dls__CUdeviceptr src,     \
                              dls__CUcontext src_ctx, size_t size, dls__CUstream stream))

#define DLS__CUDA_OPTIONAL_SYMBOLS(X)                                                                 \
  X(cuMemPoolCreate, 11020, (dls__CUmemoryPool *out_pool, const struct CUmemPoolProps_st *props))    \
  X(cuMemPoolDestroy, 11020, (dls__CUmemoryPool pool))                                                \
  X(cuMemPoolSetAttribute, 11020, (dls__CUmemoryPool pool, dls__CUmemPool_attribute attribute, void *value)) \
  X(cuMemPoolSetAccess, 11020, (dls__CUmemoryPool pool, const struct CUmemAccessDesc_st *map, size_t count)) \
  X(cuMemAllocFromPoolAsync, 11020, (dls__CUdeviceptr *out_ptr, size_t size, dls__CUmemoryPool pool,  \
                                     dls__CUstream stream))                                           \
  X(cuMemFreeAsync, 11020, (dls__CUdeviceptr ptr, dls__CUstream stream))                              \
  X(cuFuncLoad, 12040, (dls__CUfunction f))                                                           \
  X(cuStreamGetDevice, 12080, (dls__CUstream stream, dls__CUdevice *out_device))                      \
  X(cuMemAllocAsync, 11020, (dls__CUdeviceptr *out_ptr, size_t size, dls__CUstream stream))           \
  X(cuStreamBeginCapture, 10010, (dls__CUstream stream, dls__CUstreamCaptureMode mode))               \
  X(cuStreamEndCapture, 10000, (dls__CUstream stream, dls__CUgraph *out_graph))                       \
  X(cuGraphInstantiateWithFlags, 11040, (dls__CUgraphExec *out_exec, dls__CUgraph graph,              \
                                         unsigned long long flags))                                   \
  X(cuGraphLaunch, 10000, (dls__CUgraphExec exec, dls__CUstream stream))                              \
  X(cuGraphExecDestroy, 10000, (dls__CUgraphExec exec))                                               \
  X(cuGraphDestroy, 10000, (dls__CUgraph graph))                                                      \
  X(cuThreadExchangeStreamCaptureMode, 10010, (dls__CUstreamCaptureMode *mode))                       \
  X(cuIpcGetMemHandle, 4010, (struct CUipcMemHandle_st *out_handle, dls__CUdeviceptr ptr))           \
  X(cuIpcOpenMemHandle, 11000, (dls__CUdeviceptr *out_ptr, struct CUipcMemHandle_st handle,           \
                                unsigned int flags))                                                  \
  X(cuIpcCloseMemHandle, 4010, (dls__CUdeviceptr ptr))                                                \
  X(cuIpcGetEventHandle, 4010, (struct CUipcEventHandle_st *out_handle, dls__CUevent event))          \
  X(cuIpcOpenEventHandle, 4010, (dls__CUevent *out_event, struct CUipcEventHandle_st handle))         \
  X(cuStreamWaitValue32, 11070, (dls__CUstream stream, dls__CUdeviceptr addr, dls__cuuint32_t value,  \
                                 unsigned int flags))                                                 \
  X(cuStreamWriteValue32, 11070, (dls__CUstream stream, dls__CUdeviceptr addr, dls__cuuint32_t value, \
                                  unsigned int flags))                                                \
  X(cuDeviceGetUuid, 11040, (struct CUuuid_st *out_uuid, dls__CUdevice device))                      \
  X(cuStreamIsCapturing, 10000, (dls__CUstream stream, dls__CUstreamCaptureStatus *out_status))

#define DLS__CUDA_OLD_ABI_SYMBOLS(X)                                                                  \
  X(cuStreamGetCaptureInfo, 10010, (dls__CUstream stream, dls__CUstreamCaptureStatus *out_status,     \
                                    dls__cuuint64_t *out_id))

/* Also used by tests/hip_on_cuda, the HIP-on-CUDA stand-in. */
#define DLS__CUDA_TOOLS_SYMBOLS(X)                                                                    \
  X(cuStreamCreate, 2000, (dls__CUstream *out_stream, unsigned int flags))                            \
  X(cuDeviceGetDefaultMemPool, 11020, (dls__CUmemoryPool *out_pool, dls__CUdevice device))           \
  X(cuCtxSynchronize, 2000, (void))                                                                   \
  X(cuCtxGetDevice, 2000, (dls__CUdevice *out_device))

/* dls__PFN_<name>: the function pointer type of each entry point. */
#define DLS__CUDA_PFN_TYPEDEF(name, version, params) typedef dls__CUresult (*dls__PFN_##name) params;
DLS__CUDA_REQUIRED_SYMBOLS(DLS__CUDA_PFN_TYPEDEF)
DLS__CUDA_OPTIONAL_SYMBOLS(DLS__CUDA_PFN_TYPEDEF)
DLS__CUDA_OLD_ABI_SYMBOLS(DLS__CUDA_PFN_TYPEDEF)
DLS__CUDA_TOOLS_SYMBOLS(DLS__CUDA_PFN_TYPEDEF)
#undef DLS__CUDA_PFN_TYPEDEF

/* cuStreamGetCaptureInfo at CUDA 12.3's ABI (what cuda.h 13 declares):
 * besides the state and id, optional (NULL) outputs for the graph, its
 * dependencies and their edge data. Resolved as well as the 10.1 ABI of
 * DLS__CUDA_OLD_ABI_SYMBOLS; either serves, the newest the driver has wins. */
struct CUgraphNode_st;
struct CUgraphEdgeData_st;
typedef dls__CUresult (*dls__PFN_cuStreamGetCaptureInfo_v12030)(dls__CUstream stream,
                                                                dls__CUstreamCaptureStatus *out_status,
                                                                dls__cuuint64_t *out_id, dls__CUgraph *out_graph,
                                                                struct CUgraphNode_st *const **out_dependencies,
                                                                const struct CUgraphEdgeData_st **out_edge_data,
                                                                size_t *out_ndependencies);

/* The two entry points found with dlsym: cuGetProcAddress_v2 (CUDA 12.0,
 * exported under that name) and the original cuGetProcAddress (11.3). */
typedef dls__CUresult (*dls__PFN_cuGetProcAddress_v12000)(const char *symbol, void **out_fn, int cuda_version,
                                                          dls__cuuint64_t flags,
                                                          dls__CUdriverProcAddressQueryResult *out_status);
typedef dls__CUresult (*dls__PFN_cuGetProcAddress_v11030)(const char *symbol, void **out_fn, int cuda_version,
                                                          dls__cuuint64_t flags);

#endif /* DLSTREAM_BACKEND_CUDA_DRIVER_H */
