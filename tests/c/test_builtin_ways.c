/* SPDX-License-Identifier: Apache-2.0 */
/* Every built-in through dls_launch with tensors, from the built-ins' table (kernels/builtin_table.h), so a new
 * built-in is covered without an edit here: a valid call runs; a wrong element type for each memory argument, too
 * few elements (each memory argument empty in turn), counts and descriptors past the memory, and a partial overlap
 * of what it reads and writes are each refused with dls_launch's error, and no byte of any memory changes.
 * tests/python/test_builtin_ways.py does the Python ways in. */
#include "common.h"
#include "kernels/builtin_table.h"

TestSuite(builtin_ways, .fini = dlst_fini);

enum { N = 8, BYTES = 2 * N * 8, SENTINEL = 7 };

typedef struct bi {
  const char *name;
  size_t nargs;
  dls__builtin_arg args[DLS__BUILTIN_MAX_ARGS];
} bi;
#define BI(id, name, nargs, args, ...) {name, nargs, {DLS__UNPAREN args}},
static const bi g_table[] = {DLS__BUILTINS(BI)};
#undef BI
enum { NB = sizeof g_table / sizeof g_table[0] };

enum { VALID, WRONG_DTYPE, TOO_FEW, REACH_PAST, OVERLAP };
static const char *const g_cases[] = {"valid", "wrong dtype", "too few elements", "reach past", "overlap"};

static bool is_memory(uint32_t what) {
  return DLS__A_KIND(what) == DLS__ARG_MEM_P || DLS__A_KIND(what) == DLS__ARG_MEM_CP;
}

/* An element type argument `what` takes (a size argument's and a descriptor's: float32), or one it does not. */
static DLDataType dtype_for(uint32_t what, bool wrong) {
  uint32_t t = DLS__A_TYPE(what), p = DLS__T_PARAM(t);
  switch (DLS__T_RULE(t)) {
  case DLS__T_RULE(DLS__T_EXACT(0, 0)): {
    uint8_t code = (uint8_t)(p >> 8), bits = (uint8_t)p;
    return (DLDataType){wrong ? (uint8_t)(code == kDLFloat ? kDLInt : kDLFloat) : code, bits, 1};
  }
  case DLS__T_RULE(DLS__T_INT(0)): return (DLDataType){wrong ? kDLFloat : kDLInt, (uint8_t)p, 1};
  case DLS__T_RULE(DLS__T_SIZED(0)): return (DLDataType){kDLFloat, wrong ? 64 : 32, 1};
  default: return (DLDataType){wrong ? kDLInt : kDLFloat, 32, 1};
  }
}

/* The two memory arguments of a partial overlap: one it writes, one it reads; false when it has no such pair. */
static bool overlap_pair(const bi *b, size_t *w, size_t *r) {
  int fw = -1, fr = -1;
  for (size_t i = 0; i < b->nargs; i++) {
    uint32_t a = b->args[i].what;
    if (DLS__A_KIND(a) == DLS__ARG_MEM_P && !(a & DLS__A_AS_READ) && fw < 0)
      fw = (int)i;
    if (DLS__A_KIND(a) == DLS__ARG_MEM_CP && fr < 0)
      fr = (int)i;
  }
  *w = (size_t)fw;
  *r = (size_t)fr;
  return fw >= 0 && fr >= 0;
}

/* Why a case does not apply to a built-in, or NULL. */
static const char *not_applying(const bi *b, int c) {
  bool mem = false, sized_by_value = false;
  for (size_t i = 0; i < b->nargs; i++) {
    mem |= is_memory(b->args[i].what);
    sized_by_value |= (b->args[i].what & DLS__A_COUNT) || DLS__A_KIND(b->args[i].what) == DLS_ARG_BYTES;
  }
  size_t w, r;
  if (c != VALID && !mem)
    return "it takes no memory";
  if (c == REACH_PAST && !sized_by_value)
    return "no count or descriptor says how much memory it reaches";
  if (c == OVERLAP && !overlap_pair(b, &w, &r))
    return "it does not read one memory argument while it writes another";
  return NULL;
}

typedef struct ctx {
  DLDevice d;
  dls_stream_t s;
  dls_buffer_t buf[DLS__BUILTIN_MAX_ARGS]; /* one per memory argument, SENTINEL bytes */
  char *ptr[DLS__BUILTIN_MAX_ARGS];
  dls_tensor_t t[DLS__BUILTIN_MAX_ARGS];
  dls_copy_desc_t copy;
  dls_convert_desc_t convert;
  dls_arg_t args[DLS__BUILTIN_MAX_ARGS];
} ctx;

/* A view of `n` elements of `dt` at `p`. */
static dls_tensor_t view(ctx *c, void *p, DLDataType dt, int64_t n) { return dlst_view(c->d, c->s, p, dt, n); }

/* The arguments of built-in `b` in case `c` (`arg`: the memory argument it is about). */
static void make_args(ctx *c, const bi *b, int cs, size_t arg) {
  uint64_t count = cs == REACH_PAST ? N * 1000 : N;
  size_t w = 0, r = 0;
  bool pair = cs == OVERLAP && overlap_pair(b, &w, &r);
  for (size_t i = 0; i < b->nargs; i++) {
    uint32_t a = b->args[i].what, kind = DLS__A_KIND(a);
    c->t[i].id = 0;
    if (is_memory(a)) {
      DLDataType dt = dtype_for(a, cs == WRONG_DTYPE && i == arg);
      char *p = pair && i == w ? c->ptr[r] + dt.bits / 8 : c->ptr[i]; /* written one element on from the read */
      c->t[i] = view(c, p, dt, cs == TOO_FEW && i == arg ? 0 : N);
      c->args[i] = kind == DLS__ARG_MEM_P ? dls_arg_tensor(c->t[i]) : dls_arg_tensor_in(c->t[i]);
      continue;
    }
    bool sized = false;
    for (size_t j = 0; j < b->nargs; j++)
      sized |= is_memory(b->args[j].what) && DLS__A_TYPE(b->args[j].what) == DLS__T_SIZED(i);
    uint64_t v = sized ? 4 : (a & DLS__A_COUNT) ? count : N;
    int64_t n = (int64_t)count, stride = cs == REACH_PAST ? 0 : 1;
    switch (kind) {
    case DLS_ARG_U32: c->args[i] = dls_arg_u32((uint32_t)v); break;
    case DLS_ARG_U64: c->args[i] = dls_arg_u64(v); break;
    case DLS_ARG_I32: c->args[i] = dls_arg_i32((int32_t)v); break;
    case DLS_ARG_I64: c->args[i] = dls_arg_i64((int64_t)v); break;
    case DLS_ARG_F32: c->args[i] = dls_arg_f32(1.0f); break;
    case DLS_ARG_F64: c->args[i] = dls_arg_f64(1.0); break;
    case DLS_ARG_BYTES:
      if (DLS__T_PARAM(a) == DLS__DESC_COPY) {
        c->copy = (dls_copy_desc_t){
            .ndim = 1, .elem_size = 4, .shape = {n}, .dst_strides = {1}, .src_strides = {stride}};
        c->args[i] = dls_arg_bytes(&c->copy, sizeof c->copy);
      } else if (DLS__T_PARAM(a) == DLS__DESC_CONVERT) {
        c->convert = (dls_convert_desc_t){.ndim = 1, .dst_dtype = {kDLFloat, 32, 1}, .src_dtype = {kDLFloat, 32, 1},
                                          .shape = {n}, .dst_strides = {1}, .src_strides = {stride}};
        c->args[i] = dls_arg_bytes(&c->convert, sizeof c->convert);
      } else {
        cr_assert(false, "%s: no descriptor maker for struct %u: add one here for the table's new struct", b->name,
                       DLS__T_PARAM(a));
      }
      break;
    default: cr_assert(false, "%s: argument kind %u unknown to this test", b->name, kind);
    }
  }
}

/* What dls_launch's message says in case `c`. */
static const char *expected(int c) {
  return c == WRONG_DTYPE ? " elements are " : c == OVERLAP ? "partially overlaps" : "needs bytes";
}

/* One cell: 0 when it went as it must, 1 (with the expectation that failed) when not. */
static int one_case(ctx *c, const bi *b, dls_function_t f, int cs, size_t arg) {
  unsigned char sentinel[BYTES];
  memset(sentinel, SENTINEL, sizeof sentinel);
  for (size_t i = 0; i < b->nargs; i++)
    if (is_memory(b->args[i].what))
      OK(dls_buffer_write(c->buf[i], 0, sentinel, sizeof sentinel, c->s));
  make_args(c, b, cs, arg);
  dls_launch_config_t cfg = dls_config_1d(1, 32);
  dls_status_t st = dls_launch(f, c->s, &cfg, c->args, b->nargs);
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", dls_last_error());
  for (size_t i = 0; i < b->nargs; i++)
    OK(dls_tensor_release(c->t[i]));
  OK(dls_stream_synchronize(c->s));
  const char *what = b->nargs > arg ? b->args[arg].name : "";
  if (cs == VALID) {
    cr_expect_eq(st, DLS_OK, "%s, a valid call: %s", b->name, msg);
    return 0;
  }
  /* Expectations, not assertions: every cell of the grid reports (a failing one does not hide the next). */
  int failed = 0;
  if (st != DLS_ERR_INVALID_ARGUMENT || strncmp(msg, "dls_launch(", 11) != 0 || strstr(msg, expected(cs)) == NULL ||
      (cs == WRONG_DTYPE && strstr(msg, what) == NULL)) {
    cr_expect(false, "%s, %s (%s): %s \"%s\", not dls_launch's INVALID_ARGUMENT naming %s with \"%s\"", b->name,
                   g_cases[cs], what, dls_status_name(st), msg, what, expected(cs));
    failed = 1;
  }
  for (size_t i = 0; i < b->nargs; i++) {
    if (!is_memory(b->args[i].what))
      continue;
    unsigned char now[BYTES];
    OK(dls_buffer_read(c->buf[i], 0, now, sizeof now, c->s));
    OK(dls_stream_synchronize(c->s));
    if (memcmp(now, sentinel, sizeof now) != 0) {
      cr_expect(false, "%s, %s (%s): the launch wrote %s", b->name, g_cases[cs], what, b->args[i].name);
      failed = 1;
    }
  }
  return failed;
}

BACKEND_TEST(builtin_ways, every_builtin_refuses_every_bad_launch_and_writes_nothing) {
  ctx c;
  memset(&c, 0, sizeof c);
  c.d = dlst_device(*backend_type);
  OK(dls_stream_create(c.d, NULL, &c.s));
  for (int i = 0; i < DLS__BUILTIN_MAX_ARGS; i++) {
    OK(dls_buffer_alloc(c.s, BYTES, &c.buf[i]));
    OK(dls_buffer_ptr(c.buf[i], (void **)&c.ptr[i]));
  }
  int ran[5] = {0}, failed = 0, skipped = 0;
  for (int k = 0; k < NB; k++) {
    const bi *b = &g_table[k];
    dls_function_t f;
    if (dls_builtin_function(c.d, b->name, &f) != DLS_OK) {
      cr_expect(false, "%s: %s", b->name, dls_last_error());
      failed++;
      continue;
    }
    for (int cs = VALID; cs <= OVERLAP; cs++) {
      if (not_applying(b, cs) != NULL) {
        skipped++;
        continue;
      }
      size_t n = 0;
      for (size_t i = 0; i < b->nargs && (cs == WRONG_DTYPE || cs == TOO_FEW); i++) {
        if (is_memory(b->args[i].what)) {
          failed += one_case(&c, b, f, cs, i);
          n++;
        }
      }
      if (n == 0)
        failed += one_case(&c, b, f, cs, DLS__BUILTIN_MAX_ARGS);
      ran[cs] += n ? (int)n : 1;
    }
  }
  cr_log_info("builtin_ways on %s: %d built-ins; cells run: %d valid, %d wrong dtype, %d too few, %d reach past, "
              "%d overlap (%d failed); %d that do not apply",
              c.d.device_type == kDLCPU ? "cpu" : "gpu", NB, ran[0], ran[1], ran[2], ran[3], ran[4], failed, skipped);
  cr_assert_eq(ran[VALID], NB, "every built-in ran a valid call");
  for (int i = 0; i < DLS__BUILTIN_MAX_ARGS; i++)
    OK(dls_buffer_free(c.buf[i]));
  OK(dls_stream_destroy(c.s));
}
