/* SPDX-License-Identifier: Apache-2.0 */
/* Events: create, wrap, record, wait, query, synchronize, elapsed time, errors. */
#include "common.h"

TestSuite(event, .fini = dlst_fini);

BACKEND_TEST(event, create_record_synchronize_destroy) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  dls_event_t e;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_event_create(d, DLS_EVENT_DEFAULT, &e));
  int done = 0;
  OK(dls_event_query(e, &done));
  cr_assert_eq(done, 1, "a never-recorded event is complete");
  OK(dls_spin(s, 100000));
  OK(dls_event_record(e, s));
  OK(dls_event_synchronize(e));
  OK(dls_event_query(e, &done));
  cr_assert_eq(done, 1);
  void *native = NULL;
  OK(dls_event_native(e, &native));
  cr_assert_not_null(native);
  OK(dls_event_destroy(e));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(event, query_is_incomplete_while_the_stream_is_held) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dls_stream_t s;
  dls_event_t e;
  dls_latch_t l;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_event_create(d, 0, &e));
  OK(dls_latch_create(d, &l));
  OK(dls_latch_wait(l, s, DLST_LATCH_TIMEOUT_NS));
  OK(dls_event_record(e, s));
  int done = 1;
  OK(dls_event_query(e, &done));
  cr_assert_eq(done, 0);
  OK(dls_latch_open(l));
  OK(dls_event_synchronize(e));
  OK(dls_event_query(e, &done));
  cr_assert_eq(done, 1);
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
  OK(dls_event_destroy(e));
  OK(dls_stream_destroy(s));
}

/* Events without flags come from the device's pool of natives, which may
 * still hold a pending record of their previous owner: a new event must
 * behave as never recorded all the same. */
BACKEND_TEST(event, a_new_event_is_complete_whatever_its_pooled_native_did_before) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  enum { N = 4 };
  dls_stream_t s, s2;
  dls_event_t old[N], fresh[N], after, w;
  dls_latch_t l;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_create(d, NULL, &s2));
  OK(dls_latch_create(d, &l));
  OK(dls_latch_wait(l, s, DLST_LATCH_TIMEOUT_NS));
  int done = 1;
  for (int i = 0; i < N; i++) {
    OK(dls_event_create(d, DLS_EVENT_DEFAULT, &old[i]));
    OK(dls_event_record(old[i], s));
    OK(dls_event_query(old[i], &done));
    cr_assert_eq(done, 0, "negative control: a record behind the closed latch is pending");
  }
  for (int i = 0; i < N; i++)
    OK(dls_event_destroy(old[i])); /* their natives go back to the pool, records pending */
  for (int i = 0; i < N; i++) {
    OK(dls_event_create(d, DLS_EVENT_DEFAULT, &fresh[i]));
    OK(dls_event_query(fresh[i], &done));
    cr_assert_eq(done, 1, "event %d: a never-recorded event is complete", i);
    OK(dls_event_synchronize(fresh[i])); /* at once: the latch is still closed */
    OK(dls_stream_wait_event(s2, fresh[i]));
  }
  OK(dls_event_create(d, DLS_EVENT_DEFAULT, &after));
  OK(dls_event_record(after, s2));
  OK(dls_event_synchronize(after)); /* s2 waited for nothing on the held stream */
  void *native;
  OK(dls_event_native(fresh[0], &native));
  OK(dls_event_wrap(d, native, &w));
  OK(dls_event_query(w, &done));
  cr_assert_eq(done, 1, "the native handed out carries no record of the pool's");
  OK(dls_latch_status(l)); /* nothing above waited for the latch to time out */
  OK(dls_latch_open(l));
  OK(dls_stream_synchronize(s));
  OK(dls_event_destroy(w));
  for (int i = 0; i < N; i++)
    OK(dls_event_destroy(fresh[i]));
  OK(dls_event_destroy(after));
  OK(dls_latch_destroy(l));
  OK(dls_stream_destroy(s));
  OK(dls_stream_destroy(s2));
}

BACKEND_TEST(event, elapsed_time_of_timing_events) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  dls_event_t a, b;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_event_create(d, DLS_EVENT_TIMING, &a));
  OK(dls_event_create(d, DLS_EVENT_TIMING | DLS_EVENT_BLOCKING_SYNC, &b));
  OK(dls_event_record(a, s));
  OK(dls_spin(s, 2000000)); /* 2 ms */
  OK(dls_event_record(b, s));
  OK(dls_event_synchronize(b));
  float ms = -1;
  OK(dls_event_elapsed_ms(a, b, &ms));
  cr_assert_geq(ms, 1.9f, "elapsed %f ms, spun 2 ms", ms);
  OK(dls_event_destroy(a));
  OK(dls_event_destroy(b));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(event, elapsed_time_needs_timing_events) {
  DLDevice d = dlst_device(*backend_type);
  dls_event_t a, b;
  OK(dls_event_create(d, DLS_EVENT_TIMING, &a));
  OK(dls_event_create(d, 0, &b));
  float ms;
  FAILS(dls_event_elapsed_ms(a, b, &ms), DLS_ERR_INVALID_ARGUMENT, "end event was created without DLS_EVENT_TIMING");
  FAILS(dls_event_elapsed_ms(b, a, &ms), DLS_ERR_INVALID_ARGUMENT, "start event");
  FAILS(dls_event_elapsed_ms(a, a, NULL), DLS_ERR_INVALID_ARGUMENT, "out_ms=NULL");
  OK(dls_event_destroy(a));
  OK(dls_event_destroy(b));
}

BACKEND_TEST(event, unknown_flags_are_rejected) {
  DLDevice d = dlst_device(*backend_type);
  dls_event_t e = {9};
  FAILS(dls_event_create(d, 0x10, &e), DLS_ERR_INVALID_ARGUMENT, "unknown flag bits 0x10");
  cr_assert_eq(e.id, 0);
  FAILS(dls_event_create(d, 0, NULL), DLS_ERR_INVALID_ARGUMENT, "out_event=NULL");
}

BACKEND_TEST(event, destroy_then_use_is_invalid_handle) {
  DLDevice d = dlst_device(*backend_type);
  dls_event_t e;
  OK(dls_event_create(d, 0, &e));
  OK(dls_event_destroy(e));
  dls_stream_t s = dls_stream_default(d, DLS_STREAM_LEGACY);
  FAILS(dls_event_record(e, s), DLS_ERR_INVALID_HANDLE, "event handle is stale");
  FAILS(dls_stream_wait_event(s, e), DLS_ERR_INVALID_HANDLE, "dls_stream_wait_event(event)");
  FAILS(dls_event_synchronize(e), DLS_ERR_INVALID_HANDLE, "stale");
  int c;
  FAILS(dls_event_query(e, &c), DLS_ERR_INVALID_HANDLE, "stale");
  FAILS(dls_event_destroy(e), DLS_ERR_INVALID_HANDLE, "stale");
  dls_event_t z = {0};
  OK(dls_event_destroy(z));
}

BACKEND_TEST(event, wrap_is_non_owning) {
  DLDevice d = dlst_device(*backend_type);
  dls_event_t owner, w;
  void *native;
  OK(dls_event_create(d, 0, &owner));
  OK(dls_event_native(owner, &native));
  OK(dls_event_wrap(d, native, &w));
  dls_stream_t s = dls_stream_default(d, DLS_STREAM_LEGACY);
  OK(dls_event_record(w, s));
  OK(dls_event_synchronize(owner)); /* the owner sees the wrapper's record */
  OK(dls_event_destroy(w));
  OK(dls_event_record(owner, s));
  OK(dls_event_synchronize(owner));
  OK(dls_event_destroy(owner));
  FAILS(dls_event_wrap(d, NULL, &w), DLS_ERR_INVALID_ARGUMENT, "native=NULL");
}

BACKEND_TEST(event, rerecord_does_not_change_an_earlier_wait) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  dls_stream_t a, b, c;
  dls_event_t e;
  dls_latch_t la, lc;
  OK(dls_stream_create(d, NULL, &a));
  OK(dls_stream_create(d, NULL, &b));
  OK(dls_stream_create(d, NULL, &c));
  OK(dls_event_create(d, 0, &e));
  OK(dls_latch_create(d, &la));
  OK(dls_latch_create(d, &lc));
  OK(dls_latch_wait(la, a, DLST_LATCH_TIMEOUT_NS));
  OK(dls_event_record(e, a));   /* record 1: behind latch la */
  OK(dls_stream_wait_event(b, e)); /* b waits for record 1 */
  OK(dls_latch_wait(lc, c, DLST_LATCH_TIMEOUT_NS));
  OK(dls_event_record(e, c));   /* record 2 on c */
  OK(dls_latch_open(lc));
  OK(dls_stream_synchronize(c)); /* record 2 done */
  int idle = 1;
  OK(dls_stream_query(b, &idle));
  cr_assert_eq(idle, 0, "b still waits for record 1, which is behind the closed latch");
  OK(dls_latch_open(la));
  OK(dls_stream_synchronize(b));
  OK(dls_latch_status(la));
  OK(dls_latch_status(lc));
  OK(dls_latch_destroy(la));
  OK(dls_latch_destroy(lc));
  OK(dls_event_destroy(e));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(b));
  OK(dls_stream_destroy(c));
}

Test(event, event_and_stream_of_different_devices_are_rejected) {
  DLDevice g = dlst_device(kDLCUDA);
  dls_event_t e;
  OK(dls_event_create(g, 0, &e));
  FAILS(dls_event_record(e, dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY)), DLS_ERR_INVALID_DEVICE,
        "event is on cuda:0 but stream is on cpu:0");
  OK(dls_event_destroy(e));
}

Test(event, cpu_wrap_rejects_what_is_not_a_live_event) {
  dls_event_t w;
  int not_an_event[16] = {0};
  FAILS(dls_event_wrap(dls_cpu(), not_an_event, &w), DLS_ERR_INVALID_ARGUMENT, "is not a live CPU event");
  FAILS(dls_event_wrap(dls_cpu(), (void *)(uintptr_t)0x1234, &w), DLS_ERR_INVALID_ARGUMENT, "0x1234");
  cr_assert_eq(w.id, 0);
}
