/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream's exceptions: one class per status, each also the built-in it means, and the helpers that raise
 * them. */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct exc_def {
  const char *name;
  PyObject **builtin; /* the built-in exception it also derives from */
  const char *doc;
} exc_def;

/* One class per status of DLS_STATUS_MAP (include/dlstream/status.h), made from that list: each status's class is
 * DLSPY_EXC_<its name> below, so a status added there without its class here does not compile. */
#define DLSPY_EXC_OK {NULL, NULL, NULL} /* success raises nothing */
#define DLSPY_EXC_ERR_INVALID_ARGUMENT \
  {"InvalidArgumentError", &PyExc_ValueError, "An argument has a value dlstream refuses."}
#define DLSPY_EXC_ERR_INVALID_HANDLE \
  {"InvalidHandleError", &PyExc_ValueError, "A closed or stale stream, event, tensor, module or function."}
#define DLSPY_EXC_ERR_INVALID_DEVICE \
  {"InvalidDeviceError", &PyExc_ValueError, "A device that does not exist, or objects on different devices."}
#define DLSPY_EXC_ERR_UNAVAILABLE \
  {"UnavailableError", &PyExc_RuntimeError, "The backend cannot be used on this machine (the message says why)."}
#define DLSPY_EXC_ERR_BACKEND {"BackendError", &PyExc_RuntimeError, "The GPU driver or a CPU stream reported a failure."}
#define DLSPY_EXC_ERR_OUT_OF_MEMORY {"OutOfMemoryError", &PyExc_MemoryError, "Device or host memory ran out."}
#define DLSPY_EXC_ERR_NOT_SUPPORTED \
  {"NotSupportedError", &PyExc_NotImplementedError, "The backend does not implement this operation."}
#define DLSPY_EXC_ERR_BUSY {"BusyError", &PyExc_RuntimeError, "A resource is in use."}
#define DLSPY_EXC_ERR_TIMEOUT \
  {"TimedOutError", &PyExc_RuntimeError, "A wait timed out (for example a latch that was never opened)."}
#define DLSPY_EXC_ERR_NOT_FOUND {"NotFoundError", &PyExc_LookupError, "A kernel, built-in or file was not found."}
#define DLSPY_EXC_ERR_INVALID_TENSOR {"InvalidTensorError", &PyExc_BufferError, "A DLPack tensor failed validation."}
#define DLSPY_EXC_ERR_VERSION \
  {"VersionError", &PyExc_BufferError, "A DLPack tensor of an unsupported major version."}
#define DLSPY_EXC_ERR_READ_ONLY \
  {"ReadOnlyError", &PyExc_BufferError, "A read-only tensor was passed where the kernel may write."}
#define DLSPY_EXC_ERR_STATE \
  {"StateError", &PyExc_RuntimeError, "The call is not valid now (for example after shutdown)."}
#define DLSPY_EXC_ERR_FORK \
  {"ForkError", &PyExc_RuntimeError, "dlstream was initialized before fork(); it cannot be used in the child."}
#define DLSPY_EXC_ERR_INTERNAL {"InternalError", &PyExc_RuntimeError, "An internal error in dlstream."}

#define DLSPY_STATUS_FITS(name, value, msg) \
  _Static_assert(value >= 0 && value < DLSPY_STATUS_COUNT, "DLS_" #name ": the statuses run from 0 without a gap");
DLS_STATUS_MAP(DLSPY_STATUS_FITS)
#undef DLSPY_STATUS_FITS
#define DLSPY_EXC_DEF(name, value, msg) [value] = DLSPY_EXC_##name,
static const exc_def g_exc_defs[DLSPY_STATUS_COUNT] = {DLS_STATUS_MAP(DLSPY_EXC_DEF)};
#undef DLSPY_EXC_DEF

static PyObject *exc_for(dlspy_state *st, dls_status_t status) {
  if ((int)status > 0 && (int)status < DLSPY_STATUS_COUNT && st->exc[status] != NULL)
    return st->exc[status];
  return st->exc[DLS_ERR_INTERNAL];
}

/* ---- messages ---- */

/* A growing UTF-8 buffer. */
typedef struct msgbuf {
  char *p;
  size_t n, cap;
  bool failed;
} msgbuf;

static void put(msgbuf *b, const char *s, size_t n) {
  if (b->failed || n == 0)
    return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1)
      cap *= 2;
    char *p = PyMem_Realloc(b->p, cap);
    if (p == NULL) {
      b->failed = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

/* Appends a str, or what is left of it once cut to DLSPY_REPR_MAX characters ("..." at the end). */
static void put_str(msgbuf *b, PyObject *s, bool cut) {
  PyObject *t = NULL;
  if (cut && PyUnicode_GET_LENGTH(s) > DLSPY_REPR_MAX) {
    PyObject *head = PyUnicode_Substring(s, 0, DLSPY_REPR_MAX - 3);
    t = head ? PyUnicode_FromFormat("%U...", head) : NULL;
    Py_XDECREF(head);
    if (t == NULL) {
      PyErr_Clear();
      b->failed = true;
      return;
    }
    s = t;
  }
  Py_ssize_t n;
  const char *u = PyUnicode_AsUTF8AndSize(s, &n);
  if (u != NULL) {
    put(b, u, (size_t)n);
  } else { /* lone surrogates */
    PyErr_Clear();
    PyObject *e = PyUnicode_AsEncodedString(s, "utf-8", "backslashreplace");
    if (e != NULL)
      put(b, PyBytes_AS_STRING(e), (size_t)PyBytes_GET_SIZE(e));
    else
      PyErr_Clear();
    Py_XDECREF(e);
  }
  Py_XDECREF(t);
}

/* repr(), str() or ascii() of an argument for a message. A repr that raises or is not a str is replaced by
 * "<type object at 0x...>": a message must come out whatever the object does. */
static void put_obj(msgbuf *b, PyObject *o, char how) {
  if (o == NULL) {
    put(b, "<NULL>", 6);
    return;
  }
  PyObject *r = how == 'S' ? PyObject_Str(o) : how == 'A' ? PyObject_ASCII(o) : PyObject_Repr(o);
  if (r != NULL && PyUnicode_Check(r)) {
    put_str(b, r, true);
  } else {
    PyErr_Clear();
    char tmp[160];
    int n = snprintf(tmp, sizeof tmp, "<%.100s object at %p>", Py_TYPE(o)->tp_name, (void *)o);
    put(b, tmp, (size_t)(n < (int)sizeof tmp ? n : (int)sizeof tmp - 1));
  }
  Py_XDECREF(r);
}

/* The library's hints in a Python caller's words (ext.h, dls__ext_hints; the CPU backend named by its DLPack
 * constant becomes device="cpu"), whichever call the message came through. */
static void put_python_words(msgbuf *b) {
  size_t count;
  const dls__ext_hint *hints = dls__ext_hints(&count);
  for (size_t i = 0; i < count && !b->failed && b->p != NULL; i++) {
    b->p[b->n] = '\0'; /* put() keeps room for it */
    if (strstr(b->p, hints[i].c_words) == NULL)
      continue;
    msgbuf out = {NULL, 0, 0, false};
    const size_t cl = strlen(hints[i].c_words);
    const char *from = b->p, *at;
    while ((at = strstr(from, hints[i].c_words)) != NULL) {
      put(&out, from, (size_t)(at - from));
      put(&out, hints[i].python_words, strlen(hints[i].python_words));
      from = at + cl;
    }
    put(&out, from, strlen(from));
    PyMem_Free(b->p);
    *b = out;
  }
}

/* PyUnicode_FromFormatV for messages, in Python's words, with every %R, %S and %A cut to DLSPY_REPR_MAX
 * characters. Takes %s, %c, %d, %i, %u, %x, %X (with l, ll or z), %p, %U, %R, %S, %A and %%; a precision is
 * honoured for %s. */
static PyObject *format_message(const char *fmt, va_list ap) {
  msgbuf b = {NULL, 0, 0, false};
  const char *f = fmt;
  while (*f) {
    const char *pct = strchr(f, '%');
    if (pct == NULL) {
      put(&b, f, strlen(f));
      break;
    }
    put(&b, f, (size_t)(pct - f));
    const char *q = pct + 1;
    int prec = -1;
    if (*q == '.') {
      q++;
      if (*q == '*') {
        prec = va_arg(ap, int);
        q++;
      } else {
        prec = 0;
        while (*q >= '0' && *q <= '9')
          prec = prec * 10 + (*q++ - '0');
      }
    }
    int len = 0; /* 1 l, 2 ll, 3 z */
    if (q[0] == 'l' && q[1] == 'l') {
      len = 2;
      q += 2;
    } else if (*q == 'l') {
      len = 1;
      q++;
    } else if (*q == 'z') {
      len = 3;
      q++;
    }
    char tmp[64];
    int n = -1;
    switch (*q) {
    case '%': put(&b, "%", 1); break;
    case 's': {
      const char *s = va_arg(ap, const char *);
      if (s == NULL)
        s = "(null)";
      size_t sl = strlen(s);
      put(&b, s, prec >= 0 && (size_t)prec < sl ? (size_t)prec : sl);
      break;
    }
    case 'c': n = snprintf(tmp, sizeof tmp, "%c", va_arg(ap, int)); break;
    case 'p': n = snprintf(tmp, sizeof tmp, "%p", va_arg(ap, void *)); break;
    case 'd':
    case 'i':
      n = len == 2 ? snprintf(tmp, sizeof tmp, "%lld", va_arg(ap, long long))
          : len == 1 ? snprintf(tmp, sizeof tmp, "%ld", va_arg(ap, long))
          : len == 3 ? snprintf(tmp, sizeof tmp, "%zd", va_arg(ap, Py_ssize_t))
                     : snprintf(tmp, sizeof tmp, "%d", va_arg(ap, int));
      break;
    case 'u':
    case 'x':
    case 'X': {
      unsigned long long u = len == 2   ? va_arg(ap, unsigned long long)
                             : len == 1 ? va_arg(ap, unsigned long)
                             : len == 3 ? va_arg(ap, size_t)
                                        : va_arg(ap, unsigned);
      n = *q == 'u' ? snprintf(tmp, sizeof tmp, "%llu", u)
          : *q == 'x' ? snprintf(tmp, sizeof tmp, "%llx", u)
                      : snprintf(tmp, sizeof tmp, "%llX", u);
      break;
    }
    case 'U': {
      PyObject *u = va_arg(ap, PyObject *);
      if (u != NULL && PyUnicode_Check(u))
        put_str(&b, u, false);
      else
        put_obj(&b, u, 'S');
      break;
    }
    case 'R':
    case 'S':
    case 'A': put_obj(&b, va_arg(ap, PyObject *), *q); break;
    default: put(&b, pct, (size_t)(q - pct) + (*q != '\0')); break; /* not ours: as written */
    }
    if (n > 0)
      put(&b, tmp, (size_t)(n < (int)sizeof tmp ? n : (int)sizeof tmp - 1));
    f = *q ? q + 1 : q;
  }
  put_python_words(&b);
  PyObject *r = b.failed ? PyErr_NoMemory() : PyUnicode_DecodeUTF8(b.p ? b.p : "", (Py_ssize_t)b.n, "replace");
  PyMem_Free(b.p);
  return r;
}

/* ---- raising ---- */

PyObject *dlspy_take_exception(void) {
  PyObject *type = NULL, *value = NULL, *tb = NULL;
  PyErr_Fetch(&type, &value, &tb);
  if (type == NULL)
    return NULL;
  PyErr_NormalizeException(&type, &value, &tb);
  if (value != NULL && tb != NULL)
    PyException_SetTraceback(value, tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  return value;
}

/* Raises `cls(msg)`; an exception already set (what the library was told by Python code it called: a __index__,
 * a __cuda_array_interface__ ...) becomes the new one's __cause__, so nothing the user's code said is lost. */
static void raise_chained(PyObject *cls, PyObject *msg) {
  PyObject *cause = dlspy_take_exception(); /* normalized before the new one is set: that may call a constructor */
  PyErr_SetObject(cls, msg);
  if (cause == NULL)
    return;
  PyObject *exc = dlspy_take_exception();
  if (exc != NULL) {
    PyException_SetCause(exc, Py_NewRef(cause)); /* steals; also sets __suppress_context__ */
    PyException_SetContext(exc, Py_NewRef(cause));
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  }
  Py_DECREF(cause);
}

static PyObject *raise_v(PyObject *cls, const char *fmt, va_list ap) {
  PyObject *type = NULL, *value = NULL, *tb = NULL;
  if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_Exception))
    return NULL; /* KeyboardInterrupt, SystemExit ...: they go on as they are */
  PyErr_Fetch(&type, &value, &tb); /* formatting calls repr(): nothing may be pending meanwhile */
  PyObject *msg = format_message(fmt, ap);
  if (msg == NULL) {
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return NULL;
  }
  PyErr_Restore(type, value, tb);
  raise_chained(cls, msg);
  Py_DECREF(msg);
  return NULL;
}

PyObject *dlspy_raise(dlspy_state *st, dls_status_t status, const char *pycall) {
  return dlspy_raisef(st, status, "%s: %s", pycall, dls_last_error());
}

PyObject *dlspy_raisef(dlspy_state *st, dls_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  raise_v(exc_for(st, status), fmt, ap);
  va_end(ap);
  return NULL;
}

PyObject *dlspy_message(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *msg = format_message(fmt, ap);
  va_end(ap);
  return msg;
}

PyObject *dlspy_type_error(dlspy_state *st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  raise_v(st->ArgumentTypeError, fmt, ap);
  va_end(ap);
  return NULL;
}

PyObject *dlspy_range_error(dlspy_state *st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  raise_v(st->OutOfRangeError, fmt, ap);
  va_end(ap);
  return NULL;
}

int dlspy_check_runtime_slow(dlspy_state *st, const char *pycall) {
  if (DLSPY_UNLIKELY(atomic_load_explicit(&dlspy_dead, memory_order_relaxed))) {
    dlspy_raisef(st, DLS_ERR_STATE, "%s: dlstream was shut down at interpreter exit", pycall);
    return -1;
  }
  if (DLSPY_LIKELY(dls__ext_ready()))
    return 0;
  dls_status_t rc = dls__enter_slow(pycall);
  if (rc != DLS_OK) {
    dlspy_raisef(st, rc, "%s", dls_last_error());
    return -1;
  }
  return 0;
}

int dlspy_errors_init(PyObject *m, dlspy_state *st) {
  st->Error = PyErr_NewExceptionWithDoc("dlstream.Error",
                                        "Base of every dlstream exception; each also derives from the built-in "
                                        "exception it means (ValueError, BufferError, RuntimeError ...).",
                                        NULL, NULL);
  if (st->Error == NULL || PyModule_AddObjectRef(m, "Error", st->Error) != 0)
    return -1;
  for (int status = 1; status < DLSPY_STATUS_COUNT; status++) {
    const exc_def *d = &g_exc_defs[status];
    char qual[64];
    snprintf(qual, sizeof qual, "dlstream.%s", d->name);
    PyObject *bases = PyTuple_Pack(2, st->Error, *d->builtin);
    if (bases == NULL)
      return -1;
    PyObject *cls = PyErr_NewExceptionWithDoc(qual, d->doc, bases, NULL);
    Py_DECREF(bases);
    if (cls == NULL)
      return -1;
    PyObject *code = PyLong_FromLong(status);
    int rc = code ? PyObject_SetAttrString(cls, "status", code) : -1;
    Py_XDECREF(code);
    if (rc == 0) {
      PyObject *sname = PyUnicode_FromString(dls_status_name((dls_status_t)status));
      rc = sname ? PyObject_SetAttrString(cls, "status_name", sname) : -1;
      Py_XDECREF(sname);
    }
    st->exc[status] = cls;
    if (rc != 0 || PyModule_AddObjectRef(m, d->name, cls) != 0)
      return -1;
  }
  {
    PyObject *bases = PyTuple_Pack(2, st->Error, PyExc_TypeError);
    if (bases == NULL)
      return -1;
    st->ArgumentTypeError = PyErr_NewExceptionWithDoc("dlstream.ArgumentTypeError",
                                                      "An argument of the wrong Python type.", bases, NULL);
    Py_DECREF(bases);
    if (st->ArgumentTypeError == NULL || PyModule_AddObjectRef(m, "ArgumentTypeError", st->ArgumentTypeError) != 0)
      return -1;
  }
  {
    PyObject *bases = PyTuple_Pack(2, st->exc[DLS_ERR_INVALID_ARGUMENT], PyExc_OverflowError);
    if (bases == NULL)
      return -1;
    st->OutOfRangeError = PyErr_NewExceptionWithDoc(
        "dlstream.OutOfRangeError",
        "A number outside the range of the C type or the device limit it goes to (an InvalidArgumentError, so a "
        "ValueError, and an OverflowError, as NumPy raises).",
        bases, NULL);
    Py_DECREF(bases);
    if (st->OutOfRangeError == NULL || PyModule_AddObjectRef(m, "OutOfRangeError", st->OutOfRangeError) != 0)
      return -1;
  }
  return 0;
}
