/* SPDX-License-Identifier: Apache-2.0 */
/* Events retire (base/handle.h, core/pin.h): record and wait read an event inside their pin without a hold, so an
 * ended event stays in its slot until a grace period has passed. A destroyed handle's slot is not reused before
 * then; events destroyed while other threads record and wait on them are never used after they are freed (run
 * under ASan and TSan: `make test SANITIZE=address|thread`). */
#include <pthread.h>
#include <stdatomic.h>

#include "common.h"
#include "retire_race.h"

TestSuite(event_retire, .fini = dlst_fini);

static uint32_t slot_of(dls_event_t e) { return (uint32_t)e.id; }

/* Destroys an event and makes another at once: whether the second took the first's slot. Starts after a shutdown
 * (dlst_fini, or the caller's), which drops every retired event: none is waiting, so no batch is freed here. */
static bool slot_reused_at_once(DLDevice d) {
  dls_event_t a, b;
  OK(dls_event_create(d, DLS_EVENT_DEFAULT, &a));
  OK(dls_event_destroy(a));
  cr_assert_eq(dls_live_handles(DLS_HANDLE_EVENT), 0, "a retired event is not live");
  OK(dls_event_create(d, DLS_EVENT_DEFAULT, &b));
  int status = dls_event_record(a, dls_stream_default(d, DLS_STREAM_LEGACY));
  cr_assert_eq(status, DLS_ERR_INVALID_HANDLE, "a destroyed event's handle is stale at once");
  OK(dls_event_destroy(b));
  return slot_of(b) == slot_of(a);
}

BACKEND_TEST(event_retire, a_destroyed_slot_waits_for_its_grace_period_then_is_reused) {
  DLDevice d = dlst_device(*backend_type);
  dls_event_t a;
  OK(dls_event_create(d, DLS_EVENT_DEFAULT, &a));
  uint32_t slot = slot_of(a);
  OK(dls_event_destroy(a));
  OK(dls_shutdown());
  cr_assert(!slot_reused_at_once(d), "the slot of an event just destroyed was reused before a grace period");
  /* Retired events are freed in batches, each after one grace period: the slot comes back within a few. */
  bool reused = false;
  for (int i = 0; i < 1000 && !reused; i++) {
    dls_event_t e;
    OK(dls_event_create(d, DLS_EVENT_DEFAULT, &e));
    reused = slot_of(e) == slot;
    cr_assert_neq(e.id, a.id, "a reused slot carries a new generation");
    OK(dls_event_destroy(e));
  }
  cr_assert(reused, "the slot never came back: retired events are not freed");
  /* The negative control: with retirement off, the slot is reused at once (and a record racing the destroy could
   * use a freed event: the race test below under ASan). */
  setenv("DLSTREAM_TEST_NO_RETIRE", "1", 1);
  OK(dls_shutdown());
  bool control = slot_reused_at_once(d);
  unsetenv("DLSTREAM_TEST_NO_RETIRE");
  OK(dls_shutdown());
  cr_assert(control, "negative control (retirement off): the slot was not reused at once, so the test shows nothing");
}

/* ---- events destroyed under recording and waiting threads ---- */

enum { RACE_ROUNDS = 400 };

BACKEND_TEST(event_retire, events_destroyed_while_other_threads_record_and_wait_on_them) {
  DLDevice device = dlst_device(*backend_type);
  retire_race r = {0};
  dls_stream_t streams[2];
  for (int k = 0; k < 2; k++) {
    OK(dls_stream_create(device, NULL, &streams[k]));
    atomic_init(&r.streams[k], streams[k].id);
  }
  dls_event_t e;
  OK(dls_event_create(device, DLS_EVENT_DEFAULT, &e));
  atomic_init(&r.event, e.id);
  retire_race_start(&r);
  for (int i = 0; i < RACE_ROUNDS; i++) {
    /* Half the events are of the device's pool (their natives go back to it), half own a native of their own. */
    dls_event_t next;
    OK(dls_event_create(device, (i & 1) ? DLS_EVENT_DEFAULT : DLS_EVENT_TIMING, &next));
    dls_event_t old = {atomic_exchange(&r.event, next.id)};
    OK(dls_event_destroy(old)); /* readers may be inside a record or a wait on it right now */
  }
  retire_race_stop(&r);
  OK(dls_event_destroy((dls_event_t){atomic_load(&r.event)}));
  for (int k = 0; k < 2; k++) {
    OK(dls_stream_synchronize(streams[k]));
    OK(dls_stream_destroy(streams[k]));
  }
}
