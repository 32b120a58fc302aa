// SPDX-License-Identifier: Apache-2.0
// The CUDA built-in kernels (plugin/kernels/*.cu) compiled for the host: what CUDA gives a kernel (thread and block
// indices, vector types), with every thread of a launch run one after the other. The memory-bound kernels have no
// dependencies between threads but one: a strided copy's layout, which the first thread of each block makes in
// shared memory before a barrier (copy.cuh's block_layout). That thread runs first in its block here, so a barrier
// is nothing and shared memory one static object; the bytes the kernels leave are the GPU's. The vendor
// branch taken is HIP's (__HIP_PLATFORM_AMD__: convert.h's float16 conversions instead of the GPU's instructions,
// which round alike). A misaligned 16-byte access is an error here too (UBSan's alignment check).
#ifndef DLSTREAM_TESTS_KERNELS_ON_HOST_H
#define DLSTREAM_TESTS_KERNELS_ON_HOST_H

// Every standard header the kernels or the test need comes before the macros below (see the test's includes).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __HIP_PLATFORM_AMD__ 1
#define __builtin_amdgcn_s_sleep(x) (void)0
#define __threadfence_system() (void)0
#define __shared__ static
#define __syncthreads() (void)0

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
static dim3 threadIdx, blockIdx, blockDim, gridDim;
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) double2 {
  double x, y;
};
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
static inline double2 make_double2(double a, double b) { return double2{a, b}; }
static inline unsigned long long wall_clock64() { return 0; }

// Runs kernel k over grid g of blocks b, thread by thread; `blocks` > 0 runs only the first `blocks` blocks (of a
// grid too large to run whole, whose other threads would find no work: their first item is past the end).
template <typename K, typename... A>
static void emulate(dim3 g, dim3 b, unsigned long long blocks, K k, A... a) {
  gridDim = g;
  blockDim = b;
  unsigned long long ran = 0;
  for (unsigned bz = 0; bz < g.z; bz++)
    for (unsigned by = 0; by < g.y; by++)
      for (unsigned bx = 0; bx < g.x; bx++) {
        if (blocks != 0 && ran++ == blocks)
          return;
        for (unsigned tz = 0; tz < b.z; tz++)
          for (unsigned ty = 0; ty < b.y; ty++)
            for (unsigned tx = 0; tx < b.x; tx++) {
              blockIdx = dim3{bx, by, bz};
              threadIdx = dim3{tx, ty, tz};
              k(a...);
            }
      }
}

#endif // DLSTREAM_TESTS_KERNELS_ON_HOST_H
