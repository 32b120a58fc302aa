/* SPDX-License-Identifier: Apache-2.0 */
/* A Function's launch plan: the short way for a call shaped like the last one that ran on a framework's current
 * stream (the common loop: the same kernel, the same grid and scalars, that framework's tensors).
 *
 * The general path (launch.c, handshake.c) decides, for each call, which argument picks the stream and how each
 * tensor is taken. A call with the plan's shape would decide the same: its scalars are the objects the plan saw or
 * equal ones of the same exact type (immutable, so they convert the same way: dlspy_same_value), and its tensor arguments are of the plan's type in the same
 * places, so the first of them picks its framework's current stream and none needs ordering (the call runs on the
 * stream the framework names for them). What is left per call is what can change between calls: the tensors' data
 * pointers and devices, the framework's current stream, and whether a use_stream() context names a stream. Any
 * difference hands the call to the general path before anything was done. */
#include "function.h"

#include "errors.h"
#include "streamarg.h"

/* A built-in's arguments are checked at every launch, the plan's included: its tensors are pointers of known extent
 * (`extents`, filled for the tensors), its scalars the remembered ones. */
static int plan_check_builtin(FunctionObject *f, const dls__function *fn, void *const *ptrs, dls__ext_extent *extents) {
  static const char pycall[] = "Function.launch";
  const dlspy_launch_plan *p = &f->plan;
  dlspy_state *st = f->st;
  dls_arg_t a[DLS_MAX_ARGS];
  for (int i = 0; i < p->n; i++) {
    bool tensor = (p->tensors >> i) & 1;
    a[i] = tensor ? dls_arg_ptr(ptrs[i]) : f->memo_arg[i];
    if (!tensor)
      extents[i] = (dls__ext_extent){1, 0};
  }
  bool overlap;
  dls_status_t rc = dls__builtin_check(pycall, fn, a, (size_t)p->n, dls__ext_extents(extents), &overlap);
  if (rc == DLS_OK && overlap) {
    dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT,
                 "%s(function \"%s\"): what it reads partially overlaps what it writes, which a kernel launch cannot "
                 "order; use the high-level call (it copies the source through a temporary) or disjoint tensors",
                 pycall, f->name);
    return -1;
  }
  if (rc != DLS_OK) {
    dlspy_raisef(st, rc, "%s", dls_last_error());
    return -1;
  }
  return 0;
}

int dlspy_plan_launch(FunctionObject *f, PyObject *const *args, Py_ssize_t nargs) {
  static const char pycall[] = "Function.launch";
  const dlspy_launch_plan *p = &f->plan;
  dlspy_state *st = f->st;
  if (p->type == NULL || nargs - 2 != p->n || !dlspy_same_value(args[0], f->memo_grid) ||
      !dlspy_same_value(args[1], f->memo_block))
    return 1;
  if (DLSPY_UNLIKELY(atomic_load_explicit(&dlspy_dead, memory_order_relaxed) || !dls__ext_ready()))
    return 1;
  if (DLSPY_UNLIKELY(st->stream_var_set)) {
    dls_stream_t ctx;
    if (dlspy_context_stream(st, &ctx) != 0)
      return -1;
    if (ctx.id != 0)
      return 1; /* use_stream() names the stream */
  }
  PyObject *const *uargs = args + 2;
  void *params[DLS_MAX_ARGS];
  void *ptrs[DLS_MAX_ARGS];
  dls__ext_extent extents[DLS_MAX_ARGS];
  for (int i = 0; i < p->n; i++) {
    PyObject *o = uargs[i];
    if ((p->tensors >> i) & 1) {
      if (Py_TYPE(o) != p->type)
        return 1;
      DLTensor dl;
      if (p->api->dltensor_from_py_object_no_sync(o, &dl) != 0) {
        char arg[24];
        snprintf(arg, sizeof arg, "args[%d]", i);
        return dlspy_xapi_failed(st, pycall, arg);
      }
      if (dl.device.device_type != p->dev.device_type || dl.device.device_id != p->dev.device_id)
        return 1;
      ptrs[i] = dlspy_view_data(&dl);
      params[i] = &ptrs[i];
      if (DLSPY_UNLIKELY(p->builtin))
        extents[i] = dlspy_view_extent(&dl);
    } else if (dlspy_same_value(o, f->memo_obj[i])) { /* i < MEMO_ARGS: the plan has no scalar past them */
      params[i] = &f->memo_arg[i].v; /* the backend copies the values at once */
    } else {
      return 1;
    }
  }
  void *native;
  if (dlspy_framework_current(st, pycall, p->api, p->dev, &native) != 0)
    return -1;
  dls_stream_t h;
  dls__stream *s;
  if (dlspy_stream_lookup(st, p->home, native, pycall, &h, &s) != 0)
    return -1;
  /* No reference is taken on `s` (the general path takes one because it runs Python code while it holds the
   * stream): the framework was asked before the lookup, and nothing from here to the launch runs Python code or
   * lets the GIL go, so nothing can drop the handle meanwhile. */
  dls__function *fn = dls__ext_function(f->handle);
  if (fn == NULL)
    return 1; /* the general path says why */
  if (DLSPY_UNLIKELY(p->builtin) && plan_check_builtin(f, fn, ptrs, extents) != 0)
    return -1;
  dls_launch_config_t cfg; /* the dimensions launch_dims checked when it remembered them */
  memcpy(cfg.grid, f->memo_dims[0], sizeof cfg.grid);
  memcpy(cfg.block, f->memo_dims[1], sizeof cfg.block);
  cfg.shared_mem_bytes = 0;
  dls_status_t rc = dls__launch_params(pycall, fn, s, &cfg, params, f->plan_sizes, p->n);
  if (DLSPY_UNLIKELY(rc != DLS_OK)) {
    dlspy_raisef(st, rc, "%s", dls_last_error());
    return -1;
  }
  return 0;
}

/* The bytes a kernel receives for a scalar or raw-pointer argument (DLS_ARG_I32 to DLS_ARG_PTR). */
static uint32_t arg_size(int32_t kind) {
  switch (kind) {
  case DLS_ARG_I64:
  case DLS_ARG_U64:
  case DLS_ARG_F64: return 8;
  case DLS_ARG_PTR: return (uint32_t)sizeof(void *);
  default: return 4;
  }
}

void dlspy_plan_note(FunctionObject *f, const dlspy_call *c, PyObject *const *args, Py_ssize_t nargs,
                     uint64_t taken) {
  Py_ssize_t n = nargs - 2;
  bool fits = taken != 0 && c->fast_type != NULL && c->fast_api != NULL && c->s == c->cur_stream &&
              c->cur_api == (const void *)c->fast_api && dlspy_same_value(args[0], f->memo_grid) &&
              dlspy_same_value(args[1], f->memo_block) &&
              n <= DLS_MAX_ARGS;
  for (Py_ssize_t i = 0; fits && i < n; i++)
    fits = ((taken >> i) & 1) || (i < MEMO_ARGS && dlspy_same_value(args[2 + i], f->memo_obj[i]) &&
                                  (uint32_t)f->memo_arg[i].kind - 1u < DLS_ARG_PTR);
  DLDevice home;
  if (!fits || !dls__ext_home(c->fast_dev, &home)) {
    dlspy_plan_clear(f);
    return;
  }
  dlspy_launch_plan *p = &f->plan;
  if (p->type != c->fast_type) {
    Py_XSETREF(p->type, (PyTypeObject *)Py_NewRef((PyObject *)c->fast_type));
  }
  p->api = c->fast_api;
  p->dev = c->fast_dev;
  p->home = home;
  p->tensors = taken;
  p->n = (int)n;
  p->builtin = f->builtin;
  for (Py_ssize_t i = 0; i < n; i++)
    f->plan_sizes[i] = ((taken >> i) & 1) ? (uint32_t)sizeof(void *) : arg_size(f->memo_arg[i].kind);
}

void dlspy_plan_clear(FunctionObject *f) {
  Py_CLEAR(f->plan.type);
  f->plan.n = 0;
  f->plan.tensors = 0;
}
