/* SPDX-License-Identifier: Apache-2.0 */
/* A small in-process stand-in for the part of Criterion our suites use.
 *
 * Criterion runs each test in a forked worker and maps a shared arena at a
 * fixed address, which ThreadSanitizer's memory layout refuses
 * (Snaipe/Criterion#274). The ThreadSanitizer build compiles the same test
 * sources against this header instead: tests run one after another in one
 * process, with the same macros, suites, parameters, skips and fini hooks. */
#ifndef DLS_CRITERION_SHIM_H
#define DLS_CRITERION_SHIM_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct criterion_test_extra_data {
  void (*init)(void);
  void (*fini)(void);
  double timeout;
  int disabled;
  const char *description;
  int exit_code;
  int signal;
};

struct criterion_test_params {
  size_t size;
  void *params;
  size_t length;
  void (*cleanup)(struct criterion_test_params *);
};

typedef struct criterion_test_params (*shim_params_fn)(void);

void shim_register_test(const char *suite, const char *name, void (*fn)(void *), shim_params_fn params,
                        const struct criterion_test_extra_data *extra);
void shim_register_suite(const char *suite, const struct criterion_test_extra_data *extra);
void shim_fail(int fatal, const char *file, int line, const char *cond, const char *fmt, ...);
void shim_skip(const char *fmt, ...);
void shim_log(const char *level, const char *fmt, ...);

#define SHIM_CAT_(a, b) a##b
#define SHIM_CAT(a, b) SHIM_CAT_(a, b)

#define TestSuite(suite, ...)                                                          \
  __attribute__((constructor)) static void SHIM_CAT(shim_suite_, suite)(void) {        \
    static const struct criterion_test_extra_data x = {__VA_ARGS__};                   \
    shim_register_suite(#suite, &x);                                                   \
  }                                                                                    \
  struct shim_dummy_##suite

#define Test(suite, name, ...)                                                         \
  static void suite##_##name##_impl(void);                                             \
  static void suite##_##name##_tramp(void *p) { (void)p; suite##_##name##_impl(); }    \
  __attribute__((constructor)) static void suite##_##name##_reg(void) {                \
    static const struct criterion_test_extra_data x = {__VA_ARGS__};                   \
    shim_register_test(#suite, #name, suite##_##name##_tramp, NULL, &x);               \
  }                                                                                    \
  static void suite##_##name##_impl(void)

#define ParameterizedTestParameters(suite, name) static struct criterion_test_params suite##_##name##_params(void)

#define ParameterizedTest(Param, suite, name, ...)                                     \
  static void suite##_##name##_pimpl(Param);                                           \
  static void suite##_##name##_tramp(void *p) { suite##_##name##_pimpl(p); /* void * converts */ } \
  __attribute__((constructor)) static void suite##_##name##_reg(void) {                \
    static const struct criterion_test_extra_data x = {__VA_ARGS__};                   \
    shim_register_test(#suite, #name, suite##_##name##_tramp, suite##_##name##_params, &x); \
  }                                                                                    \
  static void suite##_##name##_pimpl(Param)

#define cr_make_param_array(Type, arr, len) \
  ((struct criterion_test_params){.size = sizeof(Type), .params = (arr), .length = (len), .cleanup = NULL})

#define SHIM_CHECK(fatal, cond, text, ...) \
  do {                                      \
    if (!(cond))                            \
      shim_fail(fatal, __FILE__, __LINE__, text, "" __VA_ARGS__); \
  } while (0)

#define cr_assert(c, ...) SHIM_CHECK(1, (c), #c, __VA_ARGS__)
#define cr_expect(c, ...) SHIM_CHECK(0, (c), #c, __VA_ARGS__)
#define cr_assert_not(c, ...) SHIM_CHECK(1, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) SHIM_CHECK(1, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) SHIM_CHECK(1, (a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) SHIM_CHECK(1, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) SHIM_CHECK(1, (a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) SHIM_CHECK(1, (a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) SHIM_CHECK(1, (a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_assert_null(a, ...) SHIM_CHECK(1, (a) == NULL, #a " == NULL", __VA_ARGS__)
#define cr_assert_not_null(a, ...) SHIM_CHECK(1, (a) != NULL, #a " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) SHIM_CHECK(1, strcmp((a), (b)) == 0, #a " equals " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) SHIM_CHECK(1, strcmp((a), (b)) != 0, #a " differs from " #b, __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...) \
  SHIM_CHECK(1, fabs((double)(a) - (double)(b)) <= (double)(eps), #a " ~= " #b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) SHIM_CHECK(0, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) SHIM_CHECK(0, (a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_fatal(...) shim_fail(1, __FILE__, __LINE__, "cr_fatal", "" __VA_ARGS__)
#define cr_skip_test(...) shim_skip("" __VA_ARGS__)
#define cr_log_info(...) shim_log("INFO", __VA_ARGS__)
#define cr_log_warn(...) shim_log("WARN", __VA_ARGS__)
#define cr_log_error(...) shim_log("ERR ", __VA_ARGS__)

#endif /* DLS_CRITERION_SHIM_H */
