/* SPDX-License-Identifier: Apache-2.0 */
/* bench_c's rows per step of issue 34's rows: the event record and the stream wait alone, the capture-state
 * question alone, the record + wait against an anchor that asks it as dlstream does, the allocation rows with the
 * cache off, and allocations taking turns on two streams (each a handover of the caching allocator). */
#include <stdio.h>

#include "bench_cuda.h"

/* Sets the device's cache limit for the rows that follow; a failure is a failed row set. */
#define DLS_SETUP_LIMIT(c, bytes)                                                                    \
  do {                                                                                               \
    if (dls_device_set_cache_limit((c)->device, (bytes)) != DLS_OK) {                                \
      fprintf(stderr, "bench: dls_device_set_cache_limit(%zu): %s\n", (size_t)(bytes), dls_last_error()); \
      g_failures++;                                                                                  \
    }                                                                                                \
  } while (0)

/* Each step of the record+wait rows alone, on the streams the rows use now. */
static int raw_record(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++)
    CU_CHECK(cu.cuEventRecord(c->ev, c->s1));
  return 0;
}

static int dls_record(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++)
    DLS_CHECK(dls_event_record(c->dev_ev, c->u1));
  return 0;
}

static int raw_wait(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++)
    CU_CHECK(cu.cuStreamWaitEvent(c->s2, c->ev, 0));
  return 0;
}

static int dls_wait(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++)
    DLS_CHECK(dls_stream_wait_event(c->u2, c->dev_ev));
  return 0;
}

/* The record and wait with the capture-state question before each, as dlstream must ask on wrapped streams. */
int raw_record_wait_asking(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    if (ask_capture(c->s1) != 0)
      return -1;
    CU_CHECK(cu.cuEventRecord(c->ev, c->s1));
    if (ask_capture(c->s2) != 0)
      return -1;
    CU_CHECK(cu.cuStreamWaitEvent(c->s2, c->ev, 0));
  }
  return 0;
}

/* The capture-state question alone: the driver's, and dlstream's public one (a handle lookup, then the driver's
 * question on a wrapped stream; none on a stream dlstream made while no capture is known). */
static int raw_capture_question(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++)
    if (ask_capture(c->s1) != 0)
      return -1;
  return 0;
}

static int dls_capture_question(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_capture_status_t st;
    DLS_CHECK(dls_stream_capture_status(c->u1, &st));
  }
  return 0;
}

/* The driver's other capture-state question: the state without the capture's id, which the CUDA backend asks first
 * (the full question only while a capture is active or invalidated), weighed against raw_capture_question. */
static int raw_is_capturing(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls__CUstreamCaptureStatus status;
    CU_CHECK(cu.cuStreamIsCapturing(c->s1, &status));
  }
  return 0;
}

/* Allocations taking turns on two streams, each freed at once: with the cache every allocation takes over the block
 * the other stream freed (that stream's mark recorded, a wait on it); the anchor's pool reuses across streams by
 * itself. */
static int raw_alloc_free_turns(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls__CUdeviceptr ptr;
    dls__CUstream s = i % 2 ? c->s2 : c->s1;
    CU_CHECK(cu.cuMemAllocAsync(&ptr, c->bytes, s));
    CU_CHECK(cu.cuMemFreeAsync(ptr, s));
  }
  return 0;
}

static int dls_alloc_free_turns(void *p, int n) {
  cuda_ctx *c = p;
  for (int i = 0; i < n; i++) {
    dls_buffer_t b;
    DLS_CHECK(dls_buffer_alloc(i % 2 ? c->u2 : c->u1, c->bytes, &b));
    DLS_CHECK(dls_buffer_free(b));
  }
  return 0;
}

/* The allocation rows with the cache off (its limit 0): dlstream's path to the driver's pool. */
void uncached_rows(cuda_ctx *c, const char *streams) {
  char op[160];
  DLS_SETUP_LIMIT(c, 0);
  snprintf(op, sizeof op, "alloc+free 1 MiB, stream-ordered, cache off%s", streams);
  add_row(bench_gpu_label, op, "cuMemAllocAsync+cuMemFreeAsync", raw_alloc_free, dls_alloc_free, cuda_drain, c, 1000);
  snprintf(op, sizeof op, "alloc+use on 2nd stream+free 1 MiB, cache off%s", streams);
  add_row(bench_gpu_label, op, "cuMemAllocAsync+cuEventRecord+cuStreamWaitEvent+cuMemFreeAsync", raw_alloc_use_free,
          dls_alloc_use_free, cuda_drain, c, 1000);
  DLS_SETUP_LIMIT(c, (size_t)1 << 30);
}

/* The event rows' steps, and the allocation taking turns on two streams (a handover each). */
void step_rows(cuda_ctx *c, const char *streams) {
  char op[160];
  /* The waits wait on a recorded event (a never-recorded one is complete: dlstream skips the wait). */
  if (cu.cuEventRecord(c->ev, c->s1) != DLS__CUDA_SUCCESS || dls_event_record(c->dev_ev, c->u1) != DLS_OK) {
    fprintf(stderr, "bench: the step rows' first records failed: %s\n", dls_last_error());
    g_failures++;
  }
  snprintf(op, sizeof op, "step: event record%s", streams);
  add_row(bench_gpu_label, op, "cuEventRecord", raw_record, dls_record, cuda_drain, c, 2000);
  snprintf(op, sizeof op, "step: stream wait event%s", streams);
  add_row(bench_gpu_label, op, "cuStreamWaitEvent", raw_wait, dls_wait, cuda_drain, c, 2000);
  snprintf(op, sizeof op, "step: capture-state question (dls_stream_capture_status)%s", streams);
  if (cu.capture_info_v3 != NULL || cu.cuStreamGetCaptureInfo != NULL)
    add_row(bench_gpu_label, op, "cuStreamGetCaptureInfo", raw_capture_question, dls_capture_question, cuda_drain, c,
            2000);
  if (streams[0] == '\0' && cu.cuStreamIsCapturing != NULL &&
      (cu.capture_info_v3 != NULL || cu.cuStreamGetCaptureInfo != NULL))
    add_row(bench_gpu_label, "step: the driver's capture-state questions, cuStreamIsCapturing (asked first) against the full one",
            "cuStreamGetCaptureInfo", raw_capture_question, raw_is_capturing, cuda_drain, c, 2000);
  snprintf(op, sizeof op, "alloc+free 1 MiB taking turns on 2 streams (a handover each)%s", streams);
  add_row(bench_gpu_label, op, "cuMemAllocAsync+cuMemFreeAsync, the same turns", raw_alloc_free_turns,
          dls_alloc_free_turns, cuda_drain, c, 1000);
}

