/* SPDX-License-Identifier: Apache-2.0 */
/* Kernels from source: compiling without a GPU, the kernel cache (hits, damaged files, concurrency, the off switch), errors. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

TestSuite(compile, .fini = dlst_fini);

static const char *const k_source =
    "extern \"C\" __global__ void axpy(float a, const float *x, float *y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n"
    "template <typename T> __global__ void scale(T *p, T s, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) p[i] *= s;\n"
    "}\n";

/* NVRTC or a visible skip saying how to get it. */
static void need_nvrtc(void) {
  if (dls_compiler_version(DLS_COMPILER_NVRTC, NULL, NULL) != DLS_OK)
    cr_skip_test("%s", dls_last_error());
}

/* A fresh, empty cache folder for one test. */
static void temp_dir(char *out, size_t size) {
  snprintf(out, size, "%s/dls-kc-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  cr_assert(mkdtemp(out) != NULL, "mkdtemp(%s)", out);
}

/* The one cache file of a folder (its path), and how many entries it holds. */
static int cache_files(const char *dir, char *out_path, size_t size) {
  DIR *d = opendir(dir);
  int n = 0;
  if (d == NULL)
    return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.')
      continue;
    n++;
    if (out_path != NULL)
      snprintf(out_path, size, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  return n;
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  char p[4096];
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static dls_compile_stats_t stats(void) {
  dls_compile_stats_t s;
  OK(dls_compile_stats(&s));
  return s;
}

/* Compiles k_source for sm_80 with `o`, checks it is a cubin, frees it. */
static void compile_ok(const dls_compile_options_t *o) {
  void *img = NULL;
  size_t n = 0;
  OK(dls_compile(k_source, o, "sm_80", &img, &n, NULL));
  cr_assert(n > 64 && memcmp(img, "\x7f" "ELF", 4) == 0, "a cubin (ELF) of %zu bytes", n);
  dls_compile_free(img);
}

Test(compile, sm_arch_gives_a_cubin_and_compute_arch_gives_ptx) {
  need_nvrtc();
  dls_compile_options_t o = DLS_COMPILE_OPTIONS_INIT;
  o.cache = DLS_COMPILE_CACHE_OFF;
  compile_ok(&o);
  void *img = NULL;
  size_t n = 0;
  OK(dls_compile(k_source, &o, "compute_80", &img, &n, NULL));
  cr_assert(n > 1 && ((char *)img)[n - 1] == '\0', "PTX is NUL-terminated within its size");
  cr_assert(strstr(img, ".entry axpy") != NULL && strstr(img, ".target sm_80") != NULL, "PTX for sm_80: %.200s",
            (char *)img);
  dls_compile_free(img);
  dls_compile_free(NULL);
}

Test(compile, compile_error_is_invalid_argument_with_the_log_line) {
  need_nvrtc();
  dls_compile_options_t o = DLS_COMPILE_OPTIONS_INIT;
  o.program_name = "broken.cu";
  void *img = (void *)1;
  size_t n = 7;
  FAILS(dls_compile("__global__ void k(int *p) {\n  *p = undefined_thing;\n}\n", &o, "sm_80", &img, &n, NULL),
        DLS_ERR_INVALID_ARGUMENT, "broken.cu(2): error: identifier \"undefined_thing\" is undefined");
  cr_assert(strstr(dls_last_error(), "dls_compile(arch=\"sm_80\")") == dls_last_error(), "%s", dls_last_error());
  cr_assert(img == NULL && n == 0, "outputs are zeroed on failure");
  cr_assert(strstr(dls_compile_last_log(), "broken.cu(2)") != NULL, "log: %s", dls_compile_last_log());
  const char *bad_opt[] = {"--no-such-option"};
  o.options = bad_opt;
  o.noptions = 1;
  FAILS(dls_compile(k_source, &o, "sm_80", &img, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "NVRTC_ERROR_INVALID_OPTION");
}

Test(compile, name_expressions_give_lowered_names) {
  need_nvrtc();
  const char *exprs[] = {"scale<float>", "scale<double>"};
  const char *lowered[2] = {NULL, NULL};
  dls_compile_options_t o = DLS_COMPILE_OPTIONS_INIT;
  o.name_expressions = exprs;
  o.nname_expressions = 2;
  o.cache = DLS_COMPILE_CACHE_NO_DISK;
  void *img;
  size_t n;
  OK(dls_compile(k_source, &o, "sm_80", &img, &n, lowered));
  cr_assert_str_eq(lowered[0], "_Z5scaleIfEvPT_S0_i");
  cr_assert_str_eq(lowered[1], "_Z5scaleIdEvPT_S0_i");
  dls_compile_free(img);
  /* Again, from the in-process cache: the names come with it. */
  OK(dls_compile(k_source, &o, "sm_80", &img, &n, lowered));
  cr_assert_str_eq(lowered[1], "_Z5scaleIdEvPT_S0_i");
  dls_compile_free(img);
  const char *missing[] = {"nothere<int>"};
  o.name_expressions = missing;
  o.nname_expressions = 1;
  FAILS(dls_compile(k_source, &o, "sm_80", &img, &n, lowered), DLS_ERR_INVALID_ARGUMENT, "nothere<int>");
}

Test(compile, bad_arguments_name_the_argument) {
  void *img;
  size_t n;
  dls_compile_options_t o = DLS_COMPILE_OPTIONS_INIT;
  FAILS(dls_compile(NULL, &o, "sm_80", &img, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "source=NULL");
  FAILS(dls_compile(k_source, &o, NULL, &img, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "arch=NULL");
  FAILS(dls_compile(k_source, &o, "sm_80", NULL, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "output pointer is NULL");
  FAILS(dls_compile(k_source, &o, "vulkan", &img, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "arch=\"vulkan\"");
  FAILS(dls_compile(k_source, &o, "sm_", &img, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "not an architecture");
  dls_compile_options_t zero;
  memset(&zero, 0, sizeof zero);
  FAILS(dls_compile(k_source, &zero, "sm_80", &img, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "options->size=0");
  o.noptions = 2;
  FAILS(dls_compile(k_source, &o, "sm_80", &img, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "noptions=2");
  const char *opts[] = {"-arch=sm_90"};
  o.options = opts;
  o.noptions = 1;
  FAILS(dls_compile(k_source, &o, "sm_80", &img, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "name the target once");
  const char *nul_opts[] = {NULL};
  o.options = nul_opts;
  FAILS(dls_compile(k_source, &o, "sm_80", &img, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "options->options[0]=NULL");
  o.noptions = 0;
  o.cache = 9;
  FAILS(dls_compile(k_source, &o, "sm_80", &img, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "options->cache=9");
  o.cache = 0;
  const char *empty_expr[] = {""};
  o.name_expressions = empty_expr;
  o.nname_expressions = 1;
  FAILS(dls_compile(k_source, &o, "sm_80", &img, &n, NULL), DLS_ERR_INVALID_ARGUMENT, "name_expressions[0]=\"\"");
  FAILS(dls_compiler_version((dls_compiler_t)7, NULL, NULL), DLS_ERR_INVALID_ARGUMENT, "compiler=7");
  FAILS(dls_compiler_add_library(DLS_COMPILER_NVRTC, NULL), DLS_ERR_INVALID_ARGUMENT, "path=NULL");
  FAILS(dls_compile_stats(NULL), DLS_ERR_INVALID_ARGUMENT, "out_stats=NULL");
}

Test(compile, arch_newer_than_nvrtc_is_refused_when_compiling_without_a_device) {
  need_nvrtc();
  void *img;
  size_t n;
  FAILS(dls_compile(k_source, NULL, "sm_990", &img, &n, NULL), DLS_ERR_NOT_SUPPORTED, "sm_990");
  FAILS(dls_compile(k_source, NULL, "sm_10", &img, &n, NULL), DLS_ERR_NOT_SUPPORTED, "compiles for sm_");
}

Test(compile, memory_cache_serves_a_repeat_and_disk_cache_a_new_process_view) {
  need_nvrtc();
  char dir[256];
  temp_dir(dir, sizeof dir);
  OK(dls_compile_cache_clear());
  dls_compile_options_t o = DLS_COMPILE_OPTIONS_INIT;
  o.cache_dir = dir;
  compile_ok(&o);
  dls_compile_stats_t s = stats();
  cr_assert(s.compiles == 1 && s.disk_writes == 1 && s.memory_hits == 0, "first: one compile, one file");
  cr_assert_eq(cache_files(dir, NULL, 0), 1);
  compile_ok(&o);
  s = stats();
  cr_assert(s.compiles == 1 && s.memory_hits == 1, "second: from memory (compiles %llu)",
            (unsigned long long)s.compiles);
  /* Without the in-process cache (as another process would): from the file. */
  o.cache = DLS_COMPILE_CACHE_NO_MEMORY;
  compile_ok(&o);
  s = stats();
  cr_assert(s.compiles == 1 && s.disk_hits == 1, "third: from the file");
  /* Another option is another key. */
  const char *opts[] = {"-DSOMETHING=1"};
  o.options = opts;
  o.noptions = 1;
  compile_ok(&o);
  cr_assert(stats().compiles == 2 && cache_files(dir, NULL, 0) == 2, "a new option compiles again");
  remove_dir(dir);
}

/* Damages the cache file with `damage`, then checks the next compile
 * rebuilds (not a crash) and leaves a good file behind. */
static void check_damage(void (*damage)(const char *path)) {
  need_nvrtc();
  char dir[256], path[4096];
  temp_dir(dir, sizeof dir);
  OK(dls_compile_cache_clear());
  dls_compile_options_t o = DLS_COMPILE_OPTIONS_INIT;
  o.cache_dir = dir;
  o.cache = DLS_COMPILE_CACHE_NO_MEMORY;
  compile_ok(&o);
  cr_assert_eq(cache_files(dir, path, sizeof path), 1);
  damage(path);
  compile_ok(&o);
  dls_compile_stats_t s = stats();
  cr_assert(s.disk_corrupt == 1 && s.compiles == 2 && s.disk_writes == 2,
            "damaged file detected and replaced (corrupt %llu, compiles %llu, writes %llu)",
            (unsigned long long)s.disk_corrupt, (unsigned long long)s.compiles, (unsigned long long)s.disk_writes);
  compile_ok(&o);
  s = stats();
  cr_assert(s.disk_hits == 1 && s.compiles == 2, "the replacement is good");
  remove_dir(dir);
}

static void flip_payload_byte(const char *path) {
  int fd = open(path, O_RDWR);
  cr_assert(fd >= 0);
  unsigned char c;
  cr_assert(pread(fd, &c, 1, 200) == 1);
  c ^= 0x5a;
  cr_assert(pwrite(fd, &c, 1, 200) == 1);
  close(fd);
}
static void truncate_half(const char *path) {
  struct stat sb;
  cr_assert(stat(path, &sb) == 0);
  cr_assert(truncate(path, sb.st_size / 2) == 0);
}
static void truncate_inside_header(const char *path) { cr_assert(truncate(path, 10) == 0); }
static void overwrite_with_text(const char *path) {
  FILE *f = fopen(path, "w");
  cr_assert(f != NULL);
  fputs("not a cache file at all\n", f);
  fclose(f);
}
static void bad_payload_length(const char *path) {
  int fd = open(path, O_RDWR);
  cr_assert(fd >= 0);
  unsigned char big[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
  cr_assert(pwrite(fd, big, 8, 48) == 8);
  close(fd);
}

Test(compile, corrupt_cache_file_is_recompiled) { check_damage(flip_payload_byte); }
Test(compile, truncated_cache_file_is_recompiled) { check_damage(truncate_half); }
Test(compile, cache_file_cut_inside_its_header_is_recompiled) { check_damage(truncate_inside_header); }
Test(compile, foreign_file_under_the_key_is_recompiled) { check_damage(overwrite_with_text); }
Test(compile, lying_payload_length_is_recompiled) { check_damage(bad_payload_length); }

Test(compile, off_switch_compiles_every_time_and_writes_nothing) {
  need_nvrtc();
  char dir[256];
  temp_dir(dir, sizeof dir);
  OK(dls_compile_cache_clear());
  dls_compile_options_t o = DLS_COMPILE_OPTIONS_INIT;
  o.cache_dir = dir;
  o.cache = DLS_COMPILE_CACHE_OFF;
  compile_ok(&o);
  compile_ok(&o);
  cr_assert(stats().compiles == 2 && cache_files(dir, NULL, 0) == 0, "option: no cache");
  o.cache = DLS_COMPILE_CACHE_ALL;
  setenv("DLSTREAM_CACHE", "0", 1);
  compile_ok(&o);
  compile_ok(&o);
  unsetenv("DLSTREAM_CACHE");
  cr_assert(stats().compiles == 4 && cache_files(dir, NULL, 0) == 0, "DLSTREAM_CACHE=0: no cache");
  remove_dir(dir);
}

Test(compile, cache_dir_comes_from_the_environment) {
  need_nvrtc();
  char dir[256], sub[300];
  temp_dir(dir, sizeof dir);
  snprintf(sub, sizeof sub, "%s/made/by/dlstream", dir);
  OK(dls_compile_cache_clear());
  setenv("DLSTREAM_CACHE_DIR", sub, 1);
  dls_compile_options_t o = DLS_COMPILE_OPTIONS_INIT;
  o.cache = DLS_COMPILE_CACHE_NO_MEMORY;
  compile_ok(&o);
  unsetenv("DLSTREAM_CACHE_DIR");
  cr_assert_eq(cache_files(sub, NULL, 0), 1, "the file is in DLSTREAM_CACHE_DIR (made with its parents)");
  struct stat sb;
  cr_assert(stat(sub, &sb) == 0 && (sb.st_mode & 0777) == 0700, "folders are private: %o", sb.st_mode & 0777);
  remove_dir(sub);
  snprintf(sub, sizeof sub, "%s/made/by", dir);
  rmdir(sub);
  snprintf(sub, sizeof sub, "%s/made", dir);
  rmdir(sub);
  rmdir(dir);
}

Test(compile, unwritable_cache_dir_still_compiles) {
  need_nvrtc();
  OK(dls_compile_cache_clear());
  dls_compile_options_t o = DLS_COMPILE_OPTIONS_INIT;
  o.cache_dir = "/proc/self/no/such/place";
  compile_ok(&o);
  dls_compile_stats_t s = stats();
  cr_assert(s.disk_errors == 1 && s.disk_writes == 0, "a failed write is counted, not reported");
}

typedef struct racer_t {
  const char *dir;
  dls_status_t st;
} racer_t;

static void *race_compile(void *arg) {
  racer_t *r = arg;
  dls_compile_options_t o = DLS_COMPILE_OPTIONS_INIT;
  o.cache_dir = r->dir;
  o.cache = DLS_COMPILE_CACHE_NO_MEMORY;
  void *img = NULL;
  size_t n = 0;
  r->st = dls_compile(k_source, &o, "sm_80", &img, &n, NULL);
  dls_compile_free(img);
  return NULL;
}

Test(compile, concurrent_writers_of_one_key_leave_one_good_file) {
  need_nvrtc();
  char dir[256], path[4096];
  temp_dir(dir, sizeof dir);
  OK(dls_compile_cache_clear());
  enum { N = 4 };
  pthread_t th[N];
  racer_t r[N];
  for (int i = 0; i < N; i++) {
    r[i].dir = dir;
    cr_assert(pthread_create(&th[i], NULL, race_compile, &r[i]) == 0);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    cr_assert_eq(r[i].st, DLS_OK, "racer %d", i);
  }
  cr_assert_eq(cache_files(dir, path, sizeof path), 1, "one file, no temporaries left");
  OK(dls_compile_cache_clear());
  racer_t again = {dir, DLS_OK};
  race_compile(&again);
  OK(again.st);
  cr_assert(stats().disk_hits == 1 && stats().disk_corrupt == 0, "the file that won is whole");
  remove_dir(dir);
}

Test(compile, missing_compiler_is_unavailable_with_the_install_hint) {
  if (dls_compiler_version(DLS_COMPILER_HIPRTC, NULL, NULL) == DLS_OK)
    cr_skip_test("hipRTC is installed here: its absence cannot be shown");
  cr_assert(strstr(dls_last_error(), "hipRTC not found") != NULL, "%s", dls_last_error());
  cr_assert(strstr(dls_last_error(), "DLSTREAM_HIPRTC_LIBRARY") != NULL, "%s", dls_last_error());
  void *img;
  size_t n;
  FAILS(dls_compile(k_source, NULL, "gfx90a", &img, &n, NULL), DLS_ERR_UNAVAILABLE, "install ROCm's hipRTC");
  /* An explicit library that does not load is final: no fallback to another. */
  setenv("DLSTREAM_HIPRTC_LIBRARY", "/nonexistent/libhiprtc.so", 1);
  FAILS(dls_compile(k_source, NULL, "gfx90a", &img, &n, NULL), DLS_ERR_UNAVAILABLE,
        "DLSTREAM_HIPRTC_LIBRARY=/nonexistent/libhiprtc.so");
  unsetenv("DLSTREAM_HIPRTC_LIBRARY");
  /* A library without the entry points. */
  OK(dls_compiler_add_library(DLS_COMPILER_HIPRTC, "libm.so.6"));
  FAILS(dls_compiler_version(DLS_COMPILER_HIPRTC, NULL, NULL), DLS_ERR_UNAVAILABLE, "has no hiprtcGetErrorString");
}

Test(compile, module_compile_needs_a_gpu_device) {
  dls_module_t m = {7};
  FAILS(dls_module_compile(dls_cpu(), k_source, NULL, &m), DLS_ERR_NOT_SUPPORTED, "device=cpu:0");
  cr_assert_eq(m.id, 0);
  FAILS(dls_module_compile(dls_cpu(), k_source, NULL, NULL), DLS_ERR_INVALID_ARGUMENT, "out_module=NULL");
  FAILS(dls_module_compile(dls_cuda(0), NULL, NULL, &m), DLS_ERR_INVALID_ARGUMENT, "source=NULL");
  const char *out;
  FAILS(dls_module_lowered_name((dls_module_t){0}, "x", &out), DLS_ERR_INVALID_HANDLE, "module");
}

/* ---- on a GPU ---- */

Test(compile, module_from_source_launches_and_resolves_name_expressions) {
  DLDevice d = dlst_device(dlst_gpu_type());
  if (dls_compiler_version(d.device_type == kDLROCM ? DLS_COMPILER_HIPRTC : DLS_COMPILER_NVRTC, NULL, NULL) != DLS_OK)
    cr_skip_test("%s", dls_last_error());
  const char *exprs[] = {"scale<float>"};
  dls_compile_options_t o = DLS_COMPILE_OPTIONS_INIT;
  o.name_expressions = exprs;
  o.nname_expressions = 1;
  dls_module_t m;
  OK(dls_module_compile(d, k_source, &o, &m));
  const char *lowered;
  OK(dls_module_lowered_name(m, "scale<float>", &lowered));
  cr_assert_str_eq(lowered, "_Z5scaleIfEvPT_S0_i");
  FAILS(dls_module_lowered_name(m, "scale<int>", &lowered), DLS_ERR_NOT_FOUND, "name expressions: scale<float>");
  dls_function_t axpy, scale, by_lowered;
  OK(dls_module_function(m, "axpy", &axpy));
  OK(dls_module_function(m, "scale<float>", &scale));
  OK(dls_module_function(m, "_Z5scaleIfEvPT_S0_i", &by_lowered));
  dls_function_t missing;
  FAILS(dls_module_function(m, "axpyy", &missing), DLS_ERR_NOT_FOUND, "no kernel of that name in the module; it has:");
  cr_assert(strstr(dls_last_error(), "axpy") != NULL && strstr(dls_last_error(), "_Z5scaleIfEvPT_S0_i") != NULL,
            "both kernels listed: %s", dls_last_error());
  cr_assert(strstr(dls_last_error(), "name expressions: scale<float> (_Z5scaleIfEvPT_S0_i)") != NULL, "%s",
            dls_last_error());

  enum { N = 1000 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)i;
    y[i] = 1.0f;
  }
  dls_stream_t s;
  dls_buffer_t bx, by;
  OK(dls_stream_create(d, NULL, &s));
  OK(dls_buffer_alloc(s, sizeof x, &bx));
  OK(dls_buffer_alloc(s, sizeof y, &by));
  OK(dls_buffer_write(bx, 0, x, sizeof x, s));
  OK(dls_buffer_write(by, 0, y, sizeof y, s));
  dls_arg_t a1[] = {dls_arg_f32(2.0f), dls_arg_buffer(bx), dls_arg_buffer(by), dls_arg_i32(N)};
  OK(dls_launch(axpy, s, &(dls_launch_config_t){{4, 1, 1}, {256, 1, 1}, 0}, a1, 4));
  dls_arg_t a2[] = {dls_arg_buffer(by), dls_arg_f32(0.5f), dls_arg_i32(N)};
  OK(dls_launch(scale, s, &(dls_launch_config_t){{4, 1, 1}, {256, 1, 1}, 0}, a2, 3));
  OK(dls_buffer_read(by, 0, y, sizeof y, s));
  OK(dls_stream_synchronize(s));
  for (int i = 0; i < N; i++)
    cr_assert_float_eq(y[i], (2.0f * (float)i + 1.0f) * 0.5f, 1e-5, "y[%d] = %f", i, (double)y[i]);
  OK(dls_buffer_free(bx));
  OK(dls_buffer_free(by));
  OK(dls_stream_destroy(s));
  OK(dls_module_unload(m));
}
