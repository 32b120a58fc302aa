/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream.Function's object, shared by its launch path (launch.c) and its launch plan (launchplan.c). */
#ifndef DLSTREAM_PY_FUNCTION_H
#define DLSTREAM_PY_FUNCTION_H

#include "callread.h"

/* Arguments whose last scalar a Function remembers (see FunctionObject). */
#define MEMO_ARGS 16

/* The decision the general path made for the last launch that ran on an exchange-API framework's current stream
 * (the Function's `last` type's) with nothing to order, keep or stage, kept as the table it had: which arguments
 * were that framework's tensors (on its device: dlspy_call.fast), and that every other one was a remembered
 * scalar. A call whose table the read pass finds the same is launched from it without converting again
 * (launchplan.c). */
/* A planned built-in's arguments as the core checks them (dls__builtin_check): the remembered scalars and the
 * tensors' kinds written when the plan is made, each call's tensor pointers and extents written over them. */
typedef struct dlspy_plan_check {
  dls_arg_t args[DLS_MAX_ARGS];
  dls__ext_extent extents[DLS_MAX_ARGS];
} dlspy_plan_check;

typedef struct dlspy_launch_plan {
  uint64_t tensors;               /* bit i: argument i is a tensor of the last type; else the scalar memo_obj[i] */
  uint64_t scalars;               /* bit i: argument i is the scalar memo_obj[i] (i < n) */
  uint64_t end;                   /* 1 << n (0 for 64): where the read pass of a call of n arguments ends */
  int n;                          /* the kernel's argument count; -1: no plan */
  bool builtin;                   /* a built-in: its arguments are checked at each launch (`check`) */
  dlspy_plan_check *check;        /* a built-in's (allocated with its first plan; NULL: none) */
} dlspy_launch_plan;

/* The fields a launch reads come first, in the order it reads them: a launch leaves the caches cold (the driver's
 * cuLaunchKernel sweeps them), so each line it touches costs. */
typedef struct FunctionObject {
  PyObject_HEAD
  dls_function_t handle;
  dlspy_state *st; /* its module's state (the type keeps the module alive) */
  /* What the last launch converted, kept to skip converting it again: the grid and block objects and their
   * dimensions, and each of the first MEMO_ARGS arguments that was an int or a float, and its dls_arg_t. Only
   * objects of exactly int, float or a tuple of exact ints are kept (strong references): they are immutable, so
   * the same object, or an equal one of the same type (dlspy_same_value), converts the same way, and none can reach
   * the Function (no cycle). */
  PyObject *memo_grid, *memo_block;
  dls_launch_config_t memo_cfg; /* their dimensions (no dynamic shared memory): a planned launch's configuration */
  /* The last launch's shape, which the read pass tries first (dlspy_call_read_common): the type whose tensors decided
   * its stream (their framework's current stream of their device; a strong reference, NULL: none) and needed
   * nothing more, the pointer slots, and memo_obj with memo_arg. */
  dlspy_last_call last;
  dlspy_launch_plan plan;
  PyObject *memo_obj[MEMO_ARGS];
  dls_arg_t memo_arg[MEMO_ARGS];
  uint32_t plan_sizes[DLS_MAX_ARGS]; /* the plan's argument sizes */
  DLDevice device;
  PyObject *module; /* the Module, kept alive; NULL for built-ins */
  int nsig;         /* -1: no signature */
  int nmin, nspan;  /* the kernel argument counts a launch may give: nmin to nmin + nspan */
  bool builtin;           /* a built-in (dlstream.builtin_function): its arguments are checked at each launch */
  dlspy_call_desc desc;   /* how its launch names its arguments (args[i], from args[0], pointers only) and what a
                             read-only refusal suggests (the kernel's name writes it) */
  uint8_t sig[DLS_MAX_ARGS];
  char name[64];
} FunctionObject;

/* After the general path queued a launch without keywords: makes the plan of its shape when it has one.
 * `taken`: bit i set when argument i was a tensor of the call's fast type (dlspy_call_fast_arg). */
void dlspy_plan_note(FunctionObject *f, const dlspy_call *c, PyObject *const *args, Py_ssize_t nargs,
                     uint64_t taken);
/* Drops the plan. */
void dlspy_plan_clear(FunctionObject *f);
/* Drops the plan and the last type. */
void dlspy_plan_forget(FunctionObject *f);
/* Whether `o` is not `memo` but an exact int, float (the same bits) or tuple of exact ints equal to it (function.c;
 * `memo` NULL: nothing remembered, false). */
bool dlspy_equal_value(PyObject *o, PyObject *memo);
/* Whether `o` stands for the remembered `memo`: the same object (the common case, inline), or an equal value. */
static inline bool dlspy_same_value(PyObject *o, PyObject *memo) { return o == memo || dlspy_equal_value(o, memo); }

/* Whether a call without keywords (`uargs`), whose read pass ended in its common case with `r` for
 * f->last and f's memo (callread.h: that type on its device decided), has the shape of f's plan: the plan's
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

/* A planned launch of a built-in checks its arguments, as every launch of one does: its tensors are pointers of
 * known extent (their views in the table), its scalars the remembered ones. 0, or -1 with an exception. */
static inline __attribute__((always_inline)) int dlspy_plan_check_builtin(FunctionObject *f, const dlspy_call *c,
                                                                          const dls__function *fn) {
  static const char pycall[] = "Function.launch";
  const dlspy_launch_plan *p = &f->plan;
  dlspy_plan_check *k = p->check;
  for (uint64_t m = p->tensors; m != 0; m &= m - 1) { /* the scalars were written when the plan was made */
    int i = __builtin_ctzll(m);
    k->args[i].v.ptr = c->args[i].ptr;
    k->extents[i] = dlspy_view_extent(&c->args[i].dl);
  }
  bool overlap;
  dls_status_t rc = dls__builtin_check(pycall, fn, k->args, (size_t)p->n, dls__ext_extents(k->extents), &overlap);
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
 * count (`n` kernel arguments after `args`' grid and block), of a Function with a last type: reads it into `c` (the read pass, its common case tried
 * with f->last) and, when its table has the plan's shape (dlspy_plan_fits), launches it by the plan. Returns 0 when
 * it ran, -1 with an exception, 1 when it is not the plan's or the function's handle is stale (nothing raised,
 * nothing queued; `c` read, not held: the general path goes on from it). Inline: the hot path of a launch. */
static inline __attribute__((always_inline)) int dlspy_plan_launch(FunctionObject *f, dlspy_call *c,
                                                                  PyObject *const *args, Py_ssize_t n) {
  static const char pycall[] = "Function.launch";
  const dlspy_launch_plan *p = &f->plan;
  dlspy_common r;
  int rc = dlspy_call_read_common(pycall, &f->last, c, args + 2, n, &r);
  if (rc < 0)
    return -1;
  if (rc == 0 && dlspy_plan_fits(f, c, &r, args + 2)) {
    /* The stream is not held (the general path holds it because it runs Python code while it uses it): the read
     * pass ran no Python code once it chose the stream, and nothing from here to the launch runs any or lets the
     * GIL go, so nothing can drop the handle meanwhile. */
    dls__function *fn = dls__ext_function(f->handle);
    if (fn != NULL) {
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

#endif
