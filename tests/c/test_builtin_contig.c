/* SPDX-License-Identifier: Apache-2.0 */
/* The core runs a contiguous dls_copy_strided or dls_copy_convert through its twin with small arguments
 * (kernels/builtin_table.h's DLS__TWINS), a strided one through the descriptor kernel: both give convert.h's bits
 * (a copy's: the source's), for every pair of types with a loop of its own (convert.h's DLS__CV_PAIRS) and between
 * one type, at every offset of each side in its 16 bytes, for lengths 0 to 70 and longer ones, and leave every
 * other byte as it was. DLSTREAM_TEST_BREAK_TWINS=1 (the twins get one element fewer) is the negative control: the
 * contiguous calls then miss their last element, which shows they ran through the twins. */
#include <math.h>

#include "common.h"
#include "kernels/convert.h"

TestSuite(builtin_contig, .fini = dlst_fini);

enum { SENTINEL = 0xa5, MOST_BYTES = 1 << 17 };

/* Lengths of each batch: 0 to 70 (around every vector of every width), then two longer ones. */
static const int64_t g_longer[] = {257, 4099};
enum { NSHORT = 71, NLEN = NSHORT + 2 };
static int64_t length_of(int j) { return j < NSHORT ? j : g_longer[j - NSHORT]; }

typedef struct pair {
  DLDataType src, dst;
} pair;
#define PAIR(sc, sb, dc, db) {{sc, sb, 1}, {dc, db, 1}},
static const pair g_pairs[] = {DLS__CV_PAIRS(PAIR)};
#undef PAIR
enum { NPAIRS = sizeof g_pairs / sizeof g_pairs[0] };

typedef struct ctx_t {
  DLDevice d;
  dls_stream_t s;
  dls_buffer_t src, dst;
  char *ps, *pd;              /* their device addresses */
  unsigned char host_src[MOST_BYTES], got[MOST_BYTES], want[MOST_BYTES];
  size_t at_src[NLEN], at_dst[NLEN]; /* where each length's batch starts (16-byte aligned) */
  size_t src_bytes, dst_bytes;
} ctx_t;

static ctx_t *open_ctx(DLDeviceType t) {
  ctx_t *c = calloc(1, sizeof *c);
  cr_assert(c != NULL);
  c->d = dlst_device(t);
  OK(dls_stream_create(c->d, NULL, &c->s));
  OK(dls_buffer_alloc(c->s, MOST_BYTES, &c->src));
  OK(dls_buffer_alloc(c->s, MOST_BYTES, &c->dst));
  OK(dls_buffer_ptr(c->src, (void **)&c->ps));
  OK(dls_buffer_ptr(c->dst, (void **)&c->pd));
  return c;
}

static void close_ctx(ctx_t *c) {
  OK(dls_buffer_free(c->src));
  OK(dls_buffer_free(c->dst));
  OK(dls_stream_destroy(c->s));
  free(c);
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static unsigned char next_byte(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (unsigned char)(g_rng >> 32);
}

/* Lays the batches out for elements of `ss` and `ds` bytes, fills the source with random bytes (NaNs, infinities
 * and subnormals among them) and the destination with SENTINEL, on the device and in `want`. */
static void start(ctx_t *c, uint32_t ss, uint32_t ds) {
  size_t s = 0, d = 0;
  for (int j = 0; j < NLEN; j++) {
    c->at_src[j] = s;
    c->at_dst[j] = d;
    s += ((size_t)length_of(j) * ss + 16 + 15) / 16 * 16 + 16;
    d += ((size_t)length_of(j) * ds + 16 + 15) / 16 * 16 + 16;
  }
  cr_assert(s <= MOST_BYTES && d <= MOST_BYTES);
  c->src_bytes = s;
  c->dst_bytes = d;
  for (size_t i = 0; i < s; i++)
    c->host_src[i] = next_byte();
  memset(c->want, SENTINEL, d);
  OK(dls_buffer_write(c->src, 0, c->host_src, s, c->s));
  OK(dls_buffer_write(c->dst, 0, c->want, d, c->s));
}

/* A 1-D view of n elements (contiguous), or the same n elements as an n/2 x 2 view walked column by column (a
 * strided view: the descriptor kernel). */
static void view_of(int64_t n, bool strided, uint32_t *ndim, int64_t *shape, int64_t *strides) {
  if (strided) {
    *ndim = 2;
    shape[0] = n / 2, shape[1] = 2;
    strides[0] = 1, strides[1] = n / 2;
  } else {
    *ndim = 1;
    shape[0] = n;
    strides[0] = 1;
  }
}

/* Every batch through dls_copy_convert (or dls_copy_strided where `copy`): dst at doff, src at soff bytes past their
 * batch's 16-byte boundary; strided: only the even lengths, as views walked column by column. */
static void run(ctx_t *c, pair p, bool copy, uint32_t doff, uint32_t soff, bool strided) {
  for (int j = 0; j < NLEN; j++) {
    int64_t n = length_of(j);
    if (strided && (n < 4 || n % 2 != 0))
      continue;
    void *to = c->pd + c->at_dst[j] + doff, *from = c->ps + c->at_src[j] + soff;
    if (copy) {
      dls_copy_desc_t d = {.elem_size = p.dst.bits / 8};
      view_of(n, strided, &d.ndim, d.shape, d.dst_strides);
      memcpy(d.src_strides, d.dst_strides, sizeof d.src_strides);
      OK(dls_copy_strided(c->s, dls_arg_ptr(to), dls_arg_ptr(from), &d));
    } else {
      dls_convert_desc_t d = {.dst_dtype = p.dst, .src_dtype = p.src};
      view_of(n, strided, &d.ndim, d.shape, d.dst_strides);
      memcpy(d.src_strides, d.dst_strides, sizeof d.src_strides);
      OK(dls_copy_convert(c->s, dls_arg_ptr(to), dls_arg_ptr(from), &d));
    }
  }
  OK(dls_buffer_read(c->dst, 0, c->got, c->dst_bytes, c->s));
  OK(dls_stream_synchronize(c->s));
}

static bool is_nan(DLDataType t, const unsigned char *p) {
  uint64_t u = 0;
  memcpy(&u, p, t.bits / 8);
  if (t.code == kDLBfloat)
    return (u & 0x7fff) > 0x7f80;
  if (t.code != kDLFloat)
    return false;
  return t.bits == 16 ? (u & 0x7fff) > 0x7c00 : t.bits == 32 ? (u & 0x7fffffff) > 0x7f800000
                                                              : (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}

/* What the calls of run() must leave: convert.h's element function (between one type: the bytes) over each batch's
 * elements; a NaN may carry other payload bits (a GPU's instructions: convert.cu; a compiler's folding of a float's
 * round trip through a double). Returns the first differing batch's length, or -1. */
static int64_t check(ctx_t *c, pair p, bool copy, uint32_t doff, uint32_t soff, bool strided) {
  uint32_t ds = p.dst.bits / 8, ss = p.src.bits / 8;
  memset(c->want, SENTINEL, c->dst_bytes);
  for (int j = 0; j < NLEN; j++) {
    int64_t n = length_of(j);
    if (strided && (n < 4 || n % 2 != 0))
      continue;
    unsigned char *w = c->want + c->at_dst[j] + doff, *g = c->got + c->at_dst[j] + doff;
    const unsigned char *s = c->host_src + c->at_src[j] + soff;
    for (int64_t i = 0; i < n; i++) {
      bool one_type = memcmp(&p.dst, &p.src, sizeof p.dst) == 0;
      if (one_type)
        memcpy(w + i * ds, s + i * ss, ds);
      else
        dls__cv_convert(w + i * ds, p.dst, s + i * ss, p.src);
      if (!one_type && is_nan(p.dst, w + i * ds) && is_nan(p.dst, g + i * ds))
        memcpy(g + i * ds, w + i * ds, ds);
    }
  }
  for (int j = 0; j < NLEN; j++) {
    size_t end = j + 1 < NLEN ? c->at_dst[j + 1] : c->dst_bytes;
    if (memcmp(c->got + c->at_dst[j], c->want + c->at_dst[j], end - c->at_dst[j]) != 0)
      return length_of(j);
  }
  return -1;
}

static const char *type_name(DLDataType t, char *buf, size_t size) {
  static const char *const codes[] = {[kDLInt] = "int", [kDLUInt] = "uint", [kDLFloat] = "float",
                                      [kDLBfloat] = "bfloat", [kDLBool] = "bool"};
  snprintf(buf, size, "%s%u", codes[t.code], (unsigned)t.bits);
  return buf;
}

/* Both paths of one pair (or of one element size, `copy`), at every offset of each side in its 16 bytes that keeps
 * the elements aligned to their size (a copy's: to its element size; 1-byte elements at every byte). */
static void both_paths(ctx_t *c, pair p, bool copy) {
  uint32_t ds = p.dst.bits / 8, ss = p.src.bits / 8;
  char name[2][24];
  for (uint32_t doff = 0; doff < 16; doff += ds)
    for (uint32_t soff = 0; soff < 16; soff += ss)
      for (int strided = 0; strided < 2; strided++) {
        start(c, ss, ds);
        run(c, p, copy, doff, soff, strided);
        int64_t bad = check(c, p, copy, doff, soff, strided);
        cr_assert(bad < 0, "%s %s -> %s, %s view, dst at +%u, src at +%u: the batch of %lld elements differs",
                  copy ? "dls_copy_strided" : "dls_copy_convert", type_name(p.src, name[0], sizeof name[0]),
                  type_name(p.dst, name[1], sizeof name[1]), strided ? "a strided" : "a contiguous", doff, soff,
                  (long long)bad);
      }
}

BACKEND_TEST(builtin_contig, every_pair_gives_the_element_functions_bits_on_both_paths) {
  ctx_t *c = open_ctx(*backend_type);
  for (int i = 0; i < NPAIRS; i++)
    both_paths(c, g_pairs[i], false);
  close_ctx(c);
}

BACKEND_TEST(builtin_contig, copies_and_one_type_conversions_give_the_sources_bytes) {
  ctx_t *c = open_ctx(*backend_type);
  static const DLDataType sized[] = {{kDLUInt, 8, 1}, {kDLUInt, 16, 1}, {kDLFloat, 32, 1}, {kDLFloat, 64, 1}};
  for (int i = 0; i < 4; i++) {
    both_paths(c, (pair){sized[i], sized[i]}, true);
    both_paths(c, (pair){sized[i], sized[i]}, false); /* dls_copy_convert between one type: the copy's twin */
  }
  close_ctx(c);
}

/* The negative control: with the twins given one element fewer, every contiguous batch of at least one element
 * misses its last (the sentinel stays), and the strided path is untouched. */
BACKEND_TEST(builtin_contig, broken_twins_miss_the_last_element) {
  setenv("DLSTREAM_TEST_BREAK_TWINS", "1", 1);
  OK(dls_shutdown()); /* the switch is read at start-up */
  ctx_t *c = open_ctx(*backend_type);
  static const pair cases[] = {{{kDLFloat, 32, 1}, {kDLFloat, 16, 1}}, {{kDLInt, 64, 1}, {kDLInt, 32, 1}}};
  for (int k = 0; k < 3; k++) {
    pair p = k < 2 ? cases[k] : (pair){{kDLUInt, 8, 1}, {kDLUInt, 8, 1}};
    bool copy = k == 2;
    uint32_t ds = p.dst.bits / 8;
    start(c, p.src.bits / 8, ds);
    run(c, p, copy, 0, 0, false);
    cr_assert_eq(check(c, p, copy, 0, 0, false), 1, "the first batch to differ is the one of 1 element");
    for (int j = 1; j < NLEN; j++) { /* the last element of every batch is the sentinel still */
      const unsigned char *last = c->got + c->at_dst[j] + (size_t)(length_of(j) - 1) * ds;
      for (uint32_t b = 0; b < ds; b++)
        cr_assert_eq(last[b], SENTINEL, "batch of %lld: its last element was written", (long long)length_of(j));
    }
    start(c, p.src.bits / 8, ds);
    run(c, p, copy, 0, 0, true);
    cr_assert_eq(check(c, p, copy, 0, 0, true), -1, "the strided path does not take the twins");
  }
  close_ctx(c);
  unsetenv("DLSTREAM_TEST_BREAK_TWINS");
  OK(dls_shutdown());
}
