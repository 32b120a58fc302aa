/* SPDX-License-Identifier: Apache-2.0 */
/* The private copy Tensor.__dlpack__(copy=True) exports (tensorcopy.c). */
#ifndef DLSTREAM_PY_TENSORCOPY_H
#define DLSTREAM_PY_TENSORCOPY_H

#include "dlspy.h"

/* A new compact row-major copy of `src` (the view of `src_h`, any rank dlstream takes: up to 32), queued on
 * `work`, which first waits for src's work. Owned by caller (dls_tensor_release); {0} on failure. */
dls_status_t dlspy_tensor_copy(const DLTensor *src, dls_tensor_t src_h, dls_stream_t work, dls_tensor_t *out);

#endif /* DLSTREAM_PY_TENSORCOPY_H */
