/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection: regressions for what the sweep's capture scenario found
 * (test_fault.c holds the sweep and the other regressions). */
#include "fault_fixture.h"

/* Native objects of every kind alive now (made minus released). */
static void objects_live(int64_t live[DLS_FAULT_OBJECT_KINDS]) {
  for (int k = 0; k < DLS_FAULT_OBJECT_KINDS; k++) {
    uint64_t made, gone;
    dls_fault_objects((dls_fault_object_t)k, &made, &gone);
    live[k] = (int64_t)(made - gone);
  }
}

/* After dls_shutdown: as many native objects alive as in `base`. */
static void expect_objects(const int64_t base[DLS_FAULT_OBJECT_KINDS], const char *when) {
  int64_t now[DLS_FAULT_OBJECT_KINDS];
  objects_live(now);
  for (int k = 0; k < DLS_FAULT_OBJECT_KINDS; k++)
    cr_expect_eq(now[k], base[k], "%s: %lld native %s object(s) alive, %lld before", when, (long long)now[k],
                 dls_fault_object_name((dls_fault_object_t)k), (long long)base[k]);
}

/* A capture on a new owned stream of the CPU, recording a fill of an eager
 * buffer allocated on it (b = 1). With `base`: after a fresh runtime, whose
 * native objects alive it notes. */
static void capture_begin(int64_t *base, dls_stream_t *s, dls_buffer_t *b) {
  float one = 1.0f;
  if (base != NULL) {
    OK(dls_shutdown());
    objects_live(base);
  }
  OK(dls_stream_create(dls_cpu(), NULL, s));
  OK(dls_buffer_alloc(*s, 256, b));
  OK(dls_stream_begin_capture(*s, DLS_CAPTURE_GLOBAL));
  OK(dls_fill(*s, dls_arg_buffer(*b), 64, 4, &one));
}

/* Ends the capture on s and replays it twice: b = 2 after each replay. */
static void replay_twice(dls_stream_t s, dls_buffer_t b, dls_graph_t *g, uint64_t n) {
  float out[64] = {0};
  OK(dls_stream_end_capture(s, g));
  OK(dls_graph_launch(*g, s));
  OK(dls_graph_launch(*g, s));
  OK(dls_buffer_read(b, 0, out, sizeof out, s));
  OK(dls_stream_synchronize(s));
  cr_assert_eq(out[0], 2.0f, "point %llu: two replays made %g", (unsigned long long)n, (double)out[0]);
}

/* Releases g, b and s, then shuts down; with `base`, checks that as many
 * native objects are alive as before the capture. */
static void capture_finish(dls_graph_t g, dls_buffer_t b, dls_stream_t s, const int64_t *base, const char *when) {
  OK(dls_graph_destroy(g));
  OK(dls_buffer_free(b));
  OK(dls_stream_destroy(s));
  OK(dls_shutdown());
  if (base != NULL)
    expect_objects(base, when);
}

/* The backend's end of a capture failing: as a real failure does, it ends
 * the capture (the stream is eager again) and leaves nothing behind. */
Test(fault, capture_whose_end_fails_is_over_and_leaves_nothing, .fini = dlst_fini) {
  int64_t base[DLS_FAULT_OBJECT_KINDS];
  dls_stream_t s;
  dls_buffer_t b;
  dls_graph_t g = {7};
  capture_begin(base, &s, &b);
  dls_fault_arm(1, DLS_OK);
  dls_status_t st = dls_stream_end_capture(s, &g);
  dls_fault_disarm();
  cr_assert_str_eq(dls_fault_last(), "stream_end_capture", "the end's first point is the backend's end");
  cr_assert_neq(st, DLS_OK);
  cr_assert_eq(g.id, 0, "a failed end leaves no graph handle");
  float two = 2.0f, out[64] = {0};
  OK(dls_fill(s, dls_arg_buffer(b), 64, 4, &two));
  OK(dls_buffer_read(b, 0, out, sizeof out, s));
  OK(dls_stream_synchronize(s)); /* refused while the stream still captures */
  cr_assert_eq(out[0], 2.0f, "eager work after the failed end runs");
  capture_finish(g, b, s, base, "after a failed end"); /* b: eager memory, freed eagerly */
}

/* dls_stream_end_capture reports the backend's status and message: an
 * invalidated or unjoined capture is DLS_ERR_STATE from the backend itself,
 * any other failure is not turned into one. */
Test(fault, capture_end_failure_reports_the_backend_status, .fini = dlst_fini) {
  dls_stream_t s;
  dls_buffer_t b;
  dls_graph_t g;
  capture_begin(NULL, &s, &b);
  dls_fault_arm(1, DLS_ERR_BACKEND);
  FAILS(dls_stream_end_capture(s, &g), DLS_ERR_BACKEND, "dls_stream_end_capture(stream on cpu:0): fault injection");
  dls_fault_disarm();
  capture_finish(g, b, s, NULL, NULL);
}

/* The capture-status query failing while a temporary of a capture is made
 * or freed in it: the capture dlstream began on the stream still counts, so
 * the temporary stays a graph allocation freed in its capture (it was taken
 * for eager memory, or for one whose capture was over and whose graph would
 * own it: the graph then took a freed buffer, kept the stream and leaked). */
Test(fault, capture_status_failure_inside_a_capture_keeps_its_temporaries_in_it, .fini = dlst_fini) {
  int tried = 0;
  for (uint64_t n = 1;; n++) {
    int64_t base[DLS_FAULT_OBJECT_KINDS];
    dls_stream_t s;
    dls_buffer_t b, tmp = {0};
    dls_graph_t g = {0};
    float one = 1.0f;
    capture_begin(base, &s, &b); /* b = 1 */
    dls_fault_arm(n, DLS_OK);
    dls_status_t st = dls_buffer_alloc(s, 256, &tmp);
    if (st == DLS_OK)
      st = dls_fill(s, dls_arg_buffer(tmp), 64, 4, &one);
    if (st == DLS_OK)
      st = dls_axpy_f32(s, 64, 1.0f, dls_arg_buffer(tmp), dls_arg_buffer(b)); /* b = 2 */
    if (st == DLS_OK && (st = dls_buffer_free(tmp)) == DLS_OK)
      tmp.id = 0;
    dls_fault_disarm();
    bool reached = dls_fault_injected() != 0;
    const char *point = dls_fault_last();
    bool subject = strcmp(point, "stream_capture_status") == 0; /* other points: the sweep's */
    if (subject) {
      cr_assert_eq(st, DLS_OK, "point %llu: a failed capture-status query is absorbed: %s", (unsigned long long)n,
                   dls_last_error());
      replay_twice(s, b, &g, n);
      tried++;
    } else {
      (void)dls_stream_end_capture(s, &g);
    }
    OK(dls_buffer_free(tmp));
    capture_finish(g, b, s, subject ? base : NULL, "after a failed capture-status query");
    if (!reached)
      break; /* past the last point */
  }
  cr_assert_gt(tried, 0, "no capture-status query was failed");
}

/* The capture-status query failing while a stream that joined a capture
 * frees a temporary it made there: dlstream cannot tell the stream still
 * captures, but the capture it began still holds the temporary: the memory
 * is left to the graph (the graph took the freed buffer as an output). */
Test(fault, capture_status_failure_on_a_joined_stream_leaves_its_temporary_to_the_graph, .fini = dlst_fini) {
  int tried = 0;
  for (uint64_t n = 1;; n++) {
    int64_t base[DLS_FAULT_OBJECT_KINDS];
    dls_stream_t s, br;
    dls_buffer_t b, tmp;
    dls_group_t grp;
    dls_graph_t g;
    float one = 1.0f;
    capture_begin(base, &s, &b); /* b = 1 */
    OK(dls_group_begin(s, &grp));
    OK(dls_group_branch(grp, &br));
    OK(dls_buffer_alloc(br, 256, &tmp));
    OK(dls_fill(br, dls_arg_buffer(tmp), 64, 4, &one));
    OK(dls_axpy_f32(br, 64, 1.0f, dls_arg_buffer(tmp), dls_arg_buffer(b))); /* b = 2 */
    dls_fault_arm(n, DLS_OK);
    OK(dls_buffer_free(tmp));
    dls_fault_disarm();
    bool reached = dls_fault_injected() != 0;
    tried += strcmp(dls_fault_last(), "stream_capture_status") == 0;
    OK(dls_group_end(grp));
    replay_twice(s, b, &g, n);
    capture_finish(g, b, s, base, dls_fault_last());
    if (!reached)
      break; /* past the last point */
  }
  cr_assert_gt(tried, 0, "no capture-status query was failed");
}

/* Memory a capture allocates and does not free is its graph's: each replay
 * makes it afresh. The count of native allocations follows: a graph never
 * replayed takes its outputs with it (they were counted leaked whenever a
 * step inside a capture failed and the caller ended and dropped it), and a
 * replay after an output's buffer was freed makes a new one (the graph's
 * final free was counted a second release). */
Test(fault, graph_outputs_balance_the_allocation_count_replayed_or_not, .fini = dlst_fini) {
  for (int replays = 0; replays <= 2; replays++) {
    int64_t base[DLS_FAULT_OBJECT_KINDS];
    dls_stream_t s;
    dls_buffer_t b, out;
    dls_graph_t g;
    float three = 3.0f;
    capture_begin(base, &s, &b);
    OK(dls_buffer_alloc(s, 256, &out));
    OK(dls_fill(s, dls_arg_buffer(out), 64, 4, &three));
    OK(dls_stream_end_capture(s, &g));
    for (int r = 0; r < replays; r++) {
      OK(dls_graph_launch(g, s));
      if (r == 0)
        OK(dls_buffer_free(out)); /* after the first replay: later ones make it again */
    }
    if (replays == 0)
      OK(dls_buffer_free(out));
    OK(dls_stream_synchronize(s));
    char when[32];
    snprintf(when, sizeof when, "%d replays", replays);
    capture_finish(g, b, s, base, when);
  }
}

/* The first element of b, read on s. */
static float first_of(dls_buffer_t b, dls_stream_t s) {
  float v = 0.0f;
  OK(dls_buffer_read(b, 0, &v, sizeof v, s));
  OK(dls_stream_synchronize(s));
  return v;
}

/* Every point of a capture's end whose work used eager memory (b): a
 * failure leaves no graph, the memory usable and no native object behind;
 * out of memory for the record of that memory says so. */
Test(fault, capture_end_failing_at_any_point_keeps_nothing, .fini = dlst_fini) {
  int recorded = 0;
  for (uint64_t n = 1;; n++) {
    int64_t base[DLS_FAULT_OBJECT_KINDS];
    dls_stream_t s;
    dls_buffer_t b;
    dls_graph_t g = {0};
    float two = 2.0f;
    capture_begin(base, &s, &b); /* the graph fills b with 1 */
    dls_fault_arm(n, DLS_OK);
    dls_status_t st = dls_stream_end_capture(s, &g);
    dls_fault_disarm();
    bool reached = dls_fault_injected() != 0;
    if (st != DLS_OK) {
      cr_assert_eq(g.id, 0, "point %llu: a failed end leaves no graph handle", (unsigned long long)n);
      cr_assert(strstr(dls_last_error(), "dls_stream_end_capture") != NULL, "point %llu: %s", (unsigned long long)n,
                dls_last_error());
      recorded += strstr(dls_last_error(), "out of host memory for the graph's record of the 1 buffer(s)") != NULL;
      OK(dls_fill(s, dls_arg_buffer(b), 64, 4, &two));
      cr_assert_eq(first_of(b, s), 2.0f, "point %llu: eager work on b after the failed end", (unsigned long long)n);
    } else {
      OK(dls_graph_launch(g, s));
      cr_assert_eq(first_of(b, s), 1.0f, "point %llu: the replay", (unsigned long long)n);
    }
    capture_finish(g, b, s, base, dls_fault_last());
    if (!reached)
      break; /* past the last point */
  }
  cr_assert_gt(recorded, 0, "no end failed for want of memory for its record of b");
}

/* Every point of a replay on a stream that never used the graph's memory
 * (its waits, its use's record, the launch): a failure names the call and,
 * unless it came after the replay was queued, replays nothing; the next
 * replay is ordered as ever (an eager read on another stream waits for it). */
Test(fault, replay_failing_at_any_point_replays_nothing, .fini = dlst_fini) {
  int failed = 0;
  for (uint64_t n = 1;; n++) {
    dls_stream_t s, r;
    dls_buffer_t b;
    dls_graph_t g;
    float zero = 0.0f;
    capture_begin(NULL, &s, &b); /* the graph fills b with 1 */
    OK(dls_stream_end_capture(s, &g));
    OK(dls_fill(s, dls_arg_buffer(b), 64, 4, &zero)); /* eager: b = 0 */
    OK(dls_stream_create(dls_cpu(), NULL, &r));
    dls_fault_arm(n, DLS_OK);
    dls_status_t st = dls_graph_launch(g, r);
    dls_fault_disarm();
    bool reached = dls_fault_injected() != 0;
    if (st != DLS_OK) {
      failed++;
      cr_assert(strstr(dls_last_error(), "dls_graph_launch") != NULL, "point %llu: %s", (unsigned long long)n,
                dls_last_error());
      bool queued = strstr(dls_last_error(), "after the replay") != NULL;
      OK(dls_stream_synchronize(r));
      cr_assert_eq(first_of(b, s), queued ? 1.0f : 0.0f, "point %llu (%s): %s", (unsigned long long)n,
                   dls_fault_last(), queued ? "the replay was queued" : "nothing was replayed");
      OK(dls_fill(s, dls_arg_buffer(b), 64, 4, &zero));
      OK(dls_graph_launch(g, r));
    }
    cr_assert_eq(first_of(b, s), 1.0f, "point %llu: an eager read on s after the replay on r", (unsigned long long)n);
    OK(dls_stream_destroy(r));
    capture_finish(g, b, s, NULL, NULL);
    if (!reached)
      break; /* past the last point */
  }
  cr_assert_gt(failed, 0, "no replay point was failed");
}
