/* SPDX-License-Identifier: Apache-2.0 */
/* Kernels from source in Python: Module.from_source, dlstream.compile, the NVRTC wheel's library, the module cache. */
#include "args.h"
#include "errors.h"

#include <string.h>
#include <unistd.h>

/* Loaded images by (source, options, name expressions, device, arch, program
 * name): the cache's own Module of each, never handed out. A repeat of
 * from_source gets a Module of its own on the same image (dls__module_share,
 * no compile, no load), which its caller may close without touching anyone
 * else's. Under the GIL. */
static PyObject *g_modules;
static unsigned long long g_module_hits, g_module_misses;
static bool g_wheels_searched;

/* The nvidia-cuda-nvrtc wheels put the library under site-packages/nvidia:
 * cu13/lib/libnvrtc.so.13 (nvidia-cuda-nvrtc 13) or cuda_nvrtc/lib/libnvrtc.so.12
 * (nvidia-cuda-nvrtc-cu12). They are tried before the system's names. */
static void find_nvrtc_wheels(void) {
  static const char *const rel[] = {"nvidia/cu13/lib/libnvrtc.so.13", "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
                                    "nvidia/cu12/lib/libnvrtc.so.12"};
  if (g_wheels_searched)
    return;
  g_wheels_searched = true;
  PyObject *path = PySys_GetObject("path"); /* borrowed */
  if (path == NULL || !PyList_Check(path))
    return;
  for (size_t k = 0; k < sizeof rel / sizeof rel[0]; k++) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(path); i++) {
      PyObject *dir = PyList_GET_ITEM(path, i);
      const char *d = PyUnicode_Check(dir) ? PyUnicode_AsUTF8(dir) : NULL;
      if (d == NULL) {
        PyErr_Clear();
        continue;
      }
      char lib[4096];
      int n = snprintf(lib, sizeof lib, "%s/%s", d[0] ? d : ".", rel[k]);
      if (n > 0 && (size_t)n < sizeof lib && access(lib, R_OK) == 0) {
        (void)dls_compiler_add_library(DLS_COMPILER_NVRTC, lib);
        break;
      }
    }
  }
}

/* A tuple of str from a str (one item) or a sequence of str; NULL with TypeError. */
static PyObject *str_tuple(dlspy_state *st, PyObject *obj, const char *pycall, const char *what) {
  if (obj == NULL || obj == Py_None)
    return PyTuple_New(0);
  PyObject *t = PyUnicode_Check(obj) ? PyTuple_Pack(1, obj) : PySequence_Tuple(obj);
  if (t == NULL) {
    return dlspy_type_error(st, "%s(%s=%R): expected a sequence of str", pycall, what, obj);
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
    PyObject *s = PyTuple_GET_ITEM(t, i);
    Py_ssize_t n = 0;
    const char *c = PyUnicode_Check(s) ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
    if (c == NULL || strlen(c) != (size_t)n) {
      PyErr_Clear();
      Py_DECREF(t);
      return dlspy_type_error(st, "%s(%s=%R): item %zd is not a str without NUL characters", pycall, what, obj, i);
    }
  }
  return t;
}

/* The C view of the arguments shared by compile() and from_source(). */
typedef struct compile_args {
  PyObject *source_obj;    /* borrowed */
  const char *source;      /* UTF-8 of source_obj */
  PyObject *opts, *exprs;  /* new tuples of str */
  const char *optv[256];
  const char *exprv[1024];
  const char *arch;        /* NULL: the device's */
  const char *program_name;
  dls_compile_options_t o;
} compile_args;

static void compile_args_clear(compile_args *a) {
  Py_CLEAR(a->opts);
  Py_CLEAR(a->exprs);
}

static int compile_args_parse(dlspy_state *st, const char *pycall, PyObject *source, PyObject *options,
                              PyObject *name_expressions, PyObject *arch, PyObject *cache, PyObject *program_name,
                              compile_args *a) {
  /* Not the pointer arrays (10 KB): only their first nopt and nexpr items are written and read. */
  a->source_obj = NULL;
  a->source = a->arch = a->program_name = NULL;
  a->opts = a->exprs = NULL;
  a->o = (dls_compile_options_t)DLS_COMPILE_OPTIONS_INIT;
  if (source == NULL || !PyUnicode_Check(source)) {
    dlspy_type_error(st, "%s(source=%R): expected the kernel's source as a str", pycall, source ? source : Py_None);
    return -1;
  }
  Py_ssize_t len;
  if ((a->source = PyUnicode_AsUTF8AndSize(source, &len)) == NULL)
    return -1;
  if ((size_t)len != strlen(a->source)) {
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(source=...): the source contains a NUL character", pycall);
    return -1;
  }
  a->source_obj = source;
  if ((a->opts = str_tuple(st, options, pycall, "options")) == NULL ||
      (a->exprs = str_tuple(st, name_expressions, pycall, "name_expressions")) == NULL)
    goto fail;
  Py_ssize_t nopt = PyTuple_GET_SIZE(a->opts), nexpr = PyTuple_GET_SIZE(a->exprs);
  if ((size_t)nopt > sizeof a->optv / sizeof a->optv[0] || (size_t)nexpr > sizeof a->exprv / sizeof a->exprv[0]) {
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s: at most %zu options and %zu name expressions", pycall,
                 sizeof a->optv / sizeof a->optv[0], sizeof a->exprv / sizeof a->exprv[0]);
    goto fail;
  }
  for (Py_ssize_t i = 0; i < nopt; i++)
    a->optv[i] = PyUnicode_AsUTF8(PyTuple_GET_ITEM(a->opts, i));
  for (Py_ssize_t i = 0; i < nexpr; i++)
    a->exprv[i] = PyUnicode_AsUTF8(PyTuple_GET_ITEM(a->exprs, i));
  if (arch != NULL && arch != Py_None) {
    if (!PyUnicode_Check(arch) || (a->arch = PyUnicode_AsUTF8(arch)) == NULL) {
      PyErr_Clear();
      dlspy_type_error(st, "%s(arch=%R): expected a str such as 'sm_90' or None", pycall, arch);
      goto fail;
    }
  }
  if (program_name != NULL && program_name != Py_None) {
    if (!PyUnicode_Check(program_name) || (a->program_name = PyUnicode_AsUTF8(program_name)) == NULL) {
      PyErr_Clear();
      dlspy_type_error(st, "%s(program_name=%R): expected a str", pycall, program_name);
      goto fail;
    }
  }
  int use_cache = cache == NULL ? 1 : PyObject_IsTrue(cache);
  if (use_cache < 0)
    goto fail;
  a->o.cache = use_cache ? DLS_COMPILE_CACHE_ALL : DLS_COMPILE_CACHE_OFF;
  a->o.options = a->optv;
  a->o.noptions = (size_t)nopt;
  a->o.name_expressions = a->exprv;
  a->o.nname_expressions = (size_t)nexpr;
  a->o.arch = a->arch;
  a->o.program_name = a->program_name;
  find_nvrtc_wheels();
  return 0;
fail:
  compile_args_clear(a);
  return -1;
}

/* Raises the status's exception; a compile error also carries the whole log as `.log`. */
static PyObject *raise_compile_error(dlspy_state *st, dls_status_t rc, const char *pycall) {
  dlspy_raise(st, rc, pycall);
  PyObject *log = PyUnicode_DecodeUTF8(dls_compile_last_log(), (Py_ssize_t)strlen(dls_compile_last_log()), "replace");
  if (log == NULL)
    return NULL;
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *exc = PyErr_GetRaisedException();
  if (exc != NULL && PyObject_SetAttrString(exc, "log", log) != 0)
    PyErr_Clear();
  PyErr_SetRaisedException(exc);
#else
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value != NULL && PyObject_SetAttrString(value, "log", log) != 0)
    PyErr_Clear();
  PyErr_Restore(type, value, tb);
#endif
  Py_DECREF(log);
  return NULL;
}

PyObject *dlspy_module_from_source(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "Module.from_source";
  dlspy_state *st = dlspy_state_of((PyTypeObject *)cls);
  if (st == NULL)
    return PyErr_Format(PyExc_TypeError, "%s: not a dlstream.Module class", pycall);
  static const char *const names[] = {"source", "options", "name_expressions", "device", "arch", "cache",
                                      "program_name", NULL};
  PyObject *a[7];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 1, a) != 0 || dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  DLDevice dev;
  if (dlspy_parse_device(st, a[3], pycall, &dev) != 0)
    return NULL;
  compile_args ca;
  if (compile_args_parse(st, pycall, a[0], a[1], a[2], a[4], a[5], a[6], &ca) != 0)
    return NULL;
  PyObject *key = NULL, *result = NULL;
  const char *env = getenv("DLSTREAM_CACHE");
  bool cached = ca.o.cache == DLS_COMPILE_CACHE_ALL && !(env != NULL && strcmp(env, "0") == 0);
  if (cached) {
    if (g_modules == NULL && (g_modules = PyDict_New()) == NULL)
      goto out;
    key = Py_BuildValue("(OOOiiOO)", ca.source_obj, ca.opts, ca.exprs, (int)dev.device_type, (int)dev.device_id,
                        a[4] ? a[4] : Py_None, a[6] ? a[6] : Py_None);
    if (key == NULL)
      goto out;
    PyObject *hit = PyDict_GetItemWithError(g_modules, key); /* borrowed: the cache's own Module */
    if (hit != NULL) {
      dls_module_t h;
      dls_status_t rc = dls__module_share(((ModuleObject *)hit)->handle, pycall, &h);
      if (rc == DLS_OK) {
        if ((result = dlspy_module_new((PyTypeObject *)cls, h, dev)) != NULL)
          g_module_hits++;
        goto out;
      }
      if (rc != DLS_ERR_INVALID_HANDLE) {
        dlspy_raise(st, rc, pycall);
        goto out;
      }
      if (PyDict_DelItem(g_modules, key) != 0) /* a handle the runtime ended (dls_shutdown): compiled again */
        goto out;
    } else if (PyErr_Occurred()) {
      goto out;
    }
  }
  g_module_misses++;
  dls_module_t h;
  dls_status_t rc;
  atomic_fetch_add(&dlspy_nogil_calls, 1);
  Py_BEGIN_ALLOW_THREADS
  rc = dls_module_compile(dev, ca.source, &ca.o, &h);
  Py_END_ALLOW_THREADS
  atomic_fetch_sub(&dlspy_nogil_calls, 1);
  if (rc != DLS_OK) {
    raise_compile_error(st, rc, pycall);
    goto out;
  }
  if ((result = dlspy_module_new((PyTypeObject *)cls, h, dev)) == NULL || !cached)
    goto out;
  /* The cache keeps a handle of its own on the image: the caller's may be closed. */
  if ((rc = dls__module_share(h, pycall, &h)) != DLS_OK) {
    dlspy_raise(st, rc, pycall);
    Py_CLEAR(result);
    goto out;
  }
  PyObject *own = dlspy_module_new(st->ModuleType, h, dev);
  if (own == NULL || PyDict_SetItem(g_modules, key, own) != 0)
    Py_CLEAR(result);
  Py_XDECREF(own);
out:
  Py_XDECREF(key);
  compile_args_clear(&ca);
  return result;
}

/* compile(source, arch='sm_90', *, options=(), name_expressions=(), cache=True, program_name=None) */
static PyObject *py_compile(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "compile";
  dlspy_state *st = dlspy_state_of_module(m);
  static const char *const names[] = {"source", "arch", "options", "name_expressions", "cache", "program_name", NULL};
  PyObject *a[6];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 2, a) != 0)
    return NULL;
  PyObject *arch_default = NULL;
  if (a[1] == NULL && (a[1] = arch_default = PyUnicode_FromString("sm_90")) == NULL)
    return NULL;
  if (a[1] == Py_None) {
    Py_XDECREF(arch_default);
    return dlspy_type_error(st, "%s(arch=None): name the target, e.g. 'sm_90', 'compute_90' or 'gfx90a'", pycall);
  }
  compile_args ca;
  int prc = compile_args_parse(st, pycall, a[0], a[2], a[3], a[1], a[4], a[5], &ca);
  char arch[64];
  snprintf(arch, sizeof arch, "%s", prc == 0 ? ca.arch : "");
  Py_XDECREF(arch_default); /* ca.arch pointed into it */
  if (prc != 0)
    return NULL;
  void *image = NULL;
  size_t size = 0;
  const char **lowered = ca.o.nname_expressions ? PyMem_Calloc(ca.o.nname_expressions, sizeof *lowered) : NULL;
  PyObject *result = NULL;
  if (ca.o.nname_expressions && lowered == NULL) {
    PyErr_NoMemory();
    goto out;
  }
  ca.o.arch = NULL;
  dls_status_t rc;
  atomic_fetch_add(&dlspy_nogil_calls, 1);
  Py_BEGIN_ALLOW_THREADS
  rc = dls_compile(ca.source, &ca.o, arch, &image, &size, lowered);
  Py_END_ALLOW_THREADS
  atomic_fetch_sub(&dlspy_nogil_calls, 1);
  if (rc != DLS_OK) {
    raise_compile_error(st, rc, pycall);
    goto out;
  }
  /* PTX comes back as text without its NUL. */
  size_t n = size > 0 && memcmp(image, "\x7f" "ELF", size < 4 ? size : 4) != 0 && ((char *)image)[size - 1] == '\0'
                 ? size - 1
                 : size;
  PyObject *bytes = PyBytes_FromStringAndSize(image, (Py_ssize_t)n);
  if (bytes == NULL || ca.o.nname_expressions == 0) {
    result = bytes;
    goto out;
  }
  PyObject *map = PyDict_New();
  for (size_t i = 0; map != NULL && i < ca.o.nname_expressions; i++) {
    PyObject *v = PyUnicode_FromString(lowered[i]);
    if (v == NULL || PyDict_SetItem(map, PyTuple_GET_ITEM(ca.exprs, (Py_ssize_t)i), v) != 0)
      Py_CLEAR(map);
    Py_XDECREF(v);
  }
  result = map ? PyTuple_Pack(2, bytes, map) : NULL;
  Py_DECREF(bytes);
  Py_XDECREF(map);
out:
  dls_compile_free(image);
  PyMem_Free(lowered);
  compile_args_clear(&ca);
  return result;
}

static int compiler_of(dlspy_state *st, PyObject *obj, const char *pycall, dls_compiler_t *out) {
  DLDevice d = dls_cuda(0);
  if (obj != NULL && obj != Py_None && dlspy_parse_device(st, obj, pycall, &d) != 0)
    return -1;
  if (d.device_type != kDLCUDA && d.device_type != kDLROCM) {
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(kind=%R): kernels compile for 'cuda' (NVRTC) or 'rocm' (hipRTC)",
                 pycall, obj);
    return -1;
  }
  *out = d.device_type == kDLCUDA ? DLS_COMPILER_NVRTC : DLS_COMPILER_HIPRTC;
  return 0;
}

static PyObject *py_compiler_version(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  static const char pycall[] = "compiler_version";
  dlspy_state *st = dlspy_state_of_module(m);
  dls_compiler_t c;
  if (nargs > 1)
    return dlspy_type_error(st, "%s() takes at most 1 argument (%zd given)", pycall, nargs);
  if (compiler_of(st, nargs ? args[0] : NULL, pycall, &c) != 0)
    return NULL;
  find_nvrtc_wheels();
  int major, minor;
  dls_status_t rc = dls_compiler_version(c, &major, &minor);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  return Py_BuildValue("(ii)", major, minor);
}

static PyObject *py_compile_stats(PyObject *m, PyObject *unused) {
  dls_compile_stats_t s;
  (void)dls_compile_stats(&s);
  return Py_BuildValue("{sKsKsKsKsKsKsKsK}", "module_hits", g_module_hits, "module_misses", g_module_misses,
                       "memory_hits", (unsigned long long)s.memory_hits, "disk_hits", (unsigned long long)s.disk_hits,
                       "compiles", (unsigned long long)s.compiles, "disk_writes", (unsigned long long)s.disk_writes,
                       "disk_corrupt", (unsigned long long)s.disk_corrupt, "disk_errors",
                       (unsigned long long)s.disk_errors);
}

static PyObject *py_compile_cache_clear(PyObject *m, PyObject *unused) {
  PyObject *old = g_modules;
  g_modules = NULL;
  g_module_hits = g_module_misses = 0;
  Py_XDECREF(old); /* the cache's handles: an image no Module of a caller shares is unloaded here */
  (void)dls_compile_cache_clear();
  Py_RETURN_NONE;
}

PyMethodDef dlspy_compile_methods[] = {
    {"compile", (PyCFunction)(void (*)(void))py_compile, METH_FASTCALL | METH_KEYWORDS,
     "compile($module, source, arch='sm_90', *, options=(), name_expressions=(), cache=True, program_name=None)\n--\n\n"
     "Compiles CUDA C++ (HIP C++ for a 'gfx...' arch) without a GPU: a cubin for 'sm_XY', PTX text for "
     "'compute_XY', a code object for 'gfxNNN'. Returns the image as bytes, or (image, {name expression: lowered "
     "name}) when name_expressions are given. A compile error raises InvalidArgumentError whose message and `.log` "
     "carry the compiler's log; no NVRTC raises UnavailableError saying how to install it."},
    {"compiler_version", (PyCFunction)(void (*)(void))py_compiler_version, METH_FASTCALL,
     "compiler_version($module, kind='cuda', /)\n--\n\nThe run-time compiler's version, (major, minor) (NVRTC for 'cuda', "
     "hipRTC for 'rocm'); UnavailableError, saying how to install it, when there is none."},
    {"_compile_stats", py_compile_stats, METH_NOARGS, "What the kernel caches did (tests and tuning)."},
    {"_compile_cache_clear", py_compile_cache_clear, METH_NOARGS,
     "Drops the in-process kernel caches (modules and images) and zeroes the counters; cache files stay."},
    {NULL, NULL, 0, NULL},
};
