/* SPDX-License-Identifier: Apache-2.0 */
/* The runtime's state: lazy initialization, fork detection, the version. */
#include <stdlib.h>

#include "core/runtime.h"

_Atomic int dls__state = 0;
_Atomic bool dls__hazards_off;
_Atomic bool dls__foreign_off;
_Atomic bool dls__noted_broken;
_Atomic bool dls__twins_broken;
static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

int dls_version_number(void) { return DLS_VERSION_NUMBER; }
const char *dls_version_string(void) { return DLS_VERSION_STRING; }

static void atfork_child(void) {
  /* Worker threads and driver contexts do not survive fork(); refuse use. */
  int ready = 1;
  atomic_compare_exchange_strong(&dls__state, &ready, 2);
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

dls_status_t dls__enter_slow(const char *call) {
  int st = atomic_load(&dls__state);
  if (st == 2)
    return dls__fail(DLS_ERR_FORK,
                     "%s: dlstream was initialized in the parent before fork(); its worker threads and GPU "
                     "contexts do not exist in this child. Use the 'spawn' start method, or initialize "
                     "dlstream only after fork()",
                     call);
  if (st == 0) {
    pthread_once(&g_atfork_once, register_atfork);
    pthread_mutex_lock(&g_init_mu);
    if (atomic_load(&dls__state) == 0) {
      const char *off = getenv("DLSTREAM_TEST_NO_HAZARDS");
      atomic_store(&dls__hazards_off, off != NULL && off[0] == '1');
      off = getenv("DLSTREAM_TEST_NO_FOREIGN");
      atomic_store(&dls__foreign_off, off != NULL && off[0] == '1');
      off = getenv("DLSTREAM_TEST_BREAK_NOTED");
      atomic_store(&dls__noted_broken, off != NULL && off[0] == '1');
      off = getenv("DLSTREAM_TEST_NO_RETIRE"); /* ended events dropped at once: test_event_retire's control */
      atomic_store(&dls__retire_off, off != NULL && off[0] == '1');
      off = getenv("DLSTREAM_TEST_BREAK_TWINS");
      atomic_store(&dls__twins_broken, off != NULL && off[0] == '1');
      atomic_store_explicit(&dls__state, 1, memory_order_release);
    }
    pthread_mutex_unlock(&g_init_mu);
  }
  return DLS_OK;
}

dls_status_t dls_init(void) {
  DLS__ENTER("dls_init");
  return DLS_OK;
}
