/* SPDX-License-Identifier: Apache-2.0 */
/* The caching allocator (plugin/core/cache.c): a block freed on a stream comes back to that stream without a
 * driver call; another stream gets it only after waiting for the block's stream (a latch-held reader, with the
 * test-only switch DLSTREAM_TEST_CACHE_NO_WAIT=1 as the negative control); captures never see a cached block;
 * trims, the limit, out-of-memory retries and streams that go away give the memory back. */
#include <stdlib.h>

#include "common.h"
#ifdef DLS_FAULT_INJECTION
#include "base/fault.h"
#endif

TestSuite(cache, .fini = dlst_fini);

enum { N = 4096 }; /* floats: 16 KiB, a size class of its own */
#define MiB ((size_t)1 << 20)

static void *ptr_of(dls_buffer_t b) {
  void *p = NULL;
  OK(dls_buffer_ptr(b, &p));
  return p;
}

static size_t cached(DLDevice d) {
  size_t n = 0;
  OK(dls_device_cached_bytes(d, &n));
  return n;
}

/* Allocations the backend made (`freed`: released) so far: fault-injection builds count them; elsewhere 0. */
static uint64_t driver_count(bool freed) {
#ifdef DLS_FAULT_INJECTION
  uint64_t made = 0, gone = 0;
  dls_fault_objects(DLS_FAULT_ALLOCATION, &made, &gone);
  return freed ? gone : made;
#else
  (void)freed;
  return 0;
#endif
}
#define driver_allocs() driver_count(false)
#define driver_frees() driver_count(true)

static void need_cache(void) {
  dlst_need_pooling(); /* DLSTREAM_DEBUG_ALLOC=1 turns the cache off */
  const char *v = getenv("DLSTREAM_CACHE_LIMIT");
  if (v != NULL && v[0] == '0' && v[1] == '\0')
    cr_skip_test("DLSTREAM_CACHE_LIMIT=0 turns the cache off");
}

BACKEND_TEST(cache, a_block_freed_on_a_stream_comes_back_to_it_without_a_driver_call) {
  DLDevice d = dlst_device(*backend_type);
  need_cache();
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t a, b;
  OK(dls_buffer_alloc(s, MiB, &a));
  void *p = ptr_of(a);
  OK(dls_buffer_free(a));
  cr_assert_eq(cached(d), MiB, "the free kept the block");
  uint64_t made = driver_allocs();
  OK(dls_buffer_alloc(s, MiB, &b));
  cr_assert_eq(ptr_of(b), p, "the allocation took the block freed on its stream");
  cr_assert_eq(driver_allocs(), made, "no driver allocation");
  cr_assert_eq(cached(d), 0);
  OK(dls_buffer_free(b));
  OK(dls_stream_destroy(s));
  cr_assert_eq(cached(d), 0, "the stream's end gave its blocks back");
}

BACKEND_TEST(cache, sizes_of_one_class_share_blocks_and_others_do_not) {
  DLDevice d = dlst_device(*backend_type);
  need_cache();
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t a, b, c;
  OK(dls_buffer_alloc(s, 1000, &a)); /* class of 1024 bytes */
  void *p = ptr_of(a);
  OK(dls_buffer_free(a));
  cr_assert_eq(cached(d), 1024);
  OK(dls_buffer_alloc(s, 1025, &c)); /* the next class: not that block */
  cr_assert_neq(ptr_of(c), p);
  OK(dls_buffer_alloc(s, 1024, &b));
  cr_assert_eq(ptr_of(b), p, "1000 and 1024 bytes are one class");
  size_t size = 0;
  OK(dls_buffer_size(b, &size));
  cr_assert_eq(size, 1024, "the buffer's size is the one asked for");
  OK(dls_buffer_free(b));
  OK(dls_buffer_free(c));
  OK(dls_stream_destroy(s));
}

/* The handover. Stream a allocates x and writes 7; stream r reads x into `out` behind a latch; x is freed (a waits
 * for r's read, and x's block goes to a's cache); stream b allocates the same size, which takes x's block, and
 * writes 9 into it. With the wait, b's write runs after a's wait, which is after r's read: r reads 7. Without it
 * (DLSTREAM_TEST_CACHE_NO_WAIT=1), b writes 9 before the latch opens, and r reads 9. Returns what r read. */
static float handover_under_a_held_reader(DLDevice d, bool *out_same_block) {
  dls_stream_t a, r, b;
  dls_buffer_t x, out, y;
  dls_latch_t l;
  float seven = 7.0f, nine = 9.0f;
  OK(dls_stream_create(d, NULL, &a));
  OK(dls_stream_create(d, NULL, &r));
  OK(dls_stream_create(d, NULL, &b));
  OK(dls_latch_create(d, &l));
  OK(dls_buffer_alloc(a, N * sizeof(float), &x));
  OK(dls_buffer_alloc(r, N * sizeof(float), &out));
  OK(dls_fill(a, dls_arg_buffer(x), N, 4, &seven));
  OK(dls_stream_synchronize(a));
  void *px = ptr_of(x);
  OK(dls_latch_wait(l, r, DLST_LATCH_TIMEOUT_NS));
  OK(dls_buffer_copy(r, out, 0, x, 0, N * sizeof(float))); /* held: r reads x only once the latch opens */
  OK(dls_buffer_free(x));
  OK(dls_buffer_alloc(b, N * sizeof(float), &y));
  *out_same_block = ptr_of(y) == px;
  OK(dls_fill(b, dls_arg_buffer(y), N, 4, &nine));
  int idle = 1;
  OK(dls_stream_query(b, &idle));
  if (getenv("DLSTREAM_TEST_CACHE_NO_WAIT") != NULL)
    OK(dls_stream_synchronize(b)); /* no wait: b writes now, before r reads */
  else if (*out_same_block)
    cr_assert_eq(idle, 0, "b's write must wait behind a's wait for the held reader");
  OK(dls_latch_open(l));
  float host[N];
  OK(dls_buffer_read(out, 0, host, sizeof host, r));
  OK(dls_stream_synchronize(r));
  OK(dls_stream_synchronize(b));
  for (int i = 1; i < N; i++)
    cr_assert_eq(host[i], host[0], "element %d differs", i);
  OK(dls_latch_status(l));
  OK(dls_latch_destroy(l));
  OK(dls_buffer_free(y));
  OK(dls_buffer_free(out));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(r));
  OK(dls_stream_destroy(b));
  return host[0];
}

BACKEND_TEST(cache, a_block_goes_to_another_stream_only_after_its_wait) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  need_cache();
  bool same = false;
  float got = handover_under_a_held_reader(d, &same);
  cr_assert(same, "b did not get the block freed on a: the handover was not tested");
  cr_assert_eq(got, 7.0f, "the reader read %g: the block was written by b before the reader ran", got);
}

BACKEND_TEST(cache, negative_control_a_handover_without_the_wait_is_seen) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  need_cache();
  setenv("DLSTREAM_TEST_CACHE_NO_WAIT", "1", 1); /* read at the device's first allocation */
  bool same = false;
  float got = handover_under_a_held_reader(d, &same);
  unsetenv("DLSTREAM_TEST_CACHE_NO_WAIT");
  cr_assert(same, "b did not get the block freed on a");
  cr_assert_eq(got, 9.0f, "without the wait the reader must read b's 9, so the test above can fail");
}

BACKEND_TEST(cache, a_stream_capturing_neither_hands_over_nor_takes_cached_blocks) {
  DLDevice d = dlst_device(*backend_type);
  need_cache();
  dls_stream_t a, b;
  OK(dls_stream_create(d, NULL, &a));
  OK(dls_stream_create(d, NULL, &b));
  dls_buffer_t x, in_capture, y, z;
  float one = 1.0f;
  OK(dls_buffer_alloc(a, N * sizeof(float), &x));
  OK(dls_fill(a, dls_arg_buffer(x), N, 4, &one)); /* loads the built-in before the capture */
  OK(dls_stream_synchronize(a));
  void *px = ptr_of(x);
  OK(dls_stream_begin_capture(a, DLS_CAPTURE_RELAXED));
  OK(dls_buffer_free(x)); /* into a's cache, at once: nothing is queued, nothing waits */
  cr_assert_eq(dls_deferred_pending(), 0);
  cr_assert_eq(cached(d), N * sizeof(float));
  OK(dls_buffer_alloc(a, N * sizeof(float), &in_capture)); /* the graph's memory, not the cached block */
  cr_assert_neq(ptr_of(in_capture), px, "an allocation in a capture took a cached block");
  OK(dls_fill(a, dls_arg_buffer(in_capture), N, 4, &one));
  OK(dls_buffer_free(in_capture)); /* a graph free: never cached */
  OK(dls_buffer_alloc(b, N * sizeof(float), &y)); /* a captures: it hands nothing over */
  cr_assert_neq(ptr_of(y), px, "a capturing stream handed its block over");
  dls_graph_t g;
  OK(dls_stream_end_capture(a, &g));
  cr_assert_eq(cached(d), N * sizeof(float), "the capture's memory never entered the cache");
  OK(dls_graph_launch(g, a));
  OK(dls_buffer_alloc(a, N * sizeof(float), &z)); /* eager again: the block comes back */
  cr_assert_eq(ptr_of(z), px);
  OK(dls_graph_destroy(g));
  OK(dls_buffer_free(y));
  OK(dls_buffer_free(z));
  OK(dls_stream_synchronize(a));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(b));
}

BACKEND_TEST(cache, graph_outputs_never_enter_the_cache) {
  DLDevice d = dlst_device(*backend_type);
  need_cache();
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  float one = 1.0f;
  dls_buffer_t warm, out;
  OK(dls_buffer_alloc(s, 64, &warm));
  OK(dls_fill(s, dls_arg_buffer(warm), 16, 4, &one));
  OK(dls_buffer_free(warm));
  size_t before = cached(d);
  OK(dls_stream_begin_capture(s, DLS_CAPTURE_GLOBAL));
  OK(dls_buffer_alloc(s, N * sizeof(float), &out));
  OK(dls_fill(s, dls_arg_buffer(out), N, 4, &one));
  dls_graph_t g;
  OK(dls_stream_end_capture(s, &g));
  OK(dls_graph_launch(g, s));
  OK(dls_buffer_free(out)); /* the latest replay's output, freed after that replay */
  OK(dls_graph_destroy(g));
  OK(dls_stream_synchronize(s));
  dls_deferred_poll();
  cr_assert_eq(cached(d), before, "graph memory went into the cache");
  OK(dls_stream_destroy(s));
}

BACKEND_TEST(cache, trim_gives_every_block_back) {
  DLDevice d = dlst_device(*backend_type);
  need_cache();
  dls_stream_t s[2];
  dls_buffer_t b[6];
  size_t sizes[6] = {512, 4096, MiB, 512, 3 * MiB, 100};
  OK(dls_stream_create(d, NULL, &s[0]));
  OK(dls_stream_create(d, NULL, &s[1]));
  for (int i = 0; i < 6; i++)
    OK(dls_buffer_alloc(s[i % 2], sizes[i], &b[i]));
  for (int i = 0; i < 6; i++)
    OK(dls_buffer_free(b[i]));
  size_t want = 512 + 4096 + MiB + 512 + 3 * MiB + 512; /* 100 bytes: the 512-byte class */
  cr_assert_eq(cached(d), want);
  uint64_t freed = driver_frees();
  size_t bytes = 0;
  OK(dls_device_trim(d, &bytes));
  cr_assert_eq(bytes, want, "trim gave back %zu bytes of %zu", bytes, want);
  cr_assert_eq(cached(d), 0);
#ifdef DLS_FAULT_INJECTION
  cr_assert_eq(driver_frees(), freed + 6, "each block went back to the driver");
#else
  (void)freed;
#endif
  OK(dls_device_trim(d, NULL)); /* nothing left: fine */
  OK(dls_stream_destroy(s[0]));
  OK(dls_stream_destroy(s[1]));
}

BACKEND_TEST(cache, the_limit_bounds_what_stays_idle) {
  DLDevice d = dlst_device(*backend_type);
  need_cache();
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_device_set_cache_limit(d, MiB + 4096));
  dls_buffer_t a, b, c;
  OK(dls_buffer_alloc(s, MiB, &a));
  OK(dls_buffer_alloc(s, MiB, &b));
  OK(dls_buffer_alloc(s, 4096, &c));
  OK(dls_buffer_free(a));
  OK(dls_buffer_free(b)); /* over the limit: to the driver */
  OK(dls_buffer_free(c));
  cr_assert_eq(cached(d), MiB + 4096);
  OK(dls_device_set_cache_limit(d, 0)); /* lower than what it holds: trimmed; off from now */
  cr_assert_eq(cached(d), 0);
  OK(dls_buffer_alloc(s, MiB, &a));
  OK(dls_buffer_free(a));
  cr_assert_eq(cached(d), 0, "with the limit at 0 nothing is kept");
  OK(dls_device_set_cache_limit(d, MiB)); /* on again */
  OK(dls_buffer_alloc(s, MiB, &a)); /* this one is of its class again */
  OK(dls_buffer_free(a));
  cr_assert_eq(cached(d), MiB);
  OK(dls_stream_destroy(s));
}

Test(cache, the_environment_sets_the_limit) {
  need_cache();
  setenv("DLSTREAM_CACHE_LIMIT", "1M", 1);
  dls_stream_t s = dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY);
  dls_buffer_t a, b;
  OK(dls_buffer_alloc(s, 600 << 10, &a));
  OK(dls_buffer_alloc(s, 600 << 10, &b));
  OK(dls_buffer_free(a));
  OK(dls_buffer_free(b)); /* 640 KiB each: the second is over 1 MiB */
  unsetenv("DLSTREAM_CACHE_LIMIT");
  cr_assert_eq(cached(dls_cpu()), 640 << 10);
  OK(dls_device_trim(dls_cpu(), NULL));
}

Test(cache, a_limit_that_is_no_byte_count_is_an_error_naming_it) {
  dlst_need_pooling();
  setenv("DLSTREAM_CACHE_LIMIT", "lots", 1);
  dls_stream_t s = dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY);
  dls_buffer_t a = {0};
  dls_status_t st = dls_buffer_alloc(s, 64, &a);
  unsetenv("DLSTREAM_CACHE_LIMIT");
  cr_assert_eq(st, DLS_ERR_INVALID_ARGUMENT, "%s", dls_last_error());
  cr_assert(strstr(dls_last_error(), "dls_buffer_alloc") != NULL, "%s", dls_last_error());
  cr_assert(strstr(dls_last_error(), "DLSTREAM_CACHE_LIMIT=\"lots\"") != NULL, "%s", dls_last_error());
  cr_assert_eq(a.id, 0);
}

Test(cache, bad_arguments_are_refused) {
  FAILS(dls_device_cached_bytes(dls_cpu(), NULL), DLS_ERR_INVALID_ARGUMENT, "out_bytes=NULL");
  size_t n = 1;
  FAILS(dls_device_trim(dls_device(kDLCPU, 63), &n), DLS_ERR_INVALID_DEVICE, "dls_device_trim");
  cr_assert_eq(n, 0);
  FAILS(dls_device_set_cache_limit(dls_device((DLDeviceType)99, 0), 0), DLS_ERR_INVALID_DEVICE,
        "dls_device_set_cache_limit");
}

/* A GPU's per-thread default stream is a different stream on each thread: memory freed on it (or on a wrap of the
 * per-thread handle) must not come back to another thread's allocation on it without a wait, so it is not kept. */
BACKEND_TEST(cache, the_per_thread_default_stream_keeps_nothing) {
  DLDevice d = dlst_device(*backend_type);
  need_cache();
  if (d.device_type == kDLCPU)
    cr_skip_test("the CPU backend's per-thread default stream is its legacy one: one stream for every thread");
  dls_stream_t w;
  OK(dls_stream_wrap(d, (void *)(uintptr_t)DLS_STREAM_PER_THREAD, &w));
  dls_stream_t streams[2] = {dls_stream_default(d, DLS_STREAM_PER_THREAD), w};
  for (int i = 0; i < 2; i++) {
    dls_buffer_t b;
    OK(dls_buffer_alloc(streams[i], MiB, &b));
    OK(dls_buffer_free(b));
    cr_assert_eq(cached(d), 0, "memory freed on the per-thread default stream was kept (stream %d)", i);
  }
  OK(dls_stream_synchronize(streams[0]));
  OK(dls_stream_destroy(w));
}

/* A stream `own` of d and a wrap `w` of its native stream. */
static void own_and_wrap(DLDevice d, dls_stream_t *own, dls_stream_t *w) {
  OK(dls_stream_create(d, NULL, own));
  void *native = NULL;
  OK(dls_stream_native(*own, &native));
  OK(dls_stream_wrap(d, native, w));
}

BACKEND_TEST(cache, a_wrapped_stream_gives_its_blocks_back_when_its_handle_ends) {
  DLDevice d = dlst_device(*backend_type);
  need_cache();
  dls_stream_t own, w;
  own_and_wrap(d, &own, &w);
  dls_buffer_t a, kept;
  OK(dls_buffer_alloc(w, MiB, &a));
  OK(dls_buffer_alloc(w, 4096, &kept));
  OK(dls_buffer_free(a));
  cr_assert_eq(cached(d), MiB);
  OK(dls_stream_destroy(w)); /* the native need outlive the handle only */
  cr_assert_eq(cached(d), 0, "the wrap's blocks went back with its handle");
  OK(dls_buffer_free(kept)); /* freed on the wrap after its handle ended: to the driver */
  cr_assert_eq(cached(d), 0);
  OK(dls_stream_destroy(own));
}

/* A stream object released while its native captures cannot give its blocks back then: the cache keeps the object
 * until a trim after the capture. Here a wrap's blocks are cached, a capture is begun through the stream it wraps,
 * and the wrap's handle ends: its object's last reference goes while its native captures. */
BACKEND_TEST(cache, a_stream_released_while_capturing_is_kept_until_a_trim) {
  DLDevice d = dlst_device(*backend_type);
  need_cache();
  dls_stream_t own, w;
  own_and_wrap(d, &own, &w);
  dls_buffer_t a;
  OK(dls_buffer_alloc(w, MiB, &a));
  OK(dls_buffer_free(a)); /* into the wrap's cache */
  cr_assert_eq(cached(d), MiB);
  OK(dls_stream_begin_capture(own, DLS_CAPTURE_RELAXED));
  OK(dls_stream_destroy(w)); /* its native captures: the blocks stay, and the object with them */
  cr_assert_eq(cached(d), MiB, "blocks given back into a capture");
  size_t bytes = 1;
  OK(dls_device_trim(d, &bytes)); /* still capturing: nothing to give back */
  cr_assert_eq(bytes, 0);
  dls_graph_t g;
  OK(dls_stream_end_capture(own, &g));
  OK(dls_graph_destroy(g));
  OK(dls_device_trim(d, &bytes)); /* gives the blocks back and lets the object go (it holds own's maker) */
  cr_assert_eq(bytes, MiB);
  cr_assert_eq(cached(d), 0);
  OK(dls_stream_destroy(own));
}

#ifdef DLS_FAULT_INJECTION
BACKEND_TEST(cache, out_of_memory_gives_the_cache_back_and_tries_again) {
  DLDevice d = dlst_device(*backend_type);
  need_cache();
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t a, b;
  /* Finds the point of dls_buffer_alloc that is the backend's allocation (the points before it are the core's
   * own), each try from the same state: 1 MiB cached, and a 2 MiB allocation that no cached block serves. */
  uint64_t n = 0;
  dls_status_t st = DLS_ERR_INTERNAL;
  for (uint64_t k = 1; k < 64 && n == 0; k++) {
    OK(dls_device_trim(d, NULL));
    OK(dls_buffer_alloc(s, MiB, &a));
    OK(dls_buffer_free(a));
    dls_fault_arm(k, DLS_ERR_OUT_OF_MEMORY);
    st = dls_buffer_alloc(s, 2 * MiB, &b);
    bool hit = dls_fault_injected() > 0 && strcmp(dls_fault_last(), "mem_alloc") == 0;
    dls_fault_disarm();
    if (hit)
      n = k;
    else if (st == DLS_OK)
      OK(dls_buffer_free(b));
  }
  cr_assert_neq(n, 0, "no point of dls_buffer_alloc was the backend's allocation");
  cr_assert_eq(st, DLS_OK, "the second try did not succeed: %s", dls_last_error());
  cr_assert_eq(cached(d), 0, "the cache was given back before the second try");
  OK(dls_buffer_free(b));
  /* With nothing cached the failure stands. */
  OK(dls_device_trim(d, NULL));
  dls_fault_arm(n, DLS_ERR_OUT_OF_MEMORY);
  dls_buffer_t c = {0};
  st = dls_buffer_alloc(s, 2 * MiB + 4096, &c);
  dls_fault_disarm();
  cr_assert_eq(st, DLS_ERR_OUT_OF_MEMORY, "%s", dls_last_error());
  cr_assert_eq(c.id, 0);
  OK(dls_stream_destroy(s));
}
#endif
