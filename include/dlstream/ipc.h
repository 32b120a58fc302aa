/* SPDX-License-Identifier: Apache-2.0 */
/* Memory shared with another process, with its last write and its end ordered on the device.
 *
 * A handle carries the memory and its ordering together. The exporter's stream
 * waits for the buffer's last writer and records an interprocess event; the
 * importer's stream waits for that event before any use of the import (the
 * import's producer, as for any borrowed memory: the hazard rule orders every
 * later use after it and records them). Closing the import (dls_buffer_free)
 * writes, on the device, after every use the importer made of it, a word the
 * exporter's free waits for on the device: the exporter may free the buffer the
 * moment it is done with it, before or after the importer imports or closes,
 * and the memory is reused only once the importer is done. Nothing blocks a
 * host.
 *
 * The importer must be another process on the same machine; the exporter must
 * outlive the importer's use (its dls_shutdown() frees the memory whatever the
 * importers do). Each handle is for one import: export again for each importer.
 * Between the export and the import's close, the exporter's own later writes
 * are not ordered against the importer's uses (nor the importer's writes against
 * the exporter's): hand the buffer over, then free it.
 *
 * CUDA only: the CPU backend (one process, nothing to share) and the HIP backend
 * refuse with DLS_ERR_NOT_SUPPORTED. The memory must come from
 * dls_buffer_alloc_ipc (or dls_tensor_empty_ipc): the stream-ordered pool's
 * memory (dls_buffer_alloc) is shared by CUDA only through a file descriptor,
 * which a handle of bytes cannot carry, and borrowed memory is its owner's. */
#ifndef DLSTREAM_IPC_H
#define DLSTREAM_IPC_H

#include "buffer.h"

/* The handle's size in bytes. Its content is opaque, versioned, and only for a
 * process of the same machine (it names the exporting process). */
#define DLS_IPC_HANDLE_SIZE 1024

/* What travels to the importer (plain bytes: a pipe, a socket, a pickle). */
typedef struct dls_ipc_handle_t {
  uint8_t bytes[DLS_IPC_HANDLE_SIZE];
} dls_ipc_handle_t;

DLS_EXTERN_C_BEGIN

/* Allocates `size` bytes that another process can import, on `stream`'s
 * device: an allocation of its own, usable by work on `stream` (and, as for
 * dls_buffer_alloc, other streams ordered after it). Its free waits for every
 * import's close (above). Owned by caller: dls_buffer_free(). Refused in a
 * capture (DLS_ERR_STATE) and by the CPU and HIP backends. */
DLS_API dls_status_t dls_buffer_alloc_ipc(dls_stream_t stream, size_t size, dls_buffer_t *out_buffer);

/* Exports `buffer` (from dls_buffer_alloc_ipc) for one import: `stream`, a
 * stream of the buffer's device outside any capture, waits for the buffer's
 * last writer (the hazard rule, as a read), then an interprocess event is
 * recorded on it. *out_handle carries the memory, that event and the word the
 * import's close writes. The buffer's free waits for that close. */
DLS_API dls_status_t dls_buffer_export_ipc(dls_buffer_t buffer, dls_stream_t stream, dls_ipc_handle_t *out_handle);

/* Imports a handle another process exported, for work on `stream`'s device
 * (the exporter's device, or a peer of it: peer access is enabled). `stream`
 * waits, on the device, for the exporter's event; it is the buffer's producer,
 * so every use of the import follows that wait. Owned by caller:
 * dls_buffer_free() closes the import (its mapping goes once its uses passed).
 * Refused: a handle of this process, a handle imported already in this process
 * and not closed, a handle of another machine's format (DLS_ERR_VERSION), a
 * device the exporter's is not visible as (DLS_ERR_INVALID_DEVICE). */
DLS_API dls_status_t dls_buffer_import_ipc(const dls_ipc_handle_t *handle, dls_stream_t stream,
                                           dls_buffer_t *out_buffer);

/* The device of this process that holds the exporter's memory (the device whose
 * UUID the handle names): where to import it without a peer mapping. */
DLS_API dls_status_t dls_ipc_handle_device(const dls_ipc_handle_t *handle, DLDevice *out_device);

/* The same for tensors: a compact tensor of IPC-capable memory
 * (dls_tensor_empty's arguments), its export (the handle carries the buffer and
 * the tensor's view of it: dtype, shape, strides, offset and flags) and its
 * import (a tensor of the imported buffer; dls_tensor_release closes it). A
 * tensor import of a handle made by dls_buffer_export_ipc is refused; a buffer
 * import of a tensor's handle takes the whole buffer. */
DLS_API dls_status_t dls_tensor_empty_ipc(dls_stream_t stream, int32_t ndim, const int64_t *shape, DLDataType dtype,
                                          dls_tensor_t *out_tensor);
DLS_API dls_status_t dls_tensor_export_ipc(dls_tensor_t tensor, dls_stream_t stream, dls_ipc_handle_t *out_handle);
DLS_API dls_status_t dls_tensor_import_ipc(const dls_ipc_handle_t *handle, dls_stream_t stream,
                                           dls_tensor_t *out_tensor);

DLS_EXTERN_C_END

#endif /* DLSTREAM_IPC_H */
