/* SPDX-License-Identifier: Apache-2.0 */
/* Tensors shared with another process: Tensor.ipc_handle() and dlstream.from_ipc() over dlstream/ipc.h. */
#include <string.h>

#include "args.h"
#include "errors.h"
#include "call/streamarg.h"

/* The stream a call names (`obj`: a stream argument, or NULL/None), else the use_stream() stream when it is on
 * `dev`, else {0}. */
static int named_stream(dlspy_state *st, PyObject *obj, DLDevice dev, const char *pycall, dls_stream_t *out) {
  out->id = 0;
  if (dlspy_stream_resolve(st, obj, dev, pycall, "stream", out) != 0)
    return -1;
  return out->id != 0 ? 0 : dlspy_context_stream_on(st, dev, out);
}

static PyObject *tensor_ipc_handle(PyObject *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames) {
  static const char pycall[] = "Tensor.ipc_handle";
  dlspy_state *st = PyType_GetModuleState(cls);
  TensorObject *t = (TensorObject *)self;
  static const char *const names[] = {"stream", NULL};
  PyObject *a[1];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 1, a) != 0 || dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  dls_stream_t s;
  if (named_stream(st, a[0], t->device, pycall, &s) != 0) /* runs Python code: the tensor is looked up after */
    return NULL;
  if (t->handle.id == 0)
    return dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s: the tensor was released", pycall);
  dls__ext_tensor ti;
  dls_status_t rc = dls__ext_tensor_get(t->handle, pycall, "self", &ti);
  uint64_t temp = 0;
  if (rc == DLS_OK && s.id == 0) { /* its allocation stream, as the tensor's other calls default to */
    if (ti.producer == NULL)
      return dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s: the tensor's memory has no stream: pass stream=",
                          pycall);
    dls__ext_stream_ref(ti.producer); /* the handle takes this reference over */
    rc = dls__ext_stream_handle(ti.producer, &s, &temp);
    if (rc != DLS_OK || temp == 0)
      dls__ext_stream_unref(ti.producer);
  }
  dls_ipc_handle_t h;
  if (rc == DLS_OK)
    rc = dls_tensor_export_ipc(t->handle, s, &h);
  if (temp != 0)
    dls__ext_stream_temp_end(temp);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  return PyBytes_FromStringAndSize((const char *)h.bytes, sizeof h.bytes);
}

static PyMethodDef g_tensor_ipc_method = {
    "ipc_handle", (PyCFunction)(void (*)(void))tensor_ipc_handle, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
    "ipc_handle($self, *, stream=None)\n--\n\n"
    "Exports this tensor to one other process: the bytes dlstream.from_ipc() imports there (send them over a pipe, "
    "a socket, a queue). The tensor must be of memory made for sharing (dlstream.empty(..., ipc=True)) on a CUDA "
    "device.\n\n"
    "Asynchronous: `stream` (default: the use_stream() stream, else the tensor's allocation stream) waits, on the "
    "device, for the tensor's last writer, and the importer's first use waits for that point; the host never waits. "
    "close() may follow at once: the memory is reused only after the importer closed its tensor and every use it "
    "made of it has run. Each handle is for one import."};

static PyObject *from_ipc(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char pycall[] = "from_ipc";
  dlspy_state *st = dlspy_state_of_module(module);
  static const char *const names[] = {"handle", "stream", NULL};
  PyObject *a[2];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 1, a) != 0)
    return NULL;
  if (a[0] == NULL)
    return dlspy_type_error(st, "from_ipc() missing its argument 'handle'");
  if (dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  dls_ipc_handle_t h;
  Py_buffer view;
  if (PyObject_GetBuffer(a[0], &view, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    return dlspy_type_error(st, "from_ipc(handle=%R): expected the bytes Tensor.ipc_handle() returned", a[0]);
  }
  bool fits = view.len == (Py_ssize_t)sizeof h.bytes;
  if (fits)
    memcpy(h.bytes, view.buf, sizeof h.bytes);
  Py_ssize_t len = view.len;
  PyBuffer_Release(&view);
  if (!fits)
    return dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "from_ipc(handle=<%zd bytes>): a handle is %d bytes", len,
                        DLS_IPC_HANDLE_SIZE);
  DLDevice dev;
  dls_status_t rc = dls_ipc_handle_device(&h, &dev);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  dls_stream_t s;
  if (named_stream(st, a[1], dev, pycall, &s) != 0)
    return NULL;
  if (s.id == 0)
    s = dls_stream_default(dev, DLS_STREAM_LEGACY);
  dls_tensor_t t;
  rc = dls_tensor_import_ipc(&h, s, &t);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, pycall);
  return dlspy_tensor_wrap(st, t);
}

PyMethodDef dlspy_ipc_methods[] = {
    {"from_ipc", (PyCFunction)(void (*)(void))from_ipc, METH_FASTCALL | METH_KEYWORDS,
     "from_ipc($module, handle, *, stream=None)\n--\n\n"
     "The tensor another process exported with Tensor.ipc_handle(): the same device memory, mapped here.\n\n"
     "Asynchronous: `stream` (default: the use_stream() stream, else the legacy default stream of the device that "
     "holds the memory) waits, on the device, for the exporter's last write, and every use of the tensor follows "
     "that wait; the host never waits. close() (or the tensor's end) writes, on the device after every use made of "
     "it here, the word the exporter's free waits for, and unmaps the memory once those uses have run. A handle is "
     "imported once, in another process than its exporter's."},
    {NULL, NULL, 0, NULL},
};

int dlspy_ipc_init(dlspy_state *st) {
  PyObject *descr = PyDescr_NewMethod(st->TensorType, &g_tensor_ipc_method);
  if (descr == NULL)
    return -1;
  int rc = PyObject_SetAttrString((PyObject *)st->TensorType, "ipc_handle", descr);
  Py_DECREF(descr);
  return rc;
}
