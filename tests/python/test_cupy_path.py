# SPDX-License-Identifier: Apache-2.0
"""CuPy arrays read in C (interop/python/call/cupy.c), without CuPy or a GPU: each test runs a fresh interpreter on
the null CUDA driver (bench/null_driver.c, which records the stream of the latest launch and counts stream waits)
with tests/python/fake_cupy as `cupy`, once as a CuPy before 14.3 (attributes) and once with the public C API of
14.3. The checks: a launch inside `with cupy.cuda.Stream()` runs on that stream, reading no array interface and
calling no Python provider; outside it, on the legacy default stream; another stream waits for CuPy's; a provider
the user registers for CuPy takes over; arrays of another device, values that cannot be streams and arrays the
built-ins refuse give the errors of the general path."""
import json
import os
import sys
import textwrap

import pytest

import dlstream
from conftest import run_python

# The build tree: the one dlstream was imported from, or (an installed dlstream, scripts/wheel-check) the one
# DLSTREAM_TESTS_BUILD_DIR names.
BUILD = os.environ.get("DLSTREAM_TESTS_BUILD_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(dlstream.__file__))))
NULL_DRIVER = os.path.join(BUILD, "bench", "null_driver")
FAKE_CUPY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_cupy")

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(NULL_DRIVER, "libcuda.so.1")),
                                reason=f"no null CUDA driver (bench/null_driver.c) in {NULL_DRIVER}: it is built in "
                                       "a build tree (an installed dlstream: set DLSTREAM_TESTS_BUILD_DIR)")

PRELUDE = r'''
import ctypes, json, sys
import numpy as np
import dlstream
import cupy
import _dls_fake_cupy as fc
lib = ctypes.CDLL("libcuda.so.1")
lib.dls_null_stats.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_ulong),
                               ctypes.POINTER(ctypes.c_ulong)]

def stats():
    s, n, w = ctypes.c_void_p(), ctypes.c_ulong(), ctypes.c_ulong()
    lib.dls_null_stats(ctypes.byref(s), ctypes.byref(n), ctypes.byref(w))
    return s.value or 0, n.value, w.value

keep = [ctypes.create_string_buffer(64) for _ in range(3)]   # readable addresses: streams the null driver takes
S1, S2, S3 = (ctypes.addressof(b) for b in keep)
f32 = np.dtype("float32")
x = cupy.ndarray(0x7f0000000000, (1024,), f32)
y = cupy.ndarray(0x7f0000010000, (1024,), f32)
PTX = b".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry axpy() {\n  ret;\n}\n"
axpy = dlstream.Module(PTX, device="cuda:0").function("axpy", "u64,f32,cp,p")   # the null driver loads anything
out = {}
'''


def run(body, c_api):
    env = {"LD_LIBRARY_PATH": NULL_DRIVER, "DLS_FAKE_CUPY_C_API": "1" if c_api else "0"}
    code = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    # the stand-in first: a real CuPy in site-packages must not shadow it
    r = run_python(code, env={**env, "PYTHONPATH": os.pathsep.join([FAKE_CUPY] + [p for p in sys.path if p])})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(params=[False, True], ids=["attributes", "c_api"])
def c_api(request):
    return request.param


def test_launch_runs_on_cupys_current_stream_without_the_interface(c_api):
    got = run('''
        with cupy.cuda.Stream(S1):
            axpy.launch(4, 256, 1024, 1.0, x, y)
            out["inside"] = stats()
            axpy.launch(4, 256, 1024, 2.0, x, y)
            out["again"] = stats()
        axpy.launch(4, 256, 1024, 1.0, x, y)
        out["outside"] = stats()
        with cupy.cuda.Stream(S2):
            axpy.launch(4, 256, 1024, 1.0, x, y)
            out["other"] = stats()
        out["counters"] = fc.counters()
    ''', c_api)
    s1, s2 = got["inside"][0], got["other"][0]
    assert s1 != 0 and s2 not in (0, s1)
    assert got["inside"][2] == 0 and got["again"] == [s1, got["inside"][1] + 1, 0], "on CuPy's stream: no wait"
    assert got["outside"][0] == 0, "outside any `with`: CuPy's null stream, the legacy default stream"
    assert got["counters"]["cai"] == 0, "the C path reads no __cuda_array_interface__"
    assert (got["counters"]["c_api"] > 0) == c_api


def test_another_stream_waits_for_cupys(c_api):
    """(That the arrays are kept until the stream passes is not visible here: the null driver's events complete at
    once. The CPU tests of the exchange-API path check it; both paths share dlspy_order_after.)"""
    got = run('''
        s = dlstream.Stream("cuda:0")
        with cupy.cuda.Stream(S1):
            axpy.launch(4, 256, 1024, 1.0, x, y, stream=s)
            out["stats"] = stats()
            out["ptr"] = s.ptr
        s.synchronize()
        s.close()
    ''', c_api)
    assert got["stats"][0] == got["ptr"]
    assert got["stats"][2] == 2, "one wait on CuPy's stream for both arrays, then CuPy's stream waits for the launch"


def test_a_registered_provider_takes_over(c_api):
    got = run('''
        calls = []
        def mine(arr):
            calls.append(1)
            return S3
        dlstream.register_stream_provider("cupy", mine)
        with cupy.cuda.Stream(S1):
            axpy.launch(4, 256, 1024, 1.0, x, y)
        out["stream"] = stats()[0]
        out["calls"] = len(calls)
        dlstream.register_stream_provider("cupy", dlstream._providers.cupy_current_stream)
        with cupy.cuda.Stream(S1):
            axpy.launch(4, 256, 1024, 1.0, x, y)
        out["back"] = stats()[0]
        out["S"] = [S1, S3]
    ''', c_api)
    assert got["stream"] == got["S"][1] and got["calls"] == 1
    assert got["back"] == got["S"][0], "the package's provider back: the C path again"


def test_subclass_and_builtin_views(c_api):
    got = run('''
        class Sub(cupy.ndarray):
            pass
        sx = Sub(0x7f0000020000, (1024,), f32)
        with cupy.cuda.Stream(S1):
            axpy.launch(4, 256, 1024, 1.0, sx, y)
            out["sub"] = stats()[0] == S1
            out["cai_sub"] = fc.counters()["cai"]
            try:
                dlstream.axpy(2.0, x, y)
                out["axpy"] = stats()[0] == S1
            except dlstream.UnavailableError:  # built without nvcc: no built-in kernels
                out["axpy"] = "unavailable"
            strided = cupy.ndarray(0x7f0000030000, (512,), f32, strides=(8,))
            half = cupy.ndarray(0x7f0000040000, (1024,), np.dtype("float16"))
            for name, args in (("strided", (2.0, strided, strided)), ("half", (2.0, half, half))):
                try:
                    dlstream.axpy(*args)
                    out[name] = "no error"
                except dlstream.InvalidArgumentError as e:
                    out[name] = str(e)
        out["cai"] = fc.counters()["cai"]
    ''', c_api)
    assert got["sub"]
    # A subclass defined elsewhere has no provider (they are found by type or by the type's module name), so its
    # version-3 array interface names the stream, read once; the C path takes only what the provider covers.
    assert got["cai_sub"] == 1
    if got["axpy"] != "unavailable":
        assert got["axpy"] is True
        assert "contiguous" in got["strided"] and "float32 or float64" in got["half"]
    assert got["cai"] == got["cai_sub"], "the built-ins read CuPy arrays in C too"


def test_refusals(c_api):
    got = run('''
        other = cupy.ndarray(0x7f0000050000, (1024,), f32, device_id=1)
        with cupy.cuda.Stream(S1):
            try:
                axpy.launch(4, 256, 1024, 1.0, x, other)
            except dlstream.InvalidDeviceError as e:
                out["device"] = str(e)
        with cupy.cuda.Stream(5):
            try:
                axpy.launch(4, 256, 1024, 1.0, x, y)
            except dlstream.InvalidArgumentError as e:
                out["stream"] = str(e)
    ''', c_api)
    assert "args[3]" in got["device"] and "cuda:1" in got["device"]
    assert "cannot be a stream" in got["stream"] or "not a stream" in got["stream"]
