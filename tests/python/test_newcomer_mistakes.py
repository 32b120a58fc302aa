# SPDX-License-Identifier: Apache-2.0
"""Small newcomer mistakes get an error that names the call, the argument and the value, with the fix: a device
passed by position, one int where dlstream.jax takes a sequence of indexes, out_shapes for a kernel without
outputs; and a stream_parallel block says what it is when printed."""
import importlib.util

import pytest

import dlstream
from conftest import CPU, UNDER_TSAN


def test_a_device_by_position_says_it_is_keyword_only():
    with pytest.raises(TypeError, match=r"empty\(\) takes at most 2 positional arguments \(3 given\): device, "
                                        r"stream and ipc are keyword-only: write device='cpu'"):
        dlstream.empty((2, 3), "float32", "cpu")


def test_too_many_positional_arguments_name_the_keyword_only_ones():
    with pytest.raises(TypeError, match=r"fill\(\) takes at most 2 positional arguments \(3 given\): stream is "
                                        r"keyword-only: write stream=None"):
        dlstream.fill(dlstream.empty(2, device=CPU), 1.0, None)


def test_repr_of_stream_parallel_says_its_state():
    g = dlstream.stream_parallel(device=CPU)
    assert repr(g) == "dlstream.stream_parallel(origin=None, device='cpu'): not begun"
    with g:
        with g.branch():
            pass
        text = repr(g)
        assert text.startswith("dlstream.stream_parallel(origin=dlstream.Stream(") and text.endswith(
            "): open, 1 branch"), text
    assert repr(g).endswith("): ended, 1 branch"), repr(g)


needs_jax = pytest.mark.skipif(UNDER_TSAN or importlib.util.find_spec("jax") is None,
                               reason="JAX is not installed (pip install jax), or ThreadSanitizer is loaded")


@needs_jax
def test_jax_in_place_takes_one_index_as_jax_takes_donate_argnums():
    import dlstream.jax as dj
    k = dj.kernel(dlstream.builtin_function("dls_axpy_f32", CPU), in_place=3)
    assert k.in_place == (3,) and k.outputs == []


@needs_jax
@pytest.mark.parametrize("in_place, text", [
    ("3", r"in_place='3'\): expected argument indexes: an int or a sequence of ints"),
    ([3.0], r"in_place=\[3\.0\]\): expected argument indexes: an int or a sequence of ints"),
    (object(), r"in_place=<object object at 0x[0-9a-f]+>\): expected argument indexes"),
])
def test_jax_in_place_of_the_wrong_type_says_what_it_takes(in_place, text):
    import dlstream.jax as dj
    with pytest.raises(TypeError, match=r"dlstream\.jax\.kernel\(dls_axpy_f32, " + text):
        dj.kernel(dlstream.builtin_function("dls_axpy_f32", CPU), in_place=in_place)


@needs_jax
def test_jax_out_shapes_for_a_kernel_without_outputs_is_refused():
    import jax
    import dlstream.jax as dj
    spec = jax.ShapeDtypeStruct((4,), "float32")
    with pytest.raises(dlstream.InvalidArgumentError, match=r"dlstream\.jax\.kernel\(dls_axpy_f32\): out_shapes "
                                                            r"given, but the kernel has no outputs"):
        dj.kernel(dlstream.builtin_function("dls_axpy_f32", CPU), spec, in_place=[3])
