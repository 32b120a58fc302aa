/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection: every injectable point of every scenario (fault_objects.c,
 * fault_ordering.c) fails in turn and nothing is lost (fault_fixture.c
 * checks); then regressions for what the sweep found, one per bug. */
#include "fault_fixture.h"

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

TestSuite(fault, .fini = dlst_fini);

BACKEND_TEST(fault, sweep_every_point_of_every_scenario) {
  DLDevice d = dlst_device(*backend_type);
  const char *sync = getenv("DLSTREAM_CPU_SYNC");
  bool inline_cpu = d.device_type == kDLCPU && sync != NULL && sync[0] == '1';
  const char *only = getenv("DLSTREAM_FAULT_SCENARIO"); /* one scenario, while debugging it */
  if (only != NULL && only[0] == '\0')
    only = NULL;
  uint64_t points = 0, survived = 0;
  int skipped = 0;
  int total = fx_objects_n + fx_ordering_n;
  for (int i = 0; i < total; i++) {
    const fx_scenario *sc = i < fx_objects_n ? &fx_objects[i] : &fx_ordering[i - fx_objects_n];
    if (only != NULL && strcmp(sc->name, only) != 0) {
      skipped++;
      continue;
    }
    if (sc->needs_async && inline_cpu) {
      printf("fault injection [cpu] %s: skipped: DLSTREAM_CPU_SYNC=1 runs streams inline, a latch would block\n",
             sc->name);
      skipped++;
      continue;
    }
    fx_tally t = fx_sweep(sc, d);
    points += t.points;
    survived += t.survived;
    skipped += t.skipped;
  }
  printf("fault injection: %llu points, %llu survived (%s; %d of %d scenarios skipped)\n",
         (unsigned long long)points, (unsigned long long)survived, d.device_type == kDLCPU ? "cpu" : "gpu", skipped,
         total);
  fflush(stdout);
  cr_assert_eq(survived, points, "fault injection: %llu of %llu points not survived (see the lines above)",
               (unsigned long long)(points - survived), (unsigned long long)points);
  cr_assert_geq(total, 15, "at least 15 scenarios");
  if (only != NULL)
    cr_assert_lt(skipped, total, "DLSTREAM_FAULT_SCENARIO=%s names no scenario", only);
  else if (!inline_cpu)
    cr_assert_geq(total - skipped, 15, "at least 15 scenarios must run");
}

/* The sweep's check that no host wait blocked on a held stream can fail: a synchronize of a stream a latch holds
 * is counted by the fault driver (it returns once the latch times out), and one after the latch opened is not. */
BACKEND_TEST(fault, a_host_wait_on_a_latched_stream_is_counted_as_blocked) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dls_stream_t u;
  dls_latch_t l;
  OK(dls_stream_create(d, NULL, &u));
  OK(dls_latch_create(d, &l));
  OK(dls_latch_wait(l, u, 200000000ull)); /* 0.2 s: what ends the blocked wait below */
  uint64_t before = dls_fault_blocked_waits();
  OK(dls_stream_synchronize(u));
  cr_assert_eq(dls_fault_blocked_waits(), before + 1, "a wait on a held stream was not counted");
  FAILS(dls_latch_status(l), DLS_ERR_TIMEOUT, "timed out");
  OK(dls_latch_open(l));
  OK(dls_fill(u, dls_arg_ptr(NULL), 0, 4, &(float){0}));
  OK(dls_stream_synchronize(u));
  cr_assert_eq(dls_fault_blocked_waits(), before + 1, "a wait after the latch opened was counted");
  OK(dls_latch_destroy(l));
  OK(dls_stream_destroy(u));
}

/* A latch's words are kept for the next latch, not freed: the driver's free of page-locked memory may wait for the
 * whole device, and a latch's release runs from the deferred queue at any later call, so one made while another
 * latch held a stream could wait out that latch's timeout on the host. */
BACKEND_TEST(fault, a_latch_let_go_while_another_holds_frees_nothing) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dls_stream_t u, v;
  dls_latch_t a, b;
  OK(dls_stream_create(d, NULL, &u));
  OK(dls_stream_create(d, NULL, &v));
  OK(dls_latch_create(d, &a));
  OK(dls_latch_wait(a, u, 20000000000ull));
  uint64_t made0, freed0, made, freed;
  dls_fault_objects(DLS_FAULT_MAPPED, &made0, &freed0);
  for (int i = 0; i < 3; i++) {
    OK(dls_latch_create(d, &b));
    OK(dls_latch_wait(b, v, 20000000000ull));
    OK(dls_latch_open(b));
    OK(dls_stream_synchronize(v));
    OK(dls_latch_destroy(b));
    (void)dls_deferred_poll();
  }
  dls_fault_objects(DLS_FAULT_MAPPED, &made, &freed);
  cr_assert_eq(freed, freed0, "%llu latch words were freed while another latch held a stream",
               (unsigned long long)(freed - freed0));
  cr_assert_leq(made - made0, 1, "the latches one after another made %llu words, not one kept and reused",
                (unsigned long long)(made - made0));
  OK(dls_latch_open(a));
  OK(dls_stream_synchronize(u));
  OK(dls_latch_destroy(a));
  OK(dls_stream_destroy(u));
  OK(dls_stream_destroy(v));
}

/* ---- regressions: failures the sweep found ---- */

Test(fault, stream_create_priority_range_failure_names_the_call) {
  dls_stream_options_t o = {.priority = -1};
  dls_stream_t s = {0};
  OK(dls_backend_probe(kDLCPU));
  dls_fault_arm(1, DLS_OK);
  FAILS(dls_stream_create(dls_cpu(), &o, &s), DLS_ERR_BACKEND, "dls_stream_create(device=cpu:0, priority=-1)");
  dls_fault_disarm();
  cr_assert_str_eq(dls_fault_last(), "stream_priority_range");
  cr_assert_eq(s.id, 0, "a failed create leaves no handle");
}

Test(fault, stream_query_failure_names_the_call) {
  dls_stream_t s;
  OK(dls_stream_create(dls_cpu(), NULL, &s));
  int idle = -1;
  dls_fault_arm(1, DLS_OK);
  FAILS(dls_stream_query(s, &idle), DLS_ERR_BACKEND, "dls_stream_query(stream on cpu:0): fault injection");
  dls_fault_disarm();
  OK(dls_stream_destroy(s));
}

Test(fault, latch_create_out_of_memory_names_the_call) {
  int failed = 0;
  for (uint64_t n = 1; n < 64; n++) {
    OK(dls_shutdown()); /* empty object caches: every allocation is a point */
    dls_latch_t l = {0};
    dls_fault_arm(n, DLS_OK);
    dls_status_t st = dls_latch_create(dls_cpu(), &l);
    dls_fault_disarm();
    if (st == DLS_OK)
      OK(dls_latch_destroy(l));
    if (dls_fault_injected() == 0)
      break; /* past its last point */
    if (st == DLS_OK)
      continue; /* absorbed */
    failed++;
    cr_assert(strstr(dls_last_error(), "dls_latch_create") != NULL, "point %llu (%s): \"%s\" names no call",
              (unsigned long long)n, dls_fault_last(), dls_last_error());
    cr_assert_eq(l.id, 0);
  }
  cr_assert_gt(failed, 0, "no point of dls_latch_create failed it");
}

static int g_released;
static void count_release(void *user_data) {
  (void)user_data;
  g_released++;
}

static double seconds_since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Out of memory while a borrowed buffer whose use is still queued on a held
 * stream is released: the release is deferred (the queue entry is made with
 * the buffer), never waited for on the host, and runs once. */
Test(fault, borrowed_release_out_of_memory_never_blocks_the_host) {
  static float mem[64];
  DLDevice cpu = dls_cpu();
  dlst_need_async(cpu);
  bool reached = true;
  for (uint64_t n = 1; reached; n++) {
    OK(dls_shutdown());
    g_released = 0;
    dls_stream_t u;
    dls_latch_t l;
    dls_buffer_t b;
    OK(dls_stream_create(cpu, NULL, &u));
    OK(dls_latch_create(cpu, &l));
    OK(dls_latch_wait(l, u, 5000000000ull));
    OK(dls_buffer_borrow(cpu, mem, sizeof mem, dls_stream_default(cpu, DLS_STREAM_LEGACY), count_release, NULL, &b));
    OK(dls_buffer_record_use(b, u, DLS_ACCESS_WRITE));
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    dls_fault_arm(n, DLS_OK);
    dls_status_t st = dls_buffer_free(b);
    dls_fault_disarm();
    double secs = seconds_since(&t0);
    reached = dls_fault_injected() != 0;
    const char *point = dls_fault_last();
    OK(dls_latch_open(l));
    OK(dls_stream_synchronize(u));
    cr_assert_eq(st, DLS_OK, "a release reports nothing");
    cr_assert_lt(secs, 1.0, "point %llu (%s): dls_buffer_free blocked the host for %.1f s", (unsigned long long)n,
                 point, secs);
    OK(dls_latch_status(l));
    OK(dls_latch_destroy(l));
    OK(dls_stream_destroy(u));
    OK(dls_shutdown());
    cr_assert_eq(g_released, 1, "point %llu (%s): the release ran %d times", (unsigned long long)n, point,
                 g_released);
  }
}

/* A kernel that holds its stream until the release under test ran, or for
 * 200 ms: a release that is not ordered after it gets every chance to run
 * early. */
static atomic_int g_hold_released, g_hold_done, g_released_early, g_releases;
static int k_hold(const dls_launch_config_t *cfg, void *const *args, int nargs) {
  (void)cfg, (void)args, (void)nargs;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!atomic_load(&g_hold_released) && seconds_since(&t0) < 0.2)
    sched_yield();
  atomic_store(&g_hold_done, 1);
  return 0;
}
static void hold_release(void *user_data) {
  (void)user_data;
  if (!atomic_load(&g_hold_done))
    atomic_store(&g_released_early, 1);
  atomic_store(&g_hold_released, 1);
  atomic_fetch_add(&g_releases, 1);
}
static void hold_deleter(DLManagedTensorVersioned *self) { hold_release(self->manager_ctx); }

/* A fresh runtime, a created stream and the k_hold function. */
static void hold_begin(dls_stream_t *u, dls_function_t *f) {
  OK(dls_shutdown());
  atomic_store(&g_hold_released, 0);
  atomic_store(&g_hold_done, 0);
  atomic_store(&g_released_early, 0);
  atomic_store(&g_releases, 0);
  OK(dls_stream_create(dls_cpu(), NULL, u));
  OK(dls_function_from_host(dls_cpu(), "k_hold", k_hold, f));
}

/* A launch queues its kernel, then records the uses of its arguments: when
 * that record fails, the imported tensor's release still waits for the
 * kernel (its use entry was made before the launch; a stale record is made
 * again at release). The host polls deferred releases while the kernel
 * runs, so a release ordered only before the kernel runs early. */
Test(fault, launch_that_fails_to_record_a_use_still_orders_the_release) {
  static float mem[16];
  static int64_t shape[1] = {16};
  DLDevice cpu = dls_cpu();
  dlst_need_async(cpu);
  bool reached = true;
  for (uint64_t n = 1; reached; n++) {
    dls_stream_t u;
    dls_function_t f;
    hold_begin(&u, &f);
    DLManagedTensorVersioned m = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, .deleter = hold_deleter};
    m.dl_tensor = (DLTensor){.data = mem, .device = cpu, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = shape};
    dls_latch_t l;
    dls_tensor_t t;
    OK(dls_latch_create(cpu, &l));
    OK(dls_latch_wait(l, u, DLST_LATCH_TIMEOUT_NS));
    OK(dls_tensor_import_versioned(&m, (dls_stream_t){0}, &t));
    dls_arg_t arg = dls_arg_tensor_in(t);
    dls_fault_arm(n, DLS_OK);
    dls_status_t st = dls_launch(f, u, &(dls_launch_config_t){{1, 1, 1}, {1, 1, 1}, 0}, &arg, 1);
    dls_fault_disarm();
    reached = dls_fault_injected() != 0;
    const char *point = dls_fault_last();
    OK(dls_tensor_release(t));
    OK(dls_latch_open(l));
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!atomic_load(&g_hold_released) && !atomic_load(&g_hold_done) && seconds_since(&t0) < 5.0)
      dls_deferred_poll();
    OK(dls_stream_synchronize(u));
    OK(dls_latch_destroy(l));
    OK(dls_function_destroy(f));
    OK(dls_stream_destroy(u));
    OK(dls_shutdown());
    cr_assert_eq(atomic_load(&g_releases), 1, "point %llu (%s): the deleter ran %d times", (unsigned long long)n,
                 point, atomic_load(&g_releases));
    if (atomic_load(&g_hold_done)) /* the kernel was queued */
      cr_assert_eq(atomic_load(&g_released_early), 0,
                   "point %llu (%s), launch %s: the tensor was released before the kernel that reads it ran",
                   (unsigned long long)n, point, dls_status_name(st));
  }
}

/* dls_shutdown drains deferred releases by waiting on their use events: when
 * the driver fails that wait, the release still runs only after the uses. */
Test(fault, shutdown_drain_that_fails_to_wait_still_waits_for_the_uses) {
  static float mem[16];
  DLDevice cpu = dls_cpu();
  dlst_need_async(cpu);
  bool reached = true;
  for (uint64_t n = 1; reached; n++) {
    dls_stream_t u;
    dls_function_t f;
    dls_buffer_t b;
    hold_begin(&u, &f);
    OK(dls_buffer_borrow(cpu, mem, sizeof mem, dls_stream_default(cpu, DLS_STREAM_LEGACY), hold_release, NULL, &b));
    OK(dls_launch(f, u, &(dls_launch_config_t){{1, 1, 1}, {1, 1, 1}, 0}, NULL, 0));
    OK(dls_buffer_record_use(b, u, DLS_ACCESS_WRITE));
    OK(dls_buffer_free(b)); /* deferred: u is still held */
    dls_fault_arm(n, DLS_OK);
    OK(dls_shutdown());
    dls_fault_disarm();
    reached = dls_fault_injected() != 0;
    cr_assert_eq(atomic_load(&g_hold_released), 1, "point %llu (%s): the release did not run",
                 (unsigned long long)n, dls_fault_last());
    cr_assert_eq(atomic_load(&g_released_early), 0, "point %llu (%s): the release ran before the work using it",
                 (unsigned long long)n, dls_fault_last());
  }
}

static float g_seen = -1;
/* Records the first float of its buffer argument. */
static int k_peek(const dls_launch_config_t *cfg, void *const *args, int nargs) {
  (void)cfg, (void)nargs;
  g_seen = (*(float *const *)args[0])[0];
  return 0;
}

/* A probe of early reuse: memory holding 1.0 on stream a, read by a kernel
 * on stream u that a latch holds. After the release under test, a block
 * freed on a is reused by a new allocation there and filled with 9.0: the
 * kernel must still read 1.0. */
typedef struct reuse_probe {
  dls_stream_t a, u;
  dls_latch_t l;
  dls_function_t f;
} reuse_probe;

static void reuse_begin(reuse_probe *r) {
  dlst_need_async(dls_cpu());
  dlst_need_pooling();
  OK(dls_shutdown());
  g_seen = -1;
  OK(dls_stream_create(dls_cpu(), NULL, &r->a));
  OK(dls_stream_create(dls_cpu(), NULL, &r->u));
  OK(dls_latch_create(dls_cpu(), &r->l));
  OK(dls_function_from_host(dls_cpu(), "k_peek", k_peek, &r->f));
}

/* Queues the held kernel that reads `arg`. */
static void reuse_read(reuse_probe *r, dls_arg_t arg) {
  OK(dls_latch_wait(r->l, r->u, DLST_LATCH_TIMEOUT_NS));
  OK(dls_launch(r->f, r->u, &(dls_launch_config_t){{1, 1, 1}, {1, 1, 1}, 0}, &arg, 1));
}

static void reuse_end(reuse_probe *r, uint64_t n, const char *point) {
  dls_buffer_t again;
  float nine = 9.0f;
  OK(dls_buffer_alloc(r->a, 256, &again)); /* the same block, were it free on a */
  OK(dls_fill(r->a, dls_arg_buffer(again), 64, 4, &nine));
  OK(dls_latch_open(r->l));
  OK(dls_stream_synchronize(r->u));
  OK(dls_stream_synchronize(r->a));
  cr_assert_eq(g_seen, 1.0f, "point %llu (%s): the kernel read %g: the memory was reused before it ran",
               (unsigned long long)n, point, (double)g_seen);
  OK(dls_buffer_free(again));
  OK(dls_latch_destroy(r->l));
  OK(dls_function_destroy(r->f));
  OK(dls_stream_destroy(r->u));
  OK(dls_stream_destroy(r->a));
}

/* An owned buffer on stream a holding 1.0, the block a reuse would take. */
static dls_buffer_t reuse_buffer(reuse_probe *r) {
  dls_buffer_t b;
  float one = 1.0f;
  OK(dls_buffer_alloc(r->a, 256, &b));
  OK(dls_fill(r->a, dls_arg_buffer(b), 64, 4, &one));
  OK(dls_stream_synchronize(r->a));
  return b;
}

/* A buffer freed while a held stream still has a kernel queued that reads
 * it: when the allocation stream cannot be made to wait on that use, the
 * memory is still not reused before the kernel ran. */
Test(fault, free_whose_stream_cannot_wait_on_a_use_still_frees_after_it) {
  bool reached = true;
  for (uint64_t n = 1; reached; n++) {
    reuse_probe r;
    reuse_begin(&r);
    dls_buffer_t b = reuse_buffer(&r);
    reuse_read(&r, dls_arg_buffer(b));
    dls_fault_arm(n, DLS_OK);
    OK(dls_buffer_free(b));
    dls_fault_disarm();
    reached = dls_fault_injected() != 0;
    reuse_end(&r, n, dls_fault_last());
  }
}

/* A tensor exported to a consumer stream whose kernel still reads it when
 * the consumer calls the deleter: if recording that use fails inside the
 * deleter, the memory is still not reused before the kernel ran. */
Test(fault, export_deleter_that_fails_to_record_the_consumer_use_still_orders_the_free) {
  bool reached = true;
  int64_t shape[1] = {64};
  for (uint64_t n = 1; reached; n++) {
    reuse_probe r;
    reuse_begin(&r);
    dls_tensor_t t;
    float one = 1.0f;
    OK(dls_tensor_empty(r.a, 1, shape, (DLDataType){kDLFloat, 32, 1}, &t));
    OK(dls_fill(r.a, dls_arg_tensor(t), 64, 4, &one));
    DLManagedTensorVersioned *m = NULL;
    OK(dls_tensor_export_versioned(t, r.u, &m)); /* u is the consumer */
    reuse_read(&r, dls_arg_ptr(m->dl_tensor.data)); /* the consumer's kernel: dlstream does not see this use */
    dls_fault_arm(n, DLS_OK);
    m->deleter(m);
    dls_fault_disarm();
    reached = dls_fault_injected() != 0;
    const char *point = dls_fault_last();
    OK(dls_tensor_release(t));
    reuse_end(&r, n, point);
  }
}

/* A launch on another stream than an owned buffer's allocation stream makes
 * the buffer's use entry before it queues the kernel: when no event or
 * memory for that entry is left, the launch fails before queuing anything,
 * so the buffer's free never overtakes a kernel it did not see. */
Test(fault, launch_out_of_events_for_an_owned_buffer_use_never_lets_the_free_overtake_it) {
  bool reached = true;
  for (uint64_t n = 1; reached; n++) {
    reuse_probe r;
    reuse_begin(&r);
    dls_buffer_t b = reuse_buffer(&r);
    OK(dls_latch_wait(r.l, r.u, DLST_LATCH_TIMEOUT_NS));
    dls_arg_t arg = dls_arg_buffer(b);
    dls_fault_arm(n, DLS_OK);
    (void)dls_launch(r.f, r.u, &(dls_launch_config_t){{1, 1, 1}, {1, 1, 1}, 0}, &arg, 1);
    dls_fault_disarm();
    reached = dls_fault_injected() != 0;
    const char *point = dls_fault_last();
    g_seen = 1.0f; /* a kernel that did not run read nothing */
    OK(dls_buffer_free(b));
    reuse_end(&r, n, point);
  }
}
