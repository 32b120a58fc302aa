/* SPDX-License-Identifier: Apache-2.0 */
/* The fault-injection sweep's runner: one run of a scenario with point n
 * armed, the cleanup of whatever it left, and the checks that nothing was
 * lost (handles, native objects, deleters, outputs) and that no host wait
 * blocked on a stream a latch held. */
#include "fault_fixture.h"

#include <stdarg.h>

/* ---- output slots ---- */

#define FX_SLOT(kind, type, arr, n)                          \
  type *fx_##kind(fx *x) {                                   \
    cr_assert_lt(x->n, FX_MAX, "fixture: too many " #kind "s"); \
    type *p = &x->arr[x->n++];                               \
    p->id = 0;                                               \
    x->last_out = &p->id;                                    \
    return p;                                                \
  }
FX_SLOT(stream, dls_stream_t, streams, ns)
FX_SLOT(event, dls_event_t, events, ne)
FX_SLOT(buffer, dls_buffer_t, buffers, nb)
FX_SLOT(tensor, dls_tensor_t, tensors, nt)
FX_SLOT(group, dls_group_t, groups, ng)
FX_SLOT(latch, dls_latch_t, latches, nl)
FX_SLOT(function, dls_function_t, functions, nf)
FX_SLOT(graph, dls_graph_t, graphs, ngr)
FX_SLOT(branch, dls_stream_t, branches, nbr)

dls_status_t fx_failed(fx *x, dls_status_t st, const char *step) {
  x->st = st;
  snprintf(x->step, sizeof x->step, "%s", step);
  snprintf(x->msg, sizeof x->msg, "%s", dls_last_error());
  x->out_not_zeroed = x->last_out != NULL && *x->last_out != 0;
  return st;
}

dls_status_t fx_wrong(fx *x, const char *what) {
  snprintf(x->wrong, sizeof x->wrong, "%s", what);
  return DLS_ERR_INTERNAL;
}

dls_status_t fx_skip(fx *x, const char *why) {
  x->skip = why;
  return DLS_OK;
}

/* ---- producers ---- */

static void producer_done(fx_producer *p) {
  p->deleted++;
  if (p->inner != NULL)
    p->inner->deleter(p->inner);
  free(p->data);
}
static void producer_deleter(DLManagedTensorVersioned *self) { producer_done(self->manager_ctx); }
static void producer_legacy_deleter(DLManagedTensor *self) { producer_done(self->manager_ctx); }

fx_producer *fx_producer_new(fx *x, int64_t n, float value, dls_status_t *out_st) {
  cr_assert_lt(x->np, FX_MAX, "fixture: too many producers");
  fx_producer *p = &x->producers[x->np];
  memset(p, 0, sizeof *p);
  p->shape[0] = n;
  DLTensor t = {.device = x->d, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = p->shape};
  if (x->d.device_type == kDLCPU) {
    float *f = malloc((size_t)n * sizeof *f);
    cr_assert_not_null(f);
    for (int64_t i = 0; i < n; i++)
      f[i] = value;
    p->data = t.data = f;
  } else {
    /* A GPU producer: dlstream's own export of a filled tensor. */
    dls_stream_t s = dls_stream_default(x->d, DLS_STREAM_LEGACY);
    dls_tensor_t e = {0};
    dls_status_t st = dls_tensor_empty(s, 1, p->shape, t.dtype, &e);
    if (st == DLS_OK)
      st = dls_fill(s, dls_arg_tensor(e), (uint64_t)n, 4, &value);
    if (st == DLS_OK)
      st = dls_tensor_export_versioned(e, (dls_stream_t){0}, &p->inner);
    dls_tensor_release(e);
    if (st != DLS_OK) {
      *out_st = st;
      return NULL;
    }
    t = p->inner->dl_tensor;
  }
  x->np++;
  p->v.version.major = DLPACK_MAJOR_VERSION;
  p->v.version.minor = DLPACK_MINOR_VERSION;
  p->v.manager_ctx = p;
  p->v.deleter = producer_deleter;
  p->v.dl_tensor = t;
  p->l.manager_ctx = p;
  p->l.deleter = producer_legacy_deleter;
  p->l.dl_tensor = t;
  *out_st = DLS_OK;
  return p;
}

DLManagedTensorVersioned *fx_hand_versioned(fx_producer *p) {
  p->handed = true;
  return &p->v;
}

DLManagedTensor *fx_hand_legacy(fx_producer *p) {
  p->handed = true;
  return &p->l;
}

/* ---- helpers of the scenarios ---- */

float g_fx_out[3 * N];
double g_fx_out64[N];
const float g_fx_zeros[N];

float *fx_host_out(void) {
  memset(g_fx_out, 0, sizeof g_fx_out);
  return g_fx_out;
}

dls_status_t fx_read_back(dls_stream_t s, void *dst, const void *src, size_t bytes) {
  dls_status_t st = dls_memcpy(s, dst, src, bytes);
  return st == DLS_OK ? dls_stream_synchronize(s) : st;
}

bool fx_all_equal(const float *v, int n, float want) {
  for (int i = 0; i < n; i++)
    if (v[i] != want)
      return false;
  return true;
}

int fx_k_add(const dls_launch_config_t *cfg, void *const *args, int nargs) {
  (void)cfg;
  if (nargs != 3)
    return 1;
  float *data = *(float *const *)args[0];
  uint64_t n = *(const uint64_t *)args[1];
  float v = *(const float *)args[2];
  for (uint64_t i = 0; i < n; i++)
    data[i] += v;
  return 0;
}

/* ---- one run ---- */

static const char *const g_kind_names[] = {"", "stream", "event", "buffer", "tensor", "module", "function", "group",
                                           "latch", "graph"};

typedef struct fx_result {
  dls_status_t st;
  uint64_t points, injected;
  const char *point; /* the point that failed */
  char problem[1536];
  const char *skip;
} fx_result;

static void problem(fx_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(fx_result *r, const char *fmt, ...) {
  size_t used = strlen(r->problem);
  if (used + 4 >= sizeof r->problem)
    return;
  if (used > 0) {
    strcat(r->problem, "; ");
    used += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->problem + used, sizeof r->problem - used, fmt, ap);
  va_end(ap);
}

/* Releases a handle slot; in strict mode a failure ends the release. */
#define REL(x, strict, fn, slot)                                   \
  do {                                                             \
    dls_status_t rel_st_ = fn(slot);                               \
    if (rel_st_ == DLS_OK)                                         \
      (slot).id = 0;                                               \
    else if (strict)                                               \
      return fx_failed((x), rel_st_, #fn " (fx_release_all)");     \
  } while (0)

/* Children before parents. strict: the scenario's last steps (a failure is
 * recorded and returned). Otherwise the cleanup after a run, with injection
 * off: latches opened first, statuses ignored (a handle may be gone). */
static dls_status_t release_all(fx *x, bool strict) {
  for (int i = 0; i < x->nl && !strict; i++)
    dls_latch_open(x->latches[i]);
  for (int pass = 0; pass < (strict ? 1 : 4); pass++)
    for (int i = x->ng - 1; i >= 0; i--)
      if (x->groups[i].id != 0)
        REL(x, strict, dls_group_end, x->groups[i]);
  for (; x->nx > 0; x->nx--)
    x->exports[x->nx - 1]->deleter(x->exports[x->nx - 1]);
  for (; x->nlx > 0; x->nlx--)
    x->legacy_exports[x->nlx - 1]->deleter(x->legacy_exports[x->nlx - 1]);
  for (int i = 0; i < x->nt; i++)
    REL(x, strict, dls_tensor_release, x->tensors[i]);
  for (int i = 0; i < x->nb; i++)
    REL(x, strict, dls_buffer_free, x->buffers[i]);
  for (int i = 0; i < x->nl; i++)
    REL(x, strict, dls_latch_destroy, x->latches[i]);
  for (int i = 0; i < x->ne; i++)
    REL(x, strict, dls_event_destroy, x->events[i]);
  for (int i = 0; i < x->ngr && dls_graph_destroy != NULL; i++)
    REL(x, strict, dls_graph_destroy, x->graphs[i]);
  for (int i = 0; i < x->nf; i++)
    REL(x, strict, dls_function_destroy, x->functions[i]);
  for (int i = x->ns - 1; i >= 0; i--)
    REL(x, strict, dls_stream_destroy, x->streams[i]);
  return DLS_OK;
}

dls_status_t fx_release_all(fx *x) { return release_all(x, true); }

static void cleanup(fx *x) {
  (void)release_all(x, false);
  for (int i = 0; i < x->np; i++)
    if (!x->producers[i].handed)
      producer_done(&x->producers[i]); /* never given away: ours to release */
}

static bool status_expected(dls_status_t st) { return st == DLS_ERR_OUT_OF_MEMORY || st == DLS_ERR_BACKEND; }

/* The fixture outlives a run: a deleter that runs late still finds it. */
static fx g_fx;

/* Runs `sc` once with point `arm` failing (0: none) and checks the aftermath. */
static void run_once(const fx_scenario *sc, DLDevice d, uint64_t arm, fx_result *r) {
  memset(r, 0, sizeof *r);
  fx *x = &g_fx;
  memset(x, 0, sizeof *x);
  x->d = d;
  if (dls_shutdown() != DLS_OK)
    problem(r, "dls_shutdown before the run: %s", dls_last_error());
  int64_t base[DLS_FAULT_OBJECT_KINDS];
  for (int k = 0; k < DLS_FAULT_OBJECT_KINDS; k++) {
    uint64_t c, z;
    dls_fault_objects((dls_fault_object_t)k, &c, &z);
    base[k] = (int64_t)(c - z);
  }
  uint64_t blocked0 = dls_fault_blocked_waits();
  static int verbose = -1;
  if (verbose < 0)
    verbose = getenv("DLSTREAM_FAULT_VERBOSE") != NULL;
  if (verbose) /* a crash names the run that made it */
    fprintf(stderr, "fault injection: %s, point %llu\n", sc->name, (unsigned long long)arm);

  dls_fault_arm(arm, DLS_OK);
  r->st = sc->run(x);
  r->points = dls_fault_points();
  r->injected = dls_fault_injected();
  r->point = dls_fault_last();
  dls_fault_disarm();
  r->skip = x->skip;
  if (verbose && r->injected)
    fprintf(stderr, "fault injection: %s, point %llu is %s: %s\n", sc->name, (unsigned long long)arm, r->point,
            r->st == DLS_OK ? "absorbed" : x->step);

  if (x->wrong[0] != '\0')
    problem(r, "wrong result without a failing call: %s", x->wrong);
  else if (r->st != DLS_OK && r->injected == 0)
    problem(r, "%s failed with no fault injected: %s: %s", x->step, dls_status_name(r->st), x->msg);
  else if (r->st != DLS_OK) {
    if (!status_expected(r->st))
      problem(r, "%s returned %s, not the injected status", x->step, dls_status_name(r->st));
    if (strstr(x->msg, "dls_") == NULL)
      problem(r, "%s: the message names no call: \"%s\"", x->step, x->msg);
    if (strstr(x->msg, "fault injection") == NULL && strstr(x->msg, "memory") == NULL)
      problem(r, "%s: the message hides the cause: \"%s\"", x->step, x->msg);
  }
  if (x->out_not_zeroed)
    problem(r, "%s failed but left its output handle set", x->step);

  cleanup(x);
  for (int k = DLS_HANDLE_STREAM; k < DLS_HANDLE_KIND_COUNT_; k++) {
    size_t n = dls_live_handles((dls_handle_kind_t)k);
    if (n != 0)
      problem(r, "%zu %s handle(s) leaked", n, g_kind_names[k]);
  }
  if (dls_shutdown() != DLS_OK)
    problem(r, "dls_shutdown: %s", dls_last_error());
  for (int i = 0; i < x->np; i++) {
    const fx_producer *p = &x->producers[i];
    if (p->deleted != 1)
      problem(r, "producer %d's deleter ran %d times, not once", i, p->deleted);
  }
  for (int k = 0; k < DLS_FAULT_OBJECT_KINDS; k++) {
    uint64_t c, z;
    dls_fault_objects((dls_fault_object_t)k, &c, &z);
    int64_t live = (int64_t)(c - z) - base[k];
    if (live != 0)
      problem(r, "%lld native %s object(s) %s", (long long)(live > 0 ? live : -live),
              dls_fault_object_name((dls_fault_object_t)k), live > 0 ? "leaked" : "released twice");
  }
  /* A host wait while the scenario holds a stream with a latch could end only with the latch's timeout: counted
   * by the fault driver as it waits, not measured in seconds (a sanitizer's slowdown changes nothing). */
  uint64_t blocked = dls_fault_blocked_waits() - blocked0;
  if (blocked != 0)
    problem(r, "%llu host wait(s) blocked while a latch held a stream (only its timeout could end them)",
            (unsigned long long)blocked);
}

/* DLSTREAM_FAULT_STRIDE: sweep every k-th point (1, the default: every point). */
static uint64_t sweep_stride(void) {
  const char *v = getenv("DLSTREAM_FAULT_STRIDE");
  char *end = NULL;
  unsigned long long k = v != NULL ? strtoull(v, &end, 10) : 1;
  cr_assert(v == NULL || (end != v && *end == '\0' && k >= 1 && k <= 1000),
            "DLSTREAM_FAULT_STRIDE=%s: a whole number from 1 to 1000", v);
  return k;
}

/* A scenario's name hashed (FNV-1a): where its strided sweep begins, so that scenarios of many points are not all
 * failed at the same positions. */
static uint64_t name_hash(const char *name) {
  uint64_t h = 14695981039346656037ull;
  for (const char *c = name; *c != '\0'; c++)
    h = (h ^ (unsigned char)*c) * 1099511628211ull;
  return h;
}

fx_tally fx_sweep(const fx_scenario *sc, DLDevice d) {
  fx_tally t = {0};
  const char *bname = d.device_type == kDLCPU ? "cpu" : "gpu";
  fx_result r;
  run_once(sc, d, 0, &r); /* warms caches that persist across runs (handle tables) */
  run_once(sc, d, 0, &r);
  if (r.skip != NULL) {
    t.skipped = true;
    t.skip_reason = r.skip;
    printf("fault injection [%s] %s: skipped: %s\n", bname, sc->name, r.skip);
    return t;
  }
  cr_assert_eq(r.st, DLS_OK, "fault injection [%s] %s: the clean run failed: %s %s%s", bname, sc->name, g_fx.step,
               g_fx.msg, g_fx.wrong);
  cr_assert_eq(r.problem[0], '\0', "fault injection [%s] %s: the clean run: %s", bname, sc->name, r.problem);
  t.of = r.points;
  uint64_t stride = sweep_stride(), first = 1 + name_hash(sc->name) % stride;
  for (uint64_t n = first; n <= t.of; n += stride) {
    t.points++;
    run_once(sc, d, n, &r);
    if (r.injected == 1 && r.st != DLS_OK)
      t.failed++;
    else if (r.injected == 1)
      t.absorbed++;
    if (r.problem[0] == '\0') {
      t.survived++;
    } else {
      fprintf(stderr, "fault injection [%s] %s: point %llu (%s, %s): %s\n", bname, sc->name, (unsigned long long)n,
              r.injected ? r.point : "not reached", r.st == DLS_OK ? "absorbed" : g_fx.step, r.problem);
    }
  }
  run_once(sc, d, 0, &r);
  if (r.st != DLS_OK || r.problem[0] != '\0') {
    fprintf(stderr, "fault injection [%s] %s: the clean run after the sweep: %s %s\n", bname, sc->name,
            dls_status_name(r.st), r.problem);
    t.survived = t.survived > 0 ? t.survived - 1 : 0;
  }
  printf("fault injection [%s] %s: %llu of %llu points (%llu reported, %llu absorbed), %llu survived\n", bname,
         sc->name, (unsigned long long)t.points, (unsigned long long)t.of, (unsigned long long)t.failed,
         (unsigned long long)t.absorbed, (unsigned long long)t.survived);
  return t;
}
