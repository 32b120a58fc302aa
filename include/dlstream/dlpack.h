/* SPDX-License-Identifier: Apache-2.0 */
/* The DLPack 1.x ABI (structures, enums, flags and the C exchange API table),
 * written for dlstream from the DLPack specification.
 *
 * The include guard is the one the reference header uses, so a translation
 * unit that includes both this file and another DLPack 1.x header sees the
 * definitions once. Every layout here is the specification's; nothing may be
 * reordered. */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

/* ABI version this header describes. A producer's major version that differs
 * means the layout after `flags` is unknown: only the deleter may be called. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

#ifdef _WIN32
#ifdef DLPACK_EXPORTS
#define DLPACK_DLL __declspec(dllexport)
#else
#define DLPACK_DLL __declspec(dllimport)
#endif
#else
#define DLPACK_DLL
#endif

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
extern "C" {
#else
#define DLPACK_EXTERN_C
#endif

/* ABI version of a managed tensor or of an exchange API table. */
typedef struct {
  uint32_t major; /* layout changes bump this */
  uint32_t minor; /* new enum values bump this; layout unchanged */
} DLPackVersion;

/* Where memory lives. Values are fixed by the specification. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,          /* host memory */
  kDLCUDA = 2,         /* CUDA device memory */
  kDLCUDAHost = 3,     /* page-locked host memory from cudaMallocHost */
  kDLOpenCL = 4,       /* OpenCL buffer */
  kDLVulkan = 7,       /* Vulkan buffer */
  kDLMetal = 8,        /* Metal buffer */
  kDLVPI = 9,          /* Verilog simulator buffer */
  kDLROCM = 10,        /* ROCm (HIP) device memory */
  kDLROCMHost = 11,    /* page-locked host memory from hipMallocHost */
  kDLExtDev = 12,      /* reserved for extension devices */
  kDLCUDAManaged = 13, /* CUDA managed (unified) memory */
  kDLOneAPI = 14,      /* oneAPI unified shared memory */
  kDLWebGPU = 15,      /* WebGPU buffer */
  kDLHexagon = 16,     /* Qualcomm Hexagon DSP */
  kDLMAIA = 17,        /* Microsoft MAIA */
  kDLTrn = 18,         /* AWS Trainium */
} DLDeviceType;

/* A device: its type and its index among devices of that type. */
typedef struct {
  DLDeviceType device_type; /* see DLDeviceType */
  int32_t device_id;        /* 0 for plain, pinned and managed host memory */
} DLDevice;

/* Element type codes. Values are fixed by the specification. */
typedef enum {
  kDLInt = 0U,                /* signed integer */
  kDLUInt = 1U,               /* unsigned integer */
  kDLFloat = 2U,              /* IEEE binary floating point */
  kDLOpaqueHandle = 3U,       /* opaque handle, for testing */
  kDLBfloat = 4U,             /* bfloat16 */
  kDLComplex = 5U,            /* complex: real and imaginary parts packed */
  kDLBool = 6U,               /* boolean, stored in 8 bits */
  kDLFloat8_e3m4 = 7U,        /* 8-bit floats, named by exponent/mantissa */
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,     /* 6-bit floats: bits must be 6 */
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,     /* 4-bit float: bits must be 4 */
} DLDataTypeCode;

/* Element type: code, bits per lane, lanes (vector width). */
typedef struct {
  uint8_t code;   /* a DLDataTypeCode value */
  uint8_t bits;   /* bits per lane: 8, 16, 32, 64 ... (sub-byte: 4, 6) */
  uint16_t lanes; /* vector lanes; 1 for scalars */
} DLDataType;

/* A strided view of memory; owns nothing. */
typedef struct {
  void *data;           /* base pointer (device pointer for device memory) */
  DLDevice device;      /* where `data` lives */
  int32_t ndim;         /* number of dimensions */
  DLDataType dtype;     /* element type */
  int64_t *shape;       /* ndim extents */
  int64_t *strides;     /* ndim strides in elements, or NULL for row-major compact */
  uint64_t byte_offset; /* bytes from `data` to the first element */
} DLTensor;

/* Legacy (pre-1.0) managed tensor: no version, no flags. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;                          /* the view */
  void *manager_ctx;                           /* producer's context; may be NULL */
  void (*deleter)(struct DLManagedTensor *self); /* frees self; may be NULL */
} DLManagedTensor;

/* `flags` bits of DLManagedTensorVersioned. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)              /* consumer must not write */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)              /* consumer owns a private copy */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL) /* sub-byte elements padded */

/* Versioned managed tensor (DLPack >= 1.0). Fields up to and including
 * `flags` keep their layout in every future major version, so a consumer can
 * always call the deleter. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;                                  /* ABI of this struct */
  void *manager_ctx;                                      /* producer's context; may be NULL */
  void (*deleter)(struct DLManagedTensorVersioned *self); /* frees self; may be NULL */
  uint64_t flags;                                         /* DLPACK_FLAG_BITMASK_* */
  DLTensor dl_tensor;                                     /* the view */
} DLManagedTensorVersioned;

/* ---- The C exchange API (a table a framework publishes on its tensor type) ---- */

/* Allocate a new managed tensor shaped like `prototype`; 0 on success. */
typedef int (*DLPackManagedTensorAllocator)(
    DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
    void (*SetError)(void *error_ctx, const char *kind, const char *message));

/* Export a Python object as an owning managed tensor, with no stream sync. */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void *py_object,
                                                     DLManagedTensorVersioned **out);

/* Fill a caller-provided DLTensor viewing a Python object (non-owning, valid
 * until control returns), with no stream sync. */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void *py_object, DLTensor *out);

/* The producer's current work stream for a device (NULL for CPU). */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id,
                                       void **out_current_stream);

/* Wrap an owning managed tensor (stolen) as the producer's Python object. */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned *tensor,
                                                   void **out_py_object);

/* Stable head of every exchange API table. */
typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;                    /* check the major before use */
  struct DLPackExchangeAPIHeader *prev_api; /* older table, or NULL */
} DLPackExchangeAPIHeader;

/* The exchange API table, version 1. */
typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;                                       /* version, chain */
  DLPackManagedTensorAllocator managed_tensor_allocator;                /* never NULL */
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync; /* never NULL */
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;     /* never NULL */
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;     /* may be NULL */
  DLPackCurrentWorkStream current_work_stream;                          /* never NULL */
} DLPackExchangeAPI;

#ifdef __cplusplus
}
#endif
#endif /* DLPACK_DLPACK_H_ */
