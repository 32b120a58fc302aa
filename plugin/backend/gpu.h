/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU backends' shared core: one implementation of the vtable's GPU methods over a vendor-neutral call table.
 *
 * CUDA's driver API and HIP's runtime API have the same shape for streams,
 * events, pools, modules, launches, host functions and graphs, so the
 * methods are written once (gpu_*.c) against `dls__gpu`, a struct each
 * vendor's loader (cuda_loader.c, hip_loader.c) fills: the call table, a
 * few constants and hooks where the vendors really differ (library and
 * symbols, error names, contexts against devices, built-in images).
 *
 * Calls through the table: every slot holds the vendor's entry point itself
 * where its ABI is the neutral one (handles and device addresses as void *,
 * results as unsigned int), so a driver call costs one indirect call, as
 * it did before the split; an adapter in the loader only where the vendors'
 * signatures differ (hipMemcpyAsync's extra kind, hipSetDevice's ordinal). */
#ifndef DLSTREAM_BACKEND_GPU_H
#define DLSTREAM_BACKEND_GPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/gpu_pool_props.h"
#include "base/error.h"
#include "kernels/builtin_table.h"

/* A vendor's result code (CUresult, hipError_t); 0 is success for both. */
typedef unsigned int dls__gpu_result;
#define DLS__GPU_OK 0u

/* Host function queued by host_func (CUhostFn, hipHostFn_t). */
typedef void (*dls__gpu_host_fn)(void *user_data);

/* X(slot, neutral parameters, CUDA, HIP): every driver call the shared
 * methods make. The CUDA and HIP columns name the vendor's entry point (a
 * field of its loader's symbol table), an adapter in its loader, or 0 where
 * the vendor has none; each loader reads only its own column. The record, the wait and the capture question come
 * first: their slots then share a cache line with the consts their hot paths read (dls__gpu_stream_direct), which
 * a driver call between two of dlstream's calls may have evicted. */
#define DLS__GPU_CALLS(X)                                                                                        \
  X(event_record, (void *event, void *stream), cu.cuEventRecord, hip.hipEventRecord)                             \
  X(stream_wait_event, (void *stream, void *event, unsigned flags), cu.cuStreamWaitEvent, hip.hipStreamWaitEvent) \
  X(capture_state, (void *stream, unsigned *out_status), cu.cuStreamIsCapturing, 0)                              \
  X(capture_info, (void *stream, unsigned *out_status, unsigned long long *out_id),                              \
    dls__cuda_cuStreamGetCaptureInfo, hip.hipStreamGetCaptureInfo)                                               \
  X(ctx_get, (void **out_ctx), cu.cuCtxGetCurrent, dls__hip_hipGetDevice)                                        \
  X(ctx_set, (void *ctx), cu.cuCtxSetCurrent, dls__hip_hipSetDevice)                                             \
  X(device_attribute, (int *out_value, unsigned attribute, int device), cu.cuDeviceGetAttribute,                 \
    hip.hipDeviceGetAttribute)                                                                                   \
  X(priority_range, (int *out_least, int *out_greatest), cu.cuCtxGetStreamPriorityRange,                         \
    hip.hipDeviceGetStreamPriorityRange)                                                                         \
  X(stream_create, (void **out_stream, unsigned flags, int priority), cu.cuStreamCreateWithPriority,             \
    hip.hipStreamCreateWithPriority)                                                                             \
  X(stream_destroy, (void *stream), cu.cuStreamDestroy, hip.hipStreamDestroy)                                    \
  X(stream_synchronize, (void *stream), cu.cuStreamSynchronize, hip.hipStreamSynchronize)                        \
  X(stream_query, (void *stream), cu.cuStreamQuery, hip.hipStreamQuery)                                          \
  X(stream_context, (void *stream, void **out_ctx), cu.cuStreamGetCtx, 0)                                        \
  X(stream_device, (void *stream, int *out_device), cu.cuStreamGetDevice, dls__hip_hipStreamGetDevice)                \
  X(host_func, (void *stream, dls__gpu_host_fn fn, void *user_data), cu.cuLaunchHostFunc, dls__hip_hipLaunchHostFunc) \
  X(event_create, (void **out_event, unsigned flags), cu.cuEventCreate, hip.hipEventCreateWithFlags)             \
  X(event_destroy, (void *event), cu.cuEventDestroy, hip.hipEventDestroy)                                        \
  X(event_query, (void *event), cu.cuEventQuery, hip.hipEventQuery)                                              \
  X(event_synchronize, (void *event), cu.cuEventSynchronize, hip.hipEventSynchronize)                            \
  X(event_elapsed, (float *out_ms, void *start, void *end), cu.cuEventElapsedTime, hip.hipEventElapsedTime)      \
  X(mem_alloc, (void **out_ptr, size_t size), cu.cuMemAlloc, hip.hipMalloc)                                      \
  X(mem_free, (void *ptr), cu.cuMemFree, hip.hipFree)                                                            \
  X(mem_alloc_async, (void **out_ptr, size_t size, void *stream), cu.cuMemAllocAsync, hip.hipMallocAsync)        \
  X(mem_free_async, (void *ptr, void *stream), cu.cuMemFreeAsync, hip.hipFreeAsync)                              \
  X(pool_create, (void **out_pool, const dls__gpu_pool_props *props), cu.cuMemPoolCreate,                        \
    hip.hipMemPoolCreate)                                                                                        \
  X(pool_destroy, (void *pool), cu.cuMemPoolDestroy, hip.hipMemPoolDestroy)                                      \
  X(pool_set_attribute, (void *pool, unsigned attribute, void *value), cu.cuMemPoolSetAttribute,                 \
    hip.hipMemPoolSetAttribute)                                                                                  \
  X(pool_set_access, (void *pool, const dls__gpu_access_desc *desc, size_t count), cu.cuMemPoolSetAccess,       \
    hip.hipMemPoolSetAccess)                                                                                     \
  X(pool_alloc_async, (void **out_ptr, size_t size, void *pool, void *stream), cu.cuMemAllocFromPoolAsync,       \
    hip.hipMallocFromPoolAsync)                                                                                  \
  X(address_range, (void **out_base, size_t *out_size, void *ptr), cu.cuMemGetAddressRange,                      \
    hip.hipMemGetAddressRange)                                                                                   \
  X(memset8_async, (void *dst, unsigned char value, size_t count, void *stream), cu.cuMemsetD8Async,             \
    hip.hipMemsetD8Async)                                                                                        \
  X(memcpy_async, (void *dst, const void *src, size_t size, void *stream), cu.cuMemcpyAsync,                     \
    dls__hip_hipMemcpyAsync)                                                                                       \
  X(memcpy_peer_async, (void *dst, void *dst_ctx, const void *src, void *src_ctx, size_t size, void *stream),    \
    cu.cuMemcpyPeerAsync, 0)                                                                                     \
  X(host_alloc, (void **out_host, size_t size, unsigned flags), cu.cuMemHostAlloc, hip.hipHostMalloc)            \
  X(host_device_pointer, (void **out_device, void *host, unsigned flags), cu.cuMemHostGetDevicePointer,          \
    hip.hipHostGetDevicePointer)                                                                                 \
  X(host_free, (void *host), cu.cuMemFreeHost, hip.hipHostFree)                                                  \
  X(module_load, (void **out_module, const void *image, unsigned noptions, unsigned *options, void **values),     \
    cu.cuModuleLoadDataEx, dls__hip_hipModuleLoadData)                                                                 \
  X(module_unload, (void *module), cu.cuModuleUnload, hip.hipModuleUnload)                                       \
  X(module_function, (void **out_function, void *module, const char *name), cu.cuModuleGetFunction,              \
    hip.hipModuleGetFunction)                                                                                    \
  X(function_load, (void *function), dls__cuda_cuFuncLoad, 0)                                                 \
  X(launch,                                                                                                      \
    (void *function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x, unsigned block_y,      \
     unsigned block_z, unsigned shared_mem_bytes, void *stream, void **params, void **extra),                    \
    cu.cuLaunchKernel, hip.hipModuleLaunchKernel)                                                                \
  X(capture_begin, (void *stream, unsigned mode), cu.cuStreamBeginCapture, hip.hipStreamBeginCapture)            \
  X(capture_end, (void *stream, void **out_graph), cu.cuStreamEndCapture, hip.hipStreamEndCapture)               \
  X(capture_mode_exchange, (unsigned *mode), cu.cuThreadExchangeStreamCaptureMode,                               \
    hip.hipThreadExchangeStreamCaptureMode)                                                                      \
  X(graph_instantiate, (void **out_exec, void *graph, unsigned long long flags), cu.cuGraphInstantiateWithFlags, \
    hip.hipGraphInstantiateWithFlags)                                                                            \
  X(graph_destroy, (void *graph), cu.cuGraphDestroy, hip.hipGraphDestroy)                                        \
  X(graph_launch, (void *exec, void *stream), cu.cuGraphLaunch, hip.hipGraphLaunch)                              \
  X(graph_exec_destroy, (void *exec), cu.cuGraphExecDestroy, hip.hipGraphExecDestroy)                            \
  X(peer_can_access, (int *out_can, int device, int peer), cu.cuDeviceCanAccessPeer, hip.hipDeviceCanAccessPeer) \
  X(peer_enable, (void *peer_ctx, unsigned flags), cu.cuCtxEnablePeerAccess, dls__hip_hipDeviceEnablePeerAccess) \
  /* memory shared with other processes (gpu_ipc.c); HIP: not wired yet (0), so refused */                      \
  X(ipc_mem_get, (void *out_bytes, void *ptr), cu.cuIpcGetMemHandle, 0)                                          \
  X(ipc_mem_open, (void **out_ptr, const void *bytes, unsigned flags), dls__cuda_cuIpcOpenMemHandle, 0)          \
  X(ipc_mem_close, (void *ptr), cu.cuIpcCloseMemHandle, 0)                                                       \
  X(ipc_event_get, (void *out_bytes, void *event), cu.cuIpcGetEventHandle, 0)                                    \
  X(ipc_event_open, (void **out_event, const void *bytes), dls__cuda_cuIpcOpenEventHandle, 0)                    \
  X(stream_wait_value32, (void *stream, void *addr, uint32_t value, unsigned flags), cu.cuStreamWaitValue32, 0)  \
  X(stream_write_value32, (void *stream, void *addr, uint32_t value, unsigned flags), cu.cuStreamWriteValue32, 0) \
  X(device_uuid, (void *out_uuid, int device), cu.cuDeviceGetUuid, 0)

/* dls__gpu_fn_<slot>: the neutral type of each call. */
#define DLS__GPU_FN_TYPEDEF(slot, params, cuda, hip) typedef dls__gpu_result(*dls__gpu_fn_##slot) params;
DLS__GPU_CALLS(DLS__GPU_FN_TYPEDEF)
#undef DLS__GPU_FN_TYPEDEF

typedef struct dls__gpu_calls {
#define DLS__GPU_CALL_FIELD(slot, params, cuda, hip) dls__gpu_fn_##slot slot;
  DLS__GPU_CALLS(DLS__GPU_CALL_FIELD)
#undef DLS__GPU_CALL_FIELD
} dls__gpu_calls;

/* The vendor's name of each call, for messages ("cuStreamQuery"). */
typedef struct dls__gpu_names {
#define DLS__GPU_NAME_FIELD(slot, params, cuda, hip) const char *slot;
  DLS__GPU_CALLS(DLS__GPU_NAME_FIELD)
#undef DLS__GPU_NAME_FIELD
} dls__gpu_names;

/* "cu.cuStreamQuery" -> "cuStreamQuery"; an adapter is named after the
 * entry point it adapts: "dls__hip_hipMemcpyAsync" -> "hipMemcpyAsync". */
DLS__INTERNAL const char *dls__gpu_call_name(const char *column);

/* Stores a vendor's entry point in a slot, with its name: `fn` is the
 * vendor's own typed pointer (or an adapter), whose ABI is the slot's by the
 * rule above; the detour through void (*)(void) is the C way to say so. */
#define DLS__GPU_SET(g, slot, fn) \
  ((g)->calls.slot = (dls__gpu_fn_##slot)(void (*)(void))(fn), (g)->names.slot = dls__gpu_call_name(#fn))

/* What a vendor's result code means to the shared methods. */
typedef enum dls__gpu_error {
  DLS__GPU_ERROR_OTHER,
  DLS__GPU_ERROR_NOT_READY,
  DLS__GPU_ERROR_OUT_OF_MEMORY,
  DLS__GPU_ERROR_INVALID_VALUE,
  DLS__GPU_ERROR_INVALID_DEVICE,
  DLS__GPU_ERROR_INVALID_HANDLE,
  DLS__GPU_ERROR_NOT_SUPPORTED,
  DLS__GPU_ERROR_NOT_FOUND,
  DLS__GPU_ERROR_BAD_IMAGE,     /* not an image the driver can read */
  DLS__GPU_ERROR_NO_BINARY,     /* no code for this GPU in the image */
  DLS__GPU_ERROR_PTX_TOO_NEW,   /* CUDA: PTX newer than the driver */
  DLS__GPU_ERROR_NO_JIT,        /* CUDA: no PTX JIT compiler */
  DLS__GPU_ERROR_PEER_ENABLED,  /* peer access was already enabled */
  DLS__GPU_ERROR_PEER_UNSUPPORTED,
  DLS__GPU_ERROR_CAPTURE        /* the stream-capture family (invalidated, unjoined, ...) */
} dls__gpu_error;

/* X(type, name, CUDA, HIP): vendor values the shared methods pass to the
 * driver (each loader reads its own column, as for the calls). */
#define DLS__GPU_CONSTS(X)                                                                                    \
  X(unsigned, stream_non_blocking, DLS__CU_STREAM_NON_BLOCKING, DLS__hipStreamNonBlocking)                    \
  X(unsigned, stream_blocking, DLS__CU_STREAM_DEFAULT, DLS__hipStreamDefault)                                 \
  X(unsigned, event_default, DLS__CU_EVENT_DEFAULT, DLS__hipEventDefault)                                     \
  X(unsigned, event_disable_timing, DLS__CU_EVENT_DISABLE_TIMING, DLS__hipEventDisableTiming)                 \
  X(unsigned, event_blocking_sync, DLS__CU_EVENT_BLOCKING_SYNC, DLS__hipEventBlockingSync)                    \
  X(unsigned, host_alloc_mapped_portable, DLS__CU_MEMHOSTALLOC_DEVICEMAP | DLS__CU_MEMHOSTALLOC_PORTABLE,     \
    DLS__hipHostMallocMapped | DLS__hipHostMallocPortable)                                                    \
  X(unsigned, attr_multiprocessors, DLS__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,                          \
    DLS__hipDeviceAttributeMultiprocessorCount)                                                               \
  X(unsigned, attr_threads_per_multiprocessor, DLS__CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,      \
    DLS__hipDeviceAttributeMaxThreadsPerMultiProcessor)                                                       \
  X(unsigned, attr_memory_pools_supported, DLS__CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,                   \
    DLS__hipDeviceAttributeMemoryPoolsSupported)                                                              \
  /* 0: always one address space (HIP on 64-bit Linux) */                                                    \
  X(unsigned, attr_unified_addressing, DLS__CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0)                        \
  X(unsigned, pool_attr_release_threshold, DLS__CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,                            \
    DLS__hipMemPoolAttrReleaseThreshold)                                                                      \
  X(unsigned, pool_pinned, DLS__CU_MEM_ALLOCATION_TYPE_PINNED, DLS__hipMemAllocationTypePinned)               \
  X(unsigned, pool_handle_none, DLS__CU_MEM_HANDLE_TYPE_NONE, DLS__hipMemHandleTypeNone)                      \
  X(unsigned, pool_location_device, DLS__CU_MEM_LOCATION_TYPE_DEVICE, DLS__hipMemLocationTypeDevice)          \
  X(unsigned, pool_access_read_write, DLS__CU_MEM_ACCESS_FLAGS_PROT_READWRITE,                                \
    DLS__hipMemAccessFlagsProtReadWrite)                                                                      \
  /* module_load options asking for the JIT's error log; 0: none (AMD has no JIT log) */                     \
  X(unsigned, jit_error_log, DLS__CU_JIT_ERROR_LOG_BUFFER, 0)                                                 \
  X(unsigned, jit_error_log_size, DLS__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, 0)                                 \
  X(unsigned long long, graph_auto_free, DLS__CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,               \
    DLS__hipGraphInstantiateFlagAutoFreeOnLaunch)                                                             \
  /* or-ed into capture ids, so that CUDA's and HIP's are told apart */                                      \
  X(uint64_t, capture_id_tag, 0, (uint64_t)1 << 63)                                                           \
  /* CU_STREAM_LEGACY; NULL where NULL is the only name of the legacy/null stream */                         \
  X(void *, stream_legacy_alias, (void *)DLS__CU_STREAM_LEGACY, NULL)                                         \
  X(void *, stream_per_thread, (void *)DLS__CU_STREAM_PER_THREAD, (void *)DLS__hipStreamPerThread)           \
  /* a call on a created stream runs in that stream's context, whatever is current (CUDA: tried on an H100 with \
   * no context and with another one current); HIP's is not relied on */                                      \
  X(bool, stream_names_context, true, false)                                                                  \
  /* memory shared with other processes (HIP's calls are not wired: its values are unused) */                \
  X(unsigned, event_interprocess, DLS__CU_EVENT_INTERPROCESS | DLS__CU_EVENT_DISABLE_TIMING, 0)               \
  X(unsigned, ipc_lazy_peer, DLS__CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, 0)                                      \
  X(unsigned, wait_value_geq, DLS__CU_STREAM_WAIT_VALUE_GEQ, 0)                                               \
  X(unsigned, write_value_fenced, DLS__CU_STREAM_WRITE_VALUE_DEFAULT, 0)

typedef struct dls__gpu_consts {
#define DLS__GPU_CONST_FIELD(type, name, cuda, hip) type name;
  DLS__GPU_CONSTS(DLS__GPU_CONST_FIELD)
#undef DLS__GPU_CONST_FIELD
} dls__gpu_consts;

/* The built-ins, in the table's order (kernels/builtin_table.h; dls__gpu_device.builtin_fns): X(id, name, count,
 * arguments, checker, CPU kernel, GPU symbol). The core asks for one by name; the module holds it by symbol. */
#define DLS__GPU_BUILTINS(X) DLS__KERNELS(X) /* the built-ins and the core's twins */
#define DLS__GPU_BUILTIN_NAME(id, name, ...) name,
#define DLS__GPU_BUILTIN_SYMBOL(id, name, nargs, args, check, cpu, gpu) gpu,
enum { DLS__GPU_NBUILTINS = DLS__NKERNEL };

/* Memory freed without a pool: parked until its stream passes the free. */
typedef struct dls__gpu_parked {
  void *ptr;
  size_t size;
  void *event; /* recorded on the freeing stream */
} dls__gpu_parked;

typedef struct dls__gpu_device {
  pthread_mutex_t mu;   /* first use, built-ins, peers, shutdown */
  _Atomic int ready;    /* 1 once open */
  int handle;           /* CUdevice; the HIP ordinal */
  void *ctx;            /* what ctx_set makes current: CUDA's retained primary context; HIP: ordinal + 1 */
  void *pool;           /* NULL: no pool (unsupported, or debug mode) */
  bool unified;         /* one address space with the host and its peers */
  char arch[32];        /* "sm_90" (messages) */
  void *builtins;       /* the built-in module, loaded on first use */
  void *builtin_fns[DLS__GPU_NBUILTINS];
  _Atomic(unsigned char) *peers; /* per peer: 0 not asked yet, 1 enabled, 2 impossible */
  /* without a pool: freed memory parked behind events, and memory allocated
   * in a capture (stream-ordered; freed stream-ordered too) */
  pthread_mutex_t free_mu;
  dls__gpu_parked *parked;
  size_t nparked, parked_cap;
  void **spare_events;
  size_t nspare, spare_cap;
  void **graph_ptrs;
  size_t ngraph, graph_cap;
} dls__gpu_device;

typedef struct dls__gpu dls__gpu;

/* A vendor: constant parts set in its loader's initializer, the rest by its
 * load function (run once by dls__gpu_probe). */
struct dls__gpu {
  const char *name;    /* backend name: "cuda", "hip" */
  const char *devname; /* device prefix in messages: "cuda", "rocm" */
  pthread_once_t *once;
  void (*load)(void);
  /* where the vendors differ */
  const char *(*error_name)(dls__gpu_result r);
  const char *(*error_string)(dls__gpu_result r);
  dls__gpu_error (*classify)(dls__gpu_result r);
  /* retains what the device needs (context) and fills handle, ctx, arch */
  dls_status_t (*device_open)(dls__gpu *g, int dev, dls__gpu_device *d);
  void (*device_close)(dls__gpu *g, dls__gpu_device *d);
  /* the image of the built-ins, or DLS_ERR_UNAVAILABLE with the reason */
  dls_status_t (*builtin_image)(const void **out_image, size_t *out_size);
  const char *no_binary_hint; /* what to do when an image has no code for this GPU */
  /* filled by load */
  dls_status_t load_status;
  char load_message[512];
  int ndev;
  dls__gpu_device *devs;
  bool debug_alloc; /* DLSTREAM_DEBUG_ALLOC: no pools, poisoned frees, no reuse */
  dls__gpu_consts k;
  dls__gpu_calls calls;
  dls__gpu_names names;
};

/* ---- the shared helpers (gpu.c) ---- */

/* "<call(args)> on cuda:N: CUDA_ERROR_X (description)", with the status
 * that fits the driver's code. */
DLS__INTERNAL dls_status_t dls__gpu_fail(const dls__gpu *g, dls__gpu_result r, int dev, const char *fmt, ...)
    DLS__PRINTF(4, 5);
/* The same with a status the caller picks and a hint after the driver's words. */
DLS__INTERNAL dls_status_t dls__gpu_fail_hint(const dls__gpu *g, dls_status_t status, dls__gpu_result r, int dev,
                                              const char *hint, const char *fmt, ...) DLS__PRINTF(6, 7);
/* Allocates the device records and reads DLSTREAM_DEBUG_ALLOC (loaders, once). */
DLS__INTERNAL dls_status_t dls__gpu_devices_init(dls__gpu *g, int ndev);
DLS__INTERNAL dls_status_t dls__gpu_device_open(dls__gpu *g, int dev, dls__gpu_device *d);
DLS__INTERNAL void dls__gpu_unavailable(dls__gpu *g, const char *fmt, ...) DLS__PRINTF(2, 3);

static inline dls_status_t dls__gpu_device_get(dls__gpu *g, int dev, dls__gpu_device **out) {
  if (DLS__UNLIKELY((unsigned)dev >= (unsigned)g->ndev))
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s:%d does not exist: %d %s device(s) visible", g->devname, dev,
                     g->ndev, g->devname);
  dls__gpu_device *d = &g->devs[dev];
  if (DLS__UNLIKELY(!atomic_load_explicit(&d->ready, memory_order_acquire)))
    DLS__TRY(dls__gpu_device_open(g, dev, d));
  *out = d;
  return DLS_OK;
}

/* Which context to put back when a call leaves. */
typedef struct dls__gpu_scope {
  void *prev;
  bool restore;
  bool relaxed;  /* the thread's capture mode was made relaxed; `mode` is the one to put back */
  bool locked;   /* holds the backend's capture lock (dls__gpu_scope_relax) */
  unsigned mode;
} dls__gpu_scope;

/* Captures begun through a GPU backend and not yet ended (counted by gpu_capture.c; the scopes: gpu.c).
 * While any is open, every call of the backend runs in relaxed capture mode
 * (dls__gpu_scope_relax): none touches a capturing stream unless it belongs to the
 * capture (the core refuses the rest), so none is one of the "potentially
 * unsafe" calls a global or thread-local capture forbids. With captures in
 * those modes on some threads, the CUDA driver (580) crashed in
 * cuMemAllocFromPoolAsync, cuMemFreeAsync, cuStreamSynchronize and
 * cuStreamGetCaptureInfo on others when they ran in the thread's default
 * mode (tests/c/test_chaos.c on an H100; none with relaxed captures). */
DLS__INTERNAL extern _Atomic int dls__gpu_captures_open;
DLS__INTERNAL DLS__COLD void dls__gpu_scope_relax(dls__gpu *g, dls__gpu_scope *sc, bool wait);
DLS__INTERNAL DLS__COLD void dls__gpu_scope_unrelax(dls__gpu *g, dls__gpu_scope *sc);

/* Makes the device current on this thread, only when it is not already (one
 * ctx_get on the fast path). A context someone else made current (torch on
 * another device) is put back by dls__gpu_leave; a CUDA thread with none
 * keeps ours, so its next call is cheap. */
static DLS__HOT_INLINE dls_status_t dls__gpu_enter_as(dls__gpu *g, int dev, dls__gpu_device **out_d, dls__gpu_scope *sc,
                                             bool wait) {
  dls__gpu_device *d = NULL;
  DLS__TRY(dls__gpu_device_get(g, dev, &d));
  *out_d = d;
  sc->restore = false;
  sc->relaxed = sc->locked = false;
  sc->prev = NULL;
  void *cur;
  dls__gpu_result r = g->calls.ctx_get(&cur);
  if (DLS__UNLIKELY(r != DLS__GPU_OK))
    return dls__gpu_fail(g, r, dev, "%s()", g->names.ctx_get);
  if (DLS__UNLIKELY(cur != d->ctx)) {
    r = g->calls.ctx_set(d->ctx);
    if (DLS__UNLIKELY(r != DLS__GPU_OK))
      return dls__gpu_fail(g, r, dev, "%s(%p), making %s:%d current", g->names.ctx_set, d->ctx, g->devname, dev);
    sc->prev = cur;
    sc->restore = cur != NULL;
  }
  if (DLS__UNLIKELY(atomic_load_explicit(&dls__gpu_captures_open, memory_order_acquire) > 0))
    dls__gpu_scope_relax(g, sc, wait);
  return DLS_OK;
}

static DLS__HOT_INLINE dls_status_t dls__gpu_enter(dls__gpu *g, int dev, dls__gpu_device **out_d, dls__gpu_scope *sc) {
  return dls__gpu_enter_as(g, dev, out_d, sc, false);
}

static DLS__HOT_INLINE void dls__gpu_leave(dls__gpu *g, dls__gpu_scope *sc) {
  if (DLS__UNLIKELY(sc->relaxed || sc->locked))
    dls__gpu_scope_unrelax(g, sc);
  /* Nothing to report if this fails: ours simply stays current. */
  if (DLS__UNLIKELY(sc->restore))
    g->calls.ctx_set(sc->prev);
}

/* Runs one driver call in the device's context and fails with its name. */
#define DLS__GPU_CALL(g, dev, call, ...)                          \
  do {                                                            \
    dls__gpu_device *dls__d_;                                     \
    dls__gpu_scope dls__sc_;                                      \
    DLS__TRY(dls__gpu_enter((g), (dev), &dls__d_, &dls__sc_));    \
    dls__gpu_result dls__r_ = (call);                             \
    dls__gpu_leave((g), &dls__sc_);                               \
    if (DLS__UNLIKELY(dls__r_ != DLS__GPU_OK))                    \
      return dls__gpu_fail((g), dls__r_, (dev), __VA_ARGS__);     \
  } while (0)

/* NULL, the legacy alias and the per-thread stream name a current context's
 * streams, not a stream object. */
static inline bool dls__gpu_special_stream(const dls__gpu *g, const void *stream) {
  return stream == NULL || stream == g->k.stream_per_thread ||
         (g->k.stream_legacy_alias != NULL && stream == g->k.stream_legacy_alias);
}

/* Whether a call on `stream` may be made as it is, without the context check: a created stream of a vendor whose
 * stream calls run in the stream's context names its own context, while no capture needs the relaxed mode (the
 * check costs about 10 ns on an H100, twice per crossing of the hazard rule). A refusal of a call made so is made
 * again the usual way (DLS__GPU_CALL; a failed record or wait queues nothing), kept out of the caller's frame. */
static DLS__HOT_INLINE bool dls__gpu_stream_direct(const dls__gpu *g, const void *stream) {
  return g->k.stream_names_context && !dls__gpu_special_stream(g, stream) &&
         atomic_load_explicit(&dls__gpu_captures_open, memory_order_acquire) == 0;
}

/* A stream's capture state and id, asked of the driver as it is (the caller makes the device current where it
 * must): the state alone first where the vendor answers it (capture_state: cuStreamIsCapturing), as the common
 * answer, "none", needs no id (on an H200 the state alone took 0.77 x the time of the full question, bench_c's row
 * "step: the driver's capture-state questions"); an active or invalidated capture is asked again in full for its
 * id. capture_info must exist. */
static DLS__HOT_INLINE dls__gpu_result dls__gpu_capture_ask(const dls__gpu *g, void *stream, unsigned *out_status,
                                                            unsigned long long *out_id) {
  *out_id = 0;
  if (DLS__LIKELY(g->calls.capture_state != NULL)) {
    dls__gpu_result r = g->calls.capture_state(stream, out_status);
    if (DLS__LIKELY(r != DLS__GPU_OK || *out_status == DLS__CAPTURE_NONE))
      return r;
  }
  return g->calls.capture_info(stream, out_status, out_id);
}

/* Frees what the device holds without a pool (shutdown; gpu_memory.c). */
DLS__INTERNAL void dls__gpu_memory_release(dls__gpu *g, dls__gpu_device *d);
/* Plain allocations, outside any capture (caller entered the device; gpu_memory.c): an allocation of its own
 * (a parked one reused, else the driver's), usable on every stream at once; its free parks it behind an event
 * recorded on `stream`. The memory without a pool, and the memory other processes map (gpu_ipc.c). */
DLS__INTERNAL dls_status_t dls__gpu_plain_alloc(dls__gpu *g, int dev, dls__gpu_device *d, size_t size,
                                                void **out_ptr);
DLS__INTERNAL dls_status_t dls__gpu_plain_free(dls__gpu *g, int dev, dls__gpu_device *d, void *ptr, void *stream);
/* Loads an image in the device's context (caller entered it; gpu_code.c). */
DLS__INTERNAL dls_status_t dls__gpu_load_image(dls__gpu *g, int dev, dls__gpu_device *d, const void *image,
                                               size_t size, void **out_module);

/* A vendor's backend: the vtable the core calls through, then the vendor its
 * methods work on. The shared methods are the vtable's entries themselves;
 * each finds its vendor through the backend it is called with. */
struct dls__gpu_backend {
  dls__backend be; /* first: a GPU backend's dls__backend * points here */
  dls__gpu *gpu;
};

static inline dls__gpu *dls__gpu_of(const dls__backend *be) { return ((const dls__gpu_backend *)be)->gpu; }

/* ---- the methods, written once (gpu_*.c) ----
 * dls__gpu_<method>(be, arguments...) is the shared implementation of every
 * method of DLS__BACKEND_METHODS marked GPU (backend.h), and of
 * device_count, probe and shutdown. */
#define DLS__GPU_DECL_GPU(method, params) DLS__INTERNAL dls_status_t dls__gpu_##method DLS__BACKEND_SELF params;
#define DLS__GPU_DECL_NONE(method, params)
#define DLS__GPU_METHOD_DECL(method, params, args, fault, gpu) DLS__GPU_DECL_##gpu(method, params)
DLS__BACKEND_METHODS(DLS__GPU_METHOD_DECL)
#undef DLS__GPU_METHOD_DECL
DLS__INTERNAL dls_status_t dls__gpu_device_count(const dls__backend *be, int *out_count);
DLS__INTERNAL dls_status_t dls__gpu_probe(const dls__backend *be);
DLS__INTERNAL void dls__gpu_shutdown(const dls__backend *be);

/* A vendor's backend. Its loader defines DLS__GPU_PREFIX (its function
 * prefix, e.g. dls__cuda) and the functions <prefix>_load, _error_name,
 * _error_string, _classify, _device_open, _device_close, _builtin_image and
 * the pthread_once_t <prefix>_once, then expands DLS__GPU_DEFINE_BACKEND:
 * it defines the vendor's dls__gpu (<prefix>_gpu, its constants taken from
 * DLS__GPU_CONSTS's column `column`: cuda or hip) and the dls__gpu_backend
 * `var`, whose vtable holds the shared methods. */
#define DLS__GPU_CAT_(a, b) a##_##b
#define DLS__GPU_CAT(a, b) DLS__GPU_CAT_(a, b)
#define DLS__GPU_NAME(suffix) DLS__GPU_CAT(DLS__GPU_PREFIX, suffix)
#define DLS__GPU_COLUMN_cuda(type, name, cuda, hip) .name = (cuda),
#define DLS__GPU_COLUMN_hip(type, name, cuda, hip) .name = (hip),
#define DLS__GPU_VTABLE_ENTRY_GPU(method) .method = dls__gpu_##method,
#define DLS__GPU_VTABLE_ENTRY_NONE(method) /* NULL */
#define DLS__GPU_VTABLE_ENTRY(method, params, args, fault, gpu) DLS__GPU_VTABLE_ENTRY_##gpu(method)
#define DLS__GPU_DEFINE_BACKEND(var, backend_name, type, device_name, hint, column)                          \
  static dls__gpu DLS__GPU_NAME(gpu) = {.name = (backend_name),                                              \
                                        .devname = (device_name),                                            \
                                        .once = &DLS__GPU_NAME(once),                                        \
                                        .load = DLS__GPU_NAME(load),                                         \
                                        .error_name = DLS__GPU_NAME(error_name),                             \
                                        .error_string = DLS__GPU_NAME(error_string),                         \
                                        .classify = DLS__GPU_NAME(classify),                                 \
                                        .device_open = DLS__GPU_NAME(device_open),                           \
                                        .device_close = DLS__GPU_NAME(device_close),                         \
                                        .builtin_image = DLS__GPU_NAME(builtin_image),                       \
                                        .no_binary_hint = (hint),                                            \
                                        .load_status = DLS_ERR_UNAVAILABLE,                                  \
                                        .k = {DLS__GPU_CONSTS(DLS__GPU_COLUMN_##column)}};                   \
  const dls__gpu_backend var = {.be = {.version = DLS__BACKEND_VERSION,                                      \
                                       .size = sizeof(dls__backend),                                         \
                                       .name = (backend_name),                                               \
                                       .device_type = (type),                                                \
                                       .probe = dls__gpu_probe,                                              \
                                       .device_count = dls__gpu_device_count,                                \
                                       .shutdown = dls__gpu_shutdown,                                        \
                                       DLS__BACKEND_METHODS(DLS__GPU_VTABLE_ENTRY)},                         \
                                .gpu = &DLS__GPU_NAME(gpu)}

#endif /* DLSTREAM_BACKEND_GPU_H */
