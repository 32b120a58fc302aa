/* SPDX-License-Identifier: Apache-2.0 */
/* Handles a caller never got: the end of one is refused as any stale handle's, whatever the slot holds. A retired
 * event (ended, waiting in its slot for a grace period, base/handle.h) carries its slot's next generation already,
 * the one its slot's next event will get; a destroy of that forged handle found the object still there, ended it a
 * second time and put the slot on the retired list twice: the next batch dropped the event twice or, the slot the
 * list's head, looped on it forever (this test then times out). */
#include "common.h"

TestSuite(handle_forged, .fini = dlst_fini, .timeout = 60);

/* The handle of the same slot one generation later. */
static uint64_t next_generation(uint64_t id) { return id + ((uint64_t)1 << 32); }

BACKEND_TEST(handle_forged, the_next_generation_of_a_retired_event_is_stale) {
  DLDevice d = dlst_device(*backend_type);
  OK(dls_shutdown()); /* no retired event waits: the batch below is this test's */
  dls_event_t e;
  OK(dls_event_create(d, DLS_EVENT_DEFAULT, &e));
  OK(dls_event_destroy(e));
  dls_event_t forged = {next_generation(e.id)};
  FAILS(dls_event_destroy(forged), DLS_ERR_INVALID_HANDLE, "dls_event_destroy(event): event handle is stale");
  FAILS(dls_event_destroy(e), DLS_ERR_INVALID_HANDLE, "dls_event_destroy(event): event handle is stale");
  FAILS(dls_event_record(forged, dls_stream_default(d, DLS_STREAM_LEGACY)), DLS_ERR_INVALID_HANDLE, "stale");
  /* Batches of retired events freed (each after its grace period), then every one at the shutdown: each once. */
  for (int i = 0; i < 3 * 64; i++) {
    dls_event_t x;
    OK(dls_event_create(d, DLS_EVENT_DEFAULT, &x));
    OK(dls_event_destroy(x));
  }
  cr_assert_eq(dls_live_handles(DLS_HANDLE_EVENT), 0);
  OK(dls_shutdown());
}

/* A handle of a slot no handle was ever given, and of slot 0: stale too, with nothing else changed. */
BACKEND_TEST(handle_forged, handles_of_slots_never_given_are_refused) {
  DLDevice d = dlst_device(*backend_type);
  dls_event_t e;
  OK(dls_event_create(d, DLS_EVENT_DEFAULT, &e));
  const uint64_t ids[] = {e.id + 1, e.id + 1000, ((uint64_t)1 << 32), (uint32_t)e.id, ~(uint64_t)0, 0xffffffffu};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    dls_event_t f = {ids[i]};
    cr_assert_eq(dls_event_destroy(f), DLS_ERR_INVALID_HANDLE, "id 0x%llx: %s", (unsigned long long)ids[i],
                 dls_last_error());
    dls_stream_t s = {ids[i]};
    dls_status_t want = ids[i] >> 32 == DLS_STREAM_RESERVED_GENERATION ? DLS_OK : DLS_ERR_INVALID_HANDLE;
    cr_assert_eq(dls_stream_destroy(s), want, "id 0x%llx: %s", (unsigned long long)ids[i], dls_last_error());
  }
  OK(dls_event_record(e, dls_stream_default(d, DLS_STREAM_LEGACY)));
  OK(dls_event_destroy(e));
  cr_assert_eq(dls_live_handles(DLS_HANDLE_EVENT), 0);
}
