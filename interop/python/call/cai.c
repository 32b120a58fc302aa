/* SPDX-License-Identifier: Apache-2.0 */
/* The __cuda_array_interface__ (version 3, as numba-cuda, CuPy and PyCUDA export it) read into a DLTensor view,
 * with the producer's `stream` for the handshake to wait on. */
#include "cai.h"

#include <string.h>

#include "../errors.h"

#define CAI_FAIL(status, ...)              \
  do {                                     \
    dlspy_raisef(st, (status), __VA_ARGS__); \
    return -1;                             \
  } while (0)

bool dlspy_dtype_of_kind(char kind, long size, DLDataType *out) {
  uint8_t code;
  bool ok;
  switch (kind) {
  case 'b': code = kDLBool; ok = size == 1; break;
  case 'i': code = kDLInt; ok = size == 1 || size == 2 || size == 4 || size == 8; break;
  case 'u': code = kDLUInt; ok = size == 1 || size == 2 || size == 4 || size == 8; break;
  case 'f': code = kDLFloat; ok = size == 2 || size == 4 || size == 8; break;
  case 'c': code = kDLComplex; ok = size == 8 || size == 16; break;
  default: code = 0; ok = false; break;
  }
  if (ok)
    *out = (DLDataType){code, (uint8_t)(size * 8), 1};
  return ok;
}

/* "<f4", "|u1", "<c8", "|b1" ... into a DLPack dtype. */
static int parse_typestr(dlspy_state *st, PyObject *v, const char *pycall, const char *arg, DLDataType *out) {
  const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
  if (s == NULL) {
    PyErr_Clear();
    CAI_FAIL(DLS_ERR_INVALID_TENSOR, "%s(%s): __cuda_array_interface__['typestr'] = %R is not a string",
             pycall, arg, v);
  }
  char order = s[0], kind = s[0] ? s[1] : '\0';
  char *end = NULL;
  long size = kind ? strtol(s + 2, &end, 10) : 0;
  if (order == '\0' || kind == '\0' || end == s + 2 || *end != '\0' || size <= 0 || size > 16)
    CAI_FAIL(DLS_ERR_INVALID_TENSOR,
             "%s(%s): __cuda_array_interface__['typestr'] = %R is not a type string such as '<f4'", pycall,
             arg, v);
  if (order == '>' && size > 1)
    CAI_FAIL(DLS_ERR_NOT_SUPPORTED, "%s(%s): __cuda_array_interface__['typestr'] = %R is big-endian", pycall,
             arg, v);
  if (order != '<' && order != '>' && order != '|' && order != '=')
    CAI_FAIL(DLS_ERR_INVALID_TENSOR, "%s(%s): __cuda_array_interface__['typestr'] = %R: unknown byte order",
             pycall, arg, v);
  if (!dlspy_dtype_of_kind(kind, size, out))
    CAI_FAIL(DLS_ERR_NOT_SUPPORTED,
             "%s(%s): __cuda_array_interface__['typestr'] = %R: dlstream reads bool (b1), int and uint (1, 2, 4, "
             "8 bytes), float (2, 4, 8) and complex (8, 16) elements",
             pycall, arg, v);
  return 0;
}

/* A tuple of ints (shape, or byte strides) into `dims`; `what` names the key. */
static int parse_ints(dlspy_state *st, PyObject *v, const char *what, bool non_negative, const char *pycall,
                      const char *arg, int64_t *dims, int32_t *out_n) {
  if (!PyTuple_Check(v))
    CAI_FAIL(DLS_ERR_INVALID_TENSOR, "%s(%s): __cuda_array_interface__['%s'] = %R is not a tuple of ints",
             pycall, arg, what, v);
  Py_ssize_t n = PyTuple_GET_SIZE(v);
  if (n > DLS__EXT_MAX_NDIM)
    CAI_FAIL(DLS_ERR_INVALID_TENSOR, "%s(%s): __cuda_array_interface__['%s'] has %zd dimensions; at most %d",
             pycall, arg, what, n, DLS__EXT_MAX_NDIM);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *d = PyTuple_GET_ITEM(v, i);
    int overflow = 0;
    long long x = PyLong_Check(d) && !PyBool_Check(d) ? PyLong_AsLongLongAndOverflow(d, &overflow) : 0;
    if (!PyLong_Check(d) || PyBool_Check(d) || overflow || (non_negative && x < 0)) {
      PyErr_Clear();
      CAI_FAIL(DLS_ERR_INVALID_TENSOR, "%s(%s): __cuda_array_interface__['%s'] = %R: entry %zd is not %s",
               pycall, arg, what, v, i, non_negative ? "an int >= 0" : "an int");
    }
    dims[i] = x;
  }
  *out_n = (int32_t)n;
  return 0;
}

void dlspy_cai_clear(dlspy_cai *cai) { Py_CLEAR(cai->stream); }

int dlspy_cai_read(dlspy_state *st, PyObject *d, DLDevice device, const char *pycall, const char *arg,
                   dlspy_cai *out) {
  memset(out, 0, sizeof *out);
  if (!PyDict_Check(d))
    CAI_FAIL(DLS_ERR_INVALID_TENSOR, "%s(%s): __cuda_array_interface__ is %R, not a dict", pycall, arg, d);
  /* Borrowed; absent keys are NULL (PyDict_GetItemString never raises). */
  PyObject *version = PyDict_GetItemString(d, "version"), *shape = PyDict_GetItemString(d, "shape");
  PyObject *typestr = PyDict_GetItemString(d, "typestr"), *data = PyDict_GetItemString(d, "data");
  PyObject *strides = PyDict_GetItemString(d, "strides"), *mask = PyDict_GetItemString(d, "mask");
  PyObject *stream = PyDict_GetItemString(d, "stream");
  if (version == NULL || shape == NULL || typestr == NULL || data == NULL)
    CAI_FAIL(DLS_ERR_INVALID_TENSOR,
             "%s(%s): __cuda_array_interface__ lacks %s (it needs 'version', 'shape', 'typestr' and 'data')",
             pycall, arg,
             version == NULL ? "'version'" : shape == NULL ? "'shape'" : typestr == NULL ? "'typestr'" : "'data'");
  long ver = PyLong_Check(version) && !PyBool_Check(version) ? PyLong_AsLong(version) : -1;
  if (ver < 0 || ver > 3) {
    PyErr_Clear();
    CAI_FAIL(DLS_ERR_VERSION, "%s(%s): __cuda_array_interface__['version'] = %R; dlstream reads versions 0 to 3",
             pycall, arg, version);
  }
  out->version = (int)ver;
  if (mask != NULL && mask != Py_None)
    CAI_FAIL(DLS_ERR_NOT_SUPPORTED, "%s(%s): __cuda_array_interface__['mask'] is set; masked arrays are not "
             "supported", pycall, arg);
  if (parse_typestr(st, typestr, pycall, arg, &out->dl.dtype) != 0 ||
      parse_ints(st, shape, "shape", true, pycall, arg, out->shape, &out->dl.ndim) != 0)
    return -1;
  /* data: (pointer, read-only) */
  PyObject *ptr = PyTuple_Check(data) && PyTuple_GET_SIZE(data) == 2 ? PyTuple_GET_ITEM(data, 0) : NULL;
  PyObject *ro = ptr ? PyTuple_GET_ITEM(data, 1) : NULL;
  unsigned long long p = ptr && PyLong_Check(ptr) ? PyLong_AsUnsignedLongLong(ptr) : (unsigned long long)-1;
  if (ptr == NULL || !PyLong_Check(ptr) || (p == (unsigned long long)-1 && PyErr_Occurred()) || !PyBool_Check(ro)) {
    PyErr_Clear();
    CAI_FAIL(DLS_ERR_INVALID_TENSOR,
             "%s(%s): __cuda_array_interface__['data'] = %R is not a (pointer, read_only) pair of an int >= 0 "
             "and a bool",
             pycall, arg, data);
  }
  out->dl.data = (void *)(uintptr_t)p;
  out->read_only = ro == Py_True;
  out->dl.shape = out->shape;
  out->dl.device = device;
  out->dl.byte_offset = 0;
  if (strides != NULL && strides != Py_None) {
    int32_t n;
    if (parse_ints(st, strides, "strides", false, pycall, arg, out->strides, &n) != 0)
      return -1;
    if (n != out->dl.ndim)
      CAI_FAIL(DLS_ERR_INVALID_TENSOR, "%s(%s): __cuda_array_interface__ has %d strides for %d dimensions",
               pycall, arg, (int)n, (int)out->dl.ndim);
    int64_t size = out->dl.dtype.bits / 8;
    for (int32_t i = 0; i < n; i++) {
      if (out->strides[i] % size != 0)
        CAI_FAIL(DLS_ERR_NOT_SUPPORTED,
                 "%s(%s): __cuda_array_interface__['strides'] = %R: stride %d is not a multiple of the %lld-byte "
                 "element",
                 pycall, arg, strides, (int)i, (long long)size);
      out->strides[i] /= size;
    }
    out->dl.strides = out->strides;
  }
  /* stream (version 3): the stream the producer's work on the data is queued on; None: nothing to wait for. */
  if (stream != NULL && stream != Py_None) {
    if (ver < 3)
      CAI_FAIL(DLS_ERR_VERSION, "%s(%s): __cuda_array_interface__ version %ld gives a 'stream'; streams came "
               "with version 3", pycall, arg, ver);
    int overflow = 0;
    long long sv = PyLong_Check(stream) && !PyBool_Check(stream) ? PyLong_AsLongLongAndOverflow(stream, &overflow) : 0;
    if (!PyLong_Check(stream) || PyBool_Check(stream) || overflow || sv <= 0) {
      PyErr_Clear();
      CAI_FAIL(DLS_ERR_INVALID_ARGUMENT,
               "%s(%s): __cuda_array_interface__['stream'] = %R is not a stream: the interface gives None, 1 "
               "(legacy default stream), 2 (per-thread default stream) or a stream pointer (0 is disallowed)",
               pycall, arg, stream);
    }
    out->stream = Py_NewRef(stream);
  }
  return 0;
}
