/* SPDX-License-Identifier: Apache-2.0 */
/* Modules and their functions, host functions: loading, handles sharing a loaded image, lookups by name, and their
 * ends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hints.h"
#include "core/module.h"
#include "core/module_names.h"

/* A loaded image: the native module and the native functions found in it,
 * by the name the backend was asked. Each handle on it holds a reference
 * (dls_module_load makes the first, dls__module_share the others), so
 * handles that share it end on their own; the last to go unloads it. */
typedef struct dls__image_fn {
  char *name;
  void *native;
} dls__image_fn;

typedef struct dls__module_image {
  _Atomic int refs;
  dls__device *dev;
  void *native;
  pthread_mutex_t mu;
  dls__image_fn *found;
  size_t n, cap;
} dls__module_image;

/* A module handle keeps the functions looked up through it, by the name
 * asked for: a name looked up again gives the same handle, and unloading
 * makes them all stale (the functions of other handles on the image stay). */
typedef struct dls__module_fn {
  char *name; /* as the caller spelled it (a kernel name or a name expression) */
  uint64_t id;
} dls__module_fn;

typedef struct dls__module_fns {
  pthread_mutex_t mu;
  dls__module_fn *fns;
  size_t n, cap;
} dls__module_fns;

typedef struct dls__module_full {
  dls__module m;
  dls__module_image *image;
  dls__module_fns fns;
} dls__module_full;

static void image_unref(dls__module_image *img) {
  if (atomic_fetch_sub_explicit(&img->refs, 1, memory_order_acq_rel) != 1)
    return;
  (void)img->dev->be->module_unload(img->dev->be, img->dev->id, img->native);
  for (size_t i = 0; i < img->n; i++)
    dls__free(img->found[i].name);
  dls__free(img->found);
  pthread_mutex_destroy(&img->mu);
  dls__free(img);
}

/* The native function the backend gave for `name` before, through any handle on the image. */
static bool image_find(dls__module_image *img, const char *name, void **out_native) {
  bool found = false;
  pthread_mutex_lock(&img->mu);
  for (size_t i = 0; i < img->n && !found; i++)
    if (strcmp(img->found[i].name, name) == 0) {
      *out_native = img->found[i].native;
      found = true;
    }
  pthread_mutex_unlock(&img->mu);
  return found;
}

/* Remembers what the backend gave; without memory the next handle asks the backend again. */
static void image_keep(dls__module_image *img, const char *name, void *native) {
  size_t len = strlen(name) + 1;
  char *copy = dls__malloc(len);
  if (copy == NULL)
    return;
  memcpy(copy, name, len);
  pthread_mutex_lock(&img->mu);
  if (img->n == img->cap) {
    size_t cap = img->cap ? img->cap * 2 : 4;
    dls__image_fn *p = dls__realloc(img->found, cap * sizeof *p);
    if (p == NULL) {
      pthread_mutex_unlock(&img->mu);
      dls__free(copy);
      return;
    }
    img->found = p;
    img->cap = cap;
  }
  img->found[img->n++] = (dls__image_fn){copy, native};
  pthread_mutex_unlock(&img->mu);
}

/* A new handle on `img`, taking over one reference the caller holds on it (kept by the caller on failure). */
static dls_status_t module_publish(dls__module_image *img, const char *call, dls_module_t *out_module) {
  dls__module_full *m = dls__calloc(1, sizeof *m);
  if (m == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  m->m.dev = img->dev;
  m->m.native = img->native;
  m->image = img;
  atomic_init(&m->m.refs, 1);
  pthread_mutex_init(&m->fns.mu, NULL);
  m->m.id = dls__table_add(&dls__module_table, m);
  if (m->m.id == 0) {
    pthread_mutex_destroy(&m->fns.mu);
    dls__free(m);
    return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
  }
  out_module->id = m->m.id;
  return DLS_OK;
}

dls_status_t dls_module_load(DLDevice device, const void *image, size_t size, dls_module_t *out_module) {
  static const char call[] = "dls_module_load";
  DLS__ENTER(call);
  DLS__OUT(call, out_module);
  if (image == NULL || size == 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(image=%p, size=%zu): empty image", call, image, size);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  if (dev->be->module_load == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s(device=%s): the %s backend loads no modules; " DLS__HINT_HOST_FUNCTIONS,
                     call, dev->name, dev->be->name);
  void *native;
  st = dev->be->module_load(dev->be, dev->id, image, size, &native);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(device=%s, size=%zu)", call, dev->name, size);
  dls__module_image *img = dls__calloc(1, sizeof *img);
  if (img == NULL) {
    dev->be->module_unload(dev->be, dev->id, native);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  }
  atomic_init(&img->refs, 1);
  img->dev = dev;
  img->native = native;
  pthread_mutex_init(&img->mu, NULL);
  st = module_publish(img, call, out_module);
  if (st != DLS_OK)
    image_unref(img); /* unloads the native module */
  return st;
}

dls_status_t dls__module_share(dls_module_t module, const char *call, dls_module_t *out_module) {
  DLS__ENTER(call);
  DLS__OUT(call, out_module);
  DLS__GET(&dls__module_table, dls__module_full, m, module, call, "module");
  atomic_fetch_add_explicit(&m->image->refs, 1, memory_order_relaxed);
  dls_status_t st = module_publish(m->image, call, out_module);
  if (st != DLS_OK) {
    image_unref(m->image); /* not the last: `module` holds one */
    return st;
  }
  st = dls__module_names_copy(module.id, out_module->id);
  if (st != DLS_OK) {
    (void)dls_module_unload(*out_module);
    out_module->id = 0;
    return dls__fail_prefix(st, "%s", call);
  }
  return DLS_OK;
}

dls_status_t dls_module_load_file(DLDevice device, const char *path, dls_module_t *out_module) {
  static const char call[] = "dls_module_load_file";
  DLS__ENTER(call);
  DLS__OUT(call, out_module);
  if (path == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(path=NULL): no file named", call);
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return dls__fail(DLS_ERR_NOT_FOUND, "%s(path=\"%s\"): cannot open the file", call, path);
  char *data = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 65536;
      char *p = dls__realloc(data, cap + 1);
      if (p == NULL) {
        dls__free(data);
        fclose(f);
        return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s(path=\"%s\"): out of host memory", call, path);
      }
      data = p;
    }
    size_t got = fread(data + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  fclose(f);
  data[n] = '\0'; /* PTX must be NUL-terminated; binary images ignore it */
  dls_status_t st = dls_module_load(device, data, n + 1, out_module);
  dls__free(data);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(path=\"%s\")", call, path);
  return DLS_OK;
}

dls_status_t dls_module_unload(dls_module_t module) {
  static const char call[] = "dls_module_unload";
  if (module.id == 0)
    return DLS_OK;
  DLS__ENTER(call);
  DLS__END(&dls__module_table, module, call, "module");
  return DLS_OK;
}

/* The handle's share of the image goes when neither the handle nor any of
 * its functions (a launch may still hold one) is left. */
static void module_unref(dls__module *mod) {
  if (atomic_fetch_sub_explicit(&mod->refs, 1, memory_order_acq_rel) != 1)
    return;
  dls__module_full *m = (dls__module_full *)mod;
  image_unref(m->image);
  pthread_mutex_destroy(&m->fns.mu);
  dls__free(m);
}

void dls__module_drop(void *obj) {
  dls__module_full *m = obj;
  dls__module_names_forget(m->m.id);
  /* No call holds the module, so no lookup adds a function meanwhile. */
  for (size_t i = 0; i < m->fns.n; i++) {
    (void)dls__table_end(&dls__function_table, m->fns.fns[i].id);
    dls__free(m->fns.fns[i].name);
  }
  dls__free(m->fns.fns);
  m->fns.fns = NULL;
  m->fns.n = m->fns.cap = 0;
  module_unref(&m->m);
}
dls__table dls__module_table = DLS__TABLE("module", DLS_HANDLE_MODULE, dls__module_drop, NULL);

void dls__function_drop(void *obj) {
  dls__function *f = obj;
  dls__module *m = f->module;
  if (f->host)
    f->dev->be->host_function_destroy(f->dev->be, f->dev->id, f->native);
  dls__free(f);
  if (m != NULL)
    module_unref(m);
}
dls__table dls__function_table = DLS__TABLE("function", DLS_HANDLE_FUNCTION, dls__function_drop, NULL);

static dls_status_t function_publish(dls__device *dev, void *native, dls__module *module, const char *name,
                                     const char *call, dls__function **out_obj, dls_function_t *out) {
  dls__function *f = dls__calloc(1, sizeof *f);
  if (f == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  f->dev = dev;
  f->native = native;
  f->module = module;
  snprintf(f->name, sizeof f->name, "%s", name);
  f->id = dls__table_add(&dls__function_table, f);
  if (f->id == 0) {
    dls__free(f);
    return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
  }
  if (module != NULL)
    atomic_fetch_add_explicit(&module->refs, 1, memory_order_relaxed);
  if (out_obj)
    *out_obj = f;
  if (out)
    out->id = f->id;
  return DLS_OK;
}

/* The handle already made for `name` in the module, or 0 (fns.mu held). */
static uint64_t module_fn_find(const dls__module_fns *fns, const char *name) {
  for (size_t i = 0; i < fns->n; i++)
    if (strcmp(fns->fns[i].name, name) == 0)
      return fns->fns[i].id;
  return 0;
}

dls_status_t dls_module_function(dls_module_t module, const char *name, dls_function_t *out_function) {
  static const char call[] = "dls_module_function";
  DLS__ENTER(call);
  DLS__OUT(call, out_function);
  if (name == NULL || name[0] == '\0')
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(name=%s): no kernel name given", call, name ? "\"\"" : "NULL");
  DLS__GET(&dls__module_table, dls__module_full, m, module, call, "module");
  pthread_mutex_lock(&m->fns.mu);
  out_function->id = module_fn_find(&m->fns, name);
  pthread_mutex_unlock(&m->fns.mu);
  if (out_function->id != 0)
    return DLS_OK;
  /* The backend is asked unlocked (once per image and name); a thread that
   * published the same name meanwhile wins, and this lookup gives its handle. */
  const char *asked = dls__module_names_resolve(module.id, name);
  void *native;
  dls_status_t st = DLS_OK;
  if (!image_find(m->image, asked, &native)) {
    st = m->m.dev->be->module_function(m->m.dev->be, m->m.dev->id, m->m.native, asked, &native);
    if (st != DLS_OK)
      return dls__module_names_missing(module.id, st, call, name);
    image_keep(m->image, asked, native);
  }
  char *key = strdup(name);
  if (key == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  pthread_mutex_lock(&m->fns.mu);
  out_function->id = module_fn_find(&m->fns, name);
  if (out_function->id != 0) {
    pthread_mutex_unlock(&m->fns.mu);
    dls__free(key);
    return DLS_OK;
  }
  if (m->fns.n == m->fns.cap) {
    size_t cap = m->fns.cap ? m->fns.cap * 2 : 8;
    dls__module_fn *p = dls__realloc(m->fns.fns, cap * sizeof *p);
    if (p == NULL) {
      pthread_mutex_unlock(&m->fns.mu);
      dls__free(key);
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
    }
    m->fns.fns = p;
    m->fns.cap = cap;
  }
  dls__function *f;
  st = function_publish(m->m.dev, native, &m->m, name, call, &f, out_function);
  if (st == DLS_OK)
    m->fns.fns[m->fns.n++] = (dls__module_fn){key, f->id};
  else
    dls__free(key);
  pthread_mutex_unlock(&m->fns.mu);
  return st;
}

dls_status_t dls_function_from_host(DLDevice device, const char *name, dls_host_kernel fn,
                                    dls_function_t *out_function) {
  static const char call[] = "dls_function_from_host";
  DLS__ENTER(call);
  DLS__OUT(call, out_function);
  if (fn == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(fn=NULL): no host function given", call);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  if (dev->be->host_function == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s(device=%s): host functions run only on CPU devices; load a module on %s backends", call,
                     dev->name, dev->be->name);
  if (name == NULL)
    name = "host_function";
  void *native;
  st = dev->be->host_function(dev->be, dev->id, name, fn, &native);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s", call);
  dls__function *f;
  st = function_publish(dev, native, NULL, name, call, &f, out_function);
  if (st != DLS_OK) {
    dev->be->host_function_destroy(dev->be, dev->id, native);
    return st;
  }
  f->host = true; /* before any other thread can know the handle: it was just made */
  return DLS_OK;
}

dls_status_t dls_function_destroy(dls_function_t function) {
  static const char call[] = "dls_function_destroy";
  if (function.id == 0)
    return DLS_OK;
  DLS__ENTER(call);
  DLS__GET_OF(function, f, function, call, "function");
  if (!f->host)
    return dls__fail(DLS_ERR_STATE, "%s(function \"%s\"): %s", call, f->name,
                     f->builtin ? "built-in functions belong to the runtime"
                                : "functions of a module are destroyed by dls_module_unload");
  DLS__END(&dls__function_table, function, call, "function");
  return DLS_OK;
}

dls_status_t dls_function_name(dls_function_t function, const char **out_name) {
  static const char call[] = "dls_function_name";
  DLS__ENTER(call);
  DLS__OUT(call, out_name);
  DLS__GET_OF(function, f, function, call, "function");
  *out_name = f->name;
  return DLS_OK;
}
