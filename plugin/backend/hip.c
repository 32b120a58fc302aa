/* SPDX-License-Identifier: Apache-2.0 */
/* The HIP backend's placeholder: finds libamdhip64 and reports that this build does not drive it yet.
 *
 * Every method but the probe is NULL; the runtime never calls them because
 * the probe always fails with a message saying what was found. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "backend/backend.h"
#include "core/error.h"

static pthread_once_t dls__hip_once = PTHREAD_ONCE_INIT;
static char dls__hip_message[512];

static void dls__hip_load(void) {
  static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
  char why[256] = "";
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) {
      snprintf(dls__hip_message, sizeof dls__hip_message,
               "hip backend: %s found, but the HIP backend is not implemented in this build. Use the CUDA "
               "backend (kDLCUDA) or the CPU backend (kDLCPU).",
               names[i]);
      dlclose(lib);
      return;
    }
    const char *e = dlerror(); /* the next dlopen overwrites it */
    if (why[0] == '\0' && e != NULL)
      snprintf(why, sizeof why, "%s", e);
  }
  snprintf(dls__hip_message, sizeof dls__hip_message,
           "hip backend: libamdhip64.so not found (dlopen: %s). Install ROCm, or use the CPU backend (kDLCPU).",
           why[0] != '\0' ? why : "no reason given");
}

static dls_status_t dls__hip_probe(void) {
  pthread_once(&dls__hip_once, dls__hip_load);
  return dls__fail(DLS_ERR_UNAVAILABLE, "%s", dls__hip_message);
}

static dls_status_t dls__hip_device_count(int *out_count) {
  *out_count = 0; /* unavailable is not an error here */
  return DLS_OK;
}

const dls__backend dls__hip_backend = {
    .version = DLS__BACKEND_VERSION,
    .size = sizeof(dls__backend),
    .name = "hip",
    .device_type = kDLROCM,
    .probe = dls__hip_probe,
    .device_count = dls__hip_device_count,
};
