# SPDX-License-Identifier: Apache-2.0
"""The launch hot path's shortcuts, on the CPU backend: a Function remembers the last grid, block and scalar objects
it converted (only exact ints, floats and tuples of ints, which cannot change), and tensors of the type whose
framework's current stream the call runs on are passed without the general handshake. Each shortcut must give what
the general path gives: new values, refusals, other types and devices, failures of the framework."""
import sys

import numpy as np
import pytest

import dlstream
from conftest import CPU, held, settle


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
    with pytest.raises(dlstream.ArgumentTypeError, match=r"args\[1\]=8.0\): expected an int for a u64"):
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


def axpy_on_fakes(fx):
    """The CPU axpy built-in, x = 0..7 and y = 1 as NumPy arrays, and the fake framework's tensors over them."""
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    return dlstream.builtin_function("dls_axpy_f32", CPU), x, y, fake(fx, x), fake(fx, y)


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
    axpy, x, y, fxx, fyy = axpy_on_fakes(fx)
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
    axpy, x, y, fxx, fyy = axpy_on_fakes(fx)
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


# ---- the launch plan: a call shaped like the last one on a framework's current stream ----

def runs_held(y, before, stream, launch, others=()):
    """Whether `launch` queues on `stream`: held behind a latch there, y must not change while every other stream
    drains (the legacy and default streams, and `others`, where a launch that is not held may have gone); then it
    must."""
    latch = held(stream)
    launch()
    dlstream.Stream.legacy(CPU).synchronize()
    for s in others:
        s.synchronize()
    settle()
    waited = (y == before).all()
    latch.open()
    stream.synchronize()
    latch.close()
    return waited and not (y == before).all()


def test_a_call_shaped_like_the_last_takes_the_plan(fx, no_leaks):
    axpy, x, y, fxx, fyy = axpy_on_fakes(fx)
    assert not axpy._planned
    axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    assert axpy._planned
    before = fx.counters()
    for _ in range(10):
        axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    after = fx.counters()
    assert after["dltensor"] - before["dltensor"] == 20, "each tensor read at each call"
    assert after["current_stream"] - before["current_stream"] == 10, "the current stream asked at each call"
    assert after["managed"] == before["managed"]
    settle()
    assert (y == 11 * x + 1).all()


def test_a_planned_builtin_checks_again_what_it_has_not_passed(fx, no_leaks):
    """A planned built-in skips its argument check only for the very pointers, extents and scalars that passed it
    last: a tensor of the same pointer but a smaller shape, an overlap, a misaligned pointer or a new count is
    checked (and refused) at each call, and the good call after a refusal still runs."""
    axpy, x, y, fxx, fyy = axpy_on_fakes(fx)
    for _ in range(3):  # a plan, then calls that pass as the last one did
        axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    assert axpy._planned
    z = np.zeros(16, np.float32)
    cases = (((fxx, fx.FakeTensor(y, y.ctypes.data, (4,))), "bytes"),  # y's pointer, half its extent
             ((fx.FakeTensor(z, z.ctypes.data, (8,)), fx.FakeTensor(z, z.ctypes.data + 4, (8,))), "overlaps"),
             ((fxx, fx.FakeTensor(y, y.ctypes.data + 1, (7,))), "not aligned"),
             ((fxx, fx.FakeTensor(y, y.ctypes.data, (2, 2))), "bytes"))  # 2-D, half the extent
    for (a, b), why in cases:
        for _ in range(2):  # refused again: a refusal is not remembered as a pass
            with pytest.raises(dlstream.InvalidArgumentError, match=why):
                axpy.launch(1, 8, 8, 1.0, a, b)
        axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    with pytest.raises(dlstream.InvalidArgumentError, match="bytes"):
        axpy.launch(1, 8, 9, 1.0, fxx, fyy)  # a new count: the general path checks it
    for shape in ((2, 4), (2, 2, 2), (8,)):  # y's whole extent in other shapes: they pass
        for _ in range(2):
            axpy.launch(1, 8, 8, 1.0, fxx, fx.FakeTensor(y, y.ctypes.data, shape))
    settle()
    assert (y == 13 * x + 1).all()


def test_the_plan_reads_new_scalars_tensors_and_streams(fx, no_leaks):
    """Each part of a planned call that can change is taken from this call: a new scalar, other tensors of the
    type, another current stream (held by a latch, with the first stream as the negative control)."""
    axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
    x = np.arange(8, dtype=np.float32)
    y, z = np.ones(8, np.float32), np.zeros(8, np.float32)
    fxx, fyy, fzz = fake(fx, x), fake(fx, y), fake(fx, z)
    a, b = dlstream.Stream(CPU), dlstream.Stream(CPU)
    fx.set_current_stream(a.ptr)
    axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    axpy.launch(1, 8, 8, 1.0, fxx, fzz)  # another tensor object of the type: the plan
    a.synchronize()
    assert (y == x + 1).all() and (z == x).all()
    axpy.launch(1, 8, 8, 3.0, fxx, fzz)  # a new scalar: the general path, then a new plan
    a.synchronize()
    assert (z == 4 * x).all() and axpy._planned
    fx.set_current_stream(b.ptr)
    assert runs_held(z, z.copy(), b, lambda: axpy.launch(1, 8, 8, 3.0, fxx, fzz), others=(a,)), \
        "on the new current stream"
    assert (z == 7 * x).all()
    fx.set_current_stream(a.ptr)
    assert not runs_held(z, z.copy(), b, lambda: axpy.launch(1, 8, 8, 3.0, fxx, fzz), others=(a,)), \
        "negative control: on a"
    fx.set_current_stream(0)
    a.close()
    b.close()
    dlstream._dlstream._clear_caches()


def test_the_plan_gives_way_to_stream_choices_and_other_arguments(fx, no_leaks, stream_choice_only):
    """stream=, use_stream() and an argument the plan did not see take the general path, which decides again."""
    axpy, x, y, fxx, fyy = axpy_on_fakes(fx)
    s = dlstream.Stream(CPU)
    axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    assert axpy._planned
    settle()
    assert runs_held(y, y.copy(), s, lambda: axpy.launch(1, 8, 8, 1.0, fxx, fyy, stream=s)), "stream= decides"
    assert axpy._planned, "a call with keywords leaves the plan"

    def in_use_stream():
        with dlstream.use_stream(s):
            axpy.launch(1, 8, 8, 1.0, fxx, fyy)

    assert runs_held(y, y.copy(), s, in_use_stream), "use_stream() decides"
    assert not runs_held(y, y.copy(), s, lambda: axpy.launch(1, 8, 8, 1.0, fxx, fyy)), "and ends with its block"
    axpy.launch(1, 8, 8, 1.0, fxx, y)  # a NumPy array where the plan had a tensor: the general path
    axpy.launch(1, 8, 8, 1.0, fxx, fake(fx, y, fx.FakeTensorInt))  # another exchange-API type
    settle()
    assert (y == 6 * x + 1).all()
    with pytest.raises(dlstream.Error):  # a tensor on a GPU for this CPU call: refused by the general path
        axpy.launch(1, 8, 8, 1.0, fxx, fake(fx, y, device_type=dlstream.kDLCUDA))
    axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    assert axpy._planned
    for n in (1, 2):  # the framework fails on the first, then on the second tensor of a planned call
        fx.fail_next(n)
        with pytest.raises(BufferError, match="cannot describe"):
            axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    settle()
    assert (y == 8 * x + 1).all()
    s.close()
    dlstream._dlstream._clear_caches()


def test_a_plan_holds_no_tensor_and_goes_with_its_function(fx, no_leaks):
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    fxx, fyy = fake(fx, x), fake(fx, y)

    def plan_and_drop():
        axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
        axpy.launch(1, 8, 8, 1.0, fxx, fyy)
        axpy.launch(1, 8, 8, 1.0, fxx, fyy)
        return axpy._planned, sys.getrefcount(fx.FakeTensor)

    plan_and_drop()  # the type is known to dlstream from now on
    rx, ry, rt = sys.getrefcount(fxx), sys.getrefcount(fyy), sys.getrefcount(fx.FakeTensor)
    planned, rt_planned = plan_and_drop()
    rt_after = sys.getrefcount(fx.FakeTensor)  # outside the assert: its rewriting holds temporaries
    assert planned and rt_planned == rt + 1, "the plan keeps its type"
    assert rt_after == rt, "and lets it go with its Function"
    assert (sys.getrefcount(fxx), sys.getrefcount(fyy)) == (rx, ry), "but no tensor"
    settle()
    assert (y == 4 * x + 1).all()
