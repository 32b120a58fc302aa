/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in kernels as function objects of each device. */
#ifndef DLSTREAM_CORE_BUILTIN_H
#define DLSTREAM_CORE_BUILTIN_H

#include "core/builtin_args.h"

/* A built-in function object of a device (cached), by name or by index. */
DLS__INTERNAL dls_status_t dls__builtin(dls__device *dev, const char *name, const char *call,
                                        dls__function **out);
DLS__INTERNAL dls_status_t dls__builtin_at(dls__device *dev, size_t k, const char *call, dls__function **out);
/* Launches built-in `function` as the core's own calls do (dls_fill ...): on the grid the core sizes to its work,
 * through its twin where one applies, a partially overlapping source staged; `extents` as dls__launch_known's. The
 * XLA handler's launch on "the core's grid" (grid 0: dlstream.jax's grid=None). */
DLS__INTERNAL dls_status_t dls__builtin_launch_known(const char *call, dls_function_t function, dls_stream_t stream,
                                                     const dls_arg_t *args, size_t nargs, const dls__extent *extents);
/* Called by dls_shutdown: the built-in function objects of every device go. */
DLS__INTERNAL void dls__builtins_shutdown(void);

#endif /* DLSTREAM_CORE_BUILTIN_H */
