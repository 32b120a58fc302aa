// SPDX-License-Identifier: Apache-2.0
// The GPU built-in kernels (fill, axpy, strided and converting copies, spin, latch, empty; the table:
// builtin_table.h names each one's symbol): nvcc embeds them as one fatbin, hipcc as one code object bundle.
//
// Plain extern "C" kernels so the backend finds them by name with
// cuModuleGetFunction / hipModuleGetFunction; argument lists are those of
// dls_builtin_function in include/dlstream/builtin.h. Every loop is
// grid-stride, so any grid the runtime picks covers the whole range. The
// only vendor differences are the clock and the back-off of the waits
// (__HIP_PLATFORM_AMD__ below); cmake/DlsHipKernels.cmake compiles this
// file with hip_runtime.h included first.
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

static_assert(sizeof(dls_copy_desc_t) == 8 + 3 * 8 * DLS_COPY_MAX_DIMS, "dls_copy_desc_t layout");
static_assert(sizeof(dls_convert_desc_t) == 16 + 3 * 8 * DLS_COPY_MAX_DIMS, "dls_convert_desc_t layout");

namespace {

__device__ __forceinline__ unsigned long long dls_thread_index() {
  return (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ unsigned long long dls_thread_stride() {
  return (unsigned long long)gridDim.x * blockDim.x;
}

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

__device__ __forceinline__ bool dls_first_thread() {
  return blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 && threadIdx.y == 0 &&
         threadIdx.z == 0;
}

template <typename T>
__device__ __forceinline__ void dls_fill_words(T *dst, unsigned long long count, T value) {
  for (unsigned long long i = dls_thread_index(); i < count; i += dls_thread_stride())
    dst[i] = value;
}

// The element offsets (in elements of each side) of element i of a row-major view: the last dimension varies
// fastest.
__device__ __forceinline__ void dls_offsets(unsigned long long i, int ndim, const int64_t *shape,
                                            const int64_t *dst_strides, const int64_t *src_strides, long long *doff,
                                            long long *soff) {
  unsigned long long rest = i;
  long long d = 0, s = 0;
  for (int k = ndim - 1; k >= 0; --k) {
    const unsigned long long extent = (unsigned long long)shape[k];
    const long long idx = (long long)(rest % extent);
    rest /= extent;
    d += idx * dst_strides[k];
    s += idx * src_strides[k];
  }
  *doff = d;
  *soff = s;
}

// Copies `words` words of type W per element; W is the widest word that
// divides the element size and both base pointers' alignment.
template <typename W>
__device__ __forceinline__ void dls_copy_elems(char *dst, const char *src, const dls_copy_desc_t &d,
                                               unsigned long long total) {
  const unsigned words = d.elem_size / (unsigned)sizeof(W);
  for (unsigned long long i = dls_thread_index(); i < total; i += dls_thread_stride()) {
    long long doff, soff;
    dls_offsets(i, (int)d.ndim, d.shape, d.dst_strides, d.src_strides, &doff, &soff);
    W *dw = reinterpret_cast<W *>(dst + doff * (long long)d.elem_size);
    const W *sw = reinterpret_cast<const W *>(src + soff * (long long)d.elem_size);
    for (unsigned w = 0; w < words; ++w)
      dw[w] = sw[w];
  }
}

// The elements of a valid descriptor (shape and dimensions checked by the runtime); 0 when one extent is 0 or
// the descriptor is out of bounds.
__device__ __forceinline__ unsigned long long dls_total(unsigned ndim, const int64_t *shape) {
  if (ndim > DLS_COPY_MAX_DIMS)
    return 0;
  unsigned long long total = 1;
  for (unsigned k = 0; k < ndim; ++k) {
    if (shape[k] <= 0)
      return 0;
    total *= (unsigned long long)shape[k];
  }
  return total;
}

// A strided copy of whole elements, each as words as wide as the element size and both pointers allow.
__device__ __forceinline__ void dls_copy_view(void *dst, const void *src, const dls_copy_desc_t &desc) {
  const unsigned long long total = dls_total(desc.ndim, desc.shape);
  if (total == 0 || desc.elem_size == 0)
    return;
  char *d = static_cast<char *>(dst);
  const char *s = static_cast<const char *>(src);
  const uintptr_t align = (uintptr_t)d | (uintptr_t)s;
  const unsigned es = desc.elem_size;
  if (es % 8 == 0 && align % 8 == 0)
    dls_copy_elems<uint64_t>(d, s, desc, total);
  else if (es % 4 == 0 && align % 4 == 0)
    dls_copy_elems<uint32_t>(d, s, desc, total);
  else if (es % 2 == 0 && align % 2 == 0)
    dls_copy_elems<uint16_t>(d, s, desc, total);
  else
    dls_copy_elems<uint8_t>(d, s, desc, total);
}

}  // namespace

extern "C" {

// An empty kernel: the launch-overhead benchmark's payload.
__global__ void dls_empty(void) {}

// Sets `count` elements of `elem_size` bytes (1, 2, 4 or 8) to the low
// elem_size bytes of `pattern` (little-endian, as the host wrote them).
__global__ void dls_fill(void *dst, unsigned long long count, unsigned int elem_size, unsigned long long pattern) {
  switch (elem_size) {
  case 1: dls_fill_words(static_cast<uint8_t *>(dst), count, (uint8_t)pattern); break;
  case 2: dls_fill_words(static_cast<uint16_t *>(dst), count, (uint16_t)pattern); break;
  case 4: dls_fill_words(static_cast<uint32_t *>(dst), count, (uint32_t)pattern); break;
  case 8: dls_fill_words(static_cast<uint64_t *>(dst), count, (uint64_t)pattern); break;
  default: break;  // the runtime rejects other sizes before launching
  }
}

__global__ void dls_axpy_f32(unsigned long long n, float a, const float *x, float *y) {
  for (unsigned long long i = dls_thread_index(); i < n; i += dls_thread_stride())
    y[i] = a * x[i] + y[i];
}

__global__ void dls_axpy_f64(unsigned long long n, double a, const double *x, double *y) {
  for (unsigned long long i = dls_thread_index(); i < n; i += dls_thread_stride())
    y[i] = a * x[i] + y[i];
}

// Strides are in elements and may be negative or zero (a broadcast source);
// ndim 0 copies one element.
__global__ void dls_copy_strided(void *dst, const void *src, dls_copy_desc_t desc) { dls_copy_view(dst, src, desc); }

// A strided copy converting each element from desc.src_dtype to desc.dst_dtype (convert.h; the runtime refuses a
// cast NumPy's same_kind casting does not allow, and elements not aligned to their size). One type on both sides
// copies its bits.
__global__ void dls_convert(void *dst, const void *src, dls_convert_desc_t desc) {
  const unsigned ds = ((unsigned)desc.dst_dtype.bits * desc.dst_dtype.lanes + 7) / 8;
  const unsigned ss = ((unsigned)desc.src_dtype.bits * desc.src_dtype.lanes + 7) / 8;
  const unsigned long long total = dls_total(desc.ndim, desc.shape);
  if (total == 0 || ds == 0 || ss == 0)
    return;
  if (desc.dst_dtype.code == desc.src_dtype.code && ds == ss && desc.dst_dtype.lanes == desc.src_dtype.lanes) {
    dls_copy_desc_t c;
    c.ndim = desc.ndim;
    c.elem_size = ds;
    for (unsigned k = 0; k < DLS_COPY_MAX_DIMS; ++k) {
      c.shape[k] = desc.shape[k];
      c.dst_strides[k] = desc.dst_strides[k];
      c.src_strides[k] = desc.src_strides[k];
    }
    dls_copy_view(dst, src, c);
    return;
  }
  unsigned char *d = static_cast<unsigned char *>(dst);
  const unsigned char *s = static_cast<const unsigned char *>(src);
  for (unsigned long long i = dls_thread_index(); i < total; i += dls_thread_stride()) {
    long long doff, soff;
    dls_offsets(i, (int)desc.ndim, desc.shape, desc.dst_strides, desc.src_strides, &doff, &soff);
    dls__cv_convert(d + doff * (long long)ds, desc.dst_dtype, s + soff * (long long)ss, desc.src_dtype);
  }
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
