/* SPDX-License-Identifier: Apache-2.0 */
/* What the XLA handler's files share: a call's plan read from its attributes, and the cache of stream wrappers. */
#ifndef DLSTREAM_XLA_INTERNAL_H
#define DLSTREAM_XLA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/builtin_args.h"
#include "dlstream/dlstream.h"
#include "xla_ffi.h"

/* Room for a message of the handler's own. */
#define DLS__XLA_MSG 512

/* One custom call's attributes, checked. Pointers borrow the call frame's attribute storage. */
typedef struct dls__xla_plan {
  int op;                     /* DLS_XLA_OP_* */
  uint64_t handle;            /* function or latch handle id */
  uint64_t timeout_ns;        /* latch waits */
  dls_launch_config_t config; /* launches */
  bool core_grid;             /* a built-in's launch on the core's own grid (grid and block all 0) */
  DLDevice device;            /* the function's (or latch's) device */
  size_t nargs;               /* launches: entries of args */
  const int64_t *args;        /* DLS_XLA_ARG entries */
  const uint8_t *vals;        /* DLS_XLA_FROM_VALUE bytes */
  size_t nvals;
  const int64_t *fns;         /* dls_fns: the function of each device by XLA's ordinal (0: none); NULL: `handle` */
  size_t nfns;
  uint64_t cpu_fn;            /* dls_cpu_fn: the function on dlstream's CPU device for XLA's CPU platform (0: none) */
} dls__xla_plan;

/* Reads and checks the attributes. Returns DLS_OK, or an error with the reason in `msg`. */
dls_status_t dls__xla_plan_read(const dls__xla_attrs *attrs, dls__xla_plan *out, char msg[DLS__XLA_MSG]);

/* The device XLA runs the call on (XLA_FFI_DeviceOrdinal_Get, where XLA has it) and its function: the plan's
 * device id and handle become that device's (devices.c). A function bound to another device is refused, saying how
 * to give one per device. Returns DLS_OK, or an error with the reason in `msg`. */
dls_status_t dls__xla_plan_device(const dls__xla_call_frame *frame, dls__xla_plan *plan, char msg[DLS__XLA_MSG]);

/* A call XLA runs on its CPU platform (`type` kDLCPU) whose plan names a GPU's function takes its dls_cpu_fn, where
 * the call has one, on dlstream's CPU device (devices.c). */
void dls__xla_plan_platform(dls__xla_plan *plan, DLDeviceType type);

/* The launch arguments of a planned call from its buffers (raw pointers) and values, and what the call knows of
 * each buffer (`extents`: its bytes and element type, which bound a built-in's checks). `argv` and `extents` have
 * DLS_MAX_ARGS entries. Returns DLS_OK, or an error with the reason in `msg`. */
dls_status_t dls__xla_plan_args(const dls__xla_plan *plan, const dls__xla_call_frame *frame, dls_arg_t *argv,
                                dls__extent *extents, char msg[DLS__XLA_MSG]);

/* The dlstream stream wrapping XLA's `native` stream of `device`: the cached wrapper, or a new one (cached while
 * there is room; *out_owned = 1 when the caller must destroy it after use). */
dls_status_t dls__xla_stream_get(DLDevice device, void *native, dls_stream_t *out_stream, int *out_owned);

/* Replaces a cached wrapper that turned out stale (dls_shutdown ran since it was made) with a new one. */
dls_status_t dls__xla_stream_renew(DLDevice device, void *native, dls_stream_t stale, dls_stream_t *out_stream);

/* XLA streams wrapped so far (dls_xla_stats). */
extern _Atomic uint64_t dls__xla_wraps;

#endif /* DLSTREAM_XLA_INTERNAL_H */
