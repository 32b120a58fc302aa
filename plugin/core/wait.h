/* SPDX-License-Identifier: Apache-2.0 */
/* Waits: a stream waits for another on the device; the host waits for a stream or a device. */
#ifndef DLSTREAM_CORE_WAIT_H
#define DLSTREAM_CORE_WAIT_H

#include "core/stream.h"

/* Makes `waiter` wait for all work queued on `target` so far (pooled event). */
DLS__INTERNAL dls_status_t dls__stream_order(dls__stream *waiter, dls__stream *target);
/* The same for a waiter whose capture (`waiter_cap`, 0: eager) the caller asked already. */
DLS__INTERNAL dls_status_t dls__stream_order_at(dls__stream *waiter, uint64_t waiter_cap, dls__stream *target);

#endif /* DLSTREAM_CORE_WAIT_H */
