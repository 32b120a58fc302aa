/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream functions inside XLA programs (jax.jit): handlers for the XLA FFI's typed API (api_version=1).
 *
 * Register dls_xla_call_cuda for platform "CUDA" and dls_xla_call_cpu for "cpu" under one target name, and
 * dls_xla_call_cuda_nocapture with dls_xla_call_cpu under another for calls XLA must not capture (the Python
 * package does it once per process: dlstream.jax). XLA then calls the handler for each custom call of
 * that target: at the instantiate stage it checks the call's attributes and that its function (or latch) is
 * alive; at the execute stage it launches the function with the call's buffers:
 *   - CUDA: on XLA's stream (XLA_FFI_Stream_Get), with nothing else queued and no host wait, so XLA may capture
 *     it into a command buffer (CUDA graph); the handler declares that trait. The stream's dlstream wrapper is
 *     made at the first call on it and kept.
 *   - CPU: on a pooled dlstream CPU stream, synchronously (XLA:CPU has no stream): the call returns once the
 *     kernel has run.
 * The prepare and initialize stages do nothing. A failure comes back to XLA as an XLA FFI error whose message
 * starts "dlstream XLA call (cuda): " followed by dlstream's own (dls_last_error()).
 *
 * The custom call's attributes (what dlstream.jax writes; XLA sorts them by name):
 *   dls_cfg   int64[DLS_XLA_CFG_LEN]: what to do (DLS_XLA_CFG_* below)
 *   dls_args  int64[n]: the function's n arguments in order, each DLS_XLA_ARG(source, index, size)
 *   dls_vals  uint8[m] (optional): the bytes that DLS_XLA_FROM_VALUE arguments point into
 *   dls_fns   int64[k] (optional): a function handle per device, by XLA's ordinal (0: none); the handler runs the
 *             one of the device XLA runs the call on (XLA_FFI_DeviceOrdinal_Get) instead of dls_cfg's. Without it,
 *             dls_cfg's function is bound to its device: XLA running the call on another is refused.
 *   dls_cpu_fn int64[1] (optional): the kernel's function on dlstream's CPU device, which a call naming a GPU's
 *             function takes when XLA runs it on its CPU platform (dlstream.jax gives a built-in's CPU twin).
 * Buffers are passed as raw pointers: the memory is XLA's, no use is recorded. */
#ifndef DLSTREAM_XLA_H
#define DLSTREAM_XLA_H

#include <stdint.h>

#include "runtime.h"

/* XLA's types, opaque here (their tags are XLA's: this header and xla/ffi/api/c_api.h go together). */
struct XLA_FFI_Error;
struct XLA_FFI_CallFrame;

/* What a call does (dls_cfg[DLS_XLA_CFG_OP]). */
#define DLS_XLA_OP_LAUNCH 1     /* dls_launch(handle, XLA's stream, config, arguments) */
#define DLS_XLA_OP_LATCH_WAIT 2 /* dls_latch_wait(handle, XLA's stream, dls_cfg[DLS_XLA_CFG_TIMEOUT_NS]) */

/* Entries of dls_cfg. */
enum {
  DLS_XLA_CFG_OP = 0,          /* DLS_XLA_OP_* */
  DLS_XLA_CFG_HANDLE = 1,      /* the function's (or latch's) handle id, as int64 */
  DLS_XLA_CFG_GRID = 2,        /* 3 entries: blocks in x, y, z (all six of grid and block 0: a built-in on the grid
                                * the core sizes to its work, through its twin where one applies, as dls_fill ...) */
  DLS_XLA_CFG_BLOCK = 5,       /* 3 entries: threads per block in x, y, z */
  DLS_XLA_CFG_SHARED_MEM = 8,  /* dynamic shared memory bytes */
  DLS_XLA_CFG_DEVICE_TYPE = 9, /* the function's DLDeviceType (kDLCUDA, kDLCPU) */
  DLS_XLA_CFG_DEVICE_ID = 10,  /* and its device_id */
  DLS_XLA_CFG_LEN = 11
};
/* A latch wait's timeout shares the grid's first entry. */
#define DLS_XLA_CFG_TIMEOUT_NS DLS_XLA_CFG_GRID

/* Where a function argument comes from (the low 8 bits of a dls_args entry). */
#define DLS_XLA_FROM_OPERAND 1 /* operand `index`'s data pointer */
#define DLS_XLA_FROM_RESULT 2  /* result `index`'s data pointer (an in-place argument is its aliased result) */
#define DLS_XLA_FROM_VALUE 3   /* `size` bytes at dls_vals[index], passed by value (scalars, raw addresses) */

/* A dls_args entry: index < 2^24, size <= 4096. */
#define DLS_XLA_ARG(source, index, size) \
  ((int64_t)(source) | ((int64_t)(index) << 8) | ((int64_t)(size) << 32))

/* What the handlers did since the process started (tests and tuning). */
typedef struct dls_xla_stats_t {
  uint64_t instantiations; /* calls checked at XLA's instantiate stage */
  uint64_t executions;     /* calls run at the execute stage: on CUDA, launches queued from the host (a command
                              buffer that captured a call replays it without calling the handler) */
  uint64_t stream_wraps;   /* XLA streams wrapped by the CUDA handler */
} dls_xla_stats_t;

DLS_EXTERN_C_BEGIN

/* The handler for XLA's CUDA platform (an XLA_FFI_Handler). Command-buffer compatible: XLA may record its launch
 * into a CUDA graph once and replay it without calling the handler. */
DLS_API struct XLA_FFI_Error *dls_xla_call_cuda(struct XLA_FFI_CallFrame *frame);

/* The same for calls XLA must not capture into a command buffer (registered under a target of their own): latch
 * waits (dlstream refuses them in captures), launches whose kernels must run at every execution. */
DLS_API struct XLA_FFI_Error *dls_xla_call_cuda_nocapture(struct XLA_FFI_CallFrame *frame);

/* The handler for XLA's CPU platform (an XLA_FFI_Handler). Runs the CPU backend's function synchronously. */
DLS_API struct XLA_FFI_Error *dls_xla_call_cpu(struct XLA_FFI_CallFrame *frame);

/* The counters (see dls_xla_stats_t). */
DLS_API dls_xla_stats_t dls_xla_stats(void);

/* Destroys the stream wrappers the CUDA handler keeps (one per XLA stream it ran on). Not to be called while an
 * XLA program that runs a dlstream call may be executing; the next call wraps its stream again. */
DLS_API dls_status_t dls_xla_release(void);

DLS_EXTERN_C_END

#endif /* DLSTREAM_XLA_H */
