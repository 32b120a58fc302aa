/* SPDX-License-Identifier: Apache-2.0 */
/* Built-in kernels on every backend: fill, axpy, strided copy, converting copy, spin, latch.
 *
 * The memory arguments (`dst`, `x`, `y`, `src`) take a dls_arg_t made by
 * dls_arg_buffer, dls_arg_tensor(_in) or dls_arg_ptr, so buffer and tensor
 * uses are recorded as for any launch. spin and latch exist to make ordering
 * observable in tests: a latch holds its stream until the host opens it. */
#ifndef DLSTREAM_BUILTIN_H
#define DLSTREAM_BUILTIN_H

#include "launch.h"

/* Dimensions a strided copy handles. */
#define DLS_COPY_MAX_DIMS 8

/* The argument block of the dls_copy_strided kernel, passed by value. */
typedef struct dls_copy_desc_t {
  uint32_t ndim;                         /* 0..DLS_COPY_MAX_DIMS */
  uint32_t elem_size;                    /* bytes per element, >= 1 */
  int64_t shape[DLS_COPY_MAX_DIMS];      /* extents */
  int64_t dst_strides[DLS_COPY_MAX_DIMS]; /* in elements */
  int64_t src_strides[DLS_COPY_MAX_DIMS]; /* in elements */
} dls_copy_desc_t;

/* The argument block of the dls_convert kernel, passed by value: a strided copy that converts each element from
 * src_dtype to dst_dtype (dls_copy_convert). */
typedef struct dls_convert_desc_t {
  uint32_t ndim;                          /* 0..DLS_COPY_MAX_DIMS */
  DLDataType dst_dtype;                   /* one lane: bool, int8..int64, uint8..uint64, float16/32/64, bfloat16 */
  DLDataType src_dtype;
  uint32_t reserved;                      /* 0 */
  int64_t shape[DLS_COPY_MAX_DIMS];       /* extents */
  int64_t dst_strides[DLS_COPY_MAX_DIMS]; /* in dst elements */
  int64_t src_strides[DLS_COPY_MAX_DIMS]; /* in src elements */
} dls_convert_desc_t;

DLS_EXTERN_C_BEGIN

/* The built-in function of that name on a device, for dls_launch:
 *   "dls_fill"         (dst, u64 count, u32 elem_size, u64 pattern)
 *   "dls_axpy_f32"     (u64 n, f32 a, x, y)         y[i] = a * x[i] + y[i]
 *   "dls_axpy_f64"     (u64 n, f64 a, x, y)
 *   "dls_copy_strided" (dst, src, bytes dls_copy_desc_t)
 *   "dls_convert"      (dst, src, bytes dls_convert_desc_t)
 *   "dls_spin"         (u64 nanoseconds)
 *   "dls_latch"        (ptr flag, u64 timeout_ns, ptr timed_out)
 *   "dls_empty"        ()                           does nothing (launch overhead)
 * Owned by the runtime: valid until dls_shutdown(). CUDA built without nvcc:
 * DLS_ERR_UNAVAILABLE. Every launch of a built-in (its own call, dls_launch)
 * checks its arguments: kinds, counts inside every buffer and tensor, and the
 * element types of tensors (float32 for dls_axpy_f32's x and y, elem_size
 * bytes for dls_fill, the descriptor's for the copies); a raw pointer's type
 * and extent are the caller's word. */
DLS_API dls_status_t dls_builtin_function(DLDevice device, const char *name, dls_function_t *out_function);

/* Sets `count` elements of `elem_size` bytes (1, 2, 4 or 8) to the value at
 * `value` (elem_size bytes). */
DLS_API dls_status_t dls_fill(dls_stream_t stream, dls_arg_t dst, uint64_t count, uint32_t elem_size,
                              const void *value);

/* y[i] = a * x[i] + y[i] for i < n, float32 / float64. */
DLS_API dls_status_t dls_axpy_f32(dls_stream_t stream, uint64_t n, float a, dls_arg_t x, dls_arg_t y);
DLS_API dls_status_t dls_axpy_f64(dls_stream_t stream, uint64_t n, double a, dls_arg_t x, dls_arg_t y);

/* Copies an up-to-8-dimensional strided view element by element, the bits
 * of `elem_size` bytes each. Strides are in elements and may be negative or
 * zero (broadcast source). A tensor's element type must be elem_size bytes,
 * and two tensors must have one type: between types, dls_copy_convert. */
DLS_API dls_status_t dls_copy_strided(dls_stream_t stream, dls_arg_t dst, dls_arg_t src,
                                      const dls_copy_desc_t *desc);

/* Copies a strided view converting each element from desc->src_dtype to
 * desc->dst_dtype as NumPy's astype does, under NumPy's same_kind casting: a
 * cast stays in its kind or goes up bool < unsigned < signed < float (an
 * integer narrows or changes sign by wrapping, a float rounds to nearest
 * even and overflows to an infinity). A cast down a kind (float to integer,
 * signed to unsigned, anything to bool) is refused with
 * DLS_ERR_INVALID_ARGUMENT naming both types and the rule; a type it does
 * not convert (complex, float8, lanes) with DLS_ERR_NOT_SUPPORTED. Tensors
 * must have the descriptor's types. One type on both sides is a plain copy. */
DLS_API dls_status_t dls_copy_convert(dls_stream_t stream, dls_arg_t dst, dls_arg_t src,
                                      const dls_convert_desc_t *desc);

/* Busy-waits on the stream for `nanoseconds` (one GPU thread on CUDA). */
DLS_API dls_status_t dls_spin(dls_stream_t stream, uint64_t nanoseconds);

/* A latch: a host-visible flag (host-mapped memory on GPUs). Owned by
 * caller: dls_latch_destroy(). */
DLS_API dls_status_t dls_latch_create(DLDevice device, dls_latch_t *out_latch);

/* Queues a wait: `stream` is held until the latch is opened, or gives up
 * after `timeout_ns` and marks the latch timed out (dls_latch_status). */
DLS_API dls_status_t dls_latch_wait(dls_latch_t latch, dls_stream_t stream, uint64_t timeout_ns);

/* Opens the latch: every queued and future wait on it passes. */
DLS_API dls_status_t dls_latch_open(dls_latch_t latch);

/* DLS_OK if no wait on the latch has timed out; DLS_ERR_TIMEOUT (with a
 * message) if one has. */
DLS_API dls_status_t dls_latch_status(dls_latch_t latch);

/* Opens the latch (so no stream stays held), then frees it once every wait
 * queued on it has passed. {0}: no-op. */
DLS_API dls_status_t dls_latch_destroy(dls_latch_t latch);

DLS_EXTERN_C_END

#endif /* DLSTREAM_BUILTIN_H */
