/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream.Module: kernels loaded from an image (cubin, fatbin or PTX) or compiled from source (compile.c), and
 * their functions by name. */
#include "args.h"
#include "errors.h"

#include <string.h>

static PyObject *module_tp_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
  static const char pycall[] = "Module";
  dlspy_state *st = dlspy_state_of(tp);
  static char *kwlist[] = {"image", "device", NULL};
  PyObject *image, *dev_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:Module", kwlist, &image, &dev_obj))
    return NULL;
  DLDevice dev;
  if (dlspy_check_runtime(st, pycall) != 0 || dlspy_parse_device(st, dev_obj, pycall, &dev) != 0)
    return NULL;
  ModuleObject *m = (ModuleObject *)tp->tp_alloc(tp, 0);
  if (m == NULL)
    return NULL;
  m->device = dev;
  dls_status_t rc;
  if (PyUnicode_Check(image) || PyObject_HasAttrString(image, "__fspath__")) {
    PyObject *path = PyOS_FSPath(image), *bytes = NULL;
    if (path == NULL || !PyUnicode_FSConverter(path, &bytes)) {
      Py_XDECREF(path);
      Py_DECREF(m);
      return NULL;
    }
    rc = dls_module_load_file(dev, PyBytes_AS_STRING(bytes), &m->handle);
    Py_DECREF(path);
    Py_DECREF(bytes);
  } else {
    Py_buffer view;
    if (PyObject_GetBuffer(image, &view, PyBUF_SIMPLE) != 0) {
      Py_DECREF(m);
      return dlspy_type_error(st, "Module(image=%R): expected bytes (cubin, fatbin or PTX) or a path", image);
    }
    /* PTX must end with a NUL; binary images ignore one more byte. */
    char *copy = PyMem_Malloc((size_t)view.len + 1);
    if (copy == NULL) {
      PyBuffer_Release(&view);
      Py_DECREF(m);
      return PyErr_NoMemory();
    }
    memcpy(copy, view.buf, (size_t)view.len);
    copy[view.len] = '\0';
    size_t len = (size_t)view.len + 1;
    PyBuffer_Release(&view);
    rc = dls_module_load(dev, copy, len, &m->handle);
    PyMem_Free(copy);
  }
  if (rc != DLS_OK) {
    Py_DECREF(m);
    return dlspy_raise(st, rc, pycall);
  }
  return (PyObject *)m;
}

static void module_dealloc(ModuleObject *m) {
  PyTypeObject *tp = Py_TYPE(m);
  if (m->handle.id != 0 && !atomic_load(&dlspy_dead))
    (void)dls_module_unload(m->handle);
  tp->tp_free(m);
  Py_DECREF(tp);
}

static PyObject *module_function(ModuleObject *m, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames) {
  static const char pycall[] = "Module.function";
  dlspy_state *st = PyType_GetModuleState(cls);
  static const char *const names[] = {"name", "signature", NULL};
  PyObject *a[2];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 2, a) != 0)
    return NULL;
  if (a[0] == NULL || !PyUnicode_Check(a[0]))
    return dlspy_type_error(st, "Module.function(name=%R): expected the kernel's (extern \"C\") name",
                            a[0] ? a[0] : Py_None);
  if (m->handle.id == 0)
    return dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s: the module was closed", pycall);
  Py_ssize_t len;
  const char *name = PyUnicode_AsUTF8AndSize(a[0], &len);
  if (name != NULL && strlen(name) != (size_t)len)
    return dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(name=%R): the name contains a NUL character", pycall, a[0]);
  if (name == NULL || dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  dls_function_t h;
  dls_status_t rc = dls_module_function(m->handle, name, &h);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  return dlspy_function_new(st, h, m->device, (PyObject *)m, name, a[1], pycall);
}

static PyObject *module_close(ModuleObject *m, PyObject *unused) {
  if (m->handle.id != 0) {
    dls_module_t h = m->handle;
    m->handle.id = 0;
    if (!atomic_load(&dlspy_dead))
      (void)dls_module_unload(h);
  }
  Py_RETURN_NONE;
}

static PyObject *module_enter(PyObject *m, PyObject *unused) { return Py_NewRef(m); }
static PyObject *module_exit(ModuleObject *m, PyObject *const *args, Py_ssize_t nargs) { return module_close(m, NULL); }
static PyObject *module_get_device(ModuleObject *m, void *c) { return dlspy_device_str(m->device); }
static PyObject *module_get_closed(ModuleObject *m, void *c) { return PyBool_FromLong(m->handle.id == 0); }

static PyMethodDef module_methods[] = {
    {"function", (PyCFunction)(void (*)(void))module_function, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "function($self, name, signature=None)\n--\n\n"
     "A kernel by name, as a Function. The optional signature ('p,cp,u64,f32' ...) converts Python ints and floats to the C types "
     "the kernel takes: p and cp are pointers (tensors, int addresses, None; cp is read-only), i32 u32 i64 u64 f32 "
     "f64 scalars, bytes a struct passed by value."},
    {"get_function", (PyCFunction)(void (*)(void))module_function, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "get_function($self, name, signature=None)\n--\n\nThe same as function() (CuPy's spelling)."},
    /* Module.from_source: compile.c. */
    {"from_source", (PyCFunction)(void (*)(void))dlspy_module_from_source, METH_CLASS | METH_FASTCALL | METH_KEYWORDS,
     "from_source($type, source, *, options=(), name_expressions=(), device=None, arch=None, cache=True, "
     "program_name=None)\n--\n\n"
     "Compiles CUDA C++ with NVRTC (hipRTC on ROCm) for the device and loads it. Name expressions (\"scale<float>\") "
     "become names function() accepts. Compiled images are cached in process and on disk; a repeat loads nothing: it "
     "returns a Module of its own on the image loaded before, which the caller may close without touching any other "
     "(cache=False: a Module whose close() unloads its image)."},
    {"close", (PyCFunction)module_close, METH_NOARGS,
     "close($self, /)\n--\n\nEnds the module: its functions go stale. Its image is unloaded unless another Module "
     "shares it (from_source's cache keeps one)."},
    {"__enter__", module_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))module_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef module_getset[] = {
    {"device", (getter)module_get_device, NULL, "The device it was loaded on.", NULL},
    {"closed", (getter)module_get_closed, NULL, "Whether close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot module_slots[] = {
    {Py_tp_doc, "Module(image, device=None)\n--\n\nKernels from a cubin, fatbin or PTX image (bytes) or file (path)."},
    {Py_tp_new, module_tp_new},
    {Py_tp_dealloc, module_dealloc},
    {Py_tp_methods, module_methods},
    {Py_tp_getset, module_getset},
    {0, NULL},
};

PyType_Spec dlspy_module_spec = {
    .name = "dlstream.Module",
    .basicsize = sizeof(ModuleObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = module_slots,
};
