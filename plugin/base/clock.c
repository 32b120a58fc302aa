/* SPDX-License-Identifier: Apache-2.0 */
/* The monotonic clock. */
#include <time.h>

#include "base/clock.h"

uint64_t dls__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
