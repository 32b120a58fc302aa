/* SPDX-License-Identifier: Apache-2.0 */
/* Memory shared with another process (dlstream/ipc.h): what is refused, and why, on every backend; the exports a
 * CUDA device makes. Two processes and their ordering: tests/python/test_ipc.py. */
#include <unistd.h>

#include "common.h"
#include "core/ipc.h" /* the handle's layout, to make damaged ones */

TestSuite(ipc, .fini = dlst_fini);

static const DLDataType f32 = {kDLFloat, 32, 1};

/* A handle as another process of this machine would have made it: its wire and the handle's bytes. */
static dls_ipc_handle_t forged(int32_t device_type, int32_t ndim) {
  dls__ipc_wire w;
  memset(&w, 0, sizeof w);
  memcpy(w.magic, "dlsIPC", 7);
  w.version = DLS__IPC_VERSION;
  w.wire_size = sizeof w;
  w.device_type = device_type;
  w.pid = (int64_t)getpid() + 1;
  w.export_id = 1;
  w.size = 64;
  w.gate_value = 1;
  w.ndim = ndim;
  w.dtype = f32;
  w.shape[0] = 16;
  w.strides[0] = 1;
  dls_ipc_handle_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.bytes, &w, sizeof w);
  return h;
}

static dls_ipc_handle_t with(dls_ipc_handle_t h, void (*edit)(dls__ipc_wire *w)) {
  dls__ipc_wire w;
  memcpy(&w, h.bytes, sizeof w);
  edit(&w);
  memcpy(h.bytes, &w, sizeof w);
  return h;
}
static void bad_magic(dls__ipc_wire *w) { w->magic[0] = 'X'; }
static void newer(dls__ipc_wire *w) { w->version = DLS__IPC_VERSION + 1; }
static void too_many_dims(dls__ipc_wire *w) { w->ndim = DLS__IPC_MAX_NDIM + 1; }
static void no_gate(dls__ipc_wire *w) { w->gate_value = 0; }
static void mine(dls__ipc_wire *w) { w->pid = (int64_t)getpid(); }

Test(ipc, cpu_backend_refuses_to_share) {
  dls_stream_t s = dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY);
  dls_buffer_t b = {7};
  dls_tensor_t t = {7};
  FAILS(dls_buffer_alloc_ipc(s, 64, &b), DLS_ERR_NOT_SUPPORTED,
        "dls_buffer_alloc_ipc(size=64): cpu:0 cannot share memory with other processes");
  cr_assert_eq(b.id, 0);
  int64_t shape[1] = {16};
  FAILS(dls_tensor_empty_ipc(s, 1, shape, f32, &t), DLS_ERR_NOT_SUPPORTED, "the cpu backend has no interprocess");
  cr_assert_eq(t.id, 0);
  /* Memory of a CPU device, owned or a tensor's: the backend refuses before the memory's kind is asked. */
  OK(dls_buffer_alloc(s, 64, &b));
  dls_ipc_handle_t h;
  memset(&h, 0xAB, sizeof h);
  FAILS(dls_buffer_export_ipc(b, s, &h), DLS_ERR_NOT_SUPPORTED,
        "dls_buffer_export_ipc: cpu:0 cannot share memory with other processes");
  cr_assert_eq(h.bytes[0], 0, "a failed export leaves the handle zeroed");
  OK(dls_tensor_empty(s, 1, shape, f32, &t));
  FAILS(dls_tensor_export_ipc(t, s, &h), DLS_ERR_NOT_SUPPORTED, "dls_tensor_export_ipc: cpu:0 cannot share");
  OK(dls_tensor_release(t));
  OK(dls_buffer_free(b));
}

Test(ipc, null_and_stale_arguments_are_refused) {
  dls_stream_t s = dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY);
  dls_buffer_t b;
  dls_tensor_t t;
  dls_ipc_handle_t h = forged(kDLCUDA, -1);
  DLDevice d;
  FAILS(dls_buffer_alloc_ipc(s, 64, NULL), DLS_ERR_INVALID_ARGUMENT, "out_buffer=NULL");
  FAILS(dls_buffer_export_ipc(b = (dls_buffer_t){12345}, s, &h), DLS_ERR_INVALID_HANDLE, "buffer");
  FAILS(dls_buffer_export_ipc((dls_buffer_t){0}, s, NULL), DLS_ERR_INVALID_ARGUMENT, "out_handle=NULL");
  FAILS(dls_buffer_import_ipc(NULL, s, &b), DLS_ERR_INVALID_ARGUMENT, "handle=NULL");
  FAILS(dls_buffer_import_ipc(&h, s, NULL), DLS_ERR_INVALID_ARGUMENT, "out_buffer=NULL");
  FAILS(dls_buffer_import_ipc(&h, (dls_stream_t){999}, &b), DLS_ERR_INVALID_HANDLE, "stream");
  FAILS(dls_tensor_import_ipc(NULL, s, &t), DLS_ERR_INVALID_ARGUMENT, "handle=NULL");
  FAILS(dls_tensor_export_ipc((dls_tensor_t){4242}, s, &h), DLS_ERR_INVALID_HANDLE, "tensor");
  FAILS(dls_ipc_handle_device(NULL, &d), DLS_ERR_INVALID_ARGUMENT, "NULL argument");
}

Test(ipc, damaged_handles_are_refused_before_anything_is_mapped) {
  dls_stream_t s = dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY);
  dls_ipc_handle_t h = forged(kDLCUDA, 1);
  dls_buffer_t b = {7};
  dls_tensor_t t = {7};
  dls_ipc_handle_t zeros;
  memset(&zeros, 0, sizeof zeros);
  FAILS(dls_buffer_import_ipc(&zeros, s, &b), DLS_ERR_INVALID_ARGUMENT, "the handle is not one dls_*_export_ipc made");
  cr_assert_eq(b.id, 0);
  dls_ipc_handle_t magic = with(h, bad_magic);
  FAILS(dls_buffer_import_ipc(&magic, s, &b), DLS_ERR_INVALID_ARGUMENT, "its first bytes differ");
  dls_ipc_handle_t n = with(h, newer);
  FAILS(dls_tensor_import_ipc(&n, s, &t), DLS_ERR_VERSION, "export and import with one dlstream");
  cr_assert_eq(t.id, 0);
  dls_ipc_handle_t wide = with(h, too_many_dims), gateless = with(h, no_gate), own = with(h, mine);
  FAILS(dls_buffer_import_ipc(&wide, s, &b), DLS_ERR_INVALID_ARGUMENT, "the handle is damaged (ndim 33");
  FAILS(dls_buffer_import_ipc(&gateless, s, &b), DLS_ERR_INVALID_ARGUMENT, "gate value 0");
  FAILS(dls_buffer_import_ipc(&own, s, &b), DLS_ERR_INVALID_ARGUMENT,
        "the handle was exported by this process");
  /* A sound handle of CUDA memory, on a backend that maps no other process's memory. */
  FAILS(dls_buffer_import_ipc(&h, s, &b), DLS_ERR_NOT_SUPPORTED, "cpu:0 cannot map memory of other processes");
  dls_ipc_handle_t buf = forged(kDLCUDA, -1);
  FAILS(dls_tensor_import_ipc(&buf, s, &t), DLS_ERR_INVALID_ARGUMENT,
        "the handle carries a buffer, not a tensor (dls_buffer_export_ipc made it)");
  cr_assert_eq(b.id, 0);
  cr_assert_eq(t.id, 0);
}

Test(ipc, a_tensor_that_overruns_its_buffer_is_refused) {
  /* The view is checked against the handle's buffer before the stream's backend is asked: CPU suffices. */
  dls_stream_t s = dls_stream_default(dls_cpu(), DLS_STREAM_LEGACY);
  dls_ipc_handle_t h = forged(kDLCPU, 1);
  dls__ipc_wire w;
  memcpy(&w, h.bytes, sizeof w);
  w.shape[0] = 17; /* 68 bytes of a 64-byte buffer */
  memcpy(h.bytes, &w, sizeof w);
  dls_tensor_t t;
  FAILS(dls_tensor_import_ipc(&h, s, &t), DLS_ERR_INVALID_TENSOR, "reaches bytes 0 to 68 of a 64-byte buffer");
  w.shape[0] = 4;
  w.strides[0] = -1; /* below the buffer's start */
  memcpy(h.bytes, &w, sizeof w);
  FAILS(dls_tensor_import_ipc(&h, s, &t), DLS_ERR_INVALID_TENSOR, "of a 64-byte buffer");
}

Test(ipc, the_device_of_a_handle_must_be_visible) {
  dls_ipc_handle_t h = forged(kDLCUDA, -1);
  DLDevice d = {kDLCPU, 5};
  if (dls_backend_probe(kDLCUDA) == DLS_OK)
    cr_skip_test("a CUDA device is visible: the forged handle's UUID (zeros) could be one of them");
  FAILS(dls_ipc_handle_device(&h, &d), DLS_ERR_INVALID_DEVICE, "is not visible in this process");
}

/* ---- CUDA: exports (importing needs another process: tests/python/test_ipc.py) ---- */

static DLDevice cuda_or_skip(void) {
  if (dls_backend_probe(kDLCUDA) != DLS_OK)
    cr_skip_test("%s", dls_last_error());
  return dls_cuda(0);
}

Test(ipc, cuda_refuses_memory_not_made_for_sharing) {
  DLDevice d = cuda_or_skip();
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t pooled, borrowed;
  OK(dls_buffer_alloc(s, 256, &pooled));
  dls_ipc_handle_t h;
  FAILS(dls_buffer_export_ipc(pooled, s, &h), DLS_ERR_NOT_SUPPORTED,
        "comes from the stream-ordered pool (dls_buffer_alloc), which the cuda driver shares only through a file "
        "descriptor; allocate it with dls_buffer_alloc_ipc");
  void *p = NULL;
  OK(dls_buffer_ptr(pooled, &p));
  OK(dls_buffer_borrow(d, p, 256, s, NULL, NULL, &borrowed));
  FAILS(dls_buffer_export_ipc(borrowed, s, &h), DLS_ERR_NOT_SUPPORTED, "is borrowed memory");
  OK(dls_buffer_free(borrowed));
  OK(dls_buffer_free(pooled));
  OK(dls_stream_destroy(s));
}

Test(ipc, cuda_export_names_this_process_and_is_not_imported_here) {
  DLDevice d = cuda_or_skip();
  dls_stream_t s;
  OK(dls_stream_create(d, NULL, &s));
  dls_buffer_t b, again = {7};
  OK(dls_buffer_alloc_ipc(s, 1 << 20, &b));
  dls_ipc_handle_t h;
  OK(dls_buffer_export_ipc(b, s, &h));
  DLDevice where;
  OK(dls_ipc_handle_device(&h, &where));
  cr_assert_eq(where.device_type, kDLCUDA);
  cr_assert_eq(where.device_id, 0);
  FAILS(dls_buffer_import_ipc(&h, s, &again), DLS_ERR_INVALID_ARGUMENT, "exported by this process");
  cr_assert_eq(again.id, 0);
  /* No importer will close this export: its free may not wait for one (the test-only switch). */
  setenv("DLSTREAM_TEST_IPC_NO_WAIT", "1", 1);
  OK(dls_buffer_free(b));
  OK(dls_stream_synchronize(s));
  unsetenv("DLSTREAM_TEST_IPC_NO_WAIT");
  OK(dls_stream_destroy(s));
}
