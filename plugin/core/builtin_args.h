/* SPDX-License-Identifier: Apache-2.0 */
/* The checks of a built-in's arguments: kinds, counts inside what each names, copy descriptors, overlaps. */
#ifndef DLSTREAM_CORE_BUILTIN_ARGS_H
#define DLSTREAM_CORE_BUILTIN_ARGS_H

#include "core/module.h"

/* The built-ins by index (dls__device.builtins). */
enum { DLS__BI_FILL, DLS__BI_AXPY_F32, DLS__BI_AXPY_F64, DLS__BI_COPY_STRIDED, DLS__BI_SPIN, DLS__BI_LATCH,
       DLS__BI_EMPTY, DLS__NBUILTIN };
_Static_assert(DLS__NBUILTIN <= 8, "dls__device.builtins has 8 slots");

/* The bytes of a scalar or raw-pointer argument, DLS_ARG_I32 to DLS_ARG_PTR. */
static inline uint32_t dls__arg_scalar_size(int32_t kind) {
  static const uint8_t sizes[DLS_ARG_PTR + 1] = {0, 4, 8, 4, 8, 4, 8, sizeof(void *)};
  return sizes[kind];
}
/* Bytes [lo, hi) around a raw pointer argument that belong to it (a
 * framework tensor's view), for the checks of built-ins; lo > hi: unknown. */
typedef struct dls__extent {
  int64_t lo, hi;
} dls__extent;

/* Checks a launch of built-in `fn`: argument count and kinds, counts inside
 * every buffer and tensor (and raw pointer of known extent; others are the
 * caller's word, but not NULL), a well-formed copy descriptor. *out_overlap:
 * what it reads partially overlaps what it writes. */
DLS__INTERNAL dls_status_t dls__builtin_check(const char *call, const dls__function *fn, const dls_arg_t *args,
                                              size_t nargs, const dls__extent *extents, bool *out_overlap);
/* How a built-in's kernel uses its memory argument i (DLS_ACCESS_*). The launch holds fn: its index is its own
 * (builtin_args.c's builtin_index asks the device's table too). Inline: a launch asks once per memory argument. */
static inline int dls__builtin_access(const dls__function *fn, size_t i) {
  switch (fn->builtin_k) {
  case DLS__BI_AXPY_F32:
  case DLS__BI_AXPY_F64:
    return i == 2 ? DLS_ACCESS_READ : DLS_ACCESS_WRITE; /* x read, y written */
  case DLS__BI_COPY_STRIDED:
    return i == 1 ? DLS_ACCESS_READ : DLS_ACCESS_WRITE; /* src read, dst written */
  case DLS__BI_LATCH:
    return DLS_ACCESS_READ; /* streams waiting on one latch are not ordered after each other */
  default:
    return DLS_ACCESS_WRITE;
  }
}
/* A copy descriptor's own checks (dimensions, element size, extents, no
 * zero destination stride over more than one element); its element count. */
DLS__INTERNAL dls_status_t dls__copy_desc_check(const char *call, const dls_copy_desc_t *d, uint64_t *out_count);
/* Bytes [lo, hi) a strided view of a copy reaches, relative to its first element. */
DLS__INTERNAL dls_status_t dls__copy_view_span(const char *call, const char *which, const dls_copy_desc_t *d,
                                               const int64_t *strides, int64_t *lo, int64_t *hi);

#endif /* DLSTREAM_CORE_BUILTIN_ARGS_H */
