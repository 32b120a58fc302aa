# SPDX-License-Identifier: Apache-2.0
"""The anchors of bench_python.py's launch rows, each launching the same axpy on the same arrays as dlstream's row
beside it: cuLaunchKernel through ctypes on libcuda (on the CUfunction dlstream launches), cuda.core's launch, and
CuPy's RawKernel inside `with cupy.cuda.Stream()`; and the PTX of empty kernels for the rows that count tensor
arguments."""
import ctypes
import sys

from gpubench import measure_loop

AXPY_SRC = r"""
extern "C" __global__ void axpy(unsigned long long n, float a, const float *x, float *y) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


def empty_ptx(n):
    """PTX of an empty kernel `touch` taking n pointer parameters."""
    params = ", ".join(f".param .u64 p{i}" for i in range(n))
    return (".version 7.0\n.target sm_70\n.address_size 64\n"
            f".visible .entry touch({params}) {{\n  ret;\n}}\n")


def raw_launch_row(axpy, x, y, N, calls, reps, sync):
    """cuLaunchKernel through ctypes on libcuda, on the same CUfunction dlstream launches."""
    try:
        from cuda.bindings import driver  # noqa: F401
    except Exception:  # noqa: BLE001
        pass
    try:
        import torch
        lib = ctypes.CDLL("libcuda.so.1")
        fn = dlstream_native_function(axpy)
        if fn is None:
            return None
        n = ctypes.c_uint64(N)
        a = ctypes.c_float(1.0)
        px, py = ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr())
        params = (ctypes.c_void_p * 4)(ctypes.addressof(n), ctypes.addressof(a), ctypes.addressof(px),
                                       ctypes.addressof(py))
        launch = lib.cuLaunchKernel
        launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        stream = torch.cuda.current_stream().cuda_stream

        def raw_loop(k):
            for _ in range(k):
                launch(fn, 4, 1, 1, 256, 1, 1, 0, stream, params, None)

        return ("raw cuLaunchKernel (ctypes on libcuda, same kernel)", measure_loop(raw_loop, calls, reps, sync), "raw")
    except Exception as e:  # noqa: BLE001
        print(f"note: raw cuLaunchKernel row skipped: {e}", file=sys.stderr)
        return None


def dlstream_native_function(axpy):
    """The CUfunction of a built-in, looked up in dlstream's fatbin through the driver (cuModuleGetFunction)."""
    import dlstream
    lib = ctypes.CDLL("libcuda.so.1")
    import glob
    import os
    fatbins = glob.glob(os.path.join(os.path.dirname(__file__), "..", "build*", "**", "dls_kernels.fatbin"),
                        recursive=True)
    if not fatbins:
        print("note: raw cuLaunchKernel row skipped: no dls_kernels.fatbin in a build directory", file=sys.stderr)
        return None
    data = open(fatbins[0], "rb").read()
    mod = ctypes.c_void_p()
    dlstream.Stream.legacy("cuda:0").synchronize()  # the primary context is current on this thread
    if lib.cuModuleLoadData(ctypes.byref(mod), data) != 0:
        return None
    fn = ctypes.c_void_p()
    if lib.cuModuleGetFunction(ctypes.byref(fn), mod, b"dls_axpy_f32") != 0:
        return None
    return fn


def cuda_core_row(x, y, N, calls, reps, sync):
    import numpy as np
    import torch
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    dev = Device()
    dev.set_current()
    prog = Program(AXPY_SRC, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
    ker = prog.compile("cubin").get_kernel("axpy")
    stream = dev.create_stream(torch.cuda.current_stream())
    cfg = LaunchConfig(grid=4, block=256)
    n, a, px, py = np.uint64(N), np.float32(1.0), x.data_ptr(), y.data_ptr()

    def loop(k):
        for _ in range(k):
            launch(stream, cfg, ker, n, a, px, py)

    return ("cuda.core launch with int pointers", measure_loop(loop, calls, reps, sync), None)


def cupy_stream_rows(args, k, cx, cy, N):
    """Inside `with cupy.cuda.Stream():`, a dlstream launch on CuPy arrays (it runs on CuPy's current stream) beside
    CuPy's RawKernel on the same arrays and stream. Target: dlstream not slower than RawKernel."""
    import cupy
    import dlstream
    calls, reps = args.calls, args.reps
    launch = dlstream.builtin_function("dls_axpy_f32", "cuda:0").launch
    a32, n64 = cupy.float32(1.0), cupy.uint64(N)
    s = cupy.cuda.Stream(non_blocking=True)

    def dls_loop(n):
        with s:
            for _ in range(n):
                launch(4, 256, N, 1.0, cx, cy)

    def raw_loop(n):
        with s:
            for _ in range(n):
                k((4,), (256,), (n64, a32, cx, cy))

    t_dls = measure_loop(dls_loop, calls, reps, s.synchronize)
    t_raw = measure_loop(raw_loop, calls, reps, s.synchronize)
    print(f"CuPy current stream: dlstream launch {t_dls:.2f} µs, RawKernel {t_raw:.2f} µs, "
          f"ratio {t_dls / t_raw:.2f} (target <= 1.0)")
    return [("dlstream launch: axpy on 2 CuPy arrays inside `with cupy.cuda.Stream()` (runs on it)", t_dls,
             "cupy_stream"),
            ("CuPy RawKernel, same arrays, inside the same `with cupy.cuda.Stream()`", t_raw, "cupy_stream_raw")]
