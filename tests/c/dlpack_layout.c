/* SPDX-License-Identifier: Apache-2.0 */
/* Records the ABI of one dlpack.h (named by DLS_LAYOUT_HEADER) into a table named DLS_LAYOUT_FN, for test_dlpack's layout comparison.
 *
 * Compiled once per header, each time alone in its translation unit, since
 * every dlpack.h uses the same include guard and type names. Entries are
 * limited to what the header's version is known to define; features whose
 * version is uncertain are detected by CMake (DLS_LAYOUT_HAS_*). */
#include <stddef.h>

#include DLS_LAYOUT_HEADER

#include "dlpack_layout.h"

#if defined(DLS_LAYOUT_ALL)
#define DLS_V 9999 /* our header: every entry */
#elif defined(DLPACK_MAJOR_VERSION)
#define DLS_V (DLPACK_MAJOR_VERSION * 100 + DLPACK_MINOR_VERSION)
#elif defined(DLPACK_VERSION) && DLPACK_VERSION >= 60
#define DLS_V (DLPACK_VERSION / 10) /* 0.6 -> 6, 0.8 -> 8 */
#else
#error "dlpack.h older than 0.6 (DLContext era) is not compared"
#endif

#define DLS_STR2(x) #x
#define DLS_STR(x) DLS_STR2(x)

#define SZ(T) {"sizeof(" #T ")", (long long)sizeof(T)},
#define OFF(T, f) {"offsetof(" #T ", " #f ")", (long long)offsetof(T, f)},
/* DLPack 1.0's header declares the versioned struct without a typedef (CuPy
 * ships it so): name it by its tag, which every header has. */
#define SZS(T) {"sizeof(" #T ")", (long long)sizeof(struct T)},
#define OFFS(T, f) {"offsetof(" #T ", " #f ")", (long long)offsetof(struct T, f)},
#define VAL(x) {#x, (long long)(x)},

static const dls_layout_entry entries[] = {
    SZ(DLDevice) OFF(DLDevice, device_type) OFF(DLDevice, device_id) SZ(DLDeviceType)
    SZ(DLDataType) OFF(DLDataType, code) OFF(DLDataType, bits) OFF(DLDataType, lanes)
    SZ(DLTensor) OFF(DLTensor, data) OFF(DLTensor, device) OFF(DLTensor, ndim) OFF(DLTensor, dtype)
    OFF(DLTensor, shape) OFF(DLTensor, strides) OFF(DLTensor, byte_offset)
    SZ(DLManagedTensor) OFF(DLManagedTensor, dl_tensor) OFF(DLManagedTensor, manager_ctx)
    OFF(DLManagedTensor, deleter)
    VAL(kDLCPU) VAL(kDLCUDA) VAL(kDLCUDAHost) VAL(kDLOpenCL) VAL(kDLVulkan) VAL(kDLMetal) VAL(kDLVPI)
    VAL(kDLROCM) VAL(kDLROCMHost) VAL(kDLExtDev) VAL(kDLCUDAManaged)
    VAL(kDLInt) VAL(kDLUInt) VAL(kDLFloat) VAL(kDLOpaqueHandle) VAL(kDLBfloat) VAL(kDLComplex)
#if DLS_V >= 7
    VAL(kDLOneAPI) VAL(kDLWebGPU) VAL(kDLHexagon)
#endif
#if DLS_V >= 8
    VAL(kDLBool)
#endif
#if DLS_V >= 100
    VAL(DLPACK_MAJOR_VERSION)
    SZ(DLPackVersion) OFF(DLPackVersion, major) OFF(DLPackVersion, minor)
    SZS(DLManagedTensorVersioned) OFFS(DLManagedTensorVersioned, version)
    OFFS(DLManagedTensorVersioned, manager_ctx) OFFS(DLManagedTensorVersioned, deleter)
    OFFS(DLManagedTensorVersioned, flags) OFFS(DLManagedTensorVersioned, dl_tensor)
    VAL(DLPACK_FLAG_BITMASK_READ_ONLY) VAL(DLPACK_FLAG_BITMASK_IS_COPIED)
#endif
#if DLS_V >= 101
    VAL(kDLFloat8_e3m4) VAL(kDLFloat8_e4m3) VAL(kDLFloat8_e4m3b11fnuz) VAL(kDLFloat8_e4m3fn)
    VAL(kDLFloat8_e4m3fnuz) VAL(kDLFloat8_e5m2) VAL(kDLFloat8_e5m2fnuz) VAL(kDLFloat8_e8m0fnu)
    VAL(kDLFloat6_e2m3fn) VAL(kDLFloat6_e3m2fn) VAL(kDLFloat4_e2m1fn)
    VAL(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)
#endif
#if DLS_V >= 9999 || defined(DLS_LAYOUT_HAS_MAIA)
    VAL(kDLMAIA)
#endif
#if DLS_V >= 9999 || defined(DLS_LAYOUT_HAS_TRN)
    VAL(kDLTrn)
#endif
#if DLS_V >= 9999 || defined(DLS_LAYOUT_HAS_EXCHANGE_API)
    SZ(DLPackExchangeAPIHeader) OFF(DLPackExchangeAPIHeader, version) OFF(DLPackExchangeAPIHeader, prev_api)
    SZ(DLPackExchangeAPI) OFF(DLPackExchangeAPI, header) OFF(DLPackExchangeAPI, managed_tensor_allocator)
    OFF(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync)
    OFF(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync)
    OFF(DLPackExchangeAPI, dltensor_from_py_object_no_sync) OFF(DLPackExchangeAPI, current_work_stream)
#endif
};

#if defined(DLPACK_MAJOR_VERSION)
#define DLS_VERSION_TEXT DLS_STR(DLPACK_MAJOR_VERSION) "." DLS_STR(DLPACK_MINOR_VERSION)
#else
#define DLS_VERSION_TEXT "DLPACK_VERSION " DLS_STR(DLPACK_VERSION)
#endif

const dls_layout_entry *DLS_LAYOUT_FN(size_t *out_count, const char **out_version) {
  *out_count = sizeof entries / sizeof entries[0];
  *out_version = DLS_VERSION_TEXT " (" DLS_LAYOUT_HEADER ")";
  return entries;
}
