/* SPDX-License-Identifier: Apache-2.0 */
/* The device XLA runs a dlstream call on, and the function of that device: under shard_map, pmap and a sharded jit
 * XLA runs one custom call, with one set of attributes, on every device of the mesh; the call's dls_fns attribute
 * names a function per device (by XLA's ordinal), and the handler takes the one of the device it runs on. */
#include <stdio.h>

#include "xla_internal.h"

/* XLA's ordinal of the device the call runs on; -1 where XLA cannot say (an XLA older than the entry point). */
static int32_t xla_ordinal(const dls__xla_call_frame *f) {
  const dls__xla_api *api = f->api;
  if (api == NULL || api->struct_size < DLS__XLA_API_DEVICE_ORDINAL_GET_END || api->device_ordinal_get == NULL)
    return -1;
  dls__xla_device_ordinal_get_args a = {.struct_size = DLS__XLA_DEVICE_ORDINAL_GET_ARGS_SIZE,
                                        .extension_start = NULL, .ctx = f->ctx, .device_ordinal = -1};
  struct XLA_FFI_Error *e = api->device_ordinal_get(&a);
  if (e == NULL)
    return a.device_ordinal;
  if (api->error_destroy != NULL) {
    dls__xla_error_destroy_args d = {.struct_size = DLS__XLA_ERROR_DESTROY_ARGS_SIZE, .extension_start = NULL,
                                     .error = e};
    ((dls__xla_error_destroy_fn *)api->error_destroy)(&d);
  }
  return -1;
}

void dls__xla_plan_platform(dls__xla_plan *p, DLDeviceType type) {
  if (type != kDLCPU || p->device.device_type == kDLCPU || p->cpu_fn == 0)
    return;
  p->handle = p->cpu_fn;
  p->device = dls_device(kDLCPU, 0);
  p->fns = NULL; /* the GPUs' table */
  p->nfns = 0;
}

dls_status_t dls__xla_plan_device(const dls__xla_call_frame *f, dls__xla_plan *p, char msg[DLS__XLA_MSG]) {
  int32_t ordinal = xla_ordinal(f);
  char bound[32], runs[32];
  if (p->fns != NULL) {
    if (ordinal < 0)
      ordinal = p->device.device_id; /* XLA cannot say: the device the lowering named */
    DLDevice d = dls_device(p->device.device_type, ordinal);
    if ((size_t)ordinal >= p->nfns || p->fns[ordinal] == 0) {
      snprintf(msg, DLS__XLA_MSG,
               "XLA runs this call on %s, for which the kernel has no function: when it was lowered, dlstream could "
               "make it on %zu device(s) of XLA's (the kernel's function of %s failed there; dlstream's CPU devices "
               "are DLSTREAM_CPU_DEVICES)",
               dls_device_str(d, runs, sizeof runs), p->nfns, runs);
      return DLS_ERR_INVALID_DEVICE;
    }
    p->handle = (uint64_t)p->fns[ordinal];
    p->device = d;
    return DLS_OK;
  }
  if (ordinal >= 0 && ordinal != p->device.device_id) {
    DLDevice d = dls_device(p->device.device_type, ordinal);
    snprintf(msg, DLS__XLA_MSG,
             "the %s is bound to %s, but XLA runs this call on %s (shard_map, pmap and a sharded jit run it on every "
             "device of the mesh): give dlstream.jax.kernel a kernel for each device (a built-in's name, "
             "dlstream.jax.source(...), dlstream.jax.image(...) or a function of the device)",
             p->op == DLS_XLA_OP_LAUNCH ? "function" : "latch", dls_device_str(p->device, bound, sizeof bound),
             dls_device_str(d, runs, sizeof runs));
    return DLS_ERR_INVALID_DEVICE;
  }
  return DLS_OK;
}
