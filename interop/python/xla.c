/* SPDX-License-Identifier: Apache-2.0 */
/* The XLA FFI handlers (dlstream/xla.h) handed to Python as capsules, for dlstream.jax to register with JAX. The
 * handlers are this module's own copies, so they see the handles its Functions and Latches hold. */
#include "dlspy.h"
#include "dlstream/xla.h"

/* _xla_handlers() -> {"cpu": capsule, "cuda": capsule, "cuda_nocapture": capsule}: unnamed capsules of the
 * handlers' addresses, the form jax.ffi.register_ffi_target takes (as jax.ffi.pycapsule makes them). */
static PyObject *py_xla_handlers(PyObject *m, PyObject *unused) {
  (void)m, (void)unused;
  PyObject *cpu = PyCapsule_New((void *)(uintptr_t)&dls_xla_call_cpu, NULL, NULL);
  PyObject *cuda = cpu ? PyCapsule_New((void *)(uintptr_t)&dls_xla_call_cuda, NULL, NULL) : NULL;
  PyObject *nocap = cuda ? PyCapsule_New((void *)(uintptr_t)&dls_xla_call_cuda_nocapture, NULL, NULL) : NULL;
  PyObject *d = nocap ? Py_BuildValue("{sOsOsO}", "cpu", cpu, "cuda", cuda, "cuda_nocapture", nocap) : NULL;
  Py_XDECREF(cpu);
  Py_XDECREF(cuda);
  Py_XDECREF(nocap);
  return d;
}

/* _xla_release(): drops the CUDA handler's stream wrappers (tests' leak checks; no XLA call may be running). */
static PyObject *py_xla_release(PyObject *m, PyObject *unused) {
  (void)m, (void)unused;
  if (!atomic_load(&dlspy_dead))
    (void)dls_xla_release();
  Py_RETURN_NONE;
}

/* _xla_stats() -> {"instantiations": n, "executions": n, "stream_wraps": n} (dls_xla_stats). */
static PyObject *py_xla_stats(PyObject *m, PyObject *unused) {
  (void)m, (void)unused;
  dls_xla_stats_t s = dls_xla_stats();
  return Py_BuildValue("{sKsKsK}", "instantiations", (unsigned long long)s.instantiations, "executions",
                       (unsigned long long)s.executions, "stream_wraps", (unsigned long long)s.stream_wraps);
}

PyMethodDef dlspy_xla_methods[] = {
    {"_xla_stats", py_xla_stats, METH_NOARGS, "What the XLA handlers did: instantiations, executions, stream wraps."},
    {"_xla_handlers", py_xla_handlers, METH_NOARGS, "The XLA FFI handlers as capsules, by platform (dlstream.jax)."},
    {"_xla_release", py_xla_release, METH_NOARGS, "Destroys the stream wrappers the CUDA XLA handler keeps."},
    {NULL, NULL, 0, NULL},
};
