/* SPDX-License-Identifier: Apache-2.0 */
/* C consumers: a borrowed tensor carries its producer stream, and its first
 * use on another stream waits for the producer's work queued so far. */
#include "common.h"

TestSuite(consumer, .fini = dlst_fini);

typedef enum { AS_VIEW, AS_IMPORT, AS_RAW_POINTER } pass_t;

static int g_deleted;
static void count_delete(DLManagedTensorVersioned *m) {
  (void)m;
  g_deleted++;
}

/* The producer P writes 7 into `mem` after a latch; the consumer S copies
 * mem into `out` through a tensor made with P as producer (or, for the
 * negative control, through the raw pointer). Returns what S copied. */
static int32_t produce_consume(DLDevice d, pass_t how) {
  dls_stream_t p, s;
  dls_buffer_t mem, out;
  dls_latch_t l;
  int32_t zero = 0, seven = 7, got = -1;
  OK(dls_stream_create(d, NULL, &p));
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_latch_create(d, &l));
  OK(dls_buffer_alloc(p, 4, &mem));
  OK(dls_buffer_alloc(s, 4, &out));
  OK(dls_fill(p, dls_arg_buffer(mem), 1, 4, &zero));
  OK(dls_fill(s, dls_arg_buffer(out), 1, 4, &zero));
  OK(dls_stream_synchronize(p));
  OK(dls_stream_synchronize(s));
  void *ptr;
  OK(dls_buffer_ptr(mem, &ptr));
  /* The producer's queued work: held, then it writes 7. */
  OK(dls_latch_wait(l, p, DLST_LATCH_TIMEOUT_NS));
  OK(dls_fill(p, dls_arg_ptr(ptr), 1, 4, &seven));
  int64_t shape[1] = {1};
  DLTensor dl = {.data = ptr, .device = d, .ndim = 1, .dtype = {kDLInt, 32, 1}, .shape = shape};
  DLManagedTensorVersioned managed = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
                                      .deleter = count_delete, .dl_tensor = dl};
  dls_tensor_t t = {0};
  g_deleted = 0;
  if (how == AS_VIEW)
    OK(dls_tensor_view(&dl, DLS_TENSOR_READ_ONLY, p, &t));
  else if (how == AS_IMPORT)
    OK(dls_tensor_import_versioned(&managed, p, &t));
  dls_arg_t src = how == AS_RAW_POINTER ? dls_arg_ptr(ptr) : dls_arg_tensor_in(t);
  dls_copy_desc_t desc = {.ndim = 1, .elem_size = 4, .shape = {1}, .dst_strides = {1}, .src_strides = {1}};
  OK(dls_copy_strided(s, dls_arg_buffer(out), src, &desc));
  if (how == AS_RAW_POINTER) {
    OK(dls_stream_synchronize(s)); /* nothing orders s after p: it runs ahead */
  } else {
    int idle = 1;
    OK(dls_stream_query(s, &idle));
    cr_assert_eq(idle, 0, "the consumer must be held behind the producer's latch");
    /* Once per (tensor, stream): a second use on s adds no second wait, and
     * the producer's later work is not waited for. */
    OK(dls_copy_strided(s, dls_arg_buffer(out), src, &desc));
  }
  OK(dls_latch_open(l));
  OK(dls_stream_synchronize(p));
  OK(dls_stream_synchronize(s));
  OK(dls_buffer_read(out, 0, &got, 4, s));
  OK(dls_stream_synchronize(s));
  OK(dls_tensor_release(t));
  dls_deferred_poll();
  if (how == AS_IMPORT)
    cr_assert_eq(g_deleted, 1, "the producer's deleter runs exactly once");
  OK(dls_latch_destroy(l));
  OK(dls_buffer_free(mem));
  OK(dls_buffer_free(out));
  OK(dls_stream_destroy(p));
  OK(dls_stream_destroy(s));
  return got;
}

BACKEND_TEST(consumer, a_view_with_a_producer_orders_the_first_use_after_it) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  cr_assert_eq(produce_consume(d, AS_VIEW), 7, "the consumer read before the producer wrote");
}

BACKEND_TEST(consumer, an_import_with_a_producer_orders_the_first_use_after_it) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  cr_assert_eq(produce_consume(d, AS_IMPORT), 7, "the consumer read before the producer wrote");
}

BACKEND_TEST(consumer, negative_control_raw_pointers_are_not_ordered) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  cr_assert_eq(produce_consume(d, AS_RAW_POINTER), 0, "a raw pointer carries no producer: the copy ran first");
}

/* A later producer wait is not repeated: the ordering is the producer's
 * work up to the first use on a stream. Hold the producer a second time
 * after the first use: the consumer's second use runs ahead of it. */
BACKEND_TEST(consumer, the_wait_is_made_once_per_tensor_and_stream) {
  DLDevice d = dlst_device(*backend_type);
  dlst_need_async(d);
  dlst_need_concurrency(d);
  dls_stream_t p, s;
  dls_buffer_t mem;
  dls_latch_t l;
  int32_t one = 1;
  OK(dls_stream_create(d, NULL, &p));
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_latch_create(d, &l));
  OK(dls_buffer_alloc(p, 4, &mem));
  void *ptr;
  OK(dls_buffer_ptr(mem, &ptr));
  int64_t shape[1] = {1};
  DLTensor dl = {.data = ptr, .device = d, .ndim = 1, .dtype = {kDLInt, 32, 1}, .shape = shape};
  dls_tensor_t t;
  OK(dls_tensor_view(&dl, 0, p, &t));
  OK(dls_fill(s, dls_arg_tensor(t), 1, 4, &one)); /* first use on s: waits for p (idle) */
  OK(dls_stream_synchronize(s));
  OK(dls_latch_wait(l, p, DLST_LATCH_TIMEOUT_NS)); /* p busy again */
  OK(dls_fill(s, dls_arg_tensor(t), 1, 4, &one));
  OK(dls_stream_synchronize(s)); /* would wait for the latch's timeout if the wait were repeated */
  int idle = 1;
  OK(dls_stream_query(p, &idle));
  cr_assert_eq(idle, 0);
  OK(dls_latch_open(l));
  OK(dls_stream_synchronize(p));
  OK(dls_tensor_release(t));
  OK(dls_latch_destroy(l));
  OK(dls_buffer_free(mem));
  OK(dls_stream_destroy(p));
  OK(dls_stream_destroy(s));
}
