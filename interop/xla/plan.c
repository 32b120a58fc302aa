/* SPDX-License-Identifier: Apache-2.0 */
/* A dlstream custom call's plan: its attributes (dls_cfg, dls_args, dls_vals) read and checked, and the launch
 * arguments made of its buffers. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "xla_internal.h"

static int span_is(const dls__xla_span *s, const char *name) {
  size_t n = strlen(name);
  return s != NULL && s->len == n && memcmp(s->ptr, name, n) == 0;
}

/* An array attribute of 64-bit integers (signed or not: the bits are what counts). */
static int int64_array(int type, const void *attr, const int64_t **out, size_t *out_n) {
  const dls__xla_array *a = attr;
  if (type != DLS__XLA_ATTR_ARRAY || a == NULL || (a->dtype != DLS__XLA_DTYPE_S64 && a->dtype != DLS__XLA_DTYPE_U64))
    return -1;
  *out = a->data;
  *out_n = a->size;
  return 0;
}

__attribute__((format(printf, 2, 3))) static dls_status_t bad(char *msg, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, DLS__XLA_MSG, fmt, ap);
  va_end(ap);
  return DLS_ERR_INVALID_ARGUMENT;
}

/* dls_cfg's launch configuration and device. */
static dls_status_t read_config(const int64_t *c, dls__xla_plan *p, char msg[DLS__XLA_MSG]) {
  p->op = (int)c[DLS_XLA_CFG_OP];
  p->handle = (uint64_t)c[DLS_XLA_CFG_HANDLE];
  if (p->op != DLS_XLA_OP_LAUNCH && p->op != DLS_XLA_OP_LATCH_WAIT)
    return bad(msg, "dls_cfg[%d]=%d: unknown operation (1: launch, 2: latch wait)", DLS_XLA_CFG_OP, p->op);
  if (p->handle == 0)
    return bad(msg, "dls_cfg[%d]=0: no handle", DLS_XLA_CFG_HANDLE);
  int64_t type = c[DLS_XLA_CFG_DEVICE_TYPE], id = c[DLS_XLA_CFG_DEVICE_ID];
  if (type <= 0 || type > 0xffff || id < 0 || id > 0xffff)
    return bad(msg, "dls_cfg: device type %lld, id %lld is not a device", (long long)type, (long long)id);
  p->device = dls_device((DLDeviceType)type, (int32_t)id);
  if (p->op == DLS_XLA_OP_LATCH_WAIT) {
    if (c[DLS_XLA_CFG_TIMEOUT_NS] <= 0)
      return bad(msg, "dls_cfg[%d]=%lld: a latch wait needs a timeout (ns)", DLS_XLA_CFG_TIMEOUT_NS,
                 (long long)c[DLS_XLA_CFG_TIMEOUT_NS]);
    p->timeout_ns = (uint64_t)c[DLS_XLA_CFG_TIMEOUT_NS];
    return DLS_OK;
  }
  bool zero = true;
  for (int i = 0; i < 3; i++)
    zero = zero && c[DLS_XLA_CFG_GRID + i] == 0 && c[DLS_XLA_CFG_BLOCK + i] == 0;
  p->core_grid = zero;
  for (int i = 0; i < 3 && !zero; i++) {
    int64_t g = c[DLS_XLA_CFG_GRID + i], b = c[DLS_XLA_CFG_BLOCK + i];
    if (g < 1 || g > UINT32_MAX)
      return bad(msg, "dls_cfg: grid[%d]=%lld is not in [1, 2^32)", i, (long long)g);
    if (b < 1 || b > UINT32_MAX)
      return bad(msg, "dls_cfg: block[%d]=%lld is not in [1, 2^32)", i, (long long)b);
    p->config.grid[i] = (uint32_t)g;
    p->config.block[i] = (uint32_t)b;
  }
  int64_t shm = c[DLS_XLA_CFG_SHARED_MEM];
  if (shm < 0 || shm > UINT32_MAX)
    return bad(msg, "dls_cfg[%d]=%lld: shared memory bytes out of range", DLS_XLA_CFG_SHARED_MEM, (long long)shm);
  p->config.shared_mem_bytes = (uint32_t)shm;
  return DLS_OK;
}

/* Every dls_args entry is well formed and its value bytes lie in dls_vals (buffer indexes are checked against
 * the call's buffers at execution). */
static dls_status_t check_args(const dls__xla_plan *p, char msg[DLS__XLA_MSG]) {
  size_t total = 0;
  for (size_t i = 0; i < p->nargs; i++) {
    int64_t e = p->args[i];
    int src = (int)(e & 0xff);
    long long index = (long long)((e >> 8) & 0xffffff), size = (long long)((uint64_t)e >> 32);
    if (src == DLS_XLA_FROM_VALUE) {
      if (size < 1 || size > DLS_MAX_ARG_BYTES || (size_t)(index + size) > p->nvals)
        return bad(msg, "dls_args[%zu]: %lld value bytes at %lld do not fit dls_vals (%zu bytes)", i, size, index,
                   p->nvals);
      total += (size_t)size;
    } else if (src == DLS_XLA_FROM_OPERAND || src == DLS_XLA_FROM_RESULT) {
      if (size != 0)
        return bad(msg, "dls_args[%zu]: a buffer argument has no size (%lld given)", i, size);
      total += sizeof(void *);
    } else {
      return bad(msg, "dls_args[%zu]: source %d is not 1 (operand), 2 (result) or 3 (value)", i, src);
    }
  }
  if (total > DLS_MAX_ARG_BYTES)
    return bad(msg, "dls_args: the arguments take %zu bytes, more than %d", total, DLS_MAX_ARG_BYTES);
  return DLS_OK;
}

dls_status_t dls__xla_plan_read(const dls__xla_attrs *attrs, dls__xla_plan *out, char msg[DLS__XLA_MSG]) {
  memset(out, 0, sizeof *out);
  const int64_t *cfg = NULL;
  size_t ncfg = 0;
  int have_args = 0;
  for (int64_t i = 0; i < attrs->size; i++) {
    const dls__xla_span *name = attrs->names[i];
    int type = attrs->types[i];
    const void *attr = attrs->attrs[i];
    if (span_is(name, "dls_cfg")) {
      if (int64_array(type, attr, &cfg, &ncfg) != 0 || ncfg != DLS_XLA_CFG_LEN)
        return bad(msg, "dls_cfg: expected an int64 array of %d entries", DLS_XLA_CFG_LEN);
    } else if (span_is(name, "dls_args")) {
      if (int64_array(type, attr, &out->args, &out->nargs) != 0 || out->nargs > DLS_MAX_ARGS)
        return bad(msg, "dls_args: expected an int64 array of at most %d entries", DLS_MAX_ARGS);
      have_args = 1;
    } else if (span_is(name, "dls_vals")) {
      const dls__xla_array *a = attr;
      if (type != DLS__XLA_ATTR_ARRAY || (a->dtype != DLS__XLA_DTYPE_U8 && a->dtype != DLS__XLA_DTYPE_S8))
        return bad(msg, "dls_vals: expected a uint8 array");
      out->vals = a->data;
      out->nvals = a->size;
    } else if (span_is(name, "dls_cpu_fn")) {
      const int64_t *fn;
      size_t n;
      if (int64_array(type, attr, &fn, &n) != 0 || n != 1 || fn[0] == 0)
        return bad(msg, "dls_cpu_fn: expected an int64 array of one function handle");
      out->cpu_fn = (uint64_t)fn[0];
    } else if (span_is(name, "dls_fns")) {
      if (int64_array(type, attr, &out->fns, &out->nfns) != 0 || out->nfns == 0 || out->nfns > 0xffff)
        return bad(msg, "dls_fns: expected an int64 array of 1 to 65535 function handles");
    } else {
      return bad(msg, "unknown attribute \"%.*s\" (dlstream's are dls_cfg, dls_args, dls_vals, dls_fns, dls_cpu_fn)",
                 name ? (int)name->len : 0, name ? name->ptr : "");
    }
  }
  if (cfg == NULL)
    return bad(msg, "no dls_cfg attribute: this custom call was not made by dlstream.jax (see dlstream/xla.h)");
  dls_status_t st = read_config(cfg, out, msg);
  if (st != DLS_OK)
    return st;
  if (out->op == DLS_XLA_OP_LAUNCH && !have_args)
    return bad(msg, "no dls_args attribute: a launch names its arguments");
  return check_args(out, msg);
}

/* XLA's element types as DLPack's; a type dlstream does not know is known to be one no built-in takes (code
 * kDLOpaqueHandle, 0 bits). */
static DLDataType dtype_of(int xla) {
  switch (xla) {
  case DLS__XLA_DTYPE_PRED: return (DLDataType){kDLBool, 8, 1};
  case DLS__XLA_DTYPE_S8: return (DLDataType){kDLInt, 8, 1};
  case DLS__XLA_DTYPE_S16: return (DLDataType){kDLInt, 16, 1};
  case DLS__XLA_DTYPE_S32: return (DLDataType){kDLInt, 32, 1};
  case DLS__XLA_DTYPE_S64: return (DLDataType){kDLInt, 64, 1};
  case DLS__XLA_DTYPE_U8: return (DLDataType){kDLUInt, 8, 1};
  case DLS__XLA_DTYPE_U16: return (DLDataType){kDLUInt, 16, 1};
  case DLS__XLA_DTYPE_U32: return (DLDataType){kDLUInt, 32, 1};
  case DLS__XLA_DTYPE_U64: return (DLDataType){kDLUInt, 64, 1};
  case DLS__XLA_DTYPE_F16: return (DLDataType){kDLFloat, 16, 1};
  case DLS__XLA_DTYPE_F32: return (DLDataType){kDLFloat, 32, 1};
  case DLS__XLA_DTYPE_F64: return (DLDataType){kDLFloat, 64, 1};
  case DLS__XLA_DTYPE_BF16: return (DLDataType){kDLBfloat, 16, 1};
  case DLS__XLA_DTYPE_C64: return (DLDataType){kDLComplex, 64, 1};
  case DLS__XLA_DTYPE_C128: return (DLDataType){kDLComplex, 128, 1};
  default: return (DLDataType){kDLOpaqueHandle, 0, 1};
  }
}

/* Buffer `index` of operands or results, by the frame's own count, and what the call knows of it: its dense
 * bytes from its data pointer and its element type (no bytes for a type dlstream does not know). */
static void *buffer_data(int64_t count, const int *types, void *const *items, int64_t index, int want,
                         dls__extent *out) {
  if (index >= count || types[index] != want)
    return (void *)-1;
  const dls__xla_buffer *b = items[index];
  DLDataType dt = dtype_of(b->dtype);
  int64_t bytes = dt.bits / 8;
  for (int64_t i = 0; i < b->rank && bytes > 0; i++)
    if (b->dims[i] < 0 || __builtin_mul_overflow(bytes, b->dims[i], &bytes))
      bytes = 0; /* cannot be: XLA's shapes are its allocations' */
  *out = (dls__extent){0, bytes, dt};
  return b->data;
}

dls_status_t dls__xla_plan_args(const dls__xla_plan *p, const dls__xla_call_frame *frame, dls_arg_t *argv,
                                dls__extent *extents, char msg[DLS__XLA_MSG]) {
  for (size_t i = 0; i < p->nargs; i++) {
    int64_t e = p->args[i];
    int src = (int)(e & 0xff);
    int64_t index = (e >> 8) & 0xffffff;
    extents[i] = (dls__extent){.lo = 1, .hi = 0}; /* a value's: none */
    if (src == DLS_XLA_FROM_VALUE) {
      argv[i] = dls_arg_bytes(p->vals + index, (uint32_t)((uint64_t)e >> 32));
      continue;
    }
    void *data = src == DLS_XLA_FROM_OPERAND ? buffer_data(frame->args.size, frame->args.types, frame->args.args,
                                                           index, DLS__XLA_ARG_BUFFER, &extents[i])
                                             : buffer_data(frame->rets.size, frame->rets.types, frame->rets.rets,
                                                           index, DLS__XLA_RET_BUFFER, &extents[i]);
    if (data == (void *)-1) {
      return bad(msg, "dls_args[%zu]: %s %lld is not a buffer of this call (it has %lld operands and %lld results)",
                 i, src == DLS_XLA_FROM_OPERAND ? "operand" : "result", (long long)index,
                 (long long)frame->args.size, (long long)frame->rets.size);
    }
    argv[i] = dls_arg_ptr(data);
  }
  return DLS_OK;
}
