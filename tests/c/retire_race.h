/* SPDX-License-Identifier: Apache-2.0 */
/* Readers for the retirement races (test_event_retire.c, test_stream_retire.c): threads that record an event on
 * one stream and make another wait on it, by turns, while the test destroys the event or a stream under them. */
#ifndef DLSTREAM_TESTS_RETIRE_RACE_H
#define DLSTREAM_TESTS_RETIRE_RACE_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "common.h"

/* Each reader stops after RACE_READER_OPS turns at most: on the CPU backend every record and wait is work its
 * streams' threads run, and the test's last synchronize waits for all of it. */
enum { RACE_READERS = 3, RACE_READER_OPS = 4000 };

typedef struct retire_race {
  _Atomic uint64_t event;      /* the event the readers use now (its handle's id) */
  _Atomic uint64_t streams[2]; /* the streams they record on and wait on, by turns */
  _Atomic bool done;
  _Atomic long used;           /* records and waits that found both handles live */
  _Atomic int started;         /* readers past their first turn (taken before anything is destroyed) */
  pthread_t th[RACE_READERS];
} retire_race;

static void *retire_reader(void *p) {
  retire_race *r = p;
  long used = 0;
  for (unsigned i = 0; i < RACE_READER_OPS && !atomic_load_explicit(&r->done, memory_order_acquire); i++) {
    dls_event_t e = {atomic_load_explicit(&r->event, memory_order_acquire)};
    dls_stream_t on = {atomic_load_explicit(&r->streams[i & 1], memory_order_acquire)};
    dls_stream_t waiter = {atomic_load_explicit(&r->streams[(i + 1) & 1], memory_order_acquire)};
    dls_status_t a = dls_event_record(e, on);
    dls_status_t b = dls_stream_wait_event(waiter, e);
    if ((a != DLS_OK && a != DLS_ERR_INVALID_HANDLE) || (b != DLS_OK && b != DLS_ERR_INVALID_HANDLE)) {
      fprintf(stderr, "record %d, wait %d: %s\n", a, b, dls_last_error());
      abort();
    }
    used += (a == DLS_OK) + (b == DLS_OK);
    if (i == 0)
      atomic_fetch_add_explicit(&r->started, 1, memory_order_release);
  }
  atomic_fetch_add(&r->used, used);
  return NULL;
}

/* Starts the readers and returns once each has made its first turn, on handles still live: the race is run even
 * where the threads start slowly (a loaded machine, a sanitizer), not only where they happen to start in time. */
static inline void retire_race_start(retire_race *r) {
  for (int t = 0; t < RACE_READERS; t++)
    cr_assert_eq(pthread_create(&r->th[t], NULL, retire_reader, r), 0);
  while (atomic_load_explicit(&r->started, memory_order_acquire) < RACE_READERS)
    sched_yield();
}

/* Stops the readers; the race must have been run (some record or wait found its handles live). */
static inline void retire_race_stop(retire_race *r) {
  atomic_store(&r->done, true);
  for (int t = 0; t < RACE_READERS; t++)
    pthread_join(r->th[t], NULL);
  cr_assert_gt(atomic_load(&r->used), 0, "no record or wait ever found its handles live: the race was not run");
}

#endif /* DLSTREAM_TESTS_RETIRE_RACE_H */
