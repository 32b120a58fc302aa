/* SPDX-License-Identifier: Apache-2.0 */
/* Status codes, their names and messages, and the thread-local last error. */
#ifndef DLSTREAM_STATUS_H
#define DLSTREAM_STATUS_H

#include "export.h"

/* X(name, value, message). Values are pinned: never renumber, only append. */
#define DLS_STATUS_MAP(X)                                                          \
  X(OK, 0, "success")                                                             \
  X(ERR_INVALID_ARGUMENT, 1, "invalid argument")                                  \
  X(ERR_INVALID_HANDLE, 2, "invalid or stale handle")                             \
  X(ERR_INVALID_DEVICE, 3, "invalid device")                                      \
  X(ERR_UNAVAILABLE, 4, "backend unavailable")                                    \
  X(ERR_BACKEND, 5, "backend driver error")                                       \
  X(ERR_OUT_OF_MEMORY, 6, "out of memory")                                        \
  X(ERR_NOT_SUPPORTED, 7, "not supported by this backend")                        \
  X(ERR_BUSY, 8, "resource busy")                                                 \
  X(ERR_TIMEOUT, 9, "timed out")                                                  \
  X(ERR_NOT_FOUND, 10, "not found")                                               \
  X(ERR_INVALID_TENSOR, 11, "invalid DLPack tensor")                              \
  X(ERR_VERSION, 12, "unsupported version")                                       \
  X(ERR_READ_ONLY, 13, "read-only tensor used as an output")                      \
  X(ERR_STATE, 14, "call not valid in this state")                                \
  X(ERR_FORK, 15, "dlstream used in a child process after fork()")                \
  X(ERR_INTERNAL, 16, "internal error")

typedef enum dls_status_t {
#define DLS__STATUS_ENUM(name, value, msg) DLS_##name = value,
  DLS_STATUS_MAP(DLS__STATUS_ENUM)
#undef DLS__STATUS_ENUM
} dls_status_t;

DLS_EXTERN_C_BEGIN
/* "DLS_ERR_INVALID_HANDLE" for DLS_ERR_INVALID_HANDLE; "DLS_UNKNOWN" otherwise.
 * Never NULL; the string is static. */
DLS_API const char *dls_status_name(dls_status_t status);
/* A one-line English description of the status. Never NULL; static. */
DLS_API const char *dls_status_str(dls_status_t status);
/* The message of the last failure on this thread: it names the call, the
 * argument and the offending value (and for a driver failure, the driver's
 * error name). Success does not clear it. Never NULL; valid until the next
 * dlstream call on this thread. */
DLS_API const char *dls_last_error(void);
DLS_EXTERN_C_END

#endif /* DLSTREAM_STATUS_H */
