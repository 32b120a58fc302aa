/* SPDX-License-Identifier: Apache-2.0 */
/* A device's compile target, as its backend reports it. */
#include "arch.h"

dls_status_t dls__device_arch(dls__device *dev, char *out_arch, size_t size) {
  if (size > 0)
    out_arch[0] = '\0';
  if (dev->be->device_arch == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED, "the %s backend does not report the compile target of %s",
                     dev->be->name, dev->name);
  return dev->be->device_arch(dev->id, out_arch, size);
}
