/* SPDX-License-Identifier: Apache-2.0 */
/* Our own declarations of the XLA FFI C ABI subset dlstream's handler uses (XLA's xla/ffi/api/c_api.h, API 0.3).
 *
 * Written from the published layout so no JAX or XLA header is needed to build. Names carry a dls__xla_ prefix
 * so this header coexists with XLA's in one translation unit; the opaque types use XLA's struct tags, so pointers
 * to them are XLA's own. tests/c/test_xla_decls.c checks every value, size and offset here against the header
 * `jax.ffi.include_dir()` ships, where JAX is installed.
 *
 * Versioning (XLA's rule): every struct starts with its size; fields are only appended; a handler reports the
 * API version it was written for when XLA asks for its metadata. */
#ifndef DLSTREAM_XLA_FFI_H
#define DLSTREAM_XLA_FFI_H

#include <stddef.h>
#include <stdint.h>

/* The API version these declarations describe (XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR). */
#define DLS__XLA_API_MAJOR 0
#define DLS__XLA_API_MINOR 3

/* The size XLA expects in a struct's struct_size: up to the end of its last field of this version. */
#define DLS__XLA_STRUCT_SIZE(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

/* ---- opaque types: XLA's own tags ---- */
struct XLA_FFI_Error;            /* an error; owned by whoever receives it */
struct XLA_FFI_ExecutionContext; /* per-call state (stream, device) */
struct XLA_FFI_Future;           /* an asynchronous result (unused) */
struct XLA_FFI_InternalApi;      /* XLA's internals (unused) */

/* ---- enums (XLA's are plain C enums: int-sized here) ---- */
#define DLS__XLA_EXTENSION_METADATA 1 /* XLA_FFI_Extension_Metadata */

#define DLS__XLA_STAGE_INSTANTIATE 0 /* XLA_FFI_ExecutionStage_* */
#define DLS__XLA_STAGE_PREPARE 1
#define DLS__XLA_STAGE_INITIALIZE 2
#define DLS__XLA_STAGE_EXECUTE 3

#define DLS__XLA_ARG_BUFFER 1 /* XLA_FFI_ArgType_BUFFER */
#define DLS__XLA_RET_BUFFER 1 /* XLA_FFI_RetType_BUFFER */

#define DLS__XLA_ATTR_ARRAY 1 /* XLA_FFI_AttrType_* */
#define DLS__XLA_ATTR_DICTIONARY 2
#define DLS__XLA_ATTR_SCALAR 3
#define DLS__XLA_ATTR_STRING 4

#define DLS__XLA_TRAIT_COMMAND_BUFFER_COMPATIBLE 1u /* XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE */

/* XLA_FFI_Error_Code (absl's status codes): X(name, value). */
#define DLS__XLA_ERROR_CODES(X) \
  X(OK, 0)                      \
  X(CANCELLED, 1)               \
  X(UNKNOWN, 2)                 \
  X(INVALID_ARGUMENT, 3)        \
  X(DEADLINE_EXCEEDED, 4)       \
  X(NOT_FOUND, 5)               \
  X(ALREADY_EXISTS, 6)          \
  X(PERMISSION_DENIED, 7)       \
  X(RESOURCE_EXHAUSTED, 8)      \
  X(FAILED_PRECONDITION, 9)     \
  X(ABORTED, 10)                \
  X(OUT_OF_RANGE, 11)           \
  X(UNIMPLEMENTED, 12)          \
  X(INTERNAL, 13)               \
  X(UNAVAILABLE, 14)            \
  X(DATA_LOSS, 15)              \
  X(UNAUTHENTICATED, 16)
#define DLS__XLA_ERROR_ENUM(name, value) DLS__XLA_ERROR_##name = value,
enum { DLS__XLA_ERROR_CODES(DLS__XLA_ERROR_ENUM) };
#undef DLS__XLA_ERROR_ENUM

/* XLA_FFI_DataType (xla::PrimitiveType's numbers) of the element types a scalar or array attribute may have:
 * X(name, value, bytes). */
#define DLS__XLA_DATA_TYPES(X) \
  X(PRED, 1, 1)                \
  X(S8, 2, 1)                  \
  X(S16, 3, 2)                 \
  X(S32, 4, 4)                 \
  X(S64, 5, 8)                 \
  X(U8, 6, 1)                  \
  X(U16, 7, 2)                 \
  X(U32, 8, 4)                 \
  X(U64, 9, 8)                 \
  X(F16, 10, 2)                \
  X(F32, 11, 4)                \
  X(F64, 12, 8)                \
  X(C64, 15, 8)                 \
  X(BF16, 16, 2)                \
  X(C128, 18, 16)
#define DLS__XLA_DTYPE_ENUM(name, value, bytes) DLS__XLA_DTYPE_##name = value,
enum { DLS__XLA_DATA_TYPES(DLS__XLA_DTYPE_ENUM) };
#undef DLS__XLA_DTYPE_ENUM

/* ---- structs ---- */

/* XLA_FFI_Extension_Base: a link in a chain of extensions. */
typedef struct dls__xla_extension {
  size_t struct_size;
  int type; /* DLS__XLA_EXTENSION_* */
  struct dls__xla_extension *next;
} dls__xla_extension;

/* XLA_FFI_Api_Version. */
typedef struct dls__xla_api_version {
  size_t struct_size;
  dls__xla_extension *extension_start;
  int major_version;
  int minor_version;
} dls__xla_api_version;

/* XLA_FFI_ByteSpan: a string that need not end in NUL. */
typedef struct dls__xla_span {
  const char *ptr;
  size_t len;
} dls__xla_span;

/* XLA_FFI_Scalar: an attribute holding one value. */
typedef struct dls__xla_scalar {
  int dtype; /* DLS__XLA_DTYPE_* */
  void *value;
} dls__xla_scalar;

/* XLA_FFI_Array: an attribute holding a dense 1-D array. */
typedef struct dls__xla_array {
  int dtype; /* DLS__XLA_DTYPE_* */
  size_t size; /* elements */
  void *data;
} dls__xla_array;

/* XLA_FFI_Buffer: an operand or result. */
typedef struct dls__xla_buffer {
  size_t struct_size;
  dls__xla_extension *extension_start;
  int dtype;      /* XLA_FFI_DataType */
  void *data;     /* device memory (host memory on XLA:CPU) */
  int64_t rank;
  int64_t *dims;  /* rank entries */
} dls__xla_buffer;

/* XLA_FFI_Args: the operands. */
typedef struct dls__xla_args {
  size_t struct_size;
  dls__xla_extension *extension_start;
  int64_t size;
  int *types;   /* DLS__XLA_ARG_*, size entries */
  void **args;  /* dls__xla_buffer * for DLS__XLA_ARG_BUFFER */
} dls__xla_args;

/* XLA_FFI_Rets: the results. */
typedef struct dls__xla_rets {
  size_t struct_size;
  dls__xla_extension *extension_start;
  int64_t size;
  int *types;   /* DLS__XLA_RET_*, size entries */
  void **rets;  /* dls__xla_buffer * for DLS__XLA_RET_BUFFER */
} dls__xla_rets;

/* XLA_FFI_Attrs: named attributes, sorted by name. */
typedef struct dls__xla_attrs {
  size_t struct_size;
  dls__xla_extension *extension_start;
  int64_t size;
  int *types;            /* DLS__XLA_ATTR_*, size entries */
  dls__xla_span **names; /* size entries */
  void **attrs;          /* dls__xla_scalar *, dls__xla_array *, dls__xla_span * ... by type */
} dls__xla_attrs;

struct dls__xla_api;

/* XLA_FFI_CallFrame: what a handler receives. */
typedef struct dls__xla_call_frame {
  size_t struct_size;
  dls__xla_extension *extension_start; /* the metadata extension when XLA asks for metadata */
  const struct dls__xla_api *api;      /* NULL in a metadata call */
  struct XLA_FFI_ExecutionContext *ctx;
  int stage; /* DLS__XLA_STAGE_* */
  dls__xla_args args;
  dls__xla_rets rets;
  dls__xla_attrs attrs;
  struct XLA_FFI_Future *future; /* out: unused (synchronous handler) */
} dls__xla_call_frame;

/* XLA_FFI_Error_Create_Args. */
typedef struct dls__xla_error_create_args {
  size_t struct_size;
  dls__xla_extension *extension_start;
  const char *message; /* copied by XLA */
  int errc;            /* DLS__XLA_ERROR_* */
} dls__xla_error_create_args;

/* XLA_FFI_Stream_Get_Args. */
typedef struct dls__xla_stream_get_args {
  size_t struct_size;
  dls__xla_extension *extension_start;
  struct XLA_FFI_ExecutionContext *ctx;
  void *stream; /* out: the platform's stream (CUstream on CUDA) */
} dls__xla_stream_get_args;

/* XLA_FFI_Metadata: what a handler reports about itself. */
typedef struct dls__xla_metadata {
  size_t struct_size;
  dls__xla_api_version api_version;
  uint32_t traits; /* DLS__XLA_TRAIT_* bits */
} dls__xla_metadata;

/* XLA_FFI_Metadata_Extension: the extension of a metadata call. */
typedef struct dls__xla_metadata_extension {
  dls__xla_extension extension_base;
  dls__xla_metadata *metadata;
} dls__xla_metadata_extension;

typedef struct XLA_FFI_Error *dls__xla_error_create_fn(dls__xla_error_create_args *args);
typedef struct XLA_FFI_Error *dls__xla_stream_get_fn(dls__xla_stream_get_args *args);

/* XLA_FFI_Error_Destroy_Args (the api's error_destroy takes them). */
typedef struct dls__xla_error_destroy_args {
  size_t struct_size;
  dls__xla_extension *extension_start;
  struct XLA_FFI_Error *error;
} dls__xla_error_destroy_args;
typedef void dls__xla_error_destroy_fn(dls__xla_error_destroy_args *args);
#define DLS__XLA_ERROR_DESTROY_ARGS_SIZE DLS__XLA_STRUCT_SIZE(dls__xla_error_destroy_args, error)

/* XLA_FFI_DeviceOrdinal_Get_Args: the device the call runs on, in XLA's ordinals (its platform's devices). */
typedef struct dls__xla_device_ordinal_get_args {
  size_t struct_size;
  dls__xla_extension *extension_start;
  struct XLA_FFI_ExecutionContext *ctx;
  int32_t device_ordinal; /* out */
} dls__xla_device_ordinal_get_args;
typedef struct XLA_FFI_Error *dls__xla_device_ordinal_get_fn(dls__xla_device_ordinal_get_args *args);

/* XLA_FFI_Api, up to the last entry point dlstream calls (XLA_FFI_Stream_Get); the rest are entry points too. */
typedef struct dls__xla_api {
  size_t struct_size;
  dls__xla_extension *extension_start;
  dls__xla_api_version api_version;
  const struct XLA_FFI_InternalApi *internal_api;
  dls__xla_error_create_fn *error_create; /* XLA_FFI_Error_Create */
  void *error_get_message;                /* XLA_FFI_Error_GetMessage */
  void *error_destroy;                    /* XLA_FFI_Error_Destroy */
  void *handler_register;                 /* XLA_FFI_Handler_Register */
  dls__xla_stream_get_fn *stream_get;     /* XLA_FFI_Stream_Get */
  void *type_register;                    /* XLA_FFI_Type_Register (XLA_FFI_TypeId_Register before) */
  void *execution_context_get;            /* XLA_FFI_ExecutionContext_Get */
  void *state_set;                        /* XLA_FFI_State_Set */
  void *state_get;                        /* XLA_FFI_State_Get */
  void *device_memory_allocate;           /* XLA_FFI_DeviceMemory_Allocate */
  void *device_memory_free;               /* XLA_FFI_DeviceMemory_Free */
  void *thread_pool_schedule;             /* XLA_FFI_ThreadPool_Schedule */
  void *thread_pool_num_threads;          /* XLA_FFI_ThreadPool_NumThreads */
  void *future_create;                    /* XLA_FFI_Future_Create */
  void *future_set_available;             /* XLA_FFI_Future_SetAvailable */
  void *future_set_error;                 /* XLA_FFI_Future_SetError */
  void *run_id_get;                       /* XLA_FFI_RunId_Get */
  dls__xla_device_ordinal_get_fn *device_ordinal_get; /* XLA_FFI_DeviceOrdinal_Get: the call's device */
} dls__xla_api;

/* The struct_size values XLA checks (its *_STRUCT_SIZE constants). */
#define DLS__XLA_API_VERSION_SIZE DLS__XLA_STRUCT_SIZE(dls__xla_api_version, minor_version)
#define DLS__XLA_ERROR_CREATE_ARGS_SIZE DLS__XLA_STRUCT_SIZE(dls__xla_error_create_args, errc)
#define DLS__XLA_STREAM_GET_ARGS_SIZE DLS__XLA_STRUCT_SIZE(dls__xla_stream_get_args, stream)
#define DLS__XLA_METADATA_SIZE DLS__XLA_STRUCT_SIZE(dls__xla_metadata, traits)
#define DLS__XLA_METADATA_EXTENSION_SIZE DLS__XLA_STRUCT_SIZE(dls__xla_metadata_extension, metadata)
#define DLS__XLA_CALL_FRAME_SIZE DLS__XLA_STRUCT_SIZE(dls__xla_call_frame, attrs)
#define DLS__XLA_API_STREAM_GET_END DLS__XLA_STRUCT_SIZE(dls__xla_api, stream_get)
#define DLS__XLA_API_DEVICE_ORDINAL_GET_END DLS__XLA_STRUCT_SIZE(dls__xla_api, device_ordinal_get)
#define DLS__XLA_DEVICE_ORDINAL_GET_ARGS_SIZE DLS__XLA_STRUCT_SIZE(dls__xla_device_ordinal_get_args, device_ordinal)

#endif /* DLSTREAM_XLA_FFI_H */
