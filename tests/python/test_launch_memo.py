# SPDX-License-Identifier: Apache-2.0
"""The launch hot path's shortcuts, on the CPU backend: a Function remembers the last grid, block and scalar objects
it converted (only exact ints, floats and tuples of ints, which cannot change), and tensors of the type whose
framework's current stream the call runs on are passed without the general handshake. Each shortcut must give what
the general path gives: new values, refusals, other types and devices, failures of the framework."""
import sys

import numpy as np
import pytest

import dlstream
from conftest import CPU, settle


@pytest.fixture
def fill():
    return dlstream.builtin_function("dls_fill", CPU)  # p,u64,u32,u64: dst, count, element size, pattern


def test_scalars_follow_new_values_at_each_position(fill, no_leaks):
    a = np.zeros(8, np.uint32)
    for count, pattern in ((8, 7), (8, 7), (4, 9), (4, 9), (2, 2**32 - 1), (8, True), (3, np.uint64(5))):
        a[:] = 0
        fill.launch(1, 1, a, count, 4, pattern)
        settle()
        assert (a[:count] == int(pattern)).all() and (a[count:] == 0).all(), (count, pattern)


def test_refusals_after_a_remembered_value(fill, no_leaks):
    a = np.zeros(8, np.uint32)
    fill.launch(1, 1, a, 8, 4, 1)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"args\[1\]=-1\): out of range for a u64"):
        fill.launch(1, 1, a, -1, 4, 1)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"args\[2\]=4294967296\): out of range for a u32"):
        fill.launch(1, 1, a, 8, 2**32, 1)
    with pytest.raises(dlstream.ArgumentTypeError, match=r"args\[1\]=8.0\): expected a number for a u64"):
        fill.launch(1, 1, a, 8.0, 4, 1)
    fill.launch(1, 1, a, 8, 4, 2**64 - 1)  # above 2**63: the general conversion
    settle()
    assert (a == 2**32 - 1).all()


def test_grid_and_block_are_checked_again_when_they_change(no_leaks):
    axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    grid = (1, 1)
    axpy.launch(grid, 4, 4, 1.0, x, y)
    axpy.launch(grid, 4, 4, 1.0, x, y)
    for bad in (0, (1, 0), (1, 2, 3, 4)):
        with pytest.raises((ValueError, TypeError)):
            axpy.launch(bad, 4, 4, 1.0, x, y)
    axpy.launch(np.int64(1), 4, 4, 1.0, x, y)
    with pytest.raises(ValueError):
        axpy.launch(1, 0, 4, 1.0, x, y)
    settle()
    assert (y == 3).all()


def test_remembered_objects_are_released_with_the_function(fill, no_leaks):
    a = np.zeros(4, np.uint32)
    big = 2**40 + 12345  # an int that only this test refers to
    base = sys.getrefcount(big)
    fill.launch(1, 1, a, 4, 4, big)
    assert sys.getrefcount(big) == base + 1, "the Function keeps the last scalar of that position"
    fill.launch(1, 1, a, 4, 4, 7)
    assert sys.getrefcount(big) == base, "and lets it go for the next one"
    settle()


def fake(fx, a, cls=None, device_type=None):
    cls = cls or fx.FakeTensor
    kw = {} if device_type is None else {"device_type": device_type}
    return cls(a, a.ctypes.data, a.shape, **kw)


def test_tensors_of_another_type_or_device_take_the_general_path(fx, no_leaks):
    axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    axpy.launch(1, 8, 8, 1.0, fake(fx, x), fake(fx, y, fx.FakeTensorInt))
    settle()
    assert (y == x + 1).all()
    with pytest.raises(dlstream.Error):  # a second tensor on a GPU for a CPU call: refused, as before
        axpy.launch(1, 8, 8, 1.0, fake(fx, x), fake(fx, y, device_type=dlstream.kDLCUDA))


def test_a_framework_failing_on_a_later_tensor_raises(fx, no_leaks):
    axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    fxx, fyy = fake(fx, x), fake(fx, y)
    before = fx.counters()["dltensor"]
    axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    assert fx.counters()["dltensor"] - before == 2, "each tensor read once"
    fx.fail_next(2)  # the first tensor reads fine (it decides the stream), the second fails
    with pytest.raises(BufferError, match="cannot describe"):
        axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    settle()
    assert (y == 2 * x + 1).all()


def test_a_framework_stream_that_changes_is_followed(fx, no_leaks):
    """The last framework stream resolved is remembered; a new one must be seen (the latch holds it)."""
    axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    fxx, fyy = fake(fx, x), fake(fx, y)
    s = dlstream.Stream(CPU)
    fx.set_current_stream(0)
    axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    settle()
    latch = dlstream.Latch(CPU)
    latch.wait(s)
    fx.set_current_stream(s.ptr)
    axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    dlstream.Stream.legacy(CPU).synchronize()
    assert (y == x + 1).all(), "the second launch waits behind the latch on s"
    latch.open()
    s.synchronize()
    latch.close()
    assert (y == 2 * x + 1).all()
    fx.set_current_stream(0)
    s.close()
    dlstream._dlstream._clear_caches()
