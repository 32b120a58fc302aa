/* SPDX-License-Identifier: Apache-2.0 */
/* Element types in the core: names, and NumPy's same_kind casting (cast.h). */
#include <stdbool.h>
#include <stdio.h>

#include "core/cast.h"

const char *dls__dtype_name(DLDataType dt, char *buf, size_t size) {
  static const char *const codes[] = {[kDLInt] = "int", [kDLUInt] = "uint", [kDLFloat] = "float",
                                      [kDLBfloat] = "bfloat", [kDLComplex] = "complex"};
  const char *code = dt.code < sizeof codes / sizeof codes[0] ? codes[dt.code] : NULL;
  int n;
  if (dt.code == kDLBool && dt.bits == 8)
    n = snprintf(buf, size, "bool");
  else if (dt.code == kDLOpaqueHandle && dt.bits == 0)
    n = snprintf(buf, size, "of a type dlstream does not know");
  else if (code != NULL)
    n = snprintf(buf, size, "%s%u", code, (unsigned)dt.bits);
  else
    n = snprintf(buf, size, "dtype code %u of %u bits", (unsigned)dt.code, (unsigned)dt.bits);
  if (dt.lanes != 1 && n >= 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n, "x%u", (unsigned)dt.lanes);
  return buf;
}

int dls__cast_kind(DLDataType dt) {
  if (dt.lanes != 1)
    return -1;
  bool bits_1248 = dt.bits == 8 || dt.bits == 16 || dt.bits == 32 || dt.bits == 64;
  switch (dt.code) {
  case kDLBool: return dt.bits == 8 ? 0 : -1;
  case kDLUInt: return bits_1248 ? 1 : -1;
  case kDLInt: return bits_1248 ? 2 : -1;
  case kDLFloat: return dt.bits == 16 || dt.bits == 32 || dt.bits == 64 ? 3 : -1;
  case kDLBfloat: return dt.bits == 16 ? 3 : -1;
  default: return -1;
  }
}

dls_status_t dls__cast_check(const char *call, DLDataType dst, DLDataType src) {
  static const char *const kinds[] = {"a bool", "an unsigned integer", "a signed integer", "a float"};
  char d[40], s[40];
  dls__dtype_name(dst, d, sizeof d);
  dls__dtype_name(src, s, sizeof s);
  if (dst.code == src.code && dst.bits == src.bits && dst.lanes == src.lanes && dst.bits % 8 == 0 && dst.bits != 0 &&
      dst.lanes != 0)
    return DLS_OK; /* one type: its bits are copied */
  int kd = dls__cast_kind(dst), ks = dls__cast_kind(src);
  if (kd < 0 || ks < 0)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s(dst %s, src %s): converts between bool, integers of 8 to 64 bits, float16, bfloat16, "
                     "float32 and float64, not %s",
                     call, d, s, kd < 0 ? d : s);
  if (ks > kd)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(dst %s, src %s): an unsafe cast: NumPy's same_kind casting converts %s only to a type of "
                     "its kind or a later one (bool, unsigned, signed, float), never %s into %s",
                     call, d, s, s, kinds[ks], d);
  return DLS_OK;
}
