/* SPDX-License-Identifier: Apache-2.0 */
/* A device's compile target: asks the backend (see arch.h for the vtable method this waits for). */
#include "arch.h"

dls_status_t dls__device_arch(dls__device *dev, char *out_arch, size_t size) {
  if (size > 0)
    out_arch[0] = '\0';
  return dls__fail(DLS_ERR_NOT_SUPPORTED, "the %s backend does not report the compile target of %s",
                   dev->be->name, dev->name);
}
