/* SPDX-License-Identifier: Apache-2.0 */
/* The core runs dls_fill and dls_axpy_f32 through their vector twins (kernels/builtin_table.h's DLS__TWINS) where
 * every address is aligned to 16 and the call moves whole 16-byte vectors, and through the built-in otherwise: both
 * give the reference's values at every 4-byte offset in 16 bytes and every length from 0 to 70 (and longer ones),
 * and leave every other byte as it was. DLSTREAM_TEST_BREAK_TWINS=1 (the twins get one vector fewer) is the negative
 * control: the aligned calls of whole vectors then miss their last 16 bytes, and no other call misses anything,
 * which shows which calls ran through the twins. The contiguous copy's vector twin: test_builtin_contig.c. */
#include "common.h"

TestSuite(builtin_vectors, .fini = dlst_fini);

enum { NSHORT = 71, NLEN = NSHORT + 2, SLOT = (4099 * 4 + 32 + 15) / 16 * 16 };
static const int64_t g_longer[] = {256, 4099};
static int64_t length_of(int j) { return j < NSHORT ? j : g_longer[j - NSHORT]; }

typedef struct ctx_t {
  dls_stream_t s;
  dls_buffer_t x, y;
  char *px, *py; /* their device addresses: a slot of SLOT bytes a length, each slot aligned to 16 */
  float hx[NLEN * SLOT / 4], hy[NLEN * SLOT / 4], got[NLEN * SLOT / 4];
} ctx_t;

static ctx_t *open_ctx(DLDeviceType t) {
  ctx_t *c = calloc(1, sizeof *c);
  cr_assert(c != NULL);
  OK(dls_stream_create(dlst_device(t), NULL, &c->s));
  OK(dls_buffer_alloc(c->s, sizeof c->hx, &c->x));
  OK(dls_buffer_alloc(c->s, sizeof c->hy, &c->y));
  OK(dls_buffer_ptr(c->x, (void **)&c->px));
  OK(dls_buffer_ptr(c->y, (void **)&c->py));
  cr_assert((uintptr_t)c->px % 16 == 0 && (uintptr_t)c->py % 16 == 0, "buffers are aligned to 16");
  for (size_t i = 0; i < sizeof c->hx / 4; i++)
    c->hx[i] = (float)(int)(1 + i % 97), c->hy[i] = (float)(int)(i % 89); /* x never 0: every update shows */
  return c;
}

static void close_ctx(ctx_t *c) {
  OK(dls_buffer_free(c->x));
  OK(dls_buffer_free(c->y));
  OK(dls_stream_destroy(c->s));
  free(c);
}

/* Every length's call at `off` bytes past its slot's start (a fill of `y` where `fill`, else y = 2 x + y), then y
 * read back into got. */
static void run(ctx_t *c, bool fill, uint32_t off) {
  OK(dls_buffer_write(c->x, 0, c->hx, sizeof c->hx, c->s));
  OK(dls_buffer_write(c->y, 0, c->hy, sizeof c->hy, c->s));
  for (int j = 0; j < NLEN; j++) {
    uint64_t n = (uint64_t)length_of(j);
    char *x = c->px + (size_t)j * SLOT + off, *y = c->py + (size_t)j * SLOT + off;
    const float v = 7.5f;
    if (fill)
      OK(dls_fill(c->s, dls_arg_ptr(y), n, 4, &v));
    else
      OK(dls_axpy_f32(c->s, n, 2.0f, dls_arg_ptr(x), dls_arg_ptr(y)));
  }
  OK(dls_buffer_read(c->y, 0, c->got, sizeof c->got, c->s));
  OK(dls_stream_synchronize(c->s));
}

/* The elements of length j's call that differ from the reference (-1: a byte outside the call's elements changed). */
static int64_t wrong(const ctx_t *c, bool fill, uint32_t off, int j) {
  const size_t first = ((size_t)j * SLOT + off) / 4, n = (size_t)length_of(j);
  int64_t bad = 0;
  for (size_t i = (size_t)j * SLOT / 4; i < (size_t)(j + 1) * SLOT / 4; i++) {
    bool inside = i >= first && i < first + n;
    float want = !inside ? c->hy[i] : fill ? 7.5f : 2.0f * c->hx[i] + c->hy[i]; /* small integers: exact */
    if (c->got[i] != want) {
      if (!inside)
        return -1;
      bad++;
    }
  }
  return bad;
}

BACKEND_TEST(builtin_vectors, fill_and_axpy_give_the_reference_at_every_offset) {
  ctx_t *c = open_ctx(*backend_type);
  for (int fill = 0; fill < 2; fill++)
    for (uint32_t off = 0; off < 16; off += 4) {
      run(c, fill, off);
      for (int j = 0; j < NLEN; j++)
        cr_assert_eq(wrong(c, fill, off, j), 0, "%s of %lld floats at +%u: wrong elements", fill ? "fill" : "axpy",
                     (long long)length_of(j), off);
    }
  close_ctx(c);
}

/* The negative control: with the twins given one vector fewer, exactly the aligned calls of whole vectors miss
 * their last 4 floats. */
BACKEND_TEST(builtin_vectors, broken_twins_miss_the_last_vector_of_aligned_calls) {
  setenv("DLSTREAM_TEST_BREAK_TWINS", "1", 1);
  OK(dls_shutdown()); /* the switch is read at start-up */
  ctx_t *c = open_ctx(*backend_type);
  for (int fill = 0; fill < 2; fill++)
    for (uint32_t off = 0; off < 16; off += 4) {
      run(c, fill, off);
      for (int j = 0; j < NLEN; j++) {
        int64_t n = length_of(j);
        bool twin = off == 0 && n > 0 && n % 4 == 0;
        cr_assert_eq(wrong(c, fill, off, j), twin ? 4 : 0, "%s of %lld floats at +%u: %s", fill ? "fill" : "axpy",
                     (long long)n, off, twin ? "the twin's last vector was written" : "an element is wrong");
      }
    }
  close_ctx(c);
  unsetenv("DLSTREAM_TEST_BREAK_TWINS");
  OK(dls_shutdown());
}
