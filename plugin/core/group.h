/* SPDX-License-Identifier: Apache-2.0 */
/* Fork/join groups of pooled branch streams. */
#ifndef DLSTREAM_CORE_GROUP_H
#define DLSTREAM_CORE_GROUP_H

#include "core/runtime.h"

/* Groups begun in capture `cap_id` and not ended yet (their branches have
 * not rejoined: the capture cannot end). */
DLS__INTERNAL int dls__groups_open_in_capture(uint64_t cap_id);

#endif /* DLSTREAM_CORE_GROUP_H */
