/* SPDX-License-Identifier: Apache-2.0 */
/* The probe of bench/bench_torch_op.py: torch operators whose implementation is a boxed C function registered
 * through torch's stable C shim (aoti_torch_library_init_impl + aoti_torch_library_impl in libtorch), resolved at
 * run time with dlsym, no torch header and no C++. It measures what dlstream.torch would gain by registering its
 * implementation in C instead of Python: `noop` does what any C implementation must (take the tensor handles, read
 * their data pointers, let the handles go); `axpy` is the floor of a C implementation of the axpy operator (that,
 * plus the element count, torch's current CUDA stream and one cuLaunchKernel of a PTX axpy). The bench compiles
 * this file with the system's C compiler (cc -shared -fPIC) and loads it with ctypes. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int32_t shim_status; /* AOTITorchError: 0 is success */
typedef void (*boxed_fn)(uint64_t *stack, uint64_t num_args, uint64_t num_outputs);

static struct {
  shim_status (*library_init_impl)(const char *ns, const char *key, const char *file, uint32_t line, void **lib);
  shim_status (*library_impl)(void *lib, const char *name, boxed_fn fn);
  shim_status (*data_ptr)(void *tensor, void **out);
  shim_status (*numel)(void *tensor, int64_t *out);
  shim_status (*device_index)(void *tensor, int32_t *out);
  shim_status (*delete_tensor)(void *tensor);
  shim_status (*cuda_stream)(int32_t device, void **out);
  int (*cu_module_load_data)(void **module, const void *image);
  int (*cu_module_get_function)(void **function, void *module, const char *name);
  int (*cu_launch)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra);
  void *axpy;
  int failures;
} P;

static volatile uintptr_t sink;

/* (float a, Tensor x, Tensor(a!) y) -> (): the stack holds a's double bits and two owning tensor handles. */
static void probe_noop(uint64_t *stack, uint64_t num_args, uint64_t num_outputs) {
  void *x = (void *)(uintptr_t)stack[1], *y = (void *)(uintptr_t)stack[2], *px = NULL, *py = NULL;
  if (num_args != 3 || num_outputs != 0 || P.data_ptr(x, &px) != 0 || P.data_ptr(y, &py) != 0)
    P.failures++;
  sink = (uintptr_t)px ^ (uintptr_t)py;
  P.delete_tensor(x);
  P.delete_tensor(y);
}

static void probe_axpy(uint64_t *stack, uint64_t num_args, uint64_t num_outputs) {
  double a;
  memcpy(&a, &stack[0], sizeof a);
  void *x = (void *)(uintptr_t)stack[1], *y = (void *)(uintptr_t)stack[2], *px = NULL, *py = NULL, *stream = NULL;
  int64_t n = 0;
  int32_t dev = 0;
  if (num_args == 3 && num_outputs == 0 && P.numel(x, &n) == 0 && P.data_ptr(x, &px) == 0 &&
      P.data_ptr(y, &py) == 0 && P.device_index(x, &dev) == 0 && P.cuda_stream(dev, &stream) == 0 && n > 0) {
    uint64_t count = (uint64_t)n;
    float af = (float)a;
    void *params[] = {&count, &af, &px, &py};
    unsigned grid = (unsigned)((count + 255) / 256);
    if (P.cu_launch(P.axpy, grid, 1, 1, 256, 1, 1, 0, stream, params, NULL) != 0)
      P.failures++;
  } else {
    P.failures++;
  }
  P.delete_tensor(x);
  P.delete_tensor(y);
}

static const char AXPY_PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry axpy(.param .u64 n, .param .f32 a, .param .u64 x, .param .u64 y) {\n"
    "  .reg .pred %p; .reg .b32 %r<4>; .reg .b64 %rd<8>; .reg .f32 %f<4>;\n"
    "  ld.param.u64 %rd1, [n]; ld.param.f32 %f1, [a];\n"
    "  ld.param.u64 %rd2, [x]; ld.param.u64 %rd3, [y];\n"
    "  cvta.to.global.u64 %rd2, %rd2; cvta.to.global.u64 %rd3, %rd3;\n"
    "  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x;\n"
    "  mad.lo.u32 %r1, %r1, %r2, %r3; cvt.u64.u32 %rd4, %r1;\n"
    "  setp.ge.u64 %p, %rd4, %rd1; @%p bra DONE;\n"
    "  shl.b64 %rd5, %rd4, 2; add.s64 %rd6, %rd2, %rd5; add.s64 %rd7, %rd3, %rd5;\n"
    "  ld.global.f32 %f2, [%rd6]; ld.global.f32 %f3, [%rd7];\n"
    "  fma.rn.f32 %f3, %f1, %f2, %f3; st.global.f32 [%rd7], %f3;\n"
    "DONE:\n  ret;\n}\n";

/* The symbols, by library: 0 libtorch_cpu, 1 libtorch_cuda, 2 libcuda (the last two only for CUDA). */
static const struct {
  int lib;
  const char *name;
  void **slot;
} SYMBOLS[] = {
    {0, "aoti_torch_library_init_impl", (void **)&P.library_init_impl},
    {0, "aoti_torch_library_impl", (void **)&P.library_impl},
    {0, "aoti_torch_get_data_ptr", (void **)&P.data_ptr},
    {0, "aoti_torch_get_numel", (void **)&P.numel},
    {0, "aoti_torch_get_device_index", (void **)&P.device_index},
    {0, "aoti_torch_delete_tensor_object", (void **)&P.delete_tensor},
    {1, "aoti_torch_get_current_cuda_stream", (void **)&P.cuda_stream},
    {2, "cuModuleLoadData", (void **)&P.cu_module_load_data},
    {2, "cuModuleGetFunction", (void **)&P.cu_module_get_function},
    {2, "cuLaunchKernel", (void **)&P.cu_launch},
};

static int fail(char *err, int errlen, const char *what, const char *detail) {
  snprintf(err, (size_t)errlen, "%s: %s", what, detail ? detail : "failed");
  return -1;
}

/* Registers ns::noop_c for `key` ("CPU" or "CUDA") and, for CUDA, ns::axpy_c (the operators must be defined
 * already). torch_cpu, torch_cuda: the paths of the loaded libtorch_cpu.so and libtorch_cuda.so (NULL: no CUDA).
 * Returns 0, or -1 with a message in err. */
int dls_probe_register(const char *torch_cpu, const char *torch_cuda, const char *ns, const char *key, char *err,
                       int errlen) {
  const char *paths[] = {torch_cpu, torch_cuda, "libcuda.so.1"};
  int nlibs = torch_cuda == NULL ? 1 : 3;
  void *libs[3];
  for (int i = 0; i < nlibs; i++)
    if ((libs[i] = dlopen(paths[i], RTLD_NOW | (i < 2 ? RTLD_NOLOAD : 0))) == NULL)
      return fail(err, errlen, paths[i], dlerror());
  for (size_t i = 0; i < sizeof SYMBOLS / sizeof SYMBOLS[0]; i++)
    if (SYMBOLS[i].lib < nlibs && (*SYMBOLS[i].slot = dlsym(libs[SYMBOLS[i].lib], SYMBOLS[i].name)) == NULL)
      return fail(err, errlen, SYMBOLS[i].name, "not found");
  void *lib = NULL;
  if (P.library_init_impl(ns, key, __FILE__, __LINE__, &lib) != 0 || P.library_impl(lib, "noop_c", probe_noop) != 0)
    return fail(err, errlen, "aoti_torch_library_impl(noop_c)", NULL);
  if (torch_cuda == NULL)
    return 0;
  void *module = NULL; /* loaded in torch's current (primary) context */
  if (P.cu_module_load_data(&module, AXPY_PTX) != 0 || P.cu_module_get_function(&P.axpy, module, "axpy") != 0)
    return fail(err, errlen, "cuModuleLoadData/cuModuleGetFunction of the PTX axpy", NULL);
  if (P.library_impl(lib, "axpy_c", probe_axpy) != 0)
    return fail(err, errlen, "aoti_torch_library_impl(axpy_c)", NULL);
  return 0;
}

/* Calls that could not do their work (a shim call failed): the bench reports them. */
int dls_probe_failures(void) { return P.failures; }
