/* SPDX-License-Identifier: Apache-2.0 */
/* Aliases: memory a buffer exported through DLPack and that comes back through an import (a tensor import, a view,
 * dls_buffer_borrow) joins the exported buffer's hazard state. What an alias is besides its ordering: a partial
 * overlap, the import's deleter, the original's lifetime, CPU devices, the registry after a release. The hazard
 * kinds across an alias, with their negative controls, are in test_hazard.c. */
#include <pthread.h>
#include <stdatomic.h>

#include "common.h"

TestSuite(alias, .fini = dlst_fini);

enum { N = 256 };

static DLDevice cpu_async(void) {
  DLDevice d = dlst_device(kDLCPU);
  dlst_need_async(d);
  return d;
}

/* Gives a stream that should be waiting a fair chance to run ahead if it is not (a bounded number of yields): a
 * broken rule then shows as a wrong value nearly always. A pass never depends on it. */
static void let_run(dls_stream_t s) {
  int idle = 0;
  for (int i = 0; i < 2000 && !idle; i++) {
    sched_yield();
    OK(dls_stream_query(s, &idle));
  }
}

/* Streams a and b of d, and a tensor of N floats allocated on a, set to v and exported to no stream (NumPy's way). */
typedef struct scene {
  dls_stream_t a, b;
  dls_tensor_t t;
  DLManagedTensorVersioned *m;
} scene;

static dls_tensor_t own_tensor(dls_stream_t s, float v);

static scene exported_scene(DLDevice d, float v) {
  scene sc;
  OK(dls_stream_create(d, NULL, &sc.a));
  OK(dls_stream_create(d, NULL, &sc.b));
  sc.t = own_tensor(sc.a, v);
  OK(dls_tensor_export_versioned(sc.t, (dls_stream_t){0}, &sc.m));
  return sc;
}

static dls_tensor_t own_tensor(dls_stream_t s, float v) {
  int64_t shape[1] = {N};
  dls_tensor_t t;
  OK(dls_tensor_empty(s, 1, shape, (DLDataType){kDLFloat, 32, 1}, &t));
  OK(dls_fill(s, dls_arg_tensor(t), N, 4, &v));
  return t;
}

/* Element `i` of what `src` holds, read on `s` through a copy (a tensor or a buffer). */
static float value_at(dls_stream_t s, dls_arg_t src, int i) {
  dls_buffer_t out;
  OK(dls_buffer_alloc(s, N * sizeof(float), &out));
  dls_copy_desc_t d = {.ndim = 1, .elem_size = 4, .shape = {N}, .dst_strides = {1}, .src_strides = {1}};
  OK(dls_copy_strided(s, dls_arg_buffer(out), src, &d));
  float v[N];
  OK(dls_buffer_read(out, 0, v, sizeof v, s));
  OK(dls_stream_synchronize(s));
  OK(dls_buffer_free(out));
  return v[i];
}

static dls_latch_t hold(DLDevice d, dls_stream_t s) {
  dls_latch_t l;
  OK(dls_latch_create(d, &l));
  OK(dls_latch_wait(l, s, DLST_LATCH_TIMEOUT_NS));
  return l;
}

/* B copies `src` into v (all N floats) while A is held by `l`; A's latch opens once B had its chance to run ahead
 * (or once B finished: `b_first`, the negative control's order). */
static void copy_while_held(dls_stream_t a, dls_stream_t b, dls_latch_t l, dls_arg_t src, bool b_first, float *v) {
  dls_buffer_t out;
  OK(dls_buffer_alloc(b, N * sizeof(float), &out));
  dls_copy_desc_t cd = {.ndim = 1, .elem_size = 4, .shape = {N}, .dst_strides = {1}, .src_strides = {1}};
  OK(dls_copy_strided(b, dls_arg_buffer(out), src, &cd));
  if (b_first)
    OK(dls_stream_synchronize(b));
  let_run(b);
  OK(dls_latch_open(l));
  OK(dls_stream_synchronize(a));
  OK(dls_latch_status(l));
  OK(dls_buffer_read(out, 0, v, N * sizeof(float), b));
  OK(dls_stream_synchronize(b));
  OK(dls_buffer_free(out));
  OK(dls_latch_destroy(l));
}

/* Host memory of 2N floats: a view of its first N floats is exported; a view of floats [N/2, 3N/2) only partly
 * overlaps it. A (held) writes 7 through the exported view, B copies the partial view: with the rule B waits and
 * sees 7 in its first half; with the rule off (the negative control) B runs first and sees the 1 it held. */
static float partial_overlap(bool rule) {
  DLDevice d = cpu_async();
  dls_stream_t a, b;
  OK(dls_stream_create(d, NULL, &a));
  OK(dls_stream_create(d, NULL, &b));
  float *host = malloc(2 * N * sizeof(float));
  for (int i = 0; i < 2 * N; i++)
    host[i] = 1.0f;
  int64_t shape[1] = {N};
  DLTensor first = {host, d, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  DLTensor middle = {host + N / 2, d, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  dls_tensor_t v1, part;
  OK(dls_tensor_view(&first, 0, a, &v1));
  DLManagedTensorVersioned *m;
  OK(dls_tensor_export_versioned(v1, (dls_stream_t){0}, &m));
  OK(dls_tensor_view(&middle, 0, b, &part)); /* bytes past the export's: an alias of the whole export */
  dls_latch_t l = hold(d, a);
  float seven = 7.0f, v[N];
  OK(dls_fill(a, dls_arg_tensor(v1), N, 4, &seven));
  /* N floats of the partial view: a built-in's bounds are the view's own bytes, not the export's. */
  copy_while_held(a, b, l, dls_arg_tensor_in(part), !rule, v);
  cr_assert_eq(v[N - 1], 1.0f, "past the export's bytes: %g", v[N - 1]);
  m->deleter(m);
  OK(dls_tensor_release(part));
  OK(dls_tensor_release(v1));
  OK(dls_stream_destroy(a));
  OK(dls_stream_destroy(b));
  dls_deferred_poll();
  OK(dls_device_synchronize(d));
  dls_deferred_poll();
  free(host);
  return v[0];
}

Test(alias, an_import_that_partly_overlaps_an_export_is_ordered_against_all_of_it) {
  cr_assert_eq(partial_overlap(true), 7.0f, "B read before A's write through the exported view");
#if !defined(__SANITIZE_THREAD__) /* the rule off races on purpose */
  setenv("DLSTREAM_TEST_NO_HAZARDS", "1", 1);
  OK(dls_shutdown());
  float off = partial_overlap(false);
  unsetenv("DLSTREAM_TEST_NO_HAZARDS");
  OK(dls_shutdown());
  cr_assert_eq(off, 1.0f, "negative control (rule off): B read %g, wanted 1", off);
#endif
}

static atomic_int g_deleted;

typedef struct wrapper {
  DLManagedTensorVersioned m;
  int64_t shape[1];
} wrapper;

static void count_deleter(DLManagedTensorVersioned *self) {
  atomic_fetch_add(&g_deleted, 1);
  free(self->manager_ctx);
}

/* Another producer's managed tensor over `data` (as NumPy hands out one over memory it got from dlstream). */
static DLManagedTensorVersioned *wrap(void *data, DLDevice d) {
  wrapper *w = calloc(1, sizeof *w);
  w->shape[0] = N;
  w->m.version = (DLPackVersion){1, 1};
  w->m.manager_ctx = w;
  w->m.deleter = count_deleter;
  w->m.dl_tensor = (DLTensor){data, d, 1, {kDLFloat, 32, 1}, w->shape, NULL, 0};
  return &w->m;
}

Test(alias, an_alias_runs_its_imports_deleter_once_after_its_uses_and_keeps_the_original_alive) {
  DLDevice d = cpu_async();
  scene sc = exported_scene(d, 2.0f);
  atomic_store(&g_deleted, 0);
  dls_tensor_t alias;
  OK(dls_tensor_import_versioned(wrap(sc.m->dl_tensor.data, d), sc.a, &alias));
  sc.m->deleter(sc.m);
  OK(dls_tensor_release(sc.t)); /* the alias holds the original's memory now */
  float three = 3.0f;
  OK(dls_fill(sc.a, dls_arg_tensor(alias), N, 4, &three));
  cr_assert_eq(value_at(sc.a, dls_arg_tensor_in(alias), N - 1), 3.0f);
  dls_latch_t l = hold(d, sc.b);
  float four = 4.0f;
  OK(dls_fill(sc.b, dls_arg_tensor(alias), N, 4, &four));
  OK(dls_tensor_release(alias));
  dls_deferred_poll();
  cr_assert_eq(atomic_load(&g_deleted), 0, "the import's deleter ran while b, which used the alias, is held");
  OK(dls_latch_open(l));
  OK(dls_stream_synchronize(sc.b));
  /* ... and for what its producer a had queued at the release (b's use of the alias queued a record there): a may
   * lag behind b (DLSTREAM_CPU_JITTER=200 shows it). */
  OK(dls_stream_synchronize(sc.a));
  OK(dls_latch_status(l));
  dls_deferred_poll();
  cr_assert_eq(atomic_load(&g_deleted), 1, "the import's deleter ran %d times", atomic_load(&g_deleted));
  OK(dls_latch_destroy(l));
  OK(dls_stream_destroy(sc.a));
  OK(dls_stream_destroy(sc.b));
}

Test(alias, a_view_of_an_export_shares_the_original_and_is_ordered_after_its_pending_write) {
  DLDevice d = cpu_async();
  scene sc = exported_scene(d, 1.0f);
  dls_latch_t l = hold(d, sc.a);
  float seven = 7.0f, v[N];
  OK(dls_fill(sc.a, dls_arg_tensor(sc.t), N, 4, &seven));
  dls_tensor_t view; /* produced on b, which knows nothing of a: the alias still follows a's write */
  OK(dls_tensor_view(&sc.m->dl_tensor, DLS_TENSOR_READ_ONLY, sc.b, &view));
  copy_while_held(sc.a, sc.b, l, dls_arg_tensor_in(view), false, v);
  cr_assert_eq(v[0], 7.0f, "the view read %g before the original's write", v[0]);
  sc.m->deleter(sc.m);
  OK(dls_tensor_release(view));
  OK(dls_tensor_release(sc.t));
  OK(dls_stream_destroy(sc.a));
  OK(dls_stream_destroy(sc.b));
}

Test(alias, memory_of_a_released_buffer_is_no_alias) {
  DLDevice d = dlst_device(kDLCPU);
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_tensor_t t = own_tensor(s, 1.0f);
  DLManagedTensorVersioned *m;
  OK(dls_tensor_export_versioned(t, (dls_stream_t){0}, &m));
  m->deleter(m);
  OK(dls_tensor_release(t));
  OK(dls_stream_synchronize(s));
  dls_deferred_poll();
  /* The registry let go of t with its memory: a new buffer (often at the same address) borrowed again is looked
   * up, and AddressSanitizer sees any touch of t's record. */
  dls_buffer_t u, borrowed;
  OK(dls_buffer_alloc(s, N * sizeof(float), &u));
  void *p;
  OK(dls_buffer_ptr(u, &p));
  OK(dls_buffer_borrow(d, p, N * sizeof(float), s, NULL, NULL, &borrowed));
  float two = 2.0f;
  OK(dls_fill(s, dls_arg_buffer(borrowed), N, 4, &two));
  cr_assert_eq(value_at(s, dls_arg_buffer_in(u), 0), 2.0f);
  OK(dls_buffer_free(borrowed));
  OK(dls_buffer_free(u));
  OK(dls_stream_destroy(s));
}

static void two_cpu_devices(void) { setenv("DLSTREAM_CPU_DEVICES", "2", 1); }

/* NumPy says cpu:0 for every host array: an import of cpu:1 memory lands on cpu:1, where its buffer lives. */
Test(alias, an_import_of_another_cpu_devices_export_is_its_alias_on_that_device, .init = two_cpu_devices) {
  DLDevice d1 = dls_device(kDLCPU, 1);
  dlst_need_async(d1);
  dls_stream_t s1;
  OK(dls_stream_create(d1, NULL, &s1));
  dls_tensor_t t = own_tensor(s1, 4.0f);
  DLManagedTensorVersioned *m;
  OK(dls_tensor_export_versioned(t, (dls_stream_t){0}, &m));
  m->dl_tensor.device = dls_device(kDLCPU, 0);
  dls_tensor_t alias;
  OK(dls_tensor_import_versioned(m, (dls_stream_t){0}, &alias));
  const DLTensor *dl;
  OK(dls_tensor_dltensor(alias, &dl));
  cr_assert_eq(dl->device.device_id, 1, "the alias is on cpu:%d", (int)dl->device.device_id);
  dls_latch_t l = hold(d1, s1);
  float seven = 7.0f, v[N];
  OK(dls_fill(s1, dls_arg_tensor(t), N, 4, &seven));
  dls_stream_t s2;
  OK(dls_stream_create(d1, NULL, &s2));
  copy_while_held(s1, s2, l, dls_arg_tensor_in(alias), false, v);
  cr_assert_eq(v[0], 7.0f, "the alias read %g before the original's write", v[0]);
  OK(dls_tensor_release(alias));
  OK(dls_tensor_release(t));
  OK(dls_stream_destroy(s1));
  OK(dls_stream_destroy(s2));
  unsetenv("DLSTREAM_CPU_DEVICES");
}

/* Threads that export, import back, borrow the exported bytes and let go, all at once: the registry's entries
 * come and go while others look them up (ThreadSanitizer watches the lookups against the last references). */
static void *churn(void *arg) {
  dls_stream_t s = *(dls_stream_t *)arg;
  for (int i = 0; i < 200; i++) {
    dls_tensor_t t = own_tensor(s, (float)i), alias;
    DLManagedTensorVersioned *m;
    OK(dls_tensor_export_versioned(t, (dls_stream_t){0}, &m));
    dls_buffer_t b;
    OK(dls_buffer_borrow(dls_cpu(), m->dl_tensor.data, 16, s, NULL, NULL, &b));
    OK(dls_tensor_import_versioned(m, s, &alias));
    OK(dls_tensor_release(t));
    float one = 1.0f;
    OK(dls_fill(s, dls_arg_tensor(alias), N, 4, &one));
    OK(dls_buffer_free(b));
    OK(dls_tensor_release(alias)); /* the last reference: out of the registry */
  }
  return NULL;
}

Test(alias, exports_imports_and_releases_on_several_threads) {
  enum { T = 4 };
  pthread_t th[T];
  dls_stream_t s[T];
  for (int i = 0; i < T; i++)
    OK(dls_stream_create(dls_cpu(), NULL, &s[i]));
  for (int i = 0; i < T; i++)
    cr_assert_eq(pthread_create(&th[i], NULL, churn, &s[i]), 0);
  for (int i = 0; i < T; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < T; i++) {
    OK(dls_stream_synchronize(s[i]));
    OK(dls_stream_destroy(s[i]));
  }
}
