/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream._dlstream.Group: a fork/join group (dls_group_*); stream_parallel
 * in dlstream/__init__.py is built on it. */
#include "errors.h"
#include "call/streamarg.h"

typedef struct GroupObject {
  PyObject_HEAD
  dls_group_t handle; /* {0} once ended */
  PyObject *origin;   /* the origin Stream, kept alive while the group is open */
  PyObject *branches; /* the pooled branches' Streams handed out (a list, NULL before the first) */
} GroupObject;

/* The group ended: the stream cache forgets its wrappers of the pooled branches' natives (a framework's current
 * stream in a branch is the branch's, read back and wrapped by calls there), which would keep each branch's stream
 * out of the pool: the next group would make new streams instead of reusing them. */
static void forget_branches(dlspy_state *st, GroupObject *g) {
  PyObject *list = g->branches;
  g->branches = NULL;
  if (list == NULL)
    return;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
    StreamObject *b = (StreamObject *)PyList_GET_ITEM(list, i);
    dlspy_stream_uncache(st, b->device, b->native);
  }
  Py_DECREF(list);
}

static PyObject *group_tp_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
  static const char pycall[] = "Group";
  dlspy_state *st = dlspy_state_of(tp);
  static char *kwlist[] = {"origin", NULL};
  PyObject *origin;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O:Group", kwlist, &origin))
    return NULL;
  if (dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  if (!PyObject_TypeCheck(origin, st->StreamType))
    return dlspy_type_error(st, "Group(origin=%R): the origin must be a dlstream.Stream (use Stream.wrap)", origin);
  StreamObject *o = (StreamObject *)origin;
  if (o->handle.id == 0)
    return dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "Group(origin=%R): the stream was closed", origin);
  GroupObject *g = (GroupObject *)tp->tp_alloc(tp, 0);
  if (g == NULL)
    return NULL;
  dls_status_t rc = dls_group_begin(o->handle, &g->handle);
  if (rc != DLS_OK) {
    Py_DECREF(g);
    return dlspy_raise(st, rc, pycall);
  }
  g->origin = Py_NewRef(origin);
  return (PyObject *)g;
}

static PyObject *group_branch(GroupObject *g, PyObject *unused) {
  dlspy_state *st = dlspy_state_of(Py_TYPE(g));
  if (g->handle.id == 0)
    return dlspy_raisef(st, DLS_ERR_STATE, "Group.branch: the group has ended");
  if (dlspy_check_runtime(st, "Group.branch") != 0)
    return NULL;
  dls_stream_t b;
  dls_status_t rc = dls_group_branch(g->handle, &b);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "Group.branch");
  PyObject *out = dlspy_stream_new_branch(st, b);
  if (out != NULL && g->branches == NULL)
    g->branches = PyList_New(0);
  if (out != NULL && (g->branches == NULL || PyList_Append(g->branches, out) != 0))
    PyErr_Clear(); /* out of memory: its wrapper, if any, only stays cached */
  return out;
}

/* Group.add(stream): the caller's stream as a branch (dls_group_add); returns it as a Stream. */
static PyObject *group_add(GroupObject *g, PyObject *stream) {
  static const char pycall[] = "Group.add";
  dlspy_state *st = dlspy_state_of(Py_TYPE(g));
  if (g->handle.id == 0)
    return dlspy_raisef(st, DLS_ERR_STATE, "%s: the group has ended", pycall);
  if (dlspy_check_runtime(st, pycall) != 0)
    return NULL;
  PyObject *s = PyObject_TypeCheck(stream, st->StreamType) ? Py_NewRef(stream) : NULL;
  if (s == NULL) { /* wrapped on the origin's device: what Stream.wrap would make */
    DLDevice d = ((StreamObject *)g->origin)->device;
    PyObject *dev = Py_BuildValue("(ii)", (int)d.device_type, (int)d.device_id);
    s = dev != NULL ? PyObject_CallMethod((PyObject *)st->StreamType, "wrap", "OO", stream, dev) : NULL;
    Py_XDECREF(dev);
    if (s == NULL)
      return NULL;
  }
  StreamObject *so = (StreamObject *)s;
  if (so->handle.id == 0) {
    Py_DECREF(s);
    return dlspy_raisef(st, DLS_ERR_INVALID_HANDLE, "%s(%R): the stream was closed", pycall, stream);
  }
  dls_status_t rc = g->handle.id != 0 ? dls_group_add(g->handle, so->handle) : DLS_ERR_STATE;
  if (rc != DLS_OK) {
    Py_DECREF(s);
    return rc == DLS_ERR_STATE ? dlspy_raisef(st, rc, "%s: the group has ended", pycall) : dlspy_raise(st, rc, pycall);
  }
  return s;
}

PyObject *dlspy_group_branch(PyObject *group) { return group_branch((GroupObject *)group, NULL); }
PyObject *dlspy_group_add(PyObject *group, PyObject *stream) { return group_add((GroupObject *)group, stream); }

static PyObject *group_end(GroupObject *g, PyObject *unused) {
  dlspy_state *st = dlspy_state_of(Py_TYPE(g));
  if (g->handle.id == 0)
    Py_RETURN_NONE;
  if (atomic_load(&dlspy_dead)) {
    g->handle.id = 0;
    Py_RETURN_NONE;
  }
  dls_status_t rc = dls_group_end(g->handle);
  if (rc == DLS_ERR_STATE) /* a nested group is still open: nothing changed */
    return dlspy_raise(st, rc, "Group.end");
  g->handle.id = 0;
  Py_CLEAR(g->origin);
  forget_branches(st, g);
  if (rc != DLS_OK)
    return dlspy_raise(st, rc, "Group.end");
  Py_RETURN_NONE;
}

static PyObject *group_get_branches(GroupObject *g, void *c) {
  int n = 0;
  if (g->handle.id != 0 && !atomic_load(&dlspy_dead) && dls_group_branch_count(g->handle, &n) != DLS_OK)
    return dlspy_raise(dlspy_state_of(Py_TYPE(g)), DLS_ERR_INVALID_HANDLE, "Group.branches");
  return PyLong_FromLong(n);
}

static PyObject *group_get_origin(GroupObject *g, void *c) { return Py_NewRef(g->origin ? g->origin : Py_None); }
static PyObject *group_get_ended(GroupObject *g, void *c) { return PyBool_FromLong(g->handle.id == 0); }

static void group_dealloc(GroupObject *g) {
  PyTypeObject *tp = Py_TYPE(g);
  /* An abandoned group still joins: the origin must not run ahead of its branches. */
  if (g->handle.id != 0 && !atomic_load(&dlspy_dead)) {
    (void)dls_group_end(g->handle);
    forget_branches(dlspy_state_of(tp), g);
  }
  Py_CLEAR(g->branches);
  Py_CLEAR(g->origin);
  tp->tp_free(g);
  Py_DECREF(tp);
}

static PyMethodDef group_methods[] = {
    {"branch", (PyCFunction)group_branch, METH_NOARGS,
     "branch($self, /)\n--\n\nA new branch: a pooled Stream that starts after the fork point. The group owns it: "
     "it goes stale at end()."},
    {"add", (PyCFunction)group_add, METH_O,
     "add($self, stream, /)\n--\n\nMakes the caller's stream a branch: its later work starts after the fork point "
     "and the origin waits for it at end(). The stream stays the caller's. Returns it as a Stream."},
    {"end", (PyCFunction)group_end, METH_NOARGS,
     "end($self, /)\n--\n\nJoins: the origin's later work waits for every branch; the host does not wait "
     "(origin.synchronize() or dlstream.synchronize() does)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef group_getset[] = {
    {"origin", (getter)group_get_origin, NULL, "The origin stream (None once ended).", NULL},
    {"branches", (getter)group_get_branches, NULL, "Branches handed out so far.", NULL},
    {"ended", (getter)group_get_ended, NULL, "Whether end() ran.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot group_slots[] = {
    {Py_tp_new, group_tp_new},
    {Py_tp_dealloc, group_dealloc},
    {Py_tp_methods, group_methods},
    {Py_tp_getset, group_getset},
    {Py_tp_doc, "Group(origin)\n--\n\nA fork/join group on `origin` (dls_group_begin). See dlstream.stream_parallel."},
    {0, NULL},
};

PyType_Spec dlspy_group_spec = {
    .name = "dlstream.Group",
    .basicsize = sizeof(GroupObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = group_slots,
};
