/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection (test builds only): host allocations, the points and
 * object counts the fault-injecting backend wrapper (backend/fault.c) uses,
 * and the control API the tests use.
 *
 * Built with -DDLS_FAULT_INJECTION (the CMake option of that name, on in test
 * builds, off in Release and in `pip install`). Without it the allocation
 * wrappers are the C library's own functions, the backend is not wrapped, and
 * the control API does not exist: nothing is left on any path.
 *
 * An injectable point is one host allocation (dls__malloc/calloc/realloc) or
 * one call of a backend method that can fail (create, record, wait, launch,
 * copy, query ...; not the release methods, which the core treats as
 * infallible). Points are numbered 1, 2, ... in the order they are passed,
 * counting from the latest dls_fault_arm() or dls_fault_reset(), across all
 * threads. An armed point fails once: a host allocation returns NULL, a
 * backend method returns the chosen status with the message "fault injection:
 * <method> failed (point N)". */
#ifndef DLSTREAM_BASE_FAULT_H
#define DLSTREAM_BASE_FAULT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "dlstream/dlstream.h"
#include "base/error.h"

#ifdef DLS_FAULT_INJECTION

/* Native objects a backend makes and releases, counted per kind. */
typedef enum dls_fault_object_t {
  DLS_FAULT_STREAM = 0,     /* stream_create / stream_destroy */
  DLS_FAULT_EVENT = 1,      /* event_create / event_destroy */
  DLS_FAULT_ALLOCATION = 2, /* mem_alloc / mem_free (non-NULL pointers) */
  DLS_FAULT_MAPPED = 3,     /* host_mapped_alloc / host_mapped_free */
  DLS_FAULT_MODULE = 4,     /* module_load / module_unload */
  DLS_FAULT_GRAPH = 5,      /* stream_end_capture / graph_destroy */
  DLS_FAULT_FUNCTION = 6,   /* host_function / host_function_destroy */
  DLS_FAULT_OBJECT_KINDS = 7 /* not a kind: the number of kinds */
} dls_fault_object_t;

DLS_EXTERN_C_BEGIN

/* Restarts the point count at 0 and fails point `n` (1-based) once.
 * `status` is what a failing backend method returns; DLS_OK picks the point's
 * own (DLS_ERR_OUT_OF_MEMORY for mem_alloc, host_mapped_alloc and
 * event_create, DLS_ERR_BACKEND for the rest). Host allocations always fail
 * with NULL. n = 0: count only. */
DLS_API void dls_fault_arm(uint64_t n, dls_status_t status);
/* Stops failing points; the count goes on. */
DLS_API void dls_fault_disarm(void);
/* Restarts the point count at 0, disarmed. */
DLS_API void dls_fault_reset(void);
/* Points passed since the latest arm or reset. */
DLS_API uint64_t dls_fault_points(void);
/* Failures injected since the latest arm or reset (0 or 1). */
DLS_API uint64_t dls_fault_injected(void);
/* The name of the latest point that failed ("stream_create", "malloc" ...),
 * or "" when none did since the latest arm or reset. */
DLS_API const char *dls_fault_last(void);
/* Native objects of `kind` every backend created and destroyed since the
 * process started (either output may be NULL). */
DLS_API void dls_fault_objects(dls_fault_object_t kind, uint64_t *out_created, uint64_t *out_destroyed);
/* The name of an object kind ("stream", "event", "allocation" ...). */
DLS_API const char *dls_fault_object_name(dls_fault_object_t kind);
/* Host waits (stream and event synchronizations, any backend) that blocked while a latch held a stream, since the
 * process started: made on work not complete yet while some latch was waited on and not opened. Such a wait can
 * end only with the latch's timeout when the caller is the one to open it (a host wait the caller cannot end).
 * A free of page-locked (host-mapped) memory made meanwhile counts too: the driver's may wait for the whole device;
 * counted by the fault-injecting backend (backend/fault.c), whatever the machine's speed. */
DLS_API uint64_t dls_fault_blocked_waits(void);
/* Calls fn(arg) on the thread that passes a point named `point` ("event_record" ...), before the point's own
 * decision, until replaced; fn NULL: none. A nonzero return fails that point as an armed one would (status
 * DLS_ERR_BACKEND for backend points). For tests that hold a thread inside a call (test_stream_retire.c); fn runs
 * inside whatever the call holds (a pin). */
DLS_API void dls_fault_hook(const char *point, int (*fn)(void *arg), void *arg);

DLS_EXTERN_C_END

/* ---- internal ---- */

/* Whether the next point fails; on failure *out_status is set (with the
 * message) for backend points. `natural` is the point's own status. */
DLS__INTERNAL int dls__fault_hit(const char *point, dls_status_t natural, dls_status_t *out_status);
/* Counts a native object of `kind` made (+1) or released (-1). */
DLS__INTERNAL void dls__fault_count(dls_fault_object_t kind, int delta);

/* Host allocations: the C library's, each an injectable point. */
DLS__INTERNAL void *dls__malloc(size_t size);
DLS__INTERNAL void *dls__calloc(size_t n, size_t size);
DLS__INTERNAL void *dls__realloc(void *p, size_t size);
#define dls__free free

#else /* !DLS_FAULT_INJECTION: the C library itself, nothing wrapped */

#define dls__malloc malloc
#define dls__calloc calloc
#define dls__realloc realloc
#define dls__free free

#endif /* DLS_FAULT_INJECTION */

#endif /* DLSTREAM_BASE_FAULT_H */
