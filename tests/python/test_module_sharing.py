# SPDX-License-Identifier: Apache-2.0
"""Module.from_source shares the compiled image, not the Module: two libraries that compile the same kernel each get
a Module of their own, and one closing its Module leaves the other's functions working, eagerly and inside a
compiled jax.jit program; the image is loaded once and unloaded with the last Module and the cache. Without a GPU the
eager checks run in a fresh interpreter on the null CUDA driver (bench/null_driver.c, which loads any image and
launches nothing) with the real NVRTC; the GPU variants run on a CUDA device."""
import json
import os
import textwrap

import pytest

import dlstream
from conftest import HAVE_CUDA, run_python

try:
    dlstream.compiler_version("cuda")
    NVRTC_WHY = ""
except dlstream.UnavailableError as e:
    NVRTC_WHY = str(e)
needs_nvrtc = pytest.mark.skipif(bool(NVRTC_WHY), reason=f"no NVRTC here: {NVRTC_WHY}")

BUILD = os.environ.get("DLSTREAM_TESTS_BUILD_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(dlstream.__file__))))
NULL_DRIVER = os.path.join(BUILD, "bench", "null_driver")
needs_null_driver = pytest.mark.skipif(not os.path.exists(os.path.join(NULL_DRIVER, "libcuda.so.1")),
                                       reason=f"no null CUDA driver (bench/null_driver.c) in {NULL_DRIVER}: it is "
                                              "built in a build tree (an installed dlstream: set "
                                              "DLSTREAM_TESTS_BUILD_DIR)")

SOURCE = r"""
extern "C" __global__ void axpy(unsigned long long n, float a, const float *x, float *y) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
template <typename T> __global__ void scale(T *p, T s, unsigned long long n) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) p[i] *= s;
}
"""

# Two "libraries" compile SOURCE; the second closes its Module. Prints what each step saw, as JSON.
NULL_DRIVER_CHILD = r'''
import json, os, tempfile
import dlstream
ext = dlstream._dlstream
os.environ["DLSTREAM_CACHE_DIR"] = tempfile.mkdtemp()
SRC = {src!r}
out = {{}}

def modules():  # native modules loaded and unloaded (fault-injection builds count them)
    return list(ext._fault_objects()["module"]) if hasattr(ext, "_fault_objects") else None

def launches(fn):
    try:
        fn.launch(1, 1, 0, 1.0, None, None)
        return "ok"
    except dlstream.Error as e:
        return type(e).__name__ + ": " + str(e)

base = modules()
lib_a = dlstream.Module.from_source(SRC, name_expressions=["scale<float>"], device="cuda:0")
lib_b = dlstream.Module.from_source(SRC, name_expressions=["scale<float>"], device="cuda:0")
out["same_object"] = lib_a is lib_b
stats = ext._compile_stats()
out["hits"], out["misses"], out["compiles"] = stats["module_hits"], stats["module_misses"], stats["compiles"]
fa, fb = lib_a.function("axpy", "u64,f32,cp,p"), lib_b.function("axpy", "u64,f32,cp,p")
out["names_b"] = lib_b.function("scale<float>").name
lib_b.close()
out["a_after_b_closed"] = launches(fa)
out["a_lookup_after_b_closed"] = lib_a.function("scale<float>").name
out["b_after_b_closed"] = launches(fb)
out["b_closed"], out["a_closed"] = lib_b.closed, lib_a.closed
with dlstream.Module.from_source(SRC, name_expressions=["scale<float>"], device="cuda:0") as lib_c:
    out["c_works"] = launches(lib_c.function("axpy", "u64,f32,cp,p"))
out["a_after_c_closed"] = launches(fa)
out["compiles_after"] = ext._compile_stats()["compiles"]
out["loaded_while_shared"] = None if base is None else modules()[0] - base[0]
lib_a.close()
del fa, fb
out["a_after_a_closed"] = launches(lib_a.function("axpy")) if not lib_a.closed else "closed"
d = dlstream.Module.from_source(SRC, name_expressions=["scale<float>"], device="cuda:0")
out["d_works_after_all_closed"] = launches(d.function("axpy", "u64,f32,cp,p"))
out["compiles_final"] = ext._compile_stats()["compiles"]
del d
ext._compile_cache_clear()
out["loaded_unloaded"] = None if base is None else [m - b for m, b in zip(modules(), base)]
print(json.dumps(out))
'''


@needs_nvrtc
@needs_null_driver
def test_closing_one_from_source_module_leaves_the_others_working_null_driver():
    r = run_python(NULL_DRIVER_CHILD.format(src=SOURCE), env={"LD_LIBRARY_PATH": NULL_DRIVER}, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["same_object"] is False, "each caller gets a Module of its own"
    assert (out["hits"], out["misses"], out["compiles"]) == (1, 1, 1), out
    assert out["names_b"] == "scale<float>", "the second Module answers to the name expressions too"
    assert out["a_after_b_closed"] == "ok", f"closing B's Module broke A's function: {out['a_after_b_closed']}"
    assert out["a_lookup_after_b_closed"] == "scale<float>"
    assert out["b_after_b_closed"].startswith("InvalidHandleError") and "module was closed" in out["b_after_b_closed"]
    assert out["b_closed"] and not out["a_closed"]
    assert out["c_works"] == "ok" and out["a_after_c_closed"] == "ok"
    assert out["compiles_after"] == 1, "the image is compiled once"
    assert out["d_works_after_all_closed"] == "ok" and out["compiles_final"] == 1
    if out["loaded_while_shared"] is not None:  # fault-injection builds count native modules
        assert out["loaded_while_shared"] == 1, "the image is loaded once for every Module of the source"
        assert out["loaded_unloaded"] == [1, 1], "unloaded with the last Module and the cache"


@needs_nvrtc
@needs_null_driver
def test_cache_off_gives_a_module_whose_close_unloads_its_image_null_driver():
    code = textwrap.dedent(r'''
        import json, dlstream
        ext = dlstream._dlstream
        cached = dlstream.Module.from_source(SRC, device="cuda:0")
        own = dlstream.Module.from_source(SRC, device="cuda:0", cache=False)
        before = list(ext._fault_objects()["module"]) if hasattr(ext, "_fault_objects") else None
        own.close()
        after = list(ext._fault_objects()["module"]) if hasattr(ext, "_fault_objects") else None
        f = cached.function("axpy", "u64,f32,cp,p")
        f.launch(1, 1, 0, 1.0, None, None)
        print(json.dumps({"before": before, "after": after, "misses": ext._compile_stats()["module_misses"]}))
    ''').replace("SRC", repr(SOURCE))
    r = run_python(code, env={"LD_LIBRARY_PATH": NULL_DRIVER}, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["misses"] == 2, "cache=False compiles and loads an image of its own"
    if out["before"] is not None:
        assert out["after"][1] == out["before"][1] + 1, "closing a cache=False Module unloads its image"


# ---- on a GPU ----

def _gpu_or_skip():
    if not HAVE_CUDA:
        pytest.skip("no CUDA device: " + dlstream.backend_available("cuda")[1])
    if NVRTC_WHY:
        pytest.skip(f"no NVRTC here: {NVRTC_WHY}")


def test_closing_one_from_source_module_leaves_the_others_working_gpu():
    _gpu_or_skip()
    import numpy as np
    n = 4096
    lib_a = dlstream.Module.from_source(SOURCE, device="cuda:0")
    lib_b = dlstream.Module.from_source(SOURCE, device="cuda:0")
    assert lib_a is not lib_b
    axpy = lib_a.function("axpy", "u64,f32,cp,p")
    x = np.full(n, 2.0, np.float32)
    y = np.ones(n, np.float32)
    lib_b.close()  # the other library is done with its Module
    axpy.launch((n + 255) // 256, 256, n, 3.0, x, y)  # host arrays: staged through the device, written back
    np.testing.assert_array_equal(y, np.full(n, 7.0, np.float32))
    with pytest.raises(dlstream.InvalidHandleError, match="module was closed"):
        lib_b.function("axpy")


def test_closing_one_from_source_module_leaves_a_compiled_jit_program_working_gpu():
    _gpu_or_skip()
    jax = pytest.importorskip("jax", reason="JAX is not installed (pip install jax): dlstream.jax needs it")
    dj = pytest.importorskip("dlstream.jax")
    import jax.numpy as jnp
    import numpy as np
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        pytest.skip("this JAX has no CUDA backend (pip install 'jax[cuda13]')")
    src = SOURCE + "// jit\n"
    with jax.default_device(gpus[0]):
        lib_a = dlstream.Module.from_source(src, device="cuda:0")
        k = dj.kernel(lib_a.function("axpy", signature="u64,f32,cp,p"), in_place=[3],
                      grid=lambda n, a, x, y: (n + 255) // 256, block=256)
        step = jax.jit(lambda x, y: k(x.size, 2.0, x, y))
        x = jnp.arange(4096, dtype=jnp.float32)
        y = jnp.ones(4096, jnp.float32)
        np.testing.assert_array_equal(np.asarray(step(x, y)), 2.0 * np.asarray(x) + 1.0)  # compiled and run once
        lib_b = dlstream.Module.from_source(src, device="cuda:0")
        lib_b.close()  # another library closes its Module of the same source
        np.testing.assert_array_equal(np.asarray(step(x, y)), 2.0 * np.asarray(x) + 1.0)
    dlstream._dlstream._xla_release()
