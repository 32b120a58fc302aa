# SPDX-License-Identifier: Apache-2.0
"""dlstream.jax on CUDA: a built-in and a kernel from source under jit on XLA's stream, donation, errors from the
CUDA handler, ordering against XLA's ops before and after with no host sync (latch, negative control), and a run
with XLA's command buffers for custom calls (the handler recorded once, replays correct). Skipped, with the
reason, without JAX with a CUDA device."""
import json
import os
import sys

import numpy as np
import pytest

import dlstream
from conftest import HAVE_CUDA, run_python

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX would take 75% of the GPU's memory
jax = pytest.importorskip("jax", reason="JAX is not installed (pip install jax): dlstream.jax needs it")
jnp = pytest.importorskip("jax.numpy")
dj = pytest.importorskip("dlstream.jax")


def _jax_gpus():
    try:
        return jax.devices("gpu")
    except RuntimeError:
        return []


GPUS = _jax_gpus() if HAVE_CUDA else []
pytestmark = pytest.mark.skipif(not GPUS, reason="no CUDA device for dlstream" if not HAVE_CUDA else
                                "this JAX has no CUDA backend (pip install 'jax[cuda13]')")
DEV = "cuda:0"
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_gpu_child.py")

SOURCE = r"""
extern "C" __global__ void scale_add(unsigned long long n, float a, const float *x, const float *y, float *out) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
"""


@pytest.fixture(autouse=True)
def _on_gpu():
    with jax.default_device(GPUS[0]):
        yield


@pytest.fixture(scope="module", autouse=True)
def _release_wrappers():
    yield
    dlstream._dlstream._xla_release()


def axpy():
    return dj.kernel(dlstream.builtin_function("dls_axpy_f32", DEV), in_place=[3],
                     grid=lambda n, a, x, y: (n + 255) // 256, block=256)


def test_builtin_under_jit_runs_on_xlas_stream():
    k = axpy()
    stats = dlstream._dlstream._xla_stats()
    x = jnp.arange(1 << 20, dtype=jnp.float32)
    y = jnp.ones(1 << 20, jnp.float32)
    out = jax.jit(lambda x, y: k(x.size, 3.0, x, y))(x, y)
    np.testing.assert_array_equal(np.asarray(out), 3.0 * np.asarray(x) + 1.0)
    np.testing.assert_array_equal(np.asarray(y), np.ones(1 << 20))
    after = dlstream._dlstream._xla_stats()
    assert after["instantiations"] > stats["instantiations"]
    assert after["executions"] == stats["executions"] + 1
    wraps = after["stream_wraps"]
    jax.block_until_ready(jax.jit(lambda x, y: k(x.size, 3.0, x, y))(x, y))
    assert dlstream._dlstream._xla_stats()["stream_wraps"] == wraps, "XLA's stream wrapper is kept"


def test_kernel_from_source_with_an_output_and_a_grid_from_shapes():
    try:
        mod = dlstream.Module.from_source(SOURCE, device=DEV)
    except dlstream.UnavailableError as e:
        pytest.skip(f"no NVRTC: {e}")
    k = dj.kernel(mod.function("scale_add", signature="u64,f32,cp,cp,p"),
                  lambda n, a, x, y: jax.ShapeDtypeStruct(x.shape, x.dtype),
                  grid=lambda n, a, x, y: ((n + 127) // 128,), block=128)
    x = jnp.linspace(-1, 1, 100_000, dtype=jnp.float32)
    y = jnp.cos(x)
    out = jax.jit(lambda x, y: k(x.size, -0.5, x, y) * 2.0)(x, y)
    np.testing.assert_allclose(np.asarray(out), np.asarray((-0.5 * x + y) * 2.0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(lambda x, y: k(x.size, 2.0, x, y)))(
        x.reshape(4, -1), y.reshape(4, -1))), np.asarray(2.0 * x + y).reshape(4, -1), rtol=1e-6)


def test_donated_state_is_updated_in_place():
    k = axpy()
    c = jnp.full(4096, 2.0, jnp.float32)
    y = jnp.zeros(4096, jnp.float32)
    where = y.unsafe_buffer_pointer()
    step = jax.jit(lambda c, y: k(c.size, 1.0, c, y), donate_argnums=1)
    y = step(c, y)
    assert y.unsafe_buffer_pointer() == where
    y = step(c, y)
    np.testing.assert_array_equal(np.asarray(y), np.full(4096, 4.0))


def test_errors_from_the_cuda_handler_carry_dlstreams_message():
    cpu_fn = dj.kernel(dlstream.builtin_function("dls_axpy_f32", "cpu"), in_place=[3])
    x = jnp.ones(16, jnp.float32)
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"dlstream XLA call \(cuda\): the function is on cpu:0, "
                                                        r"but XLA runs this call on its cuda platform"):
        jax.block_until_ready(jax.jit(lambda x: cpu_fn(16, 1.0, x, x))(x))
    try:
        mod = dlstream.Module.from_source(SOURCE + "// closed\n", device=DEV, cache=False)
    except dlstream.UnavailableError as e:
        pytest.skip(f"no NVRTC: {e}")
    k = dj.kernel(mod.function("scale_add", signature="u64,f32,cp,cp,p"), jax.ShapeDtypeStruct((16,), jnp.float32))
    mod.close()  # the kernel is gone: the instantiate stage says so
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"dlstream XLA call \(cuda\): "
                                                        r"dls_function_name\(function\): function handle is stale"):
        jax.block_until_ready(jax.jit(lambda x: k(16, 1.0, x, x))(x))


def test_grid_none_runs_builtins_on_the_cores_grid_and_only_builtins():
    """grid=None: the handler runs the built-in as dlstream's own calls do (the vector twin for aligned whole
    vectors, the built-in's own kernel for a partial vector at the end); a kernel of a module is refused when made
    and, in a call written by hand, by the handler."""
    k = dj.kernel("dls_axpy_f32", in_place=[3], grid=None)
    for n in (1 << 20, (1 << 20) + 3):
        x, y = jnp.arange(n, dtype=jnp.float32), jnp.ones(n, jnp.float32)
        out = jax.jit(lambda x, y: k(x.size, 3.0, x, y))(x, y)
        np.testing.assert_array_equal(np.asarray(out), 3.0 * np.asarray(x) + 1.0)
    try:
        mod = dlstream.Module.from_source(SOURCE, device=DEV)
    except dlstream.UnavailableError as e:
        pytest.skip(f"no NVRTC: {e}")
    f = mod.function("scale_add", signature="u64,f32,cp,cp,p")
    with pytest.raises(dlstream.InvalidArgumentError, match=r"grid=None\): only a built-in runs on the core's own "
                                                            r"grid"):
        dj.kernel(f, jax.ShapeDtypeStruct((16,), jnp.float32), grid=None)
    dj.register()
    x = jnp.ones(16, jnp.float32)
    attrs = {"dls_cfg": np.array([1, f.handle, 0, 0, 0, 0, 0, 0, 0, 2, 0], np.int64),
             "dls_args": np.array([3 | 8 << 32, 3 | 8 << 8 | 4 << 32, 1, 1 | 1 << 8, 2], np.int64),
             "dls_vals": np.zeros(16, np.uint8)}
    call = jax.ffi.ffi_call(dj.TARGET, [jax.ShapeDtypeStruct((16,), jnp.float32)])
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"only a built-in runs on the core's own grid"):
        jax.block_until_ready(jax.jit(lambda x: call(x, x, **attrs))(x))


def test_a_builtin_by_name_runs_on_xlas_cpu_platform_too():
    """A kernel made by name on a machine whose JAX backend is the GPU carries the built-in's CPU twin (dls_cpu_fn):
    a call XLA runs on its CPU platform takes it, where it would otherwise meet the GPU's function."""
    k = dj.kernel("dls_axpy_f32", in_place=[3], grid=None)
    with jax.default_device(jax.devices("cpu")[0]):
        x, y = jnp.arange(1027, dtype=jnp.float32), jnp.ones(1027, jnp.float32)
        out = jax.jit(lambda x, y: k(x.size, 3.0, x, y))(x, y)
        assert out.devices() == {jax.devices("cpu")[0]}
        np.testing.assert_array_equal(np.asarray(out), 3.0 * np.asarray(x) + 1.0)
    x = jnp.arange(1027, dtype=jnp.float32)  # and on the GPU, the same kernel
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: k(x.size, 3.0, x, x))(x)), 4.0 * np.asarray(x))


def _child(scenario, flags):
    env = {"XLA_FLAGS": flags, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    r = run_python(f"import runpy, sys; sys.argv = [{CHILD!r}, {scenario!r}]; runpy.run_path({CHILD!r}, "
                   "run_name='__main__')", env=env, timeout=300)
    lines = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
    assert r.returncode == 0 and lines, f"{scenario} failed (rc {r.returncode}):\n{r.stdout[-3000:]}\n" \
                                        f"{r.stderr[-6000:]}"
    result = json.loads(lines[-1][len("RESULT "):])
    print(scenario, flags, result, file=sys.stderr)
    return result


def test_ordering_against_xla_ops_before_and_after_without_host_sync():
    """In a fresh process with command buffers off (dlstream refuses latch waits in captures). CUDA's lazy loading
    is no hazard here: XLA gets its kernels (cuModuleGetFunction, which loads them) when it initializes the
    program, before the latch holds the stream; dlstream loads its own at lookup; a warm-up run comes first."""
    r = _child("ordering", "--xla_gpu_enable_command_buffer=")
    assert r["dispatched_while_held"], "the jitted call waited for the held stream: a host sync"
    assert r["still_held_after_legacy_sync"], "the latch was not on XLA's stream"
    assert not r["latch_timed_out"]
    assert r["values_ok"], "dlstream read XLA's result before it was written, or XLA read dlstream's early"
    assert r["control_finished_while_held"], "negative control: a latch on another stream holds nothing of XLA's"
    assert r["control_values_ok"]


def test_command_buffers_record_the_handler_once_and_replay_it():
    flags = "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"
    r = _child("command_buffers", flags)
    assert r["values_ok"], "a replay computed a wrong state"
    assert r["handler_runs"] < r["launches"], f"XLA did not capture the calls: the handler ran for every launch ({r})"
    # The control: without command buffers the handler runs for every launch.
    off = _child("command_buffers", "--xla_gpu_enable_command_buffer=")
    assert off["values_ok"] and off["handler_runs"] == off["launches"], off
