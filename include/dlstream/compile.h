/* SPDX-License-Identifier: Apache-2.0 */
/* Kernels from source: NVRTC (CUDA) and hipRTC (ROCm) loaded at run time, with an on-disk and in-process cache. */
#ifndef DLSTREAM_COMPILE_H
#define DLSTREAM_COMPILE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

/* Which caches a compile may use (bits of dls_compile_options_t.cache).
 * DLSTREAM_CACHE=0 in the environment turns both off for every call. */
typedef enum dls_compile_cache_t {
  DLS_COMPILE_CACHE_ALL = 0,       /* in-process and on-disk (the default) */
  DLS_COMPILE_CACHE_NO_MEMORY = 1, /* skip the in-process cache */
  DLS_COMPILE_CACHE_NO_DISK = 2,   /* skip the on-disk cache */
  DLS_COMPILE_CACHE_OFF = 3        /* compile every time */
} dls_compile_cache_t;

/* Options of a compile. Zero-initialize, set `size`, fill what you need
 * (DLS_COMPILE_OPTIONS_INIT does the first two). Every pointer is borrowed
 * for the call. Fields are only ever appended; `size` tells which exist. */
typedef struct dls_compile_options_t {
  uint32_t size;                       /* sizeof(dls_compile_options_t) */
  uint32_t cache;                      /* dls_compile_cache_t bits */
  const char *const *options;          /* compiler options ("-std=c++17", "-DN=4"); may be NULL */
  size_t noptions;                     /* entries of `options` */
  const char *const *name_expressions; /* C++ names to instantiate and look up ("scale<float>"); may be NULL */
  size_t nname_expressions;            /* entries of `name_expressions` */
  const char *arch;                    /* target: "sm_90" (cubin), "compute_90" (PTX), "gfx90a" (ROCm);
                                          NULL: the device's (dls_module_compile) */
  const char *program_name;            /* file name in the compiler's messages; NULL: "kernel.cu" */
  const char *cache_dir;               /* on-disk cache folder; NULL: DLSTREAM_CACHE_DIR, else
                                          $XDG_CACHE_HOME/dlstream, else ~/.cache/dlstream */
} dls_compile_options_t;

#define DLS_COMPILE_OPTIONS_INIT {sizeof(dls_compile_options_t), 0, NULL, 0, NULL, 0, NULL, NULL, NULL}

/* What the in-process and on-disk caches did since the process started
 * (or since dls_compile_cache_clear). For tests and tuning. */
typedef struct dls_compile_stats_t {
  uint64_t memory_hits;  /* served from the in-process cache */
  uint64_t disk_hits;    /* served from a cache file */
  uint64_t compiles;     /* the compiler ran */
  uint64_t disk_writes;  /* cache files written */
  uint64_t disk_corrupt; /* cache files found damaged (truncated, wrong checksum ...) and replaced */
  uint64_t disk_errors;  /* cache files that could not be read or written (the compile still succeeded) */
} dls_compile_stats_t;

/* Which run-time compiler: NVRTC for CUDA, hipRTC for ROCm. */
typedef enum dls_compiler_t { DLS_COMPILER_NVRTC = 1, DLS_COMPILER_HIPRTC = 2 } dls_compiler_t;

DLS_EXTERN_C_BEGIN

/* Compiles CUDA C++ (or HIP C++ for a "gfx..." arch) to an image for `arch`
 * without a GPU: "sm_XY" gives a cubin, "compute_XY" NUL-terminated PTX
 * (the size counts the NUL), "gfxNNN" a ROCm code object. `options->arch`
 * is ignored here. *out_image is owned by caller: dls_compile_free().
 * `opt_out_lowered`, when not NULL, has options->nname_expressions entries and
 * receives the lowered (mangled) name of each name expression, valid until
 * dls_compile_free(*out_image).
 * Errors: a compile error is DLS_ERR_INVALID_ARGUMENT with the compiler's
 * log (file(line): message) in dls_last_error() and dls_compile_last_log();
 * no compiler is DLS_ERR_UNAVAILABLE saying how to install one. */
DLS_API dls_status_t dls_compile(const char *source, const dls_compile_options_t *options, const char *arch,
                                 void **out_image, size_t *out_size, const char **opt_out_lowered);

/* Frees an image of dls_compile. NULL: no-op. */
DLS_API void dls_compile_free(void *image);

/* Compiles `source` for `device` and loads it: a module like dls_module_load's.
 * The target is options->arch, else the device's own (a cubin; PTX for the
 * newest architecture the compiler knows when it is older than the device).
 * Name expressions are instantiated and become names dls_module_function
 * accepts ("scale<float>"); dls_module_lowered_name gives the lowered name.
 * Owned by caller: dls_module_unload(). CPU devices: DLS_ERR_NOT_SUPPORTED. */
DLS_API dls_status_t dls_module_compile(DLDevice device, const char *source, const dls_compile_options_t *options,
                                        dls_module_t *out_module);

/* The lowered name of a name expression given to dls_module_compile.
 * Borrowed: valid while the module is loaded. DLS_ERR_NOT_FOUND lists the
 * module's name expressions. */
DLS_API dls_status_t dls_module_lowered_name(dls_module_t module, const char *name_expression,
                                             const char **out_lowered);

/* The compiler's log of this thread's last compile (warnings, or the errors
 * of a failed one); "" if none. Borrowed: valid until the next compile on
 * this thread. Never NULL. */
DLS_API const char *dls_compile_last_log(void);

/* Adds a library to try when the compiler is first loaded: after the
 * DLSTREAM_NVRTC_LIBRARY / DLSTREAM_HIPRTC_LIBRARY path and before the
 * system's names (libnvrtc.so.13, .so.12, libnvrtc.so; libhiprtc.so ...).
 * The Python package passes the nvidia-cuda-nvrtc wheel's library here.
 * No effect once the compiler is loaded. The path is copied. */
DLS_API dls_status_t dls_compiler_add_library(dls_compiler_t compiler, const char *path);

/* DLS_OK when the compiler can be loaded, with its version; otherwise
 * DLS_ERR_UNAVAILABLE saying how to install it. Outputs may be NULL. */
DLS_API dls_status_t dls_compiler_version(dls_compiler_t compiler, int *opt_out_major, int *opt_out_minor);

/* The cache counters (see dls_compile_stats_t). */
DLS_API dls_status_t dls_compile_stats(dls_compile_stats_t *out_stats);

/* Empties the in-process cache and zeroes the counters. Cache files stay. */
DLS_API dls_status_t dls_compile_cache_clear(void);

DLS_EXTERN_C_END

#endif /* DLSTREAM_COMPILE_H */
