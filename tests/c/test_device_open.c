/* SPDX-License-Identifier: Apache-2.0 */
/* A device's first open loads the built-in kernels (core/device.c) before dlstream queues anything there: a real
 * driver's module load may wait for the device to drain, and behind work that waits for the host (a latch, another
 * process's event) that wait would last until the work passed. A second thread opening the same device while the
 * first was still loading found it ready and queued work behind the load's back.
 *
 * Runs on the null CUDA driver (bench/null_driver.c, through LD_LIBRARY_PATH: CMakeLists.txt), whose gate parks a
 * module load until the test opens it and counts the work queued meanwhile. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common.h"

TestSuite(device_open);

typedef struct opener {
  dls_status_t st;
  _Atomic bool done;
  bool queue; /* queue work once the device is open: a stream, a record, a wait */
} opener;

static void *open_device(void *arg) {
  opener *o = arg;
  DLDevice d = dls_device(kDLCUDA, 0);
  dls_stream_t s;
  dls_event_t e;
  o->st = dls_stream_create(d, NULL, &s);
  if (o->st == DLS_OK && o->queue && (o->st = dls_event_create(d, DLS_EVENT_DEFAULT, &e)) == DLS_OK) {
    if ((o->st = dls_event_record(e, s)) == DLS_OK)
      o->st = dls_stream_wait_event(s, e);
    (void)dls_event_destroy(e);
  }
  if (o->st == DLS_OK)
    o->st = dls_stream_destroy(s);
  atomic_store(&o->done, true);
  return NULL;
}

Test(device_open, no_thread_queues_work_before_the_first_open_has_loaded_the_builtins) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  void (*gate)(int) = lib != NULL ? (void (*)(int))dlsym(lib, "dls_null_load_gate") : NULL;
  void (*stats)(int *, unsigned long *) =
      lib != NULL ? (void (*)(int *, unsigned long *))dlsym(lib, "dls_null_gate_stats") : NULL;
  if (gate == NULL || stats == NULL)
    cr_skip_test("libcuda.so.1 is not the null CUDA driver (bench/null_driver): set LD_LIBRARY_PATH to it");
  if (dls_backend_probe(kDLCUDA) != DLS_OK)
    cr_skip_test("%s", dls_last_error());
  gate(1);
  opener first = {.queue = false}, second = {.queue = true};
  pthread_t a, b;
  cr_assert_eq(pthread_create(&a, NULL, open_device, &first), 0);
  int parked = 0;
  unsigned long work = 0;
  while (stats(&parked, &work), parked == 0 && !atomic_load(&first.done))
    sched_yield();
  if (parked == 0) {
    gate(0);
    pthread_join(a, NULL);
    cr_skip_test("the device's open loaded no built-in kernels (built without nvcc?): %s", dls_last_error());
  }
  /* The first open is loading. The second thread's open waits for it: it does not get past it within 2 s (a bound
   * on the negative case only: an open that waits is never seen to fail here). */
  cr_assert_eq(pthread_create(&b, NULL, open_device, &second), 0);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 2;
  bool joined = pthread_timedjoin_np(b, NULL, &until) == 0;
  stats(&parked, &work);
  gate(0);
  pthread_join(a, NULL);
  if (!joined)
    pthread_join(b, NULL);
  cr_assert_eq(first.st, DLS_OK, "the first open: %s", dls_status_name(first.st));
  cr_assert_eq(second.st, DLS_OK, "the second thread: %s", dls_status_name(second.st));
  cr_assert_eq(work, 0, "%lu driver calls queued work on the device while its first open was loading the built-in "
               "kernels (the second thread %s)", work, joined ? "finished meanwhile" : "waited");
}
