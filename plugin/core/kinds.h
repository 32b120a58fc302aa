/* SPDX-License-Identifier: Apache-2.0 */
/* The handle kinds as a whole (their list, DLS__HANDLE_KINDS, is tables.h's): a kind's table by its public value.
 * For the top of the core (shutdown.c) and the layers above: it names every kind. */
#ifndef DLSTREAM_CORE_KINDS_H
#define DLSTREAM_CORE_KINDS_H

#include "core/tables.h"
#include "dlstream/dlstream.h"

/* The table of a kind (NULL: not a kind). A constant kind folds to its table. */
static inline dls__table *dls__kind_table(dls_handle_kind_t kind) {
  switch (kind) {
#define DLS__KIND_CASE(K, name, type, verb) \
  case DLS_HANDLE_##K:                      \
    return &dls__##name##_table;
    DLS__HANDLE_KINDS(DLS__KIND_CASE)
#undef DLS__KIND_CASE
  default:
    return NULL;
  }
}

#endif /* DLSTREAM_CORE_KINDS_H */
