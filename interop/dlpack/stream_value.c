/* SPDX-License-Identifier: Apache-2.0 */
/* DLPack stream values (the `stream=` integer of __dlpack__) to and from stream handles, and element sizes.
 *
 * The DLPack rules: CUDA 1 names the legacy default stream, 2 the per-thread
 * one, any other positive value is a cudaStream_t, and 0 is refused as
 * ambiguous; ROCm 0 names the default stream, 1 and 2 are refused, other
 * values are hipStream_t; -1 asks for no synchronization; CPU consumers pass
 * None (-1 here). The stream handle {0} stands for "no synchronization" in
 * both directions. Values that cannot be a pointer (below 4096, negative) are
 * refused before any driver call; a plausible but dangling pointer cannot be
 * told from a stream by any driver. */

#include <inttypes.h>

#include "interop/dlpack/dlpack_internal.h"

/* Native values both CUDA and HIP give their default streams. */
#define DLS__NATIVE_LEGACY ((void *)(uintptr_t)1)     /* CU_STREAM_LEGACY */
#define DLS__NATIVE_PER_THREAD ((void *)(uintptr_t)2) /* CU_STREAM_PER_THREAD, hipStreamPerThread */

dls_status_t dls_dlpack_stream_value(dls_stream_t stream, int64_t *out_value) {
  static const char call[] = "dls_dlpack_stream_value";
  DLS__ENTER(call);
  DLS__OUT(call, out_value);
  if (stream.id == 0) {
    *out_value = DLS_DLPACK_STREAM_NO_SYNC;
    return DLS_OK;
  }
  DLS__GET_OF(stream, s, stream, call, "stream");
  /* A reserved handle says which default stream it names; a wrapped native
   * value may name one too (NULL, or the driver's special handles). */
  int deflt = 0;
  if ((stream.id >> 32) == DLS_STREAM_RESERVED_GENERATION)
    deflt = (int)((stream.id >> 24) & 0xff);
  void *native = s->native;
  char dev[32];
  switch ((int)s->dev->device.device_type) {
  case kDLCUDA:
    if (deflt == DLS_STREAM_LEGACY || native == NULL || native == DLS__NATIVE_LEGACY)
      *out_value = 1;
    else if (deflt == DLS_STREAM_PER_THREAD || native == DLS__NATIVE_PER_THREAD)
      *out_value = 2;
    else
      *out_value = (int64_t)(uintptr_t)native;
    return DLS_OK;
  case kDLROCM:
    if (deflt == DLS_STREAM_LEGACY || native == NULL)
      *out_value = 0;
    else if (deflt == DLS_STREAM_PER_THREAD || native == DLS__NATIVE_PER_THREAD)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                       "%s(stream=%#" PRIx64 "): the per-thread default stream of %s has no DLPack value "
                       "(DLPack reserves 1 and 2 on ROCm); use the default stream (0) or a created stream",
                       call, stream.id, dls_device_str(s->dev->device, dev, sizeof dev));
    else
      *out_value = (int64_t)(uintptr_t)native;
    return DLS_OK;
  default:
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(stream=%#" PRIx64 "): %s streams have no DLPack value; DLPack exchanges host memory "
                     "synchronously and CPU consumers pass stream=None",
                     call, stream.id, dls_device_str(s->dev->device, dev, sizeof dev));
  }
}

dls_status_t dls_dlpack_stream_from_value(DLDevice device, int64_t value, dls_stream_t *out_stream) {
  static const char call[] = "dls_dlpack_stream_from_value";
  DLS__ENTER(call);
  DLS__OUT(call, out_stream);
  DLDevice home;
  if (!dls__dlpack_home(device, &home))
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s(value=%" PRId64 "): device.device_type = %d (%s) is not supported",
                     call, value, (int)device.device_type, dls__dlpack_device_type_name((int32_t)device.device_type));
  if (device.device_id < 0)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s(value=%" PRId64 "): device.device_id = %d is negative", call, value,
                     (int)device.device_id);
  char dev[32];
  dls_device_str(home, dev, sizeof dev);
  if (value == DLS_DLPACK_STREAM_NO_SYNC)
    return DLS_OK; /* {0}: no synchronization */
  if (home.device_type == kDLCPU)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(device=%s, value=%" PRId64 "): DLPack has no streams for host memory; CPU consumers pass "
                     "stream=None (-1 here)",
                     call, dev, value);
  if (value < 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(device=%s, value=%" PRId64 "): negative stream values other than -1 (no sync) are invalid",
                     call, dev, value);
  int deflt = 0;
  if (home.device_type == kDLCUDA) {
    if (value == 0)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                       "%s(device=%s, value=0): 0 is ambiguous on CUDA; pass 1 for the legacy default stream, 2 "
                       "for the per-thread default stream or -1 for no synchronization",
                       call, dev);
    if (value == 1)
      deflt = DLS_STREAM_LEGACY;
    else if (value == 2)
      deflt = DLS_STREAM_PER_THREAD;
  } else { /* kDLROCM */
    if (value == 1 || value == 2)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                       "%s(device=%s, value=%" PRId64 "): DLPack reserves 1 and 2 on ROCm; pass 0 for the default "
                       "stream or a hipStream_t",
                       call, dev, value);
    if (value == 0)
      deflt = DLS_STREAM_LEGACY;
  }
  if (deflt == 0 && value < 4096)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(device=%s, value=%" PRId64 "): no stream has this value; DLPack's values on %s are %s, -1 "
                     "(no synchronization) and stream pointers (4096 and above)",
                     call, dev, value, home.device_type == kDLCUDA ? "CUDA" : "ROCm",
                     home.device_type == kDLCUDA ? "1 (legacy default stream), 2 (per-thread default stream)"
                                                 : "0 (default stream)");
  if (deflt != 0) {
    /* Checked now, so that a missing backend or device fails here. */
    dls_status_t st;
    if (dls__device_get(home, call, &st) == NULL)
      return st;
    *out_stream = dls_stream_default(home, deflt);
    return DLS_OK;
  }
  dls_status_t st = dls_stream_wrap(home, (void *)(uintptr_t)value, out_stream);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(device=%s, value=%#" PRIx64 ")", call, dev, (uint64_t)value);
  return DLS_OK;
}

size_t dls_dtype_size(DLDataType dtype) {
  if (dls__dtype_check(dtype, NULL) != DLS__DTYPE_OK)
    return 0;
  return ((size_t)dtype.bits * dtype.lanes + 7u) / 8u;
}
