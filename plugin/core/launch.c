/* SPDX-License-Identifier: Apache-2.0 */
/* Typed launches: a launch's configuration and arguments checked, its buffers' accesses ordered, the kernel queued. */
#include <stdio.h>

#include "core/buffer.h"
#include "core/capture.h"
#include "core/deferred.h"
#include "core/launch.h"
#include "core/tensor.h"

DLS__COLD static dls_status_t config_error(const char *call, const dls_launch_config_t *c) {
  if (c == NULL)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(config=NULL): no launch configuration", call);
  for (int i = 0; i < 3; i++) {
    if (c->grid[i] == 0)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(config.grid[%d]=0): every grid dimension must be >= 1", call, i);
    if (c->block[i] == 0)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(config.block[%d]=0): every block dimension must be >= 1", call,
                       i);
  }
  return DLS_OK;
}

static inline dls_status_t check_config(const char *call, const dls_launch_config_t *c) {
  if (DLS__LIKELY(c != NULL && c->grid[0] != 0 && c->grid[1] != 0 && c->grid[2] != 0 && c->block[0] != 0 &&
                  c->block[1] != 0 && c->block[2] != 0))
    return DLS_OK;
  return config_error(call, c);
}

/* A buffer or tensor argument that is not a live handle; the argument's
 * name is formatted only now, off the launch path. */
DLS__COLD static dls_status_t arg_miss(dls__table *t, uint64_t id, const char *call, size_t i) {
  char name[32];
  dls_status_t st;
  snprintf(name, sizeof name, "args[%zu]", i);
  dls__table_miss(t, id, call, name, &st);
  return st;
}

/* The buffers and tensors a launch holds until it is queued and its uses
 * recorded (let go of on every return path). */
typedef struct dls__arg_holds {
  int n;
  dls__hold h[DLS_MAX_ARGS];
} dls__arg_holds;

static void arg_holds_end(dls__arg_holds *hs) {
  for (int i = 0; i < hs->n; i++)
    dls__hold_end(&hs->h[i]);
}

static inline void *arg_hold(dls__arg_holds *hs, dls__table *t, uint64_t id) {
  dls__hold *h = &hs->h[hs->n];
  h->table = t;
  void *obj = dls__slot_hold(t, id, &h->slot);
  hs->n += obj != NULL;
  return obj;
}

/* Resolves a buffer, tensor or bytes argument: *out_param points at its
 * value (*out_ptr holds a device pointer), and a buffer that needs
 * memory is added to the launch's accesses: read for an input, written
 * otherwise (a built-in's own arguments say which, builtin_args.c). */
static dls_status_t resolve_arg(const char *call, const dls__function *fn, const dls__stream *s, const dls_arg_t *a,
                                size_t i, void **out_ptr, void **out_param, uint32_t *out_size, dls__accesses *acc,
                                dls__arg_holds *holds) {
  dls__buffer *b;
  *out_param = out_ptr;
  *out_size = sizeof(void *);
  switch (a->kind) {
  case DLS_ARG_BUFFER:
  case DLS_ARG_BUFFER_IN:
    b = arg_hold(holds, &dls__buffer_table, a->v.buffer.id);
    if (DLS__UNLIKELY(b == NULL))
      return arg_miss(&dls__buffer_table, a->v.buffer.id, call, i);
    if (DLS__UNLIKELY(b->dev != s->dev))
      return dls__fail(DLS_ERR_INVALID_DEVICE, "%s(args[%zu]): buffer is on %s but the stream is on %s", call, i,
                       b->dev->name, s->dev->name);
    *out_ptr = b->ptr;
    b = dls__buffer_hazards(b); /* a tensor's buffer is its hazard state already */
    break;
  case DLS_ARG_TENSOR:
  case DLS_ARG_TENSOR_IN: {
    dls__tensor *t = arg_hold(holds, &dls__tensor_table, a->v.tensor.id);
    if (DLS__UNLIKELY(t == NULL))
      return arg_miss(&dls__tensor_table, a->v.tensor.id, call, i);
    if (DLS__UNLIKELY(t->buf->dev != s->dev))
      return dls__fail(DLS_ERR_INVALID_DEVICE, "%s(args[%zu]): tensor is on %s but the stream is on %s", call, i,
                       t->buf->dev->name, s->dev->name);
    if (a->kind == DLS_ARG_TENSOR && (t->flags & DLS_TENSOR_READ_ONLY))
      return dls__fail(DLS_ERR_READ_ONLY,
                       "%s(args[%zu]): tensor is read-only but passed as an output (use dls_arg_tensor_in for "
                       "inputs)",
                       call, i);
    *out_ptr = t->dl.data == NULL ? NULL : (char *)t->dl.data + t->dl.byte_offset;
    b = t->buf;
    break;
  }
  case DLS_ARG_BYTES:
    if (a->v.bytes == NULL || a->size == 0)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args[%zu]): bytes argument of %u bytes at %p", call, i, a->size,
                       a->v.bytes);
    *out_param = (void *)(uintptr_t)a->v.bytes;
    *out_size = a->size;
    return DLS_OK;
  default:
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args[%zu].kind=%d): unknown argument kind", call, i, (int)a->kind);
  }
  int mode = a->kind == DLS_ARG_TENSOR_IN || a->kind == DLS_ARG_BUFFER_IN ? DLS_ACCESS_READ : DLS_ACCESS_WRITE;
  if (DLS__UNLIKELY(fn->builtin))
    mode = dls__builtin_access(fn, i);
  dls__access_add(acc, b, mode);
  return DLS_OK;
}

/* What every launch checks of its function and stream: one device, and no work on a legacy default stream
 * while a capture is underway on its device. */
static inline dls_status_t check_function_stream(const char *call, const dls__function *fn, dls__stream *s) {
  if (DLS__UNLIKELY(fn->dev != s->dev))
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: function \"%s\" is on %s but the stream is on %s", call, fn->name,
                     fn->dev->name, s->dev->name);
  if (DLS__UNLIKELY(atomic_load_explicit(&s->dev->captures, memory_order_relaxed) > 0) && dls__stream_legacy(s) &&
      dls__capture_on_device(s->dev))
    return dls__fail(DLS_ERR_STATE,
                     "%s: a capture is underway on %s, and work on its legacy default stream would merge into it "
                     "(the driver invalidates the capture); launch on the capturing stream or a created one",
                     call, s->dev->name);
  return DLS_OK;
}

/* Queues the launch on the backend. */
static inline dls_status_t queue_launch(const char *call, const dls__function *fn, dls__stream *s,
                                        const dls_launch_config_t *config, void **params, const uint32_t *sizes,
                                        int nargs) {
  dls_status_t st = s->dev->be->launch(s->dev->be, s->dev->id, fn->native, s->native, config, params, sizes, nargs);
  if (DLS__UNLIKELY(st != DLS_OK))
    return dls__fail_prefix(st, "%s(function \"%s\" on %s)", call, fn->name, s->dev->name);
  return DLS_OK;
}

/* Deferred releases are polled now and then, not on every launch: a poll
 * queries an event per pending entry. */
static inline void poll_now_and_then(void) {
  static _Thread_local unsigned launches;
  if (DLS__UNLIKELY(atomic_load_explicit(&dls__deferred_count, memory_order_relaxed) != 0) && (++launches & 63) == 0)
    /* polls only where no capture forbids it */
    dls_deferred_poll();
}

dls_status_t dls__launch_params(const char *call, dls__function *fn, dls__stream *s,
                                const dls_launch_config_t *config, void **params, const uint32_t *sizes, int nargs) {
  DLS__TRY(check_function_stream(call, fn, s));
  DLS__TRY(queue_launch(call, fn, s, config, params, sizes, nargs));
  poll_now_and_then();
  return DLS_OK;
}

dls_status_t dls__launch_ext(const char *call, dls__function *fn, dls__stream *s, const dls_launch_config_t *config,
                             const dls_arg_t *args, size_t nargs, const dls__extent *extents) {
  if (DLS__UNLIKELY(fn->builtin)) {
    bool overlap;
    DLS__TRY(dls__builtin_check(call, fn, args, nargs, extents, &overlap));
    if (overlap)
      return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                       "%s(function \"%s\"): what it reads partially overlaps what it writes, which a kernel launch "
                       "cannot order; call %s (it copies the source through a temporary) or pass disjoint memory",
                       call, fn->name, fn->name);
  }
  return dls__launch_args(call, fn, s, config, args, nargs);
}

dls_status_t dls__launch_args(const char *call, dls__function *fn, dls__stream *s, const dls_launch_config_t *config,
                              const dls_arg_t *args, size_t nargs) {
  DLS__TRY(check_function_stream(call, fn, s));
  DLS__TRY(check_config(call, config));
  if (DLS__UNLIKELY(nargs > DLS_MAX_ARGS))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(nargs=%zu): at most %d arguments", call, nargs, DLS_MAX_ARGS);
  if (DLS__UNLIKELY(args == NULL && nargs != 0))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(args=NULL, nargs=%zu): no arguments given", call, nargs);
  void *ptrs[DLS_MAX_ARGS]; /* the device pointers of buffer and tensor arguments */
  void *params[DLS_MAX_ARGS];
  uint32_t sizes[DLS_MAX_ARGS];
  dls__accesses acc; /* the memory it reads and writes */
  acc.n = 0;
  dls__arg_holds holds __attribute__((cleanup(arg_holds_end)));
  holds.n = 0;
  size_t total = 0;
  for (size_t i = 0; i < nargs; i++) {
    const dls_arg_t *a = &args[i];
    if (DLS__LIKELY((uint32_t)a->kind - 1u < DLS_ARG_PTR)) {
      /* Scalars and raw pointers are passed where they are: the arguments are
       * borrowed for the call, and every backend copies the values at once. */
      params[i] = (void *)(uintptr_t)&a->v;
      sizes[i] = dls__arg_scalar_size(a->kind);
    } else {
      DLS__TRY(resolve_arg(call, fn, s, a, i, &ptrs[i], &params[i], &sizes[i], &acc, &holds));
    }
    total += sizes[i];
  }
  if (DLS__UNLIKELY(total > DLS_MAX_ARG_BYTES))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s: arguments take %zu bytes, more than %d", call, total,
                     DLS_MAX_ARG_BYTES);
  if (DLS__LIKELY(acc.n == 0)) {
    DLS__TRY(queue_launch(call, fn, s, config, params, sizes, (int)nargs));
    poll_now_and_then();
    return DLS_OK;
  }
  /* The launch runs after what its memory's last writer (and, for what it
   * writes, every reader since) queued on other streams. */
  dls_status_t st = dls__access_begin(&acc, s);
  if (DLS__UNLIKELY(st != DLS_OK))
    return dls__fail_prefix(st, "%s(function \"%s\"): ordering after the other streams that use its memory", call,
                            fn->name);
  st = queue_launch(call, fn, s, config, params, sizes, (int)nargs);
  dls_status_t noted = dls__access_end(&acc, st == DLS_OK);
  if (st != DLS_OK)
    return st;
  if (DLS__UNLIKELY(noted != DLS_OK))
    return dls__fail_prefix(noted, "%s: recording a buffer use after the launch", call);
  poll_now_and_then();
  return DLS_OK;
}

dls_status_t dls__launch_known(const char *call, dls_function_t function, dls_stream_t stream,
                               const dls_launch_config_t *config, const dls_arg_t *args, size_t nargs,
                               const dls__extent *extents) {
  DLS__ENTER(call);
  DLS__GET_OF(function, f, function, call, "function");
  DLS__GET_OF(stream, s, stream, call, "stream");
  return dls__launch_ext(call, f, s, config, args, nargs, extents);
}

dls_status_t dls_launch(dls_function_t function, dls_stream_t stream, const dls_launch_config_t *config,
                        const dls_arg_t *args, size_t nargs) {
  return dls__launch_known("dls_launch", function, stream, config, args, nargs, NULL);
}
