/* SPDX-License-Identifier: Apache-2.0 */
/* A device's compile target ("sm_90", "gfx90a"), for compiling kernels from source. */
#ifndef DLSTREAM_CORE_ARCH_H
#define DLSTREAM_CORE_ARCH_H

#include <stddef.h>

#include "internal.h"

/* Writes the device's target into out ("sm_90" on CUDA, the gfx name on
 * ROCm). DLS_ERR_NOT_SUPPORTED (message set) when the backend cannot say
 * (the HIP backend does not read the gfx name yet): dls_module_compile then
 * asks the compiler for its default target (PTX on CUDA, which the driver
 * compiles for the device when the module loads). */
DLS__INTERNAL dls_status_t dls__device_arch(dls__device *dev, char *out_arch, size_t size);

#endif /* DLSTREAM_CORE_ARCH_H */
