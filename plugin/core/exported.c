/* SPDX-License-Identifier: Apache-2.0 */
/* The registry of exported memory (exported.h): a registry of ranges (ranges.h) whose owners are the buffers
 * exported at least once. */
#include "core/exported.h"
#include "core/ranges.h"

_Atomic size_t dls__exported_n;

static dls__ranges exported = DLS__RANGES(dls__exported_n, "exported memory");

dls_status_t dls__exported_add(DLDevice home, uintptr_t lo, size_t size, void *owner, _Atomic int *refs) {
  return dls__ranges_add(&exported, home, lo, size, owner, refs);
}

void dls__exported_remove(void *owner, uintptr_t lo) { (void)dls__ranges_remove(&exported, owner, lo, 0); }

void *dls__exported_find(DLDevice home, uintptr_t lo, size_t size) {
  return dls__ranges_find(&exported, home, lo, size);
}

void dls__exported_clear(void) { dls__ranges_clear(&exported, NULL); }
