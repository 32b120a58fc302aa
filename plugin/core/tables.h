/* SPDX-License-Identifier: Apache-2.0 */
/* The handle kinds, listed once; each kind's table and drop (defined by the kind's own file); DLS__GET_OF. */
#ifndef DLSTREAM_CORE_TABLES_H
#define DLSTREAM_CORE_TABLES_H

#include "base/handle.h"

/* The handle kinds, in shutdown order (children before parents: groups hold
 * branches, tensors hold buffers, buffers hold streams and graphs), with the
 * one public verb that ends each and the rule for its name: memory is freed,
 * a reference released, a module unloaded, a scope (a group) ended, and
 * everything else destroyed. X(KIND, name, handle type, verb). Each kind's
 * file defines its table, `dls__table dls__<name>_table = DLS__TABLE(...)`,
 * with its `dls__<name>_drop`, what the verb does once no call holds the
 * object any more (declared below, from this list). */
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

/* dls__<kind>_table: the kind's handles (a DLS__TABLE with the kind's drop).
 * dls__<kind>_drop: what the kind's ending verb does once no call holds the
 * object any more. */
#define DLS__KIND_DECLARE(K, name, type, verb) \
  DLS__INTERNAL extern dls__table dls__##name##_table; \
  DLS__INTERNAL void dls__##name##_drop(void *obj);
DLS__HANDLE_KINDS(DLS__KIND_DECLARE)
#undef DLS__KIND_DECLARE

/* Looks up and holds a handle of kind `name` (stream, event, buffer, tensor, module, function, group, latch,
 * graph): `dls__<name> *var`, held until the end of the enclosing block; a stale or foreign handle returns
 * DLS_ERR_INVALID_HANDLE, its message naming `call` and `arg`, from the calling function. The default streams'
 * reserved handles resolve through the stream table's .reserved (stream.c). */
#define DLS__GET_OF(name, var, handle, call, arg) DLS__GET(&dls__##name##_table, dls__##name, var, handle, call, arg)

#endif /* DLSTREAM_CORE_TABLES_H */
