/* SPDX-License-Identifier: Apache-2.0 */
/* What a built-in's arguments must be, checked at every way into it (its
 * own call, dls_launch, the Python layer): the argument kinds its kernel
 * reads, counts that stay inside the memory of each buffer and tensor (and
 * of a raw pointer whose extent the caller knows), well-formed copy
 * descriptors, and no partial overlap between what it reads and writes. */
#include <stdio.h>
#include <string.h>

#include "core/builtin_args.h"
#include "core/tensor.h"

/* A memory argument: its address and, when known, the bytes [lo, hi)
 * around it that belong to it. */
typedef struct mem_arg {
  char *addr;
  int64_t lo, hi;
  bool known;
} mem_arg;

static dls_status_t kind_error(const char *call, const char *name, size_t i, const dls_arg_t *a, const char *want) {
  return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args[%zu] %s): kind %d, but the built-in takes %s here", call, i, name,
                   (int)a->kind, want);
}

/* Resolves a memory argument, holding its buffer or tensor in *held. */
static dls_status_t mem_resolve(const char *call, const char *name, size_t i, const dls_arg_t *a,
                                const dls__extent *ext, dls__hold *held, mem_arg *out) {
  dls_status_t st;
  *out = (mem_arg){NULL, 0, 0, false};
  if (a->kind == DLS_ARG_BUFFER || a->kind == DLS_ARG_BUFFER_IN) {
    dls__buffer *b = dls__hold_get(held, &dls__buffer_table, a->v.buffer.id, call, name, &st);
    if (b == NULL)
      return st;
    *out = (mem_arg){b->ptr, 0, (int64_t)b->size, true};
  } else if (a->kind == DLS_ARG_TENSOR || a->kind == DLS_ARG_TENSOR_IN) {
    dls__tensor *t = dls__hold_get(held, &dls__tensor_table, a->v.tensor.id, call, name, &st);
    if (t == NULL)
      return st;
    const dls__buffer *m = t->mem != NULL ? t->mem : t->buf; /* an alias import: its own bytes */
    char *base = t->dl.data == NULL ? NULL : (char *)t->dl.data + t->dl.byte_offset;
    int64_t start = base == NULL ? 0 : (int64_t)(base - (char *)m->ptr);
    *out = (mem_arg){base, -start, (int64_t)m->size - start, base != NULL};
  } else if (a->kind == DLS_ARG_PTR) {
    bool known = ext != NULL && ext[i].lo <= ext[i].hi;
    *out = (mem_arg){a->v.ptr, known ? ext[i].lo : 0, known ? ext[i].hi : 0, known};
  } else {
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(args[%zu] %s, kind %d): memory argument must be a buffer, tensor or pointer "
                     "(dls_arg_buffer, dls_arg_tensor, dls_arg_ptr)",
                     call, i, name, (int)a->kind);
  }
  return DLS_OK;
}

/* The argument needs bytes [lo, hi) from its address. A raw pointer of
 * unknown extent is the caller's word, but never NULL. */
static dls_status_t need(const char *call, const char *name, const mem_arg *m, int64_t lo, int64_t hi) {
  if (hi <= lo)
    return DLS_OK;
  if (m->addr == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(%s=NULL): NULL memory for %lld bytes", call, name,
                     (long long)(hi - lo));
  if (m->known && (lo < m->lo || hi > m->hi))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(%s): needs bytes [%lld, %lld) from its start, but only %lld..%lld lie in its memory", call,
                     name, (long long)lo, (long long)hi, (long long)m->lo, (long long)m->hi);
  return DLS_OK;
}

/* A scalar argument of the kind the kernel reads; its bytes of that size
 * (DLS_ARG_BYTES, as the XLA handler passes them) are read as that kind. */
static dls_status_t want_kind(const char *call, const char *name, size_t i, dls_arg_t *a, int32_t kind,
                              const char *what) {
  if (a->kind == kind)
    return DLS_OK;
  uint32_t size = dls__arg_scalar_size(kind);
  if (a->kind == DLS_ARG_BYTES && a->v.bytes != NULL && a->size == size) {
    const void *bytes = a->v.bytes;
    memset(&a->v, 0, sizeof a->v);
    memcpy(&a->v, bytes, size);
    a->kind = kind;
    return DLS_OK;
  }
  return kind_error(call, name, i, a, what);
}

static int mul_overflows(uint64_t a, uint64_t b, uint64_t *out) {
  if (a != 0 && b > UINT64_MAX / a)
    return 1;
  *out = a * b;
  return *out > (uint64_t)INT64_MAX;
}

dls_status_t dls__copy_desc_check(const char *call, const dls_copy_desc_t *d, uint64_t *out_count) {
  if (d->ndim > DLS_COPY_MAX_DIMS)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc.ndim=%u): at most %d dimensions", call, d->ndim,
                     DLS_COPY_MAX_DIMS);
  if (d->elem_size == 0 || d->elem_size > 4096)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc.elem_size=%u): elements of 1 to 4096 bytes", call,
                     d->elem_size);
  uint64_t count = 1;
  for (uint32_t i = 0; i < d->ndim; i++) {
    if (d->shape[i] < 0)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc.shape[%u]=%lld): extents must be >= 0", call, i,
                       (long long)d->shape[i]);
    if (mul_overflows(count, (uint64_t)d->shape[i], &count))
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc.shape): element count overflows", call);
  }
  for (uint32_t i = 0; i < d->ndim && count > 1; i++)
    if (d->dst_strides[i] == 0 && d->shape[i] > 1)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                       "%s(desc.dst_strides[%u]=0): the destination would write one element %lld times (only a "
                       "source may broadcast)",
                       call, i, (long long)d->shape[i]);
  *out_count = count;
  return DLS_OK;
}

dls_status_t dls__copy_view_span(const char *call, const char *which, const dls_copy_desc_t *d,
                                 const int64_t *strides, int64_t *lo, int64_t *hi) {
  __int128 min = 0, max = 0;
  for (uint32_t i = 0; i < d->ndim; i++) {
    if (d->shape[i] == 0) {
      *lo = *hi = 0;
      return DLS_OK;
    }
    __int128 reach = (__int128)(d->shape[i] - 1) * strides[i];
    if (reach < 0)
      min += reach;
    else
      max += reach;
  }
  min *= d->elem_size;
  max = (max + 1) * d->elem_size;
  if (min < INT64_MIN / 2 || max > INT64_MAX / 2)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc): the %s view's extent overflows", call, which);
  *lo = (int64_t)min;
  *hi = (int64_t)max;
  return DLS_OK;
}

/* Whether what `w` writes in [wlo, whi) and what `r` reads in [rlo, rhi)
 * share bytes without being the very same view (same == NULL: never the
 * same). Element by element the same view is read before it is written,
 * so only a partial overlap can give another answer than a copy through a
 * temporary (NumPy's answer). */
static bool overlaps(const mem_arg *w, int64_t wlo, int64_t whi, const mem_arg *r, int64_t rlo, int64_t rhi,
                     bool same_layout) {
  if (w->addr == NULL || r->addr == NULL || whi <= wlo || rhi <= rlo)
    return false;
  uintptr_t a0 = (uintptr_t)w->addr + (uintptr_t)wlo, a1 = (uintptr_t)w->addr + (uintptr_t)whi;
  uintptr_t b0 = (uintptr_t)r->addr + (uintptr_t)rlo, b1 = (uintptr_t)r->addr + (uintptr_t)rhi;
  if (a1 <= b0 || b1 <= a0)
    return false;
  return !(same_layout && w->addr == r->addr);
}

/* The built-in's index, -1 when its device's table no longer holds it (a runtime life that ended). */
static inline int builtin_index(const dls__function *fn) {
  int k = fn->builtin_k;
  return k < DLS__NBUILTIN && __atomic_load_n(&fn->dev->builtins[k], __ATOMIC_ACQUIRE) == fn ? k : -1;
}

static dls_status_t check_fill(const char *call, dls_arg_t *args, const dls__extent *ext, dls__hold **held) {
  mem_arg dst;
  DLS__TRY(mem_resolve(call, "dst", 0, &args[0], ext, held[0], &dst));
  DLS__TRY(want_kind(call, "count", 1, &args[1], DLS_ARG_U64, "a u64 element count"));
  DLS__TRY(want_kind(call, "elem_size", 2, &args[2], DLS_ARG_U32, "a u32 element size"));
  DLS__TRY(want_kind(call, "pattern", 3, &args[3], DLS_ARG_U64, "a u64 pattern"));
  uint32_t elem = args[2].v.u32;
  if (elem != 1 && elem != 2 && elem != 4 && elem != 8)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(elem_size=%u): must be 1, 2, 4 or 8", call, elem);
  uint64_t bytes;
  if (mul_overflows(args[1].v.u64, elem, &bytes))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(count=%llu, elem_size=%u): size overflows", call,
                     (unsigned long long)args[1].v.u64, elem);
  return need(call, "dst", &dst, 0, (int64_t)bytes);
}

static dls_status_t check_axpy(const char *call, int k, dls_arg_t *args, const dls__extent *ext,
                               dls__hold **held, bool *out_overlap) {
  uint32_t elem = k == DLS__BI_AXPY_F32 ? 4 : 8;
  DLS__TRY(want_kind(call, "n", 0, &args[0], DLS_ARG_U64, "a u64 count"));
  DLS__TRY(want_kind(call, "a", 1, &args[1], elem == 4 ? DLS_ARG_F32 : DLS_ARG_F64, elem == 4 ? "an f32" : "an f64"));
  mem_arg x, y;
  DLS__TRY(mem_resolve(call, "x", 2, &args[2], ext, held[0], &x));
  DLS__TRY(mem_resolve(call, "y", 3, &args[3], ext, held[1], &y));
  uint64_t bytes;
  if (mul_overflows(args[0].v.u64, elem, &bytes))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(n=%llu): size overflows", call, (unsigned long long)args[0].v.u64);
  DLS__TRY(need(call, "x", &x, 0, (int64_t)bytes));
  DLS__TRY(need(call, "y", &y, 0, (int64_t)bytes));
  *out_overlap = overlaps(&y, 0, (int64_t)bytes, &x, 0, (int64_t)bytes, true);
  return DLS_OK;
}

static dls_status_t check_copy(const char *call, const dls_arg_t *args, const dls__extent *ext, dls__hold **held,
                               bool *out_overlap) {
  mem_arg dst, src;
  DLS__TRY(mem_resolve(call, "dst", 0, &args[0], ext, held[0], &dst));
  DLS__TRY(mem_resolve(call, "src", 1, &args[1], ext, held[1], &src));
  if (args[2].kind != DLS_ARG_BYTES || args[2].v.bytes == NULL || args[2].size != sizeof(dls_copy_desc_t))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(args[2] desc): a copy descriptor is dls_arg_bytes(&desc, sizeof(dls_copy_desc_t)) (%zu "
                     "bytes), not kind %d of %u bytes",
                     call, sizeof(dls_copy_desc_t), (int)args[2].kind, args[2].size);
  const dls_copy_desc_t *d = args[2].v.bytes;
  uint64_t count;
  DLS__TRY(dls__copy_desc_check(call, d, &count));
  int64_t dlo, dhi, slo, shi;
  DLS__TRY(dls__copy_view_span(call, "dst", d, d->dst_strides, &dlo, &dhi));
  DLS__TRY(need(call, "dst", &dst, dlo, dhi));
  DLS__TRY(dls__copy_view_span(call, "src", d, d->src_strides, &slo, &shi));
  DLS__TRY(need(call, "src", &src, slo, shi));
  *out_overlap = overlaps(&dst, dlo, dhi, &src, slo, shi,
                          memcmp(d->dst_strides, d->src_strides, d->ndim * sizeof(int64_t)) == 0);
  return DLS_OK;
}

static dls_status_t check_latch(const char *call, dls_arg_t *args, const dls__extent *ext, dls__hold **held) {
  mem_arg flag, timed_out;
  DLS__TRY(mem_resolve(call, "flag", 0, &args[0], ext, held[0], &flag));
  DLS__TRY(want_kind(call, "timeout_ns", 1, &args[1], DLS_ARG_U64, "a u64 timeout in nanoseconds"));
  DLS__TRY(mem_resolve(call, "timed_out", 2, &args[2], ext, held[1], &timed_out));
  if (args[1].v.u64 == 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(timeout_ns=0): a latch wait needs a timeout", call);
  DLS__TRY(need(call, "flag", &flag, 0, 4));
  return need(call, "timed_out", &timed_out, 0, 4);
}

dls_status_t dls__builtin_check(const char *call, const dls__function *fn, const dls_arg_t *given, size_t nargs,
                                const dls__extent *extents, bool *out_overlap) {
  static const size_t counts[DLS__NBUILTIN] = {4, 4, 4, 3, 1, 3, 0};
  *out_overlap = false;
  int k = builtin_index(fn);
  if (k < 0)
    return DLS_OK; /* a built-in of a runtime life that ended: the launch says why */
  if (nargs != counts[k])
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(nargs=%zu): built-in \"%s\" takes %zu arguments", call, nargs,
                     fn->name, counts[k]);
  if (nargs > 0 && given == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args=NULL, nargs=%zu): no arguments given", call, nargs);
  DLS__HOLD_VAR(held0);
  DLS__HOLD_VAR(held1);
  dls__hold *held[2] = {&held0, &held1};
  dls_arg_t args[4]; /* the arguments, scalars given as bytes read as their kinds */
  if (nargs > 0)
    memcpy(args, given, nargs * sizeof *args);
  switch (k) {
  case DLS__BI_FILL:
    return check_fill(call, args, extents, held);
  case DLS__BI_AXPY_F32:
  case DLS__BI_AXPY_F64:
    return check_axpy(call, k, args, extents, held, out_overlap);
  case DLS__BI_COPY_STRIDED:
    return check_copy(call, args, extents, held, out_overlap);
  case DLS__BI_SPIN:
    return want_kind(call, "nanoseconds", 0, &args[0], DLS_ARG_U64, "a u64 duration in nanoseconds");
  case DLS__BI_LATCH:
    return check_latch(call, args, extents, held);
  default:
    return DLS_OK;
  }
}
