/* SPDX-License-Identifier: Apache-2.0 */
/* Foreign memory from C: two buffers borrowed over the same host memory (dls_buffer_borrow; the same holds for
 * dls_tensor_import_*) are entered in the record of foreign memory, and the second one's producer first waits for
 * the uses of those bytes noted so far. Stream S1 writes through the first buffer behind a latch; the second buffer
 * is borrowed on P2, and S2 reads through it: it must see S1's write. Each runs again with
 * DLSTREAM_TEST_NO_FOREIGN=1 (the record off), which must give the wrong answer: the test can fail. */
#include <sched.h>
#include <stdlib.h>

#include "common.h"

TestSuite(foreign, .fini = dlst_fini);

enum { N = 256 };

static float run(DLDeviceType type, bool record) {
  DLDevice d = dlst_device(type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  static float host[N];
  for (int i = 0; i < N; i++)
    host[i] = 0.0f;
  dls_stream_t s1, s2, p2;
  OK(dls_stream_create(d, NULL, &s1));
  OK(dls_stream_create(d, NULL, &s2));
  OK(dls_stream_create(d, NULL, &p2));
  dls_buffer_t b1, b2, out;
  OK(dls_buffer_borrow(d, host, sizeof host, s1, NULL, NULL, &b1));
  OK(dls_buffer_alloc(s2, sizeof host, &out));
  float zero = 0.0f, seven = 7.0f;
  OK(dls_fill(s2, dls_arg_buffer(out), N, 4, &zero));
  OK(dls_stream_synchronize(s2));
  dls_latch_t latch;
  OK(dls_latch_create(d, &latch));
  OK(dls_latch_wait(latch, s1, 10ull * 1000 * 1000 * 1000));
  OK(dls_fill(s1, dls_arg_buffer(b1), N, 4, &seven)); /* held */
  OK(dls_buffer_borrow(d, host, sizeof host, p2, NULL, NULL, &b2)); /* p2 waits for s1's use (the record) */
  dls_copy_desc_t desc = {.ndim = 1, .elem_size = 4, .shape = {N}, .dst_strides = {1}, .src_strides = {1}};
  OK(dls_copy_strided(s2, dls_arg_buffer(out), dls_arg_buffer_in(b2), &desc)); /* first use: after p2 */
  if (record) {
    int idle = 0;
    for (int i = 0; i < 1000 && !idle; i++) {
      sched_yield();
      OK(dls_stream_query(s2, &idle));
    }
    cr_assert(!idle, "the read through the second buffer did not wait for the held write through the first");
  } else {
    OK(dls_stream_synchronize(s2)); /* nothing holds it: it reads first */
  }
  OK(dls_latch_open(latch));
  OK(dls_stream_synchronize(s1));
  OK(dls_stream_synchronize(s2));
  float v[N];
  OK(dls_buffer_read(out, 0, v, sizeof v, s2));
  OK(dls_stream_synchronize(s2));
  OK(dls_latch_destroy(latch));
  OK(dls_buffer_free(b1));
  OK(dls_buffer_free(b2));
  OK(dls_buffer_free(out));
  OK(dls_stream_destroy(s1));
  OK(dls_stream_destroy(s2));
  OK(dls_stream_destroy(p2));
  return v[N - 1];
}

BACKEND_TEST(foreign, a_second_borrow_of_the_same_memory_waits_for_the_first_ones_uses) {
  if (*backend_type != kDLCPU)
    cr_skip_test("host memory borrowed on a GPU device would be pinned memory: the CPU backend shows the rule");
  cr_assert_float_eq(run(*backend_type, true), 7.0f, 0);
#if !defined(__SANITIZE_THREAD__)
  setenv("DLSTREAM_TEST_NO_FOREIGN", "1", 1);
  OK(dls_shutdown());
  float off = run(*backend_type, false);
  unsetenv("DLSTREAM_TEST_NO_FOREIGN");
  OK(dls_shutdown());
  cr_assert_float_eq(off, 0.0f, 0, "negative control (record off): got %g", off);
#endif
}
