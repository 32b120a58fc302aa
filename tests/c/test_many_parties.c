/* SPDX-License-Identifier: Apache-2.0 */
/* A buffer used by more streams than the hazard state has bits for (62
 * entries and the allocation stream, access.c): the later streams share one
 * bit, and the rule still orders them, conservatively. OTHERS streams read
 * the tensor first (one use entry each); then a stream past the 62nd is
 * held behind a latch and its use must be waited for: a write by it before
 * a read (RAW), and a read by it before a write (WAR). Each runs again with
 * DLSTREAM_TEST_NO_HAZARDS=1 (the rule off), which must give the wrong
 * answer: the test can fail. */
#include <sched.h>
#include <stdlib.h>

#include "common.h"

TestSuite(many_parties, .fini = dlst_fini);

enum { N = 256, OTHERS = 70 };

typedef struct scene {
  DLDevice d;
  dls_stream_t owner;            /* allocates the tensor */
  dls_stream_t s[OTHERS];        /* each reads it once: entries 0 .. OTHERS-1 */
  dls_stream_t late;             /* a new party past them */
  dls_tensor_t t;
  dls_buffer_t out;              /* on `late` */
  dls_latch_t latch;
} scene;

static void fill(dls_stream_t s, dls_arg_t dst, float v) { OK(dls_fill(s, dst, N, 4, &v)); }

static void copy(dls_stream_t s, dls_arg_t dst, dls_arg_t src) {
  dls_copy_desc_t d = {.ndim = 1, .elem_size = 4, .shape = {N}, .dst_strides = {1}, .src_strides = {1}};
  OK(dls_copy_strided(s, dst, src, &d));
}

static void open_scene(scene *sc, DLDeviceType type) {
  sc->d = dlst_device(type);
  dlst_need_async(sc->d);
  dlst_need_concurrency(sc->d);
  OK(dls_stream_create(sc->d, NULL, &sc->owner));
  OK(dls_stream_create(sc->d, NULL, &sc->late));
  int64_t shape[1] = {N};
  OK(dls_tensor_empty(sc->owner, 1, shape, (DLDataType){kDLFloat, 32, 1}, &sc->t));
  OK(dls_buffer_alloc(sc->late, N * sizeof(float), &sc->out));
  fill(sc->owner, dls_arg_tensor(sc->t), 1.0f);
  fill(sc->late, dls_arg_buffer(sc->out), 0.0f);
  for (int i = 0; i < OTHERS; i++) {
    OK(dls_stream_create(sc->d, NULL, &sc->s[i]));
    dls_buffer_t scratch;
    OK(dls_buffer_alloc(sc->s[i], N * sizeof(float), &scratch));
    copy(sc->s[i], dls_arg_buffer(scratch), dls_arg_tensor_in(sc->t));
    OK(dls_buffer_free(scratch));
    OK(dls_stream_synchronize(sc->s[i]));
  }
  OK(dls_stream_synchronize(sc->owner));
  OK(dls_stream_synchronize(sc->late));
  OK(dls_latch_create(sc->d, &sc->latch));
}

static void close_scene(scene *sc) {
  OK(dls_latch_destroy(sc->latch));
  OK(dls_tensor_release(sc->t));
  OK(dls_buffer_free(sc->out));
  for (int i = 0; i < OTHERS; i++)
    OK(dls_stream_destroy(sc->s[i]));
  OK(dls_stream_destroy(sc->owner));
  OK(dls_stream_destroy(sc->late));
}

/* Whether `s` is still pending after a while of yielding (it should be, behind the latch). */
static bool pending(dls_stream_t s) {
  int idle = 0;
  for (int i = 0; i < 2000 && !idle; i++) {
    sched_yield();
    OK(dls_stream_query(s, &idle));
  }
  return !idle;
}

/* RAW: the last of the readers (past the 62nd entry) writes 7, held; `late` reads it into `out`. */
static float read_after_a_late_partys_write(DLDeviceType type, bool rule) {
  scene sc;
  open_scene(&sc, type);
  dls_stream_t w = sc.s[OTHERS - 1];
  OK(dls_latch_wait(sc.latch, w, 10ull * 1000 * 1000 * 1000));
  fill(w, dls_arg_tensor(sc.t), 7.0f);
  copy(sc.late, dls_arg_buffer(sc.out), dls_arg_tensor_in(sc.t));
  if (rule)
    cr_assert(pending(sc.late), "the read did not wait behind the held write of a party past the 62nd");
  else
    OK(dls_stream_synchronize(sc.late));
  OK(dls_latch_open(sc.latch));
  OK(dls_stream_synchronize(w));
  float v[N];
  OK(dls_buffer_read(sc.out, 0, v, sizeof v, sc.late));
  OK(dls_stream_synchronize(sc.late));
  close_scene(&sc);
  return v[N - 1];
}

/* WAR: the last of the readers reads the tensor into `out` again, held; then the owner writes 7 over it. */
static float write_after_a_late_partys_read(DLDeviceType type, bool rule) {
  scene sc;
  open_scene(&sc, type);
  dls_stream_t r = sc.s[OTHERS - 1];
  OK(dls_latch_wait(sc.latch, r, 10ull * 1000 * 1000 * 1000));
  copy(r, dls_arg_buffer(sc.out), dls_arg_tensor_in(sc.t));
  fill(sc.owner, dls_arg_tensor(sc.t), 7.0f);
  if (rule)
    cr_assert(pending(sc.owner), "the write did not wait behind the held read of a party past the 62nd");
  else
    OK(dls_stream_synchronize(sc.owner));
  OK(dls_latch_open(sc.latch));
  OK(dls_stream_synchronize(r));
  OK(dls_stream_synchronize(sc.owner));
  float v[N];
  OK(dls_buffer_read(sc.out, 0, v, sizeof v, sc.late));
  OK(dls_stream_synchronize(sc.late));
  close_scene(&sc);
  return v[N - 1];
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

BACKEND_TEST(many_parties, a_read_waits_for_the_write_of_a_party_past_the_62nd) {
  check(*backend_type, read_after_a_late_partys_write, 7.0f, 1.0f);
}

BACKEND_TEST(many_parties, a_write_waits_for_the_read_of_a_party_past_the_62nd) {
  check(*backend_type, write_after_a_late_partys_read, 1.0f, 7.0f);
}
