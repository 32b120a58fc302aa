/* SPDX-License-Identifier: Apache-2.0 */
/* Memory shared with other processes: the handle's bytes, exports and imports (ipc.c). */
#ifndef DLSTREAM_CORE_IPC_H
#define DLSTREAM_CORE_IPC_H

#include "core/buffer.h"
#include "core/ipc_gates.h"
#include "dlstream/ipc.h"

#define DLS__IPC_VERSION 1
#define DLS__IPC_MAX_NDIM 32

/* What a dls_ipc_handle_t holds (host byte order: one machine). */
typedef struct dls__ipc_wire {
  char magic[8];          /* "dlsIPC" */
  uint32_t version;       /* DLS__IPC_VERSION */
  uint32_t wire_size;     /* sizeof(dls__ipc_wire) */
  int32_t device_type;    /* the exporter's backend */
  int32_t device_id;      /* the exporter's device, in its ordinals (messages) */
  uint8_t uuid[16];       /* the exporter's device, as every process names it */
  int64_t pid;            /* the exporting process */
  uint64_t export_id;     /* unique in the exporting process */
  uint64_t size;          /* the buffer's bytes */
  uint64_t offset;        /* from the base of the shared allocation to the buffer */
  uint32_t gate_slot;     /* the word of the gate page the import's close writes */
  uint32_t gate_value;    /* and the value it writes */
  uint8_t mem[DLS__IPC_BYTES];      /* the shared allocation */
  uint8_t gate_mem[DLS__IPC_BYTES]; /* the exporter's gate page */
  uint8_t event[DLS__IPC_BYTES];    /* recorded after the buffer's last write before the export */
  /* A tensor's view of the buffer (dls_tensor_export_ipc); ndim -1: none. */
  int32_t ndim;
  DLDataType dtype;
  uint64_t flags;         /* DLS_TENSOR_* kept by an export */
  uint64_t byte_offset;   /* from the buffer's start to the tensor's data */
  int64_t shape[DLS__IPC_MAX_NDIM];
  int64_t strides[DLS__IPC_MAX_NDIM];
} dls__ipc_wire;
_Static_assert(sizeof(dls__ipc_wire) <= DLS_IPC_HANDLE_SIZE, "the wire fits a handle");

/* ---- exports and imports (ipc.c) ---- */

/* IPC-capable memory on `s`'s device (a borrowed buffer whose release frees it after every import's close). */
DLS__INTERNAL dls_status_t dls__ipc_alloc(dls__stream *s, size_t size, dls__buffer **out);
/* Exports the bytes of `b` (IPC-capable memory, or an alias of it) for one import, ordered on `s` after its last
 * writer; fills every field of `out` but the tensor's. Messages start with `call`. */
DLS__INTERNAL dls_status_t dls__ipc_export(const char *call, dls__buffer *b, dls__stream *s, dls__ipc_wire *out);
/* Reads and checks a handle's bytes. */
DLS__INTERNAL dls_status_t dls__ipc_wire_read(const char *call, const dls_ipc_handle_t *h, dls__ipc_wire *out);
/* Imports a checked wire for work on `s` (its producer): a borrowed buffer whose release closes the import. */
DLS__INTERNAL dls_status_t dls__ipc_import(const char *call, const dls__ipc_wire *w, dls__stream *s,
                                           dls__buffer **out);

#endif /* DLSTREAM_CORE_IPC_H */
