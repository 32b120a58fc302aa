/* SPDX-License-Identifier: Apache-2.0 */
/* The checks of a built-in's arguments: kinds, element types, counts inside what each names, descriptors, overlaps;
 * and the core's view of the built-ins' table (kernels/builtin_table.h). */
#ifndef DLSTREAM_CORE_BUILTIN_ARGS_H
#define DLSTREAM_CORE_BUILTIN_ARGS_H

#include "core/module.h"
#include "kernels/builtin_table.h"

/* A built-in as the table writes it: its name and arguments. */
typedef struct dls__builtin_info {
  const char *name;
  size_t nargs;
  dls__builtin_arg args[DLS__BUILTIN_MAX_ARGS];
  const char *gpu; /* its GPU symbol */
} dls__builtin_info;
/* The table's lines by DLS__BI_* (builtin_args.c): the built-ins, then the core's twins (DLS__KERNELS). */
DLS__INTERNAL extern const dls__builtin_info dls__builtins[DLS__NKERNEL];

/* The bytes of a scalar or raw-pointer argument, DLS_ARG_I32 to DLS_ARG_PTR. */
static inline uint32_t dls__arg_scalar_size(int32_t kind) {
  static const uint8_t sizes[DLS_ARG_PTR + 1] = {0, 4, 8, 4, 8, 4, 8, sizeof(void *)};
  return sizes[kind];
}
/* What is known of a raw pointer argument's memory, for the checks of built-ins: the bytes [lo, hi) around it that
 * belong to it (a framework tensor's view, an XLA buffer; lo > hi: unknown) and its element type (lanes 0:
 * unknown). */
typedef struct dls__extent {
  int64_t lo, hi;
  DLDataType dtype;
} dls__extent;

/* Checks a launch of built-in `fn`: argument count and kinds, element types where the memory's type is known
 * (tensors; pointers of known extent), counts inside every buffer and tensor (and raw pointer of known extent;
 * others are the caller's word, but not NULL), a well-formed descriptor. *out_overlap: what it reads partially
 * overlaps what it writes. */
DLS__INTERNAL dls_status_t dls__builtin_check(const char *call, const dls__function *fn, const dls_arg_t *args,
                                              size_t nargs, const dls__extent *extents, bool *out_overlap);
/* The same, and *out_addr_bits: the bitwise OR of its memory arguments' addresses (1 where one is unknown: its
 * alignment is the least of theirs), which the core's calls read to pick a vector twin (builtin.c); `out_args` (or
 * NULL; nargs entries, `args` itself allowed): the arguments with scalars given as bytes read as their kinds (an XLA
 * call's), as the core's calls read them. */
DLS__INTERNAL dls_status_t dls__builtin_check_addrs(const char *call, const dls__function *fn, const dls_arg_t *args,
                                                    size_t nargs, const dls__extent *extents, bool *out_overlap,
                                                    uintptr_t *out_addr_bits, dls_arg_t *out_args);
/* How a built-in's kernel uses its memory argument i (DLS_ACCESS_*), from the table. Inline: a launch asks once per
 * memory argument. */
static inline int dls__builtin_access(const dls__function *fn, size_t i) {
  uint32_t a = fn->builtin_k < DLS__NKERNEL && i < DLS__BUILTIN_MAX_ARGS ? dls__builtins[fn->builtin_k].args[i].what
                                                                          : 0;
  return DLS__A_KIND(a) == DLS__ARG_MEM_CP || (a & DLS__A_AS_READ) ? DLS_ACCESS_READ : DLS_ACCESS_WRITE;
}
/* A copy descriptor's own checks (dimensions, element size, extents, no
 * zero destination stride over more than one element); its element count. */
DLS__INTERNAL dls_status_t dls__copy_desc_check(const char *call, const dls_copy_desc_t *d, uint64_t *out_count);
/* Bytes [lo, hi) a strided view of a copy reaches, relative to its first element, with elements of `elem` bytes. */
DLS__INTERNAL dls_status_t dls__copy_view_span(const char *call, const char *which, const dls_copy_desc_t *d,
                                               const int64_t *strides, uint32_t elem, int64_t *lo, int64_t *hi);
/* A conversion descriptor as a copy's (shape and strides; elem_size dst's) after its own checks (dimensions, types
 * NumPy's same_kind casting converts, extents); its element count. */
DLS__INTERNAL dls_status_t dls__convert_desc_check(const char *call, const dls_convert_desc_t *d,
                                                   dls_copy_desc_t *out_copy, uint64_t *out_count);
/* Built-in k of the table for the extension (ext.h): its name, GPU symbol and argument count; false past the
 * last. */
DLS__INTERNAL bool dls__builtin_describe(size_t k, const char **out_name, const char **out_gpu, size_t *out_nargs);
/* Argument i (< its count) of built-in k: its name, signature token ("p", "cp", "u64", "bytes" ...), what the table
 * says of it (DLS__A_*, DLS__T_*, DLS__DESC_*) and the element types it takes in words ("" for a scalar). */
DLS__INTERNAL void dls__builtin_describe_arg(size_t k, size_t i, const char **out_name, const char **out_token,
                                             uint32_t *out_what, char *types, size_t size);

#endif /* DLSTREAM_CORE_BUILTIN_ARGS_H */
