/* SPDX-License-Identifier: Apache-2.0 */
/* Internal functions that the DLPack import, validation, export and stream-value files share. */
#ifndef DLSTREAM_DLPACK_INTERNAL_H
#define DLSTREAM_DLPACK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"

/* Largest ndim a tensor may have. */
#define DLS__DLPACK_MAX_NDIM 32

/* Flag bits a dlstream tensor keeps: DLS_TENSOR_READ_ONLY, DLS_TENSOR_IS_COPIED
 * and DLPack's sub-byte padding bit (same value as in DLPack), which an export
 * must carry on or a consumer would read padded elements as packed. */
#define DLS__TENSOR_SUBBYTE_PADDED ((uint64_t)DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)
#define DLS__TENSOR_KEPT_FLAGS \
  ((uint64_t)DLS_TENSOR_READ_ONLY | (uint64_t)DLS_TENSOR_IS_COPIED | DLS__TENSOR_SUBBYTE_PADDED)

/* Options of dls__dlpack_check. */
#define DLS__CHECK_NO_DATA 1u /* the data pointer is not known yet (dls_tensor_empty) */

/* What validation learns about a tensor's memory. */
typedef struct dls__layout {
  DLDevice home;     /* device whose backend handles the memory: cpu:0, cuda:N or rocm:N */
  size_t elem_size;  /* bytes per element, lanes included, sub-byte rounded up */
  uint32_t elem_bits; /* bits * lanes */
  bool packed;       /* sub-byte elements packed densely (DLPack's default for them) */
  uint64_t count;    /* number of elements */
  uintptr_t lo;      /* lowest byte address touched; `data` when count is 0 */
  size_t span;       /* bytes from lo to one past the highest byte touched; 0 when count is 0 */
} dls__layout;

/* Validates every field of `t` (see validate.c for the rules). `flags` are
 * DLPack flag bits (only the sub-byte padding bit matters here). Failures are
 * DLS_ERR_INVALID_TENSOR with "<call>: <prefix><field> = <value> ..." as the
 * message. */
DLS__INTERNAL dls_status_t dls__dlpack_check(const DLTensor *t, uint64_t flags, unsigned opts, const char *call,
                                             const char *prefix, dls__layout *out);

/* Why a dtype is invalid. */
typedef enum dls__dtype_fault {
  DLS__DTYPE_OK = 0,
  DLS__DTYPE_BAD_CODE,
  DLS__DTYPE_BAD_BITS,
  DLS__DTYPE_BAD_LANES
} dls__dtype_fault;

/* Checks code, bits and lanes; *opt_out_rule (if given) describes the bits
 * the code accepts. */
DLS__INTERNAL dls__dtype_fault dls__dtype_check(DLDataType dtype, const char **opt_out_rule);

/* "kDLCUDA", "kDLFloat8_e4m3fn" ...; "unknown" for values outside the enums. */
DLS__INTERNAL const char *dls__dlpack_device_type_name(int32_t device_type);
DLS__INTERNAL const char *dls__dlpack_dtype_code_name(uint8_t code);

/* The device whose backend handles memory of `device`: pinned and managed
 * memory belong to their GPU backend. false for unsupported device types.
 * Inline: every tensor argument of a launch asks it. */
static inline bool dls__dlpack_home(DLDevice device, DLDevice *out_home) {
  DLDevice h = device;
  switch ((int)device.device_type) {
  case kDLCPU: break;
  case kDLCUDA: break;
  case kDLCUDAHost:
  case kDLCUDAManaged: h.device_type = kDLCUDA; break;
  case kDLROCM: break;
  case kDLROCMHost: h.device_type = kDLROCM; break;
  default: return false;
  }
  *out_home = h;
  return true;
}

/* True when both name the same device. */
static inline bool dls__device_eq(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

/* Exports whose deleter has not run yet. dls_shutdown() should wait for (or
 * report) these: a deleter called after shutdown can only free its block. */
DLS__INTERNAL extern _Atomic size_t dls__exports_live;

/* DLS__ENTER as an expression, for callers that must clean up on failure. */
static inline dls_status_t dls__dlpack_enter(const char *call) {
  if (DLS__LIKELY(atomic_load_explicit(&dls__state, memory_order_acquire) == 1))
    return DLS_OK;
  return dls__enter_slow(call);
}

#endif /* DLSTREAM_DLPACK_INTERNAL_H */
