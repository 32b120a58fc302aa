/* SPDX-License-Identifier: Apache-2.0 */
/* Events: markers recorded on a stream, waited on by other streams or the host. */
#ifndef DLSTREAM_EVENT_H
#define DLSTREAM_EVENT_H

#include "runtime.h"

#define DLS_EVENT_DEFAULT 0u       /* no timing: the cheapest event */
#define DLS_EVENT_TIMING 1u        /* records timestamps for dls_event_elapsed_ms */
#define DLS_EVENT_BLOCKING_SYNC 2u /* synchronize sleeps instead of spinning */

DLS_EXTERN_C_BEGIN

/* Creates an owned event. Owned by caller: dls_event_destroy(). An event
 * without flags takes its native event from the device's pool (no driver
 * call) and gives it back on destroy; until recorded it is complete, as
 * every new event is. */
DLS_API dls_status_t dls_event_create(DLDevice device, unsigned flags, dls_event_t *out_event);

/* Wraps a native event made by someone else (a CUevent, e.g.
 * torch.cuda.Event().cuda_event). Never destroys the native event. */
DLS_API dls_status_t dls_event_wrap(DLDevice device, void *native, dls_event_t *out_event);

/* Owned: destroys the native event (pending records still complete).
 * Foreign: frees the wrapper. {0}: no-op. */
DLS_API dls_status_t dls_event_destroy(dls_event_t event);

/* Captures the work queued on `stream` so far. Re-recording replaces what
 * later waits see; earlier waits keep the record they saw. */
DLS_API dls_status_t dls_event_record(dls_event_t event, dls_stream_t stream);

/* `stream` waits for the event's latest record; the host does not. Same as
 * dls_stream_wait_event(stream, event). */
DLS_API dls_status_t dls_event_wait(dls_event_t event, dls_stream_t stream);

/* Blocks the host until the latest record completes (immediate if never recorded). */
DLS_API dls_status_t dls_event_synchronize(dls_event_t event);

/* *out_complete = 1 when the latest record has completed (or none was made). */
DLS_API dls_status_t dls_event_query(dls_event_t event, int *out_complete);

/* Milliseconds between two completed records of timing events. */
DLS_API dls_status_t dls_event_elapsed_ms(dls_event_t start, dls_event_t end, float *out_ms);

/* The native event (CUevent ...). Borrowed: valid while the handle is. A
 * pooled event that was never recorded gets a native of its own first, so
 * that what the caller does with it outside dlstream sees no earlier record. */
DLS_API dls_status_t dls_event_native(dls_event_t event, void **out_native);

DLS_EXTERN_C_END

#endif /* DLSTREAM_EVENT_H */
