/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU backends' code: module images, functions, the built-in kernels and launches. */
#include <stdio.h>
#include <string.h>

#include "backend/gpu.h"

/* The first bytes of the binary images either driver reads; anything else
 * must be text (PTX) ending within its size. */
static const struct {
  const char *bytes;
  size_t n;
} dls__gpu_magics[] = {
    {"\x7f" "ELF", 4},                     /* cubin; AMD code object */
    {"\x50\xed\x55\xba", 4},               /* CUDA fatbin (0xBA55ED50, little-endian) */
    {"__CLANG_OFFLOAD_BUNDLE__", 24},      /* hipcc --genco */
    {"CCOB", 4},                           /* compressed offload bundle (newer ROCm) */
};

/* The drivers trust the image: a text image without its NUL would be read
 * past its end, so it is checked here. */
static dls_status_t dls__gpu_image_check(const dls__gpu *g, const void *image, size_t size) {
  if (image == NULL || size == 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "module image %p of %zu bytes: no image", image, size);
  for (size_t i = 0; i < sizeof dls__gpu_magics / sizeof dls__gpu_magics[0]; i++)
    if (size >= dls__gpu_magics[i].n && memcmp(image, dls__gpu_magics[i].bytes, dls__gpu_magics[i].n) == 0)
      return DLS_OK;
  if (memchr(image, '\0', size) == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "module image of %zu bytes for %s is neither an ELF (cubin, AMD code object), a CUDA fatbin "
                     "nor a clang offload bundle, and as text (PTX) it is not NUL-terminated within its size",
                     size, g->name);
  return DLS_OK;
}

dls_status_t dls__gpu_load_image(dls__gpu *g, int dev, dls__gpu_device *d, const void *image, size_t size,
                                 void **out_module) {
  char log[2048];
  log[0] = '\0';
  unsigned opts[2] = {g->k.jit_error_log, g->k.jit_error_log_size};
  void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
  unsigned nopts = g->k.jit_error_log != 0 ? 2 : 0;
  dls__gpu_result r = g->calls.module_load(out_module, image, nopts, opts, vals);
  if (DLS__LIKELY(r == DLS__GPU_OK))
    return DLS_OK;
  log[sizeof log - 1] = '\0';
  const char *why = NULL;
  dls_status_t st = DLS_ERR_BACKEND;
  switch (g->classify(r)) {
  case DLS__GPU_ERROR_BAD_IMAGE:
    st = DLS_ERR_INVALID_ARGUMENT;
    why = "the image is not one this driver can load";
    break;
  case DLS__GPU_ERROR_NO_BINARY:
    st = DLS_ERR_NOT_SUPPORTED;
    why = g->no_binary_hint;
    break;
  case DLS__GPU_ERROR_PTX_TOO_NEW:
    st = DLS_ERR_NOT_SUPPORTED;
    why = "the PTX is newer than this driver: update the NVIDIA driver, or build with an older toolkit";
    break;
  case DLS__GPU_ERROR_NO_JIT:
    st = DLS_ERR_NOT_SUPPORTED;
    why = "PTX needs the driver's JIT compiler (libnvidia-ptxjitcompiler), which is not installed";
    break;
  case DLS__GPU_ERROR_OUT_OF_MEMORY: st = DLS_ERR_OUT_OF_MEMORY; break;
  default: break;
  }
  char hint[sizeof log + 160];
  snprintf(hint, sizeof hint, "%s%s%s", why != NULL ? why : "", why != NULL && log[0] ? "; " : "",
           log[0] ? "JIT log: " : "");
  size_t used = strlen(hint);
  snprintf(hint + used, sizeof hint - used, "%s", log);
  return dls__gpu_fail_hint(g, st, r, dev, hint[0] ? hint : NULL, "%s(image of %zu bytes, %s)", g->names.module_load,
                            size, d->arch);
}

dls_status_t dls__gpu_module_load(const dls__backend *be, int dev, const void *image, size_t size, void **out_module) {
  dls__gpu *g = dls__gpu_of(be);
  DLS__TRY(dls__gpu_image_check(g, image, size));
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  void *m = NULL;
  dls_status_t st = dls__gpu_load_image(g, dev, d, image, size, &m);
  dls__gpu_leave(g, &sc);
  if (st == DLS_OK)
    *out_module = m;
  return st;
}

dls_status_t dls__gpu_module_unload(const dls__backend *be, int dev, void *module) {
  dls__gpu *g = dls__gpu_of(be);
  DLS__GPU_CALL(g, dev, g->calls.module_unload(module), "%s(module=%p)", g->names.module_unload, module);
  return DLS_OK;
}

/* Finds a function and loads it now. CUDA's lazy loading (the default since
 * 12.2) defers loading to the first launch, and loading may wait for the
 * whole context to go idle: a latch held open by the host would never let
 * it. So every function is loaded when it is looked up, before anything can
 * be waiting on the host. */
static dls__gpu_result dls__gpu_function_get(dls__gpu *g, void *module, const char *name, void **out_function,
                                             const char **out_what) {
  *out_what = g->names.module_function;
  dls__gpu_result r = g->calls.module_function(out_function, module, name);
  if (r == DLS__GPU_OK && g->calls.function_load != NULL) {
    *out_what = g->names.function_load;
    r = g->calls.function_load(*out_function);
  }
  return r;
}

dls_status_t dls__gpu_module_function(const dls__backend *be, int dev, void *module, const char *name,
                                      void **out_function) {
  dls__gpu *g = dls__gpu_of(be);
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  void *f = NULL;
  const char *what;
  dls__gpu_result r = dls__gpu_function_get(g, module, name, &f, &what);
  dls__gpu_leave(g, &sc);
  if (g->classify(r) == DLS__GPU_ERROR_NOT_FOUND)
    return dls__fail(DLS_ERR_NOT_FOUND,
                     "no kernel named '%s' in module %p (a kernel is found by its unmangled name: declare it "
                     "extern \"C\")",
                     name, module);
  if (r != DLS__GPU_OK)
    return dls__gpu_fail(g, r, dev, "%s(module=%p, name='%s')", what, module, name);
  *out_function = f;
  return DLS_OK;
}

static const char *const dls__gpu_builtin_names[] = {DLS__GPU_BUILTINS(DLS__GPU_BUILTIN_NAME)};
static const char *const dls__gpu_builtin_symbols[] = {DLS__GPU_BUILTINS(DLS__GPU_BUILTIN_SYMBOL)};

/* Loads the built-in module once per device, every function at once (so no
 * later first use loads a kernel; see dls__gpu_function_get). The core asks
 * for it when it opens the device (core/device.c), before anything is queued
 * there; a failure then is reported by the first built-in call, which tries
 * again. */
static dls_status_t dls__gpu_builtins_load(dls__gpu *g, int dev, dls__gpu_device *d) {
  const void *image = NULL;
  size_t size = 0;
  DLS__TRY(g->builtin_image(&image, &size));
  void *m = NULL;
  dls_status_t st = dls__gpu_load_image(g, dev, d, image, size, &m);
  for (size_t i = 0; st == DLS_OK && i < DLS__GPU_NBUILTINS; i++) {
    const char *what;
    dls__gpu_result r = dls__gpu_function_get(g, m, dls__gpu_builtin_symbols[i], &d->builtin_fns[i], &what);
    if (r != DLS__GPU_OK)
      st = dls__gpu_fail(g, r, dev, "%s loading built-in kernel '%s'", what, dls__gpu_builtin_symbols[i]);
  }
  if (st == DLS_OK) {
    d->builtins = m;
  } else {
    if (m != NULL)
      g->calls.module_unload(m);
    memset(d->builtin_fns, 0, sizeof d->builtin_fns);
  }
  return st;
}

dls_status_t dls__gpu_builtin_function(const dls__backend *be, int dev, const char *name, void **out_function) {
  dls__gpu *g = dls__gpu_of(be);
  size_t k = 0;
  while (k < DLS__GPU_NBUILTINS && strcmp(dls__gpu_builtin_names[k], name) != 0)
    k++;
  if (k == DLS__GPU_NBUILTINS)
    return dls__fail(DLS_ERR_NOT_FOUND, "no %s built-in kernel named '%s'", g->name, name);
  dls__gpu_device *d;
  dls__gpu_scope sc;
  DLS__TRY(dls__gpu_enter(g, dev, &d, &sc));
  dls_status_t st = DLS_OK;
  pthread_mutex_lock(&d->mu);
  if (d->builtins == NULL)
    st = dls__gpu_builtins_load(g, dev, d);
  if (st == DLS_OK)
    *out_function = d->builtin_fns[k];
  pthread_mutex_unlock(&d->mu);
  dls__gpu_leave(g, &sc);
  return st;
}

/* The hot path: one context check and the launch. `params` already is the
 * kernel parameter array; the driver copies the values before returning. */
dls_status_t dls__gpu_launch(const dls__backend *be, int dev, void *function, void *stream,
                             const dls_launch_config_t *c, void **params, const uint32_t *sizes, int nparams) {
  dls__gpu *g = dls__gpu_of(be);
  (void)sizes;
  (void)nparams;
  DLS__GPU_CALL(g, dev,
                g->calls.launch(function, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
                                c->shared_mem_bytes, stream, params, NULL),
                "%s(function=%p, grid=%ux%ux%u, block=%ux%ux%u, shared_mem_bytes=%u, stream=%p)", g->names.launch,
                function, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
                c->shared_mem_bytes, stream);
  return DLS_OK;
}
