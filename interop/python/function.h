/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream.Function's object, shared by its launch path (launch.c) and its launch plan (launchplan.c). */
#ifndef DLSTREAM_PY_FUNCTION_H
#define DLSTREAM_PY_FUNCTION_H

#include "call.h"

/* Arguments whose last scalar a Function remembers (see FunctionObject). */
#define MEMO_ARGS 16

/* The shape of the last launch that ran on an exchange-API framework's current stream with nothing to order,
 * keep or stage: which arguments were that framework's tensors, and that every other one was a remembered
 * scalar. A call of the same shape needs only the tensors' data pointers and the framework's current stream
 * (launchplan.c). */
typedef struct dlspy_launch_plan {
  PyTypeObject *type;             /* the tensors' type (strong); NULL: no plan */
  const DLPackExchangeAPI *api;   /* its exchange API */
  DLDevice dev;                   /* the device the framework names for the tensors (the Function's) */
  DLDevice home;                  /* the same as dlstream names it */
  uint64_t tensors;               /* bit i: argument i is a tensor of `type`; else the scalar memo_obj[i] */
  int n;                          /* the kernel's argument count */
  bool builtin;                   /* a built-in: its arguments are checked at each launch */
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
  uint32_t memo_dims[2][3];
  dlspy_launch_plan plan;
  PyObject *memo_obj[MEMO_ARGS];
  dls_arg_t memo_arg[MEMO_ARGS];
  uint32_t plan_sizes[DLS_MAX_ARGS]; /* the plan's argument sizes */
  DLDevice device;
  PyObject *module; /* the Module, kept alive; NULL for built-ins */
  int nsig;         /* -1: no signature */
  bool builtin;           /* a built-in (dlstream.builtin_function): its arguments are checked at each launch */
  bool builtin_signature; /* the signature a built-in carries (the user gave none) */
  uint8_t sig[DLS_MAX_ARGS];
  char name[64];
} FunctionObject;

/* Runs launch(grid, block, *args) (no keywords) by f's plan. Returns 0 when it ran, -1 with an exception, 1 when
 * the call does not have the plan's shape (nothing raised, nothing done: the general path takes it). */
int dlspy_plan_launch(FunctionObject *f, PyObject *const *args, Py_ssize_t nargs);
/* After the general path queued a launch without keywords: makes the plan of its shape when it has one.
 * `taken`: bit i set when argument i was a tensor of the call's fast type (dlspy_call_fast_arg). */
void dlspy_plan_note(FunctionObject *f, const dlspy_call *c, PyObject *const *args, Py_ssize_t nargs,
                     uint64_t taken);
/* Drops the plan. */
void dlspy_plan_clear(FunctionObject *f);
/* Whether `o` is not `memo` but an exact int, float (the same bits) or tuple of exact ints equal to it (function.c;
 * `memo` NULL: nothing remembered, false). */
bool dlspy_equal_value(PyObject *o, PyObject *memo);
/* Whether `o` stands for the remembered `memo`: the same object (the common case, inline), or an equal value. */
static inline bool dlspy_same_value(PyObject *o, PyObject *memo) { return o == memo || dlspy_equal_value(o, memo); }

#endif
