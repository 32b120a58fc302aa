/* SPDX-License-Identifier: Apache-2.0 */
/* Several threads creating, using and destroying streams, events and buffers at once. */
#include <pthread.h>

#include "common.h"

TestSuite(stress, .fini = dlst_fini, .timeout = 300);

typedef struct job_t {
  DLDevice d;
  int iterations;
  int failures;
} job_t;

static void *churn(void *arg) {
  job_t *j = arg;
  for (int i = 0; i < j->iterations; i++) {
    dls_stream_t s, p;
    dls_event_t e;
    dls_buffer_t b;
    int32_t v = i;
    int32_t got = -1;
    if (dls_stream_create(j->d, NULL, &s) != DLS_OK || dls_stream_acquire(j->d, &p) != DLS_OK ||
        dls_event_create(j->d, 0, &e) != DLS_OK || dls_buffer_alloc(s, 64, &b) != DLS_OK) {
      j->failures++;
      continue;
    }
    dls_fill(s, dls_arg_buffer(b), 16, 4, &v);
    dls_event_record(e, s);
    dls_stream_wait_event(p, e);
    dls_buffer_read(b, 0, &got, 4, p);
    dls_buffer_free(b);
    dls_stream_synchronize(p);
    if (got != v)
      j->failures++;
    if (dls_event_destroy(e) != DLS_OK || dls_stream_destroy(p) != DLS_OK || dls_stream_destroy(s) != DLS_OK)
      j->failures++;
  }
  return NULL;
}

BACKEND_TEST(stress, threads_create_use_and_destroy_concurrently) {
  DLDevice d = dlst_device(*backend_type);
  enum { T = 6 };
  pthread_t th[T];
  job_t jobs[T];
  for (int t = 0; t < T; t++) {
    jobs[t] = (job_t){.d = d, .iterations = 200, .failures = 0};
    cr_assert_eq(pthread_create(&th[t], NULL, churn, &jobs[t]), 0);
  }
  int failures = 0;
  for (int t = 0; t < T; t++) {
    pthread_join(th[t], NULL);
    failures += jobs[t].failures;
  }
  cr_assert_eq(failures, 0, "%d failed iterations", failures);
}

static void *stale_user(void *arg) {
  dls_stream_t *s = arg;
  for (int i = 0; i < 2000; i++) {
    int idle;
    dls_status_t st = dls_stream_query(*s, &idle);
    if (st != DLS_OK && st != DLS_ERR_INVALID_HANDLE)
      return (void *)1;
  }
  return NULL;
}

BACKEND_TEST(stress, stale_handles_under_churn_never_crash) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t shared;
  OK(dls_stream_create(d, NULL, &shared));
  dls_stream_t stale = shared;
  OK(dls_stream_destroy(shared));
  pthread_t th[3];
  for (int t = 0; t < 3; t++)
    pthread_create(&th[t], NULL, stale_user, &stale);
  for (int i = 0; i < 300; i++) {
    dls_stream_t s;
    OK(dls_stream_create(d, NULL, &s));
    OK(dls_stream_destroy(s));
  }
  for (int t = 0; t < 3; t++) {
    void *r;
    pthread_join(th[t], &r);
    cr_assert_null(r);
  }
}

typedef struct keep_job {
  DLDevice d;
  dls_event_t kept[10];
  int failures;
} keep_job;

/* Makes 40 events, destroys 30 (more than a thread keeps in its cache of
 * freed slots) and exits with 10 alive. */
static void *make_forty_keep_ten(void *arg) {
  keep_job *j = arg;
  dls_event_t e[40];
  for (int i = 0; i < 40; i++)
    j->failures += dls_event_create(j->d, i % 2 ? DLS_EVENT_TIMING : DLS_EVENT_DEFAULT, &e[i]) != DLS_OK;
  for (int i = 0; i < 30; i++)
    j->failures += dls_event_destroy(e[i]) != DLS_OK;
  memcpy(j->kept, &e[30], sizeof j->kept);
  return NULL;
}

BACKEND_TEST(stress, handles_of_finished_threads_are_counted_and_reused_exactly) {
  DLDevice d = dlst_device(*backend_type);
  size_t before = dls_live_handles(DLS_HANDLE_EVENT);
  keep_job j = {.d = d};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, make_forty_keep_ten, &j), 0);
  pthread_join(t, NULL);
  cr_assert_eq(j.failures, 0, "%s", dls_last_error());
  cr_assert_eq(dls_live_handles(DLS_HANDLE_EVENT), before + 10, "the slots the thread freed are not alive");
  dls_event_t fresh[30];
  for (int i = 0; i < 30; i++) {
    OK(dls_event_create(d, DLS_EVENT_DEFAULT, &fresh[i]));
    for (int k = 0; k < 10; k++)
      cr_assert_neq(fresh[i].id, j.kept[k].id, "a live handle was handed out again");
  }
  cr_assert_eq(dls_live_handles(DLS_HANDLE_EVENT), before + 40);
  for (int k = 0; k < 10; k++) {
    int done = 0;
    OK(dls_event_query(j.kept[k], &done)); /* made on the finished thread, still live here */
    OK(dls_event_destroy(j.kept[k]));
    FAILS(dls_event_destroy(j.kept[k]), DLS_ERR_INVALID_HANDLE, "event handle is stale");
  }
  for (int i = 0; i < 30; i++)
    OK(dls_event_destroy(fresh[i]));
  cr_assert_eq(dls_live_handles(DLS_HANDLE_EVENT), before);
}
