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
  uint8_t builtin_k;   /* a built-in's index in its device's table (DLS__BI_*) */
  char name[64];
  uint64_t id;
} dls__function;

/* A new handle on the image `module` loaded: it shares the native module
 * and the native functions found in it, and has its own functions and its
 * own end (dls_module_unload ends only it). The native module is unloaded
 * when the last handle on it and the last of their functions go.
 * interop/ext/ext.h declares it for the extension (Module.from_source's
 * cache hits). */
DLS__INTERNAL dls_status_t dls__module_share(dls_module_t module, const char *call, dls_module_t *out_module);


#endif /* DLSTREAM_CORE_MODULE_H */
