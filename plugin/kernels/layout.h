/* SPDX-License-Identifier: Apache-2.0 */
/* How much work a built-in's launch has, the same code for the core (C: the grid it picks, core/builtin.c) and the
 * GPU kernels (CUDA and HIP, the .cu files here): a strided view with its dimensions merged where memory allows, and the
 * 16-byte items of each built-in's fast path.
 *
 * A view merges dimension k into k + 1 when stepping k is stepping k + 1 over its whole extent on both sides
 * (strides[k] == strides[k + 1] * shape[k + 1]); extents of 1 drop. A contiguous view (any shape, row-major on
 * both sides) becomes one dimension of stride 1, which the kernels copy as 16-byte words, a few a thread. */
#ifndef DLSTREAM_KERNELS_LAYOUT_H
#define DLSTREAM_KERNELS_LAYOUT_H

#include <stdint.h>

#include "dlstream/builtin.h"

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define DLS__LY static __host__ __device__ __forceinline__
#else
#define DLS__LY static inline
#endif

/* The bytes a thread moves per access on the fast paths (LDG.E.128 / STG.E.128 on NVIDIA GPUs). */
#define DLS__VEC_BYTES 16u

/* A view of a copy or conversion, merged: strides in elements of each side. */
typedef struct dls__layout {
  uint32_t ndim; /* 0: one element */
  int64_t shape[DLS_COPY_MAX_DIMS];
  int64_t dst[DLS_COPY_MAX_DIMS];
  int64_t src[DLS_COPY_MAX_DIMS];
} dls__layout;

/* Whether a view (a descriptor's) is one run of consecutive elements on both sides, row-major: after extents of 1,
 * each stride is the product of the extents inside it (one element, and an empty view, count). */
DLS__LY int dls__view_contiguous(uint32_t ndim, const int64_t *shape, const int64_t *dst, const int64_t *src) {
  if (ndim > DLS_COPY_MAX_DIMS)
    return 0;
  uint64_t want = 1;
  for (uint32_t k = ndim; k-- > 0;) {
    if (shape[k] == 1)
      continue;
    if ((uint64_t)dst[k] != want || (uint64_t)src[k] != want)
      return 0;
    want *= (uint64_t)shape[k];
  }
  return 1;
}

/* The elements of a view: the product of its extents, 0 when one is 0 or negative or ndim is out of range. */
DLS__LY uint64_t dls__view_count(uint32_t ndim, const int64_t *shape) {
  if (ndim > DLS_COPY_MAX_DIMS)
    return 0;
  uint64_t total = 1;
  for (uint32_t k = 0; k < ndim; k++) {
    if (shape[k] <= 0)
      return 0;
    total *= (uint64_t)shape[k];
  }
  return total;
}

/* Merges a view of at least one element (dls__view_count: not 0) into *out. */
DLS__LY void dls__layout_make(uint32_t ndim, const int64_t *shape, const int64_t *dst, const int64_t *src,
                              dls__layout *out) {
  out->ndim = 0;
  for (uint32_t k = 0; k < ndim && k < DLS_COPY_MAX_DIMS; k++) {
    if (shape[k] == 1)
      continue;
    uint32_t n = out->ndim;
    /* The checks bound each stride times its extent (core/builtin_args.c), so the products below fit. */
    if (n > 0 && (uint64_t)out->dst[n - 1] == (uint64_t)dst[k] * (uint64_t)shape[k] &&
        (uint64_t)out->src[n - 1] == (uint64_t)src[k] * (uint64_t)shape[k]) {
      out->shape[n - 1] *= shape[k];
      out->dst[n - 1] = dst[k];
      out->src[n - 1] = src[k];
      continue;
    }
    out->shape[n] = shape[k];
    out->dst[n] = dst[k];
    out->src[n] = src[k];
    out->ndim = n + 1;
  }
}

/* 16-byte vectors a thread moves on the fast paths (kernels/grid.cuh's tiles: a block moves that many times its
 * threads). The core sizes its grid with them (core/builtin.c), a block a tile, so that no thread loops. A fill only
 * stores: more a thread, fewer blocks to start; on an H200 (main 16c7d86) this kernel with 2 a thread took 3.15 us at
 * 2^20 float32 and ran at 0.74 of the copy bandwidth at 2^26, against 2.80-2.87 us and 1.03-1.05 with 8 (the same
 * loop alone, without the kernel's leftovers, measured 2 a thread as fast as 8: bench/results/
 * h200-2026-11-29-builtin-variants-3.txt). An axpy and a copy load before they store: two a thread in flight. */
#define DLS__FILL_VECS 8u
#define DLS__MOVE_VECS 2u

/* Elements a thread of a strided copy moves (of one word each: kernels/copy.cuh's copy_words), loaded together: this
 * many over several merged dimensions (more would take more registers than a thread has at a full device), twice as
 * many along one. */
#define DLS__ELEM_ITEMS 2u

/* Elements of a conversion's item on its fast path: 16 bytes of the destination (one store; the source's access is
 * 16 bytes or more narrowing, 8, 4 or 2 widening). Items a thread moves: 2, or 1 where the source side of an item is
 * 64 bytes (float64 to a 16-bit float: two would take more registers than the 32 a thread has at a full device). On
 * an H200 a float16 to float32 conversion of 2^26 elements took 141 us with items of 16 source bytes (two 16-byte
 * stores an item) and 102 us with these (main f788ff9). Macros: template arguments in the kernels. */
#define DLS__CV_ELEMS(ds, ss) (DLS__VEC_BYTES / (ds))
#define DLS__CV_ITEMS(ds, ss) (DLS__CV_ELEMS(ds, ss) * ((ds) > (ss) ? (ds) : (ss)) >= 64u ? 1u : 2u)

/* Items of `n` elements taken `per` at a time (rounded up). */
DLS__LY uint64_t dls__items(uint64_t n, uint32_t per) { return n / per + (n % per != 0); }

#endif /* DLSTREAM_KERNELS_LAYOUT_H */
