/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream.Function's object, shared by its launch path (launch.c) and its launch plan (launchplan.h), and its
 * memo of its last launch (function.c). */
#ifndef DLSTREAM_PY_FUNCTION_H
#define DLSTREAM_PY_FUNCTION_H

#include "handshake.h"

/* Arguments whose last scalar a Function remembers (see FunctionObject). */
#define MEMO_ARGS 16

/* A planned tensor's view as its extent was last computed from (launchplan.h: dlspy_view_key_same): the same view
 * has the same extent. Views of more than DLSPY_KEY_DIMS dimensions get no key (ndim -1: computed at each call). */
#define DLSPY_KEY_DIMS 2
typedef struct dlspy_view_key {
  void *ptr;      /* the first element */
  int32_t ndim;   /* -1: no key */
  DLDataType dtype;
  bool strided;   /* strides given (else compact) */
  int64_t shape[DLSPY_KEY_DIMS], strides[DLSPY_KEY_DIMS];
} dlspy_view_key;

/* A planned built-in's arguments as the core checks them (dls__builtin_check): the remembered scalars and the
 * tensors' kinds written when the plan is made (and a scalar again when the general path remembers a new one),
 * each call's tensor pointers and extents written over them (only where its view is not the one `keys` holds).
 * The check reads nothing but these and the function, so arguments that passed pass again: `passed` says the ones
 * held passed for `fn` (cleared wherever a scalar is written), and a call whose tensors are the same views is not
 * checked again. */
typedef struct dlspy_plan_check {
  dls_arg_t args[DLS_MAX_ARGS];
  dls__ext_extent extents[DLS_MAX_ARGS];
  dlspy_view_key keys[DLS_MAX_ARGS];
  const dls__function *fn;
  bool passed;
} dlspy_plan_check;

/* The decision the general path made for the last launch that ran on an exchange-API framework's current stream
 * (the Function's `last` type's) with nothing to order, keep or stage, kept as the table it had: which arguments
 * were that framework's tensors (on its device: dlspy_call.fast), and that every other one was a remembered
 * scalar. A call whose table the read pass finds the same is launched from it without converting again
 * (launchplan.h: dlspy_plan_launch). */
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

/* Whether `o` is not `memo` but an exact int, float (the same bits) or tuple of exact ints equal to it (function.c;
 * `memo` NULL: nothing remembered, false). */
bool dlspy_equal_value(PyObject *o, PyObject *memo);
/* Whether `o` stands for the remembered `memo`: the same object (the common case, inline), or an equal value. */
static inline bool dlspy_same_value(PyObject *o, PyObject *memo) { return o == memo || dlspy_equal_value(o, memo); }

#endif
