/* SPDX-License-Identifier: Apache-2.0 */
/* The handle kinds as a whole: live handles by kind, and the end of every handle left at shutdown. */
#include "core/kinds.h"

size_t dls_live_handles(dls_handle_kind_t kind) {
  dls__table *t = (int)kind > 0 && kind < DLS_HANDLE_KIND_COUNT_ ? dls__kind_table(kind) : NULL;
  return t != NULL ? dls__table_live(t) : 0;
}

/* At shutdown each live handle is ended by its kind's verb. */
#define DLS__SHUTDOWN_END(K, name, type, verb) \
  static void shutdown_##name(uint64_t id, void *obj) { \
    (void)obj;                                         \
    (void)verb((type){id});                            \
  }
DLS__HANDLE_KINDS(DLS__SHUTDOWN_END)
#undef DLS__SHUTDOWN_END

/* Ends every handle of a kind; a kind whose ends make more of its handles
 * endable (nested groups end before their parents) is walked again while
 * that helps. Handles the runtime owns, or whose verb refuses (functions of
 * a module go with it), stay. */
static void shutdown_kind(dls__table *t, void (*end)(uint64_t id, void *obj)) {
  size_t live = dls__table_live(t);
  for (int pass = 0; pass < 64 && live > 0; pass++) {
    dls__table_each(t, end);
    size_t now = dls__table_live(t);
    if (now >= live)
      break;
    live = now;
  }
}

void dls__kinds_end_all(void) {
#define DLS__SHUTDOWN_KIND(K, name, type, verb) shutdown_kind(&dls__##name##_table, shutdown_##name);
  DLS__HANDLE_KINDS(DLS__SHUTDOWN_KIND)
#undef DLS__SHUTDOWN_KIND
}
