/* SPDX-License-Identifier: Apache-2.0 */
/* Checks at compile time that interop/xla/xla_ffi.h (and the handlers of dlstream/xla.h) agree with the XLA FFI
 * header JAX ships (xla/ffi/api/c_api.h under jax.ffi.include_dir()). */
#include <stddef.h>
#include <stdio.h>

#include "xla/ffi/api/c_api.h"

#include "decls_check.h"
#include "dlstream/xla.h"
#include "xla/xla_ffi.h"

/* The ABI we declare is one this header's XLA knows: same major, a minor not newer. */
_Static_assert(DLS__XLA_API_MAJOR == XLA_FFI_API_MAJOR, "XLA FFI major version");
_Static_assert(DLS__XLA_API_MINOR <= XLA_FFI_API_MINOR, "our XLA FFI minor version is newer than JAX's header");

/* Constants. */
#define SAME DECLS_SAME_VALUE
SAME(DLS__XLA_EXTENSION_METADATA, XLA_FFI_Extension_Metadata)
SAME(DLS__XLA_STAGE_INSTANTIATE, XLA_FFI_ExecutionStage_INSTANTIATE)
SAME(DLS__XLA_STAGE_PREPARE, XLA_FFI_ExecutionStage_PREPARE)
SAME(DLS__XLA_STAGE_INITIALIZE, XLA_FFI_ExecutionStage_INITIALIZE)
SAME(DLS__XLA_STAGE_EXECUTE, XLA_FFI_ExecutionStage_EXECUTE)
SAME(DLS__XLA_ARG_BUFFER, XLA_FFI_ArgType_BUFFER)
SAME(DLS__XLA_RET_BUFFER, XLA_FFI_RetType_BUFFER)
SAME(DLS__XLA_ATTR_ARRAY, XLA_FFI_AttrType_ARRAY)
SAME(DLS__XLA_ATTR_DICTIONARY, XLA_FFI_AttrType_DICTIONARY)
SAME(DLS__XLA_ATTR_SCALAR, XLA_FFI_AttrType_SCALAR)
SAME(DLS__XLA_ATTR_STRING, XLA_FFI_AttrType_STRING)
SAME(DLS__XLA_TRAIT_COMMAND_BUFFER_COMPATIBLE, XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE)
#define CHECK_ERROR_CODE(name, value) SAME(DLS__XLA_ERROR_##name, XLA_FFI_Error_Code_##name)
DLS__XLA_ERROR_CODES(CHECK_ERROR_CODE)
#define CHECK_DTYPE(name, value, bytes) SAME(DLS__XLA_DTYPE_##name, XLA_FFI_DataType_##name)
DLS__XLA_DATA_TYPES(CHECK_DTYPE)

/* XLA FFI 0.4 (JAX 0.11) renamed what 0.3 called the extension base and the
 * error's message getter (now GetDetails, whose arguments grew an error code
 * at their end); the layouts we rely on did not move. */
#if XLA_FFI_API_MINOR >= 4
#define XLA_EXTENSION XLA_FFI_InternalExtension
#define XLA_EXTENSION_TYPE XLA_FFI_InternalExtension_Type
#define XLA_ERROR_GETTER XLA_FFI_Error_GetDetails
#else
#define XLA_EXTENSION XLA_FFI_Extension_Base
#define XLA_EXTENSION_TYPE XLA_FFI_Extension_Type
#define XLA_ERROR_GETTER XLA_FFI_Error_GetMessage
#endif

/* Enums are int-sized, as our int fields. */
_Static_assert(sizeof(XLA_FFI_DataType) == sizeof(int) && sizeof(XLA_FFI_ExecutionStage) == sizeof(int) &&
                   sizeof(XLA_FFI_ArgType) == sizeof(int) && sizeof(XLA_FFI_AttrType) == sizeof(int) &&
                   sizeof(XLA_FFI_Error_Code) == sizeof(int) && sizeof(XLA_EXTENSION_TYPE) == sizeof(int),
               "XLA FFI enums are int-sized");

/* Layouts: every field we declare sits where XLA's does, with its size. */
#define FIELD DECLS_SAME_FIELD
FIELD(dls__xla_extension, struct_size, XLA_EXTENSION, struct_size)
FIELD(dls__xla_extension, type, XLA_EXTENSION, type)
FIELD(dls__xla_extension, next, XLA_EXTENSION, next)
FIELD(dls__xla_api_version, struct_size, XLA_FFI_Api_Version, struct_size)
FIELD(dls__xla_api_version, extension_start, XLA_FFI_Api_Version, extension_start)
FIELD(dls__xla_api_version, major_version, XLA_FFI_Api_Version, major_version)
FIELD(dls__xla_api_version, minor_version, XLA_FFI_Api_Version, minor_version)
FIELD(dls__xla_span, ptr, XLA_FFI_ByteSpan, ptr)
FIELD(dls__xla_span, len, XLA_FFI_ByteSpan, len)
FIELD(dls__xla_scalar, dtype, XLA_FFI_Scalar, dtype)
FIELD(dls__xla_scalar, value, XLA_FFI_Scalar, value)
FIELD(dls__xla_array, dtype, XLA_FFI_Array, dtype)
FIELD(dls__xla_array, size, XLA_FFI_Array, size)
FIELD(dls__xla_array, data, XLA_FFI_Array, data)
FIELD(dls__xla_buffer, struct_size, XLA_FFI_Buffer, struct_size)
FIELD(dls__xla_buffer, extension_start, XLA_FFI_Buffer, extension_start)
FIELD(dls__xla_buffer, dtype, XLA_FFI_Buffer, dtype)
FIELD(dls__xla_buffer, data, XLA_FFI_Buffer, data)
FIELD(dls__xla_buffer, rank, XLA_FFI_Buffer, rank)
FIELD(dls__xla_buffer, dims, XLA_FFI_Buffer, dims)
FIELD(dls__xla_args, size, XLA_FFI_Args, size)
FIELD(dls__xla_args, types, XLA_FFI_Args, types)
FIELD(dls__xla_args, args, XLA_FFI_Args, args)
FIELD(dls__xla_rets, size, XLA_FFI_Rets, size)
FIELD(dls__xla_rets, types, XLA_FFI_Rets, types)
FIELD(dls__xla_rets, rets, XLA_FFI_Rets, rets)
FIELD(dls__xla_attrs, size, XLA_FFI_Attrs, size)
FIELD(dls__xla_attrs, types, XLA_FFI_Attrs, types)
FIELD(dls__xla_attrs, names, XLA_FFI_Attrs, names)
FIELD(dls__xla_attrs, attrs, XLA_FFI_Attrs, attrs)
FIELD(dls__xla_call_frame, struct_size, XLA_FFI_CallFrame, struct_size)
FIELD(dls__xla_call_frame, extension_start, XLA_FFI_CallFrame, extension_start)
FIELD(dls__xla_call_frame, api, XLA_FFI_CallFrame, api)
FIELD(dls__xla_call_frame, ctx, XLA_FFI_CallFrame, ctx)
FIELD(dls__xla_call_frame, stage, XLA_FFI_CallFrame, stage)
FIELD(dls__xla_call_frame, args, XLA_FFI_CallFrame, args)
FIELD(dls__xla_call_frame, rets, XLA_FFI_CallFrame, rets)
FIELD(dls__xla_call_frame, attrs, XLA_FFI_CallFrame, attrs)
FIELD(dls__xla_call_frame, future, XLA_FFI_CallFrame, future)
FIELD(dls__xla_error_create_args, struct_size, XLA_FFI_Error_Create_Args, struct_size)
FIELD(dls__xla_error_create_args, message, XLA_FFI_Error_Create_Args, message)
FIELD(dls__xla_error_create_args, errc, XLA_FFI_Error_Create_Args, errc)
FIELD(dls__xla_stream_get_args, struct_size, XLA_FFI_Stream_Get_Args, struct_size)
FIELD(dls__xla_stream_get_args, ctx, XLA_FFI_Stream_Get_Args, ctx)
FIELD(dls__xla_stream_get_args, stream, XLA_FFI_Stream_Get_Args, stream)
FIELD(dls__xla_metadata, struct_size, XLA_FFI_Metadata, struct_size)
FIELD(dls__xla_metadata, api_version, XLA_FFI_Metadata, api_version)
FIELD(dls__xla_metadata, traits, XLA_FFI_Metadata, traits)
FIELD(dls__xla_metadata_extension, extension_base, XLA_FFI_Metadata_Extension, extension_base)
FIELD(dls__xla_metadata_extension, metadata, XLA_FFI_Metadata_Extension, metadata)
FIELD(dls__xla_api, struct_size, XLA_FFI_Api, struct_size)
FIELD(dls__xla_api, api_version, XLA_FFI_Api, api_version)
FIELD(dls__xla_api, internal_api, XLA_FFI_Api, internal_api)
FIELD(dls__xla_api, error_create, XLA_FFI_Api, XLA_FFI_Error_Create)
FIELD(dls__xla_api, error_get_message, XLA_FFI_Api, XLA_ERROR_GETTER)
FIELD(dls__xla_api, error_destroy, XLA_FFI_Api, XLA_FFI_Error_Destroy)
FIELD(dls__xla_api, handler_register, XLA_FFI_Api, XLA_FFI_Handler_Register)
FIELD(dls__xla_api, stream_get, XLA_FFI_Api, XLA_FFI_Stream_Get)
FIELD(dls__xla_api, run_id_get, XLA_FFI_Api, XLA_FFI_RunId_Get)
FIELD(dls__xla_api, device_ordinal_get, XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get)
FIELD(dls__xla_device_ordinal_get_args, struct_size, XLA_FFI_DeviceOrdinal_Get_Args, struct_size)
FIELD(dls__xla_device_ordinal_get_args, ctx, XLA_FFI_DeviceOrdinal_Get_Args, ctx)
FIELD(dls__xla_device_ordinal_get_args, device_ordinal, XLA_FFI_DeviceOrdinal_Get_Args, device_ordinal)

/* The struct_size values we write are XLA's (it refuses a smaller one, and a larger one would mean fields this
 * header lacks); those XLA writes hold at least what we read. */
SAME(DLS__XLA_API_VERSION_SIZE, XLA_FFI_Api_Version_STRUCT_SIZE)
SAME(DLS__XLA_ERROR_CREATE_ARGS_SIZE, XLA_FFI_Error_Create_Args_STRUCT_SIZE)
SAME(DLS__XLA_STREAM_GET_ARGS_SIZE, XLA_FFI_Stream_Get_Args_STRUCT_SIZE)
SAME(DLS__XLA_DEVICE_ORDINAL_GET_ARGS_SIZE, XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE)
SAME(DLS__XLA_ERROR_DESTROY_ARGS_SIZE, XLA_FFI_Error_Destroy_Args_STRUCT_SIZE)
_Static_assert(DLS__XLA_METADATA_SIZE <= XLA_FFI_Metadata_STRUCT_SIZE, "XLA_FFI_Metadata lost fields");
_Static_assert(DLS__XLA_METADATA_EXTENSION_SIZE <= XLA_FFI_Metadata_Extension_STRUCT_SIZE,
               "XLA_FFI_Metadata_Extension lost fields");
_Static_assert(DLS__XLA_CALL_FRAME_SIZE <= XLA_FFI_CallFrame_STRUCT_SIZE, "XLA_FFI_CallFrame lost fields");
_Static_assert(DLS__XLA_API_STREAM_GET_END <= XLA_FFI_Api_STRUCT_SIZE, "XLA_FFI_Api lost entry points");

/* The handlers we export have XLA's handler type (the argument structs of the entry points we call are ours,
 * with XLA's layouts, above). */
DECLS_SAME_TYPE(__typeof__(&dls_xla_call_cuda), XLA_FFI_Handler *)
DECLS_SAME_TYPE(__typeof__(&dls_xla_call_cuda_nocapture), XLA_FFI_Handler *)
DECLS_SAME_TYPE(__typeof__(&dls_xla_call_cpu), XLA_FFI_Handler *)

int main(void) {
  printf("xla_ffi.h (XLA FFI %d.%d) matches JAX's c_api.h (XLA FFI %d.%d): constants, %d structs, the handlers' "
         "type\n", DLS__XLA_API_MAJOR, DLS__XLA_API_MINOR, XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR, 15);
  return 0;
}
