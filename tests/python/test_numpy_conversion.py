# SPDX-License-Identifier: Apache-2.0
"""A CPU tensor to NumPy: np.asarray(t), np.array(t) and t.numpy() read its values after its pending work, as
np.from_dlpack(t) does, with NumPy 2's __array__(dtype=None, copy=None) copy rules; a tensor NumPy cannot read
(another device) is a TypeError that says what to do instead, never a 0-d object array."""
import ctypes
import threading

import numpy as np
import pytest

import dlstream
from conftest import CPU, held, needs_cuda


def _tensor(values, dtype="float32"):
    t = dlstream.empty(len(values), dtype, device=CPU)
    np.from_dlpack(t)[:] = values
    return t


def test_asarray_and_numpy_view_the_tensor(no_leaks):
    t = _tensor([1, 2, 3])
    for a in (np.asarray(t), t.numpy(), np.asarray(t, dtype=np.float32), t.__array__(copy=False)):
        assert a.dtype == np.float32 and a.tolist() == [1.0, 2.0, 3.0]
        assert np.shares_memory(a, np.from_dlpack(t)), "a view: NumPy reads the tensor in place"
    t.close()


def test_array_and_copy_true_copy(no_leaks):
    t = _tensor([1, 2, 3])
    for a in (np.array(t), np.array(t, copy=True), t.__array__(copy=True)):
        assert a.tolist() == [1.0, 2.0, 3.0] and not np.shares_memory(a, np.from_dlpack(t))
    t.close()


def test_another_dtype_converts_unless_copy_false(no_leaks):
    t = _tensor([1.5, 2.5], "float64")
    a = np.asarray(t, dtype=np.int32)
    assert a.dtype == np.int32 and a.tolist() == [1, 2]
    with pytest.raises(ValueError, match=r"Tensor\.__array__\(dtype=int32, copy=False\): .*copy"):
        t.__array__(np.int32, copy=False)
    with pytest.raises(ValueError):
        np.array(t, dtype=np.int32, copy=False)
    t.close()


def test_shapes_and_empty_tensors(no_leaks):
    t = dlstream.empty((2, 0, 3), "int16", device=CPU)
    assert np.asarray(t).shape == (2, 0, 3) and t.numpy().dtype == np.int16
    t.close()
    t = dlstream.empty((), "float64", device=CPU)
    np.from_dlpack(t)[...] = 4.0
    assert np.asarray(t).shape == () and float(np.asarray(t)) == 4.0
    t.close()


def test_a_closed_tensor_is_an_invalid_handle():
    t = _tensor([1.0])
    t.close()
    with pytest.raises(dlstream.InvalidHandleError, match=r"Tensor\.__array__: the tensor was released"):
        np.asarray(t)
    with pytest.raises(dlstream.InvalidHandleError, match=r"Tensor\.numpy: the tensor was released"):
        t.numpy()


@pytest.mark.parametrize("convert", [np.asarray, np.array, lambda t: t.numpy()], ids=["asarray", "array", "numpy"])
def test_conversions_wait_for_the_tensors_pending_work(convert, no_leaks):
    s = dlstream.Stream(CPU)
    t = dlstream.empty(1 << 16, "float32", device=CPU, stream=s)
    dlstream.fill(t, 0.0, stream=s)
    s.synchronize()
    latch = held(s)
    dlstream.fill(t, 7.0, stream=s)  # queued behind the latch
    # Negative control: the same memory read without waiting (its raw address) still holds the old values.
    early = np.ctypeslib.as_array((ctypes.c_float * t.size).from_address(t.data_ptr)).copy()
    assert (early == 0.0).all(), "the fill ran before the latch opened: the test cannot see a missing wait"
    # The latch opens while the conversion waits (host waits let other threads run); a conversion that did not
    # wait would return before it opens, with the old values.
    opener = threading.Timer(0.05, latch.open)
    opener.start()
    got = np.array(convert(t), copy=True)
    opener.join()
    assert (got == 7.0).all(), "the conversion read the tensor before its pending fill ran"
    t.close()
    s.close()
    latch.close()


@needs_cuda
@pytest.mark.parametrize("convert", [np.asarray, lambda t: t.numpy()], ids=["asarray", "numpy"])
def test_a_gpu_tensor_is_a_type_error_naming_what_to_do(convert, no_leaks):
    t = dlstream.empty(4, "float32", device="cuda:0")
    with pytest.raises(TypeError, match=r"on cuda:0.*host memory.*dlstream\.copy"):
        convert(t)
    t.close()
