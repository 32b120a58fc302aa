/* SPDX-License-Identifier: Apache-2.0 */
/* A call of the extension: its arguments in messages, the frameworks' current streams it asks (exchange-API
 * frameworks, CuPy), the producers it orders after, and what it does once its work is queued (posts: objects kept
 * until the stream passes, staged arrays copied back, uses recorded). */
#include "call.h"

#include <string.h>

#include "block.h"

#include "cupy.h"
#include "../errors.h"
#include "protocol.h"
#include "streamarg.h"
#include "tensortypes.h"

const dlspy_call_desc dlspy_call_plain = {NULL, 0, false, DLSPY_HINT_WRITES, NULL};

#define DLSPY_U {.lo = 1, .hi = 0}
#define DLSPY_U8 DLSPY_U, DLSPY_U, DLSPY_U, DLSPY_U, DLSPY_U, DLSPY_U, DLSPY_U, DLSPY_U
const dls__ext_extent dlspy_unknown_extents[DLS_MAX_ARGS] = {DLSPY_U8, DLSPY_U8, DLSPY_U8, DLSPY_U8,
                                                             DLSPY_U8, DLSPY_U8, DLSPY_U8, DLSPY_U8};
#undef DLSPY_U8
#undef DLSPY_U
_Static_assert(DLS_MAX_ARGS == 64, "dlspy_unknown_extents has 64 entries");

void dlspy_call_extents_init(dlspy_call *c) {
  memcpy(c->extents, dlspy_unknown_extents, (size_t)c->nextents * sizeof c->extents[0]);
  c->extents_set = true;
}

const char *dlspy_desc_argname(const dlspy_call_desc *desc, int index, char *buf, size_t size) {
  const char *const *names = desc->names;
  if (names != NULL && index >= 0) {
    int i = 0;
    while (names[i] != NULL && i < index)
      i++;
    if (i == index && names[i] != NULL)
      return names[i];
  }
  snprintf(buf, size, "args[%d]", index);
  return buf;
}

const char *dlspy_argname(const dlspy_call *c, int index, char *buf, size_t size) {
  if (c->searching) { /* the stream search names an argument by its place in the table */
    snprintf(buf, size, "args[%d]", index - c->desc->base);
    return buf;
  }
  return dlspy_desc_argname(c->desc, index, buf, size);
}

void dlspy_call_note_cause(dlspy_call *c) {
  PyObject *value = dlspy_take_exception();
  c->more = true;
  if (c->cause == NULL)
    c->cause = value; /* the first one: later ones are usually its consequences */
  else
    Py_XDECREF(value);
}

int dlspy_call_not_tensor(dlspy_call *c, PyObject *obj, int index, const char *what) {
  char b[24];
  if (c->cause != NULL && !PyErr_Occurred()) {
    PyObject *cause = c->cause;
    c->cause = NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(cause), cause); /* chained by the raise below */
    Py_DECREF(cause);
  }
  dlspy_type_error(c->st, "%s(%s=%R): expected %s", c->pycall, dlspy_argname(c, index, b, sizeof b), obj, what);
  return -1;
}

int dlspy_keep_until(dlspy_state *st, dls__stream *s, PyObject *obj) {
  Py_INCREF(obj);
  dls__ext_release_after(s, dlspy_release_pyobject, obj);
  return 0;
}

int dlspy_add_post(dlspy_call *c, int kind, PyObject *obj, void *managed) {
  bool use = kind == DLSPY_POST_USE;
  if (c->nposts == DLSPY_MAX_POSTS || (use && c->nquick + c->nuse_posts >= DLSPY_MAX_USES)) {
    dlspy_raisef(c->st, DLS_ERR_INVALID_ARGUMENT, "%s: more than %d tensor arguments%s", c->pycall, DLS_MAX_ARGS,
                 use ? " (or uses of recorded memory: a tensor over several records is a use of each)" : "");
    return -1;
  }
  dlspy_post *p = &c->posts[c->nposts++];
  c->more = true;
  p->kind = kind;
  p->obj = obj;
  p->managed = managed;
  p->tmp = NULL;
  p->buf = NULL;
  p->ordered = false;
  p->epoch = 0;
  c->nuse_posts += use;
  return 0;
}

int dlspy_framework_stream_ask(dlspy_call *c, const DLPackExchangeAPI *api, DLDevice dev, dls__stream **out) {
  dlspy_stream_question q = {.kind = DLSPY_KIND_XAPI, .api = api, .dev = dev};
  if (!dls__ext_home(dev, &q.home))
    q.home = dev;
  dls_stream_t h;
  if (dlspy_current_stream(c->st, c->pycall, &q, &h, out) != 0)
    return -1;
  dlspy_call_set_current(c, api, dev, *out, h);
  return 0;
}

int dlspy_launch_value(dlspy_call *c, PyObject **out) {
  if (!c->have_value) {
    dls_status_t rc = dls_dlpack_stream_value(c->stream, &c->dlpack_value);
    if (rc != DLS_OK) {
      dlspy_raise(c->st, rc, c->pycall);
      return -1;
    }
    c->have_value = true;
  }
  *out = PyLong_FromLongLong(c->dlpack_value);
  return *out ? 0 : -1;
}

/* Notes the quick uses and every USE post's use of the work queued on `s`, in one pass (one event recorded for all;
 * *marked: `s`'s mark when that was it, which the call's releases then share). The quick list is taken as it is when
 * no post is a USE post. 0, or -1 with an exception. */
static int end_uses(dlspy_call *c, dls__stream *s, const void **marked) {
  dls__buffer *all_bufs[DLSPY_MAX_POSTS]; /* (dlspy_call_record_use may make a HOLD post a USE one past the count) */
  int all_modes[DLSPY_MAX_POSTS];
  uint32_t all_epochs[DLSPY_MAX_POSTS];
  dls__buffer **bufs = c->quick_buf;
  int *modes = c->quick_mode;
  uint32_t *epochs = c->quick_epoch;
  int n = c->nquick;
  if (DLSPY_LIKELY(c->nuse_posts == 0))
    goto note;
  bufs = all_bufs; /* the quick ones first, then the posts' */
  modes = all_modes;
  epochs = all_epochs;
  memcpy(bufs, c->quick_buf, (size_t)n * sizeof bufs[0]);
  memcpy(modes, c->quick_mode, (size_t)n * sizeof modes[0]);
  memcpy(epochs, c->quick_epoch, (size_t)n * sizeof epochs[0]);
  for (int i = 0; i < c->nposts; i++) {
    const dlspy_post *p = &c->posts[i];
    if (p->kind != DLSPY_POST_USE)
      continue;
    bufs[n] = p->buf;
    modes[n] = p->ordered ? p->mode : p->mode | DLS__EXT_ACCESS_DECLARED; /* work that was not ordered first */
    epochs[n++] = p->epoch;
  }
note:
  if (n == 0)
    return 0;
  if (c->in_block && c->block == NULL)
    c->block = dlspy_block_of(c->st, c->stream);
  dls_status_t rc = c->block != NULL ? dlspy_block_note(c->block, s, bufs, modes, epochs, n) /* the mark owed */
                                     : dls__ext_uses_note(s, bufs, modes, epochs, n, c->nuse_posts == 0, marked);
  if (rc == DLS_OK)
    return 0;
  dlspy_raise(c->st, DLS_ERR_BACKEND, c->pycall);
  return -1;
}

/* The KEEP post i, once the work was queued on `s` (`marked`: a mark recorded after it, or NULL): its object is let
 * go of once `s` passes; the objects of every KEEP post after it go with it, in one release (a tuple of them; each
 * post's reference stolen). */
static void keep_after(dlspy_call *c, dls__stream *s, int i, const void *marked) {
  int n = 0;
  for (int k = i; k < c->nposts; k++)
    n += c->posts[k].kind == DLSPY_POST_KEEP;
  PyObject *all = n > 1 ? PyTuple_New(n) : NULL;
  if (all == NULL) { /* one, or no memory for the tuple: one at a time */
    dls__ext_release_marked(s, marked, dlspy_release_pyobject, c->posts[i].obj);
    c->posts[i].kind = 0;
    return;
  }
  for (int k = i, j = 0; k < c->nposts; k++) {
    if (c->posts[k].kind == DLSPY_POST_KEEP) {
      PyTuple_SET_ITEM(all, j++, c->posts[k].obj);
      c->posts[k].kind = 0; /* done */
    }
  }
  dls__ext_release_marked(s, marked, dlspy_release_pyobject, all);
}

int dlspy_call_end_slow(dlspy_call *c, bool ok) {
  dlspy_state *st = c->st;
  int result = 0;
  dls__stream *s = c->s;
  dlspy_cai_clear(&c->cai);
  c->cai_index = -1;
  Py_CLEAR(c->cause);
  if (c->cur_ref != NULL)
    dls__ext_stream_unref(c->cur_ref);
  c->cur_ref = NULL;
  if (s == NULL) {
    Py_CLEAR(c->block); /* (none without a stream: a block's posts come after it) */
    return 0;
  }
  /* Staged host arrays: copy back, then wait (interruptibly) until the stream has passed. An interrupted wait
   * leaves the copies queued: the host arrays are then kept like any borrowed object, until the stream passes. */
  bool queued = ok;
  if (c->staged) {
    dls_status_t rc = DLS_OK;
    for (int i = 0; i < c->nposts && ok; i++) {
      dlspy_post *p = &c->posts[i];
      if (p->kind == DLSPY_POST_STAGE && p->copy_back && p->tmp != NULL && rc == DLS_OK)
        rc = dls__ext_stage_out(s, p->tmp, p->host_lo, p->span);
    }
    if (rc != DLS_OK && ok) {
      dlspy_raise(st, rc, c->pycall);
      result = -1;
    }
    queued = true; /* the copies in may be queued even when the launch was refused */
    if (dlspy_core_stream_wait(st, c->pycall, s) == 0)
      queued = false;
    else if (result == 0)
      result = -1;
    else
      PyErr_Clear(); /* the first failure says more */
  }
  /* Each framework stream the call ordered after waits for the call's work in turn: the framework's next work
   * on its tensors cannot overtake what the call read or wrote (the hazard rule, across frameworks). */
  for (int i = 0; i < c->nordered; i++) {
    if (ok && dls__ext_hazards_on()) {
      dls_status_t rc = dls__stream_order(c->ordered[i], s);
      if (rc != DLS_OK && result == 0) {
        dlspy_raise(st, rc, c->pycall);
        result = -1;
      }
    }
    dls__ext_stream_unref(c->ordered[i]);
  }
  c->nordered = 0;
  const void *marked = NULL;
  if (ok && end_uses(c, s, &marked) != 0 && result == 0)
    result = -1;
  for (int i = 0; i < c->nquick && !ok; i++) /* in flight, unheld: let go of by their note, else here */
    dls__ext_use_unordered(c->quick_buf[i], c->quick_epoch[i]);
  c->nquick = 0;
  c->nuse_posts = 0;
  for (int i = 0; i < c->nposts; i++) {
    dlspy_post *p = &c->posts[i];
    switch (p->kind) {
    case DLSPY_POST_KEEP:
      if (ok)
        keep_after(c, s, i, marked); /* steals */
      else
        Py_DECREF(p->obj);
      break;
    case DLSPY_POST_MANAGED_V:
    case DLSPY_POST_MANAGED_L: {
      bool v = p->kind == DLSPY_POST_MANAGED_V;
      if (ok)
        dls__ext_release_marked(s, marked, v ? dlspy_release_managed_v : dlspy_release_managed_l, p->managed);
      else
        dlspy_managed_release(p->managed, v);
      break;
    }
    case DLSPY_POST_STAGE:
      if (p->tmp != NULL)
        dls__buffer_unref(p->tmp); /* stream-ordered free on the launch stream */
      if (queued && p->managed != NULL)
        dls__ext_release_after(s, p->release_kind == DLSPY_POST_MANAGED_V ? dlspy_release_managed_v : dlspy_release_managed_l, p->managed);
      else
        dlspy_managed_release(p->managed, p->release_kind == DLSPY_POST_MANAGED_V);
      break;
    case DLSPY_POST_USE: /* noted by end_uses */
      if (!ok)
        dls__ext_use_unordered(p->buf, p->epoch);
      dls__buffer_unref(p->buf);
      break;
    case DLSPY_POST_HOLD:
      dls__buffer_unref(p->buf);
      break;
    case DLSPY_POST_BLOCK:
      if (ok)
        dlspy_block_keep(c->block, s, p->obj); /* steals */
      else
        Py_DECREF(p->obj);
      break;
    }
  }
  c->nposts = 0;
  Py_CLEAR(c->block);
  if (c->temp_handle != 0)
    dls__ext_stream_temp_end(c->temp_handle); /* it lets go of our reference */
  else if (c->counted)
    dls__ext_stream_unref(s);
  c->temp_handle = 0;
  c->s = NULL;
  return result;
}

int dlspy_xapi_failed(dlspy_state *st, const char *pycall, const char *arg) {
  if (!PyErr_Occurred()) /* else the framework's own exception goes on as it is */
    dlspy_raisef(st, DLS_ERR_INVALID_TENSOR, "%s(%s): the framework could not describe the tensor", pycall, arg);
  return -1;
}

int dlspy_read_only(dlspy_call *c, int index, const char *how) {
  const char *arg = DLSPY_ARG(c, index);
  if (c->desc->hint == DLSPY_HINT_NO_SIGNATURE)
    dlspy_raisef(c->st, DLS_ERR_READ_ONLY,
                 "%s(%s): the tensor is read-only%s, but a kernel without a signature may write every tensor "
                 "argument; if it only reads this one, give Module.function(name, signature=...) with 'cp' for it",
                 c->pycall, arg, how);
  else if (c->desc->hint == DLSPY_HINT_SIGNATURE)
    dlspy_raisef(c->st, DLS_ERR_READ_ONLY,
                 "%s(%s): the tensor is read-only%s, but the signature declares %s 'p' (written); declare it 'cp' if "
                 "the kernel only reads it",
                 c->pycall, arg, how, arg);
  else
    dlspy_raisef(c->st, DLS_ERR_READ_ONLY, "%s(%s): the tensor is read-only%s and %s writes it", c->pycall, arg, how,
                 c->desc->writer ? c->desc->writer : c->pycall);
  return -1;
}

/* A tensor of another framework used on the call's stream: unless `producer` is that stream, the call's stream
 * waits for the work queued on `producer` (once per producer; NULL: no producer to wait for), `producer` waits
 * for the call's work once it is queued (dlspy_call_end: the framework's next work, a read or a write, cannot
 * overtake the call's reads or writes), and `obj` is held until the call's stream passes (its framework frees in
 * order on its own stream, not ours; in a block, also when `producer` is the call's stream). */
int dlspy_block_post(dlspy_call *c, PyObject *obj) {
  if (c->block == NULL)
    c->block = dlspy_block_of(c->st, c->stream);
  int kind = c->block != NULL ? DLSPY_POST_BLOCK : DLSPY_POST_KEEP;
  if (dlspy_add_post(c, kind, Py_NewRef(obj), NULL) != 0) {
    Py_DECREF(obj);
    return -1;
  }
  return 0;
}

int dlspy_order_after(dlspy_call *c, dls__stream *producer, PyObject *obj) {
  if (producer != NULL && dlspy_same_stream(producer, c->s)) {
    if (DLSPY_LIKELY(!c->in_block))
      return 0;
    /* In a block, its stream is the framework's current one: the tensor is kept until that stream passes, so that
     * its framework, which frees in order on the stream the memory came from (perhaps another branch's), cannot
     * hand the memory out again before then; in the block's list, let go of once for all its calls (block.h). */
    return dlspy_block_post(c, obj);
  }
  bool done = producer == NULL;
  for (int i = 0; i < c->nordered && !done; i++)
    done = c->ordered[i] == producer;
  if (!done) {
    if (c->nordered == (int)(sizeof c->ordered / sizeof c->ordered[0])) {
      dlspy_raisef(c->st, DLS_ERR_INVALID_ARGUMENT,
                   "%s: tensors of more than %d framework streams other than the call's; pass stream= one of "
                   "theirs, or fewer",
                   c->pycall, (int)(sizeof c->ordered / sizeof c->ordered[0]));
      return -1;
    }
    dls_status_t rc = dls__stream_order(c->s, producer);
    if (rc != DLS_OK) {
      dlspy_raise(c->st, rc, c->pycall);
      return -1;
    }
    dls__ext_stream_ref(producer); /* Python code later in the call may drop the cache that holds it */
    c->ordered[c->nordered++] = producer;
  }
  if (dlspy_add_post(c, DLSPY_POST_KEEP, Py_NewRef(obj), NULL) != 0) {
    Py_DECREF(obj);
    return -1;
  }
  return 0;
}

int dlspy_call_use(dlspy_call *c, dls__buffer *b, int mode) {
  if (dlspy_add_post(c, DLSPY_POST_USE, NULL, NULL) != 0) {
    dls__buffer_unref(b);
    return -1;
  }
  dlspy_post *p = &c->posts[c->nposts - 1]; /* the end records the use, or only drops `b` if nothing was queued */
  p->buf = b;
  p->mode = mode;
  p->ordered = true;
  dls_status_t rc = dls__ext_use_order(b, c->s, mode, &p->epoch);
  if (rc != DLS_OK) {
    dlspy_raise(c->st, rc, c->pycall);
    return -1;
  }
  return 0;
}

/* Reads obj's __cuda_array_interface__ into `out` when it has one worth reading. Returns 1 when it was read, 0
 * when the object has none (or only a stream-less one while __dlpack__ orders it), -1 with an exception. */
int dlspy_read_cai(dlspy_call *c, PyObject *obj, int index, dlspy_cai *out) {
  dlspy_state *st = c->st;
  if (dlspy_type_info(st, Py_TYPE(obj))->cai_skip)
    return 0;
  PyObject *d = NULL;
  if (dlspy_getattr_opt(obj, st->s_cai, &d) < 0) {
    /* torch raises for host tensors ("Can't get __cuda_array_interface__ on non-CUDA tensor"): the object may still
     * be read another way. What it raised is kept as the cause of an "expected a tensor" refusal. */
    if (!PyErr_ExceptionMatches(PyExc_AttributeError) && !PyErr_ExceptionMatches(PyExc_RuntimeError) &&
        !PyErr_ExceptionMatches(PyExc_TypeError))
      return -1;
    dlspy_call_note_cause(c);
    return 0;
  }
  if (d == NULL)
    return 0;
  int rc = dlspy_cai_read(st, d, dls_cuda(0), c->pycall, DLSPY_ARG(c, index), out);
  Py_DECREF(d);
  if (rc != 0) {
    dlspy_cai_clear(out);
    return -1;
  }
  if (out->version < 3) {
    PyObject *meth = NULL;
    if (dlspy_getattr_opt(obj, st->s_dlpack, &meth) < 0) {
      dlspy_cai_clear(out);
      return -1;
    }
    if (meth != NULL) {
      /* No stream to honour: the DLPack handshake orders it, and the interface is not read again. */
      Py_DECREF(meth);
      dlspy_type_skip_cai(st, Py_TYPE(obj));
      dlspy_cai_clear(out);
      return 0;
    }
  }
  return 1;
}

/* The device of a tensor read through its array interface: its __dlpack_device__ if it has one (the interface
 * names none), else the call's GPU, else rocm:0 on a machine with ROCm devices only, else cuda:0. */
int dlspy_cai_device(dlspy_call *c, PyObject *obj, const DLDevice *call_dev, DLDevice *out) {
  int rc = dlspy_dlpack_device(c->st, obj, c->pycall, out);
  if (rc <= 0)
    return rc;
  DLDevice dflt = dlspy_default_device();
  if (call_dev != NULL && (call_dev->device_type == kDLCUDA || call_dev->device_type == kDLROCM))
    *out = *call_dev;
  else
    *out = dflt.device_type == kDLROCM ? dflt : dls_cuda(0);
  return 0;
}

int dlspy_cupy_stream(dlspy_call *c, DLDevice home, dls__stream **out) {
  dlspy_state *st = c->st;
  if (c->cur_api == &st->cupy && dlspy_same_device(c->cur_dev, home)) {
    *out = c->cur_stream;
    return 0;
  }
  dlspy_stream_question q = {.kind = DLSPY_KIND_CUPY, .dev = home, .home = home};
  dls_stream_t h;
  int rc = dlspy_current_stream(st, c->pycall, &q, &h, out);
  if (rc != 0)
    return rc;
  dlspy_call_set_current(c, &st->cupy, home, *out, h);
  return 0;
}
