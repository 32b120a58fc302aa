/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection: every injectable point of every scenario fails in turn
 * (fault_objects.c,
 * fault_ordering.c), and nothing is lost (fault_fixture.c checks). */
#include "fault_fixture.h"

TestSuite(fault, .fini = dlst_fini);

BACKEND_TEST(fault, sweep_every_point_of_every_scenario) {
  DLDevice d = dlst_device(*backend_type);
  const char *sync = getenv("DLSTREAM_CPU_SYNC");
  bool inline_cpu = d.device_type == kDLCPU && sync != NULL && sync[0] == '1';
  uint64_t points = 0, survived = 0;
  int skipped = 0;
  int total = fx_objects_n + fx_ordering_n;
  for (int i = 0; i < total; i++) {
    const fx_scenario *sc = i < fx_objects_n ? &fx_objects[i] : &fx_ordering[i - fx_objects_n];
    if (sc->needs_async && inline_cpu) {
      printf("fault injection [cpu] %s: skipped: DLSTREAM_CPU_SYNC=1 runs streams inline, a latch would block\n",
             sc->name);
      skipped++;
      continue;
    }
    fx_tally t = fx_sweep(sc, d);
    points += t.points;
    survived += t.survived;
    skipped += t.skipped;
  }
  printf("fault injection: %llu points, %llu survived (%s; %d of %d scenarios skipped)\n",
         (unsigned long long)points, (unsigned long long)survived, d.device_type == kDLCPU ? "cpu" : "gpu", skipped,
         total);
  fflush(stdout);
  cr_assert_eq(survived, points, "fault injection: %llu of %llu points not survived (see the lines above)",
               (unsigned long long)(points - survived), (unsigned long long)points);
  cr_assert_geq(total - skipped, 15, "at least 15 scenarios must run");
}

/* ---- regressions: failures the sweep found ---- */

Test(fault, stream_create_priority_range_failure_names_the_call) {
  dls_stream_options_t o = {.priority = -1};
  dls_stream_t s = {0};
  OK(dls_backend_probe(kDLCPU));
  dls_fault_arm(1, DLS_OK);
  FAILS(dls_stream_create(dls_cpu(), &o, &s), DLS_ERR_BACKEND, "dls_stream_create(device=cpu:0, priority=-1)");
  dls_fault_disarm();
  cr_assert_str_eq(dls_fault_last(), "stream_priority_range");
  cr_assert_eq(s.id, 0, "a failed create leaves no handle");
}

Test(fault, stream_query_failure_names_the_call) {
  dls_stream_t s;
  OK(dls_stream_create(dls_cpu(), NULL, &s));
  int idle = -1;
  dls_fault_arm(1, DLS_OK);
  FAILS(dls_stream_query(s, &idle), DLS_ERR_BACKEND, "dls_stream_query(stream on cpu:0): fault injection");
  dls_fault_disarm();
  OK(dls_stream_destroy(s));
}

Test(fault, latch_create_out_of_memory_names_the_call) {
  int failed = 0;
  for (uint64_t n = 1; n < 64; n++) {
    OK(dls_shutdown()); /* empty object caches: every allocation is a point */
    dls_latch_t l = {0};
    dls_fault_arm(n, DLS_OK);
    dls_status_t st = dls_latch_create(dls_cpu(), &l);
    dls_fault_disarm();
    if (st == DLS_OK)
      OK(dls_latch_destroy(l));
    if (dls_fault_injected() == 0)
      break; /* past its last point */
    if (st == DLS_OK)
      continue; /* absorbed */
    failed++;
    cr_assert(strstr(dls_last_error(), "dls_latch_create") != NULL, "point %llu (%s): \"%s\" names no call",
              (unsigned long long)n, dls_fault_last(), dls_last_error());
    cr_assert_eq(l.id, 0);
  }
  cr_assert_gt(failed, 0, "no point of dls_latch_create failed it");
}
