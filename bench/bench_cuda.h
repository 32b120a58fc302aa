/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA rows' shared state (bench_cuda.c sets it up; bench_held.c's rows use it too) and the loops both files
 * time. */
#ifndef DLSTREAM_BENCH_CUDA_H
#define DLSTREAM_BENCH_CUDA_H

#include "bench.h"

typedef struct cuda_ctx {
  DLDevice device;
  dls__CUcontext ctx;
  dls__CUstream s1, s2;     /* raw streams, also wrapped for dlstream */
  dls_stream_t ds1, ds2;    /* s1, s2 wrapped: foreign streams, as torch's are */
  dls_stream_t os1, os2;    /* streams dlstream made itself */
  dls_stream_t u1, u2;      /* the pair the dlstream rows use now (ds or os) */
  size_t bytes;             /* the size the allocation rows allocate now */
  bool ask;                 /* the raw allocation rows ask the capture state as dlstream must on wrapped streams */
  dls__CUevent ev;          /* raw event */
  dls__CUevent ev2[2];      /* a raw event per stream, recorded after each launch on it (the by-hand crossing) */
  dls_event_t dev_ev;       /* dlstream event */
  dls__CUfunction raw_empty, raw_axpy;
  dls_function_t dls_empty_fn, dls_axpy_fn;
  dls__CUdeviceptr x, y;    /* axpy operands, raw allocations */
  dls_buffer_t bx, by;      /* axpy operands, dlstream buffers (on ds1) */
  dls_buffer_t obx, oby;    /* the same on os1 */
  dls_buffer_t ux, uy;      /* the operands the launch rows use: bx, by or obx, oby */
  dls_buffer_t bx2, by2;    /* a second pair on ds2, and on os2: each stream's own operands (the by-hand crossing) */
  dls_buffer_t obx2, oby2;
  dls_buffer_t ux2, uy2;    /* u2's own pair: bx2, by2 or obx2, oby2 */
  dls_buffer_t tb[4], otb[4]; /* two more pairs on ds1, and on os1, that nothing else uses: the held rows' control
                                 of the by-hand side's four operands against two */
  const dls_buffer_t *ut;   /* the control's pairs now: tb or otb */
  dls_latch_t hold;         /* the held rows' latch, holding s1, s2, os1 and os2 (0: none) */
  bool holding;             /* held_drain holds the streams again after each drain */
  unsigned long long n_elems;
  float a;
} cuda_ctx;

/* Waits for everything queued on the four streams. */
int cuda_drain(void *p);
/* Points the rows at the wrapped streams (ds1, ds2) and their buffers, or at dlstream's own (os1, os2). */
void cuda_use_set(cuda_ctx *c, bool own);

/* Loops timed by both files (bench_body): axpy_f32 on raw pointers, on the pair of buffers ux/uy, alternating
 * between u1 and u2 on one y (a crossing each), and taking turns on the two streams with nothing ordering them. */
int raw_launch_axpy(void *p, int n);
int dls_launch_axpy_ptr(void *p, int n);
int dls_launch_axpy_buf(void *p, int n);
int dls_launch_axpy_alternate(void *p, int n);
int raw_launch_axpy_alternate(void *p, int n);
int raw_launch_axpy_turns(void *p, int n);
int dls_launch_axpy_ptr_turns(void *p, int n);

/* The capture-state question a launcher must ask of a stream it did not make before each allocation, free and
 * record on it (another framework may be capturing the stream): with c->ask the raw rows ask it as dlstream does. */
static inline int ask_capture(dls__CUstream s) {
  dls__CUstreamCaptureStatus status;
  dls__cuuint64_t id;
  CU_CHECK(cu.capture_info_v3 != NULL ? cu.capture_info_v3(s, &status, &id, NULL, NULL, NULL, NULL)
                                      : cu.cuStreamGetCaptureInfo(s, &status, &id));
  return 0;
}
/* 1 MiB (c->bytes) allocated and freed on u1 (the raw side on s1), and with a use on u2 (s2) between. */
int raw_alloc_free(void *p, int n);
int dls_alloc_free(void *p, int n);
int raw_alloc_use_free(void *p, int n);
int dls_alloc_use_free(void *p, int n);
/* Rows per step (bench_steps.c): the allocation rows with the cache off, and the event rows' steps and the
 * allocations taking turns on two streams; `streams` ends each row's name (", dlstream's own streams" or ""). */
void uncached_rows(cuda_ctx *c, const char *streams);
void step_rows(cuda_ctx *c, const char *streams);
/* An event record and a wait on it, with the capture-state question before each (bench_steps.c). */
int raw_record_wait_asking(void *p, int n);

/* The hazard rule's rows with the streams held (bench_held.c). */
void held_rows(cuda_ctx *c);

#endif /* DLSTREAM_BENCH_CUDA_H */
