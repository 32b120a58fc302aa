/* SPDX-License-Identifier: Apache-2.0 */
/* A Function's launch plan (launchplan.c): the decision the general path made for a call, kept, and applied to a
 * later call whose table the read pass's common case (handshake.h) finds the same. Its launch is inline here:
 * Function.launch's hot path. */
#ifndef DLSTREAM_PY_LAUNCHPLAN_H
#define DLSTREAM_PY_LAUNCHPLAN_H

#include "alias.h"
#include "function.h"

/* After the general path queued a launch without keywords: makes the plan of its shape when it has one.
 * `taken`: bit i set when argument i was a tensor of the call's fast type (dlspy_call_fast_arg). */
void dlspy_plan_note(FunctionObject *f, const dlspy_call *c, PyObject *const *args, Py_ssize_t nargs,
                     uint64_t taken);
/* Drops the plan. */
void dlspy_plan_clear(FunctionObject *f);
/* Drops the plan and the last type. */
void dlspy_plan_forget(FunctionObject *f);
/* Whether a call without keywords (`uargs`), whose read pass ended in its common case with `r` for
 * f->last and f's memo (handshake.h: that type on its device decided), has the shape of f's plan: the plan's
 * tensors are the call's fast ones, and every other argument is the scalar the plan remembers (the same object,
 * which the read pass saw, or an equal one). Fills in c->params for the equal ones (the read pass did for the rest).
 * Nothing is read here: the plan is a decision over the call's table. */
static inline bool dlspy_plan_fits(FunctionObject *f, dlspy_call *c, const dlspy_common *r, PyObject *const *uargs) {
  const dlspy_launch_plan *p = &f->plan;
  if (r->fast != p->tensors || r->end != p->end) /* the plan's tensors, and as many arguments, all read */
    return false;
  for (uint64_t m = p->scalars & ~r->same; m != 0; m &= m - 1) {
    int i = __builtin_ctzll(m); /* < MEMO_ARGS: the plan has no scalar past them */
    if (!dlspy_equal_value(uargs[i], f->memo_obj[i]))
      return false;
    c->params[i] = &f->memo_arg[i].v; /* the backend copies the values at once */
  }
  return true;
}

/* Whether `a` is the view `key` holds (then its extent is the one computed with the key). */
static inline bool dlspy_view_key_same(const dlspy_view_key *key, const dlspy_arg *a) {
  const DLTensor *dl = &a->dl;
  if (key->ptr != a->ptr || key->ndim != dl->ndim || !dlspy_same_dtype(key->dtype, dl->dtype) ||
      key->strided != (dl->strides != NULL))
    return false;
  for (int32_t d = 0; d < dl->ndim; d++) /* at most DLSPY_KEY_DIMS: the key's ndim */
    if (dl->shape[d] != key->shape[d] || (dl->strides != NULL && dl->strides[d] != key->strides[d]))
      return false;
  return true;
}
/* Makes `key` hold the view of `a` (no key for a view of more than DLSPY_KEY_DIMS dimensions). */
void dlspy_view_key_set(dlspy_view_key *key, const dlspy_arg *a);

/* A planned launch of a built-in checks its arguments, as every launch of one does: its tensors are pointers of
 * known extent (their views in the table), its scalars the remembered ones. 0, or -1 with an exception. */
DLSPY_ALWAYS_INLINE int dlspy_plan_check_builtin(FunctionObject *f, const dlspy_call *c, const dls__function *fn) {
  static const char pycall[] = "Function.launch";
  const dlspy_launch_plan *p = &f->plan;
  dlspy_plan_check *k = p->check;
  bool same = k->passed && k->fn == fn;
  for (uint64_t m = p->tensors; m != 0; m &= m - 1) { /* the scalars were written when the plan was made */
    int i = __builtin_ctzll(m);
    const dlspy_arg *a = &c->args[i];
    if (dlspy_view_key_same(&k->keys[i], a))
      continue; /* its pointer and extent are those held */
    same = false;
    k->args[i].v.ptr = a->ptr;
    k->extents[i] = dlspy_view_extent(&a->dl);
    dlspy_view_key_set(&k->keys[i], a);
  }
  if (same)
    return 0; /* the arguments that passed last time */
  bool overlap;
  dls_status_t rc = dls__builtin_check(pycall, fn, k->args, (size_t)p->n, dls__ext_extents(k->extents), &overlap);
  k->passed = rc == DLS_OK && !overlap;
  k->fn = fn;
  if (rc == DLS_OK && overlap) {
    dlspy_raisef(f->st, DLS_ERR_INVALID_ARGUMENT,
                 "%s(function \"%s\"): what it reads partially overlaps what it writes, which a kernel launch cannot "
                 "order; use the high-level call (it copies the source through a temporary) or disjoint tensors",
                 pycall, f->name);
    return -1;
  }
  if (rc != DLS_OK) {
    dlspy_raisef(f->st, rc, "%s", dls_last_error());
    return -1;
  }
  return 0;
}

/* A call that is not the plan's (`rc`, `r`: what dlspy_call_read_common found): makes `c` the call the general path
 * goes on from (no argument read again). 1, or -1 with an exception. */
int dlspy_plan_other(FunctionObject *f, dlspy_call *c, PyObject *const *uargs, int n, int rc, const dlspy_common *r);

/* launch(grid, block, *args) of a call without keywords with the remembered grid and block and a valid argument
 * count (`n` kernel arguments after `args`' grid and block), of a Function with a last type: reads it into `c` (the
 * read pass, its common case tried with f->last) and, when its table has the plan's shape (dlspy_plan_fits),
 * launches it by the plan. Returns 0 when
 * it ran, -1 with an exception, 1 when it is not the plan's or the function's handle is stale (nothing raised,
 * nothing queued; `c` read, not held: the general path goes on from it). Inline: the hot path of a launch. */
DLSPY_ALWAYS_INLINE int dlspy_plan_launch(FunctionObject *f, dlspy_call *c, PyObject *const *args, Py_ssize_t n) {
  static const char pycall[] = "Function.launch";
  const dlspy_launch_plan *p = &f->plan;
  dlspy_common r;
  int rc = dlspy_call_read_common(pycall, &f->last, c, args + 2, n, &r);
  if (rc < 0)
    return -1;
  if (rc == 0 && dlspy_plan_fits(f, c, &r, args + 2)) {
    /* The stream is not held (the general path holds it because it runs Python code while it uses it): the read
     * pass ran no Python code once it chose the stream, and nothing from here to the launch runs any or lets the
     * GIL go, so nothing can drop the handle meanwhile. While a range is registered (exported dlstream memory,
     * foreign records), its tensors are looked up first: one found is the general way's, which orders it. */
    dls__function *fn = dls__ext_function(f->handle);
    if (fn != NULL && !(dlspy_ranges_any() && dlspy_call_aliases_any(c, r.fast))) {
      if (DLSPY_UNLIKELY(p->builtin) && dlspy_plan_check_builtin(f, c, fn) != 0)
        return -1;
      /* The dimensions launch_dims checked when it remembered them. */
      dls_status_t st = dls__launch_params(pycall, fn, r.s, &f->memo_cfg, c->params, f->plan_sizes, p->n);
      if (DLSPY_UNLIKELY(st != DLS_OK)) {
        dlspy_raisef(f->st, st, "%s", dls_last_error());
        return -1;
      }
      return 0;
    }
  }
  return dlspy_plan_other(f, c, args + 2, (int)n, rc, &r); /* the general way goes on from what the pass read */
}

#endif /* DLSTREAM_PY_LAUNCHPLAN_H */
