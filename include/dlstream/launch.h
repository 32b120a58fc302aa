/* SPDX-License-Identifier: Apache-2.0 */
/* Modules, functions and typed launches, shared by every backend. */
#ifndef DLSTREAM_LAUNCH_H
#define DLSTREAM_LAUNCH_H

#include <string.h>

#include "runtime.h"

/* Grid and block sizes, and dynamic shared memory, of one launch. */
typedef struct dls_launch_config_t {
  uint32_t grid[3];          /* blocks in x, y, z; each >= 1 */
  uint32_t block[3];         /* threads per block in x, y, z; each >= 1 */
  uint32_t shared_mem_bytes; /* dynamic shared memory per block */
} dls_launch_config_t;

/* The kinds of launch argument. */
typedef enum dls_arg_kind_t {
  DLS_ARG_I32 = 1,
  DLS_ARG_I64 = 2,
  DLS_ARG_U32 = 3,
  DLS_ARG_U64 = 4,
  DLS_ARG_F32 = 5,
  DLS_ARG_F64 = 6,
  DLS_ARG_PTR = 7,       /* raw pointer: passed as is, no use recorded */
  DLS_ARG_BUFFER = 8,    /* buffer: its pointer; device checked, use recorded */
  DLS_ARG_TENSOR = 9,    /* tensor the kernel may write: data + byte_offset */
  DLS_ARG_TENSOR_IN = 10, /* tensor the kernel only reads (read-only tensors allowed) */
  DLS_ARG_BYTES = 11,    /* `size` bytes at `bytes`, passed by value (a struct) */
  DLS_ARG_BUFFER_IN = 12 /* buffer the kernel only reads */
} dls_arg_kind_t;

/* One launch argument. Build it with the dls_arg_* helpers below. */
typedef struct dls_arg_t {
  int32_t kind;  /* dls_arg_kind_t */
  uint32_t size; /* bytes, for DLS_ARG_BYTES only */
  union {
    int32_t i32;
    int64_t i64;
    uint32_t u32;
    uint64_t u64;
    float f32;
    double f64;
    void *ptr;
    dls_buffer_t buffer;
    dls_tensor_t tensor;
    const void *bytes; /* borrowed for the call */
  } v;
} dls_arg_t;

/* The most arguments one launch takes. */
#define DLS_MAX_ARGS 64
/* The most bytes of all arguments of one launch together. */
#define DLS_MAX_ARG_BYTES 4096

/* Signature of a host function: the CPU backend's kernel. `args[i]` points
 * at the value of argument i (an int32_t for DLS_ARG_I32, a void * for
 * buffers, tensors and pointers, the bytes for DLS_ARG_BYTES), as CUDA's
 * kernelParams do. Returns 0, or non-zero to report a failure on the stream. */
typedef int (*dls_host_kernel)(const dls_launch_config_t *config, void *const *args, int nargs);

DLS_EXTERN_C_BEGIN

/* Loads a module from an image in memory: cubin, fatbin or NUL-terminated PTX
 * on CUDA; a code object on ROCm. The image is borrowed for the call.
 * Owned by caller: dls_module_unload(). CPU: DLS_ERR_NOT_SUPPORTED (use
 * dls_function_from_host). */
DLS_API dls_status_t dls_module_load(DLDevice device, const void *image, size_t size,
                                     dls_module_t *out_module);

/* Loads a module from a file (same formats). */
DLS_API dls_status_t dls_module_load_file(DLDevice device, const char *path, dls_module_t *out_module);

/* Unloads a module; its functions become stale. {0}: no-op. */
DLS_API dls_status_t dls_module_unload(dls_module_t module);

/* Looks a kernel up by its (unmangled, extern "C") name, or by a name
 * expression given to dls_module_compile. The function is owned by the
 * module: it becomes stale when the module is unloaded. Looking the same
 * name up again in the same module (from any thread) gives the same handle,
 * without asking the driver: a lookup per launch costs no memory. A name
 * expression and its lowered name are two names, with a handle each. */
DLS_API dls_status_t dls_module_function(dls_module_t module, const char *name,
                                         dls_function_t *out_function);

/* Makes a function of a host C function on a CPU device. Owned by caller:
 * dls_function_destroy(). */
DLS_API dls_status_t dls_function_from_host(DLDevice device, const char *name, dls_host_kernel fn,
                                            dls_function_t *out_function);

/* Destroys a function made by dls_function_from_host. Functions of a module
 * are destroyed with it: DLS_ERR_STATE for those. {0}: no-op. */
DLS_API dls_status_t dls_function_destroy(dls_function_t function);

/* The function's name. Borrowed: valid while the function is. */
DLS_API dls_status_t dls_function_name(dls_function_t function, const char **out_name);

/* Queues the function on `stream` with typed arguments. Every buffer and
 * tensor argument must live on the stream's device; its use on `stream` is
 * recorded (the deallocation rule). A tensor passed as DLS_ARG_TENSOR must
 * not be read-only. Nothing is queued when a check fails. */
DLS_API dls_status_t dls_launch(dls_function_t function, dls_stream_t stream,
                                const dls_launch_config_t *config, const dls_arg_t *args, size_t nargs);

DLS_EXTERN_C_END

/* ---- argument helpers ---- */
static inline dls_arg_t dls_arg_i32(int32_t x) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_I32; a.v.i32 = x; return a; }
static inline dls_arg_t dls_arg_i64(int64_t x) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_I64; a.v.i64 = x; return a; }
static inline dls_arg_t dls_arg_u32(uint32_t x) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_U32; a.v.u32 = x; return a; }
static inline dls_arg_t dls_arg_u64(uint64_t x) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_U64; a.v.u64 = x; return a; }
static inline dls_arg_t dls_arg_f32(float x) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_F32; a.v.f32 = x; return a; }
static inline dls_arg_t dls_arg_f64(double x) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_F64; a.v.f64 = x; return a; }
static inline dls_arg_t dls_arg_ptr(void *x) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_PTR; a.v.ptr = x; return a; }
static inline dls_arg_t dls_arg_buffer(dls_buffer_t x) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_BUFFER; a.v.buffer = x; return a; }
static inline dls_arg_t dls_arg_buffer_in(dls_buffer_t x) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_BUFFER_IN; a.v.buffer = x; return a; }
static inline dls_arg_t dls_arg_tensor(dls_tensor_t x) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_TENSOR; a.v.tensor = x; return a; }
static inline dls_arg_t dls_arg_tensor_in(dls_tensor_t x) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_TENSOR_IN; a.v.tensor = x; return a; }
static inline dls_arg_t dls_arg_bytes(const void *p, uint32_t n) { dls_arg_t a; memset(&a, 0, sizeof a); a.kind = DLS_ARG_BYTES; a.size = n; a.v.bytes = p; return a; }

/* A 1-D config: `blocks` blocks of `threads` threads, no shared memory. */
static inline dls_launch_config_t dls_config_1d(uint32_t blocks, uint32_t threads) {
  dls_launch_config_t c;
  c.grid[0] = blocks; c.grid[1] = 1; c.grid[2] = 1;
  c.block[0] = threads; c.block[1] = 1; c.block[2] = 1;
  c.shared_mem_bytes = 0;
  return c;
}

#endif /* DLSTREAM_LAUNCH_H */
