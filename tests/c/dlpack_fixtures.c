/* SPDX-License-Identifier: Apache-2.0 */
/* The DLPack suites' fixtures: probe tensors over a static arena, setup, and a teardown that fails on leaks. */
#include "dlpack_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Alignas(64) unsigned char g_arena[1 << 16];
atomic_int g_deleted;

static void probe_deleter(DLManagedTensorVersioned *self) {
  atomic_fetch_add(&g_deleted, 1);
  free(self->manager_ctx);
}

static void probe_legacy_deleter(DLManagedTensor *self) {
  atomic_fetch_add(&g_deleted, 1);
  free(self->manager_ctx);
}

void fill_valid(DLTensor *t, int64_t *shape) {
  t->data = g_arena;
  t->device = dls_cpu();
  t->ndim = 2;
  t->dtype = (DLDataType){kDLFloat, 32, 1};
  shape[0] = 4;
  shape[1] = 8;
  t->shape = shape;
  t->strides = NULL;
  t->byte_offset = 0;
}

probe *probe_new(void) {
  probe *p = calloc(1, sizeof *p);
  cr_assert_not_null(p);
  p->m.version.major = DLPACK_MAJOR_VERSION;
  p->m.version.minor = DLPACK_MINOR_VERSION;
  p->m.manager_ctx = p;
  p->m.deleter = probe_deleter;
  fill_valid(&p->m.dl_tensor, p->shape);
  return p;
}

probe_legacy *probe_legacy_new(void) {
  probe_legacy *p = calloc(1, sizeof *p);
  cr_assert_not_null(p);
  p->m.manager_ctx = p;
  p->m.deleter = probe_legacy_deleter;
  fill_valid(&p->m.dl_tensor, p->shape);
  return p;
}

void dlpack_setup(void) {
  atomic_store(&g_deleted, 0);
  memset(g_arena, 0, sizeof g_arena);
  cr_assert_eq(dls_init(), DLS_OK, "%s", dls_last_error());
}

/* Nothing the test made may be alive before dls_shutdown(), and nothing of
 * any kind after it (dlst_fini aborts the test process on a leak). */
void dlpack_teardown(void) {
  dlst_fini();
  int bad = 0;
  for (int k = DLS_HANDLE_STREAM; k < DLS_HANDLE_KIND_COUNT_; k++) {
    size_t n = dls_live_handles((dls_handle_kind_t)k);
    if (n != 0) {
      cr_log_error("%zu handle(s) of kind %d alive after dls_shutdown", n, k);
      bad = 1;
    }
  }
  if (dls_deferred_pending() != 0) {
    cr_log_error("%zu deferred release(s) pending after dls_shutdown", dls_deferred_pending());
    bad = 1;
  }
  if (bad)
    abort();
}

void assert_message(const char *text) {
  cr_assert(strstr(dls_last_error(), text) != NULL, "message \"%s\" lacks \"%s\"", dls_last_error(), text);
}

dls_tensor_t import_ok(DLManagedTensorVersioned *m, dls_stream_t producer) {
  dls_tensor_t t = {0};
  dls_status_t st = dls_tensor_import_versioned(m, producer, &t);
  cr_assert_eq(st, DLS_OK, "import: %s", dls_last_error());
  cr_assert_neq(t.id, 0);
  return t;
}
