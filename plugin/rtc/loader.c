/* SPDX-License-Identifier: Apache-2.0 */
/* Loads a run-time compiler with dlopen: the environment's path, added paths, then the system's names. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rtc/rtc_internal.h"

static dls__rtc_vendor *dls__rtc_vendor_of(dls_compiler_t compiler) {
  switch (compiler) {
  case DLS_COMPILER_NVRTC: return &dls__nvrtc;
  case DLS_COMPILER_HIPRTC: return &dls__hiprtc;
  default: return NULL;
  }
}

/* Appends "name (why)" to the list of what was tried. */
static void dls__rtc_tried(char *tried, size_t size, const char *name, const char *why) {
  size_t n = strlen(tried);
  if (n + 8 < size)
    snprintf(tried + n, size - n, "%s%s (%s)", n ? ", " : "", name, why != NULL ? why : "not found");
}

static void *dls__rtc_open(const char *name, char *tried, size_t size) {
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char *why = dlerror();
    /* dlerror repeats the name: keep only its reason. */
    const char *colon = why != NULL ? strrchr(why, ':') : NULL;
    dls__rtc_tried(tried, size, name, colon != NULL ? colon + 2 : why);
  }
  return lib;
}

/* Fills the API from `lib`; false (message set) when a required symbol is missing. */
static bool dls__rtc_resolve(dls__rtc_vendor *v, void *lib, const char *path, const char *call) {
  dls__rtc_api api;
  memset(&api, 0, sizeof api);
  for (const dls__rtc_symbol *s = v->symbols; s->name != NULL; s++) {
    if (s->name[0] == '\0')
      continue;
    void *fn = dlsym(lib, s->name);
    if (fn == NULL && s->required) {
      dls__fail(DLS_ERR_UNAVAILABLE, "%s: %s at %s has no %s (too old, or not %s); %s", call, v->name, path, s->name,
                v->name, v->install_hint);
      return false;
    }
    memcpy((char *)&api + s->offset, &fn, sizeof fn); /* dlsym's object pointer as a function pointer (POSIX) */
  }
  int major = 0, minor = 0;
  if (api.version(&major, &minor) != DLS__RTC_SUCCESS) {
    dls__fail(DLS_ERR_UNAVAILABLE, "%s: %s at %s does not report its version; %s", call, v->name, path,
              v->install_hint);
    return false;
  }
  v->api = api;
  v->major = major;
  v->minor = minor;
  v->narchs = 0;
  int n = 0;
  if (api.get_num_supported_archs != NULL && api.get_supported_archs != NULL &&
      api.get_num_supported_archs(&n) == DLS__RTC_SUCCESS && n > 0 && n <= (int)(sizeof v->archs / sizeof v->archs[0]) &&
      api.get_supported_archs(v->archs) == DLS__RTC_SUCCESS)
    v->narchs = n;
  /* The file's identity joins the cache key: another build of the same
   * version (a patch release) makes new entries. */
  Dl_info info;
  const char *file = path;
  void *any = NULL;
  memcpy(&any, &api.version, sizeof any);
  if (dladdr(any, &info) != 0 && info.dli_fname != NULL)
    file = info.dli_fname;
  snprintf(v->path, sizeof v->path, "%s", file);
  struct stat sb;
  v->identity = stat(file, &sb) == 0 ? ((uint64_t)sb.st_size << 20) ^ (uint64_t)sb.st_mtime : 0;
  return true;
}

dls_status_t dls__rtc_load(dls__rtc_vendor *v, const char *call) {
  if (DLS__LIKELY(atomic_load_explicit(&v->loaded, memory_order_acquire)))
    return DLS_OK;
  pthread_mutex_lock(&v->mu);
  dls_status_t st = DLS_OK;
  if (atomic_load_explicit(&v->loaded, memory_order_relaxed))
    goto out;
  char tried[640] = "";
  void *lib = NULL;
  const char *path = NULL;
  const char *env = getenv(v->env);
  if (env != NULL && env[0] != '\0') {
    /* An explicit choice is final: no silent fallback to another library. */
    path = env;
    lib = dls__rtc_open(env, tried, sizeof tried);
    if (lib == NULL) {
      st = dls__fail(DLS_ERR_UNAVAILABLE, "%s: %s not loaded from %s=%s; %s", call, v->name, v->env, tried,
                     v->install_hint);
      goto out;
    }
  }
  for (int i = 0; lib == NULL && i < v->nadded; i++)
    if ((lib = dls__rtc_open(v->added[i], tried, sizeof tried)) != NULL)
      path = v->added[i];
  for (int i = 0; lib == NULL && v->sonames[i] != NULL; i++)
    if ((lib = dls__rtc_open(v->sonames[i], tried, sizeof tried)) != NULL)
      path = v->sonames[i];
  if (lib == NULL) {
    st = dls__fail(DLS_ERR_UNAVAILABLE, "%s: %s not found (tried %s); %s", call, v->name, tried, v->install_hint);
    goto out;
  }
  if (!dls__rtc_resolve(v, lib, path, call)) {
    dlclose(lib);
    st = DLS_ERR_UNAVAILABLE;
    goto out;
  }
  /* Loaded for the life of the process: lowered names and logs point into it. */
  atomic_store_explicit(&v->loaded, 1, memory_order_release);
out:
  pthread_mutex_unlock(&v->mu);
  return st;
}

dls_status_t dls_compiler_add_library(dls_compiler_t compiler, const char *path) {
  static const char call[] = "dls_compiler_add_library";
  dls__rtc_vendor *v = dls__rtc_vendor_of(compiler);
  if (v == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(compiler=%d): not DLS_COMPILER_NVRTC or DLS_COMPILER_HIPRTC", call,
                     (int)compiler);
  if (path == NULL || path[0] == '\0')
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(path=%s): no library named", call, path ? "\"\"" : "NULL");
  pthread_mutex_lock(&v->mu);
  dls_status_t st = DLS_OK;
  bool seen = false;
  for (int i = 0; i < v->nadded; i++)
    seen = seen || strcmp(v->added[i], path) == 0;
  if (!seen) {
    if (v->nadded == (int)(sizeof v->added / sizeof v->added[0]))
      st = dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(path=\"%s\"): at most %d libraries may be added", call, path,
                     v->nadded);
    else if ((v->added[v->nadded] = strdup(path)) == NULL)
      st = dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
    else
      v->nadded++;
  }
  pthread_mutex_unlock(&v->mu);
  return st;
}

dls_status_t dls_compiler_version(dls_compiler_t compiler, int *opt_out_major, int *opt_out_minor) {
  static const char call[] = "dls_compiler_version";
  if (opt_out_major != NULL)
    *opt_out_major = 0;
  if (opt_out_minor != NULL)
    *opt_out_minor = 0;
  dls__rtc_vendor *v = dls__rtc_vendor_of(compiler);
  if (v == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(compiler=%d): not DLS_COMPILER_NVRTC or DLS_COMPILER_HIPRTC", call,
                     (int)compiler);
  DLS__TRY(dls__rtc_load(v, call));
  if (opt_out_major != NULL)
    *opt_out_major = v->major;
  if (opt_out_minor != NULL)
    *opt_out_minor = v->minor;
  return DLS_OK;
}
