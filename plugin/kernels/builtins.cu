// SPDX-License-Identifier: Apache-2.0
// The GPU built-in kernels (fill, axpy, strided copy, spin, latch, empty; dls_convert is convert.cu's; the table:
// builtin_table.h names each one's symbol): nvcc embeds every kernels/*.cu as one fatbin, hipcc as one code object
// bundle.
//
// Plain extern "C" kernels so the backend finds them by name with
// cuModuleGetFunction / hipModuleGetFunction; argument lists are those of
// dls_builtin_function in include/dlstream/builtin.h. Every loop covers the
// whole range once on any grid (grid.cuh: tiles of 16-byte vectors a block,
// the next tiles a grid further on; grid-stride for the rest); the core's own
// calls size the grid to the work, a tile a block (core/builtin.c). Memory
// moves in 16-byte accesses where the addresses allow, with the elements
// before the first and after the last such access one by one, so every
// alignment and length is correct. The only vendor
// differences are the clock and the back-off of the waits
// (__HIP_PLATFORM_AMD__ below); cmake/DlsHipKernels.cmake compiles this
// file with hip_runtime.h included first.
#include "copy.cuh"

namespace {

using dls_k::u64;

// Nanoseconds of a clock that runs at a constant rate whatever the shader clock does.
#if defined(__HIP_PLATFORM_AMD__)
// AMD: the real-time counter (s_memrealtime), 100 MHz on the gfx9 and gfx10
// targets of DLS_HIP_ARCHS. ROCm 5.2 offers it up to gfx10.3 (gfx11 has no
// s_memrealtime there), which is why the embedded targets stop at gfx1030.
__device__ __forceinline__ unsigned long long dls_globaltimer() {
  return (unsigned long long)wall_clock64() * 10ull;
}
#else
__device__ __forceinline__ unsigned long long dls_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif

__device__ __forceinline__ bool dls_first_thread() { return dls_k::thread_rank() == 0; }

// A thread's rank in a 1-D grid of at most 2^32 threads (the vector twins').
__device__ __forceinline__ unsigned dls_vec_rank() { return blockIdx.x * blockDim.x + threadIdx.x; }

// 16 bytes of a fill pattern.
struct fill_words {
  struct value {};
  uint4 *d;
  uint4 pattern;
  template <typename I> __device__ __forceinline__ value load(I) const { return value{}; }
  template <typename I> __device__ __forceinline__ void store(I i, value) const { d[i] = pattern; }
};

// One element of a fill.
template <typename T>
struct fill_one {
  struct value {};
  T *d;
  dls_k::leftovers at;
  T v;
  template <typename I> __device__ __forceinline__ value load(I) const { return value{}; }
  template <typename I> __device__ __forceinline__ void store(I j, value) const { d[at.at(j)] = v; }
};

// `count` elements T at `dst` (aligned to T: the runtime checks it) set to `v`: 16-byte stores of the pattern
// repeated from the first 16-byte boundary (an element boundary: T's size divides 16), the rest one by one.
template <typename T>
__device__ __forceinline__ void dls_fill_as(T *dst, u64 count, T v) {
  const dls_k::split sp((uintptr_t)dst, (uintptr_t)dst, count, sizeof(T));
  // v repeated over 8 bytes (little-endian), then over 16.
  const u64 rep = (u64)v * (sizeof(T) == 1 ? 0x0101010101010101ull : sizeof(T) == 2 ? 0x0001000100010001ull
                                            : sizeof(T) == 4 ? 0x0000000100000001ull : 1ull);
  const uint4 pattern = make_uint4((unsigned)rep, (unsigned)(rep >> 32), (unsigned)rep, (unsigned)(rep >> 32));
  dls_k::tiles<DLS__FILL_VECS>(sp.body, fill_words{reinterpret_cast<uint4 *>(dst + sp.head), pattern});
  dls_k::run<2>(sp.rest_count(count), fill_one<T>{dst, sp.rest(), v});
}

// 16 bytes of x and y (V: float4 or double2).
__device__ __forceinline__ float4 dls_axpy4(float a, float4 x, float4 y) {
  return make_float4(a * x.x + y.x, a * x.y + y.y, a * x.z + y.z, a * x.w + y.w);
}
__device__ __forceinline__ double2 dls_axpy4(double a, double2 x, double2 y) {
  return make_double2(a * x.x + y.x, a * x.y + y.y);
}

template <typename T, typename V>
struct axpy_words {
  struct value {
    V x, y;
  };
  T a;
  const V *x;
  V *y;
  template <typename I> __device__ __forceinline__ value load(I i) const { return value{x[i], y[i]}; }
  template <typename I> __device__ __forceinline__ void store(I i, value v) const { y[i] = dls_axpy4(a, v.x, v.y); }
};

template <typename T>
struct axpy_one {
  struct value {
    T x, y;
  };
  T a;
  const T *x;
  T *y;
  dls_k::leftovers at;
  template <typename I> __device__ __forceinline__ value load(I j) const {
    const u64 i = at.at(j);
    return value{x[i], y[i]};
  }
  template <typename I> __device__ __forceinline__ void store(I j, value v) const { y[at.at(j)] = a * v.x + v.y; }
};

// y[i] = a * x[i] + y[i]: 16-byte accesses where x and y sit alike in their 16 bytes, else element by element
// (four in flight per thread).
template <typename T, typename V>
__device__ __forceinline__ void dls_axpy(u64 n, T a, const T *x, T *y) {
  const dls_k::split sp((uintptr_t)y, (uintptr_t)x, n, sizeof(T));
  dls_k::tiles<DLS__MOVE_VECS>(sp.body, axpy_words<T, V>{a, reinterpret_cast<const V *>(x + sp.head),
                                                         reinterpret_cast<V *>(y + sp.head)});
  dls_k::run<4>(sp.rest_count(n), axpy_one<T>{a, x, y, sp.rest()});
}

} // namespace

extern "C" {

// An empty kernel: the launch-overhead benchmark's payload.
__global__ void dls_empty(void) {}

// Sets `count` elements of `elem_size` bytes (1, 2, 4 or 8) to the low
// elem_size bytes of `pattern` (little-endian, as the host wrote them).
__global__ void DLS_K_BOUNDS dls_fill(void *dst, unsigned long long count, unsigned int elem_size, unsigned long long pattern) {
  switch (elem_size) {
  case 1: dls_fill_as(static_cast<uint8_t *>(dst), count, (uint8_t)pattern); break;
  case 2: dls_fill_as(static_cast<uint16_t *>(dst), count, (uint16_t)pattern); break;
  case 4: dls_fill_as(static_cast<uint32_t *>(dst), count, (uint32_t)pattern); break;
  case 8: dls_fill_as(static_cast<uint64_t *>(dst), count, (uint64_t)pattern); break;
  default: break;  // the runtime rejects other sizes before launching
  }
}

__global__ void DLS_K_BOUNDS dls_axpy_f32(unsigned long long n, float a, const float *x, float *y) {
  dls_axpy<float, float4>(n, a, x, y);
}

__global__ void DLS_K_BOUNDS dls_axpy_f64(unsigned long long n, double a, const double *x, double *y) {
  dls_axpy<double, double2>(n, a, x, y);
}

// Strides are in elements and may be negative or zero (a broadcast source);
// ndim 0 copies one element.
__global__ void DLS_K_BOUNDS dls_copy_strided(void *dst, const void *src, const DLS_K_PARAM dls_copy_desc_t desc) {
  dls_k::copy_view(dst, src, desc.ndim, desc.shape, desc.dst_strides, desc.src_strides, desc.elem_size);
}

// The core's twin of dls_copy_strided for a contiguous view (builtin_table.h's DLS__TWINS): copy_view's contiguous
// path, `bytes` bytes at any two addresses, without the descriptor (its 208 bytes of parameters cost ~0.6 us a call
// at 2^20 float32 on an H200).
__global__ void DLS_K_BOUNDS dls__copy_bytes(void *dst, const void *src, unsigned long long bytes) {
  dls_k::copy_bytes(dst, src, bytes);
}

// The core's twins of dls_fill, dls_axpy_f32 and a contiguous copy for whole 16-byte vectors at addresses aligned to
// 16 (core/builtin.c checks both on the host): thread i moves vector i, on the 1-D grid of blocks of 256 the core
// sizes to the vectors (at most 2^32 threads, so a 32-bit rank), with no loop, no leftovers and no alignment test in
// the kernel. On an H200 at 2^20 float32 in CUDA graphs, kernels of this shape took 1.99, 2.24 and 2.48 us a call
// against torch's fill_, copy_ and add_ at 1.97, 2.29 and 2.47, where the tiles' kernels took 2.31, 2.39 and 2.63
// (bench/results/h200-2026-11-29-builtin-variants-7-graphs.txt, rows m1_* b256); at 2^26 they ran at torch's speed.
__global__ void DLS_K_BOUNDS dls__fill_vecs(uint4 *dst, unsigned long long vectors, unsigned long long pattern) {
  const unsigned i = dls_vec_rank();
  if (i < vectors)
    dst[i] = make_uint4((unsigned)pattern, (unsigned)(pattern >> 32), (unsigned)pattern, (unsigned)(pattern >> 32));
}

__global__ void DLS_K_BOUNDS dls__axpy_f32_vecs(unsigned long long vectors, float a, const float4 *x, float4 *y) {
  const unsigned i = dls_vec_rank();
  if (i < vectors)
    y[i] = dls_axpy4(a, x[i], y[i]);
}

__global__ void DLS_K_BOUNDS dls__copy_vecs(uint4 *dst, const uint4 *src, unsigned long long vectors) {
  const unsigned i = dls_vec_rank();
  if (i < vectors)
    dst[i] = src[i];
}

// One thread busy-waits `ns` nanoseconds of %globaltimer; the others leave at once.
__global__ void dls_spin(unsigned long long ns) {
  if (!dls_first_thread())
    return;
  const unsigned long long start = dls_globaltimer();
  while (dls_globaltimer() - start < ns) {
  }
}

// One thread waits for the host to write a non-zero value to `flag` (host-mapped
// memory). After `timeout_ns` it gives up and writes 1 to *timed_out, so a lost
// open never hangs the stream forever.
__global__ void dls_latch(volatile unsigned int *flag, unsigned long long timeout_ns, unsigned int *timed_out) {
  if (!dls_first_thread())
    return;
  const unsigned long long start = dls_globaltimer();
  unsigned int backoff = 32;
  for (;;) {
    // volatile: a fresh load over the bus every time, never a cached value.
    if (*flag != 0u)
      return;
    if (dls_globaltimer() - start >= timeout_ns) {
      *(volatile unsigned int *)timed_out = 1u;
      __threadfence_system();
      return;
    }
#if defined(__HIP_PLATFORM_AMD__)
    __builtin_amdgcn_s_sleep(8);  // about 8 x 64 clocks; the argument must be a constant
#else
    __nanosleep(backoff);  // sm_70+; the fatbin starts at sm_75
#endif
    if (backoff < 4096)
      backoff *= 2;
  }
}

}  // extern "C"
