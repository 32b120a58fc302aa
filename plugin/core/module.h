/* SPDX-License-Identifier: Apache-2.0 */
/* Modules and their functions. */
#ifndef DLSTREAM_CORE_MODULE_H
#define DLSTREAM_CORE_MODULE_H

#include "core/device.h"

typedef struct dls__module {
  dls__device *dev;
  void *native;
  uint64_t id;
  _Atomic int refs;      /* the handle + each function looked up in it: the last unloads the native */
} dls__module;

typedef struct dls__function {
  dls__device *dev;
  void *native;
  dls__module *module; /* NULL for host and built-in functions */
  bool builtin;        /* owned by the runtime */
  bool host;           /* made by dls_function_from_host */
  char name[64];
  uint64_t id;
} dls__function;

#define DLS__GET_MODULE(var, handle, call, arg) DLS__GET(&dls__module_table, dls__module, var, handle, call, arg)
#define DLS__GET_FUNCTION(var, handle, call, arg) \
  DLS__GET(&dls__function_table, dls__function, var, handle, call, arg)

#endif /* DLSTREAM_CORE_MODULE_H */
