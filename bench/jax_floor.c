/* SPDX-License-Identifier: Apache-2.0 */
/* The floor of bench_jax.py: an XLA FFI handler that does nothing but launch dlstream's axpy kernel on XLA's
 * stream with cuLaunchKernel (y = a * x + y, x operand 0, y result 0, n from x's shape, a fixed at init). No
 * attribute is read and nothing is checked: what any handler launching that kernel must pay at least.
 *
 * A shared library with its own copy of dlstream (the static library), used only to find the built-in's
 * CUfunction: the very kernel dlstream.jax launches. Benchmarks only; never installed. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "xla/xla_ffi.h"

#define FLOOR_API __attribute__((visibility("default")))

FLOOR_API int dls_jax_floor_init(int device, float a);
FLOOR_API uint64_t dls_jax_floor_executions(void);
FLOOR_API struct XLA_FFI_Error *dls_jax_floor_handler(struct XLA_FFI_CallFrame *frame);

typedef unsigned (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                              unsigned shm, void *stream, void **params, void **extra);

static launch_fn g_launch;
static void *g_function;
static float g_a;
static _Atomic uint64_t g_executions;

/* Finds the axpy kernel on cuda:`device` and cuLaunchKernel. Returns 0, or -1 with the reason printed. */
FLOOR_API int dls_jax_floor_init(int device, float a) {
  dls_function_t fh;
  if (dls_builtin_function(dls_cuda(device), "dls_axpy_f32", &fh) != DLS_OK) {
    fprintf(stderr, "jax_floor: %s\n", dls_last_error());
    return -1;
  }
  g_function = ((dls__function *)dls__handle_peek(DLS_HANDLE_FUNCTION, fh.id))->native;
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  g_launch = cuda ? (launch_fn)dlsym(cuda, "cuLaunchKernel") : NULL;
  if (g_launch == NULL) {
    fprintf(stderr, "jax_floor: no cuLaunchKernel in the loaded libcuda.so.1\n");
    return -1;
  }
  g_a = a;
  return 0;
}

/* How many executions the handler ran. */
FLOOR_API uint64_t dls_jax_floor_executions(void) { return atomic_load(&g_executions); }

FLOOR_API struct XLA_FFI_Error *dls_jax_floor_handler(struct XLA_FFI_CallFrame *frame) {
  dls__xla_call_frame *f = (dls__xla_call_frame *)frame;
  if (f->extension_start != NULL) { /* the metadata call: API version, command-buffer compatible */
    dls__xla_metadata *m = ((dls__xla_metadata_extension *)f->extension_start)->metadata;
    m->api_version.struct_size = DLS__XLA_API_VERSION_SIZE;
    m->api_version.extension_start = NULL;
    m->api_version.major_version = DLS__XLA_API_MAJOR;
    m->api_version.minor_version = DLS__XLA_API_MINOR;
    m->traits = DLS__XLA_TRAIT_COMMAND_BUFFER_COMPATIBLE;
    return NULL;
  }
  dls__xla_stream_get_args sg = {DLS__XLA_STREAM_GET_ARGS_SIZE, NULL, f->ctx, NULL};
  struct XLA_FFI_Error *err = f->api->stream_get(&sg);
  if (err != NULL)
    return err;
  const dls__xla_buffer *x = f->args.args[0], *y = f->rets.rets[0];
  uint64_t n = (uint64_t)x->dims[0];
  void *px = x->data, *py = y->data;
  float a = g_a;
  void *params[4] = {&n, &a, &px, &py};
  atomic_fetch_add_explicit(&g_executions, 1, memory_order_relaxed);
  unsigned rc = g_launch(g_function, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, sg.stream, params, NULL);
  if (rc != 0) {
    dls__xla_error_create_args e = {DLS__XLA_ERROR_CREATE_ARGS_SIZE, NULL, "jax_floor: cuLaunchKernel failed",
                                    DLS__XLA_ERROR_INTERNAL};
    return f->api->error_create(&e);
  }
  return NULL;
}
