/* SPDX-License-Identifier: Apache-2.0 */
/* Fork/join figures: the cost of a group against the raw driver's events and
 * streams, and the speedup of K concurrent one-block spin kernels. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifdef DLS_HAVE_CUDA_KERNELS
extern const unsigned char dls__cuda_kernels_fatbin[];
#endif

#define MAX_K 32
#define SPIN_NS 200000ull /* 200 µs */
#define SPEED_REPS 5

typedef struct group_ctx {
  DLDevice device;
  dls__CUstream origin, branch[MAX_K];
  dls__CUevent fork, join[MAX_K];
  dls_stream_t dorigin;
  dls__CUfunction raw_empty, raw_spin;
  dls_function_t empty;
  int k; /* branches per group in the overhead rows */
} group_ctx;

static int group_drain(void *p) {
  group_ctx *g = p;
  CU_CHECK(cu.cuStreamSynchronize(g->origin));
  return 0;
}

/* One raw fork/join: fork event, K waits, K launches, K join events, K waits. */
static int raw_fork_join(group_ctx *g, int k, dls__CUfunction f, void **params) {
  CU_CHECK(cu.cuEventRecord(g->fork, g->origin));
  for (int i = 0; i < k; i++) {
    CU_CHECK(cu.cuStreamWaitEvent(g->branch[i], g->fork, 0));
    CU_CHECK(cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, g->branch[i], params, NULL));
    CU_CHECK(cu.cuEventRecord(g->join[i], g->branch[i]));
    CU_CHECK(cu.cuStreamWaitEvent(g->origin, g->join[i], 0));
  }
  return 0;
}

static int dls_fork_join(group_ctx *g, int k, bool spin) {
  dls_group_t grp;
  dls_launch_config_t cfg = dls_config_1d(1, 1);
  DLS_CHECK(dls_group_begin(g->dorigin, &grp));
  for (int i = 0; i < k; i++) {
    dls_stream_t b;
    DLS_CHECK(dls_group_branch(grp, &b));
    if (spin)
      DLS_CHECK(dls_spin(b, SPIN_NS));
    else
      DLS_CHECK(dls_launch(g->empty, b, &cfg, NULL, 0));
  }
  DLS_CHECK(dls_group_end(grp));
  return 0;
}

static int raw_groups(void *p, int n) {
  group_ctx *g = p;
  for (int i = 0; i < n; i++)
    if (raw_fork_join(g, g->k, g->raw_empty, NULL) != 0)
      return -1;
  return 0;
}

static int dls_groups(void *p, int n) {
  group_ctx *g = p;
  for (int i = 0; i < n; i++)
    if (dls_fork_join(g, g->k, false) != 0)
      return -1;
  return 0;
}

static int serial_empty(void *p, int n) {
  group_ctx *g = p;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < g->k; j++)
      CU_CHECK(cu.cuLaunchKernel(g->raw_empty, 1, 1, 1, 1, 1, 1, 0, g->origin, NULL, NULL));
  return 0;
}

/* ---- speedups ---- */

typedef struct speedup_row {
  int k;
  double serial_ms, raw_ms, dls_ms; /* medians, wall time to the origin's sync */
  bool ok;
} speedup_row;

static speedup_row g_speed[8];
static int g_nspeed;

typedef int (*speed_body)(group_ctx *g, int k);

static int spin_serial(group_ctx *g, int k) {
  unsigned long long ns = SPIN_NS;
  void *params[1] = {&ns};
  for (int i = 0; i < k; i++)
    CU_CHECK(cu.cuLaunchKernel(g->raw_spin, 1, 1, 1, 1, 1, 1, 0, g->origin, params, NULL));
  return 0;
}

static int spin_raw(group_ctx *g, int k) {
  unsigned long long ns = SPIN_NS;
  void *params[1] = {&ns};
  return raw_fork_join(g, k, g->raw_spin, params);
}

static int spin_dls(group_ctx *g, int k) { return dls_fork_join(g, k, true); }

static double time_ms(group_ctx *g, speed_body body, int k, bool *ok) {
  double t[SPEED_REPS];
  if (body(g, k) != 0 || group_drain(g) != 0) { /* warm-up */
    *ok = false;
    return 0;
  }
  for (int r = 0; r < SPEED_REPS; r++) {
    double t0 = now_s();
    if (body(g, k) != 0 || group_drain(g) != 0) {
      *ok = false;
      return 0;
    }
    t[r] = (now_s() - t0) * 1e3;
  }
  for (int i = 1; i < SPEED_REPS; i++) /* insertion sort: five values */
    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
      double x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  return t[SPEED_REPS / 2];
}

void run_groups(DLDevice device, dls__CUcontext ctx, bool kernels) {
  if (!kernels) {
    fprintf(stderr, "bench: fork/join rows skipped: CUDA built-in kernels were not compiled in\n");
    return;
  }
#ifdef DLS_HAVE_CUDA_KERNELS
  group_ctx g;
  memset(&g, 0, sizeof g);
  g.device = device;
  dls__CUmodule mod = NULL;
  cu.cuCtxSetCurrent(ctx);
  if (cu.cuModuleLoadDataEx(&mod, dls__cuda_kernels_fatbin, 0, NULL, NULL) != DLS__CUDA_SUCCESS ||
      cu.cuModuleGetFunction(&g.raw_empty, mod, "dls_empty") != DLS__CUDA_SUCCESS ||
      cu.cuModuleGetFunction(&g.raw_spin, mod, "dls_spin") != DLS__CUDA_SUCCESS ||
      cu.cuStreamCreate(&g.origin, DLS__CU_STREAM_NON_BLOCKING) != DLS__CUDA_SUCCESS ||
      cu.cuEventCreate(&g.fork, DLS__CU_EVENT_DISABLE_TIMING) != DLS__CUDA_SUCCESS) {
    fprintf(stderr, "bench: fork/join setup failed\n");
    g_failures++;
    return;
  }
  for (int i = 0; i < MAX_K; i++) {
    if (cu.cuStreamCreate(&g.branch[i], DLS__CU_STREAM_NON_BLOCKING) != DLS__CUDA_SUCCESS ||
        cu.cuEventCreate(&g.join[i], DLS__CU_EVENT_DISABLE_TIMING) != DLS__CUDA_SUCCESS) {
      fprintf(stderr, "bench: fork/join setup failed\n");
      g_failures++;
      return;
    }
  }
  if (dls_stream_wrap(device, g.origin, &g.dorigin) != DLS_OK ||
      dls_builtin_function(device, "dls_empty", &g.empty) != DLS_OK) {
    fprintf(stderr, "bench: fork/join setup failed: %s\n", dls_last_error());
    g_failures++;
    return;
  }
  g.k = 4;
  add_row(bench_gpu_label, "fork/join of 4 empty kernels on 4 streams, per group", "events + 4 streams (raw driver)",
          raw_groups, dls_groups, group_drain, &g, 200);
  add_row(bench_gpu_label, "4 empty kernels on one stream (no fork/join), per group", "cuLaunchKernel x4", serial_empty,
          serial_empty, group_drain, &g, 200);
  static const int ks[] = {2, 4, 8, 16, 32};
  for (size_t i = 0; row_wanted("CUDA", "fork/join speedup of K spin kernels") && i < sizeof ks / sizeof ks[0]; i++) {
    speedup_row *r = &g_speed[g_nspeed++];
    r->k = ks[i];
    r->ok = true;
    r->serial_ms = time_ms(&g, spin_serial, ks[i], &r->ok);
    r->raw_ms = time_ms(&g, spin_raw, ks[i], &r->ok);
    r->dls_ms = time_ms(&g, spin_dls, ks[i], &r->ok);
    g_failures += !r->ok;
  }
  group_drain(&g);
  dls_stream_destroy(g.dorigin);
  for (int i = 0; i < MAX_K; i++) {
    cu.cuStreamDestroy(g.branch[i]);
    cu.cuEventDestroy(g.join[i]);
  }
  cu.cuEventDestroy(g.fork);
  cu.cuStreamDestroy(g.origin);
  cu.cuModuleUnload(mod);
#else
  (void)device;
  (void)ctx;
#endif
}

void print_speedups(void) {
  if (g_nspeed == 0)
    return;
  printf("\nK one-block %llu µs spin kernels: wall time to the origin's sync (median of %d), speedup over "
         "serial\n\n",
         SPIN_NS / 1000, SPEED_REPS);
  printf("| K | serial ms | raw fork/join ms | raw speedup | dlstream group ms | dlstream speedup |\n");
  printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (int i = 0; i < g_nspeed; i++) {
    const speedup_row *r = &g_speed[i];
    if (!r->ok) {
      printf("| %d | failed | | | | |\n", r->k);
      continue;
    }
    printf("| %d | %.3f | %.3f | %.2f | %.3f | %.2f |\n", r->k, r->serial_ms, r->raw_ms, r->serial_ms / r->raw_ms,
           r->dls_ms, r->serial_ms / r->dls_ms);
  }
}

void write_speedups_json(FILE *f) {
  fprintf(f, "  \"fork_join_spin_us\": %llu,\n  \"fork_join\": [", SPIN_NS / 1000);
  for (int i = 0; i < g_nspeed; i++) {
    const speedup_row *r = &g_speed[i];
    fprintf(f, "%s\n    {\"k\": %d, \"ok\": %s, \"serial_ms\": %.4f, \"raw_ms\": %.4f, \"dlstream_ms\": %.4f}",
            i ? "," : "", r->k, r->ok ? "true" : "false", r->serial_ms, r->raw_ms, r->dls_ms);
  }
  fprintf(f, "\n  ]");
}
