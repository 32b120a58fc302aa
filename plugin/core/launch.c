/* SPDX-License-Identifier: Apache-2.0 */
/* Modules, functions and typed launches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_names.h"

#define DLS__GET_MODULE(var, handle, call, arg) DLS__GET(&dls__module_table, dls__module, var, handle, call, arg)
#define DLS__GET_FUNCTION(var, handle, call, arg) \
  DLS__GET(&dls__function_table, dls__function, var, handle, call, arg)

/* A module keeps the functions looked up in it, by the name asked for: a
 * name looked up again gives the same handle, and unloading makes them all
 * stale. */
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
  dls__module_fns fns;
} dls__module_full;

dls_status_t dls_module_load(DLDevice device, const void *image, size_t size, dls_module_t *out_module) {
  static const char call[] = "dls_module_load";
  DLS__ENTER(call);
  if (out_module == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_module=NULL): output pointer is NULL", call);
  out_module->id = 0;
  if (image == NULL || size == 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(image=%p, size=%zu): empty image", call, image, size);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  if (dev->be->module_load == NULL)
    return dls__fail(DLS_ERR_NOT_SUPPORTED,
                     "%s(device=%s): the %s backend loads no modules; make functions with dls_function_from_host",
                     call, dev->name, dev->be->name);
  void *native;
  st = dev->be->module_load(dev->id, image, size, &native);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(device=%s, size=%zu)", call, dev->name, size);
  dls__module_full *m = dls__calloc(1, sizeof *m);
  if (m == NULL) {
    dev->be->module_unload(dev->id, native);
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
  }
  m->m.dev = dev;
  m->m.native = native;
  atomic_init(&m->m.refs, 1);
  pthread_mutex_init(&m->fns.mu, NULL);
  m->m.id = dls__table_add(&dls__module_table, m);
  if (m->m.id == 0) {
    dev->be->module_unload(dev->id, native);
    pthread_mutex_destroy(&m->fns.mu);
    dls__free(m);
    return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
  }
  out_module->id = m->m.id;
  return DLS_OK;
}

dls_status_t dls_module_load_file(DLDevice device, const char *path, dls_module_t *out_module) {
  static const char call[] = "dls_module_load_file";
  DLS__ENTER(call);
  if (out_module == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_module=NULL): output pointer is NULL", call);
  out_module->id = 0;
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

/* The native module is unloaded when neither the handle nor any of its
 * functions (a launch may still hold one) is left. */
static void module_unref(dls__module *mod) {
  if (atomic_fetch_sub_explicit(&mod->refs, 1, memory_order_acq_rel) != 1)
    return;
  dls__module_full *m = (dls__module_full *)mod;
  (void)mod->dev->be->module_unload(mod->dev->id, mod->native);
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
dls__table dls__module_table = DLS__TABLE("module", DLS_HANDLE_MODULE, dls__module_drop);

void dls__function_drop(void *obj) {
  dls__function *f = obj;
  dls__module *m = f->module;
  if (f->host)
    f->dev->be->host_function_destroy(f->dev->id, f->native);
  dls__free(f);
  if (m != NULL)
    module_unref(m);
}
dls__table dls__function_table = DLS__TABLE("function", DLS_HANDLE_FUNCTION, dls__function_drop);

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
  if (out_function == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_function=NULL): output pointer is NULL", call);
  out_function->id = 0;
  if (name == NULL || name[0] == '\0')
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(name=%s): no kernel name given", call, name ? "\"\"" : "NULL");
  DLS__GET(&dls__module_table, dls__module_full, m, module, call, "module");
  pthread_mutex_lock(&m->fns.mu);
  out_function->id = module_fn_find(&m->fns, name);
  pthread_mutex_unlock(&m->fns.mu);
  if (out_function->id != 0)
    return DLS_OK;
  /* The driver is asked unlocked; a thread that published the same name
   * meanwhile wins, and this lookup gives its handle. */
  void *native;
  dls_status_t st = m->m.dev->be->module_function(m->m.dev->id, m->m.native,
                                                  dls__module_names_resolve(module.id, name), &native);
  if (st != DLS_OK)
    return dls__module_names_missing(module.id, st, call, name);
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
  if (out_function == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_function=NULL): output pointer is NULL", call);
  out_function->id = 0;
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
  st = dev->be->host_function(dev->id, name, fn, &native);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s", call);
  dls__function *f;
  st = function_publish(dev, native, NULL, name, call, &f, out_function);
  if (st != DLS_OK) {
    dev->be->host_function_destroy(dev->id, native);
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
  DLS__GET_FUNCTION(f, function, call, "function");
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
  if (out_name == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(out_name=NULL): output pointer is NULL", call);
  DLS__GET_FUNCTION(f, function, call, "function");
  *out_name = f->name;
  return DLS_OK;
}

/* ---- the launch path ---- */

DLS__COLD static dls_status_t config_error(const char *call, const dls_launch_config_t *c) {
  if (c == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(config=NULL): no launch configuration", call);
  for (int i = 0; i < 3; i++) {
    if (c->grid[i] == 0)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(config.grid[%d]=0): every grid dimension must be >= 1", call, i);
    if (c->block[i] == 0)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(config.block[%d]=0): every block dimension must be >= 1", call,
                       i);
  }
  return DLS_OK;
}

static inline dls_status_t check_config(const char *call, const dls_launch_config_t *c) {
  if (DLS__LIKELY(c != NULL && c->grid[0] != 0 && c->grid[1] != 0 && c->grid[2] != 0 && c->block[0] != 0 &&
                  c->block[1] != 0 && c->block[2] != 0))
    return DLS_OK;
  return config_error(call, c);
}

/* A buffer or tensor argument that is not a live handle; the argument's
 * name is formatted only now, off the launch path. */
DLS__COLD static dls_status_t arg_miss(dls__table *t, uint64_t id, const char *call, size_t i) {
  char name[32];
  dls_status_t st;
  snprintf(name, sizeof name, "args[%zu]", i);
  dls__table_miss(t, id, call, name, &st);
  return st;
}

/* The buffers and tensors a launch holds until it is queued and its uses
 * recorded (let go of on every return path). */
typedef struct dls__arg_holds {
  int n;
  dls__hold h[DLS_MAX_ARGS];
} dls__arg_holds;

static void arg_holds_end(dls__arg_holds *hs) {
  for (int i = 0; i < hs->n; i++)
    dls__hold_end(&hs->h[i]);
}

static inline void *arg_hold(dls__arg_holds *hs, dls__table *t, uint64_t id) {
  dls__hold *h = &hs->h[hs->n];
  h->table = t;
  void *obj = dls__slot_hold(t, id, &h->slot);
  hs->n += obj != NULL;
  return obj;
}

/* Resolves a buffer, tensor or bytes argument: *out_param points at its
 * value (*out_ptr holds a device pointer), and a buffer that needs
 * memory is added to the launch's accesses: read for an input, written
 * otherwise (a built-in's own arguments say which, builtin_args.c). */
static dls_status_t resolve_arg(const char *call, const dls__function *fn, const dls__stream *s, const dls_arg_t *a,
                                size_t i, void **out_ptr, void **out_param, uint32_t *out_size, dls__accesses *acc,
                                dls__arg_holds *holds) {
  dls__buffer *b;
  *out_param = out_ptr;
  *out_size = sizeof(void *);
  switch (a->kind) {
  case DLS_ARG_BUFFER:
  case DLS_ARG_BUFFER_IN:
    b = arg_hold(holds, &dls__buffer_table, a->v.buffer.id);
    if (DLS__UNLIKELY(b == NULL))
      return arg_miss(&dls__buffer_table, a->v.buffer.id, call, i);
    if (DLS__UNLIKELY(b->dev != s->dev))
      return dls__fail(DLS_ERR_INVALID_DEVICE, "%s(args[%zu]): buffer is on %s but the stream is on %s", call, i,
                       b->dev->name, s->dev->name);
    *out_ptr = b->ptr;
    break;
  case DLS_ARG_TENSOR:
  case DLS_ARG_TENSOR_IN: {
    dls__tensor *t = arg_hold(holds, &dls__tensor_table, a->v.tensor.id);
    if (DLS__UNLIKELY(t == NULL))
      return arg_miss(&dls__tensor_table, a->v.tensor.id, call, i);
    if (DLS__UNLIKELY(t->buf->dev != s->dev))
      return dls__fail(DLS_ERR_INVALID_DEVICE, "%s(args[%zu]): tensor is on %s but the stream is on %s", call, i,
                       t->buf->dev->name, s->dev->name);
    if (a->kind == DLS_ARG_TENSOR && (t->flags & DLS_TENSOR_READ_ONLY))
      return dls__fail(DLS_ERR_READ_ONLY,
                       "%s(args[%zu]): tensor is read-only but passed as an output (use dls_arg_tensor_in for "
                       "inputs)",
                       call, i);
    *out_ptr = t->dl.data == NULL ? NULL : (char *)t->dl.data + t->dl.byte_offset;
    b = t->buf;
    break;
  }
  case DLS_ARG_BYTES:
    if (a->v.bytes == NULL || a->size == 0)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args[%zu]): bytes argument of %u bytes at %p", call, i, a->size,
                       a->v.bytes);
    *out_param = (void *)(uintptr_t)a->v.bytes;
    *out_size = a->size;
    return DLS_OK;
  default:
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args[%zu].kind=%d): unknown argument kind", call, i, (int)a->kind);
  }
  int mode = a->kind == DLS_ARG_TENSOR_IN || a->kind == DLS_ARG_BUFFER_IN ? DLS_ACCESS_READ : DLS_ACCESS_WRITE;
  if (DLS__UNLIKELY(fn->builtin))
    mode = dls__builtin_access(fn, i);
  dls__access_add(acc, b, mode);
  return DLS_OK;
}

/* What every launch checks of its function and stream: one device, and no work on a legacy default stream
 * while a capture is underway on its device. */
static inline dls_status_t check_function_stream(const char *call, const dls__function *fn, dls__stream *s) {
  if (DLS__UNLIKELY(fn->dev != s->dev))
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: function \"%s\" is on %s but the stream is on %s", call, fn->name,
                     fn->dev->name, s->dev->name);
  if (DLS__UNLIKELY(atomic_load_explicit(&s->dev->captures, memory_order_relaxed) > 0) && dls__stream_legacy(s) &&
      dls__capture_on_device(s->dev))
    return dls__fail(DLS_ERR_STATE,
                     "%s: a capture is underway on %s, and work on its legacy default stream would merge into it "
                     "(the driver invalidates the capture); launch on the capturing stream or a created one",
                     call, s->dev->name);
  return DLS_OK;
}

/* Queues the launch on the backend. */
static inline dls_status_t queue_launch(const char *call, const dls__function *fn, dls__stream *s,
                                        const dls_launch_config_t *config, void **params, const uint32_t *sizes,
                                        int nargs) {
  dls_status_t st = s->dev->be->launch(s->dev->id, fn->native, s->native, config, params, sizes, nargs);
  if (DLS__UNLIKELY(st != DLS_OK))
    return dls__fail_prefix(st, "%s(function \"%s\" on %s)", call, fn->name, s->dev->name);
  return DLS_OK;
}

/* Deferred releases are polled now and then, not on every launch: a poll
 * queries an event per pending entry. */
static inline void poll_now_and_then(void) {
  static _Thread_local unsigned launches;
  if (DLS__UNLIKELY(atomic_load_explicit(&dls__deferred_count, memory_order_relaxed) != 0) && (++launches & 63) == 0)
    /* polls only where no capture forbids it */
    dls_deferred_poll();
}

dls_status_t dls__launch_params(const char *call, dls__function *fn, dls__stream *s,
                                const dls_launch_config_t *config, void **params, const uint32_t *sizes, int nargs) {
  DLS__TRY(check_function_stream(call, fn, s));
  DLS__TRY(queue_launch(call, fn, s, config, params, sizes, nargs));
  poll_now_and_then();
  return DLS_OK;
}

dls_status_t dls__launch_ext(const char *call, dls__function *fn, dls__stream *s, const dls_launch_config_t *config,
                             const dls_arg_t *args, size_t nargs, const dls__extent *extents) {
  if (DLS__UNLIKELY(fn->builtin)) {
    bool overlap;
    DLS__TRY(dls__builtin_check(call, fn, args, nargs, extents, &overlap));
    if (overlap)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                       "%s(function \"%s\"): what it reads partially overlaps what it writes, which a kernel launch "
                       "cannot order; call %s (it copies the source through a temporary) or pass disjoint memory",
                       call, fn->name, fn->name);
  }
  return dls__launch_args(call, fn, s, config, args, nargs);
}

dls_status_t dls__launch_args(const char *call, dls__function *fn, dls__stream *s, const dls_launch_config_t *config,
                              const dls_arg_t *args, size_t nargs) {
  DLS__TRY(check_function_stream(call, fn, s));
  DLS__TRY(check_config(call, config));
  if (DLS__UNLIKELY(nargs > DLS_MAX_ARGS))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(nargs=%zu): at most %d arguments", call, nargs, DLS_MAX_ARGS);
  if (DLS__UNLIKELY(args == NULL && nargs != 0))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args=NULL, nargs=%zu): no arguments given", call, nargs);
  void *ptrs[DLS_MAX_ARGS]; /* the device pointers of buffer and tensor arguments */
  void *params[DLS_MAX_ARGS];
  uint32_t sizes[DLS_MAX_ARGS];
  dls__accesses acc; /* the memory it reads and writes */
  acc.n = 0;
  dls__arg_holds holds __attribute__((cleanup(arg_holds_end)));
  holds.n = 0;
  size_t total = 0;
  for (size_t i = 0; i < nargs; i++) {
    const dls_arg_t *a = &args[i];
    if (DLS__LIKELY((uint32_t)a->kind - 1u < DLS_ARG_PTR)) {
      /* Scalars and raw pointers are passed where they are: the arguments are
       * borrowed for the call, and every backend copies the values at once. */
      params[i] = (void *)(uintptr_t)&a->v;
      sizes[i] = dls__arg_scalar_size(a->kind);
    } else {
      DLS__TRY(resolve_arg(call, fn, s, a, i, &ptrs[i], &params[i], &sizes[i], &acc, &holds));
    }
    total += sizes[i];
  }
  if (DLS__UNLIKELY(total > DLS_MAX_ARG_BYTES))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s: arguments take %zu bytes, more than %d", call, total,
                     DLS_MAX_ARG_BYTES);
  if (DLS__LIKELY(acc.n == 0)) {
    DLS__TRY(queue_launch(call, fn, s, config, params, sizes, (int)nargs));
    poll_now_and_then();
    return DLS_OK;
  }
  /* The launch runs after what its memory's last writer (and, for what it
   * writes, every reader since) queued on other streams. */
  dls_status_t st = dls__access_begin(&acc, s);
  if (DLS__UNLIKELY(st != DLS_OK))
    return dls__fail_prefix(st, "%s(function \"%s\"): ordering after the other streams that use its memory", call,
                            fn->name);
  st = queue_launch(call, fn, s, config, params, sizes, (int)nargs);
  dls_status_t noted = dls__access_end(&acc, st == DLS_OK);
  if (st != DLS_OK)
    return st;
  if (DLS__UNLIKELY(noted != DLS_OK))
    return dls__fail_prefix(noted, "%s: recording a buffer use after the launch", call);
  poll_now_and_then();
  return DLS_OK;
}

dls_status_t dls_launch(dls_function_t function, dls_stream_t stream, const dls_launch_config_t *config,
                        const dls_arg_t *args, size_t nargs) {
  static const char call[] = "dls_launch";
  DLS__ENTER(call);
  DLS__GET_FUNCTION(f, function, call, "function");
  DLS__GET_STREAM(s, stream, call, "stream");
  return dls__launch(call, f, s, config, args, nargs);
}
