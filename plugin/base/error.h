/* SPDX-License-Identifier: Apache-2.0 */
/* Internal error helpers: set the thread-local message and return the status in one expression. */
#ifndef DLSTREAM_BASE_ERROR_H
#define DLSTREAM_BASE_ERROR_H

#include <string.h>

#include "dlstream/status.h"

#if defined(__GNUC__)
#define DLS__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define DLS__LIKELY(x) __builtin_expect(!!(x), 1)
#define DLS__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define DLS__COLD __attribute__((cold)) /* slow paths: their callers branch to them as unlikely */
#define DLS__HOT_INLINE inline __attribute__((always_inline)) /* a fast path the compiler must not call */
#define DLS__NOINLINE __attribute__((noinline)) /* a slow path kept out of its fast caller's frame */
#else
#define DLS__NOINLINE
#define DLS__COLD
#define DLS__HOT_INLINE inline
#define DLS__PRINTF(a, b)
#define DLS__LIKELY(x) (x)
#define DLS__UNLIKELY(x) (x)
#endif

#define DLS__INTERNAL __attribute__((visibility("hidden")))

/* Formats the thread-local message and returns `status`. Messages start with
 * the public call's name: "dls_stream_wrap(native=0x1234): ...". */
DLS__INTERNAL dls_status_t dls__fail(dls_status_t status, const char *fmt, ...) DLS__PRINTF(2, 3);

/* Prepends "prefix: " to the current thread-local message (for a failure
 * reported by an inner call). Returns `status`. */
DLS__INTERNAL dls_status_t dls__fail_prefix(dls_status_t status, const char *fmt, ...) DLS__PRINTF(2, 3);

/* Returns early with the status when an expression fails. */
#define DLS__TRY(expr)                     \
  do {                                     \
    dls_status_t dls__st_ = (expr);        \
    if (DLS__UNLIKELY(dls__st_ != DLS_OK)) \
      return dls__st_;                     \
  } while (0)

/* The failure of a call given NULL for its output `name` (DLS_ERR_INVALID_ARGUMENT, the message naming both):
 * DLS__OUT's, and that of a call that must undo something first (a DLPack import releases what it was given). */
DLS__INTERNAL DLS__COLD dls_status_t dls__fail_out_null(const char *call, const char *name);

/* The preamble of a call with an output: refuses NULL, else zeroes it (a
 * failing call leaves it zeroed). */
#define DLS__OUT(call, out)                                                     \
  do {                                                                          \
    if (DLS__UNLIKELY((out) == NULL))                                           \
      return dls__fail_out_null((call), #out);                                  \
    memset((out), 0, sizeof *(out));                                            \
  } while (0)

#endif /* DLSTREAM_BASE_ERROR_H */
