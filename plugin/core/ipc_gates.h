/* SPDX-License-Identifier: Apache-2.0 */
/* What each side of memory shared between processes keeps per device and process (ipc_gates.c): the exporter's gate
 * pages, whose words an import's close writes, and the importer's mappings of other processes' memory. */
#ifndef DLSTREAM_CORE_IPC_GATES_H
#define DLSTREAM_CORE_IPC_GATES_H

#include "core/device.h"

/* A word of a device's gate page (shared with importers): an export's import writes `value` there when it is
 * closed, after its uses, and the exporter's free waits for it, on the device. */
typedef struct dls__ipc_gate {
  dls__device *dev;
  void *addr;
  uint32_t slot, value;
} dls__ipc_gate;
/* A free word of `dev`'s gate page (made at the first export of the device) with its next value, and the page's
 * interprocess bytes. DLS_ERR_BUSY when every word waits for an import's close. */
DLS__INTERNAL dls_status_t dls__ipc_gate_take(dls__device *dev, dls__ipc_gate *out, uint8_t *out_page);
/* The word is free again (its wait passed, or the export failed). */
DLS__INTERNAL void dls__ipc_gate_return(const dls__ipc_gate *g);

/* Another process's allocation mapped for `dev`, once per process and allocation however often it is imported. */
typedef struct dls__ipc_map dls__ipc_map;
DLS__INTERNAL dls_status_t dls__ipc_map_open(dls__device *dev, const uint8_t *bytes, dls__ipc_map **out,
                                             void **out_base);
DLS__INTERNAL void dls__ipc_map_close(dls__ipc_map *m);

/* Set by dls_shutdown: frees no longer wait for imports' closes. */
DLS__INTERNAL extern _Atomic bool dls__ipc_closing;
/* dls_shutdown's first step: every gate still waited for is opened by the exporter itself (the exporter must
 * outlive its importers' use; past this, the memory is freed whatever they do). */
DLS__INTERNAL void dls__ipc_shutdown_begin(void);
/* After the deferred releases ran: the gate pages go, mappings left are closed. */
DLS__INTERNAL void dls__ipc_shutdown_end(void);

#endif /* DLSTREAM_CORE_IPC_GATES_H */
