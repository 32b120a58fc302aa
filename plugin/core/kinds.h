/* SPDX-License-Identifier: Apache-2.0 */
/* The handle kinds as a whole: their list, in shutdown order, with each one's ending verb; a kind's table by its
 * public value. For the top of the core (shutdown.c) and the layers above: it names every kind. */
#ifndef DLSTREAM_CORE_KINDS_H
#define DLSTREAM_CORE_KINDS_H

#include "core/tables.h"
#include "dlstream/dlstream.h"

/* The handle kinds, in shutdown order (children before parents: groups hold
 * branches, tensors hold buffers, buffers hold streams and graphs), with the
 * one public verb that ends each and the rule for its name: memory is freed,
 * a reference released, a module unloaded, a scope (a group) ended, and
 * everything else destroyed. X(KIND, name, handle type, verb). Each kind's
 * file defines its table, `dls__table dls__<name>_table = DLS__TABLE(...)`,
 * with its `dls__<name>_drop`, what the verb does once no call holds the
 * object any more (core/tables.h declares them). */
#define DLS__HANDLE_KINDS(X)                           \
  X(GROUP, group, dls_group_t, dls_group_end)          \
  X(TENSOR, tensor, dls_tensor_t, dls_tensor_release)  \
  X(BUFFER, buffer, dls_buffer_t, dls_buffer_free)     \
  X(GRAPH, graph, dls_graph_t, dls_graph_destroy)      \
  X(LATCH, latch, dls_latch_t, dls_latch_destroy)      \
  X(FUNCTION, function, dls_function_t, dls_function_destroy) \
  X(MODULE, module, dls_module_t, dls_module_unload)   \
  X(EVENT, event, dls_event_t, dls_event_destroy)      \
  X(STREAM, stream, dls_stream_t, dls_stream_destroy)

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
