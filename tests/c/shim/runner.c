/* SPDX-License-Identifier: Apache-2.0 */
/* The in-process test runner behind the Criterion stand-in (ThreadSanitizer builds). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "criterion/criterion.h"

typedef struct shim_test {
  const char *suite, *name;
  void (*fn)(void *);
  shim_params_fn params;
  const struct criterion_test_extra_data *extra;
} shim_test;

typedef struct shim_suite {
  const char *name;
  const struct criterion_test_extra_data *extra;
} shim_suite;

static shim_test g_tests[1024];
static int g_ntests;
static shim_suite g_suites[64];
static int g_nsuites;

static jmp_buf g_jump;
static int g_failed, g_skipped, g_in_test;

void shim_register_test(const char *suite, const char *name, void (*fn)(void *), shim_params_fn params,
                        const struct criterion_test_extra_data *extra) {
  if (g_ntests < (int)(sizeof g_tests / sizeof g_tests[0]))
    g_tests[g_ntests++] = (shim_test){suite, name, fn, params, extra};
}

void shim_register_suite(const char *suite, const struct criterion_test_extra_data *extra) {
  if (g_nsuites < (int)(sizeof g_suites / sizeof g_suites[0]))
    g_suites[g_nsuites++] = (shim_suite){suite, extra};
}

void shim_fail(int fatal, const char *file, int line, const char *cond, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "[----] %s:%d: Assertion failed: %s\n[----]   ", file, line, cond);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  g_failed = 1;
  if (fatal && g_in_test)
    longjmp(g_jump, 1);
}

void shim_skip(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "[SKIP] ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  g_skipped = 1;
  if (g_in_test)
    longjmp(g_jump, 2);
}

void shim_log(const char *level, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "[%s] ", level);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static const struct criterion_test_extra_data *suite_extra(const char *name) {
  for (int i = 0; i < g_nsuites; i++)
    if (strcmp(g_suites[i].name, name) == 0)
      return g_suites[i].extra;
  return NULL;
}

/* Runs one test body (with its hooks); returns 0 pass, 1 fail, 2 skip. */
static int run_one(const shim_test *t, void *param) {
  const struct criterion_test_extra_data *se = suite_extra(t->suite);
  g_failed = g_skipped = 0;
  if (setjmp(g_jump) == 0) {
    g_in_test = 1;
    if (se && se->init)
      se->init();
    if (t->extra->init)
      t->extra->init();
    t->fn(param);
  }
  g_in_test = 0;
  if (t->extra->fini)
    t->extra->fini();
  if (se && se->fini)
    se->fini();
  return g_failed ? 1 : g_skipped ? 2 : 0;
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 && strncmp(argv[1], "--filter=", 9) == 0 ? argv[1] + 9 : NULL;
  int tested = 0, passed = 0, failed = 0, skipped = 0;
  for (int i = 0; i < g_ntests; i++) {
    const shim_test *t = &g_tests[i];
    char full[256];
    snprintf(full, sizeof full, "%s::%s", t->suite, t->name);
    if (filter && strstr(full, filter) == NULL)
      continue;
    struct criterion_test_params p = {0, NULL, 1, NULL};
    if (t->params)
      p = t->params();
    for (size_t k = 0; k < p.length; k++) {
      void *param = t->params ? (char *)p.params + k * p.size : NULL;
      fprintf(stderr, "[RUN ] %s\n", full);
      int r = run_one(t, param);
      tested++;
      if (r == 0) {
        passed++;
        fprintf(stderr, "[PASS] %s\n", full);
      } else if (r == 1) {
        failed++;
        fprintf(stderr, "[FAIL] %s\n", full);
      } else {
        skipped++;
      }
    }
  }
  fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Skipped: %d (in-process runner)\n", tested,
          passed, failed, skipped);
  return failed ? 1 : 0;
}
