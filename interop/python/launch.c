/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream.Function: a kernel of a Module or a built-in, its typed signature, and the launch hot path. */
#include "call/launchplan.h"

#include <math.h>
#include <string.h>

#include "args.h"
#include "errors.h"
#include "call/tensorarg.h"

enum { SIG_NONE = 0, SIG_P, SIG_CP, SIG_I32, SIG_U32, SIG_I64, SIG_U64, SIG_F32, SIG_F64, SIG_BYTES };

static const struct {
  const char *token;
  uint8_t kind;
} g_sig_tokens[] = {
    {"p", SIG_P},       {"ptr", SIG_P},     {"cp", SIG_CP},     {"i32", SIG_I32},   {"int", SIG_I32},
    {"u32", SIG_U32},   {"i64", SIG_I64},   {"u64", SIG_U64},   {"size_t", SIG_U64}, {"f32", SIG_F32},
    {"float", SIG_F32}, {"f64", SIG_F64},   {"double", SIG_F64}, {"b", SIG_BYTES},  {"bytes", SIG_BYTES},
};

static const char *sig_name(uint8_t k) {
  static const char *const names[] = {"any", "p", "cp", "i32", "u32", "i64", "u64", "f32", "f64", "bytes"};
  return k < sizeof names / sizeof names[0] ? names[k] : "?";
}

/* "p, p, u64, f32" or a sequence of tokens. */
static int parse_signature(dlspy_state *st, PyObject *obj, const char *pycall, FunctionObject *f) {
  f->nsig = -1;
  f->nmin = 0;
  f->nspan = DLS_MAX_ARGS;
  f->last.slots = ~(uint64_t)0;
  if (obj == NULL || obj == Py_None)
    return 0;
  PyObject *parts;
  if (PyUnicode_Check(obj)) {
    PyObject *comma = PyUnicode_FromString(",");
    parts = comma ? PyUnicode_Split(obj, comma, -1) : NULL;
    Py_XDECREF(comma);
    if (parts != NULL && PyList_GET_SIZE(parts) == 1) {
      PyObject *s = PyObject_CallMethod(PyList_GET_ITEM(parts, 0), "strip", NULL);
      if (s != NULL && PyUnicode_GET_LENGTH(s) == 0) {
        Py_DECREF(parts);
        parts = PyList_New(0); /* "" : no arguments */
      }
      Py_XDECREF(s);
    }
  } else {
    parts = PySequence_List(obj);
  }
  if (parts == NULL) {
    PyErr_Clear();
    dlspy_type_error(st, "%s(signature=%R): expected a string like 'p,p,u64,f32' or a list of tokens", pycall, obj);
    return -1;
  }
  Py_ssize_t n = PyList_GET_SIZE(parts);
  if (n > DLS_MAX_ARGS) {
    Py_DECREF(parts);
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(signature=%R): at most %d arguments", pycall, obj, DLS_MAX_ARGS);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *tok = PyList_GET_ITEM(parts, i);
    PyObject *s = PyUnicode_Check(tok) ? PyObject_CallMethod(tok, "strip", NULL) : NULL;
    const char *c = s ? PyUnicode_AsUTF8(s) : NULL;
    uint8_t kind = 0;
    for (size_t k = 0; c && k < sizeof g_sig_tokens / sizeof g_sig_tokens[0]; k++)
      if (strcmp(c, g_sig_tokens[k].token) == 0)
        kind = g_sig_tokens[k].kind;
    if (kind == 0) {
      PyErr_Clear();
      dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT,
                   "%s(signature=%R): token %zd %R is not one of p, cp, i32, u32, i64, u64, f32, f64, bytes", pycall,
                   obj, i, s ? s : tok);
      Py_XDECREF(s);
      Py_DECREF(parts);
      return -1;
    }
    Py_DECREF(s);
    f->sig[i] = kind;
  }
  f->nsig = (int)n;
  f->nmin = (int)n;
  f->nspan = 0;
  f->last.slots = 0;
  for (Py_ssize_t i = 0; i < n; i++)
    if (f->sig[i] == SIG_P || f->sig[i] == SIG_CP)
      f->last.slots |= (uint64_t)1 << i;
  Py_DECREF(parts);
  return 0;
}

PyObject *dlspy_function_new(dlspy_state *st, dls_function_t h, DLDevice dev, PyObject *module, const char *name,
                             PyObject *signature, const char *pycall) {
  FunctionObject *f = (FunctionObject *)st->FunctionType->tp_alloc(st->FunctionType, 0);
  if (f == NULL)
    return NULL;
  f->handle = h;
  f->device = dev;
  f->st = st;
  f->module = Py_XNewRef(module);
  dlspy_plan_clear(f);
  f->last.st = st;
  f->last.values = f->memo_obj;
  f->last.conv = f->memo_arg;
  f->last.nvalues = MEMO_ARGS;
  snprintf(f->name, sizeof f->name, "%s", name);
  if (parse_signature(st, signature, pycall, f) != 0) {
    Py_DECREF(f);
    return NULL;
  }
  /* What a read-only refusal suggests: a signature, or 'cp' in the user's own. */
  f->desc = dlspy_call_plain;
  f->desc.hint = f->nsig < 0 ? DLSPY_HINT_NO_SIGNATURE : DLSPY_HINT_SIGNATURE;
  f->desc.writer = f->name;
  return (PyObject *)f;
}

/* ---- argument conversion ---- */

static int as_u64(PyObject *o, unsigned long long *out, bool is_signed, long long *sout) {
  PyObject *i = PyLong_Check(o) ? Py_NewRef(o) : PyNumber_Index(o);
  if (i == NULL)
    return -1;
  int overflow = 0;
  if (is_signed) {
    *sout = PyLong_AsLongLongAndOverflow(i, &overflow);
  } else {
    *out = PyLong_AsUnsignedLongLong(i);
    if (*out == (unsigned long long)-1 && PyErr_Occurred()) {
      PyErr_Clear();
      overflow = 1;
    }
  }
  Py_DECREF(i);
  return overflow ? 1 : 0;
}

static int convert_scalar(dlspy_state *st, PyObject *o, uint8_t kind, int i, const char *pycall, dls_arg_t *a) {
  /* The common cases first: an exact float for a float, an exact int that fits for an integer. */
  if (PyFloat_CheckExact(o) && (kind == SIG_F32 || kind == SIG_F64)) {
    double d = PyFloat_AS_DOUBLE(o);
    if (kind == SIG_F32 && isinf((float)d) && isfinite(d))
      goto range_error; /* a finite double beyond float32 would silently become an infinity */
    *a = kind == SIG_F32 ? dls_arg_f32((float)d) : dls_arg_f64(d);
    return 0;
  }
  if (PyLong_CheckExact(o) && kind >= SIG_I32 && kind <= SIG_U64) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    bool fits = !overflow && (kind == SIG_I64 ? true
                              : kind == SIG_I32 ? v >= INT32_MIN && v <= INT32_MAX
                              : kind == SIG_U32 ? v >= 0 && v <= UINT32_MAX
                                                : v >= 0);
    if (fits) {
      *a = kind == SIG_I32 ? dls_arg_i32((int32_t)v)
           : kind == SIG_I64 ? dls_arg_i64(v)
           : kind == SIG_U32 ? dls_arg_u32((uint32_t)v)
                             : dls_arg_u64((uint64_t)v);
      return 0;
    }
    PyErr_Clear(); /* the general path below tells out of range from wrong */
  }
  if (PyFloat_Check(o) && kind >= SIG_I32 && kind <= SIG_U64)
    goto type_error;
  switch (kind) {
  case SIG_F32:
  case SIG_F64: {
    double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) {
      if (PyErr_ExceptionMatches(PyExc_OverflowError))
        goto range_error;
      goto type_error; /* what __float__ raised is the cause */
    }
    if (kind == SIG_F32 && isinf((float)d) && isfinite(d))
      goto range_error;
    *a = kind == SIG_F32 ? dls_arg_f32((float)d) : dls_arg_f64(d);
    return 0;
  }
  case SIG_I32:
  case SIG_I64: {
    long long v = 0;
    int rc = as_u64(o, NULL, true, &v);
    if (rc < 0)
      goto type_error;
    if (rc > 0 || (kind == SIG_I32 && (v < INT32_MIN || v > INT32_MAX)))
      goto range_error;
    *a = kind == SIG_I32 ? dls_arg_i32((int32_t)v) : dls_arg_i64(v);
    return 0;
  }
  case SIG_U32:
  case SIG_U64: {
    unsigned long long v = 0;
    int rc = as_u64(o, &v, false, NULL);
    if (rc < 0)
      goto type_error;
    if (rc > 0 || (kind == SIG_U32 && v > UINT32_MAX))
      goto range_error;
    *a = kind == SIG_U32 ? dls_arg_u32((uint32_t)v) : dls_arg_u64(v);
    return 0;
  }
  default:
    break;
  }
type_error:
  dlspy_type_error(st, "%s(args[%d]=%R): expected %s for a %s argument", pycall, i, o,
                   kind == SIG_F32 || kind == SIG_F64 ? "a number" : "an int", sig_name(kind));
  return -1;
range_error:
  dlspy_range_error(st, "%s(args[%d]=%R): out of range for a %s argument (%s)", pycall, i, o, sig_name(kind),
                    kind == SIG_I32   ? "-2147483648 to 2147483647"
                    : kind == SIG_U32 ? "0 to 4294967295"
                    : kind == SIG_I64 ? "-2**63 to 2**63 - 1"
                    : kind == SIG_U64 ? "0 to 2**64 - 1"
                                      : "a finite float32 is at most about 3.4e38");
  return -1;
}

/* One argument of a launch. `kind` SIG_NONE infers it from the object. */
static int convert_arg(dlspy_call *c, PyObject *o, uint8_t kind, int i, dls_arg_t *a) {
  PyTypeObject *tp = Py_TYPE(o);
  if (kind == SIG_NONE) {
    if (tp == &PyLong_Type || tp == &PyBool_Type)
      return convert_scalar(c->st, o, SIG_I64, i, c->pycall, a);
    if (tp == &PyFloat_Type)
      return convert_scalar(c->st, o, SIG_F64, i, c->pycall, a);
    if (PyBytes_Check(o))
      kind = SIG_BYTES;
    else
      kind = SIG_P;
  }
  if (kind == SIG_P || kind == SIG_CP) {
    if (o == Py_None) {
      *a = dls_arg_ptr(NULL);
      return 0;
    }
    if (tp == &PyLong_Type) { /* a raw device address: 0 to 2**64 - 1, nothing wraps */
      uint64_t p;
      char arg[24];
      snprintf(arg, sizeof arg, "args[%d]", i);
      if (dlspy_as_uint(c->st, o, c->pycall, arg, "an address", 0, UINT64_MAX, &p) != 0)
        return -1;
      *a = dls_arg_ptr((void *)(uintptr_t)p);
      return 0;
    }
    int rc = dlspy_call_arg(c, o, i, kind == SIG_CP, a);
    if (rc > 0) {
      char what[96];
      snprintf(what, sizeof what, "a tensor (DLPack), an int address or None for a %s argument", sig_name(kind));
      dlspy_call_not_tensor(c, o, i, what);
    }
    return rc == 0 ? 0 : -1;
  }
  if (kind == SIG_BYTES) {
    if (!PyBytes_Check(o) || PyBytes_GET_SIZE(o) == 0 || PyBytes_GET_SIZE(o) > DLS_MAX_ARG_BYTES) {
      dlspy_type_error(c->st, "%s(args[%d]=%R): expected non-empty bytes (at most %d) for a bytes argument",
                       c->pycall, i, o, DLS_MAX_ARG_BYTES);
      return -1;
    }
    *a = dls_arg_bytes(PyBytes_AS_STRING(o), (uint32_t)PyBytes_GET_SIZE(o));
    return 0;
  }
  return convert_scalar(c->st, o, kind, i, c->pycall, a);
}

/* A grid or block: an int or a tuple of 1 to 3 ints (NumPy integers too), each 1 to 2**32 - 1 (the C type; the
 * device's own limits, such as 1024 threads a block on CUDA, are the driver's to refuse). */
static int parse_dims(dlspy_state *st, PyObject *o, const char *what, uint32_t out[3]) {
  static const char pycall[] = "Function.launch";
  out[0] = out[1] = out[2] = 1;
  bool tuple = PyTuple_Check(o);
  if (tuple && (PyTuple_GET_SIZE(o) < 1 || PyTuple_GET_SIZE(o) > 3)) {
    dlspy_type_error(st, "%s(%s=%R): expected an int or a tuple of 1 to 3 ints", pycall, what, o);
    return -1;
  }
  Py_ssize_t n = tuple ? PyTuple_GET_SIZE(o) : 1;
  for (Py_ssize_t i = 0; i < n; i++) {
    char arg[24];
    if (tuple)
      snprintf(arg, sizeof arg, "%s[%zd]", what, i);
    else
      snprintf(arg, sizeof arg, "%s", what);
    uint64_t v;
    if (dlspy_as_uint(st, tuple ? PyTuple_GET_ITEM(o, i) : o, pycall, arg, "a dimension", 1, UINT32_MAX, &v) != 0)
      return -1;
    out[i] = (uint32_t)v;
  }
  return 0;
}

/* Whether a grid or block object may be remembered: an exact int, or a tuple of exact ints (immutable: the same
 * object converts the same way). */
static bool dims_memo_ok(PyObject *o) {
  if (PyLong_CheckExact(o))
    return true;
  if (!PyTuple_CheckExact(o))
    return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++)
    if (!PyLong_CheckExact(PyTuple_GET_ITEM(o, i)))
      return false;
  return true;
}

/* The launch configuration's grid and block, the last ones remembered. */
static int launch_dims(FunctionObject *f, PyObject *grid, PyObject *block, dls_launch_config_t *cfg) {
  if (dlspy_same_value(grid, f->memo_grid) && dlspy_same_value(block, f->memo_block)) {
    memcpy(cfg->grid, f->memo_cfg.grid, sizeof cfg->grid);
    memcpy(cfg->block, f->memo_cfg.block, sizeof cfg->block);
    return 0;
  }
  if (parse_dims(f->st, grid, "grid", cfg->grid) != 0 || parse_dims(f->st, block, "block", cfg->block) != 0)
    return -1;
  if (dims_memo_ok(grid) && dims_memo_ok(block)) {
    Py_XSETREF(f->memo_grid, Py_NewRef(grid));
    Py_XSETREF(f->memo_block, Py_NewRef(block));
    memcpy(f->memo_cfg.grid, cfg->grid, sizeof cfg->grid);
    memcpy(f->memo_cfg.block, cfg->block, sizeof cfg->block);
    f->memo_cfg.shared_mem_bytes = 0;
  }
  return 0;
}

/* The kernel's arguments. A scalar that is the object the last launch passed in its place takes the last
 * conversion; a tensor of the type whose framework's current stream the call runs on takes the short way. */
static int launch_args(FunctionObject *f, dlspy_call *c, PyObject *const *uargs, Py_ssize_t n, dls_arg_t *argv,
                       uint64_t *taken) {
  *taken = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *o = uargs[i];
    uint8_t kind = f->sig[i]; /* SIG_NONE without a signature: the object was zeroed */
    if (kind == SIG_P || kind == SIG_CP) {
      int rc = dlspy_call_fast_arg(c, o, (int)i, &argv[i]);
      if (rc <= 0) {
        if (rc < 0)
          return -1;
        *taken |= (uint64_t)1 << i;
        continue;
      }
    }
    if (i < MEMO_ARGS && dlspy_same_value(o, f->memo_obj[i])) {
      argv[i] = f->memo_arg[i];
      continue;
    }
    if (convert_arg(c, o, kind, (int)i, &argv[i]) != 0)
      return -1;
    if (i < MEMO_ARGS && (PyLong_CheckExact(o) || PyFloat_CheckExact(o))) {
      Py_XSETREF(f->memo_obj[i], Py_NewRef(o));
      f->memo_arg[i] = argv[i];
      if (f->plan.check != NULL && ((f->plan.scalars >> i) & 1)) {
        f->plan.check->args[i] = argv[i]; /* what a planned built-in's check reads for the scalar it remembers */
        f->plan.check->passed = false;
      }
    }
  }
  return 0;
}

/* The general way of launch(grid, block, *args, stream=None, shared_mem=0) with `n` kernel arguments (n + 2
 * positional ones): `c` has read the arguments already when `read` (a call the plan was tried on: no keywords, the
 * remembered grid and block, a valid count). */
static PyObject *launch_general(FunctionObject *f, PyObject *const *args, Py_ssize_t n, PyObject *kwnames,
                                dlspy_call *c, bool read) {
  static const char pycall[] = "Function.launch";
  dlspy_state *st = f->st;
  Py_ssize_t nargs = n + 2;
  PyObject *stream = NULL, *shared = NULL;
  if (kwnames != NULL) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
      PyObject *key = PyTuple_GET_ITEM(kwnames, k);
      if (key == st->s_stream || PyUnicode_CompareWithASCIIString(key, "stream") == 0)
        stream = args[nargs + k];
      else if (PyUnicode_CompareWithASCIIString(key, "shared_mem") == 0)
        shared = args[nargs + k];
      else
        return dlspy_type_error(st, "%s() got an unexpected keyword argument '%U'", pycall, key);
    }
  }
  if (nargs < 2)
    return dlspy_type_error(st, "%s() needs grid and block before the kernel's arguments", pycall);
  PyObject *const *uargs = args + 2;
  if (f->nsig >= 0 && n != f->nsig)
    return dlspy_type_error(st, "%s: kernel \"%s\" takes %d argument%s by its signature, %zd given", pycall, f->name,
                            f->nsig, f->nsig == 1 ? "" : "s", n);
  if (n > DLS_MAX_ARGS)
    return dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s: at most %d kernel arguments, %zd given", pycall,
                        DLS_MAX_ARGS, n);
  dls_launch_config_t cfg;
  if (launch_dims(f, args[0], args[1], &cfg) != 0)
    return NULL;
  cfg.shared_mem_bytes = 0;
  if (shared != NULL) {
    uint64_t v;
    if (dlspy_as_uint(st, shared, pycall, "shared_mem", "dynamic shared memory in bytes", 0, UINT32_MAX, &v) != 0)
      return NULL;
    cfg.shared_mem_bytes = (uint32_t)v;
  }
  if (!read) {
    dlspy_call_init(c, st, pycall, &f->desc, f->last.slots);
    if (dlspy_call_read(c, stream, &f->device, uargs, n) != 0)
      return NULL;
  }
  dlspy_call_fast_check(c, uargs, n);
  dlspy_call_hold(c); /* from here on Python code may run */
  dls_arg_t argv[DLS_MAX_ARGS];
  dls__ext_extent extents[DLS_MAX_ARGS];
  if (f->builtin) { /* its arguments are checked: pointers need their extents */
    c->extents = extents;
    c->nextents = (int)n;
    c->extents_set = false;
  }
  uint64_t taken = 0;
  bool ok = launch_args(f, c, uargs, n, argv, &taken) == 0;
  if (ok) {
    dls__function *fn = dls__ext_function(f->handle);
    dls_status_t rc = fn != NULL ? dls__launch_ext(pycall, fn, c->s, &cfg, argv, (size_t)n,
                                                   c->extents ? dls__ext_extents(dlspy_call_extents(c)) : NULL)
                                 : dls__ext_function_stale(f->handle, pycall);
    if (fn == NULL && (f->handle.id == 0 || (f->module && !dlspy_module_open(f->module))))
      dlspy_raisef(st, rc, "%s: the function's module was closed", pycall);
    else if (rc != DLS_OK)
      dlspy_raisef(st, rc, "%s", dls_last_error());
    ok = rc == DLS_OK;
  }
  if (ok && kwnames == NULL)
    dlspy_plan_note(f, c, args, nargs, taken); /* before dlspy_call_end: it reads the call's choices */
  if (dlspy_call_end(c, ok) != 0 || !ok)
    return NULL;
  Py_RETURN_NONE;
}

/* launch(grid, block, *args, stream=None, shared_mem=0): the hot path. No Python object and no dlstream handle is
 * made per call when the tensors' type offers the DLPack C exchange API and the stream is the framework's. A call
 * that may be shaped like the last one (no keywords, the remembered grid and block, a count the kernel takes, a last
 * tensor type) is read by the read pass's common case and launched by the plan when its table is the plan's; else
 * the general way goes on from that read. */
static PyObject *function_launch(FunctionObject *f, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames) {
  Py_ssize_t n = PyVectorcall_NARGS(nargsf) - 2; /* the kernel's (nothing else is kept across the read pass) */
  dlspy_call c;
  if (kwnames != NULL || f->last.type.type == NULL || (size_t)(n - f->nmin) > (size_t)f->nspan ||
      !dlspy_same_value(args[0], f->memo_grid) || !dlspy_same_value(args[1], f->memo_block))
    return launch_general(f, args, n, kwnames, &c, false);
  int rc = dlspy_plan_launch(f, &c, args, n);
  if (rc <= 0)
    return rc == 0 ? Py_NewRef(Py_None) : NULL;
  return launch_general(f, args, n, NULL, &c, true);
}

static void function_dealloc(FunctionObject *f) {
  PyTypeObject *tp = Py_TYPE(f);
  Py_CLEAR(f->module); /* functions of a module go with it; built-ins belong to the runtime */
  Py_CLEAR(f->memo_grid);
  Py_CLEAR(f->memo_block);
  for (int i = 0; i < MEMO_ARGS; i++)
    Py_CLEAR(f->memo_obj[i]);
  dlspy_plan_forget(f);
  tp->tp_free(f);
  Py_DECREF(tp);
}

static PyObject *function_get_name(FunctionObject *f, void *c) { return PyUnicode_FromString(f->name); }
static PyObject *function_get_device(FunctionObject *f, void *c) { return dlspy_device_str(f->device); }
static PyObject *function_get_handle(FunctionObject *f, void *c) { return PyLong_FromUnsignedLongLong(f->handle.id); }
static PyObject *function_get_planned(FunctionObject *f, void *c) { return PyBool_FromLong(f->plan.n >= 0); }
static PyObject *function_get_builtin(FunctionObject *f, void *c) { return PyBool_FromLong(f->builtin); }
static PyObject *function_get_signature(FunctionObject *f, void *c) {
  if (f->nsig < 0)
    Py_RETURN_NONE;
  char buf[DLS_MAX_ARGS * 8] = "";
  size_t n = 0;
  for (int i = 0; i < f->nsig; i++)
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", i ? "," : "", sig_name(f->sig[i]));
  return PyUnicode_FromString(buf);
}

static PyObject *function_repr(FunctionObject *f) {
  char dev[32];
  PyObject *sig = function_get_signature(f, NULL);
  PyObject *r = sig ? PyUnicode_FromFormat("dlstream.Function('%s', device='%s', signature=%R)", f->name,
                                          dls_device_str(f->device, dev, sizeof dev), sig)
                    : NULL;
  Py_XDECREF(sig);
  return r;
}

static PyMethodDef function_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))function_launch, METH_FASTCALL | METH_KEYWORDS,
     "launch($self, grid, block, *args, stream=None, shared_mem=0)\n--\n\n"
     "Queues the kernel with `args` converted by the function's signature. grid and block are ints or tuples of "
     "up to 3 ints; shared_mem is dynamic shared memory in bytes. Tensor arguments go through DLPack.\n\n"
     DLSPY_ASYNC_DOC},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef function_getset[] = {
    {"name", (getter)function_get_name, NULL, "The kernel's name.", NULL},
    {"device", (getter)function_get_device, NULL, "The device it runs on.", NULL},
    {"handle", (getter)function_get_handle, NULL, "The dlstream handle.", NULL},
    {"signature", (getter)function_get_signature, NULL, "The argument kinds, or None.", NULL},
    {"_planned", (getter)function_get_planned, NULL, "Whether a call shaped like the last takes its launch plan.", NULL},
    {"_builtin", (getter)function_get_builtin, NULL, "Whether it is a built-in (its launches are checked).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot function_slots[] = {
    {Py_tp_doc, "A kernel of a Module (Module.function) or a built-in (dlstream.builtin_function)."},
    {Py_tp_dealloc, function_dealloc},
    {Py_tp_methods, function_methods},
    {Py_tp_getset, function_getset},
    {Py_tp_repr, function_repr},
    {0, NULL},
};

PyType_Spec dlspy_function_spec = {
    .name = "dlstream.Function",
    .basicsize = sizeof(FunctionObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = function_slots,
};

/* ---- built-in functions ---- */

PyObject *dlspy_builtin_function(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "builtin_function";
  dlspy_state *st = dlspy_state_of_module(module);
  static const char *const names[] = {"name", "device", "signature", NULL};
  PyObject *a[3];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 3, a) != 0)
    return NULL;
  if (a[0] == NULL || !PyUnicode_Check(a[0]))
    return dlspy_type_error(st, "builtin_function(name=%R): expected the built-in's name, e.g. 'dls_axpy_f32'",
                            a[0] ? a[0] : Py_None);
  Py_ssize_t len;
  const char *name = PyUnicode_AsUTF8AndSize(a[0], &len);
  if (name != NULL && strlen(name) != (size_t)len)
    return dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(name=%R): the name contains a NUL character", pycall, a[0]);
  DLDevice dev;
  if (name == NULL || dlspy_check_runtime(st, pycall) != 0 || dlspy_parse_device(st, a[1], pycall, &dev) != 0)
    return NULL;
  dls_function_t h;
  dls_status_t rc = dls_builtin_function(dev, name, &h);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  PyObject *sig = a[2];
  PyObject *dflt = NULL;
  if (sig == NULL || sig == Py_None) {
    char buf[DLS_MAX_ARGS * 8];
    const char *s = dlspy_builtin_signature(name, buf, sizeof buf);
    if (s != NULL && (dflt = PyUnicode_FromString(s)) == NULL)
      return NULL;
    sig = dflt;
  }
  PyObject *f = dlspy_function_new(st, h, dev, NULL, name, sig, pycall);
  Py_XDECREF(dflt);
  if (f != NULL) {
    ((FunctionObject *)f)->builtin = true;
    if (dflt != NULL) /* the signature the built-in carries (the user gave none): nothing, the built-in writes it */
      ((FunctionObject *)f)->desc.hint = DLSPY_HINT_WRITES;
  }
  return f;
}
