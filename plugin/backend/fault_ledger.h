/* SPDX-License-Identifier: Apache-2.0 */
/* The fault-injecting backend's count of native allocations (test builds):
 * eager memory, and memory a capture allocated (fault_ledger.c). */
#ifndef DLSTREAM_BACKEND_FAULT_LEDGER_H
#define DLSTREAM_BACKEND_FAULT_LEDGER_H

#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"

/* After `real` allocated `ptr` on `stream`: counts it, and notes it as the
 * capture's when the stream captures. */
DLS__INTERNAL void dls__fault_ledger_alloc(const dls__backend *real, int dev, void *stream, void *ptr);
/* After `real` freed `ptr` (not NULL). */
DLS__INTERNAL void dls__fault_ledger_free(const dls__backend *real, int dev, void *ptr);
/* The capture of `stream` (0: none), asked before its end. */
DLS__INTERNAL uint64_t dls__fault_ledger_capture_of(const dls__backend *real, int dev, void *stream);
/* Capture `cap` ended as executable `graph`, or failed to end (graph NULL). */
DLS__INTERNAL void dls__fault_ledger_end(const dls__backend *real, int dev, uint64_t cap, void *graph);
/* After `graph` was replayed, or destroyed. */
DLS__INTERNAL void dls__fault_ledger_launch(const dls__backend *real, int dev, void *graph);
DLS__INTERNAL void dls__fault_ledger_destroy(const dls__backend *real, int dev, void *graph);

#endif /* DLSTREAM_BACKEND_FAULT_LEDGER_H */
