/* SPDX-License-Identifier: Apache-2.0 */
/* The built-ins' table for Python (_builtins: what tests and dlstream.torch read of it) and the built-ins' own
 * checks run on arrays described by shape and type (_builtin_check: dlstream.jax at trace time). */
#include <string.h>

#include "dlspy.h"
#include "errors.h"

/* The table's rule of a memory argument's element types: ("exact", code, bits), ("int", bits), ("sized", index of
 * its size argument), ("desc", index of its descriptor); None for a scalar. */
static PyObject *rule_of(uint32_t what) {
  uint32_t kind = what >> 24, t = what & 0xfffffu, rule = (t >> 16) & 0xfu, p = t & 0xffffu;
  if (kind != 0x10u && kind != 0x11u) /* not memory: DLS__ARG_MEM_P, DLS__ARG_MEM_CP */
    Py_RETURN_NONE;
  switch (rule) {
  case 1: return Py_BuildValue("(sII)", "exact", p >> 8, p & 0xffu);
  case 2: return Py_BuildValue("(sI)", "int", p);
  case 3: return Py_BuildValue("(sI)", "sized", p);
  case 4: return Py_BuildValue("(sI)", "desc", p);
  default: Py_RETURN_NONE;
  }
}

static PyObject *arg_dict(size_t k, size_t i) {
  const char *name, *token;
  uint32_t what;
  char types[96];
  dls__builtin_describe_arg(k, i, &name, &token, &what, types, sizeof types);
  bool memory = strcmp(token, "p") == 0 || strcmp(token, "cp") == 0;
  return Py_BuildValue("{sssssssNsNsNsN}", "name", name, "kind", token, "types", memory ? types : "", "rule",
                       rule_of(what), "ordered_as_read", PyBool_FromLong((what & 0x100000u) != 0), "count",
                       PyBool_FromLong(!memory && (what & 0x200000u) != 0), "struct",
                       !memory && types[0] ? PyUnicode_FromString(types) : Py_NewRef(Py_None));
}

const char *dlspy_builtin_signature(const char *name, char *buf, size_t size) {
  const char *n, *gpu;
  size_t nargs;
  for (size_t k = 0; dls__builtin_describe(k, &n, &gpu, &nargs); k++) {
    if (strcmp(n, name) != 0)
      continue;
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < nargs && used < size; i++) {
      const char *an, *token;
      uint32_t what;
      char types[8];
      dls__builtin_describe_arg(k, i, &an, &token, &what, types, sizeof types);
      used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? "," : "", token);
    }
    return buf;
  }
  return NULL;
}

/* _builtins() -> ({"name": "dls_fill", "gpu_symbol": "dls_fill", "signature": "p,u64,u32,u64",
 *                  "args": ({"name": "dst", "kind": "p", "types": "any type of elem_size bytes",
 *                            "rule": ("sized", 2), "ordered_as_read": False, "count": False, "struct": None},
 *                           ...)}, ...) */
static PyObject *py_builtins(PyObject *m, PyObject *unused) {
  (void)m, (void)unused;
  PyObject *out = PyList_New(0);
  const char *name, *gpu;
  size_t nargs;
  for (size_t k = 0; out != NULL && dls__builtin_describe(k, &name, &gpu, &nargs); k++) {
    char sig[DLS_MAX_ARGS * 8];
    PyObject *args = PyTuple_New((Py_ssize_t)nargs);
    for (size_t i = 0; args != NULL && i < nargs; i++) {
      PyObject *a = arg_dict(k, i);
      if (a == NULL)
        Py_CLEAR(args);
      else
        PyTuple_SET_ITEM(args, (Py_ssize_t)i, a);
    }
    PyObject *d = args ? Py_BuildValue("{sssssssN}", "name", name, "gpu_symbol", gpu, "signature",
                                       dlspy_builtin_signature(name, sig, sizeof sig), "args", args)
                       : NULL;
    if (d == NULL || PyList_Append(out, d) != 0)
      Py_CLEAR(out);
    Py_XDECREF(d);
  }
  if (out == NULL)
    return NULL;
  PyObject *t = PyList_AsTuple(out);
  Py_DECREF(out);
  return t;
}

/* One argument of _builtin_check: bytes are a value (as the XLA handler passes it), (nbytes, code, bits, lanes)
 * an array of that many dense bytes at an address of its own. */
static int check_arg(dlspy_state *st, PyObject *o, Py_ssize_t i, dls_arg_t *out, dls__ext_extent *ext) {
  *ext = (dls__ext_extent){.lo = 1, .hi = 0};
  if (PyBytes_Check(o) && PyBytes_GET_SIZE(o) > 0 && PyBytes_GET_SIZE(o) <= DLS_MAX_ARG_BYTES) {
    *out = dls_arg_bytes(PyBytes_AS_STRING(o), (uint32_t)PyBytes_GET_SIZE(o));
    return 0;
  }
  unsigned long long n = 0;
  unsigned code = 0, bits = 0, lanes = 0;
  if (!PyTuple_Check(o) || !PyArg_ParseTuple(o, "KIII", &n, &code, &bits, &lanes) || n > INT64_MAX || code > 255 ||
      bits > 255 || lanes > 65535) {
    PyErr_Clear();
    dlspy_type_error(st, "_builtin_check(args[%zd]=%R): expected bytes or (nbytes, code, bits, lanes)", i, o);
    return -1;
  }
  /* Arrays at addresses 2**40 apart, aligned to any element: XLA's buffers never share bytes. */
  *out = dls_arg_ptr((void *)(uintptr_t)((uint64_t)(i + 1) << 40));
  *ext = (dls__ext_extent){0, (int64_t)n, {(uint8_t)code, (uint8_t)bits, (uint16_t)lanes}};
  return 0;
}

/* _builtin_check(handle, call, args): the checks a launch of the built-in `handle` makes (argument kinds, element
 * types, counts inside each array, descriptors), on arrays described by their sizes and types; raises the
 * launch's error naming `call`. */
static PyObject *py_builtin_check(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  if (nargs != 3 || !PyLong_Check(args[0]) || !PyUnicode_Check(args[1]) || !PyTuple_Check(args[2]))
    return dlspy_type_error(st, "_builtin_check(handle, call, args): an int, a str and a tuple");
  uint64_t handle = PyLong_AsUnsignedLongLong(args[0]);
  const char *call = PyUnicode_AsUTF8(args[1]);
  if ((handle == (uint64_t)-1 && PyErr_Occurred()) || call == NULL)
    return NULL;
  Py_ssize_t n = PyTuple_GET_SIZE(args[2]);
  if (n > DLS_MAX_ARGS)
    return dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s: at most %d arguments", call, DLS_MAX_ARGS);
  dls_arg_t argv[DLS_MAX_ARGS];
  dls__ext_extent ext[DLS_MAX_ARGS];
  for (Py_ssize_t i = 0; i < n; i++)
    if (check_arg(st, PyTuple_GET_ITEM(args[2], i), i, &argv[i], &ext[i]) != 0)
      return NULL;
  dls_function_t fh = {handle};
  dls__function *fn = dls__ext_function(fh);
  if (fn == NULL)
    return dlspy_raisef(st, dls__ext_function_stale(fh, call), "%s", dls_last_error());
  bool overlap;
  dls_status_t rc = dls__builtin_check(call, fn, argv, (size_t)n, dls__ext_extents(ext), &overlap);
  if (rc != DLS_OK)
    return dlspy_raisef(st, rc, "%s", dls_last_error());
  Py_RETURN_NONE;
}

PyMethodDef dlspy_builtin_table_methods[] = {
    {"_builtins", py_builtins, METH_NOARGS,
     "The built-ins' table: each one's name, signature and arguments with the element types they take."},
    {"_builtin_check", (PyCFunction)(void (*)(void))py_builtin_check, METH_FASTCALL,
     "_builtin_check(handle, call, args): a built-in launch's checks on arrays given as (nbytes, code, bits, "
     "lanes) and values as bytes (dlstream.jax's trace-time checks)."},
    {NULL, NULL, 0, NULL},
};
