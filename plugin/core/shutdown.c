/* SPDX-License-Identifier: Apache-2.0 */
/* The runtime's end (dls_shutdown), and the handle kinds as a whole: live handles by kind, the end of every handle
 * left. The top of the core: it calls every concept, and none calls it. */
#include "core/internal.h"

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
  dls__table_reclaim(t); /* what retired (events) is dropped now */
}

/* Ends every handle callers still hold, kind by kind in shutdown order, each by its verb. */
static void kinds_end_all(void) {
#define DLS__SHUTDOWN_KIND(K, name, type, verb) shutdown_kind(&dls__##name##_table, shutdown_##name);
  DLS__HANDLE_KINDS(DLS__SHUTDOWN_KIND)
#undef DLS__SHUTDOWN_KIND
}

dls_status_t dls_shutdown(void) {
  if (atomic_load(&dls__state) == 2)
    return dls__fail(DLS_ERR_FORK, "dls_shutdown: dlstream was initialized in the parent before fork(); nothing "
                                   "of it can be torn down in this child");
  if (atomic_load(&dls__state) == 0)
    return DLS_OK;
  /* Captures dlstream began end first (their work is dropped), so every
   * stream is eager again. Then children before parents: groups hold
   * branches, tensors hold buffers, buffers hold streams and graphs. */
  dls__captures_shutdown();
  dls__ipc_shutdown_begin(); /* no free waits for another process past here */
  kinds_end_all();
  dls__foreign_clear(); /* no import holds a record any more */
  dls__deferred_drain();
  dls__ipc_shutdown_end();
  dls__latches_shutdown(); /* the latch words kept for reuse (their releases ran in the drain) */
  dls__caches_shutdown(); /* the memory the allocator kept goes back to the drivers, on the streams still there */
  dls__exported_clear(); /* buffers still held past here (exports not deleted) are never released */
  dls__builtins_shutdown();
  dls__streams_shutdown();
  dls__devices_shutdown();
  dls__obj_flush();
  atomic_store(&dls__state, 0);
  return DLS_OK;
}
