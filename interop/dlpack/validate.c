/* SPDX-License-Identifier: Apache-2.0 */
/* Validation of DLPack tensors: device, dtype, shape, strides, offset, alignment and size.
 *
 * Rules where DLPack leaves room:
 * - Devices: kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM and
 *   kDLROCMHost. Pinned and managed memory belong to their GPU backend, so
 *   their device_id is checked against that backend's device count (when the
 *   backend is available; otherwise the import fails later, at the device).
 *   kDLCPU has one device: id 0.
 * - Bits per code: int and uint 1, 2, 4 (sub-byte), 8, 16, 32, 64; float 16,
 *   32, 64; bfloat 16; complex 32, 64, 128; bool 8; the float8 codes 8; the
 *   float6 codes 6; float4 4; opaque handles any non-zero width. lanes >= 1.
 * - An element is bits * lanes bits. When that is a whole number of bytes the
 *   element is byte-addressed. Otherwise (a sub-byte element) it is packed
 *   densely, DLPack's default, and the tensor must then be compact row-major
 *   (strides of dimensions longer than 1 equal the compact ones); with the
 *   sub-byte padding flag each element fills ceil(bits * lanes / 8) bytes and
 *   any strides are allowed.
 * - ndim 0..32; shape may be NULL only when ndim is 0.
 * - Sizes: the product of the non-zero extents times the element size must fit
 *   in size_t and int64_t, whether or not another extent is 0.
 * - Strides are in elements and may be negative or zero; every stride's reach
 *   (stride * (extent - 1)), their sums and the byte span are computed without
 *   overflow, and the addressed bytes may neither wrap below address 0 nor past
 *   the top of the address space.
 * - data may be NULL only when the tensor has no elements. data + byte_offset
 *   must not overflow, and must be aligned to the element size when that is a
 *   power of two up to 16 bytes (otherwise to the largest power of two that
 *   divides it, at most 16). */

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "interop/dlpack/dlpack_internal.h"

/* Bytes a tensor may span: what both size_t and int64_t hold. */
static const uint64_t max_bytes = (uint64_t)SIZE_MAX < (uint64_t)INT64_MAX ? (uint64_t)SIZE_MAX : (uint64_t)INT64_MAX;

const char *dls__dlpack_device_type_name(int32_t device_type) {
  switch (device_type) {
  case kDLCPU: return "kDLCPU";
  case kDLCUDA: return "kDLCUDA";
  case kDLCUDAHost: return "kDLCUDAHost";
  case kDLOpenCL: return "kDLOpenCL";
  case kDLVulkan: return "kDLVulkan";
  case kDLMetal: return "kDLMetal";
  case kDLVPI: return "kDLVPI";
  case kDLROCM: return "kDLROCM";
  case kDLROCMHost: return "kDLROCMHost";
  case kDLExtDev: return "kDLExtDev";
  case kDLCUDAManaged: return "kDLCUDAManaged";
  case kDLOneAPI: return "kDLOneAPI";
  case kDLWebGPU: return "kDLWebGPU";
  case kDLHexagon: return "kDLHexagon";
  case kDLMAIA: return "kDLMAIA";
  case kDLTrn: return "kDLTrn";
  default: return "unknown";
  }
}

const char *dls__dlpack_dtype_code_name(uint8_t code) {
  static const char *const names[] = {
      "kDLInt", "kDLUInt", "kDLFloat", "kDLOpaqueHandle", "kDLBfloat", "kDLComplex",
      "kDLBool", "kDLFloat8_e3m4", "kDLFloat8_e4m3", "kDLFloat8_e4m3b11fnuz", "kDLFloat8_e4m3fn",
      "kDLFloat8_e4m3fnuz", "kDLFloat8_e5m2", "kDLFloat8_e5m2fnuz", "kDLFloat8_e8m0fnu",
      "kDLFloat6_e2m3fn", "kDLFloat6_e3m2fn", "kDLFloat4_e2m1fn"};
  return code < sizeof names / sizeof names[0] ? names[code] : "unknown";
}

dls__dtype_fault dls__dtype_check(DLDataType dtype, const char **opt_out_rule) {
  const char *rule;
  bool ok;
  unsigned b = dtype.bits;
  switch (dtype.code) {
  case kDLInt:
  case kDLUInt:
    ok = b == 1 || b == 2 || b == 4 || b == 8 || b == 16 || b == 32 || b == 64;
    rule = "1, 2, 4 (sub-byte), 8, 16, 32 or 64";
    break;
  case kDLFloat:
    ok = b == 16 || b == 32 || b == 64;
    rule = "16, 32 or 64 (8-, 6- and 4-bit floats have their own codes)";
    break;
  case kDLOpaqueHandle:
    ok = b != 0;
    rule = "any non-zero width";
    break;
  case kDLBfloat:
    ok = b == 16;
    rule = "16";
    break;
  case kDLComplex:
    ok = b == 32 || b == 64 || b == 128;
    rule = "32, 64 or 128";
    break;
  case kDLBool:
    ok = b == 8;
    rule = "8";
    break;
  case kDLFloat8_e3m4: case kDLFloat8_e4m3: case kDLFloat8_e4m3b11fnuz: case kDLFloat8_e4m3fn:
  case kDLFloat8_e4m3fnuz: case kDLFloat8_e5m2: case kDLFloat8_e5m2fnuz: case kDLFloat8_e8m0fnu:
    ok = b == 8;
    rule = "8";
    break;
  case kDLFloat6_e2m3fn:
  case kDLFloat6_e3m2fn:
    ok = b == 6;
    rule = "6";
    break;
  case kDLFloat4_e2m1fn:
    ok = b == 4;
    rule = "4";
    break;
  default:
    if (opt_out_rule)
      *opt_out_rule = "codes 0 (kDLInt) to 17 (kDLFloat4_e2m1fn)";
    return DLS__DTYPE_BAD_CODE;
  }
  if (opt_out_rule)
    *opt_out_rule = rule;
  if (!ok)
    return DLS__DTYPE_BAD_BITS;
  if (dtype.lanes == 0)
    return DLS__DTYPE_BAD_LANES;
  return DLS__DTYPE_OK;
}

/* "[2, 3, 4]" into buf, cut with "..." when it does not fit. */
static const char *fmt_dims(char *buf, size_t size, const int64_t *dims, int32_t ndim) {
  size_t n = 0;
  buf[0] = '\0';
  n += (size_t)snprintf(buf + n, size - n, "[");
  for (int32_t i = 0; i < ndim && n < size; i++) {
    if (n + 28 >= size) {
      snprintf(buf + n, size - n, "...");
      n = size;
      break;
    }
    n += (size_t)snprintf(buf + n, size - n, i ? ", %" PRId64 : "%" PRId64, dims[i]);
  }
  if (n < size)
    snprintf(buf + n, size - n, "]");
  return buf;
}

static uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Largest power of two dividing n, at most 16. */
static size_t align_of_size(size_t n) {
  size_t a = n & (~n + 1);
  return a > 16 ? 16 : a;
}

static dls_status_t check_device(const DLTensor *t, unsigned opts, const char *call, const char *p,
                                 DLDevice *out_home) {
  DLDevice d = t->device;
  if (!dls__dlpack_home(d, out_home))
    return dls__fail(DLS_ERR_INVALID_TENSOR,
                     "%s: %sdevice.device_type = %d (%s) is not supported; dlstream handles kDLCPU, kDLCUDA, "
                     "kDLCUDAHost, kDLCUDAManaged, kDLROCM and kDLROCMHost",
                     call, p, (int)d.device_type, dls__dlpack_device_type_name((int32_t)d.device_type));
  if (d.device_id < 0)
    return dls__fail(DLS_ERR_INVALID_TENSOR, "%s: %sdevice.device_id = %d is negative", call, p, (int)d.device_id);
  if (opts & DLS__CHECK_NO_DATA)
    return DLS_OK; /* the device came from a stream: already resolved */
  int count = 0;
  if (dls_device_count(out_home->device_type, &count) == DLS_OK && count > 0 && d.device_id >= count)
    return dls__fail(DLS_ERR_INVALID_TENSOR,
                     "%s: %sdevice.device_id = %d is out of range for %s: this machine has %d such device%s",
                     call, p, (int)d.device_id, dls__dlpack_device_type_name((int32_t)d.device_type), count,
                     count == 1 ? "" : "s");
  return DLS_OK;
}

static dls_status_t check_dtype(DLDataType dt, const char *call, const char *p) {
  const char *rule = "";
  switch (dls__dtype_check(dt, &rule)) {
  case DLS__DTYPE_OK:
    return DLS_OK;
  case DLS__DTYPE_BAD_CODE:
    return dls__fail(DLS_ERR_INVALID_TENSOR, "%s: %sdtype.code = %u is not a DLPack type code (%s)", call, p,
                     (unsigned)dt.code, rule);
  case DLS__DTYPE_BAD_BITS:
    return dls__fail(DLS_ERR_INVALID_TENSOR, "%s: %sdtype.bits = %u is not valid for %s (valid: %s)", call, p,
                     (unsigned)dt.bits, dls__dlpack_dtype_code_name(dt.code), rule);
  case DLS__DTYPE_BAD_LANES:
  default:
    return dls__fail(DLS_ERR_INVALID_TENSOR, "%s: %sdtype.lanes = %u; lanes must be at least 1", call, p,
                     (unsigned)dt.lanes);
  }
}

dls_status_t dls__dlpack_check(const DLTensor *t, uint64_t flags, unsigned opts, const char *call, const char *p,
                               dls__layout *out) {
  char dims[160], dims2[160];
  dls__layout L;
  memset(&L, 0, sizeof L);

  DLS__TRY(check_device(t, opts, call, p, &L.home));

  if (t->ndim < 0 || t->ndim > DLS__DLPACK_MAX_NDIM)
    return dls__fail(DLS_ERR_INVALID_TENSOR, "%s: %sndim = %d is out of range 0..%d", call, p, (int)t->ndim,
                     DLS__DLPACK_MAX_NDIM);
  DLS__TRY(check_dtype(t->dtype, call, p));
  const int32_t ndim = t->ndim;
  const int64_t *shape = t->shape;
  if (ndim > 0 && shape == NULL)
    return dls__fail(DLS_ERR_INVALID_TENSOR, "%s: %sshape is NULL with ndim = %d", call, p, (int)ndim);

  /* Element size. */
  L.elem_bits = (uint32_t)t->dtype.bits * t->dtype.lanes;
  L.elem_size = (L.elem_bits + 7u) / 8u;
  L.packed = (L.elem_bits % 8u) != 0 && !(flags & DLS__TENSOR_SUBBYTE_PADDED);

  /* Extents and element count. The saturating product skips zero extents, so
   * [0, 2^62, 2^62] overflows like [1, 2^62, 2^62] does. */
  uint64_t nonzero = 1;
  bool empty = false;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return dls__fail(DLS_ERR_INVALID_TENSOR, "%s: %sshape[%d] = %" PRId64 " is negative", call, p, (int)i,
                       shape[i]);
    if (shape[i] == 0)
      empty = true;
    else
      nonzero = sat_mul(nonzero, (uint64_t)shape[i]);
  }
  uint64_t bytes = L.packed ? sat_mul(nonzero, L.elem_bits) : sat_mul(nonzero, L.elem_size);
  if (L.packed && bytes != UINT64_MAX)
    bytes = bytes / 8u + (bytes % 8u != 0);
  if (nonzero > (uint64_t)INT64_MAX || bytes > max_bytes)
    return dls__fail(DLS_ERR_INVALID_TENSOR,
                     "%s: %sshape = %s of %u-bit elements overflows size_t (zero extents left out of the product)",
                     call, p, fmt_dims(dims, sizeof dims, shape, ndim), (unsigned)L.elem_bits);
  L.count = empty ? 0 : nonzero;

  /* Strides: the element offsets reached below (lo) and above (hi) the first
   * element. Checked for every dimension, also in an empty tensor. */
  int64_t lo = 0, hi = 0;
  const int64_t *strides = t->strides;
  if (strides == NULL) {
    hi = L.count ? (int64_t)L.count - 1 : 0;
  } else {
    int64_t compact = 1;
    for (int32_t i = ndim - 1; i >= 0; i--) {
      int64_t n = shape[i];
      if (n > 1) {
        if (L.packed && strides[i] != compact)
          return dls__fail(DLS_ERR_INVALID_TENSOR,
                           "%s: %sstrides[%d] = %" PRId64 " but packed %u-bit %s elements must be compact "
                           "(stride %" PRId64 "); set the sub-byte padding flag or pass a compact tensor",
                           call, p, (int)i, strides[i], (unsigned)L.elem_bits,
                           dls__dlpack_dtype_code_name(t->dtype.code), compact);
        int64_t reach;
        bool over = __builtin_mul_overflow(strides[i], n - 1, &reach);
        if (!over)
          over = reach < 0 ? __builtin_add_overflow(lo, reach, &lo) : __builtin_add_overflow(hi, reach, &hi);
        if (over)
          return dls__fail(DLS_ERR_INVALID_TENSOR,
                           "%s: %sstrides[%d] = %" PRId64 " with shape[%d] = %" PRId64
                           " reaches beyond the 64-bit range of element offsets",
                           call, p, (int)i, strides[i], (int)i, n);
      }
      if (n > 0)
        compact *= n; /* bounded by the non-zero product checked above */
    }
  }

  /* Byte span [lo_b, hi_b) relative to data + byte_offset. */
  int64_t lo_b = 0, hi_b = 0;
  if (L.packed) {
    hi_b = (int64_t)bytes; /* compact: checked above */
  } else if (__builtin_mul_overflow(lo, (int64_t)L.elem_size, &lo_b) ||
             __builtin_add_overflow(hi, (int64_t)1, &hi_b) ||
             __builtin_mul_overflow(hi_b, (int64_t)L.elem_size, &hi_b) ||
             (uint64_t)hi_b + (uint64_t)(-(lo_b + 1)) + 1u > max_bytes) {
    /* lo_b <= 0 <= hi_b, so the span is hi_b - lo_b, computed unsigned above. */
    return dls__fail(DLS_ERR_INVALID_TENSOR,
                     "%s: %sstrides = %s with shape = %s span more than %" PRIu64 " bytes of %zu-byte elements",
                     call, p, fmt_dims(dims, sizeof dims, strides, ndim),
                     fmt_dims(dims2, sizeof dims2, shape, ndim), max_bytes, L.elem_size);
  }

  /* Addresses. */
  uintptr_t data = (uintptr_t)t->data;
  uintptr_t base;
  if (t->byte_offset > (uint64_t)UINTPTR_MAX || __builtin_add_overflow(data, (uintptr_t)t->byte_offset, &base))
    return dls__fail(DLS_ERR_INVALID_TENSOR, "%s: %sdata = %p + %sbyte_offset = %" PRIu64 " overflows the address space",
                     call, p, t->data, p, t->byte_offset);
  L.lo = data;
  if (L.count == 0 || (opts & DLS__CHECK_NO_DATA)) {
    L.span = L.count ? (size_t)((uint64_t)hi_b - (uint64_t)lo_b) : 0;
    *out = L;
    return DLS_OK;
  }
  if (t->data == NULL)
    return dls__fail(DLS_ERR_INVALID_TENSOR, "%s: %sdata is NULL but the tensor has %" PRIu64 " element%s (shape %s)",
                     call, p, L.count, L.count == 1 ? "" : "s", fmt_dims(dims, sizeof dims, shape, ndim));
  uint64_t below = (uint64_t)0 - (uint64_t)lo_b; /* bytes before the first element */
  uintptr_t end;
  if (below > base)
    return dls__fail(DLS_ERR_INVALID_TENSOR,
                     "%s: %sstrides = %s reach %" PRIu64 " bytes below data + byte_offset = %#" PRIxPTR
                     ", past address 0",
                     call, p, fmt_dims(dims, sizeof dims, strides, ndim), below, base);
  if (__builtin_add_overflow(base, (uintptr_t)hi_b, &end))
    return dls__fail(DLS_ERR_INVALID_TENSOR,
                     "%s: %stensor at data + byte_offset = %#" PRIxPTR " spans %" PRId64
                     " bytes, past the top of the address space",
                     call, p, base, hi_b);
  if (!L.packed) {
    size_t align = align_of_size(L.elem_size);
    if (base % align != 0)
      return dls__fail(DLS_ERR_INVALID_TENSOR,
                       "%s: %sdata + %sbyte_offset = %#" PRIxPTR " (data %p, byte_offset %" PRIu64
                       ") is not aligned to %zu bytes, as %zu-byte %s elements need",
                       call, p, p, base, t->data, t->byte_offset, align, L.elem_size,
                       dls__dlpack_dtype_code_name(t->dtype.code));
  }
  L.lo = base - (uintptr_t)below;
  L.span = (size_t)(end - L.lo);
  *out = L;
  return DLS_OK;
}

dls_status_t dls_tensor_validate(const DLTensor *tensor) {
  static const char call[] = "dls_tensor_validate";
  DLS__ENTER(call);
  if (tensor == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s: tensor is NULL", call);
  dls__layout layout;
  return dls__dlpack_check(tensor, 0, 0, call, "tensor->", &layout);
}
