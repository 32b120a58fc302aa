/* SPDX-License-Identifier: Apache-2.0 */
/* What the benchmark's files share: timing, result rows, the raw driver table. */
#ifndef DLS_BENCH_H
#define DLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "backend/backend.h"
#include "backend/cuda_driver.h"
#include "dlstream/dlstream.h"

#define REPS_MAX 63
extern int g_reps; /* repetitions per figure: 7, or --reps N (at most REPS_MAX) */
extern int g_failures; /* rows, speedups and setups that failed: bench_c then exits 1 */
#define REPS g_reps
#define MAX_ROWS 96

typedef int (*bench_body)(void *ctx, int n); /* runs n operations; 0 or -1 */
typedef int (*bench_drain)(void *ctx);      /* drains queued work, untimed */

typedef struct figure {
  double median_us, spread; /* per operation; spread = (max - min) / median */
  bool ok;
} figure;

typedef struct cuda_api {
#define API_FIELD(name, version, params) dls__PFN_##name name;
  DLS__CUDA_REQUIRED_SYMBOLS(API_FIELD)
  DLS__CUDA_OPTIONAL_SYMBOLS(API_FIELD)
  DLS__CUDA_TOOLS_SYMBOLS(API_FIELD)
  DLS__CUDA_OLD_ABI_SYMBOLS(API_FIELD)
#undef API_FIELD
  dls__PFN_cuStreamGetCaptureInfo_v12030 capture_info_v3; /* the ABI the backend prefers, when the driver has it */
} cuda_api;

extern cuda_api cu;

/* The GPU backend dlstream's figures use: kDLCUDA ("CUDA"), or kDLROCM with
 * --gpu rocm, for the HIP backend through tests/hip_on_cuda (its rows are
 * labelled "HIP via HIP-on-CUDA stand-in"; the anchors stay raw CUDA). */
extern DLDeviceType bench_gpu_type;
extern const char *bench_gpu_label;

double now_s(void);
figure measure(bench_body body, bench_drain drain, void *ctx, int n);
void bench_error(const char *fmt, ...);
/* Times a row (skipped unless row_wanted); anchor may be NULL. */
void add_row(const char *backend, const char *op, const char *anchor_name, bench_body anchor, bench_body dls,
             bench_drain drain, void *ctx, int n);
/* Whether --only selects the row "backend: op". */
bool row_wanted(const char *backend, const char *op);

/* The CUDA rows (bench_cuda.c): NULL, or why they were skipped. */
const char *run_cuda(int device, int launch_batch, char *device_name, size_t name_size);
/* The CPU rows (bench_cpu.c): NULL, or why they were skipped. */
const char *run_cpu(void);

/* Fork/join figures (bench_group.c): group overhead rows, and the speedup
 * table of K one-block spin kernels, printed and written to JSON. */
void run_groups(DLDevice device, dls__CUcontext ctx, bool kernels);
void print_speedups(void);
void write_speedups_json(FILE *f);

#define DLS_CHECK(expr)                                                                  \
  do {                                                                                   \
    dls_status_t st_ = (expr);                                                           \
    if (st_ != DLS_OK) {                                                                 \
      bench_error("%s: %s: %s", #expr, dls_status_name(st_), dls_last_error());          \
      return -1;                                                                         \
    }                                                                                    \
  } while (0)

#define CU_CHECK(expr)                                                                              \
  do {                                                                                              \
    dls__CUresult r_ = (expr);                                                                      \
    if (r_ != DLS__CUDA_SUCCESS) {                                                                  \
      const char *name_ = "?";                                                                      \
      cu.cuGetErrorName(r_, &name_);                                                                \
      bench_error("%s: %s", #expr, name_);                                                          \
      return -1;                                                                                    \
    }                                                                                               \
  } while (0)

#endif /* DLS_BENCH_H */
