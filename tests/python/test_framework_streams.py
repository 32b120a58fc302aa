# SPDX-License-Identifier: Apache-2.0
"""Which stream a call runs on when its first tensor comes from a framework without the DLPack C exchange API
(a registered stream provider, a version-3 __cuda_array_interface__) or from dlstream itself, on the CPU backend
with pure-Python fake frameworks. Each ordering test holds the expected stream with a latch and has a negative
control that shows the check can fail."""
import ctypes
import sys

import numpy as np
import pytest

import dlstream
from conftest import CPU, settle
from conftest import held as conftest_held

TIMEOUT = 20.0


class FakeArray:
    """A framework array without the exchange API: __dlpack__ and __dlpack_device__ over a NumPy array."""
    __module__ = "fakefw.core"

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        assert stream is None, "host memory is exchanged with stream=None"
        return self.a.__dlpack__(max_version=max_version) if max_version else self.a.__dlpack__()

    def __dlpack_device__(self):
        return (dlstream.kDLCPU, 0)


class CaiArray:
    """A __cuda_array_interface__ producer over host memory. The interface is CUDA's; the CPU backend reads it
    the same way when the object says (through __dlpack_device__) that its memory is host memory."""

    def __init__(self, a, stream=None, version=3, readonly=False, **extra):
        self.a = a
        self.reads = 0
        self.iface = {"shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, readonly),
                      "version": version, "strides": None if a.flags.c_contiguous else a.strides}
        if stream is not None or version >= 3:
            self.iface["stream"] = stream
        self.iface.update(extra)

    @property
    def __cuda_array_interface__(self):
        self.reads += 1
        return self.iface

    def __dlpack_device__(self):
        return (dlstream.kDLCPU, 0)


def held(stream):
    return conftest_held(stream, timeout=TIMEOUT)


def finish(latch, *streams):
    latch.open()
    for s in streams:
        s.synchronize()
    latch.check()
    latch.close()


@pytest.fixture
def providers():
    """Registrations made by a test are removed after it."""
    before = dlstream._dlstream._stream_providers()
    yield dlstream.register_stream_provider
    now = dlstream._dlstream._stream_providers()
    for key in now:
        if key not in before:
            dlstream.register_stream_provider(key, None)
    for key, fn in before.items():
        dlstream.register_stream_provider(key, fn)


def fill_runs_on(target, make_arg, **kw):
    """Fills a fresh array through make_arg(array) while `target` is held; True when the fill waited for it."""
    a = np.zeros(8, np.float32)
    latch = held(target)
    dlstream.fill(make_arg(a), 5.0, **kw)
    dlstream.Stream.legacy(CPU).synchronize()
    untouched = bool((a == 0).all())
    finish(latch, target, dlstream.Stream.legacy(CPU))
    assert (a == 5).all()
    settle()
    return untouched


# ---- registered stream providers ----

def test_provider_by_type_decides_with_negative_control(providers, no_leaks):
    s = dlstream.Stream(CPU)
    says = {"stream": s}
    providers(FakeArray, lambda arr: says["stream"])
    assert fill_runs_on(s, FakeArray), "the fill runs on the provider's stream, behind the latch"
    says["stream"] = None  # no opinion: the legacy default stream
    assert not fill_runs_on(s, FakeArray), "negative control: without the provider the fill does not wait"
    assert fill_runs_on(s, FakeArray, stream=s)
    s.close()
    dlstream._dlstream._clear_caches()


def test_provider_by_module_name_and_its_parents(providers, no_leaks):
    s = dlstream.Stream(CPU)
    providers("fakefw", lambda arr: s)
    assert fill_runs_on(s, FakeArray)
    providers("fakefw.core", lambda arr: None)  # the longer name wins
    assert not fill_runs_on(s, FakeArray)
    providers("fakefw.core", None)
    assert fill_runs_on(s, FakeArray)
    s.close()
    dlstream._dlstream._clear_caches()


def test_provider_results_of_every_kind(providers, no_leaks):
    s = dlstream.Stream(CPU)

    class CudaStreamLike:
        def __cuda_stream__(self):
            return (0, s.ptr)

    for result in (s, s.ptr, CudaStreamLike()):
        providers(FakeArray, lambda arr, r=result: r)
        assert fill_runs_on(s, FakeArray), result
    s.close()
    dlstream._dlstream._clear_caches()


def test_providers_are_cached_per_type(providers, no_leaks):
    calls = []
    s = dlstream.Stream(CPU)
    providers(FakeArray, lambda arr: calls.append(1) or s)
    a = np.zeros(4, np.float32)
    dlstream._dlstream._clear_caches()
    for _ in range(5):
        dlstream.fill(FakeArray(a), 1.0)
    assert len(calls) == 5, "the provider is asked at every call (the current stream changes)"
    assert dlstream._dlstream._cache_sizes()["types"] == 1, "its lookup is made once per type"
    s.synchronize()
    providers(FakeArray, lambda arr: None)  # a new registration applies at once
    dlstream.fill(FakeArray(a), 2.0)
    dlstream.Stream.legacy(CPU).synchronize()
    assert (a == 2).all() and len(calls) == 5
    s.close()
    dlstream._dlstream._clear_caches()


def test_bad_providers_and_results(providers, no_leaks):
    a = np.zeros(4, np.float32)
    providers(FakeArray, lambda arr: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        dlstream.fill(FakeArray(a), 1.0)
    providers(FakeArray, lambda arr: "a stream?")
    with pytest.raises(dlstream.ArgumentTypeError, match="stream provider's result for args\\[0\\]"):
        dlstream.fill(FakeArray(a), 1.0)
    providers(FakeArray, lambda arr: 5)
    with pytest.raises(dlstream.InvalidArgumentError, match="not a stream: values below 4096"):
        dlstream.fill(FakeArray(a), 1.0)
    providers(FakeArray, lambda arr: -1)
    with pytest.raises(dlstream.InvalidArgumentError, match="never negative"):
        dlstream.fill(FakeArray(a), 1.0)
    with pytest.raises(dlstream.ArgumentTypeError, match="expected a type or a module name"):
        dlstream.register_stream_provider(3, print)
    with pytest.raises(dlstream.ArgumentTypeError, match="callable"):
        dlstream.register_stream_provider(FakeArray, 3)
    with pytest.raises(dlstream.InvalidArgumentError, match="empty"):
        dlstream.register_stream_provider("", print)
    assert (a == 0).all()
    dlstream._dlstream._clear_caches()


def test_exchange_api_types_keep_their_fast_path(providers, fx, no_leaks):
    """A type with the DLPack C exchange API asks current_work_stream; a provider registered for it is not used."""
    s = dlstream.Stream(CPU)
    providers(fx.FakeTensor, lambda t: (_ for _ in ()).throw(AssertionError("not called")))
    fx.set_current_stream(s.ptr)
    assert fill_runs_on(s, lambda a: fx.FakeTensor(a, a.ctypes.data, a.shape))
    fx.set_current_stream(0)
    s.close()
    dlstream._dlstream._clear_caches()


def test_builtin_providers_are_registered():
    got = dlstream._dlstream._stream_providers()
    assert {"cupy", "torch"} <= set(got)
    assert "cupy" not in sys.modules or True  # registering by name imports nothing


# ---- __cuda_array_interface__ ----

def test_cai_stream_decides_with_negative_control(no_leaks):
    s = dlstream.Stream(CPU)
    assert fill_runs_on(s, lambda a: CaiArray(a, stream=s.ptr)), "runs on the interface's stream"
    assert not fill_runs_on(s, lambda a: CaiArray(a, stream=None)), "negative control: no stream, legacy"
    s.close()
    dlstream._dlstream._clear_caches()


def test_cai_producer_stream_is_waited_on_with_negative_control(no_leaks, foreign_record_off):
    """The producer p (held) writes src; our copy on s reads it: s waits for p only when the interface says p (the
    record of foreign memory, which orders the two uses of src's memory by itself, is off)."""
    def run(says_p):
        p, s = dlstream.Stream(CPU), dlstream.Stream(CPU)
        src, out = np.zeros(4, np.float32), np.zeros(4, np.float32)
        latch = held(p)
        dlstream.fill(src, 1.0, stream=p)  # behind the latch
        dlstream.copy(out, CaiArray(src, stream=p.ptr if says_p else None), stream=s)
        if says_p:
            assert s.query() is False, "s waits for the producer's stream"
        s.synchronize() if not says_p else None
        early = out.copy()
        finish(latch, p, s)
        for o in (p, s):
            o.close()
        settle()
        return early, out

    assert (run(True)[1] == 1).all()
    assert (run(False)[0] == 0).all(), "negative control: without the stream the copy reads before p writes"
    dlstream._dlstream._clear_caches()


def test_cai_object_is_held_until_the_stream_passes(no_leaks):
    p, s = dlstream.Stream(CPU), dlstream.Stream(CPU)
    a = np.zeros(4, np.float32)
    arr = CaiArray(a, stream=p.ptr)
    latch = held(s)
    base = sys.getrefcount(arr)
    dlstream.fill(arr, 3.0, stream=s)
    assert sys.getrefcount(arr) == base + 1, "held while s may still write it"
    finish(latch, s, p)
    settle()
    assert sys.getrefcount(arr) == base and (a == 3).all()
    for o in (p, s):
        o.close()
    dlstream._dlstream._clear_caches()


def test_cai_same_stream_holds_nothing(no_leaks):
    s = dlstream.Stream(CPU)
    a = np.zeros(4, np.float32)
    arr = CaiArray(a, stream=s.ptr)
    base = sys.getrefcount(arr)
    dlstream.fill(arr, 3.0)
    assert sys.getrefcount(arr) == base and dlstream._dlstream._deferred_pending() == 0
    s.synchronize()
    # Host memory decides only when no argument lives on a device: a second look at the first argument.
    assert (a == 3).all() and arr.reads <= 2
    s.close()
    dlstream._dlstream._clear_caches()


def test_cai_strided_and_read_only(no_leaks):
    a = np.zeros((4, 6), np.float64)
    dlstream.fill(CaiArray(a[:, ::2].copy()), 1.0)
    view = CaiArray(a[:, ::2])
    assert view.iface["strides"] == (48, 16)
    src = np.arange(12, dtype=np.float64).reshape(4, 3)
    dlstream.copy(view, CaiArray(src, readonly=True))
    dlstream.Stream.legacy(CPU).synchronize()
    assert (a[:, ::2] == src).all() and (a[:, 1::2] == 0).all()
    with pytest.raises(dlstream.ReadOnlyError, match="read-only"):
        dlstream.fill(CaiArray(a, readonly=True), 1.0)


@pytest.mark.parametrize("extra, exc, text", [
    ({"mask": object()}, dlstream.NotSupportedError, "masked arrays are not supported"),
    ({"version": 4}, dlstream.VersionError, "versions 0 to 3"),
    ({"version": 2, "stream": 12345}, dlstream.VersionError, "streams came with version 3"),
    ({"stream": 0}, dlstream.InvalidArgumentError, r"\['stream'\] = 0 is not a stream"),
    ({"stream": -1}, dlstream.InvalidArgumentError, "is not a stream"),
    ({"stream": True}, dlstream.InvalidArgumentError, "is not a stream"),
    ({"stream": 5}, dlstream.InvalidArgumentError, "no streams for host memory|no stream has this value"),
    ({"typestr": ">f4"}, dlstream.NotSupportedError, "big-endian"),
    ({"typestr": "|O8"}, dlstream.NotSupportedError, "dlstream reads bool"),
    ({"typestr": 4}, dlstream.InvalidTensorError, "not a string"),
    ({"typestr": "<f"}, dlstream.InvalidTensorError, "not a type string"),
    ({"data": 1234}, dlstream.InvalidTensorError, r"\(pointer, read_only\)"),
    ({"data": (-8, False)}, dlstream.InvalidTensorError, r"\(pointer, read_only\)"),
    ({"shape": [4]}, dlstream.InvalidTensorError, "not a tuple of ints"),
    ({"shape": (-4,)}, dlstream.InvalidTensorError, "not an int >= 0"),
    ({"strides": (3,)}, dlstream.NotSupportedError, "not a multiple of the 4-byte element"),
    ({"strides": (4, 4)}, dlstream.InvalidTensorError, "2 strides for 1 dimensions"),
    ({"data": (0, False)}, dlstream.InvalidTensorError, "data is NULL"),
])
def test_cai_refusals(extra, exc, text, no_leaks):
    a = np.zeros(4, np.float32)
    arr = CaiArray(a, **extra)
    with pytest.raises(exc, match=text) as ei:
        dlstream.fill(arr, 1.0, stream=dlstream.Stream.legacy(CPU))
    assert "fill(args[0])" in str(ei.value) or "fill" in str(ei.value)
    with pytest.raises(exc, match=text):
        dlstream.fill(arr, 1.0)  # as the first argument deciding the stream too
    assert (a == 0).all()
    settle()


def test_cai_not_a_dict_and_missing_keys(no_leaks):
    a = np.zeros(4, np.float32)
    arr = CaiArray(a)
    arr.iface = [1, 2]
    with pytest.raises(dlstream.InvalidTensorError, match="not a dict"):
        dlstream.fill(arr, 1.0)
    arr.iface = {"version": 3, "shape": (4,), "typestr": "<f4"}
    with pytest.raises(dlstream.InvalidTensorError, match="lacks 'data'"):
        dlstream.fill(arr, 1.0)


def test_cai_without_stream_and_with_dlpack_uses_the_handshake(no_leaks):
    """A version-2 interface carries no stream: when the object also has __dlpack__ the handshake orders it, and
    its type's interface is not read again."""
    class Both(CaiArray):
        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            self.dlpack_calls = getattr(self, "dlpack_calls", 0) + 1
            return self.a.__dlpack__()

    a = np.zeros(4, np.float32)
    b = Both(a, version=2)
    dlstream.fill(b, 1.0)
    dlstream.fill(b, 2.0)
    dlstream.Stream.legacy(CPU).synchronize()
    assert (a == 2).all() and b.dlpack_calls == 2 and b.reads == 1
    dlstream._dlstream._clear_caches()


# ---- tensors dlstream owns ----

def _host_view(t):
    """The memory of a CPU dlstream tensor, read without any synchronization."""
    return np.ctypeslib.as_array((ctypes.c_float * t.size).from_address(t.data_ptr))


def test_own_tensor_runs_on_its_allocation_stream_with_negative_control(no_leaks):
    s = dlstream.Stream(CPU)
    t = dlstream.empty(8, "float32", device=CPU, stream=s)
    s.synchronize()
    view = _host_view(t)
    view[:] = 0
    legacy = dlstream.Stream.legacy(CPU)
    latch = held(s)
    dlstream.fill(t, 4.0)  # no stream=, no use_stream: t's allocation stream s
    legacy.synchronize()
    assert (view == 0).all(), "the fill waits on s, not on the legacy default stream"
    finish(latch, s)
    assert (view == 4).all()
    latch = held(s)
    dlstream.fill(t, 6.0, stream=legacy)  # negative control: another stream runs it ...
    assert legacy.query() is False, "on the legacy stream, the fill waits for s's work on t (the hazard rule)"
    assert (view == 4).all()
    finish(latch, s)
    legacy.synchronize()
    assert (view == 6).all()
    t.close()
    s.close()
    settle()


def test_own_tensor_whose_stream_was_closed(no_leaks):
    s = dlstream.Stream(CPU)
    t = dlstream.empty(8, "float32", device=CPU, stream=s)
    u = dlstream.empty(8, "float32", device=CPU, stream=s)
    s.close()  # the handle goes; the native stream lives while t's memory needs it
    dlstream.fill(t, 2.0)
    dlstream.axpy(1.0, t, u)
    dlstream.copy(u, t)  # all three ran on the closed stream, in order, through a handle made for the call
    assert (np.from_dlpack(u) == 2).all()  # the export makes the host wait for u's work
    assert (np.from_dlpack(t) == 2).all()
    u.close()
    t.close()
    settle()


def test_view_runs_on_its_producer_stream(no_leaks):
    s = dlstream.Stream(CPU)
    a = np.zeros(8, np.float32)
    v = dlstream.from_dlpack(a, stream=s)  # produced on s
    latch = held(s)
    dlstream.fill(v, 1.0)
    dlstream.Stream.legacy(CPU).synchronize()
    assert (a == 0).all()
    finish(latch, s)
    assert (a == 1).all()
    w = dlstream.from_dlpack(a)  # produced on the legacy default stream
    latch = held(s)
    dlstream.fill(w, 2.0)
    dlstream.Stream.legacy(CPU).synchronize()
    assert (a == 2).all(), "negative control"
    finish(latch, s)
    for o in (v, w, s):
        o.close()
    settle()


def test_first_own_tensor_decides_over_later_arguments(no_leaks):
    s = dlstream.Stream(CPU)
    x = dlstream.empty(8, "float32", device=CPU, stream=s)
    dlstream.fill(x, 1.0)
    y = np.zeros(8, np.float32)
    latch = held(s)
    dlstream.axpy(2.0, x, FakeArray(y))
    dlstream.Stream.legacy(CPU).synchronize()
    assert (y == 0).all()
    finish(latch, s)
    assert (y == 2).all()
    x.close()
    s.close()
    settle()
