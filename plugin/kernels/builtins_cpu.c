/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU twins of the built-in kernels; argument lists match builtins.cu. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "dlstream/builtin.h"

DLS__INTERNAL dls_host_kernel dls__cpu_builtin(const char *name);

#define ARG(type, i) (*(type *)args[i])

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int k_fill(const dls_launch_config_t *cfg, void *const *args, int n) {
  unsigned char *dst = ARG(void *, 0);
  uint64_t count = ARG(uint64_t, 1);
  uint32_t size = ARG(uint32_t, 2);
  uint64_t pattern = ARG(uint64_t, 3);
  switch (size) {
  case 1: memset(dst, (int)(pattern & 0xff), count); break;
  case 2: for (uint64_t i = 0; i < count; i++) ((uint16_t *)dst)[i] = (uint16_t)pattern; break;
  case 4: for (uint64_t i = 0; i < count; i++) ((uint32_t *)dst)[i] = (uint32_t)pattern; break;
  case 8: for (uint64_t i = 0; i < count; i++) ((uint64_t *)dst)[i] = pattern; break;
  default: return 1;
  }
  return 0;
}

static int k_axpy_f32(const dls_launch_config_t *cfg, void *const *args, int n) {
  uint64_t count = ARG(uint64_t, 0);
  float a = ARG(float, 1);
  const float *x = ARG(const float *, 2);
  float *y = ARG(float *, 3);
  for (uint64_t i = 0; i < count; i++)
    y[i] = a * x[i] + y[i];
  return 0;
}

static int k_axpy_f64(const dls_launch_config_t *cfg, void *const *args, int n) {
  uint64_t count = ARG(uint64_t, 0);
  double a = ARG(double, 1);
  const double *x = ARG(const double *, 2);
  double *y = ARG(double *, 3);
  for (uint64_t i = 0; i < count; i++)
    y[i] = a * x[i] + y[i];
  return 0;
}

static int k_copy_strided(const dls_launch_config_t *cfg, void *const *args, int n) {
  unsigned char *dst = ARG(void *, 0);
  const unsigned char *src = ARG(const void *, 1);
  const dls_copy_desc_t *d = (const dls_copy_desc_t *)args[2];
  uint64_t total = 1;
  for (uint32_t i = 0; i < d->ndim; i++)
    total *= (uint64_t)d->shape[i];
  int64_t idx[DLS_COPY_MAX_DIMS] = {0};
  int64_t so = 0, dof = 0; /* element offsets of the current index */
  for (uint64_t k = 0; k < total; k++) {
    memcpy(dst + dof * (int64_t)d->elem_size, src + so * (int64_t)d->elem_size, d->elem_size);
    /* Odometer step: the innermost dimension moves fastest. */
    for (int i = (int)d->ndim - 1; i >= 0; i--) {
      if (++idx[i] < d->shape[i]) {
        so += d->src_strides[i];
        dof += d->dst_strides[i];
        break;
      }
      so -= (idx[i] - 1) * d->src_strides[i];
      dof -= (idx[i] - 1) * d->dst_strides[i];
      idx[i] = 0;
    }
  }
  return 0;
}

static int k_spin(const dls_launch_config_t *cfg, void *const *args, int n) {
  uint64_t ns = ARG(uint64_t, 0);
  uint64_t start = now_ns();
  while (now_ns() - start < ns) {
  }
  return 0;
}

static int k_latch(const dls_launch_config_t *cfg, void *const *args, int n) {
  uint32_t *flag = ARG(uint32_t *, 0);
  uint64_t timeout = ARG(uint64_t, 1);
  uint32_t *timed_out = ARG(uint32_t *, 2);
  uint64_t start = now_ns();
  /* Polls with a short sleep: the flag is plain memory shared with GPUs'
   * twin of this kernel, so there is no condition variable to wait on. */
  struct timespec pause = {0, 20000};
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0) {
    if (now_ns() - start >= timeout) {
      __atomic_store_n(timed_out, 1u, __ATOMIC_RELEASE);
      return 0;
    }
    nanosleep(&pause, NULL);
  }
  return 0;
}

static int k_empty(const dls_launch_config_t *cfg, void *const *args, int n) { return 0; }

dls_host_kernel dls__cpu_builtin(const char *name) {
  static const struct {
    const char *name;
    dls_host_kernel fn;
  } table[] = {
      {"dls_fill", k_fill},   {"dls_axpy_f32", k_axpy_f32}, {"dls_axpy_f64", k_axpy_f64},
      {"dls_copy_strided", k_copy_strided}, {"dls_spin", k_spin}, {"dls_latch", k_latch}, {"dls_empty", k_empty},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].name, name) == 0)
      return table[i].fn;
  return NULL;
}
