/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in kernels, written once: the core's enum, names, signatures and checks, the CPU backend's kernels, the
 * GPU backends' symbols, the Python signatures and the messages that list them are all made from DLS__BUILTINS.
 *
 * Adding a built-in: one line below, its checker (core/builtin_args.c), its CPU twin (kernels/builtins_cpu.c) and
 * its GPU kernel (kernels/builtins.cu, extern "C" under the GPU symbol). tests/c/test_builtin_table.c and
 * tests/python/test_builtin_ways.py read the table, so they cover a new one without an edit. Below the built-ins, the
 * core's own twins of the copies for contiguous views (DLS__TWINS), which no user sees. */
#ifndef DLSTREAM_KERNELS_BUILTIN_TABLE_H
#define DLSTREAM_KERNELS_BUILTIN_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "dlstream/launch.h"
#include "kernels/convert.h"

/* An argument of a built-in, one uint32_t: its kind, Function.launch's signature token (bits 24..31), and for
 * memory the element types it takes (bits 0..19) and how the hazard rule orders it (bit 20). */
#define DLS__ARG_MEM_P 0x10u  /* memory the kernel writes: "p" */
#define DLS__ARG_MEM_CP 0x11u /* memory it only reads: "cp" */
#define DLS__A_KIND(a) ((uint32_t)(a) >> 24)
#define DLS__A_TYPE(a) ((uint32_t)(a)&0xfffffu)
#define DLS__A_AS_READ 0x100000u /* a "p" argument ordered as a read (the latch's: see below) */
#define DLS__A_COUNT 0x200000u   /* a scalar that counts the elements its memory arguments hold */

/* Element types (DLS__A_TYPE): */
#define DLS__T_EXACT(code, bits) (0x10000u | (uint32_t)(code) << 8 | (uint32_t)(bits)) /* that type, one lane */
#define DLS__T_INT(bits) (0x20000u | (uint32_t)(bits)) /* a signed or unsigned integer of `bits`, one lane */
#define DLS__T_SIZED(i) (0x30000u | (uint32_t)(i))     /* any type whose size is its u32 argument i */
#define DLS__T_DESC(i) (0x40000u | (uint32_t)(i))      /* the types its descriptor (bytes argument i) names */
#define DLS__T_RULE(t) (((uint32_t)(t) >> 16) & 0xfu)
#define DLS__T_PARAM(t) ((uint32_t)(t)&0xffffu)
#define DLS__T_F32 DLS__T_EXACT(kDLFloat, 32)
#define DLS__T_F64 DLS__T_EXACT(kDLFloat, 64)

/* The arguments a table line names: */
#define DLS__P(t) ((DLS__ARG_MEM_P << 24) | (t))
#define DLS__CP(t) ((DLS__ARG_MEM_CP << 24) | (t))
#define DLS__U32 ((uint32_t)DLS_ARG_U32 << 24)
#define DLS__U64 ((uint32_t)DLS_ARG_U64 << 24)
#define DLS__F32 ((uint32_t)DLS_ARG_F32 << 24)
#define DLS__F64 ((uint32_t)DLS_ARG_F64 << 24)
#define DLS__BYTES_OF(desc) ((uint32_t)DLS_ARG_BYTES << 24 | (desc)) /* a struct by value: DLS__DESC_* */
#define DLS__DESC_COPY 1u    /* dls_copy_desc_t */
#define DLS__DESC_CONVERT 2u /* dls_convert_desc_t */

/* One argument: its name in messages, and what it is. */
typedef struct dls__builtin_arg {
  const char *name;
  uint32_t what; /* DLS__P(...), DLS__U64, ... */
} dls__builtin_arg;
/* The most arguments a built-in takes. */
#define DLS__BUILTIN_MAX_ARGS 8

/* X(id, name, argument count, arguments, checker, CPU kernel, GPU symbol)
 *   id          DLS__BI_<id>: the built-in's index in every list
 *   name        dls_builtin_function's
 *   count       its arguments: as many as the list names
 *   arguments   its signature: per argument {name, kind}; a memory argument's kind names the element types it takes
 *               (DLS__T_*), which every way in checks where the memory's type is known
 *   checker     core/builtin_args.c's check of what kinds and types do not say (counts, descriptors, overlaps)
 *   CPU kernel  kernels/builtins_cpu.c's twin
 *   GPU symbol  the extern "C" kernel of kernels/builtins.cu (cuModuleGetFunction / hipModuleGetFunction)
 * The latch's memory is ordered as a read: streams waiting on one latch are not ordered after each other. */
#define DLS__BUILTINS(X)                                                                                             \
  X(FILL, "dls_fill", 4,                                                                                             \
    ({"dst", DLS__P(DLS__T_SIZED(2))}, {"count", DLS__U64 | DLS__A_COUNT}, {"elem_size", DLS__U32},                  \
     {"pattern", DLS__U64}),                                                                                         \
    check_fill, k_fill, "dls_fill")                                                                                  \
  X(AXPY_F32, "dls_axpy_f32", 4,                                                                                     \
    ({"n", DLS__U64 | DLS__A_COUNT}, {"a", DLS__F32}, {"x", DLS__CP(DLS__T_F32)}, {"y", DLS__P(DLS__T_F32)}),        \
    check_axpy, k_axpy_f32, "dls_axpy_f32")                                                                          \
  X(AXPY_F64, "dls_axpy_f64", 4,                                                                                     \
    ({"n", DLS__U64 | DLS__A_COUNT}, {"a", DLS__F64}, {"x", DLS__CP(DLS__T_F64)}, {"y", DLS__P(DLS__T_F64)}),        \
    check_axpy, k_axpy_f64, "dls_axpy_f64")                                                                          \
  X(COPY_STRIDED, "dls_copy_strided", 3,                                                                             \
    ({"dst", DLS__P(DLS__T_DESC(2))}, {"src", DLS__CP(DLS__T_DESC(2))}, {"desc", DLS__BYTES_OF(DLS__DESC_COPY)}),    \
    check_copy, k_copy_strided, "dls_copy_strided")                                                                  \
  X(CONVERT, "dls_convert", 3,                                                                                       \
    ({"dst", DLS__P(DLS__T_DESC(2))}, {"src", DLS__CP(DLS__T_DESC(2))}, {"desc", DLS__BYTES_OF(DLS__DESC_CONVERT)}), \
    check_convert, k_convert, "dls_convert")                                                                         \
  X(SPIN, "dls_spin", 1, ({"nanoseconds", DLS__U64}), check_none, k_spin, "dls_spin")                                \
  X(LATCH, "dls_latch", 3,                                                                                           \
    ({"flag", DLS__P(DLS__T_INT(32)) | DLS__A_AS_READ}, {"timeout_ns", DLS__U64},                                    \
     {"timed_out", DLS__P(DLS__T_INT(32)) | DLS__A_AS_READ}),                                                        \
    check_latch, k_latch, "dls_latch")                                                                               \
  X(EMPTY, "dls_empty", 0, ({NULL, 0}), check_none, k_empty, "dls_empty")

/* The core's own kernels, in the same columns (the checker unused). First the vector twins of dls_fill, dls_axpy_f32
 * and a contiguous copy, which the core runs where every address is aligned to 16 and the call moves whole 16-byte
 * vectors (the common case: a framework's tensors): one vector a thread, nothing else in the kernel (builtins.cu says
 * what that saves). Then the twins of dls_copy_strided and dls_convert for a
 * contiguous view, with small arguments, which the core runs in their place (core/builtin.c) where the view is one
 * run of elements on both sides (layout.h's dls__view_contiguous): the bytes of a copy (a conversion between one
 * type too), and for each pair of types with a loop of its own (convert.h's DLS__CV_PAIRS) the elements of a
 * conversion. The same loops as the descriptor kernels' contiguous paths, so the same bits; what they save is the
 * descriptor: on an H200, at 2^20 float32, a kernel taking the 208-byte dls_copy_desc_t by value took 3.60 us a call
 * against 2.96 us for the same loop taking (dst, src, bytes), and f32 -> f16 3.34 us through dls_convert against
 * 2.83 us with (dst, src, n) (torch's copy_: 3.03 and 2.76 us). Never in the list users see (dls_builtin_function,
 * Python's signatures, the messages): the backends hold them beside the built-ins (DLS__KERNELS). Their arguments
 * say how the hazard rule orders their memory, as a built-in's do (the built-in's own checks ran before). */
#define DLS__TWIN_CV(X, sc, sb, dc, db)                                                                              \
  X(CV_##sc##sb##_##dc##db, DLS__CV_STR(DLS__CV_SYMBOL(sc, sb, dc, db)), 3,                                          \
    ({"dst", DLS__P(DLS__T_EXACT(dc, db))}, {"src", DLS__CP(DLS__T_EXACT(sc, sb))}, {"n", DLS__U64 | DLS__A_COUNT}), \
    check_none, DLS__CV_SYMBOL(sc, sb, dc, db), DLS__CV_STR(DLS__CV_SYMBOL(sc, sb, dc, db)))
#define DLS__TWINS(X)                                                                                                \
  X(FILL_VECS, "dls__fill_vecs", 3, ({"dst", DLS__P(0)}, {"vectors", DLS__U64}, {"pattern", DLS__U64}), check_none,  \
    k_fill_vecs, "dls__fill_vecs")                                                                                   \
  X(AXPY_F32_VECS, "dls__axpy_f32_vecs", 4,                                                                          \
    ({"vectors", DLS__U64}, {"a", DLS__F32}, {"x", DLS__CP(DLS__T_F32)}, {"y", DLS__P(DLS__T_F32)}), check_none,     \
    k_axpy_f32_vecs, "dls__axpy_f32_vecs")                                                                           \
  X(COPY_VECS, "dls__copy_vecs", 3, ({"dst", DLS__P(0)}, {"src", DLS__CP(0)}, {"vectors", DLS__U64}), check_none,  \
    k_copy_vecs, "dls__copy_vecs")                                                                                   \
  X(COPY_BYTES, "dls__copy_bytes", 3,                                                                                \
    ({"dst", DLS__P(0)}, {"src", DLS__CP(0)}, {"bytes", DLS__U64}), check_none, k_copy_bytes, "dls__copy_bytes")   \
  DLS__CV_PAIRS_WITH(DLS__TWIN_CV, X)

/* Every kernel a backend holds: the built-ins, then the twins. */
#define DLS__KERNELS(X) DLS__BUILTINS(X) DLS__TWINS(X)

/* The kernels by index: the built-ins DLS__BI_FILL ... and DLS__NBUILTIN, then the twins DLS__BI_COPY_BYTES,
 * DLS__BI_CV_kDLFloat32_kDLFloat16 ... (DLS__BI_CV_FIRST + a pair's index in DLS__CV_PAIRS), and DLS__NKERNEL. */
#define DLS__BI_ENUM_ONE(id, ...) DLS__BI_##id,
enum { DLS__BUILTINS(DLS__BI_ENUM_ONE) DLS__NBUILTIN };
enum { DLS__BI_TWINS_BEFORE_ = DLS__NBUILTIN - 1, DLS__TWINS(DLS__BI_ENUM_ONE) DLS__NKERNEL };
#undef DLS__BI_ENUM_ONE
#define DLS__BI_CV_FIRST (DLS__BI_COPY_BYTES + 1)
_Static_assert(DLS__NKERNEL == DLS__BI_CV_FIRST + DLS__CV_NPAIRS, "the conversions' twins follow the copy's");
_Static_assert(DLS__NKERNEL <= 256, "a function's builtin_k is 8 bits");

/* A parenthesized list without its parentheses (a line's arguments as an initializer). */
#define DLS__UNPAREN(...) __VA_ARGS__

/* Each line's count is its list's length (an empty list is one {NULL, 0}), and at most DLS__BUILTIN_MAX_ARGS. */
#define DLS__BI_COUNT_CHECK(id, name, nargs, args, ...)                                                           \
  _Static_assert(sizeof((dls__builtin_arg[]){DLS__UNPAREN args}) / sizeof(dls__builtin_arg) ==                       \
                         ((nargs) == 0 ? 1 : (nargs)) &&                                                             \
                     (nargs) <= DLS__BUILTIN_MAX_ARGS,                                                               \
                 "built-in " name ": its count is not its list's length");
DLS__KERNELS(DLS__BI_COUNT_CHECK)
#undef DLS__BI_COUNT_CHECK

#endif /* DLSTREAM_KERNELS_BUILTIN_TABLE_H */
