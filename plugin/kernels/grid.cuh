// SPDX-License-Identifier: Apache-2.0
// What the GPU built-ins share (kernels/*.cu, one translation unit): the host API's structs, a thread's place in
// any grid, and the loops of the memory-bound kernels, with 32-bit indices where they fit: tiles of 16-byte vectors
// (a block a tile on the core's grid), and a grid-stride loop for the elements around them and strided views.
#ifndef DLSTREAM_KERNELS_GRID_CUH
#define DLSTREAM_KERNELS_GRID_CUH

#include <stdint.h>

// builtin.h declares the host API under the kernels' own names (dls_fill ...);
// rename those declarations while including it for dls_copy_desc_t, so the
// kernels and the host share one definition of the struct.
#define dls_fill dls_host_fill_
#define dls_axpy_f32 dls_host_axpy_f32_
#define dls_axpy_f64 dls_host_axpy_f64_
#define dls_copy_strided dls_host_copy_strided_
#define dls_spin dls_host_spin_
#include "dlstream/builtin.h"
#undef dls_fill
#undef dls_axpy_f32
#undef dls_axpy_f64
#undef dls_copy_strided
#undef dls_spin
#include "convert.h" // this folder: nvcc and hipcc see only include/
#include "layout.h"

static_assert(sizeof(dls_copy_desc_t) == 8 + 3 * 8 * DLS_COPY_MAX_DIMS, "dls_copy_desc_t layout");
static_assert(sizeof(dls_convert_desc_t) == 16 + 3 * 8 * DLS_COPY_MAX_DIMS, "dls_convert_desc_t layout");

// The memory-bound kernels: any block size up to 1024 threads, and on sm_80 and sm_90 (2048 threads a
// multiprocessor) at most 32 registers a thread, so that every thread slot of the device can hold one: a grid sized
// to the work runs in as few waves as it can, and a strided view's grid, capped at what the device holds, is
// resident whole (core/builtin.c). The other targets hold fewer threads a multiprocessor (1536, 1024):
// the bound is one block of 1024 there.
#if defined(__HIP_PLATFORM_AMD__)
#define DLS_K_BOUNDS __launch_bounds__(1024)
#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 800 || __CUDA_ARCH__ >= 900)
#define DLS_K_BOUNDS __launch_bounds__(1024, 2)
#else
#define DLS_K_BOUNDS __launch_bounds__(1024, 1)
#endif

// A kernel's descriptor parameter (dls_copy_desc_t, dls_convert_desc_t) is read where the launch put it, in the
// parameter space. Without __grid_constant__, taking the address of its arrays (a loop indexes them) makes every
// thread copy the whole descriptor into its own stack in local memory first: at a grid that fills the device,
// ~100 MB of stores a launch, which cost dls_copy and the conversions ~17 us a call on an H200. AMD's kernel
// arguments are memory already (and the host-side test's too). nvcc has __grid_constant__ from 11.7, for sm_70 and
// newer (the fatbin starts at sm_75).
#if defined(__CUDACC__) && !defined(__HIP_PLATFORM_AMD__) &&                                                      \
    (__CUDACC_VER_MAJOR__ > 11 || (__CUDACC_VER_MAJOR__ == 11 && __CUDACC_VER_MINOR__ >= 7))
#define DLS_K_PARAM __grid_constant__
#else
#define DLS_K_PARAM
#endif

// The most items a loop indexes with 32 bits (fewer instructions per item); above, 64-bit indices.
// tests/c/kernels_on_host.cmake builds the host test a second time with 0 here, to run the 64-bit loops.
#ifndef DLS_K_NARROW_MOST
#define DLS_K_NARROW_MOST 0xffffffffull
#endif

namespace dls_k {

typedef unsigned long long u64;

// This thread's rank among all threads of the launch, over every dimension of the grid and the block (a 2-D or
// 3-D launch through dls_launch splits the work too, instead of repeating it), and their count; a block's rank among
// the blocks, their count, and a thread's rank in its block. A launch of more than 2^64 threads cannot finish; its
// count wraps.
__device__ __forceinline__ u64 block_rank() {
  return ((u64)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
}
__device__ __forceinline__ u64 block_count() { return (u64)gridDim.x * gridDim.y * gridDim.z; }
__device__ __forceinline__ unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
__device__ __forceinline__ unsigned rank_in_block() {
  return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ u64 thread_rank() { return block_rank() * block_threads() + rank_in_block(); }

__device__ __forceinline__ u64 thread_count() { return block_count() * block_threads(); }

// Tiles of U * b items from `base` (below n), `step` items apart, until n (b: the threads of a block, t: this
// thread's rank in it): item u of a tile is thread t's item u * b + t, so that each of a warp's U accesses covers
// consecutive items, and a thread issues its U loads before its first store. A grid the core sized to the work (a
// tile a block: core/builtin.c) runs the loop once; a smaller one takes the tiles a grid further on.
template <int U, typename I, typename Op>
__device__ __forceinline__ void each_tile(I n, I base, I step, unsigned t, unsigned b, const Op &op) {
  for (;;) {
    const I left = n - base;
    const bool whole = left >= (I)(U * b); // the same for the whole block
    typename Op::value v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (whole || t + u * b < left)
        v[u] = op.load(base + (t + u * b));
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (whole || t + u * b < left)
        op.store(base + (t + u * b), v[u]);
    if (left <= step)
      return;
    base += step;
  }
}

// Items [0, n) of `op` in tiles (each_tile), a block's first tile its rank's, with 32-bit indices where n fits them.
// A grid of more than 2^50 blocks (which cannot finish) would wrap its products.
template <int U, typename Op>
__device__ __forceinline__ void tiles(u64 n, const Op &op) {
  const unsigned b = block_threads();
  const u64 k = block_rank(), blocks = block_count(), tile = (u64)U * b;
  if (k >= n || k * tile >= n)
    return;
  u64 step = blocks * tile;
  if (blocks >= n || step > n)
    step = n; // past the end from any tile: one pass
  if (n <= DLS_K_NARROW_MOST)
    each_tile<U, unsigned>((unsigned)n, (unsigned)(k * tile), (unsigned)step, rank_in_block(), b, op);
  else
    each_tile<U, u64>(n, k * tile, step, rank_in_block(), b, op);
}

// Items [0, n) of `op`, grid-stride from `first` by `step`, U at a time: the U loads are issued before the first
// store, so each thread has U accesses in flight (the elements around a fast path's vectors, and strided views, on
// the grid the core caps at what the device holds). Op: a `value` type, `value load(I) const`,
// `store(I, value) const`.
template <int U, typename I, typename Op>
__device__ __forceinline__ void each_item(I n, I first, I step, const Op &op) {
  I i = first;
  const I span = (I)(U - 1) * step;
  if (U > 1 && n > span) {
    for (; i < n - span; i += (I)U * step) {
      typename Op::value v[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        v[u] = op.load(i + (I)u * step);
#pragma unroll
      for (int u = 0; u < U; ++u)
        op.store(i + (I)u * step, v[u]);
    }
  }
  for (; i < n; i += step)
    op.store(i, op.load(i));
}

// each_item over the whole launch, with 32-bit indices when n plus U + 1 steps of the grid stay below 2^32 (fewer
// instructions per item), else 64-bit ones (above 2^32 items).
template <int U, typename Op>
__device__ __forceinline__ void run(u64 n, const Op &op) {
  const u64 first = thread_rank(), step = thread_count();
  if (n == 0 || first >= n)
    return;
  if (step <= DLS_K_NARROW_MOST / (U + 1) && n <= DLS_K_NARROW_MOST - (u64)(U + 1) * step)
    each_item<U, unsigned>((unsigned)n, (unsigned)first, (unsigned)step, op);
  else
    each_item<U, u64>(n, first, step, op);
}

// An aligned group of N elements of T: one access of N * sizeof(T) bytes (4, 8 or 16), or 16-byte accesses of a
// larger group (32 or 64 bytes: the wider side of a conversion), aligned to 16.
template <typename T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) vec {
  T v[N];
};

// Where item j of the leftovers of a vectorized run lies: the `head` elements before the first aligned vector, then
// those after the last (`skip` elements further on: the vectors' own).
struct leftovers {
  u64 head, skip;
  __device__ __forceinline__ u64 at(u64 j) const { return j < head ? j : j + skip; }
};

// A run of `n` elements of `size` bytes at `addr` split for 16-byte accesses: `head` elements before the first
// 16-byte boundary, then `body` vectors of 16 / size elements, then the rest. A partner run (`other`, of the same
// element size) must sit at the same place in its 16 bytes, and both must be aligned to their elements; otherwise
// every element is a head element.
struct split {
  u64 head, body;
  unsigned per; // elements per vector
  __device__ __forceinline__ split(uintptr_t addr, uintptr_t other, u64 n, unsigned size) {
    per = DLS__VEC_BYTES / size;
    const bool paired = (addr - other) % DLS__VEC_BYTES == 0 && addr % size == 0;
    head = paired ? ((DLS__VEC_BYTES - addr % DLS__VEC_BYTES) % DLS__VEC_BYTES) / size : n;
    if (head > n)
      head = n;
    body = (n - head) / per;
  }
  // The elements no vector holds, and where each lies.
  __device__ __forceinline__ u64 rest_count(u64 n) const { return n - body * per; }
  __device__ __forceinline__ leftovers rest() const { return leftovers{head, body * per}; }
};

} // namespace dls_k

#endif // DLSTREAM_KERNELS_GRID_CUH
