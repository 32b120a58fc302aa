/* SPDX-License-Identifier: Apache-2.0 */
/* What a built-in's arguments must be, checked at every way into it (its own call, dls_launch, the Python layer,
 * the XLA handler): the argument kinds its kernel reads and the element types it was written for (the table,
 * kernels/builtin_table.h), counts that stay inside the memory of each buffer and tensor (and of a raw pointer
 * whose extent the caller knows), well-formed descriptors, and no partial overlap between what it reads and
 * writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/builtin_args.h"
#include "core/cast.h"
#include "core/tensor.h"

#define BUILTIN_INFO(id, name, nargs, args, check, cpu, gpu) [DLS__BI_##id] = {name, nargs, {DLS__UNPAREN args}, gpu},
const dls__builtin_info dls__builtins[DLS__NKERNEL] = {DLS__KERNELS(BUILTIN_INFO)};
#undef BUILTIN_INFO

/* A memory argument: its address and, when known, the bytes [lo, hi) around it that belong to it and its element
 * type (lanes 0: unknown). */
typedef struct mem_arg {
  char *addr;
  int64_t lo, hi;
  bool known;
  DLDataType dtype;
} mem_arg;

/* A checker: what the kinds and element types do not say (table: the checker column). `args` hold the scalars
 * read as their kinds, `mem` the memory arguments, resolved (by argument index). */
typedef dls_status_t checker(const char *call, int k, const dls_arg_t *args, const mem_arg *mem,
                             bool *out_overlap);

static const char *const g_kind_names[] = {[DLS_ARG_I32] = "an i32", [DLS_ARG_I64] = "an i64",
                                           [DLS_ARG_U32] = "a u32",  [DLS_ARG_U64] = "a u64",
                                           [DLS_ARG_F32] = "an f32", [DLS_ARG_F64] = "an f64",
                                           [DLS_ARG_BYTES] = "bytes (dls_arg_bytes)"};

/* The structs a bytes argument holds (DLS__DESC_*). */
static const struct {
  const char *what, *type;
  size_t size;
} g_descs[] = {[DLS__DESC_COPY] = {"copy", "dls_copy_desc_t", sizeof(dls_copy_desc_t)},
               [DLS__DESC_CONVERT] = {"conversion", "dls_convert_desc_t", sizeof(dls_convert_desc_t)}};

static dls_status_t kind_error(const char *call, const char *name, size_t i, const dls_arg_t *a, const char *want) {
  return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args[%zu] %s): kind %d, but the built-in takes %s here", call, i, name,
                   (int)a->kind, want);
}

/* Resolves a memory argument, holding its buffer or tensor in *held. */
static dls_status_t mem_resolve(const char *call, const char *name, size_t i, const dls_arg_t *a,
                                const dls__extent *ext, dls__hold *held, mem_arg *out) {
  dls_status_t st;
  *out = (mem_arg){NULL, 0, 0, false, {0, 0, 0}};
  if (a->kind == DLS_ARG_BUFFER || a->kind == DLS_ARG_BUFFER_IN) {
    dls__buffer *b = dls__hold_get(held, &dls__buffer_table, a->v.buffer.id, call, name, &st);
    if (b == NULL)
      return st;
    *out = (mem_arg){b->ptr, 0, (int64_t)b->size, true, {0, 0, 0}}; /* bytes: no element type */
  } else if (a->kind == DLS_ARG_TENSOR || a->kind == DLS_ARG_TENSOR_IN) {
    dls__tensor *t = dls__hold_get(held, &dls__tensor_table, a->v.tensor.id, call, name, &st);
    if (t == NULL)
      return st;
    const dls__buffer *m = t->mem != NULL ? t->mem : t->buf; /* an alias import: its own bytes */
    char *base = t->dl.data == NULL ? NULL : (char *)t->dl.data + t->dl.byte_offset;
    int64_t start = base == NULL ? 0 : (int64_t)(base - (char *)m->ptr);
    *out = (mem_arg){base, -start, (int64_t)m->size - start, base != NULL, t->dl.dtype};
  } else if (a->kind == DLS_ARG_PTR) {
    bool known = ext != NULL && ext[i].lo <= ext[i].hi;
    DLDataType dt = ext != NULL ? ext[i].dtype : (DLDataType){0, 0, 0};
    *out = (mem_arg){a->v.ptr, known ? ext[i].lo : 0, known ? ext[i].hi : 0, known, dt};
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

/* A scalar or bytes argument of the kind the kernel reads (`what`: the table's); a scalar's bytes of that size
 * (DLS_ARG_BYTES, as the XLA handler passes them) are read as that kind. */
static dls_status_t want_kind(const char *call, const char *name, size_t i, dls_arg_t *a, uint32_t what) {
  int32_t kind = (int32_t)DLS__A_KIND(what);
  if (kind == DLS_ARG_BYTES) {
    if (a->kind != DLS_ARG_BYTES || a->v.bytes == NULL)
      return kind_error(call, name, i, a, g_kind_names[kind]);
    uint32_t d = DLS__T_PARAM(what);
    if (d != 0 && a->size != g_descs[d].size)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                       "%s(args[%zu] %s): a %s descriptor is dls_arg_bytes(&desc, sizeof(%s)) (%zu bytes), not %u "
                       "bytes",
                       call, i, name, g_descs[d].what, g_descs[d].type, g_descs[d].size, a->size);
    return DLS_OK;
  }
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
  return kind_error(call, name, i, a, g_kind_names[kind]);
}

/* ---- element types ---- */

/* Memory argument i's address is aligned to its elements of `size` bytes (sizes 2, 4 and 8 need it). */
static dls_status_t element_aligned(const char *call, const char *name, size_t i, const mem_arg *m, uint32_t size) {
  if (m->addr == NULL || (size != 2 && size != 4 && size != 8) || (uintptr_t)m->addr % size == 0)
    return DLS_OK;
  return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args[%zu] %s=%p): not aligned to its elements of %u bytes", call, i,
                   name, (void *)m->addr, size);
}

static bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

/* What a memory argument of type rule `t` takes, in words (messages, the Python registry). */
static const char *type_text(const dls__builtin_info *b, uint32_t t, char *buf, size_t size) {
  uint32_t p = DLS__T_PARAM(t);
  switch (DLS__T_RULE(t)) {
  case DLS__T_RULE(DLS__T_EXACT(0, 0)):
    return dls__dtype_name((DLDataType){(uint8_t)(p >> 8), (uint8_t)p, 1}, buf, size);
  case DLS__T_RULE(DLS__T_INT(0)):
    snprintf(buf, size, "int%u or uint%u", p, p);
    return buf;
  case DLS__T_RULE(DLS__T_SIZED(0)):
    snprintf(buf, size, "any type of %s bytes", p < b->nargs ? b->args[p].name : "?");
    return buf;
  case DLS__T_RULE(DLS__T_DESC(0)):
    snprintf(buf, size, "the type %s names", p < b->nargs ? b->args[p].name : "?");
    return buf;
  default:
    snprintf(buf, size, "%s", "");
    return buf;
  }
}

static dls_status_t type_error(const char *call, const dls__builtin_info *b, size_t i, DLDataType got,
                               const char *want) {
  char g[40];
  return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args[%zu] %s): its elements are %s, but %s takes %s here", call, i,
                   b->args[i].name, dls__dtype_name(got, g, sizeof g), b->name, want);
}

/* The table's element types of memory argument i, where its type is known (a descriptor's are its checker's). */
static dls_status_t check_type(const char *call, const dls__builtin_info *b, size_t i, const dls_arg_t *args,
                               const mem_arg *m) {
  uint32_t t = DLS__A_TYPE(b->args[i].what), p = DLS__T_PARAM(t);
  DLDataType dt = m->dtype;
  if (dt.lanes == 0)
    return DLS_OK; /* unknown: bytes of a buffer, a pointer on the caller's word */
  bool ok = true;
  char want[64];
  switch (DLS__T_RULE(t)) {
  case DLS__T_RULE(DLS__T_EXACT(0, 0)):
    ok = dt.code == (p >> 8) && dt.bits == (p & 0xff) && dt.lanes == 1;
    break;
  case DLS__T_RULE(DLS__T_INT(0)):
    ok = (dt.code == kDLInt || dt.code == kDLUInt) && dt.bits == p && dt.lanes == 1;
    break;
  case DLS__T_RULE(DLS__T_SIZED(0)):
    if (dls__dtype_bytes(dt) != args[p].v.u32 || dt.bits % 8 != 0) {
      char g[40];
      return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                       "%s(args[%zu] %s): its elements are %s (%zu bytes), but %s=%u: %s takes elements of %s bytes",
                       call, i, b->args[i].name, dls__dtype_name(dt, g, sizeof g), dls__dtype_bytes(dt), b->args[p].name,
                       args[p].v.u32, b->name, b->args[p].name);
    }
    break;
  default:
    break;
  }
  return ok ? DLS_OK : type_error(call, b, i, dt, type_text(b, t, want, sizeof want));
}

/* A typed kernel reads and writes its elements as words of their size: a memory argument of a rule that gives the
 * size (one type, or the size argument) must be aligned to it (a GPU faults on a misaligned word). */
static dls_status_t check_align(const char *call, const dls__builtin_info *b, size_t i, const dls_arg_t *args,
                                const mem_arg *m) {
  uint32_t t = DLS__A_TYPE(b->args[i].what), p = DLS__T_PARAM(t), size = 0;
  switch (DLS__T_RULE(t)) {
  case DLS__T_RULE(DLS__T_EXACT(0, 0)): size = (p & 0xff) / 8; break;
  case DLS__T_RULE(DLS__T_INT(0)): size = p / 8; break;
  case DLS__T_RULE(DLS__T_SIZED(0)): size = args[p].v.u32; break;
  default: break;
  }
  return element_aligned(call, b->args[i].name, i, m, size);
}

/* ---- the checkers ---- */

static int mul_overflows(uint64_t a, uint64_t b, uint64_t *out) {
  if (a != 0 && b > UINT64_MAX / a)
    return 1;
  *out = a * b;
  return *out > (uint64_t)INT64_MAX;
}

/* Views of at most this many elements whose steps do not nest are told apart by their offsets, sorted. */
enum { APART_COUNTED = 1024 }; /* on the stack: 8 KiB */

static uint64_t magnitude(int64_t v) { return v < 0 ? 0 - (uint64_t)v : (uint64_t)v; }

static int offset_order(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Whether the `count` elements of a view (strides in elements) are each at an offset of their own: its steps,
 * smallest first, each pass the reach of those below it (what slicing, transposing and reversing make); failing that,
 * for a view of at most APART_COUNTED elements, its offsets (modulo 2^64: never apart where they are one) sorted. */
static bool elements_apart(const dls_copy_desc_t *d, const int64_t *strides, uint64_t count) {
  uint32_t order[DLS_COPY_MAX_DIMS], m = 0;
  for (uint32_t i = 0; i < d->ndim; i++) {
    if (d->shape[i] < 2)
      continue; /* one element along it: its stride is never used */
    uint32_t k = m++;
    for (; k > 0 && magnitude(strides[order[k - 1]]) > magnitude(strides[i]); k--)
      order[k] = order[k - 1];
    order[k] = i;
  }
  __int128 reach = 0;
  bool nested = true;
  for (uint32_t k = 0; k < m && nested; k++) {
    nested = (__int128)magnitude(strides[order[k]]) > reach;
    reach += (__int128)magnitude(strides[order[k]]) * (d->shape[order[k]] - 1);
  }
  if (nested || count > APART_COUNTED)
    return nested;
  uint64_t at[APART_COUNTED];
  for (uint64_t e = 0; e < count; e++) {
    uint64_t rest = e, offset = 0;
    for (uint32_t i = d->ndim; i-- > 0;) {
      offset += (rest % (uint64_t)d->shape[i]) * (uint64_t)strides[i];
      rest /= (uint64_t)d->shape[i];
    }
    at[e] = offset;
  }
  qsort(at, count, sizeof *at, offset_order);
  bool apart = true;
  for (uint64_t e = 1; e < count && apart; e++)
    apart = at[e] != at[e - 1];
  return apart;
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

dls_status_t dls__convert_desc_check(const char *call, const dls_convert_desc_t *d, dls_copy_desc_t *out_copy,
                                     uint64_t *out_count) {
  if (d->reserved != 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc.reserved=%u): must be 0", call, d->reserved);
  DLS__TRY(dls__cast_check(call, d->dst_dtype, d->src_dtype));
  dls_copy_desc_t c;
  memset(&c, 0, sizeof c);
  c.ndim = d->ndim;
  c.elem_size = (uint32_t)dls__dtype_bytes(d->dst_dtype);
  size_t n = d->ndim <= DLS_COPY_MAX_DIMS ? d->ndim : 0;
  memcpy(c.shape, d->shape, n * sizeof c.shape[0]);
  memcpy(c.dst_strides, d->dst_strides, n * sizeof c.dst_strides[0]);
  memcpy(c.src_strides, d->src_strides, n * sizeof c.src_strides[0]);
  DLS__TRY(dls__copy_desc_check(call, &c, out_count));
  *out_copy = c;
  return DLS_OK;
}

dls_status_t dls__copy_view_span(const char *call, const char *which, const dls_copy_desc_t *d,
                                 const int64_t *strides, uint32_t elem, int64_t *lo, int64_t *hi) {
  __int128 min = 0, max = 0;
  for (uint32_t i = 0; i < d->ndim; i++) {
    if (d->shape[i] == 0) {
      *lo = *hi = 0;
      return DLS_OK;
    }
    __int128 reach = (__int128)(d->shape[i] - 1) * strides[i];
    if (reach > INT64_MAX || reach < -(__int128)INT64_MAX) /* else the sum times `elem` could pass 128 bits and */
      goto overflows;                                      /* wrap to a small span */
    if (reach < 0)
      min += reach;
    else
      max += reach;
  }
  min *= elem;
  max = (max + 1) * elem;
  if (min < INT64_MIN / 2 || max > INT64_MAX / 2)
    goto overflows;
  *lo = (int64_t)min;
  *hi = (int64_t)max;
  return DLS_OK;
overflows:
  return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc): the %s view's extent overflows", call, which);
}

/* Whether what `w` writes in [wlo, whi) and what `r` reads in [rlo, rhi)
 * share bytes without being the very same view (same_layout: one layout, so
 * one address is the same view). Element by element the same view is read
 * before it is written, so only a partial overlap can give another answer
 * than a copy through a temporary (NumPy's answer). */
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

static dls_status_t check_none(const char *call, int k, const dls_arg_t *args, const mem_arg *mem, bool *ov) {
  return DLS_OK;
}

static dls_status_t check_fill(const char *call, int k, const dls_arg_t *args, const mem_arg *mem, bool *ov) {
  uint32_t elem = args[2].v.u32;
  if (elem != 1 && elem != 2 && elem != 4 && elem != 8)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(elem_size=%u): must be 1, 2, 4 or 8", call, elem);
  uint64_t bytes;
  if (mul_overflows(args[1].v.u64, elem, &bytes))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(count=%llu, elem_size=%u): size overflows", call,
                     (unsigned long long)args[1].v.u64, elem);
  return need(call, "dst", &mem[0], 0, (int64_t)bytes);
}

static dls_status_t check_axpy(const char *call, int k, const dls_arg_t *args, const mem_arg *mem, bool *ov) {
  uint32_t elem = (DLS__T_PARAM(DLS__A_TYPE(dls__builtins[k].args[2].what)) & 0xff) / 8; /* x's type: its size */
  uint64_t bytes;
  if (mul_overflows(args[0].v.u64, elem, &bytes))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(n=%llu): size overflows", call, (unsigned long long)args[0].v.u64);
  DLS__TRY(need(call, "x", &mem[2], 0, (int64_t)bytes));
  DLS__TRY(need(call, "y", &mem[3], 0, (int64_t)bytes));
  *ov = overlaps(&mem[3], 0, (int64_t)bytes, &mem[2], 0, (int64_t)bytes, true);
  return DLS_OK;
}

/* A strided copy's two views (`d`: shape, strides, dst's element size; `src_elem`: src's; `count` elements) inside
 * their memory, the destination's elements each its own (one written from several sources at once is a race);
 * *ov: a partial overlap. */
static dls_status_t check_views(const char *call, const dls_copy_desc_t *d, uint32_t src_elem, uint64_t count,
                                const mem_arg *mem, bool *ov) {
  int64_t dlo, dhi, slo, shi;
  DLS__TRY(dls__copy_view_span(call, "dst", d, d->dst_strides, d->elem_size, &dlo, &dhi));
  DLS__TRY(need(call, "dst", &mem[0], dlo, dhi));
  if (count > 1 && !elements_apart(d, d->dst_strides, count))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(desc.dst_strides): the destination's elements overlap%s: one element would be written from "
                     "several sources at once (only a source may overlap itself)",
                     call, count > APART_COUNTED ? " (or may: its steps do not nest, and past 1024 elements they are "
                                                   "not counted)" : "");
  DLS__TRY(dls__copy_view_span(call, "src", d, d->src_strides, src_elem, &slo, &shi));
  DLS__TRY(need(call, "src", &mem[1], slo, shi));
  bool same = src_elem == d->elem_size && memcmp(d->dst_strides, d->src_strides, d->ndim * sizeof(int64_t)) == 0;
  *ov = overlaps(&mem[0], dlo, dhi, &mem[1], slo, shi, same);
  return DLS_OK;
}

static dls_status_t check_copy(const char *call, int k, const dls_arg_t *args, const mem_arg *mem, bool *ov) {
  const dls_copy_desc_t *d = args[2].v.bytes;
  uint64_t count;
  DLS__TRY(dls__copy_desc_check(call, d, &count));
  char a[40], b[40];
  for (int i = 0; i < 2; i++)
    if (mem[i].dtype.lanes != 0 && dls__dtype_bytes(mem[i].dtype) != d->elem_size)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                       "%s(args[%d] %s): its elements are %s (%zu bytes), but desc.elem_size=%u", call, i,
                       i == 0 ? "dst" : "src", dls__dtype_name(mem[i].dtype, a, sizeof a), dls__dtype_bytes(mem[i].dtype),
                       d->elem_size);
  if (mem[0].dtype.lanes != 0 && mem[1].dtype.lanes != 0 && !same_dtype(mem[0].dtype, mem[1].dtype))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(args[0] dst, args[1] src): their elements are %s and %s, but dls_copy_strided copies bits: "
                     "both must have one element type (dls_copy_convert, and dlstream.copy, convert)",
                     call, dls__dtype_name(mem[0].dtype, a, sizeof a), dls__dtype_name(mem[1].dtype, b, sizeof b));
  return check_views(call, d, d->elem_size, count, mem, ov);
}

static dls_status_t check_convert(const char *call, int k, const dls_arg_t *args, const mem_arg *mem, bool *ov) {
  const dls_convert_desc_t *cd = args[2].v.bytes;
  dls_copy_desc_t d;
  uint64_t count;
  DLS__TRY(dls__convert_desc_check(call, cd, &d, &count));
  const DLDataType want[2] = {cd->dst_dtype, cd->src_dtype};
  for (int i = 0; i < 2; i++) {
    DLS__TRY(element_aligned(call, i == 0 ? "dst" : "src", (size_t)i, &mem[i], (uint32_t)dls__dtype_bytes(want[i])));
    if (mem[i].dtype.lanes != 0 && !same_dtype(mem[i].dtype, want[i])) {
      char a[40], b[40];
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args[%d] %s): its elements are %s, but desc.%s_dtype is %s", call,
                       i, i == 0 ? "dst" : "src", dls__dtype_name(mem[i].dtype, a, sizeof a), i == 0 ? "dst" : "src",
                       dls__dtype_name(want[i], b, sizeof b));
    }
  }
  return check_views(call, &d, (uint32_t)dls__dtype_bytes(cd->src_dtype), count, mem, ov);
}

static dls_status_t check_latch(const char *call, int k, const dls_arg_t *args, const mem_arg *mem, bool *ov) {
  if (args[1].v.u64 == 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(timeout_ns=0): a latch wait needs a timeout", call);
  DLS__TRY(need(call, "flag", &mem[0], 0, 4));
  return need(call, "timed_out", &mem[2], 0, 4);
}

#define BUILTIN_CHECKER(id, name, nargs, args, check, ...) [DLS__BI_##id] = check,
static checker *const g_checkers[DLS__NBUILTIN] = {DLS__BUILTINS(BUILTIN_CHECKER)};
#undef BUILTIN_CHECKER

/* ---- every launch of a built-in ---- */

/* The built-in's index, -1 when its device's table no longer holds it (a runtime life that ended). */
static inline int builtin_index(const dls__function *fn) {
  int k = fn->builtin_k;
  return k < DLS__NBUILTIN && __atomic_load_n(&fn->dev->builtins[k], __ATOMIC_ACQUIRE) == fn ? k : -1;
}

typedef struct holds {
  dls__hold h[DLS__BUILTIN_MAX_ARGS];
} holds;

static void holds_end(holds *hs) {
  for (int i = 0; i < DLS__BUILTIN_MAX_ARGS; i++)
    dls__hold_end(&hs->h[i]);
}

dls_status_t dls__builtin_check(const char *call, const dls__function *fn, const dls_arg_t *given, size_t nargs,
                                const dls__extent *extents, bool *out_overlap) {
  uintptr_t bits;
  return dls__builtin_check_addrs(call, fn, given, nargs, extents, out_overlap, &bits, NULL);
}

dls_status_t dls__builtin_check_addrs(const char *call, const dls__function *fn, const dls_arg_t *given, size_t nargs,
                                      const dls__extent *extents, bool *out_overlap, uintptr_t *out_addr_bits,
                                      dls_arg_t *out_args) {
  *out_overlap = false;
  *out_addr_bits = 1;
  int k = builtin_index(fn);
  if (k < 0)
    return DLS_OK; /* a built-in of a runtime life that ended: the launch says why */
  const dls__builtin_info *b = &dls__builtins[k];
  if (nargs != b->nargs)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(nargs=%zu): built-in \"%s\" takes %zu arguments", call, nargs,
                     b->name, b->nargs);
  if (nargs > 0 && given == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args=NULL, nargs=%zu): no arguments given", call, nargs);
  holds held __attribute__((cleanup(holds_end)));
  memset(&held, 0, sizeof held);
  dls_arg_t args[DLS__BUILTIN_MAX_ARGS]; /* the arguments, scalars given as bytes read as their kinds */
  mem_arg mem[DLS__BUILTIN_MAX_ARGS];
  if (nargs > 0)
    memcpy(args, given, nargs * sizeof *args);
  for (size_t i = 0; i < nargs; i++) {
    uint32_t kind = DLS__A_KIND(b->args[i].what);
    if (kind == DLS__ARG_MEM_P || kind == DLS__ARG_MEM_CP)
      DLS__TRY(mem_resolve(call, b->args[i].name, i, &args[i], extents, &held.h[i], &mem[i]));
    else
      DLS__TRY(want_kind(call, b->args[i].name, i, &args[i], b->args[i].what));
  }
  uintptr_t bits = 0;
  for (size_t i = 0; i < nargs; i++) {
    uint32_t kind = DLS__A_KIND(b->args[i].what);
    if (kind == DLS__ARG_MEM_P || kind == DLS__ARG_MEM_CP) {
      DLS__TRY(check_type(call, b, i, args, &mem[i]));
      DLS__TRY(check_align(call, b, i, args, &mem[i]));
      bits |= mem[i].addr != NULL ? (uintptr_t)mem[i].addr : 1u;
    }
  }
  *out_addr_bits = bits;
  if (out_args != NULL && nargs > 0)
    memcpy(out_args, args, nargs * sizeof *args);
  return g_checkers[k](call, k, args, mem, out_overlap);
}

/* ---- the table for the extension (ext.h) ---- */

bool dls__builtin_describe(size_t k, const char **out_name, const char **out_gpu, size_t *out_nargs) {
  if (k >= DLS__NBUILTIN)
    return false;
  *out_name = dls__builtins[k].name;
  *out_gpu = dls__builtins[k].gpu;
  *out_nargs = dls__builtins[k].nargs;
  return true;
}

void dls__builtin_describe_arg(size_t k, size_t i, const char **out_name, const char **out_token, uint32_t *out_what,
                               char *types, size_t size) {
  static const char *const tokens[] = {[DLS_ARG_I32] = "i32", [DLS_ARG_I64] = "i64",     [DLS_ARG_U32] = "u32",
                                       [DLS_ARG_U64] = "u64", [DLS_ARG_F32] = "f32",     [DLS_ARG_F64] = "f64",
                                       [DLS_ARG_BYTES] = "bytes", [DLS__ARG_MEM_P] = "p", [DLS__ARG_MEM_CP] = "cp"};
  const dls__builtin_info *b = &dls__builtins[k];
  uint32_t what = b->args[i].what, kind = DLS__A_KIND(what);
  *out_name = b->args[i].name;
  *out_token = kind < sizeof tokens / sizeof tokens[0] && tokens[kind] != NULL ? tokens[kind] : "?";
  *out_what = what;
  if (kind == DLS__ARG_MEM_P || kind == DLS__ARG_MEM_CP)
    type_text(b, DLS__A_TYPE(what), types, size);
  else
    snprintf(types, size, "%s", kind == DLS_ARG_BYTES && DLS__T_PARAM(what) != 0 ? g_descs[DLS__T_PARAM(what)].type
                                                                                  : "");
}
