/* SPDX-License-Identifier: Apache-2.0 */
/* A null CUDA driver: a libcuda.so.1 whose every entry point succeeds at once and runs nothing.
 *
 * It is not a driver. It lets bench_c's CUDA rows run on a machine without a
 * GPU, so that what dlstream adds to each driver sequence can be counted
 * (valgrind --tool=callgrind) or timed against the very same null calls:
 * whatever a row costs above its raw anchor is dlstream's own. Built as
 * bench/null_driver/libcuda.so.1 and used through LD_LIBRARY_PATH by
 * scripts/callgrind-ops, scripts/callgrind-python and the tests of the CuPy
 * path (tests/python/test_cupy_path.py) and of IPC's wiring
 * (tests/python/test_ipc.py), which read what it was asked through
 * dls_null_stats, dls_null_ipc_stats, dls_null_host_stats and
 * dls_null_order_stats. Handles are
 * distinct fake addresses, never dereferenced; host allocations are real
 * memory (the backend writes them). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda_driver.h"

#define OK DLS__CUDA_SUCCESS
#define SET(lvalue, value) ((lvalue) = (value), OK)
typedef dls__CUresult R;
typedef dls__CUdeviceptr dptr;

static _Atomic uintptr_t g_next = 0x100000;
static _Thread_local dls__CUcontext t_current;
static struct CUctx_st *const g_primary = (struct CUctx_st *)(uintptr_t)0xC0DE000;

/* What the tests read: the stream of the latest launch, launches and stream waits so far. */
static void *g_last_stream;
static unsigned long g_launches, g_waits;

__attribute__((visibility("default"))) void dls_null_stats(void **out_last_stream, unsigned long *out_launches,
                                                           unsigned long *out_waits);
void dls_null_stats(void **out_last_stream, unsigned long *out_launches, unsigned long *out_waits) {
  *out_last_stream = g_last_stream;
  *out_launches = g_launches;
  *out_waits = g_waits;
}

/* What the IPC tests read: waits for a word's value (an exporter's free) and writes of one (an import's close). */
static unsigned long g_value_waits, g_value_writes;
static uint32_t g_last_wait_value, g_last_write_value;

__attribute__((visibility("default"))) void dls_null_ipc_stats(unsigned long *out_waits, uint32_t *out_wait_value,
                                                               unsigned long *out_writes, uint32_t *out_write_value);
void dls_null_ipc_stats(unsigned long *out_waits, uint32_t *out_wait_value, unsigned long *out_writes,
                        uint32_t *out_write_value) {
  *out_waits = g_value_waits;
  *out_wait_value = g_last_wait_value;
  *out_writes = g_value_writes;
  *out_write_value = g_last_write_value;
}

/* What the tests of a call's driver sequence read (tests/python/test_builtin_driver_calls.py): host waits
 * (stream, context and event synchronizations), allocations of every kind, copies and sets, module loads. */
static unsigned long g_syncs, g_allocs, g_copies, g_loads;

__attribute__((visibility("default"))) void dls_null_host_stats(unsigned long *out_syncs, unsigned long *out_allocs,
                                                                unsigned long *out_copies, unsigned long *out_loads);
void dls_null_host_stats(unsigned long *out_syncs, unsigned long *out_allocs, unsigned long *out_copies,
                         unsigned long *out_loads) {
  *out_syncs = g_syncs;
  *out_allocs = g_allocs;
  *out_copies = g_copies;
  *out_loads = g_loads;
}

/* What the load-order test reads (tests/python/test_ipc.py): module loads that came after a stream wait (an event's
 * or a word's) was queued. A real driver's load may drain the device first: behind such a wait, a host wait. */
static unsigned long g_loads_after_wait;

__attribute__((visibility("default"))) void dls_null_order_stats(unsigned long *out_loads_after_wait);
void dls_null_order_stats(unsigned long *out_loads_after_wait) { *out_loads_after_wait = g_loads_after_wait; }

/* A gate on module loads (tests/c/test_device_open.c): while it is closed a load parks until it opens, and work
 * queued meanwhile (a stream made, a stream wait, an event record, a launch) is counted. A real driver's load may
 * drain the device: work queued behind a load's back by another thread may hold it up. */
static pthread_mutex_t g_gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_gate_cv = PTHREAD_COND_INITIALIZER;
static bool g_gate_closed;
static _Atomic int g_parked;
static _Atomic unsigned long g_work_while_parked;

__attribute__((visibility("default"))) void dls_null_load_gate(int closed);
void dls_null_load_gate(int closed) {
  pthread_mutex_lock(&g_gate_mu);
  g_gate_closed = closed != 0;
  pthread_cond_broadcast(&g_gate_cv);
  pthread_mutex_unlock(&g_gate_mu);
}
__attribute__((visibility("default"))) void dls_null_gate_stats(int *out_parked, unsigned long *out_work);
void dls_null_gate_stats(int *out_parked, unsigned long *out_work) {
  *out_parked = atomic_load(&g_parked);
  *out_work = atomic_load(&g_work_while_parked);
}
static void load_gate(void) {
  pthread_mutex_lock(&g_gate_mu);
  if (g_gate_closed) {
    atomic_store(&g_parked, 1);
    while (g_gate_closed)
      pthread_cond_wait(&g_gate_cv, &g_gate_mu);
    atomic_store(&g_parked, 0);
  }
  pthread_mutex_unlock(&g_gate_mu);
}
/* Work queued: counted while a load is parked. */
static void work(void) {
  if (atomic_load_explicit(&g_parked, memory_order_relaxed) != 0)
    atomic_fetch_add(&g_work_while_parked, 1);
}

static void *fake(void) { return (void *)atomic_fetch_add_explicit(&g_next, 256, memory_order_relaxed); }

static int attribute(dls__CUdevice_attribute a) {
  return a == DLS__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR   ? 9
         : a == DLS__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? 0
                                                                  : 1;
}

static R n_cuGetErrorName(R e, const char **s) { return SET(*s, e ? "CUDA_ERROR_NULL_DRIVER" : "CUDA_SUCCESS"); }
static R n_cuGetErrorString(R e, const char **s) { return SET(*s, e ? "null driver error" : "no error"); }
static R n_cuInit(unsigned f) { return OK; }
static R n_cuDriverGetVersion(int *v) { return SET(*v, 13000); }
static R n_cuDeviceGetCount(int *n) { return SET(*n, 1); }
static R n_cuDeviceGet(dls__CUdevice *d, int i) { return i == 0 ? SET(*d, 0) : DLS__CUDA_ERROR_INVALID_DEVICE; }
static R n_cuDeviceGetAttribute(int *v, dls__CUdevice_attribute a, dls__CUdevice d) { return SET(*v, attribute(a)); }
static R n_cuDevicePrimaryCtxRetain(dls__CUcontext *c, dls__CUdevice d) { return SET(*c, g_primary); }
static R n_cuDevicePrimaryCtxRelease(dls__CUdevice d) { return OK; }
static R n_cuCtxGetCurrent(dls__CUcontext *c) { return SET(*c, t_current); }
static R n_cuCtxSetCurrent(dls__CUcontext c) { return SET(t_current, c); }
static R n_cuCtxGetStreamPriorityRange(int *least, int *greatest) { return SET(*least, 0) | SET(*greatest, -5); }
static R n_cuCtxSynchronize(void) { return g_syncs++, OK; }
/* Streams are readable host memory, as a driver's are (the Python layer refuses a stream pointer it cannot read). */
static void *stream_new(void) { return calloc(1, 64); }
static R n_cuStreamCreate(dls__CUstream *s, unsigned f) { return work(), SET(*s, stream_new()); }
static R n_cuStreamCreateWithPriority(dls__CUstream *s, unsigned f, int p) { return work(), SET(*s, stream_new()); }
static R n_cuStreamDestroy(dls__CUstream s) {
  free(s);
  return OK;
}
static R n_cuStreamSynchronize(dls__CUstream s) { return g_syncs++, OK; }
static R n_cuStreamQuery(dls__CUstream s) { return OK; }
static R n_cuStreamWaitEvent(dls__CUstream s, dls__CUevent e, unsigned f) { return work(), g_waits++, OK; }
static R n_cuStreamGetCtx(dls__CUstream s, dls__CUcontext *c) { return SET(*c, g_primary); }
static R n_cuStreamGetDevice(dls__CUstream s, dls__CUdevice *d) { return SET(*d, 0); }
static R n_cuLaunchHostFunc(dls__CUstream s, dls__CUhostFn fn, void *user) { return fn(user), OK; }
static R n_cuEventCreate(dls__CUevent *e, unsigned f) { return SET(*e, fake()); }
static R n_cuEventDestroy(dls__CUevent e) { return OK; }
static R n_cuEventRecord(dls__CUevent e, dls__CUstream s) { return work(), OK; }
static R n_cuEventQuery(dls__CUevent e) { return OK; }
static R n_cuEventSynchronize(dls__CUevent e) { return g_syncs++, OK; }
static R n_cuEventElapsedTime(float *ms, dls__CUevent a, dls__CUevent b) { return SET(*ms, 0.0f); }
/* Disjoint ranges of the size asked (a launch refuses arguments whose ranges overlap). */
static R n_cuMemAlloc(dptr *p, size_t n) {
  size_t span = (n + 255) & ~(size_t)255;
  g_allocs++;
  return SET(*p, (dptr)atomic_fetch_add_explicit(&g_next, span > 256 ? span : 256, memory_order_relaxed));
}
static R n_cuMemFree(dptr p) { return OK; }
static R n_cuMemGetAddressRange(dptr *base, size_t *n, dptr p) { return SET(*base, p) | SET(*n, 1); }
static R n_cuMemsetD8Async(dptr d, unsigned char v, size_t n, dls__CUstream s) { return g_copies++, OK; }
static R n_cuMemcpyAsync(dptr d, dptr src, size_t n, dls__CUstream s) { return g_copies++, OK; }
static R n_cuMemHostAlloc(void **p, size_t n, unsigned f) {
  g_allocs++;
  return (*p = calloc(1, n)) ? OK : DLS__CUDA_ERROR_OUT_OF_MEMORY;
}
static R n_cuMemHostGetDevicePointer(dptr *d, void *host, unsigned f) { return SET(*d, (dptr)(uintptr_t)host); }
static R n_cuMemFreeHost(void *host) { return free(host), OK; }
static R n_cuModuleLoadDataEx(dls__CUmodule *m, const void *image, unsigned n, dls__CUjit_option *o, void **v) {
  load_gate();
  g_loads++;
  g_loads_after_wait += g_waits + g_value_waits > 0;
  return SET(*m, fake());
}
static R n_cuModuleUnload(dls__CUmodule m) { return OK; }
static R n_cuModuleGetFunction(dls__CUfunction *f, dls__CUmodule m, const char *name) { return SET(*f, fake()); }
static R n_cuFuncGetAttribute(int *v, dls__CUfunction_attribute a, dls__CUfunction f) { return SET(*v, 0); }
static R n_cuFuncLoad(dls__CUfunction f) { return OK; }
static R n_cuLaunchKernel(dls__CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shared, dls__CUstream s, void **params, void **extra) {
  work();
  g_last_stream = s;
  g_launches++;
  return OK;
}
static R n_cuMemPoolCreate(dls__CUmemoryPool *p, const struct CUmemPoolProps_st *props) { return SET(*p, fake()); }
static R n_cuMemPoolDestroy(dls__CUmemoryPool p) { return OK; }
static R n_cuMemPoolSetAccess(dls__CUmemoryPool p, const struct CUmemAccessDesc_st *m, size_t n) { return OK; }
static R n_cuMemPoolSetAttribute(dls__CUmemoryPool p, dls__CUmemPool_attribute a, void *v) { return OK; }
static R n_cuMemAllocFromPoolAsync(dptr *p, size_t n, dls__CUmemoryPool pool, dls__CUstream s) {
  g_allocs++;
  return SET(*p, 0x7f0000000000ull);
}
static R n_cuMemAllocAsync(dptr *p, size_t n, dls__CUstream s) { return g_allocs++, SET(*p, 0x7f0000000000ull); }
static R n_cuMemFreeAsync(dptr p, dls__CUstream s) { return OK; }
static R n_cuDeviceCanAccessPeer(int *can, dls__CUdevice d, dls__CUdevice p) { return SET(*can, 0); }
static R n_cuCtxEnablePeerAccess(dls__CUcontext c, unsigned f) { return OK; }
static R n_cuCtxGetDevice(dls__CUdevice *d) { return SET(*d, 0); }
static R n_cuMemcpyPeerAsync(dptr d, dls__CUcontext dc, dptr src, dls__CUcontext sc, size_t n, dls__CUstream s) {
  return g_copies++, OK;
}
/* A created stream's first word is its capture's id (0: none), so that a capture begun through the driver is seen
 * by both questions (tests/python/test_capture_question.py); the special streams never capture. */
static _Atomic unsigned long g_capture_ids;
static unsigned long *capture_word(dls__CUstream s) {
  return (uintptr_t)s > 0x1000 ? (unsigned long *)(void *)s : NULL;
}
static R n_cuStreamBeginCapture(dls__CUstream s, dls__CUstreamCaptureMode m) {
  unsigned long *w = capture_word(s);
  return w != NULL ? SET(*w, atomic_fetch_add(&g_capture_ids, 1) + 1) : OK;
}
static R n_cuStreamEndCapture(dls__CUstream s, dls__CUgraph *g) {
  unsigned long *w = capture_word(s);
  if (w != NULL)
    *w = 0;
  return SET(*g, fake());
}
static unsigned long capture_of(dls__CUstream s) {
  unsigned long *w = capture_word(s);
  return w != NULL ? *w : 0;
}
static R n_cuStreamGetCaptureInfo(dls__CUstream s, dls__CUstreamCaptureStatus *st, dls__cuuint64_t *id) {
  return SET(*st, capture_of(s) != 0) | SET(*id, capture_of(s));
}
static R n_cuStreamIsCapturing(dls__CUstream s, dls__CUstreamCaptureStatus *st) { return SET(*st, capture_of(s) != 0); }
static R n_cuGraphInstantiateWithFlags(dls__CUgraphExec *e, dls__CUgraph g, unsigned long long f) {
  return SET(*e, fake());
}
static R n_cuGraphLaunch(dls__CUgraphExec e, dls__CUstream s) { return OK; }
static R n_cuGraphExecDestroy(dls__CUgraphExec e) { return OK; }
static R n_cuGraphDestroy(dls__CUgraph g) { return OK; }
static R n_cuThreadExchangeStreamCaptureMode(dls__CUstreamCaptureMode *m) { return OK; }
static R n_cuDeviceGetDefaultMemPool(dls__CUmemoryPool *p, dls__CUdevice d) { return SET(*p, fake()); }
static R n_cuIpcGetMemHandle(struct CUipcMemHandle_st *h, dptr p) { return OK; }
static R n_cuIpcOpenMemHandle(dptr *p, struct CUipcMemHandle_st h, unsigned f) { return SET(*p, 0x7e0000000000ull); }
static R n_cuIpcCloseMemHandle(dptr p) { return OK; }
static R n_cuIpcGetEventHandle(struct CUipcEventHandle_st *h, dls__CUevent e) { return OK; }
static R n_cuIpcOpenEventHandle(dls__CUevent *e, struct CUipcEventHandle_st h) { return SET(*e, fake()); }
static R n_cuStreamWaitValue32(dls__CUstream s, dptr a, dls__cuuint32_t v, unsigned f) {
  g_value_waits++;
  g_last_wait_value = v;
  return OK;
}
static R n_cuStreamWriteValue32(dls__CUstream s, dptr a, dls__cuuint32_t v, unsigned f) {
  g_value_writes++;
  g_last_write_value = v;
  return OK;
}
static R n_cuDeviceGetUuid(struct CUuuid_st *u, dls__CUdevice d) {
  memset(u->bytes, 0, sizeof u->bytes);
  u->bytes[0] = (char)(d + 1);
  return OK;
}

/* Every symbol of the backend's tables, each checked against its PFN type. */
static const struct {
  const char *name;
  void *fn;
} g_table[] = {
#define NULL_ENTRY(name, version, params) {#name, (void *)(dls__PFN_##name)n_##name},
    DLS__CUDA_REQUIRED_SYMBOLS(NULL_ENTRY) DLS__CUDA_OPTIONAL_SYMBOLS(NULL_ENTRY) DLS__CUDA_TOOLS_SYMBOLS(NULL_ENTRY)
    DLS__CUDA_OLD_ABI_SYMBOLS(NULL_ENTRY)
#undef NULL_ENTRY
};

__attribute__((visibility("default"))) R cuGetProcAddress_v2(const char *symbol, void **out_fn, int version,
                                                             dls__cuuint64_t flags,
                                                             dls__CUdriverProcAddressQueryResult *out_found);
R cuGetProcAddress_v2(const char *symbol, void **out_fn, int version, dls__cuuint64_t flags,
                      dls__CUdriverProcAddressQueryResult *out_found) {
  for (size_t i = 0; i < sizeof g_table / sizeof g_table[0]; i++) {
    if (strcmp(g_table[i].name, symbol) == 0) {
      *out_fn = g_table[i].fn;
      *out_found = DLS__CU_GET_PROC_ADDRESS_SUCCESS;
      return OK;
    }
  }
  *out_fn = NULL;
  *out_found = DLS__CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return OK;
}
