/* SPDX-License-Identifier: Apache-2.0 */
/* The allocation stream as a party of the hazard rule once other streams
 * use its memory: a crossing from it waits on its mark, recorded after its
 * latest use, and not on one recorded only when another stream crosses;
 * an export to it lets it write unseen, so every other use waits for all
 * it queued while the export is held; another handle of the same stream is
 * the same party. Stream C allocates, A and B use.
 * C's part is held behind a latch; the later use must wait for it. Each
 * runs again with DLSTREAM_TEST_NO_HAZARDS=1 (the rule off), which must
 * give the wrong answer: the test can fail. */
#include <sched.h>
#include <stdlib.h>

#include "common.h"

TestSuite(alloc_party, .fini = dlst_fini);

enum { N = 256 };

typedef struct scene {
  DLDevice d;
  dls_stream_t a, b, c;
  dls_tensor_t t; /* allocated on c */
  dls_buffer_t out;
  dls_latch_t latch;
} scene;

static void fill(dls_stream_t s, dls_arg_t dst, float v) { OK(dls_fill(s, dst, N, 4, &v)); }

static void copy(dls_stream_t s, dls_arg_t dst, dls_arg_t src) {
  dls_copy_desc_t d = {.ndim = 1, .elem_size = 4, .shape = {N}, .dst_strides = {1}, .src_strides = {1}};
  OK(dls_copy_strided(s, dst, src, &d));
}

static scene open_scene(DLDeviceType type) {
  scene sc;
  sc.d = dlst_device(type);
  dlst_need_async(sc.d);
  dlst_need_concurrency(sc.d);
  OK(dls_stream_create(sc.d, NULL, &sc.a));
  OK(dls_stream_create(sc.d, NULL, &sc.b));
  OK(dls_stream_create(sc.d, NULL, &sc.c));
  int64_t shape[1] = {N};
  OK(dls_tensor_empty(sc.c, 1, shape, (DLDataType){kDLFloat, 32, 1}, &sc.t));
  OK(dls_buffer_alloc(sc.a, N * sizeof(float), &sc.out));
  fill(sc.c, dls_arg_tensor(sc.t), 1.0f);
  fill(sc.a, dls_arg_buffer(sc.out), 0.0f);
  OK(dls_stream_synchronize(sc.c));
  OK(dls_stream_synchronize(sc.a));
  OK(dls_latch_create(sc.d, &sc.latch));
  return sc;
}

/* A reads the tensor into `out`: with the rule, it must still be pending behind C's held write. */
static float read_after_held_write(scene *sc, bool rule) {
  copy(sc->a, dls_arg_buffer(sc->out), dls_arg_tensor_in(sc->t));
  int idle = 0;
  for (int i = 0; i < 2000 && !idle; i++) {
    sched_yield();
    OK(dls_stream_query(sc->a, &idle));
  }
  if (!rule)
    OK(dls_stream_synchronize(sc->a));
  else
    cr_assert_eq(idle, 0, "the read did not wait behind the allocation stream's write held by the latch");
  OK(dls_latch_open(sc->latch));
  OK(dls_stream_synchronize(sc->c));
  OK(dls_stream_synchronize(sc->a));
  float v[N];
  OK(dls_buffer_read(sc->out, 0, v, sizeof v, sc->a));
  OK(dls_stream_synchronize(sc->a));
  return v[N - 1];
}

static void close_scene(scene *sc) {
  OK(dls_latch_destroy(sc->latch));
  OK(dls_tensor_release(sc->t));
  OK(dls_buffer_free(sc->out));
  OK(dls_stream_destroy(sc->a));
  OK(dls_stream_destroy(sc->b));
  OK(dls_stream_destroy(sc->c));
}

/* B reads first (the allocation stream is no longer the only party); then C writes 7, held; then A reads. */
static float write_after_others_used(DLDeviceType type, bool rule) {
  scene sc = open_scene(type);
  copy(sc.b, dls_arg_buffer(sc.out), dls_arg_tensor_in(sc.t));
  OK(dls_stream_synchronize(sc.b));
  OK(dls_latch_wait(sc.latch, sc.c, 10ull * 1000 * 1000 * 1000));
  fill(sc.c, dls_arg_tensor(sc.t), 7.0f);
  float got = read_after_held_write(&sc, rule);
  close_scene(&sc);
  return got;
}

/* The tensor is exported to C (its allocation stream) as consumer; B writes 9 (waiting for C), then C writes 7
 * through the export's raw pointer, which dlstream does not see, held; A's read must wait for C, not only for B,
 * the last writer dlstream saw. */
static float write_by_the_consumer_after_another_wrote(DLDeviceType type, bool rule) {
  scene sc = open_scene(type);
  DLManagedTensorVersioned *export;
  OK(dls_tensor_export_versioned(sc.t, sc.c, &export));
  fill(sc.b, dls_arg_tensor(sc.t), 9.0f);
  OK(dls_stream_synchronize(sc.b));
  OK(dls_latch_wait(sc.latch, sc.c, 10ull * 1000 * 1000 * 1000));
  fill(sc.c, dls_arg_ptr(export->dl_tensor.data), 7.0f);
  float got = read_after_held_write(&sc, rule);
  export->deleter(export);
  close_scene(&sc);
  return got;
}

/* The allocation stream's write comes through another handle of the same stream (a second wrap of its native
 * stream, as two frameworks' objects of one stream are): it is still the allocation stream's use, marked as
 * such, and A's read waits for it. */
static float write_through_another_handle(DLDeviceType type, bool rule) {
  scene sc = open_scene(type);
  void *native;
  dls_stream_t c2;
  OK(dls_stream_native(sc.c, &native));
  OK(dls_stream_wrap(sc.d, native, &c2));
  copy(sc.b, dls_arg_buffer(sc.out), dls_arg_tensor_in(sc.t));
  OK(dls_stream_synchronize(sc.b));
  OK(dls_latch_wait(sc.latch, c2, 10ull * 1000 * 1000 * 1000));
  fill(c2, dls_arg_tensor(sc.t), 7.0f);
  float got = read_after_held_write(&sc, rule);
  OK(dls_stream_destroy(c2));
  close_scene(&sc);
  return got;
}

/* Runs `body` with the rule, then without it (the negative control). */
static void check(DLDeviceType type, float (*body)(DLDeviceType, bool), float right, float wrong) {
  cr_assert_float_eq(body(type, true), right, 0);
#if !defined(__SANITIZE_THREAD__)
  setenv("DLSTREAM_TEST_NO_HAZARDS", "1", 1);
  OK(dls_shutdown());
  float off = body(type, false);
  unsetenv("DLSTREAM_TEST_NO_HAZARDS");
  OK(dls_shutdown());
  cr_assert_float_eq(off, wrong, 0, "negative control (rule off): got %g", off);
#endif
}

BACKEND_TEST(alloc_party, a_read_waits_for_the_allocation_streams_write_after_others_used_it) {
  check(*backend_type, write_after_others_used, 7.0f, 1.0f);
}

BACKEND_TEST(alloc_party, a_read_waits_for_a_consumer_that_is_the_allocation_stream) {
  check(*backend_type, write_by_the_consumer_after_another_wrote, 7.0f, 9.0f);
}

BACKEND_TEST(alloc_party, a_read_waits_for_a_write_through_another_handle_of_the_allocation_stream) {
  check(*backend_type, write_through_another_handle, 7.0f, 1.0f);
}
