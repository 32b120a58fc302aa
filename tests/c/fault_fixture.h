/* SPDX-License-Identifier: Apache-2.0 */
/* The fault-injection sweep's fixture: the handles a scenario made, its
 * producers' deleter counts, its first failing step, and the runner that
 * fails each injectable point of a scenario in turn and checks what is left. */
#ifndef DLSTREAM_TESTS_FAULT_FIXTURE_H
#define DLSTREAM_TESTS_FAULT_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "base/fault.h"

#define FX_MAX 24

/* Graph capture lands in the core later: until then these are NULL and the
 * capture scenario is skipped with that reason. */
#pragma weak dls_stream_begin_capture
#pragma weak dls_stream_end_capture
#pragma weak dls_graph_launch
#pragma weak dls_graph_destroy

/* A DLPack producer whose deleter counts its calls. On the CPU its memory is
 * malloc'd and freed by the deleter (so AddressSanitizer sees a release that
 * comes too early); on a GPU it wraps a dlstream export. */
typedef struct fx_producer {
  DLManagedTensorVersioned v;
  DLManagedTensor l;
  int64_t shape[1];
  void *data;                      /* CPU: malloc'd */
  DLManagedTensorVersioned *inner; /* GPU: the export it wraps */
  int deleted;                     /* deleter calls */
  bool handed;                     /* given to an import (which steals it) */
} fx_producer;

typedef struct fx {
  DLDevice d;
  dls_stream_t streams[FX_MAX];
  int ns;
  dls_event_t events[FX_MAX];
  int ne;
  dls_buffer_t buffers[FX_MAX];
  int nb;
  dls_tensor_t tensors[FX_MAX];
  int nt;
  dls_group_t groups[FX_MAX];
  int ng;
  dls_latch_t latches[FX_MAX];
  int nl;
  dls_function_t functions[FX_MAX];
  int nf;
  dls_graph_t graphs[FX_MAX];
  int ngr;
  dls_stream_t branches[FX_MAX]; /* owned by their groups */
  int nbr;
  DLManagedTensorVersioned *exports[FX_MAX]; /* versioned exports whose deleter the cleanup calls */
  int nx;
  DLManagedTensor *legacy_exports[FX_MAX];
  int nlx;
  fx_producer producers[FX_MAX];
  int np;
  uint64_t *last_out; /* the output handle of the step being run */
  /* The first step that failed. */
  dls_status_t st;
  char step[160];
  char msg[1024];
  bool out_not_zeroed;
  char wrong[256]; /* a result that is wrong although no step failed */
  const char *skip; /* why the scenario cannot run here */
} fx;

typedef dls_status_t (*fx_fn)(fx *x);

typedef struct fx_scenario {
  const char *name;
  fx_fn run;
  bool needs_async; /* holds a stream with a latch */
} fx_scenario;

/* A new slot for an output handle of the next step. */
dls_stream_t *fx_stream(fx *x);
dls_event_t *fx_event(fx *x);
dls_buffer_t *fx_buffer(fx *x);
dls_tensor_t *fx_tensor(fx *x);
dls_group_t *fx_group(fx *x);
dls_latch_t *fx_latch(fx *x);
dls_function_t *fx_function(fx *x);
dls_graph_t *fx_graph(fx *x);
dls_stream_t *fx_branch(fx *x);

/* Releases every handle the scenario still holds, children before parents,
 * each a step (a failure is recorded and returned). */
dls_status_t fx_release_all(fx *x);

/* Records the failing step (its text, status and message); returns st. */
dls_status_t fx_failed(fx *x, dls_status_t st, const char *step);
/* Records a wrong result; returns DLS_ERR_INTERNAL. */
dls_status_t fx_wrong(fx *x, const char *what);
/* Marks the scenario as not runnable here; returns DLS_OK. */
dls_status_t fx_skip(fx *x, const char *why);

/* A producer of `n` float32 elements on x->d, set to `value`; NULL and the
 * status in *out_st when making it failed (GPU: the export it wraps). */
fx_producer *fx_producer_new(fx *x, int64_t n, float value, dls_status_t *out_st);
/* Hands a producer to an import, which steals it even on failure. */
DLManagedTensorVersioned *fx_hand_versioned(fx_producer *p);
DLManagedTensor *fx_hand_legacy(fx_producer *p);

/* Runs a step; on failure records it and returns its status from the
 * scenario. A slot taken (fx_stream ...) before the step is its output. */
#define STEP(x, expr)                                \
  do {                                               \
    dls_status_t step_st_ = (expr);                  \
    if (step_st_ != DLS_OK)                          \
      return fx_failed((x), step_st_, #expr);        \
    (x)->last_out = NULL;                            \
  } while (0)

/* Releases a handle as a step and forgets it. */
#define DROP(x, fn, slot)    \
  do {                       \
    STEP((x), fn(slot));     \
    (slot).id = 0;           \
  } while (0)

/* A result check: a fault that no call reported must not corrupt results. */
#define EXPECT(x, cond)              \
  do {                               \
    if (!(cond))                     \
      return fx_wrong((x), #cond);   \
  } while (0)

/* Makes producer `var` of n float32 elements set to `value`, or fails the scenario. */
#define PRODUCER(x, var, n, value)                        \
  dls_status_t var##_st_;                                 \
  fx_producer *var = fx_producer_new((x), (n), (value), &var##_st_); \
  if (var == NULL)                                        \
  return fx_failed((x), var##_st_, "fx_producer_new")

/* Elements of the scenarios' arrays. */
#define N 64

/* Host memory that queued copies read or write outlives the scenario: a step
 * that fails (a synchronize) returns before they ran; the cleanup waits.
 * fx_host_out() zeroes g_fx_out and returns it. */
extern float g_fx_out[3 * N];
extern double g_fx_out64[N];
extern const float g_fx_zeros[N];
float *fx_host_out(void);
/* Copies `bytes` at device address `src` to host `dst` on stream s and waits. */
dls_status_t fx_read_back(dls_stream_t s, void *dst, const void *src, size_t bytes);
bool fx_all_equal(const float *v, int n, float want);
/* A host kernel: data[i] += value for i < n; arguments (ptr data, u64 n, f32 value). */
int fx_k_add(const dls_launch_config_t *cfg, void *const *args, int nargs);

/* A new owned / pooled stream `var`, or the scenario fails. */
#define OWNED(x, var)              \
  dls_stream_t *var = fx_stream(x); \
  STEP((x), dls_stream_create((x)->d, NULL, var))
#define POOLED(x, var)             \
  dls_stream_t *var = fx_stream(x); \
  STEP((x), dls_stream_acquire((x)->d, var))

/* Latch waits in the sweep: bounded, and far longer than any scenario needs. */
#define FX_LATCH_NS 10000000000ull

/* The outcome of a sweep of one scenario. */
typedef struct fx_tally {
  uint64_t points;   /* points swept: every point of the clean run, or every stride-th (DLSTREAM_FAULT_STRIDE) */
  uint64_t of;       /* points of the clean run */
  uint64_t failed;   /* runs whose injected failure a call reported */
  uint64_t absorbed; /* runs whose injected failure the runtime absorbed (the calls succeeded) */
  uint64_t survived; /* runs that passed every check */
  bool skipped;
  const char *skip_reason;
} fx_tally;

/* Sweeps a scenario on device d: a clean run counts its points K, then each
 * of points 1..K fails in turn, then a clean run again. Each problem found is
 * logged with the scenario, the point and what went wrong. DLSTREAM_FAULT_STRIDE=k
 * (scripts/gpu-check sanitize, where a tool runs each point ~50x slower) fails
 * every k-th point only, from an offset that differs between scenarios. */
fx_tally fx_sweep(const fx_scenario *sc, DLDevice d);

/* The scenarios: fault_objects.c and fault_ordering.c. */
extern const fx_scenario fx_objects[];
extern const int fx_objects_n;
extern const fx_scenario fx_ordering[];
extern const int fx_ordering_n;

#endif /* DLSTREAM_TESTS_FAULT_FIXTURE_H */
