// SPDX-License-Identifier: Apache-2.0
// The CUDA built-in kernels' own code, run on the host thread by thread (kernels_on_host.h): fill, axpy, strided
// copy and convert against a reference written element by element, for starts at every place in their 16 bytes,
// lengths around every vector width, strided, reversed, broadcast and permuted views, conversions between every
// pair of types same_kind casting allows, and grids of one thread, a few, 2-D and 3-D, the core's, and one of 2^32
// threads (the 64-bit index loops). Every byte of each buffer is compared, so a write outside its view fails too.
// Needs no GPU; tests/python/test_builtin_edges.py runs the same edges on one.
// The standard headers come first: kernels_on_host.h defines CUDA's keywords (__noinline__ among them) as macros,
// which newer libstdc++ headers spell in their own attributes (g++ 13: "'noinline' was not declared").
#include <cstdio>
#include <random>
#include <vector>

#include "kernels_on_host.h"

#include "builtins.cu"
#include "convert.cu"

namespace {

std::mt19937_64 rng(42);
int failures = 0, checks = 0;

#define CHECK(c, ...)                                                                                            \
  do {                                                                                                           \
    checks++;                                                                                                    \
    if (!(c) && failures++ < 20) {                                                                               \
      std::printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                           \
      std::printf(__VA_ARGS__);                                                                                  \
      std::printf("\n");                                                                                         \
    }                                                                                                            \
  } while (0)

struct Grid {
  dim3 g, b;
  unsigned long long blocks; // 0: all
};

// The grids a launch may have; `items`: a thread per item on a device of 1024 threads (the core's grid of a strided
// view), and the core's grid of a fast path (`per` items a thread, a block a tile: core/builtin.c); `most`: the most
// items any loop of the kernel has (the grid of 2^32 threads runs that many).
std::vector<Grid> grids(uint64_t items, uint64_t most, unsigned per = DLS__MOVE_VECS) {
  uint64_t blocks = (items + 255) / 256, tiles = (items + per * 256 - 1) / (per * 256);
  blocks = blocks == 0 ? 1 : blocks > 4 ? 4 : blocks;
  return {{{1, 1, 1}, {1, 1, 1}, 0},
          {{3, 1, 1}, {32, 1, 1}, 0},
          {{2, 2, 1}, {4, 2, 1}, 0},
          {{1, 1, 2}, {3, 1, 3}, 0},
          {{(unsigned)blocks, 1, 1}, {256, 1, 1}, 0},
          {{(unsigned)(tiles == 0 ? 1 : tiles), 1, 1}, {256, 1, 1}, 0},
          {{1u << 24, 1, 1}, {256, 1, 1}, most / 256 + 2}}; // 2^32 threads: the first blocks hold every item
}

// Element counts of the fast paths' tests: around every vector width, then across several tiles of the core's grid
// (a tile: DLS__MOVE_VECS or DLS__FILL_VECS vectors of 16 bytes for each of 256 threads), whole and partial. `big`:
// with the longer ones (fewer starts, to keep the test short).
std::vector<uint64_t> counts(bool big) {
  if (big)
    return {2048, 2049, 8192 - 3, 8192, 8192 + 5, 2 * 8192 + 4097, 70001};
  return {0, 1, 2, 3, 4, 5, 7, 9, 15, 16, 17, 31, 33, 63, 64, 77, 100, 1000, 1001};
}

std::vector<unsigned char> random_bytes(size_t n) {
  std::vector<unsigned char> b(n);
  for (auto &x : b)
    x = (unsigned char)rng();
  return b;
}

unsigned char *aligned16(std::vector<unsigned char> &b) {
  return reinterpret_cast<unsigned char *>(((uintptr_t)b.data() + 15) & ~(uintptr_t)15);
}

void test_fill(bool big) {
  for (unsigned es = 1; es <= 8; es *= 2)
    for (unsigned off = 0; off < 24; off += big ? 5 * es : es)
      for (uint64_t count : counts(big))
        for (const Grid &gr : grids((count * es + 15) / 16, count, DLS__FILL_VECS)) {
          std::vector<unsigned char> buf = random_bytes(off + count * es + 64);
          unsigned char *base = aligned16(buf);
          std::vector<unsigned char> want = buf;
          uint64_t pattern = rng();
          for (uint64_t i = 0; i < count; i++)
            std::memcpy(&want[(base - buf.data()) + off + i * es], &pattern, es);
          emulate(gr.g, gr.b, gr.blocks, dls_fill, (void *)(base + off), (unsigned long long)count, es,
                  (unsigned long long)pattern);
          CHECK(buf == want, "fill %u-byte x %llu at +%u, grid %u x %u", es, (unsigned long long)count, off, gr.g.x,
                gr.b.x);
        }
}

template <typename T, typename K>
void test_axpy(K kernel, bool big) {
  for (unsigned xo = 0; xo < 6; xo += big ? 5 : 1)
    for (unsigned yo = 0; yo < 6; yo += big ? 2 : 1)
      for (uint64_t n : counts(big))
        for (const Grid &gr : grids(n * sizeof(T) / 16, n)) {
          std::vector<T> xb(n + 16), yb(n + 16);
          for (size_t i = 0; i < yb.size(); i++) {
            xb[i] = (T)(int)(rng() % 100);
            yb[i] = (T)(int)(rng() % 100);
          }
          T *x = reinterpret_cast<T *>(((uintptr_t)xb.data() + 15) & ~(uintptr_t)15) + xo;
          T *y = reinterpret_cast<T *>(((uintptr_t)yb.data() + 15) & ~(uintptr_t)15) + yo;
          std::vector<T> want = yb;
          T *wy = want.data() + (y - yb.data());
          for (uint64_t i = 0; i < n; i++)
            wy[i] = (T)2 * x[i] + wy[i]; // small integers: exact, fused or not
          emulate(gr.g, gr.b, gr.blocks, kernel, (unsigned long long)n, (T)2, (const T *)x, y);
          CHECK(yb == want, "axpy %zu-bit n=%llu, x at +%u, y at +%u elements, grid %u x %u", sizeof(T) * 8,
                (unsigned long long)n, xo, yo, gr.g.x, gr.b.x);
        }
}

// A view: shape and strides (elements).
struct View {
  uint32_t ndim;
  int64_t shape[8], dst[8], src[8];
};

std::vector<View> views() {
  std::vector<View> out;
  auto add = [&](std::initializer_list<int64_t> sh, std::initializer_list<int64_t> ds,
                 std::initializer_list<int64_t> ss) {
    View v{};
    v.ndim = (uint32_t)sh.size();
    std::copy(sh.begin(), sh.end(), v.shape);
    std::copy(ds.begin(), ds.end(), v.dst);
    std::copy(ss.begin(), ss.end(), v.src);
    out.push_back(v);
  };
  for (int64_t n : {0, 1, 2, 3, 5, 15, 16, 17, 31, 33, 64, 100, 257, 12289}) // 12289: three tiles and one
    add({n}, {1}, {1});
  add({}, {}, {});                                   // one element
  add({4, 5}, {5, 1}, {5, 1});                       // contiguous 2-D
  add({1, 7, 1, 3}, {21, 3, 3, 1}, {99, 3, 7, 1});   // contiguous once the extents of 1 are gone
  add({37}, {2}, {1});                               // 1-D strided
  add({37}, {1}, {3});
  add({37}, {-1}, {1});                              // reversed
  add({37}, {1}, {0});                               // broadcast
  add({6, 7}, {7, 1}, {1, 6});                       // transpose
  add({5, 6}, {6, 1}, {10, 1});                      // rows of a wider source
  add({3, 4, 5}, {20, 5, 1}, {1, 3, 12});            // permuted 3-D
  add({3, 4, 5}, {-20, 5, -1}, {20, -5, 1});
  add({2, 3}, {3, 1}, {0, 1});                       // broadcast rows
  return out;
}

bool contiguous(const View &v) { return dls__view_contiguous(v.ndim, v.shape, v.dst, v.src); }

uint64_t count_of(const View &v) {
  uint64_t c = 1;
  for (uint32_t k = 0; k < v.ndim; k++)
    c *= (uint64_t)v.shape[k];
  return c;
}

// Element offsets of element i, row-major.
void offsets(const View &v, uint64_t i, int64_t &d, int64_t &s) {
  d = s = 0;
  for (int k = (int)v.ndim - 1; k >= 0; k--) {
    int64_t idx = (int64_t)(i % (uint64_t)v.shape[k]);
    i /= (uint64_t)v.shape[k];
    d += idx * v.dst[k];
    s += idx * v.src[k];
  }
}

// The elements before the first one of a view (negative strides).
int64_t before(const View &v, const int64_t *strides) {
  int64_t lo = 0;
  for (uint32_t k = 0; k < v.ndim; k++)
    if (strides[k] < 0 && v.shape[k] > 0)
      lo += (v.shape[k] - 1) * -strides[k];
  return lo;
}

int64_t reach(const View &v, const int64_t *strides) {
  int64_t r = 1;
  for (uint32_t k = 0; k < v.ndim; k++)
    r += v.shape[k] > 0 ? (v.shape[k] - 1) * (strides[k] < 0 ? -strides[k] : strides[k]) : 0;
  return r;
}

template <typename Desc>
void set_view(Desc &d, const View &v) {
  d.ndim = v.ndim;
  for (uint32_t k = 0; k < v.ndim; k++) {
    d.shape[k] = v.shape[k];
    d.dst_strides[k] = v.dst[k];
    d.src_strides[k] = v.src[k];
  }
}

// The buffers of one view: its first element `doff` and `soff` bytes past a 16-byte boundary on each side (elements
// of `ds` and `ss` bytes), random bytes elsewhere (a source of bools: 0 and 1), and what the destination must hold:
// `elem(dst, src)` made each element.
struct Case {
  std::vector<unsigned char> db, sb, want;
  unsigned char *d, *wd;
  const unsigned char *s;
  uint64_t count;
  template <typename F>
  Case(const View &v, unsigned doff, unsigned soff, unsigned ds, unsigned ss, bool bools, F elem)
      : db(random_bytes((size_t)reach(v, v.dst) * ds + doff + 64)),
        sb(random_bytes((size_t)reach(v, v.src) * ss + soff + 64)), count(count_of(v)) {
    if (bools)
      for (auto &x : sb)
        x &= 1;
    d = aligned16(db) + doff + before(v, v.dst) * ds;
    s = aligned16(sb) + soff + before(v, v.src) * ss;
    want = db;
    wd = want.data() + (d - db.data());
    for (uint64_t i = 0; i < count; i++) {
      int64_t a, b;
      offsets(v, i, a, b);
      elem(wd + a * ds, s + b * ss);
    }
  }
};

void test_copy() {
  for (uint32_t es : {1u, 2u, 3u, 4u, 8u, 12u, 16u, 24u})
    for (const View &v : views())
      for (unsigned doff = 0; doff < 19; doff += (es == 1 ? 1 : 3))
        for (unsigned soff = 0; soff < 19; soff += (es == 1 ? 1 : 5)) {
          Case k(v, doff, soff, es, es, false,
                 [es](unsigned char *to, const unsigned char *from) { std::memcpy(to, from, es); });
          std::vector<unsigned char> &db = k.db;
          uint64_t c = k.count;
          dls_copy_desc_t desc{};
          desc.elem_size = es;
          set_view(desc, v);
          const std::vector<unsigned char> start = db;
          for (const Grid &gr : grids(c * es / 16 + 1, c * es)) {
            db = start; // same storage: d still points into it
            emulate(gr.g, gr.b, gr.blocks, dls_copy_strided, (void *)k.d, (const void *)k.s, desc);
            CHECK(db == k.want, "copy %u-byte elements, ndim %u, shape[0] %lld, dst at +%u, src at +%u, grid %u x %u",
                  es, v.ndim, (long long)v.shape[0], doff, soff, gr.g.x, gr.b.x);
            if (!contiguous(v) || gr.b.x != 256)
              continue; // the twin on the core's grids (the others once, above: the test's time)
            db = start; // the core's twin of a contiguous view (builtin_table.h's DLS__TWINS): the same bytes
            emulate(gr.g, gr.b, gr.blocks, dls__copy_bytes, (void *)k.d, (const void *)k.s, c * es);
            CHECK(db == k.want, "dls__copy_bytes of %u-byte elements, shape[0] %lld, dst at +%u, src at +%u, grid %u x %u",
                  es, (long long)v.shape[0], doff, soff, gr.g.x, gr.b.x);
          }
        }
}

// The core's twins of dls_convert for a contiguous view, by the index of their pair in DLS__CV_PAIRS.
typedef void twin_kernel(void *, const void *, unsigned long long);
#define TWIN_ROW(sc, sb, dc, db) DLS__CV_SYMBOL(sc, sb, dc, db),
twin_kernel *const cv_twins[] = {DLS__CV_PAIRS(TWIN_ROW)};
#undef TWIN_ROW

struct Type {
  uint8_t code, bits;
};
const Type types[] = {{kDLBool, 8},  {kDLUInt, 8},    {kDLUInt, 16},  {kDLUInt, 32}, {kDLUInt, 64},
                      {kDLInt, 8},   {kDLInt, 16},    {kDLInt, 32},   {kDLInt, 64},  {kDLFloat, 16},
                      {kDLBfloat, 16}, {kDLFloat, 32}, {kDLFloat, 64}};

int kind_of(Type t) { return t.code == kDLBool ? 0 : t.code == kDLUInt ? 1 : t.code == kDLInt ? 2 : 3; }

bool is_nan(Type t, const unsigned char *p) {
  if (kind_of(t) != 3)
    return false;
  if (t.bits == 64) {
    double d;
    std::memcpy(&d, p, 8);
    return d != d;
  }
  if (t.bits == 32) {
    float f;
    std::memcpy(&f, p, 4);
    return f != f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t.code == kDLBfloat ? (h & 0x7fff) > 0x7f80 : (h & 0x7fff) > 0x7c00;
}

// Every cast same_kind allows (one type: a copy), every view, random bits (NaN, infinities, subnormals among
// them), against convert.h's element function: equal bits, or NaN for NaN.
void test_convert() {
  for (Type st : types)
    for (Type dt : types) {
      bool same = st.code == dt.code && st.bits == dt.bits;
      if (!same && (kind_of(dt) < kind_of(st) || (kind_of(dt) == 0 && kind_of(st) == 0)))
        continue;
      unsigned ss = st.bits / 8, ds = dt.bits / 8;
      DLDataType dd{dt.code, dt.bits, 1}, sd{st.code, st.bits, 1};
      for (const View &v : views())
        for (unsigned doff = 0; doff < 5; doff++)
          for (unsigned soff = 0; soff < 5; soff += 2) {
            Case k(v, doff * ds, soff * ss, ds, ss, st.code == kDLBool,
                   [&](unsigned char *to, const unsigned char *from) {
                     if (same)
                       std::memcpy(to, from, ds);
                     else
                       dls__cv_convert(to, dd, from, sd);
                   });
            std::vector<unsigned char> &db = k.db;
            unsigned char *d = k.d, *wd = k.wd;
            uint64_t c = k.count;
            dls_convert_desc_t desc{};
            desc.dst_dtype = dd;
            desc.src_dtype = sd;
            set_view(desc, v);
            const std::vector<unsigned char> start = db;
            const int pair = dls__cv_pair(dd, sd);
            for (int twin = 0; twin < 2; twin++)
            for (const Grid &gr : grids(c / 2 + 1, c)) {
              db = start;
              if (!twin)
                emulate(gr.g, gr.b, gr.blocks, dls_convert, (void *)d, (const void *)k.s, desc);
              else if (!contiguous(v) || (!same && pair < 0) || gr.b.x != 256)
                continue; // the descriptor kernel's only; the twin on the core's grids (the test's time)
              else if (same) // the core's twins of a contiguous view (builtin_table.h's DLS__TWINS)
                emulate(gr.g, gr.b, gr.blocks, dls__copy_bytes, (void *)d, (const void *)k.s, c * ds);
              else
                emulate(gr.g, gr.b, gr.blocks, cv_twins[pair], (void *)d, (const void *)k.s, (unsigned long long)c);
              std::vector<unsigned char> got = db; // a NaN of another payload is a NaN: counted as want's
              for (uint64_t i = 0; i < c; i++) {
                int64_t a, b;
                offsets(v, i, a, b);
                unsigned char *g = got.data() + (d - db.data()) + a * ds;
                if (is_nan(dt, g) && is_nan(dt, wd + a * ds))
                  std::memcpy(g, wd + a * ds, ds);
              }
              bool ok = got == k.want;
              CHECK(ok, "convert %u/%u -> %u/%u%s, ndim %u, shape[0] %lld, dst at +%u, src at +%u, grid %u x %u",
                    st.code, st.bits, dt.code, dt.bits, twin ? " (its twin)" : "", v.ndim, (long long)v.shape[0], doff,
                    soff, gr.g.x, gr.b.x);
            }
          }
    }
}

// The vector twins (builtin_table.h's DLS__TWINS): whole 16-byte vectors at aligned addresses, a thread a vector on
// the core's grid (blocks of 256, as many as the vectors take) and on one with a block more.
void test_vectors() {
  for (unsigned long long n : {1ull, 2ull, 3ull, 255ull, 256ull, 257ull, 1000ull})
    for (unsigned extra : {0u, 1u}) {
      const dim3 g{(unsigned)((n + 255) / 256 + extra), 1, 1}, b{256, 1, 1};
      std::vector<unsigned char> db = random_bytes(16 * n + 64), sb = random_bytes(16 * n + 64);
      unsigned char *d = aligned16(db), *s = aligned16(sb);
      std::vector<unsigned char> want = db;
      unsigned long long pattern = rng();
      for (unsigned long long i = 0; i < 2 * n; i++)
        std::memcpy(&want[(d - db.data()) + 8 * i], &pattern, 8);
      emulate(g, b, 0, dls__fill_vecs, reinterpret_cast<uint4 *>(d), n, pattern);
      CHECK(db == want, "dls__fill_vecs of %llu vectors, grid %u x 256", n, g.x);
      want = db;
      std::memcpy(&want[d - db.data()], s, 16 * n);
      emulate(g, b, 0, dls__copy_vecs, reinterpret_cast<uint4 *>(d), reinterpret_cast<const uint4 *>(s), n);
      CHECK(db == want, "dls__copy_vecs of %llu vectors, grid %u x 256", n, g.x);
      float *x = reinterpret_cast<float *>(s), *y = reinterpret_cast<float *>(d);
      for (unsigned long long i = 0; i < 4 * n; i++) {
        x[i] = (float)(int)(rng() % 100);
        y[i] = (float)(int)(rng() % 100);
      }
      want = db;
      float *wy = reinterpret_cast<float *>(&want[d - db.data()]);
      for (unsigned long long i = 0; i < 4 * n; i++)
        wy[i] = 2.0f * x[i] + wy[i]; // small integers: exact, fused or not
      emulate(g, b, 0, dls__axpy_f32_vecs, n, 2.0f, reinterpret_cast<const float4 *>(x),
              reinterpret_cast<float4 *>(y));
      CHECK(db == want, "dls__axpy_f32_vecs of %llu vectors, grid %u x 256", n, g.x);
    }
}

} // namespace

int main() {
  test_vectors();
  for (bool big : {false, true}) {
    test_fill(big);
    test_axpy<float>(dls_axpy_f32, big);
    test_axpy<double>(dls_axpy_f64, big);
  }
  test_copy();
  test_convert();
  std::printf("kernels_on_host: %d checks\n%d passed, %d failed\n", checks, checks - failures, failures);
  return failures != 0;
}
