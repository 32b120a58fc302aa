/* SPDX-License-Identifier: Apache-2.0 */
/* The fault-injecting backend's count of native allocations (test builds).
 *
 * Eager memory is one allocation object from mem_alloc to mem_free. Memory
 * a capture allocates belongs to the capture, then to its graph; each
 * replay makes it afresh at the same address (freeing, with auto-free on
 * launch, the previous replay's). So the ledger counts one object per
 * instance of such memory:
 * - allocated in the capture: the capture's instance;
 * - mem_free of it (in the capture, or after a replay): that instance ends;
 *   freed in its capture, it is no output of the graph and is forgotten at
 *   the end (each replay then makes and frees it);
 * - a replay: a new instance of every output whose latest one was freed;
 * - a capture that fails to end: the backend discards it with its instances;
 * - a graph destroyed before any replay: its outputs' instances never
 *   existed on the device: they end with it. After replays, the latest
 *   instance of an output must have been freed by the core (the drivers do
 *   not free it): one still alive stays counted, a leak. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "backend/fault_ledger.h"
#include "base/fault.h"

#ifdef DLS_FAULT_INJECTION

typedef struct ledger_entry {
  const dls__backend *real;
  int dev;
  void *ptr;
  uint64_t cap;  /* the capture that allocated it */
  void *graph;   /* its graph once the capture ended (NULL before) */
  bool live;     /* an instance exists that no mem_free ended yet */
  bool replayed; /* its graph was replayed */
} ledger_entry;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static ledger_entry *g_entries;
static size_t g_n, g_cap;

static void count(bool made) { dls__fault_count(DLS_FAULT_ALLOCATION, made ? +1 : -1); }

uint64_t dls__fault_ledger_capture_of(const dls__backend *real, int dev, void *stream) {
  int status = DLS__CAPTURE_NONE;
  uint64_t id = 0;
  /* A GPU's legacy stream is never captured, and asking could disturb a capture elsewhere. */
  bool legacy = real->device_type != kDLCPU && (stream == NULL || stream == (void *)(uintptr_t)1);
  if (legacy || real->stream_capture_status == NULL || real->stream_capture_status(dev, stream, &status, &id) != DLS_OK)
    return 0;
  return status == DLS__CAPTURE_NONE ? 0 : id;
}

static void drop(size_t i) { g_entries[i] = g_entries[--g_n]; }

static bool on(const ledger_entry *e, const dls__backend *real, int dev) { return e->real == real && e->dev == dev; }

void dls__fault_ledger_alloc(const dls__backend *real, int dev, void *stream, void *ptr) {
  count(true);
  uint64_t cap = dls__fault_ledger_capture_of(real, dev, stream);
  if (cap == 0)
    return;
  pthread_mutex_lock(&g_mu);
  if (g_n == g_cap) {
    size_t n = g_cap ? 2 * g_cap : 16;
    ledger_entry *p = realloc(g_entries, n * sizeof *p);
    if (p == NULL) { /* the test process is out of memory: its counts no longer matter */
      pthread_mutex_unlock(&g_mu);
      return;
    }
    g_entries = p;
    g_cap = n;
  }
  g_entries[g_n++] = (ledger_entry){real, dev, ptr, cap, NULL, true, false};
  pthread_mutex_unlock(&g_mu);
}

void dls__fault_ledger_free(const dls__backend *real, int dev, void *ptr) {
  pthread_mutex_lock(&g_mu);
  /* A second free of one instance counts too: the counts then say "released twice". */
  for (size_t i = 0; i < g_n; i++)
    if (on(&g_entries[i], real, dev) && g_entries[i].ptr == ptr)
      g_entries[i].live = false;
  pthread_mutex_unlock(&g_mu);
  count(false);
}

void dls__fault_ledger_end(const dls__backend *real, int dev, uint64_t cap, void *graph) {
  if (cap == 0)
    return;
  pthread_mutex_lock(&g_mu);
  for (size_t i = g_n; i-- > 0;) {
    ledger_entry *e = &g_entries[i];
    if (!on(e, real, dev) || e->cap != cap || e->graph != NULL)
      continue;
    if (graph != NULL && e->live) {
      e->graph = graph; /* an output */
      continue;
    }
    if (e->live)
      count(false); /* discarded with the capture */
    drop(i);
  }
  pthread_mutex_unlock(&g_mu);
}

void dls__fault_ledger_launch(const dls__backend *real, int dev, void *graph) {
  pthread_mutex_lock(&g_mu);
  for (ledger_entry *e = g_entries; e < g_entries + g_n; e++) {
    if (on(e, real, dev) && e->graph == graph) {
      if (!e->live)
        count(true); /* freed after an earlier replay: made again */
      e->live = e->replayed = true;
    }
  }
  pthread_mutex_unlock(&g_mu);
}

void dls__fault_ledger_destroy(const dls__backend *real, int dev, void *graph) {
  pthread_mutex_lock(&g_mu);
  for (size_t i = g_n; i-- > 0;) {
    ledger_entry *e = &g_entries[i];
    if (!on(e, real, dev) || e->graph != graph)
      continue;
    if (e->live && !e->replayed)
      count(false);
    drop(i);
  }
  pthread_mutex_unlock(&g_mu);
}

#else
/* ISO C forbids an empty translation unit. */
typedef int dls__fault_ledger_disabled;
#endif /* DLS_FAULT_INJECTION */
