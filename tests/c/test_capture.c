/* SPDX-License-Identifier: Apache-2.0 */
/* Graph capture: captured work replays, temporaries follow the capture
 * rules, and every refusal leaves the capture valid. */
#include <stdatomic.h>

#include "common.h"

TestSuite(capture, .fini = dlst_fini);

#define N 1024

static void expect_all(const float *v, float want, const char *what) {
  for (int i = 0; i < N; i++)
    cr_assert_float_eq(v[i], want, 1e-6, "%s: element %d is %g, wanted %g", what, i, v[i], want);
}

/* Reads the buffer back (stream-ordered on s) and checks every element. */
static void expect_buffer(dls_buffer_t b, dls_stream_t s, float want, const char *what) {
  float v[N];
  OK(dls_buffer_read(b, 0, v, N * sizeof(float), s));
  OK(dls_stream_synchronize(s));
  expect_all(v, want, what);
}

static dls_buffer_t filled(dls_stream_t s, float value) {
  dls_buffer_t b;
  OK(dls_buffer_alloc(s, N * sizeof(float), &b));
  OK(dls_fill(s, dls_arg_buffer(b), N, 4, &value));
  return b;
}

/* Ends the capture on `s`, replays it `times` times and destroys the graph. */
static void end_and_replay(dls_stream_t s, int times) {
  dls_graph_t g;
  OK(dls_stream_end_capture(s, &g));
  for (int i = 0; i < times; i++)
    OK(dls_graph_launch(g, s));
  OK(dls_graph_destroy(g));
}

BACKEND_TEST(capture, captured_work_runs_only_when_replayed) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t x = filled(s, 1.0f), y = filled(s, 0.0f);
  OK(dls_stream_synchronize(s));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  dls_capture_status_t cs;
  OK(dls_stream_capture_status(s, &cs));
  cr_assert_eq(cs, DLS_CAPTURE_ACTIVE);
  OK(dls_axpy_f32(s, N, 2.0f, dls_arg_buffer(x), dls_arg_buffer(y)));
  dls_graph_t g;
  OK(dls_stream_end_capture(s, &g));
  OK(dls_stream_capture_status(s, &cs));
  cr_assert_eq(cs, DLS_CAPTURE_NONE);
  expect_buffer(y, s, 0.0f, "after the capture, before any replay"); /* the negative control */
  for (int i = 1; i <= 3; i++) {
    OK(dls_graph_launch(g, s));
    expect_buffer(y, s, 2.0f * (float)i, "after a replay");
  }
  OK(dls_graph_destroy(g));
  OK(dls_buffer_free(x));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(capture, replays_on_another_stream_and_after_destroy_of_the_handle) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s, r;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_acquire(d, &r));
  dls_buffer_t x = filled(s, 1.0f), y = filled(s, 0.0f);
  OK(dls_stream_synchronize(s));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_THREAD_LOCAL));
  OK(dls_axpy_f32(s, N, 1.0f, dls_arg_buffer(x), dls_arg_buffer(y)));
  dls_graph_t g;
  OK(dls_stream_end_capture(s, &g));
  for (int i = 0; i < 3; i++)
    OK(dls_graph_launch(g, r));
  OK(dls_graph_destroy(g)); /* queued replays still run */
  expect_buffer(y, r, 3.0f, "three replays on another stream");
  FAILS(dls_graph_launch(g, r), DLS_ERR_INVALID_HANDLE, "graph handle is stale");
  OK(dls_buffer_free(x));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(r));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(capture, hundred_launches_in_one_capture) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t x = filled(s, 1.0f), y = filled(s, 0.0f);
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  for (int i = 0; i < 100; i++)
    OK(dls_axpy_f32(s, N, 1.0f, dls_arg_buffer(x), dls_arg_buffer(y)));
  end_and_replay(s, 3);
  expect_buffer(y, s, 300.0f, "100 captured launches replayed 3 times");
  OK(dls_buffer_free(x));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(s));
}

/* A temporary allocated and freed in the capture exists only during a
 * replay: each replay fills it, adds it to y and frees it. */
BACKEND_TEST(capture, temporary_freed_inside_the_capture) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t y = filled(s, 0.0f);
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  for (int k = 0; k < 2; k++) {
    dls_buffer_t tmp = filled(s, 5.0f);
    OK(dls_axpy_f32(s, N, 1.0f, dls_arg_buffer(tmp), dls_arg_buffer(y)));
    OK(dls_buffer_free(tmp));
  }
  end_and_replay(s, 3);
  expect_buffer(y, s, 30.0f, "two temporaries per replay, three replays");
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(s));
}

/* A temporary still alive when the capture ends is a graph output: each
 * replay produces it, and it is freed after the graph's last replay. */
BACKEND_TEST(capture, temporary_freed_after_the_capture_is_a_graph_output) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t x = filled(s, 1.0f);
  OK(dls_stream_synchronize(s));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  dls_buffer_t out = filled(s, 7.0f);
  OK(dls_axpy_f32(s, N, 2.0f, dls_arg_buffer(x), dls_arg_buffer(out)));
  dls_graph_t g;
  OK(dls_stream_end_capture(s, &g));
  for (int i = 0; i < 3; i++) {
    OK(dls_graph_launch(g, s));
    expect_buffer(out, s, 9.0f, "the graph output after a replay");
  }
  OK(dls_graph_destroy(g));      /* the output still holds the graph's memory */
  expect_buffer(out, s, 9.0f, "the graph output after its graph handle is gone");
  OK(dls_buffer_free(out));      /* now the graph goes, after its last replay */
  OK(dls_buffer_free(x));
  OK(dls_stream_destroy(s));
}

/* Groups in a capture: branches join through the fork record and rejoin at
 * the end, nested groups included. */
BACKEND_TEST(capture, groups_and_nested_groups_replay) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t x = filled(s, 1.0f), a = filled(s, 0.0f), b = filled(s, 0.0f), c = filled(s, 0.0f);
  OK(dls_stream_synchronize(s));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  dls_group_t g, inner;
  dls_stream_t b1, b2, n1;
  OK(dls_group_begin(s, &g));
  OK(dls_group_branch(g, &b1));
  OK(dls_group_branch(g, &b2));
  OK(dls_axpy_f32(b1, N, 1.0f, dls_arg_buffer(x), dls_arg_buffer(a)));
  OK(dls_axpy_f32(b2, N, 2.0f, dls_arg_buffer(x), dls_arg_buffer(b)));
  OK(dls_group_begin(b2, &inner));
  OK(dls_group_branch(inner, &n1));
  OK(dls_axpy_f32(n1, N, 3.0f, dls_arg_buffer(x), dls_arg_buffer(c)));
  OK(dls_group_end(inner));
  OK(dls_group_end(g));
  OK(dls_axpy_f32(s, N, 1.0f, dls_arg_buffer(c), dls_arg_buffer(a))); /* after the join: sees c */
  end_and_replay(s, 3);
  expect_buffer(b, s, 6.0f, "branch b");
  expect_buffer(c, s, 9.0f, "nested branch c");
  /* a = sum over replays of (1 + c after that replay) = (1+3) + (1+6) + (1+9) */
  expect_buffer(a, s, 21.0f, "the origin after the join");
  /* Pooled branch streams came back to the pool eager: usable outside any capture. */
  dls_stream_t p;
  OK(dls_stream_acquire(d, &p));
  dls_capture_status_t cs;
  OK(dls_stream_capture_status(p, &cs));
  cr_assert_eq(cs, DLS_CAPTURE_NONE);
  OK(dls_stream_destroy(p));
  OK(dls_buffer_free(x));
  OK(dls_buffer_free(a));
  OK(dls_buffer_free(b));
  OK(dls_buffer_free(c));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(capture, events_inside_a_capture_are_graph_dependencies) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  dls_event_t e;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_event_create(d, 0, &e));
  dls_buffer_t x = filled(s, 1.0f), y = filled(s, 0.0f);
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  dls_group_t g;
  dls_stream_t br;
  OK(dls_group_begin(s, &g));
  OK(dls_group_branch(g, &br));
  OK(dls_axpy_f32(br, N, 4.0f, dls_arg_buffer(x), dls_arg_buffer(y)));
  OK(dls_event_record(e, br));
  OK(dls_stream_wait_event(s, e)); /* same capture: a dependency of the graph */
  OK(dls_axpy_f32(s, N, 1.0f, dls_arg_buffer(y), dls_arg_buffer(y)));
  FAILS(dls_event_query(e, &(int){0}), DLS_ERR_STATE, "recorded in capture");
  FAILS(dls_event_synchronize(e), DLS_ERR_STATE, "graph");
  OK(dls_group_end(g));
  end_and_replay(s, 2);
  expect_buffer(y, s, 24.0f, "((0 + 4) * 2 + 4) * 2");
  OK(dls_event_record(e, s)); /* an eager record makes it an ordinary event again */
  OK(dls_event_synchronize(e));
  OK(dls_event_destroy(e));
  OK(dls_buffer_free(x));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(s));
}

/* After each refusal the capture is still valid: it ends and replays. */
static void capture_still_valid(dls_stream_t s, dls_buffer_t y, float before) {
  dls_capture_status_t cs;
  OK(dls_stream_capture_status(s, &cs));
  cr_assert_eq(cs, DLS_CAPTURE_ACTIVE, "the refusal invalidated the capture");
  float one = 1.0f;
  dls_buffer_t t;
  OK(dls_buffer_alloc(s, N * sizeof(float), &t));
  OK(dls_fill(s, dls_arg_buffer(t), N, 4, &one));
  OK(dls_axpy_f32(s, N, 1.0f, dls_arg_buffer(t), dls_arg_buffer(y)));
  OK(dls_buffer_free(t));
  end_and_replay(s, 1);
  expect_buffer(y, s, before + 1.0f, "the capture after a refusal");
}

BACKEND_TEST(capture, waits_that_tie_a_capture_to_eager_work_are_refused) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s, e;
  dls_event_t ev_eager, ev_cap;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_create(d, NULL, &e));
  OK(dls_event_create(d, 0, &ev_eager));
  OK(dls_event_create(d, 0, &ev_cap));
  dls_buffer_t y = filled(s, 0.0f);
  OK(dls_event_record(ev_eager, e));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  OK(dls_event_record(ev_cap, s));
  FAILS(dls_stream_wait_stream(e, s), DLS_ERR_STATE, "in capture");
  FAILS(dls_stream_wait_stream(s, e), DLS_ERR_STATE, "not capturing");
  FAILS(dls_stream_wait_event(e, ev_cap), DLS_ERR_STATE, "recorded in capture");
  FAILS(dls_stream_wait_event(s, ev_eager), DLS_ERR_STATE, "recorded outside its capture");
  FAILS(dls_stream_synchronize(s), DLS_ERR_STATE, "being recorded");
  FAILS(dls_stream_query(s, &(int){0}), DLS_ERR_STATE, "being recorded");
  FAILS(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL), DLS_ERR_STATE, "already capturing");
  capture_still_valid(s, y, 0.0f);
  OK(dls_stream_synchronize(e));
  OK(dls_event_destroy(ev_eager));
  OK(dls_event_destroy(ev_cap));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(e));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(capture, latches_and_the_legacy_stream_are_refused_in_a_capture) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  dls_latch_t l;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_latch_create(d, &l));
  dls_buffer_t y = filled(s, 0.0f);
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_RELAXED));
  FAILS(dls_latch_wait(l, s, DLST_LATCH_TIMEOUT_NS), DLS_ERR_STATE, "latches are refused in captures");
  FAILS(dls_spin(dls_stream_default(d, DLS_STREAM_LEGACY), 1), DLS_ERR_STATE, "legacy default stream");
  capture_still_valid(s, y, 0.0f);
  OK(dls_spin(dls_stream_default(d, DLS_STREAM_LEGACY), 1)); /* no capture underway: fine again */
  OK(dls_latch_destroy(l));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(capture, bad_calls_say_what_is_wrong) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  dls_graph_t g;
  OK(dls_stream_create(d, NULL, &s));
  FAILS(dls_stream_begin_capture(dls_stream_default(d, DLS_STREAM_LEGACY), DLS_CAPTURE_GLOBAL),
        DLS_ERR_INVALID_ARGUMENT, "default streams cannot be captured");
  FAILS(dls_stream_begin_capture(s, (dls_capture_mode_t)7), DLS_ERR_INVALID_ARGUMENT, "mode=7");
  FAILS(dls_stream_end_capture(s, &g), DLS_ERR_STATE, "no capture begun");
  cr_assert_eq(g.id, 0);
  FAILS(dls_stream_end_capture(s, NULL), DLS_ERR_INVALID_ARGUMENT, "out_graph=NULL");
  FAILS(dls_graph_launch((dls_graph_t){0}, s), DLS_ERR_INVALID_HANDLE, "graph");
  OK(dls_graph_destroy((dls_graph_t){0}));
  /* A replay inside a capture is refused, and the capture stays valid. */
  dls_buffer_t y = filled(s, 0.0f);
  OK(dls_stream_synchronize(s)); /* y is read on t below: its fill on s must be done (owned memory, no implicit order) */
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  OK(dls_spin(s, 1));
  OK(dls_stream_end_capture(s, &g));
  dls_stream_t t;
  OK(dls_stream_create(d, NULL, &t));
  OK(dls_stream_wait_stream(t, s)); /* t's replays use y, filled on s */
  OK(dls_stream_begin_capture(t, DLS_CAPTURE_GLOBAL));
  FAILS(dls_graph_launch(g, t), DLS_ERR_STATE, "inside a capture");
  capture_still_valid(t, y, 0.0f);
  OK(dls_graph_destroy(g));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(t));
  OK(dls_stream_destroy(s));
}

/* Ending a capture while a group begun in it is still open (its branches
 * have not rejoined) is refused before the driver sees it: the capture goes
 * on, the group ends, and then the capture ends and replays. */
BACKEND_TEST(capture, an_open_group_refuses_the_end_and_the_capture_goes_on) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s, b;
  dls_group_t g;
  dls_graph_t gr;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t y = filled(s, 0.0f);
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  OK(dls_group_begin(s, &g));
  OK(dls_group_branch(g, &b));
  float two = 2.0f;
  OK(dls_fill(b, dls_arg_buffer(y), N, 4, &two));
  FAILS(dls_stream_end_capture(s, &gr), DLS_ERR_STATE, "still open");
  cr_assert_eq(gr.id, 0);
  dls_capture_status_t cs;
  OK(dls_stream_capture_status(s, &cs));
  cr_assert_eq(cs, DLS_CAPTURE_ACTIVE, "the refusal must leave the capture going");
  OK(dls_group_end(g));
  end_and_replay(s, 1);
  expect_buffer(y, s, 2.0f, "the branch's fill, replayed");
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(s));
}

static _Atomic int g_released;
static void count_release(void *user) {
  (void)user;
  atomic_fetch_add(&g_released, 1);
}

/* A deferred release pending when a capture starts: launches in the capture
 * never poll for it (that would invalidate a global capture on a GPU); it
 * runs once the capture is over. */
BACKEND_TEST(capture, deferred_release_pending_at_capture_start) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  dls_stream_t s, held;
  dls_latch_t l;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_create(d, NULL, &held));
  OK(dls_latch_create(d, &l));
  dls_buffer_t y = filled(s, 0.0f), x = filled(s, 1.0f);
  OK(dls_stream_synchronize(s));
  void *ptr;
  OK(dls_buffer_ptr(x, &ptr));
  atomic_store(&g_released, 0);
  dls_buffer_t borrowed;
  OK(dls_buffer_borrow(d, ptr, N * sizeof(float), s, count_release, NULL, &borrowed));
  OK(dls_latch_wait(l, held, DLST_LATCH_TIMEOUT_NS));
  dls_buffer_t z; /* held reads the borrowed memory (x, which the replay reads too) and writes z */
  OK(dls_buffer_alloc(held, N * sizeof(float), &z));
  OK(dls_axpy_f32(held, N, 0.0f, dls_arg_buffer(borrowed), dls_arg_buffer(z)));
  OK(dls_buffer_free(borrowed));
  cr_assert_eq(dls_deferred_pending(), 1, "the release waits for the held stream");
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  for (int i = 0; i < 130; i++)
    OK(dls_axpy_f32(s, N, 1.0f, dls_arg_buffer(x), dls_arg_buffer(y)));
  OK(dls_latch_open(l));
  cr_assert_eq(dls_deferred_poll(), 1, "no polling while a global capture is underway");
  /* A global capture forbids this thread's synchronizing calls, even on other streams. */
  FAILS(dls_stream_synchronize(held), DLS_ERR_STATE, "forbids this thread's synchronizing calls");
  FAILS(dls_stream_query(held, &(int){0}), DLS_ERR_STATE, "global mode");
  cr_assert_eq(atomic_load(&g_released), 0);
  end_and_replay(s, 1);
  /* The release waits for held and for what the producer s had queued when the buffer was freed (held's read
   * of the borrowed memory queued a record there): both streams are waited for before the poll. */
  OK(dls_stream_synchronize(held));
  OK(dls_stream_synchronize(s));
  cr_assert_eq(dls_deferred_poll(), 0);
  cr_assert_eq(atomic_load(&g_released), 1, "released exactly once, after the capture");
  expect_buffer(y, s, 130.0f, "130 launches captured next to a pending release");
  OK(dls_latch_destroy(l));
  OK(dls_buffer_free(z));
  OK(dls_buffer_free(x));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(held));
  OK(dls_stream_destroy(s));
}

/* An eager buffer freed while its stream captures is freed once the
 * capture is over (never inside it); one the capture used is kept by the
 * capture, then by its graph, whose replays use it. With the cache off:
 * the driver's free waits in the deferred queue (test_cache.c: the cache
 * keeps it at once, and hands it out only after the capture). */
BACKEND_TEST(capture, eager_buffer_freed_during_a_capture_is_freed_after_it) {
  DLDevice d = dlst_device(*backend_type);
  OK(dls_device_set_cache_limit(d, 0));
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t x = filled(s, 1.0f), y = filled(s, 0.0f), z = filled(s, 2.0f);
  OK(dls_stream_synchronize(s));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  OK(dls_axpy_f32(s, N, 1.0f, dls_arg_buffer(x), dls_arg_buffer(y)));
  OK(dls_buffer_free(z));
  cr_assert_eq(dls_deferred_pending(), 1, "the free waits for the capture to be over");
  OK(dls_buffer_free(x));
  cr_assert_eq(dls_deferred_pending(), 1, "the capture keeps what it used");
  dls_graph_t g;
  OK(dls_stream_end_capture(s, &g));
  cr_assert_eq(dls_deferred_pending(), 0);
  OK(dls_graph_launch(g, s));
  expect_buffer(y, s, 1.0f, "a replay after x's handle was freed");
  OK(dls_graph_destroy(g));
  OK(dls_buffer_free(y));
  OK(dls_stream_synchronize(s));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(capture, shutdown_ends_a_capture_left_open) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  dls_buffer_t t;
  OK(dls_buffer_alloc(s, 4096, &t));
  OK(dls_spin(s, 1));
  OK(dls_shutdown()); /* ends the capture, frees the buffer and the stream */
  cr_assert_eq(dls_live_handles(DLS_HANDLE_STREAM), 0);
  cr_assert_eq(dls_live_handles(DLS_HANDLE_BUFFER), 0);
}
