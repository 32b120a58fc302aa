/* SPDX-License-Identifier: Apache-2.0 */
/* Helper of test_hip: probes the HIP backend in a fresh process (the probe's outcome is cached per process) and prints it. */
#include <stdio.h>

#include "dlstream/dlstream.h"

int main(void) {
  dls_status_t st = dls_backend_probe(kDLROCM);
  int n = -1;
  dls_status_t cst = dls_device_count(kDLROCM, &n);
  printf("status=%s\nmessage=%s\ndevices=%d (%s)\n", dls_status_name(st), st == DLS_OK ? "" : dls_last_error(), n,
         dls_status_name(cst));
  dls_shutdown();
  return 0;
}
