/* SPDX-License-Identifier: Apache-2.0 */
/* The table that dlpack_layout.c records for one dlpack.h: sizes, offsets and enum values by name. */
#ifndef DLS_TEST_DLPACK_LAYOUT_H
#define DLS_TEST_DLPACK_LAYOUT_H

#include <stddef.h>

typedef struct dls_layout_entry {
  const char *name; /* "sizeof(DLTensor)", "offsetof(DLTensor, shape)", "kDLCUDA" ... */
  long long value;
} dls_layout_entry;

/* One per header compiled in (dlpack.cmake decides which exist). */
const dls_layout_entry *dls_layout_ours(size_t *out_count, const char **out_version);
const dls_layout_entry *dls_layout_system(size_t *out_count, const char **out_version);
const dls_layout_entry *dls_layout_extra(size_t *out_count, const char **out_version);

#endif /* DLS_TEST_DLPACK_LAYOUT_H */
