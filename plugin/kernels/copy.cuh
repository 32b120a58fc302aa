// SPDX-License-Identifier: Apache-2.0
// The copies of the GPU built-ins (dls_copy_strided, and dls_convert between one type): a contiguous view as bytes
// in the widest words both addresses allow (16 bytes where they sit alike in their 16, shifted 4-byte words where
// they do not), any other view element by element over its merged dimensions.
#ifndef DLSTREAM_KERNELS_COPY_CUH
#define DLSTREAM_KERNELS_COPY_CUH

#include "grid.cuh"

namespace dls_k {

template <typename W>
struct word_copy {
  typedef W value;
  W *d;
  const W *s;
  template <typename I> __device__ __forceinline__ W load(I i) const { return s[i]; }
  template <typename I> __device__ __forceinline__ void store(I i, W v) const { d[i] = v; }
};

// The bytes around the words of a copy.
struct byte_copy {
  typedef unsigned char value;
  unsigned char *d;
  const unsigned char *s;
  leftovers at;
  template <typename I> __device__ __forceinline__ unsigned char load(I j) const { return s[at.at(j)]; }
  template <typename I> __device__ __forceinline__ void store(I j, unsigned char v) const { d[at.at(j)] = v; }
};

// Destination word k of a copy whose source sits `shift` / 8 bytes (1 to 3) past a 4-byte boundary: the high
// bytes of aligned source word k and the low bytes of word k + 1 (little-endian).
struct shifted_copy {
  struct value {
    unsigned lo, hi;
  };
  unsigned *d;
  const unsigned *s;
  unsigned shift;
  template <typename I> __device__ __forceinline__ value load(I k) const { return value{s[k], s[k + 1]}; }
  template <typename I> __device__ __forceinline__ void store(I k, value v) const {
    d[k] = (v.lo >> shift) | (v.hi << (32 - shift));
  }
};

// `bytes` bytes whose addresses sit alike in their W bytes: the bytes up to d's first W-byte boundary, W-byte
// words (U a thread: as many bytes as DLS__MOVE_VECS vectors of 16, the core's grid), then the bytes after the last
// word.
template <typename W, int U>
__device__ __forceinline__ void copy_aligned(unsigned char *d, const unsigned char *s, u64 bytes) {
  u64 head = (sizeof(W) - (uintptr_t)d % sizeof(W)) % sizeof(W);
  if (head > bytes)
    head = bytes;
  const u64 body = (bytes - head) / sizeof(W);
  tiles<U>(body, word_copy<W>{reinterpret_cast<W *>(d + head), reinterpret_cast<const W *>(s + head)});
  run<4>(bytes - body * sizeof(W), byte_copy{d, s, leftovers{head, body * sizeof(W)}});
}

// `bytes` bytes whose addresses differ by 1 to 3 bytes modulo 4: aligned 4-byte stores, each from two aligned
// source words, four a thread (eight would take more registers than a thread has at a full device). No source word reaches past the source's last byte (a word may start before its first one: the
// word holding an unaligned address, inside its allocation).
__device__ __forceinline__ void copy_shifted(unsigned char *d, const unsigned char *s, u64 bytes) {
  u64 head = (4 - (uintptr_t)d % 4) % 4;
  if (head > bytes)
    head = bytes;
  const unsigned char *a = s + head;
  const unsigned off = (unsigned)((uintptr_t)a % 4); // not 0: d + head is aligned and s sits elsewhere
  const unsigned char *base = a - off;
  const u64 room = (u64)(s + bytes - base) / 4; // whole source words from `base` inside the source
  u64 body = (bytes - head) / 4;
  if (body + 1 > room)
    body = room > 0 ? room - 1 : 0;
  tiles<2 * DLS__MOVE_VECS>(body, shifted_copy{reinterpret_cast<unsigned *>(d + head),
                                                reinterpret_cast<const unsigned *>(base), 8 * off});
  run<4>(bytes - body * 4, byte_copy{d, s, leftovers{head, body * 4}});
}

// A contiguous copy of `bytes` bytes: 16-byte accesses where both addresses sit alike in their 16 bytes.
__device__ __forceinline__ void copy_bytes(void *dst, const void *src, u64 bytes) {
  unsigned char *d = static_cast<unsigned char *>(dst);
  const unsigned char *s = static_cast<const unsigned char *>(src);
  const uintptr_t rel = (uintptr_t)d - (uintptr_t)s;
  if (rel % 16 == 0)
    copy_aligned<uint4, DLS__MOVE_VECS>(d, s, bytes);
  else if (rel % 8 == 0)
    copy_aligned<unsigned long long, 2 * DLS__MOVE_VECS>(d, s, bytes);
  else if (rel % 4 == 0)
    copy_aligned<unsigned, 4 * DLS__MOVE_VECS>(d, s, bytes);
  else
    copy_shifted(d, s, bytes);
}

// Element offsets (in elements of each side) of element i of a merged view, row-major; I: the index width (every
// extent fits it when the element count does).
template <typename I>
__device__ __forceinline__ void view_offsets(I i, const dls__layout &l, long long &d, long long &s) {
  I rest = i;
  long long dd = 0, ss = 0;
  for (int k = (int)l.ndim - 1; k >= 0; --k) {
    const I extent = (I)l.shape[k];
    const I idx = rest % extent;
    rest /= extent;
    dd += (long long)idx * l.dst[k];
    ss += (long long)idx * l.src[k];
  }
  d = dd;
  s = ss;
}

// Elements of a strided view of `size` bytes each, as words of `word` bytes (1, 2, 4 or 8, dividing the size and
// both addresses): one loop for every word size (the switch goes the same way for every element).
struct view_copy {
  struct value {};
  char *d;
  const char *s;
  const dls__layout *l;
  unsigned size, word;
  template <typename W>
  __device__ __forceinline__ void words(long long doff, long long soff) const {
    W *dw = reinterpret_cast<W *>(d + doff * (long long)size);
    const W *sw = reinterpret_cast<const W *>(s + soff * (long long)size);
    for (unsigned w = 0; w < size / sizeof(W); ++w)
      dw[w] = sw[w];
  }
  template <typename I> __device__ __forceinline__ value load(I) const { return value{}; }
  template <typename I> __device__ __forceinline__ void store(I i, value) const {
    long long doff, soff;
    view_offsets(i, *l, doff, soff);
    switch (word) {
    case 8: words<unsigned long long>(doff, soff); break;
    case 4: words<unsigned>(doff, soff); break;
    case 2: words<unsigned short>(doff, soff); break;
    default: words<unsigned char>(doff, soff); break;
    }
  }
};

// Elements of a 1-D strided view of one word W each: no division.
template <typename W>
struct line_copy {
  typedef W value;
  W *d;
  const W *s;
  long long dstride, sstride;
  template <typename I> __device__ __forceinline__ W load(I i) const { return s[(long long)i * sstride]; }
  template <typename I> __device__ __forceinline__ void store(I i, W v) const { d[(long long)i * dstride] = v; }
};

// The offset (in elements) of element i of a merged view on one side (`strides`: l.dst or l.src), row-major.
template <typename I>
__device__ __forceinline__ long long view_offset(I i, const dls__layout &l, const int64_t *strides) {
  I rest = i;
  long long off = 0;
  for (int k = (int)l.ndim - 1; k >= 0; --k) {
    const I extent = (I)l.shape[k];
    off += (long long)(rest % extent) * strides[k];
    rest /= extent;
  }
  return off;
}

// Elements of a strided view of one word W each, over its merged dimensions: the load finds the source's offset and
// the store the destination's (a value of one word, so that a thread holds its loads in flight together: a transpose
// reads a cache line a word).
template <typename W>
struct elem_copy {
  typedef W value;
  W *d;
  const W *s;
  const dls__layout *l;
  template <typename I> __device__ __forceinline__ W load(I i) const { return s[view_offset(i, *l, l->src)]; }
  template <typename I> __device__ __forceinline__ void store(I i, W v) const { d[view_offset(i, *l, l->dst)] = v; }
};

// The merged layout of a strided view (layout.h), made once a block by its first thread in shared memory, where
// every thread of the block reads it: a layout of each thread's own would sit in its stack in local memory, written
// at every launch by every thread. Every thread of the block calls it (a barrier), before any thread leaves.
__device__ __forceinline__ const dls__layout *block_layout(unsigned ndim, const int64_t *shape, const int64_t *dstr,
                                                           const int64_t *sstr) {
  __shared__ dls__layout l;
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
    dls__layout_make(ndim, shape, dstr, sstr, &l);
  __syncthreads();
  return &l;
}

// A strided view of elements of one word W: DLS__ELEM_ITEMS a thread, in tiles (the core's grid holds at most what
// the device does, each block making the layout once: the tiles a grid further on are the same block's).
template <typename W>
__device__ __forceinline__ void copy_words(void *dst, const void *src, const dls__layout *l, u64 total) {
  W *d = static_cast<W *>(dst);
  const W *s = static_cast<const W *>(src);
  if (l->ndim == 1)
    tiles<2 * DLS__ELEM_ITEMS>(total, line_copy<W>{d, s, l->dst[0], l->src[0]});
  else
    tiles<DLS__ELEM_ITEMS>(total, elem_copy<W>{d, s, l});
}

// A strided copy of whole elements of `size` bytes: a contiguous view as bytes, a view of elements of one word (1,
// 2, 4 or 8 bytes, aligned) element by element, DLS__ELEM_ITEMS a thread, any other view element by element over its
// merged dimensions, in words as wide as the element size and both addresses allow. Inlined (no call frame on the stack): dls_copy_strided and dls_convert
// each have their own. The arrays are the kernel's parameter (DLS_K_PARAM), read where they lie; every branch
// before the layout goes the same way for the whole grid (block_layout's barrier).
__device__ __forceinline__ void copy_view(void *dst, const void *src, unsigned ndim, const int64_t *shape,
                                          const int64_t *dstr, const int64_t *sstr, unsigned size) {
  const u64 total = dls__view_count(ndim, shape);
  if (total == 0 || size == 0)
    return;
  if (dls__view_contiguous(ndim, shape, dstr, sstr)) {
    copy_bytes(dst, src, total * size);
    return;
  }
  const dls__layout *l = block_layout(ndim, shape, dstr, sstr);
  char *d = static_cast<char *>(dst);
  const char *s = static_cast<const char *>(src);
  const uintptr_t align = (uintptr_t)d | (uintptr_t)s | size;
  const unsigned word = align % 8 == 0 ? 8 : align % 4 == 0 ? 4 : align % 2 == 0 ? 2 : 1;
  if (size == word) {
    switch (word) {
    case 8: copy_words<unsigned long long>(d, s, l, total); break;
    case 4: copy_words<unsigned>(d, s, l, total); break;
    case 2: copy_words<unsigned short>(d, s, l, total); break;
    default: copy_words<unsigned char>(d, s, l, total); break;
    }
    return;
  }
  run<1>(total, view_copy{d, s, l, size, word});
}

} // namespace dls_k

#endif // DLSTREAM_KERNELS_COPY_CUH
