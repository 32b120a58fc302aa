/* SPDX-License-Identifier: Apache-2.0 */
/* Stream-like values from Python (streamarg.c): Stream objects, __cuda_stream__, native pointers and DLPack stream integers; the cache of wrapped foreign streams and the memo of the last one; the use_stream() context; the stream of a call that names none (defaultstream.c). */
#ifndef DLSTREAM_PY_STREAMARG_H
#define DLSTREAM_PY_STREAMARG_H

#include "../dlspy.h"

/* Resolves a stream argument: a Stream, an object with __cuda_stream__, or an
 * int native pointer (0 legacy, 2 per-thread). Foreign natives are wrapped
 * through the module's cache, so no handle is made per call. `device` is the
 * device a bare pointer belongs to. Returns 0, or -1 with an exception. */
int dlspy_stream_resolve(dlspy_state *st, PyObject *obj, DLDevice device, const char *pycall, const char *arg,
                         dls_stream_t *out);
/* The handle of a (device, native) pair through the cache (NULL native: legacy). */
int dlspy_stream_cached(dlspy_state *st, DLDevice device, void *native, const char *pycall, dls_stream_t *out);
/* dlspy_stream_lookup past the memo. */
int dlspy_stream_lookup_slow(dlspy_state *st, DLDevice device, void *native, const char *pycall, dls_stream_t *out,
                             dls__stream **out_s);
/* The same, and the core stream it names; the last pair resolved is remembered (st->smemo). */
static inline int dlspy_stream_lookup(dlspy_state *st, DLDevice device, void *native, const char *pycall,
                                      dls_stream_t *out, dls__stream **out_s) {
  const dlspy_stream_memo *m = &st->smemo;
  if (DLSPY_LIKELY(m->s != NULL && m->native == native && m->device.device_type == device.device_type &&
                   m->device.device_id == device.device_id)) {
    *out = m->handle;
    *out_s = m->s;
    return 0;
  }
  return dlspy_stream_lookup_slow(st, device, native, pycall, out, out_s);
}
/* Drops the cache's wrapper of `native` on `device` and the memo of it, if any: a wrapper of one of dlstream's
 * pooled streams (a branch's, read back as a framework's current stream) keeps that stream out of its pool. */
void dlspy_stream_uncache(dlspy_state *st, DLDevice device, void *native);
/* Drops the cache's wrappers. */
void dlspy_stream_cache_clear(dlspy_state *st);
/* The stream of a call that names none and has no tensor argument to ask, on `dev`: the legacy default stream,
 * except while torch (if imported) captures a graph on its current stream of `dev`: then that stream, so the call
 * is recorded with torch's work. 0, or -1 with an exception. */
int dlspy_default_stream(dlspy_state *st, DLDevice dev, const char *pycall, dls_stream_t *out);
/* Drops the torch functions dlspy_default_stream keeps. */
void dlspy_torch_clear(dlspy_state *st);
/* The use_stream() stream of this context as a handle, or {0}. Free (no context lookup) until _stream_var_set
 * first sets the variable: every set goes through it. */
int dlspy_context_stream(dlspy_state *st, dls_stream_t *out);
/* _stream_var_set(stream) -> token: use_stream's variable set (the package sets it only through this). */
PyObject *dlspy_mod_stream_var_set(PyObject *m, PyObject *value);
/* Calls obj.__cuda_stream__() and checks the result (version 0, a handle that can be a stream); sets *out_native. */
int dlspy_cuda_stream_protocol(dlspy_state *st, PyObject *obj, const char *pycall, const char *arg,
                               void **out_native);
/* The native stream an int names (0 and 1 legacy, 2 per-thread, else a pointer); refuses with
 * InvalidArgumentError, before anything reads it, values that cannot be a stream: negative, 3 to 4095, 2**63
 * and above. `shown` is what the message shows as the argument `arg` (the int itself, or the object it came
 * from). */
int dlspy_native_of_int(dlspy_state *st, PyObject *v, PyObject *shown, const char *pycall, const char *arg,
                        void **out);
/* The stream a DLPack `stream` integer names on `device` (-1: {0}); values below 4096 follow DLPack's rules for
 * the device type (dls_dlpack_stream_from_value), larger ones are pointers wrapped through the cache. */
int dlspy_stream_of_dlpack_value(dlspy_state *st, DLDevice device, PyObject *v, const char *pycall, const char *arg,
                                 dls_stream_t *out);
/* Whether this process can read the byte at `addr`, asked of the kernel (nothing faults). A GPU driver's
 * stream or event pointer points at readable host memory; any other would crash the driver that reads it. A
 * readable address may still be no stream: no driver can validate a plausible but dangling pointer. */
bool dlspy_addr_readable(uintptr_t addr);
/* Refuses (InvalidArgumentError) a native stream pointer of a GPU device that this process cannot read: the
 * driver would crash reading it. Every path that hands a native stream to dls_stream_wrap calls this first. */
int dlspy_native_readable(dlspy_state *st, DLDevice device, void *native, const char *pycall);

#endif /* DLSTREAM_PY_STREAMARG_H */
