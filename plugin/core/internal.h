/* SPDX-License-Identifier: Apache-2.0 */
/* The core's internals as the layers above it see them (rtc, interop, bench): every core header, and handle
 * lookups by a kind's public value. Core files include the headers of the concepts they use, never this one. */
#ifndef DLSTREAM_CORE_INTERNAL_H
#define DLSTREAM_CORE_INTERNAL_H

#include "base/clock.h"
#include "core/access.h"
#include "core/buffer.h"
#include "core/builtin.h"
#include "core/builtin_args.h"
#include "core/cache.h"
#include "core/capture.h"
#include "core/deferred.h"
#include "core/device.h"
#include "core/exported.h"
#include "core/foreign.h"
#include "core/graph.h"
#include "core/group.h"
#include "core/ipc.h"
#include "core/kinds.h"
#include "core/latch.h"
#include "core/launch.h"
#include "core/module.h"
#include "core/runtime.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "core/wait.h"

/* ---- handles by their kind's public value: the names the Python extension uses ---- */

static inline void *dls__handle_peek(dls_handle_kind_t kind, uint64_t id) {
  return dls__table_peek(dls__kind_table(kind), id);
}
static inline void *dls__handle_get(dls_handle_kind_t kind, uint64_t id, const char *call, const char *arg,
                                    dls_status_t *out_status) {
  return dls__table_get(dls__kind_table(kind), id, call, arg, out_status);
}
static inline uint64_t dls__handle_new(dls_handle_kind_t kind, void *obj) {
  return dls__table_add(dls__kind_table(kind), obj);
}
static inline bool dls__handle_end(dls_handle_kind_t kind, uint64_t id) {
  return dls__table_end(dls__kind_table(kind), id);
}
static inline void dls__handle_each(dls_handle_kind_t kind, void (*fn)(uint64_t id, void *obj)) {
  dls__table_each(dls__kind_table(kind), fn);
}

#endif /* DLSTREAM_CORE_INTERNAL_H */
