/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers: allocation, copies, borrowing, and the stream-ordered deallocation rule. */
#include "common.h"

TestSuite(buffer, .fini = dlst_fini);

BACKEND_TEST(buffer, alloc_write_read_free) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  dls_buffer_t b;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_buffer_alloc(s, 1 << 20, &b));
  void *p = NULL;
  size_t n = 0;
  OK(dls_buffer_ptr(b, &p));
  OK(dls_buffer_size(b, &n));
  cr_assert_not_null(p);
  cr_assert_eq(n, 1u << 20);
  DLDevice got;
  OK(dls_buffer_device(b, &got));
  cr_assert_eq(got.device_type, d.device_type);
  dls_stream_t alloc_stream;
  OK(dls_buffer_stream(b, &alloc_stream));
  cr_assert_eq(alloc_stream.id, s.id);
  static uint8_t src[1 << 20], dst[1 << 20];
  for (size_t i = 0; i < sizeof src; i++)
    src[i] = (uint8_t)(i * 7);
  OK(dls_buffer_write(b, 0, src, sizeof src, s));
  OK(dls_buffer_read(b, 0, dst, sizeof dst, s));
  OK(dls_stream_synchronize(s));
  cr_assert_eq(memcmp(src, dst, sizeof src), 0);
  OK(dls_buffer_free(b));
  FAILS(dls_buffer_ptr(b, &p), DLS_ERR_INVALID_HANDLE, "buffer handle is stale");
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(buffer, zero_size_is_valid_and_null) {
  DLDevice d = dlst_device(*backend_type);
  dls_buffer_t b;
  OK(dls_buffer_alloc(dls_stream_default(d, DLS_STREAM_LEGACY), 0, &b));
  void *p = (void *)1;
  OK(dls_buffer_ptr(b, &p));
  cr_assert_null(p);
  OK(dls_buffer_free(b));
}

BACKEND_TEST(buffer, copies_out_of_range_are_rejected) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s = dls_stream_default(d, DLS_STREAM_LEGACY);
  dls_buffer_t b;
  char host[64];
  OK(dls_buffer_alloc(s, 16, &b));
  FAILS(dls_buffer_write(b, 8, host, 9, s), DLS_ERR_INVALID_ARGUMENT, "offset=8, size=9): out of the buffer's 16");
  FAILS(dls_buffer_read(b, 17, host, 0, s), DLS_ERR_INVALID_ARGUMENT, "offset=17");
  FAILS(dls_buffer_read(b, 0, NULL, 4, s), DLS_ERR_INVALID_ARGUMENT, "dst=NULL");
  FAILS(dls_buffer_write(b, SIZE_MAX, host, 2, s), DLS_ERR_INVALID_ARGUMENT, "out of the buffer");
  OK(dls_buffer_free(b));
}

Test(buffer, null_arguments_are_rejected) {
  dls_stream_t s = dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY);
  FAILS(dls_buffer_alloc(s, 4, NULL), DLS_ERR_INVALID_ARGUMENT, "out_buffer=NULL");
  dls_buffer_t b;
  FAILS(dls_buffer_borrow(dls_cpu(), NULL, 4, s, NULL, NULL, &b), DLS_ERR_INVALID_ARGUMENT,
        "NULL memory of non-zero size");
  FAILS(dls_memcpy(s, NULL, "x", 1), DLS_ERR_INVALID_ARGUMENT, "NULL pointer");
  OK(dls_memcpy(s, NULL, NULL, 0));
  dls_buffer_t z = {0};
  OK(dls_buffer_free(z));
  FAILS(dls_buffer_record_use(z, s, DLS_ACCESS_WRITE), DLS_ERR_INVALID_HANDLE, "handle is 0");
}

static void count_release(void *p) { __atomic_fetch_add((int *)p, 1, __ATOMIC_ACQ_REL); }

/* GPU memory: the producer frees in stream order, so the release runs at once.
 * Host memory (CPU device): its owner frees at once, so the release also
 * waits for work queued on the producer stream. */
BACKEND_TEST(buffer, borrowed_release_runs_once_when_only_the_producer_used_it) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t s;
  dls_buffer_t b, own;
  int released = 0;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_buffer_alloc(s, 64, &own));
  void *p;
  OK(dls_buffer_ptr(own, &p));
  OK(dls_buffer_borrow(d, p, 64, s, count_release, &released, &b));
  int32_t v = 3;
  OK(dls_fill(s, dls_arg_buffer(b), 16, 4, &v));
  OK(dls_buffer_free(b));
  if (d.device_type != kDLCPU)
    cr_assert_eq(released, 1, "GPU producers free in stream order: release at once");
  OK(dls_stream_synchronize(s));
  cr_assert_eq(released, 1);
  OK(dls_buffer_free(own));
  OK(dls_stream_destroy(s));
}

Test(buffer, cpu_borrowed_release_waits_for_work_queued_on_the_producer) {
  dlst_need_async(dls_cpu());
  dls_stream_t s;
  dls_buffer_t b;
  dls_latch_t l;
  int released = 0;
  static int32_t host[16];
  OK(dls_stream_create(dls_cpu(), NULL, &s));
  OK(dls_latch_create(dls_cpu(), &l));
  OK(dls_buffer_borrow(dls_cpu(), host, sizeof host, s, count_release, &released, &b));
  OK(dls_latch_wait(l, s, DLST_LATCH_TIMEOUT_NS));
  int32_t v = 5;
  OK(dls_fill(s, dls_arg_buffer(b), 16, 4, &v));
  OK(dls_buffer_free(b));
  cr_assert_eq(released, 0, "the owner would free host memory that a queued fill still writes");
  OK(dls_latch_open(l));
  OK(dls_stream_synchronize(s));
  cr_assert_eq(released, 1);
  cr_assert_eq(host[15], 5);
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(buffer, borrow_on_a_stream_of_another_device_is_rejected) {
  DLDevice d = dlst_device(*backend_type);
  if (dls_backend_probe(kDLCUDA) != DLS_OK)
    cr_skip_test("needs two backends");
  DLDevice other = d.device_type == kDLCPU ? dls_cuda(0) : dls_cpu();
  int x;
  dls_buffer_t b;
  FAILS(dls_buffer_borrow(d, &x, 4, dls_stream_default(other, DLS_STREAM_LEGACY), NULL, NULL, &b),
        DLS_ERR_INVALID_DEVICE, "producer stream is on");
}

/* The deallocation rule. Stream b reads `buf` (allocated on a) behind a
 * latch; `buf` is freed, a new buffer is allocated on a (which may reuse the
 * memory) and overwritten with 9. Returns what b read: 7 if the free waited
 * for b, 9 if the memory was reused under b's feet. */
static int32_t run_free_while_used(DLDevice d, bool track_use, bool *reused) {
  enum { N = 1024 };
  dls_stream_t a, b;
  dls_buffer_t buf, buf2, out;
  dls_latch_t l;
  int32_t seven = 7, nine = 9;
  static int32_t host[N];
  OK(dls_stream_create(d, NULL, &a));
  OK(dls_stream_create(d, NULL, &b));
  OK(dls_latch_create(d, &l));
  OK(dls_buffer_alloc(a, N * 4, &buf));
  OK(dls_buffer_alloc(b, N * 4, &out));
  OK(dls_fill(a, dls_arg_buffer(buf), N, 4, &seven));
  OK(dls_stream_synchronize(a));
  void *bufp;
  OK(dls_buffer_ptr(buf, &bufp));
  dls_copy_desc_t desc = {.ndim = 1, .elem_size = 4, .shape = {N}, .dst_strides = {1}, .src_strides = {1}};
  OK(dls_latch_wait(l, b, DLST_LATCH_TIMEOUT_NS));
  OK(dls_copy_strided(b, dls_arg_buffer(out), track_use ? dls_arg_buffer(buf) : dls_arg_ptr(bufp), &desc));
  OK(dls_buffer_free(buf));
  OK(dls_buffer_alloc(a, N * 4, &buf2));
  void *p2;
  OK(dls_buffer_ptr(buf2, &p2));
  *reused = p2 == bufp;
  OK(dls_fill(a, dls_arg_buffer(buf2), N, 4, &nine));
  if (!track_use) {
    OK(dls_stream_synchronize(a)); /* a does not wait for b: it overwrites now */
  } else {
    int idle = 1;
    OK(dls_stream_query(a, &idle));
    cr_assert_eq(idle, 0, "a must wait for b's use before it frees");
  }
  OK(dls_latch_open(l));
  OK(dls_stream_synchronize(b));
  OK(dls_stream_synchronize(a));
  OK(dls_buffer_read(out, 0, host, sizeof host, b));
  OK(dls_stream_synchronize(b));
  int32_t first = host[0];
  for (int i = 1; i < N; i++)
    cr_assert_eq(host[i], first, "element %d differs", i);
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
  OK(dls_buffer_free(buf2));
  OK(dls_buffer_free(out));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(b));
  return first;
}

BACKEND_TEST(buffer, buffer_used_on_a_second_stream_is_not_reused_until_it_passes) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_pooling();
  bool reused = false;
  cr_assert_eq(run_free_while_used(d, true, &reused), 7, "the memory was reused while b still read it");
  cr_log_info("memory handed out again on a: %s", reused ? "yes" : "no");
}

BACKEND_TEST(buffer, negative_control_untracked_use_is_overwritten) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_pooling();
  bool reused = false;
  int32_t got = run_free_while_used(d, false, &reused);
  if (!reused)
    cr_skip_test("the allocator did not hand the freed memory out again; nothing to observe");
  cr_assert_eq(got, 9, "untracked: a reused the memory before b read it, so the check above can fail");
}

Test(buffer, cpu_memory_freed_on_a_stream_is_reused_after_it_passes) {
  dlst_need_async(dls_cpu());
  dlst_need_pooling();
  dls_stream_t a, b;
  dls_buffer_t buf, again;
  OK(dls_stream_create(dls_cpu(), NULL, &a));
  OK(dls_stream_create(dls_cpu(), NULL, &b));
  OK(dls_buffer_alloc(a, 4096, &buf));
  void *p, *q;
  OK(dls_buffer_ptr(buf, &p));
  OK(dls_buffer_free(buf));
  OK(dls_stream_synchronize(a)); /* the free has run: the block is back in the shared pool */
  OK(dls_buffer_alloc(b, 4096, &again));
  OK(dls_buffer_ptr(again, &q));
  cr_assert_eq(p, q, "the pool hands the block out again on another stream once a passed the free");
  OK(dls_buffer_free(again));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(b));
}

BACKEND_TEST(buffer, free_survives_the_destruction_of_its_streams) {
  DLDevice d = dlst_device(*backend_type);
  dls_stream_t a, b;
  dls_buffer_t buf;
  OK(dls_stream_create(d, NULL, &a));
  OK(dls_stream_create(d, NULL, &b));
  OK(dls_buffer_alloc(a, 256, &buf));
  OK(dls_buffer_record_use(buf, b, DLS_ACCESS_WRITE));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(b));
  dls_stream_t gone;
  FAILS(dls_buffer_stream(buf, &gone), DLS_ERR_STATE, "allocation stream was destroyed");
  OK(dls_buffer_free(buf)); /* a's native stream was kept alive for this */
}

BACKEND_TEST(buffer, record_use_checks_the_device) {
  DLDevice d = dlst_device(*backend_type);
  if (dls_backend_probe(kDLCUDA) != DLS_OK)
    cr_skip_test("needs two backends");
  DLDevice other = d.device_type == kDLCPU ? dls_cuda(0) : dls_cpu();
  dls_buffer_t b;
  OK(dls_buffer_alloc(dls_stream_default(d, DLS_STREAM_LEGACY), 8, &b));
  FAILS(dls_buffer_record_use(b, dls_stream_default(other, DLS_STREAM_LEGACY), DLS_ACCESS_WRITE), DLS_ERR_INVALID_DEVICE,
        "buffer is on");
  OK(dls_buffer_free(b));
}
