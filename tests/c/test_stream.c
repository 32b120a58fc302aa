/* SPDX-License-Identifier: Apache-2.0 */
/* Streams: owned, pooled, foreign and default; their operations and errors. */
#include "common.h"

TestSuite(stream, .fini = dlst_fini);

BACKEND_TEST(stream, create_synchronize_destroy) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  cr_assert_neq(s.id, 0);
  OK(dls_stream_synchronize(s));
  int idle = 0;
  OK(dls_stream_query(s, &idle));
  cr_assert_eq(idle, 1);
  DLDevice got;
  OK(dls_stream_device(s, &got));
  cr_assert_eq(got.device_type, d.device_type);
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(stream, destroy_then_use_is_invalid_handle) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_destroy(s));
  FAILS(dls_stream_synchronize(s), DLS_ERR_INVALID_HANDLE, "stream handle is stale");
  FAILS(dls_stream_destroy(s), DLS_ERR_INVALID_HANDLE, "dls_stream_destroy(stream)");
  int idle;
  FAILS(dls_stream_query(s, &idle), DLS_ERR_INVALID_HANDLE, "generation");
}

BACKEND_TEST(stream, stale_handle_message_names_slot_and_generations) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_destroy(s));
  char want[96];
  snprintf(want, sizeof want, "slot %u generation %u, now %u", (unsigned)(uint32_t)s.id,
           (unsigned)(s.id >> 32), (unsigned)(s.id >> 32) + 1);
  FAILS(dls_stream_synchronize(s), DLS_ERR_INVALID_HANDLE, want);
}

BACKEND_TEST(stream, slot_reuse_does_not_revive_stale_handles) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t a, b;
  OK(dls_stream_create(d, NULL, &a));
  OK(dls_stream_destroy(a));
  OK(dls_stream_create(d, NULL, &b));
  cr_assert_eq((uint32_t)a.id, (uint32_t)b.id, "the slot is reused");
  cr_assert_neq(a.id, b.id, "with a new generation");
  FAILS(dls_stream_synchronize(a), DLS_ERR_INVALID_HANDLE, "stale");
  OK(dls_stream_synchronize(b));
  OK(dls_stream_destroy(b));
}

Test(stream, handles_of_other_kinds_are_rejected) {
  dls_event_t e;
  OK(dls_event_create(dls_cpu(), 0, &e));
  dls_stream_t fake = {e.id};
  /* Same slot index may exist in the stream table: use an index never allocated. */
  fake.id = ((uint64_t)1 << 32) | 0x00ffffffu;
  FAILS(dls_stream_synchronize(fake), DLS_ERR_INVALID_HANDLE, "is not a stream handle");
  OK(dls_event_destroy(e));
}

Test(stream, zero_handle_is_invalid_but_destroy_is_a_noop) {
  dls_stream_t z = {0};
  FAILS(dls_stream_synchronize(z), DLS_ERR_INVALID_HANDLE, "handle is 0");
  OK(dls_stream_destroy(z));
}

BACKEND_TEST(stream, priority_in_range_is_accepted) {
  DLDevice d = dlst_device(*backend_type);
  int least, greatest;
  OK(dls_stream_priority_range(d, &least, &greatest));
  cr_assert_leq(greatest, least);
  dls_stream_options_t o = {.priority = greatest, .flags = 0};
  dls_stream_t s;
  OK(dls_stream_create(d, &o, &s));
  OK(dls_stream_destroy(s));
  o.priority = least;
  OK(dls_stream_create(d, &o, &s));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(stream, priority_out_of_range_is_rejected) {
  DLDevice d = dlst_device(*backend_type);
  int least, greatest;
  OK(dls_stream_priority_range(d, &least, &greatest));
  dls_stream_options_t o = {.priority = greatest - 1};
  dls_stream_t s = {42};
  char want[64];
  snprintf(want, sizeof want, "priority=%d", greatest - 1);
  FAILS(dls_stream_create(d, &o, &s), DLS_ERR_INVALID_ARGUMENT, want);
  cr_assert_eq(s.id, 0, "output zeroed on failure");
  o.priority = least + 1;
  FAILS(dls_stream_create(d, &o, &s), DLS_ERR_INVALID_ARGUMENT, "out of range");
}

BACKEND_TEST(stream, unknown_flags_are_rejected) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_options_t o = {.flags = 0x80};
  dls_stream_t s;
  FAILS(dls_stream_create(d, &o, &s), DLS_ERR_INVALID_ARGUMENT, "unknown flag bits 0x80");
  o.flags = DLS_STREAM_BLOCKING;
  OK(dls_stream_create(d, &o, &s));
  OK(dls_stream_destroy(s));
}

Test(stream, null_outputs_are_rejected) {
  FAILS(dls_stream_create(dls_cpu(), NULL, NULL), DLS_ERR_INVALID_ARGUMENT, "out_stream=NULL");
  FAILS(dls_stream_acquire(dls_cpu(), NULL), DLS_ERR_INVALID_ARGUMENT, "out_stream=NULL");
  FAILS(dls_stream_wrap(dls_cpu(), NULL, NULL), DLS_ERR_INVALID_ARGUMENT, "out_stream=NULL");
  dls_stream_t s = dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY);
  FAILS(dls_stream_query(s, NULL), DLS_ERR_INVALID_ARGUMENT, "out_idle=NULL");
  FAILS(dls_stream_native(s, NULL), DLS_ERR_INVALID_ARGUMENT, "out_native=NULL");
  FAILS(dls_stream_device(s, NULL), DLS_ERR_INVALID_ARGUMENT, "out_device=NULL");
  int x;
  FAILS(dls_stream_priority_range(dls_cpu(), NULL, &x), DLS_ERR_INVALID_ARGUMENT, "NULL");
}

BACKEND_TEST(stream, pooled_streams_are_distinct_while_held_and_reused_after) {
  DLDevice d = dlst_device(*backend_type);
  enum { N = 16 };
  dls_stream_t s[N];
  void *native[N];
  for (int i = 0; i < N; i++) {
    OK(dls_stream_acquire(d, &s[i]));
    OK(dls_stream_native(s[i], &native[i]));
    for (int j = 0; j < i; j++)
      cr_assert_neq(native[i], native[j], "pooled streams %d and %d share a native stream", i, j);
  }
  for (int i = 0; i < N; i++)
    OK(dls_stream_destroy(s[i]));
  dls_stream_t again;
  void *n2;
  OK(dls_stream_acquire(d, &again));
  OK(dls_stream_native(again, &n2));
  int found = 0;
  for (int i = 0; i < N; i++)
    found |= n2 == native[i];
  cr_assert(found, "the pool hands back a stream it already made");
  FAILS(dls_stream_synchronize(s[0]), DLS_ERR_INVALID_HANDLE, "stale");
  OK(dls_stream_destroy(again));
}

BACKEND_TEST(stream, default_handles_work_and_never_go_stale) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t l = dls_stream_default(d, DLS_STREAM_LEGACY);
  dls_stream_t p = dls_stream_default(d, DLS_STREAM_PER_THREAD);
  OK(dls_stream_synchronize(l));
  OK(dls_stream_synchronize(p));
  OK(dls_stream_destroy(l));
  OK(dls_stream_synchronize(l));
  DLDevice got;
  OK(dls_stream_device(p, &got));
  cr_assert_eq(got.device_type, d.device_type);
}

Test(stream, cuda_default_natives_are_0_and_2) {
  DLDevice d = dlst_device(kDLCUDA);
  void *n = (void *)1;
  OK(dls_stream_native(dls_stream_default(d, DLS_STREAM_LEGACY), &n));
  cr_assert_null(n);
  OK(dls_stream_native(dls_stream_default(d, DLS_STREAM_PER_THREAD), &n));
  cr_assert_eq((uintptr_t)n, 2);
}

Test(stream, reserved_handle_of_unknown_kind_is_rejected) {
  dls_stream_t bad = dls_stream_default(dls_cpu(), 7);
  FAILS(dls_stream_synchronize(bad), DLS_ERR_INVALID_HANDLE, "unknown kind 7");
  dls_stream_t gpu = dls_stream_default(dls_device(kDLVulkan, 0), DLS_STREAM_LEGACY);
  FAILS(dls_stream_synchronize(gpu), DLS_ERR_INVALID_DEVICE, "no backend");
}

BACKEND_TEST(stream, wrap_is_non_owning) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t owner, w;
  void *native;
  OK(dls_stream_create(d, NULL, &owner));
  OK(dls_stream_native(owner, &native));
  OK(dls_stream_wrap(d, native, &w));
  void *back;
  OK(dls_stream_native(w, &back));
  cr_assert_eq(back, native);
  OK(dls_stream_destroy(w));
  /* The native stream is still alive and usable through its owner. */
  OK(dls_spin(owner, 1000));
  OK(dls_stream_synchronize(owner));
  OK(dls_stream_destroy(owner));
}

/* A wrap of a native stream dlstream made keeps it: ending the maker's handle first leaves the wrap usable (the
 * native went with the handle before: a later query or use read freed memory), and the native goes with the wrap. */
BACKEND_TEST(stream, a_wrap_of_a_stream_dlstream_made_outlives_its_handle) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t maker, w;
  void *native;
  OK(dls_stream_create(d, NULL, &maker));
  OK(dls_stream_native(maker, &native));
  OK(dls_stream_wrap(d, native, &w));
  OK(dls_stream_destroy(maker));
  dls_buffer_t b;
  OK(dls_buffer_alloc(w, 1024, &b));
  float v = 3.0f, got[256];
  OK(dls_fill(w, dls_arg_buffer(b), 256, 4, &v));
  OK(dls_buffer_read(b, 0, got, sizeof got, w));
  int idle = 0;
  OK(dls_stream_synchronize(w));
  OK(dls_stream_query(w, &idle));
  cr_assert_eq(idle, 1);
  cr_assert_float_eq(got[255], 3.0f, 0);
  OK(dls_buffer_free(b));
  OK(dls_stream_destroy(w));
}

Test(stream, cpu_wrap_rejects_what_is_not_a_live_stream) {
  dls_stream_t w;
  int not_a_stream = 0;
  FAILS(dls_stream_wrap(dls_cpu(), &not_a_stream, &w), DLS_ERR_INVALID_ARGUMENT, "is not a live CPU stream");
  FAILS(dls_stream_wrap(dls_cpu(), NULL, &w), DLS_ERR_INVALID_ARGUMENT, "dls_stream_default");
  cr_assert_eq(w.id, 0);
}

static void set_flag(void *p) { __atomic_store_n((int *)p, 1, __ATOMIC_RELEASE); }

BACKEND_TEST(stream, host_callback_runs_after_earlier_work) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  int flag = 0;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_spin(s, 1000000));
  OK(dls_stream_add_callback(s, set_flag, &flag));
  OK(dls_stream_synchronize(s));
  cr_assert_eq(__atomic_load_n(&flag, __ATOMIC_ACQUIRE), 1);
  FAILS(dls_stream_add_callback(s, NULL, NULL), DLS_ERR_INVALID_ARGUMENT, "fn=NULL");
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(stream, query_reports_busy_while_held) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dls_stream_t s;
  dls_latch_t l;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_latch_create(d, &l));
  OK(dls_latch_wait(l, s, DLST_LATCH_TIMEOUT_NS));
  int idle = 1;
  OK(dls_stream_query(s, &idle));
  cr_assert_eq(idle, 0, "a latched stream is busy");
  OK(dls_latch_open(l));
  OK(dls_stream_synchronize(s));
  OK(dls_stream_query(s, &idle));
  cr_assert_eq(idle, 1);
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(stream, destroy_does_not_wait_for_queued_work) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dls_stream_t s;
  dls_latch_t l;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_latch_create(d, &l));
  dls_event_t e;
  OK(dls_event_create(d, 0, &e));
  OK(dls_latch_wait(l, s, DLST_LATCH_TIMEOUT_NS));
  OK(dls_event_record(e, s));
  OK(dls_stream_destroy(s)); /* returns while the stream is still held */
  int done = 1;
  OK(dls_event_query(e, &done));
  cr_assert_eq(done, 0, "the destroyed stream's work is still queued");
  OK(dls_latch_open(l));
  OK(dls_event_synchronize(e)); /* and it still runs */
  OK(dls_event_destroy(e));
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
}

Test(stream, wait_stream_across_backends_is_rejected) {
  DLDevice g = dlst_device(kDLCUDA);
  dls_stream_t a = dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY);
  dls_stream_t b = dls_stream_default(g, DLS_STREAM_LEGACY);
  FAILS(dls_stream_wait_stream(a, b), DLS_ERR_INVALID_DEVICE, "streams of its own backend");
}

/* dls_device_synchronize waits for a stream of each kind: the stream alone is
 * held by a latch, then spins and sets a flag from a host callback. */
BACKEND_TEST(stream, device_synchronize_waits_for_every_kind_of_stream) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  enum { OWNED, POOLED, WRAPPED, LEGACY, NKINDS };
  static const char *const kinds[NKINDS] = {"owned", "pooled", "wrapped", "legacy default"};
  dls_stream_t s[NKINDS], owner;
  void *native;
  OK(dls_stream_create(d, NULL, &s[OWNED]));
  OK(dls_stream_acquire(d, &s[POOLED]));
  OK(dls_stream_create(d, NULL, &owner));
  OK(dls_stream_native(owner, &native));
  OK(dls_stream_wrap(d, native, &s[WRAPPED]));
  s[LEGACY] = dls_stream_default(d, DLS_STREAM_LEGACY);
  for (int k = 0; k < NKINDS; k++) {
    dls_latch_t l;
    int flag = 0;
    OK(dls_latch_create(d, &l));
    OK(dls_latch_wait(l, s[k], DLST_LATCH_TIMEOUT_NS));
    OK(dls_spin(s[k], 20000000));
    OK(dls_stream_add_callback(s[k], set_flag, &flag));
    /* Negative control: waiting for another stream (not the wrapper's owner) does not run the held one. */
    OK(dls_stream_synchronize(s[k == WRAPPED || k == LEGACY ? OWNED : k + 1]));
    cr_assert_eq(__atomic_load_n(&flag, __ATOMIC_ACQUIRE), 0, "the %s stream ran while held", kinds[k]);
    OK(dls_latch_open(l));
    OK(dls_device_synchronize(d));
    cr_assert_eq(__atomic_load_n(&flag, __ATOMIC_ACQUIRE), 1,
                 "dls_device_synchronize returned before the %s stream finished", kinds[k]);
    OK(dls_latch_status(l));
    OK(dls_latch_destroy(l));
  }
  for (int k = 0; k < NKINDS; k++)
    OK(dls_stream_destroy(s[k]));
  OK(dls_stream_destroy(owner));
  OK(dls_device_synchronize(d)); /* nothing left to wait for */
}

BACKEND_TEST(stream, device_synchronize_refuses_where_a_capture_forbids_it) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  dls_graph_t g;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  FAILS(dls_device_synchronize(d), DLS_ERR_STATE, "dls_device_synchronize: capture");
  OK(dls_stream_end_capture(s, &g));
  OK(dls_graph_destroy(g));
  /* A relaxed capture allows host waits, but not on the capturing stream itself. */
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_RELAXED));
  FAILS(dls_device_synchronize(d), DLS_ERR_STATE, "its work is being recorded, not run");
  OK(dls_stream_end_capture(s, &g)); /* the refusal left the capture valid */
  OK(dls_graph_destroy(g));
  OK(dls_device_synchronize(d));
  OK(dls_stream_destroy(s));
}

Test(stream, device_synchronize_names_a_bad_device) {
  FAILS(dls_device_synchronize(dls_device(kDLCPU, 99)), DLS_ERR_INVALID_DEVICE, "dls_device_synchronize(device=cpu:99)");
  FAILS(dls_device_synchronize(dls_device(kDLVulkan, 0)), DLS_ERR_INVALID_DEVICE, "no backend");
}
