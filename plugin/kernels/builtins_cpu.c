/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU twins of the built-in kernels; argument lists match builtins.cu. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "dlstream/builtin.h"
#include "kernels/builtin_table.h"
#include "kernels/convert.h"

DLS__INTERNAL dls_host_kernel dls__cpu_builtin(size_t k);

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

/* y = a * x + y over `count` floats, (n, a, x, y) the arguments (n counts floats, or vectors of 4 in the twin). */
static int axpy_f32_run(void *const *args, uint64_t count) {
  float a = ARG(float, 1);
  const float *x = ARG(const float *, 2);
  float *y = ARG(float *, 3);
  for (uint64_t i = 0; i < count; i++)
    y[i] = a * x[i] + y[i];
  return 0;
}

static int k_axpy_f32(const dls_launch_config_t *cfg, void *const *args, int n) {
  return axpy_f32_run(args, ARG(uint64_t, 0));
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

/* One element of a strided copy: `step` makes the element at `dst` from the one at `src`. */
typedef void elem_step(unsigned char *dst, const unsigned char *src, const void *ctx);

/* Every element of an up-to-8-dimensional view, row-major (an odometer: the innermost dimension moves fastest);
 * strides in elements of `dsize` and `ssize` bytes. */
static void walk(uint32_t ndim, const int64_t *shape, unsigned char *dst, const int64_t *dstr, uint32_t dsize,
                 const unsigned char *src, const int64_t *sstr, uint32_t ssize, elem_step *step, const void *ctx) {
  uint64_t total = 1;
  for (uint32_t i = 0; i < ndim; i++)
    total *= (uint64_t)shape[i];
  int64_t idx[DLS_COPY_MAX_DIMS] = {0};
  int64_t so = 0, dof = 0; /* element offsets of the current index */
  for (uint64_t k = 0; k < total; k++) {
    step(dst + dof * (int64_t)dsize, src + so * (int64_t)ssize, ctx);
    for (int i = (int)ndim - 1; i >= 0; i--) {
      if (++idx[i] < shape[i]) {
        so += sstr[i];
        dof += dstr[i];
        break;
      }
      so -= (idx[i] - 1) * sstr[i];
      dof -= (idx[i] - 1) * dstr[i];
      idx[i] = 0;
    }
  }
}

static void copy_step(unsigned char *dst, const unsigned char *src, const void *ctx) {
  memcpy(dst, src, *(const uint32_t *)ctx);
}

static int k_copy_strided(const dls_launch_config_t *cfg, void *const *args, int n) {
  const dls_copy_desc_t *d = (const dls_copy_desc_t *)args[2];
  walk(d->ndim, d->shape, ARG(unsigned char *, 0), d->dst_strides, d->elem_size, ARG(const unsigned char *, 1),
       d->src_strides, d->elem_size, copy_step, &d->elem_size);
  return 0;
}

static void convert_step(unsigned char *dst, const unsigned char *src, const void *ctx) {
  const dls_convert_desc_t *d = ctx;
  dls__cv_convert(dst, d->dst_dtype, src, d->src_dtype);
}

static int k_convert(const dls_launch_config_t *cfg, void *const *args, int n) {
  const dls_convert_desc_t *d = (const dls_convert_desc_t *)args[2];
  uint32_t dsize = ((uint32_t)d->dst_dtype.bits * d->dst_dtype.lanes + 7) / 8;
  uint32_t ssize = ((uint32_t)d->src_dtype.bits * d->src_dtype.lanes + 7) / 8;
  bool same = memcmp(&d->dst_dtype, &d->src_dtype, sizeof d->dst_dtype) == 0;
  walk(d->ndim, d->shape, ARG(unsigned char *, 0), d->dst_strides, dsize, ARG(const unsigned char *, 1),
       d->src_strides, ssize, same ? copy_step : convert_step, same ? (const void *)&dsize : (const void *)d);
  return 0;
}

/* The core's vector twins (builtin_table.h's DLS__TWINS): whole 16-byte vectors at addresses aligned to 16. */
static int k_fill_vecs(const dls_launch_config_t *cfg, void *const *args, int n) {
  uint64_t *dst = ARG(uint64_t *, 0), words = 2 * ARG(uint64_t, 1), pattern = ARG(uint64_t, 2);
  for (uint64_t i = 0; i < words; i++)
    dst[i] = pattern;
  return 0;
}

static int k_axpy_f32_vecs(const dls_launch_config_t *cfg, void *const *args, int n) {
  return axpy_f32_run(args, 4 * ARG(uint64_t, 0));
}

static int k_copy_vecs(const dls_launch_config_t *cfg, void *const *args, int n) {
  memmove(ARG(void *, 0), ARG(const void *, 1), 16 * ARG(uint64_t, 2));
  return 0;
}

/* The core's twins for contiguous views (builtin_table.h's DLS__TWINS): `bytes` bytes (memmove: an in-place copy
 * passes one address twice), and `n` elements of one pair of types, at any alignment. */
static int k_copy_bytes(const dls_launch_config_t *cfg, void *const *args, int n) {
  memmove(ARG(void *, 0), ARG(const void *, 1), ARG(uint64_t, 2));
  return 0;
}

static void convert_run(void *const *args, DLDataType dt, DLDataType st) {
  unsigned char *dst = ARG(unsigned char *, 0);
  const unsigned char *src = ARG(const unsigned char *, 1);
  uint64_t count = ARG(uint64_t, 2);
  for (uint64_t i = 0; i < count; i++)
    dls__cv_convert(dst + i * (dt.bits / 8), dt, src + i * (st.bits / 8), st);
}

#define CV_TWIN(sc, sb, dc, db)                                                                                    \
  static int DLS__CV_SYMBOL(sc, sb, dc, db)(const dls_launch_config_t *cfg, void *const *args, int n) {            \
    convert_run(args, (DLDataType){dc, db, 1}, (DLDataType){sc, sb, 1});                                         \
    return 0;                                                                                                     \
  }
DLS__CV_PAIRS(CV_TWIN)
#undef CV_TWIN

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

#define CPU_KERNEL(id, name, nargs, args, check, cpu, ...) [DLS__BI_##id] = cpu,
dls_host_kernel dls__cpu_builtin(size_t k) {
  static const dls_host_kernel kernels[DLS__NKERNEL] = {DLS__KERNELS(CPU_KERNEL)};
  return k < DLS__NKERNEL ? kernels[k] : NULL;
}
