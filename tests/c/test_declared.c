/* SPDX-License-Identifier: Apache-2.0 */
/* A declared use (dls_buffer_record_use, dls_tensor_record_use: work dlstream did not see) adds a party to the
 * buffer's hazard state and never takes the place of a writer no wait has covered. Stream W writes the buffer
 * behind a latch; then a declaration names another stream D (a third stream, the allocation stream, or W
 * itself), and a later use on stream U must still wait for W: a write by U must land after W's (write after
 * write), a read by U must see W's value (read after write). Each runs again with DLSTREAM_TEST_NO_HAZARDS=1 (the
 * rule off), which must give the wrong answer: the test can fail. */
#include <sched.h>
#include <stdlib.h>

#include "common.h"

TestSuite(declared, .fini = dlst_fini);

enum { N = 256 };
enum { THIRD, ALLOCATION, WRITER };      /* who declares */
enum { LATER_WRITE, LATER_READ };        /* what U does */

static void fill(dls_stream_t s, dls_arg_t dst, float v) { OK(dls_fill(s, dst, N, 4, &v)); }

static void copy(dls_stream_t s, dls_arg_t dst, dls_arg_t src) {
  dls_copy_desc_t d = {.ndim = 1, .elem_size = 4, .shape = {N}, .dst_strides = {1}, .src_strides = {1}};
  OK(dls_copy_strided(s, dst, src, &d));
}

static float last(dls_buffer_t b, dls_stream_t s) {
  float v[N];
  OK(dls_buffer_read(b, 0, v, sizeof v, s));
  OK(dls_stream_synchronize(s));
  return v[N - 1];
}

/* W = s2 writes -3 held; D declares `access`; U (the allocation stream s0, or a third stream for LATER_READ of
 * a declaration by the allocation stream) writes 7 or reads into `out`. Returns the buffer's value (a write) or
 * what the read saw. */
static float run(DLDeviceType type, int who, int access, int later, bool rule) {
  DLDevice d = dlst_device(type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  dls_stream_t s0, s1, s2;
  OK(dls_stream_create(d, NULL, &s0));
  OK(dls_stream_create(d, NULL, &s1));
  OK(dls_stream_create(d, NULL, &s2));
  dls_buffer_t b, out;
  OK(dls_buffer_alloc(s0, N * sizeof(float), &b));
  OK(dls_buffer_alloc(s1, N * sizeof(float), &out));
  fill(s0, dls_arg_buffer(b), 1.0f);
  fill(s1, dls_arg_buffer(out), 0.0f);
  OK(dls_stream_synchronize(s0));
  OK(dls_stream_synchronize(s1));
  dls_latch_t latch;
  OK(dls_latch_create(d, &latch));
  OK(dls_latch_wait(latch, s2, 10ull * 1000 * 1000 * 1000));
  fill(s2, dls_arg_buffer(b), -3.0f); /* W's write, held */
  dls_stream_t decl = who == THIRD ? s1 : who == ALLOCATION ? s0 : s2;
  OK(dls_buffer_record_use(b, decl, (dls_access_t)access));
  dls_stream_t u = later == LATER_WRITE ? s0 : s1;
  if (later == LATER_WRITE)
    fill(u, dls_arg_buffer(b), 7.0f);
  else
    copy(u, dls_arg_buffer(out), dls_arg_buffer_in(b));
  if (!rule) {
    OK(dls_stream_synchronize(u)); /* nothing holds U: it runs before W */
  } else {
    int idle = 0;
    for (int i = 0; i < 1000 && !idle; i++) {
      sched_yield();
      OK(dls_stream_query(u, &idle));
    }
    cr_assert(!idle, "the later use did not wait for the held write the declaration must not drop");
  }
  OK(dls_latch_open(latch));
  OK(dls_stream_synchronize(s2));
  OK(dls_stream_synchronize(u));
  float v = later == LATER_WRITE ? last(b, s0) : last(out, s1);
  OK(dls_latch_destroy(latch));
  OK(dls_buffer_free(b));
  OK(dls_buffer_free(out));
  OK(dls_stream_destroy(s0));
  OK(dls_stream_destroy(s1));
  OK(dls_stream_destroy(s2));
  return v;
}

/* With the rule, then (the negative control) without it. */
static void check(DLDeviceType type, int who, int access, int later, float right, float wrong) {
  cr_assert_float_eq(run(type, who, access, later, true), right, 0);
#if !defined(__SANITIZE_THREAD__)
  setenv("DLSTREAM_TEST_NO_HAZARDS", "1", 1);
  OK(dls_shutdown());
  float off = run(type, who, access, later, false);
  unsetenv("DLSTREAM_TEST_NO_HAZARDS");
  OK(dls_shutdown());
  cr_assert_float_eq(off, wrong, 0, "negative control (rule off): got %g", off);
#endif
}

BACKEND_TEST(declared, a_write_declared_by_a_third_stream_keeps_the_pending_writer) {
  check(*backend_type, THIRD, DLS_ACCESS_WRITE, LATER_WRITE, 7.0f, -3.0f);
}
BACKEND_TEST(declared, a_write_declared_by_the_allocation_stream_keeps_the_pending_writer) {
  check(*backend_type, ALLOCATION, DLS_ACCESS_WRITE, LATER_WRITE, 7.0f, -3.0f);
}
BACKEND_TEST(declared, a_read_declared_by_a_third_stream_keeps_the_pending_writer) {
  check(*backend_type, THIRD, DLS_ACCESS_READ, LATER_WRITE, 7.0f, -3.0f);
}
BACKEND_TEST(declared, a_read_after_a_declaration_by_its_own_stream_sees_the_pending_write) {
  check(*backend_type, THIRD, DLS_ACCESS_WRITE, LATER_READ, -3.0f, 1.0f);
}
BACKEND_TEST(declared, a_read_after_a_read_declared_by_its_own_stream_sees_the_pending_write) {
  check(*backend_type, THIRD, DLS_ACCESS_READ, LATER_READ, -3.0f, 1.0f);
}
BACKEND_TEST(declared, a_declaration_by_the_pending_writer_itself_changes_nothing) {
  check(*backend_type, WRITER, DLS_ACCESS_WRITE, LATER_WRITE, 7.0f, -3.0f);
}
