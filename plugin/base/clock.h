/* SPDX-License-Identifier: Apache-2.0 */
/* The monotonic clock. */
#ifndef DLSTREAM_BASE_CLOCK_H
#define DLSTREAM_BASE_CLOCK_H

#include <stdint.h>

#include "base/error.h"

/* Monotonic clock in nanoseconds. */
DLS__INTERNAL uint64_t dls__now_ns(void);

#endif /* DLSTREAM_BASE_CLOCK_H */
