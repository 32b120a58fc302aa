/* SPDX-License-Identifier: Apache-2.0 */
/* Status names and messages, the last-error message, versions, devices and init. */
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h" /* DLS__BACKENDS: the backends, written once */
#include "common.h"

TestSuite(status, .fini = dlst_fini);

Test(status, every_status_has_a_name_and_a_message) {
#define CHECK(name, value, msg)                                          \
  cr_assert_str_eq(dls_status_name(DLS_##name), "DLS_" #name);           \
  cr_assert_str_eq(dls_status_str(DLS_##name), msg);                     \
  cr_assert_eq((int)DLS_##name, value);
  DLS_STATUS_MAP(CHECK)
#undef CHECK
}

Test(status, unknown_status_is_named_unknown) {
  cr_assert_str_eq(dls_status_name((dls_status_t)999), "DLS_UNKNOWN");
  cr_assert_str_eq(dls_status_str((dls_status_t)-3), "unknown status");
}

Test(status, values_are_pinned) {
  cr_assert_eq(DLS_OK, 0);
  cr_assert_eq(DLS_ERR_INVALID_HANDLE, 2);
  cr_assert_eq(DLS_ERR_INTERNAL, 16);
}

Test(status, last_error_is_never_null_and_names_the_call) {
  cr_assert_not_null(dls_last_error());
  dls_stream_t s = {0};
  FAILS(dls_stream_synchronize(s), DLS_ERR_INVALID_HANDLE, "dls_stream_synchronize(stream)");
}

Test(status, success_does_not_clear_the_message) {
  dls_stream_t s = {0};
  FAILS(dls_stream_synchronize(s), DLS_ERR_INVALID_HANDLE, "handle is 0");
  OK(dls_init());
  cr_assert(strstr(dls_last_error(), "handle is 0") != NULL);
}

Test(status, version_matches_the_header) {
  cr_assert_eq(dls_version_number(), DLS_VERSION_NUMBER);
  cr_assert_str_eq(dls_version_string(), DLS_VERSION_STRING);
}

Test(status, init_is_idempotent_and_shutdown_allows_reinit) {
  OK(dls_init());
  OK(dls_init());
  OK(dls_shutdown());
  OK(dls_shutdown());
  dls_stream_t s;
  OK(dls_stream_create(dls_cpu(), NULL, &s));
  OK(dls_stream_destroy(s));
}

Test(status, device_strings) {
  char buf[32];
  cr_assert_str_eq(dls_device_str(dls_cuda(3), buf, sizeof buf), "cuda:3");
  cr_assert_str_eq(dls_device_str(dls_cpu(), buf, sizeof buf), "cpu:0");
  cr_assert_str_eq(dls_device_str(dls_device(kDLVulkan, 1), buf, sizeof buf), "device_type7:1");
  cr_assert_str_eq(dls_device_str(dls_cpu(), buf, 0), "");
}

Test(status, cpu_backend_is_always_available) {
  OK(dls_backend_probe(kDLCPU));
  int n = -1;
  OK(dls_device_count(kDLCPU, &n));
  cr_assert_eq(n, 1);
}

Test(status, unknown_device_type_is_rejected) {
  FAILS(dls_backend_probe(kDLVulkan), DLS_ERR_INVALID_DEVICE, "device_type=7");
  int n = 5;
  FAILS(dls_device_count(kDLMetal, &n), DLS_ERR_INVALID_DEVICE, "no backend");
  FAILS(dls_device_count(kDLCPU, NULL), DLS_ERR_INVALID_ARGUMENT, "out_count=NULL");
  dls_stream_t s;
  FAILS(dls_stream_create(dls_device(kDLOpenCL, 0), NULL, &s), DLS_ERR_INVALID_DEVICE, "device=device_type4:0");
}

/* The core's registry is made from DLS__BACKENDS: each listed device type finds its backend, and that backend runs
 * it (a vtable whose device type differs from its line is an internal error); a type none runs is refused with a
 * message that names every listed one. */
Test(status, every_listed_backend_runs_its_device_type) {
  int n = 0;
#define CHECK_LISTED(be, type, value)                                                                  \
  do {                                                                                                 \
    dls_status_t st = dls_backend_probe(type);                                                         \
    cr_assert(st == DLS_OK || st == DLS_ERR_UNAVAILABLE, "%s: %s", #type, dls_last_error());           \
    n++;                                                                                               \
  } while (0);
  DLS__BACKENDS(CHECK_LISTED)
#undef CHECK_LISTED
  cr_assert_eq(n, DLS__NBACKENDS);
  FAILS(dls_backend_probe(kDLVulkan), DLS_ERR_INVALID_DEVICE, "no backend for this device type");
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", dls_last_error());
#define NAMED(be, type, value) cr_assert(strstr(msg, " " #type "=" #value) != NULL, "%s lacks %s", msg, #type);
  DLS__BACKENDS(NAMED)
#undef NAMED
}

Test(status, unavailable_gpu_backend_says_why_and_counts_zero) {
  if (dls_backend_probe(kDLCUDA) == DLS_OK)
    cr_skip_test("a CUDA device is present: nothing to check about an unavailable backend");
  cr_assert_eq(dls_backend_probe(kDLCUDA), DLS_ERR_UNAVAILABLE);
  cr_assert(strstr(dls_last_error(), "cuda") != NULL, "message: %s", dls_last_error());
  int n = 7;
  OK(dls_device_count(kDLCUDA, &n));
  cr_assert_eq(n, 0);
  dls_stream_t s;
  FAILS(dls_stream_create(dls_cuda(0), NULL, &s), DLS_ERR_UNAVAILABLE, "dls_stream_create(device=cuda:0)");
  cr_assert_eq(s.id, 0);
}

Test(status, device_id_out_of_range) {
  dls_stream_t s;
  FAILS(dls_stream_create(dls_device(kDLCPU, 1), NULL, &s), DLS_ERR_INVALID_DEVICE, "device id 1 out of range");
  FAILS(dls_stream_create(dls_device(kDLCPU, -1), NULL, &s), DLS_ERR_INVALID_DEVICE, "out of range");
}

Test(status, hip_backend_reports_unavailable) {
  if (dls_backend_probe(kDLROCM) == DLS_OK)
    cr_skip_test("a ROCm device is present");
  cr_assert_eq(dls_backend_probe(kDLROCM), DLS_ERR_UNAVAILABLE);
  cr_assert(strstr(dls_last_error(), "hip") != NULL, "message: %s", dls_last_error());
}

static void child_body(void) {
  dls_stream_t s;
  dls_status_t st = dls_stream_create(dls_cpu(), NULL, &s);
  _exit(st == DLS_ERR_FORK && strstr(dls_last_error(), "fork()") != NULL ? 0 : 1);
}

Test(status, use_after_fork_is_a_clear_error) {
  dls_stream_t s;
  OK(dls_stream_create(dls_cpu(), NULL, &s));
  pid_t pid = fork();
  if (pid == 0)
    child_body();
  int wst = 0;
  waitpid(pid, &wst, 0);
  cr_assert(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "the child did not get DLS_ERR_FORK");
  OK(dls_stream_destroy(s));
}
