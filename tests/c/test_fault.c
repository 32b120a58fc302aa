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

