/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream._dlstream._Branch: the block of one branch of a stream_parallel group (`with dlstream.branch():`), in C
 * because an empty branch is mostly the cost of its block: the branch's Stream from the group (Group.branch or
 * Group.add), use_stream's variable and the branch variable set and reset, and the frameworks carried (carry.c). dlstream/_parallel.py hands over what
 * the block reads (_set_branch_hooks) and keeps the rest of stream_parallel; carry.c carries the frameworks. */
#include "args.h"
#include "errors.h"
#include "call/block.h"

typedef struct BranchObject {
  PyObject_HEAD
  PyObject *owner;      /* the stream_parallel block */
  PyObject *given;      /* the caller's stream, or NULL: a pooled one */
  PyObject *stream;     /* the branch's Stream, once entered */
  PyObject *stream_tok; /* use_stream's variable's token while the block is open (NULL: not open) */
  PyObject *branch_tok; /* the branch variable's token */
  PyObject *carried;    /* what _carry.enter returned, or NULL */
} BranchObject;

static PyObject *set_branch_hooks(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  if (nargs != 2)
    return dlspy_type_error(st, "_set_branch_hooks(group_var, branch_var)");
  PyObject *group = PyUnicode_InternFromString("_group"), *origin = PyUnicode_InternFromString("origin");
  if (group == NULL || origin == NULL) {
    Py_XDECREF(group);
    Py_XDECREF(origin);
    return NULL;
  }
  dlspy_branch_clear(st);
  st->branch.group_var = Py_NewRef(args[0]);
  st->branch.branch_var = Py_NewRef(args[1]);
  st->branch.s_group = group;
  st->branch.s_origin = origin;
  Py_RETURN_NONE;
}

void dlspy_branch_clear(dlspy_state *st) {
  Py_CLEAR(st->branch.group_var);
  Py_CLEAR(st->branch.branch_var);
  Py_CLEAR(st->branch.s_group);
  Py_CLEAR(st->branch.s_origin);
}

/* A branch block of `owner` (steals it) on the caller's `given` stream (None: a pooled one). */
static PyObject *branch_new(PyTypeObject *tp, PyObject *owner, PyObject *given) {
  BranchObject *b = (BranchObject *)tp->tp_alloc(tp, 0);
  if (b == NULL) {
    Py_DECREF(owner);
    return NULL;
  }
  b->owner = owner;
  b->given = given == NULL || given == Py_None ? NULL : Py_NewRef(given);
  return (PyObject *)b;
}

static PyObject *branch_tp_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
  PyObject *owner, *given = Py_None;
  if ((kw != NULL && PyDict_GET_SIZE(kw) != 0) || !PyArg_UnpackTuple(args, "_Branch", 1, 2, &owner, &given))
    return NULL;
  return branch_new(tp, Py_NewRef(owner), given);
}

/* dlstream.branch(stream=None): a branch block of the innermost open stream_parallel block of this context. */
static PyObject *mod_branch(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  dlspy_state *st = dlspy_state_of_module(m);
  static const char *const names[] = {"stream", NULL};
  PyObject *a[1];
  if (dlspy_parse_kw(st, "branch", args, nargs, kwnames, names, 1, a) != 0)
    return NULL;
  if (st->branch.group_var == NULL)
    return dlspy_raisef(st, DLS_ERR_STATE, "dlstream.branch(): the package did not set up branches (import dlstream)");
  PyObject *g = NULL;
  if (PyContextVar_Get(st->branch.group_var, NULL, &g) != 0)
    return NULL;
  if (g == NULL || g == Py_None) {
    Py_XDECREF(g);
    return dlspy_raisef(st, DLS_ERR_STATE, "dlstream.branch() outside a dlstream.stream_parallel() block");
  }
  return branch_new(st->branch.type, g, a[0]);
}

/* The block's end: the frameworks restored (_carry.exit), then the branch variable and use_stream's reset. The first
 * failure is raised once the rest ran (as a `finally`). */
static int branch_close(dlspy_state *st, BranchObject *b) {
  PyObject *stream_tok = b->stream_tok, *branch_tok = b->branch_tok, *carried = b->carried;
  b->stream_tok = b->branch_tok = b->carried = NULL;
  int rc = 0;
  if (carried != NULL) {
    PyObject *origin = PyObject_GetAttr(b->owner, st->branch.s_origin);
    rc = origin != NULL ? dlspy_carry_exit(st, carried, b->stream, origin) : -1;
    Py_XDECREF(origin);
    Py_DECREF(carried);
  }
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  if (PyContextVar_Reset(st->branch.branch_var, branch_tok) != 0 || PyContextVar_Reset(st->stream_var, stream_tok) != 0)
    rc = -1;
  if (et != NULL) { /* the carry's failure goes on; a reset's is dropped */
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
  }
  Py_DECREF(branch_tok);
  Py_DECREF(stream_tok);
  dlspy_block_release(st, b->stream); /* after the join: its calls' tensors, once its stream passes them */
  return rc;
}

static PyObject *branch_enter(BranchObject *b, PyObject *unused) {
  dlspy_state *st = dlspy_state_of(Py_TYPE(b));
  if (st->branch.branch_var == NULL)
    return dlspy_raisef(st, DLS_ERR_STATE, "dlstream.branch(): the package did not set up branches (import dlstream)");
  if (b->stream_tok != NULL)
    return dlspy_raisef(st, DLS_ERR_STATE, "dlstream.branch(): this branch block is already open (make one per block)");
  PyObject *core = PyObject_GetAttr(b->owner, st->branch.s_group);
  if (core == NULL)
    return NULL;
  if (!PyObject_TypeCheck(core, st->GroupType)) {
    Py_DECREF(core);
    return dlspy_raisef(st, DLS_ERR_STATE, "dlstream.branch(): the stream_parallel block has ended or not begun");
  }
  PyObject *cur = NULL;
  if (PyContextVar_Get(st->branch.branch_var, NULL, &cur) != 0) {
    Py_DECREF(core);
    return NULL;
  }
  Py_XDECREF(cur); /* compared by identity only */
  if (cur == b->owner) {
    Py_DECREF(core);
    return dlspy_raisef(st, DLS_ERR_STATE, "dlstream.branch() inside a branch of the same group: open a nested "
                        "dlstream.stream_parallel() in the branch first");
  }
  PyObject *s = b->given == NULL ? dlspy_group_branch(core) : dlspy_group_add(core, b->given);
  Py_DECREF(core);
  if (s == NULL)
    return NULL;
  Py_XSETREF(b->stream, s);
  st->stream_var_set = true; /* as _stream_var_set: calls read the variable from now on */
  b->stream_tok = PyContextVar_Set(st->stream_var, s);
  if (b->stream_tok == NULL)
    return NULL;
  b->branch_tok = PyContextVar_Set(st->branch.branch_var, b->owner);
  if (b->branch_tok == NULL) {
    (void)PyContextVar_Reset(st->stream_var, b->stream_tok);
    Py_CLEAR(b->stream_tok);
    return NULL;
  }
  PyObject *origin = PyObject_GetAttr(b->owner, st->branch.s_origin);
  b->carried = origin != NULL ? dlspy_carry_enter(st, s, origin) : NULL; /* None: nothing carried */
  Py_XDECREF(origin);
  if (b->carried == NULL) {
    (void)branch_close(st, b);
    return NULL;
  }
  if (b->carried == Py_None)
    Py_CLEAR(b->carried);
  return Py_NewRef(s);
}

static PyObject *branch_exit(BranchObject *b, PyObject *const *args, Py_ssize_t nargs) {
  if (b->stream_tok == NULL)
    Py_RETURN_NONE;
  if (branch_close(dlspy_state_of(Py_TYPE(b)), b) != 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *branch_get_stream(BranchObject *b, void *c) { return Py_NewRef(b->stream ? b->stream : Py_None); }

static void branch_dealloc(BranchObject *b) {
  PyTypeObject *tp = Py_TYPE(b);
  if (b->stream_tok != NULL) /* abandoned open (never exited): the variables stay as the program left them */
    Py_CLEAR(b->stream_tok);
  Py_CLEAR(b->branch_tok);
  Py_CLEAR(b->carried);
  Py_CLEAR(b->stream);
  Py_CLEAR(b->given);
  Py_CLEAR(b->owner);
  tp->tp_free(b);
  Py_DECREF(tp);
}

static PyMethodDef branch_methods[] = {
    {"__enter__", (PyCFunction)branch_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nOpens the branch: its Stream, which the block's launches and the frameworks in play "
     "use."},
    {"__exit__", (PyCFunction)(void (*)(void))branch_exit, METH_FASTCALL,
     "__exit__($self, /, *exc)\n--\n\nCloses the branch: the frameworks and the block's stream are restored."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef branch_getset[] = {
    {"stream", (getter)branch_get_stream, NULL, "The branch's Stream once entered (None before).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot branch_slots[] = {
    {Py_tp_new, branch_tp_new},
    {Py_tp_dealloc, branch_dealloc},
    {Py_tp_methods, branch_methods},
    {Py_tp_getset, branch_getset},
    {Py_tp_doc, "_Branch(block, stream=None, /)\n--\n\n``with g.branch() as s:``: launches in the block default to the "
                "branch stream ``s``, and so do the ops of the frameworks the program imported (dlstream/_carry.py)."},
    {0, NULL},
};

PyType_Spec dlspy_branch_spec = {
    .name = "dlstream._Branch",
    .basicsize = sizeof(BranchObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = branch_slots,
};

PyMethodDef dlspy_branch_methods[] = {
    {"branch", (PyCFunction)(void (*)(void))mod_branch, METH_FASTCALL | METH_KEYWORDS,
     "branch(stream=None)\n--\n\n``with dlstream.branch():`` — a new branch of the innermost open ``stream_parallel`` "
     "block, on a pooled stream or on the caller's ``stream``."},
    {"_set_branch_hooks", (PyCFunction)(void (*)(void))set_branch_hooks, METH_FASTCALL,
     "_set_branch_hooks($module, group_var, branch_var, /)\n--\n\nThe package hands the branch blocks the group and "
     "branch variables they read (dlstream/_parallel.py)."},
    {NULL, NULL, 0, NULL},
};
