/* SPDX-License-Identifier: Apache-2.0 */
/* Tensors and the DLPack exchange: import with full validation, borrowed
 * views, owned tensors, export, and DLPack stream values.
 *
 * A tensor is a DLTensor view over a buffer (buffer.h): an owned one (from
 * dls_tensor_empty) or a borrowed one (an imported managed tensor, whose
 * deleter is the release). Uses on streams other than the producer's are
 * recorded like any buffer use, and releasing follows the deallocation rule:
 * the producer's deleter runs exactly once, after every stream that used the
 * tensor has passed, never from a driver thread. */
#ifndef DLSTREAM_TENSOR_H
#define DLSTREAM_TENSOR_H

#include "runtime.h"

/* Tensor flags (a subset of the DLPack flag bits, same values). */
#define DLS_TENSOR_READ_ONLY 1u /* DLPACK_FLAG_BITMASK_READ_ONLY */
#define DLS_TENSOR_IS_COPIED 2u /* DLPACK_FLAG_BITMASK_IS_COPIED */

/* DLPack stream value meaning "do not synchronize". */
#define DLS_DLPACK_STREAM_NO_SYNC (-1)

DLS_EXTERN_C_BEGIN

/* Imports a versioned managed tensor produced on `producer` (the stream the
 * producer ordered its work before; {0} means the device's legacy stream).
 * Steals `managed`: its deleter runs exactly once, also on every error path
 * (a NULL deleter is allowed). Validation failures give
 * DLS_ERR_INVALID_TENSOR (or DLS_ERR_VERSION for a newer major version, in
 * which case no field but the deleter is read) with the field and value in
 * the message. Owned by caller: dls_tensor_release(). */
DLS_API dls_status_t dls_tensor_import_versioned(DLManagedTensorVersioned *managed, dls_stream_t producer,
                                                 dls_tensor_t *out_tensor);

/* Same for a legacy (pre-1.0) managed tensor; it is never read-only. */
DLS_API dls_status_t dls_tensor_import_legacy(DLManagedTensor *managed, dls_stream_t producer,
                                              dls_tensor_t *out_tensor);

/* A borrowed view of a plain DLTensor, as a C extension receives one: the
 * metadata is copied and validated, the memory is not owned (its owner must
 * keep it alive while work queued through the view may run). `flags` takes
 * DLS_TENSOR_READ_ONLY. Owned by caller: dls_tensor_release(). */
DLS_API dls_status_t dls_tensor_view(const DLTensor *tensor, uint64_t flags, dls_stream_t producer,
                                     dls_tensor_t *out_tensor);

/* Validates a DLTensor as the importers do, without importing it. */
DLS_API dls_status_t dls_tensor_validate(const DLTensor *tensor);

/* A new compact row-major tensor that dlstream owns, allocated stream-ordered
 * on `stream` (whose device it lives on). Owned by caller: dls_tensor_release(). */
DLS_API dls_status_t dls_tensor_empty(dls_stream_t stream, int32_t ndim, const int64_t *shape, DLDataType dtype,
                                      dls_tensor_t *out_tensor);

/* Releases the handle, in stream order (the rule above). {0}: no-op. */
DLS_API dls_status_t dls_tensor_release(dls_tensor_t tensor);

/* The tensor's view: data, device, shape, strides (never NULL: compact strides
 * are filled in), byte_offset. Borrowed: valid while the handle is. */
DLS_API dls_status_t dls_tensor_dltensor(dls_tensor_t tensor, const DLTensor **out_view);

/* DLS_TENSOR_* flags. */
DLS_API dls_status_t dls_tensor_flags(dls_tensor_t tensor, uint64_t *out_flags);

/* Address of the first element (data + byte_offset). */
DLS_API dls_status_t dls_tensor_data(dls_tensor_t tensor, void **out_ptr);

/* Declares that work queued on `stream` so far reads or writes the tensor
 * (dls_buffer_record_use). */
DLS_API dls_status_t dls_tensor_record_use(dls_tensor_t tensor, dls_stream_t stream, dls_access_t access);

/* The producer side of the handshake: makes `consumer` wait (device side)
 * for all work queued so far that uses the tensor, and adds `consumer` to its
 * uses. {0} or the same stream as the only user: nothing to do. */
DLS_API dls_status_t dls_tensor_order_before(dls_tensor_t tensor, dls_stream_t consumer);

/* Exports as a new versioned managed tensor (DLPack 1.1) ordered before
 * `consumer` (as dls_tensor_order_before; {0}: no sync). The export holds the
 * memory: its deleter frees in stream order once the handle is also released.
 * Owned by the consumer: call its deleter once. */
DLS_API dls_status_t dls_tensor_export_versioned(dls_tensor_t tensor, dls_stream_t consumer,
                                                 DLManagedTensorVersioned **out_managed);

/* Same as a legacy managed tensor (for consumers that ask for less than 1.0).
 * A read-only tensor cannot be exported this way (legacy has no flag):
 * DLS_ERR_READ_ONLY. */
DLS_API dls_status_t dls_tensor_export_legacy(dls_tensor_t tensor, dls_stream_t consumer,
                                              DLManagedTensor **out_managed);

/* The DLPack integer for a stream: CUDA 1 legacy, 2 per-thread, else the
 * CUstream pointer; ROCm 0 for the default stream, else the pointer; CPU: no
 * stream exists in DLPack, DLS_ERR_INVALID_ARGUMENT. */
DLS_API dls_status_t dls_dlpack_stream_value(dls_stream_t stream, int64_t *out_value);

/* The stream a DLPack integer names on `device`. -1: *out = {0} (no sync).
 * CUDA: 0 rejected (ambiguous), 1 legacy, 2 per-thread, else wraps the
 * pointer; ROCm: 0 default, 1 and 2 rejected. A wrapped stream is owned by
 * caller (dls_stream_destroy; a no-op for default handles). */
DLS_API dls_status_t dls_dlpack_stream_from_value(DLDevice device, int64_t value, dls_stream_t *out_stream);

/* Size in bytes of one element of `dtype` (lanes included; sub-byte rounded
 * up per element), or 0 if the dtype is invalid. */
DLS_API size_t dls_dtype_size(DLDataType dtype);

DLS_EXTERN_C_END

#endif /* DLSTREAM_TENSOR_H */
