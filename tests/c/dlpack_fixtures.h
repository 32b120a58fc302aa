/* SPDX-License-Identifier: Apache-2.0 */
/* What the DLPack interop suites (test_dlpack*.c) share: probe tensors with counting deleters, setup and teardown. */
#ifndef DLSTREAM_TESTS_DLPACK_FIXTURES_H
#define DLSTREAM_TESTS_DLPACK_FIXTURES_H

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common.h"
#include "dlstream/dlstream.h"

#define MAXD 40

/* The memory every probe points into, and how many producer deleters ran (all kinds). */
extern unsigned char g_arena[1 << 16];
extern atomic_int g_deleted;

typedef struct probe {
  DLManagedTensorVersioned m;
  int64_t shape[MAXD];
  int64_t strides[MAXD];
} probe;

typedef struct probe_legacy {
  DLManagedTensor m;
  int64_t shape[MAXD];
  int64_t strides[MAXD];
} probe_legacy;

/* A valid float32 [4, 8] compact tensor over g_arena, with a counting deleter. */
probe *probe_new(void);
probe_legacy *probe_legacy_new(void);
/* Makes `t` that tensor again (shape storage in `shape`). */
void fill_valid(DLTensor *t, int64_t *shape);

/* Suite .init and .fini: every suite starts from a clean runtime and ends
 * with nothing of any kind alive. */
void dlpack_setup(void);
void dlpack_teardown(void);

/* Asserts that dls_last_error() contains `text`. */
void assert_message(const char *text);

/* Imports `m` with `producer`, asserting success. */
dls_tensor_t import_ok(DLManagedTensorVersioned *m, dls_stream_t producer);

#endif /* DLSTREAM_TESTS_DLPACK_FIXTURES_H */
