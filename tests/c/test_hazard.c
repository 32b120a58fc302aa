/* SPDX-License-Identifier: Apache-2.0 */
/* The hazard rule, one test per kind (read after write, write after read,
 * write after write) and per kind of memory (owned, borrowed, exported, and
 * an export imported back: an alias of the original): stream A is held by a
 * latch while it uses the memory, stream B uses it after; B must wait.
 * Either use may be a graph's replay (a graph captured on another stream,
 * replayed on A or B): a replay is one piece of work on the memory its
 * capture used. Each runs again with DLSTREAM_TEST_NO_HAZARDS=1 (the rule
 * off), which must give the wrong answer: the test can fail. */
#include <stdlib.h>

#include "common.h"

TestSuite(hazard, .fini = dlst_fini);

enum { N = 256 };
/* ALIAS: A uses the original tensor, B its export imported back (dls_tensor_import_versioned); ALIAS_BUFFER: A
 * uses a buffer borrowed over the exported bytes (dls_buffer_borrow), B the original tensor. */
enum { OWN, BORROWED, EXPORTED, ALIAS, ALIAS_BUFFER };
enum { RAW, WAR, WAW };
enum { EAGER, A_REPLAYS, B_REPLAYS }; /* whose use is a graph's replay */

typedef struct scene {
  DLDevice d;
  dls_stream_t a, b, c; /* a: held by the latch; b: the later user; c: allocates */
  dls_buffer_t mem;     /* the memory (owned, or what the view borrows) */
  dls_tensor_t view;    /* BORROWED: a view of mem produced on c; EXPORTED: mem's tensor */
  DLManagedTensorVersioned *export; /* EXPORTED: handed to a consumer on a; ALIAS_BUFFER: to no stream */
  dls_tensor_t alias;   /* ALIAS: the export imported back */
  dls_buffer_t alias_buf; /* ALIAS_BUFFER: the exported bytes borrowed */
  dls_buffer_t out;     /* what a read copies into (on the reader's stream) */
  char *ptr;
  int kind;
} scene;

static void fill_value(dls_stream_t s, dls_arg_t dst, float v) { OK(dls_fill(s, dst, N, 4, &v)); }

static float first_value(scene *sc, dls_buffer_t b) {
  float v[N];
  OK(dls_buffer_read(b, 0, v, sizeof v, sc->c));
  OK(dls_stream_synchronize(sc->c));
  return v[N - 1];
}

static void copy(dls_stream_t s, dls_arg_t dst, dls_arg_t src) {
  dls_copy_desc_t d = {.ndim = 1, .elem_size = 4, .shape = {N}, .dst_strides = {1}, .src_strides = {1}};
  OK(dls_copy_strided(s, dst, src, &d));
}

/* The memory as stream `s` names it when writing (or reading): A of an
 * export writes through the consumer's raw pointer, which dlstream does not
 * see (the export made A a writer others must wait for). */
static dls_arg_t arg(scene *sc, dls_stream_t s, bool write) {
  if (sc->kind == EXPORTED && s.id == sc->a.id)
    return dls_arg_ptr(sc->export->dl_tensor.data);
  if (sc->kind == OWN)
    return write ? dls_arg_buffer(sc->mem) : dls_arg_buffer_in(sc->mem);
  if (sc->kind == ALIAS_BUFFER && s.id == sc->a.id)
    return write ? dls_arg_buffer(sc->alias_buf) : dls_arg_buffer_in(sc->alias_buf);
  dls_tensor_t t = sc->kind == ALIAS && s.id == sc->b.id ? sc->alias : sc->view;
  return write ? dls_arg_tensor(t) : dls_arg_tensor_in(t);
}

static scene open_scene(DLDeviceType t, int kind) {
  scene sc = {.kind = kind};
  sc.d = dlst_device(t);
  dlst_need_async(sc.d);
  dlst_need_concurrency(sc.d);
  OK(dls_stream_create(sc.d, NULL, &sc.a));
  OK(dls_stream_create(sc.d, NULL, &sc.b));
  OK(dls_stream_create(sc.d, NULL, &sc.c));
  OK(dls_buffer_alloc(sc.c, N * sizeof(float), &sc.mem));
  OK(dls_buffer_alloc(sc.c, N * sizeof(float), &sc.out));
  fill_value(sc.c, dls_arg_buffer(sc.mem), 1.0f);
  fill_value(sc.c, dls_arg_buffer(sc.out), 0.0f);
  OK(dls_stream_synchronize(sc.c));
  OK(dls_buffer_ptr(sc.mem, (void **)&sc.ptr));
  int64_t shape[1] = {N};
  DLTensor dl = {sc.ptr, sc.d, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  if (kind == BORROWED)
    OK(dls_tensor_view(&dl, 0, sc.c, &sc.view)); /* produced on c: a's first use waits for c */
  if (kind >= EXPORTED) {
    OK(dls_tensor_empty(sc.c, 1, shape, (DLDataType){kDLFloat, 32, 1}, &sc.view)); /* own, exported to a consumer on a */
    fill_value(sc.c, dls_arg_tensor(sc.view), 1.0f);
    OK(dls_stream_synchronize(sc.c)); /* with the rule off nothing else would wait for this fill */
    OK(dls_tensor_export_versioned(sc.view, kind == EXPORTED ? sc.a : (dls_stream_t){0}, &sc.export));
  }
  if (kind == ALIAS) {
    OK(dls_tensor_import_versioned(sc.export, sc.c, &sc.alias)); /* steals it: the alias's release deletes it */
    sc.export = NULL;
  }
  if (kind == ALIAS_BUFFER)
    OK(dls_buffer_borrow(sc.d, sc.export->dl_tensor.data, N * sizeof(float), sc.c, NULL, NULL, &sc.alias_buf));
  return sc;
}

static void close_scene(scene *sc) {
  if (sc->export != NULL)
    sc->export->deleter(sc->export);
  OK(dls_tensor_release(sc->alias));
  OK(dls_buffer_free(sc->alias_buf));
  OK(dls_tensor_release(sc->view));
  OK(dls_buffer_free(sc->mem));
  OK(dls_buffer_free(sc->out));
  OK(dls_stream_destroy(sc->a));
  OK(dls_stream_destroy(sc->b));
  OK(dls_stream_destroy(sc->c));
}

/* The memory's value as the program wrote it last (an export's: its tensor). */
static float memory_value(scene *sc) {
  if (sc->kind < EXPORTED)
    return first_value(sc, sc->mem);
  dls_buffer_t tmp;
  OK(dls_buffer_alloc(sc->c, N * sizeof(float), &tmp));
  copy(sc->c, dls_arg_buffer(tmp), dls_arg_tensor_in(sc->view));
  float v = first_value(sc, tmp);
  OK(dls_buffer_free(tmp));
  return v;
}

/* A's part of a hazard (`a`), or B's, queued on `s`: RAW: A writes 7, B
 * reads; WAR: A reads, B writes 9; WAW: A writes 5, B writes 9. */
static void part(scene *sc, dls_stream_t s, int hazard, bool a) {
  if (hazard == WAW || (hazard == RAW) == a)
    fill_value(s, arg(sc, s, true), hazard == RAW ? 7.0f : a ? 5.0f : 9.0f);
  else
    copy(s, dls_arg_buffer(sc->out), arg(sc, s, false));
}

/* A graph of that part, captured on c. */
static dls_graph_t captured(scene *sc, int hazard, bool a) {
  dls_graph_t g;
  OK(dls_stream_begin_capture(sc->c, DLS_CAPTURE_GLOBAL));
  part(sc, sc->c, hazard, a);
  OK(dls_stream_end_capture(sc->c, &g));
  return g;
}

static void play(scene *sc, dls_stream_t s, int hazard, bool a, dls_graph_t g) {
  if (g.id != 0)
    OK(dls_graph_launch(g, s));
  else
    part(sc, s, hazard, a);
}

/* One hazard: A (held) uses the memory, then B. Returns what the program
 * observes: RAW what B read, WAR what A read, WAW the value left. */
static float run(DLDeviceType t, int kind, int hazard, bool rule, int replays) {
  scene sc = open_scene(t, kind);
  dls_graph_t g = replays == EAGER ? (dls_graph_t){0} : captured(&sc, hazard, replays == A_REPLAYS);
  dls_latch_t latch;
  OK(dls_latch_create(sc.d, &latch));
  OK(dls_latch_wait(latch, sc.a, 10ull * 1000 * 1000 * 1000));
  play(&sc, sc.a, hazard, true, replays == A_REPLAYS ? g : (dls_graph_t){0});
  play(&sc, sc.b, hazard, false, replays == B_REPLAYS ? g : (dls_graph_t){0});
  int idle = 0;
  for (int i = 0; i < 2000 && !idle; i++) { /* a fair chance for B to run ahead if the rule let it (bounded) */
    sched_yield();
    OK(dls_stream_query(sc.b, &idle));
  }
  if (!rule)
    OK(dls_stream_synchronize(sc.b)); /* without the rule B runs ahead while A is held: let it finish first */
  else
    cr_assert_eq(idle, 0, "kind %d hazard %d: B did not wait behind A's latch", kind, hazard);
  OK(dls_latch_open(latch));
  OK(dls_stream_synchronize(sc.a));
  OK(dls_stream_synchronize(sc.b));
  OK(dls_latch_status(latch));
  OK(dls_latch_destroy(latch));
  OK(dls_graph_destroy(g));
  float got = hazard == WAW ? memory_value(&sc) : first_value(&sc, sc.out);
  close_scene(&sc);
  return got;
}

/* Runs a hazard with the rule on, then off (the negative control). */
static void check_replayed(DLDeviceType t, int kind, int hazard, int replays, float right, float wrong) {
  float on = run(t, kind, hazard, true, replays);
  cr_assert_float_eq(on, right, 0, "kind %d hazard %d replays %d: got %g, wanted %g", kind, hazard, replays, on,
                     right);
#if defined(__SANITIZE_THREAD__)
  /* With the rule off the kernels race on purpose: ThreadSanitizer would (rightly) stop the suite. The plain and
   * ASan builds run the negative control. */
  return;
#endif
  setenv("DLSTREAM_TEST_NO_HAZARDS", "1", 1);
  OK(dls_shutdown()); /* the switch is read when the runtime starts */
  float off = run(t, kind, hazard, false, replays);
  unsetenv("DLSTREAM_TEST_NO_HAZARDS");
  OK(dls_shutdown());
  cr_assert_float_eq(off, wrong, 0, "negative control (kind %d hazard %d replays %d, rule off): got %g, wanted %g",
                     kind, hazard, replays, off, wrong);
}

static void check(DLDeviceType t, int kind, int hazard, float right, float wrong) {
  check_replayed(t, kind, hazard, EAGER, right, wrong);
}

BACKEND_TEST(hazard, read_after_write_on_owned_memory) { check(*backend_type, OWN, RAW, 7.0f, 1.0f); }
BACKEND_TEST(hazard, write_after_read_on_owned_memory) { check(*backend_type, OWN, WAR, 1.0f, 9.0f); }
BACKEND_TEST(hazard, write_after_write_on_owned_memory) { check(*backend_type, OWN, WAW, 9.0f, 5.0f); }
BACKEND_TEST(hazard, read_after_write_on_borrowed_memory) { check(*backend_type, BORROWED, RAW, 7.0f, 1.0f); }
BACKEND_TEST(hazard, write_after_read_on_borrowed_memory) { check(*backend_type, BORROWED, WAR, 1.0f, 9.0f); }
BACKEND_TEST(hazard, write_after_write_on_borrowed_memory) { check(*backend_type, BORROWED, WAW, 9.0f, 5.0f); }
BACKEND_TEST(hazard, read_after_an_exports_consumer_wrote) { check(*backend_type, EXPORTED, RAW, 7.0f, 1.0f); }
BACKEND_TEST(hazard, write_after_an_exports_consumer_read) { check(*backend_type, EXPORTED, WAR, 1.0f, 9.0f); }
BACKEND_TEST(hazard, write_after_an_exports_consumer_wrote) { check(*backend_type, EXPORTED, WAW, 9.0f, 5.0f); }

/* A graph's replay (on A or on B) in place of eager work: its capture used memory it did not allocate. */
BACKEND_TEST(hazard, a_replay_reads_after_an_eager_write) {
  check_replayed(*backend_type, OWN, RAW, B_REPLAYS, 7.0f, 1.0f);
}
BACKEND_TEST(hazard, an_eager_read_after_a_replay_wrote) {
  check_replayed(*backend_type, OWN, RAW, A_REPLAYS, 7.0f, 1.0f);
}
BACKEND_TEST(hazard, a_replay_writes_after_an_eager_read) {
  check_replayed(*backend_type, OWN, WAR, B_REPLAYS, 1.0f, 9.0f);
}
BACKEND_TEST(hazard, an_eager_write_after_a_replay_read) {
  check_replayed(*backend_type, OWN, WAR, A_REPLAYS, 1.0f, 9.0f);
}
BACKEND_TEST(hazard, a_replay_writes_after_an_eager_write) {
  check_replayed(*backend_type, OWN, WAW, B_REPLAYS, 9.0f, 5.0f);
}
BACKEND_TEST(hazard, an_eager_write_after_a_replay_wrote) {
  check_replayed(*backend_type, OWN, WAW, A_REPLAYS, 9.0f, 5.0f);
}
BACKEND_TEST(hazard, a_replay_reads_borrowed_memory_after_an_eager_write) {
  check_replayed(*backend_type, BORROWED, RAW, B_REPLAYS, 7.0f, 1.0f);
}
BACKEND_TEST(hazard, an_eager_read_of_borrowed_memory_after_a_replay_wrote) {
  check_replayed(*backend_type, BORROWED, RAW, A_REPLAYS, 7.0f, 1.0f);
}
BACKEND_TEST(hazard, a_replay_writes_borrowed_memory_after_an_eager_read) {
  check_replayed(*backend_type, BORROWED, WAR, B_REPLAYS, 1.0f, 9.0f);
}
BACKEND_TEST(hazard, an_eager_write_of_borrowed_memory_after_a_replay_read) {
  check_replayed(*backend_type, BORROWED, WAR, A_REPLAYS, 1.0f, 9.0f);
}
BACKEND_TEST(hazard, a_replay_writes_borrowed_memory_after_an_eager_write) {
  check_replayed(*backend_type, BORROWED, WAW, B_REPLAYS, 9.0f, 5.0f);
}
BACKEND_TEST(hazard, an_eager_write_of_borrowed_memory_after_a_replay_wrote) {
  check_replayed(*backend_type, BORROWED, WAW, A_REPLAYS, 9.0f, 5.0f);
}
BACKEND_TEST(hazard, alias_read_after_the_original_was_written) { check(*backend_type, ALIAS, RAW, 7.0f, 1.0f); }
BACKEND_TEST(hazard, alias_write_after_the_original_was_read) { check(*backend_type, ALIAS, WAR, 1.0f, 9.0f); }
BACKEND_TEST(hazard, alias_write_after_the_original_was_written) { check(*backend_type, ALIAS, WAW, 9.0f, 5.0f); }
BACKEND_TEST(hazard, read_after_a_borrowed_alias_wrote) { check(*backend_type, ALIAS_BUFFER, RAW, 7.0f, 1.0f); }
BACKEND_TEST(hazard, write_after_a_borrowed_alias_read) { check(*backend_type, ALIAS_BUFFER, WAR, 1.0f, 9.0f); }
BACKEND_TEST(hazard, write_after_a_borrowed_alias_wrote) { check(*backend_type, ALIAS_BUFFER, WAW, 9.0f, 5.0f); }

/* A write while an export is held (B, waiting for the consumer A), then the export's end: the consumer becomes
 * the last writer only after B's write, so a read on C still waits for B (it used to wait for A only). */
static float write_during_export(DLDeviceType t, bool rule) {
  scene sc = open_scene(t, EXPORTED);
  dls_latch_t latch;
  OK(dls_latch_create(sc.d, &latch));
  OK(dls_latch_wait(latch, sc.b, 10ull * 1000 * 1000 * 1000));
  fill_value(sc.b, dls_arg_tensor(sc.view), 7.0f); /* held behind the latch */
  sc.export->deleter(sc.export);                    /* the consumer lets go */
  sc.export = NULL;
  copy(sc.c, dls_arg_buffer(sc.out), dls_arg_tensor_in(sc.view)); /* must see 7 */
  int idle = 0;
  for (int i = 0; i < 2000 && !idle; i++) {
    sched_yield();
    OK(dls_stream_query(sc.c, &idle));
  }
  if (!rule)
    OK(dls_stream_synchronize(sc.c));
  else
    cr_assert_eq(idle, 0, "the read did not wait behind the write held by the latch");
  OK(dls_latch_open(latch));
  OK(dls_stream_synchronize(sc.b));
  OK(dls_stream_synchronize(sc.c));
  OK(dls_latch_destroy(latch));
  float got = first_value(&sc, sc.out);
  close_scene(&sc);
  return got;
}

BACKEND_TEST(hazard, a_write_while_an_export_is_held_outlives_its_end) {
  cr_assert_float_eq(write_during_export(*backend_type, true), 7.0f, 0);
#if !defined(__SANITIZE_THREAD__)
  setenv("DLSTREAM_TEST_NO_HAZARDS", "1", 1);
  OK(dls_shutdown());
  float off = write_during_export(*backend_type, false);
  unsetenv("DLSTREAM_TEST_NO_HAZARDS");
  OK(dls_shutdown());
  cr_assert_float_eq(off, 1.0f, 0, "negative control (rule off): got %g", off);
#endif
}
