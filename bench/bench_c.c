/* SPDX-License-Identifier: Apache-2.0 */
/* Side-by-side host-time benchmarks: dlstream against raw CUDA driver calls (CUDA) and the CPU backend's own calls (CPU).
 *
 * Each figure is the median over 7 repetitions of N calls, after one
 * warm-up repetition, timed with clock_gettime(CLOCK_MONOTONIC). Queued work
 * is drained between repetitions, outside the timed region. A row's anchor
 * and dlstream repetitions are interleaved, and its ratio is the median of
 * the repetitions' ratios. The rows live in
 * bench_cuda.c, bench_cpu.c and bench_group.c; this file times them, prints
 * the table and writes the JSON.
 *
 * Usage: bench_c [--json FILE] [--device N] [--launch-batch N] [--only TEXT] [--calls N] [--reps N] [--gpu cuda|rocm]
 *                [--smoke]
 * --gpu rocm measures dlstream's HIP backend (kDLROCM) instead of its CUDA
 * one; on an NVIDIA GPU that means through the HIP-on-CUDA stand-in
 * (DLSTREAM_HIP_LIBRARY, DLSTREAM_HIP_BUILTINS: docs/hip.md).
 *   --only TEXT  runs only the rows whose "backend: operation" contains TEXT; TEXT ending in '$' must end it
 *                (scripts/callgrind-ops names exactly one row so)
 *   --calls N    N calls per repetition in every row (scripts/callgrind-ops uses it)
 *   --reps N     N repetitions per figure (default 7, at most 63): more for small differences
 *   --smoke      a smoke run (CI: scripts/bench-smoke, with the null CUDA driver bench/null_driver.c): one
 *                repetition of 20 calls per row
 * It exits 1 when a row, a speedup or a setup failed (the table says which), so that a broken row is seen. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

/* ---------------------------------------------------------------- timing */

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One timed repetition of `body`: microseconds per operation, or -1 when it (or the drain after it) failed. */
static double time_once(bench_body body, bench_drain drain, void *ctx, int n) {
  double t0 = now_s();
  int rc = body(ctx, n);
  double t1 = now_s();
  if (rc != 0 || (drain != NULL && drain(ctx) != 0))
    return -1;
  return (t1 - t0) * 1e6 / n;
}

static double median_of(double *t, int k) {
  qsort(t, (size_t)k, sizeof t[0], cmp_double);
  return t[k / 2];
}

static figure summarize(double *t) {
  figure f;
  f.median_us = median_of(t, REPS);
  f.spread = f.median_us > 0 ? (t[REPS - 1] - t[0]) / f.median_us : 0;
  f.ok = true;
  return f;
}

figure measure(bench_body body, bench_drain drain, void *ctx, int n) {
  figure f = {0, 0, false};
  double t[REPS_MAX];
  if (body(ctx, n) != 0 || (drain != NULL && drain(ctx) != 0)) /* warm-up */
    return f;
  for (int r = 0; r < REPS; r++)
    if ((t[r] = time_once(body, drain, ctx, n)) < 0)
      return f;
  return summarize(t);
}

/* A row's two sides, interleaved: each repetition times both, the anchor first in even ones and dlstream first in
 * odd ones, so that drift of the machine (clocks, the GPU's queues, neighbours) reaches both alike. *ratio is the
 * median of the repetitions' ratios. */
static void measure_pair(bench_body anchor, bench_body dls, bench_drain drain, void *ctx, int n, figure *fa,
                         figure *fd, double *ratio) {
  double ta[REPS_MAX], td[REPS_MAX], q[REPS_MAX];
  fa->ok = fd->ok = false;
  bool a_ok = anchor(ctx, n) == 0 && (drain == NULL || drain(ctx) == 0); /* warm-ups */
  bool d_ok = dls(ctx, n) == 0 && (drain == NULL || drain(ctx) == 0);
  for (int r = 0; r < REPS && (a_ok || d_ok); r++) {
    for (int side = 0; side < 2; side++) {
      if ((side == 0) == (r % 2 == 0)) {
        if (a_ok)
          a_ok = (ta[r] = time_once(anchor, drain, ctx, n)) >= 0;
      } else if (d_ok) {
        d_ok = (td[r] = time_once(dls, drain, ctx, n)) >= 0;
      }
    }
    q[r] = a_ok && d_ok && ta[r] > 0 ? td[r] / ta[r] : 0;
  }
  *ratio = a_ok && d_ok ? median_of(q, REPS) : 0;
  if (a_ok)
    *fa = summarize(ta);
  if (d_ok)
    *fd = summarize(td);
}

/* ---------------------------------------------------------------- results */

typedef struct row {
  const char *backend; /* "CUDA", "CPU" */
  char operation[128];
  char anchor_name[96]; /* "" when there is no anchor */
  figure anchor, dls;
  double ratio; /* dlstream / anchor: the median of the interleaved repetitions' ratios */
  int n;
} row;

static row g_rows[MAX_ROWS];
static int g_nrows;
static char g_error[512]; /* the first failure inside a timed body */
static const char *g_only; /* --only */
static int g_calls;        /* --calls, 0: each row's own */
int g_reps = 7;
int g_failures;

bool row_wanted(const char *backend, const char *op) {
  char name[160];
  snprintf(name, sizeof name, "%s: %s", backend, op);
  if (g_only == NULL)
    return true;
  size_t n = strlen(g_only), len = strlen(name);
  if (n > 0 && g_only[n - 1] == '$') /* anchored at the end */
    return len >= n - 1 && strncmp(name + len - (n - 1), g_only, n - 1) == 0;
  return strstr(name, g_only) != NULL;
}

void bench_error(const char *fmt, ...) {
  if (g_error[0] != '\0')
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_error, sizeof g_error, fmt, ap);
  va_end(ap);
}

void add_row(const char *backend, const char *op, const char *anchor_name, bench_body anchor, bench_body dls,
             bench_drain drain, void *ctx, int n) {
  if (!row_wanted(backend, op))
    return;
  if (g_nrows == MAX_ROWS) { /* a row is never dropped unseen */
    fprintf(stderr, "bench: %s / %s not run: more than MAX_ROWS (%d) rows; raise it in bench.h\n", backend, op,
            MAX_ROWS);
    g_failures++;
    return;
  }
  if (g_calls > 0)
    n = g_calls;
  row *r = &g_rows[g_nrows++];
  r->backend = backend;
  snprintf(r->operation, sizeof r->operation, "%s", op);
  snprintf(r->anchor_name, sizeof r->anchor_name, "%s", anchor_name != NULL ? anchor_name : "");
  r->n = n;
  g_error[0] = '\0';
  r->ratio = 0;
  if (anchor != NULL)
    measure_pair(anchor, dls, drain, ctx, n, &r->anchor, &r->dls, &r->ratio);
  else
    r->dls = measure(dls, drain, ctx, n);
  if (anchor != NULL && !r->anchor.ok)
    fprintf(stderr, "bench: %s / %s anchor failed: %s\n", backend, op, g_error);
  if (!r->dls.ok)
    fprintf(stderr, "bench: %s / %s failed: %s\n", backend, op, g_error);
  g_failures += (anchor != NULL && !r->anchor.ok) || !r->dls.ok;
}

static void print_table(void) {
  printf("| backend | operation | anchor | anchor µs | dlstream µs | ratio | spread (anchor / dlstream) |\n");
  printf("| --- | --- | --- | ---: | ---: | ---: | ---: |\n");
  for (int i = 0; i < g_nrows; i++) {
    const row *r = &g_rows[i];
    char a[32] = "—", d[32] = "failed", ratio[32] = "—", spread[48];
    if (r->anchor.ok)
      snprintf(a, sizeof a, "%.3f", r->anchor.median_us);
    if (r->dls.ok)
      snprintf(d, sizeof d, "%.3f", r->dls.median_us);
    if (r->anchor.ok && r->dls.ok && r->ratio > 0)
      snprintf(ratio, sizeof ratio, "%.2f", r->ratio);
    if (r->anchor.ok)
      snprintf(spread, sizeof spread, "%.0f%% / %.0f%%", 100 * r->anchor.spread, 100 * r->dls.spread);
    else
      snprintf(spread, sizeof spread, "— / %.0f%%", 100 * r->dls.spread);
    printf("| %s | %s | %s | %s | %s | %s | %s |\n", r->backend, r->operation,
           r->anchor_name[0] ? r->anchor_name : "—", a, d, ratio, spread);
  }
}

static void json_number(FILE *f, const char *key, bool ok, double v) {
  if (ok)
    fprintf(f, "\"%s\": %.6g", key, v);
  else
    fprintf(f, "\"%s\": null", key);
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", (unsigned char)*s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

static int write_json(const char *path, const char *cuda_device, const char *cuda_skipped) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  fprintf(f, "{\n  \"reps\": %d,\n  \"statistic\": \"median per operation, microseconds; ratio: the median of the interleaved repetitions' ratios\",\n  \"cuda_device\": ",
          REPS);
  json_string(f, cuda_device);
  fprintf(f, ",\n  \"cuda_skipped\": ");
  if (cuda_skipped != NULL)
    json_string(f, cuda_skipped);
  else
    fprintf(f, "null");
  fprintf(f, ",\n  \"rows\": [\n");
  for (int i = 0; i < g_nrows; i++) {
    const row *r = &g_rows[i];
    fprintf(f, "    {\"backend\": ");
    json_string(f, r->backend);
    fprintf(f, ", \"operation\": ");
    json_string(f, r->operation);
    fprintf(f, ", \"anchor\": ");
    if (r->anchor_name[0])
      json_string(f, r->anchor_name);
    else
      fprintf(f, "null");
    fprintf(f, ", \"n\": %d, ", r->n);
    json_number(f, "anchor_us", r->anchor.ok, r->anchor.median_us);
    fprintf(f, ", ");
    json_number(f, "dlstream_us", r->dls.ok, r->dls.median_us);
    fprintf(f, ", ");
    json_number(f, "ratio", r->anchor.ok && r->dls.ok && r->ratio > 0, r->ratio);
    fprintf(f, ", ");
    json_number(f, "anchor_spread", r->anchor.ok, r->anchor.spread);
    fprintf(f, ", ");
    json_number(f, "dlstream_spread", r->dls.ok, r->dls.spread);
    fprintf(f, "}%s\n", i + 1 < g_nrows ? "," : "");
  }
  fprintf(f, "  ],\n");
  write_speedups_json(f);
  fprintf(f, "\n}\n");
  return fclose(f) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
  const char *json = NULL;
  int device = 0, launch_batch = 2000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--launch-batch") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      launch_batch = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      g_only = argv[++i];
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      g_reps = atoi(argv[++i]) < REPS_MAX ? atoi(argv[i]) : REPS_MAX;
    } else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      g_calls = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--smoke") == 0) {
      g_reps = 1;
      g_calls = 20;
      launch_batch = 20;
    } else if (strcmp(argv[i], "--gpu") == 0 && i + 1 < argc &&
               (strcmp(argv[i + 1], "cuda") == 0 || strcmp(argv[i + 1], "rocm") == 0)) {
      if (strcmp(argv[++i], "rocm") == 0) {
        bench_gpu_type = kDLROCM;
        bench_gpu_label = "HIP via HIP-on-CUDA stand-in";
      }
    } else {
      fprintf(stderr,
              "usage: %s [--json FILE] [--device N] [--launch-batch N] [--only TEXT] [--calls N] [--reps N] "
              "[--gpu cuda|rocm] [--smoke]\n",
              argv[0]);
      return 2;
    }
  }
  char cuda_device[128] = "";
  const char *cuda_skipped = run_cuda(device, launch_batch, cuda_device, sizeof cuda_device);
  if (cuda_skipped != NULL)
    printf("CUDA: skipped: %s\n", cuda_skipped);
  if (cuda_skipped != NULL && strncmp(cuda_skipped, "setup:", 6) == 0)
    g_failures++; /* a GPU that is there but could not be set up: a failure, not a skip */
  else
    printf("CUDA device: %s (dlstream's figures: %s backend)\n", cuda_device,
           bench_gpu_type == kDLROCM ? "HIP, through the HIP-on-CUDA stand-in" : "CUDA");
  const char *cpu_skipped = run_cpu();
  if (cpu_skipped != NULL) {
    printf("CPU: skipped: %s\n", cpu_skipped);
    g_failures++; /* the CPU backend is always there */
  }
  printf("median of %d repetitions after a warm-up, anchor and dlstream interleaved; µs per operation; ratio = the "
         "median of the repetitions' dlstream / anchor; spread = (max - min) / median\n\n",
         REPS);
  print_table();
  print_speedups();
  dls_shutdown();
  if (json != NULL && write_json(json, cuda_device, cuda_skipped) != 0)
    return 1;
  if (g_failures > 0) {
    fprintf(stderr, "bench_c: %d row(s), speedup(s) or setup(s) failed (see above)\n", g_failures);
    return 1;
  }
  return 0;
}
