/* SPDX-License-Identifier: Apache-2.0 */
/* Shared test helpers: backend parameterization, visible skips, leak checks. */
#ifndef DLSTREAM_TESTS_COMMON_H
#define DLSTREAM_TESTS_COMMON_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

#include "dlstream/dlstream.h"

/* Asserts a call succeeded, printing dlstream's message when it did not. */
#define OK(expr)                                                                          \
  do {                                                                                    \
    dls_status_t ok_st_ = (expr);                                                         \
    cr_assert_eq(ok_st_, DLS_OK, "%s -> %s: %s", #expr, dls_status_name(ok_st_), dls_last_error()); \
  } while (0)

/* Asserts a call failed with `status` and a message containing `part`. */
#define FAILS(expr, status, part)                                                          \
  do {                                                                                     \
    dls_status_t f_st_ = (expr);                                                           \
    cr_assert_eq(f_st_, (status), "%s -> %s (wanted %s): %s", #expr, dls_status_name(f_st_), \
                 dls_status_name(status), dls_last_error());                               \
    cr_assert(strstr(dls_last_error(), (part)) != NULL, "%s: message \"%s\" lacks \"%s\"", #expr, \
              dls_last_error(), (part));                                                   \
  } while (0)

/* The GPU backend the suites test besides the CPU: CUDA, or ROCm when
 * DLSTREAM_TESTS_GPU=rocm (the HIP backend, e.g. through the HIP-on-CUDA
 * stand-in of tests/hip_on_cuda). */
static inline DLDeviceType dlst_gpu_type(void) {
  const char *v = getenv("DLSTREAM_TESTS_GPU");
  return v != NULL && strcmp(v, "rocm") == 0 ? kDLROCM : kDLCUDA;
}

/* Every backend a test runs on; unavailable ones are visible skips. */
static inline struct criterion_test_params dlst_backend_params(void) {
  static DLDeviceType types[] = {kDLCPU, kDLCUDA};
  types[1] = dlst_gpu_type();
  return cr_make_param_array(DLDeviceType, types, sizeof types / sizeof types[0]);
}

/* The device of a backend, or skip the test saying why. */
static inline DLDevice dlst_device(DLDeviceType type) {
  if (dls_backend_probe(type) != DLS_OK)
    cr_skip_test("%s", dls_last_error());
  return dls_device(type, 0);
}

/* DLSTREAM_CPU_SYNC=1 runs streams inline: a latch would block the test itself. */
static inline void dlst_need_async(DLDevice d) {
  const char *v = getenv("DLSTREAM_CPU_SYNC");
  if (d.device_type == kDLCPU && v != NULL && v[0] == '1')
    cr_skip_test("DLSTREAM_CPU_SYNC=1: CPU streams run inline, so a latch cannot hold one stream alone");
}

/* Tests that need two streams to run at the same time (one held by a latch
 * while the other proceeds). compute-sanitizer serializes GPU kernels, so
 * scripts/gpu-check sets DLSTREAM_TESTS_SERIAL_GPU=1 when it runs the suites
 * under it. */
static inline void dlst_need_concurrency(DLDevice d) {
  const char *v = getenv("DLSTREAM_TESTS_SERIAL_GPU");
  if (d.device_type != kDLCPU && v != NULL && v[0] == '1')
    cr_skip_test("DLSTREAM_TESTS_SERIAL_GPU=1 (compute-sanitizer serializes kernels): this test needs a held "
                 "stream and a running one at the same time");
}

/* DLSTREAM_DEBUG_ALLOC=1 turns pools off: a free then blocks the host until
 * its stream passes (and cuMemFree waits for the whole device), so a test
 * that frees while the host itself holds a latch would wait for the timeout. */
static inline void dlst_need_pooling(void) {
  const char *v = getenv("DLSTREAM_DEBUG_ALLOC");
  if (v != NULL && v[0] == '1')
    cr_skip_test("DLSTREAM_DEBUG_ALLOC=1: frees block the host and memory is never reused, so this test's "
                 "free-while-latched pattern does not apply");
}

/* A test body run once per backend. */
#define BACKEND_TEST(suite, name)                                                        \
  ParameterizedTestParameters(suite, name) { return dlst_backend_params(); }              \
  ParameterizedTest(DLDeviceType *backend_type, suite, name)

static inline uint64_t dlst_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Suite teardown: nothing the test made may still be alive, then shut down.
 * Criterion does not count assertions made in .fini, so a leak aborts the
 * test process instead, which fails the suite. */
static inline void dlst_fini(void) {
  static const char *names[] = {"", "stream", "event", "buffer", "tensor", "module", "function", "group", "latch", "graph"};
  int leaked = 0;
  for (int k = DLS_HANDLE_STREAM; k < DLS_HANDLE_KIND_COUNT_; k++) {
    size_t n = dls_live_handles((dls_handle_kind_t)k);
    if (n != 0) {
      cr_log_error("leak: %zu %s handle(s) still alive after the test", n, names[k]);
      leaked = 1;
    }
  }
  /* A release may still wait for work in flight on a stream the test has
   * destroyed (nothing synchronizes those): poll until it runs, for at most
   * 10 seconds, before calling it a leak. */
  for (uint64_t t0 = dlst_now_ns(); dls_deferred_poll() != 0 && dlst_now_ns() - t0 < 10000000000ull;)
    sched_yield();
  if (dls_deferred_pending() != 0) {
    cr_log_error("leak: %zu deferred release(s) still pending after the test", dls_deferred_pending());
    leaked = 1;
  }
  if (dls_shutdown() != DLS_OK) {
    cr_log_error("dls_shutdown: %s", dls_last_error());
    leaked = 1;
  }
  if (leaked)
    abort();
}

/* A borrowed 1-D view of `n` elements of `dt` at `p` on `d` (dls_tensor_view); release it with
 * dls_tensor_release. */
static inline dls_tensor_t dlst_view(DLDevice d, dls_stream_t s, void *p, DLDataType dt, int64_t n) {
  int64_t shape[1] = {n};
  DLTensor v = {p, d, 1, dt, shape, NULL, 0};
  dls_tensor_t t;
  dls_status_t st = dls_tensor_view(&v, 0, s, &t);
  cr_assert_eq(st, DLS_OK, "dls_tensor_view: %s", dls_last_error());
  return t;
}

/* Latch waits in tests time out after this long: never a hang, never a flake. */
#define DLST_LATCH_TIMEOUT_NS 20000000000ull

#endif /* DLSTREAM_TESTS_COMMON_H */
