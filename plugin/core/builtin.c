/* SPDX-License-Identifier: Apache-2.0 */
/* Built-in kernels (the table: kernels/builtin_table.h): their functions per device and their calls (fill, axpy,
 * strided and converting copies, spin; builtin_args.c checks their arguments, latch.c holds the latches). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buffer.h"
#include "core/builtin.h"
#include "core/capture.h"
#include "core/cast.h"
#include "core/launch.h"
#include "kernels/convert.h"
#include "kernels/layout.h"

static pthread_mutex_t g_builtin_mu = PTHREAD_MUTEX_INITIALIZER;

/* The name a kernel's function object has in messages: a twin's is its built-in's (a twin's call fails as the
 * built-in's would). */
static const char *function_name(size_t k) {
  switch (k) {
  case DLS__BI_FILL_VECS: return dls__builtins[DLS__BI_FILL].name;
  case DLS__BI_AXPY_F32_VECS: return dls__builtins[DLS__BI_AXPY_F32].name;
  case DLS__BI_COPY_VECS:
  case DLS__BI_COPY_BYTES: return dls__builtins[DLS__BI_COPY_STRIDED].name;
  default: return dls__builtins[k < DLS__NBUILTIN ? k : DLS__BI_CONVERT].name;
  }
}

/* Kernel number k of a device (a built-in, or a twin of the core's), made at its first use. A twin has no handle:
 * only the core launches it, after its built-in's checks. */
dls_status_t dls__builtin_at(dls__device *dev, size_t k, const char *call, dls__function **out) {
  const char *name = dls__builtins[k].name;
  dls__function *f = __atomic_load_n(&dev->builtins[k], __ATOMIC_ACQUIRE);
  if (DLS__LIKELY(f != NULL)) {
    *out = f;
    return DLS_OK;
  }
  pthread_mutex_lock(&g_builtin_mu);
  f = dev->builtins[k];
  if (f == NULL) {
    void *native;
    dls_status_t st = dev->be->builtin_function(dev->be, dev->id, name, &native);
    if (st != DLS_OK) {
      pthread_mutex_unlock(&g_builtin_mu);
      return dls__fail_prefix(st, "%s(\"%s\" on %s)", call, name, dev->name);
    }
    f = dls__calloc(1, sizeof *f);
    if (f == NULL) {
      pthread_mutex_unlock(&g_builtin_mu);
      return dls__fail(DLS_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
    }
    f->dev = dev;
    f->native = native;
    f->builtin = true;
    f->builtin_k = (uint8_t)k;
    snprintf(f->name, sizeof f->name, "%s", function_name(k));
    if (k < DLS__NBUILTIN) {
      f->id = dls__table_add(&dls__function_table, f);
      if (f->id == 0) {
        dls__free(f);
        pthread_mutex_unlock(&g_builtin_mu);
        return dls__fail_prefix(DLS_ERR_OUT_OF_MEMORY, "%s", call);
      }
      atomic_fetch_add(&dls__function_table.owned, 1);
    }
    __atomic_store_n(&dev->builtins[k], f, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_builtin_mu);
  *out = f;
  return DLS_OK;
}

dls_status_t dls__builtin(dls__device *dev, const char *name, const char *call, dls__function **out) {
  size_t k = 0;
  while (k < DLS__NBUILTIN && strcmp(dls__builtins[k].name, name) != 0)
    k++;
  if (k == DLS__NBUILTIN) {
    char names[DLS__NBUILTIN * 24] = "";
    size_t n = 0;
    for (size_t i = 0; i < DLS__NBUILTIN && n < sizeof names; i++)
      n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", dls__builtins[i].name);
    return dls__fail(DLS_ERR_NOT_FOUND, "%s(name=\"%s\"): no such built-in (%s)", call, name, names);
  }
  return dls__builtin_at(dev, k, call, out);
}

static void drop_builtins(dls__device *dev) {
  for (size_t k = 0; k < DLS__NKERNEL; k++) {
    dls__function *f = dev->builtins[k];
    if (f == NULL)
      continue;
    dev->builtins[k] = NULL;
    if (k >= DLS__NBUILTIN) {
      dls__free(f); /* a twin: no handle */
      continue;
    }
    atomic_fetch_sub(&dls__function_table.owned, 1);
    (void)dls__table_end(&dls__function_table, f->id); /* its drop frees it */
  }
}

void dls__builtins_shutdown(void) { dls__each_device(drop_builtins); }

dls_status_t dls_builtin_function(DLDevice device, const char *name, dls_function_t *out_function) {
  static const char call[] = "dls_builtin_function";
  DLS__ENTER(call);
  DLS__OUT(call, out_function);
  if (name == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(name=NULL): no built-in named", call);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  dls__function *f;
  DLS__TRY(dls__builtin(dev, name, call, &f));
  out_function->id = f->id;
  return DLS_OK;
}

/* ---- the launches ---- */

/* Threads in a block of the core's built-in calls; a contiguous copy's and an axpy's: MOVE_BLOCK. On an H200 blocks of
 * 128 moved 2^26 float32 in 129.6 us (copy) and 185.4 us (axpy, 2 vectors a thread each) against 133.1 and 188.9 us
 * with 256, torch's copy_ and add_ 129.2 and 186.3 (bench/results/h200-2026-11-29-builtin-variants-{3,6-graphs}.txt);
 * in the core's own calls on the H200 (main 16c7d86) the copy reached 0.99 of the copy bandwidth at 2^26 (0.965 with
 * 256) and the axpy 1.02 x torch's add_ at 2^20 (1.06). Fills and conversions measured no better. */
#define BLOCK 256u
#define MOVE_BLOCK 128u
/* The most blocks of a grid sized to the work: 2^32 threads less a block (HIP bounds a grid's threads by 2^32 - 1). A
 * larger call's blocks take the tiles a grid further on (kernels/grid.cuh). */
#define MOST_BLOCKS ((1u << 24) - 1u)

/* A built-in call's work (kernels/layout.h): `items` items, `per` a thread; `capped`: an element-wise path (a
 * strided view), whose threads loop from a grid the device holds at once; `block`: its threads a block (0: BLOCK). */
typedef struct work {
  uint64_t items;
  uint32_t per;
  bool capped;
  uint32_t block;
} work;

/* The grid of a call's work. A fast path (tiles of 16-byte vectors, `per` a thread) gets a block a tile, so that no
 * thread loops and a small call starts no idle blocks (torch's elementwise kernels size their grid so too). An
 * element-wise path gets `per` elements a thread too, but at most as many threads as the device holds at once, so
 * that each block makes its view's layout once (kernels/copy.cuh) and loops over the rest. */
static dls_launch_config_t grid_for(dls__device *dev, work w) {
  if (w.items == 0)
    return dls_config_1d(1, 1); /* spin: one thread; an empty call is never launched */
  uint32_t block = w.block != 0 ? w.block : BLOCK;
  uint64_t most = MOST_BLOCKS, blocks = dls__items(w.items, w.per * block);
  if (w.capped) {
    most = dls__device_threads(dev) / block;
    most = most == 0 ? 1 : most;
  }
  return dls_config_1d((uint32_t)(blocks < most ? blocks : most), block);
}

/* The work of a strided copy: 16-byte vectors of a contiguous view, else its elements (kernels/copy.cuh: twice as
 * many a thread along one merged dimension). */
static work copy_work(uint32_t ndim, const int64_t *shape, const int64_t *dst, const int64_t *src, uint32_t elem_size) {
  uint64_t count = dls__view_count(ndim, shape);
  if (dls__view_contiguous(ndim, shape, dst, src))
    return (work){dls__items(count * elem_size, DLS__VEC_BYTES), DLS__MOVE_VECS, false, MOVE_BLOCK};
  dls__layout l;
  if (count > 0)
    dls__layout_make(ndim, shape, dst, src, &l);
  return (work){count, count > 0 && l.ndim == 1 ? 2 * DLS__ELEM_ITEMS : DLS__ELEM_ITEMS, true, 0};
}

/* The work of built-in k's call (its arguments checked): what its kernel's fast path moves (its twin's: the same). */
static work work_of(int k, const dls_arg_t *args) {
  switch (k) {
  case DLS__BI_FILL:
    return (work){dls__items(args[1].v.u64 * args[2].v.u32, DLS__VEC_BYTES), DLS__FILL_VECS, false, 0};
  case DLS__BI_AXPY_F32:
    return (work){dls__items(args[0].v.u64, DLS__VEC_BYTES / 4), DLS__MOVE_VECS, false, MOVE_BLOCK};
  case DLS__BI_AXPY_F64:
    return (work){dls__items(args[0].v.u64, DLS__VEC_BYTES / 8), DLS__MOVE_VECS, false, MOVE_BLOCK};
  case DLS__BI_COPY_STRIDED: {
    const dls_copy_desc_t *d = args[2].v.bytes;
    return copy_work(d->ndim, d->shape, d->dst_strides, d->src_strides, d->elem_size);
  }
  case DLS__BI_CONVERT: {
    const dls_convert_desc_t *d = args[2].v.bytes;
    uint32_t ds = (uint32_t)dls__dtype_bytes(d->dst_dtype), ss = (uint32_t)dls__dtype_bytes(d->src_dtype);
    if (memcmp(&d->dst_dtype, &d->src_dtype, sizeof d->dst_dtype) == 0)
      return copy_work(d->ndim, d->shape, d->dst_strides, d->src_strides, ds);
    uint64_t count = dls__view_count(d->ndim, d->shape);
    if (!dls__view_contiguous(d->ndim, d->shape, d->dst_strides, d->src_strides) ||
        !dls__cv_has_loop(d->dst_dtype, d->src_dtype))
      return (work){count, 1, true, 0};
    return (work){dls__items(count, DLS__CV_ELEMS(ds, ss)), DLS__CV_ITEMS(ds, ss), false, 0};
  }
  default: return (work){0, 1, false, 0};
  }
}

/* The twin of a checked copy or conversion (kernels/builtin_table.h's DLS__TWINS) and the count it takes: the bytes
 * of a contiguous copy (a conversion between one type too), the elements of a contiguous conversion whose pair of
 * types has a loop (convert.h); k -1: none, the built-in runs with its descriptor. */
typedef struct twin {
  int k;
  uint64_t n;
} twin;

static twin twin_of(int k, const dls_arg_t *args) {
  twin t = {-1, 0};
  if (k == DLS__BI_COPY_STRIDED) {
    const dls_copy_desc_t *d = args[2].v.bytes;
    if (dls__view_contiguous(d->ndim, d->shape, d->dst_strides, d->src_strides))
      t = (twin){DLS__BI_COPY_BYTES, dls__view_count(d->ndim, d->shape) * d->elem_size};
  } else if (k == DLS__BI_CONVERT) {
    const dls_convert_desc_t *d = args[2].v.bytes;
    int pair = dls__cv_pair(d->dst_dtype, d->src_dtype);
    uint64_t count = dls__view_count(d->ndim, d->shape);
    if (!dls__view_contiguous(d->ndim, d->shape, d->dst_strides, d->src_strides))
      return t;
    if (memcmp(&d->dst_dtype, &d->src_dtype, sizeof d->dst_dtype) == 0)
      t = (twin){DLS__BI_COPY_BYTES, count * dls__dtype_bytes(d->dst_dtype)};
    else if (pair >= 0)
      t = (twin){DLS__BI_CV_FIRST + pair, count};
  }
  if (t.k >= 0 && t.n > 0 && DLS__UNLIKELY(atomic_load_explicit(&dls__twins_broken, memory_order_relaxed)))
    t.n--;
  return t;
}

/* Threads in a block of a vector twin's grid, and the most vectors it takes: a thread a vector, at most MOST_BLOCKS
 * blocks (fewer than 2^32 threads: the kernels' ranks are 32-bit). */
#define VEC_BLOCK 256u
#define VEC_MOST ((uint64_t)MOST_BLOCKS * VEC_BLOCK)

/* Queues the vector twin of fill, axpy_f32 or a contiguous copy (`t`: the copy's twin), with the rest of its
 * arguments, where every address is aligned to 16 (`bits`: dls__builtin_check_addrs's) and the call moves whole
 * 16-byte vectors; *out_queued false where it does not apply (the caller goes on as before). */
static dls_status_t queue_vectors(const char *call, dls__stream *s, int k, twin t, const dls_arg_t *args,
                                  uintptr_t bits, bool *out_queued) {
  *out_queued = false;
  uint64_t bytes;
  int vk;
  if (k == DLS__BI_FILL) {
    bytes = args[1].v.u64 * args[2].v.u32; /* the check bounded it by INT64_MAX */
    vk = DLS__BI_FILL_VECS;
  } else if (k == DLS__BI_AXPY_F32) {
    bytes = args[0].v.u64 * 4u; /* the memory the check found holds it */
    vk = DLS__BI_AXPY_F32_VECS;
  } else if (t.k == DLS__BI_COPY_BYTES) {
    bytes = t.n;
    vk = DLS__BI_COPY_VECS;
  } else {
    return DLS_OK;
  }
  if (bits % DLS__VEC_BYTES != 0 || bytes == 0 || bytes % DLS__VEC_BYTES != 0 || bytes / DLS__VEC_BYTES > VEC_MOST)
    return DLS_OK;
  uint64_t n = bytes / DLS__VEC_BYTES;
  dls_launch_config_t cfg = dls_config_1d((uint32_t)dls__items(n, VEC_BLOCK), VEC_BLOCK);
  if (DLS__UNLIKELY(atomic_load_explicit(&dls__twins_broken, memory_order_relaxed)))
    n--; /* the tests' negative control (twin_of) */
  dls_arg_t v[4];
  size_t nv;
  if (k == DLS__BI_FILL) {
    static const uint64_t spread[9] = {[1] = 0x0101010101010101ull, [2] = 0x0001000100010001ull,
                                       [4] = 0x0000000100000001ull, [8] = 1ull};
    v[0] = args[0], v[1] = dls_arg_u64(n), v[2] = dls_arg_u64(args[3].v.u64 * spread[args[2].v.u32]), nv = 3;
  } else if (k == DLS__BI_AXPY_F32) {
    v[0] = dls_arg_u64(n), v[1] = args[1], v[2] = args[2], v[3] = args[3], nv = 4;
  } else {
    v[0] = args[0], v[1] = args[1], v[2] = dls_arg_u64(n), nv = 3;
  }
  dls__function *vf;
  DLS__TRY(dls__builtin_at(s->dev, (size_t)vk, call, &vf));
  *out_queued = true;
  return dls__launch_args(call, vf, s, &cfg, v, nv);
}

/* Queues built-in k's checked call (f: its function object, or NULL; `bits`: its addresses' dls__builtin_check_addrs)
 * on a grid sized to its work: whole aligned vectors through a vector twin (queue_vectors), a contiguous copy or
 * conversion through its twin, with (dst, src, n) for arguments instead of the descriptor (builtin_table.h says what
 * that saves), any other call through the built-in. */
static dls_status_t queue_call(const char *call, dls__stream *s, int k, dls__function *f, const dls_arg_t *args,
                               size_t nargs, uintptr_t bits) {
  twin t = twin_of(k, args);
  bool queued;
  DLS__TRY(queue_vectors(call, s, k, t, args, bits, &queued));
  if (queued)
    return DLS_OK;
  dls_launch_config_t cfg = grid_for(s->dev, work_of(k, args));
  if (t.k < 0) {
    if (f == NULL)
      DLS__TRY(dls__builtin_at(s->dev, (size_t)k, call, &f));
    return dls__launch_args(call, f, s, &cfg, args, nargs);
  }
  dls__function *tf;
  DLS__TRY(dls__builtin_at(s->dev, (size_t)t.k, call, &tf));
  dls_arg_t small[3] = {args[0], args[1], dls_arg_u64(t.n)};
  return dls__launch_args(call, tf, s, &cfg, small, 3);
}

/* A copy through the copy kernel or its twins (the arguments are checked already; `bits`: their addresses ORed). */
static dls_status_t copy_launch(const char *call, dls__stream *s, dls_arg_t dst, dls_arg_t src,
                                const dls_copy_desc_t *d, uintptr_t bits) {
  dls_arg_t args[3] = {dst, src, dls_arg_bytes(d, sizeof *d)};
  return queue_call(call, s, DLS__BI_COPY_STRIDED, NULL, args, 3, bits);
}

/* What a built-in reads partially overlaps what it writes: the source is
 * copied, with its own layout, into a stream-ordered temporary first, and
 * the built-in reads that (NumPy's answer; the order of element updates
 * then cannot matter). The arguments were checked. *out_tmp is freed in
 * stream order by the caller. */
static dls_status_t stage_source(const char *call, dls__stream *s, int k, dls_arg_t *args, uintptr_t *bits,
                                 dls__buffer **out_tmp) {
  dls_copy_desc_t d; /* the source's view: its shape, its strides on both sides, its element size */
  int src_index = 1;
  uint64_t count;
  if (k == DLS__BI_COPY_STRIDED) {
    d = *(const dls_copy_desc_t *)args[2].v.bytes;
    DLS__TRY(dls__copy_desc_check(call, &d, &count));
  } else if (k == DLS__BI_CONVERT) {
    const dls_convert_desc_t *cd = args[2].v.bytes;
    DLS__TRY(dls__convert_desc_check(call, cd, &d, &count));
    d.elem_size = (uint32_t)dls__dtype_bytes(cd->src_dtype);
  } else { /* axpy: x, contiguous */
    uint32_t elem = k == DLS__BI_AXPY_F32 ? 4 : 8;
    count = args[0].v.u64;
    d = (dls_copy_desc_t){.ndim = 1, .elem_size = elem, .shape = {(int64_t)count}, .src_strides = {1}};
    src_index = 2;
  }
  memcpy(d.dst_strides, d.src_strides, sizeof d.dst_strides); /* a broadcast source stays one (the same value) */
  int64_t lo, hi;
  DLS__TRY(dls__copy_view_span(call, "src", &d, d.src_strides, d.elem_size, &lo, &hi));
  dls__buffer *tmp;
  DLS__TRY(dls__buffer_alloc(s, (size_t)(hi - lo), &tmp));
  dls_arg_t staged = dls_arg_ptr((char *)tmp->ptr - lo);
  *bits |= (uintptr_t)staged.v.ptr; /* the copy's and the call's: both read or write the staged bytes */
  dls_status_t st = copy_launch(call, s, staged, args[src_index], &d, *bits);
  if (st != DLS_OK) {
    dls__buffer_unref(tmp);
    return st;
  }
  args[src_index] = staged;
  *out_tmp = tmp;
  return DLS_OK;
}

/* Every built-in call (f: built-in k of s's device): its arguments checked (`extents`: those of raw pointers, or
 * NULL), a partially overlapping source staged, and the kernel queued on a grid sized to its work and the device
 * (grid_for), or its twin's. */
static dls_status_t builtin_run(const char *call, dls__stream *s, int k, dls__function *f, dls_arg_t *args,
                                size_t nargs, const dls__extent *extents) {
  bool overlap;
  uintptr_t bits;
  DLS__TRY(dls__builtin_check_addrs(call, f, args, nargs, extents, &overlap, &bits, args));
  dls__buffer *tmp = NULL;
  /* A staged temporary is made, used (through a pointer) and freed in one pin: all eager, or all in one capture. */
  if (overlap)
    dls__capture_pin();
  dls_status_t st = overlap ? stage_source(call, s, k, args, &bits, &tmp) : DLS_OK;
  if (st == DLS_OK)
    st = queue_call(call, s, k, f, args, nargs, bits);
  if (tmp != NULL)
    dls__buffer_unref(tmp); /* stream-ordered: after the launch on its own stream */
  if (overlap)
    dls__capture_unpin();
  return st;
}

static dls_status_t builtin_launch(const char *call, dls_stream_t stream, int k, dls_arg_t *args, size_t nargs) {
  DLS__GET_OF(stream, s, stream, call, "stream");
  dls__function *f;
  DLS__TRY(dls__builtin_at(s->dev, (size_t)k, call, &f));
  return builtin_run(call, s, k, f, args, nargs, NULL);
}

dls_status_t dls__builtin_launch_known(const char *call, dls_function_t function, dls_stream_t stream,
                                       const dls_arg_t *args, size_t nargs, const dls__extent *extents) {
  DLS__ENTER(call);
  DLS__GET_OF(function, f, function, call, "function");
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (!f->builtin || f->builtin_k >= DLS__NBUILTIN)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "%s(function \"%s\", grid 0): only a built-in runs on the core's own grid; give this kernel a "
                     "grid and a block",
                     call, f->name);
  if (f->dev != s->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: function \"%s\" is on %s but the stream is on %s", call, f->name,
                     f->dev->name, s->dev->name);
  if (__atomic_load_n(&s->dev->builtins[f->builtin_k], __ATOMIC_ACQUIRE) != f) /* the check would not read it */
    return dls__fail(DLS_ERR_INVALID_HANDLE, "%s(function \"%s\"): a built-in of an earlier runtime life; ask "
                     "dls_builtin_function for it again", call, f->name);
  if (nargs > DLS__BUILTIN_MAX_ARGS || (nargs > 0 && args == NULL))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(nargs=%zu): built-in \"%s\" takes %zu arguments", call, nargs,
                     f->name, dls__builtins[f->builtin_k].nargs);
  dls_arg_t own[DLS__BUILTIN_MAX_ARGS]; /* a staged source replaces its argument */
  if (nargs > 0)
    memcpy(own, args, nargs * sizeof *own);
  return builtin_run(call, s, f->builtin_k, f, own, nargs, extents);
}

dls_status_t dls_fill(dls_stream_t stream, dls_arg_t dst, uint64_t count, uint32_t elem_size, const void *value) {
  static const char call[] = "dls_fill";
  DLS__ENTER(call);
  if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(elem_size=%u): must be 1, 2, 4 or 8", call, elem_size);
  if (value == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(value=NULL): no fill value", call);
  if (count > (uint64_t)INT64_MAX / elem_size) /* refused before the value is read (builtin_args.c says why) */
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(count=%llu, elem_size=%u): size overflows", call,
                     (unsigned long long)count, elem_size);
  uint64_t pattern = 0;
  memcpy(&pattern, value, elem_size);
  dls_arg_t args[4] = {dst, dls_arg_u64(count), dls_arg_u32(elem_size), dls_arg_u64(pattern)};
  return builtin_launch(call, stream, DLS__BI_FILL, args, 4);
}

dls_status_t dls_axpy_f32(dls_stream_t stream, uint64_t n, float a, dls_arg_t x, dls_arg_t y) {
  static const char call[] = "dls_axpy_f32";
  DLS__ENTER(call);
  dls_arg_t args[4] = {dls_arg_u64(n), dls_arg_f32(a), x, y};
  return builtin_launch(call, stream, DLS__BI_AXPY_F32, args, 4);
}

dls_status_t dls_axpy_f64(dls_stream_t stream, uint64_t n, double a, dls_arg_t x, dls_arg_t y) {
  static const char call[] = "dls_axpy_f64";
  DLS__ENTER(call);
  dls_arg_t args[4] = {dls_arg_u64(n), dls_arg_f64(a), x, y};
  return builtin_launch(call, stream, DLS__BI_AXPY_F64, args, 4);
}

/* A strided copy (k: DLS__BI_COPY_STRIDED or DLS__BI_CONVERT), its descriptor checked. */
static dls_status_t copy_call(const char *call, dls_stream_t stream, int k, dls_arg_t dst, dls_arg_t src,
                              const void *desc, uint32_t size) {
  dls_arg_t args[3] = {dst, src, dls_arg_bytes(desc, size)};
  return builtin_launch(call, stream, k, args, 3);
}

static dls_status_t no_desc(const char *call) {
  return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(desc=NULL): no descriptor", call);
}

dls_status_t dls_copy_strided(dls_stream_t stream, dls_arg_t dst, dls_arg_t src, const dls_copy_desc_t *desc) {
  static const char call[] = "dls_copy_strided";
  DLS__ENTER(call);
  uint64_t count;
  DLS__TRY(desc == NULL ? no_desc(call) : dls__copy_desc_check(call, desc, &count));
  return copy_call(call, stream, DLS__BI_COPY_STRIDED, dst, src, desc, sizeof *desc);
}

dls_status_t dls_copy_convert(dls_stream_t stream, dls_arg_t dst, dls_arg_t src, const dls_convert_desc_t *desc) {
  static const char call[] = "dls_copy_convert";
  DLS__ENTER(call);
  dls_copy_desc_t d;
  uint64_t count;
  DLS__TRY(desc == NULL ? no_desc(call) : dls__convert_desc_check(call, desc, &d, &count));
  return copy_call(call, stream, DLS__BI_CONVERT, dst, src, desc, sizeof *desc);
}

dls_status_t dls_spin(dls_stream_t stream, uint64_t nanoseconds) {
  static const char call[] = "dls_spin";
  DLS__ENTER(call);
  dls_arg_t args[1] = {dls_arg_u64(nanoseconds)};
  return builtin_launch(call, stream, DLS__BI_SPIN, args, 1);
}
