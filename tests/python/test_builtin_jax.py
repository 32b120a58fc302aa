# SPDX-License-Identifier: Apache-2.0
"""Built-ins under dlstream.jax on JAX's CPU platform, the scenarios of issue 31: a strided copy's descriptor past
XLA's 16-byte result (item 2; at trace time and, written by hand past the trace, in the handler), element types
(item 3), addresses where a built-in takes an array and out-of-range scalars (item 6). Skipped, with the reason,
where JAX is not installed."""
import math
import struct

import numpy as np
import pytest

import dlstream
from conftest import CPU, JAX_UNDER_TSAN, UNDER_TSAN, run_python

if UNDER_TSAN:
    pytest.skip(JAX_UNDER_TSAN, allow_module_level=True)
jax = pytest.importorskip("jax", reason="JAX is not installed (pip install jax): dlstream.jax needs it")
jnp = pytest.importorskip("jax.numpy")
dj = pytest.importorskip("dlstream.jax")


@pytest.fixture(autouse=True)
def _jax_on_cpu():
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def x64():
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64
    return enable_x64()


def broadcast_desc(n):
    """Issue 31's descriptor: n float32 elements, the source's stride 0."""
    return struct.pack("<II8q8q8q", 1, 4, n, *[0] * 7, 1, *[0] * 7, 0, *[0] * 7)


def test_a_descriptor_past_xlas_result_is_refused_at_trace_time(no_leaks):
    k = dj.kernel(dlstream.builtin_function("dls_copy_strided", CPU), jax.ShapeDtypeStruct((4,), jnp.float32))
    x = jnp.arange(4, dtype=jnp.float32)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"dlstream\.jax\.kernel\(dls_copy_strided\)\(dst\): needs "
                                                            r"bytes \[0, 262144\) .* only 0\.\.16"):
        jax.jit(lambda x: k(x, broadcast_desc(65536)))(x)
    np.testing.assert_array_equal(jax.jit(lambda x: k(x, broadcast_desc(4)))(x), np.zeros(4))  # x[0], broadcast


def test_the_handler_bounds_a_descriptor_it_is_handed_past_the_trace(no_leaks):
    """A custom call written by hand (any lowering can): the handler itself refuses, before the kernel runs."""
    dj.register()
    f = dlstream.builtin_function("dls_copy_strided", CPU)
    desc = broadcast_desc(65536)
    attrs = {"dls_cfg": np.array([1, f.handle, 1, 1, 1, 1, 1, 1, 0, 1, 0], np.int64),
             "dls_args": np.array([2, 1, 3 | len(desc) << 32], np.int64),
             "dls_vals": np.frombuffer(desc, np.uint8)}
    call = jax.ffi.ffi_call(dj.TARGET, [jax.ShapeDtypeStruct((4,), jnp.float32)])
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"INVALID_ARGUMENT: dlstream XLA call \(cpu\): "
                                                         r"dls_launch\(dst\): needs bytes \[0, 262144\)"):
        jax.block_until_ready(jax.jit(lambda x: call(x, **attrs))(jnp.ones(4, jnp.float32)))


def test_element_types_are_the_builtins(no_leaks):
    fill = dlstream.builtin_function("dls_fill", CPU)
    with x64(), pytest.raises(dlstream.InvalidArgumentError, match=r"kernel\(dls_fill\)\(args\[0\] dst\): its "
                                                                    r"elements are float64 \(8 bytes\), but "
                                                                    r"elem_size=4"):
        jax.jit(lambda: dj.kernel(fill, jax.ShapeDtypeStruct((8,), jnp.float64))(8, 4, 0))()
    axpy = dj.kernel(dlstream.builtin_function("dls_axpy_f32", CPU), in_place=[3])
    y = jnp.ones(8, jnp.float32)
    for x, name in ((jnp.ones(8, jnp.int32), "int32"), (jnp.ones(8, jnp.float16), "float16")):
        with pytest.raises(dlstream.InvalidArgumentError, match=rf"\(args\[2\] x\): its elements are {name}, but "
                                                                r"dls_axpy_f32 takes float32 here"):
            jax.jit(lambda x, y: axpy(8, 2.0, x, y))(x, y)
    np.testing.assert_array_equal(jax.jit(lambda y: axpy(8, 2.0, y, y))(y), np.full(8, 3.0))


def test_a_builtin_takes_arrays_where_the_signature_says_cp_or_p(no_leaks):
    axpy = dj.kernel(dlstream.builtin_function("dls_axpy_f32", CPU), in_place=[3])
    y = jnp.ones(8, jnp.float32)
    for addr in (None, 4096, np.uint64(4096)):
        with pytest.raises(dlstream.InvalidArgumentError, match=r"kernel\(dls_axpy_f32\): argument 2 \(cp\) is .*: a "
                                                                r"built-in takes arrays here"):
            jax.jit(lambda y: axpy(8, 2.0, addr, y))(y)


@pytest.mark.parametrize("kind, value, words", [
    ("f32", 1e39, r"a finite float32 is at most about 3\.4e38"), ("f32", -1e39, "a finite float32"),
    ("f64", 10**400, r"a float64 is at most about 1\.8e308"), ("u64", -1, r"0 to 2\*\*64 - 1"),
    ("u64", 2**64, r"0 to 2\*\*64 - 1"), ("i64", 2**63, r"-2\*\*63 to 2\*\*63 - 1"),
    ("u32", 2**32, "0 to 4294967295"), ("i32", -2**31 - 1, "-2147483648 to 2147483647")])
def test_out_of_range_scalars_raise_out_of_range_error_naming_call_argument_and_range(kind, value, words, no_leaks):
    f = dlstream.builtin_function("dls_axpy_f32", CPU)
    k = dj.kernel(f, in_place=[3], signature=f"u64,{kind},cp,p")
    y = jnp.ones(4, jnp.float32)
    with pytest.raises(dlstream.OutOfRangeError, match=rf"^dlstream\.jax\.kernel\(dls_axpy_f32\): argument 1="
                                                       rf".* is out of range for {kind} \({words}"):
        jax.jit(lambda y: k(4, value, y, y))(y)
    with pytest.raises(dlstream.OutOfRangeError):  # the eager path says the same of the same value
        f.launch(1, 1, 4, value, np.ones(4, np.float32), np.ones(4, np.float32)) if kind == "f32" else \
            dlstream.builtin_function("dls_axpy_f32", CPU, signature=f"u64,{kind},cp,p").launch(
                1, 1, 4, value, np.ones(4, np.float32), np.ones(4, np.float32))


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_infinities_and_nan_pass_for_f32_as_in_the_eager_path(value, no_leaks):
    k = dj.kernel(dlstream.builtin_function("dls_axpy_f32", CPU), in_place=[3])
    out = jax.jit(lambda y: k(4, value, y, y))(jnp.ones(4, jnp.float32))
    assert np.isnan(out).all() or np.isinf(out).all()


def test_grid_none_runs_a_builtin_as_dlstreams_own_calls_do(no_leaks):
    """grid=None: the handler runs the built-in on the core's grid, through its twin where one applies (aligned whole
    vectors here, a partial vector at the end there): jnp's values either way."""
    axpy = dj.kernel(dlstream.builtin_function("dls_axpy_f32", CPU), in_place=[3], grid=None)
    fill = dj.kernel(dlstream.builtin_function("dls_fill", CPU), jax.ShapeDtypeStruct((37,), jnp.float32), grid=None)
    for n in (1024, 1027):
        x, y = jnp.arange(n, dtype=jnp.float32), jnp.full(n, 3.0, jnp.float32)
        np.testing.assert_array_equal(jax.jit(lambda x, y: axpy(n, 2.0, x, y))(x, y), 2.0 * x + y)
    pattern = int(np.float32(1.5).view(np.uint32))
    np.testing.assert_array_equal(jax.jit(lambda: fill(37, 4, pattern))(), np.full(37, 1.5, np.float32))


def test_grid_none_is_for_builtins_alone_and_leaves_block_to_the_core(no_leaks):
    f = dlstream.builtin_function("dls_axpy_f32", CPU)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"grid=None, block=128, shared_mem=0\): with grid=None "
                                                            r"the core chooses the grid and the block"):
        dj.kernel(f, in_place=[3], grid=None, block=128)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"shared_mem=16\): with grid=None"):
        dj.kernel(f, in_place=[3], grid=None, shared_mem=16)


GRID_NONE_NEGATIVE = """
import jax, jax.numpy as jnp, numpy as np
import dlstream, dlstream.jax as dj
with jax.default_device(jax.devices("cpu")[0]):
    x, y = jnp.ones(1024, jnp.float32), jnp.zeros(1024, jnp.float32)
    f = dlstream.builtin_function("dls_axpy_f32", "cpu")
    core = dj.kernel(f, in_place=[3], grid=None)
    given = dj.kernel(f, in_place=[3], grid=4, block=256)
    print(int(np.asarray(jax.jit(lambda x, y: core(1024, 1.0, x, y))(x, y))[-4:].sum()),
          int(np.asarray(jax.jit(lambda x, y: given(1024, 1.0, x, y))(x, y))[-4:].sum()))
"""


def test_grid_none_takes_the_vector_twin_negative_control_breaks_it():
    """With the twins one vector short (DLSTREAM_TEST_BREAK_TWINS=1), the grid=None call misses its last 4 elements
    and the call on a given grid (the built-in's own kernel) does not: grid=None took the core's path."""
    plain = run_python(GRID_NONE_NEGATIVE)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.split() == ["4", "4"]
    broken = run_python(GRID_NONE_NEGATIVE, env={"DLSTREAM_TEST_BREAK_TWINS": "1"})
    assert broken.returncode == 0, broken.stderr
    assert broken.stdout.split() == ["0", "4"], "negative control: the grid=None call wrote its last vector"
