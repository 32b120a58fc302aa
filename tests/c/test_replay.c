/* SPDX-License-Identifier: Apache-2.0 */
/* Graph replays as work on the memory their capture used and did not
 * allocate: the graph keeps that memory alive after its handle is freed,
 * until the graph goes; a replay of any number of buffers is ordered after
 * a write of any of them; replays from several threads. The hazard kinds,
 * with their negative controls, are test_hazard.c's. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common.h"

TestSuite(replay, .fini = dlst_fini);

enum { N = 256 };

static void fill(dls_stream_t s, dls_arg_t dst, float v) { OK(dls_fill(s, dst, N, 4, &v)); }

static float last_value(dls_stream_t s, dls_buffer_t b) {
  float v[N];
  OK(dls_buffer_read(b, 0, v, sizeof v, s));
  OK(dls_stream_synchronize(s));
  return v[N - 1];
}

static _Atomic int g_released;
static void count_release(void *user) {
  (void)user;
  atomic_fetch_add(&g_released, 1);
}

/* Runs every release whose work has passed. */
static void settle(dls_stream_t s) {
  OK(dls_stream_synchronize(s));
  while (dls_deferred_poll() != 0)
    sched_yield();
}

/* A capture on s of y += x, where x borrows store's memory (3s) with a
 * release that counts: the capture's work read memory it did not allocate. */
typedef struct kept {
  dls_stream_t s;
  dls_buffer_t x, y, store;
} kept;

static kept capture_reading_borrowed_memory(DLDevice d) {
  kept k;
  OK(dls_stream_create(d, NULL, &k.s));
  OK(dls_buffer_alloc(k.s, N * sizeof(float), &k.store));
  OK(dls_buffer_alloc(k.s, N * sizeof(float), &k.y));
  fill(k.s, dls_arg_buffer(k.store), 3.0f);
  fill(k.s, dls_arg_buffer(k.y), 0.0f);
  OK(dls_stream_synchronize(k.s));
  void *p;
  OK(dls_buffer_ptr(k.store, &p));
  atomic_store(&g_released, 0);
  OK(dls_buffer_borrow(d, p, N * sizeof(float), k.s, count_release, NULL, &k.x));
  OK(dls_stream_begin_capture(k.s, DLS_CAPTURE_GLOBAL));
  OK(dls_axpy_f32(k.s, N, 1.0f, dls_arg_buffer_in(k.x), dls_arg_buffer(k.y)));
  return k;
}

static void close_kept(kept *k) {
  OK(dls_buffer_free(k->y));
  OK(dls_buffer_free(k->store));
  OK(dls_stream_destroy(k->s));
}

/* Memory a graph reads but did not allocate outlives its replays: freeing
 * its handle after the capture releases nothing while the graph lives (the
 * negative control is the release count: it is 1 once the graph goes). */
BACKEND_TEST(replay, the_graph_keeps_memory_its_capture_used_after_its_handle_is_freed) {
  kept k = capture_reading_borrowed_memory(dlst_device(*backend_type));
  dls_graph_t g;
  OK(dls_stream_end_capture(k.s, &g));
  OK(dls_buffer_free(k.x));
  settle(k.s);
  cr_assert_eq(atomic_load(&g_released), 0, "the graph holds the memory its capture read");
  OK(dls_graph_launch(g, k.s));
  OK(dls_graph_launch(g, k.s));
  cr_assert_float_eq(last_value(k.s, k.y), 6.0f, 0, "two replays of y += x after x's handle was freed");
  OK(dls_graph_destroy(g));
  settle(k.s);
  cr_assert_eq(atomic_load(&g_released), 1, "released once the graph went");
  close_kept(&k);
}

/* A capture discarded, or one whose graph goes unreplayed, keeps nothing. */
BACKEND_TEST(replay, a_discarded_capture_or_an_unreplayed_graph_keeps_nothing) {
  for (int discard = 0; discard < 2; discard++) {
    kept k = capture_reading_borrowed_memory(dlst_device(*backend_type));
    OK(dls_buffer_free(k.x));
    if (discard) {
      OK(dls_stream_discard_capture(k.s));
    } else {
      dls_graph_t g;
      OK(dls_stream_end_capture(k.s, &g));
      OK(dls_graph_destroy(g));
    }
    settle(k.s);
    cr_assert_eq(atomic_load(&g_released), 1, "%s let go of x", discard ? "the discarded capture" : "the graph");
    close_kept(&k);
  }
}

enum { MANY = 150 }; /* more buffers than one piece of work declares (DLS_MAX_ARGS + 2) */

/* A graph that reads MANY eager buffers: its replay waits for a pending
 * write of any of them (the negative control: before it is held, the sum
 * lacks the write). */
BACKEND_TEST(replay, a_replay_of_many_buffers_waits_for_a_write_of_any) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  dls_stream_t s, e;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_stream_create(d, NULL, &e));
  dls_buffer_t xs[MANY], y;
  for (int i = 0; i < MANY; i++) {
    OK(dls_buffer_alloc(s, N * sizeof(float), &xs[i]));
    fill(s, dls_arg_buffer(xs[i]), 1.0f);
  }
  OK(dls_buffer_alloc(s, N * sizeof(float), &y));
  fill(s, dls_arg_buffer(y), 0.0f);
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  fill(s, dls_arg_buffer(y), 0.0f);
  for (int i = 0; i < MANY; i++)
    OK(dls_axpy_f32(s, N, 1.0f, dls_arg_buffer_in(xs[i]), dls_arg_buffer(y)));
  dls_graph_t g;
  OK(dls_stream_end_capture(s, &g));
  OK(dls_graph_launch(g, s));
  cr_assert_float_eq(last_value(s, y), (float)MANY, 0, "one replay sums every buffer");
  for (int k = 0; k < 3; k++) {
    int which = (int[]){0, MANY / 2, MANY - 1}[k]; /* in the first, a middle and the last group */
    dls_latch_t latch;
    OK(dls_latch_create(d, &latch));
    OK(dls_latch_wait(latch, e, DLST_LATCH_TIMEOUT_NS));
    fill(e, dls_arg_buffer(xs[which]), 2.0f);
    OK(dls_graph_launch(g, s));
    int idle = 1;
    OK(dls_stream_query(s, &idle));
    cr_assert_eq(idle, 0, "buffer %d: the replay did not wait for its pending write", which);
    OK(dls_latch_open(latch));
    cr_assert_float_eq(last_value(s, y), (float)(MANY + 1), 0, "buffer %d: the replay missed the write", which);
    OK(dls_latch_destroy(latch));
    fill(e, dls_arg_buffer(xs[which]), 1.0f);
  }
  OK(dls_graph_destroy(g));
  for (int i = 0; i < MANY; i++)
    OK(dls_buffer_free(xs[i]));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(e));
  OK(dls_stream_destroy(s));
}

/* Replays of one graph from several threads, each on its own stream, between
 * eager writes of what the graph reads: every replay adds what the latest
 * write left (ThreadSanitizer watches the graph's record and the buffers). */
typedef struct replayer {
  dls_graph_t g;
  dls_stream_t s;
  dls_buffer_t x;
  dls_status_t st; /* the first failure (asserted by the test's thread) */
  char msg[256];
} replayer;

static void *replay_often(void *arg) {
  replayer *r = arg;
  float one = 1.0f;
  for (int i = 0; i < 50 && r->st == DLS_OK; i++) {
    r->st = dls_graph_launch(r->g, r->s);
    if (r->st == DLS_OK) /* the graph's input, written again on this stream */
      r->st = dls_fill(r->s, dls_arg_buffer(r->x), N, 4, &one);
  }
  if (r->st != DLS_OK)
    snprintf(r->msg, sizeof r->msg, "%s", dls_last_error());
  return NULL;
}

BACKEND_TEST(replay, replays_from_several_threads) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t x, y;
  OK(dls_buffer_alloc(s, N * sizeof(float), &x));
  OK(dls_buffer_alloc(s, N * sizeof(float), &y));
  fill(s, dls_arg_buffer(x), 1.0f);
  fill(s, dls_arg_buffer(y), 0.0f);
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_THREAD_LOCAL));
  OK(dls_axpy_f32(s, N, 1.0f, dls_arg_buffer_in(x), dls_arg_buffer(y)));
  dls_graph_t g;
  OK(dls_stream_end_capture(s, &g));
  enum { T = 3 };
  replayer r[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    r[i] = (replayer){.g = g, .x = x};
    OK(dls_stream_create(d, NULL, &r[i].s));
    cr_assert_eq(pthread_create(&th[i], NULL, replay_often, &r[i]), 0);
  }
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    cr_assert_eq(r[i].st, DLS_OK, "thread %d: %s", i, r[i].msg);
  }
  OK(dls_graph_destroy(g));
  cr_assert_float_eq(last_value(s, y), (float)(T * 50), 0, "every replay added x once, in some order");
  for (int i = 0; i < T; i++)
    OK(dls_stream_destroy(r[i].s));
  OK(dls_buffer_free(x));
  OK(dls_buffer_free(y));
  OK(dls_stream_destroy(s));
}
