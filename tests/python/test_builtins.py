# SPDX-License-Identifier: Apache-2.0
"""The built-ins from Python: fill, axpy, copy, spin and the latch."""
import numpy as np
import pytest

import dlstream
from conftest import CPU, settle


@pytest.mark.parametrize("dtype, value", [("float32", 1.25), ("float64", -2.5), ("int8", -3), ("uint16", 7),
                                          ("int64", 2**40), ("bool", 1), ("bfloat16", 1.0), ("float16", 0.0),
                                          ("float16", -1.5), ("float16", 65504.0), ("float16", 6e-8),
                                          ("int8", 2.9), ("uint8", -0.5), ("bool", 0.25)])
def test_fill_dtypes(dtype, value, no_leaks):
    t = dlstream.empty(5, dtype, device=CPU)
    dlstream.fill(t, value)
    if dtype == "bfloat16":  # NumPy has no bfloat16: read it through a copy that converts (exactly) to float32
        raw = np.zeros(5, np.float32)
        dlstream.copy(raw, t)
        settle()
        assert (raw.view(np.uint32) == 0x3F800000).all()
        t.close()
        return
    a = np.from_dlpack(t)
    assert (a == np.array(value, dtype=dtype)).all()
    del a
    t.close()


def test_fill_errors(no_leaks):
    t = dlstream.empty(3, "complex64", device=CPU)
    with pytest.raises(dlstream.NotSupportedError, match="complex64 elements are not supported"):
        dlstream.fill(t, 1.5)
    i = dlstream.empty(3, "int32", device=CPU)
    with pytest.raises(dlstream.OutOfRangeError, match="NaN has no int32 value"):
        dlstream.fill(i, float("nan"))
    with pytest.raises(dlstream.ArgumentTypeError, match=r"^fill\(value='a'\): expected a number"):
        dlstream.fill(i, "a")
    with pytest.raises(TypeError, match="expected a tensor"):
        dlstream.fill(3, 1)
    with pytest.raises(TypeError):
        dlstream.fill(i)
    a = np.zeros((4, 4), np.int32)[:, ::2]
    with pytest.raises(dlstream.InvalidArgumentError, match="contiguous"):
        dlstream.fill(a, 1)
    t.close()
    i.close()
    settle()


def test_axpy_on_numpy_and_tensors(no_leaks):
    x = np.arange(6, dtype=np.float64)
    y = np.ones(6, np.float64)
    dlstream.axpy(3.0, x, y)
    settle()
    assert (y == 3 * x + 1).all()
    t = dlstream.empty(6, "float64", device=CPU)
    dlstream.fill(t, 0.0)
    dlstream.axpy(1.0, x, t)
    assert (np.from_dlpack(t) == x).all()
    with pytest.raises(dlstream.InvalidArgumentError, match="one dtype"):
        dlstream.axpy(1.0, x, np.ones(6, np.float32))
    with pytest.raises(dlstream.InvalidArgumentError, match="as many elements"):
        dlstream.axpy(1.0, x, np.ones(5))
    with pytest.raises(dlstream.InvalidArgumentError, match="float32 or float64"):
        dlstream.axpy(1.0, np.ones(3, np.int32), np.ones(3, np.int32))
    with pytest.raises(dlstream.ArgumentTypeError, match="a=.x."):
        dlstream.axpy("x", x, y)
    t.close()
    settle()


def test_copy_strided(no_leaks):
    src = np.arange(24, dtype=np.int32).reshape(4, 6)
    dst = np.zeros((3, 3), np.int32)
    view = src[::-1, ::2][:3]
    dlstream.copy(dst, view)
    settle()
    assert (dst == view).all()
    with pytest.raises(dlstream.InvalidArgumentError, match="one shape"):
        dlstream.copy(dst, src)
    wide = np.zeros((3, 3), np.int64)
    dlstream.copy(wide, view)  # between dtypes: converted (NumPy's same_kind casting)
    settle()
    assert (wide == view).all()
    with pytest.raises(dlstream.InvalidArgumentError, match=r"copy\(dst int32, src float32\): an unsafe cast"):
        dlstream.copy(dst, view.astype(np.float32))
    settle()


def test_spin_and_errors(no_leaks):
    s = dlstream.Stream(CPU)
    dlstream.spin(0.001, stream=s)
    s.synchronize()
    dlstream.spin(0, device=CPU)
    with pytest.raises(dlstream.InvalidArgumentError, match="seconds"):
        dlstream.spin(-1)
    s.close()


def test_latch_holds_then_releases(no_leaks):
    s = dlstream.Stream(CPU)
    with dlstream.Latch(CPU) as latch:
        latch.wait(s, timeout=30)
        assert s.query() is False
        latch.open()
        s.synchronize()
        latch.check()
        assert not latch.timed_out and latch.device == "cpu:0"
    with pytest.raises(dlstream.InvalidHandleError, match="latch was closed"):
        latch.open()
    s.close()


def test_latch_timeout_is_reported(no_leaks):
    s = dlstream.Stream(CPU)
    latch = dlstream.Latch(CPU)
    latch.wait(s, timeout=0.01)
    s.synchronize()
    assert latch.timed_out
    with pytest.raises(dlstream.TimedOutError, match="timed out") as ei:
        latch.check()
    assert isinstance(ei.value, RuntimeError)
    with pytest.raises(dlstream.InvalidArgumentError, match="timeout"):
        latch.wait(s, timeout=0)
    latch.close()
    s.close()


def test_builtins_use_the_context_stream(no_leaks):
    s = dlstream.Stream(CPU)
    latch = dlstream.Latch(CPU)
    latch.wait(s)
    a = np.zeros(4, np.float32)
    t = dlstream.from_dlpack(a)
    with dlstream.use_stream(s):
        dlstream.fill(t, 9.0)
    assert (a == 0).all() and not s.query()
    latch.open()
    s.synchronize()
    assert (a == 9).all()
    for o in (t, latch, s):
        o.close()


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_builtins_on_empty_tensors_queue_nothing(dtype, no_leaks):
    """No element, no data pointer (NumPy's and dlstream's empty arrays may have none): nothing is queued, so no
    kernel is handed a null pointer (UndefinedBehaviorSanitizer in CI would stop at memset(NULL, ..., 0))."""
    t = dlstream.empty(0, dtype, device=CPU)
    a = np.zeros(0, dtype)
    dlstream.fill(t, 1)
    dlstream.fill(a, 1)
    dlstream.copy(t, a)
    if dtype == "float32":
        dlstream.axpy(2.0, a, t)
    settle()
    t.close()
