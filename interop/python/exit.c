/* SPDX-License-Identifier: Apache-2.0 */
/* The atexit hook: runs the releases Python can still take and tears the runtime down, within a bound. Work still
 * queued at exit (a long kernel, a stream held by a latch) is waited for up to DLSTREAM_EXIT_TIMEOUT seconds; past
 * that it is abandoned with a RuntimeWarning naming the busy streams, the runtime is left as it is (the process is
 * ending) and the interpreter exits. */
#include "call/streamarg.h"
#include "call/tensortypes.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXIT_TIMEOUT_DEFAULT 5.0
#define BUSY_MAX 8 /* streams named in the warning; more are counted */

/* The bound in seconds: DLSTREAM_EXIT_TIMEOUT (0: do not wait; negative or "inf": no bound), else 5. */
static double exit_timeout(void) {
  const char *v = getenv("DLSTREAM_EXIT_TIMEOUT");
  if (v == NULL || *v == '\0')
    return EXIT_TIMEOUT_DEFAULT;
  char *end = NULL;
  double t = strtod(v, &end);
  if (end == v || *end != '\0' || t != t)
    return EXIT_TIMEOUT_DEFAULT;
  return t < 0 ? 1e300 : t;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the streams dlstream knows that still have work ---- */

typedef struct busy_set {
  dls__ext_busy s[BUSY_MAX];
  int n, more;
} busy_set;

static void collect(busy_set *b) { b->n = dls__ext_busy_streams(b->s, BUSY_MAX, &b->more); }

/* "cpu:0 legacy default stream, cuda:0 owned stream 0x..." */
static PyObject *busy_names(const busy_set *b) {
  char text[BUSY_MAX * 80 + 64];
  size_t n = 0;
  for (int i = 0; i < b->n && n < sizeof text; i++)
    n += (size_t)snprintf(text + n, sizeof text - n, "%s%s %s stream %p", i ? ", " : "", b->s[i].device,
                          b->s[i].what, b->s[i].native);
  if (b->more && n < sizeof text)
    snprintf(text + n, sizeof text - n, " and %d more", b->more);
  return PyUnicode_FromString(text);
}

/* ---- shutdown on a thread of its own, so that waiting for it has a bound ---- */

typedef struct shutdown_job {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  bool abandoned; /* the hook gave up waiting: the thread frees the job */
} shutdown_job;

static void *shutdown_thread(void *arg) {
  shutdown_job *j = arg;
  (void)dls_shutdown();
  pthread_mutex_lock(&j->mu);
  j->done = true;
  bool abandoned = j->abandoned;
  pthread_cond_signal(&j->cv);
  pthread_mutex_unlock(&j->mu);
  if (abandoned)
    free(j);
  return NULL;
}

/* Runs dls_shutdown(), waiting for it up to `timeout` seconds: true when it finished. */
static bool bounded_shutdown(double timeout) {
  shutdown_job *j = calloc(1, sizeof *j);
  if (j == NULL) {
    (void)dls_shutdown();
    return true;
  }
  pthread_mutex_init(&j->mu, NULL);
  pthread_cond_init(&j->cv, NULL);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &attr, shutdown_thread, j);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    free(j);
    (void)dls_shutdown();
    return true;
  }
  double deadline = now_s() + timeout;
  bool done;
  /* The GIL is let go: the releases dls_shutdown runs take it. */
  Py_BEGIN_ALLOW_THREADS
  pthread_mutex_lock(&j->mu);
  while (!j->done) {
    double left = deadline - now_s();
    if (left <= 0)
      break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double slice = left < 0.05 ? left : 0.05;
    ts.tv_sec += (time_t)slice;
    ts.tv_nsec += (long)((slice - (double)(time_t)slice) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    (void)pthread_cond_timedwait(&j->cv, &j->mu, &ts);
  }
  done = j->done;
  j->abandoned = !done;
  pthread_mutex_unlock(&j->mu);
  Py_END_ALLOW_THREADS
  if (done) {
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
  }
  return done;
}

/* ---- the hook ---- */

static PyObject *abandon(dlspy_state *st, PyObject *what, double timeout) {
  atomic_store(&dlspy_dead, DLSPY_DEAD); /* from now on releases leak and deallocators leave the runtime alone */
  dlspy_type_cache_clear(st);
  PyObject *exc_type = NULL, *exc = NULL, *tb = NULL;
  PyErr_Fetch(&exc_type, &exc, &tb); /* a Ctrl-C that cut the wait short goes on after the warning */
  char secs[32];
  snprintf(secs, sizeof secs, "%.1f", timeout);
  int rc = PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                            "dlstream: at interpreter exit, work was still queued on %U; it was abandoned after "
                            "waiting %s s (DLSTREAM_EXIT_TIMEOUT) and the runtime was left as it is",
                            what, secs);
  if (exc_type != NULL) {
    if (rc != 0)
      PyErr_Clear();
    PyErr_Restore(exc_type, exc, tb);
    return NULL;
  }
  return rc == 0 ? Py_NewRef(Py_None) : NULL;
}

PyObject *dlspy_mod_shutdown(PyObject *m, PyObject *unused) {
  dlspy_state *st = dlspy_state_of_module(m);
  if (atomic_load(&dlspy_dead) != DLSPY_ALIVE)
    Py_RETURN_NONE;
  /* The wrappers first, so that shutdown finds nothing of ours. */
  dlspy_stream_cache_clear(st);
  double timeout = exit_timeout();
  if (!dls__ext_ready()) {
    atomic_store(&dlspy_dead, DLSPY_DEAD);
    dlspy_type_cache_clear(st);
    Py_RETURN_NONE;
  }
  /* Wait for the work dlstream can name, with the GIL let go between looks; a Ctrl-C stops the wait. */
  double start = now_s();
  busy_set busy;
  bool interrupted = false;
  for (;;) {
    (void)dls_deferred_poll(); /* releases whose streams passed: while Python can still take them */
    collect(&busy);
    if (busy.n == 0 || now_s() - start >= timeout)
      break;
    struct timespec ts = {0, 10000000L};
    Py_BEGIN_ALLOW_THREADS
    nanosleep(&ts, NULL);
    Py_END_ALLOW_THREADS
    if (PyErr_CheckSignals() != 0) {
      interrupted = true;
      collect(&busy);
      break;
    }
  }
  if (busy.n > 0) {
    PyObject *what = busy_names(&busy);
    PyObject *r = what ? abandon(st, what, now_s() - start) : NULL;
    Py_XDECREF(what);
    return r;
  }
  if (interrupted)
    PyErr_Clear(); /* nothing left to wait for: the Ctrl-C came too late to matter */
  atomic_store(&dlspy_dead, DLSPY_CLOSING);
  /* Leave the runtime be (the process is ending; nothing is freed) when a daemon thread is still inside a
   * GIL-free call, or when exported tensors are alive: their memory holds streams whose CPU workers dls_shutdown()
   * would wait for forever (see the report on interop/dlpack). Otherwise tear it down, within the bound: work on
   * streams already closed (no handle names them) can still hold it up. */
  if (atomic_load(&dlspy_nogil_calls) == 0 && dls__ext_exports_live() == 0 &&
      !bounded_shutdown(timeout > 1.0 ? timeout : 1.0)) {
    PyObject *what = PyUnicode_FromString("streams that were already closed (no handle names them any more)");
    PyObject *r = what ? abandon(st, what, timeout > 1.0 ? timeout : 1.0) : NULL;
    Py_XDECREF(what);
    return r;
  }
  atomic_store(&dlspy_dead, DLSPY_DEAD);
  dlspy_type_cache_clear(st);
  Py_RETURN_NONE;
}
