/* SPDX-License-Identifier: Apache-2.0 */
/* What dlstream knows of each tensor type, cached per type: its DLPack C exchange API, its stream provider
 * (dlstream.register_stream_provider; the package registers CuPy's and torch's), and whether its
 * __cuda_array_interface__ is worth reading. */
#include "tensortypes.h"

#include <string.h>

#include "../args.h"
#include "cupy.h"
#include "../errors.h"
#include "streamarg.h"

/* ---- the exchange API ---- */

static const DLPackExchangeAPI *xapi_from_value(PyObject *v) {
  const DLPackExchangeAPIHeader *h = NULL;
  if (PyCapsule_CheckExact(v)) {
    if (!PyCapsule_IsValid(v, "dlpack_exchange_api"))
      return NULL;
    h = PyCapsule_GetPointer(v, "dlpack_exchange_api");
  } else if (PyLong_Check(v)) {
    h = PyLong_AsVoidPtr(v);
  }
  if (h == NULL) {
    PyErr_Clear();
    return NULL;
  }
  /* A newer table chains the older ones it still serves. */
  while (h != NULL && h->version.major != DLPACK_MAJOR_VERSION)
    h = h->prev_api;
  if (h == NULL)
    return NULL;
  const DLPackExchangeAPI *api = (const DLPackExchangeAPI *)h;
  if (api->current_work_stream == NULL || api->dltensor_from_py_object_no_sync == NULL)
    return NULL;
  return api;
}

/* ---- stream providers ---- */

/* The provider registered for `tp` (a new reference), or NULL: by type along the MRO first, then by module
 * name, the longest dotted prefix of tp.__module__ first. Lookup failures count as "none". */
static PyObject *provider_lookup(dlspy_state *st, PyTypeObject *tp) {
  if (st->providers == NULL || PyDict_GET_SIZE(st->providers) == 0)
    return NULL;
  PyObject *mro = tp->tp_mro;
  for (Py_ssize_t i = 0; mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
    PyObject *fn = PyDict_GetItemWithError(st->providers, PyTuple_GET_ITEM(mro, i));
    if (fn != NULL)
      return Py_NewRef(fn);
    if (PyErr_Occurred())
      PyErr_Clear();
  }
  PyObject *mod = NULL;
  if (dlspy_getattr_opt((PyObject *)tp, st->s_module, &mod) < 0)
    PyErr_Clear();
  if (mod == NULL || !PyUnicode_Check(mod)) {
    Py_XDECREF(mod);
    return NULL;
  }
  PyObject *fn = NULL;
  PyObject *name = Py_NewRef(mod);
  while (name != NULL && fn == NULL) {
    fn = PyDict_GetItemWithError(st->providers, name);
    if (fn != NULL) {
      Py_INCREF(fn);
      break;
    }
    PyErr_Clear();
    Py_ssize_t dot = PyUnicode_FindChar(name, '.', 0, PyUnicode_GET_LENGTH(name), -1);
    PyObject *shorter = dot > 0 ? PyUnicode_Substring(name, 0, dot) : NULL;
    if (shorter == NULL)
      PyErr_Clear();
    Py_DECREF(name);
    name = shorter;
  }
  Py_XDECREF(name);
  Py_DECREF(mod);
  return fn;
}

PyObject *dlspy_mod_register_stream_provider(PyObject *m, PyObject *const *args, Py_ssize_t nargs,
                                             PyObject *kwnames) {
  static const char pycall[] = "register_stream_provider";
  dlspy_state *st = dlspy_state_of_module(m);
  static const char *const names[] = {"type_or_module_name", "fn", NULL};
  PyObject *a[2];
  if (dlspy_parse_kw(st, pycall, args, nargs, kwnames, names, 2, a) != 0)
    return NULL;
  if (a[0] == NULL || a[1] == NULL)
    return dlspy_type_error(st, "%s() takes type_or_module_name and fn", pycall);
  PyObject *key = a[0], *fn = a[1];
  if (!PyType_Check(key) && !PyUnicode_Check(key))
    return dlspy_type_error(st, "%s(type_or_module_name=%R): expected a type or a module name such as 'cupy'", pycall,
                            key);
  if (PyUnicode_Check(key) && PyUnicode_GET_LENGTH(key) == 0)
    return dlspy_raisef(st, DLS_ERR_INVALID_ARGUMENT, "%s(type_or_module_name=''): the module name is empty", pycall);
  if (fn != Py_None && !PyCallable_Check(fn))
    return dlspy_type_error(st, "%s(fn=%R): expected a callable fn(tensor) -> stream or None, or None to remove",
                            pycall, fn);
  if (st->providers == NULL && (st->providers = PyDict_New()) == NULL)
    return NULL;
  if (fn == Py_None) {
    if (PyDict_DelItem(st->providers, key) != 0) {
      if (!PyErr_ExceptionMatches(PyExc_KeyError))
        return NULL;
      PyErr_Clear();
    }
  } else if (PyDict_SetItem(st->providers, key, fn) != 0) {
    return NULL;
  }
  dlspy_type_cache_clear(st); /* the next lookup of every type sees the change */
  Py_RETURN_NONE;
}

PyObject *dlspy_mod_stream_providers(PyObject *m, PyObject *unused) {
  dlspy_state *st = dlspy_state_of_module(m);
  return st->providers ? PyDict_Copy(st->providers) : PyDict_New();
}

int dlspy_provider_stream(dlspy_state *st, PyObject *provider, PyObject *obj, DLDevice home, const char *pycall,
                          const char *argname, dls_stream_t *out) {
  out->id = 0;
  Py_INCREF(provider); /* the call may re-register and drop the cache's reference */
  PyObject *r = PyObject_CallOneArg(provider, obj);
  Py_DECREF(provider);
  if (r == NULL)
    return -1;
  if (r == Py_None) {
    Py_DECREF(r);
    return 0;
  }
  char arg[64];
  snprintf(arg, sizeof arg, "stream provider's result for %s", argname);
  int rc = dlspy_stream_resolve(st, r, home, pycall, arg, out);
  if (rc == 0) {
    DLDevice sd;
    dls_status_t s = dls_stream_device(*out, &sd);
    if (s != DLS_OK) {
      dlspy_raise(st, s, pycall);
      rc = -1;
    } else if (sd.device_type != home.device_type || sd.device_id != home.device_id) {
      char x[32], y[32];
      dlspy_raisef(st, DLS_ERR_INVALID_DEVICE,
                   "%s(%s): the stream provider of %s returned %R, a stream of %s, for a tensor on %s", pycall,
                   argname, Py_TYPE(obj)->tp_name, r, dls_device_str(sd, x, sizeof x),
                   dls_device_str(home, y, sizeof y));
      rc = -1;
    }
  }
  if (rc != 0)
    out->id = 0;
  Py_DECREF(r);
  return rc;
}

/* ---- the cache ---- */

const dlspy_type_entry *dlspy_type_info_new(dlspy_state *st, PyTypeObject *tp) {
  const DLPackExchangeAPI *api = NULL;
  PyObject *names[] = {st->s_xapi, st->s_xapi_old};
  for (int k = 0; k < 2 && api == NULL; k++) {
    PyObject *v = NULL;
    if (dlspy_getattr_opt((PyObject *)tp, names[k], &v) < 0)
      PyErr_Clear();
    if (v != NULL) {
      api = xapi_from_value(v);
      Py_DECREF(v);
    }
  }
  PyObject *provider = provider_lookup(st, tp);
  int kind = PyType_IsSubtype(tp, st->TensorType) ? DLSPY_KIND_TENSOR
             : api != NULL                        ? DLSPY_KIND_XAPI
             : dlspy_cupy_type(st, tp, provider)  ? DLSPY_KIND_CUPY
                                                  : DLSPY_KIND_OTHER;
  int slot;
  if (st->types_n < DLSPY_TYPE_CACHE) {
    slot = st->types_n++;
  } else {
    slot = st->types_next;
    st->types_next = (st->types_next + 1) % DLSPY_TYPE_CACHE;
    Py_CLEAR(st->types[slot].type);
    Py_CLEAR(st->types[slot].provider);
  }
  Py_INCREF(tp);
  st->types[slot].type = tp;
  st->types[slot].kind = kind;
  st->types[slot].api = api;
  st->types[slot].provider = provider;
  st->types[slot].cai_skip = false;
  return &st->types[slot];
}

void dlspy_type_skip_cai(dlspy_state *st, PyTypeObject *tp) {
  for (int i = 0; i < st->types_n; i++)
    if (st->types[i].type == tp)
      st->types[i].cai_skip = true;
}

void dlspy_type_cache_clear(dlspy_state *st) {
  for (int i = 0; i < st->types_n; i++) {
    Py_CLEAR(st->types[i].type);
    Py_CLEAR(st->types[i].provider);
  }
  st->types_n = 0;
  st->types_next = 0;
}

PyObject *dlspy_mod_set_cupy_provider(PyObject *m, PyObject *fn) {
  dlspy_state *st = dlspy_state_of_module(m);
  Py_XSETREF(st->cupy_provider, fn == Py_None ? NULL : Py_NewRef(fn));
  dlspy_type_cache_clear(st);
  Py_RETURN_NONE;
}
