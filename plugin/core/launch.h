/* SPDX-License-Identifier: Apache-2.0 */
/* Typed launches: the entries the built-ins, latches and the Python layer queue kernels through. */
#ifndef DLSTREAM_CORE_LAUNCH_H
#define DLSTREAM_CORE_LAUNCH_H

#include "core/builtin_args.h"
#include "core/stream.h"

/* A launch with typed arguments (dls_launch, the Python layer): a built-in's
 * arguments are checked first (builtin_args.c), and a partial overlap of
 * what it reads and writes is refused. `extents` (NULL: none) has one entry
 * per argument. */
DLS__INTERNAL dls_status_t dls__launch_ext(const char *call, dls__function *fn, dls__stream *s,
                                           const dls_launch_config_t *config, const dls_arg_t *args, size_t nargs,
                                           const dls__extent *extents);
static inline dls_status_t dls__launch(const char *call, dls__function *fn, dls__stream *s,
                                       const dls_launch_config_t *config, const dls_arg_t *args, size_t nargs) {
  return dls__launch_ext(call, fn, s, config, args, nargs, NULL);
}
/* dls_launch, naming `call`, with what the caller knows of its raw pointers (`extents`, one per argument; NULL:
 * nothing): the XLA handler's launch, whose buffers' sizes and types bound a built-in's checks. */
DLS__INTERNAL dls_status_t dls__launch_known(const char *call, dls_function_t function, dls_stream_t stream,
                                             const dls_launch_config_t *config, const dls_arg_t *args, size_t nargs,
                                             const dls__extent *extents);
/* The launch itself, for callers that checked a built-in's arguments already. */
DLS__INTERNAL dls_status_t dls__launch_args(const char *call, dls__function *fn, dls__stream *s,
                                            const dls_launch_config_t *config, const dls_arg_t *args, size_t nargs);
/* A launch whose arguments are values already (scalars and raw pointers: nothing to order or record): params[i]
 * points at argument i's sizes[i] bytes. The caller vouches for the configuration (every dimension >= 1) and for
 * the arguments (at most DLS_MAX_ARGS, DLS_MAX_ARG_BYTES in all; a built-in's checked by dls__builtin_check);
 * the function and stream are checked. */
DLS__INTERNAL dls_status_t dls__launch_params(const char *call, dls__function *fn, dls__stream *s,
                                              const dls_launch_config_t *config, void **params,
                                              const uint32_t *sizes, int nargs);

#endif /* DLSTREAM_CORE_LAUNCH_H */
