/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in kernels as function objects of each device. */
#ifndef DLSTREAM_CORE_BUILTIN_H
#define DLSTREAM_CORE_BUILTIN_H

#include "core/builtin_args.h"

/* A built-in function object of a device (cached), by name or by index. */
DLS__INTERNAL dls_status_t dls__builtin(dls__device *dev, const char *name, const char *call,
                                        dls__function **out);
DLS__INTERNAL dls_status_t dls__builtin_at(dls__device *dev, size_t k, const char *call, dls__function **out);
/* Called by dls_shutdown: the built-in function objects of every device go. */
DLS__INTERNAL void dls__builtins_shutdown(void);

#endif /* DLSTREAM_CORE_BUILTIN_H */
