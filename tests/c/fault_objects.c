/* SPDX-License-Identifier: Apache-2.0 */
/* Fault-injection scenarios of the objects: streams of every kind, events,
 * buffers and their use sets, DLPack imports and exports, launches and
 * built-ins. Each makes, uses and releases objects as a caller would and
 * checks its results (a fault that no call reported must not corrupt them). */
#include "fault_fixture.h"

static dls_status_t sc_stream_owned(fx *x) {
  dls_stream_options_t o = {.flags = DLS_STREAM_BLOCKING, .priority = -1};
  dls_stream_t *a = fx_stream(x);
  STEP(x, dls_stream_create(x->d, &o, a));
  OWNED(x, b);
  STEP(x, dls_spin(*a, 1000));
  STEP(x, dls_stream_wait_stream(*b, *a));
  STEP(x, dls_stream_synchronize(*b));
  STEP(x, dls_stream_synchronize(*a)); /* b saw a's record complete; a's own count may lag */
  int idle = 0;
  STEP(x, dls_stream_query(*a, &idle));
  EXPECT(x, idle == 1);
  return fx_release_all(x);
}

static dls_status_t sc_stream_pooled(fx *x) {
  POOLED(x, a);
  POOLED(x, b);
  STEP(x, dls_spin(*a, 1000));
  STEP(x, dls_stream_wait_stream(*b, *a));
  DROP(x, dls_stream_destroy, *a); /* back to the pool while b waits on its work */
  POOLED(x, c);
  STEP(x, dls_stream_wait_stream(*c, *b));
  STEP(x, dls_stream_synchronize(*c));
  return fx_release_all(x);
}

static dls_status_t sc_stream_foreign(fx *x) {
  OWNED(x, o);
  void *native = NULL;
  STEP(x, dls_stream_native(*o, &native));
  dls_stream_t *w = fx_stream(x);
  STEP(x, dls_stream_wrap(x->d, native, w));
  dls_event_t *e = fx_event(x);
  STEP(x, dls_event_create(x->d, 0, e));
  STEP(x, dls_spin(*w, 1000));
  STEP(x, dls_event_record(*e, *w));
  POOLED(x, p);
  STEP(x, dls_stream_wait_event(*p, *e));
  STEP(x, dls_stream_synchronize(*p));
  DROP(x, dls_stream_destroy, *w); /* the wrapper only */
  STEP(x, dls_stream_synchronize(*o));
  return fx_release_all(x);
}

static dls_status_t sc_stream_default(fx *x) {
  dls_stream_t legacy = dls_stream_default(x->d, DLS_STREAM_LEGACY);
  dls_stream_t per_thread = dls_stream_default(x->d, DLS_STREAM_PER_THREAD);
  dls_buffer_t *buf = fx_buffer(x);
  STEP(x, dls_buffer_alloc(legacy, N * sizeof(float), buf));
  float v = 3.0f, *out = fx_host_out();
  STEP(x, dls_fill(per_thread, dls_arg_buffer(*buf), N, 4, &v));
  OWNED(x, s);
  STEP(x, dls_stream_wait_stream(*s, per_thread));
  STEP(x, dls_buffer_read(*buf, 0, out, N * sizeof(float), *s));
  STEP(x, dls_stream_synchronize(*s));
  EXPECT(x, fx_all_equal(out, N, 3.0f));
  STEP(x, fx_release_all(x));
  STEP(x, dls_stream_synchronize(legacy));
  return DLS_OK;
}

static dls_status_t sc_event_owned(fx *x) {
  OWNED(x, s1);
  OWNED(x, s2);
  dls_event_t *a = fx_event(x);
  STEP(x, dls_event_create(x->d, DLS_EVENT_TIMING, a));
  dls_event_t *b = fx_event(x);
  STEP(x, dls_event_create(x->d, DLS_EVENT_TIMING | DLS_EVENT_BLOCKING_SYNC, b));
  STEP(x, dls_event_record(*a, *s1));
  STEP(x, dls_spin(*s1, 1000));
  STEP(x, dls_event_record(*b, *s1));
  STEP(x, dls_stream_wait_event(*s2, *b));
  STEP(x, dls_event_synchronize(*b));
  int done = 0;
  STEP(x, dls_event_query(*b, &done));
  EXPECT(x, done == 1);
  float ms = -1;
  STEP(x, dls_event_elapsed_ms(*a, *b, &ms));
  EXPECT(x, ms >= 0);
  STEP(x, dls_stream_synchronize(*s2));
  return fx_release_all(x);
}

static dls_status_t sc_event_wrapped(fx *x) {
  dls_event_t *e = fx_event(x);
  STEP(x, dls_event_create(x->d, 0, e));
  void *native = NULL;
  STEP(x, dls_event_native(*e, &native));
  dls_event_t *w = fx_event(x);
  STEP(x, dls_event_wrap(x->d, native, w));
  POOLED(x, s);
  POOLED(x, t);
  STEP(x, dls_spin(*s, 1000));
  STEP(x, dls_event_record(*w, *s));
  STEP(x, dls_event_wait(*e, *t)); /* the owned handle sees the wrapper's record */
  STEP(x, dls_stream_synchronize(*t));
  int done = 0;
  STEP(x, dls_event_query(*e, &done));
  EXPECT(x, done == 1);
  DROP(x, dls_event_destroy, *w); /* the wrapper only */
  return fx_release_all(x);
}

/* Five streams use one buffer in turn: the use set outgrows its inline room. */
static dls_status_t sc_buffer_use_set(fx *x) {
  OWNED(x, a);
  dls_buffer_t *buf = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*a, N * sizeof(float), buf));
  float *out = fx_host_out();
  STEP(x, dls_buffer_write(*buf, 0, g_fx_zeros, sizeof g_fx_zeros, *a));
  dls_stream_t prev = *a;
  for (int i = 1; i <= 5; i++) {
    dls_stream_t *u = fx_stream(x);
    STEP(x, dls_stream_acquire(x->d, u));
    STEP(x, dls_stream_wait_stream(*u, prev));
    float v = (float)i;
    STEP(x, dls_fill(*u, dls_arg_buffer(*buf), N, 4, &v));
    prev = *u;
  }
  STEP(x, dls_buffer_record_use(*buf, prev, DLS_ACCESS_WRITE));
  STEP(x, dls_stream_wait_stream(*a, prev));
  STEP(x, dls_buffer_read(*buf, 0, out, N * sizeof(float), *a));
  STEP(x, dls_stream_synchronize(*a));
  EXPECT(x, fx_all_equal(out, N, 5.0f));
  DROP(x, dls_buffer_free, *buf); /* a waits for every use, then frees */
  for (int i = x->ns - 1; i >= 0; i--)
    return fx_release_all(x);
}

/* A buffer freed while a held stream still has a use of it queued. */
static dls_status_t sc_buffer_free_while_used(fx *x) {
  dls_latch_t *l = fx_latch(x);
  STEP(x, dls_latch_create(x->d, l));
  OWNED(x, a);
  OWNED(x, b);
  dls_buffer_t *buf = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*a, N * sizeof(float), buf));
  STEP(x, dls_stream_wait_stream(*b, *a));
  STEP(x, dls_latch_wait(*l, *b, FX_LATCH_NS));
  float v = 1.0f;
  STEP(x, dls_fill(*b, dls_arg_buffer(*buf), N, 4, &v));
  DROP(x, dls_buffer_free, *buf);
  dls_buffer_t *again = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*a, N * sizeof(float), again));
  STEP(x, dls_latch_open(*l));
  STEP(x, dls_stream_synchronize(*b));
  STEP(x, dls_stream_synchronize(*a));
  STEP(x, dls_latch_status(*l));
  return fx_release_all(x);
}

static dls_status_t sc_import_versioned(fx *x) {
  PRODUCER(x, p, N, 2.0f);
  OWNED(x, s);
  dls_tensor_t *in = fx_tensor(x);
  STEP(x, dls_tensor_import_versioned(fx_hand_versioned(p), (dls_stream_t){0}, in));
  int64_t shape[1] = {N};
  dls_tensor_t *y = fx_tensor(x);
  STEP(x, dls_tensor_empty(*s, 1, shape, (DLDataType){kDLFloat, 32, 1}, y));
  float one = 1.0f, *out = fx_host_out();
  STEP(x, dls_fill(*s, dls_arg_tensor(*y), N, 4, &one));
  STEP(x, dls_axpy_f32(*s, N, 3.0f, dls_arg_tensor_in(*in), dls_arg_tensor(*y)));
  void *data = NULL;
  STEP(x, dls_tensor_data(*y, &data));
  STEP(x, fx_read_back(*s, out, data, N * sizeof(float)));
  EXPECT(x, fx_all_equal(out, N, 7.0f));
  return fx_release_all(x);
}

static dls_status_t sc_import_legacy_and_view(fx *x) {
  PRODUCER(x, p, N, 5.0f);
  POOLED(x, ps);
  dls_tensor_t *legacy = fx_tensor(x);
  STEP(x, dls_tensor_import_legacy(fx_hand_legacy(p), *ps, legacy));
  dls_tensor_t *view = fx_tensor(x);
  STEP(x, dls_tensor_view(&p->l.dl_tensor, DLS_TENSOR_READ_ONLY, *ps, view));
  int64_t shape[1] = {N};
  dls_tensor_t *dst = fx_tensor(x);
  STEP(x, dls_tensor_empty(*ps, 1, shape, (DLDataType){kDLFloat, 32, 1}, dst));
  dls_copy_desc_t desc = {.ndim = 1, .elem_size = 4, .shape = {N}, .dst_strides = {1}, .src_strides = {1}};
  STEP(x, dls_copy_strided(*ps, dls_arg_tensor(*dst), dls_arg_tensor_in(*view), &desc));
  float *out = fx_host_out();
  void *data = NULL;
  STEP(x, dls_tensor_data(*dst, &data));
  STEP(x, fx_read_back(*ps, out, data, N * sizeof(float)));
  EXPECT(x, fx_all_equal(out, N, 5.0f));
  return fx_release_all(x);
}

/* Export to a consumer stream, import the export back, export legacy too, and borrow its bytes again (the imports
 * are aliases of the exported tensor's buffer). */
static dls_status_t sc_export_roundtrip(fx *x) {
  OWNED(x, s);
  POOLED(x, c);
  int64_t shape[1] = {N};
  dls_tensor_t *t = fx_tensor(x);
  STEP(x, dls_tensor_empty(*s, 1, shape, (DLDataType){kDLFloat, 32, 1}, t));
  float four = 4.0f, *out = fx_host_out();
  STEP(x, dls_fill(*s, dls_arg_tensor(*t), N, 4, &four));
  DLManagedTensorVersioned *m = NULL;
  STEP(x, dls_tensor_export_versioned(*t, *c, &m));
  dls_tensor_t *back = fx_tensor(x);
  STEP(x, dls_tensor_import_versioned(m, *c, back)); /* steals m, even on failure */
  DLManagedTensor *ml = NULL;
  STEP(x, dls_tensor_export_legacy(*t, *c, &ml));
  x->legacy_exports[x->nlx++] = ml;
  STEP(x, dls_axpy_f32(*c, N, 1.0f, dls_arg_tensor_in(*back), dls_arg_tensor(*back)));
  STEP(x, fx_read_back(*c, out, ml->dl_tensor.data, N * sizeof(float)));
  EXPECT(x, fx_all_equal(out, N, 8.0f));
  dls_buffer_t *alias = fx_buffer(x); /* the export's bytes borrowed again: an alias of t's buffer too */
  STEP(x, dls_buffer_borrow(x->d, ml->dl_tensor.data, N * sizeof(float), *c, NULL, NULL, alias));
  float six = 6.0f;
  STEP(x, dls_fill(*s, dls_arg_tensor(*t), N, 4, &six));          /* after c's uses: one hazard state */
  STEP(x, dls_buffer_read(*alias, 0, out, N * sizeof(float), *c)); /* after s's fill */
  STEP(x, dls_stream_synchronize(*c));
  EXPECT(x, fx_all_equal(out, N, 6.0f));
  DROP(x, dls_tensor_release, *back);
  return fx_release_all(x);
}

static dls_status_t sc_launch(fx *x) {
  OWNED(x, a);
  POOLED(x, b);
  dls_buffer_t *buf = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*a, N * sizeof(float), buf));
  dls_function_t fill;
  STEP(x, dls_builtin_function(x->d, "dls_fill", &fill));
  float v = 2.0f, *out = fx_host_out();
  uint64_t pattern = 0;
  memcpy(&pattern, &v, sizeof v);
  dls_arg_t args[4] = {dls_arg_buffer(*buf), dls_arg_u64(N), dls_arg_u32(4), dls_arg_u64(pattern)};
  STEP(x, dls_launch(fill, *a, &(dls_launch_config_t){{1, 1, 1}, {64, 1, 1}, 0}, args, 4));
  float want = 2.0f;
  if (x->d.device_type == kDLCPU) {
    dls_function_t *f = fx_function(x);
    STEP(x, dls_function_from_host(x->d, "k_add", fx_k_add, f));
    STEP(x, dls_stream_wait_stream(*b, *a));
    dls_arg_t add[3] = {dls_arg_buffer(*buf), dls_arg_u64(N), dls_arg_f32(1.5f)};
    STEP(x, dls_launch(*f, *b, &(dls_launch_config_t){{1, 1, 1}, {1, 1, 1}, 0}, add, 3));
    STEP(x, dls_stream_wait_stream(*a, *b));
    DROP(x, dls_function_destroy, *f); /* queued launches keep it */
    want = 3.5f;
  }
  STEP(x, dls_buffer_read(*buf, 0, out, N * sizeof(float), *a));
  STEP(x, dls_stream_synchronize(*a));
  EXPECT(x, fx_all_equal(out, N, want));
  return fx_release_all(x);
}

static dls_status_t sc_builtins(fx *x) {
  OWNED(x, a);
  OWNED(x, b);
  dls_buffer_t *xs = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*a, N * sizeof(double), xs));
  dls_buffer_t *ys = fx_buffer(x);
  STEP(x, dls_buffer_alloc(*b, N * sizeof(double), ys));
  double one = 1.0, two = 2.0, *out = g_fx_out64;
  memset(g_fx_out64, 0, sizeof g_fx_out64);
  STEP(x, dls_fill(*a, dls_arg_buffer(*xs), N, 8, &one));
  STEP(x, dls_fill(*b, dls_arg_buffer(*ys), N, 8, &two));
  STEP(x, dls_stream_wait_stream(*b, *a));
  STEP(x, dls_axpy_f64(*b, N, 3.0, dls_arg_buffer(*xs), dls_arg_buffer(*ys))); /* ys = 5 */
  STEP(x, dls_spin(*b, 1000));
  STEP(x, dls_stream_wait_stream(*a, *b));
  dls_copy_desc_t desc = {.ndim = 1, .elem_size = 8, .shape = {N / 2}, .dst_strides = {2}, .src_strides = {2}};
  STEP(x, dls_copy_strided(*a, dls_arg_buffer(*xs), dls_arg_buffer(*ys), &desc)); /* even xs = 5 */
  STEP(x, dls_buffer_read(*xs, 0, out, N * sizeof(double), *a));
  STEP(x, dls_stream_synchronize(*a));
  for (int i = 0; i < N; i++)
    EXPECT(x, out[i] == (i % 2 == 0 ? 5.0 : 1.0));
  return fx_release_all(x);
}

const fx_scenario fx_objects[] = {
    {"stream_owned", sc_stream_owned, false},
    {"stream_pooled", sc_stream_pooled, false},
    {"stream_foreign", sc_stream_foreign, false},
    {"stream_default", sc_stream_default, false},
    {"event_owned", sc_event_owned, false},
    {"event_wrapped", sc_event_wrapped, false},
    {"buffer_use_set", sc_buffer_use_set, false},
    {"buffer_free_while_used", sc_buffer_free_while_used, true},
    {"import_versioned", sc_import_versioned, false},
    {"import_legacy_and_view", sc_import_legacy_and_view, false},
    {"export_roundtrip", sc_export_roundtrip, false},
    {"launch", sc_launch, false},
    {"builtins", sc_builtins, false},
};
const int fx_objects_n = (int)(sizeof fx_objects / sizeof fx_objects[0]);
