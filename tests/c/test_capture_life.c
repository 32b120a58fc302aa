/* SPDX-License-Identifier: Apache-2.0 */
/* How a capture ends: discarded on request, when its end is refused, and
 * when the stream handle that began it goes away; never left open. */
#include "common.h"

TestSuite(capture_life, .fini = dlst_fini);

#define N 256

/* True when a global capture is still known: another stream's synchronize
 * is then refused. */
static bool global_capture_open(DLDevice d) {
  dls_stream_t o;
  OK(dls_stream_create(d, NULL, &o));
  dls_status_t st = dls_stream_synchronize(o);
  OK(dls_stream_destroy(o));
  return st != DLS_OK;
}

BACKEND_TEST(capture_life, destroying_the_capturing_stream_discards_its_capture) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t y;
  OK(dls_buffer_alloc(s, N * sizeof(float), &y));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  float one = 1.0f;
  OK(dls_fill(s, dls_arg_buffer(y), N, 4, &one));
  cr_assert(global_capture_open(d), "negative control: a global capture refuses another stream's synchronize");
  OK(dls_stream_destroy(s));
  cr_assert(!global_capture_open(d), "the capture of a destroyed stream is still open");
  OK(dls_buffer_free(y));
  cr_assert_eq(dls_deferred_poll(), 0, "releases still wait for the dropped capture");
}

BACKEND_TEST(capture_life, discard_ends_a_capture_whose_end_was_refused) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  dls_group_t g;
  dls_stream_t b;
  OK(dls_group_begin(s, &g));
  OK(dls_group_branch(g, &b));
  dls_graph_t graph;
  FAILS(dls_stream_end_capture(s, &graph), DLS_ERR_STATE, "still open");
  cr_assert_eq(graph.id, 0);
  OK(dls_stream_discard_capture(s));
  dls_capture_status_t cs;
  OK(dls_stream_capture_status(s, &cs));
  cr_assert_eq(cs, DLS_CAPTURE_NONE, "the stream still captures after the discard");
  cr_assert(!global_capture_open(d), "the discarded capture is still known");
  OK(dls_group_end(g));
  OK(dls_stream_synchronize(s));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(capture_life, discard_without_a_capture_is_a_no_op_and_the_stream_captures_again) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_discard_capture(s));
  dls_buffer_t y;
  OK(dls_buffer_alloc(s, N * sizeof(float), &y));
  OK(dls_stream_synchronize(s));
  float two = 2.0f;
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_RELAXED));
  OK(dls_fill(s, dls_arg_buffer(y), N, 4, &two));
  OK(dls_stream_discard_capture(s));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  OK(dls_fill(s, dls_arg_buffer(y), N, 4, &two));
  dls_graph_t g;
  OK(dls_stream_end_capture(s, &g));
  OK(dls_graph_launch(g, s));
  float v[N];
  OK(dls_buffer_read(y, 0, v, sizeof v, s));
  OK(dls_stream_synchronize(s));
  cr_assert_float_eq(v[N - 1], 2.0f, 1e-6);
  OK(dls_graph_destroy(g));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(capture_life, memory_allocated_in_a_discarded_capture_is_freed_without_it) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_THREAD_LOCAL));
  dls_buffer_t t;
  OK(dls_buffer_alloc(s, N * sizeof(float), &t));
  OK(dls_stream_discard_capture(s));
  OK(dls_buffer_free(t));
  OK(dls_stream_synchronize(s));
  cr_assert_eq(dls_deferred_poll(), 0);
  OK(dls_stream_destroy(s));
}
