/* SPDX-License-Identifier: Apache-2.0 */
/* What the backends read of the core's state beyond their vtable: the latches holding a stream. */
#include "backend/backend.h"

_Atomic int dls__latches_holding;
