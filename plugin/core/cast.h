/* SPDX-License-Identifier: Apache-2.0 */
/* Element types in the core: their names in messages, and NumPy's same_kind casting between the types the
 * conversion kernel (dls_convert) converts. */
#ifndef DLSTREAM_CORE_CAST_H
#define DLSTREAM_CORE_CAST_H

#include "base/error.h"
#include "dlstream/dlstream.h"

/* The bytes of one element of `dt` (its lanes together; sub-byte types round up). */
static inline size_t dls__dtype_bytes(DLDataType dt) { return ((size_t)dt.bits * dt.lanes + 7) / 8; }
/* "float32", "int8", "bfloat16", "bool", "complex64"; others by code and bits. Returns buf. */
DLS__INTERNAL const char *dls__dtype_name(DLDataType dt, char *buf, size_t size);
/* The kind of an element type dls_convert converts: 0 bool, 1 unsigned, 2 signed, 3 floating (float16, bfloat16,
 * float32, float64); -1 for any other type. */
DLS__INTERNAL int dls__cast_kind(DLDataType dt);
/* Whether `call` may convert elements of `src` into `dst`: NumPy's same_kind casting (a kind never goes down
 * bool < unsigned < signed < floating; within a kind any size), between types dls_convert converts, or one type of
 * whole bytes on both sides (its bits are copied). DLS_OK, or
 * DLS_ERR_INVALID_ARGUMENT (an unsafe cast) or DLS_ERR_NOT_SUPPORTED (a type it does not convert) with a message
 * naming the call, both types and the rule. */
DLS__INTERNAL dls_status_t dls__cast_check(const char *call, DLDataType dst, DLDataType src);

#endif /* DLSTREAM_CORE_CAST_H */
