/* SPDX-License-Identifier: Apache-2.0 */
/* What the run-time compilation files share: the compiler vtable, its loader, SHA-256, the cache, kernel names. */
#ifndef DLSTREAM_RTC_INTERNAL_H
#define DLSTREAM_RTC_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "dlstream/dlstream.h"

/* ---- the compiler API: NVRTC and hipRTC have the same shape ----
 *
 * Both libraries take an opaque program pointer and return an int-sized
 * enum whose common codes have the same values. Our program type is one
 * opaque struct for both: the libraries' pointers pass through unchanged. */
typedef struct dls__rtc_program_st *dls__rtc_program;

enum {
  DLS__RTC_SUCCESS = 0,
  DLS__RTC_ERROR_OUT_OF_MEMORY = 1,
  DLS__RTC_ERROR_INVALID_OPTION = 5,
  DLS__RTC_ERROR_COMPILATION = 6,
  DLS__RTC_ERROR_NAME_EXPRESSION_NOT_VALID = 10,
};

/* X(field, return type, parameters). The vendor files name the symbol of
 * each field and say whether it is required. */
#define DLS__RTC_API(X)                                                                                         \
  X(get_error_string, const char *, (int result))                                                               \
  X(version, int, (int *out_major, int *out_minor))                                                             \
  X(create_program, int, (dls__rtc_program * out_prog, const char *source, const char *name, int nheaders,     \
                          const char *const *headers, const char *const *include_names))                       \
  X(destroy_program, int, (dls__rtc_program * prog))                                                            \
  X(compile_program, int, (dls__rtc_program prog, int noptions, const char *const *options))                   \
  X(get_program_log_size, int, (dls__rtc_program prog, size_t *out_size))                                       \
  X(get_program_log, int, (dls__rtc_program prog, char *out_log))                                               \
  X(add_name_expression, int, (dls__rtc_program prog, const char *name_expression))                             \
  X(get_lowered_name, int, (dls__rtc_program prog, const char *name_expression, const char **out_lowered))      \
  X(get_code_size, int, (dls__rtc_program prog, size_t *out_size))                                              \
  X(get_code, int, (dls__rtc_program prog, char *out_code))                                                     \
  X(get_ptx_size, int, (dls__rtc_program prog, size_t *out_size))                                               \
  X(get_ptx, int, (dls__rtc_program prog, char *out_ptx))                                                       \
  X(get_num_supported_archs, int, (int *out_count))                                                             \
  X(get_supported_archs, int, (int *out_archs))

typedef struct dls__rtc_api {
#define DLS__RTC_API_FIELD(field, ret, params) ret(*field) params;
  DLS__RTC_API(DLS__RTC_API_FIELD)
#undef DLS__RTC_API_FIELD
} dls__rtc_api;

/* One entry of a vendor's symbol table. */
typedef struct dls__rtc_symbol {
  const char *name; /* "nvrtcCreateProgram" */
  size_t offset;    /* offsetof(dls__rtc_api, field) */
  bool required;    /* the compiler is unusable without it */
} dls__rtc_symbol;

/* A run-time compiler: what to load and, once loaded, its API. */
typedef struct dls__rtc_vendor {
  dls_compiler_t id;
  const char *name;                 /* "NVRTC" */
  const char *env;                  /* "DLSTREAM_NVRTC_LIBRARY" */
  const char *const *sonames;       /* tried in order after env and added paths; NULL-terminated */
  const dls__rtc_symbol *symbols;   /* NULL-terminated by name */
  const char *install_hint;         /* how to get it */
  /* ---- state (rtc/loader.c) ---- */
  pthread_mutex_t mu;
  _Atomic int loaded;               /* 1 once api is complete (never unloaded) */
  dls__rtc_api api;
  int major, minor;
  char path[512];                   /* the library that was loaded */
  uint64_t identity;                /* size and mtime of that file, for cache keys */
  int archs[64];                    /* supported "sm" numbers, ascending (NVRTC 11.2+); narchs 0: unknown */
  int narchs;
  char *added[8];                   /* dls_compiler_add_library paths */
  int nadded;
} dls__rtc_vendor;

DLS__INTERNAL extern dls__rtc_vendor dls__nvrtc;
DLS__INTERNAL extern dls__rtc_vendor dls__hiprtc;

/* Loads the vendor's library once (a failure is retried at the next call).
 * DLS_OK, or DLS_ERR_UNAVAILABLE with a message naming `call`, what was
 * tried and the install hint. */
DLS__INTERNAL dls_status_t dls__rtc_load(dls__rtc_vendor *v, const char *call);

/* ---- SHA-256 (FIPS 180-4) ---- */

typedef struct dls__sha256 {
  uint32_t h[8];
  uint64_t bytes;       /* message length so far */
  uint8_t block[64];
  size_t used;          /* bytes in block */
} dls__sha256;

DLS__INTERNAL void dls__sha256_init(dls__sha256 *s);
DLS__INTERNAL void dls__sha256_update(dls__sha256 *s, const void *data, size_t n);
DLS__INTERNAL void dls__sha256_final(dls__sha256 *s, uint8_t out[32]);
/* A length-prefixed field (8 bytes little-endian, then the bytes): keys made
 * of fields in a fixed order cannot collide by shifting bytes between them. */
DLS__INTERNAL void dls__sha256_field(dls__sha256 *s, const void *data, size_t n);
DLS__INTERNAL void dls__sha256_str(dls__sha256 *s, const char *str); /* NULL hashes like "" plus a marker */

/* ---- compiled entries and the cache (rtc/cache.c) ---- */

enum { DLS__RTC_KIND_CUBIN = 1, DLS__RTC_KIND_PTX = 2, DLS__RTC_KIND_HSACO = 3 };

/* An image and the lowered names of its name expressions, in one block:
 * immutable once made, shared by the in-process cache through refs. */
typedef struct dls__rtc_entry {
  _Atomic int refs;
  uint32_t kind;          /* DLS__RTC_KIND_* */
  size_t size;            /* image bytes */
  uint8_t *image;         /* points into the block */
  uint32_t nlowered;
  const char **lowered;   /* nlowered strings in the block */
} dls__rtc_entry;

/* A new entry with refs = 1 (copies everything); NULL when out of memory. */
DLS__INTERNAL dls__rtc_entry *dls__rtc_entry_new(uint32_t kind, const void *image, size_t size,
                                                 const char *const *lowered, uint32_t nlowered);
DLS__INTERNAL void dls__rtc_entry_unref(dls__rtc_entry *e);

/* In-process cache: a new reference, or NULL on a miss. */
DLS__INTERNAL dls__rtc_entry *dls__rtc_memory_get(const uint8_t key[32]);
/* Stores a reference to `e` (the caller keeps its own). */
DLS__INTERNAL void dls__rtc_memory_put(const uint8_t key[32], dls__rtc_entry *e);

/* The cache folder for `explicit_dir` (NULL: the environment's); false when
 * there is none (no HOME). */
DLS__INTERNAL bool dls__rtc_cache_dir(const char *explicit_dir, char *out, size_t size);
/* Reads the entry of `key` from `dir`: NULL when missing, damaged (counted,
 * then replaced by the caller's write) or unreadable. */
DLS__INTERNAL dls__rtc_entry *dls__rtc_disk_get(const char *dir, const uint8_t key[32]);
/* Writes atomically (a temporary file in `dir`, then rename). Failures are
 * counted, never reported: the cache is an optimization. */
DLS__INTERNAL void dls__rtc_disk_put(const char *dir, const uint8_t key[32], const dls__rtc_entry *e);

/* Counters, updated atomically. */
enum { DLS__RTC_STAT_MEMORY_HITS, DLS__RTC_STAT_DISK_HITS, DLS__RTC_STAT_COMPILES, DLS__RTC_STAT_DISK_WRITES,
       DLS__RTC_STAT_DISK_CORRUPT, DLS__RTC_STAT_DISK_ERRORS, DLS__RTC_NSTATS };
DLS__INTERNAL void dls__rtc_count(int stat);

/* ---- kernel names in an image (rtc/names.c) ---- */

/* The kernels (entry points) of a cubin, PTX text or ROCm code object, as
 * "a, b, c" in `out` (always NUL-terminated; "" when none could be read).
 * Never reads outside [image, image + size). */
DLS__INTERNAL void dls__rtc_kernel_names(const void *image, size_t size, char *out, size_t out_size);

#endif /* DLSTREAM_RTC_INTERNAL_H */
