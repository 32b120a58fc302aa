# SPDX-License-Identifier: Apache-2.0
"""Built-ins check their arguments on every way in: the high-level calls, Function.launch (general path and
launch plan) with any tensor type; overlapping sources give NumPy's answer."""
import numpy as np
import pytest

import dlstream
from test_launch_memo import fake


def test_function_launch_of_a_builtin_checks_counts_against_numpy_arrays():
    f = dlstream.builtin_function("dls_axpy_f32")
    x = np.ones(8, np.float32)
    y = np.zeros(8, np.float32)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"Function.launch\(x\): needs bytes \[0, 4000\)"):
        f.launch(1, 8, 1000, 1.0, x, y)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"needs bytes \[0, 36\)"):
        f.launch(1, 8, 9, 1.0, x, y)


def test_function_launch_of_a_builtin_checks_counts_against_dlstream_tensors():
    f = dlstream.builtin_function("dls_fill")
    t = dlstream.empty(4, "float32")
    with pytest.raises(dlstream.InvalidArgumentError, match=r"needs bytes \[0, 20\)"):
        f.launch(1, 1, t, 5, 4, 0)
    with pytest.raises(dlstream.InvalidArgumentError, match="elem_size=3"):
        f.launch(1, 1, t, 1, 3, 0)


def test_function_launch_of_a_builtin_refuses_a_null_latch_flag():
    f = dlstream.builtin_function("dls_latch")
    with pytest.raises(dlstream.InvalidArgumentError, match="flag=NULL"):
        f.launch(1, 1, None, 1000, None)


def test_planned_builtin_launches_are_checked_too(fx):
    from test_launch_memo import axpy_on_fakes
    f, x, y, fxx, fyy = axpy_on_fakes(fx)
    f.launch(1, 8, 8, 1.0, fxx, fyy)
    assert f._planned
    with pytest.raises(dlstream.InvalidArgumentError, match=r"needs bytes \[0, 36\)"):
        f.launch(1, 8, 9, 1.0, fxx, fyy)  # a new scalar: the general path
    f.launch(1, 8, 8, 1.0, fxx, fyy)
    small = np.ones(4, np.float32)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"needs bytes \[0, 32\)"):
        f.launch(1, 8, 8, 1.0, fxx, fake(fx, small))  # the plan's shape, a shorter tensor
    dlstream.current_stream("cpu").synchronize()


def test_a_planned_builtin_checks_the_scalar_a_refused_call_remembered(fx):
    """The plan keeps its built-in's check arguments; a general call that remembers a new scalar and is then refused
    leaves the plan in place, and a planned call with that scalar is checked with it (not the plan's old one)."""
    from test_launch_memo import axpy_on_fakes
    f, x, y, fxx, fyy = axpy_on_fakes(fx)
    f.launch(1, 8, 8, 1.0, fxx, fyy)
    assert f._planned
    count = 9  # one int object for both calls: the second is the remembered one
    with pytest.raises(dlstream.InvalidArgumentError, match=r"needs bytes \[0, 36\)"):
        f.launch(1, 8, count, 1.0, fxx, fyy)  # the general path remembers 9, then the check refuses it
    assert f._planned
    with pytest.raises(dlstream.InvalidArgumentError, match=r"needs bytes \[0, 36\)"):
        f.launch(1, 8, count, 1.0, fxx, fyy)  # the plan's shape: checked with 9, not 8
    dlstream.current_stream("cpu").synchronize()
    np.testing.assert_array_equal(y, x + 1)  # the first call only


@pytest.mark.parametrize("dst,src", [(slice(1, None), slice(None, -1)), (slice(None, -1), slice(1, None)),
                                     (slice(None), slice(None, None, -1))])
def test_overlapping_copy_gives_numpys_answer(dst, src):
    x = np.arange(10, dtype=np.float32)
    want = x.copy()
    want[dst] = want[src]
    dlstream.copy(x[dst], x[src])
    dlstream.current_stream("cpu").synchronize()
    np.testing.assert_array_equal(x, want)


def test_overlapping_axpy_gives_numpys_answer():
    x = np.arange(10, dtype=np.float32)
    want = x.copy()
    want[1:] += 2.0 * want[:-1]
    dlstream.axpy(2.0, x[:-1], x[1:])
    dlstream.current_stream("cpu").synchronize()
    np.testing.assert_array_equal(x, want)
