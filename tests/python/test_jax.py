# SPDX-License-Identifier: Apache-2.0
"""dlstream.jax on JAX's CPU platform: kernels under jit against jnp, aliasing and donation, vmap, many calls in
one program, latch ordering with its negative control, and errors (bad shapes, missing kernels, malformed calls)
raised as Python exceptions that carry dlstream's message. Skipped, with the reason, where JAX is not installed."""
import struct

import numpy as np
import pytest

import dlstream
from conftest import CPU, JAX_UNDER_TSAN, UNDER_TSAN, held

if UNDER_TSAN:
    pytest.skip(JAX_UNDER_TSAN, allow_module_level=True)
jax = pytest.importorskip("jax", reason="JAX is not installed (pip install jax): dlstream.jax needs it")
jnp = pytest.importorskip("jax.numpy")
dj = pytest.importorskip("dlstream.jax")

cpu = jax.devices("cpu")[0]
on_cpu = jax.default_device(cpu)


@pytest.fixture(autouse=True)
def _jax_on_cpu():
    with on_cpu:
        yield


def x64():
    """float64 arrays in a block (jax.enable_x64, once jax.experimental.enable_x64)."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64
    return enable_x64()


def axpy(dtype="float32", **kw):
    return dj.kernel(dlstream.builtin_function(f"dls_axpy_{'f32' if dtype == 'float32' else 'f64'}", CPU),
                     in_place=[3], **kw)


def test_axpy_under_jit_matches_jnp(no_leaks):
    k = axpy()
    x = jnp.arange(1000, dtype=jnp.float32)
    y = jnp.linspace(-1, 1, 1000, dtype=jnp.float32)
    out = jax.jit(lambda x, y: k(x.size, 2.5, x, y))(x, y)
    np.testing.assert_allclose(out, 2.5 * x + y, rtol=1e-6)
    f64 = axpy("float64")
    with x64():
        a = jnp.arange(10, dtype=jnp.float64)
        np.testing.assert_allclose(jax.jit(lambda a: f64(a.size, -1.0, a, a + 1))(a), jnp.ones(10))


def test_outputs_from_a_spec_or_a_callable_and_grid_from_shapes(no_leaks):
    fill = dlstream.builtin_function("dls_fill", CPU)
    bits = int(np.float32(3.5).view(np.uint32))
    k = dj.kernel(fill, jax.ShapeDtypeStruct((8,), jnp.float32))
    np.testing.assert_array_equal(jax.jit(lambda: k(8, 4, bits))(), np.full(8, 3.5, np.float32))
    # The output shape and the grid follow the call's arguments at trace time.
    k2 = dj.kernel(fill, lambda count, size, pattern: jax.ShapeDtypeStruct((count,), jnp.int32),
                   grid=lambda count, size, pattern: (count + 255) // 256, block=256)
    np.testing.assert_array_equal(jax.jit(lambda: k2(300, 4, 7))(), np.full(300, 7, np.int32))


def test_bytes_arguments_pass_a_struct_by_value(no_leaks):
    """dls_copy_strided takes its dls_copy_desc_t by value: a transpose."""
    copy = dlstream.builtin_function("dls_copy_strided", CPU)
    desc = struct.pack("<II8q8q8q", 2, 4, *([4, 3] + [0] * 6), *([3, 1] + [0] * 6), *([1, 4] + [0] * 6))
    k = dj.kernel(copy, lambda src, d: jax.ShapeDtypeStruct((4, 3), src.dtype))
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    np.testing.assert_array_equal(jax.jit(lambda x: k(x, desc))(x), x.T)


def test_in_place_result_leaves_an_undonated_input_alone(no_leaks):
    k = axpy()
    x = jnp.ones(64, jnp.float32)
    y = jnp.full(64, 2.0, jnp.float32)
    out = jax.jit(lambda x, y: k(64, 1.0, x, y))(x, y)
    np.testing.assert_array_equal(out, np.full(64, 3.0))
    np.testing.assert_array_equal(y, np.full(64, 2.0))  # XLA copied y into the aliased result


def test_a_donated_input_is_updated_in_place(no_leaks):
    k = axpy()
    x = jnp.ones(1024, jnp.float32)
    y = jnp.full(1024, 2.0, jnp.float32)
    where = y.unsafe_buffer_pointer()
    out = jax.jit(lambda x, y: k(1024, 1.0, x, y), donate_argnums=1)(x, y)
    assert y.is_deleted()
    assert out.unsafe_buffer_pointer() == where, "the kernel wrote into the donated buffer: no copy"
    np.testing.assert_array_equal(out, np.full(1024, 3.0))


def test_vmap_runs_the_kernel_per_batch_element(no_leaks):
    k = axpy()
    xs = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    ys = jnp.ones((3, 4), jnp.float32) * jnp.arange(3, dtype=jnp.float32)[:, None]
    out = jax.jit(jax.vmap(lambda x, y: k(x.size, 2.0, x, y)))(xs, ys)
    np.testing.assert_array_equal(out, 2.0 * xs + ys)


def test_a_hundred_calls_in_one_jit(no_leaks):
    k = axpy()
    executions = dlstream._dlstream._xla_stats()["executions"]

    @jax.jit
    def chain(x, y):
        for i in range(100):
            y = k(x.size, 0.01 * (i % 3), x, y)
        return y

    x = jnp.linspace(0, 1, 4096, dtype=jnp.float32)
    y = jnp.zeros(4096, jnp.float32)
    ref = y
    for i in range(100):
        ref = 0.01 * (i % 3) * x + ref
    np.testing.assert_allclose(chain(x, y), ref, rtol=1e-5)
    assert dlstream._dlstream._xla_stats()["executions"] - executions == 100


def test_kernel_without_outputs_runs_for_its_side_effect(no_leaks):
    spin = dj.kernel(dlstream.builtin_function("dls_spin", CPU))
    executions = dlstream._dlstream._xla_stats()["executions"]
    jax.block_until_ready(jax.jit(lambda x: (spin(1000), x + 1)[1])(jnp.ones(2)))
    assert dlstream._dlstream._xla_stats()["executions"] == executions + 1


def test_latch_wait_holds_the_work_after_it_negative_control_does_not(no_leaks):
    """Work after a latch wait in the program waits for the host to open it; the negative control holds another
    stream with the latch, and the same program (without the wait) completes while the latch is still closed.
    The arrays are large enough that JAX's CPU client runs the program asynchronously (it runs small ones inline,
    in the calling thread, which a held latch would block)."""
    k = axpy()
    n = 1 << 16
    x = jnp.ones(n, jnp.float32)
    latch = dlstream.Latch(CPU)
    prog = jax.jit(lambda x: k(x.size, 1.0, x, dj.latch_wait(latch, x * 2.0, timeout=20.0)) + 1.0)
    out = prog(x)
    held_seen = not out.is_ready()
    latch.open()
    np.testing.assert_array_equal(out, np.full(n, 4.0))
    assert not latch.timed_out, "the call returned only once the latch gave up: JAX ran the program inline"
    assert held_seen, "the result was ready while the latch held the program"
    latch.close()
    # Negative control: the latch holds a dlstream stream, not the program's.
    other = dlstream.Stream(CPU)
    latch2 = held(other, timeout=20.0)
    free = jax.jit(lambda x: k(x.size, 1.0, x, x * 2.0) + 1.0)(x)
    jax.block_until_ready(free)
    assert not latch2.timed_out, "negative control: the program finished while the latch still held"
    latch2.open()
    other.synchronize()
    latch2.check()
    np.testing.assert_array_equal(free, np.full(n, 4.0))
    latch2.close()
    del other, out, free


# ---- errors ----

def test_bad_shapes_are_refused_at_trace_time_with_dlstream_errors(no_leaks):
    k = axpy()
    x = jnp.ones(1024, jnp.float32)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"kernel\(dls_axpy_f32\)\(x\): needs bytes \[0, 8192\) "
                                                            r".* only 0..4096 lie in its memory"):
        jax.jit(lambda x, y: k(2048, 1.0, x, y))(x, x)
    with pytest.raises(TypeError, match=r"takes 4 arguments \(the signature's 4 less the outputs \[\]\), 3 given"):
        jax.jit(lambda x: k(1.0, x, x))(x)
    with pytest.raises(TypeError, match="argument 0 .* is a traced value; scalar arguments are compile-time"):
        jax.jit(lambda n, x: k(n, 1.0, x, x))(3, x)
    with pytest.raises(dlstream.InvalidArgumentError, match="argument 0=-1 is out of range for u64"):
        jax.jit(lambda x: k(-1, 1.0, x, x))(x)
    fill = dlstream.builtin_function("dls_fill", CPU)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"out_shapes gives 2 shapes for the 1 outputs"):
        dj.kernel(fill, [jax.ShapeDtypeStruct((4,), jnp.int32)] * 2)(4, 4, 0)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"\(dst\): needs bytes \[0, 64\) .* only 0..16"):
        dj.kernel(fill, jax.ShapeDtypeStruct((4,), jnp.int32))(16, 4, 0)


def test_bad_kernels_are_refused_when_made(no_leaks):
    f = dlstream.builtin_function("dls_axpy_f32", CPU)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"in_place=\(2,\)\): argument 2 is not a 'p' argument"):
        dj.kernel(f, in_place=[2])
    with pytest.raises(dlstream.InvalidArgumentError, match=r"arguments \[3\] are outputs .* give out_shapes"):
        dj.kernel(f)
    assert dj.kernel(dlstream.builtin_function("dls_empty", CPU)).kinds == []  # every built-in has a signature
    with pytest.raises(dlstream.InvalidArgumentError, match="token 1 'f16' is not one of"):
        dj.kernel(f, signature="u64,f16,cp,p", in_place=[3])
    with pytest.raises(dlstream.InvalidArgumentError, match=r"grid=0 needs 1 to 3 dimensions"):
        dj.kernel(f, in_place=[3], grid=0)
    with pytest.raises(TypeError, match="expected a dlstream.Function"):
        dj.kernel(3)  # (a str is a built-in's name: tests/python/test_jax_devices.py)
    with pytest.raises(dlstream.NotFoundError, match="no such built-in"):  # a missing kernel, before JAX
        dlstream.builtin_function("dls_nope", CPU)


def raw_call(cfg, entries=(), vals=None, operands=(), results=()):
    """A dlstream custom call made by hand, as a C++ or hand-written lowering could make it."""
    dj.register()
    attrs = {"dls_cfg": np.array(cfg, np.int64), "dls_args": np.array(entries, np.int64)}
    if vals is not None:
        attrs["dls_vals"] = np.array(vals, np.uint8)
    return jax.ffi.ffi_call(dj.TARGET, list(results), has_side_effect=not results)(*operands, **attrs)


def test_a_missing_kernel_is_an_xla_error_with_dlstreams_message(no_leaks):
    cfg = [1, 12345, 1, 1, 1, 1, 1, 1, 0, 1, 0]  # handle 12345 names no function
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=r"NOT_FOUND: dlstream XLA call \(cpu\): dls_function_name\(function\): 0x3039 is not "
                             r"a function handle"):
        jax.block_until_ready(jax.jit(lambda: raw_call(cfg))())


def test_malformed_calls_are_xla_errors_with_dlstreams_message(no_leaks):
    f = dlstream.builtin_function("dls_axpy_f32", CPU)
    good = [1, f.handle, 1, 1, 1, 1, 1, 1, 0, 1, 0]
    x = jnp.ones(4, jnp.float32)
    spec = jax.ShapeDtypeStruct((4,), jnp.float32)
    cuda = good[:9] + [2, 0]
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"the function is on cuda:0, but XLA runs this call on its "
                                                        r"cpu platform"):
        jax.block_until_ready(jax.jit(lambda x: raw_call(cuda, [1, 1], operands=[x], results=[spec]))(x))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"dls_args\[0\]: operand 5 is not a buffer of this call"):
        jax.block_until_ready(jax.jit(lambda x: raw_call(good, [1 | 5 << 8], operands=[x], results=[spec]))(x))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"dls_cfg: expected an int64 array of 11 entries"):
        jax.block_until_ready(jax.jit(lambda: raw_call(good[:5]))())


def test_the_jax_example_runs():
    import pathlib

    from conftest import run_python
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "jax_jit.py"
    r = run_python(path.read_text(), env={"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "state = 3x after 3 donated updates: ok" in r.stdout


def test_capture_false_lowers_to_the_nocapture_target(no_leaks):
    k = axpy(capture=False)
    x = jnp.ones(8, jnp.float32)
    assert dj.TARGET_NOCAPTURE in jax.jit(lambda x: k(8, 1.0, x, x)).lower(x).as_text()
    np.testing.assert_array_equal(jax.jit(lambda x: k(8, 1.0, x, x))(x), np.full(8, 2.0))
