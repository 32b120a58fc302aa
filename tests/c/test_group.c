/* SPDX-License-Identifier: Apache-2.0 */
/* Fork/join groups: branches run concurrently after the fork and before the join. */
#include "common.h"

TestSuite(group, .fini = dlst_fini);

BACKEND_TEST(group, empty_and_single_branch_groups_are_valid) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t o;
  dls_group_t g;
  OK(dls_stream_create(d, NULL, &o));
  OK(dls_group_begin(o, &g));
  OK(dls_group_end(g));
  OK(dls_group_begin(o, &g));
  dls_stream_t b;
  OK(dls_group_branch(g, &b));
  OK(dls_spin(b, 1000));
  int n = 0;
  OK(dls_group_branch_count(g, &n));
  cr_assert_eq(n, 1);
  OK(dls_group_end(g));
  OK(dls_stream_synchronize(o));
  OK(dls_stream_destroy(o));
}

BACKEND_TEST(group, branches_are_distinct_streams) {
  DLDevice d = dlst_device(*backend_type);
  dls_group_t g;
  OK(dls_group_begin(dls_stream_default(d, DLS_STREAM_LEGACY), &g));
  void *natives[8];
  for (int i = 0; i < 8; i++) {
    dls_stream_t b;
    OK(dls_group_branch(g, &b));
    OK(dls_stream_native(b, &natives[i]));
    for (int j = 0; j < i; j++)
      cr_assert_neq(natives[i], natives[j]);
  }
  OK(dls_group_end(g));
}

BACKEND_TEST(group, branch_after_end_is_an_error) {
  DLDevice d = dlst_device(*backend_type);
  dls_group_t g;
  dls_stream_t b;
  OK(dls_group_begin(dls_stream_default(d, DLS_STREAM_LEGACY), &g));
  OK(dls_group_branch(g, &b));
  OK(dls_group_end(g));
  FAILS(dls_spin(b, 1), DLS_ERR_INVALID_HANDLE, "stream handle is stale");
  FAILS(dls_group_branch(g, &b), DLS_ERR_INVALID_HANDLE, "group handle is stale");
  FAILS(dls_group_end(g), DLS_ERR_INVALID_HANDLE, "dls_group_end(group)");
  FAILS(dls_group_begin(dls_stream_default(d, DLS_STREAM_LEGACY), NULL), DLS_ERR_INVALID_ARGUMENT,
        "out_group=NULL");
}

/* The origin's work after the join waits for every branch, whatever the
 * order the branches are released in. `order` is a permutation of 0..K-1. */
static void join_waits_for_all(DLDevice d, const int *order, int k, bool join) {
  dls_stream_t o;
  dls_group_t g;
  dls_latch_t l[4];
  dls_event_t after;
  OK(dls_stream_create(d, NULL, &o));
  OK(dls_event_create(d, 0, &after));
  OK(dls_group_begin(o, &g));
  for (int i = 0; i < k; i++) {
    dls_stream_t b;
    OK(dls_latch_create(d, &l[i]));
    OK(dls_group_branch(g, &b));
    OK(dls_latch_wait(l[i], b, DLST_LATCH_TIMEOUT_NS));
  }
  if (join) {
    OK(dls_group_end(g));
  }
  OK(dls_event_record(after, o));
  for (int i = 0; i < k; i++) {
    int done = 1;
    OK(dls_event_query(after, &done));
    if (join)
      cr_assert_eq(done, 0, "the origin passed the join with %d of %d branches still held", k - i, k);
    OK(dls_latch_open(l[order[i]]));
  }
  if (!join) {
    /* Negative control: without the join the origin never waited. */
    OK(dls_event_synchronize(after));
    OK(dls_group_end(g));
  }
  OK(dls_event_synchronize(after));
  OK(dls_stream_synchronize(o));
  for (int i = 0; i < k; i++) {
    OK(dls_latch_status(l[i]));
    OK(dls_latch_destroy(l[i]));
  }
  OK(dls_event_destroy(after));
  OK(dls_stream_destroy(o));
}

BACKEND_TEST(group, join_waits_for_every_branch_in_every_release_order) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  int perm[3] = {0, 1, 2};
  /* all 6 permutations of 3 branches (Heap's algorithm, iterative) */
  int c[3] = {0, 0, 0}, i = 0, count = 1;
  join_waits_for_all(d, perm, 3, true);
  while (i < 3) {
    if (c[i] < i) {
      int j = (i % 2 == 0) ? 0 : c[i];
      int t = perm[j];
      perm[j] = perm[i];
      perm[i] = t;
      join_waits_for_all(d, perm, 3, true);
      count++;
      c[i]++;
      i = 0;
    } else {
      c[i] = 0;
      i++;
    }
  }
  cr_assert_eq(count, 6);
}

BACKEND_TEST(group, negative_control_origin_without_join_runs_ahead) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  int perm[2] = {0, 1};
  join_waits_for_all(d, perm, 2, false); /* the event completes while branches are held */
}

BACKEND_TEST(group, branches_start_after_earlier_origin_work) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dls_stream_t o, b;
  dls_group_t g;
  dls_latch_t l;
  dls_event_t e;
  OK(dls_stream_create(d, NULL, &o));
  OK(dls_latch_create(d, &l));
  OK(dls_event_create(d, 0, &e));
  OK(dls_latch_wait(l, o, DLST_LATCH_TIMEOUT_NS));
  OK(dls_group_begin(o, &g));
  OK(dls_group_branch(g, &b));
  OK(dls_event_record(e, b));
  int done = 1;
  OK(dls_event_query(e, &done));
  cr_assert_eq(done, 0, "a branch ran before the origin's earlier work");
  OK(dls_latch_open(l));
  OK(dls_event_synchronize(e));
  OK(dls_group_end(g));
  OK(dls_stream_synchronize(o));
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
  OK(dls_event_destroy(e));
  OK(dls_stream_destroy(o));
}

BACKEND_TEST(group, results_are_right_over_many_groups) {
  DLDevice d = dlst_device(*backend_type);
  enum { K = 4, N = 256, ROUNDS = 50 };
  dls_stream_t o;
  dls_buffer_t buf[K];
  OK(dls_stream_create(d, NULL, &o));
  float zero = 0.0f, one = 1.0f;
  dls_buffer_t ones;
  OK(dls_buffer_alloc(o, N * 4, &ones));
  OK(dls_fill(o, dls_arg_buffer(ones), N, 4, &one));
  for (int k = 0; k < K; k++) {
    OK(dls_buffer_alloc(o, N * 4, &buf[k]));
    OK(dls_fill(o, dls_arg_buffer(buf[k]), N, 4, &zero));
  }
  for (int r = 0; r < ROUNDS; r++) {
    dls_group_t g;
    OK(dls_group_begin(o, &g));
    for (int k = 0; k < K; k++) {
      dls_stream_t b;
      OK(dls_group_branch(g, &b));
      OK(dls_axpy_f32(b, N, (float)(k + 1), dls_arg_buffer(ones), dls_arg_buffer(buf[k])));
    }
    OK(dls_group_end(g));
  }
  for (int k = 0; k < K; k++) {
    float host[N];
    OK(dls_buffer_read(buf[k], 0, host, sizeof host, o));
    OK(dls_stream_synchronize(o));
    for (int i = 0; i < N; i++)
      cr_assert_float_eq(host[i], (float)(ROUNDS * (k + 1)), 1e-3, "buf[%d][%d]", k, i);
    OK(dls_buffer_free(buf[k]));
  }
  OK(dls_buffer_free(ones));
  OK(dls_stream_destroy(o));
}

BACKEND_TEST(group, nested_group_on_a_branch) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t o, b, inner_b;
  dls_group_t g, inner;
  OK(dls_stream_create(d, NULL, &o));
  OK(dls_group_begin(o, &g));
  OK(dls_group_branch(g, &b));
  OK(dls_group_begin(b, &inner));
  OK(dls_group_branch(inner, &inner_b));
  OK(dls_spin(inner_b, 1000));
  FAILS(dls_group_end(g), DLS_ERR_STATE, "end that group first");
  OK(dls_group_end(inner));
  OK(dls_group_end(g));
  OK(dls_stream_synchronize(o));
  OK(dls_stream_destroy(o));
}

BACKEND_TEST(group, ten_thousand_groups_leak_nothing) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t o;
  OK(dls_stream_create(d, NULL, &o));
  for (int r = 0; r < 10000; r++) {
    dls_group_t g;
    dls_stream_t a, b;
    OK(dls_group_begin(o, &g));
    OK(dls_group_branch(g, &a));
    OK(dls_group_branch(g, &b));
    OK(dls_group_end(g));
  }
  OK(dls_stream_synchronize(o));
  cr_assert_eq(dls_live_handles(DLS_HANDLE_STREAM), 1);
  cr_assert_eq(dls_live_handles(DLS_HANDLE_GROUP), 0);
  OK(dls_stream_destroy(o));
}

BACKEND_TEST(group, cpu_branches_really_run_in_parallel) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  /* Branch 0 is held by a latch that only branch 1's completion can open
   * (through the host): done only if branch 1 runs while branch 0 waits. */
  dls_stream_t o, b0, b1;
  dls_group_t g;
  dls_latch_t l;
  OK(dls_stream_create(d, NULL, &o));
  OK(dls_latch_create(d, &l));
  OK(dls_group_begin(o, &g));
  OK(dls_group_branch(g, &b0));
  OK(dls_group_branch(g, &b1));
  OK(dls_latch_wait(l, b0, DLST_LATCH_TIMEOUT_NS));
  OK(dls_spin(b1, 1000));
  OK(dls_stream_synchronize(b1));
  OK(dls_latch_open(l));
  OK(dls_group_end(g));
  OK(dls_stream_synchronize(o));
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
  OK(dls_stream_destroy(o));
}
