/* SPDX-License-Identifier: Apache-2.0 */
/* bench_c's held rows: the hazard rule's crossing timed with the streams held behind a latch (the host's part
 * alone), beside the same crossing made by hand, and the controls that read them (docs/benchmarks.md, "The
 * crossing against one by hand"). */
#include <stdio.h>

#include "bench_cuda.h"

/* The held rows' drain: lets the streams go, waits for them, and holds them again behind a latch, so that the next
 * timed batch is queued and not run: it times the host's part alone, with nothing for the device to throttle. */
static int held_drain(void *p) {
  cuda_ctx *c = p;
  if (c->hold.id != 0) {
    DLS_CHECK(dls_latch_open(c->hold));
    DLS_CHECK(dls_latch_destroy(c->hold));
    c->hold.id = 0;
  }
  if (cuda_drain(c) != 0)
    return -1;
  if (!c->holding)
    return 0;
  DLS_CHECK(dls_latch_create(c->device, &c->hold));
  const dls_stream_t held[4] = {c->ds1, c->ds2, c->os1, c->os2};
  for (int i = 0; i < 4; i++)
    DLS_CHECK(dls_latch_wait(c->hold, held[i], 20ull * 1000 * 1000 * 1000));
  return 0;
}

/* A crossing by hand, in the rule's order: each launch waits on the event the other stream recorded after its last
 * launch, then records its stream's own. The launch is dlstream's with operands of its own stream (HAND_OWN: no
 * crossing for the rule to see, and the same buffers' resolution as the rule's side), dlstream's with raw pointers
 * (HAND_PTR), or the driver's (HAND_RAW). Against dls_launch_axpy_alternate, the difference is what the rule's
 * crossing costs above the raw record and wait, less what differs in the launches. */
enum { HAND_OWN, HAND_PTR, HAND_RAW };
static inline __attribute__((always_inline)) int hand_crossing(cuda_ctx *c, int n, const int how) {
  dls_launch_config_t cfg = dls_config_1d(1, 256);
  dls_arg_t args[2][4] = {
      {dls_arg_u64(c->n_elems), dls_arg_f32(c->a), dls_arg_buffer_in(c->ux), dls_arg_buffer(c->uy)},
      {dls_arg_u64(c->n_elems), dls_arg_f32(c->a), dls_arg_buffer_in(c->ux2), dls_arg_buffer(c->uy2)}};
  dls_arg_t ptrs[4] = {dls_arg_u64(c->n_elems), dls_arg_f32(c->a), dls_arg_ptr((void *)(uintptr_t)c->x),
                       dls_arg_ptr((void *)(uintptr_t)c->y)};
  void *params[4] = {&c->n_elems, &c->a, &c->x, &c->y};
  void *n1 = NULL, *n2 = NULL;
  DLS_CHECK(dls_stream_native(c->u1, &n1));
  DLS_CHECK(dls_stream_native(c->u2, &n2));
  for (int i = 0; i < n; i++) {
    dls__CUstream on = (dls__CUstream)(i % 2 ? n2 : n1);
    CU_CHECK(cu.cuStreamWaitEvent(on, c->ev2[1 - i % 2], 0));
    if (how == HAND_OWN)
      DLS_CHECK(dls_launch(c->dls_axpy_fn, i % 2 ? c->u2 : c->u1, &cfg, args[i % 2], 4));
    else if (how == HAND_PTR)
      DLS_CHECK(dls_launch(c->dls_axpy_fn, i % 2 ? c->u2 : c->u1, &cfg, ptrs, 4));
    else
      CU_CHECK(cu.cuLaunchKernel(c->raw_axpy, 1, 1, 1, 256, 1, 1, 0, on, params, NULL));
    CU_CHECK(cu.cuEventRecord(c->ev2[i % 2], on));
  }
  return 0;
}

static int hand_crossing_own_operands(void *p, int n) { return hand_crossing(p, n, HAND_OWN); }
static int hand_crossing_raw_pointers(void *p, int n) { return hand_crossing(p, n, HAND_PTR); }
static int hand_crossing_raw_launches(void *p, int n) { return hand_crossing(p, n, HAND_RAW); }

/* The by-hand side's working set. The crossing rows' hand side (HAND_OWN) touches four buffers, each stream its
 * own pair, where the rule's side touches two, used by both streams. This control times the hand side's sequence
 * (wait on an event, launch, record) on one stream, the launches taking turns between two pairs of that stream's
 * own buffers (four), against the same launches on one pair (two): what touching four buffers costs above two,
 * which the direct reading of the crossing (the rule against HAND_OWN) counts against the anchor. */
static inline __attribute__((always_inline)) int one_stream_hand(cuda_ctx *c, int n, const bool four) {
  dls_launch_config_t cfg = dls_config_1d(1, 256);
  const dls_buffer_t *t = c->ut;
  dls_arg_t args[2][4] = {{dls_arg_u64(c->n_elems), dls_arg_f32(c->a), dls_arg_buffer_in(t[0]), dls_arg_buffer(t[1])},
                          {dls_arg_u64(c->n_elems), dls_arg_f32(c->a), dls_arg_buffer_in(t[2]), dls_arg_buffer(t[3])}};
  void *n1 = NULL;
  DLS_CHECK(dls_stream_native(c->u1, &n1));
  dls__CUstream on = (dls__CUstream)n1;
  for (int i = 0; i < n; i++) {
    CU_CHECK(cu.cuStreamWaitEvent(on, c->ev2[1 - i % 2], 0));
    DLS_CHECK(dls_launch(c->dls_axpy_fn, c->u1, &cfg, args[four ? i % 2 : 0], 4));
    CU_CHECK(cu.cuEventRecord(c->ev2[i % 2], on));
  }
  return 0;
}

static int hand_two_operands(void *p, int n) { return one_stream_hand(p, n, false); }
static int hand_four_operands(void *p, int n) { return one_stream_hand(p, n, true); }

/* The hazard rule's rows again with the streams held (held_drain): a batch of HELD_BATCH launches queues behind a
 * latch, so each figure is the host's time alone, which is what the rule adds to (a free-running batch also
 * times the device, which throttles the host once its queue fills, and moves the figures by 10-30 %). */
enum { HELD_BATCH = 200 };

/* The rule's crossing against the crossings by hand, on the streams u1 and u2 (`which` names them). */
static void rule_against_hand_rows(cuda_ctx *c, const char *which) {
  char row[200];
  snprintf(row, sizeof row, "held: a crossing by the rule, against one by hand around the same launches (%s)", which);
  add_row(bench_gpu_label, row, "cuStreamWaitEvent + dls_launch (each stream's own operands) + cuEventRecord",
          hand_crossing_own_operands, dls_launch_axpy_alternate, held_drain, c, HELD_BATCH);
  snprintf(row, sizeof row, "held: a crossing by the rule, against one by hand around dls_launch, raw pointers (%s)",
           which);
  add_row(bench_gpu_label, row, "cuStreamWaitEvent + dls_launch (raw pointers) + cuEventRecord",
          hand_crossing_raw_pointers, dls_launch_axpy_alternate, held_drain, c, HELD_BATCH);
  snprintf(row, sizeof row, "held: a crossing by the rule, against one by hand around cuLaunchKernel (%s)", which);
  add_row(bench_gpu_label, row, "cuStreamWaitEvent + cuLaunchKernel + cuEventRecord", hand_crossing_raw_launches,
          dls_launch_axpy_alternate, held_drain, c, HELD_BATCH);
  /* Both sides raw: what the driver's record and wait cost, paired, the yardstick of the rows above. */
  snprintf(row, sizeof row, "held: the raw record and wait alone, both sides raw (%s)", which);
  add_row(bench_gpu_label, row, "cuLaunchKernel taking turns (the other side: wait + launch + record)",
          raw_launch_axpy_turns, hand_crossing_raw_launches, held_drain, c, HELD_BATCH);
  /* The control of the first row's anchor: its four operands against two, on u1 alone. */
  snprintf(row, sizeof row, "held: the by-hand side's four operands against two, on one stream (%s)", which);
  add_row(bench_gpu_label, row, "wait + dls_launch (one pair of operands) + record", hand_two_operands,
          hand_four_operands, held_drain, c, HELD_BATCH);
}
/* The two sets of streams the held rows run on, with their rows' names: wrapped ones, as a framework's are, and
 * streams dlstream made. */
typedef struct stream_set {
  const char *which, *own_buffers, *turns, *alternating;
} stream_set;
static const stream_set wrapped_set = {
    "wrapped streams", "held: launch axpy_f32, 2 own buffers on their stream (wrapped stream)",
    "held: axpy_f32 taking turns on 2 wrapped streams, no crossing (raw pointers)",
    "held: axpy_f32 alternating between 2 wrapped streams on one y (a crossing each)"};
static const stream_set own_set = {
    "dlstream's own streams", "held: launch axpy_f32, 2 own buffers on their stream, dlstream's own stream",
    "held: axpy_f32 taking turns on 2 of dlstream's own streams, no crossing (raw pointers)",
    "held: axpy_f32 alternating between 2 of dlstream's own streams on one y (a crossing each)"};

/* The rows of one set. What a crossing costs is each crossing row less the side of the turns row (the launches
 * taking turns alone) and, for dlstream, less the buffers' own cost (the first row); or the rule against the hand
 * around the same launches (rule_against_hand_rows, with its control). */
static void set_rows(cuda_ctx *c, const stream_set *set) {
  add_row(bench_gpu_label, set->own_buffers, "dls_launch, raw pointers", dls_launch_axpy_ptr, dls_launch_axpy_buf,
          held_drain, c, HELD_BATCH);
  add_row(bench_gpu_label, set->turns, "cuLaunchKernel", raw_launch_axpy_turns, dls_launch_axpy_ptr_turns, held_drain,
          c, HELD_BATCH);
  add_row(bench_gpu_label, set->alternating, "cuEventRecord + cuStreamWaitEvent + cuLaunchKernel",
          raw_launch_axpy_alternate, dls_launch_axpy_alternate, held_drain, c, HELD_BATCH);
  rule_against_hand_rows(c, set->which);
}

void held_rows(cuda_ctx *c) {
  c->holding = true;
  if (held_drain(c) != 0)
    return;
  add_row(bench_gpu_label, "held: launch axpy_f32, 4 args (raw pointers)", "cuLaunchKernel", raw_launch_axpy,
          dls_launch_axpy_ptr, held_drain, c, HELD_BATCH);
  set_rows(c, &wrapped_set);
  c->ask = cu.capture_info_v3 != NULL || cu.cuStreamGetCaptureInfo != NULL;
  if (c->ask)
    add_row(bench_gpu_label, "held: the same crossing, anchor asks the capture state as dlstream does",
            "cuStreamGetCaptureInfo + cuEventRecord + cuStreamWaitEvent + cuLaunchKernel", raw_launch_axpy_alternate,
            dls_launch_axpy_alternate, held_drain, c, HELD_BATCH);
  c->ask = false;
  cuda_use_set(c, true);
  set_rows(c, &own_set);
  cuda_use_set(c, false);
  c->holding = false;
  (void)held_drain(c);
}
