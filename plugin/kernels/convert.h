/* SPDX-License-Identifier: Apache-2.0 */
/* One element of dls_convert, the same code for the CPU twin (C, builtins_cpu.c) and the GPU kernel (CUDA and HIP,
 * builtins.cu): NumPy's astype for the casts its same_kind casting allows (core/cast.c refuses the others before a
 * launch, so no float ever becomes an integer here). Integers narrow or change sign by wrapping (two's
 * complement); integers become floats rounded to nearest even (to bfloat16 through float32, as torch and
 * ml_dtypes do); floats round to nearest even, overflowing to an infinity; NaN stays NaN. Elements are aligned to
 * their size (the check refuses others). */
#ifndef DLSTREAM_KERNELS_CONVERT_H
#define DLSTREAM_KERNELS_CONVERT_H

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define DLS__CV static __host__ __device__ __forceinline__
#define DLS__CV_LOAD(type, p) (*(const type *)(p))
#define DLS__CV_STORE(type, p, v) (*(type *)(p) = (type)(v))
#else
#include <string.h>
#define DLS__CV static inline
#define DLS__CV_LOAD(type, p) dls__cv_get_##type(p)
#define DLS__CV_STORE(type, p, v) dls__cv_put_##type((p), (type)(v))
#define DLS__CV_MEM(type)                                                                                           \
  static inline type dls__cv_get_##type(const unsigned char *p) {                                                 \
    type v;                                                                                                         \
    memcpy(&v, p, sizeof v);                                                                                        \
    return v;                                                                                                       \
  }                                                                                                                 \
  static inline void dls__cv_put_##type(unsigned char *p, type v) { memcpy(p, &v, sizeof v); }
DLS__CV_MEM(uint8_t)
DLS__CV_MEM(uint16_t)
DLS__CV_MEM(uint32_t)
DLS__CV_MEM(uint64_t)
DLS__CV_MEM(int8_t)
DLS__CV_MEM(int16_t)
DLS__CV_MEM(int32_t)
DLS__CV_MEM(int64_t)
DLS__CV_MEM(float)
DLS__CV_MEM(double)
#undef DLS__CV_MEM
#endif

/* The bits of a float or double, and back. */
#define DLS__CV_BITCAST(name, from, to)                                                                             \
  DLS__CV to name(from x) {                                                                                         \
    union {                                                                                                         \
      from a;                                                                                                       \
      to b;                                                                                                         \
    } u;                                                                                                            \
    u.a = x;                                                                                                        \
    return u.b;                                                                                                     \
  }
DLS__CV_BITCAST(dls__cv_bits, double, uint64_t)
DLS__CV_BITCAST(dls__cv_double, uint64_t, double)
DLS__CV_BITCAST(dls__cv_fbits, float, uint32_t)
DLS__CV_BITCAST(dls__cv_float, uint32_t, float)
#undef DLS__CV_BITCAST

/* `m` shifted right by `s` (1 to 63) bits, rounded to nearest even. */
DLS__CV uint64_t dls__cv_round_shift(uint64_t m, unsigned s) {
  uint64_t q = m >> s, rest = m & ((1ull << s) - 1), half = 1ull << (s - 1);
  return q + (rest > half || (rest == half && (q & 1)));
}

/* IEEE binary16 of a double, rounded once to nearest even. */
DLS__CV uint16_t dls__cv_half(double d) {
  uint64_t u = dls__cv_bits(d);
  uint16_t sign = (uint16_t)((u >> 48) & 0x8000u);
  uint64_t a = u & 0x7fffffffffffffffull;
  if (a >= 0x7ff0000000000000ull) /* infinity, or NaN (quiet, with the top of its payload) */
    return (uint16_t)(sign | (a == 0x7ff0000000000000ull ? 0x7c00u : 0x7e00u | (uint16_t)((a >> 42) & 0x3ffu)));
  int e = (int)(a >> 52) - 1023;
  if (e < -25)
    return sign; /* below half the smallest subnormal, 2**-25 */
  uint64_t m = (a & 0xfffffffffffffull) | (1ull << 52);
  if (e >= 16)
    return (uint16_t)(sign | 0x7c00u);
  /* Units of the half's last place: 2**-24 for subnormals, 2**(e - 10) for normals. */
  uint64_t units = e < -14 ? dls__cv_round_shift(m, (unsigned)(28 - e)) : dls__cv_round_shift(m, 42);
  if (e < -14)
    return (uint16_t)(sign | units); /* 1024 is the smallest normal's encoding */
  uint64_t h = ((uint64_t)(e + 14) << 10) + units; /* a carry out of the mantissa raises the exponent */
  return (uint16_t)(sign | (h >= 0x7c00u ? 0x7c00u : h));
}

/* A double of IEEE binary16 bits (exact). */
DLS__CV double dls__cv_of_half(uint16_t h) {
  uint64_t sign = (uint64_t)(h & 0x8000u) << 48;
  unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f)
    return dls__cv_double(sign | 0x7ff0000000000000ull | (uint64_t)m << 42);
  if (e == 0)
    return dls__cv_double(sign) + (sign ? -1.0 : 1.0) * (double)m * 5.9604644775390625e-08; /* m * 2**-24 */
  return dls__cv_double(sign | (uint64_t)(e + 1008) << 52 | (uint64_t)m << 42);
}

/* bfloat16 of a float, rounded to nearest even; NaN stays NaN. */
DLS__CV uint16_t dls__cv_bfloat(float f) {
  uint32_t u = dls__cv_fbits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* An integer or bool element as 64-bit two's complement bits (signed ones sign-extended); a bool is 0 or 1. */
DLS__CV uint64_t dls__cv_load_int(const unsigned char *p, DLDataType t) {
  bool s = t.code == kDLInt;
  switch (t.bits) {
  case 8: return t.code == kDLBool ? (uint64_t)(DLS__CV_LOAD(uint8_t, p) != 0)
                 : s ? (uint64_t)(int64_t)DLS__CV_LOAD(int8_t, p) : DLS__CV_LOAD(uint8_t, p);
  case 16: return s ? (uint64_t)(int64_t)DLS__CV_LOAD(int16_t, p) : DLS__CV_LOAD(uint16_t, p);
  case 32: return s ? (uint64_t)(int64_t)DLS__CV_LOAD(int32_t, p) : DLS__CV_LOAD(uint32_t, p);
  default: return DLS__CV_LOAD(uint64_t, p);
  }
}

/* A float element as a double (exact). */
DLS__CV double dls__cv_load_float(const unsigned char *p, DLDataType t) {
  if (t.bits == 64)
    return DLS__CV_LOAD(double, p);
  if (t.bits == 32)
    return DLS__CV_LOAD(float, p);
  uint16_t h = DLS__CV_LOAD(uint16_t, p);
  return t.code == kDLBfloat ? (double)dls__cv_float((uint32_t)h << 16) : dls__cv_of_half(h);
}

/* Stores `d` (or the integer `u`, signed when `s`, where `from_int`) as a float element of `t`. */
DLS__CV void dls__cv_store_float(unsigned char *p, DLDataType t, double d, bool from_int, uint64_t u, bool s) {
  if (t.bits == 64) {
    DLS__CV_STORE(double, p, from_int ? (s ? (double)(int64_t)u : (double)u) : d);
  } else if (t.bits == 32) {
    DLS__CV_STORE(float, p, from_int ? (s ? (float)(int64_t)u : (float)u) : (float)d);
  } else if (t.code == kDLBfloat) {
    float f = from_int ? (s ? (float)(int64_t)u : (float)u) : (float)d;
    DLS__CV_STORE(uint16_t, p, dls__cv_bfloat(f));
  } else {
    DLS__CV_STORE(uint16_t, p, dls__cv_half(from_int ? (s ? (double)(int64_t)u : (double)u) : d));
  }
}

/* One element of `st` at `src` into `dt` at `dst` (a cast same_kind allows, between two different types). */
DLS__CV void dls__cv_convert(unsigned char *dst, DLDataType dt, const unsigned char *src, DLDataType st) {
  if (st.code == kDLFloat || st.code == kDLBfloat) {
    dls__cv_store_float(dst, dt, dls__cv_load_float(src, st), false, 0, false);
    return;
  }
  uint64_t u = dls__cv_load_int(src, st);
  if (dt.code == kDLFloat || dt.code == kDLBfloat) {
    dls__cv_store_float(dst, dt, 0.0, true, u, st.code == kDLInt);
    return;
  }
  switch (dt.bits) { /* integers wrap; a bool comes only from a bool */
  case 8: DLS__CV_STORE(uint8_t, dst, u); break;
  case 16: DLS__CV_STORE(uint16_t, dst, u); break;
  case 32: DLS__CV_STORE(uint32_t, dst, u); break;
  default: DLS__CV_STORE(uint64_t, dst, u); break;
  }
}

/* The pairs of types dls_convert moves in 16-byte vectors on a contiguous view (convert.cu has a loop for each, and
 * the core sizes the grid for those: core/builtin.c), as source code, bits, destination code, bits: between the float
 * types, the common integers to float32 (and int32, int64 to float64), int32 and int64 both ways. Every other cast,
 * and every strided view, takes dls__cv_convert element by element. Each pair also has a kernel of its own with
 * small arguments, (dst, src, n), which the core runs for a contiguous view (builtin_table.h's DLS__TWINS).
 * DLS__CV_PAIRS_WITH(F, X) calls F(X, sc, sb, dc, db) for each pair (a list that passes X on: DLS__TWINS). */
#define DLS__CV_PAIRS_WITH(F, X)                                                                                    \
  F(X, kDLFloat, 32, kDLFloat, 16) F(X, kDLFloat, 16, kDLFloat, 32) F(X, kDLFloat, 32, kDLBfloat, 16)               \
  F(X, kDLBfloat, 16, kDLFloat, 32) F(X, kDLFloat, 32, kDLFloat, 64) F(X, kDLFloat, 64, kDLFloat, 32)               \
  F(X, kDLFloat, 64, kDLFloat, 16) F(X, kDLFloat, 16, kDLFloat, 64) F(X, kDLFloat, 64, kDLBfloat, 16)               \
  F(X, kDLBfloat, 16, kDLFloat, 64) F(X, kDLFloat, 16, kDLBfloat, 16) F(X, kDLBfloat, 16, kDLFloat, 16)             \
  F(X, kDLBool, 8, kDLFloat, 32) F(X, kDLUInt, 8, kDLFloat, 32) F(X, kDLInt, 8, kDLFloat, 32)                       \
  F(X, kDLInt, 32, kDLFloat, 32) F(X, kDLInt, 64, kDLFloat, 32) F(X, kDLInt, 32, kDLFloat, 64)                      \
  F(X, kDLInt, 64, kDLFloat, 64) F(X, kDLInt, 32, kDLInt, 64) F(X, kDLInt, 64, kDLInt, 32)
#define DLS__CV_APPLY(X, sc, sb, dc, db) X(sc, sb, dc, db)
#define DLS__CV_PAIRS(X) DLS__CV_PAIRS_WITH(DLS__CV_APPLY, X)

/* A pair's key: source code and bits, destination code and bits, a byte each. */
#define DLS__CV_KEY(sc, sb, dc, db)                                                                                 \
  ((unsigned)(sc) << 24 | (unsigned)(sb) << 16 | (unsigned)(dc) << 8 | (unsigned)(db))

/* A pair's identifier (DLS__CV_kDLFloat32_kDLFloat16 ...: its index in DLS__CV_PAIRS), and DLS__CV_NPAIRS. */
#define DLS__CV_ID(sc, sb, dc, db) DLS__CV_##sc##sb##_##dc##db
#define DLS__CV_ENUM_ONE(sc, sb, dc, db) DLS__CV_ID(sc, sb, dc, db),
enum { DLS__CV_PAIRS(DLS__CV_ENUM_ONE) DLS__CV_NPAIRS };
#undef DLS__CV_ENUM_ONE

/* A pair's kernel with small arguments: its symbol (an identifier: convert.cu's extern "C" kernel, builtins_cpu.c's
 * twin) and that symbol as a string (the name the backends find it by). */
#define DLS__CV_SYMBOL(sc, sb, dc, db) dls__convert_##sc##sb##_##dc##db
#define DLS__CV_STR_(x) #x
#define DLS__CV_STR(x) DLS__CV_STR_(x)

/* The index in DLS__CV_PAIRS of a pair of types, -1 for a pair without a loop of its own. */
DLS__CV int dls__cv_pair(DLDataType dt, DLDataType st) {
  if (dt.lanes != 1 || st.lanes != 1)
    return -1;
  switch (DLS__CV_KEY(st.code, st.bits, dt.code, dt.bits)) {
#define DLS__CV_CASE(sc, sb, dc, db)                                                                                \
  case DLS__CV_KEY(sc, sb, dc, db): return DLS__CV_ID(sc, sb, dc, db);
    DLS__CV_PAIRS(DLS__CV_CASE)
#undef DLS__CV_CASE
  default: return -1;
  }
}

/* Whether dls_convert moves a contiguous view of these types in 16-byte vectors (DLS__CV_PAIRS). */
DLS__CV bool dls__cv_has_loop(DLDataType dt, DLDataType st) { return dls__cv_pair(dt, st) >= 0; }

#endif /* DLSTREAM_KERNELS_CONVERT_H */
