/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection (test builds): the point counter, host allocations,
 * native object counts and the control API of fault.h. */
#include "base/fault.h"

#ifdef DLS_FAULT_INJECTION

#include <stdatomic.h>
#include <string.h>

static _Atomic uint64_t g_points;   /* points passed since the latest arm or reset */
static _Atomic uint64_t g_target;   /* the point to fail; 0 = none */
static _Atomic int g_status;        /* what it returns (DLS_OK: the point's own) */
static _Atomic uint64_t g_injected; /* failures injected since the latest arm or reset */
static _Atomic(const char *) g_last = "";
static _Atomic uint64_t g_created[DLS_FAULT_OBJECT_KINDS];
static _Atomic uint64_t g_destroyed[DLS_FAULT_OBJECT_KINDS];
static _Atomic(int (*)(void *)) g_hook; /* dls_fault_hook's */
static _Atomic(const char *) g_hook_point;
static void *_Atomic g_hook_arg;

/* A point past the fast path: a test's hook (dls_fault_hook), then the armed point. */
static DLS__NOINLINE DLS__COLD int fault_hit_slow(const char *point, dls_status_t natural, dls_status_t *out_status,
                                                  uint64_t k, uint64_t target) {
  int (*hook)(void *) = atomic_load_explicit(&g_hook, memory_order_acquire);
  if (hook != NULL && strcmp(point, atomic_load(&g_hook_point)) == 0 && hook(atomic_load(&g_hook_arg))) {
    if (out_status != NULL)
      *out_status = dls__fail(natural, "fault injection: %s failed (a test's hook)", point);
    return 1;
  }
  if (target == 0 || k != target)
    return 0;
  /* One failure per arming, even if two threads raced past the target. */
  if (!atomic_compare_exchange_strong(&g_target, &target, 0))
    return 0;
  atomic_fetch_add(&g_injected, 1);
  atomic_store(&g_last, point);
  if (out_status != NULL) {
    dls_status_t st = (dls_status_t)atomic_load(&g_status);
    *out_status = dls__fail(st != DLS_OK ? st : natural, "fault injection: %s failed (point %llu)", point,
                            (unsigned long long)k);
  }
  return 1;
}

int dls__fault_hit(const char *point, dls_status_t natural, dls_status_t *out_status) {
  uint64_t k = atomic_fetch_add_explicit(&g_points, 1, memory_order_relaxed) + 1;
  uint64_t target = atomic_load_explicit(&g_target, memory_order_relaxed);
  if (DLS__LIKELY((target == 0 || k != target) && atomic_load_explicit(&g_hook, memory_order_relaxed) == NULL))
    return 0;
  return fault_hit_slow(point, natural, out_status, k, target);
}

void dls__fault_count(dls_fault_object_t kind, int delta) {
  if (delta > 0)
    atomic_fetch_add_explicit(&g_created[kind], 1, memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&g_destroyed[kind], 1, memory_order_relaxed);
}

/* ---- host allocations ---- */

void *dls__malloc(size_t size) { return dls__fault_hit("malloc", DLS_ERR_OUT_OF_MEMORY, NULL) ? NULL : malloc(size); }

void *dls__calloc(size_t n, size_t size) {
  return dls__fault_hit("calloc", DLS_ERR_OUT_OF_MEMORY, NULL) ? NULL : calloc(n, size);
}

void *dls__realloc(void *p, size_t size) {
  return dls__fault_hit("realloc", DLS_ERR_OUT_OF_MEMORY, NULL) ? NULL : realloc(p, size);
}

/* ---- control ---- */

void dls_fault_arm(uint64_t n, dls_status_t status) {
  atomic_store(&g_target, 0);
  atomic_store(&g_points, 0);
  atomic_store(&g_injected, 0);
  atomic_store(&g_last, "");
  atomic_store(&g_status, (int)status);
  atomic_store(&g_target, n);
}

void dls_fault_hook(const char *point, int (*fn)(void *arg), void *arg) {
  atomic_store(&g_hook, NULL);
  atomic_store(&g_hook_point, point != NULL ? point : "");
  atomic_store(&g_hook_arg, arg);
  atomic_store(&g_hook, point != NULL ? fn : NULL);
}

void dls_fault_disarm(void) { atomic_store(&g_target, 0); }

void dls_fault_reset(void) { dls_fault_arm(0, DLS_OK); }

uint64_t dls_fault_points(void) { return atomic_load(&g_points); }

uint64_t dls_fault_injected(void) { return atomic_load(&g_injected); }

const char *dls_fault_last(void) { return atomic_load(&g_last); }

void dls_fault_objects(dls_fault_object_t kind, uint64_t *out_created, uint64_t *out_destroyed) {
  int ok = (int)kind >= 0 && kind < DLS_FAULT_OBJECT_KINDS;
  if (out_created != NULL)
    *out_created = ok ? atomic_load(&g_created[kind]) : 0;
  if (out_destroyed != NULL)
    *out_destroyed = ok ? atomic_load(&g_destroyed[kind]) : 0;
}

const char *dls_fault_object_name(dls_fault_object_t kind) {
  static const char *const names[DLS_FAULT_OBJECT_KINDS] = {"stream", "event",  "allocation", "mapped host allocation",
                                                            "module", "graph", "host function"};
  return (int)kind >= 0 && kind < DLS_FAULT_OBJECT_KINDS ? names[kind] : "unknown";
}

#else
/* ISO C forbids an empty translation unit. */
typedef int dls__fault_disabled;
#endif /* DLS_FAULT_INJECTION */
