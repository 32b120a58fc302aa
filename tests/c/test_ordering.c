/* SPDX-License-Identifier: Apache-2.0 */
/* Cross-stream ordering proven with the latch, each with a negative control. */
#include "common.h"

TestSuite(ordering, .fini = dlst_fini);

/* Stream a: latch, then buf := 1. Stream b: (maybe ordered after a), then
 * out := buf. Returns the value b copied. */
typedef enum { ORDER_NONE, ORDER_EVENT, ORDER_WAIT_STREAM } order_t;

static int32_t run_pair(DLDevice d, order_t how) {
  dls_stream_t a, b;
  dls_buffer_t buf, out;
  dls_latch_t l;
  dls_event_t e;
  int32_t zero = 0, one = 1, got = -1;
  OK(dls_stream_create(d, NULL, &a));
  OK(dls_stream_create(d, NULL, &b));
  OK(dls_event_create(d, 0, &e));
  OK(dls_latch_create(d, &l));
  OK(dls_buffer_alloc(a, 4, &buf));
  OK(dls_buffer_alloc(b, 4, &out));
  OK(dls_fill(a, dls_arg_buffer(buf), 1, 4, &zero));
  OK(dls_fill(b, dls_arg_buffer(out), 1, 4, &zero));
  OK(dls_stream_synchronize(a));
  OK(dls_stream_synchronize(b));
  OK(dls_latch_wait(l, a, DLST_LATCH_TIMEOUT_NS));
  OK(dls_fill(a, dls_arg_buffer(buf), 1, 4, &one));
  if (how == ORDER_EVENT) {
    OK(dls_event_record(e, a));
    OK(dls_stream_wait_event(b, e));
  } else if (how == ORDER_WAIT_STREAM) {
    OK(dls_stream_wait_stream(b, a));
  }
  dls_copy_desc_t desc = {.ndim = 1, .elem_size = 4, .shape = {1}, .dst_strides = {1}, .src_strides = {1}};
  void *bufp;
  OK(dls_buffer_ptr(buf, &bufp));
  /* A raw pointer for the source: the ordering under test must come from the
   * event alone, not from the buffer's use tracking. */
  OK(dls_copy_strided(b, dls_arg_buffer(out), dls_arg_ptr(bufp), &desc));
  if (how == ORDER_NONE) {
    OK(dls_stream_synchronize(b)); /* b runs ahead while the latch is closed */
  } else {
    int idle = 1;
    OK(dls_stream_query(b, &idle));
    cr_assert_eq(idle, 0, "b must be held behind a's latch");
  }
  OK(dls_latch_open(l));
  OK(dls_stream_synchronize(a));
  OK(dls_stream_synchronize(b));
  OK(dls_buffer_read(out, 0, &got, 4, b));
  OK(dls_stream_synchronize(b));
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
  OK(dls_buffer_free(buf));
  OK(dls_buffer_free(out));
  OK(dls_event_destroy(e));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(b));
  return got;
}

BACKEND_TEST(ordering, event_wait_holds_the_second_stream) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  cr_assert_eq(run_pair(d, ORDER_EVENT), 1, "b read buf before a wrote it");
}

BACKEND_TEST(ordering, negative_control_without_the_wait_reads_early) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  cr_assert_eq(run_pair(d, ORDER_NONE), 0, "without a wait, b reads before a writes: the check above can fail");
}

BACKEND_TEST(ordering, wait_stream_orders_two_streams) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  cr_assert_eq(run_pair(d, ORDER_WAIT_STREAM), 1, "b read buf before a wrote it");
}

BACKEND_TEST(ordering, work_on_one_stream_runs_in_order) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  dls_buffer_t buf;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_buffer_alloc(s, 4096 * 4, &buf));
  for (int32_t v = 0; v < 50; v++)
    OK(dls_fill(s, dls_arg_buffer(buf), 4096, 4, &v));
  int32_t last[4096];
  OK(dls_buffer_read(buf, 0, last, sizeof last, s));
  OK(dls_stream_synchronize(s));
  for (int i = 0; i < 4096; i++)
    cr_assert_eq(last[i], 49);
  OK(dls_buffer_free(buf));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(ordering, two_streams_really_run_concurrently) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  /* b's latch is opened by a host callback on a: this completes only if a
   * runs while b is held, i.e. the streams are independent. */
  dls_stream_t a, b;
  dls_latch_t l;
  OK(dls_stream_create(d, NULL, &a));
  OK(dls_stream_create(d, NULL, &b));
  OK(dls_latch_create(d, &l));
  OK(dls_latch_wait(l, b, DLST_LATCH_TIMEOUT_NS));
  OK(dls_spin(a, 1000));
  OK(dls_stream_synchronize(a)); /* a finishes although b is held */
  OK(dls_latch_open(l));
  OK(dls_stream_synchronize(b));
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(b));
}

BACKEND_TEST(ordering, latch_times_out_with_an_error_instead_of_hanging) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  dls_latch_t l;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_latch_create(d, &l));
  OK(dls_latch_status(l));
  OK(dls_latch_wait(l, s, 20000000)); /* 20 ms, never opened */
  OK(dls_stream_synchronize(s));
  FAILS(dls_latch_status(l), DLS_ERR_TIMEOUT, "timed out");
  FAILS(dls_latch_wait(l, s, 0), DLS_ERR_INVALID_ARGUMENT, "timeout_ns=0");
  OK(dls_latch_destroy(l));
  OK(dls_stream_destroy(s));
}
