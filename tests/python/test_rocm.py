# SPDX-License-Identifier: Apache-2.0
"""ROCm from Python without an AMD GPU: devices 'rocm', 'rocm:N' and kDLROCM are accepted everywhere devices are;
DLPack's ROCm stream values; torch's ROCm builds (torch.version.hip set) name HIP devices and streams 'cuda'. What
needs a device fails cleanly with the backend's reason; what needs none is checked here."""
import sys
import types

import pytest

import dlstream

ROCM = dlstream.backend_available("rocm")[0]


@pytest.mark.parametrize("spelling", ["rocm", "rocm:0", "rocm:3", "hip:2", ("rocm", 1), (dlstream.kDLROCM, 2),
                                      (10, 0)])
def test_rocm_device_spellings(spelling):
    """Stream(), empty() and device_count() take every spelling; without ROCm they say why."""
    assert dlstream.device_count("rocm") >= 0
    ok, why = dlstream.backend_available(spelling)
    assert ok == ROCM and (ok or why)
    if not ROCM:
        with pytest.raises(dlstream.UnavailableError, match="rocm|hip|HIP") as ei:
            dlstream.Stream(spelling)
        assert "Stream" in str(ei.value)
        with pytest.raises(dlstream.UnavailableError):
            dlstream.empty(4, device=spelling)


def test_kdlrocm_constant():
    assert dlstream.kDLROCM == 10


@pytest.mark.parametrize("value", [3, 5, 4095, -2, -2**63, 2**63, 2**64 - 1])
def test_rocm_stream_values_that_cannot_be_streams(value):
    with pytest.raises(dlstream.InvalidArgumentError, match="not a stream"):
        dlstream.Stream.wrap(value, device="rocm:0")


@pytest.mark.skipif(ROCM, reason="checks the clean failure of a device call without ROCm")
def test_rocm_pointer_without_the_backend_fails_cleanly():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = libc.mmap(None, 4096, 0, 0x22, -1, 0)  # PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS: nothing can be read there
    assert page not in (None, ctypes.c_void_p(-1).value)
    try:
        with pytest.raises(dlstream.InvalidArgumentError, match="cannot read memory there"):
            dlstream.Stream.wrap(page, device="rocm:0")
    finally:
        libc.munmap(page, 4096)
    buf = ctypes.create_string_buffer(64)
    with pytest.raises(dlstream.UnavailableError):
        dlstream.Stream.wrap(ctypes.addressof(buf), device="rocm:0")


class _FakeTorchDevice:
    """torch.device as a ROCm build of torch makes it: type 'cuda'."""
    __module__ = "torch"

    def __init__(self, index):
        self.type = "cuda"
        self.index = index


class _FakeTorchStream:
    """torch.cuda.Stream of a ROCm build: a hipStream_t through __cuda_stream__ and cuda_stream."""
    __module__ = "torch.cuda.streams"

    def __init__(self, ptr, index):
        self.cuda_stream = ptr
        self.device_index = index
        self.device = _FakeTorchDevice(index)

    def __cuda_stream__(self):
        return (0, self.cuda_stream)


@pytest.fixture
def torch_build(monkeypatch):
    """A stand-in `torch` module whose version says ROCm (or CUDA), when the real torch is not imported."""
    if "torch" in sys.modules and not isinstance(sys.modules["torch"], types.SimpleNamespace):
        pytest.skip("the real torch is imported: its own build decides")

    def make(hip):
        monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(version=types.SimpleNamespace(hip=hip)))
    return make


def test_torch_rocm_device_is_a_rocm_device(torch_build):
    torch_build("6.2.41133")
    if ROCM:
        pytest.skip("with ROCm the stream is made; the parse is what is checked here")
    with pytest.raises(dlstream.UnavailableError, match="rocm|hip|HIP"):
        dlstream.Stream(_FakeTorchDevice(0))
    torch_build(None)  # a CUDA build: 'cuda' is CUDA
    if not dlstream.backend_available("cuda")[0]:
        with pytest.raises(dlstream.UnavailableError, match="cuda|CUDA"):
            dlstream.Stream(_FakeTorchDevice(0))


def test_torch_rocm_streams_wrap_on_rocm_devices(torch_build):
    """Stream.wrap(torch stream) of a ROCm build lands on rocm:N (refused cleanly here without ROCm)."""
    torch_build("6.2.41133")
    import ctypes
    buf = ctypes.create_string_buffer(64)  # a readable address: the stand-in's hipStream_t
    s = _FakeTorchStream(ctypes.addressof(buf), 1)
    if not ROCM:
        with pytest.raises(dlstream.UnavailableError, match="rocm:1"):
            dlstream.Stream.wrap(s)
    if ROCM:
        w = dlstream.Stream.wrap(_FakeTorchStream(0, 0))
        assert w.kind == "legacy" and w.device == "rocm:0"
    else:
        with pytest.raises(dlstream.UnavailableError, match="rocm:0"):
            dlstream.Stream.wrap(_FakeTorchStream(0, 0))
    with pytest.raises(dlstream.InvalidArgumentError, match="not a stream"):
        dlstream.Stream.wrap(_FakeTorchStream(7, 0))


def test_dlpack_values_on_rocm_are_documented_in_c():
    """None and 0 name the default stream, 1 and 2 are refused, others are pointers: the C suite
    (dlpack_stream/rocm_*) checks dls_dlpack_stream_from_value, which Tensor.__dlpack__ uses."""
    if ROCM:
        t = dlstream.empty(4, device="rocm:0")
        for bad in (1, 2, 5):
            with pytest.raises(dlstream.InvalidArgumentError):
                t.__dlpack__(stream=bad)
        for good in (None, 0, -1):
            t.__dlpack__(stream=good)
        t.close()
