/* SPDX-License-Identifier: Apache-2.0 */
/* The HIP backend where no AMD GPU is: what its probe reports with ROCm's runtime installed, without it, and through
 * DLSTREAM_HIP_LIBRARY. */
#include <dlfcn.h>
#include <stdio.h>

#include "common.h"

TestSuite(hip, .fini = dlst_fini);

/* Whether the usual names find a HIP runtime, as the backend searches them. */
static bool runtime_installed(void) {
  static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *lib = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
    if (lib != NULL) {
      dlclose(lib);
      return true;
    }
  }
  return false;
}

/* Runs hip_probe (a fresh process: the probe's outcome is cached per
 * process) with DLSTREAM_HIP_LIBRARY set to `library`; its output in `out`. */
static void probe_with(const char *library, char *out, size_t size) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "DLSTREAM_HIP_LIBRARY='%s' '%s' 2>&1", library, DLST_HIP_PROBE);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p, "popen(%s)", cmd);
  size_t n = fread(out, 1, size - 1, p);
  out[n] = '\0';
  int rc = pclose(p);
  cr_assert_eq(rc, 0, "%s exited with %d:\n%s", cmd, rc, out);
}

Test(hip, probe_says_why_rocm_is_unavailable) {
  if (getenv("DLSTREAM_HIP_LIBRARY") != NULL)
    cr_skip_test("DLSTREAM_HIP_LIBRARY is set (%s): this test is about the default search",
                 getenv("DLSTREAM_HIP_LIBRARY"));
  dls_status_t st = dls_backend_probe(kDLROCM);
  if (st == DLS_OK)
    cr_skip_test("a ROCm device is present, so there is no unavailability to report");
  cr_assert_eq(st, DLS_ERR_UNAVAILABLE, "%s: %s", dls_status_name(st), dls_last_error());
  const char *m = dls_last_error();
  if (runtime_installed()) {
    /* The real runtime was loaded and asked; it has no device. */
    cr_assert(strstr(m, "no ROCm device") != NULL, "message: %s", m);
    cr_assert(strstr(m, "libamdhip64") != NULL, "message names no runtime: %s", m);
    cr_assert(strstr(m, "hipError") != NULL, "message gives no HIP error name: %s", m);
    cr_assert(strstr(m, "/dev/kfd") != NULL || strstr(m, "rocminfo") != NULL, "message gives no reason: %s", m);
    cr_log_info("ROCm runtime installed, no device: %s", m);
  } else {
    cr_assert(strstr(m, "libamdhip64.so not found") != NULL, "message: %s", m);
    cr_log_info("ROCm runtime not installed: %s", m);
  }
  int n = -1;
  OK(dls_device_count(kDLROCM, &n));
  cr_assert_eq(n, 0);
  dls_stream_t s;
  FAILS(dls_stream_create(dls_device(kDLROCM, 0), NULL, &s), DLS_ERR_UNAVAILABLE, "hip backend unavailable");
}

Test(hip, a_missing_library_is_named) {
  char out[2048];
  probe_with("/nonexistent/libamdhip64.so", out, sizeof out);
  cr_assert(strstr(out, "status=DLS_ERR_UNAVAILABLE") != NULL, "%s", out);
  cr_assert(strstr(out, "DLSTREAM_HIP_LIBRARY=/nonexistent/libamdhip64.so not found") != NULL, "%s", out);
  cr_assert(strstr(out, "devices=0") != NULL, "%s", out);
}

Test(hip, a_library_that_is_not_hip_lacks_its_entry_points) {
  char out[2048];
  probe_with("libm.so.6", out, sizeof out);
  cr_assert(strstr(out, "status=DLS_ERR_UNAVAILABLE") != NULL, "%s", out);
  cr_assert(strstr(out, "libm.so.6 lacks hipInit") != NULL, "%s", out);
}

/* The stand-in exports every entry point the backend requires: loaded as the
 * runtime, it gets as far as asking for devices (none without a CUDA GPU). */
Test(hip, the_hip_on_cuda_stand_in_loads_as_the_runtime) {
  char out[2048];
  probe_with(DLST_HIP_ON_CUDA, out, sizeof out);
  cr_assert(strstr(out, "lacks") == NULL, "%s", out);
  if (strstr(out, "status=DLS_OK") != NULL) {
    cr_log_info("the stand-in found a CUDA GPU: %s", out);
    return;
  }
  cr_assert(strstr(out, "no ROCm device") != NULL, "%s", out);
  cr_assert(strstr(out, "HIP runtime 5.2") != NULL, "%s", out);
  cr_assert(strstr(out, "hipError") != NULL, "%s", out);
}
