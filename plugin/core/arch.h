/* SPDX-License-Identifier: Apache-2.0 */
/* A device's compile target ("sm_90", "gfx90a"), for compiling kernels from source. */
#ifndef DLSTREAM_CORE_ARCH_H
#define DLSTREAM_CORE_ARCH_H

#include <stddef.h>

#include "internal.h"

/* Writes the device's target into out ("sm_90" on CUDA, the gfx name on
 * ROCm). DLS_ERR_NOT_SUPPORTED (message set) when the backend cannot say.
 *
 * Assumption, to be wired by the backend owner: backend vtable version 3
 * appends `dls_status_t (*device_arch)(int dev, char *out_arch, size_t size);`
 * (CUDA: "sm_%d%d" of the compute capability the backend already reads in
 * dls__cuda_device_open; HIP: hipDeviceProp_t.gcnArchName up to its ':').
 * Until then this returns DLS_ERR_NOT_SUPPORTED and dls_module_compile asks
 * the compiler for PTX of its default architecture, which the driver
 * compiles for the device when the module loads. */
DLS__INTERNAL dls_status_t dls__device_arch(dls__device *dev, char *out_arch, size_t size);

#endif /* DLSTREAM_CORE_ARCH_H */
