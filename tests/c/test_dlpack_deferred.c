/* SPDX-License-Identifier: Apache-2.0 */
/* Stream-ordered release of DLPack tensors: deleters wait for every stream that used the tensor, with
 * negative controls. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack_fixtures.h"

TestSuite(dlpack_deferred, .init = dlpack_setup, .fini = dlpack_teardown);

/* ------------------------------------------------------- deferred release */

typedef struct latched {
  dls_stream_t a, b;
  dls_latch_t latch;
} latched;

/* Streams A (producer) and B, with B held by a closed latch. */
static latched latched_streams(void) {
  dlst_need_async(dls_cpu());
  latched L;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &L.a), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &L.b), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_latch_create(dls_cpu(), &L.latch), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_latch_wait(L.latch, L.b, DLST_LATCH_TIMEOUT_NS), DLS_OK, "%s", dls_last_error());
  return L;
}

static void latched_finish(latched *L) {
  cr_assert_eq(dls_latch_open(L->latch), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(L->b), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(L->a), DLS_OK);
  cr_assert_eq(dls_latch_status(L->latch), DLS_OK, "the latch timed out: %s", dls_last_error());
  dls_deferred_poll();
}

static void latched_destroy(latched *L) {
  cr_assert_eq(dls_latch_destroy(L->latch), DLS_OK);
  cr_assert_eq(dls_stream_destroy(L->a), DLS_OK);
  cr_assert_eq(dls_stream_destroy(L->b), DLS_OK);
}

Test(dlpack_deferred, release_waits_for_a_stream_that_used_the_tensor) {
  latched L = latched_streams();
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, L.a);
  float one = 1.0f;
  cr_assert_eq(dls_fill(L.b, dls_arg_tensor(t), 32, 4, &one), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 0, "deleter ran while stream B (which uses the memory) is latched");
  cr_assert_gt(dls_deferred_poll(), 0);
  cr_assert_eq(atomic_load(&g_deleted), 0);
  latched_finish(&L);
  cr_assert_eq(atomic_load(&g_deleted), 1, "deleter ran %d times after B passed", atomic_load(&g_deleted));
  cr_assert_eq(dls_deferred_pending(), 0);
  cr_assert_eq(((float *)(void *)g_arena)[31], 1.0f);
  latched_destroy(&L);
}

Test(dlpack_deferred, negative_control_unrecorded_use_releases_at_once) {
  /* The same, but B gets the raw pointer: no use is recorded, so nothing
   * holds the release back. This shows the test above can fail. */
  latched L = latched_streams();
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, L.a);
  void *data;
  cr_assert_eq(dls_tensor_data(t, &data), DLS_OK);
  float one = 1.0f;
  cr_assert_eq(dls_fill(L.b, dls_arg_ptr(data), 32, 4, &one), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 1, "without a recorded use the deleter runs at once, B still latched");
  cr_assert_eq(dls_deferred_poll(), 0);
  latched_finish(&L);
  cr_assert_eq(atomic_load(&g_deleted), 1);
  latched_destroy(&L);
}

Test(dlpack_deferred, export_deleter_records_the_consumer_use) {
  /* The consumer of an export queues work on B (held), then calls the
   * deleter: the producer's memory must stay until B passes. */
  latched L = latched_streams();
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, L.a);
  DLManagedTensorVersioned *e;
  cr_assert_eq(dls_tensor_export_versioned(t, L.b, &e), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 0, "the export still holds the memory");
  float two = 2.0f;
  cr_assert_eq(dls_fill(L.b, dls_arg_ptr(e->dl_tensor.data), 32, 4, &two), DLS_OK);
  e->deleter(e);
  cr_assert_eq(atomic_load(&g_deleted), 0, "deleter ran while the consumer stream B is latched");
  cr_assert_gt(dls_deferred_poll(), 0);
  latched_finish(&L);
  cr_assert_eq(atomic_load(&g_deleted), 1);
  latched_destroy(&L);
}

Test(dlpack_deferred, negative_control_export_without_consumer_releases_at_once) {
  latched L = latched_streams();
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, L.a);
  DLManagedTensorVersioned *e;
  cr_assert_eq(dls_tensor_export_versioned(t, (dls_stream_t){0}, &e), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  float two = 2.0f;
  cr_assert_eq(dls_fill(L.b, dls_arg_ptr(e->dl_tensor.data), 32, 4, &two), DLS_OK);
  e->deleter(e);
  cr_assert_eq(atomic_load(&g_deleted), 1, "no consumer stream named: nothing holds the release");
  latched_finish(&L);
  latched_destroy(&L);
}

Test(dlpack_deferred, release_waits_for_work_queued_on_the_producer_stream) {
  /* Host memory: the producer's deleter frees at once, so the release must
   * wait for the producer's own stream too when work that uses it is queued. */
  dlst_need_async(dls_cpu());
  dls_stream_t a;
  dls_latch_t latch;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &a), DLS_OK);
  cr_assert_eq(dls_latch_create(dls_cpu(), &latch), DLS_OK);
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, a);
  cr_assert_eq(dls_latch_wait(latch, a, DLST_LATCH_TIMEOUT_NS), DLS_OK);
  float three = 3.0f;
  cr_assert_eq(dls_fill(a, dls_arg_tensor(t), 32, 4, &three), DLS_OK);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 0, "deleter ran while the producer stream still has work queued on it");
  cr_assert_gt(dls_deferred_poll(), 0);
  cr_assert_eq(dls_latch_open(latch), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(a), DLS_OK);
  dls_deferred_poll();
  cr_assert_eq(atomic_load(&g_deleted), 1);
  cr_assert_eq(((float *)(void *)g_arena)[31], 3.0f);
  cr_assert_eq(dls_latch_destroy(latch), DLS_OK);
  cr_assert_eq(dls_stream_destroy(a), DLS_OK);
}

Test(dlpack_deferred, negative_control_idle_producer_releases_at_once) {
  /* The same work, finished before the release: nothing to wait for. */
  dls_stream_t a;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &a), DLS_OK);
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, a);
  float three = 3.0f;
  cr_assert_eq(dls_fill(a, dls_arg_tensor(t), 32, 4, &three), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(a), DLS_OK);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 1);
  cr_assert_eq(dls_deferred_pending(), 0);
  cr_assert_eq(dls_stream_destroy(a), DLS_OK);
}

/* A write through the tensor on A (held by a latch), then a write of another
 * value on B by raw pointer: the final value says which ran last. */
static float order_experiment(bool order) {
  dlst_need_async(dls_cpu());
  dls_stream_t a, b;
  dls_latch_t latch;
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &a), DLS_OK);
  cr_assert_eq(dls_stream_create(dls_cpu(), NULL, &b), DLS_OK);
  cr_assert_eq(dls_latch_create(dls_cpu(), &latch), DLS_OK);
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, a);
  cr_assert_eq(dls_latch_wait(latch, a, DLST_LATCH_TIMEOUT_NS), DLS_OK);
  float one = 1.0f, two = 2.0f;
  cr_assert_eq(dls_fill(a, dls_arg_tensor(t), 32, 4, &one), DLS_OK);
  if (order)
    cr_assert_eq(dls_tensor_order_before(t, b), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(dls_fill(b, dls_arg_ptr(g_arena), 32, 4, &two), DLS_OK);
  if (!order)
    cr_assert_eq(dls_stream_synchronize(b), DLS_OK); /* B finishes while A is held */
  cr_assert_eq(dls_latch_open(latch), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(a), DLS_OK);
  cr_assert_eq(dls_stream_synchronize(b), DLS_OK);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(dls_latch_destroy(latch), DLS_OK);
  cr_assert_eq(dls_stream_destroy(a), DLS_OK);
  cr_assert_eq(dls_stream_destroy(b), DLS_OK);
  dls_deferred_poll();
  cr_assert_eq(atomic_load(&g_deleted), 1);
  return ((float *)(void *)g_arena)[0];
}

Test(dlpack_deferred, order_before_makes_the_consumer_wait) {
  cr_assert_eq(order_experiment(true), 2.0f, "B's write ran before A's: order_before did not order");
}

Test(dlpack_deferred, negative_control_without_order_before) {
  cr_assert_eq(order_experiment(false), 1.0f, "without ordering, B's write runs first (A is held)");
}

Test(dlpack_deferred, shutdown_runs_pending_deleters) {
  latched L = latched_streams();
  probe *p = probe_new();
  dls_tensor_t t = import_ok(&p->m, L.a);
  float one = 1.0f;
  cr_assert_eq(dls_fill(L.b, dls_arg_tensor(t), 32, 4, &one), DLS_OK);
  cr_assert_eq(dls_tensor_release(t), DLS_OK);
  cr_assert_eq(atomic_load(&g_deleted), 0);
  cr_assert_eq(dls_latch_open(L.latch), DLS_OK); /* shutdown waits for B, so B must be able to pass */
  cr_assert_eq(dls_shutdown(), DLS_OK, "%s", dls_last_error());
  cr_assert_eq(atomic_load(&g_deleted), 1, "dls_shutdown returned before the deferred deleter ran");
}
