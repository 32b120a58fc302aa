/* SPDX-License-Identifier: Apache-2.0 */
/* Each handle kind's table and drop, defined by the kind's own file (core/kinds.h lists the kinds). */
#ifndef DLSTREAM_CORE_TABLES_H
#define DLSTREAM_CORE_TABLES_H

#include "base/handle.h"

/* dls__<kind>_table: the kind's handles (a DLS__TABLE with the kind's drop).
 * dls__<kind>_drop: what the kind's ending verb does once no call holds the
 * object any more. */
DLS__INTERNAL extern dls__table dls__stream_table, dls__event_table, dls__buffer_table, dls__tensor_table,
    dls__module_table, dls__function_table, dls__group_table, dls__latch_table, dls__graph_table;
DLS__INTERNAL void dls__stream_drop(void *obj);
DLS__INTERNAL void dls__event_drop(void *obj);
DLS__INTERNAL void dls__buffer_drop(void *obj);
DLS__INTERNAL void dls__tensor_drop(void *obj);
DLS__INTERNAL void dls__module_drop(void *obj);
DLS__INTERNAL void dls__function_drop(void *obj);
DLS__INTERNAL void dls__group_drop(void *obj);
DLS__INTERNAL void dls__latch_drop(void *obj);
DLS__INTERNAL void dls__graph_drop(void *obj);

/* Looks up and holds a handle of kind `name` (stream, event, buffer, tensor, module, function, group, latch,
 * graph): `dls__<name> *var`, held until the end of the enclosing block; a stale or foreign handle returns
 * DLS_ERR_INVALID_HANDLE, its message naming `call` and `arg`, from the calling function. The default streams'
 * reserved handles resolve through the stream table's .reserved (stream.c). */
#define DLS__GET_OF(name, var, handle, call, arg) DLS__GET(&dls__##name##_table, dls__##name, var, handle, call, arg)

#endif /* DLSTREAM_CORE_TABLES_H */
