# SPDX-License-Identifier: Apache-2.0
"""Errors around DLPack producers, as the DLPack spec and NumPy have them: a capsule a call refuses runs its
deleter (Python code too) after the error is known and the call still raises its BufferError; a stream argument
of the wrong type is a TypeError on every device; copy=True takes every rank dlstream takes (32); a producer on a
device dlstream does not handle is a BufferError."""
import ctypes
import itertools

import numpy as np
import pytest

import dlstream
from conftest import CPU, HAVE_CUDA, needs_cuda, needs_torch_cuda, torch


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Versioned(ctypes.Structure):
    pass


class _Legacy(ctypes.Structure):
    pass


_DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Versioned))
_DELETER_L = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Legacy))
_Versioned._fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                       ("deleter", _DELETER_V), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]
_Legacy._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER_L)]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class PythonDeleterProducer:
    """A DLPack producer written in Python, deleter included (ctypes), whose tensor every consumer refuses: 40
    dimensions, more than DLPack validation takes. Its deleter counts its calls; Python code run while an
    exception is set fails, so a consumer that runs it before its own error is raised loses that error."""

    def __init__(self, versioned):
        self.versioned = versioned
        self.deleted = 0
        self.buf = np.zeros(4, np.float32)
        self.shape = (ctypes.c_int64 * 40)(*([4] + [1] * 39))
        dl = _DLTensor(self.buf.ctypes.data, _Device(1, 0), 40, _DType(2, 32, 1), self.shape, None, 0)
        if versioned:
            self.deleter = _DELETER_V(self._delete)
            self.managed = _Versioned(1, 1, None, self.deleter, 0, dl)
        else:
            self.deleter = _DELETER_L(self._delete)
            self.managed = _Legacy(dl, None, self.deleter)

    def _delete(self, _managed):
        self.deleted += 1

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        name = b"dltensor_versioned" if self.versioned else b"dltensor"
        return _capsule_new(ctypes.addressof(self.managed), name, None)


def _fill(p):
    dlstream.fill(p, 1.0)


def _axpy(p):
    dlstream.axpy(1.0, p, np.zeros(4, np.float32))


def _copy(p):
    dlstream.copy(np.zeros(4, np.float32), p)


def _launch(p):
    dlstream.builtin_function("dls_fill", CPU).launch(1, 1, p, 4, 4, 0)


def _from_dlpack(p):
    dlstream.from_dlpack(p)


CONSUMERS = {"fill": _fill, "axpy": _axpy, "copy": _copy, "launch": _launch, "from_dlpack": _from_dlpack}


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
def test_a_refused_capsule_runs_its_python_deleter_after_the_error_is_known(consumer, versioned):
    p = PythonDeleterProducer(versioned)
    with pytest.raises(dlstream.InvalidTensorError, match=r"ndim = 40 is out of range 0\.\.32") as ei:
        CONSUMERS[consumer](p)
    assert isinstance(ei.value, BufferError)
    assert p.deleted == 1, f"{consumer}: the producer's deleter ran {p.deleted} times"


@pytest.mark.parametrize("stream", [object(), "1", 1.5, [1], b"\x01"], ids=["object", "str", "float", "list", "bytes"])
def test_a_dlpack_stream_of_the_wrong_type_is_a_type_error_on_the_cpu(stream, no_leaks):
    t = dlstream.empty(4, "float32", device=CPU)
    with pytest.raises(TypeError, match=r"Tensor\.__dlpack__\(stream=.*\): a DLPack stream is an int or None"):
        t.__dlpack__(stream=stream)
    assert isinstance(np.from_dlpack(t), np.ndarray)  # nothing was left half-done
    t.close()


def test_a_dlpack_stream_int_a_cpu_consumer_cannot_pass_is_still_a_value_error(no_leaks):
    t = dlstream.empty(4, "float32", device=CPU)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"CPU consumers pass stream=None"):
        t.__dlpack__(stream=5)
    assert t.__dlpack__(stream=-1) is not None  # DLPack's "no synchronization"
    t.close()


@needs_cuda
@pytest.mark.parametrize("stream", [object(), "1", 1.5])
def test_a_dlpack_stream_of_the_wrong_type_is_a_type_error_on_cuda(stream, no_leaks):
    t = dlstream.empty(4, "float32", device="cuda:0")
    with pytest.raises(TypeError, match=r"a DLPack stream is an int or None"):
        t.__dlpack__(stream=stream)
    t.close()


def _strided(ndim):
    """A NumPy view of `ndim` dimensions of extent 2 whose strides merge nowhere (every axis steps over one
    element), filled with distinct values."""
    base = np.arange(3 ** ndim, dtype=np.float32).reshape((3,) * ndim)
    return base[(slice(None, None, 2),) * ndim]


@pytest.mark.parametrize("ndim", [9, 12, 16])
def test_copy_true_copies_views_of_more_than_8_dimensions(ndim, no_leaks):
    a = _strided(ndim)
    t = dlstream.from_dlpack(a)
    c = dlstream.from_dlpack(t.__dlpack__(copy=True))
    got = np.from_dlpack(c)
    assert got.shape == a.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got, a)
    c.close()
    t.close()


@pytest.mark.parametrize("ndim", [9, 32])
def test_copy_true_takes_up_to_32_dimensions(ndim, no_leaks):
    shape = tuple(itertools.islice(itertools.cycle([2, 1, 3]), ndim))
    if ndim == 32:
        shape = (2, 3) + (1,) * 30  # 32 dimensions of a small tensor
    t = dlstream.empty(shape, "float64", device=CPU)
    src = np.from_dlpack(t)
    src[...] = np.arange(src.size, dtype=np.float64).reshape(shape)
    c = dlstream.from_dlpack(t.__dlpack__(copy=True))
    got = np.from_dlpack(c)
    np.testing.assert_array_equal(got, src)
    src[...] = -1  # a private copy
    assert (got >= 0).all()
    c.close()
    t.close()


def test_copy_true_of_a_broadcast_view(no_leaks):
    a = np.broadcast_to(np.arange(2, dtype=np.int32).reshape((1,) * 9 + (2,)), (2,) * 10)
    t = dlstream.from_dlpack(a)
    c = dlstream.from_dlpack(t.__dlpack__(copy=True))
    np.testing.assert_array_equal(np.from_dlpack(c), a)
    c.close()
    t.close()


@needs_torch_cuda
def test_copy_true_of_a_cuda_view_of_more_than_8_dimensions(no_leaks):
    base = torch.arange(3 ** 10, dtype=torch.float32, device="cuda").reshape((3,) * 10)
    view = base[(slice(None, None, 2),) * 10]  # strides that merge nowhere: the copy is walked in blocks
    t = dlstream.from_dlpack(view)
    c = torch.from_dlpack(dlstream.from_dlpack(t.__dlpack__(copy=True)))
    assert c.is_contiguous() and torch.equal(c, view)
    t.close()


class _OnDevice:
    def __init__(self, device_type):
        self.device_type = device_type
        self.called = False

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, **kw):
        self.called = True
        return np.ones(3, np.float32).__dlpack__()


@pytest.mark.parametrize("device_type", [4, 7, 12, 14, 99])
def test_from_dlpack_of_an_unsupported_device_is_a_buffer_error(device_type, no_leaks):
    obj = _OnDevice(device_type)
    with pytest.raises(BufferError, match=rf"from_dlpack\(obj=.*\): DLPack device type {device_type} .*not "
                                          r"supported.*kDLCPU"):
        dlstream.from_dlpack(obj)
    assert not obj.called, "the producer was asked for a capsule dlstream cannot take"


def test_from_dlpack_of_a_supported_device_without_a_backend_says_why():
    if HAVE_CUDA:
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(dlstream.UnavailableError, match=r"cuda backend unavailable"):
        dlstream.from_dlpack(_OnDevice(2))
