# SPDX-License-Identifier: Apache-2.0
"""dlstream.Tensor, empty, from_dlpack and __dlpack__: round trips with NumPy 2, capsule names, deleters."""
import sys

import numpy as np
import pytest

import dlstream
from conftest import CPU, settle


def test_empty_and_properties(no_leaks):
    t = dlstream.empty((2, 3), "float64", device=CPU)
    assert t.shape == (2, 3) and t.strides == (3, 1) and t.ndim == 2
    assert t.dtype == "float64" and t.device == "cpu:0" and t.size == 6 and t.itemsize == 8 and t.nbytes == 48
    assert t.data_ptr != 0 and not t.read_only and "float64" in repr(t)
    assert t.__dlpack_device__() == (dlstream.kDLCPU, 0)
    t.close()
    assert t.closed and "released" in repr(t)
    with pytest.raises(dlstream.InvalidHandleError, match="released"):
        t.shape
    with pytest.raises(TypeError):
        dlstream.Tensor()


@pytest.mark.parametrize("dtype", ["float32", np.float64, np.dtype("int16"), "uint8", "bool", "complex64", int, float])
def test_empty_dtypes(dtype, no_leaks):
    t = dlstream.empty(4, dtype, device=CPU)
    assert t.dtype == np.dtype(dtype).name
    t.close()


def test_empty_errors():
    with pytest.raises(dlstream.InvalidArgumentError, match="unknown dtype"):
        dlstream.empty(3, "float8x")
    with pytest.raises(TypeError, match="shape"):
        dlstream.empty("abc", device=CPU)
    with pytest.raises(dlstream.InvalidArgumentError, match="negative dimensions are not allowed"):
        dlstream.empty((-1,), device=CPU)
    with pytest.raises(TypeError):
        dlstream.empty()


def test_numpy_round_trip_versioned(no_leaks):
    t = dlstream.empty((3, 4), "float32", device=CPU)
    dlstream.fill(t, 1.5)
    a = np.from_dlpack(t)  # NumPy 2 asks for max_version (1, x): a versioned capsule; host sync inside
    assert a.shape == (3, 4) and a.dtype == np.float32 and (a == 1.5).all()
    a[0, 0] = 7  # shared memory
    b = dlstream.from_dlpack(a)
    assert b.shape == (3, 4) and np.from_dlpack(b)[0, 0] == 7
    del a
    t.close()
    b.close()


def test_capsule_names_and_consumption(no_leaks):
    t = dlstream.empty(4, "int32", device=CPU)
    cap = t.__dlpack__(max_version=(1, 1))
    assert "dltensor_versioned" in repr(cap)
    legacy = t.__dlpack__()
    assert '"dltensor"' in repr(legacy)
    v = dlstream.from_dlpack(cap)
    assert "used_dltensor_versioned" in repr(cap)
    with pytest.raises(dlstream.InvalidArgumentError, match="already consumed"):
        dlstream.from_dlpack(cap)
    w = dlstream.from_dlpack(legacy)
    assert "used_dltensor" in repr(legacy)
    del cap, legacy
    for o in (t, v, w):
        o.close()


def test_unconsumed_capsule_frees_its_export(no_leaks):
    t = dlstream.empty(4, "int32", device=CPU)
    caps = [t.__dlpack__(max_version=(1, 0)) for _ in range(10)]
    del caps
    t.close()


def test_dlpack_arguments():
    t = dlstream.empty(4, "float32", device=CPU)
    with pytest.raises(dlstream.InvalidArgumentError, match="CPU consumers pass stream=None"):
        t.__dlpack__(stream=5)
    t.__dlpack__(stream=-1, max_version=(1, 1))
    with pytest.raises(BufferError, match="exports only to the device"):
        t.__dlpack__(dl_device=(2, 0))
    t.__dlpack__(dl_device=(1, 0))
    with pytest.raises(TypeError):
        t.__dlpack__(max_version="1.0")
    with pytest.raises(TypeError):
        t.__dlpack__(bogus=1)
    t.close()


def test_copy_true_makes_a_private_copy(no_leaks):
    t = dlstream.empty(4, "float32", device=CPU)
    dlstream.fill(t, 2.0)
    a = np.from_dlpack(t, copy=True)
    a[:] = 5
    assert (np.from_dlpack(t) == 2.0).all()
    del a
    t.close()


def test_read_only_numpy_array(no_leaks):
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    t = dlstream.from_dlpack(a)
    assert t.read_only
    with pytest.raises(dlstream.ReadOnlyError):
        t.__dlpack__()  # legacy capsules cannot say read-only
    y = np.zeros(4, np.float32)
    dlstream.axpy(1.0, a, y)  # x is an input: fine
    settle()
    assert (y == a).all()
    with pytest.raises(dlstream.ReadOnlyError, match="read-only"):
        dlstream.fill(a, 1.0)
    t.close()


def test_from_dlpack_errors():
    with pytest.raises(TypeError, match="not a DLPack producer"):
        dlstream.from_dlpack(object())

    class Bad:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kw):
            return 42

    with pytest.raises(TypeError, match="not a PyCapsule"):
        dlstream.from_dlpack(Bad())

    class BadDevice:
        def __dlpack_device__(self):
            return "cpu"

        def __dlpack__(self, **kw):
            return None

    with pytest.raises(TypeError, match="__dlpack_device__"):
        dlstream.from_dlpack(BadDevice())


def test_legacy_producer_without_max_version(no_leaks):
    class Old:
        def __init__(self, arr):
            self.arr = arr

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

        def __dlpack__(self, stream=None):
            return self.arr.__dlpack__()  # a legacy "dltensor" capsule

    src = np.arange(3, dtype=np.int64)
    t = dlstream.from_dlpack(Old(src))
    assert t.shape == (3,) and t.dtype == "int64"
    t.close()


def test_deleter_runs_once_and_refcounts_return(no_leaks):
    a = np.arange(16, dtype=np.float32)
    base = sys.getrefcount(a)
    for _ in range(50):
        t = dlstream.from_dlpack(a)
        assert sys.getrefcount(a) > base
        t.close()
    settle()
    assert sys.getrefcount(a) == base


def test_record_stream(no_leaks):
    t = dlstream.empty(4, device=CPU)
    s = dlstream.Stream(CPU)
    t.record_stream(s)
    with pytest.raises(TypeError):
        t.record_stream()
    t.close()
    s.close()
