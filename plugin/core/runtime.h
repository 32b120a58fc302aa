/* SPDX-License-Identifier: Apache-2.0 */
/* The runtime's state: the guard at the top of every public call, and what every core file takes from the base. */
#ifndef DLSTREAM_CORE_RUNTIME_H
#define DLSTREAM_CORE_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/fault.h"
#include "base/handle.h"
#include "core/tables.h"
#include "dlstream/dlstream.h"

/* Fast-path guard at the top of every public call: initializes on first use,
 * refuses use after fork(). Returns from the caller on failure. */
DLS__INTERNAL extern _Atomic int dls__state; /* 0 uninit, 1 ready, 2 forked */
DLS__INTERNAL dls_status_t dls__enter_slow(const char *call);
/* DLSTREAM_TEST_NO_HAZARDS=1, read when the runtime starts: the hazard rule
 * notes uses but orders nothing (access.c). A test-only switch: the negative
 * control of the ordering tests, which must then see wrong answers. */
DLS__INTERNAL extern _Atomic bool dls__hazards_off;
/* DLSTREAM_TEST_NO_FOREIGN=1 (read at start-up; tests turn it): no record of foreign memory is made or joined
 * (foreign.h), the negative control of the tests of foreign memory. */
DLS__INTERNAL extern _Atomic bool dls__foreign_off;
/* DLSTREAM_TEST_BREAK_NOTED=1 (read at start-up): a use noted as it was ordered (access.c) skips the record of its
 * stream's mark after its work, the ordering that way must not skip: the negative control of its tests. */
DLS__INTERNAL extern _Atomic bool dls__noted_broken;
/* DLSTREAM_TEST_BREAK_TWINS=1 (read at start-up): the core's twins of a contiguous copy or conversion get one byte or
 * element fewer than the call has (core/builtin.c), the negative control of the tests that the core picks them. */
DLS__INTERNAL extern _Atomic bool dls__twins_broken;
#define DLS__ENTER(call)                                                 \
  do {                                                                   \
    if (DLS__UNLIKELY(atomic_load_explicit(&dls__state, memory_order_acquire) != 1)) \
      DLS__TRY(dls__enter_slow(call));                                   \
  } while (0)

/* The size classes of the thread's cache of small objects (base/handle.h). */
enum { DLS__OBJ_STREAM, DLS__OBJ_EVENT, DLS__OBJ_BUFFER, DLS__OBJ_TENSOR, DLS__OBJ_DEFERRED, DLS__OBJ_KINDS };
_Static_assert(DLS__OBJ_KINDS <= DLS__OBJ_CLASSES, "a class of small objects the thread cache has no room for");

#endif /* DLSTREAM_CORE_RUNTIME_H */
