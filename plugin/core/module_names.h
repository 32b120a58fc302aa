/* SPDX-License-Identifier: Apache-2.0 */
/* Names a module answers to besides its kernels' own (name expressions), and what it has, for "not found" messages. */
#ifndef DLSTREAM_CORE_MODULE_NAMES_H
#define DLSTREAM_CORE_MODULE_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Records, for a loaded module, its name expressions with their lowered
 * names (both copied) and its kernels as "a, b, c". Replaces an earlier
 * record of the same module. */
DLS__INTERNAL dls_status_t dls__module_names_set(uint64_t module_id, size_t n, const char *const *expressions,
                                                 const char *const *lowered, const char *kernels);
/* Records for module `to` what is recorded for module `from` (a handle
 * sharing its image); DLS_OK with nothing done when `from` has no record. */
DLS__INTERNAL dls_status_t dls__module_names_copy(uint64_t from, uint64_t to);
/* The lowered name when `name` is one of the module's name expressions, else `name` itself. */
DLS__INTERNAL const char *dls__module_names_resolve(uint64_t module_id, const char *name);
/* The lowered name of a name expression; NULL when the module has no such expression. */
DLS__INTERNAL const char *dls__module_names_lowered(uint64_t module_id, const char *expression);
/* A lookup of `name` failed with `status` (message set by the backend): for a
 * DLS_ERR_NOT_FOUND on a recorded module, rewrites the message to list what
 * the module has. Returns `status`, the message prefixed with "call(name=...)". */
DLS__INTERNAL dls_status_t dls__module_names_missing(uint64_t module_id, dls_status_t status, const char *call,
                                                     const char *name);
/* Drops the record of an unloaded module. */
DLS__INTERNAL void dls__module_names_forget(uint64_t module_id);

#endif /* DLSTREAM_CORE_MODULE_NAMES_H */
