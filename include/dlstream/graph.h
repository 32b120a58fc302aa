/* SPDX-License-Identifier: Apache-2.0 */
/* Graph capture: record the work queued on a stream once, replay it many times.
 *
 *   dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL);
 *   ... launches, copies, events, groups and temporaries on s (and on streams
 *       that joined the capture by waiting on an event recorded in it) ...
 *   dls_graph_t g;  dls_stream_end_capture(s, &g);
 *   dls_graph_launch(g, s);  dls_graph_launch(g, s);   // each replays the work
 *   dls_graph_destroy(g);
 *
 * Work queued on a capturing stream is recorded, not run. dlstream also works
 * inside captures it did not begin (torch.cuda.graph, CuPy, the driver): see
 * "Graph capture" in docs/semantics.md for the rules. */
#ifndef DLSTREAM_GRAPH_H
#define DLSTREAM_GRAPH_H

#include "runtime.h"

/* Which other calls a capture forbids while it is underway (the values of
 * CUDA's CUstreamCaptureMode). */
typedef enum dls_capture_mode_t {
  DLS_CAPTURE_GLOBAL = 0,       /* potentially unsafe calls are refused on every thread */
  DLS_CAPTURE_THREAD_LOCAL = 1, /* ... only on the thread that began the capture */
  DLS_CAPTURE_RELAXED = 2       /* nothing is refused beyond what conflicts with the capture */
} dls_capture_mode_t;

/* The capture state of a stream (the values of CUDA's CUstreamCaptureStatus). */
typedef enum dls_capture_status_t {
  DLS_CAPTURE_NONE = 0,       /* not capturing: work runs */
  DLS_CAPTURE_ACTIVE = 1,     /* capturing: work is recorded */
  DLS_CAPTURE_INVALIDATED = 2 /* the capture failed; end it to discard it */
} dls_capture_status_t;

DLS_EXTERN_C_BEGIN

/* Starts capturing on `stream` (owned, pooled or foreign; never a default
 * stream). Until dls_stream_end_capture, work queued on it is recorded. */
DLS_API dls_status_t dls_stream_begin_capture(dls_stream_t stream, dls_capture_mode_t mode);
/* Ends the capture begun on `stream` and makes it replayable. Owned by
 * caller: dls_graph_destroy(). The graph keeps a reference on every buffer
 * the capture's work used and did not allocate until it is destroyed (that
 * memory outlives its replays). DLS_ERR_STATE when the capture was
 * invalidated or a stream that joined it has not rejoined `stream`. */
DLS_API dls_status_t dls_stream_end_capture(dls_stream_t stream, dls_graph_t *out_graph);
/* Ends the capture dlstream began on `stream` and drops what it recorded, open
 * groups or an invalidated capture included (use it where
 * dls_stream_end_capture was refused, or to abandon a capture). DLS_OK when
 * the stream is not capturing; DLS_ERR_STATE when its capture was begun
 * elsewhere (torch, the driver). Destroying the stream handle that began a
 * capture discards it the same way. */
DLS_API dls_status_t dls_stream_discard_capture(dls_stream_t stream);
/* The capture state of a stream, including captures dlstream did not begin. */
DLS_API dls_status_t dls_stream_capture_status(dls_stream_t stream, dls_capture_status_t *out_status);
/* Queues one replay of the graph on `stream` (a stream of the graph's device).
 * Replays on one stream run one after another; the host does not wait. The
 * replay is one piece of work under the hazard rule on the memory its
 * capture used and did not allocate: `stream` first waits, on the device,
 * for the uses on other streams it must follow, and later uses wait for it. */
DLS_API dls_status_t dls_graph_launch(dls_graph_t graph, dls_stream_t stream);
/* Destroys the graph once its queued replays have run (the host does not
 * wait); temporaries the capture left alive are freed after the last replay.
 * {0}: no-op. */
DLS_API dls_status_t dls_graph_destroy(dls_graph_t graph);

DLS_EXTERN_C_END

#endif /* DLSTREAM_GRAPH_H */
