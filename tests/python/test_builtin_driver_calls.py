# SPDX-License-Identifier: Apache-2.0
"""What the built-ins ask of the CUDA driver per call, without a GPU: a fresh interpreter on the null CUDA driver
(bench/null_driver.c, which counts launches, stream waits, host synchronizations, allocations, copies and module
loads) with tests/python/fake_cupy's arrays at fixed device addresses. Once warm, each dlstream.fill, axpy, copy
(contiguous and strided) and conversion on CuPy's current stream is one cuLaunchKernel and nothing else of
those: no host wait, no allocation, no copy of a descriptor, no module load, no stream wait. A launch path that
synchronized, allocated or loaded per call (a fixed cost of ~17 us a call on an H200) fails here by name.
(What the kernel itself costs per launch is tests/c/kernels_stack.cmake's: the kernels' stack frames.)"""
import pytest

test_cupy_path = pytest.importorskip("test_cupy_path")
pytestmark = test_cupy_path.pytestmark

BODY = '''
lib.dls_null_host_stats.argtypes = [ctypes.POINTER(ctypes.c_ulong)] * 4

def counts():
    s, n, w = stats()
    h = [ctypes.c_ulong() for _ in range(4)]
    lib.dls_null_host_stats(*[ctypes.byref(v) for v in h])
    return [n, w] + [v.value for v in h]

half = cupy.ndarray(0x7f0000040000, (1024,), np.dtype("float16"))
src2 = cupy.ndarray(0x7f0000050000, (512,), f32, strides=(8,))
dst2 = cupy.ndarray(0x7f0000060000, (512,), f32)
calls = {
    "fill": lambda: dlstream.fill(y, 1.5),
    "axpy": lambda: dlstream.axpy(2.0, x, y),
    "copy": lambda: dlstream.copy(y, x),
    "strided copy": lambda: dlstream.copy(dst2, src2),
    "convert float32 -> float16": lambda: dlstream.copy(half, x),
    "convert float16 -> float32": lambda: dlstream.copy(y, half),
}
try:
    with cupy.cuda.Stream(S1):
        for name, call in calls.items():
            call()  # warm: the built-in module is loaded at the first use
            before = counts()
            for _ in range(10):
                call()
            out[name] = [a - b for a, b in zip(counts(), before)]
except dlstream.UnavailableError:  # built without nvcc: no built-in kernels
    out["unavailable"] = True
'''

NAMES = ["launches", "stream waits", "host synchronizations", "allocations", "copies and sets", "module loads"]


def test_each_builtin_call_is_one_launch_and_nothing_else():
    got = test_cupy_path.run(BODY, True)
    if got.get("unavailable"):
        pytest.skip("dlstream was built without nvcc: no CUDA built-in kernels")
    for name, deltas in got.items():
        seen = dict(zip(NAMES, deltas))
        assert seen == {"launches": 10, **{k: 0 for k in NAMES[1:]}}, f"10 calls of {name}: {seen}"
