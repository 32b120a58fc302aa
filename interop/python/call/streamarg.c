/* SPDX-License-Identifier: Apache-2.0 */
/* Stream-like values from Python: dlstream.Stream, __cuda_stream__ objects, int native pointers and DLPack
 * stream integers, checked before anything reads them as pointers; the cache of wrapped foreign streams. */
#include "streamarg.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../errors.h"

/* ---- values that cannot be streams ---- */

/* The first page is never mapped: no stream or event lives below this. */
#define DLSPY_FIRST_POINTER 4096u

bool dlspy_addr_readable(uintptr_t addr) {
  /* The kernel copies from our own address space and reports EFAULT instead of faulting: this catches
   * unmapped pages and reserved (PROT_NONE) ranges such as the GPU drivers' address reservations. */
  char byte;
  struct iovec local = {&byte, 1}, remote = {(void *)addr, 1};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1)
    return true;
  if (errno == EFAULT)
    return false;
  /* Not permitted here (seccomp): msync fails with ENOMEM exactly when no mapping covers the page. */
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0)
    page = 4096;
  void *base = (void *)(addr & ~(uintptr_t)(page - 1));
  return msync(base, (size_t)page, MS_ASYNC) == 0 || errno != ENOMEM;
}

int dlspy_native_of_int(dlspy_state *st, PyObject *v, PyObject *shown, const char *pycall, const char *arg,
                        void **out) {
  int overflow = 0;
  long long sv = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (sv == -1 && !overflow && PyErr_Occurred())
    return -1;
  const char *why = NULL;
  if (overflow < 0 || (!overflow && sv < 0))
    why = "a native stream is a pointer, never negative (DLPack's -1, 'no synchronization', names no stream to run "
          "on)";
  else if (overflow > 0)
    why = "pointers of this process are below 2**63";
  else if (sv > 2 && (unsigned long long)sv < DLSPY_FIRST_POINTER)
    why = "values below 4096 other than 0 and 1 (the legacy default stream) and 2 (the per-thread default stream) "
          "name no stream";
  if (why != NULL) {
    if (shown == v)
      dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(%s=%R): not a stream: %s", pycall, arg, v, why);
    else
      dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(%s=%R): %R is not a stream: %s", pycall, arg, shown, v, why);
    return -1;
  }
  *out = (void *)(uintptr_t)sv;
  return 0;
}

int dlspy_stream_of_dlpack_value(dlspy_state *st, DLDevice device, PyObject *v, const char *pycall, const char *arg,
                                 dls_stream_t *out) {
  out->id = 0;
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (value == -1 && !overflow && PyErr_Occurred())
    return -1;
  if (overflow) {
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT,
                 "%s(%s=%R): not a DLPack stream value (-1, the default-stream values or a stream pointer)", pycall,
                 arg, v);
    return -1;
  }
  if (value < (long long)DLSPY_FIRST_POINTER) {
    /* -1, the defined default-stream values and refusals: no pointer is read. */
    dls_status_t rc = dls_dlpack_stream_from_value(device, value, out);
    if (rc != DLS_OK) {
      dlspy_raisef(st, rc, "%s(%s=%R): %s", pycall, arg, v, dls_last_error());
      return -1;
    }
    return 0;
  }
  return dlspy_stream_cached(st, device, (void *)(uintptr_t)value, pycall, out);
}

int dlspy_native_readable(dlspy_state *st, DLDevice device, void *native, const char *pycall) {
  uintptr_t v = (uintptr_t)native;
  if ((device.device_type == kDLCUDA || device.device_type == kDLROCM) && v >= DLSPY_FIRST_POINTER &&
      (intptr_t)v > 0 && !dlspy_addr_readable(v)) {
    char dev[32];
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT,
                 "%s: %p is not a stream of %s: this process cannot read memory there (a freed or made-up pointer; "
                 "no driver can tell a plausible dangling pointer from a stream)",
                 pycall, native, dls_device_str(device, dev, sizeof dev));
    return -1;
  }
  return 0;
}

/* ---- the wrapper cache ---- */

/* Empties the memo, dropping its reference (unless the runtime is gone: then nothing of it may be touched). */
static void memo_forget(dlspy_state *st) {
  dlspy_stream_memo *m = &st->smemo;
  if (m->s != NULL && m->counted && !atomic_load(&dlspy_dead) && dls__ext_ready())
    dls__ext_stream_unref(m->s);
  m->s = NULL;
}

int dlspy_stream_cached(dlspy_state *st, DLDevice device, void *native, const char *pycall, dls_stream_t *out) {
  uintptr_t v = (uintptr_t)native;
  if (v == 0 || v == DLS_STREAM_LEGACY) {
    *out = dls_stream_default(device, DLS_STREAM_LEGACY);
    return 0;
  }
  if (v == DLS_STREAM_PER_THREAD) {
    *out = dls_stream_default(device, DLS_STREAM_PER_THREAD);
    return 0;
  }
  for (int i = 0; i < st->scache_n; i++) {
    dlspy_stream_entry *e = &st->scache[i];
    if (e->native == native && e->device.device_type == device.device_type && e->device.device_id == device.device_id) {
      *out = e->handle;
      return 0;
    }
  }
  if (dlspy_native_readable(st, device, native, pycall) != 0)
    return -1;
  dls_stream_t h;
  dls_status_t rc = dls_stream_wrap(device, native, &h);
  if (rc != DLS_OK) {
    dlspy_raise(st, rc, pycall);
    return -1;
  }
  dls__stream *ws = dls__ext_stream(h, pycall, "stream", &rc);
  if (ws != NULL) /* nothing keeps the framework's stream alive: no memory may stay cached on it */
    dls__ext_stream_uncached(ws);
  int slot;
  if (st->scache_n < DLSPY_STREAM_CACHE) {
    slot = st->scache_n++;
  } else {
    slot = st->scache_next;
    st->scache_next = (st->scache_next + 1) % DLSPY_STREAM_CACHE;
    /* Uses recorded on it hold the stream object itself; only the handle goes. */
    if (st->smemo.handle.id == st->scache[slot].handle.id)
      memo_forget(st);
    (void)dls_stream_destroy(st->scache[slot].handle);
  }
  st->scache[slot].device = device;
  st->scache[slot].native = native;
  st->scache[slot].handle = h;
  *out = h;
  return 0;
}

int dlspy_stream_lookup_slow(dlspy_state *st, DLDevice device, void *native, const char *pycall, dls_stream_t *out,
                             dls__stream **out_s) {
  dlspy_stream_memo *m = &st->smemo;
  dls_stream_t h;
  if (dlspy_stream_cached(st, device, native, pycall, &h) != 0)
    return -1;
  dls_status_t rc;
  dls__stream *s = dls__ext_stream(h, pycall, "stream", &rc);
  if (s == NULL) {
    dlspy_raise(st, rc, pycall);
    return -1;
  }
  /* A reserved handle names a default stream, which lives as long as its device: nothing to hold. */
  bool counted = (uint32_t)(h.id >> 32) != DLS_STREAM_RESERVED_GENERATION;
  if (counted)
    dls__ext_stream_ref(s);
  memo_forget(st);
  *m = (dlspy_stream_memo){device, native, h, s, counted};
  *out = h;
  *out_s = s;
  return 0;
}

void dlspy_stream_uncache(dlspy_state *st, DLDevice device, void *native) {
  dlspy_stream_memo *m = &st->smemo;
  if (m->s != NULL && m->native == native && m->device.device_type == device.device_type &&
      m->device.device_id == device.device_id)
    memo_forget(st);
  for (int i = 0; i < st->scache_n; i++) {
    dlspy_stream_entry *e = &st->scache[i];
    if (e->native == native && e->device.device_type == device.device_type && e->device.device_id == device.device_id) {
      (void)dls_stream_destroy(e->handle);
      *e = st->scache[--st->scache_n];
      return;
    }
  }
}

void dlspy_stream_cache_clear(dlspy_state *st) {
  memo_forget(st);
  if (!atomic_load(&dlspy_dead) && dls__ext_ready())
    for (int i = 0; i < st->scache_n; i++)
      (void)dls_stream_destroy(st->scache[i].handle);
  st->scache_n = 0;
  st->scache_next = 0;
}

/* ---- the __cuda_stream__ protocol ---- */

int dlspy_cuda_stream_protocol(dlspy_state *st, PyObject *obj, const char *pycall, const char *arg,
                               void **out_native) {
  PyObject *r = PyObject_CallMethodNoArgs(obj, st->s_cuda_stream);
  if (r == NULL)
    return -1;
  if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
    dlspy_type_error(st, "%s: %R.__cuda_stream__() returned %R; the protocol asks for a (version, handle) tuple",
                     pycall, obj, r);
    Py_DECREF(r);
    return -1;
  }
  PyObject *ver = PyTuple_GET_ITEM(r, 0), *handle = PyTuple_GET_ITEM(r, 1);
  if (!PyLong_Check(ver) || !PyLong_Check(handle)) {
    dlspy_type_error(st, "%s: %R.__cuda_stream__() returned %R; version and handle must both be ints", pycall, obj,
                     r);
    Py_DECREF(r);
    return -1;
  }
  long version = PyLong_AsLong(ver);
  if (version != 0) {
    if (!PyErr_Occurred())
      dlspy_raisef(st, DLS_ERR_VERSION, "%s: %R.__cuda_stream__() has protocol version %ld; dlstream reads version 0",
                   pycall, obj, version);
    Py_DECREF(r);
    return -1;
  }
  int rc = dlspy_native_of_int(st, handle, obj, pycall, arg, out_native);
  Py_DECREF(r);
  return rc;
}

/* ---- stream arguments ---- */

int dlspy_stream_resolve(dlspy_state *st, PyObject *obj, DLDevice device, const char *pycall, const char *arg,
                         dls_stream_t *out) {
  out->id = 0;
  if (obj == NULL || obj == Py_None)
    return 0;
  if (PyObject_TypeCheck(obj, st->StreamType)) {
    StreamObject *s = (StreamObject *)obj;
    if (s->handle.id == 0) {
      dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s(%s=%R): the stream was closed", pycall, arg, obj);
      return -1;
    }
    *out = s->handle;
    return 0;
  }
  void *native;
  if (PyLong_Check(obj) && !PyBool_Check(obj)) {
    if (dlspy_native_of_int(st, obj, obj, pycall, arg, &native) != 0)
      return -1;
  } else {
    PyObject *meth = NULL;
    if (dlspy_getattr_opt(obj, st->s_cuda_stream, &meth) < 0)
      return -1;
    if (meth == NULL) {
      dlspy_type_error(st, "%s(%s=%R): expected a dlstream.Stream, an object with __cuda_stream__ or an int pointer",
                       pycall, arg, obj);
      return -1;
    }
    Py_DECREF(meth);
    if (dlspy_cuda_stream_protocol(st, obj, pycall, arg, &native) != 0)
      return -1;
  }
  return dlspy_stream_cached(st, device, native, pycall, out);
}

PyObject *dlspy_mod_stream_var_set(PyObject *m, PyObject *value) {
  dlspy_state *st = dlspy_state_of_module(m);
  st->stream_var_set = true;
  return PyContextVar_Set(st->stream_var, value);
}

int dlspy_context_stream(dlspy_state *st, dls_stream_t *out) {
  out->id = 0;
  if (DLSPY_LIKELY(!st->stream_var_set))
    return 0; /* never set: every context holds the default */
  PyObject *cur = NULL;
  if (PyContextVar_Get(st->stream_var, NULL, &cur) != 0)
    return -1;
  if (cur == NULL)
    return 0;
  if (PyObject_TypeCheck(cur, st->StreamType)) {
    StreamObject *s = (StreamObject *)cur;
    int rc = 0;
    if (s->handle.id == 0) {
      dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "use_stream(%R): the stream was closed inside its block", cur);
      rc = -1;
    }
    *out = s->handle;
    Py_DECREF(cur);
    return rc;
  }
  Py_DECREF(cur);
  return 0;
}

