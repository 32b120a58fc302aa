# SPDX-License-Identifier: Apache-2.0
"""A Function's remembered scalars and its launch plan take an equal value of the same exact type as the object they
remember (a new int from x.numel(), the new floats torch hands a custom operator's implementation at each call), and
only that: a float is equal only with the same bits, another type is converted afresh. On the CPU backend, with the
fake exchange-API framework (so the calls take the plan)."""
import math
import sys

import numpy as np
import pytest

import dlstream
from conftest import CPU, settle


def fakes(fx, *arrays):
    return [fx.FakeTensor(a, a.ctypes.data, a.shape) for a in arrays]


def test_an_equal_new_scalar_is_taken_as_the_remembered_one(fx, no_leaks):
    axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
    x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    fxx, fyy = fakes(fx, x, y)
    a, n = float("1.5"), int("1000000000007") % 1000 + 8 - 7  # objects only this test holds
    assert n == 8
    axpy.launch(1, 8, n, a, fxx, fyy)
    assert axpy._planned
    ra, rn = sys.getrefcount(a), sys.getrefcount(n)
    for _ in range(3):
        axpy.launch(int("1"), 8, n + 0, a * 1.0, fxx, fyy)  # new objects of the same values
    assert sys.getrefcount(a) == ra and sys.getrefcount(n) == rn, "the remembered objects are still the ones kept"
    axpy.launch(1, 8, n, 2.5, fxx, fyy)  # another value: converted, and kept instead
    assert sys.getrefcount(a) == ra - 1
    settle()
    assert (y == 8.5 * x).all()


def test_a_float_is_equal_only_with_the_same_bits(fx, no_leaks):
    """-0.0 == 0.0 in Python, but the kernel must see the sign: y = a * 1 + (-0.0) is +0.0 for a = 0.0 and -0.0
    for a = -0.0. Both calls have the plan's shape."""
    axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
    x, y = np.ones(4, np.float32), np.full(4, -0.0, np.float32)
    fxx, fyy = fakes(fx, x, y)
    axpy.launch(1, 4, 4, 0.0, fxx, fyy)
    settle()
    assert not np.signbit(y).any(), "negative control: a = 0.0 gives +0.0"
    y[:] = -0.0
    axpy.launch(1, 4, 4, -0.0, fxx, fyy)
    settle()
    assert np.signbit(y).all(), "a = -0.0 is not the remembered 0.0"
    nan = float("nan")
    axpy.launch(1, 4, 4, nan, fxx, fyy)
    axpy.launch(1, 4, 4, nan * 1.0, fxx, fyy)  # NaN != NaN, but the same bits convert the same way
    settle()
    assert np.isnan(y).all()


def test_equal_values_of_other_types_are_converted_afresh(no_leaks):
    fill = dlstream.builtin_function("dls_fill", CPU)  # p,u64,u32,u64: dst, count, element size, pattern
    a = np.zeros(4, np.uint32)
    fill.launch(1, 1, a, 4, 4, 1)
    fill.launch(1, 1, a, 4, 4, True)  # a bool equal to the remembered 1
    fill.launch(1, 1, a, np.uint64(4), 4, 1)
    with pytest.raises(dlstream.ArgumentTypeError, match=r"args\[1\]=4.0\): expected an int for a u64"):
        fill.launch(1, 1, a, 4.0, 4, 1)  # equal to the remembered 4, but a float
    fill.launch(1, 1, a, 4, 4, 2**64 - 1)
    fill.launch(1, 1, a, 4, 4, 2**64 - 1 + 0)  # past 64 signed bits: converted again, the same value
    settle()
    assert (a == 2**32 - 1).all()


def test_grids_and_blocks_of_equal_values(fx, no_leaks):
    axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
    x, y = np.ones(8, np.float32), np.zeros(8, np.float32)
    fxx, fyy = fakes(fx, x, y)
    for grid, block in (((1, 1), 8), ((1, 1), 8), ((int("1"), 1), int("8")), (1, 8), ((2,), (4, 1))):
        axpy.launch(grid, block, 8, 1.0, fxx, fyy)
    with pytest.raises(ValueError):
        axpy.launch((1, 0), 8, 8, 1.0, fxx, fyy)  # not equal to the remembered grid: checked
    settle()
    assert (y == 5).all() and math.isclose(float(y.sum()), 40.0)
