/* SPDX-License-Identifier: Apache-2.0 */
/* What the CPU backend's files above the queue engine (cpu_queue.h) share: events, captures, memory. */
#ifndef DLSTREAM_BACKEND_CPU_INTERNAL_H
#define DLSTREAM_BACKEND_CPU_INTERNAL_H

#include "backend/cpu_queue.h"

typedef struct cpu_event {
  cpu_link link; /* first: the registry of live events */
  uint32_t magic;
  unsigned flags;
  pthread_mutex_t mu;
  cpu_node *latest; /* NULL: never recorded */
} cpu_event;

/* A capture underway: the commands its streams queued, in the order they
 * were queued (a valid order to replay them in), and what it allocated. */
struct cpu_capture {
  uint64_t id;
  int mode;
  int status;          /* DLS__CAPTURE_ACTIVE or DLS__CAPTURE_INVALIDATED */
  char why[160];       /* what invalidated it */
  cpu_stream **tracks; /* [0] the origin, then streams that joined; NULL once destroyed */
  int ntracks, cap_tracks;
  cpu_cmd *head, *tail;
  int nrecords;        /* placeholder records made so far */
  cpu_block *blocks;   /* BLOCK_GRAPH allocations */
  cpu_capture *next;   /* g.captures */
};

/* ---- events (cpu_event.c) ---- */
DLS__INTERNAL dls_status_t dls__cpu_event_create(const dls__backend *be, int dev, unsigned flags, void **out);
DLS__INTERNAL dls_status_t dls__cpu_event_destroy(const dls__backend *be, int dev, void *native);
DLS__INTERNAL dls_status_t dls__cpu_event_check(const dls__backend *be, int dev, void *native);
DLS__INTERNAL dls_status_t dls__cpu_event_record(const dls__backend *be, int dev, void *ev, void *stream);
DLS__INTERNAL dls_status_t dls__cpu_stream_wait_event(const dls__backend *be, int dev, void *stream, void *ev);
DLS__INTERNAL dls_status_t dls__cpu_event_query(const dls__backend *be, int dev, void *ev, int *out_complete);
DLS__INTERNAL dls_status_t dls__cpu_event_synchronize(const dls__backend *be, int dev, void *ev);
DLS__INTERNAL dls_status_t dls__cpu_event_elapsed(const dls__backend *be, int dev, void *a, void *b, float *out_ms);

/* ---- memory (cpu_memory.c) ---- */
DLS__INTERNAL dls_status_t dls__cpu_mem_alloc(const dls__backend *be, int dev, size_t size, void *stream, void **out);
DLS__INTERNAL dls_status_t dls__cpu_mem_free(const dls__backend *be, int dev, void *ptr, void *stream);
DLS__INTERNAL dls_status_t dls__cpu_memcpy(const dls__backend *be, int dev, void *dst, const void *src, size_t n,
                                           void *stream);
DLS__INTERNAL dls_status_t dls__cpu_host_mapped_alloc(const dls__backend *be, int dev, size_t size, void **out_host,
                                                      void **out_device);
DLS__INTERNAL dls_status_t dls__cpu_host_mapped_free(const dls__backend *be, int dev, void *host);
DLS__INTERNAL dls_status_t dls__cpu_peer_access(const dls__backend *be, int dev, int peer, int *out_can);
DLS__INTERNAL dls_status_t dls__cpu_memcpy_peer(const dls__backend *be, int dev, void *dst, int src_dev,
                                                const void *src, size_t n, void *stream);
/* Frees the idle pool (shutdown). */
DLS__INTERNAL void dls__cpu_pool_drain(void);

/* ---- captures (cpu_capture.c); every function expects g.mu held unless it says otherwise ---- */

/* Queues a command, or records it when the stream is capturing (steals c; g.mu not held). */
DLS__INTERNAL dls_status_t dls__cpu_submit(cpu_stream *s, cpu_cmd *c);
/* Fails (and invalidates the capture, as CUDA does) when `s` is capturing:
 * `what` cannot be recorded, or would look at work that does not run (g.mu not held). */
DLS__INTERNAL dls_status_t dls__cpu_refuse_capturing(cpu_stream *s, const char *what);
/* Appends a command queued on a capturing stream (steals c). */
DLS__INTERNAL dls_status_t dls__cpu_capture_append(cpu_stream *s, cpu_cmd *c);
/* Marks the capture failed, with the reason; later calls on it fail. */
DLS__INTERNAL void dls__cpu_capture_invalidate(cpu_capture *cap, const char *why);
/* The capture underway with this id, or NULL. */
DLS__INTERNAL cpu_capture *dls__cpu_capture_find(uint64_t id);
/* A stream joins a capture (it waited on one of its records). */
DLS__INTERNAL dls_status_t dls__cpu_capture_join(cpu_capture *cap, cpu_stream *s);
/* A stream in a capture is destroyed: the capture can no longer end well. */
DLS__INTERNAL void dls__cpu_capture_drop_stream(cpu_stream *s);

DLS__INTERNAL dls_status_t dls__cpu_capture_status(const dls__backend *be, int dev, void *stream, int *out_status,
                                                   uint64_t *out_id);
DLS__INTERNAL dls_status_t dls__cpu_begin_capture(const dls__backend *be, int dev, void *stream, int mode);
DLS__INTERNAL dls_status_t dls__cpu_end_capture(const dls__backend *be, int dev, void *stream, void **out_graph);
DLS__INTERNAL dls_status_t dls__cpu_graph_launch(const dls__backend *be, int dev, void *graph, void *stream);
DLS__INTERNAL dls_status_t dls__cpu_graph_destroy(const dls__backend *be, int dev, void *graph);
/* Frees captures still underway (shutdown; g.mu not held). */
DLS__INTERNAL void dls__cpu_captures_shutdown(void);

#endif /* DLSTREAM_BACKEND_CPU_INTERNAL_H */
