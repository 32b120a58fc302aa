// SPDX-License-Identifier: Apache-2.0
// The dls_convert kernel: a strided copy converting each element (convert.h says how; the runtime refuses a cast
// NumPy's same_kind casting does not allow). One type on both sides is a copy (copy.cuh). Each pair of types the
// runtime allows has its own loop, converting with the GPU's instructions where they round as convert.h does
// (they agree on every value but the bits of a NaN, which stays a NaN); a contiguous view moves N elements per
// access (16 bytes of the destination).
#include "copy.cuh"

namespace {

using dls_k::u64;

// Element types the kernel names apart from C's: bool, and the bits of a float16 and a bfloat16.
struct t_bool {
  uint8_t v;
};
struct t_half {
  uint16_t v;
};
struct t_bf16 {
  uint16_t v;
};

// What the loops ask of an element type: its kind (0 bool, 1 unsigned, 2 signed, 3 float), its size, and its
// values as a float, a double or integer bits, and back. A float's value as a float is exact where the type is at
// most 32 bits.
template <typename T> struct ty;

template <typename T, int K>
struct integer {
  static const int kind = K;
  static __device__ __forceinline__ uint64_t bits(T x) { return K == 2 ? (uint64_t)(int64_t)x : (uint64_t)x; }
  static __device__ __forceinline__ T of_bits(uint64_t u) { return (T)u; } // wraps
  static __device__ __forceinline__ float to_f(T) { return 0.0f; }          // never: no integer casts to a float
  static __device__ __forceinline__ double to_d(T) { return 0.0; }
  static __device__ __forceinline__ T of_f(float) { return T(); }
  static __device__ __forceinline__ T of_d(double) { return T(); }
  static __device__ __forceinline__ T of_int(uint64_t u, bool) { return (T)u; }
};
template <> struct ty<uint8_t> : integer<uint8_t, 1> {};
template <> struct ty<uint16_t> : integer<uint16_t, 1> {};
template <> struct ty<uint32_t> : integer<uint32_t, 1> {};
template <> struct ty<uint64_t> : integer<uint64_t, 1> {};
template <> struct ty<int8_t> : integer<int8_t, 2> {};
template <> struct ty<int16_t> : integer<int16_t, 2> {};
template <> struct ty<int32_t> : integer<int32_t, 2> {};
template <> struct ty<int64_t> : integer<int64_t, 2> {};

template <> struct ty<t_bool> {
  static const int kind = 0;
  static __device__ __forceinline__ uint64_t bits(t_bool x) { return x.v != 0; }
  static __device__ __forceinline__ t_bool of_bits(uint64_t u) { return t_bool{(uint8_t)u}; } // from a bool only
  static __device__ __forceinline__ float to_f(t_bool) { return 0.0f; }
  static __device__ __forceinline__ double to_d(t_bool) { return 0.0; }
  static __device__ __forceinline__ t_bool of_f(float) { return t_bool{0}; }
  static __device__ __forceinline__ t_bool of_d(double) { return t_bool{0}; }
  static __device__ __forceinline__ t_bool of_int(uint64_t u, bool) { return t_bool{(uint8_t)u}; }
};

// The float types. An integer becomes a float as convert.h's dls__cv_store_float makes it: rounded once to
// float32 or float64, to bfloat16 through float32, to float16 through float64 (exact for every integer a float16
// can hold without overflowing).
template <typename T>
struct floating {
  static const int kind = 3;
  static __device__ __forceinline__ uint64_t bits(T) { return 0; }
  static __device__ __forceinline__ T of_bits(uint64_t) { return T(); }
  static __device__ __forceinline__ T of_int(uint64_t u, bool s) {
    return ty<T>::of_int_value(s ? (double)(int64_t)u : (double)u, s ? (float)(int64_t)u : (float)u);
  }
};

template <> struct ty<float> : floating<float> {
  static __device__ __forceinline__ float to_f(float x) { return x; }
  static __device__ __forceinline__ double to_d(float x) { return x; }
  static __device__ __forceinline__ float of_f(float f) { return f; }
  static __device__ __forceinline__ float of_d(double d) { return (float)d; }
  static __device__ __forceinline__ float of_int_value(double, float f) { return f; }
};

template <> struct ty<double> : floating<double> {
  static __device__ __forceinline__ float to_f(double x) { return (float)x; }
  static __device__ __forceinline__ double to_d(double x) { return x; }
  static __device__ __forceinline__ double of_f(float f) { return f; }
  static __device__ __forceinline__ double of_d(double d) { return d; }
  static __device__ __forceinline__ double of_int_value(double d, float) { return d; }
};

template <> struct ty<t_bf16> : floating<t_bf16> {
  static __device__ __forceinline__ float to_f(t_bf16 x) { return dls__cv_float((uint32_t)x.v << 16); }
  static __device__ __forceinline__ double to_d(t_bf16 x) { return to_f(x); }
  static __device__ __forceinline__ t_bf16 of_f(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIP_PLATFORM_AMD__)
    unsigned short b; // the instruction rounds to nearest even, as dls__cv_bfloat does (a NaN's bits aside)
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
    return t_bf16{b};
#else
    return t_bf16{dls__cv_bfloat(f)};
#endif
  }
  static __device__ __forceinline__ t_bf16 of_d(double d) { return t_bf16{dls__cv_bfloat((float)d)}; }
  static __device__ __forceinline__ t_bf16 of_int_value(double, float f) { return of_f(f); }
};

// float16: the conversion instructions round to nearest even without flushing subnormals, as convert.h does.
template <> struct ty<t_half> : floating<t_half> {
#if defined(__HIP_PLATFORM_AMD__)
  static __device__ __forceinline__ float to_f(t_half x) { return (float)dls__cv_of_half(x.v); }
  static __device__ __forceinline__ double to_d(t_half x) { return dls__cv_of_half(x.v); }
  static __device__ __forceinline__ t_half of_f(float f) { return t_half{dls__cv_half(f)}; }
  static __device__ __forceinline__ t_half of_d(double d) { return t_half{dls__cv_half(d)}; }
#else
  static __device__ __forceinline__ float to_f(t_half x) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.v));
    return f;
  }
  static __device__ __forceinline__ double to_d(t_half x) {
    double d;
    asm("cvt.f64.f16 %0, %1;" : "=d"(d) : "h"(x.v));
    return d;
  }
  static __device__ __forceinline__ t_half of_f(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return t_half{h};
  }
  static __device__ __forceinline__ t_half of_d(double d) {
    unsigned short h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d));
    return t_half{h};
  }
#endif
  static __device__ __forceinline__ t_half of_int_value(double d, float) { return of_d(d); }
};

// One element of S as D (a cast same_kind allows, between two different types).
template <typename D, typename S>
__device__ __forceinline__ D cv(S x) {
  if (ty<S>::kind == 3) { // then D is a float too
    if (sizeof(S) == 8 || sizeof(D) == 8)
      return ty<D>::of_d(ty<S>::to_d(x));
    return ty<D>::of_f(ty<S>::to_f(x)); // float16, bfloat16 and float32 are exact in a float
  }
  const uint64_t u = ty<S>::bits(x);
  return ty<D>::kind == 3 ? ty<D>::of_int(u, ty<S>::kind == 2) : ty<D>::of_bits(u);
}

// N elements a time (16 bytes of the destination: layout.h's DLS__CV_ELEMS), one access of each side.
template <typename D, typename S, int N>
struct cv_words {
  typedef dls_k::vec<S, N> value;
  dls_k::vec<D, N> *d;
  const value *s;
  template <typename I> __device__ __forceinline__ value load(I i) const { return s[i]; }
  template <typename I> __device__ __forceinline__ void store(I i, value v) const {
    dls_k::vec<D, N> o;
#pragma unroll
    for (int k = 0; k < N; ++k)
      o.v[k] = cv<D>(v.v[k]);
    d[i] = o;
  }
};

// One element of a contiguous run: the elements no vector holds.
template <typename D, typename S>
struct cv_one {
  typedef S value;
  D *d;
  const S *s;
  dls_k::leftovers at;
  template <typename I> __device__ __forceinline__ S load(I j) const { return s[at.at(j)]; }
  template <typename I> __device__ __forceinline__ void store(I j, S v) const { d[at.at(j)] = cv<D>(v); }
};

// A contiguous run of one pair of types: the elements before the source's first 16-byte boundary (all of them, one
// by one, where the destination is not at a 16-byte boundary there too), items of N (16 bytes of the destination,
// DLS__CV_ITEMS a thread: the core's grid), the rest.
template <typename D, typename S>
__device__ __forceinline__ void convert_run(void *dst, const void *src, u64 total) {
  D *d = static_cast<D *>(dst);
  const S *s = static_cast<const S *>(src);
  const int N = DLS__CV_ELEMS(sizeof(D), sizeof(S));
  u64 head = ((DLS__VEC_BYTES - (uintptr_t)s % DLS__VEC_BYTES) % DLS__VEC_BYTES) / sizeof(S);
  if ((uintptr_t)(d + head) % DLS__VEC_BYTES != 0 || head > total)
    head = total;
  const u64 body = (total - head) / N;
  dls_k::tiles<DLS__CV_ITEMS(sizeof(D), sizeof(S))>(
      body, cv_words<D, S, N>{reinterpret_cast<dls_k::vec<D, N> *>(d + head),
                              reinterpret_cast<const dls_k::vec<S, N> *>(s + head)});
  dls_k::run<4>(total - body * N, cv_one<D, S>{d, s, dls_k::leftovers{head, body * N}});
}

// The element type of a DLPack code and width (convert.h's DLS__CV_PAIRS names the pairs that way).
template <int code, int bits> struct type_of;
template <> struct type_of<kDLBool, 8> { typedef t_bool type; };
template <> struct type_of<kDLUInt, 8> { typedef uint8_t type; };
template <> struct type_of<kDLInt, 8> { typedef int8_t type; };
template <> struct type_of<kDLInt, 32> { typedef int32_t type; };
template <> struct type_of<kDLInt, 64> { typedef int64_t type; };
template <> struct type_of<kDLFloat, 16> { typedef t_half type; };
template <> struct type_of<kDLFloat, 32> { typedef float type; };
template <> struct type_of<kDLFloat, 64> { typedef double type; };
template <> struct type_of<kDLBfloat, 16> { typedef t_bf16 type; };
template <int code, int bits> using type_t = typename type_of<code, bits>::type;

// A contiguous run of a pair of DLS__CV_PAIRS; false for any other pair.
__device__ __forceinline__ bool convert_pair(void *dst, DLDataType dt, const void *src, DLDataType st, u64 total) {
  if (dt.lanes != 1 || st.lanes != 1)
    return false;
  switch (DLS__CV_KEY(st.code, st.bits, dt.code, dt.bits)) {
#define DLS_CV_CASE(sc, sb, dc, db)                                                                              \
  case DLS__CV_KEY(sc, sb, dc, db): convert_run<type_t<dc, db>, type_t<sc, sb>>(dst, src, total); return true;
    DLS__CV_PAIRS(DLS_CV_CASE)
#undef DLS_CV_CASE
  default: return false;
  }
}

// Any cast, any view: convert.h's element function at the offsets of a merged view.
struct cv_any {
  struct value {};
  unsigned char *d;
  const unsigned char *s;
  DLDataType dt, st;
  unsigned ds, ss;
  const dls__layout *l;
  template <typename I> __device__ __forceinline__ value load(I) const { return value{}; }
  template <typename I> __device__ __forceinline__ void store(I i, value) const {
    long long doff = 0, soff = 0;
    if (l->ndim == 1) {
      doff = (long long)i * l->dst[0];
      soff = (long long)i * l->src[0];
    } else if (l->ndim > 1) {
      dls_k::view_offsets(i, *l, doff, soff);
    }
    dls__cv_convert(d + doff * (long long)ds, dt, s + soff * (long long)ss, st);
  }
};

} // namespace

extern "C" {

// A strided copy converting each element from desc.src_dtype to desc.dst_dtype (convert.h; the runtime refuses a
// cast NumPy's same_kind casting does not allow, a type it does not convert, and elements not aligned to their
// size). One type on both sides copies its bits.
__global__ void DLS_K_BOUNDS dls_convert(void *dst, const void *src, const DLS_K_PARAM dls_convert_desc_t desc) {
  const DLDataType dt = desc.dst_dtype, st = desc.src_dtype;
  const unsigned ds = ((unsigned)dt.bits * dt.lanes + 7) / 8;
  const unsigned ss = ((unsigned)st.bits * st.lanes + 7) / 8;
  const u64 total = dls__view_count(desc.ndim, desc.shape);
  if (total == 0 || ds == 0 || ss == 0)
    return;
  if (dt.code == st.code && ds == ss && dt.lanes == st.lanes) {
    dls_k::copy_view(dst, src, desc.ndim, desc.shape, desc.dst_strides, desc.src_strides, ds);
    return;
  }
  if (dls__view_contiguous(desc.ndim, desc.shape, desc.dst_strides, desc.src_strides) &&
      convert_pair(dst, dt, src, st, total))
    return;
  const dls__layout *l = dls_k::block_layout(desc.ndim, desc.shape, desc.dst_strides, desc.src_strides);
  dls_k::run<1>(total, cv_any{static_cast<unsigned char *>(dst), static_cast<const unsigned char *>(src), dt, st,
                              ds, ss, l});
}

// The core's twins of dls_convert for a contiguous view, one a pair of DLS__CV_PAIRS (builtin_table.h's DLS__TWINS):
// dls_convert's contiguous loop of that pair, `n` elements, without the descriptor and the switch on its types.
#define DLS_CV_TWIN(sc, sb, dc, db)                                                                              \
  __global__ void DLS_K_BOUNDS DLS__CV_SYMBOL(sc, sb, dc, db)(void *dst, const void *src, unsigned long long n) {  \
    convert_run<type_t<dc, db>, type_t<sc, sb>>(dst, src, n);                                                     \
  }
DLS__CV_PAIRS(DLS_CV_TWIN)
#undef DLS_CV_TWIN

} // extern "C"
