/* SPDX-License-Identifier: Apache-2.0 */
/* Compiling from source: one code path for NVRTC and hipRTC, the target, the cache key, errors with the log. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hints.h"
#include "core/internal.h"
#include "core/module_names.h"
#include "rtc/rtc_internal.h"

#define DLS__RTC_MAX_OPTIONS 256
#define DLS__RTC_MAX_NAMES 4096

/* ---- the thread's last log ---- */

static pthread_key_t dls__rtc_log_key;
static pthread_once_t dls__rtc_log_once = PTHREAD_ONCE_INIT;
static void dls__rtc_log_key_make(void) { (void)pthread_key_create(&dls__rtc_log_key, free); }

/* Replaces the thread's log (steals `log`, which may be NULL). */
static void dls__rtc_log_set(char *log) {
  pthread_once(&dls__rtc_log_once, dls__rtc_log_key_make);
  dls__free(pthread_getspecific(dls__rtc_log_key));
  if (pthread_setspecific(dls__rtc_log_key, log) != 0)
    dls__free(log);
}

const char *dls_compile_last_log(void) {
  pthread_once(&dls__rtc_log_once, dls__rtc_log_key_make);
  const char *log = pthread_getspecific(dls__rtc_log_key);
  return log != NULL ? log : "";
}

/* ---- the target ---- */

typedef struct dls__rtc_target {
  dls__rtc_vendor *v;
  uint32_t kind;    /* DLS__RTC_KIND_* */
  char arch[32];    /* as the compiler is asked for it; "" for its default */
  char option[48];  /* "-arch=sm_90", "--offload-arch=gfx90a" or "" */
} dls__rtc_target;

/* "sm_90a" -> 90, "compute_75" -> 75; -1 when there is no number. */
static int dls__rtc_arch_number(const char *s) {
  int n = 0, digits = 0;
  for (; *s >= '0' && *s <= '9' && digits < 4; s++, digits++)
    n = n * 10 + (*s - '0');
  bool suffix_ok = *s == '\0' || ((*s == 'a' || *s == 'f') && s[1] == '\0');
  return digits >= 2 && suffix_ok ? n : -1;
}

/* Parses an architecture name into a target (vendor, kind, compiler option). */
static dls_status_t dls__rtc_target_parse(const char *call, const char *what, const char *arch, dls__rtc_target *t) {
  memset(t, 0, sizeof *t);
  size_t len = strlen(arch);
  bool ok = len < sizeof t->arch;
  if (ok && strncmp(arch, "sm_", 3) == 0 && dls__rtc_arch_number(arch + 3) > 0) {
    t->v = &dls__nvrtc;
    t->kind = DLS__RTC_KIND_CUBIN;
  } else if (ok && strncmp(arch, "compute_", 8) == 0 && dls__rtc_arch_number(arch + 8) > 0) {
    t->v = &dls__nvrtc;
    t->kind = DLS__RTC_KIND_PTX;
  } else if (ok && strncmp(arch, "gfx", 3) == 0 && len > 3 && strspn(arch + 3, "0123456789abcdef:+-") == len - 3) {
    t->v = &dls__hiprtc;
    t->kind = DLS__RTC_KIND_HSACO;
  } else {
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(%s=\"%.40s\"): not an architecture; use \"sm_XY\" (a cubin), \"compute_XY\" (PTX) or "
                     "\"gfxNNN\" (ROCm)",
                     call, what, arch);
  }
  memcpy(t->arch, arch, len + 1);
  snprintf(t->option, sizeof t->option, "%s%s", t->v == &dls__hiprtc ? "--offload-arch=" : "-arch=", arch);
  return DLS_OK;
}

/* Checks a CUDA target against what the loaded NVRTC knows. `fallback`
 * (compiling for a device): a cubin for an architecture newer than NVRTC
 * becomes PTX for the newest one it knows, which the driver compiles for the
 * device; so does any cubin when this NVRTC cannot make cubins. */
static dls_status_t dls__rtc_target_check(const char *call, dls__rtc_target *t, bool fallback) {
  dls__rtc_vendor *v = t->v;
  if (v != &dls__nvrtc || t->arch[0] == '\0')
    return DLS_OK;
  int num = dls__rtc_arch_number(strchr(t->arch, '_') + 1);
  int lo = v->narchs ? v->archs[0] : 0, hi = v->narchs ? v->archs[v->narchs - 1] : 0;
  if (v->narchs && num < lo)
    return dls__fail(DLS_ERR_NOT_SUPPORTED, "%s(arch=\"%s\"): NVRTC %d.%d compiles for sm_%d to sm_%d", call, t->arch,
                     v->major, v->minor, lo, hi);
  bool too_new = v->narchs && num > hi;
  bool no_cubin = t->kind == DLS__RTC_KIND_CUBIN && v->api.get_code == NULL;
  if (too_new && !fallback)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s(arch=\"%s\"): NVRTC %d.%d knows sm_%d to sm_%d; use a newer NVRTC, or an older arch", call,
                     t->arch, v->major, v->minor, lo, hi);
  if (too_new || (no_cubin && fallback)) {
    snprintf(t->arch, sizeof t->arch, "compute_%d", too_new ? hi : num);
    snprintf(t->option, sizeof t->option, "-arch=%s", t->arch);
    t->kind = DLS__RTC_KIND_PTX;
  } else if (no_cubin) {
    return dls__fail(DLS_ERR_NOT_SUPPORTED, "%s(arch=\"%s\"): NVRTC %d.%d makes no cubins (it predates 11.1); ask "
                     "for \"compute_%d\" (PTX)", call, t->arch, v->major, v->minor, num);
  }
  return DLS_OK;
}

/* An architecture named in the compiler options themselves ("-arch=sm_90"). */
static const char *dls__rtc_option_arch(const dls_compile_options_t *o) {
  static const char *const prefixes[] = {"-arch=", "--gpu-architecture=", "--offload-arch=", "-arch", "--gpu-architecture"};
  for (size_t i = 0; o != NULL && i < o->noptions; i++)
    for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++)
      if (strncmp(o->options[i], prefixes[k], strlen(prefixes[k])) == 0)
        return o->options[i];
  return NULL;
}

/* ---- checks of the arguments ---- */

static dls_status_t dls__rtc_check_options(const char *call, const char *source, const dls_compile_options_t *o) {
  if (source == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(source=NULL): no source given", call);
  if (o == NULL)
    return DLS_OK;
  if (o->size < sizeof(dls_compile_options_t))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(options->size=%u): set it to sizeof(dls_compile_options_t) = %zu (DLS_COMPILE_OPTIONS_INIT)",
                     call, o->size, sizeof(dls_compile_options_t));
  if (o->cache > DLS_COMPILE_CACHE_OFF)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(options->cache=%u): not a dls_compile_cache_t", call, o->cache);
  if (o->noptions > DLS__RTC_MAX_OPTIONS || (o->noptions != 0 && o->options == NULL))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(options->options=%p, noptions=%zu): at most %d options, in an array",
                     call, (const void *)o->options, o->noptions, DLS__RTC_MAX_OPTIONS);
  for (size_t i = 0; i < o->noptions; i++)
    if (o->options[i] == NULL)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(options->options[%zu]=NULL): every option is a string", call, i);
  if (o->nname_expressions > DLS__RTC_MAX_NAMES || (o->nname_expressions != 0 && o->name_expressions == NULL))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(options->name_expressions=%p, nname_expressions=%zu): at most %d, in an array", call,
                     (const void *)o->name_expressions, o->nname_expressions, DLS__RTC_MAX_NAMES);
  for (size_t i = 0; i < o->nname_expressions; i++)
    if (o->name_expressions[i] == NULL || o->name_expressions[i][0] == '\0')
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(options->name_expressions[%zu]=%s): a name expression is a "
                       "non-empty string such as \"scale<float>\"", call, i,
                       o->name_expressions[i] ? "\"\"" : "NULL");
  return DLS_OK;
}

/* ---- the cache key ---- */

static void dls__rtc_key(const dls__rtc_target *t, const char *source, const dls_compile_options_t *o,
                         uint8_t key[32]) {
  dls__sha256 s;
  dls__sha256_init(&s);
  char head[160];
  snprintf(head, sizeof head, "dlstream kernel cache 1|%s %d.%d|%llx|%s|%u", t->v->name, t->v->major, t->v->minor,
           (unsigned long long)t->v->identity, t->arch, t->kind);
  dls__sha256_str(&s, head);
  size_t nopt = o ? o->noptions : 0, nname = o ? o->nname_expressions : 0;
  dls__sha256_field(&s, &nopt, sizeof nopt);
  for (size_t i = 0; i < nopt; i++)
    dls__sha256_str(&s, o->options[i]);
  dls__sha256_field(&s, &nname, sizeof nname);
  for (size_t i = 0; i < nname; i++)
    dls__sha256_str(&s, o->name_expressions[i]);
  dls__sha256_str(&s, o ? o->program_name : NULL);
  dls__sha256_str(&s, source);
  dls__sha256_final(&s, key);
}

/* ---- one compile ---- */

static const char *dls__rtc_error(const dls__rtc_vendor *v, int r) {
  const char *s = v->api.get_error_string != NULL ? v->api.get_error_string(r) : NULL;
  return s != NULL ? s : "unknown error";
}

/* Takes the program's log into the thread's last log. */
static void dls__rtc_take_log(dls__rtc_vendor *v, dls__rtc_program prog) {
  size_t n = 0;
  char *log = NULL;
  if (v->api.get_program_log_size(prog, &n) == DLS__RTC_SUCCESS && n > 1 && (log = dls__malloc(n + 1)) != NULL) {
    if (v->api.get_program_log(prog, log) != DLS__RTC_SUCCESS) {
      dls__free(log);
      log = NULL;
    } else {
      log[n] = '\0';
      for (size_t k = strlen(log); k > 0 && (log[k - 1] == '\n' || log[k - 1] == ' '); k--)
        log[k - 1] = '\0';
    }
  }
  dls__rtc_log_set(log);
}

/* Runs the compiler: a new entry (refs 1) in *out, or a failure naming `call`. */
static dls_status_t dls__rtc_run(const char *call, const dls__rtc_target *t, const char *source,
                                 const dls_compile_options_t *o, dls__rtc_entry **out) {
  dls__rtc_vendor *v = t->v;
  const dls__rtc_api *api = &v->api;
  const char *pname = o != NULL && o->program_name != NULL ? o->program_name : "kernel.cu";
  size_t nopt = o ? o->noptions : 0, nname = o ? o->nname_expressions : 0;
  dls__rtc_program prog = NULL;
  const char **argv = NULL, **lowered = NULL;
  char *code = NULL;
  dls_status_t st = DLS_OK;
  dls__rtc_log_set(NULL);
  int r = api->create_program(&prog, source, pname, 0, NULL, NULL);
  if (r != DLS__RTC_SUCCESS) {
    st = dls__fail(r == DLS__RTC_ERROR_OUT_OF_MEMORY ? DLS_ERR_OUT_OF_MEMORY : DLS_ERR_BACKEND,
                   "%s: %s create program: %s", call, v->name, dls__rtc_error(v, r));
    goto out;
  }
  for (size_t i = 0; i < nname; i++) {
    if ((r = api->add_name_expression(prog, o->name_expressions[i])) != DLS__RTC_SUCCESS) {
      st = dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(name_expressions[%zu]=\"%s\"): %s refused it: %s", call, i,
                     o->name_expressions[i], v->name, dls__rtc_error(v, r));
      goto out;
    }
  }
  argv = dls__malloc((nopt + 1) * sizeof *argv);
  lowered = dls__calloc(nname + 1, sizeof *lowered);
  if (argv == NULL || lowered == NULL) {
    st = dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
    goto out;
  }
  int argc = 0;
  if (t->option[0] != '\0')
    argv[argc++] = t->option;
  for (size_t i = 0; i < nopt; i++)
    argv[argc++] = o->options[i];
  r = api->compile_program(prog, argc, argv);
  dls__rtc_count(DLS__RTC_STAT_COMPILES);
  dls__rtc_take_log(v, prog);
  if (r != DLS__RTC_SUCCESS) {
    bool user = r == DLS__RTC_ERROR_COMPILATION || r == DLS__RTC_ERROR_INVALID_OPTION;
    st = dls__fail(user ? DLS_ERR_INVALID_ARGUMENT : DLS_ERR_BACKEND, "%s(arch=\"%s\"): %s %d.%d could not compile %s "
                   "(%s)%s%s", call, t->arch[0] ? t->arch : "default", v->name, v->major, v->minor, pname,
                   dls__rtc_error(v, r), dls_compile_last_log()[0] ? ":\n" : "", dls_compile_last_log());
    goto out;
  }
  for (size_t i = 0; i < nname; i++) {
    if ((r = api->get_lowered_name(prog, o->name_expressions[i], &lowered[i])) != DLS__RTC_SUCCESS ||
        lowered[i] == NULL) {
      st = dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(name_expressions[%zu]=\"%s\"): not a __global__ function of the "
                     "source (%s)", call, i, o->name_expressions[i], dls__rtc_error(v, r));
      goto out;
    }
  }
  size_t size = 0;
  bool ptx = t->kind == DLS__RTC_KIND_PTX;
  r = ptx ? api->get_ptx_size(prog, &size) : api->get_code_size(prog, &size);
  if (r == DLS__RTC_SUCCESS && size != 0 && (code = dls__malloc(size)) == NULL) {
    st = dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory for an image of %zu bytes", call, size);
    goto out;
  }
  if (r == DLS__RTC_SUCCESS && size != 0)
    r = ptx ? api->get_ptx(prog, code) : api->get_code(prog, code);
  if (r != DLS__RTC_SUCCESS || size == 0) {
    st = dls__fail(DLS_ERR_BACKEND, "%s: %s compiled %s but gave no %s (%s)", call, v->name, pname,
                   ptx ? "PTX" : "code", size == 0 ? "empty" : dls__rtc_error(v, r));
    goto out;
  }
  if ((*out = dls__rtc_entry_new(t->kind, code, size, lowered, (uint32_t)nname)) == NULL)
    st = dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
out:
  if (prog != NULL)
    api->destroy_program(&prog);
  dls__free(code);
  dls__free(argv);
  dls__free(lowered); /* the strings belong to the program: copied into the entry */
  return st;
}

/* Resolves options and caches, then compiles when no cache has the entry. */
static dls_status_t dls__rtc_build(const char *call, const dls__rtc_target *t, const char *source,
                                   const dls_compile_options_t *o, dls__rtc_entry **out) {
  const char *env = getenv("DLSTREAM_CACHE");
  uint32_t cache = (o ? o->cache : 0) | (env != NULL && strcmp(env, "0") == 0 ? DLS_COMPILE_CACHE_OFF : 0);
  uint8_t key[32];
  *out = NULL;
  dls__rtc_key(t, source, o, key);
  if (!(cache & DLS_COMPILE_CACHE_NO_MEMORY) && (*out = dls__rtc_memory_get(key)) != NULL) {
    dls__rtc_count(DLS__RTC_STAT_MEMORY_HITS);
    dls__rtc_log_set(NULL);
    return DLS_OK;
  }
  char dir[4096];
  bool disk = !(cache & DLS_COMPILE_CACHE_NO_DISK) && dls__rtc_cache_dir(o ? o->cache_dir : NULL, dir, sizeof dir);
  if (disk && (*out = dls__rtc_disk_get(dir, key)) != NULL &&
      ((*out)->kind != t->kind || (*out)->nlowered != (o ? o->nname_expressions : 0))) {
    /* A well-formed file that does not answer this compile (a forged or colliding file). */
    dls__rtc_count(DLS__RTC_STAT_DISK_CORRUPT);
    dls__rtc_entry_unref(*out);
    *out = NULL;
  }
  if (*out != NULL) {
    dls__rtc_count(DLS__RTC_STAT_DISK_HITS);
    dls__rtc_log_set(NULL);
  } else {
    DLS__TRY(dls__rtc_run(call, t, source, o, out));
    if (disk)
      dls__rtc_disk_put(dir, key, *out);
  }
  if (!(cache & DLS_COMPILE_CACHE_NO_MEMORY))
    dls__rtc_memory_put(key, *out);
  return DLS_OK;
}

/* ---- the public calls ---- */

dls_status_t dls_compile(const char *source, const dls_compile_options_t *options, const char *arch,
                         void **out_image, size_t *out_size, const char **opt_out_lowered) {
  static const char call[] = "dls_compile";
  DLS__OUT(call, out_image);
  DLS__OUT(call, out_size);
  dls__rtc_log_set(NULL);
  DLS__TRY(dls__rtc_check_options(call, source, options));
  if (arch == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(arch=NULL): name the target, e.g. \"sm_90\"", call);
  const char *in_options = dls__rtc_option_arch(options);
  if (in_options != NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(arch=\"%s\", options: \"%s\"): name the target once, with arch",
                     call, arch, in_options);
  dls__rtc_target t;
  DLS__TRY(dls__rtc_target_parse(call, "arch", arch, &t));
  DLS__TRY(dls__rtc_load(t.v, call));
  DLS__TRY(dls__rtc_target_check(call, &t, false));
  dls__rtc_entry *e;
  DLS__TRY(dls__rtc_build(call, &t, source, options, &e));
  size_t names = 0;
  for (uint32_t i = 0; i < e->nlowered; i++)
    names += strlen(e->lowered[i]) + 1;
  char *image = dls__malloc(e->size + names);
  if (image == NULL) {
    dls__rtc_entry_unref(e);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory for an image of %zu bytes", call, e->size);
  }
  memcpy(image, e->image, e->size);
  char *p = image + e->size;
  for (uint32_t i = 0; i < e->nlowered; i++) {
    size_t n = strlen(e->lowered[i]) + 1;
    memcpy(p, e->lowered[i], n);
    if (opt_out_lowered != NULL)
      opt_out_lowered[i] = p;
    p += n;
  }
  *out_image = image;
  *out_size = e->size;
  dls__rtc_entry_unref(e);
  return DLS_OK;
}

void dls_compile_free(void *image) { dls__free(image); }

/* The target of a compile for `dev`: options->arch, the options' own -arch,
 * the device's architecture, else the compiler's default (PTX / its own). */
static dls_status_t dls__rtc_device_target(const char *call, dls__device *dev, const dls_compile_options_t *o,
                                           dls__rtc_target *t) {
  dls__rtc_vendor *v = dev->device.device_type == kDLCUDA ? &dls__nvrtc : &dls__hiprtc;
  const char *arch = o != NULL ? o->arch : NULL, *in_options = dls__rtc_option_arch(o);
  if (arch != NULL && in_options != NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(options->arch=\"%s\", options: \"%s\"): name the target once",
                     call, arch, in_options);
  char own[32] = "";
  if (arch == NULL && in_options == NULL && dls__device_arch(dev, own, sizeof own) == DLS_OK)
    arch = own;
  if (arch != NULL) {
    DLS__TRY(dls__rtc_target_parse(call, "arch", arch, t));
    if (t->v != v)
      return dls__fail(DLS_ERR_INVALID_DEVICE, "%s(arch=\"%s\"): not an architecture of %s", call, arch, dev->name);
    DLS__TRY(dls__rtc_load(v, call));
    return dls__rtc_target_check(call, t, true);
  }
  memset(t, 0, sizeof *t);
  t->v = v;
  DLS__TRY(dls__rtc_load(v, call));
  if (in_options != NULL) { /* the user's own option: their choice of output */
    const char *val = strchr(in_options, '=');
    t->kind = v == &dls__hiprtc ? DLS__RTC_KIND_HSACO
              : val != NULL && strncmp(val + 1, "sm_", 3) == 0 && v->api.get_code != NULL ? DLS__RTC_KIND_CUBIN
                                                                                        : DLS__RTC_KIND_PTX;
    snprintf(t->arch, sizeof t->arch, "%.31s", val != NULL ? val + 1 : "");
  } else {
    t->kind = v == &dls__hiprtc ? DLS__RTC_KIND_HSACO : DLS__RTC_KIND_PTX;
  }
  return DLS_OK;
}

dls_status_t dls_module_compile(DLDevice device, const char *source, const dls_compile_options_t *options,
                                dls_module_t *out_module) {
  static const char call[] = "dls_module_compile";
  DLS__ENTER(call);
  DLS__OUT(call, out_module);
  out_module->id = 0;
  dls__rtc_log_set(NULL);
  DLS__TRY(dls__rtc_check_options(call, source, options));
  if (device.device_type != kDLCUDA && device.device_type != kDLROCM) {
    char name[32];
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s(device=%s): kernels from source compile for CUDA and ROCm devices; on the CPU "
                     DLS__HINT_HOST_FUNCTIONS,
                     call, dls_device_str(device, name, sizeof name));
  }
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  dls__rtc_target t;
  DLS__TRY(dls__rtc_device_target(call, dev, options, &t));
  dls__rtc_entry *e;
  DLS__TRY(dls__rtc_build(call, &t, source, options, &e));
  st = dls_module_load(device, e->image, e->size, out_module);
  if (st != DLS_OK) {
    dls__rtc_entry_unref(e);
    return dls__fail_prefix(st, "%s(%s for %s)", call, t.kind == DLS__RTC_KIND_PTX ? "PTX" : "code",
                            t.arch[0] ? t.arch : "the default arch");
  }
  char kernels[512];
  dls__rtc_kernel_names(e->image, e->size, kernels, sizeof kernels);
  const char *const *exprs = options != NULL ? options->name_expressions : NULL;
  st = dls__module_names_set(out_module->id, e->nlowered, exprs, e->lowered, kernels);
  dls__rtc_entry_unref(e);
  if (st != DLS_OK) {
    dls_module_unload(*out_module);
    out_module->id = 0;
    return dls__fail_prefix(st, "%s", call);
  }
  return DLS_OK;
}

dls_status_t dls_module_lowered_name(dls_module_t module, const char *name_expression, const char **out_lowered) {
  static const char call[] = "dls_module_lowered_name";
  DLS__ENTER(call);
  DLS__OUT(call, out_lowered);
  *out_lowered = NULL;
  if (name_expression == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(name_expression=NULL): no name expression given", call);
  DLS__GET(&dls__module_table, void, held_module, module, call, "module");
  (void)held_module;
  *out_lowered = dls__module_names_lowered(module.id, name_expression);
  if (*out_lowered != NULL)
    return DLS_OK;
  dls__fail(DLS_ERR_NOT_FOUND, "not a name expression of the module (give them to dls_module_compile)");
  return dls__module_names_missing(module.id, DLS_ERR_NOT_FOUND, call, name_expression);
}
