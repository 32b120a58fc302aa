/* SPDX-License-Identifier: Apache-2.0 */
/* Blocks carry the frameworks with them: the loops of dlstream/_carry.py's enter and exit, in C (a branch or a
 * use_stream block runs them once each; in Python they were most of a carried branch's cost). _carry.py keeps the
 * carriers (the list, each a Python object: module, enter(mod, stream), exit(token)) and _tie; it hands both over
 * with _set_carry. A token is what a carrier's enter returned: token[1] is the framework's stream before the block. */
#include "errors.h"

static PyObject *set_carry(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  if (nargs != 2 || !PyList_Check(args[0]))
    return dlspy_type_error(st, "_set_carry(carriers (a list), tie)");
  PyObject *s[3] = {PyUnicode_InternFromString("module"), PyUnicode_InternFromString("enter"),
                    PyUnicode_InternFromString("exit")};
  if (s[0] == NULL || s[1] == NULL || s[2] == NULL) {
    for (int i = 0; i < 3; i++)
      Py_XDECREF(s[i]);
    return NULL;
  }
  dlspy_carry_clear(st);
  st->carry.carriers = Py_NewRef(args[0]);
  st->carry.tie = Py_NewRef(args[1]);
  st->carry.s_module = s[0];
  st->carry.s_enter = s[1];
  st->carry.s_exit = s[2];
  Py_RETURN_NONE;
}

void dlspy_carry_clear(dlspy_state *st) {
  Py_CLEAR(st->carry.carriers);
  Py_CLEAR(st->carry.tie);
  Py_CLEAR(st->carry.s_module);
  Py_CLEAR(st->carry.s_enter);
  Py_CLEAR(st->carry.s_exit);
}

/* Whether the framework's stream `fptr` is tied at the block's edges: it is neither the block's `stream` nor
 * `origin` (None: no group). -1: an error. */
static int needs_tie(dlspy_state *st, PyObject *fptr, PyObject *stream, PyObject *origin) {
  PyObject *p = PyObject_GetAttr(stream, st->s_ptr);
  int ne = p != NULL ? PyObject_RichCompareBool(fptr, p, Py_NE) : -1;
  Py_XDECREF(p);
  if (ne <= 0 || origin == Py_None)
    return ne;
  p = PyObject_GetAttr(origin, st->s_ptr);
  ne = p != NULL ? PyObject_RichCompareBool(fptr, p, Py_NE) : -1;
  Py_XDECREF(p);
  return ne;
}

/* _tie(waiter, target, stream.device) when the framework's stream `fptr` needs it (0: tied or not needed). */
static int tie(dlspy_state *st, PyObject *waiter, PyObject *target, PyObject *fptr, PyObject *stream,
               PyObject *origin) {
  int need = needs_tie(st, fptr, stream, origin);
  if (need <= 0)
    return need;
  PyObject *device = PyObject_GetAttr(stream, st->s_device);
  PyObject *r = device != NULL ? PyObject_CallFunctionObjArgs(st->carry.tie, waiter, target, device, NULL) : NULL;
  Py_XDECREF(device);
  Py_XDECREF(r);
  return r != NULL ? 0 : -1;
}

/* token[1] of a token, or NULL (an error). */
static PyObject *token_ptr(PyObject *token) { return PySequence_GetItem(token, 1); }

int dlspy_carry_exit(dlspy_state *st, PyObject *carried, PyObject *stream, PyObject *origin) {
  if (carried == Py_None)
    return 0;
  if (!PyList_Check(carried)) {
    dlspy_type_error(st, "_carry_exit(carried=%R): expected what _carry_enter returned (a list or None)", carried);
    return -1;
  }
  PyObject *et = NULL, *ev = NULL, *tb = NULL; /* the first failure, raised once every framework is restored */
  for (Py_ssize_t i = PyList_GET_SIZE(carried) - 1; i >= 0; i--) {
    if (i >= PyList_GET_SIZE(carried)) /* a carrier's exit shortened the list */
      continue;
    PyObject *pair = Py_NewRef(PyList_GET_ITEM(carried, i)); /* (carrier, token), made by dlspy_carry_enter */
    int rc = -1;
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
      dlspy_type_error(st, "_carry_exit(carried=...): item %zd is %R, not a (carrier, token) pair", i, pair);
    } else {
      PyObject *token = PyTuple_GET_ITEM(pair, 1);
      PyObject *r = PyObject_CallMethodObjArgs(PyTuple_GET_ITEM(pair, 0), st->carry.s_exit, token, NULL);
      PyObject *fptr = r != NULL ? token_ptr(token) : NULL;
      rc = fptr != NULL ? tie(st, fptr, stream, fptr, stream, origin) : -1; /* the join: its later work after */
      Py_XDECREF(r);
      Py_XDECREF(fptr);
    }
    Py_DECREF(pair);
    if (rc != 0 && et == NULL)
      PyErr_Fetch(&et, &ev, &tb);
    else if (rc != 0)
      PyErr_Clear();
  }
  if (et == NULL)
    return 0;
  PyErr_Restore(et, ev, tb);
  return -1;
}

PyObject *dlspy_carry_enter(dlspy_state *st, PyObject *stream, PyObject *origin) {
  if (st->carry.carriers == NULL)
    return dlspy_raisef(st, DLS_ERR_STATE, "dlstream blocks: the package did not set up its carriers (import dlstream)");
  PyObject *modules = PyImport_GetModuleDict(), *carried = NULL;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(st->carry.carriers); i++) {
    PyObject *carrier = Py_NewRef(PyList_GET_ITEM(st->carry.carriers, i));
    PyObject *name = PyObject_GetAttr(carrier, st->carry.s_module);
    PyObject *mod = name != NULL ? Py_XNewRef(PyDict_GetItemWithError(modules, name)) : NULL;
    Py_XDECREF(name);
    PyObject *token = mod != NULL ? PyObject_CallMethodObjArgs(carrier, st->carry.s_enter, mod, stream, NULL) : NULL;
    Py_XDECREF(mod);
    if (token == NULL && !PyErr_Occurred()) { /* not imported: nothing to carry */
      Py_DECREF(carrier);
      continue;
    }
    PyObject *pair = NULL;
    if (token == Py_None) {
      Py_DECREF(token);
      Py_DECREF(carrier);
      continue;
    }
    PyObject *fptr = token != NULL ? token_ptr(token) : NULL;
    int rc = fptr != NULL ? tie(st, stream, fptr, fptr, stream, origin) : -1; /* the fork: its work so far first */
    Py_XDECREF(fptr);
    if (rc == 0 && carried == NULL)
      carried = PyList_New(0);
    if (rc == 0 && carried != NULL)
      pair = PyTuple_Pack(2, carrier, token);
    if (pair == NULL || PyList_Append(carried, pair) != 0) { /* restore what was carried, then raise */
      PyObject *et, *ev, *tb;
      PyErr_Fetch(&et, &ev, &tb);
      PyObject *r = token != NULL ? PyObject_CallMethodObjArgs(carrier, st->carry.s_exit, token, NULL) : NULL;
      Py_XDECREF(r);
      PyErr_Clear();
      if (carried != NULL && dlspy_carry_exit(st, carried, stream, origin) != 0)
        PyErr_Clear();
      PyErr_Restore(et, ev, tb);
      Py_XDECREF(pair);
      Py_XDECREF(token);
      Py_DECREF(carrier);
      Py_XDECREF(carried);
      return NULL;
    }
    Py_DECREF(pair);
    Py_DECREF(token);
    Py_DECREF(carrier);
  }
  return carried != NULL ? carried : Py_NewRef(Py_None);
}

static PyObject *mod_carry_enter(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  if (nargs != 2)
    return dlspy_type_error(st, "_carry_enter(stream, origin) takes 2 arguments (%zd given)", nargs);
  return dlspy_carry_enter(st, args[0], args[1]);
}

static PyObject *mod_carry_exit(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  dlspy_state *st = dlspy_state_of_module(m);
  if (nargs != 3)
    return dlspy_type_error(st, "_carry_exit(carried, stream, origin) takes 3 arguments (%zd given)", nargs);
  if (dlspy_carry_exit(st, args[0], args[1], args[2]) != 0)
    return NULL;
  Py_RETURN_NONE;
}

PyMethodDef dlspy_carry_methods[] = {
    {"_set_carry", (PyCFunction)(void (*)(void))set_carry, METH_FASTCALL,
     "_set_carry($module, carriers, tie, /)\n--\n\ndlstream/_carry.py hands over its list of carriers and _tie."},
    {"_carry_enter", (PyCFunction)(void (*)(void))mod_carry_enter, METH_FASTCALL,
     "_carry_enter($module, stream, origin, /)\n--\n\nMakes ``stream`` the current stream of every framework in play; "
     "``stream`` first waits for each one's current stream unless that is ``origin`` (a branch's group forked from "
     "it) or ``stream`` itself. Returns what _carry_exit restores (None: nothing)."},
    {"_carry_exit", (PyCFunction)(void (*)(void))mod_carry_exit, METH_FASTCALL,
     "_carry_exit($module, carried, stream, origin, /)\n--\n\nRestores what _carry_enter changed, last first; each "
     "framework's stream then waits for ``stream`` unless it is ``origin`` (the group's end joins it) or ``stream`` "
     "itself. The first failure is raised once all are restored."},
    {NULL, NULL, 0, NULL},
};
