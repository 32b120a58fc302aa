/* SPDX-License-Identifier: Apache-2.0 */
/* Devices and dtypes: parsing what Python passes ('cuda:1', torch.device, NumPy dtypes ...), naming them, and
 * the module's device queries. */
#include "args.h"
#include "errors.h"

#include <stdlib.h>
#include <string.h>

static int device_type_from_name(const char *s, size_t n, DLDeviceType *out) {
  if (n == 3 && memcmp(s, "cpu", 3) == 0)
    *out = kDLCPU;
  else if (n == 4 && memcmp(s, "cuda", 4) == 0)
    *out = kDLCUDA;
  else if ((n == 4 && memcmp(s, "rocm", 4) == 0) || (n == 3 && memcmp(s, "hip", 3) == 0))
    *out = kDLROCM;
  else
    return -1;
  return 0;
}

DLDevice dlspy_default_device(void) {
  int n = 0;
  if (dls_device_count(kDLCUDA, &n) == DLS_OK && n > 0)
    return dls_cuda(0);
  if (dls_device_count(kDLROCM, &n) == DLS_OK && n > 0)
    return dls_device(kDLROCM, 0);
  return dls_cpu();
}

bool dlspy_torch_hip(PyObject *obj) {
  PyObject *mod = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__module__");
  const char *name = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
  bool of_torch = name != NULL && strncmp(name, "torch", 5) == 0 && (name[5] == '\0' || name[5] == '.');
  Py_XDECREF(mod);
  bool hip = false;
  if (of_torch) {
    PyObject *key = PyUnicode_FromString("torch");
    PyObject *torch = key ? PyImport_GetModule(key) : NULL; /* imported already: obj is torch's */
    Py_XDECREF(key);
    PyObject *version = torch ? PyObject_GetAttrString(torch, "version") : NULL;
    PyObject *v = version ? PyObject_GetAttrString(version, "hip") : NULL;
    hip = v != NULL && PyUnicode_Check(v) && PyUnicode_GET_LENGTH(v) > 0;
    Py_XDECREF(v);
    Py_XDECREF(version);
    Py_XDECREF(torch);
  }
  PyErr_Clear();
  return hip;
}

static int parse_device_str(dlspy_state *st, PyObject *obj, const char *pycall, DLDevice *out) {
  Py_ssize_t len;
  const char *s = PyUnicode_AsUTF8AndSize(obj, &len);
  if (s == NULL)
    return -1;
  const char *colon = memchr(s, ':', (size_t)len);
  size_t n = colon ? (size_t)(colon - s) : (size_t)len;
  DLDeviceType type;
  if (device_type_from_name(s, n, &type) != 0) {
    dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(device=%R): unknown device; use 'cpu', 'cuda', 'cuda:N' or 'rocm:N'",
                 pycall, obj);
    return -1;
  }
  long id = 0;
  if (colon != NULL) {
    char *end = NULL;
    id = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0' || id < 0 || id > 65535) {
      dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(device=%R): the device index must be a small non-negative integer",
                   pycall, obj);
      return -1;
    }
  }
  *out = dls_device(type, (int32_t)id);
  return 0;
}

/* A device index `v` of the device argument `shown`: an int (or __index__) 0 to 65535, else InvalidDeviceError (a
 * ValueError); a bool is refused (True would name device 1). */
static int device_index(dlspy_state *st, PyObject *v, PyObject *shown, const char *pycall, int32_t *out) {
  if (PyBool_Check(v)) {
    dlspy_type_error(st, "%s(device=%R): a device index is an int, not bool", pycall, shown);
    return -1;
  }
  long long id;
  int overflow;
  if (dlspy_index_value(st, v, pycall, "device", &id, &overflow, NULL) != 0)
    return -1;
  if (overflow || id < 0 || id > 65535) {
    dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(device=%R): out of range: a device index is 0 to 65535", pycall,
                 shown);
    return -1;
  }
  *out = (int32_t)id;
  return 0;
}

int dlspy_parse_device(dlspy_state *st, PyObject *obj, const char *pycall, DLDevice *out) {
  if (obj == NULL || obj == Py_None) {
    *out = dlspy_default_device();
    return 0;
  }
  if (PyUnicode_Check(obj))
    return parse_device_str(st, obj, pycall, out);
  if (PyLong_Check(obj)) {
    int32_t id;
    if (device_index(st, obj, obj, pycall, &id) != 0)
      return -1;
    *out = dls_cuda(id);
    return 0;
  }
  if (PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 2) {
    PyObject *t = PyTuple_GET_ITEM(obj, 0), *i = PyTuple_GET_ITEM(obj, 1);
    int32_t id;
    if (device_index(st, i, obj, pycall, &id) != 0)
      return -1;
    if (PyLong_Check(t) && !PyBool_Check(t)) {
      int64_t type;
      DLDevice home;
      if (dlspy_as_int(st, t, pycall, "device", "a DLPack device type", 0, INT32_MAX, &type) != 0)
        return -1;
      if (!dls__ext_home(dls_device((DLDeviceType)type, 0), &home)) {
        dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(device=%R): DLPack device type %lld is not supported", pycall,
                     obj, (long long)type);
        return -1;
      }
      *out = dls_device((DLDeviceType)type, id);
      return 0;
    }
    if (PyUnicode_Check(t)) {
      Py_ssize_t n;
      const char *s = PyUnicode_AsUTF8AndSize(t, &n);
      DLDeviceType type;
      if (s == NULL)
        return -1;
      if (device_type_from_name(s, (size_t)n, &type) != 0) {
        dlspy_raisef(st, DLS_ERR_INVALID_DEVICE, "%s(device=%R): unknown device type", pycall, obj);
        return -1;
      }
      *out = dls_device(type, id);
      return 0;
    }
  }
  /* torch.device and the like: .type and .index */
  PyObject *type = NULL;
  if (dlspy_getattr_opt(obj, st->s_type, &type) < 0)
    return -1;
  if (type != NULL && PyUnicode_Check(type)) {
    PyObject *index = NULL;
    if (dlspy_getattr_opt(obj, st->s_index, &index) < 0) {
      Py_DECREF(type);
      return -1;
    }
    if (index == NULL) {
      Py_DECREF(type);
      goto bad;
    }
    int rc = parse_device_str(st, type, pycall, out);
    Py_DECREF(type);
    if (rc == 0 && out->device_type == kDLCUDA && dlspy_torch_hip(obj))
      out->device_type = kDLROCM; /* torch.device('cuda') of a ROCm build */
    if (rc == 0 && index != Py_None)
      rc = device_index(st, index, obj, pycall, &out->device_id);
    Py_DECREF(index);
    return rc;
  }
  Py_XDECREF(type);
bad:
  dlspy_type_error(st, "%s(device=%R): expected None, 'cpu', 'cuda:N', an int, a (type, index) tuple or a device object",
                   pycall, obj);
  return -1;
}

PyObject *dlspy_device_str(DLDevice d) {
  char buf[32];
  return PyUnicode_FromString(dls_device_str(d, buf, sizeof buf));
}

/* ---- dtypes ---- */

typedef struct dtype_name {
  const char *name;
  uint8_t code, bits;
} dtype_name;

static const dtype_name g_dtypes[] = {
    {"float32", kDLFloat, 32}, {"float64", kDLFloat, 64},     {"float16", kDLFloat, 16},
    {"bfloat16", kDLBfloat, 16}, {"int8", kDLInt, 8},         {"int16", kDLInt, 16},
    {"int32", kDLInt, 32},     {"int64", kDLInt, 64},         {"uint8", kDLUInt, 8},
    {"uint16", kDLUInt, 16},   {"uint32", kDLUInt, 32},       {"uint64", kDLUInt, 64},
    {"bool", kDLBool, 8},      {"complex64", kDLComplex, 64}, {"complex128", kDLComplex, 128},
    {"float", kDLFloat, 32},   {"double", kDLFloat, 64},      {"half", kDLFloat, 16},
    {"int", kDLInt, 64},       {"long", kDLInt, 64},
};

int dlspy_parse_dtype(dlspy_state *st, PyObject *obj, const char *pycall, DLDataType *out) {
  PyObject *s = NULL;
  if (obj == NULL || obj == Py_None) {
    out->code = kDLFloat;
    out->bits = 32;
    out->lanes = 1;
    return 0;
  }
  if (obj == (PyObject *)&PyFloat_Type)
    s = PyUnicode_FromString("float64");
  else if (obj == (PyObject *)&PyLong_Type)
    s = PyUnicode_FromString("int64");
  else if (obj == (PyObject *)&PyBool_Type)
    s = PyUnicode_FromString("bool");
  else if (PyUnicode_Check(obj))
    s = Py_NewRef(obj);
  else {
    PyObject *name = PyObject_GetAttr(obj, st->s_name); /* numpy dtypes */
    if (name != NULL && PyUnicode_Check(name)) {
      s = name;
    } else {
      Py_XDECREF(name);
      PyErr_Clear();
      s = PyObject_Str(obj); /* torch.float32 -> "torch.float32"; np.float32 -> "<class ...>" */
    }
  }
  if (s == NULL) {
    dlspy_type_error(st, "%s(dtype=%R): not a dtype (its str() failed)", pycall, obj);
    return -1;
  }
  const char *c = PyUnicode_AsUTF8(s);
  if (c == NULL) {
    Py_DECREF(s);
    return -1;
  }
  if (strncmp(c, "torch.", 6) == 0)
    c += 6;
  else if (strncmp(c, "<class 'numpy.", 14) == 0)
    c += 14;
  size_t n = strcspn(c, "'");
  for (size_t i = 0; i < sizeof g_dtypes / sizeof g_dtypes[0]; i++) {
    if (strlen(g_dtypes[i].name) == n && strncmp(g_dtypes[i].name, c, n) == 0) {
      out->code = g_dtypes[i].code;
      out->bits = g_dtypes[i].bits;
      out->lanes = 1;
      Py_DECREF(s);
      return 0;
    }
  }
  Py_DECREF(s);
  dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT,
               "%s(dtype=%R): unknown dtype; use float16/32/64, bfloat16, int8..int64, uint8..uint64, bool or "
               "complex64/128",
               pycall, obj);
  return -1;
}

const char *dlspy_dtype_name(DLDataType dt, char *buf, size_t size) {
  const char *base = NULL;
  for (size_t i = 0; i < 15 && base == NULL; i++)
    if (g_dtypes[i].code == dt.code && g_dtypes[i].bits == dt.bits)
      base = g_dtypes[i].name;
  char tmp[32];
  if (base == NULL) {
    /* DLPack's other codes: "kDLFloat8_e4m3fn" -> "float8_e4m3fn"; sized codes get their bits ("int4"). */
    const char *code = dls__dlpack_dtype_code_name(dt.code);
    bool sized = dt.code == kDLInt || dt.code == kDLUInt || dt.code == kDLFloat || dt.code == kDLBfloat ||
                 dt.code == kDLComplex || dt.code == kDLBool || dt.code == kDLOpaqueHandle;
    if (strcmp(code, "unknown") == 0)
      snprintf(tmp, sizeof tmp, "dtype code %u with %u bits", (unsigned)dt.code, (unsigned)dt.bits);
    else if (dt.code == kDLOpaqueHandle)
      snprintf(tmp, sizeof tmp, "opaque%u", (unsigned)dt.bits);
    else if (sized)
      snprintf(tmp, sizeof tmp, "%c%s%u", code[3] + ('a' - 'A'), code + 4, (unsigned)dt.bits);
    else
      snprintf(tmp, sizeof tmp, "%c%s", code[3] + ('a' - 'A'), code + 4);
    base = tmp;
  }
  if (dt.lanes == 1)
    snprintf(buf, size, "%s", base);
  else
    snprintf(buf, size, "%sx%u", base, (unsigned)dt.lanes);
  return buf;
}

PyObject *dlspy_dtype_str(DLDataType dt) {
  char b[48];
  return PyUnicode_FromString(dlspy_dtype_name(dt, b, sizeof b));
}

/* ---- module functions ---- */

static int parse_device_type(dlspy_state *st, PyObject *obj, const char *pycall, DLDeviceType *out) {
  DLDevice d;
  if (obj == NULL || obj == Py_None) {
    *out = kDLCUDA;
    return 0;
  }
  if (dlspy_parse_device(st, obj, pycall, &d) != 0)
    return -1;
  *out = d.device_type;
  return 0;
}

PyObject *dlspy_mod_device_count(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  DLDeviceType type;
  if (parse_device_type(st, nargs > 0 ? args[0] : NULL, "device_count", &type) != 0)
    return NULL;
  int n = 0;
  dls_status_t rc = dls_device_count(type, &n);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "device_count");
  return PyLong_FromLong(n);
}

PyObject *dlspy_mod_backend_available(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  DLDeviceType type;
  if (parse_device_type(st, nargs > 0 ? args[0] : NULL, "backend_available", &type) != 0)
    return NULL;
  dls_status_t rc = dls_backend_probe(type);
  PyObject *why = dlspy_message("%s", rc == DLS_OK ? "" : dls_last_error());
  return why != NULL ? Py_BuildValue("(ON)", rc == DLS_OK ? Py_True : Py_False, why) : NULL;
}

PyObject *dlspy_mod_default_device(PyObject *m, PyObject *unused) { return dlspy_device_str(dlspy_default_device()); }
