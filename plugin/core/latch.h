/* SPDX-License-Identifier: Apache-2.0 */
/* Latches (latch.c): what the rest of the core asks of them. */
#ifndef DLSTREAM_CORE_LATCH_H
#define DLSTREAM_CORE_LATCH_H

#include "base/error.h"

/* Frees the latch words kept for reuse (dls_shutdown, after the deferred releases have run). */
DLS__INTERNAL void dls__latches_shutdown(void);

#endif
