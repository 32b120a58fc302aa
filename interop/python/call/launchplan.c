/* SPDX-License-Identifier: Apache-2.0 */
/* A Function's launch plan: the decision the general path made for a call, kept, and applied to a later call whose
 * table (what the read pass, handshake.c, read of its arguments) is the same.
 *
 * The general path (launch.c, tensorarg.c) decides, for each call, how each argument is taken. A call with the
 * plan's shape would decide the same: its scalars are the objects the plan saw or equal ones of the same exact type
 * (immutable, so they convert the same way: dlspy_same_value), and its tensor arguments are of the plan's type in
 * the same places, on the device whose current stream the read pass chose (dlspy_call.fast): none needs ordering.
 * What changes between calls (the tensors' data pointers and devices, the framework's current stream, a
 * use_stream() context) the read pass has read into the call's table and its stream; the plan adds no read of its
 * own. Any difference hands the call to the general path before anything was done, which goes on from the table
 * (dlspy_plan_other). The plan's launch itself is inline (function.h: dlspy_plan_launch). */
#include "launchplan.h"

#include "handshake.h"
#include "../errors.h"

int dlspy_plan_other(FunctionObject *f, dlspy_call *c, PyObject *const *uargs, int n, int rc, const dlspy_common *r) {
  static const char pycall[] = "Function.launch";
  dlspy_call_init(c, f->st, pycall, &f->desc, f->last.slots);
  if (rc == 0) {
    dlspy_call_from_common(c, &f->last.type, r);
    return 1;
  }
  c->xapi = r->xapi; /* the entries the common case read are not read again */
  c->cupy = r->cupy;
  return dlspy_call_read_from(c, NULL, &f->device, uargs, n) != 0 ? -1 : 1;
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
  if (c->ftype.type != NULL && c->ftype.api != NULL && c->s == c->cur_stream &&
      c->cur_api == (const void *)c->ftype.api) {
    /* The call ran on the current stream of its tensors' exchange-API framework, with nothing to order: the next
     * one tries their type first. */
    dlspy_last_type *t = &f->last.type;
    if (t->type != c->ftype.type)
      Py_XSETREF(t->type, (PyTypeObject *)Py_NewRef((PyObject *)c->ftype.type));
    t->api = c->ftype.api;
    t->dev = c->ftype.dev;
    t->home = c->sdev;
  } else {
    dlspy_plan_clear(f);
    return;
  }
  bool fits = taken != 0 && taken == c->fast && dlspy_same_value(args[0], f->memo_grid) &&
              dlspy_same_value(args[1], f->memo_block) && n <= DLS_MAX_ARGS;
  for (Py_ssize_t i = 0; fits && i < n; i++)
    fits = ((taken >> i) & 1) || (i < MEMO_ARGS && dlspy_same_value(args[2 + i], f->memo_obj[i]) &&
                                  (uint32_t)f->memo_arg[i].kind - 1u < DLS_ARG_PTR);
  dlspy_launch_plan *p = &f->plan;
  if (fits && f->builtin && p->check == NULL && (p->check = PyMem_Malloc(sizeof *p->check)) == NULL)
    fits = false; /* no plan, no error: the general path serves the next call */
  if (!fits) {
    dlspy_plan_clear(f);
    return;
  }
  p->tensors = taken;
  p->end = n == 64 ? 0 : (uint64_t)1 << n;
  p->scalars = ~taken & (p->end - 1);
  p->n = (int)n;
  p->builtin = f->builtin;
  if (p->builtin)
    p->check->passed = false;
  for (Py_ssize_t i = 0; i < n; i++) {
    bool tensor = (taken >> i) & 1;
    f->plan_sizes[i] = tensor ? (uint32_t)sizeof(void *) : arg_size(f->memo_arg[i].kind);
    if (p->builtin) {
      p->check->args[i] = tensor ? dls_arg_ptr(NULL) : f->memo_arg[i];
      p->check->extents[i] = (dls__ext_extent){.lo = 1, .hi = 0}; /* a scalar's: none; a tensor's: each call's */
      p->check->keys[i].ndim = -1;
    }
  }
}

void dlspy_view_key_set(dlspy_view_key *key, const dlspy_arg *a) {
  const DLTensor *dl = &a->dl;
  key->ptr = a->ptr;
  key->ndim = dl->ndim >= 0 && dl->ndim <= DLSPY_KEY_DIMS ? dl->ndim : -1;
  key->dtype = dl->dtype;
  key->strided = dl->strides != NULL;
  for (int32_t d = 0; d < key->ndim; d++) {
    key->shape[d] = dl->shape[d];
    key->strides[d] = dl->strides != NULL ? dl->strides[d] : 0;
  }
}

void dlspy_plan_clear(FunctionObject *f) {
  f->plan.n = -1;
  f->plan.tensors = 0;
  f->plan.scalars = 0;
  f->plan.end = 1; /* no call of a plan ends there with tensors read */
}

void dlspy_plan_forget(FunctionObject *f) {
  dlspy_plan_clear(f);
  PyMem_Free(f->plan.check);
  f->plan.check = NULL;
  Py_CLEAR(f->last.type.type);
}
